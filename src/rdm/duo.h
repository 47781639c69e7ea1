/* duo.h - a link of two: a network link for every peer and the
 * shared-memory link for the peers on the same host, under one endpoint
 * (docs/ARCHITECTURE.md, "One endpoint over two links").
 *
 * The engine sees one link with the network link's addresses.  The
 * network link's handshake carries each side's offer (its shared-memory
 * address and host identity, lm_link_attr.offer); a peer whose offer names
 * a region this process can open is sent to through shared memory from
 * then on, every other peer through the network.  Each direction is the
 * sender's choice, made before its first packet to that peer, so per-peer
 * order holds; whatever link brings a packet, the engine is told the
 * sender's network address. */
#ifndef LOOM_RDM_DUO_H
#define LOOM_RDM_DUO_H

#include <stdbool.h>

#include "link.h"

/* A provider domain's: the ops the engine calls (the network link's
 * addressing, the duo's transfers) and the two links' own. */
struct fi_provider;
struct lm_duo {
	struct lm_link_ops ops;
	const struct fi_provider *prov; /* whose log */
	const struct lm_link_ops *net, *local;
	void *net_ctx, *local_ctx;
};

/* Fill d (logging as prov) for net (opened with net_ctx) and local (local_ctx): then
 * &d->ops and d are the engine domain's link ops and context.  Connected
 * (FI_EP_MSG) links open as the network link alone. */
void lm_duo_init(struct lm_duo *d, const struct fi_provider *prov,
                 const struct lm_link_ops *net, void *net_ctx,
                 const struct lm_link_ops *local, void *local_ctx);

/* A network provider's domain: with both, the link of two in d (as
 * lm_duo_init fills it), else net alone.  Returns the link ops for the
 * engine's domain; *ctx is their context. */
const struct lm_link_ops *lm_duo_pick(struct lm_duo *d, bool both,
                                      const struct fi_provider *prov,
                                      const struct lm_link_ops *net, void *net_ctx,
                                      const struct lm_link_ops *local, void **ctx);

#endif
