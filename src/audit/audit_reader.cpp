#include "audit/audit_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>

#include "audit/seal.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "sempi/error.hpp"

namespace sempi::audit {
namespace fs = std::filesystem;

namespace {

std::string hash_hex(const std::string& line) { return to_hex(sha256(line)); }

// True if `line` is exactly how sempi writes the record it parses to (its fields in that order,
// no spaces, \u escapes for everything not printable ASCII): the only way to be sure that
// every JSON reader sees what verify checked. Otherwise a key given twice (nlohmann keeps the
// last, other parsers the first) or bytes after a NUL (which ends nlohmann's parse) could show
// one reader what another never sees, in bytes the chain vouches for.
bool canonical(const std::string& line) {
  try {
    return nlohmann::ordered_json::parse(line).dump(
               -1, ' ', true, nlohmann::ordered_json::error_handler_t::strict) == line;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// A value from a log quoted in a finding: its start only. A hostile log's values can be
// megabytes long, and a finding per record (up to kMaxFindingsPerFile a file) must not copy
// them whole.
std::string excerpt(const std::string& value) {
  constexpr std::size_t kMax = 80;
  return value.size() <= kMax ? value : value.substr(0, kMax) + "...";
}

// Anything under the name counts as there, and so does what cannot be looked at (a directory
// that may be listed but not searched): a FIFO, a directory or a link in a log's place is then
// reported unreadable when it is opened (open_regular_file), not as a deleted log.
LogFile log_file(const fs::path& path, const std::string& name) {
  struct stat st {};
  const bool absent = ::lstat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
  return {name, path, !absent};
}

bool looks_like_rank_log(const std::string& name) {
  return name.starts_with("rank-") && name.ends_with(".jsonl");
}

// Only the exact name a rank writes counts: "rank-01.jsonl" must not stand in for
// "rank-1.jsonl", or a copy could replace the genuine log in what is verified.
std::optional<int> rank_of_file_name(const std::string& name) {
  if (!looks_like_rank_log(name)) return std::nullopt;
  const std::string digits = name.substr(5, name.size() - 5 - 6);
  if (digits.empty() || digits.size() > 8 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int rank = std::stoi(digits);
  if (rank_file_name(rank) != name) return std::nullopt;
  return rank;
}

// The value as a T; nullopt if it is missing or of another type. An integer must be a JSON
// integer within T's range: nlohmann's get<T>() would cast a float (1e300: undefined
// behaviour), wrap a large one and read true as 1.
template <class T>
std::optional<T> get(const nlohmann::json* j) {
  if (j == nullptr) return std::nullopt;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (j->is_number_unsigned()) {
      const auto value = j->get<std::uint64_t>();
      if (std::in_range<T>(value)) return static_cast<T>(value);
    } else if (j->is_number_integer()) {
      const auto value = j->get<std::int64_t>();
      if (std::in_range<T>(value)) return static_cast<T>(value);
    }
    return std::nullopt;
  } else {
    try {
      return j->get<T>();
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }
}

// A member of `object`; null if it is missing or `object` is not an object. Lookups in
// untrusted records go through this: operator[] on a const object must not meet a missing key.
const nlohmann::json* member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string str_field(const Record& r, const char* key) {
  return get<std::string>(r.sempi(key)).value_or("");
}

// A number in the record's "sempi" object, as a T: `fallback` if it is missing or no integer
// within T's range (see get).
template <class T = std::int64_t>
T int_field(const Record& r, const char* key, T fallback = -1) {
  return get<T>(r.sempi(key)).value_or(fallback);
}

// A string member of `object`; "" when missing, or when either has another type (an edited
// record must still be reported, not end the report).
std::string string_member(const nlohmann::json& object, const char* key) {
  return get<std::string>(member(object, key)).value_or("");
}

// A string of the record's "event" object, as string_member.
std::string event_field(const Record& r, const char* key) {
  const auto e = r.json.find("event");
  return e == r.json.end() ? "" : string_member(*e, key);
}

// True unless the text, read as JSON, nests arrays and objects deeper than max_depth. Checked
// before parsing: a parsed tree of deep nesting costs ~40 times the line's bytes.
bool nesting_within(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

struct ChainCheck {
  ChainHead last;                            // of the records as they are
  std::string hash_before_last = kZeroHash;  // of the record before the last one
  std::int64_t max_seq = -1;                 // the highest sequence number of a readable record
  std::size_t records = 0;                   // also the last record's line
  // The line of a last line without a newline, 0 if none. Not a record: what a writer killed
  // in the middle of a write leaves (the launcher seals the records before it), or tampering.
  // verify decides which.
  std::size_t cut_off_line = 0;
  std::uint64_t cut_off_bytes = 0;  // and its length and SHA-256, which the seal may cover
  std::string cut_off_hash;
  std::size_t unlisted = 0;  // problems past kMaxFindingsPerFile, counted in an "omitted" finding
};

// Walks one file's chain and reports each broken place once, in line order: the first
// kMaxFindingsPerFile of them, then how many more there are. One pass over the file; what is
// kept per record is its sequence number, only if it has one: a hostile file of empty or
// broken lines costs no memory per line. `observe` sees each whole record after it is
// checked (and may take it over), so that a caller needs no second read, which a writer could
// race; `job` may be the variable it sets from the first record.
ChainCheck check_chain(const LogFile& file, const std::string& job, std::optional<int> rank,
                       std::vector<Finding>& out,
                       const std::function<void(Record&)>& observe = {}) {
  ChainCheck result;
  const std::size_t first_finding = out.size();
  // The finding's index in `out`; nullopt past the limit, where it is only counted.
  auto add = [&](std::size_t line, const char* kind,
                 std::string message) -> std::optional<std::size_t> {
    if (out.size() - first_finding >= kMaxFindingsPerFile) {
      ++result.unlisted;
      return std::nullopt;
    }
    out.push_back({file.name, line, kind, std::move(message)});
    return out.size() - 1;
  };
  struct Link {
    std::int64_t seq = -1;
    bool parsed = false;   // a JSON object with a valid event.sequence
    bool link_ok = true;   // its prev matches the hash of the record before (zeros for the first)
    bool seq_ok = true;    // its sequence number is the one expected there
  };
  // A record whose sequence number is not the one expected: whether the numbers it skips were
  // deleted or come later is known once the whole file is read.
  struct Misplaced {
    std::size_t finding = 0;  // its index in `out`
    std::int64_t seq = 0;
    std::int64_t expected = 0;
  };
  std::vector<Misplaced> misplaced;  // of listed findings only
  std::vector<std::int64_t> seqs;    // of the readable records (sorted and made distinct below)
  const auto after = [](std::int64_t seq) {  // seq + 1, where a forged seq may be the largest
    return seq < std::numeric_limits<std::int64_t>::max() ? seq + 1 : seq;
  };

  // A changed record breaks the link to its successor; a changed "prev" breaks its own link
  // too. Two broken links in a row: the record between them was edited; one alone: the record
  // before it was edited. Sequence problems are reported apart. Checked for the record at
  // `line` once the record after it (`next`, null at the end of the file) is read.
  const auto check_link = [&](std::size_t line, const Link& link, const Link* previous,
                              Link* next) {
    if (link.link_ok || !link.seq_ok || !link.parsed) return;
    if (previous != nullptr && (!previous->parsed || !previous->seq_ok)) return;  // explained
    if (next != nullptr && !next->link_ok && next->seq_ok) {
      add(line, "edited", "record seq " + std::to_string(link.seq) +
                              " was modified (its chain links do not match)");
      next->link_ok = true;  // explained
    } else if (previous != nullptr) {
      add(line - 1, "edited",
          "record seq " + std::to_string(previous->seq) +
              " was modified (its hash does not match the next record's prev)");
    } else {
      add(1, "edited", "the first record's prev is not zero (modified)");
    }
  };

  // result.records counts the records read so far.
  Link before;   // the record before `pending` (if result.records > 1)
  Link pending;  // the record read last (if result.records > 0), its link not checked yet
  std::int64_t expected = 0;          // the sequence number the next record should have
  std::string prev_hash = kZeroHash;  // of the record before the one read
  // A file that cannot be read to its end is one finding (the caller's), not half a list.
  const auto drop_partial_findings = [&] { out.resize(first_finding); };
  try {
    for_each_record(file, [&](Record& r) {
      if (r.cut_off) {  // the last line: left out of the chain, as the launcher's seal leaves it
        result.cut_off_line = r.line;
        result.cut_off_bytes = r.text.size();
        result.cut_off_hash = hash_hex(r.text);
        return true;
      }
      const std::int64_t seq = r.seq();
      Link link{seq, r.parsed() && seq >= 0, false, false};
      if (link.parsed) {
        link.link_ok = str_field(r, "prev") == prev_hash;
        link.seq_ok = seq == expected;
        seqs.push_back(seq);
      }
      const std::int64_t expected_here = expected;
      expected = link.parsed && !link.seq_ok ? std::max(expected, after(seq)) : after(expected);
      if (result.records > 0) {
        check_link(result.records, pending, result.records > 1 ? &before : nullptr, &link);
      }

      if (!r.parsed()) {
        add(r.line, "corrupt",
            r.oversized ? "a line over " + std::to_string(kMaxRecordBytes >> 20) +
                              " MiB, not a record; the rest of the file was not read"
                        : std::string("not a JSON record"));
      } else if (!link.parsed) {
        add(r.line, "corrupt", "a JSON object without a valid event.sequence: not a sempi record");
      } else if (!canonical(r.text)) {
        add(r.line, "corrupt",
            "not in the form sempi writes (keys twice, bytes after the record, other spacing or "
            "escapes): readers could disagree about what it says");
      } else {
        if (str_field(r, "job") != job && !job.empty()) {
          add(r.line, "foreign",
              "record of job '" + excerpt(str_field(r, "job")) + "', not " + excerpt(job));
        }
        if (rank && (str_field(r, "source") != "rank" || int_field(r, "rank") != *rank)) {
          add(r.line, "foreign", "record does not belong to rank " + std::to_string(*rank));
        }
        if (!rank && str_field(r, "source") != "launcher") {
          add(r.line, "foreign", "record does not come from the launcher");
        }
        if (!link.seq_ok) {
          if (const auto finding = add(r.line, "reordered", {})) {
            misplaced.push_back({*finding, seq, expected_here});
          }
        }
      }
      result.hash_before_last.swap(prev_hash);
      prev_hash = hash_hex(r.text);
      result.last = {link.parsed ? seq : -1, prev_hash};
      result.records = r.line;
      before = pending;
      pending = link;
      if (observe) observe(r);
      return true;
    });
  } catch (const Error&) {
    drop_partial_findings();
    throw;
  }
  if (result.records > 0) {
    check_link(result.records, pending, result.records > 1 ? &before : nullptr, nullptr);
  }

  // The misplaced records, now that all sequence numbers are known: a gap is a deletion if
  // the numbers it skips are nowhere in the file, a reordering if they come later.
  // Sorted and made distinct in place; the numbers that occurred more than once (only in a
  // tampered log) are kept apart, sorted too.
  std::sort(seqs.begin(), seqs.end());
  result.max_seq = seqs.empty() ? -1 : seqs.back();
  std::vector<std::int64_t> duplicated;
  for (std::size_t i = 1; i < seqs.size(); ++i) {
    if (seqs[i] == seqs[i - 1] && (duplicated.empty() || duplicated.back() != seqs[i])) {
      duplicated.push_back(seqs[i]);
    }
  }
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  // Are all of from..to-1 present? Counted, not walked: a forged sequence number may be huge.
  const auto all_present = [&](std::int64_t from, std::int64_t to) {
    const auto n = std::lower_bound(seqs.begin(), seqs.end(), to) -
                   std::lower_bound(seqs.begin(), seqs.end(), from);
    return n == to - from;
  };
  for (const Misplaced& m : misplaced) {
    Finding& finding = out[m.finding];
    if (m.seq > m.expected && !all_present(m.expected, m.seq)) {
      finding.kind = "deleted";
      finding.message =
          m.seq == m.expected + 1
              ? "record seq " + std::to_string(m.expected) + " is missing (deleted)"
              : "records seq " + std::to_string(m.expected) + ".." + std::to_string(m.seq - 1) +
                    " are missing (deleted)";
    } else if (m.seq > m.expected) {
      finding.message = "record seq " + std::to_string(m.seq) + " where seq " +
                        std::to_string(m.expected) + " belongs (records were reordered)";
    } else {
      finding.message =
          "record seq " + std::to_string(m.seq) + " after seq " + std::to_string(m.expected - 1) +
          (std::binary_search(duplicated.begin(), duplicated.end(), m.seq)
               ? " (a duplicated record)"
               : " (records were reordered)");
    }
  }
  std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first_finding), out.end(),
                   [](const Finding& a, const Finding& b) { return a.line < b.line; });
  if (result.unlisted > 0) {
    out.push_back({file.name, 0, "omitted",
                   std::to_string(result.unlisted) + " more problems in " + file.name +
                       " not listed (only the first " + std::to_string(kMaxFindingsPerFile) +
                       " are)"});
  }
  return result;
}

// `write_error`: what the rank reported when its file could not take its whole chain.
void compare_head(const LogFile& file, const ChainCheck& chain, std::int64_t seq,
                  const std::string& hash, const std::string& write_error,
                  std::vector<Finding>& out) {
  if (chain.last.seq == seq && chain.last.hash == hash) return;
  if (chain.max_seq < seq && !write_error.empty()) {
    // Lost, not removed: the rank said so in the head it reported. (Records removed from the
    // end of such a log read the same: only the rank's word separates the two.)
    out.push_back({file.name, 0, "unwritten",
                   "ends at seq " + std::to_string(chain.max_seq) + " but the seal records seq " +
                       std::to_string(seq) + ": the rank reported that writing its log failed (" +
                       excerpt(write_error) + "), so the records after seq " +
                       std::to_string(chain.max_seq) + " were never written"});
  } else if (chain.max_seq < seq) {
    out.push_back({file.name, 0, "truncated",
                   "ends at seq " + std::to_string(chain.max_seq) + " but the seal records seq " +
                       std::to_string(seq) + " (records at the end were removed)"});
  } else if (chain.last.seq > seq) {
    out.push_back({file.name, 0, "appended",
                   "records after the sealed head seq " + std::to_string(seq) +
                       " (added after the seal)"});
  } else {
    out.push_back({file.name, chain.records, "edited",
                   "the last record (seq " + std::to_string(seq) +
                       ") does not match the sealed hash (modified)"});
  }
}

// Opened without blocking and checked on the descriptor: a log replaced by a FIFO or a terminal
// after the directory was listed fails here instead of blocking the reader for ever.
std::unique_ptr<std::FILE, int (*)(std::FILE*)> open_regular_file(const fs::path& path) {
  // Nor followed through a symbolic link: a log is a file sempi wrote, and twenty links to one
  // large file would cost twenty reads of it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    throw Error(ErrorClass::io, "cannot read " + path.string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  std::FILE* in = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? ::fdopen(fd, "rb") : nullptr;
  if (in == nullptr) {
    ::close(fd);
    throw Error(ErrorClass::io, "cannot read " + path.string() + ": not a regular file");
  }
  return {in, &std::fclose};
}

}  // namespace

void for_each_record(const LogFile& file, const std::function<bool(Record&)>& visit,
                     std::size_t max_line_bytes) {
  if (!file.exists) return;
  const auto in = open_regular_file(file.path);
  std::vector<char> chunk(64 * 1024);
  std::size_t pos = 0;
  std::size_t end = 0;
  Record r;  // reused: its buffers keep their capacity from line to line (or the visitor's)
  std::size_t line = 0;
  for (;;) {
    r.text.clear();
    bool any = false;      // bytes or a newline: there is a line
    bool newline = false;
    bool oversized = false;
    while (!newline) {
      if (pos == end) {
        pos = 0;
        end = std::fread(chunk.data(), 1, chunk.size(), in.get());
        if (std::ferror(in.get()) != 0) {
          throw Error(ErrorClass::io, "cannot read " + file.path.string());
        }
        if (end == 0) break;  // end of the file
      }
      const char* start = chunk.data() + pos;
      const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end - pos));
      const std::size_t take = nl != nullptr ? static_cast<std::size_t>(nl - start) : end - pos;
      // Past the limit, the rest of the line is skipped: its first bytes stand for it.
      const std::size_t keep = std::min(take, max_line_bytes - r.text.size());
      r.text.append(start, keep);
      if (keep < take) {  // its first bytes stand for it; a 16 TB sparse file is not read
        oversized = true;
        break;
      }
      pos += take;
      any = any || take > 0 || nl != nullptr;
      if (nl != nullptr) {
        newline = true;
        ++pos;
      }
    }
    if (!any && !oversized) return;
    r.line = ++line;
    r.oversized = oversized;
    r.cut_off = !newline && !oversized;  // the file ends inside this line
    r.json = oversized ? nlohmann::json() : parse_record(r.text);
    if (!visit(r) || oversized) return;
  }
}

nlohmann::json parse_record(std::string_view line) {
  if (!nesting_within(line, kMaxRecordDepth)) return {};
  auto json = nlohmann::json::parse(line, nullptr, false);
  return json.is_object() ? json : nlohmann::json();
}

std::optional<LogEnd> read_log_end(const fs::path& file, std::size_t max_line_bytes) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const auto size = static_cast<std::uint64_t>(in.tellg());
  // Reads backwards in growing steps until the tail holds the last newline and the one
  // before it (or the file's start): never more than that line, what follows it, and one step.
  std::string tail;
  std::uint64_t from = size;
  for (;;) {
    const std::uint64_t step = std::min<std::uint64_t>(from, std::max<std::size_t>(64 * 1024, tail.size()));
    from -= step;
    std::string chunk(static_cast<std::size_t>(step), '\0');
    in.seekg(static_cast<std::streamoff>(from));
    if (!in.read(chunk.data(), static_cast<std::streamsize>(step))) return std::nullopt;
    tail.insert(0, chunk);
    const auto end = tail.rfind('\n');
    if (end == std::string::npos) {
      if (tail.size() > max_line_bytes) return std::nullopt;  // all of it is cut off
      if (from == 0) return LogEnd{{}, tail};
    } else {
      if (tail.size() - end - 1 > max_line_bytes) return std::nullopt;
      const auto before = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
      if (before != std::string::npos || from == 0) {
        const std::size_t start = before == std::string::npos ? 0 : before + 1;
        if (end - start > max_line_bytes) return std::nullopt;
        return LogEnd{tail.substr(start, end - start), tail.substr(end + 1)};
      }
      if (end > max_line_bytes) return std::nullopt;
    }
    if (tail.size() > 2 * max_line_bytes + 64 * 1024 + 2) return std::nullopt;
  }
}

