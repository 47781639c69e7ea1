/* testdom.c - the "utiltest" provider of testdom.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testdom.h"

static struct fi_ops_fabric cur_fops;
static const struct fi_ops_domain *cur_dops;

static struct fi_tx_attr tx = {.caps = FI_MSG | FI_SEND, .size = 64, .iov_limit = 4};
static struct fi_rx_attr rx = {.caps = FI_MSG | FI_RECV, .size = 64, .iov_limit = 4};
static struct fi_ep_attr ep = {.type = FI_EP_RDM, .max_msg_size = 1 << 20};
static struct fi_domain_attr dom_attr = {
	TESTPROV_DOMAIN_ATTR,
	.name = "utiltest0",
	.mr_iov_limit = 4,
	.mr_cnt = 1 << 20,
};
static struct fi_fabric_attr fab_attr = {.name = "utiltest"};
#define TD_CAPS                                                                          \
	(FI_MSG | FI_SEND | FI_RECV | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |          \
	 FI_REMOTE_READ | FI_REMOTE_WRITE)
static struct fi_info tmpl = TESTPROV_INFO(TD_CAPS, &tx, &rx, &ep, &dom_attr, &fab_attr);
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
	return lm_fabric_open(&td_prov, attr, &cur_fops, ctx, fabric);
}

int testdom_open(struct testdom *t, enum fi_threading threading,
		 const struct fi_ops_fabric *fops, const struct fi_ops_domain *dops)
{
	int ret;

	memset(t, 0, sizeof(*t));
	cur_fops = fops ? *fops : lm_fabric_ops;
	cur_fops.domain = td_domain;
	cur_dops = dops ? dops : &lm_domain_ops;
	ret = testprov_getinfo(&td_prov, threading, 0, &t->info);
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

int testdom_start(struct testdom *t, unsigned seconds)
{
	int ret;

	alarm(seconds);
	ret = testdom_open(t, FI_THREAD_SAFE, NULL, NULL);
	if (ret)
		fprintf(stderr, "cannot open the utiltest domain: %s\n",
			fi_strerror(-ret));
	return ret;
}

int testdom_run_on(struct testdom *t, enum fi_threading threading, void (*fn)(void))
{
	struct testdom saved = *t;
	int ret = testdom_open(t, threading, NULL, NULL);

	if (!ret) {
		fn();
		testdom_close(t);
	}
	*t = saved;
	return ret;
}

int testprov_getinfo(struct fi_provider *prov, enum fi_threading threading, uint64_t caps,
		     struct fi_info **info)
{
	struct fi_info *hints;
	int ret;

	*info = NULL;
	if (!lm_prov_find(prov->name))
		lm_prov_register(prov);
	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(prov->name);
	hints->domain_attr->threading = threading;
	hints->domain_attr->mr_mode = TESTPROV_MR_MODE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, info);
	fi_freeinfo(hints);
	return ret;
}
