/* msg_loop.c - the RDM engine's message and tagged paths over the loopback
 * link, in one process: eager, rendezvous by bulk read and by CTS/DATA,
 * unexpected messages, FI_SOURCE, multi-receive, peek/claim/discard,
 * cancel, truncation, remote CQ data, delivery-complete, counters, names,
 * options, aliases, queue limits and a peer that goes away. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loopfix.h"

struct side {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_cntr *scntr, *rcntr;
	fi_addr_t addr; /* of this side, in the shared AV */
};

static struct side A, B;

static void pump(void)
{
	if (A.ep)
		lm_rdm_progress(lm_rdm_ep_of(A.ep), false);
	if (B.ep)
		lm_rdm_progress(lm_rdm_ep_of(B.ep), false);
}

static bool empty(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;

	pump();
	return fi_cq_read(cq, &e, 1) == -FI_EAGAIN;
}

static void open_side(struct side *s)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	char name[64];
	size_t len = 0;

	CHECK_INT(fi_endpoint(fx.domain, fx.info, &s->ep, NULL), 0);
	CHECK_INT(fi_cq_open(fx.domain, &cqa, &s->cq, NULL), 0);
	CHECK_INT(fi_cntr_open(fx.domain, &ca, &s->scntr, NULL), 0);
	CHECK_INT(fi_cntr_open(fx.domain, &ca, &s->rcntr, NULL), 0);
	CHECK_INT(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_INT(fi_ep_bind(s->ep, &s->scntr->fid, FI_SEND), 0);
	CHECK_INT(fi_ep_bind(s->ep, &s->rcntr->fid, FI_RECV), 0);
	CHECK_INT(fi_enable(s->ep), -FI_ENOAV);
	CHECK_INT(fi_ep_bind(s->ep, &fx.av->fid, 0), 0);
	CHECK_INT(fi_enable(s->ep), 0);
	/* getname: NULL buffer -> ETOOSMALL with the length needed */
	CHECK_INT(fi_getname(&s->ep->fid, NULL, &len), -FI_ETOOSMALL);
	CHECK(len > 7 && len < sizeof(name));
	CHECK_INT(fi_getname(&s->ep->fid, name, &len), 0);
	CHECK(!strncmp(name, "loop://", 7));
	CHECK_INT(fi_av_insert(fx.av, name, 1, &s->addr, 0, NULL), 1);
}

static void close_side(struct side *s)
{
	CHECK_INT(fi_close(&s->ep->fid), 0);
	s->ep = NULL;
	CHECK_INT(fi_close(&s->cq->fid), 0);
	CHECK_INT(fi_close(&s->scntr->fid), 0);
	CHECK_INT(fi_close(&s->rcntr->fid), 0);
}

static void fill(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 7 + seed);
}

/* One message of len bytes A -> B, received by a posted buffer (pre) or
 * after arriving unexpectedly, checked byte for byte. */
static void xfer(size_t len, bool tagged, bool pre)
{
	char *sbuf = malloc(len + 1), *rbuf = calloc(1, len + 1);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t src = 0;
	int rctx, sctx;

	fill(sbuf, len, (unsigned)len);
	if (pre)
		CHECK_INT(tagged ? fi_trecv(B.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, 0x55,
		                            0, &rctx)
		                 : fi_recv(B.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, &rctx),
		          0);
	CHECK_INT(tagged ? fi_tsend(A.ep, sbuf, len, NULL, B.addr, 0x55, &sctx)
	                 : fi_send(A.ep, sbuf, len, NULL, B.addr, &sctx),
	          0);
	if (!pre) {
		for (int i = 0; i < 10; i++)
			pump();
		CHECK_INT(tagged ? fi_trecv(B.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, 0x55,
		                            0, &rctx)
		                 : fi_recv(B.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, &rctx),
		          0);
	}
	CHECK_INT(cq_get(B.cq, &e, &src, &err), 1);
	CHECK(e.op_context == &rctx);
	CHECK_INT(e.len, len);
	CHECK_HEX(e.flags, FI_RECV | (tagged ? FI_TAGGED : FI_MSG));
	if (tagged)
		CHECK_HEX(e.tag, 0x55);
	CHECK_INT(src, A.addr);
	CHECK(!memcmp(sbuf, rbuf, len));
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
	CHECK(e.op_context == &sctx);
	CHECK_HEX(e.flags, FI_SEND | (tagged ? FI_TAGGED : FI_MSG));
	free(sbuf);
	free(rbuf);
}

