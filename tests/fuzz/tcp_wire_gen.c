/* tcp_wire_gen.c - inputs for the tcp wire fuzz target (tcp_wire_fuzz.c)
 * built from the wire format: the driver's generated inputs and the seed
 * corpus (README.md).  Region addresses, keys and rendezvous handles are
 * markers the target fills in (tcp_wire.h). */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tcp.h"
#include "tcp_wire.h"

#define HELLO_LEN   sizeof(struct tcp_hello)
#define FRAME_LEN   sizeof(struct tcp_frame)
#define HDR_LEN     sizeof(struct lm_rdm_hdr)
#define MAX_PAYLOAD TCP_MAX_PAYLOAD /* the link's max_payload (proto.h) */

static void st64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

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

static void put_hello(struct out *o, uint32_t version, uint32_t kind, uint64_t magic,
                      unsigned sel)
{
	struct tcp_hello h = {.magic = magic,
	                      .version = version,
	                      .kind = kind,
	                      .instance = 0x2000u + sel,
	                      .addrlen = sizeof(struct sockaddr_in)};
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)sel),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	memcpy(h.addr, &a, sizeof(a)); /* the port picks the claimed address */
	put(o, &h, sizeof(h));
}

/* A frame: len and hdr_len as given (the honest ones when ~0). */
static void put_frame(struct out *o, const struct lm_rdm_hdr *h, const void *payload,
                      size_t plen, uint32_t flen, uint16_t hdr_len)
{
	struct tcp_frame f = {.len = flen == ~0u ? (uint32_t)plen : flen,
	                      .hdr_len = hdr_len ? hdr_len : HDR_LEN};

	put(o, &f, sizeof(f));
	put(o, h, sizeof(*h));
	put(o, payload, plen);
}

static uint64_t mark(uint32_t m, uint32_t lo)
{
	return (uint64_t)m << 32 | lo;
}

static struct lm_rdm_hdr hdr(uint8_t op, uint16_t flags, uint64_t size, uint32_t len)
{
	return (struct lm_rdm_hdr){.version = LM_RDM_WIRE_VERSION,
	                           .op = op,
	                           .flags = flags,
	                           .len = len,
	                           .size = size};
}

/* An iov list of count pieces of piece bytes at base. */
static size_t iov_list(uint8_t *p, uint64_t count, uint64_t base, uint64_t piece)
{
	st64(p, count);
	for (uint64_t i = 0; i < count && i < LM_IOV_LIMIT; i++) {
		st64(p + 8 + 16 * i, base + i * piece);
		st64(p + 16 + 16 * i, piece);
	}
	return 8 + 16 * (count < LM_IOV_LIMIT ? count : LM_IOV_LIMIT);
}

static const uint64_t interesting[] = {
    0,        1,           7,          8,          16,    63,       64,    255,
    256,      4095,        4096,       65535,      65536, 65537,    70000, 100000,
    1u << 31, 0xffffffffu, 1ULL << 32, ~0ULL >> 1, ~0ULL, ~0ULL - 7};

static uint64_t pick_value(uint64_t *rng)
{
	uint64_t r = fz_rand(rng);

	switch (r % 8) {
	case 0:
		return fz_rand(rng);
	case 1:
		return fz_rand(rng) % 300;
	default:
		return interesting[(r >> 8) %
		                   (sizeof(interesting) / sizeof(interesting[0]))];
	}
}

static uint64_t pick_addr(uint64_t *rng, bool ro)
{
	static const int32_t offs[] = {0,
	                               8,
	                               64,
	                               4096,
	                               TW_MR_RW_LEN - 8,
	                               TW_MR_RO_LEN - 8,
	                               TW_MR_RW_LEN,
	                               TW_MR_RO_LEN,
	                               -8,
	                               -1,
	                               1,
	                               3};
	uint64_t r = fz_rand(rng);

	if (r % 10 == 0)
		return pick_value(rng);
	return mark(ro ? TW_MARK_ADDR_RO : TW_MARK_ADDR_RW,
	            (uint32_t)(r % 3 ? offs[(r >> 8) % (sizeof(offs) / sizeof(offs[0]))]
	                             : (int32_t)((r >> 8) % 70000)));
}

/* Two peers and one rendezvous: the first sends an RTS the large tagged
 * receive takes and part of a DATA piece (which A reads straight into the
 * receive buffer), the second peer then other bytes of DATA with the same
 * handle in pieces of opiece, then the first the rest of its piece.  A
 * rendezvous must take DATA from its own peer only. */
