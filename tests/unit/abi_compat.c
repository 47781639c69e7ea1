/* abi_compat.c - every versioned fi_getinfo/fi_dupinfo/fi_freeinfo (FABRIC_1.0
 * to 1.8, and the default 1.9) serves binaries built against the headers of
 * its version: structures of its (shorter) layouts, each allocated at exactly
 * its size so AddressSanitizer catches any read past them, go in; usable
 * answers come out, carrying none of the fields its layout lacks.  Then
 * fi_fabric@FABRIC_1.0 and fi_fabric2@FABRIC_1.8.
 * usage: abi_compat <path to libfabric.so.1> <dir holding libloomtest-fi.so> */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "check.h"

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const void *,
			  struct fi_info **);
typedef struct fi_info *(*dupinfo_fn)(const void *);
typedef void (*freeinfo_fn)(struct fi_info *);
typedef int (*fabric_fn)(const void *, struct fid_fabric **, void *);
typedef int (*fabric2_fn)(struct fi_info *, struct fid_fabric **, uint64_t, void *);

/* Old layouts are prefixes of the current ones; these are their sizes. */
struct old_abi {
	const char *ver;
	size_t info, tx, ep, domain;
};

#define DOM_END(field) offsetof(struct fi_domain_attr, field)

static const struct old_abi abis[] = {
	{"FABRIC_1.0", offsetof(struct fi_info, nic), offsetof(struct fi_tx_attr, tclass),
	 offsetof(struct fi_ep_attr, auth_key_size), DOM_END(cntr_cnt)},
	{"FABRIC_1.1", offsetof(struct fi_info, nic), offsetof(struct fi_tx_attr, tclass),
	 sizeof(struct fi_ep_attr), DOM_END(tclass)},
	{"FABRIC_1.2", sizeof(struct fi_info), offsetof(struct fi_tx_attr, tclass),
	 sizeof(struct fi_ep_attr), DOM_END(tclass)},
	{"FABRIC_1.3", sizeof(struct fi_info), sizeof(struct fi_tx_attr),
	 sizeof(struct fi_ep_attr), DOM_END(max_ep_auth_key)},
	{"FABRIC_1.7", sizeof(struct fi_info), sizeof(struct fi_tx_attr),
	 sizeof(struct fi_ep_attr), DOM_END(max_group_id)},
	{"FABRIC_1.8", sizeof(struct fi_info), sizeof(struct fi_tx_attr),
	 sizeof(struct fi_ep_attr), DOM_END(max_cntr_value)},
	{"FABRIC_1.9", sizeof(struct fi_info), sizeof(struct fi_tx_attr),
	 sizeof(struct fi_ep_attr), sizeof(struct fi_domain_attr)},
};

static void *sym(void *dl, const char *name, const char *ver)
{
	void *p = dlvsym(dl, name, ver);

	if (!p)
		fprintf(stderr, "missing %s@%s\n", name, ver);
	CHECK(p != NULL);
	return p;
}

/* Does the layout of abi hold the whole field at off, size len? */
static int has(size_t end, size_t off, size_t len)
{
	return off + len <= end;
}

#define DOM_HAS(abi, field)                                                              \
	has((abi)->domain, offsetof(struct fi_domain_attr, field),                       \
	    sizeof(((struct fi_domain_attr *)0)->field))

/* An answer handed to a binary of version abi: the fields of its layout
 * hold what the test provider (or the input) put there, the later ones 0.
 * tclass, max_ep_auth_key ... are 7, 3, 5, 1000 and 100 in both. */
static void check_tail(const struct old_abi *abi, const struct fi_info *info, int from_1_1)
{
	const struct fi_domain_attr *d = info->domain_attr;
	int tx_tclass = has(abi->tx, offsetof(struct fi_tx_attr, tclass), sizeof(uint32_t));

	CHECK_INT(info->tx_attr->tclass, tx_tclass ? FI_TC_BULK_DATA : 0);
	/* The 1.0 layout ends before tclass; what it lacks from cntr_cnt to
	 * mr_cnt is not the point here. */
	if (from_1_1 || DOM_HAS(abi, tclass))
		CHECK_INT(d->tclass, DOM_HAS(abi, tclass) ? FI_TC_LOW_LATENCY : 0);
	CHECK_INT(d->max_ep_auth_key, DOM_HAS(abi, max_ep_auth_key) ? 3 : 0);
	CHECK_INT(d->max_group_id, DOM_HAS(abi, max_group_id) ? 5 : 0);
	CHECK_INT(d->max_cntr_value, DOM_HAS(abi, max_cntr_value) ? 1000 : 0);
	CHECK_INT(d->max_err_cntr_value, DOM_HAS(abi, max_err_cntr_value) ? 100 : 0);
}

