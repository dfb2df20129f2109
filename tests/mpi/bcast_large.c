/* One 1 MiB MPI_Bcast from rank 0, checked on every rank: the size at which sempi may choose
 * between a binomial tree and scatter + allgather (tests/mpi/run_bcast_choice_test.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = 1 << 20;
  unsigned char* data = malloc(n);
  if (data == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < n; ++i) data[i] = rank == 0 ? (unsigned char)(i * 7 + 3) : 0;
  MPI_Bcast(data, n, MPI_BYTE, 0, MPI_COMM_WORLD);
  for (int i = 0; i < n; ++i) {
    if (data[i] != (unsigned char)(i * 7 + 3)) {
      fprintf(stderr, "rank %d: byte %d is %d\n", rank, i, data[i]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  free(data);
  MPI_Finalize();
  return 0;
}
