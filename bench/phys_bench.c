/* phys_bench: the physical floors and ceilings loom is judged against, measured
 * without libfabric: loopback TCP ping-pong and stream, UDP ping-pong, a
 * cache-line ping-pong through shared memory, memcpy and process_vm_readv. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define UDP_MAX 65507

struct cfg;

/* One repetition of a pair baseline, as its timed loop sees it: iters
 * operations on buf, which holds size bytes of the pattern of seed and, where
 * the run verifies, must hold them again at the end. */
struct rep {
	int s; /* the socket the baseline's open_fn gave, kept across repetitions */
	char *buf;
	size_t size;
	uint64_t seed;
	long iters;
};

/* A pair baseline opens what it runs on once (given the out-of-band socket),
 * then times its loop_fn; a solo one does everything itself. */
typedef int (*open_fn)(int rank, int fd);
typedef int (*loop_fn)(const struct cfg *c, int rank, const struct rep *r);
typedef int (*solo_fn)(const struct cfg *c, int si, double *out);

/* The table of baselines: name, metric, the medium it stands for, and how it
 * runs (between a pair of processes, or in one process). */
static int tcp_connect_pair(int rank, int fd);
static int udp_connect_pair(int rank, int fd);
static int udp_any_pair(int rank, int fd);
static int tcp_lat(const struct cfg *c, int rank, const struct rep *r);
static int tcp_bw(const struct cfg *c, int rank, const struct rep *r);
static int udp_lat(const struct cfg *c, int rank, const struct rep *r);
static int udp_lat_any(const struct cfg *c, int rank, const struct rep *r);
static int udp_bw(const struct cfg *c, int rank, const struct rep *r);
static int shm_lat(const struct cfg *c, int rank, const struct rep *r);
static int memcpy_bw(const struct cfg *c, int si, double *out);
static int cma_bw(const struct cfg *c, int si, double *out);

static const struct base {
	const char *name;
	const char *metric;
	const char *medium;
	open_fn open;
	loop_fn loop;
	solo_fn solo;
	long mult; /* operations per repetition relative to -I: cheap ones run more */
} base_table[] = {
    /* clang-format off */
    {"tcp_lat",   "lat", "tcp", tcp_connect_pair, tcp_lat, NULL,      1},
    {"tcp_bw",    "bw",  "tcp", tcp_connect_pair, tcp_bw,  NULL,      4},
    {"udp_lat",   "lat", "udp", udp_connect_pair, udp_lat, NULL,      1},
    {"udp_lat_any", "lat", "udp", udp_any_pair,   udp_lat_any, NULL,  1},
    {"udp_bw",    "bw",  "udp", udp_connect_pair, udp_bw,  NULL,      4},
    {"shm_lat",   "lat", "shm", NULL,             shm_lat, NULL,      10},
    {"memcpy_bw", "bw",  "mem", NULL,             NULL,    memcpy_bw, 4},
    {"cma_bw",    "bw",  "cma", NULL,             NULL,    cma_bw,    4},
    /* clang-format on */
};

struct cfg {
	const struct base *b;
	struct bench_opts o;
	struct bench_shared *sh;
	/* shm_lat: the two flags, a cache line each, shared across fork */
	volatile uint64_t *lines;
};

static long iters_for(const struct cfg *c, size_t size)
{
	return bench_scale_iters(c->o.iters, size, c->o.budget, 10) * c->b->mult;
}

/* Polls between two looks at the clock while waiting: reading it on every
 * poll slowed the raw ping-pong measurably, a floor set too high. */
#define CLOCK_EVERY 4096

/* A wait that found nothing once more: true when it has found nothing
 * for limit_us (the clock read every CLOCK_EVERY looks).  *deadline 0
 * starts a wait; progress sets it back to 0. */
static bool waited_out(unsigned *spins, double *deadline, double limit_us)
{
	if (++*spins % CLOCK_EVERY)
		return false;
	if (!*deadline)
		*deadline = tool_now_us() + limit_us;
	return tool_now_us() > *deadline;
}

/* Sockets are polled without blocking, as the fabric providers poll their
 * completion queues: a blocking wait would measure the scheduler's wake-up
 * latency instead of the transport. Gives up after 10 s of silence. */
