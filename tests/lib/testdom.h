/* testdom.h - a minimal internal test provider, "utiltest", whose fabric and
 * domain are util's bases with the ops tables a test chooses, so util
 * objects are opened through the public calls (fi_getinfo, fi_fabric,
 * fi_domain, fi_cq_open, ...) before any real provider exists; and the
 * pieces every in-process test provider (also looprov.h's) is built from. */
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

/* A test program's start: arm alarm(seconds), so that a lost wake-up fails
 * the test instead of hanging it, and open *t as a FI_THREAD_SAFE domain
 * with the default tables; non-zero (and said on stderr) when it cannot. */
int testdom_start(struct testdom *t, unsigned seconds);

/* Run fn with *t swapped for a fresh domain of the given threading model,
 * then close that one and give *t back as it was.  Returns testdom_open's
 * result (fn does not run when it fails). */
int testdom_run_on(struct testdom *t, enum fi_threading threading, void (*fn)(void));

/* ---- the test provider kit ---------------------------------------------- */

/* The one MR mode the test providers offer (and ask for in their hints). */
#define TESTPROV_MR_MODE (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED)

/* The domain attributes the test providers share, to open a designated
 * initializer; each adds its name and its MR limits. */
#define TESTPROV_DOMAIN_ATTR                                                             \
	.threading = FI_THREAD_SAFE, .control_progress = FI_PROGRESS_MANUAL,             \
	.data_progress = FI_PROGRESS_MANUAL, .resource_mgmt = FI_RM_ENABLED,             \
	.mr_mode = TESTPROV_MR_MODE, .mr_key_size = 8, .cq_data_size = 8, .cq_cnt = 64,  \
	.ep_cnt = 64, .cntr_cnt = 64, .max_err_data = 256

/* A test provider's fi_info template over its own attribute blocks. */
#define TESTPROV_INFO(caps_, tx_, rx_, ep_, dom_, fab_)                                  \
	{                                                                                \
		.caps = (caps_), .addr_format = FI_ADDR_STR, .tx_attr = (tx_),           \
		.rx_attr = (rx_), .ep_attr = (ep_), .domain_attr = (dom_),               \
		.fabric_attr = (fab_),                                                   \
	}

/* Register prov (once, by name) and ask fi_getinfo for an RDM endpoint of
 * it with the given threading model, caps (0: what it offers) and
 * TESTPROV_MR_MODE.  Returns fi_getinfo's result. */
int testprov_getinfo(struct fi_provider *prov, enum fi_threading threading, uint64_t caps,
		     struct fi_info **info);

#endif
