/* bufpool.h - the one buffer pool: fixed-size elements carved from chunks
 * allocated as the pool grows (up to an optional limit), recycled through
 * a free list, so fast paths never call malloc.  Not thread-safe: callers
 * hold their object's lock. */
#ifndef LOOM_UTIL_BUFPOOL_H
#define LOOM_UTIL_BUFPOOL_H

#include <stddef.h>

struct lm_bufpool {
	size_t elem_size;  /* rounded up to the alignment */
	size_t align;
	size_t chunk_count; /* elements per chunk */
	size_t max_count;   /* 0: unlimited */
	size_t total;	    /* elements carved so far */
	size_t in_use;
	void *free_list;
	void *chunks; /* chain of chunks, for release */
};

/* Elements per chunk by default: one allocation per 64, a few KiB for most elements. */
#define LM_BUFPOOL_CHUNK 64

/* align must be a power of two (0 means sizeof(void *)); chunk_count 0
 * means LM_BUFPOOL_CHUNK. */
int lm_bufpool_init(struct lm_bufpool *p, size_t elem_size, size_t align,
		    size_t chunk_count, size_t max_count);
void lm_bufpool_fini(struct lm_bufpool *p);
/* Carve another chunk onto the free list: 0, or -1 at the limit or when
 * memory is short. */
int lm_bufpool_grow(struct lm_bufpool *p);

/* NULL when the limit is reached or memory is short.  Inline: it is on
 * every message's path, and only growing needs a call. */
static inline void *lm_bufpool_alloc(struct lm_bufpool *p)
{
	void *e;

	if (!p->free_list && lm_bufpool_grow(p))
		return NULL;
	e = p->free_list;
	p->free_list = *(void **)e;
	p->in_use++;
	return e;
}

static inline void lm_bufpool_free(struct lm_bufpool *p, void *elem)
{
	if (!elem)
		return;
	*(void **)elem = p->free_list;
	p->free_list = elem;
	p->in_use--;
}

#endif
