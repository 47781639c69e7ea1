/* ring.c - the command ring (lock-free MPSC, cells with sequence words) and
 * the bounce-buffer pool (tagged Treiber free list) of a shm region. */
#include <string.h>

#include "core.h"
#include "shm_link.h"

/* ---- command ring --------------------------------------------------------- */

_Static_assert(sizeof(struct shm_cell) == SHM_CELL_SIZE, "cell size is wire format");
_Static_assert(offsetof(struct shm_cell, data) == SHM_CELL_HDR, "cell header size");
_Static_assert(sizeof(struct shm_hdr) % SHM_CACHE_LINE == 0,
               "header keeps cells cache aligned");

int shm_ring_push(struct shm_peer *p, const void *hdr, size_t hdr_len,
                  const struct iovec *payload, size_t iovcnt)
{
	struct shm_cell *c;
	uint64_t pos;
	size_t total = hdr_len, i, off;

	for (i = 0; i < iovcnt; i++) {
		if (payload[i].iov_len > SHM_INLINE_MAX)
			return -FI_EMSGSIZE;
		total += payload[i].iov_len;
	}
	if (total > SHM_INLINE_MAX)
		return -FI_EMSGSIZE;
	c = shm_ring_claim(p, &pos);
	if (!c)
		return -FI_EAGAIN;
	if (hdr_len)
		memcpy(c->data, hdr, hdr_len);
	off = hdr_len;
	for (i = 0; i < iovcnt; i++) {
		if (payload[i].iov_len)
			memcpy(c->data + off, payload[i].iov_base, payload[i].iov_len);
		off += payload[i].iov_len;
	}
	shm_ring_commit(c, pos, total);
	return 0;
}

void shm_ring_flush(struct shm_region *r)
{
	uint64_t t = shm_ring_tail(r);

	/* Release: the cells were read before a producer may write them.
	 * Sequentially consistent: ordered before the look for waiters. */
	atomic_store_explicit(&r->map.hdr->ring_freed, t, memory_order_seq_cst);
	atomic_store_explicit(&r->freed, t, memory_order_relaxed);
	shm_room_offer(r);
}

void shm_ring_release(struct shm_region *r)
{
	shm_ring_consume(r);
	shm_ring_flush(r);
}

const void *shm_ring_peek_slow(struct shm_region *r, size_t *len)
{
	struct shm_cell *c;
	uint32_t n;

	/* A cell with a length no producer could write is dropped, so one
	 * corrupt cell does not block the ring. */
	while (shm_ring_ready(r)) {
		c = &r->map.cells[shm_ring_tail(r) & r->map.mask];
		n = c->len;
		if (n <= SHM_INLINE_MAX) {
			*len = n;
			return c->data;
		}
		LM_WARN(shm_log_prov, FI_LOG_EP_DATA, "%s: dropped cell with length %u\n",
		        r->name, n);
		shm_ring_release(r);
	}
	*len = 0;
	return NULL;
}

ssize_t shm_ring_pop(struct shm_region *r, void *buf)
{
	struct shm_cell *c;
	uint32_t n;

	if (!shm_ring_ready(r))
		return -FI_EAGAIN;
	c = &r->map.cells[shm_ring_tail(r) & r->map.mask];
	n = c->len;
	if (n > SHM_INLINE_MAX) {
		LM_WARN(shm_log_prov, FI_LOG_EP_DATA, "%s: dropped cell with length %u\n",
		        r->name, n);
		shm_ring_release(r);
		return -FI_EIO;
	}
	memcpy(buf, c->data, n);
	shm_ring_release(r);
	return n;
}

/* ---- bounce buffers ------------------------------------------------------- */

/* buf_free: a tag bumped by every change above a buffer index. */
#define BUF_IDX(v) ((uint32_t)(v))
#define BUF_TAG(v) ((v) >> 32)
/* The head after one change of head old: its tag moved on, index idx. */
#define BUF_NEXT(old, idx) ((BUF_TAG(old) + 1) << 32 | (idx))

static int shm_buf_take(struct shm_map *m)
{
	_Atomic uint64_t *head = &m->hdr->buf_free;
	uint64_t old, new;
	uint32_t idx, next, zero = SHM_BUF_FREE;

	old = atomic_load_explicit(head, memory_order_acquire);
	for (;;) {
		idx = BUF_IDX(old);
		if (idx == SHM_BUF_NONE)
			return -FI_EAGAIN;
		if (idx >= m->buf_count)
			return -FI_EIO;
		next = atomic_load_explicit(&m->meta[idx].next, memory_order_relaxed);
		new = BUF_NEXT(old, next);
		if (atomic_compare_exchange_weak_explicit(
		        head, &old, new, memory_order_acquire, memory_order_acquire))
			break;
	}
	/* A stale next read before a losing CAS is harmless: the tag made the
	 * CAS fail.  If the winner's next was out of range, the next alloc
	 * reports the corruption. */
	if (!atomic_compare_exchange_strong_explicit(&m->meta[idx].state, &zero,
	                                             SHM_BUF_TAKEN, memory_order_relaxed,
	                                             memory_order_relaxed))
		return -FI_EIO;
	return (int)idx;
}

static int shm_buf_give(struct shm_map *m, uint32_t idx)
{
	_Atomic uint64_t *head = &m->hdr->buf_free;
	uint64_t old, new;
	uint32_t one = SHM_BUF_TAKEN;

	if (idx >= m->buf_count || !atomic_compare_exchange_strong_explicit(
	                               &m->meta[idx].state, &one, SHM_BUF_FREE,
	                               memory_order_relaxed, memory_order_relaxed))
		return -FI_EINVAL;
	old = atomic_load_explicit(head, memory_order_relaxed);
	do {
		atomic_store_explicit(&m->meta[idx].next, BUF_IDX(old),
		                      memory_order_relaxed);
		new = BUF_NEXT(old, idx);
	} while (!atomic_compare_exchange_weak_explicit(
	    head, &old, new, memory_order_seq_cst, memory_order_relaxed));
	return 0;
}

int shm_buf_alloc(struct shm_peer *p)
{
	return shm_buf_take(&p->map);
}

int shm_buf_put(struct shm_peer *p, uint32_t idx)
{
	return shm_buf_give(&p->map, idx);
}

void *shm_buf_peer_ptr(struct shm_peer *p, uint32_t idx)
{
	if (idx >= p->map.buf_count)
		return NULL;
	return p->map.bufs + (size_t)idx * p->map.buf_size;
}

const void *shm_buf_ptr(struct shm_region *r, uint32_t idx)
{
	if (idx >= r->map.buf_count)
		return NULL;
	return r->map.bufs + (size_t)idx * r->map.buf_size;
}

int shm_buf_free(struct shm_region *r, uint32_t idx)
{
	int ret = shm_buf_give(&r->map, idx);

	if (!ret)
		shm_room_offer(r);
	return ret;
}

size_t shm_buf_size(const struct shm_map *m)
{
	return m->buf_size;
}
