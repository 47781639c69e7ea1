/* scalable_ep.c - scalable endpoints (man fi_endpoint) across two
 * processes: each opens one fi_scalable_ep with NCTX transmit and NCTX
 * receive contexts behind one address, and NCTX threads each drive one
 * transmit and one receive context with CQs of their own.  Messages
 * named for a receive context (FI_NAMED_RX_CTX, fi_rx_addr) arrive there
 * and nowhere else, eager and rendezvous, contents checked; completions
 * go to the context's own CQ.  RMA writes with remote CQ data and
 * atomics named for a receive context are reported by that context's CQ
 * and remote-write counter, and no other's.  Every arrival names the
 * peer's endpoint as its source (FI_SOURCE), whichever of its transmit
 * contexts sent it.  Misuse (an index past the count, a
 * context opened twice, sends on a receive context, closing the endpoint
 * under its contexts) is an error, never a crash. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"

#define NCTX  4
#define BITS  2   /* rx_ctx_bits for NCTX */
#define M     200 /* messages each thread sends */
#define SMALL 96
#define LARGE (192 << 10)
#define TMO   20000

struct head {
	uint32_t thread, seq;
};

static struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *sep, *tx[NCTX], *rx[NCTX];
	struct fid_cq *txcq[NCTX], *rxcq[NCTX];
	struct fid_cntr *rcntr[NCTX]; /* FI_REMOTE_WRITE of each receive context */
	fi_addr_t peer;
	char name[ET_SLOT];
	char *rbuf[NCTX][M];
} S;

static int rank;
/* Threads that finished their messages; set once both processes have:
 * till then each thread goes on driving its contexts, whose answers
 * (credit, acknowledgements) the peer's sends may still wait for. */
static atomic_int finished, stop;

static size_t size_of(unsigned seq)
{
	return seq % 16 == 7 ? LARGE : SMALL + seq % 64;
}

