/* cm.c - the tcp provider's connection management between two processes,
 * public API only: listen, connect, accept, reject, shutdown, peer death. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "check.h"
#include "eptest.h"
#include "side.h"

/* The group's processes end in _exit, past LeakSanitizer's exit hook: each
 * looks for leaks itself once everything is closed. */
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#define CHECK_NO_LEAKS() CHECK_INT(__lsan_do_recoverable_leak_check(), 0)
#else
#define CHECK_NO_LEAKS() ((void)0)
#endif

#define SERVER 0
#define CLIENT 1

#define EV_MS       5000  /* bound on any connection event */
#define DEATH_MS    10000 /* SIGKILL -> FI_SHUTDOWN and the error completion */
#define SMALL       100
#define BIG         ((size_t)1 << 20)
#define TLEN        1000
#define TAG_A       0x1234u
#define TAG_B       0x5678u
#define STUCK       ((size_t)32 << 20) /* more than the sockets can hold */
#define CM_DATA_MAX 256 /* what the provider carries (and we give room for) */
#define PP_ROUNDS   10   /* case 9: ping-pongs before the kill */
#define PP_LEN      4096 /* as fi_pingpong's default size */
#define PP_DEATH_MS 100  /* the kill -> both error completions, CQ only */

/* An fi_eq_read buffer: the entry and the connection data after it. */
union cm_ev {
	struct fi_eq_cm_entry e;
	unsigned char b[sizeof(struct fi_eq_cm_entry) + CM_DATA_MAX];
};

/* The server's memory regions, sent to the client in a message. */
struct keys {
	uint64_t buf, buf_key;
	uint64_t ctr, ctr_key;
};

/* The data progress every msg_hints asks for (0: none, the provider's). */
static enum fi_progress want_progress;

static struct fi_info *msg_hints(uint32_t addr_format)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->domain_attr->data_progress = want_progress;
	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	h->addr_format = addr_format;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	return h;
}

/* The info checks every MSG fi_getinfo answer gets. */
static void check_info(const struct fi_info *i, uint32_t addr_format)
{
	CHECK_INT(i->ep_attr->type, FI_EP_MSG);
	CHECK_STR(i->fabric_attr->prov_name, "tcp");
	CHECK_INT(i->addr_format, addr_format);
	CHECK((i->caps & (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC)) ==
	      (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC));
}

/* The next event of eq within EV_MS (or ms): sleeping in fi_eq_sread, or
 * polling fi_eq_read.  Returns what the read returned: the bytes, or
 * -FI_EAVAIL with *err read (its data into errbuf when errlen, else lent),
 * or -FI_EAGAIN when nothing came in time. */
static ssize_t next_event(struct fid_eq *eq, bool sleep, int ms, uint32_t *event,
                          union cm_ev *ev, struct fi_eq_err_entry *err, void *errbuf,
                          size_t errlen)
{
	uint64_t end = et_now_us() + (uint64_t)ms * 1000u;
	ssize_t r;

	memset(ev, 0, sizeof(*ev));
	*event = ~0u;
	for (;;) {
		uint64_t now = et_now_us();
		int left = now < end ? (int)((end - now) / 1000) + 1 : 1;

		r = sleep ? fi_eq_sread(eq, event, ev, sizeof(*ev), left, 0)
		          : fi_eq_read(eq, event, ev, sizeof(*ev), 0);
		if (r != -FI_EAGAIN || et_now_us() > end)
			break;
		if (!sleep)
			sched_yield();
	}
	if (r == -FI_EAVAIL && err) {
		memset(err, 0, sizeof(*err));
		err->err_data = errbuf;
		err->err_data_size = errlen;
		CHECK_INT(fi_eq_readerr(eq, err, 0), sizeof(*err));
	}
	return r;
}

/* A CM event with fid and connection data as expected (data NULL: any). */
static void check_cm_event(ssize_t r, uint32_t event, const union cm_ev *ev,
                           uint32_t want_event, const struct fid *want_fid,
                           const char *want_data)
{
	size_t dlen = want_data ? strlen(want_data) + 1 : 0;

	/* man fi_eq: the data length comes from the bytes read, and may
	 * carry protocol padding beyond what the peer gave. */
	CHECK(r >= (ssize_t)(sizeof(ev->e) + dlen));
	CHECK_INT(event, want_event);
	CHECK(ev->e.fid == want_fid);
	if (want_data && r >= (ssize_t)(sizeof(ev->e) + dlen) &&
	    memcmp(ev->e.data, want_data, dlen)) {
		fprintf(stderr, "event %u data \"%.*s\", want \"%s\"\n", event, (int)dlen,
		        (const char *)ev->e.data, want_data);
		CHECK(0);
	}
}

/* A failed connection: -FI_EAVAIL then an error entry for ep. */
static void check_cm_error(ssize_t r, const struct fi_eq_err_entry *err,
                           const struct fid_ep *ep, int want_err, const char *want_data)
{
	size_t dlen = want_data ? strlen(want_data) + 1 : 0;

	CHECK_INT(r, -FI_EAVAIL);
	if (r != -FI_EAVAIL)
		return;
	CHECK_INT(err->err, want_err);
	CHECK(err->fid == &ep->fid);
	if (!want_data) {
		CHECK_INT(err->err_data_size, 0);
		return;
	}
	CHECK(err->err_data_size >= dlen);
	CHECK(err->err_data != NULL);
	if (err->err_data_size >= dlen && err->err_data &&
	    memcmp(err->err_data, want_data, dlen)) {
		fprintf(stderr, "err_data \"%.*s\", want \"%s\"\n", (int)dlen,
		        (const char *)err->err_data, want_data);
		CHECK(0);
	}
}

/* n completions within EV_MS, each stored by its op_context's index in
 * ctxs; an error entry or an unknown context fails. */
static void collect(struct fid_cq *cq, int n, void *const *ctxs,
                    struct fi_cq_tagged_entry *out)
{
	for (int got = 0; got < n; got++) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r = et_read(cq, &c, NULL, &err, NULL, EV_MS);
		int k;

		if (r != 1) {
			fprintf(stderr, "completion %d of %d: %zd (%s), err %d\n",
			        got + 1, n, r, fi_strerror((int)-r),
			        r == -FI_EAVAIL ? err.err : 0);
			CHECK_INT(r, 1);
			return;
		}
		for (k = 0; k < n && ctxs[k] != c.op_context; k++)
			;
		CHECK(k < n);
		if (k < n)
			out[k] = c;
	}
}

static void check_bytes(const void *buf, size_t len, uint64_t seed)
{
	size_t at = et_verify(buf, len, seed);

	if (at != (size_t)-1)
		fprintf(stderr, "seed %llu: %zu bytes differ from byte %zu\n",
		        (unsigned long long)seed, len, at);
	CHECK(at == (size_t)-1);
}

/* Copies an address of the fi_getname/fi_getpeer kind after checking the
 * man page's -FI_ETOOSMALL contract: no buffer, then a short one that
 * gets the truncated address, then room. */
