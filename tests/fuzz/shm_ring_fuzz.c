/* shm_ring_fuzz.c - fuzz target for the shm provider as a hostile peer
 * meets it: each input is written, as a same-user process that maps the
 * region could write it, into the ring cells, bounce buffers and header
 * words of a live shm RDM endpoint, which must neither crash nor touch
 * memory it was not given, and must go on working (tests/fuzz/README.md).
 *
 * One process holds, across inputs: endpoint A (the target: receives of
 * every kind posted, a read-write and a read-only region registered),
 * endpoint B (a legitimate peer of A), A's region mapped as a peer maps
 * it, and a child process that owns the regions of the hostile peers H
 * and H2 and the memory their cross-memory addresses name (so what A copies
 * into or out of "H's memory" is the child's).  Per input:
 *   1. its records (shm_ring.h) become cells in A's ring that claim to be
 *      from H, H2, A itself or a region nobody has: well-formed packets with hostile
 *      fields, or raw cells; bounce buffers named or scribbled; header
 *      words of A's region and of H's (which A writes into) overwritten;
 *      requests A starts toward H; A progressed between them;
 *   2. what A writes into H's ring (its answers) must be well-formed
 *      packets from A; their request handles feed later records;
 *   3. A's completions must each name a posted receive or request and lie
 *      within its buffer; a buffer A gave back must stay untouched until it
 *      is posted again, the bytes around every buffer and region always,
 *      and the read-only region's bytes too; unexpected messages are taken
 *      (peek and claim, post and cancel);
 *   4. both regions are put right again as well-behaved peers would leave
 *      them (the ring republished past a stuck cell, the bounce-buffer
 *      free list rebuilt): a hostile peer may stall or drain a region,
 *      which loses messages but is no memory error;
 *   5. every 128th input: messages both ways with B (eager and
 *      rendezvous) and B's RMA write, read and atomic into A's regions;
 *      every 256th the child exits and A must fail what it held for H.
 * The target is single-threaded: a value is rewritten between A's reads
 * only at the progress points a POLL record makes. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "shm.h"
#include "shm_ring.h"

#define HDR_LEN      sizeof(struct lm_rdm_hdr)
#define WIRE_SIZE    24 /* link.c: pid | buf << 32, token, len | mask << 32 */
#define GUARD        64
#define MR_GUARD     4096
#define TOP_TAG      (1ULL << 63) /* tags of the exchanges with B only */
#define SANITY_EVERY 128
#define EPOCH        256 /* inputs per child (H's lifetime) */
#define SANITY_MS    10000
#define DEATH_MS     5000

/* ---- failures --------------------------------------------------------------- */

static unsigned long n_inputs, n_cells, n_answers, n_received, n_requests;

__attribute__((noreturn, format(printf, 3, 4))) static void
fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "shm_ring_fuzz: %s:%d (input %lu): ", file, line, n_inputs);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort(); /* libFuzzer saves the input; so does the driver, with -o */
}

