/* progress.c - the engine's progress: reading the link, requests
 * and their handles, packets waiting for link room, completions of
 * finished operations, and the liveness checks that turn a dead peer into
 * error completions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef LM_HAVE_MEMCHECK
#include <valgrind/memcheck.h>
#endif

#include "rdm.h"

/* Packets one link poll hands over before progress looks at its limits
 * again (poll_link): enough to drain a burst in a few calls, few enough
 * that the unexpected-data limit is not overshot by much. */
#define POLL_BUDGET 64
/* How often peers that requests wait on are checked for death (and how
 * soon a sleeper looks, where the link does not tell of losses): the
 * error completions of a dead peer's operations come within this, and
 * the check (a system call or /proc read per peer on shm) stays rare. */
#define LIVENESS_MS 100
/* How soon a sleeper looks again that waits for room in a peer's queue
 * the link cannot ring it for, or for the peer to acknowledge a held
 * send: the shortest timer there is, since the wait is on a send's
 * latency. */
#define ROOM_MS 1
/* While lm_rdm_linger waits for queued answers to leave: short against
 * the microseconds a live peer takes, long enough not to spin a core. */
#define LINGER_POLL_NS 50000

/* ---- requests ------------------------------------------------------------ */

struct lm_rdm_tx *lm_rdm_tx_alloc(struct lm_rdm_ep *ep)
{
	struct lm_rdm_tx *tx;
	uint32_t slot;

	if (!ep->tx_nfree)
		return NULL;
	slot = ep->tx_free[ep->tx_nfree - 1];
	tx = ep->tx[slot];
	if (__builtin_expect(!tx, 0)) {
		/* A slot's request is made the first time the slot is used
		 * (free slots are a stack: the same few come back): an idle
		 * endpoint holds none, a busy one keeps what it grew to. */
		tx = calloc(1, sizeof(*tx) + ep->inject_size);
		if (!tx)
			return NULL;
		tx->slot = slot;
		tx->gen = 1;
		ep->tx[slot] = tx;
	}
	ep->tx_nfree--;
	tx->state = LM_TX_QUEUED;
	tx->done = 0;
	tx->result = NULL;
	tx->result_len = 0;
	tx->cntr = NULL;
	tx->rep = NULL;
	tx->report = false;
	tx->fence = false;
	lm_list_init(&tx->node);
	return tx;
}

struct lm_rdm_tx *lm_rdm_tx_begin(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                                  fi_addr_t dest, uint64_t flags, void *context,
                                  bool inject_call, ssize_t *err)
{
	struct lm_rdm_peer *peer = lm_rdm_peer_by_fiaddr(ep, dest);
	struct lm_rdm_tx *tx;

	if (!peer) {
		*err = -FI_EINVAL;
		return NULL;
	}
	/* Earlier requests waiting for room go first, so calls stay in order. */
	if (!lm_list_empty(&ep->tx_queue))
		lm_rdm_tx_flush(ep);
	tx = lm_rdm_tx_alloc(ep);
	if (!tx) {
		*err = -FI_EAGAIN;
		return NULL;
	}
	tx->peer = peer;
	tx->context = context;
	tx->report = lm_rdm_tx_reports(rep, flags, inject_call);
	tx->rep = rep;
	tx->fence = flags & FI_FENCE;
	return tx;
}

void lm_rdm_tx_set_iov(struct lm_rdm_tx *tx, const struct iovec *iov, size_t count,
                       size_t len, bool copy)
{
	if (copy) {
		lm_copy_from_iov(tx->inject, iov, count, 0, len);
		tx->iov[0].iov_base = tx->inject;
		tx->iov[0].iov_len = len;
		tx->iov_count = 1;
	} else {
		if (count) /* iov may be NULL then */
			memcpy(tx->iov, iov, count * sizeof(*iov));
		tx->iov_count = count;
	}
}

void lm_rdm_tx_free(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	if (tx->lent) { /* its memory goes back to the application */
		tx->lent = false;
		if (tx->peer->lp)
			ep->link->ops->unlend(ep->link, tx->peer->lp, tx);
	}
	if (tx->state == LM_TX_HELD)
		ep->tx_held--;
	lm_list_remove(&tx->node);
	tx->state = LM_TX_FREE;
	lm_rdm_gen_next(&tx->gen);
	ep->tx_free[ep->tx_nfree++] = tx->slot;
}

struct lm_rdm_tx *lm_rdm_tx_lookup(struct lm_rdm_ep *ep, uint64_t handle,
                                   const struct lm_rdm_peer *from)
{
	uint32_t slot = lm_rdm_handle_slot(handle);
	struct lm_rdm_tx *tx;

	if (slot >= ep->tx_count || !(tx = ep->tx[slot]))
		return NULL;
	/* Only the peer a request went to answers it: a handle sent by
	 * anyone else names nothing. */
	if (!lm_rdm_handle_is(handle, tx->gen) || tx->state == LM_TX_FREE ||
	    tx->peer != from)
		return NULL;
	return tx;
}

/* ---- errors ----------------------------------------------------------------- */

