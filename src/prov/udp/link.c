/* link.c - the RDM engine's link over UDP: one non-blocking datagram
 * socket per endpoint, and per peer a numbered stream of packets kept
 * until acknowledged, sent again on a timeout or a gap, and handed to the
 * engine in order, each once (proto.h).  A send window per peer grows and
 * shrinks with loss (AIMD); a peer that stays silent while data waits for
 * it, or whose port the kernel reports closed, is gone.
 *
 * Under a link of two (src/rdm/duo.c) the link meets each peer it sends
 * to first with a handshake in the same stream (MEET packets) that
 * carries the two sides' offers.
 *
 * The socket and two timers (retransmission, the engine's wake_after)
 * share one epoll set, the link's fd. */
#include <errno.h>
#include <stddef.h>
#include <time.h> /* before linux/errqueue.h, which uses struct timespec */
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "inet.h"
#include "sock.h"
#include "udp.h"

/* Packets in flight to one peer, at most: the width of an
 * acknowledgement's sack. */
#define UDP_WINDOW 64
/* Datagrams one recvmmsg / sendmmsg takes. */
#define UDP_BATCH 16
/* A kept packet of more than this many bytes gets a buffer of the largest
 * datagram's size, from the link's spares; acknowledged, it goes back. */
#define UDP_SLOT_SMALL 2048
/* A stream's packets go out this many a sendmmsg: fewer system calls, but
 * the first datagram waits until the batch is copied and checked, and
 * the receiver idles meanwhile.  All of a call's at once (up to 16) made
 * a 1 MiB ping-pong 1.08x slower; 4 at a time made it 0.96x and a 1 MiB
 * stream 1.08x faster than one sendto each (2 at a time: 0.95x, 1.06x). */
#define UDP_SEND_BATCH 4
/* Kernel batching (FI_UDP_GSO): the datagrams one send has the kernel cut
 * at most (older kernels' UDP_MAX_SEGMENTS), and the buffer a read of
 * datagrams the kernel joined needs. */
#define UDP_GSO_SEGS 64
#define UDP_GRO_BUF  65536
/* A DATA packet in order with this many payload bytes or more starts
 * placement: the next datagrams' headers are read first, and a payload
 * the engine places is read straight into the receive buffer. */
#define UDP_PLACE_MIN 8192
/* Datagrams read one at a time, none placed, before placement ends. */
#define UDP_PLACE_TRIES 8
/* A poll whose packets carried at most this many payload bytes holds
 * their acknowledgement for the application's next call (acks_hold). */
#define UDP_HOLD_BYTES 4096
/* Retransmission timeout bounds and start, in microseconds: above a
 * loaded host's scheduling delay, below what would stall a stream. */
#define UDP_RTO_MIN_US  10000
#define UDP_RTO_MAX_US  500000
#define UDP_RTO_INIT_US 50000
/* A peer something waits on (a transfer from it, say) and silent this
 * long is asked to answer; an answer, or an error for its closed port,
 * comes back. */
#define UDP_PROBE_MS 100
/* While the endpoint sleeps (armed), its retransmissions wait at least
 * this long: a peer that does not acknowledge is mostly one that is not
 * polling either, and a sleeper woken for nothing burns a core's time. */
#define UDP_ARMED_RTO_MS 250
/* A closing endpoint waits this long at most for the peers it took
 * packets from to answer its farewell probes, sent again this often. */
#define UDP_CLOSE_WAIT_MS  250
#define UDP_CLOSE_PROBE_MS 20
/* The send window (packets) a peer starts with, and its floor. */
#define UDP_CWND_INIT 32.0
#define UDP_CWND_MIN  2.0
/* Later packets acknowledged past a missing one before it is sent again
 * without waiting for its timeout. */
#define UDP_FAST_GAP 3
/* A port reported closed before the peer was ever heard may just not be
 * open yet: gone only when it stays so this long after our first packet. */
#define UDP_REFUSED_GRACE_MS 2000
/* Largest datagram, whatever the interface's MTU says (IPv4's limit). */
#define UDP_DGRAM_MAX 65507
/* IP and UDP headers below ours: IPv6's 40 + 8 (IPv4 needs 28). */
#define UDP_IP_OVERHEAD 48
/* The fallback MTU when the interface's cannot be read. */
#define UDP_MTU_DEFAULT 1500
#define UDP_ADDR_STR_MAX 128
#define UDP_PEERS_EXPECTED 64
/* Log lines about dropped datagrams, at most one per this many ms. */
#define UDP_LOG_EVERY_MS 1000

const struct fi_provider *udp_log_prov;

/* A DATA packet kept until acknowledged. */
struct udp_slot {
	uint8_t *buf; /* wire header, engine header, payload */
	size_t len, cap;
	uint64_t sent_us; /* last sent; 0: not yet (the socket was full) */
	unsigned tries;
	bool sacked; /* acknowledged selectively (kept: ack will pass it) */
	bool fast;   /* sent again for a gap since its last timeout */
	bool unsummed; /* its body's sum is left for a long send (short_ok) */
	bool was_short; /* its first send was in the short form */
	/* A lent payload (lm_link_pkt): its last lent_len bytes are there,
	 * not in buf, until the packet is acknowledged or unlend copies them
	 * (for lent_by, its owner). */
	const uint8_t *lent;
	size_t lent_len;
	const void *lent_by;
};

/* A packet that arrived ahead of a missing one. */
struct udp_held {
	uint8_t *buf; /* the whole datagram; NULL: none */
	size_t len;
};

/* lm_link_peer.meet */
enum { MEET_NONE, MEET_ASKED, MEET_DONE };

struct lm_link_peer {
	struct lm_hnode hnode;
	struct lm_list node;      /* udp_link.peers_all */
	struct lm_list owed_node; /* udp_link.owed, while owed */
	struct lm_list busy_node; /* udp_link.busy, while busy_listed */
	union lm_inet_addr addr;
	uint64_t inc; /* its incarnation; 0: not heard yet */
	/* Reset since we last heard from it: whoever is at its address now
	 * is met (datagrams name no incarnation of its and acknowledge none
	 * of its streams), and an incarnation past inc is that one, not a
	 * restart to report. */
	bool anyone;
	bool renewed; /* lost to a new incarnation, which we heard: not anyone */
	bool dead;    /* gone until peer_reset */
	bool self;    /* our own address */
	bool answer_owed; /* it probed us */
	bool answered;    /* it answered a probe of ours */
	bool owed_listed;
	bool busy_listed; /* packets in flight, or one waits for socket room */
	/* A packet first sent short had to go again: until the peer's next
	 * packet, small ones go long (its pair may not be the one we know,
	 * as when its epoch toward us moved on and it sends us nothing). */
	bool shorts_off;
	/* The handshake (MEET) of the current epoch: MEET_NONE, MEET_ASKED
	 * (our HELLO went), MEET_DONE (a REPLY came, or we replied); whether
	 * we asked (a REPLY answers only that); and the steps a full window
	 * kept from going (UDP_F_HELLO ...). */
	uint8_t meet;
	bool asked;
	uint16_t meet_owed;
	/* Sending. */
	uint32_t epoch;      /* ours toward it, from 1 */
	uint64_t next, una;  /* next seq to give; oldest not acknowledged */
	unsigned n_lent;     /* slots with a lent payload */
	struct udp_slot tx[UDP_WINDOW];
	double cwnd, ssthresh;
	uint64_t srtt_us, rttvar_us, rto_us;
	uint64_t due_us;     /* retransmission due; 0: nothing in flight */
	uint64_t live_ms;    /* last sign of life: a datagram, or the wait's start */
	uint64_t first_tx_ms;
	uint64_t probe_ms;   /* last probe sent */
	uint64_t probing_ms; /* the first probe since it was last heard; 0: none */
	/* The epoch dropped last and how far the peer had acknowledged it:
	 * a send of it completes if its packet got there. */
	uint32_t done_epoch;
	uint64_t done_una;
	bool unsent;         /* a slot waits for room in the socket */
	/* Receiving. */
	uint32_t rx_epoch; /* its epoch we take; 0: none yet */
	uint64_t rx_next;  /* next seq to hand the engine */
	struct udp_held held[UDP_WINDOW];
	unsigned n_held; /* of held[], those that wait: none, no sack to scan */
	unsigned owed;   /* packets taken since our last acknowledgement */
};

struct udp_link {
	struct lm_link link;
	int family;
	int sock, epfd, rto_fd, wake_fd;
	const struct udp_params *params;
	union lm_inet_addr self;
	uint64_t inc;
	size_t hdr_size;
	size_t dgram_max; /* largest datagram we take */
	size_t rx_payload_max; /* the payload of that */
	/* Kernel batching (params->gso): a stream's datagrams leave up to
	 * gso_segs to a send, cut by the kernel (UDP_SEGMENT; our datagrams
	 * are a multiple of 8 bytes long, so each of a joined read's lies
	 * aligned); a read may hold several the kernel joined (UDP_GRO),
	 * their size in rctl[]. */
	bool gso, gro;
	unsigned gso_segs;
	uint8_t *rseg; /* a joined datagram that lies unaligned, copied */
	/* Placement (the engine's place, placed and unplaced): while a
	 * large stream comes in order (placing), each datagram's headers are
	 * peeked into phead first; the next in-order DATA packet's payload
	 * is read where place says, and summed there. */
	lm_link_place_fn place;
	lm_link_placed_fn placed;
	lm_link_unplaced_fn unplaced;
	unsigned placing; /* datagrams still read one at a time */
	bool placed_now; /* deliver handed the placed packet up */
	uint8_t *phead;
	uint64_t n_placed;
	char rctl[UDP_BATCH][CMSG_SPACE(sizeof(int))];
	/* Short DATA packets (udp_short): whether the engine header fits
	 * the form, and a short packet read, in the long form it stands for. */
	bool shorts;
	uint64_t sbuf[(sizeof(struct udp_wire) + 64 + UDP_SHORT_MAX) / 8];
	struct lm_link_peer *last_peer; /* peer_find's last answer */
	lm_link_recv_fn recv;
	void (*on_lost)(void *arg, const void *src_addr);
	void *arg;
	/* What a link of two puts in its handshake, and hears of it. */
	const void *offer;
	size_t offer_len;
	void (*met)(void *arg, const void *src_addr, const void *offer, size_t len,
	            enum lm_link_met stage);
	void *met_arg;
	struct lm_hmap peers;
	struct lm_list peers_all;
	struct lm_list owed;
	/* The peers with packets unacknowledged or unsent: what each poll's
	 * timers look at, however many peers are idle. */
	struct lm_list busy;
	/* Acknowledgements held for the application's next call (keeper.c). */
	struct udp_kept kept;
	size_t up_bytes; /* payload bytes this poll handed up */
	bool unsent;       /* some peer has a slot waiting for socket room */
	bool errs;         /* the socket has errors queued */
	bool armed, rto_set, wake_set;
	bool closing;
	uint64_t log_ms;
	/* Counts for the log at close. */
	uint64_t n_sent, n_resent, n_timeouts, n_dup, n_ooo;
	uint64_t n_cut, n_joined; /* sends the kernel cut, reads it joined */
	uint64_t n_owned; /* lent payloads copied when unlent */
	uint64_t n_short; /* packets sent in the short form */
	/* recvmmsg's buffers. */
	bool quiet; /* the last read found nothing (read_dgrams) */
	int rdirty; /* rmsg[] whose name and control lengths a read changed */
	struct mmsghdr rmsg[UDP_BATCH];
	struct iovec riov[UDP_BATCH];
	union lm_inet_addr rfrom[UDP_BATCH];
	uint8_t *rbuf;
	/* Large buffers of acknowledged packets, the last one back on top:
	 * the next large packet is copied into memory still in the cache,
	 * not into the next slot's, a window of datagrams ago. */
	uint8_t *spare[UDP_WINDOW];
	unsigned n_spare;
};

/* ---- CRC-32C ------------------------------------------------------------------ */

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, crc_table_init);
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* The CRC register c advanced over n zero bytes is c times x^(8n) modulo
 * the polynomial: two CRCs of adjacent pieces combine with one such
 * product.  Bit-reflected, as the register is: bit 31 is x^0. */
static uint32_t crc_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = 1u << 31; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = b & 1 ? (b >> 1) ^ 0x82f63b78u : b >> 1;
	}
	return prod;
}

