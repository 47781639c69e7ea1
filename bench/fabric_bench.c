/* fabric_bench: latency, bandwidth and message rate of one libfabric operation
 * (send, tagged, write, read, writedata, fetching atomic) between forked process
 * pairs, over the public API only; prints one CSV row per size and metric. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "common.h"
#include "tool_fabric.h"

#define BENCH_TAG   0x10adull
#define MAX_NAME    512
#define MAX_WINDOW  1024
#define STALL_US    (stall_s * 1e6)
#define ATOMIC_ELEM sizeof(uint64_t)

/* Seconds without a completion before a side gives up: the peer is gone.
 * Half of -T (at most 30), so a stall is reported before the launcher's
 * deadline. */
static double stall_s = 30;

enum op { OP_SEND, OP_TAGGED, OP_WRITE, OP_READ, OP_WRITEDATA, OP_FATOMIC };

/* The table that parameterises the program: what each operation asks of the
 * provider and how its latency is measured. */
static const struct op_desc {
	const char *name;
	enum op op;
	uint64_t caps;
	bool two_sided; /* the target posts receives and answers */
	bool pingpong;  /* latency is half a round trip, not one operation */
} op_table[] = {
    {"send", OP_SEND, FI_MSG, true, true},
    {"tagged", OP_TAGGED, FI_TAGGED, true, true},
    {"write", OP_WRITE, FI_RMA, false, false},
    {"read", OP_READ, FI_RMA, false, false},
    {"writedata", OP_WRITEDATA, FI_RMA, false, true},
    {"fatomic", OP_FATOMIC, FI_ATOMIC, false, false},
};

static const struct {
	const char *name;
	enum fi_ep_type type;
} ep_table[] = {{"rdm", FI_EP_RDM}, {"msg", FI_EP_MSG}, {"dgram", FI_EP_DGRAM}};

struct cfg {
	const char *prov;
	enum tool_ep_kind kind; /* -x */
	const char *domain;
	const char *ep_name;
	enum fi_ep_type ep_type;
	const struct op_desc *op;
	bool bw; /* else latency */
	struct bench_opts o;
	int window;
	int pairs;
	struct bench_shared *sh;
};

/* One side of a pair. */
struct fb {
	const struct cfg *c;
	int rank, pair, oob;
	struct tool_fabric fab;
	char *buf; /* [tx | rx/target | fetch results], each region `region` bytes */
	size_t region;
	uint64_t raddr, rkey; /* the peer's target region */
	size_t max_atomic;
	int window;
	long tx_done, rx_done, rdata_done;
	uint64_t last_data;
	struct fi_context2 tx_ctx[MAX_WINDOW + 1], rx_ctx[MAX_WINDOW + 1];
};

/* Per-repetition handshake on the out-of-band socket. */
struct rep_msg {
	int32_t size_idx;
	int32_t rep;
	int64_t iters;
	uint64_t seed;
};

static int fail(struct fb *f, const char *what, ssize_t ret)
{
	fprintf(stderr, "fabric_bench[%d.%d]: %s: %s (%zd)\n", f ? f->pair : -1,
	        f ? f->rank : -1, what, fi_strerror((int)(ret < 0 ? -ret : ret)), ret);
	return -1;
}

static int getinfo(const struct cfg *c, void *dest, size_t len, uint32_t fmt,
                   struct fi_info **out)
{
	struct fi_info *h = tool_hints(c->ep_type, c->op->caps, c->prov, c->domain);

	if (!h)
		return -FI_ENOMEM;
	/* Remote CQ data is asked for through its size; FI_REMOTE_CQ_DATA is
	 * not a capability every provider lists. */
	if (c->op->op == OP_WRITEDATA)
		h->domain_attr->cq_data_size = sizeof(uint64_t);
	if (c->kind == TOOL_EP_SHARED) {
		h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
		h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	}
	return tool_getinfo(h, dest, len, fmt, 0, out);
}

/* ---- completions --------------------------------------------------------- */

static int read_cq(struct fb *f)
{
	struct fi_cq_data_entry e[16];
	ssize_t n = fi_cq_read(f->fab.cq, e, 16);

	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		char buf[128];
		fi_cq_readerr(f->fab.cq, &err, 0);
		fprintf(stderr, "fabric_bench[%d.%d]: completion error %s: %s\n", f->pair,
		        f->rank, fi_strerror(err.err),
		        fi_cq_strerror(f->fab.cq, err.prov_errno, err.err_data, buf,
		                       sizeof(buf)));
		return -1;
	}
	if (n < 0)
		return fail(f, "fi_cq_read", n);
	for (ssize_t i = 0; i < n; i++) {
		char *ctx = e[i].op_context;
		if (ctx >= (char *)f->tx_ctx &&
		    ctx < (char *)(f->tx_ctx + MAX_WINDOW + 1)) {
			f->tx_done++;
		} else if (ctx >= (char *)f->rx_ctx &&
		           ctx < (char *)(f->rx_ctx + MAX_WINDOW + 1)) {
			f->rx_done++;
		} else if (e[i].flags & FI_REMOTE_CQ_DATA) {
			f->rdata_done++;
			f->last_data = e[i].data;
		}
	}
	return (int)n;
}

