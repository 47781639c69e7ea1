/* tagmatch.h - posted and unexpected receive queues for the RDM engine:
 * source filtering, tag + ignore bits, peek/claim/discard, multi-receive
 * buffers, cancellation, and the CQ entries a match turns into.
 *
 * Layout (one struct lm_match per endpoint receive side and kind):
 *
 *   srcs:  fi_addr -> lm_match_src { posted: rx rx ..   unexp: u u .. }
 *   any:   rx rx rx ...            (FI_ADDR_UNSPEC receives, posting order)
 *   unexp: u u u u ...             (every unclaimed message, arrival order)
 *   claimed: u ...                 (FI_PEEK|FI_CLAIM'ed, waiting for FI_CLAIM)
 *
 * A directed receive sits in its source's posted list, a wildcard one in
 * `any`; both carry a sequence number, so an arrival from A looks only at
 * A's list and at `any` and takes the earliest-posted match of the two.
 * An unexpected message is in the global list (for wildcard receives and
 * peeks) and in its source's list (for directed ones).  Receives from
 * other sources are never looked at.
 *
 * Entries are the caller's (allocated from its own pools) and linked
 * intrusively; the only memory this file manages is the per-source
 * records, from a buffer pool.  Not thread-safe: the engine holds its
 * lock around every call. */
#ifndef LOOM_UTIL_TAGMATCH_H
#define LOOM_UTIL_TAGMATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "bufpool.h"
#include "hash.h"
#include "iov.h"
#include "list.h"

struct lm_cq;
struct lm_match_src;

/* A posted receive.  The caller fills src..total_len (and may set
 * `engine`) on a zeroed entry before the first lm_match_post; the rest
 * belongs to this file.  A FI_MULTI_RECV buffer keeps `consumed` across
 * its re-posts. */
struct lm_rx_entry {
	struct lm_list node;         /* in a source's posted list or in `any` */
	struct lm_match_src *bucket; /* NULL while in `any` */
	uint64_t seq;                /* posting order */
	fi_addr_t src;               /* FI_ADDR_UNSPEC: any source */
	uint64_t tag;
	uint64_t ignore;
	/* Operation flags (FI_MULTI_RECV, FI_COMPLETION, FI_PEEK, ...);
	 * lm_match_post adds FI_TAGGED or FI_MSG, which the completion
	 * helpers report. */
	uint64_t flags;
	void *context;
	struct iovec iov[LM_IOV_LIMIT];
	void *desc[LM_IOV_LIMIT];
	size_t iov_count;
	size_t total_len; /* sum of the iov lengths */
	/* FI_MULTI_RECV: bytes used so far, and where the last message
	 * went (lm_rx_consume), which is what its completion reports. */
	size_t consumed;
	size_t last_off;
	size_t last_len;
	void *engine; /* the engine's own (its request, its endpoint...) */
};

/* A message that arrived before any receive took it. */
struct lm_unexp_entry {
	struct lm_list node;         /* in `unexp` or `claimed` */
	struct lm_list src_node;     /* in its source's unexp list */
	struct lm_match_src *bucket; /* NULL when not in a source list */
	uint64_t seq;                /* arrival order */
	fi_addr_t src;
	uint64_t tag;
	uint64_t data;
	size_t len;
	uint64_t flags; /* FI_TAGGED or FI_MSG, FI_REMOTE_CQ_DATA */
	bool claimed;
	void *claim_context;
	void *payload; /* the engine's handle on the data (eager copy, rendezvous) */
};

struct lm_match {
	bool tagged;   /* tags compared (fi_tagged) or not (fi_msg) */
	bool directed; /* FI_DIRECTED_RECV: a receive's src is honoured */
	uint64_t seq;
	struct lm_list any;
	struct lm_list unexp;
	struct lm_list claimed;
	struct lm_hmap srcs;     /* fi_addr -> lm_match_src */
	struct lm_list src_list; /* every lm_match_src, for cancel and drain */
	struct lm_bufpool src_pool;
	struct lm_match_src *kept; /* the last record emptied, kept for reuse */
	/* Unexpected messages that got no source record (its pool could not
	 * grow): while any exist, directed receives search the global list,
	 * so a shortage of memory costs speed, never a wrong match. */
	size_t orphans;
	size_t posted_count;
	size_t unexp_count; /* including claimed */
	/* Entries examined by the matching calls: lets tests prove that the
	 * cost does not depend on other sources' receives. */
	uint64_t probes;
};