static void gen_two_peers(struct out *o, uint8_t *payload, uint64_t size, size_t piece,
                          size_t first, size_t other, size_t opiece)
{
	struct lm_rdm_hdr h = hdr(LM_OP_RTS, LM_HF_TAGGED, size, 0);
	struct tcp_frame f = {.len = (uint32_t)piece, .hdr_len = HDR_LEN};
	uint64_t pause = mark(TW_MARK_PAUSE, 0), split = mark(TW_MARK_SPLIT, 0);

	h.tag = TW_BIG_TAG;
	h.sreq = 0x77;
	h.len = (uint32_t)iov_list(payload, 1, 0x7f0000005000ULL, size);
	put_frame(o, &h, payload, h.len, ~0u, 0);
	h = hdr(LM_OP_DATA, 0, 0, (uint32_t)piece);
	h.rreq = mark(TW_MARK_RNDV, 0);
	memset(payload, 'P', piece);
	put(o, &f, sizeof(f));
	put(o, &h, sizeof(h));
	put(o, payload, first);
	put(o, &pause, sizeof(pause));
	put(o, payload + first, piece - first);
	put(o, &split, sizeof(split));
	put_hello(o, TCP_PROTO_VERSION, TCP_HELLO_RDM, TCP_MAGIC, 0);
	memset(payload, 'Q', opiece);
	for (size_t at = 0; at < other; at += opiece) {
		h.addr = at;
		h.len = (uint32_t)(other - at < opiece ? other - at : opiece);
		put_frame(o, &h, payload, h.len, ~0u, 0);
	}
}

/* Rendezvous the way a peer runs them: RTS (or an RMA write by RTS) for
 * large sizes, then the DATA pieces into the slots the receiver took, in
 * order or not, some wrong; large pieces are read straight into the
 * receive buffer when they arrive in parts.  A quarter: two peers. */
static size_t gen_rndv(uint64_t *rng, struct out *o, uint8_t *payload)
{
	static const uint64_t sizes[] = {16384, 20000, 40000, 65536, 70000, 100000};
	unsigned k = 1 + (unsigned)(fz_rand(rng) % 3);

	if (fz_rand(rng) % 4 == 0) {
		uint64_t size = 16385 + fz_rand(rng) % 50000;
		size_t piece = 16384 + (size_t)(fz_rand(rng) % (size - 16384));
		size_t other =
		    fz_rand(rng) % 4 ? (size_t)size : (size_t)(fz_rand(rng) % size);

		gen_two_peers(o, payload, size, piece, (size_t)(fz_rand(rng) % piece),
		              other, 1 + (size_t)(fz_rand(rng) % 30000));
		return o->len;
	}

	for (unsigned j = 0; j < k; j++) {
		uint64_t q = fz_rand(rng);
		uint64_t size = sizes[q % (sizeof(sizes) / sizeof(sizes[0]))];
		struct lm_rdm_hdr h =
		    hdr(LM_OP_RTS, q & 0x100 ? LM_HF_TAGGED : 0, size, 0);

		if (q & 0x200) { /* an RMA write, into the region or past it */
			h.op = LM_OP_WRITE;
			h.flags = LM_HF_RNDV | (q & 0x400 ? LM_HF_CQ_DATA : 0);
			h.size = size = size % (TW_MR_RW_LEN + 1);
			h.addr = mark(TW_MARK_ADDR_RW,
			              q & 0x800 ? 0 : (uint32_t)(q >> 32) % 8192);
			h.key = mark(TW_MARK_KEY_RW, 0);
		}
		h.sreq = q >> 16;
		h.len = (uint32_t)iov_list(payload, 1 + (q >> 12) % 2, 0x7f0000000000ULL,
		                           (size + 1) / (1 + (q >> 12) % 2));
		put_frame(o, &h, payload, h.len, ~0u, 0);
		for (uint64_t at = 0; at < size && o->len < o->cap;) {
			uint64_t r = fz_rand(rng);
			size_t piece =
			    r % 4 ? MAX_PAYLOAD : 1 + (size_t)(fz_rand(rng) % 30000);
			struct lm_rdm_hdr d = hdr(LM_OP_DATA, 0, 0, 0);

			if (piece > size - at)
				piece = (size_t)(size - at);
			d.rreq = mark(TW_MARK_RNDV, r % 8 ? j : (uint32_t)(r >> 8) % 8);
			d.addr = r % 16 == 1 ? at + 8 : at; /* some overlap or overrun */
			d.len = (uint32_t)piece;
			memset(payload, (int)(0x41 + j), piece);
			put_frame(o, &d, payload, piece, ~0u, 0);
			at += piece;
		}
	}
	return o->len;
}

