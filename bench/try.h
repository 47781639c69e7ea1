/* try.h - what the small benchmarks (ep_memory, conn_memory, many_peers,
 * ctx_threads, overlap) share: how they leave on a failed call (the call,
 * its value and its meaning on stderr after the program's name, and 1
 * returned from the function; each program's TRY(call) passes #call as
 * text, as it was written, not macro-expanded), and room for the
 * descriptors of many endpoints. */
#ifndef LOOM_BENCH_TRY_H
#define LOOM_BENCH_TRY_H

#include <stdio.h>
#include <sys/resource.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#define BENCH_TRY(prog, text, call)                                                      \
	do {                                                                             \
		int r_ = (int)(call);                                                    \
		if (r_) {                                                                \
			fprintf(stderr, "%s: %s = %d (%s)\n", prog, text, r_,            \
			        fi_strerror(-r_));                                       \
			return 1;                                                        \
		}                                                                        \
	} while (0)

/* Provider prov's first FI_MSG RDM info, a fabric and domain for it and
 * a table AV: 0, or the failed call's value (a negative fi_errno). */
static inline int bench_rdm_domain(const char *prov, struct fi_info **info,
                                   struct fid_domain **dom, struct fid_av **av)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	struct fid_fabric *fab;
	int ret;

	if (!h)
		return -FI_ENOMEM;
	h->fabric_attr->prov_name = strdup(prov);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, info);
	fi_freeinfo(h);
	if (!ret)
		ret = fi_fabric((*info)->fabric_attr, &fab, NULL);
	if (!ret)
		ret = fi_domain(fab, *info, dom, NULL);
	if (!ret)
		ret = fi_av_open(*dom, &aa, av, NULL);
	return ret;
}

/* At least want open descriptors if the hard limit allows (else as many
 * as it does). */
static inline void bench_nofile(rlim_t want)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

#endif