#define FZ_ASSERT(cond, fmt, ...)                                                        \
	do {                                                                             \
		if (!(cond))                                                             \
			fail(__FILE__, __LINE__, "assertion `%s` failed: " fmt, #cond,   \
			     ##__VA_ARGS__);                                             \
	} while (0)

#define FZ_OK(call)                                                                      \
	do {                                                                             \
		long fz_r_ = (long)(call);                                               \
		if (fz_r_ < 0)                                                           \
			fail(__FILE__, __LINE__, "%s = %ld (%s)", #call, fz_r_,          \
			     fi_strerror((int)-fz_r_));                                  \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void st64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* ---- guard bytes -------------------------------------------------------------- */

/* Position-dependent, so a stray write of any constant shows. */
static uint8_t guard_byte(size_t i, unsigned salt)
{
	return (uint8_t)(i * 131 + salt * 29 + 0x5a);
}

static void guard_fill(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = guard_byte(i, salt);
}

static size_t guard_bad(const uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != guard_byte(i, salt))
			return i + 1;
	return 0;
}

/* ---- the endpoints -------------------------------------------------------------- */

struct end {
	struct fid_ep *ep;
	struct fid_cq *cq;
	char addr[SHM_ADDR_MAX];
	fi_addr_t fa;
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct end A, B;
static struct fid_cntr *a_rw, *a_rr; /* A's remote write / remote read counts */
static uint64_t a_rw_last, a_rr_last;

/* Regions: [guard][region][guard] each. */
static uint8_t *mr_arena[2];
static uint8_t *mr_buf[2];
static const size_t mr_len[2] = {SR_MR_RW_LEN, SR_MR_RO_LEN};
static struct fid_mr *mr[2];
static uint64_t mr_key[2];

/* ---- the hostile side ------------------------------------------------------------ */

/* A's region as a peer maps it. */
static struct shm_peer *a_map;
/* The child owning H and H2; a pipe whose end tells it to go. */
static pid_t child;
static int child_pipe = -1;
static struct shm_peer *h_map[2]; /* H's regions as their owner reads them */
static uint64_t h_tail[2];
static uint64_t h_token[2];
static char h_addr[2][SHM_ADDR_MAX];
static fi_addr_t h_fa; /* H in A's AV */
/* H's memory: this array in the child (forked after it was filled). */
static uint8_t peer_arena[SR_ARENA_LEN] __attribute__((aligned(4096)));
/* Request handles in A's packets to H, newest last. */
static uint64_t handles[16];
static unsigned n_handles;

/* ---- A's receives ------------------------------------------------------------- */

/* A buffer not posted holds a pattern (its "poison"), checked when it is
 * posted again: the library must not write into a receive it has
 * completed.  Persistent receives go back after each input. */
enum slot_state { S_FREE, S_POSTED, S_PEEKING, S_CLAIMED };
enum slot_kind { K_MSG, K_TAG, K_MULTI };

struct slot {
	uint8_t *mem; /* [guard][cap bytes][guard] */
	uint8_t *buf;
	size_t cap;
	uint64_t tag, ignore; /* K_TAG */
	uint8_t kind;
	uint8_t state;
	bool persistent;
};

static const size_t persist_caps[] = {0, 1, 8, 64, 512, 4096, 70000};
#define N_PERSIST (sizeof(persist_caps) / sizeof(persist_caps[0]))
#define I_MULTI   (2 * N_PERSIST)
#define I_BIG     (I_MULTI + 1)
#define I_TEMP    (I_BIG + 1)
#define N_TEMP    8
#define N_SLOTS   (I_TEMP + N_TEMP)
#define MULTI_CAP 16384
#define BIG_CAP   70000
#define TEMP_CAP  4096

static struct slot slots[N_SLOTS];

static struct slot *slot_of(void *ctx)
{
	if ((struct slot *)ctx >= slots && (struct slot *)ctx < slots + N_SLOTS)
		return ctx;
	return NULL;
}

static unsigned poison_salt(const struct slot *s)
{
	return 2000u + (unsigned)(s - slots);
}

static void slot_release(struct slot *s)
{
	s->state = S_FREE;
	guard_fill(s->buf, s->cap, poison_salt(s));
}

static void slot_post(struct slot *s, uint64_t flags)
{
	struct iovec iov = {s->buf, s->cap};
	size_t at = guard_bad(s->buf, s->cap, poison_salt(s));
	ssize_t ret;

	FZ_ASSERT(!at, "receive slot %zu (cap %zu) written at byte %zu after its completion",
	          (size_t)(s - slots), s->cap, at - 1);
	if (s->kind == K_TAG) {
		struct fi_msg_tagged m = {.msg_iov = &iov,
		                          .iov_count = 1,
		                          .addr = FI_ADDR_UNSPEC,
		                          .tag = s->tag,
		                          .ignore = s->ignore,
		                          .context = s};

		ret = fi_trecvmsg(A.ep, &m, flags);
	} else {
		struct fi_msg m = {
		    .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = s};

		ret = fi_recvmsg(A.ep, &m, flags | (s->kind == K_MULTI ? FI_MULTI_RECV : 0));
	}
	FZ_OK(ret);
	s->state = S_POSTED;
}

static struct slot *temp_slot(uint8_t kind)
{
	for (size_t i = I_TEMP; i < N_SLOTS; i++) {
		struct slot *s = &slots[i];

		if (s->state == S_FREE) {
			s->kind = kind;
			s->tag = 0;
			s->ignore = ~0ULL;
			return s;
		}
	}
	return NULL;
}

static void slots_init(void)
{
	for (size_t i = 0; i < N_SLOTS; i++) {
		struct slot *s = &slots[i];

		s->persistent = i < I_TEMP;
		s->kind = i < N_PERSIST ? K_MSG : K_TAG;
		s->cap = i < I_MULTI ? persist_caps[i % N_PERSIST] : TEMP_CAP;
		s->ignore = ~(TOP_TAG | SR_BIG_TAG);
		if (i == I_MULTI) {
			s->kind = K_MULTI;
			s->cap = MULTI_CAP;
		} else if (i == I_BIG) {
			s->cap = BIG_CAP;
			s->tag = SR_BIG_TAG;
			s->ignore = SR_BIG_TAG - 1;
		}
		s->mem = malloc(s->cap + 2 * GUARD);
		FZ_ASSERT(s->mem, "out of memory");
		s->buf = s->mem + GUARD;
		guard_fill(s->mem, GUARD, (unsigned)i);
		guard_fill(s->buf + s->cap, GUARD, (unsigned)i + 1000);
		slot_release(s);
	}
}

static void slots_repost(void)
{
	for (size_t i = 0; i < N_SLOTS; i++)
		if (slots[i].persistent && slots[i].state == S_FREE)
			slot_post(&slots[i], 0);
}

/* ---- A's requests toward H ----------------------------------------------------- */

struct txreq {
	uint8_t *mem; /* [guard][len][guard] */
	uint8_t *buf;
	size_t len;
	bool busy;
	uint64_t operand, result; /* SR_TX_ATOMIC's: valid until it ends */
};

static const size_t tx_len[SR_TX_KINDS] = {64, 100000, 4096, 8, 70000, 64};
static struct txreq txs[SR_TX_KINDS];

static int tx_of(void *ctx)
{
	if ((struct txreq *)ctx >= txs && (struct txreq *)ctx < txs + SR_TX_KINDS)
		return (int)((struct txreq *)ctx - txs);
	return -1;
}

static void tx_start(unsigned kind)
{
	struct txreq *t = &txs[kind % SR_TX_KINDS];
	uint64_t raddr = (uintptr_t)peer_arena + 4096;
	struct iovec iov = {t->buf, t->len};
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = h_fa, .context = t};
	ssize_t ret = 0;

	if (t->busy || h_fa == FI_ADDR_NOTAVAIL)
		return;
	switch (kind % SR_TX_KINDS) {
	case SR_TX_SEND_ACK:
		ret = fi_sendmsg(A.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION);
		break;
	case SR_TX_SEND_RNDV:
		ret = fi_tsend(A.ep, t->buf, t->len, NULL, h_fa, 5, t);
		break;
	case SR_TX_READ:
		ret = fi_read(A.ep, t->buf, t->len, NULL, h_fa, raddr, 0, t);
		break;
	case SR_TX_ATOMIC:
		t->operand = 1;
		ret = fi_fetch_atomic(A.ep, &t->operand, 1, NULL, &t->result, NULL, h_fa, raddr, 0,
		                      FI_UINT64, FI_SUM, t);
		break;
	case SR_TX_WRITE_RNDV:
	case SR_TX_WRITE:
		ret = fi_write(A.ep, t->buf, t->len, NULL, h_fa, raddr, 0, t);
		break;
	}
	if (ret == -FI_EAGAIN)
		return;
	FZ_OK(ret);
	t->busy = true;
}

/* ---- the exchanges with B --------------------------------------------------------- */

enum {
	SN_A_RX_SMALL,
	SN_A_RX_LARGE,
	SN_B_TX_SMALL,
	SN_B_TX_LARGE,
	SN_A_TX,
	SN_B_RX,
	SN_B_WRITE,
	SN_B_ATOMIC,
	SN_B_READ,
	SN_B_WRITE_RO,
	SN_MAX
};

static const char *const sn_name[SN_MAX] = {
    "A recv small from B", "A recv large from B", "B send small", "B send large",
    "A send to B",         "B recv from A",       "B write to A", "B atomic at A",
    "B read from A",       "B write A's ro region"};

struct sn {
	bool done;
	int err;
	size_t len;
	uint64_t tag;
	fi_addr_t src;
};

static struct sn sn[SN_MAX];

static int sn_of(void *ctx)
{
	if ((struct sn *)ctx >= sn && (struct sn *)ctx < sn + SN_MAX)
		return (int)((struct sn *)ctx - sn);
	return -1;
}

static void sn_record(const char *who, int i, int err, size_t len, uint64_t tag,
                      fi_addr_t src)
{
	FZ_ASSERT(!sn[i].done, "%s: a second completion for \"%s\"", who, sn_name[i]);
	sn[i] = (struct sn){true, err, len, tag, src};
}

/* ---- completions ------------------------------------------------------------------ */

static void tx_entry(int k, int err, size_t len)
{
	struct txreq *t = &txs[k];

	FZ_ASSERT(t->busy, "A: a completion for request %d, which is not running", k);
	n_requests++;
	FZ_ASSERT(err >= 0, "A: request %d ended with err %d", k, err);
	FZ_ASSERT(err || !len || len == t->len || k == SR_TX_ATOMIC,
	          "A: request %d of %zu bytes completed with len %zu", k, t->len, len);
	t->busy = false;
}

/* One entry of A's CQ: success (err 0) or error. */
static void a_entry(void *ctx, uint64_t flags, size_t len, void *buf, uint64_t tag,
                    fi_addr_t src, int err)
{
	struct slot *s = slot_of(ctx);
	int k = sn_of(ctx);

	if (k >= 0) {
		sn_record("A", k, err, len, tag, src);
		return;
	}
	if ((k = tx_of(ctx)) >= 0) {
		tx_entry(k, err, len);
		return;
	}
	if (!ctx) {
		/* Remote CQ data of a hostile RMA write. */
		FZ_ASSERT(!err && (flags & FI_REMOTE_CQ_DATA) && (flags & FI_REMOTE_WRITE),
		          "A: an entry without context, flags 0x%llx err %d",
		          (unsigned long long)flags, err);
		return;
	}
	FZ_ASSERT(s, "A: an entry with an unknown context %p", ctx);
	if (s->state == S_PEEKING) {
		FZ_ASSERT(!err || err == FI_ENOMSG, "A: peek failed with %d", err);
		s->state = S_CLAIMED;
		if (err)
			slot_release(s);
		return;
	}
	FZ_ASSERT(s->state == S_POSTED,
	          "A: an entry for receive slot %zu, which is not posted (state %d)",
	          (size_t)(s - slots), s->state);
	n_received++;
	FZ_ASSERT(src != B.fa, "A: a hostile message reported as B's");
	if (err) {
		FZ_ASSERT(err > 0, "A: error entry with err %d", err);
		if (s->kind != K_MULTI || (flags & FI_MULTI_RECV))
			slot_release(s);
		return;
	}
	FZ_ASSERT(flags & (FI_RECV | FI_MULTI_RECV), "A: receive entry flags 0x%llx",
	          (unsigned long long)flags);
	if (s->kind == K_MULTI) {
		FZ_ASSERT(!len || ((uint8_t *)buf >= s->buf && (uint8_t *)buf + len <= s->buf + s->cap),
		          "A: multi-receive entry [%p +%zu] outside [%p +%zu]", buf, len,
		          (void *)s->buf, s->cap);
		if (flags & FI_MULTI_RECV)
			slot_release(s);
		return;
	}
	FZ_ASSERT(len <= s->cap, "A: %zu bytes reported into a %zu-byte receive", len, s->cap);
	FZ_ASSERT(!buf || buf == s->buf, "A: entry buf %p, posted %p", buf, (void *)s->buf);
	FZ_ASSERT(s->kind != K_TAG || ((tag ^ s->tag) & ~s->ignore) == 0,
	          "A: tag 0x%llx matched receive slot %zu (tag 0x%llx ignore 0x%llx)",
	          (unsigned long long)tag, (size_t)(s - slots), (unsigned long long)s->tag,
	          (unsigned long long)s->ignore);
	slot_release(s);
}

static void drain_a(void)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];

	for (;;) {
		ssize_t n = fi_cq_readfrom(A.cq, e, 16, src);

		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				a_entry(e[i].op_context, e[i].flags, e[i].len, e[i].buf,
				        e[i].tag, src[i], 0);
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			FZ_ASSERT(fi_cq_readerr(A.cq, &ee, 0) == 1, "A: fi_cq_readerr");
			a_entry(ee.op_context, ee.flags, ee.len, ee.buf, ee.tag,
			        FI_ADDR_NOTAVAIL, ee.err ? ee.err : -1);
			continue;
		}
		FZ_ASSERT(n == -FI_EAGAIN, "A: fi_cq_readfrom = %zd", n);
		break;
	}
}