static int get_addr(int (*get)(void *, void *, size_t *), void *obj, const char *what,
                    struct sockaddr_in *out)
{
	unsigned char full[64], part[8];
	size_t len = 0;

	CHECK_INT(get(obj, NULL, &len), -FI_ETOOSMALL);
	CHECK_INT(len, sizeof(*out));
	len = 5;
	memset(part, 0xa5, sizeof(part));
	CHECK_INT(get(obj, part, &len), -FI_ETOOSMALL);
	CHECK_INT(len, sizeof(*out));
	len = sizeof(full);
	OK(get(obj, full, &len));
	CHECK_INT(len, sizeof(*out));
	/* man fi_cm: "it will be truncated": the first bytes, no more. */
	if (memcmp(part, full, 5))
		fprintf(stderr,
		        "%s: a 5-byte buffer did not get the address's first bytes\n",
		        what);
	CHECK(!memcmp(part, full, 5));
	CHECK_HEX(part[5], 0xa5);
	memcpy(out, full, sizeof(*out));
	CHECK_INT(out->sin_family, AF_INET);
	CHECK_HEX(ntohl(out->sin_addr.s_addr), INADDR_LOOPBACK);
	CHECK(out->sin_port != 0);
	return 0;
}

static int getname_fn(void *fid, void *addr, size_t *len)
{
	return fi_getname(fid, addr, len);
}

static int getpeer_fn(void *ep, void *addr, size_t *len)
{
	return fi_getpeer(ep, addr, len);
}

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
	       a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static void check_same_addr(const struct sockaddr_in *got, const struct sockaddr_in *want,
                            const char *what)
{
	char g[INET_ADDRSTRLEN] = "?", w[INET_ADDRSTRLEN] = "?";

	if (same_addr(got, want))
		return;
	inet_ntop(AF_INET, &got->sin_addr, g, sizeof(g));
	inet_ntop(AF_INET, &want->sin_addr, w, sizeof(w));
	fprintf(stderr, "%s: %s:%u (family %u), want %s:%u\n", what, g,
	        ntohs(got->sin_port), got->sin_family, w, ntohs(want->sin_port));
	CHECK(0);
}

/* Passive endpoint listening on 127.0.0.1, its EQ empty; *addr its name. */
/* FI_OPT_CM_DATA_SIZE, read only, on passive and active endpoints: room
 * for the connection data these tests send; other options still reach the
 * endpoint (active) or are refused (passive). */
static void check_cm_opts(fid_t fid, bool active)
{
	size_t v = 0, len = sizeof(v), small = 1;

	CHECK_INT(fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len), 0);
	CHECK_INT(len, sizeof(size_t));
	CHECK_INT(v, 256);
	CHECK_INT(fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &small),
	          -FI_EINVAL);
	CHECK_INT(fi_setopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, sizeof(v)),
	          -FI_EINVAL);
	len = sizeof(v);
	CHECK_INT(fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len),
	          active ? 0 : -FI_ENOPROTOOPT);
	CHECK_INT(fi_getopt(fid, FI_OPT_ENDPOINT + 7, FI_OPT_CM_DATA_SIZE, &v, &len),
	          -FI_ENOPROTOOPT);
}

static int listen_on(struct side *s, struct fid_pep **pep, void *ctx,
                     struct sockaddr_in *addr)
{
	uint32_t event;
	union cm_ev ev;

	OK(open_side(s, true));
	OK(fi_passive_ep(s->fabric, s->info, pep, ctx));
	CHECK_INT((*pep)->fid.fclass, FI_CLASS_PEP);
	CHECK((*pep)->fid.context == ctx);
	OK(fi_pep_bind(*pep, &s->eq->fid, 0));
	check_cm_opts(&(*pep)->fid, false);
	OK(fi_listen(*pep));
	OK(get_addr(getname_fn, *pep, "fi_getname(pep)", addr));
	/* Nobody knows the address yet: nothing to read, asleep or not. */
	CHECK_INT(fi_eq_read(s->eq, &event, &ev, sizeof(ev), 0), -FI_EAGAIN);
	CHECK_INT(fi_eq_sread(s->eq, &event, &ev, sizeof(ev), 20, 0), -FI_EAGAIN);
	return 0;
}

/* Case 1 with FI_ADDR_STR: a passive endpoint's name as text, under the
 * same -FI_ETOOSMALL contract as the binary one. */
static int str_name(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints(FI_ADDR_STR);
	struct fid_pep *pep = NULL;
	char full[128], part[16], want[64];
	size_t len = 0, need;
	unsigned port = 0;
	int n = 0;

	if (!hints)
		return 2;
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &s.info));
	fi_freeinfo(hints);
	check_info(s.info, FI_ADDR_STR);
	OK(open_side(&s, true));
	OK(fi_passive_ep(s.fabric, s.info, &pep, NULL));
	OK(fi_pep_bind(pep, &s.eq->fid, 0));
	OK(fi_listen(pep));
	len = sizeof(full);
	OK(fi_getname(&pep->fid, full, &len));
	CHECK(sscanf(full, "fi_sockaddr_in://127.0.0.1:%u%n", &port, &n) == 1);
	CHECK(port > 0 && port < 65536);
	snprintf(want, sizeof(want), "fi_sockaddr_in://127.0.0.1:%u", port);
	CHECK_STR(full, want);
	need = strlen(want) + 1;
	CHECK_INT(len, need);
	len = 0;
	CHECK_INT(fi_getname(&pep->fid, NULL, &len), -FI_ETOOSMALL);
	CHECK_INT(len, need);
	len = 10;
	memset(part, 0x5a, sizeof(part));
	CHECK_INT(fi_getname(&pep->fid, part, &len), -FI_ETOOSMALL);
	CHECK_INT(len, need);
	/* Truncated: its first bytes (the tenth may be a terminator). */
	CHECK(!memcmp(part, want, 9));
	CHECK_HEX(part[10], 0x5a);
	CHECK_INT(fi_close(&pep->fid), 0);
	close_side(&s);
	return 0;
}

/* ---- cases 1-7: one server, one client -------------------------------------- */

/* What each side tells the other once connected (case 3). */
struct names {
	struct sockaddr_in a, b;
};

