/* compat.c - entry points for binaries built against older libfabric
 * headers (symbol versions FABRIC_1.0 to 1.2).  Their fi_info and
 * attribute structures are prefixes of today's: fields were only ever
 * appended.  Input from such a binary is copied into zeroed current
 * structures; output in the current layout is a superset the old binary
 * reads correctly. */
#include <stddef.h>
#include <string.h>

#include "core.h"

/* How many leading bytes of each structure an ABI version has. */
struct lm_abi {
	size_t info, tx, rx, ep, domain, fabric;
};

static const struct lm_abi abi_1_0 = {
	.info = offsetof(struct fi_info, nic),
	.tx = offsetof(struct fi_tx_attr, tclass),
	.rx = sizeof(struct fi_rx_attr),
	.ep = offsetof(struct fi_ep_attr, auth_key_size),
	.domain = offsetof(struct fi_domain_attr, cntr_cnt),
	.fabric = offsetof(struct fi_fabric_attr, api_version),
};

static const struct lm_abi abi_1_1 = {
	.info = offsetof(struct fi_info, nic),
	.tx = sizeof(struct fi_tx_attr),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = sizeof(struct fi_domain_attr),
	.fabric = sizeof(struct fi_fabric_attr),
};

static const struct lm_abi abi_1_2 = {
	.info = sizeof(struct fi_info),
	.tx = sizeof(struct fi_tx_attr),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = sizeof(struct fi_domain_attr),
	.fabric = sizeof(struct fi_fabric_attr),
};

#define VIEW(field, type, len)                                                           \
	do {                                                                             \
		if (info.field) {                                                        \
			memcpy(&type, info.field, len);                                  \
			info.field = &type;                                              \
		}                                                                        \
	} while (0)

/* Deep copy of one old-layout fi_info into current-layout memory. */
static struct fi_info *dup_old(const void *old, const struct lm_abi *abi)
{
	struct fi_info info = {0};
	struct fi_tx_attr tx = {0};
	struct fi_rx_attr rx = {0};
	struct fi_ep_attr ep = {0};
	struct fi_domain_attr domain = {0};
	struct fi_fabric_attr fabric = {0};

	if (!old)
		return lm_info_alloc();
	memcpy(&info, old, abi->info);
	info.next = NULL;
	VIEW(tx_attr, tx, abi->tx);
	VIEW(rx_attr, rx, abi->rx);
	VIEW(ep_attr, ep, abi->ep);
	VIEW(domain_attr, domain, abi->domain);
	VIEW(fabric_attr, fabric, abi->fabric);
	return lm_info_dup(&info);
}

static int getinfo_old(const struct lm_abi *abi, uint32_t version, const char *node,
		       const char *service, uint64_t flags, const void *hints,
		       struct fi_info **info)
{
	struct fi_info *h = NULL;
	int ret;

	if (hints) {
		h = dup_old(hints, abi);
		if (!h)
			return -FI_ENOMEM;
	}
	ret = lm_getinfo(version, node, service, flags, h, info);
	lm_info_free(h);
	return ret;
}

/* The exported compat functions: one trio per ABI version. */
#define LM_COMPAT_ABI(tag, abi, ver)                                                     \
	int lm_getinfo_##tag(uint32_t version, const char *node, const char *service,    \
			     uint64_t flags, const void *hints, struct fi_info **info); \
	LM_EXPORT int lm_getinfo_##tag(uint32_t version, const char *node,               \
				       const char *service, uint64_t flags,              \
				       const void *hints, struct fi_info **info)         \
	{                                                                                \
		return getinfo_old(&abi, version, node, service, flags, hints, info);    \
	}                                                                                \
	LM_SYMVER_COMPAT(lm_getinfo_##tag, fi_getinfo, ver);                             \
	struct fi_info *lm_dupinfo_##tag(const void *info);                              \
	LM_EXPORT struct fi_info *lm_dupinfo_##tag(const void *info)                     \
	{                                                                                \
		return dup_old(info, &abi);                                              \
	}                                                                                \
	LM_SYMVER_COMPAT(lm_dupinfo_##tag, fi_dupinfo, ver);                             \
	void lm_freeinfo_##tag(struct fi_info *info);                                    \
	LM_EXPORT void lm_freeinfo_##tag(struct fi_info *info)                           \
	{                                                                                \
		lm_info_free(info);                                                      \
	}                                                                                \
	LM_SYMVER_COMPAT(lm_freeinfo_##tag, fi_freeinfo, ver)

LM_COMPAT_ABI(v10, abi_1_0, FABRIC_1.0);
LM_COMPAT_ABI(v11, abi_1_1, FABRIC_1.1);
LM_COMPAT_ABI(v12, abi_1_2, FABRIC_1.2);

/* fi_fabric@FABRIC_1.0 predates fi_fabric_attr.api_version: such callers
 * speak API 1.0. */
int lm_fabric_v10(const void *attr, struct fid_fabric **fabric, void *context);
LM_EXPORT int lm_fabric_v10(const void *attr, struct fid_fabric **fabric, void *context)
{
	struct fi_fabric_attr cur = {0};

	if (!attr)
		return -FI_EINVAL;
	memcpy(&cur, attr, abi_1_0.fabric);
	cur.api_version = FI_VERSION(1, 0);
	return lm_fabric(&cur, fabric, context);
}
LM_SYMVER_COMPAT(lm_fabric_v10, fi_fabric, FABRIC_1.0);
