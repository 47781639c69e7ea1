/* send.c - FI_MSG and FI_TAGGED sends over the engine: the fast path
 * straight into the link, eager and rendezvous requests; and the
 * fi_ops_msg and fi_ops_tagged tables (their receive calls are recv.c's). */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

/* ---- sending ------------------------------------------------------------------- */

/* May a message of len bytes go eager to peer?  Within its credit
 * (LM_EAGER_CREDIT); when short, what the peer gave back may be waiting. */
static bool eager_ok(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, size_t len)
{
	/* A reply (a message of peer's came since we sent it one) goes
	 * eager up to a whole packet where the link places payloads: no
	 * handshake, no FIN.  Streams keep the smaller limit: there the
	 * handshakes overlap, and large eager packets stream worse. */
	if (len > ep->eager_max && !(peer->replying && (lm_rdm_peer_caps(ep, peer) & LM_LINK_EARLY) &&
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
	uint64_t words[6];
	unsigned mask = LM_HDR_BIT(version) | LM_HDR_BIT(size), n = 2;

	/* version, op, flags, len: as one value, not a load of the four
	 * stores just made (which would wait for them to retire). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	words[0] = (uint64_t)h->version | (uint64_t)h->op << 8 |
	           (uint64_t)h->flags << 16 | (uint64_t)h->len << 32;
#else
	memcpy(&words[0], h, sizeof(words[0]));
#endif
	words[1] = h->size;
	if (h->tag) {
		words[n++] = h->tag;
		mask |= LM_HDR_BIT(tag);
	}
	if (h->data) {
		words[n++] = h->data;
		mask |= LM_HDR_BIT(data);
	}
	if (h->rreq) {
		words[n++] = h->rreq;
		mask |= LM_HDR_BIT(rreq);
	}
	if (h->key) {
		words[n++] = h->key;
		mask |= LM_HDR_BIT(key);
	}
	return ep->link->ops->send_words(ep->link, peer->lp, words, mask, payload,
	                                 h->len);
}

/* The fast path's send, taken but not yet delivered by the link: true
 * when it completes later (held, lm_rdm_tx_hold). */
static bool held_send(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                      struct lm_rdm_peer *peer, void *context, bool report, bool tagged,
                      size_t len)
{
	uint64_t mark = lm_rdm_hold_mark(ep, peer);
	struct lm_rdm_tx *tx;

	/* The common case, without a request: out, and nothing held. */
	if (!mark)
		return false;
	tx = lm_rdm_tx_alloc(ep); /* one is free: checked */
	if (!tx)
		return false; /* no memory for it: complete now */
	tx->peer = peer;
	tx->context = context;
	tx->report = report;
	tx->rep = rep;
	tx->cntr = rep->cntr[LM_CNTR_SEND];
	tx->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	tx->op = LM_OP_EAGER;
	tx->len = len;
	tx->iov_count = 0;
	tx->hdr.flags = 0;
	lm_rdm_tx_hold(ep, tx, mark);
	return true;
}

/* The fast path: a small message straight into the link, no request (but
 * one free, should the link hold part of it).  1: not taken, a request
 * must carry it. */
static LM_HOT_INLINE ssize_t send_fast(struct lm_rdm_ep *ep,
                                       const struct lm_rdm_report *rep,
                                       struct lm_rdm_peer *peer, struct lm_rdm_hdr *h,
                                       const struct iovec *iov, size_t count,
                                       void *context, bool report, bool tagged)
{
	size_t len = h->size;
	ssize_t ret;

	h->len = (uint32_t)len;
	if (count == 1 && len <= ep->link->inline_max && ep->link->ops->send_words)
		ret = send_eager_words(ep, peer, h, iov[0].iov_base);
	else
		ret = ep->link->ops->send(ep->link, peer->lp, h, iov, count);
	if (ret)
		return 1;
	peer->credit -= len;
	if (ep->link->ops->mark && held_send(ep, rep, peer, context, report, tagged, len))
		return 0;
	if (rep->cntr[LM_CNTR_SEND])
		lm_cntr_inc(rep->cntr[LM_CNTR_SEND]);
	if (report)
		lm_cq_write(rep->cq, context, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), 0,
		            NULL, 0, 0, FI_ADDR_NOTAVAIL);
	return 0;
}

/* The RTS of a message too large (or beyond the peer's credit) to go
 * eager: its flags say how the receiver may take the data. */
static void rts_flags(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      struct lm_rdm_hdr *h, size_t len)
{
	unsigned caps = lm_rdm_peer_caps(ep, peer);
	bool bulk = ep->bulk && (caps & LM_LINK_BULK_READ);

	h->op = LM_OP_RTS;
	if (bulk)
		h->flags |= LM_HF_BULK;
	/* The first piece with the RTS hides the handshake when nothing else
	 * is under way to peer; behind other requests the handshake is hidden
	 * anyway, and the piece would go as a packet of its own where the
	 * stream batches them.  Not while the peer's receives come after our
	 * RTSs (a program that posts its receive once its own send is done):
	 * there the piece is dropped and sent again. */
	else if ((caps & LM_LINK_EARLY) && len <= LM_EARLY_MAX) {
		if (peer->early_score < 0)
			peer->early_score++;
		else if (lm_rdm_peer_quiet(ep, peer))
			h->flags |= LM_HF_EARLY;
	}
	if (bulk && len >= LM_SPLIT_MIN && !peer->bulk_broken && (caps & LM_LINK_BULK_WRITE))
		h->flags |= LM_HF_SPLIT;
}

/* A message carried by a request: eager (queued, fenced, or asking for
 * delivery completion) or by rendezvous. */
static ssize_t send_request(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                            struct lm_rdm_peer *peer, struct lm_rdm_hdr *h,
                            const struct iovec *iov, size_t count, uint64_t flags,
                            void *context, bool report, bool eager, bool copy)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_alloc(ep);
	size_t len = h->size;

	if (!tx) {
		peer->owed += h->rreq; /* the credit rides another time */
		return -FI_EAGAIN;
	}
	tx->peer = peer;
	tx->context = context;
	tx->report = report;
	tx->fence = flags & FI_FENCE;
	tx->rep = rep;
	tx->cntr = rep->cntr[LM_CNTR_SEND];
	tx->cq_flags = FI_SEND | (h->flags & LM_HF_TAGGED ? FI_TAGGED : FI_MSG);
	tx->len = len;
	if (eager) {
		peer->credit -= len;
		tx->op = LM_OP_EAGER;
		if (flags & FI_DELIVERY_COMPLETE)
			h->flags |= LM_HF_ACK;
		h->len = (uint32_t)len;
	} else {
		tx->op = LM_OP_RTS;
		rts_flags(ep, peer, h, len);
	}
	/* An inject (or a message past the peer's credit) goes from a copy. */
	lm_rdm_tx_set_iov(tx, iov, count, len, copy);
	return lm_rdm_tx_launch(ep, tx, h);
}

static ssize_t trig_send(struct lm_rdm_ctx *ctx, const struct iovec *iov, size_t count,
                         fi_addr_t dest, uint64_t tag, uint64_t data, uint64_t flags,
                         void *context, bool tagged, bool inject_call);

/* Inline in each send call: their constant arguments fold away. */
static LM_HOT_INLINE ssize_t do_send(struct lm_rdm_ctx *ctx, const struct iovec *iov,
                                     size_t count, fi_addr_t dest, uint64_t tag,
                                     uint64_t data, uint64_t flags, void *context,
                                     bool tagged, bool inject_call)
{
	struct lm_rdm_ep *ep = ctx->ep;
	const struct lm_rdm_report *rep = ctx->txrep;
	struct lm_rdm_peer *peer;
	size_t len;
	bool report, eager;
	ssize_t ret = 0;
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION, .op = LM_OP_EAGER};

	if (__builtin_expect(flags & FI_TRIGGER, 0))
		return trig_send(ctx, iov, count, dest, tag, data, flags, context, tagged,
		                 inject_call);
	ret = lm_rdm_op_enter(ctx, iov, count, flags, &len);
	if (ret)
		return ret;
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
	h.flags = ep->lane_flags | (tagged ? LM_HF_TAGGED : 0) |
	          (flags & FI_REMOTE_CQ_DATA ? LM_HF_CQ_DATA : 0);
	h.size = len;
	h.tag = tag;
	h.data = data;
	if (!lm_list_empty(&ep->tx_queue))
		lm_rdm_tx_flush(ep);
	report = lm_rdm_tx_reports(rep, flags, inject_call);
	eager = eager_ok(ep, peer, len);
	peer->replying = false;
	if (peer->owed >= LM_CREDIT_RIDE) { /* give credit back with it */
		h.rreq = peer->owed;
		peer->owed = 0;
	}
	if (eager && !(flags & (FI_DELIVERY_COMPLETE | FI_FENCE)) &&
	    lm_list_empty(&ep->tx_queue) && !peer->dead && ep->tx_nfree) {
		ret = send_fast(ep, rep, peer, &h, iov, count, context, report, tagged);
		if (ret <= 0)
			goto out;
	}
	ret = send_request(ep, rep, peer, &h, iov, count, flags, context, report, eager,
	                   (flags & FI_INJECT) || inject_call);
out:
	lm_lock_release(ep->lock);
	return ret;
}

