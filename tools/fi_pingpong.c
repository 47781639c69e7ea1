/* fi_pingpong: a two-process ping-pong over any provider, with the options, the
 * output and the control-socket exchange of libfabric's tool of the same name.
 * Only the public API is used, so it runs on loom or on any libfabric.so.1. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "tool_fabric.h"
#include "tool_util.h"
#include "v1_names.h"

/*
 * The control connection (TCP, server port 47592 by default) carries, in
 * this order, byte for byte what the reference tool sends, so either tool
 * can be the peer of the other:
 *
 *   server -> client   name of the server's endpoint (passive one for msg):
 *                      u32 length (network order), u32 address format
 *                      (host order), the name itself
 *   client -> server   the client's name, same layout (rdm and dgram only)
 *   per size:          client "q\0", server "a\0"; the ping-pong runs over
 *                      the fabric; client sends the number of replies it got
 *                      as decimal text in a 10-byte NUL-padded field, server
 *                      answers "cnt ok\0"
 *   at the end         each side sends "fin\0" over the fabric and waits for
 *                      the other's, so neither closes under the peer's feet
 *
 * With -c, payloads are the 62 characters 0-9a-zA-Z repeated, message n of a
 * side (counted across sizes) starting at character 7n mod 62; the receiver
 * checks every message against the same rule. Without -c they are zeros.
 */
#define DEFAULT_PORT   47592
#define SYNC_Q         "q"
#define SYNC_A         "a"
#define CNT_LEN        10
#define CNT_OK         "cnt ok"
#define FIN_MSG        "fin"
#define MAX_NAME       1024
#define ALL_SIZES_END  (8u << 20) /* "-S all" stops below 8 MiB */
#define PP_TAG         1234ull    /* the tag the reference tool uses, for -m tagged */
#define PATTERN_STEP   7
#define ACCEPT_TIMEOUT 60 /* seconds a server waits for its client */
#define CONNECT_RETRY  10 /* seconds a client retries a refused connection */
#define CTRL_TIMEOUT   60 /* seconds without a control message */
#define FABRIC_TIMEOUT 30 /* seconds without a completion or CM event */

static const char pattern[] = "0123456789abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
static const size_t default_sizes[] = {64, 256, 1024, 4096, 65536, 1048576};

struct opts {
	const char *prov;
	const char *domain;
	const char *dst_addr;
	enum fi_ep_type ep_type;
	long iterations;
	long size; /* -1: the default list, -2: all */
	bool check;
	bool tagged;
	bool verbose;
	bool ipv6;
	int src_port;
	int dst_port;
};

struct pp {
	struct opts o;
	int ctrl;
	struct tool_fabric fab;
	char *buf; /* tx half then rx half, each buf_half bytes */
	size_t buf_half;
	struct fi_context2 tx_ctx, rx_ctx;
	int rx_posted, tx_pending;
	long rx_count;
	uint64_t tx_seq, rx_seq; /* messages sent and checked, for the pattern */
};

static bool verbose;

