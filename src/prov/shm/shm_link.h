/* shm_link.h - the shared-memory transport under the shm provider: per-endpoint
 * regions in /dev/shm, a lock-free command ring, bounce buffers, a pollable
 * doorbell and cross-memory attach.  No libfabric objects live here. */
#ifndef LOOM_SHM_LINK_H
#define LOOM_SHM_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/fi_errno.h>

#include "list.h"

/*
 * Overview.  Every endpoint owns one region, named
 * "/loom-<uid>-<pid>-<token16hex>" and addressed as "fi_shm://<pid>/<token16hex>".
 * Other processes map it (shm_peer_open) and, as producers, push cells into
 * its ring, take bounce buffers from its pool and ring its doorbell.  The
 * owner is the only consumer.
 *
 * Threading: producer calls (shm_ring_push, shm_buf_alloc/put, shm_doorbell_ring,
 * shm_cma_*) may run concurrently from any number of threads and processes.
 * Owner calls on a region (shm_ring_pop/peek/release, shm_buf_free,
 * shm_doorbell_*) must be serialised by the caller (one progress thread at a
 * time).  Create/destroy/open/close of one object must not race its own use.
 *
 * Trust: a peer is another process of the same user and may be buggy or
 * hostile.  Every size, offset and index read from shared memory is checked
 * against private copies taken when the mapping was validated, so a corrupted
 * header or cell can lose or garble messages but never make this process touch
 * memory outside the mapping.  (One hole remains that no check can close: an
 * owner that shrinks its object with ftruncate makes peers' accesses fault with
 * SIGBUS.)
 */

/* ---- region layout, shared with peers ----------------------------------
 * Layout version SHM_LAYOUT_VERSION (now 4).  Peers compare it on open and
 * refuse another, so any change below takes a new number.
 *
 *   0        struct shm_hdr                       (identity, atomics)
 *   ring_off cells[ring_cells], SHM_CELL_SIZE each (the command ring)
 *   meta_off struct shm_buf_meta[buf_count]       (free-list links)
 *   buf_off  buffers[buf_count], buf_size each    (page aligned)
 */

/* Tells a loom region from any other object in /dev/shm. */
#define SHM_MAGIC          0x314d48534d4f4f4cULL /* "LOOMSHM1" little-endian */
#define SHM_LAYOUT_VERSION 4
/* What producers and the owner keep apart (the header's atomics each have
 * a line of their own) and align cells and buffers to. */
#define SHM_CACHE_LINE 64
#define SHM_OWN_LINE   _Alignas(SHM_CACHE_LINE)
/* One ring cell: four cache lines.  Room for the link's sender words, the
 * engine header's usual words and a small payload (a small message with
 * its header takes two lines of it, link.c); the ring's memory stays small
 * beside the bounce buffers' (1024 cells: 256 KiB). */
#define SHM_CELL_SIZE      256
/* The cell's own fields before its data: seq (8 bytes), len and pad (4
 * each), as struct shm_cell has them. */
#define SHM_CELL_HDR       16
/* Largest hdr + payload that travels inline in one ring cell. */
#define SHM_INLINE_MAX     (SHM_CELL_SIZE - SHM_CELL_HDR)
/* One bounce buffer: the link's max_payload, the most one packet carries
 * (an eager message, a DATA piece of a rendezvous without CMA).  Large,
 * so a stream takes few cells per byte; small enough that the default
 * count of them is 4 MiB per endpoint. */
#define SHM_BUF_SIZE       65536
/* Cells of a region whose endpoint asks for no deeper receive queue (a
 * larger rx_attr size raises it): the providers' queue depth,
 * LM_RDM_QUEUE_SIZE. */
#define SHM_RING_CELLS_DEF 1024
/* Bounce buffers per region: a window of large messages from a few
 * senders at once, at 4 MiB of memory per endpoint. */
#define SHM_BUF_COUNT_DEF  64
/* Bounds a peer's header is checked against (and what an endpoint may ask
 * for): far above any queue depth in use, low enough that the sizes they
 * multiply to (256 MiB of cells, 1 TiB of buffers at SHM_BUF_SIZE_MAX)
 * stay far from overflowing the geometry checks' 64-bit arithmetic. */
