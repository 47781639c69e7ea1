/* stress.c - four processes all-to-all, tagged messages of random sizes,
 * every one checked for content and counted: nothing lost, duplicated or
 * corrupted, within a bounded time; with CMA and with the fallback.
 *
 * Usage: ep_stress [TOTAL_MESSAGES [MAX_SIZE [PROCESSES]]], defaults 80000,
 * 256 KiB and 4 (20,000 sent by each process: the ep/stress/<provider>
 * tests).  shm/stress_1m runs 1000000 4194304: 250,000 sent by each
 * process, 1 B .. 4 MiB.  tcp/stress_1m runs 1000000 1048576 8 over the tcp
 * provider (LOOM_TEST_PROV=tcp), where there is one half only: CMA is shm's.
 *
 * Sizes.  A message first draws a size class k, then a size uniformly in
 * the class: class 0 is 1 B, class k >= 1 is (2^(k-1), 2^k] bytes, the top
 * class cut at MAX_SIZE.  Classes up to 128 KiB (k <= 17) are equally
 * likely: log-uniform, so most messages are small, yet each protocol is hit
 * thousands of times -- inline in a ring cell (up to ~240 B), eager through
 * one bounce buffer (up to 16 KiB with CMA, 64 KiB without), rendezvous
 * beyond (one process_vm_readv with CMA; without, a CTS/DATA stream through
 * 64 KiB bounce buffers).  Each class above 128 KiB is half as likely as
 * the one below, so each carries about the same bytes as class 17, and the
 * biggest still come regularly.  Bytes moved, in each of the two halves:
 *   80,000 up to 256 KiB (the default): mean ~16 KiB, ~1.3 GB;
 *     ~2,200 messages in 128..256 KiB;
 *   1,000,000 up to 4 MiB: mean ~36 KiB, ~36 GB; of them ~52,500
 *     per class up to 128 KiB, then ~26,000 in 128..256 KiB, ~13,000 in
 *     256..512 KiB, ~6,600 in 0.5..1 MiB, ~3,300 in 1..2 MiB and ~1,650 in
 *     2..4 MiB (one message in ~600).
 *
 * Content.  Every 8-byte word of a message is a bijective mix of the
 * message's seed (its tag and destination) and the word's index, so a
 * changed, missing, shifted or foreign byte anywhere is detected when the
 * receiver compares every byte with what it expects.  The sender also sums
 * the words (each times an odd weight) as it writes them and sends the sum
 * as remote CQ data; the receiver checks it against its own sum, so the
 * CQ data of every message is checked too.
 *
 * Memory: receive buffers are MAX_SIZE, 16..48 of them (64 MiB at most);
 * send buffers are 48 of up to 256 KiB and, for bigger messages, a few
 * (32 MiB) of MAX_SIZE: ~110 MiB per process for 4 MiB. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "check.h"
#include "eptest.h"

#define MAX_PROC  16
#define DEF_TOTAL 80000        /* messages sent by all, default */
#define DEF_MAXSZ (256 * 1024) /* largest message, default */
#define FLAT_TOP  17           /* classes up to 2^17 B equally likely */
#define WINDOW    48           /* sends and receives outstanding per process */
#define SMALL_CAP (256 * 1024) /* send buffers beyond this are few */
#define BIG_TX    (32u << 20)  /* bytes of big send buffers per process */
#define RX_MEM    (64u << 20)  /* bytes of receive buffers per process */

static struct et_ep E;
static unsigned g_total = DEF_TOTAL;
static size_t g_max = DEF_MAXSZ;
static int g_top;             /* highest size class */
static uint64_t g_weight[64]; /* class weights, cumulative */
static bool g_cma;            /* this half has CMA enabled */
static int g_nproc = 4;       /* processes */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	return x ^ (x >> 33);
}

/* Message seq from src to dst: tag, size and content seed all follow. */
static uint64_t tag_of(int src, uint32_t seq)
{
	return (uint64_t)src << 32 | seq;
}

static void classes_init(void)
{
	uint64_t sum = 0;

	g_top = 0;
	while (((size_t)1 << g_top) < g_max)
		g_top++;
	for (int k = 0; k <= g_top; k++) {
		sum += (uint64_t)1 << (k <= FLAT_TOP ? g_top : g_top - (k - FLAT_TOP));
		g_weight[k] = sum;
	}
}

