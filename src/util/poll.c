/* poll.c - poll sets: one fi_poll call progresses a group of CQs and
 * counters and names those with something new to read. */
#include <stdlib.h>

#include "util.h"

struct lm_poll {
	struct fid_poll poll_fid;
	struct lm_domain *domain;
	struct lm_list members; /* struct poll_member */
	struct lm_lock lock;
};

struct poll_member {
	struct lm_list node;
	struct fid *fid;
	atomic_int *ref; /* the member's: held while it is in the set */
};

static struct lm_poll *to_poll(struct fid_poll *fid)
{
	return lm_container_of(fid, struct lm_poll, poll_fid);
}

static struct poll_member *find_member(struct lm_poll *ps, const struct fid *fid)
{
	struct lm_list *it;

	lm_list_foreach(&ps->members, it)
	{
		struct poll_member *m = lm_list_entry(it, struct poll_member, node);

		if (m->fid == fid)
			return m;
	}
	return NULL;
}

static int poll_add(struct fid_poll *pollset, struct fid *event_fid, uint64_t flags)
{
	struct lm_poll *ps = to_poll(pollset);
	struct lm_domain *owner;
	struct poll_member *m;
	atomic_int *ref;

	(void)flags; /* reserved */
	if (!event_fid)
		return -FI_EINVAL;
	switch (event_fid->fclass) {
	case FI_CLASS_CQ: {
		struct lm_cq *cq = lm_container_of(event_fid, struct lm_cq, cq_fid.fid);

		owner = cq->domain;
		ref = &cq->ref;
		break;
	}
	case FI_CLASS_CNTR: {
		struct lm_cntr *c =
		    lm_container_of(event_fid, struct lm_cntr, cntr_fid.fid);

		owner = c->domain;
		ref = &c->ref;
		break;
	}
	default:
		return -FI_EINVAL;
	}
	if (owner != ps->domain)
		return -FI_EINVAL;

	m = malloc(sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	m->fid = event_fid;
	m->ref = ref;
	lm_lock_acquire(&ps->lock);
	if (find_member(ps, event_fid)) {
		lm_lock_release(&ps->lock);
		free(m);
		return -FI_EALREADY;
	}
	lm_list_push_back(&ps->members, &m->node);
	/* Closing the CQ/counter while it is polled would leave a dangling
	 * member: it reports -FI_EBUSY until fi_poll_del. */
	atomic_fetch_add(ref, 1);
	lm_lock_release(&ps->lock);
	return 0;
}

static int poll_del(struct fid_poll *pollset, struct fid *event_fid, uint64_t flags)
{
	struct lm_poll *ps = to_poll(pollset);
	struct poll_member *m;

	(void)flags;
	lm_lock_acquire(&ps->lock);
	m = event_fid ? find_member(ps, event_fid) : NULL;
	if (!m) {
		lm_lock_release(&ps->lock);
		return -FI_EINVAL;
	}
	lm_list_remove(&m->node);
	lm_lock_release(&ps->lock);
	atomic_fetch_sub(m->ref, 1);
	free(m);
	return 0;
}

/* CQs are reported when not empty, counters when their value or error
 * count moved since the previous fi_poll (or the application's own
 * add/set).  A counter that does not fit in the array is not looked at,
 * so its change is still reported next time. */
static int poll_poll(struct fid_poll *pollset, void **context, int count)
{
	struct lm_poll *ps = to_poll(pollset);
	struct lm_list *it;
	int n = 0;

	if (!context || count <= 0)
		return -FI_EINVAL;
	lm_lock_acquire(&ps->lock);
	lm_list_foreach(&ps->members, it)
	{
		struct poll_member *m = lm_list_entry(it, struct poll_member, node);
		bool ready;

		if (n == count)
			break;
		if (m->fid->fclass == FI_CLASS_CQ)
			ready = lm_cq_poll_ready(
			    lm_container_of(m->fid, struct lm_cq, cq_fid.fid));
		else
			ready = lm_cntr_poll_changed(
			    lm_container_of(m->fid, struct lm_cntr, cntr_fid.fid));
		if (ready)
			context[n++] = m->fid->context;
	}
	lm_lock_release(&ps->lock);
	return n;
}

/* Closing releases the members (their references), like the reference
 * implementation; nothing else can be bound to a util poll set. */
static int poll_close(struct fid *fid)
{
	struct lm_poll *ps = lm_container_of(fid, struct lm_poll, poll_fid.fid);
	struct lm_list *n;

	while ((n = lm_list_pop_front(&ps->members))) {
		struct poll_member *m = lm_list_entry(n, struct poll_member, node);

		atomic_fetch_sub(m->ref, 1);
		free(m);
	}
	lm_lock_fini(&ps->lock);
	atomic_fetch_sub(&ps->domain->ref, 1);
	free(ps);
	return 0;
}

static const struct fi_ops poll_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = poll_close,
    .bind = lm_fid_no_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

static const struct fi_ops_poll poll_ops = {
    .size = sizeof(struct fi_ops_poll),
    .poll = poll_poll,
    .poll_add = poll_add,
    .poll_del = poll_del,
};

int lm_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                 struct fid_poll **pollset)
{
	struct lm_domain *dom;
	struct lm_poll *ps;

	/* attr carries only reserved flags, so NULL is accepted. */
	if (!domain || !pollset)
		return -FI_EINVAL;
	if (attr && attr->flags)
		return -FI_EBADFLAGS;
	dom = lm_container_of(domain, struct lm_domain, domain_fid);
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -FI_ENOMEM;
	ps->domain = dom;
	lm_list_init(&ps->members);
	lm_lock_init(&ps->lock, dom->shared);
	ps->poll_fid.fid.fclass = FI_CLASS_POLL;
	ps->poll_fid.fid.ops = (struct fi_ops *)&poll_fid_ops;
	ps->poll_fid.ops = (struct fi_ops_poll *)&poll_ops;
	atomic_fetch_add(&dom->ref, 1);
	*pollset = &ps->poll_fid;
	return 0;
}
