/* rma.c - fi_read / fi_write over the engine: the initiator's calls, and
 * the target's side (key/bounds/access check, then inline copy, bulk copy
 * or the message rendezvous' CTS/DATA stream; reads answered by bulk write
 * or streamed READ_RESP packets).  Protocol: rdm.h. */
#include <stdlib.h>
#include <string.h>

#include "rdm.h"

/* ---- target side ------------------------------------------------------- */

static void answer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, uint8_t op,
                   uint64_t sreq, int status)
{
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION,
	                       .op = op,
	                       .sreq = sreq,
	                       .rreq = (uint64_t)status};

	lm_rdm_ctl_send(ep, peer, &h, NULL, 0);
}

void lm_rdm_remote_event(struct lm_rdm_ep *ep, uint64_t key, uint64_t access)
{
	struct lm_cntr *const *cntr = ep->lane_rxc ? ep->lane_rxc->rep.cntr : ep->cntr;
	struct lm_cntr *c =
	    cntr[access == FI_REMOTE_READ ? LM_CNTR_RREAD : LM_CNTR_RWRITE];

	if (c)
		lm_cntr_inc(c);
	if (ep->caps & FI_RMA_EVENT)
		lm_mr_remote_event(&ep->dom->util, key, access);
}

void lm_rdm_rma_target_event(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, bool write,
                             uint64_t key, uint16_t hflags, uint64_t data, size_t len)
{
	struct lm_cq *cq;

	lm_rdm_remote_event(ep, key, write ? FI_REMOTE_WRITE : FI_REMOTE_READ);
	/* Remote CQ data is reported without consuming a posted receive: loom
	 * never asks for the FI_RX_CQ_DATA mode (man fi_getinfo, fi_cq). */
	if (!write || !(hflags & LM_HF_CQ_DATA))
		return;
	cq = ep->lane_rxc ? ep->lane_rxc->rep.cq : ep->rx_cq;
	if (cq)
		lm_cq_write(cq, NULL, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, len,
		            NULL, data, 0, lm_rdm_peer_fiaddr(ep, peer));
}

void lm_rdm_rma_rndv_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err)
{
	if (!err)
		lm_rdm_rma_target_event(ep, r->peer, true, r->key, r->hflags,
		                        r->data, r->size);
}

/* The initiator's buffers named by an iov-list payload, cut to size bytes.
 * Returns the count, or 0 when the payload is malformed or too short. */
static size_t remote_iov(const void *payload, size_t plen, uint64_t size,
                         struct iovec *out)
{
	struct lm_rdm_rts rts;

	if (lm_rdm_rts_parse(&rts, payload, plen))
		return 0;
	return lm_rdm_rts_iov(&rts, size, out);
}

static int verify(struct lm_rdm_ep *ep, const struct lm_rdm_hdr *h, uint64_t access,
                  struct iovec *iov, size_t *n)
{
	*n = LM_IOV_LIMIT;
	return lm_mr_verify_iov(&ep->dom->util, h->key, h->addr, h->size, access, iov, n);
}

