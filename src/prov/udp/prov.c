/* prov.c - the udp provider: an RDM and a DGRAM fi_info per usable IPv4
 * and IPv6 interface address (loopback last), its parameters, and the
 * fabric and domain (the RDM engine's, over the UDP link, whose DGRAM
 * endpoints are dgram.c's). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "inet.h"
#include "shm.h"
#include "udp.h"
#include "v1_names.h"

#define UDP_CAPS                                                                         \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ |         \
	 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE | FI_DIRECTED_RECV |    \
	 FI_MULTI_RECV | FI_NAMED_RX_CTX | FI_LOCAL_COMM | FI_REMOTE_COMM |              \
	 FI_RMA_EVENT | FI_FENCE | FI_SHARED_AV | FI_TRIGGER | LM_CAPS_V2)

/* A peer silent this long while data waits for its acknowledgement is
 * gone: as long as tcp gives a connection to come up. */
#define UDP_PEER_TIMEOUT_MS 10000
/* Socket buffers: deep enough for a window of full datagrams from each of
 * many peers (the kernel caps them at net.core.wmem_max and rmem_max). */
#define UDP_SOCKBUF (8 << 20)

void udp_params_read(struct udp_params *params)
{
	int on = 1;

	*params = (struct udp_params){.peer_timeout_ms = UDP_PEER_TIMEOUT_MS,
	                              .sockbuf = UDP_SOCKBUF};
	lm_inet_ports_read(&udp_prov, &params->port_low, &params->port_high);
	lm_param_int_range(&udp_prov, "mtu", 576, 65535, &params->mtu);
	lm_param_int_range(&udp_prov, "peer_timeout", 1, INT_MAX, &params->peer_timeout_ms);
	lm_param_int_range(&udp_prov, "sockbuf", 0, INT_MAX, &params->sockbuf);
	fi_param_get_bool(&udp_prov, "enable_shm", &on);
	params->enable_shm = on != 0;
	on = 1;
	fi_param_get_bool(&udp_prov, "gso", &on);
	params->gso = on != 0;
}

