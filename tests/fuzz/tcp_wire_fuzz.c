/* tcp_wire_fuzz.c - fuzz target for the tcp provider's wire parsing: each
 * input goes through the frame and handshake checks, then, as hostile
 * peers would send it, over raw TCP connections into a live tcp RDM
 * endpoint, which must neither crash nor touch memory it was not given,
 * and must go on working with a legitimate peer (tests/fuzz/README.md).
 *
 * One process holds, across inputs: endpoint A (the target: receives of
 * every kind posted, a read-write and a read-only region registered) and
 * endpoint B (a legitimate peer connected to A).  Per input:
 *   1. tcp_hello_check / tcp_frame_check / lm_rdm_rts_parse on the raw
 *      bytes, against what proto.h and rdm.h promise;
 *   2. the bytes (behind a valid HELLO for half of the inputs that lack
 *      one; after a split marker, a second peer's) go to A on fresh
 *      connections, in pieces or whole, then EOF; A is progressed until it
 *      closes them, and what it answers must be an ACK or NACK, then
 *      well-formed frames of answers only;
 *   3. A's completions must each name a posted receive and lie within its
 *      buffer; a buffer A gave back must stay untouched until it is posted
 *      again, the bytes around every buffer and region always, and the
 *      read-only region's bytes too; queued unexpected messages are taken
 *      (peek and claim, post and cancel);
 *   4. every 256th input: messages both ways with B (eager and
 *      rendezvous), a message to A itself, and B's RMA write, read and
 *      fetching atomic into A's regions, each checked.
 * The handshake's address field is rewritten to one of three dead
 * loopback ports or A's own address: a peer claiming B's address would
 * take B's place (no authentication, by design), and one naming any other
 * host would make A connect there. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

#include "tcp.h"
#include "tcp_wire.h"

#define HELLO_LEN    sizeof(struct tcp_hello)
#define FRAME_LEN    sizeof(struct tcp_frame)
#define HDR_LEN      sizeof(struct lm_rdm_hdr)
#define MAX_PAYLOAD  TCP_MAX_PAYLOAD /* the link's max_payload (proto.h) */
#define GUARD        64           /* bytes checked on each side of a receive buffer */
#define MR_GUARD     4096         /* on each side of a region */
#define TOP_TAG      (1ULL << 63) /* tags of the exchanges with B only */
#define SANITY_EVERY 256
#define INPUT_MS     5000 /* A must be done with one input by then */
#define SANITY_MS    10000
#define SETTLE_POLLS 64

/* ---- failures --------------------------------------------------------------- */

static unsigned long n_inputs, n_frames, n_answers;

__attribute__((noreturn, format(printf, 3, 4))) static void
fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tcp_wire_fuzz: %s:%d (input %lu): ", file, line, n_inputs);
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
	struct sockaddr_in addr;
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
static const size_t mr_len[2] = {TW_MR_RW_LEN, TW_MR_RO_LEN};
static struct fid_mr *mr[2];
static uint64_t mr_key[2];

/* Loopback ports bound but not listening: handshakes name them, and A's
 * connections to them are refused at once. */
static int dead_fd[3];
static struct sockaddr_in dead_addr[3];

/* ---- A's receives ------------------------------------------------------------- */

/* A buffer not posted holds a pattern (its "poison"), checked when it is
 * posted again: the library must not write into a receive it has
 * completed.  Persistent receives go back after each input, not at once. */
enum slot_state { S_FREE, S_POSTED, S_PEEKING, S_CLAIMED };
enum slot_kind { K_MSG, K_TAG, K_MULTI };

struct slot {
	uint8_t *mem; /* [guard][cap bytes][guard] */
	uint8_t *buf;
	size_t cap;
	uint64_t tag, ignore; /* K_TAG */
	uint8_t kind;
	uint8_t state;
	bool persistent; /* posted again after each input */
};

/* Tags: the exchanges with B have the top bit; the catch-all tagged
 * receives take those with the top two bits clear; one large receive
 * takes those with only bit 62 (a rendezvous target inputs can aim at). */
#define BIG_TAG TW_BIG_TAG

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

/* The receive ended (or never started): the buffer is the test's again. */
static void slot_release(struct slot *s)
{
	s->state = S_FREE;
	guard_fill(s->buf, s->cap, poison_salt(s));
}

static void slot_check_poison(const struct slot *s)
{
	size_t at = guard_bad(s->buf, s->cap, poison_salt(s));

	FZ_ASSERT(!at,
	          "receive slot %zu (cap %zu) written at byte %zu after its "
	          "completion",
	          (size_t)(s - slots), s->cap, at - 1);
}

