/* looprov.h - "rdmloop", an internal test provider: the RDM engine over the
 * loopback link, so engine tests run in one process before (and besides)
 * any real transport. */
#ifndef LOOM_TEST_LOOPROV_H
#define LOOM_TEST_LOOPROV_H

#include "rdm.h"

/* Register the provider (once) and return fi_getinfo's answer for hints
 * (NULL: caps of every kind); prov_name is set to "rdmloop". */
struct fi_info *looprov_info(enum fi_threading threading, uint64_t caps);

#endif
