/* dgram.c - the udp provider's FI_EP_DGRAM endpoints between two processes
 * (A, the parent, and B, its child), public API only: limits, sizes, CQ
 * data, iovecs, inject, truncation, FI_SOURCE, foreign datagrams,
 * FI_MULTI_RECV, counters, selective completion, cancel, an fd-waited CQ,
 * a shared transmit context.
 * With the argument "multicast" (dgram_mc.sh runs it in a network
 * namespace of its own): fi_join and multicast sends instead.  With
 * "ipv6" as well (or alone): the same over IPv6 addresses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "check.h"

#define WAIT_MS     5000  /* bound on any completion or event we wait for */
#define PIPE_MS     15000 /* bound on a word from the peer: past its own waits */
#define QUIET_MS    100   /* nothing within this: nothing at all */
#define MC_QUIET_MS 300   /* the same, for a group we left */
#define NSIZES      5
#define MULTI_LEN   8192 /* case 10: the FI_MULTI_RECV buffer, */
#define MULTI_MIN   1024 /* its FI_OPT_MIN_MULTI_RECV, */
#define MULTI_MSG   1000 /* and its messages: 8 fit before < MULTI_MIN is left */
#define MC_GROUP    "239.255.7.7"
#define MC_GROUP6   "ff15::7:7"

/* ep_open's options. */
enum {
	EP_CNTRS = 1,     /* a send and a recv counter */
	EP_SELECTIVE = 2, /* the tx CQ bound with FI_SELECTIVE_COMPLETION */
	EP_RX_WAITFD = 4, /* the rx CQ with an fd wait object */
	EP_EQ = 8,        /* an EQ, which fi_join needs */
};

struct ep {
	struct fid_ep *ep;
	struct fid_cq *tx, *rx;
	struct fid_cntr *scntr, *rcntr;
	struct fid_eq *eq;
};

struct side {
	char role;    /* 'A' (parent) or 'B' (child) */
	int rfd, wfd; /* pipes from and to the peer */
	bool mc;      /* the multicast run */
	int mc_port;  /* the group's port, chosen before the fork */
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct ep main;
	/* A's second endpoint, sharing A's AV.  Unicast: B never inserts it
	 * (until case 14), its tx CQ is selective, its rx CQ fd-waited.
	 * Multicast: it has no EQ. */
	struct ep c;
	fi_addr_t peer;             /* the peer's main endpoint */
	struct sockaddr_storage peer_sa; /* and its name, for the raw socket */
	uint8_t cname[64];          /* B: C's name, for case 14 */
	size_t cnamelen;
	uint8_t *big; /* NSIZES + 1 buffers of max_msg_size + 1 bytes */
};

/* This process's role, for diagnostics: both write to one stderr. */
static char me = 'A';
/* The run's address family (argument "ipv6"), and its sockaddr's size. */
static int family = AF_INET;

static socklen_t sa_len(void)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

struct tcase {
	const char *name;
	int (*run)(struct side *s); /* -1: stuck, the peers are out of step */
};

/* Repeats call while the queue is full, then returns -1 from the caller
 * unless it succeeded. */
#define POST(call)                                                                       \
	do {                                                                             \
		uint64_t end_ = now_ms() + WAIT_MS;                                      \
		ssize_t r_;                                                              \
		while ((r_ = (call)) == -FI_EAGAIN && now_ms() < end_)                   \
			usleep(50);                                                      \
		CHECK_INT(r_, 0);                                                        \
		if (r_)                                                                  \
			return -1;                                                       \
	} while (0)

/* Returns -1 from the caller when a helper, which has said why, failed. */
#define GO(call)                                                                         \
	do {                                                                             \
		if (call)                                                                \
			return -1;                                                       \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint8_t pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 37u + i * 13u + (i >> 8) * 7u);
}

static void fill(void *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = pat(seed, i);
}

static bool pat_ok(const void *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t got = ((const uint8_t *)buf)[i];

		if (got != pat(seed, i)) {
			fprintf(stderr,
			        "%c: byte %zu of %zu (seed %u) = 0x%02x, want 0x%02x\n",
			        me, i, len, seed, got, pat(seed, i));
			return false;
		}
	}
	return true;
}

/* The pipes: numbered steps keep the two processes in step, and a peer
 * that died or fell behind ends the test instead of hanging it. */
static int write_all(int fd, const void *buf, size_t len)
{
	ssize_t n = write(fd, buf, len);

	CHECK_INT(n, len);
	return n == (ssize_t)len ? 0 : -1;
}

