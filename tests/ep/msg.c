/* msg.c - messages between two processes on the provider under test:
 * every size from 0 B to 16 MiB with content checks (receive posted first
 * and unexpected), sendv/recvv, remote CQ data, inject, FI_SOURCE addresses,
 * selective completion and send/receive counters, and FI_INJECT as the
 * endpoint's default transmit flag. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "eptest.h"
#include "v1_names.h"

#define SENDER   1 /* rank 1 sends, so a correct FI_SOURCE address is 1, not 0 */
#define RECEIVER 0
#define TMO      20000
#define MAX_SIZE ((size_t)16 << 20)

static struct et_ep E;

/* Wait for our own transmit completion of context ctx. */
static void tx_wait(void *ctx)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;

	CHECK_INT(et_read(E.txcq, &c, NULL, &err, NULL, TMO), 1);
	CHECK(c.op_context == ctx);
	CHECK(c.flags & FI_SEND);
}

/* Receive one completion and check everything about it. */
static void rx_check(void *ctx, void *buf, size_t len, uint64_t seed, uint64_t flags,
                     uint64_t data)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	fi_addr_t src = 12345;
	size_t bad;

	if (et_read(E.rxcq, &c, &src, &err, NULL, TMO) != 1) {
		fprintf(stderr, "len %zu: no completion (err %d)\n", len, err.err);
		CHECK(0);
		return;
	}
	CHECK(c.op_context == ctx);
	CHECK_INT(c.len, len);
	CHECK_HEX(c.flags & (FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA), flags);
	if (flags & FI_REMOTE_CQ_DATA)
		CHECK_HEX(c.data, data);
	CHECK_INT(src, E.addr[SENDER]);
	bad = et_verify(buf, len, seed);
	if (bad != (size_t)-1) {
		fprintf(stderr, "len %zu: content differs at byte %zu\n", len, bad);
		CHECK(0);
	}
}

/* ---- every size, posted first and unexpected ------------------------------ */

static void sizes(char *buf)
{
	size_t list[96], n = 0;

	list[n++] = 0;
	for (size_t p = 1; p <= MAX_SIZE; p <<= 1) {
		list[n++] = p;
		if (p > 2 && p < MAX_SIZE)
			list[n++] = p + (p & 0x5555 ? 3 : 1); /* odd sizes near each */
	}
	list[n++] = 4095;
	list[n++] = 1000003;
	list[n++] = MAX_SIZE - 1;
	for (int unexp = 0; unexp < 2; unexp++) {
		for (size_t i = 0; i < n; i++) {
			size_t len = list[i];
			uint64_t seed = len * 2 + (uint64_t)unexp;
			int ctx;

			if (E.rank == SENDER) {
				et_fill(buf, len, seed);
				if (!unexp)
					et_barrier(); /* receive posted */
				CHECK_INT(
				    fi_send(E.ep, buf, len, NULL, E.addr[RECEIVER], &ctx),
				    0);
				if (unexp)
					et_barrier(); /* send issued */
				tx_wait(&ctx);
			} else {
				memset(buf, 0xee, len);
				if (unexp)
					et_barrier();
				CHECK_INT(fi_recv(E.ep, buf, MAX_SIZE, NULL,
				                  FI_ADDR_UNSPEC, &ctx),
				          0);
				if (!unexp)
					et_barrier();
				rx_check(&ctx, buf, len, seed, FI_RECV | FI_MSG, 0);
			}
		}
	}
}

/* ---- sendv / recvv ------------------------------------------------------------ */

