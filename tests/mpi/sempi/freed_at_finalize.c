/* sempi-specific (MPI calls communication still pending at MPI_Finalize erroneous, so other
 * MPIs may do anything): requests the program freed with MPI_Request_free must not hold up
 * MPI_Finalize. A freed receive nothing will ever match, and a freed 1 MiB send no rank
 * receives (rendezvous: it never completes), used to make MPI_Finalize wait forever, while the
 * same requests not freed did not. Run with freed_at_finalize.json (allow all). */
#include "../mpitest.h"

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  int never = 0;
  MPI_Request r;
  CHECK_MPI(MPI_Irecv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Request_free(&r));
  enum { kBig = 1 << 20 };
  char* big = calloc(kBig, 1);
  CHECK(big != NULL);
  CHECK_MPI(MPI_Isend(big, kBig, MPI_CHAR, (rank + 1) % size, 998, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Request_free(&r));
  /* A small freed send still arrives before MPI_Finalize returns anywhere. */
  int token = rank;
  CHECK_MPI(MPI_Isend(&token, 1, MPI_INT, (rank + 1) % size, 997, MPI_COMM_WORLD, &r));
  CHECK_MPI(MPI_Request_free(&r));
  int got = -1;
  CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, (rank + size - 1) % size, 997, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE));
  CHECK(got == (rank + size - 1) % size);
  CHECK_MPI(MPI_Finalize());
  free(big);
  printf("rank %d: MPI_Finalize returned with freed requests pending\n", rank);
  return 0;
}
