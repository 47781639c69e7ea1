/* region.c - shared-memory regions: naming and addresses, creation and removal
 * (also at exit and of dead processes' leftovers), and validated peer mappings. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core.h"
#include "hash.h"
#include "shm_link.h"
#include "sock.h"

const struct fi_provider *shm_log_prov = &lm_core_prov;

#define SHM_DIR "/dev/shm"

/* Regions this process owns, so the exit hook can unlink them. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lm_list live = LM_LIST_INIT(live);

/* Peers read this word from our memory to prove CMA works between us. */
static const uint64_t cma_probe_word = SHM_CMA_PROBE_WORD;

/* Runs at exit() and at dlclose.  A forked child inherits the list but not
 * the regions: only what this pid created is unlinked. */
__attribute__((destructor)) static void shm_unlink_at_exit(void)
{
	struct lm_list *n;
	pid_t self = getpid();

	pthread_mutex_lock(&live_lock);
	for (n = live.next; n != &live; n = n->next) {
		struct shm_region *r = lm_list_entry(n, struct shm_region, node);

		if (r->pid == self)
			shm_unlink(r->name);
	}
	pthread_mutex_unlock(&live_lock);
}

/* Field 22 of /proc/<pid>/stat (clock ticks after boot); 0 if unreadable
 * or the process is a zombie.
 * The command name may hold spaces and parentheses: fields are counted from
 * the last ')'. */
static uint64_t shm_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* Field 3, the state: a zombie (killed, not yet reaped by its
	 * parent) keeps its pid but its memory is gone: dead for us. */
	if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
		return 0;
	/* After ')' comes field 3; skip to field 22. */
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

