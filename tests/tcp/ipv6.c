/* ipv6.c - the tcp provider over IPv6 (::1), public API only: fi_getinfo's
 * address families and text forms, then two processes exchanging data over
 * connected (FI_EP_MSG) and reliable-datagram (FI_EP_RDM) endpoints with
 * binary FI_SOCKADDR_IN6 addresses.  (The tcp6 runs of the tests/ep
 * programs, LOOM_TEST_NODE=::1, cover the FI_ADDR_STR forms under load.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include "check.h"
#include "eptest.h"
#include "side.h"

#define SERVER 0
#define CLIENT 1
#define EV_MS  5000
#define BIG    ((size_t)1 << 20)
#define TAG    0x66u

static struct fi_info *hints_of(enum fi_ep_type type, uint32_t addr_format)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = type;
	h->caps = FI_MSG | FI_TAGGED;
	h->addr_format = addr_format;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	return h;
}

static bool is_loopback6(const void *addr, size_t len)
{
	const struct sockaddr_in6 *a = addr;

	return len == sizeof(*a) && a->sin6_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
}

/* ---- fi_getinfo: families, formats, mismatches --------------------------- */

static int getinfo_cases(void)
{
	struct fi_info *h = hints_of(FI_EP_RDM, FI_SOCKADDR_IN6), *info = NULL, *i;
	char text[128];
	unsigned port = 0;
	int n = 0;

	if (!h)
		return 2;
	/* Numeric ::1 as the source, binary IPv6. */
	OK(fi_getinfo(FI_VERSION(1, 17), "::1", "0", FI_SOURCE, h, &info));
	for (i = info; i; i = i->next) {
		CHECK_INT(i->addr_format, FI_SOCKADDR_IN6);
		CHECK(is_loopback6(i->src_addr, i->src_addrlen));
		CHECK_STR(i->fabric_attr->name, "::1/128");
		n++;
	}
	CHECK(n >= 1);
	fi_freeinfo(info);
	/* An IPv6 format does not take an IPv4 node, nor the other way. */
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, h, &info),
	          -FI_ENODATA);
	h->addr_format = FI_SOCKADDR_IN;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), "::1", "0", FI_SOURCE, h, &info),
	          -FI_ENODATA);
	/* Unspecified format: the node's family decides. */
	h->addr_format = FI_FORMAT_UNSPEC;
	OK(fi_getinfo(FI_VERSION(1, 17), "::1", "4242", 0, h, &info));
	CHECK_INT(info->addr_format, FI_SOCKADDR_IN6);
	CHECK(is_loopback6(info->dest_addr, info->dest_addrlen));
	CHECK_INT(ntohs(((struct sockaddr_in6 *)info->dest_addr)->sin6_port), 4242);
	fi_freeinfo(info);
	/* Text: the destination given as fi_sockaddr_in6://[::1]:port comes
	 * back the same, and the source in the same form. */
	h->addr_format = FI_ADDR_STR;
	h->dest_addr = strdup("fi_sockaddr_in6://[::1]:4243");
	h->dest_addrlen = strlen(h->dest_addr) + 1;
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	CHECK_INT(info->addr_format, FI_ADDR_STR);
	CHECK_STR(info->dest_addr, "fi_sockaddr_in6://[::1]:4243");
	snprintf(text, sizeof(text), "%s", (const char *)info->src_addr);
	CHECK(sscanf(text, "fi_sockaddr_in6://[::1]:%u", &port) == 1);
	fi_freeinfo(info);
	/* Malformed text is refused, not misread. */
	free(h->dest_addr);
	h->dest_addr = strdup("fi_sockaddr_in6://::1:4243"); /* no brackets */
	h->dest_addrlen = strlen(h->dest_addr) + 1;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);
	return 0;
}

/* ---- FI_EP_MSG over ::1 --------------------------------------------------- */

static int wait_event(struct fid_eq *eq, uint32_t want, struct fi_eq_cm_entry *e)
{
	uint32_t event = 0;
	ssize_t r = fi_eq_sread(eq, &event, e, sizeof(*e), EV_MS, 0);

	CHECK_INT(r, sizeof(*e));
	CHECK_INT(event, want);
	return r == sizeof(*e) && event == want ? 0 : 1;
}

