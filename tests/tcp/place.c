/* place.c - the tcp provider reads a large eager payload straight into the
 * receive it matched when the message's header came (msg.c eager_place,
 * link.c place_continue): a raw socket in this process plays the peer and
 * writes each message in pieces, and the receive buffers are looked at
 * between the pieces.
 *
 * Endpoint A (tcp, FI_EP_RDM) is opened through the public API; each case
 * opens a fresh raw connection to it that claims its own dead loopback
 * port (bound, never listening: A has no reason to connect there, and the
 * port is in A's AV so completions name it; the restart case comes back
 * on its port as another instance).  A is progressed by fi_cq_readfrom
 * between the writes.  Cases 10-13: rendezvous RTS packets that carry the
 * message's first piece (msg.c early_place); case 14: what A sends, a
 * reply eager up to a packet with credit riding in it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "check.h"
#include "tcp.h"

#define HELLO_LEN sizeof(struct tcp_hello)
#define FRAME_LEN sizeof(struct tcp_frame)
#define HDR_LEN   sizeof(struct lm_rdm_hdr)
#define HEAD_LEN  (FRAME_LEN + HDR_LEN)
#define PLACE_MIN (16 * 1024) /* link.c: smaller payloads are copied */
#define GUARD     64          /* checked bytes on each side of a buffer */
#define WAIT_MS   5000        /* bound on anything awaited */
#define SETTLE    50          /* progress calls after each write */
#define N_DEAD    16          /* claimed addresses: one per connection */
#define MAX_COMP  80
#define MSG_LEN   40000
#define FIRST     1000  /* payload bytes written with the header */
#define PIECE     13000 /* then pieces of this size */
#define TAG       0x5eed0000c0ffeeULL
#define SREQ      0x1234500000007ULL
#define CQ_DATA   0xfeedbeefULL

/* ---- helpers ------------------------------------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Position-dependent patterns, so a shifted or stray copy shows. */
static uint8_t pat(size_t i, unsigned salt)
{
	return (uint8_t)(i * 131 + (i >> 8) * 7 + salt * 29 + 0x5a);
}

static void pat_fill(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(i, salt);
}

/* Whether p[from, to) still holds pattern salt (indexed from p). */
static bool pat_ok(const uint8_t *p, size_t from, size_t to, unsigned salt)
{
	for (size_t i = from; i < to; i++)
		if (p[i] != pat(i, salt))
			return false;
	return true;
}

/* A receive buffer with guards: [GUARD][cap bytes of poison][GUARD]. */
struct gbuf {
	uint8_t *mem, *buf;
	size_t cap;
	unsigned salt;
};

static int gbuf_new(struct gbuf *g, size_t cap, unsigned salt)
{
	g->mem = malloc(cap + 2 * GUARD);
	if (!g->mem)
		return -1;
	g->buf = g->mem + GUARD;
	g->cap = cap;
	g->salt = salt;
	pat_fill(g->mem, GUARD, salt);
	pat_fill(g->buf, cap, salt + 1);
	pat_fill(g->buf + cap, GUARD, salt + 2);
	return 0;
}

static bool gbuf_guards_ok(const struct gbuf *g)
{
	return pat_ok(g->mem, 0, GUARD, g->salt) &&
	       pat_ok(g->buf + g->cap, 0, GUARD, g->salt + 2);
}

/* The buffer's bytes [from, to) were not written. */
static bool gbuf_untouched(const struct gbuf *g, size_t from, size_t to)
{
	return pat_ok(g->buf, from, to, g->salt + 1);
}

/* ---- endpoint A and its completions --------------------------------------- */

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct sockaddr_in a_addr;

static int dead_fd[N_DEAD];
static struct sockaddr_in dead_addr[N_DEAD];
static fi_addr_t dead_fa[N_DEAD];

struct comp {
	void *ctx;
	uint64_t flags;
	size_t len, olen;
	void *buf;
	uint64_t data, tag;
	fi_addr_t src;
	int err; /* 0: a success entry */
};

static struct comp comps[MAX_COMP];
static int ncomp;

static void comp_add(const struct comp *c)
{
	if (ncomp < MAX_COMP)
		comps[ncomp++] = *c;
	else
		CHECK(!"more completions than expected");
}

/* One progress call: A's CQ read dry. */
static void poll_a(void)
{
	struct fi_cq_tagged_entry e[8];
	fi_addr_t src[8];

	for (;;) {
		ssize_t n = fi_cq_readfrom(cq, e, 8, src);

		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				comp_add(&(struct comp){.ctx = e[i].op_context,
				                        .flags = e[i].flags,
				                        .len = e[i].len,
				                        .buf = e[i].buf,
				                        .data = e[i].data,
				                        .tag = e[i].tag,
				                        .src = src[i]});
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			CHECK_INT(fi_cq_readerr(cq, &ee, 0), 1);
			comp_add(&(struct comp){.ctx = ee.op_context,
			                        .flags = ee.flags,
			                        .len = ee.len,
			                        .olen = ee.olen,
			                        .buf = ee.buf,
			                        .data = ee.data,
			                        .tag = ee.tag,
			                        .src = FI_ADDR_NOTAVAIL,
			                        .err = ee.err ? ee.err : -1});
			continue;
		}
		if (n != -FI_EAGAIN)
			CHECK_INT(n, -FI_EAGAIN);
		return;
	}
}

static void settle(void)
{
	for (int i = 0; i < SETTLE; i++)
		poll_a();
}

/* The end of a case: its receive completed and is no longer posted (else
 * it is cancelled, so its buffer can go). */
static void retire(void *ctx)
{
	int ret = fi_cancel(&ep->fid, ctx);

	CHECK_INT(ret, -FI_ENOENT);
	if (!ret)
		settle();
}

/* Progress until n entries arrived; whether they did within WAIT_MS. */
static bool wait_comps(int n)
{
	uint64_t deadline = now_ms() + WAIT_MS;

	while (ncomp < n && now_ms() < deadline)
		poll_a();
	return ncomp >= n;
}

/* Progress until buf[0, n) equals want (A placed that much); whether it
 * did within WAIT_MS. */
static bool wait_placed(const uint8_t *buf, const uint8_t *want, size_t n)
{
	uint64_t deadline = now_ms() + WAIT_MS;

	while (memcmp(buf, want, n)) {
		if (now_ms() >= deadline)
			return false;
		poll_a();
	}
	return true;
}