/* Progresses until *counter reaches target; fails when nothing completes for
 * STALL_US (a dead or stuck peer must not hang the benchmark). */
static int wait_count(struct fb *f, long *counter, long target)
{
	double deadline = 0;
	unsigned spins = 0;

	while (*counter < target) {
		int n = read_cq(f);
		if (n < 0)
			return -1;
		if (n > 0) {
			deadline = 0;
			continue;
		}
		/* A provider's helper thread may share this CPU (the pair is
		 * pinned): let it run now and then. */
		if (++spins % 64 == 0)
			sched_yield();
		if (spins % 4096)
			continue;
		if (!deadline)
			deadline = tool_now_us() + STALL_US;
		else if (tool_now_us() > deadline) {
			fprintf(
			    stderr,
			    "fabric_bench[%d.%d]: no completion in %.0f s (sends %ld, "
			    "receives %ld, remote data %ld done)\n",
			    f->pair, f->rank, STALL_US / 1e6, f->tx_done, f->rx_done,
			    f->rdata_done);
			return -1;
		}
	}
	return 0;
}

/* Posts with a retry on -FI_EAGAIN, progressing in between. */
#define POST(f, what, call)                                                              \
	do {                                                                             \
		ssize_t ret_;                                                            \
		double dl_ = 0;                                                          \
		while ((ret_ = (call)) == -FI_EAGAIN) {                                  \
			if (read_cq(f) < 0)                                              \
				return -1;                                               \
			if (!dl_)                                                        \
				dl_ = tool_now_us() + STALL_US;                          \
			else if (tool_now_us() > dl_)                                    \
				return fail(f, what " (stalled)", ret_);                 \
		}                                                                        \
		if (ret_)                                                                \
			return fail(f, what, ret_);                                      \
	} while (0)

static char *tx_buf(struct fb *f)
{
	return f->buf;
}

static char *rx_buf(struct fb *f)
{
	return f->buf + f->region;
}

static char *res_buf(struct fb *f)
{
	return f->buf + 2 * f->region;
}

static int post_recv(struct fb *f, int slot)
{
	size_t len = f->region;

	if (len > f->fab.info->ep_attr->max_msg_size)
		len = f->fab.info->ep_attr->max_msg_size;
	if (f->c->op->op == OP_TAGGED)
		POST(f, "fi_trecv",
		     fi_trecv(f->fab.rx, rx_buf(f), len, f->fab.desc, FI_ADDR_UNSPEC,
		              BENCH_TAG, 0, &f->rx_ctx[slot]));
	else
		POST(f, "fi_recv",
		     fi_recv(f->fab.rx, rx_buf(f), len, f->fab.desc, FI_ADDR_UNSPEC,
		             &f->rx_ctx[slot]));
	return 0;
}

/* Returns 1 if the send completes without a completion entry (inject). */
static int post_send(struct fb *f, size_t size, int slot, bool allow_inject)
{
	bool inject = allow_inject && size <= f->fab.info->tx_attr->inject_size;

	if (f->c->op->op == OP_TAGGED) {
		if (inject)
			POST(f, "fi_tinject",
			     fi_tinject(f->fab.tx, tx_buf(f), size, f->fab.peer,
			                BENCH_TAG));
		else
			POST(f, "fi_tsend",
			     fi_tsend(f->fab.tx, tx_buf(f), size, f->fab.desc,
			              f->fab.peer, BENCH_TAG, &f->tx_ctx[slot]));
	} else {
		if (inject)
			POST(f, "fi_inject",
			     fi_inject(f->fab.tx, tx_buf(f), size, f->fab.peer));
		else
			POST(f, "fi_send",
			     fi_send(f->fab.tx, tx_buf(f), size, f->fab.desc, f->fab.peer,
			             &f->tx_ctx[slot]));
	}
	return inject ? 1 : 0;
}

