/* Shared by the benchmark programs: their common options, statistics, the CSV
 * row format, and the launcher that forks process pairs with a deadline. The
 * clock is tools/tool_util.h's, which fi_pingpong uses too. */
#ifndef LOOM_BENCH_COMMON_H
#define LOOM_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tool_util.h"

#define BENCH_MAX_SIZES 40
#define BENCH_MAX_REPS  64
#define BENCH_MAX_PAIRS 16

/* What one benchmark invocation measures; fills the constant CSV columns. */
struct bench_row {
	const char *bench;    /* program: "fabric" or "phys" */
	const char *op;       /* send, tagged, write, ..., tcp_lat, memcpy, ... */
	const char *metric;   /* lat, bw or rate */
	const char *provider; /* provider name as resolved, or "raw" */
	const char *ep_type;  /* rdm, msg, dgram, or the baseline's medium */
	size_t size;
	long iterations;
	int window;
	int pairs;
};

/* Shared between the launcher and its children (MAP_SHARED, before fork):
 * per size, per pair, per repetition, the value a client measured. */
struct bench_shared {
	double value[BENCH_MAX_SIZES][BENCH_MAX_PAIRS][BENCH_MAX_REPS];
	double rate[BENCH_MAX_SIZES][BENCH_MAX_PAIRS][BENCH_MAX_REPS];
	long iters[BENCH_MAX_SIZES];
	int done[BENCH_MAX_SIZES]; /* sizes that ran (not skipped) */
	char skip_reason[BENCH_MAX_SIZES][96];
	char resolved_prov[64];
	unsigned barrier_count, barrier_gen, barrier_parties;
};

/* The options both programs take, as their usage says: -S SIZES, -I OPS,
 * -B MiB, -r REPS, -c (verify), -T SECONDS, -A (do not pin). */
#define BENCH_OPTS "S:I:B:r:cT:A"
struct bench_opts {
	size_t sizes[BENCH_MAX_SIZES];
	int nsizes;
	long iters;    /* operations per repetition at small sizes */
	size_t budget; /* bytes per repetition at most */
	int reps;
	bool verify;
	bool pin;
	int timeout; /* seconds for the whole run */
	const char *sizes_arg;
	size_t budget_mb;
};
#define BENCH_OPTS_INIT                                                                  \
	{                                                                                \
		.reps = 5, .pin = true, .timeout = 300, .sizes_arg = "1:1m"              \
	}

/* getopt with spec, the program's own options followed by BENCH_OPTS: takes
 * those of BENCH_OPTS into o and returns the next other one, or -1 at the
 * end. */
int bench_getopt(int argc, char **argv, const char *spec, struct bench_opts *o);
/* After the options: parses the sizes, checks the counts and fills in the
 * defaults (iters operations, budget_mb MiB) of what was not given. -1 when
 * something is off. */
int bench_opts_check(struct bench_opts *o, long iters, size_t budget_mb);
/* "1:16m" (powers of two between), "64,4k,1m", or one size. */
int bench_parse_sizes(const char *s, size_t *sizes, int *n);

/* Index of the entry called name in a table of count entries, stride bytes
 * apart, each starting with its name (a const char *); if none is, says
 * "unknown <what> <name>" and returns -1. */
int bench_lookup(const void *table, size_t count, size_t stride, const char *name,
                 const char *what);
#define BENCH_LOOKUP(table, name, what)                                                  \
	bench_lookup(table, sizeof(table) / sizeof(*(table)), sizeof(*(table)), name,    \
	             what)
/* Operations per repetition: at most max_ops, at most about byte_budget
 * bytes, at least min_ops. */
long bench_scale_iters(long max_ops, size_t size, size_t byte_budget, long min_ops);

void bench_print_header(void);
/* Prints why size si was skipped and returns true, if it was. */
bool bench_skipped(const struct bench_shared *sh, int si, size_t size);
/* Median, min and max of the values; aggregate = sum over pairs (rates and
 * bandwidths) or mean (latencies). */
void bench_print_row(const struct bench_row *row, int reps, const double *values);
void bench_aggregate(struct bench_shared *sh, int size_idx, int pairs, int reps, bool sum,
                     bool use_rate, double *out);

/* Prints "# library: <real path of the object that defines fi_getinfo>", the
 * proof of which libfabric.so.1 a run loaded ("unknown" if dladdr fails). */
void bench_print_library(void *fi_getinfo_addr);

struct bench_shared *bench_shared_map(void);
/* Process-shared barrier built on futex-free spinning with sched_yield, so it
 * needs nothing from pthreads across fork. */
void bench_barrier(struct bench_shared *sh);

/* Runs fn(rank, pair, fd, arg) in 2 * pairs children: rank 0 is the server,
 * rank 1 the client of each pair, connected by a socketpair. Kills everything
 * when one child fails or when timeout_s passes; always reaps. Returns 0 when
 * every child exited 0. */
typedef int (*bench_child_fn)(int rank, int pair, int fd, void *arg);
int bench_run_pairs(int pairs, int timeout_s, bool pin, bench_child_fn fn, void *arg);

/* Blocking whole-buffer transfers on the out-of-band socket. */
int oob_send(int fd, const void *buf, size_t len);
int oob_recv(int fd, void *buf, size_t len);
/* 1 if a byte is waiting on fd, 0 if not, <0 on error or EOF. */
int oob_poll(int fd);

void bench_fill(void *buf, size_t len, uint64_t seed);
/* Returns the offset of the first wrong byte, or -1 when all match. */
long bench_check(const void *buf, size_t len, uint64_t seed);

#endif
