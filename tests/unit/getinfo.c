/* getinfo.c - fi_getinfo hint matching, provider selection and ordering,
 * fi_dupinfo/fi_freeinfo, fi_fabric dispatch, parameters and logging,
 * through test providers registered with the internal registry. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "check.h"
#include "core.h"
#include "v1_names.h"

/* ---- two test providers: "alpha" (RDM, fast) and "beta" (MSG) --------- */

/* FI_LOCAL_COMM in a_tx is a template slip the matching must not pass on:
 * it is an endpoint and domain capability, not a transmit one. */
static struct fi_tx_attr a_tx = {
	.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_READ | FI_WRITE | FI_LOCAL_COMM,
	.msg_order = FI_ORDER_SAS,
	.inject_size = 64,
	.size = 1024,
	.iov_limit = 4,
	.rma_iov_limit = 4,
};
static struct fi_rx_attr a_rx = {
	.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE |
		FI_SOURCE | FI_MULTI_RECV,
	.msg_order = FI_ORDER_SAS,
	.size = 1024,
	.iov_limit = 4,
};
static struct fi_ep_attr a_ep = {
	.type = FI_EP_RDM,
	.protocol = FI_PROTO_UNSPEC,
	.max_msg_size = 1 << 20,
	.mem_tag_format = 0xaaaaaaaaaaaaaaaaULL,
	.tx_ctx_cnt = 1,
	.rx_ctx_cnt = 1,
};
static struct fi_domain_attr a_dom = {
	.name = "alpha0",
	.threading = FI_THREAD_SAFE,
	.control_progress = FI_PROGRESS_MANUAL,
	.data_progress = FI_PROGRESS_MANUAL,
	.resource_mgmt = FI_RM_ENABLED,
	.av_type = FI_AV_UNSPEC,
	.mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR,
	.mr_key_size = 8,
	.cq_data_size = 8,
	.cq_cnt = 16,
	.ep_cnt = 16,
	.tx_ctx_cnt = 1,
	.rx_ctx_cnt = 1,
	.max_ep_tx_ctx = 1,
	.max_ep_rx_ctx = 1,
	.mr_iov_limit = 1,
	.mr_cnt = 1000,
};
static struct fi_fabric_attr a_fab = {.name = "alpha-fabric"};
static struct fi_info a_info = {
	.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
		FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_MULTI_RECV | FI_LOCAL_COMM,
	.addr_format = FI_ADDR_STR,
	.tx_attr = &a_tx,
	.rx_attr = &a_rx,
	.ep_attr = &a_ep,
	.domain_attr = &a_dom,
	.fabric_attr = &a_fab,
};

static struct fi_tx_attr b_tx = {.caps = FI_MSG | FI_SEND, .size = 64, .iov_limit = 1};
static struct fi_rx_attr b_rx = {.caps = FI_MSG | FI_RECV, .size = 64, .iov_limit = 1};
static struct fi_ep_attr b_ep = {.type = FI_EP_MSG, .max_msg_size = 4096};
static struct fi_domain_attr b_dom = {
	.name = "beta0",
	.threading = FI_THREAD_DOMAIN,
	.control_progress = FI_PROGRESS_AUTO,
	.data_progress = FI_PROGRESS_MANUAL,
	.resource_mgmt = FI_RM_DISABLED,
	.av_type = FI_AV_MAP,
	.mr_mode = FI_MR_LOCAL,
};
static struct fi_fabric_attr b_fab = {.name = "beta-fabric"};
static struct fi_info b_info = {
	.caps = FI_MSG | FI_SEND | FI_RECV,
	.mode = FI_CONTEXT,
	.addr_format = FI_SOCKADDR_IN,
	.tx_attr = &b_tx,
	.rx_attr = &b_rx,
	.ep_attr = &b_ep,
	.domain_attr = &b_dom,
	.fabric_attr = &b_fab,
};

static const struct fi_info *const a_list[] = {&a_info, NULL};
static const struct fi_info *const b_list[] = {&b_info, NULL};

static int a_getinfo(uint32_t version, const char *node, const char *service,
		     uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	(void)node, (void)service, (void)flags;
	return lm_info_match_list(version, a_list, hints, info);
}

static int b_getinfo(uint32_t version, const char *node, const char *service,
		     uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	(void)node, (void)service, (void)flags;
	return lm_info_match_list(version, b_list, hints, info);
}

