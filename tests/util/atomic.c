/* atomic.c - util atomics: every op x datatype against a reference computed
 * here (aligned and misaligned buffers), the validity table, fi_query_atomic
 * on the utiltest domain, and concurrent updates from several threads. */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"

typedef __int128 i128;
typedef unsigned __int128 u128;
typedef float _Complex fcplx;
typedef double _Complex dcplx;
typedef long double _Complex ldcplx;

enum cls { INT, REAL, CPLX };

/* A complex number is laid out as {real, imaginary} (C11 6.2.5); glibc's
 * CMPLX macros are missing under clang, and x + y * I mangles NaN and
 * infinities. */
#define MK_CPLX(T, R, name)                                                              \
	static T name(R re, R im)                                                        \
	{                                                                                \
		R parts[2] = {re, im};                                                   \
		T z;                                                                     \
		memcpy(&z, parts, sizeof(z));                                            \
		return z;                                                                \
	}
MK_CPLX(fcplx, float, mkfc)
MK_CPLX(dcplx, double, mkdc)
MK_CPLX(ldcplx, long double, mkldc)

/* What man fi_atomic and atomic.h promise, written out independently of
 * the library's tables. */
static bool expect_valid(enum fi_op op, enum cls k)
{
	switch (op) {
	case FI_MIN:
	case FI_MAX:
	case FI_CSWAP_LE:
	case FI_CSWAP_LT:
	case FI_CSWAP_GE:
	case FI_CSWAP_GT:
		return k != CPLX;
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
	case FI_MSWAP:
		return k == INT;
	default:
		return true;
	}
}

static bool expect_kind(enum fi_op op, enum lm_atomic_kind kind)
{
	bool cswap = op >= FI_CSWAP && op <= FI_MSWAP;

	if (kind == LM_ATOMIC_COMPARE)
		return cswap;
	if (cswap)
		return false;
	return op != FI_ATOMIC_READ || kind == LM_ATOMIC_FETCH;
}

static enum cls class_of(enum fi_datatype dt)
{
	switch (dt) {
	case FI_FLOAT:
	case FI_DOUBLE:
	case FI_LONG_DOUBLE:
		return REAL;
	case FI_FLOAT_COMPLEX:
	case FI_DOUBLE_COMPLEX:
	case FI_LONG_DOUBLE_COMPLEX:
		return CPLX;
	default:
		return INT;
	}
}

/* ---- reference arithmetic, one function per type ------------------------- */

/* Equal, or both NaN (a value that is not equal to itself). */
#define SAME(a, b) ((a) == (b) || ((a) != (a) && (b) != (b)))

#define REF_ORDERED_CASES(v, s, c, d)                                                    \
	case FI_MIN:                                                                     \
		if (s < v)                                                               \
			*d = s;                                                          \
		break;                                                                   \
	case FI_MAX:                                                                     \
		if (s > v)                                                               \
			*d = s;                                                          \
		break;                                                                   \
	case FI_CSWAP_LE:                                                                \
		if (c <= v)                                                              \
			*d = s;                                                          \
		break;                                                                   \
	case FI_CSWAP_LT:                                                                \
		if (c < v)                                                               \
			*d = s;                                                          \
		break;                                                                   \
	case FI_CSWAP_GE:                                                                \
		if (c >= v)                                                              \
			*d = s;                                                          \
		break;                                                                   \
	case FI_CSWAP_GT:                                                                \
		if (c > v)                                                               \
			*d = s;                                                          \
		break;

#define REF_COMMON_CASES(v, s, c, d)                                                     \
	case FI_LOR:                                                                     \
		*d = (v != 0) | (s != 0);                                                \
		break;                                                                   \
	case FI_LAND:                                                                    \
		*d = (v != 0) & (s != 0);                                                \
		break;                                                                   \
	case FI_LXOR:                                                                    \
		*d = (v != 0) != (s != 0);                                               \
		break;                                                                   \
	case FI_ATOMIC_READ:                                                             \
		break;                                                                   \
	case FI_ATOMIC_WRITE:                                                            \
		*d = s;                                                                  \
		break;                                                                   \
	case FI_CSWAP:                                                                   \
		if (c == v)                                                              \
			*d = s;                                                          \
		break;                                                                   \
	case FI_CSWAP_NE:                                                                \
		if (c != v)                                                              \
			*d = s;                                                          \
		break;