static void slot_post(struct slot *s, uint64_t flags)
{
	struct iovec iov = {s->buf, s->cap};
	ssize_t ret;

	slot_check_poison(s);
	if (s->kind == K_TAG) {
		struct fi_msg_tagged m = {.msg_iov = &iov,
		                          .iov_count = 1,
		                          .addr = FI_ADDR_UNSPEC,
		                          .tag = s->tag,
		                          .ignore = s->ignore,
		                          .context = s};

		ret = fi_trecvmsg(A.ep, &m, flags);
	} else {
		struct fi_msg m = {.msg_iov = &iov,
		                   .iov_count = 1,
		                   .addr = FI_ADDR_UNSPEC,
		                   .context = s};

		ret = fi_recvmsg(A.ep, &m,
		                 flags | (s->kind == K_MULTI ? FI_MULTI_RECV : 0));
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
		s->ignore = ~(TOP_TAG | BIG_TAG);
		if (i == I_MULTI) {
			s->kind = K_MULTI;
			s->cap = MULTI_CAP;
		} else if (i == I_BIG) {
			s->cap = BIG_CAP;
			s->tag = BIG_TAG;
			s->ignore = BIG_TAG - 1;
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

/* ---- the exchanges with B --------------------------------------------------------- */

enum {
	SN_A_RX_SMALL,
	SN_A_RX_LARGE,
	SN_B_TX_SMALL,
	SN_B_TX_LARGE,
	SN_A_TX,
	SN_B_RX,
	SN_A_SELF_TX,
	SN_A_SELF_RX,
	SN_B_WRITE,
	SN_B_ATOMIC,
	SN_B_READ,
	SN_B_READ_RO,
	SN_B_WRITE_RO,
	SN_MAX
};

static const char *const sn_name[SN_MAX] = {
    "A recv small from B",  "A recv large from B", "B send small",
    "B send large",         "A send to B",         "B recv from A",
    "A send to A",          "A recv from A",       "B write to A",
    "B atomic at A",        "B read from A",       "B read A's ro region",
    "B write A's ro region"};

struct sn {
	bool done;
	int err;
	size_t len;
	uint64_t tag, flags;
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
                      uint64_t flags, fi_addr_t src)
{
	FZ_ASSERT(!sn[i].done, "%s: a second completion for \"%s\"", who, sn_name[i]);
	sn[i] = (struct sn){true, err, len, tag, flags, src};
}

/* ---- completions ------------------------------------------------------------------ */

/* One entry of A's CQ: success (err 0) or error. */
static void a_entry(void *ctx, uint64_t flags, size_t len, void *buf, uint64_t tag,
                    fi_addr_t src, int err)
{
	struct slot *s = slot_of(ctx);
	int k = sn_of(ctx);

	if (k >= 0) {
		sn_record("A", k, err, len, tag, flags, src);
		return;
	}
	if (!ctx) {
		/* Remote CQ data of a hostile RMA write. */
		FZ_ASSERT(!err && (flags & FI_REMOTE_CQ_DATA) &&
		              (flags & FI_REMOTE_WRITE),
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
		FZ_ASSERT(!len || ((uint8_t *)buf >= s->buf &&
		                   (uint8_t *)buf + len <= s->buf + s->cap),
		          "A: multi-receive entry [%p +%zu] outside [%p +%zu]", buf, len,
		          (void *)s->buf, s->cap);
		if (flags & FI_MULTI_RECV)
			slot_release(s);
		return;
	}
	FZ_ASSERT(len <= s->cap, "A: %zu bytes reported into a %zu-byte receive", len,
	          s->cap);
	FZ_ASSERT(!buf || buf == s->buf, "A: entry buf %p, posted %p", buf,
	          (void *)s->buf);
	FZ_ASSERT(s->kind != K_TAG || ((tag ^ s->tag) & ~s->ignore) == 0,
	          "A: tag 0x%llx matched receive slot %zu (tag 0x%llx ignore 0x%llx)",
	          (unsigned long long)tag, (size_t)(s - slots),
	          (unsigned long long)s->tag, (unsigned long long)s->ignore);
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

				FZ_ASSERT(k >= 0, "B: unknown context %p",
				          e[i].op_context);
				sn_record("B", k, 0, e[i].len, e[i].tag, e[i].flags,
				          src[i]);
			}
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};
			int k;

			FZ_ASSERT(fi_cq_readerr(B.cq, &ee, 0) == 1, "B: fi_cq_readerr");
			k = sn_of(ee.op_context);
			FZ_ASSERT(k >= 0, "B: unknown error context %p", ee.op_context);
			sn_record("B", k, ee.err ? ee.err : -1, ee.len, ee.tag, ee.flags,
			          FI_ADDR_NOTAVAIL);
			continue;
		}
		FZ_ASSERT(n == -FI_EAGAIN, "B: fi_cq_readfrom = %zd", n);
		break;
	}
}

/* Progress A (its CQ and counters) and take what completed. */
static void progress_a(void)
{
	uint64_t rw, rr;

	drain_a();
	rw = fi_cntr_read(a_rw);
	rr = fi_cntr_read(a_rr);
	FZ_ASSERT(rw >= a_rw_last && rr >= a_rr_last, "A's counters went back");
	a_rw_last = rw;
	a_rr_last = rr;
}

