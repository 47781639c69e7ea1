/* rndv.c - receive-side transfers: a message by rendezvous (bulk read,
 * split with the sender, or CTS/DATA), an eager message or an RTS's first
 * piece read by the link straight into the receive that matched its
 * header, and the target of a streamed RMA write.  Each is a slot of
 * ep->rndv with a kind and a state (rdm.h); packets find it through one
 * checked lookup of the handle they carry. */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

void lm_rdm_answer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, uint8_t op,
                   uint64_t sreq, uint64_t rreq)
{
	struct lm_rdm_hdr h = {
	    .version = LM_RDM_WIRE_VERSION, .op = op, .sreq = sreq, .rreq = rreq};

	lm_rdm_ctl_send(ep, peer, &h, NULL, 0);
}

/* ---- slots ------------------------------------------------------------------ */

/* The states each state may move to (see the diagram in rdm.h). */
static const uint8_t rndv_moves[] = {
    [LM_RNDV_FREE] = 1u << LM_RNDV_MATCHED,
    [LM_RNDV_MATCHED] = 1u << LM_RNDV_PLACING | 1u << LM_RNDV_PUSHING |
                        1u << LM_RNDV_STREAMING | 1u << LM_RNDV_FREE,
    [LM_RNDV_PLACING] =
        1u << LM_RNDV_STREAMING | 1u << LM_RNDV_MATCHED | 1u << LM_RNDV_FREE,
    [LM_RNDV_PUSHING] = 1u << LM_RNDV_STREAMING | 1u << LM_RNDV_FREE,
    [LM_RNDV_STREAMING] = 1u << LM_RNDV_PLACING | 1u << LM_RNDV_FREE,
};

static void rndv_enter(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, enum lm_rndv_state to)
{
	if (!(rndv_moves[r->state] & 1u << to))
		LM_WARN(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
		        "transfer %zu (kind %u): illegal move %u -> %u\n",
		        (size_t)(r - ep->rndv), r->kind, r->state, to);
	r->state = to;
}

static struct lm_rdm_rndv *rndv_alloc(struct lm_rdm_ep *ep, enum lm_rndv_kind kind)
{
	for (size_t i = 0; i < ep->rndv_count; i++) {
		struct lm_rdm_rndv *r = &ep->rndv[i];

		if (r->state == LM_RNDV_FREE) {
			if (!r->gen)
				r->gen = 1; /* first use: 0 is never a generation */
			r->kind = kind;
			rndv_enter(ep, r, LM_RNDV_MATCHED);
			lm_list_init(&r->node);
			return r;
		}
	}
	return NULL;
}

static uint64_t rndv_handle(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	return lm_rdm_handle(r->gen, (size_t)(r - ep->rndv));
}

static void rndv_free(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	lm_list_remove(&r->node);
	rndv_enter(ep, r, LM_RNDV_FREE);
	lm_rdm_gen_next(&r->gen);
}

/* The transfer a packet from peer names by handle, in state, or NULL for
 * a stale or forged handle (nothing of ours is touched then). */
static struct lm_rdm_rndv *rndv_lookup(struct lm_rdm_ep *ep, uint64_t handle,
                                       const struct lm_rdm_peer *peer,
                                       enum lm_rndv_state state)
{
	uint32_t slot = lm_rdm_handle_slot(handle);
	struct lm_rdm_rndv *r;

	if (slot >= ep->rndv_count)
		return NULL;
	r = &ep->rndv[slot];
	if (r->state != state || !lm_rdm_handle_is(handle, r->gen) || r->peer != peer)
		return NULL;
	return r;
}

/* ---- finishing ---------------------------------------------------------------- */

