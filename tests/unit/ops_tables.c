/* ops_tables.c - every object loom's providers open (shm RDM, tcp RDM and
 * MSG, tcp's passive endpoint) has an entry in each ops table slot that
 * the headers' inline calls jump through unchecked, and the calls such an
 * object does not serve answer -FI_ENOSYS.  fabtests call fi_shutdown on
 * RDM endpoints too (fi_cq_data), which used to jump through NULL. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "check.h"
#include "provs.h"

/* Slots the headers test with FI_CHECK_OP before calling (or never call):
 * those may stay empty, as objects built against older headers have them. */
struct optional {
	const char *table;
	size_t off;
};

static const struct optional optional[] = {
    {"fi_ops", offsetof(struct fi_ops, tostr)},
    {"fi_ops", offsetof(struct fi_ops, ops_set)},
    {"fi_ops_fabric", offsetof(struct fi_ops_fabric, domain2)},
    {"fi_ops_domain", offsetof(struct fi_ops_domain, query_atomic)},
    {"fi_ops_domain", offsetof(struct fi_ops_domain, query_collective)},
    {"fi_ops_domain", offsetof(struct fi_ops_domain, endpoint2)},
    {"fi_ops_av", offsetof(struct fi_ops_av, av_set)},
    {"fi_ops_cntr", offsetof(struct fi_ops_cntr, adderr)},
    {"fi_ops_cntr", offsetof(struct fi_ops_cntr, seterr)},
    {"fi_ops_cm", offsetof(struct fi_ops_cm, join)},
};

static bool is_optional(const char *table, size_t off)
{
	for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
		if (!strcmp(optional[i].table, table) && optional[i].off == off)
			return true;
	return false;
}

/* Every function slot of a table, up to the smaller of its own size and
 * the header's (a table may be older than the header, never newer). */
static void check_table(const char *obj, const char *table, const void *ops,
                        size_t header_size)
{
	size_t size;

	if (!ops) {
		fprintf(stderr, "%s: no %s table\n", obj, table);
		CHECK(0);
		return;
	}
	memcpy(&size, ops, sizeof(size));
	CHECK(size > sizeof(size_t));
	if (size > header_size)
		size = header_size;
	for (size_t off = sizeof(size_t); off + sizeof(void (*)(void)) <= size;
	     off += sizeof(void (*)(void))) {
		void (*fn)(void);

		memcpy(&fn, (const char *)ops + off, sizeof(fn));
		check_count++;
		if (!fn && !is_optional(table, off)) {
			fprintf(stderr, "%s: %s slot at offset %zu is NULL\n", obj, table,
			        off);
			check_failures++;
		}
	}
}

#define TABLE(obj, type, ops) check_table(obj, #type, ops, sizeof(struct type))

static void check_ep(const char *obj, struct fid_ep *ep)
{
	TABLE(obj, fi_ops, ep->fid.ops);
	TABLE(obj, fi_ops_ep, ep->ops);
	TABLE(obj, fi_ops_cm, ep->cm);
	TABLE(obj, fi_ops_msg, ep->msg);
	TABLE(obj, fi_ops_tagged, ep->tagged);
	TABLE(obj, fi_ops_rma, ep->rma);
	TABLE(obj, fi_ops_atomic, ep->atomic);
}