static int read_all(struct side *s, void *buf, size_t len)
{
	struct pollfd p = {.fd = s->rfd, .events = POLLIN};
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, PIPE_MS) != 1) {
			fprintf(stderr, "%c: no word from the peer in %d ms\n", s->role,
			        PIPE_MS);
			CHECK(0);
			return -1;
		}
		n = read(s->rfd, (uint8_t *)buf + got, len - got);
		if (n <= 0) {
			fprintf(stderr, "%c: the peer is gone\n", s->role);
			CHECK(0);
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

static int tell(struct side *s, uint32_t step)
{
	return write_all(s->wfd, &step, sizeof(step));
}

static int hear(struct side *s, uint32_t step)
{
	uint32_t got;

	GO(read_all(s, &got, sizeof(got)));
	CHECK_INT(got, step);
	return got == step ? 0 : -1;
}

/* Both sides at step before either goes on (pipes buffer the tells). */
static int barrier(struct side *s, uint32_t step)
{
	return tell(s, step) || hear(s, step) ? -1 : 0;
}

static int tell_bytes(struct side *s, const void *buf, size_t len)
{
	uint32_t n = (uint32_t)len;

	return write_all(s->wfd, &n, sizeof(n)) || write_all(s->wfd, buf, len) ? -1 : 0;
}

static int hear_bytes(struct side *s, void *buf, size_t size, size_t *len)
{
	uint32_t n;

	GO(read_all(s, &n, sizeof(n)));
	CHECK(n <= size);
	if (n > size)
		return -1;
	*len = n;
	return read_all(s, buf, n);
}

/* The next entry of cq within ms: 1 (into *e, its source into *src when
 * src), -FI_EAVAIL with *err read, -FI_EAGAIN when none came. */
static ssize_t cq_next(struct fid_cq *cq, struct fi_cq_data_entry *e, fi_addr_t *src,
                       struct fi_cq_err_entry *err, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	ssize_t r;

	memset(e, 0, sizeof(*e));
	for (;;) {
		r = src ? fi_cq_readfrom(cq, e, 1, src) : fi_cq_read(cq, e, 1);
		if (r != -FI_EAGAIN || now_ms() >= end)
			break;
		usleep(50);
	}
	if (r == -FI_EAVAIL) {
		memset(err, 0, sizeof(*err));
		CHECK_INT(fi_cq_readerr(cq, err, 0), 1);
	}
	return r;
}

static void say_entry(const char *what, ssize_t r, const struct fi_cq_data_entry *e,
                      const struct fi_cq_err_entry *err)
{
	if (r == 1)
		fprintf(stderr, "%c: %s: an entry: context %p flags 0x%llx len %zu\n", me,
		        what, e->op_context, (unsigned long long)e->flags, e->len);
	else if (r == -FI_EAVAIL)
		fprintf(stderr,
		        "%c: %s: an error entry: context %p err %d (%s) len %zu\n", me,
		        what, err->op_context, err->err, fi_strerror(err->err), err->len);
	else
		fprintf(stderr, "%c: %s: %zd (%s)\n", me, what, r, fi_strerror((int)-r));
}

/* The next completion of cq, a receive of len bytes into the operation
 * of ctx; the entry in *e, its source in *src when src.  -1: none came. */
static int recv_done(struct fid_cq *cq, void *ctx, size_t len, struct fi_cq_data_entry *e,
                     fi_addr_t *src)
{
	struct fi_cq_err_entry err;
	ssize_t r = cq_next(cq, e, src, &err, WAIT_MS);

	CHECK_INT(r, 1);
	if (r != 1) {
		say_entry("receive", r, e, &err);
		return -1;
	}
	CHECK(e->op_context == ctx);
	CHECK_HEX(e->flags & (FI_RECV | FI_MSG | FI_SEND), FI_RECV | FI_MSG);
	CHECK_INT(e->len, len);
	return 0;
}

/* The next completion of cq, a send of the operation of ctx. */
static int send_done(struct fid_cq *cq, void *ctx)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	ssize_t r = cq_next(cq, &e, NULL, &err, WAIT_MS);

	CHECK_INT(r, 1);
	if (r != 1) {
		say_entry("send", r, &e, &err);
		return -1;
	}
	CHECK(e.op_context == ctx);
	CHECK_HEX(e.flags & (FI_SEND | FI_MSG | FI_RECV), FI_SEND | FI_MSG);
	return 0;
}

/* The sender's half of most cases: at the peer's word, len bytes of
 * pattern seed from the main endpoint, and their send completion. */
static int send_one(struct side *s, uint32_t step, size_t len, unsigned seed)
{
	struct fi_context2 ctx;

	GO(hear(s, step));
	fill(s->big, len, seed);
	POST(fi_send(s->main.ep, s->big, len, NULL, s->peer, &ctx));
	return send_done(s->main.tx, &ctx);
}

/* The receiver's half: one receive of size bytes posted on the main
 * endpoint, the word to the peer, and len bytes of pattern seed in it.
 * The entry into *e when e, its source into *src when src. */
static int recv_one(struct side *s, uint32_t step, size_t size, size_t len, unsigned seed,
                    struct fi_cq_data_entry *e, fi_addr_t *src)
{
	struct fi_cq_data_entry e1;
	struct fi_context2 ctx;

	memset(s->big, 0, size);
	POST(fi_recv(s->main.ep, s->big, size, NULL, FI_ADDR_UNSPEC, &ctx));
	GO(tell(s, step));
	GO(recv_done(s->main.rx, &ctx, len, e ? e : &e1, src));
	CHECK(pat_ok(s->big, len, seed));
	return 0;
}

/* Nothing on cq for ms. */
static void no_entry(struct fid_cq *cq, int ms)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	ssize_t r = cq_next(cq, &e, NULL, &err, ms);

	CHECK_INT(r, -FI_EAGAIN);
	if (r != -FI_EAGAIN)
		say_entry("want none", r, &e, &err);
}

/* Cancels the posted receive of ctx: one error entry, FI_ECANCELED. */
static void cancel_recv(struct ep *e, void *ctx)
{
	struct fi_cq_data_entry ce;
	struct fi_cq_err_entry err;
	ssize_t r;

	CHECK_INT(fi_cancel(&e->ep->fid, ctx), 0);
	r = cq_next(e->rx, &ce, NULL, &err, WAIT_MS);
	CHECK_INT(r, -FI_EAVAIL);
	if (r != -FI_EAVAIL) {
		say_entry("cancel", r, &ce, &err);
		return;
	}
	CHECK_INT(err.err, FI_ECANCELED);
	CHECK(err.op_context == ctx);
}

/* Counters are polled: the provider may count a little after the call. */
static void cntr_reach(struct fid_cntr *c, uint64_t want)
{
	uint64_t end = now_ms() + WAIT_MS, v;

	while ((v = fi_cntr_read(c)) < want && now_ms() < end)
		usleep(50);
	CHECK_INT(v, want);
}

