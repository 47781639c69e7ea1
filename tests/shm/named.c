/* named.c - shm endpoints named by node and service, as client/server
 * programs written for libfabric find each other: the server asks
 * fi_getinfo for (node, service, FI_SOURCE), the client for (node,
 * service) and sends to the dest_addr it gets, with no other exchange.
 * Also: fi_getinfo's source address when no node is given, a name held by
 * another live process (-FI_EADDRINUSE), a name freed by close or left
 * by a killed process (taken again), and the region's protection. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

#include "check.h"
#include "eptest.h"

#define TMO 10000
#define NODE "127.0.0.1"

struct named_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static char service[16];

static int getinfo(const char *node, const char *svc, uint64_t flags, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_SOURCE;
	ret = fi_getinfo(FI_VERSION(1, 17), node, svc, flags, hints, out);
	fi_freeinfo(hints);
	return ret;
}

/* Everything but the endpoint; then the endpoint from info (its
 * fi_endpoint result returned, nothing else left open on failure). */
static int open_ep(struct named_ep *n, struct fi_info *info)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	int ret;

	memset(n, 0, sizeof(*n));
	n->info = info;
	ret = fi_fabric(info->fabric_attr, &n->fabric, NULL);
	if (!ret)
		ret = fi_domain(n->fabric, info, &n->domain, NULL);
	if (!ret)
		ret = fi_av_open(n->domain, &av_attr, &n->av, NULL);
	if (!ret)
		ret = fi_cq_open(n->domain, &cq_attr, &n->cq, NULL);
	if (!ret)
		ret = fi_endpoint(n->domain, info, &n->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(n->ep);
	return ret;
}

static void close_ep(struct named_ep *n)
{
	if (n->ep)
		CHECK_INT(fi_close(&n->ep->fid), 0);
	if (n->cq)
		CHECK_INT(fi_close(&n->cq->fid), 0);
	if (n->av)
		CHECK_INT(fi_close(&n->av->fid), 0);
	if (n->domain)
		CHECK_INT(fi_close(&n->domain->fid), 0);
	if (n->fabric)
		CHECK_INT(fi_close(&n->fabric->fid), 0);
	fi_freeinfo(n->info);
	memset(n, 0, sizeof(*n));
}

static ssize_t wait_one(struct named_ep *n, struct fi_cq_tagged_entry *c, fi_addr_t *src)
{
	struct fi_cq_err_entry err;
	ssize_t r = et_read(n->cq, c, src, &err, NULL, TMO);

	if (r != 1)
		fprintf(stderr, "cq read: %zd (err %d)\n", r, r == -FI_EAVAIL ? err.err : 0);
	return r;
}

/* No node: a source address all the same, and every endpoint opened from
 * that fi_info has its own. */
static void no_node(void)
{
	struct fi_info *info = NULL;
	struct named_ep a, b;
	char na[64], nb[64];
	size_t la = sizeof(na), lb = sizeof(nb);

	CHECK_INT(getinfo(NULL, NULL, 0, &info), 0);
	if (!info)
		return;
	CHECK(info->src_addr && info->src_addrlen > 0);
	CHECK(info->src_addr && !strncmp(info->src_addr, "fi_shm://", 9));
	CHECK_INT(open_ep(&a, info), 0);
	CHECK_INT(open_ep(&b, fi_dupinfo(info)), 0);
	CHECK_INT(fi_getname(&a.ep->fid, na, &la), 0);
	CHECK_INT(fi_getname(&b.ep->fid, nb, &lb), 0);
	CHECK(strcmp(na, nb) != 0);
	close_ep(&a);
	close_ep(&b);
}

