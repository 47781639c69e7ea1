/* av_shm.c - the shared segment of a named address vector (man fi_av,
 * attr->name): a POSIX shared-memory object of the user's, mode 0600 and
 * owner-checked as shm's regions are, that every process opening the AV
 * by that name maps.  It holds the addresses by fi_addr index, their use
 * counts, a generation bumped by every change (each process's AV
 * follows it, av.c), and the array of fi_addr_t values that
 * attr->map_addr points at.
 *
 *   header | fi_addr_t map[cap] | slot[cap]: { use count, address }
 *
 * A lock word holds the pid of its holder, so a holder that died is
 * found out and its lock taken over.  The users' pids are kept: the
 * object goes when the last user closes it, and an object whose users
 * all died is made anew by the next open. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define AV_SHM_MAGIC 0x31766d6f6f6cULL /* "loomv1" */
/* Processes that may have one AV open at once. */
#define AV_SHM_USERS 256
/* Slots of an AV whose attr->count is 0, and the most it may ask. */
#define AV_SHM_DEFAULT_CAP 1024
#define AV_SHM_MAX_CAP     ((size_t)1 << 20)

struct av_shm_hdr {
	uint64_t magic;
	uint32_t uid, addrlen;
	uint64_t cap;
	uint64_t type;
	_Atomic uint64_t gen;
	_Atomic int32_t lock; /* pid of the holder, 0: free */
	uint32_t next;        /* one past the highest slot ever used */
	int32_t users[AV_SHM_USERS];
	uint64_t ready; /* AV_SHM_MAGIC once the creator filled it */
};

