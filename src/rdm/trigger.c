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
