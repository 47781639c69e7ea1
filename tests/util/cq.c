/* cq.c - completion queues on the utiltest domain: formats, errors and
 * err_data rules, overflow order, progress hooks, blocking reads and wait
 * objects (fd in epoll, wait sets), and concurrent writers and readers. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "utilfix.h"

static struct testdom td;

static struct lm_cq *lmcq(struct fid_cq *cq)
{
	return lm_container_of(cq, struct lm_cq, cq_fid);
}

static struct fid_cq *open_cq(enum fi_cq_format format, enum fi_wait_obj wait,
                              size_t size)
{
	struct fi_cq_attr attr = {.size = size, .format = format, .wait_obj = wait};
	struct fid_cq *cq = NULL;
	int ret = fi_cq_open(td.domain, &attr, &cq, &td);

	CHECK_INT(ret, 0);
	return ret ? NULL : cq;
}

static void *ctx(uintptr_t i)
{
	return (void *)(i + 0x1000);
}

static void test_open_errors(void)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT};
	struct lm_domain *dom = lm_container_of(td.domain, struct lm_domain, domain_fid);
	struct fid_cq *cq = (void *)0x1;

	CHECK_INT(fi_cq_open(td.domain, NULL, &cq, NULL), -FI_EINVAL);
	CHECK_INT(lm_cq_open(td.domain, &attr, NULL, NULL), -FI_EINVAL);
	attr.format = 99;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.format = FI_CQ_FORMAT_MSG;
	attr.wait_obj = 99;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET; /* and no set */
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.wait_cond = 7;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_cond = FI_CQ_COND_NONE;
	attr.size = SIZE_MAX;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.size = ((size_t)1 << 24) + 1;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EINVAL);
	attr.size = 0;
	attr.flags = FI_SEND;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, NULL), -FI_EBADFLAGS);
	CHECK(cq == (void *)0x1); /* outputs set only on success */
	CHECK_INT(atomic_load(&dom->ref), 0);

	attr.flags = FI_AFFINITY;
	CHECK_INT(fi_cq_open(td.domain, &attr, &cq, &attr), 0);
	CHECK_INT(cq->fid.fclass, FI_CLASS_CQ);
	CHECK(cq->fid.context == &attr);
	CHECK_INT(lm_ring_capacity(&lmcq(cq)->ring), 1024); /* the default size */
	CHECK_INT(atomic_load(&dom->ref), 1);
	/* The domain cannot go while the CQ is open. */
	CHECK_INT(fi_close(&td.domain->fid), -FI_EBUSY);
	CHECK_INT(fi_close(&cq->fid), 0);
	CHECK_INT(atomic_load(&dom->ref), 0);
}

/* Each format returns exactly its struct's fields, packed back to back. */
static void test_formats(void)
{
	static const struct {
		enum fi_cq_format f;
		size_t size;
	} fmts[] = {
	    {FI_CQ_FORMAT_UNSPEC, sizeof(struct fi_cq_entry)},
	    {FI_CQ_FORMAT_CONTEXT, sizeof(struct fi_cq_entry)},
	    {FI_CQ_FORMAT_MSG, sizeof(struct fi_cq_msg_entry)},
	    {FI_CQ_FORMAT_DATA, sizeof(struct fi_cq_data_entry)},
	    {FI_CQ_FORMAT_TAGGED, sizeof(struct fi_cq_tagged_entry)},
	};
	char bufmem[64];

	for (size_t k = 0; k < LM_ARRAY_SIZE(fmts); k++) {
		struct fi_cq_tagged_entry out[3];
		struct fid_cq *cq = open_cq(fmts[k].f, FI_WAIT_NONE, 8);
		unsigned char *raw = (unsigned char *)out;

		if (!cq)
			continue;
		CHECK_INT(lmcq(cq)->entry_size, fmts[k].size);
		for (int i = 0; i < 2; i++)
			CHECK_INT(lm_cq_write(lmcq(cq), ctx(i), FI_RECV | FI_TAGGED,
			                      100 + i, bufmem + i, 0xda7a0 + i,
			                      0x7a90 + i, 5),
			          0);
		memset(out, 0xee, sizeof(out));
		CHECK_INT(fi_cq_read(cq, out, 3), 2);
		for (int i = 0; i < 2; i++) {
			struct fi_cq_tagged_entry e;

			memset(&e, 0, sizeof(e));
			memcpy(&e, raw + i * fmts[k].size, fmts[k].size);
			CHECK(e.op_context == ctx(i));
			if (fmts[k].size >= sizeof(struct fi_cq_msg_entry)) {
				CHECK_HEX(e.flags, FI_RECV | FI_TAGGED);
				CHECK_INT(e.len, 100 + i);
			}
			if (fmts[k].size >= sizeof(struct fi_cq_data_entry)) {
				CHECK(e.buf == bufmem + i);
				CHECK_HEX(e.data, 0xda7a0 + i);
			}
			if (fmts[k].size == sizeof(struct fi_cq_tagged_entry))
				CHECK_HEX(e.tag, 0x7a90 + i);
		}
		/* Nothing written past the two entries. */
		CHECK_INT(raw[2 * fmts[k].size], 0xee);
		CHECK_INT(fi_cq_read(cq, out, 3), -FI_EAGAIN);
		CHECK_INT(fi_close(&cq->fid), 0);
	}
}