static void drain_b(void)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];

	for (;;) {
		ssize_t n = fi_cq_readfrom(B.cq, e, 16, src);

		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				int k = sn_of(e[i].op_context);

				FZ_ASSERT(k >= 0, "B: unknown context %p", e[i].op_context);
				sn_record("B", k, 0, e[i].len, e[i].tag, src[i]);
			}
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};
			int k;

			FZ_ASSERT(fi_cq_readerr(B.cq, &ee, 0) == 1, "B: fi_cq_readerr");
			k = sn_of(ee.op_context);
			FZ_ASSERT(k >= 0, "B: unknown error context %p", ee.op_context);
			sn_record("B", k, ee.err ? ee.err : -1, ee.len, ee.tag,
			          FI_ADDR_NOTAVAIL);
			continue;
		}
		FZ_ASSERT(n == -FI_EAGAIN, "B: fi_cq_readfrom = %zd", n);
		break;
	}
}

/* ---- A's answers in H's rings ---------------------------------------------------- */

static unsigned popcount8(unsigned x)
{
	return (unsigned)__builtin_popcount(x & 0xff);
}

/* One cell A wrote into H's region i: a packet of A's link, well-formed. */
static void check_answer(int i, const struct shm_cell *c)
{
	struct shm_map *m = &h_map[i]->map;
	uint32_t len = c->len, wlen, buf;
	uint64_t w0, w1, w2, words[8] = {0};
	unsigned mask, n;
	struct lm_rdm_hdr h;
	pid_t pid;
	uint64_t token;

	n_answers++;
	FZ_ASSERT(len >= WIRE_SIZE && len <= SHM_INLINE_MAX, "A wrote a cell of length %u",
	          len);
	w0 = ld64(c->data);
	w1 = ld64(c->data + 8);
	w2 = ld64(c->data + 16);
	buf = (uint32_t)(w0 >> 32);
	wlen = (uint32_t)w2;
	mask = (unsigned)(w2 >> 32);
	n = popcount8(mask);
	shm_addr_parse(A.addr, &pid, &token);
	FZ_ASSERT((int32_t)(uint32_t)w0 == pid && w1 == token,
	          "a cell in H's ring that is not from A (pid %d token 0x%llx)",
	          (int32_t)(uint32_t)w0, (unsigned long long)w1);
	FZ_ASSERT(mask <= 0xff && WIRE_SIZE + 8 * n <= len,
	          "A's cell: mask 0x%x, length %u", mask, len);
	for (unsigned b = 0, k = 0; b < 8; b++)
		if (mask & 1u << b)
			words[b] = ld64(c->data + WIRE_SIZE + 8 * k++);
	memcpy(&h, words, sizeof(h));
	if (buf == SHM_BUF_NONE) {
		FZ_ASSERT(wlen == len - WIRE_SIZE - 8 * n,
		          "A's inline cell: payload %u, cell %u, %u header words", wlen, len, n);
	} else {
		FZ_ASSERT(buf < m->buf_count && wlen <= m->buf_size &&
		              len == WIRE_SIZE + 8 * n,
		          "A's cell: buffer %u of %u, payload %u, cell %u", buf, m->buf_count,
		          wlen, len);
		shm_buf_put(h_map[i], buf); /* as H's link frees it */
	}
	FZ_ASSERT(h.version == LM_RDM_WIRE_VERSION && h.op >= LM_OP_EAGER && h.op < LM_OP_MAX,
	          "A sent version %u op %u", h.version, h.op);
	if (h.sreq)
		handles[n_handles++ % 16] = h.sreq;
	if (h.rreq && h.op == LM_OP_CTS)
		handles[n_handles++ % 16] = h.rreq;
}