static void debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void debug(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fputs("[debug] ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("[error] ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int fi_error(const char *call, ssize_t ret)
{
	error("%s: %s (%zd)", call, fi_strerror((int)-ret), ret);
	return ret < 0 ? (int)ret : -FI_EOTHER;
}

static void usage(void)
{
	fprintf(stderr,
	        "Usage:\n"
	        "  fi_pingpong [OPTIONS]\t\tstart server\n"
	        "  fi_pingpong [OPTIONS] <srv_addr>\tconnect to server\n"
	        "\n"
	        "Ping pong client and server\n"
	        "\n"
	        "Options:\n"
	        " -B <src_port>        source control port number (server: 47592, "
	        "client: auto)\n"
	        " -P <dst_port>        destination control port number (client: 47592)\n"
	        " -d <domain>          domain name\n"
	        " -p <provider>        specific provider name eg sockets, verbs\n"
	        " -e <ep_type>         endpoint type: msg|rdm|dgram (dgram)\n"
	        " -I <number>          number of iterations (10)\n"
	        " -S <size>            specific transfer size or 'all' (all)\n"
	        " -c                   enables data_integrity checks\n"
	        " -m <transmit mode>   transmit mode type: msg|tagged (msg)\n"
	        " -h                   display this help output\n"
	        " -v                   enable debugging output\n"
	        " -6                   use IPv6 address\n");
}

/* ---- number formatting, as the reference prints its columns -------------- */

/* Bytes: plain below 1 KiB, else one truncated decimal below ten units. */
static void fmt_bytes(char *out, size_t len, uint64_t n)
{
	static const char units[] = "kmgt";
	uint64_t unit = 1024;
	int u = 0;

	if (n < unit) {
		snprintf(out, len, "%" PRIu64, n);
		return;
	}
	while (u < 3 && n >= unit * 1024) {
		unit *= 1024;
		u++;
	}
	uint64_t whole = n / unit, tenth = (n % unit) * 10 / unit;
	if (whole >= 10 || tenth == 0)
		snprintf(out, len, "%" PRIu64 "%c", whole, units[u]);
	else
		snprintf(out, len, "%" PRIu64 ".%" PRIu64 "%c", whole, tenth, units[u]);
}

/* Message counts: decimal units, truncated to a whole number. */
static void fmt_count(char *out, size_t len, uint64_t n)
{
	if (n >= 1000000000)
		snprintf(out, len, "%" PRIu64 "g", n / 1000000000);
	else if (n >= 1000000)
		snprintf(out, len, "%" PRIu64 "m", n / 1000000);
	else if (n >= 1000)
		snprintf(out, len, "%" PRIu64 "k", n / 1000);
	else
		snprintf(out, len, "%" PRIu64, n);
}

static void print_header(void)
{
	printf("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   "
	       "Mxfers/sec\n");
}

static void print_stats(size_t size, long sent, long acked, double usec)
{
	char b[32], s[32], a[40], t[32], ack[32];
	uint64_t total = (uint64_t)size * (uint64_t)sent * 2;
	double xfers = (double)sent * 2;

	if (usec <= 0)
		usec = 1e-3;
	fmt_bytes(b, sizeof(b), size);
	fmt_count(s, sizeof(s), (uint64_t)sent);
	fmt_count(ack, sizeof(ack), (uint64_t)acked);
	snprintf(a, sizeof(a), "%c%s", acked == sent ? '=' : '!', ack);
	fmt_bytes(t, sizeof(t), total);
	printf("%-8s%-8s%-9s%-12s%.2fs%10.2f%11.2f%11.2f\n", b, s, a, t, usec / 1e6,
	       total / usec, usec / xfers, xfers / usec);
	fflush(stdout);
}

/* ---- control connection ----------------------------------------------- */

static int wait_fd(int fd, short events, int timeout_s, const char *what)
{
	struct pollfd p = {.fd = fd, .events = events};
	int ret;

	do {
		ret = poll(&p, 1, timeout_s * 1000);
	} while (ret < 0 && errno == EINTR);
	if (ret == 0) {
		error("%s: no answer from the peer in %d s", what, timeout_s);
		return -FI_ETIMEDOUT;
	}
	if (ret < 0) {
		error("%s: poll: %s", what, strerror(errno));
		return -errno;
	}
	return 0;
}

static int ctrl_send(struct pp *pp, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(pp->ctrl, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			error("ctrl/send: %s", n < 0 ? strerror(errno) : "closed");
			return -FI_EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int ctrl_recv(struct pp *pp, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		int ret = wait_fd(pp->ctrl, POLLIN, CTRL_TIMEOUT, "ctrl/read");
		if (ret)
			return ret;
		ssize_t n = recv(pp->ctrl, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			error("ctrl/read: no data or remote connection closed");
			return -FI_EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int ctrl_expect(struct pp *pp, const char *msg)
{
	char buf[16];
	size_t len = strlen(msg) + 1;
	int ret = ctrl_recv(pp, buf, len);

	if (ret)
		return ret;
	if (memcmp(buf, msg, len)) {
		error("ctrl: expected \"%s\", got something else", msg);
		return -FI_EIO;
	}
	return 0;
}

static int ctrl_listen(struct pp *pp)
{
	int family = pp->o.ipv6 ? AF_INET6 : AF_INET, one = 1, ret;
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int lfd = socket(family, SOCK_STREAM, 0);

	if (lfd < 0) {
		error("ctrl/socket: %s", strerror(errno));
		return -errno;
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
		sin->sin_port = htons((uint16_t)pp->o.src_port);
		sl = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = in6addr_any;
		sin6->sin6_port = htons((uint16_t)pp->o.src_port);
		sl = sizeof(*sin6);
	}
	if (bind(lfd, (struct sockaddr *)&ss, sl) || listen(lfd, 10)) {
		error("ctrl/bind port %d: %s", pp->o.src_port, strerror(errno));
		close(lfd);
		return -FI_EIO;
	}
	debug("SERVER: waiting for a client on port %d", pp->o.src_port);
	ret = wait_fd(lfd, POLLIN, ACCEPT_TIMEOUT, "ctrl/accept");
	if (!ret) {
		pp->ctrl = accept(lfd, NULL, NULL);
		if (pp->ctrl < 0) {
			error("ctrl/accept: %s", strerror(errno));
			ret = -FI_EIO;
		}
	}
	close(lfd);
	if (!ret)
		debug("SERVER: client connected");
	return ret;
}

static int ctrl_connect(struct pp *pp)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	char port[16];
	double deadline = tool_now_us() + CONNECT_RETRY * 1e6;
	int ret, err = 0;

	hints.ai_family = pp->o.ipv6 ? AF_INET6 : AF_INET;
	snprintf(port, sizeof(port), "%d", pp->o.dst_port);
	ret = getaddrinfo(pp->o.dst_addr, port, &hints, &res);
	if (ret) {
		error("getaddrinfo %s: %s", pp->o.dst_addr, gai_strerror(ret));
		return -FI_EINVAL;
	}
	debug("CLIENT: connecting to %s", pp->o.dst_addr);
	/* A refused connection is retried for a while, so a client started just
	 * before its server still finds it. */
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, SOCK_STREAM, 0), one = 1;
			if (fd < 0)
				continue;
			if (pp->o.src_port) {
				struct sockaddr_storage ss = {0};
				ss.ss_family = (sa_family_t)ai->ai_family;
				((struct sockaddr_in *)&ss)->sin_port =
				    htons((uint16_t)pp->o.src_port);
				setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				           sizeof(one));
				if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen)) {
					err = errno;
					close(fd);
					continue;
				}
			}
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
				pp->ctrl = fd;
				freeaddrinfo(res);
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				           sizeof(one));
				debug("CLIENT: connected");
				return 0;
			}
			err = errno;
			close(fd);
		}
		if (err != ECONNREFUSED || tool_now_us() > deadline)
			break;
		usleep(100000);
	}
	freeaddrinfo(res);
	error("failed to connect: %s", strerror(err));
	return -FI_ECONNREFUSED;
}

