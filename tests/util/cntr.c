/* cntr.c - counters on the utiltest domain: values and error counts,
 * progress hooks, fi_cntr_wait (thresholds, timeouts, error wake-ups)
 * woken from other threads, fd and wait-set wait objects, threading. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "utilfix.h"

static struct testdom td;

static struct lm_cntr *lmc(struct fid_cntr *c)
{
	return lm_container_of(c, struct lm_cntr, cntr_fid);
}

static struct fid_cntr *open_cntr(enum fi_wait_obj wait)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = wait};
	struct fid_cntr *c = NULL;
	int ret = fi_cntr_open(td.domain, &attr, &c, &td);

	CHECK_INT(ret, 0);
	return ret ? NULL : c;
}

static void test_open_errors(void)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP};
	struct lm_domain *dom = lm_container_of(td.domain, struct lm_domain, domain_fid);
	struct fid_cntr *c = (void *)0x1;

	CHECK_INT(fi_cntr_open(td.domain, NULL, &c, NULL), -FI_EINVAL);
	CHECK_INT(lm_cntr_open(td.domain, &attr, NULL, NULL), -FI_EINVAL);
	attr.flags = 1;
	CHECK_INT(fi_cntr_open(td.domain, &attr, &c, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.events = 1; /* FI_CNTR_EVENTS_BYTES in later versions */
	CHECK_INT(fi_cntr_open(td.domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = 42;
	CHECK_INT(fi_cntr_open(td.domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET;
	CHECK_INT(fi_cntr_open(td.domain, &attr, &c, NULL), -FI_EINVAL);
	CHECK(c == (void *)0x1);
	CHECK_INT(atomic_load(&dom->ref), 0);

	attr.wait_obj = FI_WAIT_NONE;
	CHECK_INT(fi_cntr_open(td.domain, &attr, &c, &attr), 0);
	CHECK_INT(c->fid.fclass, FI_CLASS_CNTR);
	CHECK(c->fid.context == &attr);
	CHECK_INT(atomic_load(&dom->ref), 1);
	atomic_fetch_add(&lmc(c)->ref, 1); /* bound to an endpoint */
	CHECK_INT(fi_close(&c->fid), -FI_EBUSY);
	atomic_fetch_sub(&lmc(c)->ref, 1);
	CHECK_INT(fi_close(&c->fid), 0);
	CHECK_INT(atomic_load(&dom->ref), 0);
}

static void test_values(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);
	enum fi_wait_obj wo = FI_WAIT_FD;
	uint64_t flags = 0;
	int fd = -7;

	if (!c)
		return;
	CHECK_HEX(fi_cntr_read(c), 0);
	CHECK_HEX(fi_cntr_readerr(c), 0);
	CHECK_INT(fi_cntr_add(c, 5), 0);
	CHECK_HEX(fi_cntr_read(c), 5);
	lm_cntr_inc(lmc(c));
	lm_cntr_add(lmc(c), 10);
	CHECK_HEX(fi_cntr_read(c), 16);
	CHECK_INT(fi_cntr_set(c, 3), 0);
	CHECK_HEX(fi_cntr_read(c), 3);
	CHECK_INT(fi_cntr_adderr(c, 2), 0);
	lm_cntr_inc_err(lmc(c));
	CHECK_HEX(fi_cntr_readerr(c), 3);
	CHECK_HEX(fi_cntr_read(c), 3);
	CHECK_INT(fi_cntr_seterr(c, 100), 0);
	CHECK_HEX(fi_cntr_readerr(c), 100);
	CHECK_INT(fi_cntr_set(c, UINT64_MAX), 0);
	CHECK_HEX(fi_cntr_read(c), UINT64_MAX);

	/* FI_WAIT_NONE: the caller polls. */
	CHECK_INT(fi_cntr_wait(c, UINT64_MAX, 10), 0);
	CHECK_INT(fi_cntr_set(c, 0), 0);
	CHECK_INT(fi_cntr_wait(c, 1, 10), -FI_ETIMEDOUT);
	CHECK_INT(fi_cntr_add(c, 1), 0);
	CHECK_INT(fi_cntr_wait(c, 1, 10), 0);
	CHECK_INT(fi_cntr_set(c, UINT64_MAX), 0);
	CHECK_INT(fi_control(&c->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	CHECK_INT(fi_control(&c->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK_INT(wo, FI_WAIT_NONE);
	CHECK_INT(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
	CHECK_HEX(flags, 0);
	flags = FI_TRANSMIT_COMPLETE;
	CHECK_INT(fi_control(&c->fid, FI_SETOPSFLAG, &flags), 0);
	flags = 0;
	CHECK_INT(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
	CHECK_HEX(flags, FI_TRANSMIT_COMPLETE);
	CHECK_INT(fi_control(&c->fid, FI_GETOPSFLAG, NULL), -FI_EINVAL);
	CHECK_INT(fi_control(&c->fid, FI_ENABLE, NULL), -FI_ENOSYS);
	CHECK_INT(fi_trywait(td.fabric, &(struct fid *){&c->fid}, 1), -FI_EINVAL);
	CHECK_INT(fi_close(&c->fid), 0);
}

/* Each run of the hook increments the counter. */
static void hook_inc(struct hook *h)
{
	lm_cntr_inc(h->obj);
}

static void test_progress(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC);
	struct hook h = HOOK_INIT(hook_inc, NULL);

	if (!c)
		return;
	h.obj = lmc(c);
	lm_cntr_add_progress(lmc(c), &h.p);
	CHECK_HEX(fi_cntr_read(c), 1);
	CHECK_HEX(fi_cntr_readerr(c), 0); /* runs the hook too */
	CHECK_INT(h.runs, 2);
	/* each wait round progresses: threshold 5 is reached by the hook */
	CHECK_INT(fi_cntr_wait(c, 5, 2000), 0);
	CHECK_INT(h.runs, 5);
	lm_cntr_del_progress(lmc(c), &h.p);
	CHECK_HEX(fi_cntr_read(c), 5);
	CHECK_INT(h.runs, 5);
	CHECK_INT(fi_close(&c->fid), 0);
}

/* ---- blocking ------------------------------------------------------------- */

enum action { INC, ADD_APP, INC_ERR };

struct delayed {
	struct fid_cntr *c;
	int delay_ms, n;
	enum action what;
};

static void *delayed_run(void *arg)
{
	struct delayed *d = arg;

	for (int i = 0; i < d->n; i++) {
		usleep(d->delay_ms * 1000);
		if (d->what == INC)
			lm_cntr_inc(lmc(d->c));
		else if (d->what == ADD_APP)
			fi_cntr_add(d->c, 1);
		else
			lm_cntr_inc_err(lmc(d->c));
	}
	return NULL;
}

static int timed_wait(struct fid_cntr *c, struct delayed *d, uint64_t threshold,
                      int timeout, uint64_t *dt)
{
	pthread_t th;
	uint64_t t0 = lm_now_ms();
	int ret;

	if (d)
		pthread_create(&th, NULL, delayed_run, d);
	ret = fi_cntr_wait(c, threshold, timeout);
	*dt = lm_now_ms() - t0;
	if (d)
		pthread_join(th, NULL);
	return ret;
}

static void test_wait(enum fi_wait_obj wait)
{
	struct fid_cntr *c = open_cntr(wait);
	struct delayed d;
	uint64_t dt;

	if (!c)
		return;
	/* already there: no sleep */
	CHECK_INT(timed_wait(c, NULL, 0, 1000, &dt), 0);
	CHECK(dt < 50);
	/* timeout accuracy */
	CHECK_INT(timed_wait(c, NULL, 1, 100, &dt), -FI_ETIMEDOUT);
	CHECK(dt >= 90 && dt < 1000);
	CHECK_INT(timed_wait(c, NULL, 1, 0, &dt), -FI_ETIMEDOUT);
	CHECK(dt < 50);
	CHECK_HEX(fi_cntr_readerr(c), 0); /* a timeout leaves errors alone */

	/* five provider increments 20 ms apart reach threshold 5 */
	d = (struct delayed){.c = c, .delay_ms = 20, .n = 5, .what = INC};
	CHECK_INT(timed_wait(c, &d, 5, 5000, &dt), 0);
	CHECK(dt >= 80 && dt < 1500);
	CHECK_HEX(fi_cntr_read(c), 5);

	/* the application's fi_cntr_add from another thread wakes too */
	d = (struct delayed){.c = c, .delay_ms = 50, .n = 1, .what = ADD_APP};
	CHECK_INT(timed_wait(c, &d, 6, -1, &dt), 0);
	CHECK(dt >= 40 && dt < 1000);

	/* an error count change ends the wait with -FI_EAVAIL */
	d = (struct delayed){.c = c, .delay_ms = 50, .n = 1, .what = INC_ERR};
	CHECK_INT(timed_wait(c, &d, 100, 5000, &dt), -FI_EAVAIL);
	CHECK(dt >= 40 && dt < 1000);
	CHECK_HEX(fi_cntr_readerr(c), 1);
	/* ... but an error from before the wait does not */
	CHECK_INT(timed_wait(c, NULL, 100, 50, &dt), -FI_ETIMEDOUT);
	CHECK_INT(fi_close(&c->fid), 0);
}

static void test_wait_fd(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_FD);
	struct epoll_event ev = {.events = EPOLLIN};
	struct fid *fids[1];
	int fd = -1, epfd;

	if (!c)
		return;
	fids[0] = &c->fid;
	CHECK_INT(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	CHECK(fd >= 0);
	epfd = epoll_create1(0);
	ev.data.fd = fd;
	CHECK_INT(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev), 0);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), 0);
	CHECK_INT(epoll_wait(epfd, &ev, 1, 0), 0);
	lm_cntr_inc(lmc(c));
	CHECK_INT(epoll_wait(epfd, &ev, 1, 100), 1);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), -FI_EAGAIN); /* it moved */
	CHECK_INT(fi_trywait(td.fabric, fids, 1), 0);          /* and was seen */
	CHECK_INT(epoll_wait(epfd, &ev, 1, 0), 0);
	lm_cntr_inc_err(lmc(c));
	CHECK_INT(epoll_wait(epfd, &ev, 1, 100), 1);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), -FI_EAGAIN);
	close(epfd);
	CHECK_INT(fi_close(&c->fid), 0);
}