/* Read what A wrote into H's rings, as their owner. */
static void drain_h(void)
{
	for (int i = 0; i < 2; i++) {
		struct shm_map *m;

		if (!h_map[i])
			continue;
		m = &h_map[i]->map;
		for (unsigned k = 0; k <= m->mask; k++) {
			struct shm_cell *c = &m->cells[h_tail[i] & m->mask];

			if (atomic_load_explicit(&c->seq, memory_order_acquire) != h_tail[i] + 1)
				break;
			check_answer(i, c);
			h_tail[i]++;
		}
		atomic_store_explicit(&m->hdr->ring_freed, h_tail[i], memory_order_seq_cst);
	}
}

/* Progress A (its CQ and counters) and take what completed and answered. */
static void progress_a(void)
{
	uint64_t rw, rr;

	drain_a();
	drain_h();
	rw = fi_cntr_read(a_rw);
	rr = fi_cntr_read(a_rr);
	FZ_ASSERT(rw >= a_rw_last && rr >= a_rr_last, "A's counters went back");
	a_rw_last = rw;
	a_rr_last = rr;
}

/* ---- memory checks ------------------------------------------------------------------ */

static uint8_t ro_byte(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 8) + 3);
}

static void check_memory(void)
{
	for (size_t i = 0; i < N_SLOTS; i++) {
		struct slot *s = &slots[i];
		size_t at;

		at = guard_bad(s->mem, GUARD, (unsigned)i);
		FZ_ASSERT(!at, "written before receive slot %zu (cap %zu), byte -%zu", i, s->cap,
		          GUARD - at + 1);
		at = guard_bad(s->buf + s->cap, GUARD, (unsigned)i + 1000);
		FZ_ASSERT(!at, "written after receive slot %zu (cap %zu), byte +%zu", i, s->cap,
		          at - 1);
	}
	for (int k = 0; k < SR_TX_KINDS; k++) {
		size_t at = guard_bad(txs[k].mem, GUARD, 5000u + (unsigned)k);

		FZ_ASSERT(!at, "written before request %d's buffer, byte -%zu", k,
		          GUARD - at + 1);
		at = guard_bad(txs[k].buf + txs[k].len, GUARD, 6000u + (unsigned)k);
		FZ_ASSERT(!at, "written after request %d's buffer, byte +%zu", k, at - 1);
	}
	for (int r = 0; r < 2; r++) {
		size_t at = guard_bad(mr_arena[r], MR_GUARD, 7000u + (unsigned)r);

		FZ_ASSERT(!at, "written before region %d, byte -%zu", r, MR_GUARD - at + 1);
		at = guard_bad(mr_buf[r] + mr_len[r], MR_GUARD, 8000u + (unsigned)r);
		FZ_ASSERT(!at, "written after region %d, byte +%zu", r, at - 1);
	}
	for (size_t i = 0; i < SR_MR_RO_LEN; i++)
		FZ_ASSERT(mr_buf[1][i] == ro_byte(i), "the read-only region changed at %zu", i);
}

/* ---- the child that owns H -------------------------------------------------------- */

static void child_main(int rd, int wr)
{
	struct shm_region_attr ra = {.ring_cells = 64, .buf_count = 8};
	struct shm_region *r[2] = {NULL, NULL};
	char c;

	for (int i = 0; i < 2; i++)
		if (shm_region_create(&ra, &r[i]) ||
		    write(wr, shm_region_addr(r[i]), SHM_ADDR_MAX) != SHM_ADDR_MAX)
			_exit(1);
	close(wr);
	/* Until the parent closes its end (or dies). */
	while (read(rd, &c, 1) < 0 && errno == EINTR)
		;
	shm_region_destroy(r[0]);
	shm_region_destroy(r[1]);
	_exit(0);
}

static void child_start(void)
{
	int down[2], up[2];
	pid_t pid;

	FZ_ASSERT(!pipe(down) && !pipe(up), "pipe: %s", strerror(errno));
	fflush(stderr);
	child = fork();
	FZ_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		close(down[1]);
		close(up[0]);
		child_main(down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	child_pipe = down[1];
	for (int i = 0; i < 2; i++) {
		FZ_ASSERT(read(up[0], h_addr[i], SHM_ADDR_MAX) == SHM_ADDR_MAX,
		          "the child made no region");
		FZ_OK(shm_peer_open(h_addr[i], &h_map[i]));
		FZ_OK(shm_addr_parse(h_addr[i], &pid, &h_token[i]));
		h_tail[i] = atomic_load(&h_map[i]->map.hdr->ring_freed);
	}
	close(up[0]);
	FZ_ASSERT(fi_av_insert(av, h_addr[0], 1, &h_fa, 0, NULL) == 1, "H into A's AV");
	n_handles = 0;
}

/* The child exits; A must fail all it held for H and H2. */
static void child_stop(bool wait_a)
{
	uint64_t deadline = now_ms() + DEATH_MS;
	struct lm_rdm_ep *ep = lm_rdm_ep_of(A.ep);
	pid_t gone = child;
	int st;

	if (child <= 0)
		return;
	close(child_pipe);
	child_pipe = -1;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	child = 0;
	for (int i = 0; i < 2; i++) {
		shm_peer_close(h_map[i]);
		h_map[i] = NULL;
	}
	while (wait_a) {
		bool held = false;
		struct lm_list *it;

		progress_a();
		/* A's rendezvous with H or H2 (one with a cell that claimed
		 * to be A itself waits on A, which lives on). */
		lm_list_foreach(&ep->rndv_active, it)
		{
			const struct lm_rdm_rndv *rv =
			    lm_container_of(it, struct lm_rdm_rndv, node);
			struct shm_bin_addr a;

			memcpy(&a, rv->peer->addr, sizeof(a));
			held |= a.pid == gone;
		}
		for (int k = 0; k < SR_TX_KINDS; k++)
			held |= txs[k].busy;
		if (!held)
			break;
		FZ_ASSERT(now_ms() < deadline,
		          "A still holds requests with H %d ms after H's process ended",
		          DEATH_MS);
		usleep(1000);
	}
	if (h_fa != FI_ADDR_NOTAVAIL)
		fi_av_remove(av, &h_fa, 1, 0);
	h_fa = FI_ADDR_NOTAVAIL;
}

static void at_exit(void)
{
	child_stop(false);
}

/* ---- setup ------------------------------------------------------------------------- */

static void open_end(struct end *e)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 16384};

	FZ_OK(fi_endpoint(domain, info, &e->ep, NULL));
	FZ_OK(fi_cq_open(domain, &cqa, &e->cq, NULL));
	FZ_OK(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV));
	FZ_OK(fi_ep_bind(e->ep, &av->fid, 0));
}

static void enable_end(struct end *e)
{
	size_t len = sizeof(e->addr);

	FZ_OK(fi_enable(e->ep));
	FZ_OK(fi_getname(&e->ep->fid, e->addr, &len));
	FZ_ASSERT(fi_av_insert(av, e->addr, 1, &e->fa, 0, NULL) == 1, "fi_av_insert");
}

static void sanity(void);

