/* hash.c - the intrusive chained hash map of hash.h. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "hash.h"

/* Fewest buckets: 128 bytes, so a small map does not grow on its first inserts. */
#define MIN_BUCKETS 16

/* MurmurHash3's 64-bit finalizer (its constants are its definition): FNV
 * alone leaves the low bits, which pick the bucket, poorly mixed. */
static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

/* Eight bytes a step (FNV-1a's byte a step cost a received packet two
 * hundred instructions over the two address lookups on its way), the
 * tail as one short word; mix spreads the result. */
uint64_t lm_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = LM_FNV1A_BASIS ^ len, w;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	if (len) {
		w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	}
	return mix(h);
}

int lm_hmap_init(struct lm_hmap *m, size_t expected)
{
	size_t n = MIN_BUCKETS;

	while (n < expected)
		n <<= 1;
	m->buckets = calloc(n, sizeof(*m->buckets));
	if (!m->buckets)
		return -FI_ENOMEM;
	m->nbuckets = n;
	m->count = 0;
	return 0;
}

void lm_hmap_fini(struct lm_hmap *m)
{
	free(m->buckets);
	m->buckets = NULL;
	m->nbuckets = m->count = 0;
}

static size_t slot(const struct lm_hmap *m, uint64_t key)
{
	return (size_t)(mix(key) & (m->nbuckets - 1));
}

static void grow(struct lm_hmap *m)
{
	size_t n = m->nbuckets * 2;
	struct lm_hnode **b = calloc(n, sizeof(*b));
	struct lm_hmap bigger = {b, n, m->count};

	if (!b)
		return;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct lm_hnode *node = m->buckets[i], *next;

		for (; node; node = next) {
			size_t s = slot(&bigger, node->key);

			next = node->next;
			node->next = b[s];
			b[s] = node;
		}
	}
	free(m->buckets);
	*m = bigger;
}

void lm_hmap_insert(struct lm_hmap *m, struct lm_hnode *n, uint64_t key)
{
	size_t s;

	if (m->count >= m->nbuckets)
		grow(m);
	s = slot(m, key);
	n->key = key;
	n->next = m->buckets[s];
	m->buckets[s] = n;
	m->count++;
}

void lm_hmap_remove(struct lm_hmap *m, struct lm_hnode *n)
{
	struct lm_hnode **pp = &m->buckets[slot(m, n->key)];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			n->next = NULL;
			m->count--;
			return;
		}
	}
}

struct lm_hnode *lm_hmap_find(const struct lm_hmap *m, uint64_t key)
{
	struct lm_hnode *n = m->nbuckets ? m->buckets[slot(m, key)] : NULL;

	while (n && n->key != key)
		n = n->next;
	return n;
}

struct lm_hnode *lm_hmap_find_next(const struct lm_hnode *n)
{
	uint64_t key = n->key;

	for (n = n->next; n && n->key != key; n = n->next)
		;
	return (struct lm_hnode *)n;
}