static ssize_t rdm_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                        fi_addr_t dest, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, 0, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, false, false);
}

static ssize_t rdm_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t dest, void *context)
{
	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), iov, count, dest, 0, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, false, false);
}

static ssize_t rdm_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(lm_rdm_ctx_of(fid), msg->msg_iov, msg->iov_count, msg->addr, 0,
	               msg->data, flags, msg->context, false, false);
}

static ssize_t rdm_inject(struct fid_ep *fid, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, 0, 0, FI_INJECT, NULL, false,
	               true);
}

static ssize_t rdm_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, 0, data,
	               lm_rdm_ctx_of(fid)->tx_flags | FI_REMOTE_CQ_DATA, context, false,
	               false);
}

static ssize_t rdm_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                              uint64_t data, fi_addr_t dest)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, 0, data,
	               FI_INJECT | FI_REMOTE_CQ_DATA, NULL, false, true);
}

static ssize_t rdm_tsend(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                         fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, tag, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, true, false);
}

static ssize_t rdm_tsendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), iov, count, dest, tag, 0,
	               lm_rdm_ctx_of(fid)->tx_flags, context, true, false);
}

static ssize_t rdm_tsendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(lm_rdm_ctx_of(fid), msg->msg_iov, msg->iov_count, msg->addr,
	               msg->tag, msg->data, flags, msg->context, true, false);
}