static int post_onesided(struct fb *f, size_t size, int slot, uint64_t data)
{
	switch (f->c->op->op) {
	case OP_WRITE:
		POST(f, "fi_write",
		     fi_write(f->fab.tx, tx_buf(f), size, f->fab.desc, f->fab.peer,
		              f->raddr, f->rkey, &f->tx_ctx[slot]));
		break;
	case OP_WRITEDATA:
		POST(f, "fi_writedata",
		     fi_writedata(f->fab.tx, tx_buf(f), size, f->fab.desc, data,
		                  f->fab.peer, f->raddr, f->rkey, &f->tx_ctx[slot]));
		break;
	case OP_READ:
		POST(f, "fi_read",
		     fi_read(f->fab.tx, rx_buf(f), size, f->fab.desc, f->fab.peer,
		             f->raddr, f->rkey, &f->tx_ctx[slot]));
		break;
	case OP_FATOMIC:
		POST(f, "fi_fetch_atomic",
		     fi_fetch_atomic(f->fab.tx, tx_buf(f), size / ATOMIC_ELEM,
		                     f->fab.desc, res_buf(f), f->fab.desc, f->fab.peer,
		                     f->raddr, f->rkey, FI_UINT64, FI_SUM,
		                     &f->tx_ctx[slot]));
		break;
	default:
		return -1;
	}
	return 0;
}

/* ---- setup --------------------------------------------------------------- */

static int send_name(struct fb *f, fid_t fid)
{
	char name[MAX_NAME];
	size_t len = sizeof(name);
	uint32_t hdr[2];
	int ret = fi_getname(fid, name, &len);

	if (ret)
		return fail(f, "fi_getname", ret);
	hdr[0] = (uint32_t)len;
	hdr[1] = f->fab.info->addr_format;
	return oob_send(f->oob, hdr, sizeof(hdr)) || oob_send(f->oob, name, len) ? -1 : 0;
}

static int recv_name(struct fb *f, char *name, size_t *len, uint32_t *fmt)
{
	uint32_t hdr[2];

	if (oob_recv(f->oob, hdr, sizeof(hdr)) || hdr[0] > MAX_NAME)
		return -1;
	*len = hdr[0];
	*fmt = hdr[1];
	return oob_recv(f->oob, name, *len);
}

static int wait_cm(struct fb *f, uint32_t want, struct fi_eq_cm_entry *entry)
{
	uint32_t event;
	ssize_t n = fi_eq_sread(f->fab.eq, &event, entry, sizeof(*entry), 30000, 0);

	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {0};
		fi_eq_readerr(f->fab.eq, &err, 0);
		return fail(f, "connection", err.err);
	}
	if (n < 0)
		return fail(f, "fi_eq_sread", n);
	if (event != want)
		return fail(f, "unexpected CM event", -FI_EOTHER);
	return 0;
}

static int open_ep(struct fb *f, struct fi_info *info)
{
	const char *call;
	int ret;

	f->fab.kind = f->c->kind;
	ret = tool_open_ep(&f->fab, info, FI_CQ_FORMAT_DATA, &call);

	/* Every region is the target of some operation; keys differ per process. */
	if (!ret)
		ret = tool_reg_mr(&f->fab, info, f->buf, 3 * f->region,
		                  FI_SEND | FI_RECV | FI_READ | FI_WRITE |
		                      FI_REMOTE_READ | FI_REMOTE_WRITE,
		                  (uint64_t)(f->pair * 2 + f->rank + 1), &call);
	if (ret)
		return fail(f, call, ret);
	if (f->c->op->op == OP_FATOMIC) {
		struct fi_atomic_attr attr = {0};
		ret = fi_query_atomic(f->fab.domain, FI_UINT64, FI_SUM, &attr,
		                      FI_FETCH_ATOMIC);
		f->max_atomic = ret ? 0 : attr.count;
	}
	return 0;
}

