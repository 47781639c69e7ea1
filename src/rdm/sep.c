/* sep.c - scalable endpoints (fi_scalable_ep, man fi_endpoint): up to
 * max_ep_tx_ctx transmit and max_ep_rx_ctx receive contexts behind one
 * address, each a fid_ep with its own CQ and counters.  Context pair k
 * (transmit context k, receive context k) is lane k: an engine endpoint
 * of its own - link, peers, requests, lock - at the address k lanes from
 * the first's (lm_link_ops.addr_lane).  So threads on different pairs
 * share no lock, and a peer reaches receive context k (fi_rx_addr) by
 * sending to lane k's address; the sender's lane travels in the header
 * (LM_HF_LANE_SHIFT), for the receiver's FI_SOURCE.
 *
 *   fi_scalable_ep --> lane 0 (lm_rdm_ep, head: the sep's fid, getname)
 *                       |-- lane_txc  fi_tx_context 0: own CQ, counters
 *                       |-- lane_rxc  fi_rx_context 0: own lists, CQ, counters
 *                       `-- lanes[1..n) lane k: link at address + k,
 *                                        lane_txc k, lane_rxc k
 */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

static struct lm_rdm_ep *sep_of(struct fid *fid)
{
	return lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;
}

/* The lane of a context's index, which holds pair index. */
static struct lm_rdm_ep *lane_of(struct lm_rdm_ep *head, int index)
{
	return head->lanes[index];
}

/* ---- binding a context's CQ and counters ------------------------------------------- */

/* fi_ep_bind of a CQ (flags: its side, and FI_SELECTIVE_COMPLETION) or a
 * counter (flags: the kinds of side it may count) to rep. */
static int rep_bind(struct lm_rdm_ep *ep, struct lm_rdm_report *rep, bool enabled,
                    struct fid *bfid, uint64_t flags, uint64_t side, uint64_t cntr_kinds)
{
	static const uint64_t cntr_bits[LM_CNTR_MAX] = {
	    FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE};

	if (!bfid)
		return -FI_EINVAL;
	if (enabled)
		return -FI_EOPBADSTATE;
	if (bfid->fclass == FI_CLASS_CQ) {
		struct lm_cq *cq = lm_container_of(bfid, struct lm_cq, cq_fid.fid);

		if (flags & ~(side | FI_SELECTIVE_COMPLETION))
			return -FI_EBADFLAGS;
		if (!(flags & side) || cq->domain != &ep->dom->util || rep->cq)
			return -FI_EINVAL;
		rep->cq = cq;
		rep->selective = flags & FI_SELECTIVE_COMPLETION;
		atomic_fetch_add(&cq->ref, 1);
		if (!cq->strerror)
			cq->strerror = lm_rdm_strerror;
		return 0;
	}
	if (bfid->fclass == FI_CLASS_CNTR) {
		struct lm_cntr *c = lm_container_of(bfid, struct lm_cntr, cntr_fid.fid);

		if (flags & ~cntr_kinds)
			return -FI_EBADFLAGS;
		if (!flags || c->domain != &ep->dom->util)
			return -FI_EINVAL;
		for (int i = 0; i < LM_CNTR_MAX; i++)
			if ((flags & cntr_bits[i]) && rep->cntr[i])
				return -FI_EINVAL;
		for (int i = 0; i < LM_CNTR_MAX; i++) {
			if (!(flags & cntr_bits[i]))
				continue;
			rep->cntr[i] = c;
			atomic_fetch_add(&c->ref, 1);
		}
		return 0;
	}
	return -FI_EINVAL;
}

static void rep_unbind(struct lm_rdm_report *rep)
{
	if (rep->cq)
		atomic_fetch_sub(&rep->cq->ref, 1);
	for (int i = 0; i < LM_CNTR_MAX; i++)
		if (rep->cntr[i])
			atomic_fetch_sub(&rep->cntr[i]->ref, 1);
}

static bool rep_any(const struct lm_rdm_report *rep)
{
	for (int i = 0; i < LM_CNTR_MAX; i++)
		if (rep->cntr[i])
			return true;
	return rep->cq != NULL;
}

