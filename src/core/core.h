/* core.h - internal interface of loom's core layer: export and symbol
 * version macros, the provider registry, fi_info helpers, logging and
 * parameters as used by util/ and the providers. */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

/* Everything is hidden by default (-fvisibility=hidden); only the public
 * libfabric entry points carry this mark, and the linker version script
 * names the version each belongs to. */
#define LM_EXPORT __attribute__((visibility("default")))

/* For the few helpers of the per-message path whose call overhead shows
 * in a profile. */
#define LM_HOT_INLINE inline __attribute__((always_inline))

/* Bind an implementation to a versioned symbol: DEFAULT is what new links
 * use (name@@ver), COMPAT serves binaries built against older headers
 * (name@ver). */
#define LM_SYMVER_DEFAULT(impl, name, ver) __asm__(".symver " #impl "," #name "@@" #ver)
#define LM_SYMVER_COMPAT(impl, name, ver)  __asm__(".symver " #impl "," #name "@" #ver)

#define LM_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LM_MIN(a, b)	 ((a) < (b) ? (a) : (b))
#define LM_MAX(a, b)	 ((a) > (b) ? (a) : (b))

#define LM_VERSION_CURRENT FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/* The core's own identity for logging and parameters (FI_<NAME>). */
extern struct fi_provider lm_core_prov;

/* ---- provider registry (registry.c) ---------------------------------- */

/* Providers are kept in registration order; built-in providers register
 * fastest first, so fi_getinfo lists results in order of preference.
 * Registration takes no copy: prov must outlive the library. */
int lm_prov_register(struct fi_provider *prov);
/* Call prov->cleanup of every provider and forget them (tests). */
void lm_prov_reset(void);
struct fi_provider *lm_prov_find(const char *name);
/* Iterate: returns the provider after prev (NULL starts), NULL at end. */
struct fi_provider *lm_prov_next(struct fi_provider *prev);
/* Load the built-in providers and any FI_PROVIDER_PATH ones, once. */
void lm_init(void);

/* The current-ABI implementations behind the versioned entry points;
 * compat.c converts older layouts and calls these. */
int lm_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info);
int lm_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);

/* ---- fi_info helpers (info.c, match.c) ------------------------------- */

struct fi_info *lm_info_alloc(void);
struct fi_info *lm_info_dup(const struct fi_info *info);
void lm_info_free(struct fi_info *info);

/* Match one provider template against hints for API version; on success
 * *out is a new fi_info describing what the template offers narrowed to
 * the hints. -FI_ENODATA when it does not satisfy them. */
int lm_info_match(uint32_t version, const struct fi_info *tmpl,
		  const struct fi_info *hints, struct fi_info **out);
/* The usual provider getinfo: match every template of a NULL-terminated
 * list in order, and append the results to *info. */
int lm_info_match_list(uint32_t version, const struct fi_info *const *tmpls,
		       const struct fi_info *hints, struct fi_info **info);

/* The receive capabilities of API 2.0, on bits that meant other things
 * before (FI_EXACT_DIRECTED_RECV's is 1.x's FI_VARIABLE_MSG): what a
 * caller of an older version is offered depends on the version it passes
 * (lm_info_match). */
#define LM_CAPS_V2                                                                       \
	(FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_EXACT_DIRECTED_RECV)

/* Capability groups (man fi_getinfo).  FI_VARIABLE_MSG and
 * FI_EXACT_DIRECTED_RECV are one bit, primary in either meaning. */
/* A template's domain_attr->data_progress for a provider that does
 * either: FI_PROGRESS_MANUAL in the answer unless the hints ask for
 * FI_PROGRESS_AUTO (lm_info_match). */
#define LM_PROGRESS_EITHER ((enum fi_progress)0x100)

#define LM_PRIMARY_CAPS                                                                  \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_NAMED_RX_CTX |      \
	 FI_DIRECTED_RECV | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV |           \
	 FI_VARIABLE_MSG | FI_HMEM | FI_COLLECTIVE)
#define LM_MSG_MODIFIERS (FI_SEND | FI_RECV)
#define LM_RMA_MODIFIERS (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define LM_SECONDARY_CAPS                                                                \
	(FI_MULTI_RECV | FI_TAGGED_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT |               \
	 FI_SHARED_AV | FI_TRIGGER | FI_FENCE | FI_LOCAL_COMM | FI_REMOTE_COMM |         \
	 FI_SOURCE_ERR | FI_RMA_PMEM)
#define LM_TX_MODIFIERS (FI_SEND | FI_READ | FI_WRITE)
#define LM_RX_MODIFIERS (FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE)
/* The capabilities that apply to transmit and to receive contexts (man
 * fi_endpoint); the domain ones (FI_LOCAL_COMM, FI_REMOTE_COMM,
 * FI_SHARED_AV) belong to neither. */
#define LM_TX_CAPS                                                                       \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | LM_TX_MODIFIERS | FI_HMEM |           \
	 FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM | FI_NAMED_RX_CTX |          \
	 FI_COLLECTIVE)
#define LM_RX_CAPS                                                                       \
	(FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | LM_RX_MODIFIERS | FI_HMEM |           \
	 FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_MULTI_RECV | \
	 FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR | FI_COLLECTIVE | LM_CAPS_V2)

/* In a template's domain_attr->mr_mode only: its other bits are what the
 * provider prefers, not what it needs.  The answer keeps those the
 * application accepts and drops the rest, as a provider whose memory
 * registration serves every mode (util's does: offsets or virtual
 * addresses, its keys or the application's) may.  Never reaches an
 * application. */
#define LM_MR_PREFERRED (1 << 30)

/* ---- logging (log.c) ------------------------------------------------- */

#define LM_LOG(level, prov, subsys, ...)                                                 \
	do {                                                                             \
		if (fi_log_enabled(prov, level, subsys))                                 \
			fi_log(prov, level, subsys, __func__, __LINE__, __VA_ARGS__);    \
	} while (0)
#define LM_WARN(prov, subsys, ...)  LM_LOG(FI_LOG_WARN, prov, subsys, __VA_ARGS__)
#define LM_INFO(prov, subsys, ...)  LM_LOG(FI_LOG_INFO, prov, subsys, __VA_ARGS__)
#define LM_DEBUG(prov, subsys, ...) LM_LOG(FI_LOG_DEBUG, prov, subsys, __VA_ARGS__)

void lm_log_init(void);

/* ---- parameters (param.c) -------------------------------------------- */

void lm_param_reset(void);
/* prov's int parameter name into *out when it is set, readable and within
 * [lo, hi]; out of range, *out keeps its default and the log says so
 * (unreadable text fi_param_get reports itself). */
void lm_param_int_range(struct fi_provider *prov, const char *name, int lo, int hi,
                        int *out);

/* ---- small string helpers (util shared with tools-less code) ---------- */

/* Does comma-separated list (optionally starting with '^' to exclude)
 * select name?  NULL or empty list selects everything. */
bool lm_name_selected(const char *list, const char *name);

#endif
