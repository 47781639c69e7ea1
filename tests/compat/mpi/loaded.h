/* loaded.h - which libfabric this MPI process runs on: the directory of the
 * libfabric.so in /proc/self/maps must be $LOOM_EXPECT_DIR, so a silent
 * fallback to another library fails the test. */
#ifndef LOOM_MPI_LOADED_H
#define LOOM_MPI_LOADED_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0 when the libfabric mapped here lives in $LOOM_EXPECT_DIR, else 1
 * (with a message naming what was mapped). */
static int loom_loaded_check(int rank)
{
	const char *want = getenv("LOOM_EXPECT_DIR");
	char line[4096], dir[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/maps", "r");

	if (!want || !f) {
		fprintf(stderr, "rank %d: no LOOM_EXPECT_DIR or /proc/self/maps\n", rank);
		if (f)
			fclose(f);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		char *so = path ? strstr(path, "/libfabric.so") : NULL;

		if (so) {
			size_t n = (size_t)(so - path);

			memcpy(dir, path, n < sizeof(dir) ? n : sizeof(dir) - 1);
			dir[n < sizeof(dir) ? n : sizeof(dir) - 1] = 0;
			break;
		}
	}
	fclose(f);
	if (strcmp(dir, want)) {
		fprintf(stderr, "rank %d: libfabric from '%s', not '%s'\n", rank, dir, want);
		return 1;
	}
	return 0;
}

#endif
