/* rxc.c - the engine's receive contexts (an endpoint's own, and shared
 * ones: fi_srx_context) and shared transmit contexts (fi_stx_context):
 * opening them, binding endpoints to them, the calls an application
 * makes on a shared receive context, and an endpoint leaving one. */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

/* Small unexpected eager payloads are copied into pooled buffers of this
 * size (larger ones are malloc'ed): most short protocol messages fit, and
 * the pool stays a few pages per chunk. */
#define SMALL_BUF_SIZE  256
#define SMALL_BUF_ALIGN 64 /* a cache line: copies into them start aligned */
/* FI_OPT_MIN_MULTI_RECV until set: a multi-receive buffer with less room
 * left is released.  A small message still fits in what is kept. */
#define DEFAULT_MIN_MULTI 64
/* Flags a receive context's op_flags may hold (man fi_endpoint, rx_attr). */
#define RXC_OP_FLAGS                                                                     \
	(FI_COMPLETION | FI_MULTI_RECV | LM_MSG_MODIFIERS | FI_REMOTE_CQ_DATA)

/* ---- receive contexts -------------------------------------------------------- */

/* Do the receives of one kind honour their source address?  (man
 * fi_getinfo: FI_TAGGED_DIRECTED_RECV leaves untagged receives taking any
 * source; FI_EXACT_DIRECTED_RECV alone directs both kinds.) */
static bool directed(uint64_t caps, bool tagged)
{
	if (caps & FI_DIRECTED_RECV)
		return true;
	if (caps & FI_TAGGED_DIRECTED_RECV)
		return tagged;
	return caps & FI_EXACT_DIRECTED_RECV;
}

int lm_rdm_rxc_init(struct lm_rdm_rxc *rxc, struct lm_rdm_domain *dom, uint64_t caps,
                    size_t rx_limit, size_t unexp_max, bool connected)
{
	rxc->dom = dom;
	rxc->acct = rxc;
	rxc->caps = caps;
	rxc->rx_limit = rx_limit;
	rxc->unexp_max = unexp_max;
	rxc->min_multi_recv = DEFAULT_MIN_MULTI;
	lm_list_init(&rxc->members);
	if (lm_bufpool_init(&rxc->rx_pool, sizeof(struct lm_rdm_rx), 0, LM_BUFPOOL_CHUNK,
	                    0) ||
	    lm_bufpool_init(&rxc->unexp_pool, sizeof(struct lm_rdm_unexp), 0,
	                    LM_BUFPOOL_CHUNK, 0) ||
	    lm_bufpool_init(&rxc->small_pool, SMALL_BUF_SIZE, SMALL_BUF_ALIGN,
	                    LM_BUFPOOL_CHUNK, 0))
		return -FI_ENOMEM;
	if (lm_match_init(&rxc->msg, false, directed(caps, false)) ||
	    lm_match_init(&rxc->tagged, true, directed(caps, true)))
		return -FI_ENOMEM;
	/* A connected endpoint has one source, which its receives (and a
	 * shared receive context's) name FI_ADDR_UNSPEC. */
	if ((caps & FI_EXACT_DIRECTED_RECV) && !connected) {
		rxc->msg_exact = rxc->msg.directed;
		rxc->tagged_exact = rxc->tagged.directed;
	}
	return 0;
}

/* Whatever is still queued goes, unreported (man fi_endpoint: close
 * discards outstanding operations). */
void lm_rdm_rxc_fini(struct lm_rdm_rxc *rxc)
{
	struct lm_rx_entry *e;
	struct lm_unexp_entry *u;

	for (struct lm_match *m = &rxc->msg; m;
	     m = m == &rxc->msg ? &rxc->tagged : NULL) {
		if (!m->srcs.buckets)
			continue; /* never initialised */
		while ((e = lm_match_pop_posted(m)))
			lm_bufpool_free(&rxc->rx_pool,
			                lm_container_of(e, struct lm_rdm_rx, e));
		while ((u = lm_match_pop_unexp(m))) {
			struct lm_rdm_unexp *x =
			    lm_container_of(u, struct lm_rdm_unexp, u);

			lm_rdm_unexp_free(x->ep, x);
		}
		lm_match_fini(m);
	}
	lm_bufpool_fini(&rxc->rx_pool);
	lm_bufpool_fini(&rxc->unexp_pool);
	lm_bufpool_fini(&rxc->small_pool);
}

struct lm_rdm_ep *lm_rdm_rxc_voice(struct lm_rdm_rxc *rxc)
{
	struct lm_list *it;

	if (rxc->sep)
		return rxc->enabled && rxc->sep->enabled ? rxc->sep : NULL;
	lm_list_foreach(&rxc->members, it)
	{
		struct lm_rdm_ep *ep = lm_list_entry(it, struct lm_rdm_ep, rxc_node);

		if (ep->enabled)
			return ep;
	}
	return NULL;
}

