/* link.h - what the RDM engine needs from a transport ("link"): move one
 * packet (engine header + payload) to a peer, hand incoming packets to the
 * engine, a pollable doorbell for sleeping, and optionally copy straight
 * from a peer's memory.  shm, tcp and udp each supply one ops table. */
#ifndef LOOM_RDM_LINK_H
#define LOOM_RDM_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct lm_link;
struct lm_link_peer; /* the link's handle on one remote endpoint */

/* The most bytes a link's binary address has (lm_link_ops.addrlen). */
#define LM_LINK_ADDR_MAX 64

/* Called by poll() for every packet, in arrival order per sender.
 * src_addr is the sender's endpoint address (addrlen bytes, what its
 * getname reports), hdr the fixed-size engine header (hdr_size bytes),
 * payload its payload.  All three are valid only during the call. */
typedef void (*lm_link_recv_fn)(void *arg, const void *src_addr, const void *hdr,
                                const void *payload, size_t payload_len);

/* Optional, for links that read payloads from a byte stream: where the
 * plen payload bytes of the packet with header hdr should go (at most
 * LM_IOV_LIMIT pieces in iov, exactly plen bytes), or 0 to have them
 * delivered through recv as usual.  After the link has read the whole
 * payload there, it calls placed instead of recv.  Between the two the
 * link delivers nothing else of the same sender. */
typedef size_t (*lm_link_place_fn)(void *arg, const void *src_addr, const void *hdr,
                                   size_t plen, struct iovec *iov);
typedef void (*lm_link_placed_fn)(void *arg, const void *src_addr, const void *hdr,
                                  size_t plen);
/* Optional, for links that check a payload after placing it (a
 * datagram's sum): what place gave for the packet with header hdr did
 * not arrive intact, and nothing of it is delivered; the same packet
 * comes again, next of its sender, placed or through recv. */
typedef void (*lm_link_unplaced_fn)(void *arg, const void *src_addr, const void *hdr,
                                    size_t plen);

/* The most bytes of an offer (lm_link_attr.offer). */
#define LM_LINK_OFFER_MAX 128

/* Stages of a handshake a link reports through lm_link_attr.met. */
enum lm_link_met {
	LM_MET_HELLO = 1, /* the peer connected and offered (we answer next) */
	LM_MET_ANSWER,    /* the peer answered our connection with its offer */
	LM_MET_CONFIRM,   /* the peer took our answer's offer (after MET_HELLO) */
};

/* What the engine tells a link when opening it. */
struct lm_link_attr {
	size_t hdr_size; /* every packet starts with this many header bytes */
	lm_link_recv_fn recv;
	void *arg;
	lm_link_place_fn place;
	lm_link_placed_fn placed;
	lm_link_unplaced_fn unplaced;
	/* Optional: the link lost its connection to the peer at src_addr, and
	 * with it whatever was in flight.  Called from inside the link's own
	 * calls, so the engine only takes note (nothing is sent or completed
	 * from it). */
	void (*lost)(void *arg, const void *src_addr);
	/* Queue depths the application asked for (tx_attr/rx_attr size). */
	size_t tx_size, rx_size;
	bool no_bulk; /* never offer bulk (CMA) transfers */
	/* A connected (FI_EP_MSG) endpoint: the link takes no connections of
	 * its own; its one peer comes from the provider's connection
	 * management. */
	bool connected;
	/* The name given to open came with the endpoint's fi_info (its
	 * src_addr), not from fi_setname: a link that finds it held by
	 * another endpoint of this process may take a fresh address. */
	bool name_hint;
	/* Optional, for a link under another (a link of two, duo.c): bytes
	 * the link carries to every peer it meets in its handshake, and
	 * met, called from inside the link's calls at each stage of a
	 * handshake with the peer at src_addr, with the bytes that peer
	 * offered (len 0: none).  A link that reports MET_ANSWER with an
	 * offer to a side that offered too confirms it (MET_CONFIRM there),
	 * after whatever it sent before. */
	const void *offer;
	size_t offer_len;
	void (*met)(void *arg, const void *src_addr, const void *offer, size_t len,
	            enum lm_link_met stage);
	void *met_arg; /* met's first argument (the others get arg) */
	/* Polled seldom (by a link of two while its other link is busy):
	 * every poll looks for everything, new connections too. */
	bool sparse_poll;
};

