/* link.c - the engine's link over TCP: one listening socket per endpoint,
 * one connection per pair of endpoints made on demand (handshake and
 * framing in proto.h), non-blocking sockets under one epoll set that is
 * also the endpoint's wait descriptor.
 *
 * Sending writes straight to the socket from the caller when nothing is
 * queued before it; what the socket does not take is copied to the
 * connection's output buffer and flushed by progress (bounded: a full
 * buffer is -FI_EAGAIN).  Receiving reads whatever is there into the
 * connection's input buffer and hands out every complete packet. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"

/* Largest engine header taken: the engine's (struct lm_rdm_hdr). */
#define TCP_HDR_MAX 64
_Static_assert(TCP_HDR_MAX >= sizeof(struct lm_rdm_hdr), "the engine's header fits");
/* Smaller payloads are copied out of the input buffer rather than placed:
 * placing one costs a read of its own (a system call), which a copy of a
 * few KiB beats. */
#define PLACE_MIN (16 * 1024)
/* A connection's input buffer: at least one whole packet, rounded up, so
 * that one read also takes many small packets at once. */
#define TCP_IN_CAP (256 * 1024)

_Static_assert(TCP_IN_CAP >= sizeof(struct tcp_frame) + TCP_HDR_MAX + TCP_MAX_PAYLOAD,
               "the input buffer holds a whole packet");
/* Ready sockets one epoll_wait reports (a stack array): more than a poll
 * usually finds ready; the rest wait for the next poll. */
#define EV_BATCH 32
/* First size of a connection's output buffer, doubled as needed: a 64 KiB eager fits. */
#define TCP_OUT_CAP_MIN (64 * 1024)
/* Peers a link's map holds before it first grows: a job's neighbours on a few nodes. */
#define TCP_PEERS_EXPECTED 64
/* The longest address text: "fi_sockaddr_in6://[" an IPv6 address "%" an
 * interface "]:" a port, rounded up. */
#define TCP_ADDR_STR_MAX 128
/* lm_link.inline_max: a few cache lines (unused by the engine without send_words). */
#define TCP_INLINE_MAX 256
/* Keep-alive of an idle connection: probes start after a part of
 * conn_timeout (at least a second), TCP_KEEPALIVE_INTVL_S apart, and
 * TCP_KEEPALIVE_PROBES unanswered end it: a vanished peer is noticed
 * within about conn_timeout (6 s at the default 10 s). */
#define TCP_KEEPALIVE_PARTS   3
#define TCP_KEEPALIVE_INTVL_S 1
#define TCP_KEEPALIVE_PROBES  3
/* A fallback instance when getrandom fails: the clock times 2^32 / the
 * golden ratio, so instances drawn a millisecond apart differ widely. */
#define INSTANCE_MIX 2654435761u
/* How long a send may wait for its acknowledgement before the peer is
 * asked for it (ACK_NOW): longer than a reply takes to come back on a
 * loopback or LAN round trip, so a ping-pong never asks, and far below the
 * 40 ms a receiver's kernel may delay it. */
#define TCP_ACK_NUDGE_US 200
/* Between reads from a peer, how often the kernel is asked whether it
 * acknowledged what a held send wrote (one system call): a fraction of a
 * loopback round trip's worth of polls. */
#define TCP_ACK_LOOK_US 20

enum conn_state {
	CONN_CONNECTING, /* connect() in progress */
	CONN_HELLO_SENT, /* waiting for ACK/NACK */
	CONN_ACCEPTING,  /* accepted, waiting for HELLO */
	CONN_UP,
};

struct tcp_conn {
	struct lm_list node; /* link->conns, or link->dead once closed */
	int fd;
	enum conn_state state;
	bool outgoing;
	bool closed;   /* freed at the end of the poll that may still see it */
	bool want_out; /* EPOLLOUT wanted (registered while in_ep) */
	bool in_ep;    /* in the link's epoll set (see ep_join) */
	struct lm_link_peer *peer;
	uint64_t start_ms;
	unsigned char *in;
	size_t in_len;
	unsigned char *out;
	size_t out_off, out_len, out_cap;
	bool wr_broken; /* a write failed: the peer is gone, read what it left */
	bool ack_now;   /* an ACK_NOW frame was read: acknowledge at once */
	uint64_t rx_count; /* reads that brought bytes */
	/* Bytes read from the socket, where the handshake's ended, and how
	 * many of those after it the peer was last told (RCVD frame). */
	uint64_t rx_bytes, rx_base, rx_told;
	/* A payload being read straight into the engine's buffer
	 * (lm_link_attr.place), and whether the packets are large ones that
	 * are placed so: then a read takes only the next header. */
	bool placing, bulk;
	unsigned char place_hdr[TCP_HDR_MAX];
	struct iovec place_iov[LM_IOV_LIMIT];
	size_t place_cnt, place_len, place_done;
};

struct lm_link_peer {
	struct lm_hnode hnode; /* link->peers, by address */
	struct lm_list node;   /* link->peer_list */
	union lm_inet_addr addr;
	struct tcp_conn *conn; /* the one carrying data (or becoming it) */
	uint64_t instance;     /* the remote endpoint's, once known */
	bool broken;           /* connection lost or refused: peer_alive false */
	bool self;             /* our own address: packets loop back locally */
	/* Positions in the bytes of packets taken for the peer, over all its
	 * connections: taken (written, or in the conn's out buffer), known
	 * acknowledged by the peer (a lower bound), and where conn began. */
	uint64_t taken, acked, base;
	/* Since when a delivered() found the bytes it asked about not yet
	 * acknowledged (0: none waits), and up to where an ACK_NOW asked. */
	uint64_t wait_us, nudged;
	/* When the kernel was last asked about acknowledgements, and
	 * conn->rx_count then. */
	uint64_t look_us, look_rx;
};

/* A packet an endpoint sent to itself, delivered by its next poll. */
struct loop_pkt {
	struct lm_list node;
	size_t len;
	unsigned char data[]; /* engine header, then payload */
};

struct tcp_link {
	struct lm_link link;
	const struct tcp_params *params;
	int epfd, lfd;
	int family; /* AF_INET or AF_INET6: every address of the link's */
	union lm_inet_addr self;
	uint64_t instance;
	size_t hdr_size;
	lm_link_recv_fn recv;
	lm_link_place_fn place;
	lm_link_placed_fn placed;
	void (*on_lost)(void *arg, const void *src_addr); /* lm_link_attr.lost */
	void *arg;
	/* lm_link_attr's offer (carried behind our HELLO or ACK) and met. */
	unsigned char offer[TCP_OFFER_MAX];
	size_t offer_len;
	void (*met)(void *arg, const void *src_addr, const void *offer, size_t len,
	            enum lm_link_met stage);
	void *met_arg;
	struct lm_list conns, dead;
	unsigned outside; /* conns not in the epoll set (ep_join_all's work) */
	struct lm_hmap peers;
	struct lm_list peer_list;
	struct lm_list loop; /* struct loop_pkt, in order */
	int loop_fd;         /* eventfd in the epoll set: loop not empty */
	int tfd;             /* timerfd in the epoll set (wake_after) */
	bool timer_set;      /* tfd started since last drained */
	bool connected;      /* an FI_EP_MSG endpoint's: no listener */
	bool lost;           /* connected: the connection broke */
	bool armed;          /* a reader may sleep on epfd: every conn in it */
	bool sparse;         /* lm_link_attr.sparse_poll: epoll at every poll */
	unsigned polls;      /* poll calls, for the direct-read fast path */
};

/* With this few connections, all up and nothing to flush, a poll reads
 * each socket directly (one system call each) and asks epoll only every
 * EPOLL_EVERY polls (new connections), a connected link never.  Those
 * sockets then leave the epoll set unless the link is armed: a socket in
 * an epoll set costs each arriving segment a callback (measured in
 * docs/PERFORMANCE.md, Findings). */
#define DIRECT_MAX  4
/* A new connection to such a link waits at most this many polls. */
#define EPOLL_EVERY 32

const struct fi_provider *tcp_log_prov;

