/* srx.c - shared receive contexts of the tcp provider (fi_srx_context, man
 * fi_endpoint): one queue of receives that serves every FI_EP_MSG endpoint
 * bound to it.  Each endpoint keeps the engine's own queues; a message
 * that finds no receive of the endpoint's waits there as unexpected, and
 * the context hands it its earliest receive that takes it, by posting that
 * receive to the endpoint.  So data, rendezvous and completions are the
 * engine's, completions go to the endpoint's CQ (as the man page has it),
 * and a receive is committed to an endpoint only once a message of that
 * endpoint's is there for it.
 *
 *   fi_recv(srx) --> pending: r1 r2 r3 ...  (posting order)
 *                          |  feed: r1 to the first member holding a
 *                          v  message r1 takes
 *   member eps:  ep A [unexp: m1]   ep B [unexp: -]   ep C [unexp: m2]
 *
 * Feeding runs when a receive is posted and after each member's progress
 * (a hook on the member's receive CQ or counter, after the engine's). */
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

/* What a receive here cannot be: a multi-receive buffer (it would be
 * committed to one endpoint), a peek or claim (of which endpoint's?). */
#define SRX_NOT_FLAGS (FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD)

struct tcp_srx {
	struct fid_ep ep_fid; /* FI_CLASS_SRX_CTX */
	struct lm_rdm_domain *dom;
	struct fi_rx_attr attr;
	struct lm_lock lock;
	struct lm_list pending; /* struct lm_rx_entry, posting order */
	atomic_size_t npending; /* changed under lock; hooks peek without */
	struct lm_list members; /* struct tcp_srx_member */
	struct lm_bufpool pool; /* struct lm_rx_entry */
};

static const struct fi_ops srx_fid_ops;

/* Under s->lock: the pending receives that take messages waiting at mb's
 * endpoint, earliest first, posted there. */
static void feed(struct tcp_srx *s, struct tcp_srx_member *mb)
{
	struct lm_rdm_ep *ep = mb->ep;
	struct lm_list *it, *tmp;
	bool any;

	lm_lock_acquire(&ep->lock);
	any = ep->enabled && (ep->msg.unexp_count || ep->tagged.unexp_count);
	lm_lock_release(&ep->lock);
	if (!any)
		return;
	lm_list_foreach_safe(&s->pending, it, tmp)
	{
		struct lm_rx_entry *e = lm_list_entry(it, struct lm_rx_entry, node);
		bool tagged = e->flags & FI_TAGGED;
		uint64_t flags = e->flags & ~(FI_TAGGED | FI_MSG);
		struct lm_match *m = tagged ? &ep->tagged : &ep->msg;
		bool take;
		ssize_t ret;

		lm_lock_acquire(&ep->lock);
		take =
		    m->unexp_count && lm_match_peek(m, FI_ADDR_UNSPEC, e->tag, e->ignore);
		any = ep->msg.unexp_count || ep->tagged.unexp_count;
		lm_lock_release(&ep->lock);
		if (!take) {
			if (!any)
				break;
			continue;
		}
		/* The endpoint's lock is let go in between: only a receive
		 * posted to the endpoint itself meanwhile could take the
		 * message first, and then this one waits there. */
		if (tagged) {
			struct fi_msg_tagged msg = {.msg_iov = e->iov,
			                            .desc = e->desc,
			                            .iov_count = e->iov_count,
			                            .addr = FI_ADDR_UNSPEC,
			                            .tag = e->tag,
			                            .ignore = e->ignore,
			                            .context = e->context};

			ret = lm_rdm_tagged_ops.recvmsg(&ep->ctx.ep_fid, &msg, flags);
		} else {
			struct fi_msg msg = {.msg_iov = e->iov,
			                     .desc = e->desc,
			                     .iov_count = e->iov_count,
			                     .addr = FI_ADDR_UNSPEC,
			                     .context = e->context};

			ret = lm_rdm_msg_ops.recvmsg(&ep->ctx.ep_fid, &msg, flags);
		}
		if (ret) /* the endpoint's own queue is full: later */
			break;
		lm_list_remove(&e->node);
		s->npending--;
		lm_bufpool_free(&s->pool, e);
	}
}

static void feed_all(struct tcp_srx *s)
{
	struct lm_list *it;

	lm_list_foreach(&s->members, it)
	{
		if (!s->npending)
			break;
		feed(s, lm_list_entry(it, struct tcp_srx_member, node));
	}
}

