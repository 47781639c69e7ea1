/* sep_ports.c - the ports of a scalable endpoint's lanes, public API only:
 * context pair i of a tcp scalable endpoint listens at the endpoint's
 * port + i, and they are free again once it closes.  Where one of those
 * ports is taken, an endpoint whose port the provider picked moves to
 * free ones; one whose port the application named fails with
 * -FI_EADDRINUSE; fi_setname moves them all.  The ports come from a
 * range (FI_TCP_PORT_LOW_RANGE) of ports free when the test starts, below
 * the kernel's ephemeral ports (where other tests' connections and
 * port-0 binds land, and would take ports this test expects free), so
 * that a taken one can be placed where the endpoint will look. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "check.h"

#define NCTX  4
#define RANGE 64

/* A socket bound to 127.0.0.1:port (0: any), or -1. */
static int hold(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int s = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a))) {
		close(s);
		return -1;
	}
	return s;
}

/* Is 127.0.0.1:port bound by someone? */
static bool taken(int port)
{
	int s = hold(port);

	if (s < 0)
		return true;
	close(s);
	return false;
}

/* The first port of RANGE free ones below the ephemeral ports, or -1. */
static int free_window(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int eph = 32768, span;

	if (f) {
		if (fscanf(f, "%d", &eph) != 1)
			eph = 32768;
		fclose(f);
	}
	span = eph - 10000 - RANGE;
	for (int t = 0; span > 0 && t < 100; t++) {
		int low = 10000 + (int)(((unsigned)getpid() * 7919u + (unsigned)t * 104729u) %
		                        (unsigned)span);
		bool ok = true;

		for (int i = 0; i < RANGE && ok; i++)
			ok = !taken(low + i);
		if (ok)
			return low;
	}
	return -1;
}

/* A scalable endpoint of NCTX context pairs at 127.0.0.1:port (0: any),
 * or the error. */
static int open_sep(struct fid_domain *dom, struct fi_info *info, int port,
                    struct fid_ep **sep)
{
	struct sockaddr_in *src = info->src_addr;

	src->sin_port = htons((uint16_t)port);
	info->ep_attr->tx_ctx_cnt = NCTX;
	info->ep_attr->rx_ctx_cnt = NCTX;
	return fi_scalable_ep(dom, info, sep, NULL);
}

static int sep_port(struct fid_ep *sep)
{
	struct sockaddr_in a;
	size_t len = sizeof(a);

	CHECK_INT(fi_getname(&sep->fid, &a, &len), 0);
	return ntohs(a.sin_port);
}

/* Open sep at port, or leave the test (nothing more can be asked of it). */
#define OPEN_OR_OUT(port)                                                                \
	do {                                                                             \
		int r_ = open_sep(dom, info, (port), &sep);                              \
		CHECK_INT(r_, 0);                                                        \
		if (r_)                                                                  \
			goto out;                                                        \
	} while (0)

int main(void)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_ep *sep = NULL;
	char v[16];
	int low, blocker = -1, p;

	low = free_window();
	CHECK(low > 0);
	if (low <= 0)
		return check_done();
	snprintf(v, sizeof(v), "%d", low);
	setenv("FI_TCP_PORT_LOW_RANGE", v, 1);
	snprintf(v, sizeof(v), "%d", low + RANGE - 1);
	setenv("FI_TCP_PORT_HIGH_RANGE", v, 1);
	setenv("FI_PROVIDER", "tcp", 1);

	h->ep_attr->type = FI_EP_RDM;
	h->addr_format = FI_SOCKADDR_IN;
	h->caps = FI_MSG | FI_NAMED_RX_CTX;
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, h, &info), 0);
	fi_freeinfo(h);
	if (!info)
		return check_done();
	CHECK(info->domain_attr->max_ep_tx_ctx >= NCTX);
	CHECK_INT(info->src_addrlen, sizeof(struct sockaddr_in));
	CHECK_INT(fi_fabric(info->fabric_attr, &fab, NULL), 0);
	CHECK_INT(fi_domain(fab, info, &dom, NULL), 0);

	/* Its lanes at the ports after its own, free again after close. */
	OPEN_OR_OUT(0);
	p = sep_port(sep);
	CHECK(p >= low && p + NCTX - 1 < low + RANGE);
	for (int i = 0; i < NCTX; i++)
		CHECK(taken(p + i));
	CHECK_INT(fi_close(&sep->fid), 0);
	for (int i = 0; i < NCTX; i++)
		CHECK(!taken(p + i));

	/* The range's second port taken: the first would leave lane 1
	 * nowhere, so the endpoint moves past it. */
	blocker = hold(low + 1);
	CHECK(blocker >= 0);
	OPEN_OR_OUT(0);
	p = sep_port(sep);
	CHECK(p > low + 1);
	for (int i = 0; i < NCTX; i++)
		CHECK(taken(p + i));
	CHECK_INT(fi_close(&sep->fid), 0);

	/* A port the application named, with its lane 2's port taken:
	 * refused, and nothing left bound. */
	p = low + 8;
	close(blocker);
	blocker = hold(p + 2);
	CHECK(blocker >= 0);
	CHECK_INT(open_sep(dom, info, p, &sep), -FI_EADDRINUSE);
	CHECK(!taken(p) && !taken(p + 1) && !taken(p + 3));
	close(blocker);
	blocker = -1;
	/* Free: it opens there. */
	OPEN_OR_OUT(p);
	CHECK_INT(sep_port(sep), p);
	/* fi_setname moves every lane, and frees the old ports. */
	{
		struct sockaddr_in a = *(struct sockaddr_in *)info->src_addr;

		a.sin_port = htons((uint16_t)(low + 20));
		CHECK_INT(fi_setname(&sep->fid, &a, sizeof(a)), 0);
		CHECK_INT(sep_port(sep), low + 20);
		for (int i = 0; i < NCTX; i++)
			CHECK(taken(low + 20 + i) && !taken(p + i));
	}
	CHECK_INT(fi_close(&sep->fid), 0);
out:
	if (blocker >= 0)
		close(blocker);
	CHECK_INT(fi_close(&dom->fid), 0);
	CHECK_INT(fi_close(&fab->fid), 0);
	fi_freeinfo(info);
	return check_done();
}