/* One packet of a batch (lm_link_ops.send_many).  lent_by, when not
 * NULL: the payload is lent by that owner (the engine's request), and
 * stays in place and unchanged until the packet is delivered (delivered
 * turns true for a mark past it) or the engine calls unlend for the peer
 * and that owner, so a link with unlend may send it from there, again
 * too, where it would copy it; others copy it anyway. */
struct lm_link_pkt {
	const void *hdr;
	const struct iovec *iov;
	size_t iov_count;
	const void *lent_by;
};

/* Capabilities a link reports after open. */
#define LM_LINK_BULK_READ  (1u << 0) /* bulk_read copies from peer memory */
#define LM_LINK_BULK_WRITE (1u << 1) /* bulk_write copies into peer memory */
/* A byte-stream link that places large payloads: an RTS may carry the
 * message's first piece, and a reply may go eager up to max_payload. */
#define LM_LINK_EARLY      (1u << 2)
/* A peer's death or a lost connection makes fd readable while armed: a
 * sleeper needs no timer to notice it. */
#define LM_LINK_TELLS_LOSS (1u << 3)
/* The peer's acknowledgement of taken packets (delivered turning true)
 * makes fd readable while armed: a sleeper with held sends needs no
 * timer. */
#define LM_LINK_TELLS_DELIVERY (1u << 4)

/* The common head of every link instance (one per endpoint); the link's
 * own state follows it. */
struct lm_link {
	const struct lm_link_ops *ops;
	int fd;             /* readable when armed and a packet waits; -1: none */
	size_t max_payload; /* most payload bytes one packet carries */
	size_t inline_max;  /* payloads up to this go in the cheapest form */
	unsigned caps;      /* LM_LINK_* */
	const void *addr;   /* own address, addrlen bytes */
};

struct lm_link_ops {
	const char *name;
	size_t addrlen; /* binary address size */
	/* FI_ADDR_STR text (or node + service) <-> binary address. */
	int (*addr_from_str)(const char *node, const char *service, void *addr);
	size_t addr_str_max; /* longest FI_ADDR_STR text, NUL included (lm_av_addr_ops) */
	int (*addr_to_str)(const void *addr, char *buf, size_t *len);
	/* Optional: can these addrlen bytes name a peer (lm_av_addr_ops)? */
	int (*addr_check)(const void *addr);
	/* Optional: in out, the address delta lanes from addr.  A scalable
	 * endpoint's lanes (its context pairs, each an endpoint of its own)
	 * take consecutive addresses, so that a peer finds lane k from the
	 * first's; -FI_EINVAL where there is no such address.  Without it a
	 * scalable endpoint has one lane. */
	int (*addr_lane)(const void *addr, int delta, void *out);

	/* name: the address to take (fi_setname, info->src_addr) or NULL for
	 * a fresh one.  ctx: the provider's per-domain link state. */
	int (*open)(void *ctx, const struct lm_link_attr *attr, const void *name,
	            struct lm_link **link);
	void (*close)(struct lm_link *link);

	/* Peers are resolved once (on first use of an AV entry, or when a
	 * packet arrives from an unknown sender) and kept by the engine. */
	int (*peer_open)(struct lm_link *link, const void *addr,
	                 struct lm_link_peer **peer);
	void (*peer_close)(struct lm_link *link, struct lm_link_peer *peer);
	/* Optional: start the handshake with peer, sending nothing (met
	 * reports it).  0 once started, 1 when a connection made before is
	 * up (met reported it then), an error when the peer cannot be
	 * reached. */
	int (*peer_connect)(struct lm_link *link, struct lm_link_peer *peer);

