/* ring.h - the one bounded ring of fixed-size elements (a power-of-two
 * number of slots, indices that only grow).  Not thread-safe: callers
 * hold their object's lock.  Shared-memory rings between processes have
 * their own lock-free layout in the shm provider.
 *
 *   slots: [ . . t x x x h . ]   t = tail (next pop), h = head (next push)
 */
#ifndef LOOM_UTIL_RING_H
#define LOOM_UTIL_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct lm_ring {
	char *slots;
	size_t elem_size;
	uint64_t mask; /* slot count - 1 */
	uint64_t head; /* total pushed */
	uint64_t tail; /* total popped */
};

/* Room for at least count elements (rounded up to a power of two). */
static inline int lm_ring_init(struct lm_ring *r, size_t count, size_t elem_size)
{
	uint64_t n = 1;

	if (count > (1ULL << 31) || !elem_size)
		return -1;
	while (n < count)
		n <<= 1;
	r->slots = calloc(n, elem_size);
	if (!r->slots)
		return -1;
	r->elem_size = elem_size;
	r->mask = n - 1;
	r->head = r->tail = 0;
	return 0;
}

static inline void lm_ring_fini(struct lm_ring *r)
{
	free(r->slots);
	r->slots = NULL;
}

static inline size_t lm_ring_capacity(const struct lm_ring *r)
{
	return (size_t)r->mask + 1;
}

static inline size_t lm_ring_count(const struct lm_ring *r)
{
	return (size_t)(r->head - r->tail);
}

static inline bool lm_ring_empty(const struct lm_ring *r)
{
	return r->head == r->tail;
}

static inline bool lm_ring_full(const struct lm_ring *r)
{
	return lm_ring_count(r) > r->mask;
}

/* The slot the next push fills, or NULL when full; lm_ring_commit
 * publishes it.  Lets callers build an element in place. */
static inline void *lm_ring_reserve(struct lm_ring *r)
{
	if (lm_ring_full(r))
		return NULL;
	return r->slots + (r->head & r->mask) * r->elem_size;
}

static inline void lm_ring_commit(struct lm_ring *r)
{
	r->head++;
}

static inline bool lm_ring_push(struct lm_ring *r, const void *elem)
{
	void *slot = lm_ring_reserve(r);

	if (!slot)
		return false;
	memcpy(slot, elem, r->elem_size);
	lm_ring_commit(r);
	return true;
}

/* The oldest element, or NULL when empty; lm_ring_drop releases it. */
static inline void *lm_ring_peek(const struct lm_ring *r)
{
	if (lm_ring_empty(r))
		return NULL;
	return r->slots + (r->tail & r->mask) * r->elem_size;
}

static inline void lm_ring_drop(struct lm_ring *r)
{
	r->tail++;
}

static inline bool lm_ring_pop(struct lm_ring *r, void *elem)
{
	void *slot = lm_ring_peek(r);

	if (!slot)
		return false;
	memcpy(elem, slot, r->elem_size);
	lm_ring_drop(r);
	return true;
}

#endif