const char *lm_rdm_strerror(struct lm_cq *cq, int prov_errno, const void *err_data)
{
	static _Thread_local char buf[LM_ERR_DATA_MAX + 64];

	(void)cq;
	if (prov_errno != LM_PROV_PEER_GONE || !err_data)
		return NULL;
	snprintf(buf, sizeof(buf), "peer %.*s is gone (exited or unreachable)",
	         LM_ERR_DATA_MAX, (const char *)err_data);
	return buf;
}

/* The error entry for an operation that failed because of its peer: the
 * peer's printable address travels as err_data. */
static void peer_err_data(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, char *buf,
                          size_t *len)
{
	size_t n = *len;

	if (!peer || ep->dom->link_ops->addr_to_str(peer->addr, buf, &n))
		snprintf(buf, *len, "(unknown)");
	buf[*len - 1] = 0;
	*len = strlen(buf) + 1;
}

void lm_rdm_report_tx(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, int err)
{
	err = lm_rdm_peer_err(ep, err);
	struct lm_cq *cq = tx->rep ? tx->rep->cq : NULL;

	if (!tx->cq_flags)
		return; /* the engine's own (a target streaming READ_RESP) */
	if (!err) {
		if (tx->cntr)
			lm_cntr_inc(tx->cntr);
		if (tx->report && cq)
			lm_cq_write(cq, tx->context, tx->cq_flags, 0, NULL, 0, 0,
			            FI_ADDR_NOTAVAIL);
		return;
	}
	if (tx->cntr)
		lm_cntr_inc_err(tx->cntr);
	if (cq) {
		char name[LM_ERR_DATA_MAX];
		size_t nlen = sizeof(name);
		struct fi_cq_err_entry e = {
		    .op_context = tx->context,
		    .flags = tx->cq_flags,
		    .err = err,
		    .prov_errno = err,
		};

		if (err == FI_EIO) {
			peer_err_data(ep, tx->peer, name, &nlen);
			e.prov_errno = LM_PROV_PEER_GONE;
			e.err_data = name;
			e.err_data_size = nlen;
		}
		lm_cq_write_err(cq, &e, FI_ADDR_NOTAVAIL);
	}
}

void lm_rdm_tx_done(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, int err)
{
	lm_rdm_report_tx(ep, tx, err);
	lm_rdm_tx_free(ep, tx);
}

/* ---- sending ---------------------------------------------------------------- */

void lm_rdm_iov_written(const struct iovec *iov, size_t count, size_t off, size_t len)
{
#ifdef LM_HAVE_MEMCHECK
	struct iovec part[LM_IOV_LIMIT];
	size_t n = lm_rdm_iov_slice(iov, LM_MIN(count, (size_t)LM_IOV_LIMIT), off, len, part);

	for (size_t i = 0; i < n; i++)
		VALGRIND_MAKE_MEM_DEFINED(part[i].iov_base, part[i].iov_len);
#else
	(void)iov, (void)count, (void)off, (void)len;
#endif
}

void lm_rdm_rts_from_iov(struct lm_rdm_rts *rts, const struct iovec *iov, size_t count)
{
	rts->iov_count = count;
	for (size_t i = 0; i < count; i++) {
		rts->iov[i].base = (uintptr_t)iov[i].iov_base;
		rts->iov[i].len = iov[i].iov_len;
	}
}

int lm_rdm_rts_parse(struct lm_rdm_rts *rts, const void *payload, size_t plen)
{
	if (plen < sizeof(rts->iov_count))
		return -FI_EINVAL;
	memcpy(&rts->iov_count, payload, sizeof(rts->iov_count));
	if (rts->iov_count > LM_IOV_LIMIT || plen != lm_rdm_rts_len(rts))
		return -FI_EINVAL;
	memcpy(rts->iov, (const char *)payload + sizeof(rts->iov_count),
	       plen - sizeof(rts->iov_count));
	return 0;
}

size_t lm_rdm_rts_iov(const struct lm_rdm_rts *rts, uint64_t size, struct iovec *out)
{
	size_t n = 0;

	out[0].iov_base = NULL; /* a zero-length transfer names one empty piece */
	out[0].iov_len = 0;
	for (size_t i = 0; i < rts->iov_count && size; i++) {
		size_t take = LM_MIN(size, rts->iov[i].len);

		out[n].iov_base = (void *)(uintptr_t)rts->iov[i].base;
		out[n++].iov_len = take;
		size -= take;
	}
	return size ? 0 : n ? n : 1;
}

/* The link reported peer gone: outstanding requests fail at the next
 * liveness check, after which a link that can will try it afresh. */
static void peer_mark_dead(struct lm_rdm_ep *ep, struct lm_rdm_peer *p)
{
	if (p->dead)
		return;
	p->dead = true;
	if (ep->link->ops->peer_reset) {
		lm_list_push_back(&ep->revive, &p->revive);
		ep->last_check_ms = 0; /* look soon */
		lm_rdm_busy(ep);
	}
}

void lm_rdm_lost(void *arg, const void *src_addr)
{
	struct lm_rdm_ep *ep = arg;
	struct lm_rdm_peer *p = lm_rdm_peer_find(ep, src_addr);

	if (!p)
		return;
	/* The rest of that payload will not come: its receive fails with
	 * the peer's other operations, and what arrives next on a new
	 * connection is a new message. */
	if (p->eager) {
		lm_rdm_rndv_unplaced(ep, p->eager);
		p->eager = NULL;
	}
	if (ep->connected && p == ep->msg_peer) {
		/* The connection is over: no afresh for it (conn_end). */
		p->dead = true;
		if (!ep->conn_err)
			ep->conn_err = FI_ENOTCONN;
		lm_rdm_busy(ep);
		return;
	}
	peer_mark_dead(ep, p);
}

