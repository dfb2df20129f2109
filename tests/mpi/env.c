/* Environment management, attributes, info objects, error strings and memory allocation. */
#include <string.h>

#include "mpitest.h"

int main(int argc, char** argv) {
  int flag = 1;
  int provided = -1;
  CHECK_MPI(MPI_Initialized(&flag));
  CHECK(flag == 0);
  CHECK_MPI(MPI_Finalized(&flag));
  CHECK(flag == 0);
  CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
  CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE);
  CHECK_MPI(MPI_Initialized(&flag));
  CHECK(flag == 1);
  int queried = -1;
  CHECK_MPI(MPI_Query_thread(&queried));
  CHECK(queried == provided);
  CHECK_MPI(MPI_Is_thread_main(&flag));
  CHECK(flag == 1);

  int rank = -1;
  int size = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 1 && rank >= 0 && rank < size);
  CHECK_MPI(MPI_Comm_size(MPI_COMM_SELF, &size));
  CHECK(size == 1);
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_SELF, &rank));
  CHECK(rank == 0);

  int version = 0;
  int subversion = -1;
  CHECK_MPI(MPI_Get_version(&version, &subversion));
  CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION);
  CHECK(version >= 3);
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = -1;
  CHECK_MPI(MPI_Get_library_version(text, &len));
  /* Some libraries count the terminating NUL. */
  CHECK(len > 0 && ((int)strlen(text) == len || (int)strlen(text) + 1 == len));
  char host[MPI_MAX_PROCESSOR_NAME];
  CHECK_MPI(MPI_Get_processor_name(host, &len));
  CHECK(len > 0 && (int)strlen(host) == len);

  const double t0 = MPI_Wtime();
  const double t1 = MPI_Wtime();
  CHECK(t1 >= t0);
  CHECK(MPI_Wtick() > 0.0 && MPI_Wtick() < 1.0);
  /* Profiling control: accepted with any level and arguments, no effect. */
  CHECK_MPI(MPI_Pcontrol(0));
  CHECK_MPI(MPI_Pcontrol(2, "phase", 1));
  CHECK_MPI(MPI_Pcontrol(1));

  char message[MPI_MAX_ERROR_STRING];
  CHECK_MPI(MPI_Error_string(MPI_ERR_RANK, message, &len));
  CHECK(len > 0 && (int)strlen(message) == len);
  CHECK_MPI(MPI_Error_string(MPI_SUCCESS, message, &len));
  int cls = -1;
  CHECK_MPI(MPI_Error_class(MPI_ERR_TRUNCATE, &cls));
  CHECK(cls == MPI_ERR_TRUNCATE);
  /* MPI_ERR_LASTCODE is a valid code too (MPI 3.1 section 8.4). */
  CHECK_MPI(MPI_Error_class(MPI_ERR_LASTCODE, &cls));
#ifdef SEMPI_MPI
  CHECK(cls == MPI_ERR_LASTCODE);
#else
  CHECK(cls >= MPI_SUCCESS && cls <= MPI_ERR_LASTCODE); /* Open MPI 4.1: MPI_ERR_UNKNOWN */
#endif
  CHECK_MPI(MPI_Error_string(MPI_ERR_LASTCODE, message, &len));
  CHECK(len > 0 && (int)strlen(message) == len);

  /* Predefined attributes. */
  int* value = NULL;
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag));
  CHECK(flag && *value >= 32767);
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &value, &flag));
  CHECK(flag && (*value == MPI_PROC_NULL || (*value >= 0 && *value < size)));
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &value, &flag));
  CHECK(flag && (*value == MPI_ANY_SOURCE || *value == MPI_PROC_NULL || *value >= 0));
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &value, &flag));
  CHECK(!flag || *value == 0 || *value == 1);
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &value, &flag));
  CHECK(!flag || *value >= 1);
  CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &value, &flag));
  CHECK(!flag || *value >= 0);

  /* Info objects. */
  MPI_Info info;
  CHECK_MPI(MPI_Info_create(&info));
  CHECK_MPI(MPI_Info_set(info, "color", "blue"));
  CHECK_MPI(MPI_Info_set(info, "shape", "round"));
  CHECK_MPI(MPI_Info_set(info, "color", "green"));
  int nkeys = 0;
  CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
  CHECK(nkeys == 2);
  char got[MPI_MAX_INFO_VAL];
  CHECK_MPI(MPI_Info_get(info, "color", MPI_MAX_INFO_VAL - 1, got, &flag));
  CHECK(flag && strcmp(got, "green") == 0);
  CHECK_MPI(MPI_Info_get(info, "color", 3, got, &flag));
  CHECK(flag && strcmp(got, "gre") == 0);
  CHECK_MPI(MPI_Info_get(info, "size", MPI_MAX_INFO_VAL - 1, got, &flag));
  CHECK(!flag);
  CHECK_MPI(MPI_Info_delete(info, "shape"));
  CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
  CHECK(nkeys == 1);
  CHECK_MPI(MPI_Info_free(&info));
  CHECK(info == MPI_INFO_NULL);

  /* Memory. */
  double* mem = NULL;
  CHECK_MPI(MPI_Alloc_mem(1000 * sizeof(double), MPI_INFO_NULL, &mem));
  CHECK(mem != NULL);
  for (int i = 0; i < 1000; ++i) mem[i] = i;
  CHECK(mem[999] == 999.0);
  CHECK_MPI(MPI_Free_mem(mem));

  /* Error handlers. */
  MPI_Errhandler handler;
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler));
  CHECK(handler == MPI_ERRORS_ARE_FATAL);
  CHECK_MPI(MPI_Errhandler_free(&handler));
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler));
  CHECK(handler == MPI_ERRORS_RETURN);
  CHECK_MPI(MPI_Errhandler_free(&handler));

  CHECK_MPI(MPI_Finalize());
  CHECK_MPI(MPI_Finalized(&flag));
  if (flag != 1) return 1;
  return 0;
}
