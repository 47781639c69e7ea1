/* The fabric objects of one side of fi_pingpong or fabric_bench: hints,
 * opening, registration and closing (see tool_fabric.h). */
#include "tool_fabric.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_endpoint.h>

struct fi_info *tool_hints(enum fi_ep_type type, uint64_t caps, const char *prov,
                           const char *domain)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = caps;
	h->ep_attr->type = type;
	/* Every operation carries its own fi_context2, so both modes are fine. */
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
	                          FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov)
		h->fabric_attr->prov_name = strdup(prov);
	if (domain)
		h->domain_attr->name = strdup(domain);
	return h;
}

int tool_getinfo(struct fi_info *hints, void *dest, size_t dest_len, uint32_t addr_format,
                 uint64_t flags, struct fi_info **out)
{
	int ret;

	if (dest) {
		hints->dest_addr = dest;
		hints->dest_addrlen = dest_len;
		hints->addr_format = addr_format;
	}
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL,
	                 flags, hints, out);
	if (dest)
		hints->dest_addr = NULL; /* the caller's, not for fi_freeinfo */
	fi_freeinfo(hints);
	return ret;
}

/* Records which call failed; returns its error. */
static int failed_at(const char **failed, const char *call, int ret)
{
	*failed = call;
	return ret;
}

/* A scalable endpoint with one transmit and one receive context, both on
 * t->cq; a new address vector. */
static int open_scalable(struct tool_fabric *t, struct fi_info *info, const char **failed)
{
	struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
	int ret;

	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;
	if ((ret = fi_scalable_ep(t->domain, info, &t->ep, NULL)))
		return failed_at(failed, "fi_scalable_ep", ret);
	if ((ret = fi_av_open(t->domain, &av_attr, &t->av, NULL)))
		return failed_at(failed, "fi_av_open", ret);
	if ((ret = fi_scalable_ep_bind(t->ep, &t->av->fid, 0)))
		return failed_at(failed, "fi_scalable_ep_bind", ret);
	if ((ret = fi_tx_context(t->ep, 0, NULL, &t->tx, NULL)))
		return failed_at(failed, "fi_tx_context", ret);
	if ((ret = fi_rx_context(t->ep, 0, NULL, &t->rx, NULL)))
		return failed_at(failed, "fi_rx_context", ret);
	if ((ret = fi_ep_bind(t->tx, &t->cq->fid, FI_TRANSMIT)))
		return failed_at(failed, "fi_ep_bind(tx, cq)", ret);
	if ((ret = fi_ep_bind(t->rx, &t->cq->fid, FI_RECV)))
		return failed_at(failed, "fi_ep_bind(rx, cq)", ret);
	if ((ret = fi_enable(t->tx)))
		return failed_at(failed, "fi_enable(tx)", ret);
	if ((ret = fi_enable(t->rx)))
		return failed_at(failed, "fi_enable(rx)", ret);
	if ((ret = fi_enable(t->ep)))
		return failed_at(failed, "fi_enable", ret);
	return 0;
}

int tool_open_ep(struct tool_fabric *t, struct fi_info *info, enum fi_cq_format format,
                 const char **failed)
{
	struct fi_cq_attr cq_attr = {.format = format, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
	int ret;

	if ((ret = fi_domain(t->fabric, info, &t->domain, NULL)))
		return failed_at(failed, "fi_domain", ret);
	if ((ret = fi_cq_open(t->domain, &cq_attr, &t->cq, NULL)))
		return failed_at(failed, "fi_cq_open", ret);
	if (t->kind == TOOL_EP_SCALABLE)
		return open_scalable(t, info, failed);
	if ((ret = fi_endpoint(t->domain, info, &t->ep, NULL)))
		return failed_at(failed, "fi_endpoint", ret);
	t->tx = t->rx = t->ep;
	if (t->kind == TOOL_EP_SHARED) {
		if ((ret = fi_stx_context(t->domain, info->tx_attr, &t->stx, NULL)))
			return failed_at(failed, "fi_stx_context", ret);
		if ((ret = fi_srx_context(t->domain, info->rx_attr, &t->srx, NULL)))
			return failed_at(failed, "fi_srx_context", ret);
		if ((ret = fi_ep_bind(t->ep, &t->stx->fid, 0)))
			return failed_at(failed, "fi_ep_bind(stx)", ret);
		if ((ret = fi_ep_bind(t->ep, &t->srx->fid, 0)))
			return failed_at(failed, "fi_ep_bind(srx)", ret);
		t->rx = t->srx;
	}
	if ((ret = fi_ep_bind(t->ep, &t->cq->fid, FI_TRANSMIT | FI_RECV)))
		return failed_at(failed, "fi_ep_bind(cq)", ret);
	if (t->eq) {
		if ((ret = fi_ep_bind(t->ep, &t->eq->fid, 0)))
			return failed_at(failed, "fi_ep_bind(eq)", ret);
	} else {
		if ((ret = fi_av_open(t->domain, &av_attr, &t->av, NULL)))
			return failed_at(failed, "fi_av_open", ret);
		if ((ret = fi_ep_bind(t->ep, &t->av->fid, 0)))
			return failed_at(failed, "fi_ep_bind(av)", ret);
	}
	if ((ret = fi_enable(t->ep)))
		return failed_at(failed, "fi_enable", ret);
	return 0;
}

int tool_reg_mr(struct tool_fabric *t, const struct fi_info *info, void *buf, size_t len,
                uint64_t access, uint64_t key, const char **failed)
{
	int ret = fi_mr_reg(t->domain, buf, len, access, 0, key, 0, &t->mr, NULL);

	if (ret)
		return failed_at(failed, "fi_mr_reg", ret);
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(t->mr, &t->ep->fid, 0)))
			return failed_at(failed, "fi_mr_bind", ret);
		if ((ret = fi_mr_enable(t->mr)))
			return failed_at(failed, "fi_mr_enable", ret);
	}
	t->desc = fi_mr_desc(t->mr);
	return 0;
}

/* fi_close of one object, if open, leaving its pointer NULL. */
#define CLOSE(obj)                                                                       \
	do {                                                                             \
		if (obj)                                                                 \
			fi_close(&(obj)->fid);                                           \
		(obj) = NULL;                                                            \
	} while (0)

void tool_fabric_close(struct tool_fabric *t)
{
	CLOSE(t->mr);
	if (t->tx == t->ep)
		t->tx = NULL;
	if (t->rx == t->ep || t->rx == t->srx)
		t->rx = NULL;
	CLOSE(t->tx); /* a scalable endpoint's contexts, before it */
	CLOSE(t->rx);
	CLOSE(t->ep);
	CLOSE(t->srx);
	CLOSE(t->stx);
	CLOSE(t->pep);
	CLOSE(t->av);
	CLOSE(t->cq);
	CLOSE(t->domain);
	CLOSE(t->eq);
	CLOSE(t->fabric);
	fi_freeinfo(t->info);
	t->info = NULL;
	t->desc = NULL;
}