static int setup(struct fb *f)
{
	const struct cfg *c = f->c;
	char name[MAX_NAME];
	size_t len, max = 4096;
	uint32_t fmt;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_cm_entry entry;
	struct {
		uint64_t addr, key;
	} mine, theirs;
	void *p;
	int ret;

	for (int i = 0; i < c->o.nsizes; i++)
		if (c->o.sizes[i] > max)
			max = c->o.sizes[i];
	f->region = (max + 4095) & ~(size_t)4095;
	if (posix_memalign(&p, 4096, 3 * f->region))
		return -1;
	f->buf = p;
	memset(f->buf, 0, 3 * f->region);

	/* The client of a msg endpoint needs the server's name before
	 * fi_getinfo; everyone else asks with no address. */
	if (c->ep_type == FI_EP_MSG && f->rank == 1) {
		if (recv_name(f, name, &len, &fmt))
			return -1;
		ret = getinfo(c, name, len, fmt, &f->fab.info);
	} else {
		ret = getinfo(c, NULL, 0, 0, &f->fab.info);
	}
	if (ret)
		return fail(f, "fi_getinfo", ret);
	if (f->rank == 1 && f->pair == 0)
		snprintf(c->sh->resolved_prov, sizeof(c->sh->resolved_prov), "%s",
		         f->fab.info->fabric_attr->prov_name);
	if ((ret = fi_fabric(f->fab.info->fabric_attr, &f->fab.fabric, NULL)))
		return fail(f, "fi_fabric", ret);
	if (c->ep_type == FI_EP_MSG) {
		if ((ret = fi_eq_open(f->fab.fabric, &eq_attr, &f->fab.eq, NULL)))
			return fail(f, "fi_eq_open", ret);
	}

	if (c->ep_type == FI_EP_MSG && f->rank == 0) {
		if ((ret = fi_passive_ep(f->fab.fabric, f->fab.info, &f->fab.pep, NULL)))
			return fail(f, "fi_passive_ep", ret);
		if ((ret = fi_pep_bind(f->fab.pep, &f->fab.eq->fid, 0)) ||
		    (ret = fi_listen(f->fab.pep)))
			return fail(f, "fi_listen", ret);
		if (send_name(f, &f->fab.pep->fid) || wait_cm(f, FI_CONNREQ, &entry))
			return -1;
		ret = open_ep(f, entry.info);
		if (!ret && (ret = fi_accept(f->fab.ep, NULL, 0)))
			fail(f, "fi_accept", ret);
		fi_freeinfo(entry.info);
		if (ret || wait_cm(f, FI_CONNECTED, &entry))
			return -1;
	} else if (c->ep_type == FI_EP_MSG) {
		if (open_ep(f, f->fab.info))
			return -1;
		if ((ret = fi_connect(f->fab.ep, name, NULL, 0)))
			return fail(f, "fi_connect", ret);
		if (wait_cm(f, FI_CONNECTED, &entry))
			return -1;
	} else {
		if (open_ep(f, f->fab.info) || send_name(f, &f->fab.ep->fid) ||
		    recv_name(f, name, &len, &fmt))
			return -1;
		ret = fi_av_insert(f->fab.av, name, 1, &f->fab.peer, 0, NULL);
		if (ret != 1)
			return fail(f, "fi_av_insert", ret);
	}

	/* Both sides compute the same window from the same limits. */
	f->window = c->bw ? c->window : 1;
	if ((size_t)f->window > f->fab.info->tx_attr->size)
		f->window = (int)f->fab.info->tx_attr->size;
	if ((size_t)f->window > f->fab.info->rx_attr->size)
		f->window = (int)f->fab.info->rx_attr->size;
	if (f->window < 1)
		f->window = 1;

	mine.addr = f->fab.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR
	                ? (uint64_t)(uintptr_t)rx_buf(f)
	                : (uint64_t)f->region;
	mine.key = fi_mr_key(f->fab.mr);
	if (oob_send(f->oob, &mine, sizeof(mine)) ||
	    oob_recv(f->oob, &theirs, sizeof(theirs)))
		return -1;
	f->raddr = theirs.addr;
	f->rkey = theirs.key;
	return 0;
}

static void teardown(struct fb *f)
{
	tool_fabric_close(&f->fab);
	free(f->buf);
}

/* Why a size cannot run on this endpoint, or NULL. Both sides agree. */
static const char *skip_reason(struct fb *f, size_t size)
{
	enum op op = f->c->op->op;

	if (size > f->fab.info->ep_attr->max_msg_size)
		return "above max_msg_size";
	if (!f->c->op->two_sided && size == 0)
		return "zero-byte RMA/atomic not measured";
	if (op == OP_FATOMIC &&
	    (size % ATOMIC_ELEM || size / ATOMIC_ELEM > f->max_atomic))
		return "not a whole number of uint64 within the atomic count limit";
	if (f->c->ep_type == FI_EP_DGRAM && f->c->bw)
		return "bandwidth over unreliable datagrams not measured";
	return NULL;
}

/* ---- the measured loops ------------------------------------------------- */

static int check_rx(struct fb *f, const char *buf, size_t size, uint64_t seed,
                    const char *what)
{
	long bad;

	if (!f->c->o.verify)
		return 0;
	bad = bench_check(buf, size, seed);
	if (bad >= 0) {
		fprintf(stderr,
		        "fabric_bench[%d.%d]: %s data check failed at byte %ld of %zu\n",
		        f->pair, f->rank, what, bad, size);
		return -1;
	}
	return 0;
}

