/* duo.c - a link of two (duo.h): the network link for every peer, the
 * shared-memory link for the peers that offered a region this process can
 * open.
 *
 * A peer's route, decided before the first packet to it:
 *   NONE     no handshake yet: sends wait (-FI_EAGAIN) while the network
 *            link makes one (peer_connect);
 *   NET      no usable offer, or our own address: the network link;
 *   WAIT     we accepted its connection and can open its region, but it
 *            has not read our offer yet: sends wait for its CONFIRM;
 *   LOCAL    the shared-memory link.
 * A packet that comes through shared memory is handed to the engine with
 * its sender's network address, which the offer told: a sender uses shared
 * memory only after the receiver holds its offer (the receiver answered
 * it, or confirmed ours). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "duo.h"
#include "hash.h"
#include "list.h"
#include "rdm.h"

enum duo_route { ROUTE_NONE, ROUTE_NET, ROUTE_WAIT, ROUTE_LOCAL };

/* duo_poll: for how many polls after shared memory brought a packet the
 * network link is read only every DUO_NET_EVERY-th time (or once per tick
 * of the coarse clock). */
#define DUO_LOCAL_RECENT 1024
#define DUO_NET_EVERY    1024
/* ... and whether the clock ticked is asked every DUO_TICK_EVERY-th. */
#define DUO_TICK_EVERY 64

/* What a duo link puts behind its network handshake. */
#define DUO_OFFER_MAGIC 0x4f5544u /* "DUO" */
#define DUO_BOOT_ID_LEN 40        /* /proc/sys/kernel/random/boot_id, NUL padded */
struct duo_offer {
	uint32_t magic;
	uint32_t uid;
	/* The network namespace (its inode): a region's doorbell is an
	 * abstract socket, which another namespace cannot ring. */
	uint64_t netns;
	char boot_id[DUO_BOOT_ID_LEN];
	uint32_t addrlen; /* the local link's address, behind */
	uint8_t addr[LM_LINK_ADDR_MAX];
};
_Static_assert(sizeof(struct duo_offer) <= LM_LINK_OFFER_MAX, "an offer fits the handshake");

/* A peer's address on one of the links, in that link's map of peers. */
struct duo_key {
	struct lm_hnode node;
	unsigned char addr[LM_LINK_ADDR_MAX];
};

struct lm_link_peer {
	struct duo_key net, local; /* local: in by_local only while has_local */
	struct lm_list node;
	struct lm_link_peer *np, *lp; /* the network link's handle, the local one's */
	enum duo_route route;
	bool has_local;
};

struct duo_link {
	struct lm_link link;
	const struct lm_duo *d;
	struct lm_link *net, *local;
	size_t net_alen, local_alen;
	int epfd;
	lm_link_recv_fn recv;
	void (*lost)(void *arg, const void *src_addr);
	void *arg;
	struct lm_hmap by_net, by_local;
	struct lm_list peers;
	struct lm_link_peer *last; /* the last local sender found */
	/* duo_poll's state: polls left while shared memory is busy, their
	 * count, the coarse tick of the last read of the network link, and
	 * whether that read brought packets.  Atomic: duo_idle reads them
	 * without the engine's lock (a hint). */
	_Atomic unsigned local_recent, polls;
	_Atomic uint64_t net_tick;
	_Atomic bool net_busy;
	/* read the network link at the next poll (armed, or duo_idle said) */
	_Atomic bool net_due;
	struct duo_offer offer;
	size_t offer_len;
};

static struct duo_link *duo_of(struct lm_link *link)
{
	return lm_container_of(link, struct duo_link, link);
}

/* ---- peers --------------------------------------------------------------- */

static struct duo_key *key_find(const struct lm_hmap *m, const void *addr, size_t len)
{
	struct lm_hnode *n = lm_hmap_find(m, lm_hash_bytes(addr, len));

	for (; n; n = lm_hmap_find_next(n)) {
		struct duo_key *k = lm_container_of(n, struct duo_key, node);

		if (!memcmp(k->addr, addr, len))
			return k;
	}
	return NULL;
}

