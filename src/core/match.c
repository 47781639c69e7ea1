/* match.c - fi_getinfo hint matching: decide whether a provider's template
 * fi_info can serve an application's hints, and build the answer the
 * application gets (the template narrowed to what it asked for).  The
 * rules are those of man fi_getinfo, fi_domain, fi_endpoint and fi_mr:
 * a zero hint is a wildcard (except mode bits), a non-zero hint must be
 * met or the template is rejected with -FI_ENODATA. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"
#include "v1_names.h"

#define REJECT(what, ...)                                                                \
	do {                                                                             \
		LM_INFO(&lm_core_prov, FI_LOG_CORE, "%s: " what "\n",                    \
		        tmpl->fabric_attr && tmpl->fabric_attr->prov_name                \
		            ? tmpl->fabric_attr->prov_name                               \
		            : "?",                                                       \
		        ##__VA_ARGS__);                                                  \
		return -FI_ENODATA;                                                      \
	} while (0)

#define ALL_MODIFIERS (LM_MSG_MODIFIERS | LM_RMA_MODIFIERS)

/* A primary capability asked for without modifiers means all of them that
 * apply where it is asked: mods is every modifier for the endpoint, one
 * direction's for a transmit or receive context (FI_MSG in tx_attr is
 * FI_SEND, not FI_RECV). */
static uint64_t expand_caps(uint64_t caps, uint64_t mods)
{
	/* Not FI_VARIABLE_MSG's bit: no provider offers that capability, and
	 * from 2.0 on the bit is FI_EXACT_DIRECTED_RECV, which like
	 * FI_DIRECTED_RECV asks for no operation. */
	if ((caps & (FI_MSG | FI_TAGGED | FI_COLLECTIVE)) && !(caps & LM_MSG_MODIFIERS))
		caps |= LM_MSG_MODIFIERS & mods;
	if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & LM_RMA_MODIFIERS))
		caps |= LM_RMA_MODIFIERS & mods;
	return caps;
}

/* What to report: the primary capabilities (and modifiers) asked for,
 * plus the template's secondary capabilities, which may be reported
 * unrequested. */
static uint64_t narrow_caps(uint64_t want, uint64_t have, uint64_t mods)
{
	if (!want)
		return have;
	want = expand_caps(want, mods) & have;
	return want | (have & LM_SECONDARY_CAPS & ~FI_SOURCE_ERR);
}

static bool caps_ok(uint64_t want, uint64_t have, uint64_t mods)
{
	return !(expand_caps(want, mods) & ~have);
}

/* Threading levels, weakest first: a provider that is safe at one level
 * serves every weaker request. */
static int thread_rank(enum fi_threading t)
{
	switch (t) {
	case FI_THREAD_DOMAIN:
		return 1;
	case FI_THREAD_COMPLETION:
		return 2;
	case FI_THREAD_ENDPOINT:
		return 3;
	case FI_THREAD_FID:
		return 4;
	case FI_THREAD_SAFE:
		return 5;
	default:
		return 0;
	}
}

#define MR_BASIC_BITS (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)

/* The mr_mode bits an application accepts, in post-1.5 form.  Before 1.5
 * the field holds FI_MR_BASIC, FI_MR_SCALABLE or FI_MR_UNSPEC (either of
 * the two), and the FI_LOCAL_MR mode bit means the application registers
 * local buffers (which libfabric still honours later).  From 1.5, 0 is no
 * bit at all: the default registration, which FI_MR_SCALABLE names (man
 * fi_domain, fi_mr), not basic registration's bits. */
static int app_mr_bits(uint32_t version, const struct fi_info *hints, int mr_mode)
{
	int local = (hints->mode & LM_LOCAL_MR) ? FI_MR_LOCAL : 0;

	if (mr_mode == LM_MR_BASIC)
		return MR_BASIC_BITS | local;
	if (mr_mode == LM_MR_SCALABLE)
		return local;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		return MR_BASIC_BITS | local;
	return mr_mode | local;
}

/* The answer's mr_mode: the template's bits, which the application must
 * accept unless the template only prefers them (LM_MR_PREFERRED), in the
 * form the application speaks. */