/* x^(8n) modulo the polynomial: the register 1 (x^0) run over n zero
 * bytes. */
static uint32_t crc_x8n(size_t n)
{
	uint8_t zero[256] = {0};
	uint32_t c = 1u << 31;

	for (; n; n -= LM_MIN(n, sizeof(zero)))
		c = crc_soft(c, zero, LM_MIN(n, sizeof(zero)));
	return c;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* Bytes each of the three interleaved streams takes per round. */
#define CRC_LANE 2048

static uint32_t crc_lane1, crc_lane2; /* x^(8 CRC_LANE), x^(16 CRC_LANE) */

static void crc_lanes_init(void)
{
	crc_lane1 = crc_x8n(CRC_LANE);
	crc_lane2 = crc_x8n(2 * CRC_LANE);
}

/* The crc32 instruction takes three cycles to give its result and can
 * start one a cycle: three independent streams over three thirds of a
 * round, joined by shifting the first two over what follows them, go
 * about three times as fast as one.  With copy, each word read is also
 * written to d: one pass over the data where a copy and a check were
 * two (the crc32 instruction, not the stores, sets the pace). */
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t
crc_run(uint32_t crc, uint8_t *d, const uint8_t *p, size_t len, const bool copy)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint64_t c = crc;
	size_t at = 0; /* d is only touched (and may be NULL) without copy */

	if (len >= 3 * CRC_LANE)
		pthread_once(&once, crc_lanes_init);
	for (; len - at >= 3 * CRC_LANE; at += 3 * CRC_LANE) {
		uint64_t c1 = 0, c2 = 0;

		for (size_t i = at; i < at + CRC_LANE; i += 8) {
			uint64_t w0, w1, w2;

			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + CRC_LANE + i, 8);
			memcpy(&w2, p + 2 * CRC_LANE + i, 8);
			c = _mm_crc32_u64(c, w0);
			c1 = _mm_crc32_u64(c1, w1);
			c2 = _mm_crc32_u64(c2, w2);
			if (copy) {
				memcpy(d + i, &w0, 8);
				memcpy(d + CRC_LANE + i, &w1, 8);
				memcpy(d + 2 * CRC_LANE + i, &w2, 8);
			}
		}
		c = crc_mulmod(crc_lane2, (uint32_t)c) ^ crc_mulmod(crc_lane1, (uint32_t)c1) ^
		    (uint32_t)c2;
	}
	for (; len - at >= 8; at += 8) {
		uint64_t w;

		memcpy(&w, p + at, 8);
		c = _mm_crc32_u64(c, w);
		if (copy)
			memcpy(d + at, &w, 8);
	}
	crc = (uint32_t)c;
	for (; at < len; at++) {
		crc = _mm_crc32_u8(crc, p[at]);
		if (copy)
			d[at] = p[at];
	}
	return crc;
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse(uint32_t crc, const uint8_t *p,
                                                          size_t len)
{
	return crc_run(crc, NULL, p, len, false);
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse_copy(uint32_t crc, uint8_t *d,
                                                               const uint8_t *p, size_t len)
{
	return crc_run(crc, d, p, len, true);
}

/* Folding with carry-less multiplies, 256 bytes a round in four 512-bit
 * registers, on processors with VPCLMULQDQ: about four times the crc32
 * instruction's pace.  Each 128-bit lane holds a piece of the message
 * whose value modulo the polynomial is what matters; a lane moves
 * FOLD_BITS further along as its low half times x^(FOLD_BITS+32) plus its
 * high half times x^(FOLD_BITS-32) (modulo the polynomial: bit-reflected,
 * the 32 makes up for where the product lands), added to the message's
 * next piece.  What the four registers hold at the end is a 256-byte
 * message of the same remainder: the crc32 instruction finishes it. */
#define FOLD_BYTES 256
#define FOLD_BITS  (8 * FOLD_BYTES)

static uint64_t fold_k[2]; /* x^(FOLD_BITS+32), x^(FOLD_BITS-32), as the lanes take them */

static void fold_init(void)
{
	/* crc_x8n's bit 31 is x^0; a lane's multiplier has x^0 at bit 32. */
	fold_k[0] = (uint64_t)crc_x8n((FOLD_BITS + 32) / 8) << 1;
	fold_k[1] = (uint64_t)crc_x8n((FOLD_BITS - 32) / 8) << 1;
}

#define FOLD_TARGET "avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2"

__attribute__((target(FOLD_TARGET), always_inline)) static inline uint32_t
crc_fold_run(uint32_t crc, uint8_t *d, const uint8_t *p, size_t len, const bool copy)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	__m512i x[4], k;
	uint64_t c = 0;
	uint64_t rest[FOLD_BYTES / 8];
	size_t at; /* as in crc_run */

	pthread_once(&once, fold_init);
	k = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)fold_k[1], (long long)fold_k[0]));
	for (int i = 0; i < 4; i++) {
		x[i] = _mm512_loadu_si512(p + 64 * i);
		if (copy)
			_mm512_storeu_si512(d + 64 * i, x[i]);
	}
	/* The register so far, added to the first four bytes. */
	x[0] = _mm512_xor_si512(x[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
	for (at = FOLD_BYTES; len - at >= FOLD_BYTES; at += FOLD_BYTES)
		for (int i = 0; i < 4; i++) {
			__m512i next = _mm512_loadu_si512(p + at + 64 * i);

			if (copy)
				_mm512_storeu_si512(d + at + 64 * i, next);
			x[i] = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x[i], k, 0x00),
			                                 _mm512_clmulepi64_epi128(x[i], k, 0x11),
			                                 next, 0x96);
		}
	for (int i = 0; i < 4; i++)
		_mm512_storeu_si512(rest + 8 * i, x[i]);
	for (size_t i = 0; i < FOLD_BYTES / 8; i++)
		c = _mm_crc32_u64(c, rest[i]);
	return crc_run((uint32_t)c, copy ? d + at : NULL, p + at, len - at, copy);
}

__attribute__((target(FOLD_TARGET))) static uint32_t crc_fold(uint32_t crc, const uint8_t *p,
                                                              size_t len)
{
	return crc_fold_run(crc, NULL, p, len, false);
}

__attribute__((target(FOLD_TARGET))) static uint32_t crc_fold_copy(uint32_t crc, uint8_t *d,
                                                                   const uint8_t *p, size_t len)
{
	return crc_fold_run(crc, d, p, len, true);
}

/* Below this many bytes the crc32 instruction alone is as fast. */
#define FOLD_MIN 1024

static bool fold_ok(void)
{
	return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512vl");
}
#endif

uint32_t udp_crc32c(uint32_t crc, const void *data, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (len >= FOLD_MIN && fold_ok())
		return ~crc_fold(crc, data, len);
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_sse(crc, data, len);
#endif
	return ~crc_soft(crc, data, len);
}

uint32_t udp_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	if (!len)
		return crc;
#if defined(__x86_64__)
	if (len >= FOLD_MIN && fold_ok())
		return ~crc_fold_copy(~crc, dst, src, len);
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_sse_copy(~crc, dst, src, len);
#endif
	memcpy(dst, src, len);
	return udp_crc32c(crc, dst, len);
}

/* The check of the headers at buf: the wire header with check 0, then
 * the hdr_len bytes of engine header after it.  A kept packet's payload
 * is summed once (udp_wire.body), its headers each time it goes (their
 * acknowledgement changes). */
static uint32_t head_sum(const uint8_t *buf, size_t hdr_len)
{
	struct udp_wire h;

	memcpy(&h, buf, sizeof(h));
	h.check = 0;
	return udp_crc32c(udp_crc32c(0, &h, sizeof(h)), buf + sizeof(h), hdr_len);
}

static uint32_t body_sum(const void *p, size_t len)
{
	return len ? udp_crc32c(0, p, len) : 0;
}

void udp_wire_seal_buf(void *buf, size_t len)
{
	uint8_t *b = buf;
	struct udp_wire w;
	size_t hl;

	if (len >= sizeof(struct udp_short) && b[offsetof(struct udp_wire, type)] == UDP_T_SHORT) {
		uint32_t check = 0;

		memcpy(b + offsetof(struct udp_short, check), &check, sizeof(check));
		check = udp_crc32c(0, b, len);
		memcpy(b + offsetof(struct udp_short, check), &check, sizeof(check));
		return;
	}
	if (len < sizeof(w))
		return;
	memcpy(&w, b, sizeof(w));
	hl = LM_MIN((size_t)w.hdr_len, len - sizeof(w));
	w.body = body_sum(b + sizeof(w) + hl, len - sizeof(w) - hl);
	memcpy(b, &w, sizeof(w));
	w.check = head_sum(b, hl);
	memcpy(b, &w, sizeof(w));
}

/* ---- datagrams ---------------------------------------------------------------- */

/* The headers of a datagram of len bytes whose first `have` are at buf
 * (at least the wire and engine headers): 0 when a link whose engine
 * header is hdr_size bytes and whose payloads are at most max_payload
 * bytes takes them, else a negative FI_E* code.  The payload is not
 * looked at: its check is udp_wire.body. */
static int head_check(const uint8_t *buf, size_t have, size_t len, size_t hdr_size,
                      size_t max_payload)
{
	struct udp_wire w;

	if (have < sizeof(w) || len < sizeof(w))
		return -FI_EMSGSIZE;
	memcpy(&w, buf, sizeof(w));
	if (w.magic != UDP_MAGIC || w.version != UDP_PROTO_VERSION)
		return -FI_EPROTO;
	if (w.type == UDP_T_ACK) {
		if ((w.flags & ~(UDP_F_PROBE | UDP_F_ANSWER | UDP_F_BYE)) ||
		    ((w.flags & UDP_F_BYE) && !(w.flags & UDP_F_PROBE)) || w.hdr_len || w.len ||
		    w.body || len != sizeof(w))
			return -FI_EPROTO;
	} else if (w.type == UDP_T_DATA) {
		if (w.flags || w.hdr_len != hdr_size || w.len > max_payload ||
		    len != sizeof(w) + hdr_size + w.len || !w.seq || !w.epoch)
			return -FI_EPROTO;
	} else if (w.type == UDP_T_MEET) {
		if ((w.flags != UDP_F_HELLO && w.flags != UDP_F_REPLY &&
		     w.flags != UDP_F_CONFIRM) ||
		    w.hdr_len || w.len > UDP_MEET_MAX || (w.flags == UDP_F_CONFIRM && w.len) ||
		    len != sizeof(w) + w.len || !w.seq || !w.epoch)
			return -FI_EPROTO;
	} else {
		return -FI_EPROTO;
	}
	if (!w.src_inc)
		return -FI_EPROTO;
	if (have < sizeof(w) + w.hdr_len)
		return -FI_EMSGSIZE;
	if (head_sum(buf, w.hdr_len) != w.check)
		return -FI_EIO;
	return 0;
}

/* The bits set in a byte (without the popcnt instruction in the build,
 * __builtin_popcount is a library call). */
static unsigned bits8(unsigned x)
{
	x = x - ((x >> 1) & 0x55);
	x = (x & 0x33) + ((x >> 2) & 0x33);
	return (x + (x >> 4)) & 0x0f;
}

/* The checks of a short packet (udp_short) of len bytes at buf, as
 * head_check's of the long form, and its sum. */
static int short_check(const uint8_t *buf, size_t len, size_t hdr_size, size_t max_payload)
{
	struct udp_short h;
	uint32_t check;
	size_t want;

	if (len < sizeof(h))
		return -FI_EMSGSIZE;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != UDP_MAGIC || h.version != UDP_PROTO_VERSION || h.type != UDP_T_SHORT)
		return -FI_EPROTO;
	if (hdr_size % 8 || hdr_size > 64 || (hdr_size < 64 && h.words >> (hdr_size / 8)) ||
	    (h.flags & ~UDP_S_SACK) || h.len > max_payload || h.len > UDP_SHORT_MAX)
		return -FI_EPROTO;
	want = sizeof(h) + (h.flags & UDP_S_SACK ? 8 : 0) + 8 * (size_t)bits8(h.words) +
	       h.len;
	if (len != want)
		return -FI_EPROTO;
	check = h.check;
	h.check = 0;
	if (udp_crc32c(udp_crc32c(0, &h, sizeof(h)), buf + sizeof(h), len - sizeof(h)) != check)
		return -FI_EIO;
	return 0;
}