/* ---- progress hooks ----------------------------------------------------------- */

/* The CQ and counters rep reports to, each once. */
static size_t rep_objs(const struct lm_rdm_report *rep, struct lm_rdm_hook *objs)
{
	return lm_rdm_hooks_prepare(objs, &rep, 1);
}

/* Under ep->lock: rep's context now counts in the endpoint's hooks; the
 * hooks made for it (none yet on a CQ or counter of another context) in
 * add, to be added outside the lock.  Returns how many, or -FI_ENOMEM. */
static int hooks_take(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                      struct lm_rdm_hook **add)
{
	struct lm_rdm_hook objs[1 + LM_CNTR_MAX];
	size_t n = rep_objs(rep, objs), nadd = 0;
	struct lm_rdm_hook **v =
	    realloc(ep->shooks, (ep->nshooks + n) * sizeof(*ep->shooks));

	if (!v && n)
		return -FI_ENOMEM;
	ep->shooks = v;
	for (size_t k = 0; k < n; k++) {
		struct lm_rdm_hook *h = NULL;

		for (size_t i = 0; i < ep->nshooks && !h; i++)
			if (ep->shooks[i]->cq == objs[k].cq &&
			    ep->shooks[i]->cntr == objs[k].cntr)
				h = ep->shooks[i];
		if (!h) {
			h = calloc(1, sizeof(*h));
			if (!h)
				continue; /* its reads will not progress: slower, never
				             wrong */
			*h = objs[k];
			ep->shooks[ep->nshooks++] = h;
			add[nadd++] = h;
		}
		h->refs++;
	}
	return (int)nadd;
}

/* Under ep->lock: rep's context no longer counts; the hooks nobody counts
 * in any more in del, to be removed outside the lock and freed. */
static size_t hooks_drop(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                         struct lm_rdm_hook **del)
{
	struct lm_rdm_hook objs[1 + LM_CNTR_MAX];
	size_t n = rep_objs(rep, objs), ndel = 0;

	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < ep->nshooks; i++) {
			struct lm_rdm_hook *h = ep->shooks[i];

			if (h->cq != objs[k].cq || h->cntr != objs[k].cntr)
				continue;
			if (!--h->refs) {
				del[ndel++] = h;
				ep->shooks[i] = ep->shooks[--ep->nshooks];
			}
			break;
		}
	return ndel;
}

static void hooks_add(struct lm_rdm_ep *ep, struct lm_rdm_hook **add, int n)
{
	for (int i = 0; i < n; i++)
		lm_rdm_hooks_add(ep, add[i], 1);
}

static void hooks_del(struct lm_rdm_hook **del, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		lm_rdm_hooks_del(del[i], 1);
		free(del[i]);
	}
}

/* A context enabled (under ep->lock): it counts in the hooks at once if
 * the endpoint is enabled (else sep_control takes it in); the hooks to
 * add in add, how many returned. */
static int ctx_enable(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                      bool *enabled, bool *hooked, struct lm_rdm_hook **add)
{
	int n = 0;

	if (*enabled)
		return 0;
	*enabled = true;
	if (ep->enabled) {
		n = hooks_take(ep, rep, add);
		*hooked = n >= 0;
	}
	return n;
}

/* ---- transmit contexts ------------------------------------------------------------ */

static struct lm_rdm_txc *txc_of(struct fid *fid)
{
	return lm_container_of(fid, struct lm_rdm_txc, ctx.ep_fid.fid);
}

static int txc_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_rdm_txc *t = txc_of(fid);
	struct lm_rdm_ep *ep = t->ctx.ep;
	int ret;

	lm_lock_acquire(ep->lock);
	ret = rep_bind(ep, &t->rep, t->enabled, bfid, flags, FI_TRANSMIT,
	               FI_SEND | FI_READ | FI_WRITE);
	lm_lock_release(ep->lock);
	return ret;
}

