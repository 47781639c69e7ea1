/* fence.c - FI_FENCE on the provider under test across two processes: a read
 * fenced behind a large write of the same bytes returns what the write
 * put there, and a message fenced behind a large write reaches the target
 * only once the written data is in place (the target checks it when the
 * message arrives).  Without CMA the write streams through packets that
 * an unfenced operation would overtake. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define SZ     ((size_t)1 << 20)
#define ROUNDS 20
#define TMO    20000

struct keys { /* one all-gather slot */
	uint64_t addr, key;
	char pad[ET_SLOT - 16];
};

static struct et_ep E;

static ssize_t next_tx(void **ctx)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	ssize_t r = et_read(E.txcq, &c, NULL, &err, NULL, TMO);

	if (r != 1) {
		fprintf(stderr, "rank %d: completion: %zd (err %d)\n", E.rank, r,
		        r == -FI_EAVAIL ? err.err : 0);
		return r;
	}
	*ctx = c.op_context;
	return 1;
}

static void initiator(const struct keys *k, char *src, char *back)
{
	int wctx, rctx, sctx, actx;
	uint64_t ack = ~0ull;
	void *ctx;

	for (int round = 0; round < ROUNDS; round++) {
		struct iovec iov = {back, SZ};
		struct fi_rma_iov rma = {k->addr, SZ, k->key};
		struct fi_msg_rma rm = {.msg_iov = &iov,
		                        .iov_count = 1,
		                        .addr = E.addr[1],
		                        .rma_iov = &rma,
		                        .rma_iov_count = 1,
		                        .context = &rctx};
		uint64_t note = (uint64_t)round;
		struct iovec niov = {&note, sizeof(note)};
		struct fi_msg m = {.msg_iov = &niov,
		                   .iov_count = 1,
		                   .addr = E.addr[1],
		                   .context = &sctx};
		int seen_w = 0;

		/* write, then a fenced read of the same bytes */
		et_fill(src, SZ, 1000 + (uint64_t)round);
		memset(back, 0, SZ);
		CHECK_INT(
		    fi_write(E.ep, src, SZ, NULL, E.addr[1], k->addr, k->key, &wctx), 0);
		CHECK_INT(fi_readmsg(E.ep, &rm, FI_FENCE | FI_COMPLETION), 0);
		for (int i = 0; i < 2; i++) {
			if (next_tx(&ctx) != 1) {
				CHECK(0);
				return;
			}
			if (ctx == &wctx)
				seen_w = 1;
			else /* the fenced read completes after the write */
				CHECK(ctx == &rctx && seen_w);
		}
		CHECK_INT(et_verify(back, SZ, 1000 + (uint64_t)round), (size_t)-1);

		/* write, then a fenced message saying so */
		et_fill(src, SZ, 5000 + (uint64_t)round);
		CHECK_INT(
		    fi_write(E.ep, src, SZ, NULL, E.addr[1], k->addr, k->key, &wctx), 0);
		CHECK_INT(fi_recv(E.ep, &ack, sizeof(ack), NULL, E.addr[1], &actx), 0);
		CHECK_INT(fi_sendmsg(E.ep, &m, FI_FENCE | FI_COMPLETION), 0);
		/* the write, the message, and the target's word that it checked */
		for (int i = 0; i < 3; i++)
			if (next_tx(&ctx) != 1) {
				CHECK(0);
				return;
			}
		CHECK_INT(ack, (uint64_t)round);
	}
}

static void target(char *buf)
{
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t note = ~0ull;
		struct fi_cq_tagged_entry c;
		int rctx;

		CHECK_INT(fi_recv(E.ep, &note, sizeof(note), NULL, E.addr[0], &rctx), 0);
		if (et_read(E.rxcq, &c, NULL, NULL, NULL, TMO) != 1) {
			CHECK(0);
			return;
		}
		CHECK_INT(note, (uint64_t)round);
		/* The write fenced before the message is complete. */
		if (et_verify(buf, SZ, 5000 + (uint64_t)round) != (size_t)-1)
			fprintf(stderr, "round %d: the fenced write is not in place\n",
			        round);
		CHECK_INT(et_verify(buf, SZ, 5000 + (uint64_t)round), (size_t)-1);
		/* Checked: the initiator may write the next round. */
		while (fi_inject(E.ep, &note, sizeof(note), E.addr[0]) == -FI_EAGAIN)
			et_progress(&E);
	}
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.caps = FI_MSG | FI_RMA | FI_FENCE};
	struct keys mine = {0}, all[ET_MAX_PROCS];
	struct fid_mr *mr = NULL;
	char *a = calloc(1, SZ), *b = calloc(1, SZ);

	(void)nprocs, (void)arg;
	if (!a || !b || et_open(&E, &o))
		return 2;
	CHECK(E.info->caps & FI_FENCE);
	if (rank == 1) {
		CHECK_INT(fi_mr_reg(E.domain, a, SZ, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
		                    0, 0, &mr, NULL),
		          0);
		mine.addr = (uintptr_t)a;
		mine.key = fi_mr_key(mr);
	}
	if (et_allgather(&mine, sizeof(mine), all))
		return 2;
	if (rank == 0)
		initiator(&all[1], a, b);
	else
		target(a);
	et_barrier();
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	CHECK_INT(et_close(&E), 0);
	free(a);
	free(b);
	return check_done();
}

int main(void)
{
	int bad = et_run("fence", 2, 120, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("fence (no CMA)", 2, 120, proc, NULL, 0);
	return bad;
}
