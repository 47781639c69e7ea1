/* util.h - internal interface of loom's util layer: the provider-independent
 * objects every provider reuses (fabric and domain bases, locks, wait
 * objects, progress hooks, CQs, counters, EQs, AVs, MRs, poll sets, tag
 * matching, atomics), the containers they are built from, and iovec,
 * socket, descriptor and IP address helpers.  Each object family keeps its
 * declarations in its own small header, included here, so users include
 * only util.h. */
#ifndef LOOM_UTIL_H
#define LOOM_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "core.h"

#include "bufpool.h"
#include "hash.h"
#include "inet.h"
#include "iov.h"
#include "list.h"
#include "ring.h"
#include "sock.h"

/* ---- locks ---------------------------------------------------------------
 * An object takes its lock only when the domain's threading model lets
 * several threads reach it at once.  The decision is made when the object
 * is opened (lm_lock_init's `on`), never per call. */

struct lm_lock {
	atomic_bool held;
	bool on;
	/* One waiter that has waited long may ask to be handed the lock at
	 * the next release: hand goes LM_HAND_NONE -> ASKED (the waiter) ->
	 * GIVEN (the releasing holder, which leaves held set) -> NONE (the
	 * waiter, now holder).  Nobody else can ask meanwhile, so the grant
	 * is the asker's alone; and a thread taking the lock again and again
	 * cannot keep it out. */
	_Atomic uint8_t hand;
};

enum { LM_HAND_NONE, LM_HAND_ASKED, LM_HAND_GIVEN };

void lm_lock_init(struct lm_lock *l, bool on);
void lm_lock_fini(struct lm_lock *l);
/* The contended half of lm_lock_acquire. */
void lm_lock_wait(struct lm_lock *l);
/* The half of lm_lock_release that hands the lock to a waiter. */
void lm_lock_handoff(struct lm_lock *l);

static inline void lm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* A spin lock rather than pthread's mutex: taking it is one atomic and
 * releasing it a plain store, where a mutex pays an atomic each way plus
 * its bookkeeping; the data path takes several per message under
 * FI_THREAD_SAFE.  Holders never sleep under it, and most keep it for a
 * few hundred instructions; a waiter that spins too long (behind a large
 * bulk copy, say) yields, then naps (lm_lock_wait).  A test-and-set lock
 * favours the thread that just released it: one polling for progress in
 * a loop kept a thread that wanted to post a receive out for
 * milliseconds (Open MPI with threads), so a waiter that has spun a while
 * asks to be handed the lock at the next release (hand). */
static inline void lm_lock_acquire(struct lm_lock *l)
{
	if (l->on && atomic_exchange_explicit(&l->held, true, memory_order_acquire))
		lm_lock_wait(l);
}

/* true if taken (always, when the lock is off). */
static inline bool lm_lock_try(struct lm_lock *l)
{
	return !l->on || (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
	                  !atomic_exchange_explicit(&l->held, true, memory_order_acquire));
}

static inline void lm_lock_release(struct lm_lock *l)
{
	if (!l->on)
		return;
	if (atomic_load_explicit(&l->hand, memory_order_relaxed) == LM_HAND_ASKED)
		lm_lock_handoff(l);
	else
		atomic_store_explicit(&l->held, false, memory_order_release);
}

/* Does an object shared between endpoints (CQ, counter, AV, MR map) need a
 * lock under this threading model?  FI_THREAD_DOMAIN and
 * FI_THREAD_COMPLETION promise a single thread per domain / per completion
 * object; every other model (and UNSPEC) may share. */
static inline bool lm_threading_shared(enum fi_threading t)
{
	return !(t == FI_THREAD_DOMAIN || t == FI_THREAD_COMPLETION);
}

/* ---- fabric and domain bases ---------------------------------------------
 * A provider embeds these at the start of its own fabric/domain structs
 * and starts from the default ops tables, overriding what it implements. */

struct lm_fabric {
	struct fid_fabric fabric_fid;
	const struct fi_provider *prov;
	char *name;
	atomic_int ref; /* domains, EQs, wait sets opened on it */
};

/* fid class FI_CLASS_FABRIC; ops: the given table (lm_fabric_ops if NULL);
 * fi_close on the fid calls close_fn if the provider gives one, else
 * lm_fabric_close + free. */
int lm_fabric_init(struct lm_fabric *fab, const struct fi_provider *prov,
		   const struct fi_fabric_attr *attr, const struct fi_ops_fabric *ops,
		   void *context);