static int txc_control(struct fid *fid, int command, void *arg)
{
	struct lm_rdm_txc *t = txc_of(fid);
	struct lm_rdm_ep *ep = t->ctx.ep;
	uint64_t *flags = arg;
	struct lm_rdm_hook *add[1 + LM_CNTR_MAX];
	int n;

	switch (command) {
	case FI_ENABLE:
		if (!rep_any(&t->rep))
			return -FI_ENOCQ;
		lm_lock_acquire(ep->lock);
		n = ctx_enable(ep, &t->rep, &t->enabled, &t->hooked, add);
		t->ctx.tx_off = false;
		lm_lock_release(ep->lock);
		hooks_add(ep, add, n);
		return n < 0 ? n : 0;
	case FI_GETOPSFLAG:
		if (!flags || !(*flags & FI_TRANSMIT))
			return -FI_EINVAL;
		*flags = t->ctx.tx_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags || !(*flags & FI_TRANSMIT) || (*flags & FI_RECV))
			return -FI_EINVAL;
		t->ctx.tx_flags = *flags & ~FI_TRANSMIT;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* Refused while an operation of its is in flight: its completion would
 * have nowhere to go. */
static int txc_close(struct fid *fid)
{
	struct lm_rdm_txc *t = txc_of(fid);
	struct lm_rdm_ep *ep = t->ctx.ep;
	struct lm_rdm_hook *del[1 + LM_CNTR_MAX];
	size_t ndel = 0;
	bool busy = false;

	lm_lock_acquire(ep->lock);
	busy = atomic_load(&ep->held); /* operations held on counters */
	for (size_t i = 0; i < ep->tx_count && !busy; i++)
		busy = ep->tx[i] && ep->tx[i]->state != LM_TX_FREE &&
		       ep->tx[i]->rep == &t->rep;
	if (!busy) {
		ep->lane_txc = NULL;
		if (t->hooked)
			ndel = hooks_drop(ep, &t->rep, del);
	}
	lm_lock_release(ep->lock);
	if (busy)
		return -FI_EBUSY;
	hooks_del(del, ndel);
	rep_unbind(&t->rep);
	atomic_fetch_sub(&ep->head->ref, 1);
	free(t);
	return 0;
}

static const struct fi_ops txc_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = txc_close,
    .bind = txc_bind,
    .control = txc_control,
    .ops_open = lm_fid_no_ops_open,
};

static ssize_t txc_cancel(fid_t fid, void *context)
{
	(void)fid, (void)context;
	return -FI_ENOENT; /* sends are not cancelled */
}

static int no_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static int no_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	(void)fid, (void)level, (void)optname, (void)optval, (void)optlen;
	return -FI_ENOPROTOOPT;
}

static ssize_t txc_tx_size_left(struct fid_ep *fid)
{
	struct lm_rdm_ep *ep = lm_rdm_ep_of(fid);
	ssize_t n;

	lm_lock_acquire(ep->lock);
	n = (ssize_t)ep->tx_nfree;
	lm_lock_release(ep->lock);
	return n;
}

static ssize_t no_size_left(struct fid_ep *fid)
{
	(void)fid;
	return -FI_ENOSYS;
}

static const struct fi_ops_ep txc_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = txc_cancel,
    .getopt = no_getopt,
    .setopt = no_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = no_size_left,
    .tx_size_left = txc_tx_size_left,
};

static int sep_tx_ctx(struct fid_ep *fid, int index, struct fi_tx_attr *attr,
                      struct fid_ep **tx_ep, void *context)
{
	struct lm_rdm_ep *head = sep_of(&fid->fid), *ep;
	struct lm_rdm_txc *t;
	int ret = 0;

