/* waitkinds.c - the FI_WAIT_MUTEX_COND and FI_WAIT_POLLFD wait objects of
 * CQs, counters and EQs on the utiltest domain: what FI_GETWAITOBJ and
 * FI_GETWAIT hand out (a mutex and condition variable; a pollfd set, with
 * -FI_ETOOSMALL and the count when the array is too small), that the
 * application sleeping on them itself, after fi_trywait, is woken by a
 * completion, counter change or event written from another thread, and
 * that loom's own blocking reads (fi_cq_sread, fi_cntr_wait, fi_eq_sread)
 * work on them as on an fd. */
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"

static struct testdom td;

enum what { CQ, CNTR, EQ };

struct obj {
	enum what what;
	struct fid *fid;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_eq *eq;
};

static int open_obj(struct obj *o, enum what what, enum fi_wait_obj kind)
{
	int ret;

	o->what = what;
	if (what == CQ) {
		struct fi_cq_attr a = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = kind};

		ret = fi_cq_open(td.domain, &a, &o->cq, NULL);
		o->fid = ret ? NULL : &o->cq->fid;
	} else if (what == CNTR) {
		struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = kind};

		ret = fi_cntr_open(td.domain, &a, &o->cntr, NULL);
		o->fid = ret ? NULL : &o->cntr->fid;
	} else {
		struct fi_eq_attr a = {.wait_obj = kind, .flags = FI_WRITE};

		ret = fi_eq_open(td.fabric, &a, &o->eq, NULL);
		o->fid = ret ? NULL : &o->eq->fid;
	}
	return ret;
}

/* Something for o to report, as a provider or the application would. */
static void produce(struct obj *o)
{
	static int ctx;

	if (o->what == CQ)
		lm_cq_write(lm_container_of(o->cq, struct lm_cq, cq_fid), &ctx, FI_SEND, 0,
		            NULL, 0, 0, FI_ADDR_NOTAVAIL);
	else if (o->what == CNTR)
		fi_cntr_add(o->cntr, 1);
	else
		fi_eq_write(o->eq, FI_NOTIFY, &(struct fi_eq_entry){.context = &ctx},
		            sizeof(struct fi_eq_entry), 0);
}

/* Take what produce left; 1 if there was something. */
static int consume(struct obj *o)
{
	if (o->what == CQ) {
		struct fi_cq_entry e;

		return fi_cq_read(o->cq, &e, 1) == 1;
	}
	if (o->what == CNTR)
		return fi_cntr_read(o->cntr) > 0 && !fi_cntr_set(o->cntr, 0);
	{
		struct fi_eq_entry e;
		uint32_t ev;

		return fi_eq_read(o->eq, &ev, &e, sizeof(e), 0) == (ssize_t)sizeof(e);
	}
}

static void *later(void *arg)
{
	usleep(50 * 1000);
	produce(arg);
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The application's own sleep on what FI_GETWAIT gave, after fi_trywait,
 * until the other thread's report arrives: woken, not timed out. */
static void app_sleeps(struct obj *o, enum fi_wait_obj kind)
{
	struct fi_mutex_cond mc = {0};
	struct pollfd pfd[2];
	struct fi_wait_pollfd pf = {.nfds = 0, .fd = pfd};
	pthread_t t;
	uint64_t start;
	int woken = 0;

	if (kind == FI_WAIT_MUTEX_COND) {
		CHECK_INT(fi_control(o->fid, FI_GETWAIT, &mc), 0);
		CHECK(mc.mutex && mc.cond);
		if (!mc.mutex || !mc.cond)
			return;
	} else {
		/* Too small an array: the count it needs. */
		CHECK_INT(fi_control(o->fid, FI_GETWAIT, &pf), -FI_ETOOSMALL);
		CHECK_INT(pf.nfds, 1);
		pf.nfds = 2;
		CHECK_INT(fi_control(o->fid, FI_GETWAIT, &pf), 0);
		CHECK_INT(pf.nfds, 1);
		CHECK(pfd[0].fd >= 0 && (pfd[0].events & POLLIN));
		/* Nothing yet: not readable. */
		CHECK_INT(poll(pfd, 1, 0), 0);
	}
	CHECK_INT(fi_trywait(td.fabric, &o->fid, 1), 0);
	if (kind == FI_WAIT_MUTEX_COND)
		pthread_mutex_lock(mc.mutex);
	CHECK_INT(pthread_create(&t, NULL, later, o), 0);
	start = now_ms();
	if (kind == FI_WAIT_MUTEX_COND) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		woken = pthread_cond_timedwait(mc.cond, mc.mutex, &until) == 0;
		pthread_mutex_unlock(mc.mutex);
	} else {
		woken = poll(pfd, 1, 5000) == 1 && (pfd[0].revents & POLLIN);
	}
	pthread_join(t, NULL);
	CHECK(woken);
	CHECK(now_ms() - start < 4000);
	CHECK_INT(consume(o), 1);
}

/* loom's own blocking read on the object, fed from another thread. */
static void loom_sleeps(struct obj *o)
{
	pthread_t t;
	int ret;

	CHECK_INT(pthread_create(&t, NULL, later, o), 0);
	if (o->what == CQ) {
		struct fi_cq_entry e;

		ret = (int)fi_cq_sread(o->cq, &e, 1, NULL, 5000);
		CHECK_INT(ret, 1);
	} else if (o->what == CNTR) {
		CHECK_INT(fi_cntr_wait(o->cntr, 1, 5000), 0);
		fi_cntr_set(o->cntr, 0);
	} else {
		struct fi_eq_entry e;
		uint32_t ev;

		ret = (int)fi_eq_sread(o->eq, &ev, &e, sizeof(e), 5000, 0);
		CHECK_INT(ret, (int)sizeof(e));
	}
	pthread_join(t, NULL);
}

static void test_kind(enum what what, enum fi_wait_obj kind)
{
	struct obj o = {0};
	enum fi_wait_obj got = FI_WAIT_NONE;

	CHECK_INT(open_obj(&o, what, kind), 0);
	if (!o.fid)
		return;
	CHECK_INT(fi_control(o.fid, FI_GETWAITOBJ, &got), 0);
	CHECK_INT(got, kind);
	app_sleeps(&o, kind);
	loom_sleeps(&o);
	CHECK_INT(fi_close(o.fid), 0);
}

int main(void)
{
	if (testdom_start(&td, 60))
		return 1;
	for (int w = CQ; w <= EQ; w++) {
		test_kind((enum what)w, FI_WAIT_MUTEX_COND);
		test_kind((enum what)w, FI_WAIT_POLLFD);
	}
	testdom_close(&td);
	return check_done();
}