/* Integers: sums and products wrap (the overflow builtins give the wrapped
 * result whatever the signedness). */
#define REF_INT(T, tag)                                                                  \
	static void ref_##tag(enum fi_op op, T *d, T s, T c)                             \
	{                                                                                \
		T v = *d;                                                                \
		switch (op) {                                                            \
			REF_ORDERED_CASES(v, s, c, d)                                    \
			REF_COMMON_CASES(v, s, c, d)                                     \
		case FI_SUM:                                                             \
			(void)__builtin_add_overflow(v, s, d);                           \
			break;                                                           \
		case FI_PROD:                                                            \
			(void)__builtin_mul_overflow(v, s, d);                           \
			break;                                                           \
		case FI_BOR:                                                             \
			*d = v | s;                                                      \
			break;                                                           \
		case FI_BAND:                                                            \
			*d = v & s;                                                      \
			break;                                                           \
		case FI_BXOR:                                                            \
			*d = v ^ s;                                                      \
			break;                                                           \
		case FI_MSWAP:                                                           \
			*d = (s & c) | (v & ~c);                                         \
			break;                                                           \
		default:                                                                 \
			abort();                                                         \
		}                                                                        \
	}

#define REF_REAL(T, tag)                                                                 \
	static void ref_##tag(enum fi_op op, T *d, T s, T c)                             \
	{                                                                                \
		T v = *d;                                                                \
		switch (op) {                                                            \
			REF_ORDERED_CASES(v, s, c, d)                                    \
			REF_COMMON_CASES(v, s, c, d)                                     \
		case FI_SUM:                                                             \
			*d = v + s;                                                      \
			break;                                                           \
		case FI_PROD:                                                            \
			*d = v * s;                                                      \
			break;                                                           \
		default:                                                                 \
			abort();                                                         \
		}                                                                        \
	}

#define REF_CPLX(T, tag)                                                                 \
	static void ref_##tag(enum fi_op op, T *d, T s, T c)                             \
	{                                                                                \
		T v = *d;                                                                \
		switch (op) {                                                            \
			REF_COMMON_CASES(v, s, c, d)                                     \
		case FI_SUM:                                                             \
			*d = v + s;                                                      \
			break;                                                           \
		case FI_PROD:                                                            \
			*d = v * s;                                                      \
			break;                                                           \
		default:                                                                 \
			abort();                                                         \
		}                                                                        \
	}

REF_INT(int8_t, i8)
REF_INT(uint8_t, u8)
REF_INT(int16_t, i16)
REF_INT(uint16_t, u16)
REF_INT(int32_t, i32)
REF_INT(uint32_t, u32)
REF_INT(int64_t, i64)
REF_INT(uint64_t, u64)
REF_INT(i128, i128)
REF_INT(u128, u128)
REF_REAL(float, f)
REF_REAL(double, d)
REF_REAL(long double, ld)
REF_CPLX(fcplx, fc)
REF_CPLX(dcplx, dc)
REF_CPLX(ldcplx, ldc)

/* ---- every op on one type ------------------------------------------------------
 * NV values per type; round r pairs element i with source value i + r, so
 * across rounds every (target, source) pair meets, and every third
 * element's compare operand equals its target so the swaps also fire.
 * Odd rounds shift all four buffers by one byte off alignment. */

#define NV 9

