/* overlap.c - how much of a transfer hides behind computation, with
 * automatic progress (-x auto: data_progress FI_PROGRESS_AUTO) or manual
 * (-x manual).  Two processes; each round the receiver posts a -S byte
 * receive, tells the sender, computes for -C microseconds without a
 * fabric call, then waits for the receive; the sender sends and waits.
 * Each round's time is what the receiver saw from posting to completion:
 * about compute + transfer when nothing moves during the computation,
 * about max(compute, transfer) when it all moves behind it.  Prints CSV:
 * bench,provider,mode,size,compute_us,rounds,median_round_us.  Public API
 * only; the sender sleeps in fi_cq_sread, so the two cores are left to
 * the receiver and its progress thread. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "tool_util.h"
#include "try.h"

#define NAMELEN 256

static const char *prov = "shm";
static size_t size = 1 << 20;
static int compute_us = 1000, rounds = 200;
static bool autop = true;

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
};

#define TRY(call) BENCH_TRY("overlap", #call, call)

static int open_side(struct side *s)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 64,
	                        .wait_obj = FI_WAIT_UNSPEC};

	h->fabric_attr->prov_name = strdup(prov);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->domain_attr->data_progress = autop ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
	TRY(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &s->info));
	fi_freeinfo(h);
	TRY(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	TRY(fi_domain(s->fabric, s->info, &s->domain, NULL));
	TRY(fi_av_open(s->domain, &aa, &s->av, NULL));
	TRY(fi_cq_open(s->domain, &ca, &s->cq, NULL));
	TRY(fi_endpoint(s->domain, s->info, &s->ep, NULL));
	TRY(fi_ep_bind(s->ep, &s->av->fid, 0));
	TRY(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(s->ep));
	return 0;
}

static int exchange(struct side *s, int out, int in)
{
	char mine[NAMELEN] = {0}, theirs[NAMELEN];
	size_t len = NAMELEN;

	TRY(fi_getname(&s->ep->fid, mine, &len));
	if (write(out, mine, NAMELEN) != NAMELEN || read(in, theirs, NAMELEN) != NAMELEN)
		return 1;
	return fi_av_insert(s->av, theirs, 1, &s->peer, 0, NULL) == 1 ? 0 : 1;
}

/* Busy work the compiler keeps. */
static void compute(int us)
{
	volatile double x = 1;
	double end = tool_now_us() + us;

	while (tool_now_us() < end)
		for (int i = 0; i < 100; i++)
			x = x * 1.0000001 + 1e-9;
}

static int wait_one(struct side *s)
{
	struct fi_cq_entry e;
	ssize_t r;

	do
		r = fi_cq_sread(s->cq, &e, 1, NULL, 1000);
	while (r == -FI_EAGAIN || r == -FI_ETIMEDOUT);
	return r == 1 ? 0 : 1;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int run(bool receiver, int out, int in)
{
	struct side s = {0};
	char *buf = malloc(size), token = 0;
	double *t = calloc((size_t)rounds, sizeof(double));

	if (!buf || !t || open_side(&s) || exchange(&s, out, in))
		return 1;
	memset(buf, 1, size);
	for (int r = 0; r < rounds; r++) {
		if (receiver) {
			double t0 = tool_now_us();

			TRY(fi_recv(s.ep, buf, size, NULL, FI_ADDR_UNSPEC, NULL));
			if (write(out, &token, 1) != 1)
				return 1;
			compute(compute_us);
			if (wait_one(&s))
				return 1;
			t[r] = tool_now_us() - t0;
		} else {
			if (read(in, &token, 1) != 1)
				return 1;
			TRY(fi_send(s.ep, buf, size, NULL, s.peer, NULL));
			if (wait_one(&s))
				return 1;
		}
	}
	if (receiver) {
		qsort(t, (size_t)rounds, sizeof(*t), cmp_d);
		printf("overlap,%s,%s,%zu,%d,%d,%.1f\n", prov, autop ? "auto" : "manual", size,
		       compute_us, rounds, t[rounds / 2]);
	}
	fi_close(&s.ep->fid);
	fi_close(&s.cq->fid);
	fi_close(&s.av->fid);
	fi_close(&s.domain->fid);
	fi_close(&s.fabric->fid);
	fi_freeinfo(s.info);
	free(buf);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	int a[2], b[2], op, st = 1;
	pid_t pid;

	while ((op = getopt(argc, argv, "p:S:C:n:x:")) != -1) {
		switch (op) {
		case 'p':
			prov = optarg;
			break;
		case 'S':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'C':
			compute_us = atoi(optarg);
			break;
		case 'n':
			rounds = atoi(optarg);
			break;
		case 'x':
			autop = !strcmp(optarg, "auto");
			break;
		default:
			fprintf(stderr, "usage: overlap [-p prov] [-S size] [-C compute_us] "
			                "[-n rounds] [-x auto|manual]\n");
			return 2;
		}
	}
	if (rounds < 1 || pipe(a) || pipe(b))
		return 2;
	pid = fork();
	if (pid == 0)
		_exit(run(false, a[1], b[0]));
	if (run(true, b[1], a[0]))
		return 1;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
