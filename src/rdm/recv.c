/* recv.c - FI_MSG and FI_TAGGED receives over the engine: posting them and
 * matching them (util's tagmatch), eager delivery, unexpected messages,
 * peek/claim/discard, multi-receive buffers, cancel; and the dispatch of
 * every incoming packet (here, so that a message's arrival is one function
 * from the link's callback to its completion).  Rendezvous and placed
 * payloads are rndv.c's. */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

/* ---- receive-side completions -------------------------------------------- */

static LM_HOT_INLINE void rx_report(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx,
                                    size_t msg_len, uint64_t data, uint64_t tag,
                                    fi_addr_t src, uint64_t extra)
{
	struct lm_rx_entry *e = &rx->e;
	bool multi = e->flags & FI_MULTI_RECV;
	size_t cap = multi ? e->last_len : e->total_len;
	bool trunc = msg_len > cap;
	const struct lm_rdm_report *rep = lm_rdm_rx_rep(ep, rx->rxc);
	struct lm_cntr *c = rep->cntr[LM_CNTR_RECV];

	if (c) {
		if (trunc)
			lm_cntr_inc_err(c);
		else
			lm_cntr_inc(c);
	}
	if (!rep->cq)
		return;
	if (rep->selective && !(e->flags & FI_COMPLETION) && !trunc &&
	    !(extra & FI_MULTI_RECV))
		return;
	lm_rx_complete(rep->cq, e, msg_len, data, tag, src, extra);
}

void lm_rdm_rx_report(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, size_t msg_len,
                      uint64_t data, uint64_t tag, fi_addr_t src, uint64_t extra)
{
	rx_report(ep, rx, msg_len, data, tag, src, extra);
}

static void rxc_rx_free(struct lm_rdm_rxc *rxc, struct lm_rdm_rx *rx)
{
	rxc->rx_count--;
	lm_bufpool_free(&rxc->rx_pool, rx);
}

void lm_rdm_rx_free(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx)
{
	(void)ep;
	rxc_rx_free(rx->rxc, rx);
}

void lm_rdm_rx_end(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, int err)
{
	const struct lm_rdm_report *rep = lm_rdm_rx_rep(ep, rx->rxc);

	if (rep->cq)
		lm_rx_failed(rep->cq, &rx->e, err);
	if (rep->cntr[LM_CNTR_RECV])
		lm_cntr_inc_err(rep->cntr[LM_CNTR_RECV]);
	/* A multi-receive buffer a rendezvous still fills is freed when that
	 * ends. */
	rx->released = true;
	if (!rx->busy)
		lm_rdm_rx_free(ep, rx);
}

void lm_rdm_unexp_free(struct lm_rdm_ep *ep, struct lm_rdm_unexp *x)
{
	struct lm_rdm_rxc *rxc = x->rxc;

	(void)ep;
	rxc->acct->unexp_bytes -= x->buf_len;
	if (x->buf) {
		if (x->small)
			lm_bufpool_free(&rxc->small_pool, x->buf);
		else
			free(x->buf);
	}
	lm_bufpool_free(&rxc->unexp_pool, x);
}

size_t lm_rdm_rx_place(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, size_t len,
                       struct iovec *iov, bool *released)
{
	struct lm_rx_entry *e = &rx->e;

	*released = false;
	if (!(e->flags & FI_MULTI_RECV)) {
		memcpy(iov, e->iov, e->iov_count * sizeof(*iov));
		return e->iov_count;
	}
	(void)ep;
	iov[0].iov_base = lm_rx_consume(e, len, rx->rxc->min_multi_recv, released);
	iov[0].iov_len = e->last_len;
	return 1;
}

void lm_rdm_rx_multi_after(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, bool released,
                           bool queued)
{
	(void)ep;
	if (!released)
		return;
	rx->released = true;
	if (queued)
		lm_match_remove_rx(rx->e.flags & FI_TAGGED ? &rx->rxc->tagged : &rx->rxc->msg,
		                   &rx->e);
}