int udp_wire_check(const void *buf, size_t len, size_t hdr_size, size_t max_payload)
{
	const uint8_t *b = buf;
	struct udp_wire w;
	int ret;

	if (len >= sizeof(struct udp_short) && b[offsetof(struct udp_wire, type)] == UDP_T_SHORT &&
	    b[offsetof(struct udp_wire, version)] == UDP_PROTO_VERSION)
		return short_check(b, len, hdr_size, max_payload);
	ret = head_check(b, len, len, hdr_size, max_payload);

	if (ret)
		return ret;
	memcpy(&w, b, sizeof(w));
	if (body_sum(b + sizeof(w) + w.hdr_len, w.len) != w.body)
		return -FI_EIO;
	return 0;
}

/* Fill in the checks of a datagram that is its wire header alone. */
static void wire_seal(struct udp_wire *w)
{
	w->body = 0;
	w->check = head_sum((const uint8_t *)w, 0);
}

static void drop_log(struct udp_link *l, const char *why)
{
	uint64_t now = lm_now_ms();

	if (now - l->log_ms < UDP_LOG_EVERY_MS)
		return;
	l->log_ms = now;
	LM_WARN(udp_log_prov, FI_LOG_EP_DATA, "datagram dropped: %s\n", why);
}

/* The acknowledgement fields of a datagram to p: what we took of its
 * stream. */
static void ack_fill(struct lm_link_peer *p, struct udp_wire *w)
{
	uint64_t sack = 0;

	w->ack_epoch = p->rx_epoch;
	w->ack = p->rx_epoch ? p->rx_next : 0;
	for (unsigned i = 0, n = p->n_held; w->ack && n && i < UDP_WINDOW - 1; i++)
		if (p->held[(p->rx_next + 1 + i) % UDP_WINDOW].buf) {
			sack |= 1ull << i;
			n--;
		}
	w->sack = sack;
	p->owed = 0;
}

static void wire_head(struct udp_link *l, struct lm_link_peer *p, struct udp_wire *w,
                      uint8_t type)
{
	memset(w, 0, sizeof(*w));
	w->magic = UDP_MAGIC;
	w->version = UDP_PROTO_VERSION;
	w->type = type;
	w->src_inc = l->inc;
	w->dst_inc = p->anyone ? 0 : p->inc;
	if (!p->anyone)
		ack_fill(p, w);
}

/* One datagram of n pieces (1 or 2: sendto for one, the cheaper call). */
static ssize_t dgram_sendv(struct udp_link *l, struct lm_link_peer *p,
                           const struct iovec *iov, unsigned n_iov)
{
	ssize_t n;

	for (int tries = 0; tries < 2; tries++) {
		if (n_iov == 1)
			n = sendto(l->sock, iov[0].iov_base, iov[0].iov_len,
			           MSG_DONTWAIT | MSG_NOSIGNAL, &p->addr.sa, lm_inet_len(l->family));
		else
			n = sendmsg(l->sock,
			            &(struct msghdr){.msg_name = &p->addr,
			                             .msg_namelen = lm_inet_len(l->family),
			                             .msg_iov = (struct iovec *)iov,
			                             .msg_iovlen = n_iov},
			            MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0)
			return 0;
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
			return -FI_EAGAIN;
		/* An earlier datagram's error (IP_RECVERR), maybe of another
		 * peer: read it from the queue later; this one goes again. */
		l->errs = true;
	}
	return -FI_EAGAIN;
}

static ssize_t dgram_send(struct udp_link *l, struct lm_link_peer *p, const void *buf,
                          size_t len)
{
	return dgram_sendv(l, p, &(struct iovec){(void *)buf, len}, 1);
}

static void ack_send(struct udp_link *l, struct lm_link_peer *p, uint16_t flags)
{
	struct udp_wire w;

	wire_head(l, p, &w, UDP_T_ACK);
	w.flags = flags;
	wire_seal(&w);
	dgram_send(l, p, &w, sizeof(w));
}

/* ---- peers -------------------------------------------------------------------- */

static uint64_t addr_hash(const union lm_inet_addr *a)
{
	return lm_hash_bytes(a, sizeof(*a));
}

/* Peers live as long as their link: the last one found is asked first
 * (a ping-pong's every datagram is of one peer). */
static struct lm_link_peer *peer_find(struct udp_link *l, const union lm_inet_addr *a)
{
	struct lm_hnode *n;

	if (l->last_peer && !memcmp(&l->last_peer->addr, a, sizeof(*a)))
		return l->last_peer;
	for (n = lm_hmap_find(&l->peers, addr_hash(a)); n; n = lm_hmap_find_next(n)) {
		struct lm_link_peer *p = lm_container_of(n, struct lm_link_peer, hnode);

		if (!memcmp(&p->addr, a, sizeof(*a)))
			return l->last_peer = p;
	}
	return NULL;
}

/* p joins or leaves l->busy as it has something in flight or not. */
static void busy_update(struct udp_link *l, struct lm_link_peer *p)
{
	bool busy = p->due_us || p->unsent;

	if (busy == p->busy_listed)
		return;
	if (busy)
		lm_list_push_back(&l->busy, &p->busy_node);
	else
		lm_list_remove(&p->busy_node);
	p->busy_listed = busy;
}

static void tx_start(struct lm_link_peer *p)
{
	p->epoch++;
	p->next = p->una = 1;
	p->cwnd = UDP_CWND_INIT;
	p->ssthresh = UDP_WINDOW;
	p->rto_us = p->srtt_us ? p->rto_us : UDP_RTO_INIT_US;
	p->due_us = 0;
	p->first_tx_ms = 0;
	p->unsent = false;
	/* A new stream meets the peer afresh (its HELLO went with the old). */
	p->meet = MEET_NONE;
	p->asked = false;
	p->meet_owed = 0;
}

static struct lm_link_peer *peer_get(struct udp_link *l, const union lm_inet_addr *a)
{
	struct lm_link_peer *p = peer_find(l, a);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->addr = *a;
	p->self = !memcmp(a, &l->self, sizeof(*a));
	p->rx_next = 1;
	tx_start(p);
	lm_hmap_insert(&l->peers, &p->hnode, addr_hash(a));
	lm_list_push_back(&l->peers_all, &p->node);
	return p;
}

/* Everything in flight to p is dropped (it went with the peer). */
static void tx_drop(struct udp_link *l, struct lm_link_peer *p)
{
	p->done_epoch = p->epoch;
	p->done_una = p->una;
	for (unsigned i = 0; i < UDP_WINDOW; i++) {
		p->tx[i].len = 0;
		p->tx[i].sent_us = 0;
		p->tx[i].lent = NULL;
	}
	p->n_lent = 0;
	tx_start(p);
	busy_update(l, p);
}

static void rx_drop(struct lm_link_peer *p)
{
	for (unsigned i = 0; i < UDP_WINDOW; i++) {
		free(p->held[i].buf);
		p->held[i].buf = NULL;
	}
	p->n_held = 0;
	p->rx_next = 1;
	p->rx_epoch = 0;
}

/* p is gone (or restarted): what was in flight either way is lost, and
 * the engine hears of it. */
static void peer_lost(struct udp_link *l, struct lm_link_peer *p, const char *why)
{
	if (fi_log_enabled(udp_log_prov, FI_LOG_INFO, FI_LOG_EP_CTRL)) {
		char name[UDP_ADDR_STR_MAX] = "?";
		size_t len = sizeof(name);

		lm_inet_to_str(&p->addr, name, &len);
		LM_INFO(udp_log_prov, FI_LOG_EP_CTRL, "peer %s lost: %s\n", name, why);
	}
	tx_drop(l, p);
	p->dead = true;
	/* A closing link's engine has let its peers go already. */
	if (l->on_lost && !l->closing)
		l->on_lost(l->arg, &p->addr);
}

/* p restarted: its new incarnation speaks to us.  What was in flight
 * with the old one is lost, as peer_lost says (unless said already: its
 * farewell, a closed port); the new one is alive, and the handshake it
 * starts is answered now, not after the engine's reset (which leaves it
 * be). */
static void peer_renewed(struct udp_link *l, struct lm_link_peer *p)
{
	if (!p->dead)
		peer_lost(l, p, "restarted at the same address");
	p->dead = false;
	p->renewed = true;
}

/* ---- sending ------------------------------------------------------------------ */

static void rto_arm(struct udp_link *l, struct lm_link_peer *p, uint64_t now)
{
	if (!p->due_us)
		p->live_ms = now / 1000; /* silence counts from here */
	p->due_us = now + p->rto_us;
	busy_update(l, p);
}

/* A kept packet about to go (again): the acknowledgement it carries is
 * as of now, its check of that and of the body summed when it was taken. */
static void slot_seal(struct lm_link_peer *p, struct udp_slot *s)
{
	struct udp_wire *w = (struct udp_wire *)s->buf;

	if (s->unsummed) {
		w->body = body_sum(s->buf + sizeof(*w) + w->hdr_len, w->len);
		s->unsummed = false;
	}
	ack_fill(p, w);
	w->check = head_sum(s->buf, w->hdr_len);
}

/* s's datagram as pieces: its buffer, and the lent payload if any. */
static unsigned slot_iov(const struct udp_slot *s, struct iovec *iov)
{
	iov[0] = (struct iovec){s->buf, s->len - (s->lent ? s->lent_len : 0)};
	if (!s->lent)
		return 1;
	iov[1] = (struct iovec){(void *)s->lent, s->lent_len};
	return 2;
}

/* Whether a DATA packet of plen bytes to p may go short now. */
static bool short_ok(const struct udp_link *l, const struct lm_link_peer *p, size_t plen)
{
	return l->shorts && plen <= UDP_SHORT_MAX && !p->anyone && p->rx_epoch && p->una > 1 &&
	       !p->shorts_off;
}

/* A datagram of the short form (udp_short) at most. */
#define UDP_SHORT_DGRAM (sizeof(struct udp_short) + 8 + 64 + UDP_SHORT_MAX)

/* s's packet in the short form at out, with the acknowledgement as of
 * now: its length, or 0 when it goes in the long form (sent before,
 * large, lent, or to a peer that has not acknowledged a packet of this
 * epoch or whose packets we have not taken). */
static size_t short_build(struct udp_link *l, struct lm_link_peer *p, struct udp_slot *s,
                          uint8_t *out)
{
	struct udp_wire *w = (struct udp_wire *)s->buf;
	const uint8_t *eh = s->buf + sizeof(*w);
	struct udp_short h;
	uint8_t *at = out + sizeof(h);
	unsigned words = 0;

	if (s->tries || s->lent || w->type != UDP_T_DATA || !short_ok(l, p, w->len))
		return 0;
	ack_fill(p, w);
	h = (struct udp_short){.magic = UDP_MAGIC,
	                       .version = UDP_PROTO_VERSION,
	                       .type = UDP_T_SHORT,
	                       .len = w->len,
	                       .pair = udp_pair_tag(w->src_inc, w->dst_inc, w->epoch, w->ack_epoch),
	                       .seq = (uint32_t)w->seq,
	                       .ack = (uint32_t)w->ack};
	if (w->sack) {
		h.flags = UDP_S_SACK;
		memcpy(at, &w->sack, 8);
		at += 8;
	}
	for (size_t i = 0; i < l->hdr_size / 8; i++) {
		uint64_t v;

		memcpy(&v, eh + 8 * i, 8);
		if (v) {
			words |= 1u << i;
			memcpy(at, &v, 8);
			at += 8;
		}
	}
	h.words = (uint8_t)words;
	memcpy(at, eh + l->hdr_size, w->len);
	at += w->len;
	memcpy(out, &h, sizeof(h));
	h.check = udp_crc32c(0, out, (size_t)(at - out));
	memcpy(out + offsetof(struct udp_short, check), &h.check, sizeof(h.check));
	return (size_t)(at - out);
}

