/* stress.c - four processes all-to-all, 20,000 tagged messages sent by
 * each, random sizes from 0 to 256 KiB (log-uniform, so every protocol is
 * hit often), every one checked for content and counted: nothing lost,
 * duplicated or corrupted, within a bounded time; with and without CMA. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "shmtest.h"

#define NPROC  4
#define PER    20000 /* messages each process sends */
#define MAXSZ  (256 * 1024)
#define WINDOW 48 /* sends and receives outstanding per process */
#define TMO_US (150 * 1000000ull)

static struct st_ep E;

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

static size_t size_of(uint64_t tag, int dst)
{
	uint64_t h = mix(tag * 31 + (uint64_t)dst);

	return (size_t)(h % (((uint64_t)1 << (h >> 58) % 19) + 1));
}

static uint64_t seed_of(uint64_t tag, int dst)
{
	return tag ^ (uint64_t)dst << 56;
}

/* How many messages src sends to dst: round robin over the others. */
static uint32_t count_to(int src, int dst)
{
	int k = (dst - src + NPROC) % NPROC - 1; /* dst's place among the others */

	return PER / (NPROC - 1) + ((unsigned)k < PER % (NPROC - 1) ? 1 : 0);
}

struct slot {
	char *buf;
	bool busy;
};

static int proc(int rank, int nprocs, void *arg)
{
	struct st_opts o = {.split_cq = true, .cq_size = 256};
	struct slot tx[WINDOW], rx[WINDOW];
	static uint8_t *seen[NPROC];
	uint32_t next_seq[NPROC] = {0}, got_from[NPROC] = {0};
	unsigned sent = 0, sent_done = 0, received = 0, expect = 0, dst_i = 0;
	uint64_t end, t0;
	unsigned idle = 0;

	(void)nprocs, (void)arg;
	if (st_open(&E, &o))
		return 2;
	for (int s = 0; s < NPROC; s++) {
		if (s != rank)
			expect += count_to(s, rank);
		seen[s] = calloc(PER, 1);
	}
	for (int i = 0; i < WINDOW; i++) {
		tx[i] = (struct slot){malloc(MAXSZ), false};
		rx[i] = (struct slot){malloc(MAXSZ), true};
		CHECK_INT(fi_trecv(E.ep, rx[i].buf, MAXSZ, NULL, FI_ADDR_UNSPEC, 0, ~0ULL,
		                   &rx[i]),
		          0);
	}
	st_barrier();
	t0 = st_now_us();
	end = t0 + TMO_US;
	while ((sent_done < PER || received < expect) && st_now_us() < end) {
		struct fi_cq_tagged_entry c[16];
		fi_addr_t src[16];
		bool busy = false;
		ssize_t n;

		/* Send while a buffer is free. */
		for (int i = 0; i < WINDOW && sent < PER; i++) {
			int dst;
			uint64_t tag;
			size_t len;
			ssize_t r;

			if (tx[i].busy)
				continue;
			dst = (rank + 1 + (int)(dst_i % (NPROC - 1))) % NPROC;
			tag = tag_of(rank, next_seq[dst]);
			len = size_of(tag, dst);
			st_fill(tx[i].buf, len, seed_of(tag, dst));
			r = fi_tsend(E.ep, tx[i].buf, len, NULL, E.addr[dst], tag,
			             &tx[i]);
			if (r == -FI_EAGAIN)
				break;
			CHECK_INT(r, 0);
			tx[i].busy = true;
			next_seq[dst]++;
			dst_i++;
			sent++;
			busy = true;
		}
		n = fi_cq_read(E.txcq, c, 16);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			fi_cq_readerr(E.txcq, &err, 0);
			fprintf(stderr, "rank %d: send error %d\n", rank, err.err);
			CHECK(0);
			break;
		}
		for (ssize_t k = 0; k < n; k++) {
			((struct slot *)c[k].op_context)->busy = false;
			sent_done++;
			busy = true;
		}
		n = fi_cq_readfrom(E.rxcq, c, 16, src);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			fi_cq_readerr(E.rxcq, &err, 0);
			fprintf(stderr, "rank %d: receive error %d\n", rank, err.err);
			CHECK(0);
			break;
		}
		for (ssize_t k = 0; k < n; k++) {
			struct slot *s = c[k].op_context;
			int from = (int)(c[k].tag >> 32);
			uint32_t seq = (uint32_t)c[k].tag;

			busy = true;
			if (from < 0 || from >= NPROC || from == rank || seq >= PER ||
			    src[k] != E.addr[from]) {
				fprintf(stderr, "rank %d: tag %#llx from fi_addr %llu\n",
				        rank, (unsigned long long)c[k].tag,
				        (unsigned long long)src[k]);
				CHECK(0);
			} else if (seen[from][seq]++) {
				fprintf(stderr, "rank %d: %d:%u twice\n", rank, from,
				        seq);
				CHECK(0);
			} else if (c[k].len != size_of(c[k].tag, rank) ||
			           st_verify(s->buf, c[k].len, seed_of(c[k].tag, rank)) !=
			               (size_t)-1) {
				fprintf(stderr,
				        "rank %d: %d:%u len %zu (want %zu) or content\n",
				        rank, from, seq, c[k].len,
				        size_of(c[k].tag, rank));
				CHECK(0);
			} else {
				got_from[from]++;
			}
			received++;
			CHECK_INT(fi_trecv(E.ep, s->buf, MAXSZ, NULL, FI_ADDR_UNSPEC, 0,
			                   ~0ULL, s),
			          0);
		}
		if (!busy && ++idle % 16 == 0)
			sched_yield();
	}
	CHECK_INT(sent_done, PER);
	CHECK_INT(received, expect);
	for (int s = 0; s < NPROC; s++)
		if (s != rank)
			CHECK_INT(got_from[s], count_to(s, rank));
	fprintf(stderr, "rank %d: %u sent, %u received in %.2f s\n", rank, sent_done,
	        received, (st_now_us() - t0) / 1e6);
	/* Everyone done before anyone leaves: late receivers still need us. */
	st_barrier();
	CHECK_INT(st_close(&E), 0);
	for (int i = 0; i < WINDOW; i++) {
		free(tx[i].buf);
		free(rx[i].buf);
	}
	for (int s = 0; s < NPROC; s++)
		free(seen[s]);
	return check_done();
}

int main(void)
{
	int bad = st_run("stress", NPROC, 200, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= st_run("stress (no CMA)", NPROC, 200, proc, NULL, 0);
	return bad;
}