static void setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};

	FZ_ASSERT(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE | FI_DIRECTED_RECV |
	              FI_MULTI_RECV | FI_RMA_EVENT;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	FZ_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	FZ_ASSERT(!strcmp(info->fabric_attr->prov_name, "shm"), "provider %s",
	          info->fabric_attr->prov_name);
	FZ_OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	FZ_OK(fi_domain(fabric, info, &domain, NULL));
	FZ_OK(fi_av_open(domain, &ava, &av, NULL));
	open_end(&A);
	open_end(&B);
	FZ_OK(fi_cntr_open(domain, &ca, &a_rw, NULL));
	FZ_OK(fi_cntr_open(domain, &ca, &a_rr, NULL));
	FZ_OK(fi_ep_bind(A.ep, &a_rw->fid, FI_REMOTE_WRITE));
	FZ_OK(fi_ep_bind(A.ep, &a_rr->fid, FI_REMOTE_READ));
	enable_end(&A);
	enable_end(&B);
	FZ_OK(shm_peer_open(A.addr, &a_map));

	for (int r = 0; r < 2; r++) {
		mr_arena[r] = malloc(mr_len[r] + 2 * MR_GUARD);
		FZ_ASSERT(mr_arena[r], "out of memory");
		mr_buf[r] = mr_arena[r] + MR_GUARD;
		guard_fill(mr_arena[r], MR_GUARD, 7000u + (unsigned)r);
		guard_fill(mr_buf[r] + mr_len[r], MR_GUARD, 8000u + (unsigned)r);
		FZ_OK(fi_mr_reg(domain, mr_buf[r], mr_len[r],
		                r ? FI_REMOTE_READ : FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
		                &mr[r], NULL));
		mr_key[r] = fi_mr_key(mr[r]);
	}
	memset(mr_buf[0], 0, SR_MR_RW_LEN);
	for (size_t i = 0; i < SR_MR_RO_LEN; i++)
		mr_buf[1][i] = ro_byte(i);
	for (int k = 0; k < SR_TX_KINDS; k++) {
		txs[k].len = tx_len[k];
		txs[k].mem = malloc(txs[k].len + 2 * GUARD);
		FZ_ASSERT(txs[k].mem, "out of memory");
		txs[k].buf = txs[k].mem + GUARD;
		guard_fill(txs[k].mem, GUARD, 5000u + (unsigned)k);
		guard_fill(txs[k].buf + txs[k].len, GUARD, 6000u + (unsigned)k);
		memset(txs[k].buf, 0x33, txs[k].len);
	}
	for (size_t i = 0; i < SR_ARENA_LEN; i++)
		peer_arena[i] = (uint8_t)(i * 3 + 1);

	h_fa = FI_ADDR_NOTAVAIL;
	child_start();
	atexit(at_exit);
	slots_init();
	slots_repost();
	sanity(); /* proves the checks can pass */
}

/* ---- 1: the records ----------------------------------------------------------------- */

/* The handle of an operation A sent H, chosen by k. */
static uint64_t handle(uint32_t k)
{
	unsigned n = n_handles < 16 ? n_handles : 16;

	return n ? handles[(n_handles - 1 - k % n) % 16] : 0;
}

static void patch_markers(uint8_t *d, size_t n)
{
	for (size_t i = 0; i + 8 <= n;) {
		uint64_t v = ld64(d + i);
		uint32_t lo = (uint32_t)v;
		int64_t off = (int32_t)lo;

		switch ((uint32_t)(v >> 32)) {
		case SR_MARK_ADDR_RW:
			st64(d + i, (uint64_t)((intptr_t)mr_buf[0] + off));
			break;
		case SR_MARK_ADDR_RO:
			st64(d + i, (uint64_t)((intptr_t)mr_buf[1] + off));
			break;
		case SR_MARK_KEY_RW:
			st64(d + i, mr_key[0] ^ lo);
			break;
		case SR_MARK_KEY_RO:
			st64(d + i, mr_key[1] ^ lo);
			break;
		case SR_MARK_ARENA:
			st64(d + i, (uint64_t)((intptr_t)peer_arena + off));
			break;
		case SR_MARK_HANDLE:
			st64(d + i, handle(lo));
			break;
		case SR_MARK_PID:
			st64(d + i, (uint64_t)(uint32_t)child | (uint64_t)lo << 32);
			break;
		case SR_MARK_TOKEN:
			st64(d + i, h_token[lo & 1]);
			break;
		default:
			i++;
			continue;
		}
		i += 8;
	}
}

/* The input's bytes, taken front to back. */
struct rd {
	const uint8_t *p;
	size_t left;
	bool short_; /* a field ran past the end */
};

static uint64_t take(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if (r->left < n) {
		r->short_ = true;
		r->left = 0;
		return 0;
	}
	memcpy(&v, r->p, n); /* little-endian hosts (rdm.h) */
	r->p += n;
	r->left -= n;
	return v;
}

static void take_bytes(struct rd *r, uint8_t *out, size_t n)
{
	if (r->left < n) {
		r->short_ = true;
		n = r->left;
	}
	memcpy(out, r->p, n);
	r->p += n;
	r->left -= n;
}

/* Claim a cell of A's ring, fill it and publish it with length clen. */
static void put_cell(const uint8_t *data, size_t n, uint32_t clen)
{
	uint64_t pos;
	struct shm_cell *c = shm_ring_claim(a_map, &pos);

	if (!c)
		return; /* full, or a corrupt header says so */
	memcpy(c->data, data, n);
	c->len = clen; /* not shm_ring_commit: any length */
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
	shm_doorbell_ring(a_map);
	n_cells++;
}