static int xfer_all(int fd, void *buf, size_t len, bool tx)
{
	char *p = buf;
	double deadline = 0;
	unsigned spins = 0;

	while (len) {
		ssize_t n = tx ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
		               : recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
			if (waited_out(&spins, &deadline, 10e6))
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		deadline = 0;
	}
	return 0;
}

static int recv_dgram(int fd, void *buf, size_t len, bool from)
{
	double deadline = 0;
	unsigned spins = 0;

	for (;;) {
		struct sockaddr_in src;
		socklen_t sl = sizeof(src);
		ssize_t n = from ? recvfrom(fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&src, &sl)
		                 : recv(fd, buf, len, MSG_DONTWAIT);
		if (n >= 0)
			return n == (ssize_t)len ? 0 : -1;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (waited_out(&spins, &deadline, 5e6))
			return -1; /* a lost datagram fails the run */
	}
}

/* The server (rank 0) listens on 127.0.0.1, port chosen by the kernel, and
 * tells the client through the out-of-band socket. */
static int tcp_connect_pair(int rank, int fd)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int one = 1, s;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rank == 0) {
		int l = socket(AF_INET, SOCK_STREAM, 0);
		if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof(sin)) ||
		    listen(l, 1) || getsockname(l, (struct sockaddr *)&sin, &sl) ||
		    oob_send(fd, &sin.sin_port, sizeof(sin.sin_port)))
			return -1;
		s = accept(l, NULL, NULL);
		close(l);
	} else {
		if (oob_recv(fd, &sin.sin_port, sizeof(sin.sin_port)))
			return -1;
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s >= 0 && connect(s, (struct sockaddr *)&sin, sizeof(sin))) {
			close(s);
			s = -1;
		}
	}
	if (s >= 0) {
		int bufsz = 4 << 20;
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(s, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
	}
	return s;
}

