/* trigger.c - triggered operations (FI_TRIGGER, man fi_trigger): a data
 * call whose flags (its own, or an alias's op flags) hold FI_TRIGGER names
 * a struct fi_triggered_context of FI_TRIGGER_THRESHOLD as its context.
 * The call is captured (struct lm_rdm_trig: the buffers' addresses, an
 * inject's bytes copied) and held on that counter (util's lm_cntr_trigger)
 * until the counter reaches the threshold; then it is issued as the
 * application would have, FI_TRIGGER cleared, and completes as usual with
 * the triggered context as its op_context.
 *
 * Counters move under endpoints' locks (completions), so what they
 * release is fired after progress lets go of the lock
 * (lm_rdm_triggers_run), or from the application's own counter calls.
 * A held operation keeps its endpoint open (fi_close: -FI_EBUSY) and its
 * counter too. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_trigger.h>

#include "rdm.h"

/* Issue attempts of a released operation the endpoint has no room for,
 * each after a progress call. */
#define TRIG_RETRIES 100000

/* Out of its domain's queue (deferred work), once fired or cancelled. */
static void work_unlink(struct lm_rdm_domain *dom, struct lm_rdm_work *w)
{
	pthread_mutex_lock(&dom->work_lock);
	lm_list_remove(&w->node);
	pthread_mutex_unlock(&dom->work_lock);
}

static void trig_free(struct lm_rdm_trig *tr)
{
	atomic_fetch_sub(&tr->ctx.ep->held, 1);
	atomic_fetch_sub(&tr->owner->ref, 1);
	free(tr);
}

static void trig_fire(struct lm_trigger *t)
{
	struct lm_rdm_trig *tr = lm_container_of(t, struct lm_rdm_trig, t);
	ssize_t ret;

	if (tr->w.work)
		work_unlink(tr->ctx.ep->dom, &tr->w);
	for (int i = 0; (ret = tr->issue(tr)) == -FI_EAGAIN && i < TRIG_RETRIES; i++)
		lm_rdm_progress(tr->ctx.ep, false);
	if (ret)
		LM_WARN(tr->ctx.ep->dom->util.fabric->prov, FI_LOG_EP_DATA,
		        "triggered operation not issued: %s\n", fi_strerror((int)-ret));
	trig_free(tr);
}

struct lm_rdm_trig *lm_rdm_trig_new(struct lm_rdm_ctx *ctx, size_t copy,
                                    ssize_t (*issue)(struct lm_rdm_trig *tr))
{
	struct lm_rdm_trig *tr = calloc(1, sizeof(*tr) + copy);

	if (!tr)
		return NULL;
	tr->ctx = *ctx;
	tr->ctx.alias = false;
	tr->issue = issue;
	tr->t.fire = trig_fire;
	/* A scalable endpoint's lane is closed with its endpoint. */
	tr->owner = ctx->ep->head ? ctx->ep->head : ctx->ep;
	atomic_fetch_add(&tr->owner->ref, 1);
	atomic_fetch_add(&ctx->ep->held, 1);
	return tr;
}

int lm_rdm_trig_new_iov(struct lm_rdm_ctx *ctx, const struct iovec *iov, size_t count,
                        bool copy, ssize_t (*issue)(struct lm_rdm_trig *tr),
                        struct lm_rdm_trig **out)
{
	struct lm_rdm_trig *tr;
	size_t len;

	if (!lm_iov_valid(iov, count, &len))
		return -FI_EINVAL;
	if (copy && len > ctx->ep->inject_size)
		return -FI_EMSGSIZE;
	tr = lm_rdm_trig_new(ctx, copy ? len : 0, issue);
	if (!tr)
		return -FI_ENOMEM;
	if (copy) {
		lm_copy_from_iov(tr->copy, iov, count, 0, len);
		tr->iov[0] = (struct iovec){tr->copy, len};
		tr->count = 1;
	} else {
		if (count)
			memcpy(tr->iov, iov, count * sizeof(*iov));
		tr->count = count;
	}
	*out = tr;
	return 0;
}

