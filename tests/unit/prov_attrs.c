/* prov_attrs.c - attributes of loom's own providers that applications
 * size themselves from, checked through fi_getinfo:
 *   - mem_tag_format: every tagged endpoint (shm RDM, tcp RDM and MSG)
 *     reports all 64 tag bits, unstructured (0xaaaa...).  Open MPI's ofi
 *     MTL counts the bits it may use from it, and found none at 0.
 *   - tx_attr->op_flags asked as defaults: FI_DELIVERY_COMPLETE is
 *     accepted (the engine honours it on every transmit call; Open MPI's
 *     ofi BTL asks for it) and given back, while a flag no provider here
 *     serves as a default (FI_FENCE) finds nothing. */
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "check.h"

#define TAG_ALL 0xaaaaaaaaaaaaaaaaULL

static struct fi_info *hints_for(const char *prov, enum fi_ep_type type, uint64_t op_flags)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = FI_TAGGED;
	h->ep_attr->type = type;
	h->tx_attr->op_flags = op_flags;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static void check_prov(const char *prov, enum fi_ep_type type)
{
	struct fi_info *h, *info = NULL, *i;
	int n;

	h = hints_for(prov, type, 0);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	n = 0;
	for (i = info; i; i = i->next, n++)
		CHECK_HEX(i->ep_attr->mem_tag_format, TAG_ALL);
	CHECK(n > 0);
	fi_freeinfo(info);
	fi_freeinfo(h);

	h = hints_for(prov, type, FI_DELIVERY_COMPLETE);
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	n = 0;
	for (i = info; i; i = i->next, n++)
		CHECK(i->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
	CHECK(n > 0);
	fi_freeinfo(info);
	fi_freeinfo(h);

	h = hints_for(prov, type, FI_FENCE);
	info = NULL;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), -FI_ENODATA);
	CHECK(info == NULL);
	fi_freeinfo(h);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	check_prov("shm", FI_EP_RDM);
	check_prov("tcp", FI_EP_RDM);
	check_prov("tcp", FI_EP_MSG);
	return check_done();
}