static int fabric_calls;
static struct fid_fabric fake_fabric;

static int b_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx)
{
	(void)attr;
	fabric_calls++;
	fake_fabric.fid.context = ctx;
	*fabric = &fake_fabric;
	return 0;
}

static int a_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx)
{
	(void)attr, (void)fabric, (void)ctx;
	return -FI_ENOSYS;
}

static struct fi_provider alpha = {
	.version = FI_VERSION(3, 1),
	.fi_version = FI_VERSION(1, 17),
	.name = "alpha",
	.getinfo = a_getinfo,
	.fabric = a_fabric,
};
static struct fi_provider beta = {
	.version = FI_VERSION(7, 0),
	.fi_version = FI_VERSION(1, 17),
	.name = "beta",
	.getinfo = b_getinfo,
	.fabric = b_fabric,
};

/* ---- helpers ------------------------------------------------------------ */

static int count(const struct fi_info *i)
{
	int n = 0;

	for (; i; i = i->next)
		n++;
	return n;
}

static const char *prov_of(const struct fi_info *i)
{
	return i && i->fabric_attr ? i->fabric_attr->prov_name : NULL;
}

static struct fi_info *get(uint32_t version, const struct fi_info *hints, int *ret)
{
	struct fi_info *info = (struct fi_info *)1;

	*ret = fi_getinfo(version, NULL, NULL, 0, hints, &info);
	if (*ret)
		CHECK(info == NULL);
	return *ret ? NULL : info;
}

/* alpha requires these mr_mode bits: hints that are not about memory
 * registration offer them, since from API 1.5 an mr_mode of 0 accepts none. */
#define ALPHA_MR (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)

/* ---- tests ----------------------------------------------------------------- */

static void test_no_hints(void)
{
	int ret;
	struct fi_info *info = get(FI_VERSION(1, 17), NULL, &ret);

	CHECK_INT(ret, 0);
	CHECK_INT(count(info), 2);
	CHECK_STR(prov_of(info), "alpha"); /* registration order = preference */
	if (info && info->next) {
		CHECK_STR(prov_of(info->next), "beta");
		CHECK_HEX(info->fabric_attr->prov_version, FI_VERSION(3, 1));
		CHECK_HEX(info->fabric_attr->api_version, FI_VERSION(1, 17));
		CHECK_STR(info->domain_attr->name, "alpha0");
		CHECK_STR(info->fabric_attr->name, "alpha-fabric");
		CHECK_HEX(info->caps, a_info.caps);
		CHECK_INT(info->ep_attr->type, FI_EP_RDM);
		CHECK_HEX(info->next->mode, FI_CONTEXT);
	}
	fi_freeinfo(info);
}

static void test_ep_type(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode = ALPHA_MR;
	hints->ep_attr->type = FI_EP_RDM;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "alpha");
	fi_freeinfo(info);

	hints->ep_attr->type = FI_EP_MSG;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "beta");
	fi_freeinfo(info);

	hints->ep_attr->type = FI_EP_DGRAM;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	fi_freeinfo(hints);
}