/* An eager message (payload, len bytes) into a->rx. */
static LM_HOT_INLINE void deliver_eager(struct lm_rdm_ep *ep,
                                        const struct lm_rdm_arrival *a,
                                        const void *payload, size_t len)
{
	struct lm_rdm_rx *rx = a->rx;
	struct iovec iov[LM_IOV_LIMIT];
	bool released;
	size_t n;
	uint64_t extra = a->hflags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0;

	if (!(rx->e.flags & FI_MULTI_RECV)) {
		lm_copy_to_iov(rx->e.iov, rx->e.iov_count, 0, payload, len);
		rx_report(ep, rx, len, a->data, a->tag, a->src, extra);
		lm_rdm_rx_free(ep, rx);
		return;
	}
	/* A multi-receive buffer: the next piece of it. */
	n = lm_rdm_rx_place(ep, rx, len, iov, &released);
	lm_copy_to_iov(iov, n, 0, payload, len);
	/* The release is announced by the buffer's last completion: not
	 * while a rendezvous still lands in it. */
	if (released && !rx->busy)
		extra |= FI_MULTI_RECV;
	rx_report(ep, rx, len, a->data, a->tag, a->src, extra);
	lm_rdm_rx_multi_after(ep, rx, released, a->queued);
	if (rx->released && !rx->busy)
		lm_rdm_rx_free(ep, rx);
}

/* ---- arrivals ------------------------------------------------------------- */

/* The arrival of a message whose header is h, matched to rx (or none). */
static LM_HOT_INLINE struct lm_rdm_arrival arrival_of(const struct lm_rdm_hdr *h,
                                                      struct lm_rdm_peer *peer,
                                                      fi_addr_t src, struct lm_rdm_rx *rx)
{
	return (struct lm_rdm_arrival){.rx = rx,
	                               .peer = peer,
	                               .src = src,
	                               .size = h->size,
	                               .tag = h->tag,
	                               .data = h->data,
	                               .sreq = h->sreq,
	                               .hflags = h->flags,
	                               .queued = rx && (rx->e.flags & FI_MULTI_RECV)};
}

/* An unexpected message: queued with its payload (eager) or the sender's
 * buffer list (rts), until a receive takes it. */
static void unexp_store(struct lm_rdm_ep *ep, struct lm_rdm_rxc *rxc, struct lm_match *m,
                        const struct lm_rdm_arrival *a, const struct lm_rdm_rts *rts,
                        const void *payload, size_t plen)
{
	struct lm_rdm_unexp *x = lm_bufpool_alloc(&rxc->unexp_pool);

	if (!x) {
		/* A lost message beats a crash; the pool only fails without
		 * memory. */
		if (!rts)
			lm_rdm_credit_owe(ep, a->peer, plen);
		return;
	}
	memset(x, 0, sizeof(*x));
	x->ep = ep;
	x->rxc = rxc;
	x->peer = a->peer;
	x->hflags = a->hflags;
	x->sreq = a->sreq;
	x->u.src = a->src;
	x->u.tag = a->tag;
	x->u.data = a->data;
	x->u.len = a->size;
	x->u.flags = (a->hflags & LM_HF_TAGGED ? FI_TAGGED : FI_MSG) |
	             (a->hflags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0);
	x->u.payload = x;
	if (rts) {
		x->rndv = true;
		x->rts = *rts;
	} else if (plen) {
		if (plen <= rxc->small_pool.elem_size)
			x->buf = lm_bufpool_alloc(&rxc->small_pool);
		x->small = x->buf != NULL;
		if (!x->buf)
			x->buf = malloc(plen);
		if (!x->buf) {
			lm_bufpool_free(&rxc->unexp_pool, x);
			lm_rdm_credit_owe(ep, a->peer, plen);
			return;
		}
		memcpy(x->buf, payload, plen);
		x->buf_len = plen;
		rxc->acct->unexp_bytes += plen;
	}
	if (a->src == FI_ADDR_NOTAVAIL)
		rxc->unknown = true;
	lm_match_add_unexp(m, &x->u);
}

/* A peer's first messages may come before the application inserts its
 * address (Open MPI inserts a peer when it first needs it: to receive
 * from the source a probe named, say).  Those wait as FI_ADDR_NOTAVAIL;
 * once addresses were inserted since they came, each whose peer now has
 * an fi_addr is filed under it, so that a receive directed there or a
 * FI_SOURCE completion finds it (libfabric's peer SRX does the same in
 * foreach_unspec_addr).  Before every receive and peek; costs a load
 * and a compare unless something is to be done. */