static int match_mr(uint32_t version, const struct fi_info *tmpl,
                    const struct fi_info *hints, struct fi_info *out)
{
	static const struct fi_info no_hints;
	const struct fi_domain_attr *h = hints ? hints->domain_attr : NULL;
	int have = tmpl->domain_attr->mr_mode & ~LM_MR_PREFERRED;
	bool preferred = tmpl->domain_attr->mr_mode & LM_MR_PREFERRED;
	bool legacy = FI_VERSION_LT(version, FI_VERSION(1, 5)) ||
	              (h && (h->mr_mode == LM_MR_BASIC || h->mr_mode == LM_MR_SCALABLE));
	int accept, mr_mode;

	/* No hints from 1.5 on: the provider's own choice. */
	if (!hints && !legacy) {
		out->domain_attr->mr_mode = have;
		return 0;
	}
	accept = app_mr_bits(version, hints ? hints : &no_hints, h ? h->mr_mode : 0);
	if (!preferred && (have & ~accept))
		REJECT("mr_mode 0x%x required", have);
	mr_mode = preferred ? have & accept : have;
	out->domain_attr->mr_mode = mr_mode;
	if (legacy) {
		if (mr_mode & FI_MR_LOCAL)
			out->mode |= LM_LOCAL_MR;
		out->domain_attr->mr_mode =
		    (mr_mode & MR_BASIC_BITS) ? LM_MR_BASIC : LM_MR_SCALABLE;
	}
	return 0;
}

static int match_domain(const struct fi_info *tmpl, const struct fi_info *hints,
                        struct fi_info *out)
{
	const struct fi_domain_attr *p = tmpl->domain_attr, *h = hints->domain_attr;
	struct fi_domain_attr *o = out->domain_attr;

	if (!h)
		return 0;
	if (h->name && (!p->name || strcmp(h->name, p->name)))
		REJECT("domain %s not offered", h->name);
	if (h->threading) {
		if (thread_rank(h->threading) > thread_rank(p->threading))
			REJECT("threading %d not supported", h->threading);
		o->threading = h->threading;
	}
	if (h->control_progress) {
		if (h->control_progress == FI_PROGRESS_AUTO &&
		    p->control_progress != FI_PROGRESS_AUTO)
			REJECT("automatic control progress not supported");
		o->control_progress = h->control_progress;
	}
	if (h->data_progress) {
		if (h->data_progress == FI_PROGRESS_AUTO &&
		    p->data_progress != FI_PROGRESS_AUTO &&
		    p->data_progress != LM_PROGRESS_EITHER)
			REJECT("automatic data progress not supported");
		o->data_progress = h->data_progress;
	}
	if (h->resource_mgmt) {
		if (h->resource_mgmt == FI_RM_ENABLED &&
		    p->resource_mgmt != FI_RM_ENABLED)
			REJECT("resource management not supported");
		o->resource_mgmt = h->resource_mgmt;
	}
	if (h->av_type) {
		if (p->av_type && p->av_type != h->av_type)
			REJECT("av_type %d not supported", h->av_type);
		o->av_type = h->av_type;
	}
	if (h->mr_key_size > p->mr_key_size)
		REJECT("mr_key_size %zu too large", h->mr_key_size);
	if (h->cq_data_size > p->cq_data_size)
		REJECT("cq_data_size %zu too large", h->cq_data_size);
	if (h->cq_cnt > p->cq_cnt || h->ep_cnt > p->ep_cnt || h->cntr_cnt > p->cntr_cnt ||
	    h->tx_ctx_cnt > p->tx_ctx_cnt || h->rx_ctx_cnt > p->rx_ctx_cnt ||
	    h->max_ep_tx_ctx > p->max_ep_tx_ctx || h->max_ep_rx_ctx > p->max_ep_rx_ctx ||
	    h->max_ep_stx_ctx > p->max_ep_stx_ctx ||
	    h->max_ep_srx_ctx > p->max_ep_srx_ctx || h->mr_iov_limit > p->mr_iov_limit ||
	    h->mr_cnt > p->mr_cnt || h->max_err_data > p->max_err_data ||
	    h->auth_key_size > p->auth_key_size ||
	    h->max_ep_auth_key > p->max_ep_auth_key || h->max_group_id > p->max_group_id)
		REJECT("a domain resource count exceeds the provider's");
	/* The answer's limits, which lm_info_match filled in. */
	if (h->max_cntr_value > o->max_cntr_value ||
	    h->max_err_cntr_value > o->max_err_cntr_value)
		REJECT("counter values above the provider's limit asked for");
	if (!caps_ok(h->caps, p->caps, ALL_MODIFIERS))
		REJECT("domain caps 0x%llx not supported", (unsigned long long)h->caps);
	o->caps = h->caps ? narrow_caps(h->caps, p->caps, ALL_MODIFIERS) : p->caps;
	if (p->mode & ~h->mode)
		REJECT("domain mode 0x%llx required", (unsigned long long)p->mode);
	if (h->tclass)
		o->tclass = h->tclass;
	return 0;
}