/* Every uint64 of the size bytes at buf must be want; says what is not. */
static int check_u64s(const char *buf, size_t size, long want, const char *what)
{
	const uint64_t *v = (const uint64_t *)buf;

	for (size_t e = 0; e < size / ATOMIC_ELEM; e++) {
		if (v[e] != (uint64_t)want) {
			fprintf(stderr, "fabric_bench: %s %" PRIu64 ", expected %ld\n",
			        what, v[e], want);
			return -1;
		}
	}
	return 0;
}

/* Posts one send (injected where it can be) and waits for it: *sent counts
 * the completions to expect since tx0, which injected sends do not give. */
static int send_one(struct fb *f, size_t size, int slot, long tx0, long *sent)
{
	int inj = post_send(f, size, slot, true);

	if (inj < 0)
		return -1;
	*sent += !inj;
	return wait_count(f, &f->tx_done, tx0 + *sent);
}

/* Waits for receive number rx_target, checks it, and has the next one
 * posted if repost. */
static int recv_one(struct fb *f, size_t size, uint64_t seed, long rx_target, bool repost,
                    const char *what)
{
	if (wait_count(f, &f->rx_done, rx_target) ||
	    check_rx(f, rx_buf(f), size, seed, what) || (repost && post_recv(f, 0)))
		return -1;
	return 0;
}

/* Two-sided latency: a ping-pong, each side keeping one receive posted.
 * Completions are counted against totals fixed at the start, since one side
 * may read the peer's next message while it waits for its own send. */
static int pingpong(struct fb *f, size_t size, long iters, uint64_t seed, bool client)
{
	long rx0 = f->rx_done, tx0 = f->tx_done, sent = 0;

	for (long i = 0; i < iters; i++) {
		uint64_t s = seed + (uint64_t)i;
		/* The last receive of a repetition is not replaced: the next
		 * repetition posts its own. */
		bool more = i + 1 < iters;

		if (!client && recv_one(f, size, s, rx0 + i + 1, more, "ping"))
			return -1;
		if (f->c->o.verify)
			bench_fill(tx_buf(f), size, s);
		if (send_one(f, size, 0, tx0, &sent))
			return -1;
		if (client && recv_one(f, size, s, rx0 + i + 1, more, "pong"))
			return -1;
	}
	return 0;
}

/* Two-sided bandwidth: windows of sends, one small acknowledgement each;
 * completions counted against fixed totals as in pingpong(). */
static int stream(struct fb *f, size_t size, long iters, uint64_t seed, bool client)
{
	int w = f->window;
	long windows = (iters + w - 1) / w, rx0 = f->rx_done, tx0 = f->tx_done, sent = 0;

	for (long k = 0; k < windows; k++) {
		uint64_t s = seed + (uint64_t)k;
		if (client) {
			if (f->c->o.verify)
				bench_fill(tx_buf(f), size, s);
			for (int j = 0; j < w; j++)
				if (post_send(f, size, j, false) < 0)
					return -1;
			if (wait_count(f, &f->tx_done, tx0 + (k + 1) * w) ||
			    wait_count(f, &f->rx_done, rx0 + k + 1) ||
			    (k + 1 < windows && post_recv(f, w)))
				return -1;
		} else {
			if (wait_count(f, &f->rx_done, rx0 + (k + 1) * w) ||
			    check_rx(f, rx_buf(f), size, s, "stream"))
				return -1;
			for (int j = 0; j < w && k + 1 < windows; j++)
				if (post_recv(f, j))
					return -1;
			if (send_one(f, 4, w, tx0, &sent))
				return -1;
		}
	}
	return 0;
}

/* One-sided, initiator: windows of operations (a window of 1 for latency).
 * writedata latency is a ping-pong of writedata instead. */
static int initiate(struct fb *f, size_t size, long iters, uint64_t seed)
{
	enum op op = f->c->op->op;
	int w = f->window;

	if (op == OP_WRITEDATA && !f->c->bw) {
		for (long i = 0; i < iters; i++) {
			long tx_target = f->tx_done + 1, data_target = f->rdata_done + 1;
			if (post_onesided(f, size, 0, (uint64_t)i) ||
			    wait_count(f, &f->tx_done, tx_target) ||
			    wait_count(f, &f->rdata_done, data_target))
				return -1;
		}
		return check_rx(f, rx_buf(f), size, seed, "writedata (returned)");
	}
	for (long done = 0; done < iters;) {
		int n = iters - done < w ? (int)(iters - done) : w;
		long tx_target = f->tx_done + n;
		for (int j = 0; j < n; j++)
			if (post_onesided(f, size, j, (uint64_t)(done + j)))
				return -1;
		if (wait_count(f, &f->tx_done, tx_target))
			return -1;
		if (op == OP_READ && check_rx(f, rx_buf(f), size, seed, "read"))
			return -1;
		if (op == OP_FATOMIC && f->c->o.verify && w == 1 &&
		    check_u64s(res_buf(f), size, done, "fetched"))
			return -1;
		done += n;
	}
	return 0;
}

