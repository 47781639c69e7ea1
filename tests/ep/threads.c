/* threads.c - FI_THREAD_SAFE: in each of two processes four threads share
 * one endpoint and one CQ.  Two post sends (fi_senddata, fi_tsend) to the
 * peer, two post receives (untagged; tagged by exact tag and by a tag
 * wildcard), and all four read the CQ at once.  Each of the 20,000
 * messages a process sends (1 B to 64 KiB) arrives exactly once, intact,
 * and every completion on either side is accounted for. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define NTHR     4
#define NSENDERS 2     /* threads 0 and 1 send; 2 and 3 receive */
#define PER      10000 /* messages each sending thread sends */
#define MAXSZ    65536
#define WIN      16           /* operations a thread keeps posted, per kind */
#define WILD     (1ULL << 62) /* tag bit the wildcard receives match on */
#define TMO_US   (120 * 1000000ull)

/* How a message travels, chosen per message. */
enum kind { K_MSG, K_EXACT, K_WILD, K_N };

/* CHECK counts in plain ints: the worker threads count here instead. */
static atomic_int fails;
#define FAIL(...)                                                                        \
	do {                                                                             \
		fprintf(stderr, "rank %d: " __VA_ARGS__);                                \
		atomic_fetch_add(&fails, 1);                                             \
	} while (0)

static struct et_ep E;
static int peer;
static uint64_t deadline;
static atomic_bool stop;
static atomic_uint tx_done, rx_done;
static unsigned rx_total, n_kind[K_N];
static atomic_uchar seen[NSENDERS][PER];
static uint64_t *exact_ids; /* the peer's K_EXACT messages, in posting order */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	return x ^ (x >> 33);
}

/* Message id: the sending thread and its sequence number. */
static uint64_t id_of(unsigned thr, unsigned seq)
{
	return (uint64_t)thr << 32 | seq;
}

static enum kind kind_of(uint64_t id)
{
	return (enum kind)(mix(id ^ 0x6b696e64) % K_N);
}

/* 1 B to 64 KiB, log-uniform: inline, bounce and rendezvous all common. */
static size_t size_of(uint64_t id, int sender)
{
	uint64_t h = mix(id * 2 + (uint64_t)sender + 1);

	return 1 + (size_t)(h % ((uint64_t)1 << (h >> 58) % 17));
}

static uint64_t seed_of(uint64_t id, int sender)
{
	return id * 2 + (uint64_t)sender;
}

/* One posted operation; its address is the completion context.  busy is
 * set before posting (another thread may reap the completion before the
 * post call returns) and cleared by whichever thread reaps it. */
struct op {
	enum { OP_TX, OP_RX_MSG, OP_RX_EXACT, OP_RX_WILD } type;
	atomic_bool busy;
	char *buf;
	uint64_t id; /* a send's message, or the one an exact receive is for */
};

struct worker {
	pthread_t th;
	int me;
	struct op ops[2 * WIN];
	unsigned next, next2; /* what to post next (thread 3: exact, wild) */
	unsigned limit, limit2;
	unsigned reaped; /* completions this thread read, of any thread's */
};

static struct worker W[NTHR];

/* ---- reaping: any thread, any completion ------------------------------- */

static void on_tx(struct op *op, const struct fi_cq_tagged_entry *c)
{
	uint64_t want = FI_SEND | (kind_of(op->id) == K_MSG ? FI_MSG : FI_TAGGED);

	if (c->flags != want)
		FAIL("send %#llx: flags %#llx, want %#llx\n", E.rank,
		     (unsigned long long)op->id, (unsigned long long)c->flags,
		     (unsigned long long)want);
	atomic_fetch_add(&tx_done, 1);
	atomic_store(&op->busy, false);
}

static void on_rx(struct op *op, const struct fi_cq_tagged_entry *c, fi_addr_t src)
{
	uint64_t id, want_flags = FI_RECV | FI_TAGGED;
	enum kind want_kind;
	size_t bad;

	switch (op->type) {
	case OP_RX_MSG:
		want_flags = FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA;
		want_kind = K_MSG;
		id = c->data;
		break;
	case OP_RX_EXACT:
		want_kind = K_EXACT;
		id = c->tag;
		if (id != op->id)
			FAIL("exact receive for %#llx got tag %#llx\n", E.rank,
			     (unsigned long long)op->id, (unsigned long long)id);
		break;
	default:
		want_kind = K_WILD;
		id = c->tag & ~WILD;
		if (!(c->tag & WILD))
			FAIL("wildcard receive got tag %#llx\n", E.rank,
			     (unsigned long long)c->tag);
		break;
	}
	if (c->flags != want_flags)
		FAIL("receive of %#llx: flags %#llx, want %#llx\n", E.rank,
		     (unsigned long long)id, (unsigned long long)c->flags,
		     (unsigned long long)want_flags);
	if (src != E.addr[peer])
		FAIL("receive of %#llx: FI_SOURCE %llu, want %llu\n", E.rank,
		     (unsigned long long)id, (unsigned long long)src,
		     (unsigned long long)E.addr[peer]);
	if ((id >> 32) >= NSENDERS || (id & 0xffffffffu) >= PER ||
	    kind_of(id) != want_kind) {
		FAIL("receive (type %d) of unknown message %#llx, %zu B\n", E.rank,
		     op->type, (unsigned long long)id, c->len);
	} else if (atomic_fetch_add(&seen[id >> 32][id & 0xffffffffu], 1)) {
		FAIL("message %#llx received twice\n", E.rank, (unsigned long long)id);
	} else if (c->len != size_of(id, peer)) {
		FAIL("message %#llx: %zu B, want %zu\n", E.rank, (unsigned long long)id,
		     c->len, size_of(id, peer));
	} else if ((bad = et_verify(op->buf, c->len, seed_of(id, peer))) != (size_t)-1) {
		FAIL("message %#llx (%zu B): content differs at byte %zu\n", E.rank,
		     (unsigned long long)id, c->len, bad);
	}
	atomic_fetch_add(&rx_done, 1);
	atomic_store(&op->busy, false);
}

