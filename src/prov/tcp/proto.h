/* proto.h - the tcp link's wire format (TCP_PROTO_VERSION, now 4): the
 * handshake that opens every connection and the frame in front of every
 * packet after it.
 *
 * Connection setup (C = connecting side, A = accepting side):
 *
 *   C -HELLO(kind RDM, C's listening address, C's instance, offer)-> A
 *   A -ACK(A's listening address, A's instance, offer)-> C  connection up
 *   A -NACK(status)-> C, close        refused: version, a duplicate, ...
 *   C -CONFIRM frame-> A              when both offered: C took A's offer
 *
 * An offer is offer_len (at most TCP_OFFER_MAX) bytes that follow the
 * HELLO or ACK: what the link above the tcp link tells its peers (a tcp
 * RDM endpoint's shared-memory address, docs/providers/tcp.md); 0 for
 * none.  The CONFIRM frame (flags TCP_FRAME_CONFIRM, len 0, hdr_len 0) is
 * the first the connecting side sends when both sides offered: before it
 * the accepting side may not send through what the offer named.
 *
 * A connection carries data only after the handshake, so a peer that is
 * not loom (wrong magic) or speaks another version is refused before a
 * byte of it is taken as a packet.  Two endpoints that connect to each
 * other at once keep the connection opened by the one with the lower
 * address (bytes compared) and refuse the other with NACK(DUP); nothing
 * was sent on it.  instance is drawn at random per endpoint: a HELLO from
 * a known address with another instance is a restarted peer.
 *
 * After the handshake every packet is:
 *
 *   +-----------+---------+-------+----------------+-----------------+
 *   | len (u32) | hdr_len | flags | engine header  | payload         |
 *   |           | (u16)   | (u16) | (hdr_len B)    | (len B)         |
 *   +-----------+---------+-------+----------------+-----------------+
 *
 * hdr_len must equal the engine's header size and len be at most the
 * link's max_payload; anything else closes the connection with an error
 * (the peer is broken or hostile).  The exceptions carry no packet: RCVD
 * (below), and a frame with flags TCP_FRAME_ACK_NOW, len 0 and hdr_len 0,
 * and nothing after it: a request to acknowledge what came at once.  A sender whose
 * send waits for its acknowledgement (it completes only then) sends one
 * when the receiver's kernel delays it: that kernel acknowledges a lone
 * small segment only after some 40 ms when its side of the connection
 * has been answering (delayed ACK), unless its process asks
 * (TCP_QUICKACK).  Fields are in the sender's byte order
 * (loom links join hosts of one architecture; the magic tells). */
#ifndef LOOM_TCP_PROTO_H
#define LOOM_TCP_PROTO_H

#include <stdint.h>

/* First word of every handshake and CM message: tells a loom peer from
 * anything else that connects (and, read in another byte order, a host
 * of another architecture). */
#define TCP_MAGIC         0x005043544d4f4f4cULL /* "LOOMTCP" little-endian */
/* The handshake's version (also fi_info's protocol_version).  A peer of
 * another version is refused (NACK_VERSION), so any change to this file's
 * formats, or one the engine's packets inside them need honoured from
 * the first packet on, takes a new number. */
#define TCP_PROTO_VERSION 4

/* Wire values of tcp_hello.kind. */
enum tcp_hello_kind {
	TCP_HELLO_RDM = 1, /* an RDM endpoint's on-demand connection */
	TCP_HELLO_ACK = 2,
	TCP_HELLO_NACK = 3,
};

/* Wire values of a NACK's status. */
enum tcp_nack {
	TCP_NACK_VERSION = 1, /* the version field is not ours */
	TCP_NACK_DUP = 2,     /* the other connection between us wins */
	TCP_NACK_KIND = 3,    /* this endpoint does not take that kind */
};

/* The handshake's address field: the larger of the two families' sockaddrs. */
#define TCP_ADDR_MAX 28 /* a sockaddr_in6 */

/* Connected (FI_EP_MSG) endpoints open their connection with connection
 * management messages instead of the RDM handshake:
 *
 *   C -CM_REQ(data)-> A        A's application sees FI_CONNREQ
 *   A -CM_ACCEPT(data)-> C     fi_accept: both see FI_CONNECTED; frames follow
 *   A -CM_REJECT(data)-> C     fi_reject: C sees FI_ECONNREFUSED, A closes
 *
 * data is the application's connection data, at most TCP_CM_DATA_MAX
 * bytes.  Each message is read exactly (header, then data_len bytes), so
 * frames that follow an accept are never taken for connection data.
 * TCP_CM_DATA_MAX is what libfabric's own tcp provider takes, so the
 * connection data of programs written for it fits. */
#define TCP_CM_DATA_MAX 256

/* Wire values of tcp_cm_msg.kind: apart from the HELLO kinds, so that a
 * message of one handshake never passes for the other's. */
enum tcp_cm_kind {
	TCP_CM_REQ = 16,
	TCP_CM_ACCEPT = 17,
	TCP_CM_REJECT = 18,
};

struct tcp_cm_msg {
	uint64_t magic;
	uint32_t version;
	uint32_t kind;
	uint32_t data_len;
	uint32_t pad;
};

_Static_assert(sizeof(struct tcp_cm_msg) == 24, "cm message header is 24 bytes");

struct tcp_hello {
	uint64_t magic;
	uint32_t version;
	uint32_t kind;
	uint64_t instance;
	uint32_t addrlen;
	uint32_t status; /* NACK: enum tcp_nack */
	uint8_t addr[TCP_ADDR_MAX];
	uint32_t offer_len; /* bytes of offer after the message */
};

/* The longest offer behind a HELLO or ACK. */
#define TCP_OFFER_MAX 128

_Static_assert(sizeof(struct tcp_hello) == 64, "handshake is 64 bytes");

struct tcp_frame {
	uint32_t len;
	uint16_t hdr_len;
	uint16_t flags;
};

_Static_assert(sizeof(struct tcp_frame) == 8, "frame header is 8 bytes");
/* Wire values of tcp_frame.flags: 0 for a packet, else one of these. */
#define TCP_FRAME_ACK_NOW 1
/* RCVD: len 8, hdr_len 0, then 8 bytes: how many bytes of the stream after
 * the handshake the sender of this frame has read from us.  They are safe
 * in its process: a send whose packet ends there is complete without
 * asking the kernel about acknowledgements.  It rides in front of a
 * packet when there is news. */
#define TCP_FRAME_RCVD 2
/* CONFIRM: len 0, hdr_len 0 (the handshake above). */
#define TCP_FRAME_CONFIRM 3
struct tcp_rcvd {
	struct tcp_frame f;
	uint64_t bytes;
};
_Static_assert(sizeof(struct tcp_rcvd) == 16, "RCVD frame is 16 bytes");

/* The most payload one frame carries (the link's max_payload): rendezvous
 * data goes in pieces of this size.  Large, so a stream costs few frames
 * and system calls; the receiver's input buffer holds one whole frame for
 * the copying path. */
#define TCP_MAX_PAYLOAD (192 * 1024)

#endif
