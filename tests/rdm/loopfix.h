/* loopfix.h - what the RDM loop tests stand on: the rdmloop provider's
 * fabric and domain with one AV table, and a CQ read that progresses the
 * test's endpoints while it waits.  Header-only, like check.h, so its
 * checks count in the test program that includes it. */
#ifndef LOOM_TEST_LOOPFIX_H
#define LOOM_TEST_LOOPFIX_H

#include <string.h>

#include "check.h"
#include "looprov.h"
#include "loop_link.h"

static struct loopfix {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	void (*pump)(void); /* progresses the test's endpoints */
} fx;

/* Open fx over rdmloop (FI_THREAD_SAFE, every cap) with an AV table;
 * false, after a failed check, when the provider gives no info. */
static inline bool loopfix_open(void (*pump)(void))
{
	struct fi_av_attr ava = {.type = FI_AV_TABLE};

	fx.pump = pump;
	fx.info = looprov_info(FI_THREAD_SAFE, 0);
	CHECK(fx.info != NULL);
	if (!fx.info)
		return false;
	CHECK_INT(fi_fabric(fx.info->fabric_attr, &fx.fabric, NULL), 0);
	CHECK_INT(fi_domain(fx.fabric, fx.info, &fx.domain, NULL), 0);
	CHECK_INT(fi_av_open(fx.domain, &ava, &fx.av, NULL), 0);
	return true;
}

/* Close what loopfix_open opened; the test's endpoints are closed first. */
static inline void loopfix_close(void)
{
	CHECK_INT(fi_close(&fx.av->fid), 0);
	CHECK_INT(fi_close(&fx.domain->fid), 0);
	CHECK_INT(fi_close(&fx.fabric->fid), 0);
	fi_freeinfo(fx.info);
}

/* Read one entry from cq, progressing while none is there: 1, or
 * -FI_EAVAIL with *err filled, or -FI_ETIMEDOUT when nothing came. */
static inline ssize_t cq_get(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
                             fi_addr_t *src, struct fi_cq_err_entry *err)
{
	for (int i = 0; i < 200000; i++) {
		ssize_t r = fi_cq_readfrom(cq, e, 1, src);

		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			fi_cq_readerr(cq, err, 0);
			return -FI_EAVAIL;
		}
		fx.pump();
	}
	return -FI_ETIMEDOUT;
}

#endif
