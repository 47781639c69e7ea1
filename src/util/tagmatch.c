/* tagmatch.c - the posted/unexpected receive queues of tagmatch.h and the
 * completion entries a match produces. */
#include <string.h>

#include "util.h"

/* Everything queued for one source address; exists only while one of
 * its lists is non-empty, and the one that emptied last (m->kept), so a
 * long-lived endpoint talking to many peers keeps memory proportional to
 * what is actually queued, and one talking to one peer at a time (a
 * ping-pong) neither allocates nor hashes a record per message. */
struct lm_match_src {
	struct lm_hnode hnode; /* key: the fi_addr */
	struct lm_list link;   /* in m->src_list */
	struct lm_list posted;
	struct lm_list unexp; /* through lm_unexp_entry.src_node */
};

/* Sources the map holds before it first grows: a job's peers on a few nodes. */
#define MATCH_SRCS_EXPECTED 64

int lm_match_init(struct lm_match *m, bool tagged, bool directed)
{
	if (!m)
		return -FI_EINVAL;
	memset(m, 0, sizeof(*m));
	if (lm_bufpool_init(&m->src_pool, sizeof(struct lm_match_src), 0,
	                    LM_BUFPOOL_CHUNK, 0))
		return -FI_EINVAL;
	if (lm_hmap_init(&m->srcs, MATCH_SRCS_EXPECTED))
		return -FI_ENOMEM;
	m->tagged = tagged;
	m->directed = directed;
	lm_list_init(&m->any);
	lm_list_init(&m->unexp);
	lm_list_init(&m->claimed);
	lm_list_init(&m->src_list);
	return 0;
}

void lm_match_fini(struct lm_match *m)
{
	lm_hmap_fini(&m->srcs);
	lm_bufpool_fini(&m->src_pool);
	m->kept = NULL;
	lm_list_init(&m->any);
	lm_list_init(&m->unexp);
	lm_list_init(&m->claimed);
	lm_list_init(&m->src_list);
	m->posted_count = m->unexp_count = m->orphans = 0;
}

/* ---- per-source records ---------------------------------------------- */

static struct lm_match_src *src_find(struct lm_match *m, fi_addr_t addr)
{
	struct lm_hnode *n = lm_hmap_find(&m->srcs, addr);

	return n ? lm_container_of(n, struct lm_match_src, hnode) : NULL;
}

/* NULL only when the pool cannot grow; callers then fall back to the
 * global lists, which stay correct (see struct lm_match.orphans). */
static struct lm_match_src *src_get(struct lm_match *m, fi_addr_t addr)
{
	struct lm_match_src *b = src_find(m, addr);

	if (b)
		return b;
	b = lm_bufpool_alloc(&m->src_pool);
	if (!b)
		return NULL;
	lm_list_init(&b->posted);
	lm_list_init(&b->unexp);
	lm_list_push_back(&m->src_list, &b->link);
	lm_hmap_insert(&m->srcs, &b->hnode, addr);
	return b;
}

static bool src_empty(const struct lm_match_src *b)
{
	return lm_list_empty(&b->posted) && lm_list_empty(&b->unexp);
}

static void src_put(struct lm_match *m, struct lm_match_src *b)
{
	struct lm_match_src *old = m->kept;

	if (!src_empty(b) || old == b)
		return;
	m->kept = b;
	if (old && src_empty(old)) {
		lm_hmap_remove(&m->srcs, &old->hnode);
		lm_list_remove(&old->link);
		lm_bufpool_free(&m->src_pool, old);
	}
}

/* ---- unlinking ----------------------------------------------------------- */

static bool rx_queued(const struct lm_rx_entry *rx)
{
	return rx->node.next != &rx->node;
}

static inline void rx_unlink(struct lm_match *m, struct lm_rx_entry *rx)
{
	struct lm_match_src *b = rx->bucket;

	lm_list_remove(&rx->node);
	m->posted_count--;
	if (b) {
		rx->bucket = NULL;
		src_put(m, b);
	}
}

/* Out of the unclaimed lists (global and per-source). */
static void unexp_detach(struct lm_match *m, struct lm_unexp_entry *u)
{
	struct lm_match_src *b = u->bucket;

	lm_list_remove(&u->node);
	if (b) {
		lm_list_remove(&u->src_node);
		u->bucket = NULL;
		src_put(m, b);
	} else if (m->directed) {
		m->orphans--;
	}
}

/* ---- matching ------------------------------------------------------------ */

static bool tag_ok(const struct lm_match *m, uint64_t tag, uint64_t ignore,
                   uint64_t msg_tag)
{
	return !m->tagged || lm_tag_match(tag, ignore, msg_tag);
}

/* Source filter for entries found in the global lists, where directed
 * and wildcard entries meet.  want == FI_ADDR_UNSPEC takes anything. */
static bool src_ok(const struct lm_match *m, fi_addr_t want, fi_addr_t got)
{
	return !m->directed || want == FI_ADDR_UNSPEC || want == got;
}

