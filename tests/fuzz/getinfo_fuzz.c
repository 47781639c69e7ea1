/* getinfo_fuzz.c - fuzz target for fi_getinfo's hints: every attribute
 * structure filled from the input (sizes and enums near and past their
 * limits, any bits), random src_addr/dest_addr bytes with the lengths
 * given, random node and service, flags and API versions.  The answer
 * must be a list of infos or a negative fi_errno (-FI_ENODATA when
 * nothing matches; -FI_EINVAL, -FI_EBADFLAGS, -FI_ENOSYS for hints or a
 * version fi_getinfo refuses), never a crash; every info answered must
 * survive fi_dupinfo, fi_tostr and fi_freeinfo, and (on some inputs) the
 * first one opens a fabric, domain and endpoint or is refused with an
 * fi_errno.  Everything is freed (LeakSanitizer checks).  Host names
 * come from a list the machine answers itself (random text goes with
 * FI_NUMERICHOST): no DNS query leaves the machine. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "reader.h"
#include "target.h"

static unsigned long runs, answered, refused[8];

static const char *const prov_names[] = {"shm",     "tcp",   "udp",     "tcp;ofi_rxm",
                                         "sockets", "SHM",   "shm;tcp", "",
                                         "verbs",   "shm;x", ";"};
/* Names the resolver answers from the machine itself: no DNS query. */
static const char *const nodes[] = {
    "127.0.0.1",    "localhost",           "::1",
    "0.0.0.0",      "127.0.0.2",           "",
    "fi_shm://1/2", "fi_ns://127.0.0.1:9", "fi_sockaddr_in://127.0.0.1:9"};
static const char *const services[] = {
    "0", "9228", "65535", "65536", "-1", "http", "", "1x", "99999999999999999999"};

/* len random bytes, as an address buffer of exactly that length. */
static void *addr_bytes(struct fz_reader *r, size_t *len)
{
	size_t n = fz_u8(r) % 140;
	uint8_t *b = n ? malloc(n) : NULL;

	for (size_t i = 0; i < n && b; i++)
		b[i] = fz_u8(r);
	/* Now and then a plausible one: an IPv4 or IPv6 loopback sockaddr. */
	if (b && n >= 16 && fz_below(r, 3) == 0) {
		b[0] = fz_below(r, 2) ? 2 : 10; /* AF_INET, AF_INET6 */
		b[1] = 0;
	}
	*len = b ? n : 0;
	return b;
}

static void *key_bytes(struct fz_reader *r, size_t *len)
{
	size_t n = fz_u8(r) % 40;
	uint8_t *b = n ? malloc(n) : NULL;

	for (size_t i = 0; i < n && b; i++)
		b[i] = fz_u8(r);
	*len = b ? n : 0;
	return b;
}

static void fill_tx(struct fz_reader *r, struct fi_tx_attr *t)
{
	t->caps = fz_flags(r, FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND);
	t->mode = fz_flags(r, FI_CONTEXT | FI_MSG_PREFIX);
	t->op_flags = fz_flags(r, FI_COMPLETION | FI_INJECT_COMPLETE);
	t->msg_order = fz_flags(r, 0);
	t->comp_order = fz_flags(r, 0);
	t->inject_size = fz_size(r);
	t->size = fz_size(r);
	t->iov_limit = fz_size(r);
	t->rma_iov_limit = fz_size(r);
	t->tclass = fz_u32(r);
}

static void fill_rx(struct fz_reader *r, struct fi_rx_attr *x)
{
	x->caps = fz_flags(r, FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_SOURCE);
	x->mode = fz_flags(r, FI_CONTEXT);
	x->op_flags = fz_flags(r, FI_MULTI_RECV | FI_COMPLETION);
	x->msg_order = fz_flags(r, 0);
	x->comp_order = fz_flags(r, 0);
	x->total_buffered_recv = fz_size(r);
	x->size = fz_size(r);
	x->iov_limit = fz_size(r);
}

static void fill_ep(struct fz_reader *r, struct fi_ep_attr *e)
{
	e->type =
	    fz_below(r, 4) ? (enum fi_ep_type)fz_below(r, 6) : (enum fi_ep_type)fz_u32(r);
	e->protocol = fz_below(r, 2) ? 0 : fz_u32(r);
	e->protocol_version = fz_u32(r);
	e->max_msg_size = fz_size(r);
	e->msg_prefix_size = fz_size(r);
	e->max_order_raw_size = fz_size(r);
	e->max_order_war_size = fz_size(r);
	e->max_order_waw_size = fz_size(r);
	e->mem_tag_format = fz_u64(r);
	e->tx_ctx_cnt = fz_below(r, 4) == 0 ? FI_SHARED_CONTEXT : fz_size(r);
	e->rx_ctx_cnt = fz_below(r, 4) == 0 ? FI_SHARED_CONTEXT : fz_size(r);
	if (fz_below(r, 4) == 0)
		e->auth_key = key_bytes(r, &e->auth_key_size);
}