static void adopt_unknown(struct lm_rdm_rxc *rxc)
{
	uint64_t gen;
	struct lm_list *it;

	if (!rxc->unknown)
		return;
	gen = atomic_load_explicit(&rxc->dom->av_ins_gen, memory_order_relaxed);
	if (gen == rxc->unknown_gen)
		return;
	rxc->unknown_gen = gen;
	rxc->unknown = false;
	for (int k = 0; k < 2; k++) {
		struct lm_match *m = k ? &rxc->tagged : &rxc->msg;
		struct lm_list *lists[] = {&m->unexp, &m->claimed};

		for (size_t l = 0; l < LM_ARRAY_SIZE(lists); l++) {
			lm_list_foreach(lists[l], it)
			{
				struct lm_unexp_entry *u =
				    lm_list_entry(it, struct lm_unexp_entry, node);
				struct lm_rdm_unexp *x = u->payload;
				fi_addr_t src;

				if (u->src != FI_ADDR_NOTAVAIL)
					continue;
				src = lm_rdm_peer_fiaddr(x->ep, x->peer);
				if (src == FI_ADDR_NOTAVAIL)
					rxc->unknown = true;
				else
					lm_match_set_src(m, u, src);
			}
		}
	}
}

/* An EAGER or RTS packet.  Inline in the dispatch below, its one caller:
 * every message comes this way.  Each arrival is built where it is used,
 * so that the eager path's stays in registers. */
static LM_HOT_INLINE void msg_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                   const struct lm_rdm_hdr *h, const void *payload,
                                   size_t plen)
{
	struct lm_rdm_rxc *rxc = lm_rdm_rxc_of(ep);
	struct lm_match *m = h->flags & LM_HF_TAGGED ? &rxc->tagged : &rxc->msg;
	fi_addr_t src = lm_rdm_peer_fiaddr(ep, peer);
	struct lm_rx_entry *e;
	struct lm_rdm_rts rts;
	const unsigned char *early = NULL;
	size_t early_len = 0;

	peer->replying = true;
	if (h->op == LM_OP_RTS) {
		size_t rlen = h->flags & LM_HF_EARLY ? h->addr : plen;
		struct lm_rdm_rndv *r = peer->eager;

		if (rlen > plen || lm_rdm_rts_parse(&rts, payload, rlen) ||
		    plen - rlen > h->size)
			return;
		if (h->flags & LM_HF_EARLY) {
			early = (const unsigned char *)payload + rlen;
			early_len = plen - rlen;
		}
		if (r && r->kind == LM_RNDV_EARLY && r->sreq == h->sreq) {
			/* Matched when its header came (lm_rdm_place), its
			 * first piece not placed: what fits. */
			lm_rdm_rndv_header_rest(ep, r, early, early_len);
			return;
		}
	} else if (plen != h->size) {
		lm_rdm_credit_owe(ep, peer, plen); /* dropped */
		return;
	} else if (peer->eager && peer->eager->kind == LM_RNDV_EAGER) {
		/* Matched when its header came (lm_rdm_place), too big to
		 * place whole: what fits, the rest dropped (truncation). */
		lm_rdm_rndv_header_rest(ep, peer->eager, payload, plen);
		return;
	}
	e = lm_match_arrival(m, src, h->tag);
	if (!e) {
		struct lm_rdm_arrival a = arrival_of(h, peer, src, NULL);

		unexp_store(ep, rxc, m, &a, h->op == LM_OP_RTS ? &rts : NULL, payload, plen);
	} else if (h->op == LM_OP_RTS) {
		struct lm_rdm_arrival a =
		    arrival_of(h, peer, src, lm_container_of(e, struct lm_rdm_rx, e));

		lm_rdm_rndv_start(ep, &a, &rts, early, early_len);
	} else {
		struct lm_rdm_arrival a =
		    arrival_of(h, peer, src, lm_container_of(e, struct lm_rdm_rx, e));

		deliver_eager(ep, &a, payload, plen);
		lm_rdm_credit_owe(ep, peer, plen);
		if (h->flags & LM_HF_ACK)
			lm_rdm_answer(ep, peer, LM_OP_ACK, h->sreq, 0);
	}
}