static int match_ep(const struct fi_info *tmpl, const struct fi_info *hints,
                    struct fi_info *out)
{
	const struct fi_ep_attr *p = tmpl->ep_attr, *h = hints->ep_attr;
	struct fi_ep_attr *o = out->ep_attr;

	if (!h)
		return 0;
	if (h->type && h->type != p->type)
		REJECT("endpoint type %d not offered", h->type);
	if (h->protocol && h->protocol != p->protocol)
		REJECT("protocol %u not offered", h->protocol);
	if (h->protocol_version && h->protocol_version > p->protocol_version)
		REJECT("protocol version %u too new", h->protocol_version);
	if (h->max_msg_size > p->max_msg_size)
		REJECT("max_msg_size %zu too large", h->max_msg_size);
	if (h->msg_prefix_size && h->msg_prefix_size != p->msg_prefix_size)
		REJECT("msg_prefix_size %zu not offered", h->msg_prefix_size);
	if (h->max_order_raw_size > p->max_order_raw_size ||
	    h->max_order_war_size > p->max_order_war_size ||
	    h->max_order_waw_size > p->max_order_waw_size)
		REJECT("ordered data size too large");
	if (h->tx_ctx_cnt != FI_SHARED_CONTEXT && h->tx_ctx_cnt > p->tx_ctx_cnt)
		REJECT("tx_ctx_cnt %zu too large", h->tx_ctx_cnt);
	if (h->rx_ctx_cnt != FI_SHARED_CONTEXT && h->rx_ctx_cnt > p->rx_ctx_cnt)
		REJECT("rx_ctx_cnt %zu too large", h->rx_ctx_cnt);
	/* A shared context is offered where the template's count says so,
	 * or its domain lets endpoints share one (max_ep_stx_ctx /
	 * max_ep_srx_ctx); the answer then names it, as asked. */
	if (h->tx_ctx_cnt == FI_SHARED_CONTEXT) {
		if (p->tx_ctx_cnt != FI_SHARED_CONTEXT &&
		    !(tmpl->domain_attr && tmpl->domain_attr->max_ep_stx_ctx))
			REJECT("shared transmit contexts not supported");
		o->tx_ctx_cnt = FI_SHARED_CONTEXT;
	}
	if (h->rx_ctx_cnt == FI_SHARED_CONTEXT) {
		if (p->rx_ctx_cnt != FI_SHARED_CONTEXT &&
		    !(tmpl->domain_attr && tmpl->domain_attr->max_ep_srx_ctx))
			REJECT("shared receive contexts not supported");
		o->rx_ctx_cnt = FI_SHARED_CONTEXT;
	}
	if (h->auth_key_size > 0)
		REJECT("authorization keys not supported");
	if (h->mem_tag_format)
		o->mem_tag_format = h->mem_tag_format;
	return 0;
}

/* The fields transmit and receive attributes share, in the order both
 * structs declare them. */
struct xfer_attr {
	uint64_t caps, mode, op_flags, msg_order, comp_order;
};

#define XFER_ATTR(a)                                                                     \
	{                                                                                \
		(a)->caps, (a)->mode, (a)->op_flags, (a)->msg_order, (a)->comp_order     \
	}

/* Checks common to tx and rx attributes; flags_free are operation flags
 * every provider honours as defaults whatever its template says (loom's
 * providers are all on the RDM engine, which serves the completion levels
 * on every call).  applies is what the direction's caps can hold, and
 * info_caps the endpoint's answer, which a context's caps stay within
 * (man fi_endpoint).  o holds the answer so far and is narrowed only where
 * the hints ask. */
static int match_xfer(const struct fi_info *tmpl, const char *dir,
                      const struct xfer_attr *h, const struct xfer_attr *p,
                      uint64_t info_mode, uint64_t flags_free, uint64_t applies,
                      uint64_t info_caps, struct xfer_attr *o)
{
	/* A bit that does not apply to the direction asks nothing of it, as
	 * when an application copies its caps into tx_attr and rx_attr. */
	uint64_t want = h->caps & applies, mods = applies & ALL_MODIFIERS;

	if (!caps_ok(want, p->caps, mods))
		REJECT("%s caps 0x%llx not supported", dir, (unsigned long long)want);
	if (expand_caps(want, mods) & ~info_caps)
		REJECT("%s caps 0x%llx beyond the endpoint's", dir,
		       (unsigned long long)(expand_caps(want, mods) & ~info_caps));
	if (h->op_flags & ~p->op_flags & ~flags_free)
		REJECT("%s op_flags 0x%llx not supported", dir,
		       (unsigned long long)h->op_flags);
	if (h->msg_order & ~p->msg_order)
		REJECT("%s msg_order 0x%llx not supported", dir,
		       (unsigned long long)h->msg_order);
	if (h->comp_order & ~p->comp_order)
		REJECT("%s comp_order 0x%llx not supported", dir,
		       (unsigned long long)h->comp_order);
	if (p->mode & ~(h->mode ? h->mode : info_mode))
		REJECT("%s mode 0x%llx required", dir, (unsigned long long)p->mode);
	if (want)
		o->caps = narrow_caps(want, p->caps, mods) & info_caps;
	if (h->op_flags)
		o->op_flags = h->op_flags;
	if (h->msg_order)
		o->msg_order = h->msg_order | p->msg_order;
	return 0;
}

