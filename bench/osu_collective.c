/* Collective latency (OSU-style) for allreduce, bcast, alltoall or reduce (to rank 0): average
 * time per call in microseconds, the maximum over ranks.
 * Usage: osu_collective allreduce|bcast|alltoall|reduce [-m N] */
#include "osu_util.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* which = argc > 1 ? argv[1] : "allreduce";
  bench_options o = bench_parse(argc - 1, argv + 1, 8, 1L << 20);
  o.iterations = o.iterations / 5 > 0 ? o.iterations / 5 : 1;
  const long per_rank = strcmp(which, "alltoall") == 0 ? (long)size : 1;
  char* sbuf = bench_alloc(o.max_size * per_rank);
  char* rbuf = bench_alloc(o.max_size * per_rank);
  if (rank == 0) printf("# osu_%s (%d ranks)\n# size_bytes latency_us\n", which, size);
  long min = o.min_size;
  if ((strcmp(which, "allreduce") == 0 || strcmp(which, "reduce") == 0) && min < 4) min = 4;
  for (long s = min; s <= o.max_size; s *= 2) {
    const int iters = bench_iterations(&o, s);
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + o.warmup; ++i) {
      if (i == o.warmup) start = MPI_Wtime();
      if (strcmp(which, "allreduce") == 0) {
        MPI_Allreduce(sbuf, rbuf, (int)(s / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else if (strcmp(which, "reduce") == 0) {
        MPI_Reduce(sbuf, rbuf, (int)(s / 4), MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      } else if (strcmp(which, "bcast") == 0) {
        MPI_Bcast(sbuf, (int)s, MPI_CHAR, 0, MPI_COMM_WORLD);
      } else {
        MPI_Alltoall(sbuf, (int)s, MPI_CHAR, rbuf, (int)s, MPI_CHAR, MPI_COMM_WORLD);
      }
    }
    double mine = (MPI_Wtime() - start) * 1e6 / iters, worst = 0;
    MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.2f\n", s, worst);
    fflush(stdout);
  }
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
