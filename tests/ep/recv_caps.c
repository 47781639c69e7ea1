/* recv_caps.c - the receive capabilities of API 2.0 between processes,
 * each on an endpoint that asked for it with FI_VERSION(2, 0):
 *   - FI_TAGGED_DIRECTED_RECV: a tagged receive naming peer A takes only
 *     A's messages (B's wait, unexpected, for a receive naming B); an
 *     untagged one naming A takes B's message, posted before or after it
 *     came.  Three processes: rank 0 receives, ranks 1 (A) and 2 (B) send.
 *   - FI_TAGGED_MULTI_RECV: a tagged FI_MULTI_RECV buffer takes the
 *     messages its tag and ignore bits match, eager and rendezvous, sent
 *     before and after it was posted, each completion naming its own piece
 *     and tag; messages with other tags go to ordinary receives; every
 *     buffer is released by one FI_MULTI_RECV completion once less than
 *     FI_OPT_MIN_MULTI_RECV is left.
 *   - FI_EXACT_DIRECTED_RECV: receives with FI_ADDR_UNSPEC are refused
 *     (-FI_EINVAL), receives naming a peer take only its messages; with
 *     FI_TAGGED_DIRECTED_RECV as well, only tagged receives must name one. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define TMO   20000
#define QUIET 300 /* ms with no completion expected */

#define RANK_A 1
#define RANK_B 2

static struct et_ep E;

static int open_v2(uint64_t caps)
{
	struct et_opts o = {.caps = caps, .version = FI_VERSION(2, 0), .split_cq = true};
	int ret = et_open(&E, &o);

	if (ret)
		return ret;
	CHECK_HEX(E.info->caps & caps, caps);
	return 0;
}

/* Sends posted and not yet completed.  Their completions are read at
 * the end of a phase: a tcp sender waiting for one while the receiver
 * sits in a barrier would wait for a connection nobody accepts. */
static unsigned sends_out;

/* One small message to rank `to`, carrying its seed (< 32) as CQ data;
 * its buffer stays until the send completes. */
static void send_to(int to, bool tagged, uint64_t tag, uint64_t seed, size_t len)
{
	static char bufs[32][64];
	char *buf = bufs[seed];
	uint64_t end = et_now_us() + TMO * 1000ull;
	ssize_t r;

	et_fill(buf, len, seed);
	do {
		r = tagged
		        ? fi_tsenddata(E.ep, buf, len, NULL, seed, E.addr[to], tag, NULL)
		        : fi_senddata(E.ep, buf, len, NULL, seed, E.addr[to], NULL);
		if (r == -FI_EAGAIN)
			et_progress(&E);
	} while (r == -FI_EAGAIN && et_now_us() < end);
	CHECK_INT(r, 0);
	if (!r)
		sends_out++;
}

static void reap_sends(void)
{
	for (; sends_out; sends_out--) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err = {0};
		ssize_t r = et_read(E.txcq, &c, NULL, &err, NULL, TMO);

		CHECK_INT(r, 1);
		if (r != 1) {
			fprintf(stderr, "rank %d: a send failed: %d (%s)\n", E.rank,
			        err.err, fi_strerror(err.err));
			sends_out = 0;
			return;
		}
	}
}

/* The next receive completion: for context ctx, from rank `from`, carrying
 * message seed (its CQ data) whole. */
static void expect(void *ctx, int from, uint64_t seed, size_t len)
{
	struct fi_cq_tagged_entry c = {0};
	struct fi_cq_err_entry err = {0};
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	ssize_t r = et_read(E.rxcq, &c, &src, &err, NULL, TMO);

	CHECK_INT(r, 1);
	if (r != 1) {
		fprintf(stderr, "no completion for message %llu (err %d)\n",
		        (unsigned long long)seed, err.err);
		return;
	}
	CHECK(c.op_context == ctx);
	CHECK_INT(src, E.addr[from]);
	CHECK_INT(c.data, seed);
	CHECK_INT(c.len, len);
	CHECK(et_verify(c.buf, c.len, seed) == (size_t)-1);
}