static bool shm_pid_exists(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* pid 0 is a named endpoint's: its region is found by the name's hash. */
static void shm_make_name(char *buf, size_t len, pid_t pid, uint64_t token)
{
	if (pid == 0)
		snprintf(buf, len, "/loom-%u-n-%016" PRIx64, (unsigned)getuid(), token);
	else
		snprintf(buf, len, "/loom-%u-%d-%016" PRIx64, (unsigned)getuid(),
		         (int)pid, token);
}

/* ---- addresses ------------------------------------------------------------ */

int shm_addr_format(char *buf, size_t len, pid_t pid, uint64_t token)
{
	char tmp[SHM_ADDR_MAX];
	int n;

	n = snprintf(tmp, sizeof(tmp), SHM_ADDR_PREFIX "%d/%016" PRIx64, (int)pid, token);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -FI_EINVAL;
	if (!buf || (size_t)n + 1 > len)
		return -FI_ETOOSMALL;
	memcpy(buf, tmp, (size_t)n + 1);
	return n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int shm_addr_parse(const char *addr, pid_t *pid, uint64_t *token)
{
	const char *s;
	uint64_t t = 0;
	long v = 0;
	int i;

	if (!addr || strncmp(addr, SHM_ADDR_PREFIX, strlen(SHM_ADDR_PREFIX)))
		return -FI_EINVAL;
	s = addr + strlen(SHM_ADDR_PREFIX);
	if (s[0] == '0' && s[1] == '/')
		s++; /* pid 0: a named endpoint */
	else if (*s < '1' || *s > '9')
		return -FI_EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
		if (v > INT_MAX)
			return -FI_EINVAL;
	}
	if (*s++ != '/')
		return -FI_EINVAL;
	for (i = 0; i < 16; i++) {
		int h = hexval(s[i]);

		if (h < 0)
			return -FI_EINVAL;
		t = t << 4 | (uint64_t)h;
	}
	if (s[16] != '\0')
		return -FI_EINVAL;
	*pid = (pid_t)v;
	*token = t;
	return 0;
}

/* FNV-1a: stable across builds and hosts, as a region's name must be. */
static uint64_t name_hash(const char *prefix, const char *s)
{
	uint64_t h = lm_fnv1a(LM_FNV1A_BASIS, prefix, prefix ? strlen(prefix) : 0);

	h = lm_fnv1a(h, s, strlen(s));
	return h ? h : 1;
}

int shm_addr_resolve(const char *text, pid_t *pid, uint64_t *token)
{
	size_t n;

	if (!text)
		return -FI_EINVAL;
	if (!shm_addr_parse(text, pid, token))
		return 0;
	n = strlen(text);
	if (!n || n >= SHM_NAME_TEXT_MAX)
		return -FI_EINVAL;
	*pid = 0;
	/* "foo" and "fi_shm://foo" are one name; "fi_ns://h:p" keeps its own. */
	*token = name_hash(strstr(text, "://") ? NULL : SHM_ADDR_PREFIX, text);
	return 0;
}

const char *shm_region_addr(const struct shm_region *r)
{
	return r->addr;
}

/* ---- layout ------------------------------------------------------------- */

/* Bounce buffers (buf_off) start on a page: each spans whole pages of its own. */
#define SHM_BUF_ALIGN 4096

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Check a header's geometry against the object's real size and fill m.  The
 * header is read once into locals; m never points outside [base, base+size). */
static int shm_map_check(struct shm_map *m, char *base, size_t size, const char *name)
{
	const struct shm_hdr *h = (const struct shm_hdr *)base;
	uint64_t ring_off, meta_off, buf_off, total;
	uint32_t cells, count, bsize, version;

	if (size < sizeof(*h) || h->magic != SHM_MAGIC) {
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "%s is not a loom shm region\n",
		        name);
		return -FI_EINVAL;
	}
	version = h->version;
	if (version != SHM_LAYOUT_VERSION) {
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL,
		        "%s has shm layout version %u; this loom speaks version %u\n",
		        name, version, SHM_LAYOUT_VERSION);
		return -FI_ENOPROTOOPT;
	}
	ring_off = h->ring_off;
	meta_off = h->meta_off;
	buf_off = h->buf_off;
	total = h->total_size;
	cells = h->ring_cells;
	count = h->buf_count;
	bsize = h->buf_size;
	if (h->hdr_size != sizeof(*h) || total != size || cells < 2 ||
	    cells > SHM_RING_CELLS_MAX || (cells & (cells - 1)) ||
	    count > SHM_BUF_COUNT_MAX || bsize == 0 || bsize > SHM_BUF_SIZE_MAX ||
	    bsize % SHM_CACHE_LINE || ring_off % SHM_CACHE_LINE || meta_off % 8 ||
	    buf_off % SHM_CACHE_LINE || ring_off < sizeof(*h) || ring_off > size ||
	    (uint64_t)cells * SHM_CELL_SIZE > size - ring_off ||
	    meta_off < ring_off + (uint64_t)cells * SHM_CELL_SIZE || meta_off > size ||
	    (uint64_t)count * sizeof(struct shm_buf_meta) > size - meta_off ||
	    buf_off < meta_off + (uint64_t)count * sizeof(struct shm_buf_meta) ||
	    buf_off > size || (uint64_t)count * bsize > size - buf_off) {
		LM_WARN(
		    shm_log_prov, FI_LOG_EP_CTRL,
		    "%s: corrupt shm region header (size %zu, ring %u cells at %" PRIu64
		    ", %u buffers of %u at %" PRIu64 ")\n",
		    name, size, cells, ring_off, count, bsize, buf_off);
		return -FI_EINVAL;
	}
	m->base = base;
	m->size = size;
	m->hdr = (struct shm_hdr *)base;
	m->cells = (struct shm_cell *)(base + ring_off);
	m->mask = cells - 1;
	m->meta = (struct shm_buf_meta *)(base + meta_off);
	m->bufs = base + buf_off;
	m->buf_count = count;
	m->buf_size = bsize;
	return 0;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t n = 2;

	while (n < v)
		n <<= 1;
	return n;
}

/* ---- doorbell socket ---------------------------------------------------- */

/* Abstract AF_UNIX name: NUL then the region name without its '/'. */
static socklen_t shm_bell_addr(struct sockaddr_un *sa, const char *name)
{
	size_t n = strlen(name + 1);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name + 1, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int shm_bell_open(const char *name)
{
	struct sockaddr_un sa;
	socklen_t len = shm_bell_addr(&sa, name);
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "doorbell socket: %s\n",
		        strerror(errno));
		return ret;
	}
	if (bind(fd, (struct sockaddr *)&sa, len)) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "doorbell bind for %s: %s\n", name,
		        strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

