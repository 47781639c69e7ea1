/* srx.c - shared receive contexts of the tcp provider's FI_EP_MSG
 * endpoints between two processes, public API only: fi_getinfo offers
 * rx_ctx_cnt FI_SHARED_CONTEXT as asked; receives posted to one
 * fi_srx_context serve several connected endpoints, whether they were
 * posted before their messages came or after, eager and rendezvous sizes,
 * tagged ones by tag, with completions on the endpoints' CQ; fi_cancel,
 * the flags a shared receive refuses, and closing while endpoints are
 * bound.  (fabtests' shared_ctx -e msg, and more.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "check.h"
#include "eptest.h"
#include "side.h"

#define SERVER 0
#define CLIENT 1
#define NCONN  3
#define EV_MS  5000
#define SMALL  64
#define BIG    ((size_t)1 << 20) /* rendezvous */
#define TAG_A  0xa1u
#define TAG_B  0xb2u

static struct fi_info *srx_hints(enum fi_ep_type type, bool rx_shared, bool tx_shared)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = type;
	h->caps = FI_MSG | FI_TAGGED;
	h->addr_format = FI_SOCKADDR_IN;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	if (rx_shared)
		h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	if (tx_shared)
		h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	return h;
}

/* Shared contexts are offered on both kinds of endpoint, as asked for
 * (man fi_endpoint: the count FI_SHARED_CONTEXT), and answered with the
 * count asked for; not asked for, an endpoint has its own. */
static int getinfo_cases(void)
{
	static const struct {
		enum fi_ep_type type;
		bool rx, tx;
	} cases[] = {{FI_EP_RDM, true, false}, {FI_EP_RDM, false, true},
	             {FI_EP_MSG, true, true},  {FI_EP_MSG, false, true},
	             {FI_EP_MSG, true, false}, {FI_EP_MSG, false, false}};
	struct fi_info *h, *info = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		h = srx_hints(cases[i].type, cases[i].rx, cases[i].tx);
		OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, h, &info));
		CHECK(info->ep_attr->rx_ctx_cnt == (cases[i].rx ? FI_SHARED_CONTEXT : 1));
		CHECK(info->ep_attr->tx_ctx_cnt == (cases[i].tx ? FI_SHARED_CONTEXT : 1));
		CHECK(info->domain_attr->max_ep_srx_ctx >= 1);
		CHECK(info->domain_attr->max_ep_stx_ctx >= 1);
		fi_freeinfo(info);
		fi_freeinfo(h);
	}
	return 0;
}

