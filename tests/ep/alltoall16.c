/* alltoall16.c - sixteen processes, each sending every other one eight
 * messages a round for three rounds (fi_send and fi_tsend; inline,
 * bounce-buffer and rendezvous sizes up to 1 MiB): every message arrives
 * exactly once, intact, with the sender's own fi_addr as its FI_SOURCE
 * address; with and without CMA. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define NPROC    ET_MAX_PROCS
#define PER_PAIR 8 /* messages from each process to each other one */
#define NSEND    ((NPROC - 1) * PER_PAIR)
#define NTAGGED  ((NPROC - 1) * PER_PAIR / 2)
#define BIG      ((size_t)1 << 20)
#define RXWIN    8 /* untagged receives posted at a time, BIG bytes each */
#define TAG_BASE 0xa110000000000000ULL
#define ROUNDS   3 /* fresh sizes and contents each */
#define TMO_US   (60 * 1000000ull)

static struct et_ep E;
static int round_no;

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	return x ^ (x >> 33);
}

/* Message i from src to dst.  Odd i are tagged.  i / 2 picks the size
 * class, and the classes' ranges do not overlap, so an untagged message's
 * class (hence i) follows from its length alone:
 *   0: 0..49 B and 1: 50..100 B (inline in a ring cell),
 *   2: 1..4 KiB (bounce buffer), 3: 64..256 KiB (rendezvous);
 * the untagged rendezvous message to the next rank is 1 MiB exactly. */
static size_t size_of(int src, int dst, int i)
{
	uint64_t h =
	    mix(((uint64_t)round_no * NPROC * NPROC + (uint64_t)(src * NPROC + dst)) *
	            PER_PAIR +
	        (uint64_t)i + 1);

	switch (i / 2) {
	case 0:
		return h % 50;
	case 1:
		return 50 + h % 51;
	case 2:
		return 1024 + h % 3073;
	default:
		if (!(i & 1) && dst == (src + 1) % NPROC)
			return BIG;
		return 65536 + h % (196608 + 1);
	}
}

/* The untagged message index from src of this length, or -1. */
static int index_of_len(int src, int dst, size_t len)
{
	for (int i = 0; i < PER_PAIR; i += 2)
		if (size_of(src, dst, i) == len)
			return i;
	return -1;
}

static uint64_t seed_of(int src, int dst, int i)
{
	return 0x5eed0000ULL + (uint64_t)round_no * 100000 +
	       (uint64_t)(src * NPROC + dst) * PER_PAIR + (uint64_t)i;
}

static uint64_t tag_of(int src, int i)
{
	return TAG_BASE | (uint64_t)src << 8 | (uint64_t)i;
}

/* Receives are posted for FI_ADDR_UNSPEC: only FI_SOURCE tells the sender. */
struct rx {
	char *buf;
	size_t len;
	bool tagged;
	int src, idx; /* tagged: the one message it was posted for */
};

struct state {
	int rank;
	unsigned char seen[NPROC][PER_PAIR];
	unsigned received, sent_done;
	struct rx untagged[RXWIN];
	struct rx tagged[NTAGGED];
};

static int rank_of(fi_addr_t a)
{
	for (int r = 0; r < NPROC; r++)
		if (E.addr[r] == a)
			return r;
	return -1;
}

static void post_untagged(struct rx *r)
{
	CHECK_INT(fi_recv(E.ep, r->buf, BIG, NULL, FI_ADDR_UNSPEC, r), 0);
}

static void post_tagged(struct rx *r)
{
	CHECK_INT(fi_trecv(E.ep, r->buf, r->len, NULL, FI_ADDR_UNSPEC,
	                   tag_of(r->src, r->idx), 0, r),
	          0);
}