static bool reap(struct worker *w)
{
	struct fi_cq_tagged_entry c[8];
	fi_addr_t src[8];
	ssize_t n = fi_cq_readfrom(E.txcq, c, 8, src);

	if (n == -FI_EAGAIN)
		return false;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};

		/* Another thread may have taken it meanwhile. */
		if (fi_cq_readerr(E.txcq, &err, 0) == 1)
			FAIL("error entry: err %d (%s), context %p, flags %#llx\n",
			     E.rank, err.err, fi_strerror(err.err), err.op_context,
			     (unsigned long long)err.flags);
		return true;
	}
	if (n < 0) {
		FAIL("fi_cq_readfrom = %zd\n", E.rank, n);
		return false;
	}
	w->reaped += (unsigned)n;
	for (ssize_t k = 0; k < n; k++) {
		struct op *op = c[k].op_context;

		if (!op) {
			FAIL("completion without context, flags %#llx\n", E.rank,
			     (unsigned long long)c[k].flags);
			continue;
		}
		if (op->type == OP_TX)
			on_tx(op, &c[k]);
		else
			on_rx(op, &c[k], src[k]);
	}
	return n > 0;
}

/* ---- posting: each thread its own operations --------------------------- */

/* Post one operation; false when the endpoint said -FI_EAGAIN. */
static bool post(struct op *op, ssize_t (*fn)(struct op *))
{
	ssize_t r;

	atomic_store(&op->busy, true);
	r = fn(op);
	if (r == 0)
		return true;
	atomic_store(&op->busy, false);
	if (r != -FI_EAGAIN) {
		FAIL("posting %#llx (type %d): %zd (%s)\n", E.rank,
		     (unsigned long long)op->id, op->type, r, fi_strerror((int)-r));
		atomic_store(&stop, true);
	}
	return false;
}

static ssize_t do_send(struct op *op)
{
	size_t len = size_of(op->id, E.rank);

	if (kind_of(op->id) == K_MSG)
		return fi_senddata(E.ep, op->buf, len, NULL, op->id, E.addr[peer], op);
	return fi_tsend(E.ep, op->buf, len, NULL, E.addr[peer],
	                op->id | (kind_of(op->id) == K_WILD ? WILD : 0), op);
}

static ssize_t do_recv(struct op *op)
{
	return fi_recv(E.ep, op->buf, MAXSZ, NULL, FI_ADDR_UNSPEC, op);
}

static ssize_t do_exact(struct op *op)
{
	/* Exactly the message's size: one byte short would truncate. */
	return fi_trecv(E.ep, op->buf, size_of(op->id, peer), NULL, FI_ADDR_UNSPEC,
	                op->id, 0, op);
}

static ssize_t do_wild(struct op *op)
{
	return fi_trecv(E.ep, op->buf, MAXSZ, NULL, FI_ADDR_UNSPEC, WILD, ~WILD, op);
}

static bool post_some(struct worker *w)
{
	bool busy = false;

	for (int i = 0; i < 2 * WIN; i++) {
		struct op *op = &w->ops[i];
		bool second = i >= WIN;

		if (atomic_load(&op->busy))
			continue;
		if (w->me < NSENDERS) {
			if (second || w->next == w->limit)
				continue;
			op->id = id_of((unsigned)w->me, w->next);
			et_fill(op->buf, size_of(op->id, E.rank),
			        seed_of(op->id, E.rank));
			if (!post(op, do_send))
				break;
			w->next++;
		} else if (w->me == NSENDERS) {
			if (second || w->next == w->limit)
				continue;
			if (!post(op, do_recv))
				break;
			w->next++;
		} else if (!second) {
			if (w->next == w->limit)
				continue;
			op->id = exact_ids[w->next];
			if (!post(op, do_exact))
				break;
			w->next++;
		} else {
			if (w->next2 == w->limit2)
				continue;
			if (!post(op, do_wild))
				break;
			w->next2++;
		}
		busy = true;
	}
	return busy;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned idle = 0;

	while (!atomic_load(&stop)) {
		bool busy = post_some(w);

		busy |= reap(w);
		if (atomic_load(&tx_done) == NSENDERS * PER &&
		    atomic_load(&rx_done) == rx_total)
			break;
		if (et_now_us() > deadline) {
			atomic_store(&stop, true);
			break;
		}
		if (!busy && ++idle % 8 == 0)
			sched_yield();
	}
	return NULL;
}

