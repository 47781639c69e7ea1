/* cq_formats.c - every CQ entry format (CONTEXT, MSG, DATA, TAGGED and the
 * provider's pick for UNSPEC) between two processes: the entry size a read
 * writes, and each field the format has, for sends, receives with and
 * without remote CQ data, tagged receives, multi-receive buffers, and
 * FI_ETRUNC error entries for eager and rendezvous messages. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define SENDER   0
#define RECEIVER 1
#define TMO_US   (20 * 1000000ull)
#define RAW      128 /* more than two entries of any format */
#define POISON   0xa5
#define SRC_NONE ((fi_addr_t)0xdead0000ULL) /* readfrom must overwrite it */

#define SZ_CONTEXT sizeof(struct fi_cq_entry)
#define SZ_MSG     sizeof(struct fi_cq_msg_entry)
#define SZ_DATA    sizeof(struct fi_cq_data_entry)
#define SZ_TAGGED  sizeof(struct fi_cq_tagged_entry)

static struct et_ep E;
static size_t fs; /* entry size of the CQ's format, as established */

/* r = call, retried while it says -FI_EAGAIN (allowed at any time, e.g.
 * while a provider connects), driving progress meanwhile. */
#define POST(r, call)                                                                    \
	do {                                                                             \
		uint64_t end_ = et_now_us() + TMO_US;                                    \
		while (((r) = (call)) == -FI_EAGAIN && et_now_us() < end_)               \
			et_progress(&E);                                                 \
	} while (0)

/* Each format is a prefix of the tagged one, which is what lets a read be
 * looked at through struct fi_cq_tagged_entry with the fields past the
 * format's size cleared. */
_Static_assert(offsetof(struct fi_cq_msg_entry, len) ==
                       offsetof(struct fi_cq_tagged_entry, len) &&
                   offsetof(struct fi_cq_data_entry, data) ==
                       offsetof(struct fi_cq_tagged_entry, data),
               "formats are prefixes of the tagged entry");

struct got {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};

static const char *fmt_name(size_t size)
{
	switch (size) {
	case SZ_CONTEXT:
		return "FI_CQ_FORMAT_CONTEXT";
	case SZ_MSG:
		return "FI_CQ_FORMAT_MSG";
	case SZ_DATA:
		return "FI_CQ_FORMAT_DATA";
	case SZ_TAGGED:
		return "FI_CQ_FORMAT_TAGGED";
	default:
		return "no format";
	}
}

static void take(struct got *g, const unsigned char *raw, fi_addr_t src)
{
	memset(&g->e, 0, sizeof(g->e));
	memcpy(&g->e, raw, fs < SZ_TAGGED ? fs : SZ_TAGGED);
	g->src = src;
}

/* The first byte from off on that a read changed, or RAW. */
static size_t touched_from(const unsigned char *raw, size_t off)
{
	for (size_t i = off; i < RAW; i++)
		if (raw[i] != POISON)
			return i;
	return RAW;
}

/* Read up to count entries into a poisoned raw buffer, waiting for the
 * first: the count read, -FI_EAVAIL with *err filled, or the failure. */
static ssize_t raw_read(unsigned char *raw, size_t count, fi_addr_t *src,
                        struct fi_cq_err_entry *err)
{
	uint64_t end = et_now_us() + TMO_US;
	ssize_t r;

	memset(raw, POISON, RAW);
	for (size_t i = 0; i < count; i++)
		src[i] = SRC_NONE;
	do {
		r = fi_cq_readfrom(E.txcq, raw, count, src);
	} while (r == -FI_EAGAIN && et_now_us() < end);
	if (r == -FI_EAVAIL) {
		memset(err, 0, sizeof(*err));
		CHECK_INT(fi_cq_readerr(E.txcq, err, 0), 1);
	} else if (r < 1) {
		fprintf(stderr, "rank %d: fi_cq_readfrom = %zd (%s), want an entry\n",
		        E.rank, r, fi_strerror((int)-r));
	}
	return r;
}