/* Under ep->lock, once the connection of an FI_EP_MSG endpoint has ended:
 * what waited on the peer fails, once; a receive fails whenever one is
 * posted (what the peer sent before it went was matched first, and the
 * unexpected messages it left still match the receives posted after). */
static void conn_end(struct lm_rdm_ep *ep)
{
	struct lm_rx_entry *e;

	if (!ep->conn_failed && ep->msg_peer) {
		ep->conn_failed = true;
		ep->msg_peer->dead = true;
		lm_rdm_fail_peer(ep, ep->msg_peer, ep->conn_err);
	}
	/* A shared receive context's receives serve its other endpoints. */
	if (ep->rxc->shared)
		return;
	for (struct lm_match *m = &ep->rxc->msg; m; m = m == &ep->rxc->msg ? &ep->rxc->tagged : NULL)
		while ((e = lm_match_pop_posted(m)))
			lm_rdm_rx_end(ep, lm_container_of(e, struct lm_rdm_rx, e), ep->conn_err);
}

/* The link had no room for peer: remember it for want_room. */
static void room_wanted(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer)
{
	unsigned i;

	for (i = 0; i < ep->room_count; i++)
		if (ep->room_peer[i] == peer)
			return;
	if (ep->room_count < LM_ARRAY_SIZE(ep->room_peer))
		ep->room_peer[ep->room_count++] = peer;
	else
		ep->room_other = true;
}

static ssize_t link_send(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                         const struct lm_rdm_hdr *h, const struct iovec *iov, size_t n)
{
	ssize_t ret;

	if (peer->dead)
		return -FI_EIO;
	ret = ep->link->ops->send(ep->link, peer->lp, h, iov, n);
	if (ret == -FI_EIO)
		peer_mark_dead(ep, peer);
	else if (ret == -FI_EAGAIN)
		room_wanted(ep, peer);
	return ret;
}

/* Pieces one progress call may stream for one transfer: a large transfer
 * must not hold a progress call (and the packets queued behind it) for as
 * long as a fast receiver keeps taking data.  64 pieces are 12 MiB of
 * tcp frames: a call still moves enough to keep a stream busy. */
#define LM_STREAM_BUDGET 64
/* Pieces handed to a link's send_many at once: with tcp's 192 KiB frames,
 * over a megabyte per system call, where loopback streams were about
 * twice as fast as with one frame per call. */
#define LM_STREAM_BATCH 8

/* As link_send, for a batch: how many packets the link took. */
static ssize_t link_send_many(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                              const struct lm_link_pkt *pkts, size_t n)
{
	ssize_t ret;

	if (n == 1) {
		ret = link_send(ep, peer, pkts[0].hdr, pkts[0].iov, pkts[0].iov_count);
		return ret ? ret : 1;
	}
	if (peer->dead)
		return -FI_EIO;
	ret = ep->link->ops->send_many(ep->link, peer->lp, pkts, n);
	if (ret == -FI_EIO)
		peer_mark_dead(ep, peer);
	else if (ret == -FI_EAGAIN)
		room_wanted(ep, peer);
	return ret;
}

/* The packets of a streamed transfer (rendezvous DATA, RMA WRITE): as many
 * pieces as the link takes, up to the budget, in batches when the link
 * takes them so.  0 when all are out, -FI_EAGAIN when more remain. */
static ssize_t tx_stream(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	size_t piece = ep->link->max_payload;
	size_t batch = ep->link->ops->send_many ? LM_STREAM_BATCH : 1;
	size_t budget = LM_STREAM_BUDGET;
	/* A transfer's memory is the application's until tx completes, on
	 * the peer's answer to all of it (lm_rdm_tx_free gets it back); a
	 * read's answer completes once it is out. */
	bool lend = ep->link->ops->unlend && tx->op != LM_OP_READ_RESP;
	struct lm_rdm_hdr h[LM_STREAM_BATCH];
	struct iovec iov[LM_STREAM_BATCH][LM_IOV_LIMIT];
	struct lm_link_pkt pkt[LM_STREAM_BATCH];

	/* A transfer of 0 bytes still sends one packet. */
	do {
		size_t n = 0, off = tx->done;
		ssize_t ret;

		if (!budget) {
			ep->room_other = true; /* more to send, not for want of room */
			return -FI_EAGAIN;
		}
		do {
			size_t len = LM_MIN(piece, tx->len - off);

			h[n] = tx->hdr;
			h[n].len = (uint32_t)len;
			if (tx->op == LM_OP_DATA) {
				h[n].addr = off;
			} else {
				h[n].addr = tx->hdr.addr + off;
				if (off + len == tx->len)
					h[n].flags |= LM_HF_LAST;
			}
			pkt[n].hdr = &h[n];
			pkt[n].iov = iov[n];
			pkt[n].iov_count =
			    lm_rdm_iov_slice(tx->iov, tx->iov_count, off, len, iov[n]);
			pkt[n].lent_by = lend ? tx : NULL;
			off += len;
		} while (++n < batch && n < budget && off < tx->len);
		ret = link_send_many(ep, tx->peer, pkt, n);
		if (ret < 0)
			return ret;
		tx->lent |= lend;
		for (ssize_t i = 0; i < ret; i++)
			tx->done += h[i].len;
		budget -= (size_t)ret;
		if ((size_t)ret < n) {
			room_wanted(ep, tx->peer);
			return -FI_EAGAIN;
		}
	} while (tx->done < tx->len);
	return 0;
}