static void test_caps(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->caps = FI_TAGGED;
	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode = ALPHA_MR;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info) {
		/* Modifiers implied, unrequested primaries dropped, secondary kept. */
		CHECK_HEX(info->caps & (FI_TAGGED | FI_SEND | FI_RECV),
			  FI_TAGGED | FI_SEND | FI_RECV);
		CHECK_HEX(info->caps & (FI_RMA | FI_MSG | FI_READ), 0);
		CHECK_HEX(info->caps & FI_SOURCE, FI_SOURCE);
		CHECK_HEX(info->tx_attr->caps & FI_RMA, 0);
		/* The contexts' modifiers are those of what was asked for:
		 * no RMA ones next to FI_TAGGED (man fi_endpoint: a context's
		 * caps are a subset of the endpoint's). */
		CHECK_HEX(info->tx_attr->caps, FI_TAGGED | FI_SEND);
		CHECK_HEX(info->rx_attr->caps & ~(FI_SOURCE | FI_MULTI_RECV),
			  FI_TAGGED | FI_RECV);
		CHECK_HEX(info->tx_attr->caps & ~info->caps, 0);
		CHECK_HEX(info->rx_attr->caps & ~info->caps, 0);
	}
	fi_freeinfo(info);

	/* FI_LOCAL_COMM is the endpoint's and the domain's: never a context's,
	 * even with no hints at all. */
	hints->caps = 0;
	hints->ep_attr->type = FI_EP_RDM; /* alpha only */
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info) {
		CHECK_HEX(info->caps & FI_LOCAL_COMM, FI_LOCAL_COMM);
		CHECK_HEX(info->tx_attr->caps & FI_LOCAL_COMM, 0);
		CHECK_HEX(info->tx_attr->caps,
			  FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_READ | FI_WRITE);
	}
	fi_freeinfo(info);
	info = NULL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info);
	CHECK_INT(ret, 0);
	CHECK_STR(prov_of(info), "alpha");
	if (info)
		CHECK_HEX(info->tx_attr->caps & FI_LOCAL_COMM, 0);
	fi_freeinfo(info);

	/* Caps asked of a context imply that direction's modifiers only:
	 * FI_MSG in tx_attr is FI_SEND (no receive side to find there),
	 * FI_RMA in rx_attr is the remote ones.  A bit of the other
	 * direction asks nothing of it; a primary capability beyond the
	 * endpoint's cannot be given. */
	hints->tx_attr->caps = FI_MSG;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->tx_attr->caps, FI_MSG | FI_SEND);
	fi_freeinfo(info);
	hints->tx_attr->caps = FI_MSG | FI_RECV;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->tx_attr->caps, FI_MSG | FI_SEND);
	fi_freeinfo(info);
	hints->tx_attr->caps = 0;
	hints->rx_attr->caps = FI_RMA;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->rx_attr->caps & ~(FI_SOURCE | FI_MULTI_RECV),
			  FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE);
	fi_freeinfo(info);
	hints->caps = FI_MSG;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->rx_attr->caps = 0;

	hints->caps = FI_RMA | FI_REMOTE_WRITE;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->caps & (FI_RMA | FI_REMOTE_WRITE | FI_READ),
			  FI_RMA | FI_REMOTE_WRITE);
	fi_freeinfo(info);

	hints->caps = FI_ATOMIC;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);

	hints->caps = FI_MSG | FI_SHARED_AV; /* secondary asked for: must be met */
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	fi_freeinfo(hints);
}

static void test_mode(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = ALPHA_MR;
	info = get(FI_VERSION(1, 17), hints, &ret); /* beta needs FI_CONTEXT */
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "alpha");
	fi_freeinfo(info);

	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1); /* alpha needs PROV_KEY|VIRT_ADDR: excluded */
	CHECK_STR(prov_of(info), "beta");
	if (info)
		CHECK_HEX(info->mode, FI_CONTEXT);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void test_mr_mode(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_MSG;

	/* 1.5+: bits are what the application can do. */
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->domain_attr->mr_mode, FI_MR_LOCAL);
	fi_freeinfo(info);

	/* 1.4: FI_LOCAL_MR mode bit carries local registration; the answer is
	 * in the legacy form. */
	hints->domain_attr->mr_mode = LM_MR_UNSPEC;
	info = get(FI_VERSION(1, 4), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->mode |= LM_LOCAL_MR;
	info = get(FI_VERSION(1, 4), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info) {
		CHECK_HEX(info->domain_attr->mr_mode, LM_MR_SCALABLE);
		CHECK_HEX(info->mode & LM_LOCAL_MR, LM_LOCAL_MR);
	}
	fi_freeinfo(info);

	/* FI_MR_BASIC at 1.17 still works and is answered as FI_MR_BASIC. */
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = LM_MR_BASIC;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->domain_attr->mr_mode, LM_MR_BASIC);
	fi_freeinfo(info);

	/* 0 from 1.5 is the default registration, no bits: alpha, which needs
	 * PROV_KEY|VIRT_ADDR, is not for this application (before 1.5 the
	 * same 0 is FI_MR_UNSPEC, basic or scalable: alpha, answered as basic). */
	hints->domain_attr->mr_mode = 0;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	info = get(FI_VERSION(1, 4), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->domain_attr->mr_mode, LM_MR_BASIC);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* A template whose mr_mode bits are only preferred (LM_MR_PREFERRED, as the
 * RDM engine's providers have them): the answer keeps the bits the
 * application accepts and never shows the marker. */
static void test_mr_preferred(void)
{
	struct fi_domain_attr dom = a_dom;
	struct fi_info tmpl = a_info, *hints = fi_allocinfo(), *out = NULL;
	static const struct {
		uint32_t version;
		int hint, want;
	} cases[] = {
	    {FI_VERSION(1, 17), 0, 0},
	    {FI_VERSION(1, 17), FI_MR_VIRT_ADDR, FI_MR_VIRT_ADDR},
	    {FI_VERSION(1, 17), FI_MR_LOCAL | FI_MR_ENDPOINT, 0},
	    {FI_VERSION(1, 17),
	     FI_MR_LOCAL | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED,
	     FI_MR_PROV_KEY | FI_MR_VIRT_ADDR},
	    {FI_VERSION(1, 17), LM_MR_BASIC, LM_MR_BASIC},
	    {FI_VERSION(1, 17), LM_MR_SCALABLE, LM_MR_SCALABLE},
	    {FI_VERSION(1, 4), LM_MR_UNSPEC, LM_MR_BASIC},
	};

	dom.mr_mode = LM_MR_PREFERRED | ALPHA_MR;
	tmpl.domain_attr = &dom;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hints->domain_attr->mr_mode = cases[i].hint;
		CHECK_INT(lm_info_match(cases[i].version, &tmpl, hints, &out), 0);
		if (out)
			CHECK_HEX(out->domain_attr->mr_mode, cases[i].want);
		fi_freeinfo(out);
		out = NULL;
	}
	/* No hints: the provider's choice, without the marker. */
	CHECK_INT(lm_info_match(FI_VERSION(1, 17), &tmpl, NULL, &out), 0);
	if (out)
		CHECK_HEX(out->domain_attr->mr_mode, ALPHA_MR);
	fi_freeinfo(out);
	fi_freeinfo(hints);
}

