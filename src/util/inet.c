/* inet.c - what the IP providers (tcp, udp) share (inet.h): one fi_info
 * per usable IPv4 and IPv6 interface address (loopback last), addresses in
 * their binary and text forms, node/service resolution. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- addresses --------------------------------------------------------------- */

/* libfabric's text forms, the same for every IP provider. */
#define INET4_PREFIX "fi_sockaddr_in://"
#define INET6_PREFIX "fi_sockaddr_in6://"

socklen_t lm_inet_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                          : sizeof(struct sockaddr_in);
}

int lm_inet_load(union lm_inet_addr *out, const void *addr, size_t len, int family)
{
	union lm_inet_addr a;
	sa_family_t f;

	if (!addr || len < sizeof(f))
		return -FI_EINVAL;
	memcpy(&f, addr, sizeof(f));
	if ((f != AF_INET && f != AF_INET6) || (family && f != family) ||
	    len < lm_inet_len(f))
		return -FI_EINVAL;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, lm_inet_len(f));
	if (f == AF_INET)
		memset(a.in.sin_zero, 0, sizeof(a.in.sin_zero));
	else
		a.in6.sin6_flowinfo = 0;
	*out = a;
	return 0;
}

int lm_inet_of_fd(int fd, bool peer, union lm_inet_addr *out)
{
	union lm_inet_addr a;
	socklen_t len = sizeof(a);

	memset(&a, 0, sizeof(a));
	if (peer ? getpeername(fd, &a.sa, &len) : getsockname(fd, &a.sa, &len))
		return -FI_EIO;
	return lm_inet_load(out, &a, len, AF_UNSPEC);
}

/* node and service through the resolver, of the family (AF_UNSPEC: IPv4
 * if the name has an IPv4 address, else IPv6).  A service name is looked
 * up as a TCP one, for every IP provider: the address is the same for
 * either socket type, and services take the same port over TCP and UDP. */
static int resolve(const char *node, const char *service, bool passive, bool numeric,
                   int family, union lm_inet_addr *out)
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
	ret = lm_inet_load(out, res->ai_addr, res->ai_addrlen, family);
	freeaddrinfo(res);
	return ret ? -FI_ENODATA : 0;
}

