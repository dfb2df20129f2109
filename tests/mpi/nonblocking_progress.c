/* MPI's progress rule for nonblocking collectives: a rank blocked in another call still
 * advances them. Rank 0 starts an MPI_Ibarrier before any other rank does (it then tells them
 * to go), so its barrier cannot have moved past its first round on its own, and blocks in
 * MPI_Recv for a message that rank 2 sends only once its own MPI_Wait on the barrier has
 * returned. From 3 ranks on, rank 2's second round waits for rank 0's second, which only rank
 * 0's blocking receive can post. */
#include "mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int sender = size > 2 ? 2 : size - 1;
  int go = 1;
  int token = 0;
  MPI_Request barrier = MPI_REQUEST_NULL;
  if (rank == 0) {
    CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &barrier));
    for (int peer = 1; peer < size; ++peer) {
      CHECK_MPI(MPI_Send(&go, 1, MPI_INT, peer, 1, MPI_COMM_WORLD));
    }
    if (sender != 0) {
      CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, sender, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(token == 42);
    }
    CHECK_MPI(MPI_Wait(&barrier, MPI_STATUS_IGNORE));
  } else {
    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &barrier));
    CHECK_MPI(MPI_Wait(&barrier, MPI_STATUS_IGNORE));
    if (rank == sender) {
      token = 42;
      CHECK_MPI(MPI_Send(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
    }
  }
  CHECK_MPI(MPI_Finalize());
  return 0;
}
