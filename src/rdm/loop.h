/* loop.h - the loopback link (loop.c): endpoints of one process exchange
 * packets through in-memory queues; addresses are "loop://<n>". */
#ifndef LOOM_RDM_LOOP_H
#define LOOM_RDM_LOOP_H

#include "rdm.h"

extern const struct lm_link_ops lm_loop_link_ops;
/* Offer bulk reads (default) or not, for endpoints opened afterwards and
 * reads attempted afterwards: tests drive the CTS/DATA fallback with it. */
void lm_loop_set_bulk(bool on);

#endif
