/* dgram.c - the udp provider's FI_EP_DGRAM endpoints: each message is one
 * UDP datagram behind a 16-byte header (struct udp_dg_hdr, proto.h), sent
 * by the call that posts it and received straight into the posted
 * buffer.  Unreliable and unordered as man fi_endpoint defines DGRAM:
 * nothing here numbers, acknowledges or resends, so the engine and its
 * link stay out of the way.  Multicast groups (fi_join) get a socket of
 * their own, bound to the group's port, read with the endpoint's. */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp.h"

/* A multicast group's fi_addr: these top bits and the group's slot, far
 * from any AV index. */
#define DG_MC_TAG   0x4d43000000000000ULL /* "MC" */
#define DG_MC_MASK  0xffff000000000000ULL
#define DG_MC_MAX   64
#define DG_LOG_EVERY_MS 1000
#define DG_DEFAULT_MIN_MULTI 64
/* Datagrams up to this many bytes are sent from one buffer and read into
 * one, the header copied in front of the payload or the payload copied
 * out after it: recvmsg's and sendmsg's iovecs cost more than the copy
 * (an empty poll takes a third longer with two iovecs than recvfrom with
 * one, and a busy receiver polls several times a message).  Larger ones
 * go straight between the application's buffers and the socket. */
#define DG_COPY_MAX 4096

struct dg_ep;

struct dg_rx {
	struct lm_rx_entry e; /* e.node: in ep->posted or ep->rx_free */
};

/* A joined group: its address, and the socket that takes its datagrams
 * (-1 for a send-only member). */
struct dg_mc {
	struct fid_mc mc_fid;
	struct dg_ep *ep;
	union lm_inet_addr group;
	int fd;
	unsigned slot;
	struct lm_progress hook_cq, hook_cntr; /* watch fd for sleeping readers */
};

struct dg_ep {
	struct fid_ep ep_fid;
	struct udp_domain *dom;
	uint64_t caps;
	int family;
	int fd;
	union lm_inet_addr name;
	size_t max_msg, inject_size;
	uint64_t tx_flags, rx_flags; /* op_flags for calls that take none */
	size_t min_multi;
	bool enabled;

	struct lm_av *av;
	/* The last sender src_of found in av, and av's removals then: a
	 * stream from one peer looks its address up once. */
	union lm_inet_addr src_from;
	socklen_t src_len;
	fi_addr_t src_addr;
	uint64_t src_gen;
	struct lm_cq *tx_cq, *rx_cq;
	bool tx_selective, rx_selective;
	struct lm_cntr *send_cntr, *recv_cntr;
	struct lm_eq *eq;
	/* A shared transmit context (fi_stx_context): a datagram goes at
	 * the call, so there is no queue to share; its completion goes to
	 * this endpoint's CQ, as man fi_endpoint has it. */
	struct lm_rdm_stx *stx;
	struct lm_progress hook_cq, hook_cntr;

	/* Receive side, under lock: posted receives in order, and the
	 * groups (fi_join and fi_close of a group may race a reader). */
	struct lm_lock lock;
	struct lm_list posted, rx_free;
	struct dg_rx *rx_all;
	size_t rx_size, rx_count;
	struct dg_mc *mc[DG_MC_MAX];
	unsigned nmc; /* groups joined: the slots to look at */
	/* A datagram read whole (header, then max_msg bytes): small ones,
	 * and those for a nearly full multi-receive buffer. */
	unsigned char *bounce;
	/* The last datagram was small: read the next one into bounce too. */
	bool read_small;
	uint64_t log_ms;
};

static struct dg_ep *ep_of(struct fid_ep *fid)
{
	return lm_container_of(fid, struct dg_ep, ep_fid);
}

static void drop_log(struct dg_ep *ep, const char *why)
{
	uint64_t now = lm_now_ms();

	if (now - ep->log_ms < DG_LOG_EVERY_MS)
		return;
	ep->log_ms = now;
	LM_WARN(udp_log_prov, FI_LOG_EP_DATA, "datagram dropped: %s\n", why);
}

/* ---- receiving ------------------------------------------------------------- */

static struct dg_rx *rx_first(struct dg_ep *ep)
{
	return lm_list_empty(&ep->posted) ? NULL
	                                  : lm_container_of(ep->posted.next, struct dg_rx, e.node);
}

static void rx_free(struct dg_ep *ep, struct dg_rx *rx)
{
	lm_list_remove(&rx->e.node);
	lm_list_push_back(&ep->rx_free, &rx->e.node);
	ep->rx_count--;
}

/* The counters and the CQ entry of a message of len bytes that went into
 * rx (extra: FI_REMOTE_CQ_DATA, FI_MULTI_RECV). */