void lm_rdm_ep_leave_rxc(struct lm_rdm_ep *ep)
{
	struct lm_rdm_rxc *rxc = ep->rxc;

	if (!rxc || !rxc->shared)
		return;
	lm_lock_acquire(ep->lock);
	/* Its unexpected messages name its peers and link: they go with it. */
	for (struct lm_match *m = &rxc->msg; m;
	     m = m == &rxc->msg ? &rxc->tagged : NULL) {
		struct lm_list *lists[2] = {&m->unexp, &m->claimed};

		for (int i = 0; i < 2; i++) {
			struct lm_list *it, *tmp;

			lm_list_foreach_safe(lists[i], it, tmp)
			{
				struct lm_unexp_entry *u =
				    lm_list_entry(it, struct lm_unexp_entry, node);
				struct lm_rdm_unexp *x = u->payload;

				if (x->ep != ep)
					continue;
				lm_match_remove_unexp(m, u);
				lm_rdm_unexp_free(ep, x);
			}
		}
	}
	/* The transfers still filling receives of the context end with the
	 * endpoint (its link closes next): a receive one was taking is
	 * dropped with its message (man fi_endpoint: close discards), a
	 * multi-receive buffer goes on serving the others. */
	for (size_t i = 0; i < ep->rndv_count; i++) {
		struct lm_rdm_rndv *r = &ep->rndv[i];

		if (r->state == LM_RNDV_FREE || !r->rx)
			continue;
		r->rx->busy--;
		if (!r->rx->busy &&
		    (r->rx->released || !(r->rx->e.flags & FI_MULTI_RECV)))
			lm_rdm_rx_free(ep, r->rx);
		r->rx = NULL;
	}
	lm_list_remove(&ep->rxc_node);
	ep->rxc = &ep->own_rxc;
	lm_lock_release(ep->lock);
}

/* ---- binding ------------------------------------------------------------------ */

/* ep now takes the domain's context lock (before fi_enable, when no
 * other thread uses ep). */
static void ep_share_lock(struct lm_rdm_ep *ep)
{
	ep->lock = &ep->dom->ctx_lock;
}

int lm_rdm_ep_bind_srx(struct lm_rdm_ep *ep, struct lm_rdm_rxc *rxc)
{
	if (rxc->dom != ep->dom || ep->rxc != &ep->own_rxc)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	ep_share_lock(ep);
	lm_lock_acquire(ep->lock);
	ep->rxc = rxc;
	lm_list_push_back(&rxc->members, &ep->rxc_node);
	lm_lock_release(ep->lock);
	return 0;
}

int lm_rdm_ep_bind_stx(struct lm_rdm_ep *ep, struct lm_rdm_stx *stx)
{
	if (stx->dom != ep->dom || ep->stx)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	ep_share_lock(ep);
	ep->stx = stx;
	atomic_fetch_add(&stx->ref, 1);
	return 0;
}

/* ---- shared receive contexts ---------------------------------------------------- */

static struct lm_rdm_rxc *srx_of(struct fid_ep *fid)
{
	return lm_container_of(fid, struct lm_rdm_rxc, ep_fid);
}

const struct fi_ops_msg lm_rdm_rxc_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = lm_rdm_rxc_recv,
    .recvv = lm_rdm_rxc_recvv,
    .recvmsg = lm_rdm_rxc_recvmsg,
    .send = lm_msg_no_send,
    .sendv = lm_msg_no_sendv,
    .sendmsg = lm_msg_no_sendmsg,
    .inject = lm_msg_no_inject,
    .senddata = lm_msg_no_senddata,
    .injectdata = lm_msg_no_injectdata,
};

const struct fi_ops_tagged lm_rdm_rxc_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = lm_rdm_rxc_trecv,
    .recvv = lm_rdm_rxc_trecvv,
    .recvmsg = lm_rdm_rxc_trecvmsg,
    .send = lm_tagged_no_send,
    .sendv = lm_tagged_no_sendv,
    .sendmsg = lm_tagged_no_sendmsg,
    .inject = lm_tagged_no_inject,
    .senddata = lm_tagged_no_senddata,
    .injectdata = lm_tagged_no_injectdata,
};

/* A receive still queued is cancelled on the receive CQ of the endpoint
 * that speaks for the context (lm_rdm_rxc_voice): a shared context has no
 * CQ of its own. */
