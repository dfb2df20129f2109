#include "pki/pem_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <openssl/crypto.h>

#include "common/hex.hpp"
#include "pki/job_id.hpp"
#include "sempi/error.hpp"

namespace sempi::pki {

namespace {

constexpr std::size_t kMaxFileSize = 1u << 20;

std::string errno_text(int err) { return std::generic_category().message(err); }

// Closes a descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  int reset() noexcept {
    const int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

void make_one_dir(const std::filesystem::path& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    // mkdir applies the umask, which can only remove bits; chmod makes the mode exactly 0700.
    if (::chmod(dir.c_str(), 0700) != 0) {
      throw Error(ErrorClass::config,
                  "cannot set mode 0700 on " + dir.string() + ": " + errno_text(errno));
    }
    return;
  }
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return;  // existing directories are left as they are
    throw Error(ErrorClass::config, dir.string() + " exists and is not a directory");
  }
  throw Error(ErrorClass::config,
              "cannot create directory " + dir.string() + ": " + errno_text(err));
}

// Root, or the user running this: the owners a path may pass through.
bool root_or_us(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// Whoever may rename entries of a directory on the way to `dir` can swap `dir` itself (or a
// directory above it) for one of their own, after we checked it. A directory on the way is
// safe if it belongs to root or to us and nobody else may write into it, or if it is sticky
// (like /tmp): there only an entry's owner may rename it, and its entries on our path are
// checked in turn.
void check_ancestors(const std::filesystem::path& dir, const std::filesystem::path& real) {
  for (std::filesystem::path p = real.parent_path();; p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      throw Error(ErrorClass::config, "cannot inspect " + p.string() + ": " + errno_text(errno));
    }
    if (!root_or_us(st.st_uid)) {
      throw Error(ErrorClass::config, p.string() + " belongs to another user (uid " +
                                          std::to_string(st.st_uid) + "), who could replace " +
                                          dir.string() + "; choose a directory of your own");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      throw Error(ErrorClass::config, p.string() + " is writable by others, who could replace " +
                                          dir.string() + "; choose a directory of your own");
    }
    if (p == p.root_path()) return;
  }
}

// A symbolic link on the path as given is used only if no other user can replace it (a link
// is re-pointed by replacing it): its directory must belong to root or us and be writable by
// nobody else, or be sticky, like /tmp, with the link root's or ours (there only a link's
// owner may replace it). Otherwise another user's link (planted in /tmp, say) could later lead
// to another of our directories, whose files --force would replace; check_ancestors only sees
// where the links lead now.
void check_links_on_the_way(const std::filesystem::path& given) {
  std::filesystem::path p;
  for (const auto& part : given) {
    p /= part;
    if (part == p.root_path()) continue;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return;  // to be created: nothing below it exists yet
      throw Error(ErrorClass::config, "cannot inspect " + p.string() + ": " + errno_text(errno));
    }
    if (!S_ISLNK(st.st_mode)) continue;
    struct stat parent {};
    if (::stat(p.parent_path().c_str(), &parent) != 0) {
      throw Error(ErrorClass::config,
                  "cannot inspect " + p.parent_path().string() + ": " + errno_text(errno));
    }
    const bool others_write = (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    const bool sticky = (parent.st_mode & S_ISVTX) != 0;
    if (!root_or_us(parent.st_uid) || (others_write && !(sticky && root_or_us(st.st_uid)))) {
      throw Error(ErrorClass::config,
                  p.string() + " is a symbolic link that another user could replace (uid " +
                      std::to_string(st.st_uid) + " owns it, in " + p.parent_path().string() +
                      "); give the real directory");
    }
  }
}

}  // namespace

std::filesystem::path make_private_dir(const std::filesystem::path& given_dir) {
  if (given_dir.empty()) throw Error(ErrorClass::config, "empty directory name");
  // Without a trailing separator: lstat("link/") would follow the link.
  std::filesystem::path dir = given_dir.lexically_normal();
  if (!dir.has_filename() && dir.has_parent_path() && dir != dir.root_path()) {
    dir = dir.parent_path();
  }
  std::error_code absolute_error;
  check_links_on_the_way(std::filesystem::absolute(dir, absolute_error));
  // Create missing ancestors first, each 0700 like the leaf.
  std::filesystem::path partial;
  for (const auto& part : dir.lexically_normal()) {
    if (part.empty()) continue;
    partial /= part;
    if (part == "/" || part == "." || part == "..") continue;
    make_one_dir(partial);
  }
  // An existing directory is only used if nobody else can replace what we write into it.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    throw Error(ErrorClass::config, "cannot inspect " + dir.string() + ": " + errno_text(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    throw Error(ErrorClass::config, dir.string() + " is a symbolic link; give the real directory");
  }
  if (st.st_uid != ::geteuid()) {
    throw Error(ErrorClass::config, dir.string() + " belongs to another user (uid " +
                                        std::to_string(st.st_uid) + ")");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error(ErrorClass::config, dir.string() +
                                        " is writable by others, who could replace its files"
                                        " (chmod 700 it, or give a new directory)");
  }
  // From here on callers use the resolved path, so a symbolic link on the way that changes
  // later cannot redirect what they write.
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(dir, ec);
  struct stat real_st {};
  if (ec || ::stat(real.c_str(), &real_st) != 0 || real_st.st_dev != st.st_dev ||
      real_st.st_ino != st.st_ino) {
    throw Error(ErrorClass::config, dir.string() + " changed while it was being checked");
  }
  check_ancestors(dir, real);
  return real;
}

