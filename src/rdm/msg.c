/* msg.c - FI_MSG and FI_TAGGED over the engine: posting receives and
 * matching them (util's tagmatch), eager delivery, rendezvous by bulk read
 * or CTS/DATA, unexpected messages, peek/claim/discard, multi-receive
 * buffers, and the send calls; and the dispatch of every incoming packet
 * (here, so that a message's arrival is one function from the link's
 * callback to its completion). */
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
	struct lm_cntr *c = ep->cntr[LM_CNTR_RECV];

	if (c) {
		if (trunc)
			lm_cntr_inc_err(c);
		else
			lm_cntr_inc(c);
	}
	if (!ep->rx_cq)
		return;
	if (ep->rx_selective && !(e->flags & FI_COMPLETION) && !trunc &&
	    !(extra & FI_MULTI_RECV))
		return;
	lm_rx_complete(ep->rx_cq, e, msg_len, data, tag, src, extra);
}

void lm_rdm_rx_free(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx)
{
	ep->rx_count--;
	lm_bufpool_free(&ep->rx_pool, rx);
}

void lm_rdm_unexp_free(struct lm_rdm_ep *ep, struct lm_rdm_unexp *x)
{
	ep->unexp_bytes -= x->buf_len;
	if (x->buf) {
		if (x->small)
			lm_bufpool_free(&ep->small_pool, x->buf);
		else
			free(x->buf);
	}
	lm_bufpool_free(&ep->unexp_pool, x);
}

static void send_answer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, uint8_t op,
                        uint64_t sreq, uint64_t rreq)
{
	struct lm_rdm_hdr h = {
	    .version = LM_RDM_WIRE_VERSION, .op = op, .sreq = sreq, .rreq = rreq};

	lm_rdm_ctl_send(ep, peer, &h, NULL, 0);
}

/* Where a message of len bytes lands in rx: its iov, or for a multi-receive
 * buffer the next free piece.  Returns the iov count; *released says the
 * buffer is used up. */
static size_t rx_place(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, size_t len,
                       struct iovec *iov, bool *released)
{
	struct lm_rx_entry *e = &rx->e;

	*released = false;
	if (!(e->flags & FI_MULTI_RECV)) {
		memcpy(iov, e->iov, e->iov_count * sizeof(*iov));
		return e->iov_count;
	}
	iov[0].iov_base = lm_rx_consume(e, len, ep->min_multi_recv, released);
	iov[0].iov_len = e->last_len;
	return 1;
}

/* A multi-receive buffer that has room goes on taking messages; one that
 * is used up leaves the queue and is freed when nothing lands in it any
 * more. */
static void multi_after(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, bool released,
                        bool queued)
{
	if (!released)
		return;
	rx->released = true;
	if (queued)
		lm_match_remove_rx(rx->e.flags & FI_TAGGED ? &ep->tagged : &ep->msg,
		                   &rx->e);
}

static LM_HOT_INLINE void deliver_eager(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx,
                                        fi_addr_t src, size_t len, uint64_t tag,
                                        uint64_t data, uint16_t hflags,
                                        const void *payload, bool queued)
{
	struct iovec iov[LM_IOV_LIMIT];
	bool released;
	size_t n;
	uint64_t extra = hflags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0;

	if (!(rx->e.flags & FI_MULTI_RECV)) {
		lm_copy_to_iov(rx->e.iov, rx->e.iov_count, 0, payload, len);
		rx_report(ep, rx, len, data, tag, src, extra);
		lm_rdm_rx_free(ep, rx);
		return;
	}
	/* A multi-receive buffer: the next piece of it. */
	n = rx_place(ep, rx, len, iov, &released);
	lm_copy_to_iov(iov, n, 0, payload, len);
	/* The release is announced by the buffer's last completion: not
	 * while a rendezvous still lands in it. */
	if (released && !rx->busy)
		extra |= FI_MULTI_RECV;
	rx_report(ep, rx, len, data, tag, src, extra);
	multi_after(ep, rx, released, queued);
	if (rx->released && !rx->busy)
		lm_rdm_rx_free(ep, rx);
}

/* ---- rendezvous --------------------------------------------------------- */

static struct lm_rdm_rndv *rndv_alloc(struct lm_rdm_ep *ep)
{
	for (size_t i = 0; i < ep->rndv_count; i++) {
		struct lm_rdm_rndv *r = &ep->rndv[i];

		if (!r->used) {
			r->used = true;
			lm_list_init(&r->node);
			return r;
		}
	}
	return NULL;
}

static uint64_t rndv_handle(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	return (uint64_t)r->gen << 32 | (uint64_t)(r - ep->rndv);
}

static void rndv_free(struct lm_rdm_rndv *r)
{
	lm_list_remove(&r->node);
	r->used = false;
	r->gen++;
	if (!r->gen)
		r->gen = 1;
}

