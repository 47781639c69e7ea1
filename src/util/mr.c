/* mr.c - memory registration for util domains: fi_mr_reg/regv/regattr, the
 * fid_mr operations, raw keys, and the key/range/access check a target runs
 * before any peer touches registered memory. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util.h"
#include "v1_names.h"

struct lm_mr_map {
	struct lm_hmap keys; /* lm_mr.node by key */
	struct lm_lock lock; /* taken only when the domain is shared */
	uint32_t serial;     /* the low half of the next provider key */
};

#define RAW_KEY_SIZE 8
/* Registrations the key map holds before it first grows: a few per endpoint. */
#define MR_KEYS_EXPECTED 64

#define ACCESS_BITS                                                                      \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |     \
	 FI_COLLECTIVE)
#define REG_FLAGS (FI_RMA_EVENT | FI_RMA_PMEM | FI_HMEM_DEVICE_ONLY | FI_HMEM_HOST_ALLOC)

/* FI_MR_BASIC (1.4 and earlier) means virtual addresses and provider keys;
 * FI_MR_SCALABLE means neither, i.e. no bits at all. */
static int mr_mode(const struct lm_domain *dom)
{
	int mode = dom->mr_mode;

	if (mode & LM_MR_BASIC)
		mode |= FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	return mode;
}

static const struct fi_domain_attr *dom_attr(const struct lm_domain *dom)
{
	return dom->info ? dom->info->domain_attr : NULL;
}

/* Keys must fit in mr_key_size bytes; 0 (unset) or more than 8 mean 8. */
static uint64_t key_mask(const struct lm_domain *dom)
{
	const struct fi_domain_attr *a = dom_attr(dom);
	size_t size = a ? a->mr_key_size : 0;

	if (size == 0 || size >= sizeof(uint64_t))
		return UINT64_MAX;
	return (UINT64_C(1) << (8 * size)) - 1;
}

static size_t iov_limit(const struct lm_domain *dom)
{
	const struct fi_domain_attr *a = dom_attr(dom);

	return a && a->mr_iov_limit ? a->mr_iov_limit : 1;
}

static struct lm_mr_map *map_of(struct lm_domain *dom)
{
	return __atomic_load_n(&dom->mr_map, __ATOMIC_ACQUIRE);
}

void lm_mr_map_destroy(struct lm_mr_map *map)
{
	if (!map)
		return;
	lm_hmap_fini(&map->keys);
	lm_lock_fini(&map->lock);
	free(map);
}

/* The map is made by the first registration so that domains of providers
 * without RMA pay nothing; readers (lm_mr_check) load it atomically. */
static int map_get(struct lm_domain *dom, struct lm_mr_map **out)
{
	struct lm_mr_map *map = map_of(dom);
	int ret = 0;

	if (map) {
		*out = map;
		return 0;
	}
	lm_lock_acquire(&dom->lock);
	map = dom->mr_map;
	if (!map) {
		map = calloc(1, sizeof(*map));
		if (!map || lm_hmap_init(&map->keys, MR_KEYS_EXPECTED)) {
			free(map);
			ret = -FI_ENOMEM;
			goto out;
		}
		lm_lock_init(&map->lock, dom->shared);
		__atomic_store_n(&dom->mr_map, map, __ATOMIC_RELEASE);
	}
	*out = map;
out:
	lm_lock_release(&dom->lock);
	return ret;
}

