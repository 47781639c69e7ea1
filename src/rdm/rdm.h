/* rdm.h - internal interface of the RDM engine: the wire header every link
 * carries, the engine's domain, endpoint, peer and request objects, and the
 * calls shared by its files (ep.c, send.c, recv.c, rndv.c, progress.c,
 * rma.c, atomic.c). */
#ifndef LOOM_RDM_H
#define LOOM_RDM_H

#include "util.h"
#include "link.h"

/* ---- wire format (LM_RDM_WIRE_VERSION, now 5) ----------------------------
 * Every packet is one 64-byte header followed by `len` payload bytes.
 * Fields are in the sender's byte order (links join processes or hosts of
 * one architecture; a foreign version byte is dropped with a warning).
 *
 *   0       1       2               4                               8
 *   +-------+-------+---------------+-------------------------------+
 *   |version|  op   |    flags      |   len (payload bytes)         |
 *   +-------+-------+---------------+-------------------------------+
 *   | size   : message / RMA length                                 | 8
 *   | tag    : tagged messages; atomic: op << 8 | datatype          | 16
 *   | data   : remote CQ data                                       | 24
 *   | sreq   : sender's request handle (echoed in CTS/FIN/ACK/RESP) | 32
 *   | rreq   : receiver's request handle (CTS, DATA); status (FIN)  | 40
 *   | addr   : RMA target address; DATA: byte offset               | 48
 *   | key    : RMA/atomic key; EAGER, RTS: receive context index  | 56
 *   +---------------------------------------------------------------+
 *
 * Message protocols (S = sender, R = receiver):
 *   eager:  S -EAGER(payload)-> R            [-ACK-> S for DELIVERY_COMPLETE]
 *   rndv:   S -RTS(iov list)-> R; R reads S's memory (bulk), R -FIN-> S
 *           or, without bulk: R -CTS-> S; S -DATA..DATA-> R; R -FIN-> S
 *   split:  (RTS with SPLIT: S may also write R's memory in bulk, for large
 *           messages) R -PUSH(R's iov list for [addr, addr + size))-> S
 *           then both copy at once: R reads [0, addr) of S's memory while S
 *           writes the rest into R's; S -PUSHED(status in data)-> R; once
 *           R has both halves, R -FIN-> S.  A failed PUSH (S may not write
 *           R's memory) is answered PUSHED(FI_EOPNOTSUPP) and R reads the
 *           rest itself.
 *   early:  on links that read byte streams (LM_LINK_EARLY) an RTS may
 *           carry the message's first bytes after its iov list
 *           (LM_HF_EARLY, addr = the list's length).  A receiver that
 *           matches the RTS when its header comes keeps them and answers
 *           at once with CTS from their end (CTS addr = the offset the
 *           DATA stream starts at), or FIN when they are the whole
 *           message; one that cannot drops them and later asks from 0.
 *           They are never buffered, so they take no eager credit.
 * Eager credit: a sender has at most LM_EAGER_CREDIT bytes of eager
 * payload to one peer that the peer has not consumed yet; a message that
 * does not fit goes by rendezvous (an RTS holds no buffer at the
 * receiver).  The receiver gives consumed bytes back with CREDIT (size =
 * bytes) once they add up to LM_CREDIT_RETURN, and in rreq of its EAGER
 * and RTS packets (bytes, 0: none) once LM_CREDIT_RIDE are owed, so
 * traffic both ways returns it without CREDIT packets.  So what one peer
 * makes a receiver hold for unexpected messages is bounded, and a
 * receiver need never stop reading a link because of conforming peers
 * (what stopped reading could hide the rendezvous data a posted receive
 * waits for).
 * RMA and atomics (I = initiator, T = target) execute at T after T checked
 * key, bounds and access (lm_mr_verify*); every one is answered, so I's
 * completion means the data is in place (delivery complete).  A failed
 * check is an answer with an error status and touches no memory.
 *   write, small: I -WRITE(payload, addr, key, LAST)-> T; T -WRITE_ACK-> I
 *   write, large: I -WRITE(RNDV, iov list)-> T; T reads I's memory (bulk),
 *                 T -FIN-> I; or without bulk: T -CTS-> I; I -DATA..-> T;
 *                 T -FIN-> I   (the message rendezvous' slots and packets)
 *   read:         I -READ_REQ(iov list; BULK if T may write it)-> T; T
 *                 writes I's memory (bulk), T -FIN-> I; or without bulk
 *                 T -READ_RESP(data at byte offset addr)..-> I (I done
 *                 when size bytes arrived); errors: T -FIN(status)-> I
 *   atomic:       I -ATOMIC(operands [, compares])-> T; T -ATOMIC_RESP
 *                 (status; old values for FETCH/COMPARE)-> I
 * Answers carry a status (a positive FI_E* code, 0 for success) in rreq.
 * Request handles are (generation << 32 | slot): a stale or forged handle
 * names no live request and the packet is dropped.
 * An "iov list" payload is a count and that many (base, len) pairs, its
 * length exactly 8 + 16 * count bytes (struct lm_rdm_rts). */
/* The header's version byte.  There is no negotiation: a packet of
 * another version is dropped, so any change to the header, the ops, the
 * flags or the protocols above takes a new number.  (6: the lane bits of
 * the flags; 5 named a scalable endpoint's receive context in the key.) */
#define LM_RDM_WIRE_VERSION 6
/* Eager bytes a sender may have unconsumed at one peer.  Large enough for
 * many eager messages (the links' eager sizes are 4 to 64 KiB) to be in
 * flight before a sender falls back to rendezvous; small enough that the
 * reserve a receiver keeps reading into for conforming peers (this much
 * per peer, poll_link in progress.c) stays a few MiB in small jobs. */
#define LM_EAGER_CREDIT     ((size_t)1 << 20)
/* Consumed credit given back by a CREDIT packet: a quarter, so a one-way
 * stream pays one small packet per 256 KiB and its sender still has most
 * of its credit when the packet arrives. */
#define LM_CREDIT_RETURN    (LM_EAGER_CREDIT / 4)
/* Consumed credit given back riding an EAGER or RTS (rreq).  Below
 * LM_CREDIT_RETURN, so traffic both ways returns it before a CREDIT
 * packet is due; not on every message, since a non-zero rreq is one more
 * header word where a link sends only the non-zero ones (shm). */
#define LM_CREDIT_RIDE      (LM_EAGER_CREDIT / 16)
/* RTSs sent without their first piece after one whose piece was dropped
 * (no receive posted when its header came).  Enough that a program whose
 * receives trail the RTSs (Open MPI posts its receive once its own send
 * is done) stops paying for pieces sent twice; few enough that one whose
 * receives come in time soon gets them again. */
#define LM_EARLY_BACKOFF    32
/* Largest message whose RTS carries its first piece.  Above, the DATA
 * stream's large writes start while the receiver still reads the piece,
 * and the transfer is slower than with the handshake first (an Open MPI
 * ping-pong over tcp: docs/PERFORMANCE.md, Findings). */
#define LM_EARLY_MAX        ((size_t)512 << 10)

/* Packet kinds (the header's op byte).  Wire values: 0 is no packet, so
 * a zeroed header is refused; a new op goes before LM_OP_MAX, and
 * renumbering takes a new LM_RDM_WIRE_VERSION. */
enum {
	LM_OP_EAGER = 1,
	LM_OP_RTS,
	LM_OP_CTS,
	LM_OP_DATA,
	LM_OP_FIN,
	LM_OP_ACK,
	LM_OP_WRITE,
	LM_OP_WRITE_ACK,
	LM_OP_READ_REQ,
	LM_OP_READ_RESP,
	LM_OP_ATOMIC,
	LM_OP_ATOMIC_RESP,
	LM_OP_PUSH,
	LM_OP_PUSHED,
	LM_OP_CREDIT,
	LM_OP_MAX
};

/* Header flags: one bit each of the 16-bit flags field, wire values. */
#define LM_HF_TAGGED  0x0001
#define LM_HF_CQ_DATA 0x0002 /* data is remote CQ data */
#define LM_HF_ACK     0x0004 /* answer with ACK once delivered */
#define LM_HF_BULK    0x0008 /* RTS: the sender's memory may be read in bulk */
#define LM_HF_LAST    0x0010 /* READ_RESP / WRITE: last piece */
#define LM_HF_FETCH   0x0020 /* ATOMIC: return the old values */
#define LM_HF_COMPARE 0x0040 /* ATOMIC: payload holds compare values after operands */
#define LM_HF_RNDV    0x0080 /* WRITE: payload is the initiator's iov list */
#define LM_HF_SPLIT   0x0100 /* RTS: the sender can write the receiver's memory */
#define LM_HF_EARLY   0x0200 /* RTS: the payload's first addr bytes are the iov
                              * list, the message's first bytes follow */
/* The top six bits: the sender's lane, on what a scalable endpoint's lane
 * starts (EAGER, RTS, WRITE, READ_REQ, ATOMIC).  A lane is one context
 * pair of a scalable endpoint, an endpoint of its own at the address that
 * many lanes from the first's (lm_link_ops.addr_lane); the receiver finds
 * the sender's first address from it (FI_SOURCE). */
#define LM_HF_LANE_SHIFT 10
#define LM_HF_LANE_MASK  0xfc00

