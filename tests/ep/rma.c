/* rma.c - RMA and atomics between two processes on the provider under test,
 * through the public API only: writes and reads of 1 B .. 16 MiB checked
 * byte for byte, writedata with remote CQ data at the target, SUM atomics
 * on one counter from both processes at once (the total must be exact),
 * fetch and compare results, and rejected accesses (bad key, out of
 * bounds) reported as error completions; with CMA and without. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define BIG ((size_t)16 << 20)
#define K   2000 /* SUM atomics per process */
#define WIN 32
#define TMO 20000

struct keys {
	uint64_t buf, buf_key; /* BIG bytes, read/write */
	uint64_t ctr, ctr_key; /* one uint64, read/write */
};

static struct et_ep E;
static struct keys peer_keys[ET_MAX_PROCS];
static unsigned cq_data_seen;
static uint64_t cq_data_last;

/* Read completions until ctx's; remote CQ data entries are counted on the
 * way.  Returns 1, or -FI_EAVAIL with *err filled for ctx's error. */
static void *early[8]; /* completions read while waiting for another */

static ssize_t wait_ctx(void *ctx, struct fi_cq_err_entry *err)
{
	for (size_t i = 0; i < 8; i++)
		if (early[i] == ctx) {
			early[i] = NULL;
			return 1;
		}
	for (;;) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry e;
		ssize_t r = et_read(E.txcq, &c, NULL, &e, NULL, TMO);

		if (r == -FI_EAVAIL) {
			if (err)
				*err = e;
			CHECK(e.op_context == ctx);
			return r;
		}
		if (r != 1) {
			fprintf(stderr, "rank %d: no completion (%zd)\n", E.rank, r);
			CHECK(0);
			return r;
		}
		if (c.flags & FI_REMOTE_CQ_DATA) {
			CHECK_HEX(c.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
			cq_data_seen++;
			cq_data_last = c.data;
			continue;
		}
		if (c.op_context == ctx)
			return 1;
		for (size_t i = 0; i < 8; i++)
			if (!early[i]) {
				early[i] = c.op_context;
				break;
			}
	}
}

/* Tell the peer a phase is over, and wait (progressing) for its word. */
static void handshake(uint64_t word)
{
	uint64_t in = 0, out = word;
	int rctx, sctx;

	CHECK_INT(fi_recv(E.ep, &in, sizeof(in), NULL, FI_ADDR_UNSPEC, &rctx), 0);
	CHECK_INT(fi_send(E.ep, &out, sizeof(out), NULL, E.addr[1 - E.rank], &sctx), 0);
	CHECK_INT(wait_ctx(&sctx, NULL), 1);
	CHECK_INT(wait_ctx(&rctx, NULL), 1);
	CHECK_HEX(in, word);
}

static void rma_sizes(char *src, char *back)
{
	const struct keys *k = &peer_keys[1];
	fi_addr_t peer = E.addr[1];
	unsigned writes = 0;
	int ctx;

	static const size_t sizes[] = {1,       7,       64,          150,   200,
	                               255,     4095,    65535,       65536, 65537,
	                               1 << 20, 3000001, BIG / 2 + 1, BIG};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i], off = len == BIG ? 0 : len & 63;

		et_fill(src, len, len);
		if (writes % 2)
			CHECK_INT(fi_writedata(E.ep, src, len, NULL, len, peer,
			                       k->buf + off, k->buf_key, &ctx),
			          0);
		else
			CHECK_INT(fi_write(E.ep, src, len, NULL, peer, k->buf + off,
			                   k->buf_key, &ctx),
			          0);
		writes++;
		CHECK_INT(wait_ctx(&ctx, NULL), 1);
		memset(back, 0, len);
		CHECK_INT(
		    fi_read(E.ep, back, len, NULL, peer, k->buf + off, k->buf_key, &ctx),
		    0);
		CHECK_INT(wait_ctx(&ctx, NULL), 1);
		if (et_verify(back, len, len) != (size_t)-1) {
			fprintf(stderr, "%zu bytes: read back differs at %zu\n", len,
			        et_verify(back, len, len));
			CHECK(0);
		}
	}
	/* Into memory this process never wrote (the last write left BIG's
	 * pattern at k->buf): under valgrind, what the target copied in by
	 * cross-memory attach must read as defined (lm_rdm_iov_written). */
	{
		char *fresh = malloc(1 << 20);

		CHECK(fresh != NULL);
		if (fresh) {
			CHECK_INT(fi_read(E.ep, fresh, 1 << 20, NULL, peer, k->buf,
			                  k->buf_key, &ctx),
			          0);
			CHECK_INT(wait_ctx(&ctx, NULL), 1);
			CHECK(et_verify(fresh, 1 << 20, BIG) == (size_t)-1);
			free(fresh);
		}
	}
	/* the peer counts the writedata entries it saw */
	handshake(writes / 2);
}

static void sum_both(void)
{
	const struct keys *k = &peer_keys[0];
	uint64_t one = 1;
	struct fi_context ctx[WIN];
	size_t posted = 0, done = 0;

	/* rank 0 adds to its own counter through its own address */
	while (done < K) {
		while (posted < K && posted - done < WIN) {
			ssize_t r =
			    fi_atomic(E.ep, &one, 1, NULL, E.addr[0], k->ctr, k->ctr_key,
			              FI_UINT64, FI_SUM, &ctx[posted % WIN]);

			if (r == -FI_EAGAIN)
				break;
			CHECK_INT(r, 0);
			if (r)
				return;
			posted++;
		}
		CHECK_INT(wait_ctx(&ctx[done % WIN], NULL), 1);
		done++;
	}
	handshake(0x5u);
}

