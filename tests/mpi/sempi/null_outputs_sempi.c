/* sempi-specific half of tests/mpi/null_outputs.c: null output arguments for which Open MPI 4.1
 * crashes (MPI_Get_count, MPI_Iprobe, MPI_Error_class, nonblocking collectives) or answers
 * another class (MPI_ERR_GROUP, _TYPE, _REQUEST, _INFO for the handle a call creates or an array
 * of requests). sempi, like MPICH, reports each as MPI_ERR_ARG. (A null status for
 * MPI_Status_set_elements is MPI_STATUS_IGNORE here, as in Open MPI, and succeeds; see
 * datatype_bounds.c.) Run with null_outputs_sempi.json (allow all). */
#include "../mpitest.h"

static void add_ints(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((const int*)in)[i];
}

/* New handles: the call that would create one fails and creates nothing. */
static void new_handles(void) {
  MPI_Group world;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  const int zero = 0;
  EXPECT_ARG(MPI_Group_incl(world, 1, &zero, NULL));
  EXPECT_ARG(MPI_Group_union(world, world, NULL));
  EXPECT_ARG(MPI_Group_translate_ranks(world, 1, &zero, world, NULL));
  CHECK_MPI(MPI_Group_free(&world));

  EXPECT_ARG(MPI_Type_contiguous(2, MPI_INT, NULL));
  EXPECT_ARG(MPI_Type_vector(2, 1, 2, MPI_INT, NULL));
  EXPECT_ARG(MPI_Type_dup(MPI_INT, NULL));
  EXPECT_ARG(MPI_Op_create(add_ints, 1, NULL));

  MPI_Info info;
  CHECK_MPI(MPI_Info_create(&info));
  EXPECT_ARG(MPI_Info_create(NULL));
  EXPECT_ARG(MPI_Info_dup(info, NULL));
  CHECK_MPI(MPI_Info_free(&info));
}

/* Requests: a send or receive without a request handle starts nothing, so the message sent
 * next is the one the real receive gets. */
static void requests(int rank) {
  int value = rank;
  int got = -1;
  MPI_Status status;
  EXPECT_ARG(MPI_Isend(&value, 1, MPI_INT, 0, 0, MPI_COMM_SELF, NULL));
  EXPECT_ARG(MPI_Irecv(&got, 1, MPI_INT, 0, 0, MPI_COMM_SELF, NULL));
  EXPECT_ARG(MPI_Send_init(&value, 1, MPI_INT, 0, 0, MPI_COMM_SELF, NULL));
  EXPECT_ARG(MPI_Recv_init(&got, 1, MPI_INT, 0, 0, MPI_COMM_SELF, NULL));
  EXPECT_ARG(MPI_Iprobe(0, 0, MPI_COMM_SELF, NULL, MPI_STATUS_IGNORE));
  value = rank + 100;
  CHECK_MPI(MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_SELF));
  CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &status));
  CHECK(got == rank + 100);
  EXPECT_ARG(MPI_Get_count(&status, MPI_INT, NULL));
  EXPECT_ARG(MPI_Waitall(1, NULL, MPI_STATUSES_IGNORE));
  EXPECT_ARG(MPI_Startall(1, NULL));
}

/* Nonblocking collectives without a request start nothing: the communicator still works. */
static void nonblocking_collectives(int size) {
  int in = 1;
  int out = 0;
  EXPECT_ARG(MPI_Ibarrier(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Ibcast(&in, 1, MPI_INT, 0, MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Iallgather(&in, 1, MPI_INT, &out, 1, MPI_INT, MPI_COMM_SELF, NULL));
  CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(out == size);
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  new_handles();
  requests(rank);
  nonblocking_collectives(size);
  EXPECT_ARG(MPI_Error_class(MPI_ERR_ARG, NULL));

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