	/* Queue hdr (hdr_size bytes) and the gathered payload (at most
	 * max_payload bytes) to peer.  0 once the packet is in the peer's
	 * hands (the buffers may be reused); -FI_EAGAIN when the peer's queue
	 * is full; -FI_EIO (or another error) when the peer is gone. */
	ssize_t (*send)(struct lm_link *link, struct lm_link_peer *peer, const void *hdr,
	                const struct iovec *iov, size_t iov_count);
	/* Optional, for the small messages whose latency matters: as send,
	 * with the header given as words: bit i of mask says its 8-byte
	 * word i is the next of words[] (in increasing i), and the words
	 * mask leaves out are zero.  One payload piece (the engine uses it
	 * for payloads up to inline_max). */
	ssize_t (*send_words)(struct lm_link *link, struct lm_link_peer *peer,
	                      const uint64_t *words, unsigned mask, const void *payload,
	                      size_t len);
	/* Optional: the packets of pkts, in order, as send would take them
	 * one by one, but in one go (a stream's pieces: a byte-stream link
	 * writes them with one system call, which streams much faster than
	 * one call per piece).  Returns how many were taken (fewer than count
	 * when the peer's queue filled), -FI_EAGAIN when none was, or an
	 * error as send. */
	ssize_t (*send_many)(struct lm_link *link, struct lm_link_peer *peer,
	                     const struct lm_link_pkt *pkts, size_t count);
	/* Optional, for a link whose taken packets may still die with this
	 * process: part of a packet kept in the process's own buffers, or
	 * bytes the kernel holds unsent, which it drops when the process
	 * dies with unread input (a TCP reset).  mark: where the packets
	 * taken so far for peer end, 0 when none can be lost so; delivered:
	 * whether everything up to such a mark is past that point.  look
	 * lets it ask the kernel (a system call); without it the answer
	 * comes from what the link knows.  What completes once its packet
	 * is out waits for that.  A link whose taken packets are out at
	 * once leaves both NULL. */
	uint64_t (*mark)(struct lm_link *link, struct lm_link_peer *peer);
	/* Optional, with lent packets (lm_link_pkt): the link copies what it
	 * still needs of the payloads lent_by lent in peer's packets into its
	 * own buffers; the engine calls it before that memory is given back. */
	void (*unlend)(struct lm_link *link, struct lm_link_peer *peer, const void *lent_by);
	bool (*delivered)(struct lm_link *link, struct lm_link_peer *peer, uint64_t mark,
	                  bool look);

	/* Deliver up to budget packets through attr->recv; returns how many. */
	int (*poll)(struct lm_link *link, int budget);
	/* Optional: true when poll would find nothing.  Called without the
	 * engine's lock, concurrently with poll: a hint that may be stale
	 * (work it misses is found by the next call), never a data race. */
	bool (*idle)(struct lm_link *link);

	/* Sleeping: after arm(), a packet arriving makes link->fd readable
	 * (senders kick only armed receivers, so the fast path stays free of
	 * syscalls); disarm() stops that and drains the fd. */
	void (*arm)(struct lm_link *link);
	void (*disarm)(struct lm_link *link);

	/* Optional: while armed, make fd readable after ms milliseconds even
	 * if no packet comes, for an engine that must look again by itself
	 * (room freed in a full peer, a peer that died).  Cleared by disarm. */
	void (*wake_after)(struct lm_link *link, int ms);
	/* Optional: the engine is about to sleep with packets for peer held
	 * back because send answered -FI_EAGAIN.  0: fd becomes readable
	 * (while armed) when the peer has room again; -FI_EAGAIN: it has
	 * room now; another error: it cannot tell (the engine looks again on
	 * a short timer). */
	int (*want_room)(struct lm_link *link, struct lm_link_peer *peer);

	/* Optional (NULL or -FI_ENOSYS): copy remote[] of the peer's memory
	 * into local[].  Returns bytes copied or a negative error; an error
	 * other than -FI_EIO means "use packets instead". */
	ssize_t (*bulk_read)(struct lm_link *link, struct lm_link_peer *peer,
	                     const struct iovec *local, size_t local_count,
	                     const struct iovec *remote, size_t remote_count);

	/* Optional, as bulk_read: copy local[] into remote[] of the peer's
	 * memory (RMA reads answered by the target). */
	ssize_t (*bulk_write)(struct lm_link *link, struct lm_link_peer *peer,
	                      const struct iovec *local, size_t local_count,
	                      const struct iovec *remote, size_t remote_count);

	/* Optional, for a link whose peers differ (a link of two): the caps
	 * (LM_LINK_*) that hold for packets to peer now; without it, every
	 * peer has the link's. */
	unsigned (*peer_caps)(struct lm_link *link, struct lm_link_peer *peer);

	/* false once the peer is known to be gone (for good, or until
	 * peer_reset). */
	bool (*peer_alive)(struct lm_link *link, struct lm_link_peer *peer);

	/* Optional: the engine has failed everything outstanding with a peer
	 * the link reported gone; the next send may try it afresh (a peer
	 * restarted at the same address).  Without it, gone is forever. */
	void (*peer_reset)(struct lm_link *link, struct lm_link_peer *peer);
};

#endif
