/* tcp.h - the tcp provider: the RDM engine over the TCP link (link.c), the
 * fi_provider (prov.c) over util's interface and address handling (inet.h).
 * Wire format: proto.h. */
#ifndef LOOM_TCP_H
#define LOOM_TCP_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "proto.h"
#include "rdm.h"

/* What a domain's links share: the provider's parameters. */
struct tcp_params {
	int port_low, port_high; /* 0: any port */
	int conn_timeout_ms;     /* a connection not up by then fails */
	int sockbuf;             /* SO_SNDBUF/SO_RCVBUF bytes; 0: the kernel's */
	bool enable_shm;         /* RDM endpoints reach same-host peers through shm */
};

/* The provider's parameters as the environment sets them now (prov.c):
 * each domain and passive endpoint reads its own when it opens. */
void tcp_params_read(struct tcp_params *params);

/* Whether a read or write of a socket that returned n (errno set when
 * negative) says the connection is gone: the peer closed it (end of
 * stream) or it broke (reset, broken pipe...), rather than "not now"
 * (EAGAIN) or a signal (EINTR, the caller tries again). */
static inline bool tcp_conn_gone(ssize_t n)
{
	return n == 0 ||
	       (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The link for IPv4 addresses (FI_SOCKADDR_IN, "fi_sockaddr_in://") and
 * the same link for IPv6 ones (FI_SOCKADDR_IN6, "fi_sockaddr_in6://"); a
 * domain uses one, by its info's address family. */
extern const struct lm_link_ops tcp_link_ops;
extern const struct lm_link_ops tcp6_link_ops;
extern struct fi_provider tcp_prov;
extern const struct fi_provider *tcp_log_prov;

struct fi_provider *tcp_prov_init(void);

/* Frame and handshake checks (link.c), apart so the fuzz target can call
 * them: 0 when the bytes are an acceptable frame header / hello for a link
 * whose engine header is hdr_size bytes and whose payloads are at most
 * max_payload bytes, else a negative FI_E* code. */
int tcp_frame_check(const struct tcp_frame *f, size_t hdr_size, size_t max_payload);
int tcp_hello_check(const struct tcp_hello *h, uint32_t want_kind);
int tcp_cm_check(const struct tcp_cm_msg *m);

/* Connected links (lm_link_attr.connected, link.c): take the socket that
 * connection management opened (blocking or not) as the one connection,
 * to peer; whether it has been lost since (EOF, error); close it
 * (fi_shutdown). */
int tcp_link_adopt(struct lm_link *link, int fd, const union lm_inet_addr *peer);
bool tcp_link_lost(struct lm_link *link);
void tcp_link_shutdown(struct lm_link *link);

/* Connection management (cm.c): passive endpoints, and the connect /
 * accept / shutdown side of FI_EP_MSG endpoints built on the engine's. */
int tcp_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
                   void *context);
int tcp_msg_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                     void *context);

#endif
