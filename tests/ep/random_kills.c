/* random_kills.c - a sender SIGKILLed at a random moment of a mixed stream
 * loses nothing it saw complete, and leaves its receiver nothing to hang on.
 *
 * 100 two-process runs, each from its own seed.  The seed makes the stream
 * (24-48 operations: untagged and tagged sends of sizes on every protocol
 * boundary of the provider up to 1 MiB, RMA writes and writes with remote
 * CQ data into a registered region), how many the sender keeps in flight
 * (1-8), how many receives the receiver keeps posted ahead (2-16, so some
 * messages come unexpected), shm's CMA on or off, and the moment the
 * receiver kills the sender: 0-400 us after the sender has seen k
 * completions, k = 0 (one run in 6), all of them (one in 6) or any between,
 * so kills fall before anything completed, all along the stream (in
 * rendezvous transfers too) and after its end whatever the machine's
 * speed.  The sender sets a bit of a shared mapping for each completion it
 * reads, before anything else; the mapping outlives it.  Once the sender is
 * dead and nothing came for a while, the receiver cancels what is still
 * posted.  Then:
 *
 *  - every operation with its bit set arrived whole (length, checksummed
 *    contents, source address) or landed whole (writes, CQ data);
 *  - a message without one arrived whole or not at all, never twice;
 *  - each receive still posted ends in one FI_ECANCELED entry, one the
 *    sender's death cut short in an error entry, within bounded time;
 *  - on shm, the dead sender's region leaves /dev/shm.
 *
 * `random_kills -s SEED -n 1` reruns the run of one seed. */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define RECVER 0
#define SENDER 1

#define RUNS         100
#define MIN_OPS      24
#define MAX_OPS      48 /* at most 64: one bit each in the record */
#define MAX_INFLIGHT 8
#define MAX_WINDOW   16
#define MAX_SIZE     ((size_t)1 << 20)
#define KILL_MAX_US  400   /* latest kill, after the completions it waits for */
#define SLACK        64    /* receive buffers are this much longer */
#define SEND_MS      20000 /* with the receiver alive, anything completes by then */
#define GRACE_MS     100   /* the sender dead: quiet this long means no more comes */
#define SETTLE_MS    10000 /* a receive the death cut short fails within this */
#define RUN_MS       30000 /* the receiver's bound on one run */
#define RUN_S        60    /* et_run's, on the whole group */

enum kind { K_MSG, K_TAGGED, K_WRITE, K_WRITEDATA };

static const char *const kind_name[] = {"send", "tsend", "write", "writedata"};

struct op {
	enum kind kind;
	size_t size;
	uint64_t off; /* in the target's region (writes) */
};

/* One run, all of it drawn from the seed. */
struct stream {
	uint64_t seed;
	int nops, inflight, window;
	bool no_cma;
	int kill_after;   /* the kill: once the sender recorded this many ops, */
	unsigned kill_us; /* and this much later */
	size_t rma_len;
	struct op op[MAX_OPS];
};

/* What outlives the sender: mapped shared before the fork. */
struct record {
	_Atomic uint64_t done; /* bit i: the sender read op i's completion */
	atomic_int sender_bad; /* the sender saw something wrong */
	uint64_t rma_addr, rma_key;
	/* Where the kills fell, over all runs (the receiver adds its run). */
	atomic_int before_any, mid_stream, after_all;
	atomic_int cut_short; /* runs where the death failed a matched receive */
};

static struct record *rec;


/* splitmix64: one PRNG step. */
static uint64_t next_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void make_stream(struct stream *s, uint64_t seed)
{
	const size_t *sizes;
	size_t nsizes = et_edge_sizes(&sizes);
	uint64_t x = seed;

	while (nsizes && sizes[nsizes - 1] > MAX_SIZE)
		nsizes--;
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	s->nops = MIN_OPS + (int)(next_rand(&x) % (MAX_OPS - MIN_OPS + 1));
	s->inflight = 1 + (int)(next_rand(&x) % MAX_INFLIGHT);
	s->window = 2 + (int)(next_rand(&x) % (MAX_WINDOW - 1));
	s->no_cma = next_rand(&x) % 2;
	s->kill_us = (unsigned)(next_rand(&x) % (KILL_MAX_US + 1));
	/* One run in 6 kills while nothing completed yet, one when all did. */
	switch (next_rand(&x) % 6) {
	case 0:
		s->kill_after = 0;
		break;
	case 1:
		s->kill_after = s->nops;
		break;
	default:
		s->kill_after = 1 + (int)(next_rand(&x) % (uint64_t)(s->nops - 1));
	}
	for (int i = 0; i < s->nops; i++) {
		struct op *o = &s->op[i];
		unsigned k = (unsigned)(next_rand(&x) % 10);

		/* Mostly messages: 4 in 10 untagged, 4 tagged, 1 and 1 RMA. */
		o->kind = k < 4   ? K_MSG
		          : k < 8 ? K_TAGGED
		          : k < 9 ? K_WRITE
		                  : K_WRITEDATA;
		o->size = sizes[next_rand(&x) % nsizes];
		if (o->kind >= K_WRITE) {
			o->off = s->rma_len;
			s->rma_len += o->size;
		}
	}
}