static size_t size_of(uint64_t tag, int dst)
{
	uint64_t h = mix(tag * 31 + (uint64_t)dst);
	uint64_t w = (h >> 24) % g_weight[g_top];
	size_t lo, hi;
	int k = 0;

	while (w >= g_weight[k])
		k++;
	if (k == 0)
		return 1;
	lo = ((size_t)1 << (k - 1)) + 1;
	hi = (size_t)1 << k;
	if (hi > g_max)
		hi = g_max;
	return lo + (size_t)(mix(h) % (hi - lo + 1));
}

static uint64_t seed_of(uint64_t tag, int dst)
{
	return mix(tag ^ (uint64_t)dst << 56 ^ 0x5bd1e995ULL);
}

/* Word i of message `seed`: distinct words for distinct i (odd multiply
 * and xor-shift are bijections), and a different series per seed. */
static inline uint64_t word(uint64_t seed, size_t i)
{
	uint64_t x = (seed ^ i * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;

	return x ^ x >> 29;
}

/* Fill buf with message `seed`; returns its checksum. */
static uint64_t fill(char *buf, size_t len, uint64_t seed)
{
	size_t n = len / 8, i;
	uint64_t sum = len, w;

	for (i = 0; i < n; i++) {
		w = word(seed, i);
		memcpy(buf + i * 8, &w, 8);
		sum += w * (2 * i + 1);
	}
	if (len % 8) {
		w = 0;
		memcpy(&w, (uint64_t[]){word(seed, i)}, len % 8);
		memcpy(buf + i * 8, &w, len % 8);
		sum += w * (2 * i + 1);
	}
	return sum;
}

/* Compare buf with message `seed`: (size_t)-1 when every byte matches,
 * else the first bad offset, with the number of bad bytes in *nbad.  The
 * expected checksum is returned in *sum. */
static size_t verify(const char *buf, size_t len, uint64_t seed, uint64_t *sum,
                     size_t *nbad)
{
	size_t n = (len + 7) / 8, first = (size_t)-1;
	uint64_t s = len;

	*nbad = 0;
	for (size_t i = 0; i < n; i++) {
		size_t m = i < len / 8 ? 8 : len % 8;
		uint64_t want = word(seed, i), got = 0;

		memcpy(&got, buf + i * 8, m);
		if (m < 8)
			want &= ~0ULL >> (64 - 8 * m);
		s += want * (2 * i + 1);
		if (got == want)
			continue;
		for (size_t b = 0; b < m; b++) {
			if ((uint8_t)(got >> 8 * b) == (uint8_t)(want >> 8 * b))
				continue;
			if (first == (size_t)-1)
				first = i * 8 + b;
			++*nbad;
		}
	}
	*sum = s;
	return first;
}

static unsigned per_of(int rank)
{
	return g_total / g_nproc + ((unsigned)rank < g_total % g_nproc ? 1 : 0);
}

/* How many messages src sends to dst: round robin over the others. */
static uint32_t count_to(int src, int dst)
{
	int k = (dst - src + g_nproc) % g_nproc - 1; /* dst's place among the others */
	unsigned per = per_of(src);

	return per / (g_nproc - 1) + ((unsigned)k < per % (g_nproc - 1) ? 1 : 0);
}

struct slot {
	char *buf;
	struct slot *next; /* free list */
	/* What a send buffer holds. */
	int peer;
	uint32_t seq;
	size_t len;
	uint64_t sum;
	bool busy;
};

static struct slot *pop(struct slot **list)
{
	struct slot *s = *list;

	if (s)
		*list = s->next;
	return s;
}

static void push(struct slot **list, struct slot *s)
{
	s->next = *list;
	*list = s;
}

static const char *half(void)
{
	if (!et_desc()->cma_switch)
		return et_prov();
	return g_cma ? "CMA" : "no CMA";
}

static void report_err(int rank, const char *what, struct fid_cq *cq)
{
	struct fi_cq_err_entry err = {0};
	struct slot *s;

	if (fi_cq_readerr(cq, &err, 0) != 1) {
		fprintf(stderr, "rank %d (%s): %s error, fi_cq_readerr failed\n", rank,
		        half(), what);
		return;
	}
	s = err.op_context;
	fprintf(stderr,
	        "rank %d (%s): %s error %d (%s), prov_errno %d (%s), len %zu, "
	        "olen %zu, tag %#llx, flags %#llx",
	        rank, half(), what, err.err, fi_strerror(err.err), err.prov_errno,
	        fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0), err.len,
	        err.olen, (unsigned long long)err.tag, (unsigned long long)err.flags);
	if (cq == E.txcq && s)
		fprintf(stderr, ": message %d:%u to %d, %zu bytes", rank, s->seq, s->peer,
		        s->len);
	fprintf(stderr, "\n");
}

