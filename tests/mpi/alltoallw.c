/* MPI_Alltoallw and MPI_Ialltoallw: every block has its own datatype and byte displacement.
 * Rank s sends rank d d + 1 ints, from a strided layout for odd d; rank d receives them into
 * every other int for odd s; zero-length blocks and MPI_IN_PLACE work too. */
#include "mpitest.h"

static int value(int source, int dest, int k) { return source * 10000 + dest * 100 + k; }

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int n = size;
  int* sendcounts = malloc(sizeof(int) * (size_t)n);
  int* sdispls = malloc(sizeof(int) * (size_t)n);
  int* recvcounts = malloc(sizeof(int) * (size_t)n);
  int* rdispls = malloc(sizeof(int) * (size_t)n);
  MPI_Datatype* sendtypes = malloc(sizeof(MPI_Datatype) * (size_t)n);
  MPI_Datatype* recvtypes = malloc(sizeof(MPI_Datatype) * (size_t)n);
  CHECK(sendcounts && sdispls && recvcounts && rdispls && sendtypes && recvtypes);

  /* Send: to d, d + 1 ints; for odd d one "every third int" vector, else plain ints. */
  const int stride = 3;
  int send_ints = 0;
  for (int d = 0; d < n; ++d) send_ints += (d + 1) * stride;
  int* sendbuf = malloc(sizeof(int) * (size_t)send_ints);
  int at = 0;
  for (int d = 0; d < n; ++d) {
    sdispls[d] = at * (int)sizeof(int);
    for (int k = 0; k < (d + 1) * stride; ++k) sendbuf[at + k] = -1;
    if (d % 2 == 1) {
      CHECK_MPI(MPI_Type_vector(d + 1, 1, stride, MPI_INT, &sendtypes[d]));
      CHECK_MPI(MPI_Type_commit(&sendtypes[d]));
      sendcounts[d] = 1;
      for (int k = 0; k <= d; ++k) sendbuf[at + k * stride] = value(rank, d, k);
    } else {
      sendtypes[d] = MPI_INT;
      sendcounts[d] = d + 1;
      for (int k = 0; k <= d; ++k) sendbuf[at + k] = value(rank, d, k);
    }
    at += (d + 1) * stride;
  }
  /* Receive: from s, rank + 1 ints; for odd s into every other int, else plain ints. Blocks
   * are placed in reverse order of s in the buffer (displacements need not be increasing). */
  const int per_source = 2 * (rank + 1);
  int* recvbuf = malloc(sizeof(int) * (size_t)(per_source * n));
  for (int s = 0; s < n; ++s) {
    rdispls[s] = (n - 1 - s) * per_source * (int)sizeof(int);
    if (s % 2 == 1) {
      CHECK_MPI(MPI_Type_vector(rank + 1, 1, 2, MPI_INT, &recvtypes[s]));
      CHECK_MPI(MPI_Type_commit(&recvtypes[s]));
      recvcounts[s] = 1;
    } else {
      recvtypes[s] = MPI_INT;
      recvcounts[s] = rank + 1;
    }
  }
  for (int nonblocking = 0; nonblocking <= 1; ++nonblocking) {
    for (int i = 0; i < per_source * n; ++i) recvbuf[i] = -1;
    if (nonblocking) {
      /* Derived types freed while the exchange runs: it completes with them all the same
       * (MPI 3.1 section 4.1.9). Open MPI 4.1's libnbc crashes in MPI_Wait then, so it keeps
       * them. */
      MPI_Datatype* dups = malloc(sizeof(MPI_Datatype) * (size_t)n);
      CHECK(dups != NULL);
      for (int s = 0; s < n; ++s) {
        if (recvtypes[s] == MPI_INT) {
          dups[s] = MPI_INT;
        } else {
          CHECK_MPI(MPI_Type_dup(recvtypes[s], &dups[s]));
        }
      }
      MPI_Request request;
      CHECK_MPI(MPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                               rdispls, dups, MPI_COMM_WORLD, &request));
#ifdef SEMPI_MPI
      for (int s = 0; s < n; ++s) {
        if (dups[s] != MPI_INT) CHECK_MPI(MPI_Type_free(&dups[s]));
      }
#endif
      CHECK_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
#ifndef SEMPI_MPI
      for (int s = 0; s < n; ++s) {
        if (dups[s] != MPI_INT) CHECK_MPI(MPI_Type_free(&dups[s]));
      }
#endif
      free(dups);
    } else {
      CHECK_MPI(MPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                              rdispls, recvtypes, MPI_COMM_WORLD));
    }
    for (int s = 0; s < n; ++s) {
      const int* block = recvbuf + (n - 1 - s) * per_source;
      for (int k = 0; k <= rank; ++k) {
        if (s % 2 == 1) {
          CHECK(block[2 * k] == value(s, rank, k) && block[2 * k + 1] == -1);
        } else {
          CHECK(block[k] == value(s, rank, k));
        }
      }
      if (s % 2 == 0) {
        for (int k = rank + 1; k < per_source; ++k) CHECK(block[k] == -1);
      }
    }
  }

  /* MPI_IN_PLACE with one int per pair and only even partners exchanging (others: empty). */
  int* inplace = malloc(sizeof(int) * (size_t)n);
  for (int p = 0; p < n; ++p) {
    inplace[p] = value(rank, p, 0);
    recvcounts[p] = (p % 2 == 0 && rank % 2 == 0) ? 1 : 0;
    rdispls[p] = p * (int)sizeof(int);
  }
  MPI_Datatype* ints = malloc(sizeof(MPI_Datatype) * (size_t)n);
  for (int p = 0; p < n; ++p) ints[p] = MPI_INT;
  CHECK_MPI(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, inplace, recvcounts, rdispls, ints,
                          MPI_COMM_WORLD));
  for (int p = 0; p < n; ++p) {
    CHECK(inplace[p] == (recvcounts[p] == 1 ? value(p, rank, 0) : value(rank, p, 0)));
  }

  for (int i = 0; i < n; ++i) {
    if (sendtypes[i] != MPI_INT) CHECK_MPI(MPI_Type_free(&sendtypes[i]));
    if (recvtypes[i] != MPI_INT) CHECK_MPI(MPI_Type_free(&recvtypes[i]));
  }
  free(ints);
  free(inplace);
  free(sendbuf);
  free(recvbuf);
  free(sendcounts);
  free(sdispls);
  free(recvcounts);
  free(rdispls);
  free(sendtypes);
  free(recvtypes);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
