/* atomic.c - fi_atomic over the engine: the initiator's calls and *valid
 * queries, and execution at the target (lm_mr_verify, then util's
 * lm_atomic_apply).  One call travels as one packet: operands (and compare
 * values) inline, old values back in the answer; so a call carries at most
 * max_payload bytes of operands (of compares, of results), which is the
 * count the *valid queries report and the calls enforce (-FI_EMSGSIZE). */
#include <string.h>

#include "rdm.h"

/* Result vectors of fetching atomics live at the start of the request's
 * inject area; operands copied for FI_INJECT follow them. */
#define RES_AREA (LM_IOV_LIMIT * sizeof(struct iovec))

size_t lm_rdm_atomic_max(struct lm_rdm_ep *ep, enum fi_datatype dt, bool compare)
{
	size_t sz = lm_datatype_size(dt);

	return sz ? ep->link->max_payload / (sz * (compare ? 2 : 1)) : 0;
}

/* ---- target side ------------------------------------------------------- */

static void atomic_exec(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_hdr a = {
	    .version = LM_RDM_WIRE_VERSION, .op = LM_OP_ATOMIC_RESP, .sreq = h->sreq};
	enum fi_op op = (enum fi_op)(h->tag >> LM_ATOMIC_TAG_SHIFT & LM_ATOMIC_TAG_MASK);
	enum fi_datatype dt = (enum fi_datatype)(h->tag & LM_ATOMIC_TAG_MASK);
	enum lm_atomic_kind kind = h->flags & LM_HF_COMPARE ? LM_ATOMIC_COMPARE
	                           : h->flags & LM_HF_FETCH ? LM_ATOMIC_FETCH
	                                                    : LM_ATOMIC_BASE;
	size_t sz = lm_datatype_size(dt), bytes = 0, want;
	uint64_t access;
	void *dst;
	int ret = 0;

	if (!sz || h->tag >> 2 * LM_ATOMIC_TAG_SHIFT ||
	    !lm_atomic_valid(dt, op, kind)) {
		ret = -FI_EOPNOTSUPP;
		goto answer;
	}
	if (h->size > lm_rdm_atomic_max(ep, dt, false)) {
		ret = -FI_EMSGSIZE;
		goto answer;
	}
	bytes = h->size * sz;
	want =
	    (op == FI_ATOMIC_READ ? 0 : bytes) + (kind == LM_ATOMIC_COMPARE ? bytes : 0);
	if (plen != want) {
		ret = -FI_EINVAL;
		goto answer;
	}
	/* Reading old values needs FI_REMOTE_READ; changing memory
	 * FI_REMOTE_WRITE (FI_ATOMIC_READ changes nothing). */
	access = op == FI_ATOMIC_READ
	             ? FI_REMOTE_READ
	             : FI_REMOTE_WRITE | (kind != LM_ATOMIC_BASE ? FI_REMOTE_READ : 0);
	ret = lm_mr_verify(&ep->dom->util, h->key, h->addr, bytes, access, &dst);
	if (ret)
		goto answer;
	if (bytes)
		ret = lm_atomic_apply(
		    op, dt, dst, op == FI_ATOMIC_READ ? NULL : payload,
		    kind == LM_ATOMIC_COMPARE ? (const char *)payload + (plen - bytes)
		                              : NULL,
		    kind != LM_ATOMIC_BASE ? ep->scratch : NULL, h->size);
	/* man fi_endpoint: fetching and compare atomics count as remote
	 * reads, base atomics as remote writes. */
	if (!ret)
		lm_rdm_remote_event(ep, h->key,
		                    kind == LM_ATOMIC_BASE ? FI_REMOTE_WRITE : FI_REMOTE_READ);
answer:
	a.rreq = (uint64_t)-ret;
	a.len = !ret && kind != LM_ATOMIC_BASE ? (uint32_t)bytes : 0;
	lm_rdm_ctl_send(ep, peer, &a, ep->scratch, a.len);
}