static void key_insert(struct lm_hmap *m, struct duo_key *k, const void *addr, size_t len)
{
	memcpy(k->addr, addr, len);
	lm_hmap_insert(m, &k->node, lm_hash_bytes(addr, len));
}

static struct lm_link_peer *find_net(struct duo_link *l, const void *addr)
{
	struct duo_key *k = key_find(&l->by_net, addr, l->net_alen);

	return k ? lm_container_of(k, struct lm_link_peer, net) : NULL;
}

static struct lm_link_peer *find_local(struct duo_link *l, const void *addr)
{
	struct duo_key *k = key_find(&l->by_local, addr, l->local_alen);

	return k ? lm_container_of(k, struct lm_link_peer, local) : NULL;
}

static struct lm_link_peer *peer_get(struct duo_link *l, const void *addr)
{
	struct lm_link_peer *p = find_net(l, addr);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* Our own address: the network link loops it back in-process. */
	if (!memcmp(addr, l->link.addr, l->net_alen))
		p->route = ROUTE_NET;
	key_insert(&l->by_net, &p->net, addr, l->net_alen);
	lm_list_push_back(&l->peers, &p->node);
	return p;
}

/* Forget p's shared-memory side (its offer changed, or was refused). */
static void local_drop(struct duo_link *l, struct lm_link_peer *p)
{
	if (p->has_local) {
		lm_hmap_remove(&l->by_local, &p->local.node);
		p->has_local = false;
	}
	if (p->lp) {
		l->local->ops->peer_close(l->local, p->lp);
		p->lp = NULL;
	}
	if (l->last == p)
		l->last = NULL;
}

/* The route to p is decided: say which (FI_LOG_LEVEL=info), naming the
 * peer by its network address. */
static void route_told(struct duo_link *l, struct lm_link_peer *p, const char *why)
{
	char name[LM_LINK_ADDR_MAX * 2 + 64] = "?";
	size_t len = sizeof(name);

	if (!fi_log_enabled(l->d->prov, FI_LOG_INFO, FI_LOG_EP_CTRL))
		return;
	if (l->d->ops.addr_to_str)
		l->d->ops.addr_to_str(p->net.addr, name, &len);
	LM_INFO(l->d->prov, FI_LOG_EP_CTRL, "to %s: %s%s\n", name,
	        p->route == ROUTE_LOCAL ? "shared memory" : "network", why);
}

/* Is o (len bytes a peer offered) a region we may reach: same host, same
 * user, an address of our local link's size? */
static bool offer_usable(const struct duo_link *l, const struct duo_offer *o, size_t len)
{
	return l->offer_len && len >= offsetof(struct duo_offer, addr) &&
	       o->magic == DUO_OFFER_MAGIC && o->uid == l->offer.uid &&
	       o->netns == l->offer.netns &&
	       !memcmp(o->boot_id, l->offer.boot_id, DUO_BOOT_ID_LEN) &&
	       o->addrlen == l->local_alen && len >= offsetof(struct duo_offer, addr) + o->addrlen &&
	       /* our own region is no peer's (a peer claiming it lies) */
	       memcmp(o->addr, l->offer.addr, l->local_alen);
}

/* The network link's handshake with the peer at addr reached stage. */
static void duo_met(void *arg, const void *addr, const void *offer, size_t len,
                    enum lm_link_met stage)
{
	struct duo_link *l = arg;
	struct lm_link_peer *p = peer_get(l, addr);
	struct duo_offer o = {0};