static void rndv_finish(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	struct lm_rdm_rx *rx = r->rx;

	if (r->eager && r->peer->eager == r)
		r->peer->eager = NULL;

	if (r->rma)
		lm_rdm_rma_rndv_done(ep, r, err);
	else if (rx) {
		if (rx->e.flags & FI_MULTI_RECV) {
			rx->e.last_off = r->off;
			rx->e.last_len = r->place_len;
			/* The last placement into a released buffer. */
			if (rx->released && rx->busy == 1)
				r->extra_flags |= FI_MULTI_RECV;
		}
		if (err) {
			char name[256];
			size_t nlen = sizeof(name);
			struct fi_cq_err_entry e = {
			    .op_context = rx->e.context,
			    .flags = FI_RECV |
			             (rx->e.flags & FI_TAGGED ? FI_TAGGED : FI_MSG) |
			             (r->extra_flags & FI_MULTI_RECV),
			    .tag = r->tag,
			    .err = err,
			    .prov_errno = err,
			};

			if (ep->cntr[LM_CNTR_RECV])
				lm_cntr_inc_err(ep->cntr[LM_CNTR_RECV]);
			if (ep->rx_cq) {
				if (ep->dom->link_ops->addr_to_str(r->peer->addr, name,
				                                   &nlen) == 0) {
					name[sizeof(name) - 1] = 0;
					e.prov_errno = 0x10001;
					e.err_data = name;
					e.err_data_size = strlen(name) + 1;
				}
				lm_cq_write_err(ep->rx_cq, &e, r->src);
			}
		} else {
			rx_report(ep, rx, r->size, r->data, r->tag, r->src,
			          r->extra_flags);
		}
		rx->busy--;
		if (!(rx->e.flags & FI_MULTI_RECV) || (rx->released && !rx->busy))
			lm_rdm_rx_free(ep, rx);
	}
	rndv_free(r);
}

void lm_rdm_rndv_fail(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	rndv_finish(ep, r, err);
}

/* r (allocated) receives a message of size bytes into rx. */
static void rndv_setup(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, struct lm_rdm_rx *rx,
                       struct lm_rdm_peer *peer, fi_addr_t src, uint64_t size,
                       uint64_t tag, uint64_t data, uint16_t hflags, uint64_t sreq,
                       bool queued)
{
	bool released = false;

	r->rma = false;
	r->pushing = false;
	r->placing = false;
	r->eager = false;
	r->early = false;
	r->rx = rx;
	r->peer = peer;
	r->src = src;
	r->sreq = sreq;
	r->size = size;
	r->tag = tag;
	r->data = data;
	r->hflags = hflags;
	r->got = 0;
	r->start_ms = lm_now_ms();
	r->iov_count = rx_place(ep, rx, size, r->iov, &released);
	r->cap = LM_MIN(size, lm_iov_len(r->iov, r->iov_count));
	r->off = rx->e.last_off;
	r->place_len = rx->e.last_len;
	r->extra_flags = hflags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0;
	rx->busy++;
	if (rx->e.flags & FI_MULTI_RECV)
		multi_after(ep, rx, released, queued); /* rndv_finish announces it */
}

/* r by packets: the sender streams DATA from off on once it has our CTS
 * (the bytes before off came with the RTS). */
static void rndv_cts(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t off)
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

	/* Split: the sender writes the upper part while we read the lower
	 * one. */
	if ((hflags & LM_HF_SPLIT) && r->cap >= LM_SPLIT_MIN) {
		struct lm_rdm_rts push;
		struct lm_rdm_hdr ph = {.version = LM_RDM_WIRE_VERSION,
		                        .op = LM_OP_PUSH,
		                        .sreq = r->sreq,
		                        .rreq = rndv_handle(ep, r)};

		mine = (r->cap / 2) & ~(LM_PAGE_SIZE - 1);
		push.iov_count =
		    lm_rdm_iov_slice(r->iov, r->iov_count, mine, r->cap - mine, local);
		lm_rdm_rts_from_iov(&push, local, push.iov_count);
		ph.addr = mine;
		ph.size = r->cap - mine;
		r->remote = *rts;
		r->pushing = true;
		lm_list_push_back(&ep->rndv_active, &r->node);
		lm_rdm_busy(ep);
		lm_rdm_ctl_send(ep, peer, &ph, &push, lm_rdm_rts_len(&push));
	}
	rn = lm_rdm_rts_iov(rts, mine, remote);
	ln = lm_rdm_iov_slice(r->iov, r->iov_count, 0, mine, local);
	got = mine && rn ? lm_rdm_bulk_read(ep, peer, local, ln, remote, rn) : 0;
	if (got == (ssize_t)mine) {
		r->got = mine;
		if (r->pushing)
			return; /* the rest when PUSHED comes */
		send_answer(ep, peer, LM_OP_FIN, r->sreq, 0);
		rndv_finish(ep, r, 0);
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
	if (r->pushing) {
		/* The sender may still be writing its part: CTS once its
		 * PUSHED is here (lm_rdm_on_pushed). */
		r->got = 0;
		return;
	}
	rndv_cts(ep, r, 0);
}

static void rndv_account(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t plen);

/* A matched RTS: read the sender's buffer in one copy when the link can,
 * else ask for the data with CTS.  early: the message's first bytes, come
 * with the RTS (LM_HF_EARLY), or NULL. */
static void rndv_start(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx,
                       struct lm_rdm_peer *peer, fi_addr_t src,
                       const struct lm_rdm_rts *rts, uint64_t size, uint64_t tag,
                       uint64_t data, uint16_t hflags, uint64_t sreq, bool queued,
                       const void *early, size_t early_len)
{
	struct lm_rdm_rndv *r;

	if (!rx) { /* discarded: let the sender go */
		send_answer(ep, peer, LM_OP_FIN, sreq, 0);
		return;
	}
	r = rndv_alloc(ep);
	if (!r) {
		/* Out of rendezvous slots (more than rx_attr size in flight):
		 * fail this receive rather than stall the sender forever. */
		struct fi_cq_err_entry e = {.op_context = rx->e.context,
		                            .flags = FI_RECV,
		                            .err = FI_ENOMEM,
		                            .prov_errno = FI_ENOMEM};

		if (ep->rx_cq)
			lm_cq_write_err(ep->rx_cq, &e, src);
		send_answer(ep, peer, LM_OP_FIN, sreq, FI_ECANCELED);
		if (!(rx->e.flags & FI_MULTI_RECV))
			lm_rdm_rx_free(ep, rx);
		return;
	}
	rndv_setup(ep, r, rx, peer, src, size, tag, data, hflags, sreq, queued);
	if (early) {
		lm_copy_to_iov(r->iov, r->iov_count, 0, early, LM_MIN(early_len, r->cap));
		if (early_len >= size) {
			rndv_account(ep, r, early_len); /* all of it: FIN */
			return;
		}
		r->got = early_len;
		rndv_cts(ep, r, early_len);
		return;
	}
	if ((hflags & LM_HF_BULK) && ep->bulk && !peer->bulk_broken &&
	    ep->link->ops->bulk_read && rts->iov_count <= LM_IOV_LIMIT) {
		rndv_bulk(ep, r, rts, hflags);
		return;
	}
	rndv_cts(ep, r, 0);
}

