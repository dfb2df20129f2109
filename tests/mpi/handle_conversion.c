/* C <-> Fortran handle conversion (MPI_*_c2f / MPI_*_f2c) for every handle kind: predefined and
 * created handles come back unchanged, distinct handles get distinct numbers, a number is
 * stable, null converts to null, and converted handles work (a request is waited on, a
 * communicator used, a datatype sent with). */
#include "mpitest.h"

#define ROUND_TRIP(kind, handle)                                  \
  do {                                                            \
    const MPI_Fint number_ = MPI_##kind##_c2f(handle);            \
    CHECK(MPI_##kind##_c2f(handle) == number_);                   \
    CHECK(MPI_##kind##_f2c(number_) == (handle));                 \
  } while (0)

#define DISTINCT(kind, a, b) CHECK(MPI_##kind##_c2f(a) != MPI_##kind##_c2f(b))

static void add_ints(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((const int*)in)[i];
}

static void ignore_error(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  (void)code;
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);

  /* Communicators: a converted duplicate is still that communicator. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  ROUND_TRIP(Comm, MPI_COMM_WORLD);
  ROUND_TRIP(Comm, MPI_COMM_SELF);
  ROUND_TRIP(Comm, dup);
  ROUND_TRIP(Comm, MPI_COMM_NULL);
  DISTINCT(Comm, MPI_COMM_WORLD, dup);
  DISTINCT(Comm, MPI_COMM_WORLD, MPI_COMM_SELF);
  DISTINCT(Comm, dup, MPI_COMM_NULL);
  const MPI_Comm back = MPI_Comm_f2c(MPI_Comm_c2f(dup));
  int back_size = 0;
  CHECK_MPI(MPI_Comm_size(back, &back_size));
  CHECK(back_size == size);

  /* Datatypes. */
  MPI_Datatype pair;
  CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
  CHECK_MPI(MPI_Type_commit(&pair));
  ROUND_TRIP(Type, MPI_INT);
  ROUND_TRIP(Type, MPI_DOUBLE);
  ROUND_TRIP(Type, pair);
  ROUND_TRIP(Type, MPI_DATATYPE_NULL);
  DISTINCT(Type, MPI_INT, MPI_DOUBLE);
  DISTINCT(Type, MPI_INT, pair);

  /* Requests: one converted there and back is waited on through the copy. */
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  int out[2] = {rank, -rank};
  int in[2] = {-1, -1};
  MPI_Request recv;
  MPI_Request send;
  CHECK_MPI(MPI_Irecv(in, 1, MPI_Type_f2c(MPI_Type_c2f(pair)), left, 3, back, &recv));
  CHECK_MPI(MPI_Isend(out, 1, pair, right, 3, dup, &send));
  ROUND_TRIP(Request, recv);
  ROUND_TRIP(Request, send);
  ROUND_TRIP(Request, MPI_REQUEST_NULL);
  DISTINCT(Request, recv, send);
  MPI_Request requests[2] = {MPI_Request_f2c(MPI_Request_c2f(recv)),
                             MPI_Request_f2c(MPI_Request_c2f(send))};
  CHECK_MPI(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
  CHECK(in[0] == left && in[1] == -left);

  /* Groups. */
  MPI_Group world_group;
  MPI_Group first;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  const int zero = 0;
  CHECK_MPI(MPI_Group_incl(world_group, 1, &zero, &first));
  ROUND_TRIP(Group, world_group);
  ROUND_TRIP(Group, first);
  ROUND_TRIP(Group, MPI_GROUP_EMPTY);
  ROUND_TRIP(Group, MPI_GROUP_NULL);
  DISTINCT(Group, world_group, first);

  /* Operations: a created one is usable after conversion. */
  MPI_Op mine;
  CHECK_MPI(MPI_Op_create(add_ints, 1, &mine));
  ROUND_TRIP(Op, MPI_SUM);
  ROUND_TRIP(Op, MPI_MAX);
  ROUND_TRIP(Op, mine);
  ROUND_TRIP(Op, MPI_OP_NULL);
  DISTINCT(Op, MPI_SUM, MPI_MAX);
  DISTINCT(Op, MPI_SUM, mine);
  int sum = 0;
  CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_Op_f2c(MPI_Op_c2f(mine)), dup));
  CHECK(sum == size * (size - 1) / 2);

  /* Info objects. */
  MPI_Info info;
  CHECK_MPI(MPI_Info_create(&info));
  CHECK_MPI(MPI_Info_set(info, "color", "blue"));
  ROUND_TRIP(Info, info);
  ROUND_TRIP(Info, MPI_INFO_NULL);
  char value[16];
  int flag = 0;
  CHECK_MPI(MPI_Info_get(MPI_Info_f2c(MPI_Info_c2f(info)), "color", 15, value, &flag));
  CHECK(flag == 1);

  /* Error handlers. */
  ROUND_TRIP(Errhandler, MPI_ERRORS_ARE_FATAL);
  ROUND_TRIP(Errhandler, MPI_ERRORS_RETURN);
  ROUND_TRIP(Errhandler, MPI_ERRHANDLER_NULL);
  DISTINCT(Errhandler, MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN);
  MPI_Errhandler handler;
  CHECK_MPI(MPI_Comm_create_errhandler(ignore_error, &handler));
  ROUND_TRIP(Errhandler, handler);
  DISTINCT(Errhandler, handler, MPI_ERRORS_RETURN);
  CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_Errhandler_f2c(MPI_Errhandler_c2f(handler))));
  CHECK_MPI(MPI_Errhandler_free(&handler));

  CHECK_MPI(MPI_Info_free(&info));
  CHECK_MPI(MPI_Op_free(&mine));
  CHECK_MPI(MPI_Group_free(&first));
  CHECK_MPI(MPI_Group_free(&world_group));
  CHECK_MPI(MPI_Type_free(&pair));
  CHECK_MPI(MPI_Comm_free(&dup));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
