/* link.c - the shared-memory transport across real processes: regions and
 * their removal, hostile headers and cells, the MPSC ring, bounce buffers,
 * doorbell wake-ups and cross-memory attach.  Children are always reaped. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "check.h"
#include "core.h"
#include "rdm.h"
#include "shm_link.h"

#define NMSG       100000
#define CHILD_TIME 120

/* ---- process helpers ------------------------------------------------------ */

static pid_t spawn(void (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		alarm(CHILD_TIME);
		fn(arg);
		_exit(check_failures ? 1 : 0);
	}
	CHECK(pid > 0);
	return pid;
}

/* Reap pid; CHECK that it exited with status want (or died by signal sig). */
static void reap(pid_t pid, int want, int sig)
{
	int st = 0;

	if (pid <= 0)
		return;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (sig) {
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sig);
	} else {
		CHECK(WIFEXITED(st));
		if (WIFEXITED(st))
			CHECK_INT(WEXITSTATUS(st), want);
		else if (WIFSIGNALED(st))
			fprintf(stderr, "child %d died by signal %d\n", (int)pid,
			        WTERMSIG(st));
	}
}

static void xwrite(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "pipe write: %s\n", strerror(errno));
			_exit(3);
		}
		p += n;
		len -= (size_t)n;
	}
}

static void xread(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "pipe read: %s\n", n ? strerror(errno) : "EOF");
			_exit(3);
		}
		p += n;
		len -= (size_t)n;
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool shm_file_exists(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	return stat(path, &st) == 0;
}

/* Pushes with retry while the ring is full (the owner is draining). */
static int push_retry(struct shm_peer *p, const void *hdr, size_t hlen,
                      const struct iovec *iov, size_t cnt)
{
	int ret;

	while ((ret = shm_ring_push(p, hdr, hlen, iov, cnt)) == -FI_EAGAIN)
		sched_yield();
	return ret;
}

/* ---- addresses ------------------------------------------------------------ */

static void test_addr(void)
{
	static const char *const bad[] = {
	    "",
	    "fi_shm://",
	    "shm://12/0123456789abcdef",
	    "fi_shm://-1/0123456789abcdef",
	    "fi_shm://12/0123456789abcde",
	    "fi_shm://12/0123456789abcdefa",
	    "fi_shm://12/0123456789abcdeg",
	    "fi_shm://99999999999/0123456789abcdef",
	    "fi_shm://12//0123456789abcdef",
	    "fi_shm://12",
	    "fi_shm://012/0123456789abcdef",
	};
	char buf[SHM_ADDR_MAX];
	uint64_t token = 0;
	pid_t pid = 0;
	size_t i;

	CHECK_INT(shm_addr_format(buf, sizeof(buf), 1234, 0x0123456789abcdefULL), 30);
	CHECK_STR(buf, "fi_shm://1234/0123456789abcdef");
	CHECK_INT(shm_addr_format(buf, 30, 1234, 1), -FI_ETOOSMALL);
	CHECK_INT(shm_addr_format(NULL, 0, 1234, 1), -FI_ETOOSMALL);
	CHECK_INT(shm_addr_format(buf, sizeof(buf), 2147483647, ~0ULL), 36);
	CHECK_INT(shm_addr_parse(buf, &pid, &token), 0);
	CHECK_INT(pid, 2147483647);
	CHECK_HEX(token, ~0ULL);
	CHECK_INT(shm_addr_parse("fi_shm://77/FEDCBA9876543210", &pid, &token), 0);
	CHECK_INT(pid, 77);
	CHECK_HEX(token, 0xfedcba9876543210ULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = shm_addr_parse(bad[i], &pid, &token);

		if (ret != -FI_EINVAL)
			fprintf(stderr, "accepted bad address \"%s\"\n", bad[i]);
		CHECK_INT(ret, -FI_EINVAL);
	}
	CHECK_INT(shm_addr_parse(NULL, &pid, &token), -FI_EINVAL);
	/* Pid 0: a named endpoint's address, found by its name's hash. */
	CHECK_INT(shm_addr_parse("fi_shm://0/0123456789abcdef", &pid, &token), 0);
	CHECK_INT(pid, 0);
	CHECK_HEX(token, 0x0123456789abcdefULL);
	/* Any other text is a name; the same name, the same address. */
	CHECK_INT(shm_addr_resolve("fi_ns://127.0.0.1:9228", &pid, &token), 0);
	CHECK_INT(pid, 0);
	CHECK(token != 0);
	{
		uint64_t t2 = 0, t3 = 0;
		pid_t p2 = -1;

		CHECK_INT(shm_addr_resolve("foo", &p2, &t2), 0);
		CHECK_INT(shm_addr_resolve("fi_shm://foo", &p2, &t3), 0);
		CHECK_HEX(t2, t3);
		CHECK(t2 != token);
		CHECK_INT(shm_addr_resolve("fi_shm://77/FEDCBA9876543210", &p2, &t2), 0);
		CHECK_INT(p2, 77);
	}
	CHECK_INT(shm_addr_resolve("", &pid, &token), -FI_EINVAL);
	CHECK_INT(shm_addr_resolve(NULL, &pid, &token), -FI_EINVAL);
}

/* ---- create / open / close ------------------------------------------------ */