	if (!p)
		return; /* no memory: sends to it keep waiting, then fail */
	if (stage == LM_MET_CONFIRM) {
		if (p->route == ROUTE_WAIT) {
			p->route = ROUTE_LOCAL;
			route_told(l, p, "");
		}
		return;
	}
	memcpy(&o, offer, LM_MIN(len, sizeof(o)));
	if (p->has_local && (!offer_usable(l, &o, len) ||
	                     memcmp(p->local.addr, o.addr, l->local_alen)))
		local_drop(l, p); /* a restarted peer, or one that stopped offering */
	if (!offer_usable(l, &o, len)) {
		/* Told once: both sides of a link that meets in both
		 * directions at once (udp's) hear of each other twice. */
		if (p->route != ROUTE_NET)
			route_told(l, p, len ? " (another host, user or network namespace)"
			                     : " (no offer)");
		p->route = ROUTE_NET;
		return;
	}
	if (!p->has_local) {
		/* Its packets through shared memory are known by this address
		 * from now on, whether or not we can reach its region. */
		key_insert(&l->by_local, &p->local, o.addr, l->local_alen);
		p->has_local = true;
	}
	if (!p->lp && l->local->ops->peer_open(l->local, o.addr, &p->lp)) {
		p->lp = NULL;
		p->route = ROUTE_NET;
		route_told(l, p, " (its region cannot be opened from here)");
		return;
	}
	/* It answered our offer, so it has it; or it has to read ours.  (Its
	 * first packet through shared memory may have told us before.) */
	if (stage == LM_MET_ANSWER && p->route != ROUTE_LOCAL) {
		p->route = ROUTE_LOCAL;
		route_told(l, p, "");
	} else if (stage != LM_MET_ANSWER) {
		p->route = ROUTE_WAIT;
	}
}

/* ---- packets in ----------------------------------------------------------- */

static void local_recv(void *arg, const void *src, const void *hdr, const void *payload,
                       size_t len)
{
	struct duo_link *l = arg;
	struct lm_link_peer *p = l->last;

	if (!p || memcmp(p->local.addr, src, l->local_alen)) {
		p = find_local(l, src);
		if (!p) {
			/* Only a peer that read our answer sends this way:
			 * a stray of an endpoint gone. */
			LM_INFO(l->d->prov, FI_LOG_EP_DATA,
			        "dropped a packet from an unknown local sender\n");
			return;
		}
		l->last = p;
	}
	/* A peer sends through shared memory only once it holds our offer:
	 * its packet says so as well as the CONFIRM still on its way over
	 * the network, and a reply (a rendezvous' FIN) must not wait for
	 * that, which the network side, read seldom while shared memory is
	 * busy, may bring only after our application stopped calling. */
	if (p->route == ROUTE_WAIT) {
		p->route = ROUTE_LOCAL;
		route_told(l, p, "");
	}
	l->recv(l->arg, p->net.addr, hdr, payload, len);
}

static void local_lost(void *arg, const void *src)
{
	struct duo_link *l = arg;
	struct lm_link_peer *p = find_local(l, src);

	if (p && l->lost)
		l->lost(l->arg, p->net.addr);
}