#define SHM_RING_CELLS_MAX (1u << 20)
#define SHM_BUF_COUNT_MAX  (1u << 16)
/* Largest buffer size a peer's header may claim (ours are SHM_BUF_SIZE):
 * a sanity bound, like the two above. */
#define SHM_BUF_SIZE_MAX (1u << 24)
/* Longest region name (with NUL): "/loom-<uid>-<pid>-<16 hex>" is at most
 * 45 bytes.  Longest address string (with NUL): "fi_shm://<pid>/<16
 * hex>" is at most 37. */
#define SHM_NAME_MAX    64
#define SHM_ADDR_MAX    40
#define SHM_ADDR_PREFIX "fi_shm://"
/* Longest endpoint name an application may choose (with NUL): room for
 * any "fi_ns://host:service" or path-like name.  Only its hash travels
 * and names the region, so a long name costs nothing there. */
#define SHM_NAME_TEXT_MAX 256
/* No buffer (a cell's inline payload; the free list's end): never an
 * index, as there are at most SHM_BUF_COUNT_MAX buffers. */
#define SHM_BUF_NONE    0xffffffffu
/* Producers that may wait at once for room in one region, each rung when
 * the owner frees some (more wait by looking again on a timer).  Enough
 * for the senders that fill one receiver at once in small jobs; the
 * owner scans every slot when it frees room for a waiter, and each is
 * header space in every region, so not many more. */
#define SHM_WAITERS 16
/* Consumed cells handed back at the latest after this many (shm_ring_flush).
 * The hand-back is a locked store whose cache line producers then take
 * back: one on every poll cost about 8 % of a 64-byte message's latency,
 * while 32 of 1024 cells held back shrink the ring by 3 %. */
#define SHM_FLUSH_BATCH 32
/* The value of the word at hdr->cma_probe_addr in the owner's memory
 * ("cmaprob!" little-endian): not zero, and unlikely to be read by chance
 * from a wrong address. */
#define SHM_CMA_PROBE_WORD 0x21626f7270616d63ULL

/* A producer waiting for room in the region: the owner rings the doorbell
 * of the region named by (pid, token) when it frees cells or buffers.
 * state: SHM_WAITER_* below. */
enum {
	SHM_WAITER_FREE = 0,    /* zero, as a fresh region has it */
	SHM_WAITER_WRITING = 1, /* a producer claimed it and fills it */
	SHM_WAITER_WAITING = 2, /* filled: ring (pid, token) */
};
struct shm_waiter {
	_Atomic uint32_t state;
	_Atomic int32_t pid;
	_Atomic uint64_t token;
};

struct shm_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size; /* sizeof(struct shm_hdr) */
	uint64_t total_size;
	uint64_t token;
	int32_t owner_pid;
	uint32_t pad0;
	uint64_t owner_start;    /* /proc/<pid>/stat field 22 */
	uint64_t cma_probe_addr; /* owner address of SHM_CMA_PROBE_WORD */
	uint64_t ring_off;
	uint32_t ring_cells; /* power of two */
	uint32_t buf_count;
	uint64_t meta_off;
	uint64_t buf_off;
	uint32_t buf_size;
	_Atomic uint32_t alive;                  /* 1 from creation until destroy */
	SHM_OWN_LINE _Atomic uint32_t sleeping;  /* doorbell armed by the owner */
	SHM_OWN_LINE _Atomic uint64_t ring_head; /* producers' next position */
	SHM_OWN_LINE _Atomic uint64_t ring_freed;  /* owner: cells before it are free */
	SHM_OWN_LINE _Atomic uint64_t buf_free;    /* tag << 32 | first free index */
	SHM_OWN_LINE _Atomic uint32_t room_wanted; /* a waiter is registered */
	SHM_OWN_LINE struct shm_waiter waiters[SHM_WAITERS];
};

/* One ring cell.  seq == pos + 1: committed, ready for the consumer at
 * pos; anything else (0 in a fresh region) is not.  Which cells are free
 * for producers is ring_freed's to say, not seq's. */
struct shm_cell {
	_Atomic uint64_t seq;
	uint32_t len; /* bytes of data in use */
	uint32_t pad;
	uint8_t data[SHM_INLINE_MAX];
};

enum {
	SHM_BUF_FREE = 0, /* zero, as a fresh region has it */
	SHM_BUF_TAKEN = 1,
};
struct shm_buf_meta {
	_Atomic uint32_t next;  /* free-list link (SHM_BUF_NONE ends) */
	_Atomic uint32_t state; /* SHM_BUF_FREE or SHM_BUF_TAKEN */
};

