/* User-defined error handlers (MPI_Comm_create_errhandler): the function is called with the
 * communicator the error was raised on - for argument errors, for errors of a request found by
 * MPI_Wait, on communicators that inherited the handler, after MPI_Errhandler_free, and through
 * MPI_Comm_call_errhandler - and the failing call returns the error code. */
#include "mpitest.h"

/* What the handler saw last, and how often it ran. */
static int calls_;
static MPI_Comm comm_seen_;
static int code_seen_;

static void record(MPI_Comm* comm, int* code, ...) {
  ++calls_;
  comm_seen_ = *comm;
  code_seen_ = *code;
}

/* `call` fails with class `cls`, and the handler ran once, for `comm`, with the same code. */
#define EXPECT_HANDLED(comm, cls, call)                                                  \
  do {                                                                                   \
    const int before_ = calls_;                                                          \
    const int rc_ = (call);                                                              \
    CHECK(error_class_of(rc_) == (cls));                                                 \
    CHECK(calls_ == before_ + 1);                                                        \
    CHECK(comm_seen_ == (comm));                                                         \
    CHECK(code_seen_ == rc_);                                                            \
  } while (0)

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;

  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  CHECK_MPI(MPI_Comm_create_errhandler(record, &handler));
  CHECK(handler != MPI_ERRHANDLER_NULL);

  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  CHECK_MPI(MPI_Comm_set_errhandler(comm, handler));
  MPI_Errhandler got = MPI_ERRHANDLER_NULL;
  CHECK_MPI(MPI_Comm_get_errhandler(comm, &got));
  CHECK(got == handler);
  CHECK_MPI(MPI_Errhandler_free(&got));
  CHECK(got == MPI_ERRHANDLER_NULL);

  /* An argument error: the destination rank does not exist. */
  int value = rank;
  EXPECT_HANDLED(comm, MPI_ERR_RANK, MPI_Send(&value, 1, MPI_INT, size, 0, comm));

  /* A request's error, found by MPI_Wait: a message larger than the receive buffer. (From
   * another rank only: Open MPI 4.1 does not report truncation of a message to self.) */
  if (size > 1) {
    int pair[2] = {rank, rank};
    int one = -1;
    MPI_Request request;
    CHECK_MPI(MPI_Irecv(&one, 1, MPI_INT, left, 1, comm, &request));
    CHECK_MPI(MPI_Send(pair, 2, MPI_INT, right, 1, comm));
    EXPECT_HANDLED(comm, MPI_ERR_TRUNCATE, MPI_Wait(&request, MPI_STATUS_IGNORE));
  }

  /* A communicator created from `comm` inherits the handler, and it is called with the new
   * communicator, not the one it was inherited from. */
  MPI_Comm child;
  CHECK_MPI(MPI_Comm_dup(comm, &child));
  CHECK_MPI(MPI_Comm_get_errhandler(child, &got));
  CHECK(got == handler);
  CHECK_MPI(MPI_Errhandler_free(&got));
  EXPECT_HANDLED(child, MPI_ERR_TAG, MPI_Send(&value, 1, MPI_INT, right, -5, child));

  /* The program raises an error itself: the handler gets exactly that code, and the call
   * succeeds once the handler returns. */
  const int before = calls_;
  CHECK_MPI(MPI_Comm_call_errhandler(child, MPI_ERR_OTHER));
  CHECK(calls_ == before + 1 && comm_seen_ == child && code_seen_ == MPI_ERR_OTHER);

  /* Freeing the handle does not detach the handler from communicators that use it. */
  CHECK_MPI(MPI_Errhandler_free(&handler));
  CHECK(handler == MPI_ERRHANDLER_NULL);
  EXPECT_HANDLED(comm, MPI_ERR_RANK, MPI_Send(&value, 1, MPI_INT, -7, 0, comm));

  /* A handler on MPI_COMM_WORLD, then back to the default. */
  CHECK_MPI(MPI_Comm_get_errhandler(comm, &handler));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler));
  EXPECT_HANDLED(MPI_COMM_WORLD, MPI_ERR_COUNT, MPI_Send(&value, -1, MPI_INT, right, 0,
                                                          MPI_COMM_WORLD));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_MPI(MPI_Errhandler_free(&handler));

  /* MPI_ERRORS_RETURN: MPI_Comm_call_errhandler returns, the user handler is not called. */
  CHECK_MPI(MPI_Comm_set_errhandler(child, MPI_ERRORS_RETURN));
  const int quiet = calls_;
  CHECK_MPI(MPI_Comm_call_errhandler(child, MPI_ERR_OTHER));
  CHECK(calls_ == quiet);

  CHECK_MPI(MPI_Comm_free(&child));
  CHECK_MPI(MPI_Comm_free(&comm));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
