/* link.c - the udp link's own cases, through its ops table: two links in
 * this process talk through a relay (two UDP sockets of the test's) that
 * drops, duplicates, reorders, delays and corrupts datagrams at rates the
 * case sets.  Each direction carries thousands of packets of every size
 * class, numbered, with their bytes a function of the number: every one
 * must arrive exactly once, in order, intact; a corrupted datagram must
 * never be delivered.  Then the handshake's cases: a peer restarted at the
 * same address (a new incarnation) is reported lost and reached afresh
 * once the engine resolves it again,
 * a stray for the old incarnation is answered, a datagram of another
 * version or with a bad check is dropped, and udp_wire_check refuses
 * malformed bytes.  Last the meeting a link of two asks for (MEET):
 * offers carried both ways through loss, one side or both asking, a side
 * that offers nothing, and a peer met afresh after a reset. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "rdm.h"
#include "udp.h"

#define HDR       sizeof(struct lm_rdm_hdr)
#define NPKT      2000
#define WAIT_MS   60000
#define HOLD_MAX  64 /* datagrams the relay holds back to reorder */
#define DGRAM_MAX 65536

static struct udp_params params = {.peer_timeout_ms = 20000, .sockbuf = 8 << 20};

/* ---- ends ------------------------------------------------------------------ */

/* What met told an end: per stage, how often, and the last offer. */
struct met_log {
	unsigned n[LM_MET_CONFIRM + 1];
	char offer[UDP_MEET_MAX + 1];
	size_t len;
};

struct end {
	const char *name;
	struct lm_link *link;
	struct sockaddr_in addr;
	struct lm_link_peer *peer;
	uint64_t next, got, bad, lost;
	uint64_t lent_block; /* send_lent: the block last made ready */
	const char *offer; /* NULL: none, no met */
	struct met_log met;
	/* Placement (opened with place_next): payloads read straight into
	 * dest, a slot per packet number mod PLACE_SLOTS. */
	unsigned char *dest;
	uint64_t asked, placed, unplaced;
};

#define PLACE_SLOTS 8
static bool place_next; /* the next end opened places payloads */

static size_t len_of(const struct end *e, uint64_t i)
{
	size_t max = e->link->max_payload;
	size_t choices[] = {0, 1, 63, 64, 1000, 4096, 20000, max - 1, max};

	return choices[(i * 7) % (sizeof(choices) / sizeof(choices[0]))];
}

static unsigned char byte_of(uint64_t i, size_t off)
{
	return (unsigned char)(i * 131 + off * 7 + 1);
}

static void on_recv(void *arg, const void *src, const void *hdr, const void *payload,
                    size_t len)
{
	struct end *e = arg;
	struct lm_rdm_hdr h;
	const unsigned char *p = payload;
	bool ok;

	(void)src;
	memcpy(&h, hdr, sizeof(h));
	ok = h.tag == e->next && h.data == ~h.tag && h.size == len;
	for (size_t i = 0; ok && i < len; i++)
		ok = p[i] == byte_of(h.tag, i);
	if (!ok && e->bad++ < 3)
		fprintf(stderr, "%s: packet %llu (want %llu), %zu bytes: wrong\n", e->name,
		        (unsigned long long)h.tag, (unsigned long long)e->next, len);
	e->next = h.tag + 1;
	e->got++;
}

static void on_lost(void *arg, const void *src)
{
	(void)src;
	((struct end *)arg)->lost++;
}

static void on_met(void *arg, const void *src, const void *offer, size_t len,
                   enum lm_link_met stage)
{
	struct met_log *m = arg;

	(void)src;
	CHECK(stage >= LM_MET_HELLO && stage <= LM_MET_CONFIRM);
	CHECK(len <= UDP_MEET_MAX);
	if (stage < LM_MET_HELLO || stage > LM_MET_CONFIRM || len > UDP_MEET_MAX)
		return;
	m->n[stage]++;
	if (stage == LM_MET_CONFIRM)
		return;
	memset(m->offer, 0, sizeof(m->offer));
	if (len)
		memcpy(m->offer, offer, len);
	m->len = len;
}

/* The engine's side of placement, as the RDM engine does it: place is
 * asked only for the next packet in order; every fifth it declines (that
 * one comes through recv).  placed checks the payload where it went. */
static unsigned char *slot_of(struct end *e, uint64_t tag)
{
	return e->dest + (tag % PLACE_SLOTS) * DGRAM_MAX;
}

static size_t t_place(void *arg, const void *src, const void *hdr, size_t plen,
                      struct iovec *iov)
{
	struct end *e = arg;
	struct lm_rdm_hdr h;

	(void)src;
	memcpy(&h, hdr, sizeof(h));
	e->asked++;
	CHECK(h.tag == e->next && h.size == plen);
	if (h.tag % 5 == 4)
		return 0;
	iov[0] = (struct iovec){slot_of(e, h.tag), plen};
	return 1;
}

static void t_placed(void *arg, const void *src, const void *hdr, size_t plen)
{
	struct end *e = arg;
	struct lm_rdm_hdr h;

	memcpy(&h, hdr, sizeof(h));
	e->placed++;
	on_recv(arg, src, hdr, slot_of(e, h.tag), plen);
}

static void t_unplaced(void *arg, const void *src, const void *hdr, size_t plen)
{
	struct end *e = arg;
	struct lm_rdm_hdr h;

	(void)src;
	memcpy(&h, hdr, sizeof(h));
	e->unplaced++;
	CHECK(h.tag == e->next && h.size == plen);
}

/* An end at `at` (or any loopback port) offering `offer` in its meetings
 * (NULL: none, as a link under no link of two). */
