/* sempi-specific: a child made by fork() without exec is not a rank. One that returns through
 * exit() runs the atexit handlers, so sempi's "finalize at exit" (exit_without_finalize.c)
 * would finalize the parent's job from the child: write to the parent's channels, its
 * bootstrap socket and its audit log. The child must leave all of them alone; run_mpi_test.sh
 * then verifies the job's audit logs. Run with forked_child.json (allow all). */
#include <sys/wait.h>
#include <unistd.h>

#include "../mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  fflush(stdout);
  const pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) exit(0); /* MPI_Finalize runs in the child, at exit */
  int status = -1;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size * (size - 1) / 2);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
