/* testdom.c - the "utiltest" provider of testdom.h. */
#include <stdlib.h>
#include <string.h>

#include "testdom.h"

static struct fi_ops_fabric cur_fops;
static const struct fi_ops_domain *cur_dops;

static struct fi_tx_attr tx = {.caps = FI_MSG | FI_SEND, .size = 64, .iov_limit = 4};
static struct fi_rx_attr rx = {.caps = FI_MSG | FI_RECV, .size = 64, .iov_limit = 4};
static struct fi_ep_attr ep = {.type = FI_EP_RDM, .max_msg_size = 1 << 20};
static struct fi_domain_attr dom_attr = {
	.name = "utiltest0",
	.threading = FI_THREAD_SAFE,
	.control_progress = FI_PROGRESS_MANUAL,
	.data_progress = FI_PROGRESS_MANUAL,
	.resource_mgmt = FI_RM_ENABLED,
	.mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED,
	.mr_key_size = 8,
	.cq_data_size = 8,
	.cq_cnt = 64,
	.ep_cnt = 64,
	.cntr_cnt = 64,
	.mr_iov_limit = 4,
	.mr_cnt = 1 << 20,
	.max_err_data = 256,
};
static struct fi_fabric_attr fab_attr = {.name = "utiltest"};
static struct fi_info tmpl = {
	.caps = FI_MSG | FI_SEND | FI_RECV | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
		FI_REMOTE_READ | FI_REMOTE_WRITE,
	.addr_format = FI_ADDR_STR,
	.tx_attr = &tx,
	.rx_attr = &rx,
	.ep_attr = &ep,
	.domain_attr = &dom_attr,
	.fabric_attr = &fab_attr,
};
static const struct fi_info *const tmpls[] = {&tmpl, NULL};

static int td_getinfo(uint32_t version, const char *node, const char *service,
		      uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	(void)node, (void)service, (void)flags;
	return lm_info_match_list(version, tmpls, hints, info);
}

static int td_domain(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct lm_domain *dom = calloc(1, sizeof(*dom));
	int ret;

	if (!dom)
		return -FI_ENOMEM;
	ret = lm_domain_init(dom, fab, info, cur_dops, context);
	if (ret) {
		free(dom);
		return ret;
	}
	*domain = &dom->domain_fid;
	return 0;
}

static int td_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx);

static struct fi_provider td_prov = {
	.version = FI_VERSION(1, 0),
	.fi_version = FI_VERSION(1, 17),
	.name = "utiltest",
	.getinfo = td_getinfo,
	.fabric = td_fabric,
};

static int td_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx)
{
	struct lm_fabric *fab = calloc(1, sizeof(*fab));
	int ret;

	if (!fab)
		return -FI_ENOMEM;
	ret = lm_fabric_init(fab, &td_prov, attr, &cur_fops, ctx);
	if (ret) {
		free(fab);
		return ret;
	}
	*fabric = &fab->fabric_fid;
	return 0;
}

int testdom_open(struct testdom *t, enum fi_threading threading,
		 const struct fi_ops_fabric *fops, const struct fi_ops_domain *dops)
{
	struct fi_info *hints;
	int ret;

	memset(t, 0, sizeof(*t));
	if (!lm_prov_find("utiltest"))
		lm_prov_register(&td_prov);
	cur_fops = fops ? *fops : lm_fabric_ops;
	cur_fops.domain = td_domain;
	cur_dops = dops ? dops : &lm_domain_ops;

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("utiltest");
	hints->domain_attr->threading = threading;
	hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &t->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(t->info->fabric_attr, &t->fabric, NULL);
	if (ret)
		goto err;
	ret = fi_domain(t->fabric, t->info, &t->domain, NULL);
	if (ret)
		goto err;
	return 0;
err:
	testdom_close(t);
	return ret;
}

void testdom_close(struct testdom *t)
{
	if (t->domain)
		fi_close(&t->domain->fid);
	if (t->fabric)
		fi_close(&t->fabric->fid);
	fi_freeinfo(t->info);
	memset(t, 0, sizeof(*t));
}