/* Everything one provider and endpoint type opens. */
static void check_prov(const char *prov, enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_eq *eq = NULL;
	struct fid_wait *wait = NULL;
	struct fid_poll *poll = NULL;
	struct fid_av *av = NULL;
	struct fid_cq *cq = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_mr *mr = NULL;
	struct fid_ep *ep = NULL, *other = NULL;
	struct fid_stx *stx = NULL;
	struct fid_pep *pep = NULL;
	struct fid_mc *mc = NULL;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	struct fi_wait_attr wait_attr = {.wait_obj = FI_WAIT_FD};
	struct fi_poll_attr poll_attr = {0};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	static char buf[64];
	char obj[64];

	snprintf(obj, sizeof(obj), "%s %s", prov, type == FI_EP_RDM ? "rdm" : "msg");
	h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	h->ep_attr->type = type;
	h->fabric_attr->prov_name = strdup(prov);
	CHECK_INT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	fi_freeinfo(h);
	if (!info)
		return;

	CHECK_INT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		goto out;
	TABLE(obj, fi_ops, fabric->fid.ops);
	TABLE(obj, fi_ops_fabric, fabric->ops);
	CHECK_INT(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		goto out;
	TABLE(obj, fi_ops, domain->fid.ops);
	TABLE(obj, fi_ops_domain, domain->ops);
	TABLE(obj, fi_ops_mr, domain->mr);

	CHECK_INT(fi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	if (eq) {
		TABLE(obj, fi_ops, eq->fid.ops);
		TABLE(obj, fi_ops_eq, eq->ops);
	}
	CHECK_INT(fi_wait_open(fabric, &wait_attr, &wait), 0);
	if (wait) {
		TABLE(obj, fi_ops, wait->fid.ops);
		TABLE(obj, fi_ops_wait, wait->ops);
	}
	CHECK_INT(fi_poll_open(domain, &poll_attr, &poll), 0);
	if (poll) {
		TABLE(obj, fi_ops, poll->fid.ops);
		TABLE(obj, fi_ops_poll, poll->ops);
	}
	if (type == FI_EP_RDM) {
		CHECK_INT(fi_av_open(domain, &av_attr, &av, NULL), 0);
		if (av) {
			TABLE(obj, fi_ops, av->fid.ops);
			TABLE(obj, fi_ops_av, av->ops);
		}
	}
	CHECK_INT(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	if (cq) {
		TABLE(obj, fi_ops, cq->fid.ops);
		TABLE(obj, fi_ops_cq, cq->ops);
	}
	CHECK_INT(fi_cntr_open(domain, &cntr_attr, &cntr, NULL), 0);
	if (cntr) {
		TABLE(obj, fi_ops, cntr->fid.ops);
		TABLE(obj, fi_ops_cntr, cntr->ops);
	}
	CHECK_INT(
	    fi_mr_reg(domain, buf, sizeof(buf), FI_REMOTE_WRITE, 0, 1, 0, &mr, NULL), 0);
	if (mr)
		TABLE(obj, fi_ops, mr->fid.ops);

	/* Scalable endpoints (RDM ones) and shared contexts: every slot. */
	if (type == FI_EP_RDM) {
		CHECK_INT(fi_scalable_ep(domain, info, &other, NULL), 0);
		if (other) {
			check_ep(obj, other);
			CHECK_INT(fi_close(&other->fid), 0);
			other = NULL;
		}
	} else {
		CHECK_INT(fi_scalable_ep(domain, info, &other, NULL), -FI_EINVAL);
	}
	CHECK_INT(fi_stx_context(domain, info->tx_attr, &stx, NULL), 0);
	if (stx) {
		TABLE(obj, fi_ops, stx->fid.ops);
		TABLE(obj, fi_ops_ep, stx->ops);
		CHECK_INT(fi_close(&stx->fid), 0);
	}
	CHECK_INT(fi_srx_context(domain, info->rx_attr, &other, NULL), 0);
	if (other) {
		check_ep(obj, other);
		CHECK_INT(fi_close(&other->fid), 0);
		other = NULL;
	}

	CHECK_INT(fi_endpoint(domain, info, &ep, NULL), 0);
	if (ep) {
		check_ep(obj, ep);
		if (type == FI_EP_RDM) {
			/* No connections to make or end (the reference's
			 * answer too). */
			CHECK_INT(fi_connect(ep, buf, NULL, 0), -FI_ENOSYS);
			CHECK_INT(fi_accept(ep, NULL, 0), -FI_ENOSYS);
			CHECK_INT(fi_shutdown(ep, 0), -FI_ENOSYS);
			CHECK_INT(fi_join(ep, buf, 0, &mc, NULL), -FI_ENOSYS);
		}
	}
	if (type == FI_EP_MSG) {
		CHECK_INT(fi_passive_ep(fabric, info, &pep, NULL), 0);
		/* Only the slots a passive endpoint is reached through: the
		 * fid_t calls (fi_cancel, fi_getopt, fi_setopt, fi_setname,
		 * fi_getname) and the fid_pep ones (fi_listen, fi_reject). */
		if (pep) {
			TABLE("tcp pep", fi_ops, pep->fid.ops);
			CHECK(pep->ops && pep->ops->cancel && pep->ops->getopt &&
			      pep->ops->setopt);
			CHECK(pep->cm && pep->cm->setname && pep->cm->getname &&
			      pep->cm->listen && pep->cm->reject);
		}
	}
out:
	if (pep)
		CHECK_INT(fi_close(&pep->fid), 0);
	if (ep)
		CHECK_INT(fi_close(&ep->fid), 0);
	if (mr)
		CHECK_INT(fi_close(&mr->fid), 0);
	if (cntr)
		CHECK_INT(fi_close(&cntr->fid), 0);
	if (cq)
		CHECK_INT(fi_close(&cq->fid), 0);
	if (av)
		CHECK_INT(fi_close(&av->fid), 0);
	if (poll)
		CHECK_INT(fi_close(&poll->fid), 0);
	if (wait)
		CHECK_INT(fi_close(&wait->fid), 0);
	if (eq)
		CHECK_INT(fi_close(&eq->fid), 0);
	if (domain)
		CHECK_INT(fi_close(&domain->fid), 0);
	if (fabric)
		CHECK_INT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	for (size_t p = 0; p < TEST_NPROVS; p++)
		for (const enum fi_ep_type *t = test_provs[p].types; *t; t++)
			check_prov(test_provs[p].name, *t);
	return check_done();
}
