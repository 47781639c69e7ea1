/* mpi_pingpong.c - an MPI ping-pong between ranks 0 and 1: for each size,
 * the best of several repetitions of the one-way time (half a round
 * trip), in microseconds, and the bandwidth it gives.  Rank 0 first
 * prints the libfabric it runs on (from /proc/self/maps), so a run on the
 * wrong library shows.  Built by bench/mpi-ab with mpicc.
 *
 * Usage: mpi_pingpong [SIZE...]   (default: 8 65536 1048576) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 5

static void print_library(void)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (path && strstr(path, "/libfabric.so")) {
			printf("# library: %s", path);
			break;
		}
	}
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	static const long defaults[] = {8, 65536, 1048576};
	int rank, nsizes = argc > 1 ? argc - 1 : 3;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 0)
		print_library();
	for (int s = 0; s < nsizes; s++) {
		long n = argc > 1 ? atol(argv[s + 1]) : defaults[s];
		long iters = n <= 65536 ? 20000 : 1000;
		char *buf = calloc(1, n > 0 ? (size_t)n : 1);
		double best = 1e30;

		for (int rep = 0; rep < REPS && rank < 2; rep++) {
			double t;

			MPI_Barrier(MPI_COMM_WORLD);
			t = MPI_Wtime();
			for (long i = 0; i < iters; i++) {
				if (rank == 0) {
					MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
					MPI_Recv(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
					         MPI_STATUS_IGNORE);
				} else {
					MPI_Recv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
					         MPI_STATUS_IGNORE);
					MPI_Send(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
				}
			}
			t = (MPI_Wtime() - t) / (double)iters / 2 * 1e6;
			if (t < best)
				best = t;
		}
		if (rank == 0)
			printf("%ld %.3f %.1f\n", n, best, (double)n / best);
		free(buf);
	}
	MPI_Finalize();
	return 0;
}
