/* loop_link.h - the loopback link (loop_link.c), test code only: endpoints
 * of one process exchange packets through in-memory queues; addresses are
 * "loop://<n>".  The rdmloop test provider (looprov.h) runs the RDM engine
 * over it. */
#ifndef LOOM_TEST_LOOP_LINK_H
#define LOOM_TEST_LOOP_LINK_H

#include "rdm.h"

extern const struct lm_link_ops loop_link_ops;
/* Offer bulk reads (default) or not, for endpoints opened afterwards and
 * reads attempted afterwards: tests drive the CTS/DATA fallback with it. */
void loop_link_set_bulk(bool on);

#endif
