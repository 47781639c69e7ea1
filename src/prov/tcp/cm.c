/* cm.c - connection management of the tcp provider (man fi_cm): passive
 * endpoints that listen and turn connection requests into FI_CONNREQ
 * events, and FI_EP_MSG endpoints - the RDM engine's endpoint with one
 * peer - that connect, accept, shut down and report FI_CONNECTED,
 * FI_SHUTDOWN and refused or timed-out connections on their EQ.  Wire
 * messages: proto.h.  Progress runs from the EQ's reads (hooks), so an
 * application that only waits on its EQ still sees its events. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

/* ---- messages -------------------------------------------------------------- */

static int cm_send(int fd, uint32_t kind, const void *data, size_t len)
{
	struct tcp_cm_msg m = {.magic = TCP_MAGIC,
	                       .version = TCP_PROTO_VERSION,
	                       .kind = kind,
	                       .data_len = (uint32_t)len};
	struct iovec v[2] = {{&m, sizeof(m)}, {(void *)data, len}};
	struct msghdr h = {.msg_iov = v, .msg_iovlen = len ? 2 : 1};

	/* A fresh connection's socket buffer takes a few hundred bytes. */
	return sendmsg(fd, &h, MSG_NOSIGNAL) == (ssize_t)(sizeof(m) + len) ? 0 : -FI_EIO;
}

/* Reading one message exactly, in as many calls as it takes. */
struct cm_in {
	unsigned char buf[sizeof(struct tcp_cm_msg) + TCP_CM_DATA_MAX];
	size_t got;
};

/* 1: a whole valid message is in in->buf; 0: not yet; <0: bad or closed. */
static int cm_read(int fd, struct cm_in *in)
{
	const size_t hs = sizeof(struct tcp_cm_msg);

	for (;;) {
		size_t want = hs;
		struct tcp_cm_msg m;
		ssize_t n;

		if (in->got >= hs) {
			memcpy(&m, in->buf, hs);
			if (tcp_cm_check(&m))
				return -FI_EINVAL;
			want = hs + m.data_len;
			if (in->got == want)
				return 1;
		}
		n = recv(fd, in->buf + in->got, want - in->got, MSG_DONTWAIT);
		if (tcp_conn_gone(n))
			return -FI_ECONNRESET;
		if (n < 0)
			return 0;
		in->got += (size_t)n;
	}
}

static const struct tcp_cm_msg *cm_hdr(const struct cm_in *in)
{
	return (const struct tcp_cm_msg *)in->buf;
}

/* The address as the info's format gives it, into buf of *len bytes
 * (NULL: none): as much as fits, *len set to the whole length, and
 * -FI_ETOOSMALL when that did not fit (man fi_cm). */
static int addr_out(uint32_t fmt, const union lm_inet_addr *a, void *buf, size_t *len)
{
	char text[80];
	size_t need = sizeof(text), room = buf ? *len : 0;
	const void *src = text;

	if (fmt == FI_ADDR_STR) {
		if (lm_inet_to_str(a, text, &need))
			return -FI_EINVAL;
	} else {
		src = a;
		need = lm_inet_len(a->sa.sa_family);
	}
	if (room)
		memcpy(buf, src, LM_MIN(room, need));
	*len = need;
	return room < need ? -FI_ETOOSMALL : 0;
}

/* An address in the info's format, of the family the format names
 * (FI_SOCKADDR_IN, FI_SOCKADDR_IN6) or either. */
static int addr_in(uint32_t fmt, const void *addr, size_t len, union lm_inet_addr *out)
{
	int family = fmt == FI_SOCKADDR_IN    ? AF_INET
	             : fmt == FI_SOCKADDR_IN6 ? AF_INET6
	                                      : AF_UNSPEC;

	if (!addr)
		return -FI_EINVAL;
	if (fmt == FI_ADDR_STR)
		return memchr(addr, 0, len) ? lm_inet_parse(addr, NULL, family, out)
		                            : -FI_EINVAL;
	return lm_inet_load(out, addr, len, family);
}

/* ---- passive endpoints ---------------------------------------------------- */

/* Events a pep's progress takes at once: requests are few; more wait for the next. */
#define PEP_EV_BATCH 16