/* Allocate and initialise a fabric: a provider's fi_provider.fabric. */
int lm_fabric_open(const struct fi_provider *prov, const struct fi_fabric_attr *attr,
                   const struct fi_ops_fabric *ops, void *context,
                   struct fid_fabric **fabric);
/* -FI_EBUSY while anything opened on the fabric is still open. */
int lm_fabric_fini(struct lm_fabric *fab);
/* A fabric's ops with a provider's domain and passive_ep calls: eq_open
 * lm_eq_open, wait_open lm_wait_open, trywait lm_trywait, domain2 through
 * domain.  Providers compose their static const table with it. */
#define LM_FABRIC_OPS(domain_fn, pep_fn)                                                 \
	{                                                                                \
		.size = sizeof(struct fi_ops_fabric), .domain = (domain_fn),             \
		.passive_ep = (pep_fn), .eq_open = lm_eq_open, .wait_open = lm_wait_open, \
		.trywait = lm_trywait, .domain2 = lm_fabric_domain2,                     \
	}
/* The providers' version (fi_provider.version, and so every answer's
 * fabric_attr->prov_version): one number for the whole library. */
#define LM_PROV_VERSION FI_VERSION(1, 0)
/* fi_provider.fi_version: the libfabric API release the providers are
 * written and checked against (Debian 12's libfabric 1.17, loom's
 * reference).  The core checks only its major number (registry.c). */
#define LM_PROV_FI_VERSION FI_VERSION(1, 17)
int lm_fabric_no_domain(struct fid_fabric *fabric, struct fi_info *info,
                        struct fid_domain **dom, void *context);
int lm_fabric_no_pep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
                     void *context);
int lm_fabric_domain2(struct fid_fabric *fabric, struct fi_info *info,
                      struct fid_domain **dom, uint64_t flags, void *context);
/* Neither domains nor passive endpoints (-FI_ENOSYS). */
extern const struct fi_ops_fabric lm_fabric_ops;

struct lm_domain {
	struct fid_domain domain_fid;
	struct lm_fabric *fabric;
	struct fi_info *info; /* copy of the info the domain was opened with */
	enum fi_threading threading;
	bool shared;	      /* lm_threading_shared(threading) */
	int mr_mode;
	uint64_t caps;
	struct lm_mr_map *mr_map; /* registered regions by key (mr.c) */
	/* How this provider's addresses look to an AV (av.h); set by the
	 * provider after lm_domain_init. */
	const struct lm_av_addr_ops *av_addr_ops;
	struct lm_eq *eq;	  /* bound with fi_domain_bind */
	uint64_t eq_flags;
	atomic_int ref; /* endpoints, CQs, counters, AVs, MRs, poll sets */
	atomic_int ntrig; /* operations held on its counters (FI_TRIGGER) */
	struct lm_lock lock;
	/* fi_control's FI_QUEUE_WORK, FI_CANCEL_WORK, FI_FLUSH_WORK, when the
	 * provider takes deferred work (NULL: -FI_ENOSYS). */
	int (*work_control)(struct lm_domain *dom, int command, void *arg);
	/* Optional: progress every endpoint of the domain.  A counter no
	 * endpoint is bound to (deferred work's completion_cntr) calls it
	 * where a bound one runs its endpoints' hooks. */
	void (*progress_all)(struct lm_domain *dom);
};

/* info is copied.  ops: lm_domain_ops if NULL. */
int lm_domain_init(struct lm_domain *dom, struct lm_fabric *fab, const struct fi_info *info,
		   const struct fi_ops_domain *ops, void *context);
/* -FI_EBUSY while anything opened on the domain is still open. */
int lm_domain_fini(struct lm_domain *dom);
/* av_open, cq_open, cntr_open, poll_open, query_atomic from util;
 * endpoint/scalable_ep/stx/srx/query_collective: -FI_ENOSYS. */
extern const struct fi_ops_domain lm_domain_ops;
/* fi_mr_reg / regv / regattr on a domain (mr.c). */
extern const struct fi_ops_mr lm_mr_ops;

/* The generic fi_close/fi_control/... table for a domain, used by
 * lm_domain_init (close: lm_domain_fini then free of the lm_domain, so a
 * provider with a bigger struct overrides it). */
extern const struct fi_ops lm_domain_fid_ops;

