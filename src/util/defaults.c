/* defaults.c - the default fabric and domain ops tables built from util's
 * objects, and fi_trywait's dispatch: the one place that knows every util
 * object class. */
#include "util.h"

int lm_fabric_no_domain(struct fid_fabric *fabric, struct fi_info *info,
                        struct fid_domain **dom, void *context)
{
	(void)fabric, (void)info, (void)dom, (void)context;
	return -FI_ENOSYS;
}

int lm_fabric_no_pep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
                     void *context)
{
	(void)fabric, (void)info, (void)pep, (void)context;
	return -FI_ENOSYS;
}

int lm_fabric_domain2(struct fid_fabric *fabric, struct fi_info *info,
                      struct fid_domain **dom, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return fabric->ops->domain(fabric, info, dom, context);
}

const struct fi_ops_fabric lm_fabric_ops = LM_FABRIC_OPS(lm_fabric_no_domain, lm_fabric_no_pep);

static int no_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		 void *context)
{
	(void)domain, (void)info, (void)ep, (void)context;
	return -FI_ENOSYS;
}

int lm_domain_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			     struct fid_ep **sep, void *context)
{
	(void)domain, (void)info, (void)sep, (void)context;
	return -FI_ENOSYS;
}

int lm_domain_no_stx(struct fid_domain *domain, struct fi_tx_attr *attr,
		     struct fid_stx **stx, void *context)
{
	(void)domain, (void)attr, (void)stx, (void)context;
	return -FI_ENOSYS;
}

int lm_domain_no_srx(struct fid_domain *domain, struct fi_rx_attr *attr,
		     struct fid_ep **rx_ep, void *context)
{
	(void)domain, (void)attr, (void)rx_ep, (void)context;
	return -FI_ENOSYS;
}

int lm_domain_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				  struct fi_collective_attr *attr, uint64_t flags)
{
	(void)domain, (void)coll, (void)attr, (void)flags;
	return -FI_ENOSYS;
}

static int no_ep2(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		  uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return domain->ops->endpoint(domain, info, ep, context);
}

const struct fi_ops_domain lm_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = lm_av_open,
	.cq_open = lm_cq_open,
	.endpoint = no_ep,
	.scalable_ep = lm_domain_no_scalable_ep,
	.cntr_open = lm_cntr_open,
	.poll_open = lm_poll_open,
	.stx_ctx = lm_domain_no_stx,
	.srx_ctx = lm_domain_no_srx,
	.query_atomic = lm_query_atomic,
	.query_collective = lm_domain_no_query_collective,
	.endpoint2 = no_ep2,
};

int lm_fid_trywait(struct fid *fid)
{
	if (!fid)
		return -FI_EINVAL;
	switch (fid->fclass) {
	case FI_CLASS_CQ:
		return lm_cq_trywait(fid);
	case FI_CLASS_CNTR:
		return lm_cntr_trywait(fid);
	case FI_CLASS_EQ:
		return lm_eq_trywait(fid);
	case FI_CLASS_WAIT: {
		struct lm_wait *w = lm_container_of(fid, struct lm_wait, wait_fid.fid);
		struct lm_list *it;
		int ret = 0;

		lm_wait_drain_stale(w);
		lm_lock_acquire(&w->lock);
		lm_list_foreach(&w->members, it)
		{
			struct lm_wait_member *m = lm_list_entry(it, struct lm_wait_member, node);

			if (m->trywait(m->fid)) {
				ret = -FI_EAGAIN;
				break;
			}
		}
		lm_lock_release(&w->lock);
		return ret;
	}
	default:
		return -FI_EINVAL;
	}
}