static void rec_pkt(struct rd *r)
{
	static uint8_t payload[SR_MAX_PAYLOAD];
	uint8_t sel = (uint8_t)take(r, 1), cell[SHM_INLINE_MAX] = {0};
	uint8_t hb[HDR_LEN];
	struct lm_rdm_hdr h;
	uint32_t plen, wlen, clen, buf = SHM_BUF_NONE, who = sel & SR_SEL_WHO;
	unsigned mask, n = 0;
	size_t hl, have;
	int idx = -1;
	pid_t self_pid;
	uint64_t token;

	take_bytes(r, hb, sizeof(hb));
	plen = (uint32_t)take(r, 2);
	plen += (sel & SR_SEL_CARRIER) == SR_SEL_BUF && plen == 0xffff; /* reach 64 KiB */
	mask = sel & SR_SEL_MASK ? (unsigned)take(r, 1) : 0x100;
	wlen = sel & SR_SEL_WLEN ? (uint32_t)take(r, 4) : plen;
	clen = sel & SR_SEL_CLEN ? (uint32_t)take(r, 4) : 0;
	if ((sel & SR_SEL_CARRIER) == SR_SEL_RAWBUF)
		buf = (uint32_t)take(r, 4);
	have = plen < SR_PKT_BYTES ? plen : SR_PKT_BYTES;
	take_bytes(r, payload, have);
	if (r->short_)
		return;
	for (size_t i = have; i < plen; i++)
		payload[i] = (uint8_t)(i * 5 + 7);
	patch_markers(hb, sizeof(hb));
	patch_markers(payload, have);
	memcpy(&h, hb, sizeof(h));
	if (!(sel & SR_SEL_RAWHDR)) {
		h.version = LM_RDM_WIRE_VERSION;
		if (h.op < LM_OP_EAGER || h.op >= LM_OP_MAX)
			h.op = (uint8_t)(LM_OP_EAGER + h.op % (LM_OP_MAX - LM_OP_EAGER));
		h.len = plen;
	}
	memcpy(hb, &h, sizeof(h));

	/* Header words: those the mask names (the non-zero ones, or the
	 * input's mask), packed after the wire fields. */
	if (mask > 0xff) {
		mask = 0;
		for (unsigned b = 0; b < 8; b++)
			if (ld64(hb + 8 * b))
				mask |= 1u << b;
	}
	for (unsigned b = 0; b < 8; b++)
		if (mask & 1u << b)
			memcpy(cell + WIRE_SIZE + 8 * n++, hb + 8 * b, 8);
	hl = WIRE_SIZE + 8 * (size_t)n;

	switch (sel & SR_SEL_CARRIER) {
	case 0:
		if (hl + plen <= SHM_INLINE_MAX)
			break;
		/* fall through */
	case SR_SEL_BUF:
		idx = shm_buf_alloc(a_map);
		if (idx < 0)
			return; /* none free, or a corrupt free list */
		buf = (uint32_t)idx;
		break;
	case SR_SEL_CUT:
		if (hl + plen > SHM_INLINE_MAX)
			plen = (uint32_t)(SHM_INLINE_MAX - hl);
		if (!(sel & SR_SEL_WLEN))
			wlen = plen;
		break;
	}
	if (buf != SHM_BUF_NONE) {
		uint8_t *dst = shm_buf_peer_ptr(a_map, buf);

		if (dst)
			memcpy(dst, payload, plen <= shm_buf_size(&a_map->map)
			                             ? plen
			                             : shm_buf_size(&a_map->map));
		if (!(sel & SR_SEL_CLEN))
			clen = (uint32_t)hl;
	} else {
		/* What the cell holds (an input's buffer index may say none
		 * with a payload that does not fit). */
		memcpy(cell + hl, payload, LM_MIN(plen, SHM_INLINE_MAX - hl));
		if (!(sel & SR_SEL_CLEN))
			clen = (uint32_t)(hl + plen);
	}
	/* Who the cell claims to be: H, H2, A itself, or nobody. */
	shm_addr_parse(A.addr, &self_pid, &token);
	token = who == 2 ? token : who == 3 ? h_token[0] ^ 0x5a5a : h_token[who];
	st64(cell, (who == 2 ? (uint32_t)self_pid : (uint32_t)child) | (uint64_t)buf << 32);
	st64(cell + 8, token);
	st64(cell + 16, wlen | (uint64_t)(mask & 0xff) << 32);
	put_cell(cell, sizeof(cell), clen);
}

static void rec_raw(struct rd *r)
{
	uint8_t cell[SHM_INLINE_MAX] = {0};
	uint32_t clen = (uint32_t)take(r, 4);
	size_t n = (size_t)take(r, 1);

	take_bytes(r, cell, n < sizeof(cell) ? n : sizeof(cell));
	if (r->short_)
		return;
	patch_markers(cell, sizeof(cell));
	put_cell(cell, sizeof(cell), clen);
}

static bool a_dirty; /* A's region needs putting right (repair_a) */

static void rec_ctrl(struct rd *r)
{
	unsigned which = (unsigned)take(r, 1) % 16;
	uint64_t v = take(r, 8);
	struct shm_map *am = &a_map->map, *hm = h_map[0] ? &h_map[0]->map : NULL;
	struct shm_hdr *a = am->hdr;

	if (r->short_)
		return;
	a_dirty = true;
	switch (which) {
	case SR_CTRL_ROOM_WANTED:
		atomic_store(&a->room_wanted, (uint32_t)v);
		break;
	case SR_CTRL_WAITER: {
		struct shm_waiter *w = &a->waiters[v % SHM_WAITERS];

		atomic_store(&w->pid, (int32_t)(v >> 16));
		atomic_store(&w->token, v);
		atomic_store(&w->state, (uint32_t)(v >> 8) & 3);
		break;
	}
	case SR_CTRL_BUF_FREE:
		atomic_store(&a->buf_free, v);
		break;
	case SR_CTRL_META_NEXT:
		if (am->buf_count)
			atomic_store(&am->meta[v % am->buf_count].next, (uint32_t)(v >> 32));
		break;
	case SR_CTRL_META_STATE:
		if (am->buf_count)
			atomic_store(&am->meta[v % am->buf_count].state, (uint32_t)(v >> 32));
		break;
	case SR_CTRL_SLEEPING:
		atomic_store(&a->sleeping, (uint32_t)v);
		break;
	case SR_CTRL_RING_FREED:
		atomic_store(&a->ring_freed, v);
		break;
	case SR_CTRL_CELL_SEQ: {
		uint64_t pos = atomic_load(&a->ring_head) + (uint64_t)(int64_t)(int8_t)v;

		atomic_store(&am->cells[pos & am->mask].seq, v >> 8);
		break;
	}
	case SR_CTRL_RING_HEAD:
		atomic_store(&a->ring_head, v);
		break;
	default:
		if (!hm)
			break;
		switch (which) {
		case SR_CTRL_H_HEAD:
			atomic_store(&hm->hdr->ring_head, v);
			break;
		case SR_CTRL_H_FREED:
			atomic_store(&hm->hdr->ring_freed, v);
			break;
		case SR_CTRL_H_BUF_FREE:
			atomic_store(&hm->hdr->buf_free, v);
			break;
		case SR_CTRL_H_META:
			atomic_store(&hm->meta[v % hm->buf_count].next, (uint32_t)(v >> 32));
			atomic_store(&hm->meta[v % hm->buf_count].state, (uint32_t)(v >> 8) & 1);
			break;
		case SR_CTRL_H_SLEEPING:
			atomic_store(&hm->hdr->sleeping, (uint32_t)v);
			break;
		case SR_CTRL_H_ROOM:
			atomic_store(&hm->hdr->room_wanted, (uint32_t)v);
			break;
		case SR_CTRL_H_ALIVE:
			atomic_store(&hm->hdr->alive, (uint32_t)v);
			break;
		}
	}
}

static void rec_buf(struct rd *r)
{
	uint8_t bytes[256];
	unsigned idx = (unsigned)take(r, 1);
	size_t off = (size_t)take(r, 2), n = (size_t)take(r, 1);
	struct shm_map *m = &a_map->map;
	uint8_t *dst;

	take_bytes(r, bytes, n);
	if (r->short_ || !m->buf_count)
		return;
	dst = shm_buf_peer_ptr(a_map, idx % m->buf_count);
	patch_markers(bytes, n);
	memcpy(dst + off % (m->buf_size - n), bytes, n);
}

/* ---- 2: putting the regions right --------------------------------------------- */

