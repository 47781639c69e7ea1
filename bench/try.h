/* try.h - what the small benchmarks (ep_memory, conn_memory, many_peers,
 * ctx_threads, overlap) share: how they leave on a failed call (the call,
 * its value and its meaning on stderr after the program's name, and 1
 * returned from the function; each program's TRY(call) passes #call as
 * text, as it was written, not macro-expanded), and room for the
 * descriptors of many endpoints. */
#ifndef LOOM_BENCH_TRY_H
#define LOOM_BENCH_TRY_H

#include <stdio.h>
#include <sys/resource.h>

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

/* At least want open descriptors if the hard limit allows (else as many
 * as it does). */
static inline void bench_nofile(rlim_t want)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

#endif
