#pragma once
// Finding the program a rank runs, as a shell would, before the launcher forks: in the PATH of
// the rank's own environment (so `sempirun -x PATH=...` decides, as with Open MPI), then in the
// working directory (as mpirun), and with a shell's exit status when it cannot be run.

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <vector>

#include "sempi/error.hpp"

namespace sempi::launch {

/// PROGRAM cannot be started. error() is the errno; shell_status() what a shell returns for it:
/// 127 if there is no such program, 126 if there is one that cannot be executed.
class CannotExecute : public Error {
 public:
  CannotExecute(const std::string& program, int error, int shell_status,
                const std::string& hint = {});
  [[nodiscard]] int error() const noexcept { return error_; }
  [[nodiscard]] int shell_status() const noexcept { return shell_status_; }

 private:
  int error_;
  int shell_status_;
};

inline constexpr int kExitNotFound = 127;       ///< no such program (as a shell)
inline constexpr int kExitNotExecutable = 126;  ///< found, but exec failed (as a shell)

/// The file `program` names: itself if it contains a slash, else the first executable regular
/// file of that name in the PATH of `env` ("NAME=VALUE" entries, the first PATH; without one,
/// the system's default, as execvp uses). An empty PATH entry is the working directory; not
/// found in the PATH, it is looked for there too, as mpirun does ("./PROGRAM"), but used only
/// if no other user could have put or changed it there (EACCES otherwise).
/// Directories and what cannot be looked at are skipped. Throws CannotExecute: ENOENT if
/// nothing of that name is found, EACCES if only files that cannot be executed are; for a path
/// with a slash, the errno of what is wrong with it (EISDIR for a directory). Unlike execvp,
/// the file is chosen once: an exec that fails where access() said it could run (a security
/// module's denial) does not move on to the next PATH entry.
/// `working_dir` is a descriptor of the directory the rank will run in and exec from (an O_PATH
/// one will do; AT_FDCWD: this process's): relative names (the program's, PATH entries,
/// "./PROGRAM") are looked for there, and come back relative, for that exec.
std::string find_program(const std::string& program, const std::vector<std::string>& env,
                         int working_dir = AT_FDCWD);

}  // namespace sempi::launch
