/* ctx_threads.c - message rate of several threads of one process sending
 * to the same number of threads of another: each thread through a context
 * of one scalable endpoint (-x sep: T transmit and T receive contexts,
 * thread i sending to the peer's receive context i), or through an
 * endpoint of its own (-x eps: T endpoints a side).  Small messages, a
 * window in flight per thread.  Prints CSV: bench,provider,mode,threads,
 * size,window,messages,seconds,rate_mps.  Public API only. */
#include <pthread.h>
#include <stdatomic.h>
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

#define MAXT    16
#define NAMELEN 256

static const char *prov = "shm";
static int nt = 2, window = 64, size = 64;
static long msgs = 200000;
static bool sep;

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *sep, *ep[MAXT], *tx[MAXT], *rx[MAXT];
	struct fid_cq *cq[MAXT];
	fi_addr_t peer[MAXT];
	int bits;
};

#define TRY(call) BENCH_TRY("ctx_threads", #call, call)

static int open_side(struct side *s)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 4096};

	while ((1 << s->bits) < nt)
		s->bits++;
	aa.rx_ctx_bits = sep ? s->bits : 0;
	h->fabric_attr->prov_name = strdup(prov);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | (sep ? FI_NAMED_RX_CTX : 0);
	h->domain_attr->threading = FI_THREAD_SAFE;
	TRY(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &s->info));
	fi_freeinfo(h);
	TRY(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	TRY(fi_domain(s->fabric, s->info, &s->domain, NULL));
	TRY(fi_av_open(s->domain, &aa, &s->av, NULL));
	if (sep) {
		s->info->ep_attr->tx_ctx_cnt = (size_t)nt;
		s->info->ep_attr->rx_ctx_cnt = (size_t)nt;
		TRY(fi_scalable_ep(s->domain, s->info, &s->sep, NULL));
		TRY(fi_scalable_ep_bind(s->sep, &s->av->fid, 0));
	}
	for (int i = 0; i < nt; i++) {
		TRY(fi_cq_open(s->domain, &ca, &s->cq[i], NULL));
		if (sep) {
			TRY(fi_tx_context(s->sep, i, NULL, &s->tx[i], NULL));
			TRY(fi_rx_context(s->sep, i, NULL, &s->rx[i], NULL));
			TRY(fi_ep_bind(s->tx[i], &s->cq[i]->fid, FI_TRANSMIT));
			TRY(fi_ep_bind(s->rx[i], &s->cq[i]->fid, FI_RECV));
			TRY(fi_enable(s->tx[i]));
			TRY(fi_enable(s->rx[i]));
		} else {
			TRY(fi_endpoint(s->domain, s->info, &s->ep[i], NULL));
			TRY(fi_ep_bind(s->ep[i], &s->av->fid, 0));
			TRY(fi_ep_bind(s->ep[i], &s->cq[i]->fid, FI_TRANSMIT | FI_RECV));
			TRY(fi_enable(s->ep[i]));
			s->tx[i] = s->rx[i] = s->ep[i];
		}
	}
	if (sep)
		TRY(fi_enable(s->sep));
	return 0;
}

/* Names through a pipe pair: mine out, the peer's in (sep: one name;
 * eps: nt of them). */
static int exchange(struct side *s, int out, int in)
{
	int n = sep ? 1 : nt;
	char names[MAXT][NAMELEN], theirs[MAXT][NAMELEN];

	for (int i = 0; i < n; i++) {
		size_t len = NAMELEN;

		memset(names[i], 0, NAMELEN);
		TRY(fi_getname(sep ? &s->sep->fid : &s->ep[i]->fid, names[i], &len));
	}
	if (write(out, names, (size_t)n * NAMELEN) != (ssize_t)n * NAMELEN ||
	    read(in, theirs, (size_t)n * NAMELEN) != (ssize_t)n * NAMELEN)
		return 1;
	for (int i = 0; i < n; i++)
		if (fi_av_insert(s->av, theirs[i], 1, &s->peer[i], 0, NULL) != 1)
			return 1;
	for (int i = 1; sep && i < nt; i++)
		s->peer[i] = fi_rx_addr(s->peer[0], i, s->bits);
	if (sep)
		s->peer[0] = fi_rx_addr(s->peer[0], 0, s->bits);
	return 0;
}

