/* base.c - the fabric and domain bases providers build on, locks, and the
 * small fid helpers shared by util objects. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "v1_names.h"

/* A lock's waiter (lm_lock_wait) first spins, then yields, then naps. */
#define LOCK_SPINS  128   /* most holds last a few hundred instructions */
#define LOCK_YIELDS 256   /* 128 yields: a holder sharing this CPU gets to finish */
#define LOCK_NAP_NS 20000 /* a long hold (a bulk copy) is waited out 20 us at a time */

void lm_lock_init(struct lm_lock *l, bool on)
{
	atomic_init(&l->held, false);
	atomic_init(&l->hand, LM_HAND_NONE);
	l->on = on;
}

void lm_lock_fini(struct lm_lock *l)
{
	(void)l;
}

void lm_lock_wait(struct lm_lock *l)
{
	bool asked = false;

	/* Spin first (holders are quick), then ask to be handed the lock and
	 * give the CPU to the holder, which may share it.  Without the asking
	 * (another waiter asked first), a long hold (a large bulk copy in
	 * progress) is waited out in short naps; the one that asked only
	 * yields, so that a handed-over lock never waits for it to wake. */
	for (unsigned i = 0;; i++) {
		if (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
		    !atomic_exchange_explicit(&l->held, true, memory_order_acquire)) {
			/* Taken the usual way: no holder saw the request (one
			 * that does gives the lock instead of releasing it). */
			if (asked)
				atomic_store_explicit(&l->hand, LM_HAND_NONE,
				                      memory_order_relaxed);
			return;
		}
		if (asked && atomic_load_explicit(&l->hand, memory_order_acquire) ==
		                 LM_HAND_GIVEN) {
			atomic_store_explicit(&l->hand, LM_HAND_NONE, memory_order_relaxed);
			return;
		}
		if (i >= LOCK_SPINS && !asked) {
			uint8_t none = LM_HAND_NONE;

			asked = atomic_compare_exchange_strong_explicit(
			    &l->hand, &none, LM_HAND_ASKED, memory_order_relaxed,
			    memory_order_relaxed);
		}
		if (i < LOCK_SPINS)
			lm_cpu_relax();
		else if (i < LOCK_YIELDS || asked)
			sched_yield();
		else
			nanosleep(&(struct timespec){.tv_nsec = LOCK_NAP_NS}, NULL);
	}
}

void lm_lock_handoff(struct lm_lock *l)
{
	/* held stays set: the lock passes straight to the waiter that asked. */
	atomic_store_explicit(&l->hand, LM_HAND_GIVEN, memory_order_release);
}

uint64_t lm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t lm_now_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t lm_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int lm_timeout_left(int timeout_ms, uint64_t start_ms)
{
	uint64_t spent;

	if (timeout_ms < 0)
		return -1;
	spent = lm_now_ms() - start_ms;
	return spent >= (uint64_t)timeout_ms ? 0 : (int)((uint64_t)timeout_ms - spent);
}

int lm_fid_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid, (void)bfid, (void)flags;
	return -FI_ENOSYS;
}

int lm_fid_no_control(struct fid *fid, int command, void *arg)
{
	(void)fid, (void)command, (void)arg;
	return -FI_ENOSYS;
}

int lm_fid_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                       void *context)
{
	(void)fid, (void)name, (void)flags, (void)ops, (void)context;
	return -FI_ENOSYS;
}

/* ---- fabric ----------------------------------------------------------- */

static int fabric_close(struct fid *fid)
{
	struct lm_fabric *fab = lm_container_of(fid, struct lm_fabric, fabric_fid.fid);
	int ret = lm_fabric_fini(fab);

	if (!ret)
		free(fab);
	return ret;
}

static const struct fi_ops fabric_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = fabric_close,
    .bind = lm_fid_no_bind,
    .control = lm_fid_no_control,
    .ops_open = lm_fid_no_ops_open,
};

