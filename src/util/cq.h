/* cq.h - completion queues, counters and poll sets: the application side
 * (fi_cq_*, fi_cntr_*, fi_poll_*) and the calls providers use to post. */
#ifndef LOOM_UTIL_CQ_H
#define LOOM_UTIL_CQ_H

/* Included from util.h, after the locks, wait objects and progress hooks. */

/* ---- progress lists ------------------------------------------------------
 * CQs and counters keep their endpoints' progress hooks on a list guarded
 * by a lock of its own (not the object's: hooks post completions, which
 * takes the object's lock).  A reader that finds another thread already
 * progressing skips the hooks instead of queueing behind it; the other
 * thread's completions wake it.  A hook must not add or remove hooks. */
void lm_progress_run_all(struct lm_list *hooks, struct lm_lock *plock);

/* The wait object a CQ or counter asked for: NULL for FI_WAIT_NONE, the
 * set's own (with a reference taken) for FI_WAIT_SET, a private one
 * otherwise.  -FI_EINVAL for values outside enum fi_wait_obj or a missing
 * set, -FI_ENOSYS for kinds loom does not offer (mutex/cond, pollfd). */
int lm_wait_from_attr(struct lm_fabric *fab, enum fi_wait_obj obj, struct fid_wait *set,
                      struct lm_wait **out);

/* ---- completion queues ---------------------------------------------------- */

/* One queued completion: every format is a prefix of the tagged entry, so
 * a read copies the first entry_size bytes.  An error is a slot whose err
 * is set, which keeps errors in order with successes. */
struct lm_cq_slot {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	struct lm_cq_err *err;
};

struct lm_cq {
	struct fid_cq cq_fid;
	struct lm_domain *domain;
	enum fi_cq_format format; /* never UNSPEC: resolved at open */
	size_t entry_size;
	enum fi_cq_wait_cond wait_cond;
	uint32_t api_version; /* the fabric's: decides readerr's err_data rules */

	struct lm_ring ring;     /* of struct lm_cq_slot */
	struct lm_list overflow; /* struct lm_cq_ovf, oldest first */
	size_t overflow_count;
	struct lm_cq_err *err_last; /* reported by readerr; freed by the next read */

	struct lm_list progress; /* struct lm_progress hooks */
	struct lm_lock plock;    /* guards progress and runs the hooks */

	struct lm_wait *wait; /* NULL for FI_WAIT_NONE */
	enum fi_wait_obj wait_obj;
	struct lm_wait_member member; /* in wait's members for FI_WAIT_SET */
	atomic_int sleepers;          /* readers inside sread */
	atomic_bool armed;            /* fi_trywait said "sleep": signal next write */
	atomic_uint signal_gen; /* fi_cq_signal calls: sread returns when it moves */
	/* An fi_cq_signal no sread has answered yet: the next sread that
	 * would sleep returns at once instead (one for any number). */
	atomic_bool signal_pending;
	bool signal_on_fill;    /* someone outside may watch the wait fd */

	/* A provider that has its own prov_errno texts sets this after
	 * lm_cq_open; NULL (or a NULL return) falls back to fi_strerror. */
	const char *(*strerror)(struct lm_cq *cq, int prov_errno, const void *err_data);

	struct lm_lock lock;
	/* Entries queued (ring and overflow), changed under lock: a reader
	 * that sees 0 returns -FI_EAGAIN without taking the lock. */
	atomic_size_t filled;
	atomic_int ref; /* endpoints bound (providers count them) and poll sets */
	/* While a reader of the empty CQ runs its progress hooks (holding
	 * plock), the thread and where its completions may go (cq.c). */
	_Atomic pthread_t direct_owner;
	struct lm_cq_direct *direct;
};

/* fi_cq_open for util-based domains (domain ops .cq_open). */
int lm_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
               void *context);

