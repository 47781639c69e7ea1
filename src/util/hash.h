/* hash.h - the one hash map: intrusive, chained, keyed by uint64_t, growing
 * as it fills.  Several nodes may share a key (callers that hash longer
 * keys, such as addresses, walk the duplicates and compare).  Not
 * thread-safe: callers hold their object's lock. */
#ifndef LOOM_UTIL_HASH_H
#define LOOM_UTIL_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct lm_hnode {
	struct lm_hnode *next;
	uint64_t key;
};

struct lm_hmap {
	struct lm_hnode **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
};

/* Room for at least `expected` nodes before the map grows: 0, or
 * -FI_ENOMEM. */
int lm_hmap_init(struct lm_hmap *m, size_t expected);
void lm_hmap_fini(struct lm_hmap *m);
/* Never fails for lack of memory: a map that cannot grow keeps working
 * with longer chains. */
void lm_hmap_insert(struct lm_hmap *m, struct lm_hnode *n, uint64_t key);
void lm_hmap_remove(struct lm_hmap *m, struct lm_hnode *n);
struct lm_hnode *lm_hmap_find(const struct lm_hmap *m, uint64_t key);
/* The next node after n with the same key, or NULL. */
struct lm_hnode *lm_hmap_find_next(const struct lm_hnode *n);

/* 64-bit hash of a byte string, for this process's maps (not stable
 * across builds: lm_fnv1a is). */
uint64_t lm_hash_bytes(const void *data, size_t len);

/* Whether len bytes at a and b are the same: an address of two words (an
 * IPv4 socket address) compares as two words, inline, for the per-packet
 * lookups of a last sender; any other length byte by byte. */
static inline bool lm_bytes_same(const void *a, const void *b, size_t len)
{
	uint64_t x[2], y[2];

	if (len != sizeof(x))
		return !memcmp(a, b, len);
	memcpy(x, a, sizeof(x));
	memcpy(y, b, sizeof(y));
	return !((x[0] ^ y[0]) | (x[1] ^ y[1]));
}

/* 64-bit FNV-1a, whose parameters are its definition: h (LM_FNV1A_BASIS
 * to begin) carried on over len bytes of data.  Stable across builds and
 * hosts, for hashes that name things other processes look up. */
#define LM_FNV1A_BASIS 0xcbf29ce484222325ULL
#define LM_FNV1A_PRIME 0x100000001b3ULL
static inline uint64_t lm_fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * LM_FNV1A_PRIME;
	return h;
}

#endif
