/* Error classes with MPI_ERRORS_RETURN: invalid arguments come back as the documented MPI error
 * classes (and the job keeps working), truncation is reported per request, and handlers are
 * inherited by new communicators. */
#include <string.h>

#include "mpitest.h"

/* The call must fail with error class `cls`, and MPI_Error_string must describe it. */
#define EXPECT_CLASS(cls, call)                                                          \
  do {                                                                                   \
    int expect_rc_ = (call);                                                             \
    if (error_class_of(expect_rc_) != (cls)) {                                           \
      fprintf(stderr, "%s:%d: %s returned class %d, expected %s\n", __FILE__, __LINE__,  \
              #call, error_class_of(expect_rc_), #cls);                                  \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                      \
    }                                                                                    \
    char expect_text_[MPI_MAX_ERROR_STRING];                                             \
    int expect_len_ = 0;                                                                 \
    CHECK_MPI(MPI_Error_string(expect_rc_, expect_text_, &expect_len_));                 \
    CHECK(expect_len_ > 0);                                                              \
  } while (0)

/* A status of a message from rank 0 with `tag`, truncated to two ints. */
static void check_truncated_status(const MPI_Status* status, int tag) {
  CHECK(status->MPI_SOURCE == 0 && status->MPI_TAG == tag);
  int count = -1;
  CHECK_MPI(MPI_Get_count(status, MPI_INT, &count));
#ifdef SEMPI_MPI
  CHECK(count == 2);
#else
  CHECK(count == 2 || count == 4); /* Open MPI 4.1 counts the whole message */
#endif
}

/* Receives rank 0's messages {5, 6, 7, 8} tagged 60..65 into two ints, by every completion
 * call. */
static void check_truncated_receives(void) {
  int small[2] = {-1, -1};
  MPI_Status status = {0};
  MPI_Request r;
  EXPECT_CLASS(MPI_ERR_TRUNCATE, MPI_Recv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                          MPI_COMM_WORLD, &status));
  check_truncated_status(&status, 60);
  CHECK(small[0] == 5 && small[1] == 6); /* what fits is delivered */

  CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
  EXPECT_CLASS(MPI_ERR_TRUNCATE, MPI_Wait(&r, &status));
  CHECK(r == MPI_REQUEST_NULL);
  check_truncated_status(&status, 61);

  MPI_Status statuses[1];
  CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
  EXPECT_CLASS(MPI_ERR_IN_STATUS, MPI_Waitall(1, &r, statuses));
  CHECK(error_class_of(statuses[0].MPI_ERROR) == MPI_ERR_TRUNCATE);
  check_truncated_status(&statuses[0], 62);

  int index = -1;
  CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
  EXPECT_CLASS(MPI_ERR_TRUNCATE, MPI_Waitany(1, &r, &index, &status));
  CHECK(index == 0);
  check_truncated_status(&status, 63);

  int flag = 0;
  int rc = MPI_SUCCESS;
  CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
  while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(&r, &flag, &status);
  CHECK(flag && error_class_of(rc) == MPI_ERR_TRUNCATE);
  check_truncated_status(&status, 64);

  const int reply = 1;
  EXPECT_CLASS(MPI_ERR_TRUNCATE,
               MPI_Sendrecv(&reply, 1, MPI_INT, 0, 66, small, 2, MPI_INT, MPI_ANY_SOURCE,
                            MPI_ANY_TAG, MPI_COMM_WORLD, &status));
  check_truncated_status(&status, 65);
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int buf[4] = {1, 2, 3, 4};

  /* Point-to-point arguments. */
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Recv(buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD,
                                      MPI_STATUS_IGNORE));
  EXPECT_CLASS(MPI_ERR_TAG, MPI_Send(buf, 1, MPI_INT, rank, -5, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_TAG, MPI_Recv(buf, 1, MPI_INT, rank, -5, MPI_COMM_WORLD,
                                     MPI_STATUS_IGNORE));
  EXPECT_CLASS(MPI_ERR_COUNT, MPI_Send(buf, -1, MPI_INT, rank, 0, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_COMM, MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL));
  EXPECT_CLASS(MPI_ERR_TYPE, MPI_Send(buf, 1, MPI_DATATYPE_NULL, rank, 0, MPI_COMM_WORLD));
  MPI_Datatype uncommitted;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &uncommitted));
  EXPECT_CLASS(MPI_ERR_TYPE, MPI_Send(buf, 1, uncommitted, rank, 0, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Type_free(&uncommitted));
  MPI_Request r;
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Isend(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &r));

  /* Collective arguments (every rank makes the same mistake, so none waits). */
  EXPECT_CLASS(MPI_ERR_ROOT, MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD));
  /* MPI_ROOT and MPI_PROC_NULL name roots of intercommunicator collectives only. */
  EXPECT_CLASS(MPI_ERR_ROOT, MPI_Bcast(buf, 1, MPI_INT, MPI_ROOT, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_ROOT, MPI_Bcast(buf, 1, MPI_INT, MPI_PROC_NULL, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_ROOT, MPI_Reduce(buf, buf + 2, 1, MPI_INT, MPI_SUM, MPI_ROOT,
                                        MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_ROOT, MPI_Gather(buf, 1, MPI_INT, buf + 2, 1, MPI_INT, MPI_ROOT,
                                        MPI_COMM_WORLD));
  int out[4];
  EXPECT_CLASS(MPI_ERR_OP, MPI_Allreduce(buf, out, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_OP, MPI_Allreduce(buf, out, 1, MPI_2INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT_CLASS(MPI_ERR_COUNT, MPI_Allreduce(buf, out, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));

  /* Handles. */
  MPI_Datatype predefined = MPI_INT;
  EXPECT_CLASS(MPI_ERR_TYPE, MPI_Type_free(&predefined));
  MPI_Comm world = MPI_COMM_WORLD;
  EXPECT_CLASS(MPI_ERR_COMM, MPI_Comm_free(&world));
  MPI_Group group;
  MPI_Group sub;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &group));
  const int bad_rank = size;
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Group_incl(group, 1, &bad_rank, &sub));
  CHECK_MPI(MPI_Group_free(&group));
  int coords[2];
  EXPECT_CLASS(MPI_ERR_TOPOLOGY, MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, coords));
  int dims[2] = {2, 0};
  EXPECT_CLASS(MPI_ERR_DIMS, MPI_Dims_create(7, 2, dims));

  /* Truncation: a blocking receive, then per-request in Waitall. */
  int big[4] = {rank, rank, rank, rank};
  int small[2];
  CHECK_MPI(MPI_Isend(big, 4, MPI_INT, rank, 50, MPI_COMM_WORLD, &r));
  MPI_Status status;
  EXPECT_CLASS(MPI_ERR_TRUNCATE,
               MPI_Recv(small, 2, MPI_INT, rank, 50, MPI_COMM_WORLD, &status));
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  MPI_Request reqs[4];
  MPI_Status statuses[4];
  int fits[4];
  CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, rank, 51, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Irecv(fits, 4, MPI_INT, rank, 52, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Isend(big, 4, MPI_INT, rank, 51, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Isend(big, 4, MPI_INT, rank, 52, MPI_COMM_WORLD, &reqs[3]));
#ifdef SEMPI_MPI
  EXPECT_CLASS(MPI_ERR_IN_STATUS, MPI_Waitall(4, reqs, statuses));
  CHECK(error_class_of(statuses[0].MPI_ERROR) == MPI_ERR_TRUNCATE);
#else
  /* Open MPI 4.1 does not report the truncation of a message to self completed by Waitall. */
  const int rc = MPI_Waitall(4, reqs, statuses);
  CHECK(rc == MPI_SUCCESS || error_class_of(rc) == MPI_ERR_IN_STATUS);
#endif
  CHECK(fits[3] == rank);

  /* A truncated receive has still matched a message: its status names the sender and the tag
   * (the only way an MPI_ANY_SOURCE receive learns them) and counts what was kept, whichever
   * call completes it (MPI 3.1 sections 3.2.5 and 3.7.5). Rank 0 sends, rank 1 truncates. */
  if (size >= 2 && rank == 0) {
    const int numbers[4] = {5, 6, 7, 8};
    for (int tag = 60; tag < 66; ++tag) {
      CHECK_MPI(MPI_Send(numbers, 4, MPI_INT, 1, tag, MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Recv(fits, 1, MPI_INT, 1, 66, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  } else if (size >= 2 && rank == 1) {
    check_truncated_receives();
  }

  /* The handler that applies is the communicator's when the error is raised, not when the
   * request was started (MPI 3.1 section 8.3): rank 1 posts a receive under
   * MPI_ERRORS_ARE_FATAL and switches to MPI_ERRORS_RETURN; the truncation then comes back as
   * a return code. sempi keeps the communicator's handler for requests that outlive
   * MPI_Comm_free (which MPI allows); Open MPI 4.1 then aborts, so it frees after the wait. */
  MPI_Comm late;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &late));
  CHECK_MPI(MPI_Comm_set_errhandler(late, MPI_ERRORS_ARE_FATAL));
#ifdef SEMPI_MPI
  const int free_before_wait = 1;
#else
  const int free_before_wait = 0;
#endif
  if (size >= 2 && rank == 1) {
    int small[2];
    CHECK_MPI(MPI_Irecv(small, 2, MPI_INT, 0, 70, late, &r));
    CHECK_MPI(MPI_Comm_set_errhandler(late, MPI_ERRORS_RETURN));
    if (free_before_wait) CHECK_MPI(MPI_Comm_free(&late));
    EXPECT_CLASS(MPI_ERR_TRUNCATE, MPI_Wait(&r, &status));
    CHECK(status.MPI_SOURCE == 0 && status.MPI_TAG == 70);
  } else if (size >= 2 && rank == 0) {
    CHECK_MPI(MPI_Send(big, 4, MPI_INT, 1, 70, late));
  }
  if (late != MPI_COMM_NULL) CHECK_MPI(MPI_Comm_free(&late));

  /* New communicators inherit the handler; the job still works after all of the above. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  MPI_Errhandler handler;
  CHECK_MPI(MPI_Comm_get_errhandler(dup, &handler));
  CHECK(handler == MPI_ERRORS_RETURN);
  CHECK_MPI(MPI_Errhandler_free(&handler));
  EXPECT_CLASS(MPI_ERR_RANK, MPI_Send(buf, 1, MPI_INT, size, 0, dup));
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, dup));
  CHECK(sum == size * (size - 1) / 2);
  CHECK_MPI(MPI_Comm_free(&dup));

  CHECK_MPI(MPI_Finalize());
  return 0;
}