/* Post a completion.  Neither call ever drops an entry: when the ring
 * (attr->size entries) is full, entries wait on an overflow list and are
 * delivered, in order, as readers drain the ring.  So the only failure is
 * -FI_ENOMEM (overflow or error record allocation).  src is the source
 * fi_addr_t for fi_cq_readfrom, FI_ADDR_NOTAVAIL when unknown. */
int lm_cq_write(struct lm_cq *cq, void *op_context, uint64_t flags, size_t len, void *buf,
                uint64_t data, uint64_t tag, fi_addr_t src);

/* Straight into the reader's buffer.  A thread reading an empty CQ
 * (fi_cq_read, fi_cq_readfrom) that takes plock to run the progress
 * hooks names itself and its buffer in the CQ (cq->direct_owner,
 * cq->direct) until it lets plock go.  The completions that progress
 * posts to the CQ in that thread, while the CQ stays empty, are written
 * there in the CQ's format instead of going through the ring and its
 * lock, and the read returns them.  Other threads see another thread's
 * id (or none) and use the ring; anything in the ring (an error, an
 * entry of another thread, one that did not fit) sends the rest there
 * too, so no entry overtakes an earlier one of the same thread. */
struct lm_cq_direct {
	char *buf;
	fi_addr_t *src;
	size_t count, n;
};

/* The reader's target if the calling thread is that reader, else NULL. */
static inline struct lm_cq_direct *lm_cq_direct_of(struct lm_cq *cq)
{
	pthread_t owner = atomic_load_explicit(&cq->direct_owner, memory_order_relaxed);

	return owner && pthread_equal(owner, pthread_self()) ? cq->direct : NULL;
}

/* An entry in the CQ's format at out (an element of the application's
 * array of that format: every format is a prefix of the tagged one). */
static inline void lm_cq_put_entry(const struct lm_cq *cq, void *out, void *op_context,
                                   uint64_t flags, size_t len, void *buf, uint64_t data,
                                   uint64_t tag)
{
	struct fi_cq_tagged_entry *e = out;

	switch (cq->format) {
	case FI_CQ_FORMAT_TAGGED:
		e->tag = tag;
		/* fall through */
	case FI_CQ_FORMAT_DATA:
		e->buf = buf;
		e->data = data;
		/* fall through */
	case FI_CQ_FORMAT_MSG:
		e->flags = flags;
		e->len = len;
		/* fall through */
	default:
		e->op_context = op_context;
		break;
	}
}

/* The direct case of lm_cq_write: true when the entry went straight
 * into the calling thread's read (inline, for the hottest callers). */
static inline bool lm_cq_write_direct(struct lm_cq *cq, void *op_context, uint64_t flags,
                                      size_t len, void *buf, uint64_t data, uint64_t tag,
                                      fi_addr_t src)
{
	struct lm_cq_direct *d = lm_cq_direct_of(cq);

	if (!d || d->n >= d->count || atomic_load_explicit(&cq->filled, memory_order_relaxed))
		return false;
	lm_cq_put_entry(cq, d->buf + d->n * cq->entry_size, op_context, flags, len, buf, data,
	                tag);
	if (d->src)
		d->src[d->n] = src;
	d->n++;
	return true;
}

/* err->err must be a positive error code; err->err_data (err_data_size
 * bytes) is copied, so the caller's buffer may go away. */
int lm_cq_write_err(struct lm_cq *cq, const struct fi_cq_err_entry *err, fi_addr_t src);

/* Hooks run before every read; p->fd (if >= 0) is also watched by the
 * CQ's wait object so a sleeping reader wakes when it is readable. */
void lm_cq_add_progress(struct lm_cq *cq, struct lm_progress *p);
void lm_cq_del_progress(struct lm_cq *cq, struct lm_progress *p);

/* fi_trywait for a CQ fid: -FI_EAGAIN when something is queued (after
 * progress), 0 when it is safe to sleep on the wait object. */
