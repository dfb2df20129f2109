/* MPI_APPNUM (MPI 3.1 section 10.5.3): the index of the process's program among those the
 * launcher was given (mpiexec spec0 : spec1 : ...), 0 with one. Run as "appnum" alone, every
 * rank must see 0. Run as "appnum N" in the Nth program of an MPMD job, a rank checks that it
 * sees N, and the programs' ranks, which share one MPI_COMM_WORLD, exchange their numbers: rank
 * 0 prints them in rank order ("appnums: 0 1 1 2"), so the job shows which rank ran which. */
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  int rank = 0;
  int size = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

  int* appnum = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag));
  CHECK(flag);
  CHECK(appnum != NULL);
  const int expected = argc > 1 ? atoi(argv[1]) : 0;
  if (*appnum != expected) {
    fprintf(stderr, "rank %d: MPI_APPNUM is %d, expected %d\n", rank, *appnum, expected);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }

  int* all = malloc(sizeof(int) * (size_t)size);
  CHECK(all != NULL);
  CHECK_MPI(MPI_Allgather(appnum, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
  for (int r = 1; r < size; ++r) CHECK(all[r] >= all[r - 1]); /* programs take ranks in order */
  if (argc > 1 && rank == 0) {
    char line[4096] = "appnums:";
    for (int r = 0; r < size && strlen(line) + 16 < sizeof line; ++r) {
      char item[16];
      snprintf(item, sizeof item, " %d", all[r]);
      strcat(line, item);
    }
    printf("%s\n", line);
  }
  free(all);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