ssize_t lm_rdm_trig_hold(struct lm_rdm_trig *tr, void *context)
{
	struct fi_triggered_context *tc = context;
	struct lm_cntr *c;

	if (!tc || !tc->trigger.threshold.cntr) {
		trig_free(tr);
		return -FI_EINVAL;
	}
	if (tc->event_type != FI_TRIGGER_THRESHOLD) {
		trig_free(tr);
		return -FI_ENOSYS; /* XPU triggers: no device here */
	}
	c = lm_container_of(tc->trigger.threshold.cntr, struct lm_cntr, cntr_fid);
	if (tc->trigger.threshold.cntr->fid.fclass != FI_CLASS_CNTR ||
	    c->domain != &tr->ctx.ep->dom->util) {
		trig_free(tr);
		return -FI_EINVAL;
	}
	if (!(tr->ctx.ep->caps & FI_TRIGGER)) {
		trig_free(tr);
		return -FI_EINVAL;
	}
	tr->cntr = c;
	tr->context = context;
	tr->t.threshold = tc->trigger.threshold.threshold;
	lm_cntr_trigger(c, &tr->t); /* issued now if already there */
	return 0;
}

void lm_rdm_triggers_run(struct lm_rdm_ep *ep)
{
	const struct lm_rdm_report *reps[] = {
	    &ep->txrep, &ep->own_rxc.rep, ep->lane_txc ? &ep->lane_txc->rep : NULL,
	    ep->lane_rxc ? &ep->lane_rxc->rep : NULL};

	for (int i = 0; i < LM_CNTR_MAX; i++)
		if (ep->cntr[i])
			lm_cntr_triggers_run(ep->cntr[i]);
	for (size_t k = 0; k < LM_ARRAY_SIZE(reps); k++)
		for (int i = 0; reps[k] && i < LM_CNTR_MAX; i++)
			if (reps[k]->cntr[i])
				lm_cntr_triggers_run(reps[k]->cntr[i]);
}

/* ---- deferred work (fi_control(domain, FI_QUEUE_WORK), man fi_trigger) -------- *
 * A data transfer is a held operation whose report is the work's own
 * (kept in its provider context, which lives until the transfer ends):
 * no CQ entry unless its flags ask FI_COMPLETION, and completion_cntr
 * counted.  Counter work sets or adds when it fires. */

_Static_assert(sizeof(struct lm_rdm_report) <= sizeof(struct fi_context2),
               "a deferred transfer's report fits its work's context");

struct cntr_work {
	struct lm_trigger t;
	struct lm_rdm_work w;
	struct lm_rdm_domain *dom;
};

static void cntr_work_fire(struct lm_trigger *t)
{
	struct cntr_work *cw = lm_container_of(t, struct cntr_work, t);
	struct fi_op_cntr *op = cw->w.work->op.cntr;

	work_unlink(cw->dom, &cw->w);
	if (cw->w.work->op_type == FI_OP_CNTR_SET)
		fi_cntr_set(op->cntr, op->value);
	else
		fi_cntr_add(op->cntr, op->value);
	free(cw);
}

static struct lm_cntr *cntr_of(struct lm_rdm_domain *dom, struct fid_cntr *fid)
{
	struct lm_cntr *c;

	if (!fid || fid->fid.fclass != FI_CLASS_CNTR)
		return NULL;
	c = lm_container_of(fid, struct lm_cntr, cntr_fid);
	return c->domain == &dom->util ? c : NULL;
}

/* The transfer of work on its endpoint, held; or the error. */
static int work_transfer(struct lm_rdm_domain *dom, struct fi_deferred_work *work,
                         struct lm_rdm_trig **out)
{
	struct fid_ep *fid;
	struct lm_rdm_ctx *ctx;
	struct lm_rdm_report *rep = (struct lm_rdm_report *)&work->context;
	struct lm_rdm_trig *tr;
	const struct fi_msg_atomic *am = NULL;
	uint64_t flags;
	int kind = 0, ret;

