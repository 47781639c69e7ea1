/* netfault.c - a client and a server on the tcp provider's RDM endpoints
 * (or NETFAULT_PROV's: udp) for tests/net/netns.sh: the client streams numbered, patterned messages
 * (64 KiB and 1 MiB, a window of them in flight) that the server checks
 * word by word; when the other side is killed or its link is cut, each
 * side prints the error completions it gets and exits instead of hanging.
 *
 *   netfault server <address> [-p] [-n count] [-w window] [-i idle_s]
 *                             [-t limit_s]
 *   netfault client <address> [-n count] [-w window] [-s streaming_after]
 *                             [-E stall_s] [-t limit_s]
 *
 * With -p the server, once the first message tells it the client's
 * address, sends the client one 1 MiB message that the client never
 * receives: it goes by rendezvous (loom's tcp eager limit is 64 KiB), so
 * it stays outstanding, and the server surely has an operation in flight
 * to the client when the client dies or becomes unreachable, whatever the
 * receives in flight at that moment.  Its completion is a failure.
 *
 * <address> is the server's: "a.b.c.d:port" (FI_SOCKADDR_IN, given to
 * fi_getinfo as node and service) or "fi_sockaddr_in://a.b.c.d:port"
 * (FI_ADDR_STR, given as the hints' source or destination address).
 *
 * Exit status:
 *   0  done: the client's count sends completed (count 0: never); the
 *      server checked count messages, or went idle_s without a completion
 *      after at least one message and saw no error
 *   1  failure: setup, a corrupt message, an error outside the
 *      peer-failure class, a failed call
 *   2  usage
 *   3  peer failure seen: error completions of the peer-failure class
 *      (FI_EIO and the connection errors); the client then stops posting
 *      and exits once every outstanding send has ended, the server once
 *      it has been idle for idle_s (with -p: only if its pending send
 *      failed, else 1)
 *   4  stalled: no completion for stall_s with sends outstanding, nothing
 *      received within limit_s, or the limit_s run time reached
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define SMALL_LEN  ((size_t)64 << 10)
#define BIG_LEN    ((size_t)1 << 20)
#define MAX_WINDOW 64
#define MSG_MAGIC  0x544c554146544e4cULL /* "LNTFAULT" */
#define ADDR_STR   "fi_sockaddr_in://"

enum {
	EXIT_DONE = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	EXIT_PEER_FAILED = 3,
	EXIT_STALLED = 4,
};

/* Every message starts with this; the rest is pattern words. */
struct msg_hdr {
	uint64_t magic;
	uint64_t seq;
	uint64_t len;
	char from[64]; /* the sender's address, as fi_av_straddr prints it */
};

struct opts {
	bool server;
	bool pending; /* server: -p */
	const char *addr;
	uint64_t count;  /* messages; 0: until the peer fails */
	int window;      /* sends (client) or receives (server) posted at once */
	uint64_t stream; /* client: completions before "streaming" */
	double stall_s;  /* client: longest wait for any completion */
	double idle_s;   /* server: quiet time after which it stops */
	double limit_s;  /* whole run */
};

struct net {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	const char *who;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nothing to do for now: let the other process (and the peer) run.  The
 * engine's progress is manual, so the sleep stays short. */
static void nap(void)
{
	struct timespec ts = {0, 20000};

	nanosleep(&ts, NULL);
}

static size_t msg_len(uint64_t seq)
{
	return seq % 2 ? BIG_LEN : SMALL_LEN;
}

static uint64_t pattern(uint64_t seq, size_t word)
{
	return (seq + 1) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)word;
}

static void msg_fill(void *buf, uint64_t seq, const char *from)
{
	struct msg_hdr h = {MSG_MAGIC, seq, msg_len(seq), {0}};
	uint64_t *w = buf;

	snprintf(h.from, sizeof(h.from), "%s", from);
	memcpy(buf, &h, sizeof(h));
	for (size_t i = sizeof(h) / 8; i < h.len / 8; i++)
		w[i] = pattern(seq, i);
}

/* 0 when the len bytes received at buf are an intact message. */
static int msg_check(const struct net *n, const void *buf, size_t len)
{
	const uint64_t *w = buf;
	struct msg_hdr h;

	if (len < sizeof(h)) {
		printf("%s: bad message: %zu bytes\n", n->who, len);
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != MSG_MAGIC || h.len != len || len != msg_len(h.seq) ||
	    !memchr(h.from, 0, sizeof(h.from))) {
		printf("%s: bad message: magic 0x%" PRIx64 ", seq %" PRIu64
		       ", header len %" PRIu64 ", received %zu\n",
		       n->who, h.magic, h.seq, h.len, len);
		return -1;
	}
	for (size_t i = sizeof(h) / 8; i < len / 8; i++) {
		if (w[i] != pattern(h.seq, i)) {
			printf("%s: bad message: seq %" PRIu64 ", word %zu is 0x%" PRIx64
			       ", want 0x%" PRIx64 "\n",
			       n->who, h.seq, i, w[i], pattern(h.seq, i));
			return -1;
		}
	}
	return 0;
}

