/* sempi-specific half of tests/mpi/null_inputs.c: null input arguments for which Open MPI 4.1
 * crashes (MPI_Get_count, MPI_Group_range_incl / _excl, MPI_Cart_sub, MPI_Allgatherv) or
 * answers another class (MPI_ERR_GROUP for MPI_Group_translate_ranks, MPI_ERR_COUNT for a null
 * array of counts). sempi, like MPICH, reports each as MPI_ERR_ARG; a null pack buffer or
 * MPI_Reduce_local buffer (Open MPI crashes) is MPI_ERR_BUFFER, as for every other buffer.
 * Run with null_inputs_sempi.json (allow all). */
#include "../mpitest.h"

static void status_and_groups(void) {
  int count = 0;
  EXPECT_ARG(MPI_Get_count(NULL, MPI_INT, &count));

  MPI_Group world;
  MPI_Group chosen = MPI_GROUP_NULL;
  int translated[1] = {-1};
  CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  EXPECT_ARG(MPI_Group_translate_ranks(world, 1, NULL, world, translated));
  EXPECT_ARG(MPI_Group_range_incl(world, 1, NULL, &chosen));
  EXPECT_ARG(MPI_Group_range_excl(world, 1, NULL, &chosen));
  CHECK(chosen == MPI_GROUP_NULL && translated[0] == -1);
  CHECK_MPI(MPI_Group_range_incl(world, 0, NULL, &chosen));
  CHECK_MPI(MPI_Group_size(chosen, &count));
  CHECK(count == 0);
  CHECK_MPI(MPI_Group_free(&chosen));
  CHECK_MPI(MPI_Group_free(&world));
}

static void cartesian_sub_grid(int size) {
  const int dims[1] = {size};
  const int periods[1] = {1};
  MPI_Comm ring;
  MPI_Comm sub = MPI_COMM_NULL;
  CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  EXPECT_ARG(MPI_Cart_sub(ring, NULL, &sub));
  CHECK(sub == MPI_COMM_NULL);
  CHECK_MPI(MPI_Comm_free(&ring));
}

/* On MPI_COMM_SELF, so a rejected call leaves no other rank waiting. */
static void vector_collectives(int rank) {
  int in[1] = {rank};
  int out[1] = {-1};
  const int counts[1] = {1};
  const int displs[1] = {0};
  EXPECT_ARG(MPI_Gatherv(in, 1, MPI_INT, out, NULL, displs, MPI_INT, 0, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Scatterv(in, NULL, displs, MPI_INT, out, 1, MPI_INT, 0, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Scatterv(in, counts, NULL, MPI_INT, out, 1, MPI_INT, 0, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Allgatherv(in, 1, MPI_INT, out, NULL, displs, MPI_INT, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Allgatherv(in, 1, MPI_INT, out, counts, NULL, MPI_INT, MPI_COMM_SELF));
  EXPECT_ARG(MPI_Reduce_scatter(in, out, NULL, MPI_INT, MPI_SUM, MPI_COMM_SELF));
  MPI_Request request = MPI_REQUEST_NULL;
  EXPECT_ARG(MPI_Igatherv(in, 1, MPI_INT, out, counts, NULL, MPI_INT, 0, MPI_COMM_SELF,
                          &request));
  EXPECT_ARG(MPI_Ialltoallv(in, counts, NULL, MPI_INT, out, counts, displs, MPI_INT,
                            MPI_COMM_SELF, &request));
  const MPI_Datatype types[1] = {MPI_INT};
  EXPECT_ARG(MPI_Ialltoallw(in, counts, displs, NULL, out, counts, displs, types, MPI_COMM_SELF,
                            &request));
  EXPECT_ARG(MPI_Ialltoallw(in, counts, displs, types, out, counts, displs, types, MPI_COMM_SELF,
                            NULL));
  CHECK(request == MPI_REQUEST_NULL && out[0] == -1);
}

static void packing(void) {
  int value = 7;
  int position = 0;
  char packed[16];
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
               MPI_Pack(&value, 1, MPI_INT, NULL, (int)sizeof packed, &position, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Pack(&value, 1, MPI_INT, packed, (int)sizeof packed, &position, MPI_COMM_WORLD));
  position = 0;
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
               MPI_Unpack(NULL, (int)sizeof packed, &position, &value, 1, MPI_INT, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
               MPI_Unpack(packed, (int)sizeof packed, &position, NULL, 1, MPI_INT, MPI_COMM_WORLD));
  CHECK(position == 0);
}

static void local_reduction(void) {
  int in[2] = {1, 2};
  int inout[2] = {10, 20};
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Reduce_local(NULL, inout, 2, MPI_INT, MPI_SUM));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Reduce_local(in, NULL, 2, MPI_INT, MPI_SUM));
  CHECK(inout[0] == 10 && inout[1] == 20);
  CHECK_MPI(MPI_Reduce_local(NULL, NULL, 0, MPI_INT, MPI_SUM));
  CHECK_MPI(MPI_Reduce_local(in, inout, 2, MPI_INT, MPI_SUM));
  CHECK(inout[0] == 11 && inout[1] == 22);
}

/* MPI_IN_PLACE is an address (1), valid only where a collective allows it: point-to-point,
 * packing and the buffered-send buffer refuse it (they read or wrote address 1). */
static void in_place_outside_collectives(int rank) {
  int value = 7;
  int position = 0;
  char packed[16];
  MPI_Request request = MPI_REQUEST_NULL;
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Send(MPI_IN_PLACE, 1, MPI_INT, rank, 0, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Recv(MPI_IN_PLACE, 1, MPI_INT, rank, 0, MPI_COMM_WORLD,
                                              MPI_STATUS_IGNORE));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
                     MPI_Irecv(MPI_IN_PLACE, 1, MPI_INT, rank, 0, MPI_COMM_WORLD, &request));
  CHECK(request == MPI_REQUEST_NULL);
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Sendrecv_replace(MPI_IN_PLACE, 1, MPI_INT, rank, 0, rank,
                                                          0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Pack(MPI_IN_PLACE, 1, MPI_INT, packed, (int)sizeof packed,
                                              &position, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Pack(&value, 1, MPI_INT, MPI_IN_PLACE, (int)sizeof packed,
                                              &position, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Unpack(packed, (int)sizeof packed, &position, MPI_IN_PLACE,
                                                1, MPI_INT, MPI_COMM_WORLD));
  CHECK(position == 0);
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Buffer_attach(MPI_IN_PLACE, 1024));
}

/* A null message handle: MPI_ERR_ARG, not a crash (Open MPI 4.1 raises MPI_ERR_REQUEST on
 * MPI_COMM_NULL, whose handler is fatal). */
static void matched_receives(void) {
  int value = 0;
  MPI_Request request;
  EXPECT_ARG(MPI_Mrecv(&value, 1, MPI_INT, NULL, MPI_STATUS_IGNORE));
  EXPECT_ARG(MPI_Imrecv(&value, 1, MPI_INT, NULL, &request));
}

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world_returning_errors(&argc, &argv, &rank, &size);

  status_and_groups();
  cartesian_sub_grid(size);
  vector_collectives(rank);
  packing();
  local_reduction();
  matched_receives();
  in_place_outside_collectives(rank);

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
