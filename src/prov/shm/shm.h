/* shm.h - the shm provider: the RDM engine over the shared-memory link.
 * shm_link.h is the transport; link.c adapts it to the engine's link
 * interface; prov.c is the fi_provider. */
#ifndef LOOM_SHM_H
#define LOOM_SHM_H

#include "rdm.h"
#include "shm_link.h"

/* Binary form of "fi_shm://<pid>/<token>", as the AV stores it. */
struct shm_bin_addr {
	int32_t pid;
	uint32_t zero;
	uint64_t token;
};

extern const struct lm_link_ops shm_link_ops;
extern struct fi_provider shm_prov;

struct fi_provider *shm_prov_init(void);

/* The region under an shm link (link.c), for tests that check its state. */
struct shm_region *shm_link_region(struct lm_link *link);

#endif
