#pragma once
// Reading and writing PEM files with least privilege: secret files 0600, directories 0700.

#include <filesystem>
#include <string>
#include <string_view>

namespace sempi::pki {

/// Creates `dir` (and parents) with mode 0700 if missing. Throws sempi::Error(config) if it
/// exists and is not a directory, is a symbolic link, belongs to another user, or is writable
/// by group or others; or if a directory above it could be changed by another user (it
/// belongs to one, or others may write into it and it is not sticky like /tmp), since they
/// could then replace `dir`. Returns the resolved absolute path, which callers should use.
std::filesystem::path make_private_dir(const std::filesystem::path& dir);

/// What write_file does when `path` exists: replaces it, or refuses (sempi::Error(config)),
/// atomically: of two writers racing for one path, exactly one succeeds.
enum class Existing { replace, refuse };

/// Writes `content` atomically (temp file, then rename, or link for Existing::refuse) with the
/// given mode (0600 for keys, 0644 for certificates). The file is created with the final mode;
/// it is never world-readable in between. Throws sempi::Error(io).
void write_file(const std::filesystem::path& path, std::string_view content, unsigned mode,
                Existing existing = Existing::replace);

/// Creates `path`, which must not exist (nor be a symbolic link), with the given mode, and
/// writes and syncs `content`. Throws sempi::Error(io); a partly written file is removed.
void write_new_file(const std::filesystem::path& path, std::string_view content, unsigned mode);

/// Reads a whole file (at most 1 MiB). Throws sempi::Error(config) naming the path.
std::string read_file(const std::filesystem::path& path);

}  // namespace sempi::pki
