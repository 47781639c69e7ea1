/* av.c - address vectors: fi_addr_t is an index into a lock-free table of
 * entries; a hash on the address bytes finds duplicates and serves reverse
 * lookups.  FI_AV_TABLE and FI_AV_MAP share the layout (MAP values are
 * indices too, which man fi_av allows since they are opaque). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct lm_av_entry {
	struct lm_hnode hnode; /* in by_addr */
	void *peer;
	fi_addr_t fi_addr;
	fi_addr_t user_id;
	/* Inserting an address already present returns its fi_addr and
	 * counts one more use; fi_av_remove frees it at the last use. */
	size_t use_cnt;
	unsigned char addr[];
};

#define AV_MIN_CAP  16
#define AV_HINT_CAP ((size_t)1 << 20) /* attr->count is only trusted up to this */
/* Most entries per pool chunk: a large count is not allocated at once. */
#define AV_CHUNK_MAX 1024
/* Freed indices the heap first has room for; it doubles from there. */
#define AV_FREE_CAP_MIN 64

static struct lm_av *av_of(struct fid_av *av_fid)
{
	return lm_container_of(av_fid, struct lm_av, av_fid);
}

static struct lm_av_table *table_new(size_t cap)
{
	struct lm_av_table *t;

	t = calloc(1, sizeof(*t) + cap * sizeof(t->slot[0]));
	if (t)
		t->cap = cap;
	return t;
}

/* ---- data-path lookups ------------------------------------------------ */

static struct lm_av_entry *entry_at(struct lm_av *av, fi_addr_t fi_addr)
{
	struct lm_av_table *t = atomic_load_explicit(&av->table, memory_order_acquire);
	uint64_t idx = fi_addr & av->idx_mask;

	if (fi_addr == FI_ADDR_NOTAVAIL || idx >= t->cap)
		return NULL;
	return atomic_load_explicit(&t->slot[idx], memory_order_acquire);
}

static void shm_sync(struct lm_av *av);

/* A named AV another process changed: its entries follow, before a
 * lookup that missed or may be stale. */
static bool shm_behind(struct lm_av *av)
{
	return av->shm && lm_av_shm_gen(av->shm) != av->shm_gen;
}

static void shm_catch_up(struct lm_av *av)
{
	if (shm_behind(av)) {
		lm_lock_acquire(&av->lock);
		shm_sync(av);
		lm_lock_release(&av->lock);
	}
}

const void *lm_av_addr(struct lm_av *av, fi_addr_t fi_addr)
{
	struct lm_av_entry *e;

	if (__builtin_expect(av->shm != NULL, 0))
		shm_catch_up(av);
	e = entry_at(av, fi_addr);
	return e ? e->addr : NULL;
}

void *lm_av_peer(struct lm_av *av, fi_addr_t fi_addr)
{
	struct lm_av_entry *e = entry_at(av, fi_addr);

	return e ? e->peer : NULL;
}

fi_addr_t lm_av_user_id(struct lm_av *av, fi_addr_t fi_addr)
{
	struct lm_av_entry *e = entry_at(av, fi_addr);

	return e ? e->user_id : FI_ADDR_NOTAVAIL;
}

/* Caller holds av->lock. */
static struct lm_av_entry *find_addr(struct lm_av *av, const void *addr, uint64_t key)
{
	struct lm_hnode *n;

	for (n = lm_hmap_find(&av->by_addr, key); n; n = lm_hmap_find_next(n)) {
		struct lm_av_entry *e = lm_container_of(n, struct lm_av_entry, hnode);

		if (!memcmp(e->addr, addr, av->ops->addrlen))
			return e;
	}
	return NULL;
}

fi_addr_t lm_av_reverse(struct lm_av *av, const void *addr)
{
	struct lm_av_entry *e;
	fi_addr_t ret;

	if (!av || !addr)
		return FI_ADDR_NOTAVAIL;
	lm_lock_acquire(&av->lock);
	if (shm_behind(av))
		shm_sync(av);
	e = find_addr(av, addr, lm_hash_bytes(addr, av->ops->addrlen));
	ret = e ? e->fi_addr : FI_ADDR_NOTAVAIL;
	lm_lock_release(&av->lock);
	return ret;
}

