/* strerror.c - fi_strerror: text for libfabric error codes, falling back on
 * the C library's text for plain errno values. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerror_r returning char *, as meson also sets */
#endif
#include <limits.h>
#include <string.h>

#include "core.h"

/* Codes libfabric adds above the errno range, indexed from FI_ERRNO_OFFSET.
 * Tools and users grep these texts, so they must not drift. */
static const char *const fi_only_text[] = {
    [FI_EOTHER - FI_ERRNO_OFFSET] = "Unspecified error",
    [FI_ETOOSMALL - FI_ERRNO_OFFSET] = "Provided buffer is too small",
    [FI_EOPBADSTATE - FI_ERRNO_OFFSET] = "Operation not permitted in current state",
    [FI_EAVAIL - FI_ERRNO_OFFSET] = "Error available",
    [FI_EBADFLAGS - FI_ERRNO_OFFSET] = "Flags not supported",
    [FI_ENOEQ - FI_ERRNO_OFFSET] = "Missing or unavailable event queue",
    [FI_EDOMAIN - FI_ERRNO_OFFSET] = "Invalid resource domain",
    [FI_ENOCQ - FI_ERRNO_OFFSET] = "Missing or unavailable completion queue",
    [FI_ECRC - FI_ERRNO_OFFSET] = "CRC error",
    [FI_ETRUNC - FI_ERRNO_OFFSET] = "Truncation error",
    [FI_ENOKEY - FI_ERRNO_OFFSET] = "Required key not available",
    [FI_ENOAV - FI_ERRNO_OFFSET] = "Missing or unavailable address vector",
    [FI_EOVERRUN - FI_ERRNO_OFFSET] = "Queue has been overrun",
    [FI_ENORX - FI_ERRNO_OFFSET] = "Receiver not ready, no receive buffers available",
    /* 2.x's, as 2.6 words them (its spelling too: programs compare). */
    [FI_ENOMR - FI_ERRNO_OFFSET] = "Memory registration limit exceeded",
    [FI_EFIREWALLADDR - FI_ERRNO_OFFSET] = "Host unreacheable due to firewall",
};

/* Unknown errno values get "Unknown error N" built per call; a buffer per
 * thread keeps concurrent callers from overwriting each other's text. */
static _Thread_local char unknown_text[64];

LM_EXPORT const char *fi_strerror(int errnum)
{
	/* Callers pass both -FI_EXXX and FI_EXXX.  INT_MIN has no positive
	 * twin; it goes to the C library as it is ("Unknown error -2147483648"),
	 * as libfabric does. */
	int code = errnum < 0 && errnum != INT_MIN ? -errnum : errnum;

	if (code < FI_ERRNO_OFFSET)
		return strerror_r(code, unknown_text, sizeof(unknown_text));
	if (code - FI_ERRNO_OFFSET < (int)LM_ARRAY_SIZE(fi_only_text))
		return fi_only_text[code - FI_ERRNO_OFFSET];
	return fi_only_text[0];
}