static int udp_connect_pair(int rank, int fd)
{
	struct sockaddr_in me = {.sin_family = AF_INET}, peer;
	socklen_t sl = sizeof(me);
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	(void)rank; /* both sides do the same */
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof(me)) ||
	    getsockname(s, (struct sockaddr *)&me, &sl) ||
	    oob_send(fd, &me, sizeof(me)) || oob_recv(fd, &peer, sizeof(peer)) ||
	    connect(s, (struct sockaddr *)&peer, sizeof(peer))) {
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

/* The same pair with unconnected sockets, as a datagram endpoint that
 * serves any peer has: every send names its destination (and the kernel
 * looks its route up), every receive learns its source. */
static struct sockaddr_in udp_any_peer;

static int udp_any_pair(int rank, int fd)
{
	struct sockaddr_in me = {.sin_family = AF_INET};
	socklen_t sl = sizeof(me);
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	(void)rank;
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&me, sizeof(me)) ||
	    getsockname(s, (struct sockaddr *)&me, &sl) ||
	    oob_send(fd, &me, sizeof(me)) ||
	    oob_recv(fd, &udp_any_peer, sizeof(udp_any_peer))) {
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

static int sync_pair(int fd, int rank)
{
	char b = 0;

	return rank ? (oob_send(fd, &b, 1) || oob_recv(fd, &b, 1))
	            : (oob_recv(fd, &b, 1) || oob_send(fd, &b, 1));
}

static int tcp_lat(const struct cfg *c, int rank, const struct rep *r)
{
	(void)c;
	for (long i = 0; i < r->iters; i++) {
		if (rank ? xfer_all(r->s, r->buf, r->size, true) ||
		               xfer_all(r->s, r->buf, r->size, false)
		         : xfer_all(r->s, r->buf, r->size, false) ||
		               xfer_all(r->s, r->buf, r->size, true))
			return -1;
	}
	return 0;
}

static int tcp_bw(const struct cfg *c, int rank, const struct rep *r)
{
	char ack = 0;

	for (long i = 0; i < r->iters; i++) {
		if (xfer_all(r->s, r->buf, r->size, rank == 1))
			return -1;
		if (rank == 0 && c->o.verify &&
		    bench_check(r->buf, r->size, r->seed) >= 0)
			return -1;
	}
	/* The stream ends when the receiver has it all. */
	return xfer_all(r->s, &ack, 1, rank == 0);
}

static int udp_lat(const struct cfg *c, int rank, const struct rep *r)
{
	(void)c;
	for (long i = 0; i < r->iters; i++) {
		if (rank == 1 && send(r->s, r->buf, r->size, 0) != (ssize_t)r->size)
			return -1;
		if (recv_dgram(r->s, r->buf, r->size, false))
			return -1;
		if (rank == 0 && send(r->s, r->buf, r->size, 0) != (ssize_t)r->size)
			return -1;
	}
	return 0;
}

static int sendto_peer(const struct rep *r)
{
	return sendto(r->s, r->buf, r->size, 0, (struct sockaddr *)&udp_any_peer,
	              sizeof(udp_any_peer)) == (ssize_t)r->size
	           ? 0
	           : -1;
}

static int udp_lat_any(const struct cfg *c, int rank, const struct rep *r)
{
	(void)c;
	for (long i = 0; i < r->iters; i++) {
		if (rank == 1 && sendto_peer(r))
			return -1;
		if (recv_dgram(r->s, r->buf, r->size, true))
			return -1;
		if (rank == 0 && sendto_peer(r))
			return -1;
	}
	return 0;
}

/* udp_bw: the most a stream of datagrams carries between two processes,
 * with what a reliable sender over UDP cannot do without: at most
 * UDP_BW_WINDOW datagrams ahead of the receiver's word (it reports what it
 * took every UDP_BW_WINDOW / 4), so that a fast sender does not overflow
 * the receiver's socket.  Each message goes in datagrams of at most
 * UDP_BW_DGRAM bytes (what loom's udp carries on loopback), UDP_BW_BATCH a
 * sendmmsg / recvmmsg call, socket buffers as large as loom's udp asks
 * (8 MiB, up to the system's limit).  Nothing is sent again: a lost
 * datagram fails the run. */
#define UDP_BW_DGRAM  65000
#define UDP_BW_BATCH  16
#define UDP_BW_WINDOW 64

static int udp_bw_credit(int s, uint64_t *credit, bool wait)
{
	double deadline = 0;
	unsigned spins = 0;

	for (;;) {
		uint64_t v;
		ssize_t n = recv(s, &v, sizeof(v), MSG_DONTWAIT);

		if (n == (ssize_t)sizeof(v)) {
			if (v > *credit)
				*credit = v;
			wait = false;
			continue;
		}
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		if (!wait)
			return 0;
		if (waited_out(&spins, &deadline, 5e6))
			return -1;
	}
}

static int udp_bw(const struct cfg *c, int rank, const struct rep *r)
{
	size_t dg = r->size < UDP_BW_DGRAM ? r->size : UDP_BW_DGRAM;
	uint64_t per_msg = (r->size + dg - 1) / dg, total = per_msg * (uint64_t)r->iters;
	struct mmsghdr m[UDP_BW_BATCH];
	struct iovec iov[UDP_BW_BATCH];
	int sb = 8 << 20;
	uint64_t done = 0, credit = 0, told = 0;
	double deadline = 0;
	unsigned spins = 0;

	(void)c;
	setsockopt(r->s, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
	setsockopt(r->s, SOL_SOCKET, SO_RCVBUF, &sb, sizeof(sb));
	memset(m, 0, sizeof(m));
	while (done < total) {
		unsigned k = 0;
		int n;

		if (rank == 1) { /* the sender: whole datagrams of each message */
			if (udp_bw_credit(r->s, &credit, done - credit >= UDP_BW_WINDOW))
				return -1;
			for (; k < UDP_BW_BATCH && done + k < total &&
			       done + k - credit < UDP_BW_WINDOW;
			     k++) {
				size_t off = (size_t)((done + k) % per_msg) * dg;

				iov[k] = (struct iovec){r->buf + off, r->size - off < dg ? r->size - off : dg};
				m[k].msg_hdr = (struct msghdr){.msg_iov = &iov[k], .msg_iovlen = 1};
			}
			if (!k)
				continue;
			n = sendmmsg(r->s, m, k, MSG_DONTWAIT);
		} else {
			for (; k < UDP_BW_BATCH; k++) {
				iov[k] = (struct iovec){r->buf, r->size < dg ? dg : r->size};
				m[k].msg_hdr = (struct msghdr){.msg_iov = &iov[k], .msg_iovlen = 1};
			}
			n = recvmmsg(r->s, m, k, MSG_DONTWAIT, NULL);
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ENOBUFS)
			return -1;
		if (n > 0) {
			done += (uint64_t)n;
			deadline = 0;
			if (rank == 0 && (done - told >= UDP_BW_WINDOW / 4 || done == total)) {
				told = done;
				if (send(r->s, &told, sizeof(told), 0) != (ssize_t)sizeof(told))
					return -1;
			}
			continue;
		}
		if (waited_out(&spins, &deadline, 5e6))
			return -1; /* a lost datagram fails the run */
	}
	/* The stream ends when the receiver has it all. */
	while (rank == 1 && credit < total)
		if (udp_bw_credit(r->s, &credit, true))
			return -1;
	return 0;
}

/* Each side owns one cache line and spins on the other's: the floor of any
 * shared-memory transport's latency. The lines only count up, across
 * repetitions too, so they never need a reset (which would have to wait for
 * the peer to see the last value first). */
static int shm_lat(const struct cfg *c, int rank, const struct rep *r)
{
	static uint64_t base; /* what both lines hold when a repetition starts */
	volatile uint64_t *mine = c->lines + (rank ? 8 : 0);
	volatile uint64_t *theirs = c->lines + (rank ? 0 : 8);

	for (long i = 1; i <= r->iters; i++) {
		uint64_t want = base + (uint64_t)i;
		if (rank) {
			__atomic_store_n(mine, want, __ATOMIC_RELEASE);
			while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) != want)
				;
		} else {
			while (__atomic_load_n(theirs, __ATOMIC_ACQUIRE) != want)
				;
			__atomic_store_n(mine, want, __ATOMIC_RELEASE);
		}
	}
	base += (uint64_t)r->iters;
	return 0;
}

