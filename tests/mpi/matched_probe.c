/* Matched probe (MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv): the probed message is taken
 * out of matching, so a later receive cannot take it and the probing caller gets exactly the
 * message it probed - eager and rendezvous sized, from a wildcard probe, from MPI_PROC_NULL,
 * into a derived datatype, truncated, and raced for by two threads. */
#include <pthread.h>
#include <string.h>

#include "mpitest.h"

enum {
  SMALL = 16,              /* ints: an eager message everywhere */
  LARGE = 512 * 1024,      /* ints (2 MiB): a rendezvous message in any MPI */
  RACED = 24,              /* messages two threads compete for */
};

static int rank_;
static int size_;
static int right_;
static int left_;

/* Element i of the message tagged `tag` from `source`. */
static int value_at(int source, int tag, int i) { return source * 1000003 + tag * 7919 + i; }

static int* filled(int count, int source, int tag) {
  int* data = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
  CHECK(data != NULL);
  for (int i = 0; i < count; ++i) data[i] = value_at(source, tag, i);
  return data;
}

static void check_data(const int* data, int count, int source, int tag) {
  for (int i = 0; i < count; ++i) CHECK(data[i] == value_at(source, tag, i));
}

static int count_of(const MPI_Status* status) {
  int count = -1;
  CHECK_MPI(MPI_Get_count(status, MPI_INT, &count));
  return count;
}

/* MPI_PROC_NULL: the probes return MPI_MESSAGE_NO_PROC at once, and receiving it gives an empty
 * status from MPI_PROC_NULL and leaves MPI_MESSAGE_NULL. */
static void proc_null(void) {
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &message, &status));
  CHECK(message == MPI_MESSAGE_NO_PROC);
  CHECK(status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG);
  int untouched = 42;
  CHECK_MPI(MPI_Mrecv(&untouched, 1, MPI_INT, &message, &status));
  CHECK(message == MPI_MESSAGE_NULL);
  CHECK(status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG);
  CHECK(count_of(&status) == 0 && untouched == 42);

  int flag = 0;
  CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &message, &status));
  CHECK(flag == 1 && message == MPI_MESSAGE_NO_PROC);
  MPI_Request request = MPI_REQUEST_NULL;
  CHECK_MPI(MPI_Imrecv(&untouched, 1, MPI_INT, &message, &request));
  CHECK(message == MPI_MESSAGE_NULL);
  CHECK_MPI(MPI_Wait(&request, &status));
  CHECK(status.MPI_SOURCE == MPI_PROC_NULL && count_of(&status) == 0 && untouched == 42);
}

/* Two messages with the same tag from the left neighbour, the first of `first_count` ints. A
 * wildcard matched probe takes the first; a plain receive posted afterwards must get the second
 * (it would get the first if the probe had left it in matching); then MPI_Mrecv gets the first,
 * intact. Run with an eager and with a rendezvous-sized first message. */
static void probed_message_leaves_matching(int first_count, int tag) {
  int* first = filled(first_count, rank_, tag);
  int* second = filled(SMALL, rank_, tag + 1);
  MPI_Request sends[2];
  CHECK_MPI(MPI_Isend(first, first_count, MPI_INT, right_, tag, MPI_COMM_WORLD, &sends[0]));
  CHECK_MPI(MPI_Isend(second, SMALL, MPI_INT, right_, tag, MPI_COMM_WORLD, &sends[1]));

  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &message, &status));
  CHECK(message != MPI_MESSAGE_NULL && message != MPI_MESSAGE_NO_PROC);
  CHECK(status.MPI_SOURCE == left_ && status.MPI_TAG == tag);
  CHECK(count_of(&status) == first_count);

  int* got_second = filled(SMALL, -1, -1);
  CHECK_MPI(MPI_Recv(got_second, SMALL, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &status));
  CHECK(count_of(&status) == SMALL);
  check_data(got_second, SMALL, left_, tag + 1);

  int* got_first = filled(first_count, -1, -1);
  CHECK_MPI(MPI_Mrecv(got_first, first_count, MPI_INT, &message, &status));
  CHECK(message == MPI_MESSAGE_NULL);
  CHECK(status.MPI_SOURCE == left_ && status.MPI_TAG == tag);
  CHECK(count_of(&status) == first_count);
  check_data(got_first, first_count, left_, tag);

  CHECK_MPI(MPI_Waitall(2, sends, MPI_STATUSES_IGNORE));
  free(first);
  free(second);
  free(got_first);
  free(got_second);
}

/* MPI_Improbe polled until a message is there, then MPI_Imrecv into
 * every other int of a buffer (a strided datatype), for an eager and a rendezvous message from
 * a synchronous sender: the sender completes only once the matched message is received. */
