/* sempi-specific: a collective that this layer's own checks refuse on one rank only, with
 * MPI_ERRORS_RETURN. That rank takes no part, so the ranks waiting for it must fail with its
 * error class instead of waiting for the job's timeout, and the next collectives must still
 * line up (the refusing rank counts the call as the others do). Blocks are above the eager
 * limit, so a rank sending to the refusing one waits for it and must be failed.
 * Run with abandoned_collective.json (allow all). */
#include <stdlib.h>

#include "../mpitest.h"

enum { kInts = 64 * 1024 };

/* Every rank's count of failed calls, summed. */
static int failures(int rc) {
  int failed = rc != MPI_SUCCESS;
  int total = 0;
  CHECK_MPI(MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  return total;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  int* mine = malloc(sizeof(int) * kInts);
  int* all = malloc(sizeof(int) * kInts * (size_t)size);
  CHECK(mine != NULL && all != NULL);
  for (int i = 0; i < kInts; ++i) mine[i] = rank;

  /* The root names no datatype for what it receives: refused at the root only. Rank 1 sends to
   * the root whatever the algorithm, so its call fails with the root's class. */
  int rc = MPI_Gather(mine, kInts, MPI_INT, all, kInts, rank == 0 ? MPI_DATATYPE_NULL : MPI_INT, 0,
                      MPI_COMM_WORLD);
  if (rank <= 1) {
    EXPECT_ERROR_CLASS(MPI_ERR_TYPE, rc);
  } else if (rc != MPI_SUCCESS) {
    EXPECT_ERROR_CLASS(MPI_ERR_TYPE, rc);
  }
  CHECK(failures(rc) >= (size > 1 ? 2 : 1));

  /* The last rank's count is negative: some rank sends to it, and fails too. */
  const int refuser = size - 1;
  rc = MPI_Bcast(all, rank == refuser ? -1 : kInts, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == refuser || rc != MPI_SUCCESS) EXPECT_ERROR_CLASS(MPI_ERR_COUNT, rc);
  CHECK(failures(rc) >= (size > 1 ? 2 : 1));

  /* Nonblocking: rank 0 gives no request pointer; rank 1's request fails. */
  MPI_Request request = MPI_REQUEST_NULL;
  rc = MPI_Igather(mine, kInts, MPI_INT, all, kInts, MPI_INT, 0, MPI_COMM_WORLD,
                   rank == 0 ? NULL : &request);
  if (rank == 0) {
    EXPECT_ERROR_CLASS(MPI_ERR_ARG, rc);
  } else {
    CHECK_MPI(rc);
    rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (rank == 1) EXPECT_ERROR_CLASS(MPI_ERR_ARG, rc);
  }

  /* The sequence numbers stayed in step: these match on every rank. */
  int sum = -1;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size * (size - 1) / 2);
  CHECK_MPI(MPI_Gather(mine, kInts, MPI_INT, all, kInts, MPI_INT, 0, MPI_COMM_WORLD));
  if (rank == 0) {
    for (int r = 0; r < size; ++r) CHECK(all[(size_t)r * kInts + kInts - 1] == r);
  }
  free(all);
  free(mine);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