#define RUN_TYPE(T, tag)                                                                 \
	static void run_##tag(enum fi_datatype dt, const T *vals)                        \
	{                                                                                \
		_Alignas(64) unsigned char db[NV * sizeof(T) + 1], sb[sizeof(db)],       \
		    cb[sizeof(db)], rb[sizeof(db)];                                      \
		CHECK_INT(lm_datatype_size(dt), sizeof(T));                              \
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {                         \
			int bad = 0, ret;                                                \
			if (!expect_valid(op, class_of(dt))) {                           \
				memset(db, 0, sizeof(db));                               \
				CHECK_INT(lm_atomic_apply(op, dt, db, db, db, db, 1),    \
				          -FI_EOPNOTSUPP);                               \
				continue;                                                \
			}                                                                \
			for (int r = 0; r < NV; r++) {                                   \
				size_t al = r & 1, n = NV * sizeof(T);                   \
				T d[NV], s[NV], c[NV], want[NV], got[NV], res[NV];       \
				for (int i = 0; i < NV; i++) {                           \
					d[i] = vals[i];                                  \
					s[i] = vals[(i + r) % NV];                       \
					c[i] = i % 3 ? vals[(2 * i + r) % NV] : d[i];    \
					want[i] = d[i];                                  \
					ref_##tag(op, &want[i], s[i], c[i]);             \
				}                                                        \
				memcpy(db + al, d, n);                                   \
				memcpy(sb + al, s, n);                                   \
				memcpy(cb + al, c, n);                                   \
				memset(rb, 0x5a, sizeof(rb));                            \
				ret = lm_atomic_apply(op, dt, db + al, sb + al, cb + al, \
				                      rb + al, NV);                      \
				memcpy(got, db + al, n);                                 \
				memcpy(res, rb + al, n);                                 \
				for (int i = 0; i < NV; i++) {                           \
					if (ret || !SAME(got[i], want[i]) ||             \
					    !SAME(res[i], d[i])) {                       \
						if (!bad++)                              \
							fprintf(stderr,                  \
							        "%s op %d round %d "     \
							        "elem %d ret %d\n",      \
							        #tag, op, r, i, ret);    \
					}                                                \
				}                                                        \
			}                                                                \
			CHECK_INT(bad, 0);                                               \
		}                                                                        \
	}

RUN_TYPE(int8_t, i8)
RUN_TYPE(uint8_t, u8)
RUN_TYPE(int16_t, i16)
RUN_TYPE(uint16_t, u16)
RUN_TYPE(int32_t, i32)
RUN_TYPE(uint32_t, u32)
RUN_TYPE(int64_t, i64)
RUN_TYPE(uint64_t, u64)
RUN_TYPE(i128, i128)
RUN_TYPE(u128, u128)
RUN_TYPE(float, f)
RUN_TYPE(double, d)
RUN_TYPE(long double, ld)
RUN_TYPE(fcplx, fc)
RUN_TYPE(dcplx, dc)
RUN_TYPE(ldcplx, ldc)

#define INT_VALS(T, lo, hi)                                                              \
	{                                                                                \
		0, 1, (T)-1, 5, (T)-7, lo, hi, 100, 2                                    \
	}
#define REAL_VALS(T, max)                                                                \
	{                                                                                \
		0, 1, -1, 2.5, -7.25, -(max), max, (T)NAN, -0.0                          \
	}

static void test_all_ops(void)
{
	static const int8_t i8[NV] = INT_VALS(int8_t, INT8_MIN, INT8_MAX);
	static const uint8_t u8[NV] = INT_VALS(uint8_t, 0x80, UINT8_MAX);
	static const int16_t i16[NV] = INT_VALS(int16_t, INT16_MIN, INT16_MAX);
	static const uint16_t u16[NV] = INT_VALS(uint16_t, 0x8000, UINT16_MAX);
	static const int32_t i32[NV] = INT_VALS(int32_t, INT32_MIN, INT32_MAX);
	static const uint32_t u32[NV] = INT_VALS(uint32_t, 0x80000000u, UINT32_MAX);
	static const int64_t i64[NV] = INT_VALS(int64_t, INT64_MIN, INT64_MAX);
	static const uint64_t u64[NV] = INT_VALS(uint64_t, UINT64_C(1) << 63, UINT64_MAX);
	static const i128 i128v[NV] =
	    INT_VALS(i128, (i128)((u128)1 << 127), (i128)(~(u128)0 >> 1));
	static const u128 u128v[NV] = INT_VALS(u128, (u128)1 << 127, ~(u128)0);
	static const float f[NV] = REAL_VALS(float, FLT_MAX);
	static const double d[NV] = REAL_VALS(double, DBL_MAX);
	static const long double ld[NV] = REAL_VALS(long double, LDBL_MAX);
	const fcplx fc[NV] = {0,
	                      1,
	                      mkfc(-1, 2),
	                      mkfc(2.5f, -0.5f),
	                      mkfc(0, -7.25f),
	                      mkfc(FLT_MAX, 0),
	                      mkfc(NAN, 1),
	                      mkfc(3, 3),
	                      mkfc(-0.0f, 0)};
	const dcplx dc[NV] = {0,
	                      1,
	                      mkdc(-1, 2),
	                      mkdc(2.5, -0.5),
	                      mkdc(0, -7.25),
	                      mkdc(DBL_MAX, 0),
	                      mkdc(NAN, 1),
	                      mkdc(3, 3),
	                      mkdc(-0.0, 0)};
	const ldcplx ldc[NV] = {0,
	                        1,
	                        mkldc(-1, 2),
	                        mkldc(2.5, -0.5),
	                        mkldc(0, -7.25),
	                        mkldc(LDBL_MAX, 0),
	                        mkldc(NAN, 1),
	                        mkldc(3, 3),
	                        mkldc(-0.0, 0)};

	run_i8(FI_INT8, i8);
	run_u8(FI_UINT8, u8);
	run_i16(FI_INT16, i16);
	run_u16(FI_UINT16, u16);
	run_i32(FI_INT32, i32);
	run_u32(FI_UINT32, u32);
	run_i64(FI_INT64, i64);
	run_u64(FI_UINT64, u64);
	run_i128(FI_INT128, i128v);
	run_u128(FI_UINT128, u128v);
	run_f(FI_FLOAT, f);
	run_d(FI_DOUBLE, d);
	run_ld(FI_LONG_DOUBLE, ld);
	run_fc(FI_FLOAT_COMPLEX, fc);
	run_dc(FI_DOUBLE_COMPLEX, dc);
	run_ldc(FI_LONG_DOUBLE_COMPLEX, ldc);
}

/* A few results spelled out, so the reference itself is checked too. */
static void test_known_values(void)
{
	int32_t i[3] = {INT32_MAX, -5, 7}, one[3] = {1, -5, 3}, old[3];
	uint16_t u = 65535, us = 65535;
	uint8_t m = 0xf0, ms = 0x3c, mc = 0x0f;
	double x = 1.5, y = 2.0, cmp = 1.5, r;

	CHECK_INT(lm_atomic_apply(FI_SUM, FI_INT32, i, one, NULL, old, 3), 0);
	CHECK_INT(i[0], INT32_MIN);
	CHECK_INT(i[1], -10);
	CHECK_INT(i[2], 10);
	CHECK_INT(old[0], INT32_MAX);
	CHECK_INT(lm_atomic_apply(FI_PROD, FI_UINT16, &u, &us, NULL, NULL, 1), 0);
	CHECK_INT(u, 1); /* 65535^2 mod 2^16 */
	CHECK_INT(lm_atomic_apply(FI_MSWAP, FI_UINT8, &m, &ms, &mc, NULL, 1), 0);
	CHECK_HEX(m, 0xfc);
	CHECK_INT(lm_atomic_apply(FI_CSWAP, FI_DOUBLE, &x, &y, &cmp, &r, 1), 0);
	CHECK(x == 2.0 && r == 1.5);
	CHECK_INT(lm_atomic_apply(FI_CSWAP_GT, FI_DOUBLE, &x, &y, &cmp, &r, 1), 0);
	CHECK(x == 2.0 && r == 2.0); /* 1.5 > 2.0 is false: no swap */
	CHECK_INT(lm_atomic_apply(FI_CSWAP_LT, FI_DOUBLE, &x, &cmp, &cmp, &r, 1), 0);
	CHECK(x == 1.5 && r == 2.0); /* 1.5 < 2.0: swap */
	CHECK_INT(lm_atomic_apply(FI_ATOMIC_READ, FI_DOUBLE, &x, NULL, NULL, &r, 1), 0);
	CHECK(r == 1.5 && x == 1.5);
	CHECK_INT(lm_atomic_apply(FI_MIN, FI_INT32, i, one, NULL, NULL, 3), 0);
	CHECK(i[0] == INT32_MIN && i[1] == -10 && i[2] == 3);
}

static void test_bad_input(void)
{
	uint64_t a = 1, b = 2, c = 3, r = 4;

	CHECK_INT(lm_atomic_apply(FI_SUM, FI_UINT64, NULL, &b, NULL, NULL, 1),
	          -FI_EINVAL);
	CHECK_INT(lm_atomic_apply(FI_SUM, FI_UINT64, &a, NULL, NULL, NULL, 1),
	          -FI_EINVAL);
	CHECK_INT(lm_atomic_apply(FI_ATOMIC_READ, FI_UINT64, &a, &b, NULL, NULL, 1),
	          -FI_EINVAL);
	CHECK_INT(lm_atomic_apply(FI_CSWAP, FI_UINT64, &a, &b, NULL, &r, 1), -FI_EINVAL);
	CHECK_INT(lm_atomic_apply(FI_MSWAP, FI_UINT64, &a, &b, NULL, &r, 1), -FI_EINVAL);
	CHECK_INT(lm_atomic_apply(FI_SUM, FI_UINT64, &a, &b, &c, &r, 0), 0);
	CHECK_INT(a, 1);
	CHECK_INT(r, 4);
	CHECK_INT(lm_atomic_apply(FI_ATOMIC_OP_LAST, FI_UINT64, &a, &b, &c, &r, 1),
	          -FI_EOPNOTSUPP);
	CHECK_INT(lm_atomic_apply(FI_NOOP, FI_UINT64, &a, &b, &c, &r, 1), -FI_EOPNOTSUPP);
	CHECK_INT(lm_atomic_apply(FI_SUM, FI_VOID, &a, &b, &c, &r, 1), -FI_EOPNOTSUPP);
	CHECK_INT(lm_atomic_apply(FI_SUM, (enum fi_datatype) - 1, &a, &b, &c, &r, 1),
	          -FI_EOPNOTSUPP);
	CHECK_INT(lm_atomic_apply(FI_BOR, FI_DOUBLE, &a, &b, &c, &r, 1), -FI_EOPNOTSUPP);
	CHECK_INT(a, 1);
	CHECK_INT(r, 4);

	CHECK_INT(lm_datatype_size(FI_INT8), 1);
	CHECK_INT(lm_datatype_size(FI_FLOAT_COMPLEX), 8);
	CHECK_INT(lm_datatype_size(FI_DOUBLE_COMPLEX), 16);
	CHECK_INT(lm_datatype_size(FI_LONG_DOUBLE), sizeof(long double));
	CHECK_INT(lm_datatype_size(FI_LONG_DOUBLE_COMPLEX), 2 * sizeof(long double));
	CHECK_INT(lm_datatype_size(FI_UINT128), 16);
	CHECK_INT(lm_datatype_size(FI_VOID), 0);
	CHECK_INT(lm_datatype_size((enum fi_datatype)16), 0);
	CHECK_INT(lm_datatype_size((enum fi_datatype) - 1), 0);
}

static void test_valid_table(void)
{
	static const enum lm_atomic_kind kinds[] = {LM_ATOMIC_BASE, LM_ATOMIC_FETCH,
	                                            LM_ATOMIC_COMPARE};
	int wrong = 0, nvalid = 0;

	for (int dt = 0; dt <= FI_UINT128; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			for (size_t k = 0; k < 3; k++) {
				bool want = expect_valid(op, class_of(dt)) &&
				            expect_kind(op, kinds[k]);

				nvalid += want;
				if (lm_atomic_valid(dt, op, kinds[k]) != want) {
					fprintf(stderr,
					        "valid(dt %d, op %d, kind %zu) != %d\n",
					        dt, op, k, want);
					wrong++;
				}
			}
		}
	}
	CHECK_INT(wrong, 0);
	/* 10 integer types x 30, 3 real x 23, 3 complex x 15. */
	CHECK_INT(nvalid, 414);

	/* Spot checks, straight from the man page's rules. */
	CHECK(!lm_atomic_valid(FI_FLOAT_COMPLEX, FI_MIN, LM_ATOMIC_BASE));
	CHECK(!lm_atomic_valid(FI_DOUBLE_COMPLEX, FI_MAX, LM_ATOMIC_FETCH));
	CHECK(!lm_atomic_valid(FI_DOUBLE, FI_BOR, LM_ATOMIC_BASE));
	CHECK(!lm_atomic_valid(FI_FLOAT, FI_BXOR, LM_ATOMIC_FETCH));
	CHECK(!lm_atomic_valid(FI_LONG_DOUBLE, FI_MSWAP, LM_ATOMIC_COMPARE));
	CHECK(!lm_atomic_valid(FI_LONG_DOUBLE_COMPLEX, FI_CSWAP_LT, LM_ATOMIC_COMPARE));
	CHECK(!lm_atomic_valid(FI_UINT64, FI_ATOMIC_READ, LM_ATOMIC_BASE));
	CHECK(!lm_atomic_valid(FI_UINT64, FI_CSWAP, LM_ATOMIC_FETCH));
	CHECK(!lm_atomic_valid(FI_UINT64, FI_SUM, LM_ATOMIC_COMPARE));
	CHECK(!lm_atomic_valid(FI_VOID, FI_SUM, LM_ATOMIC_BASE));
	CHECK(!lm_atomic_valid(FI_UINT64, FI_NOOP, LM_ATOMIC_BASE));
	CHECK(!lm_atomic_valid(FI_UINT64, FI_SUM, (enum lm_atomic_kind)7));
	CHECK(lm_atomic_valid(FI_DOUBLE_COMPLEX, FI_PROD, LM_ATOMIC_BASE));
	CHECK(lm_atomic_valid(FI_FLOAT_COMPLEX, FI_CSWAP, LM_ATOMIC_COMPARE));
	CHECK(lm_atomic_valid(FI_FLOAT, FI_LXOR, LM_ATOMIC_FETCH));
	CHECK(lm_atomic_valid(FI_INT128, FI_MSWAP, LM_ATOMIC_COMPARE));
	CHECK(lm_atomic_valid(FI_UINT8, FI_ATOMIC_WRITE, LM_ATOMIC_BASE));
	CHECK(lm_atomic_valid(FI_UINT8, FI_ATOMIC_READ, LM_ATOMIC_FETCH));
}

