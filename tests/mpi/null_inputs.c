/* A null pointer where a call must read an argument (dims, ranks, a status, array_of_*) is
 * MPI_ERR_ARG through the error handler (here MPI_ERRORS_RETURN), never a crash; a null info
 * key or value is MPI_ERR_INFO_KEY / _VALUE like any invalid one. Arrays of zero entries may be
 * null, and those calls succeed. Calls where Open MPI 4.1 crashes or answers another class are
 * in sempi/null_inputs_sempi.c. */
#include "mpitest.h"

static void topologies(int size) {
  const int dims[1] = {size};
  const int periods[1] = {0};
  MPI_Comm ring = MPI_COMM_NULL;
  EXPECT_ARG(MPI_Cart_create(MPI_COMM_WORLD, 1, NULL, periods, 0, &ring));
  EXPECT_ARG(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, NULL, 0, &ring));
  CHECK(ring == MPI_COMM_NULL);
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  int rank = -1;
  EXPECT_ARG(MPI_Cart_rank(ring, NULL, &rank));
  CHECK_MPI(MPI_Comm_free(&ring));
}

/* A status to query: MPI_STATUS_IGNORE is not one. */
static void status_queries(void) {
  int count = 0;
  int flag = 0;
  MPI_Count large = 0;
  EXPECT_ARG(MPI_Get_elements(NULL, MPI_INT, &count));
  EXPECT_ARG(MPI_Get_elements_x(NULL, MPI_INT, &large));
  EXPECT_ARG(MPI_Test_cancelled(NULL, &flag));
}

static void groups(void) {
  MPI_Group world;
  MPI_Group chosen;
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  EXPECT_ARG(MPI_Group_incl(world, 1, NULL, &chosen));
  EXPECT_ARG(MPI_Group_excl(world, 1, NULL, &chosen));
  /* No ranks: no array needed. */
  int size = -1;
  CHECK_MPI(MPI_Group_incl(world, 0, NULL, &chosen));
  CHECK_MPI(MPI_Group_size(chosen, &size));
  CHECK(size == 0);
  CHECK_MPI(MPI_Group_free(&chosen));
  CHECK_MPI(MPI_Group_excl(world, 0, NULL, &chosen));
  CHECK_MPI(MPI_Group_compare(world, chosen, &size));
  CHECK(size == MPI_IDENT);
  CHECK_MPI(MPI_Group_free(&chosen));
  CHECK_MPI(MPI_Group_translate_ranks(world, 0, NULL, world, NULL));
  CHECK_MPI(MPI_Group_free(&world));
}

static void datatypes(void) {
  const int lengths[1] = {1};
  const int displacements[1] = {0};
  const MPI_Aint byte_displacements[1] = {0};
  const MPI_Datatype types[1] = {MPI_INT};
  MPI_Datatype t = MPI_DATATYPE_NULL;
  EXPECT_ARG(MPI_Type_indexed(1, NULL, displacements, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_indexed(1, lengths, NULL, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_hindexed(1, NULL, byte_displacements, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_hindexed(1, lengths, NULL, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_indexed_block(1, 1, NULL, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_hindexed_block(1, 1, NULL, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_struct(1, NULL, byte_displacements, types, &t));
  EXPECT_ARG(MPI_Type_create_struct(1, lengths, NULL, types, &t));
  EXPECT_ARG(MPI_Type_create_struct(1, lengths, byte_displacements, NULL, &t));
  const int sizes[1] = {4};
  const int subsizes[1] = {2};
  const int starts[1] = {1};
  EXPECT_ARG(MPI_Type_create_subarray(1, NULL, subsizes, starts, MPI_ORDER_C, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_subarray(1, sizes, NULL, starts, MPI_ORDER_C, MPI_INT, &t));
  EXPECT_ARG(MPI_Type_create_subarray(1, sizes, subsizes, NULL, MPI_ORDER_C, MPI_INT, &t));
  CHECK(t == MPI_DATATYPE_NULL);

  /* Zero blocks: empty types, no arrays needed. */
  int size = -1;
  CHECK_MPI(MPI_Type_indexed(0, NULL, NULL, MPI_INT, &t));
  CHECK_MPI(MPI_Type_size(t, &size));
  CHECK(size == 0);
  CHECK_MPI(MPI_Type_free(&t));
  CHECK_MPI(MPI_Type_create_struct(0, NULL, NULL, NULL, &t));
  CHECK_MPI(MPI_Type_size(t, &size));
  CHECK(size == 0);
  CHECK_MPI(MPI_Type_free(&t));
}

/* On MPI_COMM_SELF, so a rejected call leaves no other rank waiting. */
static void vector_collectives(int rank) {
  int in[1] = {rank};
  int out[1] = {-1};
  const int counts[1] = {1};
  const int displs[1] = {0};
  const MPI_Datatype types[1] = {MPI_INT};
  const int byte_displs[1] = {0};
  EXPECT_ARG(MPI_Gatherv(in, 1, MPI_INT, out, counts, NULL, MPI_INT, 0, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Alltoallv(in, NULL, displs, MPI_INT, out, counts, displs, MPI_INT,
                           MPI_COMM_SELF));
  EXPECT_ARG(MPI_Alltoallw(in, NULL, byte_displs, types, out, counts, byte_displs, types,
                           MPI_COMM_SELF));
  EXPECT_ARG(MPI_Alltoallw(in, counts, byte_displs, NULL, out, counts, byte_displs, types,
                           MPI_COMM_SELF));
  CHECK(out[0] == -1);
  CHECK_MPI(MPI_Gatherv(in, 1, MPI_INT, out, counts, displs, MPI_INT, 0, MPI_COMM_SELF));
  CHECK(out[0] == rank);
}

static void info(void) {
  MPI_Info info;
  CHECK_MPI(MPI_Info_create(&info));
  char value[8];
  int flag = 0;
  int length = 0;
  EXPECT_ERROR_CLASS(MPI_ERR_INFO_KEY, MPI_Info_set(info, NULL, "value"));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO_VALUE, MPI_Info_set(info, "key", NULL));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO_KEY,
                     MPI_Info_get(info, NULL, (int)sizeof value - 1, value, &flag));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO_KEY, MPI_Info_get_valuelen(info, NULL, &length, &flag));
  EXPECT_ERROR_CLASS(MPI_ERR_INFO_KEY, MPI_Info_delete(info, NULL));
  int nkeys = -1;
  CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
  CHECK(nkeys == 0);
  CHECK_MPI(MPI_Info_free(&info));
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  topologies(size);
  status_queries();
  groups();
  datatypes();
  vector_collectives(rank);
  info();

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
