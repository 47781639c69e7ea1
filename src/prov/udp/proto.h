/* proto.h - the udp link's wire format (UDP_PROTO_VERSION, now 5): the
 * header in front of every datagram, which makes a stream of reliable,
 * ordered packets per pair of endpoints out of UDP's datagrams.
 *
 *   +------------------+----------------------+-------------------+
 *   | udp_wire (64 B)  | engine header        | payload           |
 *   |                  | (hdr_len B, DATA)    | (len B, DATA)     |
 *   +------------------+----------------------+-------------------+
 *
 * or, for a small DATA packet, the short form (udp_short, below).
 *
 * Every datagram carries the sender's incarnation (src_inc, drawn at
 * random when its endpoint opens) and the incarnation it knows of the
 * receiver (dst_inc, 0 before it heard from it).  A datagram meant for
 * another incarnation of the receiver (dst_inc neither 0 nor its own) is
 * a stray of a process that had this address before: dropped, and
 * answered by an ACK that names the receiver's incarnation, so that its
 * sender learns at once that the peer it knew is gone.
 *
 * DATA packets of one sender to one receiver are numbered from 1 (seq)
 * within an epoch: a sender that gave up on a peer (it died, or stayed
 * silent past the liveness time) starts a new epoch at 1.  A receiver
 * hands the engine the packets of the newest (src_inc, epoch) it has seen
 * in seq order, each once; an older pair's packets are dropped.
 *
 * Every datagram acknowledges the other direction: ack is the next seq
 * the sender of the datagram expects of ack_epoch's stream (all below
 * arrived), and bit i of sack says packet ack + 1 + i arrived too.  A
 * sender keeps each DATA packet until it is acknowledged and sends it
 * again when its timeout passes, or at once when three later packets
 * were acknowledged before it (fast retransmit).
 *
 * MEET packets are a handshake in the same numbered stream as DATA (so
 * sent again until acknowledged, and in order with it), taken by the
 * link itself: HELLO carries the sender's offer (the shared-memory
 * address and host identity of an endpoint that reaches same-host peers
 * through shared memory, FI_UDP_ENABLE_SHM), the receiver answers every
 * HELLO with REPLY and its own offer (empty when it makes none), and a
 * side that offered and got an offer back sends CONFIRM.  Each side
 * sends through shared memory only once the other holds its offer.
 *
 * Two CRC-32C checks: body, of the payload (DATA) or offer (MEET), and
 * check, of the wire header with check zero, then of the engine header.
 * A kept packet's body is summed once, its headers again at each send
 * (the acknowledgement in them changes).  A receiver may trust the
 * headers before it reads the payload: it reads the payload of the next
 * packet in order straight into the receive buffer it belongs to, and
 * sums it there.  The kernel's UDP checksum covers the wire, not a relay
 * that rewrites it.  Fields are in
 * the sender's byte order (loom links join hosts of one architecture;
 * the magic tells). */
#ifndef LOOM_UDP_PROTO_H
#define LOOM_UDP_PROTO_H

#include <stdint.h>

#define UDP_MAGIC         0x4c55 /* "UL" little-endian */
/* The format's version (also fi_info's protocol_version): a datagram of
 * another is dropped. */
#define UDP_PROTO_VERSION 5

/* Wire values of udp_wire.type. */
enum {
	UDP_T_DATA = 1, /* an engine packet: header and payload follow */
	UDP_T_ACK = 2,  /* acknowledgement only: nothing follows */
	UDP_T_MEET = 3, /* a handshake step (flags), numbered as DATA: an offer follows */
	UDP_T_SHORT = 4, /* a small DATA packet in short form (udp_short) */
};

/* udp_wire.flags on ACKs (0 on DATA): PROBE asks for an ACK back at
 * once, which carries ANSWER.  A sender probes a peer it waits on and
 * heard nothing from for a while; a closing endpoint probes the peers it
 * took packets from, so that it knows its last acknowledgement got
 * there before its port closes (their unacknowledged packets would
 * otherwise fail on the closed port, though they arrived). */
#define UDP_F_PROBE  1
#define UDP_F_ANSWER 2
/* With PROBE, from a closing endpoint: after the answer, the receiver
 * takes it for gone (what it still had to send there fails at once), and
 * meets whoever opens at the address next as a stranger. */
#define UDP_F_BYE 32
/* udp_wire.flags on MEET: exactly one of these, the step.  hdr_len is 0
 * and len the offer's bytes, at most UDP_MEET_MAX (CONFIRM: 0). */
