/* av.h - address vectors (man fi_av): a table of provider addresses indexed
 * by fi_addr_t, with constant-time lookups for the data path and a hash for
 * address -> fi_addr_t. */
#ifndef LOOM_UTIL_AV_H
#define LOOM_UTIL_AV_H

/* Included from util.h, which declares lm_domain, lm_eq, lm_lock and the
 * containers used here. */

struct lm_av;

/* How a provider's addresses look; the provider sets one of these in
 * lm_domain.av_addr_ops.  Applications give binary addresses of addrlen
 * bytes, or, on an FI_ADDR_STR domain, strings that from_str parses. */
struct lm_av_addr_ops {
	size_t addrlen; /* every address is this many bytes */
	/* A node (FI_ADDR_STR text, or host with service) to address bytes;
	 * -FI_EINVAL when it cannot be parsed. */
	int (*from_str)(const char *node, const char *service, void *addr);
	/* For fi_av_straddr: write at most *len bytes (NUL-terminated when
	 * anything is written) and set *len to the full length with NUL. */
	int (*to_str)(const void *addr, char *buf, size_t *len);
	/* The longest FI_ADDR_STR text, NUL included; 0: FI_NAME_MAX.
	 * fi_av_insert takes FI_ADDR_STR addresses as libfabric's providers
	 * and fabtests pass them: count NUL-terminated strings packed one
	 * after another (not the array of char * man fi_av names, whose
	 * bytes would be read as pointers).  A string not terminated within
	 * this many bytes fails, and with it every entry after it. */
	size_t str_max;
	/* Optional: 0 when the addrlen bytes at addr (given binary or parsed
	 * from text) can name a peer, else a negative FI_E* code, which fails
	 * the insertion of that one address (man fi_av: the AV reports it per
	 * entry, in fi_addr, FI_SYNC_ERR or an error event). */
	int (*check)(const void *addr);
	/* Optional: attach the provider's peer object (returned by
	 * lm_av_peer); a negative return fails that one insertion. */
	int (*on_insert)(struct lm_av *av, fi_addr_t fi_addr, const void *addr,
	                 void **peer);
	/* Optional: the entry is going away (fi_av_remove or close). */
	void (*on_remove)(struct lm_av *av, fi_addr_t fi_addr, void *peer);
};

struct lm_av_entry;
struct lm_av_shm; /* a named AV's shared segment (av_shm.c) */

/* The fi_addr_t -> entry table.  It is replaced, never resized in place,
 * so data-path readers need no lock; replaced tables are kept until the
 * AV closes. */
struct lm_av_table {
	size_t cap;
	struct lm_av_table *retired; /* the table this one replaced */
	struct lm_av_entry *_Atomic slot[];
};

struct lm_av {
	struct fid_av av_fid;
	struct lm_domain *domain;
	const struct lm_av_addr_ops *ops;
	enum fi_av_type type;
	uint64_t flags;    /* fi_av_attr.flags (FI_EVENT, FI_SYMMETRIC) */
	bool str_format;   /* the domain's addr_format is FI_ADDR_STR */
	uint64_t idx_mask; /* fi_addr_t bits left of the rx context bits */
	struct lm_av_table *_Atomic table;
	size_t next_idx;  /* one past the highest index ever used */
	size_t *free_idx; /* min-heap of removed indices below next_idx */
	size_t free_cnt, free_cap;
	size_t used;            /* live entries */
	_Atomic uint64_t removals; /* addresses removed: what fi_addrs cached of it must ask */
	struct lm_hmap by_addr; /* lm_hash_bytes(address) -> entry */
	struct lm_bufpool pool; /* entries */
	void *scratch;          /* one address, parsed from text */
	struct lm_lock lock;
	atomic_int ref; /* endpoints bound */
	struct lm_eq *eq;
	/* A named AV (attr->name): the shared segment its entries follow,
	 * and the segment's generation they were last brought up to. */
	struct lm_av_shm *shm;
	uint64_t shm_gen;
};

/* fi_av_open; needs the domain's av_addr_ops (-FI_ENOSYS without). */
int lm_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
               void *context);

/* Data-path lookups, constant time and lock-free (rx context bits of a
 * scalable endpoint's fi_addr are ignored).  NULL / FI_ADDR_NOTAVAIL when
 * the fi_addr does not name a live entry. */
const void *lm_av_addr(struct lm_av *av, fi_addr_t fi_addr);
void *lm_av_peer(struct lm_av *av, fi_addr_t fi_addr);
/* The user id given with FI_AV_USER_ID, else fi_addr itself. */
fi_addr_t lm_av_user_id(struct lm_av *av, fi_addr_t fi_addr);
/* Address bytes -> fi_addr (for FI_SOURCE); takes the AV lock when the
 * threading model shares it.  FI_ADDR_NOTAVAIL when unknown. */
fi_addr_t lm_av_reverse(struct lm_av *av, const void *addr);

/* av_shm.c: a named AV's segment, opened (made if absent and not FI_READ)
 * for addresses of addrlen bytes; the entries of every process that opened
 * it, by fi_addr index.  attr->map_addr: where its fi_addr_t array is to
 * be mapped (0: anywhere).  Changes (put, drop) and reading the slots
 * whole are under its lock, which a holder that died gives up. */
int lm_av_shm_open(const struct fi_av_attr *attr, size_t addrlen, enum fi_av_type type,
                   struct lm_av_shm **out);
void lm_av_shm_close(struct lm_av_shm *s);
void lm_av_shm_lock(struct lm_av_shm *s);
void lm_av_shm_unlock(struct lm_av_shm *s);
fi_addr_t *lm_av_shm_map(struct lm_av_shm *s);
bool lm_av_shm_rdonly(const struct lm_av_shm *s);
uint64_t lm_av_shm_gen(struct lm_av_shm *s);
size_t lm_av_shm_next(struct lm_av_shm *s);
/* The address at idx, NULL when that slot is free. */
const void *lm_av_shm_slot(struct lm_av_shm *s, size_t idx);
/* addr's slot (one more use if present), or -FI_ENOSPC when full. */
int lm_av_shm_put(struct lm_av_shm *s, const void *addr, size_t *idx);
/* One use of idx less; freed at the last.  -FI_EINVAL for a free one. */
int lm_av_shm_drop(struct lm_av_shm *s, size_t idx);

#endif
