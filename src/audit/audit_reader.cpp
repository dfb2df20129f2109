#include "audit/audit_reader.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "audit/seal.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "sempi/error.hpp"

namespace sempi::audit {
namespace fs = std::filesystem;

namespace {

// Bounds on what one verification reads: an audit file is large, but not unbounded input.
constexpr std::uintmax_t kMaxFileBytes = 4ull << 30;

std::string hash_hex(const std::string& line) { return to_hex(sha256(line)); }

LogFile read_log(const fs::path& path, const std::string& name) {
  LogFile file;
  file.name = name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return file;
  file.exists = true;
  if (fs::file_size(path, ec) > kMaxFileBytes) {
    throw Error(ErrorClass::config, path.string() + " is larger than 4 GiB");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string content = buffer.str();
  std::size_t start = 0;
  std::size_t line = 0;
  while (start < content.size()) {
    auto end = content.find('\n', start);
    if (end == std::string::npos) {
      file.ends_without_newline = true;
      end = content.size();
    }
    Record r;
    r.line = ++line;
    r.text = content.substr(start, end - start);
    r.json = nlohmann::json::parse(r.text, nullptr, false);
    if (!r.json.is_object()) r.json = nlohmann::json();
    file.records.push_back(std::move(r));
    start = end + 1;
  }
  return file;
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

template <class T>
std::optional<T> get(const nlohmann::json* j) {
  if (j == nullptr) return std::nullopt;
  try {
    return j->get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string str_field(const Record& r, const char* key) {
  return get<std::string>(r.sempi(key)).value_or("");
}

std::int64_t int_field(const Record& r, const char* key, std::int64_t fallback = -1) {
  return get<std::int64_t>(r.sempi(key)).value_or(fallback);
}

// A string member of `object`; "" when missing, or when either has another type (an edited
// record must still be reported, not end the report).
std::string string_member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it == object.end() ? "" : get<std::string>(&*it).value_or("");
}

// A string of the record's "event" object, as string_member.
std::string event_field(const Record& r, const char* key) {
  const auto e = r.json.find("event");
  return e == r.json.end() ? "" : string_member(*e, key);
}

struct ChainCheck {
  ChainHead last;  // of the records as they are
  std::size_t records = 0;
};

// Walks one file's chain and reports each broken place once.
ChainCheck check_chain(const LogFile& file, const std::string& job, std::optional<int> rank,
                       std::vector<Finding>& out) {
  ChainCheck result;
  const auto& recs = file.records;
  result.records = recs.size();
  auto add = [&](std::size_t line, const char* kind, std::string message) {
    out.push_back({file.name, line, kind, std::move(message)});
  };
  std::set<std::int64_t> present;
  std::map<std::int64_t, int> seen_count;
  for (const auto& r : recs) {
    if (r.parsed()) {
      present.insert(r.seq());
      ++seen_count[r.seq()];
    }
  }
  // links[i]: does record i's prev match the hash of record i-1 (or zeros for i == 0)?
  std::vector<bool> link_ok(recs.size(), true);
  std::vector<bool> seq_ok(recs.size(), true);
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const Record& r = recs[i];
    if (!r.parsed()) {
      const bool last = i + 1 == recs.size();
      add(r.line, last && file.ends_without_newline ? "truncated" : "corrupt",
          last && file.ends_without_newline
              ? "the last record is cut off (no newline, not valid JSON)"
              : "not a JSON record");
      seq_ok[i] = false;
      link_ok[i] = false;
      ++expected;
      continue;
    }
    const std::int64_t seq = r.seq();
    const std::string expected_prev = i == 0 ? kZeroHash : hash_hex(recs[i - 1].text);
    link_ok[i] = str_field(r, "prev") == expected_prev;
    if (seq != expected) {
      seq_ok[i] = false;
      if (seq > expected) {
        bool all_later = true;
        for (std::int64_t s = expected; s < seq; ++s) all_later = all_later && present.count(s) != 0;
        if (all_later) {
          add(r.line, "reordered",
              "record seq " + std::to_string(seq) + " where seq " + std::to_string(expected) +
                  " belongs (records were reordered)");
        } else {
          add(r.line, "deleted",
              seq == expected + 1
                  ? "record seq " + std::to_string(expected) + " is missing (deleted)"
                  : "records seq " + std::to_string(expected) + ".." + std::to_string(seq - 1) +
                        " are missing (deleted)");
        }
      } else {
        add(r.line, "reordered",
            "record seq " + std::to_string(seq) + " after seq " + std::to_string(expected - 1) +
                (seen_count[seq] > 1 ? " (a duplicated record)" : " (records were reordered)"));
      }
      expected = std::max(expected, seq + 1);
    } else {
      ++expected;
    }
    if (str_field(r, "job") != job && !job.empty()) {
      add(r.line, "foreign", "record of job '" + str_field(r, "job") + "', not " + job);
    }
    if (rank && (str_field(r, "source") != "rank" || int_field(r, "rank") != *rank)) {
      add(r.line, "foreign", "record does not belong to rank " + std::to_string(*rank));
    }
    if (!rank && str_field(r, "source") != "launcher") {
      add(r.line, "foreign", "record does not come from the launcher");
    }
  }
  // A changed record breaks the link to its successor; a changed "prev" breaks its own link
  // too. Two broken links in a row: the record between them was edited; one alone: the record
  // before it was edited. Sequence problems are already reported.
  for (std::size_t i = 0; i < recs.size(); ++i) {
    if (link_ok[i] || !seq_ok[i] || !recs[i].parsed()) continue;
    if (i > 0 && (!recs[i - 1].parsed() || !seq_ok[i - 1])) continue;  // already explained
    if (i + 1 < recs.size() && !link_ok[i + 1] && seq_ok[i + 1]) {
      add(recs[i].line, "edited", "record seq " + std::to_string(recs[i].seq()) +
                                      " was modified (its chain links do not match)");
      link_ok[i + 1] = true;  // explained
    } else if (i > 0) {
      add(recs[i - 1].line, "edited",
          "record seq " + std::to_string(recs[i - 1].seq()) +
              " was modified (its hash does not match the next record's prev)");
    } else {
      add(recs[i].line, "edited", "the first record's prev is not zero (modified)");
    }
  }
  if (!recs.empty()) {
    result.last = {recs.back().parsed() ? recs.back().seq() : -1, hash_hex(recs.back().text)};
  }
  return result;
}

void compare_head(const LogFile& file, const ChainCheck& chain, std::int64_t seq,
                  const std::string& hash, std::vector<Finding>& out) {
  if (chain.last.seq == seq && chain.last.hash == hash) return;
  std::int64_t last_valid = -1;
  for (const auto& r : file.records) {
    if (r.parsed()) last_valid = std::max(last_valid, r.seq());
  }
  if (last_valid < seq) {
    out.push_back({file.name, 0, "truncated",
                   "ends at seq " + std::to_string(last_valid) + " but the seal records seq " +
                       std::to_string(seq) + " (records at the end were removed)"});
  } else if (chain.last.seq > seq) {
    out.push_back({file.name, 0, "appended",
                   "records after the sealed head seq " + std::to_string(seq) +
                       " (added after the seal)"});
  } else {
    out.push_back({file.name, file.records.empty() ? 0 : file.records.back().line, "edited",
                   "the last record (seq " + std::to_string(seq) +
                       ") does not match the sealed hash (modified)"});
  }
}

}  // namespace

std::int64_t Record::seq() const {
  if (!parsed()) return -1;
  const auto e = json.find("event");
  if (e == json.end() || !e->is_object()) return -1;
  return get<std::int64_t>(e->contains("sequence") ? &(*e)["sequence"] : nullptr).value_or(-1);
}

std::string Record::action() const {
  if (!parsed()) return {};
  const auto e = json.find("event");
  if (e == json.end() || !e->is_object() || !e->contains("action")) return {};
  return get<std::string>(&(*e)["action"]).value_or("");
}

const nlohmann::json* Record::sempi(const char* key) const {
  if (!parsed()) return nullptr;
  const auto s = json.find("sempi");
  if (s == json.end() || !s->is_object()) return nullptr;
  const auto v = s->find(key);
  return v == s->end() ? nullptr : &*v;
}

AuditDir load_audit_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorClass::config, dir.string() + " is not an audit directory");
  }
  AuditDir result;
  result.dir = dir;
  result.launcher = read_log(dir / kLauncherFile, kLauncherFile);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (const auto rank = rank_of_file_name(name)) {
      result.ranks[*rank] = read_log(entry.path(), name);
    } else if (looks_like_rank_log(name)) {
      result.strays.push_back(name);
    }
  }
  // Ranks the launcher knew of but whose files are gone are still part of the job.
  if (!result.launcher.records.empty()) {
    const auto ranks = get<int>(result.launcher.records.front().sempi("ranks"));
    for (int r = 0; ranks && r < *ranks && r < (1 << 20); ++r) {
      if (!result.ranks.count(r)) {
        LogFile missing;
        missing.name = rank_file_name(r);
        result.ranks[r] = missing;
      }
    }
  }
  return result;
}