static void test_count_and_args(void)
{
	struct fi_cq_entry e[8];
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);

	if (!cq)
		return;
	CHECK_INT(fi_cq_read(cq, e, 1), -FI_EAGAIN);
	CHECK_INT(fi_cq_read(cq, NULL, 0), -FI_EAGAIN); /* count 0: progress only */
	for (int i = 0; i < 5; i++)
		lm_cq_write(lmcq(cq), ctx(i), 0, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_cq_read(cq, NULL, 1), -FI_EINVAL);
	CHECK_INT(fi_cq_readfrom(cq, NULL, 2, NULL), -FI_EINVAL);
	CHECK_INT(fi_cq_read(cq, NULL, 0), 0);
	CHECK_INT(fi_cq_read(cq, e, 3), 3);
	CHECK(e[0].op_context == ctx(0) && e[2].op_context == ctx(2));
	CHECK_INT(fi_cq_read(cq, e, 8), 2);
	CHECK(e[0].op_context == ctx(3) && e[1].op_context == ctx(4));
	CHECK_INT(fi_cq_read(cq, e, 8), -FI_EAGAIN);
	CHECK_INT(fi_cq_readerr(cq, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_close(&cq->fid), 0);
}

static void test_readfrom(void)
{
	struct fi_cq_msg_entry e[4];
	fi_addr_t src[4] = {1, 1, 1, 1};
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_MSG, FI_WAIT_NONE, 0);

	if (!cq)
		return;
	lm_cq_write(lmcq(cq), ctx(0), FI_RECV, 3, NULL, 0, 0, 77);
	lm_cq_write(lmcq(cq), ctx(1), FI_SEND, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_cq_readfrom(cq, e, 4, src), 2);
	CHECK_HEX(src[0], 77);
	CHECK_HEX(src[1], FI_ADDR_NOTAVAIL);
	CHECK_HEX(src[2], 1); /* untouched */
	CHECK_HEX(e[0].flags, FI_RECV);
	CHECK_INT(e[0].len, 3);
	CHECK_INT(fi_close(&cq->fid), 0);
}

static const char *my_strerror(struct lm_cq *cq, int prov_errno, const void *err_data)
{
	(void)cq, (void)err_data;
	return prov_errno == 1234 ? "link on fire" : NULL;
}

