/* Shared checks for the MPI test programs: standard MPI only, so they build with any MPI. */
#ifndef MPITEST_H
#define MPITEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* A failed check names itself and takes the whole job down with a non-zero status. */
#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
      fflush(stderr);                                                                \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                  \
    }                                                                                \
  } while (0)

#define CHECK_MPI(call)                                                              \
  do {                                                                               \
    int check_mpi_rc_ = (call);                                                      \
    if (check_mpi_rc_ != MPI_SUCCESS) {                                              \
      fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call,          \
              check_mpi_rc_);                                                        \
      fflush(stderr);                                                                \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                  \
    }                                                                                \
  } while (0)

/* The error class of an MPI return code. */
static inline int error_class_of(int code) {
  int cls = MPI_SUCCESS;
  MPI_Error_class(code, &cls);
  return cls;
}

/* The call must fail with error class MPI_ERR_ARG (a null output argument, say): with
 * MPI_ERRORS_RETURN, the job goes on. */
#define EXPECT_ARG(call)                                                                         \
  do {                                                                                           \
    int expect_rc_ = (call);                                                                     \
    if (error_class_of(expect_rc_) != MPI_ERR_ARG) {                                             \
      fprintf(stderr, "%s:%d: %s returned class %d, expected MPI_ERR_ARG\n", __FILE__, __LINE__, \
              #call, error_class_of(expect_rc_));                                                \
      fflush(stderr);                                                                            \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                              \
    }                                                                                            \
  } while (0)

/* The call must fail with error class `cls` (with MPI_ERRORS_RETURN, the job goes on). */
#define EXPECT_ERROR_CLASS(cls, call)                                                             \
  do {                                                                                            \
    int expect_rc_ = (call);                                                                      \
    if (error_class_of(expect_rc_) != (cls)) {                                                    \
      fprintf(stderr, "%s:%d: %s returned class %d, expected %s\n", __FILE__, __LINE__, #call,    \
              error_class_of(expect_rc_), #cls);                                                  \
      fflush(stderr);                                                                             \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                               \
    }                                                                                             \
  } while (0)

/* MPI_Init, then this process's rank and the job's size in MPI_COMM_WORLD. */
static inline void init_world(int* argc, char*** argv, int* rank, int* size) {
  CHECK_MPI(MPI_Init(argc, argv));
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, size));
}

/* init_world() for programs that test error returns: errors on MPI_COMM_WORLD and
   MPI_COMM_SELF come back as codes instead of aborting. */
static inline void init_world_returning_errors(int* argc, char*** argv, int* rank, int* size) {
  init_world(argc, argv, rank, size);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
}

#endif