/* One repetition of a pair baseline: what it runs on opened on first use
 * (*s, kept across repetitions), both sides in step, the buffer filled, the
 * loop timed, the data checked. */
static int pair_rep(const struct cfg *c, int rank, int fd, int *s, int si, double *out)
{
	struct rep r = {.size = c->o.sizes[si], .seed = (uint64_t)si};
	double t0, us;
	int ret = -1;

	r.iters = iters_for(c, r.size);
	r.buf = malloc(r.size ? r.size : 1);
	if (!r.buf)
		return -1;
	if (*s < 0 && c->b->open && (*s = c->b->open(rank, fd)) < 0)
		goto out;
	if (sync_pair(fd, rank))
		goto out;
	r.s = *s;
	bench_fill(r.buf, r.size, r.seed);
	t0 = tool_now_us();
	if (c->b->loop(c, rank, &r))
		goto out;
	us = tool_now_us() - t0;
	/* Latency is half a round trip. */
	*out = !strcmp(c->b->metric, "lat") ? us / (double)r.iters / 2
	                                    : (double)r.iters * (double)r.size / us;
	if (c->o.verify && bench_check(r.buf, r.size, r.seed) >= 0)
		goto out;
	ret = 0;
out:
	free(r.buf);
	return ret;
}

static int memcpy_bw(const struct cfg *c, int si, double *out)
{
	size_t size = c->o.sizes[si];
	long iters = iters_for(c, size);
	char *src = malloc(size), *dst = malloc(size);
	double t0;
	int ret = -1;

	if (!src || !dst)
		goto out;
	bench_fill(src, size, 7);
	memset(dst, 0, size); /* fault the pages in before timing */
	t0 = tool_now_us();
	for (long i = 0; i < iters; i++) {
		memcpy(dst, src, size);
		__asm__ volatile("" : : "r"(dst) : "memory");
	}
	*out = (double)iters * (double)size / (tool_now_us() - t0);
	ret = c->o.verify && bench_check(dst, size, 7) >= 0 ? -1 : 0;
out:
	free(src);
	free(dst);
	return ret;
}

/* A single copy from another process: the ceiling of a CMA-based transport. */
static int cma_bw(const struct cfg *c, int si, double *out)
{
	size_t size = c->o.sizes[si];
	long iters = iters_for(c, size);
	char *src = malloc(size), *dst = malloc(size);
	int pipefd[2];
	pid_t pid;
	double t0;
	int ret = -1;

	if (!src || !dst || pipe(pipefd))
		goto out;
	bench_fill(src, size, 9);
	memset(dst, 0, size);
	pid = fork();
	if (pid == 0) {
		char b;
		close(pipefd[1]);
		alarm(60);
		/* src stays mapped at the same address until the parent is done */
		_exit(read(pipefd[0], &b, 1) < 0);
	}
	close(pipefd[0]);
	if (pid < 0) {
		close(pipefd[1]);
		goto out;
	}
	t0 = tool_now_us();
	for (long i = 0; i < iters; i++) {
		struct iovec l = {dst, size}, r = {src, size};
		if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)size) {
			perror("process_vm_readv");
			break;
		}
		if (i == iters - 1)
			ret = 0;
	}
	*out = (double)iters * (double)size / (tool_now_us() - t0);
	close(pipefd[1]);
	waitpid(pid, NULL, 0);
	if (!ret && c->o.verify && bench_check(dst, size, 9) >= 0)
		ret = -1;
