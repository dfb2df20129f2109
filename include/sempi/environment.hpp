#pragma once
/// \file
/// Start-up and shut-down of a rank (MPI_Init / MPI_Finalize as RAII).
///
/// Under `sempirun`, the constructor enrolls with the launcher over the private bootstrap
/// channel (key generated in memory, certificate issued by the job CA), connects to the other
/// ranks over mutually authenticated TLS 1.3 and returns when the job is wired. Started without
/// sempirun, the program runs as a job of one rank (a "singleton", as with MPI).
///
/// The destructor waits until every rank has reached finalize, closes the channels and releases
/// the runtime. At most one Environment may exist in a process, once. A program that leaves
/// through exit() before the destructor has run is not finalized: at exit, the runtime's
/// thread stops and its audit log is closed, the rest is left to the end of the process (other
/// threads may still be in calls), and its peers see it fail.

#include <string>

#include "sempi/communicator.hpp"

namespace sempi {

class Environment {
 public:
  /// Throws sempi::Error if the rank cannot join the job (the message says why).
  Environment();
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  [[nodiscard]] static bool initialized() noexcept;
  [[nodiscard]] static bool finalized() noexcept;
  /// Tears the whole job down (MPI_Abort): the launcher ends every rank; exits with `code`.
  [[noreturn]] static void abort(int code, const std::string& reason = "");
  /// Seconds since an arbitrary point in the past (MPI_Wtime).
  [[nodiscard]] static double wtime() noexcept;
  /// The job id, as 32 hex digits.
  [[nodiscard]] static std::string job_id();
  /// The host name (MPI_Get_processor_name).
  [[nodiscard]] static std::string processor_name();
};

/// The communicator of all ranks (MPI_COMM_WORLD). Throws sempi::Error if not initialized.
Communicator world();
/// A communicator containing only this rank (MPI_COMM_SELF).
Communicator self();

}  // namespace sempi