int lm_cq_trywait(struct fid *fid);

/* An endpoint's fi_ep_bind of cq with flags (FI_TRANSMIT, FI_RECV,
 * FI_SELECTIVE_COMPLETION): a CQ of the endpoint's domain dom, each
 * direction bound once, into *tx / *rx with their selective flags, the
 * CQ's reference taken for each.  -FI_EBADFLAGS or -FI_EINVAL otherwise,
 * nothing bound. */
int lm_cq_bind_ep(struct lm_cq *cq, const struct lm_domain *dom, uint64_t flags,
                  struct lm_cq **tx, bool *tx_selective, struct lm_cq **rx,
                  bool *rx_selective);

/* ---- counters ------------------------------------------------------------- */

struct lm_cntr {
	struct fid_cntr cntr_fid;
	struct lm_domain *domain;
	_Atomic uint64_t value;
	_Atomic uint64_t err;
	uint64_t ops_flags; /* FI_GETOPSFLAG / FI_SETOPSFLAG */

	/* What fi_poll and fi_trywait saw last, so each can say "changed". */
	_Atomic uint64_t poll_value, poll_err;
	_Atomic uint64_t try_value, try_err;

	struct lm_list progress; /* struct lm_progress hooks */
	struct lm_lock plock;
	atomic_int nprogress; /* hooks in progress */

	struct lm_wait *wait; /* NULL for FI_WAIT_NONE */
	enum fi_wait_obj wait_obj;
	struct lm_wait_member member;
	atomic_int sleepers; /* threads inside fi_cntr_wait */
	atomic_bool armed;

	struct lm_lock lock;
	atomic_int ref; /* endpoints / MRs bound and poll sets */

	/* Operations held until the value reaches their thresholds
	 * (FI_TRIGGER): struct lm_trigger, under tlock. */
	struct lm_list triggers;
	struct lm_lock tlock;
	atomic_int ntrig;
};

/* A held operation (FI_TRIGGER with FI_TRIGGER_THRESHOLD, man fi_trigger):
 * fire issues it once its counter reaches threshold (and frees it, or
 * holds it again with lm_cntr_trigger to retry later). */
struct lm_trigger {
	struct lm_list node;
	uint64_t threshold;
	void (*fire)(struct lm_trigger *t);
};
/* Hold t on cntr, or fire it at once when cntr has reached its threshold.
 * Never under a provider's lock: firing issues the operation. */
void lm_cntr_trigger(struct lm_cntr *cntr, struct lm_trigger *t);
/* Fire those of cntr's held operations whose threshold it reached (a load
 * when none is held).  Never under a provider's lock. */
void lm_cntr_triggers_run(struct lm_cntr *cntr);
/* Take t off cntr if it is still held there: true, and t is the caller's. */
bool lm_cntr_untrigger(struct lm_cntr *cntr, struct lm_trigger *t);

int lm_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
                 struct fid_cntr **cntr, void *context);
/* Provider-side updates: lock-free, wake waiters. */
void lm_cntr_inc(struct lm_cntr *cntr);
void lm_cntr_add(struct lm_cntr *cntr, uint64_t value);
void lm_cntr_inc_err(struct lm_cntr *cntr);
void lm_cntr_add_progress(struct lm_cntr *cntr, struct lm_progress *p);
void lm_cntr_del_progress(struct lm_cntr *cntr, struct lm_progress *p);
/* -FI_EAGAIN when the value or error count moved since the last call. */
int lm_cntr_trywait(struct fid *fid);

/* ---- poll sets ------------------------------------------------------------ */

int lm_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                 struct fid_poll **pollset);

/* For poll.c: does the CQ hold anything (after running its hooks)?  Does
 * the counter differ from what the last fi_poll saw (and remember it)? */
bool lm_cq_poll_ready(struct lm_cq *cq);
bool lm_cntr_poll_changed(struct lm_cntr *cntr);

#endif