static int open_sep(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 2048};
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .rx_ctx_bits = BITS};
	const char *node = getenv("LOOM_TEST_NODE");
	struct fid_ep *bad = NULL;
	size_t len = sizeof(S.name);
	char b[8];
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(et_prov());
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = FI_ADDR_STR;
	hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT | FI_NAMED_RX_CTX | FI_SOURCE;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	ret = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints,
	                 &S.info);
	fi_freeinfo(hints);
	OKR(ret);
	CHECK(S.info->caps & FI_NAMED_RX_CTX);
	CHECK(S.info->caps & FI_SOURCE);
	CHECK(S.info->domain_attr->max_ep_tx_ctx >= NCTX);
	CHECK(S.info->domain_attr->max_ep_rx_ctx >= NCTX);
	OKR(fi_fabric(S.info->fabric_attr, &S.fabric, NULL));
	OKR(fi_domain(S.fabric, S.info, &S.domain, NULL));
	OKR(fi_av_open(S.domain, &ava, &S.av, NULL));
	/* More contexts than the domain allows: refused. */
	S.info->ep_attr->tx_ctx_cnt = S.info->domain_attr->max_ep_tx_ctx + 1;
	CHECK_INT(fi_scalable_ep(S.domain, S.info, &bad, NULL), -FI_EINVAL);
	S.info->ep_attr->tx_ctx_cnt = NCTX;
	S.info->ep_attr->rx_ctx_cnt = NCTX;
	OKR(fi_scalable_ep(S.domain, S.info, &S.sep, NULL));
	CHECK_INT(S.sep->fid.fclass, FI_CLASS_SEP);
	OKR(fi_scalable_ep_bind(S.sep, &S.av->fid, 0));
	/* Not for communication itself. */
	CHECK_INT(fi_send(S.sep, b, sizeof(b), NULL, 0, NULL), -FI_ENOSYS);
	CHECK_INT(fi_tx_context(S.sep, NCTX, NULL, &bad, NULL), -FI_EINVAL);
	CHECK_INT(fi_rx_context(S.sep, -1, NULL, &bad, NULL), -FI_EINVAL);
	for (int i = 0; i < NCTX; i++) {
		OKR(fi_tx_context(S.sep, i, NULL, &S.tx[i], NULL));
		OKR(fi_rx_context(S.sep, i, NULL, &S.rx[i], NULL));
		CHECK_INT(S.tx[i]->fid.fclass, FI_CLASS_TX_CTX);
		CHECK_INT(S.rx[i]->fid.fclass, FI_CLASS_RX_CTX);
		OKR(fi_cq_open(S.domain, &cqa, &S.txcq[i], NULL));
		OKR(fi_cq_open(S.domain, &cqa, &S.rxcq[i], NULL));
		/* Not enabled yet: nothing to post to. */
		CHECK_INT(fi_recv(S.rx[i], b, sizeof(b), NULL, FI_ADDR_UNSPEC, NULL),
		          -FI_EOPBADSTATE);
		OKR(fi_ep_bind(S.tx[i], &S.txcq[i]->fid, FI_SEND));
		OKR(fi_ep_bind(S.rx[i], &S.rxcq[i]->fid, FI_RECV));
		OKR(fi_cntr_open(S.domain,
		                 &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP},
		                 &S.rcntr[i], NULL));
		/* A transmit context counts no remote access. */
		CHECK_INT(fi_ep_bind(S.tx[i], &S.rcntr[i]->fid, FI_REMOTE_WRITE),
		          -FI_EBADFLAGS);
		OKR(fi_ep_bind(S.rx[i], &S.rcntr[i]->fid, FI_REMOTE_WRITE));
		OKR(fi_enable(S.tx[i]));
		OKR(fi_enable(S.rx[i]));
		/* Each does its half only. */
		CHECK_INT(fi_send(S.rx[i], b, sizeof(b), NULL, 0, NULL), -FI_ENOSYS);
		CHECK_INT(fi_recv(S.tx[i], b, sizeof(b), NULL, FI_ADDR_UNSPEC, NULL),
		          -FI_ENOSYS);
	}
	CHECK_INT(fi_tx_context(S.sep, 0, NULL, &bad, NULL), -FI_EBUSY);
	OKR(fi_enable(S.sep));
	OKR(fi_getname(&S.sep->fid, S.name, &len));
	CHECK_INT(fi_close(&S.sep->fid), -FI_EBUSY); /* contexts open */
	return 0;
}

/* Receives for every message this context will take: M, from thread i
 * (even seq) and thread i - 1 (odd seq) of the peer. */
static void post_receives(int i)
{
	for (int k = 0; k < M; k++) {
		S.rbuf[i][k] = malloc(LARGE);
		CHECK_INT(fi_recv(S.rx[i], S.rbuf[i][k], LARGE, NULL, FI_ADDR_UNSPEC,
		                  S.rbuf[i][k]),
		          0);
	}
}

struct worker {
	int i;
	pthread_t t;
	int failures;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	int i = w->i, sent = 0, sdone = 0, rdone = 0, bad = 0;
	char *msgs[M];
	uint64_t end = et_now_us() + TMO * 1000ull;
	unsigned got[NCTX] = {0};
	fi_addr_t src;