static const struct fi_tx_attr udp_tx = {
    .caps = UDP_CAPS & LM_TX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .inject_size = LM_RDM_INJECT_SIZE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
    .rma_iov_limit = LM_RMA_IOV_LIMIT,
};
static const struct fi_rx_attr udp_rx = {
    .caps = UDP_CAPS & LM_RX_CAPS,
    .msg_order = FI_ORDER_SAS,
    .comp_order = LM_ORDER_NONE,
    .total_buffered_recv = LM_RDM_UNEXP_MAX,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
static const struct fi_ep_attr udp_ep = {
    .type = FI_EP_RDM,
    .protocol = FI_PROTO_UDP,
    .protocol_version = UDP_PROTO_VERSION,
    .max_msg_size = LM_RDM_MAX_MSG_SIZE,
    .mem_tag_format = LM_TAG_FORMAT_ALL,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};
static const struct fi_domain_attr udp_dom = {
    LM_RDM_DOMAIN_ATTRS,
    .caps = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV,
};

/* DGRAM: one datagram a message (max_msg_size and inject_size are set
 * per interface); sends complete in the call, so progress is the
 * receiver's reads alone. */
static const struct fi_tx_attr dg_tx = {
    .caps = UDP_DGRAM_CAPS & LM_TX_CAPS,
    .comp_order = LM_ORDER_NONE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
static const struct fi_rx_attr dg_rx = {
    .caps = UDP_DGRAM_CAPS & LM_RX_CAPS,
    .comp_order = LM_ORDER_NONE,
    .size = LM_RDM_QUEUE_SIZE,
    .iov_limit = LM_IOV_LIMIT,
};
static const struct fi_ep_attr dg_ep = {
    .type = FI_EP_DGRAM,
    .protocol = FI_PROTO_UDP,
    .protocol_version = UDP_DG_VERSION,
    .tx_ctx_cnt = 1,
    .rx_ctx_cnt = 1,
};

/* What interface f offers for q: the RDM and the DGRAM info, those that
 * match hints. */
static int iface_infos(uint32_t version, const struct fi_info *hints,
                       const struct lm_inet_query *q, struct lm_iface *f,
                       struct fi_info **got)
{
	struct fi_tx_attr tx = udp_tx, dtx = dg_tx;
	struct fi_rx_attr rx = udp_rx, drx = dg_rx;
	struct fi_ep_attr ep = udp_ep, dep = dg_ep;
	struct fi_domain_attr dom = udp_dom, ddom = udp_dom;
	struct fi_fabric_attr fab = {.name = f->fabric, .prov_version = LM_PROV_VERSION};
	struct fi_info tmpl = {.caps = UDP_CAPS,
	                       .addr_format = lm_inet_format(q, f),
	                       .tx_attr = &tx,
	                       .rx_attr = &rx,
	                       .ep_attr = &ep,
	                       .domain_attr = &dom,
	                       .fabric_attr = &fab};
	struct fi_info dtmpl = {.caps = UDP_DGRAM_CAPS,
	                        .addr_format = tmpl.addr_format,
	                        .tx_attr = &dtx,
	                        .rx_attr = &drx,
	                        .ep_attr = &dep,
	                        .domain_attr = &ddom,
	                        .fabric_attr = &fab};
	const struct fi_info *tmpls[] = {&tmpl, &dtmpl, NULL};
	struct fi_info *list = NULL;
	struct udp_params params;
	int ret;

	*got = NULL;
	dom.name = ddom.name = f->name;
	ddom.data_progress = FI_PROGRESS_MANUAL;
	/* DGRAM endpoints share transmit contexts (a datagram goes at the
	 * call), not receive contexts. */
	ddom.max_ep_srx_ctx = 0;
	udp_params_read(&params);
	dep.max_msg_size = udp_dgram_max(&params, &f->addr) - sizeof(struct udp_dg_hdr);
	dtx.inject_size = dep.max_msg_size;
	/* An injected message goes in one packet, eager: one that took the
	 * rendezvous would need its sender's progress after fi_inject
	 * returned, and programs (fi_pingpong) inject their last message
	 * and go to wait for their peer by other means.  On a 1500-byte
	 * MTU a packet holds 1320 bytes. */
	tx.inject_size = LM_MIN((size_t)LM_RDM_INJECT_SIZE,
	                        udp_link_payload(&params, &f->addr, sizeof(struct lm_rdm_hdr)));
	if (lm_info_match_list(version, tmpls, hints, &list))
		return 0;
	lm_rdm_progress_default(&udp_prov, hints, list);
	ret = lm_inet_info_addrs(list, q, f);
	if (ret) {
		fi_freeinfo(list);
		return ret;
	}
	*got = list;
	return 0;
}

static int udp_getinfo(uint32_t version, const char *node, const char *service,
                       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	return lm_inet_getinfo(&udp_prov, version, node, service, flags, hints, iface_infos,
	                       info);
}

/* ---- fabric and domain ---------------------------------------------------- */

/* The link of the info's address family. */
static const struct lm_link_ops *link_ops_of(const struct fi_info *info)
{
	return lm_inet_info_family(info) == AF_INET6 ? &udp6_link_ops : &udp_link_ops;
}

/* The engine's endpoints, or dgram.c's for a DGRAM info. */
static int udp_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                        void *context)
{
	if (info && info->ep_attr && info->ep_attr->type == FI_EP_DGRAM) {
		if (!ep)
			return -FI_EINVAL;
		return udp_dgram_open(lm_container_of(domain, struct udp_domain,
		                                      rdm.util.domain_fid),
		                      info, ep, context);
	}
	return lm_rdm_endpoint(domain, info, ep, context);
}

static const struct fi_ops_domain udp_domain_ops = LM_RDM_DOMAIN_OPS(udp_endpoint);

static int udp_domain_open(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **domain, void *context)
{
	struct lm_fabric *fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	struct udp_domain *d;
	const struct lm_link_ops *ops;
	void *ctx;
	int ret;

	if (!info || !info->domain_attr)
		return -FI_EINVAL;
	if (info->domain_attr->name &&
	    !lm_iface_named(&udp_prov, NULL, info->domain_attr->name))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	udp_params_read(&d->params);
	ops = lm_duo_pick(&d->duo, d->params.enable_shm, &udp_prov, link_ops_of(info),
	                  &d->params, &shm_link_ops, &ctx);
	ret = lm_rdm_domain_init(&d->rdm, fab, info, ops, ctx, context);
	if (ret) {
		free(d);
		return ret;
	}
	d->rdm.util.domain_fid.ops = (struct fi_ops_domain *)&udp_domain_ops;
	/* Bulk copies (CMA) go to the peers shared memory reaches. */
	d->rdm.no_bulk = !d->params.enable_shm;
	*domain = &d->rdm.util.domain_fid;
	return 0;
}

static const struct fi_ops_fabric udp_fabric_ops =
    LM_FABRIC_OPS(udp_domain_open, lm_fabric_no_pep);

static int udp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                           void *context)
{
	return lm_inet_fabric_open(&udp_prov, &udp_fabric_ops, attr, fabric, context);
}

struct fi_provider udp_prov = {
    .version = LM_PROV_VERSION,
    .fi_version = LM_PROV_FI_VERSION,
    .name = "udp",
    .getinfo = udp_getinfo,
    .fabric = udp_fabric_open,
};

struct fi_provider *udp_prov_init(void)
{
	udp_log_prov = &udp_prov;
	lm_rdm_progress_param(&udp_prov);
	lm_inet_params_define(&udp_prov);
	fi_param_define(&udp_prov, "mtu", FI_PARAM_INT,
	                "Largest IP packet a datagram makes, 576 to 65535; larger "
	                "messages go in several (default: the MTU of the endpoint's "
	                "interface)");
	fi_param_define(&udp_prov, "peer_timeout", FI_PARAM_INT,
	                "Milliseconds a peer may stay silent while data waits for its "
	                "acknowledgement before its operations fail (default: 10000)");
	fi_param_define(&udp_prov, "sockbuf", FI_PARAM_INT,
	                "Send and receive buffer bytes of each endpoint's socket, capped "
	                "by net.core.wmem_max and rmem_max; 0 leaves them to the kernel "
	                "(default: 8388608)");
	fi_param_define(&udp_prov, "enable_shm", FI_PARAM_BOOL,
	                "RDM endpoints send to peers on the same host through shared "
	                "memory, found in a handshake over UDP (default: 1)");
	fi_param_define(&udp_prov, "gso", FI_PARAM_BOOL,
	                "Where the kernel can (UDP_SEGMENT, UDP_GRO), a large message's "
	                "datagrams go out many to a send, cut by the kernel, and arrive "
	                "joined, many to a read; 0 sends and reads each alone (default: 1)");
	return &udp_prov;
}
