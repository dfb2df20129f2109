/* Point-to-point: blocking, nonblocking, synchronous, wildcards, probe, MPI_PROC_NULL, large
 * (rendezvous-sized) and empty messages. */
#include <string.h>

#include "mpitest.h"

enum { kBig = 300000 };

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  MPI_Status status;
  int count = -1;

  /* Ring with blocking calls: even ranks send first (a size-1 ring talks to itself via Isend). */
  int token = rank * 10;
  int got = -1;
  if (size == 1) {
    MPI_Request r;
    CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &status));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
  } else if (rank % 2 == 0) {
    CHECK_MPI(MPI_Send(&token, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &status));
  } else {
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &status));
    CHECK_MPI(MPI_Send(&token, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
  }
  CHECK(got == left * 10);
  CHECK(status.MPI_SOURCE == left && status.MPI_TAG == 5);
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == 1);

  /* Sendrecv around the ring, both directions, with a large payload. */
  double* out = malloc(kBig * sizeof(double));
  double* in = malloc(kBig * sizeof(double));
  CHECK(out && in);
  for (int i = 0; i < kBig; ++i) out[i] = rank * 1e6 + i;
  CHECK_MPI(MPI_Sendrecv(out, kBig, MPI_DOUBLE, right, 7, in, kBig, MPI_DOUBLE, left, 7,
                         MPI_COMM_WORLD, &status));
  for (int i = 0; i < kBig; i += 997) CHECK(in[i] == left * 1e6 + i);
  CHECK(in[kBig - 1] == left * 1e6 + kBig - 1);
  CHECK_MPI(MPI_Get_count(&status, MPI_DOUBLE, &count));
  CHECK(count == kBig);
  CHECK_MPI(MPI_Get_count(&status, MPI_BYTE, &count));
  CHECK(count == kBig * (int)sizeof(double));

  /* Sendrecv_replace: the buffer ends up with the left neighbour's values. */
  int values[3] = {rank, rank + 100, rank + 200};
  CHECK_MPI(MPI_Sendrecv_replace(values, 3, MPI_INT, right, 8, left, 8, MPI_COMM_WORLD, &status));
  CHECK(values[0] == left && values[1] == left + 100 && values[2] == left + 200);

  /* Ssend / Issend complete only once matched; exchange in pairs. */
  if (size >= 2 && rank < size - size % 2) {
    const int partner = rank ^ 1;
    int mine = rank + 1000;
    int theirs = -1;
    MPI_Request r;
    if (rank % 2 == 0) {
      CHECK_MPI(MPI_Ssend(&mine, 1, MPI_INT, partner, 9, MPI_COMM_WORLD));
      CHECK_MPI(MPI_Recv(&theirs, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
      CHECK_MPI(MPI_Irecv(&theirs, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, &r));
      CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Issend(&mine, 1, MPI_INT, partner, 9, MPI_COMM_WORLD, &r));
      CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    CHECK(theirs == partner + 1000);
  }

  /* Wildcards and probe: everybody sends rank 0 a message of rank+1 chars with tag = rank. */
  char text[64];
  memset(text, 'a' + rank % 26, sizeof text);
  MPI_Request send_req;
  CHECK_MPI(MPI_Isend(text, rank + 1, MPI_CHAR, 0, 100 + rank, MPI_COMM_WORLD, &send_req));
  if (rank == 0) {
    int seen = 0;
    for (int i = 0; i < size; ++i) {
      CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status));
      const int src = status.MPI_SOURCE;
      CHECK(src >= 0 && src < size && status.MPI_TAG == 100 + src);
      CHECK_MPI(MPI_Get_count(&status, MPI_CHAR, &count));
      CHECK(count == src + 1);
      char buf[64];
      CHECK_MPI(MPI_Recv(buf, 64, MPI_CHAR, src, MPI_ANY_TAG, MPI_COMM_WORLD, &status));
      CHECK_MPI(MPI_Get_count(&status, MPI_CHAR, &count));
      CHECK(count == src + 1 && buf[0] == 'a' + src % 26 && buf[src] == 'a' + src % 26);
      seen |= 1 << src;
    }
    CHECK(seen == (1 << size) - 1);
  }
  CHECK_MPI(MPI_Wait(&send_req, MPI_STATUS_IGNORE));
  CHECK(send_req == MPI_REQUEST_NULL);
  /* Later messages must not reach rank 0's wildcard probes above. */
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

  /* Iprobe: nothing is pending on this tag; then a message to self shows up. */
  int flag = 1;
  CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, &flag, &status));
  CHECK(flag == 0);
  int self_msg = 77;
  CHECK_MPI(MPI_Isend(&self_msg, 1, MPI_INT, rank, 4242, MPI_COMM_WORLD, &send_req));
  do {
    CHECK_MPI(MPI_Iprobe(rank, 4242, MPI_COMM_WORLD, &flag, &status));
  } while (!flag);
  CHECK(status.MPI_SOURCE == rank && status.MPI_TAG == 4242);
  CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, rank, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  CHECK(got == 77);
  CHECK_MPI(MPI_Wait(&send_req, MPI_STATUS_IGNORE));

  /* Empty messages carry their envelope. */
  CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_INT, right, 11, NULL, 0, MPI_INT, left, 11, MPI_COMM_WORLD,
                         &status));
  CHECK(status.MPI_SOURCE == left && status.MPI_TAG == 11);
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == 0);

  /* MPI_PROC_NULL: completes at once with source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0. */
  CHECK_MPI(MPI_Send(&token, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
  got = -5;
  CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &status));
  CHECK(got == -5 && status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG);
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == 0);
  MPI_Request r;
  CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Wait(&r, &status));
  CHECK(status.MPI_SOURCE == MPI_PROC_NULL);

  /* A shorter message than the receive buffer. */
  int many[10] = {0};
  int few[4] = {1, 2, 3, 4};
  CHECK_MPI(MPI_Sendrecv(few, 4, MPI_INT, right, 12, many, 10, MPI_INT, left, 12, MPI_COMM_WORLD,
                         &status));
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == 4 && many[3] == 4 && many[4] == 0);
  /* Bytes that are not a whole number of elements: MPI_UNDEFINED. */
  char odd[6] = {0};
  char odd_in[8];
  CHECK_MPI(MPI_Sendrecv(odd, 6, MPI_BYTE, right, 13, odd_in, 8, MPI_BYTE, left, 13,
                         MPI_COMM_WORLD, &status));
  CHECK_MPI(MPI_Get_count(&status, MPI_INT, &count));
  CHECK(count == MPI_UNDEFINED);

  free(out);
  free(in);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
