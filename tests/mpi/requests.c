/* Request completion: Wait/Test and their all/any/some forms, cancel, free, persistent requests. */
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mpitest.h"

enum { kN = 8 };

/* Freed sends of a non-contiguous type in a loop, each acknowledged by the receiver: the
 * library's packed copy of each must go once its send has completed, not wait for an
 * MPI_Wait that never comes. 16 rounds of 8 MiB stay far below 64 MiB of growth. */
static void freed_sends_give_back_their_copies(int rank) {
  enum { kInts = 2 << 20, kRounds = 16, kData = 40, kAck = 41 };
  MPI_Datatype spread; /* every other int: not contiguous */
  CHECK_MPI(MPI_Type_vector(kInts, 1, 2, MPI_INT, &spread));
  CHECK_MPI(MPI_Type_commit(&spread));
  int* data = calloc((size_t)kInts * 2, sizeof(int));
  int* in = calloc((size_t)kInts, sizeof(int));
  CHECK(data != NULL && in != NULL);
  struct rusage before;
  CHECK(getrusage(RUSAGE_SELF, &before) == 0);
  for (int round = 0; round < kRounds; ++round) {
    if (rank == 0) {
      MPI_Request send;
      data[2 * (kInts - 1)] = round;
      CHECK_MPI(MPI_Isend(data, 1, spread, 1, kData, MPI_COMM_WORLD, &send));
      CHECK_MPI(MPI_Request_free(&send));
      int ack = 0;
      CHECK_MPI(MPI_Recv(&ack, 1, MPI_INT, 1, kAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(ack == round);
    } else if (rank == 1) {
      CHECK_MPI(MPI_Recv(in, kInts, MPI_INT, 0, kData, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Send(&in[kInts - 1], 1, MPI_INT, 0, kAck, MPI_COMM_WORLD));
    }
  }
  struct rusage after;
  CHECK(getrusage(RUSAGE_SELF, &after) == 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* quarantine, shadow */
  if (rank == 0) CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB */
#endif
  free(in);
  free(data);
  CHECK_MPI(MPI_Type_free(&spread));
}

/* Freed plain sends are reclaimed once they finish, though the program never calls a Wait or
 * Test function: a fire-and-forget loop runs in bounded memory (each leaked ~0.4 KiB). */
/* Resident memory in KiB (Linux): unlike ru_maxrss, a peak earlier in the program hides nothing. */
static long resident_kib(void) {
  long pages = 0;
  long resident = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  CHECK(statm != NULL && fscanf(statm, "%ld %ld", &pages, &resident) == 2);
  fclose(statm);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void freed_plain_sends_are_reclaimed_without_a_wait(int rank) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  enum { kRounds = 100000 };
#else
  enum { kRounds = 2000 }; /* memory is not checked there: the loop only runs */
#endif
  enum { kData = 42, kAck = 43 };
  const long before = resident_kib();
  for (int round = 0; round < kRounds; ++round) {
    int value = round;
    if (rank == 0) {
      MPI_Request send;
      CHECK_MPI(MPI_Isend(&value, 1, MPI_INT, 1, kData, MPI_COMM_WORLD, &send));
      CHECK_MPI(MPI_Request_free(&send));
      CHECK_MPI(MPI_Recv(&value, 1, MPI_INT, 1, kAck, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(value == round);
    } else if (rank == 1) {
      CHECK_MPI(MPI_Recv(&value, 1, MPI_INT, 0, kData, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK_MPI(MPI_Send(&value, 1, MPI_INT, 0, kAck, MPI_COMM_WORLD));
    }
  }
  const long after = resident_kib();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* quarantine, shadow */
  if (rank == 0) CHECK(after - before < 16 * 1024);
#else
  (void)before;
  (void)after;
#endif
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  MPI_Status status;
  MPI_Status statuses[2 * kN];
  MPI_Request reqs[2 * kN];
  int flag = 0;
  int index = -1;

  /* Waitall over kN receives and kN sends, statuses checked. */
  int out[kN];
  int in[kN];
  for (int i = 0; i < kN; ++i) {
    out[i] = rank * 100 + i;
    in[i] = -1;
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, i, MPI_COMM_WORLD, &reqs[i]));
  }
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, right, i, MPI_COMM_WORLD, &reqs[kN + i]));
  }
  CHECK_MPI(MPI_Waitall(2 * kN, reqs, statuses));
  for (int i = 0; i < kN; ++i) {
    CHECK(in[i] == left * 100 + i);
    CHECK(statuses[i].MPI_SOURCE == left && statuses[i].MPI_TAG == i);
    CHECK(reqs[i] == MPI_REQUEST_NULL && reqs[kN + i] == MPI_REQUEST_NULL);
  }
  /* Waitall on only null requests; MPI_STATUSES_IGNORE. */
  CHECK_MPI(MPI_Waitall(2 * kN, reqs, MPI_STATUSES_IGNORE));

  /* Waitany until all done, each index exactly once. */
  for (int i = 0; i < kN; ++i) {
    in[i] = -1;
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 20 + i, MPI_COMM_WORLD, &reqs[i]));
  }
  for (int i = kN - 1; i >= 0; --i) {
    CHECK_MPI(MPI_Send(&out[i], 1, MPI_INT, right, 20 + i, MPI_COMM_WORLD));
  }
  int seen = 0;
  for (int k = 0; k < kN; ++k) {
    CHECK_MPI(MPI_Waitany(kN, reqs, &index, &status));
    CHECK(index >= 0 && index < kN && !(seen & (1 << index)));
    CHECK(status.MPI_TAG == 20 + index && in[index] == left * 100 + index);
    CHECK(reqs[index] == MPI_REQUEST_NULL);
    seen |= 1 << index;
  }
  CHECK_MPI(MPI_Waitany(kN, reqs, &index, &status));
  CHECK(index == MPI_UNDEFINED);

  /* Waitsome / Testany / Testsome-style loops. */
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 40 + i, MPI_COMM_WORLD, &reqs[i]));
  }
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Send(&out[i], 1, MPI_INT, right, 40 + i, MPI_COMM_WORLD));
  }
  int done = 0;
  int indices[kN];
  while (done < kN) {
    int outcount = 0;
    CHECK_MPI(MPI_Waitsome(kN, reqs, &outcount, indices, statuses));
    CHECK(outcount >= 1);
    for (int k = 0; k < outcount; ++k) {
      CHECK(statuses[k].MPI_TAG == 40 + indices[k]);
      CHECK(in[indices[k]] == left * 100 + indices[k]);
    }
    done += outcount;
  }
  int outcount = 0;
  CHECK_MPI(MPI_Waitsome(kN, reqs, &outcount, indices, statuses));
  CHECK(outcount == MPI_UNDEFINED);

  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 60 + i, MPI_COMM_WORLD, &reqs[i]));
  }
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Send(&out[i], 1, MPI_INT, right, 60 + i, MPI_COMM_WORLD));
  }
  done = 0;
  while (done < kN) {
    CHECK_MPI(MPI_Testany(kN, reqs, &index, &flag, &status));
    if (flag) {
      CHECK(index >= 0 && status.MPI_TAG == 60 + index);
      ++done;
    }
  }
  CHECK_MPI(MPI_Testany(kN, reqs, &index, &flag, &status));
  CHECK(flag && index == MPI_UNDEFINED);

  /* Testsome: reports what has completed (possibly nothing) without blocking. */
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 70 + i, MPI_COMM_WORLD, &reqs[i]));
  }
  outcount = -1;
  CHECK_MPI(MPI_Testsome(kN, reqs, &outcount, indices, statuses));
  CHECK(outcount == 0); /* nobody sends before the barrier */
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Send(&out[i], 1, MPI_INT, right, 70 + i, MPI_COMM_WORLD));
  }
  done = 0;
  while (done < kN) {
    CHECK_MPI(MPI_Testsome(kN, reqs, &outcount, indices, statuses));
    CHECK(outcount >= 0 && outcount <= kN - done);
    for (int k = 0; k < outcount; ++k) {
      CHECK(statuses[k].MPI_TAG == 70 + indices[k] && statuses[k].MPI_SOURCE == left);
      CHECK(in[indices[k]] == left * 100 + indices[k] && reqs[indices[k]] == MPI_REQUEST_NULL);
    }
    done += outcount;
  }
  CHECK_MPI(MPI_Testsome(kN, reqs, &outcount, indices, MPI_STATUSES_IGNORE));
  CHECK(outcount == MPI_UNDEFINED);

  /* Testall: polls until all complete. */
  for (int i = 0; i < kN; ++i) {
    CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, left, 80 + i, MPI_COMM_WORLD, &reqs[i]));
    CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, right, 80 + i, MPI_COMM_WORLD, &reqs[kN + i]));
  }
  do {
    CHECK_MPI(MPI_Testall(2 * kN, reqs, &flag, statuses));
  } while (!flag);
  for (int i = 0; i < kN; ++i) CHECK(in[i] == left * 100 + i && reqs[i] == MPI_REQUEST_NULL);

  /* Test on a single request, and on MPI_REQUEST_NULL. */
  int one = -1;
  MPI_Request r;
  CHECK_MPI(MPI_Irecv(&one, 1, MPI_INT, left, 99, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, right, 99, MPI_COMM_WORLD));
  do {
    CHECK_MPI(MPI_Test(&r, &flag, &status));
  } while (!flag);
  CHECK(one == left && r == MPI_REQUEST_NULL && status.MPI_SOURCE == left);
  CHECK_MPI(MPI_Test(&r, &flag, &status));
  CHECK(flag);
  CHECK_MPI(MPI_Wait(&r, &status));

  /* Cancel a receive nobody will match. */
  CHECK_MPI(MPI_Irecv(&one, 1, MPI_INT, MPI_ANY_SOURCE, 31000, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Cancel(&r));
  CHECK_MPI(MPI_Wait(&r, &status));
  CHECK_MPI(MPI_Test_cancelled(&status, &flag));
  CHECK(flag);
  /* A completed receive is not cancelled. */
  CHECK_MPI(MPI_Irecv(&one, 1, MPI_INT, left, 98, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, right, 98, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Wait(&r, &status));
  CHECK_MPI(MPI_Test_cancelled(&status, &flag));
  CHECK(!flag);

  /* Request_free on an active send: the message still arrives. */
  int freed = rank + 5000;
  CHECK_MPI(MPI_Isend(&freed, 1, MPI_INT, right, 97, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Request_free(&r));
  CHECK(r == MPI_REQUEST_NULL);
  CHECK_MPI(MPI_Recv(&one, 1, MPI_INT, left, 97, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  CHECK(one == left + 5000);

  /* Request_free on a non-contiguous receive: once a later message from the same sender has
     arrived (messages do not overtake), the freed receive's data is in the program's buffer,
     before any MPI_Wait or MPI_Test. */
  {
    MPI_Datatype every_other;
    CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_INT, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));
    int strided[8] = {0};
    int values[4] = {rank * 10 + 1, rank * 10 + 2, rank * 10 + 3, rank * 10 + 4};
    int later = rank;
    MPI_Request sends[2];
    CHECK_MPI(MPI_Irecv(strided, 1, every_other, left, 96, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_MPI(MPI_Isend(values, 4, MPI_INT, right, 96, MPI_COMM_WORLD, &sends[0]));
    CHECK_MPI(MPI_Isend(&later, 1, MPI_INT, right, 95, MPI_COMM_WORLD, &sends[1]));
    CHECK_MPI(MPI_Recv(&one, 1, MPI_INT, left, 95, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(one == left);
    for (int k = 0; k < 4; ++k) {
      CHECK(strided[2 * k] == left * 10 + k + 1);
      CHECK(strided[2 * k + 1] == 0);
    }
    CHECK_MPI(MPI_Waitall(2, sends, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Type_free(&every_other));
  }

  /* Persistent requests, restarted several times; Startall and individual Start. */
  int psend = 0;
  int precv = -1;
  int ssend_value = 0;
  int srecv = -1;
  MPI_Request persistent[4];
  CHECK_MPI(MPI_Recv_init(&precv, 1, MPI_INT, left, 120, MPI_COMM_WORLD, &persistent[0]));
  CHECK_MPI(MPI_Recv_init(&srecv, 1, MPI_INT, left, 121, MPI_COMM_WORLD, &persistent[1]));
  CHECK_MPI(MPI_Send_init(&psend, 1, MPI_INT, right, 120, MPI_COMM_WORLD, &persistent[2]));
  CHECK_MPI(MPI_Ssend_init(&ssend_value, 1, MPI_INT, right, 121, MPI_COMM_WORLD,
                           &persistent[3]));
  /* An inactive persistent request completes at once with an empty status. */
  CHECK_MPI(MPI_Wait(&persistent[2], &status));
  CHECK(persistent[2] != MPI_REQUEST_NULL);
  for (int iter = 0; iter < 5; ++iter) {
    psend = rank * 10 + iter;
    ssend_value = rank * 10 + iter + 1;
    CHECK_MPI(MPI_Start(&persistent[0]));
    CHECK_MPI(MPI_Start(&persistent[1]));
    CHECK_MPI(MPI_Startall(2, &persistent[2]));
    CHECK_MPI(MPI_Waitall(4, persistent, statuses));
    CHECK(precv == left * 10 + iter && srecv == left * 10 + iter + 1);
    CHECK(statuses[0].MPI_SOURCE == left && statuses[1].MPI_TAG == 121);
    for (int k = 0; k < 4; ++k) CHECK(persistent[k] != MPI_REQUEST_NULL);
  }
  /* Persistent request to MPI_PROC_NULL. */
  MPI_Request nullreq;
  CHECK_MPI(MPI_Send_init(&psend, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &nullreq));
  CHECK_MPI(MPI_Start(&nullreq));
  CHECK_MPI(MPI_Wait(&nullreq, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Request_free(&nullreq));
  for (int k = 0; k < 4; ++k) {
    CHECK_MPI(MPI_Request_free(&persistent[k]));
    CHECK(persistent[k] == MPI_REQUEST_NULL);
  }

  if (size >= 2) freed_sends_give_back_their_copies(rank);
  if (size >= 2) freed_plain_sends_are_reclaimed_without_a_wait(rank);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