/* A free list of every buffer, as a fresh region has it. */
static void buffers_reset(struct shm_map *m)
{
	uint64_t old = atomic_load(&m->hdr->buf_free);

	for (uint32_t i = 0; i < m->buf_count; i++) {
		atomic_store(&m->meta[i].next, i + 1 < m->buf_count ? i + 1 : SHM_BUF_NONE);
		atomic_store(&m->meta[i].state, 0);
	}
	atomic_store(&m->hdr->buf_free,
	             ((old >> 32) + 1) << 32 | (m->buf_count ? 0 : SHM_BUF_NONE));
}

static void take_unexpected(unsigned coin);

/* A's ring as well-behaved producers would leave it: every position up to
 * the head published (a stuck cell republished empty, which A drops), the
 * head not behind what A consumed, and the consumed cells handed back.
 * A's own position (private to it) is the test's oracle. */
static void repair_a(void)
{
	struct shm_region *r = shm_link_region(lm_rdm_ep_of(A.ep)->link);
	struct shm_map *m = &a_map->map;
	uint64_t t = 0, h = 0;

	atomic_store(&m->hdr->sleeping, 0);
	for (int round = 0; round < 8; round++) {
		progress_a();
		if (round >= 2)
			take_unexpected(0); /* A stops reading while it holds much */
		t = shm_ring_tail(r);
		h = atomic_load(&m->hdr->ring_head);
		if (h == t)
			break;
		if (h - t > m->mask + 1) {
			atomic_store(&m->hdr->ring_head, t); /* behind, or far ahead */
			continue;
		}
		for (uint64_t p = t; p != h; p++) {
			struct shm_cell *c = &m->cells[p & m->mask];

			if (atomic_load(&c->seq) != p + 1) {
				c->len = 0;
				atomic_store(&c->seq, p + 1);
			}
		}
	}
	FZ_ASSERT(h == t, "A's ring does not drain: head %llu, consumed %llu",
	          (unsigned long long)h, (unsigned long long)t);
	atomic_store(&m->hdr->room_wanted, 0);
	for (int i = 0; i < SHM_WAITERS; i++)
		atomic_store(&m->hdr->waiters[i].state, 0);
	shm_ring_flush(r);
	a_map->freed = t;
	buffers_reset(m);
}

/* H's regions, as their owner would keep them: everything A wrote read,
 * the ring's words consistent, every buffer free. */
static void repair_h(void)
{
	drain_h();
	for (int i = 0; i < 2; i++) {
		struct shm_map *m;
		uint64_t head;

		if (!h_map[i])
			continue;
		m = &h_map[i]->map;
		head = atomic_load(&m->hdr->ring_head);
		if (head - h_tail[i] > m->mask + 1 || head != h_tail[i]) {
			/* A wrote where H's reader does not look: read on from
			 * the head, with every cell's word saying "not ready"
			 * there (h_tail is no position's committed word from
			 * h_tail on; a fresh cell's 0 would be, at 2^64 - 1). */
			h_tail[i] = head;
			for (uint64_t j = 0; j <= m->mask; j++)
				atomic_store(&m->cells[j].seq, h_tail[i]);
		}
		atomic_store(&m->hdr->ring_freed, h_tail[i]);
		atomic_store(&m->hdr->sleeping, 0);
		atomic_store(&m->hdr->room_wanted, 0);
		buffers_reset(m);
	}
}

/* ---- 3: after each input ------------------------------------------------------------- */

/* Messages no receive wanted: peek and claim (or discard) one, then post
 * receives for any tag and cancel them until one finds nothing. */
static void take_unexpected(unsigned coin)
{
	struct slot *s = temp_slot(K_TAG);

	if (s) {
		struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .ignore = ~0ULL, .context = s};

		s->state = S_PEEKING;
		FZ_OK(fi_trecvmsg(A.ep, &m, FI_PEEK | FI_CLAIM));
		drain_a();
		FZ_ASSERT(s->state != S_PEEKING, "FI_PEEK gave no completion");
		if (s->state == S_CLAIMED) {
			slot_post(s, FI_CLAIM | (coin & 1 ? FI_DISCARD : 0));
			drain_a();
		}
	}
	for (int round = 0; round < 4096; round++) {
		bool found = false;

		for (int kind = K_MSG; kind <= K_TAG; kind++) {
			int ret;

			s = temp_slot((uint8_t)kind);
			if (!s)
				return; /* all held by rendezvous with H */
			slot_post(s, 0);
			ret = fi_cancel(&A.ep->fid, s);
			FZ_ASSERT(!ret || ret == -FI_ENOENT, "fi_cancel = %d", ret);
			found |= ret == -FI_ENOENT;
			drain_a();
		}
		if (!found)
			return;
	}
	fail(__FILE__, __LINE__, "unexpected messages do not run out");
}

/* ---- 4: the endpoint still works ------------------------------------------------------- */

static void fill_pattern(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i >> 3) ^ (i * 13) ^ seed ^ (seed >> 8));
}

static void wait_sn(const int *want, size_t nwant)
{
	uint64_t deadline = now_ms() + SANITY_MS;

	for (;;) {
		size_t left = 0;

		progress_a();
		slots_repost();
		drain_b();
		for (size_t i = 0; i < nwant; i++)
			left += !sn[want[i]].done;
		if (!left)
			return;
		if (now_ms() > deadline) {
			for (size_t i = 0; i < nwant; i++)
				if (!sn[want[i]].done)
					fprintf(stderr, "shm_ring_fuzz: pending: %s\n",
					        sn_name[want[i]]);
			fail(__FILE__, __LINE__,
			     "the endpoint stopped working: exchanges did not complete in %d ms",
			     SANITY_MS);
		}
	}
}

#define RETRY(call)                                                                      \
	do {                                                                             \
		ssize_t r_;                                                              \
		uint64_t d_ = now_ms() + SANITY_MS;                                      \
		while ((r_ = (call)) == -FI_EAGAIN) {                                    \
			progress_a();                                                    \
			drain_b();                                                       \
			FZ_ASSERT(now_ms() < d_, "%s: -FI_EAGAIN for %d ms", #call,      \
			          SANITY_MS);                                            \
		}                                                                        \
		FZ_OK(r_);                                                               \
	} while (0)

static void check_rx(int k, int err, size_t len, uint64_t tag, fi_addr_t src)
{
	FZ_ASSERT(sn[k].err == err && sn[k].len == len && sn[k].tag == tag && sn[k].src == src,
	          "%s: err %d len %zu tag 0x%llx src %llu, want err %d len %zu tag 0x%llx "
	          "src %llu",
	          sn_name[k], sn[k].err, sn[k].len, (unsigned long long)sn[k].tag,
	          (unsigned long long)sn[k].src, err, len, (unsigned long long)tag,
	          (unsigned long long)src);
}

