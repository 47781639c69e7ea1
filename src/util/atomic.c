/* atomic.c - atomic arithmetic for every fi_op x fi_datatype pair loom
 * supports, generated from one table of types and one of operations, and
 * fi_query_atomic for util domains. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

/* ---- types ------------------------------------------------------------------
 * X(datatype, C type, arithmetic type, tag, access mode, carrier, ...)
 * The arithmetic type is where SUM and PROD are computed: unsigned and at
 * least as wide as int for the integers (so signed overflow wraps instead of
 * being undefined, and uint16 * uint16 cannot overflow int), the type itself
 * for floating types.  The access mode says how an element is updated
 * atomically: LF by compare-and-swap on the same-sized unsigned integer,
 * the carrier (1..8-byte elements; a float complex is only 4-aligned as a
 * C type, but swapped as one 8-byte word), LK under a striped lock
 * (anything wider, which the CPU cannot swap without libatomic). */

typedef __int128 lm_i128;
typedef unsigned __int128 lm_u128;
typedef float _Complex lm_fc;
typedef double _Complex lm_dc;
typedef long double _Complex lm_ldc;

#define INT_TYPES(X, ...)                                                                \
	X(FI_INT8, int8_t, uint32_t, i8, LF, uint8_t, __VA_ARGS__)                       \
	X(FI_UINT8, uint8_t, uint32_t, u8, LF, uint8_t, __VA_ARGS__)                     \
	X(FI_INT16, int16_t, uint32_t, i16, LF, uint16_t, __VA_ARGS__)                   \
	X(FI_UINT16, uint16_t, uint32_t, u16, LF, uint16_t, __VA_ARGS__)                 \
	X(FI_INT32, int32_t, uint32_t, i32, LF, uint32_t, __VA_ARGS__)                   \
	X(FI_UINT32, uint32_t, uint32_t, u32, LF, uint32_t, __VA_ARGS__)                 \
	X(FI_INT64, int64_t, uint64_t, i64, LF, uint64_t, __VA_ARGS__)                   \
	X(FI_UINT64, uint64_t, uint64_t, u64, LF, uint64_t, __VA_ARGS__)                 \
	X(FI_INT128, lm_i128, lm_u128, i128, LK, void, __VA_ARGS__)                      \
	X(FI_UINT128, lm_u128, lm_u128, u128, LK, void, __VA_ARGS__)

#define REAL_TYPES(X, ...)                                                               \
	X(FI_FLOAT, float, float, f, LF, uint32_t, __VA_ARGS__)                          \
	X(FI_DOUBLE, double, double, d, LF, uint64_t, __VA_ARGS__)                       \
	X(FI_LONG_DOUBLE, long double, long double, ld, LK, void, __VA_ARGS__)

#define COMPLEX_TYPES(X, ...)                                                            \
	X(FI_FLOAT_COMPLEX, lm_fc, lm_fc, fc, LF, uint64_t, __VA_ARGS__)                 \
	X(FI_DOUBLE_COMPLEX, lm_dc, lm_dc, dc, LK, void, __VA_ARGS__)                    \
	X(FI_LONG_DOUBLE_COMPLEX, lm_ldc, lm_ldc, ldc, LK, void, __VA_ARGS__)

/* The type classes an operation is defined on. */
#define INTS(X, ...)    INT_TYPES(X, __VA_ARGS__)
#define ORDERED(X, ...) INT_TYPES(X, __VA_ARGS__) REAL_TYPES(X, __VA_ARGS__)
#define ANY(X, ...)                                                                      \
	INT_TYPES(X, __VA_ARGS__) REAL_TYPES(X, __VA_ARGS__) COMPLEX_TYPES(X, __VA_ARGS__)

#define NTYPES (FI_UINT128 + 1)

/* ---- operations ---------------------------------------------------------------
 * Y(op, name, classes).  Each name has C_<name>(d, s, c), whether the
 * target is written, and V_<name>(T, U, d, s, c), what is written; d is the
 * target's current value, s the source operand, c the compare operand. */

#define ALL_OPS(Y)                                                                       \
	Y(FI_MIN, min, ORDERED)                                                          \
	Y(FI_MAX, max, ORDERED)                                                          \
	Y(FI_SUM, sum, ANY)                                                              \
	Y(FI_PROD, prod, ANY)                                                            \
	Y(FI_LOR, lor, ANY)                                                              \
	Y(FI_LAND, land, ANY)                                                            \
	Y(FI_BOR, bor, INTS)                                                             \
	Y(FI_BAND, band, INTS)                                                           \
	Y(FI_LXOR, lxor, ANY)                                                            \
	Y(FI_BXOR, bxor, INTS)                                                           \
	Y(FI_ATOMIC_READ, read, ANY)                                                     \
	Y(FI_ATOMIC_WRITE, write, ANY)                                                   \
	Y(FI_CSWAP, cswap, ANY)                                                          \
	Y(FI_CSWAP_NE, cswap_ne, ANY)                                                    \
	Y(FI_CSWAP_LE, cswap_le, ORDERED)                                                \
	Y(FI_CSWAP_LT, cswap_lt, ORDERED)                                                \
	Y(FI_CSWAP_GE, cswap_ge, ORDERED)                                                \
	Y(FI_CSWAP_GT, cswap_gt, ORDERED)                                                \
	Y(FI_MSWAP, mswap, INTS)

