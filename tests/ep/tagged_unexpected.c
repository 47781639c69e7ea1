/* tagged_unexpected.c - tagged messages across processes: thousands sent
 * before any receive is posted and then received out of order by exact
 * tags and by tag/ignore masks; FI_PEEK, FI_CLAIM and FI_DISCARD; and
 * FI_DIRECTED_RECV telling two senders apart (three processes); and
 * messages that came before their sender was in the receiver's AV, found
 * by directed receives and FI_SOURCE once it is inserted (as Open MPI
 * inserts a peer when it first needs it). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define RECV 0
#define TMO  20000
#define N    3000
#define DONE 0xd0d0d0d0ULL

static struct et_ep E;

/* Message i of the big batch: its tag (group in the high half) and size. */
static uint64_t tag_of(unsigned i)
{
	return (uint64_t)(i % 10) << 32 | i;
}

static size_t size_of(uint64_t tag)
{
	unsigned i = (unsigned)tag;

	if (i % 331 == 0)
		return 200000 + i; /* rendezvous */
	if (i % 17 == 0)
		return 3000 + i % 50000; /* bounce buffer */
	return i % 150;                  /* inline */
}

/* Drain our transmit completions; returns how many arrived. */
static unsigned tx_drain(void)
{
	struct fi_cq_tagged_entry c[16];
	unsigned n = 0;
	ssize_t r;

	while ((r = fi_cq_read(E.txcq, c, 16)) > 0)
		n += (unsigned)r;
	if (r != -FI_EAGAIN) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(E.txcq, &err, 0);
		fprintf(stderr, "send error %d\n", err.err);
		CHECK(0);
	}
	return n;
}

static ssize_t tsend_retry(void *buf, size_t len, fi_addr_t to, uint64_t tag, void *ctx,
                           unsigned *done)
{
	uint64_t end = et_now_us() + TMO * 1000ull;
	ssize_t r;

	while ((r = fi_tsend(E.ep, buf, len, NULL, to, tag, ctx)) == -FI_EAGAIN &&
	       et_now_us() < end)
		*done += tx_drain();
	return r;
}

static void wait_tx(unsigned *done, unsigned want)
{
	uint64_t end = et_now_us() + TMO * 1000ull;

	while (*done < want && et_now_us() < end)
		*done += tx_drain();
	CHECK_INT(*done, want);
}

/* ---- thousands unexpected, matched out of order ------------------------------ */

static void batch(char *buf)
{
	if (E.rank == 1) {
		unsigned done = 0;
		size_t off = 0;

		for (unsigned i = 0; i < N; i++) {
			uint64_t t = tag_of(i);
			char *b = buf + off;

			/* A send owns its buffer until it completes. */
			off += size_of(t);
			et_fill(b, size_of(t), t);
			CHECK_INT(
			    tsend_retry(b, size_of(t), E.addr[RECV], t, NULL, &done), 0);
		}
		CHECK_INT(tsend_retry(buf, 0, E.addr[RECV], DONE, NULL, &done), 0);
		wait_tx(&done, N + 1);
		et_barrier();
	} else if (E.rank == RECV) {
		struct fi_cq_tagged_entry c;
		fi_addr_t src;
		unsigned next[10], got = 0;
		char *land = buf;

		/* Only the end marker has a receive: all else is unexpected. */
		CHECK_INT(fi_trecv(E.ep, buf, 0, NULL, FI_ADDR_UNSPEC, DONE, 0, NULL), 0);
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, 60000), 1);
		CHECK_HEX(c.tag, DONE);
		/* First half of each group by exact tag, newest first. */
		for (unsigned i = N; i-- > 0;) {
			uint64_t t = tag_of(i);

			if (i % 10 >= 5 || (i / 10) % 2)
				continue;
			CHECK_INT(fi_trecv(E.ep, land, 300000, NULL, FI_ADDR_UNSPEC, t, 0,
			                   NULL),
			          0);
			if (et_read(E.rxcq, &c, &src, NULL, NULL, TMO) != 1) {
				CHECK(0);
				return;
			}
			CHECK_HEX(c.tag, t);
			CHECK_INT(c.len, size_of(t));
			CHECK_INT(src, E.addr[1]);
			CHECK_INT(et_verify(land, c.len, t), (size_t)-1);
			got++;
		}
		/* The rest by group (ignore the low half): each must be the
		 * oldest of its group still waiting. */
		for (unsigned g = 0; g < 10; g++)
			next[g] = g;
		for (unsigned k = 0; got < N && k < 100 * N; k++) {
			unsigned g = (k * 7) % 10;
			uint64_t want;

			while (next[g] < N && g < 5 && !((next[g] / 10) % 2))
				next[g] += 10; /* taken above */
			if (next[g] >= N)
				continue;
			want = tag_of(next[g]);
			next[g] += 10;
			CHECK_INT(fi_trecv(E.ep, land, 300000, NULL, FI_ADDR_UNSPEC,
			                   (uint64_t)g << 32, 0xffffffffULL, NULL),
			          0);
			if (et_read(E.rxcq, &c, &src, NULL, NULL, TMO) != 1) {
				CHECK(0);
				return;
			}
			if (c.tag != want) {
				fprintf(stderr, "group %u: got tag %#llx, want %#llx\n",
				        g, (unsigned long long)c.tag,
				        (unsigned long long)want);
				CHECK(0);
				return;
			}
			CHECK_INT(c.len, size_of(want));
			CHECK_INT(et_verify(land, c.len, want), (size_t)-1);
			got++;
		}
		CHECK_INT(got, N);
		CHECK_INT(fi_cq_read(E.rxcq, &c, 1), -FI_EAGAIN);
		et_barrier();
	} else {
		et_barrier();
	}
}