static void sanity(void)
{
	static uint64_t seq;
	enum { SMALL = 64, LARGE = 100000, RMA = 512, RMA_OFF = 8192 };
	static uint8_t a_small[SMALL], a_large[LARGE], b_small[SMALL], b_large[LARGE];
	static uint8_t rma_out[RMA], rma_in[RMA];
	uint64_t tag = TOP_TAG | ++seq << 8, one = 1, old = 0, rw0, rr0, word0;
	uint64_t rw_base = (uintptr_t)mr_buf[0], ro_base = (uintptr_t)mr_buf[1];

	memset(sn, 0, sizeof(sn));
	rw0 = a_rw_last;
	rr0 = a_rr_last;

	/* B -> A, eager and rendezvous, into receives only B can match. */
	fill_pattern(b_small, SMALL, seq);
	fill_pattern(b_large, LARGE, seq + 1);
	memset(a_small, 0, SMALL);
	memset(a_large, 0, LARGE);
	FZ_OK(fi_trecv(A.ep, a_small, SMALL, NULL, B.fa, tag, 0, &sn[SN_A_RX_SMALL]));
	FZ_OK(fi_trecv(A.ep, a_large, LARGE, NULL, B.fa, tag | 1, 0, &sn[SN_A_RX_LARGE]));
	RETRY(fi_tsend(B.ep, b_small, SMALL, NULL, A.fa, tag, &sn[SN_B_TX_SMALL]));
	RETRY(fi_tsend(B.ep, b_large, LARGE, NULL, A.fa, tag | 1, &sn[SN_B_TX_LARGE]));
	wait_sn((const int[]){SN_A_RX_SMALL, SN_A_RX_LARGE, SN_B_TX_SMALL, SN_B_TX_LARGE}, 4);
	check_rx(SN_A_RX_SMALL, 0, SMALL, tag, B.fa);
	check_rx(SN_A_RX_LARGE, 0, LARGE, tag | 1, B.fa);
	FZ_ASSERT(!sn[SN_B_TX_SMALL].err && !sn[SN_B_TX_LARGE].err, "B's sends failed");
	FZ_ASSERT(!memcmp(a_small, b_small, SMALL) && !memcmp(a_large, b_large, LARGE),
	          "A received other bytes than B sent");

	/* A -> B. */
	fill_pattern(a_small, SMALL, seq + 2);
	memset(b_small, 0, SMALL);
	FZ_OK(fi_trecv(B.ep, b_small, SMALL, NULL, A.fa, tag | 2, 0, &sn[SN_B_RX]));
	RETRY(fi_tsend(A.ep, a_small, SMALL, NULL, B.fa, tag | 2, &sn[SN_A_TX]));
	wait_sn((const int[]){SN_B_RX, SN_A_TX}, 2);
	check_rx(SN_B_RX, 0, SMALL, tag | 2, A.fa);
	FZ_ASSERT(!sn[SN_A_TX].err, "A's send to B failed: %d", sn[SN_A_TX].err);
	FZ_ASSERT(!memcmp(b_small, a_small, SMALL), "B received other bytes than A sent");

	/* B's RMA into A's read-write region: write, fetch-add, read back;
	 * a write into the read-only one is refused. */
	fill_pattern(rma_out, RMA, seq + 3);
	memcpy(&word0, rma_out, sizeof(word0));
	RETRY(fi_write(B.ep, rma_out, RMA, NULL, A.fa, rw_base + RMA_OFF, mr_key[0],
	               &sn[SN_B_WRITE]));
	wait_sn((const int[]){SN_B_WRITE}, 1);
	FZ_ASSERT(!sn[SN_B_WRITE].err, "B's write failed: %d", sn[SN_B_WRITE].err);
	FZ_ASSERT(!memcmp(mr_buf[0] + RMA_OFF, rma_out, RMA), "B's write did not land");
	RETRY(fi_fetch_atomic(B.ep, &one, 1, NULL, &old, NULL, A.fa, rw_base + RMA_OFF,
	                      mr_key[0], FI_UINT64, FI_SUM, &sn[SN_B_ATOMIC]));
	wait_sn((const int[]){SN_B_ATOMIC}, 1);
	FZ_ASSERT(!sn[SN_B_ATOMIC].err && old == word0,
	          "B's fetch-add: err %d, old 0x%llx, want 0x%llx", sn[SN_B_ATOMIC].err,
	          (unsigned long long)old, (unsigned long long)word0);
	memset(rma_in, 0, RMA);
	RETRY(fi_read(B.ep, rma_in, RMA, NULL, A.fa, rw_base + RMA_OFF, mr_key[0],
	              &sn[SN_B_READ]));
	RETRY(fi_write(B.ep, rma_out, 8, NULL, A.fa, ro_base, mr_key[1], &sn[SN_B_WRITE_RO]));
	wait_sn((const int[]){SN_B_READ, SN_B_WRITE_RO}, 2);
	word0++;
	memcpy(rma_out, &word0, sizeof(word0));
	FZ_ASSERT(!sn[SN_B_READ].err && !memcmp(rma_in, rma_out, RMA),
	          "B read back other bytes (err %d)", sn[SN_B_READ].err);
	FZ_ASSERT(sn[SN_B_WRITE_RO].err > 0,
	          "B wrote into a region registered without FI_REMOTE_WRITE");

	progress_a();
	FZ_ASSERT(a_rw_last >= rw0 + 1 && a_rr_last >= rr0 + 2,
	          "A's remote counters: write +%llu, read +%llu; want +1, +2",
	          (unsigned long long)(a_rw_last - rw0), (unsigned long long)(a_rr_last - rr0));
	check_memory();
}

void fz_final_check(void)
{
	if (!A.ep)
		setup();
	sanity();
	child_stop(true);
	child_start();
	sanity();
}

void fz_report(void)
{
	fprintf(stderr,
	        "shm_ring_fuzz: %lu inputs, %lu cells written, %lu answers from A, %lu "
	        "receives and %lu requests of A's ended\n",
	        n_inputs, n_cells, n_answers, n_received, n_requests);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = {data, size, false};

	if (!A.ep)
		setup();
	n_inputs++;
	a_dirty = false;
	while (r.left && !r.short_) {
		switch (take(&r, 1) % SR_KINDS) {
		case SR_PKT:
		case SR_PKT2:
		case SR_PKT3:
			rec_pkt(&r);
			break;
		case SR_RAW:
			rec_raw(&r);
			break;
		case SR_POLL: {
			unsigned n = (unsigned)take(&r, 1) % 4 + 1;

			for (unsigned i = 0; i < n; i++)
				progress_a();
			break;
		}
		case SR_CTRL:
			rec_ctrl(&r);
			break;
		case SR_TX:
			tx_start((unsigned)take(&r, 1));
			break;
		case SR_BUF:
			rec_buf(&r);
			break;
		}
	}
	for (int i = 0; i < 4; i++)
		progress_a();
	repair_a();
	repair_h();
	progress_a();
	take_unexpected(size ? data[size - 1] : 0);
	progress_a();
	slots_repost();
	check_memory();
	if (n_inputs % SANITY_EVERY == 0)
		sanity();
	if (n_inputs % EPOCH == 0) {
		child_stop(true);
		child_start();
	}
	return 0;
}
