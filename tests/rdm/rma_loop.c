/* rma_loop.c - the RDM engine's RMA and atomics over the loopback link, in
 * one process: every read/write call, inline, bulk and CTS/DATA transfers,
 * remote CQ data, counters on both sides, rejected accesses (bad key, out
 * of bounds, missing access) that leave target memory alone, every atomic
 * op on several datatypes against values computed here, and the queries. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "loopfix.h"

struct side {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_cntr *rd, *wr, *rrd, *rwr; /* FI_READ, FI_WRITE, remote ones */
	fi_addr_t addr;
};

static struct side A, B;

#define TSIZE (4u << 20)
static char *tbuf, *lbuf, *rbuf; /* B's target region, A's buffers */
static struct fid_mr *mr_rw, *mr_ro, *mr_wo;
static char ro[4096], wo[4096]; /* read-only, write-only regions of B */
static uint64_t key_rw, key_ro, key_wo;

static void pump(void)
{
	lm_rdm_progress(lm_rdm_ep_of(A.ep), false);
	lm_rdm_progress(lm_rdm_ep_of(B.ep), false);
}

static bool empty(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;

	for (int i = 0; i < 5; i++)
		pump();
	return fi_cq_read(cq, &e, 1) == -FI_EAGAIN;
}

static struct fid_cntr *cntr(struct fid_ep *ep, uint64_t flags)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *c = NULL;

	CHECK_INT(fi_cntr_open(fx.domain, &ca, &c, NULL), 0);
	CHECK_INT(fi_ep_bind(ep, &c->fid, flags), 0);
	return c;
}

static void open_side(struct side *s)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 1024};
	char name[64];
	size_t len = sizeof(name);

	CHECK_INT(fi_endpoint(fx.domain, fx.info, &s->ep, NULL), 0);
	CHECK_INT(fi_cq_open(fx.domain, &cqa, &s->cq, NULL), 0);
	CHECK_INT(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	s->rd = cntr(s->ep, FI_READ);
	s->wr = cntr(s->ep, FI_WRITE);
	s->rrd = cntr(s->ep, FI_REMOTE_READ);
	s->rwr = cntr(s->ep, FI_REMOTE_WRITE);
	CHECK_INT(fi_ep_bind(s->ep, &fx.av->fid, 0), 0);
	CHECK_INT(fi_enable(s->ep), 0);
	CHECK_INT(fi_getname(&s->ep->fid, name, &len), 0);
	CHECK_INT(fi_av_insert(fx.av, name, 1, &s->addr, 0, NULL), 1);
}

static void close_side(struct side *s)
{
	CHECK_INT(fi_close(&s->ep->fid), 0);
	CHECK_INT(fi_close(&s->cq->fid), 0);
	CHECK_INT(fi_close(&s->rd->fid), 0);
	CHECK_INT(fi_close(&s->wr->fid), 0);
	CHECK_INT(fi_close(&s->rrd->fid), 0);
	CHECK_INT(fi_close(&s->rwr->fid), 0);
}

static void fill(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)(i * 13 + seed);
}

static uint64_t ta(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* One completion on A's CQ for ctx with flags; returns the entry's flags. */
static void done_ok(void *ctx, uint64_t flags)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	ssize_t r = cq_get(A.cq, &e, NULL, &err);

	CHECK_INT(r, 1);
	if (r != 1) {
		fprintf(stderr, "  error %d (%s)\n", err.err, fi_strerror(err.err));
		return;
	}
	CHECK(e.op_context == ctx);
	CHECK_HEX(e.flags, flags);
}

static void done_err(void *ctx, int want)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	CHECK_INT(cq_get(A.cq, &e, NULL, &err), -FI_EAVAIL);
	CHECK_INT(err.err, want);
	CHECK(err.op_context == ctx);
}

/* ---- RMA ------------------------------------------------------------------ */

