/* try.h - how the small benchmarks (ep_memory, conn_memory, ctx_threads,
 * overlap) leave on a failed call: the call, its value and its meaning on
 * stderr after the program's name, and 1 returned from the function.
 * Each program's TRY(call) passes #call as text: as it was written, not
 * macro-expanded. */
#ifndef LOOM_BENCH_TRY_H
#define LOOM_BENCH_TRY_H

#include <stdio.h>

#include <rdma/fi_errno.h>

#define BENCH_TRY(prog, text, call)                                                      \
	do {                                                                             \
		int r_ = (int)(call);                                                    \
		if (r_) {                                                                \
			fprintf(stderr, "%s: %s = %d (%s)\n", prog, text, r_,            \
			        fi_strerror(-r_));                                       \
			return 1;                                                        \
		}                                                                        \
	} while (0)

#endif
