/* nothing_lost.c - once a send's completion is reported, the message
 * reaches a receiver that stays alive, whatever the sender does next.
 *
 * A matrix of two-process cells.  In each the sender sends count
 * operations of one size, one at a time, each waited for, then posts a few
 * more it does not wait for and ends: by returning from main after
 * closing its endpoint, by _exit, or by SIGKILL, right after its last
 * completion.  The receiver posts its receives before the sender starts
 * (and reads while it runs), or only once the sender is gone.  Then:
 *
 *  - every operation whose completion the sender saw arrived, whole
 *    (checksummed contents, length, source address);
 *  - one still outstanding at the sender's end arrived whole, failed, or
 *    did not arrive; it was never corrupted or duplicated;
 *  - the receiver neither hung nor crashed.
 *
 * Sizes sit on and one byte either side of every protocol boundary of the
 * provider (inline cell, inject and eager sizes, the link's packet, the
 * largest message whose RTS carries its first piece), then 1 MiB and
 * 16 MiB.  RMA writes, writes with remote CQ data and atomics run the same
 * endings, the target checking its memory, CQ data and counter sum. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define RECVER 0
#define SENDER 1

#define EXTRA       3        /* sends posted after the last one waited for */
#define EXTRA_TAG   (1ull << 60)
#define NEED_RX_MS  300      /* after-mode: a send not complete by then needs the receiver */
#define SEND_MS     20000    /* before-mode: any send completes within this */
#define GRACE_MS    300      /* the sender gone: quiet this long means no more is coming */
#define GONE_MS     20000    /* a sender takes at most this long to end */
#define RECV_MS     30000    /* the receiver's bound on the whole cell */
#define MAX_BYTES   ((size_t)96 << 20) /* receive memory of one cell */

enum kind { K_MSG, K_WRITE, K_WRITEDATA, K_ATOMIC };
enum ending { END_RETURN, END_EXIT, END_KILL };
enum posting { POST_BEFORE, POST_AFTER };

static const char *const kind_name[] = {"msg", "write", "writedata", "atomic"};
static const char *const end_name[] = {"return", "_exit", "SIGKILL"};
static const char *const post_name[] = {"before", "after"};

struct cell {
	enum kind kind;
	size_t size;
	int count;
	enum ending end;
	enum posting post;
	unsigned id;
};

/* Shared by the two processes of a cell (mapped before they fork). */
struct shared {
	atomic_int posted;          /* the receiver's receives are up */
	atomic_int done;            /* completed operations (-1 until known) */
	atomic_int sender_failures; /* the sender's failed checks */
	uint64_t buf, buf_key, ctr, ctr_key; /* the target's memory (RMA) */
	atomic_int keys_set;
};

static struct shared *sh;


static uint64_t seed_of(const struct cell *c, int i)
{
	return (uint64_t)c->id * 1000000u + (uint64_t)i + 1;
}

/* Until the sender has ended.  On tcp the receiver's progress accepts
 * the sender's connection, on udp it acknowledges its packets (manual
 * progress), so it progresses, with no
 * receive posted; on shm it does nothing at all. */
static void wait_gone(struct et_ep *e, pid_t pid)
{
	uint64_t end = et_now_us() + GONE_MS * 1000ull;

	while (!et_gone(pid) && et_now_us() < end) {
		if (et_desc()->answers)
			et_progress(e);
		usleep(2000);
	}
	CHECK(et_gone(pid));
}

/* ---- the sender ---------------------------------------------------------------- */

static ssize_t post_one(struct et_ep *e, const struct cell *c, char *buf, int i,
                        void *ctx)
{
	fi_addr_t to = e->addr[RECVER];
	uint64_t seed = seed_of(c, i);

	switch (c->kind) {
	case K_MSG:
		return i % 2 ? fi_tsend(e->ep, buf, c->size, NULL, to, seed, ctx)
		             : fi_send(e->ep, buf, c->size, NULL, to, ctx);
	case K_WRITE:
		return fi_write(e->ep, buf, c->size, NULL, to, sh->buf + (uint64_t)i * c->size,
		                sh->buf_key, ctx);
	case K_WRITEDATA:
		return fi_writedata(e->ep, buf, c->size, NULL, seed, to,
		                    sh->buf + (uint64_t)i * c->size, sh->buf_key, ctx);
	case K_ATOMIC:
		memcpy(buf, &(uint64_t){(uint64_t)i + 1}, sizeof(uint64_t));
		return fi_atomic(e->ep, buf, 1, NULL, to, sh->ctr, sh->ctr_key, FI_UINT64,
		                 FI_SUM, ctx);
	}
	return -FI_EINVAL;
}