static void test_create_open(void)
{
	struct shm_region *r = NULL;
	struct shm_peer *p = NULL;
	char path[128], addr[SHM_ADDR_MAX], name[SHM_NAME_MAX], buf[SHM_INLINE_MAX];
	struct stat st;
	uint64_t token;
	pid_t pid;

	CHECK_INT(shm_region_create(NULL, &r), 0);
	if (!r)
		return;
	snprintf(path, sizeof(path), "/dev/shm%s", r->name);
	CHECK_INT(stat(path, &st), 0);
	CHECK_INT(st.st_mode & 0777, 0600);
	CHECK_INT(st.st_uid, getuid());
	CHECK_INT(shm_addr_parse(shm_region_addr(r), &pid, &token), 0);
	CHECK_INT(pid, getpid());
	CHECK_HEX(token, r->map.hdr->token);
	CHECK_INT(r->map.mask + 1, SHM_RING_CELLS_DEF);
	CHECK_INT(r->map.buf_count, SHM_BUF_COUNT_DEF);
	CHECK_INT(shm_buf_size(&r->map), SHM_BUF_SIZE);
	CHECK(shm_region_fd(r) >= 0);

	CHECK_INT(shm_peer_open(shm_region_addr(r), &p), 0);
	if (p) {
		CHECK(shm_peer_alive(p));
		CHECK_INT(shm_ring_push(p, "hello", 5, NULL, 0), 0);
		CHECK_INT(shm_ring_pop(r, buf), 5);
		CHECK(!memcmp(buf, "hello", 5));
		CHECK_INT(shm_ring_pop(r, buf), -FI_EAGAIN);
		shm_peer_close(p);
	}
	strcpy(addr, shm_region_addr(r));
	strcpy(name, r->name);
	shm_region_destroy(r);
	CHECK(!shm_file_exists(name));
	p = NULL;
	CHECK_INT(shm_peer_open(addr, &p), -FI_ENOENT);
	CHECK(p == NULL);
	CHECK_INT(shm_peer_open("fi_shm://x", &p), -FI_EINVAL);
	shm_region_destroy(NULL);
	shm_peer_close(NULL);

	{
		struct shm_region_attr bad = {.ring_cells = SHM_RING_CELLS_MAX + 1};

		CHECK_INT(shm_region_create(&bad, &r), -FI_EINVAL);
	}
}

/* ---- hostile headers and cells -------------------------------------------- */

static void expect_open(const char *addr, int want, const char *what)
{
	struct shm_peer *p = NULL;
	int ret = shm_peer_open(addr, &p);

	if (ret != want)
		fprintf(stderr, "corruption \"%s\": open gave %d, want %d\n", what, ret,
		        want);
	CHECK_INT(ret, want);
	if (!ret)
		shm_peer_close(p);
}