/* len bytes A -> B's tbuf at off and back into rbuf, checked, with the
 * counters on both sides; writedata for odd lengths. */
static void write_read(size_t len, size_t off)
{
	uint64_t w0 = fi_cntr_read(A.wr), r0 = fi_cntr_read(A.rd);
	uint64_t rw0 = fi_cntr_read(B.rwr), rr0 = fi_cntr_read(B.rrd);
	bool data = len & 1;
	int wctx, rctx;

	fill(lbuf, len, (unsigned)len);
	memset(tbuf + off, 0, len + 1);
	memset(rbuf, 0, len + 1);
	if (data)
		CHECK_INT(fi_writedata(A.ep, lbuf, len, NULL, 0xd00d + len, B.addr,
		                       ta(tbuf + off), key_rw, &wctx),
		          0);
	else
		CHECK_INT(fi_write(A.ep, lbuf, len, NULL, B.addr, ta(tbuf + off), key_rw,
		                   &wctx),
		          0);
	done_ok(&wctx, FI_RMA | FI_WRITE);
	CHECK(!memcmp(tbuf + off, lbuf, len));
	CHECK_INT(tbuf[off + len], 0);
	CHECK_INT(fi_cntr_read(A.wr), w0 + 1);
	CHECK_INT(fi_cntr_read(B.rwr), rw0 + 1);
	if (data) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src = 0;

		CHECK_INT(cq_get(B.cq, &e, &src, &err), 1);
		CHECK_HEX(e.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
		CHECK_HEX(e.data, 0xd00d + len);
		CHECK(e.op_context == NULL);
		CHECK_INT(src, A.addr);
	}
	CHECK_INT(fi_read(A.ep, rbuf, len, NULL, B.addr, ta(tbuf + off), key_rw, &rctx),
	          0);
	done_ok(&rctx, FI_RMA | FI_READ);
	CHECK(!memcmp(rbuf, lbuf, len));
	CHECK_INT(rbuf[len], 0);
	CHECK_INT(fi_cntr_read(A.rd), r0 + 1);
	CHECK_INT(fi_cntr_read(B.rrd), rr0 + 1);
}

static void test_sizes(void)
{
	static const size_t sizes[] = {0,    1,    100,    511,     1000,   1024,
	                               1025, 5001, 100000, 1 << 20, 3 << 20};

	for (int bulk = 1; bulk >= 0; bulk--) {
		loop_link_set_bulk(bulk);
		for (size_t i = 0; i < LM_ARRAY_SIZE(sizes); i++)
			write_read(sizes[i], i * 7);
	}
	loop_link_set_bulk(true);
	CHECK(empty(A.cq) && empty(B.cq));
}