/* The first piece of tx's message, to go with its RTS (LM_HF_EARLY) after
 * the list of rts_len bytes, in at most LM_IOV_LIMIT - 1 pieces of iov:
 * the whole message when the packet holds it, else whole pages, so that
 * the DATA pieces after it start where the buffer's pages do, as they
 * would without the piece (pieces off a page boundary made an Open MPI
 * 1 MiB ping-pong over tcp markedly slower: docs/PERFORMANCE.md,
 * Findings).  Returns the pieces. */
static size_t rts_early(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, size_t rts_len,
                        struct iovec *iov)
{
	struct iovec piece[LM_IOV_LIMIT];
	size_t room = ep->link->max_payload - rts_len;
	size_t len = tx->len <= room ? tx->len : room & ~(LM_PAGE_SIZE - 1);
	size_t n = lm_rdm_iov_slice(tx->iov, tx->iov_count, 0, len, piece);

	if (n > LM_IOV_LIMIT - 1) {
		/* What the first pieces hold, in whole pages. */
		len = lm_iov_len(piece, LM_IOV_LIMIT - 1) & ~(LM_PAGE_SIZE - 1);
		n = lm_rdm_iov_slice(tx->iov, tx->iov_count, 0, len, piece);
	}
	memcpy(iov, piece, n * sizeof(*iov));
	tx->hdr.addr = rts_len;
	return n;
}

/* Push tx's packets.  0: everything handed to the link (the request then
 * waits for its answer or is complete). */
static ssize_t tx_push(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	struct iovec iov[LM_IOV_LIMIT];

	switch (tx->state == LM_TX_STREAM ? LM_OP_DATA : tx->op) {
	case LM_OP_DATA:
	case LM_OP_WRITE:
		return tx_stream(ep, tx);
	case LM_OP_RTS:
	case LM_OP_READ_REQ: {
		struct lm_rdm_rts rts;
		size_t n = 1;

		lm_rdm_rts_from_iov(&rts, tx->iov, tx->iov_count);
		iov[0].iov_base = &rts;
		iov[0].iov_len = lm_rdm_rts_len(&rts);
		if (tx->op == LM_OP_RTS && (tx->hdr.flags & LM_HF_EARLY))
			n += rts_early(ep, tx, iov[0].iov_len, iov + 1);
		tx->hdr.len = (uint32_t)lm_iov_len(iov, n);
		return link_send(ep, tx->peer, &tx->hdr, iov, n);
	}
	default:
		return link_send(ep, tx->peer, &tx->hdr, tx->iov, tx->iov_count);
	}
}

void lm_rdm_tx_hold(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, uint64_t mark)
{
	tx->mark = mark;
	tx->state = LM_TX_HELD;
	ep->tx_held++;
	lm_list_push_back(&ep->tx_wait, &tx->node);
	lm_rdm_busy(ep);
}

bool lm_rdm_tx_park_held(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	uint64_t mark = lm_rdm_hold_mark(ep, tx->peer);

	if (mark)
		lm_rdm_tx_hold(ep, tx, mark);
	return mark != 0;
}

/* Held eager sends the link has delivered since are complete, in the
 * order they were sent: up to the first still held.  One the link had
 * delivered before its peer died is complete too; the others to a dead
 * peer are the liveness check's to fail. */
static void held_done(struct lm_rdm_ep *ep)
{
	struct lm_list *it, *tmp;

	lm_list_foreach_safe(&ep->tx_wait, it, tmp)
	{
		struct lm_rdm_tx *tx = lm_container_of(it, struct lm_rdm_tx, node);

		if (tx->state != LM_TX_HELD)
			continue;
		if (!tx->peer->lp ||
		    !ep->link->ops->delivered(ep->link, tx->peer->lp, tx->mark, true))
			return;
		lm_rdm_tx_done(ep, tx, 0);
	}
}

/* After the last packet went out: eager sends without an acknowledgement
 * are complete once the link holds none of it; everything else waits for
 * its answer. */
static void tx_sent(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	lm_list_remove(&tx->node);
	if ((tx->op == LM_OP_EAGER && !(tx->hdr.flags & LM_HF_ACK)) ||
	    tx->op == LM_OP_READ_RESP) {
		if (tx->op == LM_OP_READ_RESP || !lm_rdm_tx_park_held(ep, tx))
			lm_rdm_tx_done(ep, tx, 0);
		return;
	}
	tx->state = LM_TX_WAIT;
	lm_list_push_back(&ep->tx_wait, &tx->node);
	lm_rdm_busy(ep);
}

bool lm_rdm_peer_quiet(struct lm_rdm_ep *ep, const struct lm_rdm_peer *peer)
{
	struct lm_list *lists[] = {&ep->tx_wait, &ep->tx_queue}, *it;

	for (size_t i = 0; i < 2; i++)
		lm_list_foreach(lists[i], it)
		{
			if (lm_container_of(it, struct lm_rdm_tx, node)->peer == peer)
				return false;
		}
	return true;
}