static int ep_open(struct side *s, struct ep *e, unsigned opts)
{
	struct fi_cq_attr cqa = {
	    .size = 64, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP,
	                          .wait_obj = FI_WAIT_NONE};
	struct fi_eq_attr eqa = {.size = 8, .wait_obj = FI_WAIT_UNSPEC};
	uint64_t sel = opts & EP_SELECTIVE ? FI_SELECTIVE_COMPLETION : 0;

	OKR(fi_endpoint(s->dom, s->info, &e->ep, NULL));
	OKR(fi_cq_open(s->dom, &cqa, &e->tx, NULL));
	cqa.wait_obj = opts & EP_RX_WAITFD ? FI_WAIT_FD : FI_WAIT_NONE;
	OKR(fi_cq_open(s->dom, &cqa, &e->rx, NULL));
	OKR(fi_ep_bind(e->ep, &s->av->fid, 0));
	OKR(fi_ep_bind(e->ep, &e->tx->fid, FI_TRANSMIT | sel));
	OKR(fi_ep_bind(e->ep, &e->rx->fid, FI_RECV));
	if (opts & EP_CNTRS) {
		OKR(fi_cntr_open(s->dom, &ca, &e->scntr, NULL));
		OKR(fi_cntr_open(s->dom, &ca, &e->rcntr, NULL));
		OKR(fi_ep_bind(e->ep, &e->scntr->fid, FI_SEND));
		OKR(fi_ep_bind(e->ep, &e->rcntr->fid, FI_RECV));
	}
	if (opts & EP_EQ) {
		OKR(fi_eq_open(s->fab, &eqa, &e->eq, NULL));
		OKR(fi_ep_bind(e->ep, &e->eq->fid, 0));
	}
	/* Case 10's threshold; the option must be set before fi_enable. */
	OKR(fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
	              &(size_t){MULTI_MIN}, sizeof(size_t)));
	OKR(fi_enable(e->ep));
	return 0;
}

static void ep_close(struct ep *e)
{
	/* The endpoint first: what is bound to it is busy until it goes. */
	struct fid *f[] = {
	    e->ep ? &e->ep->fid : NULL,       e->tx ? &e->tx->fid : NULL,
	    e->rx ? &e->rx->fid : NULL,       e->scntr ? &e->scntr->fid : NULL,
	    e->rcntr ? &e->rcntr->fid : NULL, e->eq ? &e->eq->fid : NULL,
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i])
			CHECK_INT(fi_close(f[i]), 0);
	memset(e, 0, sizeof(*e));
}

static int exchange_names(struct side *s)
{
	uint8_t name[64];
	size_t len = sizeof(name);

	OKR(fi_getname(&s->main.ep->fid, name, &len));
	CHECK_INT(len, sa_len());
	GO(tell_bytes(s, name, len));
	if (s->role == 'A') {
		len = sizeof(name);
		OKR(fi_getname(&s->c.ep->fid, name, &len));
		GO(tell_bytes(s, name, len));
	}
	GO(hear_bytes(s, name, sizeof(name), &len));
	CHECK_INT(len, sa_len());
	memcpy(&s->peer_sa, name, len < sizeof(s->peer_sa) ? len : sizeof(s->peer_sa));
	CHECK_INT(s->peer_sa.ss_family, family);
	CHECK_INT(fi_av_insert(s->av, name, 1, &s->peer, 0, NULL), 1);
	if (s->role == 'B')
		GO(hear_bytes(s, s->cname, sizeof(s->cname), &s->cnamelen));
	return 0;
}

static int setup(struct side *s)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 8};
	size_t max;
	int r;

	CHECK(h != NULL);
	if (!h)
		return -1;
	h->fabric_attr->prov_name = strdup("udp");
	h->ep_attr->type = FI_EP_DGRAM;
	/* FI_MULTI_RECV is a secondary capability: case 10 must ask for it. */
	h->caps = FI_MSG | FI_SOURCE | FI_MULTI_RECV | (s->mc ? FI_MULTICAST : 0);
	h->addr_format = family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
	r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &s->info);
	fi_freeinfo(h);
	if (r || !s->info) {
		fprintf(stderr, "%c: no DGRAM info from udp: %d (%s)\n", s->role, r,
		        fi_strerror(-r));
		CHECK_INT(r, 0);
		return -1;
	}
	max = s->info->ep_attr->max_msg_size;
	CHECK(max > 0 && max <= 65507);
	if (!max || max > 65507)
		return -1; /* the buffers below are sized by it */
	s->big = calloc(NSIZES + 1, max + 1);
	CHECK(s->big != NULL);
	if (!s->big)
		return -1;
	OKR(fi_fabric(s->info->fabric_attr, &s->fab, NULL));
	OKR(fi_domain(s->fab, s->info, &s->dom, NULL));
	OKR(fi_av_open(s->dom, &ava, &s->av, NULL));
	OKR(ep_open(s, &s->main, EP_CNTRS | (s->mc ? EP_EQ : 0)));
	if (s->role == 'A')
		OKR(ep_open(s, &s->c,
		            s->mc ? 0 : EP_SELECTIVE | EP_RX_WAITFD | EP_CNTRS));
	return exchange_names(s);
}

static void teardown(struct side *s)
{
	ep_close(&s->c);
	ep_close(&s->main);
	if (s->av)
		CHECK_INT(fi_close(&s->av->fid), 0);
	if (s->dom)
		CHECK_INT(fi_close(&s->dom->fid), 0);
	if (s->fab)
		CHECK_INT(fi_close(&s->fab->fid), 0);
	fi_freeinfo(s->info);
	free(s->big);
}

