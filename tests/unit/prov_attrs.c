/* prov_attrs.c - attributes of loom's own providers that applications
 * size themselves from, checked through fi_getinfo:
 *   - mem_tag_format: every tagged endpoint (shm RDM, tcp RDM and MSG)
 *     reports all 64 tag bits, unstructured (0xaaaa...).  Open MPI's ofi
 *     MTL counts the bits it may use from it, and found none at 0.
 *   - tx_attr->op_flags asked as defaults: FI_DELIVERY_COMPLETE is
 *     accepted (the engine honours it on every transmit call; Open MPI's
 *     ofi BTL asks for it) and given back, while a flag no provider here
 *     serves as a default (FI_FENCE) finds nothing.
 *   - capabilities (fabtests' fi_getinfo_test checks the same): a transmit
 *     or receive context holds only caps of its direction (man
 *     fi_endpoint; FI_LOCAL_COMM and FI_REMOTE_COMM are the domain's) and
 *     only caps the endpoint has; primaries not asked for are absent; a
 *     request nothing serves is -FI_ENODATA.
 *   - mr_mode: every combination of mode bits an application may accept
 *     is served (util's registration works with or without virtual
 *     addresses and provider keys), and the answer never needs a bit the
 *     application did not offer; 0 is answered with 0.
 *   - tcp's source address is filled in without a node, from the chosen
 *     interface (port 0) or the FI_SOURCE service.
 *   - the receive capabilities of API 2.0: FI_TAGGED_DIRECTED_RECV and
 *     FI_EXACT_DIRECTED_RECV on RDM endpoints (primary: reported when
 *     asked for; exact directed receive, which refuses FI_ADDR_UNSPEC
 *     receives, not even to a caller asking for everything),
 *     FI_TAGGED_MULTI_RECV on every tagged endpoint (secondary: reported
 *     unasked); none of them to a caller of API 1.x that did not ask for
 *     it, and FI_EXACT_DIRECTED_RECV's bit, 1.x's FI_VARIABLE_MSG, never
 *     to one. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "check.h"
#include "provs.h"

#define TAG_ALL 0xaaaaaaaaaaaaaaaaULL

#define V2_CAPS (FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_EXACT_DIRECTED_RECV)

/* man fi_endpoint: the capabilities that apply to each direction. */
#define TX_CAPS                                                                          \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |        \
	 FI_HMEM | FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM |                  \
	 FI_NAMED_RX_CTX | FI_COLLECTIVE)
#define RX_CAPS                                                                          \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE |    \
	 FI_RECV | FI_HMEM | FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV |               \
	 FI_VARIABLE_MSG | FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR |    \
	 FI_COLLECTIVE | V2_CAPS)
#define PRIMARY_CAPS                                                                     \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_NAMED_RX_CTX |      \
	 FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_HMEM | FI_COLLECTIVE |                  \
	 FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV)

static struct fi_info *hints_for(const char *prov, enum fi_ep_type type, uint64_t op_flags)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = FI_TAGGED;
	h->ep_attr->type = type;
	h->tx_attr->op_flags = op_flags;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static void check_prov(const char *prov, enum fi_ep_type type)
{
	struct fi_info *h, *info = NULL, *i;
	int n;

	h = hints_for(prov, type, 0);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	n = 0;
	for (i = info; i; i = i->next, n++)
		CHECK_HEX(i->ep_attr->mem_tag_format, TAG_ALL);
	CHECK(n > 0);
	fi_freeinfo(info);
	fi_freeinfo(h);

	h = hints_for(prov, type, FI_DELIVERY_COMPLETE);
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	n = 0;
	for (i = info; i; i = i->next, n++)
		CHECK(i->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
	CHECK(n > 0);
	fi_freeinfo(info);
	fi_freeinfo(h);

	h = hints_for(prov, type, FI_FENCE);
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), -FI_ENODATA);
	CHECK(info == NULL);
	fi_freeinfo(h);
}