static void rx_report(struct dg_ep *ep, struct dg_rx *rx, size_t len, uint64_t data,
                      fi_addr_t src, uint64_t extra)
{
	struct lm_rx_entry *e = &rx->e;
	size_t cap = e->flags & FI_MULTI_RECV ? e->last_len : e->total_len;
	bool trunc = len > cap;

	if (ep->recv_cntr) {
		if (trunc)
			lm_cntr_inc_err(ep->recv_cntr);
		else
			lm_cntr_inc(ep->recv_cntr);
	}
	if (!ep->rx_cq)
		return;
	if (ep->rx_selective && !(e->flags & FI_COMPLETION) && !trunc &&
	    !(extra & FI_MULTI_RECV))
		return;
	lm_rx_complete(ep->rx_cq, e, len, data, 0, src, extra);
}

/* A message of len bytes (the first `have` of them at payload, or already
 * in place when payload is NULL) for the receive rx. */
static void rx_deliver(struct dg_ep *ep, struct dg_rx *rx, const void *payload, size_t have,
                       size_t len, uint64_t data, fi_addr_t src, uint64_t extra)
{
	struct lm_rx_entry *e = &rx->e;
	bool released;

	if (!(e->flags & FI_MULTI_RECV)) {
		if (payload)
			lm_copy_to_iov(e->iov, e->iov_count, 0, payload, have);
		rx_report(ep, rx, len, data, src, extra);
		rx_free(ep, rx);
		return;
	}
	void *at = lm_rx_consume(e, len, ep->min_multi, &released);

	if (payload && at)
		memcpy(at, payload, LM_MIN(have, e->last_len));
	rx_report(ep, rx, len, data, src, extra | (released ? FI_MULTI_RECV : 0));
	if (released)
		rx_free(ep, rx);
}

/* A datagram read whole (its first `have` payload bytes at payload) that
 * does not fit what is left of the multi-receive buffer rx: rx is
 * released (an empty FI_MULTI_RECV entry), the message goes to the
 * receive after it, or nowhere (DGRAM). */
static void rx_spill(struct dg_ep *ep, struct dg_rx *rx, const void *payload, size_t have,
                     size_t len, uint64_t data, fi_addr_t src, uint64_t extra)
{
	struct dg_rx *next;

	if (ep->rx_cq)
		lm_cq_write(ep->rx_cq, rx->e.context, FI_MULTI_RECV, 0, NULL, 0, 0,
		            FI_ADDR_NOTAVAIL);
	rx_free(ep, rx);
	next = rx_first(ep);
	if (!next) {
		drop_log(ep, "no receive posted");
		return;
	}
	if ((next->e.flags & FI_MULTI_RECV) &&
	    next->e.iov[0].iov_len - next->e.consumed < len) {
		rx_spill(ep, next, payload, have, len, data, src, extra);
		return;
	}
	rx_deliver(ep, next, payload, have, len, data, src, extra);
}

/* Does the header say the datagram is ours? */
static bool hdr_ok(struct dg_ep *ep, const struct udp_dg_hdr *h, ssize_t got)
{
	if ((size_t)got < sizeof(*h)) {
		drop_log(ep, "shorter than a header");
		return false;
	}
	if (h->magic != UDP_DG_MAGIC || h->version != UDP_DG_VERSION ||
	    (h->flags & ~UDP_DG_DATA) || h->zero) {
		drop_log(ep, "not a datagram of ours");
		return false;
	}
	return true;
}

/* The sender's fi_addr for the completion (FI_SOURCE), else none. */
static fi_addr_t src_of(struct dg_ep *ep, const union lm_inet_addr *from, socklen_t len)
{
	union lm_inet_addr a;
	uint64_t gen;
	fi_addr_t src;

	if (!(ep->caps & FI_SOURCE) || !ep->av)
		return FI_ADDR_NOTAVAIL;
	gen = atomic_load_explicit(&ep->av->removals, memory_order_acquire);
	if (len == ep->src_len && gen == ep->src_gen && lm_bytes_same(from, &ep->src_from, len))
		return ep->src_addr;
	if (lm_inet_load(&a, from, len, ep->family))
		return FI_ADDR_NOTAVAIL;
	src = lm_av_reverse(ep->av, &a);
	/* Not a named AV's: what another process removed is seen only
	 * when the lookup brings the segment up to date. */
	if (src != FI_ADDR_NOTAVAIL && !ep->av->shm && len <= sizeof(ep->src_from)) {
		memcpy(&ep->src_from, from, len);
		ep->src_len = len;
		ep->src_addr = src;
		ep->src_gen = gen;
	}
	return src;
}

/* One datagram of fd, whole, into the bounce buffer (recvfrom: one
 * buffer), then copied where rx takes it.  -1: nothing to read. */
