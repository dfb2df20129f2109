/* sempi-specific (a collective with mismatched arguments is erroneous in MPI; sempi reports
 * it): a nonblocking collective that succeeds frees its staging memory even if the thread that
 * waits for it saw another collective fail in the meantime. sempi keeps a failed collective's
 * staging until the process ends (transfers it cannot cancel may still use it); the old code
 * judged a nonblocking collective's staging by whether its thread had retired a failed
 * collective since the staging was made, and so kept every block below: the root's heap grew
 * by kRounds blocks. Run with staging_after_failure.json. */
#include <malloc.h>
#include <stdlib.h>

#include "../mpitest.h"

enum { kInts = 1 << 20, kRounds = 24 }; /* 4 MiB of staging a round */

/* Bytes the root's heap holds: in arenas and in separately mapped blocks. (Sanitizer builds
 * allocate outside glibc's heap; this then stays put and the check below passes vacuously:
 * the Release run is the one that checks.) */
static size_t heap_in_use(void) {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (size >= 2) {
    MPI_Datatype spread; /* every other int: not contiguous, so the receiver stages */
    CHECK_MPI(MPI_Type_vector(kInts, 1, 2, MPI_INT, &spread));
    CHECK_MPI(MPI_Type_commit(&spread));
    int* data = calloc((size_t)kInts * 2, sizeof(int));
    CHECK(data != NULL);
    int counts[4] = {0, 2, 0, 0}; /* rank 1 sends one int where the root expects two */
    int displs[4] = {0, 0, 0, 0};
    int got[2] = {0, 0};
    size_t before = 0;
    for (int round = 0; round < kRounds; ++round) {
      if (round == 1) before = heap_in_use(); /* after the first round's one-off allocations */
      for (int i = 0; i < kInts; ++i) data[2 * i] = rank == 1 ? round + i : -1;
      MPI_Request bcast;
      CHECK_MPI(MPI_Ibcast(data, 1, spread, 1, MPI_COMM_WORLD, &bcast));
      /* Fails at the root (rank 0) while the broadcast is running. Rank 1's block is what
       * fails it, so it has gone; a rank whose send comes after the root's withdrawal fails
       * with the root's class. */
      const int one = 1;
      const int rc = MPI_Gatherv(rank == 1 ? &one : NULL, rank == 1 ? 1 : 0, MPI_INT, got,
                                 counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        CHECK(rc != MPI_SUCCESS);
      } else if (rank == 1) {
        CHECK_MPI(rc);
      } else {
        CHECK(rc == MPI_SUCCESS || error_class_of(rc) == MPI_ERR_TRUNCATE);
      }
      CHECK_MPI(MPI_Wait(&bcast, MPI_STATUS_IGNORE));
      for (int i = 0; i < kInts; i += 4099) CHECK(data[2 * i] == round + i);
    }
    if (rank == 0) {
      const size_t after = heap_in_use();
      const size_t grown = after > before ? after - before : 0;
      if (grown > (size_t)kRounds / 2 * kInts * sizeof(int)) {
        fprintf(stderr, "the root's heap grew by %zu bytes over %d rounds\n", grown, kRounds);
        CHECK(0);
      }
    }
    free(data);
    CHECK_MPI(MPI_Type_free(&spread));
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  MPI_Finalize();
  return 0;
}
