/* rma_threads.c - one-sided MPI from several threads of each rank (Open
 * MPI's rdma OSC on the ofi BTL, which opens a scalable endpoint with a
 * context per thread when the provider offers them): under
 * MPI_THREAD_MULTIPLE, NT threads of every rank each put their own block
 * into the next rank's window, add 1 to a shared counter word of every
 * window K times, and then get their block back from the previous rank;
 * fences between.  Exit 0 only when every value is right and every rank
 * ran on the libfabric in $LOOM_EXPECT_DIR. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "loaded.h"

#define NT 4
#define N  512
#define K  25

static int rank, size, to, from;
static long *base;
static MPI_Win win;

struct job {
	int t;
	long src[N], got[N];
};

static void *put_add(void *arg)
{
	struct job *j = arg;
	long one = 1;

	for (int i = 0; i < N; i++)
		j->src[i] = rank * 1000000L + j->t * 10000L + i;
	MPI_Put(j->src, N, MPI_LONG, to, (MPI_Aint)j->t * N, N, MPI_LONG, win);
	for (int k = 0; k < K; k++)
		for (int r = 0; r < size; r++)
			MPI_Accumulate(&one, 1, MPI_LONG, r, NT * N, 1, MPI_LONG, MPI_SUM,
			               win);
	return NULL;
}

static void *get_back(void *arg)
{
	struct job *j = arg;

	MPI_Get(j->got, N, MPI_LONG, from, (MPI_Aint)j->t * N, N, MPI_LONG, win);
	return NULL;
}

static void in_threads(void *(*fn)(void *), struct job *jobs)
{
	pthread_t th[NT];

	for (int t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, fn, &jobs[t]);
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
}

int main(int argc, char **argv)
{
	int provided, bad = 0;
	static struct job jobs[NT];

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (provided < MPI_THREAD_MULTIPLE) {
		fprintf(stderr, "rank %d: thread level %d, not MPI_THREAD_MULTIPLE\n",
		        rank, provided);
		bad++;
	}
	to = (rank + 1) % size;
	from = (rank + size - 1) % size;
	MPI_Win_allocate((NT * N + 1) * sizeof(long), sizeof(long), MPI_INFO_NULL,
	                 MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i <= NT * N; i++)
		base[i] = 0;
	for (int t = 0; t < NT; t++)
		jobs[t].t = t;
	MPI_Win_fence(0, win);
	in_threads(put_add, jobs);
	MPI_Win_fence(0, win);
	for (int t = 0; t < NT && !bad; t++)
		for (int i = 0; i < N; i++)
			if (base[t * N + i] != from * 1000000L + t * 10000L + i) {
				fprintf(stderr, "rank %d: thread %d's word %d is %ld\n",
				        rank, t, i, base[t * N + i]);
				bad++;
				break;
			}
	if (base[NT * N] != (long)size * NT * K) {
		fprintf(stderr, "rank %d: counter is %ld, want %ld\n", rank, base[NT * N],
		        (long)size * NT * K);
		bad++;
	}
	MPI_Win_fence(0, win);
	in_threads(get_back, jobs);
	MPI_Win_fence(0, win);
	/* The previous rank's window holds what the one before it put. */
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < N; i++)
			if (jobs[t].got[i] !=
			    ((from + size - 1) % size) * 1000000L + t * 10000L + i) {
				fprintf(stderr, "rank %d: thread %d got word %d = %ld\n",
				        rank, t, i, jobs[t].got[i]);
				bad++;
				break;
			}
	MPI_Win_free(&win);
	return loom_mpi_finish("rma_threads", bad);
}
