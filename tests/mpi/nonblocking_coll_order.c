/* Nonblocking collectives completed in different orders on different ranks: rank 0 waits for
 * (or tests) the last one first, the others the first one first. Each rank's progress on one
 * must not depend on which it waits for, or the ranks wait for rounds nobody posts (at 3 ranks
 * and more, where a barrier or an allreduce takes several rounds). */
#include "mpitest.h"

/* Rank 0 starts all three before any other rank starts one (it then tells them to go), so
 * nothing it started can have moved past its first round on its own. */
static void start_three(int rank, int size, MPI_Request r[3], int* in, int* sum) {
  int go = 1;
  if (rank != 0) CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
  CHECK_MPI(MPI_Iallreduce(in, sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
  CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &r[2]));
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer) {
      CHECK_MPI(MPI_Send(&go, 1, MPI_INT, peer, 99, MPI_COMM_WORLD));
    }
  }
}

/* Rank 0 takes them last first. */
static void in_rank_order(int rank, MPI_Request r[3], MPI_Request order[3]) {
  for (int i = 0; i < 3; ++i) order[i] = rank == 0 ? r[2 - i] : r[i];
}

/* One round: start the three, complete them with MPI_Waitall, or with MPI_Testall in a loop
 * (each call testing all three), in this rank's order; check the sum. */
static void round_in_rank_order(int rank, int size, int use_testall) {
  MPI_Request r[3];
  MPI_Request order[3];
  int in = rank;
  int sum = -1;
  start_three(rank, size, r, &in, &sum);
  in_rank_order(rank, r, order);
  if (use_testall) {
    int flag = 0;
    while (!flag) CHECK_MPI(MPI_Testall(3, order, &flag, MPI_STATUSES_IGNORE));
  } else {
    CHECK_MPI(MPI_Waitall(3, order, MPI_STATUSES_IGNORE));
  }
  CHECK(sum == size * (size - 1) / 2);
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  for (int round = 0; round < 6; ++round) round_in_rank_order(rank, size, round >= 3);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