static void test_wait_set(void)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP,
	                            .wait_obj = FI_WAIT_SET};
	struct fid_wait *set = waitset_open(&td, FI_WAIT_UNSPEC);
	struct fid_cntr *c;
	struct delayed d;
	int ret;

	if (!set)
		return;
	attr.wait_set = set;
	ret = fi_cntr_open(td.domain, &attr, &c, NULL);
	CHECK_INT(ret, 0);
	if (ret) {
		fi_close(&set->fid);
		return;
	}
	CHECK_INT(fi_wait(set, 0), -FI_ETIMEDOUT);
	d = (struct delayed){.c = c, .delay_ms = 50, .n = 1, .what = INC};
	waitset_woken(set, delayed_run, &d);
	CHECK_INT(fi_wait(set, 20), -FI_ETIMEDOUT); /* the change was seen */
	waitset_close(set, &c->fid);
}

/* ---- threads -------------------------------------------------------------- */

#define NTHREADS 4
#define PER      50000

struct mt {
	struct fid_cntr *c;
	atomic_int done;
	atomic_int backwards;
	int waiter_ret[2];
	uint64_t threshold[2];
};

static void *mt_inc(void *arg)
{
	struct mt *mt = arg;

	for (int i = 0; i < PER; i++)
		lm_cntr_inc(lmc(mt->c));
	atomic_fetch_add(&mt->done, 1);
	return NULL;
}

