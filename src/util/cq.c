/* cq.c - completion queues: a ring of fixed-size slots that providers post
 * into (lm_cq_write / lm_cq_write_err) and applications read in any of the
 * fi_cq formats, with blocking reads that sleep on the CQ's wait object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The default when attr->size is 0, and the most a CQ may ask for (16M
 * slots of 64 bytes); beyond that a request is a mistake, not a need. */
#define CQ_DEFAULT_SIZE 1024
#define CQ_MAX_SIZE     ((size_t)1 << 24)

/* An error completion.  Errors are rare, so each one is allocated; the
 * provider's err_data is copied behind it. */
struct lm_cq_err {
	struct fi_cq_err_entry e;
	fi_addr_t src;
	size_t data_size;
	unsigned char data[];
};

/* Overflow policy: the ring is never overrun and no completion is
 * dropped.  An entry posted while the ring is full (or while older
 * entries already wait) is allocated here and queued; each slot a reader
 * frees is refilled from the front of this list, so entries come out in
 * the order they were posted.  This is what FI_RM_ENABLED promises: the
 * provider holds completions back instead of losing them.  Invariant:
 * overflow is non-empty only while the ring is full. */
struct lm_cq_ovf {
	struct lm_list node;
	struct lm_cq_slot slot;
};

/* ---- progress and wait helpers shared with counters -------------------- */

static inline void run_hooks(struct lm_list *hooks)
{
	struct lm_list *it;

	lm_list_foreach(hooks, it)
	{
		struct lm_progress *p = lm_list_entry(it, struct lm_progress, node);

		p->run(p);
	}
}

void lm_progress_run_all(struct lm_list *hooks, struct lm_lock *plock)
{
	/* Someone else progressing already: their completions wake us. */
	if (!lm_lock_try(plock))
		return;
	run_hooks(hooks);
	lm_lock_release(plock);
}

int lm_wait_from_attr(struct lm_fabric *fab, enum fi_wait_obj obj, struct fid_wait *set,
                      struct lm_wait **out)
{
	struct lm_wait *w;

	switch (obj) {
	case FI_WAIT_NONE:
		*out = NULL;
		return 0;
	case FI_WAIT_SET:
		if (!set || set->fid.fclass != FI_CLASS_WAIT)
			return -FI_EINVAL;
		w = lm_container_of(set, struct lm_wait, wait_fid);
		lm_wait_get(w);
		*out = w;
		return 0;
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_YIELD:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_POLLFD:
		return lm_wait_create(fab, obj, out);
	default:
		return -FI_EINVAL;
	}
}

/* ---- the queue ------------------------------------------------------------ */

static inline size_t cq_count(const struct lm_cq *cq)
{
	return lm_ring_count(&cq->ring) + cq->overflow_count;
}

/* Under cq->lock: the lock-free emptiness hint follows the count. */
static inline void cq_filled_add(struct lm_cq *cq, ssize_t d)
{
	size_t v = atomic_load_explicit(&cq->filled, memory_order_relaxed);

	atomic_store_explicit(&cq->filled, v + (size_t)d, memory_order_relaxed);
}

/* The ring has room again: the oldest overflow entry moves into it. */
static void cq_refill(struct lm_cq *cq)
{
	struct lm_list *n = lm_list_pop_front(&cq->overflow);
	struct lm_cq_ovf *o = lm_list_entry(n, struct lm_cq_ovf, node);

	lm_ring_push(&cq->ring, &o->slot);
	cq->overflow_count--;
	free(o);
}

static inline void cq_drop_head(struct lm_cq *cq)
{
	cq_filled_add(cq, -1);
	lm_ring_drop(&cq->ring);
	if (cq->overflow_count)
		cq_refill(cq);
}

/* A slot to fill for a new entry, in posting order; NULL without memory.
 * Called with the lock held.  *in_ring says whether cq_slot_publish must
 * commit it; *was_empty whether a reader could have just seen the CQ
 * empty. */
