/* tagmatch.c - tests of the RDM engine's receive matching (util/tagmatch):
 * ordering, tag/ignore, directed receives, peek/claim/discard, multi-recv,
 * cancel, truncation, cost with many sources, and a differential run
 * against a one-list reference model.  Completions go to a CQ on the
 * utiltest domain and are read back with fi_cq_read / fi_cq_readerr. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testdom.h"

#define SRC_A 1
#define SRC_B 2
#define SRC_C 3

/* Nothing queued: every per-source record is gone but the one kept for
 * reuse (the last emptied), and the pool holds no other. */
#define CHECK_SRCS_IDLE(m)                                                     \
	do {                                                                   \
		CHECK_INT((m).srcs.count, (m).kept ? 1 : 0);                   \
		CHECK_INT((m).src_pool.in_use, (m).srcs.count);                \
	} while (0)

static struct lm_rx_entry *rx_new(fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	struct lm_rx_entry *rx = calloc(1, sizeof(*rx));

	rx->src = src;
	rx->tag = tag;
	rx->ignore = ignore;
	rx->context = ctx;
	return rx;
}

static struct lm_unexp_entry *ux_new(fi_addr_t src, uint64_t tag, size_t len)
{
	struct lm_unexp_entry *u = calloc(1, sizeof(*u));

	u->src = src;
	u->tag = tag;
	u->len = len;
	u->flags = FI_TAGGED;
	return u;
}

static void test_posted_first(void)
{
	struct lm_match m;
	struct lm_rx_entry *rx = rx_new(SRC_A, 5, 0, (void *)0x10);

	CHECK_INT(lm_match_init(&m, true, true), 0);
	CHECK(lm_match_post(&m, rx) == NULL);
	CHECK_INT(m.posted_count, 1);
	CHECK_HEX(rx->flags, FI_TAGGED);
	CHECK(lm_match_arrival(&m, SRC_A, 6) == NULL);
	CHECK(lm_match_arrival(&m, SRC_B, 5) == NULL);
	CHECK(lm_match_arrival(&m, SRC_A, 5) == rx);
	CHECK_INT(m.posted_count, 0);
	CHECK(lm_match_arrival(&m, SRC_A, 5) == NULL);
	/* The per-source record stays, empty, for the next receive. */
	CHECK_INT(m.srcs.count, 1);
	CHECK(m.kept != NULL);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	free(rx);

	CHECK_INT(lm_match_init(NULL, true, true), -FI_EINVAL);
}

/* A directed receive at a time from one peer, then from another (a
 * ping-pong, an MPI receive loop): the record emptied last is kept and
 * found again, so no message allocates one; memory stays at one record
 * beyond what is queued. */
static void test_kept_record(void)
{
	struct lm_match m;
	struct lm_rx_entry rx[2];

	memset(rx, 0, sizeof(rx));

	CHECK_INT(lm_match_init(&m, true, true), 0);
	for (int i = 0; i < 100; i++) {
		fi_addr_t src = i < 50 ? SRC_A : SRC_B;
		struct lm_match_src *before = m.kept;

		rx[i % 2].src = src;
		rx[i % 2].tag = 1;
		CHECK(lm_match_post(&m, &rx[i % 2]) == NULL);
		CHECK(m.srcs.count <= 2);
		CHECK(lm_match_arrival(&m, src, 1) == &rx[i % 2]);
		if (i > 0 && i != 50)
			CHECK(m.kept == before); /* the same record, found again */
		CHECK_INT(m.srcs.count, 1);
		CHECK_SRCS_IDLE(m);
	}
	/* An unexpected message from a third source empties into the kept
	 * slot too, and the old kept record is freed. */
	struct lm_unexp_entry *u = ux_new(SRC_C, 4, 0);

	lm_match_add_unexp(&m, u);
	CHECK_INT(m.srcs.count, 2);
	rx[0].src = SRC_C;
	rx[0].tag = 4;
	CHECK(lm_match_post(&m, &rx[0]) == u);
	CHECK_INT(m.srcs.count, 1);
	CHECK_SRCS_IDLE(m);
	free(u);
	lm_match_fini(&m);
	CHECK(m.kept == NULL);
}

/* Messages that came from a source not yet known (FI_ADDR_NOTAVAIL),
 * interleaved with later ones filed under the source: once they are
 * given its address, a directed receive takes all of them in arrival
 * order, and the unknown source's record is gone. */
static void test_set_src(void)
{
	struct lm_match m;
	struct lm_unexp_entry *u[4];
	struct lm_rx_entry rx;

	CHECK_INT(lm_match_init(&m, true, true), 0);
	for (int i = 0; i < 4; i++) {
		u[i] = ux_new(i % 2 ? SRC_A : FI_ADDR_NOTAVAIL, 7, 0);
		lm_match_add_unexp(&m, u[i]);
	}
	CHECK_INT(m.srcs.count, 2);
	lm_match_set_src(&m, u[2], SRC_A); /* out of order, on purpose */
	lm_match_set_src(&m, u[0], SRC_A);
	CHECK_INT(m.srcs.count, 2); /* NOTAVAIL's record kept, empty */
	for (int i = 0; i < 4; i++) {
		memset(&rx, 0, sizeof(rx));
		rx.src = SRC_A;
		rx.tag = 7;
		CHECK(lm_match_post(&m, &rx) == u[i]);
		CHECK_INT(u[i]->src, SRC_A);
		free(u[i]);
	}
	CHECK_INT(m.unexp_count, 0);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
}

