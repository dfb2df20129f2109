/* A 2-D halo exchange as stencil codes do it: a periodic Cartesian grid of ranks, each owning
 * an NX x NY block with a one-cell halo; rows travel as contiguous types, columns as vectors,
 * and a second exchange uses subarray types with nonblocking calls. */
#include "mpitest.h"

enum { NX = 6, NY = 5, W = NY + 2, H = NX + 2 };

/* The value a cell holds: a function of its global coordinates, so halos can be checked. */
static double value_at(int gx, int gy) { return gx * 1000.0 + gy; }

static int wrap(int v, int n) { return ((v % n) + n) % n; }

int main(int argc, char** argv) {
  CHECK_MPI(MPI_Init(&argc, &argv));
  int size = 0;
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int dims[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(size, 2, dims));
  CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1]);
  const int periods[2] = {1, 1};
  MPI_Comm grid;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
  int rank = 0;
  int coords[2];
  CHECK_MPI(MPI_Comm_rank(grid, &rank));
  CHECK_MPI(MPI_Cart_coords(grid, rank, 2, coords));
  int up, down, west, east;
  CHECK_MPI(MPI_Cart_shift(grid, 0, 1, &up, &down));
  CHECK_MPI(MPI_Cart_shift(grid, 1, 1, &west, &east));

  /* Local block with halo, row-major: cell (x, y) at [x * W + y], interior 1..NX, 1..NY. */
  double field[H * W];
  for (int i = 0; i < H * W; ++i) field[i] = -1.0;
  const int gx0 = coords[0] * NX;
  const int gy0 = coords[1] * NY;
  for (int x = 1; x <= NX; ++x) {
    for (int y = 1; y <= NY; ++y) field[x * W + y] = value_at(gx0 + x - 1, gy0 + y - 1);
  }

  MPI_Datatype row;
  MPI_Datatype column;
  CHECK_MPI(MPI_Type_contiguous(NY, MPI_DOUBLE, &row));
  CHECK_MPI(MPI_Type_vector(NX, 1, W, MPI_DOUBLE, &column));
  CHECK_MPI(MPI_Type_commit(&row));
  CHECK_MPI(MPI_Type_commit(&column));

  /* North/south: rows; west/east: columns. */
  CHECK_MPI(MPI_Sendrecv(&field[1 * W + 1], 1, row, up, 0, &field[(NX + 1) * W + 1], 1, row,
                         down, 0, grid, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Sendrecv(&field[NX * W + 1], 1, row, down, 1, &field[0 * W + 1], 1, row, up, 1,
                         grid, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Sendrecv(&field[1 * W + 1], 1, column, west, 2, &field[1 * W + NY + 1], 1,
                         column, east, 2, grid, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Sendrecv(&field[1 * W + NY], 1, column, east, 3, &field[1 * W + 0], 1, column,
                         west, 3, grid, MPI_STATUS_IGNORE));

  const int gnx = dims[0] * NX;
  const int gny = dims[1] * NY;
  for (int y = 1; y <= NY; ++y) {
    CHECK(field[0 * W + y] == value_at(wrap(gx0 - 1, gnx), gy0 + y - 1));
    CHECK(field[(NX + 1) * W + y] == value_at(wrap(gx0 + NX, gnx), gy0 + y - 1));
  }
  for (int x = 1; x <= NX; ++x) {
    CHECK(field[x * W + 0] == value_at(gx0 + x - 1, wrap(gy0 - 1, gny)));
    CHECK(field[x * W + NY + 1] == value_at(gx0 + x - 1, wrap(gy0 + NY, gny)));
  }
  CHECK(field[0] == -1.0 && field[W - 1] == -1.0);  /* corners untouched */

  /* The same exchange with subarray types and nonblocking calls, into a fresh block. */
  double again[H * W];
  for (int i = 0; i < H * W; ++i) again[i] = field[i];
  for (int y = 1; y <= NY; ++y) again[0 * W + y] = again[(NX + 1) * W + y] = -2.0;
  for (int x = 1; x <= NX; ++x) again[x * W + 0] = again[x * W + NY + 1] = -2.0;
  const int full[2] = {H, W};
  const int rows[2] = {1, NY};
  const int cols[2] = {NX, 1};
  MPI_Datatype send_types[4];
  MPI_Datatype recv_types[4];
  const int send_at[4][2] = {{1, 1}, {NX, 1}, {1, 1}, {1, NY}};
  const int recv_at[4][2] = {{NX + 1, 1}, {0, 1}, {1, NY + 1}, {1, 0}};
  const int peers_to[4] = {up, down, west, east};
  const int peers_from[4] = {down, up, east, west};
  MPI_Request reqs[8];
  for (int k = 0; k < 4; ++k) {
    const int* shape = k < 2 ? rows : cols;
    CHECK_MPI(MPI_Type_create_subarray(2, full, shape, send_at[k], MPI_ORDER_C, MPI_DOUBLE,
                                       &send_types[k]));
    CHECK_MPI(MPI_Type_create_subarray(2, full, shape, recv_at[k], MPI_ORDER_C, MPI_DOUBLE,
                                       &recv_types[k]));
    CHECK_MPI(MPI_Type_commit(&send_types[k]));
    CHECK_MPI(MPI_Type_commit(&recv_types[k]));
    CHECK_MPI(MPI_Irecv(again, 1, recv_types[k], peers_from[k], 10 + k, grid, &reqs[k]));
  }
  for (int k = 0; k < 4; ++k) {
    CHECK_MPI(MPI_Isend(again, 1, send_types[k], peers_to[k], 10 + k, grid, &reqs[4 + k]));
  }
  CHECK_MPI(MPI_Waitall(8, reqs, MPI_STATUSES_IGNORE));
  for (int i = 0; i < H * W; ++i) CHECK(again[i] == field[i]);

  for (int k = 0; k < 4; ++k) {
    CHECK_MPI(MPI_Type_free(&send_types[k]));
    CHECK_MPI(MPI_Type_free(&recv_types[k]));
  }
  CHECK_MPI(MPI_Type_free(&row));
  CHECK_MPI(MPI_Type_free(&column));
  CHECK_MPI(MPI_Comm_free(&grid));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