static LM_HOT_INLINE struct lm_cq_slot *cq_slot_get(struct lm_cq *cq, bool *in_ring,
                                                    bool *was_empty)
{
	struct lm_cq_slot *s;
	struct lm_cq_ovf *o;

	*was_empty = lm_ring_empty(&cq->ring);
	*in_ring = false;
	if (!cq->overflow_count) {
		s = lm_ring_reserve(&cq->ring);
		if (s) {
			*in_ring = true;
			cq_filled_add(cq, 1);
			return s;
		}
	}
	o = malloc(sizeof(*o));
	if (!o)
		return NULL;
	cq_filled_add(cq, 1);
	lm_list_push_back(&cq->overflow, &o->node);
	cq->overflow_count++;
	return &o->slot;
}

/* Wake whoever may be sleeping on the CQ.  A signal is a syscall, so it is
 * sent only when a reader sleeps in sread, when fi_trywait promised the
 * application a signal, or (for wait objects the application can poll
 * itself) when the CQ goes from empty to not empty. */
static void cq_wake(struct lm_cq *cq, bool was_empty)
{
	if (!cq->wait)
		return;
	if (atomic_load(&cq->sleepers) || (was_empty && cq->signal_on_fill) ||
	    (atomic_load(&cq->armed) && atomic_exchange(&cq->armed, false)))
		lm_wait_signal(cq->wait);
}

int lm_cq_write(struct lm_cq *cq, void *op_context, uint64_t flags, size_t len, void *buf,
                uint64_t data, uint64_t tag, fi_addr_t src)
{
	struct lm_cq_slot *s;
	bool in_ring, was_empty;

	if (lm_cq_write_direct(cq, op_context, flags, len, buf, data, tag, src))
		return 0;

	lm_lock_acquire(&cq->lock);
	s = cq_slot_get(cq, &in_ring, &was_empty);
	if (!s) {
		lm_lock_release(&cq->lock);
		LM_WARN(cq->domain->fabric->prov, FI_LOG_CQ,
		        "no memory for overflow entry\n");
		return -FI_ENOMEM;
	}
	s->e.op_context = op_context;
	s->e.flags = flags;
	s->e.len = len;
	s->e.buf = buf;
	s->e.data = data;
	s->e.tag = tag;
	s->src = src;
	s->err = NULL;
	if (in_ring)
		lm_ring_commit(&cq->ring);
	lm_lock_release(&cq->lock);
	cq_wake(cq, was_empty);
	return 0;
}

int lm_cq_write_err(struct lm_cq *cq, const struct fi_cq_err_entry *err, fi_addr_t src)
{
	struct lm_cq_err *rec;
	struct lm_cq_slot *s;
	size_t dsize;
	bool in_ring, was_empty;

	if (!cq || !err || err->err <= 0 || (err->err_data_size && !err->err_data))
		return -FI_EINVAL;
	dsize = err->err_data ? err->err_data_size : 0;
	rec = malloc(sizeof(*rec) + dsize);
	if (!rec)
		return -FI_ENOMEM;
	rec->e = *err;
	rec->src = src;
	rec->data_size = dsize;
	if (dsize)
		memcpy(rec->data, err->err_data, dsize);
	rec->e.err_data = dsize ? rec->data : NULL;
	rec->e.err_data_size = dsize;

	lm_lock_acquire(&cq->lock);
	s = cq_slot_get(cq, &in_ring, &was_empty);
	if (!s) {
		lm_lock_release(&cq->lock);
		free(rec);
		return -FI_ENOMEM;
	}
	memset(s, 0, sizeof(*s));
	s->e.op_context = err->op_context;
	s->src = src;
	s->err = rec;
	if (in_ring)
		lm_ring_commit(&cq->ring);
	lm_lock_release(&cq->lock);
	cq_wake(cq, was_empty);
	return 0;
}

/* e in the application's format (a prefix of the tagged entry, which
 * is the largest): a copy of fixed size for each format, not a call. */
static LM_HOT_INLINE void cq_copy_entry(const struct lm_cq *cq, void *out,
                                        const struct fi_cq_tagged_entry *e)
{
	switch (cq->entry_size) {
	case sizeof(struct fi_cq_entry):
		memcpy(out, e, sizeof(struct fi_cq_entry));
		break;
	case sizeof(struct fi_cq_msg_entry):
		memcpy(out, e, sizeof(struct fi_cq_msg_entry));
		break;
	case sizeof(struct fi_cq_data_entry):
		memcpy(out, e, sizeof(struct fi_cq_data_entry));
		break;
	default:
		memcpy(out, e, sizeof(struct fi_cq_tagged_entry));
		break;
	}
}