static void rndv_report_error(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	err = lm_rdm_peer_err(ep, err);
	struct lm_rdm_rx *rx = r->rx;
	char name[LM_ERR_DATA_MAX];
	size_t nlen = sizeof(name);
	struct fi_cq_err_entry e = {
	    .op_context = rx->e.context,
	    .flags = FI_RECV | (rx->e.flags & FI_TAGGED ? FI_TAGGED : FI_MSG) |
	             (r->extra_flags & FI_MULTI_RECV),
	    .tag = r->tag,
	    .err = err,
	    .prov_errno = err,
	};

	const struct lm_rdm_report *rep = lm_rdm_rx_rep(ep, rx->rxc);

	if (rep->cntr[LM_CNTR_RECV])
		lm_cntr_inc_err(rep->cntr[LM_CNTR_RECV]);
	if (!rep->cq)
		return;
	if (ep->dom->link_ops->addr_to_str(r->peer->addr, name, &nlen) == 0) {
		name[sizeof(name) - 1] = 0;
		e.prov_errno = LM_PROV_PEER_GONE;
		e.err_data = name;
		e.err_data_size = strlen(name) + 1;
	}
	lm_cq_write_err(rep->cq, &e, r->src);
}

/* A message transfer into rx ends: its completion, and rx freed unless a
 * multi-receive buffer goes on. */
static void rndv_finish_msg(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	struct lm_rdm_rx *rx = r->rx;

	if (rx->e.flags & FI_MULTI_RECV) {
		rx->e.last_off = r->off;
		rx->e.last_len = r->place_len;
		/* The last placement into a released buffer. */
		if (rx->released && rx->busy == 1)
			r->extra_flags |= FI_MULTI_RECV;
	}
	if (err)
		rndv_report_error(ep, r, err);
	else
		lm_rdm_rx_report(ep, rx, r->size, r->data, r->tag, r->src,
		                 r->extra_flags);
	rx->busy--;
	if (!(rx->e.flags & FI_MULTI_RECV) || (rx->released && !rx->busy))
		lm_rdm_rx_free(ep, rx);
}

static void rndv_finish(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	if (r->peer->eager == r)
		r->peer->eager = NULL;
	if (r->kind == LM_RNDV_WRITE)
		lm_rdm_rma_rndv_done(ep, r, err);
	else if (r->rx)
		rndv_finish_msg(ep, r, err);
	rndv_free(ep, r);
}

void lm_rdm_rndv_fail(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	rndv_finish(ep, r, err);
}

/* All of it is in: FIN to the sender, and done. */
static void rndv_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	lm_rdm_answer(ep, r->peer, LM_OP_FIN, r->sreq, 0);
	rndv_finish(ep, r, 0);
}

static void rndv_account(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t plen)
{
	r->got += plen;
	if (r->got >= r->size)
		rndv_done(ep, r);
}

/* ---- starting ------------------------------------------------------------------- */

/* r (allocated) receives the message a describes into a->rx. */
static void rndv_setup(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r,
                       const struct lm_rdm_arrival *a)
{
	struct lm_rdm_rx *rx = a->rx;
	bool released = false;

	r->rx = rx;
	r->peer = a->peer;
	r->src = a->src;
	r->sreq = a->sreq;
	r->size = a->size;
	r->tag = a->tag;
	r->data = a->data;
	r->hflags = a->hflags;
	r->got = 0;
	r->iov_count = lm_rdm_rx_place(ep, rx, a->size, r->iov, &released);
	r->cap = LM_MIN(a->size, lm_iov_len(r->iov, r->iov_count));
	r->off = rx->e.last_off;
	r->place_len = rx->e.last_len;
	r->extra_flags = a->hflags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0;
	rx->busy++;
	if (rx->e.flags & FI_MULTI_RECV) /* rndv_finish announces the release */
		lm_rdm_rx_multi_after(ep, rx, released, a->queued);
}

/* Ask r's sender for the data from off on (the bytes before it came with
 * the RTS); r is watched for its peer's death from now on. */
static void rndv_ask(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t off)
{
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_CTS,
	                       .sreq = r->sreq,
	                       .rreq = rndv_handle(ep, r),
	                       .addr = off};

	lm_list_push_back(&ep->rndv_active, &r->node);
	lm_rdm_busy(ep);
	lm_rdm_ctl_send(ep, r->peer, &h, NULL, 0);
}