/* ---- free indices: a min-heap, since FI_AV_TABLE inserts at the lowest
 * unused index (man fi_av) ----------------------------------------------- */

static void heap_push(struct lm_av *av, size_t idx)
{
	size_t i;

	if (av->free_cnt == av->free_cap) {
		size_t cap = av->free_cap ? av->free_cap * 2 : AV_FREE_CAP_MIN;
		size_t *h = realloc(av->free_idx, cap * sizeof(*h));

		/* Without memory the index is simply never handed out again. */
		if (!h)
			return;
		av->free_idx = h;
		av->free_cap = cap;
	}
	for (i = av->free_cnt++; i && av->free_idx[(i - 1) / 2] > idx; i = (i - 1) / 2)
		av->free_idx[i] = av->free_idx[(i - 1) / 2];
	av->free_idx[i] = idx;
}

static size_t heap_pop(struct lm_av *av)
{
	size_t *h = av->free_idx, top = h[0], last = h[--av->free_cnt], i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= av->free_cnt)
			break;
		if (c + 1 < av->free_cnt && h[c + 1] < h[c])
			c++;
		if (h[c] >= last)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = last;
	return top;
}

/* ---- insertion and removal (caller holds av->lock) --------------------- */

/* Make sure index idx has a slot, publishing a bigger table if needed. */
static int table_reserve(struct lm_av *av, size_t idx)
{
	struct lm_av_table *old = atomic_load_explicit(&av->table, memory_order_relaxed);
	struct lm_av_table *t;
	size_t cap;

	if (idx < old->cap)
		return 0;
	cap = old->cap * 2;
	while (cap <= idx)
		cap *= 2;
	t = table_new(cap);
	if (!t)
		return -FI_ENOMEM;
	for (size_t i = 0; i < old->cap; i++)
		atomic_store_explicit(
		    &t->slot[i],
		    atomic_load_explicit(&old->slot[i], memory_order_relaxed),
		    memory_order_relaxed);
	/* Readers may still hold the old table: it stays until close. */
	t->retired = old;
	atomic_store_explicit(&av->table, t, memory_order_release);
	return 0;
}

/* A named AV's entry idx, as its segment has it (under av->lock). */
static int insert_at(struct lm_av *av, size_t idx, const void *addr)
{
	struct lm_av_entry *e;
	struct lm_av_table *t;
	int ret = table_reserve(av, idx);

	if (ret)
		return ret;
	e = lm_bufpool_alloc(&av->pool);
	if (!e)
		return -FI_ENOMEM;
	memcpy(e->addr, addr, av->ops->addrlen);
	e->fi_addr = idx;
	e->user_id = idx;
	e->use_cnt = 1;
	e->peer = NULL;
	if (av->ops->on_insert && (ret = av->ops->on_insert(av, idx, e->addr, &e->peer))) {
		lm_bufpool_free(&av->pool, e);
		return ret;
	}
	lm_hmap_insert(&av->by_addr, &e->hnode, lm_hash_bytes(addr, av->ops->addrlen));
	t = atomic_load_explicit(&av->table, memory_order_relaxed);
	atomic_store_explicit(&t->slot[idx], e, memory_order_release);
	av->used++;
	av->next_idx = LM_MAX(av->next_idx, idx + 1);
	return 0;
}

static void remove_entry(struct lm_av *av, struct lm_av_entry *e);

/* Under av->lock and the segment's: this process's entries become the
 * segment's (what others inserted appears, what they removed goes). */
static void shm_sync_locked(struct lm_av *av)
{
	struct lm_av_table *t;
	size_t n;

	av->shm_gen = lm_av_shm_gen(av->shm);
	n = LM_MAX(lm_av_shm_next(av->shm), av->next_idx);
	for (size_t i = 0; i < n; i++) {
		const void *a = lm_av_shm_slot(av->shm, i);
		struct lm_av_entry *e;

		t = atomic_load_explicit(&av->table, memory_order_relaxed);
		e = i < t->cap ? atomic_load_explicit(&t->slot[i], memory_order_relaxed)
		               : NULL;
		if (e && a && !memcmp(e->addr, a, av->ops->addrlen))
			continue;
		if (e)
			remove_entry(av, e);
		if (a && insert_at(av, i, a))
			LM_WARN(av->domain->fabric->prov, FI_LOG_AV,
			        "shared AV entry %zu not taken here\n", i);
	}
}