static void test_domain_attrs(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 2);
	if (info)
		CHECK_INT(info->domain_attr->threading, FI_THREAD_DOMAIN);
	fi_freeinfo(info);

	hints->domain_attr->threading = FI_THREAD_SAFE;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "alpha");
	fi_freeinfo(info);

	hints->domain_attr->threading = FI_THREAD_UNSPEC;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	hints->domain_attr->control_progress = FI_PROGRESS_AUTO;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);

	hints->domain_attr->resource_mgmt = FI_RM_UNSPEC;
	hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
	hints->domain_attr->name = strdup("beta0");
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "beta");
	fi_freeinfo(info);

	free(hints->domain_attr->name);
	hints->domain_attr->name = NULL;
	hints->domain_attr->cq_data_size = 16; /* more than alpha's 8 */
	hints->ep_attr->type = FI_EP_RDM;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->domain_attr->cq_data_size = 8;
	hints->tx_attr->inject_size = 65;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->tx_attr->inject_size = 64;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	fi_freeinfo(info);
	hints->tx_attr->msg_order = FI_ORDER_RAW;
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	fi_freeinfo(hints);
}

/* The domain limits API 1.20-2.x appended: a template that leaves the
 * counter limits 0 gets util's 64-bit ones; a hint above the provider's
 * limit (auth keys, groups: none here) finds nothing. */
