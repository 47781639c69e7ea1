/* link.c - the engine's link interface over the shared-memory transport:
 * packets go inline in a ring cell of the receiver's region or, when
 * larger, through one of its bounce buffers; bulk reads are cross-memory
 * attach.
 *
 * A cell carries (the transport's cells say nothing of their sender):
 *
 *   +------+------+------------------+------+-----+-----+--------------+
 *   | pid  | buf  | token            | len  |mask | pad | header words | inline payload
 *   +------+------+------------------+------+-----+-----+--------------+
 *     sender identity (16 B)          payload bytes, present words (8 B)
 *
 * buf is SHM_BUF_NONE for inline payloads, else the bounce buffer index
 * in the receiver's region holding len bytes.  The engine header travels
 * as its non-zero 8-byte words only (bit i of mask: word i is present),
 * so a small message with its header fits two cache lines, not three. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "shm.h"

/* The wire fields, decoded.  In the cell they are three 8-byte words,
 * each written and read whole (wire_put, wire_get):
 *   word 0: pid (low 32 bits) | buf << 32
 *   word 1: token
 *   word 2: len (low 32 bits) | mask << 32
 * (a struct built field by field on the stack and copied as a block
 * would make the CPU wait for the stores it copies). */
struct shm_wire {
	int32_t pid;
	uint32_t buf;
	uint64_t token;
	uint32_t len;
	uint8_t mask;
};

/* Bytes of the wire fields: their three words. */
#define WIRE_SIZE 24
/* The engine header's size, the only one this link packs: eight words,
 * so that which of them are present fits mask's one byte (WIRE_MASK_ALL). */
#define WIRE_MAX_HDR  64
#define WIRE_MASK_ALL ((1u << (WIRE_MAX_HDR / 8)) - 1)
_Static_assert(WIRE_MAX_HDR == sizeof(struct lm_rdm_hdr), "the engine's header");
/* Header words a small tagged message has present (version word, size,
 * tag), what inline_max leaves room for beside its payload. */
#define INLINE_HDR_WORDS 3

_Static_assert(offsetof(struct shm_bin_addr, pid) == 0 &&
                   offsetof(struct shm_bin_addr, zero) == 4 &&
                   offsetof(struct shm_bin_addr, token) == 8 &&
                   sizeof(struct shm_bin_addr) == 16,
               "an address is two words: pid and zero, token");

static inline void wire_put(unsigned char *out, const struct shm_bin_addr *self,
                            uint32_t buf, size_t len, unsigned mask)
{
	uint64_t w0 = (uint64_t)(uint32_t)self->pid | (uint64_t)buf << 32;
	uint64_t w2 = (uint64_t)(uint32_t)len | (uint64_t)(mask & WIRE_MASK_ALL) << 32;

	memcpy(out, &w0, 8);
	memcpy(out + 8, &self->token, 8);
	memcpy(out + 16, &w2, 8);
}

static inline void wire_get(const void *in, struct shm_wire *w)
{
	uint64_t x[3];

	memcpy(x, in, sizeof(x));
	w->pid = (int32_t)(uint32_t)x[0];
	w->buf = (uint32_t)(x[0] >> 32);
	w->token = x[1];
	w->len = (uint32_t)x[2];
	w->mask = (uint8_t)(x[2] >> 32);
}

struct shm_link {
	struct lm_link link;
	struct shm_region *region;
	/* link.fd: an epoll over the doorbell and a timer (wake_after). */
	int epfd, tfd;
	struct shm_bin_addr self;
	size_t hdr_size;
	lm_link_recv_fn recv;
	void *arg;
};

struct lm_link_peer {
	struct shm_peer *sp;
	struct shm_bin_addr addr; /* what peer_reset opens again */
	bool gone; /* peer_reset found no live region at addr: sends fail */
	bool want_buf; /* the last send lacked a bounce buffer, not a cell */
	/* The address is of this process: no cross-memory attach.  A cell's
	 * sender is only what it claims, and a hostile peer that claims an
	 * endpoint of ours would have us copy into or out of our own memory
	 * at addresses of its choosing.  Packets serve such peers. */
	bool own_process;
};