/* ---- private handles ------------------------------------------------------ */

/* Bounds of a mapping, copied and checked once; never re-read from it. */
struct shm_map {
	char *base;
	size_t size;
	struct shm_hdr *hdr;
	struct shm_cell *cells;
	uint64_t mask; /* ring_cells - 1 */
	struct shm_buf_meta *meta;
	char *bufs;
	uint32_t buf_count;
	uint32_t buf_size;
};

struct shm_region {
	struct shm_map map;
	/* Consumer position: private, so peers cannot move it.  Atomic only
	 * so that shm_ring_ready may be asked without the owner's lock. */
	_Atomic uint64_t tail;
	/* hdr->ring_freed as last stored: freed..tail are consumed but not
	 * handed back yet (shm_ring_consume).  Atomic for the same hint. */
	_Atomic uint64_t freed;
	uint64_t token;
	pid_t pid;
	int sock; /* doorbell: bound abstract AF_UNIX datagram socket */
	struct lm_list node;
	char name[SHM_NAME_MAX];
	char addr[SHM_ADDR_MAX];
};

struct shm_peer {
	struct shm_map map;
	uint64_t token;
	uint64_t start; /* owner start time seen at open */
	pid_t pid;
	int cma; /* 0 not probed, 1 works, negative: -FI_E* why not */
	uint64_t freed; /* the owner's ring_freed, as last read */
	char name[SHM_NAME_MAX];
	char addr[SHM_ADDR_MAX];
};

struct shm_region_attr {
	uint32_t ring_cells; /* rounded up to a power of two; 0: default */
	uint32_t buf_count;  /* 0: default */
	uint64_t token;      /* 0: drawn at random (fi_setname picks one) */
	/* token is a chosen name's hash (shm_addr_resolve): the region is
	 * found by it alone, whichever process owns it. */
	bool named;
	/* The name came with fi_info, not fi_setname: when an endpoint of
	 * this process holds it already, take a fresh address instead. */
	bool name_hint;
};

/* Provider logs go under (the core's until the shm provider points it at
 * itself at init). */
struct fi_provider;
extern const struct fi_provider *shm_log_prov;

/* ---- addresses (region.c) ---------------------------------------------- */

/* Write "fi_shm://<pid>/<token16hex>" into buf.  Returns the string length,
 * or -FI_ETOOSMALL (buf untouched) when it and its NUL do not fit in len;
 * SHM_ADDR_MAX always fits. */
int shm_addr_format(char *buf, size_t len, pid_t pid, uint64_t token);
/* Parse an address written by shm_addr_format (exactly 16 lowercase or
 * uppercase hex digits, pid 0 (named) or 1..INT_MAX, nothing after).
 * -FI_EINVAL if not. */
int shm_addr_parse(const char *addr, pid_t *pid, uint64_t *token);
/* Any address text: one shm_addr_parse takes, or else a name chosen by the
 * application ("fi_ns://host:port", "fi_shm://anything", "anything"), which
 * becomes pid 0 and a 64-bit hash of the name (never 0).  Pid 0 in the
 * canonical form ("fi_shm://0/<hash>") is the same named endpoint.
 * -FI_EINVAL for NULL, "" or a name of SHM_NAME_TEXT_MAX bytes or more. */
int shm_addr_resolve(const char *text, pid_t *pid, uint64_t *token);

/* ---- regions (region.c) ------------------------------------------------ */

/* Create this endpoint's region (mode 0600, O_EXCL, random token) with its
 * doorbell socket, after reclaiming stale regions of dead processes of this
 * user.  attr may be NULL.  *out set only on success. */
int shm_region_create(const struct shm_region_attr *attr, struct shm_region **out);
/* Mark it dead for peers, unlink its name, close the doorbell, unmap, free.
 * In a forked child that inherited r, only the child's copy is released.
 * NULL is accepted. */
void shm_region_destroy(struct shm_region *r);
/* The region's address string (valid until destroy). */
const char *shm_region_addr(const struct shm_region *r);
/* Remove /dev/shm regions of this user whose process is dead or whose pid
 * was recycled.  Called by shm_region_create; returns how many it removed. */
