/* sempi-specific half of tests/mpi/attributes.c: what a failing delete callback leaves. Every
 * other delete callback still runs (in MPI_Comm_free and in MPI_Finalize); the attribute whose
 * callback failed stays cached, so a retry calls it again. An attribute under a freed keyval
 * can still be deleted (MPI 3.1 section 6.7.2). Run with attributes_sempi.json (allow all). */
#include "../mpitest.h"

static int refusals_left = 0; /* how many more times refusing_delete fails */
static int world_deletes = 0;

static int refusing_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm;
  (void)keyval;
  (void)value;
  (void)extra_state;
  if (refusals_left > 0) {
    --refusals_left;
    return MPI_ERR_OTHER;
  }
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm;
  (void)keyval;
  (void)value;
  ++*(int*)extra_state;
  return MPI_SUCCESS;
}

static void free_after_a_failed_delete(void) {
  int refusing = MPI_KEYVAL_INVALID;
  int counted = MPI_KEYVAL_INVALID;
  int counted_deletes = 0;
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, refusing_delete, &refusing, NULL));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete, &counted,
                                   &counted_deletes));
  MPI_Comm dup = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  int value = 7;
  CHECK_MPI(MPI_Comm_set_attr(dup, counted, &value));
  CHECK_MPI(MPI_Comm_set_attr(dup, refusing, &value)); /* deleted first: set last */

  refusals_left = 1;
  EXPECT_ERROR_CLASS(MPI_ERR_OTHER, MPI_Comm_free(&dup));
  CHECK(dup != MPI_COMM_NULL);
  CHECK(counted_deletes == 1); /* ran although the first callback failed */
  void* got = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(dup, refusing, &got, &flag));
  CHECK(flag == 1 && got == &value); /* still cached */
  CHECK_MPI(MPI_Comm_get_attr(dup, counted, &got, &flag));
  CHECK(flag == 0);

  CHECK_MPI(MPI_Comm_free(&dup)); /* the retry runs the failed callback again */
  CHECK(dup == MPI_COMM_NULL && counted_deletes == 1);

  /* MPI_Comm_delete_attr: a failed callback keeps the attribute. */
  CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, refusing, &value));
  refusals_left = 1;
  EXPECT_ERROR_CLASS(MPI_ERR_OTHER, MPI_Comm_delete_attr(MPI_COMM_SELF, refusing));
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_SELF, refusing, &got, &flag));
  CHECK(flag == 1 && got == &value);
  CHECK_MPI(MPI_Comm_delete_attr(MPI_COMM_SELF, refusing));
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_SELF, refusing, &got, &flag));
  CHECK(flag == 0);

  /* A freed keyval still deletes the attributes it cached. */
  CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, counted, &value));
  const int counted_id = counted;
  CHECK_MPI(MPI_Comm_free_keyval(&counted));
  CHECK_MPI(MPI_Comm_delete_attr(MPI_COMM_SELF, counted_id));
  CHECK(counted_deletes == 2);
  CHECK_MPI(MPI_Comm_free_keyval(&refusing));
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  free_after_a_failed_delete();

  /* MPI_Finalize deletes self's attributes, then world's: a failure on self must not skip
   * world's callbacks. */
  int refusing = MPI_KEYVAL_INVALID;
  int counted = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, refusing_delete, &refusing, NULL));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete, &counted,
                                   &world_deletes));
  static int value = 1;
  CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, refusing, &value));
  CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_WORLD, counted, &value));
  refusals_left = 1;
  const int rc = MPI_Finalize();
  if (rc == MPI_SUCCESS || world_deletes != 1) {
    fprintf(stderr, "MPI_Finalize returned %d with %d world delete callbacks (expected an error "
                    "and 1)\n", rc, world_deletes);
    return 3;
  }
  return 0;
}