static void *mt_reader(void *arg)
{
	struct mt *mt = arg;
	uint64_t last = 0;

	while (atomic_load(&mt->done) < NTHREADS) {
		uint64_t v = fi_cntr_read(mt->c);

		if (v < last)
			atomic_fetch_add(&mt->backwards, 1);
		last = v;
	}
	return NULL;
}

struct waiter {
	struct mt *mt;
	int i;
};

static void *mt_waiter(void *arg)
{
	struct waiter *w = arg;

	w->mt->waiter_ret[w->i] = fi_cntr_wait(w->mt->c, w->mt->threshold[w->i], 20000);
	return NULL;
}

static void test_threads(void)
{
	struct mt mt = {.threshold = {NTHREADS * PER / 2, NTHREADS * PER}};
	struct waiter w[2];
	pthread_t th[NTHREADS], rd, wt[2];

	mt.c = open_cntr(FI_WAIT_UNSPEC);
	if (!mt.c)
		return;
	CHECK(lmc(mt.c)->lock.on);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct waiter){.mt = &mt, .i = i};
		pthread_create(&wt[i], NULL, mt_waiter, &w[i]);
	}
	pthread_create(&rd, NULL, mt_reader, &mt);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, mt_inc, &mt);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(rd, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(wt[i], NULL);
	CHECK_HEX(fi_cntr_read(mt.c), NTHREADS * PER);
	CHECK_INT(atomic_load(&mt.backwards), 0);
	CHECK_INT(mt.waiter_ret[0], 0);
	CHECK_INT(mt.waiter_ret[1], 0);
	CHECK_INT(fi_close(&mt.c->fid), 0);
}

/* Run on a FI_THREAD_DOMAIN domain: a counter there takes no locks. */
static void thread_domain_cntr(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);

	if (c) {
		CHECK(!lmc(c)->lock.on);
		CHECK(!lmc(c)->plock.on);
		lm_cntr_inc(lmc(c));
		CHECK_HEX(fi_cntr_read(c), 1);
		CHECK_INT(fi_close(&c->fid), 0);
	}
}

int main(void)
{
	if (testdom_start(&td, 60))
		return 1;
	test_open_errors();
	test_values();
	test_progress();
	test_wait(FI_WAIT_UNSPEC);
	test_wait(FI_WAIT_FD);
	test_wait(FI_WAIT_YIELD);
	test_wait_fd();
	test_wait_set();
	test_threads();
	CHECK_INT(testdom_run_on(&td, FI_THREAD_DOMAIN, thread_domain_cntr), 0);
	testdom_close(&td);
	return check_done();
}