bool lm_rdm_rndv_write(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                       const struct lm_rdm_hdr *h, const struct iovec *iov,
                       size_t iov_count, const struct lm_rdm_rts *rts)
{
	struct lm_rdm_rndv *r = rndv_alloc(ep);

	if (!r)
		return false;
	memset(&r->rx, 0, sizeof(*r) - offsetof(struct lm_rdm_rndv, rx));
	r->rma = true;
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
	r->start_ms = lm_now_ms();
	if (rts)
		rndv_bulk(ep, r, rts, h->flags);
	else
		rndv_cts(ep, r, 0);
	return true;
}

/* The rendezvous a DATA packet of plen bytes from peer belongs to, or
 * NULL for a stale or forged one (nothing of ours is touched then): the
 * handle must be live, the packet come from the rendezvous' sender and
 * fit its message, and no link be placing another piece into it. */
static struct lm_rdm_rndv *rndv_of_data(struct lm_rdm_ep *ep,
                                        const struct lm_rdm_peer *peer,
                                        const struct lm_rdm_hdr *h, size_t plen)
{
	uint32_t slot = (uint32_t)h->rreq;
	struct lm_rdm_rndv *r;

	if (slot >= ep->rndv_count)
		return NULL;
	r = &ep->rndv[slot];
	if (!r->used || r->gen != (uint32_t)(h->rreq >> 32) || r->peer != peer ||
	    h->addr > r->size || plen > r->size - h->addr || r->pushing || r->placing ||
	    r->eager)
		return NULL;
	return r;
}

static void rndv_account(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t plen)
{
	r->got += plen;
	if (r->got >= r->size) {
		send_answer(ep, r->peer, LM_OP_FIN, r->sreq, 0);
		rndv_finish(ep, r, 0);
	}
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

/* An eager message received in full by its placement (r->eager). */
static void eager_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r)
{
	r->got = r->size;
	lm_rdm_credit_owe(ep, r->peer, r->size);
	if (r->hflags & LM_HF_ACK)
		send_answer(ep, r->peer, LM_OP_ACK, r->sreq, 0);
	rndv_finish(ep, r, 0);
}

/* A message whose header came before its payload (EAGER, or an RTS with
 * its first piece): matched now by a posted receive into r, which holds
 * peer->eager until the payload is in; NULL when no receive takes it or
 * no rendezvous slot is free (allocated first, so a receive is never
 * taken without one): the payload then comes through recv. */
static struct lm_rdm_rndv *header_match(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                        const struct lm_rdm_hdr *h)
{
	struct lm_match *m = h->flags & LM_HF_TAGGED ? &ep->tagged : &ep->msg;
	struct lm_rdm_rndv *r;
	struct lm_rx_entry *e;
	fi_addr_t src;

	peer->replying = true;
	r = rndv_alloc(ep);
	if (!r)
		return NULL;
	src = lm_rdm_peer_fiaddr(ep, peer);
	e = lm_match_arrival(m, src, h->tag);
	if (!e) {
		rndv_free(r);
		return NULL;
	}
	rndv_setup(ep, r, lm_container_of(e, struct lm_rdm_rx, e), peer, src, h->size,
	           h->tag, h->data, h->flags, h->sreq, e->flags & FI_MULTI_RECV);
	r->eager = true;
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
	    !(r = header_match(ep, peer, h)))
		return 0;
	lm_list_push_back(&ep->rndv_active, &r->node); /* fails with the peer */
	lm_rdm_busy(ep);
	if (r->cap < plen)
		return 0;
	r->placing = true;
	return lm_rdm_iov_slice(r->iov, r->iov_count, 0, plen, iov);
}

/* The first piece of r's RTS (early_place) is in: n bytes of it. */
static void early_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, size_t n)
{
	r->placing = r->eager = r->early = false;
	r->peer->eager = NULL;
	rndv_account(ep, r, n);
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
	    !(r = header_match(ep, peer, h)))
		return 0;
	early = plen - h->addr;
	r->early = true;
	if (early < h->size) {
		rndv_cts(ep, r, early);
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
	r->placing = true;
	return n + 1;
}

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
	if (n)
		r->placing = true; /* nothing else may finish r meanwhile */
	return n;
}

