/* ep.c - the RDM engine's domain glue and endpoint object: bindings,
 * enable, names, options, aliases, the per-endpoint peer table, and the
 * progress hooks it hangs on its CQs and counters. */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

/* Queue depths for an fi_info whose tx_attr / rx_attr give none (the
 * providers report LM_RDM_QUEUE_SIZE): modest, since each request costs
 * an inject buffer and the caller asked for nothing. */
#define DEFAULT_TX_SIZE 256
#define DEFAULT_RX_SIZE 256
/* Unexpected eager data an endpoint holds before it stops reading. */
#define DEFAULT_UNEXP_MAX   LM_RDM_UNEXP_MAX
#define DEFAULT_INJECT_SIZE LM_RDM_INJECT_SIZE
/* Peers an endpoint expects before its peer map and fi_addr vector grow:
 * a job's neighbours fit; the map doubles past them. */
#define PEERS_EXPECTED 64
/* Control packets the link refused are queued in pooled entries, this
 * many per chunk: they are rare (a full link), so a small chunk. */
#define CTL_POOL_CHUNK 32
/* A link address as text (FI_ADDR_STR): IPv6 with port, or a long shm path,
 * fit with room to spare. */
#define ADDR_STR_MAX 256

/* ---- domain ---------------------------------------------------------------- */

static struct lm_rdm_domain *rdm_dom_of_av(struct lm_av *av)
{
	return lm_container_of(av->domain, struct lm_rdm_domain, util);
}

/* Under the AV's lock, before the entry can be found: an endpoint that
 * reads the new count and then looks the address up waits for the lock,
 * so it finds the entry. */
static int av_on_insert(struct lm_av *av, fi_addr_t fi_addr, const void *addr, void **peer)
{
	(void)fi_addr, (void)addr, (void)peer;
	atomic_fetch_add(&rdm_dom_of_av(av)->av_ins_gen, 1);
	return 0;
}

static void av_on_remove(struct lm_av *av, fi_addr_t fi_addr, void *peer)
{
	(void)fi_addr, (void)peer;
	atomic_fetch_add(&rdm_dom_of_av(av)->av_gen, 1);
}

/* lm_domain.progress_all: each enabled endpoint once, as its CQ's hook
 * would.  Lock order: eps_lock, then an endpoint's lock. */
static void domain_progress_all(struct lm_domain *udom)
{
	struct lm_rdm_domain *dom = lm_container_of(udom, struct lm_rdm_domain, util);
	struct lm_list *it;

	pthread_mutex_lock(&dom->eps_lock);
	lm_list_foreach(&dom->eps, it)
	{
		lm_rdm_progress(lm_container_of(it, struct lm_rdm_ep, dom_node), false);
	}
	pthread_mutex_unlock(&dom->eps_lock);
}

int lm_rdm_domain_init(struct lm_rdm_domain *dom, struct lm_fabric *fab,
                       const struct fi_info *info, const struct lm_link_ops *link_ops,
                       void *link_ctx, void *context)
{
	int ret = lm_domain_init(&dom->util, fab, info, &lm_rdm_domain_ops, context);

	if (ret)
		return ret;
	dom->link_ops = link_ops;
	dom->link_ctx = link_ctx;
	dom->av_ops.addrlen = link_ops->addrlen;
	dom->av_ops.from_str = link_ops->addr_from_str;
	dom->av_ops.to_str = link_ops->addr_to_str;
	dom->av_ops.str_max = link_ops->addr_str_max;
	dom->av_ops.check = link_ops->addr_check;
	dom->av_ops.on_insert = av_on_insert;
	dom->av_ops.on_remove = av_on_remove;
	dom->util.av_addr_ops = &dom->av_ops;
	atomic_init(&dom->av_gen, 0);
	atomic_init(&dom->av_ins_gen, 0);
	/* A progress thread beside the application's: locks are taken
	 * whatever the threading model. */
	dom->auto_progress =
	    info->domain_attr && info->domain_attr->data_progress == FI_PROGRESS_AUTO;
	if (dom->auto_progress && !dom->util.shared) {
		dom->util.shared = true;
		lm_lock_fini(&dom->util.lock);
		lm_lock_init(&dom->util.lock, true);
	}
	lm_rdm_auto_init(&dom->autop);
	pthread_mutex_init(&dom->work_lock, NULL);
	lm_list_init(&dom->work);
	dom->util.work_control = lm_rdm_work_control;
	pthread_mutex_init(&dom->eps_lock, NULL);
	lm_list_init(&dom->eps);
	dom->util.progress_all = domain_progress_all;
	lm_lock_init(&dom->ctx_lock, dom->util.shared);
	return 0;
}

void lm_rdm_ep_listed(struct lm_rdm_ep *ep, bool on)
{
	struct lm_rdm_domain *dom = ep->dom;

	pthread_mutex_lock(&dom->eps_lock);
	if (on && !ep->dom_on)
		lm_list_push_back(&dom->eps, &ep->dom_node);
	else if (!on && ep->dom_on)
		lm_list_remove(&ep->dom_node);
	ep->dom_on = on;
	pthread_mutex_unlock(&dom->eps_lock);
}

int lm_rdm_domain_open(struct fid_fabric *fabric, const struct fi_info *info,
                       const struct lm_link_ops *link_ops, void *link_ctx,
                       const struct fi_ops_domain *ops, void *context,
                       struct lm_rdm_domain **out)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct lm_rdm_domain *dom;
	int ret;

	if (!info || !info->domain_attr)
		return -FI_EINVAL;
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	ret = lm_rdm_domain_init(dom, fab, info, link_ops, link_ctx, context);
	if (ret) {
		free(dom);
		return ret;
	}
	dom->util.domain_fid.ops = (struct fi_ops_domain *)ops;
	*out = dom;
	return 0;
}

