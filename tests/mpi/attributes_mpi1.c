/* The MPI-1 attribute calls (MPI 3.1 section 15.2, deprecated but still standard): keys made
 * with MPI_Keyval_create, values put, read and deleted under the old names, copied by
 * MPI_Comm_dup with MPI_DUP_FN and not with MPI_NULL_COPY_FN, and deleted by MPI_Comm_free.
 * The old and new names share their keys and values. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "mpitest.h"

static int deletes = 0;

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm;
  (void)keyval;
  (void)value;
  CHECK(extra_state == &deletes);
  deletes++;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  int copied_key = MPI_KEYVAL_INVALID;
  int uncopied_key = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Keyval_create(MPI_DUP_FN, counting_delete, &copied_key, &deletes));
  CHECK_MPI(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &uncopied_key, NULL));
  CHECK(copied_key != MPI_KEYVAL_INVALID && uncopied_key != copied_key);

  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  static int first = 1;
  static int second = 2;
  CHECK_MPI(MPI_Attr_put(comm, copied_key, &first));
  CHECK_MPI(MPI_Attr_put(comm, uncopied_key, &second));
  int* value = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Attr_get(comm, copied_key, &value, &flag));
  CHECK(flag == 1 && value == &first);
  /* The new names see what the old ones put. */
  CHECK_MPI(MPI_Comm_get_attr(comm, uncopied_key, &value, &flag));
  CHECK(flag == 1 && value == &second);

  /* Replacing a value deletes the old one. */
  CHECK_MPI(MPI_Attr_put(comm, copied_key, &second));
  CHECK(deletes == 1);

  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(comm, &dup));
  CHECK_MPI(MPI_Attr_get(dup, copied_key, &value, &flag));
  CHECK(flag == 1 && value == &second);
  CHECK_MPI(MPI_Attr_get(dup, uncopied_key, &value, &flag));
  CHECK(flag == 0);

  CHECK_MPI(MPI_Attr_delete(comm, copied_key));
  CHECK(deletes == 2);
  CHECK_MPI(MPI_Attr_get(comm, copied_key, &value, &flag));
  CHECK(flag == 0);
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK(deletes == 3);

  /* Predefined attributes read through the old name too. */
  int* tag_ub = NULL;
  CHECK_MPI(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
  CHECK(flag == 1 && *tag_ub >= 32767);

  /* Errors come back under MPI_ERRORS_RETURN: a predefined key is read only (the class is not
   * the standard's to say: Open MPI gives MPI_ERR_OTHER, sempi MPI_ERR_KEYVAL). */
  CHECK(MPI_Attr_put(comm, MPI_TAG_UB, &first) != MPI_SUCCESS);
  CHECK_MPI(MPI_Keyval_free(&uncopied_key));
  CHECK(uncopied_key == MPI_KEYVAL_INVALID);
  CHECK_MPI(MPI_Keyval_free(&copied_key));

  CHECK_MPI(MPI_Comm_free(&comm));
  CHECK_MPI(MPI_Finalize());
  if (rank == 0) printf("attributes_mpi1: ok at %d ranks\n", size);
  return 0;
}