/* ---- dispatch --------------------------------------------------------------- */

void lm_rdm_recv_pkt(void *arg, const void *src_addr, const void *hdr,
                     const void *payload, size_t plen)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_hdr h;
	struct lm_rdm_peer *peer;

	lm_rdm_hdr_load(&h, hdr);
	if (h.version != LM_RDM_WIRE_VERSION || h.len != plen || !h.op ||
	    h.op >= LM_OP_MAX) {
		LM_WARN(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
		        "dropping packet: version %u op %u len %u/%zu\n", h.version, h.op,
		        h.len, plen);
		return;
	}
	peer = lm_rdm_peer_of_src(ep, src_addr);
	if (!peer)
		return;
	if (__builtin_expect(h.flags & LM_HF_LANE_MASK, 0)) /* a scalable one's lane */
		peer->lane = (uint8_t)(h.flags >> LM_HF_LANE_SHIFT);
	switch (h.op) {
	case LM_OP_EAGER:
	case LM_OP_RTS:
		lm_rdm_credit_back(peer, h.rreq);
		msg_recv(ep, peer, &h, payload, plen);
		break;
	case LM_OP_CTS:
		lm_rdm_on_cts(ep, peer, &h);
		break;
	case LM_OP_DATA:
		lm_rdm_rndv_data(ep, peer, &h, payload, plen);
		break;
	case LM_OP_FIN:
	case LM_OP_ACK:
		lm_rdm_on_fin(ep, peer, &h);
		break;
	case LM_OP_ATOMIC:
	case LM_OP_ATOMIC_RESP:
		lm_rdm_atomic_recv(ep, peer, &h, payload, plen);
		break;
	case LM_OP_PUSH:
		lm_rdm_on_push(ep, peer, &h, payload, plen);
		break;
	case LM_OP_PUSHED:
		lm_rdm_on_pushed(ep, peer, &h);
		break;
	case LM_OP_CREDIT:
		lm_rdm_credit_back(peer, h.size);
		break;
	default:
		lm_rdm_rma_recv(ep, peer, &h, payload, plen);
		break;
	}
}

/* A queued message taken by a receive (post or claim), or discarded (rx
 * NULL): on the endpoint it came to, whose link and CQ it uses (in a
 * shared receive context, not always the one the receive was posted
 * through). */
static void deliver_unexp(struct lm_rdm_rx *rx, struct lm_rdm_unexp *x, bool queued)
{
	struct lm_rdm_ep *ep = x->ep;
	struct lm_rdm_arrival a = {.rx = rx,
	                           .peer = x->peer,
	                           .src = x->u.src,
	                           .size = x->u.len,
	                           .tag = x->u.tag,
	                           .data = x->u.data,
	                           .sreq = x->sreq,
	                           .hflags = x->hflags,
	                           .queued = queued};

	if (x->rndv) {
		lm_rdm_rndv_start(ep, &a, &x->rts, NULL, 0);
		lm_rdm_unexp_free(ep, x);
		return;
	}
	/* Delivered or discarded: its eager bytes are free at this end. */
	lm_rdm_credit_owe(ep, x->peer, x->u.len);
	if (rx)
		deliver_eager(ep, &a, x->buf, x->u.len);
	if (x->hflags & LM_HF_ACK)
		lm_rdm_answer(ep, x->peer, LM_OP_ACK, x->sreq, 0);
	lm_rdm_unexp_free(ep, x);
}

/* ---- posting receives --------------------------------------------------- */

/* Progress on every endpoint whose messages rxc matches: its own
 * endpoint, or each enabled member of a shared context. */
static void rxc_progress(struct lm_rdm_rxc *rxc, struct lm_rdm_ep *ep)
{
	struct lm_list *it;

	if (!rxc->shared) {
		lm_rdm_progress_locked(ep);
		return;
	}
	lm_list_foreach(&rxc->members, it)
	{
		struct lm_rdm_ep *m = lm_list_entry(it, struct lm_rdm_ep, rxc_node);

		if (m->enabled)
			lm_rdm_progress_locked(m);
	}
}