static void test_unexp_first(void)
{
	struct lm_match m;
	struct lm_unexp_entry *u1 = ux_new(SRC_A, 5, 1), *u2 = ux_new(SRC_B, 5, 2),
	                      *u3 = ux_new(SRC_A, 5, 3);
	struct lm_rx_entry *r1 = rx_new(SRC_A, 5, 0, NULL),
	                   *r2 = rx_new(SRC_A, 5, 0, NULL),
	                   *r3 = rx_new(FI_ADDR_UNSPEC, 5, 0, NULL),
	                   *r4 = rx_new(FI_ADDR_UNSPEC, 5, 0, NULL);

	lm_match_init(&m, true, true);
	lm_match_add_unexp(&m, u1);
	lm_match_add_unexp(&m, u2);
	lm_match_add_unexp(&m, u3);
	CHECK_INT(m.unexp_count, 3);
	CHECK(lm_match_post(&m, r1) == u1);
	CHECK(lm_match_post(&m, r2) == u3);
	CHECK(lm_match_post(&m, r3) == u2);
	CHECK_INT(m.unexp_count, 0);
	CHECK_INT(m.posted_count, 0);
	CHECK(lm_match_post(&m, r4) == NULL);
	CHECK_INT(m.posted_count, 1);
	CHECK(lm_match_arrival(&m, SRC_C, 5) == r4);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	free(u1), free(u2), free(u3), free(r1), free(r2), free(r3), free(r4);
}

static void test_tags(void)
{
	struct lm_match m;
	struct lm_rx_entry *rx = rx_new(FI_ADDR_UNSPEC, 0x1200, 0xff, NULL);
	struct lm_rx_entry *any = rx_new(FI_ADDR_UNSPEC, 0xdead, ~0ULL, NULL);
	struct lm_unexp_entry *u = ux_new(SRC_A, 0x12ab, 0);

	CHECK(lm_tag_match(0x1200, 0xff, 0x12ab));
	CHECK(!lm_tag_match(0x1200, 0xff, 0x13ab));
	CHECK(lm_tag_match(0x1200, 0, 0x1200));
	CHECK(!lm_tag_match(0x1200, 0, 0x1201));
	CHECK(lm_tag_match(1ULL << 63, 0, 1ULL << 63));
	CHECK(!lm_tag_match(1ULL << 63, 0, 0));
	CHECK(lm_tag_match(5, ~0ULL, 12345));

	lm_match_init(&m, true, true);
	lm_match_post(&m, rx);
	CHECK(lm_match_arrival(&m, SRC_A, 0x13ab) == NULL);
	CHECK(lm_match_arrival(&m, SRC_A, 0x12ab) == rx);
	lm_match_post(&m, any);
	CHECK(lm_match_arrival(&m, SRC_B, 0x777) == any);

	/* Peek with ignore bits; the message stays queued. */
	lm_match_add_unexp(&m, u);
	CHECK(lm_match_peek(&m, FI_ADDR_UNSPEC, 0x1300, 0xff) == NULL);
	CHECK(lm_match_peek(&m, FI_ADDR_UNSPEC, 0x1200, 0xff) == u);
	CHECK(lm_match_peek(&m, SRC_A, 0x1200, 0xff) == u);
	CHECK(lm_match_peek(&m, SRC_B, 0x1200, 0xff) == NULL);
	CHECK(lm_match_peek(&m, SRC_A, 0x12ab, 0) == u);
	CHECK_INT(m.unexp_count, 1);
	rx->tag = 0x1300;
	CHECK(lm_match_post(&m, rx) == NULL);
	CHECK(lm_match_cancel(&m, NULL) == rx);
	rx->tag = 0x12ff;
	rx->ignore = 0xff;
	CHECK(lm_match_post(&m, rx) == u);
	lm_match_fini(&m);

	/* fi_msg receives: tags are not compared at all. */
	lm_match_init(&m, false, true);
	rx->flags = 0;
	rx->tag = 1;
	rx->ignore = 0;
	lm_match_post(&m, rx);
	CHECK_HEX(rx->flags, FI_MSG);
	CHECK(lm_match_arrival(&m, SRC_A, 99) == rx);
	lm_match_fini(&m);
	free(rx), free(any), free(u);
}

/* Receives described as "A"/"B"/"*" with tag; arrivals as src:tag; the
 * expected answer is the index of the receive posted. */
static void run_order(const char *recvs, const fi_addr_t *src, const uint64_t *tags,
                      const int *want, int n_arr)
{
	struct lm_match m;
	struct lm_rx_entry *rx[16];
	int n = (int)strlen(recvs) / 2;

	lm_match_init(&m, true, true);
	for (int i = 0; i < n; i++) {
		char c = recvs[2 * i];
		fi_addr_t s = c == 'A' ? SRC_A : c == 'B' ? SRC_B : FI_ADDR_UNSPEC;

		rx[i] = rx_new(s, (uint64_t)(recvs[2 * i + 1] - '0'), 0, NULL);
		CHECK(lm_match_post(&m, rx[i]) == NULL);
	}
	for (int i = 0; i < n_arr; i++) {
		struct lm_rx_entry *got = lm_match_arrival(&m, src[i], tags[i]);
		int idx = -1;

		for (int j = 0; j < n; j++)
			if (got == rx[j])
				idx = j;
		if (idx != want[i])
			fprintf(stderr, "order %s: arrival %d\n", recvs, i);
		CHECK_INT(idx, want[i]);
	}
	while (lm_match_pop_posted(&m))
		;
	CHECK_INT(m.posted_count, 0);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	for (int i = 0; i < n; i++)
		free(rx[i]);
}