static int setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
	size_t len = sizeof(a_addr), min_multi = PLACE_MIN;
	int ret;

	if (!hints)
		return -1;
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV | FI_SOURCE;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	CHECK_INT(ret, 0);
	if (ret)
		return -1;
	CHECK_STR(info->fabric_attr->prov_name, "tcp");
	CHECK_INT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_INT(fi_domain(fabric, info, &domain, NULL), 0);
	CHECK_INT(fi_av_open(domain, &ava, &av, NULL), 0);
	CHECK_INT(fi_endpoint(domain, info, &ep, NULL), 0);
	CHECK_INT(fi_cq_open(domain, &cqa, &cq, NULL), 0);
	if (!ep || !cq || !av)
		return -1;
	CHECK_INT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_INT(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_INT(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_multi,
	                    sizeof(min_multi)),
	          0);
	CHECK_INT(fi_enable(ep), 0);
	CHECK_INT(fi_getname(&ep->fid, &a_addr, &len), 0);
	CHECK_INT(len, sizeof(a_addr));
	CHECK_INT(a_addr.sin_family, AF_INET);
	CHECK_HEX(a_addr.sin_addr.s_addr, htonl(INADDR_LOOPBACK));

	for (int i = 0; i < N_DEAD; i++) {
		socklen_t alen = sizeof(dead_addr[i]);

		dead_fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		dead_addr[i] = (struct sockaddr_in){
		    .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (dead_fd[i] < 0 ||
		    bind(dead_fd[i], (struct sockaddr *)&dead_addr[i],
		         sizeof(dead_addr[i])) ||
		    getsockname(dead_fd[i], (struct sockaddr *)&dead_addr[i], &alen)) {
			perror("binding a loopback port");
			return -1;
		}
		CHECK_INT(fi_av_insert(av, &dead_addr[i], 1, &dead_fa[i], 0, NULL), 1);
	}
	return check_failures ? -1 : 0;
}

/* ---- the raw peer --------------------------------------------------------- */

struct raw {
	int fd;
	fi_addr_t fa; /* what A's completions name as its source */
};

/* All of p, A progressed whenever the socket is full. */
static bool raw_write(struct raw *r, const void *p, size_t n)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(r->fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k > 0) {
			b += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			perror("send to A");
			return false;
		}
		if (now_ms() >= deadline)
			return false;
		poll_a();
	}
	return true;
}

/* Exactly n bytes from A, progressing it meanwhile; whether they came
 * within WAIT_MS. */
static bool raw_read(struct raw *r, void *p, size_t n)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	uint8_t *b = p;

	while (n) {
		ssize_t k = recv(r->fd, b, n, MSG_DONTWAIT);

		if (k > 0) {
			b += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return false;
		if (now_ms() >= deadline)
			return false;
		poll_a();
	}
	return true;
}

/* The next packet's frame and engine header from A (HEAD_LEN bytes),
 * past the link's own frames that carry no packet: RCVD (A telling how
 * much of ours it read) and ACK_NOW. */
static bool raw_head(struct raw *r, uint8_t *b)
{
	for (;;) {
		struct tcp_frame f;
		uint64_t told;

		if (!raw_read(r, b, FRAME_LEN))
			return false;
		memcpy(&f, b, FRAME_LEN);
		if (f.flags == TCP_FRAME_RCVD) {
			if (!raw_read(r, &told, sizeof(told)))
				return false;
			continue;
		}
		if (f.flags != TCP_FRAME_ACK_NOW)
			return raw_read(r, b + FRAME_LEN, HEAD_LEN - FRAME_LEN);
	}
}

/* Whether A has sent nothing on r (that has arrived). */
static bool raw_quiet(struct raw *r)
{
	uint8_t b;
	ssize_t k = recv(r->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);

	return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Connect to A and do the handshake as the endpoint instance at dead
 * port i. */
static bool raw_open_as(struct raw *r, int i, uint64_t instance)
{
	struct tcp_hello h = {.magic = TCP_MAGIC,
	                      .version = TCP_PROTO_VERSION,
	                      .kind = TCP_HELLO_RDM,
	                      .instance = instance,
	                      .addrlen = sizeof(struct sockaddr_in)};
	struct tcp_hello ack;

	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r->fa = dead_fa[i];
	if (r->fd < 0 || connect(r->fd, (struct sockaddr *)&a_addr, sizeof(a_addr))) {
		perror("connect to A");
		return false;
	}
	memcpy(h.addr, &dead_addr[i], sizeof(dead_addr[i]));
	if (!raw_write(r, &h, sizeof(h)) || !raw_read(r, &ack, sizeof(ack))) {
		fprintf(stderr, "place: no handshake answer from A\n");
		return false;
	}
	CHECK_INT(tcp_hello_check(&ack, TCP_HELLO_ACK), 0);
	CHECK(!memcmp(ack.addr, &a_addr, sizeof(a_addr)));
	return ack.kind == TCP_HELLO_ACK;
}

static bool raw_open(struct raw *r, int i)
{
	return raw_open_as(r, i, 0x7100u + (unsigned)i);
}

static void raw_close(struct raw *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

/* An EAGER frame of payload (len bytes) into out; returns its length. */
static size_t eager_frame(uint8_t *out, uint16_t hflags, uint64_t tag, uint64_t data,
                          uint64_t sreq, const uint8_t *payload, size_t len)
{
	struct tcp_frame f = {.len = (uint32_t)len, .hdr_len = (uint16_t)HDR_LEN};
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_EAGER,
	                       .flags = hflags,
	                       .len = (uint32_t)len,
	                       .size = len,
	                       .tag = tag,
	                       .data = data,
	                       .sreq = sreq};

	memcpy(out, &f, FRAME_LEN);
	memcpy(out + FRAME_LEN, &h, HDR_LEN);
	memcpy(out + HEAD_LEN, payload, len);
	return HEAD_LEN + len;
}

/* A message in the making: its bytes, how many went out. */
struct stream {
	struct raw *r;
	uint8_t *bytes;
	size_t len, off;
};

/* The next n bytes of s to A, then A progressed. */
static bool stream_send(struct stream *s, size_t n)
{
	bool ok;

	if (n > s->len - s->off)
		n = s->len - s->off;
	ok = raw_write(s->r, s->bytes + s->off, n);
	s->off += n;
	settle();
	return ok;
}

/* The usual cutting of one message: header and FIRST payload bytes,
 * then two PIECEs; the rest is left for the caller to send. */
static bool stream_head(struct stream *s)
{
	return stream_send(s, HEAD_LEN + FIRST) && stream_send(s, PIECE) &&
	       stream_send(s, PIECE);
}

/* An RTS frame for a message of size bytes carrying its first early
 * bytes (LM_HF_EARLY) into out; returns its length. */
static size_t rts_frame(uint8_t *out, uint64_t size, uint64_t sreq, const uint8_t *early,
                        size_t early_len)
{
	/* The iov list: one piece, which only bulk copies would look at. */
	const uint64_t list[3] = {1, 0x7f0000001000ULL, size};
	struct tcp_frame f = {.len = (uint32_t)(sizeof(list) + early_len),
	                      .hdr_len = (uint16_t)HDR_LEN};
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_RTS,
	                       .flags = LM_HF_EARLY,
	                       .len = f.len,
	                       .size = size,
	                       .sreq = sreq,
	                       .addr = sizeof(list)};

	memcpy(out, &f, FRAME_LEN);
	memcpy(out + FRAME_LEN, &h, HDR_LEN);
	memcpy(out + HEAD_LEN, list, sizeof(list));
	memcpy(out + HEAD_LEN + sizeof(list), early, early_len);
	return HEAD_LEN + sizeof(list) + early_len;
}