static ssize_t slot_send(struct udp_link *l, struct lm_link_peer *p, struct udp_slot *s,
                         uint64_t now)
{
	uint64_t sb[UDP_SHORT_DGRAM / 8];
	struct iovec iov[2];
	unsigned n_iov = 1;
	size_t slen;
	ssize_t ret;

	if (s->tries && s->was_short)
		p->shorts_off = true;
	slen = short_build(l, p, s, (uint8_t *)sb);
	if (slen) {
		iov[0] = (struct iovec){sb, slen};
	} else {
		slot_seal(p, s);
		n_iov = slot_iov(s, iov);
	}
	ret = dgram_sendv(l, p, iov, n_iov);
	if (ret) {
		s->sent_us = 0;
		p->unsent = l->unsent = true;
		busy_update(l, p);
		return ret;
	}
	s->sent_us = now;
	if (!s->tries)
		s->was_short = slen != 0;
	if (s->tries++)
		l->n_resent++;
	l->n_sent++;
	l->n_short += slen != 0;
	return 0;
}

/* The slots from seq first (before end) that one datagram send takes:
 * one, or with the kernel cutting (l->gso) a run of equal length, the
 * last maybe shorter, up to UDP_DGRAM_MAX bytes in all; their pieces go
 * to iov (2 a slot at most).  Returns how many, *n_iov the pieces; the
 * cut size goes in ctl when it is more than one. */
static unsigned run_of(struct udp_link *l, struct lm_link_peer *p, uint64_t first,
                       uint64_t end, struct iovec *iov, size_t *n_iov, struct msghdr *h,
                       char *ctl)
{
	size_t seg = p->tx[first % UDP_WINDOW].len, total = 0;
	unsigned k = 0;

	*n_iov = 0;
	while (first + k < end && k < (l->gso ? l->gso_segs : 1)) {
		struct udp_slot *s = &p->tx[(first + k) % UDP_WINDOW];

		if (s->len > seg || total + s->len > UDP_DGRAM_MAX)
			break;
		slot_seal(p, s);
		*n_iov += slot_iov(s, iov + *n_iov);
		total += s->len;
		k++;
		if (s->len < seg)
			break;
	}
	if (k > 1) {
		struct cmsghdr *c;

		h->msg_control = ctl;
		h->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
		c = CMSG_FIRSTHDR(h);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(c), &(uint16_t){(uint16_t)seg}, sizeof(uint16_t));
	}
	return k;
}

/* Send p's slots from seq first up to p->next (taken, not sent yet), up
 * to UDP_BATCH datagram sends a system call (sendmmsg), each of one slot
 * or of a run the kernel cuts (run_of).  What the socket has no room for
 * is left to the next poll, as slot_send leaves it.  A kernel that
 * refuses to cut (a device without checksum offload: EIO) gets each
 * datagram alone from then on. */
static void slots_send(struct udp_link *l, struct lm_link_peer *p, uint64_t first,
                       uint64_t now)
{
	struct mmsghdr m[UDP_BATCH];
	unsigned runs[UDP_BATCH];
	struct iovec iov[2 * UDP_WINDOW];
	char ctl[UDP_BATCH][CMSG_SPACE(sizeof(uint16_t))];

	while (first < p->next) {
		unsigned n = 0, k = 0;
		size_t used = 0;
		int sent;

		memset(m, 0, sizeof(m));
		for (; n < UDP_BATCH && first + k < p->next; n++) {
			size_t n_iov;

			m[n].msg_hdr.msg_name = &p->addr;
			m[n].msg_hdr.msg_namelen = lm_inet_len(l->family);
			m[n].msg_hdr.msg_iov = iov + used;
			runs[n] = run_of(l, p, first + k, p->next, iov + used, &n_iov,
			                 &m[n].msg_hdr, ctl[n]);
			m[n].msg_hdr.msg_iovlen = n_iov;
			used += n_iov;
			k += runs[n];
		}
		sent = sendmmsg(l->sock, m, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0) {
			if (l->gso && k > n && (errno == EIO || errno == EINVAL || errno == EMSGSIZE)) {
				LM_INFO(udp_log_prov, FI_LOG_EP_DATA,
				        "the kernel does not cut datagrams here (%s): "
				        "sending each alone\n", strerror(errno));
				l->gso = false;
				continue;
			}
			/* An earlier datagram's error (IP_RECVERR) is read
			 * later; these go again from the next poll. */
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
				l->errs = true;
			sent = 0;
		}
		k = 0;
		for (int i = 0; i < sent; i++) {
			l->n_cut += runs[i] > 1;
			for (unsigned j = 0; j < runs[i]; j++, k++) {
				struct udp_slot *s = &p->tx[(first + k) % UDP_WINDOW];

				s->sent_us = now;
				s->tries++;
				l->n_sent++;
			}
		}
		first += k;
		if ((unsigned)sent < n) {
			p->unsent = l->unsent = true;
			busy_update(l, p);
			return;
		}
	}
}

/* A buffer for a packet of len bytes (*cap of them): a spare large
 * buffer, or one allocated. */
static uint8_t *buf_take(struct udp_link *l, size_t len, size_t *cap)
{
	*cap = len > UDP_SLOT_SMALL ? l->dgram_max : len;
	if (*cap > UDP_SLOT_SMALL && l->n_spare)
		return l->spare[--l->n_spare];
	return malloc(*cap);
}

/* Room for a packet of len bytes in s, which has less (what it held is
 * not kept). */
static int slot_fit(struct udp_link *l, struct udp_slot *s, size_t len)
{
	size_t cap;
	uint8_t *b = buf_take(l, len, &cap);

	if (!b)
		return -FI_EAGAIN;
	free(s->buf);
	s->buf = b;
	s->cap = cap;
	return 0;
}

/* s's lent payload copied into its own buffer. */
static int slot_own(struct udp_link *l, struct lm_link_peer *p, struct udp_slot *s)
{
	size_t head = s->len - s->lent_len, cap = s->cap;
	uint8_t *b = s->cap < s->len ? buf_take(l, s->len, &cap) : s->buf;

	if (!b)
		return -FI_ENOMEM;
	l->n_owned++;
	if (b != s->buf) {
		memcpy(b, s->buf, head);
		free(s->buf);
		s->buf = b;
		s->cap = cap;
	}
	memcpy(b + head, s->lent, s->lent_len);
	s->lent = NULL;
	p->n_lent--;
	return 0;
}

/* s's packet was acknowledged: a lent payload is the engine's again, a
 * large buffer goes to the spares. */
static void slot_let_go(struct udp_link *l, struct lm_link_peer *p, struct udp_slot *s)
{
	if (s->lent) {
		s->lent = NULL;
		p->n_lent--;
	}
	if (s->cap > UDP_SLOT_SMALL && l->n_spare < LM_ARRAY_SIZE(l->spare)) {
		l->spare[l->n_spare++] = s->buf;
		s->buf = NULL;
		s->cap = 0;
	}
}

/* Take one packet of type (DATA or MEET, with flags, a header of
 * hdr_len bytes) into p's window and send it, or leave it for slots_send
 * (later).  A MEET packet is not held back by the congestion window,
 * only by the window's end. */
static ssize_t pkt_put(struct udp_link *l, struct lm_link_peer *p, uint8_t type,
                       uint16_t flags, const void *hdr, size_t hdr_len,
                       const struct iovec *iov, size_t iov_count, uint64_t now,
                       bool later, const void *lent_by)
{
	size_t plen = lm_iov_len(iov, iov_count);
	size_t len = sizeof(struct udp_wire) + hdr_len + plen;
	/* A large lent payload stays where it is: summed, not copied. */
	bool borrow = lent_by && iov_count == 1 && plen > UDP_SLOT_SMALL;
	size_t keep = borrow ? len - plen : len;
	struct udp_slot *s;
	struct udp_wire *w;
	uint32_t body;
	uint8_t *at;

	if (p->dead)
		return -FI_EIO;
	if (plen > l->link.max_payload)
		return -FI_EINVAL;
	if ((type == UDP_T_DATA && p->next - p->una >= (uint64_t)p->cwnd) ||
	    p->next - p->una >= UDP_WINDOW)
		return -FI_EAGAIN;
	s = &p->tx[p->next % UDP_WINDOW];
	if (s->cap < keep && slot_fit(l, s, keep))
		return -FI_EAGAIN;
	w = (struct udp_wire *)s->buf;
	/* Its acknowledgement is filled in at each send (slot_seal,
	 * short_build). */
	*w = (struct udp_wire){.magic = UDP_MAGIC,
	                       .version = UDP_PROTO_VERSION,
	                       .type = type,
	                       .flags = (uint8_t)flags,
	                       .hdr_len = (uint8_t)hdr_len,
	                       .len = (uint16_t)plen,
	                       .src_inc = l->inc,
	                       .dst_inc = p->anyone ? 0 : p->inc,
	                       .epoch = p->epoch,
	                       .seq = p->next++};
	at = s->buf + sizeof(*w);
	if (hdr_len) /* a MEET has none (hdr NULL) */
		memcpy(at, hdr, hdr_len);
	at += hdr_len;
	body = 0;
	s->lent = NULL;
	/* A packet that will likely go short is summed there, whole. */
	s->unsummed = !borrow && !later && type == UDP_T_DATA && short_ok(l, p, plen);
	if (s->unsummed) {
		for (size_t i = 0; i < iov_count; i++) {
			if (iov[i].iov_len)
				memcpy(at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
	} else if (borrow) {
		body = body_sum(iov[0].iov_base, plen);
		s->lent = iov[0].iov_base;
		s->lent_len = plen;
		s->lent_by = lent_by;
		p->n_lent++;
	} else {
		for (size_t i = 0; i < iov_count; i++) {
			if (iov[i].iov_len) /* its base may be NULL (Open MPI's empty messages) */
				body = udp_crc32c_copy(body, at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
	}
	w->body = body;
	s->len = len;
	s->tries = 0;
	s->was_short = false;
	s->sacked = s->fast = false;
	if (!p->first_tx_ms)
		p->first_tx_ms = lm_now_ms();
	if (!p->due_us)
		rto_arm(l, p, now);
	s->sent_us = 0;
	if (!later)
		slot_send(l, p, s, now); /* not sent now: the next poll's */
	return 0;
}

static ssize_t pkt_take(struct udp_link *l, struct lm_link_peer *p, const void *hdr,
                        const struct iovec *iov, size_t iov_count, uint64_t now,
                        bool later, const void *lent_by)
{
	return pkt_put(l, p, UDP_T_DATA, 0, hdr, l->hdr_size, iov, iov_count, now, later,
	               lent_by);
}

/* ---- the handshake (MEET) ----------------------------------------------------- */

/* Send p the handshake step (UDP_F_HELLO, _REPLY or _CONFIRM), with our
 * offer but on CONFIRM; a full window keeps it owed until acknowledgements
 * open it (on_ack). */
static void meet_send(struct udp_link *l, struct lm_link_peer *p, uint16_t step)
{
	struct iovec iov = {(void *)l->offer, step == UDP_F_CONFIRM ? 0 : l->offer_len};

	if (pkt_put(l, p, UDP_T_MEET, step, NULL, 0, &iov, 1, lm_now_us(), false, NULL) ==
	    -FI_EAGAIN)
		p->meet_owed |= step;
	else
		p->meet_owed &= (uint16_t)~step;
}

/* The steps a full window held back, in the order they were due. */
static void meet_owed_send(struct udp_link *l, struct lm_link_peer *p)
{
	static const uint16_t steps[] = {UDP_F_HELLO, UDP_F_REPLY, UDP_F_CONFIRM};

	for (size_t i = 0; i < LM_ARRAY_SIZE(steps) && p->meet_owed; i++)
		if (p->meet_owed & steps[i]) {
			meet_send(l, p, steps[i]);
			if (p->meet_owed & steps[i])
				return; /* still full */
		}
}

/* A handshake step of p's, in its stream's order: tell the link of two
 * above (met), answer a HELLO, confirm a REPLY that offered when we did. */
static void meet_take(struct udp_link *l, struct lm_link_peer *p, uint16_t step,
                      const void *offer, size_t len)
{
	enum lm_link_met stage = step == UDP_F_HELLO   ? LM_MET_HELLO
	                         : step == UDP_F_REPLY ? LM_MET_ANSWER
	                                               : LM_MET_CONFIRM;

	if (step == UDP_F_REPLY && !p->asked)
		return; /* to a HELLO of an earlier stream of ours, or none */
	if (step != UDP_F_CONFIRM)
		p->meet = MEET_DONE;
	if (l->met)
		l->met(l->met_arg, &p->addr, stage == LM_MET_CONFIRM ? NULL : offer, len, stage);
	if (step == UDP_F_HELLO)
		meet_send(l, p, UDP_F_REPLY);
	else if (step == UDP_F_REPLY && len && l->offer_len)
		meet_send(l, p, UDP_F_CONFIRM);
}

/* A link of two asks to meet p before its first packet: 0 while the
 * handshake goes (met tells its end), 1 when it was made before in this
 * stream, -FI_EIO for a peer that is gone. */
static int udp_link_peer_connect(struct lm_link *link, struct lm_link_peer *p)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	if (p->dead)
		return -FI_EIO;
	if (p->meet == MEET_DONE)
		return 1;
	if (p->meet == MEET_NONE) {
		p->meet = MEET_ASKED;
		p->asked = true;
		meet_send(l, p, UDP_F_HELLO);
	}
	return 0;
}

static ssize_t udp_link_send(struct lm_link *link, struct lm_link_peer *p, const void *hdr,
                             const struct iovec *iov, size_t iov_count)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	return pkt_take(l, p, hdr, iov, iov_count, lm_now_us(), false, NULL);
}

static ssize_t udp_link_send_many(struct lm_link *link, struct lm_link_peer *p,
                                  const struct lm_link_pkt *pkts, size_t count)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);
	uint64_t now = lm_now_us(), first = p->next;
	ssize_t ret = 0;
	size_t i;

	/* Taken, and sent UDP_SEND_BATCH at a time, or as many as one send
	 * takes when the kernel cuts them. */
	unsigned batch = l->gso ? l->gso_segs : UDP_SEND_BATCH;

	for (i = 0; i < count; i++) {
		ret = pkt_take(l, p, pkts[i].hdr, pkts[i].iov, pkts[i].iov_count, now, true,
		               pkts[i].lent_by);
		if (ret)
			break;
		if (p->next - first == batch) {
			slots_send(l, p, first, now);
			first = p->next;
		}
	}
	slots_send(l, p, first, now);
	if (ret && ret != -FI_EAGAIN)
		return i ? (ssize_t)i : ret;
	return i ? (ssize_t)i : -FI_EAGAIN;
}