struct tcp_pep;

/* A connection request: the accepted socket until fi_accept or
 * fi_reject; info->handle of the FI_CONNREQ event names it. */
struct tcp_connreq {
	struct fid fid; /* FI_CLASS_CONNREQ */
	struct lm_list node;
	struct tcp_pep *pep;
	int fd;
	union lm_inet_addr peer;
	struct cm_in in;
};

struct tcp_pep {
	struct fid_pep pep_fid;
	struct lm_fabric *fab;
	struct fi_info *info;
	int lfd, epfd;
	union lm_inet_addr addr;
	struct lm_eq *eq;
	struct lm_progress prog;
	struct lm_list pending; /* tcp_connreq still being read */
	bool listening;
	struct lm_lock lock;
	struct tcp_params params; /* as when it opened */
};

/* A listening socket's beginnings: bound to a (port 0: in the provider's
 * port range, as the RDM endpoints' listeners), not listening yet. */
static int pep_socket(const struct tcp_params *params, const union lm_inet_addr *a,
                      int *out)
{
	int ret = lm_sock_bind(&a->sa, lm_inet_len(a->sa.sa_family), params->port_low,
	                       params->port_high, out);

	if (ret)
		LM_DEBUG(tcp_log_prov, FI_LOG_EP_CTRL, "bind: %s\n", fi_strerror(-ret));
	return ret;
}

static int connreq_close(struct fid *fid)
{
	struct tcp_connreq *r = lm_container_of(fid, struct tcp_connreq, fid);

	if (r->fd >= 0)
		close(r->fd);
	free(r);
	return 0;
}

static const struct fi_ops connreq_ops = {
    .size = sizeof(struct fi_ops),
    .close = connreq_close,
    .bind = lm_fid_no_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

static void connreq_drop(struct tcp_pep *p, struct tcp_connreq *r)
{
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, r->fd, NULL);
	lm_list_remove(&r->node);
	connreq_close(&r->fid);
}

/* A whole request arrived: FI_CONNREQ with an info naming it. */
static void connreq_post(struct tcp_pep *p, struct tcp_connreq *r)
{
	const struct tcp_cm_msg *m = cm_hdr(&r->in);
	unsigned char ev[sizeof(struct fi_eq_cm_entry) + TCP_CM_DATA_MAX];
	struct fi_eq_cm_entry *e = (struct fi_eq_cm_entry *)ev;
	struct fi_info *info = fi_dupinfo(p->info);
	char text[80];
	size_t len = sizeof(text);

	if (!info || m->kind != TCP_CM_REQ) {
		fi_freeinfo(info);
		connreq_drop(p, r);
		return;
	}
	free(info->dest_addr);
	info->dest_addr = NULL;
	info->dest_addrlen = 0;
	if (!addr_out(info->addr_format, &r->peer, text, &len)) {
		info->dest_addr = malloc(len);
		if (info->dest_addr) {
			memcpy(info->dest_addr, text, len);
			info->dest_addrlen = len;
		}
	}
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, r->fd, NULL);
	lm_list_remove(&r->node);
	info->handle = &r->fid;
	memset(e, 0, sizeof(*e));
	e->fid = &p->pep_fid.fid;
	e->info = info;
	memcpy(e->data, r->in.buf + sizeof(*m), m->data_len);
	if (lm_eq_write(p->eq, FI_CONNREQ, ev, sizeof(*e) + m->data_len, 0) < 0) {
		info->handle = NULL;
		fi_freeinfo(info);
		connreq_close(&r->fid);
	}
}

