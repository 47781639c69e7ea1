/* peer_death.c - a peer SIGKILLed in the middle of things: in a streamed
 * rendezvous it was sending, and while the survivor has sends waiting for
 * it.  The survivor gets FI_EIO error entries naming the peer within a
 * bounded time (while asleep in fi_cq_sread, too), never hangs or crashes,
 * and stays usable; a full queue gives -FI_EAGAIN and then progresses;
 * the dead process's region leaves /dev/shm. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define SURV       0
#define VICTIM     1
#define BIG        ((size_t)64 << 20)
#define MAX_ERR_US (10 * 1000000ull) /* kill -> error entry */

static struct et_ep E;

/* The error entry for an operation on the dead peer: FI_EIO, and a text
 * that names it. */
static void check_peer_error(const struct fi_cq_err_entry *err, struct fid_cq *cq,
                             void *ctx)
{
	char text[512], pid[32];
	const char *s;

	CHECK(err->op_context == ctx);
	CHECK_INT(err->err, FI_EIO);
	s = fi_cq_strerror(cq, err->prov_errno, err->err_data, text, sizeof(text));
	snprintf(pid, sizeof(pid), "%d", (int)E.pid[VICTIM]);
	if (!s || (!strstr(s, E.peer_name[VICTIM]) && !strstr(s, pid))) {
		fprintf(stderr, "fi_cq_strerror = \"%s\" does not name %s\n",
		        s ? s : "(null)", E.peer_name[VICTIM]);
		CHECK(0);
	}
}

/* Sleep in sread for the next entry, which must be an error; returns the
 * microseconds it took. */
static uint64_t sread_error(struct fid_cq *cq, struct fi_cq_err_entry *err)
{
	struct fi_cq_tagged_entry c;
	uint64_t t0 = et_now_us();
	ssize_t r;

	/* One sleep: nobody rings for a dead peer, so this also proves the
	 * sleeper wakes by itself to look. */
	r = fi_cq_sread(cq, &c, 1, NULL, (int)(MAX_ERR_US / 1000));
	CHECK_INT(r, -FI_EAVAIL);
	memset(err, 0, sizeof(*err));
	if (r == -FI_EAVAIL)
		CHECK_INT(fi_cq_readerr(cq, err, 0), 1);
	return et_now_us() - t0;
}

/* After the victim is gone: its region is reclaimed by the next endpoint
 * opened on the host, and ours goes when we close. */
static void check_regions(void)
{
	struct et_ep lone;
	pid_t me = getpid();

	CHECK_INT(et_open_local(&lone, NULL), 0);
	CHECK_INT(et_regions_of(E.pid[VICTIM]), 0);
	CHECK_INT(et_close(&lone), 0);
	CHECK_INT(et_regions_of(me), 0);
}

/* ---- the victim sends a big message and is killed half way ---------------- */

static int victim_sends(void)
{
	char *buf = malloc(BIG);
	struct fi_cq_tagged_entry c;

	et_fill(buf, BIG, 5);
	et_barrier();
	CHECK_INT(fi_send(E.ep, buf, BIG, NULL, E.addr[SURV], NULL), 0);
	/* Streaming needs the sender's progress: a few passes move at most a
	 * few bounce-buffer loads (4 MiB each), far from all of BIG, then the
	 * sender stops and waits to be killed.  So the transfer is caught
	 * half way however the machine schedules the two processes. */
	for (int pass = 0; pass < 8; pass++) {
		fi_cq_read(E.txcq, &c, 1);
		usleep(20000);
	}
	sleep(60); /* still alive after a minute is a failure */
	return 5;
}

static void survivor_receives(void)
{
	char *buf = calloc(1, BIG), *ref = malloc(BIG);
	char small[4][64];
	size_t mid = BIG / 32, last = BIG - 1;
	int big_ctx, sctx[4];
	struct fi_cq_err_entry err;
	struct fi_cq_tagged_entry c;
	uint64_t t0, took;

	CHECK_INT(fi_recv(E.ep, buf, BIG, NULL, E.addr[VICTIM], &big_ctx), 0);
	for (int i = 0; i < 4; i++)
		CHECK_INT(
		    i % 2 ? fi_recv(E.ep, small[i], 64, NULL, E.addr[VICTIM], &sctx[i])
		          : fi_trecv(E.ep, small[i], 64, NULL, FI_ADDR_UNSPEC, 1, 0,
		                     &sctx[i]),
		    0);
	/* Bytes to watch: ones the message does not leave zero. */
	et_fill(ref, BIG, 5);
	while (!ref[mid])
		mid++;
	while (!ref[last])
		last--;
	et_barrier();
	/* Kill it once some of the data is here and much is not. */
	t0 = et_now_us();
	while (buf[mid] != ref[mid] && et_now_us() - t0 < 20000000)
		fi_cq_read(E.rxcq, NULL, 0);
	CHECK(buf[mid] == ref[mid]);
	CHECK(buf[last] != ref[last]);
	kill(E.pid[VICTIM], SIGKILL);
	took = sread_error(E.rxcq, &err);
	fprintf(stderr, "receive from the dead sender failed after %.1f ms: %s\n",
	        took / 1000.0,
	        fi_cq_strerror(E.rxcq, err.prov_errno, err.err_data, NULL, 0));
	check_peer_error(&err, E.rxcq, &big_ctx);
	CHECK(took < MAX_ERR_US);
	CHECK(err.flags & FI_RECV);
	/* The other receives are still posted and can be cancelled. */
	for (int i = 0; i < 4; i++) {
		CHECK_INT(fi_cancel(&E.ep->fid, &sctx[i]), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, 5000), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ECANCELED);
	}
	CHECK_INT(et_close(&E), 0);
	check_regions();
	free(buf);
	free(ref);
}

