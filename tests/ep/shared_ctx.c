/* shared_ctx.c - shared receive and transmit contexts (man fi_endpoint)
 * across five processes: rank 0 opens four endpoints that share one
 * fi_srx_context and one fi_stx_context; ranks 1-4 each send to two of
 * them.  Every message, eager and rendezvous, posted before or after it
 * came, arrives through the one shared queue with its contents, its
 * sender (FI_SOURCE) and its order per sender; directed receives, peek
 * and claim, multi-receive and cancel work through the context; replies
 * go out through the shared transmit context; and binding or closing
 * contexts wrongly is an error, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define NEP    4 /* rank 0's endpoints; ranks 1..NEP send */
#define NPROC  (NEP + 1)
#define TMO    20000
#define M      24 /* messages each sender sends each endpoint it sends to */
#define SMALL  200
#define LARGE  (256 << 10) /* rendezvous on every link */
#define TAG    0x5a00000000ULL
#define T_DIR  (TAG | 1) /* directed-receive round */
#define T_PEEK (TAG | 2) /* peek/claim round */
#define T_NONE (TAG | 3) /* never sent: cancelled */
#define MULTI  100       /* multi-receive round: bytes per message */
#define NMULTI 4         /* messages per sender in it */

static struct et_ep E; /* every rank's own endpoint: the name exchange */

/* Message seq of sender r: its size, and its first word says who. */
static size_t size_of(unsigned seq)
{
	return seq % 6 == 5 ? LARGE : SMALL + seq;
}

struct head {
	uint32_t rank, seq;
};

/* ---- rank 0: four endpoints, one SRX, one STX -------------------------------- */

struct shared {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain, *other;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *rcntr;
	struct fid_ep *srx, *ep[NEP];
	struct fid_stx *stx;
	fi_addr_t peer[NPROC]; /* ranks 1..NEP in this AV */
	char name[NEP][ET_SLOT];
};

static struct shared S;

static int shared_open(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 4096};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_rx_attr rxa;
	struct fi_tx_attr txa;
	const char *node = getenv("LOOM_TEST_NODE");
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(et_prov());
	hints->ep_attr->type = FI_EP_RDM;
	hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->addr_format = FI_ADDR_STR;
	hints->caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	ret = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints,
	                 &S.info);
	fi_freeinfo(hints);
	OKR(ret);
	CHECK(S.info->ep_attr->tx_ctx_cnt == FI_SHARED_CONTEXT);
	CHECK(S.info->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT);
	CHECK(S.info->domain_attr->max_ep_srx_ctx >= NEP);
	CHECK(S.info->domain_attr->max_ep_stx_ctx >= NEP);
	OKR(fi_fabric(S.info->fabric_attr, &S.fabric, NULL));
	OKR(fi_domain(S.fabric, S.info, &S.domain, NULL));
	OKR(fi_domain(S.fabric, S.info, &S.other, NULL));
	OKR(fi_av_open(S.domain, &ava, &S.av, NULL));
	OKR(fi_cq_open(S.domain, &cqa, &S.cq, NULL));
	OKR(fi_cntr_open(S.domain, &ca, &S.rcntr, NULL));
	rxa = *S.info->rx_attr;
	OKR(fi_srx_context(S.domain, &rxa, &S.srx, NULL));
	CHECK_INT(S.srx->fid.fclass, FI_CLASS_SRX_CTX);
	txa = *S.info->tx_attr;
	OKR(fi_stx_context(S.domain, &txa, &S.stx, NULL));
	CHECK_INT(S.stx->fid.fclass, FI_CLASS_STX_CTX);
	/* A context serves nothing but receives / sends nothing itself. */
	CHECK_INT(fi_send(S.srx, S.name, 8, NULL, 0, NULL), -FI_ENOSYS);
	for (int i = 0; i < NEP; i++) {
		size_t len = sizeof(S.name[i]);

		OKR(fi_endpoint(S.domain, S.info, &S.ep[i], NULL));
		OKR(fi_ep_bind(S.ep[i], &S.av->fid, 0));
		OKR(fi_ep_bind(S.ep[i], &S.stx->fid, 0));
		OKR(fi_ep_bind(S.ep[i], &S.srx->fid, 0));
		/* One of each only. */
		CHECK_INT(fi_ep_bind(S.ep[i], &S.srx->fid, 0), -FI_EINVAL);
		CHECK_INT(fi_ep_bind(S.ep[i], &S.stx->fid, 0), -FI_EINVAL);
		OKR(fi_ep_bind(S.ep[i], &S.cq->fid, FI_TRANSMIT | FI_RECV));
		OKR(fi_ep_bind(S.ep[i], &S.rcntr->fid, FI_RECV));
		OKR(fi_enable(S.ep[i]));
		OKR(fi_getname(&S.ep[i]->fid, S.name[i], &len));
	}
	return 0;
}