/* ---- regions ------------------------------------------------------------ */

static bool shm_region_stale(const char *file, pid_t pid);

/* Who holds the existing region called name: 0 nobody alive (its leftover
 * is gone now), 1 this process, 2 another process or one still making it. */
static int named_holder(const char *name)
{
	struct shm_hdr h;
	int fd, who = 2;

	if (shm_region_stale(name + 1, 0)) {
		shm_unlink(name);
		return 0;
	}
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : 2;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == SHM_MAGIC &&
	    h.owner_pid == getpid())
		who = 1;
	close(fd);
	return who;
}

/* Where a region's ring, buffer records and buffers start, and its size. */
struct region_layout {
	uint64_t ring_off, meta_off, buf_off, size;
};

/* The layout of a region with cells ring cells and count buffers. */
static struct region_layout region_layout(uint32_t cells, uint32_t count)
{
	struct region_layout g;

	/* Cells start at 64 mod 128: a cell's first line (its sequence word,
	 * which the owner polls) is not in the same 128-byte pair as its
	 * second, which the hardware's adjacent-line prefetcher would then
	 * fetch with it while the producer is about to write it. */
	g.ring_off = align_up(sizeof(struct shm_hdr), 2 * SHM_CACHE_LINE) + SHM_CACHE_LINE;
	g.meta_off = g.ring_off + (uint64_t)cells * SHM_CELL_SIZE;
	g.buf_off = align_up(g.meta_off + (uint64_t)count * sizeof(struct shm_buf_meta),
	                     SHM_BUF_ALIGN);
	g.size = g.buf_off + (uint64_t)count * SHM_BUF_SIZE;
	return g;
}

/* Create r's object exclusively, naming r after attr's token or a random
 * one; a named region's name in use is taken over or given up as
 * named_holder says.  Returns the open descriptor, or a negative error. */
static int region_open(struct shm_region *r, const struct shm_region_attr *attr,
                       bool named)
{
	uint64_t token = attr ? attr->token : 0;
	int fd, ret;

again:
	if (!token && getrandom(&token, sizeof(token), 0) != (ssize_t)sizeof(token)) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "getrandom: %s\n", strerror(errno));
		return ret;
	}
	r->token = token;
	shm_make_name(r->name, sizeof(r->name), named ? 0 : r->pid, token);
	shm_addr_format(r->addr, sizeof(r->addr), named ? 0 : r->pid, token);

	fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && named) {
		/* A name is reused once its owner is dead (the caller's
		 * reclaim may have raced with its death); one held by a live
		 * endpoint of this process is only a hint's, and a fresh
		 * address does. */
		ret = named_holder(r->name);
		if (ret == 0)
			goto again;
		if (ret == 1 && attr->name_hint) {
			named = false;
			token = 0;
			goto again;
		}
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "%s is in use\n", r->name);
		return -FI_EADDRINUSE;
	}
	if (fd < 0) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "shm_open %s: %s\n", r->name,
		        strerror(errno));
		return ret;
	}
	return fd;
}

/* Size the fresh object fd, called name, and map it: *base on success. */
static int region_map(const char *name, int fd, uint64_t size, char **base)
{
	char *b;
	int ret;

	/* The umask may have narrowed the mode; nothing may have widened it. */
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)size)) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "sizing %s: %s\n", name,
		        strerror(errno));
		return ret;
	}
	b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL, "mmap %s: %s\n", name,
		        strerror(errno));
		return ret;
	}
	*base = b;
	return 0;
}

/* Fill r's fresh (zero-filled) object at base: header, ring cells and free
 * buffer list, the magic last, after a release fence. */
