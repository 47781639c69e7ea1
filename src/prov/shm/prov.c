/* prov.c - the shm provider: what fi_getinfo reports for it, its fabric
 * and domain (the RDM engine's, over the shared-memory link), its
 * parameters, and registration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"
#include "v1_names.h"

/* Bounce buffers beat one process_vm_readv up to about here (bench/). */
#define SHM_EAGER_DEF 4096

#define SHM_CAPS                                                                         \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_NAMED_RX_CTX | FI_LOCAL_COMM | FI_RMA_EVENT | FI_FENCE | FI_SHARED_AV | FI_TRIGGER | \
	 LM_CAPS_V2)

/* A context holds only the caps of its direction (FI_FENCE is a transmit
 * one); FI_LOCAL_COMM and FI_SHARED_AV are the endpoint's and the
 * domain's (man fi_endpoint). */
static struct fi_tx_attr shm_tx = {
    .caps = SHM_CAPS & LM_TX_CAPS,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .inject_size = LM_RDM_INJECT_SIZE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = LM_RMA_IOV_LIMIT,
};
static struct fi_rx_attr shm_rx = {
    .caps = SHM_CAPS & LM_RX_CAPS,
    .op_flags = 0,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .total_buffered_recv = LM_RDM_UNEXP_MAX, /* unexpected data held, at most */
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
static struct fi_ep_attr shm_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_SHM,
    .protocol_version = LM_RDM_WIRE_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .max_order_raw_size = 0,
    .max_order_war_size = 0,
    .max_order_waw_size = 0,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};
static struct fi_domain_attr shm_dom = {
    .name = "shm",
    LM_RDM_DOMAIN_ATTRS,
    .caps = FI_LOCAL_COMM | FI_SHARED_AV,
};
static struct fi_fabric_attr shm_fab = {
    .name = "shm",
    .prov_version = LM_PROV_VERSION,
};
static struct fi_info shm_info = {
    .caps = SHM_CAPS,
    .addr_format = FI_ADDR_STR,
    .tx_attr = &shm_tx,
    .rx_attr = &shm_rx,
    .ep_attr = &shm_ep,
    .domain_attr = &shm_dom,
    .fabric_attr = &shm_fab,
};
static const struct fi_info *const shm_tmpls[] = {&shm_info, NULL};

/* The address text node and service name (as libfabric's shm names them,
 * so programs written for it find their peers): both, "fi_ns://node:service";
 * a service, "fi_ns://service"; a node, itself when it is an address, else
 * "fi_shm://node". */
static int shm_name_of(const char *node, const char *service, char *buf, size_t len)
{
	pid_t pid;
	uint64_t token;
	int n;

	if (node && service)
		n = snprintf(buf, len, "fi_ns://%s:%s", node, service);
	else if (service)
		n = snprintf(buf, len, "fi_ns://%s", service);
	else if (strstr(node, "://"))
		n = snprintf(buf, len, "%s", node);
	else
		n = snprintf(buf, len, SHM_ADDR_PREFIX "%s", node);
	if (n < 0 || (size_t)n >= len)
		return -FI_EINVAL;
	return shm_addr_resolve(buf, &pid, &token);
}

static int set_addr(void **addr, size_t *addrlen, const char *text)
{
	char *s = strdup(text);

	if (!s)
		return -FI_ENOMEM;
	free(*addr);
	*addr = s;
	*addrlen = strlen(s) + 1;
	return 0;
}

static int shm_getinfo(uint32_t version, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	char name[SHM_NAME_TEXT_MAX], any[SHM_ADDR_MAX];
	const char *src = NULL, *dst = NULL;
	struct fi_info *list = NULL, *cur;
	int ret = 0;

	if ((node || service) && shm_name_of(node, service, name, sizeof(name)))
		return -FI_ENODATA;
	/* A source node alone names no endpoint: libfabric's shm makes each
	 * endpoint of such a name unique (so programs open many from it),
	 * and loom draws a fresh address instead.  Service, or an address
	 * of loom's form, names one. */
	if ((flags & FI_SOURCE) && (service || strstr(node, "://")))
		src = name;
	else if (!(flags & FI_SOURCE) && (node || service))
		dst = name;
	/* No source named: token 0 is "an address this process draws when
	 * the endpoint opens", so every endpoint made from it has its own. */
	if (!src && !(hints && hints->src_addr)) {
		shm_addr_format(any, sizeof(any), getpid(), 0);
		src = any;
	}
	ret = lm_info_match_list(version, shm_tmpls, hints, &list);
	if (ret)
		return ret;
	lm_rdm_progress_default(&shm_prov, hints, list);
	for (cur = list; cur && !ret; cur = cur->next) {
		if (src)
			ret = set_addr(&cur->src_addr, &cur->src_addrlen, src);
		if (dst && !ret)
			ret = set_addr(&cur->dest_addr, &cur->dest_addrlen, dst);
	}
	if (ret) {
		fi_freeinfo(list);
		return ret;
	}
	*info = list;
	return 0;
}

/* ---- fabric and domain --------------------------------------------------- */

static const struct fi_ops_domain shm_domain_ops =
    LM_RDM_DOMAIN_OPS(lm_rdm_endpoint);

static int shm_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
	struct lm_rdm_domain *dom;
	int no_cma = 0;
	int ret;

	if (info && info->domain_attr && info->domain_attr->name &&
	    strcmp(info->domain_attr->name, "shm"))
		return -FI_EINVAL;
	ret = lm_rdm_domain_open(fabric, info, &shm_link_ops, NULL, &shm_domain_ops,
	                         context, &dom);
	if (ret)
		return ret;
	/* Without bulk copies the domain's links never offer them, and the
	 * engine never asks (a setting of this domain only). */
	fi_param_get_bool(&shm_prov, "disable_cma", &no_cma);
	dom->no_bulk = no_cma != 0;
	if (!dom->no_bulk) {
		size_t eager = SHM_EAGER_DEF;

		fi_param_get_size_t(&shm_prov, "eager_size", &eager);
		dom->eager_max = eager ? eager : 1;
	}
	*domain = &dom->util.domain_fid;
	return 0;
}

static const struct fi_ops_fabric shm_fabric_ops =
    LM_FABRIC_OPS(shm_domain_open, lm_fabric_no_pep);

static int shm_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                           void *context)
{
	if (attr && attr->name && strcmp(attr->name, "shm"))
		return -FI_EINVAL;
	return lm_fabric_open(&shm_prov, attr, &shm_fabric_ops, context, fabric);
}

struct fi_provider shm_prov = {
    .version = LM_PROV_VERSION,
    .fi_version = LM_PROV_FI_VERSION,
    .name = "shm",
    .getinfo = shm_getinfo,
    .fabric = shm_fabric_open,
};

struct fi_provider *shm_prov_init(void)
{
	shm_log_prov = &shm_prov;
	fi_param_define(&shm_prov, "disable_cma", FI_PARAM_BOOL,
	                "Never use cross-memory attach (process_vm_readv) for large "
	                "messages; copy them through shared bounce buffers instead "
	                "(default: no, CMA is used when the kernel allows it)");
	fi_param_define(&shm_prov, "eager_size", FI_PARAM_SIZE_T,
	                "Largest message copied through the receiver's bounce "
	                "buffers when cross-memory attach works; larger ones are "
	                "copied once by process_vm_readv (default: %d)",
	                SHM_EAGER_DEF);
	lm_rdm_progress_param(&shm_prov);
	return &shm_prov;
}
