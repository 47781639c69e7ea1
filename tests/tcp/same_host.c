/* same_host.c - tcp's RDM endpoints reach same-host peers through shared
 * memory (docs/providers/tcp.md), and nothing else changes.  Every process
 * of a group sends every other one messages of sizes across both links'
 * protocols (inline, bounce buffer, eager, rendezvous with cross-memory
 * copies), received through FI_ADDR_UNSPEC and directed receives; each
 * receiver checks contents, per-sender order and that FI_SOURCE names the
 * sender by the address in its AV.  Then each process reads its own log
 * (FI_LOG_LEVEL=info, stderr kept in a file while the endpoint lives),
 * which must name, for each peer, the link the layout below expects.
 *
 * Layouts:
 *  - one host (no argument): four processes, three with FI_TCP_ENABLE_SHM=1
 *    and one with 0.  Those with it on say "shared memory" for each other
 *    and "network (no offer)" for the one without, which says nothing of
 *    the kind (all its traffic is TCP's).
 *  - two hosts ("two_hosts", as root, under tests/tcp/two_hosts.sh, which
 *    makes network namespaces LOOM_NS_A and LOOM_NS_B joined by a veth
 *    pair): ranks 0 and 1 in A and ranks 2 and 3 in B, each pair sharing a
 *    /dev/shm of its own (a tmpfs in a mount namespace of its own); rank 4
 *    in A with a /dev/shm of its own.  Pairs share memory; across the hosts
 *    "network (another host...)"; rank 4 and A's pair "network (its region
 *    cannot be opened...)": the fallback when /dev/shm is not shared. */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define MAXP   5
#define ROUNDS 3
#define TMO    20000

static const size_t sizes[] = {8, 300, 70000, 1u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NMSG   ((int)(ROUNDS * NSIZES))

/* Where each rank runs: its host, its /dev/shm, FI_TCP_ENABLE_SHM. */
static struct layout {
	int nprocs;
	int host[MAXP], shm[MAXP];
	bool on[MAXP];
} L;

static const struct layout one_host = {4, {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 0}};
static const struct layout two_hosts = {5, {0, 0, 1, 1, 0}, {0, 0, 1, 1, 2}, {1, 1, 1, 1, 1}};

/* What rank r's log says of peer s: NULL for nothing (r has it off). */
static const char *expect(int r, int s)
{
	if (!L.on[r])
		return NULL;
	if (!L.on[s])
		return "network (no offer)";
	if (L.host[r] != L.host[s])
		return "network (another host";
	if (L.shm[r] != L.shm[s])
		return "network (its region cannot be opened";
	return "shared memory";
}

static uint64_t seed_of(int src, int dst, int i)
{
	return (uint64_t)src * 100000 + (uint64_t)dst * 1000 + (uint64_t)i + 1;
}

/* Every message of every other rank: ours in order from each sender, whole,
 * with FI_SOURCE its AV address.  Every other message is taken by a
 * receive directed to the sender it should come from. */
static void exchange(struct et_ep *e)
{
	static char sbuf[MAXP][1u << 20], rbuf[1u << 20];
	int next[MAXP] = {0};
	struct fi_cq_tagged_entry c;
	fi_addr_t src;

	/* Each round: one message to every other rank (its own buffer),
	 * then one from every other rank, then the sends' completions (a
	 * rendezvous completes once its receiver took it). */
	for (int i = 0; i < NMSG; i++) {
		size_t len = sizes[i % NSIZES];

		for (int d = 0; d < L.nprocs; d++) {
			ssize_t r;

			if (d == e->rank)
				continue;
			et_fill(sbuf[d], len, seed_of(e->rank, d, i));
			do {
				r = fi_tsend(e->ep, sbuf[d], len, NULL, e->addr[d],
				             (uint64_t)e->rank << 32 | (uint64_t)i, NULL);
				if (r == -FI_EAGAIN)
					et_progress(e);
			} while (r == -FI_EAGAIN);
			CHECK_INT(r, 0);
		}
		for (int k = 0; k < L.nprocs - 1; k++) {
			int s = (e->rank + 1 + k) % L.nprocs, n;
			/* Every other one directed to the sender it must come from. */
			fi_addr_t from = (i + k) % 2 ? e->addr[s] : FI_ADDR_UNSPEC;
			uint64_t tag = (uint64_t)s << 32, ignore = 0xffffffffu;

			CHECK_INT(fi_trecv(e->ep, rbuf, sizeof(rbuf), NULL, from, tag, ignore, NULL),
			          0);
			if (et_read(e->rxcq, &c, &src, NULL, NULL, TMO) != 1) {
				CHECK(0);
				return;
			}
			n = (int)(c.tag & 0xffffffffu);
			CHECK_INT(c.tag >> 32, s);
			CHECK_INT(src, e->addr[s]);
			CHECK_INT(n, next[s]); /* per-sender order */
			CHECK_INT(c.len, sizes[n % NSIZES]);
			CHECK_INT(et_verify(rbuf, sizes[n % NSIZES], seed_of(s, e->rank, n)),
			          (size_t)-1);
			next[s] = n + 1;
		}
		for (int k = 0; k < L.nprocs - 1; k++)
			CHECK_INT(et_read(e->txcq, &c, NULL, NULL, NULL, TMO), 1);
	}
	for (int s = 0; s < L.nprocs; s++)
		if (s != e->rank)
			CHECK_INT(next[s], NMSG);
}

/* Does the log at path have a line saying what goes to name goes through
 * how ("shared memory" or "network")? */
static bool log_says(const char *path, const char *name, const char *how)
{
	char line[1024], want[256];
	FILE *f = fopen(path, "r");
	bool found = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), "to %s: %s", name, how);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

