/* prov.c - the tcp provider: its RDM and MSG answers on each usable
 * interface address (util's inet.c finds them and reads the query), its
 * parameters, and the fabric and domain (the RDM engine's, over the TCP
 * link). */
#include <limits.h>
#include <stdlib.h>

#include "duo.h"
#include "shm.h"
#include "tcp.h"
#include "v1_names.h"

#define TCP_CAPS                                                                         \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_NAMED_RX_CTX | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RMA_EVENT | FI_FENCE |      \
	 FI_SHARED_AV | FI_TRIGGER | LM_CAPS_V2)
/* A context holds only the caps of its direction; FI_LOCAL_COMM and
 * FI_REMOTE_COMM are the endpoint's and the domain's (man fi_endpoint). */
#define TCP_TX_CAPS    (TCP_CAPS & LM_TX_CAPS)
#define TCP_RX_CAPS    (TCP_CAPS & LM_RX_CAPS)
/* Largest eager message: frames carry up to TCP_MAX_PAYLOAD of rendezvous
 * data, but each eager message may land unexpected, and many senders'
 * windows of large eager messages would reach the unexpected-data limit,
 * where the endpoint stops reading. */
#define TCP_EAGER_MAX (64 * 1024)

/* A connection not up after this long fails its operations: long
 * enough for a loaded host to accept, short enough that a dead address
 * does not hang a program. */
#define TCP_CONN_TIMEOUT_MS 10000
/* Socket buffers: deep enough that a stream of large messages keeps the
 * connection busy while the peer catches up (the kernel caps them at
 * net.core.wmem_max and rmem_max). */
#define TCP_SOCKBUF (4 << 20)

void tcp_params_read(struct tcp_params *params)
{
	*params = (struct tcp_params){.conn_timeout_ms = TCP_CONN_TIMEOUT_MS,
	                              .sockbuf = TCP_SOCKBUF};
	lm_inet_ports_read(&tcp_prov, &params->port_low, &params->port_high);
	lm_param_int_range(&tcp_prov, "conn_timeout", 1, INT_MAX, &params->conn_timeout_ms);
	lm_param_int_range(&tcp_prov, "sockbuf", 0, INT_MAX, &params->sockbuf);
	int on = 1;

	fi_param_get_bool(&tcp_prov, "enable_shm", &on);
	params->enable_shm = on != 0;
}

static const struct fi_tx_attr tcp_tx = {
    .caps = TCP_TX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .inject_size = LM_RDM_INJECT_SIZE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = LM_RMA_IOV_LIMIT,
};
static const struct fi_rx_attr tcp_rx = {
    .caps = TCP_RX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .total_buffered_recv = LM_RDM_UNEXP_MAX, /* unexpected data held, at most */
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
/* FI_EP_MSG: one peer, so no source addressing or directed receives. */
#define TCP_MSG_CAPS                                                                     \
	(TCP_CAPS & ~(FI_SOURCE | FI_SHARED_AV | FI_DIRECTED_RECV | FI_TAGGED_DIRECTED_RECV |           \
	              FI_EXACT_DIRECTED_RECV | FI_NAMED_RX_CTX))

static const struct fi_ep_attr tcp_msg_ep = {
    .type = FI_EP_MSG,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .msg_prefix_size = 0,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};

static const struct fi_ep_attr tcp_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_SOCK_TCP,
    .protocol_version = TCP_PROTO_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};
static const struct fi_domain_attr tcp_dom = {
    LM_RDM_DOMAIN_ATTRS,
    .caps = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV,
};

/* ---- getinfo ---------------------------------------------------------------------- */

/* What interface f offers for q: its RDM and MSG infos that match hints,
 * with their addresses set, in *got (NULL when none). */
static int iface_infos(uint32_t version, const struct fi_info *hints,
                       const struct lm_inet_query *q, struct lm_iface *f,
                       struct fi_info **got)
{
	struct fi_tx_attr tx = tcp_tx;
	struct fi_rx_attr rx = tcp_rx, mrx = tcp_rx;
	struct fi_ep_attr ep = tcp_ep, mep = tcp_msg_ep;
	struct fi_domain_attr dom = tcp_dom, mdom;
	struct fi_fabric_attr fab = {.name = f->fabric, .prov_version = LM_PROV_VERSION};
	struct fi_info tmpl = {.caps = TCP_CAPS,
	                       .addr_format = lm_inet_format(q, f),
	                       .tx_attr = &tx,
	                       .rx_attr = &rx,
	                       .ep_attr = &ep,
	                       .domain_attr = &dom,
	                       .fabric_attr = &fab};
	struct fi_info msg = tmpl;
	const struct fi_info *tmpls[] = {&tmpl, &msg, NULL};
	struct fi_info *list = NULL;
	int ret;