/* Contexts of another domain, a second context, closing one in use. */
static void shared_misuse(void)
{
	struct fid_ep *ep = NULL, *srx2 = NULL;
	struct fid_stx *stx2 = NULL;

	CHECK_INT(fi_close(&S.srx->fid), -FI_EBUSY);
	CHECK_INT(fi_close(&S.stx->fid), -FI_EBUSY);
	CHECK_INT(fi_srx_context(S.other, NULL, &srx2, NULL), 0);
	CHECK_INT(fi_stx_context(S.other, NULL, &stx2, NULL), 0);
	CHECK_INT(fi_endpoint(S.domain, S.info, &ep, NULL), 0);
	if (ep && srx2 && stx2) {
		CHECK_INT(fi_ep_bind(ep, &srx2->fid, 0), -FI_EINVAL);
		CHECK_INT(fi_ep_bind(ep, &stx2->fid, 0), -FI_EINVAL);
		CHECK_INT(fi_ep_bind(ep, &S.srx->fid, FI_RECV), -FI_EBADFLAGS);
	}
	/* Enabled: too late to bind a context. */
	CHECK(fi_ep_bind(S.ep[0], &srx2->fid, 0) < 0);
	if (ep)
		CHECK_INT(fi_close(&ep->fid), 0);
	if (srx2)
		CHECK_INT(fi_close(&srx2->fid), 0);
	if (stx2)
		CHECK_INT(fi_close(&stx2->fid), 0);
}

/* Up to n completions of the shared CQ into c (errors are failures). */
static int collect(struct fi_cq_tagged_entry *c, fi_addr_t *src, int n)
{
	int got = 0;

	while (got < n) {
		struct fi_cq_err_entry err;
		ssize_t r = et_read(S.cq, &c[got], &src[got], &err, NULL, TMO);

		if (r != 1) {
			fprintf(stderr, "collect: %d of %d, then %zd (err %d)\n", got, n,
			        r, r == -FI_EAVAIL ? err.err : 0);
			CHECK(0);
			return got;
		}
		got++;
	}
	return got;
}

/* Round 1: 2 * NEP * M messages, half of the receives posted before
 * they came, half after. */
static void round_messages(void)
{
	int total = 2 * NEP * M, posted = 0;
	char **bufs = calloc((size_t)total, sizeof(char *));
	struct fi_cq_tagged_entry *c = calloc((size_t)total, sizeof(*c));
	fi_addr_t *src = calloc((size_t)total, sizeof(*src));
	int slot[NPROC][2 * M] = {{0}}; /* receive (1 + posting index) */

	for (int i = 0; i < total; i++)
		bufs[i] = malloc(LARGE);
	for (; posted < total / 2; posted++)
		CHECK_INT(fi_recv(S.srx, bufs[posted], LARGE, NULL, FI_ADDR_UNSPEC,
		                  bufs[posted]),
		          0);
	CHECK_INT(et_barrier(), 0); /* the senders go */
	CHECK_INT(et_barrier(), 0); /* ... and are done sending */
	/* The rest arrive while no receive is there: unexpected. */
	for (int k = 0; k < 300; k++)
		et_progress(&E), fi_cq_read(S.cq, NULL, 0);
	for (; posted < total; posted++)
		CHECK_INT(fi_recv(S.srx, bufs[posted], LARGE, NULL, FI_ADDR_UNSPEC,
		                  bufs[posted]),
		          0);
	CHECK_INT(collect(c, src, total), total);
	/* Receives match in the order they were posted; a sender's messages
	 * to one endpoint in the order it sent them (their completions may
	 * not: a rendezvous ends after the eager messages behind it). */
	for (int i = 0; i < total; i++) {
		struct head h;
		char *b = c[i].op_context;
		int k = 0;

		CHECK_HEX(c[i].flags, FI_RECV | FI_MSG);
		while (k < total && bufs[k] != b)
			k++;
		CHECK(k < total);
		if (k == total)
			continue;
		CHECK(c[i].buf == b);
		memcpy(&h, b, sizeof(h));
		CHECK(h.rank >= 1 && h.rank <= NEP && h.seq < 2 * M);
		if (h.rank < 1 || h.rank > NEP || h.seq >= 2 * M)
			continue;
		CHECK_INT(c[i].len, size_of(h.seq));
		CHECK(src[i] == S.peer[h.rank]);
		CHECK(et_verify(b + sizeof(h), c[i].len - sizeof(h),
		                h.rank << 16 | h.seq) == (size_t)-1);
		slot[h.rank][h.seq] = k + 1;
	}
	for (int r = 1; r <= NEP; r++) {
		int last[2] = {0, 0};

		for (unsigned seq = 0; seq < 2 * M; seq++) {
			CHECK(slot[r][seq] > last[seq % 2]);
			last[seq % 2] = slot[r][seq];
		}
	}
	CHECK_INT(fi_cntr_read(S.rcntr), total);
	for (int i = 0; i < total; i++)
		free(bufs[i]);
	free(bufs);
	free(c);
	free(src);
}