#define C_min(d, s, c)      ((s) < (d))
#define C_max(d, s, c)      ((s) > (d))
#define C_sum(d, s, c)      1
#define C_prod(d, s, c)     1
#define C_lor(d, s, c)      1
#define C_land(d, s, c)     1
#define C_bor(d, s, c)      1
#define C_band(d, s, c)     1
#define C_lxor(d, s, c)     1
#define C_bxor(d, s, c)     1
#define C_read(d, s, c)     0
#define C_write(d, s, c)    1
#define C_cswap(d, s, c)    ((c) == (d))
#define C_cswap_ne(d, s, c) ((c) != (d))
#define C_cswap_le(d, s, c) ((c) <= (d))
#define C_cswap_lt(d, s, c) ((c) < (d))
#define C_cswap_ge(d, s, c) ((c) >= (d))
#define C_cswap_gt(d, s, c) ((c) > (d))
#define C_mswap(d, s, c)    1

#define V_min(T, U, d, s, c)      (s)
#define V_max(T, U, d, s, c)      (s)
#define V_sum(T, U, d, s, c)      ((T)((U)(d) + (U)(s)))
#define V_prod(T, U, d, s, c)     ((T)((U)(d) * (U)(s)))
#define V_lor(T, U, d, s, c)      ((T)((d) || (s)))
#define V_land(T, U, d, s, c)     ((T)((d) && (s)))
#define V_bor(T, U, d, s, c)      ((T)((d) | (s)))
#define V_band(T, U, d, s, c)     ((T)((d) & (s)))
#define V_lxor(T, U, d, s, c)     ((T)(((d) && !(s)) || (!(d) && (s))))
#define V_bxor(T, U, d, s, c)     ((T)((d) ^ (s)))
#define V_read(T, U, d, s, c)     (d)
#define V_write(T, U, d, s, c)    (s)
#define V_cswap(T, U, d, s, c)    (s)
#define V_cswap_ne(T, U, d, s, c) (s)
#define V_cswap_le(T, U, d, s, c) (s)
#define V_cswap_lt(T, U, d, s, c) (s)
#define V_cswap_ge(T, U, d, s, c) (s)
#define V_cswap_gt(T, U, d, s, c) (s)
#define V_mswap(T, U, d, s, c)    ((T)(((s) & (c)) | ((d) & ~(c))))

/* ---- striped locks for elements the CPU cannot swap ------------------------ */

#define NSTRIPES 64

static pthread_mutex_t stripes[NSTRIPES] = {[0 ... NSTRIPES - 1] =
                                                PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t *stripe_of(const void *p)
{
	uint64_t h = ((uint64_t)(uintptr_t)p >> 4) * UINT64_C(0x9e3779b97f4a7c15);

	return &stripes[h >> 58];
}

/* ---- per-element bodies ------------------------------------------------------
 * Operands are read with memcpy because wire buffers need not be aligned.
 * Every element's previous value goes to result when there is one. */

#define LOAD_OPERANDS(T)                                                                 \
	T s = 0, c = 0, old, nv;                                                         \
	if (sp)                                                                          \
		memcpy(&s, sp + i * sizeof(T), sizeof(T));                               \
	if (cp)                                                                          \
		memcpy(&c, cp + i * sizeof(T), sizeof(T));

#define BODY_LOCKED(T, U, C, V)                                                          \
	for (size_t i = 0; i < count; i++) {                                             \
		char *p = dp + i * sizeof(T);                                            \
		pthread_mutex_t *m = stripe_of(p);                                       \
		LOAD_OPERANDS(T)                                                         \
		pthread_mutex_lock(m);                                                   \
		memcpy(&old, p, sizeof(T));                                              \
		if (C(old, s, c)) {                                                      \
			nv = V(T, U, old, s, c);                                         \
			memcpy(p, &nv, sizeof(T));                                       \
		}                                                                        \
		pthread_mutex_unlock(m);                                                 \
		if (rp)                                                                  \
			memcpy(rp + i * sizeof(T), &old, sizeof(T));                     \
	}

#define BODY_LK(T, U, W, C, V) BODY_LOCKED(T, U, C, V)

/* A misaligned target cannot be swapped atomically either; it takes the
 * lock, which is consistent because a given address is always either
 * aligned or not for a given type. */
#define BODY_LF(T, U, W, C, V)                                                           \
	if ((uintptr_t)dp % sizeof(W)) {                                                 \
		BODY_LOCKED(T, U, C, V)                                                  \
		return;                                                                  \
	}                                                                                \
	for (size_t i = 0; i < count; i++) {                                             \
		W *p = (W *)(void *)(dp + i * sizeof(T)), ow, nw;                        \
		LOAD_OPERANDS(T)                                                         \
		ow = __atomic_load_n(p, __ATOMIC_ACQUIRE);                               \
		memcpy(&old, &ow, sizeof(T));                                            \
		while (C(old, s, c)) {                                                   \
			nv = V(T, U, old, s, c);                                         \
			memcpy(&nw, &nv, sizeof(T));                                     \
			if (__atomic_compare_exchange_n(                                 \
			        p, &ow, nw, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))   \
				break;                                                   \
			memcpy(&old, &ow, sizeof(T));                                    \
		}                                                                        \
		if (rp)                                                                  \
			memcpy(rp + i * sizeof(T), &old, sizeof(T));                     \
	}

typedef void (*apply_fn)(char *dp, const char *sp, const char *cp, char *rp,
                         size_t count);

#define DEF_FN(dt, T, U, tag, MODE, W, name, C, V)                                       \
	static void apply_##name##_##tag(char *dp, const char *sp, const char *cp,       \
	                                 char *rp, size_t count)                         \
	{                                                                                \
		BODY_##MODE(T, U, W, C, V)                                               \
	}