/* Errors that mean "the peer or the path to it is gone". */
static bool peer_failure(int err)
{
	switch (err) {
	case FI_EIO:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ECONNREFUSED:
	case FI_ENOTCONN:
	case FI_ETIMEDOUT:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ENETDOWN:
	case FI_EHOSTDOWN:
		return true;
	default:
		return false;
	}
}

/* Reads the pending error entry and prints it the three ways it can be
 * told; returns the entry's op_context (NULL when none could be read) and
 * its err in *err. */
static void *read_error(struct net *n, int *err)
{
	struct fi_cq_err_entry e;
	char data[512], text[512];
	const char *s;
	ssize_t ret;

	memset(&e, 0, sizeof(e));
	e.err_data = data;
	e.err_data_size = sizeof(data);
	ret = fi_cq_readerr(n->cq, &e, 0);
	if (ret != 1) {
		printf("%s: fi_cq_readerr = %zd (%s)\n", n->who, ret,
		       fi_strerror((int)-ret));
		*err = -1;
		return NULL;
	}
	s = fi_cq_strerror(n->cq, e.prov_errno, e.err_data, text, sizeof(text));
	printf("%s: error completion: err %d (%s), prov_errno %d: %s\n", n->who, e.err,
	       fi_strerror(e.err), e.prov_errno, s ? s : "(no text)");
	*err = e.err;
	return e.op_context;
}

static int fail(const struct net *n, const char *call, long ret)
{
	printf("%s: %s = %ld (%s)\n", n->who, call, ret, fi_strerror((int)-ret));
	return -1;
}

/* Fabric, domain, AV, CQ and an enabled endpoint on the server's address
 * (server) or the first interface that reaches it (client). */
static int net_open(struct net *n, const struct opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_MSG, .size = 1024};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	char host[64], *port = NULL;
	const char *node = NULL;
	uint64_t flags = 0;
	int ret;

	if (!hints)
		return fail(n, "fi_allocinfo", -FI_ENOMEM);
	hints->caps = FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	/* NETFAULT_PROV: the provider (tcp, or udp for tests/udp's run). */
	hints->fabric_attr->prov_name =
	    strdup(getenv("NETFAULT_PROV") ? getenv("NETFAULT_PROV") : "tcp");
	if (!strncmp(o->addr, ADDR_STR, strlen(ADDR_STR))) {
		char *a = strdup(o->addr);

		hints->addr_format = FI_ADDR_STR;
		if (o->server) {
			hints->src_addr = a;
			hints->src_addrlen = strlen(a) + 1;
		} else {
			hints->dest_addr = a;
			hints->dest_addrlen = strlen(a) + 1;
		}
	} else {
		snprintf(host, sizeof(host), "%s", o->addr);
		port = strrchr(host, ':');
		if (!port) {
			fi_freeinfo(hints);
			printf("%s: address %s has no port\n", n->who, o->addr);
			return -1;
		}
		*port++ = 0;
		node = host;
		hints->addr_format = FI_SOCKADDR_IN;
		flags = o->server ? FI_SOURCE : 0;
	}
	ret = fi_getinfo(FI_VERSION(1, 17), node, port, flags, hints, &n->info);
	fi_freeinfo(hints);
	if (ret)
		return fail(n, "fi_getinfo", ret);
	printf("%s: provider %s, fabric %s, domain %s\n", n->who,
	       n->info->fabric_attr->prov_name, n->info->fabric_attr->name,
	       n->info->domain_attr->name);
	ret = fi_fabric(n->info->fabric_attr, &n->fabric, NULL);
	if (ret)
		return fail(n, "fi_fabric", ret);
	ret = fi_domain(n->fabric, n->info, &n->domain, NULL);
	if (ret)
		return fail(n, "fi_domain", ret);
	ret = fi_av_open(n->domain, &ava, &n->av, NULL);
	if (ret)
		return fail(n, "fi_av_open", ret);
	ret = fi_cq_open(n->domain, &cqa, &n->cq, NULL);
	if (ret)
		return fail(n, "fi_cq_open", ret);
	ret = fi_endpoint(n->domain, n->info, &n->ep, NULL);
	if (ret)
		return fail(n, "fi_endpoint", ret);
	ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (ret)
		return fail(n, "fi_ep_bind(av)", ret);
	ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		return fail(n, "fi_ep_bind(cq)", ret);
	ret = fi_enable(n->ep);
	if (ret)
		return fail(n, "fi_enable", ret);
	return 0;
}