/* ---- checks ------------------------------------------------------------------ */

int tcp_frame_check(const struct tcp_frame *f, size_t hdr_size, size_t max_payload)
{
	if (f->flags == TCP_FRAME_ACK_NOW || f->flags == TCP_FRAME_CONFIRM)
		return f->len || f->hdr_len ? -FI_EINVAL : 0;
	if (f->flags == TCP_FRAME_RCVD)
		return f->len != sizeof(uint64_t) || f->hdr_len ? -FI_EINVAL : 0;
	if (f->hdr_len != hdr_size || f->len > max_payload || f->flags)
		return -FI_EINVAL;
	return 0;
}

int tcp_cm_check(const struct tcp_cm_msg *m)
{
	if (m->magic != TCP_MAGIC)
		return -FI_EINVAL;
	if (m->version != TCP_PROTO_VERSION)
		return -FI_ENOPROTOOPT;
	if (m->kind < TCP_CM_REQ || m->kind > TCP_CM_REJECT || m->pad ||
	    m->data_len > TCP_CM_DATA_MAX)
		return -FI_EINVAL;
	return 0;
}

int tcp_hello_check(const struct tcp_hello *h, uint32_t want_kind)
{
	if (h->magic != TCP_MAGIC)
		return -FI_EINVAL;
	if (h->version != TCP_PROTO_VERSION)
		return -FI_ENOPROTOOPT;
	if (h->kind != want_kind || h->offer_len > TCP_OFFER_MAX)
		return -FI_EINVAL;
	if (h->kind != TCP_HELLO_NACK && h->addrlen != sizeof(struct sockaddr_in) &&
	    h->addrlen != sizeof(struct sockaddr_in6))
		return -FI_EINVAL;
	return 0;
}

/* ---- helpers --------------------------------------------------------------- */

static uint64_t addr_hash(const union lm_inet_addr *a)
{
	return lm_hash_bytes(a, sizeof(*a));
}

static void conn_close(struct tcp_link *l, struct tcp_conn *c, bool broken);
static void acked_update(struct lm_link_peer *p, struct tcp_conn *c);

/* Put c in the epoll set (or update its events there): 0 or -FI_EIO. */
static int ep_join(struct tcp_link *l, struct tcp_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0),
	                         .data.ptr = c};

	if (epoll_ctl(l->epfd, c->in_ep ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev))
		return -FI_EIO;
	if (!c->in_ep)
		l->outside--;
	c->in_ep = true;
	return 0;
}

static void ep_leave(struct tcp_link *l, struct tcp_conn *c)
{
	if (c->in_ep) {
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		l->outside++;
	}
	c->in_ep = false;
}

/* Every open connection in the epoll set: before epoll is asked about
 * them, and before a reader sleeps. */
static void ep_join_all(struct tcp_link *l)
{
	struct lm_list *it, *tmp;

	/* Polls with many connections come here each time: walk them only
	 * when one is out (a walk of a thousand cost a ping-pong 3.9x). */
	if (!l->outside)
		return;
	lm_list_foreach_safe(&l->conns, it, tmp)
	{
		struct tcp_conn *c = lm_container_of(it, struct tcp_conn, node);

		if (!c->in_ep && ep_join(l, c))
			conn_close(l, c, true);
	}
}

static void ev_set(struct tcp_link *l, struct tcp_conn *c, bool out)
{
	if (c->want_out == out)
		return;
	c->want_out = out;
	if (ep_join(l, c))
		conn_close(l, c, true);
}

/* A write to c failed: the peer closed or reset the connection.  Nothing
 * more goes out, but what it sent before is still in the socket, and the
 * receives it matches must get it: the read that meets the connection's
 * end closes c (and tells the engine); until then the peer is broken. */
static void conn_write_failed(struct tcp_link *l, struct tcp_conn *c)
{
	if (c->peer && c->peer->conn == c) {
		acked_update(c->peer, c);
		c->peer->base = c->peer->taken; /* c->out's bytes are lost */
	}
	c->wr_broken = true;
	c->out_len = c->out_off = 0;
	if (c->peer)
		c->peer->broken = true;
	ev_set(l, c, false);
}

static struct tcp_conn *conn_new(struct tcp_link *l, int fd, enum conn_state st,
                                 bool outgoing)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->in = malloc(TCP_IN_CAP);
	if (!c->in) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->state = st;
	c->outgoing = outgoing;
	c->start_ms = lm_now_ms();
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Fixed buffers, larger than autotuning starts with: a stream of
	 * 64 KiB..1 MiB messages keeps its pace from the first message (the
	 * kernel caps them at net.core.[rw]mem_max). */
	if (l->params->sockbuf > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &l->params->sockbuf,
		           sizeof(l->params->sockbuf));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &l->params->sockbuf,
		           sizeof(l->params->sockbuf));
	}
	/* A peer that vanishes without a FIN or RST (a host down, a link
	 * cut) is noticed within about conn_timeout: unacknowledged data
	 * times out (TCP_USER_TIMEOUT), an idle connection is probed. */
	{
		unsigned int tmo = (unsigned int)l->params->conn_timeout_ms;
		int idle = l->params->conn_timeout_ms / (1000 * TCP_KEEPALIVE_PARTS),
		    intvl = TCP_KEEPALIVE_INTVL_S, cnt = TCP_KEEPALIVE_PROBES;

		if (idle < 1)
			idle = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &tmo, sizeof(tmo));
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	c->want_out = st == CONN_CONNECTING;
	l->outside++; /* counted from here as one of l->conns */
	if (ep_join(l, c)) {
		l->outside--;
		free(c->in);
		free(c);
		return NULL;
	}
	lm_list_push_back(&l->conns, &c->node);
	return c;
}

/* Close c; its peer (if c carried its data) is broken until reset.  The
 * memory stays until conns_reap: an event batch, or a packet being
 * delivered from c->in, may still point at it. */
static void conn_close(struct tcp_link *l, struct tcp_conn *c, bool broken)
{
	if (c->closed)
		return;
	c->closed = true;
	if (c->peer && c->peer->conn == c) {
		/* The peer's data connection: what it acknowledged arrived,
		 * the rest is gone; a next connection starts after it. */
		if (c->state == CONN_UP && !c->wr_broken)
			acked_update(c->peer, c);
		c->peer->base = c->peer->taken;
		if (c->state == CONN_UP && l->on_lost)
			l->on_lost(l->arg, &c->peer->addr);
		c->peer->conn = NULL;
		if (broken)
			c->peer->broken = true;
		if (l->connected)
			l->lost = true;
	}
	ep_leave(l, c);
	l->outside--; /* it leaves l->conns */
	close(c->fd);
	lm_list_remove(&c->node);
	lm_list_push_back(&l->dead, &c->node);
}

static void conns_reap(struct tcp_link *l)
{
	struct lm_list *it;

	while ((it = lm_list_pop_front(&l->dead))) {
		struct tcp_conn *c = lm_container_of(it, struct tcp_conn, node);

		free(c->in);
		free(c->out);
		free(c);
	}
}

static struct lm_link_peer *peer_find(struct tcp_link *l, const union lm_inet_addr *a)
{
	struct lm_hnode *n = lm_hmap_find(&l->peers, addr_hash(a));

	for (; n; n = lm_hmap_find_next(n)) {
		struct lm_link_peer *p = lm_container_of(n, struct lm_link_peer, hnode);

		if (!memcmp(&p->addr, a, sizeof(*a)))
			return p;
	}
	return NULL;
}

/* a is normalized (lm_inet_load). */
static struct lm_link_peer *peer_get(struct tcp_link *l, const union lm_inet_addr *a)
{
	struct lm_link_peer *p = peer_find(l, a);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->addr = *a;
	p->self = !memcmp(&p->addr, &l->self, sizeof(p->addr));
	lm_hmap_insert(&l->peers, &p->hnode, addr_hash(&p->addr));
	lm_list_push_back(&l->peer_list, &p->node);
	return p;
}