/* Round 2: ranks 2 and 3 each send T_DIR; a receive directed at rank 3
 * takes rank 3's, one from any source the other. */
static void round_directed(void)
{
	char a[SMALL], b[SMALL];
	struct fi_cq_tagged_entry c[2];
	fi_addr_t src[2];

	CHECK_INT(et_barrier(), 0);
	CHECK_INT(et_barrier(), 0); /* both sent */
	CHECK_INT(fi_trecv(S.srx, a, sizeof(a), NULL, S.peer[3], T_DIR, 0, a), 0);
	CHECK_INT(fi_trecv(S.srx, b, sizeof(b), NULL, FI_ADDR_UNSPEC, T_DIR, 0, b), 0);
	CHECK_INT(collect(c, src, 2), 2);
	for (int i = 0; i < 2; i++) {
		bool dir = c[i].op_context == a;

		CHECK(c[i].op_context == a || c[i].op_context == b);
		CHECK_HEX(c[i].tag, T_DIR);
		CHECK(src[i] == S.peer[dir ? 3 : 2]);
		CHECK_INT((unsigned char)(dir ? a[0] : b[0]), dir ? 3 : 2);
	}
}

/* Round 3: rank 1 sends T_PEEK; a peek finds and claims it, a claiming
 * receive takes it, and a second peek finds nothing. */
static void round_peek(void)
{
	char buf[SMALL];
	struct fi_context2 pctx;
	struct iovec iov = {buf, sizeof(buf)};
	struct fi_msg_tagged m = {.msg_iov = &iov,
	                          .iov_count = 1,
	                          .addr = FI_ADDR_UNSPEC,
	                          .tag = T_PEEK,
	                          .context = &pctx};
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	fi_addr_t src;
	ssize_t r = 0;
	uint64_t end;

	CHECK_INT(et_barrier(), 0);
	CHECK_INT(et_barrier(), 0); /* sent */
	/* Until it has arrived, a peek answers FI_ENOMSG: try again, as long
	 * as a read may wait (a loaded machine delays the sender). */
	end = et_now_us() + TMO * 1000ull;
	do {
		CHECK_INT(fi_trecvmsg(S.srx, &m, FI_PEEK | FI_CLAIM), 0);
		r = et_read(S.cq, &c, &src, &err, NULL, TMO);
	} while (r == -FI_EAVAIL && err.err == FI_ENOMSG && et_now_us() < end);
	CHECK_INT(r, 1);
	if (r != 1)
		return;
	CHECK(c.op_context == &pctx);
	CHECK_HEX(c.tag, T_PEEK);
	CHECK_INT(c.len, SMALL);
	CHECK(src == S.peer[1]);
	CHECK_INT(fi_trecvmsg(S.srx, &m, FI_CLAIM), 0);
	CHECK_INT(et_read(S.cq, &c, &src, &err, NULL, TMO), 1);
	CHECK(c.op_context == &pctx);
	CHECK_INT((unsigned char)buf[0], 1);
	CHECK_INT(fi_trecvmsg(S.srx, &m, FI_PEEK), 0);
	CHECK_INT(et_read(S.cq, &c, &src, &err, NULL, TMO), -FI_EAVAIL);
	CHECK_INT(err.err, FI_ENOMSG);
}

/* Round 4: one multi-receive buffer of the shared context takes NMULTI
 * messages of MULTI bytes from each sender, then is released. */