static void vectors(char *buf)
{
	/* Pieces chosen to cross the inline, bounce-buffer and rendezvous
	 * sizes; the receiver cuts the same bytes differently. */
	static const size_t totals[] = {37, 3000, 70001, (size_t)1 << 20};

	for (size_t t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
		size_t total = totals[t];
		uint64_t seed = 7000 + t;
		int ctx;

		if (E.rank == SENDER) {
			size_t cut[4] = {1, total / 3, total / 2 - 1, 0};
			struct iovec iov[4];
			size_t off = 0;

			cut[3] = total - cut[0] - cut[1] - cut[2];
			et_fill(buf, total, seed);
			for (int i = 0; i < 4; i++) {
				/* Scattered around the buffer, not contiguous. */
				char *piece = buf + MAX_SIZE / 2 + off + (size_t)i * 64;

				memcpy(piece, buf + off, cut[i]);
				iov[i].iov_base = piece;
				iov[i].iov_len = cut[i];
				off += cut[i];
			}
			et_barrier();
			CHECK_INT(fi_sendv(E.ep, iov, NULL, 4, E.addr[RECEIVER], &ctx),
			          0);
			tx_wait(&ctx);
		} else {
			size_t cut[3] = {total / 5, total / 5 * 3, 0};
			struct iovec iov[3];
			char *land = buf + MAX_SIZE / 2;
			size_t off = 0;

			cut[2] = total - cut[0] - cut[1];
			memset(buf, 0, MAX_SIZE);
			for (int i = 0; i < 3; i++) {
				iov[i].iov_base = land + off + (size_t)i * 128;
				iov[i].iov_len = cut[i];
				off += cut[i];
			}
			CHECK_INT(fi_recvv(E.ep, iov, NULL, 3, FI_ADDR_UNSPEC, &ctx), 0);
			et_barrier();
			/* rx_check verifies buf: gather the pieces there first. */
			{
				struct fi_cq_tagged_entry c;
				fi_addr_t src;

				CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
				CHECK(c.op_context == &ctx);
				CHECK_INT(c.len, total);
				CHECK_INT(src, E.addr[SENDER]);
				off = 0;
				for (int i = 0; i < 3; i++) {
					memcpy(buf + off, iov[i].iov_base, cut[i]);
					off += cut[i];
				}
				CHECK_INT(et_verify(buf, total, seed), (size_t)-1);
			}
		}
	}
}

/* ---- remote CQ data, tagged and not, eager and rendezvous ------------------------ */

/* An empty message with no iov at all (msg_iov NULL, iov_count 0), as
 * Open MPI sends zero-byte messages: delivered, with nothing read from the
 * NULL list (UBSan halts on a memcpy from NULL). */
static void empty_iov(void)
{
	struct fi_msg msg = {.msg_iov = NULL, .iov_count = 0};
	int ctx;

	if (E.rank == SENDER) {
		et_barrier();
		msg.addr = E.addr[RECEIVER];
		msg.context = &ctx;
		CHECK_INT(fi_sendmsg(E.ep, &msg, 0), 0);
		tx_wait(&ctx);
		/* tagged, and queued behind nothing: the same through fi_tsendmsg */
		{
			struct fi_msg_tagged t = {.addr = E.addr[RECEIVER], .tag = 77,
			                          .context = &ctx};

			CHECK_INT(fi_tsendmsg(E.ep, &t, 0), 0);
			tx_wait(&ctx);
		}
	} else {
		struct fi_msg_tagged t = {.addr = FI_ADDR_UNSPEC, .tag = 77, .context = &ctx};

		msg.addr = FI_ADDR_UNSPEC;
		msg.context = &ctx;
		CHECK_INT(fi_recvmsg(E.ep, &msg, 0), 0);
		CHECK_INT(fi_trecvmsg(E.ep, &t, 0), 0);
		et_barrier();
		rx_check(&ctx, NULL, 0, 0, FI_RECV | FI_MSG, 0);
		rx_check(&ctx, NULL, 0, 0, FI_RECV | FI_TAGGED, 0);
	}
	et_barrier();
}

