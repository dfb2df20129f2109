/* Job start-up cost: MPI_Init, one barrier, MPI_Finalize. The harness times the whole job. */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