	if (!tx_ep || index < 0 || (size_t)index >= head->ntx ||
	    (attr &&
	     (attr->iov_limit > LM_IOV_LIMIT || (attr->caps & ~head->info->tx_attr->caps))))
		return -FI_EINVAL;
	ep = lane_of(head, index);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -FI_ENOMEM;
	t->ctx.ep = ep;
	t->ctx.txrep = &t->rep;
	t->ctx.tx_off = true; /* until fi_enable */
	t->ctx.tx_flags = attr ? attr->op_flags : ep->ctx.tx_flags;
	t->ctx.ep_fid.fid.fclass = FI_CLASS_TX_CTX;
	t->ctx.ep_fid.fid.context = context;
	t->ctx.ep_fid.fid.ops = (struct fi_ops *)&txc_fid_ops;
	t->ctx.ep_fid.ops = (struct fi_ops_ep *)&txc_ep_ops;
	t->ctx.ep_fid.cm = (struct fi_ops_cm *)&lm_nosys_cm_ops;
	t->ctx.ep_fid.msg = (struct fi_ops_msg *)&lm_rdm_tx_msg_ops;
	t->ctx.ep_fid.tagged = (struct fi_ops_tagged *)&lm_rdm_tx_tagged_ops;
	t->ctx.ep_fid.rma = (struct fi_ops_rma *)&lm_rdm_rma_ops;
	t->ctx.ep_fid.atomic = (struct fi_ops_atomic *)&lm_rdm_atomic_ops;
	lm_lock_acquire(ep->lock);
	if (ep->lane_txc)
		ret = -FI_EBUSY; /* open already */
	else
		ep->lane_txc = t;
	lm_lock_release(ep->lock);
	if (ret) {
		free(t);
		return ret;
	}
	atomic_fetch_add(&head->ref, 1);
	if (attr)
		*attr = *ep->info->tx_attr;
	*tx_ep = &t->ctx.ep_fid;
	return 0;
}

/* ---- receive contexts -------------------------------------------------------------- */

static struct lm_rdm_rxc *rxc_of(struct fid *fid)
{
	return lm_container_of(fid, struct lm_rdm_rxc, ep_fid.fid);
}

static int rxc_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_rdm_rxc *r = rxc_of(fid);
	int ret;

	lm_lock_acquire(r->sep->lock);
	/* A receive context counts what arrives for it: messages, and
	 * RMA and atomics that named it (lm_rdm_rx_index). */
	ret = rep_bind(r->sep, &r->rep, r->enabled, bfid, flags, FI_RECV,
	               FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE);
	lm_lock_release(r->sep->lock);
	return ret;
}

static int rxc_control(struct fid *fid, int command, void *arg)
{
	struct lm_rdm_rxc *r = rxc_of(fid);
	struct lm_rdm_ep *ep = r->sep;
	struct lm_rdm_hook *add[1 + LM_CNTR_MAX];
	int n;

	(void)arg;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	/* Without a CQ or counter too: a one-sided program (Open MPI's ofi
	 * BTL) opens receive contexts it never posts to. */
	lm_lock_acquire(ep->lock);
	n = ctx_enable(ep, &r->rep, &r->enabled, &r->hooked, add);
	lm_lock_release(ep->lock);
	hooks_add(ep, add, n);
	return n < 0 ? n : 0;
}

/* Refused while a transfer still lands in one of its receives; receives
 * and messages still queued go with it. */
static int rxc_close(struct fid *fid)
{
	struct lm_rdm_rxc *r = rxc_of(fid);
	struct lm_rdm_ep *ep = r->sep;
	struct lm_rdm_hook *del[1 + LM_CNTR_MAX];
	size_t ndel = 0;
	bool busy = false;

	lm_lock_acquire(ep->lock);
	for (size_t i = 0; i < ep->rndv_count && !busy; i++)
		busy = ep->rndv[i].state != LM_RNDV_FREE && ep->rndv[i].rx &&
		       ep->rndv[i].rx->rxc == r;
	if (!busy) {
		ep->lane_rxc = NULL;
		lm_rdm_rxc_fini(r);
		if (r->hooked)
			ndel = hooks_drop(ep, &r->rep, del);
	}
	lm_lock_release(ep->lock);
	if (busy)
		return -FI_EBUSY;
	hooks_del(del, ndel);
	rep_unbind(&r->rep);
	atomic_fetch_sub(&ep->head->ref, 1);
	free(r);
	return 0;
}