static int read_copy(struct dg_ep *ep, int fd, struct dg_rx *rx)
{
	union lm_inet_addr from;
	socklen_t fromlen = sizeof(from);
	struct udp_dg_hdr h;
	const unsigned char *payload = ep->bounce + sizeof(h);
	ssize_t got = recvfrom(fd, ep->bounce, sizeof(h) + ep->max_msg, MSG_TRUNC | MSG_DONTWAIT,
	                       &from.sa, &fromlen);
	size_t len, have;

	if (got < 0)
		return errno == EINTR ? 0 : -1;
	if ((size_t)got >= sizeof(h))
		memcpy(&h, ep->bounce, sizeof(h));
	else
		memset(&h, 0, sizeof(h)); /* hdr_ok refuses it for its length */
	if (!hdr_ok(ep, &h, got))
		return 0;
	len = (size_t)got - sizeof(h);
	have = LM_MIN(len, ep->max_msg);
	ep->read_small = len <= DG_COPY_MAX;
	fi_addr_t src = src_of(ep, &from, fromlen);
	uint64_t extra = h.flags & UDP_DG_DATA ? FI_REMOTE_CQ_DATA : 0;

	if ((rx->e.flags & FI_MULTI_RECV) && len > rx->e.iov[0].iov_len - rx->e.consumed)
		rx_spill(ep, rx, payload, have, len, h.data, src, extra);
	else
		rx_deliver(ep, rx, payload, have, len, h.data, src, extra);
	return 0;
}

/* One datagram of fd straight into rx's buffers (recvmsg: the header
 * apart).  -1: nothing to read. */
static int read_direct(struct dg_ep *ep, int fd, struct dg_rx *rx)
{
	struct iovec v[1 + LM_IOV_LIMIT];
	struct udp_dg_hdr h;
	union lm_inet_addr from;
	struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = v};
	ssize_t got;
	size_t len;

	v[0] = (struct iovec){&h, sizeof(h)};
	m.msg_iovlen = 1;
	if (rx->e.flags & FI_MULTI_RECV) {
		v[m.msg_iovlen++] = (struct iovec){
		    (char *)rx->e.iov[0].iov_base + rx->e.consumed,
		    rx->e.iov[0].iov_len - rx->e.consumed};
	} else {
		for (size_t i = 0; i < rx->e.iov_count; i++)
			v[m.msg_iovlen++] = lm_iov_recv_entry(rx->e.iov[i]);
	}
	/* MSG_TRUNC: the datagram's whole length, whatever fitted. */
	got = recvmsg(fd, &m, MSG_TRUNC | MSG_DONTWAIT);
	if (got < 0)
		return errno == EINTR ? 0 : -1;
	if (!hdr_ok(ep, &h, got))
		return 0;
	len = (size_t)got - sizeof(h);
	ep->read_small = len <= DG_COPY_MAX;
	rx_deliver(ep, rx, NULL, len, len, h.data, src_of(ep, &from, m.msg_namelen),
	           h.flags & UDP_DG_DATA ? FI_REMOTE_CQ_DATA : 0);
	return 0;
}

/* Read one datagram of fd into the first posted receive: false when
 * nothing more can be read now (the socket is empty, or no receive is
 * posted).  Straight into the receive's buffers unless the last datagram
 * was small or the receive is a multi-receive buffer with less than a
 * datagram's room left. */
static bool read_one(struct dg_ep *ep, int fd)
{
	struct dg_rx *rx = rx_first(ep);
	bool copy;

	if (!rx)
		return false;
	copy = ep->read_small || ((rx->e.flags & FI_MULTI_RECV) &&
	                          rx->e.iov[0].iov_len - rx->e.consumed < ep->max_msg);
	return (copy ? read_copy(ep, fd, rx) : read_direct(ep, fd, rx)) == 0;
}

/* A datagram of each socket, where a posted receive takes it: one, so
 * that a datagram's completion is reported at once, not after one more
 * read that finds the socket empty (a system call on every message's
 * path: 0.93x the 64 B ping-pong's time without it); the next call reads
 * the next. */
static void dg_poll(struct dg_ep *ep)
{
	lm_lock_acquire(&ep->lock);
	if (ep->enabled) {
		read_one(ep, ep->fd);
		for (unsigned i = 0; ep->nmc && i < DG_MC_MAX; i++)
			if (ep->mc[i] && ep->mc[i]->fd >= 0)
				read_one(ep, ep->mc[i]->fd);
	}
	lm_lock_release(&ep->lock);
}

static void progress_cq(struct lm_progress *p)
{
	dg_poll(lm_container_of(p, struct dg_ep, hook_cq));
}

static void progress_cntr(struct lm_progress *p)
{
	dg_poll(lm_container_of(p, struct dg_ep, hook_cntr));
}

static void mc_progress_cq(struct lm_progress *p)
{
	dg_poll(lm_container_of(p, struct dg_mc, hook_cq)->ep);
}

static void mc_progress_cntr(struct lm_progress *p)
{
	dg_poll(lm_container_of(p, struct dg_mc, hook_cntr)->ep);
}

