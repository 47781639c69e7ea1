/* struct_versions.c - structures that grew after 1.17 are read and written
 * only as far as the caller's API version has them: fi_cq_readerr writes
 * src_addr (1.20) and err_data_size (1.5) only for callers that have them,
 * and fi_mr_regattr reads hmem_data/page_size (1.22) and base_mr/sub_mr_cnt
 * (2.0) only for callers that have them.  Each caller's structure is
 * allocated at exactly its layout's size plus guard bytes that must stay
 * untouched (AddressSanitizer also catches a read past them). */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "check.h"

#define GUARD 16

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
};

static int node_open(struct node *n, uint32_t version)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	int ret;

	memset(n, 0, sizeof(*n));
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_SOURCE;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(version, NULL, NULL, 0, hints, &n->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((ret = fi_fabric(n->info->fabric_attr, &n->fabric, NULL)) ||
	    (ret = fi_domain(n->fabric, n->info, &n->domain, NULL)) ||
	    (ret = fi_cq_open(n->domain, &cq_attr, &n->cq, NULL)) ||
	    (ret = fi_av_open(n->domain, &av_attr, &n->av, NULL)) ||
	    (ret = fi_endpoint(n->domain, n->info, &n->ep, NULL)) ||
	    (ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_ep_bind(n->ep, &n->av->fid, 0)))
		return ret;
	return fi_enable(n->ep);
}

static void node_close(struct node *n)
{
	struct fid *fids[] = {n->ep ? &n->ep->fid : NULL, n->av ? &n->av->fid : NULL,
	                      n->cq ? &n->cq->fid : NULL, n->domain ? &n->domain->fid : NULL,
	                      n->fabric ? &n->fabric->fid : NULL};

	for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++)
		if (fids[i])
			CHECK_INT(fi_close(fids[i]), 0);
	fi_freeinfo(n->info);
}

/* The error entry of the caller's version: its size, and guard bytes after
 * it that must survive fi_cq_readerr. */
static size_t err_layout(uint32_t version)
{
	if (version >= FI_VERSION(1, 20))
		return sizeof(struct fi_cq_err_entry);
	if (version >= FI_VERSION(1, 5))
		return offsetof(struct fi_cq_err_entry, src_addr);
	return offsetof(struct fi_cq_err_entry, err_data_size);
}

static struct fi_cq_err_entry *read_err(struct node *n, uint32_t version, size_t *size)
{
	struct fi_cq_tagged_entry t;
	unsigned char *buf;
	ssize_t ret;
	int spins;

	for (spins = 0; spins < 1000000; spins++) {
		ret = fi_cq_read(n->cq, &t, 1);
		if (ret == -FI_EAVAIL)
			break;
		CHECK_INT(ret, -FI_EAGAIN);
		if (ret != -FI_EAGAIN)
			return NULL;
	}
	*size = err_layout(version);
	buf = malloc(*size + GUARD);
	memset(buf, 0xa5, *size + GUARD);
	if (version >= FI_VERSION(1, 5))
		((struct fi_cq_err_entry *)buf)->err_data_size = 0;
	CHECK_INT(fi_cq_readerr(n->cq, (struct fi_cq_err_entry *)buf, 0), 1);
	for (size_t i = *size; i < *size + GUARD; i++)
		if (buf[i] != 0xa5) {
			fprintf(stderr, "v%u.%u: readerr wrote byte %zu of a %zu-byte entry\n",
			        FI_MAJOR(version), FI_MINOR(version), i, *size);
			CHECK(buf[i] == 0xa5);
			break;
		}
	return (struct fi_cq_err_entry *)buf;
}

/* A cancelled receive concerns no peer. */
static void cancelled(uint32_t version)
{
	struct fi_cq_err_entry *e;
	struct node n;
	char buf[16];
	size_t size;
	int ctx;

	CHECK_INT(node_open(&n, version), 0);
	if (!n.ep) {
		node_close(&n);
		return;
	}
	CHECK_INT(fi_recv(n.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &ctx), 0);
	CHECK_INT(fi_cancel(&n.ep->fid, &ctx), 0);
	e = read_err(&n, version, &size);
	if (e) {
		CHECK(e->op_context == &ctx);
		CHECK_INT(e->err, FI_ECANCELED);
		if (size == sizeof(*e))
			CHECK_HEX(e->src_addr, FI_ADDR_NOTAVAIL);
	}
	free(e);
	node_close(&n);
}