/* ep_attr->mem_tag_format of the engine's endpoints: all 64 tag bits, no
 * fields (alternating ones and zeros, man fi_endpoint).  Applications
 * such as Open MPI size their tag layout from it. */
#define LM_TAG_FORMAT_ALL 0xaaaaaaaaaaaaaaaaULL

struct lm_rdm_hdr {
	uint8_t version;
	uint8_t op;
	uint16_t flags;
	uint32_t len;
	uint64_t size;
	uint64_t tag;
	uint64_t data;
	uint64_t sreq;
	uint64_t rreq;
	uint64_t addr;
	uint64_t key;
};

_Static_assert(sizeof(struct lm_rdm_hdr) == 64, "wire header is 64 bytes");

/* A header field's word: its bit in a link's send_words mask. */
#define LM_HDR_WORD(field) (offsetof(struct lm_rdm_hdr, field) / sizeof(uint64_t))
#define LM_HDR_BIT(field)  (1u << LM_HDR_WORD(field))

/* Copy a header from a link's buffer word by word: a link that has just
 * written it with 8-byte stores would make wider loads wait until those
 * stores left the store buffer (a load is forwarded from one store, not
 * from several).  The empty asm keeps the compiler from merging them. */
static inline void lm_rdm_hdr_load(struct lm_rdm_hdr *h, const void *src)
{
	for (size_t i = 0; i < sizeof(*h) / 8; i++) {
		uint64_t w;

		memcpy(&w, (const char *)src + 8 * i, 8);
		__asm__("" : "+r"(w));
		memcpy((char *)h + 8 * i, &w, 8);
	}
}

/* An iov list (RTS, READ_REQ, WRITE with RNDV, PUSH payloads): only the
 * first iov_count entries travel. */
struct lm_rdm_rts {
	uint64_t iov_count;
	struct {
		uint64_t base, len;
	} iov[LM_IOV_LIMIT];
};

/* Bytes of the list that go on the wire. */
static inline size_t lm_rdm_rts_len(const struct lm_rdm_rts *rts)
{
	return sizeof(rts->iov_count) + rts->iov_count * sizeof(rts->iov[0]);
}

/* Messages from this size up use the split rendezvous when both sides may
 * copy each other's memory: two CPUs copy at once.  Large enough that the
 * PUSH/PUSHED exchange it adds is small against the copy; small enough
 * that large messages get the second CPU. */
#define LM_SPLIT_MIN (256 * 1024)

/* Remote (addr, key) pieces per RMA or atomic (rma_iov_limit): the header
 * has one addr and one key. */
#define LM_RMA_IOV_LIMIT 1

/* ATOMIC's tag: fi_op in the byte above the fi_datatype byte, and nothing
 * higher (a packet with higher bits set is refused).  A byte each holds
 * every value libfabric defines. */
#define LM_ATOMIC_TAG_SHIFT 8
#define LM_ATOMIC_TAG_MASK  0xffu

/* Limits every provider on the engine reports in tx_attr / rx_attr /
 * ep_attr (the engine's own defaults for an fi_info without them are in
 * ep.c).  inject: a page; each request carries a copy buffer of this size
 * (struct lm_rdm_tx.inject, allocated up front), so it is paid per queue
 * entry.  queue: requests (tx) and posted receives (rx) an endpoint takes
 * before -FI_EAGAIN; deep enough for a window of messages per peer in
 * small jobs, at a few MiB of requests.  unexp: total_buffered_recv, the
 * unexpected eager data an endpoint holds before it stops reading (each
 * peer's LM_EAGER_CREDIT comes on top); bounds a receiver's memory while
 * leaving room for bursts.  max_msg: no real bound (sizes travel as 64
 * bits); 2^62 leaves sums of a few sizes room before they wrap. */
#define LM_RDM_INJECT_SIZE  4096
#define LM_RDM_QUEUE_SIZE   1024
#define LM_RDM_UNEXP_MAX    ((size_t)64 << 20)
#define LM_RDM_MAX_MSG_SIZE ((size_t)1 << 62)

/* Whether an endpoint's (or a context's) attributes stay within those
 * limits: a larger queue or inject size than fi_getinfo offers is
 * refused, not allocated. */
static inline bool lm_rdm_tx_attr_ok(const struct fi_tx_attr *tx)
{
	return tx->size <= LM_RDM_QUEUE_SIZE && tx->inject_size <= LM_RDM_INJECT_SIZE &&
	       tx->iov_limit <= LM_IOV_LIMIT;
}
static inline bool lm_rdm_rx_attr_ok(const struct fi_rx_attr *rx)
{
	return rx->size <= LM_RDM_QUEUE_SIZE && rx->total_buffered_recv <= LM_RDM_UNEXP_MAX &&
	       rx->iov_limit <= LM_IOV_LIMIT;
}

/* Contexts of each direction a scalable endpoint may have: a thread each
 * for the cores of large nodes.  Context pair k is lane k, whose index
 * travels in the header's six lane bits (LM_HF_LANE_SHIFT). */
#define LM_RDM_SEP_MAX_CTX 64
_Static_assert(LM_RDM_SEP_MAX_CTX <= (LM_HF_LANE_MASK >> LM_HF_LANE_SHIFT) + 1,
               "a lane's index fits the header's lane bits");

/* Bytes of a peer's printable address an error entry carries as err_data
 * (and the domain's max_err_data): well above the longest address text
 * of any link (tcp's IPv6 form, some 70 bytes). */
#define LM_ERR_DATA_MAX 256

/* The fi_domain_attr fields every provider on the engine reports, as
 * designated initializers (a provider adds its name and caps).  Virtual
 * addresses and provider keys are preferred, not needed: util's memory
 * registration serves offsets and application keys too, so applications
 * that accept neither (the default registration) are served as well.
 * The object counts are what fi_getinfo reports, and hints asking for
 * more get no answer (core/match.c); the engine enforces none of them.
 * Any of a domain's endpoints may share a transmit or receive context
 * (max_ep_stx_ctx, max_ep_srx_ctx: its ep_cnt). */
#define LM_RDM_DOMAIN_ATTRS                                                              \
	.threading = FI_THREAD_SAFE, .control_progress = FI_PROGRESS_MANUAL,             \
	.data_progress = LM_PROGRESS_EITHER, .resource_mgmt = FI_RM_ENABLED,             \
	.av_type = FI_AV_UNSPEC,                                                         \
	.mr_mode = LM_MR_PREFERRED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY,                   \
	.mr_key_size = sizeof(uint64_t), .cq_data_size = sizeof(uint64_t),               \
	.cq_cnt = 1024, .ep_cnt = 256, .tx_ctx_cnt = 256, .rx_ctx_cnt = 256,             \
	.max_ep_tx_ctx = LM_RDM_SEP_MAX_CTX, .max_ep_rx_ctx = LM_RDM_SEP_MAX_CTX,       \
	.max_ep_stx_ctx = 256,                                                           \
	.max_ep_srx_ctx = 256, .mr_iov_limit = LM_IOV_LIMIT,                              \
	.mr_cnt = 1 << 16, .cntr_cnt = 1024, .max_err_data = LM_ERR_DATA_MAX

/* ---- domain --------------------------------------------------------------
 * A provider built on the engine embeds this at the start of its domain
 * and names its link; everything else (endpoints, AV address handling) is
 * the engine's. */
/* A domain's automatic progress (auto.c). */
struct lm_rdm_auto {
	pthread_mutex_t life;  /* add and del, one at a time */
	pthread_mutex_t mutex; /* eps; held while the thread progresses them */
	struct lm_list eps;    /* enabled RDM endpoints (lm_rdm_ep.auto_node) */
	int epfd, efd;         /* epoll over the links' fds and efd (a kick) */
	pthread_t thread;
	bool running, stop;
};

struct lm_rdm_domain {
	struct lm_domain util;
	const struct lm_link_ops *link_ops;
	void *link_ctx; /* handed to link_ops->open */
	struct lm_av_addr_ops av_ops;
	/* Bumped by every fi_av_remove: endpoints drop their fi_addr caches. */
	atomic_uint_fast64_t av_gen;
	/* Bumped by every insertion: unexpected messages from peers the AV
	 * lacked when they came may now have an fi_addr (lm_rdm_rxc.unknown). */
	atomic_uint_fast64_t av_ins_gen;
	bool no_bulk;     /* the provider's "never use bulk copies" parameter */
	/* The lock of every endpoint bound to a shared context of this
	 * domain (lm_rdm_ep.lock). */
	struct lm_lock ctx_lock;
	size_t eager_max; /* 0: the link's max_payload */
	/* data_progress FI_PROGRESS_AUTO: a thread progresses its endpoints. */
	bool auto_progress;
	struct lm_rdm_auto autop;
	/* Deferred work queued and not yet fired (struct lm_rdm_work). */
	pthread_mutex_t work_lock;
	struct lm_list work;
	/* Its enabled endpoints (lm_rdm_ep.dom_node), which a counter bound
	 * to none of them progresses (lm_domain.progress_all). */
	pthread_mutex_t eps_lock;
	struct lm_list eps;
};

/* Fill dom (zeroed by the caller) for info; ops: lm_rdm_domain_ops if NULL. */
int lm_rdm_domain_init(struct lm_rdm_domain *dom, struct lm_fabric *fab,
                       const struct fi_info *info, const struct lm_link_ops *link_ops,
                       void *link_ctx, void *context);
