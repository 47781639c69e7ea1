/* Shared by the benchmark programs: options, sizes, statistics and CSV rows,
 * the library probe, and the pair launcher that never leaves a child behind. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Takes opt and its argument if it is one of BENCH_OPTS; false if not. */
static bool take_opt(struct bench_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case 'S':
		o->sizes_arg = arg;
		break;
	case 'I':
		o->iters = atol(arg);
		break;
	case 'B':
		o->budget_mb = (size_t)atol(arg);
		break;
	case 'r':
		o->reps = atoi(arg);
		break;
	case 'c':
		o->verify = true;
		break;
	case 'T':
		o->timeout = atoi(arg);
		break;
	case 'A':
		o->pin = false;
		break;
	default:
		return false;
	}
	return true;
}

int bench_getopt(int argc, char **argv, const char *spec, struct bench_opts *o)
{
	int opt;

	while ((opt = getopt(argc, argv, spec)) != -1 && take_opt(o, opt, optarg))
		;
	return opt;
}

int bench_opts_check(struct bench_opts *o, long iters, size_t budget_mb)
{
	if (bench_parse_sizes(o->sizes_arg, o->sizes, &o->nsizes) || o->reps < 1 ||
	    o->reps > BENCH_MAX_REPS || o->timeout < 1)
		return -1;
	if (!o->iters)
		o->iters = iters;
	o->budget = (o->budget_mb ? o->budget_mb : budget_mb) << 20;
	return 0;
}

/* Decimal only, up to 16 GiB. */
static int parse_size(const char *s, size_t *out)
{
	unsigned long long v;

	if (tool_parse_size(s, 10, 1ull << 34, &v))
		return -1;
	*out = (size_t)v;
	return 0;
}

int bench_parse_sizes(const char *s, size_t *sizes, int *n)
{
	char buf[256], *tok, *save, *colon;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	colon = strchr(buf, ':');
	if (colon) {
		size_t lo, hi;
		*colon = 0;
		if (parse_size(buf, &lo) || parse_size(colon + 1, &hi) || hi < lo)
			return -1;
		if (lo == 0) {
			sizes[(*n)++] = 0;
			lo = 1;
		}
		for (size_t v = lo; v <= hi && *n < BENCH_MAX_SIZES; v <<= 1)
			sizes[(*n)++] = v;
		return 0;
	}
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == BENCH_MAX_SIZES || parse_size(tok, &sizes[*n]))
			return -1;
		(*n)++;
	}
	return *n ? 0 : -1;
}

int bench_lookup(const void *table, size_t count, size_t stride, const char *name,
                 const char *what)
{
	for (size_t i = 0; i < count; i++) {
		const char *const *entry =
		    (const void *)((const char *)table + i * stride);
		if (!strcmp(*entry, name))
			return (int)i;
	}
	fprintf(stderr, "unknown %s %s\n", what, name);
	return -1;
}

long bench_scale_iters(long max_ops, size_t size, size_t byte_budget, long min_ops)
{
	long n = max_ops;

	if (size && byte_budget / size < (size_t)n)
		n = (long)(byte_budget / size);
	return n < min_ops ? min_ops : n;
}

void bench_print_header(void)
{
	printf("bench,op,metric,provider,ep_type,size,iterations,window,pairs,reps,"
	       "median,min,max,unit\n");
}