/* The coarse clock: a few ms a tick, read in a few ns. */
static uint64_t coarse_tick(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reading the network link costs a system call even when nothing came.
 * While shared memory brings packets and the network link's last read
 * brought none, it is read every DUO_NET_EVERY-th poll and at least once
 * per tick of the coarse clock; otherwise (network traffic, a handshake,
 * a quiet link) at every poll, and whenever the engine armed or disarmed
 * (what woke it). */
static bool net_skip(struct duo_link *l)
{
	unsigned recent, polls;

	if (atomic_load_explicit(&l->net_due, memory_order_relaxed) ||
	    atomic_load_explicit(&l->net_busy, memory_order_relaxed))
		return false;
	/* Hints, so plain loads and stores: a lost count costs one read. */
	recent = atomic_load_explicit(&l->local_recent, memory_order_relaxed);
	if (!recent)
		return false;
	atomic_store_explicit(&l->local_recent, recent - 1, memory_order_relaxed);
	polls = atomic_load_explicit(&l->polls, memory_order_relaxed) + 1;
	atomic_store_explicit(&l->polls, polls, memory_order_relaxed);
	if (!(polls % DUO_NET_EVERY))
		return false;
	/* The clock too is read only every DUO_TICK_EVERY-th poll. */
	if (polls % DUO_TICK_EVERY)
		return true;
	return coarse_tick() == atomic_load_explicit(&l->net_tick, memory_order_relaxed);
}

static int duo_poll(struct lm_link *link, int budget)
{
	struct duo_link *l = duo_of(link);
	int n = l->local->ops->poll(l->local, budget), m;

	if (n)
		atomic_store_explicit(&l->local_recent, DUO_LOCAL_RECENT, memory_order_relaxed);
	if (net_skip(l))
		return n;
	atomic_store_explicit(&l->net_due, false, memory_order_relaxed);
	atomic_store_explicit(&l->net_tick, coarse_tick(), memory_order_relaxed);
	m = l->net->ops->poll(l->net, budget - n > 0 ? budget - n : 1);
	atomic_store_explicit(&l->net_busy, m > 0, memory_order_relaxed);
	return n + m;
}

/* Nothing in shared memory, and the network link not due for a read.
 * Called without the engine's lock: a hint, as the link contract says. */
static bool duo_idle(struct lm_link *link)
{
	struct duo_link *l = duo_of(link);

	if (!l->local->ops->idle(l->local))
		return false;
	if (l->net->ops->idle)
		return l->net->ops->idle(l->net);
	if (net_skip(l))
		return true;
	atomic_store_explicit(&l->net_due, true, memory_order_relaxed); /* for duo_poll */
	return false;
}

/* ---- packets out ---------------------------------------------------------- */

/* Where packets to p go now: the link and its handle, or NULL (and why in
 * *err) while the route is not decided. */
static LM_HOT_INLINE struct lm_link *route_of(struct duo_link *l, struct lm_link_peer *p,
                                              struct lm_link_peer **h, ssize_t *err)
{
	if (p->route == ROUTE_LOCAL) {
		*h = p->lp;
		return l->local;
	}
	if (!p->np) {
		*err = l->net->ops->peer_open(l->net, p->net.addr, &p->np);
		if (*err) {
			p->np = NULL;
			return NULL;
		}
	}
	if (p->route == ROUTE_NET) {
		*h = p->np;
		return l->net;
	}
	/* NONE: have the network link meet the peer; WAIT: its CONFIRM. */
	*err = p->route == ROUTE_NONE ? l->net->ops->peer_connect(l->net, p->np) : 0;
	if (*err) {
		/* Unreachable (the network link says so), or met before and
		 * reset since: through the network, which knows its state. */
		p->route = ROUTE_NET;
		*h = p->np;
		return l->net;
	}
	/* The answer comes over the network: read it at the next poll,
	 * however busy shared memory is. */
	atomic_store_explicit(&l->net_due, true, memory_order_relaxed);
	*err = -FI_EAGAIN;
	return NULL;
}

static ssize_t duo_send(struct lm_link *link, struct lm_link_peer *p, const void *hdr,
                        const struct iovec *iov, size_t iov_count)
{
	struct duo_link *l = duo_of(link);
	struct lm_link_peer *h;
	ssize_t ret = 0;
	struct lm_link *to = route_of(l, p, &h, &ret);

	return to ? to->ops->send(to, h, hdr, iov, iov_count) : ret;
}

static ssize_t duo_send_words(struct lm_link *link, struct lm_link_peer *p,
                              const uint64_t *words, unsigned mask, const void *payload,
                              size_t len)
{
	struct duo_link *l = duo_of(link);
	struct lm_link_peer *h;
	ssize_t ret = 0;
	struct lm_link *to = route_of(l, p, &h, &ret);

	if (!to)
		return ret;
	if (to->ops->send_words && len <= to->inline_max)
		return to->ops->send_words(to, h, words, mask, payload, len);
	/* The header whole, for a link that takes no words. */
	uint64_t hdr[sizeof(struct lm_rdm_hdr) / 8] = {0};

	for (unsigned i = 0, k = 0; i < sizeof(hdr) / 8; i++)
		if (mask & (1u << i))
			hdr[i] = words[k++];
	return to->ops->send(to, h, hdr, &(struct iovec){(void *)payload, len}, 1);
}

static ssize_t duo_send_many(struct lm_link *link, struct lm_link_peer *p,
                             const struct lm_link_pkt *pkts, size_t count)
{
	struct duo_link *l = duo_of(link);
	struct lm_link_peer *h;
	ssize_t ret = 0;
	struct lm_link *to = route_of(l, p, &h, &ret);
	size_t i;

	if (!to)
		return ret;
	if (to->ops->send_many)
		return to->ops->send_many(to, h, pkts, count);
	for (i = 0; i < count; i++) {
		ret = to->ops->send(to, h, pkts[i].hdr, pkts[i].iov, pkts[i].iov_count);
		if (ret)
			break;
	}
	return i ? (ssize_t)i : ret;
}

/* Shared memory takes a packet for good when it takes it; the network
 * link may say otherwise. */
static uint64_t duo_mark(struct lm_link *link, struct lm_link_peer *p)
{
	struct duo_link *l = duo_of(link);

	return p->route == ROUTE_NET && p->np && l->net->ops->mark
	           ? l->net->ops->mark(l->net, p->np)
	           : 0;
}

/* Whatever the route is now, lent packets went by the network. */
static void duo_unlend(struct lm_link *link, struct lm_link_peer *p, const void *lent_by)
{
	struct duo_link *l = duo_of(link);

	if (p->np)
		l->net->ops->unlend(l->net, p->np, lent_by);
}

static bool duo_delivered(struct lm_link *link, struct lm_link_peer *p, uint64_t mark,
                          bool look)
{
	struct duo_link *l = duo_of(link);

	return p->route != ROUTE_NET || !p->np || !l->net->ops->delivered ||
	       l->net->ops->delivered(l->net, p->np, mark, look);
}

static int duo_want_room(struct lm_link *link, struct lm_link_peer *p)
{
	struct duo_link *l = duo_of(link);
	struct lm_link_peer *h;
	ssize_t err = 0;
	struct lm_link *to = route_of(l, p, &h, &err);

	if (!to)
		return -FI_EINVAL; /* a handshake under way: look again soon */
	return to->ops->want_room ? to->ops->want_room(to, h) : -FI_EINVAL;
}

static ssize_t duo_bulk_read(struct lm_link *link, struct lm_link_peer *p,
                             const struct iovec *local, size_t local_count,
                             const struct iovec *remote, size_t remote_count)
{
	struct duo_link *l = duo_of(link);

	/* A copy sends the peer no packet: its region open is enough. */
	if (!p->lp || !l->local->ops->bulk_read)
		return -FI_ENOSYS; /* packets, then */
	return l->local->ops->bulk_read(l->local, p->lp, local, local_count, remote,
	                                remote_count);
}

static ssize_t duo_bulk_write(struct lm_link *link, struct lm_link_peer *p,
                              const struct iovec *local, size_t local_count,
                              const struct iovec *remote, size_t remote_count)
{
	struct duo_link *l = duo_of(link);

	if (!p->lp || !l->local->ops->bulk_write)
		return -FI_ENOSYS;
	return l->local->ops->bulk_write(l->local, p->lp, local, local_count, remote,
	                                 remote_count);
}

static unsigned duo_peer_caps(struct lm_link *link, struct lm_link_peer *p)
{
	struct duo_link *l = duo_of(link);

	return p->lp ? l->local->caps : l->net->caps;
}

static bool duo_peer_alive(struct lm_link *link, struct lm_link_peer *p)
{
	struct duo_link *l = duo_of(link);

	if (p->route == ROUTE_LOCAL && !l->local->ops->peer_alive(l->local, p->lp))
		return false;
	return !p->np || l->net->ops->peer_alive(l->net, p->np);
}

/* The engine failed everything with p, which was gone: the next send
 * meets it afresh (a restarted peer offers a new region), or finds it
 * still gone.  A region that is open (a restarted peer met us since it
 * was lost, before the engine got here) stays. */
static void duo_peer_reset(struct lm_link *link, struct lm_link_peer *p)
{
	struct duo_link *l = duo_of(link);

	if ((p->route == ROUTE_LOCAL || p->route == ROUTE_WAIT) &&
	    (!p->lp || !l->local->ops->peer_alive(l->local, p->lp))) {
		local_drop(l, p);
		p->route = ROUTE_NONE;
	}
	if (p->np && l->net->ops->peer_reset)
		l->net->ops->peer_reset(l->net, p->np);
}

/* ---- sleeping ------------------------------------------------------------- */

static void duo_arm(struct lm_link *link)
{
	struct duo_link *l = duo_of(link);

	l->local->ops->arm(l->local);
	l->net->ops->arm(l->net);
	/* The engine looks once more before it sleeps, and again when fd
	 * wakes it: what made it readable is read then. */
	atomic_store_explicit(&l->net_due, true, memory_order_relaxed);
}

static void duo_disarm(struct lm_link *link)
{
	struct duo_link *l = duo_of(link);

	l->local->ops->disarm(l->local);
	l->net->ops->disarm(l->net);
	atomic_store_explicit(&l->net_due, true, memory_order_relaxed);
}

static void duo_wake_after(struct lm_link *link, int ms)
{
	struct duo_link *l = duo_of(link);

	l->net->ops->wake_after(l->net, ms);
}

/* ---- the link ------------------------------------------------------------- */

static int duo_peer_open(struct lm_link *link, const void *addr, struct lm_link_peer **peer)
{
	struct duo_link *l = duo_of(link);

	*peer = peer_get(l, addr);
	return *peer ? 0 : -FI_ENOMEM;
}

/* Peers live as long as the link, as the network link's do. */
static void duo_peer_close(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link, (void)peer;
}

/* Our offer: this host's boot id, our user and network namespace, the
 * local link's address.  None (and so no local route) when the boot id or
 * the namespace cannot be read. */
static void offer_make(struct duo_link *l)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, l->offer.boot_id, DUO_BOOT_ID_LEN - 1);

	if (fd >= 0)
		close(fd);
	struct stat st;

	if (n <= 0 || l->local_alen > LM_LINK_ADDR_MAX || stat("/proc/self/ns/net", &st))
		return;
	l->offer.netns = (uint64_t)st.st_ino;
	l->offer.magic = DUO_OFFER_MAGIC;
	l->offer.uid = (uint32_t)geteuid();
	l->offer.addrlen = (uint32_t)l->local_alen;
	memcpy(l->offer.addr, l->local->addr, l->local_alen);
	l->offer_len = offsetof(struct duo_offer, addr) + l->local_alen;
}