/* What p's packets still hold of the payloads lent_by lent, copied.
 * Without the memory for it the packets cannot stay: p's stream is
 * dropped and p taken for gone (what waits on it fails, as for a dead
 * peer). */
static void udp_link_unlend(struct lm_link *link, struct lm_link_peer *p, const void *lent_by)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	for (unsigned i = 0; p->n_lent && i < UDP_WINDOW; i++)
		if (p->tx[i].lent && p->tx[i].lent_by == lent_by &&
		    slot_own(l, p, &p->tx[i])) {
			LM_WARN(udp_log_prov, FI_LOG_EP_DATA,
			        "no memory to keep packets in flight: peer dropped\n");
			tx_drop(l, p);
			p->dead = true;
			return;
		}
}

/* The last packet taken for p; everything up to a mark is delivered once
 * the peer acknowledged it.  Packets to ourselves die with us or arrive:
 * nothing to wait for. */
static uint64_t udp_link_mark(struct lm_link *link, struct lm_link_peer *p)
{
	(void)link;
	if (p->self)
		return 0;
	return p->next > p->una ? ((uint64_t)p->epoch << 40) | (p->next - 1) : 0;
}

static bool udp_link_delivered(struct lm_link *link, struct lm_link_peer *p, uint64_t mark,
                               bool look)
{
	uint64_t seq = mark & ((1ull << 40) - 1);
	uint32_t epoch = (uint32_t)(mark >> 40);

	(void)link, (void)look;
	/* Of the stream dropped last: as far as it got (the engine fails
	 * what the peer's loss took). */
	if (epoch == p->done_epoch)
		return p->done_una > seq;
	return epoch == p->epoch && p->una > seq;
}

/* ---- acknowledgements --------------------------------------------------------- */

static void rtt_sample(struct lm_link_peer *p, uint64_t rtt)
{
	if (!p->srtt_us) {
		p->srtt_us = rtt;
		p->rttvar_us = rtt / 2;
	} else {
		uint64_t d = rtt > p->srtt_us ? rtt - p->srtt_us : p->srtt_us - rtt;

		p->rttvar_us = (3 * p->rttvar_us + d) / 4;
		p->srtt_us = (7 * p->srtt_us + rtt) / 8;
	}
	p->rto_us = p->srtt_us + 4 * p->rttvar_us;
	if (p->rto_us < UDP_RTO_MIN_US)
		p->rto_us = UDP_RTO_MIN_US;
	if (p->rto_us > UDP_RTO_MAX_US)
		p->rto_us = UDP_RTO_MAX_US;
}

/* How long a packet that a later one passed may still be on its way
 * (reordered, not lost): twice the round trip and a millisecond. */
static uint64_t reorder_us(const struct lm_link_peer *p)
{
	return 2 * p->srtt_us + 1000;
}

/* Send again the packets that later ones passed, by UDP_FAST_GAP
 * packets or by the reordering time, once per such time. */
static void fast_retransmit(struct udp_link *l, struct lm_link_peer *p, uint64_t now)
{
	uint64_t wait = reorder_us(p);
	unsigned after = 0;
	bool cut = false;

	for (uint64_t seq = p->next; seq-- > p->una;) {
		struct udp_slot *s = &p->tx[seq % UDP_WINDOW];
		bool old = s->sent_us && now - s->sent_us > wait;

		if (s->sacked) {
			after++;
			continue;
		}
		if (!after || !s->sent_us || (s->fast && !old) ||
		    (after < UDP_FAST_GAP && !old))
			continue;
		cut |= !s->fast;
		s->fast = true;
		slot_send(l, p, s, now);
	}
	if (cut) {
		p->ssthresh = p->cwnd / 2 > UDP_CWND_MIN ? p->cwnd / 2 : UDP_CWND_MIN;
		p->cwnd = p->ssthresh;
	}
}

static void on_ack(struct udp_link *l, struct lm_link_peer *p, const struct udp_wire *w,
                   uint64_t now)
{
	uint64_t acked = 0;

	if (!w->ack || w->ack_epoch != p->epoch || w->ack > p->next)
		return;
	/* A round trip is measured on a packet sent once, when an
	 * acknowledgement first covers it: one that waited behind a hole was
	 * covered by a sack before, when it arrived. */
	while (p->una < w->ack) {
		struct udp_slot *s = &p->tx[p->una % UDP_WINDOW];

		if (!s->sacked && s->tries == 1 && s->sent_us && now > s->sent_us)
			rtt_sample(p, now - s->sent_us);
		s->len = 0;
		slot_let_go(l, p, s);
		p->una++;
		acked++;
	}
	for (unsigned i = 0; w->sack && i < 64; i++) {
		uint64_t seq = w->ack + 1 + i;
		struct udp_slot *s = &p->tx[seq % UDP_WINDOW];

		if (seq < p->una || seq >= p->next || !(w->sack >> i & 1) || s->sacked)
			continue;
		if (s->tries == 1 && s->sent_us && now > s->sent_us)
			rtt_sample(p, now - s->sent_us);
		s->sacked = true;
	}
	if (acked) {
		for (uint64_t k = 0; k < acked; k++)
			p->cwnd += p->cwnd < p->ssthresh ? 1.0 : 1.0 / p->cwnd;
		if (p->cwnd > UDP_WINDOW)
			p->cwnd = UDP_WINDOW;
		if (p->una == p->next) {
			p->due_us = 0;
			busy_update(l, p);
		} else {
			p->due_us = now + p->rto_us;
		}
	}
	if (w->sack && p->una < p->next)
		fast_retransmit(l, p, now);
	if (acked && p->meet_owed)
		meet_owed_send(l, p);
}

/* ---- receiving ---------------------------------------------------------------- */

static void owe(struct udp_link *l, struct lm_link_peer *p)
{
	p->owed++;
	if (!p->owed_listed) {
		p->owed_listed = true;
		lm_list_push_back(&l->owed, &p->owed_node);
	}
}

/* Hand p's next packet in order to the engine (its payload already
 * where the engine placed it, when placed), or take its handshake step:
 * 1 when handed up. */
static int deliver(struct udp_link *l, struct lm_link_peer *p, const uint8_t *buf,
                   bool placed)
{
	const struct udp_wire *w = (const struct udp_wire *)buf;

	if (w->type == UDP_T_MEET) {
		meet_take(l, p, w->flags, buf + sizeof(*w), w->len);
		return 0;
	}
	l->up_bytes += w->len;
	if (placed) {
		l->placed(l->arg, &p->addr, buf + sizeof(*w), w->len);
		l->placed_now = true;
		l->placing = UDP_PLACE_TRIES;
		l->n_placed++;
		return 1;
	}
	if (w->len >= UDP_PLACE_MIN && l->place && !l->gro)
		l->placing = UDP_PLACE_TRIES; /* the rest of a large message may follow */
	l->recv(l->arg, &p->addr, buf + sizeof(*w), buf + sizeof(*w) + l->hdr_size, w->len);
	return 1;
}

static int held_deliver(struct udp_link *l, struct lm_link_peer *p);

/* A DATA packet of p's current epoch (its payload placed: buf holds the
 * headers alone, and only the next in order is taken).  Returns packets
 * handed up. */
static int on_data(struct udp_link *l, struct lm_link_peer *p, const uint8_t *buf,
                   size_t len, uint64_t seq, bool placed)
{
	int n = 0;

	owe(l, p);
	p->shorts_off = false; /* its packet: we know its pair as it is now */
	if (placed && seq != p->rx_next)
		return 0;
	if (seq < p->rx_next || seq >= p->rx_next + UDP_WINDOW) {
		l->n_dup++;
		return 0; /* a duplicate: our acknowledgement was lost */
	}
	if (seq != p->rx_next) {
		struct udp_held *h = &p->held[seq % UDP_WINDOW];

		l->n_ooo++;
		if (!h->buf && (h->buf = malloc(len))) {
			memcpy(h->buf, buf, len);
			h->len = len;
			p->n_held++;
		}
		return 0;
	}
	p->rx_next++;
	n += deliver(l, p, buf, placed);
	return n + held_deliver(l, p);
}

/* p's packets held ahead of a gap that its last packet in order closed,
 * handed up in order.  The engine may have sent from inside deliver, and
 * p's epoch moved on only through our own calls: held packets stay
 * valid. */
static int held_deliver(struct udp_link *l, struct lm_link_peer *p)
{
	int n = 0;

	while (p->n_held) {
		struct udp_held *h = &p->held[p->rx_next % UDP_WINDOW];
		uint8_t *b = h->buf;

		if (!b)
			break;
		h->buf = NULL;
		p->n_held--;
		p->rx_next++;
		n += deliver(l, p, b, false);
		free(b);
	}
	return n;
}

/* One datagram from `from`, its checks passed (its payload placed: buf
 * holds its headers alone).  Returns packets handed to the engine. */
static int on_checked(struct udp_link *l, const uint8_t *buf, size_t len,
                      const union lm_inet_addr *from, uint64_t now, bool placed)
{
	struct udp_wire w;
	struct lm_link_peer *p;

	memcpy(&w, buf, sizeof(w));
	p = peer_find(l, from);
	if (!p && w.type == UDP_T_ACK)
		return 0; /* nothing of ours to acknowledge */
	if (!p && !(p = peer_get(l, from)))
		return 0;
	if (w.dst_inc && w.dst_inc != l->inc) {
		/* For a process that had our address before us: tell its
		 * sender we are another. */
		drop_log(l, "for another incarnation");
		if (w.src_inc < p->inc)
			return 0;
		if (w.src_inc > p->inc) {
			if (p->inc && !p->anyone)
				peer_renewed(l, p);
			p->inc = w.src_inc;
			p->anyone = false;
			rx_drop(p);
		}
		ack_send(l, p, 0);
		return 0;
	}
	if (w.src_inc != p->inc) {
		if (w.src_inc < p->inc) {
			drop_log(l, "from an earlier incarnation");
			return 0;
		}
		if (p->inc && !p->anyone)
			peer_renewed(l, p);
		p->inc = w.src_inc;
		rx_drop(p);
	}
	if (w.flags & UDP_F_BYE) {
		/* Its endpoint closes, its last acknowledgement here: it waits
		 * for our answer, and is gone for us after it (once: a probe
		 * sent again, our answer lost, is only answered). */
		on_ack(l, p, &w, now);
		ack_send(l, p, UDP_F_ANSWER);
		if (!p->dead && !p->anyone)
			peer_lost(l, p, "its endpoint closed");
		return 0;
	}
	p->anyone = false;
	p->live_ms = now / 1000;
	p->probing_ms = 0;
	if (w.flags & UDP_F_PROBE) {
		p->answer_owed = true; /* at the end of this poll */
		owe(l, p);
	}
	if (w.flags & UDP_F_ANSWER)
		p->answered = true;
	on_ack(l, p, &w, now);
	/* A closing link takes no more packets: unacknowledged, they fail at
	 * their sender when our port has closed. */
	if (w.type == UDP_T_ACK || l->closing)
		return 0;
	if (w.epoch < p->rx_epoch)
		return 0;
	if (w.epoch > p->rx_epoch) {
		/* The sender began again: what it sent before is over. */
		bool was = p->rx_epoch != 0;

		rx_drop(p);
		p->rx_epoch = w.epoch;
		if (was && l->on_lost)
			l->on_lost(l->arg, &p->addr);
	}
	return on_data(l, p, buf, len, w.seq, placed);
}

