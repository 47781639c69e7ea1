/* eq.c - event queues through the public fi_eq_* calls on the utiltest
 * fabric, plus the provider side (lm_eq_write, error and CM events,
 * progress hooks): ordering, peek, sizes, errors, CM info ownership, every
 * wait object, blocking reads woken from another thread. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"

static struct testdom t;

static struct fid_eq *open_eq(enum fi_wait_obj wait, uint64_t flags, size_t size)
{
	struct fi_eq_attr attr = {.size = size, .flags = flags, .wait_obj = wait};
	struct fid_eq *eq = NULL;

	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), 0);
	return eq;
}

static struct lm_eq *lm(struct fid_eq *eq)
{
	return lm_container_of(eq, struct lm_eq, eq_fid);
}

static ssize_t post(struct fid_eq *eq, uint32_t event, void *ctx, uint64_t data)
{
	struct fi_eq_entry e = {.fid = &eq->fid, .context = ctx, .data = data};

	return fi_eq_write(eq, event, &e, sizeof(e), 0);
}

static void test_open_args(void)
{
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_NONE};
	struct fid_eq *eq = NULL;

	CHECK_INT(fi_eq_open(t.fabric, NULL, &eq, NULL), -FI_EINVAL);
	CHECK_INT(lm_eq_open(t.fabric, &attr, NULL, NULL), -FI_EINVAL);
	attr.flags = FI_READ;
	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_SET; /* no wait_set given */
	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), -FI_EINVAL);
	attr.wait_obj = (enum fi_wait_obj)99;
	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), -FI_EINVAL);
	CHECK(eq == NULL);
	/* An open EQ holds the fabric open. */
	struct lm_fabric *fab = lm_container_of(t.fabric, struct lm_fabric, fabric_fid);
	int before = atomic_load(&fab->ref);

	eq = open_eq(FI_WAIT_NONE, 0, 0);
	CHECK_INT(atomic_load(&fab->ref), before + 1);
	CHECK_INT(fi_close(&eq->fid), 0);
	CHECK_INT(atomic_load(&fab->ref), before);
}

