/* Clock and size parsing for fi_pingpong and the benchmarks (see
 * tool_util.h); nothing here calls libfabric. */
#include "tool_util.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

double tool_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int tool_parse_size(const char *s, int base, unsigned long long max,
                    unsigned long long *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || v > max)
		return -1;
	*out = v;
	return 0;
}