struct worker {
	struct side *s;
	int i;
	bool sender;
	pthread_t t;
	long done;
};

static atomic_int go;

static void *work(void *arg)
{
	struct worker *w = arg;
	struct side *s = w->s;
	char *buf = calloc((size_t)window, (size_t)size);
	long posted = 0;
	int inflight = 0;

	while (!atomic_load(&go))
		;
	while (w->done < msgs) {
		struct fi_cq_entry e[64];
		ssize_t r;

		while (inflight < window && posted < msgs) {
			char *b = buf + (size_t)(posted % window) * size;

			r = w->sender ? fi_send(s->tx[w->i], b, (size_t)size, NULL,
			                        s->peer[w->i], NULL)
			              : fi_recv(s->rx[w->i], b, (size_t)size, NULL,
			                        FI_ADDR_UNSPEC, NULL);
			if (r == -FI_EAGAIN)
				break;
			if (r) {
				fprintf(stderr, "ctx_threads: post = %zd\n", r);
				exit(1);
			}
			posted++;
			inflight++;
		}
		r = fi_cq_read(s->cq[w->i], e, 64);
		if (r > 0) {
			w->done += r;
			inflight -= (int)r;
		} else if (r != -FI_EAGAIN) {
			fprintf(stderr, "ctx_threads: fi_cq_read = %zd\n", r);
			exit(1);
		}
	}
	free(buf);
	return NULL;
}

/* One side: open, exchange, run nt threads, report (the receiver). */
static int run(bool sender, int out, int in)
{
	struct side s = {0};
	struct worker w[MAXT];
	double t0, t1;
	char c = 0;

	if (open_side(&s) || exchange(&s, out, in))
		return 1;
	for (int i = 0; i < nt; i++) {
		w[i] = (struct worker){.s = &s, .i = i, .sender = sender};
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	/* Both sides ready: one byte each way, then go. */
	if (write(out, &c, 1) != 1 || read(in, &c, 1) != 1)
		return 1;
	t0 = tool_now_us() * 1e-6;
	atomic_store(&go, 1);
	for (int i = 0; i < nt; i++)
		pthread_join(w[i].t, NULL);
	t1 = tool_now_us() * 1e-6;
	if (!sender)
		printf("ctx_threads,%s,%s,%d,%d,%d,%ld,%.4f,%.3f\n", prov,
		       sep ? "sep" : "eps", nt, size, window, msgs * nt, t1 - t0,
		       msgs * nt / (t1 - t0) / 1e6);
	/* Let the other side finish before closing. */
	if (write(out, &c, 1) != 1 || read(in, &c, 1) != 1)
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int opt, a[2], b[2], st;
	pid_t pid;

	while ((opt = getopt(argc, argv, "p:t:w:s:n:x:")) != -1) {
		switch (opt) {
		case 'p':
			prov = optarg;
			break;
		case 't':
			nt = atoi(optarg);
			break;
		case 'w':
			window = atoi(optarg);
			break;
		case 's':
			size = atoi(optarg);
			break;
		case 'n':
			msgs = atol(optarg);
			break;
		case 'x':
			sep = !strcmp(optarg, "sep");
			break;
		default:
			fprintf(stderr,
			        "usage: ctx_threads [-p PROV] [-t THREADS] [-w WINDOW] "
			        "[-s SIZE] [-n MSGS_PER_THREAD] [-x sep|eps]\n");
			return 2;
		}
	}
	if (nt < 1 || nt > MAXT || window < 1 || size < 1)
		return 2;
	if (pipe(a) || pipe(b))
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(run(true, a[1], b[0]));
	st = run(false, b[1], a[0]);
	waitpid(pid, &opt, 0);
	return st || !WIFEXITED(opt) || WEXITSTATUS(opt);
}
