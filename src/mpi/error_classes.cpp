// The MPI error classes: every class of MPI 3.1 section 8.4 plus sempi's own, with the name and
// description MPI_Error_string reports. Codes equal their classes.

#include <array>

#include "mpi/mpi_impl.hpp"

namespace sempi::mpi {
namespace {

struct ErrorClassInfo {
  int code;
  const char* name;
  const char* description;
};

#define SEMPI_ERROR_CLASS(code, description) ErrorClassInfo{code, #code, description}

constexpr std::array kErrorClasses = {
    SEMPI_ERROR_CLASS(MPI_SUCCESS, "no error"),
    SEMPI_ERROR_CLASS(MPI_ERR_BUFFER, "invalid buffer pointer"),
    SEMPI_ERROR_CLASS(MPI_ERR_COUNT, "invalid count argument"),
    SEMPI_ERROR_CLASS(MPI_ERR_TYPE, "invalid datatype"),
    SEMPI_ERROR_CLASS(MPI_ERR_TAG, "invalid tag"),
    SEMPI_ERROR_CLASS(MPI_ERR_COMM, "invalid communicator"),
    SEMPI_ERROR_CLASS(MPI_ERR_RANK, "invalid rank"),
    SEMPI_ERROR_CLASS(MPI_ERR_REQUEST, "invalid request"),
    SEMPI_ERROR_CLASS(MPI_ERR_ROOT, "invalid root"),
    SEMPI_ERROR_CLASS(MPI_ERR_GROUP, "invalid group"),
    SEMPI_ERROR_CLASS(MPI_ERR_OP, "invalid reduce operation"),
    SEMPI_ERROR_CLASS(MPI_ERR_TOPOLOGY, "invalid topology"),
    SEMPI_ERROR_CLASS(MPI_ERR_DIMS, "invalid dimension argument"),
    SEMPI_ERROR_CLASS(MPI_ERR_ARG, "invalid argument"),
    SEMPI_ERROR_CLASS(MPI_ERR_UNKNOWN, "unknown error"),
    SEMPI_ERROR_CLASS(MPI_ERR_TRUNCATE, "message truncated"),
    SEMPI_ERROR_CLASS(MPI_ERR_OTHER, "other error"),
    SEMPI_ERROR_CLASS(MPI_ERR_INTERN, "internal error"),
    SEMPI_ERROR_CLASS(MPI_ERR_IN_STATUS, "error code is in status"),
    SEMPI_ERROR_CLASS(MPI_ERR_PENDING, "pending request"),
    SEMPI_ERROR_CLASS(MPI_ERR_INFO, "invalid info object"),
    SEMPI_ERROR_CLASS(MPI_ERR_INFO_KEY, "invalid info key"),
    SEMPI_ERROR_CLASS(MPI_ERR_INFO_VALUE, "invalid info value"),
    SEMPI_ERROR_CLASS(MPI_ERR_INFO_NOKEY, "info key not defined"),
    SEMPI_ERROR_CLASS(MPI_ERR_NO_MEM, "out of memory"),
    SEMPI_ERROR_CLASS(MPI_ERR_KEYVAL, "invalid attribute key"),
    SEMPI_ERROR_CLASS(MPI_ERR_IO, "I/O or channel failure"),
    // One-sided communication.
    SEMPI_ERROR_CLASS(MPI_ERR_BASE, "invalid base address"),
    SEMPI_ERROR_CLASS(MPI_ERR_SIZE, "invalid window size"),
    SEMPI_ERROR_CLASS(MPI_ERR_DISP, "invalid displacement"),
    SEMPI_ERROR_CLASS(MPI_ERR_WIN, "invalid window"),
    SEMPI_ERROR_CLASS(MPI_ERR_LOCKTYPE, "invalid lock type"),
    SEMPI_ERROR_CLASS(MPI_ERR_ASSERT, "invalid assert argument"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_CONFLICT, "conflicting accesses to a window"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_SYNC, "wrong synchronization of RMA calls"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_RANGE, "target memory outside the window"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_ATTACH, "memory cannot be attached"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_SHARED, "memory cannot be shared"),
    SEMPI_ERROR_CLASS(MPI_ERR_RMA_FLAVOR, "passed window has the wrong flavor"),
    // Dynamic processes.
    SEMPI_ERROR_CLASS(MPI_ERR_SPAWN, "error spawning processes"),
    SEMPI_ERROR_CLASS(MPI_ERR_PORT, "invalid port name"),
    SEMPI_ERROR_CLASS(MPI_ERR_SERVICE, "invalid service name"),
    SEMPI_ERROR_CLASS(MPI_ERR_NAME, "service name not published"),
    // I/O.
    SEMPI_ERROR_CLASS(MPI_ERR_FILE, "invalid file handle"),
    SEMPI_ERROR_CLASS(MPI_ERR_NOT_SAME, "collective argument not identical on all processes"),
    SEMPI_ERROR_CLASS(MPI_ERR_AMODE, "invalid file access mode"),
    SEMPI_ERROR_CLASS(MPI_ERR_UNSUPPORTED_DATAREP, "unsupported data representation"),
    SEMPI_ERROR_CLASS(MPI_ERR_UNSUPPORTED_OPERATION, "unsupported operation"),
    SEMPI_ERROR_CLASS(MPI_ERR_NO_SUCH_FILE, "file does not exist"),
    SEMPI_ERROR_CLASS(MPI_ERR_FILE_EXISTS, "file exists"),
    SEMPI_ERROR_CLASS(MPI_ERR_BAD_FILE, "invalid file name"),
    SEMPI_ERROR_CLASS(MPI_ERR_ACCESS, "permission denied"),
    SEMPI_ERROR_CLASS(MPI_ERR_NO_SPACE, "not enough space"),
    SEMPI_ERROR_CLASS(MPI_ERR_QUOTA, "quota exceeded"),
    SEMPI_ERROR_CLASS(MPI_ERR_READ_ONLY, "read-only file or file system"),
    SEMPI_ERROR_CLASS(MPI_ERR_FILE_IN_USE, "file operation failed: the file is in use"),
    SEMPI_ERROR_CLASS(MPI_ERR_DUP_DATAREP, "data representation already defined"),
    SEMPI_ERROR_CLASS(MPI_ERR_CONVERSION, "data conversion failed"),
    // sempi's own: the fabric's security and failure conditions.
    SEMPI_ERROR_CLASS(SEMPI_ERR_POLICY, "the job's policy denies the operation"),
    SEMPI_ERROR_CLASS(SEMPI_ERR_SECURITY, "identity, certificate or TLS failure"),
    SEMPI_ERROR_CLASS(SEMPI_ERR_TIMEOUT, "a deadline passed"),
    SEMPI_ERROR_CLASS(SEMPI_ERR_PEER_FAILED, "a peer rank failed or the job was aborted"),
    SEMPI_ERROR_CLASS(SEMPI_ERR_CONFIG, "bad configuration"),
    SEMPI_ERROR_CLASS(MPI_ERR_LASTCODE, "last error code"),
};

#undef SEMPI_ERROR_CLASS

// Classes are distinct codes up to MPI_ERR_LASTCODE, so a switch over them stays valid.
constexpr bool distinct_and_in_range() {
  for (std::size_t i = 0; i < kErrorClasses.size(); ++i) {
    if (kErrorClasses[i].code < MPI_SUCCESS || kErrorClasses[i].code > MPI_ERR_LASTCODE) {
      return false;
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (kErrorClasses[i].code == kErrorClasses[j].code) return false;
    }
  }
  return true;
}
static_assert(distinct_and_in_range(), "error classes must be distinct codes <= MPI_ERR_LASTCODE");

const ErrorClassInfo* find_class(int code) noexcept {
  for (const auto& c : kErrorClasses) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

}  // namespace

const char* mpi_class_name(int code) noexcept {
  const ErrorClassInfo* c = find_class(code);
  return c != nullptr ? c->name : "MPI_ERR_UNKNOWN";
}

const char* mpi_class_description(int code) noexcept {
  const ErrorClassInfo* c = find_class(code);
  return c != nullptr ? c->description : nullptr;
}

}  // namespace sempi::mpi
