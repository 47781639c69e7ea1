/* param.c - configuration parameters: fi_param_define / fi_param_get for
 * providers (environment variable FI_<PROV>_<NAME>), fi_getparams for
 * tools such as fi_info -e.  The core's own parameters are defined
 * statically so they can be read before anything is initialised. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

struct lm_param {
	struct lm_param *next;
	const struct fi_provider *prov;
	char *name;	   /* as defined, e.g. "iface" */
	char *env;	   /* e.g. "FI_TCP_IFACE" */
	char *description; /* NULL for the static core entries: see help */
	const char *help;
	enum fi_param_type type;
};

#define CORE_PARAM(n, e, t, h) {.prov = &lm_core_prov, .name = n, .env = e, .type = t, .help = h}

static struct lm_param core_params[] = {
	CORE_PARAM("provider", "FI_PROVIDER", FI_PARAM_STRING,
		   "Only use the listed providers, comma separated; a leading ^ "
		   "excludes them instead (default: all available)"),
	CORE_PARAM("provider_path", "FI_PROVIDER_PATH", FI_PARAM_STRING,
		   "Load external providers (lib<name>-fi.so) from these directories, "
		   "colon separated (default: none)"),
	CORE_PARAM("log_level", "FI_LOG_LEVEL", FI_PARAM_STRING,
		   "Specify logging level: warn, trace, info, debug (default: none, "
		   "loom is silent)"),
	CORE_PARAM("log_prov", "FI_LOG_PROV", FI_PARAM_STRING,
		   "Specify specific provider to log, comma separated, ^ excludes "
		   "(default: all)"),
	CORE_PARAM("log_subsys", "FI_LOG_SUBSYS", FI_PARAM_STRING,
		   "Specify specific subsystem to log: core, fabric, domain, ep_ctrl, "
		   "ep_data, av, cq, eq, mr, cntr (default: all)"),
	CORE_PARAM("log_interval", "FI_LOG_INTERVAL", FI_PARAM_INT,
		   "Delay in ms between rate limited log messages (default 2000)"),
};

static struct lm_param *dyn_head;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_core(const struct fi_provider *prov)
{
	return !prov || prov == &lm_core_prov;
}

static bool same_owner(const struct fi_provider *a, const struct fi_provider *b)
{
	if (is_core(a) || is_core(b))
		return is_core(a) && is_core(b);
	return a == b || (a->name && b->name && !strcasecmp(a->name, b->name));
}

/* Caller holds lock. */
static struct lm_param *find(const struct fi_provider *prov, const char *name)
{
	for (size_t i = 0; i < LM_ARRAY_SIZE(core_params); i++)
		if (is_core(prov) && !strcasecmp(core_params[i].name, name))
			return &core_params[i];
	for (struct lm_param *p = dyn_head; p; p = p->next)
		if (same_owner(p->prov, prov) && !strcasecmp(p->name, name))
			return p;
	return NULL;
}

/* FI_<PROV>_<NAME> in upper case; "ofi_" provider prefixes are dropped as
 * libfabric does (ofi_rxm -> FI_RXM_...). */
static char *env_name(const struct fi_provider *prov, const char *name)
{
	const char *pname = is_core(prov) ? NULL : prov->name;
	char *env, *c;
	size_t len;

	if (pname && !strncasecmp(pname, "ofi_", 4))
		pname += 4;
	len = 3 + (pname ? strlen(pname) + 1 : 0) + strlen(name) + 1;
	env = malloc(len);
	if (!env)
		return NULL;
	snprintf(env, len, "FI_%s%s%s", pname ? pname : "", pname ? "_" : "", name);
	for (c = env; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	return env;
}

LM_EXPORT int fi_param_define(const struct fi_provider *provider, const char *param_name,
			      enum fi_param_type type, const char *help_string_fmt, ...)
{
	struct lm_param *p;
	va_list ap;
	int len;

	if (!param_name || !*param_name || !help_string_fmt || type < FI_PARAM_STRING ||
	    type > FI_PARAM_SIZE_T)
		return -FI_EINVAL;
	if (!is_core(provider) && !provider->name)
		return -FI_EINVAL;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->prov = provider;
	p->type = type;
	p->name = strdup(param_name);
	p->env = env_name(provider, param_name);
	va_start(ap, help_string_fmt);
	len = vsnprintf(NULL, 0, help_string_fmt, ap);
	va_end(ap);
	if (len >= 0 && (p->description = malloc((size_t)len + 1))) {
		va_start(ap, help_string_fmt);
		vsnprintf(p->description, (size_t)len + 1, help_string_fmt, ap);
		va_end(ap);
	}
	if (!p->name || !p->env || !p->description) {
		free(p->name);
		free(p->env);
		free(p->description);
		free(p);
		return -FI_ENOMEM;
	}

	pthread_mutex_lock(&lock);
	if (find(provider, param_name)) {
		pthread_mutex_unlock(&lock);
		free(p->name);
		free(p->env);
		free(p->description);
		free(p);
		return -FI_EALREADY;
	}
	/* Keep definition order: fi_info -e lists them as defined. */
	struct lm_param **tail = &dyn_head;
	while (*tail)
		tail = &(*tail)->next;
	*tail = p;
	pthread_mutex_unlock(&lock);
	return 0;
}

static int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"1", "on", "true", "yes", "y"};
	static const char *const no[] = {"0", "off", "false", "no", "n"};

	for (size_t i = 0; i < LM_ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -FI_EINVAL;
}