/* 1: what the info promises. */
static int c_info(struct side *s)
{
	const struct fi_info *i = s->info;

	CHECK_INT(i->ep_attr->type, FI_EP_DGRAM);
	CHECK_INT(i->ep_attr->protocol, FI_PROTO_UDP);
	CHECK(i->ep_attr->max_msg_size > 0 && i->ep_attr->max_msg_size <= 65507);
	CHECK(i->tx_attr->inject_size <= i->ep_attr->max_msg_size);
	CHECK_HEX(i->caps & FI_MSG, FI_MSG);
	CHECK_STR(i->fabric_attr->prov_name, "udp");
	CHECK_INT(i->addr_format, family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN);
	/* What the cases below count on: unregistered buffers, CQ data,
	 * 3 iovecs out and 2 in. */
	CHECK(!(i->domain_attr->mr_mode & FI_MR_LOCAL));
	CHECK(i->domain_attr->cq_data_size > 0);
	CHECK(i->tx_attr->iov_limit >= 3);
	CHECK(i->rx_attr->iov_limit >= 2);
	if (s->mc)
		CHECK_HEX(i->caps & FI_MULTICAST, FI_MULTICAST);
	return 0;
}

/* 2, one way: the receiver posts all before the sender may send, so on
 * loopback nothing is lost, and one socket keeps the datagrams in order. */
static int sizes_one_way(struct side *s, char sender, uint32_t step)
{
	size_t max = s->info->ep_attr->max_msg_size;
	const size_t lens[NSIZES] = {0, 1, 64, 4096, max};
	struct fi_context2 ctx[NSIZES];

	if (s->role == sender) {
		GO(hear(s, step));
		for (int i = 0; i < NSIZES; i++) {
			fill(s->big + i * max, lens[i], 20 + i);
			POST(fi_send(s->main.ep, s->big + i * max, lens[i], NULL, s->peer,
			             &ctx[i]));
		}
		for (int i = 0; i < NSIZES; i++)
			GO(send_done(s->main.tx, &ctx[i]));
		return 0;
	}
	memset(s->big, 0, NSIZES * max);
	for (int i = 0; i < NSIZES; i++)
		POST(fi_recv(s->main.ep, s->big + i * max, max, NULL, FI_ADDR_UNSPEC,
		             &ctx[i]));
	GO(tell(s, step));
	for (int i = 0; i < NSIZES; i++) {
		struct fi_cq_data_entry e;
		fi_addr_t src = 0;

		GO(recv_done(s->main.rx, &ctx[i], lens[i], &e, &src));
		CHECK(pat_ok(s->big + i * max, lens[i], 20 + i));
		CHECK_HEX(src, s->peer);
		CHECK_HEX(e.flags & FI_REMOTE_CQ_DATA, 0);
	}
	return 0;
}

static int c_sizes(struct side *s)
{
	return sizes_one_way(s, 'A', 20) || sizes_one_way(s, 'B', 21) ? -1 : 0;
}

/* 3: too long to send or inject, refused at once (each side alone). */
static int c_too_big(struct side *s)
{
	size_t max = s->info->ep_attr->max_msg_size;
	size_t inj = s->info->tx_attr->inject_size;
	struct fi_context2 ctx;

	CHECK_INT(fi_send(s->main.ep, s->big, max + 1, NULL, s->peer, &ctx),
	          -FI_EMSGSIZE);
	CHECK_INT(fi_inject(s->main.ep, s->big, inj + 1, s->peer), -FI_EMSGSIZE);
	no_entry(s->main.tx, QUIET_MS);
	return 0;
}

/* 4: fi_senddata's data reaches the receiver's entry. */
static int c_cq_data(struct side *s)
{
	size_t cds = s->info->domain_attr->cq_data_size;
	uint64_t data = 0x1234abcd5678ef90ull;
	struct fi_context2 ctx;
	struct fi_cq_data_entry e;
	uint8_t b[32];

	if (cds < 8)
		data &= (1ull << (8 * cds)) - 1;
	if (s->role == 'A') {
		GO(hear(s, 40));
		fill(b, sizeof(b), 4);
		POST(fi_senddata(s->main.ep, b, sizeof(b), NULL, data, s->peer, &ctx));
		return send_done(s->main.tx, &ctx);
	}
	GO(recv_one(s, 40, 64, sizeof(b), 4, &e, NULL));
	CHECK_HEX(e.flags & FI_REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA);
	CHECK_HEX(e.data, data);
	return 0;
}

/* 5: three iovecs gathered, two scattered into; the message spans both. */
static int c_iov(struct side *s)
{
	enum { L0 = 50, L1 = 120, L2 = 77, LEN = L0 + L1 + L2, R0 = 100, R1 = 300 };
	struct fi_context2 ctx;
	struct fi_cq_data_entry e;

	if (s->role == 'A') {
		uint8_t all[LEN], p0[L0], p1[L1 + 8], p2[L2];
		struct iovec iov[3] = {{p0, L0}, {p1 + 8, L1}, {p2, L2}};

		GO(hear(s, 50));
		fill(all, LEN, 5);
		memcpy(p0, all, L0);
		memcpy(p1 + 8, all + L0, L1);
		memcpy(p2, all + L0 + L1, L2);
		POST(fi_sendv(s->main.ep, iov, NULL, 3, s->peer, &ctx));
		return send_done(s->main.tx, &ctx);
	}
	uint8_t r0[R0], r1[R1], got[LEN];
	struct iovec iov[2] = {{r0, R0}, {r1, R1}};

	memset(r0, 0, sizeof(r0));
	memset(r1, 0, sizeof(r1));
	POST(fi_recvv(s->main.ep, iov, NULL, 2, FI_ADDR_UNSPEC, &ctx));
	GO(tell(s, 50));
	GO(recv_done(s->main.rx, &ctx, LEN, &e, NULL));
	memcpy(got, r0, R0);
	memcpy(got + R0, r1, LEN - R0);
	CHECK(pat_ok(got, LEN, 5));
	CHECK_INT(r1[LEN - R0], 0); /* nothing past the message */
	return 0;
}