static void test_errors(void)
{
	struct fi_cq_tagged_entry e[4];
	struct fi_cq_err_entry err, in;
	unsigned char data[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ubuf[16];
	char sbuf[64];
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	struct lm_cq *lcq;

	if (!cq)
		return;
	lcq = lmcq(cq);
	memset(&in, 0, sizeof(in));
	in.op_context = ctx(9);
	in.flags = FI_RECV | FI_MSG;
	in.len = 10;
	in.olen = 90;
	in.tag = 0x55;
	in.err = FI_ETRUNC;
	in.prov_errno = 1234;
	in.err_data = data;
	in.err_data_size = sizeof(data);

	CHECK_INT(lm_cq_write_err(lcq, NULL, 0), -FI_EINVAL);
	err = in;
	err.err = 0;
	CHECK_INT(lm_cq_write_err(lcq, &err, 0), -FI_EINVAL);

	/* success, error, success: errors come out in order, out of band */
	CHECK_INT(lm_cq_write(lcq, ctx(1), FI_SEND, 0, NULL, 0, 0, 0), 0);
	CHECK_INT(lm_cq_write_err(lcq, &in, 42), 0);
	memset(data, 0, sizeof(data)); /* the CQ kept its own copy */
	CHECK_INT(lm_cq_write(lcq, ctx(2), FI_SEND, 0, NULL, 0, 0, 0), 0);

	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK(e[0].op_context == ctx(1));
	CHECK_INT(fi_cq_read(cq, e, 4), -FI_EAVAIL);
	CHECK_INT(fi_cq_read(cq, NULL, 0), -FI_EAVAIL);

	/* err_data_size 0 on input: the provider's buffer is returned. */
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK(err.op_context == ctx(9));
	CHECK_HEX(err.flags, FI_RECV | FI_MSG);
	CHECK_INT(err.len, 10);
	CHECK_INT(err.olen, 90);
	CHECK_HEX(err.tag, 0x55);
	CHECK_INT(err.err, FI_ETRUNC);
	CHECK_INT(err.prov_errno, 1234);
	CHECK_INT(err.err_data_size, 8);
	CHECK(err.err_data != NULL && err.err_data != (void *)data);
	if (err.err_data)
		CHECK_INT(((unsigned char *)err.err_data)[7], 8);
	CHECK_INT(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK(e[0].op_context == ctx(2));

	/* A user buffer (API >= 1.5): filled up to its size. */
	data[0] = 0xa1, data[1] = 0xa2, data[2] = 0xa3, data[3] = 0xa4, data[4] = 0xa5;
	CHECK_INT(lm_cq_write_err(lcq, &in, 0), 0);
	memset(ubuf, 0, sizeof(ubuf));
	memset(&err, 0, sizeof(err));
	err.err_data = ubuf;
	err.err_data_size = 4;
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK(err.err_data == ubuf);
	CHECK_INT(err.err_data_size, 4);
	CHECK_INT(ubuf[0], 0xa1);
	CHECK_INT(ubuf[3], 0xa4);
	CHECK_INT(ubuf[4], 0);

	/* A size without a buffer is no buffer: the provider's is returned. */
	CHECK_INT(lm_cq_write_err(lcq, &in, 0), 0);
	memset(&err, 0, sizeof(err));
	err.err_data_size = 4;
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK(err.err_data != NULL);
	CHECK_INT(err.err_data_size, 8);

	/* An error without err_data. */
	err = in;
	err.err_data = NULL;
	err.err_data_size = 0;
	CHECK_INT(lm_cq_write_err(lcq, &err, 0), 0);
	memset(&err, 0, sizeof(err));
	err.err_data = ubuf;
	err.err_data_size = sizeof(ubuf);
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK_INT(err.err_data_size, 0);

	/* API 1.4: the caller's err_data is ignored, the provider's buffer is
	 * returned, and err_data_size (not in a 1.4 entry) is not written. */
	lcq->api_version = FI_VERSION(1, 4);
	CHECK_INT(lm_cq_write_err(lcq, &in, 0), 0);
	memset(&err, 0, sizeof(err));
	err.err_data = ubuf;
	err.err_data_size = 0x5a5a;
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK(err.err_data != ubuf && err.err_data != NULL);
	if (err.err_data)
		CHECK_INT(((unsigned char *)err.err_data)[0], 0xa1);
	CHECK_INT(err.err_data_size, 0x5a5a);
	lcq->api_version = FI_VERSION(1, 17);

	/* strerror: fi_strerror text, or the provider's own. */
	CHECK_STR(fi_cq_strerror(cq, FI_ETRUNC, NULL, NULL, 0), fi_strerror(FI_ETRUNC));
	CHECK(fi_cq_strerror(cq, -FI_ETRUNC, NULL, sbuf, 6) == sbuf);
	CHECK_STR(sbuf, "Trunc");
	CHECK_STR(fi_cq_strerror(cq, 1234, NULL, NULL, 0), fi_strerror(1234));
	lcq->strerror = my_strerror;
	CHECK_STR(fi_cq_strerror(cq, 1234, NULL, NULL, 0), "link on fire");
	CHECK_STR(fi_cq_strerror(cq, 1234, NULL, sbuf, sizeof(sbuf)), "link on fire");
	CHECK_STR(fi_cq_strerror(cq, FI_EIO, NULL, NULL, 0), fi_strerror(FI_EIO));

	/* Errors left on the CQ are freed at close (ASan checks). */
	CHECK_INT(lm_cq_write_err(lcq, &in, 0), 0);
	CHECK_INT(fi_close(&cq->fid), 0);
}

/* The overflow policy: 3x the ring, nothing lost, all in posting order,
 * errors included. */
static void test_overflow(void)
{
	struct fi_cq_entry e[7];
	struct fi_cq_err_entry err;
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 10);
	struct lm_cq *lcq;
	size_t cap, total, next = 0;
	ssize_t n;

	if (!cq)
		return;
	lcq = lmcq(cq);
	cap = lm_ring_capacity(&lcq->ring);
	CHECK_INT(cap, 16);
	total = 3 * cap;
	for (size_t i = 0; i < total; i++) {
		if (i == 2 * cap + 3) {
			memset(&err, 0, sizeof(err));
			err.op_context = ctx(i);
			err.err = FI_EIO;
			CHECK_INT(lm_cq_write_err(lcq, &err, 0), 0);
		} else {
			CHECK_INT(lm_cq_write(lcq, ctx(i), 0, 0, NULL, 0, 0, 0), 0);
		}
	}
	CHECK_INT(lcq->overflow_count, 2 * cap);
	while (next < total) {
		n = fi_cq_read(cq, e, LM_ARRAY_SIZE(e));
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
			CHECK(err.op_context == ctx(next));
			CHECK_INT(next, 2 * cap + 3);
			next++;
			continue;
		}
		CHECK(n > 0);
		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++, next++)
			if (e[k].op_context != ctx(next)) {
				CHECK(e[k].op_context == ctx(next));
				break;
			}
	}
	CHECK_INT(next, total);
	CHECK_INT(lcq->overflow_count, 0);
	CHECK_INT(fi_cq_read(cq, e, 1), -FI_EAGAIN);

	/* Close with entries still in overflow: freed (ASan). */
	for (size_t i = 0; i < 2 * cap; i++)
		lm_cq_write(lcq, ctx(i), 0, 0, NULL, 0, 0, 0);
	CHECK_INT(fi_close(&cq->fid), 0);
}