static int server(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints(FI_SOCKADDR_IN), *creq;
	struct fid_pep *pep = NULL;
	struct fid_ep *ep = NULL;
	struct fid_mr *mr_buf = NULL, *mr_ctr = NULL;
	struct sockaddr_in pep_addr, creq_addr, peer, name;
	struct names mine, all[ET_MAX_PROCS * ET_SLOT / sizeof(struct names)];
	struct fi_cq_tagged_entry c[4];
	struct keys k;
	uint32_t event;
	union cm_ev ev;
	int pep_ctx, ep_ctx, rs, rb, ra, rtb, sb, ss, sk, rd;
	char *small = calloc(1, SMALL), *big = calloc(1, BIG), *ta = calloc(1, TLEN),
	     *tb = calloc(1, TLEN), *rbuf = calloc(1, BIG);
	uint64_t *ctr = calloc(1, 64), done = 0, t0;
	ssize_t r;

	if (!hints || !small || !big || !ta || !tb || !rbuf || !ctr)
		return 2;

	/* Case 1: listen on 127.0.0.1 named as a source (FI_SOURCE). */
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &s.info));
	fi_freeinfo(hints);
	check_info(s.info, FI_SOCKADDR_IN);
	CHECK_INT(s.info->src_addrlen, sizeof(struct sockaddr_in));
	CHECK(s.info->src_addr &&
	      ntohl(((struct sockaddr_in *)s.info->src_addr)->sin_addr.s_addr) ==
	          INADDR_LOOPBACK);
	OK(listen_on(&s, &pep, &pep_ctx, &pep_addr));
	CHECK_INT(str_name(), 0);
	CHECK_INT(et_allgather(&pep_addr, sizeof(pep_addr), all), 0);

	/* Case 2: the request, polled for. */
	r = next_event(s.eq, false, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNREQ, &pep->fid, "hello-1");
	creq = ev.e.info;
	if (r < 0 || event != FI_CONNREQ || !creq)
		return 1;
	CHECK(creq->handle != NULL);
	CHECK(creq->handle && creq->handle->fclass == FI_CLASS_CONNREQ);
	check_info(creq, FI_SOCKADDR_IN);
	CHECK_INT(creq->dest_addrlen, sizeof(creq_addr));
	CHECK(creq->dest_addr != NULL);
	if (!creq->dest_addr)
		return 1;
	memcpy(&creq_addr, creq->dest_addr, sizeof(creq_addr));
	CHECK_INT(creq_addr.sin_family, AF_INET);
	CHECK_HEX(ntohl(creq_addr.sin_addr.s_addr), INADDR_LOOPBACK);

	/* Accept on an endpoint made from the request, receives posted
	 * before the accept (man fi_cm: "receive buffers may be associated
	 * with an endpoint anytime"). */
	OK(fi_domain(s.fabric, creq, &s.domain, NULL));
	{
		struct fi_cq_attr cqa = {.size = 256, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(s.domain, &cqa, &s.cq, NULL));
	}
	OK(open_ep(&s, creq, &ep, &ep_ctx));
	OK(fi_recv(ep, small, SMALL, NULL, 0, &rs));
	OK(fi_recv(ep, big, BIG, NULL, 0, &rb));
	OK(fi_trecv(ep, tb, TLEN, NULL, 0, TAG_B, 0, &rtb));
	OK(fi_trecv(ep, ta, TLEN, NULL, 0, TAG_A, 0, &ra));
	OK(fi_accept(ep, "welcome", 8));
	fi_freeinfo(creq);
	r = next_event(s.eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNECTED, &ep->fid, NULL);

	/* Case 3: the addresses both ways. */
	OK(get_addr(getpeer_fn, ep, "fi_getpeer(ep)", &peer));
	OK(get_addr(getname_fn, ep, "fi_getname(ep)", &name));
	check_same_addr(&peer, &creq_addr, "server getpeer vs FI_CONNREQ dest_addr");
	mine.a = peer;
	mine.b = name;
	CHECK_INT(et_allgather(&mine, sizeof(mine), all), 0);
	{
		const struct names *cl =
		    (const struct names *)((char *)all + CLIENT * ET_SLOT);

		/* client: a = its name, b = its peer */
		check_same_addr(&cl->a, &peer, "client getname vs server getpeer");
		check_same_addr(&cl->b, &name, "client getpeer vs server getname");
		check_same_addr(&cl->b, &pep_addr, "client getpeer vs listening address");
	}

	/* Case 4: the client's messages, in posting and tag order. */
	{
		void *ctxs[4] = {&rs, &rb, &ra, &rtb};

		collect(s.cq, 4, ctxs, c);
		CHECK_HEX(c[0].flags, FI_RECV | FI_MSG);
		CHECK_INT(c[0].len, SMALL);
		check_bytes(small, SMALL, 11);
		CHECK_HEX(c[1].flags, FI_RECV | FI_MSG);
		CHECK_INT(c[1].len, BIG);
		check_bytes(big, BIG, 12);
		CHECK_HEX(c[2].flags, FI_RECV | FI_TAGGED);
		CHECK_HEX(c[2].tag, TAG_A);
		CHECK_INT(c[2].len, TLEN);
		check_bytes(ta, TLEN, 13);
		CHECK_HEX(c[3].flags, FI_RECV | FI_TAGGED);
		CHECK_HEX(c[3].tag, TAG_B);
		CHECK_INT(c[3].len, TLEN);
		check_bytes(tb, TLEN, 14);
	}
	/* ... and back, then the keys of two regions. */
	OK(fi_mr_reg(s.domain, rbuf, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
	             &mr_buf, NULL));
	OK(fi_mr_reg(s.domain, ctr, 8, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr_ctr,
	             NULL));
	*ctr = 100;
	k = (struct keys){(uintptr_t)rbuf, fi_mr_key(mr_buf), (uintptr_t)ctr,
	                  fi_mr_key(mr_ctr)};
	et_fill(big, BIG, 21);
	et_fill(small, SMALL, 22);
	OK(fi_recv(ep, &done, sizeof(done), NULL, 0, &rd));
	OK(fi_send(ep, big, BIG, NULL, 0, &sb));
	OK(fi_send(ep, small, SMALL, NULL, 0, &ss));
	OK(fi_send(ep, &k, sizeof(k), NULL, 0, &sk));
	{
		/* The client's fi_write/fi_read/fi_fetch_atomic need us to
		 * progress until its "done". */
		void *ctxs[4] = {&sb, &ss, &sk, &rd};

		collect(s.cq, 4, ctxs, c);
		for (int i = 0; i < 3; i++)
			CHECK_HEX(c[i].flags, FI_SEND | FI_MSG);
		CHECK_HEX(c[3].flags, FI_RECV | FI_MSG);
		CHECK_INT(c[3].len, sizeof(done));
		CHECK_INT(done, 0xd0e);
		check_bytes(rbuf, BIG, 31);
		CHECK_INT(*ctr, 105);
	}

	/* Case 5: a second request, refused with data. */
	CHECK_INT(et_barrier(), 0);
	r = next_event(s.eq, false, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNREQ, &pep->fid, "hello-2");
	if (r >= 0 && event == FI_CONNREQ && ev.e.info) {
		CHECK(ev.e.info->handle != NULL);
		CHECK_INT(fi_reject(pep, ev.e.info->handle, "go-away", 8), 0);
		fi_freeinfo(ev.e.info);
	}

	/* Case 7: the client shuts down; we hear it. */
	CHECK_INT(et_barrier(), 0);
	t0 = et_now_us();
	r = next_event(s.eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_SHUTDOWN, &ep->fid, NULL);
	fprintf(stderr, "server: FI_SHUTDOWN after %llu us\n",
	        (unsigned long long)(et_now_us() - t0));
	/* Our fi_shutdown of what the peer ended succeeds (as the
	 * reference's does) and reports nothing more: one FI_SHUTDOWN a
	 * connection, whichever side ends it first. */
	CHECK_INT(fi_shutdown(ep, 0), 0);
	r = next_event(s.eq, false, 100, &event, &ev, NULL, NULL, 0);
	CHECK_INT(r, -FI_EAGAIN);
	CHECK_INT(et_barrier(), 0);

	CHECK_INT(fi_close(&ep->fid), 0);
	CHECK_INT(fi_close(&pep->fid), 0);
	CHECK_INT(fi_close(&mr_buf->fid), 0);
	CHECK_INT(fi_close(&mr_ctr->fid), 0);
	close_side(&s);
	free(small), free(big), free(ta), free(tb), free(rbuf), free(ctr);
	return 0;
}

