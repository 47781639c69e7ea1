/* answered.c - a receiver that reads its message and then waits for its
 * peer by other means (a barrier of its own, no fabric call) has answered
 * its sender: the sender's send completes while the receiver calls
 * nothing.  Rounds of one small message (the kind whose acknowledgement a
 * provider may hold for the receiver's reply) and of a burst of them. */
#include <string.h>

#include "check.h"
#include "eptest.h"

#define TMO    3000 /* each: a failing run ends within the harness's 120 s */
#define ROUNDS 20
#define BURST  8

static int body(int rank, int nprocs, void *arg)
{
	static struct fi_context ctx[BURST];
	struct et_ep e = {0};
	char out[BURST][64], in[BURST][64];

	(void)nprocs, (void)arg;
	if (et_open(&e, &(struct et_opts){0}))
		return 1;
	for (int round = 0; round < ROUNDS; round++) {
		int n = round % 2 ? BURST : 1;

		if (rank == 1) {
			struct fi_cq_tagged_entry c;

			for (int i = 0; i < n; i++)
				CHECK_INT(fi_recv(e.ep, in[i], sizeof(in[i]), NULL, FI_ADDR_UNSPEC,
				                  &ctx[i]),
				          0);
			CHECK_INT(et_barrier(), 0); /* posted before the sends */
			for (int i = 0; i < n; i++) {
				CHECK_INT(et_read(e.rxcq, &c, NULL, NULL, NULL, TMO), 1);
				CHECK(c.op_context == &ctx[i]);
				CHECK_INT(et_verify(in[i], sizeof(in[i]), (uint64_t)(round * BURST + i)),
				          -1);
			}
			/* Read: now wait by other means while the sender waits
			 * for its completions. */
			CHECK_INT(et_barrier(), 0);
		} else {
			struct fi_cq_tagged_entry c;

			CHECK_INT(et_barrier(), 0);
			for (int i = 0; i < n; i++) {
				et_fill(out[i], sizeof(out[i]), (uint64_t)(round * BURST + i));
				CHECK_INT(fi_send(e.ep, out[i], sizeof(out[i]), NULL, e.addr[1],
				                  &ctx[i]),
				          0);
			}
			for (int i = 0; i < n; i++)
				CHECK_INT(et_read(e.txcq, &c, NULL, NULL, NULL, TMO), 1);
			CHECK_INT(et_barrier(), 0);
		}
	}
	et_close(&e);
	return check_done();
}

int main(void)
{
	return et_run("answered", 2, 120, body, NULL, 0);
}