static void test_directed_order(void)
{
	{ /* wildcard, directed, wildcard, directed: all from A in posting order */
		fi_addr_t s[] = {SRC_A, SRC_A, SRC_A, SRC_A, SRC_A};
		uint64_t t[] = {1, 1, 1, 1, 1};
		int w[] = {0, 1, 2, 3, -1};
		run_order("*1A1*1A1", s, t, w, 5);
	}
	{ /* directed first */
		fi_addr_t s[] = {SRC_B, SRC_A, SRC_B, SRC_A, SRC_A};
		uint64_t t[] = {1, 1, 1, 1, 1};
		int w[] = {1, 0, 3, 2, -1};
		run_order("A1*1A1*1", s, t, w, 5);
	}
	{ /* tags decide which is eligible; earliest eligible wins */
		fi_addr_t s[] = {SRC_A, SRC_A, SRC_A, SRC_B, SRC_B};
		uint64_t t[] = {1, 1, 2, 2, 1};
		int w[] = {1, 2, 0, -1, 3};
		run_order("A2*1A1*1", s, t, w, 5);
	}
	{ /* several directed before one wildcard, another source between */
		fi_addr_t s[] = {SRC_B, SRC_A, SRC_A, SRC_A, SRC_B, SRC_A};
		uint64_t t[] = {3, 3, 3, 3, 3, 3};
		int w[] = {2, 0, 1, 3, 4, -1};
		run_order("A3A3B3*3*3", s, t, w, 6);
	}
	{ /* wildcards all before directed */
		fi_addr_t s[] = {SRC_A, SRC_B, SRC_A, SRC_A};
		uint64_t t[] = {4, 4, 4, 4};
		int w[] = {0, 1, 2, -1};
		run_order("*4*4A4", s, t, w, 4);
	}

	/* Unexpected side: arrival order across sources. */
	struct lm_match m;
	struct lm_unexp_entry *u[4] = {ux_new(SRC_A, 1, 0), ux_new(SRC_B, 1, 0),
	                               ux_new(SRC_A, 1, 0), ux_new(SRC_B, 2, 0)};
	struct lm_rx_entry *r = rx_new(FI_ADDR_UNSPEC, 1, 0, NULL);

	lm_match_init(&m, true, true);
	for (int i = 0; i < 4; i++)
		lm_match_add_unexp(&m, u[i]);
	r->src = SRC_B;
	r->tag = 2;
	CHECK(lm_match_post(&m, r) == u[3]);
	r->src = FI_ADDR_UNSPEC;
	r->tag = 1;
	CHECK(lm_match_post(&m, r) == u[0]);
	r->src = SRC_A;
	CHECK(lm_match_post(&m, r) == u[2]);
	r->src = FI_ADDR_UNSPEC;
	CHECK(lm_match_post(&m, r) == u[1]);
	CHECK_INT(m.unexp_count, 0);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	for (int i = 0; i < 4; i++)
		free(u[i]);
	free(r);
}

static void test_directed_disabled(void)
{
	struct lm_match m;
	struct lm_rx_entry *r1 = rx_new(SRC_A, 1, 0, NULL),
	                   *r2 = rx_new(SRC_B, 1, 0, NULL);
	struct lm_unexp_entry *u = ux_new(SRC_C, 1, 0);

	lm_match_init(&m, true, false);
	lm_match_post(&m, r1);
	lm_match_post(&m, r2);
	CHECK_SRCS_IDLE(m);
	CHECK(lm_match_arrival(&m, SRC_C, 1) == r1);
	CHECK(lm_match_arrival(&m, SRC_A, 1) == r2);
	lm_match_add_unexp(&m, u);
	CHECK_SRCS_IDLE(m);
	CHECK(lm_match_peek(&m, SRC_B, 1, 0) == u);
	CHECK(lm_match_post(&m, r1) == u);
	lm_match_fini(&m);

	/* Undirected and tagged, the first receive not taking the message:
	 * the search goes on in posting order, each entry probed once. */
	struct lm_rx_entry *r3 = rx_new(FI_ADDR_UNSPEC, 2, 0, NULL);
	uint64_t before;

	lm_match_init(&m, true, false);
	r1->tag = 1, r2->tag = 2;
	CHECK(lm_match_post(&m, r1) == NULL);
	CHECK(lm_match_post(&m, r2) == NULL);
	CHECK(lm_match_post(&m, r3) == NULL);
	before = m.probes;
	CHECK(lm_match_arrival(&m, SRC_A, 2) == r2);
	CHECK_INT(m.probes - before, 2);
	CHECK_INT(m.posted_count, 2);
	CHECK(lm_match_arrival(&m, SRC_A, 1) == r1);
	CHECK_INT(m.probes - before, 3);
	CHECK(lm_match_arrival(&m, SRC_A, 1) == NULL);
	CHECK(lm_match_arrival(&m, SRC_A, 2) == r3);
	CHECK_INT(m.posted_count, 0);
	lm_match_fini(&m);
	free(r1), free(r2), free(r3), free(u);
}