static int send_name(struct pp *pp, fid_t fid)
{
	char name[MAX_NAME];
	size_t len = sizeof(name);
	uint32_t n, fmt = pp->fab.info->addr_format;
	int ret = fi_getname(fid, name, &len);

	if (ret)
		return fi_error("fi_getname", ret);
	n = htonl((uint32_t)len);
	debug("sending our name (%zu bytes, format %u)", len, fmt);
	if ((ret = ctrl_send(pp, &n, sizeof(n))) ||
	    (ret = ctrl_send(pp, &fmt, sizeof(fmt))))
		return ret;
	return ctrl_send(pp, name, len);
}

static int recv_name(struct pp *pp, void **name, size_t *len, uint32_t *fmt)
{
	uint32_t n;
	int ret = ctrl_recv(pp, &n, sizeof(n));

	if (ret || (ret = ctrl_recv(pp, fmt, sizeof(*fmt))))
		return ret;
	n = ntohl(n);
	if (n == 0 || n > MAX_NAME) {
		error("ctrl: peer sent a name of %u bytes", n);
		return -FI_EINVAL;
	}
	*name = calloc(1, n);
	if (!*name)
		return -FI_ENOMEM;
	*len = n;
	debug("received the peer's name (%u bytes, format %u)", n, *fmt);
	return ctrl_recv(pp, *name, n);
}