static void test_domain_limits(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = ALPHA_MR;
	info = get(FI_VERSION(2, 0), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info) {
		CHECK_HEX(info->domain_attr->max_cntr_value, UINT64_MAX);
		CHECK_HEX(info->domain_attr->max_err_cntr_value, UINT64_MAX);
		CHECK_INT(info->domain_attr->max_ep_auth_key, 0);
		CHECK_INT(info->domain_attr->max_group_id, 0);
	}
	fi_freeinfo(info);
	hints->domain_attr->max_cntr_value = 1000;
	hints->domain_attr->max_err_cntr_value = 10;
	info = get(FI_VERSION(2, 0), hints, &ret);
	CHECK_INT(count(info), 1);
	if (info)
		CHECK_HEX(info->domain_attr->max_cntr_value, UINT64_MAX);
	fi_freeinfo(info);
	hints->domain_attr->max_ep_auth_key = 1;
	info = get(FI_VERSION(2, 0), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	hints->domain_attr->max_ep_auth_key = 0;
	hints->domain_attr->max_group_id = 1;
	info = get(FI_VERSION(2, 0), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	fi_freeinfo(hints);
}

static void test_provider_selection(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	int ret;

	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode = ~LM_MR_BASIC & ~LM_MR_SCALABLE & 0xffff;

	setenv("FI_PROVIDER", "beta", 1);
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "beta");
	fi_freeinfo(info);

	setenv("FI_PROVIDER", "^beta", 1);
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "alpha");
	fi_freeinfo(info);

	setenv("FI_PROVIDER", "gamma,BETA", 1);
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "beta");
	fi_freeinfo(info);
	unsetenv("FI_PROVIDER");

	hints->fabric_attr->prov_name = strdup("alpha;ofi_rxm");
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(count(info), 1);
	CHECK_STR(prov_of(info), "alpha");
	fi_freeinfo(info);
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("nosuch");
	info = get(FI_VERSION(1, 17), hints, &ret);
	CHECK_INT(ret, -FI_ENODATA);
	fi_freeinfo(hints);

	info = NULL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, FI_PROV_ATTR_ONLY, NULL, &info);
	CHECK_INT(ret, 0);
	CHECK_INT(count(info), 2);
	fi_freeinfo(info);
}

static void test_bad_input(void)
{
	struct fi_info *info = NULL, *hints;
	int ret;

	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, NULL), -FI_EINVAL);
	CHECK_INT(fi_getinfo(FI_VERSION(3, 0), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
	CHECK_INT(fi_getinfo(FI_VERSION(0, 9), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
	CHECK(info == NULL);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, FI_SOURCE, NULL, &info),
		  -FI_EINVAL);

	/* 1.0 and 2.x requests are served. */
	ret = fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, NULL, &info);
	CHECK_INT(ret, 0);
	fi_freeinfo(info);
	info = NULL;
	ret = fi_getinfo(FI_VERSION(2, 0), NULL, NULL, 0, NULL, &info);
	CHECK_INT(ret, 0);
	if (info)
		CHECK_HEX(info->fabric_attr->api_version, FI_VERSION(2, 0));
	fi_freeinfo(info);

	hints = fi_allocinfo();
	hints->src_addrlen = 16; /* length without an address */
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), -FI_EINVAL);
	hints->src_addrlen = 0;
	hints->ep_attr->type = (enum fi_ep_type)77;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), -FI_EINVAL);
	fi_freeinfo(hints);
	fi_freeinfo(NULL);
}

static void test_dupinfo(void)
{
	struct fi_info *a = fi_allocinfo(), *b;
	char addr[] = "fi_test://1";

	CHECK(a && a->tx_attr && a->rx_attr && a->ep_attr && a->domain_attr &&
	      a->fabric_attr);
	a->domain_attr->name = strdup("dom");
	a->fabric_attr->name = strdup("fab");
	a->fabric_attr->prov_name = strdup("prov");
	a->src_addr = malloc(sizeof(addr));
	memcpy(a->src_addr, addr, sizeof(addr));
	a->src_addrlen = sizeof(addr);
	a->caps = FI_MSG;
	a->tx_attr->size = 77;
	a->next = fi_allocinfo(); /* dupinfo copies one entry, not the list */

	b = fi_dupinfo(a);
	CHECK(b != NULL);
	if (b) {
		CHECK(b->next == NULL);
		CHECK(b->domain_attr->name != a->domain_attr->name);
		CHECK_STR(b->domain_attr->name, "dom");
		CHECK_STR(b->fabric_attr->name, "fab");
		CHECK_STR(b->fabric_attr->prov_name, "prov");
		CHECK(b->src_addr != a->src_addr);
		CHECK_INT(b->src_addrlen, sizeof(addr));
		CHECK(b->src_addr && !memcmp(b->src_addr, addr, sizeof(addr)));
		CHECK_INT(b->tx_attr->size, 77);
		CHECK(b->tx_attr != a->tx_attr);
		b->domain_attr->name[0] = 'X';
		CHECK_STR(a->domain_attr->name, "dom");
	}
	fi_freeinfo(a);
	fi_freeinfo(b);
}