static void test_peek_claim_discard(void)
{
	struct lm_match m;
	struct lm_unexp_entry *u1 = ux_new(SRC_A, 7, 0), *u2 = ux_new(SRC_A, 7, 0),
	                      *u3 = ux_new(SRC_B, 8, 0);
	struct lm_rx_entry *r = rx_new(SRC_A, 7, 0, NULL);
	int ctx1, ctx2;

	lm_match_init(&m, true, true);
	CHECK(lm_match_peek(&m, FI_ADDR_UNSPEC, 7, 0) == NULL);
	lm_match_add_unexp(&m, u1);
	lm_match_add_unexp(&m, u2);
	lm_match_add_unexp(&m, u3);
	CHECK(lm_match_peek(&m, SRC_A, 7, 0) == u1);
	CHECK(lm_match_peek(&m, SRC_A, 7, 0) == u1); /* peek leaves it */
	CHECK_INT(m.unexp_count, 3);
	lm_match_claim(&m, u1, &ctx1);
	CHECK(u1->claimed);
	CHECK(u1->claim_context == &ctx1);
	CHECK_INT(m.unexp_count, 3);
	CHECK(lm_match_peek(&m, SRC_A, 7, 0) == u2);
	CHECK(lm_match_peek(&m, FI_ADDR_UNSPEC, 7, 0) == u2);
	/* A plain receive does not see the claimed message either. */
	CHECK(lm_match_post(&m, r) == u2);
	CHECK(lm_match_peek(&m, SRC_A, 7, 0) == NULL);
	CHECK(lm_match_post(&m, r) == NULL);
	CHECK(lm_match_cancel(&m, NULL) == r);
	CHECK(lm_match_take_claimed(&m, &ctx2) == NULL);
	CHECK(lm_match_take_claimed(&m, &ctx1) == u1);
	CHECK(lm_match_take_claimed(&m, &ctx1) == NULL);
	CHECK_INT(m.unexp_count, 1);

	/* FI_PEEK|FI_DISCARD */
	CHECK(lm_match_peek(&m, SRC_B, 8, 0) == u3);
	lm_match_remove_unexp(&m, u3);
	CHECK(lm_match_peek(&m, SRC_B, 8, 0) == NULL);
	CHECK(lm_match_peek(&m, FI_ADDR_UNSPEC, 0, ~0ULL) == NULL);
	CHECK_INT(m.unexp_count, 0);

	/* FI_CLAIM|FI_DISCARD of a claimed message. */
	lm_match_add_unexp(&m, u1);
	CHECK(!u1->claimed);
	lm_match_claim(&m, u1, &ctx2);
	lm_match_claim(&m, u1, &ctx1); /* claiming twice changes nothing */
	CHECK(u1->claim_context == &ctx2);
	lm_match_remove_unexp(&m, u1);
	CHECK(lm_match_take_claimed(&m, &ctx2) == NULL);
	CHECK_INT(m.unexp_count, 0);

	/* Two claims with distinct contexts, taken out of order; draining
	 * also returns claimed messages. */
	lm_match_add_unexp(&m, u1);
	lm_match_add_unexp(&m, u2);
	lm_match_add_unexp(&m, u3);
	lm_match_claim(&m, u1, &ctx1);
	lm_match_claim(&m, u2, &ctx2);
	CHECK(lm_match_take_claimed(&m, &ctx2) == u2);
	CHECK(lm_match_pop_unexp(&m) == u3);
	CHECK(lm_match_pop_unexp(&m) == u1);
	CHECK(lm_match_pop_unexp(&m) == NULL);
	CHECK_INT(m.unexp_count, 0);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	free(u1), free(u2), free(u3), free(r);
}

static void test_cancel(void)
{
	struct lm_match m;
	int c1, c2, c3;
	struct lm_rx_entry *r1 = rx_new(SRC_A, 1, 0, &c1),
	                   *r2 = rx_new(FI_ADDR_UNSPEC, 1, 0, &c2),
	                   *r3 = rx_new(SRC_B, 1, 0, &c1), *r4 = rx_new(SRC_A, 1, 0, &c3);

	lm_match_init(&m, true, true);
	CHECK(lm_match_cancel(&m, &c1) == NULL);
	lm_match_post(&m, r1);
	lm_match_post(&m, r2);
	lm_match_post(&m, r3);
	lm_match_post(&m, r4);
	CHECK(lm_match_cancel(&m, (void *)0x1) == NULL);
	CHECK_INT(m.posted_count, 4);
	/* Two receives with &c1: the earliest goes first. */
	CHECK(lm_match_cancel(&m, &c1) == r1);
	CHECK(lm_match_cancel(&m, &c1) == r3);
	CHECK(lm_match_cancel(&m, &c1) == NULL);
	CHECK(lm_match_cancel(&m, &c2) == r2);
	CHECK_INT(m.posted_count, 1);
	/* A cancelled receive no longer matches. */
	CHECK(lm_match_arrival(&m, SRC_B, 1) == NULL);
	CHECK(lm_match_arrival(&m, SRC_A, 1) == r4);
	CHECK(lm_match_cancel(&m, &c3) == NULL);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	free(r1), free(r2), free(r3), free(r4);
}

static void test_copy_to_iov(void)
{
	char a[4], b[3], c[5], src[16];
	struct iovec iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};

	for (int i = 0; i < 16; i++)
		src[i] = (char)('a' + i);
	memset(a, '.', 4), memset(b, '.', 3), memset(c, '.', 5);
	CHECK_INT(lm_copy_to_iov(iov, 3, 0, src, 16), 12);
	CHECK(!memcmp(a, "abcd", 4) && !memcmp(b, "efg", 3) && !memcmp(c, "hijkl", 5));
	memset(a, '.', 4), memset(b, '.', 3), memset(c, '.', 5);
	CHECK_INT(lm_copy_to_iov(iov, 3, 3, src, 5), 5);
	CHECK(!memcmp(a, "...a", 4) && !memcmp(b, "bcd", 3) && !memcmp(c, "e....", 5));
	CHECK_INT(lm_copy_to_iov(iov, 3, 7, src, 2), 2);
	CHECK(!memcmp(c, "ab...", 5));
	CHECK_INT(lm_copy_to_iov(iov, 3, 12, src, 2), 0);
	CHECK_INT(lm_copy_to_iov(iov, 3, 100, src, 2), 0);
	CHECK_INT(lm_copy_to_iov(iov, 0, 0, src, 2), 0);
	CHECK_INT(lm_copy_to_iov(iov, 3, 0, src, 0), 0);
}