static void check_msg_info(const struct fi_info *i)
{
	CHECK_INT(i->ep_attr->type, FI_EP_MSG);
	CHECK_HEX(i->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
	CHECK_INT(i->ep_attr->tx_ctx_cnt, 1);
	CHECK(i->domain_attr->max_ep_srx_ctx >= NCONN);
}

static int open_srx(struct side *s, struct fid_ep **srx, void *ctx)
{
	struct fi_rx_attr attr = *s->info->rx_attr;
	struct fi_msg msg = {0};
	char b[8];
	struct iovec iov = {b, sizeof(b)};

	OK(fi_srx_context(s->domain, &attr, srx, ctx));
	CHECK_INT((*srx)->fid.fclass, FI_CLASS_SRX_CTX);
	CHECK((*srx)->fid.context == ctx);
	CHECK(attr.size > NCONN);
	{
		struct iovec two[2] = {iov, iov};

		/* A multi-receive buffer is one piece, as on an endpoint. */
		msg.msg_iov = two;
		msg.iov_count = 2;
		CHECK_INT(fi_recvmsg(*srx, &msg, FI_MULTI_RECV), -FI_EINVAL);
	}
	/* It only receives: every other call is refused, none crashes. */
	CHECK_INT(fi_send(*srx, b, sizeof(b), NULL, 0, NULL), -FI_ENOSYS);
	CHECK_INT(fi_tsend(*srx, b, sizeof(b), NULL, 0, 1, NULL), -FI_ENOSYS);
	CHECK_INT(fi_write(*srx, b, sizeof(b), NULL, 0, 0, 0, NULL), -FI_ENOSYS);
	CHECK_INT(fi_atomic(*srx, b, 1, NULL, 0, 0, 0, FI_UINT64, FI_SUM, NULL),
	          -FI_ENOSYS);
	{
		size_t len = sizeof(b);

		CHECK_INT(fi_getname(&(*srx)->fid, b, &len), -FI_ENOSYS);
	}
	return 0;
}

/* An endpoint from info on s, with s's EQ, the srx and s's CQ bound. */
static int srx_ep(struct side *s, struct fi_info *info, struct fid_ep *srx,
                  struct fid_ep **ep, void *ctx)
{
	OK(fi_endpoint(s->domain, info, ep, ctx));
	OK(fi_ep_bind(*ep, &s->eq->fid, 0));
	OK(fi_ep_bind(*ep, &srx->fid, 0));
	CHECK_INT(fi_ep_bind(*ep, &srx->fid, 0), -FI_EINVAL); /* one only */
	OK(fi_ep_bind(*ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(*ep));
	return 0;
}

/* n completions within EV_MS, error entries reported and failed. */
static int collect(struct fid_cq *cq, int n, struct fi_cq_tagged_entry *out)
{
	for (int i = 0; i < n; i++) {
		struct fi_cq_err_entry err;
		ssize_t r = et_read(cq, &out[i], NULL, &err, NULL, EV_MS);

		if (r != 1) {
			fprintf(stderr, "completion %d of %d: %zd (%s), err %d\n", i + 1,
			        n, r, fi_strerror((int)-r),
			        r == -FI_EAVAIL ? err.err : 0);
			CHECK_INT(r, 1);
			return 1;
		}
	}
	return 0;
}

/* The CQ stays empty for ms while progress runs: what arrives meanwhile
 * waits at its endpoint, unexpected. */
static void idle(struct fid_cq *cq, int ms)
{
	uint64_t end = et_now_us() + (uint64_t)ms * 1000;
	struct fi_cq_tagged_entry c;

	while (et_now_us() < end) {
		CHECK_INT(fi_cq_read(cq, &c, 1), -FI_EAGAIN);
		sched_yield();
	}
}

/* Which of ctxs (n) a context is, -1 if none. */
static int index_of(void *const *ctxs, int n, void *ctx)
{
	for (int i = 0; i < n; i++)
		if (ctxs[i] == ctx)
			return i;
	return -1;
}

static int server(void)
{
	struct side s = {0};
	struct fi_info *hints = srx_hints(FI_EP_MSG, true, false);
	struct fid_pep *pep = NULL;
	struct fid_ep *srx = NULL, *ep[NCONN] = {0};
	struct sockaddr_in addr, all[ET_MAX_PROCS * ET_SLOT / sizeof(addr)];
	struct fi_cq_tagged_entry c[NCONN + 3];
	struct fi_cq_err_entry err;
	int nctx;
	char small[NCONN + 1][SMALL], tb[2][SMALL], *big = malloc(BIG);
	int rctx[NCONN + 1], bctx, tctx[2], sctx[NCONN], ep_ctx[NCONN], srx_ctx;
	void *ctxs[NCONN + 1];
	size_t len = sizeof(addr);
	int accepted = 0, connected = 0, seen[NCONN] = {0};
	ssize_t r;

	if (!hints || !big)
		return 2;
	OK(getinfo_cases());
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &s.info));
	fi_freeinfo(hints);
	check_msg_info(s.info);
	OK(open_side(&s, true));
	OK(fi_domain(s.fabric, s.info, &s.domain, NULL));
	{
		struct fi_cq_attr cqa = {.size = 64, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(s.domain, &cqa, &s.cq, NULL));
	}
	OK(open_srx(&s, &srx, &srx_ctx));
	/* Receives before any connection exists: NCONN + 1 of them. */
	for (int i = 0; i <= NCONN; i++) {
		ctxs[i] = &rctx[i];
		OK(fi_recv(srx, small[i], SMALL, NULL, 0, &rctx[i]));
	}
	OK(fi_passive_ep(s.fabric, s.info, &pep, NULL));
	OK(fi_pep_bind(pep, &s.eq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &addr, &len));
	CHECK_INT(et_allgather(&addr, sizeof(addr), all), 0);

	/* Requests and connections, interleaved as they come. */
	while (connected < NCONN) {
		union {
			struct fi_eq_cm_entry e;
			unsigned char b[sizeof(struct fi_eq_cm_entry) + 256];
		} ev;
		uint32_t event;

		r = fi_eq_sread(s.eq, &event, &ev, sizeof(ev), EV_MS, 0);
		CHECK(r >= (ssize_t)sizeof(ev.e));
		if (r < (ssize_t)sizeof(ev.e))
			return 1;
		if (event == FI_CONNREQ && accepted < NCONN) {
			check_msg_info(ev.e.info);
			OK(srx_ep(&s, ev.e.info, srx, &ep[accepted], &ep_ctx[accepted]));
			OK(fi_accept(ep[accepted], NULL, 0));
			fi_freeinfo(ev.e.info);
			accepted++;
		} else if (event == FI_CONNECTED) {
			connected++;
		} else {
			fprintf(stderr, "server: event %u\n", event);
			CHECK(0);
			return 1;
		}
	}
	CHECK_INT(fi_close(&srx->fid), -FI_EBUSY); /* endpoints bound */

	/* Round 1: one message through each endpoint, into the receives
	 * posted first (the last one left over). */
	CHECK_INT(et_barrier(), 0);
	OK(collect(s.cq, NCONN, c));
	for (int i = 0; i < NCONN; i++) {
		int k = index_of(ctxs, NCONN, c[i].op_context);
		unsigned who = k >= 0 ? (unsigned char)small[k][0] : 0;

		CHECK(k >= 0);
		CHECK_HEX(c[i].flags, FI_RECV | FI_MSG);
		CHECK_INT(c[i].len, SMALL);
		if (k < 0)
			continue;
		CHECK(c[i].buf == small[k]);
		CHECK(who < NCONN);
		if (who < NCONN && !seen[who]++)
			CHECK(et_verify(small[k] + 1, SMALL - 1, who) == (size_t)-1);
	}
	for (int i = 0; i < NCONN; i++)
		CHECK_INT(seen[i], 1);

	/* The one left is cancelled; its error goes to the endpoints' CQ. */
	CHECK_INT(fi_cancel(&srx->fid, &rctx[NCONN]), 0);
	CHECK_INT(fi_cancel(&srx->fid, &rctx[NCONN]), -FI_ENOENT);
	r = et_read(s.cq, c, NULL, &err, NULL, EV_MS);
	CHECK_INT(r, -FI_EAVAIL);
	if (r == -FI_EAVAIL) {
		CHECK_INT(err.err, FI_ECANCELED);
		CHECK(err.op_context == &rctx[NCONN]);
	}

	/* Round 2: the messages come first (1 MiB on endpoint 1, tagged on
	 * 0 and 2) and wait at their endpoints; receives posted after. */
	CHECK_INT(et_barrier(), 0);
	idle(s.cq, 200);
	OK(fi_trecv(srx, tb[1], SMALL, NULL, 0, TAG_B, 0, &tctx[1]));
	OK(fi_recv(srx, big, BIG, NULL, 0, &bctx));
	OK(fi_trecv(srx, tb[0], SMALL, NULL, 0, TAG_A, 0, &tctx[0]));
	OK(collect(s.cq, 3, c));
	for (int i = 0; i < 3; i++) {
		if (c[i].op_context == &bctx) {
			CHECK_HEX(c[i].flags, FI_RECV | FI_MSG);
			CHECK_INT(c[i].len, BIG);
			CHECK(et_verify(big, BIG, 77) == (size_t)-1);
		} else if (c[i].op_context == &tctx[0] || c[i].op_context == &tctx[1]) {
			int t = c[i].op_context == &tctx[1];

			CHECK_HEX(c[i].flags, FI_RECV | FI_TAGGED);
			CHECK_HEX(c[i].tag, t ? TAG_B : TAG_A);
			CHECK_INT(c[i].len, SMALL);
			CHECK(et_verify(tb[t], SMALL, t ? 92 : 91) == (size_t)-1);
		} else {
			CHECK(0);
		}
	}

	/* Replies, one through each endpoint, into the client's srx. */
	for (int i = 0; i < NCONN; i++) {
		small[i][0] = (char)i;
		et_fill(small[i] + 1, SMALL - 1, 100 + i);
		OK(fi_send(ep[i], small[i], SMALL, NULL, 0, &sctx[i]));
	}
	OK(collect(s.cq, NCONN, c));
	CHECK_INT(et_barrier(), 0);

	/* Round 3: a receive with a length but no buffer has room for no
	 * bytes: a message with data ends in it truncated. */
	CHECK_INT(et_barrier(), 0);
	OK(fi_recv(srx, NULL, SMALL, NULL, 0, &nctx));
	CHECK_INT(et_barrier(), 0);
	{
		struct fi_cq_tagged_entry t;
		ssize_t r = et_read(s.cq, &t, NULL, &err, NULL, EV_MS);

		CHECK_INT(r, -FI_EAVAIL);
		if (r == -FI_EAVAIL) {
			CHECK_INT(err.err, FI_ETRUNC);
			CHECK(err.op_context == &nctx);
			CHECK_INT(err.olen, 8);
		}
	}

	for (int i = 0; i < NCONN; i++)
		CHECK_INT(fi_close(&ep[i]->fid), 0);
	CHECK_INT(fi_close(&srx->fid), 0);
	CHECK_INT(fi_close(&pep->fid), 0);
	close_side(&s);
	free(big);
	return 0;
}

