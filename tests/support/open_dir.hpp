#pragma once
// A directory opened as sempirun opens a --wdir (O_PATH): a descriptor to look a program up in
// and to change to.

#include <fcntl.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "transport/socket.hpp"

namespace sempi::test {

inline transport::UniqueFd open_dir(const std::filesystem::path& dir) {
  transport::UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_TRUE(fd.valid()) << dir << ": " << std::strerror(errno);
  return fd;
}

}  // namespace sempi::test
