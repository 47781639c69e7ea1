/* v1_names.h - the values of the 1.x names that the 2.x API deprecated,
 * for loom's own code, its tools and its tests.  The public headers' names
 * warn wherever they are used, as libfabric 2.x's do, and a warning is an
 * error in loom's build; loom still takes them from 1.x programs and prints
 * them, so it needs their values under names that do not warn. */
#ifndef LOOM_UTIL_V1_NAMES_H
#define LOOM_UTIL_V1_NAMES_H

#define LM_MR_UNSPEC    0        /* FI_MR_UNSPEC */
#define LM_MR_BASIC     (1 << 0) /* FI_MR_BASIC */
#define LM_MR_SCALABLE  (1 << 1) /* FI_MR_SCALABLE */
#define LM_ORDER_NONE   0ULL     /* FI_ORDER_NONE */
#define LM_ORDER_STRICT 0x1FFULL /* FI_ORDER_STRICT */
#define LM_ORDER_DATA   (1ULL << 16) /* FI_ORDER_DATA */
#define LM_LOCAL_MR     (1ULL << 55) /* FI_LOCAL_MR */
#define LM_REG_MR       (1ULL << 59) /* FI_REG_MR */

#endif