static void test_query(void)
{
	struct fi_atomic_attr attr;
	struct testdom t;
	int ret;

	ret = testdom_open(&t, FI_THREAD_SAFE, NULL, NULL);
	CHECK_INT(ret, 0);
	if (ret)
		return;
	memset(&attr, 0, sizeof(attr));
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, &attr, 0), 0);
	CHECK_INT(attr.size, 8);
	CHECK_INT(attr.count, (1 << 20) / 8); /* testdom's max_msg_size / size */
	CHECK_INT(
	    fi_query_atomic(t.domain, FI_LONG_DOUBLE, FI_MIN, &attr, FI_FETCH_ATOMIC), 0);
	CHECK_INT(attr.size, sizeof(long double));
	CHECK_INT(
	    fi_query_atomic(t.domain, FI_INT8, FI_ATOMIC_READ, &attr, FI_FETCH_ATOMIC),
	    0);
	CHECK_INT(attr.size, 1);
	CHECK_INT(attr.count, 1 << 20);
	CHECK_INT(
	    fi_query_atomic(t.domain, FI_DOUBLE, FI_CSWAP, &attr, FI_COMPARE_ATOMIC), 0);
	CHECK_INT(attr.size, 8);
	CHECK_INT(attr.count, (1 << 20) / 16); /* source and compare per element */
	CHECK_INT(
	    fi_query_atomic(t.domain, FI_UINT32, FI_MSWAP, &attr, FI_COMPARE_ATOMIC), 0);

	memset(&attr, 0x77, sizeof(attr));
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_ATOMIC_READ, &attr, 0),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_CSWAP, &attr, 0),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_CSWAP, &attr, FI_FETCH_ATOMIC),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, &attr, FI_COMPARE_ATOMIC),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_DOUBLE, FI_BAND, &attr, 0),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_FLOAT_COMPLEX, FI_CSWAP_GE, &attr,
	                          FI_COMPARE_ATOMIC),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, &attr,
	                          FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
	          -FI_EINVAL);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, &attr, FI_TAGGED),
	          -FI_EOPNOTSUPP);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, &attr, FI_MSG),
	          -FI_EBADFLAGS);
	CHECK_INT(fi_query_atomic(t.domain, FI_VOID, FI_SUM, &attr, 0), -FI_EINVAL);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_NOOP, &attr, 0), -FI_EINVAL);
	CHECK_INT(fi_query_atomic(t.domain, FI_UINT64, FI_SUM, NULL, 0), -FI_EINVAL);
	CHECK_HEX(attr.size, 0x7777777777777777ULL); /* untouched on failure */
	testdom_close(&t);
}

