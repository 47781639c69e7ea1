/* prov.c - the tcp provider: one fi_info per usable IPv4 interface
 * (loopback last), node/service resolution, its parameters, and the
 * fabric and domain (the RDM engine's, over the TCP link). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

#define TCP_CAPS                                                                         \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RMA_EVENT | FI_FENCE)
#define TCP_TX_CAPS                                                                      \
	(TCP_CAPS & ~(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |       \
	              FI_DIRECTED_RECV | FI_SOURCE | FI_RMA_EVENT))
#define TCP_RX_CAPS    (TCP_CAPS & ~(FI_SEND | FI_READ | FI_WRITE | FI_FENCE))
#define TCP_MAX_IFACES 16

static struct tcp_params params = {
    .conn_timeout_ms = 10000,
};

static const struct fi_tx_attr tcp_tx = {
    .caps = TCP_TX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = FI_ORDER_NONE,
    .inject_size = 4096,
    .size = 1024,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = 1,
};
static const struct fi_rx_attr tcp_rx = {
    .caps = TCP_RX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = FI_ORDER_NONE,
    .total_buffered_recv = (size_t)64 << 20, /* unexpected data held, at most */
    .size = 1024,
    .iov_limit = LM_IOV_LIMIT,
};
/* FI_EP_MSG: one peer, so no source addressing or directed receives. */
#define TCP_MSG_CAPS (TCP_CAPS & ~(FI_SOURCE | FI_DIRECTED_RECV))

static const struct fi_ep_attr tcp_msg_ep = {
    .type = FI_EP_MSG,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = (size_t)1 << 62,
    .msg_prefix_size = 0,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};

static const struct fi_ep_attr tcp_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = (size_t)1 << 62,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};
static const struct fi_domain_attr tcp_dom = {
    .threading = FI_THREAD_SAFE,
    .control_progress = FI_PROGRESS_MANUAL,
    .data_progress = FI_PROGRESS_MANUAL,
    .resource_mgmt = FI_RM_ENABLED,
    .av_type = FI_AV_UNSPEC,
    .mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY,
    .mr_key_size = sizeof(uint64_t),
    .cq_data_size = sizeof(uint64_t),
    .cq_cnt = 1024,
    .ep_cnt = 256,
    .tx_ctx_cnt = 256,
    .rx_ctx_cnt = 256,
    .max_ep_tx_ctx = 1,
    .max_ep_rx_ctx = 1,
    .mr_iov_limit = LM_IOV_LIMIT,
    .mr_cnt = 1 << 16,
    .cntr_cnt = 1024,
    .max_err_data = 256,
    .caps = FI_LOCAL_COMM | FI_REMOTE_COMM,
};

/* ---- addresses --------------------------------------------------------------- */

#define TCP_ADDR_PREFIX "fi_sockaddr_in://"

/* node[:port] text, "fi_sockaddr_in://a.b.c.d:port", or node + service
 * through the resolver. */
static int resolve(const char *node, const char *service, bool passive, bool numeric,
                   struct sockaddr_in *out)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	int ret;

	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	if (numeric)
		hints.ai_flags |= AI_NUMERICHOST;
	ret = getaddrinfo(node, service, &hints, &res);
	if (ret)
		return -FI_ENODATA;
	memcpy(out, res->ai_addr, sizeof(*out));
	memset(out->sin_zero, 0, sizeof(out->sin_zero));
	freeaddrinfo(res);
	return 0;
}

int tcp_addr_from_str(const char *node, const char *service, void *addr)
{
	struct sockaddr_in a;
	char host[INET_ADDRSTRLEN + 8], *colon;
	size_t plen = strlen(TCP_ADDR_PREFIX);

	if (!node)
		return -FI_EINVAL;
	if (!strncmp(node, TCP_ADDR_PREFIX, plen)) {
		const char *rest = node + plen;
		char *end;
		unsigned long port;

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
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
			return -FI_EINVAL;
	} else if (resolve(node, service, false, false, &a)) {
		return -FI_EINVAL;
	}
	memcpy(addr, &a, sizeof(a));
	return 0;
}

int tcp_addr_to_str(const void *addr, char *buf, size_t *len)
{
	struct sockaddr_in a;
	char ip[INET_ADDRSTRLEN], tmp[64];
	int n;

	memcpy(&a, addr, sizeof(a));
	if (a.sin_family != AF_INET || !inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip)))
		return -FI_EINVAL;
	n = snprintf(tmp, sizeof(tmp), TCP_ADDR_PREFIX "%s:%u", ip, ntohs(a.sin_port));
	if (*len)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return 0;
}