/* Read one entry: 1 with *g filled, -FI_EAVAIL with *err filled, or the
 * failure.  The read must not write past one entry of the format. */
static ssize_t get(struct got *g, struct fi_cq_err_entry *err)
{
	_Alignas(8) unsigned char raw[RAW];
	fi_addr_t src;
	ssize_t r = raw_read(raw, 1, &src, err);
	size_t t;

	if (r != 1)
		return r < 0 ? r : -FI_EOTHER;
	t = touched_from(raw, fs);
	if (t != RAW) {
		fprintf(stderr, "rank %d: a %zu-byte %s entry read wrote byte %zu\n",
		        E.rank, fs, fmt_name(fs), t);
		CHECK(0);
	}
	take(g, raw, src);
	return 1;
}

/* ---- what each side asserts -------------------------------------------- */

static void check_tx(const struct got *g, void *ctx, uint64_t flags)
{
	CHECK(g->e.op_context == ctx);
	if (fs >= SZ_MSG)
		CHECK_HEX(g->e.flags, flags);
}

static void tx_done(void *ctx, uint64_t flags)
{
	struct got g;
	struct fi_cq_err_entry err;
	ssize_t r = get(&g, &err);

	if (r == -FI_EAVAIL)
		fprintf(stderr, "rank %d: send error %d (%s)\n", E.rank, err.err,
		        fi_strerror(err.err));
	CHECK_INT(r, 1);
	if (r == 1)
		check_tx(&g, ctx, flags);
}

struct rx_want {
	void *ctx;
	uint64_t flags;
	size_t len;
	const char *posted; /* the receive buffer */
	uint64_t data;      /* checked when flags has FI_REMOTE_CQ_DATA */
	uint64_t tag;       /* checked when flags has FI_TAGGED */
	uint64_t seed;      /* content */
};

static void check_rx(const struct got *g, const struct rx_want *w)
{
	CHECK(g->e.op_context == w->ctx);
	CHECK_HEX(g->src, E.addr[SENDER]);
	if (fs >= SZ_MSG) {
		CHECK_HEX(g->e.flags, w->flags);
		CHECK_INT(g->e.len, w->len);
	}
	if (fs >= SZ_DATA) {
		/* buf is defined for multi-receive buffers only (man fi_cq):
		 * elsewhere NULL or the posted buffer are both fair. */
		if (!(g->e.buf == NULL || g->e.buf == w->posted)) {
			fprintf(stderr, "rank %d: buf %p, want NULL or %p\n", E.rank,
			        g->e.buf, (const void *)w->posted);
			CHECK(0);
		}
		if (w->flags & FI_REMOTE_CQ_DATA)
			CHECK_HEX(g->e.data, w->data);
	}
	if (fs >= SZ_TAGGED && (w->flags & FI_TAGGED))
		CHECK_HEX(g->e.tag, w->tag);
	CHECK_INT(et_verify(w->posted, w->len, w->seed), (size_t)-1);
}

static void rx_done(const struct rx_want *w)
{
	struct got g;
	struct fi_cq_err_entry err;
	ssize_t r = get(&g, &err);

	if (r == -FI_EAVAIL)
		fprintf(stderr, "rank %d: receive error %d (%s), olen %zu\n", E.rank,
		        err.err, fi_strerror(err.err), err.olen);
	CHECK_INT(r, 1);
	if (r == 1)
		check_rx(&g, w);
}

/* ---- the entry size: two entries read at once -------------------------- */

/* Both sides read their two completions with one call where they can;
 * where the second came later, a read of two never happened and the step
 * is tried again.  Returns the distance between the entries. */