/* A value that is not of its parameter's type: the caller keeps its
 * default, and says so when logging is on.  (Not for the core's own
 * parameters: the log reads those while it starts.) */
static int bad_value(const struct fi_provider *prov, const char *env, const char *str,
		     const char *what)
{
	if (prov && !is_core(prov))
		LM_WARN(prov, FI_LOG_CORE, "%s=\"%.64s\" is not %s: the default is used\n",
			env, str, what);
	return -FI_EINVAL;
}

LM_EXPORT int fi_param_get(struct fi_provider *provider, const char *param_name,
			   void *value)
{
	struct lm_param *p;
	enum fi_param_type type;
	const char *str;
	char *end;
	char env[256];

	if (!param_name || !value)
		return -FI_EINVAL;
	pthread_mutex_lock(&lock);
	p = find(provider, param_name);
	if (p) {
		type = p->type;
		snprintf(env, sizeof(env), "%s", p->env);
	}
	pthread_mutex_unlock(&lock);
	if (!p)
		return -FI_ENOENT;

	str = getenv(env);
	if (!str)
		return -FI_ENODATA;

	switch (type) {
	case FI_PARAM_STRING:
		*(char **)value = (char *)str;
		return 0;
	case FI_PARAM_INT: {
		long v;

		errno = 0;
		v = strtol(str, &end, 0);
		if (end == str || *end || errno || v < INT_MIN || v > INT_MAX)
			return bad_value(provider, env, str, "an int");
		*(int *)value = (int)v;
		return 0;
	}
	case FI_PARAM_BOOL:
		return parse_bool(str, (int *)value)
		           ? bad_value(provider, env, str, "a boolean (1/0, yes/no, ...)")
		           : 0;
	case FI_PARAM_SIZE_T: {
		unsigned long long v;

		errno = 0;
		v = *str == '-' ? 0 : strtoull(str, &end, 0);
		if (*str == '-' || end == str || *end || errno || v > SIZE_MAX)
			return bad_value(provider, env, str, "a size");
		*(size_t *)value = (size_t)v;
		return 0;
	}
	}
	return -FI_EINVAL;
}

static int fill(struct fi_param *out, const struct lm_param *p)
{
	const char *v = getenv(p->env);

	out->name = strdup(p->env);
	out->type = p->type;
	out->help_string = strdup(p->description ? p->description : p->help);
	out->value = v ? strdup(v) : NULL;
	return out->name && out->help_string && (!v || out->value) ? 0 : -FI_ENOMEM;
}

LM_EXPORT void fi_freeparams(struct fi_param *params)
{
	if (!params)
		return;
	for (struct fi_param *p = params; p->name; p++) {
		free((void *)p->name);
		free((void *)p->help_string);
		free((void *)p->value);
	}
	free(params);
}

LM_EXPORT int fi_getparams(struct fi_param **params, int *count)
{
	struct fi_param *arr;
	size_t n = LM_ARRAY_SIZE(core_params), i = 0;
	int ret = 0;

	if (!params || !count)
		return -FI_EINVAL;
	lm_init(); /* providers define their parameters when they load */

	pthread_mutex_lock(&lock);
	for (struct lm_param *p = dyn_head; p; p = p->next)
		n++;
	/* One zeroed entry more ends the array for fi_freeparams. */
	arr = calloc(n + 1, sizeof(*arr));
	if (!arr) {
		pthread_mutex_unlock(&lock);
		return -FI_ENOMEM;
	}
	for (size_t c = 0; c < LM_ARRAY_SIZE(core_params) && !ret; c++)
		ret = fill(&arr[i++], &core_params[c]);
	for (struct lm_param *p = dyn_head; p && !ret; p = p->next)
		ret = fill(&arr[i++], p);
	pthread_mutex_unlock(&lock);
	if (ret) {
		/* The failed entry may be half filled: free it by hand. */
		for (size_t k = 0; k < i; k++)
			if (!arr[k].name) {
				free((void *)arr[k].help_string);
				free((void *)arr[k].value);
			}
		fi_freeparams(arr);
		return ret;
	}
	*params = arr;
	*count = (int)n;
	return 0;
}

void lm_param_reset(void)
{
	pthread_mutex_lock(&lock);
	while (dyn_head) {
		struct lm_param *p = dyn_head;

		dyn_head = p->next;
		free(p->name);
		free(p->env);
		free(p->description);
		free(p);
	}
	pthread_mutex_unlock(&lock);
}

void lm_param_int_range(struct fi_provider *prov, const char *name, int lo, int hi,
                        int *out)
{
	char *env;
	int v;

	if (fi_param_get_int(prov, name, &v))
		return;
	if (v >= lo && v <= hi) {
		*out = v;
		return;
	}
	env = env_name(prov, name);
	LM_WARN(prov, FI_LOG_CORE, "%s=%d is outside [%d, %d]: the default is used\n",
	        env ? env : name, v, lo, hi);
	free(env);
}
