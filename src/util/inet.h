/* inet.h - what the IP providers (tcp, udp) share: IPv4 and IPv6 addresses
 * in their binary and text forms, the host's interface addresses, and
 * fi_getinfo's answers over them, one interface address at a time. */
#ifndef LOOM_UTIL_INET_H
#define LOOM_UTIL_INET_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

/* ---- addresses -------------------------------------------------------------
 * An IPv4 or IPv6 address and port as the providers keep it: bytes the
 * family does not use (sin_zero, the IPv6 flow label, the union's tail) are
 * zero, so equal addresses are equal bytes over the whole union. */
union lm_inet_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* Bytes of a sockaddr of the family (AF_INET or AF_INET6). */
socklen_t lm_inet_len(int family);
/* len bytes of a sockaddr into *out, normalized: AF_INET with len at least
 * sizeof(struct sockaddr_in), AF_INET6 with at least sizeof(struct
 * sockaddr_in6), and only that family when family is not AF_UNSPEC.
 * -FI_EINVAL otherwise. */
int lm_inet_load(union lm_inet_addr *out, const void *addr, size_t len, int family);
/* A socket's own (peer false) or its peer's address, normalized. */
int lm_inet_of_fd(int fd, bool peer, union lm_inet_addr *out);
/* "fi_sockaddr_in://a.b.c.d:port", "fi_sockaddr_in6://[a:b::c]:port", a
 * host name with service, or a numeric address with or without one, of
 * the family (AF_UNSPEC: either, IPv4 first). */
int lm_inet_parse(const char *node, const char *service, int family,
                  union lm_inet_addr *out);
/* The address ops of a provider's IPv4 and IPv6 links: text to a
 * sockaddr_in / sockaddr_in6, and either to text. */
int lm_inet4_from_str(const char *node, const char *service, void *addr);
int lm_inet6_from_str(const char *node, const char *service, void *addr);
int lm_inet_to_str(const void *addr, char *buf, size_t *len);
/* The links' AV check: -FI_EADDRNOTAVAIL unless addr is a sockaddr_in /
 * sockaddr_in6 of the link's family, with a port, and in normal form. */
int lm_inet4_check(const void *addr);
int lm_inet6_check(const void *addr);
/* The links' addr_lane: lane delta of an endpoint at addr is the same host,
 * the port delta on; -FI_EINVAL when that is no port. */
int lm_inet_lane(const void *addr, int delta, void *out);

/* The address family of an info's endpoints: its source address's (or
 * its destination's), else its format's; AF_INET when nothing says. */
int lm_inet_info_family(const struct fi_info *info);

/* ---- interfaces ------------------------------------------------------------ */

/* Interface addresses fi_getinfo answers for, at most: more than hosts
 * have up in practice, and a fixed array while they are gathered. */
#define LM_MAX_IFACES 16

/* One usable interface address: a provider's domain (name) on a fabric
 * (the subnet). */
struct lm_iface {
	char name[IF_NAMESIZE];
	char fabric[64];         /* the subnet, a.b.c.d/len or a:b::/len */
	union lm_inet_addr addr; /* port 0 */
	bool loopback;
};

/* Usable interface addresses of the family (AF_UNSPEC: both), at most max
 * into out, only those of the interface prov's "iface" parameter names
 * (FI_<PROV>_IFACE) if set: others first, then loopback; IPv4 before IPv6
 * in each.  How many. */
int lm_ifaces_list(const struct fi_provider *prov, struct lm_iface *out, int max,
                   int family);
/* Does a source address pick this interface?  The unspecified address
 * (0.0.0.0, ::) picks any of its family. */
bool lm_iface_picks(const union lm_inet_addr *src, const struct lm_iface *f);
/* Is there a usable interface (lm_ifaces_list) on the fabric (subnet)
 * named fabric, and named domain?  NULL names match any: fi_fabric and
 * fi_domain open only what fi_getinfo could have offered. */
bool lm_iface_named(const struct fi_provider *prov, const char *fabric,
                    const char *domain);
/* An IP provider's fi_fabric: the fabric named must be the subnet of a
 * usable interface (or none named). */
int lm_inet_fabric_open(const struct fi_provider *prov, const struct fi_ops_fabric *ops,
                        struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                        void *context);
/* The parameters every IP provider takes, FI_<PROV>_IFACE,
 * _PORT_LOW_RANGE and _PORT_HIGH_RANGE: defined, and the port range read
 * (0: any port; a high end below the low one means up to 65535). */
void lm_inet_params_define(struct fi_provider *prov);
void lm_inet_ports_read(struct fi_provider *prov, int *low, int *high);

/* The name of the interface that holds address a (its port ignored):
 * true and name filled, or false when none does. */
bool lm_iface_of_addr(const union lm_inet_addr *a, char name[IF_NAMESIZE]);

/* ---- getinfo ---------------------------------------------------------------- */

/* What a getinfo call asks for: the addresses it names, and the format and
 * the family they fix. */
struct lm_inet_query {
	union lm_inet_addr src, dest;
	bool have_src, have_dest;
	bool str;   /* FI_ADDR_STR: addresses as text */
	int family; /* AF_UNSPEC: either */
};

/* Read node, service, flags and hints into q: -FI_ENODATA when they ask
 * for what an IP provider does not serve or name an address it cannot
 * resolve. */
int lm_inet_query_parse(struct lm_inet_query *q, const char *node, const char *service,
                        uint64_t flags, const struct fi_info *hints);
/* An address in the info's format: the sockaddr itself, or its text (str),
 * into a new *dst of *dstlen bytes (the old one freed). */
int lm_inet_set_addr(void **dst, size_t *dstlen, const union lm_inet_addr *a, bool str);
/* The address format of q's answers on interface f: FI_ADDR_STR when q
 * asks for text, else the interface's family's sockaddr. */
uint32_t lm_inet_format(const struct lm_inet_query *q, const struct lm_iface *f);
/* Give every info of list q's addresses on f: its format (lm_inet_format),
 * f's address with q's source port as src_addr, q's destination, if any, as
 * dest_addr.  0, or a negative FI_E* code (list is still the caller's). */
int lm_inet_info_addrs(struct fi_info *list, const struct lm_inet_query *q,
                       const struct lm_iface *f);
/* A provider's fi_getinfo: parse the query, then ask iface_infos what each
 * usable interface the query's source address picks offers for it (its
 * infos that match hints, with their addresses set, in *got, NULL when
 * none; an error ends the call), and chain the answers in interface order.
 * -FI_ENODATA when there are none. */
int lm_inet_getinfo(const struct fi_provider *prov, uint32_t version, const char *node,
                    const char *service, uint64_t flags, const struct fi_info *hints,
                    int (*iface_infos)(uint32_t version, const struct fi_info *hints,
                                       const struct lm_inet_query *q, struct lm_iface *f,
                                       struct fi_info **got),
                    struct fi_info **info);

#endif
