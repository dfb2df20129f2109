/* sempi-specific (MPI leaves a missing MPI_Finalize undefined): a program that returns from
 * main without MPI_Finalize is finalized at exit, as a sempi::Environment is at the end of its
 * scope, and exits with its own status. It used to be finalized by a static destructor after
 * OpenSSL had been torn down, and died of SIGABRT with its audit log unwritten. Run with
 * exit_without_finalize.json (allow all). */
#include "../mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size * (size - 1) / 2);
  printf("rank %d: returning without MPI_Finalize\n", rank);
  return 0;
}
