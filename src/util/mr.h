/* mr.h - memory registration: the fid_mr objects a domain hands out, the
 * key map behind them, and the target-side check every incoming RMA or
 * atomic passes before memory is touched. */
#ifndef LOOM_UTIL_MR_H
#define LOOM_UTIL_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fi_domain.h>

#include "hash.h"

struct lm_domain;
struct lm_cntr;

/* One registration.  The region as a peer sees it is the concatenation of
 * iov[0..iov_count), starting at peer address `base`: the first byte's
 * virtual address under FI_MR_VIRT_ADDR (or FI_MR_BASIC), otherwise the
 * registration's offset (0 unless the application asked otherwise). */
struct lm_mr {
	struct fid_mr mr_fid; /* mem_desc points back at this struct */
	struct lm_domain *domain;
	uint64_t access; /* FI_SEND ... FI_REMOTE_WRITE granted */
	uint64_t flags;  /* registration flags (FI_RMA_EVENT, ...) */
	uint64_t key;
	uint64_t base;
	size_t len; /* total bytes over every iov */
	struct lm_hnode node;
	/* A region created disabled (FI_MR_ENDPOINT, or FI_MR_RMA_EVENT with
	 * FI_RMA_EVENT) is invisible to lm_mr_verify until fi_mr_enable;
	 * after that it takes no more bindings. */
	bool needs_enable;
	bool enabled;
	/* fi_mr_bind: the counter counting remote writes (FI_REMOTE_WRITE in
	 * cntr_flags; the binding holds a reference on it, so the counter
	 * cannot close first), the endpoint of an FI_MR_ENDPOINT domain. */
	struct lm_cntr *cntr;
	uint64_t cntr_flags;
	struct fid *ep;
	size_t iov_count;
	struct iovec iov[]; /* copy of the registered vector */
};

/* The domain's key -> lm_mr map, created by the first registration. */
struct lm_mr_map;

/* Frees the map (NULL is fine).  Called by the domain at close, when no
 * registration is left (the domain's ref counts them). */
void lm_mr_map_destroy(struct lm_mr_map *map);

/* reg / regv / regattr, installed as every util domain's fid_domain.mr. */
extern const struct fi_ops_mr lm_mr_ops;

/* fi_mr_map_raw (FI_MAP_RAW_MR) and fi_mr_unmap_key (FI_UNMAP_KEY) arrive
 * through the domain's fi_control: a domain's control op hands those two
 * commands here; anything else is -FI_ENOSYS.  The raw key of a loom
 * registration is its 8-byte key, little-endian, so mapping needs no
 * state and unmapping is a no-op. */
int lm_mr_domain_control(struct fid *domain_fid, int command, void *arg);

/* The target-side check.  key names the region, [addr, addr + len) the
 * bytes a peer wants in peer addresses (see struct lm_mr), access is what
 * it wants to do with them: FI_REMOTE_READ for reads, FI_REMOTE_WRITE for
 * writes and atomics, both for fetching atomics.
 *   -FI_EKEYREJECTED  no such key, or the region is not enabled yet;
 *   -FI_EACCES        the range leaves the region (wrapping included) or
 *                     an access bit was not granted.
 * A zero-length range is checked as if it were one byte long, so a success
 * never names memory outside a registered region.
 *
 * lm_mr_check is the common part: the region and the byte offset of addr
 * in it.  The caller may read mr->cntr etc. while the application keeps
 * the region open (closing a region that is in use is the application's
 * error, as for any registration). */
int lm_mr_check(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                uint64_t access, struct lm_mr **mr, size_t *offset);

/* A remote access of kind access (FI_REMOTE_READ or FI_REMOTE_WRITE)
 * reached the region named key: its bound counter counts it when the
 * binding asked for that kind (fi_mr_bind, FI_RMA_EVENT). */
void lm_mr_remote_event(struct lm_domain *dom, uint64_t key, uint64_t access);

/* A range that must be contiguous in local memory (an atomic target, or
 * an RMA into a single-iov region): *local is its first byte.  A range
 * that crosses from one iov of the region into the next is -FI_EACCES
 * here; use lm_mr_verify_iov for those. */
int lm_mr_verify(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                 uint64_t access, void **local);

/* The same range split over the region's iovs: on input *out_count is the
 * capacity of out (the domain's mr_iov_limit always suffices), on output
 * the number of pieces written (0 for len 0).  -FI_ETOOSMALL if out is too
 * short. */
int lm_mr_verify_iov(struct lm_domain *dom, uint64_t key, uint64_t addr, size_t len,
                     uint64_t access, struct iovec *out, size_t *out_count);

#endif