static void shm_sync(struct lm_av *av)
{
	lm_av_shm_lock(av->shm);
	shm_sync_locked(av);
	lm_av_shm_unlock(av->shm);
}

/* A named AV's insert: into the segment, then here as the segment has
 * it; the fi_addr is the same in every process. */
static int shm_insert(struct lm_av *av, const void *addr, const fi_addr_t *user_id,
                      fi_addr_t *out)
{
	struct lm_av_entry *e;
	size_t idx;
	int ret;

	lm_av_shm_lock(av->shm);
	ret = lm_av_shm_put(av->shm, addr, &idx);
	if (!ret)
		shm_sync_locked(av);
	lm_av_shm_unlock(av->shm);
	if (ret)
		return ret;
	e = entry_at(av, idx);
	if (!e)
		return -FI_ENOMEM;
	if (user_id)
		e->user_id = *user_id;
	*out = idx;
	return 0;
}

static int insert_one(struct lm_av *av, const void *addr, const fi_addr_t *user_id,
                      fi_addr_t *out)
{
	uint64_t key = lm_hash_bytes(addr, av->ops->addrlen);
	struct lm_av_entry *e = find_addr(av, addr, key);
	struct lm_av_table *t;
	size_t idx;
	int ret;

	if (av->shm)
		return shm_insert(av, addr, user_id, out);
	if (e) {
		e->use_cnt++;
		*out = e->fi_addr;
		return 0;
	}
	if (av->free_cnt) {
		idx = heap_pop(av);
	} else {
		idx = av->next_idx;
		ret = table_reserve(av, idx);
		if (ret)
			return ret;
		av->next_idx++;
	}
	e = lm_bufpool_alloc(&av->pool);
	if (!e) {
		ret = -FI_ENOMEM;
		goto err_idx;
	}
	memcpy(e->addr, addr, av->ops->addrlen);
	e->fi_addr = idx;
	e->user_id = user_id ? *user_id : idx;
	e->use_cnt = 1;
	e->peer = NULL;
	if (av->ops->on_insert) {
		ret = av->ops->on_insert(av, idx, e->addr, &e->peer);
		if (ret)
			goto err_entry;
	}
	lm_hmap_insert(&av->by_addr, &e->hnode, key);
	t = atomic_load_explicit(&av->table, memory_order_relaxed);
	atomic_store_explicit(&t->slot[idx], e, memory_order_release);
	av->used++;
	*out = idx;
	return 0;

err_entry:
	lm_bufpool_free(&av->pool, e);
err_idx:
	heap_push(av, idx);
	return ret;
}

static void remove_entry(struct lm_av *av, struct lm_av_entry *e)
{
	struct lm_av_table *t = atomic_load_explicit(&av->table, memory_order_relaxed);

	atomic_store_explicit(&t->slot[e->fi_addr], NULL, memory_order_release);
	atomic_fetch_add_explicit(&av->removals, 1, memory_order_release);
	lm_hmap_remove(&av->by_addr, &e->hnode);
	if (av->ops->on_remove)
		av->ops->on_remove(av, e->fi_addr, e->peer);
	av->used--;
	if (!av->shm) /* a named AV's indices are its segment's */
		heap_push(av, e->fi_addr);
	lm_bufpool_free(&av->pool, e);
}

/* Where the i-th address of an insert call comes from: parsed into
 * av's scratch buffer, or pointed at in the caller's array. */
typedef int (*addr_source)(struct lm_av *av, const void *arg, size_t i,
                           const void **addr);

struct sym_expand {
	const char *node_prefix; /* hostname without its numeric suffix */
	unsigned long long node_base;
	int node_width;
	int node_family; /* AF_INET/AF_INET6 for IP nodes, 0 for names */
	unsigned char node_ip[16];
	const char *node; /* as given, for nodecnt == 1 */
	const char *service;
	unsigned long long svc_base;
	size_t nodecnt, svccnt;
	char *buf; /* the node being inserted */
	size_t buf_len;
};

static int src_binary(struct lm_av *av, const void *arg, size_t i, const void **addr)
{
	*addr = (const char *)arg + i * av->ops->addrlen;
	return 0;
}