static void cq_data(char *buf)
{
	/* 176..200: around what fits one ring cell beside a header with a
	 * tag and data (the link's send_words, or its fallback). */
	static const size_t lens[] = {0,   100, 176, 184, 185, 191,
	                              192, 193, 200, 20000, (size_t)3 << 20};

	for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]) * 2; t++) {
		size_t len = lens[t / 2];
		bool tagged = t & 1;
		uint64_t data = 0xfeedf00d00000000ULL | t, seed = 9000 + t;
		int ctx;

		if (E.rank == SENDER) {
			et_fill(buf, len, seed);
			et_barrier();
			CHECK_INT(tagged ? fi_tsenddata(E.ep, buf, len, NULL, data,
			                                E.addr[RECEIVER], 0x77, &ctx)
			                 : fi_senddata(E.ep, buf, len, NULL, data,
			                               E.addr[RECEIVER], &ctx),
			          0);
			tx_wait(&ctx);
		} else {
			memset(buf, 0, len);
			CHECK_INT(
			    tagged ? fi_trecv(E.ep, buf, len, NULL, FI_ADDR_UNSPEC, 0x77,
			                      0, &ctx)
			           : fi_recv(E.ep, buf, len, NULL, FI_ADDR_UNSPEC, &ctx),
			    0);
			et_barrier();
			rx_check(&ctx, buf, len, seed,
			         FI_RECV | FI_REMOTE_CQ_DATA |
			             (tagged ? FI_TAGGED : FI_MSG),
			         data);
		}
	}
}

/* ---- inject: no completion, buffer reusable at once ---------------------------------
 */

static void inject(char *buf)
{
	size_t max = E.info->tx_attr->inject_size;
	size_t lens[] = {0, 1, 64, 250, max};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	int ctx[N];

	CHECK(max >= 64);
	if (E.rank == SENDER) {
		struct fi_cq_tagged_entry c;

		CHECK_INT(fi_inject(E.ep, buf, max + 1, E.addr[RECEIVER]), -FI_EMSGSIZE);
		for (size_t i = 0; i < N; i++) {
			et_fill(buf, lens[i], 500 + i);
			CHECK_INT(
			    i & 1 ? fi_tinject(E.ep, buf, lens[i], E.addr[RECEIVER], 0x99)
			          : fi_inject(E.ep, buf, lens[i], E.addr[RECEIVER]),
			    0);
			memset(buf, 0xaa, lens[i]); /* ours again at once */
		}
		for (int i = 0; i < 50; i++)
			et_progress(&E);
		CHECK_INT(fi_cq_read(E.txcq, &c, 1),
		          -FI_EAGAIN); /* no entries for inject */
		et_barrier();
	} else {
		et_barrier();
		for (size_t i = 0; i < N; i++) {
			char *b = buf + i * (max + 64);

			CHECK_INT(
			    i & 1 ? fi_trecv(E.ep, b, max, NULL, FI_ADDR_UNSPEC, 0x99, 0,
			                     &ctx[i])
			          : fi_recv(E.ep, b, max, NULL, FI_ADDR_UNSPEC, &ctx[i]),
			    0);
		}
		for (size_t i = 0; i < N; i++) {
			struct fi_cq_tagged_entry c;
			fi_addr_t src;

			CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
			CHECK(c.op_context == &ctx[i]);
			CHECK_INT(c.len, lens[i]);
			CHECK_INT(src, E.addr[SENDER]);
			CHECK_INT(et_verify(buf + i * (max + 64), lens[i], 500 + i),
			          (size_t)-1);
		}
	}
}

/* ---- FI_SOURCE for a sender not in the AV -------------------------------------------
 */

static void unknown_source(char *buf)
{
	int ctx;

	if (E.rank == SENDER) {
		et_barrier(); /* the receiver forgot us */
		et_fill(buf, 10, 42);
		CHECK_INT(fi_send(E.ep, buf, 10, NULL, E.addr[RECEIVER], &ctx), 0);
		tx_wait(&ctx);
		et_barrier();
	} else {
		struct fi_cq_tagged_entry c;
		fi_addr_t src = 0;
		fi_addr_t gone = E.addr[SENDER];

		CHECK_INT(fi_av_remove(E.av, &gone, 1, 0), 0);
		CHECK_INT(fi_recv(E.ep, buf, 64, NULL, FI_ADDR_UNSPEC, &ctx), 0);
		et_barrier();
		CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
		CHECK_INT(c.len, 10);
		CHECK_HEX(src, FI_ADDR_NOTAVAIL);
		CHECK_INT(et_verify(buf, 10, 42), (size_t)-1);
		et_barrier();
	}
}

/* ---- selective completion and counters ------------------------------------------------
 */

