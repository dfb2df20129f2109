/* MPI_THREAD_MULTIPLE: several threads per rank communicate at once, each on its own
 * duplicate of MPI_COMM_WORLD (point-to-point rings and collectives), on communicators the
 * threads create concurrently (MPI_Comm_dup, MPI_Comm_create_group with distinct tags), plus
 * wildcard receives distinguished by tag on a shared communicator. */
#include <pthread.h>

#include "mpitest.h"

enum { THREADS = 3, ROUNDS = 20 };

struct job {
  MPI_Comm comm;
  int index;
  int rank;
  int size;
};

/* A ring and an allreduce on `comm` whose data name the thread: traffic that crossed into
 * another thread's communicator fails the checks. */
static void ring_and_sum(const struct job* j, MPI_Comm comm, int round) {
  int rank = 0;
  CHECK_MPI(MPI_Comm_rank(comm, &rank));
  const int right = (rank + 1) % j->size;
  const int left = (rank + j->size - 1) % j->size;
  int out = rank * 1000 + j->index * 100 + round;
  int in = -1;
  CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, right, round, &in, 1, MPI_INT, left, round, comm,
                         MPI_STATUS_IGNORE));
  CHECK(in == left * 1000 + j->index * 100 + round);
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&out, &sum, 1, MPI_INT, MPI_SUM, comm));
  CHECK(sum == 1000 * (j->size * (j->size - 1) / 2) + j->size * (j->index * 100 + round));
}

static void* worker(void* arg) {
  const struct job* j = arg;
  const int right = (j->rank + 1) % j->size;
  const int left = (j->rank + j->size - 1) % j->size;
  /* Every thread creates communicators at the same time as the others: a duplicate of its own
   * communicator, and one from the world group in reverse order with its own tag (the tag is
   * what keeps concurrent MPI_Comm_create_group calls on one communicator apart). */
  MPI_Comm own = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_dup(j->comm, &own));
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group reversed = MPI_GROUP_NULL;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  int ranges[1][3] = {{j->size - 1, 0, -1}};
  CHECK_MPI(MPI_Group_range_incl(world_group, 1, ranges, &reversed));
  MPI_Comm grouped = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, reversed, 600 + j->index, &grouped));
  int grouped_rank = -1;
  CHECK_MPI(MPI_Comm_rank(grouped, &grouped_rank));
  CHECK(grouped_rank == j->size - 1 - j->rank);
  for (int round = 0; round < ROUNDS; ++round) {
    ring_and_sum(j, j->comm, round);
    ring_and_sum(j, own, round);
    ring_and_sum(j, grouped, round);
  }
  CHECK_MPI(MPI_Comm_free(&own));
  CHECK_MPI(MPI_Comm_free(&grouped));
  CHECK_MPI(MPI_Group_free(&reversed));
  CHECK_MPI(MPI_Group_free(&world_group));
  /* On the shared world communicator: each thread receives its own tag from any source. */
  int from_any = -1;
  MPI_Status status;
  int value = j->index;
  MPI_Request r;
  CHECK_MPI(MPI_Isend(&value, 1, MPI_INT, right, 500 + j->index, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Recv(&from_any, 1, MPI_INT, MPI_ANY_SOURCE, 500 + j->index, MPI_COMM_WORLD,
                     &status));
  CHECK(from_any == j->index && status.MPI_SOURCE == left);
  CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  return NULL;
}

int main(int argc, char** argv) {
  int provided = -1;
  CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("MPI_THREAD_MULTIPLE is not provided; nothing to test\n");
    MPI_Finalize();
    return 0;
  }
  int rank = 0;
  int size = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  struct job jobs[THREADS];
  pthread_t threads[THREADS];
  /* Communicators are created by the main thread, in the same order on every rank. */
  for (int t = 0; t < THREADS; ++t) {
    jobs[t].index = t;
    jobs[t].rank = rank;
    jobs[t].size = size;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm));
  }
  for (int t = 0; t < THREADS; ++t) CHECK(pthread_create(&threads[t], NULL, worker, &jobs[t]) == 0);
  for (int t = 0; t < THREADS; ++t) CHECK(pthread_join(threads[t], NULL) == 0);
  for (int t = 0; t < THREADS; ++t) CHECK_MPI(MPI_Comm_free(&jobs[t].comm));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