static ssize_t post_retry(struct et_ep *e, const struct cell *c, char *buf, int i,
                          void *ctx)
{
	uint64_t end = et_now_us() + SEND_MS * 1000ull;
	ssize_t r;

	while ((r = post_one(e, c, buf, i, ctx)) == -FI_EAGAIN && et_now_us() < end)
		et_progress(e);
	return r;
}

static void sender(struct et_ep *e, const struct cell *c)
{
	char *buf = malloc(c->size < 8 ? 8 : c->size);
	static char extra[EXTRA][4096];
	struct fi_cq_tagged_entry ent;
	uint64_t end = et_now_us() + SEND_MS * 1000ull;
	int done = 0;

	if (!buf) {
		CHECK(0);
		return;
	}
	while (c->post == POST_BEFORE && !atomic_load(&sh->posted) && et_now_us() < end)
		sched_yield();
	for (int i = 0; i < c->count; i++) {
		ssize_t r;

		et_fill(buf, c->size, seed_of(c, i));
		r = post_retry(e, c, buf, i, NULL);
		CHECK_INT(r, 0);
		if (r)
			break;
		r = et_read(e->txcq, &ent, NULL, NULL, NULL,
		            c->post == POST_AFTER ? NEED_RX_MS : SEND_MS);
		if (r == -FI_ETIMEDOUT && c->post == POST_AFTER)
			break; /* needs the receiver, who is not looking: outstanding */
		CHECK_INT(r, 1);
		if (r != 1)
			break;
		done++;
	}
	atomic_store(&sh->done, done);
	/* A few more not waited for: each may arrive or not, never in part. */
	for (int j = 0; c->kind == K_MSG && j < EXTRA; j++) {
		et_fill(extra[j], sizeof(extra[j]), EXTRA_TAG + seed_of(c, j));
		CHECK_INT(fi_tsend(e->ep, extra[j], sizeof(extra[j]), NULL, e->addr[RECVER],
		                   EXTRA_TAG + seed_of(c, j), NULL),
		          0);
	}
	atomic_store(&sh->sender_failures, check_failures);
	if (c->end == END_KILL)
		kill(getpid(), SIGKILL);
	if (c->end == END_EXIT)
		_exit(check_failures ? 1 : 0);
	free(buf);
}

/* ---- the receiver --------------------------------------------------------------- */

struct slot {
	int state; /* 0 posted, 1 completed, 2 failed */
	size_t len;
	fi_addr_t src;
};

static void post_recvs(struct et_ep *e, const struct cell *c, char *mem, char *xmem,
                       struct slot *s)
{
	for (int i = 0; i < c->count; i++) {
		char *b = mem + (size_t)i * c->size;

		CHECK_INT(i % 2 ? fi_trecv(e->ep, b, c->size, NULL, FI_ADDR_UNSPEC,
		                           seed_of(c, i), 0, &s[i])
		                : fi_recv(e->ep, b, c->size, NULL, FI_ADDR_UNSPEC, &s[i]),
		          0);
	}
	for (int j = 0; j < EXTRA; j++)
		CHECK_INT(fi_trecv(e->ep, xmem + (size_t)j * 4096, 4096, NULL, FI_ADDR_UNSPEC,
		                   EXTRA_TAG + seed_of(c, j), 0, &s[c->count + j]),
		          0);
}

/* Read the receive CQ until every slot is done, or the sender is gone,
 * its count known and nothing came for GRACE_MS. */
static void collect(struct et_ep *e, const struct cell *c, struct slot *s, int nslots)
{
	uint64_t end = et_now_us() + RECV_MS * 1000ull, quiet_since = et_now_us();
	int open = nslots;

	while (open && et_now_us() < end) {
		struct fi_cq_tagged_entry ent;
		struct fi_cq_err_entry err;
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		ssize_t r = fi_cq_readfrom(e->rxcq, &ent, 1, &src);
		struct slot *sl;

		if (r == -FI_EAGAIN) {
			if (et_now_us() - quiet_since > GRACE_MS * 1000ull &&
			    atomic_load(&sh->done) >= 0 && et_gone(e->pid[SENDER]))
				break;
			sched_yield();
			continue;
		}
		quiet_since = et_now_us();
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			CHECK_INT(fi_cq_readerr(e->rxcq, &err, 0), 1);
			sl = err.op_context;
			if (!sl || sl < s || sl >= s + nslots) {
				CHECK(0);
				continue;
			}
			CHECK_INT(sl->state, 0);
			sl->state = 2;
			open--;
			continue;
		}
		CHECK_INT(r, 1);
		if (r != 1)
			break;
		sl = ent.op_context;
		if (!sl || sl < s || sl >= s + nslots) {
			CHECK(0);
			continue;
		}
		CHECK_INT(sl->state, 0); /* never twice */
		sl->state = 1;
		sl->len = ent.len;
		sl->src = src;
		open--;
	}
	(void)c;
}

