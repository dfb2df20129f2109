#include "launch/job_socket_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "pki/pem_files.hpp"
#include "sempi/error.hpp"

namespace sempi::launch {

JobSocketDir::JobSocketDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string name = (tmp != nullptr && *tmp == '/' ? std::string(tmp) : std::string("/tmp")) +
                     "/sempi-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) {  // mode 0700
    failure_ = "cannot create a directory like " + name + ": " + std::strerror(errno);
    return;
  }
  path_ = name;
  try {
    path_ = pki::make_private_dir(path_);  // resolved, and nobody else can swap it
  } catch (const Error& e) {
    failure_ = e.what();
    std::error_code ignored;
    std::filesystem::remove(name, ignored);
    path_.clear();
  }
}

JobSocketDir::~JobSocketDir() {
  if (path_.empty()) return;
  std::error_code ignored;  // a rank may still be removing its own socket: nothing to report
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace sempi::launch