static struct lm_cq *cq_of(struct fid_cq *f)
{
	return lm_container_of(f, struct lm_cq, cq_fid);
}

static void test_multi_recv(struct fid_cq *fcq)
{
	struct lm_match m;
	char buf[100];
	struct lm_rx_entry *rx = rx_new(FI_ADDR_UNSPEC, 0, 0, (void *)0x77);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	bool rel = true;

	rx->flags = FI_MULTI_RECV;
	rx->iov[0].iov_base = buf;
	rx->iov[0].iov_len = sizeof(buf);
	rx->iov_count = 1;
	rx->total_len = sizeof(buf);

	lm_match_init(&m, false, true);
	CHECK(lm_match_post(&m, rx) == NULL);
	CHECK(lm_match_arrival(&m, SRC_A, 0) == rx);
	CHECK_INT(m.posted_count, 1); /* stays posted */
	CHECK(lm_rx_consume(rx, 40, 30, &rel) == buf);
	CHECK(!rel);
	CHECK_INT(rx->consumed, 40);
	CHECK_INT(lm_rx_complete(cq_of(fcq), rx, 40, 0, 0, SRC_A, 0), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), 1);
	CHECK(e.op_context == (void *)0x77);
	CHECK_HEX(e.flags, FI_RECV | FI_MSG);
	CHECK_INT(e.len, 40);
	CHECK(e.buf == buf);

	CHECK(lm_match_arrival(&m, SRC_B, 0) == rx);
	CHECK(lm_rx_consume(rx, 40, 30, &rel) == buf + 40);
	CHECK(rel); /* 20 left < 30 */
	lm_match_remove_rx(&m, rx);
	lm_match_remove_rx(&m, rx); /* already out: harmless */
	CHECK_INT(m.posted_count, 0);
	CHECK_INT(lm_rx_complete(cq_of(fcq), rx, 40, 9, 0, SRC_B,
	                         FI_MULTI_RECV | FI_REMOTE_CQ_DATA),
	          0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), 1);
	CHECK_HEX(e.flags, FI_RECV | FI_MSG | FI_MULTI_RECV | FI_REMOTE_CQ_DATA);
	CHECK(e.buf == buf + 40);
	CHECK_INT(e.len, 40);
	CHECK_HEX(e.data, 9);
	CHECK(lm_match_arrival(&m, SRC_A, 0) == NULL);

	/* Unexpected messages first: the caller re-posts while there is room;
	 * the last message is truncated to what is left. */
	struct lm_unexp_entry *u[3] = {ux_new(SRC_A, 0, 50), ux_new(SRC_B, 0, 30),
	                               ux_new(SRC_A, 0, 50)};
	size_t lens[3] = {50, 30, 20}, offs[3] = {0, 50, 80};
	bool rels[3] = {false, false, true};

	for (int i = 0; i < 3; i++)
		lm_match_add_unexp(&m, u[i]);
	rx->consumed = 0;
	for (int i = 0; i < 3; i++) {
		struct lm_unexp_entry *got = lm_match_post(&m, rx);

		CHECK(got == u[i]);
		CHECK(lm_rx_consume(rx, got->len, 10, &rel) == buf + offs[i]);
		CHECK_INT(rx->last_len, lens[i]);
		CHECK_INT(rel, rels[i]);
	}
	CHECK_INT(lm_rx_complete(cq_of(fcq), rx, 50, 0, 0, SRC_A, FI_MULTI_RECV), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(fcq, &err, 0), 1);
	CHECK_INT(err.err, FI_ETRUNC);
	CHECK_INT(err.len, 20);
	CHECK_INT(err.olen, 30);
	CHECK(err.buf == buf + 80);
	CHECK(err.op_context == (void *)0x77);
	CHECK_HEX(err.flags, FI_RECV | FI_MSG | FI_MULTI_RECV);
	CHECK_INT(m.posted_count, 0);
	CHECK_INT(m.unexp_count, 0);

	/* min_free 0: released only when nothing at all is left. */
	rx->consumed = 0;
	lm_rx_consume(rx, 99, 0, &rel);
	CHECK(!rel);
	lm_rx_consume(rx, 1, 0, &rel);
	CHECK(rel);
	CHECK(lm_rx_consume(rx, 5, 0, &rel) == buf + 100);
	CHECK_INT(rx->last_len, 0);
	CHECK(rel);
	/* A buffer smaller than min_free is released after one message. */
	rx->consumed = 0;
	lm_rx_consume(rx, 1, 200, &rel);
	CHECK(rel);
	lm_match_fini(&m);
	for (int i = 0; i < 3; i++)
		free(u[i]);
	free(rx);
}