/* A DATA frame of payload[off, off + len) for the rendezvous rreq. */
static size_t data_frame(uint8_t *out, uint64_t sreq, uint64_t rreq, const uint8_t *payload,
                         uint64_t size, size_t off, size_t len)
{
	struct tcp_frame f = {.len = (uint32_t)len, .hdr_len = (uint16_t)HDR_LEN};
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_DATA,
	                       .len = (uint32_t)len,
	                       .size = size,
	                       .sreq = sreq,
	                       .rreq = rreq,
	                       .addr = off};

	memcpy(out, &f, FRAME_LEN);
	memcpy(out + FRAME_LEN, &h, HDR_LEN);
	memcpy(out + HEAD_LEN, payload + off, len);
	return HEAD_LEN + len;
}

/* The next packet A sends on r, a control packet without payload: its
 * engine header (op 0 when none came within WAIT_MS). */
static struct lm_rdm_hdr raw_answer(struct raw *r)
{
	uint8_t b[HEAD_LEN];
	struct tcp_frame f;
	struct lm_rdm_hdr h = {0};

	if (!raw_head(r, b))
		return h;
	memcpy(&f, b, FRAME_LEN);
	CHECK_INT(f.len, 0);
	CHECK_INT(f.hdr_len, HDR_LEN);
	memcpy(&h, b + FRAME_LEN, HDR_LEN);
	return h;
}

/* RTS cases: a message of RNDV_LEN bytes whose RTS carries its first
 * EARLY_LEN bytes (LM_HF_EARLY, wire version 5). */
#define RNDV_LEN  100000
#define EARLY_LEN 40000
#define RNDV_SREQ 0x77700000009ULL

/* The DATA the CTS a asked for: payload[from, RNDV_LEN) in one frame,
 * through s (its buffer reused). */
static bool send_rest(struct stream *s, const struct lm_rdm_hdr *a, const uint8_t *payload,
                      size_t from)
{
	s->off = 0;
	s->len = data_frame(s->bytes, a->sreq, a->rreq, payload, RNDV_LEN, from,
	                    RNDV_LEN - from);
	return stream_send(s, s->len);
}

/* A control packet without payload from r to A. */
static bool raw_control(struct raw *r, uint8_t op, uint64_t sreq, uint64_t rreq,
                        uint64_t addr)
{
	uint8_t b[HEAD_LEN];
	struct tcp_frame f = {.len = 0, .hdr_len = (uint16_t)HDR_LEN};
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = op,
	                       .sreq = sreq,
	                       .rreq = rreq,
	                       .addr = addr};

	memcpy(b, &f, FRAME_LEN);
	memcpy(b + FRAME_LEN, &h, HDR_LEN);
	return raw_write(r, b, sizeof(b));
}

/* ---- the cases -------------------------------------------------------------- */

/* A case's start: its name, no completions yet, a receive buffer of cap
 * bytes (filled with salt) and a raw connection claiming dead address
 * conn.  False (a failed check) when either cannot be had. */
static bool case_start(const char *what, struct gbuf *g, size_t cap, unsigned salt,
                       struct raw *r, int conn)
{
	bool ok = !gbuf_new(g, cap, salt);

	fprintf(stderr, "%s\n", what);
	ncomp = 0;
	if (ok && !raw_open(r, conn)) {
		free(g->mem);
		ok = false;
	}
	CHECK(ok);
	return ok;
}

/* A case's end: its connection closed (r NULL: already), its receive
 * no longer posted, its buffer freed. */
static void case_end(struct raw *r, void *ctx, struct gbuf *g)
{
	if (r)
		raw_close(r);
	retire(ctx);
	free(g->mem);
}

/* Exactly one completion came: for ctx, with this error, length and
 * flags. */
static void check_one(void *ctx, int err, size_t len, uint64_t flags)
{
	CHECK_INT(ncomp, 1);
	if (ncomp < 1)
		return;
	CHECK_INT(comps[0].err, err);
	CHECK(comps[0].ctx == ctx);
	CHECK_INT(comps[0].len, len);
	CHECK_HEX(comps[0].flags, flags);
}

/* The buffer holds the len bytes of payload and nothing past them, its
 * guards intact. */
static void check_landed(const struct gbuf *g, const uint8_t *payload, size_t len)
{
	CHECK(!memcmp(g->buf, payload, len));
	CHECK(gbuf_untouched(g, len, g->cap));
	CHECK(gbuf_guards_ok(g));
}

/* 1: a posted 64 KiB receive holds the first bytes of a 40,000-byte
 * message before the rest is written: the payload is placed, not copied
 * out of the link's buffer once whole. */