/* 6: fi_inject: no send completion, but the send counter counts it. */
static int c_inject(struct side *s)
{
	size_t n =
	    s->info->tx_attr->inject_size < 40 ? s->info->tx_attr->inject_size : 40;
	uint8_t b[40];

	if (s->role == 'A') {
		uint64_t c0 = fi_cntr_read(s->main.scntr);

		GO(hear(s, 60));
		fill(b, n, 6);
		POST(fi_inject(s->main.ep, b, n, s->peer));
		memset(b, 0, sizeof(b)); /* ours again at once */
		GO(hear(s, 61));
		no_entry(s->main.tx, QUIET_MS);
		cntr_reach(s->main.scntr, c0 + 1);
		return 0;
	}
	GO(recv_one(s, 60, 64, n, 6, NULL, NULL));
	return tell(s, 61);
}

/* 7: 100 bytes into 16: an FI_ETRUNC error entry, and 16 bytes written. */
static int c_trunc(struct side *s)
{
	struct fi_context2 ctx;
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	uint8_t b[100];
	ssize_t r;

	if (s->role == 'A')
		return send_one(s, 70, sizeof(b), 7);
	memset(b, 0xee, sizeof(b));
	POST(fi_recv(s->main.ep, b, 16, NULL, FI_ADDR_UNSPEC, &ctx));
	GO(tell(s, 70));
	r = cq_next(s->main.rx, &e, NULL, &err, WAIT_MS);
	CHECK_INT(r, -FI_EAVAIL);
	if (r != -FI_EAVAIL) {
		say_entry("truncated", r, &e, &err);
		return r == 1 ? 0 : -1;
	}
	CHECK_INT(err.err, FI_ETRUNC);
	CHECK_INT(err.len, 16);
	CHECK_INT(err.olen, 84);
	CHECK(err.op_context == &ctx);
	CHECK(pat_ok(b, 16, 7));
	CHECK_INT(b[16], 0xee);
	CHECK_INT(b[99], 0xee);
	no_entry(s->main.rx, QUIET_MS);
	return 0;
}

/* 8: FI_SOURCE: a known sender's fi_addr, and FI_ADDR_NOTAVAIL for C,
 * whose address B has not inserted. */
static int c_source(struct side *s)
{
	struct fi_context2 ctx;
	fi_addr_t src = 0;
	uint8_t b[50];

	if (s->role == 'A') {
		GO(recv_one(s, 80, 64, 50, 8, NULL, &src));
		CHECK_HEX(src, s->peer);
		GO(hear(s, 81));
		/* C's tx CQ is selective: B's word tells when b is free again. */
		fill(b, 50, 81);
		POST(fi_send(s->c.ep, b, 50, NULL, s->peer, &ctx));
		return hear(s, 82);
	}
	GO(send_one(s, 80, 50, 8));
	GO(recv_one(s, 81, 64, 50, 81, NULL, &src));
	CHECK_HEX(src, FI_ADDR_NOTAVAIL);
	return tell(s, 82);
}

/* 9: datagrams that are not the provider's, from a raw socket, before a
 * real message: dropped, with no error entry. */
static int c_bad_dgrams(struct side *s)
{
	struct fi_context2 ctx0, ctx1;
	struct fi_cq_data_entry e;
	uint8_t b[256], b1[256];

	if (s->role == 'A') {
		const struct sockaddr *to = (const struct sockaddr *)&s->peer_sa;
		uint32_t x = 0x2545f491; /* fixed: a failure repeats */
		int fd = socket(family, SOCK_DGRAM, 0);

		CHECK(fd >= 0);
		if (fd < 0)
			return -1;
		GO(hear(s, 90));
		CHECK_INT(sendto(fd, "", 0, 0, to, sa_len()), 0);
		CHECK_INT(sendto(fd, "abc", 3, 0, to, sa_len()), 3);
		for (int i = 0; i < 64; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			b[i] = (uint8_t)x;
		}
		CHECK_INT(sendto(fd, b, 64, 0, to, sa_len()), 64);
		memset(b, 0xff, 200);
		CHECK_INT(sendto(fd, b, 200, 0, to, sa_len()), 200);
		close(fd);
		fill(b, 100, 9);
		POST(fi_send(s->main.ep, b, 100, NULL, s->peer, &ctx0));
		GO(send_done(s->main.tx, &ctx0));
		return hear(s, 91);
	}
	/* A second receive: a datagram taken for a message would fill one. */
	POST(fi_recv(s->main.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, &ctx0));
	POST(fi_recv(s->main.ep, b1, sizeof(b1), NULL, FI_ADDR_UNSPEC, &ctx1));
	GO(tell(s, 90));
	GO(recv_done(s->main.rx, &ctx0, 100, &e, NULL));
	CHECK(pat_ok(b, 100, 9));
	no_entry(s->main.rx, QUIET_MS);
	cancel_recv(&s->main, &ctx1);
	return tell(s, 91);
}

/* 10: one FI_MULTI_RECV buffer takes 8 messages, packed, and is released
 * with the 8th; the 9th and 10th go to the receives posted after it. */
