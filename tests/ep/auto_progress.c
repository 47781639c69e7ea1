/* auto_progress.c - automatic data progress (FI_PROGRESS_AUTO, man
 * fi_domain) across two processes: asked for, it is granted (and manual
 * stays the answer when nothing is asked).  Rank 1 posts a 64 MiB receive
 * and then sleeps, calling nothing; rank 0's send of 64 MiB (a
 * rendezvous the receiver must drive) completes while it sleeps, and
 * the receive's counter and contents are right when it wakes.  While the
 * endpoints are idle the progress thread takes no CPU to speak of, and it
 * is gone once the endpoint closes. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define BIG   ((size_t)64 << 20)
#define SLEEP 3000 /* ms rank 1 sleeps through the transfer */

struct ctx {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_ep *ep;
};

static struct fi_info *hints_for(enum fi_progress p)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup(et_prov());
	h->ep_attr->type = FI_EP_RDM;
	h->addr_format = FI_ADDR_STR;
	h->caps = FI_MSG;
	h->domain_attr->data_progress = p;
	return h;
}

static int open_ep(struct ctx *c, char *name, size_t len)
{
	struct fi_info *hints = hints_for(FI_PROGRESS_AUTO);
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	const char *node = getenv("LOOM_TEST_NODE");
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	ret = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints,
	                 &c->info);
	fi_freeinfo(hints);
	OKR(ret);
	CHECK_INT(c->info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	OKR(fi_fabric(c->info->fabric_attr, &c->fabric, NULL));
	OKR(fi_domain(c->fabric, c->info, &c->domain, NULL));
	OKR(fi_cq_open(c->domain, &cqa, &c->cq, NULL));
	OKR(fi_cntr_open(c->domain, &ca, &c->cntr, NULL));
	OKR(fi_av_open(c->domain, &ava, &c->av, NULL));
	OKR(fi_endpoint(c->domain, c->info, &c->ep, NULL));
	OKR(fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV));
	OKR(fi_ep_bind(c->ep, &c->cntr->fid, FI_RECV));
	OKR(fi_ep_bind(c->ep, &c->av->fid, 0));
	OKR(fi_enable(c->ep));
	return fi_getname(&c->ep->fid, name, &len);
}

static void close_all(struct ctx *c)
{
	struct fid *f[] = {c->ep ? &c->ep->fid : NULL, c->av ? &c->av->fid : NULL,
	                   c->cntr ? &c->cntr->fid : NULL, c->cq ? &c->cq->fid : NULL,
	                   c->domain ? &c->domain->fid : NULL,
	                   c->fabric ? &c->fabric->fid : NULL};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i])
			CHECK_INT(fi_close(f[i]), 0);
	fi_freeinfo(c->info);
}

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;

	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int body(int rank, int nprocs, void *arg)
{
	struct ctx c = {0};
	char name[ET_SLOT] = {0}, all[2 * ET_SLOT];
	unsigned char *buf = malloc(BIG);
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	int done_in_sleep = 0;

	(void)nprocs, (void)arg;
	/* Nothing asked: manual. */
	{
		struct fi_info *h = hints_for(FI_PROGRESS_UNSPEC), *i = NULL;

		CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i), 0);
		if (i)
			CHECK_INT(i->domain_attr->data_progress, FI_PROGRESS_MANUAL);
		fi_freeinfo(i);
		fi_freeinfo(h);
	}
	if (!buf || open_ep(&c, name, sizeof(name))) {
		et_allgather("", 1, all);
		return 1;
	}
	CHECK_INT(threads(), 2); /* the progress thread */
	CHECK_INT(et_allgather(name, strlen(name) + 1, all), 0);
	CHECK_INT(fi_av_insert(c.av, all + (1 - rank) * ET_SLOT, 1, &peer, 0, NULL), 1);

	if (rank == 1) {
		memset(buf, 0, BIG);
		OKR(fi_recv(c.ep, buf, BIG, NULL, FI_ADDR_UNSPEC, buf));
		CHECK_INT(et_barrier(), 0);
		usleep(SLEEP * 1000); /* no fabric call */
	} else {
		uint64_t start;
		struct fi_cq_tagged_entry e;
		ssize_t r;

		et_fill(buf, BIG, 42);
		CHECK_INT(et_barrier(), 0);
		start = et_now_us();
		OKR(fi_send(c.ep, buf, BIG, NULL, peer, buf));
		/* Done well before the receiver wakes: it moved by itself. */
		do
			r = fi_cq_read(c.cq, &e, 1);
		while (r == -FI_EAGAIN && et_now_us() - start < (SLEEP - 1000) * 1000ull);
		CHECK_INT(r, 1);
		done_in_sleep = r == 1;
		if (!done_in_sleep)
			fprintf(stderr, "send not done while the receiver slept\n");
	}
	CHECK_INT(et_allgather(&done_in_sleep, sizeof(int), all), 0);
	if (rank == 1) {
		struct fi_cq_tagged_entry e;

		CHECK_INT(fi_cntr_read(c.cntr), 1);
		CHECK_INT(et_read(c.cq, &e, NULL, NULL, NULL, 5000), 1);
		CHECK_INT(e.len, BIG);
		CHECK(et_verify(buf, BIG, 42) == (size_t)-1);
	}
	CHECK_INT(et_barrier(), 0);
	/* Idle: the thread sleeps in the kernel. */
	{
		double t0 = cpu_s();

		usleep(1000 * 1000);
		if (cpu_s() - t0 > 0.05)
			fprintf(stderr, "idle: %.3f s of CPU in 1 s\n", cpu_s() - t0);
		CHECK(cpu_s() - t0 <= 0.05);
	}
	CHECK_INT(et_barrier(), 0);
	close_all(&c);
	CHECK_INT(threads(), 1);
	free(buf);
	return check_done();
}

int main(void)
{
	return et_run("auto_progress", 2, 60, body, NULL, 0);
}