static ssize_t dg_post(struct dg_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       void *context, uint64_t flags)
{
	struct dg_rx *rx;
	size_t len;

	if (!lm_iov_recv_valid(iov, count, &len))
		return -FI_EINVAL;
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	if ((flags & FI_MULTI_RECV) && (count != 1 || !(ep->caps & FI_MULTI_RECV)))
		return -FI_EINVAL;
	lm_lock_acquire(&ep->lock);
	if (!ep->enabled) {
		lm_lock_release(&ep->lock);
		return -FI_EOPBADSTATE;
	}
	if (lm_list_empty(&ep->rx_free)) {
		lm_lock_release(&ep->lock);
		return -FI_EAGAIN;
	}
	rx = lm_container_of(ep->rx_free.next, struct dg_rx, e.node);
	lm_list_remove(&rx->e.node);
	memset(&rx->e, 0, sizeof(rx->e));
	rx->e.flags = FI_MSG | (flags & (FI_MULTI_RECV | FI_COMPLETION));
	rx->e.context = context;
	rx->e.iov_count = count;
	for (size_t i = 0; i < count; i++) {
		rx->e.iov[i] = lm_iov_recv_entry(iov[i]);
		rx->e.desc[i] = desc ? desc[i] : NULL;
	}
	rx->e.total_len = len;
	lm_list_push_back(&ep->posted, &rx->e.node);
	ep->rx_count++;
	lm_lock_release(&ep->lock);
	return 0;
}

static ssize_t dg_recv(struct fid_ep *fid, void *buf, size_t len, void *desc, fi_addr_t src,
                       void *context)
{
	struct iovec v = {buf, len};
	struct dg_ep *ep = ep_of(fid);

	(void)src;
	return dg_post(ep, &v, &desc, 1, context, ep->rx_flags);
}

static ssize_t dg_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t src, void *context)
{
	struct dg_ep *ep = ep_of(fid);

	(void)src;
	return dg_post(ep, iov, desc, count, context, ep->rx_flags);
}

static ssize_t dg_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return dg_post(ep_of(fid), msg->msg_iov, msg->desc, msg->iov_count, msg->context,
	               flags);
}

/* ---- sending --------------------------------------------------------------- */

/* Where fi_addr sends to: a joined group, or an AV entry; NULL if neither. */
static const void *dest_of(struct dg_ep *ep, fi_addr_t addr)
{
	if ((addr & DG_MC_MASK) == DG_MC_TAG) {
		uint64_t slot = addr & ~DG_MC_MASK;

		return slot < DG_MC_MAX && ep->mc[slot] ? &ep->mc[slot]->group : NULL;
	}
	return ep->av ? lm_av_addr(ep->av, addr) : NULL;
}

/* One datagram, sent now: its completion is written before the call
 * returns (the kernel has it; DGRAM promises no more). */
static ssize_t dg_send(struct dg_ep *ep, const struct iovec *iov, size_t count,
                       fi_addr_t dest, void *context, uint64_t data, uint64_t flags)
{
	struct udp_dg_hdr h = {.magic = UDP_DG_MAGIC, .version = UDP_DG_VERSION};
	struct iovec v[1 + LM_IOV_LIMIT];
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 1 + count};
	const void *to;
	ssize_t got;
	size_t len;

	if (!lm_iov_valid(iov, count, &len))
		return -FI_EINVAL;
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	if (len > ep->max_msg || ((flags & FI_INJECT) && len > ep->inject_size))
		return -FI_EMSGSIZE;
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	to = dest_of(ep, dest);
	if (!to)
		return -FI_EINVAL;
	if (flags & FI_REMOTE_CQ_DATA) {
		h.flags = UDP_DG_DATA;
		h.data = data;
	}
	if (len <= DG_COPY_MAX) {
		unsigned char one[sizeof(h) + DG_COPY_MAX];

		memcpy(one, &h, sizeof(h));
		if (count == 1 && len) /* a NULL base comes with len 0 */
			memcpy(one + sizeof(h), iov[0].iov_base, len);
		else
			lm_copy_from_iov(one + sizeof(h), iov, count, 0, len);
		got = sendto(ep->fd, one, sizeof(h) + len, MSG_DONTWAIT, to,
		             lm_inet_len(ep->family));
	} else {
		v[0] = (struct iovec){&h, sizeof(h)};
		memcpy(v + 1, iov, count * sizeof(*iov));
		m.msg_name = (void *)to;
		m.msg_namelen = lm_inet_len(ep->family);
		got = sendmsg(ep->fd, &m, MSG_DONTWAIT);
	}
	if (got < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
			return -FI_EAGAIN;
		return lm_neg_errno(errno);
	}
	if (ep->send_cntr)
		lm_cntr_inc(ep->send_cntr);
	if (ep->tx_cq && !(flags & FI_INJECT) && (!ep->tx_selective || (flags & FI_COMPLETION)))
		lm_cq_write(ep->tx_cq, context, FI_SEND | FI_MSG, 0, NULL, 0, 0,
		            FI_ADDR_NOTAVAIL);
	return 0;
}

static ssize_t dg_send1(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                        fi_addr_t dest, void *context)
{
	struct iovec v = {(void *)buf, len};
	struct dg_ep *ep = ep_of(fid);

	(void)desc;
	return dg_send(ep, &v, 1, dest, context, 0, ep->tx_flags);
}

static ssize_t dg_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t dest, void *context)
{
	struct dg_ep *ep = ep_of(fid);

	(void)desc;
	return dg_send(ep, iov, count, dest, context, 0, ep->tx_flags);
}

