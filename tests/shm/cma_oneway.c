/* cma_oneway.c - large messages and RMA writes when cross-memory attach
 * works in one direction only: rank 0 is not dumpable and neither process
 * holds CAP_SYS_PTRACE, so rank 0 may read and write rank 1's memory but
 * not the reverse.  Both fallbacks of the split copies run (a receiver or
 * target that cannot read the sender or initiator, a sender or initiator
 * that cannot write the receiver or target), and every message and write
 * must still arrive intact. */
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define ROUNDS 6
#define TMO    20000

static struct et_ep E;
static const size_t sizes[] = {300 * 1024, 1 << 20, 4 << 20};

/* Take CAP_SYS_PTRACE out of the effective set (tests may run as root). */
static int drop_ptrace_cap(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
	return (int)syscall(SYS_capset, &h, d);
}

static ssize_t wait_one(struct fid_cq *cq, struct fi_cq_tagged_entry *c)
{
	struct fi_cq_err_entry err;
	ssize_t r = et_read(cq, c, NULL, &err, NULL, TMO);

	if (r == -FI_EAVAIL)
		fprintf(stderr, "rank %d: error completion %d (%s)\n", E.rank, err.err,
		        fi_strerror(err.err));
	else if (r != 1)
		fprintf(stderr, "rank %d: no completion (%zd)\n", E.rank, r);
	return r;
}

/* Both ranks write each size into the other's rbuf at once (split from
 * 256 KiB: the target reads the lower part while the initiator writes the
 * upper one, each falling back where the kernel refuses), then check what
 * landed in their own. */
static void rma_rounds(int rank, char *sbuf, char *rbuf)
{
	size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	struct {
		uint64_t addr, key;
	} mine, all[ET_MAX_PROCS * ET_SLOT / 16];
	struct fid_mr *mr = NULL;
	int peer = 1 - rank;

	CHECK_INT(fi_mr_reg(E.domain, rbuf, max, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), 0);
	if (!mr)
		return;
	mine.addr = (uintptr_t)rbuf;
	mine.key = fi_mr_key(mr);
	CHECK_INT(et_allgather(&mine, sizeof(mine), all), 0);
	memcpy(&mine, (char *)all + peer * ET_SLOT, sizeof(mine));
	for (int round = 0; round < ROUNDS; round++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t len = sizes[s];
			uint64_t seed = 1ull << 48 | (uint64_t)round << 8 | s;
			struct fi_cq_tagged_entry c;
			uint64_t done_in = 0, done_out = seed;
			int wctx, dctx, rctx, got = 0;

			et_fill(sbuf, len, seed ^ (uint64_t)rank << 32);
			memset(rbuf, 0, len);
			CHECK_INT(fi_recv(E.ep, &done_in, sizeof(done_in), NULL, E.addr[peer],
			                  &rctx),
			          0);
			et_barrier();
			CHECK_INT(fi_write(E.ep, sbuf, len, NULL, E.addr[peer], mine.addr,
			                   mine.key, &wctx),
			          0);
			/* Until this write is complete, and the peer's: say so to
			 * it, and progress (serving its write) until it says so. */
			while (got < 3) {
				if (wait_one(E.txcq, &c) != 1) {
					CHECK(0);
					break;
				}
				got++;
				if (c.op_context == &wctx)
					CHECK_INT(fi_send(E.ep, &done_out, sizeof(done_out), NULL,
					                  E.addr[peer], &dctx),
					          0);
				else
					CHECK(c.op_context == &dctx || c.op_context == &rctx);
			}
			if (got < 3)
				break;
			CHECK_HEX(done_in, seed);
			if (et_verify(rbuf, len, seed ^ (uint64_t)peer << 32) != (size_t)-1) {
				fprintf(stderr, "rank %d: write round %d size %zu differs\n",
				        rank, round, len);
				CHECK(0);
			}
		}
	}
	CHECK_INT(fi_close(&mr->fid), 0);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE};
	size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	char *sbuf = malloc(max), *rbuf = malloc(max);
	int peer = 1 - rank;

	(void)nprocs, (void)arg;
	if (!sbuf || !rbuf || drop_ptrace_cap())
		return 2;
	if (rank == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return 2;
	if (et_open(&E, &o))
		return 2;

	/* The setup is what this test is about: rank 1 must be refused. */
	if (rank == 1) {
		char probe[8];
		struct iovec l = {probe, sizeof(probe)};
		struct iovec r = {sbuf, sizeof(probe)}; /* any address will do */

		errno = 0;
		CHECK(process_vm_readv(E.pid[0], &l, 1, &r, 1, 0) < 0);
		CHECK_INT(errno, EPERM);
	}
	for (int round = 0; round < ROUNDS; round++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t len = sizes[s];
			uint64_t mine = (uint64_t)rank << 32 | (uint64_t)round << 8 | s;
			uint64_t theirs = (uint64_t)peer << 32 | (uint64_t)round << 8 | s;
			struct fi_cq_tagged_entry c;
			int rctx, sctx, got_r = 0, got_s = 0;

			et_fill(sbuf, len, mine);
			memset(rbuf, 0, len);
			CHECK_INT(fi_recv(E.ep, rbuf, len, NULL, E.addr[peer], &rctx), 0);
			et_barrier();
			CHECK_INT(fi_send(E.ep, sbuf, len, NULL, E.addr[peer], &sctx), 0);
			while (got_r + got_s < 2) {
				if (wait_one(E.txcq, &c) != 1) {
					CHECK(0);
					return check_done();
				}
				if (c.op_context == &rctx) {
					got_r++;
					CHECK_INT(c.len, len);
				} else {
					CHECK(c.op_context == &sctx);
					got_s++;
				}
			}
			if (et_verify(rbuf, len, theirs) != (size_t)-1) {
				fprintf(stderr,
				        "rank %d: round %d size %zu differs at %zu\n",
				        rank, round, len, et_verify(rbuf, len, theirs));
				CHECK(0);
			}
		}
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	/* The RMA writes on fresh endpoints: a refused copy above marked the
	 * peer, and the splits would not be tried again. */
	if (et_open(&E, &o))
		return 2;
	rma_rounds(rank, sbuf, rbuf);
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	free(sbuf);
	free(rbuf);
	return check_done();
}

int main(void)
{
	return et_run("cma_oneway", 2, 120, proc, NULL, 0);
}