/* FI_PEEK; ep speaks for rxc (reports what no message names). */
static ssize_t peek(struct lm_rdm_rxc *rxc, struct lm_rdm_ep *ep, struct lm_match *m,
                    const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct lm_unexp_entry *u;
	struct lm_rdm_unexp *x;
	uint64_t cflags;

	rxc_progress(rxc, ep);
	adopt_unknown(rxc); /* what the progress brought too */
	u = lm_match_peek(m, msg->addr, msg->tag, msg->ignore);
	if (!u) {
		struct fi_cq_err_entry e = {.op_context = msg->context,
		                            .flags = FI_RECV | FI_TAGGED,
		                            .tag = msg->tag,
		                            .err = FI_ENOMSG,
		                            .prov_errno = FI_ENOMSG};

		struct lm_cq *cq = lm_rdm_rx_rep(ep, rxc)->cq;

		if (cq)
			lm_cq_write_err(cq, &e, FI_ADDR_NOTAVAIL);
		return 0;
	}
	x = u->payload;
	cflags = FI_RECV | FI_TAGGED | (u->flags & FI_REMOTE_CQ_DATA);
	if (lm_rdm_rx_rep(x->ep, rxc)->cq)
		lm_cq_write(lm_rdm_rx_rep(x->ep, rxc)->cq, msg->context, cflags, u->len, NULL,
		            u->data, u->tag, u->src);
	if (flags & FI_DISCARD) {
		lm_match_remove_unexp(m, u);
		deliver_unexp(NULL, x, false);
	} else if (flags & FI_CLAIM) {
		lm_match_claim(m, u, msg->context);
	}
	return 0;
}

/* The source a receive matches: any, unless the context directs
 * receives of this kind; then one of the AV, or (FI_EXACT_DIRECTED_RECV)
 * nothing but a named one, FI_CLAIM excepted (it takes the message its
 * peek chose).  ep: the endpoint whose AV names sources (NULL: a shared
 * context none of whose endpoints is enabled yet, which takes no named
 * source). */
static LM_HOT_INLINE int recv_source(const struct lm_rdm_rxc *rxc,
                                     const struct lm_rdm_ep *ep, const struct lm_match *m,
                                     bool tagged, uint64_t flags, fi_addr_t *src)
{
	if (!m->directed) {
		*src = FI_ADDR_UNSPEC;
		return 0;
	}
	if (*src == FI_ADDR_UNSPEC) {
		if ((tagged ? rxc->tagged_exact : rxc->msg_exact) && !(flags & FI_CLAIM))
			return -FI_EINVAL;
		return 0;
	}
	if (!ep || (!ep->connected && !lm_av_addr(ep->av, *src)))
		return -FI_EINVAL;
	return 0;
}

/* A new receive (under the context's lock), or NULL when the context has
 * as many as it may.  Field by field: the iov and desc arrays are large
 * and only count entries of them are read; node, bucket and seq are
 * lm_match_post's. */
static LM_HOT_INLINE struct lm_rdm_rx *rx_new(struct lm_rdm_rxc *rxc,
                                              const struct iovec *iov, void **desc,
                                              size_t count, size_t total)
{
	struct lm_rdm_rx *rx;

	if (rxc->rx_count >= rxc->rx_limit || !(rx = lm_bufpool_alloc(&rxc->rx_pool)))
		return NULL;
	lm_list_init(&rx->e.node);
	rx->e.bucket = NULL;
	rx->e.seq = 0;
	rx->e.consumed = rx->e.last_off = rx->e.last_len = 0;
	rx->e.engine = NULL;
	rx->busy = 0;
	rx->released = false;
	rx->rxc = rxc;
	rxc->rx_count++;
	for (size_t i = 0; i < count; i++) {
		rx->e.iov[i] = lm_iov_recv_entry(iov[i]);
		rx->e.desc[i] = desc ? desc[i] : NULL;
	}
	rx->e.iov_count = count;
	rx->e.total_len = total;
	return rx;
}

/* FI_CLAIM: rx takes (or with FI_DISCARD, drops) the message a peek with
 * the same context claimed. */
