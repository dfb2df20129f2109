#include "policy/policy_document.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <system_error>
#include <vector>

#include <openssl/evp.h>

#include "common/printable.hpp"
#include "sempi/error.hpp"

namespace sempi::policy {
namespace {

// The documented default (config/README.md): every rank may talk to every rank, every operation
// on every communicator, no size limit, no message audit. config/examples/allow-all.json holds
// the same document, comment included, so that its digest is the default's (policy_test).
constexpr const char* kDefaultPolicy = R"({
  "version": 1,
  "comment": "The built-in default (what sempirun uses without --policy): every rank, every operation, every communicator.",
  "mode": "enforce",
  "on_violation": "drop",
  "groups": { "all": "*" },
  "segmentation": [ { "between": ["all", "all"] } ],
  "communicators": [
    { "name": "*", "members": "*", "collectives": "*", "p2p_tags": "*" }
  ],
  "limits": {},
  "audit": { "messages": "off" }
})";

// "/a/b" for the keys leading to the current object ("/" at the top).
// For messages: a line feed in a key is shown as a symbol (one_line), so that it cannot start a
// line of its own in an error printed through printable_lines().
std::string pointer_of(const std::vector<std::string>& keys) {
  std::string path;
  for (const auto& key : keys) path += "/" + one_line(escape_pointer(key));
  return path.empty() ? "/" : path;
}

PolicyDocument from_json(nlohmann::json json, bool is_default, const std::string& origin) {
  PolicyDocument doc;
  doc.canonical = json.dump();
  if (doc.canonical.size() > kMaxPolicyBytes) {
    throw Error(ErrorClass::config, origin + ": the policy is " +
                                        std::to_string(doc.canonical.size()) +
                                        " bytes in canonical form, more than the " +
                                        std::to_string(kMaxPolicyBytes) + " a job can carry");
  }
  doc.json = std::move(json);
  doc.is_default = is_default;
  unsigned int len = 0;
  if (EVP_Digest(doc.canonical.data(), doc.canonical.size(), doc.digest.data(), &len,
                 EVP_sha256(), nullptr) != 1 ||
      len != doc.digest.size()) {
    throw Error(ErrorClass::intern, "SHA-256 of the policy failed");
  }
  return doc;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

}  // namespace

std::string escape_pointer(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string read_policy_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before fstat could refuse it.
  // O_NOCTTY: a terminal named as the file must not become the controlling terminal.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;  // saved before building the message
    throw Error(ErrorClass::config, "cannot read policy file " + name + ": " + errno_text(err));
  }
  struct Closer {
    int handle;
    ~Closer() { ::close(handle); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw Error(ErrorClass::config, "cannot read policy file " + name + ": " + errno_text(err));
  }
  if (S_ISDIR(st.st_mode)) {
    throw Error(ErrorClass::config, "policy file " + name + " is a directory");
  }
  // A pipe (--policy <(generate) or /dev/stdin) or a character device is read like a file, the
  // read bounded below (/dev/zero ends there); a pipe with no writer reads as empty.
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
    throw Error(ErrorClass::config,
                "policy file " + name + " is not a file, a pipe or a character device");
  }
  if (!S_ISREG(st.st_mode)) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // st_size is only a hint (0 for /proc files, and the file may grow): read until the end, but
  // never more than one byte past the limit, which is enough for parse_policy_json to refuse it.
  std::string text(kMaxPolicyFileBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      throw Error(ErrorClass::config, "error reading policy file " + name + ": " + errno_text(err));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

nlohmann::json parse_policy_json(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxPolicyFileBytes) {
    // No byte count: read_policy_file stops one byte past the limit.
    throw Error(ErrorClass::config, origin + ": longer than " +
                                        std::to_string(kMaxPolicyFileBytes) +
                                        " bytes, more than a policy may have");
  }
  // One frame per open object or array: the keys seen in an object, the next index in an
  // array. `path` names the open containers, for messages.
  struct Frame {
    bool is_array = false;
    std::size_t index = 0;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::vector<std::string> path;
  std::string last_key;
  const auto check = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (frames.size() >= kMaxPolicyDepth) {
          throw Error(ErrorClass::config, origin + ": " + pointer_of(path) +
                                              ": nested more than " +
                                              std::to_string(kMaxPolicyDepth) + " deep");
        }
        if (!frames.empty()) {
          path.push_back(frames.back().is_array ? std::to_string(frames.back().index)
                                                : last_key);
        }
        frames.push_back({event == Event::array_start, 0, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        frames.pop_back();
        if (!path.empty()) path.pop_back();
        if (!frames.empty() && frames.back().is_array) ++frames.back().index;
        break;
      case Event::key:
        last_key = parsed.get<std::string>();
        if (!frames.back().keys.insert(last_key).second) {
          throw Error(ErrorClass::config, origin + ": " + pointer_of(path) + ": key \"" +
                                              one_line(last_key) + "\" appears twice");
        }
        break;
      case Event::value:
        if (!frames.empty() && frames.back().is_array) ++frames.back().index;
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, but also out_of_range for a number no double holds (1e400).
    throw Error(ErrorClass::config, origin + ": invalid JSON: " + e.what());
  }
}

PolicyDocument PolicyDocument::default_policy() {
  return from_json(nlohmann::json::parse(kDefaultPolicy), true, "the default policy");
}

PolicyDocument PolicyDocument::parse(const std::string& text, const std::string& origin) {
  auto json = parse_policy_json(text, origin);
  if (!json.is_object()) {
    throw Error(ErrorClass::config, origin + ": a policy must be a JSON object");
  }
  return from_json(std::move(json), false, origin);
}

PolicyDocument PolicyDocument::load(const std::filesystem::path& path) {
  return parse(read_policy_file(path), path.string());
}

}  // namespace sempi::policy