/* ---- fabric ------------------------------------------------------------- */

static int get_info(struct pp *pp, void *dest, size_t dest_len, uint32_t fmt,
                    uint64_t flags)
{
	const struct opts *o = &pp->o;
	struct fi_info *hints =
	    tool_hints(o->ep_type, o->tagged ? FI_TAGGED : FI_MSG, o->prov, o->domain);
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->tx_attr->op_flags = 0;
	if (o->ipv6)
		hints->addr_format = FI_SOCKADDR_IN6;
	ret = tool_getinfo(hints, dest, dest_len, fmt, flags, &pp->fab.info);
	if (ret)
		return fi_error("fi_getinfo", ret);
	return 0;
}

static int open_fabric(struct pp *pp, struct fi_info *info)
{
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	int ret;

	debug("opening fabric %s, provider %s", info->fabric_attr->name,
	      info->fabric_attr->prov_name);
	ret = fi_fabric(info->fabric_attr, &pp->fab.fabric, NULL);
	if (ret)
		return fi_error("fi_fabric", ret);
	if (pp->o.ep_type == FI_EP_MSG) {
		ret = fi_eq_open(pp->fab.fabric, &eq_attr, &pp->fab.eq, NULL);
		if (ret)
			return fi_error("fi_eq_open", ret);
	}
	return 0;
}

static int open_domain_ep(struct pp *pp, struct fi_info *info)
{
	const char *call;
	int ret = tool_open_ep(&pp->fab, info, FI_CQ_FORMAT_CONTEXT, &call);

	/* The buffer is registered only where the provider needs it to be. */
	if (!ret && (info->domain_attr->mr_mode & (FI_MR_LOCAL | LM_MR_BASIC) ||
	             info->mode & LM_LOCAL_MR))
		ret = tool_reg_mr(&pp->fab, info, pp->buf, pp->buf_half * 2,
		                  FI_SEND | FI_RECV, 1, &call);
	return ret ? fi_error(call, ret) : 0;
}

static int alloc_buf(struct pp *pp, size_t max_size)
{
	size_t half = max_size < 64 ? 64 : max_size;
	void *p;

	half = (half + 4095) & ~(size_t)4095;
	if (posix_memalign(&p, 4096, half * 2))
		return -FI_ENOMEM;
	pp->buf = p;
	pp->buf_half = half;
	memset(pp->buf, 0, half * 2);
	return 0;
}

static void fill_pattern(char *buf, size_t size, uint64_t seq)
{
	size_t n = sizeof(pattern) - 1, k = (size_t)(seq * PATTERN_STEP % n);

	for (size_t i = 0; i < size; i++) {
		buf[i] = pattern[k];
		if (++k == n)
			k = 0;
	}
}

/* Waits for a CM event of the given kind on the endpoint's event queue. */
static int wait_cm(struct pp *pp, uint32_t want, struct fi_eq_cm_entry *entry)
{
	uint32_t event;
	ssize_t n = fi_eq_sread(pp->fab.eq, &event, entry, sizeof(*entry),
	                        FABRIC_TIMEOUT * 1000, 0);

	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {0};
		fi_eq_readerr(pp->fab.eq, &err, 0);
		error("connection failed: %s", fi_strerror(err.err));
		return -err.err ? -err.err : -FI_ECONNREFUSED;
	}
	if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) {
		error("no connection event in %d s", FABRIC_TIMEOUT);
		return -FI_ETIMEDOUT;
	}
	if (n < 0)
		return fi_error("fi_eq_sread", n);
	if (event != want) {
		error("unexpected CM event %u (wanted %u)", event, want);
		return -FI_EOTHER;
	}
	return 0;
}