static void test_vectors(void)
{
	char a[300], b[5000], c[70], back[5370];
	struct iovec w[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};
	struct iovec r[2] = {{back, 1000}, {back + 1000, sizeof(back) - 1000}};
	struct fi_rma_iov riov = {ta(tbuf + 64), sizeof(back), key_rw};
	struct fi_msg_rma m = {.msg_iov = r,
	                       .iov_count = 2,
	                       .addr = B.addr,
	                       .rma_iov = &riov,
	                       .rma_iov_count = 1};
	int ctx;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	fill(c, sizeof(c), 3);
	for (int small = 0; small < 2; small++) {
		/* small: 300 + 70 bytes inline; else 5370 through rendezvous */
		w[1].iov_len = small ? 0 : sizeof(b);
		size_t len = sizeof(a) + w[1].iov_len + sizeof(c);

		memset(back, 0, sizeof(back));
		CHECK_INT(
		    fi_writev(A.ep, w, NULL, 3, B.addr, ta(tbuf + 64), key_rw, &ctx), 0);
		done_ok(&ctx, FI_RMA | FI_WRITE);
		CHECK(!memcmp(tbuf + 64, a, sizeof(a)));
		CHECK(!memcmp(tbuf + 64 + sizeof(a) + w[1].iov_len, c, sizeof(c)));
		CHECK_INT(fi_readv(A.ep, r, NULL, 2, B.addr, ta(tbuf + 64), key_rw, &ctx),
		          0);
		done_ok(&ctx, FI_RMA | FI_READ);
		CHECK(!memcmp(back, tbuf + 64, len));
	}
	/* readmsg / writemsg, with FI_COMPLETION and FI_INJECT */
	memset(back, 0x5a, sizeof(back));
	m.msg_iov = r;
	m.context = &ctx;
	CHECK_INT(fi_writemsg(A.ep, &m, FI_COMPLETION), 0);
	done_ok(&ctx, FI_RMA | FI_WRITE);
	memset(back, 0, sizeof(back));
	CHECK_INT(fi_readmsg(A.ep, &m, FI_COMPLETION), 0);
	done_ok(&ctx, FI_RMA | FI_READ);
	CHECK_INT(back[0], 0x5a);
	CHECK_INT(back[sizeof(back) - 1], 0x5a);
	riov.len = 10; /* local longer than the remote range */
	CHECK_INT(fi_readmsg(A.ep, &m, 0), -FI_EINVAL);
	riov.len = 200;
	{
		char inj[200];
		struct iovec ii = {inj, sizeof(inj)};
		struct fi_msg_rma im = {.msg_iov = &ii,
		                        .iov_count = 1,
		                        .addr = B.addr,
		                        .rma_iov = &riov,
		                        .rma_iov_count = 1,
		                        .data = 4242,
		                        .context = &ctx};

		memset(inj, 0x33, sizeof(inj));
		CHECK_INT(fi_writemsg(A.ep, &im, FI_INJECT | FI_REMOTE_CQ_DATA), 0);
		memset(inj, 0, sizeof(inj)); /* reusable at once */
		done_ok(&ctx, FI_RMA | FI_WRITE);
		CHECK_INT(tbuf[64], 0x33);
		CHECK_INT(tbuf[64 + 199], 0x33);
		{
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;

			CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
			CHECK_INT(e.data, 4242);
		}
	}
}

static void test_inject_data(void)
{
	uint64_t w0 = fi_cntr_read(A.wr), rw0 = fi_cntr_read(B.rwr);
	char v[64], big[600], rx[8];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int rctx;

	memset(v, 0x71, sizeof(v));
	memset(big, 0, sizeof(big));
	/* a posted receive is not consumed by remote CQ data */
	CHECK_INT(fi_recv(B.ep, rx, sizeof(rx), NULL, FI_ADDR_UNSPEC, &rctx), 0);
	CHECK_INT(fi_inject_write(A.ep, v, sizeof(v), B.addr, ta(tbuf + 9), key_rw), 0);
	memset(v, 0, sizeof(v));
	CHECK_INT(fi_inject_writedata(A.ep, "abc", 3, 77, B.addr, ta(tbuf + 200), key_rw),
	          0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), 1);
	CHECK_HEX(e.flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_INT(e.data, 77);
	for (int i = 0; i < 10 && fi_cntr_read(A.wr) < w0 + 2; i++)
		pump();
	CHECK_INT(fi_cntr_read(A.wr), w0 + 2);
	CHECK_INT(fi_cntr_read(B.rwr), rw0 + 2);
	CHECK_INT(tbuf[9], 0x71);
	CHECK_INT(tbuf[9 + 63], 0x71);
	CHECK(!memcmp(tbuf + 200, "abc", 3));
	CHECK(empty(A.cq)); /* injects complete into counters only */
	CHECK_INT(fi_cancel(&B.ep->fid, &rctx), 0);
	CHECK_INT(cq_get(B.cq, &e, NULL, &err), -FI_EAVAIL);
	CHECK_INT(err.err, FI_ECANCELED);
	/* inject bounded by inject_size */
	CHECK_INT(fi_inject_write(A.ep, big, sizeof(big), B.addr, ta(tbuf), key_rw),
	          -FI_EMSGSIZE);
}

