/* compat.c - entry points for binaries built against older libfabric
 * headers (symbol versions FABRIC_1.0 to 1.8; 1.9 is the current one).
 * Their fi_info and attribute structures are prefixes of today's: fields
 * were only ever appended.  Input from such a binary is copied into zeroed
 * current structures, so nothing past the end of its structures is read;
 * output is in the current layout with the fields its version lacks left
 * zero, a superset the old binary reads correctly and never has to write
 * past. */
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

/* 1.1 and 1.2 have no traffic class (tx_attr and domain_attr tclass). */
static const struct lm_abi abi_1_1 = {
	.info = offsetof(struct fi_info, nic),
	.tx = offsetof(struct fi_tx_attr, tclass),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = offsetof(struct fi_domain_attr, tclass),
	.fabric = sizeof(struct fi_fabric_attr),
};

static const struct lm_abi abi_1_2 = {
	.info = sizeof(struct fi_info),
	.tx = offsetof(struct fi_tx_attr, tclass),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = offsetof(struct fi_domain_attr, tclass),
	.fabric = sizeof(struct fi_fabric_attr),
};

/* 1.3 (libfabric 1.5 to 1.19) ends fi_domain_attr at tclass; 1.7 adds
 * max_ep_auth_key, 1.8 max_group_id, 1.9 the counter limits. */
static const struct lm_abi abi_1_3 = {
	.info = sizeof(struct fi_info),
	.tx = sizeof(struct fi_tx_attr),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = offsetof(struct fi_domain_attr, max_ep_auth_key),
	.fabric = sizeof(struct fi_fabric_attr),
};

static const struct lm_abi abi_1_7 = {
	.info = sizeof(struct fi_info),
	.tx = sizeof(struct fi_tx_attr),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = offsetof(struct fi_domain_attr, max_group_id),
	.fabric = sizeof(struct fi_fabric_attr),
};

static const struct lm_abi abi_1_8 = {
	.info = sizeof(struct fi_info),
	.tx = sizeof(struct fi_tx_attr),
	.rx = sizeof(struct fi_rx_attr),
	.ep = sizeof(struct fi_ep_attr),
	.domain = offsetof(struct fi_domain_attr, max_cntr_value),
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

#define ZERO_TAIL(ptr, len)                                                              \
	do {                                                                             \
		if (ptr)                                                                 \
			memset((char *)(ptr) + (len), 0, sizeof(*(ptr)) - (len));        \
	} while (0)

/* Answers for an old binary carry none of the fields appended since 1.1
 * that its layout lacks (traffic classes, the domain's later limits): a
 * value it cannot see must not steer a later call it makes with the
 * answer.  The 1.0 prefixes end before fields that hold pointers the
 * answer owns, which stay. */
static void trim_list(struct fi_info *list, const struct lm_abi *abi)
{
	size_t tx = LM_MAX(abi->tx, offsetof(struct fi_tx_attr, tclass));
	size_t dom = LM_MAX(abi->domain, offsetof(struct fi_domain_attr, tclass));

	for (struct fi_info *i = list; i; i = i->next) {
		ZERO_TAIL(i->tx_attr, tx);
		ZERO_TAIL(i->domain_attr, dom);
	}
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
	if (!ret)
		trim_list(*info, abi);
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
LM_COMPAT_ABI(v13, abi_1_3, FABRIC_1.3);
LM_COMPAT_ABI(v17, abi_1_7, FABRIC_1.7);
LM_COMPAT_ABI(v18, abi_1_8, FABRIC_1.8);

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