/* The member's hook: the endpoint's progress first (so what it just read
 * is queued), then its waiting messages fed. */
static void member_run(struct lm_progress *p)
{
	struct tcp_srx_member *mb = lm_container_of(p, struct tcp_srx_member, hook);
	struct tcp_srx *s = mb->srx;

	/* Nothing to hand out (a receive posted meanwhile feeds itself). */
	if (!atomic_load_explicit(&s->npending, memory_order_relaxed))
		return;
	lm_rdm_progress(mb->ep, false);
	lm_lock_acquire(&s->lock);
	feed(s, mb);
	lm_lock_release(&s->lock);
}

int tcp_srx_bind(struct tcp_srx_member *mb, struct lm_rdm_ep *ep, struct fid *bfid,
                 uint64_t flags)
{
	struct tcp_srx *s = lm_container_of(bfid, struct tcp_srx, ep_fid.fid);

	if (bfid->ops != &srx_fid_ops || s->dom != ep->dom || mb->srx)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	mb->srx = s;
	mb->ep = ep;
	mb->hook.run = member_run;
	mb->hook.fd = -1;
	lm_list_init(&mb->hook.node);
	lm_lock_acquire(&s->lock);
	lm_list_push_back(&s->members, &mb->node);
	lm_lock_release(&s->lock);
	return 0;
}

void tcp_srx_enabled(struct tcp_srx_member *mb)
{
	struct lm_rdm_ep *ep = mb->ep;

	if (!mb->srx || mb->cq || mb->cntr)
		return;
	/* After the engine's hooks on the same object: they were added
	 * when it enabled the endpoint. */
	if (ep->rx_cq) {
		mb->cq = ep->rx_cq;
		lm_cq_add_progress(mb->cq, &mb->hook);
	} else if (ep->cntr[LM_CNTR_RECV]) {
		mb->cntr = ep->cntr[LM_CNTR_RECV];
		lm_cntr_add_progress(mb->cntr, &mb->hook);
	}
}

void tcp_srx_leave(struct tcp_srx_member *mb)
{
	struct tcp_srx *s = mb->srx;

	if (!s)
		return;
	/* Off the CQ first: once that returns, the hook is not running. */
	if (mb->cq)
		lm_cq_del_progress(mb->cq, &mb->hook);
	if (mb->cntr)
		lm_cntr_del_progress(mb->cntr, &mb->hook);
	mb->cq = NULL;
	mb->cntr = NULL;
	lm_lock_acquire(&s->lock);
	lm_list_remove(&mb->node);
	lm_lock_release(&s->lock);
	mb->srx = NULL;
}

/* ---- posting --------------------------------------------------------------- */

static ssize_t srx_post(struct tcp_srx *s, const struct iovec *iov, void **desc,
                        size_t count, uint64_t tag, uint64_t ignore, uint64_t flags,
                        void *context, bool tagged)
{
	struct lm_rx_entry *e;
	size_t total;

	if (!lm_iov_recv_valid(iov, count, &total))
		return -FI_EINVAL;
	if (flags & SRX_NOT_FLAGS)
		return -FI_EBADFLAGS;
	lm_lock_acquire(&s->lock);
	if (s->npending >= s->attr.size || !(e = lm_bufpool_alloc(&s->pool))) {
		lm_lock_release(&s->lock);
		return -FI_EAGAIN;
	}
	memset(e, 0, sizeof(*e));
	e->src = FI_ADDR_UNSPEC;
	e->tag = tag;
	e->ignore = ignore;
	e->flags = (flags & ~(FI_TAGGED | FI_MSG)) | (tagged ? FI_TAGGED : FI_MSG);
	e->context = context;
	for (size_t i = 0; i < count; i++) {
		e->iov[i] = lm_iov_recv_entry(iov[i]);
		e->desc[i] = desc ? desc[i] : NULL;
	}
	e->iov_count = count;
	e->total_len = total;
	lm_list_push_back(&s->pending, &e->node);
	s->npending++;
	feed_all(s);
	lm_lock_release(&s->lock);
	return 0;
}

static struct tcp_srx *srx_of(struct fid_ep *fid)
{
	return lm_container_of(fid, struct tcp_srx, ep_fid);
}

static ssize_t srx_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                        fi_addr_t src_addr, void *context)
{
	struct iovec iov = {buf, len};

	(void)src_addr; /* connected endpoints: one peer each */
	return srx_post(srx_of(fid), &iov, &desc, 1, 0, 0, srx_of(fid)->attr.op_flags,
	                context, false);
}