/* The contents of op i: distinct from every other op of every run. */
static uint64_t content_of(const struct stream *s, int i)
{
	return s->seed * MAX_OPS + (uint64_t)i + 1;
}

static bool is_msg(const struct op *o)
{
	return o->kind == K_MSG || o->kind == K_TAGGED;
}

/* ---- the sender ---------------------------------------------------------------- */

static void sender_bad(const char *what, int i, ssize_t r)
{
	fprintf(stderr, "sender: %s of op %d: %zd (%s)\n", what, i, r,
	        fi_strerror((int)-r));
	atomic_store(&rec->sender_bad, 1);
}

/* Read one completion and record it at once; 1, or 0 after a failure. */
static int reap(struct et_ep *e, int timeout_ms)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	ssize_t r = et_read(e->txcq, &ent, NULL, &err, NULL, timeout_ms);

	if (r == 1) {
		uintptr_t i = (uintptr_t)ent.op_context - 1;

		if (i >= MAX_OPS) {
			sender_bad("context", (int)i, 0);
			return 0;
		}
		atomic_fetch_or_explicit(&rec->done, 1ull << i, memory_order_release);
		return 1;
	}
	if (r == -FI_EAVAIL)
		sender_bad("error entry", (int)((uintptr_t)err.op_context - 1), -err.err);
	else if (r != -FI_ETIMEDOUT || timeout_ms)
		sender_bad("completion", -1, r);
	return 0;
}

static ssize_t post_op(struct et_ep *e, const struct stream *s, char *buf, int i)
{
	const struct op *o = &s->op[i];
	fi_addr_t to = e->addr[RECVER];
	void *ctx = (void *)(uintptr_t)(i + 1);

	switch (o->kind) {
	case K_MSG:
		return fi_send(e->ep, buf, o->size, NULL, to, ctx);
	case K_TAGGED:
		return fi_tsend(e->ep, buf, o->size, NULL, to, (uint64_t)i, ctx);
	case K_WRITE:
		return fi_write(e->ep, buf, o->size, NULL, to, rec->rma_addr + o->off,
		                rec->rma_key, ctx);
	case K_WRITEDATA:
		return fi_writedata(e->ep, buf, o->size, NULL, (uint64_t)i, to,
		                    rec->rma_addr + o->off, rec->rma_key, ctx);
	}
	return -FI_EINVAL;
}

/* Stream every op, inflight at a time, then wait to be killed. */
static void sender(struct et_ep *e, const struct stream *s, char **buf)
{
	uint64_t end = et_now_us() + SEND_MS * 1000ull;
	int outstanding = 0;

	for (int i = 0; i < s->nops; i++) {
		ssize_t r;

		while (outstanding == s->inflight) {
			if (!reap(e, SEND_MS))
				goto wait;
			outstanding--;
		}
		while ((r = post_op(e, s, buf[i], i)) == -FI_EAGAIN && et_now_us() < end)
			outstanding -= reap(e, 0);
		if (r) {
			sender_bad("post", i, r);
			goto wait;
		}
		outstanding++;
	}
	while (outstanding && reap(e, SEND_MS))
		outstanding--;
wait:
	/* Until the receiver kills it. */
	for (;;)
		pause();
}

/* ---- the receiver --------------------------------------------------------------- */

/* How many completions the sender has recorded. */
static int recorded(void)
{
	return __builtin_popcountll(
	    atomic_load_explicit(&rec->done, memory_order_acquire));
}

enum state { IDLE, POSTED, ARRIVED, FAILED };

struct slot {
	enum state state;
	bool cancelled; /* fi_cancel took it back: its entry is FI_ECANCELED */
	size_t len;
	fi_addr_t src;
	int err;
	char *buf;
};

