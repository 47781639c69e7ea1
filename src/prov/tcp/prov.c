/* prov.c - the tcp provider: one fi_info per usable IPv4 and IPv6
 * interface address (loopback last), addresses in their binary and text
 * forms, node/service resolution, its parameters, and the
 * fabric and domain (the RDM engine's, over the TCP link). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "duo.h"
#include "shm.h"
#include "tcp.h"
#include "v1_names.h"

#define TCP_CAPS                                                                         \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_NAMED_RX_CTX | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RMA_EVENT | FI_FENCE |      \
	 FI_SHARED_AV | FI_TRIGGER | LM_CAPS_V2)
/* A context holds only the caps of its direction; FI_LOCAL_COMM and
 * FI_REMOTE_COMM are the endpoint's and the domain's (man fi_endpoint). */
#define TCP_TX_CAPS    (TCP_CAPS & LM_TX_CAPS)
#define TCP_RX_CAPS    (TCP_CAPS & LM_RX_CAPS)
/* Interface addresses fi_getinfo answers for, at most: more than hosts
 * have up in practice, and a fixed array while they are gathered. */
#define TCP_MAX_IFACES 16
/* Largest eager message: frames carry up to TCP_MAX_PAYLOAD of rendezvous
 * data, but each eager message may land unexpected, and many senders'
 * windows of large eager messages would reach the unexpected-data limit,
 * where the endpoint stops reading. */
#define TCP_EAGER_MAX (64 * 1024)

/* A connection not up after this long fails its operations: long
 * enough for a loaded host to accept, short enough that a dead address
 * does not hang a program. */
#define TCP_CONN_TIMEOUT_MS 10000
/* Socket buffers: deep enough that a stream of large messages keeps the
 * connection busy while the peer catches up (the kernel caps them at
 * net.core.wmem_max and rmem_max). */
#define TCP_SOCKBUF (4 << 20)

/* An int parameter within [lo, hi] into *out; out of range, the default
 * stays and the log says so (unreadable text fi_param_get reports). */
static void int_param(const char *name, const char *env, int lo, int hi, int *out)
{
	int v;

	if (fi_param_get_int(&tcp_prov, name, &v))
		return;
	if (v < lo || v > hi) {
		LM_WARN(&tcp_prov, FI_LOG_CORE,
		        "%s=%d is outside [%d, %d]: the default is used\n", env, v, lo, hi);
		return;
	}
	*out = v;
}

void tcp_params_read(struct tcp_params *params)
{
	*params = (struct tcp_params){.conn_timeout_ms = TCP_CONN_TIMEOUT_MS,
	                              .sockbuf = TCP_SOCKBUF};
	int_param("port_low_range", "FI_TCP_PORT_LOW_RANGE", 1, 65535, &params->port_low);
	int_param("port_high_range", "FI_TCP_PORT_HIGH_RANGE", 1, 65535, &params->port_high);
	if (params->port_low && params->port_high < params->port_low)
		params->port_high = params->port_low ? 65535 : 0;
	int_param("conn_timeout", "FI_TCP_CONN_TIMEOUT", 1, INT_MAX, &params->conn_timeout_ms);
	int_param("sockbuf", "FI_TCP_SOCKBUF", 0, INT_MAX, &params->sockbuf);
	int on = 1;

	fi_param_get_bool(&tcp_prov, "enable_shm", &on);
	params->enable_shm = on != 0;
}