/* Whether process_vm_readv reaches a peer: without it the CMA half would
 * silently test only the fallback. */
static bool cma_works(int peer)
{
	static volatile uint64_t probe = 0x6d63612070726f62ULL;
	uint64_t got = 0;
	struct iovec l = {&got, sizeof(got)}, r = {(void *)&probe, sizeof(got)};

	if (process_vm_readv(E.pid[peer], &l, 1, &r, 1, 0) != sizeof(got)) {
		fprintf(stderr, "rank %d: process_vm_readv of rank %d: %s\n", E.rank,
		        peer, strerror(errno));
		return false;
	}
	return got == probe;
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.split_cq = true, .cq_size = 256};
	size_t small_cap = g_max < SMALL_CAP ? g_max : SMALL_CAP;
	unsigned nbig = g_max > SMALL_CAP ? BIG_TX / g_max : 0;
	unsigned nrx = RX_MEM / g_max, per = per_of(rank);
	struct slot *txs, *rxs, *free_small = NULL, *free_big = NULL, *pend = NULL;
	uint8_t *seen[MAX_PROC] = {0};
	uint32_t next_seq[MAX_PROC] = {0}, got_from[MAX_PROC] = {0};
	unsigned sent = 0, sent_done = 0, received = 0, expect = 0, dst_i = 0;
	uint64_t end, t0, bytes_in = 0;
	unsigned idle = 0;
	bool cq_error = false;

	(void)nprocs, (void)arg;
	if (nbig < 4)
		nbig = g_max > SMALL_CAP ? 4 : 0;
	if (nrx > WINDOW)
		nrx = WINDOW;
	if (nrx < 16)
		nrx = 16;
	if (et_open(&E, &o))
		return 2;
	if (g_cma)
		CHECK(cma_works((rank + 1) % g_nproc));
	txs = calloc(WINDOW + nbig, sizeof(*txs));
	rxs = calloc(nrx, sizeof(*rxs));
	CHECK(txs && rxs);
	if (!txs || !rxs)
		return 2;
	for (int s = 0; s < g_nproc; s++) {
		if (s != rank)
			expect += count_to(s, rank);
		seen[s] = calloc(per_of(s) + 1, 1);
		CHECK(seen[s] != NULL);
	}
	for (unsigned i = 0; i < WINDOW + nbig; i++) {
		txs[i].buf = malloc(i < WINDOW ? small_cap : g_max);
		CHECK(txs[i].buf != NULL);
		push(i < WINDOW ? &free_small : &free_big, &txs[i]);
	}
	for (unsigned i = 0; i < nrx; i++) {
		rxs[i].buf = malloc(g_max);
		CHECK(rxs[i].buf != NULL);
		CHECK_INT(fi_trecv(E.ep, rxs[i].buf, g_max, NULL, FI_ADDR_UNSPEC, 0,
		                   ~0ULL, &rxs[i]),
		          0);
	}
	if (check_failures)
		return 1;
	et_barrier();
	t0 = et_now_us();
	/* Generous: the release build needs a tenth of this. */
	end = t0 + (g_total <= DEF_TOTAL && g_max <= DEF_MAXSZ ? 150 : 270) * 1000000ull;
	while ((sent_done < per || received < expect) && et_now_us() < end) {
		struct fi_cq_tagged_entry c[16];
		fi_addr_t src[16];
		bool busy = false;
		ssize_t n;

		/* Send while a buffer is free; one that met FI_EAGAIN waits,
		 * filled, in pend. */
		while (sent < per) {
			struct slot *s = pend;
			ssize_t r;

			if (!s) {
				int dst = (rank + 1 + (int)(dst_i % (g_nproc - 1))) % g_nproc;
				uint64_t tag = tag_of(rank, next_seq[dst]);
				size_t len = size_of(tag, dst);

				s = pop(len <= small_cap ? &free_small : &free_big);
				if (!s)
					break;
				s->peer = dst;
				s->seq = next_seq[dst];
				s->len = len;
				s->sum = fill(s->buf, len, seed_of(tag, dst));
				next_seq[dst]++;
				dst_i++;
			}
			r = fi_tsenddata(E.ep, s->buf, s->len, NULL, s->sum,
			                 E.addr[s->peer], tag_of(rank, s->seq), s);
			if (r == -FI_EAGAIN) {
				pend = s;
				break;
			}
			pend = NULL;
			CHECK_INT(r, 0);
			s->busy = true;
			sent++;
			busy = true;
		}
		n = fi_cq_read(E.txcq, c, 16);
		if (n == -FI_EAVAIL) {
			report_err(rank, "send", E.txcq);
			CHECK(0);
			cq_error = true;
			break;
		}
		for (ssize_t k = 0; k < n; k++) {
			struct slot *s = c[k].op_context;

			s->busy = false;
			push(s->len <= small_cap ? &free_small : &free_big, s);
			sent_done++;
			busy = true;
		}
		n = fi_cq_readfrom(E.rxcq, c, 16, src);
		if (n == -FI_EAVAIL) {
			report_err(rank, "receive", E.rxcq);
			CHECK(0);
			cq_error = true;
			break;
		}
		for (ssize_t k = 0; k < n; k++) {
			struct slot *s = c[k].op_context;
			int from = (int)(c[k].tag >> 32);
			uint32_t seq = (uint32_t)c[k].tag;
			size_t want_len, bad_at, nbad;
			uint64_t sum;

			busy = true;
			received++;
			if (from < 0 || from >= g_nproc || from == rank ||
			    seq >= count_to(from, rank) || src[k] != E.addr[from]) {
				fprintf(stderr,
				        "rank %d (%s): tag %#llx from fi_addr %llu, "
				        "len %zu\n",
				        rank, half(), (unsigned long long)c[k].tag,
				        (unsigned long long)src[k], c[k].len);
				CHECK(0);
				goto repost;
			}
			if (seen[from][seq]++) {
				fprintf(stderr, "rank %d (%s): %d:%u (%zu bytes) twice\n",
				        rank, half(), from, seq, c[k].len);
				CHECK(0);
				goto repost;
			}
			want_len = size_of(c[k].tag, rank);
			if (c[k].len != want_len) {
				fprintf(stderr, "rank %d (%s): %d:%u len %zu, want %zu\n",
				        rank, half(), from, seq, c[k].len, want_len);
				CHECK(0);
				goto repost;
			}
			bad_at = verify(s->buf, c[k].len, seed_of(c[k].tag, rank), &sum,
			                &nbad);
			if (bad_at != (size_t)-1) {
				fprintf(
				    stderr,
				    "rank %d (%s): %d:%u of %zu bytes: %zu bad "
				    "bytes, first at %zu (got %#x, want %#x)\n",
				    rank, half(), from, seq, c[k].len, nbad, bad_at,
				    (uint8_t)s->buf[bad_at],
				    (uint8_t)(word(seed_of(c[k].tag, rank), bad_at / 8) >>
				              bad_at % 8 * 8));
				CHECK(0);
				goto repost;
			}
			if (!(c[k].flags & FI_REMOTE_CQ_DATA) || c[k].data != sum) {
				fprintf(stderr,
				        "rank %d (%s): %d:%u of %zu bytes: flags %#llx, "
				        "CQ data %#llx, want checksum %#llx\n",
				        rank, half(), from, seq, c[k].len,
				        (unsigned long long)c[k].flags,
				        (unsigned long long)c[k].data,
				        (unsigned long long)sum);
				CHECK(0);
				goto repost;
			}
			got_from[from]++;
			bytes_in += c[k].len;
		repost:
			CHECK_INT(fi_trecv(E.ep, s->buf, g_max, NULL, FI_ADDR_UNSPEC, 0,
			                   ~0ULL, s),
			          0);
		}
		if (!busy && ++idle % 16 == 0)
			sched_yield();
	}
	if (!cq_error && (sent_done < per || received < expect)) {
		/* What is missing, to tell a lost message from a stuck one. */
		fprintf(stderr,
		        "rank %d (%s): stuck after %.1f s: %u of %u sent (%u posted), "
		        "%u of %u received\n",
		        rank, half(), (et_now_us() - t0) / 1e6, sent_done, per, sent,
		        received, expect);
		for (unsigned i = 0; i < WINDOW + nbig; i++)
			if (txs[i].busy)
				fprintf(stderr,
				        "rank %d: send %d:%u to %d (%zu bytes) "
				        "not completed\n",
				        rank, rank, txs[i].seq, txs[i].peer, txs[i].len);
		for (int f = 0; f < g_nproc; f++) {
			unsigned shown = 0;

			if (f == rank)
				continue;
			for (uint32_t q = 0; q < count_to(f, rank) && shown < 8; q++)
				if (!seen[f][q]) {
					fprintf(
					    stderr,
					    "rank %d: %d:%u (%zu bytes) not received\n",
					    rank, f, q, size_of(tag_of(f, q), rank));
					shown++;
				}
		}
	}
	CHECK_INT(sent_done, per);
	CHECK_INT(received, expect);
	for (int s = 0; s < g_nproc; s++)
		if (s != rank)
			CHECK_INT(got_from[s], count_to(s, rank));
	fprintf(stderr, "rank %d (%s): %u sent, %u received (%.2f GB) in %.2f s\n", rank,
	        half(), sent_done, received, bytes_in / 1e9, (et_now_us() - t0) / 1e6);
	/* Everyone done before anyone leaves: late receivers still need us,
	 * and late senders our acknowledgements. */
	et_barrier_progress(&E);
	CHECK_INT(et_close(&E), 0);
	for (unsigned i = 0; i < WINDOW + nbig; i++)
		free(txs[i].buf);
	for (unsigned i = 0; i < nrx; i++)
		free(rxs[i].buf);
	free(txs);
	free(rxs);
	for (int s = 0; s < g_nproc; s++)
		free(seen[s]);
	return check_done();
}