static void fill_domain(struct fz_reader *r, struct fi_domain_attr *d)
{
	static const char *const names[] = {"shm", "tcp", "lo", "127.0.0.1", "eth0", ""};
	char buf[32];

	if (fz_below(r, 3) == 0)
		d->name = strdup(fz_str(r, buf, sizeof(buf), names, 6));
	d->threading = (enum fi_threading)(fz_below(r, 3) ? fz_below(r, 8) : fz_u32(r));
	d->control_progress = (enum fi_progress)fz_below(r, 5);
	d->data_progress = (enum fi_progress)fz_below(r, 5);
	d->resource_mgmt = (enum fi_resource_mgmt)fz_below(r, 4);
	d->av_type = (enum fi_av_type)(fz_below(r, 3) ? fz_below(r, 4) : fz_u32(r));
	d->mr_mode = (int)fz_flags(r, 0x7ff);
	d->mr_key_size = fz_size(r);
	d->cq_data_size = fz_size(r);
	d->cq_cnt = fz_size(r);
	d->ep_cnt = fz_size(r);
	d->tx_ctx_cnt = fz_size(r);
	d->rx_ctx_cnt = fz_size(r);
	d->max_ep_tx_ctx = fz_size(r);
	d->max_ep_rx_ctx = fz_size(r);
	d->max_ep_stx_ctx = fz_size(r);
	d->max_ep_srx_ctx = fz_size(r);
	d->cntr_cnt = fz_size(r);
	d->mr_iov_limit = fz_size(r);
	d->caps = fz_flags(r, FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV);
	d->mode = fz_flags(r, 0);
	if (fz_below(r, 4) == 0)
		d->auth_key = key_bytes(r, &d->auth_key_size);
	d->max_err_data = fz_size(r);
	d->mr_cnt = fz_size(r);
	d->tclass = fz_u32(r);
	d->max_ep_auth_key = fz_size(r);
	d->max_group_id = fz_u32(r);
	d->max_cntr_value = fz_u64(r);
	d->max_err_cntr_value = fz_u64(r);
}

static void fill_fabric(struct fz_reader *r, struct fi_fabric_attr *f)
{
	char buf[40];

	if (fz_below(r, 4))
		f->prov_name = strdup(fz_str(r, buf, sizeof(buf), prov_names,
		                             sizeof(prov_names) / sizeof(*prov_names)));
	if (fz_below(r, 4) == 0)
		f->name = strdup(fz_str(r, buf, sizeof(buf), NULL, 0));
	f->prov_version = fz_below(r, 2) ? 0 : fz_u32(r);
	f->api_version = fz_below(r, 2) ? 0 : fz_u32(r);
}

static struct fi_info *make_hints(struct fz_reader *r)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = fz_flags(r, FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV |
	                          FI_SOURCE | FI_DIRECTED_RECV | FI_NAMED_RX_CTX |
	                          FI_RMA_EVENT | FI_HMEM | FI_TRIGGER | FI_FENCE);
	h->mode = fz_flags(r, FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX | FI_RX_CQ_DATA);
	h->addr_format = fz_below(r, 3) ? fz_below(r, 16) : fz_u32(r);
	/* The attribute structures fi_allocinfo made, filled or dropped. */
	if (fz_below(r, 8) == 0) {
		free(h->tx_attr);
		h->tx_attr = NULL;
	} else {
		fill_tx(r, h->tx_attr);
	}
	if (fz_below(r, 8) == 0) {
		free(h->rx_attr);
		h->rx_attr = NULL;
	} else {
		fill_rx(r, h->rx_attr);
	}
	if (fz_below(r, 8) == 0) {
		free(h->ep_attr);
		h->ep_attr = NULL;
	} else {
		fill_ep(r, h->ep_attr);
	}
	if (fz_below(r, 8) == 0) {
		free(h->domain_attr);
		h->domain_attr = NULL;
	} else {
		fill_domain(r, h->domain_attr);
	}
	if (fz_below(r, 8) == 0) {
		free(h->fabric_attr);
		h->fabric_attr = NULL;
	} else {
		fill_fabric(r, h->fabric_attr);
	}
	if (fz_below(r, 3) == 0)
		h->src_addr = addr_bytes(r, &h->src_addrlen);
	if (fz_below(r, 3) == 0)
		h->dest_addr = addr_bytes(r, &h->dest_addrlen);
	return h;
}

static uint32_t pick_version(struct fz_reader *r)
{
	switch (fz_below(r, 4)) {
	case 0:
		return FI_VERSION(1, fz_below(r, 24));
	case 1:
		return FI_VERSION(2, fz_below(r, 9));
	case 2:
		return fz_u32(r);
	default:
		return FI_VERSION(1, 17);
	}
}