static void test_fabric_and_open(void)
{
	struct fi_fabric_attr attr = {0};
	struct fid_fabric *fab = NULL;
	struct fid *fid = (struct fid *)1;
	int ctx;

	CHECK_INT(fi_fabric(NULL, &fab, NULL), -FI_EINVAL);
	CHECK_INT(fi_fabric(&attr, &fab, NULL), -FI_EINVAL);
	attr.name = "beta-fabric";
	attr.prov_name = "nosuch";
	CHECK_INT(fi_fabric(&attr, &fab, NULL), -FI_ENODATA);
	attr.prov_name = "beta";
	attr.api_version = FI_VERSION(1, 9);
	CHECK_INT(fi_fabric(&attr, &fab, &ctx), 0);
	CHECK_INT(fabric_calls, 1);
	CHECK(fab == &fake_fabric);
	CHECK(fake_fabric.fid.context == &ctx);
	CHECK_HEX(fake_fabric.api_version, FI_VERSION(1, 9));

	/* fi_fabric2: the fabric an answer names, at the answer's version. */
	{
		struct fi_info *hints = fi_allocinfo(), *info;
		int ret;

		hints->ep_attr->type = FI_EP_MSG;
		hints->mode = FI_CONTEXT;
		hints->domain_attr->mr_mode = FI_MR_LOCAL;
		info = get(FI_VERSION(2, 0), hints, &ret);
		CHECK_STR(prov_of(info), "beta");
		if (info) {
			fab = NULL;
			CHECK_INT(fi_fabric2(info, &fab, 0, &ctx), 0);
			CHECK_INT(fabric_calls, 2);
			CHECK(fab == &fake_fabric);
			CHECK_HEX(fake_fabric.api_version, FI_VERSION(2, 0));
			CHECK_INT(fi_fabric2(info, &fab, 1, &ctx), -FI_EINVAL);
			CHECK_INT(fi_fabric2(NULL, &fab, 0, &ctx), -FI_EINVAL);
			CHECK_INT(fabric_calls, 2);
		}
		fi_freeinfo(info);
		fi_freeinfo(hints);
	}

	CHECK_INT(fi_open(FI_VERSION(1, 17), "mr_cache", NULL, 0, 0, &fid, NULL),
		  -FI_ENOSYS);
	CHECK_INT(fi_open(FI_VERSION(1, 17), NULL, NULL, 0, 0, &fid, NULL), -FI_EINVAL);
	CHECK_HEX(fi_version(), FI_VERSION(2, 6)); /* the 2.x API loom's headers have */
}