/* ---- memory checks ------------------------------------------------------------------
 */

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
		FZ_ASSERT(!at, "written before receive slot %zu (cap %zu), byte -%zu", i,
		          s->cap, GUARD - at + 1);
		at = guard_bad(s->buf + s->cap, GUARD, (unsigned)i + 1000);
		FZ_ASSERT(!at, "written after receive slot %zu (cap %zu), byte +%zu", i,
		          s->cap, at - 1);
	}
	for (int r = 0; r < 2; r++) {
		size_t at = guard_bad(mr_arena[r], MR_GUARD, 7000u + (unsigned)r);

		FZ_ASSERT(!at, "written before region %d, byte -%zu", r,
		          MR_GUARD - at + 1);
		at = guard_bad(mr_buf[r] + mr_len[r], MR_GUARD, 8000u + (unsigned)r);
		FZ_ASSERT(!at, "written after region %d, byte +%zu", r, at - 1);
	}
	for (size_t i = 0; i < TW_MR_RO_LEN; i++)
		FZ_ASSERT(mr_buf[1][i] == ro_byte(i),
		          "the read-only region changed at %zu", i);
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
	FZ_OK(fi_getname(&e->ep->fid, &e->addr, &len));
	FZ_ASSERT(len == sizeof(e->addr) && e->addr.sin_family == AF_INET,
	          "tcp address of %zu bytes, family %d", len, e->addr.sin_family);
	FZ_ASSERT(e->addr.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	          "the endpoint is not on 127.0.0.1 (FI_TCP_IFACE=lo?)");
	FZ_ASSERT(fi_av_insert(av, &e->addr, 1, &e->fa, 0, NULL) == 1, "fi_av_insert");
}

static void sanity(void);