int lm_fabric_init(struct lm_fabric *fab, const struct fi_provider *prov,
                   const struct fi_fabric_attr *attr, const struct fi_ops_fabric *ops,
                   void *context)
{
	if (!fab || !prov || !ops)
		return -FI_EINVAL;
	memset(fab, 0, sizeof(*fab));
	if (attr && attr->name) {
		fab->name = strdup(attr->name);
		if (!fab->name)
			return -FI_ENOMEM;
	}
	fab->prov = prov;
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = (struct fi_ops *)&fabric_fid_ops;
	fab->fabric_fid.ops = (struct fi_ops_fabric *)ops;
	fab->fabric_fid.api_version =
	    attr && attr->api_version ? attr->api_version : LM_VERSION_CURRENT;
	atomic_init(&fab->ref, 0);
	return 0;
}

int lm_fabric_open(const struct fi_provider *prov, const struct fi_fabric_attr *attr,
                   const struct fi_ops_fabric *ops, void *context,
                   struct fid_fabric **fabric)
{
	struct lm_fabric *fab;
	int ret;

	if (!attr || !fabric)
		return -FI_EINVAL;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	ret = lm_fabric_init(fab, prov, attr, ops, context);
	if (ret) {
		free(fab);
		return ret;
	}
	*fabric = &fab->fabric_fid;
	return 0;
}

int lm_fabric_fini(struct lm_fabric *fab)
{
	if (atomic_load(&fab->ref))
		return -FI_EBUSY;
	free(fab->name);
	fab->name = NULL;
	return 0;
}

/* ---- domain ------------------------------------------------------------ */

static int domain_close(struct fid *fid)
{
	struct lm_domain *dom = lm_container_of(fid, struct lm_domain, domain_fid.fid);
	int ret = lm_domain_fini(dom);

	if (!ret)
		free(dom);
	return ret;
}

static int domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct lm_domain *dom = lm_container_of(fid, struct lm_domain, domain_fid.fid);

	if (!bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	if (flags & ~LM_REG_MR)
		return -FI_EBADFLAGS;
	if (dom->eq)
		return -FI_EALREADY;
	dom->eq = lm_container_of(bfid, struct lm_eq, eq_fid.fid);
	dom->eq_flags = flags;
	atomic_fetch_add(&dom->eq->ref, 1); /* the EQ may not close under us */
	return 0;
}

const struct fi_ops lm_domain_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = domain_close,
    .bind = domain_bind,
    .control = lm_mr_domain_control, /* FI_MAP_RAW_MR, FI_UNMAP_KEY */
    .ops_open = lm_fid_no_ops_open,
};

int lm_domain_init(struct lm_domain *dom, struct lm_fabric *fab,
                   const struct fi_info *info, const struct fi_ops_domain *ops,
                   void *context)
{
	if (!dom || !fab || !info || !ops)
		return -FI_EINVAL;
	memset(dom, 0, sizeof(*dom));
	dom->info = lm_info_dup(info);
	if (!dom->info)
		return -FI_ENOMEM;
	dom->fabric = fab;
	if (info->domain_attr) {
		dom->threading = info->domain_attr->threading;
		dom->mr_mode = info->domain_attr->mr_mode;
		dom->caps = info->domain_attr->caps;
	}
	if (!dom->threading)
		dom->threading = FI_THREAD_SAFE;
	dom->shared = lm_threading_shared(dom->threading);
	lm_lock_init(&dom->lock, dom->shared);
	atomic_init(&dom->ref, 0);
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = (struct fi_ops *)&lm_domain_fid_ops;
	dom->domain_fid.ops = (struct fi_ops_domain *)ops;
	dom->domain_fid.mr = (struct fi_ops_mr *)&lm_mr_ops;
	atomic_fetch_add(&fab->ref, 1);
	return 0;
}

int lm_domain_fini(struct lm_domain *dom)
{
	if (atomic_load(&dom->ref))
		return -FI_EBUSY;
	if (dom->eq)
		atomic_fetch_sub(&dom->eq->ref, 1);
	lm_mr_map_destroy(dom->mr_map);
	dom->mr_map = NULL;
	lm_info_free(dom->info);
	dom->info = NULL;
	lm_lock_fini(&dom->lock);
	atomic_fetch_sub(&dom->fabric->ref, 1);
	return 0;
}
