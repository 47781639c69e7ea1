/* rma_event.c - FI_RMA_EVENT on the provider under test across two
 * processes: the target's remote-read and remote-write counters count
 * exactly the RMA and atomic operations that reached it (man fi_endpoint:
 * reads, fetching and compare atomics are remote reads; writes and base
 * atomics remote writes), a counter bound to one region with fi_mr_bind
 * counts only the writes into that region, and an endpoint created
 * without FI_RMA_EVENT refuses remote counters. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define SZ     ((size_t)1 << 20)
#define TMO    20000
#define NWRITE 12 /* half small (inline), half 512 KiB (rendezvous) */
#define NREAD  7
#define NATOM  5 /* base atomics */
#define NFETCH 4
#define NCMP   3
#define NOTHER 6 /* writes into the region without a counter */

struct keys {              /* one all-gather slot */
	uint64_t a, a_key; /* region with its own counter (FI_REMOTE_WRITE) */
	uint64_t b, b_key; /* region without */
	char pad[ET_SLOT - 32];
};

static struct et_ep E;

static void wait_tx(int n)
{
	for (int i = 0; i < n; i++) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r = et_read(E.txcq, &c, NULL, &err, NULL, TMO);

		if (r != 1) {
			fprintf(stderr, "initiator: completion %d: %zd (err %d)\n", i, r,
			        r == -FI_EAVAIL ? err.err : 0);
			CHECK(0);
			return;
		}
	}
}

static void initiator(const struct keys *k, char *buf)
{
	uint64_t one = 1, old, cmp = 0, swap = 7;

	for (int i = 0; i < NWRITE; i++) {
		size_t len = i % 2 ? 512 * 1024 : 64;

		CHECK_INT(fi_write(E.ep, buf, len, NULL, E.addr[1], k->a + 4096, k->a_key,
		                   NULL),
		          0);
	}
	for (int i = 0; i < NREAD; i++)
		CHECK_INT(fi_read(E.ep, buf, 1000, NULL, E.addr[1], k->a, k->a_key, NULL),
		          0);
	for (int i = 0; i < NATOM; i++)
		CHECK_INT(fi_atomic(E.ep, &one, 1, NULL, E.addr[1], k->a, k->a_key,
		                    FI_UINT64, FI_SUM, NULL),
		          0);
	for (int i = 0; i < NFETCH; i++)
		CHECK_INT(fi_fetch_atomic(E.ep, &one, 1, NULL, &old, NULL, E.addr[1],
		                          k->a, k->a_key, FI_UINT64, FI_SUM, NULL),
		          0);
	wait_tx(NWRITE + NREAD + NATOM + NFETCH);
	for (int i = 0; i < NCMP; i++) {
		CHECK_INT(fi_compare_atomic(E.ep, &swap, 1, NULL, &cmp, NULL, &old, NULL,
		                            E.addr[1], k->a + 8, k->a_key, FI_UINT64,
		                            FI_CSWAP, NULL),
		          0);
		wait_tx(1);
	}
	for (int i = 0; i < NOTHER; i++)
		CHECK_INT(fi_write(E.ep, buf, 300, NULL, E.addr[1], k->b, k->b_key, NULL),
		          0);
	wait_tx(NOTHER);
}

static int reach(struct fid_cntr *c, uint64_t want)
{
	uint64_t end = et_now_us() + TMO * 1000ull;

	while (fi_cntr_read(c) < want && et_now_us() < end)
		;
	return fi_cntr_read(c) == want;
}