void lm_rdm_placed(void *arg, const void *src_addr, const void *hdr, size_t plen)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_peer *peer = lm_rdm_peer_of_src(ep, src_addr);
	struct lm_rdm_hdr h;
	struct lm_rdm_rndv *r;
	uint32_t slot;

	memcpy(&h, hdr, sizeof(h));
	if (peer && (h.op == LM_OP_RTS || h.op == LM_OP_EAGER))
		lm_rdm_credit_back(peer, h.rreq); /* else counted by recv_pkt */
	if (h.op == LM_OP_RTS) {
		r = peer ? peer->eager : NULL;
		if (r && r->early && r->placing && r->sreq == h.sreq)
			early_done(ep, r, plen - h.addr);
		return;
	}
	if (h.op == LM_OP_EAGER) {
		r = peer ? peer->eager : NULL;
		if (r && r->placing && !r->early) {
			r->placing = false;
			eager_done(ep, r);
		}
		return;
	}
	slot = (uint32_t)h.rreq;
	if (slot >= ep->rndv_count)
		return;
	r = &ep->rndv[slot];
	if (!r->used || r->gen != (uint32_t)(h.rreq >> 32) || r->peer != peer ||
	    !r->placing)
		return;
	r->placing = false;
	rndv_account(ep, r, plen);
}

/* Sender side of a split rendezvous: write the part the receiver asked
 * for straight into its memory, then say so. */