/* Open what the first info describes, and close it again. */
static void try_open(const struct fi_info *info)
{
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_ep *ep = NULL;

	if (FZ_CALL(fi_fabric(info->fabric_attr, &fab, NULL)))
		return;
	if (!FZ_CALL(fi_domain(fab, (struct fi_info *)info, &dom, NULL))) {
		if (!FZ_CALL(fi_endpoint(dom, (struct fi_info *)info, &ep, NULL)))
			FZ_CHECK(fi_close(&ep->fid) == 0, "closing the endpoint");
		FZ_CHECK(fi_close(&dom->fid) == 0, "closing the domain");
	}
	FZ_CHECK(fi_close(&fab->fid) == 0, "closing the fabric");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader r = {data, size};
	uint8_t how = fz_u8(&r);
	struct fi_info *hints = how % 8 ? make_hints(&r) : NULL;
	char nbuf[64], sbuf[32];
	const char *node = NULL, *service = NULL;
	uint64_t flags = 0;
	uint32_t version = pick_version(&r);
	struct fi_info *info = NULL;
	int ret;

	if (fz_below(&r, 3) == 0)
		node =
		    fz_str(&r, nbuf, sizeof(nbuf), nodes, sizeof(nodes) / sizeof(*nodes));
	if (fz_below(&r, 3) == 0)
		service = fz_str(&r, sbuf, sizeof(sbuf), services,
		                 sizeof(services) / sizeof(*services));
	switch (fz_below(&r, 6)) {
	case 0:
		flags = FI_SOURCE;
		break;
	case 1:
		flags = FI_NUMERICHOST;
		break;
	case 2:
		flags = FI_PROV_ATTR_ONLY;
		break;
	case 3:
		flags = fz_u64(&r);
		break;
	default:
		break;
	}
	/* Text of the input's own as node is taken as a numeric address
	 * only, so the resolver never asks DNS about it. */
	if (node == nbuf)
		flags |= FI_NUMERICHOST;
	runs++;
	ret = fi_getinfo(version, node, service, flags, hints, &info);
	FZ_CHECK(ret == 0 || ret == -FI_ENODATA || ret == -FI_EINVAL ||
	             ret == -FI_EBADFLAGS || ret == -FI_ENOSYS || ret == -FI_ENOMEM,
	         "fi_getinfo = %d (%s)", ret, fi_strerror(-ret));
	FZ_CHECK(!ret == !!info, "fi_getinfo = %d with info %p", ret, (void *)info);
	if (ret) {
		refused[-ret == FI_ENODATA ? 0 : -ret == FI_EINVAL ? 1 : 2]++;
	} else {
		answered++;
		for (struct fi_info *i = info; i; i = i->next) {
			struct fi_info *d = fi_dupinfo(i);

			FZ_CHECK(d, "fi_dupinfo of an answer");
			FZ_CHECK(fi_tostr(d, FI_TYPE_INFO) != NULL,
			         "fi_tostr of an answer");
			FZ_CHECK(d->fabric_attr && d->fabric_attr->prov_name,
			         "an answer without its provider's name");
			fi_freeinfo(d);
		}
		if (how & 0x80)
			try_open(info);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}

size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	size_t n = 16 + (size_t)(fz_rand(rng) % 480);

	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = fz_rand(rng);

		/* Mostly small bytes: they pick the usual choices. */
		buf[i] = (uint8_t)(v % 4 ? v % 24 : v >> 8);
	}
	return n;
}

int fz_write_seeds(const char *dir)
{
	/* Nothing; shm; tcp with node and service; all-0xff; a long one. */
	static const uint8_t s1[] = {0};
	static const uint8_t s2[] = {1, 0, 3};
	static const uint8_t s3[] = {0x81, 0, 0, 1, 0, 2, 0, 0, 0, 0, 3, 3, 0, 0, 0};
	uint8_t s4[256], s5[2048];
	const struct {
		const uint8_t *b;
		size_t n;
	} seeds[] = {{s1, sizeof(s1)},
	             {s2, sizeof(s2)},
	             {s3, sizeof(s3)},
	             {s4, sizeof(s4)},
	             {s5, sizeof(s5)}};
	uint64_t rng = 1;

	memset(s4, 0xff, sizeof(s4));
	fz_generate(&rng, s5, sizeof(s5));
	for (size_t i = 0; i < sizeof(seeds) / sizeof(*seeds); i++) {
		char name[16];

		snprintf(name, sizeof(name), "seed-%zu", i);
		if (fz_save(dir, name, seeds[i].b, seeds[i].n))
			return -1;
	}
	return 0;
}

void fz_final_check(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	/* After all that, an ordinary question still has its answer. */
	FZ_CHECK(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM;
	FZ_CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) == 0 && info,
	         "fi_getinfo(shm, RDM) after the run");
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

void fz_report(void)
{
	fprintf(stderr,
	        "getinfo: %lu calls, %lu answered, %lu -FI_ENODATA, %lu -FI_EINVAL, "
	        "%lu other refusals\n",
	        runs, answered, refused[0], refused[1], refused[2]);
}