static int end_open_offer(struct end *e, const char *name, const struct sockaddr_in *at,
                          const char *offer)
{
	struct sockaddr_in lo = {.sin_family = AF_INET,
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct lm_link_attr attr = {.hdr_size = HDR, .recv = on_recv, .lost = on_lost,
	                            .arg = e};
	int ret;

	memset(e, 0, sizeof(*e));
	e->name = name;
	e->offer = offer;
	if (place_next) {
		e->dest = malloc(PLACE_SLOTS * DGRAM_MAX);
		if (!e->dest)
			return -FI_ENOMEM;
		attr.place = t_place;
		attr.placed = t_placed;
		attr.unplaced = t_unplaced;
	}
	if (offer) {
		attr.offer = offer;
		attr.offer_len = strlen(offer);
		attr.met = on_met;
		attr.met_arg = &e->met;
	}
	ret = udp_link_ops.open(&params, &attr, at ? at : &lo, &e->link);
	if (ret) {
		fprintf(stderr, "%s: open: %d\n", name, ret);
		return ret;
	}
	memcpy(&e->addr, e->link->addr, sizeof(e->addr));
	return 0;
}

static int end_open(struct end *e, const char *name, const struct sockaddr_in *at)
{
	return end_open_offer(e, name, at, NULL);
}

static void end_close(struct end *e)
{
	if (e->link)
		udp_link_ops.close(e->link);
	e->link = NULL;
	free(e->dest);
	e->dest = NULL;
}

static ssize_t send_len(struct end *a, uint64_t i, size_t len)
{
	static unsigned char buf[DGRAM_MAX];
	struct lm_rdm_hdr h = {.version = 1, .op = 3, .size = len, .tag = i, .data = ~i};
	struct iovec iov = {buf, len};

	for (size_t k = 0; k < len; k++)
		buf[k] = byte_of(i, k);
	return udp_link_ops.send(a->link, a->peer, &h, &iov, 1);
}

static ssize_t send_one(struct end *a, uint64_t i)
{
	return send_len(a, i, len_of(a, i));
}

/* Packet i of a's, its payload lent (lm_link_pkt): from a buffer of two
 * blocks of 16 that the packets take in turn, so that up to 32 sit in
 * the link's window sent from the application's memory, and sent again
 * from there when lost.  Before a block is written again, unlend: what
 * the link still needs of it becomes its own. */
#define LENT_BLOCK 16
static ssize_t send_lent(struct end *a, uint64_t i)
{
	static unsigned char buf[2][LENT_BLOCK][DGRAM_MAX];
	unsigned char(*block)[DGRAM_MAX] = buf[i / LENT_BLOCK % 2];
	unsigned char *at = block[i % LENT_BLOCK];
	size_t len = len_of(a, i);
	struct lm_rdm_hdr h = {.version = 1, .op = 3, .size = len, .tag = i, .data = ~i};
	/* Each block lends its packets (the owner unlend names). */
	struct lm_link_pkt p = {&h, &(struct iovec){at, len}, 1, block};
	ssize_t n;

	if (i % LENT_BLOCK == 0 && i >= 2 * LENT_BLOCK && a->lent_block != i) {
		udp_link_ops.unlend(a->link, a->peer, block);
		memset(buf[i / LENT_BLOCK % 2], 0xee, sizeof(buf[0]));
		a->lent_block = i;
	}
	for (size_t k = 0; k < len; k++)
		at[k] = byte_of(i, k);
	n = udp_link_ops.send_many(a->link, a->peer, &p, 1);
	return n == 1 ? 0 : n;
}

/* ---- the relay --------------------------------------------------------------- */

struct held {
	unsigned char *buf;
	size_t len;
	int to; /* 0: toward a, 1: toward b */
	int wait; /* relay rounds before it goes */
};

/* Percentages of datagrams dropped, duplicated, held back (reordered),
 * and corrupted (a byte flipped). */
struct mangle {
	int drop, dup, reorder, corrupt;
};

struct relay {
	int fd[2];                  /* fd[0] faces a, fd[1] faces b */
	struct sockaddr_in addr[2]; /* their addresses */
	struct sockaddr_in to[2];   /* a's and b's */
	struct mangle m;
	struct held held[HOLD_MAX];
	int nheld;
	uint64_t seen, dropped, dupped, reordered, corrupted;
	unsigned rnd;
};

static unsigned rnd(struct relay *r)
{
	r->rnd = r->rnd * 1103515245u + 12345u;
	return (r->rnd >> 8) % 100;
}

static int relay_open(struct relay *r, const struct end *a, const struct end *b,
                      struct mangle m)
{
	memset(r, 0, sizeof(*r));
	r->m = m;
	r->rnd = 12345;
	r->to[0] = a->addr;
	r->to[1] = b->addr;
	for (int i = 0; i < 2; i++) {
		socklen_t len = sizeof(r->addr[i]);
		int sz = 8 << 20;

		r->addr[i] = (struct sockaddr_in){.sin_family = AF_INET,
		                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		r->fd[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
		if (r->fd[i] < 0 || bind(r->fd[i], (struct sockaddr *)&r->addr[i], len) ||
		    getsockname(r->fd[i], (struct sockaddr *)&r->addr[i], &len))
			return -1;
		setsockopt(r->fd[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
		setsockopt(r->fd[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	return 0;
}

static void relay_close(struct relay *r)
{
	for (int i = 0; i < r->nheld; i++)
		free(r->held[i].buf);
	close(r->fd[0]);
	close(r->fd[1]);
}

/* Out through the socket facing the far end: a packet from a (arrived on
 * fd[0]) leaves from fd[1] to b, so b sees the relay's fd[1] as its
 * peer, and the other way. */
static void relay_out(struct relay *r, int to, const unsigned char *buf, size_t len)
{
	sendto(r->fd[to], buf, len, 0, (const struct sockaddr *)&r->to[to], sizeof(r->to[to]));
}

static void relay_run(struct relay *r)
{
	static unsigned char buf[DGRAM_MAX];

	for (int i = 0; i < r->nheld;) {
		struct held *h = &r->held[i];

		if (--h->wait > 0) {
			i++;
			continue;
		}
		relay_out(r, h->to, h->buf, h->len);
		free(h->buf);
		*h = r->held[--r->nheld];
	}
	for (int from = 0; from < 2; from++) {
		for (int k = 0; k < 64; k++) {
			ssize_t n = recv(r->fd[from], buf, sizeof(buf), MSG_DONTWAIT);
			int to = !from;

			if (n <= 0)
				break;
			r->seen++;
			if ((int)rnd(r) < r->m.drop) {
				r->dropped++;
				continue;
			}
			if ((int)rnd(r) < r->m.corrupt) {
				buf[rnd(r) * (size_t)n / 100] ^= (unsigned char)(1 + rnd(r));
				r->corrupted++;
			}
			if ((int)rnd(r) < r->m.dup) {
				relay_out(r, to, buf, (size_t)n);
				r->dupped++;
			}
			if ((int)rnd(r) < r->m.reorder && r->nheld < HOLD_MAX) {
				struct held *h = &r->held[r->nheld];

				h->buf = malloc((size_t)n);
				if (h->buf) {
					memcpy(h->buf, buf, (size_t)n);
					h->len = (size_t)n;
					h->to = to;
					h->wait = 1 + (int)rnd(r) % 5;
					r->nheld++;
					r->reordered++;
					continue;
				}
			}
			relay_out(r, to, buf, (size_t)n);
		}
	}
}

/* ---- cases --------------------------------------------------------------------- */

/* NPKT packets each way through a relay mangling at m: every one
 * delivered once, in order, intact; a's payloads lent when lend. */
static void through_as(const char *what, struct mangle m, bool lend)
{
	struct end a, b;
	struct relay r;
	uint64_t sa = 0, sb = 0, end;
	struct udp_link_counts ca, cb;

	if (end_open(&a, "a", NULL) || end_open(&b, "b", NULL) ||
	    relay_open(&r, &a, &b, m)) {
		CHECK(0);
		return;
	}
	/* a's peer is the relay's side facing it, and so for b. */
	CHECK_INT(udp_link_ops.peer_open(a.link, &r.addr[0], &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &r.addr[1], &b.peer), 0);
	for (end = lm_now_ms() + WAIT_MS;
	     (a.got < NPKT || b.got < NPKT) && lm_now_ms() < end;) {
		while (sa < NPKT && !(lend ? send_lent(&a, sa) : send_one(&a, sa)))
			sa++;
		while (sb < NPKT && !send_one(&b, sb))
			sb++;
		relay_run(&r);
		udp_link_ops.poll(a.link, 64);
		udp_link_ops.poll(b.link, 64);
		relay_run(&r);
	}
	udp_link_counts(a.link, &ca);
	udp_link_counts(b.link, &cb);
	fprintf(stderr,
	        "%s: %llu and %llu of %d delivered, %llu and %llu sent short; relay saw "
	        "%llu: %llu dropped, %llu duplicated, %llu reordered, %llu corrupted\n",
	        what, (unsigned long long)a.got, (unsigned long long)b.got, NPKT,
	        (unsigned long long)ca.shorts, (unsigned long long)cb.shorts,
	        (unsigned long long)r.seen, (unsigned long long)r.dropped,
	        (unsigned long long)r.dupped, (unsigned long long)r.reordered,
	        (unsigned long long)r.corrupted);
	CHECK_INT(a.got, NPKT);
	CHECK_INT(b.got, NPKT);
	/* Both ways, the small packets go short once each side heard the
	 * other (a's lent ones go long: sent from the application's memory). */
	CHECK(cb.shorts > 0);
	if (!lend)
		CHECK(ca.shorts > 0);
	CHECK_INT(a.bad + b.bad, 0);
	CHECK_INT(a.lost + b.lost, 0);
	CHECK(udp_link_ops.peer_alive(a.link, a.peer));
	relay_close(&r);
	end_close(&a);
	end_close(&b);
}

static void through(const char *what, struct mangle m)
{
	through_as(what, m, false);
}

/* Packets i.. of a's, up to n in one send_many: full ones, and every
 * 13th shorter, ending a run of equal ones.  Returns how many it took. */
static ssize_t send_run(struct end *a, uint64_t i, unsigned n)
{
	static unsigned char buf[64][DGRAM_MAX];
	struct lm_rdm_hdr h[64];
	struct iovec iov[64];
	struct lm_link_pkt p[64];

	n = n > 64 ? 64 : n;
	for (unsigned k = 0; k < n; k++) {
		uint64_t j = i + k;
		size_t len = j % 13 == 12 ? j % a->link->max_payload : a->link->max_payload;

		for (size_t o = 0; o < len; o++)
			buf[k][o] = byte_of(j, o);
		h[k] = (struct lm_rdm_hdr){.version = 1, .op = 3, .size = len, .tag = j, .data = ~j};
		iov[k] = (struct iovec){buf[k], len};
		p[k] = (struct lm_link_pkt){&h[k], &iov[k], 1, NULL};
	}
	return udp_link_ops.send_many(a->link, a->peer, p, n);
}

/* The kernel's batching (UDP_SEGMENT, UDP_GRO) at a 1500-byte MTU, where
 * datagrams are small enough to share a send: NPKT packets from a to b,
 * many to a send_many, every one delivered once, in order, intact.
 * Straight, b's reads must take some joined by the kernel; through a
 * relay that loses and reorders (its plain sockets read them one by
 * one), the cut sends must come apart right.  Either way a's sends must
 * have been cut by the kernel: this case fails if batching is off. */
static void batched(const char *what, struct mangle m, bool relay)
{
	struct udp_params plain = params;
	struct end a, b;
	struct relay r;
	uint64_t sa = 0, end;
	struct udp_link_counts ca, cb;

	params.mtu = 1500;
	params.gso = true;
	if (end_open(&a, "a", NULL) || end_open(&b, "b", NULL) ||
	    (relay && relay_open(&r, &a, &b, m))) {
		params = plain;
		CHECK(0);
		return;
	}
	params = plain;
	CHECK_INT(udp_link_ops.peer_open(a.link, relay ? &r.addr[0] : &b.addr, &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, relay ? &r.addr[1] : &a.addr, &b.peer), 0);
	for (end = lm_now_ms() + WAIT_MS; b.got < NPKT && lm_now_ms() < end;) {
		ssize_t n = sa < NPKT ? send_run(&a, sa, (unsigned)(NPKT - sa)) : 0;

		if (n > 0)
			sa += (uint64_t)n;
		if (relay)
			relay_run(&r);
		udp_link_ops.poll(b.link, 64);
		udp_link_ops.poll(a.link, 64);
		if (relay)
			relay_run(&r);
	}
	udp_link_counts(a.link, &ca);
	udp_link_counts(b.link, &cb);
	fprintf(stderr, "batched, %s: %llu of %d delivered; %llu sends cut, %llu reads joined\n",
	        what, (unsigned long long)b.got, NPKT, (unsigned long long)ca.cut,
	        (unsigned long long)cb.joined);
	CHECK_INT(b.got, NPKT);
	CHECK_INT(b.bad, 0);
	CHECK_INT(a.lost + b.lost, 0);
	CHECK(ca.cut > 0);
	if (!relay)
		CHECK(cb.joined > 0);
	if (relay)
		relay_close(&r);
	end_close(&a);
	end_close(&b);
}

/* Payloads read straight into place: NPKT packets from a to b, mostly
 * large ones in runs, through a relay mangling at m.  Every one delivered
 * once, in order, intact (placed or, declined by the engine, copied);
 * some placed; and where the relay corrupts, some found damaged after
 * placing, given back, and placed again when sent again. */
static void placing(const char *what, struct mangle m)
{
	struct end a, b;
	struct relay r;
	struct udp_link_counts c;
	uint64_t sa = 0, end;
	int ok;

	place_next = true;
	ok = !end_open(&b, "b", NULL);
	place_next = false;
	if (!ok || end_open(&a, "a", NULL) || relay_open(&r, &a, &b, m)) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &r.addr[0], &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &r.addr[1], &b.peer), 0);
	for (end = lm_now_ms() + WAIT_MS; b.got < NPKT && lm_now_ms() < end;) {
		size_t max = a.link->max_payload;

		while (sa < NPKT &&
		       !send_len(&a, sa, sa % 7 == 6 ? 100 : sa % 2 ? max : 20000))
			sa++;
		relay_run(&r);
		udp_link_ops.poll(b.link, 64);
		udp_link_ops.poll(a.link, 64);
		relay_run(&r);
	}
	udp_link_counts(b.link, &c);
	fprintf(stderr,
	        "placing, %s: %llu of %d delivered; place asked %llu, %llu placed, %llu "
	        "damaged and given back; relay: %llu dropped, %llu corrupted\n",
	        what, (unsigned long long)b.got, NPKT, (unsigned long long)b.asked,
	        (unsigned long long)b.placed, (unsigned long long)b.unplaced,
	        (unsigned long long)r.dropped, (unsigned long long)r.corrupted);
	CHECK_INT(b.got, NPKT);
	CHECK_INT(b.bad, 0);
	CHECK_INT(a.lost + b.lost, 0);
	CHECK(b.placed > NPKT / 4);
	CHECK_INT(c.placed, b.placed);
	if (m.corrupt)
		CHECK(b.unplaced > 0);
	relay_close(&r);
	end_close(&a);
	end_close(&b);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* b goes and a new b opens at its address: a hears it was lost, and
 * packets flow between a and the new b from number 0 again. */
static void restart(void)
{
	struct end a, b, b2;
	uint64_t end;

	if (end_open(&a, "a", NULL) || end_open(&b, "b", NULL)) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &b.addr, &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &a.addr, &b.peer), 0);
	for (uint64_t i = 0; i < 10; i++)
		CHECK_INT(send_one(&a, i), 0);
	for (end = lm_now_ms() + WAIT_MS; b.got < 10 && lm_now_ms() < end;) {
		udp_link_ops.poll(b.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(b.got, 10);
	end_close(&b);
	/* The new one, at the same address, speaks first. */
	CHECK_INT(end_open(&b2, "b2", &b.addr), 0);
	CHECK_INT(memcmp(&b2.addr, &b.addr, sizeof(b.addr)), 0);
	CHECK_INT(udp_link_ops.peer_open(b2.link, &a.addr, &b2.peer), 0);
	CHECK_INT(send_one(&b2, 0), 0);
	for (end = lm_now_ms() + WAIT_MS; a.got < 1 && lm_now_ms() < end;) {
		udp_link_ops.poll(a.link, 64);
		udp_link_ops.poll(b2.link, 64);
	}
	CHECK_INT(a.got, 1);
	/* The old b, reported once (its farewell said it closed); the new
	 * one, which spoke, is alive. */
	CHECK_INT(a.lost, 1);
	CHECK(udp_link_ops.peer_alive(a.link, a.peer));
	/* The engine resolving the address afresh (a new AV entry) finds
	 * the same peer, alive again (as after peer_reset). */
	{
		struct lm_link_peer *again = NULL;

		CHECK_INT(udp_link_ops.peer_open(a.link, &b.addr, &again), 0);
		CHECK(again == a.peer);
	}
	CHECK(udp_link_ops.peer_alive(a.link, a.peer));
	/* a's stream to the new b starts again at 0. */
	b2.next = 0;
	for (uint64_t i = 0; i < 10; i++)
		CHECK_INT(send_one(&a, i), 0);
	for (end = lm_now_ms() + WAIT_MS; b2.got < 10 && lm_now_ms() < end;) {
		udp_link_ops.poll(b2.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(b2.got, 10);
	CHECK_INT(b2.bad, 0);
	CHECK_INT(b2.lost, 0);
	end_close(&a);
	end_close(&b2);
}

/* A stray for a previous incarnation: a's first packets named an
 * incarnation of b that b is not.  b drops them and answers; a learns
 * that the b it knew is gone. */
static void stray(void)
{
	struct end b;
	unsigned char buf[256];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = {.sin_family = AF_INET,
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t mlen = sizeof(me);
	struct udp_wire w = {.magic = UDP_MAGIC,
	                     .version = UDP_PROTO_VERSION,
	                     .type = UDP_T_DATA,
	                     .hdr_len = HDR,
	                     .src_inc = 77,
	                     .dst_inc = 12345, /* not b's */
	                     .epoch = 1,
	                     .seq = 1};
	struct lm_rdm_hdr h = {.version = 1, .op = 3, .tag = 0, .data = ~0ull};
	ssize_t n;

	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) ||
	    getsockname(fd, (struct sockaddr *)&me, &mlen) || end_open(&b, "b", NULL)) {
		CHECK(0);
		return;
	}
	memcpy(buf, &w, sizeof(w));
	memcpy(buf + sizeof(w), &h, HDR);
	udp_wire_seal_buf(buf, sizeof(w) + HDR);
	CHECK(sendto(fd, buf, sizeof(w) + HDR, 0, (struct sockaddr *)&b.addr,
	             sizeof(b.addr)) > 0);
	for (int i = 0; i < 1000 && !readable(fd, 1); i++)
		udp_link_ops.poll(b.link, 64);
	CHECK_INT(b.got, 0); /* not delivered */
	n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
	CHECK_INT(n, sizeof(w)); /* the answer: an ACK naming b */
	if (n == sizeof(w)) {
		memcpy(&w, buf, sizeof(w));
		CHECK_INT(w.type, UDP_T_ACK);
		CHECK_INT(w.dst_inc, 77);
		CHECK(w.src_inc != 0 && w.src_inc != 12345);
		CHECK_INT(udp_wire_check(buf, (size_t)n, HDR, b.link->max_payload), 0);
	}
	close(fd);
	end_close(&b);
}

/* A short packet at buf: header s, engine words of h as mask words
 * (0: its non-zero ones), sack if s has UDP_S_SACK, len payload bytes of
 * packet tag; sealed.  Returns its length. */
static size_t short_make(unsigned char *buf, struct udp_short s, const struct lm_rdm_hdr *h,
                         unsigned words, size_t len)
{
	uint64_t w[HDR / 8];
	size_t at = sizeof(s);

	memcpy(w, h, sizeof(w));
	s.words = 0;
	if (s.flags & UDP_S_SACK) {
		memset(buf + at, 0, 8);
		at += 8;
	}
	for (unsigned i = 0; i < HDR / 8; i++)
		if (words ? words >> i & 1 : w[i] != 0) {
			s.words |= (uint8_t)(1u << i);
			memcpy(buf + at, &w[i], 8);
			at += 8;
		}
	s.len = (uint16_t)len;
	for (size_t k = 0; k < len; k++)
		buf[at + k] = byte_of(h->tag, k);
	memcpy(buf, &s, sizeof(s));
	udp_wire_seal_buf(buf, at + len);
	return at + len;
}

/* udp_wire_check on the short form: its length must be what its words,
 * sack and payload make, its flags known, its words within the engine
 * header, and its check must hold over every byte. */
static void short_wire_checks(void)
{
	unsigned char buf[512];
	struct udp_short s = {.magic = UDP_MAGIC, .version = UDP_PROTO_VERSION,
	                      .type = UDP_T_SHORT, .pair = 7, .seq = 1, .ack = 1};
	struct lm_rdm_hdr h = {.version = 1, .op = 3, .size = 16, .tag = 5, .data = ~5ull};
	size_t n = short_make(buf, s, &h, 0, 16);

	CHECK_INT(n, sizeof(s) + 4 * 8 + 16); /* word 0, size, tag, data */
	CHECK_INT(udp_wire_check(buf, n, HDR, 1000), 0);
	CHECK(udp_wire_check(buf, n - 1, HDR, 1000) < 0);
	CHECK(udp_wire_check(buf, n, HDR, 8) < 0); /* beyond max_payload */
	CHECK(udp_wire_check(buf, n, 3 * 8, 1000) < 0); /* word 3 past the header */
	for (size_t at = 0; at < n; at++) {
		buf[at] ^= 0x10;
		CHECK(udp_wire_check(buf, n, HDR, 1000) < 0);
		buf[at] ^= 0x10;
	}
	CHECK_INT(udp_wire_check(buf, n, HDR, 1000), 0);
	s.flags = UDP_S_SACK;
	n = short_make(buf, s, &h, 0, 16);
	CHECK_INT(n, sizeof(s) + 8 + 4 * 8 + 16);
	CHECK_INT(udp_wire_check(buf, n, HDR, 1000), 0);
	s.flags = 2; /* unknown */
	n = short_make(buf, s, &h, 0, 16);
	CHECK(udp_wire_check(buf, n, HDR, 1000) < 0);
	s.flags = 0;
	n = short_make(buf, s, &h, 0xff, 16); /* every word, zeros too */
	CHECK_INT(udp_wire_check(buf, n, HDR, 1000), 0);
	n = short_make(buf, s, &h, 0, UDP_SHORT_MAX + 1);
	CHECK(udp_wire_check(buf, n, HDR, 100000) < 0); /* too long for the form */
	s.version = UDP_PROTO_VERSION - 1;
	n = short_make(buf, s, &h, 0, 16);
	CHECK(udp_wire_check(buf, n, HDR, 1000) < 0);
}

/* Short packets b has no pair for: from a stranger, and from its peer's
 * address (the relay's socket that faces it) with another pair tag, as a
 * previous incarnation's would have.  Each is the next packet b expects,
 * of the right size and bytes, sealed: b must deliver neither, and the
 * real stream goes on, every packet once, intact. */
static void short_strays(void)
{
	struct end a, b;
	struct relay r;
	struct udp_link_counts ca, cb;
	unsigned char buf[512];
	struct udp_short s = {.magic = UDP_MAGIC, .version = UDP_PROTO_VERSION,
	                      .type = UDP_T_SHORT, .pair = 0x5eed};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	uint64_t sa = 0, sb = 0, end, got;
	size_t n;

	if (fd < 0 || end_open(&a, "a", NULL) || end_open(&b, "b", NULL) ||
	    relay_open(&r, &a, &b, (struct mangle){0})) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &r.addr[0], &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &r.addr[1], &b.peer), 0);
	for (int round = 0; round < 2; round++) {
		for (end = lm_now_ms() + WAIT_MS;
		     (a.got < 20 * (round + 1u) || b.got < 20 * (round + 1u)) && lm_now_ms() < end;) {
			if (sa < 20 * (round + 1u) && !send_len(&a, sa, 64))
				sa++;
			if (sb < 20 * (round + 1u) && !send_len(&b, sb, 64))
				sb++;
			relay_run(&r);
			udp_link_ops.poll(a.link, 64);
			udp_link_ops.poll(b.link, 64);
			relay_run(&r);
		}
		if (round)
			break;
		got = b.got;
		{
			struct lm_rdm_hdr h = {.version = 1, .op = 3, .size = 64, .tag = sa,
			                       .data = ~sa};

			s.seq = (uint32_t)(sa + 1);
			s.ack = (uint32_t)(sb + 1);
			n = short_make(buf, s, &h, 0, 64);
		}
		CHECK(sendto(fd, buf, n, 0, (struct sockaddr *)&b.addr, sizeof(b.addr)) > 0);
		CHECK(sendto(r.fd[1], buf, n, 0, (struct sockaddr *)&r.to[1], sizeof(r.to[1])) > 0);
		for (int i = 0; i < 100; i++) {
			udp_link_ops.poll(b.link, 64);
			usleep(100);
		}
		CHECK_INT(b.got, got);
	}
	udp_link_counts(a.link, &ca);
	udp_link_counts(b.link, &cb);
	CHECK_INT(a.got, 40);
	CHECK_INT(b.got, 40);
	CHECK_INT(a.bad + b.bad, 0);
	CHECK_INT(a.lost + b.lost, 0);
	CHECK(ca.shorts > 0 && cb.shorts > 0);
	close(fd);
	relay_close(&r);
	end_close(&a);
	end_close(&b);
}

/* A pair that moved on without a word: a and b talk both ways (small
 * packets go short), then b lets a go (peer_reset: a new epoch toward
 * a, unannounced, as after a failure) and only a sends.  a's short
 * packets name b's old epoch and are dropped; the first sent again goes
 * long, and from then on a sends long until b's next packet tells it
 * the pair as it is, so the stream costs a timeout, not one a packet.
 * After b's packet, a's small packets go short again and arrive. */
static void short_stale_pair(void)
{
	struct end a, b;
	struct udp_link_counts c0, c1, c2;
	uint64_t sa = 0, sb = 0, end;
	const uint64_t n1 = 20, n2 = 520, n3 = 560;

	if (end_open(&a, "a", NULL) || end_open(&b, "b", NULL)) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &b.addr, &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &a.addr, &b.peer), 0);
	for (end = lm_now_ms() + WAIT_MS; (a.got < n1 || b.got < n1) && lm_now_ms() < end;) {
		if (sa < n1 && !send_len(&a, sa, 64))
			sa++;
		if (sb < n1 && !send_len(&b, sb, 64))
			sb++;
		udp_link_ops.poll(a.link, 64);
		udp_link_ops.poll(b.link, 64);
	}
	CHECK_INT(b.got, n1);
	udp_link_counts(a.link, &c0);
	CHECK(c0.shorts > 0);
	udp_link_ops.peer_reset(b.link, b.peer);
	for (end = lm_now_ms() + WAIT_MS; b.got < n2 && lm_now_ms() < end;) {
		if (sa < n2 && !send_len(&a, sa, 64))
			sa++;
		udp_link_ops.poll(b.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(b.got, n2);
	CHECK_INT(b.bad, 0);
	udp_link_counts(a.link, &c1);
	fprintf(stderr, "a stale pair: %llu of %llu delivered, %llu sent again\n",
	        (unsigned long long)(b.got - n1), (unsigned long long)(n2 - n1),
	        (unsigned long long)(c1.resent - c0.resent));
	CHECK(c1.resent - c0.resent <= 64); /* a window's worth, once */
	/* b speaks: a learns b's epoch, and goes short again. */
	for (end = lm_now_ms() + WAIT_MS; a.got < n1 + 1 && lm_now_ms() < end;) {
		if (sb < n1 + 1 && !send_len(&b, sb, 64))
			sb++;
		udp_link_ops.poll(a.link, 64);
		udp_link_ops.poll(b.link, 64);
	}
	CHECK_INT(a.got, n1 + 1);
	for (end = lm_now_ms() + WAIT_MS; b.got < n3 && lm_now_ms() < end;) {
		if (sa < n3 && !send_len(&a, sa, 64))
			sa++;
		udp_link_ops.poll(b.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(b.got, n3);
	CHECK_INT(a.bad + b.bad, 0);
	udp_link_counts(a.link, &c2);
	CHECK(c2.shorts - c1.shorts >= (n3 - n2) / 2);
	end_close(&a);
	end_close(&b);
}

/* udp_wire_check refuses what is malformed. */
static void wire_checks(void)
{
	unsigned char buf[sizeof(struct udp_wire) + HDR + 16];
	struct udp_wire w = {.magic = UDP_MAGIC,
	                     .version = UDP_PROTO_VERSION,
	                     .type = UDP_T_DATA,
	                     .hdr_len = HDR,
	                     .len = 16,
	                     .src_inc = 1,
	                     .epoch = 1,
	                     .seq = 1};
	size_t full = sizeof(buf);
	struct udp_wire v;

#define SEAL(x)                                                                          \
	do {                                                                             \
		memcpy(buf, &(x), sizeof(x));                                            \
		udp_wire_seal_buf(buf, full);                                            \
		memcpy(&(x), buf, sizeof(x));                                            \
	} while (0)
	memset(buf, 0x5a, sizeof(buf));
	SEAL(w);
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), 0);
	CHECK(udp_wire_check(buf, full - 1, HDR, 1000) < 0); /* short */
	CHECK(udp_wire_check(buf, 10, HDR, 1000) < 0);
	CHECK(udp_wire_check(buf, full, HDR, 8) < 0); /* beyond max_payload */
	CHECK(udp_wire_check(buf, full, HDR + 8, 1000) < 0);
	buf[full - 1] ^= 1; /* a payload byte */
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), -FI_EIO);
	buf[full - 1] ^= 1;
	buf[sizeof(w) + 3] ^= 4; /* an engine header byte */
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), -FI_EIO);
	buf[sizeof(w) + 3] ^= 4;
	v = w;
	v.body ^= 1; /* the payload's sum, in the summed header */
	memcpy(buf, &v, sizeof(v));
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), -FI_EIO);
	SEAL(w);
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), 0);
	v = w;
	v.version = UDP_PROTO_VERSION + 1;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.magic = 0;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.type = 9;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.flags = UDP_F_PROBE;
	SEAL(v); /* a flag of ACKs only */
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.seq = 0;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.epoch = 0;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.src_inc = 0;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.type = UDP_T_ACK;
	SEAL(v); /* an ACK carries nothing */
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	/* MEET: no engine header, an offer of at most UDP_MEET_MAX bytes,
	 * one step. */
	v = w;
	v.type = UDP_T_MEET;
	v.flags = UDP_F_HELLO;
	v.hdr_len = 0;
	v.len = HDR + 16;
	SEAL(v);
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), 0);
	v.flags = UDP_F_REPLY;
	SEAL(v);
	CHECK_INT(udp_wire_check(buf, full, HDR, 1000), 0);
	v.flags = UDP_F_CONFIRM; /* carries no offer */
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v.flags = UDP_F_HELLO | UDP_F_REPLY;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v.flags = 0;
	SEAL(v);
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v.flags = UDP_F_HELLO;
	v.hdr_len = HDR;
	v.len = 16;
	SEAL(v); /* an engine header on a MEET */
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	v = w;
	v.flags = UDP_F_HELLO;
	SEAL(v); /* a step on DATA */
	CHECK(udp_wire_check(buf, full, HDR, 1000) < 0);
	{
		unsigned char big[sizeof(struct udp_wire) + UDP_MEET_MAX + 1] = {0};

		v = w;
		v.type = UDP_T_MEET;
		v.flags = UDP_F_HELLO;
		v.hdr_len = 0;
		v.len = UDP_MEET_MAX + 1;
		memcpy(big, &v, sizeof(v));
		udp_wire_seal_buf(big, sizeof(big));
		CHECK(udp_wire_check(big, sizeof(big), HDR, 1000) < 0); /* too long an offer */
	}