int main(int argc, char **argv)
{
	int tmo = 200, bad;
	char *e;

	if (argc > 4) {
		fprintf(stderr, "usage: %s [TOTAL_MESSAGES [MAX_SIZE [PROCESSES]]]\n",
		        argv[0]);
		return 2;
	}
	if (argc > 3) {
		long v = strtol(argv[3], &e, 0);

		if (*e || v < 2 || v > MAX_PROC) {
			fprintf(stderr, "bad PROCESSES %s\n", argv[3]);
			return 2;
		}
		g_nproc = (int)v;
	}
	if (argc > 1) {
		unsigned long v = strtoul(argv[1], &e, 0);

		if (*e || v < (unsigned long)(g_nproc * (g_nproc - 1)) || v > 100000000) {
			fprintf(stderr, "bad TOTAL_MESSAGES %s\n", argv[1]);
			return 2;
		}
		g_total = (unsigned)v;
	}
	if (argc > 2) {
		unsigned long long v = strtoull(argv[2], &e, 0);

		if (*e || v < 1 || v > (1ull << 30)) {
			fprintf(stderr, "bad MAX_SIZE %s\n", argv[2]);
			return 2;
		}
		g_max = (size_t)v;
	}
	classes_init();
	if (g_total > DEF_TOTAL || g_max > DEF_MAXSZ)
		tmo = 290; /* two halves within meson's 600 s */
	fprintf(stderr, "%u messages, 1 B .. %zu B, %d processes\n", g_total, g_max, g_nproc);
	if (!et_desc()->cma_switch) {
		tmo = 580;
		return et_run("stress", g_nproc, tmo, proc, NULL, 0);
	}
	g_cma = true;
	bad = et_run("stress (CMA)", g_nproc, tmo, proc, NULL, 0);
	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	g_cma = false;
	bad |= et_run("stress (no CMA)", g_nproc, tmo, proc, NULL, 0);
	return bad;
}
