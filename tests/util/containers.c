/* containers.c - tests of util's shared containers: the intrusive list
 * (list.h), the ring (ring.h), the hash map (hash.h) and the buffer pool
 * (bufpool.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

/* ---- list ----------------------------------------------------------------- */

struct item {
	struct lm_list node;
	int v;
};

/* The values in order, walking forward, after checking every back link;
 * "" for an empty list, "!" for a broken one. */
static const char *list_str(struct lm_list *head)
{
	static char buf[64];
	struct lm_list *it, *prev = head;
	size_t n = 0;

	lm_list_foreach(head, it)
	{
		if (it->prev != prev || n >= sizeof(buf) - 1)
			return "!";
		buf[n++] = (char)('0' + lm_list_entry(it, struct item, node)->v);
		prev = it;
	}
	if (head->prev != prev)
		return "!";
	buf[n] = 0;
	return buf;
}

static void test_list(void)
{
	static struct lm_list stat = LM_LIST_INIT(stat);
	struct lm_list a, b, *it, *tmp;
	struct item it_[10];

	for (int i = 0; i < 10; i++)
		it_[i].v = i;
	CHECK(lm_list_empty(&stat));
	CHECK_STR(list_str(&stat), "");

	lm_list_init(&a);
	CHECK(lm_list_empty(&a));
	CHECK(lm_list_front(&a) == NULL);
	CHECK(lm_list_pop_front(&a) == NULL);
	CHECK_STR(list_str(&a), "");

	lm_list_push_back(&a, &it_[1].node);
	lm_list_push_back(&a, &it_[2].node);
	lm_list_push_back(&a, &it_[3].node);
	lm_list_push_front(&a, &it_[0].node);
	CHECK(!lm_list_empty(&a));
	CHECK_STR(list_str(&a), "0123");
	lm_list_insert_before(&it_[2].node, &it_[9].node);
	CHECK_STR(list_str(&a), "01923");
	lm_list_insert_before(&a, &it_[8].node); /* before the head: at the back */
	CHECK_STR(list_str(&a), "019238");
	CHECK(lm_list_front(&a) == &it_[0].node);

	lm_list_remove(&it_[9].node);
	CHECK_STR(list_str(&a), "01238");
	/* A removed node is left pointing at itself. */
	CHECK(lm_list_empty(&it_[9].node));
	lm_list_remove(&it_[0].node);
	lm_list_remove(&it_[8].node);
	CHECK_STR(list_str(&a), "123");

	CHECK(lm_list_pop_front(&a) == &it_[1].node);
	CHECK(lm_list_empty(&it_[1].node));
	CHECK_STR(list_str(&a), "23");

	/* splice: into a non-empty list, from an empty one, into an empty one */
	lm_list_init(&b);
	lm_list_push_back(&b, &it_[4].node);
	lm_list_push_back(&b, &it_[5].node);
	lm_list_splice_back(&a, &b);
	CHECK_STR(list_str(&a), "2345");
	CHECK(lm_list_empty(&b));
	CHECK_STR(list_str(&b), "");
	lm_list_splice_back(&a, &b);
	CHECK_STR(list_str(&a), "2345");
	lm_list_splice_back(&b, &a);
	CHECK_STR(list_str(&b), "2345");
	CHECK_STR(list_str(&a), "");
	lm_list_push_back(&a, &it_[6].node);
	lm_list_splice_back(&a, &b);
	CHECK_STR(list_str(&a), "62345");
	/* one-element source */
	lm_list_push_back(&b, &it_[7].node);
	lm_list_splice_back(&a, &b);
	CHECK_STR(list_str(&a), "623457");

	/* Safe iteration: remove the even ones while walking. */
	int seen = 0;

	lm_list_foreach_safe(&a, it, tmp)
	{
		struct item *x = lm_list_entry(it, struct item, node);

		seen++;
		if (x->v % 2 == 0)
			lm_list_remove(it);
	}
	CHECK_INT(seen, 6);
	CHECK_STR(list_str(&a), "357");
	/* ... and remove everything. */
	lm_list_foreach_safe(&a, it, tmp)
	{
		lm_list_remove(it);
	}
	CHECK(lm_list_empty(&a));
	CHECK_STR(list_str(&a), "");

	/* lm_container_of from any member. */
	struct item *x = lm_container_of(&it_[4].v, struct item, v);

	CHECK(x == &it_[4]);
}

/* ---- ring ----------------------------------------------------------------- */

struct rec {
	uint32_t a, b, c; /* 12 bytes: not a power of two */
};