static size_t pair_read(void *ca, void *cb, const struct rx_want *wa,
                        const struct rx_want *wb)
{
	static const size_t sizes[] = {SZ_CONTEXT, SZ_MSG, SZ_DATA, SZ_TAGGED};
	_Alignas(8) unsigned char raw[RAW];
	fi_addr_t src[2];
	struct fi_cq_err_entry err;
	struct got g;
	size_t stride = 0, t;
	ssize_t r = raw_read(raw, 2, src, &err);

	if (r < 1) {
		CHECK(0);
		return 0;
	}
	CHECK(*(void **)raw == ca);
	if (r == 1) {
		/* The second later: fine, but it tells no size. */
		CHECK_INT(raw_read(raw, 1, src, &err), 1);
		CHECK(*(void **)raw == cb);
		return 0;
	}
	CHECK_INT(r, 2);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (*(void **)(raw + sizes[i]) == cb) {
			stride = sizes[i];
			break;
		}
	if (!stride) {
		fprintf(stderr, "rank %d: second entry not at any format's size\n",
		        E.rank);
		CHECK(0);
		return 0;
	}
	t = touched_from(raw, 2 * stride);
	if (t != RAW) {
		fprintf(stderr,
		        "rank %d: a read of two %zu-byte entries wrote byte %zu\n",
		        E.rank, stride, t);
		CHECK(0);
	}
	if (!fs)
		fs = stride; /* FI_CQ_FORMAT_UNSPEC: whatever it is, from now on */
	CHECK_INT(stride, fs);
	take(&g, raw, src[0]);
	if (wa)
		check_rx(&g, wa);
	else
		check_tx(&g, ca, FI_SEND | FI_MSG);
	take(&g, raw + stride, src[1]);
	if (wb)
		check_rx(&g, wb);
	else
		check_tx(&g, cb, FI_SEND | FI_MSG);
	return stride;
}

static void entry_size(char *buf)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		int ca, cb;
		int32_t ok, all[ET_MAX_PROCS * ET_SLOT / 4];
		struct rx_want wa = {&ca, FI_RECV | FI_MSG, 10, buf, .seed = 1};
		struct rx_want wb = {&cb, FI_RECV | FI_MSG, 20, buf + 64, .seed = 2};

		if (E.rank == RECEIVER) {
			CHECK_INT(fi_recv(E.ep, buf, 64, NULL, FI_ADDR_UNSPEC, &ca), 0);
			CHECK_INT(fi_recv(E.ep, buf + 64, 64, NULL, FI_ADDR_UNSPEC, &cb),
			          0);
		} else {
			et_fill(buf, 10, 1);
			et_fill(buf + 64, 20, 2);
		}
		et_barrier();
		if (E.rank == SENDER) {
			ssize_t r;

			POST(r, fi_send(E.ep, buf, 10, NULL, E.addr[RECEIVER], &ca));
			CHECK_INT(r, 0);
			POST(r, fi_send(E.ep, buf + 64, 20, NULL, E.addr[RECEIVER], &cb));
			CHECK_INT(r, 0);
		}
		et_barrier(); /* both sent */
		ok = E.rank == RECEIVER ? pair_read(&ca, &cb, &wa, &wb) != 0
		                        : pair_read(&ca, &cb, NULL, NULL) != 0;
		if (et_allgather(&ok, sizeof(ok), all))
			break;
		if (all[0] && all[ET_SLOT / 4])
			return;
	}
	fprintf(stderr,
	        "rank %d: two completions never read at once: entry size "
	        "unchecked\n",
	        E.rank);
	CHECK(0);
	if (!fs)
		fs = SZ_TAGGED;
}

/* ---- messages ---------------------------------------------------------- */

#define DATA1 0x1122334455667788ULL
#define DATA2 0x0123456789abcdefULL
#define DATA3 0xfedcba9876543210ULL
#define TAG2  0x00000000c0ffee00ULL
#define TAG3  0x7700000000000042ULL
#define TAG6  0x0000beef00000006ULL