/* Successes up to count, stopping before an error; -FI_EAVAIL when the
 * error is first, -FI_EAGAIN when empty.  Lock held. */
static LM_HOT_INLINE ssize_t cq_read_locked(struct lm_cq *cq, void *buf, size_t count,
                                              fi_addr_t *src)
{
	struct lm_cq_slot *s;
	char *out = buf;
	size_t i;

	/* readerr's err_data lives "until a subsequent read call". */
	if (cq->err_last) {
		free(cq->err_last);
		cq->err_last = NULL;
	}

	s = lm_ring_peek(&cq->ring);
	if (!s)
		return -FI_EAGAIN;
	if (s->err)
		return -FI_EAVAIL;
	for (i = 0; i < count; i++) {
		s = lm_ring_peek(&cq->ring);
		if (!s || s->err)
			break;
		cq_copy_entry(cq, out, &s->e);
		out += cq->entry_size;
		if (src)
			src[i] = s->src;
		cq_drop_head(cq);
	}
	return (ssize_t)i;
}

/* lm_progress_run_all for a reader of the empty CQ, naming this thread
 * the direct reader: how many completions went straight into buf (none
 * when another thread progresses; its entries wake us). */
static inline size_t cq_progress_direct(struct lm_cq *cq, void *buf, size_t count,
                                        fi_addr_t *src)
{
	struct lm_cq_direct d = {.buf = buf, .src = src, .count = count};

	if (!lm_lock_try(&cq->plock))
		return 0;
	cq->direct = &d;
	atomic_store_explicit(&cq->direct_owner, pthread_self(), memory_order_relaxed);
	run_hooks(&cq->progress);
	atomic_store_explicit(&cq->direct_owner, (pthread_t)0, memory_order_relaxed);
	cq->direct = NULL;
	lm_lock_release(&cq->plock);
	return d.n;
}

static ssize_t cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count, fi_addr_t *src)
{
	struct lm_cq *cq = lm_container_of(cq_fid, struct lm_cq, cq_fid);
	ssize_t ret;

	/* count 0 is legal: it drives progress (man fi_cq). */
	if (count && !buf)
		return -FI_EINVAL;
	if (count && !atomic_load_explicit(&cq->filled, memory_order_relaxed)) {
		size_t n = cq_progress_direct(cq, buf, count, src);

		if (n)
			return (ssize_t)n;
	} else {
		lm_progress_run_all(&cq->progress, &cq->plock);
	}
	if (!atomic_load_explicit(&cq->filled, memory_order_relaxed))
		return -FI_EAGAIN; /* readerr's err_data then lives a little longer */
	lm_lock_acquire(&cq->lock);
	ret = cq_read_locked(cq, buf, count, src);
	lm_lock_release(&cq->lock);
	return ret;
}

static ssize_t cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return cq_readfrom(cq_fid, buf, count, NULL);
}

/* How much of an error entry the caller's API version has: the entry grew
 * err_data_size in 1.5 and src_addr in 1.20. */
static size_t err_entry_size(uint32_t api)
{
	if (api >= FI_VERSION(1, 20))
		return sizeof(struct fi_cq_err_entry);
	if (api >= FI_VERSION(1, 5))
		return offsetof(struct fi_cq_err_entry, src_addr);
	return offsetof(struct fi_cq_err_entry, err_data_size);
}

