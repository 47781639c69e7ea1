/* self_msg: one RDM endpoint sends messages to itself, one at a time: the
 * software path of a small message (send, poll, match, completion, repost)
 * with no waiting on another process.  Under callgrind its instructions per
 * message are a deterministic measure of that path (bench/icount), which a
 * noisy machine's timings are not.
 *
 *   self_msg [-p PROV] [-S SIZE] [-I ITERS] [-t]    (-t: tagged)
 *
 * Prints "<ns per message> ns/msg" and exits 0 when every message arrived
 * with its contents, after a line "# library: PATH" naming the libfabric
 * that defines fi_getinfo.  Public API only: it runs on any libfabric.so.1. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define CHECK(call)                                                              \
	do {                                                                     \
		int rc_ = (int)(call);                                           \
		if (rc_) {                                                       \
			fprintf(stderr, "self_msg: %s: %s\n", #call,             \
			        fi_strerror(rc_ < 0 ? -rc_ : rc_));              \
			return 1;                                                \
		}                                                                \
	} while (0)

struct self {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t me;
};

static int self_open(struct self *s, const char *prov, bool tagged)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 128};
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	char name[256];
	size_t len = sizeof(name);

	if (!hints)
		return 1;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = tagged ? FI_TAGGED : FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode =
	    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	fi_freeinfo(hints);
	CHECK(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	CHECK(fi_domain(s->fabric, s->info, &s->domain, NULL));
	CHECK(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL));
	CHECK(fi_av_open(s->domain, &av_attr, &s->av, NULL));
	CHECK(fi_endpoint(s->domain, s->info, &s->ep, NULL));
	CHECK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(s->ep, &s->av->fid, 0));
	CHECK(fi_enable(s->ep));
	CHECK(fi_getname(&s->ep->fid, name, &len));
	if (fi_av_insert(s->av, name, 1, &s->me, 0, NULL) != 1) {
		fprintf(stderr, "self_msg: fi_av_insert of its own name failed\n");
		return 1;
	}
	return 0;
}

static void self_close(struct self *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	fi_freeinfo(s->info);
}

static ssize_t post(struct self *s, void *buf, size_t len, bool tagged, void *ctx)
{
	return tagged ? fi_trecv(s->ep, buf, len, NULL, FI_ADDR_UNSPEC, 7, 0, ctx)
	              : fi_recv(s->ep, buf, len, NULL, FI_ADDR_UNSPEC, ctx);
}

static ssize_t inject(struct self *s, const void *buf, size_t len, bool tagged)
{
	return tagged ? fi_tinject(s->ep, buf, len, s->me, 7)
	              : fi_inject(s->ep, buf, len, s->me);
}

int main(int argc, char **argv)
{
	const char *prov = "shm";
	size_t size = 64;
	long iters = 100000;
	bool tagged = false;
	struct self s = {0};
	struct fi_context ctx;
	struct fi_cq_tagged_entry e;
	struct timespec t0, t1;
	unsigned char *tx, *rx;
	int opt, ret = 1;

	while ((opt = getopt(argc, argv, "p:S:I:t")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'S': size = strtoul(optarg, NULL, 0); break;
		case 'I': iters = strtol(optarg, NULL, 0); break;
		case 't': tagged = true; break;
		default:
			fprintf(stderr, "usage: self_msg [-p PROV] [-S SIZE] [-I ITERS] [-t]\n");
			return 2;
		}
	}
	{
		Dl_info dl;

		if (!dladdr((void *)fi_getinfo, &dl) || !dl.dli_fname)
			return 1;
		printf("# library: %s\n", dl.dli_fname);
	}
	tx = calloc(1, size + 1);
	rx = calloc(1, size + 1);
	if (!tx || !rx || iters <= 0)
		goto out;
	if (self_open(&s, prov, tagged))
		goto out;
	if (size > s.info->tx_attr->inject_size) {
		fprintf(stderr, "self_msg: %zu B is above the inject size %zu\n", size,
		        s.info->tx_attr->inject_size);
		goto out;
	}
	if (post(&s, rx, size, tagged, &ctx))
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < iters; i++) {
		ssize_t n;

		if (size > 1)
			tx[size - 1] = (unsigned char)~i;
		if (size)
			tx[0] = (unsigned char)i;
		while ((n = inject(&s, tx, size, tagged)) == -FI_EAGAIN)
			fi_cq_read(s.cq, NULL, 0);
		if (n) {
			fprintf(stderr, "self_msg: inject: %s\n", fi_strerror((int)-n));
			goto out;
		}
		while ((n = fi_cq_read(s.cq, &e, 1)) == -FI_EAGAIN)
			;
		if (n != 1 || e.op_context != &ctx || e.len != size ||
		    (size && rx[0] != (unsigned char)i) ||
		    (size > 1 && rx[size - 1] != (unsigned char)~i)) {
			fprintf(stderr, "self_msg: message %ld: read %zd, len %zu, wrong %s\n",
			        i, n, n == 1 ? e.len : 0, n == 1 ? "contents" : "completion");
			goto out;
		}
		if (post(&s, rx, size, tagged, &ctx))
			goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.1f ns/msg\n",
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
	           (double)iters);
	ret = 0;
out:
	self_close(&s);
	free(tx);
	free(rx);
	return ret;
}