static struct fi_info *bare_hints(const char *prov, enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo();

	h->mode = ~0ULL;
	h->ep_attr->type = type;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* The contexts of one answer: their direction's caps only, the endpoint's
 * only; asked is the primary caps requested (0: none, no narrowing). */
static void check_ctx_caps(const struct fi_info *i, uint64_t asked)
{
	CHECK_HEX(i->tx_attr->caps & ~TX_CAPS, 0);
	CHECK_HEX(i->rx_attr->caps & ~RX_CAPS, 0);
	CHECK_HEX(i->tx_attr->caps & ~i->caps, 0);
	CHECK_HEX(i->rx_attr->caps & ~i->caps, 0);
	if (!asked)
		return;
	CHECK_HEX(i->caps & PRIMARY_CAPS & ~asked, 0);
	CHECK_HEX(i->caps & asked, asked);
	CHECK_HEX(i->tx_attr->caps & asked & TX_CAPS, asked & TX_CAPS);
	CHECK_HEX(i->rx_attr->caps & asked & RX_CAPS, asked & RX_CAPS);
}

static void check_caps(const char *prov, enum fi_ep_type type)
{
	static const uint64_t primaries[] = {FI_MSG, FI_TAGGED, FI_RMA, FI_ATOMIC,
	                                     FI_DIRECTED_RECV};
	struct fi_info *h, *info = NULL, *i;
	int served = 0;

	/* No hints: everything the provider has, contexts included. */
	setenv("FI_PROVIDER", prov, 1);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info), 0);
	unsetenv("FI_PROVIDER");
	for (i = info; i; i = i->next)
		check_ctx_caps(i, 0);
	CHECK(info != NULL);
	fi_freeinfo(info);

	for (unsigned m = 1; m < 1u << 5; m++) {
		uint64_t asked = 0;
		int ret;

		for (unsigned b = 0; b < 5; b++)
			if (m & (1u << b))
				asked |= primaries[b];
		h = bare_hints(prov, type);
		h->caps = asked;
		info = NULL;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
		if (ret)
			CHECK_INT(ret, -FI_ENODATA); /* not served: nothing else */
		else
			served++;
		for (i = info; i; i = i->next)
			check_ctx_caps(i, asked);
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
	CHECK(served > 0);

	h = bare_hints(prov, type);
	h->caps = FI_MSG | FI_MULTICAST; /* no provider here multicasts */
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);
}

/* fi_getinfo(version, hints asking caps and rx_caps) on prov: -FI_ENODATA
 * when want_none, else every answer's caps hold exactly `have` of
 * V2_CAPS, and so does its rx_attr unless rx_caps narrowed it. */
static void check_v2(const char *prov, enum fi_ep_type type, uint32_t version,
                     uint64_t caps, uint64_t rx_caps, bool want_none, uint64_t have)
{
	struct fi_info *h = bare_hints(prov, type), *info = NULL, *i;
	int ret;

	h->caps = caps;
	h->rx_attr->caps = rx_caps;
	ret = fi_getinfo(version, NULL, NULL, 0, h, &info);
	if (want_none) {
		if (ret != -FI_ENODATA)
			fprintf(stderr, "%s type %d version %#x caps %#llx rx %#llx\n",
			        prov, type, version, (unsigned long long)caps,
			        (unsigned long long)rx_caps);
		CHECK_INT(ret, -FI_ENODATA);
	} else {
		CHECK_INT(ret, 0);
		CHECK(info != NULL);
	}
	for (i = info; i; i = i->next) {
		CHECK_HEX(i->caps & V2_CAPS, have);
		/* Receive caps asked for narrow the context's to them and
		 * the secondaries. */
		if (rx_caps)
			CHECK_HEX(i->rx_attr->caps & V2_CAPS,
			          have & (rx_caps | FI_TAGGED_MULTI_RECV));
		else
			CHECK_HEX(i->rx_attr->caps & V2_CAPS, have);
		CHECK_HEX(i->tx_attr->caps & V2_CAPS, 0);
		CHECK_HEX(i->caps & caps, caps);
	}
	fi_freeinfo(info);
	fi_freeinfo(h);
}