#undef SEAL
	short_wire_checks();
}

/* Poll a, b and the relay until done() or WAIT_MS. */
#define POLL_UNTIL(a, b, r, cond)                                                        \
	do {                                                                             \
		uint64_t end_ = lm_now_ms() + WAIT_MS;                                   \
		while (!(cond) && lm_now_ms() < end_) {                                  \
			relay_run(r);                                                    \
			udp_link_ops.poll((a)->link, 64);                                \
			udp_link_ops.poll((b)->link, 64);                                \
			relay_run(r);                                                    \
		}                                                                        \
	} while (0)

/* The meeting through a relay that loses a third of the datagrams: a
 * asks (or both at once), the offers cross, and the asker confirms. */
static void meet(bool both)
{
	static const char oa[] = "offer of a", ob[] = "b's offer, longer";
	struct end a, b;
	struct relay r;

	if (end_open_offer(&a, "a", NULL, oa) || end_open_offer(&b, "b", NULL, ob) ||
	    relay_open(&r, &a, &b, (struct mangle){.drop = 30})) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &r.addr[0], &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_open(b.link, &r.addr[1], &b.peer), 0);
	CHECK_INT(udp_link_ops.peer_connect(a.link, a.peer), 0);
	CHECK_INT(udp_link_ops.peer_connect(a.link, a.peer), 0); /* going: no second HELLO */
	if (both)
		CHECK_INT(udp_link_ops.peer_connect(b.link, b.peer), 0);
	POLL_UNTIL(&a, &b, &r,
	           a.met.n[LM_MET_ANSWER] && b.met.n[LM_MET_CONFIRM] &&
	               (!both || (b.met.n[LM_MET_ANSWER] && a.met.n[LM_MET_CONFIRM])));
	/* b heard a's HELLO and a got b's answer, each once, offers intact. */
	CHECK_INT(b.met.n[LM_MET_HELLO], 1);
	CHECK_INT(a.met.n[LM_MET_ANSWER], 1);
	CHECK_INT(b.met.n[LM_MET_CONFIRM], 1);
	CHECK_INT(a.met.n[LM_MET_HELLO], both ? 1 : 0);
	CHECK_INT(b.met.n[LM_MET_ANSWER], both ? 1 : 0);
	CHECK_INT(a.met.n[LM_MET_CONFIRM], both ? 1 : 0);
	CHECK_INT(a.met.len, strlen(ob));
	CHECK(!strcmp(a.met.offer, ob));
	CHECK(!strcmp(b.met.offer, oa));
	/* Met in this stream: the link says so. */
	CHECK_INT(udp_link_ops.peer_connect(a.link, a.peer), 1);
	/* Data after the meeting flows as before, through the same loss. */
	for (uint64_t i = 0; i < 50; i++)
		while (send_one(&a, i)) {
			relay_run(&r);
			udp_link_ops.poll(a.link, 64);
			udp_link_ops.poll(b.link, 64);
		}
	POLL_UNTIL(&a, &b, &r, b.got == 50);
	CHECK_INT(b.got, 50);
	CHECK_INT(b.bad, 0);
	/* After a reset (the engine let go of the peer) a meets b afresh,
	 * in a stream of its own: b hears a's old one ended. */
	udp_link_ops.peer_reset(a.link, a.peer);
	CHECK_INT(udp_link_ops.peer_connect(a.link, a.peer), 0);
	POLL_UNTIL(&a, &b, &r, a.met.n[LM_MET_ANSWER] == 2 && b.met.n[LM_MET_CONFIRM] == 2);
	CHECK_INT(b.met.n[LM_MET_HELLO], 2);
	CHECK_INT(a.met.n[LM_MET_ANSWER], 2);
	CHECK_INT(b.met.n[LM_MET_CONFIRM], 2);
	CHECK_INT(a.lost, 0);
	CHECK_INT(b.lost, 1);
	relay_close(&r);
	end_close(&a);
	end_close(&b);
}