/* One completion within EV_MS. */
static int wait_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *c)
{
	uint64_t end = et_now_us() + EV_MS * 1000ull;
	ssize_t r;

	while ((r = fi_cq_read(cq, c, 1)) == -FI_EAGAIN && et_now_us() < end)
		;
	CHECK_INT(r, 1);
	return r == 1 ? 0 : 1;
}

static void fill(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 31 + seed);
}

static bool filled(const char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (char)(i * 31 + seed))
			return false;
	return true;
}

static int msg_server(void)
{
	struct side s = {0}, a = {0};
	struct fi_info *h = hints_of(FI_EP_MSG, FI_SOCKADDR_IN6);
	struct fid_pep *pep;
	struct fi_eq_cm_entry e;
	struct fi_cq_tagged_entry c;
	struct sockaddr_in6 name, peer, all[ET_MAX_PROCS * ET_SLOT / sizeof(name)];
	size_t len = sizeof(name);
	char *buf = malloc(BIG);

	if (!h || !buf)
		return 2;
	OK(fi_getinfo(FI_VERSION(1, 17), "::1", "0", FI_SOURCE, h, &s.info));
	fi_freeinfo(h);
	OK(open_side(&s, true));
	OK(fi_passive_ep(s.fabric, s.info, &pep, NULL));
	OK(fi_pep_bind(pep, &s.eq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &name, &len));
	CHECK_INT(len, sizeof(name));
	CHECK(is_loopback6(&name, len) && name.sin6_port);
	CHECK_INT(et_allgather(&name, sizeof(name), all), 0);

	OK(wait_event(s.eq, FI_CONNREQ, &e));
	CHECK(e.info && e.info->handle);
	CHECK_INT(e.info->addr_format, FI_SOCKADDR_IN6);
	CHECK(e.info->dest_addr && is_loopback6(e.info->dest_addr, e.info->dest_addrlen));
	a.info = e.info;
	OK(fi_domain(s.fabric, a.info, &a.domain, NULL));
	a.eq = s.eq;
	{
		struct fi_cq_attr cqa = {.size = 64, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(a.domain, &cqa, &a.cq, NULL));
	}
	OK(open_ep(&a, a.info, &a.ep, NULL));
	OK(fi_recv(a.ep, buf, BIG, NULL, 0, NULL));
	OK(fi_accept(a.ep, NULL, 0));
	OK(wait_event(s.eq, FI_CONNECTED, &e));
	len = sizeof(peer);
	OK(fi_getpeer(a.ep, &peer, &len));
	CHECK(is_loopback6(&peer, len));
	/* 1 MiB in, echoed back. */
	OK(wait_cq(a.cq, &c));
	CHECK_INT(c.len, BIG);
	CHECK(filled(buf, BIG, 7));
	OK(fi_send(a.ep, buf, BIG, NULL, 0, NULL));
	OK(wait_cq(a.cq, &c));
	OK(wait_event(s.eq, FI_SHUTDOWN, &e));
	a.eq = NULL; /* s's */
	close_side(&a);
	CHECK_INT(fi_close(&pep->fid), 0);
	close_side(&s);
	free(buf);
	return 0;
}