static void net_close(struct net *n)
{
	printf("%s: closing\n", n->who);
	if (n->ep)
		fi_close(&n->ep->fid);
	if (n->av)
		fi_close(&n->av->fid);
	if (n->cq)
		fi_close(&n->cq->fid);
	if (n->domain)
		fi_close(&n->domain->fid);
	if (n->fabric)
		fi_close(&n->fabric->fid);
	if (n->info)
		fi_freeinfo(n->info);
	printf("%s: closed\n", n->who);
}

/* Our own address, as the provider prints it, into text[64]. */
static int get_name(struct net *n, char *text)
{
	char name[128];
	size_t len = sizeof(name), tlen = 64;
	int ret = fi_getname(&n->ep->fid, name, &len);

	if (ret)
		return fail(n, "fi_getname", ret);
	fi_av_straddr(n->av, name, text, &tlen);
	return 0;
}

/* ---- server ------------------------------------------------------------------ */

/* The server's send that the client never receives (-p). */
struct pending {
	unsigned char buf[BIG_LEN];
	fi_addr_t to;
	enum { P_NONE, P_WANT, P_POSTED, P_ENDED } state;
};

/* The first message names the client: the pending send goes there. */
static int pending_aim(struct net *n, struct pending *p, const struct msg_hdr *h)
{
	char host[64], *port;
	int ret;

	if (strncmp(h->from, ADDR_STR, strlen(ADDR_STR))) {
		printf("server: the client's address %s is not " ADDR_STR "...\n",
		       h->from);
		return -1;
	}
	snprintf(host, sizeof(host), "%s", h->from + strlen(ADDR_STR));
	port = strrchr(host, ':');
	if (!port) {
		printf("server: the client's address %s has no port\n", h->from);
		return -1;
	}
	*port++ = 0;
	ret = fi_av_insertsvc(n->av, host, port, &p->to, 0, NULL);
	if (ret != 1)
		return fail(n, "fi_av_insertsvc", ret);
	memset(p->buf, 0x5a, sizeof(p->buf));
	p->state = P_WANT;
	return 0;
}

static int pending_post(struct net *n, struct pending *p)
{
	ssize_t ret = fi_send(n->ep, p->buf, sizeof(p->buf), NULL, p->to, p);

	if (ret == -FI_EAGAIN)
		return 0;
	if (ret)
		return fail(n, "fi_send", ret);
	printf("server: sent the client a message it will not receive\n");
	p->state = P_POSTED;
	return 0;
}

static unsigned char rx_bufs[MAX_WINDOW][BIG_LEN]; /* the server's receives */

/* A receive completion's context must be one of the posted buffers. */
static bool buf_ok(int window, const void *ctx)
{
	for (int i = 0; i < window; i++)
		if (ctx == rx_bufs[i])
			return true;
	printf("server: a completion for %p, which is no posted receive\n", ctx);
	return false;
}

/* One completed receive: check it, note its seq, post the buffer again. */
static int server_take(struct net *n, const struct opts *o, unsigned char *seen,
                       struct pending *p, const struct fi_cq_msg_entry *e)
{
	struct msg_hdr h;
	ssize_t ret;

	if (e->op_context == p) {
		printf("server: the message to the client completed, but the client "
		       "never posted a receive\n");
		return -1;
	}
	if (!buf_ok(o->window, e->op_context))
		return -1;
	if (msg_check(n, e->op_context, e->len))
		return -1;
	memcpy(&h, e->op_context, sizeof(h));
	if (seen && (h.seq >= o->count || seen[h.seq]++)) {
		printf("server: bad message: seq %" PRIu64 " %s\n", h.seq,
		       h.seq >= o->count ? "out of range" : "received twice");
		return -1;
	}
	if (o->pending && p->state == P_NONE && pending_aim(n, p, &h))
		return -1;
	ret = fi_recv(n->ep, e->op_context, BIG_LEN, NULL, FI_ADDR_UNSPEC, e->op_context);
	return ret ? fail(n, "fi_recv", ret) : 0;
}