static void pep_progress(struct lm_progress *prog)
{
	struct tcp_pep *p = lm_container_of(prog, struct tcp_pep, prog);
	struct epoll_event ev[PEP_EV_BATCH];
	int n;

	lm_lock_acquire(&p->lock);
	if (!p->listening) {
		lm_lock_release(&p->lock);
		return;
	}
	n = epoll_wait(p->epfd, ev, PEP_EV_BATCH, 0);
	for (int i = 0; i < n; i++) {
		struct tcp_connreq *r = ev[i].data.ptr;
		int ret;

		if (!r) {
			int fd;

			while ((fd = accept4(p->lfd, NULL, NULL,
			                     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
				struct epoll_event e = {.events = EPOLLIN};

				r = calloc(1, sizeof(*r));
				if (!r) {
					close(fd);
					continue;
				}
				r->fid.fclass = FI_CLASS_CONNREQ;
				r->fid.ops = (struct fi_ops *)&connreq_ops;
				r->pep = p;
				r->fd = fd;
				lm_inet_of_fd(fd, true, &r->peer);
				e.data.ptr = r;
				lm_list_push_back(&p->pending, &r->node);
				if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &e)) {
					lm_list_remove(&r->node);
					connreq_close(&r->fid);
				}
			}
			continue;
		}
		ret = cm_read(r->fd, &r->in);
		if (ret < 0) {
			LM_INFO(tcp_log_prov, FI_LOG_EP_CTRL,
			        "dropping a connection request: %s\n", fi_strerror(-ret));
			connreq_drop(p, r);
		} else if (ret > 0) {
			connreq_post(p, r);
		}
	}
	lm_lock_release(&p->lock);
}

static int pep_close(struct fid *fid)
{
	struct tcp_pep *p = lm_container_of(fid, struct tcp_pep, pep_fid.fid);
	struct lm_list *it;

	if (p->eq) {
		lm_eq_del_progress(p->eq, &p->prog);
		atomic_fetch_sub(&p->eq->ref, 1);
	}
	while ((it = lm_list_pop_front(&p->pending))) {
		lm_list_init(it);
		connreq_drop(p, lm_container_of(it, struct tcp_connreq, node));
	}
	if (p->lfd >= 0)
		close(p->lfd);
	close(p->epfd);
	fi_freeinfo(p->info);
	lm_lock_fini(&p->lock);
	free(p);
	return 0;
}

static int pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct tcp_pep *p = lm_container_of(fid, struct tcp_pep, pep_fid.fid);

	if (!bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (p->eq)
		return -FI_EINVAL;
	p->eq = lm_container_of(bfid, struct lm_eq, eq_fid.fid);
	atomic_fetch_add(&p->eq->ref, 1);
	p->prog.run = pep_progress;
	p->prog.fd = p->epfd;
	lm_list_init(&p->prog.node);
	lm_eq_add_progress(p->eq, &p->prog);
	return 0;
}

static const struct fi_ops pep_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = pep_close,
    .bind = pep_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

static int pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct tcp_pep *p = lm_container_of(fid, struct tcp_pep, pep_fid.fid);

	if (!addrlen)
		return -FI_EINVAL;
	return addr_out(p->info->addr_format, &p->addr, addr, addrlen);
}

/* The socket was bound when the endpoint was made (so fi_getname has an
 * address to give); a new name is a new socket, the old one kept until
 * the new bind worked. */
static int pep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct tcp_pep *p = lm_container_of(fid, struct tcp_pep, pep_fid.fid);
	union lm_inet_addr a;
	int fd, ret;

	if (p->listening || p->lfd < 0)
		return -FI_EOPBADSTATE;
	if (addr_in(p->info->addr_format, addr, addrlen, &a) ||
	    a.sa.sa_family != p->addr.sa.sa_family)
		return -FI_EINVAL;
	ret = pep_socket(&p->params, &a, &fd);
	if (ret)
		return ret;
	close(p->lfd);
	p->lfd = fd;
	lm_inet_of_fd(p->lfd, false, &p->addr);
	return 0;
}

static int pep_listen(struct fid_pep *fid)
{
	struct tcp_pep *p = lm_container_of(fid, struct tcp_pep, pep_fid);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int ret;

	if (!p->eq)
		return -FI_ENOEQ;
	if (p->listening)
		return 0;
	if (p->lfd < 0)
		return -FI_EOPBADSTATE; /* an active endpoint took its socket */
	ret = lm_sock_listen(p->lfd);
	if (!ret && epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev))
		ret = lm_neg_errno(errno);
	if (ret)
		return ret;
	lm_lock_acquire(&p->lock);
	p->listening = true;
	lm_lock_release(&p->lock);
	return 0;
}