/* fi_av_insert's FI_ADDR_STR buffer: strings packed one after another
 * (lm_av_addr_ops.str_max), read in order by insert_batch. */
struct packed_strs {
	const char *next; /* NULL once one was not terminated in time */
};

static int src_packed(struct lm_av *av, const void *arg, size_t i, const void **addr)
{
	struct packed_strs *ps = (struct packed_strs *)arg;
	size_t max = LM_MAX(av->ops->str_max, (size_t)FI_NAME_MAX);
	const char *s = ps->next;
	size_t n;

	(void)i;
	if (!s)
		return -FI_EINVAL;
	n = strnlen(s, max);
	if (n == max) { /* where the next one starts is unknown */
		ps->next = NULL;
		return -FI_EINVAL;
	}
	ps->next = s + n + 1;
	*addr = av->scratch;
	return av->ops->from_str(s, NULL, av->scratch);
}

static int src_svc(struct lm_av *av, const void *arg, size_t i, const void **addr)
{
	const char *const *ns = arg;
	int ret;

	(void)i;
	ret = av->ops->from_str(ns[0], ns[1], av->scratch);
	*addr = av->scratch;
	return ret;
}

static int src_sym(struct lm_av *av, const void *arg, size_t i, const void **addr)
{
	const struct sym_expand *x = arg;
	size_t n = i / x->svccnt, s = i % x->svccnt;
	char svc[24];
	const char *node = x->node, *service = x->service;
	int ret;

	if (x->nodecnt > 1) {
		if (x->node_family) {
			unsigned char ip[16];
			int len = x->node_family == AF_INET ? 4 : 16;
			size_t carry = n;

			/* Big-endian add of n to the starting address. */
			memcpy(ip, x->node_ip, sizeof(ip));
			for (int b = len - 1; b >= 0 && carry; b--) {
				carry += ip[b];
				ip[b] = (unsigned char)carry;
				carry >>= 8;
			}
			if (carry ||
			    !inet_ntop(x->node_family, ip, x->buf, (socklen_t)x->buf_len))
				return -FI_EINVAL;
		} else {
			snprintf(x->buf, x->buf_len, "%s%0*llu", x->node_prefix,
			         x->node_width, x->node_base + n);
		}
		node = x->buf;
	}
	if (x->svccnt > 1) {
		snprintf(svc, sizeof(svc), "%llu", x->svc_base + s);
		service = svc;
	}
	ret = av->ops->from_str(node, service, av->scratch);
	*addr = av->scratch;
	return ret;
}

static int insert_batch(struct lm_av *av, size_t count, addr_source src, const void *arg,
                        fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	bool async = av->flags & FI_EVENT;
	bool user_ids = flags & FI_AV_USER_ID;
	int *sync_err = flags & FI_SYNC_ERR ? context : NULL;
	size_t ok = 0;
	int ret = 0;

	if (flags & ~(FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID))
		return -FI_EBADFLAGS;
	if (async && !av->eq)
		return -FI_ENOEQ;
	/* FI_SYNC_ERR is for synchronous AVs only, and its context is the
	 * status array; user ids come in through fi_addr. */
	if ((flags & FI_SYNC_ERR) && (async || (count && !context)))
		return -FI_EINVAL;
	if (user_ids && count && !fi_addr)
		return -FI_EINVAL;
	if (av->shm && lm_av_shm_rdonly(av->shm))
		return -FI_EPERM; /* opened FI_READ */

	lm_lock_acquire(&av->lock);
	for (size_t i = 0; i < count; i++) {
		const void *addr = NULL;
		fi_addr_t out = FI_ADDR_NOTAVAIL;
		int r = src(av, arg, i, &addr);

		if (!r && av->ops->check)
			r = av->ops->check(addr);
		if (!r)
			r = insert_one(av, addr, user_ids ? &fi_addr[i] : NULL, &out);
		if (fi_addr)
			fi_addr[i] = r ? FI_ADDR_NOTAVAIL : out;
		if (sync_err)
			sync_err[i] = -r;
		if (!r) {
			ok++;
			continue;
		}
		LM_DEBUG(av->domain->fabric->prov, FI_LOG_AV,
		         "address %zu not inserted: %d\n", i, r);
		if (async) {
			struct fi_eq_err_entry err = {
			    .fid = &av->av_fid.fid,
			    .context = context,
			    .data = i,
			    .err = -r,
			};

			lm_eq_write_err(av->eq, &err);
		}
	}
	lm_lock_release(&av->lock);

	if (async) {
		struct fi_eq_entry done = {
		    .fid = &av->av_fid.fid,
		    .context = context,
		    .data = ok,
		};
		ssize_t w = lm_eq_write(av->eq, FI_AV_COMPLETE, &done, sizeof(done), 0);

		ret = w < 0 ? (int)w : 0;
	} else {
		ret = (int)ok;
	}
	return ret;
}

