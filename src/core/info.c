/* info.c - fi_info allocation, deep copy and release: fi_dupinfo,
 * fi_freeinfo (and fi_allocinfo, which is fi_dupinfo(NULL)). */
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct fi_info *lm_info_alloc(void)
{
	struct fi_info *info = calloc(1, sizeof(*info));

	if (!info)
		return NULL;
	info->tx_attr = calloc(1, sizeof(*info->tx_attr));
	info->rx_attr = calloc(1, sizeof(*info->rx_attr));
	info->ep_attr = calloc(1, sizeof(*info->ep_attr));
	info->domain_attr = calloc(1, sizeof(*info->domain_attr));
	info->fabric_attr = calloc(1, sizeof(*info->fabric_attr));
	if (!info->tx_attr || !info->rx_attr || !info->ep_attr || !info->domain_attr ||
	    !info->fabric_attr) {
		lm_info_free(info);
		return NULL;
	}
	return info;
}

static void free_one(struct fi_info *info)
{
	free(info->src_addr);
	free(info->dest_addr);
	free(info->tx_attr);
	free(info->rx_attr);
	if (info->ep_attr) {
		free(info->ep_attr->auth_key);
		free(info->ep_attr);
	}
	if (info->domain_attr) {
		free(info->domain_attr->name);
		free(info->domain_attr->auth_key);
		free(info->domain_attr);
	}
	if (info->fabric_attr) {
		free(info->fabric_attr->name);
		free(info->fabric_attr->prov_name);
		free(info->fabric_attr);
	}
	/* A NIC is a fid owned by whoever filled it in; closing it releases
	 * its attributes. */
	if (info->nic && info->nic->fid.ops && info->nic->fid.ops->close)
		info->nic->fid.ops->close(&info->nic->fid);
	free(info);
}

void lm_info_free(struct fi_info *info)
{
	while (info) {
		struct fi_info *next = info->next;

		free_one(info);
		info = next;
	}
}

static void *dup_mem(const void *src, size_t len, bool *fail)
{
	void *dst;

	if (!src || !len)
		return NULL;
	dst = malloc(len);
	if (!dst)
		*fail = true;
	else
		memcpy(dst, src, len);
	return dst;
}

static char *dup_str(const char *src, bool *fail)
{
	char *dst;

	if (!src)
		return NULL;
	dst = strdup(src);
	if (!dst)
		*fail = true;
	return dst;
}

#define DUP_STRUCT(src, fail) dup_mem((src), sizeof(*(src)), (fail))

struct fi_info *lm_info_dup(const struct fi_info *info)
{
	struct fi_info *dup;
	bool fail = false;

	if (!info)
		return lm_info_alloc();

	dup = DUP_STRUCT(info, &fail);
	if (!dup)
		return NULL;
	dup->next = NULL;
	dup->src_addr = dup->dest_addr = NULL;
	dup->tx_attr = NULL;
	dup->rx_attr = NULL;
	dup->ep_attr = NULL;
	dup->domain_attr = NULL;
	dup->fabric_attr = NULL;
	dup->nic = NULL;

	dup->src_addr = dup_mem(info->src_addr, info->src_addrlen, &fail);
	dup->dest_addr = dup_mem(info->dest_addr, info->dest_addrlen, &fail);
	dup->tx_attr = DUP_STRUCT(info->tx_attr, &fail);
	dup->rx_attr = DUP_STRUCT(info->rx_attr, &fail);
	dup->ep_attr = DUP_STRUCT(info->ep_attr, &fail);
	if (dup->ep_attr)
		dup->ep_attr->auth_key = dup_mem(info->ep_attr->auth_key,
						 info->ep_attr->auth_key_size, &fail);
	dup->domain_attr = DUP_STRUCT(info->domain_attr, &fail);
	if (dup->domain_attr) {
		dup->domain_attr->name = dup_str(info->domain_attr->name, &fail);
		dup->domain_attr->auth_key =
			dup_mem(info->domain_attr->auth_key,
				info->domain_attr->auth_key_size, &fail);
	}
	dup->fabric_attr = DUP_STRUCT(info->fabric_attr, &fail);
	if (dup->fabric_attr) {
		dup->fabric_attr->name = dup_str(info->fabric_attr->name, &fail);
		dup->fabric_attr->prov_name = dup_str(info->fabric_attr->prov_name, &fail);
	}
	/* A NIC is its provider's object: it copies itself through FI_DUP. */
	if (info->nic && !fail) {
		if (!info->nic->fid.ops || !info->nic->fid.ops->control ||
		    info->nic->fid.ops->control(&info->nic->fid, FI_DUP, &dup->nic))
			fail = true;
	}
	if (fail) {
		lm_info_free(dup);
		return NULL;
	}
	return dup;
}

/* fi_dupinfo and fi_freeinfo @@FABRIC_1.9: the current layout; older
 * versions are in compat.c. */
struct fi_info *lm_dupinfo_v19(const struct fi_info *info);
void lm_freeinfo_v19(struct fi_info *info);

LM_EXPORT struct fi_info *lm_dupinfo_v19(const struct fi_info *info)
{
	return lm_info_dup(info);
}
LM_SYMVER_DEFAULT(lm_dupinfo_v19, fi_dupinfo, FABRIC_1.9);

LM_EXPORT void lm_freeinfo_v19(struct fi_info *info)
{
	lm_info_free(info);
}
LM_SYMVER_DEFAULT(lm_freeinfo_v19, fi_freeinfo, FABRIC_1.9);