static ssize_t cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
                          uint64_t flags)
{
	struct lm_cq *cq = lm_container_of(cq_fid, struct lm_cq, cq_fid);
	bool user_buf = cq->api_version >= FI_VERSION(1, 5);
	struct fi_cq_err_entry out;
	struct lm_cq_slot *s;
	struct lm_cq_err *rec;

	(void)flags; /* none are defined for readerr */
	if (!buf)
		return -FI_EINVAL;
	lm_progress_run_all(&cq->progress, &cq->plock);
	lm_lock_acquire(&cq->lock);
	free(cq->err_last);
	cq->err_last = NULL;
	s = lm_ring_peek(&cq->ring);
	if (!s || !s->err) {
		lm_lock_release(&cq->lock);
		return -FI_EAGAIN;
	}
	rec = s->err;
	cq_drop_head(cq);
	/* Keep the record: its err_data is what we hand out when the caller
	 * gives no buffer, valid until the next read. */
	cq->err_last = rec;
	lm_lock_release(&cq->lock);

	out = rec->e;
	if (user_buf && buf->err_data_size && buf->err_data) {
		size_t n = LM_MIN(buf->err_data_size, rec->data_size);

		if (n)
			memcpy(buf->err_data, rec->data, n);
		out.err_data = buf->err_data;
		out.err_data_size = n;
	}
	out.src_addr = rec->src;
	memcpy(buf, &out, err_entry_size(cq->api_version));
	return 1;
}

/* What the next sread may consume: its threshold (FI_CQ_COND_THRESHOLD),
 * never more than fits in the caller's buffer. */
static size_t cq_threshold(const struct lm_cq *cq, size_t count, const void *cond)
{
	size_t t = 1;

	if (cq->wait_cond == FI_CQ_COND_THRESHOLD && cond)
		t = *(const size_t *)cond;
	if (t > count)
		t = count;
	return t ? t : 1;
}

static ssize_t cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
                            fi_addr_t *src, const void *cond, int timeout)
{
	struct lm_cq *cq = lm_container_of(cq_fid, struct lm_cq, cq_fid);
	size_t threshold = cq_threshold(cq, count, cond);
	uint64_t start = lm_now_ms();
	unsigned gen;
	ssize_t ret;
	size_t left_over;

	/* man fi_cq forbids sread without a wait object (FI_WAIT_NONE: there
	 * is nothing to sleep on) and on wait sets; the latter is tolerated,
	 * sleeping on the set, since a set member re-checks after any wake. */
	if (!cq->wait)
		return -FI_ENOSYS;
	if (count && !buf)
		return -FI_EINVAL;
	/* Counted before the first look at the queue, so a writer that
	 * posts after that look always signals. */
	atomic_fetch_add(&cq->sleepers, 1);
	gen = atomic_load(&cq->signal_gen);
	for (;;) {
		struct lm_cq_slot *head;
		size_t avail;
		int left;

		lm_progress_run_all(&cq->progress, &cq->plock);
		lm_lock_acquire(&cq->lock);
		avail = cq_count(cq);
		head = lm_ring_peek(&cq->ring);
		left = lm_timeout_left(timeout, start);
		if (avail >= threshold || (head && head->err) || !left) {
			ret = avail ? cq_read_locked(cq, buf, count, src) : -FI_EAGAIN;
			break;
		}
		/* About to sleep: a signal sent while we slept, or before this
		 * call with nobody asleep to take it, ends the read instead.
		 * Like the reference, a read that returns without sleeping
		 * (entries, timeout 0) leaves an early signal for the next. */
		if (atomic_load(&cq->signal_gen) != gen ||
		    atomic_load(&cq->signal_pending)) {
			atomic_store(&cq->signal_pending, false);
			ret = avail ? cq_read_locked(cq, buf, count, src) : -FI_EAGAIN;
			break;
		}
		lm_lock_release(&cq->lock);
		lm_wait_block(cq->wait, left);
	}
	left_over = cq_count(cq);
	lm_lock_release(&cq->lock);
	/* A wake-up drains the wait object for everyone: pass it on if other
	 * readers still sleep, so none misses entries or an fi_cq_signal. */
	if (atomic_fetch_sub(&cq->sleepers, 1) > 1 &&
	    (left_over || atomic_load(&cq->signal_gen) != gen))
		lm_wait_signal(cq->wait);
	return ret;
}

static ssize_t cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
                        int timeout)
{
	return cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *cq_fid)
{
	struct lm_cq *cq = lm_container_of(cq_fid, struct lm_cq, cq_fid);

	if (!cq->wait)
		return -FI_ENOSYS;
	/* man fi_cq: "unblock any thread waiting in fi_cq_sread": every
	 * current sleeper sees the generation move.  A signal that finds no
	 * sleeper is kept (as the reference does) so a read about to block
	 * does not miss the wake-up that was meant for it. */
	atomic_store(&cq->signal_pending, true);
	atomic_fetch_add(&cq->signal_gen, 1);
	lm_wait_signal(cq->wait);
	return 0;
}

