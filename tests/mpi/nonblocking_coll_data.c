/* Nonblocking data-movement collectives: MPI_Igather, MPI_Iscatter, MPI_Iallgather,
 * MPI_Ialltoall and MPI_Ireduce, all in flight at once with point-to-point traffic, then in
 * place, with a strided (staged) datatype, and with a user-defined non-commutative operation.
 * Buffers are checked only after completion, as MPI allows. */
#include <string.h>

#include "mpitest.h"

enum { N = 300 }; /* elements per rank: several TLS records for the larger operations */

static int value(int rank, int i) { return rank * 100000 + i; }

/* Composition of affine maps x -> a*x + b, stored as pairs {a, b}: associative, and the order
 * of the operands matters. */
static void compose(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  long* x = (long*)in;
  long* y = (long*)inout;
  for (int k = 0; k < *len; ++k) {
    const long a = x[2 * k] * y[2 * k];
    const long b = x[2 * k + 1] * y[2 * k] + y[2 * k + 1];
    y[2 * k] = a;
    y[2 * k + 1] = b;
  }
}

/* Elementwise sum of longs that asks its datatype for the element count: the handle must stay
 * usable inside the function after the program has freed the datatype. */
static int queried_size = -1;
static void sum_by_type_size(void* in, void* inout, int* len, MPI_Datatype* type) {
  int bytes = 0;
  if (MPI_Type_size(*type, &bytes) != MPI_SUCCESS) bytes = 0;
  queried_size = bytes;
  const int per_item = bytes / (int)sizeof(long);
  long* x = (long*)in;
  long* y = (long*)inout;
  for (int k = 0; k < *len * per_item; ++k) y[k] += x[k];
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int root = size - 1;

  int* mine = malloc(sizeof(int) * N);
  int* gathered = malloc(sizeof(int) * N * size);
  int* scatter_src = malloc(sizeof(int) * N * size);
  int* scattered = malloc(sizeof(int) * N);
  int* all = malloc(sizeof(int) * N * size);
  int* to_each = malloc(sizeof(int) * N * size);
  int* from_each = malloc(sizeof(int) * N * size);
  long* sums = malloc(sizeof(long) * N);
  long* contrib = malloc(sizeof(long) * N);
  CHECK(mine && gathered && scatter_src && scattered && all && to_each && from_each && sums &&
        contrib);
  for (int i = 0; i < N; ++i) {
    mine[i] = value(rank, i);
    contrib[i] = (long)rank * i;
  }
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < N; ++i) {
      scatter_src[r * N + i] = rank == root ? value(r, -i) : -1;
      to_each[r * N + i] = rank * 1000 + r * 10 + i % 10; /* block r goes to rank r */
    }
  }

  /* Everything at once, plus a ring exchange, completed by one Waitall. */
  int token = rank;
  int got = -1;
  MPI_Request reqs[7];
  CHECK_MPI(MPI_Igather(mine, N, MPI_INT, gathered, N, MPI_INT, root, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Iscatter(scatter_src, N, MPI_INT, scattered, N, MPI_INT, root, MPI_COMM_WORLD,
                         &reqs[1]));
  CHECK_MPI(MPI_Iallgather(mine, N, MPI_INT, all, N, MPI_INT, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Ialltoall(to_each, N, MPI_INT, from_each, N, MPI_INT, MPI_COMM_WORLD, &reqs[3]));
  CHECK_MPI(MPI_Ireduce(contrib, sums, N, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD, &reqs[4]));
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &reqs[5]));
  CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD, &reqs[6]));
  CHECK_MPI(MPI_Waitall(7, reqs, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 7; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL);

  CHECK(got == (rank + size - 1) % size);
  if (rank == root) {
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < N; i += 37) CHECK(gathered[r * N + i] == value(r, i));
    }
  }
  for (int i = 0; i < N; ++i) CHECK(scattered[i] == value(rank, -i));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < N; i += 29) CHECK(all[r * N + i] == value(r, i));
    for (int i = 0; i < N; i += 31) CHECK(from_each[r * N + i] == r * 1000 + rank * 10 + i % 10);
  }
  if (rank == 0) {
    const long ranks = (long)size * (size - 1) / 2;
    for (int i = 0; i < N; ++i) CHECK(sums[i] == ranks * i);
  }

  /* In place at the root (gather, reduce) and everywhere (allgather, alltoall), by polling. */
  int flag = 0;
  for (int i = 0; i < N; ++i) all[rank * N + i] = value(rank, i) + 1;
  CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, N, MPI_INT, MPI_COMM_WORLD,
                           &reqs[0]));
  do {
    CHECK_MPI(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
  } while (!flag);
  for (int r = 0; r < size; ++r) CHECK(all[r * N + N - 1] == value(r, N - 1) + 1);

  for (int r = 0; r < size; ++r) from_each[r * N] = rank * size + r;
  CHECK_MPI(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, from_each, N, MPI_INT,
                          MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  for (int r = 0; r < size; ++r) CHECK(from_each[r * N] == r * size + rank);

  long total = rank + 1;
  long in_place_total = total;
  CHECK_MPI(MPI_Ireduce(rank == 0 ? MPI_IN_PLACE : &total, rank == 0 ? &in_place_total : NULL, 1,
                        MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  if (rank == 0) CHECK(in_place_total == (long)size * (size + 1) / 2);

  /* A strided receive type: staged, and unpacked only when the request completes. */
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &every_other));
  CHECK_MPI(MPI_Type_commit(&every_other));
  int pairs[2] = {rank, -rank};
  int spread[64];
  for (int i = 0; i < 64; ++i) spread[i] = -7;
  MPI_Aint lb = 0;
  MPI_Aint extent = 0;
  CHECK_MPI(MPI_Type_get_extent(every_other, &lb, &extent));
  CHECK(extent == 3 * (MPI_Aint)sizeof(int));
  CHECK(3 * size + 1 <= 64);
  CHECK_MPI(MPI_Igather(pairs, 2, MPI_INT, spread, 1, every_other, 0, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Type_free(&every_other)); /* the pending operation keeps its layout */
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      CHECK(spread[3 * r] == r && spread[3 * r + 2] == -r);
      CHECK(spread[3 * r + 1] == -7); /* the gap stays untouched */
    }
  }

  /* A non-commutative user operation: the result is rank 0's map applied first. */
  MPI_Datatype affine;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_LONG, &affine));
  CHECK_MPI(MPI_Type_commit(&affine));
  MPI_Op compose_op;
  CHECK_MPI(MPI_Op_create(compose, 0, &compose_op));
  long map[2] = {2, rank}; /* x -> 2x + rank */
  long composed[2] = {0, 0};
  CHECK_MPI(MPI_Ireduce(map, composed, 1, affine, compose_op, root, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  if (rank == root) {
    long a = 1;
    long b = 0;
    for (int r = 0; r < size; ++r) { /* apply rank 0's map first, then 1's, ... */
      a = 2 * a;
      b = 2 * b + r;
    }
    CHECK(composed[0] == a && composed[1] == b);
  }
  CHECK_MPI(MPI_Op_free(&compose_op));
  CHECK_MPI(MPI_Type_free(&affine));

  /* The datatype is freed while a reduction with a user operation is pending, before any peer
   * has contributed (each rank starts only after its left neighbour has freed): the operation
   * completes normally and its function can still query the handle. */
  MPI_Datatype triple;
  CHECK_MPI(MPI_Type_contiguous(3, MPI_LONG, &triple));
  CHECK_MPI(MPI_Type_commit(&triple));
  MPI_Op sum_op;
  CHECK_MPI(MPI_Op_create(sum_by_type_size, 1, &sum_op));
  long items[6] = {rank, 1, 2L * rank, rank + 10L, 5, -rank};
  long totals[6] = {0};
  int go = 0;
  if (rank > 0) {
    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, rank - 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  CHECK_MPI(MPI_Iallreduce(items, totals, 2, triple, sum_op, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Type_free(&triple));
  CHECK(triple == MPI_DATATYPE_NULL);
  if (rank + 1 < size) CHECK_MPI(MPI_Send(&go, 1, MPI_INT, rank + 1, 77, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  const long ranks_sum = (long)size * (size - 1) / 2;
  CHECK(totals[0] == ranks_sum && totals[1] == size && totals[2] == 2 * ranks_sum);
  CHECK(totals[3] == ranks_sum + 10L * size && totals[4] == 5L * size && totals[5] == -ranks_sum);
  /* Not every rank combines (the algorithm decides), but every call saw the right size. */
  CHECK(queried_size == -1 || queried_size == 3 * (int)sizeof(long));
  CHECK_MPI(MPI_Op_free(&sum_op));

  /* Bad arguments are reported, not crashed on. */
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK(error_class_of(MPI_Iallgather(mine, N, MPI_INT, all, -1, MPI_INT, MPI_COMM_WORLD,
                                      &reqs[0])) == MPI_ERR_COUNT);
  CHECK(error_class_of(MPI_Igather(mine, N, MPI_INT, gathered, N, MPI_INT, size,
                                   MPI_COMM_WORLD, &reqs[0])) == MPI_ERR_ROOT);

  free(mine);
  free(gathered);
  free(scatter_src);
  free(scattered);
  free(all);
  free(to_each);
  free(from_each);
  free(sums);
  free(contrib);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