int lm_rdm_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
                        enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
	return lm_query_atomic(domain, datatype, op, attr, flags);
}

const struct fi_ops_domain lm_rdm_domain_ops =
    LM_RDM_DOMAIN_OPS(lm_rdm_endpoint);

/* ---- peers ------------------------------------------------------------------ */

static struct lm_rdm_peer *peer_find(struct lm_rdm_ep *ep, const void *addr, uint64_t key)
{
	size_t alen = ep->dom->link_ops->addrlen;

	for (struct lm_hnode *n = lm_hmap_find(&ep->peers, key); n;
	     n = lm_hmap_find_next(n)) {
		struct lm_rdm_peer *p = lm_container_of(n, struct lm_rdm_peer, hnode);

		if (!memcmp(p->addr, addr, alen))
			return p;
	}
	return NULL;
}

struct lm_rdm_peer *lm_rdm_peer_find(struct lm_rdm_ep *ep, const void *addr)
{
	return peer_find(ep, addr, lm_hash_bytes(addr, ep->dom->link_ops->addrlen));
}

struct lm_rdm_peer *lm_rdm_peer_by_addr(struct lm_rdm_ep *ep, const void *addr)
{
	size_t alen = ep->dom->link_ops->addrlen;
	uint64_t key = lm_hash_bytes(addr, alen);
	struct lm_rdm_peer *p = peer_find(ep, addr, key);

	/* One never reached may be there now (a name taken again). */
	if (p && !p->lp && !ep->link->ops->peer_open(ep->link, addr, &p->lp))
		lm_rdm_peer_revive(p);
	if (p)
		return p;
	p = calloc(1, sizeof(*p) + alen);
	if (!p)
		return NULL;
	memcpy(p->addr, addr, alen);
	/* A packet outlives its sender (shm: it waits in our own region),
	 * and a message whose send completed must still be delivered: a
	 * peer the link cannot reach is kept, dead, with no link handle. */
	if (ep->link->ops->peer_open(ep->link, addr, &p->lp)) {
		p->lp = NULL;
		p->dead = true;
	}
	p->fi_addr = FI_ADDR_NOTAVAIL;
	p->fi_gen = UINT64_MAX;
	p->fresh_gen = (uint32_t)atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed);
	p->credit = LM_EAGER_CREDIT;
	lm_list_init(&p->revive);
	lm_hmap_insert(&ep->peers, &p->hnode, key);
	ep->npeers++;
	return p;
}

/* Lane j of the endpoint at p (fi_rx_addr's receive context j): the peer
 * at the address j lanes on, kept in p's lanes once made. */
static struct lm_rdm_peer *peer_lane(struct lm_rdm_ep *ep, struct lm_rdm_peer *p,
                                     uint64_t j)
{
	const struct lm_link_ops *ops = ep->dom->link_ops;
	unsigned char name[LM_LINK_ADDR_MAX];
	struct lm_rdm_peer *q;

	if (j >= LM_RDM_SEP_MAX_CTX || !ops->addr_lane)
		return NULL;
	if (p->lanes && p->lanes[j])
		return p->lanes[j];
	if (!p->lanes && !(p->lanes = calloc(LM_RDM_SEP_MAX_CTX, sizeof(*p->lanes))))
		return NULL;
	if (ops->addr_lane(p->addr, (int)j, name))
		return NULL;
	q = lm_rdm_peer_by_addr(ep, name);
	if (q) {
		q->lane = (uint8_t)j;
		p->lanes[j] = q;
	}
	return q;
}

/* The send side: fi_addr -> peer, cached in a vector indexed like the AV
 * and flushed whenever an address is removed from any AV of the domain. */
struct lm_rdm_peer *lm_rdm_peer_by_fiaddr_slow(struct lm_rdm_ep *ep, fi_addr_t addr)
{
	uint64_t gen = atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed);
	uint64_t idx, lane = 0;
	const void *bytes;
	struct lm_rdm_peer *p;

	if (ep->connected)
		return ep->msg_peer;
	if (!ep->av || addr == FI_ADDR_NOTAVAIL)
		return NULL;
	if (addr & ep->rx_bits) { /* a receive context of a scalable peer */
		lane = addr >> ep->rx_shift;
		addr &= ~ep->rx_bits;
		p = lm_rdm_peer_by_fiaddr(ep, addr);
		return p ? peer_lane(ep, p, lane) : NULL;
	}
	idx = addr & ep->av->idx_mask;
	if (gen != ep->peer_gen) {
		if (ep->peer_vec_len)
			memset(ep->peer_vec, 0,
			       ep->peer_vec_len * sizeof(ep->peer_vec[0]));
		ep->peer_gen = gen;
		/* An address was removed: its endpoint may have closed, and
		 * another opened there since.  What the link already holds
		 * of that (a farewell, a closed connection) is read now,
		 * before the peers are resolved again. */
		lm_rdm_progress_locked(ep);
	}
	if (idx < ep->peer_vec_len && ep->peer_vec[idx])
		return ep->peer_vec[idx];
	bytes = lm_av_addr(ep->av, addr);
	if (!bytes)
		return NULL;
	p = lm_rdm_peer_find(ep, bytes);
	if (p && p->fresh_gen != (uint32_t)gen)
		lm_rdm_peer_afresh(ep, p, gen);
	p = lm_rdm_peer_by_addr(ep, bytes);
	if (!p)
		return NULL;
	if (idx >= ep->peer_vec_len) {
		size_t n = ep->peer_vec_len ? ep->peer_vec_len : PEERS_EXPECTED;
		struct lm_rdm_peer **v;

		while (n <= idx)
			n *= 2;
		v = realloc(ep->peer_vec, n * sizeof(*v));
		if (!v)
			return p;
		memset(v + ep->peer_vec_len, 0, (n - ep->peer_vec_len) * sizeof(*v));
		ep->peer_vec = v;
		ep->peer_vec_len = n;
	}
	ep->peer_vec[idx] = p;
	return p;
}