/* Ops-table helpers: a fid op a util object does not support. */
int lm_fid_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int lm_fid_no_control(struct fid *fid, int command, void *arg);
int lm_fid_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		       void *context);
/* Connection calls of an endpoint that has no connections, and tables
 * whose every call is -FI_ENOSYS (nosys.c): for an fid_ep that does none
 * of these (an RDM endpoint's cm, a shared receive context). */
int lm_cm_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);
int lm_cm_no_connect(struct fid_ep *ep, const void *addr, const void *param,
		     size_t paramlen);
int lm_cm_no_listen(struct fid_pep *pep);
int lm_cm_no_accept(struct fid_ep *ep, const void *param, size_t paramlen);
int lm_cm_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
		    size_t paramlen);
int lm_cm_no_shutdown(struct fid_ep *ep, uint64_t flags);
int lm_cm_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		  struct fid_mc **mc, void *context);
/* fi_tx_context / fi_rx_context of an endpoint that is not scalable. */
int lm_ep_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
                    struct fid_ep **tx_ep, void *context);
int lm_ep_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
                    struct fid_ep **rx_ep, void *context);
/* Each half of the message tables -FI_ENOSYS, for a context that only
 * sends or only receives. */
ssize_t lm_msg_no_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                       fi_addr_t src_addr, void *context);
ssize_t lm_msg_no_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t src_addr, void *context);
ssize_t lm_msg_no_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags);
ssize_t lm_msg_no_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                       fi_addr_t dest_addr, void *context);
ssize_t lm_msg_no_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t dest_addr, void *context);
ssize_t lm_msg_no_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags);
ssize_t lm_msg_no_inject(struct fid_ep *fid, const void *buf, size_t len,
                         fi_addr_t dest_addr);
ssize_t lm_msg_no_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dest_addr, void *context);
ssize_t lm_msg_no_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                             uint64_t data, fi_addr_t dest_addr);
ssize_t lm_tagged_no_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                          fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context);
ssize_t lm_tagged_no_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                           size_t count, fi_addr_t src_addr, uint64_t tag,
                           uint64_t ignore, void *context);
ssize_t lm_tagged_no_recvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                             uint64_t flags);
ssize_t lm_tagged_no_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                          fi_addr_t dest_addr, uint64_t tag, void *context);
ssize_t lm_tagged_no_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                           size_t count, fi_addr_t dest_addr, uint64_t tag, void *context);
ssize_t lm_tagged_no_sendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                             uint64_t flags);
ssize_t lm_tagged_no_inject(struct fid_ep *fid, const void *buf, size_t len,
                            fi_addr_t dest_addr, uint64_t tag);
ssize_t lm_tagged_no_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                              uint64_t data, fi_addr_t dest_addr, uint64_t tag,
                              void *context);
ssize_t lm_tagged_no_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                                uint64_t data, fi_addr_t dest_addr, uint64_t tag);
extern const struct fi_ops_msg lm_nosys_msg_ops;
extern const struct fi_ops_tagged lm_nosys_tagged_ops;
extern const struct fi_ops_cm lm_nosys_cm_ops;
extern const struct fi_ops_rma lm_nosys_rma_ops;
extern const struct fi_ops_atomic lm_nosys_atomic_ops;
/* Domain ops no util domain supports (-FI_ENOSYS), for providers' own
 * tables: the header's inline calls have no NULL check for these. */
int lm_domain_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			     struct fid_ep **sep, void *context);
int lm_domain_no_stx(struct fid_domain *domain, struct fi_tx_attr *attr,
		     struct fid_stx **stx, void *context);
int lm_domain_no_srx(struct fid_domain *domain, struct fi_rx_attr *attr,
		     struct fid_ep **rx_ep, void *context);
int lm_domain_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				  struct fi_collective_attr *attr, uint64_t flags);

/* ---- progress hooks --------------------------------------------------------
 * Data progress is driven by the calls that read completions.  An endpoint
 * bound to a CQ, counter or EQ registers a hook there; reading or waiting
 * on the object runs every hook first.  A hook with a file descriptor
 * (a socket, a doorbell) also has it watched while a reader sleeps. */

struct lm_progress {
	struct lm_list node; /* in the owner's progress list */
	void (*run)(struct lm_progress *p);
	int fd; /* -1 when there is nothing to watch */
};

/* ---- wait objects (wait.c) -----------------------------------------------
 * Every wait object is an epoll instance: an eventfd for signals plus any
 * descriptors added by progress hooks.  FI_WAIT_FD hands the epoll fd to
 * the application (readable when a signal or data is pending), which is
 * why a transport's socket becoming readable also wakes it. */