static int pep_reject(struct fid_pep *fid, fid_t handle, const void *param,
                      size_t paramlen)
{
	struct tcp_connreq *r;

	(void)fid;
	if (!handle || handle->fclass != FI_CLASS_CONNREQ || paramlen > TCP_CM_DATA_MAX ||
	    (paramlen && !param))
		return -FI_EINVAL;
	r = lm_container_of(handle, struct tcp_connreq, fid);
	cm_send(r->fd, TCP_CM_REJECT, param, paramlen);
	connreq_close(&r->fid);
	return 0;
}

/* fi_endpoint with info->handle a passive endpoint (man fi_endpoint): the
 * active endpoint gets its bound socket, so it connects from the address
 * fi_setname gave, and the passive endpoint keeps nothing but its name. */
static int pep_take(fid_t handle, int family, int *fd, union lm_inet_addr *addr)
{
	struct tcp_pep *p = lm_container_of(handle, struct tcp_pep, pep_fid.fid);
	int ret = 0;

	if (handle->ops != &pep_fid_ops)
		return -FI_EINVAL;
	lm_lock_acquire(&p->lock);
	if (p->listening || p->lfd < 0 || p->addr.sa.sa_family != family) {
		ret = p->addr.sa.sa_family != family ? -FI_EINVAL : -FI_EOPBADSTATE;
	} else {
		*fd = p->lfd;
		*addr = p->addr;
		p->lfd = -1;
	}
	lm_lock_release(&p->lock);
	return ret;
}

static const struct fi_ops_cm pep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = pep_setname,
    .getname = pep_getname,
    .getpeer = lm_cm_no_getpeer,
    .connect = lm_cm_no_connect,
    .listen = pep_listen,
    .accept = lm_cm_no_accept,
    .reject = pep_reject,
    .shutdown = lm_cm_no_shutdown,
    .join = lm_cm_no_join,
};

/* FI_OPT_CM_DATA_SIZE (read only): the connection data a request, accept
 * or reject carries, passive and active endpoints alike.  -FI_ENOPROTOOPT
 * for any other option, for the engine to answer on active endpoints. */
static int cm_getopt(int level, int optname, void *optval, size_t *optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_CM_DATA_SIZE)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t))
		return -FI_EINVAL;
	*(size_t *)optval = TCP_CM_DATA_MAX;
	*optlen = sizeof(size_t);
	return 0;
}

static int pep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid;
	return cm_getopt(level, optname, optval, optlen);
}

static int cm_setopt(fid_t fid, int level, int optname, const void *optval,
                      size_t optlen)
{
	(void)fid, (void)optval, (void)optlen;
	if (level == FI_OPT_ENDPOINT && optname == FI_OPT_CM_DATA_SIZE)
		return -FI_EINVAL; /* read only */
	return -FI_ENOPROTOOPT;
}

static ssize_t pep_cancel(fid_t fid, void *context)
{
	(void)fid, (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops_ep pep_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = pep_cancel,
    .getopt = pep_getopt,
    .setopt = cm_setopt,
};

int tcp_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **out,
                   void *context)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct tcp_pep *p;
	union lm_inet_addr a = {.sa.sa_family = AF_INET};
	int ret;

	if (!info || !out || !info->ep_attr || info->ep_attr->type != FI_EP_MSG)
		return -FI_EINVAL;
	if (info->addr_format == FI_SOCKADDR_IN6)
		a.sa.sa_family = AF_INET6;
	if (info->src_addr &&
	    addr_in(info->addr_format, info->src_addr, info->src_addrlen, &a))
		return -FI_EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->lfd = -1;
	p->info = fi_dupinfo(info);
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!p->info || p->epfd < 0) {
		ret = p->info ? lm_neg_errno(errno) : -FI_ENOMEM;
		goto err;
	}
	tcp_params_read(&p->params);
	ret = pep_socket(&p->params, &a, &p->lfd);
	if (ret)
		goto err;
	lm_inet_of_fd(p->lfd, false, &p->addr);
	p->fab = fab;
	lm_list_init(&p->pending);
	lm_lock_init(&p->lock, true);
	p->pep_fid.fid.fclass = FI_CLASS_PEP;
	p->pep_fid.fid.context = context;
	p->pep_fid.fid.ops = (struct fi_ops *)&pep_fid_ops;
	p->pep_fid.cm = (struct fi_ops_cm *)&pep_cm_ops;
	p->pep_fid.ops = (struct fi_ops_ep *)&pep_ep_ops;
	*out = &p->pep_fid;
	return 0;