static int shm_from_str(const char *node, const char *service, void *addr)
{
	struct shm_bin_addr a = {0};
	pid_t pid;

	(void)service;
	if (shm_addr_resolve(node, &pid, &a.token))
		return -FI_EINVAL;
	a.pid = pid;
	memcpy(addr, &a, sizeof(a));
	return 0;
}

static int shm_to_str(const void *addr, char *buf, size_t *len)
{
	struct shm_bin_addr a;
	char tmp[SHM_ADDR_MAX];
	int n;

	memcpy(&a, addr, sizeof(a));
	n = shm_addr_format(tmp, sizeof(tmp), a.pid, a.token);
	if (n < 0)
		return n;
	if (*len)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return 0;
}

/* Lane k of an endpoint: the same process (or name), the token k on. */
static int shm_addr_lane(const void *addr, int delta, void *out)
{
	struct shm_bin_addr a;

	memcpy(&a, addr, sizeof(a));
	a.token += (uint64_t)(int64_t)delta;
	if (!a.token) /* 0 asks for any */
		return -FI_EINVAL;
	memcpy(out, &a, sizeof(a));
	return 0;
}

static int shm_link_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                         struct lm_link **out)
{
	struct shm_region_attr ra = {0};
	struct shm_link *l;
	pid_t pid;
	int ret;

	(void)ctx;
	/* A name: one chosen by the application (pid 0), or an address of
	 * this process, whose token is ours to choose (0: any). */
	if (name) {
		struct shm_bin_addr want;

		memcpy(&want, name, sizeof(want));
		if (want.pid == 0) {
			ra.named = true;
			ra.name_hint = attr->name_hint;
		} else if (want.pid != getpid() && want.token) {
			return -FI_EINVAL;
		}
		ra.token = want.token;
	}
	/* The packing below is written for the engine's eight words. */
	if (attr->hdr_size != WIRE_MAX_HDR)
		return -FI_EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -FI_ENOMEM;
	ra.ring_cells = attr->rx_size > SHM_RING_CELLS_DEF ? (uint32_t)attr->rx_size : 0;
	ret = shm_region_create(&ra, &l->region);
	if (ret) {
		free(l);
		return ret;
	}
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	l->epfd = l->tfd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
	if (l->tfd < 0 || l->epfd < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, shm_region_fd(l->region),
	              &(struct epoll_event){.events = EPOLLIN}) ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd,
	              &(struct epoll_event){.events = EPOLLIN})) {
		ret = lm_neg_errno(errno);
		if (l->tfd >= 0)
			close(l->tfd);
		if (l->epfd >= 0)
			close(l->epfd);
		shm_region_destroy(l->region);
		free(l);
		return ret;
	}
	shm_addr_parse(shm_region_addr(l->region), &pid, &l->self.token);
	l->self.pid = pid;
	l->hdr_size = attr->hdr_size;
	l->recv = attr->recv;
	l->arg = attr->arg;
	l->link.ops = &shm_link_ops;
	l->link.fd = l->epfd;
	l->link.max_payload = SHM_BUF_SIZE;
	/* What fits beside a header of three words (a typical message). */
	l->link.inline_max = SHM_INLINE_MAX - WIRE_SIZE - INLINE_HDR_WORDS * 8;
	l->link.caps = !attr->no_bulk && shm_cma_probe() == 0
	                   ? LM_LINK_BULK_READ | LM_LINK_BULK_WRITE
	                   : 0;
	l->link.addr = &l->self;
	*out = &l->link;
	return 0;
}

static void shm_link_close(struct lm_link *link)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);

	close(l->epfd);
	close(l->tfd);
	shm_region_destroy(l->region);
	free(l);
}

static int shm_link_peer_open(struct lm_link *link, const void *addr,
                              struct lm_link_peer **peer)
{
	char str[SHM_ADDR_MAX];
	size_t len = sizeof(str);
	struct lm_link_peer *p;
	int ret;

	(void)link;
	ret = shm_to_str(addr, str, &len);
	if (ret)
		return ret;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	ret = shm_peer_open(str, &p->sp);
	if (ret) {
		free(p);
		return ret;
	}
	if (shm_buf_size(&p->sp->map) < SHM_BUF_SIZE) {
		shm_peer_close(p->sp);
		free(p);
		return -FI_EINVAL;
	}
	p->own_process = p->sp->pid == getpid();
	memcpy(&p->addr, addr, sizeof(p->addr));
	*peer = p;
	return 0;
}