void lm_rdm_on_push(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                    const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_lookup(ep, h->sreq, peer);
	struct lm_rdm_hdr a = {.version = LM_RDM_WIRE_VERSION,
	                       .op = LM_OP_PUSHED,
	                       .sreq = h->sreq,
	                       .rreq = h->rreq,
	                       .data = FI_EOPNOTSUPP};
	struct iovec local[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
	struct lm_rdm_rts rts;
	size_t ln, rn;
	ssize_t got;

	if (!tx || tx->op != LM_OP_RTS || tx->state != LM_TX_WAIT)
		return;
	if (h->addr > tx->len || h->size > tx->len - h->addr ||
	    lm_rdm_rts_parse(&rts, payload, plen) ||
	    !(rn = lm_rdm_rts_iov(&rts, h->size, remote))) {
		a.data = FI_EINVAL;
	} else if (ep->bulk && !peer->bulk_broken && ep->link->ops->bulk_write) {
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

/* Receiver side: the sender's part is in place (or it could not write). */
void lm_rdm_on_pushed(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      const struct lm_rdm_hdr *h)
{
	uint32_t slot = (uint32_t)h->rreq;
	struct lm_rdm_rndv *r;

	if (slot >= ep->rndv_count)
		return;
	r = &ep->rndv[slot];
	if (!r->used || r->gen != (uint32_t)(h->rreq >> 32) || !r->pushing ||
	    r->sreq != h->sreq || r->peer != peer)
		return;
	r->pushing = false;
	if (r->got && !h->data) {
		lm_rdm_iov_written(r->iov, r->iov_count, r->got, r->cap - r->got);
		send_answer(ep, r->peer, LM_OP_FIN, r->sreq, 0);
		rndv_finish(ep, r, 0);
		return;
	}
	if (r->got) { /* the sender could not write: read its part too */
		struct iovec whole[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
		struct iovec local[LM_IOV_LIMIT];
		size_t rest = r->cap - r->got;
		size_t wn = lm_rdm_rts_iov(&r->remote, r->cap, whole);
		size_t rn = lm_rdm_iov_slice(whole, wn, r->got, rest, remote);
		size_t ln = lm_rdm_iov_slice(r->iov, r->iov_count, r->got, rest, local);
		ssize_t got = lm_rdm_bulk_read(ep, r->peer, local, ln, remote, rn);

		if (got == (ssize_t)rest) {
			send_answer(ep, r->peer, LM_OP_FIN, r->sreq, 0);
			rndv_finish(ep, r, 0);
			return;
		}
		if (got == -FI_EIO) {
			rndv_finish(ep, r, FI_EIO);
			return;
		}
		r->peer->bulk_broken = true;
	}
	/* Our own read was refused: the whole message by packets. */
	r->got = 0;
	lm_list_remove(&r->node); /* rndv_cts puts it back */
	rndv_cts(ep, r, 0);
}

/* ---- arrivals ------------------------------------------------------------- */

/* An EAGER or RTS packet.  Inline in the dispatch below, its one caller:
 * every message comes this way. */
static LM_HOT_INLINE void msg_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                   const struct lm_rdm_hdr *h, const void *payload,
                                   size_t plen)
{
	bool tagged = h->flags & LM_HF_TAGGED;
	struct lm_match *m = tagged ? &ep->tagged : &ep->msg;
	fi_addr_t src = lm_rdm_peer_fiaddr(ep, peer);
	struct lm_rx_entry *e;
	struct lm_rdm_unexp *x;
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
		if (r && r->early && r->sreq == h->sreq) {
			/* Matched when its header came (lm_rdm_place), its
			 * first piece not placed: what fits. */
			lm_copy_to_iov(r->iov, r->iov_count, 0, early,
			               LM_MIN(early_len, r->cap));
			early_done(ep, r, early_len);
			return;
		}
	} else if (plen != h->size) {
		lm_rdm_credit_owe(ep, peer, plen); /* dropped */
		return;
	} else if (peer->eager && !peer->eager->early) {
		/* Matched when its header came (lm_rdm_place), too big to
		 * place whole: what fits, the rest dropped (truncation). */
		struct lm_rdm_rndv *r = peer->eager;

		lm_copy_to_iov(r->iov, r->iov_count, 0, payload, LM_MIN(plen, r->cap));
		eager_done(ep, r);
		return;
	}
	e = lm_match_arrival(m, src, h->tag);
	if (e) {
		struct lm_rdm_rx *rx = lm_container_of(e, struct lm_rdm_rx, e);
		bool queued = e->flags & FI_MULTI_RECV;

		if (h->op == LM_OP_RTS) {
			rndv_start(ep, rx, peer, src, &rts, h->size, h->tag, h->data,
			           h->flags, h->sreq, queued, early, early_len);
			return;
		}
		deliver_eager(ep, rx, src, plen, h->tag, h->data, h->flags, payload,
		              queued);
		lm_rdm_credit_owe(ep, peer, plen);
		if (h->flags & LM_HF_ACK)
			send_answer(ep, peer, LM_OP_ACK, h->sreq, 0);
		return;
	}
	x = lm_bufpool_alloc(&ep->unexp_pool);
	if (!x) {
		/* A lost message beats a crash; the pool only fails without
		 * memory. */
		if (h->op == LM_OP_EAGER)
			lm_rdm_credit_owe(ep, peer, plen);
		return;
	}
	memset(x, 0, sizeof(*x));
	x->peer = peer;
	x->hflags = h->flags;
	x->sreq = h->sreq;
	x->u.src = src;
	x->u.tag = h->tag;
	x->u.data = h->data;
	x->u.len = h->size;
	x->u.flags = (tagged ? FI_TAGGED : FI_MSG) |
	             (h->flags & LM_HF_CQ_DATA ? FI_REMOTE_CQ_DATA : 0);
	x->u.payload = x;
	if (h->op == LM_OP_RTS) {
		x->rndv = true;
		x->rts = rts;
	} else if (plen) {
		if (plen <= ep->small_pool.elem_size)
			x->buf = lm_bufpool_alloc(&ep->small_pool);
		x->small = x->buf != NULL;
		if (!x->buf)
			x->buf = malloc(plen);
		if (!x->buf) {
			lm_bufpool_free(&ep->unexp_pool, x);
			lm_rdm_credit_owe(ep, peer, plen);
			return;
		}
		memcpy(x->buf, payload, plen);
		x->buf_len = plen;
		ep->unexp_bytes += plen;
	}
	lm_match_add_unexp(m, &x->u);
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

/* A queued message taken by a receive (post or claim). */
static void deliver_unexp(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx,
                          struct lm_rdm_unexp *x, bool queued)
{
	if (x->rndv) {
		rndv_start(ep, rx, x->peer, x->u.src, &x->rts, x->u.len, x->u.tag,
		           x->u.data, x->hflags, x->sreq, queued, NULL, 0);
		lm_rdm_unexp_free(ep, x);
		return;
	}
	/* Delivered or discarded: its eager bytes are free at this end. */
	lm_rdm_credit_owe(ep, x->peer, x->u.len);
	if (rx)
		deliver_eager(ep, rx, x->u.src, x->u.len, x->u.tag, x->u.data, x->hflags,
		              x->buf, queued);
	if (x->hflags & LM_HF_ACK)
		send_answer(ep, x->peer, LM_OP_ACK, x->sreq, 0);
	lm_rdm_unexp_free(ep, x);
}

/* ---- posting receives --------------------------------------------------- */

static ssize_t peek(struct lm_rdm_ep *ep, struct lm_match *m,
                    const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct lm_unexp_entry *u;
	struct lm_rdm_unexp *x;
	uint64_t cflags;

	lm_rdm_progress_locked(ep);
	u = lm_match_peek(m, msg->addr, msg->tag, msg->ignore);
	if (!u) {
		struct fi_cq_err_entry e = {.op_context = msg->context,
		                            .flags = FI_RECV | FI_TAGGED,
		                            .tag = msg->tag,
		                            .err = FI_ENOMSG,
		                            .prov_errno = FI_ENOMSG};

		if (ep->rx_cq)
			lm_cq_write_err(ep->rx_cq, &e, FI_ADDR_NOTAVAIL);
		return 0;
	}
	x = u->payload;
	cflags = FI_RECV | FI_TAGGED | (u->flags & FI_REMOTE_CQ_DATA);
	if (ep->rx_cq)
		lm_cq_write(ep->rx_cq, msg->context, cflags, u->len, NULL, u->data,
		            u->tag, u->src);
	if (flags & FI_DISCARD) {
		lm_match_remove_unexp(m, u);
		deliver_unexp(ep, NULL, x, false);
	} else if (flags & FI_CLAIM) {
		lm_match_claim(m, u, msg->context);
	}
	return 0;
}

/* Inline in each receive call, as do_send. */
static LM_HOT_INLINE ssize_t post_recv(struct lm_rdm_ep *ep, const struct iovec *iov,
                                       void **desc, size_t count, fi_addr_t src,
                                       uint64_t tag, uint64_t ignore, uint64_t flags,
                                       void *context, bool tagged)
{
	struct lm_match *m = tagged ? &ep->tagged : &ep->msg;
	struct lm_rdm_rx *rx;
	struct lm_unexp_entry *u;
	ssize_t ret = 0;

	size_t total = 0;

	if (count > LM_IOV_LIMIT || (count && !iov))
		return -FI_EINVAL;
	/* A NULL buffer is room for no bytes (programs post them, with a
	 * length, for empty messages, as libfabric allows): a message with
	 * data ends truncated.  A total that wraps is refused. */
	for (size_t i = 0; i < count; i++) {
		size_t len = iov[i].iov_base ? iov[i].iov_len : 0;

		if (len > SIZE_MAX - total)
			return -FI_EINVAL;
		total += len;
	}
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	if ((flags & FI_MULTI_RECV) && count != 1)
		return -FI_EINVAL;
	lm_lock_acquire(&ep->lock);
	if (!ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (!m->directed) {
		src = FI_ADDR_UNSPEC;
	} else if (src == FI_ADDR_UNSPEC) {
		/* FI_EXACT_DIRECTED_RECV: every receive names its source
		 * (but FI_CLAIM, which takes the message its peek chose). */
		if ((tagged ? ep->tagged_exact : ep->msg_exact) && !(flags & FI_CLAIM)) {
			ret = -FI_EINVAL;
			goto out;
		}
	} else if (!ep->connected && !lm_av_addr(ep->av, src)) {
		/* A directed receive names a peer of the AV. */
		ret = -FI_EINVAL;
		goto out;
	}
	if (tagged && (flags & FI_PEEK)) {
		struct fi_msg_tagged msg = {
		    .addr = src, .tag = tag, .ignore = ignore, .context = context};

		ret = peek(ep, m, &msg, flags);
		goto out;
	}
	if (tagged && (flags & FI_DISCARD) && !(flags & FI_CLAIM)) {
		ret = -FI_EINVAL;
		goto out;
	}
	if (ep->rx_count >= ep->rx_limit) {
		ret = -FI_EAGAIN;
		goto out;
	}
	rx = lm_bufpool_alloc(&ep->rx_pool);
	if (!rx) {
		ret = -FI_EAGAIN;
		goto out;
	}
	/* Field by field: the iov and desc arrays are large and only
	 * count entries of them are read; node, bucket and seq are
	 * lm_match_post's. */
	lm_list_init(&rx->e.node);
	rx->e.bucket = NULL;
	rx->e.seq = 0;
	rx->e.consumed = rx->e.last_off = rx->e.last_len = 0;
	rx->e.engine = NULL;
	rx->busy = 0;
	rx->released = false;
	ep->rx_count++;
	rx->e.src = src;
	rx->e.tag = tag;
	rx->e.ignore = ignore;
	rx->e.flags = flags | (tagged ? FI_TAGGED : FI_MSG);
	rx->e.context = context;
	for (size_t i = 0; i < count; i++) {
		rx->e.iov[i] = iov[i];
		if (!iov[i].iov_base)
			rx->e.iov[i].iov_len = 0;
		rx->e.desc[i] = desc ? desc[i] : NULL;
	}
	rx->e.iov_count = count;
	rx->e.total_len = total;

	if (tagged && (flags & FI_CLAIM)) {
		struct lm_rdm_unexp *x;

		u = lm_match_take_claimed(m, context);
		if (!u) {
			lm_rdm_rx_free(ep, rx);
			ret = -FI_EINVAL;
			goto out;
		}
		x = u->payload;
		if (flags & FI_DISCARD) {
			struct lm_cq *cq = ep->rx_cq;

			if (cq)
				lm_cq_write(cq, context, FI_RECV | FI_TAGGED, 0, NULL, 0,
				            u->tag, u->src);
			lm_rdm_rx_free(ep, rx);
			deliver_unexp(ep, NULL, x, false);
		} else {
			rx->e.flags &= ~FI_MULTI_RECV;
			deliver_unexp(ep, rx, x, false);
		}
		goto out;
	}
	if (!(flags & FI_MULTI_RECV)) {
		u = lm_match_post(m, &rx->e);
		if (u)
			deliver_unexp(ep, rx, u->payload, false);
		goto out;
	}
	/* A multi-receive buffer takes queued messages while it has room;
	 * busy keeps it alive across the deliveries. */
	rx->busy++;
	while (!rx->released && (u = lm_match_post(m, &rx->e)))
		deliver_unexp(ep, rx, u->payload, false);
	if (!--rx->busy && rx->released) {
		/* Used up by queued messages, whose completions went out
		 * while busy held it: announce the release on its own. */
		if (ep->rx_cq)
			lm_cq_write(ep->rx_cq, rx->e.context, FI_MULTI_RECV, 0, NULL, 0,
			            0, FI_ADDR_NOTAVAIL);
		lm_rdm_rx_free(ep, rx);
	}
out:
	lm_lock_release(&ep->lock);
	return ret;
}

static ssize_t rdm_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                        fi_addr_t src_addr, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);
	struct iovec iov = {buf, len};

	return post_recv(ctx->ep, &iov, &desc, 1, src_addr, 0, 0, ctx->rx_flags, context,
	                 false);
}

static ssize_t rdm_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src_addr, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	return post_recv(ctx->ep, iov, desc, count, src_addr, 0, 0, ctx->rx_flags,
	                 context, false);
}

static ssize_t rdm_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	if (!msg)
		return -FI_EINVAL;
	return post_recv(ctx->ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0,
	                 0, flags, msg->context, false);
}

