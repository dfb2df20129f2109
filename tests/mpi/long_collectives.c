/* A 1 MiB MPI_Bcast and a 4 MiB MPI_Reduce (MPI_SUM of ints) from and to rank 0, checked on
 * every rank: sizes at which sempi may choose between a binomial tree and an algorithm that
 * splits the message (tests/mpi/run_tree_choice_test.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int bytes = 1 << 20;
  const int ints = 1 << 20;
  unsigned char* data = malloc(bytes);
  int* mine = malloc(ints * sizeof(int));
  int* sum = malloc(ints * sizeof(int));
  if (data == NULL || mine == NULL || sum == NULL) MPI_Abort(MPI_COMM_WORLD, 2);

  for (int i = 0; i < bytes; ++i) data[i] = rank == 0 ? (unsigned char)(i * 7 + 3) : 0;
  MPI_Bcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  for (int i = 0; i < bytes; ++i) {
    if (data[i] != (unsigned char)(i * 7 + 3)) {
      fprintf(stderr, "rank %d: bcast byte %d is %d\n", rank, i, data[i]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  for (int i = 0; i < ints; ++i) mine[i] = i % 1000 + rank;
  MPI_Reduce(mine, sum, ints, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int i = 0; i < ints; ++i) {
      const int expected = size * (i % 1000) + size * (size - 1) / 2;
      if (sum[i] != expected) {
        fprintf(stderr, "reduce element %d is %d, expected %d\n", i, sum[i], expected);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
  }
  free(data);
  free(mine);
  free(sum);
  MPI_Finalize();
  return 0;
}
