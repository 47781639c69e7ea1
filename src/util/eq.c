/* eq.c - event queues: one FIFO of control, CM, user and error events that
 * grows instead of dropping, with the wait objects of util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Payloads up to this size live in pooled events; larger ones (CM entries
 * with a lot of connection data, big user events) are malloc'd. */
#define EQ_INLINE 256
/* Most events per pool chunk: the queue grows past a large attr->size anyway. */
#define EQ_CHUNK_MAX 1024

struct eq_event {
	struct lm_list node;
	uint32_t event;
	bool is_err;
	bool pooled;
	bool owns_info; /* data holds an fi_eq_cm_entry whose info is ours */
	size_t len;
	struct fi_eq_err_entry err; /* is_err: err.err_data is our copy */
	unsigned char data[];
};

static bool is_cm_event(uint32_t event)
{
	return event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN;
}

static struct lm_eq *eq_of(struct fid_eq *eq_fid)
{
	return lm_container_of(eq_fid, struct lm_eq, eq_fid);
}

/* Caller holds eq->lock (the pool is not thread-safe). */
static struct eq_event *event_alloc(struct lm_eq *eq, size_t len)
{
	struct eq_event *ev = NULL;
	bool pooled = false;

	if (len <= EQ_INLINE) {
		ev = lm_bufpool_alloc(&eq->pool);
		pooled = ev != NULL;
	}
	if (!ev)
		ev = malloc(sizeof(*ev) + len);
	if (!ev)
		return NULL;
	memset(ev, 0, sizeof(*ev));
	ev->pooled = pooled;
	ev->len = len;
	return ev;
}

/* Caller holds eq->lock.  release_info: the event was never handed to the
 * application, so an info it carries is still ours to free. */
static void event_free(struct lm_eq *eq, struct eq_event *ev, bool release_info)
{
	if (release_info && ev->owns_info) {
		struct fi_eq_cm_entry cm;

		memcpy(&cm, ev->data, sizeof(cm));
		lm_info_free(cm.info);
	}
	if (ev->is_err)
		free(ev->err.err_data);
	if (ev->pooled)
		lm_bufpool_free(&eq->pool, ev);
	else
		free(ev);
}

static void event_push(struct lm_eq *eq, struct eq_event *ev)
{
	lm_list_push_back(&eq->events, &ev->node);
	eq->count++;
}

static void event_pop(struct lm_eq *eq, struct eq_event *ev)
{
	lm_list_remove(&ev->node);
	eq->count--;
}

/* err_data lent by the previous fi_eq_readerr expires with this call.
 * Caller holds eq->lock. */
static void expire_lent(struct lm_eq *eq)
{
	free(eq->lent_err_data);
	eq->lent_err_data = NULL;
}

static void run_progress(struct lm_eq *eq)
{
	struct lm_list *it;

	/* The hooks may post events (taking eq->lock), so they run under
	 * their own lock, never under the queue's. */
	lm_lock_acquire(&eq->progress_lock);
	lm_list_foreach(&eq->progress, it)
	{
		struct lm_progress *p = lm_list_entry(it, struct lm_progress, node);

		p->run(p);
	}
	lm_lock_release(&eq->progress_lock);
}

/* ---- provider side --------------------------------------------------- */

static ssize_t eq_post(struct lm_eq *eq, uint32_t event, const void *buf, size_t len,
                       bool provider)
{
	struct eq_event *ev;

	if (len && !buf)
		return -FI_EINVAL;
	lm_lock_acquire(&eq->lock);
	ev = event_alloc(eq, len);
	if (!ev) {
		lm_lock_release(&eq->lock);
		return -FI_ENOMEM;
	}
	ev->event = event;
	if (len)
		memcpy(ev->data, buf, len);
	if (provider && is_cm_event(event) && len >= sizeof(struct fi_eq_cm_entry)) {
		struct fi_eq_cm_entry cm;

		memcpy(&cm, buf, sizeof(cm));
		ev->owns_info = cm.info != NULL;
	}
	event_push(eq, ev);
	lm_lock_release(&eq->lock);
	if (eq->wait)
		lm_wait_signal(eq->wait);
	return (ssize_t)len;
}

