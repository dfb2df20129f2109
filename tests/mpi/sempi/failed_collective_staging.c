/* sempi-specific (a collective with mismatched arguments is erroneous in MPI; sempi reports
 * it): the root's MPI_Gatherv fails on rank 1's short message while rank 2's large block is
 * still arriving by rendezvous. The root receives through a derived type, so that block lands
 * in staging memory of sempi's, which outlives the failed call: the rest of the block, read
 * while the root goes on (the barrier below), must not land in freed memory. Under ASan the
 * old code failed with heap-use-after-free here. Run with failed_collective_staging.json. */
#include <stdlib.h>

#include "../mpitest.h"

enum { kInts = 4 << 20, kGo = 1 };  /* 16 MiB from rank 2: many DATA frames */

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Comm side;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &side));
  if (size >= 3) {
    MPI_Datatype spread; /* kInts ints, every other one: not contiguous, so staged */
    CHECK_MPI(MPI_Type_vector(kInts, 1, 2, MPI_INT, &spread));
    CHECK_MPI(MPI_Type_commit(&spread));
    int counts[3] = {0, 1, 1};
    int displs[3] = {0, 0, 1};
    int* block = calloc((size_t)kInts, sizeof(int));
    CHECK(block != NULL);
    const int go = kGo;
    if (rank == 0) {
      /* Two blocks of the type's extent (2 kInts - 1 ints): rank 1's at 0, rank 2's after. */
      int* all = calloc((size_t)kInts * 4, sizeof(int));
      CHECK(all != NULL);
      /* Rank 2's RTS came before this token on the same channel: it is here, and matches as
       * soon as the gather posts its receives (otherwise the failure could cancel that receive
       * first, and rank 2 would wait for a clear-to-send forever). */
      int token = 0;
      CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, 2, kGo, side, MPI_STATUS_IGNORE));
      /* Rank 1's receive is waited for first: its short message fails the call. */
      const int rc = MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, all, counts, displs, spread, 0,
                                 MPI_COMM_WORLD);
      CHECK(rc != MPI_SUCCESS);
      free(all);
    } else if (rank == 1) {
      int token = 0;
      CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, 2, kGo, side, MPI_STATUS_IGNORE));
      CHECK(token == kGo);
      const int one = 1;
      CHECK_MPI(MPI_Gatherv(&one, 1, MPI_INT, NULL, NULL, NULL, spread, 0, MPI_COMM_WORLD));
    } else if (rank == 2) {
      MPI_Request gather;
      CHECK_MPI(MPI_Igatherv(block, kInts, MPI_INT, NULL, NULL, NULL, spread, 0, MPI_COMM_WORLD,
                             &gather));
      /* Its RTS is out: the root may start, and rank 1 may fail it. */
      CHECK_MPI(MPI_Send(&go, 1, MPI_INT, 0, kGo, side));
      CHECK_MPI(MPI_Send(&go, 1, MPI_INT, 1, kGo, side));
      CHECK_MPI(MPI_Wait(&gather, MPI_STATUS_IGNORE));
    }
    free(block);
    CHECK_MPI(MPI_Type_free(&spread));
  }
  CHECK_MPI(MPI_Barrier(side));
  CHECK_MPI(MPI_Comm_free(&side));
  MPI_Finalize();
  return 0;
}
