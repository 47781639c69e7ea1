/* conn_memory.c - what a server of many connections costs: a tcp FI_EP_MSG
 * server accepts -n connections from a client process and posts receive
 * buffers, either -b of them on each connection (-x own) or -n of them on
 * one shared receive context every connection is bound to (-x srx); then
 * the client sends one message on each connection and the server takes
 * them all.  Prints the server's resident memory before the connections,
 * once they are up with their buffers posted, and the bytes of receive
 * buffers it posted, as CSV (bench,mode,conns,buffers,buf_size,
 * rss_before_kib,rss_kib,per_conn_kib,buffer_kib).  Public API only. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
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
#include <rdma/fi_eq.h>

#include "try.h"

#define TMO_MS 30000

static int nconn = 1000, nbuf = 16;
static size_t bufsz = 4096;
static bool use_srx;

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

#define TRY(call) BENCH_TRY("conn_memory", #call, call)

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
};

static const char *who = "server";

static int open_side(struct side *s, const char *node, const char *port, uint64_t flags)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_eq_attr eqa = {.size = 4096, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {
	    .format = FI_CQ_FORMAT_CONTEXT, .size = 8192, .wait_obj = FI_WAIT_UNSPEC};

	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG;
	h->addr_format = FI_SOCKADDR_IN;
	if (use_srx)
		h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	TRY(fi_getinfo(FI_VERSION(1, 17), node, port, flags, h, &s->info));
	fi_freeinfo(h);
	TRY(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	TRY(fi_eq_open(s->fabric, &eqa, &s->eq, NULL));
	TRY(fi_domain(s->fabric, s->info, &s->domain, NULL));
	TRY(fi_cq_open(s->domain, &cqa, &s->cq, NULL));
	return 0;
}

/* The next CM event, which must be want; its info (CONNREQ) in *info. */
static int cm_event(struct fid_eq *eq, uint32_t want, struct fi_info **info)
{
	struct fi_eq_cm_entry e;
	uint32_t event;
	ssize_t n = fi_eq_sread(eq, &event, &e, sizeof(e), TMO_MS, 0);

	if (n != sizeof(e) || event != want) {
		fprintf(stderr, "%s: CM event %zd/%u, wanted %u\n", who, n, event, want);
		return 1;
	}
	if (info)
		*info = e.info;
	return 0;
}

/* Wait for n completions on cq. */
static int drain(struct fid_cq *cq, int n)
{
	struct fi_cq_entry e[64];

	while (n > 0) {
		ssize_t r = fi_cq_sread(cq, e, 64, NULL, TMO_MS);

		if (r < 0) {
			fprintf(stderr, "%s: fi_cq_sread = %zd with %d to go\n", who, r,
			        n);
			return 1;
		}
		n -= (int)r;
	}
	return 0;
}