/* ---- fi_ops_av ---------------------------------------------------------- */

static int av_insert(struct fid_av *av_fid, const void *addr, size_t count,
                     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct lm_av *av = av_of(av_fid);
	struct packed_strs ps = {addr};

	if (count && !addr)
		return -FI_EINVAL;
	if (av->str_format)
		return insert_batch(av, count, src_packed, &ps, fi_addr, flags, context);
	return insert_batch(av, count, src_binary, addr, fi_addr, flags, context);
}

static int av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
                        fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	const char *ns[2] = {node, service};

	if (!node)
		return -FI_EINVAL;
	return insert_batch(av_of(av_fid), 1, src_svc, ns, fi_addr, flags, context);
}

/* Split node into what fi_av_insertsym counts up from: an IPv4/IPv6
 * address, or a name ending in decimal digits. */
static int sym_parse_node(struct sym_expand *x, const char *node)
{
	size_t len = strlen(node), d = len;

	x->node = node;
	if (x->nodecnt <= 1)
		return 0;
	if (inet_pton(AF_INET, node, x->node_ip) == 1) {
		x->node_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, node, x->node_ip) == 1) {
		x->node_family = AF_INET6;
		return 0;
	}
	while (d && isdigit((unsigned char)node[d - 1]))
		d--;
	if (d == len || len - d > 18)
		return -FI_EINVAL;
	x->node_base = strtoull(node + d, NULL, 10);
	x->node_width = (int)(len - d);
	x->node_prefix = strndup(node, d);
	return x->node_prefix ? 0 : -FI_ENOMEM;
}

static int av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
                        const char *service, size_t svccnt, fi_addr_t *fi_addr,
                        uint64_t flags, void *context)
{
	struct sym_expand x = {.nodecnt = nodecnt, .svccnt = svccnt, .service = service};
	int ret;

	if (!node || !service)
		return -FI_EINVAL;
	if (nodecnt && svccnt > SIZE_MAX / nodecnt)
		return -FI_EINVAL;
	if (svccnt > 1) {
		char *end;

		if (!isdigit((unsigned char)service[0]))
			return -FI_EINVAL;
		x.svc_base = strtoull(service, &end, 10);
		if (*end)
			return -FI_EINVAL;
	}
	ret = sym_parse_node(&x, node);
	if (ret)
		return ret;
	x.buf_len = strlen(node) + 48; /* room for a longer suffix or an IPv6 text */
	x.buf = malloc(x.buf_len);
	if (!x.buf) {
		ret = -FI_ENOMEM;
		goto out;
	}
	ret = insert_batch(av_of(av_fid), nodecnt * svccnt, src_sym, &x, fi_addr, flags,
	                   context);
out:
	free(x.buf);
	free((char *)x.node_prefix);
	return ret;
}

/* A named AV's removal (under av->lock): from the segment, all or
 * nothing, then here. */
static int shm_remove(struct lm_av *av, const fi_addr_t *fi_addr, size_t count)
{
	int ret = 0;

	lm_av_shm_lock(av->shm);
	shm_sync_locked(av);
	for (size_t i = 0; i < count && !ret; i++)
		if (!lm_av_shm_slot(av->shm, fi_addr[i] & av->idx_mask) ||
		    fi_addr[i] == FI_ADDR_NOTAVAIL)
			ret = -FI_EINVAL;
	for (size_t i = 0; i < count && !ret; i++)
		lm_av_shm_drop(av->shm, fi_addr[i] & av->idx_mask);
	shm_sync_locked(av);
	lm_av_shm_unlock(av->shm);
	return ret;
}

