/* The default error handler, MPI_ERRORS_ARE_FATAL: an invalid destination rank must take the
 * whole job down with a nonzero exit status (the test runner checks that it does). What the rank
 * printed before, even a partial line without a flush, must not be lost with it (the runner
 * checks that under sempirun). */
#include "mpitest.h"

int main(int argc, char** argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  int size = 0;
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int value = 1;
  printf("about to send to an invalid rank");
  MPI_Send(&value, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
  /* Not reached with a conforming MPI. */
  printf("MPI_Send to an invalid rank returned instead of aborting\n");
  MPI_Finalize();
  return 0;
}