static void setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};

	/* The target must be on loopback whatever the caller's environment. */
	setenv("FI_TCP_IFACE", "lo", 0);
	FZ_ASSERT(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE |
	              FI_DIRECTED_RECV | FI_MULTI_RECV | FI_RMA_EVENT;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	FZ_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	FZ_ASSERT(!strcmp(info->fabric_attr->prov_name, "tcp"), "provider %s",
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

	for (int r = 0; r < 2; r++) {
		mr_arena[r] = malloc(mr_len[r] + 2 * MR_GUARD);
		FZ_ASSERT(mr_arena[r], "out of memory");
		mr_buf[r] = mr_arena[r] + MR_GUARD;
		guard_fill(mr_arena[r], MR_GUARD, 7000u + (unsigned)r);
		guard_fill(mr_buf[r] + mr_len[r], MR_GUARD, 8000u + (unsigned)r);
		FZ_OK(fi_mr_reg(domain, mr_buf[r], mr_len[r],
		                r ? FI_REMOTE_READ : FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
		                0, 0, &mr[r], NULL));
		mr_key[r] = fi_mr_key(mr[r]);
	}
	memset(mr_buf[0], 0, TW_MR_RW_LEN);
	for (size_t i = 0; i < TW_MR_RO_LEN; i++)
		mr_buf[1][i] = ro_byte(i);

	for (int i = 0; i < 3; i++) {
		socklen_t alen = sizeof(dead_addr[i]);

		dead_fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		dead_addr[i] = (struct sockaddr_in){
		    .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		FZ_ASSERT(
		    dead_fd[i] >= 0 &&
		        !bind(dead_fd[i], (struct sockaddr *)&dead_addr[i],
		              sizeof(dead_addr[i])) &&
		        !getsockname(dead_fd[i], (struct sockaddr *)&dead_addr[i], &alen),
		    "binding a loopback port: %s", strerror(errno));
	}

	slots_init();
	slots_repost();
	sanity(); /* connects A and B, and proves the checks can pass */
}

/* ---- 1: the checks themselves --------------------------------------------------------
 */

static void check_parsers(const uint8_t *d, size_t n)
{
	static const struct {
		size_t hdr, max;
	} lim[] = {{HDR_LEN, MAX_PAYLOAD}, {HDR_LEN, 0}, {0, MAX_PAYLOAD}, {8, 1}};
	struct lm_rdm_rts rts;
	uint64_t count;
	int ret;

	if (n >= HELLO_LEN) {
		struct tcp_hello h;

		memcpy(&h, d, sizeof(h));
		for (uint32_t kind = 0; kind <= 4; kind++) {
			bool good = h.magic == TCP_MAGIC &&
			            h.version == TCP_PROTO_VERSION && h.kind == kind &&
			            h.offer_len <= TCP_OFFER_MAX &&
			            (kind == TCP_HELLO_NACK ||
			             h.addrlen == sizeof(struct sockaddr_in));

			ret = tcp_hello_check(&h, kind);
			FZ_ASSERT(
			    good ? ret == 0 : ret < 0,
			    "tcp_hello_check(kind %u) = %d for magic 0x%llx version %u "
			    "kind %u addrlen %u",
			    kind, ret, (unsigned long long)h.magic, h.version, h.kind,
			    h.addrlen);
			/* on_hello answers NACK(VERSION) on exactly this code. */
			FZ_ASSERT(
			    (ret == -FI_ENOPROTOOPT) ==
			        (h.magic == TCP_MAGIC && h.version != TCP_PROTO_VERSION),
			    "tcp_hello_check = %d for version %u", ret, h.version);
		}
	}
	for (size_t off = 0; off + FRAME_LEN <= n && off <= HELLO_LEN; off += HELLO_LEN) {
		struct tcp_frame f;

		memcpy(&f, d + off, sizeof(f));
		for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
			/* A packet's frame, the empty ACK_NOW or CONFIRM, or RCVD. */
			bool empty = f.flags == TCP_FRAME_ACK_NOW || f.flags == TCP_FRAME_CONFIRM;
			bool link = empty || f.flags == TCP_FRAME_RCVD;
			bool fits = empty ? !f.len && !f.hdr_len
			            : f.flags == TCP_FRAME_RCVD
			                ? f.len == sizeof(uint64_t) && !f.hdr_len
			                : f.hdr_len == lim[i].hdr && f.len <= lim[i].max;

			ret = tcp_frame_check(&f, lim[i].hdr, lim[i].max);
			FZ_ASSERT(ret <= 0 && (!ret || !fits || (f.flags && !link)),
			          "tcp_frame_check = %d for len %u hdr_len %u flags %u",
			          ret, f.len, f.hdr_len, f.flags);
			FZ_ASSERT(ret || fits,
			          "tcp_frame_check accepted len %u hdr_len %u (limits "
			          "%zu, %zu)",
			          f.len, f.hdr_len, lim[i].max, lim[i].hdr);
		}
	}
	/* An iov list: a count, then exactly that many (base, len) pairs. */
	memset(&rts, 0xee, sizeof(rts));
	ret = lm_rdm_rts_parse(&rts, d, n);
	count = 0;
	if (n >= sizeof(count))
		memcpy(&count, d, sizeof(count));
	if (n >= sizeof(count) && count <= LM_IOV_LIMIT && n == 8 + 16 * count) {
		FZ_ASSERT(!ret && rts.iov_count == count &&
		              !memcmp(rts.iov, d + 8, n - 8),
		          "lm_rdm_rts_parse refused a list of %llu = %d",
		          (unsigned long long)count, ret);
	} else {
		FZ_ASSERT(ret < 0, "lm_rdm_rts_parse took %zu bytes, count %llu", n,
		          (unsigned long long)count);
	}
}

/* ---- 2: the bytes on a connection
 * ------------------------------------------------------- */

/* A's answers on the hostile connection: ACK or NACK, then (after ACK)
 * frames of answers, each well-formed. */
struct answers {
	uint8_t head[HELLO_LEN + HDR_LEN];
	size_t have;
	size_t skip; /* payload bytes still to pass */
	bool hello_done, nacked;
};

static void answers_feed(struct answers *a, const uint8_t *p, size_t n)
{
	while (n) {
		/* After the handshake: a frame header, then the engine header
		 * of a packet's frame (RCVD and ACK_NOW frames carry none). */
		size_t need = !a->hello_done        ? HELLO_LEN
		              : a->have < FRAME_LEN ? FRAME_LEN
		                                    : FRAME_LEN + HDR_LEN,
		       k;

		if (a->skip) {
			k = n < a->skip ? n : a->skip;
			p += k;
			n -= k;
			a->skip -= k;
			continue;
		}
		k = need - a->have < n ? need - a->have : n;
		memcpy(a->head + a->have, p, k);
		a->have += k;
		p += k;
		n -= k;
		if (a->have < need)
			break;
		if (need == FRAME_LEN) {
			struct tcp_frame f;

			memcpy(&f, a->head, sizeof(f));
			if (f.flags == TCP_FRAME_RCVD || f.flags == TCP_FRAME_ACK_NOW ||
			    f.flags == TCP_FRAME_CONFIRM) {
				FZ_ASSERT(!a->nacked, "A sent data after its NACK");
				FZ_ASSERT(!tcp_frame_check(&f, HDR_LEN, MAX_PAYLOAD),
				          "A sent a malformed link frame: len %u hdr_len %u",
				          f.len, f.hdr_len);
				a->have = 0;
				a->skip = f.len;
			}
			continue; /* a packet's: its engine header next */
		}
		a->have = 0;
		if (!a->hello_done) {
			struct tcp_hello h;

			memcpy(&h, a->head, sizeof(h));
			a->hello_done = true;
			a->nacked = h.kind == TCP_HELLO_NACK;
			if (a->nacked)
				FZ_ASSERT(!tcp_hello_check(&h, TCP_HELLO_NACK) &&
				              h.status >= TCP_NACK_VERSION &&
				              h.status <= TCP_NACK_KIND,
				          "A's NACK: kind %u status %u", h.kind,
				          h.status);
			else
				FZ_ASSERT(!tcp_hello_check(&h, TCP_HELLO_ACK) &&
				              !memcmp(h.addr, &A.addr, sizeof(A.addr)),
				          "A's answer to a HELLO: magic 0x%llx version "
				          "%u kind %u",
				          (unsigned long long)h.magic, h.version, h.kind);
			a->skip = a->nacked ? 0 : h.offer_len; /* its offer (proto.h) */
			continue;
		}
		{
			struct tcp_frame f;
			struct lm_rdm_hdr h;

			FZ_ASSERT(!a->nacked, "A sent data after its NACK");
			memcpy(&f, a->head, sizeof(f));
			memcpy(&h, a->head + FRAME_LEN, sizeof(h));
			FZ_ASSERT(!tcp_frame_check(&f, HDR_LEN, MAX_PAYLOAD),
			          "A sent a malformed frame: len %u hdr_len %u flags %u",
			          f.len, f.hdr_len, f.flags);
			FZ_ASSERT(
			    h.version == LM_RDM_WIRE_VERSION && h.len == f.len,
			    "A sent engine header version %u len %u in a frame of %u",
			    h.version, h.len, f.len);
			/* A never starts anything with a stranger: only answers. */
			FZ_ASSERT(h.op == LM_OP_CTS || h.op == LM_OP_FIN ||
			              h.op == LM_OP_ACK || h.op == LM_OP_WRITE_ACK ||
			              h.op == LM_OP_READ_RESP ||
			              h.op == LM_OP_ATOMIC_RESP || h.op == LM_OP_PUSH ||
			              h.op == LM_OP_PUSHED,
			          "A sent op %u to a hostile peer", h.op);
			n_answers++;
			a->skip = f.len;
		}
	}
}

/* A hostile connection: its bytes (markers patched, pauses taken out),
 * how far they went, and A's answers on it. */
#define MAX_SEGS 32

struct hconn {
	int fd;
	uint8_t *s;
	size_t len, off;
	size_t seg_end[MAX_SEGS + 1]; /* the input's pauses, then its end */
	size_t nseg;
	bool closed; /* A closed its end */
	struct answers ans;
};

static struct hconn hc[2];

static void hc_poll_all(void)
{
	static uint8_t rbuf[65536];

	for (int i = 0; i < 2; i++) {
		struct hconn *c = &hc[i];

		while (c->fd >= 0 && !c->closed) {
			ssize_t n = recv(c->fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);

			if (n > 0)
				answers_feed(&c->ans, rbuf, (size_t)n);
			else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK &&
			                    errno != EINTR))
				c->closed = true; /* it read all it was going to */
			else
				break;
		}
	}
}

