/* Datatypes whose sizes or extents do not fit in 64 bits, or whose layout would take gigabytes:
 * refused with an error class, never a wrapped size (a staging buffer too small, then a heap
 * overflow when it is packed). Open MPI wraps some of these silently, so the test is sempi's;
 * so is the true extent of a type without data, where Open MPI answers differently. */
#include <limits.h>

#include "../mpitest.h"

/* A type with only empty members touches no byte: true bounds 0 (Open MPI 4.1 says true lb
 * LONG_MAX, true extent 1). */
static void only_empty_members(void) {
  MPI_Datatype empty, only_empty;
  CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &empty));
  int length = 1;
  MPI_Aint displ = -8;
  CHECK_MPI(MPI_Type_create_struct(1, &length, &displ, &empty, &only_empty));
  MPI_Aint lb = 0, extent = -1, true_lb = -1, true_extent = -1;
  CHECK_MPI(MPI_Type_get_extent(only_empty, &lb, &extent));
  CHECK(lb == -8 && extent == 0);
  CHECK_MPI(MPI_Type_get_true_extent(only_empty, &true_lb, &true_extent));
  CHECK(true_lb == 0 && true_extent == 0);
  CHECK_MPI(MPI_Type_free(&only_empty));
  CHECK_MPI(MPI_Type_free(&empty));
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  /* 2^34 bytes of data, and a non-contiguous type of that size (its extent has one more). */
  MPI_Datatype mib, huge, spread;
  CHECK_MPI(MPI_Type_contiguous(1 << 17, MPI_BYTE, &mib));
  CHECK_MPI(MPI_Type_contiguous(1 << 17, mib, &huge));
  CHECK_MPI(MPI_Type_create_resized(huge, 0, ((MPI_Aint)1 << 34) + 1, &spread));
  CHECK_MPI(MPI_Type_commit(&huge));
  CHECK_MPI(MPI_Type_commit(&spread));

  /* 2^30 of them would be 2^64 bytes: wrapped, that was 0. */
  int packed_size = -1;
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Pack_size(1 << 30, huge, MPI_COMM_WORLD, &packed_size));
  char small[64];
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Send(small, 1 << 30, spread, rank, 0, MPI_COMM_WORLD));
  MPI_Request request;
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT,
                     MPI_Isend(small, 1 << 30, spread, rank, 0, MPI_COMM_WORLD, &request));
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT,
                     MPI_Irecv(small, 1 << 30, spread, rank, 0, MPI_COMM_WORLD, &request));
  /* Nothing is sent to MPI_PROC_NULL, so nothing is packed: fine, as in Open MPI. */
  CHECK_MPI(MPI_Send(small, 1 << 30, spread, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

  /* Extents and strides that overflow while the type is built. */
  MPI_Datatype bad;
  EXPECT_ERROR_CLASS(MPI_ERR_ARG, MPI_Type_create_resized(MPI_INT, (MPI_Aint)1 << 62,
                                                          (MPI_Aint)1 << 62, &bad));
  EXPECT_ERROR_CLASS(MPI_ERR_ARG,
                     MPI_Type_create_hvector(3, 1, (MPI_Aint)1 << 62, MPI_INT, &bad));
  EXPECT_ERROR_CLASS(MPI_ERR_ARG, MPI_Type_vector(1 << 30, 1, 1 << 30, huge, &bad));

  /* An extent from LONG_MIN to 1 does not fit in 64 bits either. */
  int two[2] = {1, 1};
  MPI_Aint far_apart[2] = {LONG_MIN, 0};
  MPI_Datatype bytes[2] = {MPI_BYTE, MPI_BYTE};
  EXPECT_ERROR_CLASS(MPI_ERR_ARG, MPI_Type_create_struct(2, two, far_apart, bytes, &bad));

  /* Bounds that fit, true bounds from LONG_MIN to 1 that do not. */
  MPI_Datatype late_byte;
  CHECK_MPI(MPI_Type_create_resized(MPI_BYTE, LONG_MAX - 1, 1, &late_byte));
  MPI_Datatype parts[2] = {late_byte, MPI_BYTE};
  EXPECT_ERROR_CLASS(MPI_ERR_ARG, MPI_Type_create_struct(2, two, far_apart, parts, &bad));
  CHECK_MPI(MPI_Type_free(&late_byte));

  /* MPI_STATUS_IGNORE is accepted only with valid other arguments. */
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Status_set_elements(MPI_STATUS_IGNORE, MPI_INT, -1));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE,
                     MPI_Status_set_elements(MPI_STATUS_IGNORE, MPI_DATATYPE_NULL, 1));

  /* INT_MAX separate blocks: refused at once, not after gigabytes of layout. */
  EXPECT_ERROR_CLASS(MPI_ERR_NO_MEM, MPI_Type_vector(INT_MAX, 1, 2, MPI_BYTE, &bad));
  /* The same count of touching blocks is one block: fine. */
  MPI_Datatype touching;
  CHECK_MPI(MPI_Type_vector(INT_MAX, 1, 1, MPI_BYTE, &touching));
  CHECK_MPI(MPI_Type_free(&touching));

  only_empty_members();

  /* A negative position is an invalid argument (Open MPI 4.1 packs before the buffer). */
  int value = 1;
  char packed[16];
  int position = -1;
  EXPECT_ERROR_CLASS(MPI_ERR_ARG, MPI_Pack(&value, 1, MPI_INT, packed, (int)sizeof packed,
                                           &position, MPI_COMM_WORLD));

  CHECK_MPI(MPI_Type_free(&spread));
  CHECK_MPI(MPI_Type_free(&huge));
  CHECK_MPI(MPI_Type_free(&mib));
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