static ssize_t srx_cancel(fid_t fid, void *context)
{
	struct lm_rdm_rxc *rxc = lm_container_of(fid, struct lm_rdm_rxc, ep_fid.fid);
	struct lm_rdm_ep *ep;
	ssize_t ret;

	lm_lock_acquire(lm_rdm_rxc_lock(rxc));
	ep = lm_rdm_rxc_voice(rxc);
	ret = lm_rdm_cancel(rxc, ep, context);
	lm_lock_release(lm_rdm_rxc_lock(rxc));
	return ret;
}

static ssize_t srx_rx_size_left(struct fid_ep *fid)
{
	struct lm_rdm_rxc *rxc = srx_of(fid);
	ssize_t n;

	lm_lock_acquire(lm_rdm_rxc_lock(rxc));
	n = (ssize_t)(rxc->rx_limit - rxc->rx_count);
	lm_lock_release(lm_rdm_rxc_lock(rxc));
	return n;
}

static ssize_t srx_tx_size_left(struct fid_ep *fid)
{
	(void)fid;
	return -FI_ENOSYS;
}

int lm_rdm_rxc_getopt(struct lm_rdm_rxc *rxc, int level, int optname, void *optval,
                      size_t *optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t))
		return -FI_EINVAL;
	*(size_t *)optval = rxc->min_multi_recv;
	*optlen = sizeof(size_t);
	return 0;
}

int lm_rdm_rxc_setopt(struct lm_rdm_rxc *rxc, int level, int optname, const void *optval,
                      size_t optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	rxc->min_multi_recv = *(const size_t *)optval;
	return 0;
}

static int srx_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return lm_rdm_rxc_getopt(lm_container_of(fid, struct lm_rdm_rxc, ep_fid.fid), level,
	                         optname, optval, optlen);
}

static int srx_setopt(fid_t fid, int level, int optname, const void *optval,
                      size_t optlen)
{
	struct lm_rdm_rxc *rxc = lm_container_of(fid, struct lm_rdm_rxc, ep_fid.fid);
	int ret;

	lm_lock_acquire(lm_rdm_rxc_lock(rxc));
	ret = lm_rdm_rxc_setopt(rxc, level, optname, optval, optlen);
	lm_lock_release(lm_rdm_rxc_lock(rxc));
	return ret;
}

const struct fi_ops_ep lm_rdm_rxc_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = srx_cancel,
    .getopt = srx_getopt,
    .setopt = srx_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = srx_rx_size_left,
    .tx_size_left = srx_tx_size_left,
};

/* Refused while endpoints are bound (they match in its lists); receives
 * still queued go with it, unreported. */
static int srx_close(struct fid *fid)
{
	struct lm_rdm_rxc *rxc = lm_container_of(fid, struct lm_rdm_rxc, ep_fid.fid);
	struct lm_rdm_domain *dom = rxc->dom;
	bool busy;

	lm_lock_acquire(&dom->ctx_lock);
	busy = !lm_list_empty(&rxc->members);
	lm_lock_release(&dom->ctx_lock);
	if (busy)
		return -FI_EBUSY;
	lm_rdm_rxc_fini(rxc);
	atomic_fetch_sub(&dom->util.ref, 1);
	free(rxc);
	return 0;
}

/* Not associated with CQs or counters (man fi_endpoint); fi_enable has
 * nothing to do. */
static int ctx_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid, (void)bfid, (void)flags;
	return -FI_EINVAL;
}

static int ctx_control(struct fid *fid, int command, void *arg)
{
	(void)fid, (void)arg;
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static const struct fi_ops srx_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = srx_close,
    .bind = ctx_bind,
    .control = ctx_control,
    .ops_open = lm_fid_no_ops_open,
};

static struct lm_rdm_domain *rdm_dom_of(struct fid_domain *domain)
{
	return lm_container_of(domain, struct lm_rdm_domain, util.domain_fid);
}

int lm_rdm_srx_context(struct fid_domain *domain, struct fi_rx_attr *attr,
                       struct fid_ep **rx_ep, void *context)
{
	struct lm_rdm_domain *dom;
	const struct fi_rx_attr *dflt;
	struct fi_rx_attr a;
	struct lm_rdm_rxc *rxc;
	int ret;