static ssize_t rdm_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                         fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);
	struct iovec iov = {buf, len};

	return post_recv(ctx->ep, &iov, &desc, 1, src_addr, tag, ignore, ctx->rx_flags,
	                 context, true);
}

static ssize_t rdm_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                          void *context)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	return post_recv(ctx->ep, iov, desc, count, src_addr, tag, ignore, ctx->rx_flags,
	                 context, true);
}

static ssize_t rdm_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags)
{
	struct lm_rdm_ctx *ctx = lm_rdm_ctx_of(fid);

	if (!msg)
		return -FI_EINVAL;
	return post_recv(ctx->ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
	                 msg->tag, msg->ignore, flags, msg->context, true);
}

/* ---- cancel ------------------------------------------------------------------ */

ssize_t lm_rdm_cancel(struct lm_rdm_ep *ep, void *context)
{
	struct lm_match *ms[2] = {&ep->msg, &ep->tagged};

	for (int i = 0; i < 2; i++) {
		struct lm_rx_entry *e = lm_match_cancel(ms[i], context);
		struct lm_rdm_rx *rx;

		if (!e)
			continue;
		rx = lm_container_of(e, struct lm_rdm_rx, e);
		if (ep->rx_cq)
			lm_rx_cancelled(ep->rx_cq, e);
		if (ep->cntr[LM_CNTR_RECV])
			lm_cntr_inc_err(ep->cntr[LM_CNTR_RECV]);
		/* A multi-receive buffer still being filled by a rendezvous
		 * is freed when that finishes. */
		rx->released = true;
		if (!rx->busy)
			lm_rdm_rx_free(ep, rx);
		return 0;
	}
	return -FI_ENOENT;
}