/* ---- concurrency ------------------------------------------------------------ */

#define NTHREADS 4
#define NITER    100000

struct shared {
	uint64_t u64;
	double dbl;
	uint64_t cas;
	long double ld;        /* the striped-lock path */
	unsigned char raw[16]; /* a misaligned uint64 at raw + 3 */
	int errors;
};

static void *hammer(void *arg)
{
	struct shared *sh = arg;
	const uint64_t one = 1;
	const double fone = 1.0;
	const long double lone = 1.0L;
	int err = 0;

	for (int i = 0; i < NITER; i++) {
		uint64_t cur, next, seen;

		err |= lm_atomic_apply(FI_SUM, FI_UINT64, &sh->u64, &one, NULL, NULL, 1);
		err |= lm_atomic_apply(FI_SUM, FI_DOUBLE, &sh->dbl, &fone, NULL, NULL, 1);
		/* Increment by compare-and-swap, retrying on interference. */
		err |= lm_atomic_apply(FI_ATOMIC_READ, FI_UINT64, &sh->cas, NULL, NULL,
		                       &cur, 1);
		for (;;) {
			next = cur + 1;
			err |= lm_atomic_apply(FI_CSWAP, FI_UINT64, &sh->cas, &next, &cur,
			                       &seen, 1);
			if (seen == cur)
				break;
			cur = seen;
		}
		err |= lm_atomic_apply(FI_SUM, FI_LONG_DOUBLE, &sh->ld, &lone, NULL, NULL,
		                       1);
		err |=
		    lm_atomic_apply(FI_SUM, FI_UINT64, sh->raw + 3, &one, NULL, NULL, 1);
	}
	if (err)
		__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void test_threads(void)
{
	static struct shared sh;
	pthread_t th[NTHREADS];
	uint64_t mis;

	memset(&sh, 0, sizeof(sh));
	for (int i = 0; i < NTHREADS; i++)
		CHECK_INT(pthread_create(&th[i], NULL, hammer, &sh), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	memcpy(&mis, sh.raw + 3, sizeof(mis));
	CHECK_INT(sh.errors, 0);
	CHECK_INT(sh.u64, NTHREADS * NITER);
	CHECK(sh.dbl == (double)NTHREADS * NITER);
	CHECK_INT(sh.cas, NTHREADS * NITER);
	CHECK(sh.ld == (long double)NTHREADS * NITER);
	CHECK_INT(mis, NTHREADS * NITER);
}

int main(void)
{
	alarm(120); /* a hang is a failure, not a stuck test run */
	test_valid_table();
	test_known_values();
	test_all_ops();
	test_bad_input();
	test_query();
	test_threads();
	return check_done();
}