static void test_wait_none(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE, 0, 0);
	struct fi_eq_entry e;
	enum fi_wait_obj wo = FI_WAIT_FD;
	uint32_t ev;
	int fd;

	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);
	/* No FI_WRITE at open: the application may not write. */
	CHECK_INT(post(eq, FI_NOTIFY, NULL, 1), -FI_EINVAL);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 0, 0), -FI_EINVAL);
	CHECK_INT(fi_control(&eq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	CHECK_INT(fi_control(&eq->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK_INT(wo, FI_WAIT_NONE);
	CHECK_INT(fi_control(&eq->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	CHECK_INT(fi_control(&eq->fid, 12345, &fd), -FI_ENOSYS);
	CHECK_INT(fi_trywait(t.fabric, (struct fid *[]){&eq->fid}, 1), -FI_EINVAL);
	/* The provider may always post. */
	struct fi_eq_entry in = {.fid = &eq->fid, .data = 5};
	CHECK_INT(lm_eq_write(lm(eq), FI_MR_COMPLETE, &in, sizeof(in), 0), sizeof(in));
	CHECK_INT(lm_eq_write(lm(eq), FI_MR_COMPLETE, NULL, 8, 0), -FI_EINVAL);
	CHECK_INT(lm_eq_write(lm(eq), FI_MR_COMPLETE, &in, sizeof(in), 1), -FI_EINVAL);
	memset(&e, 0, sizeof(e));
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_INT(ev, FI_MR_COMPLETE);
	CHECK_INT(e.data, 5);
	CHECK(e.fid == &eq->fid);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void test_read_write(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_UNSPEC, FI_WRITE, 4);
	struct fi_eq_entry e;
	char small[8];
	uint32_t ev = 77;

	CHECK_INT(post(eq, FI_NOTIFY, (void *)0x10, 42), sizeof(e));
	CHECK_INT(fi_eq_write(eq, FI_NOTIFY, &e, sizeof(e), 1), -FI_EBADFLAGS);
	CHECK_INT(fi_eq_write(eq, FI_NOTIFY, NULL, sizeof(e), 0), -FI_EINVAL);
	/* A plain event is returned whole or not at all. */
	CHECK_INT(fi_eq_read(eq, &ev, small, sizeof(small), 0), -FI_ETOOSMALL);
	CHECK_INT(ev, 77);
	CHECK_INT(fi_eq_read(eq, NULL, &e, sizeof(e), 0), -FI_EINVAL);
	CHECK_INT(fi_eq_read(eq, &ev, NULL, sizeof(e), 0), -FI_EINVAL);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), FI_SEND), -FI_EBADFLAGS);
	/* Peek leaves it queued. */
	memset(&e, 0, sizeof(e));
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), FI_PEEK), sizeof(e));
	CHECK_INT(ev, FI_NOTIFY);
	CHECK_INT(e.data, 42);
	CHECK(e.context == (void *)0x10);
	memset(&e, 0, sizeof(e));
	ev = 0;
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), FI_PEEK), sizeof(e));
	CHECK_INT(e.data, 42);
	memset(&e, 0, sizeof(e));
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e) + 100, 0), sizeof(e));
	CHECK_INT(ev, FI_NOTIFY);
	CHECK_INT(e.data, 42);
	CHECK(e.fid == &eq->fid);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);

	/* Far more events than attr.size: the queue grows, in order. */
	for (int i = 0; i < 5000; i++)
		CHECK_INT(post(eq, i % 2 ? FI_MR_COMPLETE : FI_NOTIFY, NULL, (uint64_t)i),
		          sizeof(e));
	int bad = 0;
	for (int i = 0; i < 5000; i++) {
		if (fi_eq_read(eq, &ev, &e, sizeof(e), 0) != sizeof(e) ||
		    e.data != (uint64_t)i || ev != (i % 2 ? FI_MR_COMPLETE : FI_NOTIFY))
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);

	/* User events of any size, including empty and bigger than inline. */
	char big[1000], out[1000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7);
	CHECK_INT(fi_eq_write(eq, 1000, big, sizeof(big), 0), sizeof(big));
	CHECK_INT(fi_eq_write(eq, 1001, NULL, 0, 0), 0);
	CHECK_INT(fi_eq_read(eq, &ev, out, sizeof(out) - 1, 0), -FI_ETOOSMALL);
	CHECK_INT(fi_eq_read(eq, &ev, out, sizeof(out), 0), sizeof(big));
	CHECK_INT(ev, 1000);
	CHECK(!memcmp(out, big, sizeof(big)));
	CHECK_INT(fi_eq_read(eq, &ev, NULL, 0, 0), 0);
	CHECK_INT(ev, 1001);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void test_cm(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE, FI_WRITE, 0);
	/* A CM entry followed by connection data. */
	_Alignas(8) uint8_t inbuf[sizeof(struct fi_eq_cm_entry) + 64];
	_Alignas(8) uint8_t outbuf[sizeof(inbuf)];
	struct fi_eq_cm_entry *in = (void *)inbuf, *out = (void *)outbuf;
	uint8_t *in_data = inbuf + sizeof(*in), *out_data = outbuf + sizeof(*out);
	uint32_t ev;

	memset(inbuf, 0, sizeof(inbuf));
	in->fid = &eq->fid;
	in->info = fi_dupinfo(t.info);
	CHECK(in->info != NULL);
	for (int i = 0; i < 64; i++)
		in_data[i] = (uint8_t)(100 + i);
	CHECK_INT(lm_eq_write(lm(eq), FI_CONNREQ, inbuf, sizeof(*in) + 32, 0),
	          sizeof(*in) + 32);
	/* Too small for even the CM header. */
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(*out) - 1, 0), -FI_ETOOSMALL);
	/* Peeking does not hand over the info. */
	memset(outbuf, 0, sizeof(outbuf));
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(outbuf), FI_PEEK), sizeof(*in) + 32);
	CHECK(out->info == in->info);
	/* Connection data is cut to the caller's buffer. */
	memset(outbuf, 0, sizeof(outbuf));
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(*out) + 8, 0), sizeof(*out) + 8);
	CHECK_INT(ev, FI_CONNREQ);
	CHECK(out->fid == &eq->fid);
	CHECK(out->info == in->info);
	CHECK(!memcmp(out_data, in_data, 8));
	CHECK_INT(out_data[8], 0);
	/* Now ours: ASan reports a double free if the EQ also freed it. */
	CHECK_STR(out->info->fabric_attr->prov_name, "utiltest");
	fi_freeinfo(out->info);

	/* FI_CONNECTED without info or data. */
	memset(in, 0, sizeof(*in));
	in->fid = &eq->fid;
	CHECK_INT(lm_eq_write(lm(eq), FI_CONNECTED, in, sizeof(*in), 0), sizeof(*in));
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(outbuf), 0), sizeof(*in));
	CHECK_INT(ev, FI_CONNECTED);
	CHECK(out->info == NULL);
	/* FI_SHUTDOWN posted as a bare fi_eq_entry-sized record is fine. */
	struct fi_eq_entry sh = {.fid = &eq->fid};
	CHECK_INT(lm_eq_write(lm(eq), FI_SHUTDOWN, &sh, sizeof(sh), 0), sizeof(sh));
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(outbuf), 0), sizeof(sh));
	CHECK_INT(ev, FI_SHUTDOWN);

	/* An info the application wrote is never the EQ's to free (it points
	 * at static storage: a free would crash under ASan). */
	static struct fi_info app_info;
	in->info = &app_info;
	CHECK_INT(fi_eq_write(eq, FI_CONNREQ, in, sizeof(*in), 0), sizeof(*in));

	/* Queued provider CONNREQs are released at close (LeakSanitizer
	 * would report them otherwise), peeked or not. */
	in->info = fi_dupinfo(t.info);
	CHECK_INT(lm_eq_write(lm(eq), FI_CONNREQ, in, sizeof(*in), 0), sizeof(*in));
	in->info = fi_dupinfo(t.info);
	CHECK_INT(lm_eq_write(lm(eq), FI_CONNREQ, inbuf, sizeof(inbuf), 0),
	          sizeof(inbuf));
	CHECK_INT(fi_eq_read(eq, &ev, outbuf, sizeof(outbuf), FI_PEEK), sizeof(*in));
	CHECK(out->info == &app_info);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void test_errors(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_UNSPEC, FI_WRITE, 0);
	struct fi_eq_err_entry err = {0}, got;
	char blob[10] = "0123456789", ubuf[16];
	struct fi_eq_entry e;
	uint32_t ev;

	CHECK_INT(fi_eq_readerr(eq, &got, 0), -FI_EAGAIN);
	CHECK_INT(fi_eq_readerr(eq, NULL, 0), -FI_EINVAL);
	err.fid = &eq->fid;
	err.context = (void *)0x77;
	err.data = 9;
	err.err = FI_ECONNREFUSED;
	err.prov_errno = -3;
	err.err_data = blob;
	err.err_data_size = sizeof(blob);
	CHECK_INT(lm_eq_write_err(lm(eq), &err), 0);
	blob[0] = 'X'; /* the EQ kept its own copy */
	err.err_data = NULL;
	CHECK_INT(lm_eq_write_err(lm(eq), &err), -FI_EINVAL); /* size without data */
	err.err_data_size = 0;
	CHECK_INT(lm_eq_write_err(lm(eq), &err), 0); /* second error, no data */
	CHECK_INT(post(eq, FI_NOTIFY, NULL, 1), sizeof(e));

	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAVAIL);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 100, 0), -FI_EAVAIL);
	CHECK_INT(fi_eq_readerr(eq, &got, FI_SEND), -FI_EBADFLAGS);

	/* Application buffer smaller than the data: truncated copy. */
	memset(&got, 0, sizeof(got));
	memset(ubuf, 0, sizeof(ubuf));
	got.err_data = ubuf;
	got.err_data_size = 4;
	CHECK_INT(fi_eq_readerr(eq, &got, FI_PEEK), sizeof(got));
	CHECK(got.fid == &eq->fid);
	CHECK(got.context == (void *)0x77);
	CHECK_INT(got.data, 9);
	CHECK_INT(got.err, FI_ECONNREFUSED);
	CHECK_INT(got.prov_errno, -3);
	CHECK(got.err_data == ubuf);
	CHECK_INT(got.err_data_size, 4);
	CHECK(!memcmp(ubuf, "0123\0", 5));
	/* No buffer (err_data_size 0): the EQ lends its copy until the next
	 * read call. */
	memset(&got, 0, sizeof(got));
	CHECK_INT(fi_eq_readerr(eq, &got, 0), sizeof(got));
	CHECK_INT(got.err_data_size, 10);
	CHECK(got.err_data != NULL && !memcmp(got.err_data, "0123456789", 10));
	/* Next: the data-less error, then the normal event. */
	memset(&got, 0, sizeof(got));
	got.err_data = ubuf;
	got.err_data_size = sizeof(ubuf);
	CHECK_INT(fi_eq_readerr(eq, &got, 0), sizeof(got));
	CHECK_INT(got.err_data_size, 0);
	CHECK_INT(got.err, FI_ECONNREFUSED);
	CHECK_INT(fi_eq_readerr(eq, &got, 0), -FI_EAGAIN);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_INT(e.data, 1);

	/* A 1.4 application: err_data always lent, and err_data_size (not in
	 * its struct) left alone. */
	struct lm_fabric *fab = lm_container_of(t.fabric, struct lm_fabric, fabric_fid);
	uint32_t saved = fab->fabric_fid.api_version;

	fab->fabric_fid.api_version = FI_VERSION(1, 4);
	err.err_data = blob;
	err.err_data_size = 3;
	CHECK_INT(lm_eq_write_err(lm(eq), &err), 0);
	memset(&got, 0xaa, sizeof(got));
	got.err_data = ubuf;
	CHECK_INT(fi_eq_readerr(eq, &got, 0),
	          offsetof(struct fi_eq_err_entry, err_data_size));
	CHECK(got.err_data != ubuf && !memcmp(got.err_data, "X12", 3));
	CHECK_HEX(got.err_data_size, (size_t)0xaaaaaaaaaaaaaaaaULL);
	fab->fabric_fid.api_version = saved;

	/* Errors still queued at close are released with their data. */
	err.err_data_size = 5;
	CHECK_INT(lm_eq_write_err(lm(eq), &err), 0);

	/* fi_eq_strerror: text of the error, into buf when given. */
	char sb[64];
	CHECK(fi_eq_strerror(eq, FI_EINVAL, NULL, sb, sizeof(sb)) == sb);
	CHECK_STR(sb, fi_strerror(FI_EINVAL));
	CHECK_STR(fi_eq_strerror(eq, -FI_EINVAL, NULL, NULL, 0), fi_strerror(FI_EINVAL));
	CHECK_STR(fi_eq_strerror(eq, FI_ETIMEDOUT, NULL, sb, 4), "Con");
	CHECK_INT(fi_close(&eq->fid), 0);
}

