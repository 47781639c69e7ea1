/* names.c - endpoint names on the shm provider across two processes:
 * fi_getname's -FI_ETOOSMALL with the needed length, fi_setname before
 * enabling (the peer reaches the chosen name and FI_SOURCE reports it),
 * and the names fi_setname refuses (another process's, empty or too long,
 * in use, after enable) without making the endpoint unusable. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"

#define TMO 10000

static struct et_ep E;

/* A second endpoint on E's domain, bound but not enabled. */
static struct fid_ep *fresh_ep(void)
{
	struct fid_ep *ep = NULL;

	CHECK_INT(fi_endpoint(E.domain, E.info, &ep, NULL), 0);
	if (!ep)
		return NULL;
	CHECK_INT(fi_ep_bind(ep, &E.txcq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_INT(fi_ep_bind(ep, &E.av->fid, 0), 0);
	return ep;
}

static void local_refusals(const char *mine)
{
	char other[64], buf[64], big[300];
	size_t len;
	struct fid_ep *ep = fresh_ep();

	if (!ep)
		return;
	/* A name of another process (pid 1 is never us). */
	snprintf(other, sizeof(other), "fi_shm://1/00000000000000aa");
	CHECK_INT(fi_setname(&ep->fid, other, strlen(other) + 1), -FI_EINVAL);
	/* Any other text is a name the application chose (tests/shm/named.c),
	 * but not an empty one or one past the longest. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(fi_setname(&ep->fid, big, sizeof(big)), -FI_EINVAL);
	CHECK_INT(fi_setname(&ep->fid, "", 1), -FI_EINVAL);
	CHECK_INT(fi_setname(&ep->fid, NULL, 10), -FI_EINVAL);
	/* E's own name is taken. */
	CHECK(fi_setname(&ep->fid, (void *)mine, strlen(mine) + 1) < 0);
	/* Still usable, under a fresh name. */
	CHECK_INT(fi_enable(ep), 0);
	len = sizeof(buf);
	CHECK_INT(fi_getname(&ep->fid, buf, &len), 0);
	CHECK(strcmp(buf, mine) != 0);
	CHECK(strncmp(buf, "fi_shm://", 9) == 0);
	/* Too late once enabled. */
	snprintf(other, sizeof(other), "fi_shm://%d/00000000000000bb", (int)getpid());
	CHECK_INT(fi_setname(&ep->fid, other, strlen(other) + 1), -FI_EOPBADSTATE);
	CHECK_INT(fi_close(&ep->fid), 0);
}

static void getname_sizes(void)
{
	char buf[64];
	size_t need = strlen(E.name) + 1, len;

	len = 0;
	CHECK_INT(fi_getname(&E.ep->fid, NULL, &len), -FI_ETOOSMALL);
	CHECK_INT(len, need);
	len = 5;
	CHECK_INT(fi_getname(&E.ep->fid, buf, &len), -FI_ETOOSMALL);
	CHECK_INT(len, need);
	len = need;
	memset(buf, 0x55, sizeof(buf));
	CHECK_INT(fi_getname(&E.ep->fid, buf, &len), 0);
	CHECK_INT(len, need);
	CHECK_STR(buf, E.name);
}

static int proc(int rank, int nprocs, void *arg)
{
	char want[64];
	struct et_opts o = {0};
	uint64_t out = 0x1234500 + (uint64_t)rank, in = 0;
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	int rctx, sctx, got = 0;

	(void)nprocs, (void)arg;
	snprintf(want, sizeof(want), "fi_shm://%d/00c0ffee0000000%d", (int)getpid(),
	         rank);
	if (rank == 0)
		o.setname = want;
	if (et_open(&E, &o))
		return 2;
	if (rank == 0)
		CHECK_STR(E.name, want);
	CHECK_STR(E.peer_name[rank], E.name);
	getname_sizes();
	if (rank == 0)
		local_refusals(want);

	/* Both directions; the source of rank 0's message is its chosen
	 * name's AV entry. */
	CHECK_INT(fi_recv(E.ep, &in, sizeof(in), NULL, FI_ADDR_UNSPEC, &rctx), 0);
	et_barrier();
	CHECK_INT(fi_send(E.ep, &out, sizeof(out), NULL, E.addr[1 - rank], &sctx), 0);
	while (got < 2) {
		struct fi_cq_err_entry err;
		ssize_t r = et_read(E.txcq, &c, &src, &err, NULL, TMO);

		if (r != 1) {
			fprintf(stderr, "rank %d: read %zd (err %d)\n", rank, r,
			        r == -FI_EAVAIL ? err.err : 0);
			CHECK(0);
			break;
		}
		got++;
		if (c.op_context == &rctx) {
			CHECK_INT(in, 0x1234500 + (uint64_t)(1 - rank));
			CHECK_INT(src, E.addr[1 - rank]);
		} else {
			CHECK(c.op_context == &sctx);
		}
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	return check_done();
}

int main(void)
{
	return et_run("names", 2, 60, proc, NULL, 0);
}