/* One receive completion: whose, which, intact, and the first time. */
static void on_recv(struct state *s, const struct fi_cq_tagged_entry *c, fi_addr_t src)
{
	struct rx *r = c->op_context;
	int from = rank_of(src), idx;
	size_t bad;

	s->received++;
	if (from < 0 || from == s->rank) {
		fprintf(stderr, "rank %d: FI_SOURCE fi_addr %llu is no peer (len %zu)\n",
		        s->rank, (unsigned long long)src, c->len);
		CHECK(0);
		goto repost;
	}
	if (r->tagged) {
		CHECK_HEX(c->flags & (FI_RECV | FI_MSG | FI_TAGGED), FI_RECV | FI_TAGGED);
		CHECK_HEX(c->tag, tag_of(r->src, r->idx));
		if (from != r->src) {
			fprintf(stderr,
			        "rank %d: tag %#llx (sent by rank %d) reports FI_SOURCE "
			        "rank %d\n",
			        s->rank, (unsigned long long)c->tag, r->src, from);
			CHECK(0);
			from = r->src;
		}
		idx = r->idx;
	} else {
		CHECK_HEX(c->flags & (FI_RECV | FI_MSG | FI_TAGGED), FI_RECV | FI_MSG);
		idx = index_of_len(from, s->rank, c->len);
		if (idx < 0) {
			fprintf(stderr,
			        "rank %d: untagged message of %zu B from rank %d: rank "
			        "%d sends no such size (FI_SOURCE wrong?)\n",
			        s->rank, c->len, from, from);
			CHECK(0);
			goto repost;
		}
	}
	if (s->seen[from][idx]++) {
		fprintf(stderr, "rank %d: message %d from rank %d arrived %d times\n",
		        s->rank, idx, from, s->seen[from][idx]);
		CHECK(0);
	}
	CHECK_INT(c->len, size_of(from, s->rank, idx));
	bad = et_verify(r->buf, c->len, seed_of(from, s->rank, idx));
	if (bad != (size_t)-1) {
		fprintf(stderr,
		        "rank %d: message %d from rank %d (%zu B, %s): content differs "
		        "at byte %zu\n",
		        s->rank, idx, from, c->len, r->tagged ? "tagged" : "untagged",
		        bad);
		CHECK(0);
	}
repost:
	if (!r->tagged)
		post_untagged(r);
}

/* Drain what a CQ has; false after an error entry. */
static bool poll_cqs(struct state *s, bool *busy)
{
	struct fi_cq_tagged_entry c[16];
	fi_addr_t src[16];
	ssize_t n;

	n = fi_cq_read(E.txcq, c, 16);
	for (ssize_t k = 0; k < n; k++) {
		CHECK(c[k].flags & FI_SEND);
		s->sent_done++;
		*busy = true;
	}
	if (n == -FI_EAVAIL || (n < 0 && n != -FI_EAGAIN)) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(E.txcq, &err, 0);
		fprintf(stderr, "rank %d: send failed: read %zd, err %d (%s)\n", s->rank,
		        n, err.err, fi_strerror(err.err));
		CHECK(0);
		return false;
	}
	n = fi_cq_readfrom(E.rxcq, c, 16, src);
	for (ssize_t k = 0; k < n; k++) {
		on_recv(s, &c[k], src[k]);
		*busy = true;
	}
	if (n == -FI_EAVAIL || (n < 0 && n != -FI_EAGAIN)) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(E.rxcq, &err, 0);
		fprintf(stderr,
		        "rank %d: receive failed: read %zd, err %d (%s), olen %zu\n",
		        s->rank, n, err.err, fi_strerror(err.err), err.olen);
		CHECK(0);
		return false;
	}
	return true;
}