std::int64_t Record::seq() const {
  const nlohmann::json* e = member(json, "event");
  const auto sequence = e == nullptr ? std::nullopt : get<std::int64_t>(member(*e, "sequence"));
  // Never negative: the readers compute with it (seq() - 1).
  return sequence && *sequence >= 0 ? *sequence : -1;
}

std::string Record::action() const {
  const nlohmann::json* e = member(json, "event");
  return e == nullptr ? std::string() : get<std::string>(member(*e, "action")).value_or("");
}

const nlohmann::json* Record::sempi(const char* key) const {
  const nlohmann::json* s = member(json, "sempi");
  return s == nullptr ? nullptr : member(*s, key);
}

AuditDir load_audit_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorClass::config, dir.string() + " is not an audit directory");
  }
  AuditDir result;
  result.dir = dir;
  result.launcher = log_file(dir / kLauncherFile, kLauncherFile);
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto rank = rank_of_file_name(name)) {
      result.ranks[*rank] = log_file(it->path(), name);
    } else if (looks_like_rank_log(name)) {
      result.strays.push_back(name);
    }
  }
  if (ec) {
    result.unlisted = "cannot list the directory (" + ec.message() +
                      "): only the logs the launcher log names were looked at";
  }
  // Ranks the launcher knew of (its first record) but whose files are gone are still part of
  // the job. A read of its own, which decides only which rank logs are looked for: verify
  // takes the job, key and seal from its single pass over the chain.
  std::optional<int> ranks;
  try {
    for_each_record(result.launcher, [&](const Record& first) {
      ranks = get<int>(first.sempi("ranks"));
      return false;
    });
  } catch (const Error&) {  // verify reports it
  }
  for (int r = 0; ranks && r < *ranks && r < kMaxJobRanks; ++r) {
    const std::string name = rank_file_name(r);
    if (!result.ranks.count(r)) result.ranks[r] = log_file(dir / name, name);
  }
  return result;
}