static void hello_fill(struct tcp_link *l, struct tcp_hello *h, uint32_t kind,
                       uint32_t status)
{
	memset(h, 0, sizeof(*h));
	h->magic = TCP_MAGIC;
	h->version = TCP_PROTO_VERSION;
	h->kind = kind;
	h->instance = l->instance;
	h->status = status;
	h->addrlen = lm_inet_len(l->family);
	memcpy(h->addr, &l->self, h->addrlen);
}

/* A handshake message is small: the socket of a fresh connection takes it
 * whole or the connection is not worth keeping.  A HELLO or ACK carries
 * our offer behind it. */
static int hello_send(struct tcp_link *l, struct tcp_conn *c, uint32_t kind,
                      uint32_t status)
{
	struct tcp_hello h;
	struct iovec iov[2] = {{&h, sizeof(h)}, {l->offer, 0}};

	hello_fill(l, &h, kind, status);
	if (kind != TCP_HELLO_NACK) {
		h.offer_len = (uint32_t)l->offer_len;
		iov[1].iov_len = l->offer_len;
	}
	return sendmsg(c->fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = 2},
	               MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + iov[1].iov_len)
	           ? 0
	           : -FI_EIO;
}

/* Queue what the socket did not take (bytes from offset skip of the
 * gathered iov). */
static int out_append(struct tcp_conn *c, const struct iovec *iov, size_t n, size_t skip)
{
	size_t need = lm_iov_len(iov, n) - skip;

	if (c->out_off && c->out_off + c->out_len + need > c->out_cap) {
		memmove(c->out, c->out + c->out_off, c->out_len);
		c->out_off = 0;
	}
	if (c->out_len + need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : TCP_OUT_CAP_MIN;
		unsigned char *b;

		while (cap < c->out_len + need)
			cap *= 2;
		b = realloc(c->out, cap);
		if (!b)
			return -FI_ENOMEM;
		c->out = b;
		c->out_cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = iov[i].iov_len;
		const char *base = iov[i].iov_base;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		memcpy(c->out + c->out_off + c->out_len, base + skip, len - skip);
		c->out_len += len - skip;
		skip = 0;
	}
	return 0;
}

/* Write queued bytes; 0, or -FI_EIO when the connection failed. */
static int out_flush(struct tcp_link *l, struct tcp_conn *c)
{
	while (c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (tcp_conn_gone(n))
				return -FI_EIO;
			if (errno == EINTR)
				continue;
			break;
		}
		c->out_off += (size_t)n;
		c->out_len -= (size_t)n;
	}
	if (!c->out_len)
		c->out_off = 0;
	ev_set(l, c, c->out_len != 0);
	return 0;
}

/* ---- connecting ------------------------------------------------------------ */

static int conn_start(struct tcp_link *l, struct lm_link_peer *p)
{
	int fd = socket(l->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct tcp_conn *c;

	if (fd < 0)
		return lm_neg_errno(errno);
	if (connect(fd, &p->addr.sa, lm_inet_len(l->family)) &&
	    errno != EINPROGRESS) {
		LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL, "connect: %s\n", strerror(errno));
		close(fd);
		p->broken = true;
		return -FI_EIO;
	}
	c = conn_new(l, fd, CONN_CONNECTING, true);
	if (!c) {
		close(fd);
		return -FI_ENOMEM;
	}
	c->peer = p;
	p->conn = c;
	return 0;
}

/* connect() finished: send our HELLO. */
static void on_connected(struct tcp_link *l, struct tcp_conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err || hello_send(l, c, TCP_HELLO_RDM, 0)) {
		LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL, "connection failed: %s\n",
		        strerror(err ? err : EIO));
		conn_close(l, c, true);
		return;
	}
	c->state = CONN_HELLO_SENT;
	ev_set(l, c, false);
}

/* Does the connection opened by a win over one opened by b? */
static bool opener_wins(const union lm_inet_addr *a, const union lm_inet_addr *b)
{
	return memcmp(a, b, sizeof(*a)) < 0;
}

/* A HELLO arrived on an accepted connection, offer behind it. */
static void on_hello(struct tcp_link *l, struct tcp_conn *c, const struct tcp_hello *h,
                     const void *offer)
{
	union lm_inet_addr from;
	struct lm_link_peer *p;
	int ret = tcp_hello_check(h, TCP_HELLO_RDM);

	/* The peer's listening address, of our family. */
	if (!ret && lm_inet_load(&from, h->addr, h->addrlen, l->family))
		ret = -FI_EINVAL;
	if (ret) {
		LM_WARN(tcp_log_prov, FI_LOG_EP_CTRL,
		        "refusing a connection: %s (magic 0x%llx, version %u, kind %u)\n",
		        fi_strerror(-ret), (unsigned long long)h->magic, h->version,
		        h->kind);
		if (h->magic == TCP_MAGIC)
			hello_send(l, c, TCP_HELLO_NACK,
			           ret == -FI_ENOPROTOOPT ? TCP_NACK_VERSION
			                                  : TCP_NACK_KIND);
		conn_close(l, c, false);
		return;
	}
	if (!memcmp(&from, &l->self, sizeof(from))) {
		/* Our own address: we never connect to ourselves (those
		 * packets loop back in-process), so this is not us. */
		LM_WARN(tcp_log_prov, FI_LOG_EP_CTRL,
		        "refusing a connection that claims this endpoint's address\n");
		hello_send(l, c, TCP_HELLO_NACK, TCP_NACK_KIND);
		conn_close(l, c, false);
		return;
	}
	p = peer_get(l, &from);
	if (!p) {
		conn_close(l, c, false);
		return;
	}
	if (p->conn && p->instance && p->instance != h->instance) {
		/* The peer restarted: what we had with it is lost. */
		LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL, "peer restarted\n");
		conn_close(l, p->conn, true);
	} else if (p->conn &&
	           (p->conn->state == CONN_UP || opener_wins(&l->self, &from))) {
		hello_send(l, c, TCP_HELLO_NACK, TCP_NACK_DUP);
		conn_close(l, c, false);
		return;
	} else if (p->conn) {
		/* Both connected at once and theirs wins: drop ours, which
		 * carried nothing yet. */
		conn_close(l, p->conn, false);
	}
	if (hello_send(l, c, TCP_HELLO_ACK, 0)) {
		conn_close(l, c, false);
		return;
	}
	p->instance = h->instance;
	p->conn = c;
	p->broken = false;
	c->peer = p;
	c->state = CONN_UP;
	/* After the ACK: the peer uses our offer only once it has read it,
	 * which it answers with CONFIRM. */
	if (l->met)
		l->met(l->met_arg, &p->addr, offer, h->offer_len, LM_MET_HELLO);
}

/* One frame of the link's own (no packet) behind whatever waits to be
 * written to c; 0, or -FI_EIO when c failed. */
static int frame_send(struct tcp_link *l, struct tcp_conn *c, uint16_t flags)
{
	struct tcp_frame f = {.flags = flags};

	if (out_append(c, &(struct iovec){&f, sizeof(f)}, 1, 0))
		return -FI_EIO;
	c->peer->taken += sizeof(f); /* stream positions count every byte */
	return out_flush(l, c);
}

/* ACK or NACK to our HELLO, offer behind an ACK. */
static void on_answer(struct tcp_link *l, struct tcp_conn *c, const struct tcp_hello *h,
                      const void *offer)
{
	struct lm_link_peer *p = c->peer;

	if (h->magic == TCP_MAGIC && h->version == TCP_PROTO_VERSION &&
	    h->kind == TCP_HELLO_NACK && h->status == TCP_NACK_DUP) {
		conn_close(l, c, false); /* theirs carries the data */
		return;
	}
	if (tcp_hello_check(h, TCP_HELLO_ACK)) {
		LM_WARN(tcp_log_prov, FI_LOG_EP_CTRL,
		        "connection refused by peer (magic 0x%llx, version %u, kind %u, "
		        "status %u)\n",
		        (unsigned long long)h->magic, h->version, h->kind, h->status);
		conn_close(l, c, true);
		return;
	}
	if (p->instance && p->instance != h->instance)
		LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL, "peer restarted\n");
	p->instance = h->instance;
	c->state = CONN_UP;
	p->broken = false;
	if (l->met)
		l->met(l->met_arg, &p->addr, offer, h->offer_len, LM_MET_ANSWER);
	if (l->offer_len && h->offer_len && frame_send(l, c, TCP_FRAME_CONFIRM))
		conn_close(l, c, true);
}