/* ---- one process ------------------------------------------------------- */

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = *(const struct et_opts *)arg;
	unsigned ne = 0, got[K_N] = {0};
	uint64_t t0;

	(void)nprocs;
	o.threading = FI_THREAD_SAFE;
	if (et_open(&E, &o))
		return 2;
	CHECK_INT(E.info->domain_attr->threading, FI_THREAD_SAFE);
	peer = 1 - rank;
	/* What the peer sends, hence what to post: the exact receives in the
	 * order its two threads (roughly) send them. */
	exact_ids = calloc(NSENDERS * PER, sizeof(*exact_ids));
	for (unsigned q = 0; q < PER; q++)
		for (unsigned t = 0; t < NSENDERS; t++) {
			uint64_t id = id_of(t, q);

			n_kind[kind_of(id)]++;
			if (kind_of(id) == K_EXACT)
				exact_ids[ne++] = id;
		}
	rx_total = NSENDERS * PER;
	for (int t = 0; t < NTHR; t++) {
		W[t].me = t;
		for (int i = 0; i < 2 * WIN; i++) {
			struct op *op = &W[t].ops[i];

			op->buf = malloc(MAXSZ);
			atomic_init(&op->busy, false);
			op->type = t < NSENDERS    ? OP_TX
			           : t == NSENDERS ? OP_RX_MSG
			           : i < WIN       ? OP_RX_EXACT
			                           : OP_RX_WILD;
		}
		W[t].limit = t < NSENDERS ? PER : t == NSENDERS ? n_kind[K_MSG] : ne;
		W[t].limit2 = t == NSENDERS + 1 ? n_kind[K_WILD] : 0;
	}
	et_barrier();
	t0 = et_now_us();
	deadline = t0 + TMO_US;
	for (int t = 0; t < NTHR; t++)
		CHECK_INT(pthread_create(&W[t].th, NULL, run, &W[t]), 0);
	for (int t = 0; t < NTHR; t++)
		CHECK_INT(pthread_join(W[t].th, NULL), 0);
	fprintf(stderr,
	        "rank %d: %u sent, %u received in %.2f s; completions read by "
	        "thread: %u %u %u %u\n",
	        rank, atomic_load(&tx_done), atomic_load(&rx_done),
	        (et_now_us() - t0) / 1e6, W[0].reaped, W[1].reaped, W[2].reaped,
	        W[3].reaped);
	CHECK_INT(W[0].reaped + W[1].reaped + W[2].reaped + W[3].reaped,
	          NSENDERS * PER + rx_total);

	CHECK(!atomic_load(&stop));
	CHECK_INT(atomic_load(&fails), 0);
	CHECK_INT(atomic_load(&tx_done), NSENDERS * PER);
	CHECK_INT(atomic_load(&rx_done), rx_total);
	for (int t = 0; t < NTHR; t++) {
		CHECK_INT(W[t].next, W[t].limit);
		CHECK_INT(W[t].next2, W[t].limit2);
	}
	for (unsigned t = 0; t < NSENDERS; t++)
		for (unsigned q = 0; q < PER; q++) {
			unsigned n = atomic_load(&seen[t][q]);

			got[kind_of(id_of(t, q))] += n == 1;
			if (n != 1) {
				fprintf(stderr,
				        "rank %d: message %#llx (kind %d) arrived "
				        "%u times\n",
				        rank, (unsigned long long)id_of(t, q),
				        kind_of(id_of(t, q)), n);
				CHECK(0);
			}
		}
	for (int k = 0; k < K_N; k++)
		CHECK_INT(got[k], n_kind[k]);
	/* Both done: nothing more may come, and nothing was left posted. */
	et_barrier();
	for (int k = 0; k < 100; k++) {
		struct fi_cq_tagged_entry c;

		if (fi_cq_read(E.txcq, &c, 1) != -FI_EAGAIN) {
			fprintf(stderr, "rank %d: a completion after the end\n", rank);
			CHECK(0);
			break;
		}
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	for (int t = 0; t < NTHR; t++)
		for (int i = 0; i < 2 * WIN; i++)
			free(W[t].ops[i].buf);
	free(exact_ids);
	return check_done();
}

int main(void)
{
	struct et_opts cma = {0}, no_cma = {.no_cma = true};
	int bad = et_run("threads", 2, 150, proc, &cma, 0);

	bad |= et_run("threads (no CMA)", 2, 150, proc, &no_cma, 0);
	return bad;
}