static void on_write(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct iovec iov[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
	size_t n, rn;
	int ret;

	if (!(h->flags & LM_HF_RNDV)) {
		ret = plen == h->size ? verify(ep, h, FI_REMOTE_WRITE, iov, &n)
		                      : -FI_EINVAL;
		if (!ret) {
			lm_copy_to_iov(iov, n, 0, payload, plen);
			lm_rdm_rma_target_event(ep, peer, true, h->key, h->flags,
			                        h->data, plen);
		}
		answer(ep, peer, LM_OP_WRITE_ACK, h->sreq, -ret);
		return;
	}
	rn = remote_iov(payload, plen, h->size, remote);
	ret = rn ? verify(ep, h, FI_REMOTE_WRITE, iov, &n) : -FI_EINVAL;
	if (ret) {
		answer(ep, peer, LM_OP_FIN, h->sreq, -ret);
		return;
	}
	if ((h->flags & LM_HF_BULK) && lm_rdm_peer_bulk(ep, peer) && ep->link->ops->bulk_read) {
		struct lm_rdm_rts rts;
		ssize_t got;

		/* Large: the initiator writes the upper part while we read
		 * the lower one (a rendezvous slot holds the write). */
		if ((h->flags & LM_HF_SPLIT) && h->size >= LM_SPLIT_MIN &&
		    !lm_rdm_rts_parse(&rts, payload, plen)) {
			if (!lm_rdm_rndv_write(ep, peer, h, iov, n, &rts))
				answer(ep, peer, LM_OP_FIN, h->sreq, FI_EAGAIN);
			return;
		}
		got = lm_rdm_bulk_read(ep, peer, iov, n, remote, rn);

		if (got == (ssize_t)h->size) {
			lm_rdm_rma_target_event(ep, peer, true, h->key, h->flags,
			                        h->data, h->size);
			answer(ep, peer, LM_OP_FIN, h->sreq, 0);
			return;
		}
		if (got == -FI_EIO)
			return; /* the initiator is gone */
		LM_INFO(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
		        "bulk read failed (%zd); falling back to copies\n", got);
		peer->bulk_broken = true;
	}
	if (!lm_rdm_rndv_write(ep, peer, h, iov, n, NULL))
		answer(ep, peer, LM_OP_FIN, h->sreq, FI_EAGAIN);
}

static void on_read_req(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct iovec iov[LM_IOV_LIMIT], remote[LM_IOV_LIMIT];
	size_t n, rn = remote_iov(payload, plen, h->size, remote);
	int ret = rn ? verify(ep, h, FI_REMOTE_READ, iov, &n) : -FI_EINVAL;
	struct lm_rdm_tx *tx;

	if (ret) {
		answer(ep, peer, LM_OP_FIN, h->sreq, -ret);
		return;
	}
	if (h->size && (h->flags & LM_HF_BULK) && !ep->dom->no_bulk &&
	    (lm_rdm_peer_caps(ep, peer) & LM_LINK_BULK_WRITE) && ep->link->ops->bulk_write &&
	    !peer->bulk_broken) {
		ssize_t got = lm_rdm_bulk_write(ep, peer, iov, n, remote, rn);

		if (got == (ssize_t)h->size) {
			lm_rdm_rma_target_event(ep, peer, false, h->key, 0, 0,
			                        h->size);
			answer(ep, peer, LM_OP_FIN, h->sreq, 0);
			return;
		}
		if (got == -FI_EIO)
			return;
		LM_INFO(ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
		        "bulk write failed (%zd); falling back to copies\n", got);
		peer->bulk_broken = true;
	}
	/* Streamed back by a request of our own, which waits for link room
	 * like any other and never reports a completion (cq_flags 0). */
	tx = lm_rdm_tx_alloc(ep);
	if (!tx) {
		answer(ep, peer, LM_OP_FIN, h->sreq, FI_EAGAIN);
		return;
	}
	tx->peer = peer;
	tx->op = LM_OP_READ_RESP;
	tx->state = LM_TX_STREAM;
	tx->cq_flags = 0;
	tx->context = NULL;
	if (n) /* iov may be NULL then */
		memcpy(tx->iov, iov, n * sizeof(*iov));
	tx->iov_count = n;
	tx->len = h->size;
	memset(&tx->hdr, 0, sizeof(tx->hdr));
	tx->hdr.version = LM_RDM_WIRE_VERSION;
	tx->hdr.op = LM_OP_READ_RESP;
	tx->hdr.sreq = h->sreq;
	tx->hdr.size = h->size;
	lm_rdm_rma_target_event(ep, peer, false, h->key, 0, 0, h->size);
	lm_rdm_tx_start(ep, tx);
}

/* ---- initiator side: answers -------------------------------------------- */

static void on_read_resp(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                         const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_awaiting(ep, h->sreq, peer, LM_OP_READ_REQ);

	if (!tx || h->addr > tx->len || plen > tx->len - h->addr)
		return;
	lm_copy_to_iov(tx->iov, tx->iov_count, h->addr, payload, plen);
	tx->done += plen;
	if (tx->done >= tx->len)
		lm_rdm_tx_done(ep, tx, 0);
}

static void on_write_ack(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                         const struct lm_rdm_hdr *h)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_awaiting(ep, h->sreq, peer, LM_OP_WRITE);

	if (!tx)
		return;
	lm_rdm_tx_done(ep, tx, h->rreq > 0 && h->rreq < 0x10000 ? (int)h->rreq : 0);
}