VerifyResult verify(const AuditDir& dir, const std::optional<std::string>& public_key) {
  VerifyResult result;
  auto& out = result.findings;
  const LogFile& launcher = dir.launcher;
  if (!dir.unlisted.empty()) out.push_back({kDirectoryName, 0, "unreadable", dir.unlisted});
  if (!launcher.exists) {
    out.push_back({kLauncherFile, 0, "missing", "the launcher log is missing: nothing to verify"});
    result.problems = out.size();
    return result;
  }
  ++result.files;
  for (const auto& name : dir.strays) {
    out.push_back({name, 0, "foreign", "not a log file name sempi writes (expected rank-<R>.jsonl)"});
  }
  // A file that cannot be read is a finding like any other, never a usage error: it may be
  // what tampering left (a log made unreadable, or replaced by a link to one).
  const auto unreadable = [&out](const LogFile& file, const Error& e) {
    out.push_back({file.name, 0, "unreadable", e.what()});
  };
  // From the launcher log: the job and key its first record (job.start) names, and its last
  // record (the seal), taken from the reader as it goes, not copied: a record may be 8 MiB.
  std::string job;
  std::string key;
  Record last;  // line 0: none
  ChainCheck launcher_chain;
  std::optional<bool> job_start;  // of a parsed first record: is it a job.start with a key?
  const std::size_t first_launcher_finding = out.size();
  try {
    launcher_chain = check_chain(launcher, job, std::nullopt, out, [&](Record& r) {
      if (r.line == 1 && r.parsed()) {
        job = str_field(r, "job");
        if (const auto* k = r.sempi("audit_key")) {
          key = get<std::string>(member(*k, "public_key")).value_or("");
        }
        job_start = r.action() == "job.start" && !key.empty();
      }
      std::swap(last, r);  // the reader refills r: last's old buffers serve the next line
    });
  } catch (const Error& e) {
    unreadable(launcher, e);
    result.problems = out.size();
    return result;
  }
  if (job_start == false) {  // line 1: before the chain's findings, which are in line order
    out.insert(
        out.begin() + static_cast<std::ptrdiff_t>(first_launcher_finding),
        {kLauncherFile, 1, "edited", "the first record is not a job.start with the audit key"});
  }
  if (launcher_chain.cut_off_line > 0) {  // the launcher writes whole lines; it seals last
    out.push_back({kLauncherFile, launcher_chain.cut_off_line, "truncated",
                   "the last record is cut off (no newline)"});
  }
  if (public_key && !key.empty() && *public_key != key) {
    out.push_back({kLauncherFile, 1, "bad_seal",
                   "the audit key in the log is not the expected public key (log rewritten?)"});
  }
  // Problems that "omitted" findings stand for, beyond the finding itself.
  std::size_t unlisted = 0;
  const auto count_unlisted = [&unlisted](const ChainCheck& chain) {
    if (chain.unlisted > 0) unlisted += chain.unlisted - 1;
  };
  result.records += launcher_chain.records;
  count_unlisted(launcher_chain);

  // The seal: the launcher log's last record.
  const Record* seal_record = last.line > 0 && last.action() == "audit.seal" ? &last : nullptr;
  // What the seal says of each rank's log: its head, how the launcher learnt it ("reported"
  // at finalize, read from the "file" of a rank that died, "none": the rank was never welcomed,
  // "missing": it was, and no log was found), and for "file" the bytes after the head's line.
  struct SealedHead {
    std::int64_t seq = -1;
    std::string hash;
    std::string source;
    std::string write_error;  // reported by the rank: its file could not take the whole chain
    std::uint64_t cut_off_bytes = 0;
    std::string cut_off_hash;
  };
  std::map<int, SealedHead> heads;
  if (seal_record == nullptr) {
    out.push_back({kLauncherFile, 0, "unsealed",
                   "no audit.seal record at the end of the launcher log (truncated, or the "
                   "launcher did not finish)"});
  } else {
    const nlohmann::json* seal = seal_record->sempi("seal");
    const auto signature = get<std::string>(seal_record->sempi("signature"));
    const auto message =
        signature ? seal_message_of_line(seal_record->text, *signature) : std::nullopt;
    if (seal == nullptr || !seal->is_object() || !message ||
        !verify_seal_signature(key, *message, *signature)) {
      out.push_back({kLauncherFile, seal_record->line, "bad_seal",
                     "the seal's signature does not verify with the job's audit key"});
    } else {
      result.sealed = true;
      // Signed, but not necessarily by sempirun: with a key of their own, whoever rewrote the
      // directory signs whatever they like, so no field is taken on trust.
      // The seal names the launcher head just before itself.
      const nlohmann::json* l = member(*seal, "launcher");
      const auto sealed_seq = l == nullptr ? std::nullopt : get<std::int64_t>(member(*l, "seq"));
      const std::int64_t seal_seq = seal_record->seq();  // -1 if it has none
      if (l == nullptr || !sealed_seq || seal_seq < 0 || *sealed_seq != seal_seq - 1 ||
          get<std::string>(member(*l, "hash")).value_or("") != launcher_chain.hash_before_last) {
        out.push_back({kLauncherFile, 0, "edited",
                       "the launcher log before the seal does not match the sealed head"});
      }
      if (get<std::string>(member(*seal, "job")).value_or("") != job) {
        out.push_back({kLauncherFile, seal_record->line, "bad_seal", "the seal names another job"});
      }
      const nlohmann::json* sealed_ranks = member(*seal, "ranks");
      if (sealed_ranks == nullptr || !sealed_ranks->is_array()) {
        out.push_back({kLauncherFile, seal_record->line, "bad_seal", "the seal lists no ranks"});
      } else {
        for (const auto& h : *sealed_ranks) {
          const auto rank = get<int>(member(h, "rank"));
          if (!rank || *rank < 0 || *rank >= kMaxJobRanks) continue;  // a forged seal's only
          SealedHead& head = heads[*rank];
          head.seq = get<std::int64_t>(member(h, "seq")).value_or(-1);
          head.hash = get<std::string>(member(h, "hash")).value_or("");
          head.source = get<std::string>(member(h, "source")).value_or("");
          head.write_error = get<std::string>(member(h, "write_error")).value_or("");
          if (const nlohmann::json* cut = member(h, "cut_off")) {
            head.cut_off_bytes = get<std::uint64_t>(member(*cut, "bytes")).value_or(0);
            head.cut_off_hash = get<std::string>(member(*cut, "hash")).value_or("");
          }
        }
      }
    }
  }

  std::set<int> ranks;
  for (const auto& [r, f] : dir.ranks) ranks.insert(r);
  for (const auto& [r, h] : heads) ranks.insert(r);
  for (const int r : ranks) {
    const auto it = dir.ranks.find(r);
    const LogFile empty{rank_file_name(r), dir.dir / rank_file_name(r), false};
    const LogFile& file = it != dir.ranks.end() ? it->second : empty;
    const auto head = heads.find(r);
    if (!file.exists) {
      if (result.sealed && head != heads.end() && head->second.source == "missing") {
        out.push_back({file.name, 0, "missing",
                       "the log of rank " + std::to_string(r) +
                           " was missing when the job ended (deleted during the job, or the "
                           "rank failed before it could create it)"});
      } else if (result.sealed && (head == heads.end() || head->second.source != "none")) {
        out.push_back({file.name, 0, "missing", "the log of rank " + std::to_string(r) +
                                                    " is missing (deleted)"});
      } else if (!result.sealed && head == heads.end() && launcher_chain.records > 0) {
        out.push_back({file.name, 0, "missing",
                       "the log of rank " + std::to_string(r) + " is missing"});
      }
      continue;
    }
    ++result.files;
    ChainCheck chain;
    try {
      chain = check_chain(file, job, r, out);
    } catch (const Error& e) {
      unreadable(file, e);
      continue;
    }
    result.records += chain.records;
    count_unlisted(chain);
    const bool covered = result.sealed && head != heads.end() && head->second.source != "none" &&
                         head->second.source != "missing";
    const bool died = covered && head->second.source == "file";
    const bool at_sealed_head =
        died && chain.last.seq == head->second.seq && chain.last.hash == head->second.hash;
    if (chain.cut_off_line > 0) {
      // What a rank killed in the middle of a write leaves after the records the launcher
      // sealed from its file, sealed with them. Anywhere else (a rank that closed its log, or
      // no seal to say where the records end) a cut-off line is a finding.
      if (at_sealed_head && chain.cut_off_bytes == head->second.cut_off_bytes &&
          chain.cut_off_hash == head->second.cut_off_hash) {
        result.notes.push_back("rank " + std::to_string(r) + "'s log ends in a record cut off as " +
                               "it was written (line " + std::to_string(chain.cut_off_line) +
                               "): the seal covers it as it is");
      } else if (at_sealed_head) {
        out.push_back({file.name, chain.cut_off_line, "appended",
                       head->second.cut_off_bytes == 0
                           ? "a cut-off last line after the sealed head (added after the job)"
                           : "the cut-off last line does not match the sealed one (modified)"});
      } else if (covered && !head->second.write_error.empty()) {
        out.push_back({file.name, chain.cut_off_line, "unwritten",
                       "the last record is cut off: the rank reported that writing its log "
                       "failed (" +
                           excerpt(head->second.write_error) + ")"});
      } else {
        out.push_back({file.name, chain.cut_off_line, "truncated",
                       "the last record is cut off (no newline)"});
      }
    } else if (at_sealed_head && head->second.cut_off_bytes > 0) {
      out.push_back({file.name, 0, "truncated",
                     "the cut-off record the seal covers after the last one is gone (removed)"});
    }
    if (!result.sealed) continue;
    if (!covered) {
      out.push_back({file.name, 0, "foreign", "the seal does not cover this file"});
      continue;
    }
    compare_head(file, chain, head->second.seq, head->second.hash, head->second.write_error, out);
    if (!head->second.write_error.empty() && chain.last.seq == head->second.seq &&
        chain.last.hash == head->second.hash) {
      result.notes.push_back("rank " + std::to_string(r) + " reported an error writing its log (" +
                             excerpt(head->second.write_error) +
                             "), but every record of its chain is in " + file.name);
    }
    if (died) {
      result.notes.push_back("rank " + std::to_string(r) +
                             " ended without closing its log (it died, or the job ended before it "
                             "finalized): the seal "
                             "covers what " + file.name +
                             " held then; records the rank had not written yet are lost");
    }
  }
  // The directory sempirun made is named after the job: another job's logs under this name
  // verify on their own, but are not this job's.
  // Named as a path, "DIR/." or ".." included: what matters is the directory it leads to.
  std::error_code ec;
  fs::path named = fs::absolute(dir.dir, ec).lexically_normal();
  if (named.filename().empty()) named = named.parent_path();  // "DIR/" normalised
  const std::string dir_name = named.filename().string();
  if (!job.empty() && dir_name != job && dir_name.size() == job.size() &&
      is_lower_hex(dir_name)) {
    out.push_back(
        {kLauncherFile, 1, "foreign",
         "the logs are of job " + excerpt(job) + ", in the directory of job " + dir_name});
  }
  if (!public_key && result.sealed) {
    result.notes.push_back(
        "the seal was checked against the key the log itself names: whoever can write the "
        "directory can rewrite the launcher log with a fresh key, and with it any rank's log, "
        "so this proves the logs consistent, not unaltered; pass --public-key (sempirun "
        "--audit-key-out records it) to prove that");
  }
  result.problems = out.size() + unlisted;
  return result;
}

