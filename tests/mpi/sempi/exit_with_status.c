/* sempi-specific: a rank that exits with a nonzero status without MPI_Finalize has failed. It
 * is not finalized at exit, which would wait for every rank to reach finalize while the others
 * wait on it: the job ends at once with its status, as under Open MPI's mpirun. Run with
 * exit_with_status.json (allow all); run_mpi_test.sh expects the status in
 * exit_with_status.status. */
#include "../mpitest.h"

static void ignore_error(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  (void)code;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == size - 1) {
    /* Kept past exit, with no MPI_Finalize to remove it: MPI_COMM_WORLD's destructor, at
     * exit, must still find its binding (under ASan, a use after free once). */
    MPI_Errhandler handler;
    CHECK_MPI(MPI_Comm_create_errhandler(ignore_error, &handler));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler));
    printf("rank %d: exiting with status 5 without MPI_Finalize\n", rank);
    fflush(stdout);
    exit(5);
  }
  int value = 0;
  /* Never sent: the job must end before this returns. */
  MPI_Recv(&value, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  fprintf(stderr, "rank %d: a receive from a rank that exited returned\n", rank);
  return 1;
}