static int run_server(struct net *n, const struct opts *o)
{
	static struct pending p;
	uint64_t received = 0, bytes = 0, errors = 0;
	double start = now_s(), last = start;
	int status = EXIT_FAIL;
	char name[64];
	/* With a count, which messages came: a duplicate is a failure, the
	 * missing ones are listed. */
	unsigned char *seen = o->count ? calloc(o->count, 1) : NULL;

	if ((o->count && !seen) || get_name(n, name))
		goto out;
	for (int i = 0; i < o->window; i++) {
		ssize_t ret =
		    fi_recv(n->ep, rx_bufs[i], BIG_LEN, NULL, FI_ADDR_UNSPEC, rx_bufs[i]);

		if (ret) {
			fail(n, "fi_recv", ret);
			goto out;
		}
	}
	printf("server: listening on %s\n", name);
	for (;;) {
		struct fi_cq_msg_entry ent[16];
		ssize_t got;
		double t;

		if (p.state == P_WANT && pending_post(n, &p))
			goto out;
		got = fi_cq_read(n->cq, ent, 16);
		t = now_s();
		if (got > 0) {
			last = t;
			for (ssize_t i = 0; i < got; i++) {
				if (server_take(n, o, seen, &p, &ent[i]))
					goto out;
				if (!received++)
					printf("server: receiving\n");
				bytes += ent[i].len;
			}
			if (o->count && received >= o->count)
				break;
			continue;
		}
		if (got == -FI_EAVAIL) {
			void *ctx;
			int err;

			last = t;
			ctx = read_error(n, &err);
			if (!ctx || !peer_failure(err))
				goto out;
			errors++;
			if (ctx == &p) {
				printf("server: the message to the client failed\n");
				p.state = P_ENDED;
				continue;
			}
			if (!buf_ok(o->window, ctx))
				goto out;
			/* The buffer is ours again: keep receiving, a client
			 * may come (back). */
			got = fi_recv(n->ep, ctx, BIG_LEN, NULL, FI_ADDR_UNSPEC, ctx);
			if (got) {
				fail(n, "fi_recv", got);
				goto out;
			}
			continue;
		}
		if (got != -FI_EAGAIN) {
			fail(n, "fi_cq_read", got);
			goto out;
		}
		if ((received || errors) && t - last >= o->idle_s) {
			printf("server: idle for %.1f s: stopping\n", t - last);
			break;
		}
		if (t - start >= o->limit_s) {
			printf("server: time limit of %.0f s reached\n", o->limit_s);
			status = EXIT_STALLED;
			goto out;
		}
		nap();
	}
	status = errors ? EXIT_PEER_FAILED : EXIT_DONE;
	if (errors && o->pending && p.state != P_ENDED) {
		printf("server: errors, but the message to the client %s\n",
		       p.state == P_POSTED ? "is still outstanding" : "was never sent");
		status = EXIT_FAIL;
	}
out:
	printf("server: %" PRIu64 " messages (%" PRIu64 " bytes) checked, %" PRIu64
	       " error completions\n",
	       received, bytes, errors);
	if (seen && received < o->count) {
		printf("server: missing seq");
		for (uint64_t i = 0, shown = 0; i < o->count && shown < 32; i++)
			if (!seen[i] && ++shown)
				printf(" %" PRIu64, i);
		printf("\n");
	}
	free(seen);
	return status;
}

/* ---- client ------------------------------------------------------------------ */

struct slot {
	unsigned char *buf;
	uint64_t seq;
	bool busy;
};

/* A completion's context must be one of the sends in flight. */
static bool slot_ok(const struct slot *slots, int window, const struct slot *s)
{
	for (int i = 0; i < window; i++)
		if (s == &slots[i] && s->busy)
			return true;
	printf("client: a completion for %p, which is no send in flight\n", (void *)s);
	return false;
}