static void test_corrupt(void)
{
	struct shm_region_attr attr = {.ring_cells = 8, .buf_count = 4};
	struct shm_region *r = NULL;
	struct shm_peer *p = NULL;
	struct shm_hdr *h, saved;
	char buf[SHM_INLINE_MAX];
	const char *addr;
	size_t len;
	int a, b;

	CHECK_INT(shm_region_create(&attr, &r), 0);
	if (!r)
		return;
	h = r->map.hdr;
	addr = shm_region_addr(r);
	memcpy(&saved, h, offsetof(struct shm_hdr, alive));

#define CORRUPT(stmt, want)                                                              \
	do {                                                                             \
		stmt;                                                                    \
		expect_open(addr, want, #stmt);                                          \
		memcpy(h, &saved, offsetof(struct shm_hdr, alive));                      \
	} while (0)

	CORRUPT(h->version = SHM_LAYOUT_VERSION + 1, -FI_ENOPROTOOPT);
	CORRUPT(h->magic ^= 1, -FI_EINVAL);
	CORRUPT(h->hdr_size = 64, -FI_EINVAL);
	CORRUPT(h->total_size *= 2, -FI_EINVAL);
	CORRUPT(h->ring_cells = 1u << 30, -FI_EINVAL);
	CORRUPT(h->ring_cells = 12, -FI_EINVAL);
	CORRUPT(h->ring_cells = 1 << 16, -FI_EINVAL);
	CORRUPT(h->ring_off = ~0ULL - 63, -FI_EINVAL);
	CORRUPT(h->ring_off = 0, -FI_EINVAL);
	CORRUPT(h->meta_off = h->ring_off, -FI_EINVAL);
	CORRUPT(h->buf_count = 1000, -FI_EINVAL);
	CORRUPT(h->buf_count = 0xffffffffu, -FI_EINVAL);
	CORRUPT(h->buf_size = 1u << 31, -FI_EINVAL);
	CORRUPT(h->buf_off = h->total_size - 4096, -FI_EINVAL);
	CORRUPT(h->buf_off = ~0ULL - 4095, -FI_EINVAL);
	CORRUPT(h->owner_pid = h->owner_pid + 1, -FI_EINVAL);
	CORRUPT(h->token ^= 1, -FI_EINVAL);
	CORRUPT(h->owner_start ^= 1, -FI_EHOSTDOWN);
	atomic_store(&h->alive, 0);
	expect_open(addr, -FI_EHOSTDOWN, "alive = 0");
	atomic_store(&h->alive, 1);
	expect_open(addr, 0, "restored");
#undef CORRUPT

	CHECK_INT(shm_peer_open(addr, &p), 0);
	if (!p)
		goto out;
	/* A cell claiming more than a cell holds is dropped, the next one read. */
	CHECK_INT(shm_ring_push(p, "one", 3, NULL, 0), 0);
	CHECK_INT(shm_ring_push(p, "two", 3, NULL, 0), 0);
	CHECK_INT(shm_ring_push(p, "six", 3, NULL, 0), 0);
	r->map.cells[0].len = 100000;
	CHECK_INT(shm_ring_pop(r, buf), -FI_EIO);
	CHECK_INT(shm_ring_pop(r, buf), 3);
	CHECK(!memcmp(buf, "two", 3));
	r->map.cells[2].len = SHM_INLINE_MAX + 1;
	CHECK(shm_ring_peek(r, &len) == NULL);
	CHECK_INT(len, 0);
	CHECK(!shm_ring_ready(r));

	/* Indices out of range, double frees and a corrupt free list. */
	CHECK(shm_buf_ptr(r, 4) == NULL);
	CHECK(shm_buf_ptr(r, SHM_BUF_NONE) == NULL);
	CHECK(shm_buf_peer_ptr(p, 4) == NULL);
	CHECK_INT(shm_buf_free(r, 4), -FI_EINVAL);
	CHECK_INT(shm_buf_free(r, 0), -FI_EINVAL);
	CHECK_INT(shm_buf_put(p, 0xffffffffu), -FI_EINVAL);
	a = shm_buf_alloc(p);
	CHECK(a >= 0 && a < 4);
	CHECK_INT(shm_buf_free(r, (uint32_t)a), 0);
	CHECK_INT(shm_buf_free(r, (uint32_t)a), -FI_EINVAL);
	{
		uint64_t old = atomic_load(&h->buf_free);

		atomic_store(&h->buf_free, (old & ~0xffffffffULL) | 77);
		CHECK_INT(shm_buf_alloc(p), -FI_EIO);
		atomic_store(&h->buf_free, old);
		b = (int)(uint32_t)old;
		atomic_store(&r->map.meta[b].next, 5000);
		CHECK_INT(shm_buf_alloc(p), b);
		CHECK_INT(shm_buf_alloc(p), -FI_EIO);
	}
	shm_peer_close(p);
out:
	shm_region_destroy(r);

	/* A region file too small to hold a header. */
	{
		char name[SHM_NAME_MAX], addr2[SHM_ADDR_MAX];
		int fd;

		snprintf(name, sizeof(name), "/loom-%u-%d-00000000000000aa",
		         (unsigned)getuid(), (int)getpid());
		shm_addr_format(addr2, sizeof(addr2), getpid(), 0xaa);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		CHECK(fd >= 0);
		if (fd >= 0) {
			CHECK_INT(ftruncate(fd, 10), 0);
			close(fd);
			expect_open(addr2, -FI_EINVAL, "10-byte object");
			fd = shm_open(name, O_RDWR, 0);
			CHECK_INT(fchmod(fd, 0644), 0);
			close(fd);
			expect_open(addr2, -FI_EACCES, "mode 0644");
			shm_unlink(name);
		}
	}
}

/* ---- ring ordering -------------------------------------------------------- */

struct msg_hdr {
	uint32_t producer, seq, len, sum;
};

static uint8_t pattern(uint32_t producer, uint32_t seq, uint32_t i)
{
	return (uint8_t)(producer * 131 + seq * 7 + i * 13);
}

struct producer_arg {
	const char *addr;
	uint32_t id;
};

static void producer_main(void *varg)
{
	struct producer_arg *arg = varg;
	struct shm_peer *p = NULL;
	uint8_t payload[SHM_INLINE_MAX];
	uint32_t seq, i;

	CHECK_INT(shm_peer_open(arg->addr, &p), 0);
	if (!p)
		return;
	for (seq = 0; seq < NMSG; seq++) {
		struct msg_hdr h = {arg->id, seq, seq % (SHM_INLINE_MAX - sizeof(h) + 1),
		                    0};
		struct iovec iov[2];

		for (i = 0; i < h.len; i++) {
			payload[i] = pattern(h.producer, seq, i);
			h.sum += payload[i];
		}
		iov[0].iov_base = payload;
		iov[0].iov_len = h.len / 3;
		iov[1].iov_base = payload + h.len / 3;
		iov[1].iov_len = h.len - h.len / 3;
		if (push_retry(p, &h, sizeof(h), iov, 2)) {
			CHECK(!"push failed");
			break;
		}
		shm_doorbell_ring(p);
	}
	shm_peer_close(p);
}

static void test_ring_order(uint32_t nprod)
{
	struct shm_region *r = NULL;
	struct producer_arg args[3];
	uint32_t next[3] = {0, 0, 0}, bad = 0, got = 0, i;
	pid_t pids[3];
	double t0;

	CHECK(nprod <= 3);
	CHECK_INT(shm_region_create(NULL, &r), 0);
	if (!r)
		return;
	t0 = now_ms();
	for (i = 0; i < nprod; i++) {
		args[i].addr = shm_region_addr(r);
		args[i].id = i;
		pids[i] = spawn(producer_main, &args[i]);
	}
	while (got < nprod * NMSG) {
		uint8_t cell[SHM_INLINE_MAX];
		const uint8_t *data;
		struct msg_hdr h;
		ssize_t n;
		size_t len;
		uint32_t sum = 0;

		/* Alternate the copying and the zero-copy reads. */
		if (got & 1) {
			n = shm_ring_pop(r, cell);
			data = cell;
		} else {
			data = shm_ring_peek(r, &len);
			n = data ? (ssize_t)len : -FI_EAGAIN;
		}
		if (n == -FI_EAGAIN) {
			sched_yield();
			continue;
		}
		got++;
		if (n < (ssize_t)sizeof(h)) {
			bad++;
			continue;
		}
		memcpy(&h, data, sizeof(h));
		if (h.producer >= nprod || h.seq != next[h.producer] ||
		    n != (ssize_t)(sizeof(h) + h.len)) {
			if (bad++ < 5)
				fprintf(
				    stderr,
				    "bad message: producer %u seq %u (want %u) len %zd\n",
				    h.producer, h.seq,
				    h.producer < nprod ? next[h.producer] : 0, n);
		} else {
			for (i = 0; i < h.len; i++) {
				uint8_t c = data[sizeof(h) + i];

				sum += c;
				if (c != pattern(h.producer, h.seq, i))
					sum = ~h.sum;
			}
			if (sum != h.sum)
				bad++;
			next[h.producer]++;
		}
		if (data != cell)
			shm_ring_release(r);
	}
	CHECK_INT(bad, 0);
	for (i = 0; i < nprod; i++) {
		CHECK_INT(next[i], NMSG);
		reap(pids[i], 0, 0);
	}
	CHECK(!shm_ring_ready(r));
	fprintf(stderr, "ring: %u producer(s) x %u messages in %.0f ms\n", nprod, NMSG,
	        now_ms() - t0);
	shm_region_destroy(r);
}

static void test_ring_full(void)
{
	struct shm_region_attr attr = {.ring_cells = 8, .buf_count = 1};
	struct shm_region *r = NULL;
	struct shm_peer *p = NULL;
	uint8_t big[SHM_INLINE_MAX + 1] = {0}, buf[SHM_INLINE_MAX];
	struct iovec iov = {big, SHM_INLINE_MAX};
	uint32_t i, v;

	CHECK_INT(shm_region_create(&attr, &r), 0);
	if (!r)
		return;
	CHECK_INT(shm_peer_open(shm_region_addr(r), &p), 0);
	if (!p) {
		shm_region_destroy(r);
		return;
	}
	CHECK_INT(shm_ring_push(p, NULL, 0, &iov, 1), 0);
	CHECK_INT(shm_ring_pop(r, buf), SHM_INLINE_MAX);
	iov.iov_len = SHM_INLINE_MAX + 1;
	CHECK_INT(shm_ring_push(p, NULL, 0, &iov, 1), -FI_EMSGSIZE);
	iov.iov_len = SHM_INLINE_MAX;
	CHECK_INT(shm_ring_push(p, "x", 1, &iov, 1), -FI_EMSGSIZE);
	for (i = 0; i < 8; i++)
		CHECK_INT(shm_ring_push(p, &i, sizeof(i), NULL, 0), 0);
	CHECK_INT(shm_ring_push(p, &i, sizeof(i), NULL, 0), -FI_EAGAIN);
	CHECK_INT(shm_ring_pop(r, &v), 4);
	CHECK_INT(v, 0);
	CHECK_INT(shm_ring_push(p, &i, sizeof(i), NULL, 0), 0);
	CHECK_INT(shm_ring_push(p, &i, sizeof(i), NULL, 0), -FI_EAGAIN);
	for (i = 1; i <= 8; i++) {
		CHECK_INT(shm_ring_pop(r, &v), 4);
		CHECK_INT(v, i);
	}
	CHECK_INT(shm_ring_pop(r, &v), -FI_EAGAIN);
	shm_peer_close(p);
	shm_region_destroy(r);
}

/* ---- bounce buffers ------------------------------------------------------- */

#define PIPE_BYTES (16u << 20)

struct chunk {
	uint32_t idx, len;
	uint64_t off;
};

static uint8_t big_pattern(size_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static void pipeline_sender(void *varg)
{
	struct shm_peer *p = NULL;
	uint64_t off;

	CHECK_INT(shm_peer_open(varg, &p), 0);
	if (!p)
		return;
	for (off = 0; off < PIPE_BYTES;) {
		struct chunk c;
		uint8_t *dst;
		uint32_t i;
		int idx;

		while ((idx = shm_buf_alloc(p)) == -FI_EAGAIN)
			sched_yield();
		if (idx < 0) {
			CHECK_INT(idx, 0);
			break;
		}
		dst = shm_buf_peer_ptr(p, (uint32_t)idx);
		c.idx = (uint32_t)idx;
		c.len = (uint32_t)LM_MIN(shm_buf_size(&p->map), PIPE_BYTES - off) -
		        (off ? 0 : 1);
		c.off = off;
		for (i = 0; i < c.len; i++)
			dst[i] = big_pattern(off + i);
		if (push_retry(p, &c, sizeof(c), NULL, 0)) {
			CHECK(!"push failed");
			break;
		}
		shm_doorbell_ring(p);
		off += c.len;
	}
	shm_peer_close(p);
}

/* Several processes take and give back buffers of one pool as fast as they
 * can, each stamping a buffer while it holds it: two holders of one buffer
 * (an ABA slip in the free list) would overwrite each other's stamp. */
static void churn_main(void *varg)
{
	struct producer_arg *arg = varg;
	struct shm_peer *p = NULL;
	uint32_t i;

	CHECK_INT(shm_peer_open(arg->addr, &p), 0);
	if (!p)
		return;
	for (i = 0; i < NMSG; i++) {
		volatile uint32_t *b;
		int idx;

		while ((idx = shm_buf_alloc(p)) == -FI_EAGAIN)
			sched_yield();
		if (idx < 0) {
			CHECK_INT(idx, 0);
			break;
		}
		b = shm_buf_peer_ptr(p, (uint32_t)idx);
		b[0] = arg->id + 1;
		b[1] = i;
		if (i % 16 == 0)
			sched_yield();
		if (b[0] != arg->id + 1 || b[1] != i) {
			CHECK(!"buffer held by two processes");
			break;
		}
		CHECK_INT(shm_buf_put(p, (uint32_t)idx), 0);
	}
	shm_peer_close(p);
}

static void test_bufs(void)
{
	struct shm_region_attr attr = {.ring_cells = 64, .buf_count = 8};
	struct shm_region *r = NULL;
	struct shm_peer *p = NULL;
	int idx[8], i, j;
	uint8_t *out;
	pid_t pid;
	uint64_t received = 0;
	size_t bad = 0;

	CHECK_INT(shm_region_create(&attr, &r), 0);
	if (!r)
		return;
	CHECK_INT(shm_peer_open(shm_region_addr(r), &p), 0);
	if (!p)
		goto out;
	for (i = 0; i < 8; i++) {
		idx[i] = shm_buf_alloc(p);
		CHECK(idx[i] >= 0 && idx[i] < 8);
		for (j = 0; j < i; j++)
			CHECK(idx[i] != idx[j]);
		CHECK(shm_buf_peer_ptr(p, (uint32_t)idx[i]) != NULL);
		CHECK(shm_buf_ptr(r, (uint32_t)idx[i]) != NULL);
	}
	CHECK_INT(shm_buf_alloc(p), -FI_EAGAIN);
	CHECK(shm_buf_ptr(r, 8) == NULL);
	CHECK_INT(shm_buf_free(r, 8), -FI_EINVAL);
	CHECK_INT(shm_buf_put(p, (uint32_t)idx[3]), 0);
	CHECK_INT(shm_buf_put(p, (uint32_t)idx[3]), -FI_EINVAL);
	CHECK_INT(shm_buf_alloc(p), idx[3]);
	for (i = 0; i < 8; i++)
		CHECK_INT(shm_buf_free(r, (uint32_t)idx[i]), 0);
	for (i = 0; i < 8; i++)
		CHECK_INT(shm_buf_free(r, (uint32_t)idx[i]), -FI_EINVAL);
	for (i = 0; i < 8; i++)
		CHECK((idx[i] = shm_buf_alloc(p)) >= 0);
	for (i = 0; i < 8; i++)
		CHECK_INT(shm_buf_put(p, (uint32_t)idx[i]), 0);

	/* 16 MiB through 8 buffers: the sender refills while we drain. */
	out = malloc(PIPE_BYTES);
	CHECK(out != NULL);
	pid = spawn(pipeline_sender, (void *)shm_region_addr(r));
	while (out && received < PIPE_BYTES) {
		struct chunk c;
		const uint8_t *src;
		ssize_t n = shm_ring_pop(r, &c);

		if (n == -FI_EAGAIN) {
			sched_yield();
			continue;
		}
		CHECK_INT(n, sizeof(c));
		src = shm_buf_ptr(r, c.idx);
		if (!src || c.len > shm_buf_size(&r->map) || c.off != received) {
			CHECK(!"bad chunk");
			break;
		}
		memcpy(out + c.off, src, c.len);
		CHECK_INT(shm_buf_free(r, c.idx), 0);
		received += c.len;
	}
	reap(pid, 0, 0);
	for (size_t k = 0; out && k < received; k++)
		bad += out[k] != big_pattern(k);
	CHECK_INT(received, PIPE_BYTES);
	CHECK_INT(bad, 0);
	free(out);

	{
		struct producer_arg args[3];
		pid_t pids[3];
		double t0 = now_ms();

		for (i = 0; i < 3; i++) {
			args[i].addr = shm_region_addr(r);
			args[i].id = (uint32_t)i;
			pids[i] = spawn(churn_main, &args[i]);
		}
		for (i = 0; i < 3; i++)
			reap(pids[i], 0, 0);
		fprintf(stderr, "bufs: 3 processes x %u alloc/free in %.0f ms\n", NMSG,
		        now_ms() - t0);
		/* All buffers came back. */
		for (i = 0; i < 8; i++)
			CHECK((idx[i] = shm_buf_alloc(p)) >= 0);
		CHECK_INT(shm_buf_alloc(p), -FI_EAGAIN);
	}
	shm_peer_close(p);
out:
	shm_region_destroy(r);
}

/* ---- doorbell ------------------------------------------------------------- */

static int readable(int fd, int ms)
{
	struct pollfd pfd = {fd, POLLIN, 0};

	return poll(&pfd, 1, ms);
}

struct bell_arg {
	const char *addr;
	int go; /* read end: one byte per round */
};

static void bell_pusher(void *varg)
{
	struct bell_arg *arg = varg;
	struct shm_peer *p = NULL;
	char c;
	int i;

	CHECK_INT(shm_peer_open(arg->addr, &p), 0);
	if (!p)
		return;
	for (i = 0; i < 5; i++) {
		double t;

		xread(arg->go, &c, 1);
		usleep(20000);
		t = now_ms();
		CHECK_INT(shm_ring_push(p, &t, sizeof(t), NULL, 0), 0);
		shm_doorbell_ring(p);
	}
	shm_peer_close(p);
}

/* Ping-pong where both sides always sleep in poll(): a lost wakeup shows up
 * as a 5 s poll timeout. */
#define PINGPONG 2000

static unsigned sleeps; /* polls that found nothing yet: proof we slept */

static int pong_wait(struct shm_region *r, uint32_t *v)
{
	for (;;) {
		ssize_t n = shm_ring_pop(r, v);

		if (n == sizeof(*v))
			return 0;
		if (n != -FI_EAGAIN)
			return -1;
		if (shm_doorbell_arm(r) == 0) {
			int ret = readable(shm_region_fd(r), 0);

			if (ret == 0) {
				sleeps++;
				ret = readable(shm_region_fd(r), 5000);
			}

			shm_doorbell_disarm(r);
			if (ret != 1)
				return -1;
			shm_doorbell_drain(r);
		}
	}
}

struct pong_arg {
	const char *addr;
	int to_parent; /* write end: our address */
};

static void pong_main(void *varg)
{
	struct pong_arg *arg = varg;
	struct shm_region *mine = NULL;
	struct shm_peer *p = NULL;
	char addr[SHM_ADDR_MAX] = {0};
	uint32_t i, v;

	CHECK_INT(shm_region_create(NULL, &mine), 0);
	if (mine)
		strcpy(addr, shm_region_addr(mine));
	xwrite(arg->to_parent, addr, sizeof(addr));
	if (!mine)
		return;
	CHECK_INT(shm_peer_open(arg->addr, &p), 0);
	for (i = 0; p && i < PINGPONG; i++) {
		if (pong_wait(mine, &v)) {
			CHECK(!"child: lost wakeup");
			break;
		}
		CHECK_INT(v, i);
		v++;
		CHECK_INT(push_retry(p, &v, sizeof(v), NULL, 0), 0);
		shm_doorbell_ring(p);
	}
	shm_peer_close(p);
	shm_region_destroy(mine);
}

static void test_doorbell(void)
{
	struct shm_region *r = NULL;
	struct shm_peer *p = NULL;
	struct bell_arg barg;
	double worst = 0;
	int go[2], back[2], i;
	pid_t pid;

	CHECK_INT(shm_region_create(NULL, &r), 0);
	if (!r)
		return;
	CHECK_INT(shm_peer_open(shm_region_addr(r), &p), 0);
	if (!p)
		goto out;
	/* Armed over pending work: do not sleep. */
	CHECK_INT(shm_ring_push(p, "w", 1, NULL, 0), 0);
	CHECK_INT(shm_doorbell_arm(r), -FI_EAGAIN);
	CHECK_INT(atomic_load(&r->map.hdr->sleeping), 0);
	{
		char b[SHM_INLINE_MAX];

		CHECK_INT(shm_ring_pop(r, b), 1);
	}
	/* Not armed: ringing sends nothing. */
	shm_doorbell_ring(p);
	CHECK_INT(readable(shm_region_fd(r), 0), 0);
	CHECK_INT(shm_doorbell_arm(r), 0);
	shm_doorbell_ring(p);
	shm_doorbell_ring(p);
	CHECK_INT(readable(shm_region_fd(r), 1000), 1);
	CHECK_INT(atomic_load(&r->map.hdr->sleeping), 0);
	shm_doorbell_disarm(r);
	shm_doorbell_drain(r);
	CHECK_INT(readable(shm_region_fd(r), 0), 0);
	shm_peer_close(p);

	/* Another process pushes while we sleep in poll(). */
	CHECK_INT(pipe(go), 0);
	barg.addr = shm_region_addr(r);
	barg.go = go[0];
	pid = spawn(bell_pusher, &barg);
	for (i = 0; i < 5; i++) {
		double sent = 0, woke;
		int ret;

		CHECK_INT(shm_doorbell_arm(r), 0);
		xwrite(go[1], "g", 1);
		ret = readable(shm_region_fd(r), 2000);
		woke = now_ms();
		shm_doorbell_disarm(r);
		shm_doorbell_drain(r);
		CHECK_INT(ret, 1);
		CHECK_INT(shm_ring_pop(r, &sent), sizeof(sent));
		worst = LM_MAX(worst, woke - sent);
	}
	reap(pid, 0, 0);
	close(go[0]);
	close(go[1]);
	CHECK(worst < 500);
	fprintf(stderr, "doorbell: worst wake-up after push %.3f ms\n", worst);

	/* Ping-pong with both sides sleeping every round. */
	{
		struct pong_arg parg;
		char addr[SHM_ADDR_MAX];
		uint32_t v = 0, k;
		double t0 = now_ms();

		CHECK_INT(pipe(back), 0);
		parg.addr = shm_region_addr(r);
		parg.to_parent = back[1];
		pid = spawn(pong_main, &parg);
		xread(back[0], addr, sizeof(addr));
		p = NULL;
		if (addr[0])
			CHECK_INT(shm_peer_open(addr, &p), 0);
		for (k = 0; p && k < PINGPONG; k++) {
			v = k;
			CHECK_INT(push_retry(p, &v, sizeof(v), NULL, 0), 0);
			shm_doorbell_ring(p);
			if (pong_wait(r, &v)) {
				CHECK(!"parent: lost wakeup");
				break;
			}
			CHECK_INT(v, k + 1);
		}
		shm_peer_close(p);
		reap(pid, 0, 0);
		close(back[0]);
		close(back[1]);
		fprintf(stderr,
		        "doorbell: %d round trips in %.0f ms, parent slept %u times\n",
		        PINGPONG, now_ms() - t0, sleeps);
		CHECK(sleeps > PINGPONG / 10);
	}
out:
	shm_region_destroy(r);
}

/* ---- cross-memory attach -------------------------------------------------- */

#define CMA_BYTES (16u << 20)

struct cma_child {
	int to_parent, from_parent;
};

struct cma_info {
	char addr[SHM_ADDR_MAX];
	uint64_t buf;
};

static void cma_child_main(void *varg)
{
	struct cma_child *arg = varg;
	struct shm_region *r = NULL;
	struct cma_info info = {{0}, 0};
	uint8_t *buf = malloc(CMA_BYTES);
	size_t i, bad = 0;
	char c;

	CHECK(buf != NULL);
	CHECK_INT(shm_region_create(NULL, &r), 0);
	if (buf)
		for (i = 0; i < CMA_BYTES; i++)
			buf[i] = big_pattern(i);
	if (r && buf) {
		strcpy(info.addr, shm_region_addr(r));
		info.buf = (uint64_t)(uintptr_t)buf;
	}
	xwrite(arg->to_parent, &info, sizeof(info));
	xread(arg->from_parent, &c, 1);
	/* The parent wrote 1 MiB of inverted pattern at offset 1 MiB + 3. */
	for (i = 0; buf && i < CMA_BYTES; i++) {
		bool in = i >= (1u << 20) + 3 && i < (2u << 20) + 3;
		uint8_t want = in ? (uint8_t)~big_pattern(i) : big_pattern(i);

		bad += buf[i] != want;
	}
	CHECK_INT(bad, 0);
	free(buf);
	shm_region_destroy(r);
}

static void test_cma(void)
{
	struct cma_child arg;
	struct cma_info info;
	struct shm_peer *p = NULL;
	int to_parent[2], from_parent[2], ret;
	uint8_t *buf;
	size_t i, bad = 0;
	pid_t pid;

	ret = shm_cma_probe();
	if (ret) {
		fprintf(
		    stderr,
		    "cma: CROSS-MEMORY ATTACH REFUSED ON THIS MACHINE (%s); the CMA "
		    "copy tests are skipped, the bounce-buffer path is tested above\n",
		    fi_strerror(-ret));
		return;
	}
	buf = calloc(1, CMA_BYTES);
	CHECK(buf != NULL);
	if (!buf)
		return;
	CHECK_INT(pipe(to_parent), 0);
	CHECK_INT(pipe(from_parent), 0);
	arg.to_parent = to_parent[1];
	arg.from_parent = from_parent[0];
	pid = spawn(cma_child_main, &arg);
	xread(to_parent[0], &info, sizeof(info));
	if (info.addr[0])
		CHECK_INT(shm_peer_open(info.addr, &p), 0);
	if (p) {
		/* Uneven pieces on both sides, crossing each other's edges. */
		char *rb = (char *)(uintptr_t)info.buf;
		struct iovec l[3] = {
		    {buf, 1000},
		    {buf + 1000, (5u << 20) + 17},
		    {buf + 1000 + (5u << 20) + 17, CMA_BYTES - 1000 - (5u << 20) - 17}};
		struct iovec rv[2] = {{rb, 3u << 20},
		                      {rb + (3u << 20), CMA_BYTES - (3u << 20)}};
		struct iovec wl, wr, bogus = {(void *)16, 4096};
		double t0;
		ssize_t n;

		CHECK_INT(shm_cma_peer_probe(p), 0);
		CHECK_INT(shm_cma_peer_probe(p), 0);
		t0 = now_ms();
		n = shm_cma_read(p->pid, l, 3, rv, 2);
		fprintf(stderr, "cma: 16 MiB read from another process in %.2f ms\n",
		        now_ms() - t0);
		CHECK_INT(n, CMA_BYTES);
		for (i = 0; i < CMA_BYTES; i++)
			bad += buf[i] != big_pattern(i);
		CHECK_INT(bad, 0);

		for (i = (1u << 20) + 3; i < (2u << 20) + 3; i++)
			buf[i] = (uint8_t)~big_pattern(i);
		wl.iov_base = buf + (1u << 20) + 3;
		wl.iov_len = 1u << 20;
		wr.iov_base = rb + (1u << 20) + 3;
		wr.iov_len = 2u << 20; /* longer than local: min of both */
		CHECK_INT(shm_cma_write(p->pid, &wl, 1, &wr, 1), 1u << 20);
		CHECK_INT(shm_cma_read(p->pid, &wl, 1, &bogus, 1), -FI_EFAULT);
	}
	xwrite(from_parent[1], "d", 1);
	reap(pid, 0, 0);
	if (p) {
		/* The process is gone now. */
		struct iovec l = {buf, 64}, rv = {(void *)(uintptr_t)info.buf, 64};

		CHECK_INT(shm_cma_read(p->pid, &l, 1, &rv, 1), -FI_EIO);
		shm_peer_close(p);
	}
	close(to_parent[0]);
	close(to_parent[1]);
	close(from_parent[0]);
	close(from_parent[1]);
	free(buf);
}

/* ---- removal and reclaim -------------------------------------------------- */

struct owner_arg {
	int to_parent;
	int how; /* 0: wait to be killed, 1: exit() without destroy */
};

static struct shm_region *leaked; /* reachable, so not a leak to LSan */

static void owner_main(void *varg)
{
	struct owner_arg *arg = varg;
	char info[SHM_NAME_MAX + SHM_ADDR_MAX] = {0};

	CHECK_INT(shm_region_create(NULL, &leaked), 0);
	if (leaked) {
		strcpy(info, leaked->name);
		strcpy(info + SHM_NAME_MAX, shm_region_addr(leaked));
	}
	xwrite(arg->to_parent, info, sizeof(info));
	if (arg->how == 1)
		exit(check_failures ? 1 : 0);
	for (;;)
		pause();
}

/* A child that inherited the parent's region: closing the copy and running
 * the exit hook must leave the parent's region alive. */
static void forked_exit(void *varg)
{
	shm_region_destroy(varg);
	exit(0);
}

static void test_removal(void)
{
	struct owner_arg arg;
	char info[SHM_NAME_MAX + SHM_ADDR_MAX];
	struct shm_region *r = NULL, *r2 = NULL;
	struct shm_peer *p = NULL;
	int fds[2];
	pid_t pid;

	CHECK_INT(pipe(fds), 0);
	arg.to_parent = fds[1];

	/* exit() without destroy: the exit hook unlinks. */
	arg.how = 1;
	pid = spawn(owner_main, &arg);
	xread(fds[0], info, sizeof(info));
	reap(pid, 0, 0);
	CHECK(info[0] && !shm_file_exists(info));

	/* A forked child exiting leaves its parent's region alone. */
	CHECK_INT(shm_region_create(NULL, &r), 0);
	if (r) {
		pid = spawn(forked_exit, r);
		reap(pid, 0, 0);
		CHECK(shm_file_exists(r->name));
		CHECK_INT(atomic_load(&r->map.hdr->alive), 1);
	}

	/* SIGKILL: the region stays, its peers see the owner gone, the next
	 * create reclaims it. */
	arg.how = 0;
	pid = spawn(owner_main, &arg);
	xread(fds[0], info, sizeof(info));
	CHECK(info[0] != 0);
	CHECK_INT(shm_peer_open(info + SHM_NAME_MAX, &p), 0);
	if (p)
		CHECK(shm_peer_alive(p));
	shm_region_reclaim(); /* a live owner's region is kept */
	CHECK(shm_file_exists(info));
	kill(pid, SIGKILL);
	reap(pid, 0, SIGKILL);
	if (p) {
		CHECK(!shm_peer_alive(p));
		shm_peer_close(p);
	}
	CHECK(shm_file_exists(info));
	p = NULL;
	CHECK_INT(shm_peer_open(info + SHM_NAME_MAX, &p), -FI_EHOSTDOWN);
	CHECK_INT(shm_region_create(NULL, &r2), 0);
	CHECK(!shm_file_exists(info));
	if (r)
		CHECK(shm_file_exists(r->name));
	if (r2)
		CHECK(shm_file_exists(r2->name));

	/* A recycled pid: the owner pid lives but started at another time. */
	if (r2) {
		uint64_t start = r2->map.hdr->owner_start;

		r2->map.hdr->owner_start = start + 1;
		CHECK(shm_region_reclaim() >= 1);
		CHECK(!shm_file_exists(r2->name));
		r2->map.hdr->owner_start = start;
	}
	/* A header still being written by a live process is left alone. */
	if (r) {
		uint64_t magic = r->map.hdr->magic;

		r->map.hdr->magic = 0;
		r->map.hdr->owner_start ^= 1;
		shm_region_reclaim();
		CHECK(shm_file_exists(r->name));
		r->map.hdr->owner_start ^= 1;
		r->map.hdr->magic = magic;
	}
	shm_region_destroy(r2);
	if (r) {
		char name[SHM_NAME_MAX];

		strcpy(name, r->name);
		shm_region_destroy(r);
		CHECK(!shm_file_exists(name));
	}
	close(fds[0]);
	close(fds[1]);
}

/* An endpoint of a new shm domain, opened with FI_SHM_DISABLE_CMA set to
 * disable (or unset): whether its link offers bulk copies. */
static int domain_bulk(const char *disable)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_ep *ep = NULL;
	int bulk = -1;

	if (disable)
		setenv("FI_SHM_DISABLE_CMA", disable, 1);
	else
		unsetenv("FI_SHM_DISABLE_CMA");
	hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	if (info && !fi_fabric(info->fabric_attr, &fab, NULL) &&
	    !fi_domain(fab, info, &dom, NULL) && !fi_endpoint(dom, info, &ep, NULL))
		bulk = !!(lm_rdm_ep_of(ep)->link->caps & LM_LINK_BULK_READ);
	if (ep)
		fi_close(&ep->fid);
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	unsetenv("FI_SHM_DISABLE_CMA");
	return bulk;
}

/* FI_SHM_DISABLE_CMA is a setting of the domain opened under it, not of
 * the process: a domain opened after it without it copies in bulk. */
static void test_cma_per_domain(void)
{
	if (shm_cma_probe()) {
		fprintf(stderr, "cma per domain: no cross-memory attach here\n");
		CHECK_INT(domain_bulk(NULL), 0);
		return;
	}
	CHECK_INT(domain_bulk("1"), 0);
	CHECK_INT(domain_bulk(NULL), 1);
	CHECK_INT(domain_bulk("0"), 1);
}

int main(void)
{
	alarm(600);
	test_addr();
	test_create_open();
	test_corrupt();
	test_ring_full();
	test_ring_order(1);
	test_ring_order(3);
	test_bufs();
	test_doorbell();
	test_cma();
	test_cma_per_domain();
	test_removal();
	return check_done();
}