/* Allocate and initialise an engine domain on fabric with ops as its
 * fi_ops_domain (lm_rdm_domain_ops or a provider's copy of it). */
int lm_rdm_domain_open(struct fid_fabric *fabric, const struct fi_info *info,
                       const struct lm_link_ops *link_ops, void *link_ctx,
                       const struct fi_ops_domain *ops, void *context,
                       struct lm_rdm_domain **out);
/* An engine domain's ops with a provider's endpoint call; providers
 * compose their static const table with it.  Shared contexts are the
 * engine's (rxc.c). */
#define LM_RDM_DOMAIN_OPS(endpoint_fn)                                                   \
	{                                                                                \
		.size = sizeof(struct fi_ops_domain), .av_open = lm_av_open,             \
		.cq_open = lm_cq_open, .endpoint = (endpoint_fn),                        \
		.scalable_ep = lm_rdm_scalable_ep, .cntr_open = lm_cntr_open,           \
		.poll_open = lm_poll_open, .stx_ctx = lm_rdm_stx_context,                \
		.srx_ctx = lm_rdm_srx_context, .query_atomic = lm_rdm_query_atomic,      \
		.query_collective = lm_domain_no_query_collective,                       \
	}
int lm_rdm_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
                        enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags);
/* The domain's fi_close stays util's (lm_domain_fini + free), which is
 * right while lm_rdm_domain is first in the provider's struct and the
 * provider has nothing else to release. */
extern const struct fi_ops_domain lm_rdm_domain_ops;

/* ---- peers ---------------------------------------------------------------
 * One per remote address an endpoint talks to, created on first use. */
struct lm_rdm_peer {
	struct lm_hnode hnode; /* ep->peers, by address hash */
	struct lm_link_peer *lp;
	fi_addr_t fi_addr;     /* for FI_SOURCE: lm_av_reverse, cached */
	uint64_t fi_gen;       /* av_gen when fi_addr was looked up */
	bool bulk_broken;      /* a bulk read failed: use CTS/DATA from now on */
	bool dead;             /* the link said it is gone */
	/* av_gen's low half when last asked whether it is gone (in a hole:
	 * the hot fields and the address keep their lines). */
	uint32_t fresh_gen;
	struct lm_list revive; /* in ep->revive while dead, if the link resets */
	/* An eager message of this peer matched when the link asked where its
	 * payload goes (lm_rdm_place): read straight into the receive, or
	 * (truncated) delivered by the next recv of this peer, which is it. */
	struct lm_rdm_rndv *eager;
	size_t credit; /* eager bytes we may still send it (LM_EAGER_CREDIT) */
	bool replying; /* a message of its came since we last sent it one */
	/* Below 0 after an RTS's first piece found no receive posted there:
	 * the next RTSs go without one, counting back up to 0. */
	int8_t early_score;
	size_t owed;   /* eager bytes of its we consumed and not given back */
	/* The lane of a scalable endpoint it is (LM_HF_LANE_SHIFT): its
	 * first address is this many lanes back (FI_SOURCE). */
	uint8_t lane;
	/* The peers at its address's lanes, made as fi_rx_addr names them
	 * (LM_RDM_SEP_MAX_CTX entries, made on first use). */
	struct lm_rdm_peer **lanes;
	unsigned char addr[];
};

/* ---- requests ------------------------------------------------------------ */

enum lm_tx_state {
	LM_TX_FREE,
	LM_TX_QUEUED, /* waiting for link room (in ep->tx_queue) */
	LM_TX_WAIT,   /* sent, waiting for an answer (FIN/ACK/RESP) */
	LM_TX_STREAM, /* CTS received: DATA left to send (in ep->tx_queue) */
	LM_TX_HELD,   /* eager, sent, not yet delivered (in ep->tx_wait) */
};

/* An operation this endpoint started. */
struct lm_rdm_tx {
	struct lm_list node; /* ep->tx_queue or ep->tx_wait */
	uint32_t gen;
	uint32_t slot; /* index in ep->tx */
	uint8_t state;
	uint8_t op; /* LM_OP_* of the first packet */
	struct lm_rdm_peer *peer;
	uint64_t cq_flags; /* FI_SEND|FI_MSG..., FI_READ|FI_RMA..., for the entry */
	bool report;       /* write a CQ entry on success */
	bool fence;        /* FI_FENCE: starts once earlier requests to peer ended */
	bool lent;         /* packets went lent (lm_link_pkt): unlend before free */
	void *context;
	const struct lm_rdm_report *rep; /* its context's, for its CQ (NULL: none) */
	struct lm_cntr *cntr; /* incremented on completion */
	struct iovec iov[LM_IOV_LIMIT];
	size_t iov_count;
	size_t len;
	size_t done;           /* bytes sent (STREAM) or received (READ_RESP) */
	struct lm_rdm_hdr hdr; /* the first packet, kept for retries */
	uint64_t rreq;         /* STREAM: the receiver's handle */
	uint64_t mark;         /* LM_TX_HELD: the link's mark to wait for */
	void *result;          /* fetching atomics: where old values go */
	size_t result_len;
	unsigned char inject[]; /* inject / atomic operand copy (ep->inject_size) */
};

/* A posted receive: util's entry plus the engine's. */
struct lm_rdm_rx {
	struct lm_rx_entry e;
	struct lm_rdm_rxc *rxc; /* the context it was posted to */
	size_t busy; /* rendezvous placements into this buffer still running */
	bool released;
};

/* prov_errno of an operation that failed with its peer: err_data names the
 * peer (lm_rdm_strerror prints it).  Far above every errno and FI_E*
 * value, so it is not taken for one. */
#define LM_PROV_PEER_GONE 0x10001

/* ---- handles -------------------------------------------------------------
 * A request or transfer named on the wire: its slot (low 32 bits) and the
 * slot's generation (high 32), moved on each time the slot is freed, so an
 * answer to something that has ended names nothing. */
static inline uint64_t lm_rdm_handle(uint32_t gen, size_t slot)
{
	return (uint64_t)gen << 32 | (uint32_t)slot;
}

static inline uint32_t lm_rdm_handle_slot(uint64_t handle)
{
	return (uint32_t)handle;
}

static inline bool lm_rdm_handle_is(uint64_t handle, uint32_t gen)
{
	return (uint32_t)(handle >> 32) == gen;
}

/* A freed slot's next generation; 0 is never one. */
static inline void lm_rdm_gen_next(uint32_t *gen)
{
	if (!++*gen)
		*gen = 1;
}

/* ---- receive-side transfers ----------------------------------------------
 * A slot of ep->rndv: one transfer this endpoint receives into memory of
 * its own, of one kind. */
enum lm_rndv_kind {
	LM_RNDV_MSG,   /* a message by rendezvous: bulk read, split or CTS/DATA */
	LM_RNDV_EAGER, /* an eager message matched on its header (peer->eager) */
	LM_RNDV_EARLY, /* an RTS matched on its header, its first piece still
	                * coming (peer->eager); then an LM_RNDV_MSG */
	LM_RNDV_WRITE, /* the target of a streamed RMA write */
};

/* Where a transfer is.  Its moves (rndv.c, rndv_enter):
 *
 *   FREE --> MATCHED --> PLACING --------> (done) --> FREE
 *              |  \         ^   |
 *              |   \        |   v
 *              |    `--> STREAMING <-- PUSHING <--'(from MATCHED)
 *              `-----------------------------------> FREE
 *
 * MATCHED: set up in a receive's buffer; PLACING: a link reads a payload,
 * first piece or DATA piece straight into it; PUSHING: split, the sender
 * writes its part, PUSHED is awaited; STREAMING: CTS sent, DATA comes.
 * Any state may end in FREE (finished, or failed with its peer), and a
 * placement whose connection is lost goes back to MATCHED, to fail with
 * its peer. */
enum lm_rndv_state {
	LM_RNDV_FREE,
	LM_RNDV_MATCHED,
	LM_RNDV_PLACING,
	LM_RNDV_PUSHING,
	LM_RNDV_STREAMING,
};

struct lm_rdm_rndv {
	struct lm_list node; /* ep->rndv_active */
	uint32_t gen;
	uint8_t kind;  /* enum lm_rndv_kind */
	uint8_t state; /* enum lm_rndv_state */
	struct lm_rdm_rx *rx; /* NULL: FI_DISCARD */
	struct lm_rdm_peer *peer;
	fi_addr_t src;
	uint64_t sreq;
	uint64_t size; /* sent */
	uint64_t tag, data;
	uint16_t hflags;
	struct iovec iov[LM_IOV_LIMIT]; /* where it lands */
	size_t iov_count;
	size_t cap;            /* bytes that fit */
	size_t got;            /* DATA bytes received */
	size_t off, place_len; /* multi-receive placement */
	uint64_t extra_flags;
	uint64_t key;             /* WRITE: the region written (FI_RMA_EVENT counters) */
	struct lm_rdm_rts remote; /* split: the sender's buffer, for fallback */
};

/* A message matched to a receive: the receive, its sender and what its
 * header said. */
struct lm_rdm_arrival {
	struct lm_rdm_rx *rx; /* NULL: discarded */
	struct lm_rdm_peer *peer;
	fi_addr_t src;
	uint64_t size, tag, data, sreq;
	uint16_t hflags;
	bool queued; /* rx, a multi-receive buffer, is still queued */
};