struct lm_wait {
	struct fid_wait wait_fid; /* valid for wait sets (fi_wait_open) */
	struct lm_fabric *fabric;
	enum fi_wait_obj type;	  /* FD, YIELD, MUTEX_COND, POLLFD (UNSPEC -> FD) */
	int epfd;		  /* epoll over efd and added fds */
	int efd;		  /* eventfd: lm_wait_signal */
	/* FI_WAIT_MUTEX_COND: what FI_GETWAIT hands out; every signal
	 * broadcasts cond as well.  (loom's own sleeps use epfd, which also
	 * sees the links' descriptors.) */
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	atomic_int ref;		  /* the set itself + objects that use it */
	struct lm_list members;	  /* lm_wait_member: objects bound to a set */
	struct lm_hmap fds;	  /* watched fds -> users (struct lm_wait_fd) */
	struct lm_lock lock;
};

/* An object (CQ, counter, EQ) bound to a wait set, so fi_wait can run its
 * progress and fi_trywait can check it. */
struct lm_wait_member {
	struct lm_list node;
	struct fid *fid;
	/* 0 when it has nothing ready (after progressing), -FI_EAGAIN when
	 * it has: what fi_trywait asks. */
	int (*trywait)(struct fid *fid);
};

/* A private wait object for one CQ/counter/EQ that asked for a wait_obj
 * and named no wait set. */
int lm_wait_create(struct lm_fabric *fab, enum fi_wait_obj type, struct lm_wait **out);
void lm_wait_get(struct lm_wait *w);
void lm_wait_put(struct lm_wait *w);
void lm_wait_signal(struct lm_wait *w);
/* Sleep until signalled, a watched fd is ready, or timeout_ms passes
 * (-1: forever).  0 when woken, -FI_ETIMEDOUT otherwise.  Consumes the
 * signal.  FI_WAIT_YIELD objects yield the CPU in a loop instead. */
int lm_wait_block(struct lm_wait *w, int timeout_ms);
/* fi_trywait forgets stale signals before asking "safe to sleep?", or a
 * descriptor left readable by an old signal would make the application's
 * native poll spin.  Callers skip it while a reader sleeps (the signal may
 * be its). */
void lm_wait_drain_stale(struct lm_wait *w);
/* Watch fd too.  Several objects sharing a wait set may watch the same
 * endpoint fd: it stays watched until the last of them deletes it. */
int lm_wait_add_fd(struct lm_wait *w, int fd);
void lm_wait_del_fd(struct lm_wait *w, int fd);
void lm_wait_add_member(struct lm_wait *w, struct lm_wait_member *m);
void lm_wait_del_member(struct lm_wait *w, struct lm_wait_member *m);
/* fi_control(FI_GETWAIT) / FI_GETWAITOBJ for an object using w; w NULL
 * is an object opened with FI_WAIT_NONE. */
int lm_wait_control(struct lm_wait *w, int command, void *arg);

/* fi_wait_open, and fi_trywait (asks each object's member hook). */
int lm_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
		 struct fid_wait **waitset);
int lm_trywait(struct fid_fabric *fabric, struct fid **fids, int count);

/* fi_trywait for one fid: -FI_EAGAIN if the CQ/counter/EQ (or any member
 * of a wait set) has something to read after progressing, 0 if it is safe
 * to sleep, -FI_EINVAL for other classes.  Defined with the default ops
 * tables (defaults.c), the one place that knows every object class. */
int lm_fid_trywait(struct fid *fid);

/* Milliseconds left of a timeout that started at start_ms (-1 stays -1). */
int lm_timeout_left(int timeout_ms, uint64_t start_ms);
uint64_t lm_now_ms(void);
uint64_t lm_now_us(void);
/* The coarse clock (a few ms a tick, read in a few ns, behind lm_now_ms
 * by up to a tick): for a check that runs often and compares only with
 * its own readings. */
uint64_t lm_now_coarse_ms(void);

/* ---- the objects, one header each ----------------------------------------- */
#include "cq.h"	      /* CQs, counters, poll sets */
#include "eq.h"	      /* event queues */
#include "av.h"	      /* address vectors */
#include "mr.h"	      /* memory registration and the target-side check */
#include "tagmatch.h" /* posted/unexpected queues for the RDM engine */
#include "atomic.h"   /* atomic arithmetic for every op x datatype */

#endif
