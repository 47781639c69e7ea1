/* strerror.c - fi_strerror: the exact text for libfabric's own codes, the C
 * library's text for errno values, and per-thread text for unknown ones. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "check.h"

static void expect(int errnum, const char *want)
{
	const char *got = fi_strerror(errnum);

	check_count++;
	if (!got || strcmp(got, want) != 0) {
		check_failures++;
		fprintf(stderr, "FAIL fi_strerror(%d): got \"%s\", want \"%s\"\n", errnum,
		        got ? got : "(NULL)", want);
	}
}

/* Texts as the reference libfabric 1.17 prints them (glibc, C locale), and
 * 2.6 for the codes 2.x added. */
static void check_texts(void)
{
	static const char *const fi_codes[] = {
	    "Unspecified error",
	    "Provided buffer is too small",
	    "Operation not permitted in current state",
	    "Error available",
	    "Flags not supported",
	    "Missing or unavailable event queue",
	    "Invalid resource domain",
	    "Missing or unavailable completion queue",
	    "CRC error",
	    "Truncation error",
	    "Required key not available",
	    "Missing or unavailable address vector",
	    "Queue has been overrun",
	    "Receiver not ready, no receive buffers available",
	    /* 2.x's codes, as libfabric 2.6 prints them */
	    "Memory registration limit exceeded",
	    "Host unreacheable due to firewall",
	};

	for (int i = 0; i < (int)(sizeof(fi_codes) / sizeof(fi_codes[0])); i++) {
		expect(FI_ERRNO_OFFSET + i, fi_codes[i]);
		expect(-(FI_ERRNO_OFFSET + i), fi_codes[i]);
	}
	expect(FI_ETRUNC, "Truncation error");
	expect(-FI_EAVAIL, "Error available");
	expect(FI_ENORX, "Receiver not ready, no receive buffers available");

	/* Past the last code everything is "Unspecified error". */
	expect(FI_ERRNO_MAX, "Unspecified error");
	expect(300, "Unspecified error");
	expect(-1000, "Unspecified error");
	expect(INT_MAX, "Unspecified error");
	expect(INT_MIN + 1, "Unspecified error");

	/* errno values, either sign */
	expect(0, "Success");
	expect(FI_EPERM, "Operation not permitted");
	expect(-FI_EPERM, "Operation not permitted");
	expect(-FI_ENOENT, "No such file or directory");
	expect(-FI_EAGAIN, "Resource temporarily unavailable");
	expect(-FI_EINVAL, "Invalid argument");
	expect(-FI_ENOMEM, "Cannot allocate memory");
	expect(-FI_ENOSYS, "Function not implemented");
	expect(-FI_ENODATA, "No data available");
	expect(-FI_EOPNOTSUPP, "Operation not supported");
	expect(-FI_ECONNREFUSED, "Connection refused");
	expect(-FI_ETIMEDOUT, "Connection timed out");
	expect(-FI_ECANCELED, "Operation canceled");
	expect(133, "Memory page has hardware error");

	/* errno range values the C library has no name for */
	expect(134, "Unknown error 134");
	expect(-200, "Unknown error 200");
	expect(255, "Unknown error 255");
	expect(INT_MIN, "Unknown error -2147483648");
}

/* Unknown-errno text is built per call; two threads must each keep their
 * own while the other keeps asking. */
static void *hammer(void *arg)
{
	int errnum = *(int *)arg;
	char want[64];

	snprintf(want, sizeof(want), "Unknown error %d", errnum);
	for (int i = 0; i < 20000; i++) {
		const char *got = fi_strerror(errnum);
		if (strcmp(got, want) != 0)
			return (void *)got;
	}
	return NULL;
}

static void check_threads(void)
{
	int codes[2] = {150, 250};
	pthread_t t[2];
	void *bad[2];

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, hammer, &codes[i]);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &bad[i]);
		check_count++;
		if (bad[i]) {
			check_failures++;
			fprintf(stderr,
			        "FAIL thread asking for %d saw another thread's text\n",
			        codes[i]);
		}
	}
}

int main(void)
{
	check_texts();
	check_threads();
	return check_done();
}