/* Case 6: fi_connect to a port bound by nobody's listener, the endpoint
 * from an FI_ADDR_STR info whose destination fi_connect takes (addr NULL). */
static int refused(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints(FI_ADDR_STR);
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct fi_eq_err_entry err;
	struct fid_ep *ep = NULL;
	char text[64];
	uint32_t event;
	union cm_ev ev;
	uint64_t t0;
	int fd = socket(AF_INET, SOCK_STREAM, 0), ctx;
	ssize_t r;

	/* Bound, never listening: the port is ours, and connects get a reset. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!hints || fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &alen))
		return 1;
	snprintf(text, sizeof(text), "fi_sockaddr_in://127.0.0.1:%u", ntohs(a.sin_port));
	hints->dest_addr = strdup(text);
	hints->dest_addrlen = strlen(text) + 1;
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s.info));
	fi_freeinfo(hints);
	check_info(s.info, FI_ADDR_STR);
	CHECK(s.info->dest_addr && !strcmp(s.info->dest_addr, text));
	OK(open_side(&s, false));
	OK(open_ep(&s, s.info, &ep, &ctx));
	t0 = et_now_us();
	OK(fi_connect(ep, NULL, "hello-3", 8));
	r = next_event(s.eq, true, EV_MS, &event, &ev, &err, NULL, 0);
	check_cm_error(r, &err, ep, FI_ECONNREFUSED, NULL);
	fprintf(stderr, "client: refused after %llu us\n",
	        (unsigned long long)(et_now_us() - t0));
	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	close(fd);
	return 0;
}

static int client(void)
{
	struct side s = {0};
	struct fi_info *hints = msg_hints(FI_SOCKADDR_IN);
	struct fid_ep *ep = NULL, *ep2 = NULL;
	struct sockaddr_in srv, name, peer;
	struct names mine, all[ET_MAX_PROCS * ET_SLOT / sizeof(struct names)];
	struct fi_cq_tagged_entry c[4];
	struct fi_cq_err_entry cerr;
	struct fi_eq_err_entry err;
	struct keys k;
	uint32_t event;
	union cm_ev ev;
	char port[16], errbuf[64];
	char *small = calloc(1, SMALL), *big = calloc(1, BIG), *ta = malloc(TLEN),
	     *tb = malloc(TLEN), *back = calloc(1, BIG), *rsmall = calloc(1, SMALL),
	     *rbig = calloc(1, BIG), junk[64];
	uint64_t add = 5, old = 0, done = 0xd0e;
	int ep_ctx, ep2_ctx, rb, rs, rk, ss, sb, sa, stb, wc, rc, ac, dc, j1, j2, xc;
	ssize_t r;

	if (!hints || !small || !big || !ta || !tb || !back || !rsmall || !rbig)
		return 2;
	CHECK_INT(et_allgather("", 0, all), 0);
	memcpy(&srv, (char *)all + SERVER * ET_SLOT, sizeof(srv));
	CHECK_INT(srv.sin_family, AF_INET);

	/* Case 2: the server named as node and service. */
	snprintf(port, sizeof(port), "%u", ntohs(srv.sin_port));
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, 0, hints, &s.info));
	fi_freeinfo(hints);
	check_info(s.info, FI_SOCKADDR_IN);
	CHECK_INT(s.info->dest_addrlen, sizeof(srv));
	CHECK(s.info->dest_addr && same_addr(s.info->dest_addr, &srv));
	OK(open_side(&s, false));
	OK(open_ep(&s, s.info, &ep, &ep_ctx));
	check_cm_opts(&ep->fid, true);
	/* Receives before the connection exists. */
	OK(fi_recv(ep, rbig, BIG, NULL, 0, &rb));
	OK(fi_recv(ep, rsmall, SMALL, NULL, 0, &rs));
	OK(fi_recv(ep, &k, sizeof(k), NULL, 0, &rk));
	OK(fi_connect(ep, &srv, "hello-1", 8));
	r = next_event(s.eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNECTED, &ep->fid, "welcome");
	if (r < 0 || event != FI_CONNECTED)
		return 1;

	/* Case 3. */
	OK(get_addr(getname_fn, ep, "fi_getname(ep)", &name));
	OK(get_addr(getpeer_fn, ep, "fi_getpeer(ep)", &peer));
	check_same_addr(&peer, &srv, "client getpeer vs the address connected to");
	mine.a = name;
	mine.b = peer;
	CHECK_INT(et_allgather(&mine, sizeof(mine), all), 0);

	/* Case 4: messages and tagged messages out ... */
	et_fill(small, SMALL, 11);
	et_fill(big, BIG, 12);
	et_fill(ta, TLEN, 13);
	et_fill(tb, TLEN, 14);
	OK(fi_send(ep, small, SMALL, NULL, 0, &ss));
	OK(fi_send(ep, big, BIG, NULL, 0, &sb));
	OK(fi_tsend(ep, ta, TLEN, NULL, 0, TAG_A, &sa));
	OK(fi_tsend(ep, tb, TLEN, NULL, 0, TAG_B, &stb));
	{
		void *ctxs[4] = {&ss, &sb, &sa, &stb};

		collect(s.cq, 4, ctxs, c);
		CHECK_HEX(c[0].flags, FI_SEND | FI_MSG);
		CHECK_HEX(c[1].flags, FI_SEND | FI_MSG);
		CHECK_HEX(c[2].flags, FI_SEND | FI_TAGGED);
		CHECK_HEX(c[3].flags, FI_SEND | FI_TAGGED);
	}
	/* ... and in: 1 MiB, 100 B, then the keys. */
	{
		void *ctxs[3] = {&rb, &rs, &rk};

		collect(s.cq, 3, ctxs, c);
		for (int i = 0; i < 3; i++)
			CHECK_HEX(c[i].flags, FI_RECV | FI_MSG);
		CHECK_INT(c[0].len, BIG);
		check_bytes(rbig, BIG, 21);
		CHECK_INT(c[1].len, SMALL);
		check_bytes(rsmall, SMALL, 22);
		CHECK_INT(c[2].len, sizeof(k));
	}
	/* RMA into the server's region, and a fetching atomic. */
	et_fill(big, BIG, 31);
	OK(fi_write(ep, big, BIG, NULL, 0, k.buf, k.buf_key, &wc));
	collect(s.cq, 1, (void *[]){&wc}, c);
	CHECK_HEX(c[0].flags, FI_RMA | FI_WRITE);
	OK(fi_read(ep, back, BIG, NULL, 0, k.buf, k.buf_key, &rc));
	collect(s.cq, 1, (void *[]){&rc}, c);
	CHECK_HEX(c[0].flags, FI_RMA | FI_READ);
	check_bytes(back, BIG, 31);
	OK(fi_fetch_atomic(ep, &add, 1, NULL, &old, NULL, 0, k.ctr, k.ctr_key, FI_UINT64,
	                   FI_SUM, &ac));
	collect(s.cq, 1, (void *[]){&ac}, c);
	CHECK_HEX(c[0].flags, FI_ATOMIC | FI_READ);
	CHECK_INT(old, 100);
	OK(fi_send(ep, &done, sizeof(done), NULL, 0, &dc));
	collect(s.cq, 1, (void *[]){&dc}, c);

	/* Case 5: a second endpoint on the same EQ is refused with data. */
	CHECK_INT(et_barrier(), 0);
	OK(open_ep(&s, s.info, &ep2, &ep2_ctx));
	OK(fi_connect(ep2, &srv, "hello-2", 8));
	memset(errbuf, 0, sizeof(errbuf));
	r = next_event(s.eq, false, EV_MS, &event, &ev, &err, errbuf, sizeof(errbuf));
	if (r >= 0)
		fprintf(stderr, "client: event %u instead of the rejection\n", event);
	check_cm_error(r, &err, ep2, FI_ECONNREFUSED, "go-away");
	CHECK(err.err_data == errbuf);
	CHECK_INT(fi_close(&ep2->fid), 0);

	/* Case 6. */
	CHECK_INT(refused(), 0);

	/* Case 7: shut down with receives posted; any completion for them
	 * is a cancellation written before fi_shutdown returns (man fi_cm). */
	OK(fi_recv(ep, junk, sizeof(junk), NULL, 0, &j1));
	OK(fi_trecv(ep, junk, sizeof(junk), NULL, 0, 0x99, 0, &j2));
	CHECK_INT(et_barrier(), 0);
	OK(fi_shutdown(ep, 0));
	for (int n = 0; n < 3; n++) {
		struct fi_cq_tagged_entry e;

		r = fi_cq_read(s.cq, &e, 1);
		if (r == -FI_EAGAIN)
			break;
		CHECK_INT(r, -FI_EAVAIL);
		if (r != -FI_EAVAIL)
			break;
		memset(&cerr, 0, sizeof(cerr));
		CHECK_INT(fi_cq_readerr(s.cq, &cerr, 0), 1);
		CHECK_INT(cerr.err, FI_ECANCELED);
		CHECK(cerr.op_context == &j1 || cerr.op_context == &j2);
	}
	/* Our own fi_shutdown is an FI_SHUTDOWN on our EQ as well (the
	 * reference's is; fabtests' cm_data waits for it), and only one: a
	 * second fi_shutdown succeeds without another. */
	r = next_event(s.eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_SHUTDOWN, &ep->fid, NULL);
	CHECK_INT(fi_shutdown(ep, 0), 0);
	r = next_event(s.eq, false, 100, &event, &ev, NULL, NULL, 0);
	CHECK_INT(r, -FI_EAGAIN);
	CHECK_INT(et_barrier(), 0); /* the server has its FI_SHUTDOWN */
	CHECK_INT(fi_cq_read(s.cq, c, 1), -FI_EAGAIN);
	/* A send now fails, at once or as an error completion; it does not
	 * hang. */
	r = fi_send(ep, small, SMALL, NULL, 0, &xc);
	if (!r) {
		r = et_read(s.cq, c, NULL, &cerr, NULL, EV_MS);
		CHECK_INT(r, -FI_EAVAIL);
		CHECK(cerr.op_context == &xc);
		CHECK(cerr.err != 0);
	} else {
		CHECK(r < 0 && r != -FI_EAGAIN);
	}

	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	free(small), free(big), free(ta), free(tb), free(back), free(rsmall), free(rbig);
	return 0;
}