static int setup_server(struct pp *pp, size_t max_size)
{
	struct fi_eq_cm_entry entry;
	void *name = NULL;
	size_t len;
	uint32_t fmt;
	int ret;

	if (pp->o.ep_type == FI_EP_MSG) {
		ret = get_info(pp, NULL, 0, 0, 0);
		if (ret || (ret = open_fabric(pp, pp->fab.info)))
			return ret;
		ret = fi_passive_ep(pp->fab.fabric, pp->fab.info, &pp->fab.pep, NULL);
		if (ret)
			return fi_error("fi_passive_ep", ret);
		ret = fi_pep_bind(pp->fab.pep, &pp->fab.eq->fid, 0);
		if (ret)
			return fi_error("fi_pep_bind", ret);
		ret = fi_listen(pp->fab.pep);
		if (ret)
			return fi_error("fi_listen", ret);
		if ((ret = send_name(pp, &pp->fab.pep->fid)))
			return ret;
		if ((ret = wait_cm(pp, FI_CONNREQ, &entry)))
			return ret;
		if ((ret = alloc_buf(pp, max_size)) ||
		    (ret = open_domain_ep(pp, entry.info))) {
			fi_reject(pp->fab.pep, entry.info->handle, NULL, 0);
			fi_freeinfo(entry.info);
			return ret;
		}
		ret = fi_accept(pp->fab.ep, NULL, 0);
		fi_freeinfo(entry.info);
		if (ret)
			return fi_error("fi_accept", ret);
		return wait_cm(pp, FI_CONNECTED, &entry);
	}

	ret = get_info(pp, NULL, 0, 0, 0);
	if (ret || (ret = open_fabric(pp, pp->fab.info)) ||
	    (ret = alloc_buf(pp, max_size)) || (ret = open_domain_ep(pp, pp->fab.info)) ||
	    (ret = send_name(pp, &pp->fab.ep->fid)) ||
	    (ret = recv_name(pp, &name, &len, &fmt)))
		goto out;
	ret = fi_av_insert(pp->fab.av, name, 1, &pp->fab.peer, 0, NULL);
	ret = ret == 1 ? 0 : fi_error("fi_av_insert", ret);
out:
	free(name);
	return ret;
}

static int setup_client(struct pp *pp, size_t max_size)
{
	struct fi_eq_cm_entry entry;
	void *name = NULL;
	size_t len;
	uint32_t fmt;
	int ret = recv_name(pp, &name, &len, &fmt);

	if (ret)
		goto out;
	ret = get_info(pp, name, len, fmt, 0);
	if (ret || (ret = open_fabric(pp, pp->fab.info)) ||
	    (ret = alloc_buf(pp, max_size)) || (ret = open_domain_ep(pp, pp->fab.info)))
		goto out;
	if (pp->o.ep_type == FI_EP_MSG) {
		ret = fi_connect(pp->fab.ep, name, NULL, 0);
		if (ret) {
			ret = fi_error("fi_connect", ret);
			goto out;
		}
		ret = wait_cm(pp, FI_CONNECTED, &entry);
		goto out;
	}
	if ((ret = send_name(pp, &pp->fab.ep->fid)))
		goto out;
	ret = fi_av_insert(pp->fab.av, name, 1, &pp->fab.peer, 0, NULL);
	ret = ret == 1 ? 0 : fi_error("fi_av_insert", ret);
out:
	free(name);
	return ret;
}

/* ---- data path ---------------------------------------------------------- */

static int post_recv(struct pp *pp)
{
	size_t len = pp->buf_half;
	ssize_t ret;

	if (len > pp->fab.info->ep_attr->max_msg_size)
		len = pp->fab.info->ep_attr->max_msg_size;
	do {
		if (pp->o.tagged)
			ret = fi_trecv(pp->fab.ep, pp->buf + pp->buf_half, len,
			               pp->fab.desc, FI_ADDR_UNSPEC, PP_TAG, 0,
			               &pp->rx_ctx);
		else
			ret = fi_recv(pp->fab.ep, pp->buf + pp->buf_half, len,
			              pp->fab.desc, FI_ADDR_UNSPEC, &pp->rx_ctx);
		if (ret == -FI_EAGAIN)
			(void)fi_cq_read(pp->fab.cq, NULL, 0);
	} while (ret == -FI_EAGAIN);
	if (ret)
		return fi_error(pp->o.tagged ? "fi_trecv" : "fi_recv", ret);
	pp->rx_posted = 1;
	return 0;
}

