/* match.c - MPI matching on libfabric's tagged calls (Open MPI's ofi
 * MTL): receives from MPI_ANY_SOURCE and MPI_ANY_TAG (FI_ADDR_UNSPEC,
 * ignore bits, FI_SOURCE), MPI_Probe and MPI_Iprobe (FI_PEEK),
 * MPI_Mprobe and MPI_Mrecv (FI_PEEK | FI_CLAIM, then FI_CLAIM),
 * MPI_Ssend (a synchronous send: the receiver acknowledges), MPI_Cancel of a receive nothing
 * matches (fi_cancel), and a message longer than its receive
 * (MPI_ERR_TRUNCATE from the provider's FI_ETRUNC).  Rank 0 collects from every other rank.  Exit 0
 * only when every message, status and cancel was right and every rank
 * ran on the libfabric in $LOOM_EXPECT_DIR. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "loaded.h"

#define ROUNDS 4

static int bad;

#define EXPECT(cond)                                                                     \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond); \
			bad++;                                                           \
		}                                                                        \
	} while (0)

int main(int argc, char **argv)
{
	int rank, size, seen[64] = {0};

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size > 64)
		MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank) {
		int sync[2] = {rank, -1};

		/* Tags 100 + round, then one synchronous send with tag 200. */
		for (int r = 0; r < ROUNDS; r++) {
			int msg[2] = {rank, r};

			MPI_Send(msg, 2, MPI_INT, 0, 100 + r, MPI_COMM_WORLD);
		}
		/* After rank 0's wildcard receives, which would take it. */
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Ssend(sync, 2, MPI_INT, 0, 200, MPI_COMM_WORLD);
		/* Eight ints for a receive of two. */
		int big[8] = {rank, 1, 2, 3, 4, 5, 6, 7};

		MPI_Send(big, 8, MPI_INT, 0, 300, MPI_COMM_WORLD);
	} else {
		MPI_Request req;
		MPI_Status st;
		int flag = 0, count, cancelled = 0, msg[2];

		/* Nothing is ever sent with tag 999: cancel that receive. */
		MPI_Irecv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &req);
		MPI_Cancel(&req);
		MPI_Wait(&req, &st);
		MPI_Test_cancelled(&st, &cancelled);
		EXPECT(cancelled);

		for (int k = 0; k < (size - 1) * ROUNDS; k++) {
			switch (k % 3) {
			case 0: /* probe, then receive exactly what was probed */
				MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_INT, &count);
				EXPECT(count == 2);
				MPI_Recv(msg, 2, MPI_INT, st.MPI_SOURCE, st.MPI_TAG,
				         MPI_COMM_WORLD, &st);
				break;
			case 1: { /* matched probe: claimed, then received */
				MPI_Message m;

				MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
				MPI_Mrecv(msg, 2, MPI_INT, &m, &st);
				break;
			}
			default: /* non-blocking probe until something is there */
				do
					MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
					           &flag, &st);
				while (!flag);
				MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
				         MPI_COMM_WORLD, &st);
				break;
			}
			EXPECT(st.MPI_SOURCE == msg[0]);
			EXPECT(st.MPI_TAG == 100 + msg[1]);
			EXPECT(msg[0] > 0 && msg[0] < size && msg[1] >= 0 && msg[1] < ROUNDS);
			if (msg[0] > 0 && msg[0] < size) {
				/* Messages of one sender arrive in order. */
				EXPECT(msg[1] == seen[msg[0]]);
				seen[msg[0]]++;
			}
		}
		for (int s = 1; s < size; s++)
			EXPECT(seen[s] == ROUNDS);
		MPI_Barrier(MPI_COMM_WORLD);
		/* The synchronous sends, received plainly: taken by a probe
		 * in the loop above, one left its sender hanging, on loom and
		 * on the reference library alike (Open MPI 4.1's ofi MTL). */
		for (int k = 1; k < size; k++) {
			MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 200, MPI_COMM_WORLD, &st);
			EXPECT(st.MPI_SOURCE == msg[0] && msg[1] == -1);
		}
		/* Truncation is an error the receive returns, not the job's end. */
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		for (int k = 1; k < size; k++) {
			int cls = MPI_SUCCESS;
			int rc = MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &st);

			MPI_Error_class(rc, &cls);
			EXPECT(cls == MPI_ERR_TRUNCATE);
		}
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	}
	return loom_mpi_finish("match", bad);
}