/* A short packet from `from`, its checks passed: taken as the long form
 * it stands for, when it is of the pair we know.  Returns packets handed
 * to the engine. */
static int on_short(struct udp_link *l, const uint8_t *buf, const union lm_inet_addr *from,
                    uint64_t now)
{
	struct lm_link_peer *p = peer_find(l, from);
	uint8_t *out = (uint8_t *)l->sbuf, *eh = out + sizeof(struct udp_wire);
	const uint8_t *at = buf + sizeof(struct udp_short);
	struct udp_short h;
	struct udp_wire w;

	memcpy(&h, buf, sizeof(h));
	if (!l->shorts || !p || p->anyone || !p->rx_epoch ||
	    h.pair != udp_pair_tag(p->inc, l->inc, p->rx_epoch, p->epoch)) {
		drop_log(l, "short, of no pair we know");
		return 0;
	}
	w = (struct udp_wire){.magic = UDP_MAGIC,
	                      .version = UDP_PROTO_VERSION,
	                      .type = UDP_T_DATA,
	                      .hdr_len = (uint8_t)l->hdr_size,
	                      .len = h.len,
	                      .src_inc = p->inc,
	                      .dst_inc = l->inc,
	                      .epoch = p->rx_epoch,
	                      .ack_epoch = p->epoch,
	                      /* the nearest to what each side expects */
	                      .seq = p->rx_next +
	                             (uint64_t)(int64_t)(int32_t)(h.seq - (uint32_t)p->rx_next),
	                      .ack = p->next - (uint32_t)((uint32_t)p->next - h.ack)};
	if (h.flags & UDP_S_SACK) {
		memcpy(&w.sack, at, 8);
		at += 8;
	}
	for (size_t i = 0; i < l->hdr_size / 8; i++) {
		uint64_t v = 0;

		if (h.words >> i & 1) {
			memcpy(&v, at, 8);
			at += 8;
		}
		memcpy(eh + 8 * i, &v, 8);
	}
	if (w.seq == p->rx_next && !l->closing) {
		/* The next in order, as on_checked and on_data would take it
		 * (the pair matched: ours, its epoch, no flags), its payload
		 * handed up where it was read. */
		p->live_ms = now / 1000;
		p->probing_ms = 0;
		on_ack(l, p, &w, now);
		owe(l, p);
		p->shorts_off = false;
		p->rx_next++;
		l->up_bytes += h.len;
		l->recv(l->arg, &p->addr, eh, at, h.len);
		return 1 + held_deliver(l, p);
	}
	memcpy(out, &w, sizeof(w));
	memcpy(eh + l->hdr_size, at, h.len);
	return on_checked(l, out, sizeof(w) + l->hdr_size + h.len, from, now, false);
}

/* One datagram from `from`.  Returns packets handed to the engine. */
static int on_dgram(struct udp_link *l, const uint8_t *buf, size_t len,
                    const union lm_inet_addr *from, uint64_t now)
{
	int ret = udp_wire_check(buf, len, l->hdr_size, l->rx_payload_max);

	if (ret) {
		drop_log(l, ret == -FI_EIO ? "check failed" : "malformed");
		return 0;
	}
	if (buf[offsetof(struct udp_wire, type)] == UDP_T_SHORT)
		return on_short(l, buf, from, now);
	return on_checked(l, buf, len, from, now, false);
}

/* The size of the datagrams the kernel joined into what h read; 0: one. */
static size_t joined_size(struct msghdr *h)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		int seg;

		if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO ||
		    c->cmsg_len < CMSG_LEN(sizeof(seg)))
			continue;
		memcpy(&seg, CMSG_DATA(c), sizeof(seg));
		return seg > 0 ? (size_t)seg : 0;
	}
	return 0;
}

/* What one read took from `from`: a datagram, or several the kernel
 * joined, each taken apart.  Returns packets handed to the engine. */
static int on_read(struct udp_link *l, struct mmsghdr *r, const union lm_inet_addr *from,
                   uint64_t now)
{
	const uint8_t *buf = r->msg_hdr.msg_iov->iov_base;
	size_t len = r->msg_len, seg = l->gro ? joined_size(&r->msg_hdr) : 0;
	int n = 0;

	if (!seg || seg >= len)
		return on_dgram(l, buf, len, from, now);
	if (seg > l->dgram_max) {
		drop_log(l, "joined datagrams larger than ours");
		return 0;
	}
	l->n_joined++;
	for (size_t off = 0; off < len; off += seg) {
		const uint8_t *d = buf + off;
		size_t dlen = LM_MIN(seg, len - off);

		if ((uintptr_t)d % 8) { /* not cut where we cut */
			memcpy(l->rseg, d, dlen);
			d = l->rseg;
		}
		n += on_dgram(l, d, dlen, from, now);
	}
	return n;
}

/* The datagram (or joined ones) rmsg[i] read: taken.  Returns packets
 * handed to the engine. */
static int take_read(struct udp_link *l, int i, uint64_t now)
{
	union lm_inet_addr from;

	if (lm_inet_load(&from, &l->rfrom[i], l->rmsg[i].msg_hdr.msg_namelen, l->family) ||
	    (l->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC)) {
		drop_log(l, "truncated or of another family");
		return 0;
	}
	return on_read(l, &l->rmsg[i], &from, now);
}

/* While placing: the next datagram's headers, peeked; if it is the next
 * DATA packet in order of its sender, large, and the engine places it,
 * its payload is read there and summed, then handed up (placed) or,
 * damaged, given back (unplaced).  1: a datagram was taken (*handed:
 * packets handed up); 0: the next one is not placed (placing ends, and
 * it is left for the usual read); -1: nothing to read, or an error. */
static int place_one(struct udp_link *l, uint64_t now, int *handed)
{
	size_t hlen = sizeof(struct udp_wire) + l->hdr_size, niov, len;
	struct iovec iov[1 + LM_IOV_LIMIT];
	struct msghdr m = {.msg_name = &l->rfrom[0],
	                   .msg_namelen = sizeof(l->rfrom[0]),
	                   .msg_iov = iov,
	                   .msg_iovlen = 1};
	const void *hdr = l->phead + sizeof(struct udp_wire);
	union lm_inet_addr from;
	struct lm_link_peer *p;
	struct udp_wire w;
	uint32_t body = 0;
	ssize_t got;

	iov[0] = (struct iovec){l->phead, hlen};
	/* MSG_TRUNC: the datagram's whole length, though only its headers
	 * are read. */
	got = recvmsg(l->sock, &m, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	if (got < 0)
		return -1;
	len = (size_t)got;
	memcpy(&w, l->phead, sizeof(w));
	if (len < hlen + UDP_PLACE_MIN || w.type != UDP_T_DATA || l->closing ||
	    lm_inet_load(&from, &l->rfrom[0], m.msg_namelen, l->family) ||
	    head_check(l->phead, hlen, len, l->hdr_size, l->rx_payload_max) ||
	    !(p = peer_find(l, &from)) || p->anyone || p->dead || w.src_inc != p->inc ||
	    w.dst_inc != l->inc || w.epoch != p->rx_epoch || w.seq != p->rx_next)
		return 0;
	niov = l->place(l->arg, &p->addr, hdr, w.len, iov + 1);
	if (!niov)
		return 0;
	m.msg_namelen = sizeof(l->rfrom[0]);
	m.msg_iovlen = 1 + niov;
	got = recvmsg(l->sock, &m, MSG_TRUNC | MSG_DONTWAIT);
	if (got < 0) { /* an error queued meanwhile: the usual read takes it */
		int err = errno;

		l->unplaced(l->arg, &from, hdr, w.len);
		errno = err;
		return -1;
	}
	for (size_t i = 1; got == (ssize_t)len && i <= niov; i++)
		if (iov[i].iov_len)
			body = udp_crc32c(body, iov[i].iov_base, iov[i].iov_len);
	if (got != (ssize_t)len || memcmp(&w, l->phead, sizeof(w)) || body != w.body) {
		/* Damaged (or, impossibly, another datagram than the one
		 * peeked): the packet comes again. */
		l->unplaced(l->arg, &from, hdr, w.len);
		drop_log(l, "check failed");
		return 1;
	}
	l->placed_now = false;
	*handed += on_checked(l, l->phead, hlen, &from, now, true);
	if (!l->placed_now)
		l->unplaced(l->arg, &from, hdr, w.len);
	return 1;
}

/* Datagrams one at a time while placing, up to want: placed, or read
 * whole and taken as usual (a large one in order then goes on placing).
 * Returns packets handed up; *more when placing ended with the socket
 * maybe not empty. */
static int place_reads(struct udp_link *l, int want, uint64_t *now, bool *more)
{
	int n = 0, got = 1;

	*now = lm_now_us();
	for (int i = 0; i < want && l->placing && got >= 0; i++) {
		got = place_one(l, *now, &n);
		if (got)
			continue;
		l->placing--;
		l->rmsg[0].msg_hdr.msg_namelen = sizeof(union lm_inet_addr);
		ssize_t r = recvmsg(l->sock, &l->rmsg[0].msg_hdr, MSG_DONTWAIT);

		l->rdirty = LM_MAX(l->rdirty, 1);

		if (r < 0) {
			got = -1;
			break;
		}
		l->rmsg[0].msg_len = (unsigned)r;
		n += take_read(l, 0, *now);
	}
	*more = !l->placing || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
	if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		l->placing = 0;
	return n;
}

/* Errors the kernel queued (IP_RECVERR): a closed port at a peer's
 * address (the process died) makes it gone. */
static void errs_read(struct udp_link *l)
{
	uint64_t now = lm_now_ms();

	l->errs = false;
	for (;;) {
		union lm_inet_addr to;
		char ctl[512], data[64];
		struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
		struct msghdr m = {.msg_name = &to,
		                   .msg_namelen = sizeof(to),
		                   .msg_iov = &iov,
		                   .msg_iovlen = 1,
		                   .msg_control = ctl,
		                   .msg_controllen = sizeof(ctl)};
		struct lm_link_peer *p;
		union lm_inet_addr a;
		bool refused = false;

		memset(&to, 0, sizeof(to));
		if (recvmsg(l->sock, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			struct sock_extended_err ee;

			if (!((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)))
				continue;
			memcpy(&ee, CMSG_DATA(c), sizeof(ee));
			refused = ee.ee_errno == ECONNREFUSED;
		}
		if (!refused || lm_inet_load(&a, &to, m.msg_namelen, l->family))
			continue;
		p = peer_find(l, &a);
		if (!p || p->dead)
			continue;
		if (p->inc || (p->first_tx_ms && now - p->first_tx_ms > UDP_REFUSED_GRACE_MS))
			peer_lost(l, p, "its port is closed");
	}
}

/* Send again what is due: a timeout's oldest packet, and slots the
 * socket had no room for. */
static void timers_run(struct udp_link *l, uint64_t now)
{
	struct lm_list todo, *it;
	uint64_t now_ms = now / 1000;

	/* Each busy peer once, back on the list before its turn: a peer
	 * lost meanwhile (tx_drop) leaves whichever list it is on. */
	lm_list_init(&todo);
	lm_list_splice_back(&todo, &l->busy);
	while ((it = lm_list_pop_front(&todo))) {
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, busy_node);

		lm_list_push_back(&l->busy, it);
		if (p->unsent) {
			p->unsent = false;
			for (uint64_t seq = p->una; seq < p->next; seq++) {
				struct udp_slot *s = &p->tx[seq % UDP_WINDOW];

				if (!s->sent_us && s->len && slot_send(l, p, s, now))
					break;
			}
		}
		if (!p->due_us || p->due_us > now) {
			busy_update(l, p);
			continue;
		}
		if (now_ms - p->live_ms > (uint64_t)l->params->peer_timeout_ms) {
			peer_lost(l, p, "silent past the liveness time");
			continue;
		}
		/* Everything not acknowledged that had time to be. */
		for (uint64_t seq = p->una; seq < p->next; seq++) {
			struct udp_slot *s = &p->tx[seq % UDP_WINDOW];

			if (s->sacked || !s->sent_us || now - s->sent_us < p->rto_us / 2)
				continue;
			s->fast = false;
			slot_send(l, p, s, now);
		}
		l->n_timeouts++;
		p->ssthresh = p->cwnd / 2 > UDP_CWND_MIN ? p->cwnd / 2 : UDP_CWND_MIN;
		p->cwnd = UDP_CWND_MIN;
		p->rto_us = p->rto_us * 2 > UDP_RTO_MAX_US ? UDP_RTO_MAX_US : p->rto_us * 2;
		p->due_us = now + p->rto_us;
	}
}

/* Acknowledge what we owe, at the end of the poll that took it: the
 * application may call nothing more for a while (wait for its peer by
 * other means), and the sender's sends complete only on our word.  A
 * packet we sent back meanwhile carried it already. */
static void acks_flush(struct udp_link *l)
{
	struct lm_list *it;

	while ((it = lm_list_pop_front(&l->owed))) {
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, owed_node);

		p->owed_listed = false;
		if ((p->owed || p->answer_owed) && !p->dead)
			ack_send(l, p, p->answer_owed ? UDP_F_ANSWER : 0);
		p->answer_owed = false;
	}
}