#define SET_IF_HAS(abi, dom, field, val)                                                 \
	do {                                                                             \
		if (DOM_HAS(abi, field))                                                 \
			(dom)->field = (val);                                            \
	} while (0)

static void check_abi(void *dl, const struct old_abi *abi)
{
	getinfo_fn getinfo = (getinfo_fn)sym(dl, "fi_getinfo", abi->ver);
	dupinfo_fn dupinfo = (dupinfo_fn)sym(dl, "fi_dupinfo", abi->ver);
	freeinfo_fn freeinfo = (freeinfo_fn)sym(dl, "fi_freeinfo", abi->ver);
	struct fi_info *old, *dup, *res = NULL;
	struct fi_tx_attr *tx;
	struct fi_ep_attr *ep;
	struct fi_domain_attr *dom;
	int ret;

	if (!getinfo || !dupinfo || !freeinfo)
		return;
	fprintf(stderr, "checking %s\n", abi->ver);
	old = calloc(1, abi->info);
	tx = calloc(1, abi->tx);
	ep = calloc(1, abi->ep);
	dom = calloc(1, abi->domain);
	old->tx_attr = tx;
	old->ep_attr = ep;
	old->domain_attr = dom;
	old->caps = FI_MSG;
	tx->size = 9;
	if (has(abi->tx, offsetof(struct fi_tx_attr, tclass), sizeof(uint32_t)))
		tx->tclass = FI_TC_BULK_DATA;
	ep->type = FI_EP_RDM;
	dom->name = "loomtest0";
	SET_IF_HAS(abi, dom, tclass, FI_TC_LOW_LATENCY);
	SET_IF_HAS(abi, dom, max_ep_auth_key, 3);
	SET_IF_HAS(abi, dom, max_group_id, 5);
	SET_IF_HAS(abi, dom, max_cntr_value, 1000);
	SET_IF_HAS(abi, dom, max_err_cntr_value, 100);

	dup = dupinfo(old);
	CHECK(dup != NULL);
	if (dup) {
		CHECK_HEX(dup->caps, FI_MSG);
		CHECK_INT(dup->tx_attr->size, 9);
		CHECK_INT(dup->ep_attr->type, FI_EP_RDM);
		CHECK_STR(dup->domain_attr->name, "loomtest0");
		CHECK(dup->domain_attr->name != dom->name);
		CHECK(dup->rx_attr == NULL);
		check_tail(abi, dup, 1);
		freeinfo(dup);
	}
	dup = dupinfo(NULL);
	CHECK(dup && dup->tx_attr && dup->domain_attr && dup->fabric_attr);
	if (dup)
		CHECK_INT(dup->domain_attr->max_cntr_value, 0);
	freeinfo(dup);

	/* Hints of the old layout: the test provider's answer, trimmed. */
	SET_IF_HAS(abi, dom, max_ep_auth_key, 0);
	SET_IF_HAS(abi, dom, max_group_id, 0);
	SET_IF_HAS(abi, dom, max_cntr_value, 0);
	SET_IF_HAS(abi, dom, max_err_cntr_value, 0);
	ret = getinfo(FI_VERSION(1, 0), NULL, NULL, 0, old, &res);
	CHECK_INT(ret, 0);
	if (!ret) {
		CHECK(res != NULL);
		CHECK_STR(res->fabric_attr->prov_name, "loomtest");
		CHECK_INT(res->ep_attr->type, FI_EP_RDM);
		check_tail(abi, res, 0);
		freeinfo(res);
	}
	ep->type = FI_EP_MSG; /* the test provider has no MSG endpoints */
	res = NULL;
	CHECK_INT(getinfo(FI_VERSION(1, 0), NULL, NULL, 0, old, &res), -FI_ENODATA);
	CHECK(res == NULL);

	free(dom);
	free(ep);
	free(tx);
	free(old);
}