static void test_params(void)
{
	int i = 0, b = 0;
	size_t z = 0;
	char *s = NULL;
	struct fi_param *params = NULL;
	int n = 0, found = 0;

	CHECK_INT(fi_param_define(&alpha, "knob", FI_PARAM_INT, "a knob %d", 7), 0);
	CHECK_INT(fi_param_define(&alpha, "knob", FI_PARAM_INT, "again"), -FI_EALREADY);
	CHECK_INT(fi_param_define(&alpha, "flag", FI_PARAM_BOOL, "a flag"), 0);
	CHECK_INT(fi_param_define(&alpha, "bytes", FI_PARAM_SIZE_T, "a size"), 0);
	CHECK_INT(fi_param_define(&alpha, "word", FI_PARAM_STRING, "a word"), 0);
	CHECK_INT(fi_param_define(&alpha, NULL, FI_PARAM_STRING, "x"), -FI_EINVAL);
	CHECK_INT(fi_param_define(&alpha, "t", (enum fi_param_type)99, "x"), -FI_EINVAL);

	CHECK_INT(fi_param_get_int(&alpha, "knob", &i), -FI_ENODATA);
	CHECK_INT(fi_param_get_int(&alpha, "nosuch", &i), -FI_ENOENT);
	CHECK_INT(fi_param_get_int(&beta, "knob", &i), -FI_ENOENT);
	setenv("FI_ALPHA_KNOB", "42", 1);
	setenv("FI_ALPHA_FLAG", "yes", 1);
	setenv("FI_ALPHA_BYTES", "1048576", 1);
	setenv("FI_ALPHA_WORD", "hello", 1);
	CHECK_INT(fi_param_get_int(&alpha, "knob", &i), 0);
	CHECK_INT(i, 42);
	CHECK_INT(fi_param_get_bool(&alpha, "flag", &b), 0);
	CHECK_INT(b, 1);
	CHECK_INT(fi_param_get_size_t(&alpha, "bytes", &z), 0);
	CHECK_INT(z, 1048576);
	CHECK_INT(fi_param_get_str(&alpha, "word", &s), 0);
	CHECK_STR(s, "hello");
	setenv("FI_ALPHA_FLAG", "maybe", 1);
	CHECK_INT(fi_param_get_bool(&alpha, "flag", &b), -FI_EINVAL);
	setenv("FI_ALPHA_KNOB", "4x", 1);
	CHECK_INT(fi_param_get_int(&alpha, "knob", &i), -FI_EINVAL);
	/* Past an int, negative or past a size: not read, the value kept. */
	i = 5;
	setenv("FI_ALPHA_KNOB", "99999999999", 1);
	CHECK_INT(fi_param_get_int(&alpha, "knob", &i), -FI_EINVAL);
	setenv("FI_ALPHA_KNOB", "-99999999999", 1);
	CHECK_INT(fi_param_get_int(&alpha, "knob", &i), -FI_EINVAL);
	CHECK_INT(i, 5);
	z = 9;
	setenv("FI_ALPHA_BYTES", "-1", 1);
	CHECK_INT(fi_param_get_size_t(&alpha, "bytes", &z), -FI_EINVAL);
	setenv("FI_ALPHA_BYTES", "99999999999999999999999", 1);
	CHECK_INT(fi_param_get_size_t(&alpha, "bytes", &z), -FI_EINVAL);
	setenv("FI_ALPHA_BYTES", "", 1);
	CHECK_INT(fi_param_get_size_t(&alpha, "bytes", &z), -FI_EINVAL);
	CHECK_INT(z, 9);
	setenv("FI_ALPHA_BYTES", "1048576", 1);
	setenv("FI_ALPHA_KNOB", "42", 1);

	CHECK_INT(fi_getparams(&params, &n), 0);
	CHECK(n >= 5);
	for (int k = 0; params && k < n; k++) {
		if (!strcmp(params[k].name, "FI_ALPHA_KNOB")) {
			found++;
			CHECK_STR(params[k].value, "42");
			CHECK_STR(params[k].help_string, "a knob 7");
			CHECK_INT(params[k].type, FI_PARAM_INT);
		}
		if (!strcmp(params[k].name, "FI_PROVIDER"))
			found++;
	}
	CHECK_INT(found, 2);
	fi_freeparams(params);
	CHECK_INT(fi_getparams(NULL, &n), -FI_EINVAL);
}

/* Logging is configured once per process, so each case runs in a child. */
static int log_child(const char *level, const char *prov_filter, int want_warn,
		     int want_debug)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		if (level)
			setenv("FI_LOG_LEVEL", level, 1);
		else
			unsetenv("FI_LOG_LEVEL");
		if (prov_filter)
			setenv("FI_LOG_PROV", prov_filter, 1);
		_exit(fi_log_enabled(&alpha, FI_LOG_WARN, FI_LOG_CORE) == want_warn &&
				      fi_log_enabled(&alpha, FI_LOG_DEBUG, FI_LOG_CORE) ==
					      want_debug
			      ? 0
			      : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_logging(void)
{
	CHECK_INT(log_child(NULL, NULL, 0, 0), 0); /* silent by default */
	CHECK_INT(log_child("warn", NULL, 1, 0), 0);
	CHECK_INT(log_child("debug", NULL, 1, 1), 0);
	CHECK_INT(log_child("debug", "beta", 0, 0), 0);
	CHECK_INT(log_child("debug", "^beta", 1, 1), 0);
}

int main(void)
{
	unsetenv("FI_PROVIDER");
	unsetenv("FI_LOG_LEVEL");
	test_logging();
	/* Only the test providers: drop the built-in ones (shm ...). */
	lm_init();
	lm_prov_reset();
	CHECK_INT(lm_prov_register(&alpha), 0);
	CHECK_INT(lm_prov_register(&beta), 0);
	CHECK_INT(lm_prov_register(&beta), -FI_EALREADY);
	test_no_hints();
	test_ep_type();
	test_caps();
	test_mode();
	test_mr_mode();
	test_mr_preferred();
	test_domain_attrs();
	test_domain_limits();
	test_provider_selection();
	test_bad_input();
	test_dupinfo();
	test_fabric_and_open();
	test_params();
	lm_prov_reset();
	lm_param_reset();
	return check_done();
}