static void case_placed(void)
{
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	int ctx;

	if (!case_start("case 1: placed into a posted receive", &g, 65536, 10, &r, 0))
		return;
	pat_fill(payload, MSG_LEN, 1);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);

	CHECK(stream_send(&s, HEAD_LEN + FIRST));
	/* Matched at the header: the first bytes are in the buffer already. */
	CHECK(wait_placed(g.buf, payload, FIRST));
	CHECK(stream_send(&s, PIECE));
	CHECK(stream_send(&s, PIECE));
	CHECK(wait_placed(g.buf, payload, FIRST + 2 * PIECE));
	CHECK(gbuf_untouched(&g, FIRST + 2 * PIECE, g.cap));
	CHECK_INT(ncomp, 0);

	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, MSG_LEN, FI_RECV | FI_MSG);
	CHECK(!comps[0].buf || comps[0].buf == g.buf);
	CHECK_INT(comps[0].src, r.fa);
	check_landed(&g, payload, MSG_LEN);
	CHECK(raw_quiet(&r)); /* no ACK asked, none sent */
	case_end(&r, &ctx, &g);
}

/* 2: a 40,000-byte message into a 20,000-byte receive: FI_ETRUNC with
 * what fits delivered and nothing written past it. */
static void case_truncated(void)
{
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	int ctx;

	if (!case_start("case 2: truncated", &g, 20000, 20, &r, 1))
		return;
	pat_fill(payload, MSG_LEN, 2);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_head(&s));
	CHECK_INT(ncomp, 0);
	CHECK(gbuf_guards_ok(&g));

	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));
	settle();
	/* man fi_cq: len what was placed, olen what did not fit. */
	check_one(&ctx, FI_ETRUNC, 20000, FI_RECV | FI_MSG);
	CHECK_INT(comps[0].olen, MSG_LEN - 20000);
	CHECK(!memcmp(g.buf, payload, 20000));
	CHECK(gbuf_guards_ok(&g));
	case_end(&r, &ctx, &g);
}

/* 3: a tagged message with remote CQ data asking for delivery complete:
 * placed, completed with its tag and data, and ACKed to its sender's
 * request only once it is all in. */
static void case_tagged_ack(void)
{
	enum { LEN = 30000 };
	static uint8_t payload[LEN], bytes[HEAD_LEN + LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	struct tcp_frame f;
	struct lm_rdm_hdr h;
	uint8_t ans[HEAD_LEN];
	int ctx;

	if (!case_start("case 3: tagged, delivery complete", &g, 32768, 30, &r, 2))
		return;
	pat_fill(payload, LEN, 3);
	s.len = eager_frame(bytes, LM_HF_TAGGED | LM_HF_ACK | LM_HF_CQ_DATA, TAG, CQ_DATA,
	                    SREQ, payload, LEN);
	CHECK_INT(fi_trecv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, TAG, 0, &ctx), 0);
	CHECK(stream_head(&s));
	CHECK(wait_placed(g.buf, payload, FIRST + 2 * PIECE));
	CHECK_INT(ncomp, 0);
	CHECK(raw_quiet(&r)); /* not delivered yet: no ACK */

	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));
	check_one(&ctx, 0, LEN, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
	CHECK_HEX(comps[0].tag, TAG);
	CHECK_HEX(comps[0].data, CQ_DATA);
	CHECK_INT(comps[0].src, r.fa);
	check_landed(&g, payload, LEN);

	CHECK(raw_head(&r, ans));
	memcpy(&f, ans, FRAME_LEN);
	memcpy(&h, ans + FRAME_LEN, HDR_LEN);
	CHECK_INT(tcp_frame_check(&f, HDR_LEN, 65536), 0);
	CHECK_INT(f.len, 0);
	CHECK_INT(h.version, LM_RDM_WIRE_VERSION);
	CHECK_INT(h.op, LM_OP_ACK);
	CHECK_INT(h.len, 0);
	CHECK_HEX(h.sreq, SREQ);
	CHECK_HEX(h.rreq, 0); /* the status: success */
	settle();
	CHECK(raw_quiet(&r)); /* one answer only */
	case_end(&r, &ctx, &g);
}

/* 4: one multi-receive buffer of 100,000 bytes (at most 16 KiB left
 * unused): 40,000 + 40,000 + 20,000 bytes placed one after the other, the
 * last two written back to back so the third's header arrives behind the
 * second's payload; the third uses the buffer up and says so. */
static void case_multi(void)
{
	enum { CAP = 100000, LAST = 20000 };
	static uint8_t payload[3][MSG_LEN], bytes[2 * HEAD_LEN + MSG_LEN + LAST];
	static uint8_t one[HEAD_LEN + MSG_LEN];
	static const size_t lens[3] = {MSG_LEN, MSG_LEN, LAST};
	struct raw r;
	struct stream s = {&r, one, 0, 0};
	struct gbuf g;
	struct iovec iov;
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC};
	size_t n2, n3, rest2;
	int ctx;

	if (!case_start("case 4: multi-receive", &g, CAP, 40, &r, 3))
		return;
	for (int i = 0; i < 3; i++)
		pat_fill(payload[i], lens[i], 40u + (unsigned)i);
	iov = (struct iovec){g.buf, g.cap};
	m.context = &ctx;
	CHECK_INT(fi_recvmsg(ep, &m, FI_MULTI_RECV), 0);

	/* First message, alone. */
	s.len = eager_frame(one, 0, 0, 0, SREQ, payload[0], MSG_LEN);
	CHECK(stream_head(&s));
	CHECK(wait_placed(g.buf, payload[0], FIRST + 2 * PIECE));
	CHECK(gbuf_untouched(&g, FIRST + 2 * PIECE, g.cap));
	CHECK_INT(ncomp, 0);
	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));

	/* Second and third as one stream, cut across their boundary. */
	n2 = eager_frame(bytes, 0, 0, 0, SREQ + 1, payload[1], MSG_LEN);
	n3 = eager_frame(bytes + n2, 0, 0, 0, SREQ + 2, payload[2], LAST);
	s = (struct stream){&r, bytes, n2 + n3, 0};
	CHECK(stream_head(&s));
	CHECK(wait_placed(g.buf + MSG_LEN, payload[1], FIRST + 2 * PIECE));
	CHECK_INT(ncomp, 1);
	rest2 = n2 - s.off;
	CHECK(stream_send(&s, rest2 + HEAD_LEN + FIRST));
	CHECK(wait_comps(2));
	CHECK(wait_placed(g.buf + 2 * MSG_LEN, payload[2], FIRST));
	CHECK(stream_send(&s, PIECE));
	CHECK(wait_placed(g.buf + 2 * MSG_LEN, payload[2], FIRST + PIECE));
	CHECK_INT(ncomp, 2);
	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(3));
	settle();

	CHECK_INT(ncomp, 3);
	for (int i = 0; i < 3 && i < ncomp; i++) {
		CHECK_INT(comps[i].err, 0);
		CHECK(comps[i].ctx == &ctx);
		CHECK_INT(comps[i].len, lens[i]);
		CHECK(comps[i].buf == g.buf + (size_t)i * MSG_LEN);
		CHECK_INT(comps[i].src, r.fa);
		/* man fi_msg: the entry that releases the buffer carries
		 * FI_MULTI_RECV; 20,000 then 0 bytes left, so only the last. */
		CHECK_HEX(comps[i].flags,
		          FI_RECV | FI_MSG | (i == 2 ? FI_MULTI_RECV : 0));
		CHECK(!memcmp(g.buf + (size_t)i * MSG_LEN, payload[i], lens[i]));
	}
	CHECK(gbuf_guards_ok(&g));
	case_end(&r, &ctx, &g);
}