static void duo_close(struct lm_link *link)
{
	struct duo_link *l = duo_of(link);
	struct lm_list *it;

	while ((it = lm_list_pop_front(&l->peers))) {
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, node);

		if (p->lp)
			l->local->ops->peer_close(l->local, p->lp);
		if (p->np)
			l->net->ops->peer_close(l->net, p->np);
		free(p);
	}
	l->net->ops->close(l->net);
	l->local->ops->close(l->local);
	lm_hmap_fini(&l->by_net);
	lm_hmap_fini(&l->by_local);
	close(l->epfd);
	free(l);
}

static int duo_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                    struct lm_link **out)
{
	const struct lm_duo *d = ctx;
	struct lm_link_attr na = *attr, la = *attr;
	struct duo_link *l;
	int ret;

	if (attr->connected) /* one peer, from connection management */
		return d->net->open(d->net_ctx, attr, name, out);
	l = calloc(1, sizeof(*l));
	if (!l)
		return -FI_ENOMEM;
	l->epfd = -1;
	l->d = d;
	lm_list_init(&l->peers);
	l->recv = attr->recv;
	l->lost = attr->lost;
	l->arg = attr->arg;
	l->net_alen = d->net->addrlen;
	l->local_alen = d->local->addrlen;
	/* Shared memory first: its address goes into the network link's
	 * handshake. */
	la.recv = local_recv;
	la.lost = local_lost;
	la.arg = l;
	la.place = NULL;
	la.placed = NULL;
	la.name_hint = false;
	ret = d->local->open(d->local_ctx, &la, NULL, &l->local);
	if (ret) {
		/* No region (/dev/shm full or refused): every peer over the
		 * network, as with the parameter off. */
		LM_INFO(d->prov, FI_LOG_EP_CTRL,
		        "no shared-memory region (%s): every peer over the network\n",
		        fi_strerror(-ret));
		free(l);
		return d->net->open(d->net_ctx, attr, name, out);
	}
	offer_make(l);
	na.offer = &l->offer;
	na.offer_len = l->offer_len;
	/* The engine's own callbacks, with the engine's argument, for what
	 * the network link brings: its addresses are the engine's.  Only
	 * met needs l: a wrapper would cost every packet. */
	na.met = duo_met;
	na.met_arg = l;
	na.sparse_poll = true; /* duo_poll reads it seldom while shm is busy */
	ret = d->net->open(d->net_ctx, &na, name, &l->net);
	if (ret)
		goto err_local;
	ret = lm_hmap_init(&l->by_net, 16);
	if (!ret)
		ret = lm_hmap_init(&l->by_local, 16);
	if (ret)
		goto err_net;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->local->fd,
	              &(struct epoll_event){.events = EPOLLIN}) ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->net->fd,
	              &(struct epoll_event){.events = EPOLLIN})) {
		ret = lm_neg_errno(errno);
		goto err_net;
	}
	l->link.ops = &d->ops;
	l->link.fd = l->epfd;
	l->link.max_payload = LM_MIN(l->net->max_payload, l->local->max_payload);
	l->link.inline_max = l->local->inline_max;
	/* A peer reached through shared memory keeps its network
	 * connection, whose end tells its death as for any other. */
	l->link.caps = (l->net->caps & (LM_LINK_EARLY | LM_LINK_TELLS_LOSS)) |
	               (l->local->caps & (LM_LINK_BULK_READ | LM_LINK_BULK_WRITE));
	l->link.addr = l->net->addr;
	*out = &l->link;
	return 0;
