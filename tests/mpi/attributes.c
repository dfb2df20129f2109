/* Attribute caching on communicators (MPI 3.1 section 6.7): keys with copy and delete
 * callbacks, the predefined callbacks, MPI_Comm_dup copying and MPI_Comm_free deleting
 * attributes, and keys freed while attributes still use them. */
#include "mpitest.h"

/* What the callbacks of one key have seen; passed to them as extra_state. */
struct calls {
  int copies;
  int deletes;
  void* last_deleted;
};

static int counting_copy(MPI_Comm oldcomm, int keyval, void* extra_state, void* value_in,
                         void* value_out, int* flag) {
  (void)oldcomm;
  (void)keyval;
  ((struct calls*)extra_state)->copies++;
  *(void**)value_out = value_in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm;
  (void)keyval;
  struct calls* c = (struct calls*)extra_state;
  c->deletes++;
  c->last_deleted = value;
  return MPI_SUCCESS;
}

static int failing_copy(MPI_Comm oldcomm, int keyval, void* extra_state, void* value_in,
                        void* value_out, int* flag) {
  (void)oldcomm;
  (void)keyval;
  (void)extra_state;
  (void)value_in;
  (void)value_out;
  *flag = 0;
  return MPI_ERR_OTHER;
}

/* Counts deletions that happen while MPI is still usable (before MPI_Finalize completes). */
static int deleted_before_finalized = 0;

static int note_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm;
  (void)keyval;
  (void)value;
  (void)extra_state;
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized) deleted_before_finalized++;
  return MPI_SUCCESS;
}

/* The attribute under `keyval` on `comm`, or NULL if there is none. */
static void* attribute(MPI_Comm comm, int keyval) {
  void* value = NULL;
  int flag = -1;
  CHECK_MPI(MPI_Comm_get_attr(comm, keyval, &value, &flag));
  CHECK(flag == 0 || flag == 1);
  return flag ? value : NULL;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  static int values[4];

  struct calls counted = {0, 0, NULL};
  struct calls by_value = {0, 0, NULL};
  int counted_key = MPI_KEYVAL_INVALID;
  int private_key = MPI_KEYVAL_INVALID;
  int by_value_key = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Comm_create_keyval(counting_copy, counting_delete, &counted_key, &counted));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &private_key,
                                   NULL));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, counting_delete, &by_value_key, &by_value));
  CHECK(counted_key != private_key && counted_key != by_value_key);

  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  CHECK(attribute(comm, counted_key) == NULL);
  CHECK_MPI(MPI_Comm_set_attr(comm, counted_key, &values[0]));
  CHECK_MPI(MPI_Comm_set_attr(comm, private_key, &values[1]));
  CHECK_MPI(MPI_Comm_set_attr(comm, by_value_key, &values[2]));
  CHECK(attribute(comm, counted_key) == &values[0]);
  CHECK(attribute(comm, private_key) == &values[1]);
  CHECK(attribute(MPI_COMM_WORLD, counted_key) == NULL); /* cached per communicator */

  /* Replacing a value deletes the old one through the callback. */
  CHECK_MPI(MPI_Comm_set_attr(comm, counted_key, &values[3]));
  CHECK(counted.deletes == 1 && counted.last_deleted == &values[0]);
  CHECK(attribute(comm, counted_key) == &values[3]);

  /* Dup runs the copy callbacks: NULL_COPY_FN copies nothing, DUP_FN the value itself. */
  MPI_Comm copy;
  CHECK_MPI(MPI_Comm_dup(comm, &copy));
  CHECK(counted.copies == 1);
  CHECK(attribute(copy, counted_key) == &values[3]);
  CHECK(attribute(copy, private_key) == NULL);
  CHECK(attribute(copy, by_value_key) == &values[2]);
  /* Other constructors copy no attributes. */
  MPI_Comm split;
  CHECK_MPI(MPI_Comm_split(comm, 0, rank, &split));
  CHECK(attribute(split, counted_key) == NULL && counted.copies == 1);
  CHECK_MPI(MPI_Comm_free(&split));

  /* Explicit deletion runs the delete callback once. */
  CHECK_MPI(MPI_Comm_delete_attr(comm, counted_key));
  CHECK(counted.deletes == 2 && counted.last_deleted == &values[3]);
  CHECK(attribute(comm, counted_key) == NULL);

  /* A freed key is invalid for new use, but the attributes that use it keep working and
   * their delete callback still runs when the communicator is freed. */
  CHECK_MPI(MPI_Comm_free_keyval(&counted_key));
  CHECK(counted_key == MPI_KEYVAL_INVALID);
  CHECK_MPI(MPI_Comm_free(&copy));
  CHECK(counted.deletes == 3 && counted.last_deleted == &values[3]);
  CHECK(by_value.deletes == 1 && by_value.last_deleted == &values[2]);

  /* A failing copy callback makes the dup fail with its error. */
  int failing_key = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &failing_key, NULL));
  MPI_Comm refuses;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &refuses));
  CHECK_MPI(MPI_Comm_set_attr(refuses, failing_key, &values[0]));
  CHECK_MPI(MPI_Comm_set_errhandler(refuses, MPI_ERRORS_RETURN));
  MPI_Comm never = MPI_COMM_SELF; /* a failed dup leaves no handle to mistake for a copy */
  CHECK(error_class_of(MPI_Comm_dup(refuses, &never)) == MPI_ERR_OTHER);
  CHECK(never == MPI_COMM_NULL);
  CHECK_MPI(MPI_Comm_free(&refuses));
  CHECK_MPI(MPI_Comm_free_keyval(&failing_key));

  /* Predefined attributes sit beside the program's. */
  int* tag_ub = NULL;
  int flag = 0;
  CHECK_MPI(MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &flag));
  CHECK(flag && *tag_ub >= 32767);

  CHECK_MPI(MPI_Comm_free(&comm));
  CHECK(by_value.deletes == 2);
  CHECK_MPI(MPI_Comm_free_keyval(&private_key));
  CHECK_MPI(MPI_Comm_free_keyval(&by_value_key));

  /* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works
   * (MPI 3.1 section 8.7); the key may already be freed. */
  int self_key = MPI_KEYVAL_INVALID;
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, note_delete, &self_key, NULL));
  CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, self_key, &values[0]));
  CHECK_MPI(MPI_Comm_free_keyval(&self_key));
  CHECK(deleted_before_finalized == 0);
  CHECK_MPI(MPI_Finalize());
  if (deleted_before_finalized != 1) {
    fprintf(stderr, "MPI_Finalize ran the MPI_COMM_SELF delete callback %d times\n",
            deleted_before_finalized);
    return 1;
  }
  return 0;
}
