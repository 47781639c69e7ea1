/* cntr.c - counters: a success and an error count, updated lock-free by
 * providers and applications, with fi_cntr_wait sleeping on the counter's
 * wait object until a threshold is reached. */
#include <sched.h>
#include <stdlib.h>

#include "util.h"

/* How long fi_cntr_wait on a counter bound to no endpoint sleeps between
 * passes over its domain's endpoints (nothing rings it). */
#define CNTR_UNBOUND_WAIT_MS 1

/* Wake sleepers.  Every update while someone waits is a signal (waiters
 * have different thresholds and recheck); with nobody waiting only a
 * promise made by fi_trywait costs a syscall.  The update itself comes
 * first and the sleeper count is read after it, while waiters count
 * themselves before reading the value: one side always sees the other. */
static void cntr_wake(struct lm_cntr *c)
{
	if (!c->wait)
		return;
	if (atomic_load(&c->sleepers) ||
	    (atomic_load(&c->armed) && atomic_exchange(&c->armed, false)))
		lm_wait_signal(c->wait);
}

void lm_cntr_add(struct lm_cntr *cntr, uint64_t value)
{
	atomic_fetch_add(&cntr->value, value);
	cntr_wake(cntr);
}

void lm_cntr_inc(struct lm_cntr *cntr)
{
	lm_cntr_add(cntr, 1);
}

void lm_cntr_inc_err(struct lm_cntr *cntr)
{
	atomic_fetch_add(&cntr->err, 1);
	cntr_wake(cntr);
}

void lm_cntr_add_progress(struct lm_cntr *cntr, struct lm_progress *p)
{
	lm_lock_acquire(&cntr->plock);
	lm_list_push_back(&cntr->progress, &p->node);
	atomic_fetch_add(&cntr->nprogress, 1);
	lm_lock_release(&cntr->plock);
	if (cntr->wait && p->fd >= 0 && lm_wait_add_fd(cntr->wait, p->fd))
		LM_WARN(cntr->domain->fabric->prov, FI_LOG_CNTR,
		        "cannot watch fd %d; waits rely on signals\n", p->fd);
}

void lm_cntr_del_progress(struct lm_cntr *cntr, struct lm_progress *p)
{
	lm_lock_acquire(&cntr->plock);
	lm_list_remove(&p->node);
	atomic_fetch_sub(&cntr->nprogress, 1);
	lm_lock_release(&cntr->plock);
	if (cntr->wait && p->fd >= 0)
		lm_wait_del_fd(cntr->wait, p->fd);
}

/* ---- triggered operations ---------------------------------------------------- */

void lm_cntr_trigger(struct lm_cntr *cntr, struct lm_trigger *t)
{
	lm_lock_acquire(&cntr->tlock);
	if (atomic_load(&cntr->value) < t->threshold) {
		lm_list_push_back(&cntr->triggers, &t->node);
		atomic_fetch_add(&cntr->ntrig, 1);
		atomic_fetch_add(&cntr->domain->ntrig, 1);
		lm_lock_release(&cntr->tlock);
		return;
	}
	lm_lock_release(&cntr->tlock);
	t->fire(t);
}

bool lm_cntr_untrigger(struct lm_cntr *cntr, struct lm_trigger *t)
{
	bool found = false;
	struct lm_list *it;

	lm_lock_acquire(&cntr->tlock);
	lm_list_foreach(&cntr->triggers, it)
	{
		if (it == &t->node) {
			found = true;
			break;
		}
	}
	if (found) {
		lm_list_remove(&t->node);
		atomic_fetch_sub(&cntr->ntrig, 1);
		atomic_fetch_sub(&cntr->domain->ntrig, 1);
	}
	lm_lock_release(&cntr->tlock);
	return found;
}

void lm_cntr_triggers_run(struct lm_cntr *cntr)
{
	struct lm_list due, *it, *next;
	uint64_t v;

	if (!atomic_load_explicit(&cntr->ntrig, memory_order_relaxed))
		return;
	lm_list_init(&due);
	lm_lock_acquire(&cntr->tlock);
	v = atomic_load(&cntr->value);
	for (it = cntr->triggers.next; it != &cntr->triggers; it = next) {
		struct lm_trigger *t = lm_container_of(it, struct lm_trigger, node);

		next = it->next;
		if (v < t->threshold)
			continue;
		lm_list_remove(it);
		lm_list_push_back(&due, it);
		atomic_fetch_sub(&cntr->ntrig, 1);
		atomic_fetch_sub(&cntr->domain->ntrig, 1);
	}
	lm_lock_release(&cntr->tlock);
	/* In the order they were held (man fi_trigger leaves it open). */
	while ((it = lm_list_pop_front(&due)))
		lm_container_of(it, struct lm_trigger, node)->fire(
		    lm_container_of(it, struct lm_trigger, node));
}

/* ---- application calls ---------------------------------------------------- */