static void expect_nothing(void)
{
	struct fi_cq_tagged_entry c = {0};

	CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, QUIET), -FI_ETIMEDOUT);
}

/* ---- FI_TAGGED_DIRECTED_RECV ----------------------------------------------- */

#define TAG_D    7
#define TAG_MARK 0x77

/* A sender's messages reach the receiver in order, so once its marker
 * (tagged TAG_MARK, seed `seed`) is in, so are the messages it sent
 * before: queued if no receive took them. */
static void send_marker(uint64_t seed)
{
	send_to(0, true, TAG_MARK, seed, 1);
}

static void expect_marker(int from, uint64_t seed)
{
	static char m[64];

	CHECK_INT(fi_trecv(E.ep, m, sizeof(m), NULL, E.addr[from], TAG_MARK, 0, m), 0);
	expect(m, from, seed, 1);
}

static void tagged_directed(int rank)
{
	static char ua[64], ta[64], tb[64], u2[64];
	uint64_t caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_TAGGED_DIRECTED_RECV;

	if (open_v2(caps)) {
		CHECK(0);
		return;
	}
	/* Asked for tagged-only directed receive: not the whole of it. */
	CHECK_HEX(E.info->caps & (FI_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV), 0);
	if (rank == 0) {
		CHECK_INT(fi_recv(E.ep, ua, sizeof(ua), NULL, E.addr[RANK_A], ua), 0);
		CHECK_INT(
		    fi_trecv(E.ep, ta, sizeof(ta), NULL, E.addr[RANK_A], TAG_D, 0, ta),
		    0);
	}
	et_barrier();
	/* Senders read their completions while the receiver drives its
	 * endpoint (over tcp a send needs both ends' progress). */
	if (rank == RANK_B) {
		send_to(0, false, 0, 1, 10);
		send_to(0, true, TAG_D, 2, 20);
		send_marker(3);
		reap_sends();
	}
	if (rank == 0) {
		/* The untagged receive named A and took B's message; the
		 * tagged one let B's pass. */
		expect(ua, RANK_B, 1, 10);
		expect_marker(RANK_B, 3);
		expect_nothing();
	}
	et_barrier();
	if (rank == RANK_A) {
		send_to(0, true, TAG_D, 4, 30);
		reap_sends();
	}
	if (rank == 0) {
		expect(ta, RANK_A, 4, 30);
		/* B's tagged message waited for a receive naming B. */
		CHECK_INT(
		    fi_trecv(E.ep, tb, sizeof(tb), NULL, E.addr[RANK_B], TAG_D, 0, tb),
		    0);
		expect(tb, RANK_B, 2, 20);
	}
	et_barrier();
	/* Queued first: an untagged receive naming A takes B's message. */
	if (rank == RANK_B) {
		send_to(0, false, 0, 5, 40);
		send_marker(6);
		reap_sends();
	}
	if (rank == 0) {
		expect_marker(RANK_B, 6);
		CHECK_INT(fi_recv(E.ep, u2, sizeof(u2), NULL, E.addr[RANK_A], u2), 0);
		expect(u2, RANK_B, 5, 40);
		expect_nothing();
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);
}

/* ---- FI_TAGGED_MULTI_RECV -------------------------------------------------- */

#define M           600
#define EARLY       40 /* sent before the buffers are posted */
#define BUFSZ       (256 * 1024)
#define MIN_MR      70000 /* more than any message: one always fits */
#define NBUF        2
#define TAG_MR      0x1200 /* the buffers take 0x1200..0x12ff */
#define IGN_MR      0xff
#define TAG_ELSE    0x5000 /* every OTHER_EVERY-th message: ordinary receives */
#define OTHER_EVERY 12
#define NOTHER      (M / OTHER_EVERY)

