/* credit.c - a posted receive is not stalled by unexpected messages sent
 * ahead of its data.  The sender sends one 4 MiB message (tag BIG), then
 * 64 messages of 60 KiB (tags SMALL + i, 3.75 MiB, far past the receiver's
 * rx_attr->total_buffered_recv of 256 KiB).  The receiver posts only the
 * large receive and waits for it; only then does it post the small ones,
 * which must all arrive intact.
 *
 * Before eager credit (wire version 4) this hung on tcp: the receiver
 * stopped reading its link at twice its limit of unexpected data, and the
 * large message's rendezvous data was behind the small messages in the
 * connection.  Now the sender sends at most LM_EAGER_CREDIT of eager data
 * the receiver has not consumed and the rest by rendezvous, which holds no
 * buffer at the receiver, so the receiver never has to stop reading.
 * Runs on every provider of the tests/ep matrix. */
#include <stdlib.h>
#include <string.h>

#include "pair.h"

#define BIG_LEN   ((size_t)4 << 20)
#define SMALL_LEN ((size_t)60 << 10)
#define NSMALL    64
#define LIMIT     ((size_t)256 << 10)
#define BIG       1ull
#define SMALL     (1ull << 20) /* tags SMALL + i */
#define DONE      (1ull << 40) /* the receiver's "all here" */
#define TMO_MS    30000

static struct et_ep E;

static void send_retry(const void *buf, size_t len, uint64_t tag, void *ctx)
{
	ssize_t r;

	while ((r = fi_tsend(E.ep, buf, len, NULL, E.addr[1], tag, ctx)) == -FI_EAGAIN)
		et_progress(&E);
	CHECK_INT(r, 0);
}

static void sender(void)
{
	char *big = malloc(BIG_LEN), *small = malloc(NSMALL * SMALL_LEN);
	uint64_t done_word = 0, end;
	struct fi_cq_tagged_entry c;
	int txdone = 0;
	bool done = false;

	CHECK(big && small);
	if (!big || !small)
		return;
	CHECK_INT(fi_trecv(E.ep, &done_word, sizeof(done_word), NULL, E.addr[1], DONE, 0,
	                   &done_word),
	          0);
	et_fill(big, BIG_LEN, BIG);
	for (int i = 0; i < NSMALL; i++)
		et_fill(small + i * SMALL_LEN, SMALL_LEN, SMALL + i);
	et_barrier();
	send_retry(big, BIG_LEN, BIG, big);
	for (int i = 0; i < NSMALL; i++)
		send_retry(small + i * SMALL_LEN, SMALL_LEN, SMALL + i, small + i * SMALL_LEN);
	/* Keep progressing (rendezvous data is sent from here) until every
	 * send completed and the receiver says it has everything. */
	end = et_now_us() + TMO_MS * 1000ull;
	while ((txdone < NSMALL + 1 || !done) && et_now_us() < end) {
		if (fi_cq_read(E.txcq, &c, 1) == 1)
			txdone++;
		if (fi_cq_read(E.rxcq, &c, 1) == 1) {
			CHECK_INT(c.tag, DONE);
			done = true;
		}
	}
	CHECK_INT(txdone, NSMALL + 1);
	CHECK(done);
	free(big);
	free(small);
}

static void receiver(void)
{
	char *big = malloc(BIG_LEN), *small = malloc(NSMALL * SMALL_LEN);
	struct fi_cq_tagged_entry c;
	unsigned char seen[NSMALL] = {0};

	CHECK(big && small);
	if (!big || !small)
		return;
	CHECK_INT(fi_trecv(E.ep, big, BIG_LEN, NULL, FI_ADDR_UNSPEC, BIG, 0, big), 0);
	et_barrier();
	/* The large message first, with the small ones unexpected. */
	CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO_MS), 1);
	CHECK_INT(c.tag, BIG);
	CHECK_INT(c.len, BIG_LEN);
	CHECK(c.op_context == big);
	CHECK(et_verify(big, BIG_LEN, BIG) == (size_t)-1);
	for (int i = 0; i < NSMALL; i++)
		CHECK_INT(fi_trecv(E.ep, small + i * SMALL_LEN, SMALL_LEN, NULL,
		                   FI_ADDR_UNSPEC, SMALL + i, 0, small + i * SMALL_LEN),
		          0);
	for (int n = 0; n < NSMALL; n++) {
		uint64_t i;

		if (et_read(E.rxcq, &c, NULL, NULL, NULL, TMO_MS) != 1) {
			CHECK(0);
			break;
		}
		i = c.tag - SMALL;
		CHECK(c.tag >= SMALL && i < NSMALL && !seen[i]);
		if (c.tag < SMALL || i >= NSMALL)
			continue;
		seen[i] = 1;
		CHECK_INT(c.len, SMALL_LEN);
		CHECK(c.op_context == small + i * SMALL_LEN);
		CHECK(et_verify(small + i * SMALL_LEN, SMALL_LEN, SMALL + i) == (size_t)-1);
	}
	et_say_done(&E, E.addr[0], DONE);
	free(big);
	free(small);
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
	return et_run("credit", 2, 90, proc, NULL, 0);
}