static int match_tx(const struct fi_info *tmpl, const struct fi_info *hints,
                    struct fi_info *out)
{
	const struct fi_tx_attr *p = tmpl->tx_attr, *h = hints->tx_attr;
	struct fi_tx_attr *o = out->tx_attr;
	struct xfer_attr hx = XFER_ATTR(h ? h : p), px = XFER_ATTR(p), ox = XFER_ATTR(o);
	int ret;

	if (!h)
		return 0;
	/* FI_INJECT too: every transmit call of the engine copies the data
	 * (or fails with -FI_EMSGSIZE past inject_size) when it is set. */
	ret = match_xfer(tmpl, "tx", &hx, &px, hints->mode,
	                 FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE |
	                     FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE,
	                 LM_TX_CAPS, out->caps, &ox);
	if (ret)
		return ret;
	if (h->inject_size > p->inject_size || h->size > p->size ||
	    h->iov_limit > p->iov_limit || h->rma_iov_limit > p->rma_iov_limit)
		REJECT("a tx size exceeds the provider's");
	o->caps = ox.caps;
	o->op_flags = ox.op_flags;
	o->msg_order = ox.msg_order;
	if (h->tclass)
		o->tclass = h->tclass;
	return 0;
}

static int match_rx(const struct fi_info *tmpl, const struct fi_info *hints,
                    struct fi_info *out)
{
	const struct fi_rx_attr *p = tmpl->rx_attr, *h = hints->rx_attr;
	struct fi_rx_attr *o = out->rx_attr;
	struct xfer_attr hx = XFER_ATTR(h ? h : p), px = XFER_ATTR(p), ox = XFER_ATTR(o);
	int ret;

	if (!h)
		return 0;
	ret = match_xfer(tmpl, "rx", &hx, &px, hints->mode, FI_COMPLETION | FI_MULTI_RECV,
	                 LM_RX_CAPS, out->caps, &ox);
	if (ret)
		return ret;
	if (h->total_buffered_recv > p->total_buffered_recv || h->size > p->size ||
	    h->iov_limit > p->iov_limit)
		REJECT("an rx size exceeds the provider's");
	o->caps = ox.caps;
	o->op_flags = ox.op_flags;
	o->msg_order = ox.msg_order;
	/* A smaller buffering budget asked for is the one the endpoint uses. */
	if (h->total_buffered_recv)
		o->total_buffered_recv = h->total_buffered_recv;
	return 0;
}

static bool addr_format_ok(uint32_t want, uint32_t have)
{
	if (!want || want == have)
		return true;
	/* FI_SOCKADDR means any sockaddr the runtime family decides. */
	return want == FI_SOCKADDR && (have == FI_SOCKADDR_IN || have == FI_SOCKADDR_IN6);
}

static int match_top(const struct fi_info *tmpl, const struct fi_info *hints,
                     struct fi_info *out)
{
	const struct fi_fabric_attr *pf = tmpl->fabric_attr, *hf = hints->fabric_attr;

	if (!caps_ok(hints->caps, tmpl->caps, ALL_MODIFIERS))
		REJECT("caps 0x%llx not supported",
		       (unsigned long long)(hints->caps & ~tmpl->caps));
	/* Modes are requirements the application must accept: a zero mode
	 * hint accepts none. */
	if (tmpl->mode & ~hints->mode)
		REJECT("mode 0x%llx required",
		       (unsigned long long)(tmpl->mode & ~hints->mode));
	if (!addr_format_ok(hints->addr_format, tmpl->addr_format))
		REJECT("address format %u not supported", hints->addr_format);
	if (hf && hf->name && (!pf->name || strcmp(hf->name, pf->name)))
		REJECT("fabric %s not offered", hf->name);

