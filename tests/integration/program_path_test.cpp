// Finding a rank's program in the ranks' PATH, and the shell's status when it cannot run.

#include "launch/program_path.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/open_dir.hpp"
#include "support/temp_dir.hpp"

namespace sempi::launch {
namespace {

namespace fs = std::filesystem;
using sempi::test::open_dir;
using sempi::test::TempDir;

void make_file(const fs::path& path, mode_t mode) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "#!/bin/sh\n";
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

// The CannotExecute find_program throws, or a failure naming what it found instead.
CannotExecute failure(const std::string& program, const std::vector<std::string>& env,
                      int working_dir = AT_FDCWD) {
  try {
    const std::string found = find_program(program, env, working_dir);
    ADD_FAILURE() << program << " was found as " << found;
  } catch (const CannotExecute& e) {
    return e;
  }
  return CannotExecute(program, 0, 0);
}

TEST(ProgramPath, TheFirstExecutableFileInThePathWins) {
  TempDir dir;
  make_file(dir.path() / "a" / "prog", 0644);    // not executable: skipped
  fs::create_directories(dir.path() / "b" / "prog");  // a directory: skipped
  make_file(dir.path() / "c" / "prog", 0755);
  make_file(dir.path() / "d" / "prog", 0755);
  const std::string path = "PATH=/etc/passwd:" + (dir.path() / "a").string() + ":" +
                           (dir.path() / "b").string() + ":" + (dir.path() / "c").string() +
                           ":" + (dir.path() / "d").string();
  EXPECT_EQ(find_program("prog", {"HOME=/", path}), (dir.path() / "c" / "prog").string());
}

TEST(ProgramPath, TheFirstPathVariableIsTheOneTheRankSees) {
  TempDir dir;
  make_file(dir.path() / "first" / "prog", 0755);
  make_file(dir.path() / "second" / "prog", 0755);
  EXPECT_EQ(find_program("prog", {"PATH=" + (dir.path() / "first").string(),
                                  "PATH=" + (dir.path() / "second").string()}),
            (dir.path() / "first" / "prog").string());
}

TEST(ProgramPath, AnEmptyEntryIsTheWorkingDirectory) {
  TempDir dir;
  make_file(dir.path() / "prog", 0755);
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  std::string found;
  EXPECT_NO_THROW(found = find_program("prog", {"PATH=/nonexistent::/also-nonexistent"}));
  fs::current_path(before);
  EXPECT_EQ(found, "./prog");
}

// `mpirun -np 4 a.out` runs ./a.out; a program of that name in the PATH comes first.
TEST(ProgramPath, NotInThePathTheWorkingDirectoryIsTried) {
  TempDir dir;
  make_file(dir.path() / "prog", 0755);
  make_file(dir.path() / "bin" / "prog", 0755);
  make_file(dir.path() / "data", 0644);
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  std::string here;
  std::string from_path;
  EXPECT_NO_THROW(here = find_program("prog", {"PATH=/nonexistent"}));
  EXPECT_NO_THROW(from_path = find_program("prog", {"PATH=" + (dir.path() / "bin").string()}));
  const auto not_a_program = failure("data", {"PATH=/nonexistent"});
  fs::current_path(before);
  EXPECT_EQ(here, "./prog");
  EXPECT_EQ(from_path, (dir.path() / "bin" / "prog").string());
  EXPECT_EQ(not_a_program.shell_status(), kExitNotExecutable);
}

// A mistyped name in a shared directory must not run another user's program: the working
// directory's file is used only if nobody else could have put or changed it there.
TEST(ProgramPath, TheWorkingDirectorysProgramMustBeOutOfOthersReach) {
  TempDir dir;
  make_file(dir.path() / "prog", 0755);
  make_file(dir.path() / "open", 0757);  // others may change it
  make_file(dir.path() / "theirs", 0755);
  ASSERT_EQ(::chown((dir.path() / "theirs").c_str(), 65534, 65534), 0);
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  const auto open = failure("open", {"PATH=/nonexistent"});
  const auto theirs = failure("theirs", {"PATH=/nonexistent"});
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);  // others may write to the directory
  const auto shared = failure("prog", {"PATH=/nonexistent"});
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);  // sticky, as /tmp: our file stays ours
  std::string sticky;
  EXPECT_NO_THROW(sticky = find_program("prog", {"PATH=/nonexistent"}));
  fs::current_path(before);
  EXPECT_EQ(sticky, "./prog");
  EXPECT_EQ(open.shell_status(), kExitNotExecutable);
  EXPECT_NE(std::string(open.what()).find("others may change it; give ./open to run it"),
            std::string::npos)
      << open.what();
  EXPECT_NE(std::string(theirs.what()).find("it belongs to uid 65534"), std::string::npos)
      << theirs.what();
  EXPECT_NE(std::string(shared.what()).find("others may write to the directory"), std::string::npos)
      << shared.what();
}