/* 5: the peer goes away with 10,000 of 40,000 bytes placed: the receive
 * ends in an error entry (not a success, not silence), and the buffer is
 * not written after that. */
static void case_peer_dies(void)
{
	enum { SENT = 10000 };
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	int ctx;

	if (!case_start("case 5: the peer dies mid-payload", &g, 65536, 50, &r, 4))
		return;
	pat_fill(payload, MSG_LEN, 5);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_send(&s, HEAD_LEN + SENT));
	CHECK(wait_placed(g.buf, payload, SENT));
	CHECK_INT(ncomp, 0);

	raw_close(&r);
	CHECK(wait_comps(1));
	settle();
	CHECK_INT(ncomp, 1);
	if (ncomp >= 1) {
		/* The engine's code for a lost peer (progress.c check_peers). */
		CHECK_INT(comps[0].err, FI_EIO);
		CHECK(comps[0].ctx == &ctx);
		CHECK(comps[0].flags & FI_RECV);
		CHECK(comps[0].flags & FI_MSG);
	}
	CHECK(gbuf_untouched(&g, SENT, g.cap));
	CHECK(gbuf_guards_ok(&g));
	case_end(NULL, &ctx, &g);
}

/* 6: no receive posted while the message arrives: it is kept (copied)
 * and the receive posted afterwards gets it whole. */
static void case_unexpected(void)
{
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	int ctx;

	if (!case_start("case 6: unexpected", &g, 65536, 60, &r, 5))
		return;
	pat_fill(payload, MSG_LEN, 6);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK(stream_head(&s));
	CHECK(stream_send(&s, s.len));
	settle();
	CHECK_INT(ncomp, 0);
	CHECK(gbuf_untouched(&g, 0, g.cap));

	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, MSG_LEN, FI_RECV | FI_MSG);
	CHECK_INT(comps[0].src, r.fa);
	check_landed(&g, payload, MSG_LEN);
	case_end(&r, &ctx, &g);
}

/* 7: the receive is posted while the payload is half in the link's
 * buffer: the message still arrives whole and exact, once. */
static void case_posted_midway(void)
{
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g;
	int ctx;

	if (!case_start("case 7: receive posted mid-payload", &g, 65536, 70, &r, 6))
		return;
	pat_fill(payload, MSG_LEN, 7);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK(stream_send(&s, HEAD_LEN + FIRST));
	CHECK(stream_send(&s, PIECE));
	CHECK_INT(ncomp, 0);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	settle();
	CHECK_INT(ncomp, 0);
	CHECK(stream_send(&s, PIECE));
	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, MSG_LEN, FI_RECV | FI_MSG);
	check_landed(&g, payload, MSG_LEN);
	case_end(&r, &ctx, &g);
}

/* 8: the peer restarts (a new connection from its address with another
 * instance) with 10,000 of 40,000 bytes placed, and sends a new message:
 * the interrupted receive ends in an error entry, and the new message goes
 * to the next receive, whole and with its own length, not into the
 * interrupted one. */
static void case_peer_restarts(void)
{
	enum { SENT = 10000, LEN2 = 100 };
	static uint8_t payload[MSG_LEN], bytes[HEAD_LEN + MSG_LEN];
	uint8_t payload2[LEN2], bytes2[HEAD_LEN + LEN2];
	struct raw r, r2;
	struct stream s = {&r, bytes, 0, 0};
	struct gbuf g, g2;
	int ctx, ctx2;

	fprintf(stderr, "case 8: the peer restarts mid-payload\n");
	ncomp = 0;
	if (gbuf_new(&g, 65536, 80) || gbuf_new(&g2, 65536, 90) || !raw_open(&r, 8)) {
		CHECK(!"case 8 setup");
		return;
	}
	pat_fill(payload, MSG_LEN, 9);
	pat_fill(payload2, LEN2, 10);
	s.len = eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_send(&s, HEAD_LEN + SENT));
	CHECK(wait_placed(g.buf, payload, SENT));
	CHECK_INT(ncomp, 0);

	CHECK_INT(fi_recv(ep, g2.buf, g2.cap, NULL, FI_ADDR_UNSPEC, &ctx2), 0);
	if (!raw_open_as(&r2, 8, 0x7200u)) {
		CHECK(!"case 8 reconnect");
		raw_close(&r);
		retire(&ctx);
		retire(&ctx2);
		free(g.mem);
		free(g2.mem);
		return;
	}
	CHECK(raw_write(&r2, bytes2,
	                eager_frame(bytes2, 0, 0, 0, SREQ + 1, payload2, LEN2)));
	CHECK(wait_comps(2));
	settle();
	CHECK_INT(ncomp, 2);
	for (int i = 0; i < ncomp; i++) {
		if (comps[i].ctx != &ctx ? comps[i].err || comps[i].len != LEN2
		                         : comps[i].err != FI_EIO)
			fprintf(stderr, "case 8: the %s receive: err %d len %zu\n",
			        comps[i].ctx == &ctx ? "interrupted" : "next",
			        comps[i].err, comps[i].len);
		if (comps[i].ctx == &ctx) {
			CHECK_INT(comps[i].err, FI_EIO);
			CHECK(comps[i].flags & FI_RECV);
		} else {
			CHECK(comps[i].ctx == &ctx2);
			CHECK_INT(comps[i].err, 0);
			CHECK_INT(comps[i].len, LEN2);
			CHECK_HEX(comps[i].flags, FI_RECV | FI_MSG);
		}
	}
	CHECK(gbuf_untouched(&g, SENT, g.cap));
	CHECK(!memcmp(g2.buf, payload2, LEN2));
	CHECK(gbuf_untouched(&g2, LEN2, g2.cap));
	CHECK(gbuf_guards_ok(&g));
	CHECK(gbuf_guards_ok(&g2));
	raw_close(&r);
	raw_close(&r2);
	retire(&ctx);
	retire(&ctx2);
	free(g.mem);
	free(g2.mem);
}