/* Rejected accesses: an error completion, no byte of target memory moved,
 * the initiator's counter counts an error and the target's nothing. */
static void test_rejects(void)
{
	static const size_t sizes[] = {8, 3000};
	char *save = malloc(8192);
	uint64_t rw0 = fi_cntr_read(B.rwr), rr0 = fi_cntr_read(B.rrd);
	uint64_t we0 = fi_cntr_readerr(A.wr), re0 = fi_cntr_readerr(A.rd);
	int ctx, n = 0;

	fill(lbuf, 8192, 5);
	memcpy(save, tbuf, 8192);
	memset(ro, 1, sizeof(ro));
	memset(wo, 2, sizeof(wo));
	for (int bulk = 1; bulk >= 0; bulk--) {
		loop_link_set_bulk(bulk);
		for (size_t i = 0; i < LM_ARRAY_SIZE(sizes); i++) {
			size_t len = sizes[i];

			/* bad key */
			CHECK_INT(fi_write(A.ep, lbuf, len, NULL, B.addr, ta(tbuf),
			                   key_rw + 1000, &ctx),
			          0);
			done_err(&ctx, FI_EKEYREJECTED);
			CHECK_INT(fi_read(A.ep, rbuf, len, NULL, B.addr, ta(tbuf),
			                  key_rw + 1000, &ctx),
			          0);
			done_err(&ctx, FI_EKEYREJECTED);
			/* out of bounds: past the end, below the start, wrapping */
			CHECK_INT(fi_write(A.ep, lbuf, len, NULL, B.addr,
			                   ta(tbuf) + TSIZE - len + 1, key_rw, &ctx),
			          0);
			done_err(&ctx, FI_EACCES);
			CHECK_INT(fi_write(A.ep, lbuf, len, NULL, B.addr, ta(tbuf) - 1,
			                   key_rw, &ctx),
			          0);
			done_err(&ctx, FI_EACCES);
			CHECK_INT(fi_read(A.ep, rbuf, len, NULL, B.addr, UINT64_MAX - 2,
			                  key_rw, &ctx),
			          0);
			done_err(&ctx, FI_EACCES);
			/* missing access */
			CHECK_INT(
			    fi_write(A.ep, lbuf, len, NULL, B.addr, ta(ro), key_ro, &ctx),
			    0);
			done_err(&ctx, FI_EACCES);
			CHECK_INT(
			    fi_read(A.ep, rbuf, len, NULL, B.addr, ta(wo), key_wo, &ctx),
			    0);
			done_err(&ctx, FI_EACCES);
			n += 7;
		}
	}
	loop_link_set_bulk(true);
	CHECK(!memcmp(save, tbuf, 8192));
	for (size_t i = 0; i < sizeof(ro); i++)
		if (ro[i] != 1 || wo[i] != 2) {
			CHECK(0);
			break;
		}
	/* the allowed directions still work */
	CHECK_INT(fi_read(A.ep, rbuf, 16, NULL, B.addr, ta(ro), key_ro, &ctx), 0);
	done_ok(&ctx, FI_RMA | FI_READ);
	CHECK_INT(fi_write(A.ep, lbuf, 16, NULL, B.addr, ta(wo), key_wo, &ctx), 0);
	done_ok(&ctx, FI_RMA | FI_WRITE);
	CHECK(!memcmp(wo, lbuf, 16));
	CHECK_INT(fi_cntr_readerr(A.wr) - we0 + fi_cntr_readerr(A.rd) - re0, n);
	CHECK_INT(fi_cntr_read(B.rwr), rw0 + 1);
	CHECK_INT(fi_cntr_read(B.rrd), rr0 + 1);
	CHECK(empty(B.cq));
	free(save);
}

/* ---- atomics ----------------------------------------------------------- */

#define N 4