static int c_multi_recv(struct side *s)
{
	enum { N = 10, IN_MULTI = 8 };
	struct fi_context2 ctx[N];
	struct fi_cq_data_entry e;

	if (s->role == 'A') {
		uint8_t b[N][MULTI_MSG];

		GO(hear(s, 100));
		for (int i = 0; i < N; i++) {
			fill(b[i], MULTI_MSG, 100 + i);
			POST(
			    fi_send(s->main.ep, b[i], MULTI_MSG, NULL, s->peer, &ctx[i]));
		}
		for (int i = 0; i < N; i++)
			GO(send_done(s->main.tx, &ctx[i]));
		return 0;
	}
	uint8_t m[MULTI_LEN], r9[4096], r10[4096];
	struct iovec iov = {m, sizeof(m)};
	struct fi_msg msg = {
	    .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &ctx[0]};

	POST(fi_recvmsg(s->main.ep, &msg, FI_MULTI_RECV));
	POST(fi_recv(s->main.ep, r9, sizeof(r9), NULL, FI_ADDR_UNSPEC, &ctx[1]));
	POST(fi_recv(s->main.ep, r10, sizeof(r10), NULL, FI_ADDR_UNSPEC, &ctx[2]));
	GO(tell(s, 100));
	for (int i = 0; i < IN_MULTI; i++) {
		GO(recv_done(s->main.rx, &ctx[0], MULTI_MSG, &e, NULL));
		CHECK(e.buf == m + i * MULTI_MSG);
		CHECK(pat_ok(m + i * MULTI_MSG, MULTI_MSG, 100 + i));
		/* Released when less than MULTI_MIN is left: after the 8th. */
		CHECK_HEX(e.flags & FI_MULTI_RECV, i == IN_MULTI - 1 ? FI_MULTI_RECV : 0);
	}
	GO(recv_done(s->main.rx, &ctx[1], MULTI_MSG, &e, NULL));
	CHECK(pat_ok(r9, MULTI_MSG, 108));
	GO(recv_done(s->main.rx, &ctx[2], MULTI_MSG, &e, NULL));
	CHECK(pat_ok(r10, MULTI_MSG, 109));
	return 0;
}

/* 11: the send and recv counters count each message once. */
static int c_counters(struct side *s)
{
	enum { N = 5 };
	struct fi_context2 ctx[N];
	struct fi_cq_data_entry e;
	uint8_t b[N][64];

	if (s->role == 'A') {
		uint64_t c0 = fi_cntr_read(s->main.scntr);

		GO(hear(s, 110));
		for (int i = 0; i < N; i++) {
			fill(b[i], 64, 110 + i);
			POST(fi_send(s->main.ep, b[i], 64, NULL, s->peer, &ctx[i]));
		}
		for (int i = 0; i < N; i++)
			GO(send_done(s->main.tx, &ctx[i]));
		cntr_reach(s->main.scntr, c0 + N);
		return 0;
	}
	uint64_t c0 = fi_cntr_read(s->main.rcntr);

	for (int i = 0; i < N; i++)
		POST(fi_recv(s->main.ep, b[i], 64, NULL, FI_ADDR_UNSPEC, &ctx[i]));
	GO(tell(s, 110));
	for (int i = 0; i < N; i++) {
		GO(recv_done(s->main.rx, &ctx[i], 64, &e, NULL));
		CHECK(pat_ok(b[i], 64, 110 + i));
	}
	cntr_reach(s->main.rcntr, c0 + N);
	return 0;
}

/* 12: C's tx CQ is selective: only the FI_COMPLETION send has an entry,
 * the counter counts both. */
static int c_selective(struct side *s)
{
	struct fi_context2 ctx1, ctx2;
	struct fi_cq_data_entry e;
	uint8_t b1[64], b2[64];

	if (s->role == 'A') {
		uint64_t c0 = fi_cntr_read(s->c.scntr);
		struct iovec iov = {b2, 40};
		struct fi_msg msg = {
		    .msg_iov = &iov, .iov_count = 1, .addr = s->peer, .context = &ctx2};

		GO(hear(s, 120));
		fill(b1, 40, 120);
		fill(b2, 40, 121);
		POST(fi_send(s->c.ep, b1, 40, NULL, s->peer, &ctx1));
		POST(fi_sendmsg(s->c.ep, &msg, FI_COMPLETION));
		GO(send_done(s->c.tx, &ctx2));
		GO(hear(s, 121));
		no_entry(s->c.tx, QUIET_MS);
		cntr_reach(s->c.scntr, c0 + 2);
		return 0;
	}
	POST(fi_recv(s->main.ep, b1, sizeof(b1), NULL, FI_ADDR_UNSPEC, &ctx1));
	POST(fi_recv(s->main.ep, b2, sizeof(b2), NULL, FI_ADDR_UNSPEC, &ctx2));
	GO(tell(s, 120));
	GO(recv_done(s->main.rx, &ctx1, 40, &e, NULL));
	CHECK(pat_ok(b1, 40, 120));
	GO(recv_done(s->main.rx, &ctx2, 40, &e, NULL));
	CHECK(pat_ok(b2, 40, 121));
	return tell(s, 121);
}

/* 13: a cancelled receive reports FI_ECANCELED, and no longer takes
 * messages: the next one goes to the receive posted after it. */
static int c_cancel(struct side *s)
{
	struct fi_context2 ctx;
	uint8_t b[64] = {0};

	if (s->role == 'A')
		return send_one(s, 130, 30, 13);
	POST(fi_recv(s->main.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, &ctx));
	cancel_recv(&s->main, &ctx);
	no_entry(s->main.rx, QUIET_MS);
	GO(recv_one(s, 130, 64, 30, 13, NULL, NULL));
	CHECK_INT(b[0], 0);
	return 0;
}

/* 14: fi_cq_sread on an fd-waited CQ sleeps until a message the peer
 * sends 100 ms later. */