ssize_t lm_eq_write(struct lm_eq *eq, uint32_t event, const void *buf, size_t len,
                    uint64_t flags)
{
	if (!eq || flags)
		return -FI_EINVAL;
	return eq_post(eq, event, buf, len, true);
}

int lm_eq_write_err(struct lm_eq *eq, const struct fi_eq_err_entry *err)
{
	struct eq_event *ev;
	void *copy = NULL;

	if (!eq || !err || (err->err_data_size && !err->err_data))
		return -FI_EINVAL;
	if (err->err_data_size) {
		copy = malloc(err->err_data_size);
		if (!copy)
			return -FI_ENOMEM;
		memcpy(copy, err->err_data, err->err_data_size);
	}
	lm_lock_acquire(&eq->lock);
	ev = event_alloc(eq, 0);
	if (!ev) {
		lm_lock_release(&eq->lock);
		free(copy);
		return -FI_ENOMEM;
	}
	ev->is_err = true;
	ev->err = *err;
	ev->err.err_data = copy;
	event_push(eq, ev);
	lm_lock_release(&eq->lock);
	if (eq->wait)
		lm_wait_signal(eq->wait);
	return 0;
}

void lm_eq_add_progress(struct lm_eq *eq, struct lm_progress *p)
{
	lm_lock_acquire(&eq->progress_lock);
	lm_list_push_back(&eq->progress, &p->node);
	lm_lock_release(&eq->progress_lock);
	if (eq->wait && p->fd >= 0)
		lm_wait_add_fd(eq->wait, p->fd);
}

void lm_eq_del_progress(struct lm_eq *eq, struct lm_progress *p)
{
	if (eq->wait && p->fd >= 0)
		lm_wait_del_fd(eq->wait, p->fd);
	lm_lock_acquire(&eq->progress_lock);
	lm_list_remove(&p->node);
	lm_lock_release(&eq->progress_lock);
}

/* Progress, then: is anything queued? */
static int eq_ready(struct fid *fid)
{
	struct lm_eq *eq = lm_container_of(fid, struct lm_eq, eq_fid.fid);
	int ret;

	run_progress(eq);
	lm_lock_acquire(&eq->lock);
	ret = eq->count ? -FI_EAGAIN : 0;
	lm_lock_release(&eq->lock);
	return ret;
}

int lm_eq_trywait(struct fid *fid)
{
	struct lm_eq *eq;

	if (!fid || fid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	eq = lm_container_of(fid, struct lm_eq, eq_fid.fid);
	if (!eq->wait)
		return -FI_EINVAL;
	/* A private wait object may hold a stale signal for events already
	 * read; clear it before looking, so an application that sleeps on
	 * the fd after a 0 here does not wake at once for nothing.  A write
	 * racing with this re-signals.  A wait set is shared with other
	 * objects, so its signal is left alone. */
	if (eq->wait_obj != FI_WAIT_SET)
		lm_wait_block(eq->wait, 0);
	return eq_ready(fid);
}

/* ---- application side ------------------------------------------------ */

static ssize_t eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
                       uint64_t flags)
{
	struct lm_eq *eq = eq_of(eq_fid);
	struct lm_list *front;
	struct eq_event *ev;
	size_t need, copy;
	ssize_t ret;

	if (!event || (len && !buf))
		return -FI_EINVAL;
	if (flags & ~FI_PEEK)
		return -FI_EBADFLAGS;
	run_progress(eq);

	lm_lock_acquire(&eq->lock);
	expire_lent(eq);
	front = lm_list_front(&eq->events);
	if (!front) {
		ret = -FI_EAGAIN;
		goto out;
	}
	ev = lm_list_entry(front, struct eq_event, node);
	if (ev->is_err) {
		ret = -FI_EAVAIL;
		goto out;
	}
	/* A CM entry's connection data is cut to the caller's buffer (man
	 * fi_eq: limited by the buffer space provided); any other event is
	 * returned whole or not at all, so nothing is silently lost. */
	need = ev->len;
	if (is_cm_event(ev->event))
		need = LM_MIN(need, sizeof(struct fi_eq_cm_entry));
	if (len < need) {
		ret = -FI_ETOOSMALL;
		goto out;
	}
	copy = LM_MIN(len, ev->len);
	if (copy)
		memcpy(buf, ev->data, copy);
	*event = ev->event;
	if (!(flags & FI_PEEK)) {
		event_pop(eq, ev);
		/* An info in a consumed CM entry now belongs to the caller. */
		event_free(eq, ev, false);
	}
	ret = (ssize_t)copy;
out:
	lm_lock_release(&eq->lock);
	return ret;
}