static const struct fi_ops rxc_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = rxc_close,
    .bind = rxc_bind,
    .control = rxc_control,
    .ops_open = lm_fid_no_ops_open,
};

static int sep_rx_ctx(struct fid_ep *fid, int index, struct fi_rx_attr *attr,
                      struct fid_ep **rx_ep, void *context)
{
	struct lm_rdm_ep *head = sep_of(&fid->fid), *ep;
	const struct fi_rx_attr *dflt = head->info->rx_attr;
	struct lm_rdm_rxc *r;
	int ret;

	if (!rx_ep || index < 0 || (size_t)index >= head->nrx ||
	    (attr && (attr->iov_limit > LM_IOV_LIMIT || (attr->caps & ~dflt->caps))))
		return -FI_EINVAL;
	ep = lane_of(head, index);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -FI_ENOMEM;
	ret = lm_rdm_rxc_init(r, ep->dom, ep->caps, ep->own_rxc.rx_limit,
	                      ep->own_rxc.unexp_max, false);
	if (ret) {
		lm_rdm_rxc_fini(r);
		free(r);
		return ret;
	}
	r->sep = ep;
	r->acct = &ep->own_rxc;
	r->op_flags = attr ? attr->op_flags : ep->ctx.rx_flags;
	r->ep_fid.fid.fclass = FI_CLASS_RX_CTX;
	r->ep_fid.fid.context = context;
	r->ep_fid.fid.ops = (struct fi_ops *)&rxc_fid_ops;
	r->ep_fid.ops = (struct fi_ops_ep *)&lm_rdm_rxc_ep_ops;
	r->ep_fid.cm = (struct fi_ops_cm *)&lm_nosys_cm_ops;
	r->ep_fid.msg = (struct fi_ops_msg *)&lm_rdm_rxc_msg_ops;
	r->ep_fid.tagged = (struct fi_ops_tagged *)&lm_rdm_rxc_tagged_ops;
	r->ep_fid.rma = (struct fi_ops_rma *)&lm_nosys_rma_ops;
	r->ep_fid.atomic = (struct fi_ops_atomic *)&lm_nosys_atomic_ops;
	lm_lock_acquire(ep->lock);
	if (ep->lane_rxc)
		ret = -FI_EBUSY;
	else
		ep->lane_rxc = r;
	lm_lock_release(ep->lock);
	if (ret) {
		lm_rdm_rxc_fini(r);
		free(r);
		return ret;
	}
	atomic_fetch_add(&head->ref, 1);
	if (attr)
		*attr = *dflt;
	*rx_ep = &r->ep_fid;
	return 0;
}

/* ---- the scalable endpoint --------------------------------------------------------- */

/* Only an AV is bound to it (fi_scalable_ep_bind), and so to each lane;
 * CQs and counters go to its contexts. */
static int sep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_rdm_ep *head = sep_of(fid);
	int ret = 0;

	if (!bfid || bfid->fclass != FI_CLASS_AV)
		return -FI_EINVAL;
	for (size_t k = 0; k < head->nlanes && !ret; k++)
		ret = lm_rdm_ep_bind(&head->lanes[k]->ctx.ep_fid.fid, bfid, flags);
	return ret;
}

/* Enabled: each lane; the contexts enabled before it count in its hooks
 * now (under its lock, so each context once, here or at its own enable);
 * the new hooks go on their CQs and counters outside it. */
static int lane_enable(struct lm_rdm_ep *ep)
{
	struct lm_rdm_hook *add[2 * (1 + LM_CNTR_MAX)];
	struct lm_rdm_txc *t;
	struct lm_rdm_rxc *r;
	int ret, n = 0, k;

	lm_lock_acquire(ep->lock);
	ret = lm_rdm_ep_enable(ep);
	t = ep->lane_txc;
	r = ep->lane_rxc;
	if (ret == 1 && t && t->enabled && !t->hooked && (k = hooks_take(ep, &t->rep, add)) >= 0) {
		t->hooked = true;
		n += k;
	}
	if (ret == 1 && r && r->enabled && !r->hooked &&
	    (k = hooks_take(ep, &r->rep, add + n)) >= 0) {
		r->hooked = true;
		n += k;
	}
	lm_lock_release(ep->lock);
	hooks_add(ep, add, n);
	if (ret == 1) {
		lm_rdm_ep_listed(ep, true);
		ret = lm_rdm_auto_add(ep);
	}
	return ret < 0 ? ret : 0;
}

