/* MPI_Type_create_hindexed_block, and the MPI_Count queries: MPI_Type_size_x,
 * MPI_Type_get_extent_x and MPI_Type_get_true_extent_x report a type of 8 GiB that the int
 * forms cannot, and MPI_Get_elements_x counts basic elements where MPI_Get_count cannot. */
#include "mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);

  /* Blocks of two ints at byte displacements 8, 24 and 48: size 24 bytes, true extent from 8
   * to 56, extent from 8 to 56 as well (no resizing). */
  const MPI_Aint displs[3] = {8, 24, 48};
  MPI_Datatype blocks;
  CHECK_MPI(MPI_Type_create_hindexed_block(3, 2, displs, MPI_INT, &blocks));
  CHECK_MPI(MPI_Type_commit(&blocks));
  int isize = 0;
  CHECK_MPI(MPI_Type_size(blocks, &isize));
  CHECK(isize == 6 * (int)sizeof(int));
  MPI_Count size_x = 0;
  MPI_Count lb_x = -1;
  MPI_Count extent_x = -1;
  CHECK_MPI(MPI_Type_size_x(blocks, &size_x));
  CHECK(size_x == 24);
  CHECK_MPI(MPI_Type_get_extent_x(blocks, &lb_x, &extent_x));
  CHECK(lb_x == 8 && extent_x == 48);
  CHECK_MPI(MPI_Type_get_true_extent_x(blocks, &lb_x, &extent_x));
  CHECK(lb_x == 8 && extent_x == 48);

  /* Through a message to self: the blocks' ints, in order, and nothing between them. */
  int out[14];
  for (int i = 0; i < 14; ++i) out[i] = 100 + i;
  int packed[6] = {0};
  CHECK_MPI(MPI_Sendrecv(out, 1, blocks, 0, 1, packed, 6, MPI_INT, 0, 1, MPI_COMM_SELF,
                         MPI_STATUS_IGNORE));
  const int expected[6] = {102, 103, 106, 107, 112, 113};
  for (int i = 0; i < 6; ++i) CHECK(packed[i] == expected[i]);
  int back[14];
  for (int i = 0; i < 14; ++i) back[i] = -1;
  CHECK_MPI(MPI_Sendrecv(packed, 6, MPI_INT, 0, 2, back, 1, blocks, 0, 2, MPI_COMM_SELF,
                         MPI_STATUS_IGNORE));
  for (int i = 0; i < 14; ++i) {
    const int in_block = i == 2 || i == 3 || i == 6 || i == 7 || i == 12 || i == 13;
    CHECK(back[i] == (in_block ? 100 + i : -1));
  }
  CHECK_MPI(MPI_Type_free(&blocks));

  /* 1024 x 8 MiB = 8 GiB: the int query says MPI_UNDEFINED, the _x ones the truth. */
  MPI_Datatype mib8;
  MPI_Datatype gib8;
  CHECK_MPI(MPI_Type_contiguous(1 << 20, MPI_DOUBLE, &mib8));
  CHECK_MPI(MPI_Type_contiguous(1024, mib8, &gib8));
  const MPI_Count big = (MPI_Count)8 << 30;
  CHECK_MPI(MPI_Type_size(gib8, &isize));
  CHECK(isize == MPI_UNDEFINED);
  CHECK_MPI(MPI_Type_size_x(gib8, &size_x));
  CHECK(size_x == big);
  CHECK_MPI(MPI_Type_get_extent_x(gib8, &lb_x, &extent_x));
  CHECK(lb_x == 0 && extent_x == big);
  CHECK_MPI(MPI_Type_get_true_extent_x(gib8, &lb_x, &extent_x));
  CHECK(lb_x == 0 && extent_x == big);
  CHECK_MPI(MPI_Type_free(&gib8));
  CHECK_MPI(MPI_Type_free(&mib8));

  /* Five ints received as pairs: not a whole number of pairs, but five elements. */
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  int five[5] = {1, 2, 3, 4, 5};
  int got[6] = {0};
  MPI_Status status;
  CHECK_MPI(MPI_Sendrecv(five, 5, MPI_INT, 0, 3, got, 3, pair, 0, 3, MPI_COMM_SELF, &status));
  int count = 0;
  CHECK_MPI(MPI_Get_count(&status, pair, &count));
  CHECK(count == MPI_UNDEFINED);
  MPI_Count elements = 0;
  CHECK_MPI(MPI_Get_elements_x(&status, pair, &elements));
  CHECK(elements == 5);
  CHECK_MPI(MPI_Get_elements_x(&status, MPI_INT, &elements));
  CHECK(elements == 5);
  /* 20 bytes end inside the third double. */
  CHECK_MPI(MPI_Get_elements_x(&status, MPI_DOUBLE, &elements));
  CHECK(elements == MPI_UNDEFINED);
  CHECK_MPI(MPI_Type_free(&pair));

  CHECK_MPI(MPI_Finalize());
  return 0;
}