static const char *cq_strerror(struct fid_cq *cq_fid, int prov_errno,
                               const void *err_data, char *buf, size_t len)
{
	struct lm_cq *cq = lm_container_of(cq_fid, struct lm_cq, cq_fid);
	const char *text = NULL;

	if (cq->strerror)
		text = cq->strerror(cq, prov_errno, err_data);
	if (!text)
		text = fi_strerror(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", text);
		return buf;
	}
	return text;
}

int lm_cq_bind_ep(struct lm_cq *cq, const struct lm_domain *dom, uint64_t flags,
                  struct lm_cq **tx, bool *tx_selective, struct lm_cq **rx,
                  bool *rx_selective)
{
	if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
		return -FI_EBADFLAGS;
	if (!(flags & (FI_TRANSMIT | FI_RECV)) || cq->domain != dom ||
	    ((flags & FI_TRANSMIT) && *tx) || ((flags & FI_RECV) && *rx))
		return -FI_EINVAL;
	if (flags & FI_TRANSMIT) {
		*tx = cq;
		*tx_selective = flags & FI_SELECTIVE_COMPLETION;
		atomic_fetch_add(&cq->ref, 1);
	}
	if (flags & FI_RECV) {
		*rx = cq;
		*rx_selective = flags & FI_SELECTIVE_COMPLETION;
		atomic_fetch_add(&cq->ref, 1);
	}
	return 0;
}

int lm_cq_trywait(struct fid *fid)
{
	struct lm_cq *cq = lm_container_of(fid, struct lm_cq, cq_fid.fid);
	bool ready;

	if (!cq->wait)
		return -FI_EINVAL;
	if (cq->wait_obj != FI_WAIT_SET && !atomic_load(&cq->sleepers))
		lm_wait_drain_stale(cq->wait);
	/* Armed before looking, so a write racing with the look signals. */
	atomic_store(&cq->armed, true);
	lm_progress_run_all(&cq->progress, &cq->plock);
	lm_lock_acquire(&cq->lock);
	ready = !lm_ring_empty(&cq->ring);
	lm_lock_release(&cq->lock);
	return ready ? -FI_EAGAIN : 0;
}

bool lm_cq_poll_ready(struct lm_cq *cq)
{
	bool ready;

	lm_progress_run_all(&cq->progress, &cq->plock);
	lm_lock_acquire(&cq->lock);
	ready = !lm_ring_empty(&cq->ring);
	lm_lock_release(&cq->lock);
	return ready;
}

void lm_cq_add_progress(struct lm_cq *cq, struct lm_progress *p)
{
	lm_lock_acquire(&cq->plock);
	lm_list_push_back(&cq->progress, &p->node);
	lm_lock_release(&cq->plock);
	if (cq->wait && p->fd >= 0 && lm_wait_add_fd(cq->wait, p->fd))
		LM_WARN(cq->domain->fabric->prov, FI_LOG_CQ,
		        "cannot watch fd %d; sread relies on signals\n", p->fd);
}

void lm_cq_del_progress(struct lm_cq *cq, struct lm_progress *p)
{
	lm_lock_acquire(&cq->plock);
	lm_list_remove(&p->node);
	lm_lock_release(&cq->plock);
	if (cq->wait && p->fd >= 0)
		lm_wait_del_fd(cq->wait, p->fd);
}

/* ---- open / close --------------------------------------------------------- */

static void cq_free_entries(struct lm_cq *cq)
{
	struct lm_cq_slot *s;
	struct lm_list *n;

	while ((s = lm_ring_peek(&cq->ring))) {
		free(s->err);
		lm_ring_drop(&cq->ring);
	}
	while ((n = lm_list_pop_front(&cq->overflow))) {
		struct lm_cq_ovf *o = lm_list_entry(n, struct lm_cq_ovf, node);

		free(o->slot.err);
		free(o);
	}
	cq->overflow_count = 0;
	free(cq->err_last);
	cq->err_last = NULL;
}