static int msg_client(void)
{
	struct side s = {0};
	struct fi_info *h = hints_of(FI_EP_MSG, FI_SOCKADDR_IN6);
	struct sockaddr_in6 all[ET_MAX_PROCS * ET_SLOT / sizeof(struct sockaddr_in6)], srv;
	struct fi_eq_cm_entry e;
	struct fi_cq_tagged_entry c;
	char *out = malloc(BIG), *back = calloc(1, BIG);

	if (!h || !out || !back)
		return 2;
	CHECK_INT(et_allgather("", 0, all), 0);
	memcpy(&srv, (char *)all + SERVER * ET_SLOT, sizeof(srv));
	CHECK(is_loopback6(&srv, sizeof(srv)));
	h->dest_addr = malloc(sizeof(srv));
	memcpy(h->dest_addr, &srv, sizeof(srv));
	h->dest_addrlen = sizeof(srv);
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &s.info));
	fi_freeinfo(h);
	CHECK_INT(s.info->addr_format, FI_SOCKADDR_IN6);
	OK(open_side(&s, false));
	OK(open_ep(&s, s.info, &s.ep, NULL));
	/* An IPv4 address does not fit this IPv6 endpoint. */
	{
		struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = srv.sin6_port};

		v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		CHECK_INT(fi_connect(s.ep, &v4, NULL, 0), -FI_EINVAL);
	}
	OK(fi_recv(s.ep, back, BIG, NULL, 0, NULL));
	OK(fi_connect(s.ep, &srv, NULL, 0));
	OK(wait_event(s.eq, FI_CONNECTED, &e));
	fill(out, BIG, 7);
	OK(fi_send(s.ep, out, BIG, NULL, 0, NULL));
	for (int k = 0; k < 2; k++) {
		OK(wait_cq(s.cq, &c));
		if (c.flags & FI_RECV) {
			CHECK_INT(c.len, BIG);
			CHECK(filled(back, BIG, 7));
		}
	}
	OK(fi_shutdown(s.ep, 0));
	close_side(&s);
	free(out);
	free(back);
	return 0;
}

/* ---- FI_EP_RDM over ::1 with binary addresses -------------------------------- */

static int rdm_proc(int rank)
{
	struct side s = {0};
	struct fi_info *h = hints_of(FI_EP_RDM, FI_SOCKADDR_IN6);
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fid_av *av;
	struct sockaddr_in6 name, all[ET_MAX_PROCS * ET_SLOT / sizeof(struct sockaddr_in6)];
	struct fi_cq_tagged_entry c;
	size_t len = sizeof(name);
	fi_addr_t peer;
	char out[4096], in[4096];
	int other = 1 - rank;

	if (!h)
		return 2;
	OK(fi_getinfo(FI_VERSION(1, 17), "::1", "0", FI_SOURCE, h, &s.info));
	fi_freeinfo(h);
	OK(open_side(&s, false));
	OK(fi_av_open(s.domain, &ava, &av, NULL));
	OK(fi_endpoint(s.domain, s.info, &s.ep, NULL));
	OK(fi_ep_bind(s.ep, &av->fid, 0));
	OK(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(s.ep));
	OK(fi_getname(&s.ep->fid, &name, &len));
	CHECK_INT(len, sizeof(name));
	CHECK(is_loopback6(&name, len));
	CHECK_INT(et_allgather(&name, sizeof(name), all), 0);
	CHECK_INT(fi_av_insert(av, (char *)all + other * ET_SLOT, 1, &peer, 0, NULL), 1);
	OK(fi_trecv(s.ep, in, sizeof(in), NULL, peer, TAG, 0, NULL));
	fill(out, sizeof(out), (unsigned)rank);
	OK(fi_tsend(s.ep, out, sizeof(out), NULL, peer, TAG, NULL));
	for (int k = 0; k < 2; k++) {
		OK(wait_cq(s.cq, &c));
		if (c.flags & FI_RECV) {
			CHECK_INT(c.len, sizeof(in));
			CHECK(filled(in, sizeof(in), (unsigned)other));
		}
	}
	CHECK_INT(et_barrier(), 0);
	CHECK_INT(fi_close(&s.ep->fid), 0);
	s.ep = NULL;
	CHECK_INT(fi_close(&av->fid), 0);
	close_side(&s);
	return 0;
}

static int msg_pair(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (rank == SERVER ? msg_server() : msg_client())
		CHECK(0);
	return check_done();
}

static int rdm_pair(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (rdm_proc(rank))
		CHECK(0);
	return check_done();
}

int main(void)
{
	int bad = getinfo_cases() ? 1 : check_done();

	bad |= et_run("tcp/ipv6: FI_EP_MSG over ::1", 2, 60, msg_pair, NULL, 0);
	bad |= et_run("tcp/ipv6: FI_EP_RDM over ::1", 2, 60, rdm_pair, NULL, 0);
	return bad;
}