static void hook_post(struct hook *h)
{
	if (h->runs % 2) /* odd runs post a completion */
		lm_cq_write(h->obj, ctx(h->runs), 0, 0, NULL, 0, 0, 0);
}

static void test_progress(void)
{
	struct fi_cq_entry e[2];
	struct fi_cq_err_entry err;
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct hook h = HOOK_INIT(hook_post, NULL);

	if (!cq)
		return;
	h.obj = lmcq(cq);
	lm_cq_add_progress(lmcq(cq), &h.p);
	CHECK_INT(fi_cq_read(cq, e, 2), 1); /* the hook's entry, read at once */
	CHECK(e[0].op_context == ctx(1));
	CHECK_INT(h.runs, 1);
	CHECK_INT(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	CHECK_INT(h.runs, 2);
	CHECK_INT(fi_cq_sread(cq, e, 2, NULL, 0), 1);
	CHECK_INT(h.runs, 3);
	CHECK(e[0].op_context == ctx(3));
	CHECK_INT(fi_trywait(td.fabric, &(struct fid *){&cq->fid}, 1), 0);
	CHECK_INT(h.runs, 4);
	CHECK_INT(fi_trywait(td.fabric, &(struct fid *){&cq->fid}, 1), -FI_EAGAIN);
	CHECK_INT(h.runs, 5);
	lm_cq_del_progress(lmcq(cq), &h.p);
	CHECK_INT(fi_cq_read(cq, e, 2), 1); /* run 5's entry; no more runs */
	CHECK(e[0].op_context == ctx(5));
	CHECK_INT(fi_cq_read(cq, e, 2), -FI_EAGAIN);
	CHECK_INT(h.runs, 5);
	CHECK_INT(fi_close(&cq->fid), 0);
}

/* ---- completions posted while a reader progresses ----------------------
 * They go straight into the reader's buffer while the CQ is empty, and to
 * the ring once anything is there: in order either way, formats and
 * source addresses as from the ring. */

static void hook_burst(struct hook *h)
{
	struct fi_cq_err_entry err = {.op_context = ctx(100), .err = FI_EIO};
	struct lm_cq *cq = h->obj;

	if (h->runs != 1)
		return;
	for (uintptr_t i = 0; i < 3; i++) /* 0, 1 into the reader's 2; 2 to the ring */
		lm_cq_write(cq, ctx(i), FI_RECV | FI_MSG, 10 + i, (void *)(0x1000 + i),
		            20 + i, 30 + i, 40 + i);
	lm_cq_write_err(cq, &err, FI_ADDR_NOTAVAIL);
	lm_cq_write(cq, ctx(3), FI_SEND, 13, NULL, 23, 33, 43);
}

static void *other_thread_write(void *arg)
{
	lm_cq_write(arg, ctx(50), FI_SEND, 0, NULL, 0, 0, 0);
	return NULL;
}

/* Another thread's entry comes first, so this thread's goes behind it. */
static void hook_other_first(struct hook *h)
{
	pthread_t t;

	if (h->runs != 1)
		return;
	CHECK_INT(pthread_create(&t, NULL, other_thread_write, h->obj), 0);
	pthread_join(t, NULL);
	lm_cq_write(h->obj, ctx(51), FI_SEND, 0, NULL, 0, 0, 0);
}

static void test_direct(void)
{
	struct fi_cq_tagged_entry e[4];
	struct fi_cq_err_entry err = {0};
	fi_addr_t src[4] = {1, 1, 1, 1};
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	struct hook h = HOOK_INIT(hook_burst, NULL);

	if (!cq)
		return;
	h.obj = lmcq(cq);
	lm_cq_add_progress(lmcq(cq), &h.p);
	memset(e, 0, sizeof(e));
	CHECK_INT(fi_cq_readfrom(cq, e, 2, src), 2);
	for (int i = 0; i < 2; i++) {
		CHECK(e[i].op_context == ctx((uintptr_t)i));
		CHECK_HEX(e[i].flags, FI_RECV | FI_MSG);
		CHECK_INT(e[i].len, 10 + i);
		CHECK(e[i].buf == (void *)(uintptr_t)(0x1000 + i));
		CHECK_HEX(e[i].data, 20 + i);
		CHECK_HEX(e[i].tag, 30 + i);
		CHECK_HEX(src[i], 40 + i);
	}
	CHECK_HEX(src[2], 1);
	CHECK_INT(lmcq(cq)->ring.head - lmcq(cq)->ring.tail, 3); /* 2, the error, 3 */
	CHECK_INT(fi_cq_readfrom(cq, e, 4, src), 1);
	CHECK(e[0].op_context == ctx(2));
	CHECK_HEX(src[0], 42);
	CHECK_INT(fi_cq_read(cq, e, 4), -FI_EAVAIL);
	CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	CHECK(err.op_context == ctx(100));
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK(e[0].op_context == ctx(3));
	CHECK_INT(e[0].len, 13);
	CHECK_INT(fi_cq_read(cq, e, 4), -FI_EAGAIN);
	CHECK_INT(h.runs, 6);
	lm_cq_del_progress(lmcq(cq), &h.p);
	CHECK_INT(fi_close(&cq->fid), 0);

	/* The context format: only op_context is written, nothing past it. */
	cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	if (!cq)
		return;
	{
		struct fi_cq_entry ce[3] = {{ctx(7)}, {ctx(7)}, {ctx(7)}};
		struct hook h2 = HOOK_INIT(hook_burst, lmcq(cq));

		lm_cq_add_progress(lmcq(cq), &h2.p);
		CHECK_INT(fi_cq_read(cq, ce, 1), 1);
		CHECK(ce[0].op_context == ctx(0));
		CHECK(ce[1].op_context == ctx(7));
		CHECK_INT(fi_cq_read(cq, ce, 3), 2); /* 1, 2; then the error */
		CHECK(ce[0].op_context == ctx(1));
		CHECK(ce[1].op_context == ctx(2));
		CHECK(ce[2].op_context == ctx(7));
		lm_cq_del_progress(lmcq(cq), &h2.p);
	}
	CHECK_INT(fi_close(&cq->fid), 0);

	cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	if (!cq)
		return;
	{
		struct fi_cq_entry ce[2];
		struct hook h3 = HOOK_INIT(hook_other_first, lmcq(cq));

		lm_cq_add_progress(lmcq(cq), &h3.p);
		CHECK_INT(fi_cq_read(cq, ce, 2), 2);
		CHECK(ce[0].op_context == ctx(50));
		CHECK(ce[1].op_context == ctx(51));
		lm_cq_del_progress(lmcq(cq), &h3.p);
	}
	CHECK_INT(fi_close(&cq->fid), 0);
}

/* ---- blocking --------------------------------------------------------- */

struct delayed {
	struct fid_cq *cq;
	int delay_ms;
	int n; /* entries to write, one every delay_ms */
	int signal;
};

static void *delayed_writer(void *arg)
{
	struct delayed *d = arg;

	for (int i = 0; i < d->n; i++) {
		usleep(d->delay_ms * 1000);
		lm_cq_write(lmcq(d->cq), ctx(i), 0, 0, NULL, 0, 0, 0);
	}
	if (d->signal) {
		usleep(d->delay_ms * 1000);
		fi_cq_signal(d->cq);
	}
	return NULL;
}

static void test_sread(enum fi_wait_obj wait)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
	                          .wait_obj = wait,
	                          .wait_cond = FI_CQ_COND_THRESHOLD};
	struct fi_cq_entry e[8];
	struct fid_cq *cq;
	struct delayed d;
	pthread_t th;
	uint64_t t0, dt;
	size_t three = 3;
	ssize_t n;

	if (fi_cq_open(td.domain, &attr, &cq, NULL)) {
		CHECK(!"cq open");
		return;
	}
	/* timeout accuracy on an empty CQ */
	t0 = lm_now_ms();
	CHECK_INT(fi_cq_sread(cq, e, 1, NULL, 100), -FI_EAGAIN);
	dt = lm_now_ms() - t0;
	CHECK(dt >= 90 && dt < 1000);
	t0 = lm_now_ms();
	CHECK_INT(fi_cq_sreadfrom(cq, e, 1, NULL, NULL, 0), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 < 50);

	/* woken by a write from another thread */
	d = (struct delayed){.cq = cq, .delay_ms = 50, .n = 1};
	pthread_create(&th, NULL, delayed_writer, &d);
	t0 = lm_now_ms();
	n = fi_cq_sread(cq, e, 8, NULL, 5000);
	dt = lm_now_ms() - t0;
	pthread_join(th, NULL);
	CHECK_INT(n, 1);
	CHECK(e[0].op_context == ctx(0));
	CHECK(dt >= 40 && dt < 1000);

	/* threshold: three entries 30 ms apart wake one read of three */
	d = (struct delayed){.cq = cq, .delay_ms = 30, .n = 3};
	pthread_create(&th, NULL, delayed_writer, &d);
	t0 = lm_now_ms();
	n = fi_cq_sread(cq, e, 8, &three, 5000);
	dt = lm_now_ms() - t0;
	pthread_join(th, NULL);
	CHECK_INT(n, 3);
	CHECK(dt >= 80 && dt < 1500);

	/* threshold not reached: what is there comes back at the timeout */
	lm_cq_write(lmcq(cq), ctx(5), 0, 0, NULL, 0, 0, 0);
	t0 = lm_now_ms();
	n = fi_cq_sread(cq, e, 8, &three, 100);
	dt = lm_now_ms() - t0;
	CHECK_INT(n, 1);
	CHECK(dt >= 90 && dt < 1000);

	/* fi_cq_signal unblocks an infinite wait with -FI_EAGAIN */
	d = (struct delayed){.cq = cq, .delay_ms = 50, .n = 0, .signal = 1};
	pthread_create(&th, NULL, delayed_writer, &d);
	t0 = lm_now_ms();
	n = fi_cq_sread(cq, e, 8, NULL, -1);
	dt = lm_now_ms() - t0;
	pthread_join(th, NULL);
	CHECK_INT(n, -FI_EAGAIN);
	CHECK(dt >= 40 && dt < 1000);

	/* A signal with no reader asleep is kept for the next sread that
	 * would block (fabtests' cq_signal; the reference does the same),
	 * which returns -FI_EAGAIN at once and uses it up: several signals
	 * are one wake-up, not a count. */
	CHECK_INT(fi_cq_signal(cq), 0);
	CHECK_INT(fi_cq_signal(cq), 0);
	t0 = lm_now_ms();
	CHECK_INT(fi_cq_sread(cq, e, 8, NULL, 5000), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 < 1000);
	t0 = lm_now_ms();
	CHECK_INT(fi_cq_sread(cq, e, 8, NULL, 100), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 >= 90);
	/* A read that does not sleep leaves it: one with entries to return,
	 * one with timeout 0, fi_cq_read. */
	CHECK_INT(fi_cq_signal(cq), 0);
	lm_cq_write(lmcq(cq), ctx(6), 0, 0, NULL, 0, 0, 0);
	CHECK_INT(fi_cq_sread(cq, e, 8, NULL, 5000), 1);
	CHECK(e[0].op_context == ctx(6));
	CHECK_INT(fi_cq_sread(cq, e, 8, NULL, 0), -FI_EAGAIN);
	CHECK_INT(fi_cq_read(cq, e, 8), -FI_EAGAIN);
	t0 = lm_now_ms();
	CHECK_INT(fi_cq_sreadfrom(cq, e, 8, NULL, NULL, -1), -FI_EAGAIN);
	CHECK(lm_now_ms() - t0 < 1000);

	/* an error at the head ends a blocking read at once */
	{
		struct fi_cq_err_entry err = {.err = FI_EIO};

		lm_cq_write_err(lmcq(cq), &err, 0);
		CHECK_INT(fi_cq_sread(cq, e, 8, NULL, 5000), -FI_EAVAIL);
		CHECK_INT(fi_cq_readerr(cq, &err, 0), 1);
	}
	CHECK_INT(fi_cq_sread(cq, NULL, 1, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_close(&cq->fid), 0);
}

