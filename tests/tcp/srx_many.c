/* srx_many.c - one shared receive context serving a server's 64 FI_EP_MSG
 * connections, between two processes, public API only: the server posts
 * one multi-receive buffer to the context before any connection exists
 * and the client sends MSGS messages on every connection; every message
 * lands in a piece of that one buffer, contents checked, reported on the
 * CQ of the connection it came on, and the buffer is released once.
 * Then a tagged message on each of four connections is found by a peek
 * through the context, claimed and received; a peek for a tag nobody sent
 * finds nothing; every receive comes from the one pool, not one per
 * connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_tagged.h>

#include "check.h"
#include "eptest.h"
#include "side.h"

#define SERVER 0
#define CLIENT 1
#define NCONN  64
#define MSGS   4
#define LEN    120 /* bytes per message */
#define TAG    0x7700
#define EV_MS  10000

static struct fi_info *msg_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = FI_EP_MSG;
	h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	h->caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV;
	h->addr_format = FI_SOCKADDR_IN;
	return h;
}

/* One entry of cq, or an error entry (err filled): 1, -FI_EAVAIL, or
 * -FI_ETIMEDOUT. */
static ssize_t read_one(struct fid_cq *cq, struct fi_cq_tagged_entry *c,
                        struct fi_cq_err_entry *err)
{
	return et_read(cq, c, NULL, err, NULL, EV_MS);
}