/* r by packets: the sender streams DATA from off on once it has our CTS. */
static void rndv_cts(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t off)
{
	rndv_enter(ep, r, LM_RNDV_STREAMING);
	rndv_ask(ep, r, off);
}

/* Split: ask the sender to write the upper part of r into our memory
 * while we read the lower one; returns the size of the lower one. */
static size_t rndv_push(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r,
                        const struct lm_rdm_rts *rts)
{
	struct iovec local[LM_IOV_LIMIT];
	struct lm_rdm_rts push;
	struct lm_rdm_hdr ph = {.version = LM_RDM_WIRE_VERSION,
	                        .op = LM_OP_PUSH,
	                        .sreq = r->sreq,
	                        .rreq = rndv_handle(ep, r)};
	size_t mine = (r->cap / 2) & ~(LM_PAGE_SIZE - 1);

	push.iov_count =
	    lm_rdm_iov_slice(r->iov, r->iov_count, mine, r->cap - mine, local);
	lm_rdm_rts_from_iov(&push, local, push.iov_count);
	ph.addr = mine;
	ph.size = r->cap - mine;
	r->remote = *rts;
	rndv_enter(ep, r, LM_RNDV_PUSHING);
	lm_list_push_back(&ep->rndv_active, &r->node);
	lm_rdm_busy(ep);
	lm_rdm_ctl_send(ep, r->peer, &ph, &push, lm_rdm_rts_len(&push));
	return mine;
}

/* r (set up: iov, cap, peer, sreq) by cross-memory copy from the sender's
 * buffers named by rts: one read, or with LM_HF_SPLIT a read of the lower
 * part while the sender writes the upper one (PUSH, answered by PUSHED);
 * packets (CTS) when the kernel refuses the copy. */
static void rndv_bulk(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r,
                      const struct lm_rdm_rts *rts, uint16_t hflags)
{
	struct iovec remote[LM_IOV_LIMIT], local[LM_IOV_LIMIT];
	struct lm_rdm_peer *peer = r->peer;
	size_t rn, ln, mine = r->cap;
	ssize_t got;

	if ((hflags & LM_HF_SPLIT) && r->cap >= LM_SPLIT_MIN)
		mine = rndv_push(ep, r, rts);
	rn = lm_rdm_rts_iov(rts, mine, remote);
	ln = lm_rdm_iov_slice(r->iov, r->iov_count, 0, mine, local);
	got = mine && rn ? lm_rdm_bulk_read(ep, peer, local, ln, remote, rn) : 0;
	if (got == (ssize_t)mine) {
		r->got = mine;
		if (r->state != LM_RNDV_PUSHING) /* else the rest when PUSHED comes */
			rndv_done(ep, r);
		return;
	}
	if (got == -FI_EIO) {
		rndv_finish(ep, r, FI_EIO);
		return;
	}
	/* Refused (ptrace policy, containers) or short: packets from now on
	 * for this peer. */
	LM_INFO(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
	        "bulk read failed (%zd); falling back to copies\n", got);
	peer->bulk_broken = true;
	if (r->state == LM_RNDV_PUSHING) {
		/* The sender may still be writing its part: CTS once its
		 * PUSHED is here (lm_rdm_on_pushed). */
		r->got = 0;
		return;
	}
	rndv_cts(ep, r, 0);
}

/* Out of rendezvous slots (more than rx_attr size in flight): fail this
 * receive rather than stall the sender forever. */
static void rndv_refuse(struct lm_rdm_ep *ep, const struct lm_rdm_arrival *a)
{
	struct fi_cq_err_entry e = {.op_context = a->rx->e.context,
	                            .flags = FI_RECV,
	                            .err = FI_ENOMEM,
	                            .prov_errno = FI_ENOMEM};

	struct lm_cq *cq = lm_rdm_rx_rep(ep, a->rx->rxc)->cq;

	if (cq)
		lm_cq_write_err(cq, &e, a->src);
	lm_rdm_answer(ep, a->peer, LM_OP_FIN, a->sreq, FI_ECANCELED);
	if (!(a->rx->e.flags & FI_MULTI_RECV))
		lm_rdm_rx_free(ep, a->rx);
}

