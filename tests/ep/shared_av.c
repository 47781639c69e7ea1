/* shared_av.c - named address vectors (man fi_av: attr->name) across four
 * processes: rank 0 creates the AV and inserts every rank's address; the
 * others open it by name, read-only, and find the same fi_addr values
 * (through attr->map_addr as well), the same addresses (fi_av_lookup),
 * and no way to change it.  Every rank then sends to every other through
 * it, and each arrival names its sender by that shared fi_addr
 * (FI_SOURCE).  A process killed while it holds the AV open leaves it
 * usable; a removal by rank 0 is seen by the others; and the AV goes when
 * the last live user closes it.  Misuse (another type, read-only without
 * a name, read-only of an AV that does not exist, a map_addr that cannot
 * hold it) is an error, and another user's process never reaches it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define NPROC 4
#define TMO   20000

struct ctx {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t *map;
};

static int open_ep(struct ctx *c, char *name, size_t len)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	const char *node = getenv("LOOM_TEST_NODE");
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(et_prov());
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = FI_ADDR_STR;
	hints->caps = FI_MSG | FI_SOURCE | FI_SHARED_AV;
	ret = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints,
	                 &c->info);
	fi_freeinfo(hints);
	OKR(ret);
	CHECK(c->info->caps & FI_SHARED_AV);
	CHECK(c->info->domain_attr->caps & FI_SHARED_AV);
	OKR(fi_fabric(c->info->fabric_attr, &c->fabric, NULL));
	OKR(fi_domain(c->fabric, c->info, &c->domain, NULL));
	OKR(fi_cq_open(c->domain, &cqa, &c->cq, NULL));
	OKR(fi_endpoint(c->domain, c->info, &c->ep, NULL));
	OKR(fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV));
	return fi_getname(&c->ep->fid, name, &len);
}

/* The named AV: created (rank 0) or opened read-only. */
static int open_av(struct ctx *c, const char *avname, bool create)
{
	struct fi_av_attr a = {.type = FI_AV_TABLE, .name = avname,
	                       .flags = create ? 0 : FI_READ, .count = 64};

	OKR(fi_av_open(c->domain, &a, &c->av, NULL));
	CHECK(a.map_addr != NULL);
	c->map = a.map_addr;
	return 0;
}

static int close_all(struct ctx *c);

/* Open avname (open already at c->map) read-only with map_addr want: the man page leaves where a
 * shared AV lands to the provider, so a want that cannot hold it (inside
 * a mapping, or off the page offset the array needs) is -FI_EINVAL, and
 * a free one holds the same fi_addr values as the creator's. */
static int other_map_addr(struct ctx *c, const char *avname, const fi_addr_t *shared)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t span = 4 << 20;
	uintptr_t off = (uintptr_t)c->map & (uintptr_t)(page - 1);
	char *hole = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct fi_av_attr a = {.type = FI_AV_TABLE, .name = avname, .flags = FI_READ};
	struct fid_av *av = NULL;
	int local;

	CHECK(hole != MAP_FAILED);
	if (hole == MAP_FAILED)
		return 1;
	a.map_addr = hole + off; /* taken: the hole is still mapped */
	CHECK_INT(fi_av_open(c->domain, &a, &av, NULL), -FI_EINVAL);
	a.map_addr = (char *)&local; /* the stack */
	CHECK_INT(fi_av_open(c->domain, &a, &av, NULL), -FI_EINVAL);
	munmap(hole, span);
	a.map_addr = hole + off + sizeof(fi_addr_t); /* free, off its page offset */
	CHECK_INT(fi_av_open(c->domain, &a, &av, NULL), -FI_EINVAL);
	a.map_addr = hole + off; /* free, and another than the creator's */
	CHECK_INT(fi_av_open(c->domain, &a, &av, NULL), 0);
	if (!av)
		return 1;
	CHECK(a.map_addr == hole + off);
	for (int i = 0; i < NPROC; i++) {
		char got[ET_SLOT];
		size_t len = sizeof(got);

		CHECK_INT(((fi_addr_t *)a.map_addr)[i], shared[i]);
		CHECK_INT(fi_av_lookup(av, shared[i], got, &len), 0);
	}
	CHECK_INT(fi_close(&av->fid), 0);
	return 0;
}

/* A process of another user that names the same AV reaches its own
 * user's AV of that name, never ours: read-only there is none, and one
 * it creates holds none of our addresses.  Needs root to become that
 * user (setuid); CI runs as root. */