static int cq_close(struct fid *fid)
{
	struct lm_cq *cq = lm_container_of(fid, struct lm_cq, cq_fid.fid);

	if (atomic_load(&cq->ref))
		return -FI_EBUSY;
	if (cq->wait) {
		if (cq->wait_obj == FI_WAIT_SET)
			lm_wait_del_member(cq->wait, &cq->member);
		lm_wait_put(cq->wait);
	}
	cq_free_entries(cq);
	lm_ring_fini(&cq->ring);
	lm_lock_fini(&cq->lock);
	lm_lock_fini(&cq->plock);
	atomic_fetch_sub(&cq->domain->ref, 1);
	free(cq);
	return 0;
}

static int cq_control(struct fid *fid, int command, void *arg)
{
	struct lm_cq *cq = lm_container_of(fid, struct lm_cq, cq_fid.fid);

	return lm_wait_control(cq->wait, command, arg);
}

static const struct fi_ops cq_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = cq_close,
    .bind = lm_fid_no_bind,
    .control = cq_control,
    .ops_open = lm_fid_no_ops_open,
};

static const struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

static size_t entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

static int cq_check_attr(const struct fi_cq_attr *attr)
{
	if (attr->flags & ~FI_AFFINITY)
		return -FI_EBADFLAGS;
	if (attr->format != FI_CQ_FORMAT_UNSPEC && !entry_size(attr->format))
		return -FI_EINVAL;
	if (attr->size > CQ_MAX_SIZE)
		return -FI_EINVAL;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_cond != FI_CQ_COND_NONE &&
	    attr->wait_cond != FI_CQ_COND_THRESHOLD)
		return -FI_EINVAL;
	return 0;
}

int lm_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
               void *context)
{
	struct lm_domain *dom;
	struct lm_cq *cq;
	int ret;

	if (!domain || !attr || !cq_fid)
		return -FI_EINVAL;
	ret = cq_check_attr(attr);
	if (ret)
		return ret;
	dom = lm_container_of(domain, struct lm_domain, domain_fid);

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->domain = dom;
	cq->format =
	    attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	cq->entry_size = entry_size(cq->format);
	cq->wait_cond =
	    attr->wait_obj == FI_WAIT_NONE ? FI_CQ_COND_NONE : attr->wait_cond;
	cq->api_version = dom->fabric->fabric_fid.api_version;
	lm_list_init(&cq->overflow);
	lm_list_init(&cq->progress);
	if (lm_ring_init(&cq->ring, attr->size ? attr->size : CQ_DEFAULT_SIZE,
	                 sizeof(struct lm_cq_slot))) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	ret = lm_wait_from_attr(dom->fabric, attr->wait_obj, attr->wait_set, &cq->wait);
	if (ret)
		goto err_ring;
	cq->wait_obj = attr->wait_obj;
	/* An fd the application may poll natively (its own or a set's) must
	 * turn readable when entries arrive, even without fi_trywait. */
	cq->signal_on_fill = attr->wait_obj == FI_WAIT_FD || attr->wait_obj == FI_WAIT_SET ||
	                     attr->wait_obj == FI_WAIT_MUTEX_COND ||
	                     attr->wait_obj == FI_WAIT_POLLFD;
	lm_lock_init(&cq->lock, dom->shared);
	lm_lock_init(&cq->plock, dom->shared);
	atomic_init(&cq->ref, 0);
	atomic_init(&cq->sleepers, 0);
	atomic_init(&cq->armed, false);
	atomic_init(&cq->signal_gen, 0u);
	atomic_init(&cq->signal_pending, false);

	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = (struct fi_ops *)&cq_fid_ops;
	cq->cq_fid.ops = (struct fi_ops_cq *)&cq_ops;
	if (cq->wait_obj == FI_WAIT_SET) {
		cq->member.fid = &cq->cq_fid.fid;
		cq->member.trywait = lm_cq_trywait;
		lm_wait_add_member(cq->wait, &cq->member);
	}
	atomic_fetch_add(&dom->ref, 1);
	*cq_fid = &cq->cq_fid;
	return 0;

err_ring:
	lm_ring_fini(&cq->ring);
err_free:
	free(cq);
	return ret;
}