/* One-sided, target: progress (answering writedata pings) until the
 * initiator says it is done on the out-of-band socket. */
static int serve(struct fb *f, size_t size, long iters)
{
	bool answer = f->c->op->op == OP_WRITEDATA && !f->c->bw;
	long answered = 0, base = f->rdata_done;
	unsigned spins = 0;

	for (;;) {
		if (read_cq(f) < 0)
			return -1;
		if (answer && f->rdata_done - base > answered && answered < iters) {
			long tx_target = f->tx_done + 1;
			answered++;
			if (post_onesided(f, size, 0, (uint64_t)answered) ||
			    wait_count(f, &f->tx_done, tx_target))
				return -1;
		}
		if (++spins % 256 == 0) {
			int r = oob_poll(f->oob);
			if (r < 0)
				return -1;
			/* The initiator's writes completed there (transmit
			 * complete): the data is here once their remote CQ data
			 * is, which may come later. */
			if (r > 0)
				return f->c->op->op == OP_WRITEDATA
				           ? wait_count(f, &f->rdata_done, base + iters)
				           : 0;
		}
	}
}

static int verify_target(struct fb *f, size_t size, long iters, uint64_t seed)
{
	enum op op = f->c->op->op;

	if (!f->c->o.verify)
		return 0;
	if (op == OP_WRITE || op == OP_WRITEDATA)
		return check_rx(f, rx_buf(f), size, seed, "write target");
	if (op == OP_FATOMIC)
		return check_u64s(rx_buf(f), size, iters, "atomic target");
	return 0;
}

/* Target side preparation before a repetition starts. */
static int prepare_target(struct fb *f, size_t size, uint64_t seed)
{
	enum op op = f->c->op->op;

	switch (op) {
	case OP_SEND:
	case OP_TAGGED:
		for (int j = 0; j < f->window; j++)
			if (post_recv(f, j))
				return -1;
		break;
	case OP_READ:
		bench_fill(rx_buf(f), size, seed);
		break;
	case OP_FATOMIC:
		memset(rx_buf(f), 0, size);
		break;
	case OP_WRITEDATA:
		/* Answers carry the same data back, for the initiator to check. */
		bench_fill(tx_buf(f), size, seed);
		memset(rx_buf(f), 0, size);
		break;
	default:
		memset(rx_buf(f), 0, size);
		break;
	}
	return 0;
}

static int prepare_initiator(struct fb *f, size_t size, uint64_t seed)
{
	enum op op = f->c->op->op;

	if (op == OP_SEND || op == OP_TAGGED)
		return post_recv(f, f->c->bw ? f->window : 0);
	if (op == OP_FATOMIC) {
		uint64_t *t = (uint64_t *)tx_buf(f);
		for (size_t e = 0; e < size / ATOMIC_ELEM; e++)
			t[e] = 1;
	} else if (op == OP_WRITE || op == OP_WRITEDATA) {
		bench_fill(tx_buf(f), size, seed);
	}
	memset(rx_buf(f), 0, size);
	return 0;
}

/* Waits for the peer's word on the out-of-band socket while progressing
 * the endpoint: with manual progress a provider moves data only in the
 * application's calls, and over a lossy link a packet of ours lost just
 * before (the last message of a stream, or the acknowledgement of the
 * peer's) is sent again only if we call.  Completions read meanwhile
 * count as usual. */
static int oob_wait(struct fb *f, void *buf, size_t len)
{
	unsigned spins = 0;
	int r;

	while (!(r = oob_poll(f->oob))) {
		if (read_cq(f) < 0)
			return -1;
		if (++spins % 64 == 0)
			sched_yield();
	}
	return r < 0 ? -1 : oob_recv(f->oob, buf, len);
}

