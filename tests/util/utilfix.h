/* utilfix.h - pieces the util object tests (cq.c, cntr.c) share: a counting
 * progress hook, and waiting on a wait set that another thread wakes.
 * Header-only, like check.h, so its checks count in the test program that
 * includes it. */
#ifndef LOOM_TEST_UTILFIX_H
#define LOOM_TEST_UTILFIX_H

#include <pthread.h>

#include "check.h"
#include "testdom.h"

/* A progress hook that counts its runs, then calls fire (on obj, the
 * object it feeds). */
struct hook {
	struct lm_progress p;
	void *obj;
	int runs;
	void (*fire)(struct hook *h);
};

static inline void hook_run(struct lm_progress *p)
{
	struct hook *h = lm_container_of(p, struct hook, p);

	h->runs++;
	h->fire(h);
}

#define HOOK_INIT(fire_, obj_)                                                           \
	{                                                                                \
		.p = {.run = hook_run, .fd = -1}, .obj = (obj_), .fire = (fire_)         \
	}

/* Open a wait set on t's fabric; NULL, after a failed check, when it
 * cannot be opened. */
static inline struct fid_wait *waitset_open(struct testdom *t, enum fi_wait_obj wait_obj)
{
	struct fi_wait_attr wattr = {.wait_obj = wait_obj};
	struct fid_wait *set;

	if (fi_wait_open(t->fabric, &wattr, &set)) {
		CHECK(!"wait open");
		return NULL;
	}
	return set;
}

/* fi_wait on set while waker(arg) runs on another thread and, about 50 ms
 * on, makes the object in the set ready: the wait ends with 0, neither
 * before that nor long after. */
static inline void waitset_woken(struct fid_wait *set, void *(*waker)(void *), void *arg)
{
	pthread_t th;
	uint64_t t0, dt;
	int ret;

	pthread_create(&th, NULL, waker, arg);
	t0 = lm_now_ms();
	ret = fi_wait(set, 5000);
	dt = lm_now_ms() - t0;
	pthread_join(th, NULL);
	CHECK_INT(ret, 0);
	CHECK(dt >= 40 && dt < 1000);
}

/* Close obj and the set it waits on: the set stays while obj uses it. */
static inline void waitset_close(struct fid_wait *set, struct fid *obj)
{
	CHECK_INT(fi_close(&set->fid), -FI_EBUSY);
	CHECK_INT(fi_close(obj), 0);
	CHECK_INT(fi_close(&set->fid), 0);
}

#endif