static void test_ring(void)
{
	struct lm_ring r;
	struct rec e, *p;

	CHECK_INT(lm_ring_init(&r, 5, sizeof(struct rec)), 0);
	CHECK_INT(lm_ring_capacity(&r), 8);
	CHECK(lm_ring_empty(&r));
	CHECK(!lm_ring_full(&r));
	CHECK(lm_ring_peek(&r) == NULL);
	CHECK(!lm_ring_pop(&r, &e));

	for (uint32_t i = 0; i < 8; i++) {
		e = (struct rec){i, i * 2, i * 3};
		CHECK(lm_ring_push(&r, &e));
	}
	CHECK(lm_ring_full(&r));
	CHECK_INT(lm_ring_count(&r), 8);
	e.a = 99;
	CHECK(!lm_ring_push(&r, &e));
	CHECK(lm_ring_reserve(&r) == NULL);
	CHECK_INT(lm_ring_count(&r), 8);
	for (uint32_t i = 0; i < 8; i++) {
		CHECK(lm_ring_pop(&r, &e));
		CHECK_INT(e.a, i);
		CHECK_INT(e.b, i * 2);
		CHECK_INT(e.c, i * 3);
	}
	CHECK(lm_ring_empty(&r));

	/* Wrap around many times with a varying fill level. */
	uint32_t next_in = 0, next_out = 0;
	int bad = 0;

	for (int round = 0; round < 1000; round++) {
		int n_in = round % 9, n_out = (round * 7) % 9;

		for (int i = 0; i < n_in; i++) {
			e = (struct rec){next_in, ~next_in, next_in ^ 0x5555};
			if (lm_ring_push(&r, &e))
				next_in++;
			else if (lm_ring_count(&r) != 8)
				bad++;
		}
		for (int i = 0; i < n_out; i++) {
			if (!lm_ring_pop(&r, &e)) {
				if (!lm_ring_empty(&r))
					bad++;
				break;
			}
			if (e.a != next_out || e.b != ~next_out ||
			    e.c != (next_out ^ 0x5555))
				bad++;
			next_out++;
		}
		if (lm_ring_count(&r) != next_in - next_out)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK(next_in > 100);
	CHECK(r.head > 8 * lm_ring_capacity(&r)); /* really wrapped */

	/* reserve/commit builds in place; an uncommitted reserve is nothing. */
	while (lm_ring_pop(&r, &e))
		;
	p = lm_ring_reserve(&r);
	CHECK(p != NULL);
	CHECK_INT(lm_ring_count(&r), 0);
	CHECK(lm_ring_reserve(&r) == p); /* same slot until committed */
	p->a = 42, p->b = 43, p->c = 44;
	lm_ring_commit(&r);
	CHECK_INT(lm_ring_count(&r), 1);
	p = lm_ring_peek(&r);
	CHECK(p != NULL && p->a == 42 && p->b == 43 && p->c == 44);
	CHECK(lm_ring_peek(&r) == p); /* peek does not consume */
	lm_ring_drop(&r);
	CHECK(lm_ring_empty(&r));
	lm_ring_fini(&r);
	CHECK(r.slots == NULL);

	/* Sizes round up to a power of two, at least 1. */
	CHECK_INT(lm_ring_init(&r, 0, 8), 0);
	CHECK_INT(lm_ring_capacity(&r), 1);
	e.a = 1;
	CHECK(lm_ring_push(&r, &e));
	CHECK(lm_ring_full(&r));
	lm_ring_fini(&r);
	CHECK_INT(lm_ring_init(&r, 1024, 1), 0);
	CHECK_INT(lm_ring_capacity(&r), 1024);
	lm_ring_fini(&r);
	CHECK_INT(lm_ring_init(&r, 1025, 1), 0);
	CHECK_INT(lm_ring_capacity(&r), 2048);
	lm_ring_fini(&r);
}

/* ---- hash ----------------------------------------------------------------- */

struct hent {
	struct lm_hnode h;
	int id;
};

static struct hent *hfind(struct lm_hmap *m, uint64_t key)
{
	struct lm_hnode *n = lm_hmap_find(m, key);

	return n ? lm_container_of(n, struct hent, h) : NULL;
}

static void test_hash(void)
{
	struct lm_hmap m;
	struct hent e[8];

	for (int i = 0; i < 8; i++)
		e[i].id = i;
	CHECK_INT(lm_hmap_init(&m, 0), 0);
	CHECK_INT(m.nbuckets, 16);
	CHECK_INT(m.count, 0);
	CHECK(lm_hmap_find(&m, 0) == NULL);

	lm_hmap_insert(&m, &e[0].h, 0);
	lm_hmap_insert(&m, &e[1].h, UINT64_MAX);
	lm_hmap_insert(&m, &e[2].h, 12345);
	CHECK_INT(m.count, 3);
	CHECK(hfind(&m, 0) == &e[0]);
	CHECK(hfind(&m, UINT64_MAX) == &e[1]);
	CHECK(hfind(&m, 12345) == &e[2]);
	CHECK(hfind(&m, 12346) == NULL);
	CHECK_HEX(e[2].h.key, 12345);
	CHECK(lm_hmap_find_next(&e[2].h) == NULL);
	lm_hmap_remove(&m, &e[2].h);
	CHECK_INT(m.count, 2);
	CHECK(hfind(&m, 12345) == NULL);
	CHECK(hfind(&m, 0) == &e[0]);

	/* Duplicates: every node with the key is reached exactly once. */
	lm_hmap_insert(&m, &e[3].h, 7);
	lm_hmap_insert(&m, &e[4].h, 7);
	lm_hmap_insert(&m, &e[5].h, 7);
	int mask = 0, visits = 0;

	for (struct lm_hnode *n = lm_hmap_find(&m, 7); n; n = lm_hmap_find_next(n)) {
		mask |= 1 << lm_container_of(n, struct hent, h)->id;
		visits++;
	}
	CHECK_INT(visits, 3);
	CHECK_HEX(mask, 0x38);
	/* Removing while walking duplicates: take next first. */
	visits = 0;
	for (struct lm_hnode *n = lm_hmap_find(&m, 7), *next; n; n = next) {
		next = lm_hmap_find_next(n);
		if (lm_container_of(n, struct hent, h)->id != 4)
			lm_hmap_remove(&m, n);
		visits++;
	}
	CHECK_INT(visits, 3);
	CHECK(hfind(&m, 7) == &e[4]);
	CHECK(lm_hmap_find_next(&e[4].h) == NULL);
	CHECK_INT(m.count, 3);
	lm_hmap_fini(&m);
	CHECK(lm_hmap_find(&m, 7) == NULL); /* a finished map finds nothing */

	CHECK_INT(lm_hmap_init(&m, 100), 0);
	CHECK_INT(m.nbuckets, 128);
	lm_hmap_fini(&m);

	/* Growth to a million entries, then half removed. */
	enum { N = 1000000 };
	struct hent *big = malloc(N * sizeof(*big));
	int bad = 0;

	CHECK_INT(lm_hmap_init(&m, 0), 0);
	for (int i = 0; i < N; i++) {
		big[i].id = i;
		/* spread keys, including large ones */
		lm_hmap_insert(&m, &big[i].h, (uint64_t)i * 0x9e3779b97f4a7c15ULL);
	}
	CHECK_INT(m.count, N);
	CHECK(m.nbuckets >= N);
	CHECK(m.nbuckets < 4 * (size_t)N);
	for (int i = 0; i < N; i++)
		if (hfind(&m, (uint64_t)i * 0x9e3779b97f4a7c15ULL) != &big[i])
			bad++;
	CHECK_INT(bad, 0);
	for (int i = 0; i < N; i += 2)
		lm_hmap_remove(&m, &big[i].h);
	CHECK_INT(m.count, N / 2);
	bad = 0;
	for (int i = 0; i < N; i++) {
		struct hent *f = hfind(&m, (uint64_t)i * 0x9e3779b97f4a7c15ULL);

		if (f != (i % 2 ? &big[i] : NULL))
			bad++;
	}
	CHECK_INT(bad, 0);
	/* Longest chain stays short (the mixer spreads sequential keys). */
	size_t longest = 0;

	for (size_t b = 0; b < m.nbuckets; b++) {
		size_t len = 0;

		for (struct lm_hnode *n = m.buckets[b]; n; n = n->next)
			len++;
		longest = LM_MAX(longest, len);
	}
	CHECK(longest <= 16);
	lm_hmap_fini(&m);
	free(big);

	/* Byte-string hash: deterministic, sensitive to every byte. */
	CHECK_HEX(lm_hash_bytes("abc", 3), lm_hash_bytes("abc", 3));
	CHECK(lm_hash_bytes("abc", 3) != lm_hash_bytes("abd", 3));
	CHECK(lm_hash_bytes("abc", 3) != lm_hash_bytes("abc", 2));
	CHECK(lm_hash_bytes("", 0) != lm_hash_bytes("\0", 1));
}

/* ---- bufpool -------------------------------------------------------------- */

static void test_bufpool(void)
{
	struct lm_bufpool p;
	void *e[200];
	int bad = 0;

	CHECK_INT(lm_bufpool_init(&p, 24, 3, 4, 0), -1); /* align not a power of 2 */
	CHECK_INT(lm_bufpool_init(&p, 0, 8, 4, 0), -1);  /* no size */

	/* Alignment: every element on a 64-byte boundary, none overlapping. */
	CHECK_INT(lm_bufpool_init(&p, 24, 64, 7, 0), 0);
	CHECK_INT(p.elem_size, 64);
	for (int i = 0; i < 50; i++) {
		e[i] = lm_bufpool_alloc(&p);
		if (!e[i] || (uintptr_t)e[i] % 64)
			bad++;
		else
			memset(e[i], i, 24);
	}
	CHECK_INT(bad, 0);
	for (int i = 0; i < 50; i++) {
		unsigned char *c = e[i];

		for (int j = 0; j < 24; j++)
			if (c[j] != i)
				bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(p.in_use, 50);
	CHECK_INT(p.total, 56); /* 8 chunks of 7 */
	lm_bufpool_fini(&p);
	CHECK_INT(p.in_use, 0);

	/* Small elements hold at least the free-list link; align 0 = pointer. */
	CHECK_INT(lm_bufpool_init(&p, 1, 0, 0, 0), 0);
	CHECK_INT(p.elem_size, sizeof(void *));
	CHECK_INT(p.align, sizeof(void *));
	CHECK_INT(p.chunk_count, 64);
	e[0] = lm_bufpool_alloc(&p);
	CHECK(e[0] != NULL && (uintptr_t)e[0] % sizeof(void *) == 0);
	lm_bufpool_free(&p, e[0]);
	lm_bufpool_fini(&p);

	/* Limit: max_count not a multiple of chunk_count. */
	CHECK_INT(lm_bufpool_init(&p, 40, 16, 4, 10), 0);
	for (int i = 0; i < 10; i++) {
		e[i] = lm_bufpool_alloc(&p);
		if (!e[i] || (uintptr_t)e[i] % 16)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK(lm_bufpool_alloc(&p) == NULL);
	CHECK_INT(p.total, 10);
	CHECK_INT(p.in_use, 10);
	/* Reuse: a freed element is handed out again, no growth. */
	lm_bufpool_free(&p, e[3]);
	CHECK_INT(p.in_use, 9);
	CHECK(lm_bufpool_alloc(&p) == e[3]);
	CHECK(lm_bufpool_alloc(&p) == NULL);
	lm_bufpool_free(&p, NULL); /* harmless */
	CHECK_INT(p.in_use, 10);
	for (int i = 0; i < 10; i++)
		lm_bufpool_free(&p, e[i]);
	CHECK_INT(p.in_use, 0);
	/* All ten come back, each once. */
	for (int i = 0; i < 10; i++) {
		void *x = lm_bufpool_alloc(&p);
		int found = 0;

		for (int j = 0; j < 10; j++)
			found += x == e[j];
		if (found != 1)
			bad++;
		e[10 + i] = x;
	}
	CHECK_INT(bad, 0);
	for (int i = 0; i < 10; i++)
		for (int j = i + 1; j < 10; j++)
			if (e[10 + i] == e[10 + j])
				bad++;
	CHECK_INT(bad, 0);
	CHECK_INT(p.total, 10);
	lm_bufpool_fini(&p);

	/* Page alignment, and many elements released only by fini (ASan's
	 * leak check proves fini frees every chunk). */
	CHECK_INT(lm_bufpool_init(&p, 100, 4096, 3, 0), 0);
	for (int i = 0; i < 7; i++) {
		e[i] = lm_bufpool_alloc(&p);
		if (!e[i] || (uintptr_t)e[i] % 4096)
			bad++;
	}
	CHECK_INT(bad, 0);
	lm_bufpool_fini(&p);
	CHECK_INT(lm_bufpool_init(&p, 48, 0, 64, 0), 0);
	for (int i = 0; i < 100000; i++)
		if (!lm_bufpool_alloc(&p))
			bad++;
	CHECK_INT(bad, 0);
	CHECK_INT(p.in_use, 100000);
	lm_bufpool_fini(&p);
}

int main(void)
{
	test_list();
	test_ring();
	test_hash();
	test_bufpool();
	return check_done();
}
