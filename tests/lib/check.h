/* check.h - the assertions every loom test uses: each prints what differed
 * and where, counts the failure, and lets the test go on; a test program
 * ends with `return check_done();`. */
#ifndef LOOM_TEST_CHECK_H
#define LOOM_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		check_count++;                                                           \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                                  \
			check_failures++;                                                \
		}                                                                        \
	} while (0)

#define CHECK_INT(got, want)                                                             \
	do {                                                                             \
		long long g_ = (long long)(got), w_ = (long long)(want);                 \
		check_count++;                                                           \
		if (g_ != w_) {                                                          \
			fprintf(stderr, "%s:%d: %s = %lld, want %s = %lld\n", __FILE__,  \
				__LINE__, #got, g_, #want, w_);                          \
			check_failures++;                                                \
		}                                                                        \
	} while (0)

#define CHECK_HEX(got, want)                                                             \
	do {                                                                             \
		unsigned long long g_ = (unsigned long long)(got),                       \
				   w_ = (unsigned long long)(want);                      \
		check_count++;                                                           \
		if (g_ != w_) {                                                          \
			fprintf(stderr, "%s:%d: %s = 0x%llx, want %s = 0x%llx\n",        \
				__FILE__, __LINE__, #got, g_, #want, w_);                \
			check_failures++;                                                \
		}                                                                        \
	} while (0)

#define CHECK_STR(got, want)                                                             \
	do {                                                                             \
		const char *g_ = (got), *w_ = (want);                                    \
		check_count++;                                                           \
		if (!g_ || !w_ ? g_ != w_ : strcmp(g_, w_)) {                            \
			fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n", __FILE__,    \
				__LINE__, #got, g_ ? g_ : "(null)", w_ ? w_ : "(null)");  \
			check_failures++;                                                \
		}                                                                        \
	} while (0)

/* As CHECK_INT(call, 0), and return the call's value from the caller when
 * it is not 0. */
#define OKR(call)                                                                        \
	do {                                                                             \
		int r_ = (int)(call);                                                    \
		CHECK_INT(r_, 0);                                                        \
		if (r_)                                                                  \
			return r_;                                                       \
	} while (0)

static inline int check_done(void)
{
	if (!check_count) {
		fprintf(stderr, "no checks ran\n");
		return 1;
	}
	fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