/* Payload kept for an unexpected message. */
struct lm_rdm_unexp {
	struct lm_unexp_entry u;
	struct lm_rdm_ep *ep;   /* the endpoint it came to */
	struct lm_rdm_rxc *rxc; /* the context it waits in */
	struct lm_rdm_peer *peer;
	uint16_t hflags;
	uint64_t sreq;
	struct lm_rdm_rts rts; /* rendezvous */
	bool rndv;
	void *buf; /* eager payload (from the small pool or malloc) */
	size_t buf_len;
	bool small;
};

/* A control packet the link had no room for, kept until it does. */
struct lm_rdm_ctl {
	struct lm_list node; /* ep->ctl_queue */
	struct lm_rdm_peer *peer;
	struct lm_rdm_hdr hdr;
	unsigned char *big; /* payloads larger than small[] */
	unsigned char small[sizeof(struct lm_rdm_rts)];
};

struct lm_rdm_ep;
struct lm_rdm_ep_ext;

enum {
	LM_CNTR_SEND,
	LM_CNTR_RECV,
	LM_CNTR_READ,
	LM_CNTR_WRITE,
	LM_CNTR_RREAD,
	LM_CNTR_RWRITE,
	LM_CNTR_MAX
};

struct lm_rdm_hook {
	struct lm_progress p;
	struct lm_rdm_ep *ep;
	struct lm_cq *cq; /* exactly one of cq / cntr */
	struct lm_cntr *cntr;
	unsigned refs; /* a scalable endpoint's: the contexts reporting there */
};

/* Where one side's completions go: a CQ (all of them, or with
 * FI_SELECTIVE_COMPLETION those asked for) and counters by kind (a
 * transmit side's SEND, READ, WRITE; a receive side's RECV).  A plain
 * endpoint's are filled from its bindings when it is enabled; a scalable
 * endpoint's contexts have their own. */
struct lm_rdm_report {
	struct lm_cq *cq;
	bool selective;
	struct lm_cntr *cntr[LM_CNTR_MAX];
};

/* ---- receive and transmit contexts ----------------------------------------
 * A receive context: the posted and unexpected lists with their pools.
 * Every endpoint has one of its own; a shared receive context
 * (fi_srx_context) is one that serves every endpoint bound to it.  A
 * message is matched in the context of the endpoint it came to and
 * reported on that endpoint's receive CQ and counters (man fi_endpoint:
 * a shared context has none of its own); an unexpected message remembers
 * its endpoint, whose link and peer the rest of its transfer uses.
 *
 *   fi_recv(srx) --> [ srx: posted r1 r2 ..., unexpected m1 (ep B) ... ]
 *                       ^ match            ^ match
 *   ep A --link--> arrival           ep B --link--> arrival
 */
struct lm_rdm_rxc {
	struct fid_ep ep_fid; /* FI_CLASS_SRX_CTX, when shared */
	struct lm_rdm_domain *dom;
	bool shared;
	/* Directed receive (lm_match.directed) is chosen per kind at open:
	 * FI_DIRECTED_RECV directs both, FI_TAGGED_DIRECTED_RECV tagged ones;
	 * FI_EXACT_DIRECTED_RECV directs both unless the latter narrows it,
	 * and makes the directed kinds refuse FI_ADDR_UNSPEC. */
	struct lm_match msg, tagged;
	bool msg_exact, tagged_exact;
	struct lm_bufpool rx_pool;    /* lm_rdm_rx */
	struct lm_bufpool unexp_pool; /* lm_rdm_unexp */
	struct lm_bufpool small_pool; /* eager payloads up to inline_max */
	size_t rx_count, rx_limit;
	/* Eager payloads held for unexpected messages, and the most held
	 * before the endpoints stop reading their links (the senders then
	 * see -FI_EAGAIN once the transport's own buffers are full). */
	size_t unexp_bytes, unexp_max;
	/* Where its unexpected bytes are counted against unexp_max: itself,
	 * or for a scalable endpoint's receive context the endpoint's own
	 * (one bound for the link they all read from). */
	struct lm_rdm_rxc *acct;
	size_t min_multi_recv;
	uint64_t caps, op_flags;
	struct lm_list members; /* shared: the endpoints bound (rxc_node) */
	/* Not shared: where what it receives is reported.  A shared one's
	 * go to the endpoint a message came to (its own_rxc.rep). */
	struct lm_rdm_report rep;
	/* A scalable endpoint's receive context: the endpoint, whether the
	 * context is enabled, and whether it counts in the endpoint's hooks
	 * on its CQ and counter (lm_rdm_ep.shooks). */
	struct lm_rdm_ep *sep;
	bool enabled, hooked;
	/* An unexpected message may wait from a peer not in the AV when it
	 * came (FI_ADDR_NOTAVAIL), and the insertion count when the queues
	 * were last looked through for such (recv.c adopt_unknown). */
	bool unknown;
	uint64_t unknown_gen;
};

/* A shared transmit context (fi_stx_context): operations are still posted
 * to the endpoints and complete on their CQs (man fi_endpoint); what the
 * endpoints bound to it share is its attributes and the domain's context
 * lock, under which their requests are issued one at a time. */
struct lm_rdm_stx {
	struct fid_stx stx_fid;
	struct lm_rdm_domain *dom;
	struct fi_tx_attr attr;
	atomic_int ref; /* endpoints bound */
};

/* rxc.c */
/* A receive context for ep's caps and sizes (own) or for attr (shared). */
int lm_rdm_rxc_init(struct lm_rdm_rxc *rxc, struct lm_rdm_domain *dom, uint64_t caps,
                    size_t rx_limit, size_t unexp_max, bool connected);
void lm_rdm_rxc_fini(struct lm_rdm_rxc *rxc);
/* The endpoint that speaks for a receive context of its own fid where no
 * arrival names one (a peek that found nothing, a cancel): a shared
 * context's first enabled member, a scalable endpoint's receive context's
 * endpoint once both are enabled; NULL when there is none. */
struct lm_rdm_ep *lm_rdm_rxc_voice(struct lm_rdm_rxc *rxc);
/* The endpoint options a receive context holds (FI_OPT_MIN_MULTI_RECV);
 * -FI_ENOPROTOOPT for any other. */
int lm_rdm_rxc_getopt(struct lm_rdm_rxc *rxc, int level, int optname, void *optval,
                      size_t *optlen);
int lm_rdm_rxc_setopt(struct lm_rdm_rxc *rxc, int level, int optname, const void *optval,
                      size_t optlen);
/* The tables of a receive context's own fid (a shared one's, a scalable
 * endpoint's): receives and their cancel, no sends. */
extern const struct fi_ops_msg lm_rdm_rxc_msg_ops;
extern const struct fi_ops_tagged lm_rdm_rxc_tagged_ops;
extern const struct fi_ops_ep lm_rdm_rxc_ep_ops;
int lm_rdm_srx_context(struct fid_domain *domain, struct fi_rx_attr *attr,
                       struct fid_ep **rx_ep, void *context);
int lm_rdm_stx_context(struct fid_domain *domain, struct fi_tx_attr *attr,
                       struct fid_stx **stx, void *context);
/* fi_ep_bind of a shared context to ep (before fi_enable), and ep leaving
 * its receive context as it closes (its unexpected messages there go). */
int lm_rdm_ep_bind_srx(struct lm_rdm_ep *ep, struct lm_rdm_rxc *rxc);
int lm_rdm_ep_bind_stx(struct lm_rdm_ep *ep, struct lm_rdm_stx *stx);
void lm_rdm_ep_leave_rxc(struct lm_rdm_ep *ep);

/* ---- endpoint ------------------------------------------------------------ */

/* Full peers a sleeper asks to ring when they have room (want_room).  A
 * sender is rarely blocked on more at once; beyond, it looks again on a
 * short timer (room_other, progress.c). */
#define LM_ROOM_PEERS 4

/* A fid_ep: the endpoint itself or an alias with other op flags. */
struct lm_rdm_ctx {
	struct fid_ep ep_fid;
	struct lm_rdm_ep *ep;
	uint64_t tx_flags, rx_flags; /* op_flags applied to the non-msg calls */
	bool alias;
	/* Where its operations report: the endpoint's txrep, or a scalable
	 * endpoint's transmit context's own. */
	struct lm_rdm_report *txrep;
	/* A scalable endpoint's transmit context not enabled yet: nothing
	 * would progress or report its operations (-FI_EOPBADSTATE). */
	bool tx_off;
};

/* A scalable endpoint's transmit context: its operations go out through
 * the endpoint's link and peers and report to the context's CQ and
 * counters. */
struct lm_rdm_txc {
	struct lm_rdm_ctx ctx;
	struct lm_rdm_report rep;
	bool enabled, hooked; /* hooked: counted in the endpoint's shooks */
};

struct lm_rdm_ep {
	struct lm_rdm_ctx ctx;
	struct lm_rdm_domain *dom;
	struct fi_info *info;
	uint64_t caps;
	bool enabled;
	atomic_int ref; /* aliases */

