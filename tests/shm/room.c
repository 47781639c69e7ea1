/* room.c - a sender sleeping for room in a full peer is rung when the
 * peer frees some, rather than looking again on a timer.  The receiver
 * stays away for 300 ms while the sender, which has posted more messages
 * than the receiver's ring (small messages) or bounce buffers (2 KiB
 * messages) hold, sleeps in fi_cq_sread for their completions.  Then the
 * receiver takes them all.  The sender must:
 *   - get every completion, each message arriving once and intact;
 *   - finish soon after the receiver starts (the receiver's freeing rings
 *     it, each time the ring or the buffers fill again);
 *   - have slept, not polled: a few voluntary context switches over the
 *     300 ms, where looking again every millisecond makes hundreds.
 * shm only: the room doorbell is the shm link's. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define DELAY_US    300000
#define MAX_LATE_US 2000000 /* from the receiver's start to the last completion */
#define MAX_SWITCH  60      /* voluntary switches while blocked (polling: ~300) */
#define RX_WINDOW   512

static struct et_ep E;

static long switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw;
}

static void sender(char *buf, size_t len, size_t count, uint64_t seed)
{
	struct fi_cq_tagged_entry c;
	uint64_t t0, t1, start, all[ET_MAX_PROCS * ET_SLOT / 8];
	size_t i, done = 0;
	long sw;

	et_barrier();
	for (i = 0; i < count; i++) {
		et_fill(buf + i * len, len, seed + i);
		CHECK_INT(fi_send(E.ep, buf + i * len, len, NULL, E.addr[0], NULL), 0);
	}
	t0 = et_now_us();
	sw = switches();
	while (done < count) {
		ssize_t r = fi_cq_sread(E.txcq, &c, 1, NULL, 20000);

		CHECK_INT(r, 1);
		if (r != 1)
			break;
		done++;
	}
	t1 = et_now_us();
	sw = switches() - sw;
	et_allgather(&t1, sizeof(t1), all);
	start = all[0]; /* the receiver's start */
	fprintf(stderr,
	        "%zu x %zu B: sender blocked %.1f ms, done %.3f ms after the receiver "
	        "started, %ld voluntary switches\n",
	        count, len, (t1 - t0) / 1000.0, ((double)t1 - (double)start) / 1000.0, sw);
	CHECK_INT(done, count);
	CHECK(t1 - t0 >= DELAY_US / 2); /* it was held back */
	CHECK(t1 > start && t1 - start < MAX_LATE_US);
	CHECK(sw < MAX_SWITCH);
}

static void receiver(char *buf, size_t len, size_t count, uint64_t seed)
{
	struct fi_cq_tagged_entry c;
	uint64_t start, all[ET_MAX_PROCS * ET_SLOT / 8];
	size_t i, got = 0, posted = 0, bad = 0;

	memset(buf, 0, len * count);
	et_barrier();
	usleep(DELAY_US); /* no progress: the sender fills what it can */
	start = et_now_us();
	while (got < count) {
		ssize_t r;

		/* At most RX_WINDOW posted: the receive queue is the ring's size. */
		for (; posted < count && posted - got < RX_WINDOW; posted++)
			CHECK_INT(fi_recv(E.ep, buf + posted * len, len, NULL,
			                  FI_ADDR_UNSPEC, NULL),
			          0);
		r = fi_cq_sread(E.rxcq, &c, 1, NULL, 20000);

		CHECK_INT(r, 1);
		if (r != 1)
			break;
		CHECK_INT(c.len, len);
		got++;
	}
	/* Receives match in posting order (FI_ORDER_SAS): buffer i holds
	 * message i. */
	for (i = 0; i < count; i++)
		bad += et_verify(buf + i * len, len, seed + i) != (size_t)-1;
	CHECK_INT(got, count);
	CHECK_INT(bad, 0);
	et_allgather(&start, sizeof(start), all);
}

static void round_(char *buf, size_t len, size_t count, uint64_t seed)
{
	if (E.rank == 0)
		receiver(buf, len, count, seed);
	else
		sender(buf, len, count, seed);
}

static int proc(int rank, int nprocs, void *arg)
{
	/* The ring holds 1024 cells and the region 64 bounce buffers; 1024
	 * sends may wait in the sender (tx_attr->size). */
	struct et_opts o = {.wait = FI_WAIT_UNSPEC, .split_cq = true, .cq_size = 8192};
	size_t small = 1024 + 600, medium = 64 + 200;
	char *buf = malloc(small * 64 > medium * 2048 ? small * 64 : medium * 2048);

	(void)rank, (void)nprocs, (void)arg;
	if (!buf || et_open(&E, &o))
		return 2;
	round_(buf, 64, small, 1);
	round_(buf, 2048, medium, 100000);
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	return et_run("room", 2, 120, proc, NULL, 0);
}