static int server(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints();
	struct fid_pep *pep;
	struct fid_ep *srx, *ep[NCONN];
	struct fid_cq *cq[NCONN];
	struct fi_cq_attr cqa = {.size = 256, .format = FI_CQ_FORMAT_TAGGED};
	size_t cap = (size_t)NCONN * MSGS * LEN;
	char *multi = malloc(cap), tb[4][LEN];
	struct iovec iov = {multi, cap};
	struct fi_context2 mctx, pctx[4];
	struct fi_msg m = {
	    .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &mctx};
	struct sockaddr_in addr;
	size_t len = sizeof(addr);
	char all[2 * ET_SLOT];
	int got = 0, released = 0, per_conn[NCONN] = {0}, seen[NCONN][MSGS] = {{0}};

	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &s.info));
	fi_freeinfo(hints);
	CHECK(s.info->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT);
	OK(open_side(&s, true));
	OK(fi_domain(s.fabric, s.info, &s.domain, NULL));
	OK(fi_srx_context(s.domain, s.info->rx_attr, &srx, NULL));
	/* The one pool of receives, before any connection. */
	OK(fi_recvmsg(srx, &m, FI_MULTI_RECV));
	OK(fi_passive_ep(s.fabric, s.info, &pep, NULL));
	OK(fi_pep_bind(pep, &s.eq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &addr, &len));
	CHECK_INT(et_allgather(&addr, sizeof(addr), all), 0);
	for (int i = 0; i < NCONN; i++) {
		struct fi_eq_cm_entry e;
		uint32_t event;
		ssize_t r = fi_eq_sread(s.eq, &event, &e, sizeof(e), EV_MS, 0);

		CHECK(r == sizeof(e) && event == FI_CONNREQ);
		if (r != sizeof(e) || event != FI_CONNREQ)
			return 1;
		/* A CQ per connection: where its messages are reported. */
		OK(fi_cq_open(s.domain, &cqa, &cq[i], NULL));
		OK(fi_endpoint(s.domain, e.info, &ep[i], &per_conn[i]));
		fi_freeinfo(e.info);
		OK(fi_ep_bind(ep[i], &s.eq->fid, 0));
		OK(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		OK(fi_ep_bind(ep[i], &srx->fid, 0));
		OK(fi_accept(ep[i], NULL, 0));
		r = fi_eq_sread(s.eq, &event, &e, sizeof(e), EV_MS, 0);
		CHECK(r == sizeof(e) && event == FI_CONNECTED && e.fid == &ep[i]->fid);
		if (r != sizeof(e) || event != FI_CONNECTED)
			return 1;
	}
	CHECK_INT(et_barrier(), 0); /* the client sends */
	/* Every message in a piece of the one buffer, on its connection's CQ;
	 * the release with the last. */
	for (uint64_t t0 = et_now_us();
	     got < NCONN * MSGS && et_now_us() - t0 < EV_MS * 1000ull;) {
		for (int i = 0; i < NCONN; i++) {
			struct fi_cq_tagged_entry c;
			const char *b;

			if (fi_cq_read(cq[i], &c, 1) != 1)
				continue;
			CHECK(c.op_context == &mctx);
			released += !!(c.flags & FI_MULTI_RECV);
			if (!(c.flags & FI_RECV))
				continue;
			got++;
			b = c.buf;
			CHECK_INT(c.len, LEN);
			CHECK(b >= multi && b + LEN <= multi + cap);
			if (b < multi || b + LEN > multi + cap)
				continue;
			/* Byte 0: the connection's index; byte 1: the message's. */
			CHECK_INT((unsigned char)b[0], i);
			if ((unsigned char)b[1] < MSGS && (unsigned char)b[0] == i)
				seen[i][(unsigned char)b[1]]++;
			CHECK(et_verify(b + 2, LEN - 2,
			                (uint64_t)i * MSGS + (unsigned char)b[1]) ==
			      (size_t)-1);
		}
	}
	CHECK_INT(got, NCONN * MSGS);
	CHECK_INT(released, 1);
	for (int i = 0; i < NCONN; i++)
		for (int k = 0; k < MSGS; k++)
			CHECK_INT(seen[i][k], 1);
	CHECK_INT(et_barrier(), 0);
	/* Round 2: tagged messages on connections 0, 21, 42, 63 (tags TAG+k),
	 * each found by a peek through the context and claimed. */
	CHECK_INT(et_barrier(), 0); /* sent */
	for (int k = 0; k < 4; k++) {
		int conn = k * 21;
		struct iovec tiov = {tb[k], LEN};
		struct fi_msg_tagged tm = {.msg_iov = &tiov,
		                           .iov_count = 1,
		                           .addr = FI_ADDR_UNSPEC,
		                           .tag = TAG + k,
		                           .context = &pctx[k]};
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r = 0;

		/* The answer goes to the CQ of the connection it came on.
		 * Until the message is in, FI_ENOMSG: asked again for as long
		 * as the other rounds wait (a loaded machine delays it). */
		for (uint64_t t0 = et_now_us(); et_now_us() - t0 < EV_MS * 1000ull;) {
			CHECK_INT(fi_trecvmsg(srx, &tm, FI_PEEK | FI_CLAIM), 0);
			r = fi_cq_read(cq[conn], &c, 1);
			if (r == 1)
				break;
			if (r == -FI_EAVAIL) {
				/* Not come yet: FI_ENOMSG on the first endpoint's CQ. */
				CHECK_INT(fi_cq_readerr(cq[conn], &err, 0), 1);
				CHECK_INT(err.err, FI_ENOMSG);
			}
			for (int i = 0; i < NCONN; i++) { /* other CQs: FI_ENOMSG only */
				if (i != conn && fi_cq_read(cq[i], &c, 1) == -FI_EAVAIL) {
					fi_cq_readerr(cq[i], &err, 0);
					CHECK_INT(err.err, FI_ENOMSG);
				}
			}
			usleep(1000);
		}
		CHECK_INT(r, 1);
		if (r != 1)
			continue;
		CHECK(c.op_context == &pctx[k]);
		CHECK_HEX(c.tag, TAG + k);
		CHECK_INT(c.len, LEN);
		CHECK_INT(fi_trecvmsg(srx, &tm, FI_CLAIM), 0);
		CHECK_INT(read_one(cq[conn], &c, &err), 1);
		CHECK(c.op_context == &pctx[k]);
		CHECK_INT((unsigned char)tb[k][0], conn);
		CHECK(et_verify(tb[k] + 2, LEN - 2, 1000 + k) == (size_t)-1);
	}
	{
		/* A tag nobody sent: nothing to find. */
		struct fi_msg_tagged tm = {
		    .addr = FI_ADDR_UNSPEC, .tag = TAG + 99, .context = &pctx[0]};
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		int enomsg = 0;

		CHECK_INT(fi_trecvmsg(srx, &tm, FI_PEEK), 0);
		for (int i = 0; i < NCONN; i++)
			if (fi_cq_read(cq[i], &c, 1) == -FI_EAVAIL &&
			    fi_cq_readerr(cq[i], &err, 0) == 1 && err.err == FI_ENOMSG)
				enomsg++;
		CHECK_INT(enomsg, 1);
	}
	CHECK_INT(et_barrier(), 0);
	CHECK_INT(fi_close(&srx->fid), -FI_EBUSY);
	for (int i = 0; i < NCONN; i++) {
		CHECK_INT(fi_close(&ep[i]->fid), 0);
		CHECK_INT(fi_close(&cq[i]->fid), 0);
	}
	CHECK_INT(fi_close(&srx->fid), 0);
	CHECK_INT(fi_close(&pep->fid), 0);
	close_side(&s);
	free(multi);
	return 0;
}