void lm_rdm_rndv_start(struct lm_rdm_ep *ep, const struct lm_rdm_arrival *a,
                       const struct lm_rdm_rts *rts, const void *early, size_t early_len)
{
	struct lm_rdm_rndv *r;

	if (!a->rx) { /* discarded: let the sender go */
		lm_rdm_answer(ep, a->peer, LM_OP_FIN, a->sreq, 0);
		return;
	}
	r = rndv_alloc(ep, LM_RNDV_MSG);
	if (!r) {
		rndv_refuse(ep, a);
		return;
	}
	rndv_setup(ep, r, a);
	if (early) {
		lm_copy_to_iov(r->iov, r->iov_count, 0, early, LM_MIN(early_len, r->cap));
		if (early_len >= a->size) {
			rndv_account(ep, r, early_len); /* all of it: FIN */
			return;
		}
		r->got = early_len;
		rndv_cts(ep, r, early_len);
		return;
	}
	if ((a->hflags & LM_HF_BULK) && lm_rdm_peer_bulk(ep, a->peer) &&
	    ep->link->ops->bulk_read && rts->iov_count <= LM_IOV_LIMIT) {
		rndv_bulk(ep, r, rts, a->hflags);
		return;
	}
	rndv_cts(ep, r, 0);
}

bool lm_rdm_rndv_write(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                       const struct lm_rdm_hdr *h, const struct iovec *iov,
                       size_t iov_count, const struct lm_rdm_rts *rts)
{
	struct lm_rdm_rndv *r = rndv_alloc(ep, LM_RNDV_WRITE);

	if (!r)
		return false;
	memset(&r->rx, 0, sizeof(*r) - offsetof(struct lm_rdm_rndv, rx));
	r->peer = peer;
	r->src = FI_ADDR_NOTAVAIL;
	r->sreq = h->sreq;
	r->size = h->size;
	r->hflags = h->flags;
	r->data = h->data;
	r->key = h->key;
	if (iov_count) /* iov may be NULL then */
		memcpy(r->iov, iov, iov_count * sizeof(*iov));
	r->iov_count = iov_count;
	r->cap = h->size;
	if (rts)
		rndv_bulk(ep, r, rts, h->flags);
	else
		rndv_cts(ep, r, 0);
	return true;
}

/* ---- DATA ------------------------------------------------------------------------ */

/* The streaming transfer a DATA packet of plen bytes from peer belongs
 * to: live, from its sender, and fitting its message. */
static struct lm_rdm_rndv *rndv_of_data(struct lm_rdm_ep *ep,
                                        const struct lm_rdm_peer *peer,
                                        const struct lm_rdm_hdr *h, size_t plen)
{
	struct lm_rdm_rndv *r = rndv_lookup(ep, h->rreq, peer, LM_RNDV_STREAMING);

	if (!r || h->addr > r->size || plen > r->size - h->addr)
		return NULL;
	return r;
}

void lm_rdm_rndv_data(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_rndv *r = rndv_of_data(ep, peer, h, plen);

	if (!r)
		return;
	if (h->addr < r->cap)
		lm_copy_to_iov(r->iov, r->iov_count, h->addr, payload,
		               LM_MIN(plen, r->cap - h->addr));
	rndv_account(ep, r, plen);
}

/* ---- messages matched on their header ---------------------------------------- */

/* An eager message received in full (LM_RNDV_EAGER). */
static void eager_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	r->got = r->size;
	lm_rdm_credit_owe(ep, r->peer, r->size);
	if (r->hflags & LM_HF_ACK)
		lm_rdm_answer(ep, r->peer, LM_OP_ACK, r->sreq, 0);
	rndv_finish(ep, r, 0);
}

