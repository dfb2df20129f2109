/* Streaming bandwidth from rank 0 to rank 1 (OSU-style): a window of nonblocking sends, then a
 * short acknowledgement; MB/s (10^6 bytes per second). */
#include "osu_util.h"

#define WINDOW 64

int main(int argc, char** argv) {
  int rank = 0;
  if (!bench_start_pair(&argc, &argv, "osu_bw", &rank)) return 1;
  bench_options o = bench_parse(argc, argv, 1, 4L << 20);
  o.iterations = o.iterations / 10 > 0 ? o.iterations / 10 : 1;
  o.warmup = o.warmup / 10 > 0 ? o.warmup / 10 : 1;
  char* buf = bench_alloc(o.max_size * WINDOW);
  MPI_Request req[WINDOW];
  char ack = 0;
  if (rank == 0) printf("# osu_bw (window %d)\n# size_bytes bandwidth_MBps\n", WINDOW);
  for (long s = o.min_size; s <= o.max_size; s = bench_next_size(s)) {
    int iters = bench_iterations(&o, s);
    if (iters < 5) iters = 5;
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + o.warmup; ++i) {
      if (i == o.warmup) start = MPI_Wtime();
      if (rank == 0) {
        for (int w = 0; w < WINDOW; ++w) {
          MPI_Isend(buf + w * s, (int)s, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        for (int w = 0; w < WINDOW; ++w) {
          MPI_Irecv(buf + w * s, (int)s, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Send(&ack, 1, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
      }
    }
    const double elapsed = MPI_Wtime() - start;
    if (rank == 0) printf("%ld %.2f\n", s, (double)s * WINDOW * iters / elapsed / 1e6);
    fflush(stdout);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