	*got = NULL;
	dom.name = f->name;
	mdom = dom;
	mrx.caps &= TCP_MSG_CAPS;
	msg.caps = TCP_MSG_CAPS;
	msg.rx_attr = &mrx;
	msg.ep_attr = &mep;
	msg.domain_attr = &mdom;
	if (lm_info_match_list(version, tmpls, hints, &list))
		return 0;
	lm_rdm_progress_default(&tcp_prov, hints, list);
	ret = lm_inet_info_addrs(list, q, f);
	if (ret) {
		fi_freeinfo(list);
		return ret;
	}
	*got = list;
	return 0;
}

static int tcp_getinfo(uint32_t version, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	return lm_inet_getinfo(&tcp_prov, version, node, service, flags, hints,
	                       iface_infos, info);
}

/* ---- fabric and domain ---------------------------------------------------- */

/* An engine domain with the parameters its links share (their link_ctx),
 * and, when RDM endpoints reach same-host peers through shared memory, the
 * link of two that does it (its link ops and context). */
struct tcp_domain {
	struct lm_rdm_domain rdm; /* first: util's fi_close frees the whole */
	struct tcp_params params;
	struct lm_duo duo;
};

static int tcp_endpoint(struct fid_domain *domain, struct fi_info *info,
                        struct fid_ep **ep, void *context)
{
	if (info && info->ep_attr && info->ep_attr->type == FI_EP_MSG)
		return tcp_msg_endpoint(domain, info, ep, context);
	return lm_rdm_endpoint(domain, info, ep, context);
}

/* The link of the info's address family. */
static const struct lm_link_ops *link_ops_of(const struct fi_info *info)
{
	return lm_inet_info_family(info) == AF_INET6 ? &tcp6_link_ops : &tcp_link_ops;
}

static const struct fi_ops_domain tcp_domain_ops =
    LM_RDM_DOMAIN_OPS(tcp_endpoint);

static int tcp_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct tcp_domain *d;
	const struct lm_link_ops *ops;
	void *ctx;
	int ret;

	if (!info || !info->domain_attr)
		return -FI_EINVAL;
	if (info->domain_attr->name &&
	    !lm_iface_named(&tcp_prov, NULL, info->domain_attr->name))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	tcp_params_read(&d->params);
	ops = lm_duo_pick(&d->duo, d->params.enable_shm, &tcp_prov, link_ops_of(info),
	                  &d->params, &shm_link_ops, &ctx);
	ret = lm_rdm_domain_init(&d->rdm, fab, info, ops, ctx, context);
	if (ret) {
		free(d);
		return ret;
	}
	d->rdm.util.domain_fid.ops = (struct fi_ops_domain *)&tcp_domain_ops;
	/* Bulk copies (CMA) go to the peers shared memory reaches. */
	d->rdm.no_bulk = !d->params.enable_shm;
	d->rdm.eager_max = TCP_EAGER_MAX;
	*domain = &d->rdm.util.domain_fid;
	return 0;
}

static const struct fi_ops_fabric tcp_fabric_ops =
    LM_FABRIC_OPS(tcp_domain_open, tcp_passive_ep);

static int tcp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                           void *context)
{
	return lm_inet_fabric_open(&tcp_prov, &tcp_fabric_ops, attr, fabric, context);
}

struct fi_provider tcp_prov = {
    .version = LM_PROV_VERSION,
    .fi_version = LM_PROV_FI_VERSION,
    .name = "tcp",
    .getinfo = tcp_getinfo,
    .fabric = tcp_fabric_open,
};

struct fi_provider *tcp_prov_init(void)
{
	tcp_log_prov = &tcp_prov;
	lm_rdm_progress_param(&tcp_prov);
	lm_inet_params_define(&tcp_prov);
	fi_param_define(&tcp_prov, "conn_timeout", FI_PARAM_INT,
	                "Milliseconds a connection may take to come up before its "
	                "operations fail (default: 10000)");
	fi_param_define(&tcp_prov, "sockbuf", FI_PARAM_INT,
	                "Send and receive buffer bytes of each connection's socket, "
	                "capped by net.core.wmem_max and rmem_max; 0 leaves them to "
	                "the kernel's autotuning (default: 4194304)");
	fi_param_define(&tcp_prov, "enable_shm", FI_PARAM_BOOL,
	                "RDM endpoints send to peers on the same host through shared "
	                "memory, found in the connection handshake (default: 1)");
	return &tcp_prov;
}