/* ---- blocking reads ----------------------------------------------------- */

struct writer {
	struct fid_eq *eq;
	int delay_ms;
	int count;
	int fd;     /* >= 0: write a byte here instead of posting */
	int failed; /* checked by the main thread (check.h is not thread-safe) */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	usleep((useconds_t)w->delay_ms * 1000);
	if (w->fd >= 0) {
		char c = 'x';

		w->failed += write(w->fd, &c, 1) != 1;
		return NULL;
	}
	for (int i = 0; i < w->count; i++) {
		struct fi_eq_entry e = {.data = (uint64_t)i};

		w->failed +=
		    lm_eq_write(lm(w->eq), FI_NOTIFY, &e, sizeof(e), 0) != sizeof(e);
	}
	return NULL;
}

static void test_sread(enum fi_wait_obj wo)
{
	struct fid_eq *eq = open_eq(wo, FI_WRITE, 0);
	struct writer w = {.eq = eq, .delay_ms = 100, .count = 1, .fd = -1};
	struct fi_eq_entry e;
	pthread_t th;
	uint64_t t0;
	uint32_t ev;
	ssize_t r;

	t0 = lm_now_ms();
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 0, 0), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 < 50);
	t0 = lm_now_ms();
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 60, 0), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 >= 59);
	CHECK(lm_now_ms() - t0 < 1000);

	/* Woken by a write from another thread, well before the timeout. */
	pthread_create(&th, NULL, writer_main, &w);
	t0 = lm_now_ms();
	r = fi_eq_sread(eq, &ev, &e, sizeof(e), 5000, 0);
	CHECK_INT(r, sizeof(e));
	CHECK(lm_now_ms() - t0 >= 90);
	CHECK(lm_now_ms() - t0 < 1000);
	pthread_join(th, NULL);
	CHECK_INT(w.failed, 0);
	CHECK_INT(ev, FI_NOTIFY);

	/* Infinite timeout, still woken. */
	w.delay_ms = 20;
	pthread_create(&th, NULL, writer_main, &w);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), -1, 0), sizeof(e));
	pthread_join(th, NULL);

	/* Two writers racing a blocking reader: nothing lost or doubled. */
	struct writer w2[2] = {{eq, 0, 3000, -1, 0}, {eq, 1, 3000, -1, 0}};
	pthread_t th2[2];
	int seen[3000] = {0}, got = 0;

	for (int i = 0; i < 2; i++)
		pthread_create(&th2[i], NULL, writer_main, &w2[i]);
	while (got < 6000 && fi_eq_sread(eq, &ev, &e, sizeof(e), 2000, 0) == sizeof(e)) {
		if (e.data < 3000)
			seen[e.data]++;
		got++;
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th2[i], NULL);
		CHECK_INT(w2[i].failed, 0);
	}
	CHECK_INT(got, 6000);
	int twice = 0;
	for (int i = 0; i < 3000; i++)
		twice += seen[i] == 2;
	CHECK_INT(twice, 3000);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void test_fd_epoll(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_FD, FI_WRITE, 0);
	struct writer w = {.eq = eq, .delay_ms = 50, .count = 1, .fd = -1};
	struct epoll_event pev = {.events = EPOLLIN}, out;
	struct fid *fids[] = {&eq->fid};
	enum fi_wait_obj wo = FI_WAIT_NONE;
	struct fi_eq_entry e;
	pthread_t th;
	int fd = -1, ep;
	uint32_t ev;

	CHECK_INT(fi_control(&eq->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK_INT(wo, FI_WAIT_FD);
	CHECK_INT(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
	CHECK(fd >= 0);
	ep = epoll_create1(0);
	CHECK_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &pev), 0);
	CHECK_INT(fi_trywait(t.fabric, fids, 1), 0);
	CHECK_INT(epoll_wait(ep, &out, 1, 0), 0);

	pthread_create(&th, NULL, writer_main, &w);
	CHECK_INT(epoll_wait(ep, &out, 1, 2000), 1);
	pthread_join(th, NULL);
	CHECK_INT(w.failed, 0);
	CHECK_INT(fi_trywait(t.fabric, fids, 1), -FI_EAGAIN);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	/* Drained: trywait says sleep, and the fd is quiet again. */
	CHECK_INT(fi_trywait(t.fabric, fids, 1), 0);
	CHECK_INT(epoll_wait(ep, &out, 1, 0), 0);
	/* A signal that arrives after trywait wakes the sleeper. */
	CHECK_INT(post(eq, FI_NOTIFY, NULL, 3), sizeof(e));
	CHECK_INT(epoll_wait(ep, &out, 1, 1000), 1);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_INT(e.data, 3);
	close(ep);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void test_wait_set(void)
{
	struct fi_wait_attr wattr = {.wait_obj = FI_WAIT_FD};
	struct fi_eq_attr attr = {.flags = FI_WRITE, .wait_obj = FI_WAIT_SET};
	struct fid_wait *set;
	struct fid_eq *eq = NULL;
	struct fi_eq_entry e;
	uint32_t ev;

	CHECK_INT(fi_wait_open(t.fabric, &wattr, &set), 0);
	attr.wait_set = set;
	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), 0);
	CHECK_INT(fi_wait(set, 20), -FI_ETIMEDOUT);
	CHECK_INT(fi_trywait(t.fabric, (struct fid *[]){&set->fid}, 1), 0);
	CHECK_INT(post(eq, FI_NOTIFY, NULL, 8), sizeof(e));
	CHECK_INT(fi_trywait(t.fabric, (struct fid *[]){&set->fid}, 1), -FI_EAGAIN);
	CHECK_INT(fi_trywait(t.fabric, (struct fid *[]){&eq->fid}, 1), -FI_EAGAIN);
	CHECK_INT(fi_wait(set, 1000), 0);
	/* man fi_eq: sread is not for EQs on a wait set. */
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 0, 0), -FI_EINVAL);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_INT(e.data, 8);
	CHECK_INT(fi_wait(set, 20), -FI_ETIMEDOUT);
	CHECK_INT(fi_close(&set->fid), -FI_EBUSY);
	CHECK_INT(fi_close(&eq->fid), 0);
	CHECK_INT(fi_close(&set->fid), 0);

	attr.wait_set = (struct fid_wait *)&t.domain->fid; /* not a wait set */
	CHECK_INT(fi_eq_open(t.fabric, &attr, &eq, NULL), -FI_EINVAL);
}