int shm_region_reclaim(void);

/* Map the region named by addr after validating it: same user, mode 0600,
 * magic, layout version (-FI_ENOPROTOOPT with a warning naming both versions),
 * every size and offset inside the object's real size (-FI_EINVAL), owner
 * pid and token matching the address.  -FI_ENOENT if there is no such
 * region, -FI_EHOSTDOWN if it exists but its owner is gone. */
int shm_peer_open(const char *addr, struct shm_peer **out);
void shm_peer_close(struct shm_peer *p);
/* Is the owner still there?  kill(pid, 0), its start time and its alive
 * flag.  Costs a syscall and a /proc read: call it on timeouts or errors,
 * not per message. */
bool shm_peer_alive(const struct shm_peer *p);

/* ---- command ring (ring.c) ----------------------------------------------
 * Bounded MPSC ring; a cell's sequence word says it is committed, a
 * counter in its own cache line says which cells are free again:
 *
 *   hdr->ring_freed (owner)   hdr->ring_head (CAS by producers)
 *            |                          |
 *   cells: [ consumed | seq=p+1 | seq=p+1 | claimed, being written | ... ]
 *                     |
 *               region->tail (owner only)
 *
 * A producer claims position p by CAS on ring_head once p - ring_freed <
 * ring_cells (it keeps the last ring_freed it read, and reads it again only
 * when that says full), writes the cell, then publishes seq = p + 1
 * (release).  The owner consumes cells[tail] when its seq == tail + 1
 * (acquire) and hands consumed cells back by storing ring_freed (release).
 * The owner never writes a cell, and a producer reads nothing in one but
 * the lines it writes: each line moves from producer to owner once.  A cell
 * claimed but
 * not yet published stops the consumer there, so a half-written cell is never
 * seen.  (A producer killed inside that window of a few instructions stalls
 * the ring; the owner then sees its peers time out.)
 */

/* Producer, in two steps: a free cell (its data is ours to fill) and its
 * position, or NULL when the ring is full; then commit it with len bytes
 * of data (at most SHM_INLINE_MAX), which hands it to the owner.  Inline:
 * they are the send path of every message. */