/* The engine failed everything with a peer whose region closed: its
 * address is opened again, where an endpoint may have opened since (else
 * the peer stays gone). */
static void shm_link_peer_reset(struct lm_link *link, struct lm_link_peer *peer)
{
	struct lm_link_peer *fresh;

	peer->gone = false;
	if (shm_peer_alive(peer->sp))
		return;
	peer->gone = true;
	if (shm_link_peer_open(link, &peer->addr, &fresh))
		return;
	if (!shm_peer_alive(fresh->sp)) { /* the same, or another left behind */
		shm_peer_close(fresh->sp);
		free(fresh);
		return;
	}
	shm_peer_close(peer->sp);
	*peer = *fresh;
	free(fresh);
}

static void shm_link_peer_close(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link;
	shm_peer_close(peer->sp);
	free(peer);
}

/* Which of the header's eight words are non-zero (bit i: word i).
 * Branches, not arithmetic: a program's messages repeat one pattern, and
 * most words are zero. */
static inline uint8_t hdr_mask(const void *hdr)
{
	unsigned mask = 0;

#pragma GCC unroll 8
	for (unsigned i = 0; i < WIRE_MAX_HDR / 8; i++) {
		uint64_t w;

		memcpy(&w, (const char *)hdr + i * 8, 8);
		if (w)
			mask |= 1u << i;
	}
	return (uint8_t)mask;
}

/* The words of hdr that mask names, packed into out. */
static inline void hdr_pack(unsigned char *out, const void *hdr, unsigned mask)
{
	for (; mask; mask &= mask - 1, out += 8)
		memcpy(out, (const char *)hdr + __builtin_ctz(mask) * 8, 8);
}

/* Back to the eight header words from the packed ones at in, of which
 * avail bytes are the cell's; returns the bytes consumed, or -1 when the
 * mask names more than avail holds (in is read that far regardless). */
static inline ssize_t hdr_unpack(void *hdr, const unsigned char *in, size_t avail,
                                 unsigned mask)
{
	size_t n = 0;

	memset(hdr, 0, WIRE_MAX_HDR); /* absent words are zero */
	for (; mask; mask &= mask - 1, n += 8)
		memcpy((char *)hdr + __builtin_ctz(mask) * 8, in + n, 8);
	return n > avail ? -1 : (ssize_t)n;
}

/* Set bits of a byte (without a call where the CPU lacks popcnt). */
static inline unsigned popcount8(unsigned x)
{
	x = x - ((x >> 1) & 0x55);
	x = (x & 0x33) + ((x >> 2) & 0x33);
	return (x + (x >> 4)) & 0x0f;
}

/* A packet whose header is already packed: words holds the header words
 * mask names, in order.  The payload (len bytes of iov) goes inline when
 * it fits the cell beside them, else through a bounce buffer. */
