/* unsent.c - a tcp sender killed with input it never read loses none of
 * the sends it saw complete.
 *
 * A process that dies with unread bytes in a socket makes the kernel
 * reset that connection, and whatever the kernel had not sent yet is
 * dropped.  So an eager send may complete only once its bytes have left
 * the sender's kernel, not when the socket took them.  Here the receiver
 * stops reading, so its window closes with the sender's bytes queued
 * behind it (small socket buffers: FI_TCP_SOCKBUF); the sender posts a
 * whole eager credit's worth of sends and polls its CQ a while, noting
 * the completions; then the receiver sends it one message, which the
 * sender never reads, and the sender kills itself.  The receiver, reading
 * again, must get every message whose send completed, whole and in
 * order. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define RECVER  0
#define SENDER  1
#define MSG_LEN (16 << 10)
#define NMSG    64   /* 1 MiB: the engine's whole eager credit, all eager */
#define POLL_MS 500  /* the sender looks for completions this long */
#define TMO     5000 /* the receiver's bound on one message */

static int sender(struct et_ep *e, char *buf)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	int posted = 0, done = 0, failed = 0;
	uint64_t end;

	for (posted = 0; posted < NMSG; posted++) {
		ssize_t r;

		et_fill(buf + (size_t)posted * MSG_LEN, MSG_LEN, (uint64_t)posted + 1);
		r = fi_send(e->ep, buf + (size_t)posted * MSG_LEN, MSG_LEN, NULL,
		            e->addr[RECVER], NULL);
		if (r == -FI_EAGAIN)
			break; /* the rest would wait for the receiver anyway */
		CHECK_INT(r, 0);
	}
	end = et_now_us() + POLL_MS * 1000;
	while (et_now_us() < end && done < posted) {
		ssize_t n = fi_cq_read(e->txcq, &c, 1);

		if (n == 1) {
			done++;
		} else if (n == -FI_EAVAIL) {
			/* Not complete, and the receiver must not get it. */
			memset(&err, 0, sizeof(err));
			CHECK_INT(fi_cq_readerr(e->txcq, &err, 0), 1);
			fprintf(stderr, "sender: a send failed: %s\n", fi_strerror(err.err));
			failed++;
			break;
		} else {
			CHECK_INT(n, -FI_EAGAIN);
		}
	}
	fprintf(stderr, "sender: %d of %d sends complete, %d failed\n", done, posted, failed);
	et_allgather(&done, sizeof(done), buf);
	et_barrier(); /* the receiver's message is on its way */
	usleep(100 * 1000);
	raise(SIGKILL);
	return 1;
}

static int recver(struct et_ep *e, char *buf)
{
	struct fi_cq_tagged_entry c;
	char all[ET_MAX_PROCS * ET_SLOT];
	int done, got = 0;
	fi_addr_t src;

	et_allgather(&got, sizeof(got), all); /* the sender has polled: its count */
	memcpy(&done, all + SENDER * ET_SLOT, sizeof(done));
	CHECK_INT(fi_send(e->ep, buf, 64, NULL, e->addr[SENDER], NULL), 0);
	et_barrier();
	usleep(400 * 1000); /* the sender kills itself 100 ms after the barrier */
	for (int i = 0; i < NMSG; i++) {
		memset(buf, 0, MSG_LEN);
		CHECK_INT(fi_recv(e->ep, buf, MSG_LEN, NULL, FI_ADDR_UNSPEC, NULL), 0);
		if (et_read(e->rxcq, &c, &src, NULL, NULL, i < done ? TMO : 300) != 1)
			break;
		CHECK_INT(c.len, MSG_LEN);
		CHECK_INT(src, e->addr[SENDER]);
		CHECK_INT(et_verify(buf, MSG_LEN, (uint64_t)i + 1), (size_t)-1);
		got++;
	}
	fprintf(stderr, "receiver: %d messages; the sender saw %d sends complete\n", got,
	        done);
	CHECK(got >= done);
	return 0;
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.split_cq = true};
	struct fi_cq_tagged_entry c;
	struct et_ep e;
	char *buf = malloc((size_t)NMSG * MSG_LEN);
	int ret;

	(void)nprocs, (void)arg;
	CHECK(buf != NULL);
	if (!buf || et_open(&e, &o))
		return 1;
	/* One message each way first: the connection is up, and its
	 * socket is the one the sender's sends and the receiver's last
	 * message share. */
	CHECK_INT(fi_recv(e.ep, buf, 64, NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(fi_send(e.ep, buf + 64, 64, NULL, e.addr[!rank], NULL), 0);
	CHECK_INT(et_read(e.txcq, &c, NULL, NULL, NULL, TMO), 1);
	CHECK_INT(et_read(e.rxcq, &c, NULL, NULL, NULL, TMO), 1);
	et_barrier();
	ret = rank == SENDER ? sender(&e, buf) : recver(&e, buf);
	et_close(&e);
	free(buf);
	return check_done() || ret;
}

int main(void)
{
	return et_run("unsent", 2, 60, proc, NULL, 1u << SENDER);
}
