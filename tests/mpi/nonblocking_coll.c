/* Nonblocking collectives: MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce, completed with Wait, Test
 * and Waitall, overlapping each other and point-to-point traffic. */
#include "mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  MPI_Request r;
  int flag = 0;

  CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(r == MPI_REQUEST_NULL);
  CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r));
  do {
    CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
  } while (!flag);

  for (int root = 0; root < size; ++root) {
    double data[1000];
    for (int i = 0; i < 1000; ++i) data[i] = rank == root ? root + i * 0.5 : -1;
    CHECK_MPI(MPI_Ibcast(data, 1000, MPI_DOUBLE, root, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 1000; i += 111) CHECK(data[i] == root + i * 0.5);
  }
  /* A strided Ibcast (staged and unpacked when the request completes). */
  MPI_Datatype strided;
  CHECK_MPI(MPI_Type_vector(4, 1, 3, MPI_INT, &strided));
  CHECK_MPI(MPI_Type_commit(&strided));
  int grid[10];
  for (int i = 0; i < 10; ++i) grid[i] = rank == 0 ? i : -1;
  CHECK_MPI(MPI_Ibcast(grid, 1, strided, 0, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Type_free(&strided));  /* the pending operation keeps its layout */
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  for (int i = 0; i < 10; ++i) CHECK(grid[i] == (i % 3 == 0 || rank == 0 ? i : -1));

  /* Two allreduces in flight at once, plus point-to-point, completed with Waitall. */
  long v = rank + 1;
  long sum = 0;
  long prod_in = 2;
  long prod = 0;
  int token = rank;
  int got = -1;
  MPI_Request reqs[4];
  CHECK_MPI(MPI_Iallreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Iallreduce(&prod_in, &prod, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD, &reqs[3]));
  CHECK_MPI(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
  CHECK(sum == (long)size * (size + 1) / 2 && prod == 1L << size);
  CHECK(got == (rank + size - 1) % size);

  /* In place, completed by polling. */
  int vals[3] = {rank, 2 * rank, 3 * rank};
  CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, vals, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
  do {
    CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
  } while (!flag);
  const int ranksum = size * (size - 1) / 2;
  CHECK(vals[0] == ranksum && vals[1] == 2 * ranksum && vals[2] == 3 * ranksum);

  /* MINLOC through the nonblocking path (a padded pair type). */
  struct { double value; int index; } mine = {-(double)rank, rank};
  struct { double value; int index; } low;
  CHECK_MPI(MPI_Iallreduce(&mine, &low, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(low.index == size - 1 && low.value == -(double)(size - 1));

  CHECK_MPI(MPI_Finalize());
  return 0;
}