/* Every slot the sender saw complete arrived whole; the others arrived
 * whole or not at all. */
static void check_msgs(struct et_ep *e, const struct cell *c, const char *mem,
                       const char *xmem, const struct slot *s, int done)
{
	for (int i = 0; i < c->count + EXTRA; i++) {
		bool extra = i >= c->count;
		size_t len = extra ? 4096 : c->size;
		const char *b = extra ? xmem + (size_t)(i - c->count) * 4096
		                      : mem + (size_t)i * c->size;
		uint64_t seed = extra ? EXTRA_TAG + seed_of(c, i - c->count) : seed_of(c, i);
		size_t bad;

		if (!extra && i < done && s[i].state != 1) {
			fprintf(stderr, "%s: completed send %d of %zu B %s\n", kind_name[c->kind],
			        i, c->size, s[i].state ? "failed" : "lost");
			CHECK(0);
			continue;
		}
		if (s[i].state != 1)
			continue;
		CHECK_INT(s[i].len, len);
		CHECK_INT(s[i].src, e->addr[SENDER]);
		bad = et_verify(b, len, seed);
		if (bad != (size_t)-1) {
			fprintf(stderr, "message %d (%zu B) differs at %zu\n", i, len, bad);
			CHECK(0);
		}
	}
}

/* Nothing more comes: no duplicate matches a fresh receive of either kind. */
static void check_no_more(struct et_ep *e)
{
	int n = et_stray(e, 50);

	if (n)
		fprintf(stderr, "%d message(s) more than were sent\n", n);
	CHECK_INT(n, 0);
}

static void recv_msgs(struct et_ep *e, const struct cell *c)
{
	int nslots = c->count + EXTRA;
	char *mem = malloc((size_t)c->count * c->size), *xmem = malloc(EXTRA * 4096);
	struct slot *s = calloc((size_t)nslots, sizeof(*s));

	if (!mem || !xmem || !s) {
		CHECK(0);
		goto out;
	}
	if (c->post == POST_BEFORE) {
		post_recvs(e, c, mem, xmem, s);
		atomic_store(&sh->posted, 1);
	} else {
		wait_gone(e, e->pid[SENDER]);
		post_recvs(e, c, mem, xmem, s);
	}
	collect(e, c, s, nslots);
	CHECK(atomic_load(&sh->done) >= 0);
	check_msgs(e, c, mem, xmem, s, atomic_load(&sh->done));
	/* What never came is still posted: cancel it before the check. */
	for (int i = 0; i < nslots; i++)
		if (s[i].state == 0)
			fi_cancel(&e->ep->fid, &s[i]);
	{
		struct fi_cq_tagged_entry ent;

		while (et_read(e->rxcq, &ent, NULL, NULL, NULL, 10) != -FI_ETIMEDOUT)
			;
	}
	check_no_more(e);
out:
	free(mem);
	free(xmem);
	free(s);
}

/* The target of RMA: the first done writes landed (whole), every CQ data
 * entry of theirs came, the atomic counter holds their sum. */
static void recv_rma(struct et_ep *e, const struct cell *c, char *mem, uint64_t *ctr)
{
	uint64_t end, want = 0, want_more;
	int done, data_seen = 0;
	bool *seen = calloc((size_t)c->count, 1);

	if (!seen) {
		CHECK(0);
		return;
	}
	atomic_store(&sh->posted, 1);
	if (c->post == POST_AFTER)
		wait_gone(e, e->pid[SENDER]);
	end = et_now_us() + RECV_MS * 1000ull;
	while ((atomic_load(&sh->done) < 0 || !et_gone(e->pid[SENDER])) &&
	       et_now_us() < end)
		et_progress(e);
	done = atomic_load(&sh->done);
	CHECK(done >= 0);
	for (int i = 0; i < done; i++)
		want += (uint64_t)i + 1;
	want_more = want + (uint64_t)done + 1; /* one more was outstanding */
	for (;;) {
		bool ok = true;
		struct fi_cq_tagged_entry ent;
		ssize_t r = fi_cq_read(e->rxcq, &ent, 1);

		if (r == 1) {
			uint64_t i = ent.data - seed_of(c, 0);

			CHECK(c->kind == K_WRITEDATA && (ent.flags & FI_REMOTE_CQ_DATA));
			CHECK(i < (uint64_t)c->count && !seen[i]);
			if (i < (uint64_t)c->count && !seen[i]) {
				seen[i] = true;
				data_seen += i < (uint64_t)done;
			}
		} else {
			CHECK_INT(r, -FI_EAGAIN);
		}
		if (c->kind == K_ATOMIC) {
			uint64_t v = __atomic_load_n(ctr, __ATOMIC_ACQUIRE);

			ok = v == want || (done < c->count && v == want_more);
		} else {
			for (int i = 0; i < done && ok; i++)
				ok = et_verify(mem + (size_t)i * c->size, c->size, seed_of(c, i)) ==
				     (size_t)-1;
			if (c->kind == K_WRITEDATA)
				ok = ok && data_seen == done;
		}
		if (ok || et_now_us() > end) {
			if (!ok)
				fprintf(stderr, "%s: completed operations of %zu B missing at the target\n",
				        kind_name[c->kind], c->size);
			CHECK(ok);
			break;
		}
	}
	free(seen);
}

