/* multi_recv.c - FI_MULTI_RECV buffers filled by many messages from another
 * process: FI_OPT_MIN_MULTI_RECV, placement inside the buffer without
 * overlap, content, and one FI_MULTI_RECV completion per buffer released. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eptest.h"

#define TMO    20000
#define M      8000
#define BUFSZ  (256 * 1024)
#define MIN_MR 68000 /* more than any message: one always fits */
#define NBUF   2

static struct et_ep E;

static size_t size_of(unsigned i)
{
	if (i % 500 == 7)
		return 66000 + i % 1000; /* over the link's payload: rendezvous */
	if (i % 50 == 9)
		return 3000; /* bounce buffer */
	return i % 300;
}

static void sender(char *buf)
{
	size_t off = 0;
	unsigned done = 0;

	et_barrier(); /* buffers posted */
	for (unsigned i = 0; i < M; i++) {
		size_t len = size_of(i);
		char *b = buf + off;
		uint64_t end = et_now_us() + TMO * 1000ull;
		ssize_t r;

		off += len;
		et_fill(b, len, i);
		/* The index travels as CQ data: completions may come out of
		 * order (a rendezvous finishes after later small ones). */
		while ((r = fi_senddata(E.ep, b, len, NULL, i, E.addr[0], NULL)) ==
		           -FI_EAGAIN &&
		       et_now_us() < end) {
			struct fi_cq_tagged_entry c[8];
			ssize_t n = fi_cq_read(E.txcq, c, 8);

			if (n > 0)
				done += (unsigned)n;
		}
		CHECK_INT(r, 0);
	}
	while (done < M) {
		struct fi_cq_tagged_entry c;

		if (et_read(E.txcq, &c, NULL, NULL, NULL, TMO) != 1)
			break;
		done++;
	}
	CHECK_INT(done, M);
	et_barrier();
}

/* One posting of a buffer; a completion naming a posting already
 * released is an error. */
struct posting {
	struct fi_msg m;
	int buf;
	bool done;
	size_t max_end; /* highest byte placed */
};

static void post(struct posting *p, struct iovec *iov, int b)
{
	p->m = (struct fi_msg){
	    .msg_iov = &iov[b], .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = p};
	p->buf = b;
	CHECK_INT(fi_recvmsg(E.ep, &p->m, FI_MULTI_RECV), 0);
}

static void receiver(void)
{
	static struct posting posts[M];
	static unsigned char used[NBUF][BUFSZ];
	static bool seen[M];
	char *bufs[NBUF];
	struct iovec iov[NBUF];
	size_t v = MIN_MR, vlen = sizeof(v), nposts = 0;
	unsigned released = 0, got = 0;

	CHECK_INT(
	    fi_setopt(&E.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)),
	    0);
	v = 0;
	CHECK_INT(
	    fi_getopt(&E.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &vlen), 0);
	CHECK_INT(v, MIN_MR);
	CHECK_INT(vlen, sizeof(v));
	for (int b = 0; b < NBUF; b++) {
		bufs[b] = malloc(BUFSZ);
		iov[b] = (struct iovec){bufs[b], BUFSZ};
		post(&posts[nposts++], iov, b);
	}
	et_barrier();
	while (got < M) {
		struct fi_cq_tagged_entry c;
		struct fi_cq_err_entry err = {0};
		struct posting *p;
		fi_addr_t src;
		int b;

		if (et_read(E.rxcq, &c, &src, &err, NULL, TMO) != 1) {
			fprintf(stderr, "after %u messages: no completion (err %d)\n",
			        got, err.err);
			CHECK(0);
			break;
		}
		p = c.op_context;
		if (p < posts || p >= posts + nposts || p->done) {
			fprintf(stderr,
			        "completion for a released or unknown buffer: posting "
			        "%td of %zu, flags %#llx, data %llu, len %zu, got %u\n",
			        p - posts, nposts, (unsigned long long)c.flags,
			        (unsigned long long)c.data, c.len, got);
			CHECK(0);
			break;
		}
		b = p->buf;
		if (c.flags & FI_RECV) {
			size_t off = (size_t)((char *)c.buf - bufs[b]);
			uint64_t i = c.data;

			CHECK_HEX(c.flags & (FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA),
			          FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
			CHECK_INT(src, E.addr[1]);
			if (i >= M || seen[i]) {
				fprintf(stderr, "message %llu unknown or seen twice\n",
				        (unsigned long long)i);
				CHECK(0);
				break;
			}
			seen[i] = true;
			CHECK_INT(c.len, size_of((unsigned)i));
			if ((char *)c.buf < bufs[b] || off + c.len > BUFSZ) {
				fprintf(stderr, "message %llu outside its buffer\n",
				        (unsigned long long)i);
				CHECK(0);
				break;
			}
			/* No two messages share a byte of the buffer. */
			for (size_t k = off; k < off + c.len; k++)
				if (used[b][k]++) {
					fprintf(stderr, "message %llu overlaps at %zu\n",
					        (unsigned long long)i, k);
					CHECK(0);
					break;
				}
			if (et_verify(c.buf, c.len, i) != (size_t)-1) {
				fprintf(stderr, "message %llu: content differs\n",
				        (unsigned long long)i);
				CHECK(0);
			}
			if (off + c.len > p->max_end)
				p->max_end = off + c.len;
			got++;
		}
		if (c.flags & FI_MULTI_RECV) {
			/* Released: less than the minimum was left. */
			CHECK(BUFSZ - p->max_end < MIN_MR);
			p->done = true;
			released++;
			memset(used[b], 0, BUFSZ);
			post(&posts[nposts++], iov, b);
		}
	}
	CHECK_INT(got, M);
	/* The bytes sent are several buffers' worth. */
	CHECK(released >= 5);
	et_barrier();
	/* The two buffers still posted go with the endpoint. */
	CHECK_INT(et_close(&E), 0);
	for (int b = 0; b < NBUF; b++)
		free(bufs[b]);
}

static int proc(int rank, int nprocs, void *arg)
{
	struct et_opts o = {.caps = FI_MSG | FI_SOURCE | FI_MULTI_RECV};
	char *buf = malloc((size_t)16 << 20);

	(void)nprocs, (void)arg;
	if (!buf || et_open(&E, &o))
		return 2;
	if (rank == 1) {
		sender(buf);
		CHECK_INT(et_close(&E), 0);
	} else {
		receiver();
	}
	free(buf);
	return check_done();
}

int main(void)
{
	int bad = et_run("multi_recv", 2, 120, proc, NULL, 0);

	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	bad |= et_run("multi_recv (no CMA)", 2, 120, proc, NULL, 0);
	return bad;
}