/* A fenced request waits while an earlier one to the same peer is
 * unfinished: waiting for its answer, or streaming the data a CTS asked
 * for (such streams rejoin the queue at its back, behind the fence).
 * Requests queued before it are ahead of it anyway. */
static bool fence_holds(struct lm_rdm_ep *ep, const struct lm_rdm_tx *tx)
{
	struct lm_list *it;

	if (!tx->fence)
		return false;
	lm_list_foreach(&ep->tx_wait, it)
	{
		if (lm_container_of(it, struct lm_rdm_tx, node)->peer == tx->peer)
			return true;
	}
	lm_list_foreach(&ep->tx_queue, it)
	{
		const struct lm_rdm_tx *o = lm_container_of(it, struct lm_rdm_tx, node);

		if (o != tx && o->peer == tx->peer && o->op == LM_OP_DATA)
			return true;
	}
	return false;
}

ssize_t lm_rdm_tx_start(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx)
{
	ssize_t ret;

	if (tx->op == LM_OP_WRITE)
		tx->state = LM_TX_STREAM;
	lm_list_push_back(&ep->tx_queue, &tx->node);
	lm_rdm_busy(ep);
	if (ep->tx_queue.next != &tx->node || fence_holds(ep, tx))
		return 0; /* behind earlier packets or a fence: keep the order */
	ret = tx_push(ep, tx);
	if (!ret || tx->done)
		tx->fence = false;
	if (!ret)
		tx_sent(ep, tx);
	else if (ret != -FI_EAGAIN)
		lm_rdm_tx_done(ep, tx, ret == -FI_EIO ? FI_EIO : (int)-ret);
	return 0;
}

void lm_rdm_tx_flush(struct lm_rdm_ep *ep)
{
	struct lm_list *it, *tmp;
	bool held = false; /* behind a held fence only earlier streams move */

	lm_list_foreach_safe(&ep->tx_queue, it, tmp)
	{
		struct lm_rdm_tx *tx = lm_container_of(it, struct lm_rdm_tx, node);
		ssize_t ret;

		/* FI_FENCE orders the operations posted after the fenced one
		 * too; the data of earlier ones must still flow. */
		if (held && tx->op != LM_OP_DATA)
			continue;
		if (!held && fence_holds(ep, tx)) {
			held = true;
			continue;
		}
		ret = tx_push(ep, tx);
		if (!ret || tx->done)
			tx->fence = false; /* under way: the fence is behind it */
		if (ret == -FI_EAGAIN)
			return;
		if (ret)
			lm_rdm_tx_done(ep, tx, ret == -FI_EIO ? FI_EIO : (int)-ret);
		else
			tx_sent(ep, tx);
	}
}

void lm_rdm_ctl_send(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *hdr, const void *payload, size_t len)
{
	struct lm_rdm_ctl *c;
	struct iovec iov = {(void *)payload, len};
	struct lm_rdm_hdr h = *hdr;

	h.len = (uint32_t)len;
	if (lm_list_empty(&ep->ctl_queue)) {
		ssize_t ret = link_send(ep, peer, &h, &iov, len ? 1 : 0);

		if (ret != -FI_EAGAIN)
			return; /* sent, or the peer is gone and wants no answer */
	}
	c = lm_bufpool_alloc(&ep->ctl_pool);
	if (!c)
		return; /* the peer's request times out through liveness */
	c->peer = peer;
	c->hdr = h;
	c->big = NULL;
	if (len > sizeof(c->small)) {
		c->big = malloc(len);
		if (!c->big) {
			lm_bufpool_free(&ep->ctl_pool, c);
			return;
		}
		memcpy(c->big, payload, len);
	} else if (len) {
		memcpy(c->small, payload, len);
	}
	lm_list_push_back(&ep->ctl_queue, &c->node);
	lm_rdm_busy(ep);
}

void lm_rdm_credit_return(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer)
{
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION, .op = LM_OP_CREDIT};

	h.size = peer->owed;
	peer->owed = 0;
	lm_rdm_ctl_send(ep, peer, &h, NULL, 0);
}

static void ctl_queue_flush(struct lm_rdm_ep *ep)
{
	struct lm_list *it;

	while ((it = lm_list_front(&ep->ctl_queue))) {
		struct lm_rdm_ctl *c = lm_container_of(it, struct lm_rdm_ctl, node);
		struct iovec iov = {c->big ? c->big : c->small, c->hdr.len};
		ssize_t ret = link_send(ep, c->peer, &c->hdr, &iov, c->hdr.len ? 1 : 0);

		if (ret == -FI_EAGAIN)
			return;
		lm_list_remove(&c->node);
		free(c->big);
		lm_bufpool_free(&ep->ctl_pool, c);
	}
}

/* ---- answers to our requests -------------------------------------------- */