static ssize_t srx_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src_addr, void *context)
{
	(void)src_addr;
	return srx_post(srx_of(fid), iov, desc, count, 0, 0, srx_of(fid)->attr.op_flags,
	                context, false);
}

static ssize_t srx_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return srx_post(srx_of(fid), msg->msg_iov, msg->desc, msg->iov_count, 0, 0, flags,
	                msg->context, false);
}

static ssize_t srx_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                         fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct iovec iov = {buf, len};

	(void)src_addr;
	return srx_post(srx_of(fid), &iov, &desc, 1, tag, ignore,
	                srx_of(fid)->attr.op_flags, context, true);
}

static ssize_t srx_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                          void *context)
{
	(void)src_addr;
	return srx_post(srx_of(fid), iov, desc, count, tag, ignore,
	                srx_of(fid)->attr.op_flags, context, true);
}

static ssize_t srx_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return srx_post(srx_of(fid), msg->msg_iov, msg->desc, msg->iov_count, msg->tag,
	                msg->ignore, flags, msg->context, true);
}

/* A receive context sends nothing. */
static ssize_t no_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                       fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)dest_addr, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_inject(struct fid_ep *fid, const void *buf, size_t len,
                         fi_addr_t dest_addr)
{
	(void)fid, (void)buf, (void)len, (void)dest_addr;
	return -FI_ENOSYS;
}

static ssize_t no_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)data, (void)dest_addr,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                             uint64_t data, fi_addr_t dest_addr)
{
	(void)fid, (void)buf, (void)len, (void)data, (void)dest_addr;
	return -FI_ENOSYS;
}

static ssize_t no_tsend(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                        fi_addr_t dest_addr, uint64_t tag, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)dest_addr, (void)tag,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_tsendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)tag,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_tsendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                           uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_tinject(struct fid_ep *fid, const void *buf, size_t len,
                          fi_addr_t dest_addr, uint64_t tag)
{
	(void)fid, (void)buf, (void)len, (void)dest_addr, (void)tag;
	return -FI_ENOSYS;
}

static ssize_t no_tsenddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest_addr, uint64_t tag,
                            void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)data, (void)dest_addr,
	    (void)tag, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_tinjectdata(struct fid_ep *fid, const void *buf, size_t len,
                              uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	(void)fid, (void)buf, (void)len, (void)data, (void)dest_addr, (void)tag;
	return -FI_ENOSYS;
}

static const struct fi_ops_msg srx_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = srx_recv,
    .recvv = srx_recvv,
    .recvmsg = srx_recvmsg,
    .send = no_send,
    .sendv = no_sendv,
    .sendmsg = no_sendmsg,
    .inject = no_inject,
    .senddata = no_senddata,
    .injectdata = no_injectdata,
};

static const struct fi_ops_tagged srx_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = srx_trecv,
    .recvv = srx_trecvv,
    .recvmsg = srx_trecvmsg,
    .send = no_tsend,
    .sendv = no_tsendv,
    .sendmsg = no_tsendmsg,
    .inject = no_tinject,
    .senddata = no_tsenddata,
    .injectdata = no_tinjectdata,
};

/* ---- cancel, sizes, close -------------------------------------------------- */

/* A receive still here is cancelled on the first member's receive CQ
 * (the context has none of its own); one already handed to a member is
 * that member's to cancel. */
static ssize_t srx_cancel(fid_t fid, void *context)
{
	struct tcp_srx *s = lm_container_of(fid, struct tcp_srx, ep_fid.fid);
	struct lm_list *it;
	ssize_t ret = -FI_ENOENT;

	lm_lock_acquire(&s->lock);
	lm_list_foreach(&s->pending, it)
	{
		struct lm_rx_entry *e = lm_list_entry(it, struct lm_rx_entry, node);
		struct lm_list *m;

		if (e->context != context)
			continue;
		lm_list_remove(&e->node);
		s->npending--;
		lm_list_foreach(&s->members, m)
		{
			struct lm_rdm_ep *ep =
			    lm_list_entry(m, struct tcp_srx_member, node)->ep;

			if (ep->rx_cq) {
				lm_rx_cancelled(ep->rx_cq, e);
				break;
			}
		}
		lm_bufpool_free(&s->pool, e);
		ret = 0;
		break;
	}
	if (ret) {
		lm_list_foreach(&s->members, it)
		{
			struct lm_rdm_ep *ep =
			    lm_list_entry(it, struct tcp_srx_member, node)->ep;

			lm_lock_acquire(&ep->lock);
			ret = lm_rdm_cancel(ep, context);
			lm_lock_release(&ep->lock);
			if (!ret)
				break;
		}
	}
	lm_lock_release(&s->lock);
	return ret;
}