static uint64_t random_u64(void)
{
	static _Atomic uint64_t fallback;
	struct timespec ts;
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	/* No entropy yet (early boot) or no syscall: unique rather than
	 * unguessable, a counter pushed through a bijective mixer. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	v = atomic_fetch_add(&fallback, UINT64_C(0x9e3779b97f4a7c15)) ^
	    ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
	v ^= v >> 30;
	v *= UINT64_C(0xbf58476d1ce4e5b9);
	v ^= v >> 27;
	v *= UINT64_C(0x94d049bb133111eb);
	return v ^ (v >> 31);
}

static bool key_free(const struct lm_mr_map *map, uint64_t key)
{
	return key != FI_KEY_NOTAVAIL && !lm_hmap_find(&map->keys, key);
}

/* A provider key: a 32-bit serial number under 32 random bits.  The random
 * half keeps a peer from deriving other regions' keys from its own; the
 * serial half keeps the domain's keys distinct without a retry, and leaves
 * the low bytes small, as libfabric's own providers' keys (plain serial
 * numbers) are -- programs written against those keep working, such as
 * fabtests' fi_rdm_rma_trigger, which reads a string that ends at a key's
 * fourth byte.  A key space narrower than 8 bytes keeps the low bytes of
 * this; when a key is taken (the serial wrapped, or the application chose it),
 * walk on: one more step than there are keys in use finds a free one if
 * any exists.  Called with the map locked. */
static int pick_key(struct lm_mr_map *map, uint64_t mask, uint64_t *key)
{
	uint64_t k = ((random_u64() << 32) | map->serial++) & mask;

	for (size_t n = 0; n <= map->keys.count; n++, k = (k + 1) & mask) {
		if (key_free(map, k)) {
			*key = k;
			return 0;
		}
	}
	return -FI_ENOSPC;
}

/* ---- the fid_mr ---------------------------------------------------------- */

static int mr_close(struct fid *fid)
{
	struct lm_mr *mr = lm_container_of(fid, struct lm_mr, mr_fid.fid);
	struct lm_domain *dom = mr->domain;
	struct lm_mr_map *map = map_of(dom);

	lm_lock_acquire(&map->lock);
	lm_hmap_remove(&map->keys, &mr->node);
	lm_lock_release(&map->lock);
	if (mr->cntr)
		atomic_fetch_sub(&mr->cntr->ref, 1);
	atomic_fetch_sub(&dom->ref, 1);
	free(mr);
	return 0;
}

static int mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_mr *mr = lm_container_of(fid, struct lm_mr, mr_fid.fid);
	struct lm_mr_map *map = map_of(mr->domain);
	struct lm_cntr *cntr;
	int ret = 0;

	if (!bfid)
		return -FI_EINVAL;
	lm_lock_acquire(&map->lock);
	if (mr->needs_enable && mr->enabled) {
		ret = -FI_EINVAL; /* bindings are fixed once enabled */
		goto out;
	}
	switch (bfid->fclass) {
	case FI_CLASS_CNTR:
		cntr = lm_container_of(bfid, struct lm_cntr, cntr_fid.fid);
		if (flags & ~FI_REMOTE_WRITE) {
			ret = -FI_EBADFLAGS;
			break;
		}
		/* Under FI_MR_RMA_EVENT the region must have said so when
		 * it was registered. */
		if (cntr->domain != mr->domain ||
		    ((mr_mode(mr->domain) & FI_MR_RMA_EVENT) &&
		     !(mr->flags & FI_RMA_EVENT))) {
			ret = -FI_EINVAL;
			break;
		}
		atomic_fetch_add(&cntr->ref, 1);
		if (mr->cntr)
			atomic_fetch_sub(&mr->cntr->ref, 1);
		mr->cntr = cntr;
		mr->cntr_flags = flags;
		break;
	case FI_CLASS_EP:
	case FI_CLASS_SEP:
		if (flags) {
			ret = -FI_EBADFLAGS;
			break;
		}
		mr->ep = bfid;
		break;
	default:
		ret = -FI_EINVAL;
		break;
	}
out:
	lm_lock_release(&map->lock);
	return ret;
}

static void raw_key_encode(uint64_t key, uint8_t *raw)
{
	for (size_t i = 0; i < RAW_KEY_SIZE; i++)
		raw[i] = (uint8_t)(key >> (8 * i));
}

static uint64_t raw_key_decode(const uint8_t *raw)
{
	uint64_t key = 0;

	for (size_t i = 0; i < RAW_KEY_SIZE; i++)
		key |= (uint64_t)raw[i] << (8 * i);
	return key;
}

static int mr_raw_attr(struct lm_mr *mr, struct fi_mr_raw_attr *raw)
{
	if (!raw || !raw->key_size || !raw->base_addr)
		return -FI_EINVAL;
	if (raw->flags)
		return -FI_EBADFLAGS;
	if (*raw->key_size < RAW_KEY_SIZE || !raw->raw_key) {
		/* The one output the man page asks for on failure: how
		 * much room the key needs. */
		*raw->key_size = RAW_KEY_SIZE;
		return -FI_ETOOSMALL;
	}
	raw_key_encode(mr->key, raw->raw_key);
	*raw->key_size = RAW_KEY_SIZE;
	*raw->base_addr = mr->base;
	return 0;
}