void lm_rdm_on_cts(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                   const struct lm_rdm_hdr *h)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_awaiting(ep, h->sreq, peer, LM_OP_RTS);

	if (!tx)
		return;
	lm_list_remove(&tx->node);
	tx->state = LM_TX_STREAM;
	if (tx->hdr.flags & LM_HF_EARLY) /* from 0: no receive took the piece */
		peer->early_score = h->addr ? 0 : -LM_EARLY_BACKOFF;
	/* From where the receiver asks: what came with the RTS is in. */
	tx->done = h->addr < tx->len ? h->addr : 0;
	tx->hdr.flags &= (uint16_t)~LM_HF_EARLY;
	tx->hdr.op = LM_OP_DATA;
	tx->hdr.rreq = h->rreq;
	tx->op = LM_OP_DATA;
	lm_list_push_back(&ep->tx_queue, &tx->node);
	lm_rdm_busy(ep);
	lm_rdm_tx_flush(ep);
}

void lm_rdm_on_fin(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                   const struct lm_rdm_hdr *h)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_lookup(ep, h->sreq, peer);
	int err = h->rreq > 0 && h->rreq < 0x10000 ? (int)h->rreq : 0;

	if (!tx || (tx->op != LM_OP_RTS && tx->op != LM_OP_DATA &&
	            tx->op != LM_OP_EAGER && tx->op != LM_OP_READ_REQ))
		return;

	/* A read's target may have written the data straight into ours. */
	if (tx->op == LM_OP_READ_REQ && !err)
		lm_rdm_iov_written(tx->iov, tx->iov_count, 0, tx->len);
	/* A FIN may overtake nothing but may arrive while DATA is still
	 * queued (the receiver gave up): drop the rest. */
	lm_rdm_tx_done(ep, tx, err);
}

/* ---- liveness ----------------------------------------------------------------- */

static bool peer_gone(struct lm_rdm_ep *ep, struct lm_rdm_peer *p)
{
	if (!p->dead && ep->link->ops->peer_alive &&
	    !ep->link->ops->peer_alive(ep->link, p->lp))
		peer_mark_dead(ep, p);
	return p->dead;
}

/* Requests of list (tx_wait or tx_queue) to dead peers end with FI_EIO. */
static void fail_gone_tx(struct lm_rdm_ep *ep, struct lm_list *list)
{
	struct lm_list *it, *tmp;

	lm_list_foreach_safe(list, it, tmp)
	{
		struct lm_rdm_tx *tx = lm_container_of(it, struct lm_rdm_tx, node);

		if (peer_gone(ep, tx->peer))
			lm_rdm_tx_done(ep, tx, FI_EIO);
	}
}

void lm_rdm_fail_peer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, int err)
{
	struct lm_list *lists[] = {&ep->tx_wait, &ep->tx_queue};
	struct lm_list *it, *tmp;

	for (size_t i = 0; i < 2; i++)
		lm_list_foreach_safe(lists[i], it, tmp)
		{
			struct lm_rdm_tx *tx =
			    lm_container_of(it, struct lm_rdm_tx, node);

			if (tx->peer == peer)
				lm_rdm_tx_done(ep, tx, err);
		}
	lm_list_foreach_safe(&ep->rndv_active, it, tmp)
	{
		struct lm_rdm_rndv *r = lm_container_of(it, struct lm_rdm_rndv, node);

		if (r->peer == peer)
			lm_rdm_rndv_fail(ep, r, err);
	}
	lm_list_foreach_safe(&ep->ctl_queue, it, tmp)
	{
		struct lm_rdm_ctl *c = lm_container_of(it, struct lm_rdm_ctl, node);

		if (c->peer == peer) {
			lm_list_remove(&c->node);
			free(c->big);
			lm_bufpool_free(&ep->ctl_pool, c);
		}
	}
}

static void poll_link(struct lm_rdm_ep *ep, size_t max);

/* Is any peer that something waits on gone?  (peer_gone marks it dead.) */
static bool any_gone(struct lm_rdm_ep *ep)
{
	struct lm_list *lists[] = {&ep->tx_wait, &ep->tx_queue};
	struct lm_list *it;
	bool gone = false;

	for (size_t i = 0; i < LM_ARRAY_SIZE(lists); i++)
		lm_list_foreach(lists[i], it)
			gone |= peer_gone(ep, lm_container_of(it, struct lm_rdm_tx, node)->peer);
	lm_list_foreach(&ep->rndv_active, it)
		gone |= peer_gone(ep, lm_container_of(it, struct lm_rdm_rndv, node)->peer);
	lm_list_foreach(&ep->ctl_queue, it)
		gone |= peer_gone(ep, lm_container_of(it, struct lm_rdm_ctl, node)->peer);
	return gone;
}

/* p's requests failed: its link peer starts afresh (a send reconnects,
 * or fails again). */
static void peer_reset_now(struct lm_rdm_ep *ep, struct lm_rdm_peer *p)
{
	ep->link->ops->peer_reset(ep->link, p->lp);
	lm_rdm_peer_revive(p);
}