static void test_wait_none(void)
{
	struct fi_cq_entry e;
	enum fi_wait_obj wo = FI_WAIT_FD;
	int fd = -5;
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);

	if (!cq)
		return;
	CHECK_INT(fi_cq_sread(cq, &e, 1, NULL, 10), -FI_ENOSYS);
	CHECK_INT(fi_cq_signal(cq), -FI_ENOSYS);
	CHECK_INT(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	CHECK_INT(fd, -5);
	CHECK_INT(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK_INT(wo, FI_WAIT_NONE);
	CHECK_INT(fi_trywait(td.fabric, &(struct fid *){&cq->fid}, 1), -FI_EINVAL);
	CHECK_INT(fi_close(&cq->fid), 0);
}

static int epoll_ready(int epfd, int ms)
{
	struct epoll_event ev;

	return epoll_wait(epfd, &ev, 1, ms);
}

static void test_wait_fd(void)
{
	struct fi_cq_entry e[4];
	struct epoll_event ev = {.events = EPOLLIN};
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);
	struct fid *fids[1];
	enum fi_wait_obj wo;
	int fd = -1, epfd;

	if (!cq)
		return;
	fids[0] = &cq->fid;
	CHECK_INT(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK_INT(wo, FI_WAIT_FD);
	CHECK_INT(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	CHECK(fd >= 0);
	CHECK_INT(fi_control(&cq->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	epfd = epoll_create1(0);
	ev.data.fd = fd;
	CHECK_INT(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev), 0);

	/* empty: not readable; a write makes it readable, even for an
	 * application that skipped fi_trywait */
	CHECK_INT(epoll_ready(epfd, 0), 0);
	lm_cq_write(lmcq(cq), ctx(0), 0, 0, NULL, 0, 0, 0);
	CHECK_INT(epoll_ready(epfd, 100), 1);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), -FI_EAGAIN);
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	/* the protocol: trywait 0 means the fd is quiet until a write */
	CHECK_INT(fi_trywait(td.fabric, fids, 1), 0);
	CHECK_INT(epoll_ready(epfd, 0), 0);
	lm_cq_write(lmcq(cq), ctx(1), 0, 0, NULL, 0, 0, 0);
	CHECK_INT(epoll_ready(epfd, 100), 1);
	CHECK_INT(fi_cq_read(cq, e, 4), 1);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), 0);
	CHECK_INT(epoll_ready(epfd, 0), 0);
	close(epfd);

	/* sread on an fd CQ, woken from another thread */
	{
		struct delayed d = {.cq = cq, .delay_ms = 50, .n = 1};
		pthread_t th;
		uint64_t t0 = lm_now_ms(), dt;
		ssize_t n;

		pthread_create(&th, NULL, delayed_writer, &d);
		n = fi_cq_sread(cq, e, 4, NULL, 5000);
		dt = lm_now_ms() - t0;
		pthread_join(th, NULL);
		CHECK_INT(n, 1);
		CHECK(dt >= 40 && dt < 1000);
	}
	CHECK_INT(fi_close(&cq->fid), 0);
}