/* ---- FI_PEEK, FI_CLAIM, FI_DISCARD ------------------------------------------------- */

static ssize_t trecvmsg(void *buf, size_t len, uint64_t tag, void *ctx, uint64_t flags)
{
	struct iovec iov = {buf, len};
	struct fi_msg_tagged m = {.msg_iov = &iov,
	                          .iov_count = buf ? 1 : 0,
	                          .addr = FI_ADDR_UNSPEC,
	                          .tag = tag,
	                          .context = ctx};

	return fi_trecvmsg(E.ep, &m, flags);
}

static void peek(char *buf)
{
	static const size_t lens[4] = {50, 5000, 40, 1 << 20};
	const uint64_t T = 0x5000;

	if (E.rank == 1) {
		unsigned done = 0;

		for (unsigned i = 0; i < 4; i++) {
			et_fill(buf + i * (2 << 20), lens[i], T + i);
			CHECK_INT(fi_tsenddata(E.ep, buf + i * (2 << 20), lens[i], NULL,
			                       1000 + i, E.addr[RECV], T + i, NULL),
			          0);
		}
		et_barrier(); /* sent */
		wait_tx(&done, 4);
		et_barrier();
	} else if (E.rank == RECV) {
		struct fi_context ctx[4];
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		uint64_t end = et_now_us() + TMO * 1000ull;
		ssize_t r;

		et_barrier();
		/* A tag nobody sent: FI_ENOMSG, as an error entry. */
		CHECK_INT(trecvmsg(NULL, 0, T + 9, &ctx[0], FI_PEEK), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, TMO), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ENOMSG);
		CHECK(err.op_context == &ctx[0]);
		/* Peek T: it may take a few tries until all four arrived. */
		do {
			CHECK_INT(trecvmsg(NULL, 0, T, &ctx[0], FI_PEEK), 0);
			r = et_read(E.rxcq, &c, &src, &err, NULL, TMO);
		} while (r == -FI_EAVAIL && err.err == FI_ENOMSG && et_now_us() < end);
		CHECK_INT(r, 1);
		CHECK(c.op_context == &ctx[0]);
		CHECK_INT(c.len, lens[0]);
		CHECK_HEX(c.tag, T);
		CHECK_HEX(c.data, 1000);
		CHECK_INT(src, E.addr[1]);
		CHECK(c.flags & FI_TAGGED);
		/* Still there: a second peek sees it again. */
		CHECK_INT(trecvmsg(NULL, 0, T, &ctx[0], FI_PEEK), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK_HEX(c.tag, T);
		/* Wait until the last (largest) one is in as well. */
		do {
			CHECK_INT(trecvmsg(NULL, 0, T + 3, &ctx[3], FI_PEEK), 0);
			r = et_read(E.rxcq, &c, &src, &err, NULL, TMO);
		} while (r == -FI_EAVAIL && err.err == FI_ENOMSG && et_now_us() < end);
		CHECK_INT(r, 1);
		CHECK_INT(c.len, lens[3]);

		/* Peek + claim T+1, then receive it with FI_CLAIM. */
		CHECK_INT(trecvmsg(NULL, 0, T + 1, &ctx[1], FI_PEEK | FI_CLAIM), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx[1]);
		CHECK_INT(c.len, lens[1]);
		/* Claimed: a peek no longer finds it. */
		CHECK_INT(trecvmsg(NULL, 0, T + 1, &ctx[0], FI_PEEK), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, TMO), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ENOMSG);
		memset(buf, 0, lens[1]);
		CHECK_INT(trecvmsg(buf, lens[1], T + 1, &ctx[1], FI_CLAIM), 0);
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx[1]);
		CHECK_INT(c.len, lens[1]);
		CHECK_HEX(c.data, 1001);
		CHECK_INT(src, E.addr[1]);
		CHECK_INT(et_verify(buf, lens[1], T + 1), (size_t)-1);

		/* Peek + discard T+2: gone, with a completion. */
		CHECK_INT(trecvmsg(NULL, 0, T + 2, &ctx[2], FI_PEEK | FI_DISCARD), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx[2]);
		CHECK_INT(trecvmsg(NULL, 0, T + 2, &ctx[0], FI_PEEK), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, TMO), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ENOMSG);

		/* Claim the rendezvous one, then discard it by claim. */
		CHECK_INT(trecvmsg(NULL, 0, T + 3, &ctx[3], FI_PEEK | FI_CLAIM), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK_INT(trecvmsg(NULL, 0, T + 3, &ctx[3], FI_CLAIM | FI_DISCARD), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx[3]);
		CHECK_INT(fi_cq_read(E.rxcq, &c, 1), -FI_EAGAIN);
		et_barrier(); /* the sender's four sends complete */
	} else {
		et_barrier();
		et_barrier();
	}
}

