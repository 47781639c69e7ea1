/* iov.h - iovec arrays: their length and validity, copies into and out of
 * them at a byte offset, and slices of them. */
#ifndef LOOM_UTIL_IOV_H
#define LOOM_UTIL_IOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* Most iov entries a posted receive carries (the rx_attr iov_limit the
 * providers advertise), and so the most an engine iov list carries on the
 * wire (struct lm_rdm_rts).  Every request and transfer holds this many
 * entries inline, and a one-piece list travels in a small packet: small
 * enough for both, enough for the few pieces gathered calls tend to use. */
#define LM_IOV_LIMIT 4

/* Bytes in an iov array. */
static inline size_t lm_iov_len(const struct iovec *iov, size_t n)
{
	size_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += iov[i].iov_len;
	return s;
}

/* An application's iov array: at most LM_IOV_LIMIT entries, none with
 * bytes but no buffer, a total that fits a size_t (in *len). */
static inline bool lm_iov_valid(const struct iovec *iov, size_t n, size_t *len)
{
	size_t s = 0;

	if (n > LM_IOV_LIMIT || (n && !iov))
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((iov[i].iov_len && !iov[i].iov_base) || iov[i].iov_len > SIZE_MAX - s)
			return false;
		s += iov[i].iov_len;
	}
	*len = s;
	return true;
}

/* A receive's iov array: at most LM_IOV_LIMIT entries, a total that fits
 * a size_t (in *len).  A NULL buffer is room for no bytes, whatever its
 * length (programs post them, with a length, for empty messages, as
 * libfabric allows; a message with data then ends truncated): copy the
 * array with lm_iov_recv_entry. */
static inline bool lm_iov_recv_valid(const struct iovec *iov, size_t n, size_t *len)
{
	size_t s = 0;

	if (n > LM_IOV_LIMIT || (n && !iov))
		return false;
	for (size_t i = 0; i < n; i++) {
		size_t l = iov[i].iov_base ? iov[i].iov_len : 0;

		if (l > SIZE_MAX - s)
			return false;
		s += l;
	}
	*len = s;
	return true;
}

/* A receive buffer as the copies see it: a NULL one holds nothing. */
static inline struct iovec lm_iov_recv_entry(struct iovec v)
{
	if (!v.iov_base)
		v.iov_len = 0;
	return v;
}

/* Copy len bytes of src into the iov at byte offset; returns the bytes
 * copied (fewer when the iov ends first). */
size_t lm_copy_iov_slow(const struct iovec *iov, size_t iov_count, size_t offset,
                        const void *src, size_t len);
static inline size_t lm_copy_to_iov(const struct iovec *iov, size_t iov_count,
                                    size_t offset, const void *src, size_t len)
{
	/* The common case, a message into the start of one buffer. */
	if (iov_count == 1 && !offset && len <= iov[0].iov_len) {
		if (len) /* a NULL src or buffer may come with 0 bytes */
			memcpy(iov[0].iov_base, src, len);
		return len;
	}
	return lm_copy_iov_slow(iov, iov_count, offset, src, len);
}

/* Copy len bytes of the iov from byte offset into dst; returns the bytes
 * copied (fewer when the iov ends first). */
size_t lm_copy_from_iov(void *dst, const struct iovec *iov, size_t iov_count,
                        size_t offset, size_t len);

/* The part [off, off + len) of iov as a new iov array; returns its count. */
size_t lm_rdm_iov_slice(const struct iovec *iov, size_t count, size_t off, size_t len,
                        struct iovec *out);

#endif