static int pair(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (rank == SERVER ? server() : client())
		CHECK(0);
	CHECK_NO_LEAKS();
	return check_done();
}

/* ---- case 8: the server killed mid-transfer ------------------------------- */

struct hello {
	struct sockaddr_in addr;
	int32_t pid;
};

/* Listens on 127.0.0.1 (named by hints->src_addr), tells the group its
 * address and pid, accepts one connection on an endpoint bound to s's
 * EQ and CQ; 0 once connected. */
static int accept_side(struct side *s, struct fid_ep **ep, int *ep_ctx, struct hello *all)
{
	struct fi_info *hints = msg_hints(FI_SOCKADDR_IN);
	struct sockaddr_in src = {.sin_family = AF_INET};
	struct hello me = {.pid = (int32_t)getpid()};
	struct fid_pep *pep = NULL;
	uint32_t event;
	union cm_ev ev;
	static int pep_ctx;
	ssize_t r;

	if (!hints)
		return 2;
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	hints->src_addr = malloc(sizeof(src));
	if (!hints->src_addr)
		return 2;
	memcpy(hints->src_addr, &src, sizeof(src));
	hints->src_addrlen = sizeof(src);
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	fi_freeinfo(hints);
	check_info(s->info, FI_SOCKADDR_IN);
	OK(listen_on(s, &pep, &pep_ctx, &me.addr));
	_Static_assert(sizeof(struct hello) <= ET_SLOT, "one slot");
	CHECK_INT(et_allgather(&me, sizeof(me), all), 0);
	r = next_event(s->eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNREQ, &pep->fid, "hello-4");
	if (r < 0 || event != FI_CONNREQ || !ev.e.info)
		return 1;
	OK(fi_domain(s->fabric, ev.e.info, &s->domain, NULL));
	{
		struct fi_cq_attr cqa = {.size = 2048, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(s->domain, &cqa, &s->cq, NULL));
	}
	OK(open_ep(s, ev.e.info, ep, ep_ctx));
	OK(fi_accept(*ep, NULL, 0));
	fi_freeinfo(ev.e.info);
	r = next_event(s->eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNECTED, &(*ep)->fid, NULL);
	OK(fi_close(&pep->fid));
	return r < 0 || event != FI_CONNECTED;
}