// With --wdir the rank runs elsewhere: what its exec would find from there is what counts.
TEST(ProgramPath, RelativeNamesAreLookedForInTheRanksWorkingDirectory) {
  TempDir dir;
  const fs::path wdir = dir.path() / "wdir";
  make_file(wdir / "prog", 0755);
  make_file(wdir / "bin" / "tool", 0755);
  make_file(dir.path() / "elsewhere", 0755);
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());  // where sempirun runs: none of these is found here
  const auto at = open_dir(wdir);
  std::string with_slash, in_relative_path, here;
  EXPECT_NO_THROW(with_slash = find_program("./prog", {"PATH=/nonexistent"}, at.get()));
  EXPECT_NO_THROW(in_relative_path = find_program("tool", {"PATH=bin"}, at.get()));
  EXPECT_NO_THROW(here = find_program("prog", {"PATH=/nonexistent"}, at.get()));
  const auto not_there = failure("./elsewhere", {"PATH=/nonexistent"}, at.get());
  ASSERT_EQ(::chmod(wdir.c_str(), 0777), 0);  // others may write to the rank's directory
  const auto shared = failure("prog", {"PATH=/nonexistent"}, at.get());
  fs::current_path(before);
  EXPECT_EQ(with_slash, "./prog");  // relative still: the rank execs it from its directory
  EXPECT_EQ(in_relative_path, "bin/tool");
  EXPECT_EQ(here, "./prog");
  EXPECT_EQ(not_there.shell_status(), kExitNotFound);
  EXPECT_NE(std::string(shared.what()).find("others may write to the directory"), std::string::npos)
      << shared.what();
  // An absolute name stays as it is.
  const auto root = open_dir("/");
  EXPECT_EQ(find_program((wdir / "prog").string(), {}, root.get()), (wdir / "prog").string());
}

// The directory opened is the one searched: swapped for another under its name afterwards (by
// someone who may write to its parent), the other one's program is not what is found.
TEST(ProgramPath, TheDirectoryOpenedIsSearchedWhateverIsRenamedLater) {
  TempDir dir;
  const fs::path wdir = dir.path() / "wdir";
  make_file(wdir / "own", 0755);
  const auto at = open_dir(wdir);
  fs::rename(wdir, dir.path() / "moved");
  make_file(wdir / "planted", 0755);
  EXPECT_EQ(find_program("own", {"PATH=/nonexistent"}, at.get()), "./own");
  EXPECT_EQ(failure("planted", {"PATH=/nonexistent"}, at.get()).shell_status(), kExitNotFound);
  EXPECT_EQ(failure("./planted", {}, at.get()).shell_status(), kExitNotFound);
}

TEST(ProgramPath, WithoutPathTheSystemDefaultIsSearched) {
  EXPECT_TRUE(find_program("sh", {"HOME=/"}).ends_with("/sh"));
}

TEST(ProgramPath, NothingFoundIs127AndOnlyFilesThatCannotRunAre126) {
  TempDir dir;
  const auto none = failure("prog", {"PATH=" + dir.path().string()});
  EXPECT_EQ(none.error(), ENOENT);
  EXPECT_EQ(none.shell_status(), kExitNotFound);
  EXPECT_STREQ(none.what(),
               "cannot execute prog: No such file or directory (not found in the ranks' PATH "
               "nor in the working directory)");

  fs::create_directories(dir.path() / "prog");  // a directory of that name is not a program
  EXPECT_EQ(failure("prog", {"PATH=" + dir.path().string()}).shell_status(), kExitNotFound);

  make_file(dir.path() / "bin" / "prog", 0644);
  const auto denied = failure("prog", {"PATH=" + (dir.path() / "bin").string()});
  EXPECT_EQ(denied.error(), EACCES);
  EXPECT_EQ(denied.shell_status(), kExitNotExecutable);
  EXPECT_STREQ(denied.what(), "cannot execute prog: Permission denied");
}

TEST(ProgramPath, APathWithASlashIsTakenAsItIs) {
  TempDir dir;
  make_file(dir.path() / "prog", 0755);
  EXPECT_EQ(find_program((dir.path() / "prog").string(), {"PATH=/nonexistent"}),
            (dir.path() / "prog").string());
  const auto missing = failure((dir.path() / "none").string(), {});
  EXPECT_EQ(missing.shell_status(), kExitNotFound);
  const auto directory = failure(dir.path().string(), {});
  EXPECT_EQ(directory.error(), EISDIR);
  EXPECT_EQ(directory.shell_status(), kExitNotExecutable);
  const auto through_a_file = failure("/etc/passwd/prog", {});
  EXPECT_EQ(through_a_file.error(), ENOTDIR);
  EXPECT_EQ(through_a_file.shell_status(), kExitNotExecutable);
  EXPECT_EQ(failure("", {}).shell_status(), kExitNotFound);
}

}  // namespace
}  // namespace sempi::launch