static int mr_control(struct fid *fid, int command, void *arg)
{
	struct lm_mr *mr = lm_container_of(fid, struct lm_mr, mr_fid.fid);
	struct lm_mr_map *map = map_of(mr->domain);
	int ret = 0;

	switch (command) {
	case FI_ENABLE:
		lm_lock_acquire(&map->lock);
		if ((mr_mode(mr->domain) & FI_MR_ENDPOINT) && !mr->ep)
			ret = -FI_EINVAL; /* must be bound to its endpoint first */
		else
			mr->enabled = true;
		lm_lock_release(&map->lock);
		return ret;
	case FI_REFRESH:
		/* Host memory needs no re-pinning: the check reads the
		 * application's pages directly. */
		return arg ? 0 : -FI_EINVAL;
	case FI_GET_RAW_MR:
		return mr_raw_attr(mr, arg);
	default:
		return -FI_ENOSYS;
	}
}

static const struct fi_ops mr_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = mr_close,
    .bind = mr_bind,
    .control = mr_control,
    .ops_open = lm_fid_no_ops_open,
};

/* ---- registration ---------------------------------------------------------- */

static int check_attr(struct lm_domain *dom, const struct fi_mr_attr *attr,
                      uint64_t flags, uint64_t *base, size_t *total)
{
	uint32_t api = dom->fabric->fabric_fid.api_version;
	size_t sum = 0;
	uint64_t start;

	if (!attr || !attr->iov_count || !attr->mr_iov ||
	    attr->iov_count > iov_limit(dom))
		return -FI_EINVAL;
	if (flags & ~REG_FLAGS)
		return -FI_EBADFLAGS;
	if (attr->access & ~ACCESS_BITS)
		return -FI_EINVAL;
	/* Fields newer than the application's API version may be garbage, or
	 * lie past the end of its structure: auth keys exist from 1.5, iface
	 * only matters with FI_HMEM, hmem_data and page_size (1.22) with
	 * device memory, and sub-regions (base_mr, 2.0) are not offered. */
	if (FI_VERSION_GE(api, FI_VERSION(1, 5)) && attr->auth_key_size)
		return -FI_ENOSYS;
	if (FI_VERSION_GE(api, FI_VERSION(2, 0)) && (attr->base_mr || attr->sub_mr_cnt))
		return -FI_ENOSYS;
	if (dom->info && (dom->info->caps & FI_HMEM) && attr->iface != FI_HMEM_SYSTEM)
		return -FI_ENOSYS;
	if (flags & FI_HMEM_DEVICE_ONLY)
		return -FI_EINVAL; /* host memory is never device-only */
	for (size_t i = 0; i < attr->iov_count; i++) {
		const struct iovec *v = &attr->mr_iov[i];

		if (!v->iov_len)
			continue;
		if (!v->iov_base || (uintptr_t)v->iov_base > UINTPTR_MAX - v->iov_len ||
		    sum > SIZE_MAX - v->iov_len)
			return -FI_EINVAL;
		sum += v->iov_len;
	}
	start = (mr_mode(dom) & FI_MR_VIRT_ADDR)
	            ? (uint64_t)(uintptr_t)attr->mr_iov[0].iov_base
	            : attr->offset;
	if (start > UINT64_MAX - sum)
		return -FI_EINVAL;
	*base = start;
	*total = sum;
	return 0;
}

/* Enter mr in the map under its key: the requested one, checked against
 * mr_key_size and keys in use, or one of ours under FI_MR_PROV_KEY. */