static ssize_t dg_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return dg_send(ep_of(fid), msg->msg_iov, msg->iov_count, msg->addr, msg->context,
	               msg->data, flags);
}

static ssize_t dg_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec v = {(void *)buf, len};

	return dg_send(ep_of(fid), &v, 1, dest, NULL, 0, FI_INJECT);
}

static ssize_t dg_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dest, void *context)
{
	struct iovec v = {(void *)buf, len};
	struct dg_ep *ep = ep_of(fid);

	(void)desc;
	return dg_send(ep, &v, 1, dest, context, data, ep->tx_flags | FI_REMOTE_CQ_DATA);
}

static ssize_t dg_injectdata(struct fid_ep *fid, const void *buf, size_t len, uint64_t data,
                             fi_addr_t dest)
{
	struct iovec v = {(void *)buf, len};

	return dg_send(ep_of(fid), &v, 1, dest, NULL, data, FI_INJECT | FI_REMOTE_CQ_DATA);
}

static const struct fi_ops_msg dg_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = dg_recv,
    .recvv = dg_recvv,
    .recvmsg = dg_recvmsg,
    .send = dg_send1,
    .sendv = dg_sendv,
    .sendmsg = dg_sendmsg,
    .inject = dg_inject,
    .senddata = dg_senddata,
    .injectdata = dg_injectdata,
};

/* ---- multicast ------------------------------------------------------------- */

/* The index of the interface holding address a (0 when none does). */
static unsigned ifindex_of(const union lm_inet_addr *a)
{
	char name[IF_NAMESIZE];

	return lm_iface_of_addr(a, name) ? if_nametoindex(name) : 0;
}

static bool is_multicast(const union lm_inet_addr *a)
{
	return a->sa.sa_family == AF_INET ? IN_MULTICAST(ntohl(a->in.sin_addr.s_addr))
	                                  : IN6_IS_ADDR_MULTICAST(&a->in6.sin6_addr);
}

/* A socket bound to the group's port that takes the group's datagrams on
 * the endpoint's interface. */
static int mc_socket(struct dg_ep *ep, const union lm_inet_addr *g, int *out)
{
	int one = 1, zero = 0, fd, ret = 0;
	unsigned ifx = ifindex_of(&ep->name);

	fd = socket(ep->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return lm_neg_errno(errno);
	/* Every member on this host binds the same port. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, &g->sa, lm_inet_len(ep->family)))
		ret = lm_neg_errno(errno);
	else if (ep->family == AF_INET) {
		struct ip_mreqn r = {.imr_multiaddr = g->in.sin_addr,
		                     .imr_address = ep->name.in.sin_addr,
		                     .imr_ifindex = (int)ifx};

		/* Only this group's datagrams, not every group's the host joined. */
		(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
		if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &r, sizeof(r)))
			ret = lm_neg_errno(errno);
	} else {
		struct ipv6_mreq r = {.ipv6mr_multiaddr = g->in6.sin6_addr, .ipv6mr_interface = ifx};

		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero));
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &r, sizeof(r)))
			ret = lm_neg_errno(errno);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	*out = fd;
	return 0;
}

/* Sends to groups leave by the endpoint's interface (IPv6 needs it). */
static int mc_send_setup(struct dg_ep *ep)
{
	if (ep->family == AF_INET) {
		struct in_addr a = ep->name.in.sin_addr;

		return setsockopt(ep->fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof(a)) ? -errno : 0;
	}
	unsigned ifx = ifindex_of(&ep->name);

	return setsockopt(ep->fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifx, sizeof(ifx)) ? -errno
	                                                                               : 0;
}

static void mc_hooks(struct dg_mc *mc, bool add)
{
	struct dg_ep *ep = mc->ep;

	if (mc->fd < 0)
		return;
	if (ep->rx_cq)
		(add ? lm_cq_add_progress : lm_cq_del_progress)(ep->rx_cq, &mc->hook_cq);
	if (ep->recv_cntr)
		(add ? lm_cntr_add_progress : lm_cntr_del_progress)(ep->recv_cntr, &mc->hook_cntr);
}

static int mc_close(struct fid *fid)
{
	struct dg_mc *mc = lm_container_of(fid, struct dg_mc, mc_fid.fid);
	struct dg_ep *ep = mc->ep;

	mc_hooks(mc, false);
	lm_lock_acquire(&ep->lock);
	ep->mc[mc->slot] = NULL;
	ep->nmc--;
	lm_lock_release(&ep->lock);
	if (mc->fd >= 0)
		close(mc->fd);
	free(mc);
	return 0;
}

static const struct fi_ops mc_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = mc_close,
    .bind = lm_fid_no_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