/* The man page's definitions, on doubles holding the test's small values
 * (exact for every type below). */
static double ref(enum fi_op op, double t, double o, double c, bool *changed)
{
	*changed = true;
	switch (op) {
	case FI_MIN:
		return o < t ? o : t;
	case FI_MAX:
		return o > t ? o : t;
	case FI_SUM:
		return t + o;
	case FI_PROD:
		return t * o;
	case FI_LOR:
		return (t != 0) || (o != 0);
	case FI_LAND:
		return (t != 0) && (o != 0);
	case FI_LXOR:
		return (t != 0) != (o != 0);
	case FI_BOR:
		return (double)((uint64_t)t | (uint64_t)o);
	case FI_BAND:
		return (double)((uint64_t)t & (uint64_t)o);
	case FI_BXOR:
		return (double)((uint64_t)t ^ (uint64_t)o);
	case FI_ATOMIC_WRITE:
		return o;
	case FI_ATOMIC_READ:
		return t;
	case FI_CSWAP:
		*changed = c == t;
		break;
	case FI_CSWAP_NE:
		*changed = c != t;
		break;
	case FI_CSWAP_LE:
		*changed = c <= t;
		break;
	case FI_CSWAP_LT:
		*changed = c < t;
		break;
	case FI_CSWAP_GE:
		*changed = c >= t;
		break;
	case FI_CSWAP_GT:
		*changed = c > t;
		break;
	case FI_MSWAP:
		return (double)(((uint64_t)o & (uint64_t)c) |
		                ((uint64_t)t & ~(uint64_t)c));
	default:
		break;
	}
	return *changed ? o : t;
}

static void put(enum fi_datatype dt, void *p, size_t i, double v)
{
	switch (dt) {
	case FI_UINT8:
		((uint8_t *)p)[i] = (uint8_t)v;
		break;
	case FI_INT32:
		((int32_t *)p)[i] = (int32_t)v;
		break;
	case FI_UINT64:
		((uint64_t *)p)[i] = (uint64_t)v;
		break;
	case FI_DOUBLE:
		((double *)p)[i] = v;
		break;
	default:
		break;
	}
}

static double val(enum fi_datatype dt, const void *p, size_t i)
{
	switch (dt) {
	case FI_UINT8:
		return ((const uint8_t *)p)[i];
	case FI_INT32:
		return ((const int32_t *)p)[i];
	case FI_UINT64:
		return (double)((const uint64_t *)p)[i];
	case FI_DOUBLE:
		return ((const double *)p)[i];
	default:
		return 0;
	}
}

static char *abuf; /* in tbuf: B's atomic target */