static void atomic_done(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_awaiting(ep, h->sreq, peer, LM_OP_ATOMIC);
	int err;

	if (!tx)
		return;
	err = h->rreq > 0 && h->rreq < 0x10000 ? (int)h->rreq : 0;
	if (!err && tx->result) {
		struct iovec res[LM_IOV_LIMIT];

		if (plen != tx->len) {
			err = FI_EIO; /* a malformed answer: report, do not guess */
		} else {
			memcpy(res, tx->result, tx->result_len * sizeof(*res));
			lm_copy_to_iov(res, tx->result_len, 0, payload, plen);
		}
	}
	lm_rdm_tx_done(ep, tx, err);
}

void lm_rdm_atomic_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	if (h->op == LM_OP_ATOMIC)
		atomic_exec(ep, peer, h, payload, plen);
	else
		atomic_done(ep, peer, h, payload, plen);
}

/* ---- initiator side ------------------------------------------------------ */

struct atomic_args {
	const struct fi_ioc *iov, *cmp;
	struct fi_ioc *res;
	size_t count, cmp_count, res_count;
	fi_addr_t dest;
	uint64_t addr, key;
	enum fi_datatype dt;
	enum fi_op op;
	uint64_t flags;
	void *context;
	bool inject_call;
};

/* Element total of an ioc vector, as bytes of sz; the vector as iovecs.
 * SIZE_MAX when an entry has elements but no buffer (and the buffer is
 * used: an FI_ATOMIC_READ's operands are not), or the total overflows. */
static size_t ioc_to_iov(const struct fi_ioc *ioc, size_t n, size_t sz, struct iovec *out,
                         bool used)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		if ((used && ioc[i].count && !ioc[i].addr) ||
		    ioc[i].count > (SIZE_MAX / 2 - total) / (sz ? sz : 1))
			return SIZE_MAX;
		out[i].iov_base = ioc[i].addr;
		out[i].iov_len = ioc[i].count * sz;
		total += ioc[i].count;
	}
	return total;
}

/* A checked atomic call: its vectors as iovecs and how its payload goes. */
struct atomic_plan {
	struct iovec ops[LM_IOV_LIMIT], cmps[LM_IOV_LIMIT], res[LM_IOV_LIMIT];
	size_t nelem, bytes; /* elements (of each vector), operand bytes */
	size_t plen, off;    /* payload bytes; where operands go in the inject area */
	bool send_ops;       /* operands travel (not for FI_ATOMIC_READ) */
	bool copy;           /* operands copied into the request */
};