static void no_event_refused(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *c = NULL;
	struct fid_ep *ep = NULL;

	hints->fabric_attr->prov_name = strdup(et_prov());
	hints->ep_attr->type = FI_EP_RDM;
	/* The domain's name and its fabric's: over IPv6 the interface's
	 * name alone names the IPv4 domain too. */
	hints->domain_attr->name = strdup(E.info->domain_attr->name);
	hints->fabric_attr->name = strdup(E.info->fabric_attr->name);
	hints->addr_format = E.info->addr_format;
	hints->caps = FI_MSG | FI_RMA;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info)
		return;
	/* FI_RMA_EVENT is a secondary capability the provider may add:
	 * take it away. */
	info->caps &= ~FI_RMA_EVENT;
	info->rx_attr->caps &= ~FI_RMA_EVENT;
	CHECK_INT(fi_endpoint(E.domain, info, &ep, NULL), 0);
	CHECK_INT(fi_cntr_open(E.domain, &ca, &c, NULL), 0);
	if (!ep || !c) {
		if (ep)
			fi_close(&ep->fid);
		if (c)
			fi_close(&c->fid);
		fi_freeinfo(info);
		return;
	}
	CHECK_INT(fi_ep_bind(ep, &c->fid, FI_REMOTE_WRITE), -FI_EINVAL);
	CHECK_INT(fi_ep_bind(ep, &c->fid, FI_REMOTE_READ), -FI_EINVAL);
	CHECK_INT(fi_ep_bind(ep, &c->fid, FI_WRITE), 0);
	CHECK_INT(fi_close(&ep->fid), 0);
	CHECK_INT(fi_close(&c->fid), 0);
	fi_freeinfo(info);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT,
	                    .remote_cntrs = true};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct keys mine = {0}, all[ET_MAX_PROCS];
	struct fid_mr *mr_a = NULL, *mr_b = NULL;
	struct fid_cntr *mr_cntr = NULL;
	char *a = calloc(1, SZ), *b = calloc(1, SZ);

	(void)nprocs, (void)arg;
	if (!a || !b || et_open(&E, &o))
		return 2;
	CHECK(E.info->caps & FI_RMA_EVENT);
	if (rank == 1) {
		CHECK_INT(fi_mr_reg(E.domain, a, SZ, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
		                    0, FI_RMA_EVENT, &mr_a, NULL),
		          0);
		CHECK_INT(fi_cntr_open(E.domain, &ca, &mr_cntr, NULL), 0);
		CHECK_INT(fi_mr_bind(mr_a, &mr_cntr->fid, FI_REMOTE_WRITE), 0);
		CHECK_INT(fi_mr_enable(mr_a), 0);
		CHECK_INT(fi_mr_reg(E.domain, b, SZ, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
		                    0, 0, &mr_b, NULL),
		          0);
		mine.a = (uintptr_t)a;
		mine.a_key = fi_mr_key(mr_a);
		mine.b = (uintptr_t)b;
		mine.b_key = fi_mr_key(mr_b);
	}
	if (et_allgather(&mine, sizeof(mine), all))
		return 2;
	if (rank == 0) {
		initiator(&all[1], a);
		no_event_refused();
		/* The initiator's own remote counters saw nothing. */
		CHECK_INT(fi_cntr_read(E.rwcntr), 0);
		CHECK_INT(fi_cntr_read(E.rrcntr), 0);
	} else {
		CHECK(reach(E.rwcntr, NWRITE + NATOM + NOTHER));
		CHECK(reach(E.rrcntr, NREAD + NFETCH + NCMP));
		/* Writes and base atomics into region a only. */
		CHECK(reach(mr_cntr, NWRITE + NATOM));
		CHECK_INT(fi_cntr_readerr(E.rwcntr), 0);
		CHECK_INT(fi_cntr_readerr(E.rrcntr), 0);
	}
	et_barrier();
	if (rank == 1) {
		/* Nothing more arrives: the counts are exact, not lower bounds. */
		CHECK_INT(fi_cntr_read(E.rwcntr), NWRITE + NATOM + NOTHER);
		CHECK_INT(fi_cntr_read(E.rrcntr), NREAD + NFETCH + NCMP);
		CHECK_INT(fi_cntr_read(mr_cntr), NWRITE + NATOM);
		CHECK_INT(fi_close(&mr_a->fid), 0);
		CHECK_INT(fi_close(&mr_b->fid), 0);
		CHECK_INT(fi_close(&mr_cntr->fid), 0);
	}
	et_barrier();
	CHECK_INT(et_close(&E), 0);
	free(a);
	free(b);
	return check_done();
}

int main(void)
{
	int bad = et_run("rma_event", 2, 120, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("rma_event (no CMA)", 2, 120, proc, NULL, 0);
	return bad;
}