static void region_fill(char *base, const struct shm_region *r,
                        const struct region_layout *g, uint32_t cells, uint32_t count,
                        uint64_t start)
{
	struct shm_hdr *h = (struct shm_hdr *)base;
	uint32_t i;

	h->version = SHM_LAYOUT_VERSION;
	h->hdr_size = sizeof(*h);
	h->total_size = g->size;
	h->token = r->token;
	h->owner_pid = r->pid;
	h->owner_start = start;
	h->cma_probe_addr = (uint64_t)(uintptr_t)&cma_probe_word;
	h->ring_off = g->ring_off;
	h->ring_cells = cells;
	h->buf_count = count;
	h->meta_off = g->meta_off;
	h->buf_off = g->buf_off;
	h->buf_size = SHM_BUF_SIZE;
	/* The cells stay as the fresh object has them, zero: a sequence word
	 * of 0 is never a committed position's (pos + 1), and no page of
	 * the ring is touched before a message uses it, so an idle region
	 * costs its header, not its ring. */
	for (i = 0; i < count; i++) {
		struct shm_buf_meta *m = (struct shm_buf_meta *)(base + g->meta_off) + i;

		atomic_init(&m->next, i + 1 < count ? i + 1 : SHM_BUF_NONE);
		atomic_init(&m->state, SHM_BUF_FREE);
	}
	atomic_init(&h->buf_free, count ? 0 : SHM_BUF_NONE);
	atomic_init(&h->ring_head, 0);
	atomic_init(&h->ring_freed, 0);
	atomic_init(&h->sleeping, 0);
	atomic_store_explicit(&h->alive, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	h->magic = SHM_MAGIC;
}

int shm_region_create(const struct shm_region_attr *attr, struct shm_region **out)
{
	uint32_t cells = attr && attr->ring_cells ? attr->ring_cells : SHM_RING_CELLS_DEF;
	uint32_t count = attr && attr->buf_count ? attr->buf_count : SHM_BUF_COUNT_DEF;
	struct region_layout g;
	struct shm_region *r;
	uint64_t start;
	bool named;
	char *base;
	int fd, ret;

	if (!out || cells > SHM_RING_CELLS_MAX || count > SHM_BUF_COUNT_MAX)
		return -FI_EINVAL;
	cells = pow2_at_least(cells);
	start = shm_proc_start(getpid());
	if (!start) {
		LM_WARN(shm_log_prov, FI_LOG_EP_CTRL,
		        "cannot read own start time from /proc\n");
		return -FI_ENOSYS;
	}
	named = attr && attr->named;
	if (named && !attr->token)
		return -FI_EINVAL;
	shm_region_reclaim();

	r = calloc(1, sizeof(*r));
	if (!r)
		return -FI_ENOMEM;
	r->pid = getpid();
	r->sock = -1;
	lm_list_init(&r->node);
	g = region_layout(cells, count);
	fd = region_open(r, attr, named);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}
	ret = region_map(r->name, fd, g.size, &base);
	close(fd);
	if (ret)
		goto err_unlink;
	region_fill(base, r, &g, cells, count, start);

	ret = shm_map_check(&r->map, base, g.size, r->name);
	if (ret)
		goto err_unmap;
	ret = shm_bell_open(r->name);
	if (ret < 0)
		goto err_unmap;
	r->sock = ret;

	pthread_mutex_lock(&live_lock);
	lm_list_push_back(&live, &r->node);
	pthread_mutex_unlock(&live_lock);
	LM_INFO(shm_log_prov, FI_LOG_EP_CTRL,
	        "created %s (%u cells, %u buffers, %" PRIu64 " bytes)\n", r->name, cells,
	        count, g.size);
	*out = r;
	return 0;

err_unmap:
	munmap(base, g.size);
err_unlink:
	shm_unlink(r->name);
err_free:
	free(r);
	return ret;
}

void shm_region_destroy(struct shm_region *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&live_lock);
	lm_list_remove(&r->node);
	pthread_mutex_unlock(&live_lock);
	/* A forked child closing its inherited copy must not kill the parent's. */
	if (r->pid == getpid()) {
		atomic_store_explicit(&r->map.hdr->alive, 0, memory_order_release);
		shm_unlink(r->name);
	}
	if (r->sock >= 0)
		close(r->sock);
	munmap(r->map.base, r->map.size);
	free(r);
}

/* Is region file "loom-<uid>-<pid>-<token>" (pid given) or
 * "loom-<uid>-n-<hash>" (pid 0: the owner is in the header) left over?  Its
 * owner pid is dead, or alive but with a start time other than the one in
 * the header (a recycled pid).  A header not yet complete (no magic) may be
 * under construction and is left alone. */