	switch (work->op_type) {
	case FI_OP_SEND:
		fid = work->op.msg ? work->op.msg->ep : NULL;
		break;
	case FI_OP_TSEND:
		fid = work->op.tagged ? work->op.tagged->ep : NULL;
		break;
	case FI_OP_READ:
	case FI_OP_WRITE:
		fid = work->op.rma ? work->op.rma->ep : NULL;
		break;
	case FI_OP_ATOMIC:
		fid = work->op.atomic ? work->op.atomic->ep : NULL;
		break;
	case FI_OP_FETCH_ATOMIC:
		fid = work->op.fetch_atomic ? work->op.fetch_atomic->ep : NULL;
		break;
	case FI_OP_COMPARE_ATOMIC:
		fid = work->op.compare_atomic ? work->op.compare_atomic->ep : NULL;
		break;
	default:
		return -FI_ENOSYS; /* receives are the endpoints' own to post */
	}
	if (!fid || (fid->fid.fclass != FI_CLASS_EP && fid->fid.fclass != FI_CLASS_TX_CTX))
		return -FI_EINVAL;
	ctx = lm_container_of(fid, struct lm_rdm_ctx, ep_fid);
	if (ctx->ep->dom != dom || ctx->ep->connected)
		return -FI_EINVAL;
	if (work->completion_cntr && !cntr_of(dom, work->completion_cntr))
		return -FI_EINVAL;
	switch (work->op_type) {
	case FI_OP_SEND: {
		const struct fi_msg *m = &work->op.msg->msg;

		ret = lm_rdm_trig_new_iov(ctx, m->msg_iov, m->iov_count, false, lm_rdm_trig_send,
		                          &tr);
		if (ret)
			return ret;
		tr->u.msg.addr = m->addr;
		tr->u.msg.data = m->data;
		tr->context = m->context;
		flags = work->op.msg->flags;
		tr->u.msg.flags = flags;
		break;
	}
	case FI_OP_TSEND: {
		const struct fi_msg_tagged *m = &work->op.tagged->msg;

		ret = lm_rdm_trig_new_iov(ctx, m->msg_iov, m->iov_count, false, lm_rdm_trig_send,
		                          &tr);
		if (ret)
			return ret;
		tr->u.msg.addr = m->addr;
		tr->u.msg.tag = m->tag;
		tr->u.msg.data = m->data;
		tr->u.msg.tagged = true;
		tr->context = m->context;
		flags = work->op.tagged->flags;
		tr->u.msg.flags = flags;
		break;
	}
	case FI_OP_READ:
	case FI_OP_WRITE: {
		const struct fi_msg_rma *m = &work->op.rma->msg;

		if (m->rma_iov_count != 1 || !m->rma_iov)
			return -FI_EINVAL;
		ret = lm_rdm_trig_new_iov(ctx, m->msg_iov, m->iov_count, false, lm_rdm_trig_rma,
		                          &tr);
		if (ret)
			return ret;
		tr->u.rma.write = work->op_type == FI_OP_WRITE;
		tr->u.rma.addr = m->addr;
		tr->u.rma.raddr = m->rma_iov[0].addr;
		tr->u.rma.key = m->rma_iov[0].key;
		tr->u.rma.data = m->data;
		tr->context = m->context;
		flags = work->op.rma->flags;
		tr->u.rma.flags = flags;
		break;
	}
	default: { /* the atomics */
		const struct fi_msg_fetch *fetch = NULL;
		const struct fi_msg_compare *cmp = NULL;

		if (work->op_type == FI_OP_ATOMIC) {
			am = &work->op.atomic->msg;
			flags = work->op.atomic->flags;
		} else if (work->op_type == FI_OP_FETCH_ATOMIC) {
			am = &work->op.fetch_atomic->msg;
			fetch = &work->op.fetch_atomic->fetch;
			flags = work->op.fetch_atomic->flags;
			kind = LM_ATOMIC_FETCH;
		} else {
			am = &work->op.compare_atomic->msg;
			fetch = &work->op.compare_atomic->fetch;
			cmp = &work->op.compare_atomic->compare;
			flags = work->op.compare_atomic->flags;
			kind = LM_ATOMIC_COMPARE;
		}
		tr = lm_rdm_trig_new(ctx, 0, lm_rdm_trig_atomic);
		if (!tr)
			return -FI_ENOMEM;
		if (am->iov_count > LM_IOV_LIMIT || am->rma_iov_count != 1 || !am->rma_iov ||
		    (fetch && fetch->iov_count > LM_IOV_LIMIT) ||
		    (cmp && cmp->iov_count > LM_IOV_LIMIT))
			goto einval;
		memcpy(tr->u.atomic.iov, am->msg_iov, am->iov_count * sizeof(struct fi_ioc));
		tr->u.atomic.count = am->iov_count;
		if (fetch) {
			memcpy(tr->u.atomic.res, fetch->msg_iov,
			       fetch->iov_count * sizeof(struct fi_ioc));
			tr->u.atomic.res_count = fetch->iov_count;
		}
		if (cmp) {
			memcpy(tr->u.atomic.cmp, cmp->msg_iov, cmp->iov_count * sizeof(struct fi_ioc));
			tr->u.atomic.cmp_count = cmp->iov_count;
		}
		tr->u.atomic.dest = am->addr;
		tr->u.atomic.addr = am->rma_iov[0].addr;
		tr->u.atomic.key = am->rma_iov[0].key;
		tr->u.atomic.dt = (int)am->datatype;
		tr->u.atomic.op = (int)am->op;
		tr->u.atomic.kind = kind;
		tr->u.atomic.flags = flags;
		tr->context = am->context;
		break;
	}
	}
	/* Reported as deferred work is: the CQ only when asked, and
	 * completion_cntr whatever the kind. */
	memset(rep, 0, sizeof(*rep));
	rep->cq = ctx->txrep->cq;
	rep->selective = true;
	rep->cntr[LM_CNTR_SEND] = rep->cntr[LM_CNTR_READ] = rep->cntr[LM_CNTR_WRITE] =
	    work->completion_cntr ? cntr_of(dom, work->completion_cntr) : NULL;
	tr->ctx.txrep = rep;
	*out = tr;
	return 0;
einval:
	trig_free(tr);
	return -FI_EINVAL;
}