err:
	if (p->lfd >= 0)
		close(p->lfd);
	if (p->epfd >= 0)
		close(p->epfd);
	fi_freeinfo(p->info);
	free(p);
	return ret;
}

/* ---- connected endpoints --------------------------------------------------- */

enum msg_state {
	MSG_IDLE,
	MSG_CONNECTING, /* connect() in progress */
	MSG_REQ_SENT,   /* waiting for accept or reject */
	MSG_CONNECTED,
	MSG_DOWN, /* shut down, refused, lost */
};

struct tcp_msg {
	struct lm_rdm_ep *ep;
	struct lm_eq *eq;
	struct lm_progress prog;
	int epfd; /* the hook's fd: the connecting socket, then the link's */
	enum msg_state state;
	int fd;     /* while connecting; before, a socket taken from a pep */
	bool bound; /* fd is that socket, named self */
	union lm_inet_addr self, peer;
	unsigned char param[TCP_CM_DATA_MAX];
	size_t param_len;
	struct cm_in in;
	uint64_t start_ms;
	struct lm_lock lock;
};

static struct tcp_msg *msg_of(struct fid *fid)
{
	struct lm_rdm_ep *ep = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;

	return ep->prov;
}

static void msg_event(struct tcp_msg *m, uint32_t event, const void *data, size_t len)
{
	unsigned char ev[sizeof(struct fi_eq_cm_entry) + TCP_CM_DATA_MAX];
	struct fi_eq_cm_entry *e = (struct fi_eq_cm_entry *)ev;

	if (!m->eq)
		return;
	memset(e, 0, sizeof(*e));
	e->fid = &m->ep->ctx.ep_fid.fid;
	if (len)
		memcpy(e->data, data, len);
	lm_eq_write(m->eq, event, ev, sizeof(*e) + len, 0);
}

static void msg_error(struct tcp_msg *m, int err, const void *data, size_t len)
{
	struct fi_eq_err_entry e = {.fid = &m->ep->ctx.ep_fid.fid,
	                            .err = err,
	                            .prov_errno = err,
	                            .err_data = len ? (void *)data : NULL,
	                            .err_data_size = len};

	if (m->fd >= 0) {
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, m->fd, NULL);
		close(m->fd);
		m->fd = -1;
	}
	m->state = MSG_DOWN;
	if (m->eq)
		lm_eq_write_err(m->eq, &e);
}

/* The connection is made (either side): hand the socket to the link. */
static int msg_established(struct tcp_msg *m, int fd)
{
	struct lm_rdm_ep *ep = m->ep;
	struct epoll_event ev = {.events = EPOLLIN};
	int ret;

	lm_lock_acquire(ep->lock);
	ret = ep->link ? tcp_link_adopt(ep->link, fd, &m->peer) : -FI_EOPBADSTATE;
	lm_lock_release(ep->lock);
	if (!ret)
		ret = lm_rdm_ep_connected(ep, &m->peer);
	if (ret)
		return ret;
	epoll_ctl(m->epfd, EPOLL_CTL_ADD, ep->link->fd, &ev);
	/* The link watches its socket only while a CQ or counter reader
	 * sleeps; an EQ reader waits for the peer's close, so the hook's fd
	 * watches for that itself (the registration ends when the link
	 * closes the socket). */
	epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd,
	          &(struct epoll_event){.events = EPOLLRDHUP, .data.fd = fd});
	m->state = MSG_CONNECTED;
	return 0;
}