fi_addr_t lm_rdm_peer_fiaddr_slow(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer)
{
	uint64_t gen = atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed);

	const struct lm_link_ops *ops = ep->dom->link_ops;
	unsigned char first[LM_LINK_ADDR_MAX];

	if (!ep->av)
		return FI_ADDR_NOTAVAIL;
	/* A scalable endpoint's lane: the AV holds its first address. */
	if (peer->lane && ops->addr_lane && !ops->addr_lane(peer->addr, -peer->lane, first))
		peer->fi_addr = lm_av_reverse(ep->av, first);
	else
		peer->fi_addr = lm_av_reverse(ep->av, peer->addr);
	peer->fi_gen = gen;
	return peer->fi_addr;
}

static void peers_free(struct lm_rdm_ep *ep)
{
	lm_list_init(&ep->revive);
	for (size_t b = 0; b < ep->peers.nbuckets; b++) {
		struct lm_hnode *n = ep->peers.buckets[b];

		while (n) {
			struct lm_hnode *next = n->next;
			struct lm_rdm_peer *p =
			    lm_container_of(n, struct lm_rdm_peer, hnode);

			if (p->lp)
				ep->link->ops->peer_close(ep->link, p->lp);
			free(p->lanes);
			free(p);
			n = next;
		}
	}
	lm_hmap_fini(&ep->peers);
	free(ep->peer_vec);
	ep->peer_vec = NULL;
	ep->peer_vec_len = 0;
}

/* ---- progress hooks ------------------------------------------------------- */

size_t lm_rdm_hooks_prepare(struct lm_rdm_hook *hooks, const struct lm_rdm_report *const *reps,
                            size_t nreps)
{
	size_t n = 0;

	for (size_t r = 0; r < nreps; r++) {
		struct lm_cq *cq = reps[r]->cq;
		bool dup = !cq;

		for (size_t k = 0; k < n && !dup; k++)
			dup = hooks[k].cq == cq;
		if (!dup)
			hooks[n++] = (struct lm_rdm_hook){.cq = cq};
	}
	for (size_t r = 0; r < nreps; r++) {
		for (int i = 0; i < LM_CNTR_MAX; i++) {
			struct lm_cntr *c = reps[r]->cntr[i];
			bool dup = !c;

			for (size_t k = 0; k < n && !dup; k++)
				dup = hooks[k].cntr == c;
			if (!dup)
				hooks[n++] = (struct lm_rdm_hook){.cntr = c};
		}
	}
	return n;
}

void lm_rdm_hooks_add(struct lm_rdm_ep *ep, struct lm_rdm_hook *hooks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct lm_rdm_hook *h = &hooks[i];

		h->ep = ep;
		h->p.run = lm_rdm_hook_run;
		h->p.fd = ep->link->fd;
		lm_list_init(&h->p.node);
		if (h->cq)
			lm_cq_add_progress(h->cq, &h->p);
		else
			lm_cntr_add_progress(h->cntr, &h->p);
	}
}

void lm_rdm_hooks_del(struct lm_rdm_hook *hooks, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct lm_rdm_hook *h = &hooks[i];

		if (h->cq)
			lm_cq_del_progress(h->cq, &h->p);
		else
			lm_cntr_del_progress(h->cntr, &h->p);
	}
}

/* The reports a plain endpoint's completions go to, from its bindings
 * (under ep->lock, at enable); and the hooks on them. */
static void reports_prepare(struct lm_rdm_ep *ep)
{
	const struct lm_rdm_report *reps[2] = {&ep->txrep, &ep->own_rxc.rep};
	struct lm_rdm_report remote = {0};
	const struct lm_rdm_report *all[3] = {reps[0], reps[1], &remote};

	ep->txrep.cq = ep->tx_cq;
	ep->txrep.selective = ep->tx_selective;
	ep->own_rxc.rep.cq = ep->rx_cq;
	ep->own_rxc.rep.selective = ep->rx_selective;
	for (int i = 0; i < LM_CNTR_MAX; i++) {
		if (i == LM_CNTR_SEND || i == LM_CNTR_READ || i == LM_CNTR_WRITE)
			ep->txrep.cntr[i] = ep->cntr[i];
		else if (i == LM_CNTR_RECV)
			ep->own_rxc.rep.cntr[i] = ep->cntr[i];
		else
			remote.cntr[i] = ep->cntr[i];
	}
	ep->nhooks = lm_rdm_hooks_prepare(ep->hooks, all, 3);
}

/* ---- bind / enable / close --------------------------------------------- */