static int client(void)
{
	struct side s = {0};
	struct fi_info *hints = srx_hints(FI_EP_MSG, true, false);
	struct fid_ep *srx = NULL, *ep[NCONN] = {0};
	struct sockaddr_in srv, all[ET_MAX_PROCS * ET_SLOT / sizeof(srv)];
	struct fi_cq_tagged_entry c[NCONN + 3];
	char small[NCONN][SMALL], reply[NCONN][SMALL], tb[2][SMALL], *big = malloc(BIG);
	int sctx[NCONN], rctx[NCONN], bctx, tctx[2], ep_ctx[NCONN], srx_ctx, nctx,
	    seen[NCONN] = {0};
	void *ctxs[NCONN];
	char port[16];

	if (!hints || !big)
		return 2;
	CHECK_INT(et_allgather("", 0, all), 0);
	memcpy(&srv, (char *)all + SERVER * ET_SLOT, sizeof(srv));
	snprintf(port, sizeof(port), "%u", ntohs(srv.sin_port));
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, 0, hints, &s.info));
	fi_freeinfo(hints);
	check_msg_info(s.info);
	OK(open_side(&s, false));
	OK(open_srx(&s, &srx, &srx_ctx));
	for (int i = 0; i < NCONN; i++) {
		union {
			struct fi_eq_cm_entry e;
			unsigned char b[sizeof(struct fi_eq_cm_entry) + 256];
		} ev;
		uint32_t event;
		ssize_t r;

		OK(srx_ep(&s, s.info, srx, &ep[i], &ep_ctx[i]));
		/* Bound and enabled: too late for another srx. */
		CHECK(fi_ep_bind(ep[i], &srx->fid, 0) < 0);
		OK(fi_connect(ep[i], s.info->dest_addr, NULL, 0));
		r = fi_eq_sread(s.eq, &event, &ev, sizeof(ev), EV_MS, 0);
		CHECK(r >= (ssize_t)sizeof(ev.e));
		CHECK_INT(event, FI_CONNECTED);
		CHECK(ev.e.fid == &ep[i]->fid);
		if (r < (ssize_t)sizeof(ev.e) || event != FI_CONNECTED)
			return 1;
	}
	for (int i = 0; i < NCONN; i++) {
		ctxs[i] = &rctx[i];
		OK(fi_recv(srx, reply[i], SMALL, NULL, 0, &rctx[i]));
	}

	/* An alias closes alone; the endpoint (and its membership) stays
	 * until then, and after. */
	{
		struct fid_ep *al = NULL;

		OK(fi_ep_alias(ep[0], &al, FI_TRANSMIT));
		CHECK_INT(fi_close(&ep[0]->fid), -FI_EBUSY);
		CHECK_INT(fi_close(&al->fid), 0);
	}

	/* Round 1. */
	CHECK_INT(et_barrier(), 0);
	for (int i = 0; i < NCONN; i++) {
		small[i][0] = (char)i;
		et_fill(small[i] + 1, SMALL - 1, i);
		OK(fi_send(ep[i], small[i], SMALL, NULL, 0, &sctx[i]));
	}
	OK(collect(s.cq, NCONN, c));
	for (int i = 0; i < NCONN; i++)
		CHECK_HEX(c[i].flags, FI_SEND | FI_MSG);

	/* Round 2: sent before the server posts anything. */
	CHECK_INT(et_barrier(), 0);
	et_fill(big, BIG, 77);
	et_fill(tb[0], SMALL, 91);
	et_fill(tb[1], SMALL, 92);
	OK(fi_tsend(ep[0], tb[0], SMALL, NULL, 0, TAG_A, &tctx[0]));
	OK(fi_send(ep[1], big, BIG, NULL, 0, &bctx));
	OK(fi_tsend(ep[2], tb[1], SMALL, NULL, 0, TAG_B, &tctx[1]));
	/* ... and the replies, into our own srx, with the sends' ends. */
	OK(collect(s.cq, 3 + NCONN, c));
	for (int i = 0; i < 3 + NCONN; i++) {
		int k = index_of(ctxs, NCONN, c[i].op_context);
		unsigned who = k >= 0 ? (unsigned char)reply[k][0] : 0;

		if (k < 0) {
			CHECK(c[i].op_context == &bctx || c[i].op_context == &tctx[0] ||
			      c[i].op_context == &tctx[1]);
			CHECK(c[i].flags & FI_SEND);
			continue;
		}
		CHECK_HEX(c[i].flags, FI_RECV | FI_MSG);
		CHECK(who < NCONN);
		if (who < NCONN && !seen[who]++)
			CHECK(et_verify(reply[k] + 1, SMALL - 1, 100 + who) ==
			      (size_t)-1);
	}
	for (int i = 0; i < NCONN; i++)
		CHECK_INT(seen[i], 1);
	CHECK_INT(et_barrier(), 0);

	/* Round 3: 8 bytes into the server's receive without a buffer. */
	CHECK_INT(et_barrier(), 0);
	CHECK_INT(et_barrier(), 0);
	OK(fi_send(ep[0], tb[0], 8, NULL, 0, &nctx));
	OK(collect(s.cq, 1, c));
	CHECK(c[0].op_context == &nctx);

	/* One FI_SHUTDOWN each, whoever ends the connection first (the
	 * server closes its side now): the aliased endpoint too. */
	for (int i = 0; i < NCONN; i++)
		CHECK_INT(fi_shutdown(ep[i], 0), 0);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < NCONN; i++) {
		struct fi_eq_cm_entry e;
		uint32_t event = 0;
		ssize_t r = fi_eq_sread(s.eq, &event, &e, sizeof(e), EV_MS, 0);
		int k = 0;

		CHECK_INT(r, sizeof(e));
		CHECK_INT(event, FI_SHUTDOWN);
		while (k < NCONN && (r != sizeof(e) || e.fid != &ep[k]->fid))
			k++;
		CHECK(k < NCONN);
		if (k < NCONN)
			seen[k]++;
	}
	for (int i = 0; i < NCONN; i++)
		CHECK_INT(seen[i], 1);

	for (int i = 0; i < NCONN; i++)
		CHECK_INT(fi_close(&ep[i]->fid), 0);
	CHECK_INT(fi_close(&srx->fid), 0);
	close_side(&s);
	free(big);
	return 0;
}

static int pair(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (rank == SERVER ? server() : client())
		CHECK(0);
	return check_done();
}

int main(void)
{
	return et_run("tcp/srx: one shared receive context, several connections", 2, 60,
	              pair, NULL, 0);
}