struct set_writer {
	struct fid_cq *cq;
};

static void *set_writer_run(void *arg)
{
	struct set_writer *w = arg;

	usleep(50 * 1000);
	lm_cq_write(lmcq(w->cq), ctx(3), 0, 0, NULL, 0, 0, 0);
	return NULL;
}

static void test_wait_set(void)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
	                          .wait_obj = FI_WAIT_SET};
	struct fi_cq_entry e[2];
	struct fid_wait *set = waitset_open(&td, FI_WAIT_FD);
	struct fid_cq *cq;
	struct fid *fids[1];
	struct set_writer w;
	int ret;

	if (!set)
		return;
	attr.wait_set = set;
	ret = fi_cq_open(td.domain, &attr, &cq, NULL);
	CHECK_INT(ret, 0);
	if (ret) {
		fi_close(&set->fid);
		return;
	}
	fids[0] = &set->fid;
	CHECK_INT(fi_wait(set, 0), -FI_ETIMEDOUT);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), 0);
	lm_cq_write(lmcq(cq), ctx(1), 0, 0, NULL, 0, 0, 0);
	CHECK_INT(fi_trywait(td.fabric, fids, 1), -FI_EAGAIN);
	CHECK_INT(fi_wait(set, 1000), 0);
	CHECK_INT(fi_cq_read(cq, e, 2), 1);
	CHECK_INT(fi_wait(set, 20), -FI_ETIMEDOUT);

	w.cq = cq;
	waitset_woken(set, set_writer_run, &w);
	CHECK_INT(fi_cq_read(cq, e, 2), 1);
	CHECK(e[0].op_context == ctx(3));
	waitset_close(set, &cq->fid);
}