static void round_multi(void)
{
	size_t cap = NEP * NMULTI * MULTI;
	char *buf = malloc(cap);
	struct iovec iov = {buf, cap};
	struct fi_context2 ctx;
	struct fi_msg m = {
	    .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &ctx};
	int n = 0, released = 0;
	unsigned seen[NPROC] = {0};

	CHECK_INT(fi_recvmsg(S.srx, &m, FI_MULTI_RECV), 0);
	CHECK_INT(et_barrier(), 0);
	while (n < NEP * NMULTI || !released) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		fi_addr_t src;

		if (et_read(S.cq, &c, &src, &err, NULL, TMO) != 1) {
			CHECK(0);
			break;
		}
		CHECK(c.op_context == &ctx);
		if (c.flags & FI_MULTI_RECV)
			released++;
		if (!(c.flags & FI_RECV))
			continue; /* the release on its own */
		n++;
		CHECK_INT(c.len, MULTI);
		CHECK((char *)c.buf >= buf && (char *)c.buf + MULTI <= buf + cap);
		if ((char *)c.buf >= buf && (char *)c.buf + MULTI <= buf + cap) {
			unsigned r = (unsigned char)((char *)c.buf)[0];

			CHECK(r >= 1 && r <= NEP && src == S.peer[r < NPROC ? r : 0]);
			if (r >= 1 && r <= NEP)
				seen[r]++;
		}
	}
	CHECK_INT(n, NEP * NMULTI);
	CHECK_INT(released, 1);
	for (int r = 1; r <= NEP; r++)
		CHECK_INT(seen[r], NMULTI);
	free(buf);
}

/* Round 5: a receive nothing matches is cancelled through the context,
 * its error on the endpoints' CQ; then replies go out from each endpoint
 * through the shared transmit context. */
static void round_cancel_reply(void)
{
	char buf[SMALL], out[NEP][SMALL];
	struct fi_cq_tagged_entry c[NEP];
	struct fi_cq_err_entry err;
	fi_addr_t src[NEP];

	CHECK_INT(fi_trecv(S.srx, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, T_NONE, 0, buf),
	          0);
	CHECK_INT(fi_cancel(&S.srx->fid, buf), 0);
	CHECK_INT(fi_cancel(&S.srx->fid, buf), -FI_ENOENT);
	CHECK_INT(et_read(S.cq, c, src, &err, NULL, TMO), -FI_EAVAIL);
	CHECK_INT(err.err, FI_ECANCELED);
	CHECK(err.op_context == buf);
	for (int i = 0; i < NEP; i++) {
		out[i][0] = (char)(i + 1);
		et_fill(out[i] + 1, SMALL - 1, 900 + i);
		CHECK_INT(fi_send(S.ep[i], out[i], SMALL, NULL, S.peer[i + 1], out[i]),
		          0);
	}
	CHECK_INT(collect(c, src, NEP), NEP);
	for (int i = 0; i < NEP; i++)
		CHECK_HEX(c[i].flags, FI_SEND | FI_MSG);
	CHECK_INT(et_barrier(), 0);
}

static int rank0(void)
{
	char all[NPROC * ET_SLOT];

	if (shared_open())
		return 1;
	/* The names of the four shared endpoints, one exchange each. */
	for (int i = 0; i < NEP; i++)
		CHECK_INT(et_allgather(S.name[i], strlen(S.name[i]) + 1, all), 0);
	for (int r = 1; r <= NEP; r++)
		CHECK_INT(fi_av_insert(S.av, E.peer_name[r], 1, &S.peer[r], 0, NULL), 1);
	shared_misuse();
	round_messages();
	round_directed();
	round_peek();
	round_multi();
	round_cancel_reply();
	for (int i = 0; i < NEP; i++)
		CHECK_INT(fi_close(&S.ep[i]->fid), 0);
	CHECK_INT(fi_close(&S.srx->fid), 0);
	CHECK_INT(fi_close(&S.stx->fid), 0);
	CHECK_INT(fi_close(&S.rcntr->fid), 0);
	CHECK_INT(fi_close(&S.cq->fid), 0);
	CHECK_INT(fi_close(&S.av->fid), 0);
	CHECK_INT(fi_close(&S.other->fid), 0);
	CHECK_INT(fi_close(&S.domain->fid), 0);
	CHECK_INT(fi_close(&S.fabric->fid), 0);
	fi_freeinfo(S.info);
	return 0;
}