/* ---- receiving --------------------------------------------------------------- */

/* Go on reading a placed payload: 1 when it is complete (and handed to
 * the engine), 0 when the socket has no more for now, -1 when c closed. */
static int place_continue(struct tcp_link *l, struct tcp_conn *c)
{
	while (c->place_done < c->place_len) {
		struct iovec iov[LM_IOV_LIMIT + 1];
		size_t left = c->place_len - c->place_done;
		size_t cnt = lm_rdm_iov_slice(c->place_iov, c->place_cnt, c->place_done,
		                              left, iov);
		ssize_t n;

		/* The next frame's header in the same call, into the input
		 * buffer (empty while placing): one system call per frame
		 * instead of two when a stream of placed frames comes. */
		if (!c->in_len) {
			iov[cnt].iov_base = c->in;
			iov[cnt].iov_len = sizeof(struct tcp_frame) + l->hdr_size;
			cnt++;
		}
		n = readv(c->fd, iov, (int)cnt);

		if (tcp_conn_gone(n)) {
			LM_INFO(tcp_log_prov, FI_LOG_EP_DATA,
			        "connection closed by peer\n");
			conn_close(l, c, true);
			return -1;
		}
		if (n < 0)
			return errno == EINTR ? place_continue(l, c) : 0;
		if ((size_t)n > left) {
			c->in_len = (size_t)n - left;
			n = (ssize_t)left;
		}
		c->place_done += (size_t)n;
		c->rx_count++;
		c->rx_bytes += (uint64_t)n;
	}
	c->placing = false;
	l->placed(l->arg, &c->peer->addr, c->place_hdr, c->place_len);
	return 1;
}

/* The peer has read v bytes of what we wrote on c (its RCVD frame): those
 * are safe in its process, whatever happens to ours.  A peer claiming
 * more than we wrote is held to what we wrote. */
static void rcvd(struct tcp_conn *c, uint64_t v)
{
	struct lm_link_peer *p = c->peer;

	if (!p || p->conn != c)
		return;
	if (v > p->taken - p->base)
		v = p->taken - p->base;
	if (p->base + v > p->acked)
		p->acked = p->base + v;
}

/* The peer waits for our acknowledgement of what it sent: send it now
 * (whatever our kernel's delayed-ACK state), once the frames read are
 * taken. */