static void test_close_busy(void)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);

	if (!cq)
		return;
	atomic_fetch_add(&lmcq(cq)->ref, 1); /* an endpoint bound */
	CHECK_INT(fi_close(&cq->fid), -FI_EBUSY);
	atomic_fetch_sub(&lmcq(cq)->ref, 1);
	CHECK_INT(fi_close(&cq->fid), 0);
}

/* ---- threads ------------------------------------------------------------ */

#define NWRITERS   4
#define PER_WRITER 50000
#define TOTAL      (NWRITERS * PER_WRITER)

struct mt {
	struct fid_cq *cq;
	atomic_uchar *seen;
	atomic_int read;
	atomic_int dup, bad, werr;
	uint64_t deadline;
};

struct mt_writer {
	struct mt *mt;
	int id;
};

static void *mt_write(void *arg)
{
	struct mt_writer *w = arg;

	for (int i = 0; i < PER_WRITER; i++)
		if (lm_cq_write(lmcq(w->mt->cq), ctx((uintptr_t)w->id * PER_WRITER + i),
		                0, 0, NULL, 0, 0, 0))
			atomic_fetch_add(&w->mt->werr, 1);
	return NULL;
}

static void *mt_read(void *arg)
{
	struct mt *mt = arg;
	struct fi_cq_entry e[16];

	while (atomic_load(&mt->read) < TOTAL && lm_now_ms() < mt->deadline) {
		ssize_t n = fi_cq_read(mt->cq, e, 16);

		for (ssize_t k = 0; k < n; k++) {
			uintptr_t i = (uintptr_t)e[k].op_context - 0x1000;

			if (i >= TOTAL)
				atomic_fetch_add(&mt->bad, 1);
			else if (atomic_exchange(&mt->seen[i], 1))
				atomic_fetch_add(&mt->dup, 1);
		}
		if (n > 0)
			atomic_fetch_add(&mt->read, (int)n);
	}
	return NULL;
}