static int dg_join(struct fid_ep *fid, const void *addr, uint64_t flags, struct fid_mc **out,
                   void *context)
{
	struct dg_ep *ep = ep_of(fid);
	struct fi_eq_entry ev = {.context = context};
	union lm_inet_addr g;
	struct dg_mc *mc;
	unsigned slot;
	int ret;

	if (!addr || !out || (flags & ~(uint64_t)(FI_SEND | FI_RECV)) ||
	    (flags & (FI_SEND | FI_RECV)) == (FI_SEND | FI_RECV))
		return -FI_EINVAL;
	if (!(ep->caps & FI_MULTICAST))
		return -FI_EOPNOTSUPP;
	if (lm_inet_load(&g, addr, lm_inet_len(ep->family), ep->family) || !is_multicast(&g))
		return -FI_EINVAL;
	if (!g.in.sin_port)
		g.in.sin_port = ep->name.in.sin_port; /* same offset in both families */
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (!ep->eq)
		return -FI_ENOEQ;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -FI_ENOMEM;
	mc->ep = ep;
	mc->group = g;
	mc->fd = -1;
	if (!(flags & FI_SEND) && (ret = mc_socket(ep, &g, &mc->fd))) {
		free(mc);
		return ret;
	}
	if ((ret = mc_send_setup(ep))) {
		if (mc->fd >= 0)
			close(mc->fd);
		free(mc);
		return lm_neg_errno(-ret);
	}
	mc->mc_fid.fid.fclass = FI_CLASS_MC;
	mc->mc_fid.fid.context = context;
	mc->mc_fid.fid.ops = (struct fi_ops *)&mc_fid_ops;
	mc->hook_cq = (struct lm_progress){.run = mc_progress_cq, .fd = mc->fd};
	mc->hook_cntr = (struct lm_progress){.run = mc_progress_cntr, .fd = mc->fd};
	lm_lock_acquire(&ep->lock);
	for (slot = 0; slot < DG_MC_MAX && ep->mc[slot]; slot++)
		;
	if (slot == DG_MC_MAX) {
		lm_lock_release(&ep->lock);
		if (mc->fd >= 0)
			close(mc->fd);
		free(mc);
		return -FI_ENOSPC;
	}
	mc->slot = slot;
	mc->mc_fid.fi_addr = DG_MC_TAG | slot;
	ep->mc[slot] = mc;
	ep->nmc++;
	lm_lock_release(&ep->lock);
	mc_hooks(mc, true);
	/* The membership is in place: the join is complete already. */
	ev.fid = &mc->mc_fid.fid;
	ret = (int)lm_eq_write(ep->eq, FI_JOIN_COMPLETE, &ev, sizeof(ev), 0);
	if (ret < 0) {
		mc_close(&mc->mc_fid.fid);
		return ret;
	}
	*out = &mc->mc_fid;
	return 0;
}

/* ---- names ----------------------------------------------------------------- */

static int dg_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);
	size_t need = lm_inet_len(ep->family);
	size_t have;

	if (!addrlen)
		return -FI_EINVAL;
	have = *addrlen;
	*addrlen = need;
	if (have < need || !addr)
		return -FI_ETOOSMALL;
	memcpy(addr, &ep->name, need);
	return 0;
}

static int ep_bind_socket(struct dg_ep *ep, const union lm_inet_addr *a)
{
	const struct udp_params *p = &ep->dom->params;
	union lm_inet_addr got;
	int fd, ret;

	ret = lm_sock_bind_type(SOCK_DGRAM, &a->sa, lm_inet_len(ep->family), p->port_low,
	                        p->port_high, &fd);
	if (ret)
		return ret;
	if (p->sockbuf > 0) {
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &p->sockbuf, sizeof(p->sockbuf));
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &p->sockbuf, sizeof(p->sockbuf));
	}
	if ((ret = lm_inet_of_fd(fd, false, &got))) {
		close(fd);
		return ret;
	}
	if (ep->fd >= 0)
		close(ep->fd);
	ep->fd = fd;
	ep->name = got;
	return 0;
}

static int dg_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);
	union lm_inet_addr a;

	if (!addr || lm_inet_load(&a, addr, addrlen, ep->family))
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	return ep_bind_socket(ep, &a);
}

static const struct fi_ops_cm dg_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = dg_setname,
    .getname = dg_getname,
    .getpeer = lm_cm_no_getpeer,
    .connect = lm_cm_no_connect,
    .listen = lm_cm_no_listen,
    .accept = lm_cm_no_accept,
    .reject = lm_cm_no_reject,
    .shutdown = lm_cm_no_shutdown,
    .join = dg_join,
};

/* ---- fi_ops_ep ------------------------------------------------------------- */

static ssize_t dg_cancel(fid_t fid, void *context)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);
	struct lm_list *n;
	ssize_t ret = -FI_ENOENT;

	lm_lock_acquire(&ep->lock);
	for (n = ep->posted.next; n != &ep->posted; n = n->next) {
		struct dg_rx *rx = lm_container_of(n, struct dg_rx, e.node);

		if (rx->e.context != context)
			continue;
		if (ep->rx_cq)
			lm_rx_cancelled(ep->rx_cq, &rx->e);
		rx_free(ep, rx);
		ret = 0;
		break;
	}
	lm_lock_release(&ep->lock);
	return ret;
}