static void fetch_compare(uint64_t *ctr)
{
	const struct keys *k = &peer_keys[0];
	uint64_t old = 0, want = 2 * K, swap = 7, cmp = 2 * K;
	int ctx;

	if (E.rank == 0) {
		/* rank 1 may already have swapped in 7 (its fetch checks 2K) */
		CHECK(*ctr == 2 * K || *ctr == 7);
		handshake(0x6u);
		CHECK_INT(*ctr, 7);
		return;
	}
	CHECK_INT(fi_fetch_atomic(E.ep, NULL, 1, NULL, &old, NULL, E.addr[0], k->ctr,
	                          k->ctr_key, FI_UINT64, FI_ATOMIC_READ, &ctx),
	          0);
	CHECK_INT(wait_ctx(&ctx, NULL), 1);
	CHECK_INT(old, want);
	CHECK_INT(fi_compare_atomic(E.ep, &swap, 1, NULL, &cmp, NULL, &old, NULL,
	                            E.addr[0], k->ctr, k->ctr_key, FI_UINT64, FI_CSWAP,
	                            &ctx),
	          0);
	CHECK_INT(wait_ctx(&ctx, NULL), 1);
	CHECK_INT(old, want);
	handshake(0x6u);
}

static void rejects(char *local)
{
	const struct keys *k = &peer_keys[0];
	struct fi_cq_err_entry err;
	int ctx;

	if (E.rank == 0) {
		handshake(0x7u);
		return;
	}
	CHECK_INT(
	    fi_write(E.ep, local, 100, NULL, E.addr[0], k->buf, k->buf_key + 12345, &ctx),
	    0);
	CHECK_INT(wait_ctx(&ctx, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_EKEYREJECTED);
	CHECK_INT(fi_read(E.ep, local, 1 << 20, NULL, E.addr[0], k->buf + BIG - 100,
	                  k->buf_key, &ctx),
	          0);
	CHECK_INT(wait_ctx(&ctx, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_EACCES);
	CHECK_INT(fi_write(E.ep, local, 1 << 20, NULL, E.addr[0], k->buf - 4096,
	                   k->buf_key, &ctx),
	          0);
	CHECK_INT(wait_ctx(&ctx, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_EACCES);
	CHECK_INT(fi_atomic(E.ep, local, 2, NULL, E.addr[0], k->ctr, k->ctr_key,
	                    FI_UINT64, FI_SUM, &ctx),
	          0);
	CHECK_INT(wait_ctx(&ctx, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_EACCES);
	handshake(0x7u);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
	                            FI_REMOTE_READ | FI_REMOTE_WRITE,
	                    .no_cma = arg != NULL};
	char *buf = calloc(1, BIG), *src = calloc(1, BIG), *back = malloc(BIG);
	uint64_t *ctr = calloc(1, 64);
	struct fid_mr *mr_buf = NULL, *mr_ctr = NULL;
	struct keys mine, all[ET_MAX_PROCS * ET_SLOT / sizeof(struct keys)];

	(void)nprocs;
	if (!buf || !src || !back || !ctr || et_open(&E, &o))
		return 2;
	CHECK(E.info->caps & FI_RMA);
	CHECK(E.info->caps & FI_ATOMIC);
	CHECK_INT(fi_mr_reg(E.domain, buf, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
	                    &mr_buf, NULL),
	          0);
	CHECK_INT(fi_mr_reg(E.domain, ctr, 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
	                    &mr_ctr, NULL),
	          0);
	if (!mr_buf || !mr_ctr)
		return 2;
	mine.buf = (uintptr_t)buf;
	mine.buf_key = fi_mr_key(mr_buf);
	mine.ctr = (uintptr_t)ctr;
	mine.ctr_key = fi_mr_key(mr_ctr);
	CHECK_INT(et_allgather(&mine, sizeof(mine), all), 0);
	for (int r = 0; r < 2; r++)
		memcpy(&peer_keys[r], (char *)all + r * ET_SLOT, sizeof(mine));

	if (rank == 0) {
		rma_sizes(src, back);
	} else {
		uint64_t in = 0, out;
		int rctx, sctx;

		/* progress (and count writedata) until rank 0 is through */
		CHECK_INT(fi_recv(E.ep, &in, sizeof(in), NULL, FI_ADDR_UNSPEC, &rctx), 0);
		CHECK_INT(wait_ctx(&rctx, NULL), 1);
		CHECK_INT(cq_data_seen, in);
		CHECK(cq_data_last > 0);
		out = in;
		CHECK_INT(fi_send(E.ep, &out, sizeof(out), NULL, E.addr[0], &sctx), 0);
		CHECK_INT(wait_ctx(&sctx, NULL), 1);
	}
	sum_both();
	fetch_compare(ctr);
	rejects(src);

	CHECK_INT(fi_close(&mr_buf->fid), 0);
	CHECK_INT(fi_close(&mr_ctr->fid), 0);
	CHECK_INT(et_close(&E), 0);
	free(buf);
	free(src);
	free(back);
	free(ctr);
	return check_done();
}

int main(void)
{
	int bad = et_run("rma", 2, 120, proc, NULL, 0);

	bad |= et_run("rma (no CMA)", 2, 120, proc, "no-cma", 0);
	return bad;
}