static bool cntr_reach(struct fid_cntr *c, uint64_t want)
{
	uint64_t end = et_now_us() + TMO * 1000ull;

	while (fi_cntr_read(c) < want && et_now_us() < end)
		;
	return fi_cntr_read(c) >= want;
}

static void selective(char *buf)
{
	enum { N = 8 };
	int ctx[N];

	/* Even messages ask for a completion with FI_COMPLETION, odd ones
	 * do not: only the even ones may appear, the counters see all. */
	if (E.rank == SENDER) {
		struct fi_cq_tagged_entry c;

		et_barrier();
		for (int i = 0; i < N; i++) {
			struct iovec iov = {buf + i * 10000,
			                    (size_t)(i % 3 ? 100 : 9000)};
			struct fi_msg m = {.msg_iov = &iov,
			                   .iov_count = 1,
			                   .addr = E.addr[RECEIVER],
			                   .context = &ctx[i]};

			et_fill(iov.iov_base, iov.iov_len, 300 + i);
			CHECK_INT(fi_sendmsg(E.ep, &m, i % 2 ? 0 : FI_COMPLETION), 0);
		}
		CHECK(cntr_reach(E.scntr, N));
		CHECK_INT(fi_cntr_read(E.scntr), N);
		CHECK_INT(fi_cntr_readerr(E.scntr), 0);
		/* In any order (comp_order is LM_ORDER_NONE): a 9000-byte
		 * send waits for the receiver's copy, a small one does not. */
		for (int i = 0, seen = 0; i < N; i += 2) {
			int k;

			CHECK_INT(et_read(E.txcq, &c, NULL, NULL, NULL, TMO), 1);
			k = (int)((int *)c.op_context - ctx);
			CHECK(k >= 0 && k < N && k % 2 == 0 && !(seen & 1 << k));
			if (k >= 0 && k < N)
				seen |= 1 << k;
		}
		CHECK_INT(fi_cq_read(E.txcq, &c, 1), -FI_EAGAIN);
		et_barrier();
	} else {
		struct fi_cq_tagged_entry c;

		for (int i = 0; i < N; i++) {
			struct iovec iov = {buf + i * 10000, 10000};
			struct fi_msg m = {.msg_iov = &iov,
			                   .iov_count = 1,
			                   .addr = FI_ADDR_UNSPEC,
			                   .context = &ctx[i]};

			CHECK_INT(fi_recvmsg(E.ep, &m, i % 2 ? 0 : FI_COMPLETION), 0);
		}
		et_barrier();
		CHECK(cntr_reach(E.rcntr, N));
		CHECK_INT(fi_cntr_read(E.rcntr), N);
		for (int i = 0; i < N; i++)
			CHECK_INT(et_verify(buf + i * 10000, (size_t)(i % 3 ? 100 : 9000),
			                    300 + i),
			          (size_t)-1);
		for (int i = 0, seen = 0; i < N; i += 2) {
			fi_addr_t src;
			int k;

			CHECK_INT(et_read(E.rxcq, &c, &src, NULL, NULL, TMO), 1);
			k = (int)((int *)c.op_context - ctx);
			CHECK(k >= 0 && k < N && k % 2 == 0 && !(seen & 1 << k));
			if (k >= 0 && k < N)
				seen |= 1 << k;
			CHECK_INT(c.len, k % 3 ? 100 : 9000);
			CHECK_INT(src, E.addr[SENDER]);
		}
		CHECK_INT(fi_cq_read(E.rxcq, &c, 1), -FI_EAGAIN);
		et_barrier();
	}
}

/* ---- FI_INJECT as a default op flag ------------------------------------------------
 */

/* An endpoint opened with tx_attr->op_flags = FI_INJECT (fabtests'
 * fi_msg_inject asks for it): every fi_send and fi_tsend gives the buffer
 * back on return, yet still completes with its context, and one past
 * inject_size is refused.  More than the eager credit is sent before the
 * receiver posts anything, so the last sends go out later, from copies. */