static void ack_now(struct tcp_conn *c)
{
	int one = 1;

	c->ack_now = false;
	setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/* Handshake messages at the front of c's input, from *off on, until the
 * connection is up or the next one is not whole: -1 when c was closed. */
static int conn_handshake(struct tcp_link *l, struct tcp_conn *c, size_t *off)
{
	while (c->state != CONN_UP) {
		struct tcp_hello h;
		const unsigned char *offer;

		if (c->in_len - *off < sizeof(h))
			break;
		memcpy(&h, c->in + *off, sizeof(h));
		/* An offer too long for us is refused by the checks below,
		 * before anything waits for its bytes. */
		if (h.offer_len <= TCP_OFFER_MAX && c->in_len - *off < sizeof(h) + h.offer_len)
			break;
		offer = c->in + *off + sizeof(h);
		*off += sizeof(h) + (h.offer_len <= TCP_OFFER_MAX ? h.offer_len : 0);
		if (c->state == CONN_ACCEPTING)
			on_hello(l, c, &h, offer);
		else
			on_answer(l, c, &h, offer);
		if (c->closed)
			return -1;
		if (c->state == CONN_UP) /* the stream of frames starts */
			c->rx_base = c->rx_bytes - (c->in_len - *off);
	}
	return 0;
}

/* Part of a large payload is in (have of its f->len bytes, behind hdr):
 * read the rest straight into its buffer when the engine has one, and
 * then all of the input (*off) is taken.  -1 when c was closed. */
static LM_HOT_INLINE int place_start(struct tcp_link *l, struct tcp_conn *c,
                                     const struct tcp_frame *f, const unsigned char *hdr,
                                     size_t have, size_t *off)
{
	c->place_cnt = f->len >= PLACE_MIN && l->place
	                   ? l->place(l->arg, &c->peer->addr, hdr, f->len, c->place_iov)
	                   : 0;
	/* The engine may answer from place (CTS) and find c broken. */
	if (c->closed)
		return -1;
	if (c->place_cnt) {
		memcpy(c->place_hdr, hdr, f->hdr_len);
		lm_copy_to_iov(c->place_iov, c->place_cnt, 0, hdr + f->hdr_len, have);
		c->place_len = f->len;
		c->place_done = have;
		c->placing = true;
		c->bulk = true;
		*off = c->in_len;
	} else {
		c->bulk = false;
	}
	return 0;
}

/* Hand out the whole packets in c's input from *off on, counting them in
 * *delivered, and take the link's own frames: 0 to read on, -1 when c was
 * closed, 1 when the engine found c broken after taking a packet. */
static LM_HOT_INLINE int conn_frames(struct tcp_link *l, struct tcp_conn *c, size_t *off,
                                     int *delivered)
{
	const size_t fh = sizeof(struct tcp_frame);

	while (c->state == CONN_UP && c->in_len - *off >= fh) {
		struct tcp_frame f;
		size_t whole, have;
		const unsigned char *hdr = c->in + *off + fh;

		memcpy(&f, c->in + *off, fh);
		if (tcp_frame_check(&f, l->hdr_size, l->link.max_payload)) {
			LM_WARN(tcp_log_prov, FI_LOG_EP_DATA,
			        "malformed frame (len %u, header %u, flags %u): "
			        "closing the connection\n",
			        f.len, f.hdr_len, f.flags);
			conn_close(l, c, true);
			return -1;
		}
		if (f.flags == TCP_FRAME_ACK_NOW) {
			*off += fh;
			c->ack_now = true;
			continue;
		}
		if (f.flags == TCP_FRAME_CONFIRM) {
			*off += fh;
			if (l->met)
				l->met(l->met_arg, &c->peer->addr, NULL, 0, LM_MET_CONFIRM);
			continue;
		}
		if (f.flags == TCP_FRAME_RCVD) {
			uint64_t v;

			if (c->in_len - *off < fh + sizeof(v))
				break;
			memcpy(&v, c->in + *off + fh, sizeof(v));
			*off += fh + sizeof(v);
			rcvd(c, v);
			continue;
		}
		whole = fh + f.hdr_len + f.len;
		if (c->in_len - *off < fh + f.hdr_len)
			break;
		have = c->in_len - *off - fh - f.hdr_len;
		if (have < f.len)
			return place_start(l, c, &f, hdr, have, off);
		c->bulk = c->bulk && f.len >= PLACE_MIN;
		l->recv(l->arg, &c->peer->addr, hdr, hdr + f.hdr_len, f.len);
		*off += whole;
		(*delivered)++;
		/* The engine may have answered through c and found it
		 * broken: its memory stays until conns_reap. */
		if (c->closed)
			return 1;
	}
	return 0;
}

/* Drop the first off bytes of c's input: they were taken. */
static LM_HOT_INLINE void in_consume(struct tcp_conn *c, size_t off)
{
	if (off == c->in_len) {
		c->in_len = 0; /* the common case: all of it taken */
	} else if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
}

/* Read and hand out packets; returns packets delivered, or -1 when c was
 * closed. */
static int conn_read(struct tcp_link *l, struct tcp_conn *c, int budget)
{
	const size_t fh = sizeof(struct tcp_frame);
	int delivered = 0;

	for (;;) {
		size_t off = 0, want;
		ssize_t n;
		bool fresh = false; /* bytes came with a placed payload */
		int r;

		if (c->placing) {
			r = place_continue(l, c);
			if (r <= 0)
				return r < 0 ? -1 : delivered;
			if (c->closed)
				return delivered;
			/* Bytes that came with the payload are parsed before
			 * returning, whatever the budget: no event would bring
			 * this connection back if nothing else arrives. */
			fresh = c->in_len > 0;
			if (++delivered >= budget && !fresh)
				return delivered;
		}
		if (fresh) {
			/* Look at that header before reading on: its payload
			 * may be placed too. */
			n = 0;
			want = 0;
		} else {
			/* Behind a placed payload, likely another: take its
			 * header alone so that its payload can be placed too. */
			want = c->bulk && c->state == CONN_UP && c->in_len < fh + l->hdr_size
			           ? fh + l->hdr_size - c->in_len
			           : TCP_IN_CAP - c->in_len;
			n = recv(c->fd, c->in + c->in_len, want, MSG_DONTWAIT);
			if (tcp_conn_gone(n)) {
				if (c->state == CONN_UP)
					LM_INFO(tcp_log_prov, FI_LOG_EP_DATA,
					        "connection closed by peer\n");
				conn_close(l, c, true);
				return -1;
			}
			if (n < 0)
				return delivered;
			c->in_len += (size_t)n;
			c->rx_count++;
			c->rx_bytes += (uint64_t)n;
		}
		if (c->state != CONN_UP && conn_handshake(l, c, &off))
			return -1;
		r = conn_frames(l, c, &off, &delivered);
		if (r)
			return r < 0 ? -1 : delivered;
		if (c->ack_now)
			ack_now(c);
		in_consume(c, off);
		if (delivered >= budget)
			return delivered;
		if (!c->placing && want && (size_t)n < want)
			return delivered; /* drained */
	}
}

static void on_accept(struct tcp_link *l)
{
	for (;;) {
		int fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (!conn_new(l, fd, CONN_ACCEPTING, false))
			close(fd);
	}
}

/* ---- link ops -------------------------------------------------------------- */

static int loop_send(struct tcp_link *l, const void *hdr, const struct iovec *iov,
                     size_t iov_count, size_t len)
{
	struct loop_pkt *k = malloc(sizeof(*k) + l->hdr_size + len);
	size_t off = l->hdr_size;

	if (!k)
		return -FI_EAGAIN;
	k->len = len;
	memcpy(k->data, hdr, l->hdr_size);
	for (size_t i = 0; i < iov_count; i++) {
		if (iov[i].iov_len) /* its base may be NULL */
			memcpy(k->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	/* Wakes a reader about to sleep on the epoll set. */
	if (lm_list_empty(&l->loop))
		lm_fd_signal(l->loop_fd);
	lm_list_push_back(&l->loop, &k->node);
	return 0;
}

/* Stop wake_after's timer and clear its expiry, so that the
 * level-triggered set does not report it again. */
static void timer_drain(struct tcp_link *l)
{
	struct itimerspec off = {0};

	timerfd_settime(l->tfd, 0, &off, NULL);
	lm_fd_drain(l->tfd);
	l->timer_set = false;
}

static int loop_deliver(struct tcp_link *l, int budget)
{
	struct lm_list *it;
	int n = 0;

	while (n < budget && (it = lm_list_pop_front(&l->loop))) {
		struct loop_pkt *k = lm_container_of(it, struct loop_pkt, node);

		l->recv(l->arg, &l->self, k->data, k->data + l->hdr_size, k->len);
		free(k);
		n++;
	}
	if (lm_list_empty(&l->loop))
		lm_fd_drain(l->loop_fd);
	return n;
}

/* The connections a poll reads directly (see DIRECT_MAX): how many, or
 * -1 when epoll must be asked about them. */
static int direct_conns(struct tcp_link *l, struct tcp_conn **direct)
{
	struct lm_list *it;
	int n = 0;

	lm_list_foreach(&l->conns, it)
	{
		struct tcp_conn *c = lm_container_of(it, struct tcp_conn, node);

		if (n == DIRECT_MAX || c->state != CONN_UP || c->want_out)
			return -1;
		direct[n++] = c;
	}
	return n;
}

static int direct_read(struct tcp_link *l, struct tcp_conn **direct, int n, int budget)
{
	int done = 0;

	for (int i = 0; i < n && done < budget; i++) {
		int r = direct[i]->closed || direct[i]->in_ep
		            ? 0
		            : conn_read(l, direct[i], budget - done);

		if (r > 0)
			done += r;
	}
	return done;
}

static int tcp_link_poll(struct lm_link *link, int budget)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	struct epoll_event ev[EV_BATCH];
	int done = lm_list_empty(&l->loop) ? 0 : loop_deliver(l, budget);
	struct tcp_conn *direct[DIRECT_MAX];
	int n = direct_conns(l, direct), k;

	if (n > 0 && !l->armed) {
		for (int i = 0; i < n; i++)
			ep_leave(l, direct[i]);
		/* A connected link has no listener: nothing for epoll. */
		if (l->connected || (!l->sparse && ++l->polls % EPOLL_EVERY)) {
			done += direct_read(l, direct, n, budget - done);
			conns_reap(l);
			return done < budget ? done : budget;
		}
	} else if (n < 0) {
		ep_join_all(l);
	}
	/* The listener, the loop's eventfd, and the connections in the set. */
	k = epoll_wait(l->epfd, ev, EV_BATCH, 0);
	for (int i = 0; i < k; i++) {
		struct tcp_conn *c = ev[i].data.ptr;

		if (!c) {
			on_accept(l);
			continue;
		}
		if (ev[i].data.ptr == (void *)&l->loop)
			continue; /* drained by loop_deliver */
		if (ev[i].data.ptr == (void *)&l->tfd) {
			timer_drain(l);
			continue;
		}
		/* An earlier event of this batch may have closed c. */
		if (c->closed)
			continue;
		if (ev[i].events & EPOLLOUT) {
			if (c->state == CONN_CONNECTING) {
				on_connected(l, c);
				continue;
			}
			if (out_flush(l, c))
				conn_write_failed(l, c);
		}
		if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
			int r = conn_read(l, c, budget - done);

			if (r > 0)
				done += r;
		}
	}
	/* Those outside the set are read directly. */
	if (n > 0 && done < budget)
		done += direct_read(l, direct, n, budget - done);
	conns_reap(l);
	return done < budget ? done : budget;
}

/* Packets one send_many writes with one system call: as many as the
 * engine hands at once (LM_STREAM_BATCH, progress.c), over a megabyte of
 * 192 KiB frames, where loopback streams ran about twice as fast as with
 * a call per frame. */
#define TCP_BATCH_MAX 8
/* Writes up to this many bytes are copied into one buffer first: the
 * kernel takes a few pieces (frame, header, payload) about 0.2 us slower
 * than one buffer, more than copying up to a page costs. */
#define TCP_GATHER_MAX 4096

/* The packets of one send_pkts write as iovecs, and where each lies in them. */
struct send_batch {
	struct iovec v[TCP_BATCH_MAX * (2 + LM_IOV_LIMIT) + 1];
	struct tcp_frame f[TCP_BATCH_MAX];
	struct tcp_rcvd told; /* in front of packet 0 when telling */
	bool telling;
	size_t first[TCP_BATCH_MAX + 1]; /* packet k's first iovec */
	size_t size[TCP_BATCH_MAX];      /* packet k's bytes */
	size_t nv, total;
};

/* The payload bytes of pkt. */
static LM_HOT_INLINE size_t pkt_len(const struct lm_link_pkt *pkt)
{
	size_t len = 0;

	for (size_t i = 0; i < pkt->iov_count; i++)
		len += pkt->iov[i].iov_len;
	return len;
}

/* Packets to ourselves, queued for our next poll: how many were taken, or
 * the error of the first. */
static LM_HOT_INLINE ssize_t send_self(struct tcp_link *l, const struct lm_link_pkt *pkts,
                                       size_t count)
{
	for (size_t k = 0; k < count; k++) {
		size_t len = pkt_len(&pkts[k]);
		int ret;

		ret = len > l->link.max_payload ? -FI_EMSGSIZE
		                                : loop_send(l, pkts[k].hdr, pkts[k].iov,
		                                            pkts[k].iov_count, len);
		if (ret)
			return k ? (ssize_t)k : ret;
	}
	return (ssize_t)count;
}

/* Start b empty but for what we read of c's peer's bytes since we last
 * said: a RCVD frame in front of the first packet (and part of it, should
 * the write stop inside). */
static LM_HOT_INLINE void batch_start(struct send_batch *b, const struct tcp_conn *c)
{
	b->nv = 0;
	b->total = 0;
	b->telling = false;
	memset(b->size, 0, sizeof(b->size));
	if (c->rx_bytes - c->rx_base > c->rx_told) {
		b->told = (struct tcp_rcvd){
		    .f = {.len = sizeof(b->told.bytes), .flags = TCP_FRAME_RCVD},
		    .bytes = c->rx_bytes - c->rx_base};
		b->v[b->nv].iov_base = &b->told;
		b->v[b->nv++].iov_len = sizeof(b->told);
		b->size[0] = sizeof(b->told);
		b->total = sizeof(b->told);
		b->telling = true;
	}
}

/* Frame pkts[0..count) into b: -FI_EINVAL or -FI_EMSGSIZE for a packet the
 * link cannot take, else 0. */
static LM_HOT_INLINE int batch_add(struct send_batch *b, const struct tcp_link *l,
                                   const struct lm_link_pkt *pkts, size_t count)
{
	size_t nv = b->nv, total = b->total;

	for (size_t k = 0; k < count; k++) {
		size_t len;

		if (pkts[k].iov_count > LM_IOV_LIMIT)
			return -FI_EINVAL;
		len = pkt_len(&pkts[k]);
		if (len > l->link.max_payload)
			return -FI_EMSGSIZE;
		b->f[k] = (struct tcp_frame){.len = (uint32_t)len,
		                             .hdr_len = (uint16_t)l->hdr_size};
		/* Packet 0 starts with the RCVD frame, if any. */
		b->first[k] = k ? nv : 0;
		b->v[nv].iov_base = &b->f[k];
		b->v[nv++].iov_len = sizeof(b->f[k]);
		b->v[nv].iov_base = (void *)pkts[k].hdr;
		b->v[nv++].iov_len = l->hdr_size;
		if (pkts[k].iov_count) /* an empty payload's iov may be NULL */
			memcpy(b->v + nv, pkts[k].iov, pkts[k].iov_count * sizeof(*b->v));
		nv += pkts[k].iov_count;
		b->size[k] += sizeof(b->f[k]) + l->hdr_size + len;
		total += sizeof(b->f[k]) + l->hdr_size + len;
	}
	b->first[count] = nv;
	b->nv = nv;
	b->total = total;
	return 0;
}

/* At most one packet waits in the output buffer: its rest, after a
 * partial write, which goes first.  Behind it, the engine keeps its
 * packets queued (-FI_EAGAIN) rather than this link copying them.  0 when
 * c may be written now. */
static LM_HOT_INLINE int out_clear(struct tcp_link *l, struct tcp_conn *c)
{
	if (c->wr_broken)
		return -FI_EIO;
	if (c->out_len) {
		if (out_flush(l, c)) {
			conn_write_failed(l, c);
			return -FI_EIO;
		}
		if (c->out_len)
			return -FI_EAGAIN;
	}
	return 0;
}

/* The socket took n bytes of b, written from gather when not NULL: the
 * packets wholly written are taken, and so is the one it stopped inside,
 * whose rest goes to c->out.  How many were taken, or -FI_EAGAIN (none),
 * or -FI_EIO. */
static ssize_t send_partial(struct tcp_link *l, struct lm_link_peer *p,
                            struct tcp_conn *c, const struct send_batch *b,
                            unsigned char *gather, size_t n)
{
	size_t k, acc;

	for (k = 0, acc = 0; acc + b->size[k] <= n; k++)
		acc += b->size[k];
	ev_set(l, c, true);
	p->taken += acc;
	if (acc == n)
		return k ? (ssize_t)k : -FI_EAGAIN;
	/* The rest of packet k: from the buffer it was written from. */
	if (gather ? out_append(c, &(struct iovec){gather + acc, b->size[k]}, 1, n - acc)
	           : out_append(c, b->v + b->first[k], b->first[k + 1] - b->first[k],
	                        n - acc))
		return -FI_EIO; /* a partial packet cannot be taken back */
	p->taken += b->size[k];
	return (ssize_t)k + 1;
}

/* The first bytes in a while that wait for the peer's acknowledgement
 * (none was waiting): the bytes read before them cannot bring it, nor can
 * the kernel have it yet, so delivered() asks the kernel only once more
 * has been read, or TCP_ACK_LOOK_US after it first looked (the clock is
 * read there, not on the send's path: look_us 0).  In a ping-pong the
 * reply's RCVD frame always comes first, and no send costs an ioctl. */
static void held_start(struct lm_link_peer *p, const struct tcp_conn *c)
{
	p->look_rx = c->rx_count;
	p->look_us = 0;
}

/* The pieces of a small batch, one after another at out. */
static void gather(unsigned char *out, const struct iovec *v, size_t nv)
{
	for (size_t i = 0; i < nv; i++) {
		if (v[i].iov_len) /* its base may be NULL */
			memcpy(out, v[i].iov_base, v[i].iov_len);
		out += v[i].iov_len;
	}
}

/* Write pkts[0..count) to p with one sendmsg: how many were taken (a
 * packet written in part is finished from c->out before anything else),
 * -FI_EAGAIN when none was, or an error. */
static ssize_t send_pkts(struct tcp_link *l, struct lm_link_peer *p,
                         const struct lm_link_pkt *pkts, size_t count)
{
	unsigned char one[TCP_GATHER_MAX + sizeof(struct tcp_rcvd)];
	struct tcp_conn *c = p->conn;
	struct send_batch b;
	bool gathered;
	ssize_t n;
	int ret;

	if (p->self)
		return send_self(l, pkts, count);
	if (p->broken)
		return -FI_EIO;
	if (!c) {
		ret = conn_start(l, p);
		return ret ? ret : -FI_EAGAIN;
	}
	if (c->state != CONN_UP)
		return -FI_EAGAIN;
	if (count > TCP_BATCH_MAX)
		count = TCP_BATCH_MAX;
	batch_start(&b, c);
	ret = batch_add(&b, l, pkts, count);
	if (ret)
		return ret;
	gathered = b.total <= sizeof(one);
	ret = out_clear(l, c);
	if (ret)
		return ret;
	if (gathered) {
		/* Small: one buffer.  The kernel takes a gathered write of a
		 * few small pieces slower than one piece, by far more than
		 * this copy costs (docs/PERFORMANCE.md, Findings). */
		gather(one, b.v, b.nv);
		n = send(c->fd, one, b.total, MSG_NOSIGNAL | MSG_DONTWAIT);
	} else {
		n = sendmsg(c->fd, &(struct msghdr){.msg_iov = b.v, .msg_iovlen = b.nv},
		            MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	if (n > 0 && b.telling)
		c->rx_told = b.told.bytes; /* out, or its rest in c->out */
	if (n > 0 && p->acked >= p->taken)
		held_start(p, c);
	if (n == (ssize_t)b.total) {
		p->taken += b.total;
		return (ssize_t)count;
	}
	if (n < 0) {
		if (tcp_conn_gone(n)) {
			conn_write_failed(l, c);
			return -FI_EIO;
		}
		ev_set(l, c, true); /* say when it takes more */
		return -FI_EAGAIN;
	}
	return send_partial(l, p, c, &b, gathered ? one : NULL, (size_t)n);
}

static ssize_t tcp_link_send(struct lm_link *link, struct lm_link_peer *p,
                             const void *hdr, const struct iovec *iov, size_t iov_count)
{
	struct lm_link_pkt pkt = {hdr, iov, iov_count, false};
	ssize_t n = send_pkts(lm_container_of(link, struct tcp_link, link), p, &pkt, 1);

	return n < 0 ? n : 0;
}

static ssize_t tcp_link_send_many(struct lm_link *link, struct lm_link_peer *p,
                                  const struct lm_link_pkt *pkts, size_t count)
{
	return send_pkts(lm_container_of(link, struct tcp_link, link), p, pkts, count);
}

/* Where the packets taken for p end in the stream; delivered once the
 * peer's kernel has acknowledged every byte up to there.  Not before: a
 * byte may wait in c->out (the rest of a packet the socket took only in
 * part), and one in the kernel is not safe either, for a process that
 * dies with unread input makes the kernel reset its connections, and
 * what the peer had not acknowledged (unsent, or dropped by a full
 * receiver to be sent again) is lost. */
static uint64_t tcp_link_mark(struct lm_link *link, struct lm_link_peer *p)
{
	(void)link;
	return p->conn && !p->self ? p->taken : 0;
}

/* What the peer's kernel has acknowledged of c, the peer's data
 * connection, as far as the kernel says. */
static void acked_update(struct lm_link_peer *p, struct tcp_conn *c)
{
	uint64_t written = p->taken - c->out_len;
	int unacked;

	/* The unacknowledged bytes are the stream's last; bytes the link
	 * wrote that were no packet's only make this bound lower. */
	if (!ioctl(c->fd, SIOCOUTQ, &unacked) && unacked >= 0 &&
	    (uint64_t)unacked <= written - p->base && written - (uint64_t)unacked > p->acked)
		p->acked = written - (uint64_t)unacked;
}

/* Ask the peer to acknowledge at once (proto.h, TCP_FRAME_ACK_NOW). */
static void ack_request(struct tcp_link *l, struct lm_link_peer *p, struct tcp_conn *c)
{
	struct tcp_frame f = {.flags = TCP_FRAME_ACK_NOW};
	ssize_t n;

	if (c->out_len)
		return; /* it would wait behind unwritten bytes: not now */
	n = send(c->fd, &f, sizeof(f), MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0 && (size_t)n < sizeof(f)) {
		if (out_append(c, &(struct iovec){&f, sizeof(f)}, 1, (size_t)n)) {
			conn_close(l, c, true); /* a frame cut short */
			return;
		}
		ev_set(l, c, true);
	}
	if (n > 0) {
		p->nudged = p->taken;
		p->taken += sizeof(f); /* stream positions count every byte */
	}
}

static bool tcp_link_delivered(struct lm_link *link, struct lm_link_peer *p, uint64_t mark,
                               bool look)
{
	struct tcp_conn *c = p->conn;
	uint64_t now;

	if (mark <= p->acked) {
		/* The wait is over: the next send's starts afresh.  A
		 * stale start (the RCVD frame of a reply delivered the
		 * last send, never a look) made a quarter of a ping-pong's
		 * sends ask for an ACK_NOW they did not need, and the peer
		 * pay a frame and a TCP_QUICKACK for each. */
		p->wait_us = 0;
		return true;
	}
	/* Not on this connection (an earlier one's, unacknowledged when it
	 * ended, is lost): the liveness check decides. */
	if (!c || c->closed || c->wr_broken || mark <= p->base || mark > p->taken)
		return false;
	if (!look || p->taken - c->out_len < mark)
		return false;
	/* An acknowledgement mostly comes with the peer's bytes; one that
	 * comes alone is looked for now and then, not at every poll. */
	now = lm_now_us();
	if (!p->look_us)
		p->look_us = now;
	if (c->rx_count == p->look_rx && now - p->look_us < TCP_ACK_LOOK_US)
		return false;
	p->look_rx = c->rx_count;
	p->look_us = now;
	acked_update(p, c);
	if (mark <= p->acked) {
		p->wait_us = 0;
		return true;
	}
	/* A reply normally brings the acknowledgement long before this; a
	 * peer that reads without answering may delay it for 40 ms. */
	if (!p->wait_us)
		p->wait_us = now;
	else if (now - p->wait_us >= TCP_ACK_NUDGE_US && p->nudged < mark)
		ack_request(lm_container_of(link, struct tcp_link, link), p, c);
	return false;
}

/* Bind l's listening socket at a (in the domain's port range unless a
 * names a port), learn the address it got and put it in l's epoll set. */
static int link_listen(struct tcp_link *l, union lm_inet_addr *a)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int ret;

	ret = lm_sock_bind(&a->sa, lm_inet_len(l->family), l->params->port_low,
	                   l->params->port_high, &l->lfd);
	if (!ret)
		ret = lm_sock_listen(l->lfd);
	if (!ret && lm_inet_of_fd(l->lfd, false, a))
		ret = -FI_EIO;
	if (!ret && epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev))
		ret = lm_neg_errno(errno);
	return ret;
}

/* The loop's eventfd and wake_after's timerfd, both in l's epoll set. */
static int link_wake_fds(struct tcp_link *l)
{
	l->loop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->loop_fd >= 0)
		l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->loop_fd < 0 || l->tfd < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->loop_fd,
	              &(struct epoll_event){.events = EPOLLIN, .data.ptr = &l->loop}) ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd,
	              &(struct epoll_event){.events = EPOLLIN, .data.ptr = &l->tfd}))
		return lm_neg_errno(errno);
	return 0;
}