static int c_wait_fd(struct side *s)
{
	struct fi_context2 ctx;
	struct fi_cq_data_entry e;
	uint8_t b[64];

	if (s->role == 'A') {
		int fd = -1;
		ssize_t r;

		CHECK_INT(fi_control(&s->c.rx->fid, FI_GETWAIT, &fd), 0);
		CHECK(fd >= 0);
		POST(fi_recv(s->c.ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, &ctx));
		GO(tell(s, 140));
		memset(&e, 0, sizeof(e));
		r = fi_cq_sread(s->c.rx, &e, 1, NULL, WAIT_MS);
		CHECK_INT(r, 1);
		if (r != 1) {
			struct fi_cq_err_entry err = {0};

			if (r == -FI_EAVAIL)
				fi_cq_readerr(s->c.rx, &err, 0);
			say_entry("fi_cq_sread", r, &e, &err);
			return -1;
		}
		CHECK(e.op_context == &ctx);
		CHECK_HEX(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
		CHECK_INT(e.len, 64);
		CHECK(pat_ok(b, 64, 14));
		return 0;
	}
	fi_addr_t c = FI_ADDR_NOTAVAIL;

	GO(hear(s, 140));
	CHECK_INT(fi_av_insert(s->av, s->cname, 1, &c, 0, NULL), 1);
	usleep(100 * 1000);
	fill(b, 64, 14);
	POST(fi_send(s->main.ep, b, 64, NULL, c, &ctx));
	return send_done(s->main.tx, &ctx);
}

/* 15's join: FI_JOIN_COMPLETE on the EQ, naming mc and our context. */
static int join_done(struct fid_eq *eq, struct fid_mc *mc, void *ctx)
{
	uint64_t end = now_ms() + WAIT_MS;
	struct fi_eq_entry en = {0};
	uint32_t ev = 0;
	ssize_t r;

	do
		r = fi_eq_sread(eq, &ev, &en, sizeof(en), WAIT_MS, 0);
	while (r == -FI_EAGAIN && now_ms() < end);
	if (r == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {0};

		CHECK_INT(fi_eq_readerr(eq, &err, 0), sizeof(err));
		fprintf(stderr, "%c: join: error event %d (%s)\n", me, err.err,
		        fi_strerror(err.err));
	}
	CHECK_INT(r, sizeof(en));
	if (r != sizeof(en))
		return -1;
	CHECK_INT(ev, FI_JOIN_COMPLETE);
	CHECK(en.fid == &mc->fid);
	CHECK(en.context == ctx);
	return 0;
}

/* 15: both join a group; A's multicast reaches B and A itself; after B
 * leaves, only A.  Then A's joins that must fail. */
static int c_multicast(struct side *s)
{
	struct sockaddr_storage grp = {.ss_family = (sa_family_t)family};
	struct sockaddr_in *g4 = (struct sockaddr_in *)&grp;
	struct sockaddr_in6 *g6 = (struct sockaddr_in6 *)&grp;
	struct fi_context2 jctx, rctx, sctx;
	struct fi_cq_data_entry e;
	struct fid_mc *mc = NULL;
	uint8_t r[256], b[64];
	struct iovec iov = {b, 48};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .context = &sctx};

	if (family == AF_INET6) {
		g6->sin6_port = htons((uint16_t)s->mc_port);
		CHECK_INT(inet_pton(AF_INET6, MC_GROUP6, &g6->sin6_addr), 1);
	} else {
		g4->sin_port = htons((uint16_t)s->mc_port);
		CHECK_INT(inet_pton(AF_INET, MC_GROUP, &g4->sin_addr), 1);
	}
	OKR(fi_join(s->main.ep, &grp, 0, &mc, &jctx));
	GO(join_done(s->main.eq, mc, &jctx));
	msg.addr = fi_mc_addr(mc);
	POST(fi_recv(s->main.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, &rctx));
	GO(barrier(s, 150)); /* both members, both receiving */
	if (s->role == 'A') {
		fill(b, 48, 15);
		POST(fi_sendmsg(s->main.ep, &msg, FI_MULTICAST));
		GO(send_done(s->main.tx, &sctx));
	}
	GO(recv_done(s->main.rx, &rctx, 48, &e, NULL)); /* A: its own, looped back */
	CHECK(pat_ok(r, 48, 15));

	if (s->role == 'B') {
		CHECK_INT(fi_close(&mc->fid), 0);
		POST(fi_recv(s->main.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, &rctx));
		GO(tell(s, 151));
		/* A has had its own copy: B's would be here by now. */
		GO(hear(s, 152));
		no_entry(s->main.rx, MC_QUIET_MS);
		cancel_recv(&s->main, &rctx);
		return 0;
	}
	GO(hear(s, 151));
	POST(fi_recv(s->main.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, &rctx));
	fill(b, 48, 16);
	POST(fi_sendmsg(s->main.ep, &msg, FI_MULTICAST));
	GO(send_done(s->main.tx, &sctx));
	GO(recv_done(s->main.rx, &rctx, 48, &e, NULL));
	CHECK(pat_ok(r, 48, 16));
	GO(tell(s, 152));

	struct sockaddr_storage lo = grp;
	struct fid_mc *bad = NULL;
	int ret;

	if (family == AF_INET6)
		((struct sockaddr_in6 *)&lo)->sin6_addr = in6addr_loopback;
	else
		((struct sockaddr_in *)&lo)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ret = fi_join(s->main.ep, &lo, 0, &bad, &jctx);
	CHECK_INT(ret, -FI_EINVAL);
	if (!ret && bad)
		fi_close(&bad->fid);
	bad = NULL;
	ret = fi_join(s->c.ep, &grp, 0, &bad, &jctx);
	printf("A fi_join with no EQ bound: %d (%s)\n", ret, fi_strerror(-ret));
	CHECK(ret < 0);
	if (!ret && bad)
		fi_close(&bad->fid);
	CHECK_INT(fi_close(&mc->fid), 0);
	return 0;
}

/* 16: a shared transmit context.  fi_getinfo offers one for DGRAM
 * (tx_ctx_cnt FI_SHARED_CONTEXT) and no shared receive context; two
 * endpoints of A bound to one fi_stx_context each send a datagram to B,
 * each completion on its own CQ; the context is busy while bound. */
