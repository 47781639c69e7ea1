/* atomic.h - the arithmetic behind fi_atomic: which operation x datatype
 * pairs loom supports, and applying one to target memory atomically with
 * respect to every other loom atomic in the process. */
#ifndef LOOM_UTIL_ATOMIC_H
#define LOOM_UTIL_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

/* Bytes per element; 0 for anything that is not an atomic datatype. */
size_t lm_datatype_size(enum fi_datatype dt);

/* The three families of atomic call (man fi_atomic): fi_atomic,
 * fi_fetch_atomic, fi_compare_atomic. */
enum lm_atomic_kind {
	LM_ATOMIC_BASE,
	LM_ATOMIC_FETCH,
	LM_ATOMIC_COMPARE,
};

/* Validity table:
 *   MIN MAX                     integers, FLOAT, DOUBLE, LONG_DOUBLE
 *   SUM PROD LOR LAND LXOR      every type (complex included)
 *   BOR BAND BXOR MSWAP         integers
 *   ATOMIC_READ ATOMIC_WRITE    every type
 *   CSWAP CSWAP_NE              every type
 *   CSWAP_LE/LT/GE/GT           integers and real floating types
 * "Integers" includes FI_INT128 / FI_UINT128.  Kinds: base takes MIN..BXOR
 * and ATOMIC_WRITE; fetch adds ATOMIC_READ; compare takes CSWAP* and
 * MSWAP. */
bool lm_atomic_valid(enum fi_datatype dt, enum fi_op op, enum lm_atomic_kind kind);

/* fi_query_atomic for util domains.  flags: 0, FI_FETCH_ATOMIC or
 * FI_COMPARE_ATOMIC (not both: -FI_EINVAL); FI_TAGGED (atomics into tagged
 * receive buffers) is not supported: -FI_EOPNOTSUPP.  An unsupported pair
 * is -FI_EOPNOTSUPP, a datatype or op outside the enums -FI_EINVAL.
 * attr->size is the element size; attr->count the most elements one call
 * may carry: the domain's max_msg_size / size when the domain's info
 * gives one, else SIZE_MAX / size (a provider with a tighter limit wraps
 * this and lowers it). */
int lm_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                    struct fi_atomic_attr *attr, uint64_t flags);

/* Apply op to count elements of type dt at dst: dst[i] = dst[i] op src[i]
 * (for the compare family: the man page's test of cmp[i] against dst[i],
 * then dst[i] = src[i]; MSWAP: dst = (src & cmp) | (dst & ~cmp)).
 * result, when not NULL, receives every element's previous value;
 * ATOMIC_READ only copies dst into result (src may be NULL; result may
 * not).  No buffer needs alignment.  Each element is updated atomically
 * against concurrent lm_atomic_apply calls in this process (lock-free for
 * aligned 1..8-byte elements, a striped lock otherwise); the array as a
 * whole is not one atomic unit, as for fi_atomic.
 * -FI_EOPNOTSUPP for a pair that is invalid in every kind, -FI_EINVAL for
 * a missing buffer.  Validating the kind is the caller's business. */
int lm_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
                    const void *cmp, void *result, size_t count);

#endif
