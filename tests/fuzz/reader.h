/* reader.h - how the API-level fuzz targets (api, getinfo, env) read an
 * input: as a stream of choices.  Every read takes the next bytes, and
 * reads past the end give zeros, so any input is a complete program. */
#ifndef LOOM_TEST_FUZZ_READER_H
#define LOOM_TEST_FUZZ_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

struct fz_reader {
	const uint8_t *p;
	size_t n;
};

static inline bool fz_more(const struct fz_reader *r)
{
	return r->n > 0;
}

static inline uint8_t fz_u8(struct fz_reader *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static inline uint64_t fz_bytes_le(struct fz_reader *r, unsigned k)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < k; i++)
		v |= (uint64_t)fz_u8(r) << (8 * i);
	return v;
}

static inline uint16_t fz_u16(struct fz_reader *r)
{
	return (uint16_t)fz_bytes_le(r, 2);
}

static inline uint32_t fz_u32(struct fz_reader *r)
{
	return (uint32_t)fz_bytes_le(r, 4);
}

static inline uint64_t fz_u64(struct fz_reader *r)
{
	return fz_bytes_le(r, 8);
}

/* A value below n (n > 0). */
static inline unsigned fz_below(struct fz_reader *r, unsigned n)
{
	return (unsigned)(fz_u8(r) % n);
}

/* A size: mostly small, sometimes near a limit, sometimes anything. */
static inline uint64_t fz_size(struct fz_reader *r)
{
	static const uint64_t edge[] = {
	    0,    1,     7,       8,          63,        64,         65,           4095,
	    4096, 65536, 1 << 20, UINT32_MAX, INT64_MAX, UINT64_MAX, SIZE_MAX / 2, 256};
	uint8_t k = fz_u8(r);

	if (k < 128)
		return k;
	if (k < 192)
		return edge[k % 16];
	return fz_u64(r);
}

/* A 64-bit word of flags: nothing, one bit, a few bits, or anything. */
static inline uint64_t fz_flags(struct fz_reader *r, uint64_t usual)
{
	switch (fz_below(r, 6)) {
	case 0:
		return 0;
	case 1:
		return 1ULL << fz_below(r, 64);
	case 2:
	case 3: {
		uint64_t v = fz_u64(r);

		return usual ? v & usual : v;
	}
	case 4:
		return usual;
	default:
		return fz_u64(r);
	}
}

/* A NUL-terminated string of at most cap - 1 bytes into buf: one of
 * choices (when given), or bytes of the input. */
static inline const char *fz_str(struct fz_reader *r, char *buf, size_t cap,
                                 const char *const *choices, size_t nchoices)
{
	uint8_t k = fz_u8(r);
	size_t len;

	if (nchoices && k % 4 != 3)
		return choices[(k / 4) % nchoices];
	len = fz_u8(r) % cap;
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)fz_u8(r);
	buf[len] = '\0';
	return buf;
}

/* A call's return code: 0 or more, or a negative fi_errno (an errno, or
 * an FI_E* code, which fi_strerror names).  Anything else is a bug. */
static inline bool fz_code_ok(long long ret)
{
	return ret >= 0 || (-ret < FI_ERRNO_OFFSET + 64 && fi_strerror((int)-ret));
}

/* Write n bytes of b as file name in dir (a seed): 0, or -1. */
static inline int fz_save(const char *dir, const char *name, const void *b, size_t n)
{
	char path[4096];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n)
		ret = -1;
	if (f && fclose(f))
		ret = -1;
	return ret;
}

#define FZ_CHECK(cond, ...)                                                              \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                  \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                             \
			abort();                                                         \
		}                                                                        \
	} while (0)

/* A call that must return 0+ or a negative fi_errno. */
#define FZ_CALL(expr)                                                                    \
	({                                                                               \
		long long r_ = (long long)(expr);                                        \
		FZ_CHECK(fz_code_ok(r_), "%s = %lld: not an fi_errno", #expr, r_);       \
		r_;                                                                      \
	})

#endif
