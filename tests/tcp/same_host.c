/* same_host.c - tcp's RDM endpoints reach same-host peers through shared
 * memory (docs/providers/tcp.md), and nothing else changes: four processes
 * on one host, three with FI_TCP_ENABLE_SHM=1 and one with 0, send every
 * other one messages of sizes across both links' protocols (inline, bounce
 * buffer, eager, rendezvous with cross-memory copies), received through
 * FI_ADDR_UNSPEC and directed receives.  Each receiver checks contents,
 * per-sender order and that FI_SOURCE names the sender by the address in
 * its AV.  Then each process reads its own log (FI_LOG_LEVEL=info, stderr
 * kept in a file while the endpoint lives): a process with the parameter on
 * says "shared memory" for each peer that has it on too and "network" for
 * the one that has not; the one with it off says nothing of the kind (all
 * its traffic is TCP's). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define NPROCS 4
#define OFF    3 /* the rank with FI_TCP_ENABLE_SHM=0 */
#define ROUNDS 3
#define TMO    20000

static const size_t sizes[] = {8, 300, 70000, 1u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NMSG   ((int)(ROUNDS * NSIZES))

static uint64_t seed_of(int src, int dst, int i)
{
	return (uint64_t)src * 100000 + (uint64_t)dst * 1000 + (uint64_t)i + 1;
}

/* Every message of every other rank: ours in order from each sender, whole,
 * with FI_SOURCE its AV address.  Every other message is taken by a
 * receive directed to the sender it should come from. */
static void exchange(struct et_ep *e)
{
	static char sbuf[NPROCS][1u << 20], rbuf[1u << 20];
	int next[NPROCS] = {0};
	struct fi_cq_tagged_entry c;
	fi_addr_t src;

	/* Each round: one message to every other rank (its own buffer),
	 * then one from every other rank, then the sends' completions (a
	 * rendezvous completes once its receiver took it). */
	for (int i = 0; i < NMSG; i++) {
		size_t len = sizes[i % NSIZES];

		for (int d = 0; d < NPROCS; d++) {
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
		for (int k = 0; k < NPROCS - 1; k++) {
			int s = (e->rank + 1 + k) % NPROCS, n;
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
		for (int k = 0; k < NPROCS - 1; k++)
			CHECK_INT(et_read(e->txcq, &c, NULL, NULL, NULL, TMO), 1);
	}
	for (int s = 0; s < NPROCS; s++)
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

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.split_cq = true};
	struct et_ep e;
	char path[64];
	int err = dup(2), fd, on[NPROCS] = {0}, all[ET_MAX_PROCS * ET_SLOT / sizeof(int)];
	bool mine = rank != OFF;
	char names[ET_MAX_PROCS][ET_SLOT];

	(void)nprocs, (void)arg;
	snprintf(path, sizeof(path), "/tmp/loom-same-host-%d.log", (int)getpid());
	fd = err < 0 ? -1 : open_log(path);
	CHECK(fd >= 0);
	setenv("FI_TCP_ENABLE_SHM", mine ? "1" : "0", 1);
	if (fd < 0 || et_open(&e, &o)) {
		if (err >= 0)
			dup2(err, 2);
		return 2;
	}
	CHECK_INT(et_allgather(&mine, sizeof(mine), all), 0);
	for (int r = 0; r < NPROCS; r++)
		on[r] = all[r * ET_SLOT / sizeof(int)];
	exchange(&e);
	CHECK_INT(et_barrier(), 0); /* every peer has read what it was sent */
	memcpy(names, e.peer_name, sizeof(names)); /* et_close clears e */
	CHECK_INT(et_close(&e), 0);
	fflush(stderr);
	dup2(err, 2); /* the checks below print where the runner sees them */
	close(err);
	for (int r = 0; r < NPROCS; r++) {
		if (r == rank)
			continue;
		if (!mine) {
			CHECK(!log_says(path, names[r], "shared memory"));
			CHECK(!log_says(path, names[r], "network"));
		} else if (on[r]) {
			if (!log_says(path, names[r], "shared memory"))
				fprintf(stderr, "rank %d: no 'shared memory' for %s\n", rank,
				        names[r]);
			CHECK(log_says(path, names[r], "shared memory"));
		} else {
			CHECK(log_says(path, names[r], "network (no offer)"));
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

int main(void)
{
	setenv("FI_LOG_LEVEL", "info", 1);
	setenv("LOOM_TEST_PROV", "tcp", 1);
	return et_run("tcp same host: shared memory between peers that offer it", NPROCS, 120,
	              proc, NULL, 0) != 0;
}
