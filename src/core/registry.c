/* registry.c - the list of providers fi_getinfo consults: built-in ones in
 * order of preference, then external ones loaded from FI_PROVIDER_PATH. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

struct fi_provider lm_core_prov = {
	.version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = "core",
};

/* A small fixed table keeps the registry allocation-free and ordered;
 * loom ships three providers, and external ones are rare. */
#define LM_MAX_PROVS 64

struct lm_prov_slot {
	struct fi_provider *prov;
	void *dl; /* dlopen handle for external providers */
};

static struct lm_prov_slot provs[LM_MAX_PROVS];
static size_t nprovs;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int register_slot(struct fi_provider *prov, void *dl)
{
	int ret = 0;

	if (!prov || !prov->name || !prov->getinfo || !prov->fabric)
		return -FI_EINVAL;
	if (FI_MAJOR(prov->fi_version) < 1 || FI_MAJOR(prov->fi_version) > 2) {
		LM_WARN(&lm_core_prov, FI_LOG_CORE,
			"provider %s: unsupported API version %u.%u\n", prov->name,
			FI_MAJOR(prov->fi_version), FI_MINOR(prov->fi_version));
		return -FI_ENOSYS;
	}

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < nprovs; i++) {
		if (!strcasecmp(provs[i].prov->name, prov->name)) {
			ret = -FI_EALREADY;
			goto out;
		}
	}
	if (nprovs == LM_MAX_PROVS) {
		ret = -FI_ENOSPC;
		goto out;
	}
	provs[nprovs].prov = prov;
	provs[nprovs].dl = dl;
	nprovs++;
out:
	pthread_mutex_unlock(&reg_lock);
	if (ret)
		LM_WARN(&lm_core_prov, FI_LOG_CORE, "provider %s not registered: %s\n",
			prov->name, fi_strerror(-ret));
	return ret;
}

int lm_prov_register(struct fi_provider *prov)
{
	return register_slot(prov, NULL);
}

void lm_prov_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	while (nprovs) {
		struct lm_prov_slot *s = &provs[--nprovs];

		if (s->prov->cleanup)
			s->prov->cleanup();
		if (s->dl)
			dlclose(s->dl);
		s->prov = NULL;
		s->dl = NULL;
	}
	pthread_mutex_unlock(&reg_lock);
}

struct fi_provider *lm_prov_next(struct fi_provider *prev)
{
	struct fi_provider *next = NULL;
	size_t i = 0;

	pthread_mutex_lock(&reg_lock);
	if (prev) {
		while (i < nprovs && provs[i].prov != prev)
			i++;
		i++;
	}
	if (i < nprovs)
		next = provs[i].prov;
	pthread_mutex_unlock(&reg_lock);
	return next;
}

struct fi_provider *lm_prov_find(const char *name)
{
	struct fi_provider *p;

	if (!name)
		return NULL;
	for (p = lm_prov_next(NULL); p; p = lm_prov_next(p))
		if (!strcasecmp(p->name, name))
			return p;
	return NULL;
}

bool lm_name_selected(const char *list, const char *name)
{
	bool exclude = false;
	const char *p, *end;
	size_t len = strlen(name);

	if (!list || !*list)
		return true;
	if (*list == '^') {
		exclude = true;
		list++;
	}
	for (p = list; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ',');
		if ((size_t)(end - p) == len && !strncasecmp(p, name, len))
			return !exclude;
	}
	return exclude;
}

/* External providers follow the libfabric convention: a shared object
 * named lib<name>-fi.so exporting fi_prov_ini(). */
static void load_dir(const char *dir)
{
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		const char *fn = ents[i]->d_name;
		size_t len = strlen(fn);
		char path[4096];
		struct fi_provider *(*ini)(void);
		struct fi_provider *prov;
		void *dl;

		if (len < 9 || strncmp(fn, "lib", 3) || strcmp(fn + len - 6, "-fi.so"))
			goto next;
		if (snprintf(path, sizeof(path), "%s/%s", dir, fn) >= (int)sizeof(path))
			goto next;
		dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!dl) {
			LM_WARN(&lm_core_prov, FI_LOG_CORE, "dlopen(%s): %s\n", path,
				dlerror());
			goto next;
		}
		*(void **)&ini = dlsym(dl, "fi_prov_ini");
		prov = ini ? ini() : NULL;
		if (!prov || register_slot(prov, dl)) {
			LM_WARN(&lm_core_prov, FI_LOG_CORE, "%s: no usable provider\n", path);
			if (prov && prov->cleanup)
				prov->cleanup();
			dlclose(dl);
		}
	next:
		free(ents[i]);
	}
	free(ents);
}

static void load_external(void)
{
	char *path = NULL, *save = NULL, *copy, *dir;

	fi_param_get_str(&lm_core_prov, "provider_path", &path);
	if (!path || !*path)
		return;
	copy = strdup(path[0] == '@' ? path + 1 : path);
	if (!copy)
		return;
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
		load_dir(dir);
	free(copy);
}

/* Built-in providers, fastest first.  Each is named only here, by its
 * init function (src/prov/<name>/). */
struct fi_provider *shm_prov_init(void);
struct fi_provider *tcp_prov_init(void);
struct fi_provider *udp_prov_init(void);

static struct fi_provider *(*const builtin[])(void) = {
	shm_prov_init,
	tcp_prov_init,
	udp_prov_init,
};

static void init_once_fn(void)
{
	for (size_t i = 0; i < LM_ARRAY_SIZE(builtin); i++) {
		struct fi_provider *p = builtin[i] ? builtin[i]() : NULL;

		if (p)
			lm_prov_register(p);
	}
	load_external();
}

void lm_init(void)
{
	pthread_once(&init_once, init_once_fn);
}