static int post_claim(struct lm_rdm_rxc *rxc, struct lm_match *m, struct lm_rdm_rx *rx,
                      uint64_t flags)
{
	struct lm_unexp_entry *u = lm_match_take_claimed(m, rx->e.context);
	struct lm_rdm_unexp *x;

	if (!u) {
		rxc_rx_free(rxc, rx);
		return -FI_EINVAL;
	}
	x = u->payload;
	if (flags & FI_DISCARD) {
		struct lm_cq *cq = lm_rdm_rx_rep(x->ep, rxc)->cq;

		if (cq)
			lm_cq_write(cq, rx->e.context, FI_RECV | FI_TAGGED, 0, NULL, 0,
			            u->tag, u->src);
		rxc_rx_free(rxc, rx);
		deliver_unexp(NULL, x, false);
	} else {
		rx->e.flags &= ~FI_MULTI_RECV;
		deliver_unexp(rx, x, false);
	}
	return 0;
}

/* A multi-receive buffer takes queued messages while it has room; busy
 * keeps it alive across the deliveries. */
static void post_multi(struct lm_rdm_rxc *rxc, struct lm_match *m, struct lm_rdm_rx *rx)
{
	struct lm_unexp_entry *u;
	struct lm_rdm_ep *last = NULL;

	rx->busy++;
	while (!rx->released && (u = lm_match_post(m, &rx->e))) {
		last = ((struct lm_rdm_unexp *)u->payload)->ep;
		deliver_unexp(rx, u->payload, false);
	}
	if (!--rx->busy && rx->released) {
		/* Used up by queued messages, whose completions went out
		 * while busy held it: announce the release on its own, where
		 * the last of them was reported. */
		struct lm_cq *cq = last ? lm_rdm_rx_rep(last, rxc)->cq : NULL;

		if (cq)
			lm_cq_write(cq, rx->e.context, FI_MULTI_RECV, 0, NULL, 0, 0,
			            FI_ADDR_NOTAVAIL);
		rxc_rx_free(rxc, rx);
	}
}

/* Under the context's lock, a receive call's work once its arguments are
 * checked.  ep: the endpoint posting (or, for a shared context, the one
 * that speaks for it; NULL while none is enabled). */
static LM_HOT_INLINE ssize_t post_locked(struct lm_rdm_rxc *rxc, struct lm_rdm_ep *ep,
                                         const struct iovec *iov, void **desc,
                                         size_t count, size_t total,
                                         const struct fi_msg_tagged *msg, uint64_t flags,
                                         bool tagged)
{
	struct lm_match *m = tagged ? &rxc->tagged : &rxc->msg;
	fi_addr_t src = msg->addr;
	struct lm_unexp_entry *u;
	struct lm_rdm_rx *rx;
	int ret;

	if (!rxc->shared && !ep->enabled)
		return -FI_EOPBADSTATE;
	adopt_unknown(rxc);
	ret = recv_source(rxc, ep, m, tagged, flags, &src);
	if (ret)
		return ret;
	if (tagged && (flags & FI_PEEK)) {
		struct fi_msg_tagged peeked = *msg;

		if (!ep) /* nothing has come, and no CQ would say so */
			return -FI_EOPBADSTATE;
		peeked.addr = src;
		return peek(rxc, ep, m, &peeked, flags);
	}
	if (tagged && (flags & FI_DISCARD) && !(flags & FI_CLAIM))
		return -FI_EINVAL;
	rx = rx_new(rxc, iov, desc, count, total);
	if (!rx)
		return -FI_EAGAIN;
	rx->e.src = src;
	rx->e.tag = msg->tag;
	rx->e.ignore = msg->ignore;
	/* The call says which kind the receive is, whatever kind bits its
	 * flags carry: the kind picks its match list (and its completion's
	 * flags), and a receive listed under the other kind was unlinked
	 * from the wrong list once (a use after free the API fuzzer found). */
	rx->e.flags = (flags & ~(FI_TAGGED | FI_MSG)) | (tagged ? FI_TAGGED : FI_MSG);
	rx->e.context = msg->context;
	if (tagged && (flags & FI_CLAIM))
		return post_claim(rxc, m, rx, flags);
	if (flags & FI_MULTI_RECV) {
		post_multi(rxc, m, rx);
		return 0;
	}
	u = lm_match_post(m, &rx->e);
	if (u)
		deliver_unexp(rx, u->payload, false);
	return 0;
}