static void messages(char *buf)
{
	static const size_t len[] = {40, 3000, 200, 70000};
	char *at[4] = {buf, buf + 4096, buf + 8192, buf + 16384};
	int ctx[4];
	struct rx_want w[4] = {
	    {&ctx[0], FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, len[0], at[0], DATA1, 0, 11},
	    {&ctx[1], FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, len[1], at[1], DATA2, TAG2,
	     12},
	    {&ctx[2], FI_RECV | FI_TAGGED, len[2], at[2], 0, TAG3, 13},
	    {&ctx[3], FI_RECV | FI_MSG, len[3], at[3], 0, 0, 14},
	};

	/* One at a time, each receive posted first. */
	for (int i = 0; i < 4; i++) {
		if (E.rank == RECEIVER) {
			ssize_t r;

			memset(at[i], 0, len[i]);
			switch (i) {
			case 0: /* remote CQ data, inline */
				r = fi_recv(E.ep, at[i], 64, NULL, FI_ADDR_UNSPEC,
				            &ctx[i]);
				break;
			case 1: /* tag and data, bounce buffer, exact tag */
				r = fi_trecv(E.ep, at[i], 4096, NULL, FI_ADDR_UNSPEC,
				             TAG2, 0, &ctx[i]);
				break;
			case 2: /* any tag: the entry says which */
				r = fi_trecv(E.ep, at[i], 4096, NULL, FI_ADDR_UNSPEC, 0,
				             ~0ULL, &ctx[i]);
				break;
			default: /* rendezvous */
				r = fi_recv(E.ep, at[i], 100000, NULL, FI_ADDR_UNSPEC,
				            &ctx[i]);
				break;
			}
			CHECK_INT(r, 0);
			et_barrier();
			rx_done(&w[i]);
		} else {
			ssize_t r;

			et_fill(at[i], len[i], w[i].seed);
			et_barrier();
			switch (i) {
			case 0:
				POST(r, fi_senddata(E.ep, at[i], len[i], NULL, DATA1,
				                    E.addr[RECEIVER], &ctx[i]));
				break;
			case 1:
				POST(r, fi_tsenddata(E.ep, at[i], len[i], NULL, DATA2,
				                     E.addr[RECEIVER], TAG2, &ctx[i]));
				break;
			case 2:
				POST(r, fi_tsend(E.ep, at[i], len[i], NULL,
				                 E.addr[RECEIVER], TAG3, &ctx[i]));
				break;
			default:
				POST(r, fi_send(E.ep, at[i], len[i], NULL,
				                E.addr[RECEIVER], &ctx[i]));
				break;
			}
			CHECK_INT(r, 0);
			tx_done(&ctx[i],
			        FI_SEND | (i == 1 || i == 2 ? FI_TAGGED : FI_MSG));
		}
		et_barrier();
	}
}

/* ---- truncation: error entries ----------------------------------------- */