/* ---- FI_DIRECTED_RECV with two senders --------------------------------------------- */

#define K 60

static void directed(char *buf)
{
	const uint64_t T = 0x7777;

	if (E.rank != RECV) {
		unsigned done = 0;

		/* Round 1: both send K unexpected messages with the same tag. */
		for (unsigned i = 0; i < K; i++) {
			char *b = buf + i * 70000;
			size_t len = i % 20 == 3 ? 66000 : 8 + i;

			et_fill(b, len, (uint64_t)E.rank << 20 | i);
			CHECK_INT(tsend_retry(b, len, E.addr[RECV], T, NULL, &done), 0);
		}
		et_barrier();
		wait_tx(&done, K);
		/* Round 2: receives already posted for rank 1 then rank 2;
		 * rank 2 sends first and must still land in its own. */
		et_barrier();
		if (E.rank == 2) {
			et_fill(buf, 100, 2222);
			CHECK_INT(tsend_retry(buf, 100, E.addr[RECV], T, NULL, &done), 0);
			wait_tx(&done, K + 1);
		}
		et_barrier();
		if (E.rank == 1) {
			et_fill(buf, 100, 1111);
			CHECK_INT(tsend_retry(buf, 100, E.addr[RECV], T, NULL, &done), 0);
			wait_tx(&done, K + 1);
		}
		et_barrier();
	} else {
		struct fi_cq_tagged_entry c;
		int ctx1, ctx2;
		fi_addr_t src;

		et_barrier();
		/* All of rank 2's first, though rank 1's may have come first. */
		for (int r = 2; r >= 1; r--) {
			for (unsigned i = 0; i < K; i++) {
				size_t len = i % 20 == 3 ? 66000 : 8 + i;

				CHECK_INT(fi_trecv(E.ep, buf, 70000, NULL, E.addr[r], T,
				                   0, NULL),
				          0);
				if (et_read(E.rxcq, &c, &src, NULL, NULL, TMO) != 1) {
					CHECK(0);
					return;
				}
				CHECK_INT(src, E.addr[r]);
				CHECK_INT(c.len, len);
				CHECK_INT(et_verify(buf, len, (uint64_t)r << 20 | i),
				          (size_t)-1);
			}
		}
		CHECK_INT(fi_trecv(E.ep, buf, 100, NULL, E.addr[1], T, 0, &ctx1), 0);
		CHECK_INT(fi_trecv(E.ep, buf + 1000, 100, NULL, E.addr[2], T, 0, &ctx2),
		          0);
		et_barrier();
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx2);
		CHECK_INT(src, E.addr[2]);
		CHECK_INT(et_verify(buf + 1000, 100, 2222), (size_t)-1);
		et_barrier();
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx1);
		CHECK_INT(src, E.addr[1]);
		CHECK_INT(et_verify(buf, 100, 1111), (size_t)-1);
		et_barrier();
	}
}