VerifyResult verify(const AuditDir& dir, const std::optional<std::string>& public_key) {
  VerifyResult result;
  auto& out = result.findings;
  const LogFile& launcher = dir.launcher;
  if (!launcher.exists) {
    out.push_back({kLauncherFile, 0, "missing", "the launcher log is missing: nothing to verify"});
    return result;
  }
  ++result.files;
  for (const auto& name : dir.strays) {
    out.push_back({name, 0, "foreign", "not a log file name sempi writes (expected rank-<R>.jsonl)"});
  }
  std::string job;
  std::string key;
  if (!launcher.records.empty() && launcher.records.front().parsed()) {
    const Record& header = launcher.records.front();
    job = str_field(header, "job");
    if (const auto* k = header.sempi("audit_key"); k != nullptr && k->is_object()) {
      key = get<std::string>(k->contains("public_key") ? &(*k)["public_key"] : nullptr).value_or("");
    }
    if (header.action() != "job.start" || key.empty()) {
      out.push_back({kLauncherFile, 1, "edited", "the first record is not a job.start with the audit key"});
    }
  }
  if (public_key && !key.empty() && *public_key != key) {
    out.push_back({kLauncherFile, 1, "bad_seal",
                   "the audit key in the log is not the expected public key (log rewritten?)"});
  }
  const ChainCheck launcher_chain = check_chain(launcher, job, std::nullopt, out);
  result.records += launcher_chain.records;

  // The seal: the launcher log's last record.
  const Record* seal_record = nullptr;
  if (!launcher.records.empty() && launcher.records.back().action() == "audit.seal") {
    seal_record = &launcher.records.back();
  }
  std::map<int, std::tuple<std::int64_t, std::string, std::string>> heads;  // seq, hash, source
  if (seal_record == nullptr) {
    out.push_back({kLauncherFile, 0, "unsealed",
                   "no audit.seal record at the end of the launcher log (truncated, or the "
                   "launcher did not finish)"});
  } else {
    const nlohmann::json* seal = seal_record->sempi("seal");
    const auto signature = get<std::string>(seal_record->sempi("signature"));
    if (seal == nullptr || !seal->is_object() || !signature ||
        !verify_seal_signature(key, seal_message(*seal), *signature)) {
      out.push_back({kLauncherFile, seal_record->line, "bad_seal",
                     "the seal's signature does not verify with the job's audit key"});
    } else {
      result.sealed = true;
      // The seal names the launcher head just before itself.
      const auto& l = (*seal)["launcher"];
      const std::size_t n = launcher.records.size();
      const std::string before = n >= 2 ? hash_hex(launcher.records[n - 2].text) : kZeroHash;
      if (!l.is_object() || get<std::int64_t>(&l["seq"]).value_or(-2) != seal_record->seq() - 1 ||
          get<std::string>(&l["hash"]).value_or("") != before) {
        out.push_back({kLauncherFile, 0, "edited",
                       "the launcher log before the seal does not match the sealed head"});
      }
      if (get<std::string>(&(*seal)["job"]).value_or("") != job) {
        out.push_back({kLauncherFile, seal_record->line, "bad_seal", "the seal names another job"});
      }
      if ((*seal)["ranks"].is_array()) {
        for (const auto& h : (*seal)["ranks"]) {
          const auto rank = get<int>(h.contains("rank") ? &h["rank"] : nullptr);
          if (!rank) continue;
          heads[*rank] = {get<std::int64_t>(h.contains("seq") ? &h["seq"] : nullptr).value_or(-1),
                          get<std::string>(h.contains("hash") ? &h["hash"] : nullptr).value_or(""),
                          get<std::string>(h.contains("source") ? &h["source"] : nullptr).value_or("")};
        }
      }
    }
  }

  std::set<int> ranks;
  for (const auto& [r, f] : dir.ranks) ranks.insert(r);
  for (const auto& [r, h] : heads) ranks.insert(r);
  for (const int r : ranks) {
    const auto it = dir.ranks.find(r);
    const LogFile empty{rank_file_name(r), false, false, {}};
    const LogFile& file = it != dir.ranks.end() ? it->second : empty;
    const auto head = heads.find(r);
    if (!file.exists) {
      if (result.sealed && (head == heads.end() || std::get<2>(head->second) != "none")) {
        out.push_back({file.name, 0, "missing", "the log of rank " + std::to_string(r) +
                                                    " is missing (deleted)"});
      } else if (!result.sealed && head == heads.end() && !dir.launcher.records.empty()) {
        out.push_back({file.name, 0, "missing",
                       "the log of rank " + std::to_string(r) + " is missing"});
      }
      continue;
    }
    ++result.files;
    const ChainCheck chain = check_chain(file, job, r, out);
    result.records += chain.records;
    if (!result.sealed) continue;
    if (head == heads.end() || std::get<2>(head->second) == "none") {
      out.push_back({file.name, 0, "foreign", "the seal does not cover this file"});
      continue;
    }
    compare_head(file, chain, std::get<0>(head->second), std::get<1>(head->second), out);
  }
  return result;
}

