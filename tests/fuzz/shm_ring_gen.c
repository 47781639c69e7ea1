/* shm_ring_gen.c - inputs for the shm ring fuzz target (shm_ring_fuzz.c)
 * built from the record format (shm_ring.h) and the engine's wire format
 * (rdm.h): the driver's generated inputs and the seed corpus (README.md).
 * Addresses, keys, handles and H's identity are markers the target fills
 * in. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rdm.h"
#include "shm_ring.h"

struct out {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->len + n > o->cap)
		n = o->cap - o->len;
	memcpy(o->p + o->len, p, n);
	o->len += n;
}

static void put8(struct out *o, uint8_t v)
{
	put(o, &v, 1);
}

static void put16(struct out *o, uint16_t v)
{
	put(o, &v, 2);
}

static void put32(struct out *o, uint32_t v)
{
	put(o, &v, 4);
}

static void put64(struct out *o, uint64_t v)
{
	put(o, &v, 8);
}

static void st64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

static uint64_t mark(uint32_t m, uint32_t lo)
{
	return (uint64_t)m << 32 | lo;
}

/* A value near a limit, or a marker, for a header field. */
static uint64_t pick(uint64_t *rng)
{
	static const uint64_t lim[] = {0,          1,          7,           8,
	                               63,         64,         4096,        65535,
	                               65536,      65537,      70000,       1u << 20,
	                               0x7fffffff, 0xffffffff, ~0ULL,       1ULL << 63,
	                               ~0ULL - 7,  1ULL << 32, SR_MR_RW_LEN, SR_MR_RO_LEN};
	uint64_t r = fz_rand(rng);

	switch (r % 8) {
	case 0:
		return mark(SR_MARK_ADDR_RW, (uint32_t)lim[(r >> 8) % 20]);
	case 1:
		return mark(r & 256 ? SR_MARK_KEY_RO : SR_MARK_KEY_RW, (r >> 9) % 4 ? 0 : 1);
	case 2:
		return mark(SR_MARK_ARENA, (uint32_t)(r >> 8) % (2 * SR_ARENA_LEN));
	case 3:
		return mark(SR_MARK_HANDLE, (uint32_t)(r >> 8) % 4);
	case 4:
		return mark(SR_MARK_ADDR_RO, (uint32_t)lim[(r >> 8) % 20]);
	default:
		return lim[(r >> 8) % 20];
	}
}

/* An iov list (RTS, READ_REQ, WRITE with RNDV, PUSH), count entries over
 * H's memory (or anywhere, when wild). */
static size_t iov_list(uint8_t *p, uint64_t count, uint64_t size, bool wild, uint64_t *rng)
{
	size_t n = 8;

	memcpy(p, &count, 8);
	for (uint64_t i = 0; i < count && i < LM_IOV_LIMIT + 1; i++) {
		uint64_t base = wild ? pick(rng) : mark(SR_MARK_ARENA, (uint32_t)(i * 65536));
		uint64_t len = count ? size / count + (i == 0 ? size % count : 0) : 0;

		memcpy(p + n, &base, 8);
		memcpy(p + n + 8, &len, 8);
		n += 16;
	}
	return n;
}

/* One PKT record: sel, header, payload length and bytes. */
static void put_pkt(struct out *o, uint8_t sel, const struct lm_rdm_hdr *h,
                    const void *payload, uint16_t plen)
{
	put8(o, SR_PKT);
	put8(o, sel);
	put(o, h, sizeof(*h));
	put16(o, plen);
	put(o, payload, plen < SR_PKT_BYTES ? plen : SR_PKT_BYTES);
}