struct receiver {
	struct et_ep *e;
	const struct stream *s;
	struct slot slot[MAX_OPS];
	char *region;
	int next, open; /* the next op to post a receive for; receives posted */
};

/* Keep window receives posted, in stream order (untagged ones match in
 * the order their messages were sent). */
static void post_window(struct receiver *rv, int window)
{
	const struct stream *s = rv->s;

	while (rv->next < s->nops && rv->open < window) {
		int i = rv->next++;
		const struct op *o = &s->op[i];
		struct slot *sl = &rv->slot[i];
		size_t len = o->size + SLACK;
		ssize_t r;

		if (!is_msg(o))
			continue;
		r = o->kind == K_TAGGED
		        ? fi_trecv(rv->e->ep, sl->buf, len, NULL, FI_ADDR_UNSPEC,
		                   (uint64_t)i, 0, sl)
		        : fi_recv(rv->e->ep, sl->buf, len, NULL, FI_ADDR_UNSPEC, sl);
		CHECK_INT(r, 0);
		if (r)
			continue;
		sl->state = POSTED;
		rv->open++;
	}
}

static struct slot *slot_of(struct receiver *rv, void *ctx)
{
	struct slot *sl = ctx;

	if (sl < rv->slot || sl >= rv->slot + rv->s->nops) {
		fprintf(stderr, "an entry with context %p, not a receive of ours\n", ctx);
		CHECK(0);
		return NULL;
	}
	return sl;
}

/* Read one receive-side entry if there is one: 1, or 0. */
static int take_entry(struct receiver *rv)
{
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	ssize_t r = fi_cq_readfrom(rv->e->rxcq, &ent, 1, &src);
	struct slot *sl;

	if (r == -FI_EAGAIN)
		return 0;
	if (r == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		CHECK_INT(fi_cq_readerr(rv->e->rxcq, &err, 0), 1);
		sl = slot_of(rv, err.op_context);
		if (!sl)
			return 1;
		CHECK_INT(sl->state, POSTED); /* one entry per receive */
		sl->state = FAILED;
		sl->err = err.err;
		rv->open--;
		/* Taken back, it says so; cut short by the death, the peer
		 * is gone. */
		if (sl->cancelled)
			CHECK_INT(err.err, FI_ECANCELED);
		else
			CHECK_INT(err.err, FI_EIO);
		return 1;
	}
	CHECK_INT(r, 1);
	if (r != 1)
		return 0;
	if (ent.flags & FI_REMOTE_CQ_DATA) {
		int i = (int)ent.data;

		CHECK(ent.data < (uint64_t)rv->s->nops &&
		      rv->s->op[i].kind == K_WRITEDATA);
		if (ent.data >= (uint64_t)rv->s->nops || rv->s->op[i].kind != K_WRITEDATA)
			return 1;
		sl = &rv->slot[i];
		CHECK_INT(sl->state, IDLE); /* never twice */
		sl->state = ARRIVED;
		sl->src = src;
		return 1;
	}
	sl = slot_of(rv, ent.op_context);
	if (!sl)
		return 1;
	CHECK_INT(sl->state, POSTED); /* never twice */
	CHECK(!sl->cancelled);
	sl->state = ARRIVED;
	sl->len = ent.len;
	sl->src = src;
	rv->open--;
	return 1;
}

/* Read, posting receives, until the kill; then until the sender is gone
 * and nothing came for GRACE_MS, all receives posted. */
static void stream_in(struct receiver *rv, uint64_t deadline)
{
	uint64_t kill_at = 0, quiet_since = 0;
	pid_t pid = rv->e->pid[SENDER];
	bool killed = false;
	int window = rv->s->window;

	while (et_now_us() < deadline) {
		uint64_t now = et_now_us();

		/* A sender gone wrong may never get there: kill it then. */
		if (!kill_at &&
		    (recorded() >= rv->s->kill_after || atomic_load(&rec->sender_bad)))
			kill_at = now + rv->s->kill_us;
		if (!killed && kill_at && now >= kill_at) {
			CHECK_INT(kill(pid, SIGKILL), 0);
			killed = true;
			quiet_since = now;
		}
		if (take_entry(rv)) {
			quiet_since = now;
		} else if (killed && now - quiet_since > GRACE_MS * 1000ull &&
		           et_gone(pid)) {
			if (rv->next == rv->s->nops)
				return;
			/* Whatever it sent before dying may wait unexpected. */
			window = MAX_OPS;
			quiet_since = now;
		}
		post_window(rv, window);
	}
	fprintf(stderr, "%s\n",
	        killed ? "the stream never went quiet" : "the kill's moment never came");
	CHECK(0);
	if (!killed)
		kill(pid, SIGKILL);
}