// --- report --------------------------------------------------------------------------------

nlohmann::ordered_json report_json(const AuditDir& dir) {
  using Json = nlohmann::ordered_json;
  struct Cell {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    std::uint64_t received = 0;
    std::uint64_t received_bytes = 0;
  };
  std::map<std::tuple<int, int, std::string>, Cell> matrix;
  Json events = Json::array();
  std::string job;
  std::string policy_note;
  auto scan = [&](const LogFile& file) {
    for (const auto& r : file.records) {
      if (!r.parsed()) continue;
      const std::string action = r.action();
      const int rank = static_cast<int>(int_field(r, "rank"));
      if (action == "message.send" || action == "message.receive") {
        const bool send = action == "message.send";
        const int peer = static_cast<int>(int_field(r, "peer"));
        const auto key = send ? std::make_tuple(rank, peer, str_field(r, "comm"))
                              : std::make_tuple(peer, rank, str_field(r, "comm"));
        auto& cell = matrix[key];
        const auto bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_field(r, "bytes", 0)));
        if (send) {
          ++cell.messages;
          cell.bytes += bytes;
        } else {
          ++cell.received;
          cell.received_bytes += bytes;
        }
        continue;
      }
      if (action == "job.start") {
        job = str_field(r, "job");
        if (const auto* d = r.sempi("policy_default"); d != nullptr && d->is_boolean() && d->get<bool>()) {
          policy_note = "the built-in default policy applied (no --policy given)";
        }
      }
      const bool failure = event_field(r, "outcome") == "failure";
      const bool dry = r.sempi("dry_run") != nullptr;
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
        events.push_back(std::move(e));
      }
    }
  };
  scan(dir.launcher);
  for (const auto& [r, f] : dir.ranks) scan(f);
  Json report;
  report["job"] = job;
  if (!policy_note.empty()) report["policy"] = policy_note;
  Json traffic = Json::array();
  for (const auto& [key, cell] : matrix) {
    traffic.push_back({{"from", std::get<0>(key)},
                       {"to", std::get<1>(key)},
                       {"comm", std::get<2>(key)},
                       {"messages", cell.messages},
                       {"bytes", cell.bytes},
                       {"received", cell.received},
                       {"received_bytes", cell.received_bytes}});
  }
  report["traffic"] = std::move(traffic);
  report["denials_and_failures"] = std::move(events);
  return report;
}