out:
	free(src);
	free(dst);
	return ret;
}

static int child(int rank, int pair, int fd, void *arg)
{
	const struct cfg *c = arg;
	int s = -1;

	for (int si = 0; si < c->o.nsizes; si++) {
		double v;
		if (c->sh->skip_reason[si][0])
			continue;
		/* one warm-up, then the repetitions */
		for (int r = -1; r < c->o.reps; r++) {
			if (pair_rep(c, rank, fd, &s, si, &v)) {
				fprintf(stderr, "phys_bench: %s size %zu failed\n",
				        c->b->name, c->o.sizes[si]);
				return -1;
			}
			if (rank == 1 && r >= 0)
				c->sh->value[si][pair][r] = v;
		}
		if (rank == 1)
			c->sh->done[si] = 1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: phys_bench -o BASELINE [-S SIZES] [-I OPS] [-B MiB] [-r REPS] [-c]\n"
	    "                  [-T SECONDS] [-A]\n"
	    "  BASELINE: tcp_lat tcp_bw udp_lat udp_lat_any udp_bw shm_lat memcpy_bw cma_bw\n"
	    "  (shm_lat measures one cache line, whatever the size)\n");
}

int main(int argc, char **argv)
{
	struct cfg c = {.o = BENCH_OPTS_INIT};
	int i, opt, ret = 0;

	while ((opt = bench_getopt(argc, argv, "o:h" BENCH_OPTS, &c.o)) != -1) {
		switch (opt) {
		case 'o':
			if ((i = BENCH_LOOKUP(base_table, optarg, "baseline")) < 0)
				return 1;
			c.b = &base_table[i];
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 1;
		}
	}
	if (!c.b || bench_opts_check(&c.o, 1000, 32)) {
		usage();
		return 1;
	}
	c.sh = bench_shared_map();
	c.lines =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!c.sh || c.lines == MAP_FAILED)
		return 1;
	c.sh->barrier_parties = 1;
	for (int si = 0; si < c.o.nsizes; si++) {
		size_t s = c.o.sizes[si];
		const char *why = NULL;
		if (!strncmp(c.b->name, "udp_lat", 7) && s > UDP_MAX)
			why = "above the largest UDP datagram";
		else if (!strcmp(c.b->name, "udp_bw") && s == 0)
			why = "a stream of zero-byte messages not measured";
		else if (c.b->solo && s == 0)
			why = "zero-byte copy not measured";
		if (why)
			snprintf(c.sh->skip_reason[si], sizeof(c.sh->skip_reason[si]),
			         "%s", why);
	}

	printf("# library: none (physical baseline)\n");
	if (c.b->loop) {
		ret = bench_run_pairs(1, c.o.timeout, c.o.pin, child, &c);
	} else {
		for (int si = 0; si < c.o.nsizes && !ret; si++) {
			double v;
			if (c.sh->skip_reason[si][0])
				continue;
			for (int r = -1; r < c.o.reps && !ret; r++) {
				ret = c.b->solo(&c, si, &v);
				if (r >= 0)
					c.sh->value[si][0][r] = v;
			}
			c.sh->done[si] = !ret;
		}
	}
	bench_print_header();
	for (int si = 0; si < c.o.nsizes; si++) {
		struct bench_row row = {"phys",
		                        c.b->name,
		                        c.b->metric,
		                        "raw",
		                        c.b->medium,
		                        c.o.sizes[si],
		                        iters_for(&c, c.o.sizes[si]),
		                        1,
		                        1};
		if (!bench_skipped(c.sh, si, c.o.sizes[si]) && c.sh->done[si])
			bench_print_row(&row, c.o.reps, c.sh->value[si][0]);
	}
	if (ret)
		fprintf(stderr, "phys_bench: FAILED (%s)\n", c.b->name);
	return ret ? 1 : 0;
}
