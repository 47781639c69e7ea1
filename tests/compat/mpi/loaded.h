/* loaded.h - which libfabric this MPI process runs on: the directory of the
 * libfabric.so in /proc/self/maps must be $LOOM_EXPECT_DIR, so a silent
 * fallback to another library fails the test; and the common end of the
 * test programs (loom_mpi_finish). */
#ifndef LOOM_MPI_LOADED_H
#define LOOM_MPI_LOADED_H

#include <limits.h>
#include <mpi.h>
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

/* The end of every test program: this rank's errors plus the library
 * check, summed at rank 0, which prints "<name>: N ranks, E errors";
 * MPI_Finalize; the exit status, 0 only when no rank saw an error. */
static int loom_mpi_finish(const char *name, int bad)
{
	int rank, size, total = 0;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	bad += loom_loaded_check(rank);
	MPI_Reduce(&bad, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: %d ranks, %d errors\n", name, size, total);
	MPI_Finalize();
	return total != 0;
}

#endif