	/* What fi_ep_bind bound; reported through txrep and own_rxc.rep,
	 * filled from these at enable. */
	struct lm_cq *tx_cq, *rx_cq;
	bool tx_selective, rx_selective;
	struct lm_cntr *cntr[LM_CNTR_MAX];
	struct lm_rdm_report txrep;
	struct lm_av *av;
	/* On every CQ and counter it reports to (a scalable endpoint's
	 * contexts have their own). */
	struct lm_rdm_hook hooks[2 + LM_CNTR_MAX];
	size_t nhooks;
	/* A scalable endpoint (fi_scalable_ep) is lanes: lane k holds its
	 * transmit and receive context k (fi_tx_context, fi_rx_context) and is
	 * an endpoint of its own - link, peers, requests, lock - at the
	 * address k lanes from the first's (lm_link_ops.addr_lane), so that
	 * no two context pairs share a lock.  head: the first lane, whose fid
	 * is the scalable endpoint and which holds the others (lanes, nlanes)
	 * and how many contexts of each kind it has (ntx, nrx); NULL for any
	 * other endpoint.  lane_txc, lane_rxc: this lane's contexts while
	 * open; lane_flags: its index as headers carry it. */
	struct lm_rdm_ep *head;
	struct lm_rdm_ep **lanes;
	size_t nlanes, ntx, nrx;
	struct lm_rdm_txc *lane_txc;
	struct lm_rdm_rxc *lane_rxc;
	uint16_t lane_flags;
	/* rx_shift: 64 - the AV's rx_ctx_bits (0: none), where the receive
	 * context index of an fi_addr (fi_rx_addr) starts; rx_bits: those
	 * bits (0: none). */
	unsigned rx_shift;
	uint64_t rx_bits;
	/* A lane's contexts' progress hooks: one per CQ or counter however
	 * many of its contexts report there (refs), so a read of it
	 * progresses the lane once. */
	struct lm_rdm_hook **shooks;
	size_t nshooks;

	struct lm_link *link;
	size_t eager_max;
	size_t inject_size;
	bool bulk;              /* may offer RTS bulk reads */
	unsigned char *scratch; /* link max_payload bytes: atomic results */

	/* Requests: a fixed table (tx_attr size) so handles are checkable. */
	struct lm_rdm_tx **tx;
	size_t tx_count, tx_used;
	uint32_t *tx_free;
	size_t tx_nfree;
	struct lm_list tx_queue; /* packets waiting for link room, in order */
	struct lm_list tx_wait;  /* waiting for an answer */
	size_t tx_held;          /* of them, LM_TX_HELD */

	struct lm_rdm_rndv *rndv;
	size_t rndv_count;
	struct lm_list rndv_active;

	/* Where its receives are posted and its messages matched: its own
	 * (own_rxc), or a shared receive context's. */
	struct lm_rdm_rxc *rxc;
	struct lm_rdm_rxc own_rxc;
	struct lm_list rxc_node; /* in rxc->members */
	struct lm_rdm_stx *stx;  /* a shared transmit context bound, or NULL */
	size_t npeers; /* in ep->peers: each may have LM_EAGER_CREDIT held */

	/* Control packets (FIN, ACK, CTS, responses) the link refused. */
	struct lm_list ctl_queue;
	struct lm_bufpool ctl_pool;

	struct lm_hmap peers;
	bool connected;                /* FI_EP_MSG: every operation goes to msg_peer */
	struct lm_rdm_peer *msg_peer;  /* set by lm_rdm_ep_connected */
	/* FI_EP_MSG after the connection ended: the error its operations
	 * end with (0 while connected); conn_failed once what waited on the
	 * peer has failed, conn_told once the extension's lost hook has run. */
	int conn_err;
	bool conn_failed, conn_told;
	struct lm_rdm_peer **peer_vec; /* fi_addr index -> peer */
	size_t peer_vec_len;
	uint64_t peer_gen;
	struct lm_rdm_peer *last_src; /* receive-side cache */

	uint64_t last_check_ms;
	struct lm_list revive; /* dead peers to reset at the next check */
	bool armed;            /* the link's doorbell is armed */
	/* Peers whose link answered -FI_EAGAIN since progress began, for
	 * want_room before sleeping; room_other: more peers than fit here,
	 * or something held back for another reason. */
	struct lm_rdm_peer *room_peer[LM_ROOM_PEERS];
	unsigned room_count;
	bool room_other;
	/* Nothing queued, awaited or armed (set by progress under the lock,
	 * cleared by whatever queues): progress without a packet to read may
	 * skip the lock. */
	atomic_bool quiet;
	/* The endpoint's lock: own_lock, or, once it is bound to a shared
	 * context, the domain's ctx_lock that every endpoint sharing a
	 * context of the domain takes (one lock order, and a context's
	 * lists are never touched under two locks). */
	struct lm_lock *lock;
	struct lm_lock own_lock;
	char *name; /* address set with fi_setname before the link opened */
	/* In its domain's automatic progress (auto.c). */
	struct lm_list auto_node;
	bool auto_on;
	/* In its domain's list of enabled endpoints (lm_rdm_ep_listed). */
	struct lm_list dom_node;
	bool dom_on;
	atomic_int held; /* its operations held on counters (trigger.c) */
	const struct lm_rdm_ep_ext *ext; /* what the provider adds, or NULL */
	void *prov;                      /* the provider's own state for it */
};

/* ---- extensions ------------------------------------------------------------
 * What a provider adds to an engine endpoint (a connected endpoint's
 * connection management and event queue; a link of its own).  The engine's
 * ops tables stay its own and const: each of its calls runs the hook that
 * fits, on the endpoint itself (never for an alias).  A NULL hook leaves
 * the engine's behaviour. */
struct lm_rdm_ep_ext {
	/* fi_ep_bind of an object the engine does not bind itself (an EQ, a
	 * shared receive context); 1: not the provider's either. */
	int (*bind)(struct lm_rdm_ep *ep, struct fid *bfid, uint64_t flags);
	/* fi_enable once the engine's own succeeded. */
	void (*enabled)(struct lm_rdm_ep *ep);
	/* fi_close: before the engine's teardown (detach what may still call
	 * in) and after it (release prov). */
	void (*closing)(struct lm_rdm_ep *ep);
	void (*closed)(void *prov);
	/* fi_getopt / fi_setopt, tried before the engine's: -FI_ENOPROTOOPT
	 * passes the option on. */
	int (*getopt)(struct lm_rdm_ep *ep, int level, int optname, void *optval,
	              size_t *optlen);
	int (*setopt)(struct lm_rdm_ep *ep, int level, int optname, const void *optval,
	              size_t optlen);
	/* A connection the link lost, run by the progress that noticed it,
	 * without ep->lock (its EQ event). */
	void (*lost)(struct lm_rdm_ep *ep);
	/* The endpoint's fi_ops_cm instead of the engine's (which refuses to
	 * connect): it may use lm_rdm_getname and lm_rdm_setname. */
	const struct fi_ops_cm *cm;
};

/* ep.c */
/* fi_ep_bind, fi_close of an engine endpoint (a scalable one's too). */
int lm_rdm_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int lm_rdm_ep_close(struct fid *fid);
/* Under ep->lock: 1 when newly enabled (the caller then adds the hooks,
 * outside the lock), 0 when it already was, or a negative error. */
int lm_rdm_ep_enable(struct lm_rdm_ep *ep);
/* Hooks on each distinct CQ and counter of reps (hooks has room for
 * all): how many.  Added and removed outside ep->lock, because a CQ's
 * progress runs its hooks under its own lock and they take ep->lock. */
size_t lm_rdm_hooks_prepare(struct lm_rdm_hook *hooks, const struct lm_rdm_report *const *reps,
                            size_t nreps);
void lm_rdm_hooks_add(struct lm_rdm_ep *ep, struct lm_rdm_hook *hooks, size_t n);
void lm_rdm_hooks_del(struct lm_rdm_hook *hooks, size_t n);
/* A scalable endpoint's n lanes, head the first (lm_rdm_ep.head): the
 * others opened at the addresses after head's (and moved after it by
 * fi_setname). */
int lm_rdm_scalable_lanes(struct lm_rdm_ep *head, size_t n);
/* trigger.c: operations held until a counter reaches a threshold
 * (FI_TRIGGER, man fi_trigger).  A data call with FI_TRIGGER in its flags
 * is captured as one of these (its buffers' addresses; an inject's bytes
 * copied) and issued by issue, with FI_TRIGGER cleared, once the counter
 * of its fi_triggered_context reaches the threshold. */
/* A request queued with FI_QUEUE_WORK, in its domain's list until it
 * fires or is cancelled. */
struct lm_rdm_work {
	struct lm_list node;
	struct fi_deferred_work *work;
	struct lm_cntr *cntr; /* the triggering counter */
	struct lm_trigger *t; /* held there */
};