int lm_match_init(struct lm_match *m, bool tagged, bool directed);
/* Releases the per-source records only: drain the entries first
 * (lm_match_pop_posted / lm_match_pop_unexp). */
void lm_match_fini(struct lm_match *m);

/* Post rx.  Returns the earliest unclaimed unexpected message rx takes
 * (removed from the queues; rx is NOT queued), or NULL after queueing rx.
 * A FI_MULTI_RECV buffer is re-posted by the caller while it has room. */
static inline struct lm_unexp_entry *lm_match_post(struct lm_match *m,
                                                   struct lm_rx_entry *rx);

/* A message from src with tag arrived: the earliest-posted receive that
 * takes it, removed from the queues unless it is a FI_MULTI_RECV buffer
 * (that stays until lm_rx_consume reports it released; then the caller
 * calls lm_match_remove_rx).  NULL: queue the message with
 * lm_match_add_unexp. */
static inline struct lm_rx_entry *lm_match_arrival(struct lm_match *m, fi_addr_t src,
                                                   uint64_t tag);
/* u->src, tag, len, data, flags filled by the caller. */
void lm_match_add_unexp(struct lm_match *m, struct lm_unexp_entry *u);

/* u's source became known after it arrived (its address was inserted
 * into the AV since): filed under src from now on, in arrival order
 * among that source's messages. */
void lm_match_set_src(struct lm_match *m, struct lm_unexp_entry *u, fi_addr_t src);

/* Take a queued receive out (a released multi-receive buffer). */
void lm_match_remove_rx(struct lm_match *m, struct lm_rx_entry *rx);

/* FI_PEEK: the earliest unclaimed message matching, left queued. */
struct lm_unexp_entry *lm_match_peek(struct lm_match *m, fi_addr_t src, uint64_t tag,
                                     uint64_t ignore);
/* FI_PEEK|FI_CLAIM: u is reserved for the receive that brings context
 * with FI_CLAIM; no peek or post sees it any more. */
void lm_match_claim(struct lm_match *m, struct lm_unexp_entry *u, void *context);
/* FI_CLAIM: the message claimed with context, removed; NULL if none. */
struct lm_unexp_entry *lm_match_take_claimed(struct lm_match *m, void *context);
/* FI_DISCARD (claimed or not). */
void lm_match_remove_unexp(struct lm_match *m, struct lm_unexp_entry *u);

/* fi_cancel: the earliest-posted receive with this context, removed;
 * NULL if none is queued. */
struct lm_rx_entry *lm_match_cancel(struct lm_match *m, void *context);

/* Draining at close: any queued receive / any unexpected message
 * (claimed ones included), removed; NULL when none is left. */
struct lm_rx_entry *lm_match_pop_posted(struct lm_match *m);
struct lm_unexp_entry *lm_match_pop_unexp(struct lm_match *m);

/* Does a receive with (tag, ignore) take a message with msg_tag? */
static inline bool lm_tag_match(uint64_t tag, uint64_t ignore, uint64_t msg_tag)
{
	return ((tag ^ msg_tag) & ~ignore) == 0;
}

/* The general cases of lm_match_post and lm_match_arrival. */
struct lm_unexp_entry *lm_match_post_slow(struct lm_match *m, struct lm_rx_entry *rx);
struct lm_rx_entry *lm_match_arrival_slow(struct lm_match *m, fi_addr_t src, uint64_t tag);

/* Inline for the case of every message: nothing queued for rx to take and
 * no per-source list for it to join, so it goes to the back of `any`. */