int lm_rdm_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_rdm_ctx *ctx = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid);
	struct lm_rdm_ep *ep = ctx->ep;
	static const uint64_t cntr_bits[LM_CNTR_MAX] = {
	    FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE};

	int ret;

	if (!bfid || ctx->alias)
		return -FI_EINVAL;
	if (ep->ext && ep->ext->bind && (ret = ep->ext->bind(ep, bfid, flags)) != 1)
		return ret;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_CQ: {
		struct lm_cq *cq = lm_container_of(bfid, struct lm_cq, cq_fid.fid);

		ret = lm_cq_bind_ep(cq, &ep->dom->util, flags, &ep->tx_cq, &ep->tx_selective,
		                    &ep->rx_cq, &ep->rx_selective);
		if (ret)
			return ret;
		if (!cq->strerror)
			cq->strerror = lm_rdm_strerror;
		return 0;
	}
	case FI_CLASS_CNTR: {
		struct lm_cntr *c = lm_container_of(bfid, struct lm_cntr, cntr_fid.fid);
		bool any = false;

		if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
		              FI_REMOTE_WRITE))
			return -FI_EBADFLAGS;
		/* Counting remote accesses is the FI_RMA_EVENT capability. */
		if ((flags & (FI_REMOTE_READ | FI_REMOTE_WRITE)) &&
		    !(ep->caps & FI_RMA_EVENT))
			return -FI_EINVAL;
		if (c->domain != &ep->dom->util)
			return -FI_EINVAL;
		for (int i = 0; i < LM_CNTR_MAX; i++)
			if ((flags & cntr_bits[i]) && ep->cntr[i])
				return -FI_EINVAL;
		for (int i = 0; i < LM_CNTR_MAX; i++) {
			if (!(flags & cntr_bits[i]))
				continue;
			ep->cntr[i] = c;
			atomic_fetch_add(&c->ref, 1);
			any = true;
		}
		return any ? 0 : -FI_EINVAL;
	}
	case FI_CLASS_AV: {
		struct lm_av *av = lm_container_of(bfid, struct lm_av, av_fid.fid);

		if (flags)
			return -FI_EBADFLAGS;
		if (ep->av || av->domain != &ep->dom->util)
			return -FI_EINVAL;
		ep->av = av;
		atomic_fetch_add(&av->ref, 1);
		return 0;
	}
	case FI_CLASS_SRX_CTX:
		if (flags)
			return -FI_EBADFLAGS;
		return lm_rdm_ep_bind_srx(ep, lm_container_of(bfid, struct lm_rdm_rxc,
		                                              ep_fid.fid));
	case FI_CLASS_STX_CTX:
		if (flags)
			return -FI_EBADFLAGS;
		return lm_rdm_ep_bind_stx(ep, lm_container_of(bfid, struct lm_rdm_stx,
		                                              stx_fid.fid));
	case FI_CLASS_EQ:
		return 0; /* nothing of an RDM endpoint reports to an EQ */
	default:
		return -FI_EINVAL;
	}
}

/* Does each direction the endpoint's caps use have somewhere to report:
 * a CQ, or a counter of that side?  Initiating (messages, RMA, atomics)
 * is the transmit side; receiving messages the receive side.  Without,
 * its completions would have nowhere to go (fi_enable: -FI_ENOCQ). */
static bool ep_reports(const struct lm_rdm_ep *ep)
{
	uint64_t caps = ep->caps;
	bool dirs = caps & (FI_SEND | FI_RECV | FI_READ | FI_WRITE);
	bool tx = (caps & (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC)) &&
	          (!dirs || (caps & (FI_SEND | FI_READ | FI_WRITE)));
	bool rx = (caps & (FI_MSG | FI_TAGGED)) && (!dirs || (caps & FI_RECV));

	if (tx && !ep->tx_cq && !ep->cntr[LM_CNTR_SEND] && !ep->cntr[LM_CNTR_READ] &&
	    !ep->cntr[LM_CNTR_WRITE])
		return false;
	return !rx || ep->rx_cq || ep->cntr[LM_CNTR_RECV];
}

int lm_rdm_ep_enable(struct lm_rdm_ep *ep)
{
	if (ep->enabled)
		return 0;
	if (!ep->av && !ep->connected)
		return -FI_ENOAV;
	/* A scalable endpoint's lanes report through their contexts. */
	if (!ep->head) {
		if (!ep_reports(ep))
			return -FI_ENOCQ;
		reports_prepare(ep);
	}
	if (ep->av && ep->av->idx_mask != UINT64_MAX) {
		ep->rx_shift = (unsigned)(64 - __builtin_popcountll(~ep->av->idx_mask));
		ep->rx_bits = ~ep->av->idx_mask;
	}
	ep->enabled = true;
	return 1; /* the caller adds the hooks */
}

static void ep_free(struct lm_rdm_ep *ep)
{
	struct lm_list *n;

	if (ep->link) {
		lm_rdm_rxc_fini(&ep->own_rxc);
		peers_free(ep);
		ep->link->ops->close(ep->link);
	}
	while ((n = lm_list_pop_front(&ep->ctl_queue))) {
		struct lm_rdm_ctl *c = lm_container_of(n, struct lm_rdm_ctl, node);

		free(c->big);
		lm_bufpool_free(&ep->ctl_pool, c);
	}
	for (size_t i = 0; ep->tx && i < ep->tx_count; i++)
		free(ep->tx[i]);
	free(ep->tx);
	free(ep->tx_free);
	free(ep->rndv);
	free(ep->lanes);
	free(ep->shooks); /* empty: its contexts closed first */
	if (!ep->link) { /* opening failed before the link: no peer yet */
		lm_rdm_rxc_fini(&ep->own_rxc);
		lm_hmap_fini(&ep->peers);
	}
	lm_bufpool_fini(&ep->ctl_pool);
	lm_info_free(ep->info);
	lm_lock_fini(&ep->own_lock);
	free(ep->name);
	free(ep->scratch);
	free(ep);
}

int lm_rdm_ep_close(struct fid *fid)
{
	struct lm_rdm_ctx *ctx = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid);
	struct lm_rdm_ep *ep = ctx->ep;

	if (ctx->alias) {
		atomic_fetch_sub(&ep->ref, 1);
		free(ctx);
		return 0;
	}
	const struct lm_rdm_ep_ext *ext = ep->ext;
	void *prov = ep->prov;

	if (atomic_load(&ep->ref))
		return -FI_EBUSY;
	lm_rdm_ep_listed(ep, false);
	lm_rdm_auto_del(ep);
	if (ext && ext->closing)
		ext->closing(ep);
	lm_rdm_linger(ep);
	lm_rdm_hooks_del(ep->hooks, ep->nhooks);
	ep->nhooks = 0;
	lm_rdm_ep_leave_rxc(ep);
	if (ep->stx)
		atomic_fetch_sub(&ep->stx->ref, 1);
	if (ep->tx_cq)
		atomic_fetch_sub(&ep->tx_cq->ref, 1);
	if (ep->rx_cq)
		atomic_fetch_sub(&ep->rx_cq->ref, 1);
	for (int i = 0; i < LM_CNTR_MAX; i++)
		if (ep->cntr[i])
			atomic_fetch_sub(&ep->cntr[i]->ref, 1);
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	atomic_fetch_sub(&ep->dom->util.ref, 1);
	ep_free(ep);
	if (ext && ext->closed)
		ext->closed(prov);
	return 0;
}