/* The first piece of an LM_RNDV_EARLY's RTS is in: n bytes of it.  It is
 * a rendezvous like any other from now on. */
static void early_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t n)
{
	r->kind = LM_RNDV_MSG;
	rndv_enter(ep, r, LM_RNDV_STREAMING);
	r->peer->eager = NULL;
	rndv_account(ep, r, n);
}

void lm_rdm_rndv_header_rest(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r,
                             const void *payload, size_t len)
{
	lm_copy_to_iov(r->iov, r->iov_count, 0, payload, LM_MIN(len, r->cap));
	if (r->kind == LM_RNDV_EARLY)
		early_done(ep, r, len);
	else
		eager_done(ep, r);
}

/* A message whose header came before its payload (EAGER, or an RTS with
 * its first piece): matched now by a posted receive into a transfer of
 * kind, which holds peer->eager until the payload is in; NULL when no
 * receive takes it or no slot is free (allocated first, so a receive is
 * never taken without one): the payload then comes through recv. */
static struct lm_rdm_rndv *header_match(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                        const struct lm_rdm_hdr *h,
                                        enum lm_rndv_kind kind)
{
	struct lm_rdm_rxc *rxc = lm_rdm_rxc_of(ep);
	struct lm_match *m = h->flags & LM_HF_TAGGED ? &rxc->tagged : &rxc->msg;
	struct lm_rdm_arrival a = {.peer = peer,
	                           .size = h->size,
	                           .tag = h->tag,
	                           .data = h->data,
	                           .sreq = h->sreq,
	                           .hflags = h->flags};
	struct lm_rdm_rndv *r;
	struct lm_rx_entry *e;

	peer->replying = true;
	r = rndv_alloc(ep, kind);
	if (!r)
		return NULL;
	a.src = lm_rdm_peer_fiaddr(ep, peer);
	e = lm_match_arrival(m, a.src, h->tag);
	if (!e) {
		rndv_free(ep, r);
		return NULL;
	}
	a.rx = lm_container_of(e, struct lm_rdm_rx, e);
	a.queued = e->flags & FI_MULTI_RECV;
	rndv_setup(ep, r, &a);
	peer->eager = r;
	return r;
}

/* The header of an eager message whose payload is still coming: if a
 * posted receive takes it whole, have the link read the payload there.
 * A truncated message is finished by the recv that follows. */
static size_t eager_place(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                          const struct lm_rdm_hdr *h, size_t plen, struct iovec *iov)
{
	struct lm_rdm_rndv *r;

	if (!peer || peer->dead || peer->eager || plen != h->size ||
	    !(r = header_match(ep, peer, h, LM_RNDV_EAGER)))
		return 0;
	lm_list_push_back(&ep->rndv_active, &r->node); /* fails with the peer */
	lm_rdm_busy(ep);
	if (r->cap < plen)
		return 0;
	rndv_enter(ep, r, LM_RNDV_PLACING);
	return lm_rdm_iov_slice(r->iov, r->iov_count, 0, plen, iov);
}

/* The header of an RTS that carries the message's first piece
 * (LM_HF_EARLY), the rest of its payload still coming: if a posted
 * receive takes it, ask for the rest at once (the handshake then overlaps
 * the piece's transfer) and have the link read the iov list and the piece
 * into place; when the piece does not fit whole, msg_recv copies
 * what fits.  Unexpected, the piece is dropped: CTS from 0 later. */