/* The earliest unclaimed message a receive for (src, tag, ignore) takes. */
static struct lm_unexp_entry *find_unexp(struct lm_match *m, fi_addr_t src, uint64_t tag,
                                         uint64_t ignore)
{
	struct lm_list *it;

	if (m->directed && src != FI_ADDR_UNSPEC && !m->orphans) {
		struct lm_match_src *b = src_find(m, src);

		if (!b)
			return NULL;
		lm_list_foreach(&b->unexp, it)
		{
			struct lm_unexp_entry *u =
			    lm_list_entry(it, struct lm_unexp_entry, src_node);

			m->probes++;
			if (tag_ok(m, tag, ignore, u->tag))
				return u;
		}
		return NULL;
	}
	lm_list_foreach(&m->unexp, it)
	{
		struct lm_unexp_entry *u = lm_list_entry(it, struct lm_unexp_entry, node);

		m->probes++;
		if (src_ok(m, src, u->src) && tag_ok(m, tag, ignore, u->tag))
			return u;
	}
	return NULL;
}

struct lm_unexp_entry *lm_match_post_slow(struct lm_match *m, struct lm_rx_entry *rx)
{
	struct lm_unexp_entry *u;
	struct lm_match_src *b = NULL;

	rx->flags |= m->tagged ? FI_TAGGED : FI_MSG;
	rx->bucket = NULL;
	lm_list_init(&rx->node);
	u = m->unexp_count ? find_unexp(m, rx->src, rx->tag, rx->ignore) : NULL;
	if (u) {
		unexp_detach(m, u);
		m->unexp_count--;
		return u;
	}
	rx->seq = ++m->seq;
	if (m->directed && rx->src != FI_ADDR_UNSPEC)
		b = src_get(m, rx->src);
	if (b) {
		rx->bucket = b;
		lm_list_push_back(&b->posted, &rx->node);
	} else {
		/* Wildcard, or a directed receive without a source record:
		 * `any` keeps posting order and src_ok still filters it. */
		lm_list_push_back(&m->any, &rx->node);
	}
	m->posted_count++;
	return NULL;
}

struct lm_rx_entry *lm_match_arrival_slow(struct lm_match *m, fi_addr_t src, uint64_t tag)
{
	struct lm_rx_entry *best = NULL;
	struct lm_list *it;

	if (m->directed) {
		struct lm_match_src *b = src_find(m, src);

		if (b) {
			lm_list_foreach(&b->posted, it)
			{
				struct lm_rx_entry *rx =
				    lm_list_entry(it, struct lm_rx_entry, node);

				m->probes++;
				if (tag_ok(m, rx->tag, rx->ignore, tag)) {
					best = rx;
					break;
				}
			}
		}
	}
	/* `any` is in posting order: past the directed match's sequence
	 * number nothing there can win. */
	lm_list_foreach(&m->any, it)
	{
		struct lm_rx_entry *rx = lm_list_entry(it, struct lm_rx_entry, node);

		if (best && rx->seq > best->seq)
			break;
		m->probes++;
		if (src_ok(m, rx->src, src) && tag_ok(m, rx->tag, rx->ignore, tag)) {
			best = rx;
			break;
		}
	}
	if (best && !(best->flags & FI_MULTI_RECV))
		rx_unlink(m, best);
	return best;
}

void lm_match_add_unexp(struct lm_match *m, struct lm_unexp_entry *u)
{
	struct lm_match_src *b = NULL;

	u->seq = ++m->seq;
	u->claimed = false;
	u->claim_context = NULL;
	u->bucket = NULL;
	lm_list_init(&u->src_node);
	lm_list_push_back(&m->unexp, &u->node);
	if (m->directed) {
		b = src_get(m, u->src);
		if (b) {
			u->bucket = b;
			lm_list_push_back(&b->unexp, &u->src_node);
		} else {
			m->orphans++;
		}
	}
	m->unexp_count++;
}

void lm_match_remove_rx(struct lm_match *m, struct lm_rx_entry *rx)
{
	if (rx_queued(rx))
		rx_unlink(m, rx);
}

/* ---- peek, claim, discard ------------------------------------------------ */

struct lm_unexp_entry *lm_match_peek(struct lm_match *m, fi_addr_t src, uint64_t tag,
                                     uint64_t ignore)
{
	return find_unexp(m, src, tag, ignore);
}

void lm_match_set_src(struct lm_match *m, struct lm_unexp_entry *u, fi_addr_t src)
{
	struct lm_match_src *b;
	struct lm_list *it;

	if (u->src == src)
		return;
	u->src = src;
	if (u->claimed || !m->directed)
		return; /* in no source's list */
	if (u->bucket) {
		b = u->bucket;
		lm_list_remove(&u->src_node);
		u->bucket = NULL;
		src_put(m, b);
	} else {
		m->orphans--;
	}
	b = src_get(m, src);
	if (!b) {
		m->orphans++;
		return;
	}
	u->bucket = b;
	/* Behind the last of the source's messages that came before it. */
	for (it = b->unexp.prev; it != &b->unexp; it = it->prev)
		if (lm_container_of(it, struct lm_unexp_entry, src_node)->seq < u->seq)
			break;
	lm_list_insert_before(it->next, &u->src_node);
}