	for (int k = 0; k < M; k++) {
		struct head h = {(uint32_t)i, (uint32_t)k};
		size_t len = size_of(k);

		msgs[k] = malloc(len);
		memcpy(msgs[k], &h, sizeof(h));
		et_fill(msgs[k] + sizeof(h), len - sizeof(h),
		        (uint64_t)rank << 32 | i << 16 | k);
	}
	while ((sdone < M || rdone < M) && et_now_us() < end) {
		struct fi_cq_tagged_entry c;
		ssize_t r;

		if (sent < M) {
			int to = sent % 2 ? (i + 1) % NCTX : i;

			r = fi_send(S.tx[i], msgs[sent], size_of(sent), NULL,
			            fi_rx_addr(S.peer, to, BITS), msgs[sent]);
			if (r == 0)
				sent++;
			else if (r != -FI_EAGAIN)
				bad++, sent = M;
		}
		r = fi_cq_read(S.txcq[i], &c, 1);
		if (r == 1) {
			int k = 0;

			while (k < M && msgs[k] != c.op_context)
				k++;
			sdone++;
			bad += k == M; /* not this context's send */
		} else if (r != -FI_EAGAIN) {
			bad++;
			break;
		}
		r = fi_cq_readfrom(S.rxcq[i], &c, 1, &src);
		if (r == 1) {
			struct head h;
			int k = 0;

			rdone++;
			bad += src != S.peer; /* its endpoint, whichever context */
			while (k < M && S.rbuf[i][k] != c.op_context)
				k++;
			if (k == M) { /* another context's receive */
				bad++;
				continue;
			}
			memcpy(&h, c.buf, sizeof(h));
			/* Only what was named for this context: thread i's
			 * even messages, thread i - 1's odd ones. */
			if (h.seq >= M ||
			    !(h.seq % 2 ? (h.thread + 1) % NCTX == (uint32_t)i
			                : h.thread == (uint32_t)i)) {
				bad++;
				continue;
			}
			got[h.thread]++;
			if (c.len != size_of(h.seq) ||
			    et_verify((char *)c.buf + sizeof(h), c.len - sizeof(h),
			              (uint64_t)(1 - rank) << 32 | h.thread << 16 |
			                  h.seq) != (size_t)-1)
				bad++;
		} else if (r != -FI_EAGAIN) {
			bad++;
			break;
		}
	}
	if (sdone != M || rdone != M || got[i] != M / 2 ||
	    got[(i + NCTX - 1) % NCTX] != M / 2) {
		fprintf(stderr,
		        "rank %d thread %d: sent %d/%d done, received %d/%d "
		        "(%u from thread %d, %u from thread %d)\n",
		        rank, i, sdone, M, rdone, M, got[i], i,
		        got[(i + NCTX - 1) % NCTX], (i + NCTX - 1) % NCTX);
		bad++;
	}
	w->failures = bad;
	atomic_fetch_add(&finished, 1);
	while (!atomic_load(&stop)) {
		struct fi_cq_tagged_entry c;

		if (fi_cq_read(S.txcq[i], &c, 1) == 1 ||
		    fi_cq_read(S.rxcq[i], &c, 1) == 1)
			w->failures++; /* nothing more was sent */
		sched_yield();
	}
	for (int k = 0; k < M; k++)
		free(msgs[k]);
	return NULL;
}

/* Each transmit context i writes one word with remote CQ data 0x100 + i
 * to receive context i of the peer, and adds 1 to another word through
 * receive context i + 1: receive context j reports one write with data
 * 0x100 + j on its CQ, and its remote-write counter counts two. */