static int insert_key(struct lm_domain *dom, struct lm_mr_map *map, struct lm_mr *mr,
                      uint64_t requested_key)
{
	uint64_t mask = key_mask(dom);
	uint64_t key = requested_key;
	int ret = 0;

	lm_lock_acquire(&map->lock);
	if (mr_mode(dom) & FI_MR_PROV_KEY) {
		ret = pick_key(map, mask, &key);
	} else if ((requested_key & ~mask) || requested_key == FI_KEY_NOTAVAIL) {
		ret = -FI_EKEYREJECTED;
	} else if (lm_hmap_find(&map->keys, requested_key)) {
		ret = -FI_ENOKEY;
	}
	if (!ret) {
		mr->key = key;
		lm_hmap_insert(&map->keys, &mr->node, key);
	}
	lm_lock_release(&map->lock);
	return ret;
}

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                      struct fid_mr **out)
{
	struct lm_domain *dom;
	struct lm_mr_map *map;
	struct fid_mr *prev;
	struct lm_mr *mr;
	uint64_t base;
	size_t total;
	int mode, ret;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !out)
		return -FI_EINVAL;
	dom = lm_container_of(fid, struct lm_domain, domain_fid.fid);
	ret = check_attr(dom, attr, flags, &base, &total);
	if (ret)
		return ret;
	ret = map_get(dom, &map);
	if (ret)
		return ret;

	mr = calloc(1, sizeof(*mr) + attr->iov_count * sizeof(struct iovec));
	if (!mr)
		return -FI_ENOMEM;
	mode = mr_mode(dom);
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = (struct fi_ops *)&mr_fid_ops;
	mr->mr_fid.mem_desc = mr;
	mr->domain = dom;
	mr->access = attr->access;
	mr->flags = flags;
	mr->base = base;
	mr->len = total;
	mr->needs_enable = (mode & FI_MR_ENDPOINT) ||
	                   ((mode & FI_MR_RMA_EVENT) && (flags & FI_RMA_EVENT));
	mr->enabled = !mr->needs_enable;
	mr->iov_count = attr->iov_count;
	memcpy(mr->iov, attr->mr_iov, attr->iov_count * sizeof(struct iovec));

	ret = insert_key(dom, map, mr, attr->requested_key);
	if (ret) {
		LM_DEBUG(dom->fabric->prov, FI_LOG_MR, "key 0x%" PRIx64 ": %s\n",
		         attr->requested_key, fi_strerror(-ret));
		free(mr);
		return ret;
	}
	/* Under FI_MR_RAW the key is only handed out raw. */
	mr->mr_fid.key = (mode & FI_MR_RAW) ? FI_KEY_NOTAVAIL : mr->key;
	atomic_fetch_add(&dom->ref, 1);

	/* Asynchronous registration: the work is already done, but the
	 * application learns it from the EQ.  *out is written before the
	 * event can be read, as the man page requires. */
	prev = *out;
	*out = &mr->mr_fid;
	if (dom->eq && (dom->eq_flags & LM_REG_MR)) {
		struct fi_eq_entry entry = {
		    .fid = &mr->mr_fid.fid,
		    .context = attr->context,
		};
		ssize_t n =
		    lm_eq_write(dom->eq, FI_MR_COMPLETE, &entry, sizeof(entry), 0);

		if (n < 0) {
			*out = prev;
			mr_close(&mr->mr_fid.fid);
			return (int)n;
		}
	}
	return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
                   uint64_t access, uint64_t offset, uint64_t requested_key,
                   uint64_t flags, struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr = {
	    .mr_iov = iov,
	    .iov_count = count,
	    .access = access,
	    .offset = offset,
	    .requested_key = requested_key,
	    .context = context,
	    .iface = FI_HMEM_SYSTEM,
	};

	return mr_regattr(fid, &attr, flags, mr);
}

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
                  uint64_t offset, uint64_t requested_key, uint64_t flags,
                  struct fid_mr **mr, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