static int run_rep(struct fb *f, int si, int rep, long iters, uint64_t seed)
{
	const struct cfg *c = f->c;
	size_t size = c->o.sizes[si];
	struct rep_msg m = {si, rep, iters, seed};
	char byte = 0;
	bool two = c->op->two_sided;

	if (f->rank == 1) {
		double t0, us;
		/* The pairs start each repetition together, so the aggregate
		 * is a rate under contention. */
		if (rep >= 0)
			bench_barrier(c->sh);
		if (prepare_initiator(f, size, seed) || oob_send(f->oob, &m, sizeof(m)) ||
		    oob_wait(f, &byte, 1))
			return -1;
		t0 = tool_now_us();
		if (two) {
			if ((c->bw ? stream : pingpong)(f, size, iters, seed, true))
				return -1;
		} else if (initiate(f, size, iters, seed)) {
			return -1;
		}
		us = tool_now_us() - t0;
		if (oob_send(f->oob, &byte, 1) || oob_wait(f, &byte, 1))
			return -1;
		if (byte) {
			fprintf(stderr, "fabric_bench[%d]: the target's check failed\n",
			        f->pair);
			return -1;
		}
		if (rep >= 0) {
			double ops = (double)iters;
			double lat = us / (double)iters;
			if (c->op->pingpong && !c->bw)
				lat /= 2;
			c->sh->value[si][f->pair][rep] =
			    c->bw ? ops * (double)size / us : lat;
			c->sh->rate[si][f->pair][rep] = ops / us;
		}
		return 0;
	}

	if (oob_wait(f, &m, sizeof(m)) || prepare_target(f, size, m.seed) ||
	    oob_send(f->oob, &byte, 1))
		return -1;
	if (two) {
		if ((c->bw ? stream : pingpong)(f, size, m.iters, m.seed, false))
			return -1;
		if (oob_wait(f, &byte, 1))
			return -1;
	} else {
		if (serve(f, size, m.iters) || oob_wait(f, &byte, 1))
			return -1;
	}
	byte = verify_target(f, size, m.iters, m.seed) ? 1 : 0;
	return oob_send(f->oob, &byte, 1);
}

static int child(int rank, int pair, int fd, void *arg)
{
	const struct cfg *c = arg;
	struct fb *f = calloc(1, sizeof(*f));
	int ret = -1;

	if (!f)
		return -1;
	f->c = c;
	f->rank = rank;
	f->pair = pair;
	f->oob = fd;
	f->fab.peer = FI_ADDR_UNSPEC;
	if (setup(f))
		goto out;
	for (int si = 0; si < c->o.nsizes; si++) {
		size_t size = c->o.sizes[si];
		const char *why = skip_reason(f, size);
		long iters;

		if (why) {
			if (rank == 1 && pair == 0)
				snprintf(c->sh->skip_reason[si],
				         sizeof(c->sh->skip_reason[si]), "%s", why);
			continue;
		}
		iters = bench_scale_iters(c->o.iters, size, c->o.budget,
		                          c->bw ? 2L * f->window : 10);
		if (c->bw && c->op->two_sided)
			iters = (iters + f->window - 1) / f->window * f->window;
		/* A short warm-up makes connections and pins pages outside the
		 * measured repetitions. */
		if (run_rep(f, si, -1, iters / 10 + 1, 1000 + (uint64_t)si))
			goto out;
		for (int r = 0; r < c->o.reps; r++)
			if (run_rep(f, si, r, iters, (uint64_t)(si * 64 + r) * 1000003u))
				goto out;
		if (rank == 1 && pair == 0) {
			c->sh->iters[si] = iters;
			c->sh->done[si] = 1;
		}
	}
	ret = 0;
out:
	teardown(f);
	free(f);
	return ret;
}

static int probe(const struct cfg *c)
{
	struct fi_info *info = NULL;
	int ret = getinfo(c, NULL, 0, 0, &info);

	if (ret) {
		printf("probe,%s,%s,%s,missing\n", c->prov ? c->prov : "", c->ep_name,
		       c->op->name);
		return 2;
	}
	printf("probe,%s,%s,%s,%s\n", c->prov ? c->prov : "", c->ep_name, c->op->name,
	       info->fabric_attr->prov_name);
	fi_freeinfo(info);
	return 0;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: fabric_bench -p PROV [-e rdm|msg|dgram] [-o OP] [-k lat|bw]\n"
	    "                    [-S SIZES] [-I OPS] [-B MiB] [-r REPS] [-w WINDOW]\n"
	    "                    [-n PAIRS] [-c] [-T SECONDS] [-A] [-d DOMAIN] [-P]\n"
	    "                    [-x plain|shared|sep]\n"
	    "  OP: send tagged write read writedata fatomic (default send)\n"
	    "  -k lat   latency (half round trip for send, tagged, writedata;\n"
	    "           one completed operation for write, read, fatomic)\n"
	    "  -k bw    bandwidth and message rate, WINDOW operations in flight\n"
	    "  -S       '1:16m' (powers of two), '64,4k,1m' or one size (default 1:1m)\n"
	    "  -I       operations per repetition at small sizes (default 1000 lat,\n"
	    "           10000 bw); -B caps the bytes moved per repetition\n"
	    "  -n       process pairs running at once; rates are summed\n"
	    "  -c       verify the data of every transfer\n"
	    "  -A       do not pin the two processes of a pair to different CPUs\n"
	    "  -P       only check that the provider offers the operation (exit 2 if "
	    "not)\n"
	    "  -x       plain (default): one endpoint; shared: bound to a shared\n"
	    "           transmit and receive context; sep: a scalable endpoint's\n"
	    "           transmit and receive context\n"
	    "Prints '# library: PATH' then CSV: %s\n",
	    "bench,op,metric,provider,ep_type,size,iterations,window,pairs,reps,median,"
	    "min,max,unit");
}