struct lm_av_shm {
	struct av_shm_hdr *hdr;
	fi_addr_t *map;
	unsigned char *slots;
	size_t slot_size, size;
	bool rdonly;
	char name[64];
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static size_t seg_size(size_t cap, size_t slot_size)
{
	return sizeof(struct av_shm_hdr) + cap * sizeof(fi_addr_t) + cap * slot_size;
}

static bool pid_alive(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

void lm_av_shm_lock(struct lm_av_shm *s)
{
	int32_t me = (int32_t)getpid(), cur;

	for (unsigned n = 0;; n++) {
		cur = 0;
		if (atomic_compare_exchange_weak(&s->hdr->lock, &cur, me))
			return;
		/* A holder that died leaves its lock to the next comer. */
		if (cur && n % 1024 == 1023 && !pid_alive(cur))
			atomic_compare_exchange_strong(&s->hdr->lock, &cur, 0);
		sched_yield();
	}
}

void lm_av_shm_unlock(struct lm_av_shm *s)
{
	atomic_store(&s->hdr->lock, 0);
}

static uint64_t *slot_use(struct lm_av_shm *s, size_t idx)
{
	return (uint64_t *)(s->slots + idx * s->slot_size);
}

static unsigned char *slot_addr(struct lm_av_shm *s, size_t idx)
{
	return s->slots + idx * s->slot_size + sizeof(uint64_t);
}

/* Under the lock: this process among the users; -FI_ENOSPC when full. */
static int user_add(struct av_shm_hdr *h)
{
	int32_t me = (int32_t)getpid();
	int free = -1;

	for (int i = 0; i < AV_SHM_USERS; i++) {
		if (h->users[i] && !pid_alive(h->users[i]))
			h->users[i] = 0;
		if (!h->users[i] && free < 0)
			free = i;
	}
	if (free < 0)
		return -FI_ENOSPC;
	h->users[free] = me;
	return 0;
}

/* Under the lock: this process's use gone (one of them); true when no
 * user is left, alive. */
static bool user_drop(struct av_shm_hdr *h)
{
	int32_t me = (int32_t)getpid();
	bool dropped = false, any = false;

	for (int i = 0; i < AV_SHM_USERS; i++) {
		if (!dropped && h->users[i] == me) {
			h->users[i] = 0;
			dropped = true;
		} else if (h->users[i] && pid_alive(h->users[i])) {
			any = true;
		}
	}
	return !any;
}

/* The object of an existing AV, opened and checked: the user's, private
 * to it, and filled by its creator.  -FI_ENOENT when its users all died
 * (it was removed: the caller makes it anew). */
static int seg_attach(struct lm_av_shm *s, int fd, const struct fi_av_attr *attr,
                      size_t addrlen, enum fi_av_type type)
{
	struct stat st;
	struct av_shm_hdr h;
	bool alive = false;
	void *base;

	/* The creator sizes it right after creating it. */
	for (int i = 0; i < 1000; i++) {
		if (fstat(fd, &st))
			return lm_neg_errno(errno);
		if ((size_t)st.st_size >= sizeof(h))
			break;
		usleep(1000);
	}
	if (st.st_uid != getuid() || (st.st_mode & 077) ||
	    (size_t)st.st_size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != sizeof(h))
		return -FI_EACCES;
	for (int i = 0; i < 1000 && h.ready != AV_SHM_MAGIC; i++) {
		usleep(1000);
		if (pread(fd, &h, sizeof(h), 0) != sizeof(h))
			return -FI_EIO;
	}
	if (h.magic != AV_SHM_MAGIC || h.ready != AV_SHM_MAGIC || h.uid != getuid() ||
	    h.addrlen != addrlen || !h.cap || h.cap > AV_SHM_MAX_CAP ||
	    (size_t)st.st_size != seg_size(h.cap, s->slot_size))
		return -FI_EINVAL;
	/* Opened as another type: not the same AV. */
	if (h.type != (uint64_t)type)
		return -FI_EINVAL;
	for (int i = 0; i < AV_SHM_USERS; i++)
		alive |= pid_alive(h.users[i]);
	if (!alive)
		return -FI_ENOENT;
	s->size = (size_t)st.st_size;
	base = mmap(attr->map_addr ? (char *)attr->map_addr - sizeof(h) : NULL, s->size,
	            PROT_READ | PROT_WRITE,
	            MAP_SHARED | (attr->map_addr ? MAP_FIXED_NOREPLACE : 0), fd, 0);
	if (base == MAP_FAILED)
		return attr->map_addr ? -FI_EINVAL : lm_neg_errno(errno);
	s->hdr = base;
	return 0;
}

/* A new AV's object: sized, mapped, its header and slots filled. */
static int seg_create(struct lm_av_shm *s, int fd, const struct fi_av_attr *attr,
                      size_t addrlen, enum fi_av_type type)
{
	size_t cap = attr->count ? attr->count : AV_SHM_DEFAULT_CAP;
	void *base;

	if (cap > AV_SHM_MAX_CAP)
		return -FI_EINVAL;
	s->size = seg_size(cap, s->slot_size);
	if (ftruncate(fd, (off_t)s->size))
		return lm_neg_errno(errno);
	base = mmap(attr->map_addr ? (char *)attr->map_addr - sizeof(struct av_shm_hdr)
	                           : NULL,
	            s->size, PROT_READ | PROT_WRITE,
	            MAP_SHARED | (attr->map_addr ? MAP_FIXED_NOREPLACE : 0), fd, 0);
	if (base == MAP_FAILED)
		return attr->map_addr ? -FI_EINVAL : lm_neg_errno(errno);
	s->hdr = base;
	s->hdr->magic = AV_SHM_MAGIC;
	s->hdr->uid = getuid();
	s->hdr->addrlen = (uint32_t)addrlen;
	s->hdr->cap = cap;
	s->hdr->type = (uint64_t)type;
	s->map = (fi_addr_t *)(s->hdr + 1);
	for (size_t i = 0; i < cap; i++)
		s->map[i] = FI_ADDR_NOTAVAIL;
	/* A creator that dies before this line leaves an object others
	 * refuse (and the next creator removes). */
	s->hdr->users[0] = (int32_t)getpid();
	atomic_thread_fence(memory_order_release);
	s->hdr->ready = AV_SHM_MAGIC;
	return 0;
}

int lm_av_shm_open(const struct fi_av_attr *attr, size_t addrlen, enum fi_av_type type,
                   struct lm_av_shm **out)
{
	bool rdonly = attr->flags & FI_READ;
	struct lm_av_shm *s;
	int ret = 0;

	if (!attr->name || !*attr->name)
		return -FI_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -FI_ENOMEM;
	s->rdonly = rdonly;
	s->slot_size = (sizeof(uint64_t) + addrlen + 7) & ~(size_t)7;
	snprintf(s->name, sizeof(s->name), "/loom-%u-av-%016llx", (unsigned)getuid(),
	         (unsigned long long)name_hash(attr->name));
	for (int tries = 0; tries < 8; tries++) {
		int fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0600);
		bool made = false;

		if (fd < 0 && errno == ENOENT && !rdonly) {
			fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			made = fd >= 0;
			if (fd < 0 && errno == EEXIST)
				continue; /* made meanwhile: open it */
		}
		if (fd < 0) {
			ret = errno == ENOENT ? -FI_ENOENT : lm_neg_errno(errno);
			break;
		}
		ret = made ? seg_create(s, fd, attr, addrlen, type)
		           : seg_attach(s, fd, attr, addrlen, type);
		close(fd);
		if (made && ret)
			shm_unlink(s->name);
		if (ret == -FI_ENOENT && !made) {
			/* Every user died: gone, and made anew (or, read-only,
			 * there is nothing to read). */
			shm_unlink(s->name);
			if (rdonly)
				break;
			continue;
		}
		if (ret)
			break;
		s->map = (fi_addr_t *)(s->hdr + 1);
		s->slots = (unsigned char *)(s->map + s->hdr->cap);
		if (!made) {
			lm_av_shm_lock(s);
			ret = user_add(s->hdr);
			lm_av_shm_unlock(s);
			if (ret) {
				munmap(s->hdr, s->size);
				break;
			}
		}
		*out = s;
		return 0;
	}
	free(s);
	return ret ? ret : -FI_EBUSY;
}

void lm_av_shm_close(struct lm_av_shm *s)
{
	bool last;

	lm_av_shm_lock(s);
	last = user_drop(s->hdr);
	if (last)
		shm_unlink(s->name); /* under the lock: no one attaches meanwhile */
	lm_av_shm_unlock(s);
	munmap(s->hdr, s->size);
	free(s);
}

fi_addr_t *lm_av_shm_map(struct lm_av_shm *s)
{
	return s->map;
}

bool lm_av_shm_rdonly(const struct lm_av_shm *s)
{
	return s->rdonly;
}

uint64_t lm_av_shm_gen(struct lm_av_shm *s)
{
	return atomic_load_explicit(&s->hdr->gen, memory_order_acquire);
}

size_t lm_av_shm_next(struct lm_av_shm *s)
{
	return s->hdr->next;
}

const void *lm_av_shm_slot(struct lm_av_shm *s, size_t idx)
{
	return idx < s->hdr->next && *slot_use(s, idx) ? slot_addr(s, idx) : NULL;
}

int lm_av_shm_put(struct lm_av_shm *s, const void *addr, size_t *idx)
{
	size_t free = SIZE_MAX, alen = s->hdr->addrlen;

	for (size_t i = 0; i < s->hdr->next; i++) {
		if (!*slot_use(s, i)) {
			if (free == SIZE_MAX)
				free = i;
		} else if (!memcmp(slot_addr(s, i), addr, alen)) {
			++*slot_use(s, i);
			*idx = i;
			return 0;
		}
	}
	if (free == SIZE_MAX) {
		if (s->hdr->next == s->hdr->cap)
			return -FI_ENOSPC;
		free = s->hdr->next++;
	}
	memcpy(slot_addr(s, free), addr, alen);
	*slot_use(s, free) = 1;
	s->map[free] = free;
	atomic_fetch_add_explicit(&s->hdr->gen, 1, memory_order_release);
	*idx = free;
	return 0;
}

int lm_av_shm_drop(struct lm_av_shm *s, size_t idx)
{
	if (idx >= s->hdr->next || !*slot_use(s, idx))
		return -FI_EINVAL;
	if (!--*slot_use(s, idx)) {
		s->map[idx] = FI_ADDR_NOTAVAIL;
		atomic_fetch_add_explicit(&s->hdr->gen, 1, memory_order_release);
	}
	return 0;
}
