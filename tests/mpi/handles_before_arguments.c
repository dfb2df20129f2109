/* An invalid handle is reported as such (MPI_ERR_COMM, _TYPE, _GROUP, _OP, _INFO) even when
 * another argument is also wrong, e.g. a null output: the handle is checked first, as Open MPI
 * and MPICH do. Errors on MPI_COMM_NULL go to MPI_COMM_WORLD's handler, here MPI_ERRORS_RETURN. */
#include "mpitest.h"

static void communicators(void) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Group group;
  int result = 0;
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_rank(MPI_COMM_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_size(MPI_COMM_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_dup(MPI_COMM_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_split(MPI_COMM_NULL, 0, 0, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_group(MPI_COMM_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_test_inter(MPI_COMM_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_get_name(MPI_COMM_NULL, NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Comm_compare(MPI_COMM_NULL, MPI_COMM_WORLD, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Cart_create(MPI_COMM_NULL, 1, NULL, NULL, 0, &comm));
  EXPECT_ERROR_CLASS(MPI_ERR_COMM, MPI_Irecv(NULL, 1, MPI_INT, 0, 0, MPI_COMM_NULL, NULL));
  CHECK(comm == MPI_COMM_NULL);
  /* The valid ones still report the null output. */
  EXPECT_ARG(MPI_Comm_rank(MPI_COMM_WORLD, NULL));
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &group));
  CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &result));
  CHECK(result == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&group));
}

static void other_handles(void) {
  MPI_Aint lb = 0;
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_size(MPI_DATATYPE_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_get_extent(MPI_DATATYPE_NULL, &lb, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_get_true_extent(MPI_DATATYPE_NULL, NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_contiguous(1, MPI_DATATYPE_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_contiguous(-1, MPI_DATATYPE_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_TYPE, MPI_Type_vector(-1, 1, 1, MPI_DATATYPE_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_GROUP, MPI_Group_size(MPI_GROUP_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_GROUP, MPI_Group_rank(MPI_GROUP_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_OP, MPI_Op_commutative(MPI_OP_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO, MPI_Info_get_nkeys(MPI_INFO_NULL, NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO, MPI_Info_dup(MPI_INFO_NULL, NULL));
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

  communicators();
  other_handles();

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