static size_t mr_size(unsigned i)
{
	if (i % 40 == 13)
		return 66000 + i; /* over the link's payload: rendezvous */
	if (i % 20 == 5)
		return 3000;
	return i % 300;
}

static uint64_t mr_tag(unsigned i)
{
	return i % OTHER_EVERY == OTHER_EVERY - 1 ? TAG_ELSE + i : TAG_MR | (i & 0xff);
}

static void mr_send_range(char *buf, unsigned from, unsigned to, unsigned *done)
{
	size_t off = 0;

	for (unsigned i = 0; i < from; i++)
		off += mr_size(i);
	for (unsigned i = from; i < to; i++) {
		size_t len = mr_size(i);
		char *b = buf + off;
		uint64_t end = et_now_us() + TMO * 1000ull;
		ssize_t r;

		off += len;
		et_fill(b, len, i);
		while ((r = fi_tsenddata(E.ep, b, len, NULL, i, E.addr[0], mr_tag(i),
		                         NULL)) == -FI_EAGAIN &&
		       et_now_us() < end) {
			struct fi_cq_tagged_entry c[8];
			ssize_t n = fi_cq_read(E.txcq, c, 8);

			if (n > 0)
				*done += (unsigned)n;
		}
		CHECK_INT(r, 0);
	}
}

static void mr_sender(void)
{
	size_t total = 0;
	unsigned done = 0;
	char *buf;

	for (unsigned i = 0; i < M; i++)
		total += mr_size(i);
	buf = malloc(total);
	/* The first ones find no buffer posted: unexpected, rendezvous
	 * included (their sends complete once taken). */
	mr_send_range(buf, 0, EARLY, &done);
	et_barrier();
	mr_send_range(buf, EARLY, M, &done);
	while (done < M) {
		struct fi_cq_tagged_entry c;

		if (et_read(E.txcq, &c, NULL, NULL, NULL, TMO) != 1)
			break;
		done++;
	}
	CHECK_INT(done, M);
	free(buf);
}

struct posting {
	struct fi_msg_tagged m;
	int buf;
	bool done;
	size_t max_end;
};

static void mr_post(struct posting *p, struct iovec *iov, int b)
{
	p->m = (struct fi_msg_tagged){.msg_iov = &iov[b],
	                              .iov_count = 1,
	                              .addr = FI_ADDR_UNSPEC,
	                              .tag = TAG_MR,
	                              .ignore = IGN_MR,
	                              .context = p};
	p->buf = b;
	CHECK_INT(fi_trecvmsg(E.ep, &p->m, FI_MULTI_RECV), 0);
}