static inline struct lm_cntr *to_cntr(struct fid_cntr *fid)
{
	return lm_container_of(fid, struct lm_cntr, cntr_fid);
}

/* What a read or wait of c progresses: the endpoints bound to it, or,
 * when none is, every endpoint of its domain (deferred work reports to a
 * completion_cntr that may be bound to nothing). */
static bool cntr_unbound(const struct lm_cntr *c)
{
	return !atomic_load_explicit(&c->nprogress, memory_order_relaxed) &&
	       c->domain->progress_all;
}

static void cntr_progress(struct lm_cntr *c)
{
	if (cntr_unbound(c))
		c->domain->progress_all(c->domain);
	else
		lm_progress_run_all(&c->progress, &c->plock);
}

static uint64_t cntr_read(struct fid_cntr *fid)
{
	struct lm_cntr *c = to_cntr(fid);

	cntr_progress(c);
	lm_cntr_triggers_run(c);
	return atomic_load(&c->value);
}

static uint64_t cntr_readerr(struct fid_cntr *fid)
{
	struct lm_cntr *c = to_cntr(fid);

	cntr_progress(c);
	return atomic_load(&c->err);
}

/* fi_poll reports a counter that changed "since the last time fi_poll,
 * fi_cntr_set or fi_cntr_add were called": the application's own updates
 * move the baseline along with the value. */
static int cntr_add(struct fid_cntr *fid, uint64_t value)
{
	struct lm_cntr *c = to_cntr(fid);

	atomic_store(&c->poll_value, atomic_fetch_add(&c->value, value) + value);
	atomic_store(&c->poll_err, atomic_load(&c->err));
	cntr_wake(c);
	lm_cntr_triggers_run(c);
	return 0;
}

static int cntr_set(struct fid_cntr *fid, uint64_t value)
{
	struct lm_cntr *c = to_cntr(fid);

	atomic_store(&c->value, value);
	atomic_store(&c->poll_value, value);
	atomic_store(&c->poll_err, atomic_load(&c->err));
	cntr_wake(c);
	lm_cntr_triggers_run(c);
	return 0;
}

static int cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
	struct lm_cntr *c = to_cntr(fid);

	atomic_store(&c->poll_err, atomic_fetch_add(&c->err, value) + value);
	atomic_store(&c->poll_value, atomic_load(&c->value));
	cntr_wake(c);
	return 0;
}

static int cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
	struct lm_cntr *c = to_cntr(fid);

	atomic_store(&c->err, value);
	atomic_store(&c->poll_err, value);
	atomic_store(&c->poll_value, atomic_load(&c->value));
	cntr_wake(c);
	return 0;
}

/* fi_cntr_wait without a wait object: progress and look, yielding the
 * CPU between looks. */
static int cntr_spin(struct lm_cntr *c, uint64_t threshold, int timeout)
{
	uint64_t start = lm_now_ms(), err0 = atomic_load(&c->err);

	for (;;) {
		cntr_progress(c);
		lm_cntr_triggers_run(c);
		if (atomic_load(&c->value) >= threshold)
			return 0;
		if (atomic_load(&c->err) != err0)
			return -FI_EAVAIL;
		if (!lm_timeout_left(timeout, start))
			return -FI_ETIMEDOUT;
		sched_yield();
	}
}

/* 0 once value >= threshold; -FI_EAVAIL as soon as the error count moves
 * (man fi_cntr: any change of it unblocks waiters); -FI_ETIMEDOUT. */
static int cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
	struct lm_cntr *c = to_cntr(fid);
	uint64_t start = lm_now_ms(), err0;
	int ret, left;

	/* No wait object: the caller's thread polls (as libfabric 1.17's
	 * sockets did; its util providers answer -FI_ENOSYS). */
	if (!c->wait)
		return cntr_spin(c, threshold, timeout);
	atomic_fetch_add(&c->sleepers, 1);
	err0 = atomic_load(&c->err);
	for (;;) {
		cntr_progress(c);
		if (atomic_load(&c->value) >= threshold) {
			ret = 0;
			break;
		}
		if (atomic_load(&c->err) != err0) {
			ret = -FI_EAVAIL;
			break;
		}
		left = lm_timeout_left(timeout, start);
		if (!left) {
			ret = -FI_ETIMEDOUT;
			break;
		}
		/* Endpoints not bound to c do not ring its wait object:
		 * look again soon. */
		if (cntr_unbound(c) && (left < 0 || left > CNTR_UNBOUND_WAIT_MS))
			left = CNTR_UNBOUND_WAIT_MS;
		lm_wait_block(c->wait, left);
	}
	/* The wake-up drained the wait object; others may still sleep. */
	if (atomic_fetch_sub(&c->sleepers, 1) > 1)
		lm_wait_signal(c->wait);
	return ret;
}