static ssize_t eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
                          uint64_t flags)
{
	struct lm_eq *eq = eq_of(eq_fid);
	/* Before 1.5 the entry ended at err_data and err_data always pointed
	 * into the provider; the field after it must not be touched. */
	bool old_abi = eq->fabric->fabric_fid.api_version < FI_VERSION(1, 5);
	size_t out_len = old_abi ? offsetof(struct fi_eq_err_entry, err_data_size)
	                         : sizeof(struct fi_eq_err_entry);
	struct lm_list *front;
	struct eq_event *ev;
	void *user_buf;
	size_t user_size, have;
	ssize_t ret;

	if (!buf)
		return -FI_EINVAL;
	if (flags & ~FI_PEEK)
		return -FI_EBADFLAGS;

	lm_lock_acquire(&eq->lock);
	expire_lent(eq);
	front = lm_list_front(&eq->events);
	ev = front ? lm_list_entry(front, struct eq_event, node) : NULL;
	if (!ev || !ev->is_err) {
		ret = -FI_EAGAIN;
		goto out;
	}
	user_buf = buf->err_data;
	user_size = old_abi ? 0 : buf->err_data_size;
	have = ev->err.err_data_size;

	buf->fid = ev->err.fid;
	buf->context = ev->err.context;
	buf->data = ev->err.data;
	buf->err = ev->err.err;
	buf->prov_errno = ev->err.prov_errno;
	if (user_size) {
		/* The application's buffer: copy what fits. */
		size_t n = LM_MIN(user_size, have);

		if (n)
			memcpy(user_buf, ev->err.err_data, n);
		buf->err_data_size = n;
	} else {
		/* Lend ours until the next read call. */
		buf->err_data = have ? ev->err.err_data : NULL;
		if (!old_abi)
			buf->err_data_size = have;
		if (!(flags & FI_PEEK)) {
			eq->lent_err_data = ev->err.err_data;
			ev->err.err_data = NULL;
		}
	}
	if (!(flags & FI_PEEK)) {
		event_pop(eq, ev);
		event_free(eq, ev, false);
	}
	ret = (ssize_t)out_len;
out:
	lm_lock_release(&eq->lock);
	return ret;
}

static ssize_t eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf,
                        size_t len, uint64_t flags)
{
	struct lm_eq *eq = eq_of(eq_fid);

	/* man fi_eq: without FI_WRITE at open the application may not write
	 * (the reference library lets it; loom holds it to the contract). */
	if (!(eq->flags & FI_WRITE))
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	return eq_post(eq, event, buf, len, false);
}

static ssize_t eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
                        int timeout, uint64_t flags)
{
	struct lm_eq *eq = eq_of(eq_fid);
	uint64_t start = lm_now_ms();

	/* man fi_eq: invalid with FI_WAIT_NONE or FI_WAIT_SET. */
	if (!eq->wait || eq->wait_obj == FI_WAIT_SET)
		return -FI_EINVAL;
	for (;;) {
		ssize_t ret = eq_read(eq_fid, event, buf, len, flags);
		int left;

		if (ret != -FI_EAGAIN)
			return ret;
		left = lm_timeout_left(timeout, start);
		if (!left)
			return -FI_EAGAIN;
		/* Timing out here is not final: the loop reads once more and
		 * then reports -FI_EAGAIN. */
		lm_wait_block(eq->wait, left);
	}
}

