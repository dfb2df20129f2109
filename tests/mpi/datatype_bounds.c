/* Datatype corner cases where sempi once differed from the standard (and Open MPI): the true
 * bounds of a type with an empty member, counts that do not fit in an int, and the error
 * classes of a few invalid arguments. */
#include <limits.h>

#include "mpitest.h"

static void add_ints(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((const int*)in)[i];
}

/* A member without data moves lb and ub but not the true bounds (MPI 3.1 section 4.1.8). A
 * user reduction finds the data by them: a wrong true lb shifts every pointer it is given. */
static void empty_member(void) {
  MPI_Datatype empty, with_empty, one_int;
  CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &empty));
  int lengths[2] = {1, 1};
  MPI_Aint displs[2] = {0, -8};
  MPI_Datatype types[2] = {MPI_INT, empty};
  CHECK_MPI(MPI_Type_create_struct(2, lengths, displs, types, &with_empty));
  CHECK_MPI(MPI_Type_create_resized(with_empty, 0, sizeof(int), &one_int));
  CHECK_MPI(MPI_Type_commit(&one_int));
  MPI_Aint true_lb = -1, true_extent = -1;
  CHECK_MPI(MPI_Type_get_true_extent(one_int, &true_lb, &true_extent));
  CHECK(true_lb == 0 && true_extent == (MPI_Aint)sizeof(int));

  MPI_Op op;
  CHECK_MPI(MPI_Op_create(add_ints, 1, &op));
  int in[3] = {5, 100, 1000};
  int inout[3] = {1, -7, -7};
  CHECK_MPI(MPI_Reduce_local(in, inout, 1, one_int, op));
  CHECK(inout[0] == 6 && inout[1] == -7 && inout[2] == -7);
  CHECK_MPI(MPI_Op_free(&op));

  CHECK_MPI(MPI_Type_free(&one_int));
  CHECK_MPI(MPI_Type_free(&with_empty));
  CHECK_MPI(MPI_Type_free(&empty));
}

/* MPI_Get_count and MPI_Get_elements say MPI_UNDEFINED when the number does not fit in an int
 * (MPI 3.1 sections 3.2.5 and 4.1.11); the _x forms give it. */
static void counts_beyond_int(void) {
  MPI_Status status;
  const MPI_Count big = (MPI_Count)INT_MAX + 1;
  CHECK_MPI(MPI_Status_set_elements_x(&status, MPI_BYTE, big));
  int n = 0;
  CHECK_MPI(MPI_Get_count(&status, MPI_BYTE, &n));
  CHECK(n == MPI_UNDEFINED);
  CHECK_MPI(MPI_Get_elements(&status, MPI_BYTE, &n));
  CHECK(n == MPI_UNDEFINED);
  MPI_Count x = 0;
  CHECK_MPI(MPI_Get_elements_x(&status, MPI_BYTE, &x));
  CHECK(x == big);
  /* ROMIO sets the elements of MPI_STATUS_IGNORE: accepted, as in Open MPI and MPICH. */
  CHECK_MPI(MPI_Status_set_elements(MPI_STATUS_IGNORE, MPI_INT, 1));
  CHECK_MPI(MPI_Status_set_elements_x(MPI_STATUS_IGNORE, MPI_INT, 1));
}

static void invalid_arguments(void) {
  int value = 1;
  char packed[16];
  int position = 0;
  EXPECT_ERROR_CLASS(MPI_ERR_ARG,
                     MPI_Pack(&value, 1, MPI_INT, packed, -1, &position, MPI_COMM_WORLD));
  int sizes[1] = {4}, subsizes[1] = {2}, starts[1] = {0};
  MPI_Datatype sub;
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Type_create_subarray(-1, sizes, subsizes, starts,
                                                             MPI_ORDER_C, MPI_INT, &sub));
}

/* The usual way to send a large message: a contiguous type of 2^30 bytes, built at once. */
static void large_contiguous(void) {
  MPI_Datatype gib;
  CHECK_MPI(MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib));
  CHECK_MPI(MPI_Type_commit(&gib));
  int size = 0;
  CHECK_MPI(MPI_Type_size(gib, &size));
  CHECK(size == 1 << 30);
  CHECK_MPI(MPI_Type_free(&gib));
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  empty_member();
  counts_beyond_int();
  invalid_arguments();
  large_contiguous();
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