/* Tells the group its pid, connects to the listener of rank SERVER. */
static int connect_side(struct side *s, struct fid_ep **ep, int *ep_ctx, struct hello *all)
{
	struct fi_info *hints = msg_hints(FI_SOCKADDR_IN);
	struct hello me = {.pid = (int32_t)getpid()};
	uint32_t event;
	union cm_ev ev;
	ssize_t r;

	if (!hints)
		return 2;
	CHECK_INT(et_allgather(&me, sizeof(me), all), 0);
	hints->dest_addr = malloc(sizeof(all[SERVER].addr));
	if (!hints->dest_addr)
		return 2;
	memcpy(hints->dest_addr, &all[SERVER].addr, sizeof(all[SERVER].addr));
	hints->dest_addrlen = sizeof(all[SERVER].addr);
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	fi_freeinfo(hints);
	OK(open_side(s, false));
	OK(open_ep(s, s->info, ep, ep_ctx));
	OK(fi_connect(*ep, NULL, "hello-4", 8));
	r = next_event(s->eq, true, EV_MS, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_CONNECTED, &(*ep)->fid, NULL);
	return r < 0 || event != FI_CONNECTED;
}

/* Accepts, then waits in a barrier the client answers only after killing
 * us. */
static int victim(bool pingpong)
{
	struct side s = {0};
	struct hello all[ET_MAX_PROCS];
	struct fid_ep *ep = NULL;
	int ep_ctx;

	if (accept_side(&s, &ep, &ep_ctx, all))
		return 1;
	CHECK_INT(et_barrier(), 0);
	/* Case 9: echo the client's ping-pong first. */
	for (int i = 0; pingpong && i < PP_ROUNDS; i++) {
		struct fi_cq_tagged_entry c;
		static char pp[PP_LEN];

		OK(fi_recv(ep, pp, sizeof(pp), NULL, 0, NULL));
		CHECK_INT(et_read(s.cq, &c, NULL, NULL, NULL, EV_MS), 1);
		OK(fi_send(ep, pp, sizeof(pp), NULL, 0, NULL));
		CHECK_INT(et_read(s.cq, &c, NULL, NULL, NULL, EV_MS), 1);
	}
	/* No progress from here: the client's big send stays in flight. */
	et_barrier();
	fprintf(stderr, "victim: still alive after the client's kill\n");
	return 1;
}

static int survivor(void)
{
	struct side s = {0};
	struct hello all[ET_MAX_PROCS];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	struct fid_ep *ep = NULL;
	uint32_t event;
	union cm_ev ev;
	char *big = calloc(1, STUCK), junk[64];
	int ep_ctx, sc, rc, more = 0;
	uint64_t t0, t_ev, t_cq;
	ssize_t r;

	if (!big)
		return 2;
	if (connect_side(&s, &ep, &ep_ctx, all))
		return 1;
	CHECK_INT(et_barrier(), 0);

	et_fill(big, STUCK, 41);
	OK(fi_send(ep, big, STUCK, NULL, 0, &sc));
	OK(fi_recv(ep, junk, sizeof(junk), NULL, 0, &rc));
	/* The peer reads nothing: after a while of progress the send is
	 * still outstanding (else the kill below proves nothing). */
	t0 = et_now_us();
	do
		r = fi_cq_read(s.cq, &c, 1);
	while (r == -FI_EAGAIN && et_now_us() - t0 < 200000);
	CHECK_INT(r, -FI_EAGAIN);

	CHECK_INT(kill(all[SERVER].pid, SIGKILL), 0);
	t0 = et_now_us();
	r = next_event(s.eq, true, DEATH_MS, &event, &ev, NULL, NULL, 0);
	t_ev = et_now_us() - t0;
	check_cm_event(r, event, &ev, FI_SHUTDOWN, &ep->fid, NULL);
	r = et_read(s.cq, &c, NULL, &err, NULL, DEATH_MS);
	t_cq = et_now_us() - t0;
	CHECK_INT(r, -FI_EAVAIL);
	if (r == -FI_EAVAIL) {
		CHECK(err.op_context == &sc);
		CHECK(err.err != 0);
		CHECK(err.flags & FI_SEND);
		fprintf(stderr, "survivor: send failed with %d (%s)\n", err.err,
		        fi_strerror(err.err));
	}
	fprintf(stderr,
	        "survivor: FI_SHUTDOWN after %llu us, error completion after %llu us\n",
	        (unsigned long long)t_ev, (unsigned long long)t_cq);
	CHECK(t_cq < DEATH_MS * 1000ull);
	/* The receive may be cancelled too (man fi_cm leaves it open);
	 * whatever else comes is about it. */
	while ((r = et_read(s.cq, &c, NULL, &err, NULL, 50)) != -FI_ETIMEDOUT) {
		CHECK(r == -FI_EAVAIL ? err.op_context == &rc : 0);
		if (++more > 1)
			break;
	}
	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	free(big);
	return 0;
}

/* ---- case 9: the server killed mid-ping-pong, the client reading only its CQ */

/* After a ping-pong, the client posts a receive for the next pong and a
 * send the dead server never reads, then kills it.  Polling nothing but
 * the CQ, it has both fail within PP_DEATH_MS, and FI_SHUTDOWN is on the
 * EQ by then, though the EQ was never read. */
static int survivor_cq_only(void)
{
	struct side s = {0};
	struct hello all[ET_MAX_PROCS];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	struct fid_ep *ep = NULL;
	uint32_t event;
	union cm_ev ev;
	static char pp[PP_LEN], pong[PP_LEN];
	char *big = calloc(1, STUCK);
	int ep_ctx, sc, rc;
	bool send_failed = false, recv_failed = false;
	uint64_t t0, t_end = 0;
	ssize_t r;

	if (!big)
		return 2;
	if (connect_side(&s, &ep, &ep_ctx, all))
		return 1;
	CHECK_INT(et_barrier(), 0);
	for (int i = 0; i < PP_ROUNDS; i++) {
		et_fill(pp, sizeof(pp), (uint64_t)i);
		OK(fi_recv(ep, pong, sizeof(pong), NULL, 0, NULL));
		OK(fi_send(ep, pp, sizeof(pp), NULL, 0, NULL));
		for (int n = 0; n < 2; n++)
			CHECK_INT(et_read(s.cq, &c, NULL, NULL, NULL, EV_MS), 1);
		CHECK(et_verify(pong, sizeof(pong), (uint64_t)i) == (size_t)-1);
	}

	OK(fi_recv(ep, pong, sizeof(pong), NULL, 0, &rc));
	et_fill(big, STUCK, 43);
	OK(fi_send(ep, big, STUCK, NULL, 0, &sc));
	t0 = et_now_us();
	do
		r = fi_cq_read(s.cq, &c, 1);
	while (r == -FI_EAGAIN && et_now_us() - t0 < 200000);
	CHECK_INT(r, -FI_EAGAIN);

	CHECK_INT(kill(all[SERVER].pid, SIGKILL), 0);
	t0 = et_now_us();
	while (!(send_failed && recv_failed)) {
		r = et_read(s.cq, &c, NULL, &err, NULL, DEATH_MS);
		CHECK_INT(r, -FI_EAVAIL);
		if (r != -FI_EAVAIL)
			break;
		t_end = et_now_us() - t0;
		if (err.op_context == &sc) {
			CHECK(!send_failed);
			CHECK(err.flags & FI_SEND);
			send_failed = true;
		} else {
			CHECK(err.op_context == &rc);
			CHECK(!recv_failed);
			CHECK(err.flags & FI_RECV);
			recv_failed = true;
		}
		CHECK_INT(err.err, FI_ENOTCONN);
	}
	fprintf(stderr, "survivor (CQ only): send and receive failed %llu us after the kill\n",
	        (unsigned long long)t_end);
	CHECK(t_end < PP_DEATH_MS * 1000ull);
	/* Nothing more on the CQ; FI_SHUTDOWN waits on the EQ, once. */
	CHECK_INT(fi_cq_read(s.cq, &c, 1), -FI_EAGAIN);
	r = next_event(s.eq, false, 0, &event, &ev, NULL, NULL, 0);
	check_cm_event(r, event, &ev, FI_SHUTDOWN, &ep->fid, NULL);
	CHECK_INT(next_event(s.eq, false, 100, &event, &ev, NULL, NULL, 0), -FI_EAGAIN);
	/* A receive posted now fails too; it does not wait for ever. */
	OK(fi_recv(ep, pong, sizeof(pong), NULL, 0, &rc));
	r = et_read(s.cq, &c, NULL, &err, NULL, EV_MS);
	CHECK_INT(r, -FI_EAVAIL);
	CHECK(r == -FI_EAVAIL && err.op_context == &rc && err.err == FI_ENOTCONN);
	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	free(big);
	return 0;
}