static void mr_receiver(void)
{
	static struct posting posts[M];
	static unsigned char used[NBUF][BUFSZ];
	static char other[NOTHER][512];
	static bool seen[M];
	char *bufs[NBUF];
	struct iovec iov[NBUF];
	size_t v = MIN_MR, nposts = 0;
	unsigned released = 0, got = 0, got_other = 0;

	CHECK_INT(
	    fi_setopt(&E.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)),
	    0);
	et_barrier(); /* the early messages are on their way */
	for (int k = 0; k < NOTHER; k++)
		CHECK_INT(fi_trecv(E.ep, other[k], sizeof(other[k]), NULL, FI_ADDR_UNSPEC,
		                   TAG_ELSE, 0xfff, other[k]),
		          0);
	for (int b = 0; b < NBUF; b++) {
		bufs[b] = malloc(BUFSZ);
		iov[b] = (struct iovec){bufs[b], BUFSZ};
		mr_post(&posts[nposts++], iov, b);
	}
	while (got + got_other < M) {
		struct fi_cq_tagged_entry c = {0};
		struct fi_cq_err_entry err = {0};
		struct posting *p;
		fi_addr_t src;
		uint64_t i;
		int b;

		if (et_read(E.rxcq, &c, &src, &err, NULL, TMO) != 1) {
			fprintf(stderr,
			        "after %u + %u messages: no completion (err %d)\n", got,
			        got_other, err.err);
			CHECK(0);
			break;
		}
		i = c.data;
		if ((char *)c.op_context >= (char *)other &&
		    (char *)c.op_context < (char *)other + sizeof(other)) {
			/* Another tag: an ordinary receive, never the buffer. */
			CHECK_HEX(c.flags & (FI_RECV | FI_TAGGED | FI_MULTI_RECV),
			          FI_RECV | FI_TAGGED);
			CHECK(i < M && i % OTHER_EVERY == OTHER_EVERY - 1);
			CHECK_HEX(c.tag, mr_tag((unsigned)i));
			CHECK_INT(c.len, mr_size((unsigned)i));
			CHECK(et_verify(c.buf, c.len, i) == (size_t)-1);
			got_other++;
			continue;
		}
		p = c.op_context;
		if (p < posts || p >= posts + nposts || p->done) {
			fprintf(stderr, "completion for a released or unknown buffer\n");
			CHECK(0);
			break;
		}
		b = p->buf;
		if (c.flags & FI_RECV) {
			size_t off = (size_t)((char *)c.buf - bufs[b]);

			CHECK_HEX(c.flags & (FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA),
			          FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
			CHECK_INT(src, E.addr[RANK_A]);
			if (i >= M || seen[i] || i % OTHER_EVERY == OTHER_EVERY - 1) {
				fprintf(stderr, "message %llu wrong, or seen twice\n",
				        (unsigned long long)i);
				CHECK(0);
				break;
			}
			seen[i] = true;
			CHECK_HEX(c.tag, mr_tag((unsigned)i));
			CHECK_INT(c.len, mr_size((unsigned)i));
			if ((char *)c.buf < bufs[b] || off + c.len > BUFSZ) {
				fprintf(stderr, "message %llu outside its buffer\n",
				        (unsigned long long)i);
				CHECK(0);
				break;
			}
			for (size_t k = off; k < off + c.len; k++)
				if (used[b][k]++) {
					fprintf(stderr, "message %llu overlaps at %zu\n",
					        (unsigned long long)i, k);
					CHECK(0);
					break;
				}
			CHECK(et_verify(c.buf, c.len, i) == (size_t)-1);
			if (off + c.len > p->max_end)
				p->max_end = off + c.len;
			got++;
		}
		if (c.flags & FI_MULTI_RECV) {
			CHECK(BUFSZ - p->max_end < MIN_MR);
			p->done = true;
			released++;
			memset(used[b], 0, BUFSZ);
			mr_post(&posts[nposts++], iov, b);
		}
	}
	CHECK_INT(got, M - NOTHER);
	CHECK_INT(got_other, NOTHER);
	/* A buffer is released holding more than BUFSZ - MIN_MR bytes. */
	CHECK(released >= 5);
	et_barrier();
	/* The buffers still posted go with the endpoint. */
	CHECK_INT(et_close(&E), 0);
	for (int b = 0; b < NBUF; b++)
		free(bufs[b]);
}

static void tagged_multi(int rank)
{
	if (open_v2(FI_TAGGED | FI_SOURCE | FI_TAGGED_MULTI_RECV)) {
		CHECK(0);
		return;
	}
	if (rank == 0) {
		mr_receiver();
		return;
	}
	if (rank == RANK_A)
		mr_sender();
	else
		et_barrier();
	et_barrier();
	CHECK_INT(et_close(&E), 0);
}

/* ---- FI_EXACT_DIRECTED_RECV -------------------------------------------------- */

#define TAG_X 9