/* ---- sending ------------------------------------------------------------------- */

/* May a message of len bytes go eager to peer?  Within its credit (wire
 * version 4); when short, what the peer gave back may be waiting. */
static bool eager_ok(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, size_t len)
{
	/* A reply (a message of peer's came since we sent it one) goes
	 * eager up to a whole packet where the link places payloads: no
	 * handshake, no FIN.  Streams keep the smaller limit: there the
	 * handshakes overlap, and large eager packets stream worse. */
	if (len > ep->eager_max &&
	    !(peer->replying && (ep->link->caps & LM_LINK_EARLY) &&
	      len <= ep->link->max_payload))
		return false;
	if (len > peer->credit)
		lm_rdm_progress_locked(ep);
	return len <= peer->credit;
}

/* An eager packet (h: no request, so no sreq, addr or key) of h->len
 * bytes at payload, through the link's send_words. */
static inline ssize_t send_eager_words(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                       const struct lm_rdm_hdr *h, const void *payload)
{
	uint64_t words[5];
	unsigned mask = 0x3, n = 2;

	/* version, op, flags, len: as one value, not a load of the four
	 * stores just made (which would wait for them to retire). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	words[0] = (uint64_t)h->version | (uint64_t)h->op << 8 | (uint64_t)h->flags << 16 |
	           (uint64_t)h->len << 32;
#else
	memcpy(&words[0], h, sizeof(words[0]));
#endif
	words[1] = h->size;
	if (h->tag) {
		words[n++] = h->tag;
		mask |= 1u << 2;
	}
	if (h->data) {
		words[n++] = h->data;
		mask |= 1u << 3;
	}
	if (h->rreq) {
		words[n++] = h->rreq;
		mask |= 1u << 5;
	}
	return ep->link->ops->send_words(ep->link, peer->lp, words, mask, payload, h->len);
}

/* The fast path's send, taken but not yet delivered by the link: true
 * when it completes later (lm_rdm_tx_park_held). */
static bool held_send(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, void *context,
                      bool report, bool tagged, size_t len)
{
	const struct lm_link_ops *ops = ep->link->ops;
	uint64_t mark = ops->mark(ep->link, peer->lp);
	struct lm_rdm_tx *tx;

	/* The common case, without a request: out, and nothing held. */
	if (!mark || (!ep->tx_held && ops->delivered(ep->link, peer->lp, mark, false)))
		return false;
	tx = lm_rdm_tx_alloc(ep); /* one is free: checked */
	tx->peer = peer;
	tx->context = context;
	tx->report = report;
	tx->cntr = ep->cntr[LM_CNTR_SEND];
	tx->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	tx->op = LM_OP_EAGER;
	tx->len = len;
	tx->iov_count = 0;
	tx->hdr.flags = 0;
	if (lm_rdm_tx_park_held(ep, tx))
		return true;
	lm_rdm_tx_free(ep, tx);
	return false;
}

/* Inline in each send call: their constant arguments fold away. */
static LM_HOT_INLINE ssize_t do_send(struct lm_rdm_ep *ep, const struct iovec *iov,
                                     size_t count, fi_addr_t dest, uint64_t tag,
                                     uint64_t data, uint64_t flags, void *context,
                                     bool tagged, bool inject_call)
{
	struct lm_rdm_peer *peer;
	struct lm_rdm_tx *tx;
	size_t len;
	bool report, eager;
	ssize_t ret = 0;
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION, .op = LM_OP_EAGER};

	if (!lm_iov_valid(iov, count, &len))
		return -FI_EINVAL;
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	lm_lock_acquire(&ep->lock);
	if (!ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	if (len > ep->info->ep_attr->max_msg_size ||
	    ((flags & FI_INJECT) && len > ep->inject_size)) {
		ret = -FI_EMSGSIZE;
		goto out;
	}
	peer = lm_rdm_peer_by_fiaddr(ep, dest);
	if (!peer) {
		ret = -FI_EINVAL;
		goto out;
	}
	h.flags =
	    (tagged ? LM_HF_TAGGED : 0) | (flags & FI_REMOTE_CQ_DATA ? LM_HF_CQ_DATA : 0);
	h.size = len;
	h.tag = tag;
	h.data = data;
	if (!lm_list_empty(&ep->tx_queue))
		lm_rdm_tx_flush(ep);
	report = lm_rdm_tx_reports(ep, flags, inject_call);
	eager = eager_ok(ep, peer, len);
	peer->replying = false;
	if (peer->owed >= LM_CREDIT_RIDE) { /* give credit back with it */
		h.rreq = peer->owed;
		peer->owed = 0;
	}

	/* The fast path: a small message straight into the link, no request
	 * (but one free, should the link hold part of it). */
	if (eager && !(flags & (FI_DELIVERY_COMPLETE | FI_FENCE)) &&
	    lm_list_empty(&ep->tx_queue) && !peer->dead && ep->tx_nfree) {
		h.len = (uint32_t)len;
		if (count == 1 && len <= ep->link->inline_max && ep->link->ops->send_words)
			ret = send_eager_words(ep, peer, &h, iov[0].iov_base);
		else
			ret = ep->link->ops->send(ep->link, peer->lp, &h, iov, count);
		if (!ret) {
			peer->credit -= len;
			if (ep->link->ops->mark && held_send(ep, peer, context, report, tagged, len))
				goto out;
			if (ep->cntr[LM_CNTR_SEND])
				lm_cntr_inc(ep->cntr[LM_CNTR_SEND]);
			if (report)
				lm_cq_write(ep->tx_cq, context,
				            FI_SEND | (tagged ? FI_TAGGED : FI_MSG), 0,
				            NULL, 0, 0, FI_ADDR_NOTAVAIL);
			goto out;
		}
		ret = 0;
	}
	tx = lm_rdm_tx_alloc(ep);
	if (!tx) {
		peer->owed += h.rreq; /* the credit rides another time */
		ret = -FI_EAGAIN;
		goto out;
	}
	tx->peer = peer;
	tx->context = context;
	tx->report = report;
	tx->fence = flags & FI_FENCE;
	tx->cntr = ep->cntr[LM_CNTR_SEND];
	tx->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	tx->len = len;
	if (eager) {
		peer->credit -= len;
		tx->op = LM_OP_EAGER;
		if (flags & FI_DELIVERY_COMPLETE)
			h.flags |= LM_HF_ACK;
		lm_rdm_tx_set_iov(tx, iov, count, len,
		                  (flags & FI_INJECT) || inject_call);
		h.len = (uint32_t)len;
	} else {
		tx->op = LM_OP_RTS;
		h.op = LM_OP_RTS;
		if (ep->bulk)
			h.flags |= LM_HF_BULK;
		/* The first piece with the RTS hides the handshake when
		 * nothing else is under way to peer; behind other requests
		 * the handshake is hidden anyway, and the piece would go as
		 * a packet of its own where the stream batches them.  Not
		 * while the peer's receives come after our RTSs (a program
		 * that posts its receive once its own send is done): there
		 * the piece is dropped and sent again. */
		else if ((ep->link->caps & LM_LINK_EARLY) && len <= LM_EARLY_MAX) {
			if (peer->early_score < 0)
				peer->early_score++;
			else if (lm_rdm_peer_quiet(ep, peer))
				h.flags |= LM_HF_EARLY;
		}
		if (ep->bulk && len >= LM_SPLIT_MIN && !peer->bulk_broken &&
		    (ep->link->caps & LM_LINK_BULK_WRITE))
			h.flags |= LM_HF_SPLIT;
		/* An inject past the peer's credit: from a copy. */
		lm_rdm_tx_set_iov(tx, iov, count, len,
		                  (flags & FI_INJECT) || inject_call);
	}
	ret = lm_rdm_tx_launch(ep, tx, &h);
out:
	lm_lock_release(&ep->lock);
	return ret;
}

static ssize_t rdm_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                        fi_addr_t dest, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, 0, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, false, false);
}

