#pragma once
// The job's directory for the ranks' Unix sockets (transport/listener.hpp): created by the
// launcher with mkdtemp (mode 0700) under $TMPDIR or /tmp, handed to the ranks as
// SEMPI_LOCAL_DIR (bootstrap_protocol.hpp), and removed with everything in it when the job
// ends, however its ranks end.
// Only where nobody else could swap the directory (pki::make_private_dir's check of the path
// above it); otherwise the job runs without it and ranks on one host use TCP.
//
// Thread safety: none; owned by the launcher.

#include <filesystem>
#include <string>

namespace sempi::launch {

class JobSocketDir {
 public:
  /// Creates the directory; on failure path() is empty and failure() says why.
  JobSocketDir();
  ~JobSocketDir();
  JobSocketDir(const JobSocketDir&) = delete;
  JobSocketDir& operator=(const JobSocketDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] const std::string& failure() const noexcept { return failure_; }

 private:
  std::filesystem::path path_;
  std::string failure_;
};

}  // namespace sempi::launch