static int read_cq_error(struct pp *pp)
{
	struct fi_cq_err_entry err = {0};
	char buf[256];

	if (fi_cq_readerr(pp->fab.cq, &err, 0) < 0) {
		error("fi_cq_readerr failed");
		return -FI_EOTHER;
	}
	error("completion error: %s (%d) %s", fi_strerror(err.err), err.err,
	      fi_cq_strerror(pp->fab.cq, err.prov_errno, err.err_data, buf, sizeof(buf)));
	return -(err.err ? err.err : FI_EOTHER);
}

/* Drives progress until no receive (if want_rx) and no send is outstanding. */
static int wait_comp(struct pp *pp, bool want_rx)
{
	struct fi_cq_entry comp[8];
	double deadline = 0;
	unsigned spins = 0;

	while ((want_rx && pp->rx_posted) || pp->tx_pending) {
		ssize_t n = fi_cq_read(pp->fab.cq, comp, 8);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				if (comp[i].op_context == &pp->rx_ctx) {
					pp->rx_posted = 0;
					pp->rx_count++;
				} else if (comp[i].op_context == &pp->tx_ctx) {
					pp->tx_pending = 0;
				}
			}
			deadline = 0;
			continue;
		}
		if (n == -FI_EAVAIL)
			return read_cq_error(pp);
		if (n != -FI_EAGAIN)
			return fi_error("fi_cq_read", n);
		if (++spins % 1024)
			continue;
		if (!deadline) {
			deadline = tool_now_us() + FABRIC_TIMEOUT * 1e6;
		} else if (tool_now_us() > deadline) {
			error("no completion in %d s: is the peer alive?",
			      FABRIC_TIMEOUT);
			return -FI_ETIMEDOUT;
		}
	}
	return 0;
}

static int post_send(struct pp *pp, size_t size, bool fill)
{
	bool inject = size <= pp->fab.info->tx_attr->inject_size;
	ssize_t ret;

	if (fill && pp->o.check)
		fill_pattern(pp->buf, size, pp->tx_seq++);

	do {
		if (inject && pp->o.tagged)
			ret = fi_tinject(pp->fab.ep, pp->buf, size, pp->fab.peer, PP_TAG);
		else if (inject)
			ret = fi_inject(pp->fab.ep, pp->buf, size, pp->fab.peer);
		else if (pp->o.tagged)
			ret = fi_tsend(pp->fab.ep, pp->buf, size, pp->fab.desc,
			               pp->fab.peer, PP_TAG, &pp->tx_ctx);
		else
			ret = fi_send(pp->fab.ep, pp->buf, size, pp->fab.desc,
			              pp->fab.peer, &pp->tx_ctx);
		if (ret == -FI_EAGAIN) {
			/* Let the provider make room; a receive may complete. */
			int r = wait_comp(pp, false);
			if (r)
				return r;
			struct fi_cq_entry c;
			ssize_t n = fi_cq_read(pp->fab.cq, &c, 1);
			if (n == 1 && c.op_context == &pp->rx_ctx) {
				pp->rx_posted = 0;
				pp->rx_count++;
			} else if (n == -FI_EAVAIL) {
				return read_cq_error(pp);
			}
		}
	} while (ret == -FI_EAGAIN);
	if (ret)
		return fi_error(inject ? "fi_inject" : "fi_send", ret);
	pp->tx_pending = !inject;
	return 0;
}

static int check_data(struct pp *pp, size_t size)
{
	const char *rx = pp->buf + pp->buf_half;
	size_t n = sizeof(pattern) - 1, k = (size_t)(pp->rx_seq * PATTERN_STEP % n);

	pp->rx_seq++;
	for (size_t i = 0; i < size; i++, k = (k + 1) % n) {
		if (rx[i] != pattern[k]) {
			error(
			    "data check failed at byte %zu of %zu: got 0x%02x, expected "
			    "0x%02x",
			    i, size, (unsigned char)rx[i], (unsigned char)pattern[k]);
			return -FI_EIO;
		}
	}
	return 0;
}

