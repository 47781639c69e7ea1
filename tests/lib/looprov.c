/* looprov.c - the "rdmloop" test provider of looprov.h. */
#include "looprov.h"
#include "loop_link.h"
#include "testdom.h"

#define LOOP_CAPS                                                                        \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_LOCAL_COMM | FI_RMA_EVENT)

static struct fi_tx_attr tx = {
    .caps = LOOP_CAPS & ~(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |
                          FI_DIRECTED_RECV | FI_SOURCE | FI_RMA_EVENT),
    .msg_order = FI_ORDER_SAS,
    .size = 256,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = 1,
    .inject_size = 512};
static struct fi_rx_attr rx = {.caps = LOOP_CAPS & ~(FI_SEND | FI_READ | FI_WRITE),
                               .msg_order = FI_ORDER_SAS,
                               .size = 256,
                               .iov_limit = LM_IOV_LIMIT};
static struct fi_ep_attr ep = {.type = FI_EP_RDM, .max_msg_size = 1 << 30};
static struct fi_domain_attr dom_attr = {
    TESTPROV_DOMAIN_ATTR,
    .name = "loop",
    .av_type = FI_AV_UNSPEC,
    .mr_iov_limit = LM_IOV_LIMIT,
    .mr_cnt = 1 << 16,
};
static struct fi_fabric_attr fab_attr = {.name = "rdmloop"};
static struct fi_info tmpl =
    TESTPROV_INFO(LOOP_CAPS, &tx, &rx, &ep, &dom_attr, &fab_attr);
static const struct fi_info *const tmpls[] = {&tmpl, NULL};

static int lp_getinfo(uint32_t version, const char *node, const char *service,
                      uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	(void)node, (void)service, (void)flags;
	return lm_info_match_list(version, tmpls, hints, info);
}

static int lp_domain(struct fid_fabric *fabric, struct fi_info *info,
                     struct fid_domain **domain, void *context)
{
	struct lm_rdm_domain *dom;
	int ret = lm_rdm_domain_open(fabric, info, &loop_link_ops, NULL,
	                             &lm_rdm_domain_ops, context, &dom);

	if (!ret)
		*domain = &dom->util.domain_fid;
	return ret;
}

static struct fi_ops_fabric lp_fops;

static int lp_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx);

static struct fi_provider lp_prov = {
    .version = FI_VERSION(1, 0),
    .fi_version = FI_VERSION(1, 17),
    .name = "rdmloop",
    .getinfo = lp_getinfo,
    .fabric = lp_fabric,
};

static int lp_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx)
{
	lp_fops = lm_fabric_ops;
	lp_fops.domain = lp_domain;
	return lm_fabric_open(&lp_prov, attr, &lp_fops, ctx, fabric);
}

struct fi_info *looprov_info(enum fi_threading threading, uint64_t caps)
{
	struct fi_info *info;

	if (testprov_getinfo(&lp_prov, threading, caps ? caps : LOOP_CAPS, &info))
		return NULL;
	return info;
}