static void one_atomic(enum fi_datatype dt, enum fi_op op, enum lm_atomic_kind kind)
{
	static const double t0[N] = {0, 5, 12, 7}, o[N] = {3, 5, 10, 0},
	                    c[N] = {0, 6, 12, 9};
	unsigned char opnd[N * 8], cmp[N * 8], res[N * 8];
	uint64_t w0 = fi_cntr_read(A.wr), r0 = fi_cntr_read(A.rd);
	uint64_t rw0 = fi_cntr_read(B.rwr), rr0 = fi_cntr_read(B.rrd);
	size_t sz = lm_datatype_size(dt);
	int ctx;
	ssize_t ret;

	for (size_t i = 0; i < N; i++) {
		put(dt, abuf, i, t0[i]);
		put(dt, opnd, i, o[i]);
		put(dt, cmp, i, c[i]);
		put(dt, res, i, 99);
	}
	switch (kind) {
	case LM_ATOMIC_BASE:
		ret = fi_atomic(A.ep, opnd, N, NULL, B.addr, ta(abuf), key_rw, dt, op,
		                &ctx);
		break;
	case LM_ATOMIC_FETCH:
		ret = fi_fetch_atomic(A.ep, op == FI_ATOMIC_READ ? NULL : opnd, N, NULL,
		                      res, NULL, B.addr, ta(abuf), key_rw, dt, op, &ctx);
		break;
	default:
		ret = fi_compare_atomic(A.ep, opnd, N, NULL, cmp, NULL, res, NULL, B.addr,
		                        ta(abuf), key_rw, dt, op, &ctx);
		break;
	}
	CHECK_INT(ret, 0);
	if (ret)
		return;
	done_ok(&ctx, FI_ATOMIC | (kind == LM_ATOMIC_BASE ? FI_WRITE : FI_READ));
	for (size_t i = 0; i < N; i++) {
		bool changed;
		double want = ref(op, t0[i], o[i], c[i], &changed);

		if (val(dt, abuf, i) != want) {
			fprintf(stderr, "dt %d op %d kind %d [%zu]: %g, want %g\n", dt,
			        op, kind, i, val(dt, abuf, i), want);
			CHECK(0);
		}
		if (kind != LM_ATOMIC_BASE && val(dt, res, i) != t0[i]) {
			fprintf(stderr,
			        "dt %d op %d kind %d [%zu]: fetched %g, want %g\n", dt,
			        op, kind, i, val(dt, res, i), t0[i]);
			CHECK(0);
		}
	}
	(void)sz;
	if (kind == LM_ATOMIC_BASE) {
		CHECK_INT(fi_cntr_read(A.wr), w0 + 1);
	} else {
		CHECK_INT(fi_cntr_read(A.rd), r0 + 1);
	}
	CHECK_INT(fi_cntr_read(B.rwr) + fi_cntr_read(B.rrd), rw0 + rr0 + 1);
}

static void test_atomic_ops(void)
{
	static const enum fi_datatype dts[] = {FI_UINT8, FI_INT32, FI_UINT64, FI_DOUBLE};
	static const enum lm_atomic_kind kinds[] = {LM_ATOMIC_BASE, LM_ATOMIC_FETCH,
	                                            LM_ATOMIC_COMPARE};
	int tested = 0;

	abuf = tbuf + 4096;
	for (size_t d = 0; d < LM_ARRAY_SIZE(dts); d++)
		for (int op = FI_MIN; op <= FI_MSWAP; op++)
			for (size_t k = 0; k < LM_ARRAY_SIZE(kinds); k++) {
				size_t cnt = 1;
				int v;

				v = kinds[k] == LM_ATOMIC_BASE
				        ? fi_atomicvalid(A.ep, dts[d], op, &cnt)
				    : kinds[k] == LM_ATOMIC_FETCH
				        ? fi_fetch_atomicvalid(A.ep, dts[d], op, &cnt)
				        : fi_compare_atomicvalid(A.ep, dts[d], op, &cnt);
				CHECK_INT(v, lm_atomic_valid(dts[d], op, kinds[k])
				                 ? 0
				                 : -FI_EOPNOTSUPP);
				if (v) {
					CHECK_INT(cnt, 0);
					continue;
				}
				CHECK_INT(cnt,
				          1024 / lm_datatype_size(dts[d]) /
				              (kinds[k] == LM_ATOMIC_COMPARE ? 2 : 1));
				one_atomic(dts[d], op, kinds[k]);
				tested++;
			}
	CHECK(tested > 100);
	CHECK(empty(A.cq) && empty(B.cq));
}