static int other_user(const char *avname, const fi_addr_t *shared)
{
	pid_t pid;
	int st = 0;

	if (getuid() != 0) {
		printf("# shared_av: not root, the other user's open is not tried\n");
		return 0;
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ctx d = {0};
		char n[ET_SLOT], got[ET_SLOT];
		size_t len = sizeof(got);
		struct fi_av_attr ro = {.type = FI_AV_TABLE, .name = avname, .flags = FI_READ};
		struct fi_av_attr rw = {.type = FI_AV_TABLE, .name = avname};
		struct fid_av *av = NULL;
		int bad = 0;

		if (setgid(65534) || setuid(65534) || getuid() != 65534)
			_exit(10);
		if (open_ep(&d, n, sizeof(n)))
			_exit(11);
		bad += fi_av_open(d.domain, &ro, &av, NULL) != -FI_ENOENT;
		bad += fi_av_open(d.domain, &rw, &av, NULL) != 0 || !av;
		if (av) {
			bad += fi_av_lookup(av, shared[0], got, &len) != -FI_EINVAL;
			bad += ((fi_addr_t *)rw.map_addr)[0] != FI_ADDR_NOTAVAIL;
			fi_close(&av->fid);
		}
		close_all(&d);
		_exit(bad);
	}
	CHECK_INT(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_INT(WEXITSTATUS(st), 0);
	return 0;
}

static int close_all(struct ctx *c)
{
	if (c->ep)
		CHECK_INT(fi_close(&c->ep->fid), 0);
	if (c->av)
		CHECK_INT(fi_close(&c->av->fid), 0);
	if (c->cq)
		CHECK_INT(fi_close(&c->cq->fid), 0);
	if (c->domain)
		CHECK_INT(fi_close(&c->domain->fid), 0);
	if (c->fabric)
		CHECK_INT(fi_close(&c->fabric->fid), 0);
	fi_freeinfo(c->info);
	return 0;
}

/* A child that opens the AV and is killed while holding it. */
static void killed_holder(struct ctx *c, const char *avname)
{
	int fds[2];
	pid_t pid;
	char ok = 0;

	CHECK_INT(pipe(fds), 0);
	pid = fork();
	if (pid == 0) {
		struct fid_av *av = NULL;
		struct fi_av_attr a = {.type = FI_AV_TABLE, .name = avname, .flags = FI_READ};

		ok = fi_av_open(c->domain, &a, &av, NULL) == 0 ? 1 : 2;
		if (write(fds[1], &ok, 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	CHECK(pid > 0);
	CHECK_INT(read(fds[0], &ok, 1), 1);
	CHECK_INT(ok, 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fds[0]);
	close(fds[1]);
}

static int body(int rank, int nprocs, void *arg)
{
	struct ctx c = {0};
	char name[ET_SLOT], all[NPROC * ET_SLOT], avname[64], buf[NPROC][64], msg[NPROC][64];
	char packed[NPROC * ET_SLOT];
	fi_addr_t fa[NPROC], shared[NPROC];
	size_t off = 0, len;
	int32_t pid0;

	(void)nprocs, (void)arg;
	memset(name, 0, sizeof(name));
	if (open_ep(&c, name, sizeof(name))) {
		et_allgather("", 1, all);
		return 1;
	}
	CHECK_INT(et_allgather(name, strlen(name) + 1, all), 0);
	pid0 = rank == 0 ? (int32_t)getpid() : 0;
	{
		char pids[NPROC * ET_SLOT];

		CHECK_INT(et_allgather(&pid0, sizeof(pid0), pids), 0);
		memcpy(&pid0, pids, sizeof(pid0));
	}
	snprintf(avname, sizeof(avname), "loom-test-shared-av-%d", (int)pid0);

	if (rank == 0) {
		struct fid_av *bad = NULL;
		struct fi_av_attr other = {.type = FI_AV_MAP, .name = avname};
		struct fi_av_attr ro = {.type = FI_AV_TABLE, .flags = FI_READ};
		struct fi_av_attr none = {.type = FI_AV_TABLE, .flags = FI_READ,
		                          .name = "loom-test-shared-av-none"};

		/* Read-only needs a name, and an AV that exists. */
		CHECK_INT(fi_av_open(c.domain, &ro, &bad, NULL), -FI_EINVAL);
		CHECK(fi_av_open(c.domain, &none, &bad, NULL) < 0);
		if (open_av(&c, avname, true))
			return 1;
		/* The same name as another type: not this AV. */
		CHECK_INT(fi_av_open(c.domain, &other, &bad, NULL), -FI_EINVAL);
		for (int i = 0; i < NPROC; i++) {
			strcpy(packed + off, all + i * ET_SLOT);
			off += strlen(all + i * ET_SLOT) + 1;
		}
		CHECK_INT(fi_av_insert(c.av, packed, NPROC, fa, 0, NULL), NPROC);
		for (int i = 0; i < NPROC; i++)
			CHECK_INT(c.map[i], fa[i]);
	}
	CHECK_INT(et_allgather(fa, sizeof(fa), all + 0), 0);
	memcpy(shared, all, sizeof(shared)); /* rank 0's */
	if (rank == 2)
		other_user(avname, shared);
	if (rank != 0 && open_av(&c, avname, false))
		return 1;
	if (rank == 1) /* a second open of it, elsewhere */
		other_map_addr(&c, avname, shared);
	/* The same fi_addr values and addresses everywhere. */
	CHECK_INT(et_allgather(name, strlen(name) + 1, all), 0);
	for (int i = 0; i < NPROC; i++) {
		char got[ET_SLOT];

		len = sizeof(got);
		CHECK_INT(c.map[i], shared[i]);
		CHECK_INT(fi_av_lookup(c.av, shared[i], got, &len), 0);
		CHECK_STR(got, all + i * ET_SLOT);
	}
	if (rank != 0) {
		fi_addr_t x;

		CHECK_INT(fi_av_insert(c.av, name, 1, &x, 0, NULL), -FI_EPERM);
		CHECK_INT(fi_av_remove(c.av, &shared[0], 1, 0), -FI_EPERM);
	}
	OKR(fi_ep_bind(c.ep, &c.av->fid, 0));
	OKR(fi_enable(c.ep));
	if (rank == 1)
		killed_holder(&c, avname);

	/* Every rank to every other, through the shared fi_addr values. */
	for (int i = 0, k = 0; i < NPROC; i++)
		if (i != rank)
			OKR(fi_recv(c.ep, buf[k++], sizeof(buf[0]), NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_INT(et_barrier(), 0);
	for (int i = 0; i < NPROC; i++) {
		if (i == rank)
			continue;
		snprintf(msg[i], sizeof(msg[i]), "from %d to %d", rank, i);
		for (;;) {
			/* msg[i] stays as it is until its completion. */
			ssize_t r = fi_send(c.ep, msg[i], strlen(msg[i]) + 1, NULL, shared[i],
			                    NULL);

			if (r != -FI_EAGAIN) {
				CHECK_INT(r, 0);
				break;
			}
			fi_cq_read(c.cq, NULL, 0);
		}
	}
	for (int got = 0, sent = 0; got < NPROC - 1 || sent < NPROC - 1;) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		char want[64];
		int from;
		ssize_t r = et_read(c.cq, &e, &src, NULL, NULL, TMO);

		CHECK_INT(r, 1);
		if (r != 1)
			break;
		if (e.flags & FI_SEND) {
			sent++;
			continue;
		}
		got++;
		CHECK_INT(sscanf(e.buf, "from %d", &from), 1);
		CHECK(from >= 0 && from < NPROC && from != rank);
		if (from < 0 || from >= NPROC)
			continue;
		CHECK_INT(src, shared[from]);
		snprintf(want, sizeof(want), "from %d to %d", from, rank);
		CHECK_STR((char *)e.buf, want);
	}
	CHECK_INT(et_barrier(), 0);

	/* A removal is seen by every process. */
	if (rank == 0)
		CHECK_INT(fi_av_remove(c.av, &shared[3], 1, 0), 0);
	CHECK_INT(et_barrier(), 0);
	{
		char got[ET_SLOT];

		len = sizeof(got);
		CHECK_INT(fi_av_lookup(c.av, shared[3], got, &len), -FI_EINVAL);
		CHECK_INT(c.map[3], FI_ADDR_NOTAVAIL);
		len = sizeof(got);
		CHECK_INT(fi_av_lookup(c.av, shared[2], got, &len), 0);
	}
	CHECK_INT(et_barrier(), 0);
	close_all(&c);
	CHECK_INT(et_barrier(), 0);
	/* Every live user closed it (one died holding it): gone. */
	if (rank == 0) {
		struct ctx d = {0};
		char n2[ET_SLOT];
		struct fid_av *av = NULL;
		struct fi_av_attr a = {.type = FI_AV_TABLE, .name = avname, .flags = FI_READ};

		if (!open_ep(&d, n2, sizeof(n2))) {
			CHECK(fi_av_open(d.domain, &a, &av, NULL) < 0);
			if (av)
				fi_close(&av->fid);
		}
		close_all(&d);
	}
	return check_done();
}

int main(void)
{
	return et_run("shared_av", NPROC, 60, body, NULL, 0);
}