static void msg_progress(struct lm_progress *prog)
{
	struct tcp_msg *m = lm_container_of(prog, struct tcp_msg, prog);
	bool lost;

	lm_lock_acquire(&m->lock);
	switch (m->state) {
	case MSG_CONNECTING: {
		struct pollfd pfd = {.fd = m->fd, .events = POLLOUT};
		int err = 0;
		socklen_t len = sizeof(err);

		if (poll(&pfd, 1, 0) <= 0)
			break;
		getsockopt(m->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || cm_send(m->fd, TCP_CM_REQ, m->param, m->param_len)) {
			msg_error(m, err == ETIMEDOUT ? FI_ETIMEDOUT : FI_ECONNREFUSED,
			          NULL, 0);
			break;
		}
		m->state = MSG_REQ_SENT;
		epoll_ctl(m->epfd, EPOLL_CTL_MOD, m->fd,
		          &(struct epoll_event){.events = EPOLLIN});
		__attribute__((fallthrough)); /* the answer may be there already */
	}
	case MSG_REQ_SENT: {
		int ret = cm_read(m->fd, &m->in);
		const struct tcp_cm_msg *h = cm_hdr(&m->in);
		const unsigned char *data = m->in.buf + sizeof(*h);
		int fd = m->fd;

		if (ret == 0) {
			if (lm_now_ms() - m->start_ms >
			    (uint64_t)((const struct tcp_params *)m->ep->dom->link_ctx)
			        ->conn_timeout_ms)
				msg_error(m, FI_ETIMEDOUT, NULL, 0);
			break;
		}
		if (ret < 0 || h->kind == TCP_CM_REQ) {
			msg_error(m, FI_ECONNREFUSED, NULL, 0);
			break;
		}
		if (h->kind == TCP_CM_REJECT) {
			msg_error(m, FI_ECONNREFUSED, data, h->data_len);
			break;
		}
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, NULL);
		m->fd = -1;
		if (msg_established(m, fd)) {
			close(fd);
			msg_error(m, FI_ECONNREFUSED, NULL, 0);
			break;
		}
		msg_event(m, FI_CONNECTED, data, h->data_len);
		break;
	}
	case MSG_CONNECTED:
		/* Drive the data path too: a peer's close is noticed there. */
		lm_lock_release(&m->lock);
		lm_rdm_progress(m->ep, false);
		lm_lock_acquire(&m->lock);
		lm_lock_acquire(m->ep->lock);
		lost = m->ep->link && tcp_link_lost(m->ep->link);
		lm_lock_release(m->ep->lock);
		if (lost && m->state == MSG_CONNECTED) {
			m->state = MSG_DOWN;
			lm_rdm_ep_disconnected(m->ep, FI_ENOTCONN);
			msg_event(m, FI_SHUTDOWN, NULL, 0);
		}
		break;
	default:
		break;
	}
	lm_lock_release(&m->lock);
}

/* The extension's lost hook: a CQ's or counter's progress found the
 * connection gone, and has failed what was posted on it; the EQ hears of
 * it at once, whether or not anybody reads the EQ. */
static void msg_lost(struct lm_rdm_ep *ep)
{
	struct tcp_msg *m = ep->prov;

	lm_lock_acquire(&m->lock);
	if (m->state == MSG_CONNECTED) {
		m->state = MSG_DOWN;
		msg_event(m, FI_SHUTDOWN, NULL, 0);
	}
	lm_lock_release(&m->lock);
}

/* fi_enable, or the enabling fi_connect and fi_accept do: the engine's. */
static int msg_enable(struct tcp_msg *m)
{
	return fi_enable(&m->ep->ctx.ep_fid);
}

/* The start of fi_connect and fi_accept: an EQ bound, the endpoint
 * enabled, no connection begun.  0 with m->lock held, else the error. */
static int msg_begin(struct tcp_msg *m)
{
	int ret;

	if (!m->eq)
		return -FI_ENOEQ;
	ret = msg_enable(m);
	if (ret)
		return ret;
	lm_lock_acquire(&m->lock);
	if (m->state != MSG_IDLE) {
		lm_lock_release(&m->lock);
		return -FI_EOPBADSTATE;
	}
	return 0;
}