static const char *eq_strerror(struct fid_eq *eq_fid, int prov_errno,
                               const void *err_data, char *buf, size_t len)
{
	const char *s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);

	(void)eq_fid, (void)err_data;
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static int eq_control(struct fid *fid, int command, void *arg)
{
	struct lm_eq *eq = lm_container_of(fid, struct lm_eq, eq_fid.fid);

	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		if (!eq->wait)
			return -FI_ENODATA;
		return lm_wait_control(eq->wait, command, arg);
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = eq->wait_obj;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int eq_close(struct fid *fid)
{
	struct lm_eq *eq = lm_container_of(fid, struct lm_eq, eq_fid.fid);
	struct lm_list *n;

	if (atomic_load(&eq->ref))
		return -FI_EBUSY;
	if (eq->wait) {
		if (eq->wait_obj == FI_WAIT_SET)
			lm_wait_del_member(eq->wait, &eq->member);
		lm_wait_put(eq->wait);
	}
	/* Events never read are lost (man fi_eq), and so is what they own. */
	while ((n = lm_list_pop_front(&eq->events)))
		event_free(eq, lm_list_entry(n, struct eq_event, node), true);
	expire_lent(eq);
	lm_bufpool_fini(&eq->pool);
	lm_lock_fini(&eq->progress_lock);
	lm_lock_fini(&eq->lock);
	atomic_fetch_sub(&eq->fabric->ref, 1);
	free(eq);
	return 0;
}

static const struct fi_ops eq_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = eq_close,
    .bind = lm_fid_no_bind,
    .control = eq_control,
    .ops_open = lm_fid_no_ops_open,
};

static const struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

static int eq_wait_init(struct lm_eq *eq, const struct fi_eq_attr *attr)
{
	struct lm_wait *set;

	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
		return 0;
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_YIELD:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_POLLFD:
		return lm_wait_create(eq->fabric, attr->wait_obj, &eq->wait);
	case FI_WAIT_SET:
		if (!attr->wait_set || attr->wait_set->fid.fclass != FI_CLASS_WAIT)
			return -FI_EINVAL;
		set = lm_container_of(attr->wait_set, struct lm_wait, wait_fid);
		lm_wait_get(set);
		eq->member.fid = &eq->eq_fid.fid;
		eq->member.trywait = eq_ready;
		lm_wait_add_member(set, &eq->member);
		eq->wait = set;
		return 0;
	default:
		return -FI_EINVAL;
	}
}

int lm_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq_out,
               void *context)
{
	struct lm_fabric *fab;
	struct lm_eq *eq;
	size_t chunk;
	int ret;

	if (!fabric || !attr || !eq_out)
		return -FI_EINVAL;
	if (attr->flags & ~(FI_WRITE | FI_AFFINITY))
		return -FI_EBADFLAGS;
	fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);

	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->fabric = fab;
	eq->flags = attr->flags;
	/* attr->size is a minimum; the queue grows past it on demand, so it
	 * only sizes the pool's chunks. */
	chunk = attr->size ? LM_MIN(attr->size, (size_t)EQ_CHUNK_MAX) : LM_BUFPOOL_CHUNK;
	if (lm_bufpool_init(&eq->pool, sizeof(struct eq_event) + EQ_INLINE, 0, chunk,
	                    0)) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	ret = eq_wait_init(eq, attr);
	if (ret)
		goto err_pool;
	/* UNSPEC was resolved by lm_wait_create; report what we have. */
	eq->wait_obj =
	    attr->wait_obj == FI_WAIT_SET || !eq->wait ? attr->wait_obj : eq->wait->type;
	lm_list_init(&eq->events);
	lm_list_init(&eq->progress);
	/* An EQ belongs to the fabric, which has no threading model, and
	 * providers post CM events from whichever thread makes progress:
	 * always locked.  EQs are not on a data path. */
	lm_lock_init(&eq->lock, true);
	lm_lock_init(&eq->progress_lock, true);
	atomic_init(&eq->ref, 0);
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = (struct fi_ops *)&eq_fid_ops;
	eq->eq_fid.ops = (struct fi_ops_eq *)&eq_ops;
	atomic_fetch_add(&fab->ref, 1);
	*eq_out = &eq->eq_fid;
	return 0;

err_pool:
	lm_bufpool_fini(&eq->pool);
err_free:
	free(eq);
	return ret;
}
