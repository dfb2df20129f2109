/* sempi-specific half of tests/mpi/topology.c. MPI_Dims_create returns the most balanced grid
 * (as MPICH does; Open MPI 4.1's greedy split gives 12 x 6 for 72), and sizes whose products
 * overflow an int are errors, not a division by zero or a wrapped cell count.
 * Run with topology_sempi.json (allow all). */
#include <limits.h>

#include "../mpitest.h"

static void expect_dims(int nnodes, int ndims, const int* expected) {
  int dims[4] = {0, 0, 0, 0};
  CHECK_MPI(MPI_Dims_create(nnodes, ndims, dims));
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] != expected[i]) {
      fprintf(stderr, "MPI_Dims_create(%d, %d): dimension %d is %d, expected %d\n", nnodes, ndims,
              i, dims[i], expected[i]);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}

static void balanced_dims(void) {
  expect_dims(72, 2, (const int[]){9, 8});
  expect_dims(180, 2, (const int[]){15, 12});
  expect_dims(540, 2, (const int[]){27, 20});
  expect_dims(25, 2, (const int[]){5, 5});
  expect_dims(16, 3, (const int[]){4, 2, 2});
  expect_dims(360, 3, (const int[]){9, 8, 5});
  expect_dims(30, 3, (const int[]){5, 3, 2});
  expect_dims(64, 4, (const int[]){4, 4, 2, 2});
}

static void dims_that_overflow(void) {
  int big[2] = {65536, 65536}; /* 2^32: wrapped to 0 in an int product */
  EXPECT_ERROR_CLASS(MPI_ERR_DIMS, MPI_Dims_create(1, 2, big));
  int prime[2] = {0, 0}; /* INT_MAX is prime: its factor search must stop at sqrt */
  CHECK_MPI(MPI_Dims_create(INT_MAX, 2, prime));
  CHECK(prime[0] == INT_MAX && prime[1] == 1);
  int square[2] = {0, 0}; /* 46337^2 is the largest prime square below INT_MAX */
  CHECK_MPI(MPI_Dims_create(46337 * 46337, 2, square));
  CHECK(square[0] == 46337 && square[1] == 46337);
}

static void cart_that_overflows(void) {
  /* 2^21 * 2^21 * 2^22 = 2^64 cells: wrapped to 0 in a 64-bit product. */
  const int dims[3] = {1 << 21, 1 << 21, 1 << 22};
  const int periods[3] = {0, 0, 0};
  MPI_Comm cart = MPI_COMM_NULL;
  EXPECT_ERROR_CLASS(MPI_ERR_TOPOLOGY, MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart));
  CHECK(cart == MPI_COMM_NULL);
}

/* A displacement near INT_MAX or INT_MIN: here + disp overflowed an int (undefined). */
static void shifts_that_overflow(int rank, int size) {
  for (int periodic = 0; periodic <= 1; ++periodic) {
    MPI_Comm ring = MPI_COMM_NULL;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, &size, &periodic, 0, &ring));
    const int disps[2] = {2147483647, -2147483647 - 1};
    for (int k = 0; k < 2; ++k) {
      int source = -2;
      int dest = -2;
      CHECK_MPI(MPI_Cart_shift(ring, 0, disps[k], &source, &dest));
      const long long to = (long long)rank + disps[k];
      const long long from = (long long)rank - disps[k];
      if (periodic) {
        CHECK(dest == (int)(((to % size) + size) % size));
        CHECK(source == (int)(((from % size) + size) % size));
      } else {
        CHECK(dest == MPI_PROC_NULL && source == MPI_PROC_NULL);
      }
    }
    CHECK_MPI(MPI_Comm_free(&ring));
  }
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  balanced_dims();
  dims_that_overflow();
  cart_that_overflows();
  shifts_that_overflow(rank, size);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