static bool shm_region_stale(const char *file, pid_t pid)
{
	char path[SHM_NAME_MAX];
	struct stat st;
	struct shm_hdr h;
	bool stale = false;
	int fd;

	if (pid && !shm_pid_exists(pid))
		return true;
	snprintf(path, sizeof(path), "/%s", file);
	fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (!fstat(fd, &st) && st.st_size >= (off_t)sizeof(h) &&
	    pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == SHM_MAGIC &&
	    (pid ? h.owner_pid == pid : h.owner_pid > 0) &&
	    (!shm_pid_exists(h.owner_pid) ||
	     h.owner_start != shm_proc_start(h.owner_pid)))
		stale = true;
	close(fd);
	return stale;
}

/* Is file (a name in SHM_DIR) a region this process created and still
 * holds, whose header names this process as it started? */
static bool live_and_sound(const char *file, uint64_t self_start)
{
	bool found = false;
	struct lm_list *it;

	pthread_mutex_lock(&live_lock);
	lm_list_foreach(&live, it)
	{
		struct shm_region *r = lm_container_of(it, struct shm_region, node);

		if (!strcmp(r->name + 1, file)) {
			found = r->map.hdr->magic == SHM_MAGIC &&
			        r->map.hdr->owner_start == self_start;
			break;
		}
	}
	pthread_mutex_unlock(&live_lock);
	return found;
}

int shm_region_reclaim(void)
{
	char prefix[32];
	struct dirent *d;
	size_t plen;
	DIR *dir;
	pid_t self;
	uint64_t self_start;
	int n = 0;

	self = getpid();
	self_start = shm_proc_start(self);
	plen = (size_t)snprintf(prefix, sizeof(prefix), "loom-%u-", (unsigned)getuid());
	dir = opendir(SHM_DIR);
	if (!dir)
		return 0;
	while ((d = readdir(dir))) {
		char *end;
		long pid;

		if (strncmp(d->d_name, prefix, plen) ||
		    strlen(d->d_name) >= SHM_NAME_MAX - 1)
			continue;
		errno = 0;
		if (!strncmp(d->d_name + plen, "n-", 2)) {
			pid = 0;
		} else {
			pid = strtol(d->d_name + plen, &end, 10);
			if (errno || *end != '-' || pid <= 0 || pid > INT_MAX)
				continue;
			/* One of this process's live regions, its header as
			 * written: no file to open (a process with a thousand
			 * endpoints would open them all at every create).
			 * Anything else under this pid (an earlier process's
			 * leftover, a header changed since) is checked. */
			if (pid == self && live_and_sound(d->d_name, self_start))
				continue;
		}
		if (!shm_region_stale(d->d_name, (pid_t)pid))
			continue;
		/* Unlink through the name in the directory, as shm_unlink would. */
		if (!unlinkat(dirfd(dir), d->d_name, 0)) {
			n++;
			LM_INFO(shm_log_prov, FI_LOG_EP_CTRL, "removed stale region %s\n",
			        d->d_name);
		}
	}
	closedir(dir);
	return n;
}

/* ---- doorbell --------------------------------------------------------- */

/* Producers send from one unbound socket per process, made on first use. */
static _Atomic int bell_tx_fd = -1;

static int shm_bell_tx_fd(void)
{
	int fd = atomic_load_explicit(&bell_tx_fd, memory_order_acquire);
	int expect = -1;

	if (fd >= 0)
		return fd;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!atomic_compare_exchange_strong(&bell_tx_fd, &expect, fd)) {
		close(fd);
		return expect;
	}
	return fd;
}

/* One byte to the doorbell of the region called name.  Non-blocking,
 * errors ignored (an owner gone has nobody to wake). */
static void shm_bell_send(const char *name)
{
	struct sockaddr_un sa;
	socklen_t len = shm_bell_addr(&sa, name);
	int fd = shm_bell_tx_fd();
	char b = 0;

	if (fd >= 0)
		(void)sendto(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		             (struct sockaddr *)&sa, len);
}

void shm_doorbell_send(struct shm_peer *p)
{
	shm_bell_send(p->name);
}

/* ---- room wanted --------------------------------------------------------- */