/* ---- interfaces ------------------------------------------------------------------ */

struct iface {
	char name[IF_NAMESIZE];
	char fabric[32]; /* the subnet, a.b.c.d/len */
	struct sockaddr_in addr;
	bool loopback;
};

static int prefix_len(const struct sockaddr *mask)
{
	uint32_t m = ntohl(((const struct sockaddr_in *)mask)->sin_addr.s_addr);

	return __builtin_popcount(m);
}

/* Usable IPv4 interfaces (FI_TCP_IFACE only, if set), loopback last. */
static int ifaces_list(struct iface *out, int max)
{
	struct ifaddrs *all, *ifa;
	char *want = NULL;
	int n = 0;

	fi_param_get_str(&tcp_prov, "iface", &want);
	if (getifaddrs(&all))
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		for (ifa = all; ifa && n < max; ifa = ifa->ifa_next) {
			struct iface *f = &out[n];
			bool lo;
			uint32_t net;
			char ip[INET_ADDRSTRLEN];

			if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
			    !(ifa->ifa_flags & IFF_UP) || !ifa->ifa_netmask)
				continue;
			lo = ifa->ifa_flags & IFF_LOOPBACK;
			if (lo != (pass == 1))
				continue;
			if (want && strcmp(want, ifa->ifa_name))
				continue;
			memset(f, 0, sizeof(*f));
			snprintf(f->name, sizeof(f->name), "%s", ifa->ifa_name);
			memcpy(&f->addr, ifa->ifa_addr, sizeof(f->addr));
			f->addr.sin_port = 0;
			f->loopback = lo;
			net = f->addr.sin_addr.s_addr &
			      ((const struct sockaddr_in *)ifa->ifa_netmask)
			          ->sin_addr.s_addr;
			inet_ntop(AF_INET, &net, ip, sizeof(ip));
			snprintf(f->fabric, sizeof(f->fabric), "%s/%d", ip,
			         prefix_len(ifa->ifa_netmask));
			n++;
		}
	}
	freeifaddrs(all);
	return n;
}

/* ---- getinfo ---------------------------------------------------------------------- */

/* An address in the info's format: the sockaddr itself, or its text. */
static int set_addr(void **dst, size_t *dstlen, const struct sockaddr_in *a, bool str)
{
	char text[64];
	size_t len = sizeof(text);
	void *p;

	if (str && tcp_addr_to_str(a, text, &len))
		return -FI_EINVAL;
	if (!str)
		len = sizeof(*a);
	p = malloc(len);
	if (!p)
		return -FI_ENOMEM;
	memcpy(p, str ? (const void *)text : (const void *)a, len);
	free(*dst);
	*dst = p;
	*dstlen = len;
	return 0;
}