static void test_atomic_forms(void)
{
	uint64_t *t = (uint64_t *)(tbuf + 8192), a[6] = {1, 2, 3, 4, 5, 6}, r[6];
	uint64_t cmpv[6] = {11, 0, 13, 0, 15, 0};
	struct fi_ioc iov[2] = {{a, 2}, {a + 2, 4}};
	struct fi_ioc resv[3] = {{r, 1}, {r + 1, 1}, {r + 2, 4}};
	struct fi_ioc cmpiov[1] = {{cmpv, 6}};
	struct fi_rma_ioc rioc = {ta(t), 6, key_rw};
	struct fi_msg_atomic m = {.msg_iov = iov,
	                          .iov_count = 2,
	                          .addr = B.addr,
	                          .rma_iov = &rioc,
	                          .rma_iov_count = 1,
	                          .datatype = FI_UINT64,
	                          .op = FI_SUM};
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	size_t max = 0;
	int ctx;

	for (int i = 0; i < 6; i++)
		t[i] = 10 + (uint64_t)i;
	m.context = &ctx;
	CHECK_INT(fi_atomicv(A.ep, iov, NULL, 2, B.addr, ta(t), key_rw, FI_UINT64, FI_SUM,
	                     &ctx),
	          0);
	done_ok(&ctx, FI_ATOMIC | FI_WRITE);
	CHECK_INT(t[5], 15 + 6);
	CHECK_INT(fi_atomicmsg(A.ep, &m, FI_COMPLETION | FI_INJECT), 0);
	done_ok(&ctx, FI_ATOMIC | FI_WRITE);
	CHECK_INT(t[0], 10 + 2);
	CHECK_INT(fi_inject_atomic(A.ep, a, 1, B.addr, ta(t + 1), key_rw, FI_UINT64,
	                           FI_ATOMIC_WRITE),
	          0);
	for (int i = 0; i < 20 && t[1] != 1; i++)
		pump();
	CHECK_INT(t[1], 1);
	CHECK(empty(A.cq));
	/* fetch into three result pieces */
	CHECK_INT(fi_fetch_atomicv(A.ep, iov, NULL, 2, resv, NULL, 3, B.addr, ta(t),
	                           key_rw, FI_UINT64, FI_SUM, &ctx),
	          0);
	done_ok(&ctx, FI_ATOMIC | FI_READ);
	CHECK_INT(r[0], 12);
	CHECK_INT(r[1], 1);
	CHECK_INT(r[5], 15 + 12);
	CHECK_INT(t[0], 13);
	CHECK_INT(fi_fetch_atomicmsg(A.ep, &m, resv, NULL, 3, 0), 0);
	done_ok(&ctx, FI_ATOMIC | FI_READ);
	CHECK_INT(r[0], 13);
	/* compare: t = {14, 3, 19, 24, 29, 33}; equal where cmpv says */
	t[0] = 11, t[2] = 99, t[4] = 15;
	CHECK_INT(fi_compare_atomicv(A.ep, iov, NULL, 2, cmpiov, NULL, 1, resv, NULL, 3,
	                             B.addr, ta(t), key_rw, FI_UINT64, FI_CSWAP, &ctx),
	          0);
	done_ok(&ctx, FI_ATOMIC | FI_READ);
	CHECK_INT(t[0], 1);  /* swapped */
	CHECK_INT(t[2], 99); /* not */
	CHECK_INT(t[4], 5);
	CHECK_INT(r[2], 99);
	m.op = FI_CSWAP_NE;
	CHECK_INT(fi_compare_atomicmsg(A.ep, &m, cmpiov, NULL, 1, resv, NULL, 3, 0), 0);
	done_ok(&ctx, FI_ATOMIC | FI_READ);
	CHECK_INT(t[2], 3);
	CHECK_INT(r[0], 1);
	/* limits and bad arguments */
	CHECK_INT(fi_atomicvalid(A.ep, FI_UINT64, FI_SUM, &max), 0);
	{
		uint64_t *many = calloc(max + 1, 8);

		CHECK_INT(fi_atomic(A.ep, many, max + 1, NULL, B.addr, ta(tbuf), key_rw,
		                    FI_UINT64, FI_SUM, &ctx),
		          -FI_EMSGSIZE);
		CHECK_INT(fi_atomic(A.ep, many, max, NULL, B.addr, ta(tbuf + 65536),
		                    key_rw, FI_UINT64, FI_SUM, &ctx),
		          0);
		done_ok(&ctx, FI_ATOMIC | FI_WRITE);
		free(many);
	}
	CHECK_INT(
	    fi_atomic(A.ep, a, 1, NULL, B.addr, ta(t), key_rw, FI_DOUBLE, FI_BOR, &ctx),
	    -FI_EOPNOTSUPP);
	CHECK_INT(
	    fi_atomic(A.ep, a, 1, NULL, B.addr, ta(t), key_rw, FI_UINT64, FI_CSWAP, &ctx),
	    -FI_EOPNOTSUPP);
	CHECK_INT(
	    fi_inject_atomic(A.ep, a, 1000, B.addr, ta(t), key_rw, FI_UINT64, FI_SUM),
	    -FI_EMSGSIZE);
	/* rejected at the target, memory untouched */
	t[0] = 77;
	CHECK_INT(fi_atomic(A.ep, a, 1, NULL, B.addr, ta(t), key_rw + 99, FI_UINT64,
	                    FI_SUM, &ctx),
	          0);
	done_err(&ctx, FI_EKEYREJECTED);
	CHECK_INT(fi_atomic(A.ep, a, 2, NULL, B.addr, ta(tbuf) + TSIZE - 8, key_rw,
	                    FI_UINT64, FI_SUM, &ctx),
	          0);
	done_err(&ctx, FI_EACCES);
	CHECK_INT(
	    fi_atomic(A.ep, a, 1, NULL, B.addr, ta(ro), key_ro, FI_UINT64, FI_SUM, &ctx),
	    0);
	done_err(&ctx, FI_EACCES);
	CHECK_INT(fi_fetch_atomic(A.ep, a, 1, NULL, r, NULL, B.addr, ta(wo), key_wo,
	                          FI_UINT64, FI_SUM, &ctx),
	          0);
	done_err(&ctx, FI_EACCES);
	/* reading needs read access only */
	CHECK_INT(fi_fetch_atomic(A.ep, NULL, 1, NULL, r, NULL, B.addr, ta(ro), key_ro,
	                          FI_UINT64, FI_ATOMIC_READ, &ctx),
	          0);
	done_ok(&ctx, FI_ATOMIC | FI_READ);
	CHECK_HEX(r[0], 0x0101010101010101ULL);
	CHECK_INT(t[0], 77);
	CHECK(ro[0] == 1 && wo[0] == lbuf[0]);
	(void)e, (void)err;
}