/* 9: a placed payload completes as A's poll reaches its budget (64
 * packets), and the read that finished it also took the next frame, the
 * peer's last: that frame must still be delivered though nothing more
 * arrives.  63 unexpected 1,100-byte messages, then a placed one that
 * ends past what the link's first read takes (256 KiB), then an empty
 * one, in one write.  (Before the fix, the empty one waited for more
 * bytes from the peer.) */
static void case_budget(void)
{
	enum { SMALL = 63, SLEN = 1100, BIG = 196000 };
	static uint8_t small[SLEN], big[BIG],
	    bytes[SMALL * (HEAD_LEN + SLEN) + 2 * HEAD_LEN + BIG];
	static uint8_t sink[SLEN];
	const uint64_t t_small = TAG + 1, t_big = TAG + 2, t_last = TAG + 3;
	struct raw r;
	struct gbuf g;
	size_t n = 0;
	int ctx_big, ctx_last, ctx_small;
	uint8_t last;

	if (!case_start("case 9: a placement ends the poll's budget", &g, BIG, 95, &r, 9))
		return;
	pat_fill(small, SLEN, 9);
	pat_fill(big, BIG, 10);
	for (int i = 0; i < SMALL; i++)
		n += eager_frame(bytes + n, LM_HF_TAGGED, t_small, 0, SREQ, small, SLEN);
	n += eager_frame(bytes + n, LM_HF_TAGGED, t_big, 0, SREQ, big, BIG);
	n += eager_frame(bytes + n, LM_HF_TAGGED, t_last, 0, SREQ, small, 0);
	CHECK_INT(fi_trecv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, t_big, 0, &ctx_big),
	          0);
	CHECK_INT(fi_trecv(ep, &last, 1, NULL, FI_ADDR_UNSPEC, t_last, 0, &ctx_last), 0);
	CHECK(raw_write(&r, bytes, n));
	CHECK(wait_comps(2));
	settle();
	CHECK_INT(ncomp, 2);
	for (int i = 0; i < ncomp && i < 2; i++) {
		CHECK_INT(comps[i].err, 0);
		if (comps[i].ctx == &ctx_big)
			CHECK_INT(comps[i].len, BIG);
		else
			CHECK(comps[i].ctx == &ctx_last && comps[i].len == 0);
	}
	check_landed(&g, big, BIG);
	/* The small ones wait unexpected: take them, in order. */
	ncomp = 0;
	for (int i = 0; i < SMALL; i++)
		CHECK_INT(fi_trecv(ep, sink, SLEN, NULL, FI_ADDR_UNSPEC, t_small, 0,
		                   &ctx_small),
		          0);
	CHECK(wait_comps(SMALL));
	CHECK_INT(ncomp, SMALL);
	CHECK(!memcmp(sink, small, SLEN));
	raw_close(&r);
	free(g.mem);
}



/* 10: a posted receive matches the RTS when its header comes: CTS from
 * EARLY_LEN goes back before the first piece is in (the handshake
 * overlaps the piece), the piece is placed as it comes, DATA brings the
 * rest, and FIN ends it. */
static void case_rts_early(void)
{
	static uint8_t payload[RNDV_LEN], bytes[HEAD_LEN + 24 + RNDV_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct lm_rdm_hdr a;
	struct gbuf g;
	int ctx;

	if (!case_start("case 10: RTS with its first piece", &g, 131072, 110, &r, 10))
		return;
	pat_fill(payload, RNDV_LEN, 11);
	s.len = rts_frame(bytes, RNDV_LEN, RNDV_SREQ, payload, EARLY_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_send(&s, HEAD_LEN + 24 + FIRST));
	a = raw_answer(&r);
	CHECK_INT(a.op, LM_OP_CTS);
	CHECK_HEX(a.sreq, RNDV_SREQ);
	CHECK_INT(a.addr, EARLY_LEN);
	CHECK(wait_placed(g.buf, payload, FIRST));
	CHECK(stream_send(&s, s.len));
	CHECK(wait_placed(g.buf, payload, EARLY_LEN));
	CHECK(gbuf_untouched(&g, EARLY_LEN, g.cap));
	CHECK_INT(ncomp, 0);
	CHECK(raw_quiet(&r));

	CHECK(send_rest(&s, &a, payload, EARLY_LEN));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, RNDV_LEN, FI_RECV | FI_MSG);
	CHECK_INT(comps[0].src, r.fa);
	check_landed(&g, payload, RNDV_LEN);
	a = raw_answer(&r);
	CHECK_INT(a.op, LM_OP_FIN);
	CHECK_HEX(a.sreq, RNDV_SREQ);
	CHECK_INT(a.rreq, 0);
	case_end(&r, &ctx, &g);
}

/* 11: an RTS that carries its whole message: no CTS, FIN once it is in. */
static void case_rts_whole(void)
{
	static uint8_t payload[EARLY_LEN], bytes[HEAD_LEN + 24 + EARLY_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct lm_rdm_hdr a;
	struct gbuf g;
	int ctx;

	if (!case_start("case 11: RTS with the whole message", &g, 65536, 120, &r, 11))
		return;
	pat_fill(payload, EARLY_LEN, 12);
	s.len = rts_frame(bytes, EARLY_LEN, RNDV_SREQ, payload, EARLY_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_send(&s, HEAD_LEN + 24 + FIRST));
	CHECK(wait_placed(g.buf, payload, FIRST));
	CHECK(raw_quiet(&r));
	CHECK(stream_send(&s, s.len));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, EARLY_LEN, FI_RECV | FI_MSG);
	check_landed(&g, payload, EARLY_LEN);
	a = raw_answer(&r);
	CHECK_INT(a.op, LM_OP_FIN);
	CHECK_HEX(a.sreq, RNDV_SREQ);
	case_end(&r, &ctx, &g);
}