/* A peer that offers nothing (a link under no link of two) answers with
 * an empty offer, and is not confirmed. */
static void meet_plain(void)
{
	struct end a, c;
	uint64_t end;

	if (end_open_offer(&a, "a", NULL, "a offers") || end_open(&c, "c", NULL)) {
		CHECK(0);
		return;
	}
	CHECK_INT(udp_link_ops.peer_open(a.link, &c.addr, &a.peer), 0);
	CHECK_INT(udp_link_ops.peer_connect(a.link, a.peer), 0);
	for (end = lm_now_ms() + WAIT_MS; !a.met.n[LM_MET_ANSWER] && lm_now_ms() < end;) {
		udp_link_ops.poll(c.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(a.met.n[LM_MET_ANSWER], 1);
	CHECK_INT(a.met.len, 0);
	/* c takes a's packets as any (and nothing meets it above). */
	CHECK_INT(udp_link_ops.peer_open(c.link, &a.addr, &c.peer), 0);
	CHECK_INT(send_one(&a, 0), 0);
	for (end = lm_now_ms() + WAIT_MS; !c.got && lm_now_ms() < end;) {
		udp_link_ops.poll(c.link, 64);
		udp_link_ops.poll(a.link, 64);
	}
	CHECK_INT(c.got, 1);
	CHECK_INT(c.bad, 0);
	end_close(&a);
	end_close(&c);
}

/* CRC-32C: the standard check value, and a long buffer (the interleaved
 * path) whole against the same in pieces of every length (the plain one);
 * the copying variant gives the same sums and the same bytes, from and to
 * any alignment. */
static void crc_checks(void)
{
	static uint8_t big[3 * 65536 + 13], copy[sizeof(big) + 8];
	uint32_t whole, pieces = 0, copied = 0;
	size_t at = 0;

	CHECK_INT(udp_crc32c(0, "123456789", 9), 0xe3069283u);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t len = 1; len < 4096 && at < sizeof(big); len = len * 3 + 1) {
		size_t n = LM_MIN(len, sizeof(big) - at);

		/* the pieces below 3 lanes run the plain loop */
		pieces = udp_crc32c(pieces, big + at, n);
		at += n;
	}
	for (; at < sizeof(big); at += 1000)
		pieces = udp_crc32c(pieces, big + at, LM_MIN(1000, sizeof(big) - at));
	whole = udp_crc32c(0, big, sizeof(big));
	CHECK_INT(whole, pieces);
	/* Around the lengths where the pieces change method, from odd
	 * addresses: whole against pieces of 7 bytes. */
	for (size_t len = 1000; len < 1400; len += 13) {
		uint32_t small = 0;

		for (size_t i = 0; i < len; i += 7)
			small = udp_crc32c(small, big + 11 + i, LM_MIN(7, len - i));
		CHECK_INT(udp_crc32c(0, big + 11, len), small);
		CHECK_INT(udp_crc32c_copy(0, copy + 1, big + 11, len), small);
	}
	CHECK_INT(udp_crc32c_copy(0, copy + 3, big, sizeof(big)), whole);
	CHECK(!memcmp(copy + 3, big, sizeof(big)));
	memset(copy, 0, sizeof(copy));
	at = 0;
	for (size_t len = 0; at < sizeof(big); len = len * 5 + 1) {
		size_t n = LM_MIN(len, sizeof(big) - at);

		copied = udp_crc32c_copy(copied, copy + 5 + at, big + at, n);
		at += n;
	}
	CHECK_INT(copied, whole);
	CHECK(!memcmp(copy + 5, big, sizeof(big)));
	CHECK_INT(copy[4], 0); /* nothing written outside */
	CHECK_INT(copy[5 + sizeof(big)], 0);
	big[100000] ^= 4;
	CHECK(udp_crc32c(0, big, sizeof(big)) != whole);
}

int main(void)
{
	crc_checks();
	wire_checks();
	through("clean", (struct mangle){0});
	through("10% loss", (struct mangle){.drop = 10});
	through("30% loss", (struct mangle){.drop = 30});
	through("duplicated and reordered",
	        (struct mangle){.dup = 10, .reorder = 20});
	through("corrupted", (struct mangle){.corrupt = 10});
	through("everything", (struct mangle){.drop = 5, .dup = 5, .reorder = 10, .corrupt = 5});
	through_as("10% loss, payloads lent", (struct mangle){.drop = 10}, true);
	through_as("everything, payloads lent",
	           (struct mangle){.drop = 5, .dup = 5, .reorder = 10, .corrupt = 5}, true);
	placing("clean", (struct mangle){0});
	placing("everything", (struct mangle){.drop = 5, .dup = 5, .reorder = 10, .corrupt = 10});
	batched("straight", (struct mangle){0}, false);
	batched("10% loss, reordered", (struct mangle){.drop = 10, .reorder = 20}, true);
	restart();
	stray();
	short_strays();
	short_stale_pair();
	meet(false);
	meet(true);
	meet_plain();
	return check_done();
}
