/* Nonblocking vector collectives and reductions: MPI_Igatherv, MPI_Iscatterv, MPI_Iallgatherv,
 * MPI_Ialltoallv, MPI_Ireduce_scatter_block, MPI_Ireduce_scatter, MPI_Iscan and MPI_Iexscan,
 * all in flight at once, then in place and with a strided receive type. Rank r contributes
 * r + 1 elements where counts vary, so every block has a different size. */
#include <string.h>

#include "mpitest.h"

enum { MAXP = 16 };

static int item(int rank, int i) { return rank * 1000 + i; }

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK(size <= MAXP);
  const int root = size / 2;

  /* Block r has r + 1 elements, packed in rank order with one spare slot between blocks. */
  int counts[MAXP];
  int displs[MAXP];
  int span = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    displs[r] = span;
    span += r + 2;
  }
  int mine[MAXP];
  for (int i = 0; i <= rank; ++i) mine[i] = item(rank, i);

  int gathered[MAXP * (MAXP + 2)];
  int all[MAXP * (MAXP + 2)];
  int scatter_src[MAXP * (MAXP + 2)];
  int part[MAXP];
  for (int k = 0; k < span; ++k) gathered[k] = all[k] = -1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < counts[r]; ++i) scatter_src[displs[r] + i] = rank == root ? -item(r, i) : 0;
  }

  /* Alltoallv: rank r sends (q + 1) ints to rank q, and receives (r + 1) from each. */
  int scounts[MAXP], sdispls[MAXP], rcounts[MAXP], rdispls[MAXP];
  int to_each[MAXP * MAXP], from_each[MAXP * MAXP];
  int at = 0;
  for (int q = 0; q < size; ++q) {
    scounts[q] = q + 1;
    sdispls[q] = at;
    for (int i = 0; i <= q; ++i) to_each[at + i] = rank * 100 + q * 10 + i;
    at += q + 1;
    rcounts[q] = rank + 1;
    rdispls[q] = q * (rank + 1);
  }

  /* Reductions: reduce_scatter_block gives 2 elements per rank, reduce_scatter r + 1. */
  long rsb_in[2 * MAXP], rsb_out[2] = {0, 0};
  for (int k = 0; k < 2 * size; ++k) rsb_in[k] = rank + k;
  int rs_counts[MAXP];
  long rs_in[MAXP * (MAXP + 1) / 2], rs_out[MAXP];
  int total = 0;
  for (int r = 0; r < size; ++r) {
    rs_counts[r] = r + 1;
    total += r + 1;
  }
  for (int k = 0; k < total; ++k) rs_in[k] = (long)k * (rank + 1);
  long scan_in[3] = {rank, 2 * rank, 1}, scan_out[3], exscan_out[3] = {-5, -5, -5};

  MPI_Request reqs[8];
  CHECK_MPI(MPI_Igatherv(mine, rank + 1, MPI_INT, gathered, counts, displs, MPI_INT, root,
                         MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Iscatterv(scatter_src, counts, displs, MPI_INT, part, rank + 1, MPI_INT, root,
                          MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Iallgatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD,
                            &reqs[2]));
  CHECK_MPI(MPI_Ialltoallv(to_each, scounts, sdispls, MPI_INT, from_each, rcounts, rdispls,
                           MPI_INT, MPI_COMM_WORLD, &reqs[3]));
  CHECK_MPI(MPI_Ireduce_scatter_block(rsb_in, rsb_out, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD,
                                      &reqs[4]));
  CHECK_MPI(MPI_Ireduce_scatter(rs_in, rs_out, rs_counts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD,
                                &reqs[5]));
  CHECK_MPI(MPI_Iscan(scan_in, scan_out, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[6]));
  CHECK_MPI(MPI_Iexscan(scan_in, exscan_out, 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[7]));
  CHECK_MPI(MPI_Waitall(8, reqs, MPI_STATUSES_IGNORE));

  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) {
      if (rank == root) CHECK(gathered[displs[r] + i] == item(r, i));
      CHECK(all[displs[r] + i] == item(r, i));
    }
    if (rank == root) CHECK(gathered[displs[r] + r + 1] == -1); /* gaps untouched */
    CHECK(all[displs[r] + r + 1] == -1);
  }
  for (int i = 0; i <= rank; ++i) CHECK(part[i] == -item(rank, i));
  for (int q = 0; q < size; ++q) {
    for (int i = 0; i <= rank; ++i) CHECK(from_each[q * (rank + 1) + i] == q * 100 + rank * 10 + i);
  }
  const long ranks = (long)size * (size - 1) / 2;
  for (int k = 0; k < 2; ++k) CHECK(rsb_out[k] == ranks + (long)size * (2 * rank + k));
  const int first = rank * (rank + 1) / 2; /* my block's offset in rs_in */
  const long factor = (long)size * (size + 1) / 2;
  for (int i = 0; i <= rank; ++i) CHECK(rs_out[i] == (long)(first + i) * factor);
  CHECK(scan_out[0] == (long)rank * (rank + 1) / 2 && scan_out[1] == 2 * scan_out[0] &&
        scan_out[2] == rank + 1);
  if (rank > 0) {
    CHECK(exscan_out[0] == (long)rank * (rank - 1) / 2 && exscan_out[2] == rank);
  }

  /* In place: Igatherv at the root, Iallgatherv and Iscan everywhere. */
  for (int k = 0; k < span; ++k) all[k] = -1;
  for (int i = 0; i <= rank; ++i) all[displs[rank] + i] = item(rank, i) + 7;
  CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT,
                            MPI_COMM_WORLD, &reqs[0]));
  long running = 1;
  CHECK_MPI(MPI_Iscan(MPI_IN_PLACE, &running, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
  for (int r = 0; r < size; ++r) CHECK(all[displs[r] + r] == item(r, r) + 7);
  CHECK(running == rank + 1);

  if (rank == root) {
    for (int k = 0; k < span; ++k) gathered[k] = -1;
    for (int i = 0; i <= rank; ++i) gathered[displs[rank] + i] = item(rank, i) + 9;
  }
  int flag = 0;
  CHECK_MPI(MPI_Igatherv(rank == root ? MPI_IN_PLACE : (void*)mine, rank + 1, MPI_INT, gathered,
                         counts, displs, MPI_INT, root, MPI_COMM_WORLD, &reqs[0]));
  do {
    CHECK_MPI(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
  } while (!flag);
  if (rank == root) {
    for (int r = 0; r < size; ++r) CHECK(gathered[displs[r]] == item(r, 0) + (r == root ? 9 : 0));
  }

  /* A strided receive type: every other int; staged and unpacked at completion. */
  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(1, 1, 2, MPI_INT, &every_other));
  MPI_Datatype pair_slot;
  CHECK_MPI(MPI_Type_create_resized(every_other, 0, 2 * (MPI_Aint)sizeof(int), &pair_slot));
  CHECK_MPI(MPI_Type_commit(&pair_slot));
  CHECK_MPI(MPI_Type_free(&every_other));
  int sparse[2 * MAXP * (MAXP + 2)];
  for (int k = 0; k < 2 * span; ++k) sparse[k] = -3;
  CHECK_MPI(MPI_Iallgatherv(mine, rank + 1, MPI_INT, sparse, counts, displs, pair_slot,
                            MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Type_free(&pair_slot));
  CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) {
      CHECK(sparse[2 * (displs[r] + i)] == item(r, i));
      CHECK(sparse[2 * (displs[r] + i) + 1] == -3);
    }
  }

  CHECK_MPI(MPI_Finalize());
  return 0;
}