static const struct fi_ops ep_fid_ops;

static int ep_alias(struct lm_rdm_ctx *ctx, struct fi_alias *a)
{
	struct lm_rdm_ctx *al;

	if (!a || !a->fid ||
	    (a->flags & ~(FI_TRANSMIT | FI_RECV | LM_MSG_MODIFIERS | FI_COMPLETION |
	                  FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
	                  FI_DELIVERY_COMPLETE | FI_MULTI_RECV | FI_REMOTE_CQ_DATA |
	                  FI_COMMIT_COMPLETE | FI_FENCE | FI_MORE | FI_TRIGGER)))
		return -FI_EINVAL;
	al = calloc(1, sizeof(*al));
	if (!al)
		return -FI_ENOMEM;
	*al = *ctx;
	al->alias = true;
	if (a->flags & FI_TRANSMIT)
		al->tx_flags = a->flags & ~(FI_TRANSMIT | FI_RECV);
	if (a->flags & FI_RECV)
		al->rx_flags = a->flags & ~(FI_TRANSMIT | FI_RECV);
	atomic_fetch_add(&ctx->ep->ref, 1);
	*a->fid = &al->ep_fid.fid;
	return 0;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct lm_rdm_ctx *ctx = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid);
	uint64_t *flags = arg;
	int ret;

	switch (command) {
	case FI_ENABLE:
		lm_lock_acquire(ctx->ep->lock);
		ret = lm_rdm_ep_enable(ctx->ep);
		lm_lock_release(ctx->ep->lock);
		if (ret == 1) {
			lm_rdm_hooks_add(ctx->ep, ctx->ep->hooks, ctx->ep->nhooks);
			lm_rdm_ep_listed(ctx->ep, true);
			ret = lm_rdm_auto_add(ctx->ep);
		}
		if (!ret && !ctx->alias && ctx->ep->ext && ctx->ep->ext->enabled)
			ctx->ep->ext->enabled(ctx->ep);
		return ret;
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			*flags = ctx->tx_flags;
		else if (*flags & FI_RECV)
			*flags = ctx->rx_flags;
		else
			return -FI_EINVAL;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & LM_BAD_OP_FLAGS)
			return -FI_EBADFLAGS;
		if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			ctx->tx_flags = *flags & ~FI_TRANSMIT;
		else if (*flags & FI_RECV)
			ctx->rx_flags = *flags & ~FI_RECV;
		else
			return -FI_EINVAL;
		return 0;
	case FI_ALIAS:
		return ep_alias(ctx, arg);
	default:
		return -FI_ENOSYS;
	}
}

static const struct fi_ops ep_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = lm_rdm_ep_close,
    .bind = lm_rdm_ep_bind,
    .control = ep_control,
    .ops_open = lm_fid_no_ops_open,
};

/* ---- fi_ops_ep ------------------------------------------------------------ */

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct lm_rdm_ctx *ctx = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid);
	ssize_t ret;

	if (fid->fclass != FI_CLASS_EP)
		return -FI_EINVAL;
	lm_lock_acquire(ctx->ep->lock);
	ret = lm_rdm_cancel(ctx->ep->rxc, ctx->ep, context);
	lm_lock_release(ctx->ep->lock);
	return ret;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct lm_rdm_ep *ep = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;
	int ret;

	if (ep->ext && ep->ext->getopt &&
	    (ret = ep->ext->getopt(ep, level, optname, optval, optlen)) !=
	        -FI_ENOPROTOOPT)
		return ret;
	return lm_rdm_rxc_getopt(ep->rxc, level, optname, optval, optlen);
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct lm_rdm_ep *ep = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;
	int ret;

	if (ep->ext && ep->ext->setopt &&
	    (ret = ep->ext->setopt(ep, level, optname, optval, optlen)) !=
	        -FI_ENOPROTOOPT)
		return ret;
	return lm_rdm_rxc_setopt(ep->rxc, level, optname, optval, optlen);
}

static ssize_t ep_rx_size_left(struct fid_ep *fid)
{
	struct lm_rdm_ep *ep = lm_rdm_ep_of(fid);
	ssize_t n;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	lm_lock_acquire(ep->lock);
	n = (ssize_t)(ep->rxc->rx_limit - ep->rxc->rx_count);
	lm_lock_release(ep->lock);
	return n;
}

static ssize_t ep_tx_size_left(struct fid_ep *fid)
{
	struct lm_rdm_ep *ep = lm_rdm_ep_of(fid);
	ssize_t n;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	lm_lock_acquire(ep->lock);
	n = (ssize_t)ep->tx_nfree;
	lm_lock_release(ep->lock);
	return n;
}

static const struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = lm_ep_no_tx_ctx,
    .rx_ctx = lm_ep_no_rx_ctx,
    .rx_size_left = ep_rx_size_left,
    .tx_size_left = ep_tx_size_left,
};

/* ---- connected endpoints -------------------------------------------------- */

int lm_rdm_ep_connected(struct lm_rdm_ep *ep, const void *addr)
{
	struct lm_rdm_peer *p;

	lm_lock_acquire(ep->lock);
	p = ep->link ? lm_rdm_peer_by_addr(ep, addr) : NULL;
	if (p) {
		lm_rdm_peer_revive(p);
		ep->msg_peer = p;
		ep->conn_err = 0;
		ep->conn_failed = ep->conn_told = false;
	}
	lm_lock_release(ep->lock);
	return p ? 0 : -FI_ENOMEM;
}

