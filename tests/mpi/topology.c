/* Cartesian topologies: Dims_create, Cart_create (periodic and not, with ranks left over),
 * Cart_coords / Cart_rank / Cart_shift / Cart_get / Cartdim_get and Topo_test. */
#include "mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);

  /* Dims_create: balanced, non-increasing; given entries are kept. */
  int d2[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(4, 2, d2));
  CHECK(d2[0] == 2 && d2[1] == 2);
  int d6[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(6, 2, d6));
  CHECK(d6[0] == 3 && d6[1] == 2);
  int d7[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(7, 2, d7));
  CHECK(d7[0] == 7 && d7[1] == 1);
  int d8[3] = {0, 0, 0};
  CHECK_MPI(MPI_Dims_create(8, 3, d8));
  CHECK(d8[0] == 2 && d8[1] == 2 && d8[2] == 2);
  int fixed[2] = {0, 2};
  CHECK_MPI(MPI_Dims_create(6, 2, fixed));
  CHECK(fixed[0] == 3 && fixed[1] == 2);
  int d12[3] = {0, 0, 0};
  CHECK_MPI(MPI_Dims_create(12, 3, d12));
  CHECK(d12[0] * d12[1] * d12[2] == 12 && d12[0] >= d12[1] && d12[1] >= d12[2]);

  int topo = -1;
  CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &topo));
  CHECK(topo == MPI_UNDEFINED);

  /* A 1-D ring, periodic. */
  MPI_Comm ring;
  int ring_dims[1] = {size};
  int ring_periods[1] = {1};
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, ring_dims, ring_periods, 0, &ring));
  CHECK_MPI(MPI_Topo_test(ring, &topo));
  CHECK(topo == MPI_CART);
  int src = -1;
  int dst = -1;
  CHECK_MPI(MPI_Cart_shift(ring, 0, 1, &src, &dst));
  CHECK(src == (rank + size - 1) % size && dst == (rank + 1) % size);
  CHECK_MPI(MPI_Cart_shift(ring, 0, -2, &src, &dst));
  CHECK(src == (rank + 2) % size && dst == ((rank - 2) % size + size) % size);
  int token = rank;
  int got = -1;
  CHECK_MPI(MPI_Cart_shift(ring, 0, 1, &src, &dst));
  CHECK_MPI(MPI_Sendrecv(&token, 1, MPI_INT, dst, 0, &got, 1, MPI_INT, src, 0, ring,
                         MPI_STATUS_IGNORE));
  CHECK(got == src);

  /* A 2-D grid, non-periodic in the first dimension. */
  int dims[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(size, 2, dims));
  int periods[2] = {0, 1};
  MPI_Comm grid;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid));
  int grank = -1;
  CHECK_MPI(MPI_Comm_rank(grid, &grank));
  int ndims = 0;
  CHECK_MPI(MPI_Cartdim_get(grid, &ndims));
  CHECK(ndims == 2);
  int got_dims[2];
  int got_periods[2];
  int coords[2];
  CHECK_MPI(MPI_Cart_get(grid, 2, got_dims, got_periods, coords));
  CHECK(got_dims[0] == dims[0] && got_dims[1] == dims[1]);
  CHECK(got_periods[0] == 0 && got_periods[1] == 1);
  CHECK(coords[0] * dims[1] + coords[1] == grank);  /* row-major numbering */
  for (int r = 0; r < size; ++r) {
    int c[2];
    int back = -1;
    CHECK_MPI(MPI_Cart_coords(grid, r, 2, c));
    CHECK_MPI(MPI_Cart_rank(grid, c, &back));
    CHECK(back == r);
  }
  /* Periodic wrap in dimension 1. */
  int wrapped[2] = {coords[0], coords[1] + dims[1]};
  int w = -1;
  CHECK_MPI(MPI_Cart_rank(grid, wrapped, &w));
  CHECK(w == grank);
  /* Edges of the non-periodic dimension see MPI_PROC_NULL. */
  CHECK_MPI(MPI_Cart_shift(grid, 0, 1, &src, &dst));
  CHECK(src == (coords[0] == 0 ? MPI_PROC_NULL : grank - dims[1]));
  CHECK(dst == (coords[0] == dims[0] - 1 ? MPI_PROC_NULL : grank + dims[1]));
  got = -1;
  CHECK_MPI(MPI_Sendrecv(&grank, 1, MPI_INT, dst, 1, &got, 1, MPI_INT, src, 1, grid,
                         MPI_STATUS_IGNORE));
  CHECK(got == (src == MPI_PROC_NULL ? -1 : src));

  /* A grid smaller than the job: the ranks left over get MPI_COMM_NULL. */
  MPI_Comm small;
  int small_dims[1] = {size > 1 ? size - 1 : 1};
  int small_periods[1] = {0};
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, small_dims, small_periods, 0, &small));
  CHECK((rank < small_dims[0]) == (small != MPI_COMM_NULL));
  if (small != MPI_COMM_NULL) {
    int ssize = 0;
    CHECK_MPI(MPI_Comm_size(small, &ssize));
    CHECK(ssize == small_dims[0]);
    /* A duplicate keeps the topology. */
    MPI_Comm small_dup;
    CHECK_MPI(MPI_Comm_dup(small, &small_dup));
    CHECK_MPI(MPI_Topo_test(small_dup, &topo));
    CHECK(topo == MPI_CART);
    CHECK_MPI(MPI_Comm_free(&small_dup));
    CHECK_MPI(MPI_Comm_free(&small));
  }

  CHECK_MPI(MPI_Comm_free(&ring));
  CHECK_MPI(MPI_Comm_free(&grid));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
