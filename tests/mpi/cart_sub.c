/* MPI_Cart_sub: the sub-grids of a 2-D grid keep the chosen dimensions (sizes, periods,
 * coordinates), contain exactly the ranks that agree on the dropped coordinates, in grid
 * order, and dropping every dimension leaves each rank alone. */
#include "mpitest.h"

/* The world ranks of `comm`'s members, summed. */
static int sum_of_world_ranks(MPI_Comm comm, int world_rank) {
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&world_rank, &sum, 1, MPI_INT, MPI_SUM, comm));
  return sum;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  int dims[2] = {0, 0};
  CHECK_MPI(MPI_Dims_create(size, 2, dims));
  const int periods[2] = {1, 0};
  MPI_Comm grid;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
  int grid_rank = -1;
  CHECK_MPI(MPI_Comm_rank(grid, &grid_rank));
  int coords[2];
  CHECK_MPI(MPI_Cart_coords(grid, grid_rank, 2, coords));

  for (int kept = 0; kept < 2; ++kept) {
    const int dropped = 1 - kept;
    int remain[2] = {0, 0};
    remain[kept] = 1;
    MPI_Comm line;
    CHECK_MPI(MPI_Cart_sub(grid, remain, &line));
    int line_size = 0;
    int line_rank = -1;
    CHECK_MPI(MPI_Comm_size(line, &line_size));
    CHECK_MPI(MPI_Comm_rank(line, &line_rank));
    CHECK(line_size == dims[kept]);
    CHECK(line_rank == coords[kept]);
    int ndims = -1;
    CHECK_MPI(MPI_Cartdim_get(line, &ndims));
    CHECK(ndims == 1);
    int sub_dims = 0;
    int sub_periods = -1;
    int sub_coords = -1;
    CHECK_MPI(MPI_Cart_get(line, 1, &sub_dims, &sub_periods, &sub_coords));
    CHECK(sub_dims == dims[kept] && sub_periods == periods[kept] && sub_coords == coords[kept]);
    /* Members: every coordinate along the kept dimension, with this rank's dropped one (grid
     * rank = c0 * dims[1] + c1, and grid ranks are world ranks here). */
    int expected = 0;
    for (int c = 0; c < dims[kept]; ++c) {
      int member[2];
      member[kept] = c;
      member[dropped] = coords[dropped];
      expected += member[0] * dims[1] + member[1];
    }
    CHECK(sum_of_world_ranks(line, rank) == expected);
    /* The line is a Cartesian communicator: shifting along it stays inside it. */
    int source = -1;
    int dest = -1;
    CHECK_MPI(MPI_Cart_shift(line, 0, 1, &source, &dest));
    if (periods[kept]) {
      CHECK(dest == (coords[kept] + 1) % dims[kept]);
    } else {
      CHECK(dest == (coords[kept] + 1 < dims[kept] ? coords[kept] + 1 : MPI_PROC_NULL));
    }
    CHECK_MPI(MPI_Comm_free(&line));
  }

  /* Keeping both dimensions gives the whole grid again. */
  const int both[2] = {1, 1};
  MPI_Comm whole;
  CHECK_MPI(MPI_Cart_sub(grid, both, &whole));
  int whole_size = 0;
  CHECK_MPI(MPI_Comm_size(whole, &whole_size));
  CHECK(whole_size == size);
  CHECK(sum_of_world_ranks(whole, rank) == size * (size - 1) / 2);
  CHECK_MPI(MPI_Comm_free(&whole));

  /* Keeping none: every rank on its own. */
  const int none[2] = {0, 0};
  MPI_Comm alone;
  CHECK_MPI(MPI_Cart_sub(grid, none, &alone));
  int alone_size = 0;
  CHECK_MPI(MPI_Comm_size(alone, &alone_size));
  CHECK(alone_size == 1);
  CHECK_MPI(MPI_Comm_free(&alone));

  CHECK_MPI(MPI_Comm_free(&grid));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