int main(int argc, char **argv)
{
	struct cfg c = {.ep_name = "rdm",
	                .ep_type = FI_EP_RDM,
	                .op = &op_table[0],
	                .o = BENCH_OPTS_INIT,
	                .window = 64,
	                .pairs = 1};
	bool do_probe = false;
	int i, opt, ret;

	while ((opt = bench_getopt(argc, argv, "p:e:o:k:w:n:d:x:Ph" BENCH_OPTS, &c.o)) !=
	       -1) {
		switch (opt) {
		case 'p':
			c.prov = optarg;
			break;
		case 'e':
			if ((i = BENCH_LOOKUP(ep_table, optarg, "endpoint type")) < 0)
				return 1;
			c.ep_name = ep_table[i].name;
			c.ep_type = ep_table[i].type;
			break;
		case 'o':
			if ((i = BENCH_LOOKUP(op_table, optarg, "operation")) < 0)
				return 1;
			c.op = &op_table[i];
			break;
		case 'k':
			if (strcmp(optarg, "lat") && strcmp(optarg, "bw")) {
				usage();
				return 1;
			}
			c.bw = !strcmp(optarg, "bw");
			break;
		case 'w':
			c.window = atoi(optarg);
			break;
		case 'n':
			c.pairs = atoi(optarg);
			break;
		case 'd':
			c.domain = optarg;
			break;
		case 'P':
			do_probe = true;
			break;
		case 'x':
			if (!strcmp(optarg, "shared"))
				c.kind = TOOL_EP_SHARED;
			else if (!strcmp(optarg, "sep"))
				c.kind = TOOL_EP_SCALABLE;
			else if (strcmp(optarg, "plain")) {
				usage();
				return 1;
			}
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 1;
		}
	}
	if (bench_opts_check(&c.o, c.bw ? 10000 : 1000, c.bw ? 256 : 32) || c.pairs < 1 ||
	    c.pairs > BENCH_MAX_PAIRS || c.window < 1 || c.window > MAX_WINDOW) {
		usage();
		return 1;
	}
	stall_s = c.o.timeout / 2.0 < 30 ? c.o.timeout / 2.0 : 30;

	bench_print_library((void *)&fi_getinfo);
	if (do_probe)
		return probe(&c);

	c.sh = bench_shared_map();
	if (!c.sh)
		return 1;
	c.sh->barrier_parties = (unsigned)c.pairs;
	ret = bench_run_pairs(c.pairs, c.o.timeout, c.o.pin, child, &c);
	printf("# provider: %s as %s\n", c.prov ? c.prov : "(any)",
	       c.sh->resolved_prov[0] ? c.sh->resolved_prov : "?");
	bench_print_header();
	for (int si = 0; si < c.o.nsizes; si++) {
		struct bench_row row = {"fabric",
		                        c.op->name,
		                        c.bw ? "bw" : "lat",
		                        c.prov ? c.prov : "any",
		                        c.ep_name,
		                        c.o.sizes[si],
		                        c.sh->iters[si],
		                        c.bw ? c.window : 1,
		                        c.pairs};
		double v[BENCH_MAX_REPS];

		if (bench_skipped(c.sh, si, c.o.sizes[si]) || !c.sh->done[si])
			continue;
		bench_aggregate(c.sh, si, c.pairs, c.o.reps, c.bw, false, v);
		bench_print_row(&row, c.o.reps, v);
		if (c.bw) {
			row.metric = "rate";
			bench_aggregate(c.sh, si, c.pairs, c.o.reps, true, true, v);
			bench_print_row(&row, c.o.reps, v);
		}
	}
	if (ret)
		fprintf(stderr, "fabric_bench: FAILED (%s %s %s)\n",
		        c.prov ? c.prov : "any", c.ep_name, c.op->name);
	return ret ? 1 : 0;
}