static int msg_connect(struct fid_ep *fid, const void *addr, const void *param,
                       size_t paramlen)
{
	struct tcp_msg *m = msg_of(&fid->fid);
	struct fi_info *info = m->ep->info;
	struct epoll_event ev = {.events = EPOLLOUT};
	int ret;

	if (paramlen > TCP_CM_DATA_MAX || (paramlen && !param))
		return -FI_EINVAL;
	if (!addr)
		addr = info->dest_addr;
	/* Of the domain's family: the link's addresses are all one size. */
	if (addr_in(info->addr_format, addr,
	            info->dest_addrlen ? info->dest_addrlen : sizeof(m->peer), &m->peer) ||
	    lm_inet_len(m->peer.sa.sa_family) != m->ep->dom->link_ops->addrlen)
		return -FI_EINVAL;
	ret = msg_begin(m);
	if (ret)
		return ret;
	if (!m->bound)
		m->fd = socket(m->peer.sa.sa_family,
		               SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->fd < 0) {
		ret = lm_neg_errno(errno);
		lm_lock_release(&m->lock);
		return ret;
	}
	if (paramlen)
		memcpy(m->param, param, paramlen);
	m->param_len = paramlen;
	m->start_ms = lm_now_ms();
	m->in.got = 0;
	if (connect(m->fd, &m->peer.sa, lm_inet_len(m->peer.sa.sa_family)) &&
	    errno != EINPROGRESS) {
		close(m->fd);
		m->fd = -1;
		m->bound = false;
		lm_lock_release(&m->lock);
		return -FI_ECONNREFUSED;
	}
	ev.data.fd = m->fd;
	epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->fd, &ev);
	m->state = MSG_CONNECTING;
	lm_lock_release(&m->lock);
	return 0;
}

static int msg_accept(struct fid_ep *fid, const void *param, size_t paramlen)
{
	struct tcp_msg *m = msg_of(&fid->fid);
	fid_t handle = m->ep->info->handle;
	struct tcp_connreq *r;
	int ret;

	if (paramlen > TCP_CM_DATA_MAX || (paramlen && !param))
		return -FI_EINVAL;
	if (!handle || handle->fclass != FI_CLASS_CONNREQ)
		return -FI_EINVAL;
	ret = msg_begin(m);
	if (ret)
		return ret;
	r = lm_container_of(handle, struct tcp_connreq, fid);
	m->peer = r->peer;
	ret = cm_send(r->fd, TCP_CM_ACCEPT, param, paramlen);
	if (!ret)
		ret = msg_established(m, r->fd);
	if (ret) {
		lm_lock_release(&m->lock);
		return ret;
	}
	r->fd = -1; /* the link's now */
	connreq_close(&r->fid);
	m->ep->info->handle = NULL;
	msg_event(m, FI_CONNECTED, NULL, 0);
	lm_lock_release(&m->lock);
	return 0;
}

/* The connection ends here: the link closed, what was posted cancelled,
 * and FI_SHUTDOWN on our own EQ too - the reference does the same, and
 * applications (fabtests' cm_data) wait for it after their own
 * fi_shutdown.  One FI_SHUTDOWN per connection: a connection the peer
 * already ended (MSG_DOWN, event posted then) is not reported again. */
static int msg_shutdown(struct fid_ep *fid, uint64_t flags)
{
	struct tcp_msg *m = msg_of(&fid->fid);

	(void)flags;
	lm_lock_acquire(&m->lock);
	if (m->state != MSG_CONNECTED) {
		enum msg_state st = m->state;

		lm_lock_release(&m->lock);
		return st == MSG_DOWN ? 0 : -FI_EOPBADSTATE;
	}
	m->state = MSG_DOWN;
	lm_lock_acquire(m->ep->lock);
	if (m->ep->link)
		tcp_link_shutdown(m->ep->link);
	lm_lock_release(m->ep->lock);
	lm_rdm_ep_disconnected(m->ep, FI_ECANCELED);
	msg_event(m, FI_SHUTDOWN, NULL, 0);
	lm_lock_release(&m->lock);
	return 0;
}

/* Until the link has the connection, a socket taken from a passive
 * endpoint names the endpoint; the link does after. */
static int msg_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct tcp_msg *m = msg_of(fid);
	bool own;

	if (!addrlen)
		return -FI_EINVAL;
	lm_lock_acquire(&m->lock);
	own = m->bound && m->state < MSG_CONNECTED;
	lm_lock_release(&m->lock);
	return own ? addr_out(m->ep->info->addr_format, &m->self, addr, addrlen)
	           : lm_rdm_getname(fid, addr, addrlen);
}

