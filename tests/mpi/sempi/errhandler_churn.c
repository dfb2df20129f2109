/* sempi-specific: a library that saves the communicator's error handler, sets
 * MPI_ERRORS_RETURN and restores the saved one around each of its calls must not make the
 * process grow with every call. Each MPI_Comm_set_errhandler with a user handler used to
 * allocate a binding kept until exit (about a hundred bytes; 200,000 rounds: 20 MB and
 * more). Run with errhandler_churn.json (allow all). */
#include <sys/resource.h>

#include "../mpitest.h"

static void on_error(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  (void)code;
}

static long peak_rss_kib(void) {
  struct rusage usage;
  CHECK(getrusage(RUSAGE_SELF, &usage) == 0);
  return usage.ru_maxrss;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Errhandler mine;
  CHECK_MPI(MPI_Comm_create_errhandler(on_error, &mine));
  CHECK_MPI(MPI_Comm_set_errhandler(comm, mine));
  const long before = peak_rss_kib();
  for (int round = 0; round < 200000; ++round) {
    MPI_Errhandler saved;
    CHECK_MPI(MPI_Comm_get_errhandler(comm, &saved));
    CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(comm, saved));
    CHECK_MPI(MPI_Errhandler_free(&saved)); /* MPI_Comm_get_errhandler's reference */
  }
  const long grown = peak_rss_kib() - before;
  if (grown > 4096) fprintf(stderr, "rank %d: grew by %ld KiB\n", rank, grown);
  CHECK(grown <= 4096);
  /* Still the program's handler. */
  MPI_Errhandler current;
  CHECK_MPI(MPI_Comm_get_errhandler(comm, &current));
  CHECK(current == mine);
  CHECK_MPI(MPI_Errhandler_free(&current));
  CHECK_MPI(MPI_Errhandler_free(&mine));
  CHECK_MPI(MPI_Comm_free(&comm));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
