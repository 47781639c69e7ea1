/* port_range.c - FI_TCP_PORT_LOW_RANGE / FI_TCP_PORT_HIGH_RANGE, public
 * API only: a passive endpoint given no port, and an RDM endpoint's
 * listener, take the first free port of the range (its first port is held
 * here, so they take a later one); a port given explicitly is kept.  The
 * range starts at a port the kernel picked, so runs do not collide. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "check.h"

#define RANGE 64 /* ports in the range: room for a few taken by others */

static int low, high;

/* The tcp provider's (FI_PROVIDER, set by main) IPv4 loopback info. */
static struct fi_info *get_info(enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	int ret = -FI_ENOMEM;

	if (h) {
		h->ep_attr->type = type;
		h->addr_format = FI_SOCKADDR_IN;
		ret =
		    fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, h, &info);
	}
	fi_freeinfo(h);
	CHECK_INT(ret, 0);
	return ret ? NULL : info;
}

static int port_of(fid_t fid)
{
	struct sockaddr_in a;
	size_t len = sizeof(a);

	memset(&a, 0, sizeof(a));
	CHECK_INT(fi_getname(fid, &a, &len), 0);
	CHECK_INT(a.sin_family, AF_INET);
	return ntohs(a.sin_port);
}

/* A port in the range but not its first (held by main). */
#define CHECK_IN_RANGE(port)                                                             \
	do {                                                                             \
		int p_ = (port);                                                         \
		if (p_ <= low || p_ > high)                                              \
			fprintf(stderr, "port %d not in (%d, %d]\n", p_, low, high);     \
		CHECK(p_ > low && p_ <= high);                                           \
	} while (0)

static void passive(struct fid_fabric *fabric, struct fi_info *info)
{
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_pep *pep = NULL, *pep2 = NULL;
	struct fid_eq *eq = NULL;
	struct sockaddr_in a;
	int port, s;

	CHECK_INT(fi_eq_open(fabric, &eqa, &eq, NULL), 0);
	CHECK_INT(fi_passive_ep(fabric, info, &pep, NULL), 0);
	if (!eq || !pep)
		return;
	port = port_of(&pep->fid);
	CHECK_IN_RANGE(port);
	CHECK_INT(fi_pep_bind(pep, &eq->fid, 0), 0);
	CHECK_INT(fi_listen(pep), 0);
	CHECK_INT(port_of(&pep->fid), port);
	/* It listens there. */
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_INT(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
	close(s);

	/* A second one: another port of the range. */
	CHECK_INT(fi_passive_ep(fabric, info, &pep2, NULL), 0);
	if (pep2) {
		CHECK_IN_RANGE(port_of(&pep2->fid));
		CHECK(port_of(&pep2->fid) != port);
		/* A port given by name is kept, range or not: the first one's,
		 * free again once it closed. */
		CHECK_INT(fi_close(&pep->fid), 0);
		pep = NULL;
		CHECK_INT(fi_setname(&pep2->fid, &a, sizeof(a)), 0);
		CHECK_INT(port_of(&pep2->fid), port);
		CHECK_INT(fi_close(&pep2->fid), 0);
	}
	if (pep)
		CHECK_INT(fi_close(&pep->fid), 0);
	CHECK_INT(fi_close(&eq->fid), 0);
}

static void rdm(void)
{
	struct fi_info *info = get_info(FI_EP_RDM);
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_av *av = NULL;
	struct fid_cq *cq = NULL;
	struct fid_ep *ep = NULL;

	if (!info)
		return;
	CHECK_INT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_INT(fi_domain(fabric, info, &domain, NULL), 0);
	CHECK_INT(fi_av_open(domain, &ava, &av, NULL), 0);
	CHECK_INT(fi_cq_open(domain, &cqa, &cq, NULL), 0);
	CHECK_INT(fi_endpoint(domain, info, &ep, NULL), 0);
	if (ep && av && cq) {
		CHECK_INT(fi_ep_bind(ep, &av->fid, 0), 0);
		CHECK_INT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
		CHECK_INT(fi_enable(ep), 0);
		CHECK_IN_RANGE(port_of(&ep->fid));
	}
	if (ep)
		fi_close(&ep->fid);
	if (cq)
		fi_close(&cq->fid);
	if (av)
		fi_close(&av->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	fi_freeinfo(info);
}

int main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	struct fid_fabric *fabric = NULL;
	struct fi_info *info;
	char text[16];
	int held;

	/* The range's first port: one the kernel gives, held listening. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	held = socket(AF_INET, SOCK_STREAM, 0);
	if (held < 0 || bind(held, (struct sockaddr *)&a, sizeof(a)) || listen(held, 1) ||
	    getsockname(held, (struct sockaddr *)&a, &len)) {
		perror("listener");
		return 1;
	}
	low = ntohs(a.sin_port);
	high = low + RANGE - 1 > 65535 ? 65535 : low + RANGE - 1;
	setenv("FI_PROVIDER", "tcp", 1);
	snprintf(text, sizeof(text), "%d", low);
	setenv("FI_TCP_PORT_LOW_RANGE", text, 1);
	snprintf(text, sizeof(text), "%d", high);
	setenv("FI_TCP_PORT_HIGH_RANGE", text, 1);

	info = get_info(FI_EP_MSG);
	if (info) {
		CHECK_INT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
		if (fabric) {
			passive(fabric, info);
			CHECK_INT(fi_close(&fabric->fid), 0);
		}
		fi_freeinfo(info);
	}
	rdm();
	close(held);
	return check_done();
}
