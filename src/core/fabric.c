/* fabric.c - the entry points that select a provider: fi_getinfo,
 * fi_fabric, fi_version and fi_open. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

LM_EXPORT uint32_t fi_version(void)
{
	return LM_VERSION_CURRENT;
}

/* loom speaks every 1.x API and the 2.x line that extends it, up to 2.6
 * (as libfabric 2.6, any version up to its own). */
static bool version_ok(uint32_t version)
{
	return FI_MAJOR(version) >= 1 && version <= FI_VERSION(2, 6);
}

/* What fi_getinfo's flags may hold. */
#define GETINFO_FLAGS (FI_NUMERICHOST | FI_SOURCE | FI_PROV_ATTR_ONLY | FI_RESCAN)

/* hints->fabric_attr->prov_name may name a layered stack ("tcp;ofi_rxm"):
 * loom's providers serve every endpoint type themselves, so the stack is
 * answered by whichever named component loom has. */
static bool prov_named(const char *names, const char *name)
{
	size_t len = strlen(name);
	const char *p = names, *end;

	for (; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ';');
		if ((size_t)(end - p) == len && !strncasecmp(p, name, len))
			return true;
	}
	return false;
}

static bool hints_valid(const struct fi_info *h)
{
	if (!h->src_addrlen != !h->src_addr || !h->dest_addrlen != !h->dest_addr)
		return false; /* an address comes with its length */
	/* Text ends within its length. */
	if (h->addr_format == FI_ADDR_STR &&
	    ((h->src_addr && !memchr(h->src_addr, 0, h->src_addrlen)) ||
	     (h->dest_addr && !memchr(h->dest_addr, 0, h->dest_addrlen))))
		return false;
	if (h->ep_attr && h->ep_attr->auth_key_size && !h->ep_attr->auth_key)
		return false;
	if (h->domain_attr && h->domain_attr->auth_key_size && !h->domain_attr->auth_key)
		return false;
	if (h->ep_attr && (unsigned)h->ep_attr->type > FI_EP_SOCK_DGRAM)
		return false;
	if (h->domain_attr && ((unsigned)h->domain_attr->threading > FI_THREAD_ENDPOINT ||
	                       (unsigned)h->domain_attr->av_type > FI_AV_TABLE))
		return false;
	return true;
}

/* Fill in what the core, not the provider, owns in every answer. */
static int stamp(struct fi_info *list, const struct fi_provider *prov, uint32_t version)
{
	for (struct fi_info *i = list; i; i = i->next) {
		if (!i->fabric_attr) {
			i->fabric_attr = calloc(1, sizeof(*i->fabric_attr));
			if (!i->fabric_attr)
				return -FI_ENOMEM;
		}
		if (!i->fabric_attr->prov_name ||
		    strcasecmp(i->fabric_attr->prov_name, prov->name)) {
			free(i->fabric_attr->prov_name);
			i->fabric_attr->prov_name = strdup(prov->name);
			if (!i->fabric_attr->prov_name)
				return -FI_ENOMEM;
		}
		i->fabric_attr->prov_version = prov->version;
		i->fabric_attr->api_version = version;
	}
	return 0;
}

static int prov_attr_only(struct fi_provider *prov, uint32_t version,
			  struct fi_info **out)
{
	struct fi_info *list = NULL;
	int ret;

	/* Every provider answers once, with its defaults, usable or not. */
	ret = prov->getinfo(version, NULL, NULL, 0, NULL, &list);
	if (ret || !list) {
		lm_info_free(list);
		list = lm_info_alloc();
		if (!list)
			return -FI_ENOMEM;
	}
	lm_info_free(list->next);
	list->next = NULL;
	/* Attributes only: no address of this process (libfabric gives none
	 * either, and a listing stays the same from run to run). */
	free(list->src_addr);
	free(list->dest_addr);
	list->src_addr = list->dest_addr = NULL;
	list->src_addrlen = list->dest_addrlen = 0;
	*out = list;
	return 0;
}

int lm_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *head = NULL, **tail = &head;
	const char *want_prov = NULL;
	char *env_prov = NULL;
	struct fi_provider *prov;
	int ret, last_err = -FI_ENODATA;

	if (!info)
		return -FI_EINVAL;
	*info = NULL;
	if (!version_ok(version)) {
		LM_WARN(&lm_core_prov, FI_LOG_CORE, "unsupported API version %u.%u\n",
			FI_MAJOR(version), FI_MINOR(version));
		return -FI_ENOSYS;
	}
	if (flags & ~GETINFO_FLAGS)
		return -FI_EBADFLAGS;
	if ((flags & FI_SOURCE) && !node && !service)
		return -FI_EINVAL;
	if (hints && !hints_valid(hints))
		return -FI_EINVAL;

	lm_init();
	fi_param_get_str(&lm_core_prov, "provider", &env_prov);
	if (hints && hints->fabric_attr)
		want_prov = hints->fabric_attr->prov_name;

	for (prov = lm_prov_next(NULL); prov; prov = lm_prov_next(prov)) {
		struct fi_info *list = NULL;

		if (!lm_name_selected(env_prov, prov->name))
			continue;
		if (want_prov && !prov_named(want_prov, prov->name))
			continue;
		if (flags & FI_PROV_ATTR_ONLY)
			ret = prov_attr_only(prov, version, &list);
		else
			ret = prov->getinfo(version, node, service, flags, hints, &list);
		if (ret) {
			lm_info_free(list);
			if (ret != -FI_ENODATA) {
				LM_INFO(&lm_core_prov, FI_LOG_CORE, "%s: getinfo: %s\n",
					prov->name, fi_strerror(-ret));
				last_err = ret;
			}
			continue;
		}
		ret = stamp(list, prov, version);
		*tail = list;
		while (*tail)
			tail = &(*tail)->next;
		if (ret) {
			lm_info_free(head);
			return ret;
		}
	}

	if (!head)
		return last_err == -FI_ENOMEM ? last_err : -FI_ENODATA;
	*info = head;
	return 0;
}