struct lm_rdm_trig {
	struct lm_trigger t;
	struct lm_rdm_work w; /* deferred work: w.work set */
	struct lm_cntr *cntr;
	struct lm_rdm_ctx ctx;   /* a copy: an alias may close meanwhile */
	struct lm_rdm_ep *owner; /* its reference keeps the endpoint open */
	ssize_t (*issue)(struct lm_rdm_trig *tr);
	void *context; /* the fi_triggered_context: the completion's op_context */
	/* A message's or RMA's local buffers (lm_rdm_trig_new_iov). */
	struct iovec iov[LM_IOV_LIMIT];
	size_t count;
	union {
		struct {
			void *desc[LM_IOV_LIMIT];
			fi_addr_t addr;
			uint64_t tag, ignore, data, flags;
			bool tagged, inject_call;
		} msg;
		struct {
			fi_addr_t addr;
			uint64_t raddr, key, data, flags;
			bool write, inject_call;
		} rma;
		struct {
			struct fi_ioc iov[LM_IOV_LIMIT], cmp[LM_IOV_LIMIT], res[LM_IOV_LIMIT];
			size_t count, cmp_count, res_count;
			fi_addr_t dest;
			uint64_t addr, key, flags;
			int dt, op, kind;
			bool inject_call;
		} atomic;
	} u;
	unsigned char copy[]; /* an inject's bytes */
};
/* A new held operation for ctx with room for copy bytes, its issue set;
 * the caller fills u.  NULL without memory. */
struct lm_rdm_trig *lm_rdm_trig_new(struct lm_rdm_ctx *ctx, size_t copy,
                                    ssize_t (*issue)(struct lm_rdm_trig *tr));
/* lm_rdm_trig_new for an operation on iov[count], which it keeps in
 * (*out)->iov: the bytes themselves when copy (an inject's, at most the
 * endpoint's inject_size), else the iovecs.  0, or -FI_EINVAL (a bad
 * iov), -FI_EMSGSIZE or -FI_ENOMEM with *out untouched. */
int lm_rdm_trig_new_iov(struct lm_rdm_ctx *ctx, const struct iovec *iov, size_t count,
                        bool copy, ssize_t (*issue)(struct lm_rdm_trig *tr),
                        struct lm_rdm_trig **out);
/* Hold tr on the counter of context (a struct fi_triggered_context of
 * FI_TRIGGER_THRESHOLD), or issue it now if that counter is there already;
 * 0, or the error (tr freed). */
ssize_t lm_rdm_trig_hold(struct lm_rdm_trig *tr, void *context);
/* fi_control(domain, FI_QUEUE_WORK / FI_CANCEL_WORK / FI_FLUSH_WORK). */
int lm_rdm_work_control(struct lm_domain *dom, int command, void *arg);
/* Fire what ep's counters released (after progress, outside ep->lock). */
void lm_rdm_triggers_run(struct lm_rdm_ep *ep);
/* The issue functions of each kind (send.c, recv.c, rma.c, atomic.c). */
ssize_t lm_rdm_trig_send(struct lm_rdm_trig *tr);
ssize_t lm_rdm_trig_recv(struct lm_rdm_trig *tr);
ssize_t lm_rdm_trig_rma(struct lm_rdm_trig *tr);
ssize_t lm_rdm_trig_atomic(struct lm_rdm_trig *tr);
/* auto.c: an enabled endpoint into its domain's automatic progress (a
 * no-op unless the domain has it), and out of it before it closes.
 * Neither under ep->lock. */
void lm_rdm_auto_init(struct lm_rdm_auto *a);
/* The provider's data_progress parameter (FI_<PROV>_DATA_PROGRESS), and
 * its answer for hints that leave the progress model open: automatic for
 * the RDM infos of list when it says auto. */
void lm_rdm_progress_param(struct fi_provider *prov);
void lm_rdm_progress_default(struct fi_provider *prov, const struct fi_info *hints,
                             struct fi_info *list);
int lm_rdm_auto_add(struct lm_rdm_ep *ep);
void lm_rdm_auto_del(struct lm_rdm_ep *ep);
/* ep.c: an enabled endpoint into its domain's list (on), and out of it
 * before it closes.  Neither under ep->lock. */
void lm_rdm_ep_listed(struct lm_rdm_ep *ep, bool on);
/* sep.c: fi_scalable_ep, and a scalable endpoint's contexts. */
int lm_rdm_scalable_ep(struct fid_domain *domain, struct fi_info *info,
                       struct fid_ep **sep, void *context);
int lm_rdm_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                    void *context);
/* An endpoint with ext's hooks and prov as its provider state. */
int lm_rdm_endpoint_ext(struct fid_domain *domain, struct fi_info *info,
                        const struct lm_rdm_ep_ext *ext, void *prov, struct fid_ep **ep,
                        void *context);
/* The engine's fi_getname / fi_setname, for an extension's fi_ops_cm. */
int lm_rdm_getname(fid_t fid, void *addr, size_t *addrlen);
int lm_rdm_setname(fid_t fid, void *addr, size_t addrlen);
struct lm_rdm_peer *lm_rdm_peer_by_fiaddr_slow(struct lm_rdm_ep *ep, fi_addr_t addr);
/* The peer an fi_addr names (made on first use), or NULL: from the
 * endpoint's vector while no address was removed since it was filled. */
static inline struct lm_rdm_peer *lm_rdm_peer_by_fiaddr(struct lm_rdm_ep *ep,
                                                        fi_addr_t addr)
{
	uint64_t idx;

	if (ep->connected) /* FI_EP_MSG: its one peer */
		return ep->msg_peer;
	if (ep->av && !(addr & ep->rx_bits) &&
	    atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed) == ep->peer_gen) {
		idx = addr & ep->av->idx_mask;
		if (idx < ep->peer_vec_len && ep->peer_vec[idx] && addr != FI_ADDR_NOTAVAIL)
			return ep->peer_vec[idx];
	}
	return lm_rdm_peer_by_fiaddr_slow(ep, addr);
}
/* The lock over rxc's lists: its scalable endpoint's, or for a shared
 * one the domain's context lock. */
static inline struct lm_lock *lm_rdm_rxc_lock(struct lm_rdm_rxc *rxc)
{
	return rxc->sep ? rxc->sep->lock : &rxc->dom->ctx_lock;
}
/* Where a receive of rxc that matched a message that came to ep is
 * reported. */
static inline struct lm_rdm_report *lm_rdm_rx_rep(struct lm_rdm_ep *ep,
                                                  struct lm_rdm_rxc *rxc)
{
	return rxc->shared ? &ep->own_rxc.rep : &rxc->rep;
}
/* The receive context what arrives at ep goes to: a scalable endpoint's
 * lane's context once opened, else ep's own (or shared) one. */
static inline struct lm_rdm_rxc *lm_rdm_rxc_of(struct lm_rdm_ep *ep)
{
	if (__builtin_expect(!ep->lane_rxc, 1))
		return ep->rxc;
	return ep->lane_rxc;
}
/* A connected endpoint's peer is now the link peer at addr (the provider's
 * connection management made the connection).  Under no lock of ep's. */
int lm_rdm_ep_connected(struct lm_rdm_ep *ep, const void *addr);
/* The operations still outstanding with a connected endpoint's peer end,
 * and its posted receives (its connection is gone): with FI_ECANCELED for
 * fi_shutdown.  A connection the link loses ends so by itself, with
 * FI_ENOTCONN, and runs the extension's lost hook. */
void lm_rdm_ep_disconnected(struct lm_rdm_ep *ep, int err);
struct lm_rdm_peer *lm_rdm_peer_by_addr(struct lm_rdm_ep *ep, const void *addr);
/* The same, without making one: NULL for an address never seen. */
struct lm_rdm_peer *lm_rdm_peer_find(struct lm_rdm_ep *ep, const void *addr);
/* p is looked at again since an address was removed from an AV (gen,
 * the domain's av_gen, is noted in p->fresh_gen): if the link says it is
 * gone (its endpoint closed), what waits on it fails now and a link that
 * can tries it afresh, so that what follows reaches an endpoint opened at
 * its address since, whichever side speaks first.  Under ep->lock; reads
 * nothing from the link. */
void lm_rdm_peer_afresh(struct lm_rdm_ep *ep, struct lm_rdm_peer *p, uint64_t gen);
/* A peer's memory through the link (cross-memory attach); -FI_EIO for a
 * peer the link never reached (lm_rdm_peer_by_addr). */
static inline ssize_t lm_rdm_bulk_read(struct lm_rdm_ep *ep, struct lm_rdm_peer *p,
                                       const struct iovec *local, size_t ln,
                                       const struct iovec *remote, size_t rn)
{
	return p->lp ? ep->link->ops->bulk_read(ep->link, p->lp, local, ln, remote, rn)
	             : -FI_EIO;
}
static inline ssize_t lm_rdm_bulk_write(struct lm_rdm_ep *ep, struct lm_rdm_peer *p,
                                        const struct iovec *local, size_t ln,
                                        const struct iovec *remote, size_t rn)
{
	return p->lp ? ep->link->ops->bulk_write(ep->link, p->lp, local, ln, remote, rn)
	             : -FI_EIO;
}
/* The peer a packet came from (src_addr, as the link gives it), made on
 * first contact; NULL without memory.  The last sender is cached and
 * compared inline: this runs for every packet.  Once an address was
 * removed from an AV, each peer is asked again whether it is gone
 * (lm_rdm_peer_afresh): its endpoint may have closed and this packet come
 * from one opened at its address since, which our answers must reach. */