static void test_sizes(void)
{
	static const size_t sizes[] = {0, 1, 64, 1000, 1024, 1025, 5000, 100000, 1 << 20};

	for (int bulk = 1; bulk >= 0; bulk--) {
		loop_link_set_bulk(bulk);
		for (size_t i = 0; i < LM_ARRAY_SIZE(sizes); i++)
			for (int t = 0; t < 2; t++)
				for (int pre = 0; pre < 2; pre++)
					xfer(sizes[i], t, pre);
	}
	loop_link_set_bulk(true);
}

/* Thousands of messages sent before any receive: all arrive, in order. */
static void test_unexpected_many(void)
{
	enum { N = 3000 };
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int sent = 0, got = 0;
	uint32_t v;

	while (sent < N) {
		uint32_t x = (uint32_t)sent;
		ssize_t r = fi_tinject(A.ep, &x, sizeof(x), B.addr, 7);

		if (r == -FI_EAGAIN) {
			/* the receiver's queue is full: it must progress */
			lm_rdm_progress(lm_rdm_ep_of(B.ep), false);
			continue;
		}
		CHECK_INT(r, 0);
		sent++;
	}
	for (int i = 0; i < 100; i++)
		pump();
	for (got = 0; got < N; got++) {
		CHECK_INT(fi_trecv(B.ep, &v, sizeof(v), NULL, FI_ADDR_UNSPEC, 7, 0, NULL),
		          0);
		if (cq_get(B.cq, &e, NULL, &err) != 1)
			break;
		if (v != (uint32_t)got)
			break;
	}
	CHECK_INT(got, N);
	CHECK(empty(A.cq)); /* injects never complete into the CQ */
}

static void test_multi_recv(void)
{
	enum { M = 40, SZ = 100 };
	char *buf = calloc(1, 2048), msg[SZ];
	size_t min = 0, len = sizeof(min);
	struct fi_msg fm;
	struct iovec iov = {buf, 2048};
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int done = 0, entries = 0, mctx;
	bool released = false;

	CHECK_INT(
	    fi_getopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len), 0);
	CHECK_INT(min, 64);
	min = SZ;
	CHECK_INT(fi_setopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min,
	                    sizeof(min)),
	          0);
	/* Some arrive before the buffer is posted, the rest after. */
	for (int i = 0; i < 5; i++) {
		memset(msg, 'a' + i, SZ);
		CHECK_INT(fi_inject(A.ep, msg, SZ, B.addr), 0);
		done++;
	}
	pump();
	memset(&fm, 0, sizeof(fm));
	fm.msg_iov = &iov;
	fm.iov_count = 1;
	fm.addr = FI_ADDR_UNSPEC;
	fm.context = &mctx;
	CHECK_INT(fi_recvmsg(B.ep, &fm, FI_MULTI_RECV | FI_COMPLETION), 0);
	for (; done < M; done++) {
		memset(msg, 'a' + done % 26, SZ);
		CHECK_INT(fi_inject(A.ep, msg, SZ, B.addr), 0);
	}
	/* 2048 / 100 = 20 fit (the 20th leaves 48 < 100 = min: released) */
	while (!released && cq_get(B.cq, &e, NULL, &err) == 1) {
		CHECK(e.op_context == &mctx);
		CHECK_INT(e.len, SZ);
		CHECK((char *)e.buf == buf + entries * SZ);
		CHECK(((char *)e.buf)[0] == 'a' + entries % 26);
		entries++;
		released = e.flags & FI_MULTI_RECV;
	}
	CHECK(released);
	CHECK_INT(entries, 20);
	/* the rest waits for the next buffer */
	{
		char *b2 = calloc(1, 4096);
		struct iovec iov2 = {b2, 4096};

		fm.msg_iov = &iov2;
		CHECK_INT(fi_recvmsg(B.ep, &fm, FI_MULTI_RECV | FI_COMPLETION), 0);
		for (int i = 0; i < M - 20; i++) {
			CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
			CHECK(((char *)e.buf)[0] == 'a' + (20 + i) % 26);
		}
		CHECK(empty(B.cq));
		CHECK_INT(fi_cancel(&B.ep->fid, &mctx), 0);
		CHECK_INT(cq_get(B.cq, &e, NULL, &err), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ECANCELED);
		free(b2);
	}
	min = 64;
	fi_setopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));
	free(buf);
}

