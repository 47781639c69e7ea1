/* rma.c - one-sided MPI over libfabric (Open MPI's rdma OSC on the ofi
 * BTL: fi_write, fi_read, fi_atomic): each rank puts 1024 longs into the
 * next rank's window, every rank adds 1 to word 0 of every window, each
 * rank gets word 5 of the next rank's window back; fences between.  Exit
 * 0 only when every value is right and every rank ran on the libfabric
 * in $LOOM_EXPECT_DIR. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "loaded.h"

#define N 1024

int main(int argc, char **argv)
{
	int rank, size, bad = 0, to, from;
	long *base, *src, one = 1, got = -1;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	to = (rank + 1) % size;
	from = (rank + size - 1) % size;
	MPI_Win_allocate(N * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
	                 &base, &win);
	for (int i = 0; i < N; i++)
		base[i] = 0;
	src = malloc(N * sizeof(long));
	for (int i = 0; i < N; i++)
		src[i] = rank * 100000L + i;
	MPI_Win_fence(0, win);
	MPI_Put(src, N, MPI_LONG, to, 0, N, MPI_LONG, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++)
		if (base[i] != from * 100000L + i) {
			fprintf(stderr, "rank %d: put word %d is %ld\n", rank, i, base[i]);
			bad++;
			break;
		}
	MPI_Win_fence(0, win);
	for (int r = 0; r < size; r++)
		MPI_Accumulate(&one, 1, MPI_LONG, r, 0, 1, MPI_LONG, MPI_SUM, win);
	MPI_Win_fence(0, win);
	if (base[0] != from * 100000L + size) {
		fprintf(stderr, "rank %d: accumulated word is %ld\n", rank, base[0]);
		bad++;
	}
	MPI_Get(&got, 1, MPI_LONG, to, 5, 1, MPI_LONG, win);
	MPI_Win_fence(0, win);
	if (got != rank * 100000L + 5) {
		fprintf(stderr, "rank %d: got %ld\n", rank, got);
		bad++;
	}
	free(src);
	MPI_Win_free(&win);
	return loom_mpi_finish("rma", bad);
}