/* Check a call of kind on ep and plan it into pl: the call's error, or 0. */
static ssize_t atomic_plan(struct lm_rdm_ep *ep, enum lm_atomic_kind kind,
                           const struct atomic_args *a, struct atomic_plan *pl)
{
	size_t sz = lm_datatype_size(a->dt);

	if (a->flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	if (a->count > LM_IOV_LIMIT || a->cmp_count > LM_IOV_LIMIT ||
	    a->res_count > LM_IOV_LIMIT || (a->count && !a->iov) ||
	    (a->cmp_count && !a->cmp) || (a->res_count && !a->res))
		return -FI_EINVAL;
	if ((unsigned)a->dt > LM_ATOMIC_TAG_MASK ||
	    (unsigned)a->op > LM_ATOMIC_TAG_MASK || !lm_atomic_valid(a->dt, a->op, kind))
		return -FI_EOPNOTSUPP;
	pl->send_ops = a->op != FI_ATOMIC_READ;
	pl->nelem = ioc_to_iov(a->iov, a->count, sz, pl->ops, pl->send_ops);
	if (pl->nelem == SIZE_MAX)
		return -FI_EINVAL;
	if (pl->nelem > lm_rdm_atomic_max(ep, a->dt, kind == LM_ATOMIC_COMPARE))
		return -FI_EMSGSIZE;
	pl->bytes = pl->nelem * sz;
	if (kind == LM_ATOMIC_COMPARE &&
	    ioc_to_iov(a->cmp, a->cmp_count, sz, pl->cmps, true) != pl->nelem)
		return -FI_EINVAL;
	if (kind != LM_ATOMIC_BASE &&
	    ioc_to_iov(a->res, a->res_count, sz, pl->res, true) != pl->nelem)
		return -FI_EINVAL;
	pl->plen =
	    (pl->send_ops ? pl->bytes : 0) + (kind == LM_ATOMIC_COMPARE ? pl->bytes : 0);
	pl->off = kind == LM_ATOMIC_BASE ? 0 : RES_AREA;
	/* Operands are copied for FI_INJECT, or when operand and compare
	 * vectors together are longer than a request holds. */
	pl->copy = (a->flags & FI_INJECT) ||
	           (pl->send_ops ? a->count : 0) +
	                   (kind == LM_ATOMIC_COMPARE ? a->cmp_count : 0) >
	               LM_IOV_LIMIT;
	if (pl->copy && pl->plen > ep->inject_size - LM_MIN(pl->off, ep->inject_size))
		return (a->flags & FI_INJECT) ? -FI_EMSGSIZE : -FI_EINVAL;
	if (pl->off > ep->inject_size)
		return -FI_EINVAL;
	return 0;
}

/* Give tx the call's result vector and its operands (and compare values):
 * copied into the inject area, or as the caller's iovecs. */
static void atomic_payload(struct lm_rdm_tx *tx, enum lm_atomic_kind kind,
                           const struct atomic_args *a, const struct atomic_plan *pl)
{
	tx->iov_count = 0;
	if (kind != LM_ATOMIC_BASE) {
		memcpy(tx->inject, pl->res, a->res_count * sizeof(*pl->res));
		tx->result = tx->inject;
		tx->result_len = a->res_count;
	}
	if (pl->copy) {
		size_t at = pl->off;

		if (pl->send_ops)
			at += lm_copy_from_iov(tx->inject + at, pl->ops, a->count, 0,
			                       pl->bytes);
		if (kind == LM_ATOMIC_COMPARE)
			lm_copy_from_iov(tx->inject + at, pl->cmps, a->cmp_count, 0,
			                 pl->bytes);
		tx->iov[0].iov_base = tx->inject + pl->off;
		tx->iov[0].iov_len = pl->plen;
		tx->iov_count = 1;
	} else {
		if (pl->send_ops) {
			memcpy(tx->iov, pl->ops, a->count * sizeof(*pl->ops));
			tx->iov_count = a->count;
		}
		if (kind == LM_ATOMIC_COMPARE) {
			memcpy(tx->iov + tx->iov_count, pl->cmps,
			       a->cmp_count * sizeof(*pl->cmps));
			tx->iov_count += a->cmp_count;
		}
	}
}

static ssize_t trig_atomic(struct lm_rdm_ctx *ctx, enum lm_atomic_kind kind,
                           const struct atomic_args *a);

static ssize_t atomic_post(struct lm_rdm_ctx *ctx, enum lm_atomic_kind kind,
                           const struct atomic_args *a)
{
	struct lm_rdm_ep *ep = ctx->ep;
	struct lm_rdm_hdr h = {.version = LM_RDM_WIRE_VERSION, .op = LM_OP_ATOMIC};
	struct atomic_plan pl;
	struct lm_rdm_tx *tx;
	ssize_t ret;

	if (a->flags & FI_TRIGGER)
		return trig_atomic(ctx, kind, a);
	ret = atomic_plan(ep, kind, a, &pl);
	if (ret)
		return ret;

	lm_lock_acquire(ep->lock);
	if (!ep->enabled || ctx->tx_off) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	tx = lm_rdm_tx_begin(ep, ctx->txrep, a->dest, a->flags, a->context,
	                     a->inject_call, &ret);
	if (!tx)
		goto out;
	tx->cntr =
	    ctx->txrep->cntr[kind == LM_ATOMIC_BASE ? LM_CNTR_WRITE : LM_CNTR_READ];
	tx->cq_flags = FI_ATOMIC | (kind == LM_ATOMIC_BASE ? FI_WRITE : FI_READ);
	tx->len = pl.bytes;
	tx->op = LM_OP_ATOMIC;
	atomic_payload(tx, kind, a, &pl);
	h.len = (uint32_t)pl.plen;
	h.flags = ep->lane_flags | (kind == LM_ATOMIC_COMPARE ? LM_HF_FETCH | LM_HF_COMPARE
	                            : kind == LM_ATOMIC_FETCH ? LM_HF_FETCH
	                                                      : 0);
	h.size = pl.nelem;
	h.tag = (uint64_t)a->op << LM_ATOMIC_TAG_SHIFT | (uint64_t)a->dt;
	h.addr = a->addr;
	h.key = a->key;
	ret = lm_rdm_tx_launch(ep, tx, &h);
out:
	lm_lock_release(ep->lock);
	return ret;
}

/* The non-msg calls: a's vectors come from the caller, the target and
 * datatype from the call's arguments, the flags from the fid's op_flags
 * (FI_INJECT alone for fi_inject_atomic). */
static ssize_t call_post(struct fid_ep *fid, enum lm_atomic_kind kind,
                         struct atomic_args *a, fi_addr_t dest, uint64_t addr,
                         uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	a->dest = dest;
	a->addr = addr;
	a->key = key;
	a->dt = dt;
	a->op = op;
	a->flags = a->inject_call ? FI_INJECT : lm_rdm_ctx_of(fid)->tx_flags;
	a->context = context;
	return atomic_post(lm_rdm_ctx_of(fid), kind, a);
}

/* The fi_msg_atomic calls (loom's rma_iov_limit is 1); cmp and res are
 * the compare and result vectors of the fetching kinds. */
static ssize_t msg_post(struct fid_ep *fid, enum lm_atomic_kind kind,
                        const struct fi_msg_atomic *msg, uint64_t flags,
                        const struct fi_ioc *cmp, size_t cmp_count, struct fi_ioc *res,
                        size_t res_count)
{
	struct atomic_args a = {.cmp = cmp,
	                        .cmp_count = cmp_count,
	                        .res = res,
	                        .res_count = res_count,
	                        .flags = flags};

	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	a.iov = msg->msg_iov;
	a.count = msg->iov_count;
	a.dest = msg->addr;
	a.addr = msg->rma_iov[0].addr;
	a.key = msg->rma_iov[0].key;
	a.dt = msg->datatype;
	a.op = msg->op;
	a.context = msg->context;
	return atomic_post(lm_rdm_ctx_of(fid), kind, &a);
}

static ssize_t rdm_atomic(struct fid_ep *fid, const void *buf, size_t count, void *desc,
                          fi_addr_t dest, uint64_t addr, uint64_t key,
                          enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count};
	struct atomic_args a = {.iov = &ioc, .count = 1};

	(void)desc;
	return call_post(fid, LM_ATOMIC_BASE, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_atomicv(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
                           size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                           enum fi_datatype dt, enum fi_op op, void *context)
{
	struct atomic_args a = {.iov = iov, .count = count};

	(void)desc;
	return call_post(fid, LM_ATOMIC_BASE, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_atomicmsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
                             uint64_t flags)
{
	return msg_post(fid, LM_ATOMIC_BASE, msg, flags, NULL, 0, NULL, 0);
}

static ssize_t rdm_inject_atomic(struct fid_ep *fid, const void *buf, size_t count,
                                 fi_addr_t dest, uint64_t addr, uint64_t key,
                                 enum fi_datatype dt, enum fi_op op)
{
	struct fi_ioc ioc = {(void *)buf, count};
	struct atomic_args a = {.iov = &ioc, .count = 1, .inject_call = true};

	return call_post(fid, LM_ATOMIC_BASE, &a, dest, addr, key, dt, op, NULL);
}

static ssize_t rdm_fetch(struct fid_ep *fid, const void *buf, size_t count, void *desc,
                         void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
                         uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count}, res = {result, count};
	struct atomic_args a = {.iov = &ioc, .count = 1, .res = &res, .res_count = 1};

	(void)desc, (void)result_desc;
	return call_post(fid, LM_ATOMIC_FETCH, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_fetchv(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
                          size_t count, struct fi_ioc *resultv, void **result_desc,
                          size_t result_count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, enum fi_datatype dt, enum fi_op op, void *context)
{
	struct atomic_args a = {
	    .iov = iov, .count = count, .res = resultv, .res_count = result_count};

	(void)desc, (void)result_desc;
	return call_post(fid, LM_ATOMIC_FETCH, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_fetchmsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
                            struct fi_ioc *resultv, void **result_desc,
                            size_t result_count, uint64_t flags)
{
	(void)result_desc;
	return msg_post(fid, LM_ATOMIC_FETCH, msg, flags, NULL, 0, resultv, result_count);
}

static ssize_t rdm_compare(struct fid_ep *fid, const void *buf, size_t count, void *desc,
                           const void *compare, void *compare_desc, void *result,
                           void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                           enum fi_datatype dt, enum fi_op op, void *context)
{
	struct fi_ioc ioc = {(void *)buf, count}, cmp = {(void *)compare, count},
	              res = {result, count};
	struct atomic_args a = {.iov = &ioc,
	                        .count = 1,
	                        .cmp = &cmp,
	                        .cmp_count = 1,
	                        .res = &res,
	                        .res_count = 1};

	(void)desc, (void)compare_desc, (void)result_desc;
	return call_post(fid, LM_ATOMIC_COMPARE, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_comparev(struct fid_ep *fid, const struct fi_ioc *iov, void **desc,
                            size_t count, const struct fi_ioc *comparev,
                            void **compare_desc, size_t compare_count,
                            struct fi_ioc *resultv, void **result_desc,
                            size_t result_count, fi_addr_t dest, uint64_t addr,
                            uint64_t key, enum fi_datatype dt, enum fi_op op,
                            void *context)
{
	struct atomic_args a = {.iov = iov,
	                        .count = count,
	                        .cmp = comparev,
	                        .cmp_count = compare_count,
	                        .res = resultv,
	                        .res_count = result_count};

	(void)desc, (void)compare_desc, (void)result_desc;
	return call_post(fid, LM_ATOMIC_COMPARE, &a, dest, addr, key, dt, op, context);
}

static ssize_t rdm_comparemsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
                              const struct fi_ioc *comparev, void **compare_desc,
                              size_t compare_count, struct fi_ioc *resultv,
                              void **result_desc, size_t result_count, uint64_t flags)
{
	(void)compare_desc, (void)result_desc;
	return msg_post(fid, LM_ATOMIC_COMPARE, msg, flags, comparev, compare_count,
	                resultv, result_count);
}

static int valid(struct fid_ep *fid, enum fi_datatype dt, enum fi_op op, size_t *count,
                 enum lm_atomic_kind kind)
{
	if (!count)
		return -FI_EINVAL;
	if (!lm_atomic_valid(dt, op, kind)) {
		*count = 0;
		return -FI_EOPNOTSUPP;
	}
	*count = lm_rdm_atomic_max(lm_rdm_ep_of(fid), dt, kind == LM_ATOMIC_COMPARE);
	return 0;
}

static int rdm_writevalid(struct fid_ep *fid, enum fi_datatype dt, enum fi_op op,
                          size_t *count)
{
	return valid(fid, dt, op, count, LM_ATOMIC_BASE);
}

static int rdm_fetchvalid(struct fid_ep *fid, enum fi_datatype dt, enum fi_op op,
                          size_t *count)
{
	return valid(fid, dt, op, count, LM_ATOMIC_FETCH);
}

static int rdm_comparevalid(struct fid_ep *fid, enum fi_datatype dt, enum fi_op op,
                            size_t *count)
{
	return valid(fid, dt, op, count, LM_ATOMIC_COMPARE);
}

const struct fi_ops_atomic lm_rdm_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = rdm_atomic,
    .writev = rdm_atomicv,
    .writemsg = rdm_atomicmsg,
    .inject = rdm_inject_atomic,
    .readwrite = rdm_fetch,
    .readwritev = rdm_fetchv,
    .readwritemsg = rdm_fetchmsg,
    .compwrite = rdm_compare,
    .compwritev = rdm_comparev,
    .compwritemsg = rdm_comparemsg,
    .writevalid = rdm_writevalid,
    .readwritevalid = rdm_fetchvalid,
    .compwritevalid = rdm_comparevalid,
};

/* ---- triggered atomics (trigger.c) --------------------------------------------- */

/* An atomic held until its trigger's counter is there: its vectors (the
 * buffers they name stay the application's), an inject's operands copied. */
static ssize_t trig_atomic(struct lm_rdm_ctx *ctx, enum lm_atomic_kind kind,
                           const struct atomic_args *a)
{
	size_t sz = lm_datatype_size(a->dt), n = 0;
	bool copy = a->inject_call || (a->flags & FI_INJECT);
	struct lm_rdm_trig *tr;

	if (a->count > LM_IOV_LIMIT || a->cmp_count > LM_IOV_LIMIT ||
	    a->res_count > LM_IOV_LIMIT || (a->count && !a->iov) ||
	    (a->cmp_count && !a->cmp) || (a->res_count && !a->res) || !sz)
		return -FI_EINVAL;
	for (size_t i = 0; i < a->count; i++) {
		if (a->iov[i].count > ctx->ep->inject_size / sz)
			return copy ? -FI_EMSGSIZE : -FI_EINVAL;
		n += a->iov[i].count;
	}
	if (copy && n * sz > ctx->ep->inject_size)
		return -FI_EMSGSIZE;
	tr = lm_rdm_trig_new(ctx, copy ? n * sz : 0, lm_rdm_trig_atomic);
	if (!tr)
		return -FI_ENOMEM;
	if (a->count)
		memcpy(tr->u.atomic.iov, a->iov, a->count * sizeof(*a->iov));
	if (copy) {
		size_t off = 0;

		for (size_t i = 0; i < a->count; i++) {
			if (a->iov[i].addr)
				memcpy(tr->copy + off, a->iov[i].addr, a->iov[i].count * sz);
			tr->u.atomic.iov[i].addr = tr->copy + off;
			off += a->iov[i].count * sz;
		}
	}
	if (a->cmp_count)
		memcpy(tr->u.atomic.cmp, a->cmp, a->cmp_count * sizeof(*a->cmp));
	if (a->res_count)
		memcpy(tr->u.atomic.res, a->res, a->res_count * sizeof(*a->res));
	tr->u.atomic.count = a->count;
	tr->u.atomic.cmp_count = a->cmp_count;
	tr->u.atomic.res_count = a->res_count;
	tr->u.atomic.dest = a->dest;
	tr->u.atomic.addr = a->addr;
	tr->u.atomic.key = a->key;
	tr->u.atomic.dt = (int)a->dt;
	tr->u.atomic.op = (int)a->op;
	tr->u.atomic.kind = (int)kind;
	tr->u.atomic.flags = a->flags & ~FI_TRIGGER;
	tr->u.atomic.inject_call = a->inject_call;
	return lm_rdm_trig_hold(tr, a->context);
}

ssize_t lm_rdm_trig_atomic(struct lm_rdm_trig *tr)
{
	struct atomic_args a = {.iov = tr->u.atomic.iov,
	                        .cmp = tr->u.atomic.cmp,
	                        .res = tr->u.atomic.res,
	                        .count = tr->u.atomic.count,
	                        .cmp_count = tr->u.atomic.cmp_count,
	                        .res_count = tr->u.atomic.res_count,
	                        .dest = tr->u.atomic.dest,
	                        .addr = tr->u.atomic.addr,
	                        .key = tr->u.atomic.key,
	                        .dt = (enum fi_datatype)tr->u.atomic.dt,
	                        .op = (enum fi_op)tr->u.atomic.op,
	                        .flags = tr->u.atomic.flags,
	                        .context = tr->context,
	                        .inject_call = tr->u.atomic.inject_call};

	return atomic_post(&tr->ctx, (enum lm_atomic_kind)tr->u.atomic.kind, &a);
}