/* Take back every receive still posted: each ends in one entry. */
static void settle(struct receiver *rv)
{
	uint64_t end = et_now_us() + SETTLE_MS * 1000ull;

	for (int i = 0; i < rv->s->nops; i++) {
		struct slot *sl = &rv->slot[i];
		ssize_t r;

		if (sl->state != POSTED)
			continue;
		r = fi_cancel(&rv->e->ep->fid, sl);
		/* -FI_ENOENT: matched, its transfer cut short: it fails. */
		CHECK(r == 0 || r == -FI_ENOENT);
		sl->cancelled = r == 0;
	}
	while (rv->open && et_now_us() < end)
		take_entry(rv);
	for (int i = 0; i < rv->s->nops; i++)
		if (rv->slot[i].state == POSTED) {
			fprintf(stderr, "receive of op %d (%s, %zu B) never ended\n", i,
			        kind_name[rv->s->op[i].kind], rv->s->op[i].size);
			CHECK(0);
		}
}

/* Everything recorded complete arrived whole; the rest whole or not at
 * all.  Returns how many ops were recorded. */
static int check_all(struct receiver *rv)
{
	const struct stream *s = rv->s;
	uint64_t done = atomic_load_explicit(&rec->done, memory_order_acquire);
	int ndone = 0;

	for (int i = 0; i < s->nops; i++) {
		const struct op *o = &s->op[i];
		const struct slot *sl = &rv->slot[i];
		bool recorded = done >> i & 1;
		const char *b = is_msg(o) ? sl->buf : rv->region + o->off;
		size_t bad;

		ndone += recorded;
		if (recorded && o->kind != K_WRITE && sl->state != ARRIVED) {
			fprintf(stderr,
			        "op %d (%s, %zu B) completed at the sender: %s (%d)\n", i,
			        kind_name[o->kind], o->size,
			        sl->state == FAILED ? "failed here" : "never arrived",
			        sl->err);
			CHECK(0);
			continue;
		}
		/* An unfinished write may have landed in part. */
		if (!recorded && sl->state != ARRIVED)
			continue;
		if (is_msg(o))
			CHECK_INT(sl->len, o->size);
		if (o->kind != K_WRITE)
			CHECK_INT(sl->src, rv->e->addr[SENDER]);
		bad = et_verify(b, o->size, content_of(s, i));
		if (bad != (size_t)-1) {
			fprintf(stderr, "op %d (%s, %zu B, %s) differs at byte %zu\n", i,
			        kind_name[o->kind], o->size,
			        recorded ? "completed" : "not completed", bad);
			CHECK(0);
		}
	}
	return ndone;
}

/* The killed sender's regions are reclaimed by the next endpoint opened on
 * the host; ours leave when we close. */
static void check_regions(pid_t sender_pid)
{
	struct et_ep lone;

	CHECK_INT(et_open_local(&lone, NULL), 0);
	CHECK_INT(et_regions_of(sender_pid), 0);
	CHECK_INT(et_close(&lone), 0);
	CHECK_INT(et_regions_of(getpid()), 0);
}

static void receiver(struct receiver *rv)
{
	const struct stream *s = rv->s;
	uint64_t deadline = et_now_us() + RUN_MS * 1000ull;
	int ndone, arrived = 0, cancelled = 0, failed = 0;

	stream_in(rv, deadline);
	settle(rv);
	CHECK_INT(et_stray(rv->e, 20), 0);
	ndone = check_all(rv);
	for (int i = 0; i < s->nops; i++) {
		arrived += rv->slot[i].state == ARRIVED;
		cancelled += rv->slot[i].cancelled;
		failed += rv->slot[i].state == FAILED && !rv->slot[i].cancelled;
	}
	atomic_fetch_add(ndone == 0         ? &rec->before_any
	                 : ndone == s->nops ? &rec->after_all
	                                    : &rec->mid_stream,
	                 1);
	if (failed)
		atomic_fetch_add(&rec->cut_short, 1);
	fprintf(
	    stderr,
	    "seed %llu: killed %u us after %d completions, %d of %d complete by then; "
	    "%d arrived, %d failed, %d cancelled\n",
	    (unsigned long long)s->seed, s->kill_us, s->kill_after, ndone, s->nops,
	    arrived, failed, cancelled);
	CHECK_INT(atomic_load(&rec->sender_bad), 0);
}

