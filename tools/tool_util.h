/* Helpers shared by fi_pingpong and the benchmarks in bench/ that need no
 * libfabric: the clock and sizes with k/m/g suffixes (tool_util.c). The fabric
 * helpers are in tool_fabric.h. */
#ifndef LOOM_TOOL_UTIL_H
#define LOOM_TOOL_UTIL_H

#include <stddef.h>

/* Monotonic time in microseconds. */
double tool_now_us(void);

/* A number in the given strtoull base with an optional k, m or g suffix (any
 * case, binary units), at most max. Returns 0, or -1 when s is not one. */
int tool_parse_size(const char *s, int base, unsigned long long max,
                    unsigned long long *out);

#endif