static int c_stx(struct side *s)
{
	const size_t len[2] = {100, 333};

	if (s->role == 'A') {
		struct fi_info *h = fi_dupinfo(s->info), *got = NULL;
		struct fi_cq_attr cqa = {.size = 8, .format = FI_CQ_FORMAT_DATA};
		struct fid_stx *stx = NULL;
		struct fi_context2 ctx[2];
		struct ep e[2] = {{0}};

		CHECK(h != NULL);
		if (!h)
			return -1;
		h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
		CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got), -FI_ENODATA);
		h->ep_attr->rx_ctx_cnt = 0;
		h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
		CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got), 0);
		if (got)
			CHECK_INT(got->ep_attr->tx_ctx_cnt, FI_SHARED_CONTEXT);
		fi_freeinfo(got);
		OKR(fi_stx_context(s->dom, NULL, &stx, NULL));
		for (int i = 0; i < 2; i++) {
			OKR(fi_endpoint(s->dom, h, &e[i].ep, NULL));
			OKR(fi_cq_open(s->dom, &cqa, &e[i].tx, NULL));
			OKR(fi_ep_bind(e[i].ep, &s->av->fid, 0));
			OKR(fi_ep_bind(e[i].ep, &stx->fid, 0));
			CHECK_INT(fi_ep_bind(e[i].ep, &stx->fid, 0), -FI_EINVAL); /* one only */
			OKR(fi_ep_bind(e[i].ep, &e[i].tx->fid, FI_TRANSMIT));
			OKR(fi_enable(e[i].ep));
		}
		fi_freeinfo(h);
		for (int i = 0; i < 2; i++) {
			GO(hear(s, 160 + (uint32_t)i));
			fill(s->big, len[i], 16 + (unsigned)i);
			POST(fi_send(e[i].ep, s->big, len[i], NULL, s->peer, &ctx[i]));
			GO(send_done(e[i].tx, &ctx[i]));
		}
		no_entry(e[0].tx, QUIET_MS); /* each its own */
		CHECK_INT(fi_close(&stx->fid), -FI_EBUSY);
		for (int i = 0; i < 2; i++)
			ep_close(&e[i]);
		CHECK_INT(fi_close(&stx->fid), 0);
		return tell(s, 162);
	}
	for (int i = 0; i < 2; i++)
		GO(recv_one(s, 160 + (uint32_t)i, 1000, len[i], 16 + (unsigned)i, NULL, NULL));
	return hear(s, 162);
}

static const struct tcase unicast_cases[] = {
    {"1 info", c_info},
    {"2 sizes, both ways", c_sizes},
    {"3 too big", c_too_big},
    {"4 cq data", c_cq_data},
    {"5 sendv/recvv", c_iov},
    {"6 inject", c_inject},
    {"7 truncation", c_trunc},
    {"8 FI_SOURCE", c_source},
    {"9 bad datagrams", c_bad_dgrams},
    {"10 FI_MULTI_RECV", c_multi_recv},
    {"11 counters", c_counters},
    {"12 selective completion", c_selective},
    {"13 cancel", c_cancel},
    {"14 FI_WAIT_FD sread", c_wait_fd},
    {"16 shared transmit context", c_stx},
};

static const struct tcase multicast_cases[] = {
    {"1 info", c_info},
    {"15 multicast", c_multicast},
};

/* One side's whole run; -1 when the peers fell out of step. */
static int run(struct side *s)
{
	const struct tcase *c = s->mc ? multicast_cases : unicast_cases;
	size_t n = s->mc ? sizeof(multicast_cases) / sizeof(multicast_cases[0])
	                 : sizeof(unicast_cases) / sizeof(unicast_cases[0]);
	int ret = setup(s);

	for (size_t i = 0; !ret && i < n; i++) {
		int f0 = check_failures;

		ret = c[i].run(s);
		printf("%c %-26s %s\n", s->role, c[i].name,
		       ret                   ? "STUCK, the rest not run"
		       : check_failures > f0 ? "FAIL"
		                             : "ok");
	}
	teardown(s);
	return ret;
}

/* Waits for the child; kills it if it outlives the bound. */
static int reap(pid_t pid)
{
	uint64_t end = now_ms() + PIPE_MS;
	int status = 0;
	pid_t r;

	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < end)
		usleep(10 * 1000);
	if (r == 0) {
		fprintf(stderr, "A: B did not finish: killed\n");
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The libfabric this process runs on is loom's (the build's), not the
 * reference installed beside it. */
static void check_loom_loaded(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f) {
		CHECK(!"/proc/self/maps readable");
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "libfabric.so"))
			continue;
		found = true;
		CHECK(!strstr(line, "/usr/lib"));
	}
	fclose(f);
	CHECK(found);
}

int main(int argc, char **argv)
{
	struct side s = {0};
	int ab[2], ba[2], ret;
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "multicast"))
			s.mc = true;
		else if (!strcmp(argv[i], "ipv6"))
			family = AF_INET6;
		else {
			fprintf(stderr, "usage: %s [multicast] [ipv6]\n", argv[0]);
			return 2;
		}
	}

	check_loom_loaded();
	/* Chosen before the fork, so both sides know it. */
	s.mc_port = 47000 + getpid() % 1000;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN); /* a dead peer is an error from write */
	if (pipe(ab) || pipe(ba)) {
		perror("pipe");
		return 1;
	}
	/* Before any fi_ call: the child starts with a library of its own. */
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ab[1]);
		close(ba[0]);
		s.role = me = 'B';
		s.rfd = ab[0];
		s.wfd = ba[1];
		run(&s);
		exit(check_done());
	}
	close(ab[0]);
	close(ba[1]);
	s.role = 'A';
	s.rfd = ba[0];
	s.wfd = ab[1];
	ret = run(&s);
	if (ret)
		kill(pid, SIGKILL);
	close(s.rfd);
	close(s.wfd);
	ret = reap(pid);
	if (ret)
		fprintf(stderr, "A: B exited with %d\n", ret);
	CHECK_INT(ret, 0);
	return check_done();
}
