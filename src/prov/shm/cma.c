/* cma.c - single-copy transfers between processes with cross-memory attach
 * (process_vm_readv/writev), probed at run time because kernels, containers
 * and ptrace policies may refuse it. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core.h"
#include "iov.h"
#include "shm_link.h"

/* Entries per system call: far below IOV_MAX, enough to amortise it. */
#define CMA_IOV_BATCH 64

static _Atomic int cma_self; /* 0 unknown, 1 works, negative: why not */

static int cma_errno(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return -FI_EPERM;
	case ENOSYS:
	case EOPNOTSUPP:
		return -FI_ENOSYS;
	case EFAULT:
		return -FI_EFAULT;
	case ENOMEM:
		return -FI_ENOMEM;
	case EINVAL:
		return -FI_EINVAL;
	default: /* ESRCH: the process is gone */
		return -FI_EIO;
	}
}

/* A cursor over an iovec array: entry i, offset off inside it. */
struct cma_cursor {
	const struct iovec *iov;
	size_t cnt, i, off;
};

/* Fill out[] with up to CMA_IOV_BATCH pieces from the cursor, at most max
 * bytes; returns the count and the byte total in *bytes. */
static size_t cma_batch(const struct cma_cursor *c, struct iovec *out, size_t max,
                        size_t *bytes)
{
	size_t n = 0, i = c->i, off = c->off, total = 0;

	while (i < c->cnt && n < CMA_IOV_BATCH && total < max) {
		size_t len = LM_MIN(c->iov[i].iov_len - off, max - total);

		if (len) {
			/* An address, maybe another process's (and a peer's
			 * 0): integer arithmetic, not a pointer's. */
			out[n].iov_base = (void *)((uintptr_t)c->iov[i].iov_base + off);
			out[n].iov_len = len;
			n++;
			total += len;
		}
		i++;
		off = 0;
	}
	*bytes = total;
	return n;
}

static void cma_advance(struct cma_cursor *c, size_t bytes)
{
	while (bytes && c->i < c->cnt) {
		size_t left = c->iov[c->i].iov_len - c->off;

		if (bytes < left) {
			c->off += bytes;
			return;
		}
		bytes -= left;
		c->i++;
		c->off = 0;
	}
	/* Skip empty entries so the next batch starts on data. */
	while (c->i < c->cnt && c->iov[c->i].iov_len == c->off) {
		c->i++;
		c->off = 0;
	}
}

static ssize_t cma_copy(pid_t pid, const struct iovec *local, size_t lcnt,
                        const struct iovec *remote, size_t rcnt, bool write)
{
	struct cma_cursor lc = {local, lcnt, 0, 0}, rc = {remote, rcnt, 0, 0};
	struct iovec lb[CMA_IOV_BATCH], rb[CMA_IOV_BATCH];
	size_t want = LM_MIN(lm_iov_len(local, lcnt), lm_iov_len(remote, rcnt));
	size_t done = 0;

	while (done < want) {
		size_t lbytes, rbytes, ln, rn;
		ssize_t n;

		/* Both batches describe the same byte count. */
		ln = cma_batch(&lc, lb, want - done, &lbytes);
		rn = cma_batch(&rc, rb, lbytes, &rbytes);
		if (rbytes < lbytes)
			ln = cma_batch(&lc, lb, rbytes, &lbytes);
		n = write ? process_vm_writev(pid, lb, ln, rb, rn, 0)
		          : process_vm_readv(pid, lb, ln, rb, rn, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			LM_DEBUG(shm_log_prov, FI_LOG_EP_DATA,
			         "process_vm_%s pid %d: %s\n", write ? "writev" : "readv",
			         (int)pid, strerror(errno));
			return cma_errno(errno);
		}
		if (n == 0) {
			/* A partial transfer stops at the first bad remote page:
			 * retrying from there makes the kernel report why. */
			if (done < want)
				return -FI_EFAULT;
			break;
		}
		done += (size_t)n;
		cma_advance(&lc, (size_t)n);
		cma_advance(&rc, (size_t)n);
	}
	return (ssize_t)done;
}

ssize_t shm_cma_read(pid_t pid, const struct iovec *local, size_t lcnt,
                     const struct iovec *remote, size_t rcnt)
{
	return cma_copy(pid, local, lcnt, remote, rcnt, false);
}

ssize_t shm_cma_write(pid_t pid, const struct iovec *local, size_t lcnt,
                      const struct iovec *remote, size_t rcnt)
{
	return cma_copy(pid, local, lcnt, remote, rcnt, true);
}

/* Read the word at addr in process pid: 1 when it is want, else a
 * negative code (-FI_EIO: the copy was short or read another value). */
static int probe_word(pid_t pid, uint64_t addr, uint64_t want)
{
	uint64_t dst = 0;
	struct iovec l = {&dst, sizeof(dst)}, r = {(void *)(uintptr_t)addr, sizeof(dst)};
	ssize_t n = shm_cma_read(pid, &l, 1, &r, 1);

	if (n < 0)
		return (int)n;
	return n == (ssize_t)sizeof(dst) && dst == want ? 1 : -FI_EIO;
}

int shm_cma_probe(void)
{
	static const uint64_t src = SHM_CMA_PROBE_WORD;
	int st;

	st = atomic_load(&cma_self);
	if (st)
		return st > 0 ? 0 : st;
	st = probe_word(getpid(), (uint64_t)(uintptr_t)&src, src);
	if (st < 0)
		LM_INFO(shm_log_prov, FI_LOG_CORE,
		        "cross-memory attach unavailable (%s): using bounce buffers\n",
		        fi_strerror(-st));
	atomic_store(&cma_self, st);
	return st > 0 ? 0 : st;
}

int shm_cma_peer_probe(struct shm_peer *p)
{
	int st;

	if (p->cma)
		return p->cma > 0 ? 0 : p->cma;
	/* The address comes from shared memory: a wrong one only makes the
	 * kernel fail the read of the peer, never touches our memory. */
	st = probe_word(p->pid, p->map.hdr->cma_probe_addr, SHM_CMA_PROBE_WORD);
	if (st < 0)
		LM_INFO(shm_log_prov, FI_LOG_EP_CTRL,
		        "cross-memory attach to %s refused (%s): using bounce buffers\n",
		        p->addr, fi_strerror(-st));
	p->cma = st;
	return st > 0 ? 0 : st;
}