static void check_v2_caps(const char *prov, enum fi_ep_type type)
{
	const uint32_t v1 = FI_VERSION(1, 17), v2 = FI_VERSION(2, 0);
	const uint64_t tdr = FI_TAGGED_DIRECTED_RECV, tmr = FI_TAGGED_MULTI_RECV;
	const uint64_t edr = FI_EXACT_DIRECTED_RECV;
	bool rdm = type == FI_EP_RDM;
	struct fi_info *info = NULL, *i;

	/* A caller asking for everything: the tagged ones, not exactness. */
	setenv("FI_PROVIDER", prov, 1);
	CHECK_INT(fi_getinfo(v2, NULL, NULL, 0, NULL, &info), 0);
	/* (Tagged multi-receive only where there are tagged messages: not
	 * on udp's DGRAM endpoints.) */
	for (i = info; i; i = i->next)
		CHECK_HEX(i->caps & V2_CAPS, i->ep_attr->type == FI_EP_RDM ? tdr | tmr
		                             : i->caps & FI_TAGGED       ? tmr
		                                                         : 0);
	fi_freeinfo(info);
	info = NULL;
	CHECK_INT(fi_getinfo(v1, NULL, NULL, 0, NULL, &info), 0);
	for (i = info; i; i = i->next)
		CHECK_HEX(i->caps & V2_CAPS, 0);
	fi_freeinfo(info);
	unsetenv("FI_PROVIDER");
	check_v2(prov, type, v2, 0, 0, false, rdm ? tdr | tmr : tmr);
	check_v2(prov, type, v1, 0, 0, false, 0);

	/* Primaries asked for; the secondary comes unasked from 2.0 on. */
	check_v2(prov, type, v2, FI_TAGGED, 0, false, tmr);
	check_v2(prov, type, v1, FI_TAGGED, 0, false, 0);
	check_v2(prov, type, v2, FI_TAGGED | tdr, 0, !rdm, tdr | tmr);
	check_v2(prov, type, v2, tdr, 0, !rdm, tdr | tmr);
	check_v2(prov, type, v2, FI_MSG | FI_TAGGED | edr, 0, !rdm, edr | tmr);
	check_v2(prov, type, v2, FI_MSG | FI_DIRECTED_RECV | edr, 0, !rdm, edr | tmr);
	check_v2(prov, type, v2, FI_TAGGED | tdr | edr, 0, !rdm, tdr | edr | tmr);
	check_v2(prov, type, v2, FI_TAGGED | tmr, 0, false, tmr);
	/* Asked in rx_attr only. */
	check_v2(prov, type, v2, 0, edr, !rdm, rdm ? tdr | tmr | edr : 0);
	/* API 1.x: what it asks for of the two tagged bits; never bit 48. */
	check_v2(prov, type, v1, FI_TAGGED | tdr, 0, !rdm, tdr);
	check_v2(prov, type, v1, FI_TAGGED | tmr, 0, false, tmr);
	check_v2(prov, type, v1, FI_MSG | FI_VARIABLE_MSG, 0, true, 0);
	check_v2(prov, type, v1, 0, FI_VARIABLE_MSG, true, 0);
}

static void check_mr_mode(const char *prov, enum fi_ep_type type)
{
	static const int bits[] = {FI_MR_LOCAL,     FI_MR_RAW,      FI_MR_VIRT_ADDR,
	                           FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY,
	                           FI_MR_RMA_EVENT, FI_MR_ENDPOINT};
	struct fi_info *h, *info, *i;

	for (unsigned m = 0; m < 1u << 8; m++) {
		int offered = 0;

		for (unsigned b = 0; b < 8; b++)
			if (m & (1u << b))
				offered |= bits[b];
		h = bare_hints(prov, type);
		h->caps = FI_MSG | FI_RMA;
		h->domain_attr->mr_mode = offered;
		info = NULL;
		CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
		for (i = info; i; i = i->next) {
			CHECK_HEX(i->domain_attr->mr_mode & ~offered, 0);
			/* What the engine prefers, where offered. */
			CHECK_HEX(i->domain_attr->mr_mode,
			          offered & (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY));
		}
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
}

/* tcp without a node: the source is the interface's address, port 0, or
 * the FI_SOURCE service's port. */
static void check_tcp_src(void)
{
	struct fi_info *h, *info = NULL, *i;

	setenv("FI_PROVIDER", "tcp", 1);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info), 0);
	for (i = info; i; i = i->next) {
		CHECK(i->src_addr != NULL);
		CHECK(i->src_addrlen >= sizeof(struct sockaddr_in));
	}
	fi_freeinfo(info);
	unsetenv("FI_PROVIDER");

	h = bare_hints("tcp", FI_EP_RDM);
	h->addr_format = FI_SOCKADDR_IN;
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, "4711", FI_SOURCE, h, &info), 0);
	for (i = info; i; i = i->next) {
		const struct sockaddr_in *sin = i->src_addr;

		CHECK_INT(i->src_addrlen, sizeof(*sin));
		if (sin) {
			CHECK_INT(sin->sin_family, AF_INET);
			CHECK_INT(ntohs(sin->sin_port), 4711);
			CHECK_HEX(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
		}
	}
	CHECK(info != NULL);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	unsetenv("FI_PROVIDER");
	for (size_t p = 0; p < TEST_NPROVS; p++) {
		for (const enum fi_ep_type *t = test_provs[p].types; *t; t++) {
			check_prov(test_provs[p].name, *t);
			check_caps(test_provs[p].name, *t);
			check_v2_caps(test_provs[p].name, *t);
			check_mr_mode(test_provs[p].name, *t);
		}
	}
	check_tcp_src();
	return check_done();
}