static int sep_control(struct fid *fid, int command, void *arg)
{
	struct lm_rdm_ep *head = sep_of(fid);
	int ret = 0;

	(void)arg;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	for (size_t k = 0; k < head->nlanes && !ret; k++)
		ret = lane_enable(head->lanes[k]);
	return ret;
}

/* -FI_EBUSY while a context is open; the lanes go with it. */
static int sep_close(struct fid *fid)
{
	struct lm_rdm_ep *head = sep_of(fid);

	if (atomic_load(&head->ref))
		return -FI_EBUSY;
	while (head->nlanes > 1)
		lm_rdm_ep_close(&head->lanes[--head->nlanes]->ctx.ep_fid.fid);
	return lm_rdm_ep_close(fid);
}

static const struct fi_ops sep_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = sep_close,
    .bind = sep_bind,
    .control = sep_control,
    .ops_open = lm_fid_no_ops_open,
};

static ssize_t sep_cancel(fid_t fid, void *context)
{
	(void)fid, (void)context;
	return -FI_ENOENT; /* operations are its contexts' */
}

static const struct fi_ops_ep sep_ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = sep_cancel,
    .getopt = no_getopt,
    .setopt = no_setopt,
    .tx_ctx = sep_tx_ctx,
    .rx_ctx = sep_rx_ctx,
    .rx_size_left = no_size_left,
    .tx_size_left = no_size_left,
};

int lm_rdm_scalable_ep(struct fid_domain *domain, struct fi_info *info,
                       struct fid_ep **sep, void *context)
{
	struct lm_rdm_domain *dom =
	    lm_container_of(domain, struct lm_rdm_domain, util.domain_fid);
	const struct fi_domain_attr *da = dom->util.info->domain_attr;
	struct lm_rdm_ep *ep;
	struct fid_ep *fid;
	size_t ntx, nrx;
	int ret;

	if (!info || !sep || !info->ep_attr || info->ep_attr->type != FI_EP_RDM)
		return -FI_EINVAL;
	ntx = info->ep_attr->tx_ctx_cnt ? info->ep_attr->tx_ctx_cnt : 1;
	nrx = info->ep_attr->rx_ctx_cnt ? info->ep_attr->rx_ctx_cnt : 1;
	if (ntx == FI_SHARED_CONTEXT || nrx == FI_SHARED_CONTEXT ||
	    ntx > da->max_ep_tx_ctx || nrx > da->max_ep_rx_ctx)
		return -FI_EINVAL;
	ret = lm_rdm_endpoint(domain, info, &fid, context);
	if (ret)
		return ret;
	ep = lm_rdm_ep_of(fid);
	ep->ntx = ntx;
	ep->nrx = nrx;
	ret = lm_rdm_scalable_lanes(ep, LM_MAX(ntx, nrx));
	if (ret) {
		lm_rdm_ep_close(&fid->fid);
		return ret;
	}
	fid->fid.fclass = FI_CLASS_SEP;
	fid->fid.ops = (struct fi_ops *)&sep_fid_ops;
	fid->ops = (struct fi_ops_ep *)&sep_ep_ops;
	fid->msg = (struct fi_ops_msg *)&lm_nosys_msg_ops;
	fid->tagged = (struct fi_ops_tagged *)&lm_nosys_tagged_ops;
	fid->rma = (struct fi_ops_rma *)&lm_nosys_rma_ops;
	fid->atomic = (struct fi_ops_atomic *)&lm_nosys_atomic_ops;
	LM_INFO(dom->util.fabric->prov, FI_LOG_EP_CTRL,
	        "scalable endpoint: %zu transmit, %zu receive contexts\n", ntx, nrx);
	*sep = fid;
	return 0;
}
