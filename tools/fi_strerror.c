/* fi_strerror: print the libfabric message for an error number given in
 * decimal, hex or octal, either sign. Uses only the public API. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

static void usage(const char *prog)
{
	printf("Usage: %s FI_ERROR_CODE\n"
	       "\n"
	       "Displays the error string for the given numeric FI_ERROR_CODE.\n"
	       "FI_ERROR_CODE may be a hexadecimal, octal, or decimal constant.\n"
	       "For convenience, the absolute value of FI_ERROR_CODE will be used.\n",
	       prog);
}

int main(int argc, char **argv)
{
	const char *arg;
	char *end;
	long code;

	if (argc != 2) {
		usage(argv[0]);
		return 1;
	}
	arg = argv[1];
	if (!strcmp(arg, "-h")) {
		usage(argv[0]);
		return 0;
	}

	errno = 0;
	code = strtol(arg, &end, 0);
	if (errno || end == arg || *end != '\0') {
		printf("ERROR: unable to parse '%s'\n\n", arg);
		usage(argv[0]);
		return 1;
	}
	if (code < INT_MIN || code > INT_MAX) {
		printf("ERROR: '%s' is out of range\n\n", arg);
		usage(argv[0]);
		return 1;
	}

	/* fi_strerror() wants a positive code. -INT_MIN does not fit in an int;
	 * it wraps back to INT_MIN, which is what the reference passes too. */
	if (code < 0)
		code = -code;
	printf("%s\n", fi_strerror((int)(unsigned int)code));
	return 0;
}
