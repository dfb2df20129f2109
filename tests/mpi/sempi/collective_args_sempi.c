/* sempi-specific: collective arguments that used to crash or compute a wrong result, each
 * refused the same way on every rank (so the communicator stays usable):
 * - MPI_IN_PLACE (address 1) where the standard does not allow it was used as memory;
 * - a reduction of more basic elements than an int counts was cut short silently.
 * Run with collective_args_sempi.json (allow all). */
#include "../mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  int value = rank;
  int values[64] = {0};
  int sum_before = -1;

  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Bcast(MPI_IN_PLACE, 1, MPI_INT, 0, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
                     MPI_Allreduce(&value, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Allgather(&value, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT,
                                                   MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Alltoall(values, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT,
                                                  MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
                     MPI_Scan(&value, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  int counts[64];
  int displs[64];
  MPI_Datatype types[64];
  for (int i = 0; i < size; ++i) {
    counts[i] = 1;
    displs[i] = i * (int)sizeof(int);
    types[i] = MPI_INT;
  }
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Alltoallw(values, counts, displs, types, MPI_IN_PLACE,
                                                   counts, displs, types, MPI_COMM_WORLD));
  for (int i = 0; i < size; ++i) displs[i] = i;  /* in elements from here on */
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Allgatherv(&value, 1, MPI_INT, MPI_IN_PLACE, counts,
                                                    displs, MPI_INT, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Alltoallv(MPI_IN_PLACE, counts, displs, MPI_INT,
                                                   MPI_IN_PLACE, counts, displs, MPI_INT,
                                                   MPI_COMM_WORLD));
  MPI_Request request = MPI_REQUEST_NULL;
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Iallgatherv(&value, 1, MPI_INT, MPI_IN_PLACE, counts,
                                                     displs, MPI_INT, MPI_COMM_WORLD, &request));
  CHECK(request == MPI_REQUEST_NULL);

  /* 4 doubles an instance: 2^29 + 1 instances are more than INT_MAX doubles. Refused before
   * any memory is touched (the buffers are far too small on purpose). */
  MPI_Datatype quad;
  CHECK_MPI(MPI_Type_contiguous(4, MPI_DOUBLE, &quad));
  CHECK_MPI(MPI_Type_commit(&quad));
  double in[4] = {0};
  double out[4] = {0};
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Allreduce(in, out, (1 << 29) + 1, quad, MPI_SUM,
                                                  MPI_COMM_WORLD));
  CHECK_MPI(MPI_Type_free(&quad));
  /* The same for a type that is not contiguous: it would be packed first. */
  MPI_Datatype strided;
  CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &strided));
  CHECK_MPI(MPI_Type_commit(&strided));
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT, MPI_Allreduce(in, out, (1 << 29) + 1, strided, MPI_SUM,
                                                  MPI_COMM_WORLD));
  CHECK_MPI(MPI_Type_free(&strided));

  /* A null buffer where data is read or written: MPI_ERR_BUFFER, also for a datatype that is
   * packed (read from address 0) or unpacked after the collective (written there), and for a
   * contiguous one whose data starts past its lower bound (address 8 is not memory either). */
  MPI_Datatype pairs;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &pairs));
  CHECK_MPI(MPI_Type_commit(&pairs));
  MPI_Datatype shifted;
  const int one = 1;
  const MPI_Aint eight = 8;
  CHECK_MPI(MPI_Type_create_hindexed(1, &one, &eight, MPI_INT, &shifted));
  CHECK_MPI(MPI_Type_commit(&shifted));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Bcast(NULL, 1, pairs, 0, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Bcast(NULL, 1, shifted, 0, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
                     MPI_Allreduce(NULL, values, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER,
                     MPI_Allreduce(&value, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_BUFFER, MPI_Allgatherv(&value, 1, MPI_INT, NULL, counts, displs, pairs,
                                                    MPI_COMM_WORLD));
  CHECK_MPI(MPI_Type_free(&pairs));
  CHECK_MPI(MPI_Type_free(&shifted));

  /* What a rank sends itself must fit what it receives from itself (the v-forms check this
   * too): one int sent against two received read past the send buffer. */
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT,
                     MPI_Allgather(&value, 1, MPI_INT, values, 2, MPI_INT, MPI_COMM_WORLD));
  EXPECT_ERROR_CLASS(MPI_ERR_COUNT,
                     MPI_Alltoall(values, 2, MPI_INT, values + 32, 1, MPI_INT, MPI_COMM_WORLD));
  /* At a root only: it refuses, and a rank whose block it would have taken fails with its
   * class (one that sent eagerly and left may succeed). */
  const int rc =
      MPI_Gather(&value, 1, MPI_INT, values, rank == 0 ? 2 : 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0 || rc != MPI_SUCCESS) EXPECT_ERROR_CLASS(MPI_ERR_COUNT, rc);

  /* MPI_Exscan's recvbuf is not significant at rank 0: it may be null there, for a basic and
   * for a derived datatype. */
  MPI_Datatype two_ints;
  CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &two_ints));
  CHECK_MPI(MPI_Type_commit(&two_ints));
  int contributions[4] = {1, -1, 10, -1};
  int below[4] = {-7, -7, -7, -7};
  CHECK_MPI(
      MPI_Exscan(contributions, rank == 0 ? NULL : below, 1, two_ints, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0) CHECK(below[0] == rank && below[1] == -7 && below[2] == 10 * rank);
  CHECK_MPI(
      MPI_Exscan(&value, rank == 0 ? NULL : &sum_before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0) CHECK(sum_before == rank * (rank - 1) / 2);
  CHECK_MPI(MPI_Type_free(&two_ints));

  /* Nothing was started: the communicator's collectives still line up. */
  int sum = -1;
  CHECK_MPI(MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size * (size - 1) / 2);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