void lm_rdm_rma_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	switch (h->op) {
	case LM_OP_WRITE:
		on_write(ep, peer, h, payload, plen);
		break;
	case LM_OP_WRITE_ACK:
		on_write_ack(ep, peer, h);
		break;
	case LM_OP_READ_REQ:
		on_read_req(ep, peer, h, payload, plen);
		break;
	case LM_OP_READ_RESP:
		on_read_resp(ep, peer, h, payload, plen);
		break;
	default:
		break;
	}
}

/* ---- initiator side: the calls --------------------------------------------- */

/* An RMA call held until its trigger's counter is there (trigger.c): its
 * buffers, or an inject's bytes. */
static ssize_t trig_rma(struct lm_rdm_ctx *ctx, bool write, const struct iovec *iov,
                        size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                        uint64_t data, uint64_t flags, void *context, bool inject_call)
{
	struct lm_rdm_trig *tr;
	ssize_t ret;

	ret = lm_rdm_trig_new_iov(ctx, iov, count, write && (inject_call || (flags & FI_INJECT)),
	                          lm_rdm_trig_rma, &tr);
	if (ret)
		return ret;
	tr->u.rma.write = write;
	tr->u.rma.addr = addr;
	tr->u.rma.raddr = raddr;
	tr->u.rma.key = key;
	tr->u.rma.data = data;
	tr->u.rma.flags = flags & ~FI_TRIGGER;
	tr->u.rma.inject_call = inject_call;
	return lm_rdm_trig_hold(tr, context);
}

static ssize_t rma_post(struct lm_rdm_ctx *ctx, bool write, const struct iovec *iov,
                        size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                        uint64_t data, uint64_t flags, void *context, bool inject_call)
{
	struct lm_rdm_ep *ep = ctx->ep;
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION, .flags = ep->lane_flags};
	struct lm_rdm_tx *tx;
	size_t len;
	ssize_t ret = 0;

	if (flags & FI_TRIGGER)
		return trig_rma(ctx, write, iov, count, addr, raddr, key, data, flags, context,
		                inject_call);
	ret = lm_rdm_op_enter(ctx, iov, count, flags, &len);
	if (ret)
		return ret;
	if (len > ep->info->ep_attr->max_msg_size ||
	    (write && (flags & FI_INJECT) &&
	     (len > ep->inject_size || len > ep->eager_max))) {
		ret = -FI_EMSGSIZE;
		goto out;
	}
	tx = lm_rdm_tx_begin(ep, ctx->txrep, addr, flags, context, inject_call, &ret);
	if (!tx)
		goto out;
	tx->cntr = ctx->txrep->cntr[write ? LM_CNTR_WRITE : LM_CNTR_READ];
	tx->cq_flags = FI_RMA | (write ? FI_WRITE : FI_READ);
	tx->len = len;
	h.size = len;
	h.addr = raddr;
	h.key = key;
	h.data = data;
	if (write && (flags & FI_REMOTE_CQ_DATA))
		h.flags |= LM_HF_CQ_DATA;
	lm_rdm_tx_set_iov(tx, iov, count, len, write && (flags & FI_INJECT));
	if (!write) {
		tx->op = h.op = LM_OP_READ_REQ;
		if (lm_rdm_peer_bulk(ep, tx->peer))
			h.flags |= LM_HF_BULK;
	} else if (len <= ep->eager_max) {
		tx->op = h.op = LM_OP_WRITE; /* streamed as one packet */
	} else {
		/* Sent like a message's RTS: the target answers FIN, or CTS;
		 * or, split, PUSH for the upper part first. */
		tx->op = LM_OP_RTS;
		h.op = LM_OP_WRITE;
		bool bulk = ep->bulk && (lm_rdm_peer_caps(ep, tx->peer) & LM_LINK_BULK_READ);

		h.flags |= LM_HF_RNDV | (bulk ? LM_HF_BULK : 0);
		if (bulk && len >= LM_SPLIT_MIN && !tx->peer->bulk_broken &&
		    (lm_rdm_peer_caps(ep, tx->peer) & LM_LINK_BULK_WRITE))
			h.flags |= LM_HF_SPLIT;
	}
	ret = lm_rdm_tx_launch(ep, tx, &h);
