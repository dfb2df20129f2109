#include "launch/program_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace sempi::launch {
namespace {

std::string default_path() {
  const std::size_t n = ::confstr(_CS_PATH, nullptr, 0);
  if (n == 0) return "/bin:/usr/bin";
  std::string path(n, '\0');
  ::confstr(_CS_PATH, path.data(), n);
  path.resize(n - 1);
  return path;
}

// The first PATH= entry: the one getenv() in the rank will see.
std::string path_of(const std::vector<std::string>& env) {
  for (const auto& entry : env) {
    if (entry.starts_with("PATH=")) return entry.substr(5);
  }
  return default_path();
}

// 0 if `file` (relative to the directory `at`) can be executed, else the errno exec would give
// (EISDIR for a directory). `exists`: stat found something there.
int executable(int at, const std::string& file, bool& exists) {
  struct stat st {};
  exists = ::fstatat(at, file.c_str(), &st, 0) == 0;
  if (!exists) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;  // exec refuses devices, FIFOs, sockets
  return ::faccessat(at, file.c_str(), X_OK, 0) == 0 ? 0 : errno;
}

// Why `file`, directly in the directory `at`, could have been put there or changed by another
// user, or nullopt if it could not: it and its directory must belong to root or to us, and
// neither may be writable by others (a sticky directory, like /tmp, keeps others' hands off
// our file).
std::optional<std::string> placed_by_others(int at, const std::string& file) {
  struct stat f {};
  struct stat dir {};
  if (::fstatat(at, file.c_str(), &f, 0) != 0 || ::fstatat(at, ".", &dir, 0) != 0) {
    return std::string("it cannot be inspected: ") + std::strerror(errno);
  }
  const auto ours = [](uid_t uid) { return uid == 0 || uid == ::geteuid(); };
  if (!ours(f.st_uid)) return "it belongs to uid " + std::to_string(f.st_uid);
  if ((f.st_mode & (S_IWGRP | S_IWOTH)) != 0) return std::string("others may change it");
  if (!ours(dir.st_uid)) return "the directory belongs to uid " + std::to_string(dir.st_uid);
  if ((dir.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (dir.st_mode & S_ISVTX) == 0) {
    return std::string("others may write to the directory");
  }
  return std::nullopt;
}

}  // namespace

CannotExecute::CannotExecute(const std::string& program, int error, int shell_status,
                             const std::string& hint)
    : Error(ErrorClass::config, "cannot execute " + program + ": " + std::strerror(error) + hint),
      error_(error),
      shell_status_(shell_status) {}

namespace {

[[noreturn]] void cannot_find(const std::string& program, int error, const std::string& hint = {}) {
  throw CannotExecute(program, error, error == ENOENT ? kExitNotFound : kExitNotExecutable, hint);
}

}  // namespace

std::string find_program(const std::string& program, const std::vector<std::string>& env,
                         int working_dir) {
  if (program.empty()) cannot_find("''", ENOENT);
  // A relative name is checked where the rank's exec, made in the directory it runs in, would
  // look for it (the *at calls resolve it from `working_dir`), and returned as it is, for that
  // exec (its argv[0] as mpirun's ranks see it).
  bool exists = false;
  if (program.find('/') != std::string::npos) {
    if (const int error = executable(working_dir, program, exists); error != 0) {
      cannot_find(program, error);
    }
    return program;
  }
  int found_but = ENOENT;
  const std::string path = path_of(env);
  for (std::size_t start = 0;;) {
    const std::size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + program;
    const int error = executable(working_dir, candidate, exists);
    if (error == 0) return candidate;
    // Only a file that is there but cannot be run counts, as for a shell: what cannot be
    // looked at (a directory of PATH that cannot be searched) and directories are skipped.
    if (exists && error != EISDIR) found_but = error;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  // Then the working directory, as mpirun does (`mpirun -np 4 a.out`): last, so that a file
  // where the job starts never shadows a program of the PATH, and only a file no other user
  // could have planted (a mistyped name in a shared directory must not run their program).
  if (found_but == ENOENT) {
    const std::string here = "./" + program;
    const int error = executable(working_dir, here, exists);
    if (error == 0) {
      if (const auto why = placed_by_others(working_dir, here)) {
        cannot_find(program, EACCES,
                    " (found only as " + here + ", which another user could have put there: " +
                        *why + "; give " + here + " to run it)");
      }
      return here;
    }
    if (exists && error != EISDIR) found_but = error;
  }
  cannot_find(program, found_but,
              found_but == ENOENT ? " (not found in the ranks' PATH nor in the working directory)"
                                  : std::string());
}

}  // namespace sempi::launch
