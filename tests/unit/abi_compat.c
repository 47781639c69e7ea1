/* abi_compat.c - the FABRIC_1.0/1.1/1.2 entry points serve binaries built
 * against older headers: structures of the old (shorter) layouts, each
 * allocated at exactly its old size so AddressSanitizer catches any read
 * past them, go in; usable answers come out.
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

/* Old layouts are prefixes of the current ones; these are their sizes. */
struct old_abi {
	const char *ver;
	size_t info, tx, ep, domain;
};

static const struct old_abi abis[] = {
	{"FABRIC_1.0", offsetof(struct fi_info, nic), offsetof(struct fi_tx_attr, tclass),
	 offsetof(struct fi_ep_attr, auth_key_size),
	 offsetof(struct fi_domain_attr, cntr_cnt)},
	{"FABRIC_1.1", offsetof(struct fi_info, nic), sizeof(struct fi_tx_attr),
	 sizeof(struct fi_ep_attr), sizeof(struct fi_domain_attr)},
	{"FABRIC_1.2", sizeof(struct fi_info), sizeof(struct fi_tx_attr),
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
	ep->type = FI_EP_RDM;
	dom->name = "loomtest0";

	dup = dupinfo(old);
	CHECK(dup != NULL);
	if (dup) {
		CHECK_HEX(dup->caps, FI_MSG);
		CHECK_INT(dup->tx_attr->size, 9);
		CHECK_INT(dup->ep_attr->type, FI_EP_RDM);
		CHECK_STR(dup->domain_attr->name, "loomtest0");
		CHECK(dup->domain_attr->name != dom->name);
		CHECK(dup->rx_attr == NULL);
		freeinfo(dup);
	}
	dup = dupinfo(NULL);
	CHECK(dup && dup->tx_attr && dup->domain_attr && dup->fabric_attr);
	freeinfo(dup);

	ret = getinfo(FI_VERSION(1, 0), NULL, NULL, 0, old, &res);
	CHECK_INT(ret, 0);
	if (!ret) {
		CHECK(res != NULL);
		CHECK_STR(res->fabric_attr->prov_name, "loomtest");
		CHECK_INT(res->ep_attr->type, FI_EP_RDM);
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
		/* The test provider refuses to open fabrics: reaching it is the
		 * point. */
		CHECK_INT(fabric10(attr10, &fab, NULL), -FI_ENOSYS);
		CHECK_INT(fabric10(NULL, &fab, NULL), -FI_EINVAL);
	}
	free(attr10);
	CHECK(sym(dl, "fi_getinfo", "FABRIC_1.3") != NULL);
	CHECK(sym(dl, "fi_fabric", "FABRIC_1.1") != NULL);
	dlclose(dl);
	return check_done();
}