static const struct fi_tx_attr tcp_tx = {
    .caps = TCP_TX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .inject_size = LM_RDM_INJECT_SIZE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = LM_RMA_IOV_LIMIT,
};
static const struct fi_rx_attr tcp_rx = {
    .caps = TCP_RX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .total_buffered_recv = LM_RDM_UNEXP_MAX, /* unexpected data held, at most */
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
/* FI_EP_MSG: one peer, so no source addressing or directed receives. */
#define TCP_MSG_CAPS                                                                     \
	(TCP_CAPS & ~(FI_SOURCE | FI_SHARED_AV | FI_DIRECTED_RECV | FI_TAGGED_DIRECTED_RECV |           \
	              FI_EXACT_DIRECTED_RECV | FI_NAMED_RX_CTX))

static const struct fi_ep_attr tcp_msg_ep = {
    .type = FI_EP_MSG,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .msg_prefix_size = 0,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};

static const struct fi_ep_attr tcp_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};
static const struct fi_domain_attr tcp_dom = {
    LM_RDM_DOMAIN_ATTRS,
    .caps = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV,
};

/* ---- addresses --------------------------------------------------------------- */

#define TCP_ADDR_PREFIX  "fi_sockaddr_in://"
#define TCP_ADDR6_PREFIX "fi_sockaddr_in6://"

socklen_t tcp_addr_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                          : sizeof(struct sockaddr_in);
}

int tcp_addr_load(union tcp_addr *out, const void *addr, size_t len, int family)
{
	union tcp_addr a;
	sa_family_t f;

	if (!addr || len < sizeof(f))
		return -FI_EINVAL;
	memcpy(&f, addr, sizeof(f));
	if ((f != AF_INET && f != AF_INET6) || (family && f != family) ||
	    len < tcp_addr_len(f))
		return -FI_EINVAL;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, tcp_addr_len(f));
	if (f == AF_INET)
		memset(a.in.sin_zero, 0, sizeof(a.in.sin_zero));
	else
		a.in6.sin6_flowinfo = 0;
	*out = a;
	return 0;
}

int tcp_addr_of_fd(int fd, bool peer, union tcp_addr *out)
{
	union tcp_addr a;
	socklen_t len = sizeof(a);

	memset(&a, 0, sizeof(a));
	if (peer ? getpeername(fd, &a.sa, &len) : getsockname(fd, &a.sa, &len))
		return -FI_EIO;
	return tcp_addr_load(out, &a, len, AF_UNSPEC);
}

/* node and service through the resolver, of the family (AF_UNSPEC: IPv4
 * if the name has an IPv4 address, else IPv6). */
static int resolve(const char *node, const char *service, bool passive, bool numeric,
                   int family, union tcp_addr *out)
{
	struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM}, *res;
	int ret;

	if (family == AF_UNSPEC)
		return resolve(node, service, passive, numeric, AF_INET, out) &&
		               resolve(node, service, passive, numeric, AF_INET6, out)
		           ? -FI_ENODATA
		           : 0;
	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	if (numeric)
		hints.ai_flags |= AI_NUMERICHOST;
	if (getaddrinfo(node, service, &hints, &res))
		return -FI_ENODATA;
	ret = tcp_addr_load(out, res->ai_addr, res->ai_addrlen, family);
	freeaddrinfo(res);
	return ret ? -FI_ENODATA : 0;
}

/* "a.b.c.d:port" (IPv4) or "[a:b::c]:port" (IPv6) after the prefix. */
static int parse_text(const char *rest, int family, union tcp_addr *out)
{
	char host[INET6_ADDRSTRLEN + 8], *colon, *end;
	unsigned long port;
	union tcp_addr a;

	if (strlen(rest) >= sizeof(host))
		return -FI_EINVAL;
	strcpy(host, rest);
	colon = strrchr(host, ':');
	if (!colon)
		return -FI_EINVAL;
	*colon = 0;
	port = strtoul(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port > 65535)
		return -FI_EINVAL;
	memset(&a, 0, sizeof(a));
	if (family == AF_INET) {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a.in.sin_addr) != 1)
			return -FI_EINVAL;
	} else {
		size_t n = strlen(host);

		if (n < 2 || host[0] != '[' || host[n - 1] != ']')
			return -FI_EINVAL;
		host[n - 1] = 0;
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a.in6.sin6_addr) != 1)
			return -FI_EINVAL;
	}
	*out = a;
	return 0;
}