/* ---- sends waiting for a peer that dies; a full queue first ------------------ */

#define FLOOD 100000

static int victim_stalls(void)
{
	static char buf[256];
	struct fi_cq_tagged_entry c;
	uint64_t all[ET_MAX_PROCS * ET_SLOT / 8];
	unsigned n = 0;

	/* Not reading while the survivor fills our queue. */
	et_barrier();
	et_allgather("", 0, all);
	/* Now take everything it managed to send. */
	while (n < all[0]) {
		if (fi_recv(E.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, NULL))
			return 3;
		if (et_read(E.rxcq, &c, NULL, NULL, NULL, 20000) != 1)
			return 4;
		n++;
	}
	et_barrier();
	sleep(60); /* never posts another receive: the big sends wait */
	return 5;
}

static void survivor_sends(void)
{
	static char small[64];
	char *big = malloc((size_t)4 << 20);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	uint64_t sent = 0, done = 0, t0, all[ET_MAX_PROCS * ET_SLOT / 8];
	int bctx[3], after;
	ssize_t r = 0;

	et_barrier();
	/* Flood a peer that does not read: -FI_EAGAIN, not a hang. */
	while (sent < FLOOD) {
		r = fi_send(E.ep, small, sizeof(small), NULL, E.addr[VICTIM], NULL);
		if (r)
			break;
		sent++;
		while (fi_cq_read(E.txcq, &c, 1) == 1)
			done++;
	}
	CHECK_INT(r, -FI_EAGAIN);
	CHECK(sent < FLOOD);
	et_allgather(&sent, sizeof(sent), all);
	/* It reads now: everything completes. */
	t0 = et_now_us();
	while (done < sent && et_now_us() - t0 < 20000000)
		if (fi_cq_read(E.txcq, &c, 1) == 1)
			done++;
	CHECK_INT(done, sent);
	et_barrier();
	fprintf(stderr, "full queue after %llu sends, then all completed\n",
	        (unsigned long long)sent);

	/* Rendezvous sends wait for a receive that never comes. */
	for (int i = 0; i < 3; i++)
		CHECK_INT(
		    fi_send(E.ep, big, (size_t)4 << 20, NULL, E.addr[VICTIM], &bctx[i]),
		    0);
	for (int i = 0; i < 20; i++)
		CHECK_INT(fi_cq_read(E.txcq, &c, 1), -FI_EAGAIN);
	kill(E.pid[VICTIM], SIGKILL);
	for (int i = 0; i < 3; i++) {
		uint64_t took = sread_error(E.txcq, &err);

		check_peer_error(&err, E.txcq, &bctx[i]);
		CHECK(err.flags & FI_SEND);
		CHECK(took < MAX_ERR_US);
		if (!i)
			fprintf(stderr,
			        "send to the dead receiver failed after %.1f ms: %s\n",
			        took / 1000.0,
			        fi_cq_strerror(E.txcq, err.prov_errno, err.err_data, NULL,
			                       0));
	}
	/* A new send to it fails at once or with an error entry. */
	r = fi_send(E.ep, small, sizeof(small), NULL, E.addr[VICTIM], &after);
	if (!r) {
		CHECK(sread_error(E.txcq, &err) < MAX_ERR_US);
		CHECK_INT(err.err, FI_EIO);
	} else {
		CHECK(r < 0 && r != -FI_EAGAIN);
	}
	CHECK_INT(et_close(&E), 0);
	check_regions();
	free(big);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.wait = FI_WAIT_FD, .split_cq = true};
	bool victim_is_sender = *(bool *)arg;

	(void)nprocs;
	if (et_open(&E, &o))
		return 2;
	if (rank == VICTIM)
		return victim_is_sender ? victim_sends() : victim_stalls();
	if (victim_is_sender)
		survivor_receives();
	else
		survivor_sends();
	return check_done();
}

int main(void)
{
	bool sender = true, receiver = false;
	int bad = 0;

	/* Without CMA the big message streams through bounce buffers, so it
	 * can be caught half way. */
	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("peer_death (sender killed mid-rendezvous)", 2, 60, proc, &sender,
	              1u << VICTIM);
	unsetenv("FI_SHM_DISABLE_CMA");
	bad |= et_run("peer_death (receiver killed, sends waiting)", 2, 60, proc,
	              &receiver, 1u << VICTIM);
	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("peer_death (receiver killed, sends waiting, no CMA)", 2, 60, proc,
	              &receiver, 1u << VICTIM);
	return bad;
}