/* fi_fabric2@FABRIC_1.8: the fabric an fi_getinfo answer names. */
static void check_fabric2(void *dl)
{
	fabric2_fn fabric2 = (fabric2_fn)sym(dl, "fi_fabric2", "FABRIC_1.8");
	getinfo_fn getinfo = (getinfo_fn)sym(dl, "fi_getinfo", "FABRIC_1.9");
	freeinfo_fn freeinfo = (freeinfo_fn)sym(dl, "fi_freeinfo", "FABRIC_1.9");
	struct fid_fabric *fab = (struct fid_fabric *)&fab;
	struct fi_fabric_attr *attr;
	struct fi_info *info = NULL;
	char *name;

	if (!fabric2 || !getinfo || !freeinfo)
		return;
	CHECK_INT(getinfo(FI_VERSION(2, 0), NULL, NULL, 0, NULL, &info), 0);
	if (!info)
		return;
	/* The test provider refuses to open fabrics: reaching it is the
	 * point. */
	CHECK_INT(fabric2(info, &fab, 0, NULL), -FI_ENOSYS);
	CHECK_INT(fabric2(NULL, &fab, 0, NULL), -FI_EINVAL);
	CHECK_INT(fabric2(info, NULL, 0, NULL), -FI_EINVAL);
	CHECK_INT(fabric2(info, &fab, 1, NULL), -FI_EINVAL);
	CHECK(fab == (struct fid_fabric *)&fab);
	name = info->fabric_attr->prov_name;
	info->fabric_attr->prov_name = "nosuchprov";
	CHECK_INT(fabric2(info, &fab, 0, NULL), -FI_ENODEV);
	info->fabric_attr->prov_name = NULL;
	CHECK_INT(fabric2(info, &fab, 0, NULL), -FI_EINVAL);
	info->fabric_attr->prov_name = name;
	attr = info->fabric_attr;
	info->fabric_attr = NULL;
	CHECK_INT(fabric2(info, &fab, 0, NULL), -FI_EINVAL);
	info->fabric_attr = attr;
	freeinfo(info);
}

int main(int argc, char **argv)
{
	void *dl;
	fabric_fn fabric10;
	char *attr10;
	struct fid_fabric *fab = NULL;

	if (argc != 3) {
		fprintf(stderr, "usage: %s <libfabric.so.1> <provider dir>\n", argv[0]);
		return 2;
	}
	setenv("FI_PROVIDER_PATH", argv[2], 1);
	setenv("FI_PROVIDER", "loomtest", 1);
	dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(abis) / sizeof(abis[0]); i++)
		check_abi(dl, &abis[i]);

	/* fi_fabric@FABRIC_1.0 takes an attr without api_version. */
	fabric10 = (fabric_fn)sym(dl, "fi_fabric", "FABRIC_1.0");
	attr10 = calloc(1, offsetof(struct fi_fabric_attr, api_version));
	{
		const char *name = "loomtest";

		memcpy(attr10 + offsetof(struct fi_fabric_attr, name), &name, sizeof(name));
		memcpy(attr10 + offsetof(struct fi_fabric_attr, prov_name), &name,
		       sizeof(name));
	}
	if (fabric10) {
		CHECK_INT(fabric10(attr10, &fab, NULL), -FI_ENOSYS);
		CHECK_INT(fabric10(NULL, &fab, NULL), -FI_EINVAL);
	}
	free(attr10);
	check_fabric2(dl);

	/* The defaults, what a new link binds to: the newest of each. */
	CHECK(dlsym(dl, "fi_getinfo") == sym(dl, "fi_getinfo", "FABRIC_1.9"));
	CHECK(dlsym(dl, "fi_dupinfo") == sym(dl, "fi_dupinfo", "FABRIC_1.9"));
	CHECK(dlsym(dl, "fi_freeinfo") == sym(dl, "fi_freeinfo", "FABRIC_1.9"));
	CHECK(dlsym(dl, "fi_fabric") == sym(dl, "fi_fabric", "FABRIC_1.1"));
	CHECK(dlsym(dl, "fi_fabric2") == sym(dl, "fi_fabric2", "FABRIC_1.8"));
	dlclose(dl);
	return check_done();
}