/* ---- progress hooks ------------------------------------------------------ */

struct hook {
	struct lm_progress p;
	struct lm_eq *eq;
	int runs;
	int post_on; /* post an event on this run (0: never) */
};

static void hook_run(struct lm_progress *p)
{
	struct hook *h = lm_container_of(p, struct hook, p);
	struct fi_eq_entry e = {.data = 500};
	char c;

	h->runs++;
	if (p->fd >= 0) {
		/* A transport hook: data on its fd becomes an event. */
		if (read(p->fd, &c, 1) == 1)
			lm_eq_write(h->eq, FI_NOTIFY, &e, sizeof(e), 0);
		return;
	}
	if (h->runs == h->post_on)
		lm_eq_write(h->eq, FI_NOTIFY, &e, sizeof(e), 0);
}

static void test_progress(void)
{
	struct fid_eq *eq = open_eq(FI_WAIT_UNSPEC, 0, 0);
	struct hook h = {.p = {.run = hook_run, .fd = -1}, .eq = lm(eq), .post_on = 3};
	struct fi_eq_entry e;
	uint32_t ev;

	lm_eq_add_progress(lm(eq), &h.p);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);
	CHECK_INT(h.runs, 1);
	CHECK_INT(fi_trywait(t.fabric, (struct fid *[]){&eq->fid}, 1), 0);
	CHECK_INT(h.runs, 2);
	/* Third run posts from inside the hook: read sees it at once. */
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_INT(h.runs, 3);
	CHECK_INT(e.data, 500);
	lm_eq_del_progress(lm(eq), &h.p);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);
	CHECK_INT(h.runs, 3);

	/* A hook's fd wakes a blocked reader. */
	int pfd[2];
	pthread_t th;
	CHECK_INT(pipe(pfd), 0);
	struct hook fh = {.p = {.run = hook_run, .fd = pfd[0]}, .eq = lm(eq)};
	struct writer w = {.delay_ms = 50, .fd = pfd[1]};

	lm_eq_add_progress(lm(eq), &fh.p);
	pthread_create(&th, NULL, writer_main, &w);
	uint64_t t0 = lm_now_ms();
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 5000, 0), sizeof(e));
	CHECK(lm_now_ms() - t0 < 1000);
	pthread_join(th, NULL);
	CHECK_INT(w.failed, 0);
	CHECK_INT(e.data, 500);
	lm_eq_del_progress(lm(eq), &fh.p);
	close(pfd[0]);
	close(pfd[1]);

	/* Bound objects keep the EQ open. */
	atomic_fetch_add(&lm(eq)->ref, 1);
	CHECK_INT(fi_close(&eq->fid), -FI_EBUSY);
	atomic_fetch_sub(&lm(eq)->ref, 1);
	CHECK_INT(fi_close(&eq->fid), 0);
}

int main(void)
{
	alarm(120); /* no hang: a stuck wait kills the test */
	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	if (!t.fabric)
		return check_done();
	test_open_args();
	test_wait_none();
	test_read_write();
	test_cm();
	test_errors();
	test_sread(FI_WAIT_UNSPEC);
	test_sread(FI_WAIT_FD);
	test_sread(FI_WAIT_YIELD);
	test_fd_epoll();
	test_wait_set();
	test_progress();
	testdom_close(&t);
	return check_done();
}