static bool room_now(struct shm_peer *p, bool buf)
{
	struct shm_map *m = &p->map;
	uint64_t head;

	if (buf)
		return (uint32_t)atomic_load_explicit(&m->hdr->buf_free,
		                                      memory_order_seq_cst) != SHM_BUF_NONE;
	head = atomic_load_explicit(&m->hdr->ring_head, memory_order_relaxed);
	p->freed = atomic_load_explicit(&m->hdr->ring_freed, memory_order_seq_cst);
	return head - p->freed < m->mask + 1;
}

int shm_room_want(struct shm_peer *p, pid_t pid, uint64_t token, bool buf)
{
	struct shm_hdr *h = p->map.hdr;
	struct shm_waiter *w, *mine = NULL;
	uint32_t zero;
	int i;

	/* Already waiting (a slot not rung yet), else a free slot. */
	for (i = 0; i < SHM_WAITERS && !mine; i++) {
		w = &h->waiters[i];
		if (atomic_load_explicit(&w->state, memory_order_acquire) ==
		        SHM_WAITER_WAITING &&
		    atomic_load_explicit(&w->pid, memory_order_relaxed) == pid &&
		    atomic_load_explicit(&w->token, memory_order_relaxed) == token)
			mine = w;
	}
	for (i = 0; i < SHM_WAITERS && !mine; i++) {
		w = &h->waiters[i];
		zero = SHM_WAITER_FREE;
		if (atomic_compare_exchange_strong_explicit(
		        &w->state, &zero, SHM_WAITER_WRITING, memory_order_acquire,
		        memory_order_relaxed)) {
			atomic_store_explicit(&w->pid, pid, memory_order_relaxed);
			atomic_store_explicit(&w->token, token, memory_order_relaxed);
			atomic_store_explicit(&w->state, SHM_WAITER_WAITING,
			                      memory_order_release);
			mine = w;
		}
	}
	if (!mine)
		return -FI_EBUSY;
	atomic_store_explicit(&h->room_wanted, 1, memory_order_seq_cst);
	return room_now(p, buf) ? -FI_EAGAIN : 0;
}

void shm_room_ring(struct shm_region *r)
{
	struct shm_hdr *h = r->map.hdr;
	char name[SHM_NAME_MAX];
	uint64_t token;
	uint32_t two;
	pid_t pid;
	int i;

	if (!atomic_exchange_explicit(&h->room_wanted, 0, memory_order_acquire))
		return;
	for (i = 0; i < SHM_WAITERS; i++) {
		struct shm_waiter *w = &h->waiters[i];

		if (atomic_load_explicit(&w->state, memory_order_acquire) !=
		    SHM_WAITER_WAITING)
			continue;
		pid = atomic_load_explicit(&w->pid, memory_order_relaxed);
		token = atomic_load_explicit(&w->token, memory_order_relaxed);
		two = SHM_WAITER_WAITING;
		if (!atomic_compare_exchange_strong_explicit(
		        &w->state, &two, SHM_WAITER_FREE, memory_order_acq_rel,
		        memory_order_relaxed))
			continue;
		/* Whatever a peer wrote there, the datagram can only reach a
		 * loom doorbell of this user. */
		if (pid < 0)
			continue;
		shm_make_name(name, sizeof(name), pid, token);
		shm_bell_send(name);
	}
}

int shm_region_fd(const struct shm_region *r)
{
	return r->sock;
}