/* ---- case 10: nothing lost on a connection when the sender ends --------------- */

/* The client sends NL_COUNT messages of each size (each waited for, at
 * most NL_WAIT_MS when the server is not reading), then ends: by
 * returning, _exit or SIGKILL, right after its last completion.  The
 * server posted its receives before, or posts them once the client is
 * gone.  Every message whose send completed arrives whole; one still
 * outstanding arrives whole or fails; later receives fail with
 * FI_ENOTCONN. */
#define NL_COUNT   10
#define NL_WAIT_MS 300
static const size_t nl_sizes[] = {1, 256, 4096, 65535, 65536, 65537, 1 << 20};
#define NL_NSIZES (sizeof(nl_sizes) / sizeof(nl_sizes[0]))
#define NL_MSGS   (NL_NSIZES * NL_COUNT)

struct nl_case {
	int end;      /* 0 return, 1 _exit, 2 SIGKILL */
	bool after;   /* the server posts once the client is gone */
	int *done;    /* shared: sends the client saw complete (-1: not yet) */
};

static uint64_t nl_seed(size_t m)
{
	return 7000 + m;
}

static int nl_sender(const struct nl_case *nc)
{
	struct side s = {0};
	struct hello all[ET_MAX_PROCS];
	struct fid_ep *ep = NULL;
	struct fi_cq_tagged_entry c;
	char *buf = malloc(1 << 20);
	int ep_ctx, done = 0;

	if (!buf || connect_side(&s, &ep, &ep_ctx, all))
		return 1;
	CHECK_INT(et_barrier(), 0); /* the server's receives are up, or not */
	for (size_t m = 0; m < NL_MSGS; m++) {
		size_t len = nl_sizes[m / NL_COUNT];
		ssize_t r;

		et_fill(buf, len, nl_seed(m));
		r = m % 2 ? fi_tsend(ep, buf, len, NULL, 0, nl_seed(m), NULL)
		          : fi_send(ep, buf, len, NULL, 0, NULL);
		CHECK_INT(r, 0);
		r = et_read(s.cq, &c, NULL, NULL, NULL, nc->after ? NL_WAIT_MS : EV_MS);
		if (r == -FI_ETIMEDOUT && nc->after)
			break; /* needs the server, who is not looking */
		CHECK_INT(r, 1);
		if (r != 1)
			break;
		done++;
	}
	__atomic_store_n(nc->done, check_failures ? -2 : done, __ATOMIC_RELEASE);
	if (nc->end == 2)
		kill(getpid(), SIGKILL);
	if (nc->end == 1)
		_exit(check_failures ? 1 : 0);
	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	free(buf);
	return 0;
}

static void nl_post(struct fid_ep *ep, char *mem, int *ctx, size_t m)
{
	size_t len = nl_sizes[m / NL_COUNT];
	char *b = mem + m * ((size_t)1 << 20);

	CHECK_INT(m % 2 ? fi_trecv(ep, b, len, NULL, 0, nl_seed(m), 0, &ctx[m])
	                : fi_recv(ep, b, len, NULL, 0, &ctx[m]),
	          0);
}

static int nl_receiver(const struct nl_case *nc)
{
	struct side s = {0};
	struct hello all[ET_MAX_PROCS];
	struct fid_ep *ep = NULL;
	char *mem = malloc(NL_MSGS << 20);
	int ctx[NL_MSGS], state[NL_MSGS] = {0}, ep_ctx, done, open = NL_MSGS;
	uint64_t end;

	if (!mem || accept_side(&s, &ep, &ep_ctx, all))
		return 1;
	for (size_t m = 0; !nc->after && m < NL_MSGS; m++)
		nl_post(ep, mem, ctx, m);
	CHECK_INT(et_barrier(), 0);
	if (nc->after) {
		/* Nothing read until the client has ended (its slot of the
		 * all-gather: slots are ET_SLOT bytes). */
		pid_t client = ((const struct hello *)((const char *)all + CLIENT * ET_SLOT))->pid;
		bool gone = false;

		end = et_now_us() + 20000000ull;
		CHECK(client > 0);
		while (client > 0 && !(gone = kill(client, 0) != 0) && et_now_us() < end) {
			char path[64], st[256];
			FILE *f;

			snprintf(path, sizeof(path), "/proc/%d/stat", (int)client);
			f = fopen(path, "r");
			if (f) {
				const char *p = fgets(st, sizeof(st), f) ? strrchr(st, ')') : NULL;

				fclose(f);
				if (p && p[1] == ' ' && p[2] == 'Z')
					gone = true;
			}
			if (gone)
				break;
			usleep(2000);
		}
		CHECK(gone);
		for (size_t m = 0; m < NL_MSGS; m++)
			nl_post(ep, mem, ctx, m);
	}
	/* Every receive ends: completed, or failed once the connection is. */
	end = et_now_us() + 20000000ull;
	while (open && et_now_us() < end) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err;
		ssize_t r = et_read(s.cq, &c, NULL, &err, NULL, 100);
		int *x = r == 1 ? c.op_context : r == -FI_EAVAIL ? err.op_context : NULL;
		size_t m;

		if (r == -FI_ETIMEDOUT)
			continue;
		if (!x || x < ctx || x >= ctx + NL_MSGS) {
			CHECK(0);
			break;
		}
		m = (size_t)(x - ctx);
		CHECK_INT(state[m], 0);
		state[m] = r == 1 ? 1 : 2;
		open--;
		if (r == 1) {
			size_t len = nl_sizes[m / NL_COUNT];

			CHECK_INT(c.len, len);
			CHECK(et_verify(mem + m * ((size_t)1 << 20), len, nl_seed(m)) ==
			      (size_t)-1);
		} else {
			CHECK_INT(err.err, FI_ENOTCONN);
		}
	}
	CHECK_INT(open, 0);
	/* The client's count, once it has stored it. */
	end = et_now_us() + 20000000ull;
	while (__atomic_load_n(nc->done, __ATOMIC_ACQUIRE) == -1 && et_now_us() < end)
		usleep(1000);
	done = __atomic_load_n(nc->done, __ATOMIC_ACQUIRE);
	CHECK(done >= 0);
	for (int m = 0; m < done && m < (int)NL_MSGS; m++)
		if (state[m] != 1) {
			fprintf(stderr, "case 10: completed send %d of %d (%zu B) %s\n", m, done,
			        nl_sizes[m / NL_COUNT], state[m] ? "failed" : "lost");
			CHECK(0);
		}
	CHECK_INT(fi_close(&ep->fid), 0);
	close_side(&s);
	free(mem);
	return 0;
}

