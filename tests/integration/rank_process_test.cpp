// RankProcess::spawn's working directory: the rank changes to the directory sempirun opened
// (a descriptor), not to a name, so a rename after the job started cannot move it elsewhere.

#include "launch/rank_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "sempi/error.hpp"
#include "transport/socket.hpp"

#include "support/open_dir.hpp"
#include "support/temp_dir.hpp"

namespace sempi::launch {
namespace {

namespace fs = std::filesystem;
using sempi::test::open_dir;
using sempi::test::TempDir;
using transport::UniqueFd;

// Runs `pwd -P` (the physical directory) as a rank in `working_dir_fd`; its output, without the
// newline, once it has exited with status 0.
std::string physical_directory_of_rank(int working_dir_fd, const fs::path& name) {
  SpawnRequest request;
  request.argv = {"sh", "-c", "pwd -P"};
  request.program = "/bin/sh";
  request.env = {"PATH=/usr/bin:/bin"};
  request.working_dir_fd = working_dir_fd;
  request.working_dir = name;
  RankProcess rank = RankProcess::spawn(request);
  std::string out;
  for (;;) {
    pollfd p{rank.out().get(), POLLIN, 0};
    if (::poll(&p, 1, 60'000) <= 0) {  // bounded: a stuck child fails the test
      ADD_FAILURE() << "no output within 60 s";
      rank.signal(SIGKILL);
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(rank.out().get(), buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(rank.pid(), &status, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(RankProcess, RunsInTheDirectoryOpenedWhateverIsRenamedLater) {
  TempDir dir;
  const fs::path wdir = dir.path() / "wdir";
  fs::create_directory(wdir);
  const auto at = open_dir(wdir);
  fs::rename(wdir, dir.path() / "moved");
  fs::create_directory(wdir);  // another directory under the name given
  EXPECT_EQ(physical_directory_of_rank(at.get(), wdir),
            fs::canonical(dir.path() / "moved").string());
}

// Puts `fd` in place of this process's stdin until the end of the scope, however it ends.
class StdinReplaced {
 public:
  explicit StdinReplaced(int fd) : saved_(::fcntl(0, F_DUPFD_CLOEXEC, 10)) {
    EXPECT_TRUE(saved_.valid());
    EXPECT_EQ(::dup2(fd, 0), 0);
  }
  ~StdinReplaced() { ::dup2(saved_.get(), 0); }
  StdinReplaced(const StdinReplaced&) = delete;
  StdinReplaced& operator=(const StdinReplaced&) = delete;

 private:
  UniqueFd saved_;
};

// The descriptor may be one of the numbers the rank's stdin, stdout, stderr and bootstrap
// channel are moved to: the child changes directory before it moves them.
TEST(RankProcess, ADirectoryDescriptorAmongTheLowestNumbersWorks) {
  TempDir dir;
  const auto at = open_dir(dir.path());
  std::string where;
  {
    const StdinReplaced replaced(at.get());
    where = physical_directory_of_rank(0, dir.path());
  }
  EXPECT_EQ(where, fs::canonical(dir.path()).string());
}

// A directory the rank cannot change to (here: not a directory at all) fails its start with
// the name given, and no process is left behind.
TEST(RankProcess, ADirectoryTheRankCannotEnterFailsItsStart) {
  TempDir dir;
  const fs::path file = dir.path() / "file";
  { std::ofstream(file) << "x"; }
  const UniqueFd at(::open(file.c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(at.valid());
  SpawnRequest request;
  request.argv = {"true"};
  request.program = "/bin/true";
  request.working_dir_fd = at.get();
  request.working_dir = "/the/name/given";
  try {
    RankProcess::spawn(request);
    ADD_FAILURE() << "the rank started";
  } catch (const sempi::Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot run true in /the/name/given: Not a directory");
  }
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child was left to reap";
}

// A directory removed after it was opened can still be entered, but is no place to run.
TEST(RankProcess, ADirectoryRemovedSinceItWasOpenedFailsItsStart) {
  TempDir dir;
  const fs::path gone = dir.path() / "gone";
  fs::create_directory(gone);
  const auto at = open_dir(gone);
  fs::remove(gone);
  SpawnRequest request;
  request.argv = {"true"};
  request.program = "/bin/true";
  request.working_dir_fd = at.get();
  request.working_dir = gone;
  try {
    RankProcess::spawn(request);
    ADD_FAILURE() << "the rank started";
  } catch (const sempi::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot run true in " + gone.string() + ": No such file or directory");
  }
}

TEST(RankProcess, WithoutADirectoryTheLaunchersIsKept) {
  EXPECT_EQ(physical_directory_of_rank(-1, {}), fs::canonical(fs::current_path()).string());
}

}  // namespace
}  // namespace sempi::launch