static int tcp_getinfo(uint32_t version, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	struct iface ifs[TCP_MAX_IFACES];
	struct sockaddr_in src, dest;
	bool have_src = false, have_dest = false;
	struct fi_info *list = NULL, **tail = &list;
	bool str = hints && hints->addr_format == FI_ADDR_STR;
	int n, ret = 0;

	if (hints && hints->addr_format && hints->addr_format != FI_SOCKADDR_IN &&
	    hints->addr_format != FI_SOCKADDR && !str)
		return -FI_ENODATA;
	if (node || service) {
		struct sockaddr_in *a = flags & FI_SOURCE ? &src : &dest;

		if (resolve(node, service ? service : "0", flags & FI_SOURCE,
		            flags & FI_NUMERICHOST, a))
			return -FI_ENODATA;
		if (flags & FI_SOURCE)
			have_src = true;
		else
			have_dest = true;
	}
	if (!have_src && hints && hints->src_addr) {
		if (str ? tcp_addr_from_str(hints->src_addr, NULL, &src)
		        : hints->src_addrlen != sizeof(src) ||
		              ((const struct sockaddr *)hints->src_addr)->sa_family !=
		                  AF_INET)
			return -FI_ENODATA;
		if (!str)
			memcpy(&src, hints->src_addr, sizeof(src));
		have_src = true;
	}
	if (!have_dest && hints && hints->dest_addr) {
		if (str ? tcp_addr_from_str(hints->dest_addr, NULL, &dest)
		        : hints->dest_addrlen != sizeof(dest) ||
		              ((const struct sockaddr *)hints->dest_addr)->sa_family !=
		                  AF_INET)
			return -FI_ENODATA;
		if (!str)
			memcpy(&dest, hints->dest_addr, sizeof(dest));
		have_dest = true;
	}

	n = ifaces_list(ifs, TCP_MAX_IFACES);
	for (int i = 0; i < n; i++) {
		struct fi_tx_attr tx = tcp_tx;
		struct fi_rx_attr rx = tcp_rx, mrx = tcp_rx;
		struct fi_ep_attr ep = tcp_ep, mep = tcp_msg_ep;
		struct fi_domain_attr dom = tcp_dom;
		struct fi_fabric_attr fab = {.name = ifs[i].fabric,
		                             .prov_version = FI_VERSION(1, 0)};
		struct fi_info tmpl = {.caps = TCP_CAPS,
		                       .addr_format = str ? FI_ADDR_STR : FI_SOCKADDR_IN,
		                       .tx_attr = &tx,
		                       .rx_attr = &rx,
		                       .ep_attr = &ep,
		                       .domain_attr = &dom,
		                       .fabric_attr = &fab};
		struct fi_info msg = tmpl;
		const struct fi_info *tmpls[] = {&tmpl, &msg, NULL};
		struct fi_info *got = NULL, *cur;
		struct sockaddr_in mine = ifs[i].addr;

		/* A given source address picks its interface (0.0.0.0: any). */
		if (have_src && src.sin_addr.s_addr != htonl(INADDR_ANY) &&
		    src.sin_addr.s_addr != ifs[i].addr.sin_addr.s_addr)
			continue;
		if (have_src)
			mine.sin_port = src.sin_port;
		dom.name = ifs[i].name;
		mrx.caps &= TCP_MSG_CAPS;
		msg.caps = TCP_MSG_CAPS;
		msg.rx_attr = &mrx;
		msg.ep_attr = &mep;
		if (lm_info_match_list(version, tmpls, hints, &got))
			continue;
		for (cur = got; cur; cur = cur->next) {
			cur->addr_format = str ? FI_ADDR_STR : FI_SOCKADDR_IN;
			ret = set_addr(&cur->src_addr, &cur->src_addrlen, &mine, str);
			if (!ret && have_dest)
				ret = set_addr(&cur->dest_addr, &cur->dest_addrlen, &dest,
				               str);
			if (ret)
				break;
		}
		*tail = got;
		while (*tail)
			tail = &(*tail)->next;
		if (ret)
			break;
	}
	if (ret) {
		fi_freeinfo(list);
		return ret;
	}
	if (!list)
		return -FI_ENODATA;
	*info = list;
	return 0;
}

/* ---- fabric and domain ---------------------------------------------------- */

static struct fi_ops_domain tcp_domain_ops;

static int tcp_endpoint(struct fid_domain *domain, struct fi_info *info,
                        struct fid_ep **ep, void *context)
{
	if (info && info->ep_attr && info->ep_attr->type == FI_EP_MSG)
		return tcp_msg_endpoint(domain, info, ep, context);
	return lm_rdm_endpoint(domain, info, ep, context);
}

static int tcp_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
	struct lm_rdm_domain *dom;
	int ret = lm_rdm_domain_open(fabric, info, &tcp_link_ops, &params,
	                             &tcp_domain_ops, context, &dom);

	if (ret)
		return ret;
	dom->no_bulk = true;
	*domain = &dom->util.domain_fid;
	return 0;
}

static struct fi_ops_fabric tcp_fabric_ops;

static int tcp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                           void *context)
{
	return lm_fabric_open(&tcp_prov, attr, &tcp_fabric_ops, context, fabric);
}

struct fi_provider tcp_prov = {
    .version = FI_VERSION(1, 0),
    .fi_version = FI_VERSION(1, 17),
    .name = "tcp",
    .getinfo = tcp_getinfo,
    .fabric = tcp_fabric_open,
};

struct fi_provider *tcp_prov_init(void)
{
	int v;

	tcp_log_prov = &tcp_prov;
	tcp_domain_ops = lm_rdm_domain_ops;
	tcp_domain_ops.endpoint = tcp_endpoint;
	tcp_fabric_ops = lm_fabric_ops;
	tcp_fabric_ops.domain = tcp_domain_open;
	tcp_fabric_ops.passive_ep = tcp_passive_ep;
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
	if (!fi_param_get_int(&tcp_prov, "port_low_range", &v) && v > 0 && v < 65536)
		params.port_low = v;
	if (!fi_param_get_int(&tcp_prov, "port_high_range", &v) && v > 0 && v < 65536)
		params.port_high = v;
	if (params.port_low && params.port_high < params.port_low)
		params.port_high = params.port_low ? 65535 : 0;
	if (!fi_param_get_int(&tcp_prov, "conn_timeout", &v) && v > 0)
		params.conn_timeout_ms = v;
	return &tcp_prov;
}
