/* blocking.c - sleeping for messages from another process: fi_cq_sread
 * sleeps in the kernel (little CPU time) and wakes promptly when the peer
 * sends 200 ms later, for small and rendezvous messages with and without
 * CMA; an FI_WAIT_FD CQ's descriptor becomes readable in epoll when a
 * message arrives, after fi_trywait said it may sleep; a thread asleep on
 * the receive CQ still wakes while another thread polls the send CQ. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define DELAY_US 200000
#define MAX_WAKE 1000000 /* us from the send to the reader awake */
#define MAX_CPU  100000  /* us of CPU a 200 ms sleep may burn, loosely */

static struct et_ep E;

static uint64_t cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Sender side of one round: wait, stamp, send, tell the receiver when. */
static void send_late(char *buf, size_t len, uint64_t seed)
{
	struct fi_cq_tagged_entry c;
	uint64_t t, all[ET_MAX_PROCS * ET_SLOT / 8];
	ssize_t r;

	et_fill(buf, len, seed);
	et_barrier();
	usleep(DELAY_US);
	t = et_now_us();
	CHECK_INT(fi_send(E.ep, buf, len, NULL, E.addr[0], NULL), 0);
	/* The sender sleeps too; a rendezvous needs the receiver's answer. */
	r = fi_cq_sread(E.txcq, &c, 1, NULL, 10000);
	CHECK_INT(r, 1);
	et_allgather(&t, sizeof(t), all);
}

static void sread_round(char *buf, size_t len, uint64_t seed)
{
	struct fi_cq_tagged_entry c;
	uint64_t t0, cpu0, woke, cpu, sent, all[ET_MAX_PROCS * ET_SLOT / 8];
	ssize_t r;
	int ctx;

	if (E.rank == 1) {
		send_late(buf, len, seed);
		return;
	}
	memset(buf, 0, len);
	CHECK_INT(fi_recv(E.ep, buf, len, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	et_barrier();
	t0 = et_now_us();
	cpu0 = cpu_us();
	r = fi_cq_sread(E.rxcq, &c, 1, NULL, 10000);
	woke = et_now_us();
	cpu = cpu_us() - cpu0;
	et_allgather(&woke, sizeof(woke), all);
	sent = all[ET_SLOT / 8]; /* rank 1's stamp */
	CHECK_INT(r, 1);
	CHECK(c.op_context == &ctx);
	CHECK_INT(c.len, len);
	CHECK_INT(et_verify(buf, len, seed), (size_t)-1);
	fprintf(stderr,
	        "sread %zu B: slept %.1f ms, woke %.3f ms after the send, CPU %.2f ms\n",
	        len, (woke - t0) / 1000.0, ((double)woke - (double)sent) / 1000.0,
	        cpu / 1000.0);
	CHECK(woke - t0 >= DELAY_US / 2); /* it did wait for the message */
	CHECK(woke > sent && woke - sent < MAX_WAKE);
	CHECK(cpu < MAX_CPU);
}

/* The application's own epoll over the CQ's FI_WAIT_FD descriptor. */
static void fd_round(char *buf)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;
	struct fi_cq_tagged_entry c;
	struct fid *fids[1];
	uint64_t woke, sent, cpu0, all[ET_MAX_PROCS * ET_SLOT / 8];
	int fd = -1, ep, n, ctx;

	if (E.rank == 1) {
		send_late(buf, 777, 4242);
		return;
	}
	CHECK_INT(fi_control(&E.rxcq->fid, FI_GETWAIT, &fd), 0);
	CHECK(fd >= 0);
	ep = epoll_create1(0);
	CHECK_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	CHECK_INT(fi_recv(E.ep, buf, 777, NULL, FI_ADDR_UNSPEC, &ctx), 0);
	et_barrier();
	fids[0] = &E.rxcq->fid;
	CHECK_INT(fi_trywait(E.fabric, fids, 1), 0);
	CHECK_INT(epoll_wait(ep, &out, 1, 0), 0); /* nothing yet */
	cpu0 = cpu_us();
	n = epoll_wait(ep, &out, 1, 10000);
	woke = et_now_us();
	CHECK_INT(n, 1);
	CHECK(cpu_us() - cpu0 < MAX_CPU);
	/* Read before waiting on the sender: under manual progress its send
	 * may complete only once our progress answered (udp acknowledges). */
	CHECK_INT(fi_cq_read(E.rxcq, &c, 1), 1);
	et_allgather(&woke, sizeof(woke), all);
	sent = all[ET_SLOT / 8];
	CHECK(woke > sent && woke - sent < MAX_WAKE);
	fprintf(stderr, "epoll: readable %.3f ms after the send\n",
	        ((double)woke - (double)sent) / 1000.0);
	CHECK(c.op_context == &ctx);
	CHECK_INT(et_verify(buf, 777, 4242), (size_t)-1);
	close(ep);
}

struct sleeper {
	int ctx;
	ssize_t r;
	struct fi_cq_tagged_entry c;
	uint64_t woke;
};

static void *sleep_rx(void *arg)
{
	struct sleeper *s = arg;

	s->r = fi_cq_sread(E.rxcq, &s->c, 1, NULL, 10000);
	s->woke = et_now_us();
	return NULL;
}

/* Two readers of one endpoint: a thread asleep in fi_cq_sread on the
 * receive CQ while this one polls the send CQ for a while and stops
 * before the message comes.  The poller's progress must not take the
 * sleeper's wake-up away. */
static void mixed_round(char *buf)
{
	struct sleeper s = {0};
	struct fi_cq_tagged_entry c;
	uint64_t t0, sent, all[ET_MAX_PROCS * ET_SLOT / 8];
	pthread_t th;

	if (E.rank == 1) {
		send_late(buf, 64, 99);
		return;
	}
	memset(buf, 0, 64);
	CHECK_INT(fi_recv(E.ep, buf, 64, NULL, FI_ADDR_UNSPEC, &s.ctx), 0);
	et_barrier();
	CHECK_INT(pthread_create(&th, NULL, sleep_rx, &s), 0);
	usleep(DELAY_US / 10); /* the sleeper is asleep */
	t0 = et_now_us();
	while (et_now_us() - t0 < DELAY_US / 2)
		CHECK_INT(fi_cq_read(E.txcq, &c, 1), -FI_EAGAIN);
	CHECK_INT(pthread_join(th, NULL), 0);
	et_allgather(&s.woke, sizeof(s.woke), all);
	sent = all[ET_SLOT / 8];
	CHECK_INT(s.r, 1);
	CHECK(s.c.op_context == &s.ctx);
	CHECK_INT(et_verify(buf, 64, 99), (size_t)-1);
	fprintf(stderr, "sread beside a poller: woke %.3f ms after the send\n",
	        ((double)s.woke - (double)sent) / 1000.0);
	CHECK(s.woke > sent && s.woke - sent < MAX_WAKE);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.wait = FI_WAIT_FD, .split_cq = true};
	char *buf = malloc((size_t)8 << 20);

	(void)rank, (void)nprocs, (void)arg;
	if (!buf || et_open(&E, &o))
		return 2;
	sread_round(buf, 64, 1);
	sread_round(buf, 30000, 2);
	sread_round(buf, (size_t)8 << 20, 3);
	fd_round(buf);
	mixed_round(buf);
	CHECK_INT(et_close(&E), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	int bad = et_run("blocking", 2, 120, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("blocking (no CMA)", 2, 120, proc, NULL, 0);
	return bad;
}