static int client(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints();
	struct fid_ep *ep[NCONN];
	struct sockaddr_in srv;
	char all[2 * ET_SLOT], port[16], out[NCONN][MSGS][LEN], tb[4][LEN];
	int n = 0;

	hints->ep_attr->rx_ctx_cnt = 0;
	CHECK_INT(et_allgather("", 1, all), 0);
	memcpy(&srv, all + SERVER * ET_SLOT, sizeof(srv));
	snprintf(port, sizeof(port), "%u", ntohs(srv.sin_port));
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, 0, hints, &s.info));
	fi_freeinfo(hints);
	OK(open_side(&s, false));
	for (int i = 0; i < NCONN; i++) {
		struct fi_eq_cm_entry e;
		uint32_t event;
		ssize_t r;

		OK(open_ep(&s, s.info, &ep[i], NULL));
		OK(fi_connect(ep[i], s.info->dest_addr, NULL, 0));
		r = fi_eq_sread(s.eq, &event, &e, sizeof(e), EV_MS, 0);
		CHECK(r == sizeof(e) && event == FI_CONNECTED);
		if (r != sizeof(e) || event != FI_CONNECTED)
			return 1;
	}
	CHECK_INT(et_barrier(), 0);
	for (int k = 0; k < MSGS; k++)
		for (int i = 0; i < NCONN; i++) {
			out[i][k][0] = (char)i;
			out[i][k][1] = (char)k;
			et_fill(out[i][k] + 2, LEN - 2, (uint64_t)i * MSGS + k);
			OK(fi_send(ep[i], out[i][k], LEN, NULL, 0, NULL));
		}
	for (uint64_t t0 = et_now_us();
	     n < NCONN * MSGS && et_now_us() - t0 < EV_MS * 1000ull;) {
		struct fi_cq_tagged_entry c[16];
		ssize_t r = fi_cq_read(s.cq, c, 16);

		if (r > 0)
			n += (int)r;
	}
	CHECK_INT(n, NCONN * MSGS);
	CHECK_INT(et_barrier(), 0);
	for (int k = 0; k < 4; k++) {
		tb[k][0] = (char)(k * 21);
		et_fill(tb[k] + 2, LEN - 2, 1000 + k);
		OK(fi_tsend(ep[k * 21], tb[k], LEN, NULL, 0, TAG + k, NULL));
	}
	CHECK_INT(et_barrier(), 0);
	for (n = 0; n < 4;) { /* completes once the server took them */
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;

		if (et_read(s.cq, &c, NULL, &err, NULL, EV_MS) != 1)
			break;
		n++;
	}
	CHECK_INT(n, 4);
	CHECK_INT(et_barrier(), 0);
	for (int i = 0; i < NCONN; i++)
		CHECK_INT(fi_close(&ep[i]->fid), 0);
	close_side(&s);
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
	return et_run("tcp/srx_many: one shared receive context, 64 connections", 2, 90,
	              pair, NULL, 0);
}