void lm_rdm_ep_disconnected(struct lm_rdm_ep *ep, int err)
{
	lm_lock_acquire(ep->lock);
	if (!ep->conn_failed)
		ep->conn_err = err; /* over the link's own FI_ENOTCONN */
	ep->conn_told = true;       /* the provider ends it: it knows */
	lm_rdm_progress_locked(ep);
	lm_lock_release(ep->lock);
}

/* ---- fi_ops_cm: names ----------------------------------------------------- */

static int link_open(struct lm_rdm_ep *ep, const void *name, bool name_hint)
{
	struct lm_link_attr attr = {
	    .hdr_size = sizeof(struct lm_rdm_hdr),
	    .recv = lm_rdm_recv_pkt,
	    .arg = ep,
	    .place = lm_rdm_place,
	    .placed = lm_rdm_placed,
	    .unplaced = lm_rdm_unplaced,
	    .lost = lm_rdm_lost,
	    .tx_size = ep->tx_count,
	    .rx_size = ep->rxc->rx_limit,
	    .no_bulk = ep->dom->no_bulk,
	    .connected = ep->connected,
	    .name_hint = name_hint,
	};
	struct lm_link *link;
	int ret = ep->dom->link_ops->open(ep->dom->link_ctx, &attr, name, &link);

	if (ret)
		return ret;
	free(ep->scratch);
	ep->scratch = malloc(link->max_payload);
	if (!ep->scratch) {
		link->ops->close(link);
		return -FI_ENOMEM;
	}
	ep->link = link;
	ep->eager_max = ep->dom->eager_max ? LM_MIN(ep->dom->eager_max, link->max_payload)
	                                   : link->max_payload;
	ep->bulk = !ep->dom->no_bulk && (link->caps & LM_LINK_BULK_READ);
	return 0;
}

/* Under ep->lock, before it is enabled: ep's link anew at name (NULL: a
 * fresh address), its peers forgotten.  Should name not open, ep takes a
 * fresh address, to stay usable, and the error is returned.  away: the
 * old link closes only after the new one opened, so that a name that
 * leaves the choice to the link (a port of a range) gets another
 * address. */
static int relink(struct lm_rdm_ep *ep, const void *name, bool away)
{
	struct lm_hmap fresh;
	struct lm_link *old = ep->link;
	int ret;

	if (lm_hmap_init(&fresh, PEERS_EXPECTED))
		return -FI_ENOMEM;
	peers_free(ep);
	ep->peers = fresh;
	ep->last_src = NULL;
	ep->link = NULL;
	if (old && !away)
		old->ops->close(old);
	ret = link_open(ep, name, false);
	if (ret && name)
		link_open(ep, NULL, false);
	if (old && away)
		old->ops->close(old);
	return ret;
}

/* A scalable endpoint's lanes after its first took another address: at
 * the addresses after it. */
static int lanes_rename(struct lm_rdm_ep *head)
{
	unsigned char name[LM_LINK_ADDR_MAX];
	int ret = 0;

	for (size_t k = 1; k < head->nlanes && !ret; k++) {
		struct lm_rdm_ep *lane = head->lanes[k];

		ret = head->dom->link_ops->addr_lane(head->link->addr, (int)k, name);
		if (ret)
			break;
		lm_lock_acquire(lane->lock);
		ret = lane->enabled ? -FI_EOPBADSTATE : relink(lane, name, false);
		lm_lock_release(lane->lock);
	}
	return ret;
}

int lm_rdm_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct lm_rdm_ep *ep = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;
	const struct lm_link_ops *ops = ep->dom->link_ops;
	unsigned char *bin;
	int ret;

	if (!addr || !addrlen)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	bin = calloc(1, ops->addrlen + 1);
	if (!bin)
		return -FI_ENOMEM;
	if (ep->dom->util.info->addr_format == FI_ADDR_STR) {
		char *s = strndup(addr, addrlen);

		ret = s ? ops->addr_from_str(s, NULL, bin) : -FI_ENOMEM;
		free(s);
	} else if (addrlen != ops->addrlen) {
		ret = -FI_EINVAL;
	} else {
		memcpy(bin, addr, addrlen);
		ret = 0;
	}
	if (ret)
		goto out;
	lm_lock_acquire(ep->lock);
	ret = relink(ep, bin, false);
	lm_lock_release(ep->lock);
	/* A scalable endpoint's other lanes follow its first. */
	if (!ret && ep->nlanes > 1)
		ret = lanes_rename(ep);
out:
	free(bin);
	return ret;
}

int lm_rdm_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct lm_rdm_ep *ep = lm_container_of(fid, struct lm_rdm_ctx, ep_fid.fid)->ep;
	const struct lm_link_ops *ops = ep->dom->link_ops;

	if (!addrlen)
		return -FI_EINVAL;
	if (!ep->link)
		return -FI_EOPBADSTATE;
	if (ep->dom->util.info->addr_format == FI_ADDR_STR) {
		char buf[ADDR_STR_MAX];
		size_t need = sizeof(buf);
		int ret = ops->addr_to_str(ep->link->addr, buf, &need);

		if (ret)
			return ret;
		if (!addr || *addrlen < need) {
			/* man fi_cm: truncated, and the length it needs */
			if (addr)
				memcpy(addr, buf, *addrlen);
			*addrlen = need;
			return -FI_ETOOSMALL;
		}
		memcpy(addr, buf, need);
		*addrlen = need;
		return 0;
	}
	if (!addr || *addrlen < ops->addrlen) {
		if (addr)
			memcpy(addr, ep->link->addr, *addrlen);
		*addrlen = ops->addrlen;
		return -FI_ETOOSMALL;
	}
	memcpy(addr, ep->link->addr, ops->addrlen);
	*addrlen = ops->addrlen;
	return 0;
}