/* l's address, instance number (from the clock should getrandom fail),
 * the engine's header size and callbacks from attr, and empty lists. */
static void link_init(struct tcp_link *l, const struct lm_link_attr *attr,
                      const union lm_inet_addr *a)
{
	l->self = *a;
	if (getrandom(&l->instance, sizeof(l->instance), 0) != sizeof(l->instance) ||
	    !l->instance)
		l->instance = (uint64_t)lm_now_ms() * INSTANCE_MIX | 1;
	l->hdr_size = attr->hdr_size;
	l->recv = attr->recv;
	l->place = attr->place;
	l->placed = attr->placed;
	l->on_lost = attr->lost;
	l->arg = attr->arg;
	l->met = attr->met;
	l->met_arg = attr->met_arg;
	l->sparse = attr->sparse_poll;
	l->offer_len = attr->offer_len;
	if (attr->offer_len)
		memcpy(l->offer, attr->offer, attr->offer_len);
	lm_list_init(&l->conns);
	lm_list_init(&l->dead);
	lm_list_init(&l->loop);
	lm_list_init(&l->peer_list);
}

static int link_open(int family, void *ctx, const struct lm_link_attr *attr,
                     const void *name, struct lm_link **out)
{
	const struct tcp_params *params = ctx;
	struct tcp_link *l;
	union lm_inet_addr a = {.sa.sa_family = (sa_family_t)family};
	int ret;

	if ((name && lm_inet_load(&a, name, lm_inet_len(family), family)) ||
	    attr->hdr_size > TCP_HDR_MAX || attr->offer_len > TCP_OFFER_MAX)
		return -FI_EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -FI_ENOMEM;
	l->family = family;
	l->params = params;
	l->lfd = l->loop_fd = l->tfd = -1;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		ret = lm_neg_errno(errno);
		goto err;
	}
	if (attr->connected) {
		/* Named by its connection, once connection management made it. */
		l->connected = true;
		a.in.sin_port = 0; /* same place in both families */
	} else {
		ret = link_listen(l, &a);
		if (ret)
			goto err;
	}
	ret = link_wake_fds(l);
	if (ret)
		goto err;
	link_init(l, attr, &a);
	ret = lm_hmap_init(&l->peers, TCP_PEERS_EXPECTED);
	if (ret)
		goto err;
	l->link.ops = family == AF_INET6 ? &tcp6_link_ops : &tcp_link_ops;
	l->link.fd = l->epfd;
	l->link.max_payload = TCP_MAX_PAYLOAD;
	l->link.inline_max = TCP_INLINE_MAX;
	l->link.caps = LM_LINK_EARLY | LM_LINK_TELLS_LOSS;
	l->link.addr = &l->self;
	*out = &l->link;
	return 0;