static int av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
                     uint64_t flags)
{
	struct lm_av *av = av_of(av_fid);
	int ret = 0;

	if (count && !fi_addr)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (av->shm && lm_av_shm_rdonly(av->shm))
		return -FI_EPERM;
	lm_lock_acquire(&av->lock);
	if (av->shm) {
		ret = shm_remove(av, fi_addr, count);
		goto out;
	}
	/* All or nothing: an unknown fi_addr removes none. */
	for (size_t i = 0; i < count; i++) {
		if (!entry_at(av, fi_addr[i])) {
			ret = -FI_EINVAL;
			goto out;
		}
	}
	for (size_t i = 0; i < count; i++) {
		struct lm_av_entry *e = entry_at(av, fi_addr[i]);

		/* Already gone when the same fi_addr is listed twice. */
		if (e && !--e->use_cnt)
			remove_entry(av, e);
	}
out:
	lm_lock_release(&av->lock);
	return ret;
}

static int av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
                     size_t *addrlen)
{
	struct lm_av *av = av_of(av_fid);
	struct lm_av_entry *e;
	int ret = 0;

	if (!addrlen || (*addrlen && !addr))
		return -FI_EINVAL;
	lm_lock_acquire(&av->lock);
	if (shm_behind(av))
		shm_sync(av);
	e = entry_at(av, fi_addr);
	if (!e) {
		ret = -FI_EINVAL;
	} else if (av->str_format) {
		/* Stored as FI_ADDR_STR: hand back the text. */
		ret = av->ops->to_str(e->addr, addr, addrlen);
	} else {
		/* Truncated to the buffer; *addrlen says what was needed. */
		if (*addrlen)
			memcpy(addr, e->addr, LM_MIN(*addrlen, av->ops->addrlen));
		*addrlen = av->ops->addrlen;
	}
	lm_lock_release(&av->lock);
	return ret;
}

static const char *av_straddr(struct fid_av *av_fid, const void *addr, char *buf,
                              size_t *len)
{
	struct lm_av *av = av_of(av_fid);

	if (!addr || !len || (*len && !buf))
		return NULL;
	if (av->str_format) {
		/* The address is already text. */
		size_t need = strlen(addr) + 1;

		if (*len) {
			size_t n = LM_MIN(need, *len);

			memcpy(buf, addr, n - 1);
			buf[n - 1] = '\0';
		}
		*len = need;
		return buf;
	}
	return av->ops->to_str(addr, buf, len) ? NULL : buf;
}

static int av_set_open(struct fid_av *av, struct fi_av_set_attr *attr,
                       struct fid_av_set **av_set, void *context)
{
	(void)av, (void)attr, (void)av_set, (void)context;
	return -FI_ENOSYS;
}

static int av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_av *av = lm_container_of(fid, struct lm_av, av_fid.fid);
	struct lm_eq *eq;

	if (flags)
		return -FI_EBADFLAGS;
	if (!bfid || bfid->fclass != FI_CLASS_EQ || av->eq)
		return -FI_EINVAL;
	eq = lm_container_of(bfid, struct lm_eq, eq_fid.fid);
	atomic_fetch_add(&eq->ref, 1);
	av->eq = eq;
	return 0;
}

static int av_close(struct fid *fid)
{
	struct lm_av *av = lm_container_of(fid, struct lm_av, av_fid.fid);
	struct lm_av_table *t = atomic_load(&av->table), *next;

	if (atomic_load(&av->ref))
		return -FI_EBUSY;
	if (av->ops->on_remove) {
		for (size_t i = 0; i < av->next_idx; i++) {
			struct lm_av_entry *e = atomic_load(&t->slot[i]);

			if (e)
				av->ops->on_remove(av, e->fi_addr, e->peer);
		}
	}
	for (; t; t = next) {
		next = t->retired;
		free(t);
	}
	if (av->shm)
		lm_av_shm_close(av->shm);
	lm_bufpool_fini(&av->pool);
	lm_hmap_fini(&av->by_addr);
	free(av->free_idx);
	free(av->scratch);
	if (av->eq)
		atomic_fetch_sub(&av->eq->ref, 1);
	lm_lock_fini(&av->lock);
	atomic_fetch_sub(&av->domain->ref, 1);
	free(av);
	return 0;
}

static const struct fi_ops av_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = av_close,
    .bind = av_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

/* The 2.x slots: authorization keys and user ids, which no provider of
 * loom's offers (FI_AUTH_KEY, FI_AV_USER_ID are not advertised). */