int main(void)
{
	if (!loopfix_open(pump))
		return check_done();
	CHECK(fx.info->caps & FI_RMA);
	CHECK(fx.info->caps & FI_ATOMIC);
	open_side(&A);
	open_side(&B);
	tbuf = calloc(1, TSIZE);
	lbuf = malloc(TSIZE);
	rbuf = malloc(TSIZE + 1);
	CHECK_INT(fi_mr_reg(fx.domain, tbuf, TSIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
	                    0, 0, &mr_rw, NULL),
	          0);
	CHECK_INT(
	    fi_mr_reg(fx.domain, ro, sizeof(ro), FI_REMOTE_READ, 0, 0, 0, &mr_ro, NULL),
	    0);
	CHECK_INT(
	    fi_mr_reg(fx.domain, wo, sizeof(wo), FI_REMOTE_WRITE, 0, 0, 0, &mr_wo, NULL),
	    0);
	key_rw = fi_mr_key(mr_rw);
	key_ro = fi_mr_key(mr_ro);
	key_wo = fi_mr_key(mr_wo);

	test_sizes();
	test_vectors();
	test_inject_data();
	test_rejects();
	test_atomic_ops();
	test_atomic_forms();

	CHECK_INT(fi_close(&mr_rw->fid), 0);
	CHECK_INT(fi_close(&mr_ro->fid), 0);
	CHECK_INT(fi_close(&mr_wo->fid), 0);
	close_side(&A);
	close_side(&B);
	loopfix_close();
	free(tbuf);
	free(lbuf);
	free(rbuf);
	return check_done();
}