static void exact(int rank)
{
	static char buf[6][64];
	uint64_t caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_EXACT_DIRECTED_RECV;
	struct fi_msg_tagged tm;
	struct iovec iov = {buf[5], sizeof(buf[5])};

	if (open_v2(caps)) {
		CHECK(0);
		return;
	}
	if (rank == 0) {
		/* Every receive names its source. */
		CHECK_INT(fi_recv(E.ep, buf[0], 64, NULL, FI_ADDR_UNSPEC, buf[0]),
		          -FI_EINVAL);
		CHECK_INT(
		    fi_trecv(E.ep, buf[0], 64, NULL, FI_ADDR_UNSPEC, TAG_X, 0, buf[0]),
		    -FI_EINVAL);
		tm = (struct fi_msg_tagged){.msg_iov = &iov,
		                            .iov_count = 1,
		                            .addr = FI_ADDR_UNSPEC,
		                            .tag = TAG_X,
		                            .context = buf[5]};
		CHECK_INT(fi_trecvmsg(E.ep, &tm, 0), -FI_EINVAL);
		CHECK_INT(fi_trecvmsg(E.ep, &tm, FI_PEEK), -FI_EINVAL);
		CHECK_INT(fi_recv(E.ep, buf[0], 64, NULL, E.addr[RANK_B], buf[0]), 0);
		CHECK_INT(
		    fi_trecv(E.ep, buf[1], 64, NULL, E.addr[RANK_B], TAG_X, 0, buf[1]),
		    0);
	}
	et_barrier();
	if (rank == RANK_A) {
		send_to(0, false, 0, 11, 11);
		send_to(0, true, TAG_X, 12, 12);
		send_marker(13);
		reap_sends();
	}
	if (rank == 0) {
		expect_marker(RANK_A, 13);
		expect_nothing(); /* A's messages wait: the receives name B */
	}
	et_barrier();
	if (rank == RANK_B) {
		send_to(0, true, TAG_X, 14, 14);
		send_to(0, false, 0, 15, 15);
		reap_sends();
	}
	if (rank == 0) {
		/* Completion order between the two kinds is not promised. */
		struct fi_cq_tagged_entry c[2] = {{0}};
		fi_addr_t src[2];

		for (int k = 0; k < 2; k++) {
			CHECK_INT(et_read(E.rxcq, &c[k], &src[k], NULL, NULL, TMO), 1);
			CHECK_INT(src[k], E.addr[RANK_B]);
			CHECK_INT(c[k].data, c[k].op_context == buf[0] ? 15 : 14);
			CHECK(et_verify(c[k].buf, c[k].len, c[k].data) == (size_t)-1);
		}
		CHECK(c[0].op_context != c[1].op_context);
		/* Now A's queued ones, by receives naming A. */
		CHECK_INT(fi_recv(E.ep, buf[2], 64, NULL, E.addr[RANK_A], buf[2]), 0);
		expect(buf[2], RANK_A, 11, 11);
		CHECK_INT(
		    fi_trecv(E.ep, buf[3], 64, NULL, E.addr[RANK_A], TAG_X, 0, buf[3]),
		    0);
		expect(buf[3], RANK_A, 12, 12);
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);

	/* As a modifier of tagged-only directed receive: untagged receives
	 * take any source, and may say so. */
	caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_TAGGED_DIRECTED_RECV |
	       FI_EXACT_DIRECTED_RECV;
	if (open_v2(caps)) {
		CHECK(0);
		return;
	}
	if (rank == 0) {
		CHECK_INT(
		    fi_trecv(E.ep, buf[0], 64, NULL, FI_ADDR_UNSPEC, TAG_X, 0, buf[0]),
		    -FI_EINVAL);
		CHECK_INT(fi_recv(E.ep, buf[4], 64, NULL, FI_ADDR_UNSPEC, buf[4]), 0);
	}
	et_barrier();
	if (rank == RANK_A) {
		send_to(0, false, 0, 16, 16);
		reap_sends();
	}
	if (rank == 0)
		expect(buf[4], RANK_A, 16, 16);
	et_barrier();
	CHECK_INT(et_close(&E), 0);
}

static int proc(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	tagged_directed(rank);
	tagged_multi(rank);
	exact(rank);
	return check_done();
}

int main(void)
{
	return et_run("recv_caps", 3, 120, proc, NULL, 0);
}