/* A receive call's checks, before any lock. */
static LM_HOT_INLINE ssize_t recv_args(const struct iovec *iov, size_t count,
                                       uint64_t flags, size_t *total)
{
	if (!lm_iov_recv_valid(iov, count, total))
		return -FI_EINVAL;
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	if ((flags & FI_MULTI_RECV) && count != 1)
		return -FI_EINVAL;
	return 0;
}

static ssize_t trig_recv(struct lm_rdm_ep *ep, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                         uint64_t flags, void *context, bool tagged);

/* Inline in each receive call, as do_send. */
static LM_HOT_INLINE ssize_t post_recv(struct lm_rdm_ep *ep, const struct iovec *iov,
                                       void **desc, size_t count, fi_addr_t src,
                                       uint64_t tag, uint64_t ignore, uint64_t flags,
                                       void *context, bool tagged)
{
	struct fi_msg_tagged msg = {
	    .addr = src, .tag = tag, .ignore = ignore, .context = context};
	size_t total;
	ssize_t ret;

	if (__builtin_expect(flags & FI_TRIGGER, 0))
		return trig_recv(ep, iov, desc, count, src, tag, ignore, flags, context, tagged);
	ret = recv_args(iov, count, flags, &total);

	if (ret)
		return ret;
	lm_lock_acquire(ep->lock);
	/* An endpoint bound to a shared context and not yet enabled has no
	 * AV to name sources by: the context's voice speaks, as when the
	 * receive is posted to the context's own fid (rxc_post). */
	ret = post_locked(ep->rxc,
	                  __builtin_expect(ep->rxc->shared && !ep->enabled, 0)
	                      ? lm_rdm_rxc_voice(ep->rxc)
	                      : ep,
	                  iov, desc, count, total, &msg, flags, tagged);
	lm_lock_release(ep->lock);
	return ret;
}

ssize_t lm_rdm_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                    fi_addr_t src_addr, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);
	struct iovec iov = {buf, len};

	return post_recv(ctx->ep, &iov, &desc, 1, src_addr, 0, 0, ctx->rx_flags, context,
	                 false);
}

ssize_t lm_rdm_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                     size_t count, fi_addr_t src_addr, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	return post_recv(ctx->ep, iov, desc, count, src_addr, 0, 0, ctx->rx_flags,
	                 context, false);
}

ssize_t lm_rdm_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	if (!msg)
		return -FI_EINVAL;
	return post_recv(ctx->ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0,
	                 0, flags, msg->context, false);
}

ssize_t lm_rdm_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                     fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);
	struct iovec iov = {buf, len};

	return post_recv(ctx->ep, &iov, &desc, 1, src_addr, tag, ignore, ctx->rx_flags,
	                 context, true);
}

ssize_t lm_rdm_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                      size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                      void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	return post_recv(ctx->ep, iov, desc, count, src_addr, tag, ignore, ctx->rx_flags,
	                 context, true);
}

ssize_t lm_rdm_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                        uint64_t flags)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	if (!msg)
		return -FI_EINVAL;
	return post_recv(ctx->ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
	                 msg->tag, msg->ignore, flags, msg->context, true);
}

/* ---- receives posted to a receive context's own fid ------------------------------ */

/* Inline in each receive call of a shared receive context or a scalable
 * endpoint's receive context, as post_recv.  The endpoint that speaks
 * for the context (a shared one's first enabled endpoint, a scalable
 * one's endpoint once both are enabled) checks directed sources with
 * its AV; a shared context takes receives before any, a scalable
 * endpoint's context not. */
static LM_HOT_INLINE ssize_t rxc_post(struct lm_rdm_rxc *rxc, const struct iovec *iov,
                                      void **desc, size_t count, fi_addr_t src,
                                      uint64_t tag, uint64_t ignore, uint64_t flags,
                                      void *context, bool tagged)
{
	struct fi_msg_tagged msg = {
	    .addr = src, .tag = tag, .ignore = ignore, .context = context};
	struct lm_lock *lock = lm_rdm_rxc_lock(rxc);
	struct lm_rdm_ep *ep;
	size_t total;
	ssize_t ret = recv_args(iov, count, flags, &total);

	if (ret)
		return ret;
	if (flags & FI_TRIGGER)
		return -FI_EOPNOTSUPP; /* held receives are the endpoints' own */
	lm_lock_acquire(lock);
	if (rxc->sep)
		ep = rxc->enabled && rxc->sep->enabled ? rxc->sep : NULL;
	else
		ep = lm_rdm_rxc_voice(rxc);
	ret = ep || rxc->shared
	          ? post_locked(rxc, ep, iov, desc, count, total, &msg, flags, tagged)
	          : -FI_EOPBADSTATE;
	lm_lock_release(lock);
	return ret;
}