std::string report_text(const nlohmann::ordered_json& report) {
  std::ostringstream s;
  s << "job " << printable(report.value("job", std::string("?"))) << "\n";
  if (report.contains("policy")) s << "policy: " << printable(report["policy"].get<std::string>()) << "\n";
  s << "\ntraffic (from message.send / message.receive records):\n";
  if (report["traffic"].empty()) s << "  (no message records: message audit off?)\n";
  char line[256];
  if (!report["traffic"].empty()) {
    std::snprintf(line, sizeof line, "  %6s %6s  %-20s %10s %14s %10s %14s\n", "from", "to",
                  "communicator", "messages", "bytes", "received", "recv bytes");
    s << line;
  }
  for (const auto& t : report["traffic"]) {
    std::snprintf(line, sizeof line, "  %6d %6d  %-20s %10llu %14llu %10llu %14llu\n",
                  t["from"].get<int>(), t["to"].get<int>(), printable(t["comm"].get<std::string>()).c_str(),
                  t["messages"].get<unsigned long long>(), t["bytes"].get<unsigned long long>(),
                  t["received"].get<unsigned long long>(),
                  t["received_bytes"].get<unsigned long long>());
    s << line;
  }
  s << "\ndenials and failures:\n";
  if (report["denials_and_failures"].empty()) s << "  (none)\n";
  for (const auto& e : report["denials_and_failures"]) {
    s << "  " << printable(e["file"].get<std::string>()) << ":" << e["line"].get<std::size_t>()
      << " " << printable(e["action"].get<std::string>()) << (e["dry_run"].get<bool>() ? " (dry run, not enforced)" : "");
    if (e.contains("rank")) s << " rank " << e["rank"].get<long long>();
    if (e.contains("peer")) s << " peer " << e["peer"].get<long long>();
    if (e.contains("comm")) s << " comm " << printable(e["comm"].get<std::string>());
    if (e.contains("op")) s << " op " << printable(e["op"].get<std::string>());
    if (e.contains("tag")) s << " tag " << e["tag"].get<long long>();
    if (e.contains("bytes")) s << " bytes " << e["bytes"].get<long long>();
    const auto reason = e["reason"].get<std::string>();
    if (!reason.empty()) s << ": " << printable(reason);
    s << "\n";
  }
  return s.str();
}