/* fi_getinfo@@FABRIC_1.9: the current layout, fi_domain_attr with the
 * counter limits; older versions are in compat.c. */
int lm_getinfo_v19(uint32_t version, const char *node, const char *service,
		   uint64_t flags, const struct fi_info *hints, struct fi_info **info);
LM_EXPORT int lm_getinfo_v19(uint32_t version, const char *node, const char *service,
			     uint64_t flags, const struct fi_info *hints,
			     struct fi_info **info)
{
	return lm_getinfo(version, node, service, flags, hints, info);
}
LM_SYMVER_DEFAULT(lm_getinfo_v19, fi_getinfo, FABRIC_1.9);

/* The provider that serves a fabric named by prov_name, which may be a
 * layered name from an older libfabric ("tcp;ofi_rxm"). */
static struct fi_provider *fabric_prov(const char *prov_name)
{
	struct fi_provider *prov;
	const char *semi;
	char first[64];
	size_t n;

	lm_init();
	prov = lm_prov_find(prov_name);
	if (prov)
		return prov;
	semi = strchr(prov_name, ';');
	if (!semi)
		return NULL;
	n = (size_t)(semi - prov_name);
	if (n >= sizeof(first))
		return NULL;
	memcpy(first, prov_name, n);
	first[n] = '\0';
	return lm_prov_find(first);
}

static int open_fabric(struct fi_provider *prov, struct fi_fabric_attr *attr,
		       struct fid_fabric **fabric, void *context)
{
	int ret = prov->fabric(attr, fabric, context);

	if (!ret && *fabric)
		(*fabric)->api_version = attr->api_version ? attr->api_version
							    : LM_VERSION_CURRENT;
	return ret;
}

int lm_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	struct fi_provider *prov;

	if (!attr || !fabric || !attr->prov_name || !attr->name)
		return -FI_EINVAL;
	prov = fabric_prov(attr->prov_name);
	if (!prov)
		return -FI_ENODATA;
	return open_fabric(prov, attr, fabric, context);
}

/* fi_fabric2 (API 2.0, FABRIC_1.8): the fabric of an fi_getinfo answer.
 * No flags are defined.  As in libfabric, a provider the entry names that
 * is not loaded is -FI_ENODEV (fi_fabric says -FI_ENODATA). */
LM_EXPORT int fi_fabric2(struct fi_info *info, struct fid_fabric **fabric, uint64_t flags,
			 void *context)
{
	struct fi_fabric_attr attr;
	struct fi_provider *prov;

	if (!info || !fabric || flags || !info->fabric_attr ||
	    !info->fabric_attr->prov_name || !info->fabric_attr->name) {
		LM_INFO(&lm_core_prov, FI_LOG_CORE, "fi_fabric2: invalid arguments\n");
		return -FI_EINVAL;
	}
	prov = fabric_prov(info->fabric_attr->prov_name);
	if (!prov) {
		LM_INFO(&lm_core_prov, FI_LOG_CORE, "fi_fabric2: no provider %s\n",
			info->fabric_attr->prov_name);
		return -FI_ENODEV;
	}
	/* The provider reads the attributes only; a copy keeps the entry's
	 * own untouched whatever it does. */
	attr = *info->fabric_attr;
	return open_fabric(prov, &attr, fabric, context);
}

int lm_fabric_v11(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		  void *context);
LM_EXPORT int lm_fabric_v11(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
			    void *context)
{
	return lm_fabric(attr, fabric, context);
}
LM_SYMVER_DEFAULT(lm_fabric_v11, fi_fabric, FABRIC_1.1);

LM_EXPORT int fi_open(uint32_t version, const char *name, void *attr, size_t attr_len,
		      uint64_t flags, struct fid **fid, void *context)
{
	(void)attr;
	(void)attr_len;
	(void)flags;
	(void)context;
	if (!name || !fid)
		return -FI_EINVAL;
	if (!version_ok(version))
		return -FI_ENOSYS;
	*fid = NULL;
	/* No named objects (such as libfabric's "mr_cache") exist in loom. */
	LM_INFO(&lm_core_prov, FI_LOG_CORE, "fi_open: no object named %s\n", name);
	return -FI_ENOSYS;
}