static void improbe_imrecv_strided(int count, int tag) {
  int* out = filled(count, rank_, tag);
  MPI_Request send = MPI_REQUEST_NULL;
  CHECK_MPI(MPI_Issend(out, count, MPI_INT, right_, tag, MPI_COMM_WORLD, &send));

  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  int flag = 0;
  while (!flag) CHECK_MPI(MPI_Improbe(left_, tag, MPI_COMM_WORLD, &flag, &message, &status));
  CHECK(status.MPI_SOURCE == left_ && status.MPI_TAG == tag && count_of(&status) == count);
  /* Nothing else matches now: the message was taken. */
  int other = 1;
  CHECK_MPI(MPI_Iprobe(left_, tag, MPI_COMM_WORLD, &other, MPI_STATUS_IGNORE));
  CHECK(other == 0);

  MPI_Datatype every_other;
  CHECK_MPI(MPI_Type_vector(count, 1, 2, MPI_INT, &every_other));
  CHECK_MPI(MPI_Type_commit(&every_other));
  int* in = filled(2 * count, -1, -1);
  MPI_Request receive = MPI_REQUEST_NULL;
  CHECK_MPI(MPI_Imrecv(in, 1, every_other, &message, &receive));
  CHECK(message == MPI_MESSAGE_NULL);
  CHECK_MPI(MPI_Wait(&receive, &status));
  CHECK(status.MPI_SOURCE == left_ && status.MPI_TAG == tag && count_of(&status) == count);
  for (int i = 0; i < count; ++i) {
    CHECK(in[2 * i] == value_at(left_, tag, i));
    CHECK(in[2 * i + 1] == value_at(-1, -1, 2 * i + 1));
  }
  CHECK_MPI(MPI_Wait(&send, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Type_free(&every_other));
  free(in);
  free(out);
}

/* A matched message larger than the receive buffer: MPI_ERR_TRUNCATE, reported through the
 * communicator's handler (MPI_ERRORS_RETURN here). */
static void truncated(int tag) {
  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int* out = filled(SMALL, rank_, tag);
  MPI_Request send = MPI_REQUEST_NULL;
  CHECK_MPI(MPI_Isend(out, SMALL, MPI_INT, right_, tag, comm, &send));
  MPI_Message message = MPI_MESSAGE_NULL;
  CHECK_MPI(MPI_Mprobe(left_, tag, comm, &message, MPI_STATUS_IGNORE));
  int in[SMALL / 2];
  MPI_Status status;
  const int rc = MPI_Mrecv(in, SMALL / 2, MPI_INT, &message, &status);
  CHECK(error_class_of(rc) == MPI_ERR_TRUNCATE);
  CHECK(status.MPI_SOURCE == left_ && status.MPI_TAG == tag);
  check_data(in, SMALL / 2, left_, tag);
  CHECK_MPI(MPI_Wait(&send, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Comm_free(&comm));
  free(out);
}

/* Two threads each take RACED / 2 messages with a wildcard MPI_Mprobe + MPI_Mrecv on one
 * communicator while the left neighbour sends RACED messages of mixed sizes. Every thread must
 * receive exactly the message it probed (tag, size and data agree), and together they must get
 * each message once. */
struct racer {
  MPI_Comm comm;
  pthread_mutex_t* mu;
  int* seen;  /* per tag: how many times it was received */
};

static int raced_count(int tag) { return tag % 3 == 0 ? LARGE / 8 : SMALL + tag; }

static void* race(void* arg) {
  const struct racer* r = arg;
  for (int n = 0; n < RACED / 2; ++n) {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status probed;
    CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, r->comm, &message, &probed));
    const int tag = probed.MPI_TAG;
    CHECK(tag >= 0 && tag < RACED && probed.MPI_SOURCE == left_);
    CHECK(count_of(&probed) == raced_count(tag));
    int* in = filled(raced_count(tag), -1, -1);
    MPI_Status status;
    CHECK_MPI(MPI_Mrecv(in, raced_count(tag), MPI_INT, &message, &status));
    CHECK(status.MPI_TAG == tag && count_of(&status) == raced_count(tag));
    check_data(in, raced_count(tag), left_, tag);
    free(in);
    CHECK(pthread_mutex_lock(r->mu) == 0);
    ++r->seen[tag];
    CHECK(pthread_mutex_unlock(r->mu) == 0);
  }
  return NULL;
}

static void two_threads_race(void) {
  int provided = MPI_THREAD_SINGLE;
  CHECK_MPI(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank_ == 0) printf("MPI_THREAD_MULTIPLE is not provided; thread race not tested\n");
    return;
  }
  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  int* out[RACED];
  MPI_Request sends[RACED];
  for (int tag = 0; tag < RACED; ++tag) {
    out[tag] = filled(raced_count(tag), rank_, tag);
    CHECK_MPI(MPI_Isend(out[tag], raced_count(tag), MPI_INT, right_, tag, comm, &sends[tag]));
  }
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  int seen[RACED] = {0};
  struct racer r = {comm, &mu, seen};
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t) CHECK(pthread_create(&threads[t], NULL, race, &r) == 0);
  for (int t = 0; t < 2; ++t) CHECK(pthread_join(threads[t], NULL) == 0);
  for (int tag = 0; tag < RACED; ++tag) CHECK(seen[tag] == 1);
  CHECK_MPI(MPI_Waitall(RACED, sends, MPI_STATUSES_IGNORE));
  for (int tag = 0; tag < RACED; ++tag) free(out[tag]);
  CHECK_MPI(MPI_Comm_free(&comm));
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  right_ = (rank_ + 1) % size_;
  left_ = (rank_ + size_ - 1) % size_;

  proc_null();
  probed_message_leaves_matching(SMALL, 10);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  probed_message_leaves_matching(LARGE, 20);
  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  improbe_imrecv_strided(SMALL, 30);
  improbe_imrecv_strided(LARGE, 31);
  truncated(40);
  two_threads_race();

  CHECK_MPI(MPI_Finalize());
  return 0;
}