/* "a.b.c.d:port" (IPv4) or "[a:b::c]:port" (IPv6) after the prefix. */
static int parse_text(const char *rest, int family, union lm_inet_addr *out)
{
	char host[INET6_ADDRSTRLEN + 8], *colon, *end;
	unsigned long port;
	union lm_inet_addr a;

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

int lm_inet_parse(const char *node, const char *service, int family,
                  union lm_inet_addr *out)
{
	if (!node)
		return -FI_EINVAL;
	if (!strncmp(node, INET4_PREFIX, strlen(INET4_PREFIX)))
		return family == AF_INET6
		           ? -FI_EINVAL
		           : parse_text(node + strlen(INET4_PREFIX), AF_INET, out);
	if (!strncmp(node, INET6_PREFIX, strlen(INET6_PREFIX)))
		return family == AF_INET
		           ? -FI_EINVAL
		           : parse_text(node + strlen(INET6_PREFIX), AF_INET6, out);
	/* A host name is looked up only with a service beside it (fi_getinfo,
	 * fi_av_insertsvc); text alone (an FI_ADDR_STR address, a hint's
	 * src_addr) must be a numeric address, as libfabric reads it, and
	 * never starts a DNS query. */
	return resolve(node, service, false, !service, family, out) ? -FI_EINVAL : 0;
}

static int addr_from_str(const char *node, const char *service, int family, void *addr)
{
	union lm_inet_addr a;
	int ret = lm_inet_parse(node, service, family, &a);

	if (!ret)
		memcpy(addr, &a, lm_inet_len(family));
	return ret;
}

int lm_inet4_from_str(const char *node, const char *service, void *addr)
{
	return addr_from_str(node, service, AF_INET, addr);
}

int lm_inet6_from_str(const char *node, const char *service, void *addr)
{
	return addr_from_str(node, service, AF_INET6, addr);
}

/* What fi_av_insert may take.  An address no connect can reach (another
 * family, as the all-zero sockaddr of fabtests' av_test; port 0) fails with
 * FI_EADDRNOTAVAIL, as the reference's does.  So does one with bytes set that
 * the family does not use (sin_zero, the flow label): peers are matched on
 * the normalized bytes (lm_inet_load), which such an entry would never
 * equal.  The wildcard address is kept, unlike the reference: it reaches this
 * host, and it is the name of a link bound without a source address. */
static int addr_check(const void *addr, int family)
{
	socklen_t len = lm_inet_len(family);
	union lm_inet_addr a;

	if (lm_inet_load(&a, addr, len, family) || memcmp(&a, addr, len) ||
	    !a.in.sin_port)
		return -FI_EADDRNOTAVAIL;
	return 0;
}

int lm_inet4_check(const void *addr)
{
	return addr_check(addr, AF_INET);
}

int lm_inet6_check(const void *addr)
{
	return addr_check(addr, AF_INET6);
}

int lm_inet_lane(const void *addr, int delta, void *out)
{
	union lm_inet_addr a;
	int port;

	if (lm_inet_load(&a, addr, sizeof(a), AF_UNSPEC))
		return -FI_EINVAL;
	port = ntohs(a.in.sin_port) + delta; /* same place in both families */
	if (port < 1 || port > UINT16_MAX)
		return -FI_EINVAL;
	a.in.sin_port = htons((uint16_t)port);
	memcpy(out, &a, lm_inet_len(a.sa.sa_family));
	return 0;
}

int lm_inet_to_str(const void *addr, char *buf, size_t *len)
{
	union lm_inet_addr a;
	sa_family_t f;
	char ip[INET6_ADDRSTRLEN], tmp[80];
	int n;

	memcpy(&f, addr, sizeof(f));
	if (lm_inet_load(&a, addr, lm_inet_len(f), AF_UNSPEC))
		return -FI_EINVAL;
	if (f == AF_INET) {
		inet_ntop(AF_INET, &a.in.sin_addr, ip, sizeof(ip));
		n = snprintf(tmp, sizeof(tmp), INET4_PREFIX "%s:%u", ip,
		             ntohs(a.in.sin_port));
	} else {
		inet_ntop(AF_INET6, &a.in6.sin6_addr, ip, sizeof(ip));
		n = snprintf(tmp, sizeof(tmp), INET6_PREFIX "[%s]:%u", ip,
		             ntohs(a.in6.sin6_port));
	}
	if (*len)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return 0;
}

int lm_inet_info_family(const struct fi_info *info)
{
	const void *addr = info->src_addr ? info->src_addr : info->dest_addr;
	size_t len = info->src_addr ? info->src_addrlen : info->dest_addrlen;
	union lm_inet_addr a;
	int ret = -FI_EINVAL;

	if (info->addr_format == FI_SOCKADDR_IN6)
		return AF_INET6;
	if (addr && info->addr_format == FI_ADDR_STR)
		ret = lm_inet_parse(addr, NULL, AF_UNSPEC, &a);
	else if (addr && info->addr_format == FI_SOCKADDR)
		ret = lm_inet_load(&a, addr, len, AF_UNSPEC);
	return !ret && a.sa.sa_family == AF_INET6 ? AF_INET6 : AF_INET;
}

/* ---- interfaces ------------------------------------------------------------------ */

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

int lm_ifaces_list(const struct fi_provider *prov, struct lm_iface *out, int max,
                   int family)
{
	static const int families[] = {AF_INET, AF_INET6};
	struct ifaddrs *all, *ifa;
	char *want = NULL;
	int n = 0;

	/* fi_param_get only looks the provider up, never changes it. */
	fi_param_get_str((struct fi_provider *)prov, "iface", &want);
	if (getifaddrs(&all))
		return 0;
	for (int pass = 0; pass < 4; pass++) {
		bool lo_pass = pass >= 2;
		int fam = families[pass % 2];

		if (family != AF_UNSPEC && fam != family)
			continue;
		for (ifa = all; ifa && n < max; ifa = ifa->ifa_next) {
			struct lm_iface *f = &out[n];

			if (!usable(ifa, fam) ||
			    !(ifa->ifa_flags & IFF_LOOPBACK) != !lo_pass)
				continue;
			if (want && strcmp(want, ifa->ifa_name))
				continue;
			memset(f, 0, sizeof(*f));
			snprintf(f->name, sizeof(f->name), "%s", ifa->ifa_name);
			lm_inet_load(&f->addr, ifa->ifa_addr, lm_inet_len(fam), fam);
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

bool lm_iface_picks(const union lm_inet_addr *src, const struct lm_iface *f)
{
	if (src->sa.sa_family != f->addr.sa.sa_family)
		return false;
	if (src->sa.sa_family == AF_INET)
		return src->in.sin_addr.s_addr == htonl(INADDR_ANY) ||
		       src->in.sin_addr.s_addr == f->addr.in.sin_addr.s_addr;
	return IN6_IS_ADDR_UNSPECIFIED(&src->in6.sin6_addr) ||
	       IN6_ARE_ADDR_EQUAL(&src->in6.sin6_addr, &f->addr.in6.sin6_addr);
}

bool lm_iface_named(const struct fi_provider *prov, const char *fabric,
                    const char *domain)
{
	struct lm_iface ifs[LM_MAX_IFACES];
	int n = lm_ifaces_list(prov, ifs, LM_MAX_IFACES, AF_UNSPEC);

	for (int i = 0; i < n; i++)
		if ((!fabric || !strcmp(fabric, ifs[i].fabric)) &&
		    (!domain || !strcmp(domain, ifs[i].name)))
			return true;
	return false;
}

int lm_inet_fabric_open(const struct fi_provider *prov, const struct fi_ops_fabric *ops,
                        struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                        void *context)
{
	if (attr && attr->name && !lm_iface_named(prov, attr->name, NULL))
		return -FI_EINVAL;
	return lm_fabric_open(prov, attr, ops, context, fabric);
}

void lm_inet_params_define(struct fi_provider *prov)
{
	fi_param_define(prov, "iface", FI_PARAM_STRING,
	                "Only this network interface (default: every interface that "
	                "is up, loopback last)");
	fi_param_define(prov, "port_low_range", FI_PARAM_INT,
	                "Lowest port an endpoint's socket binds (default: any port)");
	fi_param_define(prov, "port_high_range", FI_PARAM_INT,
	                "Highest port an endpoint's socket binds (default: any port)");
}

void lm_inet_ports_read(struct fi_provider *prov, int *low, int *high)
{
	lm_param_int_range(prov, "port_low_range", 1, 65535, low);
	lm_param_int_range(prov, "port_high_range", 1, 65535, high);
	if (*low && *high < *low)
		*high = 65535;
}

/* ---- getinfo ---------------------------------------------------------------------- */

int lm_inet_set_addr(void **dst, size_t *dstlen, const union lm_inet_addr *a, bool str)
{
	char text[80];
	size_t len = sizeof(text);
	void *p;

	if (str && lm_inet_to_str(a, text, &len))
		return -FI_EINVAL;
	if (!str)
		len = lm_inet_len(a->sa.sa_family);
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
                     union lm_inet_addr *out)
{
	int ret = str ? lm_inet_parse(addr, NULL, *family, out)
	              : lm_inet_load(out, addr, len, *family);

	if (ret)
		return -FI_ENODATA;
	*family = out->sa.sa_family;
	return 0;
}

int lm_inet_query_parse(struct lm_inet_query *q, const char *node, const char *service,
                        uint64_t flags, const struct fi_info *hints)
{
	uint32_t fmt = hints ? hints->addr_format : FI_FORMAT_UNSPEC;

	*q = (struct lm_inet_query){.str = fmt == FI_ADDR_STR, .family = AF_UNSPEC};
	if (fmt == FI_SOCKADDR_IN)
		q->family = AF_INET;
	else if (fmt == FI_SOCKADDR_IN6)
		q->family = AF_INET6;
	else if (fmt && fmt != FI_SOCKADDR && !q->str)
		return -FI_ENODATA;
	if (node || service) {
		union lm_inet_addr *a = flags & FI_SOURCE ? &q->src : &q->dest;

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

uint32_t lm_inet_format(const struct lm_inet_query *q, const struct lm_iface *f)
{
	return q->str                            ? FI_ADDR_STR
	       : f->addr.sa.sa_family == AF_INET ? FI_SOCKADDR_IN
	                                         : FI_SOCKADDR_IN6;
}

int lm_inet_info_addrs(struct fi_info *list, const struct lm_inet_query *q,
                       const struct lm_iface *f)
{
	union lm_inet_addr mine = f->addr;
	int ret = 0;

	if (q->have_src)
		mine.in.sin_port = q->src.in.sin_port; /* same place in both */
	for (struct fi_info *cur = list; cur; cur = cur->next) {
		cur->addr_format = lm_inet_format(q, f);
		ret = lm_inet_set_addr(&cur->src_addr, &cur->src_addrlen, &mine, q->str);
		if (!ret && q->have_dest)
			ret = lm_inet_set_addr(&cur->dest_addr, &cur->dest_addrlen,
			                       &q->dest, q->str);
		if (ret)
			return ret;
	}
	return 0;
}

int lm_inet_getinfo(const struct fi_provider *prov, uint32_t version, const char *node,
                    const char *service, uint64_t flags, const struct fi_info *hints,
                    int (*iface_infos)(uint32_t version, const struct fi_info *hints,
                                       const struct lm_inet_query *q, struct lm_iface *f,
                                       struct fi_info **got),
                    struct fi_info **info)
{
	struct lm_iface ifs[LM_MAX_IFACES];
	struct fi_info *list = NULL, **tail = &list;
	struct lm_inet_query q;
	int n, ret;

	ret = lm_inet_query_parse(&q, node, service, flags, hints);
	if (ret)
		return ret;
	n = lm_ifaces_list(prov, ifs, LM_MAX_IFACES, q.family);
	for (int i = 0; i < n; i++) {
		struct fi_info *got;

		if (q.have_src && !lm_iface_picks(&q.src, &ifs[i]))
			continue;
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

bool lm_iface_of_addr(const union lm_inet_addr *a, char name[IF_NAMESIZE])
{
	struct ifaddrs *all, *ifa;
	bool found = false;

	if (getifaddrs(&all))
		return false;
	for (ifa = all; ifa && !found; ifa = ifa->ifa_next) {
		union lm_inet_addr x;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != a->sa.sa_family ||
		    lm_inet_load(&x, ifa->ifa_addr, lm_inet_len(a->sa.sa_family), AF_UNSPEC))
			continue;
		found = a->sa.sa_family == AF_INET
		            ? x.in.sin_addr.s_addr == a->in.sin_addr.s_addr
		            : !memcmp(&x.in6.sin6_addr, &a->in6.sin6_addr,
		                      sizeof(x.in6.sin6_addr));
		if (found)
			snprintf(name, IF_NAMESIZE, "%s", ifa->ifa_name);
	}
	freeifaddrs(all);
	return found;
}