bool bench_skipped(const struct bench_shared *sh, int si, size_t size)
{
	if (!sh->skip_reason[si][0])
		return false;
	printf("# skipped size %zu: %s\n", size, sh->skip_reason[si]);
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_print_row(const struct bench_row *row, int reps, const double *values)
{
	double v[BENCH_MAX_REPS], med;
	const char *unit = !strcmp(row->metric, "lat")  ? "usec"
	                   : !strcmp(row->metric, "bw") ? "MB/s"
	                                                : "Mmsg/s";

	memcpy(v, values, sizeof(double) * (size_t)reps);
	qsort(v, (size_t)reps, sizeof(double), cmp_double);
	med = reps % 2 ? v[reps / 2] : (v[reps / 2 - 1] + v[reps / 2]) / 2;
	printf("%s,%s,%s,%s,%s,%zu,%ld,%d,%d,%d,%.4f,%.4f,%.4f,%s\n", row->bench, row->op,
	       row->metric, row->provider, row->ep_type, row->size, row->iterations,
	       row->window, row->pairs, reps, med, v[0], v[reps - 1], unit);
	fflush(stdout);
}

void bench_aggregate(struct bench_shared *sh, int size_idx, int pairs, int reps, bool sum,
                     bool use_rate, double *out)
{
	for (int r = 0; r < reps; r++) {
		double acc = 0;
		for (int p = 0; p < pairs; p++)
			acc += use_rate ? sh->rate[size_idx][p][r]
			                : sh->value[size_idx][p][r];
		out[r] = sum ? acc : acc / pairs;
	}
}

void bench_print_library(void *fi_getinfo_addr)
{
	Dl_info info;
	char real[PATH_MAX];

	if (!fi_getinfo_addr || !dladdr(fi_getinfo_addr, &info) || !info.dli_fname) {
		printf("# library: unknown\n");
		return;
	}
	if (!realpath(info.dli_fname, real))
		snprintf(real, sizeof(real), "%s", info.dli_fname);
	printf("# library: %s\n", real);
}

struct bench_shared *bench_shared_map(void)
{
	void *p = mmap(NULL, sizeof(struct bench_shared), PROT_READ | PROT_WRITE,
	               MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void bench_barrier(struct bench_shared *sh)
{
	unsigned gen = __atomic_load_n(&sh->barrier_gen, __ATOMIC_ACQUIRE);

	if (__atomic_add_fetch(&sh->barrier_count, 1, __ATOMIC_ACQ_REL) ==
	    sh->barrier_parties) {
		__atomic_store_n(&sh->barrier_count, 0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&sh->barrier_gen, 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&sh->barrier_gen, __ATOMIC_ACQUIRE) == gen)
		sched_yield();
}

static void pin_to(int cpu)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (ncpu < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu % ncpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

int bench_run_pairs(int pairs, int timeout_s, bool pin, bench_child_fn fn, void *arg)
{
	pid_t pids[2 * BENCH_MAX_PAIRS];
	int n = 0, failed = 0, alive;
	double deadline = tool_now_us() + timeout_s * 1e6;

	fflush(stdout);
	fflush(stderr);
	for (int p = 0; p < pairs; p++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
			perror("socketpair");
			failed = 1;
			break;
		}
		for (int rank = 0; rank < 2; rank++) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				failed = 1;
				break;
			}
			if (pid == 0) {
				close(sv[1 - rank]);
				/* Every child dies with its launcher, and on its own
				 * after the deadline. */
				alarm((unsigned)timeout_s + 5);
				if (pin)
					pin_to(2 * p + rank);
				exit(fn(rank, p, sv[rank], arg) ? 1 : 0);
			}
			pids[n++] = pid;
		}
		close(sv[0]);
		close(sv[1]);
		if (failed)
			break;
	}

	alive = n;
	while (alive) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			for (int i = 0; i < n; i++)
				if (pids[i] == pid)
					pids[i] = 0;
			alive--;
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				if (!failed)
					fprintf(
					    stderr, "bench: child %d %s %d\n", (int)pid,
					    WIFSIGNALED(status) ? "killed by signal"
					                        : "exited with",
					    WIFSIGNALED(status) ? WTERMSIG(status)
					                        : WEXITSTATUS(status));
				failed = 1;
			}
		} else if (pid < 0 && errno != EINTR) {
			break;
		} else {
			if (!failed && tool_now_us() > deadline) {
				fprintf(stderr, "bench: timeout after %d s, killing\n",
				        timeout_s);
				failed = 1;
			}
			if (!failed)
				usleep(2000);
		}
		if (failed)
			for (int i = 0; i < n; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGKILL);
	}
	return failed ? -1 : 0;
}

/* The whole of buf, sent (tx) or received, however many calls it takes. */
static int oob_xfer(int fd, char *p, size_t len, bool tx)
{
	while (len) {
		ssize_t n = tx ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int oob_send(int fd, const void *buf, size_t len)
{
	/* send() only reads it. */
	return oob_xfer(fd, (char *)buf, len, true);
}

int oob_recv(int fd, void *buf, size_t len)
{
	return oob_xfer(fd, buf, len, false);
}

int oob_poll(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int ret = poll(&p, 1, 0);

	if (ret < 0)
		return errno == EINTR ? 0 : -1;
	if (ret == 0)
		return 0;
	return (p.revents & POLLIN) ? 1 : -1;
}

/* A byte stream that differs between seeds and between offsets, cheap to
 * generate and to check. */
static inline uint8_t pattern_byte(size_t i, uint64_t seed)
{
	return (uint8_t)((i * 131u) ^ (i >> 8) ^ (seed * 197u + 11u));
}

void bench_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = pattern_byte(i, seed);
}

long bench_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern_byte(i, seed))
			return (long)i;
	return -1;
}