// --- report and reconcile ------------------------------------------------------------------

namespace {

// Visits the whole, parsed records of `file` for report and reconcile, which count what the
// logs say without verifying them. What they cannot count is described in `unread`: a file
// that cannot be read, a line over the limit (it ends the reading), a cut-off last line (not
// a record: verify leaves it out of the chain too).
void for_each_whole_record(const LogFile& file, std::vector<std::string>& unread,
                           const std::function<void(const Record&)>& visit) {
  if (!file.exists) {  // the launcher log, or a rank log the launcher log names
    unread.push_back(file.name == kLauncherFile
                         ? file.name + ": missing; not counted"
                         : file.name +
                               ": missing (the rank never joined, or its log was deleted: "
                               "`sempi audit verify` tells which); not counted");
    return;
  }
  try {
    for_each_record(file, [&](const Record& r) {
      const auto where = [&] { return file.name + ":" + std::to_string(r.line); };
      if (r.oversized) {
        unread.push_back(where() + ": a line over " + std::to_string(kMaxRecordBytes >> 20) +
                         " MiB; the rest of the file was not read");
      } else if (r.cut_off) {
        unread.push_back(where() + ": the last line is cut off (no newline); not counted");
      } else if (r.parsed()) {
        visit(r);
      }
      return true;
    });
  } catch (const Error& e) {
    unread.push_back(file.name + ": " + e.what());
  }
}

// An action or direction as sempi writes them (lower case, dots, underscores) is printed as
// it is; anything else, in quotes: an edited log must not pass fields off as others.
std::string word_or_quoted(const std::string& text) {
  const bool word = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || c == '.' || c == '_';
  });
  return word ? text : in_quotes(text);
}