int lm_cntr_trywait(struct fid *fid)
{
	struct lm_cntr *c = lm_container_of(fid, struct lm_cntr, cntr_fid.fid);
	uint64_t v, e;
	bool moved;

	if (!c->wait)
		return -FI_EINVAL;
	/* Stale signals would leave a native poll spinning (see cq.c). */
	if (c->wait_obj != FI_WAIT_SET && !atomic_load(&c->sleepers))
		lm_wait_drain_stale(c->wait);
	atomic_store(&c->armed, true);
	cntr_progress(c);
	v = atomic_load(&c->value);
	e = atomic_load(&c->err);
	moved = atomic_exchange(&c->try_value, v) != v;
	moved |= atomic_exchange(&c->try_err, e) != e;
	return moved ? -FI_EAGAIN : 0;
}

bool lm_cntr_poll_changed(struct lm_cntr *cntr)
{
	uint64_t v, e;
	bool changed;

	cntr_progress(cntr);
	v = atomic_load(&cntr->value);
	e = atomic_load(&cntr->err);
	changed = atomic_exchange(&cntr->poll_value, v) != v;
	changed |= atomic_exchange(&cntr->poll_err, e) != e;
	return changed;
}

/* ---- open / close --------------------------------------------------------- */

static int cntr_close(struct fid *fid)
{
	struct lm_cntr *c = lm_container_of(fid, struct lm_cntr, cntr_fid.fid);

	/* Operations still held on it would never be issued. */
	if (atomic_load(&c->ref) || atomic_load(&c->ntrig))
		return -FI_EBUSY;
	if (c->wait) {
		if (c->wait_obj == FI_WAIT_SET)
			lm_wait_del_member(c->wait, &c->member);
		lm_wait_put(c->wait);
	}
	lm_lock_fini(&c->lock);
	lm_lock_fini(&c->plock);
	lm_lock_fini(&c->tlock);
	atomic_fetch_sub(&c->domain->ref, 1);
	free(c);
	return 0;
}

static int cntr_control(struct fid *fid, int command, void *arg)
{
	struct lm_cntr *c = lm_container_of(fid, struct lm_cntr, cntr_fid.fid);

	switch (command) {
	case FI_GETOPSFLAG:
		if (!arg)
			return -FI_EINVAL;
		*(uint64_t *)arg = c->ops_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!arg)
			return -FI_EINVAL;
		c->ops_flags = *(uint64_t *)arg;
		return 0;
	case FI_GETWAIT:
	case FI_GETWAITOBJ:
		return lm_wait_control(c->wait, command, arg);
	default:
		return -FI_ENOSYS;
	}
}

static const struct fi_ops cntr_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = cntr_close,
    .bind = lm_fid_no_bind,
    .control = cntr_control,
    .ops_open = lm_fid_no_ops_open,
};

static const struct fi_ops_cntr cntr_ops = {
    .size = sizeof(struct fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

int lm_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
                 struct fid_cntr **cntr_fid, void *context)
{
	struct lm_domain *dom;
	struct lm_cntr *c;
	int ret;

	if (!domain || !attr || !cntr_fid)
		return -FI_EINVAL;
	if (attr->flags) /* reserved: must be 0 */
		return -FI_EBADFLAGS;
	/* Later API versions add event kinds (bytes counted); not offered. */
	if (attr->events != FI_CNTR_EVENTS_COMP)
		return -FI_ENOSYS;
	dom = lm_container_of(domain, struct lm_domain, domain_fid);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	ret = lm_wait_from_attr(dom->fabric, attr->wait_obj, attr->wait_set, &c->wait);
	if (ret) {
		free(c);
		return ret;
	}
	c->domain = dom;
	c->wait_obj = attr->wait_obj;
	atomic_init(&c->value, 0);
	atomic_init(&c->err, 0);
	atomic_init(&c->poll_value, 0);
	atomic_init(&c->poll_err, 0);
	atomic_init(&c->try_value, 0);
	atomic_init(&c->try_err, 0);
	atomic_init(&c->sleepers, 0);
	atomic_init(&c->armed, false);
	atomic_init(&c->ref, 0);
	lm_list_init(&c->progress);
	lm_lock_init(&c->lock, dom->shared);
	lm_lock_init(&c->plock, dom->shared);
	/* Held operations are added and fired from any thread. */
	lm_lock_init(&c->tlock, true);
	lm_list_init(&c->triggers);
	atomic_init(&c->ntrig, 0);

	c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	c->cntr_fid.fid.context = context;
	c->cntr_fid.fid.ops = (struct fi_ops *)&cntr_fid_ops;
	c->cntr_fid.ops = (struct fi_ops_cntr *)&cntr_ops;
	if (c->wait_obj == FI_WAIT_SET) {
		c->member.fid = &c->cntr_fid.fid;
		c->member.trywait = lm_cntr_trywait;
		lm_wait_add_member(c->wait, &c->member);
	}
	atomic_fetch_add(&dom->ref, 1);
	*cntr_fid = &c->cntr_fid;
	return 0;
}