static int server(int out_fd)
{
	struct side s = {0};
	struct fid_pep *pep;
	struct fid_ep *srx = NULL, **ep = calloc((size_t)nconn, sizeof(*ep));
	size_t nposted = use_srx ? (size_t)nconn : (size_t)nconn * nbuf;
	char *bufs = malloc(nposted * bufsz);
	struct sockaddr_in a;
	size_t alen = sizeof(a);
	long before, after;
	size_t k = 0;

	if (open_side(&s, "127.0.0.1", "0", FI_SOURCE))
		return 1;
	TRY(fi_passive_ep(s.fabric, s.info, &pep, NULL));
	TRY(fi_pep_bind(pep, &s.eq->fid, 0));
	TRY(fi_listen(pep));
	TRY(fi_getname(&pep->fid, &a, &alen));
	before = rss_kib();
	if (use_srx) {
		TRY(fi_srx_context(s.domain, s.info->rx_attr, &srx, NULL));
		for (; k < nposted; k++)
			TRY(fi_recv(srx, bufs + k * bufsz, bufsz, NULL, 0, NULL));
	}
	if (write(out_fd, &a.sin_port, sizeof(a.sin_port)) != sizeof(a.sin_port))
		return 1;
	for (int i = 0; i < nconn; i++) {
		struct fi_info *req;

		if (cm_event(s.eq, FI_CONNREQ, &req))
			return 1;
		TRY(fi_endpoint(s.domain, req, &ep[i], NULL));
		fi_freeinfo(req);
		TRY(fi_ep_bind(ep[i], &s.eq->fid, 0));
		TRY(fi_ep_bind(ep[i], &s.cq->fid, FI_TRANSMIT | FI_RECV));
		if (srx)
			TRY(fi_ep_bind(ep[i], &srx->fid, 0));
		TRY(fi_enable(ep[i]));
		for (int b = 0; !srx && b < nbuf; b++, k++)
			TRY(fi_recv(ep[i], bufs + k * bufsz, bufsz, NULL, 0, NULL));
		TRY(fi_accept(ep[i], NULL, 0));
		if (cm_event(s.eq, FI_CONNECTED, NULL))
			return 1;
	}
	after = rss_kib();
	if (drain(s.cq, nconn))
		return 1;
	printf("connmem,%s,%d,%zu,%zu,%ld,%ld,%.1f,%zu\n", use_srx ? "srx" : "own", nconn,
	       nposted, bufsz, before, after, (double)(after - before) / nconn,
	       nposted * bufsz / 1024);
	fflush(stdout);
	for (int i = 0; i < nconn; i++)
		fi_close(&ep[i]->fid);
	if (srx)
		fi_close(&srx->fid);
	return 0;
}

static int client(uint16_t port_be)
{
	struct side s = {0};
	struct fid_ep **ep = calloc((size_t)nconn, sizeof(*ep));
	char port[16], msg[64] = "hello";

	who = "client";
	snprintf(port, sizeof(port), "%u", ntohs(port_be));
	if (open_side(&s, "127.0.0.1", port, 0))
		return 1;
	for (int i = 0; i < nconn; i++) {
		TRY(fi_endpoint(s.domain, s.info, &ep[i], NULL));
		TRY(fi_ep_bind(ep[i], &s.eq->fid, 0));
		TRY(fi_ep_bind(ep[i], &s.cq->fid, FI_TRANSMIT | FI_RECV));
		TRY(fi_enable(ep[i]));
		TRY(fi_connect(ep[i], s.info->dest_addr, NULL, 0));
		if (cm_event(s.eq, FI_CONNECTED, NULL))
			return 1;
	}
	for (int i = 0; i < nconn; i++)
		TRY(fi_send(ep[i], msg, sizeof(msg), NULL, 0, NULL));
	if (drain(s.cq, nconn))
		return 1;
	/* The server's receives are done once it says so, by exiting; close
	 * after a moment so nothing is cut short. */
	sleep(1);
	for (int i = 0; i < nconn; i++)
		fi_close(&ep[i]->fid);
	return 0;
}

int main(int argc, char **argv)
{
	int opt, fds[2], st = 0, rc;
	uint16_t port;
	pid_t pid;

	while ((opt = getopt(argc, argv, "n:b:s:x:")) != -1) {
		switch (opt) {
		case 'n':
			nconn = atoi(optarg);
			break;
		case 'b':
			nbuf = atoi(optarg);
			break;
		case 's':
			bufsz = (size_t)atol(optarg);
			break;
		case 'x':
			use_srx = !strcmp(optarg, "srx");
			break;
		default:
			fprintf(stderr,
			        "usage: conn_memory [-n CONNS] [-b BUFS_PER_CONN] "
			        "[-s BUF_SIZE] [-x own|srx]\n");
			return 2;
		}
	}
	/* A few descriptors per connection, on each side. */
	bench_nofile((rlim_t)nconn * 8 + 64);
	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		if (read(fds[0], &port, sizeof(port)) != sizeof(port))
			_exit(1);
		_exit(client(port));
	}
	close(fds[0]);
	rc = server(fds[1]);
	close(fds[1]);
	if (rc)
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
