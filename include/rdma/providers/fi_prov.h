/* fi_prov.h - what a provider presents to the library core (struct
 * fi_provider, the plug-in entry point) and the fi_param_* calls it uses. */
#ifndef LOOM_RDMA_PROVIDERS_FI_PROV_H
#define LOOM_RDMA_PROVIDERS_FI_PROV_H

#include <rdma/fabric.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A loadable provider "foo" is built as libfoo-fi.so. */
#define FI_LIB_EXTENSION "fi"
#define FI_LIB_SUFFIX    FI_LIB_EXTENSION ".so"

/* The one symbol a loadable provider exports; the core calls it after
 * dlopen() to obtain the provider's description. */
#define FI_EXT_INI                                                                       \
	__attribute__((visibility("default"), EXTERNALLY_VISIBLE)) struct fi_provider *  \
	fi_prov_ini(void)

struct fi_provider {
	uint32_t version;          /* the provider's own version, FI_VERSION packed */
	uint32_t fi_version;       /* the API version it was written against */
	struct fi_context context; /* reserved for the core */
	const char *name;
	int (*getinfo)(uint32_t version, const char *node, const char *service,
	               uint64_t flags, const struct fi_info *hints,
	               struct fi_info **info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
	              void *context);
	void (*cleanup)(void);
};

/* Declares a setting named FI_<PROVIDER>_<PARAM_NAME> (FI_<PARAM_NAME> when
 * provider is NULL) so that fi_getparams and `fi_info -e` can list it. */
int fi_param_define(const struct fi_provider *provider, const char *param_name,
                    enum fi_param_type type, const char *help_string_fmt, ...);

/* Reads a defined setting from the environment into *value, whose type follows
 * the definition; -FI_ENODATA when it is not set. */
int fi_param_get(struct fi_provider *provider, const char *param_name, void *value);

/* Typed front ends, so the compiler checks the destination. */
static inline int fi_param_get_str(struct fi_provider *provider, const char *param_name,
                                   char **value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_int(struct fi_provider *provider, const char *param_name,
                                   int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_bool(struct fi_provider *provider, const char *param_name,
                                    int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_size_t(struct fi_provider *provider,
                                      const char *param_name, size_t *value)
{
	return fi_param_get(provider, param_name, value);
}

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RDMA_PROVIDERS_FI_PROV_H */