#define DEF_OP(op, name, CLASS) CLASS(DEF_FN, name, C_##name, V_##name)
ALL_OPS(DEF_OP)

#define TAB_ENT(dt, T, U, tag, MODE, W, name, op) [op][dt] = apply_##name##_##tag,
#define TAB_OP(op, name, CLASS)                   CLASS(TAB_ENT, name, op)
static const apply_fn apply_table[FI_ATOMIC_OP_LAST][NTYPES] = {ALL_OPS(TAB_OP)};

#define SIZE_ENT(dt, T, U, tag, MODE, W, ...) [dt] = sizeof(T),
static const size_t type_size[NTYPES] = {ANY(SIZE_ENT, _)};

/* ---- entry points ------------------------------------------------------------ */

size_t lm_datatype_size(enum fi_datatype dt)
{
	return (unsigned)dt < NTYPES ? type_size[dt] : 0;
}

static bool op_in_kind(enum fi_op op, enum lm_atomic_kind kind)
{
	switch (kind) {
	case LM_ATOMIC_BASE:
		return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
	case LM_ATOMIC_FETCH:
		return op <= FI_ATOMIC_WRITE;
	case LM_ATOMIC_COMPARE:
		return op >= FI_CSWAP && op <= FI_MSWAP;
	}
	return false;
}

static apply_fn lookup(enum fi_datatype dt, enum fi_op op)
{
	if ((unsigned)dt >= NTYPES || (unsigned)op >= FI_ATOMIC_OP_LAST)
		return NULL;
	return apply_table[op][dt];
}

bool lm_atomic_valid(enum fi_datatype dt, enum fi_op op, enum lm_atomic_kind kind)
{
	return lookup(dt, op) && op_in_kind(op, kind);
}

int lm_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
                    const void *cmp, void *result, size_t count)
{
	apply_fn fn = lookup(dt, op);

	if (!fn)
		return -FI_EOPNOTSUPP;
	if (!count)
		return 0;
	if (!dst || (op == FI_ATOMIC_READ ? !result : !src) || (op >= FI_CSWAP && !cmp))
		return -FI_EINVAL;
	fn(dst, src, cmp, result, count);
	return 0;
}

int lm_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                    struct fi_atomic_attr *attr, uint64_t flags)
{
	enum lm_atomic_kind kind = LM_ATOMIC_BASE;
	const struct lm_domain *dom;
	size_t unit, max = SIZE_MAX;

	if (!domain || domain->fid.fclass != FI_CLASS_DOMAIN || !attr)
		return -FI_EINVAL;
	if (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED))
		return -FI_EBADFLAGS;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	if ((unsigned)datatype >= NTYPES || (unsigned)op >= FI_ATOMIC_OP_LAST)
		return -FI_EINVAL;
	if (flags & FI_TAGGED)
		return -FI_EOPNOTSUPP;
	if (flags & FI_FETCH_ATOMIC)
		kind = LM_ATOMIC_FETCH;
	else if (flags & FI_COMPARE_ATOMIC)
		kind = LM_ATOMIC_COMPARE;
	if (!lm_atomic_valid(datatype, op, kind))
		return -FI_EOPNOTSUPP;

	dom = lm_container_of(domain, struct lm_domain, domain_fid);
	if (dom->info && dom->info->ep_attr && dom->info->ep_attr->max_msg_size)
		max = dom->info->ep_attr->max_msg_size;
	/* A compare carries two operands per element. */
	unit = type_size[datatype] * (kind == LM_ATOMIC_COMPARE ? 2 : 1);
	attr->size = type_size[datatype];
	attr->count = max / unit ? max / unit : 1;
	return 0;
}