static void inject_default(char *buf)
{
	size_t max = E.info->tx_attr->inject_size;
	size_t n = ((size_t)2 << 20) / max; /* twice the engine's 1 MiB credit */
	int *ctx = calloc(n, sizeof(*ctx));
	char *seen = calloc(n, 1);

	CHECK_HEX(E.info->tx_attr->op_flags & FI_INJECT, FI_INJECT);
	CHECK(max >= 64 && ctx && seen);
	if (!ctx || !seen || max < 64)
		goto out;
	if (E.rank == SENDER) {
		et_barrier();
		CHECK_INT(fi_send(E.ep, buf, max + 1, NULL, E.addr[RECEIVER], &ctx[0]),
		          -FI_EMSGSIZE);
		for (size_t i = 0; i < n; i++) {
			ssize_t ret;

			et_fill(buf, max, 700 + i);
			do {
				ret = i & 1 ? fi_tsend(E.ep, buf, max, NULL,
				                       E.addr[RECEIVER], 0x77, &ctx[i])
				            : fi_send(E.ep, buf, max, NULL,
				                      E.addr[RECEIVER], &ctx[i]);
				if (ret == -FI_EAGAIN)
					et_progress(&E);
			} while (ret == -FI_EAGAIN);
			CHECK_INT(ret, 0);
			memset(buf, 0xaa, max); /* ours again at once */
		}
		et_barrier(); /* the receiver posts now */
		for (size_t i = 0; i < n; i++) {
			struct fi_cq_tagged_entry c;
			size_t k;

			if (et_read(E.txcq, &c, NULL, NULL, NULL, TMO) != 1) {
				fprintf(stderr,
				        "inject default: %zu of %zu sends completed\n", i,
				        n);
				CHECK(0);
				break;
			}
			k = (size_t)((int *)c.op_context - ctx);
			CHECK(k < n && !seen[k]);
			if (k < n)
				seen[k] = 1;
		}
	} else {
		et_barrier();
		et_barrier();
		for (size_t i = 0; i < n; i++)
			CHECK_INT(i & 1 ? fi_trecv(E.ep, buf + i * max, max, NULL,
			                           FI_ADDR_UNSPEC, 0x77, 0, &ctx[i])
			                : fi_recv(E.ep, buf + i * max, max, NULL,
			                          FI_ADDR_UNSPEC, &ctx[i]),
			          0);
		for (size_t i = 0; i < n; i++) {
			struct fi_cq_tagged_entry c;
			size_t k;

			if (et_read(E.rxcq, &c, NULL, NULL, NULL, TMO) != 1) {
				fprintf(stderr, "inject default: %zu of %zu received\n",
				        i, n);
				CHECK(0);
				break;
			}
			k = (size_t)((int *)c.op_context - ctx);
			CHECK(k < n && !seen[k]);
			if (k >= n)
				continue;
			seen[k] = 1;
			CHECK_INT(c.len, max);
			if (et_verify(buf + k * max, max, 700 + k) != (size_t)-1) {
				fprintf(stderr, "inject default: message %zu differs\n",
				        k);
				CHECK(0);
			}
		}
	}
out:
	free(ctx);
	free(seen);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts sel = {.selective = true, .split_cq = true, .cntrs = true};
	struct et_opts inj = {.tx_op_flags = FI_INJECT};
	char *buf = malloc(MAX_SIZE + (1 << 20));

	(void)rank, (void)nprocs, (void)arg;
	if (!buf || et_open(&E, NULL))
		return 2;
	sizes(buf);
	vectors(buf);
	empty_iov();
	cq_data(buf);
	inject(buf);
	unknown_source(buf);
	CHECK_INT(et_close(&E), 0);

	if (et_open(&E, &sel))
		return 2;
	selective(buf);
	CHECK_INT(et_close(&E), 0);

	if (et_open(&E, &inj))
		return 2;
	inject_default(buf);
	CHECK_INT(et_close(&E), 0);
	free(buf);
	return check_done();
}

int main(void)
{
	int bad = et_run("msg", 2, 240, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1); /* the children inherit it */
	bad |= et_run("msg (no CMA)", 2, 240, proc, NULL, 0);
	return bad;
}