static LM_HOT_INLINE ssize_t send_packed(struct shm_link *l, struct lm_link_peer *peer,
                                         const uint64_t *words, unsigned mask,
                                         const struct iovec *iov, size_t iov_count,
                                         size_t len)
{
	unsigned n = popcount8(mask);
	size_t hl = WIRE_SIZE + 8 * (size_t)n;
	struct shm_cell *c;
	uint64_t pos;
	int idx = -1;

	/* Its endpoint closed (the flag is in a line nobody writes until
	 * then), or a reset found it gone: the packet would lie in a ring
	 * nobody reads. */
	if (peer->gone || !atomic_load_explicit(&peer->sp->map.hdr->alive, memory_order_relaxed))
		return -FI_EIO;
	if (hl + len > SHM_INLINE_MAX) {
		char *dst;
		size_t off = 0;

		idx = shm_buf_alloc(peer->sp);
		if (idx < 0) {
			peer->want_buf = true;
			return idx == -FI_EAGAIN ? -FI_EAGAIN : -FI_EIO;
		}
		dst = shm_buf_peer_ptr(peer->sp, (uint32_t)idx);
		for (size_t i = 0; i < iov_count; i++) {
			if (iov[i].iov_len)
				memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
	}
	c = shm_ring_claim(peer->sp, &pos);
	if (!c) {
		if (idx >= 0)
			shm_buf_put(peer->sp, (uint32_t)idx);
		peer->want_buf = false;
		return -FI_EAGAIN;
	}
	/* Straight into the cell: wire, packed header, inline payload. */
	wire_put(c->data, &l->self, idx < 0 ? SHM_BUF_NONE : (uint32_t)idx, len, mask);
	for (unsigned i = 0; i < n; i++)
		memcpy(c->data + WIRE_SIZE + 8 * i, &words[i], 8);
	if (idx < 0) {
		size_t off = hl;

		for (size_t i = 0; i < iov_count; i++) {
			if (iov[i].iov_len) /* its base may be NULL */
				memcpy(c->data + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
		shm_ring_commit(c, pos, hl + len);
	} else {
		shm_ring_commit(c, pos, hl);
	}
	shm_doorbell_ring(peer->sp);
	return 0;
}

static ssize_t shm_link_send(struct lm_link *link, struct lm_link_peer *peer,
                             const void *hdr, const struct iovec *iov, size_t iov_count)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);
	uint64_t words[WIRE_MAX_HDR / 8];
	size_t len = 0;
	unsigned mask;

	for (size_t i = 0; i < iov_count; i++)
		len += iov[i].iov_len;
	if (len > SHM_BUF_SIZE)
		return -FI_EMSGSIZE;
	mask = hdr_mask(hdr);
	hdr_pack((unsigned char *)words, hdr, mask);
	return send_packed(l, peer, words, mask, iov, iov_count, len);
}

/* The header as its words: what the cell carries, so nothing to scan or
 * pack (a payload too large for the cell beside them goes by buffer). */
static ssize_t shm_link_send_words(struct lm_link *link, struct lm_link_peer *peer,
                                   const uint64_t *words, unsigned mask,
                                   const void *payload, size_t len)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);
	struct iovec iov = {(void *)payload, len};

	if (mask > WIRE_MASK_ALL || len > SHM_BUF_SIZE)
		return -FI_EMSGSIZE;
	return send_packed(l, peer, words, mask, &iov, 1, len);
}

static int shm_link_poll(struct lm_link *link, int budget)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);
	uint64_t hdr[WIRE_MAX_HDR / 8];
	int n = 0;

	while (n < budget) {
		size_t len, hl;
		ssize_t hn;
		const void *cell = shm_ring_peek(l->region, &len);
		struct shm_wire w;
		/* Built in whole words, as the engine compares it. */
		union {
			struct shm_bin_addr a;
			uint64_t w[2];
		} src;
		const void *payload;

		if (!cell)
			break;
		n++;
		if (len < WIRE_SIZE) {
			shm_ring_release(l->region);
			continue;
		}
		/* The wire fields and header words are copied out before they
		 * are checked: the sender could rewrite the cell meanwhile.
		 * An inline payload is read in place, as a bounce buffer's
		 * is (a sender that rewrites it garbles its own message); the
		 * cell stays ours until the flush after the loop. */
		wire_get(cell, &w);
		shm_ring_consume(l->region);
		hn = hdr_unpack(hdr, (const unsigned char *)cell + WIRE_SIZE, len - WIRE_SIZE,
		                w.mask);
		if (hn < 0)
			continue;
		hl = WIRE_SIZE + (size_t)hn;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		src.w[0] = (uint32_t)w.pid; /* pid, then zero */
#else
		src.w[0] = (uint64_t)(uint32_t)w.pid << 32;
#endif
		src.w[1] = w.token;
		if (w.buf == SHM_BUF_NONE) {
			if (w.len != len - hl)
				continue;
			l->recv(l->arg, &src, hdr, (const unsigned char *)cell + hl, w.len);
			continue;
		}
		payload = shm_buf_ptr(l->region, w.buf);
		if (payload && w.len <= shm_buf_size(&l->region->map) && len == hl)
			l->recv(l->arg, &src, hdr, payload, w.len);
		if (payload)
			shm_buf_free(l->region, w.buf);
	}
	if (shm_ring_flush_due(l->region))
		shm_ring_flush(l->region);
	return n;
}

static bool shm_link_idle(struct lm_link *link)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);

	return !shm_ring_ready(l->region) && !shm_ring_flush_due(l->region);
}