static void check_peers(struct lm_rdm_ep *ep)
{
	struct lm_list *it, *tmp;
	uint64_t now = lm_now_coarse_ms();

	if (now - ep->last_check_ms < LIVENESS_MS)
		return;
	ep->last_check_ms = now;
	/* What a peer sent before it went is in the link: read its death
	 * first, then the link, then fail what still waits on it.  The other
	 * order fails a send whose ACK the peer wrote just before closing. */
	if (any_gone(ep))
		poll_link(ep, ep->rxc->unexp_max);
	fail_gone_tx(ep, &ep->tx_wait);
	fail_gone_tx(ep, &ep->tx_queue);
	lm_list_foreach_safe(&ep->rndv_active, it, tmp)
	{
		struct lm_rdm_rndv *r = lm_container_of(it, struct lm_rdm_rndv, node);

		if (peer_gone(ep, r->peer))
			lm_rdm_rndv_fail(ep, r, FI_EIO);
	}
	lm_list_foreach_safe(&ep->ctl_queue, it, tmp)
	{
		struct lm_rdm_ctl *c = lm_container_of(it, struct lm_rdm_ctl, node);

		if (peer_gone(ep, c->peer)) {
			lm_list_remove(&c->node);
			free(c->big);
			lm_bufpool_free(&ep->ctl_pool, c);
		}
	}
	/* Everything with the dead peers failed above. */
	while ((it = lm_list_pop_front(&ep->revive)))
		peer_reset_now(ep, lm_container_of(it, struct lm_rdm_peer, revive));
}

void lm_rdm_peer_afresh(struct lm_rdm_ep *ep, struct lm_rdm_peer *p, uint64_t gen)
{
	const struct lm_link_ops *ops = ep->link->ops;

	p->fresh_gen = (uint32_t)gen;
	if (!ops->peer_reset || !ops->peer_alive || !p->lp || ep->connected)
		return;
	if (!p->dead && ops->peer_alive(ep->link, p->lp))
		return;
	/* As the next liveness check would, for this peer alone and without
	 * reading the link (a packet of the link may be what asks). */
	if (p->dead)
		lm_list_remove(&p->revive);
	p->dead = true;
	lm_rdm_fail_peer(ep, p, FI_EIO);
	peer_reset_now(ep, p);
}

/* Read the link while less than max bytes of unexpected data are held
 * (raised by what conforming peers may hold: their eager credit each, so
 * reading on stays bounded, and stopping could hide what a posted receive
 * waits for; the limit binds peers that ignore their credit). */
static LM_HOT_INLINE void poll_link(struct lm_rdm_ep *ep, size_t max)
{
	struct lm_link *link = ep->link;
	int n;

	if (ep->npeers <= (SIZE_MAX - max) / LM_EAGER_CREDIT)
		max += ep->npeers * LM_EAGER_CREDIT;
	else
		max = SIZE_MAX;
	/* A scalable endpoint's receive contexts count in its own. */
	if (ep->rxc->unexp_bytes < max) {
		do {
			n = link->ops->poll(link, POLL_BUDGET);
		} while (n == POLL_BUDGET && ep->rxc->unexp_bytes < max);
	}
}

void lm_rdm_progress_locked(struct lm_rdm_ep *ep)
{
	size_t max = ep->rxc->unexp_max;

	ep->room_count = 0;
	ep->room_other = false;
	if (!lm_list_empty(&ep->ctl_queue))
		ctl_queue_flush(ep);
	if (!lm_list_empty(&ep->tx_queue))
		lm_rdm_tx_flush(ep);
	/* Holding as much unexpected data as allowed: leave the rest in the
	 * link until receives are posted (the senders see backpressure).
	 * While this endpoint waits for rendezvous data or answers, which
	 * may be queued behind that data, it reads on into a reserve of as
	 * much again, so that receives already matched can finish. */
	if (!lm_list_empty(&ep->rndv_active) || !lm_list_empty(&ep->tx_wait))
		max = max > SIZE_MAX / 2 ? SIZE_MAX : 2 * max;
	poll_link(ep, max);
	if (ep->tx_held)
		held_done(ep);
	if (ep->conn_err)
		conn_end(ep);
	if (!lm_list_empty(&ep->ctl_queue))
		ctl_queue_flush(ep);
	if (!lm_list_empty(&ep->tx_queue))
		lm_rdm_tx_flush(ep);
	if (!lm_list_empty(&ep->tx_wait) || !lm_list_empty(&ep->tx_queue) ||
	    !lm_list_empty(&ep->rndv_active) || !lm_list_empty(&ep->ctl_queue) ||
	    !lm_list_empty(&ep->revive))
		check_peers(ep);
}

/* About to sleep with packets queued: true when every peer that had no
 * room will ring when it has (want_room), so only liveness needs a timer. */
static bool room_asked(struct lm_rdm_ep *ep)
{
	unsigned i;

	if (!ep->link->ops->want_room || !ep->room_count || ep->room_other)
		return false;
	for (i = 0; i < ep->room_count; i++)
		if (ep->link->ops->want_room(ep->link, ep->room_peer[i]->lp))
			return false;
	return true;
}

/* About to sleep: how soon to look again by itself, 0 for no sooner
 * than something rings.  Nobody rings when the peer acknowledges a held
 * send (unless the link tells it), nor for freed room unless the link can ask, nor for a peer's
 * death unless the link tells it. */
static int wake_ms(struct lm_rdm_ep *ep)
{
	int liveness = ep->link->caps & LM_LINK_TELLS_LOSS ? 0 : LIVENESS_MS;

	if (ep->tx_held && !(ep->link->caps & LM_LINK_TELLS_DELIVERY))
		return ROOM_MS;
	if (!lm_list_empty(&ep->tx_queue) || !lm_list_empty(&ep->ctl_queue))
		return room_asked(ep) ? liveness : ROOM_MS;
	if (!lm_list_empty(&ep->tx_wait) || !lm_list_empty(&ep->rndv_active))
		return liveness;
	return 0;
}