static size_t early_place(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                          const struct lm_rdm_hdr *h, size_t plen, struct iovec *iov)
{
	struct iovec piece[LM_IOV_LIMIT];
	struct lm_rdm_rndv *r;
	size_t early, n;

	if (!peer || peer->dead || peer->eager || h->addr > plen ||
	    h->addr > sizeof(r->remote) || plen - h->addr > h->size ||
	    !(r = header_match(ep, peer, h, LM_RNDV_EARLY)))
		return 0;
	early = plen - h->addr;
	if (early < h->size) {
		rndv_ask(ep, r, early); /* DATA is taken once the piece is in */
	} else {
		lm_list_push_back(&ep->rndv_active, &r->node); /* fails with the peer */
		lm_rdm_busy(ep);
	}
	if (peer->dead || r->cap < early)
		return 0;
	n = lm_rdm_iov_slice(r->iov, r->iov_count, 0, early, piece);
	if (n + 1 > LM_IOV_LIMIT)
		return 0;
	iov[0].iov_base = &r->remote; /* the list: unused without bulk copies */
	iov[0].iov_len = h->addr;
	memcpy(iov + 1, piece, n * sizeof(*piece));
	rndv_enter(ep, r, LM_RNDV_PLACING);
	return n + 1;
}

/* ---- placement by the link ------------------------------------------------------ */

size_t lm_rdm_place(void *arg, const void *src_addr, const void *hdr, size_t plen,
                    struct iovec *iov)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_hdr h;
	struct lm_rdm_rndv *r;
	size_t n;

	memcpy(&h, hdr, sizeof(h));
	if (h.version != LM_RDM_WIRE_VERSION || h.len != plen)
		return 0;
	if (h.op == LM_OP_EAGER)
		return eager_place(ep, lm_rdm_peer_of_src(ep, src_addr), &h, plen, iov);
	if (h.op == LM_OP_RTS && (h.flags & LM_HF_EARLY))
		return early_place(ep, lm_rdm_peer_of_src(ep, src_addr), &h, plen, iov);
	if (h.op != LM_OP_DATA)
		return 0;
	r = rndv_of_data(ep, lm_rdm_peer_of_src(ep, src_addr), &h, plen);
	/* Only a piece that lands whole in the receive buffer (a truncated
	 * tail takes the copying path, which drops what does not fit). */
	if (!r || h.addr > r->cap || plen > r->cap - h.addr)
		return 0;
	n = lm_rdm_iov_slice(r->iov, r->iov_count, h.addr, plen, iov);
	if (n) /* nothing else may finish r meanwhile */
		rndv_enter(ep, r, LM_RNDV_PLACING);
	return n;
}

void lm_rdm_placed(void *arg, const void *src_addr, const void *hdr, size_t plen)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_peer *peer = lm_rdm_peer_of_src(ep, src_addr);
	struct lm_rdm_hdr h;
	struct lm_rdm_rndv *r;

	memcpy(&h, hdr, sizeof(h));
	if (peer && (h.op == LM_OP_RTS || h.op == LM_OP_EAGER))
		lm_rdm_credit_back(peer, h.rreq); /* else counted by recv_pkt */
	if (h.op == LM_OP_RTS || h.op == LM_OP_EAGER) {
		r = peer ? peer->eager : NULL;
		if (!r || r->state != LM_RNDV_PLACING)
			return;
		if (h.op == LM_OP_RTS && r->kind == LM_RNDV_EARLY && r->sreq == h.sreq)
			early_done(ep, r, plen - h.addr);
		else if (h.op == LM_OP_EAGER && r->kind == LM_RNDV_EAGER)
			eager_done(ep, r);
		return;
	}
	r = rndv_lookup(ep, h.rreq, peer, LM_RNDV_PLACING);
	if (!r)
		return;
	rndv_enter(ep, r, LM_RNDV_STREAMING);
	rndv_account(ep, r, plen);
}

/* The payload placed for hdr was damaged: a DATA piece's receive goes on
 * streaming (the piece comes again and is placed afresh); an eager
 * message's stays matched, and its packet, when it comes again, takes
 * the path of one matched but not placed (recv_pkt: what fits). */