static const struct fi_ops_cm ep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = lm_rdm_setname,
    .getname = lm_rdm_getname,
    .getpeer = lm_cm_no_getpeer,
    /* Applications written for both kinds of endpoint call fi_shutdown
     * on an RDM one too (the fabtests do). */
    .connect = lm_cm_no_connect,
    .listen = lm_cm_no_listen,
    .accept = lm_cm_no_accept,
    .reject = lm_cm_no_reject,
    .shutdown = lm_cm_no_shutdown,
    .join = lm_cm_no_join,
};

/* ---- fi_endpoint ------------------------------------------------------------ */

static int tables_init(struct lm_rdm_ep *ep)
{
	int ret;

	ep->tx = calloc(ep->tx_count, sizeof(*ep->tx));
	ep->tx_free = calloc(ep->tx_count, sizeof(*ep->tx_free));
	ep->rndv = calloc(ep->rndv_count, sizeof(*ep->rndv));
	if (!ep->tx || !ep->tx_free || !ep->rndv)
		return -FI_ENOMEM;
	/* Requests are made on a slot's first use (lm_rdm_tx_alloc), and
	 * transfer slots get their first generation on theirs (rndv_alloc):
	 * an endpoint that never sends holds a table of pointers. */
	for (size_t i = 0; i < ep->tx_count; i++)
		ep->tx_free[i] = (uint32_t)(ep->tx_count - 1 - i);
	ep->tx_nfree = ep->tx_count;
	if (lm_bufpool_init(&ep->ctl_pool, sizeof(struct lm_rdm_ctl), 0, CTL_POOL_CHUNK, 0))
		return -FI_ENOMEM;
	ret = lm_rdm_rxc_init(&ep->own_rxc, ep->dom, ep->caps, ep->own_rxc.rx_limit,
	                      ep->own_rxc.unexp_max, ep->connected);
	if (ret)
		return ret;
	if (lm_hmap_init(&ep->peers, PEERS_EXPECTED))
		return -FI_ENOMEM;
	return 0;
}

int lm_rdm_endpoint(struct fid_domain *domain, struct fi_info *info,
                    struct fid_ep **ep_fid, void *context)
{
	return lm_rdm_endpoint_ext(domain, info, NULL, NULL, ep_fid, context);
}

/* The sizes info asks for, or the engine's defaults. */
static void ep_sizes(struct lm_rdm_ep *ep, const struct fi_info *info)
{
	const struct fi_tx_attr *tx = info->tx_attr;
	const struct fi_rx_attr *rx = info->rx_attr;

	if (tx)
		ep->ctx.tx_flags = tx->op_flags;
	if (rx)
		ep->ctx.rx_flags = rx->op_flags;
	ep->tx_count = tx && tx->size ? tx->size : DEFAULT_TX_SIZE;
	ep->own_rxc.rx_limit = rx && rx->size ? rx->size : DEFAULT_RX_SIZE;
	ep->rndv_count = ep->own_rxc.rx_limit;
	ep->inject_size = tx && tx->inject_size ? tx->inject_size : DEFAULT_INJECT_SIZE;
	ep->own_rxc.unexp_max = rx && rx->total_buffered_recv ? rx->total_buffered_recv
	                                                      : DEFAULT_UNEXP_MAX;
}

/* The endpoint's fids and the ops tables it gets: the engine's, but a
 * provider's fi_ops_cm (ext->cm). */
static void ep_fids(struct lm_rdm_ep *ep, const struct lm_rdm_ep_ext *ext, void *prov,
                    void *context)
{
	ep->ctx.ep = ep;
	ep->ctx.txrep = &ep->txrep;
	ep->ctx.ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ctx.ep_fid.fid.context = context;
	ep->ctx.ep_fid.fid.ops = (struct fi_ops *)&ep_fid_ops;
	ep->ctx.ep_fid.ops = (struct fi_ops_ep *)&ep_ops;
	ep->ctx.ep_fid.cm = (struct fi_ops_cm *)(ext && ext->cm ? ext->cm : &ep_cm_ops);
	ep->ctx.ep_fid.msg = (struct fi_ops_msg *)&lm_rdm_msg_ops;
	ep->ctx.ep_fid.tagged = (struct fi_ops_tagged *)&lm_rdm_tagged_ops;
	ep->ctx.ep_fid.rma = (struct fi_ops_rma *)&lm_rdm_rma_ops;
	ep->ctx.ep_fid.atomic = (struct fi_ops_atomic *)&lm_rdm_atomic_ops;
	ep->ext = ext;
	ep->prov = prov;
}

/* The address info's source address names (in the link's binary form or,
 * with FI_ADDR_STR, as text) in bin, and *name = bin; *name = NULL when it
 * names none. */
static int info_name(struct lm_rdm_ep *ep, const struct fi_info *info,
                     unsigned char bin[LM_LINK_ADDR_MAX], const void **name)
{
	const struct lm_link_ops *ops = ep->dom->link_ops;
	int ret;

	*name = NULL;
	if (!info->src_addr || !info->src_addrlen)
		return 0;
	if (info->addr_format == FI_ADDR_STR) {
		if (!memchr(info->src_addr, 0, info->src_addrlen))
			return -FI_EINVAL; /* text that does not end */
		memset(bin, 0, LM_LINK_ADDR_MAX);
		ret = ops->addr_from_str(info->src_addr, NULL, bin);
		if (ret)
			return ret;
		*name = bin;
	} else if (info->src_addrlen == ops->addrlen) {
		memcpy(bin, info->src_addr, ops->addrlen);
		*name = bin;
	}
	return 0;
}

