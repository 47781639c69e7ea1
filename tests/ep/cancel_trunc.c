/* cancel_trunc.c - fi_cancel of posted receives gives FI_ECANCELED error
 * entries and the cancelled buffers are never written; a receive too
 * small for the message gives FI_ETRUNC with the overflow in olen, for
 * eager and rendezvous messages, and the endpoint keeps working. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define TMO 20000

static struct et_ep E;

static void cancel(char *buf)
{
	if (E.rank == 1) {
		int ctx;

		et_barrier(); /* the receiver cancelled */
		et_fill(buf, 300, 31);
		CHECK_INT(fi_send(E.ep, buf, 300, NULL, E.addr[0], &ctx), 0);
		CHECK_INT(et_read(E.txcq, &(struct fi_cq_tagged_entry){0}, NULL, NULL,
		                  NULL, TMO),
		          1);
		et_barrier();
		return;
	}
	struct fi_context c1, c2, c3;
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	char *a = buf, *b = buf + 4096, *d = buf + 8192;
	fi_addr_t src;

	memset(buf, 0x5a, 12288);
	CHECK_INT(fi_recv(E.ep, a, 1000, NULL, FI_ADDR_UNSPEC, &c1), 0);
	CHECK_INT(fi_trecv(E.ep, b, 1000, NULL, E.addr[1], 0x42, 0, &c2), 0);
	CHECK_INT(fi_cancel(&E.ep->fid, &c1), 0);
	CHECK_INT(fi_cancel(&E.ep->fid, &c2), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, TMO), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ECANCELED);
		CHECK(err.op_context == (i ? (void *)&c2 : (void *)&c1));
		CHECK(err.flags & FI_RECV);
		CHECK_HEX(err.flags & (FI_MSG | FI_TAGGED), i ? FI_TAGGED : FI_MSG);
	}
	/* Nothing left to cancel: no second entry. */
	fi_cancel(&E.ep->fid, &c1);
	CHECK_INT(fi_cq_read(E.rxcq, &c, 1), -FI_EAGAIN);
	/* The message lands in the next receive, not in a cancelled one. */
	CHECK_INT(fi_recv(E.ep, d, 1000, NULL, FI_ADDR_UNSPEC, &c3), 0);
	et_barrier();
	CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
	CHECK(c.op_context == &c3);
	CHECK_INT(c.len, 300);
	CHECK_INT(et_verify(d, 300, 31), (size_t)-1);
	for (int i = 0; i < 8192; i++)
		if (buf[i] != 0x5a) {
			fprintf(stderr, "cancelled buffer written at %d\n", i);
			CHECK(0);
			break;
		}
	et_barrier();
}

/* Message sizes: inline, bounce buffer, rendezvous. */
static const size_t sent[] = {150, 9000, (size_t)3 << 20};
#define POSTED 100

static void trunc_test(char *buf, bool tagged)
{
	for (size_t k = 0; k < sizeof(sent) / sizeof(sent[0]); k++) {
		uint64_t seed = 77 + k + (tagged ? 10 : 0);

		if (E.rank == 1) {
			struct fi_cq_tagged_entry c;
			struct fi_cq_err_entry err;
			ssize_t r;

			et_fill(buf, sent[k], seed);
			et_barrier(); /* posted */
			CHECK_INT(
			    tagged
			        ? fi_tsend(E.ep, buf, sent[k], NULL, E.addr[0], 9, NULL)
			        : fi_send(E.ep, buf, sent[k], NULL, E.addr[0], NULL),
			    0);
			/* The sender learns nothing it must act on: success or
			 * an error entry, but one entry, and promptly. */
			r = et_read(E.txcq, &c, NULL, &err, NULL, TMO);
			CHECK(r == 1 || r == -FI_EAVAIL);
			/* Then an ordinary message still gets through. */
			et_fill(buf, 64, seed + 100);
			CHECK_INT(fi_send(E.ep, buf, 64, NULL, E.addr[0], NULL), 0);
			CHECK_INT(et_read(E.txcq, &c, NULL, NULL, NULL, TMO), 1);
			et_barrier();
			continue;
		}
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		int ctx, ctx2;
		char *land = buf + 4096;

		memset(buf, 0x11, 8192);
		CHECK_INT(
		    tagged
		        ? fi_trecv(E.ep, land, POSTED, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx)
		        : fi_recv(E.ep, land, POSTED, NULL, FI_ADDR_UNSPEC, &ctx),
		    0);
		et_barrier();
		CHECK_INT(et_read(E.rxcq, &c, NULL, &err, NULL, TMO), -FI_EAVAIL);
		CHECK_INT(err.err, FI_ETRUNC);
		CHECK(err.op_context == &ctx);
		CHECK_INT(err.olen, sent[k] - POSTED);
		CHECK_INT(err.len, POSTED);
		CHECK(err.flags & FI_RECV);
		if (tagged)
			CHECK_HEX(err.tag, 9);
		/* What fitted is there, and nothing past it was written. */
		CHECK_INT(et_verify(land, POSTED, seed), (size_t)-1);
		CHECK(land[POSTED] == 0x11 && land[-1] == 0x11);
		CHECK_INT(fi_recv(E.ep, land, 64, NULL, FI_ADDR_UNSPEC, &ctx2), 0);
		CHECK_INT(et_read(E.rxcq, &c, NULL, NULL, NULL, TMO), 1);
		CHECK(c.op_context == &ctx2);
		CHECK_INT(et_verify(land, 64, seed + 100), (size_t)-1);
		et_barrier();
	}
}

static int proc(int rank, int nprocs, void *arg)
{
	char *buf = malloc((size_t)4 << 20);

	(void)rank, (void)nprocs, (void)arg;
	if (!buf || et_open(&E, NULL))
		return 2;
	cancel(buf);
	trunc_test(buf, false);
	trunc_test(buf, true);
	CHECK_INT(et_close(&E), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	int bad = et_run("cancel_trunc", 2, 120, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("cancel_trunc (no CMA)", 2, 120, proc, NULL, 0);
	return bad;
}
