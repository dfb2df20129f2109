/* sempi-specific (MPI makes MPI_Request_free on a nonblocking collective erroneous; sempi
 * accepts it): a freed reduction completes in the background, and a user-defined operation it
 * runs may call MPI itself. The program's later MPI calls complete freed requests that write
 * its memory; the operation's own MPI call inside that must not try again (it used to wait for
 * a lock its own thread held: a hang). Run with freed_collective.json (allow all). */
#include "../mpitest.h"

/* Sums the two ints of each element of a vector(2, 1, 2) of MPI_INT: offsets 0 and 2. */
static void sum_pairs(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  CHECK_MPI(MPI_Type_size(*type, &size)); /* MPI from inside the reduction */
  CHECK(size == 2 * (int)sizeof(int));
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) {
    b[3 * i] += a[3 * i];
    b[3 * i + 2] += a[3 * i + 2];
  }
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  MPI_Op op;
  CHECK_MPI(MPI_Op_create(sum_pairs, 1, &op));
  int in[3] = {rank + 1, -1, 10 * (rank + 1)};
  int out[3] = {0, 77, 0};
  MPI_Request r;
  CHECK_MPI(MPI_Iallreduce(in, out, 1, pair, op, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Request_free(&r));
  const int expected = size * (size + 1) / 2;
  /* Only later calls can complete it: poll with a cheap one, bounded. */
  int polls = 0;
  for (; out[0] != expected && polls < 10000000; ++polls) {
    int flag = 0;
    CHECK_MPI(MPI_Initialized(&flag));
  }
  CHECK(out[0] == expected);
  CHECK(out[1] == 77);
  CHECK(out[2] == 10 * expected);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Op_free(&op));
  CHECK_MPI(MPI_Type_free(&pair));
  CHECK_MPI(MPI_Finalize());
  printf("rank %d: the freed reduction completed\n", rank);
  return 0;
}