	out->caps = narrow_caps(hints->caps, tmpl->caps, ALL_MODIFIERS);
	out->mode = tmpl->mode & hints->mode;
	if (hints->handle)
		out->handle = hints->handle;
	return 0;
}

static int copy_addr(void **dst, size_t *dstlen, const void *src, size_t len)
{
	if (!src || !len)
		return 0;
	free(*dst);
	*dst = malloc(len);
	if (!*dst) {
		*dstlen = 0;
		return -FI_ENOMEM;
	}
	memcpy(*dst, src, len);
	*dstlen = len;
	return 0;
}

/* The template's capabilities a caller of version asking hints is not
 * offered.  Before 2.0 the bit of FI_EXACT_DIRECTED_RECV is
 * FI_VARIABLE_MSG, which no provider here implements; the two tagged bits
 * name no capability there, so a caller that asks for them speaks 2.x
 * (an old version number with new headers) and gets them.  From 2.0 on,
 * exact directed receive is reported only when asked for: it refuses
 * FI_ADDR_UNSPEC receives, which a program that asked for everything
 * (caps 0) and opens its endpoint with the answer does not expect. */
static uint64_t caps_hidden(uint32_t version, const struct fi_info *hints)
{
	uint64_t asked = 0;

	if (hints)
		asked = hints->caps | (hints->rx_attr ? hints->rx_attr->caps : 0);
	if (FI_VERSION_LT(version, FI_VERSION(2, 0)))
		return FI_EXACT_DIRECTED_RECV |
		       ((FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV) & ~asked);
	return FI_EXACT_DIRECTED_RECV & ~asked;
}

int lm_info_match(uint32_t version, const struct fi_info *tmpl,
                  const struct fi_info *hints, struct fi_info **out)
{
	uint64_t hide = caps_hidden(version, hints);
	struct fi_info view;
	struct fi_rx_attr rx_view;
	struct fi_info *o;
	int ret = 0;

	*out = NULL;
	/* Matched and answered as if the template lacked what it hides. */
	if ((tmpl->caps | (tmpl->rx_attr ? tmpl->rx_attr->caps : 0)) & hide) {
		view = *tmpl;
		view.caps &= ~hide;
		if (tmpl->rx_attr) {
			rx_view = *tmpl->rx_attr;
			rx_view.caps &= ~hide;
			view.rx_attr = &rx_view;
		}
		tmpl = &view;
	}
	o = lm_info_dup(tmpl);
	if (!o)
		return -FI_ENOMEM;
	/* Counters of providers built on util hold 64-bit values (API 2.x
	 * reports the limit; a template that says nothing gets util's). */
	if (!o->domain_attr->max_cntr_value)
		o->domain_attr->max_cntr_value = UINT64_MAX;
	if (!o->domain_attr->max_err_cntr_value)
		o->domain_attr->max_err_cntr_value = UINT64_MAX;
	if (o->domain_attr->data_progress == LM_PROGRESS_EITHER)
		o->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	if (hints) {
		ret = match_top(tmpl, hints, o);
		if (!ret)
			ret = match_ep(tmpl, hints, o);
		if (!ret)
			ret = match_domain(tmpl, hints, o);
		if (!ret)
			ret = match_tx(tmpl, hints, o);
		if (!ret)
			ret = match_rx(tmpl, hints, o);
		if (!ret && hints->addr_format &&
		    hints->addr_format == tmpl->addr_format) {
			ret = copy_addr(&o->src_addr, &o->src_addrlen, hints->src_addr,
			                hints->src_addrlen);
			if (!ret)
				ret = copy_addr(&o->dest_addr, &o->dest_addrlen,
				                hints->dest_addr, hints->dest_addrlen);
		}
	}
	if (!ret)
		ret = match_mr(version, tmpl, hints, o);
	if (ret) {
		lm_info_free(o);
		return ret;
	}
	/* A context's capabilities are the endpoint's that apply to its
	 * direction (man fi_endpoint): never a domain capability, never one
	 * the answer narrowed away. */
	o->tx_attr->caps &= o->caps & LM_TX_CAPS;
	o->rx_attr->caps &= o->caps & LM_RX_CAPS;
	*out = o;
	return 0;
}

int lm_info_match_list(uint32_t version, const struct fi_info *const *tmpls,
                       const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info **tail = info;
	int ret;

	while (*tail)
		tail = &(*tail)->next;
	for (; *tmpls; tmpls++) {
		ret = lm_info_match(version, *tmpls, hints, tail);
		if (ret == -FI_ENODATA)
			continue;
		if (ret)
			return ret;
		tail = &(*tail)->next;
	}
	return *info ? 0 : -FI_ENODATA;
}