static int msg_getpeer(struct fid_ep *fid, void *addr, size_t *addrlen)
{
	struct tcp_msg *m = msg_of(&fid->fid);

	if (!addrlen)
		return -FI_EINVAL;
	if (m->state != MSG_CONNECTED && m->state != MSG_DOWN)
		return -FI_EOPBADSTATE;
	return addr_out(m->ep->info->addr_format, &m->peer, addr, addrlen);
}

/* Before the engine's teardown: nothing calls in any more. */
static void msg_closing(struct lm_rdm_ep *ep)
{
	struct tcp_msg *m = ep->prov;

	if (m->eq) {
		lm_eq_del_progress(m->eq, &m->prog);
		atomic_fetch_sub(&m->eq->ref, 1);
		m->eq = NULL;
	}
}

static void msg_closed(void *prov)
{
	struct tcp_msg *m = prov;

	if (m->fd >= 0)
		close(m->fd);
	close(m->epfd);
	lm_lock_fini(&m->lock);
	free(m);
}

/* An EQ; 1 for what the engine binds (shared contexts too). */
static int msg_bind(struct lm_rdm_ep *ep, struct fid *bfid, uint64_t flags)
{
	struct tcp_msg *m = ep->prov;

	(void)flags;
	if (bfid->fclass != FI_CLASS_EQ)
		return 1;
	if (m->eq)
		return -FI_EINVAL;
	m->eq = lm_container_of(bfid, struct lm_eq, eq_fid.fid);
	atomic_fetch_add(&m->eq->ref, 1);
	lm_eq_add_progress(m->eq, &m->prog);
	return 0;
}

static int msg_getopt(struct lm_rdm_ep *ep, int level, int optname, void *optval,
                      size_t *optlen)
{
	(void)ep;
	return cm_getopt(level, optname, optval, optlen);
}

static int msg_setopt(struct lm_rdm_ep *ep, int level, int optname, const void *optval,
                      size_t optlen)
{
	return cm_setopt(&ep->ctx.ep_fid.fid, level, optname, optval, optlen);
}

static const struct fi_ops_cm msg_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = lm_rdm_setname,
    .getname = msg_getname,
    .getpeer = msg_getpeer,
    .connect = msg_connect,
    .listen = lm_cm_no_listen,
    .accept = msg_accept,
    .reject = lm_cm_no_reject,
    .shutdown = msg_shutdown,
    .join = lm_cm_no_join,
};

/* What a connected endpoint adds to the engine's. */
static const struct lm_rdm_ep_ext msg_ext = {
    .bind = msg_bind,
    .closing = msg_closing,
    .closed = msg_closed,
    .getopt = msg_getopt,
    .setopt = msg_setopt,
    .lost = msg_lost,
    .cm = &msg_cm_ops,
};

int tcp_msg_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out,
                     void *context)
{
	struct tcp_msg *m;
	struct fid_ep *fid;
	struct lm_rdm_ep *ep;
	int ret;

	if (info && info->handle && info->handle->fclass != FI_CLASS_CONNREQ &&
	    info->handle->fclass != FI_CLASS_PEP)
		return -FI_EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	m->fd = -1;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->epfd < 0) {
		ret = lm_neg_errno(errno);
		free(m);
		return ret;
	}
	ret = lm_rdm_endpoint_ext(domain, info, &msg_ext, m, &fid, context);
	if (ret) {
		close(m->epfd);
		free(m);
		return ret;
	}
	/* m is the endpoint's now: fi_close releases it (msg_closed). */
	ep = lm_rdm_ep_of(fid);
	m->ep = ep;
	lm_lock_init(&m->lock, true);
	m->prog.run = msg_progress;
	m->prog.fd = m->epfd;
	lm_list_init(&m->prog.node);
	if (info && info->handle && info->handle->fclass == FI_CLASS_PEP) {
		int family = ep->dom->link_ops->addrlen == tcp6_link_ops.addrlen ? AF_INET6 : AF_INET;

		ret = pep_take(info->handle, family, &m->fd, &m->self);
		if (ret) {
			fi_close(&fid->fid);
			return ret;
		}
		m->bound = true;
	}
	*out = fid;
	return 0;
}
