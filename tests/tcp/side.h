/* side.h - what the tcp tests open on each side of a connection: fabric,
 * EQ, domain and CQ from an fi_info, and endpoints bound to them (the
 * OK() macro returns 1 from the caller on failure). */
#ifndef LOOM_TEST_TCP_SIDE_H
#define LOOM_TEST_TCP_SIDE_H

#include <stdbool.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include "check.h"

#define OK(call)                                                                         \
	do {                                                                             \
		int r_ = (int)(call);                                                    \
		CHECK_INT(r_, 0);                                                        \
		if (r_)                                                                  \
			return 1;                                                        \
	} while (0)

/* The fabric objects one process opens from an fi_info. */
struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_eq *eq;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_ep *ep; /* closed by close_side if set */
};

/* Fabric and EQ (one that can be slept on) from s->info; domain and CQ
 * too unless passive. */
static inline int open_side(struct side *s, bool passive)
{
	struct fi_eq_attr eqa = {.size = 64, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {.size = 256, .format = FI_CQ_FORMAT_TAGGED};

	OK(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	OK(fi_eq_open(s->fabric, &eqa, &s->eq, NULL));
	if (passive)
		return 0;
	OK(fi_domain(s->fabric, s->info, &s->domain, NULL));
	OK(fi_cq_open(s->domain, &cqa, &s->cq, NULL));
	return 0;
}

static inline void close_side(struct side *s)
{
	if (s->ep)
		CHECK_INT(fi_close(&s->ep->fid), 0);
	if (s->cq)
		CHECK_INT(fi_close(&s->cq->fid), 0);
	if (s->domain)
		CHECK_INT(fi_close(&s->domain->fid), 0);
	if (s->eq)
		CHECK_INT(fi_close(&s->eq->fid), 0);
	if (s->fabric)
		CHECK_INT(fi_close(&s->fabric->fid), 0);
	fi_freeinfo(s->info);
	memset(s, 0, sizeof(*s));
}

/* An endpoint on s from info, with s's EQ and CQ bound and enabled. */
static inline int open_ep(struct side *s, struct fi_info *info, struct fid_ep **ep, void *ctx)
{
	OK(fi_endpoint(s->domain, info, ep, ctx));
	CHECK_INT((*ep)->fid.fclass, FI_CLASS_EP);
	CHECK((*ep)->fid.context == ctx);
	OK(fi_ep_bind(*ep, &s->eq->fid, 0));
	OK(fi_ep_bind(*ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(*ep));
	return 0;
}

#endif