static inline struct lm_rdm_peer *lm_rdm_peer_of_src(struct lm_rdm_ep *ep,
                                                     const void *src_addr)
{
	struct lm_rdm_peer *p = ep->last_src;
	uint64_t gen;

	if (p && !lm_bytes_same(p->addr, src_addr, ep->dom->link_ops->addrlen))
		p = NULL;
	if (__builtin_expect(!p, 0)) {
		p = lm_rdm_peer_by_addr(ep, src_addr);
		if (!p)
			return NULL;
		ep->last_src = p;
	}
	gen = atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed);
	if (__builtin_expect(p->fresh_gen != (uint32_t)gen, 0))
		lm_rdm_peer_afresh(ep, p, gen);
	return p;
}
fi_addr_t lm_rdm_peer_fiaddr_slow(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer);
/* peer's fi_addr in the endpoint's AV (FI_ADDR_NOTAVAIL if not in it),
 * cached until an address is removed.  Unknown senders are looked up
 * again each time: the application may insert them later. */
static inline fi_addr_t lm_rdm_peer_fiaddr(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer)
{
	if (!ep->av) /* FI_EP_MSG, or no AV bound yet */
		return FI_ADDR_NOTAVAIL;
	if (peer->fi_addr != FI_ADDR_NOTAVAIL &&
	    peer->fi_gen == atomic_load_explicit(&ep->dom->av_gen, memory_order_relaxed))
		return peer->fi_addr;
	return lm_rdm_peer_fiaddr_slow(ep, peer);
}
/* The error an operation with a dead peer reports: FI_EIO, which on a
 * connected endpoint (its one peer gone) is FI_ENOTCONN. */
static inline int lm_rdm_peer_err(const struct lm_rdm_ep *ep, int err)
{
	return err == FI_EIO && ep->connected ? FI_ENOTCONN : err;
}
/* The link's capabilities (LM_LINK_*) for packets to peer: the link's
 * own, or, under a link of two, those of the one that carries them. */
static inline unsigned lm_rdm_peer_caps(const struct lm_rdm_ep *ep,
                                        const struct lm_rdm_peer *peer)
{
	return ep->link->ops->peer_caps && peer->lp
	           ? ep->link->ops->peer_caps(ep->link, peer->lp)
	           : ep->link->caps;
}
/* May a transfer with peer copy straight from or into its memory? */
static inline bool lm_rdm_peer_bulk(const struct lm_rdm_ep *ep, const struct lm_rdm_peer *peer)
{
	return ep->bulk && !peer->bulk_broken &&
	       (lm_rdm_peer_caps(ep, peer) & LM_LINK_BULK_READ);
}
/* A dead peer may be tried again (reconnected, or restarted): its
 * endpoint starts afresh, with all its eager credit. */
static inline void lm_rdm_peer_revive(struct lm_rdm_peer *p)
{
	p->dead = false;
	p->credit = LM_EAGER_CREDIT;
	p->owed = 0;
}
/* Give peer what it is owed, with CREDIT. */
void lm_rdm_credit_return(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer);
/* Eager bytes of peer consumed here (delivered, discarded or dropped):
 * given back with CREDIT once LM_CREDIT_RETURN have added up. */
static inline void lm_rdm_credit_owe(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                                     size_t n)
{
	peer->owed += n;
	if (peer->owed >= LM_CREDIT_RETURN && !peer->dead)
		lm_rdm_credit_return(ep, peer);
}
/* n bytes of credit given back by peer (CREDIT, or riding a message).
 * Never above the start: a peer cannot talk us into sending more than it
 * may be made to hold. */
static inline void lm_rdm_credit_back(struct lm_rdm_peer *peer, uint64_t n)
{
	peer->credit = n > LM_EAGER_CREDIT - peer->credit ? LM_EAGER_CREDIT
	                                                  : peer->credit + n;
}

static inline struct lm_rdm_ctx *lm_rdm_ctx_of(struct fid_ep *fid)
{
	return lm_container_of(fid, struct lm_rdm_ctx, ep_fid);
}

static inline struct lm_rdm_ep *lm_rdm_ep_of(struct fid_ep *fid)
{
	return lm_rdm_ctx_of(fid)->ep;
}

/* progress.c */
/* No request of ours to peer is queued or waiting for its answer. */
bool lm_rdm_peer_quiet(struct lm_rdm_ep *ep, const struct lm_rdm_peer *peer);
/* Something now waits in one of ep's lists: progress must look. */
static inline void lm_rdm_busy(struct lm_rdm_ep *ep)
{
	atomic_store_explicit(&ep->quiet, false, memory_order_relaxed);
}
/* sleepy: a reader of a bound CQ/counter is about to sleep on the fd. */
void lm_rdm_progress(struct lm_rdm_ep *ep, bool sleepy);
void lm_rdm_hook_run(struct lm_progress *p);
void lm_rdm_progress_locked(struct lm_rdm_ep *ep);
/* Before an endpoint closes: let the answers it owes peers (ACK, FIN,
 * credit) that found no room yet go, for at most a short while. */
void lm_rdm_linger(struct lm_rdm_ep *ep);

struct lm_rdm_tx *lm_rdm_tx_alloc(struct lm_rdm_ep *ep);
void lm_rdm_tx_free(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx);
/* An eager send the link took but has not delivered yet (link ops mark
 * and delivered): tx waits in ep->tx_wait as LM_TX_HELD until it has,
 * and true; false when it is delivered already (tx untouched). */
bool lm_rdm_tx_park_held(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx);
/* The two halves of it: the link's mark for what was just sent to peer,
 * or 0 when nothing need wait (delivered, or a link that never holds);
 * and tx parked at mark. */
static inline uint64_t lm_rdm_hold_mark(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer)
{
	const struct lm_link_ops *ops = ep->link->ops;
	uint64_t mark = ops->mark ? ops->mark(ep->link, peer->lp) : 0;

	/* Behind a held one it waits too: completions keep their order. */
	if (!mark || (!ep->tx_held && ops->delivered(ep->link, peer->lp, mark, false)))
		return 0;
	return mark;
}
void lm_rdm_tx_hold(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, uint64_t mark);
/* The live request named by handle that went to from, or NULL. */
struct lm_rdm_tx *lm_rdm_tx_lookup(struct lm_rdm_ep *ep, uint64_t handle,
                                   const struct lm_rdm_peer *from);
/* The same, only a request of kind op waiting for its answer (LM_TX_WAIT):
 * what an answer (CTS, PUSH, a read's or atomic's response, a write's FIN)
 * may name. */
static inline struct lm_rdm_tx *lm_rdm_tx_awaiting(struct lm_rdm_ep *ep, uint64_t handle,
                                                   const struct lm_rdm_peer *from,
                                                   uint8_t op)
{
	struct lm_rdm_tx *tx = lm_rdm_tx_lookup(ep, handle, from);

	return tx && tx->op == op && tx->state == LM_TX_WAIT ? tx : NULL;
}
static inline uint64_t lm_rdm_tx_handle(const struct lm_rdm_tx *tx)
{
	return lm_rdm_handle(tx->gen, tx->slot);
}
/* Bits no libfabric release gives a data-transfer call or op_flags a
 * meaning (60-63 are the providers'): a call passing one gets
 * -FI_EBADFLAGS. */
#define LM_BAD_OP_FLAGS                                                                  \
	((1ULL << 14) | (1ULL << 15) | (1ULL << 23) | (1ULL << 40) | (1ULL << 42))

/* The start of every data call on iov: the list valid (*len its total),
 * the flags known, the endpoint enabled.  0 with ep->lock held, or the
 * error without it. */
static LM_HOT_INLINE ssize_t lm_rdm_op_enter(const struct lm_rdm_ctx *ctx,
                                             const struct iovec *iov, size_t count,
                                             uint64_t flags, size_t *len)
{
	struct lm_rdm_ep *ep = ctx->ep;

	if (!lm_iov_valid(iov, count, len))
		return -FI_EINVAL;
	if (flags & LM_BAD_OP_FLAGS)
		return -FI_EBADFLAGS;
	lm_lock_acquire(ep->lock);
	if (!ep->enabled || ctx->tx_off) {
		lm_lock_release(ep->lock);
		return -FI_EOPBADSTATE;
	}
	return 0;
}
/* Whether a data call's completion goes to the CQ: never for the inject
 * calls, and with FI_SELECTIVE_COMPLETION only when asked (FI_COMPLETION). */
static inline bool lm_rdm_tx_reports(const struct lm_rdm_report *rep, uint64_t flags,
                                     bool inject_call)
{
	return rep->cq && !inject_call && (!rep->selective || (flags & FI_COMPLETION));
}
/* A request for a data call to dest, behind any queued ones, with peer,
 * context and report set (to rep's CQ); NULL with *err -FI_EINVAL
 * (unknown dest) or -FI_EAGAIN (no free request).  Under ep->lock. */
struct lm_rdm_tx *lm_rdm_tx_begin(struct lm_rdm_ep *ep, const struct lm_rdm_report *rep,
                                  fi_addr_t dest, uint64_t flags, void *context,
                                  bool inject_call, ssize_t *err);
/* tx's buffers: the caller's iov, or (copy) len bytes of it in tx->inject. */
void lm_rdm_tx_set_iov(struct lm_rdm_tx *tx, const struct iovec *iov, size_t count,
                       size_t len, bool copy);