static void truncated(char *buf)
{
	static const struct {
		size_t sent, posted;
		bool tagged;
	} t[] = {{100, 60, false}, {70000, 1000, true}};

	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		int ctx;
		uint64_t seed = 40 + k;

		if (E.rank == SENDER) {
			struct got g;
			struct fi_cq_err_entry err;
			ssize_t r;

			et_fill(buf, t[k].sent, seed);
			et_barrier();
			POST(r, t[k].tagged
			            ? fi_tsenddata(E.ep, buf, t[k].sent, NULL, DATA3,
			                           E.addr[RECEIVER], TAG6, &ctx)
			            : fi_send(E.ep, buf, t[k].sent, NULL,
			                      E.addr[RECEIVER], &ctx));
			CHECK_INT(r, 0);
			/* The sender may or may not hear of it; either way one
			 * entry, for this send. */
			r = get(&g, &err);
			CHECK(r == 1 || r == -FI_EAVAIL);
			if (r == 1)
				check_tx(&g, &ctx,
				         FI_SEND | (t[k].tagged ? FI_TAGGED : FI_MSG));
			else
				CHECK(err.op_context == &ctx);
		} else {
			struct got g;
			struct fi_cq_err_entry err;
			char *land = buf + 64;
			uint64_t kind = t[k].tagged ? FI_TAGGED : FI_MSG;

			memset(buf, 0x11, t[k].posted + 128);
			CHECK_INT(t[k].tagged ? fi_trecv(E.ep, land, t[k].posted, NULL,
			                                 FI_ADDR_UNSPEC, TAG6, 0, &ctx)
			                      : fi_recv(E.ep, land, t[k].posted, NULL,
			                                FI_ADDR_UNSPEC, &ctx),
			          0);
			et_barrier();
			CHECK_INT(get(&g, &err), -FI_EAVAIL);
			CHECK_INT(err.err, FI_ETRUNC);
			CHECK_INT(err.olen, t[k].sent - t[k].posted);
			CHECK_INT(err.len, t[k].posted); /* what was placed */
			CHECK(err.op_context == &ctx);
			CHECK_HEX(err.flags & (FI_RECV | FI_SEND | FI_MSG | FI_TAGGED),
			          FI_RECV | kind);
			if (t[k].tagged)
				CHECK_HEX(err.tag, TAG6);
			if (err.flags & FI_REMOTE_CQ_DATA)
				CHECK_HEX(err.data, DATA3);
			/* What fitted landed, nothing past it. */
			CHECK_INT(et_verify(land, t[k].posted, seed), (size_t)-1);
			CHECK(land[t[k].posted] == 0x11 && land[-1] == 0x11);
			/* The error was the only entry. */
			CHECK_INT(fi_cq_read(E.rxcq, buf, 1), -FI_EAGAIN);
		}
		et_barrier();
	}
}

/* ---- multi-receive: buf says where each message landed ----------------- */

#define MR_SIZE 1024
#define MR_MIN  600

static void multi(char *buf)
{
	static const size_t len[] = {300, 500}; /* 224 B left: under MR_MIN */
	int ctx[2];

	if (E.rank == SENDER) {
		ssize_t r;

		et_fill(buf, len[0], 51);
		et_fill(buf + 4096, len[1], 52);
		et_barrier();
		POST(r, fi_send(E.ep, buf, len[0], NULL, E.addr[RECEIVER], &ctx[0]));
		CHECK_INT(r, 0);
		POST(r, fi_senddata(E.ep, buf + 4096, len[1], NULL, DATA1,
		                    E.addr[RECEIVER], &ctx[1]));
		CHECK_INT(r, 0);
		/* Completions of one endpoint's sends may come in any order. */
		for (int i = 0; i < 2; i++) {
			struct got g;
			struct fi_cq_err_entry err;

			CHECK_INT(get(&g, &err), 1);
			CHECK(g.e.op_context == &ctx[0] || g.e.op_context == &ctx[1]);
			check_tx(&g, g.e.op_context, FI_SEND | FI_MSG);
		}
		et_barrier();
		return;
	}
	size_t v = MR_MIN;
	char *mb = buf;
	struct iovec iov = {mb, MR_SIZE};
	int mctx;
	struct fi_msg m = {
	    .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &mctx};
	const char *prev_end = mb;
	bool released = false;

	CHECK_INT(
	    fi_setopt(&E.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)),
	    0);
	memset(mb, 0, MR_SIZE);
	CHECK_INT(fi_recvmsg(E.ep, &m, FI_MULTI_RECV), 0);
	et_barrier();
	for (int i = 0; i < 2; i++) {
		struct got g;
		struct fi_cq_err_entry err;
		uint64_t want = FI_RECV | FI_MSG | (i ? FI_REMOTE_CQ_DATA : 0);

		if (get(&g, &err) != 1) {
			fprintf(stderr, "multi-receive message %d: no entry (err %d)\n",
			        i, err.err);
			CHECK(0);
			break;
		}
		CHECK(g.e.op_context == &mctx);
		CHECK_HEX(g.src, E.addr[SENDER]);
		if (fs < SZ_MSG)
			continue;
		/* The last message may carry the release (FI_MULTI_RECV); the
		 * first leaves 724 B, more than the minimum: not that one. */
		if (i == 1 && (g.e.flags & FI_MULTI_RECV)) {
			released = true;
			want |= FI_MULTI_RECV;
		}
		CHECK_HEX(g.e.flags, want);
		CHECK_INT(g.e.len, len[i]);
		if (fs < SZ_DATA)
			continue;
		if (i)
			CHECK_HEX(g.e.data, DATA1);
		/* Inside the buffer, after the previous message, and there. */
		{
			const char *at = g.e.buf;

			if (at < prev_end || at + len[i] > mb + MR_SIZE) {
				fprintf(stderr,
				        "multi-receive message %d: buf %p outside [%p, "
				        "%p) or over the previous message\n",
				        i, g.e.buf, (const void *)prev_end,
				        (const void *)(mb + MR_SIZE - len[i]));
				CHECK(0);
			} else {
				CHECK_INT(et_verify(at, len[i], 51 + (uint64_t)i),
				          (size_t)-1);
				prev_end = at + len[i];
			}
		}
	}
	if (fs >= SZ_MSG && !released) {
		/* Else the release is an entry of its own, flags FI_MULTI_RECV
		 * alone (man fi_cq). */
		struct got g;
		struct fi_cq_err_entry err;

		if (get(&g, &err) != 1) {
			fprintf(stderr, "multi-receive buffer: no release entry\n");
			CHECK(0);
		} else {
			CHECK(g.e.op_context == &mctx);
			CHECK_HEX(g.e.flags, FI_MULTI_RECV);
		}
	} else if (fs < SZ_MSG) {
		/* No flags to tell: a release entry may follow or not, but
		 * nothing else, and for this buffer. */
		struct fi_cq_entry c;

		for (int k = 0; k < 100; k++)
			if (fi_cq_read(E.rxcq, &c, 1) == 1) {
				CHECK(c.op_context == &mctx);
				break;
			}
	}
	CHECK_INT(fi_cq_read(E.rxcq, buf + 8192, 1), -FI_EAGAIN);
	et_barrier();
}