/* A poll that handed small packets up leaves their acknowledgements for
 * the next call, when the application's answer usually carries them, and
 * the keeper sends them if that call does not come (keeper.c): true when
 * held.  Probes are answered at once, and more peers than a hold covers
 * acknowledged at once too; so are large payloads, whose sender streams
 * more behind them and waits on our word to open its window. */
static bool acks_hold(struct udp_link *l, uint64_t now)
{
	struct udp_kept *k = &l->kept;
	struct lm_list *it;
	unsigned n = 0;

	lm_list_foreach(&l->owed, it)
	{
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, owed_node);
		unsigned owed = p->owed;

		if (p->answer_owed || n == UDP_KEPT_MAX)
			return false;
		if (!owed || p->dead)
			continue;
		k->ack[n].to = p->addr;
		wire_head(l, p, &k->ack[n].w, UDP_T_ACK);
		p->owed = owed; /* still ours to send, unless a packet carries it */
		n++; /* sealed by the keeper, if it sends it */
	}
	k->n = n;
	k->sock = l->sock;
	return n && udp_kept_hold(k, now);
}

/* The start of a call that may send: a hold is the caller's again. */
static void acks_unhold(struct udp_link *l)
{
	if (atomic_load_explicit(&l->kept.state, memory_order_relaxed) != UDP_KEPT_NONE)
		udp_kept_release(&l->kept);
}

/* Up to want datagrams into rmsg: how many, or -1 (errno says why).
 * After a read that found nothing, one datagram with recvfrom into the
 * first buffer: an idle socket polled busily costs less so (no message
 * headers copied in), and a ping-pong's datagram comes alone; while
 * datagrams come, recvmmsg takes them in runs. */
static int read_dgrams(struct udp_link *l, int want)
{
	int got;

	if (l->quiet && !l->gro) {
		socklen_t alen = sizeof(l->rfrom[0]);
		ssize_t n = recvfrom(l->sock, l->riov[0].iov_base, l->riov[0].iov_len,
		                     MSG_DONTWAIT | MSG_TRUNC, &l->rfrom[0].sa, &alen);

		if (n < 0)
			return -1;
		l->rmsg[0].msg_len = (unsigned)n;
		l->rmsg[0].msg_hdr.msg_namelen = alen;
		l->rmsg[0].msg_hdr.msg_flags = (size_t)n > l->riov[0].iov_len ? MSG_TRUNC : 0;
		l->rdirty = LM_MAX(l->rdirty, 1);
		l->quiet = false;
		return 1;
	}
	for (int i = 0; i < l->rdirty; i++) {
		l->rmsg[i].msg_hdr.msg_namelen = sizeof(union lm_inet_addr);
		if (l->gro)
			l->rmsg[i].msg_hdr.msg_controllen = sizeof(l->rctl[i]);
	}
	l->rdirty = 0;
	if (l->quiet) { /* recvmsg: the joined size comes as a control message */
		ssize_t n = recvmsg(l->sock, &l->rmsg[0].msg_hdr, MSG_DONTWAIT);

		l->rdirty = 1;
		if (n < 0)
			return -1;
		l->rmsg[0].msg_len = (unsigned)n;
		l->quiet = false;
		return 1;
	}
	got = recvmmsg(l->sock, l->rmsg, (unsigned)want, MSG_DONTWAIT, NULL);
	l->rdirty = got > 0 ? got : 0;
	l->quiet = got <= 0;
	return got;
}

static int udp_link_poll(struct lm_link *link, int budget)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);
	int want = budget < UDP_BATCH ? budget : UDP_BATCH;
	uint64_t now = 0;
	int got, n = 0;

	acks_unhold(l);
	if (!lm_list_empty(&l->owed))
		acks_flush(l);
	l->up_bytes = 0;
	if (l->errs)
		errs_read(l);
	if (l->placing && want > 0) {
		bool more;

		n = place_reads(l, want, &now, &more);
		if (!more)
			want = 0; /* the socket is empty, or the budget used */
	}
	/* A queued error (a closed port's) is reported before the datagrams
	 * that came ahead of it: read it, then them, at once. */
	for (int k = 0; k < 2; k++) {
		got = want > 0 ? read_dgrams(l, want) : 0;
		if (got >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			break;
		errs_read(l);
	}
	if (got > 0 || !lm_list_empty(&l->busy))
		now = lm_now_us();
	for (int i = 0; i < got; i++)
		n += take_read(l, i, now);
	if (!lm_list_empty(&l->busy)) {
		l->unsent = false;
		timers_run(l, now);
	}
	if (!lm_list_empty(&l->owed) &&
	    !(n > 0 && l->up_bytes <= UDP_HOLD_BYTES && acks_hold(l, now)))
		acks_flush(l);
	return n;
}

/* ---- sleeping ----------------------------------------------------------------- */

static void timer_set(int fd, uint64_t us)
{
	struct itimerspec t = {.it_value = {.tv_sec = (time_t)(us / 1000000),
	                                    .tv_nsec = (long)(us % 1000000) * 1000}};

	if (!us)
		t.it_value.tv_nsec = 1;
	timerfd_settime(fd, 0, &t, NULL);
}

/* Both timers stopped, and their expirations read away. */
static void timers_off(struct udp_link *l)
{
	struct itimerspec off = {0};

	if (l->rto_set) {
		timerfd_settime(l->rto_fd, 0, &off, NULL);
		lm_fd_drain(l->rto_fd);
		l->rto_set = false;
	}
	if (l->wake_set) {
		timerfd_settime(l->wake_fd, 0, &off, NULL);
		lm_fd_drain(l->wake_fd);
		l->wake_set = false;
	}
}

static void udp_link_arm(struct lm_link *link)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);
	uint64_t due = 0, now, least;
	struct lm_list *it;

	/* Each pass arms afresh: the engine asks wake_after again after it
	 * if it still wants it, and the retransmission timer follows what
	 * is in flight now. */
	timers_off(l);
	l->armed = true;
	acks_unhold(l);
	acks_flush(l);
	errs_read(l); /* a queued error keeps the socket readable */
	if (lm_list_empty(&l->busy))
		return;
	lm_list_foreach(&l->busy, it)
	{
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, busy_node);

		if (p->due_us && (!due || p->due_us < due))
			due = p->due_us;
	}
	now = lm_now_us();
	least = now + UDP_ARMED_RTO_MS * 1000ull;
	if (l->unsent) /* the socket had no room: try again soon */
		timer_set(l->rto_fd, 1000);
	else if (due)
		timer_set(l->rto_fd, (due > least ? due : least) - now);
	l->rto_set = l->unsent || due;
}

static void udp_link_disarm(struct lm_link *link)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	l->armed = false;
	timers_off(l);
}

static void udp_link_wake_after(struct lm_link *link, int ms)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	timer_set(l->wake_fd, (uint64_t)ms * 1000);
	l->wake_set = true;
}

/* A full window fills again when acknowledgements arrive (the socket
 * turns readable) or its timeout passes (the armed timer). */
static int udp_link_want_room(struct lm_link *link, struct lm_link_peer *p)
{
	(void)link, (void)p;
	return 0;
}

/* Asked while something waits on p: a peer silent for UDP_PROBE_MS is
 * probed, and gone if it stays silent for the liveness time. */
static bool udp_link_peer_alive(struct lm_link *link, struct lm_link_peer *p)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);
	uint64_t now = lm_now_ms();

	if (p->dead || now - p->live_ms < UDP_PROBE_MS)
		return !p->dead;
	if (p->probing_ms && now - p->probing_ms > (uint64_t)l->params->peer_timeout_ms) {
		peer_lost(l, p, "silent past the liveness time");
		return false;
	}
	if (now - p->probe_ms >= UDP_PROBE_MS) {
		if (!p->probing_ms)
			p->probing_ms = now;
		p->probe_ms = now;
		ack_send(l, p, UDP_F_PROBE);
	}
	return true;
}

/* The engine let go of what was with p: the next packet meets it afresh
 * (a restarted peer offers anew). */
static void udp_link_peer_reset(struct lm_link *link, struct lm_link_peer *p)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	/* The engine failed everything with p.  Unless it was lost to a new
	 * incarnation we already hear from, its endpoint went (closed, or
	 * never answered), and another may have opened at its address: what
	 * we still had to send it is over (a new epoch), and the next
	 * datagram meets whoever is there. */
	if (!p->renewed) {
		if (p->inc && !p->dead)
			tx_drop(l, p);
		p->anyone = p->inc != 0;
		p->meet = MEET_NONE;
		p->asked = false;
		p->meet_owed = 0;
	}
	/* (Else its handshake may be under way or done: it stays.) */
	p->renewed = false;
	p->dead = false;
}

/* ---- open and close ----------------------------------------------------------- */

/* An incarnation: later ones are larger (the wall clock in microseconds,
 * which a restart at the same address cannot pass back), with random low
 * bits to tell apart endpoints opened in the same microsecond. */
static uint64_t inc_draw(void)
{
	struct timespec t;
	uint16_t r = 0;

	clock_gettime(CLOCK_REALTIME, &t);
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint16_t)t.tv_nsec;
	return (((uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000) << 12) |
	       (r & 0xfff) | 1;
}

static int iface_mtu(const union lm_inet_addr *a);

size_t udp_dgram_max(const struct udp_params *params, const union lm_inet_addr *a)
{
	int mtu = params->mtu ? params->mtu : iface_mtu(a);

	if (!mtu)
		mtu = UDP_MTU_DEFAULT;
	return LM_MIN((size_t)mtu - UDP_IP_OVERHEAD, (size_t)UDP_DGRAM_MAX);
}

size_t udp_link_payload(const struct udp_params *params, const union lm_inet_addr *a,
                        size_t hdr_size)
{
	/* Our datagrams a multiple of 8 bytes long (see udp_link.gso). */
	return (udp_dgram_max(params, a) & ~(size_t)7) - sizeof(struct udp_wire) - hdr_size;
}

/* The MTU of the interface that holds address a; 0 when none does. */
static int iface_mtu(const union lm_inet_addr *a)
{
	struct ifreq r;
	int mtu = 0, s;

	memset(&r, 0, sizeof(r));
	if (!lm_iface_of_addr(a, r.ifr_name))
		return 0;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && !ioctl(s, SIOCGIFMTU, &r))
		mtu = r.ifr_mtu;
	if (s >= 0)
		close(s);
	return mtu;
}