static int dg_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t))
		return -FI_EINVAL;
	*(size_t *)optval = ep->min_multi;
	*optlen = sizeof(size_t);
	return 0;
}

static int dg_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	ep->min_multi = *(const size_t *)optval;
	return 0;
}

static ssize_t dg_rx_size_left(struct fid_ep *fid)
{
	struct dg_ep *ep = ep_of(fid);
	ssize_t n;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	lm_lock_acquire(&ep->lock);
	n = (ssize_t)(ep->rx_size - ep->rx_count);
	lm_lock_release(&ep->lock);
	return n;
}

/* Sends never wait in the endpoint: the whole queue is always free. */
static ssize_t dg_tx_size_left(struct fid_ep *fid)
{
	struct dg_ep *ep = ep_of(fid);

	return ep->enabled ? (ssize_t)LM_RDM_QUEUE_SIZE : -FI_EOPBADSTATE;
}

static const struct fi_ops_ep dg_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = dg_cancel,
    .getopt = dg_getopt,
    .setopt = dg_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = dg_rx_size_left,
    .tx_size_left = dg_tx_size_left,
};

/* ---- fid ------------------------------------------------------------------- */

static int dg_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);
	struct lm_domain *dom = &ep->dom->rdm.util;

	if (!bfid)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		return lm_cq_bind_ep(lm_container_of(bfid, struct lm_cq, cq_fid.fid), dom, flags,
		                     &ep->tx_cq, &ep->tx_selective, &ep->rx_cq, &ep->rx_selective);
	case FI_CLASS_CNTR: {
		struct lm_cntr *c = lm_container_of(bfid, struct lm_cntr, cntr_fid.fid);

		if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
		              FI_REMOTE_WRITE))
			return -FI_EBADFLAGS;
		/* Only messages move here: the other kinds never count. */
		if (!(flags & (FI_SEND | FI_RECV)) || c->domain != dom ||
		    ((flags & FI_SEND) && ep->send_cntr) || ((flags & FI_RECV) && ep->recv_cntr))
			return -FI_EINVAL;
		if (flags & FI_SEND) {
			ep->send_cntr = c;
			atomic_fetch_add(&c->ref, 1);
		}
		if (flags & FI_RECV) {
			ep->recv_cntr = c;
			atomic_fetch_add(&c->ref, 1);
		}
		return 0;
	}
	case FI_CLASS_AV: {
		struct lm_av *av = lm_container_of(bfid, struct lm_av, av_fid.fid);

		if (flags)
			return -FI_EBADFLAGS;
		if (ep->av || av->domain != dom)
			return -FI_EINVAL;
		ep->av = av;
		atomic_fetch_add(&av->ref, 1);
		return 0;
	}
	case FI_CLASS_EQ:
		if (ep->eq)
			return -FI_EINVAL;
		ep->eq = lm_container_of(bfid, struct lm_eq, eq_fid.fid);
		atomic_fetch_add(&ep->eq->ref, 1);
		return 0;
	case FI_CLASS_STX_CTX: {
		struct lm_rdm_stx *stx = lm_container_of(bfid, struct lm_rdm_stx, stx_fid.fid);

		if (flags)
			return -FI_EBADFLAGS;
		if (ep->stx || stx->dom != &ep->dom->rdm)
			return -FI_EINVAL;
		ep->stx = stx;
		atomic_fetch_add(&stx->ref, 1);
		return 0;
	}
	default: /* a shared receive context among them: fi_getinfo offers none */
		return -FI_EINVAL;
	}
}

static void hooks(struct dg_ep *ep, bool add)
{
	if (ep->rx_cq)
		(add ? lm_cq_add_progress : lm_cq_del_progress)(ep->rx_cq, &ep->hook_cq);
	if (ep->recv_cntr)
		(add ? lm_cntr_add_progress : lm_cntr_del_progress)(ep->recv_cntr,
		                                                    &ep->hook_cntr);
}

static int dg_enable(struct dg_ep *ep)
{
	if (ep->enabled)
		return 0;
	if (!ep->av)
		return -FI_ENOAV;
	ep->bounce = malloc(sizeof(struct udp_dg_hdr) + ep->max_msg);
	ep->read_small = true;
	if (!ep->bounce)
		return -FI_ENOMEM;
	ep->hook_cq = (struct lm_progress){.run = progress_cq, .fd = ep->fd};
	ep->hook_cntr = (struct lm_progress){.run = progress_cntr, .fd = ep->fd};
	hooks(ep, true);
	lm_lock_acquire(&ep->lock);
	ep->enabled = true;
	lm_lock_release(&ep->lock);
	return 0;
}

