/* Data-movement collectives, with and without MPI_IN_PLACE, with basic and derived types, at
 * every root. */
#include <string.h>

#include "mpitest.h"

enum { K = 3 };

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

  int* all = malloc(sizeof(int) * (size_t)(size * size * K + 16));
  int* other = malloc(sizeof(int) * (size_t)(size * size * K + 16));
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int* rcounts = malloc(sizeof(int) * (size_t)size);
  int* rdispls = malloc(sizeof(int) * (size_t)size);
  CHECK(all && other && counts && displs && rcounts && rdispls);
  int mine[K];

  /* A strided type: K ints, every other int (extent 2K-1 ints). */
  MPI_Datatype strided;
  CHECK_MPI(MPI_Type_vector(K, 1, 2, MPI_INT, &strided));
  CHECK_MPI(MPI_Type_commit(&strided));

  for (int root = 0; root < size; ++root) {
    /* Bcast, contiguous and strided. */
    int data[2 * K];
    for (int i = 0; i < 2 * K; ++i) data[i] = rank == root ? root * 10 + i : -1;
    CHECK_MPI(MPI_Bcast(data, K, MPI_INT, root, MPI_COMM_WORLD));
    for (int i = 0; i < K; ++i) CHECK(data[i] == root * 10 + i);
    for (int i = 0; i < 2 * K; ++i) data[i] = rank == root ? root * 10 + i : -1;
    CHECK_MPI(MPI_Bcast(data, 1, strided, root, MPI_COMM_WORLD));
    for (int i = 0; i < 2 * K - 1; ++i) CHECK(data[i] == (i % 2 == 0 || rank == root ? root * 10 + i : -1));

    /* Gather / Scatter. */
    for (int i = 0; i < K; ++i) mine[i] = rank * 100 + i;
    for (int i = 0; i < size * K; ++i) all[i] = -1;
    CHECK_MPI(MPI_Gather(mine, K, MPI_INT, all, K, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root) {
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i < K; ++i) CHECK(all[r * K + i] == r * 100 + i);
      }
    }
    /* Gather in place at the root. */
    if (rank == root) {
      for (int i = 0; i < size * K; ++i) all[i] = -1;
      for (int i = 0; i < K; ++i) all[root * K + i] = root * 100 + i;
      CHECK_MPI(MPI_Gather(MPI_IN_PLACE, K, MPI_INT, all, K, MPI_INT, root, MPI_COMM_WORLD));
      for (int i = 0; i < size * K; ++i) CHECK(all[i] == (i / K) * 100 + i % K);
    } else {
      CHECK_MPI(MPI_Gather(mine, K, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD));
    }
    /* Scatter from the root, and in place at the root. */
    if (rank == root) {
      for (int i = 0; i < size * K; ++i) all[i] = 1000 * root + i;
    }
    for (int i = 0; i < K; ++i) mine[i] = -1;
    CHECK_MPI(MPI_Scatter(all, K, MPI_INT, mine, K, MPI_INT, root, MPI_COMM_WORLD));
    for (int i = 0; i < K; ++i) CHECK(mine[i] == 1000 * root + rank * K + i);
    if (rank == root) {
      CHECK_MPI(MPI_Scatter(all, K, MPI_INT, MPI_IN_PLACE, K, MPI_INT, root, MPI_COMM_WORLD));
      CHECK(all[root * K] == 1000 * root + root * K);
    } else {
      CHECK_MPI(MPI_Scatter(NULL, K, MPI_INT, mine, K, MPI_INT, root, MPI_COMM_WORLD));
      for (int i = 0; i < K; ++i) CHECK(mine[i] == 1000 * root + rank * K + i);
    }
    /* Scatter into a strided receive type. */
    int spread[2 * K];
    for (int i = 0; i < 2 * K; ++i) spread[i] = -1;
    CHECK_MPI(MPI_Scatter(all, K, MPI_INT, spread, 1, strided, root, MPI_COMM_WORLD));
    for (int i = 0; i < K; ++i) CHECK(spread[2 * i] == 1000 * root + rank * K + i);
    CHECK(spread[1] == -1);

    /* Gatherv / Scatterv: rank r contributes r+1 ints, laid out with a gap of one. */
    int total = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = r + 1;
      displs[r] = total;
      total += r + 2;
    }
    int vals[16];
    for (int i = 0; i <= rank; ++i) vals[i] = rank * 10 + i;
    for (int i = 0; i < total; ++i) all[i] = -7;
    CHECK_MPI(MPI_Gatherv(vals, rank + 1, MPI_INT, all, counts, displs, MPI_INT, root,
                          MPI_COMM_WORLD));
    if (rank == root) {
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i <= r; ++i) CHECK(all[displs[r] + i] == r * 10 + i);
        CHECK(all[displs[r] + r + 1] == -7);
      }
      /* In place: the root's block is already where it belongs. */
      CHECK_MPI(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, all, counts, displs, MPI_INT, root,
                            MPI_COMM_WORLD));
      for (int r = 0; r < size; ++r) CHECK(all[displs[r] + r] == r * 10 + r);
    } else {
      CHECK_MPI(MPI_Gatherv(vals, rank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, root,
                            MPI_COMM_WORLD));
    }
    for (int i = 0; i < 16; ++i) vals[i] = -1;
    CHECK_MPI(MPI_Scatterv(all, counts, displs, MPI_INT, vals, rank + 1, MPI_INT, root,
                           MPI_COMM_WORLD));
    for (int i = 0; i <= rank; ++i) CHECK(vals[i] == rank * 10 + i);
    CHECK(vals[rank + 1] == -1);
  }

  /* Allgather, also in place and into a strided type. */
  for (int i = 0; i < K; ++i) mine[i] = rank * 100 + i;
  CHECK_MPI(MPI_Allgather(mine, K, MPI_INT, all, K, MPI_INT, MPI_COMM_WORLD));
  for (int i = 0; i < size * K; ++i) CHECK(all[i] == (i / K) * 100 + i % K);
  for (int i = 0; i < size * K; ++i) all[i] = i / K == rank ? rank * 100 + i % K : -1;
  CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_INT, all, K, MPI_INT, MPI_COMM_WORLD));
  for (int i = 0; i < size * K; ++i) CHECK(all[i] == (i / K) * 100 + i % K);
  MPI_Datatype strided_resized;
  CHECK_MPI(MPI_Type_create_resized(strided, 0, 2 * K * (MPI_Aint)sizeof(int), &strided_resized));
  CHECK_MPI(MPI_Type_commit(&strided_resized));
  for (int i = 0; i < 2 * K * size; ++i) other[i] = -1;
  CHECK_MPI(MPI_Allgather(mine, K, MPI_INT, other, 1, strided_resized, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < K; ++i) {
      CHECK(other[r * 2 * K + 2 * i] == r * 100 + i && other[r * 2 * K + 2 * i + 1] == -1);
    }
  }

  /* Allgatherv: rank r gives r+1 ints. */
  int total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    displs[r] = total;
    total += r + 1;
  }
  int vals[16];
  for (int i = 0; i <= rank; ++i) vals[i] = rank * 10 + i;
  CHECK_MPI(MPI_Allgatherv(vals, rank + 1, MPI_INT, all, counts, displs, MPI_INT,
                           MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) CHECK(all[displs[r] + i] == r * 10 + i);
  }
  for (int i = 0; i < total; ++i) all[i] = -1;
  for (int i = 0; i <= rank; ++i) all[displs[rank] + i] = rank * 10 + i;
  CHECK_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_INT, all, counts, displs, MPI_INT,
                           MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) CHECK(all[displs[r] + i] == r * 10 + i);
  }

  /* Alltoall: block for rank r carries (me, r). */
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < K; ++i) all[r * K + i] = rank * 1000 + r * 10 + i;
  }
  CHECK_MPI(MPI_Alltoall(all, K, MPI_INT, other, K, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < K; ++i) CHECK(other[r * K + i] == r * 1000 + rank * 10 + i);
  }
  CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_INT, all, K, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < K; ++i) CHECK(all[r * K + i] == r * 1000 + rank * 10 + i);
  }

  /* Alltoallv: rank me sends r+1 ints to rank r; receives me+1 from everyone. */
  int stotal = 0;
  int rtotal = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    displs[r] = stotal;
    stotal += r + 1;
    rcounts[r] = rank + 1;
    rdispls[r] = rtotal;
    rtotal += rank + 1;
  }
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < counts[r]; ++i) all[displs[r] + i] = rank * 1000 + r * 10 + i;
  }
  for (int i = 0; i < rtotal; ++i) other[i] = -1;
  CHECK_MPI(MPI_Alltoallv(all, counts, displs, MPI_INT, other, rcounts, rdispls, MPI_INT,
                          MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= rank; ++i) CHECK(other[rdispls[r] + i] == r * 1000 + rank * 10 + i);
  }
  /* In place, with equal counts (the send data is the receive buffer's). */
  for (int r = 0; r < size; ++r) {
    rcounts[r] = 2;
    rdispls[r] = 2 * r;
    all[2 * r] = rank * 100 + r;
    all[2 * r + 1] = -rank;
  }
  CHECK_MPI(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, all, rcounts, rdispls, MPI_INT,
                          MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) CHECK(all[2 * r] == r * 100 + rank && all[2 * r + 1] == -r);
  /* In place with negative displacements (MPI allows them): block r sits r - size ints before
   * the buffer pointer, in reverse order. */
  {
    int* base = malloc((size_t)(2 * size + 1) * sizeof(int));
    CHECK(base != NULL);
    int* buf = base + 2 * size;
    for (int r = 0; r < size; ++r) {
      rcounts[r] = 1;
      rdispls[r] = -2 * r - 1;
      buf[rdispls[r]] = rank * 100 + r;
      base[2 * size - 2 * r - 2] = -7; /* the gaps stay as they are */
    }
    CHECK_MPI(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, buf, rcounts, rdispls, MPI_INT,
                            MPI_COMM_WORLD));
    for (int r = 0; r < size; ++r) {
      CHECK(buf[-2 * r - 1] == r * 100 + rank);
      CHECK(base[2 * size - 2 * r - 2] == -7);
    }
    free(base);
  }

  /* Collectives on a duplicate and with zero counts. */
  MPI_Comm dup;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK_MPI(MPI_Bcast(NULL, 0, MPI_INT, 0, dup));
  CHECK_MPI(MPI_Allgather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, dup));
  CHECK_MPI(MPI_Barrier(dup));
  CHECK_MPI(MPI_Comm_free(&dup));

  CHECK_MPI(MPI_Type_free(&strided));
  CHECK_MPI(MPI_Type_free(&strided_resized));
  free(all);
  free(other);
  free(counts);
  free(displs);
  free(rcounts);
  free(rdispls);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