void lm_rdm_unplaced(void *arg, const void *src_addr, const void *hdr, size_t plen)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_peer *peer = lm_rdm_peer_of_src(ep, src_addr);
	struct lm_rdm_hdr h;
	struct lm_rdm_rndv *r;

	(void)plen;
	memcpy(&h, hdr, sizeof(h));
	if (h.op == LM_OP_DATA) {
		r = rndv_lookup(ep, h.rreq, peer, LM_RNDV_PLACING);
		if (r)
			rndv_enter(ep, r, LM_RNDV_STREAMING);
	} else if (peer && peer->eager) {
		lm_rdm_rndv_unplaced(ep, peer->eager);
	}
}

void lm_rdm_rndv_unplaced(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	if (r->state == LM_RNDV_PLACING)
		rndv_enter(ep, r, LM_RNDV_MATCHED);
}

/* ---- split rendezvous ---------------------------------------------------------------
 */

/* Sender side of a split rendezvous: write the part the receiver asked
 * for straight into its memory, then say so. */
void lm_rdm_on_push(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                    const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_awaiting(ep, h->sreq, peer, LM_OP_RTS);
	struct lm_rdm_hdr a = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_PUSHED,
	                       .sreq = h->sreq,
	                       .rreq = h->rreq,
	                       .data = FI_EOPNOTSUPP};
	struct iovec local[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
	struct lm_rdm_rts rts;
	size_t ln, rn;
	ssize_t got;

	if (!tx)
		return;
	if (h->addr > tx->len || h->size > tx->len - h->addr ||
	    lm_rdm_rts_parse(&rts, payload, plen) ||
	    !(rn = lm_rdm_rts_iov(&rts, h->size, remote))) {
		a.data = FI_EINVAL;
	} else if (lm_rdm_peer_bulk(ep, peer) && ep->link->ops->bulk_write) {
		ln = lm_rdm_iov_slice(tx->iov, tx->iov_count, h->addr, h->size, local);
		got = h->size ? lm_rdm_bulk_write(ep, peer, local, ln, remote, rn) : 0;
		if (got == (ssize_t)h->size) {
			a.data = 0;
		} else if (got == -FI_EIO) {
			return; /* the receiver is gone: liveness ends tx */
		} else {
			LM_INFO(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
			        "bulk write failed (%zd); the receiver reads instead\n",
			        got);
			peer->bulk_broken = true;
		}
	}
	lm_rdm_ctl_send(ep, peer, &a, NULL, 0);
}

/* The sender could not write its part of r: read it too.  true: r ended. */
static bool rndv_read_rest(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	struct iovec whole[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
	struct iovec local[LM_IOV_LIMIT];
	size_t rest = r->cap - r->got;
	size_t wn = lm_rdm_rts_iov(&r->remote, r->cap, whole);
	size_t rn = lm_rdm_iov_slice(whole, wn, r->got, rest, remote);
	size_t ln = lm_rdm_iov_slice(r->iov, r->iov_count, r->got, rest, local);
	ssize_t got = lm_rdm_bulk_read(ep, r->peer, local, ln, remote, rn);

	if (got == (ssize_t)rest) {
		rndv_done(ep, r);
		return true;
	}
	if (got == -FI_EIO) {
		rndv_finish(ep, r, FI_EIO);
		return true;
	}
	r->peer->bulk_broken = true;
	return false;
}

/* Receiver side: the sender's part is in place (or it could not write). */
void lm_rdm_on_pushed(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      const struct lm_rdm_hdr *h)
{
	struct lm_rdm_rndv *r = rndv_lookup(ep, h->rreq, peer, LM_RNDV_PUSHING);

	if (!r || r->sreq != h->sreq)
		return;
	if (r->got && !h->data) {
		lm_rdm_iov_written(r->iov, r->iov_count, r->got, r->cap - r->got);
		rndv_done(ep, r);
		return;
	}
	if (r->got && rndv_read_rest(ep, r))
		return;
	/* Our own read was refused: the whole message by packets. */
	r->got = 0;
	lm_list_remove(&r->node); /* rndv_cts puts it back */
	rndv_cts(ep, r, 0);
}