static void test_completions(struct fid_cq *fcq)
{
	struct lm_match m;
	char b1[6], b2[4];
	struct lm_rx_entry *rx = rx_new(SRC_A, 0x55, 0x0f, (void *)0x99);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	rx->iov[0] = (struct iovec){b1, sizeof(b1)};
	rx->iov[1] = (struct iovec){b2, sizeof(b2)};
	rx->iov_count = 2;
	rx->total_len = 10;
	lm_match_init(&m, true, true);
	lm_match_post(&m, rx);
	CHECK(lm_match_arrival(&m, SRC_A, 0x5a) == rx);

	/* Fits exactly: success; data only with FI_REMOTE_CQ_DATA. */
	CHECK_INT(lm_rx_complete(cq_of(fcq), rx, 10, 0x1234, 0x5a, SRC_A, 0), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), 1);
	CHECK(e.op_context == (void *)0x99);
	CHECK_HEX(e.flags, FI_RECV | FI_TAGGED);
	CHECK_INT(e.len, 10);
	CHECK_HEX(e.data, 0);
	CHECK_HEX(e.tag, 0x5a);
	CHECK(e.buf == b1);
	CHECK_INT(
	    lm_rx_complete(cq_of(fcq), rx, 0, 0x1234, 0x5a, SRC_A, FI_REMOTE_CQ_DATA), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), 1);
	CHECK_HEX(e.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
	CHECK_INT(e.len, 0);
	CHECK_HEX(e.data, 0x1234);

	/* Truncated by 15 bytes. */
	CHECK_INT(
	    lm_rx_complete(cq_of(fcq), rx, 25, 0x42, 0x5a, SRC_A, FI_REMOTE_CQ_DATA), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(fcq, &err, 0), 1);
	CHECK(err.op_context == (void *)0x99);
	CHECK_HEX(err.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
	CHECK_INT(err.len, 10);
	CHECK_INT(err.olen, 15);
	CHECK_INT(err.err, FI_ETRUNC);
	CHECK_HEX(err.data, 0x42);
	CHECK_HEX(err.tag, 0x5a);
	CHECK(err.buf == b1);
	CHECK_INT(fi_cq_read(fcq, &e, 1), -FI_EAGAIN);

	/* Cancel: FI_ECANCELED with the receive's context and tag. */
	rx->flags = 0;
	lm_match_post(&m, rx);
	CHECK(lm_match_cancel(&m, (void *)0x99) == rx);
	CHECK_INT(lm_rx_cancelled(cq_of(fcq), rx), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(fcq, &err, 0), 1);
	CHECK_INT(err.err, FI_ECANCELED);
	CHECK(err.op_context == (void *)0x99);
	CHECK_HEX(err.flags, FI_RECV | FI_TAGGED);
	CHECK_HEX(err.tag, 0x55);
	CHECK_INT(err.len, 0);
	CHECK_INT(err.olen, 0);

	/* Untagged receive: no tag reported, FI_MSG. */
	lm_match_fini(&m);
	lm_match_init(&m, false, false);
	rx->flags = 0;
	lm_match_post(&m, rx);
	CHECK(lm_match_arrival(&m, SRC_C, 0) == rx);
	CHECK_INT(lm_rx_complete(cq_of(fcq), rx, 3, 0, 0x5a, SRC_C, 0), 0);
	CHECK_INT(fi_cq_read(fcq, &e, 1), 1);
	CHECK_HEX(e.flags, FI_RECV | FI_MSG);
	CHECK_HEX(e.tag, 0);
	CHECK_INT(e.len, 3);
	lm_match_post(&m, rx);
	CHECK(lm_match_cancel(&m, (void *)0x99) == rx);
	CHECK_INT(lm_rx_cancelled(cq_of(fcq), rx), 0);
	CHECK_INT(fi_cq_readerr(fcq, &err, 0), 1);
	CHECK_HEX(err.flags, FI_RECV | FI_MSG);
	CHECK_HEX(err.tag, 0);
	CHECK_INT(err.err, FI_ECANCELED);
	lm_match_fini(&m);
	free(rx);
}

/* 10,000 receives and 10,000 unexpected messages from 1,000 other sources
 * must cost nothing to a source with its own traffic: counted in probes
 * (entries examined), not in time. */
#define MANY 10000
static void test_many_sources(void)
{
	struct lm_match m;
	struct lm_rx_entry *other = calloc(MANY, sizeof(*other)),
	                   *mine = calloc(MANY, sizeof(*mine));
	struct lm_unexp_entry *ou = calloc(MANY, sizeof(*ou)),
	                      *mu = calloc(MANY, sizeof(*mu));
	uint64_t before;
	int ok = 0;

	lm_match_init(&m, true, true);
	for (int i = 0; i < MANY; i++) {
		other[i].src = 100 + (uint64_t)(i % 1000);
		other[i].tag = 7;
		CHECK(lm_match_post(&m, &other[i]) == NULL);
		mine[i].src = SRC_A;
		mine[i].tag = 7;
	}
	CHECK_INT(m.srcs.count, 1000);
	for (int i = 0; i < MANY; i++)
		lm_match_post(&m, &mine[i]);
	before = m.probes;
	for (int i = 0; i < MANY; i++)
		ok += lm_match_arrival(&m, SRC_A, 7) == &mine[i];
	CHECK_INT(ok, MANY);
	CHECK_INT(m.probes - before, MANY); /* one entry looked at each */

	/* Unexpected: other sources' messages queued first. */
	for (int i = 0; i < MANY; i++) {
		ou[i].src = 5000 + (uint64_t)(i % 1000);
		ou[i].tag = 9;
		lm_match_add_unexp(&m, &ou[i]);
	}
	for (int i = 0; i < MANY; i++) {
		mu[i].src = SRC_A;
		mu[i].tag = 9;
		lm_match_add_unexp(&m, &mu[i]);
	}
	before = m.probes;
	ok = 0;
	for (int i = 0; i < MANY; i++) {
		mine[i].tag = 9;
		ok += lm_match_post(&m, &mine[i]) == &mu[i];
	}
	CHECK_INT(ok, MANY);
	CHECK_INT(m.probes - before, MANY);
	/* Peeks for one source likewise. */
	lm_match_add_unexp(&m, &mu[0]);
	before = m.probes;
	CHECK(lm_match_peek(&m, SRC_A, 9, 0) == &mu[0]);
	CHECK_INT(m.probes - before, 1);
	lm_match_remove_unexp(&m, &mu[0]);

	/* The contrasting case, to show the counter counts: a wildcard
	 * receive must walk past all other sources' messages. */
	before = m.probes;
	mine[0].src = FI_ADDR_UNSPEC;
	mine[0].tag = 1;
	CHECK(lm_match_post(&m, &mine[0]) == NULL);
	CHECK_INT(m.probes - before, MANY);
	CHECK(lm_match_cancel(&m, NULL) != NULL);

	while (lm_match_pop_posted(&m))
		;
	while (lm_match_pop_unexp(&m))
		;
	CHECK_INT(m.posted_count, 0);
	CHECK_INT(m.unexp_count, 0);
	CHECK_SRCS_IDLE(m);
	lm_match_fini(&m);
	free(other), free(mine), free(ou), free(mu);
}

/* ---- differential test against a one-list reference model --------------- */

#define POOL    256
#define NSRC    6
#define BUFLEN  100
#define MINFREE 20

struct model {
	struct lm_rx_entry *posted[POOL]; /* posting order */
	int nposted;
	struct lm_unexp_entry *unexp[POOL]; /* arrival order, claimed included */
	int nunexp;
	struct lm_unexp_entry *claimed[POOL]; /* claim order */
	int nclaimed;
	bool directed, tagged;
};

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static bool m_src_ok(const struct model *md, fi_addr_t want, fi_addr_t got)
{
	return !md->directed || want == FI_ADDR_UNSPEC || want == got;
}

static bool m_tag_ok(const struct model *md, uint64_t t, uint64_t ign, uint64_t msg)
{
	return !md->tagged || ((t ^ msg) & ~ign) == 0;
}

static void del_at(void **arr, int *n, int i)
{
	memmove(&arr[i], &arr[i + 1], (size_t)(*n - i - 1) * sizeof(*arr));
	(*n)--;
}

static int model_find_unexp(struct model *md, fi_addr_t src, uint64_t tag, uint64_t ign)
{
	for (int i = 0; i < md->nunexp; i++) {
		struct lm_unexp_entry *u = md->unexp[i];

		if (!u->claimed && m_src_ok(md, src, u->src) &&
		    m_tag_ok(md, tag, ign, u->tag))
			return i;
	}
	return -1;
}

static void del_ptr(void **arr, int *n, void *p)
{
	for (int i = 0; i < *n; i++)
		if (arr[i] == p) {
			del_at(arr, n, i);
			return;
		}
}

static fi_addr_t rnd_src(void)
{
	uint64_t r = rnd() % (NSRC + 2);

	return r >= NSRC ? FI_ADDR_UNSPEC : 10 + r;
}

static const uint64_t ignores[] = {0, 0, 1, 3, ~0ULL};

static void differential(bool tagged, bool directed, size_t src_limit, int ops)
{
	struct lm_match m;
	struct model *md = calloc(1, sizeof(*md));
	struct lm_rx_entry *rxs = calloc(POOL, sizeof(*rxs)), *rfree[POOL];
	struct lm_unexp_entry *uxs = calloc(POOL, sizeof(*uxs)), *ufree[POOL];
	char *bufs = malloc(POOL * BUFLEN);
	int nrfree = POOL, nufree = POOL, bad = 0;

	for (int i = 0; i < POOL; i++) {
		rfree[i] = &rxs[i];
		ufree[i] = &uxs[i];
	}
	md->tagged = tagged;
	md->directed = directed;
	CHECK_INT(lm_match_init(&m, tagged, directed), 0);
	if (src_limit) /* white box: starve the per-source records */
		m.src_pool.max_count = src_limit;

	for (int op = 0; op < ops && !bad; op++) {
		int kind = (int)(rnd() % 100);

		if (kind < 30 && nrfree) { /* post */
			struct lm_rx_entry *rx = rfree[--nrfree];
			struct lm_unexp_entry *got;
			int want;

			memset(rx, 0, sizeof(*rx));
			rx->src = rnd_src();
			rx->tag = rnd() % 4;
			rx->ignore = ignores[rnd() % 5];
			rx->context = (void *)(uintptr_t)(rnd() % 8);
			if (!tagged && rnd() % 4 == 0) {
				rx->flags = FI_MULTI_RECV;
				rx->iov[0].iov_base = bufs + (rx - rxs) * BUFLEN;
				rx->iov[0].iov_len = BUFLEN;
				rx->iov_count = 1;
				rx->total_len = BUFLEN;
			}
			for (;;) {
				bool rel = false;

				want = model_find_unexp(md, rx->src, rx->tag, rx->ignore);
				got = lm_match_post(&m, rx);
				if (want < 0) {
					if (got)
						bad = 1;
					md->posted[md->nposted++] = rx;
					break;
				}
				if (got != md->unexp[want]) {
					bad = 2;
					break;
				}
				del_at((void **)md->unexp, &md->nunexp, want);
				ufree[nufree++] = got;
				if (!(rx->flags & FI_MULTI_RECV)) {
					rfree[nrfree++] = rx;
					break;
				}
				lm_rx_consume(rx, got->len, MINFREE, &rel);
				if (rel) {
					rfree[nrfree++] = rx;
					break;
				}
			}
		} else if (kind < 60) { /* arrival */
			fi_addr_t src = 10 + rnd() % NSRC;
			uint64_t tag = rnd() % 4;
			struct lm_rx_entry *got = lm_match_arrival(&m, src, tag),
			                   *want = NULL;
			int wi = -1;

			for (int i = 0; i < md->nposted; i++) {
				struct lm_rx_entry *rx = md->posted[i];

				if (m_src_ok(md, rx->src, src) &&
				    m_tag_ok(md, rx->tag, rx->ignore, tag)) {
					want = rx;
					wi = i;
					break;
				}
			}
			if (got != want) {
				bad = 3;
				break;
			}
			if (want) {
				bool rel = true;

				if (want->flags & FI_MULTI_RECV) {
					lm_rx_consume(want, 1 + rnd() % 50, MINFREE,
					              &rel);
					if (rel)
						lm_match_remove_rx(&m, want);
				}
				if (rel) {
					del_at((void **)md->posted, &md->nposted, wi);
					rfree[nrfree++] = want;
				}
			} else if (nufree) {
				struct lm_unexp_entry *u = ufree[--nufree];

				memset(u, 0, sizeof(*u));
				u->src = src;
				u->tag = tag;
				u->len = 1 + rnd() % 50;
				lm_match_add_unexp(&m, u);
				md->unexp[md->nunexp++] = u;
			}
		} else if (kind < 75) { /* peek, maybe claim or discard */
			fi_addr_t src = rnd_src();
			uint64_t tag = rnd() % 4, ign = ignores[rnd() % 5];
			int wi = model_find_unexp(md, src, tag, ign);
			struct lm_unexp_entry *got = lm_match_peek(&m, src, tag, ign);

			if (got != (wi < 0 ? NULL : md->unexp[wi])) {
				bad = 4;
				break;
			}
			if (got && rnd() % 2) {
				lm_match_claim(&m, got, (void *)(uintptr_t)(rnd() % 4));
				md->claimed[md->nclaimed++] = got;
			} else if (got && rnd() % 2) {
				lm_match_remove_unexp(&m, got);
				del_at((void **)md->unexp, &md->nunexp, wi);
				ufree[nufree++] = got;
			}
		} else if (kind < 85) { /* FI_CLAIM receive, sometimes discard */
			void *ctx = (void *)(uintptr_t)(rnd() % 4);
			struct lm_unexp_entry *got = lm_match_take_claimed(&m, ctx),
			                      *want = NULL;

			for (int i = 0; i < md->nclaimed; i++)
				if (md->claimed[i]->claim_context == ctx) {
					want = md->claimed[i];
					break;
				}
			if (got != want) {
				bad = 5;
				break;
			}
			if (got) {
				del_ptr((void **)md->claimed, &md->nclaimed, got);
				del_ptr((void **)md->unexp, &md->nunexp, got);
				ufree[nufree++] = got;
			}
		} else { /* cancel */
			void *ctx = (void *)(uintptr_t)(rnd() % 8);
			struct lm_rx_entry *got = lm_match_cancel(&m, ctx), *want = NULL;

			for (int i = 0; i < md->nposted; i++)
				if (md->posted[i]->context == ctx) {
					want = md->posted[i];
					break;
				}
			if (got != want) {
				bad = 6;
				break;
			}
			if (got) {
				del_ptr((void **)md->posted, &md->nposted, got);
				rfree[nrfree++] = got;
			}
		}
		if ((size_t)md->nposted != m.posted_count ||
		    (size_t)md->nunexp != m.unexp_count)
			bad = 7;
		if (bad)
			fprintf(stderr,
			        "differential(tagged %d, directed %d, limit %zu): op %d: "
			        "failure kind %d\n",
			        tagged, directed, src_limit, op, bad);
	}
	CHECK_INT(bad, 0);

	/* Drain: everything comes back exactly once. */
	int nr = 0, nu = 0;

	while (lm_match_pop_posted(&m))
		nr++;
	while (lm_match_pop_unexp(&m))
		nu++;
	CHECK_INT(nr, md->nposted);
	CHECK_INT(nu, md->nunexp);
	CHECK_SRCS_IDLE(m);
	CHECK_INT(m.orphans, 0);
	lm_match_fini(&m);
	free(md), free(rxs), free(uxs), free(bufs);
}

int main(void)
{
	struct testdom t;
	struct fid_cq *cq = NULL;
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};

	test_posted_first();
	test_unexp_first();
	test_kept_record();
	test_set_src();
	test_tags();
	test_directed_order();
	test_directed_disabled();
	test_peek_claim_discard();
	test_cancel();
	test_copy_to_iov();
	test_many_sources();

	CHECK_INT(testdom_open(&t, FI_THREAD_DOMAIN, NULL, NULL), 0);
	CHECK_INT(fi_cq_open(t.domain, &attr, &cq, NULL), 0);
	if (cq) {
		test_multi_recv(cq);
		test_completions(cq);
		fi_close(&cq->fid);
	}
	testdom_close(&t);

	differential(true, true, 0, 100000);
	differential(true, false, 0, 30000);
	differential(false, true, 0, 30000);
	differential(false, false, 0, 30000);
	differential(true, true, 3, 30000); /* per-source records run out */
	differential(false, true, 2, 30000);
	return check_done();
}