/* 12: the RTS comes before any receive: its piece is dropped (nothing is
 * held for it) and the receive posted later asks for everything, CTS
 * from 0. */
static void case_rts_unexpected(void)
{
	static uint8_t payload[RNDV_LEN], bytes[HEAD_LEN + 24 + RNDV_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct lm_rdm_hdr a;
	struct gbuf g;
	int ctx;

	if (!case_start("case 12: RTS with its first piece, unexpected", &g, 131072, 130,
	                &r, 12))
		return;
	pat_fill(payload, RNDV_LEN, 13);
	s.len = rts_frame(bytes, RNDV_LEN, RNDV_SREQ, payload, EARLY_LEN);
	CHECK(stream_send(&s, s.len));
	settle();
	CHECK(raw_quiet(&r));
	CHECK_INT(ncomp, 0);

	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	a = raw_answer(&r);
	CHECK_INT(a.op, LM_OP_CTS);
	CHECK_INT(a.addr, 0);
	CHECK(gbuf_untouched(&g, 0, g.cap));
	CHECK(send_rest(&s, &a, payload, 0));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, 0, RNDV_LEN, FI_RECV | FI_MSG);
	check_landed(&g, payload, RNDV_LEN);
	CHECK_INT(raw_answer(&r).op, LM_OP_FIN);
	case_end(&r, &ctx, &g);
}

/* 13: a receive smaller than the first piece: CTS at once all the same,
 * what fits is delivered (FI_ETRUNC) and nothing is written past it. */
static void case_rts_truncated(void)
{
	static uint8_t payload[RNDV_LEN], bytes[HEAD_LEN + 24 + RNDV_LEN];
	struct raw r;
	struct stream s = {&r, bytes, 0, 0};
	struct lm_rdm_hdr a;
	struct gbuf g;
	int ctx;

	if (!case_start("case 13: RTS with its first piece, truncated", &g, 20000, 140,
	                &r, 13))
		return;
	pat_fill(payload, RNDV_LEN, 14);
	s.len = rts_frame(bytes, RNDV_LEN, RNDV_SREQ, payload, EARLY_LEN);
	CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(stream_send(&s, HEAD_LEN + 24 + FIRST));
	a = raw_answer(&r);
	CHECK_INT(a.op, LM_OP_CTS);
	CHECK_INT(a.addr, EARLY_LEN);
	CHECK(stream_send(&s, s.len));
	CHECK(gbuf_guards_ok(&g));
	CHECK(send_rest(&s, &a, payload, EARLY_LEN));
	CHECK(wait_comps(1));
	settle();
	check_one(&ctx, FI_ETRUNC, 20000, FI_RECV | FI_MSG);
	CHECK_INT(comps[0].olen, RNDV_LEN - 20000);
	CHECK(!memcmp(g.buf, payload, 20000));
	CHECK(gbuf_guards_ok(&g));
	CHECK_INT(raw_answer(&r).op, LM_OP_FIN);
	case_end(&r, &ctx, &g);
}


/* A's next packet on r, whole: its engine header, the payload into
 * payload (at most cap bytes kept).  op 0 when none came. */
static struct lm_rdm_hdr raw_packet(struct raw *r, uint8_t *payload, size_t cap,
                                    size_t *plen)
{
	uint8_t b[HEAD_LEN];
	struct tcp_frame f;
	struct lm_rdm_hdr h = {0};

	*plen = 0;
	if (!raw_head(r, b))
		return h;
	memcpy(&f, b, FRAME_LEN);
	CHECK_INT(f.hdr_len, HDR_LEN);
	CHECK(f.len <= cap);
	if (f.len > cap || !raw_read(r, payload, f.len))
		return h;
	memcpy(&h, b + FRAME_LEN, HDR_LEN);
	*plen = f.len;
	return h;
}

/* 14: A sending 150,000 bytes: to a peer that sent it nothing yet, by
 * rendezvous (its RTS carrying the first piece, the peer being quiet);
 * once the peer's messages came (A replies), eager in one packet, which
 * also gives back the credit those messages took (rreq); after that,
 * by rendezvous again. */