static void rma_phase(void)
{
	uint64_t *mem = calloc(2 * NCTX, sizeof(uint64_t)), val[NCTX], one = 1;
	struct {
		uint64_t addr, key;
	} me, them;
	char all[2 * ET_SLOT];
	struct fid_mr *mr = NULL;
	int posted = 0, done = 0, data_seen[NCTX] = {0}, bad = 0;
	uint64_t end = et_now_us() + TMO * 1000ull;
	bool counted = false;
	fi_addr_t src;

	CHECK_INT(fi_mr_reg(S.domain, mem, 2 * NCTX * sizeof(uint64_t),
	                    FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &mr, NULL),
	          0);
	me.addr = (uintptr_t)mem;
	me.key = mr ? fi_mr_key(mr) : 0;
	CHECK_INT(et_allgather(&me, sizeof(me), all), 0);
	memcpy(&them, all + (1 - rank) * ET_SLOT, sizeof(them));
	while ((posted < 2 * NCTX || done < 2 * NCTX || !counted) && et_now_us() < end) {
		struct fi_cq_tagged_entry c;

		if (posted < 2 * NCTX) {
			int i = posted / 2;
			ssize_t r;

			val[i] = (uint64_t)rank << 8 | (uint64_t)i;
			if (posted % 2 == 0)
				r = fi_writedata(
				    S.tx[i], &val[i], sizeof(val[i]), NULL,
				    0x100 + (uint64_t)i, fi_rx_addr(S.peer, i, BITS),
				    them.addr + 8 * (uint64_t)i, them.key, &val[i]);
			else
				r = fi_atomic(S.tx[i], &one, 1, NULL,
				              fi_rx_addr(S.peer, (i + 1) % NCTX, BITS),
				              them.addr + 8 * (uint64_t)(NCTX + i),
				              them.key, FI_UINT64, FI_SUM, &one);
			if (r == 0)
				posted++;
			else if (r != -FI_EAGAIN)
				bad++, posted = done = 2 * NCTX;
		}
		counted = true;
		for (int i = 0; i < NCTX; i++) {
			if (fi_cq_read(S.txcq[i], &c, 1) == 1)
				done++;
			if (fi_cq_readfrom(S.rxcq[i], &c, 1, &src) == 1) {
				bad += !(c.flags & FI_REMOTE_CQ_DATA) ||
				       c.data != 0x100 + (uint64_t)i || src != S.peer;
				data_seen[i]++;
			}
			counted &= fi_cntr_read(S.rcntr[i]) >= 2 && data_seen[i] >= 1;
		}
	}
	CHECK_INT(bad, 0);
	CHECK_INT(done, 2 * NCTX);
	for (int i = 0; i < NCTX; i++) {
		CHECK_INT(data_seen[i], 1);
		CHECK_INT(fi_cntr_read(S.rcntr[i]), 2);
		CHECK_INT(mem[i], (uint64_t)(1 - rank) << 8 | (uint64_t)i);
		CHECK_INT(mem[NCTX + i], 1);
	}
	CHECK_INT(et_barrier(), 0);
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	free(mem);
}

static int body(int r, int nprocs, void *arg)
{
	char all[2 * ET_SLOT];
	struct worker w[NCTX];

	(void)nprocs, (void)arg;
	rank = r;
	if (open_sep()) {
		et_allgather("", 1, all);
		return 1;
	}
	CHECK_INT(et_allgather(S.name, strlen(S.name) + 1, all), 0);
	CHECK_INT(fi_av_insert(S.av, all + (1 - rank) * ET_SLOT, 1, &S.peer, 0, NULL), 1);
	for (int i = 0; i < NCTX; i++)
		post_receives(i);
	CHECK_INT(et_barrier(), 0);
	for (int i = 0; i < NCTX; i++) {
		w[i].i = i;
		CHECK_INT(pthread_create(&w[i].t, NULL, work, &w[i]), 0);
	}
	while (atomic_load(&finished) < NCTX)
		usleep(1000);
	CHECK_INT(et_barrier(), 0);
	atomic_store(&stop, 1);
	for (int i = 0; i < NCTX; i++) {
		pthread_join(w[i].t, NULL);
		CHECK_INT(w[i].failures, 0);
	}
	CHECK_INT(et_barrier(), 0);
	rma_phase();
	for (int i = 0; i < NCTX; i++) {
		CHECK_INT(fi_close(&S.tx[i]->fid), 0);
		CHECK_INT(fi_close(&S.rx[i]->fid), 0);
		CHECK_INT(fi_close(&S.txcq[i]->fid), 0);
		CHECK_INT(fi_close(&S.rxcq[i]->fid), 0);
		CHECK_INT(fi_close(&S.rcntr[i]->fid), 0);
		for (int k = 0; k < M; k++)
			free(S.rbuf[i][k]);
	}
	CHECK_INT(fi_close(&S.sep->fid), 0);
	CHECK_INT(fi_close(&S.av->fid), 0);
	CHECK_INT(fi_close(&S.domain->fid), 0);
	CHECK_INT(fi_close(&S.fabric->fid), 0);
	fi_freeinfo(S.info);
	return check_done();
}

int main(void)
{
	return et_run("scalable_ep: 4 transmit and 4 receive contexts, 4 threads", 2, 120,
	              body, NULL, 0);
}