/* A packet of op with fields near their limits. */
static void gen_pkt(struct out *o, uint64_t *rng, uint8_t op)
{
	uint8_t payload[SR_PKT_BYTES] = {0};
	struct lm_rdm_hdr h = {.op = op};
	uint64_t r = fz_rand(rng);
	uint16_t plen = 0;
	uint8_t sel = (uint8_t)(r & (SR_SEL_WHO | SR_SEL_CARRIER));

	h.flags = (uint16_t)(fz_rand(rng) & 0x3ff);
	h.size = pick(rng) % (r & 512 ? 200000 : ~0ULL);
	h.tag = r & 1024 ? SR_BIG_TAG : fz_rand(rng) & 0xff;
	h.data = fz_rand(rng);
	h.sreq = r & 2048 ? pick(rng) : fz_rand(rng) % 64;
	h.rreq = pick(rng);
	h.addr = pick(rng);
	h.key = pick(rng);
	switch (op) {
	case LM_OP_RTS:
	case LM_OP_READ_REQ:
	case LM_OP_PUSH:
		plen = (uint16_t)iov_list(payload, fz_rand(rng) % 6, h.size, r & 4096, rng);
		if (r & 8192)
			h.flags |= LM_HF_BULK;
		break;
	case LM_OP_WRITE:
		if (r & 4096) {
			h.flags |= LM_HF_RNDV;
			plen = (uint16_t)iov_list(payload, fz_rand(rng) % 6, h.size, r & 8192,
			                          rng);
			break;
		}
		/* fall through */
	default:
		plen = (uint16_t)(pick(rng) % 70000);
		if (r & 16384)
			plen = (uint16_t)(fz_rand(rng) % 240);
		for (size_t i = 0; i < SR_PKT_BYTES; i++)
			payload[i] = (uint8_t)fz_rand(rng);
		break;
	}
	if (r & 32768) /* a field of the link's, from the input */
		sel |= (uint8_t)(SR_SEL_MASK << (fz_rand(rng) % 3));
	put8(o, SR_PKT);
	put8(o, sel);
	put(o, &h, sizeof(h));
	put16(o, plen);
	if (sel & SR_SEL_MASK)
		put8(o, (uint8_t)fz_rand(rng));
	if (sel & SR_SEL_WLEN)
		put32(o, (uint32_t)pick(rng));
	if (sel & SR_SEL_CLEN)
		put32(o, (uint32_t)(fz_rand(rng) % 300));
	if ((sel & SR_SEL_CARRIER) == SR_SEL_RAWBUF)
		put32(o, (uint32_t)(fz_rand(rng) % 80));
	put(o, payload, plen < SR_PKT_BYTES ? plen : SR_PKT_BYTES);
}

size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	struct out o = {buf, 0, cap};
	unsigned n = 1 + (unsigned)(fz_rand(rng) % 12);

	for (unsigned i = 0; i < n && o.len < cap; i++) {
		uint64_t r = fz_rand(rng);

		switch (r % 16) {
		default:
			gen_pkt(&o, rng, (uint8_t)(LM_OP_EAGER + (r >> 8) % (LM_OP_MAX - 1)));
			break;
		case 8: {
			uint8_t n8 = (uint8_t)(fz_rand(rng) % 240);

			put8(&o, SR_RAW);
			put32(&o, (uint32_t)(r >> 16) % 300);
			put8(&o, n8);
			put64(&o, mark(SR_MARK_PID, (uint32_t)(r >> 40) % 70));
			put64(&o, mark(SR_MARK_TOKEN, (uint32_t)(r >> 50)));
			for (unsigned k = 16; k < n8; k++)
				put8(&o, (uint8_t)fz_rand(rng));
			break;
		}
		case 9:
		case 10:
			put8(&o, SR_POLL);
			put8(&o, (uint8_t)(r >> 8));
			break;
		case 11:
			put8(&o, SR_CTRL);
			put8(&o, (uint8_t)(r >> 8));
			put64(&o, r & 1 << 20 ? pick(rng) : fz_rand(rng));
			break;
		case 12:
		case 13:
			put8(&o, SR_TX);
			put8(&o, (uint8_t)(r >> 8));
			break;
		case 14: {
			uint8_t n8 = (uint8_t)(fz_rand(rng) % 64);

			put8(&o, SR_BUF);
			put8(&o, (uint8_t)(r >> 8));
			put16(&o, (uint16_t)(r >> 16));
			put8(&o, n8);
			for (unsigned k = 0; k < n8; k++)
				put8(&o, (uint8_t)fz_rand(rng));
			break;
		}
		}
	}
	return o.len;
}

/* ---- seeds ------------------------------------------------------------------------- */