/* One round: everyone sends its NSEND messages and takes its NSEND. */
static void exchange(struct state *s)
{
	int rank = s->rank;
	char *txbuf[NSEND];
	size_t txlen[NSEND];
	int txdst[NSEND];
	unsigned next = 0, nt = 0, idle = 0;
	bool posted_late = false;
	uint64_t t0, end;

	memset(s->seen, 0, sizeof(s->seen));
	s->received = s->sent_done = 0;
	/* Every send buffer filled up front; all stay until completion. */
	for (int i = 0, k = 0; i < PER_PAIR; i++) {
		for (int d = 1; d < NPROC; d++, k++) {
			int dst = (rank + d) % NPROC;

			txdst[k] = dst;
			txlen[k] = size_of(rank, dst, i);
			txbuf[k] = malloc(txlen[k] ? txlen[k] : 1);
			et_fill(txbuf[k], txlen[k], seed_of(rank, dst, i));
		}
	}
	/* Exact-size tagged receives, one per expected message; the small
	 * ones posted now, the rendezvous ones only once our sends are out,
	 * so those arrive unexpected as often as not. */
	for (int i = 1; i < PER_PAIR; i += 2) {
		for (int from = 0; from < NPROC; from++) {
			struct rx *r;

			if (from == rank)
				continue;
			r = &s->tagged[nt++];
			*r = (struct rx){.len = size_of(from, rank, i),
			                 .tagged = true,
			                 .src = from,
			                 .idx = i};
			r->buf = malloc(r->len ? r->len : 1);
			if (i < 6)
				post_tagged(r);
		}
	}
	et_barrier();
	t0 = et_now_us();
	end = t0 + TMO_US;
	while ((s->sent_done < NSEND || s->received < NSEND) && et_now_us() < end) {
		bool busy = false;

		while (next < NSEND) {
			int i = (int)(next / (NPROC - 1));
			ssize_t r =
			    i & 1 ? fi_tsend(E.ep, txbuf[next], txlen[next], NULL,
			                     E.addr[txdst[next]], tag_of(rank, i), NULL)
			          : fi_send(E.ep, txbuf[next], txlen[next], NULL,
			                    E.addr[txdst[next]], NULL);

			if (r == -FI_EAGAIN)
				break;
			CHECK_INT(r, 0);
			next++;
			busy = true;
		}
		if (next == NSEND && !posted_late) {
			for (unsigned k = 0; k < nt; k++)
				if (s->tagged[k].idx >= 6)
					post_tagged(&s->tagged[k]);
			posted_late = true;
		}
		if (!poll_cqs(s, &busy))
			break;
		/* Sixteen processes polling on two cores: give way. */
		if (!busy && ++idle % 4 == 0)
			sched_yield();
	}
	CHECK_INT(s->sent_done, NSEND);
	CHECK_INT(s->received, NSEND);
	for (int from = 0; from < NPROC; from++) {
		if (from == rank)
			continue;
		for (int i = 0; i < PER_PAIR; i++)
			if (s->seen[from][i] != 1) {
				fprintf(
				    stderr,
				    "rank %d round %d: message %d from rank %d (%zu B, "
				    "%s) arrived %d times\n",
				    rank, round_no, i, from, size_of(from, rank, i),
				    i & 1 ? "tagged" : "untagged", s->seen[from][i]);
				CHECK(0);
			}
	}
	if (rank == 0)
		fprintf(stderr, "rank 0 round %d: %u sent, %u received in %.2f s\n",
		        round_no, s->sent_done, s->received, (et_now_us() - t0) / 1e6);
	/* Everyone done: nothing more may turn up in what is still posted. */
	et_barrier();
	for (int k = 0; k < 100; k++) {
		struct fi_cq_tagged_entry c;
		fi_addr_t src;
		ssize_t n = fi_cq_readfrom(E.rxcq, &c, 1, &src);

		if (n == -FI_EAGAIN)
			continue;
		fprintf(stderr, "rank %d: extra receive completion (%zd, %zu B)\n", rank,
		        n, n == 1 ? c.len : 0);
		CHECK(0);
		break;
	}
	et_barrier();
	for (int k = 0; k < NSEND; k++)
		free(txbuf[k]);
	for (unsigned k = 0; k < nt; k++)
		free(s->tagged[k].buf);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = *(const struct et_opts *)arg;
	static struct state S;

	(void)nprocs;
	o.split_cq = true;
	if (et_open(&E, &o))
		return 2;
	memset(&S, 0, sizeof(S));
	S.rank = rank;
	/* Untagged receives stay posted from round to round. */
	for (int w = 0; w < RXWIN; w++) {
		S.untagged[w] = (struct rx){.buf = malloc(BIG)};
		post_untagged(&S.untagged[w]);
	}
	for (round_no = 0; round_no < ROUNDS; round_no++)
		exchange(&S);
	CHECK_INT(et_close(&E), 0);
	for (int w = 0; w < RXWIN; w++)
		free(S.untagged[w].buf);
	return check_done();
}

int main(void)
{
	struct et_opts cma = {0}, no_cma = {.no_cma = true};
	int bad = et_run("alltoall16", NPROC, 120, proc, &cma, 0);

	bad |= et_run("alltoall16 (no CMA)", NPROC, 120, proc, &no_cma, 0);
	return bad;
}