err:
	if (l->loop_fd >= 0)
		close(l->loop_fd);
	if (l->tfd >= 0)
		close(l->tfd);
	if (l->lfd >= 0)
		close(l->lfd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l);
	return ret;
}

/* Bytes read away before a close, at most: a socket closed with unread
 * bytes resets the connection, and the peer then loses what our kernel
 * had not sent yet (messages whose sends completed here).  A bound, so a
 * peer that keeps sending cannot hold the close; a megabyte is as much
 * eager data as a conforming peer may have unconsumed here
 * (LM_EAGER_CREDIT). */
#define CLOSE_DRAIN_MAX (1024 * 1024)
/* What one read of that takes (a stack buffer). */
#define CLOSE_DRAIN_CHUNK 16384

/* Before closing: tell the peer what we read of its bytes, so that its
 * sends that ended there complete, though the acknowledgement its kernel
 * waited for may never come (a reset, should more arrive unread). */
static void rcvd_last(struct tcp_conn *c)
{
	struct tcp_rcvd r = {.f = {.len = sizeof(r.bytes), .flags = TCP_FRAME_RCVD},
	                     .bytes = c->rx_bytes - c->rx_base};

	if (r.bytes > c->rx_told &&
	    send(c->fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(r))
		c->rx_told = r.bytes;
}

static void conn_drain(struct tcp_conn *c)
{
	char buf[CLOSE_DRAIN_CHUNK];
	size_t got = 0;
	ssize_t n;

	while (got < CLOSE_DRAIN_MAX && (n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		got += (size_t)n;
}

static void tcp_link_close(struct lm_link *link)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	struct lm_list *it, *tmp;

	lm_list_foreach_safe(&l->conns, it, tmp)
	{
		struct tcp_conn *c = lm_container_of(it, struct tcp_conn, node);

		/* Whatever is queued goes out if the socket takes it now, and
		 * the close ends the stream after it (no reset). */
		if (c->state == CONN_UP && c->out_len)
			out_flush(l, c);
		if (c->state == CONN_UP && !c->out_len && !c->wr_broken)
			rcvd_last(c);
		conn_drain(c);
		conn_close(l, c, false);
	}
	conns_reap(l);
	while ((it = lm_list_pop_front(&l->loop)))
		free(lm_container_of(it, struct loop_pkt, node));
	while ((it = lm_list_pop_front(&l->peer_list)))
		free(lm_container_of(it, struct lm_link_peer, node));
	lm_hmap_fini(&l->peers);
	close(l->loop_fd);
	close(l->tfd);
	if (l->lfd >= 0)
		close(l->lfd);
	close(l->epfd);
	free(l);
}

static int tcp_link_peer_open(struct lm_link *link, const void *addr,
                              struct lm_link_peer **peer)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	union lm_inet_addr a;

	if (lm_inet_load(&a, addr, lm_inet_len(l->family), l->family))
		return -FI_EINVAL;
	*peer = peer_get(l, &a);
	return *peer ? 0 : -FI_ENOMEM;
}

static int tcp_link_peer_connect(struct lm_link *link, struct lm_link_peer *p)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);

	if (p->self || l->connected)
		return 0;
	if (p->conn)
		return p->conn->state == CONN_UP; /* 1: met long ago */
	return conn_start(l, p);
}