static inline struct shm_cell *shm_ring_claim(struct shm_peer *p, uint64_t *pos_out)
{
	struct shm_map *m = &p->map;
	_Atomic uint64_t *head = &m->hdr->ring_head;
	uint64_t pos = atomic_load_explicit(head, memory_order_relaxed);

	for (;;) {
		/* Room: what the owner freed, as last read; read again only
		 * when that says full.  A ring_freed ahead of ring_head (a
		 * corrupt header) reads as full too: -FI_EAGAIN, no hang. */
		if (pos - p->freed >= m->mask + 1) {
			p->freed = atomic_load_explicit(&m->hdr->ring_freed,
			                                memory_order_acquire);
			if (pos - p->freed >= m->mask + 1)
				return NULL;
		}
		if (atomic_compare_exchange_weak_explicit(head, &pos, pos + 1,
		                                          memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
		/* pos now holds the current head: try it. */
	}
	*pos_out = pos;
	return &m->cells[pos & m->mask];
}

static inline void shm_ring_commit(struct shm_cell *c, uint64_t pos, size_t len)
{
	c->len = (uint32_t)len;
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}
/* Copy hdr then the payload iov into one cell of the peer's ring.
 * -FI_EMSGSIZE if the total exceeds SHM_INLINE_MAX, -FI_EAGAIN if the ring is
 * full (never blocks).  Does not ring the doorbell: call shm_doorbell_ring
 * after one push or a batch. */
int shm_ring_push(struct shm_peer *p, const void *hdr, size_t hdr_len,
                  const struct iovec *payload, size_t iovcnt);
/* Owner: copy the oldest cell's data into buf (SHM_INLINE_MAX bytes) and
 * release the cell.  Returns its length, -FI_EAGAIN when empty, or -FI_EIO
 * for a cell with an impossible length (the cell is dropped). */
ssize_t shm_ring_pop(struct shm_region *r, void *buf);
/* Owner, zero-copy form: the oldest cell's data and length, or NULL when
 * empty (cells with an impossible length are dropped on the way).  The data
 * is still in shared memory, where a hostile producer could rewrite it: copy
 * a field before validating it.  shm_ring_release then gives the cell back. */
/* shm_ring_peek past a cell with an impossible length. */
const void *shm_ring_peek_slow(struct shm_region *r, size_t *len);
void shm_ring_release(struct shm_region *r);
/* Owner: release later.  shm_ring_consume moves past the oldest cell but
 * leaves it in use; shm_ring_flush hands every such cell back (one locked
 * store to ring_freed, whose cache line a producer then takes back, then
 * shm_room_offer), when shm_ring_flush_due says so. */
void shm_ring_flush(struct shm_region *r);

/* Inline: they are the receive path of every message. */
static inline uint64_t shm_ring_tail(const struct shm_region *r)
{
	return atomic_load_explicit(&r->tail, memory_order_relaxed);
}

/* Owner: is there a committed cell to read?  May be called without the
 * owner's serialisation as a hint (a stale answer only delays). */
static inline bool shm_ring_ready(const struct shm_region *r)
{
	uint64_t t = shm_ring_tail(r);
	const struct shm_cell *c = &r->map.cells[t & r->map.mask];

	return atomic_load_explicit(&c->seq, memory_order_acquire) == t + 1;
}

static inline void shm_ring_consume(struct shm_region *r)
{
	atomic_store_explicit(&r->tail, shm_ring_tail(r) + 1, memory_order_relaxed);
}

/* Owner: hand the consumed cells back now?  In batches of
 * SHM_FLUSH_BATCH (producers see a ring that much smaller), and at once
 * when a producer waits for room.  That flag is read without a fence
 * here: a polling owner sees it soon, and one about to sleep flushes
 * with the fence first (shm_link_arm). */
static inline bool shm_ring_flush_due(const struct shm_region *r)
{
	uint64_t n = shm_ring_tail(r) - atomic_load_explicit(&r->freed, memory_order_relaxed);

	return n && (n >= SHM_FLUSH_BATCH || r->map.mask < 2 * SHM_FLUSH_BATCH ||
	             atomic_load_explicit(&r->map.hdr->room_wanted, memory_order_relaxed));
}

static inline const void *shm_ring_peek(struct shm_region *r, size_t *len)
{
	const struct shm_cell *c = &r->map.cells[shm_ring_tail(r) & r->map.mask];
	uint32_t n;

	if (!shm_ring_ready(r)) {
		*len = 0;
		return NULL;
	}
	n = c->len; /* read once: the producer may rewrite it */
	if (n > SHM_INLINE_MAX)
		return shm_ring_peek_slow(r, len);
	*len = n;
	return c->data;
}

/* ---- bounce buffers (ring.c) --------------------------------------------
 * buf_count buffers of buf_size bytes in the receiver's region, on a
 * Treiber free list whose head carries a tag bumped by every change, so an
 * index popped and pushed back between a reader's load and CAS (ABA) fails
 * the CAS:   buf_free = [ tag:32 | index:32 ] -> meta[index].next -> ...
 */

/* Sender: take a free buffer of the peer's region.  Returns its index,
 * -FI_EAGAIN when none is free, -FI_EIO if the free list is corrupt. */
int shm_buf_alloc(struct shm_peer *p);
/* Sender: where to write buffer idx (NULL unless idx < count). */
void *shm_buf_peer_ptr(struct shm_peer *p, uint32_t idx);
/* Sender: give back a buffer it took but never sent. */
int shm_buf_put(struct shm_peer *p, uint32_t idx);
/* Receiver: where to read buffer idx (NULL unless idx < count: validate
 * indices received in cells with this). */
const void *shm_buf_ptr(struct shm_region *r, uint32_t idx);
/* Receiver: free buffer idx after copying out.  -FI_EINVAL if idx is out of
 * range or not allocated (double free). */
int shm_buf_free(struct shm_region *r, uint32_t idx);
/* Buffer size in bytes of a region or peer mapping (&r->map, &p->map). */
size_t shm_buf_size(const struct shm_map *m);

/* ---- doorbell (region.c) --------------------------------------------------
 * The owner's socket is readable when a producer rang.  Protocol:
 *
 *   owner                                producer
 *   shm_doorbell_arm:                    shm_ring_push: publish cell seq
 *     sleeping = 1; full fence;          shm_doorbell_ring: full fence;
 *     ring ready? -> -FI_EAGAIN            if sleeping: exchange(sleeping, 0)
 *   poll(shm_region_fd) ...                and if it was 1: send 1 byte
 *   shm_doorbell_disarm (sleeping = 0)
 *   shm_doorbell_drain
 *
 * The two fences order "set flag, read ring" against "write ring, read flag":
 * at least one side sees the other, so either arm reports work or the
 * producer sends.  Only the producer that clears the flag sends: one
 * datagram per sleep.
 */

/* Descriptor to poll for readability (e.g. add to the CQ's epoll set).  The
 * socket lives in the abstract namespace of the owner's network namespace:
 * peers in another network namespace sharing /dev/shm cannot ring it. */
int shm_region_fd(const struct shm_region *r);
/* Owner, before sleeping: 0 if it may sleep on the fd, -FI_EAGAIN if the ring
 * already has work (the flag is cleared again: do not sleep). */
int shm_doorbell_arm(struct shm_region *r);
/* Owner, after waking (or deciding not to sleep). */
void shm_doorbell_disarm(struct shm_region *r);
/* Owner: consume pending doorbell datagrams so the fd stops being readable. */
void shm_doorbell_drain(struct shm_region *r);
/* Producer: wake the owner if it sleeps.  Non-blocking, errors ignored.
 * Inline, its datagram out of line (shm_doorbell_send). */
void shm_doorbell_send(struct shm_peer *p);
static inline void shm_doorbell_ring(struct shm_peer *p)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&p->map.hdr->sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&p->map.hdr->sleeping, 0, memory_order_relaxed))
		shm_doorbell_send(p);
}

