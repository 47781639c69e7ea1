/* reopen.c - a peer that closes its endpoint and opens a new one at the
 * same address, in the same process (its pid lives on), as a server that
 * restarts its endpoint does.  The side that stayed removes the old AV
 * entry and inserts the address again; then the two talk, a small (eager)
 * and a large (rendezvous) message each way, each naming its sender and
 * checked.  Rounds alternate who speaks first: the one that stayed, or
 * the new endpoint.
 *
 * What a link cannot know yet may fail, and only that: the first send of
 * the one that stayed may go where the old endpoint was, if its closing
 * has not reached us (a TCP connection's end travels behind the name the
 * application learnt by other means); then it fails with FI_EIO or
 * FI_ENOTCONN, is never delivered, and sent again it reaches the new
 * endpoint.  Anything else must succeed at once, and the new endpoint
 * gets each message once.  On shared memory (shm, and the providers'
 * same-host route) the old endpoint's region says it closed, so there
 * nothing fails. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define TMO    10000
#define ROUNDS 6
#define STAYS  0
#define MOVES  1

static const size_t sizes[] = {64, 1 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* One message of each size to `to`.  may_fail: the first may fail as
 * the opening comment allows, and is then sent again.  Returns how many
 * sends failed. */
static int send_all(struct et_ep *e, fi_addr_t to, char *buf, uint64_t seed, bool may_fail)
{
	int failed = 0;

	for (size_t s = 0; s < NSIZES; s++) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r;
		int ctx;

		et_fill(buf, sizes[s], seed + s);
		for (;;) {
			do {
				r = fi_send(e->ep, buf, sizes[s], NULL, to, &ctx);
				if (r == -FI_EAGAIN)
					et_progress(e);
			} while (r == -FI_EAGAIN);
			CHECK_INT(r, 0);
			r = et_read(e->txcq, &c, NULL, &err, NULL, TMO);
			if (r != -FI_EAVAIL)
				break;
			fprintf(stderr, "rank %d: send of %zu B failed: %d (%s)\n", e->rank,
			        sizes[s], err.err, fi_strerror(err.err));
			CHECK(err.op_context == &ctx);
			CHECK(err.err == FI_EIO || err.err == FI_ENOTCONN);
			failed++;
			if (!may_fail || s || failed > 1)
				break;
		}
		CHECK_INT(r, 1);
		if (r != 1)
			return failed + 1;
		CHECK(c.op_context == &ctx);
	}
	return failed;
}

static void recv_all(struct et_ep *e, fi_addr_t from, char *buf, uint64_t seed)
{
	for (size_t s = 0; s < NSIZES; s++) {
		struct fi_cq_tagged_entry c;
		fi_addr_t src = FI_ADDR_UNSPEC;
		ssize_t r;
		int ctx;

		memset(buf, 0, sizes[s]);
		CHECK_INT(fi_recv(e->ep, buf, sizes[s], NULL, FI_ADDR_UNSPEC, &ctx), 0);
		r = et_read(e->rxcq, &c, &src, NULL, NULL, TMO);
		CHECK_INT(r, 1);
		if (r != 1) {
			fprintf(stderr, "rank %d: no message of %zu B\n", e->rank, sizes[s]);
			return;
		}
		CHECK(c.op_context == &ctx);
		CHECK_INT(c.len, sizes[s]);
		CHECK_INT(src, from);
		CHECK_INT(et_verify(buf, sizes[s], seed + s), (size_t)-1);
	}
}

/* The two talk, `first` speaking first: a message of each size each way,
 * then none more (a failed send delivered after all would be one). */
static void talk(struct et_ep *e, int first, char *buf, uint64_t seed)
{
	int peer = e->rank == STAYS ? MOVES : STAYS;

	if (e->rank == first) {
		int failed = send_all(e, e->addr[peer], buf, seed, e->rank == STAYS);

		if (!strcmp(et_link(), "shm"))
			CHECK_INT(failed, 0);
		recv_all(e, e->addr[peer], buf, seed + 100);
	} else {
		recv_all(e, e->addr[peer], buf, seed);
		CHECK_INT(send_all(e, e->addr[peer], buf, seed + 100, false), 0);
	}
	CHECK_INT(et_stray(e, 20), 0);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {0};
	struct et_ep e;
	char name[ET_SLOT], peer_name[ET_SLOT];
	char *buf = malloc(sizes[1]);

	(void)nprocs, (void)arg;
	if (!buf || et_open(&e, &o))
		return 2;
	talk(&e, STAYS, buf, 1);
	for (int round = 0; round < ROUNDS && !check_failures; round++) {
		uint64_t seed = 1000 * (uint64_t)(round + 1);

		if (rank == MOVES) {
			/* Away and back at the same address. */
			struct et_opts again = {.setname = name};

			memcpy(name, e.name, sizeof(name));
			memcpy(peer_name, e.peer_name[STAYS], sizeof(peer_name));
			CHECK_INT(et_close(&e), 0);
			et_barrier(); /* closed */
			if (et_open_local(&e, &again))
				return 2;
			CHECK_STR(e.name, name);
			memcpy(e.peer_name[STAYS], peer_name, sizeof(peer_name));
			CHECK_INT(fi_av_insert(e.av, peer_name, 1, &e.addr[STAYS], 0, NULL), 1);
			et_barrier(); /* open again */
		} else {
			fi_addr_t gone = e.addr[MOVES];

			CHECK_INT(et_barrier_progress(&e), 0); /* it closed */
			CHECK_INT(fi_av_remove(e.av, &gone, 1, 0), 0);
			et_barrier(); /* it is open again */
			CHECK_INT(fi_av_insert(e.av, e.peer_name[MOVES], 1, &e.addr[MOVES], 0, NULL),
			          1);
		}
		talk(&e, round & 1 ? MOVES : STAYS, buf, seed);
		if (check_failures)
			fprintf(stderr, "rank %d: round %d (%s first) failed\n", rank, round,
			        round & 1 ? "the new endpoint" : "the one that stayed");
	}
	CHECK_INT(et_barrier_progress(&e), 0);
	CHECK_INT(et_close(&e), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	return et_run("reopen", 2, 120, proc, NULL, 0);
}