/* The link, opened on info's source address when it names one. */
static int ep_link_open(struct lm_rdm_ep *ep, const struct fi_info *info)
{
	unsigned char bin[LM_LINK_ADDR_MAX];
	const void *name;
	int ret = info_name(ep, info, bin, &name);

	return ret ? ret : link_open(ep, name, true);
}

/* An endpoint for info: its link at lane_name when given (a scalable
 * endpoint's lane), else where info says. */
static int ep_open(struct lm_rdm_domain *dom, const struct fi_info *info,
                   const struct lm_rdm_ep_ext *ext, void *prov, void *context,
                   const void *lane_name, struct lm_rdm_ep **out)
{
	struct lm_rdm_ep *ep = calloc(1, sizeof(*ep));
	int ret;

	if (!ep)
		return -FI_ENOMEM;
	ep->connected = info->ep_attr->type == FI_EP_MSG;
	ep->info = lm_info_dup(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	lm_lock_init(&ep->own_lock, dom->util.shared);
	ep->lock = &ep->own_lock;
	ep->rxc = &ep->own_rxc;
	lm_list_init(&ep->rxc_node);
	ep->dom = dom;
	ep->caps = info->caps ? info->caps : dom->util.caps;
	/* Before API 2.0 that bit is FI_VARIABLE_MSG, never offered here. */
	if (dom->util.fabric->fabric_fid.api_version < FI_VERSION(2, 0))
		ep->caps &= ~FI_EXACT_DIRECTED_RECV;
	ep_fids(ep, ext, prov, context);
	ep_sizes(ep, info);
	lm_list_init(&ep->tx_queue);
	lm_list_init(&ep->revive);
	lm_list_init(&ep->tx_wait);
	lm_list_init(&ep->rndv_active);
	lm_list_init(&ep->ctl_queue);
	ep->peer_gen = atomic_load(&dom->av_gen);
	ret = tables_init(ep);
	if (!ret)
		ret = lane_name ? link_open(ep, lane_name, false) : ep_link_open(ep, info);
	if (ret) {
		ep_free(ep);
		return ret;
	}
	atomic_fetch_add(&dom->util.ref, 1);
	*out = ep;
	return 0;
}

/* Tries at fresh addresses for a scalable endpoint whose lanes' addresses
 * were taken (by other endpoints, or tcp ports by other programs). */
#define LANE_TRIES 16

/* Lanes 1..n-1 of head: endpoints like it at the addresses that many lanes
 * from its own.  Where one is taken and head's address was not the
 * application's choice (a port or token picked at open), head moves to a
 * fresh one and they try again. */
static int lanes_open(struct lm_rdm_ep *head, size_t n)
{
	const struct lm_link_ops *ops = head->dom->link_ops;
	unsigned char asked_bin[LM_LINK_ADDR_MAX], name[LM_LINK_ADDR_MAX];
	const void *asked;
	bool chosen;
	int ret = info_name(head, head->info, asked_bin, &asked);

	if (ret)
		return ret;
	/* The application chose it when it got just what it asked for. */
	chosen = asked && !memcmp(asked, head->link->addr, ops->addrlen);
	head->lanes[0] = head;
	head->nlanes = 1;
	for (int tries = 0;; tries++) {
		for (size_t k = head->nlanes; k < n; k++) {
			struct lm_rdm_ep *lane;

			ret = ops->addr_lane(head->link->addr, (int)k, name);
			if (!ret)
				ret = ep_open(head->dom, head->info, NULL, NULL, NULL, name,
				              &lane);
			if (ret)
				break;
			lane->head = head;
			lane->lane_flags = (uint16_t)(k << LM_HF_LANE_SHIFT);
			head->lanes[head->nlanes++] = lane;
		}
		if (head->nlanes == n)
			return 0;
		while (head->nlanes > 1)
			lm_rdm_ep_close(&head->lanes[--head->nlanes]->ctx.ep_fid.fid);
		if (chosen || tries == LANE_TRIES)
			return ret;
		LM_INFO(head->dom->util.fabric->prov, FI_LOG_EP_CTRL,
		        "scalable endpoint: a lane's address is taken (%s); moving\n",
		        fi_strerror(-ret));
		ret = relink(head, asked, true);
		if (ret)
			return ret;
	}
}

int lm_rdm_scalable_lanes(struct lm_rdm_ep *head, size_t n)
{
	head->lanes = calloc(n, sizeof(*head->lanes));
	if (!head->lanes)
		return -FI_ENOMEM;
	head->head = head;
	if (n > 1 && !head->dom->link_ops->addr_lane)
		return -FI_EINVAL;
	return lanes_open(head, n);
}

int lm_rdm_endpoint_ext(struct fid_domain *domain, struct fi_info *info,
                        const struct lm_rdm_ep_ext *ext, void *prov,
                        struct fid_ep **ep_fid, void *context)
{
	struct lm_rdm_domain *dom =
	    lm_container_of(domain, struct lm_rdm_domain, util.domain_fid);
	struct lm_rdm_ep *ep;
	int ret;

	if (!info || !ep_fid || !info->ep_attr ||
	    (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_MSG))
		return -FI_EINVAL;
	/* Only what fi_getinfo could have offered: caps that exist, iovs
	 * and queues within the engine's limits (libfabric's providers
	 * refuse larger ones too). */
	if ((info->caps & ~(LM_PRIMARY_CAPS | LM_SECONDARY_CAPS | LM_MSG_MODIFIERS |
	                     LM_RMA_MODIFIERS)) ||
	    (info->tx_attr && !lm_rdm_tx_attr_ok(info->tx_attr)) ||
	    (info->rx_attr && !lm_rdm_rx_attr_ok(info->rx_attr)))
		return -FI_EINVAL;
	ret = ep_open(dom, info, ext, prov, context, NULL, &ep);
	if (ret)
		return ret;
	*ep_fid = &ep->ctx.ep_fid;
	return 0;
}