// A dry-run record says "dry_run": true; enforced ones say false, or nothing.
bool is_dry_run(const Record& r) {
  const nlohmann::json* d = r.sempi("dry_run");
  return d != nullptr && d->is_boolean() && d->get<bool>();
}

}  // namespace

nlohmann::ordered_json report_json(const AuditDir& dir) {
  using Json = nlohmann::ordered_json;
  // A row is a communicator, not a name: names are local (MPI_Comm_set_name on one side), the
  // context is what both ends agree on. A record without a context keys by its name.
  using Row = std::tuple<int, int, std::int64_t, std::string>;  // from, to, context, name
  struct Cell {
    std::string comm;  // the sender's name (its first send record), else the receiver's
    bool comm_from_send = false;
    std::set<std::string> other_names;  // renamed on one side, or named differently
    std::uint64_t names_not_kept = 0;   // records with yet other names, past kNamesPerRow
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    std::uint64_t received = 0;
    std::uint64_t received_bytes = 0;
  };
  constexpr std::size_t kNamesPerRow = 8;  // bounds what a hostile log can make a row hold
  std::map<Row, Cell> matrix;
  Json events = Json::array();
  std::string job;
  std::string policy_note;
  std::vector<std::string> unread;
  auto scan = [&](const LogFile& file) {
    for_each_whole_record(file, unread, [&](const Record& r) {
      const std::string action = r.action();
      const int rank = int_field<int>(r, "rank");
      if (action == "message.send" || action == "message.receive") {
        const bool send = action == "message.send";
        const int peer = int_field<int>(r, "peer");
        const std::string name = str_field(r, "comm");
        // Both contexts of a communicator (point-to-point 2c, collectives 2c + 1) make one row.
        const std::int64_t context = int_field(r, "context");
        const std::int64_t comm = context >= 0 ? context & ~std::int64_t{1} : -1;
        const std::string by_name = context >= 0 ? std::string() : name;
        auto& cell = matrix[send ? Row{rank, peer, comm, by_name} : Row{peer, rank, comm, by_name}];
        std::string other = name;
        if (cell.messages + cell.received == 0 || (send && !cell.comm_from_send)) {
          other = std::exchange(cell.comm, name);
          cell.comm_from_send = send;
        }
        if (cell.messages + cell.received > 0 && other != cell.comm &&
            cell.other_names.count(other) == 0) {
          if (cell.other_names.size() < kNamesPerRow) {
            cell.other_names.insert(std::move(other));
          } else {
            ++cell.names_not_kept;
          }
        }
        const auto bytes = int_field<std::uint64_t>(r, "bytes", 0);
        if (send) {
          ++cell.messages;
          cell.bytes += bytes;
        } else {
          ++cell.received;
          cell.received_bytes += bytes;
        }
        return;
      }
      if (action == "job.start") {
        job = str_field(r, "job");
        if (const auto* d = r.sempi("policy_default"); d != nullptr && d->is_boolean() && d->get<bool>()) {
          policy_note = "the built-in default policy applied (no --policy given)";
        }
      }
      const bool failure = event_field(r, "outcome") == "failure";
      const bool dry = is_dry_run(r);
      if (failure || dry || action == "policy.deny") {
        Json e;
        e["file"] = file.name;
        e["line"] = r.line;
        e["@timestamp"] = string_member(r.json, "@timestamp");
        e["action"] = action;
        e["dry_run"] = dry;
        e["reason"] = event_field(r, "reason");
        if (r.sempi("rank") != nullptr) e["rank"] = int_field(r, "rank");
        if (r.sempi("peer") != nullptr) e["peer"] = int_field(r, "peer");
        if (r.sempi("comm") != nullptr) e["comm"] = str_field(r, "comm");
        if (r.sempi("op") != nullptr) e["op"] = str_field(r, "op");
        if (r.sempi("tag") != nullptr) e["tag"] = int_field(r, "tag");
        if (r.sempi("bytes") != nullptr) e["bytes"] = int_field(r, "bytes");
        if (r.sempi("msg") != nullptr) e["msg"] = int_field(r, "msg");
        if (r.sempi("direction") != nullptr) e["direction"] = str_field(r, "direction");
        events.push_back(std::move(e));
      }
    });
  };
  if (!dir.unlisted.empty()) unread.push_back(std::string(kDirectoryName) + ": " + dir.unlisted);
  scan(dir.launcher);
  for (const auto& [r, f] : dir.ranks) scan(f);
  Json report;
  report["job"] = job;
  if (!policy_note.empty()) report["policy"] = policy_note;
  Json traffic = Json::array();
  for (const auto& [key, cell] : matrix) {
    Json row = {{"from", std::get<0>(key)}, {"to", std::get<1>(key)}, {"comm", cell.comm}};
    if (std::get<2>(key) >= 0) row["context"] = std::get<2>(key);
    if (!cell.other_names.empty()) row["also_named"] = cell.other_names;
    if (cell.names_not_kept > 0) row["records_with_more_names"] = cell.names_not_kept;
    row["messages"] = cell.messages;
    row["bytes"] = cell.bytes;
    row["received"] = cell.received;
    row["received_bytes"] = cell.received_bytes;
    traffic.push_back(std::move(row));
  }
  report["traffic"] = std::move(traffic);
  report["denials_and_failures"] = std::move(events);
  if (!unread.empty()) report["not_read"] = unread;
  return report;
}