void write_new_file(const std::filesystem::path& path, std::string_view content, unsigned mode) {
  if ((mode & ~0777u) != 0) {
    throw Error(ErrorClass::arg, "write_new_file: mode must be permission bits only");
  }
  Fd fd{::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
               static_cast<mode_t>(mode))};
  if (fd.get() < 0) {
    const int err = errno;
    throw Error(ErrorClass::io, "cannot create " + path.string() + ": " + errno_text(err) +
                                    (err == EEXIST ? " (give a new file)" : ""));
  }
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(path.c_str());
    throw Error(ErrorClass::io, what + " " + path.string() + ": " + errno_text(err));
  };
  // The umask may have removed bits; never adds any beyond `mode`.
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) fail("cannot set the mode of", errno);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("cannot sync", errno);
  if (fd.reset() != 0) fail("cannot close", errno);
}

void write_file(const std::filesystem::path& path, std::string_view content, unsigned mode,
                Existing existing) {
  if ((mode & ~0777u) != 0) {
    throw Error(ErrorClass::arg, "write_file: mode must be permission bits only");
  }
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  // Same directory, so rename() is atomic; a random suffix and O_EXCL defeat pre-planted files.
  const std::filesystem::path tmp =
      dir / ("." + path.filename().string() + ".tmp-" + JobId::random().hex().substr(0, 16));
  write_new_file(tmp, content, mode);  // created with the final mode, removed if it fails
  if (existing == Existing::refuse) {
    // Fails if the name exists, where rename() would replace it. Filesystems without
    // RENAME_NOREPLACE get link(), which fails the same way; the temp file then goes.
    int placed = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    int err = errno;
    const bool linked = placed != 0 && (err == EINVAL || err == ENOSYS);
    if (linked) {
      placed = ::link(tmp.c_str(), path.c_str());
      err = errno;
    }
    if (placed != 0 || linked) (void)::unlink(tmp.c_str());  // a leftover copy is harmless
    if (placed == 0) return;
    if (err == EEXIST) throw Error(ErrorClass::config, path.string() + " already exists");
    throw Error(ErrorClass::io,
                "cannot place " + tmp.string() + " at " + path.string() + ": " + errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(ErrorClass::io,
                "cannot rename " + tmp.string() + " to " + path.string() + ": " + errno_text(err));
  }
}

std::string read_file(const std::filesystem::path& path) {
  const auto fail = [&](const std::string& what, int err) {
    throw Error(ErrorClass::config, "cannot read " + path.string() + ": " + what +
                                        (err != 0 ? errno_text(err) : std::string()));
  };
  // O_NONBLOCK: a FIFO must not hang the open; S_ISREG below refuses it.
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.get() < 0) fail("", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("", errno);
  if (!S_ISREG(st.st_mode)) fail("not a regular file", 0);
  if (static_cast<std::uintmax_t>(st.st_size) > kMaxFileSize) {
    fail("larger than the 1 MiB limit", 0);
  }
  // The file may hold a key: read straight into a string sized once (one byte more, to see
  // the end), so no reallocation leaves copies behind, and wipe whatever is dropped.
  std::string out(static_cast<std::size_t>(st.st_size) + 1, '\0');
  std::size_t got = 0;
  for (;;) {
    if (got == out.size()) {  // the file grew after fstat
      std::string larger(std::min(kMaxFileSize + 1, 2 * out.size() + 4096), '\0');
      std::memcpy(larger.data(), out.data(), got);
      OPENSSL_cleanse(out.data(), out.size());
      out.swap(larger);
    }
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || got + static_cast<std::size_t>(n) > kMaxFileSize) {
      const int err = n < 0 ? errno : 0;
      OPENSSL_cleanse(out.data(), out.size());
      fail(n < 0 ? "" : "larger than the 1 MiB limit", err);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);  // shrinks in place
  return out;
}

}  // namespace sempi::pki
