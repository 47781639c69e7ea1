/* close_after_recv.c - a receiver that closes its endpoint the moment its
 * last receive completes.  The sender's FI_DELIVERY_COMPLETE sends were
 * all delivered, so every one of them completes without error: the
 * receiver's answers (ACK, FIN) still go out as it closes, and the
 * sender reads them before it concludes from the receiver's exit that
 * they will never come.  Small (eager, unexpected first: the receiver
 * posts late) and large (rendezvous) messages, several rounds. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define TMO    10000
#define ROUNDS 8
#define NMSG   64

static const size_t sizes[] = {64, 1 << 20};

static int sender(struct et_ep *e, char *buf, size_t len)
{
	static struct fi_context ctx[NMSG];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	int done = 0, bad = 0;

	for (int i = 0; i < NMSG; i++) {
		ssize_t r;

		do {
			r = fi_send(e->ep, buf, len, NULL, e->addr[1], &ctx[i]);
			if (r == -FI_EAGAIN)
				et_progress(e);
		} while (r == -FI_EAGAIN);
		CHECK_INT(r, 0);
	}
	while (done + bad < NMSG) {
		ssize_t r = et_read(e->txcq, &c, NULL, &err, NULL, TMO);

		if (r == 1) {
			done++;
		} else if (r == -FI_EAVAIL) {
			fprintf(stderr, "send %zu B: error %d after %d delivered\n", len,
			        err.err, done);
			bad++;
		} else {
			CHECK_INT(r, 1);
			break;
		}
	}
	CHECK_INT(done, NMSG);
	return 0;
}

static int receiver(struct et_ep *e, char *buf, size_t len)
{
	struct fi_cq_tagged_entry c;
	int got = 0;

	/* Late: the small messages arrive unexpected, their ACKs go when
	 * the receives match them. */
	usleep(20000);
	for (int i = 0; i < NMSG; i++)
		CHECK_INT(fi_recv(e->ep, buf, len, NULL, FI_ADDR_UNSPEC, NULL), 0);
	while (got < NMSG && et_read(e->rxcq, &c, NULL, NULL, NULL, TMO) == 1)
		got++;
	CHECK_INT(got, NMSG);
	return 0;
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.tx_op_flags = FI_DELIVERY_COMPLETE};
	char *buf = malloc(sizes[1]);

	(void)nprocs, (void)arg;
	if (!buf)
		return 2;
	memset(buf, rank, sizes[1]);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int round = 0; round < ROUNDS; round++) {
			struct et_ep e;

			if (et_open(&e, &o))
				return 2;
			if (rank == 0)
				sender(&e, buf, sizes[s]);
			else
				receiver(&e, buf, sizes[s]);
			/* The receiver closes at once; the sender once all
			 * its sends are accounted for. */
			CHECK_INT(et_close(&e), 0);
			et_barrier();
		}
	}
	free(buf);
	return check_done();
}

int main(void)
{
	return et_run("close_after_recv", 2, 240, proc, NULL, 0);
}