static void test_peek_claim(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_msg_tagged tm;
	struct fi_context ctx;
	char buf[64] = {0}, big[4000], rbig[4000];
	struct iovec iov = {buf, sizeof(buf)};

	memset(&tm, 0, sizeof(tm));
	tm.msg_iov = &iov;
	tm.iov_count = 1;
	tm.addr = FI_ADDR_UNSPEC;
	tm.tag = 0x99;
	tm.context = &ctx;
	/* nothing there yet */
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_PEEK), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_ENOMSG);

	CHECK_INT(fi_tinjectdata(A.ep, "hello", 6, 1234, B.addr, 0x99), 0);
	pump();
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_PEEK), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_INT(e.len, 6);
	CHECK_HEX(e.tag, 0x99);
	CHECK_INT(e.data, 1234);
	CHECK(e.flags & FI_REMOTE_CQ_DATA);
	/* peek + claim, then claim it into the buffer */
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_PEEK | FI_CLAIM), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	/* a plain receive does not see a claimed message */
	{
		char other[8];

		CHECK_INT(
		    fi_trecv(B.ep, other, 8, NULL, FI_ADDR_UNSPEC, 0x99, 0, buf + 60), 0);
		CHECK(empty(B.cq));
		CHECK_INT(fi_cancel(&B.ep->fid, buf + 60), 0);
		CHECK_INT(cq_get(B.cq, &e, NULL, &err), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ECANCELED);
	}
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_CLAIM), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_STR(buf, "hello");
	CHECK_INT(e.data, 1234);

	/* a rendezvous-sized message: peek, claim, discard */
	fill(big, sizeof(big), 3);
	CHECK_INT(fi_tsend(A.ep, big, sizeof(big), NULL, B.addr, 0x99, NULL), 0);
	pump();
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_PEEK | FI_CLAIM), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_INT(e.len, sizeof(big));
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_CLAIM | FI_DISCARD), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1); /* the sender is released */
	/* and peek + discard */
	CHECK_INT(fi_tsend(A.ep, big, sizeof(big), NULL, B.addr, 0x99, NULL), 0);
	pump();
	CHECK_INT(fi_trecvmsg(B.ep, &tm, FI_PEEK | FI_DISCARD), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
	/* directed receive from A, tag mask */
	CHECK_INT(fi_trecv(B.ep, rbig, sizeof(rbig), NULL, A.addr, 0x90, 0x0f, NULL), 0);
	CHECK_INT(fi_tsend(A.ep, big, sizeof(big), NULL, B.addr, 0x9a, NULL), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_HEX(e.tag, 0x9a);
	CHECK(!memcmp(big, rbig, sizeof(big)));
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
	CHECK(empty(A.cq) && empty(B.cq));
}

static void test_trunc_data_dc(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char s[3000], r[100];
	struct iovec iov = {s, 50};
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = 0, .data = 77};

	fill(s, sizeof(s), 9);
	/* truncation, eager and rendezvous */
	for (size_t len = 200; len <= 3000; len += 2800) {
		CHECK_INT(fi_recv(B.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, NULL), 0);
		CHECK_INT(fi_send(A.ep, s, len, NULL, B.addr, NULL), 0);
		CHECK_INT(cq_get(B.cq, &e, NULL, &err), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ETRUNC);
		CHECK_INT(err.len, sizeof(r));
		CHECK_INT(err.olen, len - sizeof(r));
		CHECK(!memcmp(r, s, sizeof(r)));
		CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
	}
	/* remote CQ data + delivery complete: the sender's completion only
	 * after the receiver took the message */
	m.addr = B.addr;
	CHECK_INT(fi_sendmsg(A.ep, &m,
	                     FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE | FI_COMPLETION),
	          0);
	lm_rdm_progress(lm_rdm_ep_of(A.ep), false);
	CHECK(fi_cq_read(A.cq, &e, 1) == -FI_EAGAIN);
	lm_rdm_progress(lm_rdm_ep_of(B.ep), false); /* unexpected: no ack yet */
	lm_rdm_progress(lm_rdm_ep_of(A.ep), false);
	CHECK(fi_cq_read(A.cq, &e, 1) == -FI_EAGAIN);
	CHECK_INT(fi_recv(B.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_HEX(e.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	CHECK_INT(e.data, 77);
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
}

static void test_counters_selective(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t s0 = fi_cntr_read(A.scntr), r0 = fi_cntr_read(B.rcntr);
	char b[16];
	struct fid_ep *alias = NULL;
	uint64_t flags = FI_TRANSMIT;

	CHECK_INT(fi_recv(B.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(fi_inject(A.ep, "x", 1, B.addr), 0);
	for (int i = 0; i < 20 && fi_cntr_read(B.rcntr) == r0; i++)
		pump();
	CHECK_INT(fi_cntr_read(A.scntr), s0 + 1);
	CHECK_INT(fi_cntr_read(B.rcntr), r0 + 1);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	/* an alias with FI_INJECT op flags */
	CHECK_INT(fi_ep_alias(A.ep, &alias, FI_TRANSMIT | FI_INJECT), 0);
	CHECK_INT(fi_control(&alias->fid, FI_GETOPSFLAG, &flags), 0);
	CHECK_HEX(flags, FI_INJECT);
	CHECK_INT(fi_close(&A.ep->fid), -FI_EBUSY);
	CHECK_INT(fi_recv(B.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(fi_send(alias, "y", 1, NULL, B.addr, NULL), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_INT(cq_get(A.cq, &e, NULL, &err), 1);
	CHECK_INT(fi_close(&alias->fid), 0);
	/* fi_tx/rx_size_left are deprecated in the headers: call the ops */
	CHECK(A.ep->ops->tx_size_left(A.ep) > 0);
	CHECK(B.ep->ops->rx_size_left(B.ep) > 0);
}

/* A rendezvous whose receiver goes away: the sender's operation fails
 * with FI_EIO naming the peer, rather than waiting forever. */
static void test_peer_gone(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char big[5000], text[512];
	struct side C = {0};
	int sctx;

	open_side(&C);
	CHECK_INT(fi_send(A.ep, big, sizeof(big), NULL, C.addr, &sctx), 0);
	pump();
	close_side(&C);
	for (int i = 0; i < 3000; i++) {
		if (fi_cq_read(A.cq, &e, 1) == -FI_EAVAIL)
			break;
		usleep(100);
	}
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(A.cq, &err, 0), 1);
	CHECK_INT(err.err, FI_EIO);
	CHECK(err.op_context == &sctx);
	fi_cq_strerror(A.cq, err.prov_errno, err.err_data, text, sizeof(text));
	CHECK(strstr(text, "loop://") != NULL);
	fi_av_remove(fx.av, &C.addr, 1, 0);
}

int main(void)
{
	if (!loopfix_open(pump))
		return check_done();
	open_side(&A);
	open_side(&B);

	test_sizes();
	test_unexpected_many();
	test_multi_recv();
	test_peek_claim();
	test_trunc_data_dc();
	test_counters_selective();
	test_peer_gone();

	close_side(&A);
	close_side(&B);
	loopfix_close();
	return check_done();
}