/* Waits for the next message, checks it, and has a receive posted again. */
static int next_message(struct pp *pp, size_t size)
{
	int ret = wait_comp(pp, true);

	if (!ret && pp->o.check)
		ret = check_data(pp, size);
	return ret ? ret : post_recv(pp);
}

static int run_size(struct pp *pp, size_t size, bool server)
{
	long i, peer_count;
	char cnt[CNT_LEN + 1] = {0};
	double start, usec;
	int ret;

	pp->rx_count = 0;
	if (server)
		ret = ctrl_expect(pp, SYNC_Q) ?: ctrl_send(pp, SYNC_A, 2);
	else
		ret = ctrl_send(pp, SYNC_Q, 2) ?: ctrl_expect(pp, SYNC_A);
	if (ret)
		return ret;

	start = tool_now_us();
	for (i = 0; i < pp->o.iterations; i++) {
		if (server) {
			if ((ret = next_message(pp, size)) ||
			    (ret = post_send(pp, size, true)))
				return ret;
		} else {
			if ((ret = post_send(pp, size, true)) ||
			    (ret = next_message(pp, size)))
				return ret;
		}
	}
	if ((ret = wait_comp(pp, false)))
		return ret;
	usec = tool_now_us() - start;

	if (server) {
		if ((ret = ctrl_recv(pp, cnt, CNT_LEN)))
			return ret;
		cnt[CNT_LEN] = 0;
		peer_count = strtol(cnt, NULL, 10);
		if ((ret = ctrl_send(pp, CNT_OK, sizeof(CNT_OK))))
			return ret;
	} else {
		snprintf(cnt, sizeof(cnt), "%ld", pp->rx_count);
		if ((ret = ctrl_send(pp, cnt, CNT_LEN)) ||
		    (ret = ctrl_expect(pp, CNT_OK)))
			return ret;
		peer_count = pp->rx_count;
	}
	print_stats(size, pp->o.iterations, peer_count, usec);
	return 0;
}

static int finalize(struct pp *pp)
{
	int ret;

	memcpy(pp->buf, FIN_MSG, sizeof(FIN_MSG));
	ret = post_send(pp, sizeof(FIN_MSG), false);
	if (!ret)
		ret = wait_comp(pp, true);
	return ret;
}

static void teardown(struct pp *pp)
{
	tool_fabric_close(&pp->fab);
	free(pp->buf);
	if (pp->ctrl >= 0)
		close(pp->ctrl);
}

/* ---- main --------------------------------------------------------------- */

static int parse_size(const char *s, long *out)
{
	unsigned long long v;

	if (!strcmp(s, "all")) {
		*out = -2;
		return 0;
	}
	/* Any strtoull base (0x10, 010), as the reference takes. */
	if (tool_parse_size(s, 0, 1ull << 40, &v))
		return -1;
	*out = (long)v;
	return 0;
}

/* The words -e and -m take, any case. */
struct choice {
	const char *name;
	int value;
};

static const struct choice ep_types[] = {
    {"msg", FI_EP_MSG}, {"rdm", FI_EP_RDM}, {"dgram", FI_EP_DGRAM}, {NULL, 0}};
static const struct choice modes[] = {{"tagged", 1}, {"msg", 0}, {NULL, 0}};

/* Sets *value from the entry called arg; else says what was unknown, as the
 * reference does, and fails. */