static int work_queue(struct lm_rdm_domain *dom, struct fi_deferred_work *work)
{
	struct lm_cntr *trig = work ? cntr_of(dom, work->triggering_cntr) : NULL;
	struct lm_rdm_work *w;
	struct lm_trigger *t;
	int ret;

	if (!trig)
		return -FI_EINVAL;
	if (work->op_type == FI_OP_CNTR_SET || work->op_type == FI_OP_CNTR_ADD) {
		struct cntr_work *cw;

		if (work->completion_cntr || !work->op.cntr || !cntr_of(dom, work->op.cntr->cntr))
			return -FI_EINVAL;
		cw = calloc(1, sizeof(*cw));
		if (!cw)
			return -FI_ENOMEM;
		cw->dom = dom;
		cw->t.fire = cntr_work_fire;
		w = &cw->w;
		t = &cw->t;
	} else {
		struct lm_rdm_trig *tr;

		ret = work_transfer(dom, work, &tr);
		if (ret)
			return ret;
		w = &tr->w;
		t = &tr->t;
	}
	w->work = work;
	w->cntr = trig;
	w->t = t;
	t->threshold = work->threshold;
	pthread_mutex_lock(&dom->work_lock);
	lm_list_push_back(&dom->work, &w->node);
	pthread_mutex_unlock(&dom->work_lock);
	lm_cntr_trigger(trig, t); /* fired now if the counter is there */
	return 0;
}

/* Cancel work (NULL: all of it, FI_FLUSH_WORK) or, flushing, all the
 * work of one triggering counter (match_cntr).  -FI_ENOENT when one asked
 * for by name is not held (fired already, or never queued). */
static int work_cancel(struct lm_rdm_domain *dom, struct fi_deferred_work *work,
                       bool flush)
{
	struct lm_list gone, *it, *next;
	bool found = false;

	lm_list_init(&gone);
	pthread_mutex_lock(&dom->work_lock);
	for (it = dom->work.next; it != &dom->work; it = next) {
		struct lm_rdm_work *w = lm_container_of(it, struct lm_rdm_work, node);

		next = it->next;
		if (flush ? work && work->triggering_cntr &&
		                &w->cntr->cntr_fid != work->triggering_cntr
		          : w->work != work)
			continue;
		if (!lm_cntr_untrigger(w->cntr, w->t))
			continue; /* firing now */
		lm_list_remove(it);
		lm_list_push_back(&gone, it);
		found = true;
	}
	pthread_mutex_unlock(&dom->work_lock);
	while ((it = lm_list_pop_front(&gone))) {
		struct lm_rdm_work *w = lm_container_of(it, struct lm_rdm_work, node);

		if (w->t->fire == cntr_work_fire)
			free(lm_container_of(w->t, struct cntr_work, t));
		else
			trig_free(lm_container_of(w->t, struct lm_rdm_trig, t));
	}
	return found || flush ? 0 : -FI_ENOENT;
}

int lm_rdm_work_control(struct lm_domain *udom, int command, void *arg)
{
	struct lm_rdm_domain *dom = lm_container_of(udom, struct lm_rdm_domain, util);

	switch (command) {
	case FI_QUEUE_WORK:
		return work_queue(dom, arg);
	case FI_CANCEL_WORK:
		return arg ? work_cancel(dom, arg, false) : -FI_EINVAL;
	case FI_FLUSH_WORK:
		return work_cancel(dom, arg, true);
	default:
		return -FI_ENOSYS;
	}
}