static void test_threads(void)
{
	struct mt mt = {0};
	struct mt_writer w[NWRITERS];
	pthread_t wt[NWRITERS], rt[2];
	int missing = 0;

	mt.cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 1024);
	if (!mt.cq)
		return;
	CHECK(lmcq(mt.cq)->lock.on);
	mt.seen = calloc(TOTAL, sizeof(*mt.seen));
	mt.deadline = lm_now_ms() + 60000;
	for (int i = 0; i < 2; i++)
		pthread_create(&rt[i], NULL, mt_read, &mt);
	for (int i = 0; i < NWRITERS; i++) {
		w[i] = (struct mt_writer){.mt = &mt, .id = i};
		pthread_create(&wt[i], NULL, mt_write, &w[i]);
	}
	for (int i = 0; i < NWRITERS; i++)
		pthread_join(wt[i], NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(rt[i], NULL);
	for (int i = 0; i < TOTAL; i++)
		missing += !atomic_load(&mt.seen[i]);
	CHECK_INT(atomic_load(&mt.read), TOTAL);
	CHECK_INT(missing, 0);
	CHECK_INT(atomic_load(&mt.dup), 0);
	CHECK_INT(atomic_load(&mt.bad), 0);
	CHECK_INT(atomic_load(&mt.werr), 0);
	CHECK_INT(fi_cq_read(mt.cq, (struct fi_cq_entry[1]){{0}}, 1), -FI_EAGAIN);
	free(mt.seen);
	CHECK_INT(fi_close(&mt.cq->fid), 0);
}

/* Two readers blocked on one CQ: two entries wake both. */
struct sr {
	struct fid_cq *cq;
	ssize_t n;
};

static void *sr_run(void *arg)
{
	struct sr *s = arg;
	struct fi_cq_entry e;

	s->n = fi_cq_sread(s->cq, &e, 1, NULL, 3000);
	return NULL;
}

static void test_two_sleepers(void)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct sr s[2];
	pthread_t th[2];
	uint64_t t0;

	if (!cq)
		return;
	for (int i = 0; i < 2; i++) {
		s[i] = (struct sr){.cq = cq};
		pthread_create(&th[i], NULL, sr_run, &s[i]);
	}
	usleep(50 * 1000);
	t0 = lm_now_ms();
	lm_cq_write(lmcq(cq), ctx(0), 0, 0, NULL, 0, 0, 0);
	lm_cq_write(lmcq(cq), ctx(1), 0, 0, NULL, 0, 0, 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_INT(s[0].n, 1);
	CHECK_INT(s[1].n, 1);
	CHECK(lm_now_ms() - t0 < 1000);
	CHECK_INT(fi_close(&cq->fid), 0);
}

/* Run on a FI_THREAD_DOMAIN domain: a CQ there takes no locks. */
static void thread_domain_cq(void)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);

	if (cq) {
		CHECK(!lmcq(cq)->lock.on);
		CHECK(!lmcq(cq)->plock.on);
		lm_cq_write(lmcq(cq), ctx(0), 0, 0, NULL, 0, 0, 0);
		CHECK_INT(fi_cq_read(cq, (struct fi_cq_entry[1]){{0}}, 1), 1);
		CHECK_INT(fi_close(&cq->fid), 0);
	}
}

int main(void)
{
	if (testdom_start(&td, 60))
		return 1;
	test_open_errors();
	test_formats();
	test_count_and_args();
	test_readfrom();
	test_errors();
	test_overflow();
	test_progress();
	test_direct();
	test_sread(FI_WAIT_UNSPEC);
	test_sread(FI_WAIT_FD);
	test_sread(FI_WAIT_YIELD);
	test_wait_none();
	test_wait_fd();
	test_wait_set();
	test_close_busy();
	test_threads();
	test_two_sleepers();
	CHECK_INT(testdom_run_on(&td, FI_THREAD_DOMAIN, thread_domain_cq), 0);
	testdom_close(&td);
	return check_done();
}
