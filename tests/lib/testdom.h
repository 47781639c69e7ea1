/* testdom.h - a minimal internal test provider, "utiltest", whose fabric and
 * domain are util's bases with the ops tables a test chooses, so util
 * objects are opened through the public calls (fi_getinfo, fi_fabric,
 * fi_domain, fi_cq_open, ...) before any real provider exists. */
#ifndef LOOM_TEST_TESTDOM_H
#define LOOM_TEST_TESTDOM_H

#include "util.h"

struct testdom {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

/* Open fabric and domain with the given threading model.  fops/dops are
 * the tables the fabric/domain get (the fabric's .domain entry is
 * replaced by the test provider's); NULL means lm_fabric_ops /
 * lm_domain_ops. */
int testdom_open(struct testdom *t, enum fi_threading threading,
		 const struct fi_ops_fabric *fops, const struct fi_ops_domain *dops);
void testdom_close(struct testdom *t);

#endif