static void shm_link_timer_stop(struct shm_link *l)
{
	timerfd_settime(l->tfd, 0, &(struct itimerspec){0}, NULL);
	lm_fd_drain(l->tfd);
}

static void shm_link_arm(struct lm_link *link)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);

	shm_doorbell_drain(l->region);
	shm_link_timer_stop(l); /* a new sleep asks for its own wake-up */
	shm_ring_flush(l->region); /* producers waiting for room go on */
	/* Work already there is read by the engine's next poll, before it
	 * sleeps: the flag goes up again, so that what comes after that poll
	 * rings (either a producer sees the flag, or that poll sees its
	 * cell: both sides fence between their store and their load). */
	if (shm_doorbell_arm(l->region) == -FI_EAGAIN)
		atomic_store_explicit(&l->region->map.hdr->sleeping, 1, memory_order_seq_cst);
}

static void shm_link_disarm(struct lm_link *link)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);

	shm_doorbell_disarm(l->region);
	shm_doorbell_drain(l->region);
	shm_link_timer_stop(l);
}

static void shm_link_wake_after(struct lm_link *link, int ms)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);
	struct itimerspec t = {
	    .it_value = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000}};

	timerfd_settime(l->tfd, 0, &t, NULL);
}

static int shm_link_want_room(struct lm_link *link, struct lm_link_peer *peer)
{
	struct shm_link *l = lm_container_of(link, struct shm_link, link);

	return shm_room_want(peer->sp, l->self.pid, l->self.token, peer->want_buf);
}

/* May a bulk copy of kind cap (LM_LINK_BULK_*) go to peer?  0, or why not:
 * a failed probe's -FI_EIO becomes -FI_EPERM, since -FI_EIO would tell the
 * engine the peer is gone rather than "use packets" (link.h). */
static int bulk_check(struct lm_link *link, struct lm_link_peer *peer, unsigned cap)
{
	int ret;

	if (!(link->caps & cap) || peer->own_process)
		return -FI_ENOSYS;
	ret = shm_cma_peer_probe(peer->sp);
	return ret == -FI_EIO ? -FI_EPERM : ret;
}

static ssize_t shm_link_bulk_read(struct lm_link *link, struct lm_link_peer *peer,
                                  const struct iovec *local, size_t local_count,
                                  const struct iovec *remote, size_t remote_count)
{
	int ret = bulk_check(link, peer, LM_LINK_BULK_READ);

	if (ret)
		return ret;
	return shm_cma_read(peer->sp->pid, local, local_count, remote, remote_count);
}

static ssize_t shm_link_bulk_write(struct lm_link *link, struct lm_link_peer *peer,
                                   const struct iovec *local, size_t local_count,
                                   const struct iovec *remote, size_t remote_count)
{
	int ret = bulk_check(link, peer, LM_LINK_BULK_WRITE);

	if (ret)
		return ret;
	return shm_cma_write(peer->sp->pid, local, local_count, remote, remote_count);
}

static bool shm_link_peer_alive(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link;
	return !peer->gone && shm_peer_alive(peer->sp);
}

struct shm_region *shm_link_region(struct lm_link *link)
{
	return lm_container_of(link, struct shm_link, link)->region;
}

const struct lm_link_ops shm_link_ops = {
    .name = "shm",
    .addrlen = sizeof(struct shm_bin_addr),
    .addr_from_str = shm_from_str,
    /* Any text is a name an endpoint may take (fi_setname). */
    .addr_str_max = SHM_NAME_TEXT_MAX,
    .addr_to_str = shm_to_str,
    .addr_lane = shm_addr_lane,
    .open = shm_link_open,
    .close = shm_link_close,
    .peer_open = shm_link_peer_open,
    .peer_close = shm_link_peer_close,
    .send = shm_link_send,
    .send_words = shm_link_send_words,
    .poll = shm_link_poll,
    .idle = shm_link_idle,
    .arm = shm_link_arm,
    .disarm = shm_link_disarm,
    .wake_after = shm_link_wake_after,
    .want_room = shm_link_want_room,
    .bulk_read = shm_link_bulk_read,
    .bulk_write = shm_link_bulk_write,
    .peer_alive = shm_link_peer_alive,
    .peer_reset = shm_link_peer_reset,
};