/* Peers live as long as the link: connections outlast AV entries. */
static void tcp_link_peer_close(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link, (void)peer;
}

/* The epoll set is level-triggered: arming puts every connection in it
 * (a poll that reads directly takes them out while disarmed). */
static void tcp_link_arm(struct lm_link *link)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);

	l->armed = true;
	ep_join_all(l);
}

static void tcp_link_disarm(struct lm_link *link)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);

	l->armed = false;
	if (l->timer_set)
		timer_drain(l);
}

/* Every -FI_EAGAIN of a connection ends with an event in the set: the
 * connection made, its HELLO answered, or its socket writable again.
 * Packets to ourselves wait only for memory. */
static int tcp_link_want_room(struct lm_link *link, struct lm_link_peer *p)
{
	(void)link;
	return p->self ? -FI_ENOMEM : 0;
}

static void tcp_link_wake_after(struct lm_link *link, int ms)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	struct itimerspec t = {
	    .it_value = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000}};

	if (!timerfd_settime(l->tfd, 0, &t, NULL))
		l->timer_set = true;
}

static bool tcp_link_peer_alive(struct lm_link *link, struct lm_link_peer *p)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);

	if (p->conn && p->conn->state != CONN_UP &&
	    lm_now_ms() - p->conn->start_ms > (uint64_t)l->params->conn_timeout_ms) {
		LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL, "connection timed out\n");
		conn_close(l, p->conn, true);
	}
	return !p->broken;
}

static void tcp_link_peer_reset(struct lm_link *link, struct lm_link_peer *p)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);

	if (!l->connected)
		p->broken = false; /* the next send connects again */
}

int tcp_link_adopt(struct lm_link *link, int fd, const union lm_inet_addr *peer)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	union lm_inet_addr a;
	struct lm_link_peer *p;
	struct tcp_conn *c;
	int fl = fcntl(fd, F_GETFL);

	if (!l->connected || !lm_list_empty(&l->conns))
		return -FI_EOPBADSTATE;
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return -FI_EIO;
	if (peer->sa.sa_family != l->family)
		return -FI_EINVAL;
	if (!lm_inet_of_fd(fd, false, &a))
		l->self = a;
	p = peer_get(l, peer);
	if (!p)
		return -FI_ENOMEM;
	c = conn_new(l, fd, CONN_UP, false);
	if (!c)
		return -FI_ENOMEM;
	c->peer = p;
	p->conn = c;
	p->broken = false;
	return 0;
}

bool tcp_link_lost(struct lm_link *link)
{
	return lm_container_of(link, struct tcp_link, link)->lost;
}

void tcp_link_shutdown(struct lm_link *link)
{
	struct tcp_link *l = lm_container_of(link, struct tcp_link, link);
	struct lm_list *it, *tmp;

	lm_list_foreach_safe(&l->conns, it, tmp)
	{
		struct tcp_conn *c = lm_container_of(it, struct tcp_conn, node);

		if (c->out_len)
			out_flush(l, c);
		shutdown(c->fd, SHUT_RDWR);
		conn_close(l, c, true);
	}
	conns_reap(l);
}

static int tcp4_link_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                          struct lm_link **out)
{
	return link_open(AF_INET, ctx, attr, name, out);
}

static int tcp6_link_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                          struct lm_link **out)
{
	return link_open(AF_INET6, ctx, attr, name, out);
}

#define TCP_LINK_OPS                                                                     \
	.name = "tcp", .addr_to_str = lm_inet_to_str, .close = tcp_link_close,           \
	.peer_open = tcp_link_peer_open, .peer_close = tcp_link_peer_close,              \
	.peer_connect = tcp_link_peer_connect,                                           \
	.send = tcp_link_send, .send_many = tcp_link_send_many, .mark = tcp_link_mark,   \
	.delivered = tcp_link_delivered,                                                 \
	.poll = tcp_link_poll, .arm = tcp_link_arm,                                      \
	.disarm = tcp_link_disarm, .wake_after = tcp_link_wake_after,                    \
	.want_room = tcp_link_want_room, .peer_alive = tcp_link_peer_alive,              \
	.peer_reset = tcp_link_peer_reset, .addr_lane = lm_inet_lane

const struct lm_link_ops tcp_link_ops = {
    TCP_LINK_OPS,
    .addrlen = sizeof(struct sockaddr_in),
    .addr_from_str = lm_inet4_from_str,
    .addr_check = lm_inet4_check,
    .addr_str_max = TCP_ADDR_STR_MAX,
    .open = tcp4_link_open,
};

const struct lm_link_ops tcp6_link_ops = {
    TCP_LINK_OPS,
    .addrlen = sizeof(struct sockaddr_in6),
    .addr_from_str = lm_inet6_from_str,
    .addr_check = lm_inet6_check,
    .addr_str_max = TCP_ADDR_STR_MAX,
    .open = tcp6_link_open,
};
