/* ep_memory.c - what RDM endpoints cost in one process: -n endpoints of
 * provider -p opened and enabled (idle), then each sends one 64-byte
 * message to one receiving endpoint of the same process, which takes
 * them all.  Prints resident memory per endpoint idle and after its
 * message, as CSV (bench,provider,endpoints,rss_before_kib,
 * idle_kib_per_ep,rss_idle_kib,sent_kib_per_ep,rss_sent_kib).  Public API
 * only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "try.h"

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			v = atol(line + 6);
	if (f)
		fclose(f);
	return v;
}

#define TRY(call) BENCH_TRY("ep_memory", #call, call)

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp";
	int n = argc > 2 ? atoi(argv[2]) : 1000;
	struct fi_info *info;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq, *rcq;
	struct fid_ep **ep = calloc((size_t)n, sizeof(*ep)), *rx;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = (size_t)n + 64};
	char name[256], msg[64] = "one", *in = malloc((size_t)n * 64);
	size_t len = sizeof(name);
	fi_addr_t to;
	long r0, r1, r2;
	int sent = 0, got = 0;

	/* A few descriptors per endpoint (tcp: a listener, connections). */
	bench_nofile((rlim_t)n * 4 + 64);
	TRY(bench_rdm_domain(prov, &info, &dom, &av));
	TRY(fi_cq_open(dom, &ca, &cq, NULL));
	TRY(fi_cq_open(dom, &ca, &rcq, NULL));
	TRY(fi_endpoint(dom, info, &rx, NULL));
	TRY(fi_ep_bind(rx, &av->fid, 0));
	TRY(fi_ep_bind(rx, &rcq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(rx));
	TRY(fi_getname(&rx->fid, name, &len));
	if (fi_av_insert(av, name, 1, &to, 0, NULL) != 1)
		return 1;
	r0 = rss_kib();
	for (int i = 0; i < n; i++) {
		TRY(fi_endpoint(dom, info, &ep[i], NULL));
		TRY(fi_ep_bind(ep[i], &av->fid, 0));
		TRY(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV));
		TRY(fi_enable(ep[i]));
	}
	r1 = rss_kib();
	for (int i = 0; i < n; i++)
		TRY(fi_recv(rx, in + (size_t)i * 64, 64, NULL, FI_ADDR_UNSPEC, NULL));
	while (sent < n) {
		ssize_t r = fi_send(ep[sent], msg, sizeof(msg), NULL, to, NULL);
		struct fi_cq_entry e[64];

		if (!r)
			sent++;
		else if (r != -FI_EAGAIN)
			TRY(r);
		while ((r = fi_cq_read(rcq, e, 64)) > 0)
			got += (int)r;
		fi_cq_read(cq, e, 64);
	}
	for (long spins = 0; got < n && spins < 100000000L; spins++) {
		struct fi_cq_entry e[64];
		ssize_t r = fi_cq_read(rcq, e, 64);

		if (r > 0)
			got += (int)r;
		fi_cq_read(cq, e, 64);
	}
	r2 = rss_kib();
	printf("epmem,%s,%d,%ld,%.1f,%ld,%.1f,%ld\n", prov, n, r0, (double)(r1 - r0) / n,
	       r1, (double)(r2 - r0) / n, r2);
	if (got != n) {
		fprintf(stderr, "ep_memory: %d of %d messages received\n", got, n);
		return 1;
	}
	return 0;
}