static inline struct lm_unexp_entry *lm_match_post(struct lm_match *m,
                                                   struct lm_rx_entry *rx)
{
	if (m->unexp_count || (m->directed && rx->src != FI_ADDR_UNSPEC))
		return lm_match_post_slow(m, rx);
	rx->flags |= m->tagged ? FI_TAGGED : FI_MSG;
	rx->bucket = NULL;
	rx->seq = ++m->seq;
	lm_list_push_back(&m->any, &rx->node);
	m->posted_count++;
	return NULL;
}

/* Inline when receives are not directed and the first one queued takes
 * the message (its probe counted as the general search would). */
static inline struct lm_rx_entry *lm_match_arrival(struct lm_match *m, fi_addr_t src,
                                                   uint64_t tag)
{
	if (!m->directed && !lm_list_empty(&m->any)) {
		struct lm_rx_entry *rx = lm_list_entry(m->any.next, struct lm_rx_entry, node);

		if (!m->tagged || lm_tag_match(rx->tag, rx->ignore, tag)) {
			m->probes++;
			if (!(rx->flags & FI_MULTI_RECV)) {
				lm_list_remove(&rx->node); /* bucket is NULL in `any` */
				m->posted_count--;
			}
			return rx;
		}
	}
	return lm_match_arrival_slow(m, src, tag);
}

/* FI_MULTI_RECV: place a message of len bytes in rx's buffer (iov[0]).
 * Returns where it lands (it gets min(len, room) bytes, recorded in
 * rx->last_off/last_len); *released tells whether the buffer is now used
 * up: less than min_free (FI_OPT_MIN_MULTI_RECV) left, or nothing at all.
 * The caller then reports FI_MULTI_RECV and removes rx. */
void *lm_rx_consume(struct lm_rx_entry *rx, size_t len, size_t min_free, bool *released);

/* The receive completion for a message of msg_len bytes: flags FI_RECV,
 * FI_TAGGED or FI_MSG (from rx->flags), plus extra_flags (the message's
 * FI_REMOTE_CQ_DATA, FI_MULTI_RECV when the buffer was released).  data
 * is reported only with FI_REMOTE_CQ_DATA, tag only for tagged receives.
 * A message longer than the receive (for a multi-receive buffer: than
 * its last placement) gives an FI_ETRUNC error entry, len = what fit,
 * olen = the rest.  Selective completion is the caller's decision. */
int lm_rx_truncated(struct lm_cq *cq, struct lm_rx_entry *rx, size_t msg_len,
                    size_t cap, void *buf, uint64_t data, uint64_t tag, fi_addr_t src,
                    uint64_t flags);
/* FI_TAGGED or FI_MSG: the receive's kind, as its completions say. */
static inline uint64_t lm_rx_kind(const struct lm_rx_entry *rx)
{
	return rx->flags & FI_TAGGED ? FI_TAGGED : FI_MSG;
}

/* Inline: every received message ends here. */
static inline int lm_rx_complete(struct lm_cq *cq, struct lm_rx_entry *rx,
                                 size_t msg_len, uint64_t data, uint64_t tag,
                                 fi_addr_t src, uint64_t extra_flags)
{
	uint64_t flags = FI_RECV | lm_rx_kind(rx) | extra_flags;
	bool multi = rx->flags & FI_MULTI_RECV;
	size_t cap = multi ? rx->last_len : rx->total_len;
	char *base = rx->iov_count ? (char *)rx->iov[0].iov_base : NULL;
	void *buf = multi && base ? base + rx->last_off : base;

	if (!(flags & FI_REMOTE_CQ_DATA))
		data = 0;
	if (!(flags & FI_TAGGED))
		tag = 0;
	if (msg_len > cap)
		return lm_rx_truncated(cq, rx, msg_len, cap, buf, data, tag, src, flags);
	if (lm_cq_write_direct(cq, rx->context, flags, msg_len, buf, data, tag, src))
		return 0;
	return lm_cq_write(cq, rx->context, flags, msg_len, buf, data, tag, src);
}
/* fi_cancel's FI_ECANCELED error entry for rx. */
int lm_rx_cancelled(struct lm_cq *cq, struct lm_rx_entry *rx);
/* As lm_rx_cancelled, with error err (positive). */
int lm_rx_failed(struct lm_cq *cq, struct lm_rx_entry *rx, int err);

#endif