const struct fi_ops_mr lm_mr_ops = {
    .size = sizeof(struct fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

int lm_mr_domain_control(struct fid *domain_fid, int command, void *arg)
{
	struct fi_mr_map_raw *map = arg;

	if (!domain_fid)
		return -FI_EINVAL;
	switch (command) {
	case FI_MAP_RAW_MR:
		if (!map || !map->raw_key || !map->key)
			return -FI_EINVAL;
		if (map->flags)
			return -FI_EBADFLAGS;
		if (map->key_size != RAW_KEY_SIZE)
			return -FI_EINVAL;
		*map->key = raw_key_decode(map->raw_key);
		return 0;
	case FI_UNMAP_KEY:
		return arg ? 0 : -FI_EINVAL;
	case FI_QUEUE_WORK:
	case FI_CANCEL_WORK:
	case FI_FLUSH_WORK: {
		struct lm_domain *dom =
		    lm_container_of(domain_fid, struct lm_domain, domain_fid.fid);

		return dom->work_control ? dom->work_control(dom, command, arg) : -FI_ENOSYS;
	}
	default:
		return -FI_ENOSYS;
	}
}

/* ---- the target-side check -------------------------------------------------- */

void lm_mr_remote_event(struct lm_domain *dom, uint64_t key, uint64_t access)
{
	struct lm_mr_map *map = dom ? map_of(dom) : NULL;
	struct lm_hnode *node;
	struct lm_cntr *c = NULL;

	if (!map)
		return;
	lm_lock_acquire(&map->lock);
	node = lm_hmap_find(&map->keys, key);
	if (node) {
		struct lm_mr *mr = lm_container_of(node, struct lm_mr, node);

		if (mr->enabled && mr->cntr && (mr->cntr_flags & access))
			c = mr->cntr;
	}
	/* Counted under the map lock: fi_close of the region waits for it,
	 * so the counter it holds a reference on is still there. */
	if (c)
		lm_cntr_inc(c);
	lm_lock_release(&map->lock);
}

int lm_mr_check(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                uint64_t access, struct lm_mr **out, size_t *offset)
{
	struct lm_mr_map *map = dom ? map_of(dom) : NULL;
	size_t span = len ? len : 1;
	struct lm_hnode *node;
	struct lm_mr *mr;
	uint64_t off;
	int ret = 0;

	if (!map)
		return -FI_EKEYREJECTED;
	lm_lock_acquire(&map->lock);
	node = lm_hmap_find(&map->keys, key);
	if (!node) {
		ret = -FI_EKEYREJECTED;
		goto out;
	}
	mr = lm_container_of(node, struct lm_mr, node);
	if (!mr->enabled) {
		ret = -FI_EKEYREJECTED;
		goto out;
	}
	/* Subtractions only, so that no addr + len can wrap past the end. */
	off = addr - mr->base;
	if ((mr->access & access) != access || addr < mr->base || off >= mr->len ||
	    span > mr->len - off) {
		ret = -FI_EACCES;
		goto out;
	}
	*out = mr;
	*offset = (size_t)off;
out:
	lm_lock_release(&map->lock);
	if (ret)
		LM_DEBUG(dom->fabric->prov, FI_LOG_MR,
		         "key 0x%" PRIx64 " [0x%" PRIx64 " +%zu] access 0x%" PRIx64
		         ": %s\n",
		         key, addr, len, access, fi_strerror(-ret));
	return ret;
}

int lm_mr_verify(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                 uint64_t access, void **local)
{
	size_t span = len ? len : 1;
	struct lm_mr *mr;
	size_t off, i;
	int ret;

	if (!local)
		return -FI_EINVAL;
	ret = lm_mr_check(dom, key, addr, len, access, &mr, &off);
	if (ret)
		return ret;
	for (i = 0; off >= mr->iov[i].iov_len; i++)
		off -= mr->iov[i].iov_len;
	if (span > mr->iov[i].iov_len - off)
		return -FI_EACCES;
	*local = (char *)mr->iov[i].iov_base + off;
	return 0;
}

int lm_mr_verify_iov(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                     uint64_t access, struct iovec *out, size_t *out_count)
{
	size_t off, first, i, n, left;
	struct lm_mr *mr;
	int ret;

	if (!out_count || (!out && *out_count))
		return -FI_EINVAL;
	ret = lm_mr_check(dom, key, addr, len, access, &mr, &off);
	if (ret)
		return ret;
	if (!len) {
		*out_count = 0;
		return 0;
	}
	for (first = 0; off >= mr->iov[first].iov_len; first++)
		off -= mr->iov[first].iov_len;
	/* Count the pieces before writing any, so out is untouched on error;
	 * lm_mr_check guaranteed the iovs hold len bytes from here. */
	n = 0;
	left = len + off;
	for (i = first; left; i++) {
		if (!mr->iov[i].iov_len)
			continue;
		n++;
		left -= LM_MIN(left, mr->iov[i].iov_len);
	}
	if (n > *out_count)
		return -FI_ETOOSMALL;
	n = 0;
	left = len;
	for (i = first; left; i++, off = 0) {
		size_t piece = LM_MIN(left, mr->iov[i].iov_len - off);

		if (!piece)
			continue;
		out[n].iov_base = (char *)mr->iov[i].iov_base + off;
		out[n].iov_len = piece;
		n++;
		left -= piece;
	}
	*out_count = n;
	return 0;
}
