/* testprov.c - "loomtest", an external provider (lib<name>-fi.so loaded
 * through FI_PROVIDER_PATH) used by the tests to see providers listed
 * and selected by unmodified tools.  It only describes itself: opening
 * its fabric fails with -FI_ENOSYS. */
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

static int tp_getinfo(uint32_t version, const char *node, const char *service,
		      uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *fi;

	(void)version, (void)node, (void)service, (void)flags;
	if (hints && hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != FI_EP_RDM)
		return -FI_ENODATA;
	if (hints && (hints->caps & ~(uint64_t)(FI_MSG | FI_SEND | FI_RECV)))
		return -FI_ENODATA;

	fi = fi_allocinfo();
	if (!fi)
		return -FI_ENOMEM;
	fi->caps = FI_MSG | FI_SEND | FI_RECV;
	fi->addr_format = FI_ADDR_STR;
	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->max_msg_size = 4096;
	fi->tx_attr->caps = FI_MSG | FI_SEND;
	fi->tx_attr->size = 16;
	fi->tx_attr->iov_limit = 1;
	fi->rx_attr->caps = FI_MSG | FI_RECV;
	fi->rx_attr->size = 16;
	fi->rx_attr->iov_limit = 1;
	fi->domain_attr->threading = FI_THREAD_SAFE;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = FI_AV_UNSPEC;
	/* Fields of the later ABI versions, each its own value, so that
	 * abi_compat sees which ones an entry point of an older version
	 * hands out. */
	fi->tx_attr->tclass = FI_TC_BULK_DATA;
	fi->domain_attr->tclass = FI_TC_LOW_LATENCY;
	fi->domain_attr->max_ep_auth_key = 3;
	fi->domain_attr->max_group_id = 5;
	fi->domain_attr->max_cntr_value = 1000;
	fi->domain_attr->max_err_cntr_value = 100;
	fi->domain_attr->name = strdup("loomtest0");
	fi->fabric_attr->name = strdup("loomtest");
	fi->fabric_attr->prov_name = strdup("loomtest");
	if (!fi->domain_attr->name || !fi->fabric_attr->name || !fi->fabric_attr->prov_name) {
		fi_freeinfo(fi);
		return -FI_ENOMEM;
	}
	*info = fi;
	return 0;
}

static int tp_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *ctx)
{
	(void)attr, (void)fabric, (void)ctx;
	return -FI_ENOSYS;
}

static void tp_cleanup(void)
{
}

static struct fi_provider tp = {
	.version = FI_VERSION(1, 0),
	.fi_version = FI_VERSION(1, 17),
	.name = "loomtest",
	.getinfo = tp_getinfo,
	.fabric = tp_fabric,
	.cleanup = tp_cleanup,
};

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	fi_param_define(&tp, "knob", FI_PARAM_INT, "loomtest: a parameter for fi_info -e");
	return &tp;
}
