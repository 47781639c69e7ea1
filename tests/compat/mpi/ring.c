/* ring.c - two-sided MPI over libfabric (Open MPI's cm PML and ofi MTL):
 * every rank sends to the next and receives from the previous, 1 B to
 * 8 MiB, tagged per size, contents checked; an allreduce and a reduce.
 * Exit 0 only when every rank's data was right and every rank ran on
 * the libfabric in $LOOM_EXPECT_DIR. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "loaded.h"

int main(int argc, char **argv)
{
	static const size_t sizes[] = {1, 64, 4096, 65536, 1 << 20, 8 << 20};
	int rank, size, bad = 0;
	long v, sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int s = 0; s < (int)(sizeof(sizes) / sizeof(sizes[0])); s++) {
		size_t n = sizes[s];
		unsigned char *out = malloc(n), *in = calloc(1, n);
		int to = (rank + 1) % size, from = (rank + size - 1) % size;

		for (size_t i = 0; i < n; i++)
			out[i] = (unsigned char)(i * 7 + rank + s);
		MPI_Sendrecv(out, (int)n, MPI_BYTE, to, s, in, (int)n, MPI_BYTE, from, s,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (size_t i = 0; i < n; i++)
			if (in[i] != (unsigned char)(i * 7 + from + s)) {
				fprintf(stderr, "rank %d: %zu B from %d wrong at %zu\n", rank, n,
				        from, i);
				bad++;
				break;
			}
		free(out);
		free(in);
	}
	v = rank + 1;
	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != (long)size * (size + 1) / 2)
		bad++;
	return loom_mpi_finish("ring", bad);
}