std::string report_text(const nlohmann::ordered_json& report) {
  std::ostringstream s;
  s << "job " << printable(report.value("job", std::string("?"))) << "\n";
  if (report.contains("policy")) s << "policy: " << printable(report["policy"].get<std::string>()) << "\n";
  s << "\ntraffic (from message.send / message.receive records):\n";
  if (report["traffic"].empty()) s << "  (no message records: message audit off?)\n";
  // Columns by the stream, not into a fixed buffer: an escaped communicator name can be four
  // times as long as the name, and a row cut short would lose its newline.
  const auto row = [&s](const auto& from, const auto& to, const std::string& comm,
                        const auto& messages, const auto& bytes, const auto& received,
                        const auto& received_bytes) {
    s << "  " << std::right << std::setw(6) << from << ' ' << std::setw(6) << to << "  "
      << std::left << std::setw(20) << comm << std::right << ' ' << std::setw(10) << messages
      << ' ' << std::setw(14) << bytes << ' ' << std::setw(10) << received << ' '
      << std::setw(14) << received_bytes << '\n';
  };
  if (!report["traffic"].empty()) {
    row("from", "to", "communicator", "messages", "bytes", "received", "recv bytes");
  }
  for (const auto& t : report["traffic"]) {
    std::string comm = in_quotes(t["comm"].get<std::string>());
    if (t.contains("also_named")) {
      comm += " (also";
      for (const auto& name : t["also_named"]) comm += " " + in_quotes(name.get<std::string>());
      if (t.contains("records_with_more_names")) comm += " and more";
      comm += ")";
    }
    row(t["from"].get<int>(), t["to"].get<int>(), comm, t["messages"].get<std::uint64_t>(),
        t["bytes"].get<std::uint64_t>(), t["received"].get<std::uint64_t>(),
        t["received_bytes"].get<std::uint64_t>());
  }
  s << "\ndenials and failures:\n";
  if (report["denials_and_failures"].empty()) s << "  (none)\n";
  for (const auto& e : report["denials_and_failures"]) {
    s << "  " << printable(e["file"].get<std::string>()) << ":" << e["line"].get<std::size_t>()
      << " " << word_or_quoted(e["action"].get<std::string>())
      << (e["dry_run"].get<bool>() ? " (dry run, not enforced)" : "");
    if (e.contains("rank")) s << " rank " << e["rank"].get<long long>();
    if (e.contains("peer")) s << " peer " << e["peer"].get<long long>();
    if (e.contains("comm")) s << " comm " << in_quotes(e["comm"].get<std::string>());
    if (e.contains("op")) s << " op " << in_quotes(e["op"].get<std::string>());
    if (e.contains("tag")) s << " tag " << e["tag"].get<long long>();
    if (e.contains("bytes")) s << " bytes " << e["bytes"].get<long long>();
    if (e.contains("msg")) s << " msg " << e["msg"].get<long long>();
    if (e.contains("direction")) {
      s << " (" << word_or_quoted(e["direction"].get<std::string>()) << " side)";
    }
    const auto reason = e["reason"].get<std::string>();
    if (!reason.empty()) s << ": " << printable(reason);
    s << "\n";
  }
  if (report.contains("not_read")) {
    s << "\nnot counted above:\n";
    for (const auto& u : report["not_read"]) s << "  " << printable(u.get<std::string>()) << "\n";
  }
  return s.str();
}