/* ---- one process, all formats ------------------------------------------ */

static const struct {
	int opt; /* et_opts.cq_format */
	size_t size;
	const char *name;
} formats[] = {
    {FI_CQ_FORMAT_CONTEXT, SZ_CONTEXT, "FI_CQ_FORMAT_CONTEXT"},
    {FI_CQ_FORMAT_MSG, SZ_MSG, "FI_CQ_FORMAT_MSG"},
    {FI_CQ_FORMAT_DATA, SZ_DATA, "FI_CQ_FORMAT_DATA"},
    {FI_CQ_FORMAT_TAGGED, SZ_TAGGED, "FI_CQ_FORMAT_TAGGED"},
    {ET_CQ_UNSPEC, 0, "FI_CQ_FORMAT_UNSPEC"},
};

static int proc(int rank, int nprocs, void *arg)
{
	char *buf = malloc(256 * 1024);

	(void)nprocs, (void)arg;
	if (!buf)
		return 2;
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		struct et_opts o = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE |
		                            FI_DIRECTED_RECV | FI_MULTI_RECV,
		                    .cq_format = formats[f].opt};
		int before = check_failures;

		if (et_open(&E, &o))
			return 2;
		fs = formats[f].size;
		entry_size(buf);
		messages(buf);
		truncated(buf);
		multi(buf);
		CHECK_INT(et_close(&E), 0);
		fprintf(stderr, "rank %d: %s%s%s: %s\n", rank, formats[f].name,
		        formats[f].size ? "" : " gave ",
		        formats[f].size ? "" : fmt_name(fs),
		        check_failures == before ? "ok" : "FAILED");
	}
	free(buf);
	return check_done();
}

int main(void)
{
	return et_run("cq_formats", 2, 120, proc, NULL, 0);
}