/* ---- ranks 1..NEP: plain endpoints ---------------------------------------------- */

/* Send one message, retrying while the queue is full; waits for nothing. */
static void send_one(const void *buf, size_t len, fi_addr_t to, bool tagged, uint64_t tag)
{
	uint64_t end = et_now_us() + TMO * 1000ull;
	ssize_t r;

	do {
		r = tagged ? fi_tsend(E.ep, buf, len, NULL, to, tag, NULL)
		           : fi_send(E.ep, buf, len, NULL, to, NULL);
		if (r == -FI_EAGAIN)
			et_progress(&E);
	} while (r == -FI_EAGAIN && et_now_us() < end);
	CHECK_INT(r, 0);
}

static void wait_sends(int n)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;

	for (int i = 0; i < n; i++)
		if (et_read(E.txcq, &c, NULL, &err, NULL, TMO) != 1) {
			CHECK(0);
			return;
		}
}

static int sender(void)
{
	char all[NPROC * ET_SLOT];
	fi_addr_t to[NEP];
	char **msgs = calloc(2 * M, sizeof(char *));
	char small[SMALL];
	int r = E.rank;

	for (int i = 0; i < NEP; i++) {
		CHECK_INT(et_allgather("", 1, all), 0);
		CHECK_INT(fi_av_insert(E.av, all, 1, &to[i], 0, NULL), 1);
	}
	/* Each round: its messages go once rank 0 is ready, and their
	 * completions are awaited only after the round's second barrier
	 * (a rendezvous, or a tcp send, completes once rank 0 read it).
	 * Round 1: seq alternates between endpoint r-1 and endpoint r % NEP. */
	CHECK_INT(et_barrier(), 0);
	for (unsigned seq = 0; seq < 2 * M; seq++) {
		struct head h = {(uint32_t)r, seq};
		size_t len = size_of(seq);

		msgs[seq] = malloc(len);
		memcpy(msgs[seq], &h, sizeof(h));
		et_fill(msgs[seq] + sizeof(h), len - sizeof(h), (uint64_t)r << 16 | seq);
		send_one(msgs[seq], len, to[seq % 2 ? r % NEP : r - 1], false, 0);
	}
	CHECK_INT(et_barrier(), 0);
	wait_sends(2 * M);
	/* Round 2: directed. */
	CHECK_INT(et_barrier(), 0);
	memset(small, r, sizeof(small));
	if (r == 2 || r == 3)
		send_one(small, SMALL, to[r - 1], true, T_DIR);
	CHECK_INT(et_barrier(), 0);
	if (r == 2 || r == 3)
		wait_sends(1);
	/* Round 3: peek. */
	CHECK_INT(et_barrier(), 0);
	if (r == 1)
		send_one(small, SMALL, to[2], true, T_PEEK);
	CHECK_INT(et_barrier(), 0);
	if (r == 1)
		wait_sends(1);
	/* Round 4: multi-receive, to every endpoint in turn. */
	CHECK_INT(et_barrier(), 0);
	for (int k = 0; k < NMULTI; k++)
		send_one(small, MULTI, to[(r + k) % NEP], false, 0);
	wait_sends(NMULTI);
	/* Round 5: the reply from endpoint r-1, through the shared STX. */
	{
		char in[SMALL];
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		fi_addr_t src = FI_ADDR_NOTAVAIL;

		CHECK_INT(fi_recv(E.ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
		CHECK_INT(et_read(E.rxcq, &c, &src, &err, NULL, TMO), 1);
		CHECK(c.op_context == in);
		CHECK_INT(c.len, SMALL);
		CHECK(src == to[r - 1]);
		CHECK_INT((unsigned char)in[0], r);
		CHECK(et_verify(in + 1, SMALL - 1, 900 + r - 1) == (size_t)-1);
	}
	CHECK_INT(et_barrier(), 0);
	for (unsigned seq = 0; seq < 2 * M; seq++)
		free(msgs[seq]);
	free(msgs);
	return 0;
}

static int body(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (et_open(&E, NULL)) {
		CHECK(0);
		return 1;
	}
	if (rank == 0 ? rank0() : sender())
		CHECK(0);
	CHECK_INT(et_close(&E), 0);
	return check_done();
}

int main(void)
{
	return et_run("shared_ctx: four endpoints on one SRX and one STX", NPROC, 240,
	              body, NULL, 0);
}
