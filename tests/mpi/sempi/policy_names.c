/* sempi-specific: the name a program gives a communicator with MPI_Comm_set_name is the name
 * the job's policy judges it by. Run with policy_names.json: on a communicator named "secret"
 * only tag 1 is allowed, so the same send that works under its default name is refused once
 * the program renames it (SEMPI_ERR_POLICY, reported through MPI_ERRORS_RETURN), and the
 * receiver applies the new name's rules from the moment it renames. */
#include <string.h>

#include "../mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;

  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  int out = rank;
  int in = -1;
  CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 2, &in, 1, MPI_INT, left, 2, comm,
                         MPI_STATUS_IGNORE));
  CHECK(in == left);

  CHECK_MPI(MPI_Comm_set_name(comm, "secret"));
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  CHECK_MPI(MPI_Comm_get_name(comm, name, &len));
  CHECK(strcmp(name, "secret") == 0);
  CHECK_MPI(MPI_Barrier(comm));  /* every member has renamed it */

  const int rc = MPI_Send(&out, 1, MPI_INT, right, 2, comm);
  CHECK(error_class_of(rc) == SEMPI_ERR_POLICY);
  char text[MPI_MAX_ERROR_STRING];
  CHECK_MPI(MPI_Error_string(rc, text, &len));
  CHECK(strstr(text, "SEMPI_ERR_POLICY") != NULL);
  in = -1;
  CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, 1, &in, 1, MPI_INT, left, 1, comm,
                         MPI_STATUS_IGNORE));
  CHECK(in == left);

  CHECK_MPI(MPI_Comm_free(&comm));

  /* A rename binds the receiver at once, not at its next operation on the communicator: rank 1
   * renames a fresh duplicate and does nothing more on it. Rank 0 keeps the default name, so
   * its own check lets the send go, and rank 1's engine refuses it under the new name. */
  MPI_Comm quiet;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &quiet));
  if (rank == 1) CHECK_MPI(MPI_Comm_set_name(quiet, "secret"));
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0 && size > 1) {
    CHECK(error_class_of(MPI_Ssend(&out, 1, MPI_INT, 1, 2, quiet)) == SEMPI_ERR_POLICY);
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Comm_free(&quiet));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