size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	struct out o = {buf, 0, cap};
	uint64_t r = fz_rand(rng);
	unsigned nframes = 1 + (unsigned)(fz_rand(rng) % 8);
	static uint8_t payload[MAX_PAYLOAD + 16];

	if (r % 6 == 5) {
		put_hello(&o, TCP_PROTO_VERSION, TCP_HELLO_RDM, TCP_MAGIC,
		          (unsigned)(r >> 12));
		return gen_rndv(rng, &o, payload);
	}
	if (r % 16 == 0)
		put_hello(&o, (uint32_t)pick_value(rng), (uint32_t)(r >> 8) % 5,
		          r & 0x100 ? TCP_MAGIC : fz_rand(rng), (unsigned)(r >> 12));
	else if (r % 16 != 1) /* 1: no handshake (the target adds one or not) */
		put_hello(&o, TCP_PROTO_VERSION, TCP_HELLO_RDM, TCP_MAGIC,
		          (unsigned)(r >> 12));
	for (unsigned i = 0; i < nframes && o.len < o.cap; i++) {
		uint64_t q = fz_rand(rng);
		uint8_t op =
		    q % 32 == 0 ? (uint8_t)(q >> 8) : (uint8_t)(1 + (q >> 8) % 14);
		bool ro = (q >> 16) % 4 == 0;
		struct lm_rdm_hdr h = hdr(op, (uint16_t)(fz_rand(rng) & 0x1ff), 0, 0);
		size_t plen = 0;
		uint32_t flen = ~0u;
		uint16_t hl = 0;

		h.tag = pick_value(rng);
		h.data = pick_value(rng);
		h.sreq = pick_value(rng);
		h.rreq =
		    q % 3 ? mark(TW_MARK_RNDV, (uint32_t)(q >> 24) % 4) : pick_value(rng);
		h.addr = pick_addr(rng, ro);
		h.key = q % 7 ? mark(ro ? TW_MARK_KEY_RO : TW_MARK_KEY_RW,
		                     q % 5 ? 0 : (uint32_t)(q >> 32))
		              : pick_value(rng);
		h.size = q % 4 ? fz_rand(rng) % 512 : pick_value(rng);
		switch (op) {
		case LM_OP_RTS:
		case LM_OP_READ_REQ:
		case LM_OP_PUSH:
			plen =
			    iov_list(payload, q % 9 ? 1 + (q >> 40) % 4 : pick_value(rng),
			             pick_value(rng), h.size);
			break;
		case LM_OP_WRITE:
			if (h.flags & LM_HF_RNDV)
				plen = iov_list(payload, 1 + (q >> 40) % 4,
				                pick_value(rng), h.size);
			else
				plen = (size_t)(h.size % (MAX_PAYLOAD + 1));
			break;
		case LM_OP_ATOMIC: {
			unsigned aop = (unsigned)(q >> 40) % (FI_ATOMIC_OP_LAST + 1);
			unsigned dt = (unsigned)(q >> 48) % (FI_DATATYPE_LAST + 3);
			size_t sz = lm_datatype_size((enum fi_datatype)dt);

			h.tag = q % 13 ? (uint64_t)aop << 8 | dt : pick_value(rng);
			h.size %= 64;
			h.flags &= (uint16_t) ~(LM_HF_FETCH | LM_HF_COMPARE);
			h.flags |= (uint16_t)(aop >= FI_CSWAP ? LM_HF_COMPARE
			                      : q & 1         ? LM_HF_FETCH
			                                      : 0);
			plen = (size_t)h.size * (sz ? sz : 1) *
			       (aop == FI_ATOMIC_READ ? 0
			        : aop >= FI_CSWAP     ? 2
			                              : 1);
			break;
		}
		case LM_OP_DATA:
		case LM_OP_READ_RESP:
		case LM_OP_ATOMIC_RESP:
			h.addr = fz_rand(rng) % 3 ? fz_rand(rng) % 4096 : pick_value(rng);
			plen = fz_rand(rng) % 600;
			break;
		default:
			plen = op == LM_OP_EAGER ? (size_t)(h.size % (MAX_PAYLOAD + 1))
			                         : fz_rand(rng) % 64;
			break;
		}
		if (fz_rand(rng) % 16 == 0)
			plen = (size_t)(pick_value(rng) % (MAX_PAYLOAD + 1));
		if (plen > o.cap - o.len)
			plen = o.cap - o.len;
		if (op != LM_OP_RTS && op != LM_OP_READ_REQ && op != LM_OP_PUSH &&
		    !(op == LM_OP_WRITE && (h.flags & LM_HF_RNDV)))
			for (size_t b = 0; b < plen; b++)
				payload[b] = (uint8_t)(q >> (b % 8 * 8));
		h.len = (uint32_t)plen;
		r = fz_rand(rng);
		if (r % 32 == 0)
			h.len = (uint32_t)pick_value(rng);
		if (r % 32 == 1)
			h.version = (uint8_t)(r >> 8);
		if (r % 64 == 2)
			flen = (uint32_t)pick_value(rng);
		if (r % 64 == 3)
			hl = (uint16_t)pick_value(rng);
		if (r % 64 == 4) {
			/* A frame cut short: the connection ends inside it. */
			size_t cut = (size_t)(r >> 8) % (FRAME_LEN + HDR_LEN + plen);

			put_frame(&o, &h, payload, plen, ~0u, 0);
			o.len -= cut < o.len ? cut : o.len;
			break;
		}
		put_frame(&o, &h, payload, plen, flen, hl);
	}
	return o.len;
}