// --- reconcile -----------------------------------------------------------------------------

ReconcileResult reconcile(const AuditDir& dir, bool with_records) {
  // One entry per message record, 64 bytes: names are interned, the file is an index, and the
  // fields as logged are kept only for a record whose fields are odd. A map of strings per
  // record cost ~210 bytes, more than half the size of the logs themselves. Once every file is
  // read, each kind is sorted by message (then by where it was read), and sends are matched
  // with receives by binary search.
  struct Entry {
    std::int64_t id = 0;  // with from and to, the message
    std::int64_t bytes = 0;
    std::int64_t context = -1;  // agreed by both ends (the communicator's name is local)
    std::uint64_t line = 0;
    std::int32_t from = 0;
    std::int32_t to = 0;
    std::int32_t tag = 0;
    std::uint32_t file = 0;    // in file_names
    std::uint32_t comm = 0;    // in names
    std::uint32_t op = 0;      // in names
    std::uint32_t logged = 0;  // 1 + its index in logged_fields; 0: the fields are as typed
  };
  std::vector<std::string> file_names;
  // A tree, not a hash table: the names come from the logs, and a hostile log's names could
  // all collide under a fixed hash.
  std::map<std::string, std::uint32_t, std::less<>> name_ids;
  std::vector<const std::string*> names;  // the keys above, by id (a map's nodes stay put)
  const auto intern = [&](std::string name) {
    const auto [at, added] =
        name_ids.try_emplace(std::move(name), static_cast<std::uint32_t>(names.size()));
    if (added) names.push_back(&at->first);
    return at->second;
  };
  // For --json: the fields of an odd record as it has them (a missing one absent, a mistyped
  // one as written), not as the defaults the comparisons use.
  std::vector<nlohmann::ordered_json> logged_fields;
  // True if the record has each field, of the type and value of its typed copy.
  const auto fields_as_typed = [](const Record& r, const std::string& comm, const std::string& op,
                                  std::int64_t context, int tag, std::int64_t bytes) {
    const auto is_string = [&r](const char* field, const std::string& typed) {
      const nlohmann::json* v = r.sempi(field);
      return v != nullptr && v->is_string() && v->get_ref<const std::string&>() == typed;
    };
    const auto is_integer = [&r](const char* field, std::int64_t typed) {
      const nlohmann::json* v = r.sempi(field);
      return v != nullptr && v->is_number_integer() && *v == typed;
    };
    return is_string("comm", comm) && is_string("op", op) && is_integer("context", context) &&
           is_integer("tag", tag) && is_integer("bytes", bytes);
  };
  std::vector<Entry> sends;
  std::vector<Entry> receives;
  std::vector<Entry> denials;
  std::vector<Entry> drops;
  std::set<std::pair<int, int>> limited;  // (receiver, sender): audit.limit written
  ReconcileResult result;
  if (!dir.unlisted.empty()) {
    result.unread.push_back(std::string(kDirectoryName) + ": " + dir.unlisted);
  }
  for (const auto& [rank, file] : dir.ranks) {
    const auto file_index = static_cast<std::uint32_t>(file_names.size());
    file_names.push_back(file.name);
    for_each_whole_record(file, result.unread, [&, rank = rank](const Record& r) {
      const std::string action = r.action();
      const bool send = action == "message.send";
      const bool recv = action == "message.receive";
      const bool deny =
          action == "policy.deny" && str_field(r, "direction") == "receive" && !is_dry_run(r);
      const bool drop = action == "message.drop";
      // Only a limit on drop records can hide why a message was not received (a limit on
      // dry-run denials names "records": "policy.deny").
      if (action == "audit.limit" && str_field(r, "records") != "policy.deny") {
        limited.insert({rank, int_field<int>(r, "peer")});
      }
      if (!send && !recv && !deny && !drop) return;
      // Denials and drops are written at every level: only these say message audit was on.
      if (send || recv) result.message_records = true;
      const int peer = int_field<int>(r, "peer");
      Entry e;
      e.id = int_field(r, "msg");
      e.bytes = int_field(r, "bytes");
      e.context = int_field(r, "context");
      e.line = r.line;
      e.from = send ? rank : peer;
      e.to = send ? peer : rank;
      e.tag = int_field<int>(r, "tag");
      e.file = file_index;
      std::string comm = str_field(r, "comm");
      std::string op = str_field(r, "op");
      // (Only sends and receives are listed with their fields.)
      if (with_records && (send || recv) &&
          !fields_as_typed(r, comm, op, e.context, e.tag, e.bytes)) {
        auto fields = nlohmann::ordered_json::object();
        for (const char* field : {"comm", "context", "op", "tag", "bytes"}) {
          if (const nlohmann::json* v = r.sempi(field)) fields[field] = *v;
        }
        logged_fields.push_back(std::move(fields));
        e.logged = static_cast<std::uint32_t>(logged_fields.size());
      }
      e.comm = intern(std::move(comm));
      e.op = intern(std::move(op));
      (send ? sends : recv ? receives : deny ? denials : drops).push_back(e);
    });
  }
  const auto key_less = [](const Entry& a, const Entry& b) {
    return std::tie(a.from, a.to, a.id) < std::tie(b.from, b.to, b.id);
  };
  const auto where = [&](const Entry& e) {
    return file_names[e.file] + ":" + std::to_string(e.line);
  };
  using Json = nlohmann::ordered_json;
  // A second record of the same message (a copy, or two records without a valid id) is
  // listed, never merged into the first; listed in the order the second ones were read.
  struct Twice {
    const char* action;
    Entry first;
    Entry second;
  };
  std::vector<Twice> twice;
  const auto sort_and_drop_copies = [&](std::vector<Entry>& entries, const char* action) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.from, a.to, a.id, a.file, a.line) <
             std::tie(b.from, b.to, b.id, b.file, b.line);
    });
    std::size_t kept = 0;
    for (const Entry& e : entries) {
      if (kept > 0 && !key_less(entries[kept - 1], e)) {
        twice.push_back({action, entries[kept - 1], e});
      } else {
        entries[kept++] = e;
      }
    }
    entries.resize(kept);
  };
  sort_and_drop_copies(sends, "message.send");
  sort_and_drop_copies(receives, "message.receive");
  sort_and_drop_copies(denials, "policy.deny");
  sort_and_drop_copies(drops, "message.drop");
  std::sort(twice.begin(), twice.end(), [](const Twice& a, const Twice& b) {
    return std::tie(a.second.file, a.second.line) < std::tie(b.second.file, b.second.line);
  });
  for (const Twice& t : twice) {
    result.mismatched.push_back(std::string("a second ") + t.action + " record of one message: " +
                                where(t.second) + " after " + where(t.first));
    if (with_records) {
      result.mismatched_records.push_back(
          {{"kind", "recorded_twice"},
           {"action", t.action},
           {"from", t.first.from},
           {"to", t.first.to},
           {"msg", t.first.id},
           {"first", {{"file", file_names[t.first.file]}, {"line", t.first.line}}},
           {"second", {{"file", file_names[t.second.file]}, {"line", t.second.line}}}});
    }
  }
  const auto describe = [&](const Entry& e) {
    return "rank " + std::to_string(e.from) + " -> rank " + std::to_string(e.to) + " msg " +
           std::to_string(e.id) + " comm " + in_quotes(*names[e.comm]) + " context " +
           std::to_string(e.context) + " op " + in_quotes(*names[e.op]) + " tag " +
           std::to_string(e.tag) + " bytes " + std::to_string(e.bytes) + " (" + where(e) + ")";
  };
  const auto record = [&](const Entry& e) {
    Json j{{"file", file_names[e.file]}, {"line", e.line}};
    if (e.logged == 0) {
      j.update(Json{{"comm", *names[e.comm]},
                    {"context", e.context},
                    {"op", *names[e.op]},
                    {"tag", e.tag},
                    {"bytes", e.bytes}});
    } else {
      j.update(logged_fields[e.logged - 1]);
    }
    return j;
  };
  const auto entry = [](const char* kind, const Entry& e) {
    return Json{{"kind", kind}, {"from", e.from}, {"to", e.to}, {"msg", e.id}};
  };
  const auto has = [&](const std::vector<Entry>& entries, const Entry& e) {
    return std::binary_search(entries.begin(), entries.end(), e, key_less);
  };
  result.sends = sends.size();
  std::vector<bool> received(receives.size());
  for (const Entry& send : sends) {
    const auto it = std::lower_bound(receives.begin(), receives.end(), send, key_less);
    if (it != receives.end() && !key_less(send, *it)) {
      ++result.matched;
      received[static_cast<std::size_t>(it - receives.begin())] = true;
      const Entry& recv = *it;
      if (recv.bytes != send.bytes || recv.tag != send.tag || recv.op != send.op ||
          recv.context != send.context) {
        result.mismatched.push_back("send " + describe(send) + " vs receive " + describe(recv));
        if (with_records) {
          Json j = entry("inconsistent", send);
          j["send"] = record(send);
          j["receive"] = record(recv);
          result.mismatched_records.push_back(std::move(j));
        }
      }
    } else if (has(denials, send)) {
      ++result.denied;
    } else if (has(drops, send)) {
      ++result.dropped;
    } else if (limited.count({send.to, send.from}) != 0) {
      ++result.past_audit_limit;
    } else {
      result.unmatched.push_back("sent, never received: " + describe(send));
      if (with_records) {
        Json j = entry("sent_never_received", send);
        j["send"] = record(send);
        result.unmatched_records.push_back(std::move(j));
      }
    }
  }
  for (std::size_t i = 0; i < receives.size(); ++i) {
    if (received[i]) continue;
    result.unmatched.push_back("received, never sent: " + describe(receives[i]));
    if (with_records) {
      Json j = entry("received_never_sent", receives[i]);
      j["receive"] = record(receives[i]);
      result.unmatched_records.push_back(std::move(j));
    }
  }
  return result;
}

}  // namespace sempi::audit