#define UDP_F_HELLO   4
#define UDP_F_REPLY   8
#define UDP_F_CONFIRM 16
#define UDP_MEET_MAX  128

struct udp_wire {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint8_t flags;   /* UDP_F_* */
	uint8_t hdr_len; /* DATA: the engine header's size; ACK, MEET: 0 */
	uint16_t len;    /* DATA: payload bytes after the engine header; MEET: offer's */
	uint32_t body;   /* CRC-32C of those len bytes (0 for none) */
	uint32_t check;  /* CRC-32C of this header with check 0, then of the engine header */
	uint64_t src_inc;
	uint64_t dst_inc;
	uint32_t epoch;     /* DATA, MEET: the sender's epoch toward the receiver */
	uint32_t ack_epoch; /* the receiver's epoch that ack and sack are of */
	uint64_t seq;       /* DATA, MEET: from 1 */
	uint64_t ack;       /* 0: nothing of ack_epoch received yet */
	uint64_t sack;
};

_Static_assert(sizeof(struct udp_wire) == 64, "udp wire header is 64 bytes");

/* A small DATA packet's short form, for a pair that has heard from each
 * other: what the long form says of incarnations and epochs both sides
 * know already, so it carries their 32-bit digest (pair, udp_pair_tag of
 * the sender's incarnation, the receiver's, the sender's epoch toward the
 * receiver, and the receiver's epoch toward the sender, which its ack is
 * of).  seq and ack are the low 32 bits of the long form's: the receiver
 * takes the values nearest what it expects (a window is far shorter than
 * 2^31).  Then the sack word if flags has UDP_S_SACK, then the engine
 * header's non-zero 8-byte words (bit i of words: word i; the others are
 * zero), then len bytes of payload.  check is the CRC-32C of the whole
 * datagram with check 0.
 *
 * A sender uses it for a packet's first send when the payload is at most
 * UDP_SHORT_MAX bytes and it has taken packets of the peer's current
 * epoch; a packet sent again goes in the long form.  A receiver takes a
 * short packet from a peer whose pair tag it matches, as the long form
 * it stands for, and drops any other (as lost: the long form follows).
 * A 64-byte message so fits a 128-byte datagram, which the kernel moves
 * faster than a larger one. */
#define UDP_SHORT_MAX 256
#define UDP_S_SACK    1

struct udp_short {
	uint16_t magic;
	uint8_t version;
	uint8_t type;    /* UDP_T_SHORT */
	uint8_t words;   /* the engine header's words present */
	uint8_t flags;   /* UDP_S_* */
	uint16_t len;    /* payload bytes */
	uint32_t check;  /* CRC-32C of the datagram with check 0 */
	uint32_t pair;   /* udp_pair_tag */
	uint32_t seq;    /* low 32 bits */
	uint32_t ack;    /* low 32 bits; the sender has taken packets of ours */
};

_Static_assert(sizeof(struct udp_short) == 24, "udp short header is 24 bytes");

/* The pair digest of a short packet from an endpoint of incarnation src
 * (epoch toward the receiver: epoch) to one of incarnation dst (epoch
 * toward the sender: ack_epoch). */
static inline uint32_t udp_pair_tag(uint64_t src, uint64_t dst, uint32_t epoch,
                                    uint32_t ack_epoch)
{
	uint64_t h = src * 0x9e3779b97f4a7c15ull;

	h = (h ^ (h >> 29) ^ dst) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 31) ^ ((uint64_t)epoch << 32 | ack_epoch)) * 0x94d049bb133111ebull;
	return (uint32_t)(h ^ (h >> 32));
}

/* FI_EP_DGRAM endpoints (dgram.c) carry no link: each message is one
 * datagram, this header and the payload, sent once.  A datagram whose
 * header is short, of another magic or version, or has unknown flags or
 * a non-zero `zero` is dropped.  data is remote CQ data when flags has
 * UDP_DG_DATA, else 0.  The kernel's UDP checksum is its only check:
 * DGRAM promises nothing of delivery, so a datagram a relay damaged is
 * no worse than one it dropped. */
#define UDP_DG_MAGIC   0x4c44 /* "DL" little-endian */
#define UDP_DG_VERSION 1
#define UDP_DG_DATA    0x01

struct udp_dg_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t flags; /* UDP_DG_* */
	uint32_t zero;
	uint64_t data;
};

_Static_assert(sizeof(struct udp_dg_hdr) == 16, "udp datagram header is 16 bytes");

#endif