void lm_match_claim(struct lm_match *m, struct lm_unexp_entry *u, void *context)
{
	if (u->claimed)
		return;
	unexp_detach(m, u);
	u->claimed = true;
	u->claim_context = context;
	lm_list_push_back(&m->claimed, &u->node);
}

struct lm_unexp_entry *lm_match_take_claimed(struct lm_match *m, void *context)
{
	struct lm_list *it;

	lm_list_foreach(&m->claimed, it)
	{
		struct lm_unexp_entry *u = lm_list_entry(it, struct lm_unexp_entry, node);

		if (u->claim_context == context) {
			lm_list_remove(&u->node);
			m->unexp_count--;
			return u;
		}
	}
	return NULL;
}

void lm_match_remove_unexp(struct lm_match *m, struct lm_unexp_entry *u)
{
	if (u->claimed)
		lm_list_remove(&u->node);
	else
		unexp_detach(m, u);
	m->unexp_count--;
}

/* ---- cancel and drain ---------------------------------------------------- */

static struct lm_rx_entry *first_with_context(struct lm_list *head, void *context)
{
	struct lm_list *it;

	lm_list_foreach(head, it)
	{
		struct lm_rx_entry *rx = lm_list_entry(it, struct lm_rx_entry, node);

		if (rx->context == context)
			return rx;
	}
	return NULL;
}

/* Rare (fi_cancel), so it may look at every queue. */
struct lm_rx_entry *lm_match_cancel(struct lm_match *m, void *context)
{
	struct lm_rx_entry *best = first_with_context(&m->any, context);
	struct lm_list *it;

	lm_list_foreach(&m->src_list, it)
	{
		struct lm_match_src *b = lm_list_entry(it, struct lm_match_src, link);
		struct lm_rx_entry *rx = first_with_context(&b->posted, context);

		if (rx && (!best || rx->seq < best->seq))
			best = rx;
	}
	if (best)
		rx_unlink(m, best);
	return best;
}

struct lm_rx_entry *lm_match_pop_posted(struct lm_match *m)
{
	struct lm_list *n = lm_list_front(&m->any), *it;

	if (!n) {
		lm_list_foreach(&m->src_list, it)
		{
			struct lm_match_src *b =
			    lm_list_entry(it, struct lm_match_src, link);

			n = lm_list_front(&b->posted);
			if (n)
				break;
		}
	}
	if (!n)
		return NULL;
	struct lm_rx_entry *rx = lm_list_entry(n, struct lm_rx_entry, node);

	rx_unlink(m, rx);
	return rx;
}

struct lm_unexp_entry *lm_match_pop_unexp(struct lm_match *m)
{
	struct lm_list *n = lm_list_front(&m->unexp);
	struct lm_unexp_entry *u;

	if (!n)
		n = lm_list_front(&m->claimed);
	if (!n)
		return NULL;
	u = lm_list_entry(n, struct lm_unexp_entry, node);
	lm_match_remove_unexp(m, u);
	return u;
}

/* ---- data placement ------------------------------------------------------ */

void *lm_rx_consume(struct lm_rx_entry *rx, size_t len, size_t min_free, bool *released)
{
	size_t cap = rx->iov_count ? rx->iov[0].iov_len : 0;
	size_t room = cap > rx->consumed ? cap - rx->consumed : 0;
	size_t take = LM_MIN(len, room);
	char *base = rx->iov_count ? rx->iov[0].iov_base : NULL;
	void *at = base ? base + (cap - room) : NULL;

	rx->last_off = cap - room;
	rx->last_len = take;
	rx->consumed = cap - room + take;
	room -= take;
	if (released)
		*released = room < min_free || room == 0;
	return at;
}

/* ---- completions --------------------------------------------------------- */

int lm_rx_truncated(struct lm_cq *cq, struct lm_rx_entry *rx, size_t msg_len,
                    size_t cap, void *buf, uint64_t data, uint64_t tag, fi_addr_t src,
                    uint64_t flags)
{
	struct fi_cq_err_entry err = {
	    .op_context = rx->context,
	    .flags = flags,
	    .len = cap,
	    .buf = buf,
	    .data = data,
	    .tag = tag,
	    .olen = msg_len - cap,
	    .err = FI_ETRUNC,
	    .prov_errno = FI_ETRUNC,
	};

	return lm_cq_write_err(cq, &err, src);
}

int lm_rx_failed(struct lm_cq *cq, struct lm_rx_entry *rx, int err)
{
	/* A failed multi-receive buffer is given back too: say so. */
	struct fi_cq_err_entry e = {
	    .op_context = rx->context,
	    .flags = FI_RECV | lm_rx_kind(rx) | (rx->flags & FI_MULTI_RECV),
	    .tag = rx->flags & FI_TAGGED ? rx->tag : 0,
	    .err = err,
	    .prov_errno = err,
	};

	return lm_cq_write_err(cq, &e, FI_ADDR_NOTAVAIL);
}

int lm_rx_cancelled(struct lm_cq *cq, struct lm_rx_entry *rx)
{
	return lm_rx_failed(cq, rx, FI_ECANCELED);
}