/* Is every named region of this user mode 0600 and ours? */
static void named_regions_private(void)
{
	char prefix[32], path[512];
	struct dirent *d;
	struct stat st;
	DIR *dir = opendir("/dev/shm");
	int seen = 0;

	snprintf(prefix, sizeof(prefix), "loom-%u-n-", (unsigned)getuid());
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		if (strncmp(d->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", d->d_name);
		if (stat(path, &st))
			continue;
		seen++;
		CHECK_INT(st.st_mode & 0777, 0600);
		CHECK_INT(st.st_uid, geteuid());
	}
	closedir(dir);
	CHECK(seen > 0);
}

/* A name whose owner was killed is free again. */
static void killed_owner(void)
{
	struct fi_info *info = NULL;
	struct named_ep n;
	pid_t pid;
	int status;

	pid = fork();
	if (pid == 0) {
		struct fi_info *ci = NULL;

		if (getinfo("stale", service, FI_SOURCE, &ci) || open_ep(&n, ci))
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	CHECK(pid > 0);
	CHECK_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_INT(getinfo("stale", service, FI_SOURCE, &info), 0);
	if (!info)
		return;
	CHECK_INT(open_ep(&n, info), 0);
	close_ep(&n);
}

static int server(void)
{
	struct fi_info *info = NULL;
	struct named_ep s, s2;
	struct fi_cq_tagged_entry c;
	char want[64], buf[128], name[64];
	fi_addr_t src = 0, client;
	size_t len = sizeof(name);
	uint64_t reply = 0x5e7e7;

	no_node();
	CHECK_INT(getinfo(NODE, service, FI_SOURCE, &info), 0);
	if (!info)
		return 2;
	snprintf(want, sizeof(want), "fi_ns://%s:%s", NODE, service);
	CHECK_STR(info->src_addr, want);
	CHECK_INT(info->src_addrlen, strlen(want) + 1);
	CHECK(info->dest_addr == NULL);
	CHECK_INT(open_ep(&s, info), 0);
	CHECK_INT(fi_getname(&s.ep->fid, name, &len), 0);
	/* A second endpoint from the same fi_info: the name is the first's,
	 * so it takes a fresh address and works. */
	CHECK_INT(open_ep(&s2, fi_dupinfo(s.info)), 0);
	named_regions_private();
	CHECK_INT(fi_recv(s.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, NULL), 0);
	et_barrier(); /* 1: the name is live */

	/* The client's greeting carries its own address. */
	if (wait_one(&s, &c, &src) == 1) {
		CHECK(c.flags & FI_RECV);
		CHECK_INT(src, FI_ADDR_NOTAVAIL); /* not in our AV yet */
		CHECK(c.len > 9 && !strncmp(buf, "fi_shm://", 9));
		CHECK_INT(fi_av_insert(s.av, buf, 1, &client, 0, NULL), 1);
		CHECK_INT(fi_send(s.ep, &reply, sizeof(reply), NULL, client, NULL), 0);
		if (wait_one(&s, &c, NULL) == 1)
			CHECK(c.flags & FI_SEND);
	}
	et_barrier(); /* 2: the client has its reply, and tried the name */
	close_ep(&s2);
	close_ep(&s);
	et_barrier(); /* 3: the name is free */
	et_barrier(); /* 4: the client took it and let it go */
	killed_owner();
	return check_done();
}

static int client(void)
{
	struct fi_info *info = NULL, *taken = NULL;
	struct named_ep c, t;
	struct fi_cq_tagged_entry e;
	char want[64], name[64];
	size_t len = sizeof(name);
	fi_addr_t srv = FI_ADDR_NOTAVAIL;
	uint64_t reply = 0;

	et_barrier(); /* 1 */
	CHECK_INT(getinfo(NODE, service, 0, &info), 0);
	if (!info)
		return 2;
	snprintf(want, sizeof(want), "fi_ns://%s:%s", NODE, service);
	CHECK_STR(info->dest_addr, want);
	CHECK(info->src_addr != NULL);
	CHECK_INT(open_ep(&c, info), 0);
	/* The text form, packed, as fabtests and the tutorials insert it. */
	CHECK_INT(fi_av_insert(c.av, info->dest_addr, 1, &srv, 0, NULL), 1);
	CHECK_INT(fi_getname(&c.ep->fid, name, &len), 0);
	CHECK_INT(fi_recv(c.ep, &reply, sizeof(reply), NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(fi_send(c.ep, name, len, NULL, srv, NULL), 0);
	for (int got = 0; got < 2;) {
		if (wait_one(&c, &e, NULL) != 1)
			break;
		got++;
	}
	CHECK_INT(reply, 0x5e7e7);

	/* The server's name, while it lives, is not ours to take. */
	CHECK_INT(getinfo(NODE, service, FI_SOURCE, &taken), 0);
	CHECK_INT(open_ep(&t, taken), -FI_EADDRINUSE);
	close_ep(&t);
	et_barrier(); /* 2 */
	et_barrier(); /* 3: closed by its owner: free */
	CHECK_INT(getinfo(NODE, service, FI_SOURCE, &taken), 0);
	CHECK_INT(open_ep(&t, taken), 0);
	close_ep(&t);
	close_ep(&c);
	et_barrier(); /* 4 */
	return check_done();
}

static int proc(int rank, int nprocs, void *arg)
{
	(void)nprocs;
	snprintf(service, sizeof(service), "%d", *(int *)arg);
	return rank == 0 ? server() : client();
}

int main(void)
{
	/* A service of this run alone: tests may run side by side. */
	int svc = 20000 + (int)(getpid() % 40000);

	return et_run("named", 2, 60, proc, &svc, 0);
}