/* ---- room wanted (region.c) -----------------------------------------------
 * A producer that finds the peer's ring (or its bounce buffers) full and
 * is about to sleep asks to be rung when the owner frees some:
 *
 *   producer (shm_room_want)              owner (shm_room_offer)
 *   slot: state 0 -> 1, pid, token,       frees cells (ring_freed) or a
 *     state = 2                             buffer (buf_free), seq_cst
 *   room_wanted = 1 (seq_cst)             room_wanted? (seq_cst load)
 *   room now? (seq_cst loads) ->            exchange(room_wanted, 0); each
 *     -FI_EAGAIN: do not sleep              slot 2 -> 0: one datagram to
 *                                           the doorbell of (pid, token)
 *
 * As for the doorbell, at least one side sees the other: either the
 * producer finds the room or the owner rings it.  A slot serves one sleep;
 * the producer asks again before the next. */

/* Producer: register region (pid, token) as waiting for room in p, for a
 * ring cell or, with buf, a bounce buffer.  0: registered, sleep on the
 * own doorbell; -FI_EAGAIN: there is room now; -FI_EBUSY: every slot is
 * taken (look again on a timer). */
int shm_room_want(struct shm_peer *p, pid_t pid, uint64_t token, bool buf);
/* Owner, after freeing cells or buffers (with a seq_cst store or RMW):
 * ring the producers waiting for room. */
void shm_room_ring(struct shm_region *r);
static inline void shm_room_offer(struct shm_region *r)
{
	if (atomic_load_explicit(&r->map.hdr->room_wanted, memory_order_seq_cst))
		shm_room_ring(r);
}

/* ---- cross-memory attach (cma.c) ---------------------------------------- */

/* 0 if process_vm_readv copies this process's own memory (cached after the
 * first call), -FI_ENOSYS / -FI_EPERM / ... otherwise, -FI_EOPNOTSUPP when
 * disabled. */
int shm_cma_probe(void);
/* 0 if a real copy from the peer's process works (reads the word at its
 * hdr->cma_probe_addr and expects SHM_CMA_PROBE_WORD; the result is cached in
 * the peer), else a negative code as above.  Do it on first contact. */
int shm_cma_peer_probe(struct shm_peer *p);
/* Copy min(local total, remote total) bytes from/to process pid, looping
 * over partial transfers.  Returns bytes copied, or -FI_EFAULT (bad remote
 * range), -FI_EPERM, -FI_ENOSYS, -FI_EIO (process gone or no progress). */
ssize_t shm_cma_read(pid_t pid, const struct iovec *local, size_t lcnt,
                     const struct iovec *remote, size_t rcnt);
ssize_t shm_cma_write(pid_t pid, const struct iovec *local, size_t lcnt,
                      const struct iovec *remote, size_t rcnt);

#endif