/* ---- one run ------------------------------------------------------------------- */

static int proc(int rank, int nprocs, void *arg)
{
	const struct stream *s = arg;
	struct et_opts o = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV |
	                            FI_RMA | FI_WRITE | FI_REMOTE_WRITE,
	                    .no_cma = s->no_cma};
	static struct receiver rv;
	struct fid_mr *mr = NULL;
	char *buf[MAX_OPS] = {0};
	struct et_ep e;
	pid_t sender_pid;

	(void)nprocs;
	if (et_open(&e, &o))
		return 2;
	if (rank == SENDER) {
		for (int i = 0; i < s->nops; i++) {
			buf[i] = malloc(s->op[i].size);
			if (!buf[i])
				return 2;
			et_fill(buf[i], s->op[i].size, content_of(s, i));
		}
		CHECK_INT(et_barrier(), 0); /* the receiver is ready */
		sender(&e, s, buf);         /* never returns */
		return 2;
	}
	memset(&rv, 0, sizeof(rv));
	rv.e = &e;
	rv.s = s;
	rv.region = calloc(1, s->rma_len ? s->rma_len : 1);
	if (!rv.region)
		return 2;
	CHECK_INT(fi_mr_reg(e.domain, rv.region, s->rma_len ? s->rma_len : 1,
	                    FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL),
	          0);
	if (!mr)
		return 2;
	rec->rma_addr = (uintptr_t)rv.region;
	rec->rma_key = fi_mr_key(mr);
	for (int i = 0; i < s->nops; i++)
		if (is_msg(&s->op[i]) &&
		    !(rv.slot[i].buf = malloc(s->op[i].size + SLACK)))
			return 2;
	post_window(&rv, s->window); /* before the stream starts */
	CHECK_INT(et_barrier(), 0);
	receiver(&rv);
	sender_pid = e.pid[SENDER];
	CHECK_INT(fi_close(&mr->fid), 0);
	CHECK_INT(et_close(&e), 0);
	if (et_desc()->regions)
		check_regions(sender_pid);
	for (int i = 0; i < s->nops; i++)
		free(rv.slot[i].buf);
	free(rv.region);
	return check_done();
}

static int run(uint64_t seed)
{
	struct stream s;
	char what[160];

	make_stream(&s, seed);
	atomic_store(&rec->done, 0);
	atomic_store(&rec->sender_bad, 0);
	snprintf(what, sizeof(what),
	         "random_kills %s seed %llu (%d ops, %d in flight, window %d%s)",
	         et_prov(), (unsigned long long)seed, s.nops, s.inflight, s.window,
	         !et_desc()->cma_switch ? ""
	         : s.no_cma             ? ", no CMA"
	                                : ", CMA");
	return et_run(what, 2, RUN_S, proc, &s, 1u << SENDER);
}

int main(int argc, char **argv)
{
	uint64_t base = et_now_us() ^ ((uint64_t)getpid() << 32), t0 = et_now_us();
	int runs = RUNS, failed = 0, opt;

	while ((opt = getopt(argc, argv, "s:n:")) != -1) {
		if (opt == 's')
			base = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			runs = atoi(optarg);
		else {
			fprintf(stderr, "usage: %s [-s first seed] [-n runs]\n", argv[0]);
			return 2;
		}
	}
	rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	           -1, 0);
	if (rec == MAP_FAILED)
		return 2;
	memset(rec, 0, sizeof(*rec));
	fprintf(stderr, "random_kills on %s: %d runs, seeds %llu..%llu\n", et_prov(),
	        runs, (unsigned long long)base,
	        (unsigned long long)(base + (uint64_t)runs - 1));
	for (int i = 0; i < runs; i++) {
		uint64_t seed = base + (uint64_t)i;

		if (run(seed)) {
			fprintf(stderr, "FAILED: seed %llu (rerun: %s -s %llu -n 1)\n",
			        (unsigned long long)seed, argv[0],
			        (unsigned long long)seed);
			failed++;
		}
	}
	fprintf(stderr,
	        "%d runs in %.1f s, %d failed; killed before any completion %d, "
	        "mid-stream %d, after all %d; with a receive cut short %d\n",
	        runs, (et_now_us() - t0) / 1e6, failed, atomic_load(&rec->before_any),
	        atomic_load(&rec->mid_stream), atomic_load(&rec->after_all),
	        atomic_load(&rec->cut_short));
	munmap(rec, sizeof(*rec));
	return failed ? 1 : 0;
}
