/* udp.h - the udp provider: the RDM engine over the UDP link (link.c),
 * which makes datagrams reliable and ordered per peer; DGRAM endpoints
 * of plain datagrams (dgram.c); and the fi_provider with its parameters
 * (prov.c).  Wire formats: proto.h. */
#ifndef LOOM_UDP_H
#define LOOM_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "duo.h"
#include "proto.h"
#include "rdm.h"

/* What a domain's links share: the provider's parameters. */
struct udp_params {
	int port_low, port_high; /* 0: any port */
	int mtu;                 /* largest datagram's IP packet; 0: the interface's */
	int peer_timeout_ms;     /* a peer silent this long with data unacknowledged is gone */
	int sockbuf;             /* SO_SNDBUF/SO_RCVBUF bytes; 0: the kernel's */
	bool enable_shm;         /* RDM endpoints reach same-host peers through shm */
	bool gso;                /* the kernel cuts and joins a stream's datagrams */
};

/* The provider's parameters as the environment sets them now (prov.c). */
void udp_params_read(struct udp_params *params);

/* An engine domain with the parameters its links share (their link_ctx;
 * its DGRAM endpoints use them too) and, when RDM endpoints reach
 * same-host peers through shared memory, the link of two that does it. */
struct udp_domain {
	struct lm_rdm_domain rdm; /* first: util's fi_close frees the whole */
	struct udp_params params;
	struct lm_duo duo;
};

/* What DGRAM endpoints do (prov.c offers it, dgram.c takes it). */
#define UDP_DGRAM_CAPS                                                                   \
	(FI_MSG | FI_MULTICAST | FI_SEND | FI_RECV | FI_SOURCE | FI_MULTI_RECV |        \
	 FI_LOCAL_COMM | FI_REMOTE_COMM)

/* fi_endpoint for an FI_EP_DGRAM info (dgram.c). */
int udp_dgram_open(struct udp_domain *dom, struct fi_info *info, struct fid_ep **ep,
                   void *context);

/* The largest UDP payload an endpoint at address a sends in one
 * datagram: the MTU parameter's or a's interface's, less the IP and UDP
 * headers (link.c). */
size_t udp_dgram_max(const struct udp_params *params, const union lm_inet_addr *a);
/* The largest payload an RDM link at address a puts in a packet behind
 * an engine header of hdr_size bytes (link.c). */
size_t udp_link_payload(const struct udp_params *params, const union lm_inet_addr *a,
                        size_t hdr_size);

/* The link for IPv4 addresses and the same link for IPv6 ones; a domain
 * uses one, by its info's address family. */
extern const struct lm_link_ops udp_link_ops;
extern const struct lm_link_ops udp6_link_ops;
extern struct fi_provider udp_prov;
/* What a udp link counted (for tests and the log): its sends the kernel
 * cut into several datagrams (UDP_SEGMENT), its reads that held several
 * it joined (UDP_GRO), and the payloads it read straight into place. */
struct udp_link_counts {
	uint64_t cut, joined, placed, shorts, resent;
};
void udp_link_counts(const struct lm_link *link, struct udp_link_counts *c);
extern const struct fi_provider *udp_log_prov;

struct fi_provider *udp_prov_init(void);

/* Acknowledgements a link holds for the application's next call, ready
 * to go but for their checks, which the keeper fills in if it sends them
 * (keeper.c).  The link writes ack[] and n while state is NONE. */
#define UDP_KEPT_MAX 4 /* peers a poll's hold covers; more go at once */
enum { UDP_KEPT_NONE, UDP_KEPT_HELD, UDP_KEPT_SENDING };
struct udp_kept {
	struct lm_list node; /* the keeper's, once joined */
	bool joined;
	int sock;
	_Atomic int state;
	uint64_t due_us;
	uint64_t fired; /* holds the keeper sent (the link's statistics) */
	unsigned n;
	struct {
		union lm_inet_addr to;
		struct udp_wire w;
	} ack[UDP_KEPT_MAX];
};

/* Hold k's datagrams (written) until the link's next call, or
 * UDP_KEEP_US from now, when the keeper sends them: false when there is
 * no keeper (send them now). */
bool udp_kept_hold(struct udp_kept *k, uint64_t now);
/* Take a hold back: true when it was still held (its acknowledgements
 * are the link's to send or find carried), false when nothing was or the
 * keeper sent it. */
bool udp_kept_release(struct udp_kept *k);
/* A closing link: released, and out of the keeper's sight. */
void udp_kept_leave(struct udp_kept *k);

/* The datagram check (link.c), apart so the fuzz target can call it: 0
 * when the len bytes at buf are a datagram a link whose engine header is
 * hdr_size bytes and whose payloads are at most max_payload bytes takes,
 * else a negative FI_E* code. */
int udp_wire_check(const void *buf, size_t len, size_t hdr_size, size_t max_payload);

/* CRC-32C (Castagnoli) of len bytes, carried on from crc (0 to begin). */
uint32_t udp_crc32c(uint32_t crc, const void *data, size_t len);
/* The same of len bytes at src, copied to dst on the way. */
uint32_t udp_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* Fill in the checks (udp_wire.body and check, or udp_short.check) of the
 * datagram of len bytes at buf, as its sender does: for tests and the
 * fuzz target.  Shorter than its header, it is left as it is. */
void udp_wire_seal_buf(void *buf, size_t len);

#endif