/* ---- a sender the AV learns of after its messages came ------------------------ */

static void late_insert(char *buf)
{
	static const size_t lens[3] = {8, 3000, 200000}; /* inline .. rendezvous */
	const uint64_t T = 0x6000;

	if (E.rank == 1) {
		unsigned done = 0;

		et_barrier(); /* the receiver forgot us */
		for (unsigned i = 0; i < 3; i++) {
			et_fill(buf + i * 300000, lens[i], T + i);
			CHECK_INT(tsend_retry(buf + i * 300000, lens[i], E.addr[RECV], T + i,
			                      NULL, &done),
			          0);
		}
		et_fill(buf + 900000, 77, T + 3);
		CHECK_INT(fi_send(E.ep, buf + 900000, 77, NULL, E.addr[RECV], NULL), 0);
		et_barrier(); /* sent */
		wait_tx(&done, 4);
		et_barrier();
	} else if (E.rank == RECV) {
		struct fi_context ctx;
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		fi_addr_t src = 0, a = FI_ADDR_NOTAVAIL;
		uint64_t end = et_now_us() + TMO * 1000ull;
		ssize_t r;

		CHECK_INT(fi_av_remove(E.av, &E.addr[1], 1, 0), 0);
		et_barrier();
		et_barrier();
		/* Every message is here before the address is: the last tagged
		 * one peeked (per-sender order), the untagged one by progress. */
		do {
			CHECK_INT(trecvmsg(NULL, 0, T + 2, &ctx, FI_PEEK), 0);
			r = et_read(E.rxcq, &c, &src, &err, NULL, TMO);
		} while (r == -FI_EAVAIL && err.err == FI_ENOMSG && et_now_us() < end);
		CHECK_INT(r, 1);
		CHECK_INT(src, FI_ADDR_NOTAVAIL); /* FI_SOURCE: not in the AV */
		CHECK_INT(fi_av_insert(E.av, E.peer_name[1], 1, &a, 0, NULL), 1);
		/* Directed to the sender, in its order; the rendezvous one too. */
		for (unsigned i = 1; i < 3; i++) {
			CHECK_INT(fi_trecv(E.ep, buf, lens[i], NULL, a, T + i, 0, NULL), 0);
			CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
			CHECK_INT(src, a);
			CHECK_INT(c.len, lens[i]);
			CHECK_INT(et_verify(buf, lens[i], T + i), (size_t)-1);
		}
		/* From any source: FI_SOURCE names it now. */
		CHECK_INT(fi_trecv(E.ep, buf, lens[0], NULL, FI_ADDR_UNSPEC, T, 0, NULL), 0);
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK_INT(src, a);
		CHECK_INT(et_verify(buf, lens[0], T), (size_t)-1);
		/* Untagged, directed. */
		CHECK_INT(fi_recv(E.ep, buf, 77, NULL, a, NULL), 0);
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK_INT(src, a);
		CHECK_INT(et_verify(buf, 77, T + 3), (size_t)-1);
		E.addr[1] = a;
		et_barrier();
	} else {
		et_barrier();
		et_barrier();
		et_barrier();
	}
}

static int proc(int rank, int nprocs, void *arg)
{
	char *buf = malloc((size_t)80 << 20);

	(void)rank, (void)nprocs, (void)arg;
	if (!buf || et_open(&E, NULL))
		return 2;
	batch(buf);
	peek(buf);
	directed(buf);
	late_insert(buf);
	CHECK_INT(et_close(&E), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	int bad = et_run("tagged_unexpected", 3, 240, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("tagged_unexpected (no CMA)", 3, 240, proc, NULL, 0);
	return bad;
}