static int run_client(struct net *n, const struct opts *o)
{
	static struct slot slots[MAX_WINDOW];
	static unsigned char tx_bufs[MAX_WINDOW][BIG_LEN];
	uint64_t next = 0, ok = 0, errors = 0;
	double start = now_s(), last = start, first_err = 0;
	int outstanding = 0, status = EXIT_DONE;
	bool stop = false;
	fi_addr_t server;
	char name[64];
	int ret;

	ret = fi_av_insert(n->av, n->info->dest_addr, 1, &server, 0, NULL);
	if (ret != 1) {
		fail(n, "fi_av_insert", ret);
		return EXIT_FAIL;
	}
	if (get_name(n, name))
		return EXIT_FAIL;
	printf("client: sending from %s\n", name);
	for (int i = 0; i < o->window; i++)
		slots[i].buf = tx_bufs[i];
	for (;;) {
		struct fi_cq_msg_entry ent[16];
		ssize_t got;
		double t;

		for (int i = 0; i < o->window && !stop && (!o->count || next < o->count);
		     i++) {
			struct slot *s = &slots[i];

			if (s->busy)
				continue;
			msg_fill(s->buf, next, name);
			got = fi_send(n->ep, s->buf, msg_len(next), NULL, server, s);
			if (got == -FI_EAGAIN)
				break;
			if (got) {
				/* Reported, but not an error completion. */
				fail(n, "fi_send", got);
				status = EXIT_FAIL;
				stop = true;
				break;
			}
			s->seq = next++;
			s->busy = true;
			outstanding++;
		}
		got = fi_cq_read(n->cq, ent, 16);
		t = now_s();
		if (got > 0) {
			last = t;
			for (ssize_t i = 0; i < got; i++) {
				struct slot *s = ent[i].op_context;

				if (!slot_ok(slots, o->window, s))
					return EXIT_FAIL;
				s->busy = false;
				outstanding--;
				if (++ok == o->stream)
					printf("client: streaming (%" PRIu64
					       " sends completed in %.2f s)\n",
					       ok, t - start);
			}
		} else if (got == -FI_EAVAIL) {
			struct slot *s;
			int err;

			last = t;
			s = read_error(n, &err);
			if (!slot_ok(slots, o->window, s))
				return EXIT_FAIL;
			s->busy = false;
			outstanding--;
			errors++;
			if (!peer_failure(err))
				status = EXIT_FAIL;
			if (!first_err) {
				first_err = t;
				printf(
				    "client: first error on seq %" PRIu64
				    " after %" PRIu64
				    " completions: stop sending, %d still outstanding\n",
				    s->seq, ok, outstanding);
			}
			stop = true;
		} else if (got != -FI_EAGAIN) {
			fail(n, "fi_cq_read", got);
			return EXIT_FAIL;
		}
		if (!outstanding && (stop || (o->count && next >= o->count)))
			break;
		if (t - last >= o->stall_s) {
			printf("client: stalled: no completion for %.1f s with %d sends "
			       "outstanding\n",
			       t - last, outstanding);
			status = EXIT_STALLED;
			break;
		}
		if (t - start >= o->limit_s) {
			printf("client: time limit of %.0f s reached with %d sends "
			       "outstanding\n",
			       o->limit_s, outstanding);
			status = EXIT_STALLED;
			break;
		}
		if (got == -FI_EAGAIN)
			nap();
	}
	printf("client: %" PRIu64 " sends posted, %" PRIu64 " completed, %" PRIu64
	       " error completions",
	       next, ok, errors);
	if (first_err)
		printf(", the last %.3f s after the first", last - first_err);
	printf("\n");
	if (status == EXIT_DONE && errors)
		status = EXIT_PEER_FAILED;
	return status;
}

/* ---- main ------------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr, "usage: netfault server <address> [-p] [-n count] [-w window] "
	                "[-i idle_s] [-t limit_s]\n"
	                "       netfault client <address> [-n count] [-w window] "
	                "[-s streaming_after] [-E stall_s] [-t limit_s]\n"
	                "address: a.b.c.d:port or " ADDR_STR "a.b.c.d:port\n");
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	struct opts o = {
	    .window = 8, .stream = 100, .stall_s = 15, .idle_s = 5, .limit_s = 60};
	struct net n = {0};
	int c, status;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		return usage();
	if (!strcmp(argv[1], "server"))
		o.server = true;
	else if (strcmp(argv[1], "client"))
		return usage();
	o.addr = argv[2];
	optind = 3;
	while ((c = getopt(argc, argv, "pn:w:s:E:i:t:")) != -1) {
		switch (c) {
		case 'p':
			o.pending = true;
			break;
		case 'n':
			o.count = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			o.window = atoi(optarg);
			break;
		case 's':
			o.stream = strtoull(optarg, NULL, 0);
			break;
		case 'E':
			o.stall_s = atof(optarg);
			break;
		case 'i':
			o.idle_s = atof(optarg);
			break;
		case 't':
			o.limit_s = atof(optarg);
			break;
		default:
			return usage();
		}
	}
	if (optind != argc || o.window < 1 || o.window > MAX_WINDOW || o.stall_s <= 0 ||
	    o.idle_s <= 0 || o.limit_s <= 0)
		return usage();
	n.who = o.server ? "server" : "client";
	printf("%s: pid %d, address %s\n", n.who, (int)getpid(), o.addr);
	if (net_open(&n, &o))
		status = EXIT_FAIL;
	else
		status = o.server ? run_server(&n, &o) : run_client(&n, &o);
	net_close(&n);
	printf("%s: exit %d\n", n.who, status);
	return status;
}
