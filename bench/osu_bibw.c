/* Bidirectional bandwidth between ranks 0 and 1 (OSU-style): both send a window at once. */
#include "osu_util.h"

#define WINDOW 64

int main(int argc, char** argv) {
  int rank = 0;
  if (!bench_start_pair(&argc, &argv, "osu_bibw", &rank)) return 1;
  bench_options o = bench_parse(argc, argv, 1, 4L << 20);
  o.iterations = o.iterations / 10 > 0 ? o.iterations / 10 : 1;
  o.warmup = o.warmup / 10 > 0 ? o.warmup / 10 : 1;
  char* sbuf = bench_alloc(o.max_size * WINDOW);
  char* rbuf = bench_alloc(o.max_size * WINDOW);
  MPI_Request req[2 * WINDOW];
  if (rank == 0) printf("# osu_bibw (window %d)\n# size_bytes bandwidth_MBps\n", WINDOW);
  for (long s = o.min_size; s <= o.max_size; s = bench_next_size(s)) {
    int iters = bench_iterations(&o, s);
    if (iters < 5) iters = 5;
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + o.warmup; ++i) {
      if (i == o.warmup) start = MPI_Wtime();
      if (rank < 2) {
        const int peer = 1 - rank;
        for (int w = 0; w < WINDOW; ++w) {
          MPI_Irecv(rbuf + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
        }
        for (int w = 0; w < WINDOW; ++w) {
          MPI_Isend(sbuf + w * s, (int)s, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[WINDOW + w]);
        }
        MPI_Waitall(2 * WINDOW, req, MPI_STATUSES_IGNORE);
      }
    }
    const double elapsed = MPI_Wtime() - start;
    if (rank == 0) printf("%ld %.2f\n", s, 2.0 * (double)s * WINDOW * iters / elapsed / 1e6);
    fflush(stdout);
  }
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