int tcp_addr_parse(const char *node, const char *service, int family, union tcp_addr *out)
{
	if (!node)
		return -FI_EINVAL;
	if (!strncmp(node, TCP_ADDR_PREFIX, strlen(TCP_ADDR_PREFIX)))
		return family == AF_INET6
		           ? -FI_EINVAL
		           : parse_text(node + strlen(TCP_ADDR_PREFIX), AF_INET, out);
	if (!strncmp(node, TCP_ADDR6_PREFIX, strlen(TCP_ADDR6_PREFIX)))
		return family == AF_INET
		           ? -FI_EINVAL
		           : parse_text(node + strlen(TCP_ADDR6_PREFIX), AF_INET6, out);
	/* A host name is looked up only with a service beside it (fi_getinfo,
	 * fi_av_insertsvc); text alone (an FI_ADDR_STR address, a hint's
	 * src_addr) must be a numeric address, as libfabric reads it, and
	 * never starts a DNS query. */
	return resolve(node, service, false, !service, family, out) ? -FI_EINVAL : 0;
}

static int addr_from_str(const char *node, const char *service, int family, void *addr)
{
	union tcp_addr a;
	int ret = tcp_addr_parse(node, service, family, &a);

	if (!ret)
		memcpy(addr, &a, tcp_addr_len(family));
	return ret;
}

int tcp_addr_from_str(const char *node, const char *service, void *addr)
{
	return addr_from_str(node, service, AF_INET, addr);
}

int tcp6_addr_from_str(const char *node, const char *service, void *addr)
{
	return addr_from_str(node, service, AF_INET6, addr);
}

/* What fi_av_insert may take.  An address no connect can reach (another
 * family, as the all-zero sockaddr of fabtests' av_test; port 0) fails with
 * FI_EADDRNOTAVAIL, as the reference's does.  So does one with bytes set that
 * the family does not use (sin_zero, the flow label): peers are matched on
 * the normalized bytes (tcp_addr_load), which such an entry would never
 * equal.  The wildcard address is kept, unlike the reference: it reaches this
 * host, and it is the name of a link bound without a source address. */
static int addr_check(const void *addr, int family)
{
	socklen_t len = tcp_addr_len(family);
	union tcp_addr a;

	if (tcp_addr_load(&a, addr, len, family) || memcmp(&a, addr, len) ||
	    !a.in.sin_port)
		return -FI_EADDRNOTAVAIL;
	return 0;
}

int tcp_addr_check(const void *addr)
{
	return addr_check(addr, AF_INET);
}

int tcp6_addr_check(const void *addr)
{
	return addr_check(addr, AF_INET6);
}

int tcp_addr_to_str(const void *addr, char *buf, size_t *len)
{
	union tcp_addr a;
	sa_family_t f;
	char ip[INET6_ADDRSTRLEN], tmp[80];
	int n;

	memcpy(&f, addr, sizeof(f));
	if (tcp_addr_load(&a, addr, tcp_addr_len(f), AF_UNSPEC))
		return -FI_EINVAL;
	if (f == AF_INET) {
		inet_ntop(AF_INET, &a.in.sin_addr, ip, sizeof(ip));
		n = snprintf(tmp, sizeof(tmp), TCP_ADDR_PREFIX "%s:%u", ip,
		             ntohs(a.in.sin_port));
	} else {
		inet_ntop(AF_INET6, &a.in6.sin6_addr, ip, sizeof(ip));
		n = snprintf(tmp, sizeof(tmp), TCP_ADDR6_PREFIX "[%s]:%u", ip,
		             ntohs(a.in6.sin6_port));
	}
	if (*len)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return 0;
}

/* ---- interfaces ------------------------------------------------------------------ */

struct iface {
	char name[IF_NAMESIZE];
	char fabric[64];     /* the subnet, a.b.c.d/len or a:b::/len */
	union tcp_addr addr; /* port 0 */
	bool loopback;
};