/* Send tx's first packet now, or queue it behind earlier ones. */
ssize_t lm_rdm_tx_start(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx);
/* tx's first packet is h, naming tx as its sender's request: start it. */
static inline ssize_t lm_rdm_tx_launch(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx,
                                       struct lm_rdm_hdr *h)
{
	h->sreq = lm_rdm_tx_handle(tx);
	tx->hdr = *h;
	return lm_rdm_tx_start(ep, tx);
}
/* Push queued packets as far as the link takes them. */
void lm_rdm_tx_flush(struct lm_rdm_ep *ep);
/* A control packet with payload; queued (copied) when the link is full. */
void lm_rdm_ctl_send(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *hdr, const void *payload, size_t len);
void lm_rdm_tx_done(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, int err);
/* Answers to our requests: CTS (send the DATA asked for), FIN or ACK. */
void lm_rdm_on_cts(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                   const struct lm_rdm_hdr *h);
void lm_rdm_on_fin(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                   const struct lm_rdm_hdr *h);
/* Every request, rendezvous and queued answer with peer ends with err. */
void lm_rdm_fail_peer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, int err);
const char *lm_rdm_strerror(struct lm_cq *cq, int prov_errno, const void *err_data);

/* send.c: the fi_ops_msg and fi_ops_tagged tables, whose receive calls are
 * recv.c's. */
extern const struct fi_ops_msg lm_rdm_msg_ops;
extern const struct fi_ops_tagged lm_rdm_tagged_ops;
/* The same with -FI_ENOSYS receives: a transmit context's. */
extern const struct fi_ops_msg lm_rdm_tx_msg_ops;
extern const struct fi_ops_tagged lm_rdm_tx_tagged_ops;

/* recv.c: posting receives, matching arrivals, the packet dispatch. */
ssize_t lm_rdm_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                    fi_addr_t src_addr, void *context);
ssize_t lm_rdm_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                     size_t count, fi_addr_t src_addr, void *context);
ssize_t lm_rdm_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags);
ssize_t lm_rdm_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                     fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context);
ssize_t lm_rdm_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                      size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                      void *context);
ssize_t lm_rdm_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                        uint64_t flags);
/* The receive calls of a receive context's own fid (a shared one's, a
 * scalable endpoint's). */
ssize_t lm_rdm_rxc_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                        fi_addr_t src_addr, void *context);
ssize_t lm_rdm_rxc_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t src_addr, void *context);
ssize_t lm_rdm_rxc_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags);
ssize_t lm_rdm_rxc_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                         fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context);
ssize_t lm_rdm_rxc_trecvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                          size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                          void *context);
ssize_t lm_rdm_rxc_trecvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                            uint64_t flags);
/* lm_link_attr.recv: every packet from a link. */
void lm_rdm_recv_pkt(void *arg, const void *src_addr, const void *hdr,
                     const void *payload, size_t payload_len);
/* fi_cancel of a receive queued in rxc; its error completion goes to ep's
 * CQ (NULL: a shared context none of whose endpoints is enabled). */
ssize_t lm_rdm_cancel(struct lm_rdm_rxc *rxc, struct lm_rdm_ep *ep, void *context);
void lm_rdm_unexp_free(struct lm_rdm_ep *ep, struct lm_rdm_unexp *x);
void lm_rdm_rx_free(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx);
/* A posted receive (out of its match list) ends with err (positive): its
 * error completion and counter; freed unless a rendezvous still fills it. */
void lm_rdm_rx_end(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, int err);
/* A message of msg_len bytes into rx is complete (counters, CQ entry). */
void lm_rdm_rx_report(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, size_t msg_len,
                      uint64_t data, uint64_t tag, fi_addr_t src, uint64_t extra);
/* Where a message of len bytes lands in rx: its iov, or for a
 * multi-receive buffer the next free piece.  Returns the iov count;
 * *released says the buffer is used up. */
size_t lm_rdm_rx_place(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, size_t len,
                       struct iovec *iov, bool *released);
/* A multi-receive buffer that has room goes on taking messages; one that
 * is used up (released) leaves the queue (when queued). */
void lm_rdm_rx_multi_after(struct lm_rdm_ep *ep, struct lm_rdm_rx *rx, bool released,
                           bool queued);

/* rndv.c: receive-side transfers (rendezvous, placed eager messages, the
 * target of streamed RMA writes). */
/* A control answer (FIN, ACK) to the request sreq of peer. */
void lm_rdm_answer(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, uint8_t op,
                   uint64_t sreq, uint64_t rreq);
/* A matched RTS (rts: the sender's buffers; early: the message's first
 * early_len bytes, come with it, or NULL): read the sender's buffer in one
 * copy when the link can, else ask for the data with CTS. */
void lm_rdm_rndv_start(struct lm_rdm_ep *ep, const struct lm_rdm_arrival *a,
                       const struct lm_rdm_rts *rts, const void *early, size_t early_len);
/* The payload (eager) or first piece (RTS) of the message matched on its
 * header as peer->eager, which the link did not place: what fits. */
void lm_rdm_rndv_header_rest(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r,
                             const void *payload, size_t len);
void lm_rdm_rndv_data(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      const struct lm_rdm_hdr *h, const void *payload, size_t plen);
/* lm_link_attr.place / placed: DATA pieces read straight into the
 * receive buffer. */
size_t lm_rdm_place(void *arg, const void *src_addr, const void *hdr, size_t plen,
                    struct iovec *iov);
void lm_rdm_placed(void *arg, const void *src_addr, const void *hdr, size_t plen);
void lm_rdm_unplaced(void *arg, const void *src_addr, const void *hdr, size_t plen);
/* The link lost the connection r's payload was being placed from: r waits
 * to fail with its peer. */
void lm_rdm_rndv_unplaced(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r);
/* lm_link_attr.lost: the peer is dead until the next liveness check has
 * failed what was in flight with it (its eager placement included). */
void lm_rdm_lost(void *arg, const void *src_addr);
void lm_rdm_rndv_fail(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err);
/* Bring the h->size bytes of an RMA write (h: its WRITE header) into iov
 * (verified target memory) through a rendezvous slot: with rts (the
 * initiator's buffers, when it may be read across processes) by bulk
 * copy, split with the initiator under LM_HF_SPLIT, else by CTS/DATA.
 * Finished by rndv_finish (FIN to h->sreq, lm_rdm_rma_rndv_done).  false:
 * no slot free. */
bool lm_rdm_rndv_write(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                       const struct lm_rdm_hdr *h, const struct iovec *iov,
                       size_t iov_count, const struct lm_rdm_rts *rts);

/* rma.c, atomic.c */
extern const struct fi_ops_rma lm_rdm_rma_ops;
extern const struct fi_ops_atomic lm_rdm_atomic_ops;
void lm_rdm_rma_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *h, const void *payload, size_t plen);
void lm_rdm_atomic_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen);
/* A streamed RMA write finished at the target: counters, remote CQ data. */
void lm_rdm_rma_rndv_done(struct lm_rdm_ep *ep, struct lm_rdm_rndv *r, int err);
/* The target-side events of a remote write of len bytes into the region
 * key (remote CQ data, counters) or of a remote read; on a scalable
 * endpoint's lane, its receive context's CQ and counters report it. */
void lm_rdm_rma_target_event(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer, bool write,
                             uint64_t key, uint16_t hflags, uint64_t data, size_t len);
/* A remote access (FI_REMOTE_READ or FI_REMOTE_WRITE) reached region key:
 * the endpoint's (or its lane's receive context's) counter for that kind
 * and, with FI_RMA_EVENT, the region's own. */
void lm_rdm_remote_event(struct lm_rdm_ep *ep, uint64_t key, uint64_t access);
/* fi_atomic's message-size bound: elements of dt one call may carry. */
size_t lm_rdm_atomic_max(struct lm_rdm_ep *ep, enum fi_datatype dt, bool compare);

/* Post a completion for a finished tx (CQ entry or error, counter). */
void lm_rdm_report_tx(struct lm_rdm_ep *ep, struct lm_rdm_tx *tx, int err);

/* Split points of large transfers fall on page boundaries, so that each
 * part starts where the buffer's pages do (copies of aligned parts are
 * faster).  Linux/x86-64 pages. */
#define LM_PAGE_SIZE ((size_t)4096)

/* The part [off, off + len) of iov was written by a peer through the link's
 * bulk_write (cross-memory attach): memory this process never stored to,
 * which valgrind's memcheck would otherwise hold undefined.  Tells it, when
 * loom was built with valgrind's headers; costs nothing outside valgrind. */
void lm_rdm_iov_written(const struct iovec *iov, size_t count, size_t off, size_t len);
/* iov as a wire iov list. */
void lm_rdm_rts_from_iov(struct lm_rdm_rts *rts, const struct iovec *iov, size_t count);
/* Take an iov list payload: 0, or -FI_EINVAL when its length does not
 * match its count or the count is over LM_IOV_LIMIT. */
int lm_rdm_rts_parse(struct lm_rdm_rts *rts, const void *payload, size_t plen);
/* The first size bytes of rts as an iov array; 0 when rts holds fewer (a
 * zero size gives one empty piece). */
size_t lm_rdm_rts_iov(const struct lm_rdm_rts *rts, uint64_t size, struct iovec *out);
/* split rendezvous (rndv.c) */
void lm_rdm_on_push(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                    const struct lm_rdm_hdr *h, const void *payload, size_t plen);
void lm_rdm_on_pushed(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                      const struct lm_rdm_hdr *h);

#endif
