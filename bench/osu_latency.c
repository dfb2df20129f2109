/* Ping-pong latency between ranks 0 and 1 (OSU-style): one-way time in microseconds. */
#include "osu_util.h"

int main(int argc, char** argv) {
  int rank = 0;
  if (!bench_start_pair(&argc, &argv, "osu_latency", &rank)) return 1;
  bench_options o = bench_parse(argc, argv, 0, 4L << 20);
  char* buf = bench_alloc(o.max_size);
  if (rank == 0) printf("# osu_latency\n# size_bytes latency_us\n");
  for (long s = o.min_size; s <= o.max_size; s = bench_next_size(s)) {
    const int iters = bench_iterations(&o, s);
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + o.warmup; ++i) {
      if (i == o.warmup) start = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf, (int)s, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)s, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf, (int)s, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)s, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
      }
    }
    if (rank == 0) printf("%ld %.2f\n", s, (MPI_Wtime() - start) * 1e6 / (2.0 * iters));
    fflush(stdout);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