/* The subnet of addr under mask as "network/prefix length". */
static void subnet_name(char *buf, size_t len, const struct sockaddr *addr,
                        const struct sockaddr *mask)
{
	unsigned char net[16];
	const unsigned char *a, *m;
	size_t n;
	int bits = 0;
	char ip[INET6_ADDRSTRLEN];

	if (addr->sa_family == AF_INET) {
		a = (const unsigned char *)&((const struct sockaddr_in *)addr)->sin_addr;
		m = (const unsigned char *)&((const struct sockaddr_in *)mask)->sin_addr;
		n = 4;
	} else {
		a = ((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr;
		m = ((const struct sockaddr_in6 *)mask)->sin6_addr.s6_addr;
		n = 16;
	}
	for (size_t i = 0; i < n; i++) {
		net[i] = a[i] & m[i];
		bits += __builtin_popcount(m[i]);
	}
	inet_ntop(addr->sa_family, net, ip, sizeof(ip));
	snprintf(buf, len, "%s/%d", ip, bits);
}

/* Whether an interface address is one endpoints can use: up, IPv4 or IPv6
 * (not link-local, which would need a scope), of the family asked for. */
static bool usable(const struct ifaddrs *ifa, int family)
{
	const struct sockaddr *sa = ifa->ifa_addr;

	if (!sa || !ifa->ifa_netmask || !(ifa->ifa_flags & IFF_UP) ||
	    sa->sa_family != family)
		return false;
	return family == AF_INET ||
	       !IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* Usable interface addresses of the family (AF_UNSPEC: both), FI_TCP_IFACE
 * only if set: others first, then loopback; IPv4 before IPv6 in each. */
static int ifaces_list(struct iface *out, int max, int family)
{
	static const int families[] = {AF_INET, AF_INET6};
	struct ifaddrs *all, *ifa;
	char *want = NULL;
	int n = 0;

	fi_param_get_str(&tcp_prov, "iface", &want);
	if (getifaddrs(&all))
		return 0;
	for (int pass = 0; pass < 4; pass++) {
		bool lo_pass = pass >= 2;
		int fam = families[pass % 2];

		if (family != AF_UNSPEC && fam != family)
			continue;
		for (ifa = all; ifa && n < max; ifa = ifa->ifa_next) {
			struct iface *f = &out[n];

			if (!usable(ifa, fam) ||
			    !(ifa->ifa_flags & IFF_LOOPBACK) != !lo_pass)
				continue;
			if (want && strcmp(want, ifa->ifa_name))
				continue;
			memset(f, 0, sizeof(*f));
			snprintf(f->name, sizeof(f->name), "%s", ifa->ifa_name);
			tcp_addr_load(&f->addr, ifa->ifa_addr, tcp_addr_len(fam), fam);
			f->addr.in.sin_port = 0; /* same place in both families */
			f->loopback = lo_pass;
			subnet_name(f->fabric, sizeof(f->fabric), ifa->ifa_addr,
			            ifa->ifa_netmask);
			n++;
		}
	}
	freeifaddrs(all);
	return n;
}

/* Does a source address pick this interface?  The unspecified address
 * (0.0.0.0, ::) picks any of its family. */
static bool src_picks(const union tcp_addr *src, const struct iface *f)
{
	if (src->sa.sa_family != f->addr.sa.sa_family)
		return false;
	if (src->sa.sa_family == AF_INET)
		return src->in.sin_addr.s_addr == htonl(INADDR_ANY) ||
		       src->in.sin_addr.s_addr == f->addr.in.sin_addr.s_addr;
	return IN6_IS_ADDR_UNSPECIFIED(&src->in6.sin6_addr) ||
	       IN6_ARE_ADDR_EQUAL(&src->in6.sin6_addr, &f->addr.in6.sin6_addr);
}

/* ---- getinfo ---------------------------------------------------------------------- */

/* An address in the info's format: the sockaddr itself, or its text. */
static int set_addr(void **dst, size_t *dstlen, const union tcp_addr *a, bool str)
{
	char text[80];
	size_t len = sizeof(text);
	void *p;

	if (str && tcp_addr_to_str(a, text, &len))
		return -FI_EINVAL;
	if (!str)
		len = tcp_addr_len(a->sa.sa_family);
	p = malloc(len);
	if (!p)
		return -FI_ENOMEM;
	memcpy(p, str ? (const void *)text : (const void *)a, len);
	free(*dst);
	*dst = p;
	*dstlen = len;
	return 0;
}

/* An address from the hints (src_addr or dest_addr) in their format, of
 * the family wanted so far (which it then fixes). */
static int hint_addr(const void *addr, size_t len, bool str, int *family,
                     union tcp_addr *out)
{
	int ret = str ? tcp_addr_parse(addr, NULL, *family, out)
	              : tcp_addr_load(out, addr, len, *family);

	if (ret)
		return -FI_ENODATA;
	*family = out->sa.sa_family;
	return 0;
}

/* What a getinfo call asks for: the addresses it names, the format and the
 * family they fix, and whether a shared receive context is wanted. */
struct query {
	union tcp_addr src, dest;
	bool have_src, have_dest;
	bool str; /* FI_ADDR_STR: addresses as text */
	int family; /* AF_UNSPEC: either */
};

/* Read node, service, flags and hints into q: -FI_ENODATA when they ask
 * for what tcp does not serve or name an address it cannot resolve. */
static int query_parse(struct query *q, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints)
{
	uint32_t fmt = hints ? hints->addr_format : FI_FORMAT_UNSPEC;

	*q = (struct query){.str = fmt == FI_ADDR_STR, .family = AF_UNSPEC};
	if (fmt == FI_SOCKADDR_IN)
		q->family = AF_INET;
	else if (fmt == FI_SOCKADDR_IN6)
		q->family = AF_INET6;
	else if (fmt && fmt != FI_SOCKADDR && !q->str)
		return -FI_ENODATA;
	if (node || service) {
		union tcp_addr *a = flags & FI_SOURCE ? &q->src : &q->dest;

		if (resolve(node, service ? service : "0", flags & FI_SOURCE,
		            flags & FI_NUMERICHOST, q->family, a))
			return -FI_ENODATA;
		q->family = a->sa.sa_family;
		if (flags & FI_SOURCE)
			q->have_src = true;
		else
			q->have_dest = true;
	}
	if (!q->have_src && hints && hints->src_addr) {
		if (hint_addr(hints->src_addr, hints->src_addrlen, q->str, &q->family,
		              &q->src))
			return -FI_ENODATA;
		q->have_src = true;
	}
	if (!q->have_dest && hints && hints->dest_addr) {
		if (hint_addr(hints->dest_addr, hints->dest_addrlen, q->str, &q->family,
		              &q->dest))
			return -FI_ENODATA;
		q->have_dest = true;
	}
	return 0;
}

/* What interface f offers for q: its RDM and MSG infos that match hints,
 * with their addresses set, in *got (NULL when none). */
static int iface_infos(uint32_t version, const struct fi_info *hints,
                       const struct query *q, struct iface *f, struct fi_info **got)
{
	uint32_t ifmt = q->str                            ? FI_ADDR_STR
	                : f->addr.sa.sa_family == AF_INET ? FI_SOCKADDR_IN
	                                                  : FI_SOCKADDR_IN6;
	struct fi_tx_attr tx = tcp_tx;
	struct fi_rx_attr rx = tcp_rx, mrx = tcp_rx;
	struct fi_ep_attr ep = tcp_ep, mep = tcp_msg_ep;
	struct fi_domain_attr dom = tcp_dom, mdom;
	struct fi_fabric_attr fab = {.name = f->fabric, .prov_version = LM_PROV_VERSION};
	struct fi_info tmpl = {.caps = TCP_CAPS,
	                       .addr_format = ifmt,
	                       .tx_attr = &tx,
	                       .rx_attr = &rx,
	                       .ep_attr = &ep,
	                       .domain_attr = &dom,
	                       .fabric_attr = &fab};
	struct fi_info msg = tmpl;
	const struct fi_info *tmpls[] = {&tmpl, &msg, NULL};
	struct fi_info *list = NULL, *cur;
	union tcp_addr mine = f->addr;
	int ret = 0;

	*got = NULL;
	if (q->have_src && !src_picks(&q->src, f))
		return 0;
	if (q->have_src)
		mine.in.sin_port = q->src.in.sin_port; /* same place in both */
	dom.name = f->name;
	mdom = dom;
	mrx.caps &= TCP_MSG_CAPS;
	msg.caps = TCP_MSG_CAPS;
	msg.rx_attr = &mrx;
	msg.ep_attr = &mep;
	msg.domain_attr = &mdom;
	if (lm_info_match_list(version, tmpls, hints, &list))
		return 0;
	lm_rdm_progress_default(&tcp_prov, hints, list);
	for (cur = list; cur; cur = cur->next) {
		cur->addr_format = ifmt;
		ret = set_addr(&cur->src_addr, &cur->src_addrlen, &mine, q->str);
		if (!ret && q->have_dest)
			ret = set_addr(&cur->dest_addr, &cur->dest_addrlen, &q->dest,
			               q->str);
		if (ret) {
			fi_freeinfo(list);
			return ret;
		}
	}
	*got = list;
	return 0;
}

static int tcp_getinfo(uint32_t version, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	struct iface ifs[TCP_MAX_IFACES];
	struct fi_info *list = NULL, **tail = &list;
	struct query q;
	int n, ret;

	ret = query_parse(&q, node, service, flags, hints);
	if (ret)
		return ret;
	n = ifaces_list(ifs, TCP_MAX_IFACES, q.family);
	for (int i = 0; i < n; i++) {
		struct fi_info *got;

		ret = iface_infos(version, hints, &q, &ifs[i], &got);
		if (ret) {
			fi_freeinfo(list);
			return ret;
		}
		*tail = got;
		while (*tail)
			tail = &(*tail)->next;
	}
	if (!list)
		return -FI_ENODATA;
	*info = list;
	return 0;
}

/* ---- fabric and domain ---------------------------------------------------- */

/* An engine domain with the parameters its links share (their link_ctx),
 * and, when RDM endpoints reach same-host peers through shared memory, the
 * link of two that does it (its link ops and context). */
struct tcp_domain {
	struct lm_rdm_domain rdm; /* first: util's fi_close frees the whole */
	struct tcp_params params;
	struct lm_duo duo;
};

static int tcp_endpoint(struct fid_domain *domain, struct fi_info *info,
                        struct fid_ep **ep, void *context)
{
	if (info && info->ep_attr && info->ep_attr->type == FI_EP_MSG)
		return tcp_msg_endpoint(domain, info, ep, context);
	return lm_rdm_endpoint(domain, info, ep, context);
}

/* The link of the info's address family: its source address's (or its
 * destination's), else the format's. */
static const struct lm_link_ops *link_ops_of(const struct fi_info *info)
{
	union tcp_addr a;
	const void *addr = info->src_addr ? info->src_addr : info->dest_addr;
	size_t len = info->src_addr ? info->src_addrlen : info->dest_addrlen;
	int ret = -FI_EINVAL;

	if (info->addr_format == FI_SOCKADDR_IN6)
		return &tcp6_link_ops;
	if (addr && info->addr_format == FI_ADDR_STR)
		ret = tcp_addr_parse(addr, NULL, AF_UNSPEC, &a);
	else if (addr && info->addr_format == FI_SOCKADDR)
		ret = tcp_addr_load(&a, addr, len, AF_UNSPEC);
	return !ret && a.sa.sa_family == AF_INET6 ? &tcp6_link_ops : &tcp_link_ops;
}

/* Is there a usable interface on the fabric (subnet) named fabric, and
 * named domain?  NULL names match any: fi_fabric and fi_domain open only
 * what fi_getinfo could have offered. */
static bool iface_named(const char *fabric, const char *domain)
{
	struct iface ifs[TCP_MAX_IFACES];
	int n = ifaces_list(ifs, TCP_MAX_IFACES, AF_UNSPEC);

	for (int i = 0; i < n; i++)
		if ((!fabric || !strcmp(fabric, ifs[i].fabric)) &&
		    (!domain || !strcmp(domain, ifs[i].name)))
			return true;
	return false;
}

static const struct fi_ops_domain tcp_domain_ops =
    LM_RDM_DOMAIN_OPS(tcp_endpoint);

static int tcp_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct tcp_domain *d;
	int ret;

	if (!info || !info->domain_attr)
		return -FI_EINVAL;
	if (info->domain_attr->name && !iface_named(NULL, info->domain_attr->name))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	tcp_params_read(&d->params);
	if (d->params.enable_shm)
		lm_duo_init(&d->duo, &tcp_prov, link_ops_of(info), &d->params, &shm_link_ops,
		            NULL);
	ret = lm_rdm_domain_init(&d->rdm, fab, info,
	                         d->params.enable_shm ? &d->duo.ops : link_ops_of(info),
	                         d->params.enable_shm ? (void *)&d->duo : &d->params,
	                         context);
	if (ret) {
		free(d);
		return ret;
	}
	d->rdm.util.domain_fid.ops = (struct fi_ops_domain *)&tcp_domain_ops;
	/* Bulk copies (CMA) go to the peers shared memory reaches. */
	d->rdm.no_bulk = !d->params.enable_shm;
	d->rdm.eager_max = TCP_EAGER_MAX;
	*domain = &d->rdm.util.domain_fid;
	return 0;
}

static const struct fi_ops_fabric tcp_fabric_ops =
    LM_FABRIC_OPS(tcp_domain_open, tcp_passive_ep);

static int tcp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                           void *context)
{
	if (attr && attr->name && !iface_named(attr->name, NULL))
		return -FI_EINVAL;
	return lm_fabric_open(&tcp_prov, attr, &tcp_fabric_ops, context, fabric);
}

struct fi_provider tcp_prov = {
    .version = LM_PROV_VERSION,
    .fi_version = LM_PROV_FI_VERSION,
    .name = "tcp",
    .getinfo = tcp_getinfo,
    .fabric = tcp_fabric_open,
};

struct fi_provider *tcp_prov_init(void)
{
	tcp_log_prov = &tcp_prov;
	lm_rdm_progress_param(&tcp_prov);
	fi_param_define(&tcp_prov, "iface", FI_PARAM_STRING,
	                "Only this network interface (default: every interface that "
	                "is up, loopback last)");
	fi_param_define(&tcp_prov, "port_low_range", FI_PARAM_INT,
	                "Lowest port endpoints listen on (default: any port)");
	fi_param_define(&tcp_prov, "port_high_range", FI_PARAM_INT,
	                "Highest port endpoints listen on (default: any port)");
	fi_param_define(&tcp_prov, "conn_timeout", FI_PARAM_INT,
	                "Milliseconds a connection may take to come up before its "
	                "operations fail (default: 10000)");
	fi_param_define(&tcp_prov, "sockbuf", FI_PARAM_INT,
	                "Send and receive buffer bytes of each connection's socket, "
	                "capped by net.core.wmem_max and rmem_max; 0 leaves them to "
	                "the kernel's autotuning (default: 4194304)");
	fi_param_define(&tcp_prov, "enable_shm", FI_PARAM_BOOL,
	                "RDM endpoints send to peers on the same host through shared "
	                "memory, found in the connection handshake (default: 1)");
	return &tcp_prov;
}