/* ---- one cell ------------------------------------------------------------------ */

static int proc(int rank, int nprocs, void *arg)
{
	const struct cell *c = arg;
	bool rma = c->kind != K_MSG;
	struct et_opts o = {.caps = rma ? FI_MSG | FI_TAGGED | FI_SOURCE | FI_RMA | FI_ATOMIC |
	                                      FI_WRITE | FI_REMOTE_WRITE
	                                : 0};
	struct et_ep e;
	struct fid_mr *mr = NULL, *cmr = NULL;
	char *mem = NULL;
	uint64_t *ctr = NULL;

	(void)nprocs;
	if (et_open(&e, &o))
		return 2;
	if (rma && rank == RECVER) {
		mem = calloc(1, (size_t)c->count * c->size);
		ctr = calloc(1, 64);
		if (!mem || !ctr)
			return 2;
		CHECK_INT(fi_mr_reg(e.domain, mem, (size_t)c->count * c->size,
		                    FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL),
		          0);
		CHECK_INT(fi_mr_reg(e.domain, ctr, 8, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0,
		                    &cmr, NULL),
		          0);
		if (!mr || !cmr)
			return 2;
		sh->buf = (uintptr_t)mem;
		sh->buf_key = fi_mr_key(mr);
		sh->ctr = (uintptr_t)ctr;
		sh->ctr_key = fi_mr_key(cmr);
		atomic_store(&sh->keys_set, 1);
	}
	CHECK_INT(et_barrier(), 0); /* keys published; nothing sent yet */
	if (rank == SENDER) {
		sender(&e, c);
		CHECK_INT(et_close(&e), 0);
		return check_done();
	}
	if (rma)
		recv_rma(&e, c, mem, ctr);
	else
		recv_msgs(&e, c);
	CHECK_INT(atomic_load(&sh->sender_failures), 0);
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	if (cmr)
		CHECK_INT(fi_close(&cmr->fid), 0);
	CHECK_INT(et_close(&e), 0);
	free(mem);
	free(ctr);
	return check_done();
}

static int run_cell(struct cell *c)
{
	char what[160];

	memset(sh, 0, sizeof(*sh));
	atomic_store(&sh->done, -1);
	snprintf(what, sizeof(what), "nothing_lost %s %zu B x%d, sender %s, receiver %s",
	         kind_name[c->kind], c->size, c->count, end_name[c->end],
	         post_name[c->post]);
	return et_run(what, 2, 120, proc, c, 1u << SENDER);
}

/* Every ending and posting for one kind, size and count. */
static int run_all(enum kind k, size_t size, int count, unsigned *id)
{
	int bad = 0;

	for (int end = END_RETURN; end <= END_KILL; end++)
		for (int post = POST_BEFORE; post <= POST_AFTER; post++) {
			struct cell c = {k, size, count, (enum ending)end, (enum posting)post,
			                 ++*id};

			if ((size_t)count * size <= MAX_BYTES)
				bad |= run_cell(&c);
		}
	return bad;
}

int main(void)
{
	const size_t *sizes;
	size_t nsizes = et_edge_sizes(&sizes);
	const size_t rma_sizes[] = {8, 4097, 65537, 1u << 20};
	unsigned id = 0;
	int bad = 0;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
	          0);
	if (sh == MAP_FAILED)
		return 2;
	for (size_t i = 0; i < nsizes; i++)
		bad |= run_all(K_MSG, sizes[i], sizes[i] >= (16u << 20) ? 2 : 10, &id);
	bad |= run_all(K_MSG, 1, 1, &id);
	bad |= run_all(K_MSG, 1, 1000, &id);
	bad |= run_all(K_MSG, sizes[3], 1000, &id); /* just past inline */
	bad |= run_all(K_MSG, 1u << 20, 1, &id);
	for (size_t i = 0; i < sizeof(rma_sizes) / sizeof(rma_sizes[0]); i++) {
		bad |= run_all(K_WRITE, rma_sizes[i], 10, &id);
		bad |= run_all(K_WRITEDATA, rma_sizes[i], 10, &id);
	}
	bad |= run_all(K_ATOMIC, 8, 1, &id);
	bad |= run_all(K_ATOMIC, 8, 10, &id);
	bad |= run_all(K_ATOMIC, 8, 1000, &id);
	munmap(sh, sizeof(*sh));
	return bad;
}