static void hc_open(struct hconn *c)
{
	struct pollfd p = {.events = POLLOUT};
	int err = 0;
	socklen_t len = sizeof(err);

	/* Non-blocking: libFuzzer's timer signals would interrupt a blocking
	 * connect, which then goes on by itself. */
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FZ_ASSERT(c->fd >= 0, "socket: %s", strerror(errno));
	p.fd = c->fd;
	if (connect(c->fd, (struct sockaddr *)&A.addr, sizeof(A.addr))) {
		FZ_ASSERT(errno == EINPROGRESS || errno == EINTR, "connect to A: %s",
		          strerror(errno));
		/* A listening socket on loopback completes it by itself. */
		while (poll(&p, 1, INPUT_MS) < 0)
			FZ_ASSERT(errno == EINTR, "poll: %s", strerror(errno));
		FZ_ASSERT(p.revents & POLLOUT, "connect to A: not done in %d ms",
		          INPUT_MS);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		FZ_ASSERT(!err, "connect to A: %s", strerror(err));
	}
}

/* Send c's bytes up to upto, chunk at a time (0: as fast as the socket
 * takes them), A progressed in between, so handshakes, headers and
 * payloads also arrive in pieces. */
static void hc_send(struct hconn *c, size_t upto, size_t chunk)
{
	uint64_t deadline = now_ms() + INPUT_MS;

	while (c->off < upto && !c->closed) {
		size_t k = upto - c->off;
		ssize_t n;

		if (chunk && k > chunk)
			k = chunk;
		n = send(c->fd, c->s + c->off, k, MSG_NOSIGNAL);
		if (n > 0)
			c->off += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		         errno != EINTR)
			c->off = c->len; /* A closed early: it refused what it got */
		progress_a();
		hc_poll_all();
		FZ_ASSERT(now_ms() < deadline, "A took %zu of %zu bytes in %d ms", c->off,
		          c->len, INPUT_MS);
	}
	/* A takes what arrived before the other peer's turn (the link may
	 * look for new connections only every few dozen polls). */
	for (int i = 0; i < SETTLE_POLLS; i++) {
		progress_a();
		hc_poll_all();
	}
}

