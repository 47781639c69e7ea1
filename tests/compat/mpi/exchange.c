/* exchange.c - every rank sends to every rank (itself included) at once
 * with MPI_Isend/MPI_Irecv, 200 rounds of random sizes (a quarter up to
 * 300 KB, the rest up to 2 KB: eager and rendezvous mixed), contents
 * checked, an allreduce every 10 rounds.  Exit 0 only when every byte was
 * right and every rank ran on the libfabric in $LOOM_EXPECT_DIR. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "loaded.h"

#define ROUNDS 200

static unsigned char byte_of(int i, int from, int to, int round)
{
	return (unsigned char)(i * 13 + from * 7 + to + round);
}

int main(int argc, char **argv)
{
	int rank, n, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	srand(1234); /* the same sizes in every rank */
	for (int it = 0; it < ROUNDS; it++) {
		int *sz = malloc(sizeof(int) * (size_t)(n * n)), k = 0;
		MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)n);
		unsigned char **sb = malloc(sizeof(void *) * (size_t)n);
		unsigned char **rb = malloc(sizeof(void *) * (size_t)n);

		for (int i = 0; i < n * n; i++)
			sz[i] = rand() % 4 == 0 ? rand() % 300000 : rand() % 2000;
		for (int p = 0; p < n; p++) {
			rb[p] = malloc((size_t)sz[p * n + rank] + 1);
			MPI_Irecv(rb[p], sz[p * n + rank], MPI_BYTE, p, it, MPI_COMM_WORLD,
			          &rq[k++]);
		}
		for (int p = 0; p < n; p++) {
			int len = sz[rank * n + p];

			sb[p] = malloc((size_t)len + 1);
			for (int i = 0; i < len; i++)
				sb[p][i] = byte_of(i, rank, p, it);
			MPI_Isend(sb[p], len, MPI_BYTE, p, it, MPI_COMM_WORLD, &rq[k++]);
		}
		MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
		for (int p = 0; p < n; p++) {
			for (int i = 0; i < sz[p * n + rank]; i++)
				if (rb[p][i] != byte_of(i, p, rank, it)) {
					fprintf(stderr, "rank %d: round %d from %d wrong at %d\n",
					        rank, it, p, i);
					bad++;
					break;
				}
			free(rb[p]);
			free(sb[p]);
		}
		free(sz);
		free(rq);
		free(sb);
		free(rb);
		if (it % 10 == 0) {
			long x = rank, y = 0;

			MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
			if (y != (long)n * (n - 1) / 2)
				bad++;
		}
	}
	return loom_mpi_finish("exchange", bad);
}