static ssize_t rdm_tinject(struct fid_ep *fid, const void *buf, size_t len,
                           fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, tag, 0, FI_INJECT, NULL, true,
	               true);
}

static ssize_t rdm_tsenddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                             uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, tag, data,
	               lm_rdm_ctx_of(fid)->tx_flags | FI_REMOTE_CQ_DATA, context, true,
	               false);
}

static ssize_t rdm_tinjectdata(struct fid_ep *fid, const void *buf, size_t len,
                               uint64_t data, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {(void *)buf, len};

	return do_send(lm_rdm_ctx_of(fid), &iov, 1, dest, tag, data,
	               FI_INJECT | FI_REMOTE_CQ_DATA, NULL, true, true);
}

const struct fi_ops_msg lm_rdm_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = lm_rdm_recv,
    .recvv = lm_rdm_recvv,
    .recvmsg = lm_rdm_recvmsg,
    .send = rdm_send,
    .sendv = rdm_sendv,
    .sendmsg = rdm_sendmsg,
    .inject = rdm_inject,
    .senddata = rdm_senddata,
    .injectdata = rdm_injectdata,
};

const struct fi_ops_tagged lm_rdm_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = lm_rdm_trecv,
    .recvv = lm_rdm_trecvv,
    .recvmsg = lm_rdm_trecvmsg,
    .send = rdm_tsend,
    .sendv = rdm_tsendv,
    .sendmsg = rdm_tsendmsg,
    .inject = rdm_tinject,
    .senddata = rdm_tsenddata,
    .injectdata = rdm_tinjectdata,
};

/* A scalable endpoint's transmit context: the sends, and no receives. */
const struct fi_ops_msg lm_rdm_tx_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = lm_msg_no_recv,
    .recvv = lm_msg_no_recvv,
    .recvmsg = lm_msg_no_recvmsg,
    .send = rdm_send,
    .sendv = rdm_sendv,
    .sendmsg = rdm_sendmsg,
    .inject = rdm_inject,
    .senddata = rdm_senddata,
    .injectdata = rdm_injectdata,
};

const struct fi_ops_tagged lm_rdm_tx_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = lm_tagged_no_recv,
    .recvv = lm_tagged_no_recvv,
    .recvmsg = lm_tagged_no_recvmsg,
    .send = rdm_tsend,
    .sendv = rdm_tsendv,
    .sendmsg = rdm_tsendmsg,
    .inject = rdm_tinject,
    .senddata = rdm_tsenddata,
    .injectdata = rdm_tinjectdata,
};

/* ---- triggered sends (trigger.c) ---------------------------------------------- */

/* A send held until its trigger's counter is there: its buffers, or an
 * inject's bytes. */
static ssize_t trig_send(struct lm_rdm_ctx *ctx, const struct iovec *iov, size_t count,
                         fi_addr_t dest, uint64_t tag, uint64_t data, uint64_t flags,
                         void *context, bool tagged, bool inject_call)
{
	struct lm_rdm_trig *tr;
	ssize_t ret;

	ret = lm_rdm_trig_new_iov(ctx, iov, count, inject_call || (flags & FI_INJECT),
	                          lm_rdm_trig_send, &tr);
	if (ret)
		return ret;
	tr->u.msg.addr = dest;
	tr->u.msg.tag = tag;
	tr->u.msg.data = data;
	tr->u.msg.flags = flags & ~FI_TRIGGER;
	tr->u.msg.tagged = tagged;
	tr->u.msg.inject_call = inject_call;
	return lm_rdm_trig_hold(tr, context);
}

ssize_t lm_rdm_trig_send(struct lm_rdm_trig *tr)
{
	return do_send(&tr->ctx, tr->iov, tr->count, tr->u.msg.addr,
	               tr->u.msg.tag, tr->u.msg.data, tr->u.msg.flags, tr->context,
	               tr->u.msg.tagged, tr->u.msg.inject_call);
}
