#include "launch/job_socket_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "common/utf8.hpp"
#include "pki/pem_files.hpp"
#include "sempi/error.hpp"

namespace sempi::launch {

JobSocketDir::JobSocketDir() {
  // The ranks send their socket paths back as JSON, which holds UTF-8 text only.
  const char* tmp = std::getenv("TMPDIR");
  const bool usable = tmp != nullptr && *tmp == '/' && is_utf8(tmp);
  std::string name = (usable ? std::string(tmp) : std::string("/tmp")) + "/sempi-XXXXXX";
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