static int choose(const struct choice *c, const char *what, const char *arg, int *value)
{
	for (; c->name; c++) {
		if (!strcasecmp(arg, c->name)) {
			*value = c->value;
			return 0;
		}
	}
	fprintf(stderr, "Unknown %s : %s\n", what, arg);
	usage();
	return -1;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	int c, v;

	*o = (struct opts){.ep_type = FI_EP_DGRAM,
	                   .iterations = 10,
	                   .size = -1,
	                   .src_port = 0,
	                   .dst_port = DEFAULT_PORT};
	while ((c = getopt(argc, argv, "B:P:d:p:e:I:S:m:cvh6")) != -1) {
		switch (c) {
		case 'B':
			o->src_port = atoi(optarg);
			break;
		case 'P':
			o->dst_port = atoi(optarg);
			break;
		case 'd':
			o->domain = optarg;
			break;
		case 'p':
			o->prov = optarg;
			break;
		case 'e':
			if (choose(ep_types, "endpoint", optarg, &v))
				return -1;
			o->ep_type = (enum fi_ep_type)v;
			break;
		case 'I':
			o->iterations = strtol(optarg, NULL, 10);
			if (o->iterations <= 0) {
				error("invalid iteration count %s", optarg);
				return -1;
			}
			break;
		case 'S':
			if (parse_size(optarg, &o->size)) {
				error("invalid size %s", optarg);
				return -1;
			}
			break;
		case 'm':
			if (choose(modes, "transmit mode", optarg, &v))
				return -1;
			o->tagged = v;
			break;
		case 'c':
			o->check = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case '6':
			o->ipv6 = true;
			break;
		default:
			usage();
			return -1;
		}
	}
	if (optind < argc)
		o->dst_addr = argv[optind];
	return 0;
}

/* The sizes to run, in order; *n is set to their count. */
static size_t *size_list(const struct opts *o, size_t *n)
{
	size_t *s = calloc(64, sizeof(*s)), k = 0;

	if (!s)
		return NULL;
	if (o->size >= 0) {
		s[k++] = (size_t)o->size;
	} else if (o->size == -2) {
		/* 0, 1, 2, 3, 4, 6, 8, 12, ...: powers of two and one and a half
		 * times them. */
		s[k++] = 0;
		for (size_t p = 1; p < ALL_SIZES_END; p <<= 1) {
			s[k++] = p;
			if (p >= 2 && p + p / 2 < ALL_SIZES_END)
				s[k++] = p + p / 2;
		}
	} else {
		for (size_t i = 0; i < sizeof(default_sizes) / sizeof(*default_sizes);
		     i++)
			s[k++] = default_sizes[i];
	}
	*n = k;
	return s;
}

int main(int argc, char **argv)
{
	struct pp pp = {.ctrl = -1, .fab.peer = FI_ADDR_UNSPEC};
	size_t *sizes, nsizes, max_size = sizeof(FIN_MSG), i, ran = 0;
	bool server;
	int ret;

	if (parse_opts(argc, argv, &pp.o))
		return EXIT_FAILURE;
	verbose = pp.o.verbose;
	server = !pp.o.dst_addr;
	if (server && !pp.o.src_port)
		pp.o.src_port = DEFAULT_PORT;
	sizes = size_list(&pp.o, &nsizes);
	if (!sizes)
		return EXIT_FAILURE;
	for (i = 0; i < nsizes; i++)
		if (sizes[i] > max_size)
			max_size = sizes[i];
	debug("%s: provider %s, %ld iterations, %zu sizes up to %zu bytes",
	      server ? "server" : "client", pp.o.prov ? pp.o.prov : "(any)",
	      pp.o.iterations, nsizes, max_size);

	ret = server ? ctrl_listen(&pp) : ctrl_connect(&pp);
	if (ret)
		goto out;
	ret = server ? setup_server(&pp, max_size) : setup_client(&pp, max_size);
	if (ret)
		goto out;
	if (verbose)
		fprintf(stderr, "[debug] running with fi_info:\n%s\n",
		        fi_tostr(pp.fab.info, FI_TYPE_INFO));
	if ((ret = post_recv(&pp)))
		goto out;

	for (i = 0; i < nsizes; i++) {
		/* Both sides drop the same sizes, so they stay in step. */
		if (sizes[i] > pp.fab.info->ep_attr->max_msg_size)
			continue;
		if (!ran++)
			print_header();
		if ((ret = run_size(&pp, sizes[i], server)))
			goto out;
	}
	ret = finalize(&pp);
out:
	teardown(&pp);
	free(sizes);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}