static int write_seed(const char *dir, const char *name, const struct out *o)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(o->p, 1, o->len, f) != o->len) {
		perror(path);
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}

static struct lm_rdm_hdr hdr(uint8_t op, uint16_t flags, uint64_t size)
{
	return (struct lm_rdm_hdr){.version = LM_RDM_WIRE_VERSION,
	                           .op = op,
	                           .flags = flags,
	                           .size = size};
}

int fz_write_seeds(const char *dir)
{
	static uint8_t mem[4096];
	uint8_t pl[SR_PKT_BYTES];
	struct out o = {mem, 0, sizeof(mem)};
	struct lm_rdm_hdr h;
	int ret = 0;

#define SEED(name, body)                                                                 \
	do {                                                                             \
		o.len = 0;                                                               \
		body;                                                                    \
		ret |= write_seed(dir, name, &o);                                        \
	} while (0)

	memset(pl, 0x41, sizeof(pl));
	SEED("eager", {
		h = hdr(LM_OP_EAGER, 0, 40);
		put_pkt(&o, 0, &h, pl, 40);
	});
	SEED("eager-tagged-big", {
		h = hdr(LM_OP_EAGER, LM_HF_TAGGED | LM_HF_ACK, 60000);
		h.tag = SR_BIG_TAG;
		put_pkt(&o, SR_SEL_BUF, &h, pl, 60000);
		put8(&o, SR_POLL);
		put8(&o, 3);
	});
	SEED("eager-size-lies", {
		h = hdr(LM_OP_EAGER, LM_HF_TAGGED, 1000000);
		put_pkt(&o, 0, &h, pl, 100);
	});
	SEED("rts-arena", {
		h = hdr(LM_OP_RTS, LM_HF_TAGGED | LM_HF_BULK, 70000);
		h.tag = SR_BIG_TAG;
		put_pkt(&o, 0, &h, pl, (uint16_t)iov_list(pl, 2, 70000, false, NULL));
	});
	SEED("rts-wild", {
		uint64_t rng = 1;

		h = hdr(LM_OP_RTS, LM_HF_BULK, 4000);
		put_pkt(&o, 1, &h, pl, (uint16_t)iov_list(pl, 4, 4000, true, &rng));
	});
	SEED("rts-count-lies", {
		h = hdr(LM_OP_RTS, LM_HF_BULK, 64);
		iov_list(pl, 1, 64, false, NULL);
		pl[0] = 200;
		put_pkt(&o, 0, &h, pl, 24);
	});
	SEED("write-rw", {
		h = hdr(LM_OP_WRITE, LM_HF_LAST, 64);
		h.addr = mark(SR_MARK_ADDR_RW, SR_MR_RW_LEN - 32);
		h.key = mark(SR_MARK_KEY_RW, 0);
		put_pkt(&o, 0, &h, pl, 64);
	});
	SEED("write-ro", {
		h = hdr(LM_OP_WRITE, LM_HF_LAST, 8);
		h.addr = mark(SR_MARK_ADDR_RO, 0);
		h.key = mark(SR_MARK_KEY_RO, 0);
		put_pkt(&o, 0, &h, pl, 8);
	});
	SEED("write-rndv", {
		h = hdr(LM_OP_WRITE, LM_HF_RNDV, 8192);
		h.addr = mark(SR_MARK_ADDR_RW, 4096);
		h.key = mark(SR_MARK_KEY_RW, 0);
		put_pkt(&o, 0, &h, pl, (uint16_t)iov_list(pl, 1, 8192, false, NULL));
	});
	SEED("read-req", {
		h = hdr(LM_OP_READ_REQ, LM_HF_BULK, 512);
		h.addr = mark(SR_MARK_ADDR_RO, 100);
		h.key = mark(SR_MARK_KEY_RO, 0);
		put_pkt(&o, 0, &h, pl, (uint16_t)iov_list(pl, 1, 512, false, NULL));
	});
	SEED("regress-read-req-claims-own-address", {
		h = hdr(LM_OP_READ_REQ, LM_HF_BULK, 64);
		h.addr = mark(SR_MARK_ADDR_RO, 0);
		h.key = mark(SR_MARK_KEY_RO, 0);
		h.sreq = 1;
		st64(pl, 1);
		st64(pl + 8, mark(SR_MARK_ADDR_RW, (uint32_t)-64));
		st64(pl + 16, 64);
		put_pkt(&o, 2, &h, pl, 24); /* from A itself: no CMA into A */
	});
	SEED("atomic", {
		h = hdr(LM_OP_ATOMIC, LM_HF_FETCH, 1);
		h.tag = (uint64_t)FI_SUM << 8 | FI_UINT64;
		h.addr = mark(SR_MARK_ADDR_RW, 8);
		h.key = mark(SR_MARK_KEY_RW, 0);
		put_pkt(&o, 0, &h, pl, 8);
	});
	SEED("answers-to-requests", {
		for (uint8_t k = 0; k < SR_TX_KINDS; k++) {
			put8(&o, SR_TX);
			put8(&o, k);
		}
		put8(&o, SR_POLL);
		put8(&o, 0);
		h = hdr(LM_OP_CTS, 0, 100000);
		h.sreq = mark(SR_MARK_HANDLE, 4);
		h.rreq = 7;
		put_pkt(&o, 0, &h, pl, 0);
		h = hdr(LM_OP_READ_RESP, LM_HF_LAST, 4096);
		h.sreq = mark(SR_MARK_HANDLE, 3);
		h.addr = 4000;
		put_pkt(&o, 0, &h, pl, 200);
		h = hdr(LM_OP_ATOMIC_RESP, 0, 1);
		h.sreq = mark(SR_MARK_HANDLE, 2);
		put_pkt(&o, 0, &h, pl, 64);
		h = hdr(LM_OP_PUSH, 0, 50000);
		h.sreq = mark(SR_MARK_HANDLE, 1);
		h.addr = 50000;
		put_pkt(&o, 0, &h, pl, (uint16_t)iov_list(pl, 1, 50000, false, NULL));
		h = hdr(LM_OP_FIN, 0, 0);
		h.sreq = mark(SR_MARK_HANDLE, 0);
		put_pkt(&o, 0, &h, pl, 0);
		h = hdr(LM_OP_ACK, 0, 0);
		h.sreq = mark(SR_MARK_HANDLE, 5);
		put_pkt(&o, 0, &h, pl, 0);
	});
	SEED("cts-data", {
		put8(&o, SR_TX);
		put8(&o, SR_TX_SEND_RNDV);
		put8(&o, SR_POLL);
		put8(&o, 0);
		h = hdr(LM_OP_CTS, 0, 100000);
		h.sreq = mark(SR_MARK_HANDLE, 0);
		h.rreq = 1;
		h.addr = 99990;
		put_pkt(&o, 0, &h, pl, 0);
		put8(&o, SR_POLL);
		put8(&o, 3);
	});
	SEED("raw-cells", {
		put8(&o, SR_RAW);
		put32(&o, 0xffffffffu);
		put8(&o, 0);
		put8(&o, SR_RAW);
		put32(&o, 24);
		put8(&o, 24);
		put64(&o, mark(SR_MARK_PID, 3));
		put64(&o, mark(SR_MARK_TOKEN, 0));
		put64(&o, 0xff00000000ULL | 65536);
	});
	SEED("ring-words", {
		put8(&o, SR_CTRL);
		put8(&o, SR_CTRL_CELL_SEQ);
		put64(&o, 0x100);
		put8(&o, SR_CTRL);
		put8(&o, SR_CTRL_BUF_FREE);
		put64(&o, 0x1234567800000003ULL);
		put8(&o, SR_CTRL);
		put8(&o, SR_CTRL_H_HEAD);
		put64(&o, ~0ULL - 2);
		put8(&o, SR_TX);
		put8(&o, SR_TX_SEND_ACK);
		h = hdr(LM_OP_EAGER, LM_HF_ACK, 40);
		put_pkt(&o, 1, &h, pl, 40);
		put8(&o, SR_BUF);
		put8(&o, 0);
		put16(&o, 0);
		put8(&o, 4);
		put32(&o, 0xffffffffu);
	});
#undef SEED
	return ret ? -1 : 0;
}