out:
	lm_lock_release(ep->lock);
	return ret;
}

/* fi_msg_rma: loom's rma_iov_limit is 1, and the local length must fit. */
static ssize_t rma_msg(struct fid_ep *fid, const struct fi_msg_rma *msg, uint64_t flags,
                       bool write)
{
	size_t len;

	if (!msg || msg->iov_count > LM_IOV_LIMIT || (msg->iov_count && !msg->msg_iov) ||
	    msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	if (!lm_iov_valid(msg->msg_iov, msg->iov_count, &len) ||
	    len > msg->rma_iov[0].len)
		return -FI_EINVAL;
	return rma_post(lm_rdm_ctx_of(fid), write, msg->msg_iov, msg->iov_count,
	                msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->data,
	                flags, msg->context, false);
}

static ssize_t rdm_read(struct fid_ep *fid, void *buf, size_t len, void *desc,
                        fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = {buf, len};

	(void)desc;
	return rma_post(lm_rdm_ctx_of(fid), false, &iov, 1, src, addr, key, 0,
	                lm_rdm_ctx_of(fid)->tx_flags, context, false);
}

static ssize_t rdm_readv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                         void *context)
{
	(void)desc;
	return rma_post(lm_rdm_ctx_of(fid), false, iov, count, src, addr, key, 0,
	                lm_rdm_ctx_of(fid)->tx_flags, context, false);
}

static ssize_t rdm_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg,
                           uint64_t flags)
{
	return rma_msg(fid, msg, flags & ~(FI_INJECT | FI_REMOTE_CQ_DATA), false);
}

static ssize_t rdm_write(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                         fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return rma_post(lm_rdm_ctx_of(fid), true, &iov, 1, dest, addr, key, 0,
	                lm_rdm_ctx_of(fid)->tx_flags, context, false);
}

static ssize_t rdm_writev(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                          void *context)
{
	(void)desc;
	return rma_post(lm_rdm_ctx_of(fid), true, iov, count, dest, addr, key, 0,
	                lm_rdm_ctx_of(fid)->tx_flags, context, false);
}

static ssize_t rdm_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg,
                            uint64_t flags)
{
	return rma_msg(fid, msg, flags, true);
}

static ssize_t rdm_inject_write(struct fid_ep *fid, const void *buf, size_t len,
                                fi_addr_t dest, uint64_t addr, uint64_t key)
{
	struct iovec iov = {(void *)buf, len};

	return rma_post(lm_rdm_ctx_of(fid), true, &iov, 1, dest, addr, key, 0, FI_INJECT,
	                NULL, true);
}

static ssize_t rdm_writedata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                             uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                             void *context)
{
	struct iovec iov = {(void *)buf, len};

	(void)desc;
	return rma_post(lm_rdm_ctx_of(fid), true, &iov, 1, dest, addr, key, data,
	                lm_rdm_ctx_of(fid)->tx_flags | FI_REMOTE_CQ_DATA, context, false);
}

static ssize_t rdm_inject_writedata(struct fid_ep *fid, const void *buf, size_t len,
                                    uint64_t data, fi_addr_t dest, uint64_t addr,
                                    uint64_t key)
{
	struct iovec iov = {(void *)buf, len};

	return rma_post(lm_rdm_ctx_of(fid), true, &iov, 1, dest, addr, key, data,
	                FI_INJECT | FI_REMOTE_CQ_DATA, NULL, true);
}

const struct fi_ops_rma lm_rdm_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = rdm_read,
    .readv = rdm_readv,
    .readmsg = rdm_readmsg,
    .write = rdm_write,
    .writev = rdm_writev,
    .writemsg = rdm_writemsg,
    .inject = rdm_inject_write,
    .writedata = rdm_writedata,
    .injectdata = rdm_inject_writedata,
};

ssize_t lm_rdm_trig_rma(struct lm_rdm_trig *tr)
{
	return rma_post(&tr->ctx, tr->u.rma.write, tr->iov, tr->count,
	                tr->u.rma.addr, tr->u.rma.raddr, tr->u.rma.key, tr->u.rma.data,
	                tr->u.rma.flags, tr->context, tr->u.rma.inject_call);
}