/* A truncated message names the peer it came from. */
static void truncated(uint32_t version)
{
	struct fi_cq_tagged_entry t;
	struct fi_cq_err_entry *e;
	char name[64], big[64] = {0}, small[8];
	size_t len = sizeof(name), size;
	fi_addr_t a_at_b, b_at_a;
	struct node a, b;
	ssize_t ret;

	CHECK_INT(node_open(&a, version), 0);
	CHECK_INT(node_open(&b, version), 0);
	CHECK_INT(fi_getname(&a.ep->fid, name, &len), 0);
	CHECK_INT(fi_av_insert(b.av, name, 1, &a_at_b, 0, NULL), 1);
	len = sizeof(name);
	CHECK_INT(fi_getname(&b.ep->fid, name, &len), 0);
	CHECK_INT(fi_av_insert(a.av, name, 1, &b_at_a, 0, NULL), 1);

	CHECK_INT(fi_recv(b.ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, NULL), 0);
	CHECK_INT(fi_send(a.ep, big, sizeof(big), NULL, b_at_a, NULL), 0);
	e = read_err(&b, version, &size);
	if (e) {
		CHECK_INT(e->err, FI_ETRUNC);
		CHECK_INT(e->olen, sizeof(big) - sizeof(small));
		CHECK_HEX(e->src_addr, a_at_b);
	}
	free(e);
	do /* the send's completion */
		ret = fi_cq_read(a.cq, &t, 1);
	while (ret == -FI_EAGAIN);
	CHECK_INT(ret, 1);
	node_close(&b);
	node_close(&a);
}

static void regattr(uint32_t version, size_t layout, bool sub_mr, int want)
{
	static char mem[4096];
	struct iovec iov = {mem, sizeof(mem)};
	unsigned char *buf = malloc(layout + GUARD);
	struct fi_mr_attr *attr = (struct fi_mr_attr *)buf;
	struct fid_mr *mr = NULL;
	struct node n;

	CHECK_INT(node_open(&n, version), 0);
	memset(buf, 0, layout);
	/* Past the caller's layout: what a newer structure's fields would be
	 * if they were read (base_mr non-NULL, a page size of 0xa5a5...). */
	memset(buf + layout, 0xa5, GUARD);
	attr->mr_iov = &iov;
	attr->iov_count = 1;
	attr->access = FI_SEND | FI_RECV;
	if (sub_mr)
		attr->sub_mr_cnt = 2;
	CHECK_INT(fi_mr_regattr(n.domain, attr, 0, &mr), want);
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	free(buf);
	node_close(&n);
}

int main(void)
{
	static const uint32_t versions[] = {FI_VERSION(1, 4), FI_VERSION(1, 5),
	                                    FI_VERSION(1, 19), FI_VERSION(1, 20),
	                                    FI_VERSION(2, 0), FI_VERSION(2, 6)};

	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		cancelled(versions[i]);
	truncated(FI_VERSION(1, 20));
	truncated(FI_VERSION(2, 6));

	/* A 1.21 caller's attr ends after device; a 2.0 one's is whole. */
	regattr(FI_VERSION(1, 17), offsetof(struct fi_mr_attr, hmem_data), false, 0);
	regattr(FI_VERSION(1, 21), offsetof(struct fi_mr_attr, hmem_data), false, 0);
	regattr(FI_VERSION(1, 22), offsetof(struct fi_mr_attr, base_mr), false, 0);
	regattr(FI_VERSION(2, 0), sizeof(struct fi_mr_attr), false, 0);
	/* Sub-regions are not offered: asked for by a 2.0 caller, refused. */
	regattr(FI_VERSION(2, 0), sizeof(struct fi_mr_attr), true, -FI_ENOSYS);
	return check_done();
}
