/* sempi-specific (MPI leaves calls after MPI_Finalize undefined; Open MPI aborts): a program
 * that set MPI_ERRORS_RETURN on MPI_COMM_WORLD gets MPI_ERR_OTHER, not an abort, from a second
 * MPI_Finalize and from communication after it. Run with after_finalize.json (allow all). */
#include "../mpitest.h"

/* After MPI_Finalize, MPI_Abort is no way out: exit instead. */
#define EXPECT_OTHER(call)                                                               \
  do {                                                                                   \
    int rc_ = (call);                                                                    \
    if (error_class_of(rc_) != MPI_ERR_OTHER) {                                          \
      fprintf(stderr, "%s:%d: %s returned %d, expected MPI_ERR_OTHER\n", __FILE__,       \
              __LINE__, #call, rc_);                                                     \
      exit(3);                                                                           \
    }                                                                                    \
  } while (0)

static int handler_calls = 0;
/* Never freed (it cannot be, after MPI_Finalize): a global keeps it reachable for LeakSanitizer,
 * as a program's handles in its data are. */
static MPI_Comm kept = MPI_COMM_NULL;
static void count_errors(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  (void)code;
  ++handler_calls;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  /* A communicator the program made and never freed, with a handler of its own: after
   * MPI_Finalize it is a handle to nothing, and its handler (still alive) is called. */
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &kept));
  MPI_Errhandler counting;
  CHECK_MPI(MPI_Comm_create_errhandler(count_errors, &counting));
  CHECK_MPI(MPI_Comm_set_errhandler(kept, counting));
  CHECK_MPI(MPI_Errhandler_free(&counting));
  CHECK_MPI(MPI_Finalize());
  int flag = 0;
  if (MPI_Finalized(&flag) != MPI_SUCCESS || !flag) exit(3);
  EXPECT_OTHER(MPI_Finalize());
  int value = rank;
  EXPECT_OTHER(MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
  EXPECT_OTHER(MPI_Barrier(MPI_COMM_WORLD));
  EXPECT_OTHER(MPI_Comm_rank(kept, &value));
  EXPECT_OTHER(MPI_Send(&value, 1, MPI_INT, 0, 0, kept));
  EXPECT_OTHER(MPI_Comm_free(&kept));
  if (handler_calls != 3 || kept == MPI_COMM_NULL) {
    fprintf(stderr, "kept's handler ran %d times, expected 3\n", handler_calls);
    exit(3);
  }
  printf("rank %d: calls after MPI_Finalize returned MPI_ERR_OTHER\n", rank);
  return 0;
}