static bool log_has(const char *path, const char *what)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

/* stderr into the file at path (the library's log goes there): 2, or -1. */
static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	if (dup2(fd, 2) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return 2;
}

/* Two hosts: into the rank's network namespace, its interface and address
 * for the endpoint, and a /dev/shm shared with the ranks of its group (the
 * group's first rank mounts it in a mount namespace the others join).
 * Collective.  0 or -1. */
static int enter_host(int rank)
{
	const char *h = L.host[rank] ? "B" : "A";
	char var[16], path[128];
	pid_t pids[ET_MAX_PROCS * ET_SLOT / sizeof(pid_t)], me = getpid();
	int lead = rank, fd, ret = 0;

	snprintf(var, sizeof(var), "LOOM_NS_%s", h);
	snprintf(path, sizeof(path), "/var/run/netns/%s", getenv(var) ? getenv(var) : "");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "rank %d: cannot enter %s\n", rank, path);
		ret = -1;
	}
	if (fd >= 0)
		close(fd);
	snprintf(var, sizeof(var), "LOOM_IF_%s", h);
	setenv("FI_TCP_IFACE", getenv(var) ? getenv(var) : "", 1);
	snprintf(var, sizeof(var), "LOOM_IP_%s", h);
	setenv("LOOM_TEST_NODE", getenv(var) ? getenv(var) : "", 1);
	while (lead > 0 && L.shm[lead - 1] == L.shm[rank])
		lead--;
	if (!ret && lead == rank &&
	    (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	     mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777"))) {
		perror("a /dev/shm of its own");
		ret = -1;
	}
	if (et_allgather(&me, sizeof(me), pids))
		return -1;
	if (!ret && lead != rank) {
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt",
		         (int)pids[lead * ET_SLOT / sizeof(pid_t)]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNS)) {
			perror(path);
			ret = -1;
		}
		if (fd >= 0)
			close(fd);
	}
	return ret;
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.split_cq = true};
	struct et_ep e;
	char path[64];
	int err = dup(2), fd;
	char names[ET_MAX_PROCS][ET_SLOT];

	(void)nprocs;
	if (arg && enter_host(rank))
		return 2;
	snprintf(path, sizeof(path), "/tmp/loom-same-host-%d.log", (int)getpid());
	fd = err < 0 ? -1 : open_log(path);
	CHECK(fd >= 0);
	setenv("FI_TCP_ENABLE_SHM", L.on[rank] ? "1" : "0", 1);
	if (fd < 0 || et_open(&e, &o)) {
		if (err >= 0)
			dup2(err, 2);
		return 2;
	}
	exchange(&e);
	CHECK_INT(et_barrier(), 0); /* every peer has read what it was sent */
	memcpy(names, e.peer_name, sizeof(names)); /* et_close clears e */
	CHECK_INT(et_close(&e), 0);
	fflush(stderr);
	dup2(err, 2); /* the checks below print where the runner sees them */
	close(err);
	for (int r = 0; r < L.nprocs; r++) {
		const char *want = expect(rank, r);

		if (r == rank)
			continue;
		if (!want) {
			CHECK(!log_says(path, names[r], "shared memory"));
			CHECK(!log_says(path, names[r], "network"));
		} else if (!log_says(path, names[r], want)) {
			fprintf(stderr, "rank %d: its log does not say '%s' for %s\n", rank, want,
			        names[r]);
			CHECK(0);
		}
	}
	/* The library warned of nothing on the way. */
	CHECK(!log_has(path, "<warn>"));
	if (check_failures)
		fprintf(stderr, "rank %d: its log is %s\n", rank, path);
	else
		unlink(path);
	return check_done();
}

int main(int argc, char **argv)
{
	bool two = argc > 1 && !strcmp(argv[1], "two_hosts");

	L = two ? two_hosts : one_host;
	setenv("FI_LOG_LEVEL", "info", 1);
	setenv("LOOM_TEST_PROV", "tcp", 1);
	return et_run(two ? "tcp two hosts: shared memory within each, the network between"
	                  : "tcp same host: shared memory between peers that offer it",
	              L.nprocs, 120, proc, two ? &L : NULL, 0) != 0;
}