static int nothing_lost(int rank, int nprocs, void *arg)
{
	(void)nprocs;
	if (rank == SERVER ? nl_receiver(arg) : nl_sender(arg))
		CHECK(0);
	CHECK_NO_LEAKS();
	return check_done();
}

static int death(int rank, int nprocs, void *arg)
{
	bool cq_only = arg != NULL;

	(void)nprocs;
	if (rank == SERVER ? victim(cq_only) : cq_only ? survivor_cq_only() : survivor())
		CHECK(0);
	CHECK_NO_LEAKS();
	return check_done();
}

/* ---- automatic progress on a connected endpoint ---------------------------- */

#define AUTO_LEN   ((size_t)16 << 20) /* a rendezvous: the receiver must answer */
#define AUTO_SLEEP 2000               /* ms the server calls nothing */

/* FI_PROGRESS_AUTO asked for and granted: the server posts a receive of
 * AUTO_LEN and sleeps, calling nothing; the client's send of it completes
 * during that sleep (the server's progress thread answered the
 * rendezvous), and the bytes are there when the server wakes.  Under
 * manual progress the send could not complete before the server's next
 * call.  Then the client leaves mid-send, unseen by the server but for
 * its thread. */
static int auto_progress(int rank, int nprocs, void *arg)
{
	struct side s = {0};
	struct fid_ep *ep = NULL;
	struct hello all[ET_MAX_PROCS];
	static int ep_ctx, op_ctx;
	void *ctxs[] = {&op_ctx};
	struct fi_cq_tagged_entry c;
	unsigned char *buf = malloc(AUTO_LEN);
	uint64_t t[2] = {0}, all_t[2 * ET_SLOT / sizeof(uint64_t)];

	(void)nprocs, (void)arg;
	want_progress = FI_PROGRESS_AUTO;
	if (!buf)
		return 2;
	if (rank == SERVER ? accept_side(&s, &ep, &ep_ctx, all)
	                   : connect_side(&s, &ep, &ep_ctx, all)) {
		et_barrier();
		et_allgather(t, sizeof(t), all_t);
		return 1;
	}
	CHECK_INT(s.info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	if (rank == SERVER) {
		memset(buf, 0, AUTO_LEN);
		OK(fi_recv(ep, buf, AUTO_LEN, NULL, 0, &op_ctx));
	} else {
		et_fill(buf, AUTO_LEN, 77);
	}
	CHECK_INT(et_barrier(), 0);
	if (rank == SERVER) {
		usleep(AUTO_SLEEP * 1000);
		t[0] = et_now_us(); /* awake */
	} else {
		OK(fi_send(ep, buf, AUTO_LEN, NULL, 0, &op_ctx));
		collect(s.cq, 1, ctxs, &c);
		t[0] = et_now_us(); /* the send's completion */
	}
	CHECK_INT(et_allgather(t, sizeof(t), all_t), 0);
	/* Slot SERVER: its waking; slot CLIENT: the completion. */
	CHECK(all_t[CLIENT * ET_SLOT / sizeof(uint64_t)] < all_t[SERVER * ET_SLOT / sizeof(uint64_t)]);
	if (rank == SERVER) {
		collect(s.cq, 1, ctxs, &c);
		CHECK_INT(c.len, AUTO_LEN);
		check_bytes(buf, AUTO_LEN, 77);
	}
	CHECK_INT(et_barrier(), 0);
	/* The client goes with a rendezvous send under way.  The server's
	 * thread takes its announcement and the end of the connection while
	 * the server calls nothing; a receive posted after that fails with
	 * FI_ENOTCONN, as on any connection that ended (not FI_EIO, an RDM
	 * peer's death). */
	if (rank == CLIENT) {
		OK(fi_send(ep, buf, AUTO_LEN, NULL, 0, &op_ctx));
		CHECK_INT(et_barrier(), 0);
		_exit(check_done());
	}
	CHECK_INT(et_barrier(), 0);
	usleep(AUTO_SLEEP * 1000 / 4);
	{
		struct fi_cq_err_entry err;
		ssize_t r = fi_recv(ep, buf, AUTO_LEN, NULL, 0, &op_ctx);

		if (r != -FI_ENOTCONN) {
			CHECK_INT(r, 0);
			r = et_read(s.cq, &c, NULL, &err, NULL, EV_MS);
			CHECK_INT(r, -FI_EAVAIL);
			if (r == -FI_EAVAIL)
				CHECK_INT(err.err, FI_ENOTCONN);
		}
	}
	s.ep = ep;
	close_side(&s);
	free(buf);
	CHECK_NO_LEAKS();
	return check_done();
}

int main(void)
{
	int bad = 0;

	bad |= et_run("tcp/cm: connect, data, reject, refused, shutdown", 2, 60, pair,
	              NULL, 0);
	bad |= et_run("tcp/cm: automatic progress", 2, 30, auto_progress, NULL, 0);
	bad |= et_run("tcp/cm: peer killed", 2, 30, death, NULL, 1u << SERVER);
	bad |= et_run("tcp/cm: peer killed mid-ping-pong, CQ only", 2, 30, death, "cq",
	              1u << SERVER);
	{
		static const char *const ends[] = {"returns", "_exit", "SIGKILL"};
		int *done = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE,
		                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		char what[128];

		if (done == MAP_FAILED)
			return 2;
		for (int e = 0; e < 3; e++)
			for (int after = 0; after < 2; after++) {
				struct nl_case nc = {e, after, done};

				*done = -1;
				snprintf(what, sizeof(what),
				         "tcp/cm: nothing lost, client %s, server posts %s", ends[e],
				         after ? "after" : "before");
				bad |= et_run(what, 2, 60, nothing_lost, &nc, 1u << CLIENT);
			}
		munmap(done, sizeof(int));
	}
	return bad;
}
