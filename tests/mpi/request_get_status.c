/* MPI_Request_get_status: reports completion and the status like MPI_Test, but leaves the
 * request allocated and active, so MPI_Wait still completes it (with the same status); the data
 * is in the receive buffer as soon as the flag is set (also for a strided datatype and a
 * nonblocking reduction, which must not be applied twice). */
#include "mpitest.h"

enum { N = 8, TAG = 7 };

/* Polls until the request is complete; the request stays valid throughout. */
static void get_status_until_complete(MPI_Request request, MPI_Status* status) {
  int flag = 0;
  while (!flag) {
    CHECK_MPI(MPI_Request_get_status(request, &flag, status));
    CHECK(request != MPI_REQUEST_NULL);
  }
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;

  /* Null and inactive persistent requests are complete, with an empty status. */
  int flag = 0;
  MPI_Status status;
  CHECK_MPI(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &status));
  CHECK(flag == 1 && status.MPI_SOURCE == MPI_ANY_SOURCE && status.MPI_TAG == MPI_ANY_TAG);
  int count = -1;
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == 0);
  int persistent_buf = 0;
  MPI_Request persistent;
  CHECK_MPI(MPI_Recv_init(&persistent_buf, 1, MPI_INT, left, TAG, MPI_COMM_WORLD, &persistent));
  flag = 0;
  CHECK_MPI(MPI_Request_get_status(persistent, &flag, &status));
  CHECK(flag == 1 && status.MPI_TAG == MPI_ANY_TAG);
  CHECK_MPI(MPI_Request_free(&persistent));

  /* A receive into every other int of a buffer. Nothing is sent before the barrier, so it cannot
   * be complete yet. */
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other));
  CHECK_MPI(MPI_Type_commit(&every_other));
  int in[2 * N];
  for (int i = 0; i < 2 * N; ++i) in[i] = -1;
  MPI_Request request;
  CHECK_MPI(MPI_Irecv(in, 1, every_other, left, TAG, MPI_COMM_WORLD, &request));
  flag = 1;
  CHECK_MPI(MPI_Request_get_status(request, &flag, &status));
  CHECK(flag == 0);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  int out[N];
  for (int i = 0; i < N; ++i) out[i] = rank * 100 + i;
  CHECK_MPI(MPI_Send(out, N, MPI_INT, right, TAG, MPI_COMM_WORLD));

  get_status_until_complete(request, &status);
  CHECK(status.MPI_SOURCE == left && status.MPI_TAG == TAG);
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == N);
  for (int i = 0; i < N; ++i) CHECK(in[2 * i] == left * 100 + i && in[2 * i + 1] == -1);
  /* Asking again changes nothing; MPI_Wait then completes and frees it, same status. */
  flag = 0;
  CHECK_MPI(MPI_Request_get_status(request, &flag, &status));
  CHECK(flag == 1 && status.MPI_SOURCE == left);
  CHECK_MPI(MPI_Wait(&request, &status));
  CHECK(request == MPI_REQUEST_NULL);
  CHECK(status.MPI_SOURCE == left && status.MPI_TAG == TAG);
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == N);
  for (int i = 0; i < N; ++i) CHECK(in[2 * i] == left * 100 + i && in[2 * i + 1] == -1);
  CHECK_MPI(MPI_Type_free(&every_other));

  /* A nonblocking reduction: the result is there when the flag is set, and stays right after
   * MPI_Wait. */
  int mine[N];
  int sum[N];
  for (int i = 0; i < N; ++i) {
    mine[i] = rank + i;
    sum[i] = -1;
  }
  CHECK_MPI(MPI_Iallreduce(mine, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request));
  get_status_until_complete(request, &status);
  for (int i = 0; i < N; ++i) CHECK(sum[i] == size * (size - 1) / 2 + size * i);
  CHECK_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
  CHECK(request == MPI_REQUEST_NULL);
  for (int i = 0; i < N; ++i) CHECK(sum[i] == size * (size - 1) / 2 + size * i);

  CHECK_MPI(MPI_Finalize());
  return 0;
}