#define REPLY_LEN 150000
static void case_reply_eager(void)
{
	static uint8_t out[REPLY_LEN], in[REPLY_LEN + 64], payload[MSG_LEN],
	    bytes[HEAD_LEN + MSG_LEN];
	struct raw r;
	struct lm_rdm_hdr h;
	struct gbuf g;
	size_t plen;
	int ctx, sctx;

	if (!case_start("case 14: replies go eager and carry credit back", &g, 65536, 150,
	                &r, 14))
		return;
	pat_fill(out, REPLY_LEN, 15);
	pat_fill(payload, MSG_LEN, 16);

	/* Nothing came from r yet: RTS with its first piece. */
	CHECK_INT(fi_send(ep, out, REPLY_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_RTS);
	CHECK_HEX(h.flags & LM_HF_EARLY, LM_HF_EARLY);
	CHECK_INT(h.size, REPLY_LEN);
	CHECK(h.addr <= plen && !memcmp(in + h.addr, out, plen - h.addr));
	CHECK_INT(h.rreq, 0);
	settle();
	CHECK_INT(ncomp, 0); /* the send waits for its answer */
	CHECK(raw_control(&r, LM_OP_FIN, h.sreq, 0, 0));
	CHECK(wait_comps(1));
	check_one(&sctx, 0, 0, FI_SEND | FI_MSG);

	/* Two 40,000-byte messages from r, consumed: 80,000 bytes owed. */
	for (int k = 0; k < 2; k++) {
		ncomp = 0;
		CHECK_INT(fi_recv(ep, g.buf, g.cap, NULL, FI_ADDR_UNSPEC, &ctx), 0);
		CHECK(raw_write(&r, bytes, eager_frame(bytes, 0, 0, 0, SREQ, payload, MSG_LEN)));
		CHECK(wait_comps(1));
		check_one(&ctx, 0, MSG_LEN, FI_RECV | FI_MSG);
		CHECK(!memcmp(g.buf, payload, MSG_LEN));
	}
	CHECK(raw_quiet(&r)); /* no CREDIT packet for 80,000 bytes */

	/* A replies: one eager packet, the credit riding in it, and the
	 * send complete without an answer. */
	ncomp = 0;
	CHECK_INT(fi_send(ep, out, REPLY_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_EAGER);
	CHECK_INT(h.size, REPLY_LEN);
	CHECK_INT(plen, REPLY_LEN);
	CHECK(!memcmp(in, out, REPLY_LEN));
	CHECK_INT(h.rreq, 2 * MSG_LEN);
	CHECK(wait_comps(1));
	check_one(&sctx, 0, 0, FI_SEND | FI_MSG);

	/* Not a reply any more: rendezvous. */
	ncomp = 0;
	CHECK_INT(fi_send(ep, out, REPLY_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_RTS);
	CHECK_INT(h.rreq, 0);
	raw_close(&r); /* the send fails with the connection */
	CHECK(wait_comps(1));
	CHECK_INT(ncomp, 1);
	if (ncomp >= 1) {
		CHECK(comps[0].ctx == &sctx);
		CHECK(comps[0].err != 0);
	}
	ncomp = 0;
	free(g.mem);
}


/* 15: which RTSs carry a first piece.  Above 512 KiB none does; below,
 * the piece is whole pages (so the DATA after it starts on a page of the
 * buffer).  A CTS from 0 (the piece was dropped: no receive was posted)
 * has A stream everything from 0 and send the next RTSs without a piece
 * for a while. */
#define BIG_LEN  600000
#define MID_LEN  300000
static void case_early_choice(void)
{
	static uint8_t out[BIG_LEN], in[TCP_MAX_PAYLOAD + 64];
	struct raw r;
	struct lm_rdm_hdr h;
	size_t plen, got;
	int sctx;

	fprintf(stderr, "case 15: which RTSs carry a first piece\n");
	ncomp = 0;
	if (!raw_open(&r, 15)) {
		CHECK(!"case 15 setup");
		return;
	}
	pat_fill(out, BIG_LEN, 17);

	CHECK_INT(fi_send(ep, out, BIG_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_RTS);
	CHECK_INT(h.flags & LM_HF_EARLY, 0);
	CHECK_INT(h.size, BIG_LEN);
	CHECK_INT(plen, 24); /* the iov list alone */
	CHECK(raw_control(&r, LM_OP_FIN, h.sreq, 0, 0)); /* taken, say */
	CHECK(wait_comps(1));
	check_one(&sctx, 0, 0, FI_SEND | FI_MSG);

	ncomp = 0;
	CHECK_INT(fi_send(ep, out, MID_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_RTS);
	CHECK_HEX(h.flags & LM_HF_EARLY, LM_HF_EARLY);
	CHECK_INT(h.addr, 24);
	CHECK_INT(plen - h.addr, 47 * 4096);
	CHECK(!memcmp(in + h.addr, out, plen - h.addr));
	/* No receive took the piece: everything again, from 0. */
	CHECK(raw_control(&r, LM_OP_CTS, h.sreq, 0x100000005ULL, 0));
	for (got = 0; got < MID_LEN;) {
		struct lm_rdm_hdr d = raw_packet(&r, in, sizeof(in), &plen);

		CHECK_INT(d.op, LM_OP_DATA);
		CHECK_INT(d.rreq, 0x100000005ULL);
		CHECK_INT(d.addr, got);
		if (d.op != LM_OP_DATA || d.addr != got || !plen)
			break;
		CHECK(!memcmp(in, out + got, plen));
		got += plen;
	}
	CHECK_INT(got, MID_LEN);
	CHECK(raw_control(&r, LM_OP_FIN, h.sreq, 0, 0));
	CHECK(wait_comps(1));
	check_one(&sctx, 0, 0, FI_SEND | FI_MSG);

	/* Backing off: the next RTS has no piece. */
	ncomp = 0;
	CHECK_INT(fi_send(ep, out, MID_LEN, NULL, r.fa, &sctx), 0);
	h = raw_packet(&r, in, sizeof(in), &plen);
	CHECK_INT(h.op, LM_OP_RTS);
	CHECK_INT(h.flags & LM_HF_EARLY, 0);
	CHECK_INT(plen, 24);
	CHECK(raw_control(&r, LM_OP_FIN, h.sreq, 0, 0));
	CHECK(wait_comps(1));
	check_one(&sctx, 0, 0, FI_SEND | FI_MSG);
	raw_close(&r);
	settle();
	ncomp = 0;
}

/* After all that, A still takes a new peer's message. */
static void case_still_works(void)
{
	enum { LEN = 100 };
	uint8_t payload[LEN], bytes[HEAD_LEN + LEN], buf[LEN];
	struct raw r;
	int ctx;

	fprintf(stderr, "after: a fresh connection\n");
	ncomp = 0;
	if (!raw_open(&r, 7)) {
		CHECK(!"final setup");
		return;
	}
	pat_fill(payload, LEN, 8);
	memset(buf, 0, sizeof(buf));
	CHECK_INT(fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK(raw_write(&r, bytes, eager_frame(bytes, 0, 0, 0, SREQ, payload, LEN)));
	CHECK(wait_comps(1));
	settle();
	CHECK_INT(ncomp, 1);
	if (ncomp >= 1) {
		CHECK_INT(comps[0].err, 0);
		CHECK(comps[0].ctx == &ctx);
		CHECK_INT(comps[0].len, LEN);
	}
	CHECK(!memcmp(buf, payload, LEN));
	raw_close(&r);
	retire(&ctx);
}

int main(void)
{
	uint64_t t0 = now_ms();

	/* The endpoint must be on loopback whatever the environment. */
	setenv("FI_TCP_IFACE", "lo", 0);
	if (setup()) {
		fprintf(stderr, "place: setup failed\n");
		return 1;
	}
	case_placed();
	case_truncated();
	case_tagged_ack();
	case_multi();
	case_peer_dies();
	case_unexpected();
	case_posted_midway();
	case_peer_restarts();
	case_budget();
	case_rts_early();
	case_rts_whole();
	case_rts_unexpected();
	case_rts_truncated();
	case_reply_eager();
	case_early_choice();
	case_still_works();

	CHECK_INT(fi_close(&ep->fid), 0);
	CHECK_INT(fi_close(&cq->fid), 0);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(fi_close(&domain->fid), 0);
	CHECK_INT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	for (int i = 0; i < N_DEAD; i++)
		close(dead_fd[i]);
	fprintf(stderr, "place: %llu ms\n", (unsigned long long)(now_ms() - t0));
	return check_done();
}