static int av_no_insert_auth_key(struct fid_av *av, const void *auth_key, size_t size,
                                 fi_addr_t *fi_addr, uint64_t flags)
{
	(void)av, (void)auth_key, (void)size, (void)fi_addr, (void)flags;
	return -FI_ENOSYS;
}

static int av_no_lookup_auth_key(struct fid_av *av, fi_addr_t fi_addr, void *auth_key,
                                 size_t *size)
{
	(void)av, (void)fi_addr, (void)auth_key, (void)size;
	return -FI_ENOSYS;
}

static int av_no_set_user_id(struct fid_av *av, fi_addr_t fi_addr, fi_addr_t user_id,
                             uint64_t flags)
{
	(void)av, (void)fi_addr, (void)user_id, (void)flags;
	return -FI_ENOSYS;
}

static const struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = av_set_open,
    .insert_auth_key = av_no_insert_auth_key,
    .lookup_auth_key = av_no_lookup_auth_key,
    .set_user_id = av_no_set_user_id,
};

int lm_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av_out,
               void *context)
{
	const struct lm_av_addr_ops *ops;
	struct lm_domain *dom;
	enum fi_av_type type;
	struct lm_av *av;
	size_t cap;
	int ret;

	if (!domain || !attr || !av_out)
		return -FI_EINVAL;
	dom = lm_container_of(domain, struct lm_domain, domain_fid);
	ops = dom->av_addr_ops;
	if (!ops)
		return -FI_ENOSYS;
	if (!ops->addrlen || !ops->from_str || !ops->to_str)
		return -FI_EINVAL;
	if (attr->flags & ~(FI_EVENT | FI_SYMMETRIC | FI_READ))
		return -FI_EBADFLAGS;
	/* Read-only is for opening a named AV (man fi_av). */
	if ((attr->flags & FI_READ) && !attr->name)
		return -FI_EINVAL;
	if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits >= 64)
		return -FI_EINVAL;
	type = attr->type;
	if (type == FI_AV_UNSPEC)
		type = dom->info && dom->info->domain_attr &&
		               dom->info->domain_attr->av_type != FI_AV_UNSPEC
		           ? dom->info->domain_attr->av_type
		           : FI_AV_TABLE;
	if (type != FI_AV_TABLE && type != FI_AV_MAP)
		return -FI_EINVAL;

	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->domain = dom;
	av->ops = ops;
	av->type = type;
	av->flags = attr->flags;
	av->str_format = dom->info && dom->info->addr_format == FI_ADDR_STR;
	av->idx_mask = attr->rx_ctx_bits ? UINT64_MAX >> attr->rx_ctx_bits : UINT64_MAX;
	/* attr->count is a hint: start there, grow past it. */
	cap = LM_MAX(LM_MIN(attr->count, AV_HINT_CAP), (size_t)AV_MIN_CAP);
	ret = -FI_ENOMEM;
	av->scratch = malloc(ops->addrlen);
	if (!av->scratch)
		goto err;
	av->table = table_new(cap);
	if (!av->table)
		goto err;
	if (lm_hmap_init(&av->by_addr, cap))
		goto err;
	if (lm_bufpool_init(&av->pool, sizeof(struct lm_av_entry) + ops->addrlen, 0,
	                    LM_MIN(cap, (size_t)AV_CHUNK_MAX), 0))
		goto err_hmap;
	if (attr->name) {
		ret = lm_av_shm_open(attr, ops->addrlen, type, &av->shm);
		if (ret)
			goto err_pool;
		shm_sync(av);
		if (!attr->map_addr)
			attr->map_addr = lm_av_shm_map(av->shm);
	}
	lm_lock_init(&av->lock, dom->shared);
	atomic_init(&av->ref, 0);
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = (struct fi_ops *)&av_fid_ops;
	av->av_fid.ops = (struct fi_ops_av *)&av_ops;
	atomic_fetch_add(&dom->ref, 1);
	attr->type = type;
	*av_out = &av->av_fid;
	return 0;

err_pool:
	lm_bufpool_fini(&av->pool);
err_hmap:
	lm_hmap_fini(&av->by_addr);
err:
	free(av->table);
	free(av->scratch);
	free(av);
	return ret;
}