int shm_doorbell_arm(struct shm_region *r)
{
	atomic_store_explicit(&r->map.hdr->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (shm_ring_ready(r)) {
		atomic_store_explicit(&r->map.hdr->sleeping, 0, memory_order_relaxed);
		return -FI_EAGAIN;
	}
	return 0;
}

void shm_doorbell_disarm(struct shm_region *r)
{
	atomic_store_explicit(&r->map.hdr->sleeping, 0, memory_order_relaxed);
}

void shm_doorbell_drain(struct shm_region *r)
{
	char buf[64];

	while (recv(r->sock, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
}

/* ---- peers -------------------------------------------------------------- */

/* Whether fd, peer addr's region, may be mapped: a plain file of ours with
 * mode 0600 and a size a header fits in.  Fills *st. */
static int peer_file_check(int fd, const char *addr, struct stat *st)
{
	if (fstat(fd, st))
		return lm_neg_errno(errno);
	if (st->st_uid != geteuid() || (st->st_mode & 077) || !S_ISREG(st->st_mode)) {
		LM_WARN(shm_log_prov, FI_LOG_AV,
		        "peer %s: region not ours with mode 0600\n", addr);
		return -FI_EACCES;
	}
	if (st->st_size < (off_t)sizeof(struct shm_hdr) ||
	    (uint64_t)st->st_size > SIZE_MAX) {
		LM_WARN(shm_log_prov, FI_LOG_AV, "peer %s: region of %lld bytes\n", addr,
		        (long long)st->st_size);
		return -FI_EINVAL;
	}
	return 0;
}

/* Whether p's mapped header names p's owner (a named address learns its
 * pid there) and that owner is still the process that made the region. */
static int peer_owner_check(struct shm_peer *p, const char *addr)
{
	pid_t pid = p->pid;
	uint64_t start;

	/* A named endpoint's address gives only the hash: the owner is in
	 * the header, which must hold the same hash. */
	if (!pid)
		p->pid = pid = p->map.hdr->owner_pid;
	if (pid <= 0 || p->map.hdr->owner_pid != pid || p->map.hdr->token != p->token) {
		LM_WARN(shm_log_prov, FI_LOG_AV, "peer %s: header names another owner\n",
		        addr);
		return -FI_EINVAL;
	}
	p->start = p->map.hdr->owner_start;
	start = shm_proc_start(pid);
	if (!start || start != p->start ||
	    !atomic_load_explicit(&p->map.hdr->alive, memory_order_acquire)) {
		LM_WARN(shm_log_prov, FI_LOG_AV, "peer %s: owner process is gone\n",
		        addr);
		return -FI_EHOSTDOWN;
	}
	return 0;
}

int shm_peer_open(const char *addr, struct shm_peer **out)
{
	struct shm_peer *p;
	struct stat st;
	uint64_t token;
	char *base;
	pid_t pid;
	int fd, ret;

	if (!out || shm_addr_parse(addr, &pid, &token)) {
		LM_WARN(shm_log_prov, FI_LOG_AV, "bad shm address %s\n",
		        addr ? addr : "(null)");
		return -FI_EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->pid = pid;
	p->token = token;
	shm_make_name(p->name, sizeof(p->name), pid, token);
	shm_addr_format(p->addr, sizeof(p->addr), pid, token);

	fd = shm_open(p->name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		ret = lm_neg_errno(errno);
		/* No region: the peer is gone, or its /dev/shm is not ours (a
		 * tcp endpoint then reaches it over TCP): news, not a fault. */
		if (errno == ENOENT)
			LM_INFO(shm_log_prov, FI_LOG_AV, "peer %s: no region here\n", addr);
		else
			LM_WARN(shm_log_prov, FI_LOG_AV, "peer %s: %s\n", addr, strerror(errno));
		goto err_free;
	}
	ret = peer_file_check(fd, addr, &st);
	if (ret)
		goto err_close;
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		ret = lm_neg_errno(errno);
		LM_WARN(shm_log_prov, FI_LOG_AV, "peer %s: mmap: %s\n", addr,
		        strerror(errno));
		goto err_close;
	}
	close(fd);
	fd = -1;
	ret = shm_map_check(&p->map, base, (size_t)st.st_size, p->name);
	if (ret)
		goto err_unmap;
	ret = peer_owner_check(p, addr);
	if (ret)
		goto err_unmap;
	*out = p;
	return 0;

err_unmap:
	munmap(base, (size_t)st.st_size);
err_close:
	if (fd >= 0)
		close(fd);
err_free:
	free(p);
	return ret;
}

void shm_peer_close(struct shm_peer *p)
{
	if (!p)
		return;
	munmap(p->map.base, p->map.size);
	free(p);
}

bool shm_peer_alive(const struct shm_peer *p)
{
	if (!atomic_load_explicit(&p->map.hdr->alive, memory_order_acquire))
		return false;
	if (!shm_pid_exists(p->pid))
		return false;
	return shm_proc_start(p->pid) == p->start;
}