struct seed {
	const char *name;
	size_t len;
	uint8_t data[34 * 1024];
};

static void seed_frame(struct seed *s, uint8_t op, uint16_t flags, uint64_t size,
                       uint64_t tag, const void *payload, size_t plen)
{
	struct out o = {s->data, s->len, sizeof(s->data)};
	struct lm_rdm_hdr h = hdr(op, flags, size, (uint32_t)plen);

	h.tag = tag;
	h.sreq = 0x100000001ULL;
	put_frame(&o, &h, payload, plen, ~0u, 0);
	s->len = o.len;
}

int fz_write_seeds(const char *dir)
{
	static struct seed seeds[24];
	static uint8_t big[MAX_PAYLOAD];
	uint8_t p[512];
	size_t n = 0, k;
	struct out o;
	struct lm_rdm_hdr h;

#define SEED(nm)                                                                         \
	(seeds[n].name = nm, o = (struct out){seeds[n].data, 0, sizeof(seeds[n].data)},  \
	 put_hello(&o, TCP_PROTO_VERSION, TCP_HELLO_RDM, TCP_MAGIC, 0),                  \
	 seeds[n].len = o.len, &seeds[n++])

	memset(p, 0x61, sizeof(p));
	SEED("hello");
	seed_frame(SEED("hello-eager"), LM_OP_EAGER, 0, 32, 0, p, 32);
	seed_frame(SEED("hello-eager-tagged-ack"), LM_OP_EAGER,
	           LM_HF_TAGGED | LM_HF_ACK | LM_HF_CQ_DATA, 100, 0x1234, p, 100);
	seed_frame(SEED("regress-hello-claims-own-address"), LM_OP_EAGER, 0, 8, 0, p, 8);
	seeds[n - 1].data[TW_SELECTOR] = 3;
	{
		/* RTS of 200 bytes, then the two DATA halves into the slot
		 * the receiver will have taken. */
		struct seed *s = SEED("hello-rts-data");

		k = iov_list(p, 1, 0x7f0000001000ULL, 200);
		seed_frame(s, LM_OP_RTS, LM_HF_TAGGED, 200, 7, p, k);
		memset(p, 0x62, sizeof(p));
		o = (struct out){s->data, s->len, sizeof(s->data)};
		h = hdr(LM_OP_DATA, 0, 0, 120);
		h.rreq = mark(TW_MARK_RNDV, 0);
		put_frame(&o, &h, p, 120, ~0u, 0);
		h = hdr(LM_OP_DATA, 0, 0, 80);
		h.rreq = mark(TW_MARK_RNDV, 0);
		h.addr = 120;
		put_frame(&o, &h, p, 80, ~0u, 0);
		s->len = o.len;
	}
	k = iov_list(p, 2, 0x7f0000002000ULL, 50000);
	seed_frame(SEED("hello-rts"), LM_OP_RTS, 0, 100000, 0, p, k);
	{
		struct seed *s = SEED("hello-write");

		memset(p, 0x63, sizeof(p));
		o = (struct out){s->data, s->len, sizeof(s->data)};
		h = hdr(LM_OP_WRITE, LM_HF_LAST | LM_HF_CQ_DATA, 48, 48);
		h.addr = mark(TW_MARK_ADDR_RW, 64);
		h.key = mark(TW_MARK_KEY_RW, 0);
		h.data = 0xdada;
		put_frame(&o, &h, p, 48, ~0u, 0);
		/* The same past the end, and into the read-only region. */
		h.addr = mark(TW_MARK_ADDR_RW, TW_MR_RW_LEN - 40);
		put_frame(&o, &h, p, 48, ~0u, 0);
		h.addr = mark(TW_MARK_ADDR_RO, 0);
		h.key = mark(TW_MARK_KEY_RO, 0);
		put_frame(&o, &h, p, 48, ~0u, 0);
		s->len = o.len;
	}
	{
		struct seed *s = SEED("hello-write-rndv");

		o = (struct out){s->data, s->len, sizeof(s->data)};
		k = iov_list(p, 1, 0x7f0000003000ULL, 300);
		h = hdr(LM_OP_WRITE, LM_HF_RNDV, 300, (uint32_t)k);
		h.addr = mark(TW_MARK_ADDR_RW, 1000);
		h.key = mark(TW_MARK_KEY_RW, 0);
		put_frame(&o, &h, p, k, ~0u, 0);
		memset(p, 0x64, 300);
		h = hdr(LM_OP_DATA, 0, 0, 300);
		h.rreq = mark(TW_MARK_RNDV, 0);
		put_frame(&o, &h, p, 300, ~0u, 0);
		s->len = o.len;
	}
	{
		struct seed *s = SEED("hello-read");

		o = (struct out){s->data, s->len, sizeof(s->data)};
		k = iov_list(p, 1, 0x7f0000004000ULL, 256);
		h = hdr(LM_OP_READ_REQ, 0, 256, (uint32_t)k);
		h.addr = mark(TW_MARK_ADDR_RO, 0);
		h.key = mark(TW_MARK_KEY_RO, 0);
		put_frame(&o, &h, p, k, ~0u, 0);
		s->len = o.len;
	}
	{
		struct seed *s = SEED("hello-atomic");
		uint64_t v[4] = {5, 6, 7, 8};

		o = (struct out){s->data, s->len, sizeof(s->data)};
		h = hdr(LM_OP_ATOMIC, LM_HF_FETCH, 2, 16);
		h.tag = (uint64_t)FI_SUM << 8 | FI_UINT64;
		h.addr = mark(TW_MARK_ADDR_RW, 256);
		h.key = mark(TW_MARK_KEY_RW, 0);
		put_frame(&o, &h, v, 16, ~0u, 0);
		h = hdr(LM_OP_ATOMIC, LM_HF_COMPARE, 2, 32);
		h.tag = (uint64_t)FI_CSWAP << 8 | FI_UINT64;
		h.addr = mark(TW_MARK_ADDR_RW, 256);
		h.key = mark(TW_MARK_KEY_RW, 0);
		put_frame(&o, &h, v, 32, ~0u, 0);
		s->len = o.len;
	}
	{
		/* A frame whose payload never comes. */
		struct seed *s = SEED("hello-truncated-frame");

		seed_frame(s, LM_OP_EAGER, 0, 100, 0, p, 100);
		s->len -= 90;
	}
	{
		struct seed *s = SEED("hello-oversized-len");

		o = (struct out){s->data, s->len, sizeof(s->data)};
		h = hdr(LM_OP_EAGER, 0, 16, 16);
		put_frame(&o, &h, p, 16, MAX_PAYLOAD + 1, 0);
		s->len = o.len;
	}
	{
		struct seed *s = SEED("hello-wrong-hdr-len");

		o = (struct out){s->data, s->len, sizeof(s->data)};
		h = hdr(LM_OP_EAGER, 0, 16, 16);
		put_frame(&o, &h, p, 16, ~0u, HDR_LEN - 1);
		s->len = o.len;
	}
	seed_frame(SEED("hello-engine-version"), LM_OP_EAGER, 0, 8, 0, p, 8);
	seeds[n - 1].data[HELLO_LEN + FRAME_LEN] = LM_RDM_WIRE_VERSION + 1;
	/* First bytes even: the target adds no handshake of its own. */
	SEED("wrong-magic");
	seeds[n - 1].data[1] ^= 0xff;
	SEED("wrong-version");
	seeds[n - 1].data[offsetof(struct tcp_hello, version)] = TCP_PROTO_VERSION + 1;
	SEED("wrong-kind-ack");
	seeds[n - 1].data[offsetof(struct tcp_hello, kind)] = TCP_HELLO_ACK;
	{
		struct seed *s = SEED("regress-rndv-data-from-other-peer");

		o = (struct out){s->data, s->len, sizeof(s->data)};
		gen_two_peers(&o, big, 16385, 16384, 8000, 16385, 8193);
		s->len = o.len;
	}
#undef SEED

	for (size_t i = 0; i < n; i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].data, 1, seeds[i].len, f) != seeds[i].len) {
			perror(path);
			if (f)
				fclose(f);
			return -1;
		}
		if (fclose(f))
			return -1;
	}
	return 0;
}