	if (!domain || !rx_ep)
		return -FI_EINVAL;
	dom = rdm_dom_of(domain);
	dflt = dom->util.info->rx_attr;
	if (attr &&
	    (attr->iov_limit > LM_IOV_LIMIT || (attr->op_flags & ~RXC_OP_FLAGS) ||
	     (attr->size && attr->size > dflt->size) || (attr->caps & ~dflt->caps)))
		return -FI_EINVAL;
	a = attr ? *attr : *dflt;
	if (!a.size)
		a.size = dflt->size;
	if (!a.caps)
		a.caps = dflt->caps;
	if (!a.iov_limit)
		a.iov_limit = LM_IOV_LIMIT;
	if (!a.total_buffered_recv)
		a.total_buffered_recv = dflt->total_buffered_recv;
	/* Before API 2.0 that bit is FI_VARIABLE_MSG, never offered here. */
	if (dom->util.fabric->fabric_fid.api_version < FI_VERSION(2, 0))
		a.caps &= ~FI_EXACT_DIRECTED_RECV;
	rxc = calloc(1, sizeof(*rxc));
	if (!rxc)
		return -FI_ENOMEM;
	rxc->shared = true;
	rxc->op_flags = a.op_flags;
	ret = lm_rdm_rxc_init(
	    rxc, dom, a.caps | (dom->util.caps & LM_SECONDARY_CAPS), a.size,
	    a.total_buffered_recv ? a.total_buffered_recv : LM_RDM_UNEXP_MAX, false);
	if (ret) {
		lm_rdm_rxc_fini(rxc);
		free(rxc);
		return ret;
	}
	rxc->ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	rxc->ep_fid.fid.context = context;
	rxc->ep_fid.fid.ops = (struct fi_ops *)&srx_fid_ops;
	rxc->ep_fid.ops = (struct fi_ops_ep *)&lm_rdm_rxc_ep_ops;
	rxc->ep_fid.msg = (struct fi_ops_msg *)&lm_rdm_rxc_msg_ops;
	rxc->ep_fid.tagged = (struct fi_ops_tagged *)&lm_rdm_rxc_tagged_ops;
	rxc->ep_fid.cm = (struct fi_ops_cm *)&lm_nosys_cm_ops;
	rxc->ep_fid.rma = (struct fi_ops_rma *)&lm_nosys_rma_ops;
	rxc->ep_fid.atomic = (struct fi_ops_atomic *)&lm_nosys_atomic_ops;
	atomic_fetch_add(&dom->util.ref, 1);
	/* man fi_endpoint: the attributes the context got. */
	if (attr)
		*attr = a;
	*rx_ep = &rxc->ep_fid;
	return 0;
}

/* ---- shared transmit contexts ----------------------------------------------------- */

static int stx_close(struct fid *fid)
{
	struct lm_rdm_stx *stx = lm_container_of(fid, struct lm_rdm_stx, stx_fid.fid);

	if (atomic_load(&stx->ref))
		return -FI_EBUSY;
	atomic_fetch_sub(&stx->dom->util.ref, 1);
	free(stx);
	return 0;
}

static const struct fi_ops stx_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = stx_close,
    .bind = ctx_bind,
    .control = ctx_control,
    .ops_open = lm_fid_no_ops_open,
};

static int stx_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static int stx_setopt(fid_t fid, int level, int optname, const void *optval,
                      size_t optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static ssize_t stx_cancel(fid_t fid, void *context)
{
	(void)fid, (void)context;
	return -FI_ENOENT; /* operations are the endpoints' */
}

static ssize_t stx_size_left(struct fid_ep *fid)
{
	(void)fid;
	return -FI_ENOSYS;
}

static const struct fi_ops_ep stx_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = stx_cancel,
    .getopt = stx_getopt,
    .setopt = stx_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = stx_size_left,
    .tx_size_left = stx_size_left,
};

int lm_rdm_stx_context(struct fid_domain *domain, struct fi_tx_attr *attr,
                       struct fid_stx **stx_fid, void *context)
{
	struct lm_rdm_domain *dom;
	const struct fi_tx_attr *dflt;
	struct lm_rdm_stx *stx;

	if (!domain || !stx_fid)
		return -FI_EINVAL;
	dom = rdm_dom_of(domain);
	dflt = dom->util.info->tx_attr;
	if (attr && (attr->iov_limit > LM_IOV_LIMIT || attr->size > dflt->size ||
	             attr->inject_size > dflt->inject_size || (attr->caps & ~dflt->caps)))
		return -FI_EINVAL;
	stx = calloc(1, sizeof(*stx));
	if (!stx)
		return -FI_ENOMEM;
	stx->dom = dom;
	stx->attr = attr ? *attr : *dflt;
	if (!stx->attr.size)
		stx->attr.size = dflt->size;
	if (!stx->attr.iov_limit)
		stx->attr.iov_limit = LM_IOV_LIMIT;
	if (!stx->attr.caps)
		stx->attr.caps = dflt->caps;
	atomic_init(&stx->ref, 0);
	stx->stx_fid.fid.fclass = FI_CLASS_STX_CTX;
	stx->stx_fid.fid.context = context;
	stx->stx_fid.fid.ops = (struct fi_ops *)&stx_fid_ops;
	stx->stx_fid.ops = (struct fi_ops_ep *)&stx_ep_ops;
	atomic_fetch_add(&dom->util.ref, 1);
	if (attr)
		*attr = stx->attr;
	*stx_fid = &stx->stx_fid;
	return 0;
}
