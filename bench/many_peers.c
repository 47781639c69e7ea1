/* many_peers.c - what the peers an endpoint knows cost its busy one: RDM
 * endpoint A of provider -p sends one 64-byte message to each of -n other
 * endpoints of its process (which stay open and idle), then ping-pongs
 * 64-byte messages -I times with endpoint B of a forked process, the two
 * pinned to CPUs 0 and 1.  Prints the ping-pong's one-way time in
 * nanoseconds, the median of -r repetitions, as CSV
 * (bench,provider,peers,ns_one_way).  A provider whose progress walked
 * every known peer pays for the -n idle ones on each poll while a message
 * is in flight; -n 0 gives the floor.  Public API only. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "try.h"

#define TRY(call) BENCH_TRY("many_peers", #call, call)
#define SPIN_MAX 200000000L

struct side {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t addr; /* in the shared AV */
};

static struct fid_domain *dom;
static struct fid_av *av;
static struct fi_info *info;

static int side_open(struct side *s)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 256};
	char name[256];
	size_t len = sizeof(name);

	TRY(fi_endpoint(dom, info, &s->ep, NULL));
	TRY(fi_cq_open(dom, &ca, &s->cq, NULL));
	TRY(fi_ep_bind(s->ep, &av->fid, 0));
	TRY(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(s->ep));
	TRY(fi_getname(&s->ep->fid, name, &len));
	return fi_av_insert(av, name, 1, &s->addr, 0, NULL) == 1 ? 0 : 1;
}

/* Poll s until it has completed `want` operations; the other side is
 * polled too, so that its transfers move (one thread drives both). */
static int reap(struct side *s, struct side *other, int want)
{
	struct fi_cq_entry e[16];
	int got = 0;

	for (long spins = 0; got < want; spins++) {
		ssize_t r = fi_cq_read(s->cq, e, 16);

		if (r > 0)
			got += (int)r;
		else if (r != -FI_EAGAIN)
			TRY(r);
		if (other)
			fi_cq_read(other->cq, e, 0);
		if (spins == SPIN_MAX) {
			fprintf(stderr, "many_peers: %d of %d completions\n", got, want);
			return 1;
		}
	}
	return 0;
}

static int send_one(struct side *from, struct side *to, char *buf)
{
	ssize_t r;

	while ((r = fi_send(from->ep, buf, 64, NULL, to->addr, NULL)) == -FI_EAGAIN)
		fi_cq_read(to->cq, NULL, 0);
	TRY(r);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* B, in the child: its name up the pipe, A's down the other, then
 * iters * reps answers. */
static int responder(const char *prov, int up, int down, long total)
{
	static char buf[64];
	char name[256];
	size_t len = sizeof(name);
	struct side a, b;

	pin(1);
	TRY(bench_rdm_domain(prov, &info, &dom, &av));
	TRY(side_open(&b));
	TRY(fi_getname(&b.ep->fid, name, &len));
	if (write(up, &len, sizeof(len)) != sizeof(len) || write(up, name, len) != (ssize_t)len ||
	    read(down, &len, sizeof(len)) != sizeof(len) || len > sizeof(name) ||
	    read(down, name, len) != (ssize_t)len || fi_av_insert(av, name, 1, &a.addr, 0, NULL) != 1)
		return 1;
	for (long i = 0; i < total; i++) {
		TRY(fi_recv(b.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, NULL));
		TRY(reap(&b, NULL, 1));
		TRY(send_one(&b, &a, buf));
		TRY(reap(&b, NULL, 1));
	}
	/* A's last send completes on our word: stay until A says so. */
	return read(down, &len, 1) < 0;
}

int main(int argc, char **argv)
{
	const char *prov = "udp";
	int n = 256, iters = 20000, reps = 5, op, up[2], down[2], status;
	struct side a, b, *peers;
	static char abuf[64], pbuf[64];
	char name[256];
	size_t len = sizeof(name);
	double *ns;
	pid_t child;

	while ((op = getopt(argc, argv, "p:n:I:r:")) != -1) {
		switch (op) {
		case 'p': prov = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'I': iters = atoi(optarg); break;
		case 'r': reps = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: many_peers [-p PROV] [-n PEERS] [-I ITERS] [-r REPS]\n");
			return 2;
		}
	}
	if (n < 0 || iters < 1 || reps < 1 || pipe(up) || pipe(down))
		return 2;
	child = fork();
	if (child < 0)
		return 1;
	if (!child)
		_exit(responder(prov, up[1], down[0], (long)iters * reps));
	pin(0);
	peers = calloc((size_t)n + 1, sizeof(*peers));
	ns = calloc((size_t)reps, sizeof(*ns));
	/* A few descriptors per endpoint (a socket, timers, an epoll set). */
	bench_nofile((rlim_t)n * 6 + 64);
	if (bench_rdm_domain(prov, &info, &dom, &av) || side_open(&a))
		goto fail;
	for (int i = 0; i < n; i++) {
		if (side_open(&peers[i]) ||
		    fi_recv(peers[i].ep, pbuf, sizeof(pbuf), NULL, FI_ADDR_UNSPEC, NULL) ||
		    send_one(&a, &peers[i], abuf) || reap(&peers[i], &a, 1) ||
		    reap(&a, &peers[i], 1)) /* the send's completion */
			goto fail;
	}
	if (read(up[0], &len, sizeof(len)) != sizeof(len) || len > sizeof(name) ||
	    read(up[0], name, len) != (ssize_t)len || fi_av_insert(av, name, 1, &b.addr, 0, NULL) != 1)
		goto fail;
	len = sizeof(name);
	if (fi_getname(&a.ep->fid, name, &len) || write(down[1], &len, sizeof(len)) != sizeof(len) ||
	    write(down[1], name, len) != (ssize_t)len)
		goto fail;
	for (int r = 0; r < reps; r++) {
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < iters; i++) {
			if (fi_recv(a.ep, abuf, sizeof(abuf), NULL, FI_ADDR_UNSPEC, NULL) ||
			    send_one(&a, &b, abuf) || reap(&a, NULL, 2)) /* the send, the answer */
				goto fail;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns[r] = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
		        iters / 2;
	}
	if (write(down[1], "", 1) != 1 || waitpid(child, &status, 0) != child ||
	    !WIFEXITED(status) || WEXITSTATUS(status))
		goto fail;
	qsort(ns, (size_t)reps, sizeof(*ns), cmp_double);
	printf("many_peers,%s,%d,%.0f\n", prov, n, ns[reps / 2]);
	return 0;
fail:
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	return 1;
}