/* Is a reader of h's CQ or counter asleep, or promised a wake-up? */
static bool hook_sleepy(const struct lm_rdm_hook *h)
{
	return h->cq ? atomic_load(&h->cq->sleepers) || atomic_load(&h->cq->armed)
	             : atomic_load(&h->cntr->sleepers) || atomic_load(&h->cntr->armed);
}

/* Under ep->lock, while armed: does a reader of another of ep's CQs or
 * counters still sleep?  Then the link stays armed for it, whoever
 * polls meanwhile. */
static bool others_sleepy(const struct lm_rdm_ep *ep)
{
	if (ep->auto_on) /* its domain's progress thread sleeps on it */
		return true;
	for (size_t i = 0; i < ep->nhooks; i++)
		if (hook_sleepy(&ep->hooks[i]))
			return true;
	for (size_t i = 0; i < ep->nshooks; i++) /* a scalable endpoint's */
		if (hook_sleepy(ep->shooks[i]))
			return true;
	return false;
}

static LM_HOT_INLINE void progress_once(struct lm_rdm_ep *ep, bool sleepy)
{
	bool quiet = !sleepy && atomic_load_explicit(&ep->quiet, memory_order_relaxed);
	bool tell = false;

	/* The common poll with nothing in flight and nothing arrived. */
	if (quiet && ep->link && ep->link->ops->idle && ep->link->ops->idle(ep->link))
		return;
	lm_lock_acquire(ep->lock);
	/* Nothing queued, awaited or armed (quiet, read again under the
	 * lock): only the link to read, and done unless what came queued
	 * something (which clears quiet). */
	if (quiet && ep->enabled && atomic_load_explicit(&ep->quiet, memory_order_relaxed)) {
		ep->room_count = 0;
		ep->room_other = false;
		poll_link(ep, ep->rxc->unexp_max);
		if (atomic_load_explicit(&ep->quiet, memory_order_relaxed)) {
			lm_lock_release(ep->lock);
			return;
		}
	}
	if (ep->enabled) {
		sleepy = sleepy || (ep->armed && others_sleepy(ep));
		lm_rdm_progress_locked(ep);
		/* A reader is about to sleep on the doorbell: ask senders to
		 * ring it, then look once more for what raced with arming. */
		if (sleepy && ep->link->ops->arm) {
			/* Re-armed on every pass: a ring consumes the arming. */
			ep->link->ops->arm(ep->link);
			ep->armed = true;
			lm_rdm_progress_locked(ep);
			int ms = ep->link->ops->wake_after ? wake_ms(ep) : 0;

			if (ms)
				ep->link->ops->wake_after(ep->link, ms);
		} else if (ep->armed) {
			ep->link->ops->disarm(ep->link);
			ep->armed = false;
		}
		atomic_store_explicit(
		    &ep->quiet,
		    !ep->armed && lm_list_empty(&ep->tx_queue) &&
		        lm_list_empty(&ep->tx_wait) && lm_list_empty(&ep->rndv_active) &&
		        lm_list_empty(&ep->ctl_queue) && lm_list_empty(&ep->revive) &&
		        !ep->conn_err,
		    memory_order_relaxed);
		if (ep->conn_err && !ep->conn_told) {
			ep->conn_told = true;
			tell = ep->ext && ep->ext->lost;
		}
	}
	lm_lock_release(ep->lock);
	if (tell)
		ep->ext->lost(ep);
}

static LM_HOT_INLINE void progress(struct lm_rdm_ep *ep, bool sleepy)
{
	progress_once(ep, sleepy);
	/* What the counters released (FI_TRIGGER), outside the lock. */
	if (__builtin_expect(atomic_load_explicit(&ep->dom->util.ntrig, memory_order_relaxed),
	                     0))
		lm_rdm_triggers_run(ep);
}

/* A sender told "delivered" must not lose the message to our close: a
 * peer that is alive and polls takes its answers within microseconds, a
 * dead one has them dropped by the liveness check. */
#define LINGER_MS 2000

void lm_rdm_linger(struct lm_rdm_ep *ep)
{
	uint64_t end = lm_now_ms() + LINGER_MS;

	if (!ep->enabled || !ep->link)
		return;
	lm_lock_acquire(ep->lock);
	while (!lm_list_empty(&ep->ctl_queue) && lm_now_ms() < end) {
		lm_rdm_progress_locked(ep);
		if (!lm_list_empty(&ep->ctl_queue))
			nanosleep(&(struct timespec){.tv_nsec = LINGER_POLL_NS}, NULL);
	}
	lm_lock_release(ep->lock);
}

void lm_rdm_progress(struct lm_rdm_ep *ep, bool sleepy)
{
	progress(ep, sleepy);
}

/* A CQ's or counter's progress hook (one per endpoint bound): sleepy when
 * a reader of it sleeps or fi_trywait promised to wake one. */
void lm_rdm_hook_run(struct lm_progress *p)
{
	struct lm_rdm_hook *h = lm_container_of(p, struct lm_rdm_hook, p);

	progress(h->ep, hook_sleepy(h));
}
