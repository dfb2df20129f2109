/* Every MPI 3.1 error class (section 8.4) is defined, a distinct code up to MPI_ERR_LASTCODE, a
 * class of its own for MPI_Error_class, and described by a string no other class shares. */
#include <string.h>

#include "mpitest.h"

#define CLASS(name) {name, #name}

static const struct {
  int code;
  const char* name;
} kClasses[] = {
    CLASS(MPI_SUCCESS), CLASS(MPI_ERR_BUFFER), CLASS(MPI_ERR_COUNT), CLASS(MPI_ERR_TYPE),
    CLASS(MPI_ERR_TAG), CLASS(MPI_ERR_COMM), CLASS(MPI_ERR_RANK), CLASS(MPI_ERR_REQUEST),
    CLASS(MPI_ERR_ROOT), CLASS(MPI_ERR_GROUP), CLASS(MPI_ERR_OP), CLASS(MPI_ERR_TOPOLOGY),
    CLASS(MPI_ERR_DIMS), CLASS(MPI_ERR_ARG), CLASS(MPI_ERR_UNKNOWN), CLASS(MPI_ERR_TRUNCATE),
    CLASS(MPI_ERR_OTHER), CLASS(MPI_ERR_INTERN), CLASS(MPI_ERR_IN_STATUS),
    CLASS(MPI_ERR_PENDING), CLASS(MPI_ERR_KEYVAL), CLASS(MPI_ERR_NO_MEM), CLASS(MPI_ERR_BASE),
    CLASS(MPI_ERR_INFO_KEY), CLASS(MPI_ERR_INFO_VALUE), CLASS(MPI_ERR_INFO_NOKEY),
    CLASS(MPI_ERR_SPAWN), CLASS(MPI_ERR_PORT), CLASS(MPI_ERR_SERVICE), CLASS(MPI_ERR_NAME),
    CLASS(MPI_ERR_WIN), CLASS(MPI_ERR_SIZE), CLASS(MPI_ERR_DISP), CLASS(MPI_ERR_INFO),
    CLASS(MPI_ERR_LOCKTYPE), CLASS(MPI_ERR_ASSERT), CLASS(MPI_ERR_RMA_CONFLICT),
    CLASS(MPI_ERR_RMA_SYNC), CLASS(MPI_ERR_RMA_RANGE), CLASS(MPI_ERR_RMA_ATTACH),
    CLASS(MPI_ERR_RMA_SHARED), CLASS(MPI_ERR_RMA_FLAVOR), CLASS(MPI_ERR_FILE),
    CLASS(MPI_ERR_NOT_SAME), CLASS(MPI_ERR_AMODE), CLASS(MPI_ERR_UNSUPPORTED_DATAREP),
    CLASS(MPI_ERR_UNSUPPORTED_OPERATION), CLASS(MPI_ERR_NO_SUCH_FILE),
    CLASS(MPI_ERR_FILE_EXISTS), CLASS(MPI_ERR_BAD_FILE), CLASS(MPI_ERR_ACCESS),
    CLASS(MPI_ERR_NO_SPACE), CLASS(MPI_ERR_QUOTA), CLASS(MPI_ERR_READ_ONLY),
    CLASS(MPI_ERR_FILE_IN_USE), CLASS(MPI_ERR_DUP_DATAREP), CLASS(MPI_ERR_CONVERSION),
    CLASS(MPI_ERR_IO),
};

enum { kCount = (int)(sizeof kClasses / sizeof kClasses[0]) };

int main(int argc, char** argv) {
  int rank;
  int size;
  init_world(&argc, &argv, &rank, &size);

  static char text[kCount][MPI_MAX_ERROR_STRING];
  for (int i = 0; i < kCount; ++i) {
    const int code = kClasses[i].code;
    if (code < 0 || code > MPI_ERR_LASTCODE) {
      fprintf(stderr, "%s is %d, outside 0..MPI_ERR_LASTCODE\n", kClasses[i].name, code);
      CHECK(0);
    }
    int cls = -1;
    CHECK_MPI(MPI_Error_class(code, &cls));
    CHECK(cls == code);
    int length = -1;
    CHECK_MPI(MPI_Error_string(code, text[i], &length));
    CHECK(length > 0 && length < MPI_MAX_ERROR_STRING && (int)strlen(text[i]) == length);
    for (int j = 0; j < i; ++j) {
      if (kClasses[j].code == code || strcmp(text[j], text[i]) == 0) {
        fprintf(stderr, "%s and %s share a code or the string \"%s\"\n", kClasses[j].name,
                kClasses[i].name, text[i]);
        CHECK(0);
      }
    }
  }

  /* The argument the spawn calls take when the codes are not wanted. */
  int* ignored = MPI_ERRCODES_IGNORE;
  CHECK(ignored == NULL);

  CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_MPI(MPI_Finalize());
  return 0;
}
