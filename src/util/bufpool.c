/* bufpool.c - the buffer pool of bufpool.h.  A chunk is a header followed
 * by chunk_count aligned elements; a free element's first word links the
 * free list. */
#include <stdint.h>
#include <stdlib.h>

#include "bufpool.h"

struct chunk {
	struct chunk *next;
};

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int lm_bufpool_init(struct lm_bufpool *p, size_t elem_size, size_t align,
		    size_t chunk_count, size_t max_count)
{
	if (!align)
		align = sizeof(void *);
	if (align & (align - 1) || !elem_size)
		return -1;
	if (align < sizeof(void *))
		align = sizeof(void *);
	p->align = align;
	p->elem_size = round_up(elem_size < sizeof(void *) ? sizeof(void *) : elem_size,
				align);
	p->chunk_count = chunk_count ? chunk_count : LM_BUFPOOL_CHUNK;
	p->max_count = max_count;
	p->total = p->in_use = 0;
	p->free_list = NULL;
	p->chunks = NULL;
	return 0;
}

void lm_bufpool_fini(struct lm_bufpool *p)
{
	struct chunk *c = p->chunks, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	p->chunks = p->free_list = NULL;
	p->total = p->in_use = 0;
}

int lm_bufpool_grow(struct lm_bufpool *p)
{
	size_t n = p->chunk_count, hdr = round_up(sizeof(struct chunk), p->align);
	struct chunk *c;
	char *base;

	if (p->max_count) {
		if (p->total >= p->max_count)
			return -1;
		if (n > p->max_count - p->total)
			n = p->max_count - p->total;
	}
	if (posix_memalign((void **)&c, p->align, hdr + n * p->elem_size))
		return -1;
	c->next = p->chunks;
	p->chunks = c;
	base = (char *)c + hdr;
	for (size_t i = n; i-- > 0;) {
		void *e = base + i * p->elem_size;

		*(void **)e = p->free_list;
		p->free_list = e;
	}
	p->total += n;
	return 0;
}