static struct lm_rdm_rxc *rxc_of_fid(struct fid_ep *fid)
{
	return lm_container_of(fid, struct lm_rdm_rxc, ep_fid);
}

ssize_t lm_rdm_rxc_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                        fi_addr_t src_addr, void *context)
{
	struct lm_rdm_rxc *rxc = rxc_of_fid(fid);
	struct iovec iov = {buf, len};

	return rxc_post(rxc, &iov, &desc, 1, src_addr, 0, 0, rxc->op_flags, context, false);
}

ssize_t lm_rdm_rxc_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src_addr, void *context)
{
	struct lm_rdm_rxc *rxc = rxc_of_fid(fid);

	return rxc_post(rxc, iov, desc, count, src_addr, 0, 0, rxc->op_flags, context,
	                false);
}

ssize_t lm_rdm_rxc_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return rxc_post(rxc_of_fid(fid), msg->msg_iov, msg->desc, msg->iov_count,
	                msg->addr, 0, 0, flags, msg->context, false);
}

ssize_t lm_rdm_rxc_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                         fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct lm_rdm_rxc *rxc = rxc_of_fid(fid);
	struct iovec iov = {buf, len};

	return rxc_post(rxc, &iov, &desc, 1, src_addr, tag, ignore, rxc->op_flags, context,
	                true);
}

ssize_t lm_rdm_rxc_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                          void *context)
{
	struct lm_rdm_rxc *rxc = rxc_of_fid(fid);

	return rxc_post(rxc, iov, desc, count, src_addr, tag, ignore, rxc->op_flags,
	                context, true);
}

ssize_t lm_rdm_rxc_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return rxc_post(rxc_of_fid(fid), msg->msg_iov, msg->desc, msg->iov_count,
	                msg->addr, msg->tag, msg->ignore, flags, msg->context, true);
}

/* ---- cancel ------------------------------------------------------------------ */

ssize_t lm_rdm_cancel(struct lm_rdm_rxc *rxc, struct lm_rdm_ep *ep, void *context)
{
	struct lm_match *ms[2] = {&rxc->msg, &rxc->tagged};

	for (int i = 0; i < 2; i++) {
		struct lm_rx_entry *e = lm_match_cancel(ms[i], context);
		struct lm_rdm_rx *rx;

		if (!e)
			continue;
		rx = lm_container_of(e, struct lm_rdm_rx, e);
		if (ep) {
			lm_rdm_rx_end(ep, rx, FI_ECANCELED);
		} else {
			/* A shared context with no endpoint: no CQ to tell. */
			rx->released = true;
			if (!rx->busy)
				rxc_rx_free(rxc, rx);
		}
		return 0;
	}
	return -FI_ENOENT;
}

/* ---- triggered receives (trigger.c) --------------------------------------------- */

static ssize_t trig_recv(struct lm_rdm_ep *ep, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                         uint64_t flags, void *context, bool tagged)
{
	struct lm_rdm_trig *tr;
	ssize_t ret;

	ret = lm_rdm_trig_new_iov(&ep->ctx, iov, count, false, lm_rdm_trig_recv, &tr);
	if (ret)
		return ret;
	if (count && desc)
		memcpy(tr->u.msg.desc, desc, count * sizeof(*desc));
	tr->u.msg.addr = src;
	tr->u.msg.tag = tag;
	tr->u.msg.ignore = ignore;
	tr->u.msg.flags = flags & ~FI_TRIGGER;
	tr->u.msg.tagged = tagged;
	return lm_rdm_trig_hold(tr, context);
}

ssize_t lm_rdm_trig_recv(struct lm_rdm_trig *tr)
{
	return post_recv(tr->ctx.ep, tr->iov, tr->u.msg.desc, tr->count,
	                 tr->u.msg.addr, tr->u.msg.tag, tr->u.msg.ignore, tr->u.msg.flags,
	                 tr->context, tr->u.msg.tagged);
}
