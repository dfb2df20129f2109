/* Datatype corner cases where sempi once differed from the standard (and Open MPI): the true
 * bounds of a type with an empty member, counts that do not fit in an int, and the error
 * classes of a few invalid arguments. */
#include <limits.h>
#include <string.h>

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

/* Every constructor pads the extent to its members' alignment unless an upper bound is set
 * (MPI 3.1 section 4.1.6, the epsilon of ub), not only a struct: two doubles 12 bytes apart
 * span 20 bytes but have extent 24, so a count of two reads the second pair at offset 24. */
static void extent_padded_to_alignment(void) {
  MPI_Datatype hvec, hidx, contig_of_hvec, resized;
  CHECK_MPI(MPI_Type_create_hvector(2, 1, 12, MPI_DOUBLE, &hvec));
  const int one[2] = {1, 1};
  const MPI_Aint displs[2] = {4, 16};
  CHECK_MPI(MPI_Type_create_hindexed(2, one, displs, MPI_DOUBLE, &hidx));
  CHECK_MPI(MPI_Type_contiguous(2, hvec, &contig_of_hvec));
  CHECK_MPI(MPI_Type_create_resized(hvec, 0, 20, &resized));
  MPI_Datatype resized_not_padded;
  CHECK_MPI(MPI_Type_create_hvector(2, 1, 12, resized, &resized_not_padded));
  MPI_Aint lb = -1, extent = -1;
  CHECK_MPI(MPI_Type_get_extent(hvec, &lb, &extent));
  CHECK(lb == 0 && extent == 24);
  CHECK_MPI(MPI_Type_get_extent(hidx, &lb, &extent));
  CHECK(lb == 4 && extent == 24); /* the span 4..24, 20 bytes, rounded up to 24 */
  CHECK_MPI(MPI_Type_get_extent(contig_of_hvec, &lb, &extent));
  CHECK(lb == 0 && extent == 48);
  CHECK_MPI(MPI_Type_get_extent(resized, &lb, &extent));
  CHECK(lb == 0 && extent == 20); /* an explicit upper bound is kept as set */
  CHECK_MPI(MPI_Type_get_extent(resized_not_padded, &lb, &extent));
  CHECK(lb == 0 && extent == 32); /* markers at 0 and 12 + 20: no padding added */
  MPI_Aint true_lb = -1, true_extent = -1;
  CHECK_MPI(MPI_Type_get_true_extent(hvec, &true_lb, &true_extent));
  CHECK(true_lb == 0 && true_extent == 20);

  /* A type without data has no entry to align: nothing is padded for it (Open MPI neither). */
  MPI_Datatype empty, spread_empty, char_and_empty;
  CHECK_MPI(MPI_Type_contiguous(0, MPI_DOUBLE, &empty));
  CHECK_MPI(MPI_Type_create_hvector(2, 1, 3, empty, &spread_empty));
  CHECK_MPI(MPI_Type_get_extent(spread_empty, &lb, &extent));
  CHECK(extent == 3);
  const int lengths[2] = {1, 1};
  const MPI_Aint at_zero[2] = {0, 0};
  MPI_Datatype members[2] = {MPI_CHAR, empty};
  CHECK_MPI(MPI_Type_create_struct(2, lengths, at_zero, members, &char_and_empty));
  CHECK_MPI(MPI_Type_get_extent(char_and_empty, &lb, &extent));
  CHECK(lb == 0 && extent == 1);
  CHECK_MPI(MPI_Type_free(&char_and_empty));
  CHECK_MPI(MPI_Type_free(&spread_empty));
  CHECK_MPI(MPI_Type_free(&empty));

  /* Packing two instances takes the second from offset 24. */
  CHECK_MPI(MPI_Type_commit(&hvec));
  double in[6] = {1, 2, 3, 4, 5, 6}; /* doubles at 0, 8, ..., 40 */
  unsigned char* bytes = (unsigned char*)in;
  double expected[4];
  memcpy(&expected[0], bytes + 0, sizeof(double));
  memcpy(&expected[1], bytes + 12, sizeof(double));
  memcpy(&expected[2], bytes + 24, sizeof(double));
  memcpy(&expected[3], bytes + 36, sizeof(double));
  double packed[4] = {0, 0, 0, 0};
  int position = 0;
  CHECK_MPI(MPI_Pack(in, 2, hvec, packed, (int)sizeof packed, &position, MPI_COMM_SELF));
  CHECK(position == (int)sizeof packed);
  CHECK(memcmp(packed, expected, sizeof packed) == 0);

  CHECK_MPI(MPI_Type_free(&resized_not_padded));
  CHECK_MPI(MPI_Type_free(&resized));
  CHECK_MPI(MPI_Type_free(&contig_of_hvec));
  CHECK_MPI(MPI_Type_free(&hidx));
  CHECK_MPI(MPI_Type_free(&hvec));
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
  extent_padded_to_alignment();
  counts_beyond_int();
  invalid_arguments();
  large_contiguous();
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