static ssize_t rdm_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t dest, void *context)
{
	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, iov, count, dest, 0, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, false, false);
}

static ssize_t rdm_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(lm_rdm_ctx_of(fid)->ep, msg->msg_iov, msg->iov_count, msg->addr, 0,
	               msg->data, flags, msg->context, false, false);
}

static ssize_t rdm_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, 0, 0, FI_INJECT, NULL,
	               false, true);
}

static ssize_t rdm_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, 0, data,
	               lm_rdm_ctx_of(fid)->tx_flags | FI_REMOTE_CQ_DATA, context, false,
	               false);
}

static ssize_t rdm_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                              uint64_t data, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, 0, data,
	               FI_INJECT | FI_REMOTE_CQ_DATA, NULL, false, true);
}

static ssize_t rdm_tsend(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                         fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, tag, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, true, false);
}

static ssize_t rdm_tsendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, iov, count, dest, tag, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, true, false);
}

static ssize_t rdm_tsendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(lm_rdm_ctx_of(fid)->ep, msg->msg_iov, msg->iov_count, msg->addr,
	               msg->tag, msg->data, flags, msg->context, true, false);
}

static ssize_t rdm_tinject(struct fid_ep *fid, const void *buf, size_t len,
                           fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, tag, 0, FI_INJECT, NULL,
	               true, true);
}

static ssize_t rdm_tsenddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                             uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, tag, data,
	               lm_rdm_ctx_of(fid)->tx_flags | FI_REMOTE_CQ_DATA, context, true,
	               false);
}

static ssize_t rdm_tinjectdata(struct fid_ep *fid, const void *buf, size_t len,
                               uint64_t data, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid)->ep, &iov, 1, dest, tag, data,
	               FI_INJECT | FI_REMOTE_CQ_DATA, NULL, true, true);
}

const struct fi_ops_msg lm_rdm_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = rdm_recv,
    .recvv = rdm_recvv,
    .recvmsg = rdm_recvmsg,
    .send = rdm_send,
    .sendv = rdm_sendv,
    .sendmsg = rdm_sendmsg,
    .inject = rdm_inject,
    .senddata = rdm_senddata,
    .injectdata = rdm_injectdata,
};

const struct fi_ops_tagged lm_rdm_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = rdm_trecv,
    .recvv = rdm_trecvv,
    .recvmsg = rdm_trecvmsg,
    .send = rdm_tsend,
    .sendv = rdm_tsendv,
    .sendmsg = rdm_tsendmsg,
    .inject = rdm_tinject,
    .senddata = rdm_tsenddata,
    .injectdata = rdm_tinjectdata,
};
