/* log.c - fi_log and friends.  Silent unless FI_LOG_LEVEL is set; the
 * filters (level, provider list, subsystem list) are read once. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

static const char *const level_names[] = {
	[FI_LOG_WARN] = "warn",
	[FI_LOG_TRACE] = "trace",
	[FI_LOG_INFO] = "info",
	[FI_LOG_DEBUG] = "debug",
};

static const char *const subsys_names[] = {
	[FI_LOG_CORE] = "core",	      [FI_LOG_FABRIC] = "fabric", [FI_LOG_DOMAIN] = "domain",
	[FI_LOG_EP_CTRL] = "ep_ctrl", [FI_LOG_EP_DATA] = "ep_data", [FI_LOG_AV] = "av",
	[FI_LOG_CQ] = "cq",	      [FI_LOG_EQ] = "eq",	  [FI_LOG_MR] = "mr",
	[FI_LOG_CNTR] = "cntr",
};

/* -1 disables everything: the default. */
static int max_level = -1;
static uint64_t subsys_mask = ~0ULL;
static char *prov_filter;
static int interval_ms = 2000;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
	char *s = NULL;

	fi_param_get_str(&lm_core_prov, "log_level", &s);
	if (s) {
		for (size_t i = 0; i < LM_ARRAY_SIZE(level_names); i++)
			if (!strcasecmp(s, level_names[i]))
				max_level = (int)i;
		if (max_level < 0 && s[0] >= '0' && s[0] <= '9')
			max_level = LM_MIN(atoi(s), FI_LOG_DEBUG);
	}
	s = NULL;
	fi_param_get_str(&lm_core_prov, "log_subsys", &s);
	if (s && *s) {
		subsys_mask = 0;
		for (size_t i = 0; i < LM_ARRAY_SIZE(subsys_names); i++)
			if (lm_name_selected(s, subsys_names[i]))
				subsys_mask |= 1ULL << i;
	}
	s = NULL;
	fi_param_get_str(&lm_core_prov, "log_prov", &s);
	if (s && *s)
		prov_filter = s;
	fi_param_get_int(&lm_core_prov, "log_interval", &interval_ms);
}

void lm_log_init(void)
{
	pthread_once(&once, read_env);
}

LM_EXPORT int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
			     enum fi_log_subsys subsys)
{
	lm_log_init();
	if ((int)level > max_level || (unsigned)subsys >= 64)
		return 0;
	if (!(subsys_mask & (1ULL << subsys)))
		return 0;
	if (prov_filter && prov && prov->name && !lm_name_selected(prov_filter, prov->name))
		return 0;
	return 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Rate-limited logging: enabled at most once per interval per caller's
 * timestamp. */
LM_EXPORT int fi_log_ready(const struct fi_provider *prov, enum fi_log_level level,
			   enum fi_log_subsys subsys, uint64_t *showtime)
{
	uint64_t now;

	if (!fi_log_enabled(prov, level, subsys))
		return 0;
	now = now_ms();
	if (showtime && now < *showtime)
		return 0;
	if (showtime)
		*showtime = now + (uint64_t)(interval_ms > 0 ? interval_ms : 0);
	return 1;
}

LM_EXPORT void fi_log(const struct fi_provider *prov, enum fi_log_level level,
		      enum fi_log_subsys subsys, const char *func, int line,
		      const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	n = snprintf(msg, sizeof(msg), "libfabric:%d:%lu:%s:%s:%s():%d<%s> ", (int)getpid(),
		     (unsigned long)time(NULL), prov && prov->name ? prov->name : "core",
		     (unsigned)subsys < LM_ARRAY_SIZE(subsys_names) ? subsys_names[subsys]
								   : "?",
		     func ? func : "?", line,
		     (unsigned)level < LM_ARRAY_SIZE(level_names) ? level_names[level] : "?");
	if (n < 0)
		return;
	if ((size_t)n < sizeof(msg) && fmt) {
		va_start(ap, fmt);
		vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	fputs(msg, stderr);
}