/* The rest, EOF, and A progressed until it has closed its end. */
static void hc_finish(struct hconn *c, size_t chunk)
{
	struct linger lg = {1, 0};
	uint64_t deadline;

	if (c->fd < 0)
		return;
	hc_send(c, c->len, chunk);
	shutdown(c->fd, SHUT_WR);
	deadline = now_ms() + INPUT_MS;
	while (!c->closed) {
		progress_a();
		hc_poll_all();
		FZ_ASSERT(now_ms() < deadline,
		          "A has not closed a connection %d ms after its EOF", INPUT_MS);
	}
	/* Reset rather than FIN: no TIME_WAIT left behind per input. */
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c->fd);
	c->fd = -1;
	free(c->s);
	c->s = NULL;
}

/* ---- 3: after each input -------------------------------------------------------------
 */

/* Messages no receive wanted: peek and claim (or discard) one, then post
 * receives for any tag and cancel them until one finds nothing. */
static void take_unexpected(unsigned coin)
{
	struct slot *s = temp_slot(K_TAG);

	if (s) {
		struct fi_msg_tagged m = {
		    .addr = FI_ADDR_UNSPEC, .ignore = ~0ULL, .context = s};

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
				return; /* all held by rendezvous to dead peers */
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

/* ---- 4: the endpoint still works
 * ------------------------------------------------------- */

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
					fprintf(stderr, "tcp_wire_fuzz: pending: %s\n",
					        sn_name[want[i]]);
			fail(__FILE__, __LINE__,
			     "the endpoint stopped working: exchanges did not complete "
			     "in %d ms",
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
	FZ_ASSERT(
	    sn[k].err == err && sn[k].len == len && sn[k].tag == tag && sn[k].src == src,
	    "%s: err %d len %zu tag 0x%llx src %llu, want err %d len %zu tag 0x%llx "
	    "src %llu",
	    sn_name[k], sn[k].err, sn[k].len, (unsigned long long)sn[k].tag,
	    (unsigned long long)sn[k].src, err, len, (unsigned long long)tag,
	    (unsigned long long)src);
}

/* A message from A to its own address, through the link's local path:
 * a peer that claimed that address must not have broken it. */
static void self_check(void)
{
	static uint64_t n;
	static uint8_t out[64], in[64];
	uint64_t tag = TOP_TAG | 1ULL << 61 | ++n;

	fill_pattern(out, sizeof(out), n);
	memset(in, 0, sizeof(in));
	sn[SN_A_SELF_TX] = sn[SN_A_SELF_RX] = (struct sn){0};
	FZ_OK(fi_trecv(A.ep, in, sizeof(in), NULL, A.fa, tag, 0, &sn[SN_A_SELF_RX]));
	RETRY(fi_tsend(A.ep, out, sizeof(out), NULL, A.fa, tag, &sn[SN_A_SELF_TX]));
	wait_sn((const int[]){SN_A_SELF_TX}, 1);
	FZ_ASSERT(!sn[SN_A_SELF_TX].err, "A's send to itself failed: err %d",
	          sn[SN_A_SELF_TX].err);
	wait_sn((const int[]){SN_A_SELF_RX}, 1);
	check_rx(SN_A_SELF_RX, 0, sizeof(in), tag, A.fa);
	FZ_ASSERT(!memcmp(in, out, sizeof(in)), "A received other bytes than it sent");
}

static void sanity(void)
{
	static uint64_t seq;
	enum { SMALL = 64, LARGE = 100000, RMA = 512, RMA_OFF = 8192 };
	static uint8_t a_small[SMALL], a_large[LARGE], b_small[SMALL], b_large[LARGE];
	static uint8_t rma_out[RMA], rma_in[RMA], ro_in[64];
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
	wait_sn((const int[]){SN_A_RX_SMALL, SN_A_RX_LARGE, SN_B_TX_SMALL, SN_B_TX_LARGE},
	        4);
	check_rx(SN_A_RX_SMALL, 0, SMALL, tag, B.fa);
	check_rx(SN_A_RX_LARGE, 0, LARGE, tag | 1, B.fa);
	FZ_ASSERT(!sn[SN_B_TX_SMALL].err && !sn[SN_B_TX_LARGE].err, "B's sends failed");
	FZ_ASSERT(!memcmp(a_small, b_small, SMALL) && !memcmp(a_large, b_large, LARGE),
	          "A received other bytes than B sent");

	/* A -> B, and A -> A (its own address). */
	fill_pattern(a_small, SMALL, seq + 2);
	memset(b_small, 0, SMALL);
	FZ_OK(fi_trecv(B.ep, b_small, SMALL, NULL, A.fa, tag | 2, 0, &sn[SN_B_RX]));
	RETRY(fi_tsend(A.ep, a_small, SMALL, NULL, B.fa, tag | 2, &sn[SN_A_TX]));
	wait_sn((const int[]){SN_B_RX, SN_A_TX}, 2);
	check_rx(SN_B_RX, 0, SMALL, tag | 2, A.fa);
	FZ_ASSERT(!sn[SN_A_TX].err, "A's send to B failed: %d", sn[SN_A_TX].err);
	FZ_ASSERT(!memcmp(b_small, a_small, SMALL), "B received other bytes than A sent");
	self_check();

	/* B's RMA into A's read-write region: write, fetch-add, read back. */
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
	wait_sn((const int[]){SN_B_READ}, 1);
	word0++;
	memcpy(rma_out, &word0, sizeof(word0));
	FZ_ASSERT(!sn[SN_B_READ].err && !memcmp(rma_in, rma_out, RMA),
	          "B read back other bytes (err %d)", sn[SN_B_READ].err);

	/* The read-only region: readable, and a write is refused. */
	RETRY(fi_read(B.ep, ro_in, sizeof(ro_in), NULL, A.fa, ro_base + 100, mr_key[1],
	              &sn[SN_B_READ_RO]));
	RETRY(fi_write(B.ep, rma_out, 8, NULL, A.fa, ro_base, mr_key[1],
	               &sn[SN_B_WRITE_RO]));
	wait_sn((const int[]){SN_B_READ_RO, SN_B_WRITE_RO}, 2);
	FZ_ASSERT(!sn[SN_B_READ_RO].err, "B's read of the read-only region failed: %d",
	          sn[SN_B_READ_RO].err);
	for (size_t i = 0; i < sizeof(ro_in); i++)
		FZ_ASSERT(ro_in[i] == ro_byte(100 + i),
		          "B read the read-only region wrong");
	FZ_ASSERT(sn[SN_B_WRITE_RO].err > 0,
	          "B wrote into a region registered without FI_REMOTE_WRITE");

	progress_a();
	FZ_ASSERT(a_rw_last >= rw0 + 1 && a_rr_last >= rr0 + 3,
	          "A's remote counters: write +%llu, read +%llu; want +1, +3",
	          (unsigned long long)(a_rw_last - rw0),
	          (unsigned long long)(a_rr_last - rr0));
	check_memory();
}

void fz_final_check(void)
{
	if (!A.ep)
		setup();
	sanity();
}

void fz_report(void)
{
	fprintf(stderr,
	        "tcp_wire_fuzz: %lu inputs, %lu whole frames sent, %lu answers from the "
	        "endpoint\n",
	        n_inputs, n_frames, n_answers);
}

/* ---- the stream
 * ------------------------------------------------------------------------ */

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

/* The rendezvous handle the k-th rendezvous A starts from now on gets:
 * free slots are taken lowest first. */
static uint64_t next_rndv_handle(uint32_t k)
{
	struct lm_rdm_ep *ep = lm_rdm_ep_of(A.ep);

	for (size_t i = 0; i < ep->rndv_count; i++)
		if (ep->rndv[i].state == LM_RNDV_FREE && !k--)
			return lm_rdm_handle(ep->rndv[i].gen, i);
	return 0;
}

/* Markers (tcp_wire.h) after the handshake take their live values. */
static void patch_markers(uint8_t *d, size_t n)
{
	for (size_t i = HELLO_LEN; i + 8 <= n;) {
		uint64_t v = ld64(d + i);
		uint32_t lo = (uint32_t)v;
		int64_t off = (int32_t)lo;

		switch ((uint32_t)(v >> 32)) {
		case TW_MARK_ADDR_RW:
			st64(d + i, (uint64_t)((intptr_t)mr_buf[0] + off));
			break;
		case TW_MARK_ADDR_RO:
			st64(d + i, (uint64_t)((intptr_t)mr_buf[1] + off));
			break;
		case TW_MARK_KEY_RW:
			st64(d + i, mr_key[0] ^ lo);
			break;
		case TW_MARK_KEY_RO:
			st64(d + i, mr_key[1] ^ lo);
			break;
		case TW_MARK_RNDV:
			st64(d + i, next_rndv_handle(lo % 64));
			break;
		default:
			i++;
			continue;
		}
		i += 8;
	}
}

/* The handshake's claimed address, chosen by the low byte of the port the
 * input put there: 0-2 a dead port, 3 A itself. */
#ifndef CLAIMS
#define CLAIMS 4
#endif
#define SELECTOR TW_SELECTOR
_Static_assert(TW_SELECTOR == offsetof(struct tcp_hello, addr) +
                                  offsetof(struct sockaddr_in, sin_port) + 1,
               "the selector is the low byte of the claimed port");

static void claim_address(uint8_t *hello, unsigned sel)
{
	const struct sockaddr_in *a =
	    sel % CLAIMS == 3 ? &A.addr : &dead_addr[sel % CLAIMS];

	memcpy(hello + offsetof(struct tcp_hello, addr), a, sizeof(*a));
}

static void count_frames(const uint8_t *d, size_t n)
{
	struct tcp_hello h;
	size_t off = HELLO_LEN;

	if (n < HELLO_LEN)
		return;
	memcpy(&h, d, sizeof(h));
	if (tcp_hello_check(&h, TCP_HELLO_RDM))
		return;
	while (off + FRAME_LEN <= n) {
		struct tcp_frame f;

		memcpy(&f, d + off, sizeof(f));
		if (tcp_frame_check(&f, HDR_LEN, MAX_PAYLOAD) ||
		    n - off < FRAME_LEN + HDR_LEN + f.len)
			return;
		off += FRAME_LEN + HDR_LEN + f.len;
		n_frames++;
	}
}

/* c's bytes: d, behind a valid HELLO when d lacks one and (hello) asks
 * for it; the claimed address chosen by sel, or (sel < 0) by the bytes.
 * Returns the choice. */
static unsigned hc_build(struct hconn *c, const uint8_t *d, size_t n, bool hello, int sel)
{
	struct tcp_hello h;
	bool prepend;
	size_t w = 0;
	unsigned chosen;

	memset(&h, 0, sizeof(h));
	if (n >= HELLO_LEN)
		memcpy(&h, d, sizeof(h));
	prepend = hello && (n < HELLO_LEN || tcp_hello_check(&h, TCP_HELLO_RDM));
	*c = (struct hconn){.fd = -1, .s = malloc(n + HELLO_LEN)};
	FZ_ASSERT(c->s, "out of memory");
	if (prepend) {
		h = (struct tcp_hello){.magic = TCP_MAGIC,
		                       .version = TCP_PROTO_VERSION,
		                       .kind = TCP_HELLO_RDM,
		                       .instance = 0x1000u + (n ? d[0] : 0u),
		                       .addrlen = sizeof(struct sockaddr_in)};
		memcpy(c->s, &h, sizeof(h));
		c->s[SELECTOR] = (uint8_t)(n ? d[0] >> 1 : 0);
		w = HELLO_LEN;
	}
	memcpy(c->s + w, d, n);
	c->len = w + n;
	chosen = sel >= 0            ? (unsigned)sel
	         : c->len > SELECTOR ? c->s[SELECTOR] % CLAIMS
	                             : 0;
	if (c->len >= HELLO_LEN)
		claim_address(c->s, chosen);

	/* Pauses out (each ends a segment), then the other markers. */
	w = 0;
	for (size_t i = 0; i < c->len;) {
		if (i >= HELLO_LEN && i + 8 <= c->len &&
		    ld64(c->s + i) >> 32 == TW_MARK_PAUSE) {
			if (c->nseg < MAX_SEGS)
				c->seg_end[c->nseg++] = w;
			i += 8;
			continue;
		}
		c->s[w++] = c->s[i++];
	}
	c->len = w;
	c->seg_end[c->nseg++] = w;
	patch_markers(c->s, c->len);
	count_frames(c->s, c->len);
	return chosen;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[] = {1, 7, 64, 100, 1500, 20000};
	uint32_t hash = 2166136261u;
	size_t chunk = 0, split = size, nseg;
	unsigned sel;

	if (!A.ep)
		setup();
	n_inputs++;
	check_parsers(data, size);

	/* A second peer's bytes follow a split marker, if any. */
	for (size_t i = 0; i + 8 <= size; i++)
		if (ld64(data + i) >> 32 == TW_MARK_SPLIT) {
			split = i;
			break;
		}
	sel = hc_build(&hc[0], data, split, split && (data[0] & 1), -1);
	if (split < size)
		hc_build(&hc[1], data + split + 8, size - split - 8, true,
		         (int)(sel + 1) % 3);
	else
		hc[1] = (struct hconn){.fd = -1};

	/* Half the inputs in pieces, their size chosen by the input. */
	for (size_t i = 0; i < size; i++)
		hash = (hash ^ data[i]) * 16777619u;
	if (hash & 1) {
		chunk = chunks[(hash >> 1) % (sizeof(chunks) / sizeof(chunks[0]))];
		if (chunk < size / 256) /* bounded rounds per input */
			chunk = size / 256;
	}

	/* Segments alternate between the peers; then EOF on each. */
	hc_open(&hc[0]);
	if (hc[1].s)
		hc_open(&hc[1]);
	nseg = hc[0].nseg > hc[1].nseg ? hc[0].nseg : hc[1].nseg;
	for (size_t k = 0; k < nseg; k++)
		for (int i = 0; i < 2; i++)
			if (hc[i].s && k < hc[i].nseg)
				hc_send(&hc[i], hc[i].seg_end[k], chunk);
	hc_finish(&hc[0], chunk);
	hc_finish(&hc[1], chunk);
	if (sel == 3)
		self_check(); /* at once, not at the next sanity() */

	progress_a();
	take_unexpected(size ? data[size - 1] : 0);
	progress_a();
	slots_repost();
	check_memory();
	if (n_inputs % SANITY_EVERY == 0)
		sanity();
	return 0;
}
