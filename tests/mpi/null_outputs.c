/* A null pointer where a call must write its result is MPI_ERR_ARG through the error handler
 * (here MPI_ERRORS_RETURN), never a crash: communicators, groups, datatypes, request and status
 * queries, info, attributes and topologies. The
 * arguments where null is legal (MPI_STATUS_IGNORE, ...) are exercised alongside. Calls where
 * Open MPI 4.1 crashes or answers another class are in sempi/null_outputs_sempi.c. */
#include "mpitest.h"

static void communicators_and_groups(void) {
  EXPECT_ARG(MPI_Comm_rank(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Comm_size(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Comm_dup(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Comm_split(MPI_COMM_WORLD, 0, 0, NULL));
  EXPECT_ARG(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, NULL));
  EXPECT_ARG(MPI_Comm_test_inter(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Comm_group(MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Comm_get_errhandler(MPI_COMM_WORLD, NULL));
  char name[MPI_MAX_OBJECT_NAME];
  EXPECT_ARG(MPI_Comm_get_name(MPI_COMM_WORLD, name, NULL));

  MPI_Group world;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  EXPECT_ARG(MPI_Group_size(world, NULL));
  EXPECT_ARG(MPI_Group_rank(world, NULL));
  EXPECT_ARG(MPI_Group_compare(world, world, NULL));
  CHECK_MPI(MPI_Group_free(&world));
}

static void datatypes(void) {
  MPI_Aint lb = 0;
  EXPECT_ARG(MPI_Type_size(MPI_INT, NULL));
  EXPECT_ARG(MPI_Type_get_extent(MPI_INT, &lb, NULL));
  EXPECT_ARG(MPI_Type_get_true_extent(MPI_INT, NULL, &lb));
  EXPECT_ARG(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, NULL));
  EXPECT_ARG(MPI_Get_address(&lb, NULL));
  char packed[16];
  EXPECT_ARG(MPI_Pack(&lb, 1, MPI_AINT, packed, (int)sizeof packed, NULL, MPI_COMM_WORLD));
}

static void point_to_point(int rank) {
  int value = rank;
  MPI_Request request;
  MPI_Status status;

  /* A message to itself, so there is a real request and status to query. */
  int got = -1;
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, 0, 7, MPI_COMM_SELF, &request));
  EXPECT_ARG(MPI_Test(&request, NULL, MPI_STATUS_IGNORE));
  EXPECT_ARG(MPI_Request_get_status(request, NULL, MPI_STATUS_IGNORE));
  EXPECT_ARG(MPI_Waitany(1, &request, NULL, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Send(&value, 1, MPI_INT, 0, 7, MPI_COMM_SELF));
  CHECK_MPI(MPI_Wait(&request, &status)); /* MPI_STATUS_IGNORE stays legal: see above */
  CHECK(got == rank);
  EXPECT_ARG(MPI_Get_elements(&status, MPI_INT, NULL));
  EXPECT_ARG(MPI_Test_cancelled(&status, NULL));
  EXPECT_ARG(MPI_Status_set_cancelled(NULL, 1));
}

static void info_and_attributes(void) {
  MPI_Info info;
  CHECK_MPI(MPI_Info_create(&info));
  CHECK_MPI(MPI_Info_set(info, "key", "value"));
  char value[16];
  int flag = 0;
  EXPECT_ARG(MPI_Info_get_nkeys(info, NULL));
  EXPECT_ARG(MPI_Info_get(info, "key", (int)sizeof value, value, NULL));
  EXPECT_ARG(MPI_Info_get_valuelen(info, "key", NULL, &flag));
  CHECK_MPI(MPI_Info_free(&info));

  int keyval = MPI_KEYVAL_INVALID;
  void* attribute = NULL;
  EXPECT_ARG(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, NULL, NULL));
  EXPECT_ARG(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attribute, NULL));
  EXPECT_ARG(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, NULL, &flag));
  CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &keyval, NULL));
  EXPECT_ARG(MPI_Comm_get_attr(MPI_COMM_WORLD, keyval, &attribute, NULL));
  CHECK_MPI(MPI_Comm_free_keyval(&keyval));
}

/* A detach without somewhere to put the size detaches nothing. */
static void buffered(void) {
  static char buffer[1024];
  void* address = NULL;
  int size = 0;
  CHECK_MPI(MPI_Buffer_attach(buffer, (int)sizeof buffer));
  EXPECT_ARG(MPI_Buffer_detach(&address, NULL));
  CHECK_MPI(MPI_Buffer_detach(&address, &size));
  CHECK(address == buffer && size == (int)sizeof buffer);
}

static void topologies(int size) {
  const int dims[1] = {size};
  const int periods[1] = {1};
  const int coords[1] = {0};
  EXPECT_ARG(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, NULL));
  MPI_Comm ring;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  int source = -1;
  EXPECT_ARG(MPI_Cartdim_get(ring, NULL));
  EXPECT_ARG(MPI_Topo_test(ring, NULL));
  EXPECT_ARG(MPI_Cart_rank(ring, coords, NULL));
  EXPECT_ARG(MPI_Cart_shift(ring, 0, 1, &source, NULL));
  int got_dims[1];
  int got_periods[1];
  EXPECT_ARG(MPI_Cart_get(ring, 1, got_dims, got_periods, NULL));
  EXPECT_ARG(MPI_Cart_coords(ring, 0, 1, NULL));
  EXPECT_ARG(MPI_Dims_create(size, 1, NULL));
  CHECK_MPI(MPI_Comm_free(&ring));
}

static void environment(void) {
  EXPECT_ARG(MPI_Query_thread(NULL));
  EXPECT_ARG(MPI_Op_commutative(MPI_SUM, NULL));
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  communicators_and_groups();
  datatypes();
  point_to_point(rank);
  info_and_attributes();
  buffered();
  topologies(size);
  environment();

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