static int dg_control(struct fid *fid, int command, void *arg)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		return dg_enable(ep);
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG:
		if (!flags || !(*flags & (FI_TRANSMIT | FI_RECV)) ||
		    (*flags & FI_TRANSMIT && *flags & FI_RECV))
			return -FI_EINVAL;
		if (command == FI_GETOPSFLAG) {
			*flags = *flags & FI_TRANSMIT ? ep->tx_flags : ep->rx_flags;
			return 0;
		}
		if (*flags & LM_BAD_OP_FLAGS)
			return -FI_EBADFLAGS;
		if (*flags & FI_TRANSMIT)
			ep->tx_flags = *flags & ~FI_TRANSMIT;
		else
			ep->rx_flags = *flags & ~FI_RECV;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int dg_close(struct fid *fid)
{
	struct dg_ep *ep = lm_container_of(fid, struct dg_ep, ep_fid.fid);

	if (ep->nmc)
		return -FI_EBUSY; /* its groups first: the application holds them */
	if (ep->enabled)
		hooks(ep, false);
	if (ep->tx_cq)
		atomic_fetch_sub(&ep->tx_cq->ref, 1);
	if (ep->rx_cq)
		atomic_fetch_sub(&ep->rx_cq->ref, 1);
	if (ep->send_cntr)
		atomic_fetch_sub(&ep->send_cntr->ref, 1);
	if (ep->recv_cntr)
		atomic_fetch_sub(&ep->recv_cntr->ref, 1);
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->eq)
		atomic_fetch_sub(&ep->eq->ref, 1);
	if (ep->stx)
		atomic_fetch_sub(&ep->stx->ref, 1);
	if (ep->fd >= 0)
		close(ep->fd);
	atomic_fetch_sub(&ep->dom->rdm.util.ref, 1);
	lm_lock_fini(&ep->lock);
	free(ep->bounce);
	free(ep->rx_all);
	free(ep);
	return 0;
}

static const struct fi_ops dg_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = dg_close,
    .bind = dg_bind,
    .control = dg_control,
    .ops_open = lm_fid_no_ops_open,
};

/* ---- open ------------------------------------------------------------------ */

int udp_dgram_open(struct udp_domain *dom, struct fi_info *info, struct fid_ep **out,
                   void *context)
{
	struct dg_ep *ep;
	union lm_inet_addr a;
	size_t max;
	int ret;

	if ((info->tx_attr && info->tx_attr->size > LM_RDM_QUEUE_SIZE) ||
	    (info->rx_attr && info->rx_attr->size > LM_RDM_QUEUE_SIZE))
		return -FI_EINVAL;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->fd = -1;
	ep->caps = info->caps ? info->caps : UDP_DGRAM_CAPS;
	ep->family = lm_inet_info_family(info);
	ep->min_multi = DG_DEFAULT_MIN_MULTI;
	ep->rx_size = info->rx_attr && info->rx_attr->size ? info->rx_attr->size
	                                                    : LM_RDM_QUEUE_SIZE;
	if (info->tx_attr)
		ep->tx_flags = info->tx_attr->op_flags;
	if (info->rx_attr)
		ep->rx_flags = info->rx_attr->op_flags;
	lm_lock_init(&ep->lock, dom->rdm.util.shared);
	lm_list_init(&ep->posted);
	lm_list_init(&ep->rx_free);
	ep->rx_all = calloc(ep->rx_size, sizeof(*ep->rx_all));
	if (!ep->rx_all) {
		ret = -FI_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < ep->rx_size; i++)
		lm_list_push_back(&ep->rx_free, &ep->rx_all[i].e.node);

	a = (union lm_inet_addr){.sa.sa_family = (sa_family_t)ep->family};
	if (info->src_addr &&
	    lm_inet_load(&a, info->src_addr, info->src_addrlen, ep->family)) {
		ret = -FI_EINVAL;
		goto fail;
	}
	if ((ret = ep_bind_socket(ep, &a)))
		goto fail;
	max = udp_dgram_max(&dom->params, &ep->name) - sizeof(struct udp_dg_hdr);
	ep->max_msg = info->ep_attr && info->ep_attr->max_msg_size &&
	                      info->ep_attr->max_msg_size < max
	                  ? info->ep_attr->max_msg_size
	                  : max;
	ep->inject_size = info->tx_attr && info->tx_attr->inject_size &&
	                          info->tx_attr->inject_size < ep->max_msg
	                      ? info->tx_attr->inject_size
	                      : ep->max_msg;

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = (struct fi_ops *)&dg_fid_ops;
	ep->ep_fid.ops = (struct fi_ops_ep *)&dg_ep_ops;
	ep->ep_fid.cm = (struct fi_ops_cm *)&dg_cm_ops;
	ep->ep_fid.msg = (struct fi_ops_msg *)&dg_msg_ops;
	ep->ep_fid.tagged = (struct fi_ops_tagged *)&lm_nosys_tagged_ops;
	ep->ep_fid.rma = (struct fi_ops_rma *)&lm_nosys_rma_ops;
	ep->ep_fid.atomic = (struct fi_ops_atomic *)&lm_nosys_atomic_ops;
	atomic_fetch_add(&dom->rdm.util.ref, 1);
	*out = &ep->ep_fid;
	return 0;
fail:
	if (ep->fd >= 0)
		close(ep->fd);
	lm_lock_fini(&ep->lock);
	free(ep->rx_all);
	free(ep);
	return ret;
}
