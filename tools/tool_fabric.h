/* Fabric helpers shared by fi_pingpong and fabric_bench (tool_fabric.c): the
 * hints both start from, opening an endpoint with its queues and memory
 * registration, and closing it all. Public API only. */
#ifndef LOOM_TOOL_FABRIC_H
#define LOOM_TOOL_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

/* What one side of a two-process test opens, closed in one place. A
 * connected endpoint (msg) has an event queue and no address vector; the
 * others the reverse. */
/* How its endpoint is made (tool_open_ep): a plain endpoint; one bound
 * to a shared transmit and a shared receive context; or a scalable
 * endpoint with one context of each. */
enum tool_ep_kind { TOOL_EP_PLAIN, TOOL_EP_SHARED, TOOL_EP_SCALABLE };

struct tool_fabric {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_pep *pep;
	enum tool_ep_kind kind;
	struct fid_ep *ep;   /* the endpoint: names, connections, RMA keys */
	struct fid_ep *tx;   /* where operations are posted: ep or its context */
	struct fid_ep *rx;   /* where receives are posted: ep, an SRX, a context */
	struct fid_stx *stx; /* TOOL_EP_SHARED */
	struct fid_ep *srx;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	void *desc;
	fi_addr_t peer;
};

/* Hints both programs start from: one endpoint type and capability set, and
 * every memory registration mode they can live with. NULL without memory. */
struct fi_info *tool_hints(enum fi_ep_type type, uint64_t caps, const char *prov,
                           const char *domain);

/* fi_getinfo towards dest (when not NULL) with hints, which it frees; dest
 * stays the caller's. */
int tool_getinfo(struct fi_info *hints, void *dest, size_t dest_len, uint32_t addr_format,
                 uint64_t flags, struct fi_info **out);

/* Opens the domain, a polled completion queue of the given format, and the
 * endpoint of t->kind, binds them (the event queue if t->eq is open, else a
 * new address vector) and enables it; t->tx and t->rx say where to post.
 * On failure returns the error and sets *failed to the call that returned
 * it, for the caller to report its own way. */
int tool_open_ep(struct tool_fabric *t, struct fi_info *info, enum fi_cq_format format,
                 const char **failed);

/* Registers buf (binding and enabling the region where the domain asks for
 * FI_MR_ENDPOINT) and sets t->desc; errors as for tool_open_ep. */
int tool_reg_mr(struct tool_fabric *t, const struct fi_info *info, void *buf, size_t len,
                uint64_t access, uint64_t key, const char **failed);

/* Closes whatever is open, endpoints before what they are bound to, and
 * frees the info; leaves the pointers NULL. */
void tool_fabric_close(struct tool_fabric *t);

#endif