// --- reconcile -----------------------------------------------------------------------------

ReconcileResult reconcile(const AuditDir& dir) {
  struct Msg {
    std::string file;
    std::size_t line = 0;
    std::string comm;
    int tag = 0;
    std::int64_t bytes = 0;
    std::string op;
  };
  using Key = std::tuple<int, int, std::int64_t>;  // sender, receiver, message id
  std::map<Key, Msg> sends;
  std::map<Key, Msg> receives;
  std::map<Key, Msg> denials;
  ReconcileResult result;
  for (const auto& [rank, file] : dir.ranks) {
    for (const auto& r : file.records) {
      if (!r.parsed()) continue;
      const std::string action = r.action();
      const bool send = action == "message.send";
      const bool recv = action == "message.receive";
      const bool deny = action == "policy.deny" && str_field(r, "direction") == "receive" &&
                        r.sempi("dry_run") == nullptr;
      if (!send && !recv && !deny) continue;
      result.message_records = true;
      const int peer = static_cast<int>(int_field(r, "peer"));
      const std::int64_t id = int_field(r, "msg");
      Msg m{file.name, r.line, str_field(r, "comm"), static_cast<int>(int_field(r, "tag")),
            int_field(r, "bytes"), str_field(r, "op")};
      if (send) sends[{rank, peer, id}] = std::move(m);
      if (recv) receives[{peer, rank, id}] = std::move(m);
      if (deny) denials[{peer, rank, id}] = std::move(m);
    }
  }
  auto describe = [](const Key& k, const Msg& m) {
    return "rank " + std::to_string(std::get<0>(k)) + " -> rank " + std::to_string(std::get<1>(k)) +
           " msg " + std::to_string(std::get<2>(k)) + " comm " + m.comm + " op " + m.op + " tag " +
           std::to_string(m.tag) + " bytes " + std::to_string(m.bytes) + " (" + m.file + ":" +
           std::to_string(m.line) + ")";
  };
  result.sends = sends.size();
  for (const auto& [key, send] : sends) {
    if (const auto it = receives.find(key); it != receives.end()) {
      ++result.matched;
      const Msg& recv = it->second;
      if (recv.bytes != send.bytes || recv.tag != send.tag || recv.op != send.op) {
        result.mismatched.push_back("send " + describe(key, send) + " vs receive " +
                                    describe(key, recv));
      }
      receives.erase(it);
    } else if (denials.count(key) != 0) {
      ++result.denied;
    } else {
      result.unmatched.push_back("sent, never received: " + describe(key, send));
    }
  }
  for (const auto& [key, recv] : receives) {
    result.unmatched.push_back("received, never sent: " + describe(key, recv));
  }
  return result;
}

}  // namespace sempi::audit