static int sock_setup(struct udp_link *l, union lm_inet_addr *a)
{
	int one = 1, ret;

	ret = lm_sock_bind_type(SOCK_DGRAM, &a->sa, lm_inet_len(l->family),
	                        l->params->port_low, l->params->port_high, &l->sock);
	if (ret)
		return ret;
	if (lm_inet_of_fd(l->sock, false, a))
		return -FI_EIO;
	if (l->params->sockbuf > 0) {
		setsockopt(l->sock, SOL_SOCKET, SO_SNDBUF, &l->params->sockbuf, sizeof(int));
		setsockopt(l->sock, SOL_SOCKET, SO_RCVBUF, &l->params->sockbuf, sizeof(int));
	}
	if (l->family == AF_INET)
		setsockopt(l->sock, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
	else
		setsockopt(l->sock, IPPROTO_IPV6, IPV6_RECVERR, &one, sizeof(one));
	return 0;
}

static int fds_setup(struct udp_link *l)
{
	int fds[] = {l->sock, -1, -1};

	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->rto_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	l->wake_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->epfd < 0 || l->rto_fd < 0 || l->wake_fd < 0)
		return lm_neg_errno(errno);
	fds[1] = l->rto_fd;
	fds[2] = l->wake_fd;
	for (int i = 0; i < 3; i++)
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fds[i],
		              &(struct epoll_event){.events = EPOLLIN | EPOLLERR}))
			return lm_neg_errno(errno);
	return 0;
}

static void link_free(struct udp_link *l)
{
	int fds[] = {l->sock, l->epfd, l->rto_fd, l->wake_fd};
	struct lm_list *it;

	udp_kept_leave(&l->kept);
	while ((it = lm_list_pop_front(&l->peers_all))) {
		struct lm_link_peer *p = lm_container_of(it, struct lm_link_peer, node);

		for (unsigned i = 0; i < UDP_WINDOW; i++)
			free(p->tx[i].buf);
		rx_drop(p);
		free(p);
	}
	lm_hmap_fini(&l->peers);
	while (l->n_spare)
		free(l->spare[--l->n_spare]);
	for (size_t i = 0; i < LM_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(l->rbuf);
	free(l->rseg);
	free(l->phead);
	free(l);
}

/* Kernel batching, where the parameter allows it, the kernel has it, and
 * a datagram is small enough for two to share a send. */
static void kernel_batching(struct udp_link *l)
{
	int one = 1, seg;
	socklen_t len = sizeof(seg);

	if (!l->params->gso || 2 * l->dgram_max > UDP_DGRAM_MAX)
		return;
	l->gso = !getsockopt(l->sock, SOL_UDP, UDP_SEGMENT, &seg, &len);
	l->gso_segs = (unsigned)LM_MIN((size_t)UDP_GSO_SEGS, UDP_DGRAM_MAX / l->dgram_max);
	l->gro = !setsockopt(l->sock, SOL_UDP, UDP_GRO, &one, sizeof(one));
}

static int link_open(int family, void *ctx, const struct lm_link_attr *attr,
                     const void *name, struct lm_link **out)
{
	const struct udp_params *params = ctx;
	union lm_inet_addr a = {.sa.sa_family = (sa_family_t)family};
	struct udp_link *l;
	size_t stride;
	int ret;

	if ((name && lm_inet_load(&a, name, lm_inet_len(family), family)) ||
	    attr->hdr_size > UINT8_MAX || attr->connected)
		return -FI_EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -FI_ENOMEM;
	l->sock = l->epfd = l->rto_fd = l->wake_fd = -1;
	l->family = family;
	l->params = params;
	lm_list_init(&l->peers_all);
	lm_list_init(&l->owed);
	lm_list_init(&l->busy);
	ret = lm_hmap_init(&l->peers, UDP_PEERS_EXPECTED);
	if (ret) {
		free(l);
		return ret;
	}
	ret = sock_setup(l, &a);
	if (!ret)
		ret = fds_setup(l);
	if (ret)
		goto err;
	l->self = a;
	l->inc = inc_draw();
	l->hdr_size = attr->hdr_size;
	l->shorts = l->hdr_size % 8 == 0 && l->hdr_size <= 64;
	l->recv = attr->recv;
	l->on_lost = attr->lost;
	l->arg = attr->arg;
	l->offer = attr->offer;
	l->offer_len = attr->offer ? LM_MIN(attr->offer_len, (size_t)UDP_MEET_MAX) : 0;
	l->met = attr->met;
	l->met_arg = attr->met_arg;
	l->dgram_max = udp_dgram_max(params, &a);
	if (l->dgram_max < sizeof(struct udp_wire) + l->hdr_size + 64) {
		ret = -FI_EINVAL;
		goto err;
	}
	l->rx_payload_max = l->dgram_max - sizeof(struct udp_wire) - l->hdr_size;
	kernel_batching(l);
	if (attr->place && attr->placed && attr->unplaced && !l->gro) {
		l->place = attr->place;
		l->placed = attr->placed;
		l->unplaced = attr->unplaced;
		l->phead = malloc(sizeof(struct udp_wire) + l->hdr_size);
		if (!l->phead) {
			ret = -FI_ENOMEM;
			goto err;
		}
	}
	/* Each datagram at a multiple of 64 bytes: its headers are read in
	 * place, as structs (1452 bytes, a 1500-byte MTU's, would leave
	 * every other one misaligned). */
	stride = l->gro ? UDP_GRO_BUF : (l->dgram_max + 63) & ~(size_t)63;
	l->rbuf = malloc(UDP_BATCH * stride);
	l->rseg = l->gro ? malloc(l->dgram_max) : NULL;
	if (!l->rbuf || (l->gro && !l->rseg)) {
		ret = -FI_ENOMEM;
		goto err;
	}
	l->rdirty = UDP_BATCH;
	for (int i = 0; i < UDP_BATCH; i++) {
		l->riov[i] = (struct iovec){l->rbuf + (size_t)i * stride,
		                            l->gro ? UDP_GRO_BUF : l->dgram_max};
		l->rmsg[i].msg_hdr = (struct msghdr){.msg_name = &l->rfrom[i],
		                                     .msg_iov = &l->riov[i],
		                                     .msg_iovlen = 1};
		if (l->gro)
			l->rmsg[i].msg_hdr.msg_control = l->rctl[i];
	}
	l->link.ops = family == AF_INET6 ? &udp6_link_ops : &udp_link_ops;
	l->link.fd = l->epfd;
	l->link.max_payload = udp_link_payload(params, &a, l->hdr_size);
	l->link.inline_max = 0;
	/* A death is noticed by probing (peer_alive), not told. */
	l->link.caps = LM_LINK_TELLS_DELIVERY;
	l->link.addr = &l->self;
	*out = &l->link;
	return 0;
err:
	link_free(l);
	return ret;
}

/* Before the port closes: the peers we took packets from are probed, and
 * answer, until each has answered (so holds our last acknowledgement),
 * is gone, or UDP_CLOSE_WAIT_MS passed (a peer that does not progress).
 * Packets arriving meanwhile are not taken (l->closing). */
static void farewell(struct udp_link *l)
{
	uint64_t start = lm_now_ms(), sent = 0, now;
	struct lm_list *it;
	unsigned waiting;

	lm_list_foreach(&l->peers_all, it)
		lm_container_of(it, struct lm_link_peer, node)->answered = false;
	do {
		now = lm_now_ms();
		waiting = 0;
		lm_list_foreach(&l->peers_all, it)
		{
			struct lm_link_peer *p =
			    lm_container_of(it, struct lm_link_peer, node);

			if (p->dead || p->self || !p->rx_epoch || p->answered)
				continue;
			waiting++;
			if (now - sent >= UDP_CLOSE_PROBE_MS)
				ack_send(l, p, UDP_F_PROBE | UDP_F_BYE);
		}
		if (now - sent >= UDP_CLOSE_PROBE_MS)
			sent = now;
		if (waiting) {
			struct pollfd pf = {.fd = l->sock, .events = POLLIN};

			poll(&pf, 1, 1);
			udp_link_poll(&l->link, UDP_BATCH);
		}
	} while (waiting && now - start < UDP_CLOSE_WAIT_MS);
}

/* Before closing: acknowledge what we took, so that the senders' sends
 * complete; what we sent and is unacknowledged is lost with us. */
static void udp_link_close(struct lm_link *link)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);

	l->closing = true; /* nothing more for the engine (it let its peers go) */
	udp_link_poll(link, 0);
	acks_flush(l);
	farewell(l);
	LM_INFO(udp_log_prov, FI_LOG_EP_DATA,
	        "closing: %llu datagrams sent, %llu of them again (%llu timeouts), "
	        "%llu in the short form; %llu duplicates and %llu out of order received; %llu held "
	        "acknowledgements sent by the keeper; %llu sends cut and %llu reads "
	        "joined by the kernel; %llu payloads placed; %llu lent ones copied\n",
	        (unsigned long long)l->n_sent, (unsigned long long)l->n_resent,
	        (unsigned long long)l->n_timeouts, (unsigned long long)l->n_short,
	        (unsigned long long)l->n_dup,
	        (unsigned long long)l->n_ooo, (unsigned long long)l->kept.fired,
	        (unsigned long long)l->n_cut, (unsigned long long)l->n_joined,
	        (unsigned long long)l->n_placed, (unsigned long long)l->n_owned);
	link_free(l);
}

void udp_link_counts(const struct lm_link *link, struct udp_link_counts *c)
{
	const struct udp_link *l = lm_container_of(link, const struct udp_link, link);

	*c = (struct udp_link_counts){.cut = l->n_cut, .joined = l->n_joined,
	                              .placed = l->n_placed, .shorts = l->n_short,
	                              .resent = l->n_resent};
}

static int udp_link_peer_open(struct lm_link *link, const void *addr,
                              struct lm_link_peer **peer)
{
	struct udp_link *l = lm_container_of(link, struct udp_link, link);
	union lm_inet_addr a;

	if (lm_inet_load(&a, addr, lm_inet_len(l->family), l->family))
		return -FI_EINVAL;
	*peer = peer_get(l, &a);
	if (!*peer)
		return -FI_ENOMEM;
	/* The engine resolves it afresh (a new AV entry), so nothing of the
	 * engine's waits on it: a peer that was gone (its endpoint closed;
	 * another may have opened at its address since) is tried again. */
	if ((*peer)->dead)
		udp_link_peer_reset(link, *peer);
	return 0;
}

/* Peers live as long as the link: their streams outlast AV entries. */
static void udp_link_peer_close(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link, (void)peer;
}

static int udp4_link_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                          struct lm_link **out)
{
	return link_open(AF_INET, ctx, attr, name, out);
}

static int udp6_link_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                          struct lm_link **out)
{
	return link_open(AF_INET6, ctx, attr, name, out);
}

#define UDP_LINK_OPS                                                                     \
	.name = "udp", .addr_to_str = lm_inet_to_str, .addr_str_max = UDP_ADDR_STR_MAX,  \
	.close = udp_link_close, .peer_open = udp_link_peer_open,                        \
	.peer_close = udp_link_peer_close, .send = udp_link_send,                        \
	.send_many = udp_link_send_many, .mark = udp_link_mark,                          \
	.unlend = udp_link_unlend, .delivered = udp_link_delivered,                      \
	.poll = udp_link_poll, .arm = udp_link_arm,                                      \
	.disarm = udp_link_disarm, .wake_after = udp_link_wake_after,                    \
	.want_room = udp_link_want_room, .peer_alive = udp_link_peer_alive,              \
	.peer_reset = udp_link_peer_reset, .peer_connect = udp_link_peer_connect,        \
	.addr_lane = lm_inet_lane

const struct lm_link_ops udp_link_ops = {
    UDP_LINK_OPS,
    .addrlen = sizeof(struct sockaddr_in),
    .addr_from_str = lm_inet4_from_str,
    .addr_check = lm_inet4_check,
    .open = udp4_link_open,
};

const struct lm_link_ops udp6_link_ops = {
    UDP_LINK_OPS,
    .addrlen = sizeof(struct sockaddr_in6),
    .addr_from_str = lm_inet6_from_str,
    .addr_check = lm_inet6_check,
    .open = udp6_link_open,
};
