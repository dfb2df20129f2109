/* sempi-specific (MPI leaves the state after an error undefined): MPI_Startall checks every
 * request before it starts any, so an array with a bad entry (a request twice, an active one,
 * MPI_REQUEST_NULL) fails with MPI_ERR_REQUEST and leaves the good entries inactive, ready to
 * be started again. The old code started entries up to the bad one and left them active. Run
 * with startall_checks.json. */
#include "../mpitest.h"

/* Starts recv and send (to self) again, and the message must arrive: neither was left active. */
static void start_both_again(MPI_Request* recv, MPI_Request* send, const int* sent,
                             const int* received) {
  CHECK_MPI(MPI_Start(recv));
  CHECK_MPI(MPI_Start(send));
  CHECK_MPI(MPI_Wait(recv, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Wait(send, MPI_STATUS_IGNORE));
  CHECK(*received == *sent);
}

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  init_world_returning_errors(&argc, &argv, &rank, &size);
  int sent = 7 + rank;
  int received = -1;
  MPI_Request recv;
  MPI_Request send;
  CHECK_MPI(MPI_Recv_init(&received, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &recv));
  CHECK_MPI(MPI_Send_init(&sent, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &send));

  MPI_Request twice[3] = {recv, send, recv};
  CHECK(error_class_of(MPI_Startall(3, twice)) == MPI_ERR_REQUEST);
  start_both_again(&recv, &send, &sent, &received);

  received = -1;
  MPI_Request with_null[2] = {recv, MPI_REQUEST_NULL};
  CHECK(error_class_of(MPI_Startall(2, with_null)) == MPI_ERR_REQUEST);
  start_both_again(&recv, &send, &sent, &received);

  /* An active request at the end of the array: the receive before it stays inactive. */
  received = -1;
  MPI_Request other_recv;
  int other = -1;
  CHECK_MPI(MPI_Irecv(&other, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &other_recv));
  MPI_Request active_send;
  CHECK_MPI(MPI_Send_init(&sent, 1, MPI_INT, rank, 6, MPI_COMM_WORLD, &active_send));
  CHECK_MPI(MPI_Start(&active_send));
  MPI_Request with_active[2] = {recv, active_send};
  CHECK(error_class_of(MPI_Startall(2, with_active)) == MPI_ERR_REQUEST);
  CHECK_MPI(MPI_Wait(&active_send, MPI_STATUS_IGNORE));
  CHECK_MPI(MPI_Wait(&other_recv, MPI_STATUS_IGNORE));
  CHECK(other == sent);
  start_both_again(&recv, &send, &sent, &received);

  /* A good array still starts every entry. */
  received = -1;
  MPI_Request both[2] = {recv, send};
  CHECK_MPI(MPI_Startall(2, both));
  CHECK_MPI(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
  CHECK(received == sent);

  /* The completion calls refuse an array with one nonpersistent request twice: it would be
   * completed, and freed, twice. MPI_REQUEST_NULL may appear any number of times, and a
   * persistent request twice is harmless (the second finds it inactive). */
  received = -1;
  CHECK_MPI(MPI_Start(&recv));
  CHECK_MPI(MPI_Start(&send));
  MPI_Request persistent_twice[3] = {recv, send, recv};
  CHECK_MPI(MPI_Waitall(3, persistent_twice, MPI_STATUSES_IGNORE));
  CHECK(received == sent);
  int late = -1;
  MPI_Request pending;
  CHECK_MPI(MPI_Irecv(&late, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, &pending));
  MPI_Request repeated[3] = {pending, MPI_REQUEST_NULL, pending};
  int index = 0;
  int flag = 0;
  int outcount = 0;
  int indices[3];
  CHECK(error_class_of(MPI_Waitall(3, repeated, MPI_STATUSES_IGNORE)) == MPI_ERR_REQUEST);
  CHECK(error_class_of(MPI_Testall(3, repeated, &flag, MPI_STATUSES_IGNORE)) == MPI_ERR_REQUEST);
  CHECK(error_class_of(MPI_Waitany(3, repeated, &index, MPI_STATUS_IGNORE)) == MPI_ERR_REQUEST);
  CHECK(error_class_of(MPI_Testsome(3, repeated, &outcount, indices, MPI_STATUSES_IGNORE)) ==
        MPI_ERR_REQUEST);
  CHECK(repeated[0] == pending && repeated[2] == pending);
  CHECK_MPI(MPI_Send(&sent, 1, MPI_INT, rank, 7, MPI_COMM_WORLD));
  MPI_Request nulls[3] = {pending, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  CHECK_MPI(MPI_Waitall(3, nulls, MPI_STATUSES_IGNORE));
  CHECK(late == sent);

  CHECK_MPI(MPI_Request_free(&active_send));
  CHECK_MPI(MPI_Request_free(&recv));
  CHECK_MPI(MPI_Request_free(&send));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