static ssize_t srx_rx_size_left(struct fid_ep *fid)
{
	struct tcp_srx *s = srx_of(fid);
	ssize_t n;

	lm_lock_acquire(&s->lock);
	n = (ssize_t)(s->attr.size - s->npending);
	lm_lock_release(&s->lock);
	return n;
}

static ssize_t srx_tx_size_left(struct fid_ep *fid)
{
	(void)fid;
	return -FI_ENOSYS;
}

static int srx_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static int srx_setopt(fid_t fid, int level, int optname, const void *optval,
                      size_t optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static const struct fi_ops_ep srx_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = srx_cancel,
    .getopt = srx_getopt,
    .setopt = srx_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = srx_rx_size_left,
    .tx_size_left = srx_tx_size_left,
};

/* Receives still pending go with it, unreported. */
static int srx_close(struct fid *fid)
{
	struct tcp_srx *s = lm_container_of(fid, struct tcp_srx, ep_fid.fid);
	bool busy;

	lm_lock_acquire(&s->lock);
	busy = !lm_list_empty(&s->members);
	lm_lock_release(&s->lock);
	if (busy)
		return -FI_EBUSY;
	atomic_fetch_sub(&s->dom->util.ref, 1);
	lm_bufpool_fini(&s->pool);
	lm_lock_fini(&s->lock);
	free(s);
	return 0;
}

/* Not associated with CQs or counters (man fi_endpoint); fi_enable has
 * nothing to do. */
static int srx_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid, (void)bfid, (void)flags;
	return -FI_EINVAL;
}

static int srx_control(struct fid *fid, int command, void *arg)
{
	(void)fid, (void)arg;
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static const struct fi_ops srx_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = srx_close,
    .bind = srx_bind,
    .control = srx_control,
    .ops_open = lm_fid_no_ops_open,
};

int tcp_srx_context(struct fid_domain *domain, struct fi_rx_attr *attr,
                    struct fid_ep **rx_ep, void *context)
{
	struct lm_rdm_domain *dom =
	    lm_container_of(domain, struct lm_rdm_domain, util.domain_fid);
	const struct fi_rx_attr *dflt = dom->util.info->rx_attr;
	struct tcp_srx *s;

	if (!rx_ep)
		return -FI_EINVAL;
	if (attr && (attr->iov_limit > LM_IOV_LIMIT || (attr->op_flags & SRX_NOT_FLAGS)))
		return -FI_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -FI_ENOMEM;
	s->attr = attr ? *attr : *dflt;
	if (!s->attr.size)
		s->attr.size = dflt->size;
	if (!s->attr.iov_limit)
		s->attr.iov_limit = LM_IOV_LIMIT;
	s->attr.caps &= ~(FI_MULTI_RECV | FI_TAGGED_MULTI_RECV);
	if (lm_bufpool_init(&s->pool, sizeof(struct lm_rx_entry), 0, LM_BUFPOOL_CHUNK,
	                    s->attr.size)) {
		free(s);
		return -FI_ENOMEM;
	}
	s->dom = dom;
	lm_lock_init(&s->lock, true);
	lm_list_init(&s->pending);
	lm_list_init(&s->members);
	s->ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	s->ep_fid.fid.context = context;
	s->ep_fid.fid.ops = (struct fi_ops *)&srx_fid_ops;
	s->ep_fid.ops = (struct fi_ops_ep *)&srx_ep_ops;
	s->ep_fid.msg = (struct fi_ops_msg *)&srx_msg_ops;
	s->ep_fid.tagged = (struct fi_ops_tagged *)&srx_tagged_ops;
	s->ep_fid.cm = (struct fi_ops_cm *)&lm_nosys_cm_ops;
	s->ep_fid.rma = (struct fi_ops_rma *)&lm_nosys_rma_ops;
	s->ep_fid.atomic = (struct fi_ops_atomic *)&lm_nosys_atomic_ops;
	atomic_fetch_add(&dom->util.ref, 1);
	/* man fi_endpoint: the attributes the context got. */
	if (attr)
		*attr = s->attr;
	*rx_ep = &s->ep_fid;
	return 0;
}
