/* Shared helpers for the OSU-style benchmarks: plain MPI C, so the same source builds with
 * Open MPI's mpicc and with sempicc. Each program prints "# name" then "size value" lines. */
#ifndef SEMPI_BENCH_OSU_UTIL_H
#define SEMPI_BENCH_OSU_UTIL_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  long min_size;
  long max_size;
  int iterations; /* for small messages; large ones use fewer */
  int warmup;
} bench_options;

static inline bench_options bench_parse(int argc, char** argv, long default_min, long default_max) {
  bench_options o = {default_min, default_max, 10000, 200};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-m") == 0) o.max_size = atol(argv[i + 1]);
    else if (strcmp(argv[i], "-n") == 0) o.min_size = atol(argv[i + 1]);
    else if (strcmp(argv[i], "-i") == 0) o.iterations = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-w") == 0) o.warmup = atoi(argv[i + 1]);
  }
  return o;
}

/* Fewer iterations for large messages keep each size's run time comparable. */
static inline int bench_iterations(const bench_options* o, long size) {
  if (size > (1L << 20)) return o->iterations / 100 > 10 ? o->iterations / 100 : 10;
  if (size > 8192) return o->iterations / 10 > 20 ? o->iterations / 10 : 20;
  return o->iterations;
}

static inline void* bench_alloc(long size) {
  void* p = malloc(size > 0 ? (size_t)size : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(p, 'a', size > 0 ? (size_t)size : 1);
  return p;
}

/* MPI_Init, then this rank's number; 0 (after MPI_Finalize) if the job has fewer than two
 * ranks, which the point-to-point programs need. */
static inline int bench_start_pair(int* argc, char*** argv, const char* name, int* rank) {
  int size = 0;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size >= 2) return 1;
  if (*rank == 0) fprintf(stderr, "%s needs 2 ranks\n", name);
  MPI_Finalize();
  return 0;
}

static inline long bench_next_size(long size) { return size == 0 ? 1 : size * 2; }

#endif