err_net:
	if (l->epfd >= 0)
		close(l->epfd);
	lm_hmap_fini(&l->by_net);
	lm_hmap_fini(&l->by_local);
	l->net->ops->close(l->net);
err_local:
	l->local->ops->close(l->local);
	free(l);
	return ret;
}

const struct lm_link_ops *lm_duo_pick(struct lm_duo *d, bool both,
                                      const struct fi_provider *prov,
                                      const struct lm_link_ops *net, void *net_ctx,
                                      const struct lm_link_ops *local, void **ctx)
{
	if (!both) {
		*ctx = net_ctx;
		return net;
	}
	lm_duo_init(d, prov, net, net_ctx, local, NULL);
	*ctx = d;
	return &d->ops;
}

void lm_duo_init(struct lm_duo *d, const struct fi_provider *prov,
                 const struct lm_link_ops *net, void *net_ctx,
                 const struct lm_link_ops *local, void *local_ctx)
{
	d->prov = prov;
	d->net = net;
	d->local = local;
	d->net_ctx = net_ctx;
	d->local_ctx = local_ctx;
	/* The network link's addressing: the engine's addresses are its. */
	d->ops = *net;
	d->ops.open = duo_open;
	d->ops.close = duo_close;
	d->ops.peer_open = duo_peer_open;
	d->ops.peer_close = duo_peer_close;
	d->ops.peer_connect = NULL;
	d->ops.send = duo_send;
	d->ops.send_words = duo_send_words;
	d->ops.send_many = duo_send_many;
	d->ops.mark = net->mark ? duo_mark : NULL;
	d->ops.unlend = net->unlend ? duo_unlend : NULL;
	d->ops.delivered = net->delivered ? duo_delivered : NULL;
	d->ops.poll = duo_poll;
	d->ops.idle = local->idle ? duo_idle : NULL;
	d->ops.arm = duo_arm;
	d->ops.disarm = duo_disarm;
	d->ops.wake_after = net->wake_after ? duo_wake_after : NULL;
	d->ops.want_room = duo_want_room;
	d->ops.bulk_read = local->bulk_read ? duo_bulk_read : NULL;
	d->ops.bulk_write = local->bulk_write ? duo_bulk_write : NULL;
	d->ops.peer_caps = duo_peer_caps;
	d->ops.peer_alive = duo_peer_alive;
	d->ops.peer_reset = duo_peer_reset;
}
