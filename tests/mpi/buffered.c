/* Buffered and ready mode sends (MPI 3.1 sections 3.4, 3.6, 3.9): MPI_Bsend / MPI_Ibsend /
 * MPI_Bsend_init copy the message into the attached buffer (MPI_ERR_BUFFER when it does not
 * fit), MPI_Buffer_detach waits until the buffered messages are sent; MPI_Rsend / MPI_Irsend /
 * MPI_Rsend_init reach posted receives. */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

enum { kCount = 100, kMessages = 4, kLarge = 1 << 20 };

/* Every rank sends kMessages messages to the right through a buffer sized as MPI prescribes. */
static void buffered_ring(int rank, int left, int right) {
  int pack = 0;
  CHECK_MPI(MPI_Pack_size(kCount, MPI_INT, MPI_COMM_WORLD, &pack));
  const int bufsize = kMessages * (pack + MPI_BSEND_OVERHEAD);
  char* buffer = malloc((size_t)bufsize);
  CHECK(buffer != NULL);
  CHECK_MPI(MPI_Buffer_attach(buffer, bufsize));

  static int out[kMessages][kCount];
  static int in[kMessages][kCount];
  MPI_Request recvs[kMessages];
  for (int m = 0; m < kMessages; ++m) {
    for (int i = 0; i < kCount; ++i) out[m][i] = rank * 10000 + m * 100 + i;
    CHECK_MPI(MPI_Irecv(in[m], kCount, MPI_INT, left, m, MPI_COMM_WORLD, &recvs[m]));
  }
  /* The call copies the message: the program may overwrite its data as soon as it returns. */
  for (int m = 0; m < kMessages - 1; ++m) {
    CHECK_MPI(MPI_Bsend(out[m], kCount, MPI_INT, right, m, MPI_COMM_WORLD));
    memset(out[m], 0xff, sizeof out[m]);
  }
  MPI_Request ibsend;
  const int last = kMessages - 1;
  CHECK_MPI(MPI_Ibsend(out[last], kCount, MPI_INT, right, last, MPI_COMM_WORLD, &ibsend));
  CHECK_MPI(MPI_Wait(&ibsend, MPI_STATUS_IGNORE));
  memset(out[last], 0xff, sizeof out[last]);
  CHECK_MPI(MPI_Bsend(out[0], kCount, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

#ifdef SEMPI_MPI
  /* A message larger than the whole buffer never fits. (Open MPI 4.1 sends it anyway when the
   * destination is another process.) */
  char* huge = calloc((size_t)bufsize, 1);
  CHECK(huge != NULL);
  CHECK(error_class_of(MPI_Bsend(huge, bufsize, MPI_BYTE, right, 99, MPI_COMM_WORLD)) ==
        MPI_ERR_BUFFER);
  free(huge);
#endif

  /* Detach returns the buffer once every message has left it. */
  void* detached = NULL;
  int detached_size = -1;
  CHECK_MPI(MPI_Buffer_detach(&detached, &detached_size));
  CHECK(detached == buffer && detached_size == bufsize);
  memset(buffer, 0, (size_t)bufsize);
  CHECK_MPI(MPI_Waitall(kMessages, recvs, MPI_STATUSES_IGNORE));
  for (int m = 0; m < kMessages; ++m) {
    for (int i = 0; i < kCount; ++i) CHECK(in[m][i] == left * 10000 + m * 100 + i);
  }
  free(buffer);

#ifdef SEMPI_MPI
  /* With no buffer attached there is nowhere to copy to. (Open MPI 4.1 sends small messages
   * anyway.) */
  CHECK(error_class_of(MPI_Bsend(out[0], 1, MPI_INT, right, 0, MPI_COMM_WORLD)) ==
        MPI_ERR_BUFFER);
#endif
  /* ... but a send to MPI_PROC_NULL sends and keeps nothing: it needs no buffer. */
  CHECK_MPI(MPI_Bsend(out[0], kCount, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  MPI_Request null_ibsend;
  CHECK_MPI(MPI_Ibsend(out[0], kCount, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &null_ibsend));
  CHECK_MPI(MPI_Wait(&null_ibsend, MPI_STATUS_IGNORE));
  CHECK(error_class_of(MPI_Bsend(out[0], 1, MPI_INT, MPI_PROC_NULL, -5, MPI_COMM_WORLD)) ==
        MPI_ERR_TAG);
}

/* Space stays taken until the message is sent: rank 0 buffers a message too large to go out
 * before rank 1 posts its receive, and a second one no longer fits. */
static void buffer_full(int rank) {
  int pack = 0;
  CHECK_MPI(MPI_Pack_size(kLarge, MPI_BYTE, MPI_COMM_WORLD, &pack));
  const int bufsize = pack + MPI_BSEND_OVERHEAD;
  char* large = calloc(kLarge, 1);
  CHECK(large != NULL);
  if (rank == 0) {
    char* buffer = malloc((size_t)bufsize);
    CHECK(buffer != NULL);
    CHECK_MPI(MPI_Buffer_attach(buffer, bufsize));
    large[kLarge - 1] = 42;
    CHECK_MPI(MPI_Bsend(large, kLarge, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
#ifdef SEMPI_MPI /* Open MPI 4.1 sends a message directly when it can, without the buffer */
    const int one = 1;
    CHECK(error_class_of(MPI_Bsend(&one, 1, MPI_INT, 1, 6, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
#endif
    /* A full buffer does not matter to MPI_PROC_NULL. */
    CHECK_MPI(MPI_Bsend(large, kLarge, MPI_BYTE, MPI_PROC_NULL, 6, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    void* detached = NULL;
    int detached_size = 0;
    CHECK_MPI(MPI_Buffer_detach(&detached, &detached_size));
    free(buffer);
  } else {
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
      CHECK_MPI(MPI_Recv(large, kLarge, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(large[kLarge - 1] == 42);
    }
  }
  free(large);
}

/* Ready mode: every receive is posted before the barrier, every send after it. */
static void ready_mode(int rank, int left, int right) {
  int got[2] = {-1, -1};
  MPI_Request reqs[3];
  CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, left, 7, MPI_COMM_WORLD, &reqs[0]));
  CHECK_MPI(MPI_Irecv(&got[1], 1, MPI_INT, left, 8, MPI_COMM_WORLD, &reqs[1]));
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Rsend(&rank, 1, MPI_INT, right, 7, MPI_COMM_WORLD));
  CHECK_MPI(MPI_Irsend(&rank, 1, MPI_INT, right, 8, MPI_COMM_WORLD, &reqs[2]));
  CHECK_MPI(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
  CHECK(got[0] == left && got[1] == left);
}

/* Persistent buffered and ready sends: each start sends the buffer's current contents. */
static void persistent_modes(int rank, int left, int right) {
  enum { kStarts = 3 };
  int pack = 0;
  CHECK_MPI(MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &pack));
  const int bufsize = kStarts * (pack + MPI_BSEND_OVERHEAD);
  char* buffer = malloc((size_t)bufsize);
  CHECK(buffer != NULL);
  int value = -1;
  MPI_Request bsend;
  MPI_Request rsend;
  CHECK_MPI(MPI_Bsend_init(&value, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &bsend));
  CHECK_MPI(MPI_Rsend_init(&value, 1, MPI_INT, right, 31, MPI_COMM_WORLD, &rsend));
#ifdef SEMPI_MPI
  /* Started with no buffer attached, it fails and stays inactive. (Open MPI 4.1 sends small
   * messages anyway.) */
  CHECK(error_class_of(MPI_Start(&bsend)) == MPI_ERR_BUFFER);
#endif
  CHECK_MPI(MPI_Buffer_attach(buffer, bufsize));

  int got[2][kStarts];
  MPI_Request recvs[2][kStarts];
  for (int k = 0; k < kStarts; ++k) {
    CHECK_MPI(MPI_Irecv(&got[0][k], 1, MPI_INT, left, 30, MPI_COMM_WORLD, &recvs[0][k]));
    CHECK_MPI(MPI_Irecv(&got[1][k], 1, MPI_INT, left, 31, MPI_COMM_WORLD, &recvs[1][k]));
  }
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every ready send's receive is posted */
  for (int k = 0; k < kStarts; ++k) {
    value = rank * 100 + k;
    CHECK_MPI(MPI_Start(&bsend));
    CHECK_MPI(MPI_Wait(&bsend, MPI_STATUS_IGNORE));
    CHECK(bsend != MPI_REQUEST_NULL); /* persistent: inactive again, not freed */
    CHECK_MPI(MPI_Start(&rsend));
    CHECK_MPI(MPI_Wait(&rsend, MPI_STATUS_IGNORE));
  }
  value = -1; /* the buffered copies went out with the values they had at their start */
  void* detached = NULL;
  int detached_size = 0;
  CHECK_MPI(MPI_Buffer_detach(&detached, &detached_size));
  CHECK_MPI(MPI_Waitall(kStarts, recvs[0], MPI_STATUSES_IGNORE));
  CHECK_MPI(MPI_Waitall(kStarts, recvs[1], MPI_STATUSES_IGNORE));
  for (int k = 0; k < kStarts; ++k) {
    CHECK(got[0][k] == left * 100 + k && got[1][k] == left * 100 + k);
  }

  /* To MPI_PROC_NULL it needs no buffer. */
  MPI_Request null_bsend;
  CHECK_MPI(MPI_Bsend_init(&value, 1, MPI_INT, MPI_PROC_NULL, 30, MPI_COMM_WORLD, &null_bsend));
  CHECK_MPI(MPI_Start(&null_bsend));
  CHECK_MPI(MPI_Wait(&null_bsend, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Request_free(&null_bsend));
  CHECK_MPI(MPI_Request_free(&bsend));
  CHECK_MPI(MPI_Request_free(&rsend));
  free(buffer);
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world(&argc, &argv, &rank, &size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  buffered_ring(rank, left, right);
  if (size >= 2) buffer_full(rank);
  ready_mode(rank, left, right);
  persistent_modes(rank, left, right);
  CHECK_MPI(MPI_Finalize());
  return 0;
}
