/* backpressure.c - a receiver that posts no buffers does not buffer
 * without bound: with rx_attr->total_buffered_recv at 2 MiB, a sender
 * pushing 96 MiB of eager messages at an endpoint that keeps progressing
 * but posts nothing gets -FI_EAGAIN after a bounded amount, and once the
 * receives are posted every message arrives once, intact, in the buffer
 * posted for it.  Runs on every provider of the tests/ep matrix. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pair.h"
#include "v1_names.h"

#define MSG     4096
#define N       (96 * 256) /* 96 MiB of 4 KiB messages */
#define LIMIT   ((size_t)2 << 20)
#define BOUND   ((size_t)48 << 20) /* far below N * MSG, far above the slack */
#define TMO_US  (60 * 1000000ull)
#define WAIT_US (300 * 1000ull) /* the receiver progresses without posting */
#define DONE    (1ull << 40)    /* tag of the receiver's "all here" */

static struct et_ep E;

/* fi_tinject: the buffer is free again when the call returns, and a
 * full transport answers -FI_EAGAIN. */
static void sender(void)
{
	char *buf = malloc(MSG);
	uint64_t start, end;
	size_t sent = 0, in_window = 0, eagain = 0;
	uint64_t done_word = 0;

	CHECK_INT(
	    fi_trecv(E.ep, &done_word, sizeof(done_word), NULL, E.addr[1], DONE, 0, NULL),
	    0);
	et_barrier();
	start = et_now_us();
	end = start + TMO_US;
	while (sent < N && et_now_us() < end) {
		ssize_t r;

		et_fill(buf, MSG, sent);
		r = fi_tinject(E.ep, buf, MSG, E.addr[1], sent);
		if (r == -FI_EAGAIN) {
			eagain++;
			et_progress(&E);
			continue;
		}
		CHECK_INT(r, 0);
		if (r)
			break;
		sent++;
		/* Well inside the receiver's time without receives posted. */
		if (et_now_us() - start < WAIT_US * 3 / 4)
			in_window = sent;
	}
	/* Manual progress: what the transport did not take yet waits in
	 * this endpoint until it is driven, so drive it until the receiver
	 * says it has everything. */
	while (et_now_us() < end) {
		struct fi_cq_tagged_entry c;

		if (fi_cq_read(E.rxcq, &c, 1) == 1) {
			CHECK_INT(c.tag, (uint64_t)DONE);
			break;
		}
	}
	CHECK_INT(sent, N);
	fprintf(stderr,
	        "sender: %zu KiB taken while nothing was posted, %zu -FI_EAGAIN\n",
	        in_window * MSG / 1024, eagain);
	CHECK(eagain > 0);
	CHECK(in_window * MSG < BOUND);
	free(buf);
}

static void receiver(void)
{
	char *bufs = malloc((size_t)64 * MSG);
	uint64_t until, end = et_now_us() + TMO_US;
	size_t posted = 0, got = 0;
	struct fi_cq_tagged_entry c;
	/* Message t goes to slot t % 64, posted once the slot is free again.
	 * Completions may come in any order (comp_order is LM_ORDER_NONE:
	 * past its eager credit a message goes by rendezvous, which completes
	 * after eager ones sent behind it); each must be its own message,
	 * whole, and come once. */
	unsigned char *seen = calloc(N, 1);
	uint64_t busy = 0; /* slots with a receive posted */

	et_barrier();
	/* Progress without posting: everything that arrives is unexpected. */
	until = et_now_us() + WAIT_US;
	while (et_now_us() < until) {
		CHECK_INT(fi_cq_read(E.rxcq, &c, 1), -FI_EAGAIN);
		usleep(100);
	}
	while (got < N && et_now_us() < end) {
		ssize_t n;

		while (posted < N && !(busy >> (posted % 64) & 1)) {
			ssize_t r =
			    fi_trecv(E.ep, bufs + (posted % 64) * MSG, MSG, NULL,
			             FI_ADDR_UNSPEC, posted, 0, &bufs[posted % 64]);

			if (r == -FI_EAGAIN)
				break;
			CHECK_INT(r, 0);
			busy |= 1ull << (posted % 64);
			posted++;
		}
		n = fi_cq_read(E.rxcq, &c, 1);
		if (n == 1) {
			size_t slot = c.tag % 64;

			CHECK(c.tag < posted && !seen[c.tag]);
			CHECK(c.op_context == &bufs[slot]);
			CHECK_INT(c.len, MSG);
			if (c.tag < N)
				seen[c.tag] = 1;
			if (et_verify(bufs + slot * MSG, MSG, c.tag) != (size_t)-1) {
				fprintf(stderr, "message %llu differs\n",
				        (unsigned long long)c.tag);
				CHECK(0);
			}
			busy &= ~(1ull << slot);
			got++;
		} else if (n != -FI_EAGAIN) {
			CHECK_INT(n, -FI_EAGAIN);
			break;
		}
	}
	CHECK_INT(got, N);
	et_say_done(&E, E.addr[0], DONE);
	free(seen);
	free(bufs);
}

static int proc(int rank, int nprocs, void *arg)
{
	static void (*const side[2])(void) = {sender, receiver};
	struct et_opts o = {.caps = FI_TAGGED, .unexp_max = LIMIT, .split_cq = true};

	(void)nprocs, (void)arg;
	return et_pair(&E, &o, rank, side);
}

int main(void)
{
	return et_run("backpressure", 2, 120, proc, NULL, 0);
}
