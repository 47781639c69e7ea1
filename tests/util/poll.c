/* poll.c - poll sets on the utiltest domain: membership rules, which CQs
 * and counters fi_poll reports (and when it stops reporting them), the
 * progress it drives, and the references members hold. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"

static struct testdom td;

static struct lm_cq *lmcq(struct fid_cq *cq)
{
	return lm_container_of(cq, struct lm_cq, cq_fid);
}

static struct lm_cntr *lmc(struct fid_cntr *c)
{
	return lm_container_of(c, struct lm_cntr, cntr_fid);
}

static int cq_ctx, cntr_ctx, cq2_ctx;

struct hook {
	struct lm_progress p;
	struct lm_cq *cq;
	int runs, post;
};

static void hook_run(struct lm_progress *p)
{
	struct hook *h = lm_container_of(p, struct hook, p);

	h->runs++;
	if (h->post) {
		h->post = 0;
		lm_cq_write(h->cq, NULL, 0, 0, NULL, 0, 0, 0);
	}
}

static void test_poll(void)
{
	struct fi_cq_attr cattr = {.format = FI_CQ_FORMAT_CONTEXT};
	struct fi_cntr_attr nattr = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_poll_attr pattr = {0};
	struct fid_poll *ps = (void *)0x1;
	struct fid_cq *cq, *cq2;
	struct fid_cntr *cntr;
	struct fi_cq_entry e[4];
	struct hook h = {.p = {.run = hook_run, .fd = -1}};
	void *ctxs[4];
	struct lm_domain *dom = lm_container_of(td.domain, struct lm_domain, domain_fid);

	CHECK_INT(fi_poll_open(td.domain, &pattr, NULL), -FI_EINVAL);
	pattr.flags = 1;
	CHECK_INT(fi_poll_open(td.domain, &pattr, &ps), -FI_EBADFLAGS);
	CHECK(ps == (void *)0x1);
	pattr.flags = 0;
	if (fi_poll_open(td.domain, &pattr, &ps)) {
		CHECK(!"poll open");
		return;
	}
	CHECK_INT(ps->fid.fclass, FI_CLASS_POLL);
	CHECK_INT(atomic_load(&dom->ref), 1);
	if (fi_cq_open(td.domain, &cattr, &cq, &cq_ctx) ||
	    fi_cq_open(td.domain, &cattr, &cq2, &cq2_ctx) ||
	    fi_cntr_open(td.domain, &nattr, &cntr, &cntr_ctx)) {
		CHECK(!"cq/cntr open");
		return;
	}

	/* membership */
	CHECK_INT(fi_poll(ps, ctxs, 4), 0); /* an empty set */
	CHECK_INT(fi_poll_add(ps, &cq->fid, 0), 0);
	CHECK_INT(fi_poll_add(ps, &cntr->fid, 0), 0);
	CHECK_INT(fi_poll_add(ps, &cq->fid, 0), -FI_EALREADY);
	CHECK_INT(fi_poll_add(ps, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_poll_add(ps, &td.domain->fid, 0), -FI_EINVAL);
	CHECK_INT(fi_poll_del(ps, &cq2->fid, 0), -FI_EINVAL); /* not a member */
	CHECK_INT(fi_poll_del(ps, NULL, 0), -FI_EINVAL);
	CHECK_INT(atomic_load(&lmcq(cq)->ref), 1);
	CHECK_INT(atomic_load(&lmc(cntr)->ref), 1);
	CHECK_INT(fi_close(&cq->fid), -FI_EBUSY); /* polled: still in use */
	CHECK_INT(fi_close(&cntr->fid), -FI_EBUSY);

	/* bad arguments */
	CHECK_INT(fi_poll(ps, NULL, 4), -FI_EINVAL);
	CHECK_INT(fi_poll(ps, ctxs, 0), -FI_EINVAL);

	/* nothing happened */
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);

	/* a CQ is reported for as long as it is not empty */
	lm_cq_write(lmcq(cq), NULL, 0, 0, NULL, 0, 0, 0);
	ctxs[0] = NULL;
	CHECK_INT(fi_poll(ps, ctxs, 4), 1);
	CHECK(ctxs[0] == &cq_ctx);
	CHECK_INT(fi_poll(ps, ctxs, 4), 1);
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);
	/* errors count as "not empty" too */
	{
		struct fi_cq_err_entry err = {.err = FI_EIO};

		lm_cq_write_err(lmcq(cq), &err, 0);
		CHECK_INT(fi_poll(ps, ctxs, 4), 1);
		CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
		CHECK_INT(fi_poll(ps, ctxs, 4), 0);
	}

	/* a counter is reported once per change */
	lm_cntr_inc(lmc(cntr));
	ctxs[0] = NULL;
	CHECK_INT(fi_poll(ps, ctxs, 4), 1);
	CHECK(ctxs[0] == &cntr_ctx);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);
	lm_cntr_inc_err(lmc(cntr));
	CHECK_INT(fi_poll(ps, ctxs, 4), 1);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);
	/* the application's own add/set move the baseline */
	CHECK_INT(fi_cntr_add(cntr, 3), 0);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);
	CHECK_INT(fi_cntr_set(cntr, 0), 0);
	CHECK_INT(fi_cntr_seterr(cntr, 0), 0);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);

	/* both; then an array of one: the counter waits for the next poll */
	lm_cq_write(lmcq(cq), NULL, 0, 0, NULL, 0, 0, 0);
	lm_cntr_add(lmc(cntr), 2);
	CHECK_INT(fi_poll(ps, ctxs, 4), 2);
	CHECK(ctxs[0] == &cq_ctx && ctxs[1] == &cntr_ctx);
	lm_cntr_add(lmc(cntr), 2);
	CHECK_INT(fi_poll(ps, ctxs, 1), 1);
	CHECK(ctxs[0] == &cq_ctx);
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK_INT(fi_poll(ps, ctxs, 1), 1);
	CHECK(ctxs[0] == &cntr_ctx);
	CHECK_INT(fi_poll(ps, ctxs, 4), 0);

	/* fi_poll drives the members' progress */
	h.cq = lmcq(cq2);
	lm_cq_add_progress(h.cq, &h.p);
	CHECK_INT(fi_poll_add(ps, &cq2->fid, 0), 0);
	h.post = 1;
	ctxs[0] = NULL;
	CHECK_INT(fi_poll(ps, ctxs, 4), 1);
	CHECK(ctxs[0] == &cq2_ctx);
	CHECK_INT(h.runs, 1);
	lm_cq_del_progress(h.cq, &h.p);

	/* del releases the member; close of the set releases the rest */
	CHECK_INT(fi_poll_del(ps, &cq->fid, 0), 0);
	CHECK_INT(atomic_load(&lmcq(cq)->ref), 0);
	CHECK_INT(fi_poll_del(ps, &cq->fid, 0), -FI_EINVAL);
	lm_cq_write(lmcq(cq), NULL, 0, 0, NULL, 0, 0, 0);
	CHECK_INT(fi_poll(ps, ctxs, 4), 1); /* cq2 only */
	CHECK(ctxs[0] == &cq2_ctx);
	CHECK_INT(fi_close(&cq->fid), 0);
	CHECK_INT(fi_close(&ps->fid), 0);
	CHECK_INT(atomic_load(&lmcq(cq2)->ref), 0);
	CHECK_INT(atomic_load(&lmc(cntr)->ref), 0);
	CHECK_INT(fi_close(&cq2->fid), 0);
	CHECK_INT(fi_close(&cntr->fid), 0);
	CHECK_INT(atomic_load(&dom->ref), 0);

	/* NULL attr is accepted: it holds only reserved flags */
	CHECK_INT(fi_poll_open(td.domain, NULL, &ps), 0);
	CHECK_INT(fi_close(&ps->fid), 0);
}

/* A CQ from another domain cannot join. */
static void test_foreign(void)
{
	struct testdom other;
	struct fi_cq_attr cattr = {.format = FI_CQ_FORMAT_CONTEXT};
	struct fid_poll *ps;
	struct fid_cq *cq;

	if (testdom_open(&other, FI_THREAD_SAFE, NULL, NULL)) {
		CHECK(!"second domain");
		return;
	}
	if (!fi_poll_open(td.domain, &(struct fi_poll_attr){0}, &ps)) {
		if (!fi_cq_open(other.domain, &cattr, &cq, NULL)) {
			CHECK_INT(fi_poll_add(ps, &cq->fid, 0), -FI_EINVAL);
			CHECK_INT(fi_close(&cq->fid), 0);
		}
		CHECK_INT(fi_close(&ps->fid), 0);
	}
	testdom_close(&other);
}

int main(void)
{
	alarm(60); /* a lost wake-up fails the test instead of hanging it */
	if (testdom_open(&td, FI_THREAD_SAFE, NULL, NULL)) {
		fprintf(stderr, "cannot open the utiltest domain\n");
		return 1;
	}
	test_poll();
	test_foreign();
	testdom_close(&td);
	return check_done();
}
