/* sender_exits.c - nothing lost once a send completes: a process sends
 * messages of each size, reads every send completion, closes its
 * endpoint and exits; the receiver had no packet from it before, posts
 * its receives only after the sender is gone, and gets every message
 * whose send completed, whole, from the sender's address, also through
 * receives directed to the gone sender, and its receive counter counts
 * them.  Sizes cover the inline, bounce-buffer and eager paths of each
 * link, tagged and untagged. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define TMO    10000
#define RECVER 0
#define SENDER 1
#define NMSG   10

/* Sent before the sender exits: what each link completes without the
 * receiver (shm: inline cells and bounce buffers; tcp: eager up to its
 * 64 KiB eager size). */
static const size_t small_shm[] = {1, 64, 240, 256, 4096};
static const size_t small_tcp[] = {1, 64, 240, 256, 4096, 8192, 48 << 10, 64 << 10};
struct sizes {
	const size_t *v;
	size_t n;
};

/* tcp's eager size exactly, ten in a row, with nothing before them. */
static const size_t eager_tcp[] = {64 << 10};
static bool only_eager_size;

static struct sizes small_sizes(void)
{
	if (only_eager_size)
		return (struct sizes){eager_tcp, 1};
	if (!strcmp(et_link(), "tcp"))
		return (struct sizes){small_tcp, sizeof(small_tcp) / sizeof(small_tcp[0])};
	return (struct sizes){small_shm, sizeof(small_shm) / sizeof(small_shm[0])};
}

static uint64_t seed_of(size_t set, size_t s, int i)
{
	return set * 100000 + s * 1000 + (uint64_t)i + 1;
}

/* Sends one at a time (the buffer is refilled for the next), each
 * waited for; stops at the first that does not complete (one that needs
 * the receiver, which is not looking).  Returns how many completed. */
static int send_set(struct et_ep *e, char *buf, struct sizes z)
{
	struct fi_cq_tagged_entry c;
	int done = 0;

	for (size_t s = 0; s < z.n; s++) {
		for (int i = 0; i < NMSG; i++) {
			uint64_t seed = seed_of(0, s, i);
			ssize_t r;

			et_fill(buf, z.v[s], seed);
			do {
				r = i % 2 ? fi_tsend(e->ep, buf, z.v[s], NULL, e->addr[RECVER],
				                     seed, NULL)
				          : fi_send(e->ep, buf, z.v[s], NULL, e->addr[RECVER],
				                    NULL);
				if (r == -FI_EAGAIN)
					et_progress(e);
			} while (r == -FI_EAGAIN);
			CHECK_INT(r, 0);
			if (r || et_read(e->txcq, &c, NULL, NULL, NULL, 2000) != 1)
				return done;
			done++;
		}
	}
	return done;
}

/* The first n messages of z, whole, in order, from the sender. */
static void recv_set(struct et_ep *e, char *buf, struct sizes z, int n)
{
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	int k = 0;

	for (size_t s = 0; s < z.n; s++) {
		for (int i = 0; i < NMSG && k < n; i++, k++) {
			uint64_t seed = seed_of(0, s, i);
			size_t bad;

			/* Every third names the sender, which is gone. */
			fi_addr_t from = i % 3 == 2 ? e->addr[SENDER] : FI_ADDR_UNSPEC;

			memset(buf, 0, z.v[s]);
			if (i % 2)
				CHECK_INT(fi_trecv(e->ep, buf, z.v[s], NULL, from, seed, 0, NULL),
				          0);
			else
				CHECK_INT(fi_recv(e->ep, buf, z.v[s], NULL, from, NULL), 0);
			if (et_read(e->rxcq, &c, &src, NULL, NULL, TMO) != 1) {
				fprintf(stderr, "completed send %d (%zu B) lost\n", k, z.v[s]);
				CHECK(0);
				return;
			}
			CHECK_INT(c.len, z.v[s]);
			CHECK_INT(src, e->addr[SENDER]);
			bad = et_verify(buf, z.v[s], seed);
			if (bad != (size_t)-1) {
				fprintf(stderr, "message %d (%zu B) differs at %zu\n", k, z.v[s],
				        bad);
				CHECK(0);
			}
		}
	}
}

/* Until process pid has exited (a zombie not yet reaped counts).  On tcp
 * the receiver's progress accepts the sender's connection, on udp it
 * acknowledges its packets (manual progress), so it progresses meanwhile, with no receive posted: the
 * messages wait as unexpected ones.  On shm it does nothing: the sender's
 * packets wait in the receiver's region, from a sender it never met. */
static void wait_gone(struct et_ep *e, pid_t pid)
{
	bool progress = et_desc()->answers;

	for (int i = 0; i < 1000 && kill(pid, 0) == 0; i++) {
		if (progress)
			et_progress(e);
		char path[64], st[512];
		const char *p;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (f) {
			p = fgets(st, sizeof(st), f) ? strrchr(st, ')') : NULL;
			fclose(f);
			if (p && p[1] == ' ' && p[2] == 'Z')
				return;
		}
		usleep(10000);
	}
	CHECK(kill(pid, 0) != 0);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.cntrs = true};
	struct et_ep e;
	char *buf = malloc(64 << 10);
	int all[ET_MAX_PROCS * ET_SLOT / sizeof(int)], done = 0;

	(void)nprocs, (void)arg;
	if (!buf || et_open(&e, &o))
		return 2;
	/* No packet has passed between the two before the sender is gone. */
	if (rank == SENDER) {
		done = send_set(&e, buf, small_sizes());
		et_allgather(&done, sizeof(done), all);
		CHECK_INT(et_close(&e), 0);
		free(buf);
		return check_done(); /* and the process exits */
	}
	if (et_desc()->answers) /* the connection accepted, packets acknowledged */
		for (int i = 0; i < 200; i++, usleep(1000))
			et_progress(&e);
	et_allgather(&done, sizeof(done), all);
	done = all[SENDER * ET_SLOT / sizeof(int)];
	/* Most complete at once; how many is the link's business. */
	if (done < (only_eager_size ? NMSG : NMSG * 5))
		fprintf(stderr, "only %d sends completed\n", done);
	CHECK(done >= (only_eager_size ? NMSG : NMSG * 5));
	wait_gone(&e, e.pid[SENDER]);
	recv_set(&e, buf, small_sizes(), done);
	CHECK_INT(fi_cntr_read(e.rcntr), done); /* the receive counter counts them */
	CHECK_INT(et_close(&e), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	int ret = et_run("sender_exits", 2, 120, proc, NULL, 0);

	if (strcmp(et_link(), "tcp"))
		return ret;
	only_eager_size = true;
	return et_run("sender_exits (64 KiB)", 2, 120, proc, NULL, 0) || ret;
}
