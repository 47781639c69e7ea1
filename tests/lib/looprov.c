/* looprov.c - the "rdmloop" test provider of looprov.h. */
#include <stdlib.h>
#include <string.h>

#include "looprov.h"
#include "loop.h"

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
    .name = "loop",
    .threading = FI_THREAD_SAFE,
    .control_progress = FI_PROGRESS_MANUAL,
    .data_progress = FI_PROGRESS_MANUAL,
    .resource_mgmt = FI_RM_ENABLED,
    .av_type = FI_AV_UNSPEC,
    .mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED,
    .mr_key_size = 8,
    .cq_data_size = 8,
    .cq_cnt = 64,
    .ep_cnt = 64,
    .cntr_cnt = 64,
    .mr_iov_limit = LM_IOV_LIMIT,
    .mr_cnt = 1 << 16,
    .max_err_data = 256,
};
static struct fi_fabric_attr fab_attr = {.name = "rdmloop"};
static struct fi_info tmpl = {
    .caps = LOOP_CAPS,
    .addr_format = FI_ADDR_STR,
    .tx_attr = &tx,
    .rx_attr = &rx,
    .ep_attr = &ep,
    .domain_attr = &dom_attr,
    .fabric_attr = &fab_attr,
};
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
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct lm_rdm_domain *dom = calloc(1, sizeof(*dom));
	int ret;

	if (!dom)
		return -FI_ENOMEM;
	ret = lm_rdm_domain_init(dom, fab, info, &lm_loop_link_ops, NULL, context);
	if (ret) {
		free(dom);
		return ret;
	}
	*domain = &dom->util.domain_fid;
	return 0;
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
	struct lm_fabric *fab = calloc(1, sizeof(*fab));
	int ret;

	if (!fab)
		return -FI_ENOMEM;
	lp_fops = lm_fabric_ops;
	lp_fops.domain = lp_domain;
	ret = lm_fabric_init(fab, &lp_prov, attr, &lp_fops, ctx);
	if (ret) {
		free(fab);
		return ret;
	}
	*fabric = &fab->fabric_fid;
	return 0;
}

struct fi_info *looprov_info(enum fi_threading threading, uint64_t caps)
{
	struct fi_info *hints, *info = NULL;

	if (!lm_prov_find("rdmloop"))
		lm_prov_register(&lp_prov);
	hints = fi_allocinfo();
	if (!hints)
		return NULL;
	hints->fabric_attr->prov_name = strdup("rdmloop");
	hints->domain_attr->threading = threading;
	hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps ? caps : LOOP_CAPS;
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info))
		info = NULL;
	fi_freeinfo(hints);
	return info;
}
