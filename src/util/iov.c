/* iov.c - the out-of-line iovec helpers of iov.h. */
#include "core.h"
#include "iov.h"

/* Copy len bytes between buf and the iov from byte offset, into the iov
 * when to_iov (buf is then only read); returns the bytes copied. */
static size_t iov_copy(const struct iovec *iov, size_t count, size_t offset, void *buf,
                       size_t len, bool to_iov)
{
	char *b = buf;
	size_t done = 0;

	for (size_t i = 0; i < count && done < len; i++) {
		char *at;
		size_t n;

		if (offset >= iov[i].iov_len) {
			offset -= iov[i].iov_len;
			continue;
		}
		n = LM_MIN(iov[i].iov_len - offset, len - done);
		at = (char *)iov[i].iov_base + offset;
		if (to_iov)
			memcpy(at, b + done, n);
		else
			memcpy(b + done, at, n);
		done += n;
		offset = 0;
	}
	return done;
}

size_t lm_copy_iov_slow(const struct iovec *iov, size_t iov_count, size_t offset,
                        const void *src, size_t len)
{
	return iov_copy(iov, iov_count, offset, (void *)src, len, true);
}

size_t lm_copy_from_iov(void *dst, const struct iovec *iov, size_t iov_count,
                        size_t offset, size_t len)
{
	return iov_copy(iov, iov_count, offset, dst, len, false);
}

size_t lm_rdm_iov_slice(const struct iovec *iov, size_t count, size_t off, size_t len,
                        struct iovec *out)
{
	size_t n = 0;

	for (size_t i = 0; i < count && len; i++) {
		size_t take;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		take = LM_MIN(iov[i].iov_len - off, len);
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return n;
}
