// The audit log: record format, hash chain, file mode, the seal, and verification detecting
// each kind of tampering (edit, delete, reorder, truncate, append, missing file, bad seal,
// a planted file that imitates a rank's log).

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "audit/audit_log.hpp"
#include "audit/audit_reader.hpp"
#include "audit/seal.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "sempi/error.hpp"

#include "support/temp_dir.hpp"

namespace sempi::audit {
namespace {

namespace fs = std::filesystem;

using sempi::test::TempDir;

const std::string kJob(32, 'a');

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

void write_lines(const fs::path& file, const std::vector<std::string>& lines) {
  std::ofstream out(file, std::ios::trunc);
  for (const auto& l : lines) out << l << "\n";
}

// A sealed job directory like the launcher leaves: two ranks with a few records each.
// `edit_seal` changes the seal object before it is signed, as a forger with the key could.
void make_sealed_job(const fs::path& dir, bool report_heads = true,
                     const std::function<void(nlohmann::json&)>& edit_seal = {}) {
  const auto key = SealKey::generate();
  auto launcher = AuditLog::create(dir / kLauncherFile, {kJob, std::nullopt, true});
  launcher->event("job.start", true, {},
                  {{"ranks", 2},
                   {"audit_key", {{"algorithm", "ed25519"}, {"public_key", key.public_key_hex()}}}});
  nlohmann::json heads = nlohmann::json::array();
  for (int r = 0; r < 2; ++r) {
    auto log = AuditLog::create(dir / rank_file_name(r), {kJob, r});
    log->event("rank.join", true);
    for (int i = 0; i < 5; ++i) {
      MessageRecord m;
      m.action = "message.send";
      m.peer = 1 - r;
      m.comm = "world";
      m.tag = i;
      m.bytes = 100;
      m.msg = static_cast<std::uint64_t>(i + 1);
      log->message(m);
      m.action = "message.receive";
      log->message(m);
    }
    log->event("rank.finalize", true);
    const ChainHead head = log->close();
    heads.push_back({{"rank", r}, {"seq", head.seq}, {"hash", head.hash},
                     {"source", report_heads ? "reported" : "file"}});
  }
  launcher->event("job.end", true);
  const ChainHead lh = launcher->head();
  nlohmann::json seal = {{"job", kJob},
                         {"sealed_at", "now"},
                         {"launcher", {{"seq", lh.seq}, {"hash", lh.hash}}},
                         {"ranks", heads}};
  if (edit_seal) edit_seal(seal);
  launcher->signed_event("audit.seal", {{"seal", nlohmann::ordered_json(seal)}},
                         [&](std::string_view line) { return key.sign(seal_message(line)); });
  launcher->close();
}

std::vector<std::string> kinds(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : verify(load_audit_dir(dir), std::nullopt).findings) {
    out.push_back(f.file + ":" + std::to_string(f.line) + ":" + f.kind);
  }
  return out;
}

// A name reads the same in a message record (the hot path's own escaping) as in an event record
// (nlohmann's): once, "é" became "Ã©" in message records, and invalid bytes differed too.
TEST(AuditLog, NamesAreEscapedAlikeInMessageAndEventRecords) {
  const std::string names[] = {
      "world",        "caf\xc3\xa9",      "\xf0\x9f\x98\x80 grin", "\xe2\x82\xac",
      "bad \xff end", "\xe9 alone",       "cut \xe2\x82",       "\xc0\x80 overlong",
      "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 past max", "\xe2\x28\xa1 reread",
      "ctl \b\f\n\r\t\x01\x7f \"q\" \\", "\xc2\x9b csi", std::string("nul\0in", 6)};
  for (const auto& name : names) {
    TempDir dir;
    const fs::path file = dir.path() / "rank-0.jsonl";
    auto log = AuditLog::create(file, {kJob, 0});
    log->event("comm.create", true, {}, {{"comm", name}});
    MessageRecord m;
    m.comm = name;
    log->message(m);
    log->close();
    const auto lines = lines_of(file);
    ASSERT_EQ(lines.size(), 2u);
    const auto event = nlohmann::json::parse(lines[0]);
    const auto message = nlohmann::json::parse(lines[1]);
    EXPECT_EQ(message["sempi"]["comm"], event["sempi"]["comm"]) << testing::PrintToString(name);
    // The same bytes too, as nlohmann writes them with ensure_ascii and replacement.
    const std::string expected =
        "\"comm\":" + nlohmann::json(name).dump(-1, ' ', true,
                                               nlohmann::json::error_handler_t::replace);
    EXPECT_NE(lines[1].find(expected), std::string::npos) << lines[1] << "\n" << expected;
  }
}

TEST(AuditLog, RecordsAreChainedJsonWithPrivateMode) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-3.jsonl";
  auto log = AuditLog::create(file, {kJob, 3});
  log->event("comm.create", true, {}, {{"comm", "we\"ird\n\xff name"}, {"members", {1, 2}}});
  MessageRecord m;
  m.peer = 1;
  m.comm = "world";
  m.bytes = 42;
  const Sha256 digest = sha256(std::string_view("payload"));
  m.digest = &digest;
  log->message(m);
  const ChainHead head = log->close();
  log->event("after.close", true);  // dropped, never written
  EXPECT_EQ(log->dropped(), 1u);

  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 2u);
  const auto first = nlohmann::json::parse(lines[0]);
  const auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(first["event"]["sequence"], 0);
  EXPECT_EQ(first["sempi"]["prev"], kZeroHash);
  EXPECT_EQ(first["sempi"]["rank"], 3);
  EXPECT_EQ(first["sempi"]["job"], kJob);
  EXPECT_TRUE(first["@timestamp"].get<std::string>().ends_with("Z"));
  EXPECT_EQ(second["event"]["action"], "message.send");
  EXPECT_EQ(second["sempi"]["prev"], to_hex(sha256(lines[0])));
  EXPECT_EQ(second["sempi"]["sha256"], to_hex(digest));
  EXPECT_EQ(head.seq, 1);
  EXPECT_EQ(head.hash, to_hex(sha256(lines[1])));
  // A log is never appended to: a second create of the same file fails.
  EXPECT_THROW(AuditLog::create(file, {kJob, 3}), Error);
}

// The exact bytes of a message record with every optional field: the format is what readers
// (sempi audit, SIEM pipelines) parse, so rendering changes must not alter it.
TEST(AuditLog, MessageRecordBytesAreStable) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-7.jsonl";
  auto log = AuditLog::create(file, {kJob, 7});
  MessageRecord m;
  m.action = "policy.deny";
  m.success = false;
  m.reason = "pair \"denied\"";
  m.peer = 12;
  m.comm = "we\"ird\\\n\t\r\x01\xff name";
  m.context = 4294967295u;
  m.op = "bcast";
  m.tag = -3;
  m.bytes = 18446744073709551615ull;
  m.msg = 99;
  m.direction = "receive";
  m.dry_run = true;
  const Sha256 digest = sha256(std::string_view("payload"));
  m.digest = &digest;
  log->message(m);
  m = MessageRecord{};
  m.comm = "";
  log->message(m);
  log->close();

  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 2u);
  const std::string stamp = R"({"@timestamp":"YYYY-MM-DDTHH:MM:SS.uuuuuuZ")";
  for (const auto& line : lines) {
    ASSERT_GT(line.size(), stamp.size());
    for (std::size_t i = 0; i < stamp.size(); ++i) {
      const char c = line[i];
      const bool digit = c >= '0' && c <= '9';
      EXPECT_TRUE(std::string("YMDHSu").find(stamp[i]) == std::string::npos ? c == stamp[i] : digit)
          << line;
    }
  }
  EXPECT_EQ(lines[0].substr(stamp.size()),
            R"(,"event":{"sequence":0,"action":"policy.deny","outcome":"failure",)"
            R"("reason":"pair \"denied\""},"sempi":{"job":")" + kJob +
                R"(","source":"rank","rank":7,"peer":12,)"
                R"("comm":"we\"ird\\\n\t\r\u0001\ufffd name","context":4294967295,"op":"bcast",)"
                R"("tag":-3,"bytes":18446744073709551615,"msg":99,"direction":"receive",)"
                R"("dry_run":true,"sha256":")" + to_hex(digest) + R"(","prev":")" + kZeroHash +
                R"("}})");
  EXPECT_EQ(lines[1].substr(stamp.size()),
            R"(,"event":{"sequence":1,"action":"message.send","outcome":"success"},)"
            R"("sempi":{"job":")" + kJob +
                R"(","source":"rank","rank":7,"peer":0,"comm":"","context":0,"op":"p2p",)"
                R"("tag":0,"bytes":0,"msg":0,"prev":")" + to_hex(sha256(lines[0])) + R"("}})");
}

// Message records are captured on the message path and rendered later; events are rendered at
// once. The file must still hold every record in call order, with a valid chain, whoever
// renders and however the rendering is split.
TEST(AuditLog, CapturedMessagesKeepCallOrderAcrossEventsAndPartialRenders) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-0.jsonl";
  auto log = AuditLog::create(file, {kJob, 0});
  MessageRecord m;
  const std::string name = "a-communicator-name-longer-than-sso";
  m.comm = name;
  int expected_tag = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      m.tag = expected_tag++;
      log->message(m);
    }
    EXPECT_TRUE(log->has_pending());
    log->try_render_pending(2);  // partial (nobody else holds the log): three stay queued
    EXPECT_TRUE(log->has_pending());
    m.tag = expected_tag++;
    log->message(m);
    log->event("comm.rename", true);  // renders everything captured before it first
    EXPECT_FALSE(log->has_pending());
  }
  std::string transient = "transient-name-also-longer-than-sso";
  m.comm = transient;
  m.tag = expected_tag++;
  log->message(m);
  transient.assign(transient.size(), 'x');  // captured: the caller may reuse its buffer
  const ChainHead head = log->head();  // renders the rest
  log->close();

  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(expected_tag + 3));
  int tag = 0;
  std::string prev = kZeroHash;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto record = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(record["event"]["sequence"], i);
    EXPECT_EQ(record["sempi"]["prev"], prev);
    prev = to_hex(sha256(lines[i]));
    if (record["event"]["action"] == "comm.rename") {
      EXPECT_EQ(tag % 6, 0) << "event out of order at line " << i;
      continue;
    }
    EXPECT_EQ(record["sempi"]["tag"], tag) << "line " << i;
    EXPECT_EQ(record["sempi"]["comm"], tag == expected_tag - 1
                                           ? "transient-name-also-longer-than-sso"
                                           : "a-communicator-name-longer-than-sso");
    ++tag;
  }
  EXPECT_EQ(head.seq, static_cast<std::int64_t>(lines.size()) - 1);
  EXPECT_EQ(head.hash, prev);
}

// Rendered records wait in a buffer that grows from 68 KiB as they accumulate, and reach the
// file when it holds flush_bytes (here 256 KiB: two doublings), when the oldest is max_age
// old, or at close; growing keeps every byte and the chain.
TEST(AuditLog, BufferedRecordsReachTheFileAtFlushBytesOrMaxAge) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-2.jsonl";
  AuditLog::Options options{kJob, 2};
  options.flush_bytes = 256 * 1024;
  options.max_age = std::chrono::hours(1);
  auto log = AuditLog::create(file, options);
  MessageRecord m;
  m.comm = "world";
  int records = 0;
  while (fs::file_size(file) == 0) {
    ASSERT_LT(records, 2000) << "256 KiB of records never reached the file";
    m.tag = records++;
    log->message(m);
    log->render_pending();
  }
  // Records of ~300 bytes: the write came with the record that crossed 256 KiB, not before.
  EXPECT_GT(records, 256 * 1024 / 400);
  EXPECT_GE(fs::file_size(file), 256u * 1024);
  const auto written = fs::file_size(file);
  m.tag = records++;
  log->message(m);
  log->render_pending();
  EXPECT_EQ(fs::file_size(file), written) << "one more record is buffered, not written";

  // max_age 0: every record is old enough to write at once.
  const fs::path aged_file = dir.path() / "rank-3.jsonl";
  AuditLog::Options aged{kJob, 3};
  aged.max_age = std::chrono::milliseconds(0);
  auto aged_log = AuditLog::create(aged_file, aged);
  aged_log->message(m);
  aged_log->render_pending();
  EXPECT_EQ(lines_of(aged_file).size(), 1u);
  aged_log->close();

  log->close();
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(records));
  std::string prev = kZeroHash;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto record = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(record["sempi"]["tag"], i);
    EXPECT_EQ(record["sempi"]["prev"], prev) << "line " << i;
    prev = to_hex(sha256(lines[i]));
  }
}

// Capturing threads, a renderer and events run at once (as the engine's message path, a
// waiting rank and the background thread do); nothing is lost and the chain holds. Also run
// under TSan in CI's sanitizer builds.
TEST(AuditLog, ConcurrentCaptureAndRenderLoseNothing) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-1.jsonl";
  auto log = AuditLog::create(file, {kJob, 1});
  constexpr int kThreads = 3;
  constexpr int kPerThread = 3000;  // more than kMaxQueued in all: capturers render too
  std::atomic<bool> stop{false};
  std::thread renderer([&] {
    while (!stop.load()) {
      log->render_pending(3);
      log->flush_if_due();
    }
  });
  std::vector<std::thread> capturers;
  for (int t = 0; t < kThreads; ++t) {
    capturers.emplace_back([&, t] {
      MessageRecord m;
      m.comm = "world";
      m.peer = t;
      for (int i = 0; i < kPerThread; ++i) {
        m.tag = i;
        log->message(m);
        if (i % 1000 == 0) log->event("rank.mark", true);
      }
    });
  }
  for (auto& c : capturers) c.join();
  stop = true;
  renderer.join();
  log->close();

  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * (kPerThread + 3)));
  std::vector<int> next_tag(kThreads, 0);  // each thread's records appear in its own order
  std::string prev = kZeroHash;
  for (const auto& line : lines) {
    const auto record = nlohmann::json::parse(line);
    ASSERT_EQ(record["sempi"]["prev"], prev);
    prev = to_hex(sha256(line));
    if (record["event"]["action"] != "message.send") continue;
    const int peer = record["sempi"]["peer"];
    EXPECT_EQ(record["sempi"]["tag"], next_tag[static_cast<std::size_t>(peer)]++);
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next_tag[static_cast<std::size_t>(t)], kPerThread);
}

// Logs are read a record at a time: lines across the reader's 64 KiB chunks arrive whole, a
// last line without a newline is marked cut off, and an overlong line is cut at the limit and
// ends the reading (nothing after it can be linked to the records before).
TEST(AuditReader, ReadsLinesAcrossChunksAndCutsOverlongOnes) {
  TempDir dir;
  const fs::path path = dir.path() / "rank-0.jsonl";
  const std::string big = R"({"s":")" + std::string(200 * 1024, 'x') + R"("})";
  {
    std::ofstream out(path, std::ios::binary);
    out << R"({"a":1})" << "\n" << big << "\n\n" << R"({"c":3)";
  }
  const LogFile file{"rank-0.jsonl", path, true};
  std::vector<Record> seen;
  for_each_record(file, [&](const Record& r) {
    seen.push_back(r);
    return true;
  });
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen[0].parsed());
  EXPECT_TRUE(seen[1].parsed()) << "a 200 KiB line spans four chunks";
  EXPECT_EQ(seen[1].text, big);
  EXPECT_TRUE(seen[2].text.empty());
  EXPECT_EQ(seen[3].text, R"({"c":3)");
  EXPECT_TRUE(seen[3].cut_off);
  EXPECT_FALSE(seen[2].cut_off);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].line, i + 1);
    EXPECT_FALSE(seen[i].oversized);
  }

  seen.clear();
  for_each_record(file, [&](const Record& r) {
    seen.push_back(r);
    return r.line < 2;  // stops early
  });
  EXPECT_EQ(seen.size(), 2u);

  seen.clear();
  for_each_record(file, [&](const Record& r) {
    seen.push_back(r);
    return true;
  }, 4096);
  ASSERT_EQ(seen.size(), 2u) << "reading ends at the line longer than the limit given";
  EXPECT_FALSE(seen[1].parsed());
  EXPECT_TRUE(seen[1].oversized);
  EXPECT_FALSE(seen[1].cut_off);
  EXPECT_EQ(seen[1].text, big.substr(0, 4096));
}

// A line over 8 MiB ends the reading of its file: a sparse file of terabytes without a newline
// (it costs nothing on disk) took hours to read through. 64 MiB here, so that a file size limit
// (ulimit -f) does not kill the test.
TEST(AuditVerify, AHugeLineEndsTheReadingOfItsFile) {
  TempDir dir;
  make_sealed_job(dir.path());
  const fs::path rank0 = dir.path() / "rank-0.jsonl";
  std::error_code ec;
  fs::resize_file(rank0, fs::file_size(rank0) + (std::uintmax_t{64} << 20), ec);
  ASSERT_FALSE(ec) << ec.message();
  const auto result = verify(load_audit_dir(dir.path()), std::nullopt);
  std::string all;
  for (const auto& f : result.findings) {
    all += f.file + ":" + std::to_string(f.line) + ":" + f.kind + ": " + f.message + "\n";
  }
  EXPECT_NE(all.find("rank-0.jsonl:13:corrupt: a line over 8 MiB, not a record; the rest of the "
                     "file was not read"),
            std::string::npos)
      << all;
}

// Deep nesting is refused before parsing: its tree would cost ~40 times the line.
TEST(AuditReader, LinesNestedDeeperThanARecordAreNotParsed) {
  TempDir dir;
  const LogFile file{"deep", dir.path() / "deep", true};
  const auto nested = [](std::size_t depth) {
    return "{\"a\":" + std::string(depth - 1, '[') + "\"]]]\\\"[[[\"" + std::string(depth - 1, ']') + "}";
  };
  std::ofstream(file.path) << nested(kMaxRecordDepth) << "\n" << nested(kMaxRecordDepth + 1) << "\n";
  std::vector<bool> parsed;
  for_each_record(file, [&](const Record& r) {
    parsed.push_back(r.parsed());
    return true;
  });
  EXPECT_EQ(parsed, (std::vector<bool>{true, false}));
  // The same rule for a single line (sempirun reads a dead rank's last line with it).
  EXPECT_TRUE(parse_record(nested(kMaxRecordDepth)).is_object());
  EXPECT_TRUE(parse_record(nested(kMaxRecordDepth + 1)).is_null());
  EXPECT_TRUE(parse_record("[1,2]").is_null());
  EXPECT_TRUE(parse_record("{\"a\":").is_null());
}

TEST(AuditSeal, SignsAndRejectsForgeries) {
  const auto key = SealKey::generate();
  const std::string sig = key.sign("message");
  EXPECT_TRUE(verify_seal_signature(key.public_key_hex(), "message", sig));
  EXPECT_FALSE(verify_seal_signature(key.public_key_hex(), "messagE", sig));
  EXPECT_FALSE(verify_seal_signature(SealKey::generate().public_key_hex(), "message", sig));
  EXPECT_FALSE(verify_seal_signature("zz", "message", sig));
  EXPECT_FALSE(verify_seal_signature(key.public_key_hex(), "message", "00"));
}

TEST(AuditVerify, IntactJobVerifies) {
  TempDir dir;
  make_sealed_job(dir.path());
  const auto result = verify(load_audit_dir(dir.path()), std::nullopt);
  EXPECT_TRUE(result.ok()) << result.findings.front().message;
  EXPECT_TRUE(result.sealed);
  EXPECT_EQ(result.files, 3u);
  const auto wrong_key = verify(load_audit_dir(dir.path()), std::string(64, '0'));
  EXPECT_FALSE(wrong_key.ok());
}

TEST(AuditVerify, DetectsEachKindOfTampering) {
  struct Case {
    const char* name;
    std::function<void(const fs::path&)> tamper;
    std::string expected;  // file:line:kind among the findings
  };
  const auto rank0 = [](const fs::path& d) { return d / "rank-0.jsonl"; };
  const std::vector<Case> cases = {
      {"edit", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l[3].replace(l[3].find("\"bytes\":100"), 11, "\"bytes\":999");
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:4:edited"},
      {"edit-last", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l.back().replace(l.back().find("success"), 7, "failure");
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:12:edited"},
      {"delete", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l.erase(l.begin() + 4);
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:5:deleted"},
      {"reorder", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         std::swap(l[2], l[3]);
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:3:reordered"},
      {"truncate-records", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l.resize(8);
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:0:truncated"},
      {"truncate-bytes", [&](const fs::path& d) {
         fs::resize_file(rank0(d), fs::file_size(rank0(d)) - 20);
       }, "rank-0.jsonl:12:truncated"},
      // A forged sequence number, the largest there is: found, without walking the numbers it
      // skips or overflowing.
      {"forged-seq", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l[4].replace(l[4].find("\"sequence\":4"), 12, "\"sequence\":9223372036854775807");
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:5:deleted"},
      {"append", [&](const fs::path& d) {
         auto l = lines_of(rank0(d));
         l.push_back(l.back());
         write_lines(rank0(d), l);
       }, "rank-0.jsonl:13:reordered"},
      {"missing", [&](const fs::path& d) { fs::remove(d / "rank-1.jsonl"); },
       "rank-1.jsonl:0:missing"},
      // A zero-padded copy must not stand in for the genuine log, whatever the listing order.
      {"alias", [&](const fs::path& d) {
         for (std::string zeros = "0"; zeros.size() < 8; zeros += "0") {
           fs::copy_file(d / "rank-1.jsonl", d / ("rank-" + zeros + "1.jsonl"));
         }
         auto l = lines_of(d / "rank-1.jsonl");
         l.erase(l.begin() + 2);
         write_lines(d / "rank-1.jsonl", l);
       }, "rank-1.jsonl:3:deleted"},
      {"alias-listed", [&](const fs::path& d) { fs::copy_file(d / "rank-1.jsonl", d / "rank-01.jsonl"); },
       "rank-01.jsonl:0:foreign"},
      {"bad-seal", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         const auto at = l.back().find("\"seq\":");
         l.back().replace(at, 7, "\"seq\":9");
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      // The seal record is signed whole, not only its seal object.
      {"seal-timestamp", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         const auto at = l.back().find("Z\"");
         l.back()[at - 1] = l.back()[at - 1] == '0' ? '1' : '0';
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      {"seal-outcome", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         l.back().replace(l.back().find("\"success\""), 9, "\"failure\",\"reason\":\"forged\"");
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      {"seal-whitespace", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         l.back().insert(1, " ");
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      {"seal-signature-twice", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         const auto at = l.back().find(",\"signature\"");
         const auto end = l.back().find('"', l.back().find(":\"", at) + 2);
         l.back().insert(1, l.back().substr(at + 1, end - at) + ",");
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      {"seal-signature-case", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         const auto at = l.back().find("\"signature\":\"") + 13;
         for (std::size_t i = at; i < at + 128; ++i) {
           l.back()[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(l.back()[i])));
         }
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:3:bad_seal"},
      {"unsealed", [&](const fs::path& d) {
         auto l = lines_of(d / kLauncherFile);
         l.pop_back();
         write_lines(d / kLauncherFile, l);
       }, "launcher.jsonl:0:unsealed"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    make_sealed_job(dir.path());
    c.tamper(dir.path());
    const auto found = kinds(dir.path());
    std::string all;
    for (const auto& f : found) all += f + "\n";
    EXPECT_NE(std::find(found.begin(), found.end(), c.expected), found.end())
        << c.name << ": expected " << c.expected << ", got:\n" << all;
  }
}

// Whoever rewrites a directory signs it with a key of their own, so a seal that verifies may
// still say anything: a seal object without its parts is a finding, never a crash.
TEST(AuditVerify, ASignedSealWithoutItsPartsIsAFinding) {
  for (const char* part : {"launcher", "ranks", "job"}) {
    TempDir dir;
    make_sealed_job(dir.path(), true, [&](nlohmann::json& seal) { seal.erase(part); });
    const auto result = verify(load_audit_dir(dir.path()), std::nullopt);
    EXPECT_FALSE(result.ok()) << part;
    EXPECT_TRUE(result.sealed) << part;
  }
  TempDir dir;
  make_sealed_job(dir.path(), true, [](nlohmann::json& seal) {
    seal["launcher"] = "not an object";
    seal["ranks"] = {1, "two", {{"rank", "x"}}};
  });
  EXPECT_FALSE(verify(load_audit_dir(dir.path()), std::nullopt).ok());
}

TEST(AuditVerify, SaysWhatAnIntactResultDoesNotProve) {
  TempDir dir;
  make_sealed_job(dir.path(), /*report_heads=*/false);
  const auto unpinned = verify(load_audit_dir(dir.path()), std::nullopt);
  ASSERT_TRUE(unpinned.ok());
  std::string notes;
  for (const auto& n : unpinned.notes) notes += n + "\n";
  EXPECT_NE(notes.find("rank 0 ended without closing its log"), std::string::npos) << notes;
  EXPECT_NE(notes.find("rank 1 ended without closing its log"), std::string::npos) << notes;
  EXPECT_NE(notes.find("--public-key"), std::string::npos) << notes;
  std::string key;
  for_each_record(load_audit_dir(dir.path()).launcher, [&](const Record& r) {
    key = r.sempi("audit_key")->at("public_key").get<std::string>();
    return false;
  });
  const auto pinned = verify(load_audit_dir(dir.path()), key);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned.notes.size(), 2u) << "pinned: only the two ranks that did not close";
}

// A rank killed in the middle of a write leaves a cut-off line after its last whole record.
// The launcher seals both (source "file", and the line's length and hash): a note, and the log
// verifies. A cut-off line the seal does not cover is a finding: added after the job (readers
// that take a last line without its newline would believe it), or after a rank closed its log.
TEST(AuditVerify, ARecordCutOffAsARankDiedIsANoteNotAFinding) {
  // A partial record, and one whole but for its newline (the write stopped right before it).
  for (const std::string tail : {R"({"@timestamp":"2026-)", R"({"event":{"sequence":12}})"}) {
    const auto seal_tail = [&](const std::string& sealed) {
      return [sealed](nlohmann::json& seal) {
        seal["ranks"][0]["cut_off"] = {{"bytes", sealed.size()}, {"hash", to_hex(sha256(sealed))}};
      };
    };
    TempDir died;
    make_sealed_job(died.path(), /*report_heads=*/false, seal_tail(tail));
    std::ofstream(died.path() / "rank-0.jsonl", std::ios::app) << tail;
    const auto result = verify(load_audit_dir(died.path()), std::nullopt);
    EXPECT_TRUE(result.ok()) << tail << ": " << result.findings.front().file << ":"
                             << result.findings.front().message;
    std::string notes;
    for (const auto& n : result.notes) notes += n + "\n";
    EXPECT_NE(notes.find("rank 0's log ends in a record cut off as it was written (line 13)"),
              std::string::npos)
        << notes;

    TempDir appended;  // after the job: the seal says the log ended at its last newline
    make_sealed_job(appended.path(), /*report_heads=*/false);
    std::ofstream(appended.path() / "rank-0.jsonl", std::ios::app) << tail;
    EXPECT_EQ(kinds(appended.path()), std::vector<std::string>{"rank-0.jsonl:13:appended"}) << tail;

    TempDir changed;  // as long as the sealed one, other bytes
    std::string other = tail;
    other.back() = other.back() == 'x' ? 'y' : 'x';
    make_sealed_job(changed.path(), /*report_heads=*/false, seal_tail(tail));
    std::ofstream(changed.path() / "rank-0.jsonl", std::ios::app) << other;
    EXPECT_EQ(kinds(changed.path()), std::vector<std::string>{"rank-0.jsonl:13:appended"}) << tail;

    TempDir removed;  // sealed, and gone
    make_sealed_job(removed.path(), /*report_heads=*/false, seal_tail(tail));
    EXPECT_EQ(kinds(removed.path()), std::vector<std::string>{"rank-0.jsonl:0:truncated"}) << tail;

    TempDir closed;
    make_sealed_job(closed.path(), /*report_heads=*/true);
    std::ofstream(closed.path() / "rank-0.jsonl", std::ios::app) << tail;
    const auto found = kinds(closed.path());
    EXPECT_EQ(found, std::vector<std::string>{"rank-0.jsonl:13:truncated"}) << tail;
  }
  // The last record edited (not its link), then a cut-off line added: the edit is named.
  TempDir edited;
  make_sealed_job(edited.path(), /*report_heads=*/false);
  auto l = lines_of(edited.path() / "rank-0.jsonl");
  l.back().replace(l.back().find("success"), 7, "failure");
  write_lines(edited.path() / "rank-0.jsonl", l);
  std::ofstream(edited.path() / "rank-0.jsonl", std::ios::app) << "xx";
  const auto found = kinds(edited.path());
  EXPECT_NE(std::find(found.begin(), found.end(), "rank-0.jsonl:12:edited"), found.end());
  EXPECT_NE(std::find(found.begin(), found.end(), "rank-0.jsonl:13:truncated"), found.end());
}

// A hostile rank writes its own chain: a record that parses, links and is sealed, but is not in
// the form sempi writes, could read differently to another JSON reader (a key twice: nlohmann
// keeps the last, others the first; bytes after a NUL, where nlohmann stops). A finding.
TEST(AuditVerify, ARecordNotInTheFormSempiWritesIsAFinding) {
  const std::function<std::string(std::string)> forgeries[] = {
      [](std::string record) {
        record.insert(record.find("\"rank\":0"), "\"rank\":1,");
        return record;
      },
      [](std::string record) { return record + std::string("\0 and more", 10); },
      [](std::string record) { return record.substr(0, record.size() - 1) + " }"; },
  };
  for (const auto& forge : forgeries) {
    TempDir dir;
    std::string forged;
    make_sealed_job(dir.path(), /*report_heads=*/true, [&](nlohmann::json& seal) {
      auto l = lines_of(dir.path() / "rank-0.jsonl");
      l.at(5) = forged = forge(l.at(5));
      for (std::size_t i = 6; i < l.size(); ++i) {  // the rank chains what it wrote
        const auto at = l[i].find("\"prev\":\"") + 8;
        l[i].replace(at, 64, to_hex(sha256(l[i - 1])));
      }
      write_lines(dir.path() / "rank-0.jsonl", l);
      seal["ranks"][0]["hash"] = to_hex(sha256(l.back()));
    });
    EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"rank-0.jsonl:6:corrupt"})
        << printable(forged);
  }
}

// What verify says of a log it cannot or must not read whole: a rank log the seal says was
// missing when the job ended (deleted during the job: a finding, not "never joined"), a log
// that is a symbolic link (not followed), and a hostile job id (quoted only in part).
TEST(AuditVerify, MissingLinkedAndHugeValuesAreFindingsOfBoundedSize) {
  TempDir missing;
  make_sealed_job(missing.path(), true, [&](nlohmann::json& seal) {
    seal["ranks"][1]["source"] = "missing";
    fs::remove(missing.path() / "rank-1.jsonl");
  });
  EXPECT_EQ(kinds(missing.path()), std::vector<std::string>{"rank-1.jsonl:0:missing"});
  TempDir never;
  make_sealed_job(never.path(), true, [&](nlohmann::json& seal) {
    seal["ranks"][1]["source"] = "none";
    fs::remove(never.path() / "rank-1.jsonl");
  });
  EXPECT_EQ(kinds(never.path()), std::vector<std::string>{}) << "never welcomed: no log";

  TempDir linked;
  make_sealed_job(linked.path());
  fs::rename(linked.path() / "rank-1.jsonl", linked.path() / "elsewhere");
  fs::create_symlink("elsewhere", linked.path() / "rank-1.jsonl");
  const auto result = verify(load_audit_dir(linked.path()), std::nullopt);
  std::string all;
  for (const auto& f : result.findings) all += f.file + ": " + f.message + "\n";
  EXPECT_NE(all.find("rank-1.jsonl: cannot read"), std::string::npos) << all;

  TempDir huge;
  make_sealed_job(huge.path());
  auto l = lines_of(huge.path() / "rank-0.jsonl");
  const std::string job_field = "\"job\":\"" + kJob + "\"";
  for (auto& line : l)
    line.replace(line.find(job_field), job_field.size(),
                 "\"job\":\"" + std::string(1 << 20, 'b') + "\"");
  write_lines(huge.path() / "rank-0.jsonl", l);
  const auto big = verify(load_audit_dir(huge.path()), std::nullopt);
  ASSERT_FALSE(big.ok());
  for (const auto& f : big.findings) EXPECT_LT(f.message.size(), 400u) << f.kind;
}

// The launcher log is read once, its chain and its seal from the same bytes (a second read
// could see another file): a fragment appended after the seal is named as cut off, and the
// seal before it still holds.
TEST(AuditVerify, AFragmentAfterTheSealIsTruncationNotAMissingSeal) {
  TempDir dir;
  make_sealed_job(dir.path());
  std::ofstream(dir.path() / kLauncherFile, std::ios::app) << "{\"event\":{\"sequ";
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"launcher.jsonl:4:truncated"});
}

// A directory that can be searched but not listed is a finding, and what reconcile could not
// count; the logs the launcher log names are still checked. Root lists any directory, so the
// check runs in a child, as nobody if the test runs as root.
TEST(AuditVerify, ADirectoryThatCannotBeListedIsAFinding) {
  TempDir root;
  const fs::path job = root.path() / "job";
  fs::create_directory(job);
  make_sealed_job(job);
  for (const char* name : {kLauncherFile, "rank-0.jsonl", "rank-1.jsonl"}) {
    ASSERT_EQ(::chmod((job / name).c_str(), 0644), 0);
  }
  ASSERT_EQ(::chmod(root.path().c_str(), 0711), 0);
  ASSERT_EQ(::chmod(job.c_str(), 0311), 0);  // search, no read: for the owner and for others
  struct Restore {  // whatever fails below: TempDir must be able to remove it
    const fs::path& dir;
    ~Restore() { ::chmod(dir.c_str(), 0700); }
  } restore{job};
  constexpr int kCannotDropRoot = 3;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 ||
                             ::setuid(65534) != 0)) {
      ::_exit(kCannotDropRoot);
    }
    std::string text;
    try {
      const auto dir = load_audit_dir(job);
      for (const auto& f : verify(dir, std::nullopt).findings) {
        text += f.file + ":" + std::to_string(f.line) + ":" + f.kind + ": " + f.message + "\n";
      }
      const auto r = reconcile(dir);
      for (const auto& u : r.unread) text += "reconcile: " + u + "\n";
      text += "matched " + std::to_string(r.matched) + "\n";
    } catch (const std::exception& e) {
      text = std::string("error: ") + e.what();
    }
    const bool written = ::write(fds[1], text.data(), text.size()) ==
                         static_cast<ssize_t>(text.size());
    ::_exit(written ? 0 : 4);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kCannotDropRoot) {
    GTEST_SKIP() << "root here cannot become nobody (a user namespace?): nothing to check as";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string why =
      "cannot list the directory (Permission denied): only the logs the launcher log names were "
      "looked at";
  EXPECT_EQ(text, ".:0:unreadable: " + why + "\nreconcile: .: " + why + "\nmatched 10\n");
}

// A log that cannot be read is a finding (it may be what tampering left), not an error of the
// command line. /proc/self/mem is a regular file whose first page cannot be read (as root too).
TEST(AuditVerify, AFileThatCannotBeReadIsAFinding) {
  TempDir dir;
  make_sealed_job(dir.path());
  fs::remove(dir.path() / "rank-1.jsonl");
  fs::create_symlink("/proc/self/mem", dir.path() / "rank-1.jsonl");
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"rank-1.jsonl:0:unreadable"});
  // Replaced by a FIFO after the directory was listed: opening it must not wait for a writer.
  const AuditDir listed = load_audit_dir(dir.path());
  fs::remove(dir.path() / "rank-1.jsonl");
  ASSERT_EQ(::mkfifo((dir.path() / "rank-1.jsonl").c_str(), 0600), 0);
  std::vector<std::string> found;
  for (const auto& f : verify(listed, std::nullopt).findings) {
    found.push_back(f.file + ":" + std::to_string(f.line) + ":" + f.kind);
  }
  EXPECT_EQ(found, std::vector<std::string>{"rank-1.jsonl:0:unreadable"});
  // There when the directory is listed, a FIFO, a directory or a dangling link is no log, but
  // not a deleted one either.
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"rank-1.jsonl:0:unreadable"});
  fs::remove(dir.path() / "rank-1.jsonl");
  fs::create_directory(dir.path() / "rank-1.jsonl");
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"rank-1.jsonl:0:unreadable"});
  fs::remove(dir.path() / "rank-1.jsonl");
  fs::create_symlink(dir.path() / "nothing-here", dir.path() / "rank-1.jsonl");
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"rank-1.jsonl:0:unreadable"});
  fs::remove(dir.path() / kLauncherFile);
  fs::create_symlink("/proc/self/mem", dir.path() / kLauncherFile);
  EXPECT_EQ(kinds(dir.path()), std::vector<std::string>{"launcher.jsonl:0:unreadable"});
}

// A forged job.start cannot make verify look for a million rank logs: sempirun's limit holds.
TEST(AuditVerify, ARankCountPastSempirunsLimitIsNotFollowed) {
  TempDir dir;
  make_sealed_job(dir.path());
  auto l = lines_of(dir.path() / kLauncherFile);
  l[0].replace(l[0].find("\"ranks\":2"), 9, "\"ranks\":1048575");
  write_lines(dir.path() / kLauncherFile, l);
  const auto found = kinds(dir.path());
  EXPECT_EQ(std::count_if(found.begin(), found.end(),
                          [](const std::string& f) { return f.ends_with(":0:missing"); }),
            kMaxJobRanks - 2);
}

// sempirun names the directory after the job: another job's intact logs there are foreign.
TEST(AuditVerify, LogsUnderAnotherJobsDirectoryNameAreForeign) {
  TempDir dir;
  const fs::path other = dir.path() / std::string(32, 'b');
  fs::create_directory(other);
  make_sealed_job(other);
  EXPECT_EQ(kinds(other), std::vector<std::string>{"launcher.jsonl:1:foreign"});
  // Named through "." or "..", it is still that directory.
  fs::create_directory(other / "sub");
  for (const fs::path& alias : {other / ".", other / "sub" / "..", other / "sub" / ".." / ""}) {
    EXPECT_EQ(kinds(alias), std::vector<std::string>{"launcher.jsonl:1:foreign"}) << alias;
  }
  const fs::path own = dir.path() / kJob;
  fs::create_directory(own);
  make_sealed_job(own);
  EXPECT_TRUE(kinds(own).empty());
  EXPECT_TRUE(kinds(own / ".").empty());
}

// A finding costs far more than the empty line it reports: a file's problems are listed up to
// kMaxFindingsPerFile, the rest counted in one finding, and the verdict stays a failure.
TEST(AuditVerify, FindingsOfAFileAreCappedAndTheRestCounted) {
  TempDir dir;
  make_sealed_job(dir.path());
  constexpr std::size_t kBadLines = 100000;
  std::ofstream(dir.path() / "rank-0.jsonl", std::ios::app) << std::string(kBadLines, '\n');
  const auto result = verify(load_audit_dir(dir.path()), std::nullopt);
  EXPECT_FALSE(result.ok());
  std::vector<Finding> rank0;
  for (const auto& f : result.findings) {
    if (f.file == "rank-0.jsonl") rank0.push_back(f);
  }
  // The first empty lines (line 13 on), the count of the others, and the head the seal does
  // not match.
  ASSERT_EQ(rank0.size(), kMaxFindingsPerFile + 2);
  for (std::size_t i = 0; i < kMaxFindingsPerFile; ++i) {
    EXPECT_EQ(rank0[i].line, 13 + i);
    EXPECT_EQ(rank0[i].kind, "corrupt");
  }
  EXPECT_EQ(rank0[kMaxFindingsPerFile].kind, "omitted");
  EXPECT_TRUE(rank0[kMaxFindingsPerFile].message.starts_with(
      std::to_string(kBadLines - kMaxFindingsPerFile) + " more problems in rank-0.jsonl"))
      << rank0[kMaxFindingsPerFile].message;
  EXPECT_EQ(rank0.back().kind, "edited");
  EXPECT_EQ(result.problems, kBadLines + 1) << "every empty line, and the head";
}

// Numbers in a record are untrusted too: only a JSON integer from 0 to INT64_MAX is a sequence
// number. Anything else makes the record corrupt and is never cast (a float such as 1e300
// cast to an integer is undefined behaviour: the sanitizer builds catch it).
TEST(AuditVerify, ASequenceNumberThatIsNoIntegerInRangeIsCorrupt) {
  for (const char* sequence : {"4.0", "1e300", "-1e300", "true", "\"4\"",
                               "-9223372036854775808", "18446744073709551615"}) {
    TempDir dir;
    make_sealed_job(dir.path());
    auto l = lines_of(dir.path() / "rank-0.jsonl");
    l[4].replace(l[4].find("\"sequence\":4"), 12, std::string("\"sequence\":") + sequence);
    write_lines(dir.path() / "rank-0.jsonl", l);
    const auto found = kinds(dir.path());
    std::string all;
    for (const auto& f : found) all += f + "\n";
    EXPECT_NE(std::find(found.begin(), found.end(), "rank-0.jsonl:5:corrupt"), found.end())
        << sequence << ":\n" << all;
  }
}

// A seal signed with the key the log names (as whoever rewrites a directory can) whose numbers
// are hostile: the smallest sequence number (seq - 1 would overflow), a rank of 2^32 (which a
// cast would wrap to rank 0) and floats. Each is a finding or ignored, never a cast.
TEST(AuditVerify, ASignedSealWithHostileNumbersIsAFinding) {
  TempDir dir;
  const auto key = SealKey::generate();
  {
    auto launcher = AuditLog::create(dir.path() / kLauncherFile, {kJob, std::nullopt, true});
    launcher->event(
        "job.start", true, {},
        {{"audit_key", {{"algorithm", "ed25519"}, {"public_key", key.public_key_hex()}}}});
    launcher->close();
  }
  const std::string start_hash = to_hex(sha256(lines_of(dir.path() / kLauncherFile).at(0)));
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  ranks.push_back({{"rank", std::int64_t{1} << 32}, {"seq", 0}, {"hash", kZeroHash},
                   {"source", "reported"}});
  ranks.push_back({{"rank", 1e300}, {"seq", 0}, {"hash", kZeroHash}, {"source", "reported"}});
  ranks.push_back({{"rank", 1}, {"seq", 1e300}, {"hash", kZeroHash}, {"source", "reported"}});
  // The launcher head INT64_MAX: what the seal's seq - 1 wraps to.
  const nlohmann::ordered_json launcher_head = {
      {"seq", std::numeric_limits<std::int64_t>::max()}, {"hash", start_hash}};
  const nlohmann::ordered_json seal = {
      {"job", kJob}, {"sealed_at", "now"}, {"launcher", launcher_head}, {"ranks", ranks}};
  const nlohmann::ordered_json seal_event = {
      {"sequence", std::numeric_limits<std::int64_t>::min()},
      {"action", "audit.seal"},
      {"outcome", "success"}};
  const nlohmann::ordered_json fields = {{"job", kJob},
                                         {"source", "launcher"},
                                         {"seal", seal},
                                         {"signature", std::string(128, '0')},
                                         {"prev", start_hash}};
  const nlohmann::ordered_json record = {
      {"@timestamp", "2024-01-01T00:00:00.000000Z"}, {"event", seal_event}, {"sempi", fields}};
  std::string line = record.dump();
  const std::string zeros = "\"signature\":\"" + std::string(128, '0');
  ASSERT_NE(line.find(zeros), std::string::npos) << line;
  line.replace(line.find(zeros) + zeros.size() - 128, 128, key.sign(seal_message(line)));
  std::ofstream(dir.path() / kLauncherFile, std::ios::app) << line << "\n";

  const auto result = verify(load_audit_dir(dir.path()), std::nullopt);
  EXPECT_TRUE(result.sealed) << "signed with the key the log names";
  std::vector<std::string> found;
  std::string all;
  for (const auto& f : result.findings) {
    found.push_back(f.file + ":" + std::to_string(f.line) + ":" + f.kind);
    all += found.back() + ": " + f.message + "\n";
  }
  const auto has = [&](const std::string& what) {
    return std::find(found.begin(), found.end(), what) != found.end();
  };
  EXPECT_TRUE(has("launcher.jsonl:2:corrupt")) << all;
  EXPECT_TRUE(has("launcher.jsonl:0:edited")) << "a seal without a sequence number names no head\n"
                                              << all;
  EXPECT_TRUE(has("rank-1.jsonl:0:missing")) << all;
  for (const auto& f : result.findings) {
    EXPECT_TRUE(f.file == kLauncherFile || f.file == "rank-1.jsonl")
        << "rank 2^32 is not rank 0, nor is 1e300 a rank:\n" << all;
  }
}

TEST(AuditReader, TheEndOfALogIsReadFromTheEnd) {
  TempDir dir;
  const fs::path file = dir.path() / "log";
  const auto write = [&](const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  };
  const auto end = [&](std::size_t max =
                           kMaxRecordBytes) -> std::optional<std::pair<std::string, std::string>> {
    const auto e = read_log_end(file, max);
    if (!e) return std::nullopt;
    return std::pair(e->last_line, e->cut_off);
  };
  using P = std::pair<std::string, std::string>;
  write("");
  EXPECT_EQ(end(), P("", ""));
  write("no newline yet");
  EXPECT_EQ(end(), P("", "no newline yet"));
  write("only\n");
  EXPECT_EQ(end(), P("only", ""));
  write("first\nsecond\ncut off");
  EXPECT_EQ(end(), P("second", "cut off"));
  write("first\n\n");
  EXPECT_EQ(end(), P("", ""));
  const std::string big(300 * 1024, 'x');  // longer than the first steps back
  write("first\n" + big + "\nta");
  EXPECT_EQ(end(), P(big, "ta"));
  EXPECT_EQ(end(1024), std::nullopt) << "longer than allowed";
  write(big + "\n");
  EXPECT_EQ(end(), P(big, ""));
  write("first\n" + big);
  EXPECT_EQ(end(), P("first", big));
  EXPECT_EQ(end(1024), std::nullopt) << "a cut-off line longer than allowed";
  EXPECT_EQ(read_log_end(dir.path() / "absent"), std::nullopt);
}

// A record whose sequence number comes again: a copy says so, a record moved down does not.
TEST(AuditVerify, TellsADuplicatedRecordFromAMovedOne) {
  const auto message_at = [](const fs::path& dir, std::size_t line) {
    for (const auto& f : verify(load_audit_dir(dir), std::nullopt).findings) {
      if (f.file == "rank-0.jsonl" && f.line == line && f.kind == "reordered") return f.message;
    }
    return std::string("no reordered finding at line ") + std::to_string(line);
  };
  {
    TempDir dir;
    make_sealed_job(dir.path());
    auto l = lines_of(dir.path() / "rank-0.jsonl");
    l.insert(l.begin() + 6, l[5]);  // line 7 repeats line 6 (seq 5)
    write_lines(dir.path() / "rank-0.jsonl", l);
    EXPECT_EQ(message_at(dir.path(), 7), "record seq 5 after seq 5 (a duplicated record)");
  }
  {
    TempDir dir;
    make_sealed_job(dir.path());
    auto l = lines_of(dir.path() / "rank-0.jsonl");
    const std::string moved = l[2];  // seq 2, moved to after seq 6
    l.erase(l.begin() + 2);
    l.insert(l.begin() + 6, moved);
    write_lines(dir.path() / "rank-0.jsonl", l);
    EXPECT_EQ(message_at(dir.path(), 7), "record seq 2 after seq 6 (records were reordered)");
  }
}

// Log records are untrusted text: printed, they must not reach the terminal as control codes.
TEST(AuditPrintable, ControlCharactersAreEscaped) {
  EXPECT_EQ(printable("plain text, ünïcode"), "plain text, ünïcode");
  EXPECT_EQ(printable("\x1b[2Jcleared\nforged line\r\x7f"),
            "\\x1b[2Jcleared\\x0aforged line\\x0d\\x7f");
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\xc2\\x9b31m");  // C1 CSI, as UTF-8
  EXPECT_EQ(printable("a\\x1b"), "a\\\\x1b");   // a literal backslash stays distinguishable
}

// A byte 0x80..0x9f outside any UTF-8 character is a C1 control to a terminal in an 8-bit
// mode (0x9b: CSI); inside a well-formed character it is text and stays.
TEST(AuditPrintable, StrayC1BytesAreEscapedAndUtf8IsKept) {
  EXPECT_EQ(printable("\x9b" "31m"), "\\x9b31m");
  EXPECT_EQ(printable("a\x80z\x9f"), "a\\x80z\\x9f");
  EXPECT_EQ(printable("\xe2\x82" "31m"), "\xe2\\x8231m");  // a character cut short
  EXPECT_EQ(printable("\xe0\x80\x9b"), "\xe0\\x80\\x9b");   // an overlong form
  const std::string utf8 = "\xc4\x80 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0";  // U+0100 € 😀 NBSP
  EXPECT_EQ(printable(utf8), utf8);
}

// Text that shows as "world" must be "world": the characters that print as nothing, or
// reorder the rest of the line (bidi controls, CVE-2021-42574), are escaped too.
TEST(AuditPrintable, InvisibleAndBidiCharactersAreEscaped) {
  EXPECT_EQ(printable("wor\xe2\x80\x8bld"), "wor\\u200bld");  // zero-width space
  EXPECT_EQ(printable("a\xe2\x80\xae"
                      "b\xe2\x81\xa9"),
            "a\\u202eb\\u2069");  // RLO ... PDI
  EXPECT_EQ(printable("\xd8\x9c\xef\xbb\xbf"), "\\u061c\\ufeff");
  EXPECT_EQ(printable("\xe2\x80\xa8"), "\\u2028");  // line separator
  EXPECT_EQ(printable("wor\xf3\xa0\x81\xacld"), "wor\\U000e006cld");  // a tag character
  EXPECT_EQ(printable("a\xc2\xad"
                      "b\xef\xb8\x8f"),
            "a\\u00adb\\ufe0f");  // soft hyphen, VS16
  EXPECT_EQ(printable("\xe2\x80\xa7 \xe2\x80\xaf"),
            "\xe2\x80\xa7 \xe2\x80\xaf");  // neighbours kept
}

// A quoted name cannot pass for more fields: its quotes are escaped, and so is any backslash.
TEST(AuditPrintable, QuotedEscapesQuotesAndBackslashes) {
  EXPECT_EQ(in_quotes("world"), "\"world\"");
  EXPECT_EQ(in_quotes("x\" op \"p2p"), "\"x\\\" op \\\"p2p\"");
  EXPECT_EQ(in_quotes("a\\\"b"), "\"a\\\\\\\"b\"");
  EXPECT_EQ(in_quotes("\x1b"), "\"\\x1b\"");
}

TEST(AuditPrintable, PrintableLinesKeepsLineBreaksOnly) {
  EXPECT_EQ(printable_lines("invalid policy:\n  /groups/a: '\x1b[2J'\r\n"),
            "invalid policy:\n  /groups/a: '\\x1b[2J'\\x0d\n");
  EXPECT_EQ(printable_lines(""), "");
}

TEST(AuditReport, TextReportEscapesWhatTheLogSays) {
  TempDir dir;
  make_sealed_job(dir.path());
  {
    auto log = AuditLog::create(dir.path() / rank_file_name(2), {kJob, 2});
    log->event("peer.failure", false, "\x1b]0;owned\x07\nrank 0: all good", {{"peer", 0}});
    // An action or direction sempi would not write is quoted: it cannot pass for fields.
    log->event("policy.deny rank 3", false, {}, {{"direction", "send side) comm (\"x"}});
    log->close();
  }
  const std::string text = report_text(report_json(load_audit_dir(dir.path())));
  EXPECT_NE(
      text.find("rank-2.jsonl:2 \"policy.deny rank 3\" rank 2 (\"send side) comm (\\\"x\" side)"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("\\x1b]0;owned\\x07\\x0arank 0: all good"), std::string::npos) << text;
}

// Rows are as long as their cells: a communicator name that escaping makes four times as long
// still ends its row, with its counts after it, and the rows around it stay whole.
TEST(AuditReport, TextRowsHoldLongCommunicatorNamesWhole) {
  TempDir dir;
  make_sealed_job(dir.path());
  const std::string comm = "long" + std::string(250, '\x1b');
  {
    auto log = AuditLog::create(dir.path() / rank_file_name(2), {kJob, 2});
    MessageRecord m;
    m.peer = 0;
    m.comm = comm;
    m.bytes = 100;
    for (int i = 0; i < 3; ++i) log->message(m);
    log->close();
  }
  const std::string text = report_text(report_json(load_audit_dir(dir.path())));
  ASSERT_GT(printable(comm).size(), 1000u);
  const auto right = [](const std::string& cell, std::size_t width) {
    return std::string(width - std::min(width, cell.size()), ' ') + cell;
  };
  const auto row = [&](const std::string& from, const std::string& to, const std::string& name,
                       const std::string& messages, const std::string& bytes,
                       const std::string& received, const std::string& received_bytes) {
    return "  " + right(from, 6) + " " + right(to, 6) + "  " + name +
           std::string(20 - std::min<std::size_t>(20, name.size()), ' ') + " " +
           right(messages, 10) + " " + right(bytes, 14) + " " + right(received, 10) + " " +
           right(received_bytes, 14) + "\n";
  };
  EXPECT_NE(text.find(row("from", "to", "communicator", "messages", "bytes", "received",
                          "recv bytes")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(row("0", "1", "\"world\"", "5", "500", "5", "500")), std::string::npos)
      << text;
  EXPECT_NE(text.find(row("2", "0", in_quotes(comm), "3", "300", "0", "0")), std::string::npos)
      << text;
  EXPECT_NE(text.find("\ndenials and failures:\n"), std::string::npos) << text;
}

TEST(AuditReport, RecordsWithFieldsOfTheWrongTypeAreReportedNotFatal) {
  // An edited log is exactly what a report is asked about: a record whose "event" or outcome
  // has the wrong JSON type is still listed (verify names the edit), the report goes on.
  TempDir dir;
  make_sealed_job(dir.path());
  auto lines = lines_of(dir.path() / rank_file_name(0));
  auto first = nlohmann::json::parse(lines.front());
  first["event"]["outcome"] = 7;
  first["event"]["reason"] = {1, 2};
  first["@timestamp"] = nullptr;
  lines.front() = first.dump();
  auto second = nlohmann::json::parse(lines[1]);
  second["event"] = "policy.deny";
  lines[1] = second.dump();
  auto third = nlohmann::json::parse(lines[2]);
  third["event"]["action"] = "policy.deny";
  third["event"]["outcome"] = "failure";
  third["event"]["reason"] = 5;
  lines[2] = third.dump();
  write_lines(dir.path() / rank_file_name(0), lines);
  nlohmann::ordered_json report;
  ASSERT_NO_THROW(report = report_json(load_audit_dir(dir.path())));
  ASSERT_EQ(report["denials_and_failures"].size(), 1u) << report.dump();
  EXPECT_EQ(report["denials_and_failures"][0]["line"], 3);
  EXPECT_NO_THROW((void)report_text(report));
}

TEST(AuditReconcile, MatchesSendsWithReceivesAndListsTheRest) {
  TempDir dir;
  make_sealed_job(dir.path());
  auto result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.sends, 10u);
  EXPECT_EQ(result.matched, 10u);
  EXPECT_TRUE(result.unmatched.empty());
  // Drop one receive record: its send is now unmatched.
  auto l = lines_of(dir.path() / "rank-1.jsonl");
  l.erase(l.begin() + 2);
  write_lines(dir.path() / "rank-1.jsonl", l);
  result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.unmatched.size(), 1u);
  EXPECT_NE(result.unmatched[0].find("rank 0 -> rank 1 msg 1"), std::string::npos)
      << result.unmatched[0];
  const auto report = report_json(load_audit_dir(dir.path()));
  ASSERT_EQ(report["traffic"].size(), 2u);
  EXPECT_EQ(report["traffic"][0]["messages"], 5);
  EXPECT_EQ(report["traffic"][0]["bytes"], 500);
}

// What report and reconcile cannot count is listed, and never counted as if it were a whole
// record: a cut-off last line (verify leaves it out of the chain, so a forged receive there
// would otherwise match a send nobody received), a line over the limit, an unreadable file.
TEST(AuditReconcile, WhatCannotBeCountedIsListedNotCounted) {
  TempDir dir;
  make_sealed_job(dir.path(), /*report_heads=*/false);
  const fs::path rank1 = dir.path() / "rank-1.jsonl";
  auto l = lines_of(rank1);
  const std::string receive = l[2];
  l.erase(l.begin() + 2);
  write_lines(rank1, l);
  std::ofstream(rank1, std::ios::app) << receive;  // no newline
  auto result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.matched, 9u);
  ASSERT_EQ(result.unmatched.size(), 1u);
  ASSERT_EQ(result.unread.size(), 1u);
  EXPECT_EQ(result.unread[0],
            "rank-1.jsonl:12: the last line is cut off (no newline); not counted");
  auto report = report_json(load_audit_dir(dir.path()));
  EXPECT_EQ(report["traffic"][0]["received"], 4) << report.dump();
  ASSERT_TRUE(report.contains("not_read"));
  EXPECT_EQ(report["not_read"][0], result.unread[0]);
  EXPECT_NE(report_text(report).find("not counted above:\n  rank-1.jsonl:12: the last line"),
            std::string::npos);

  fs::remove(rank1);
  fs::create_symlink("/proc/self/mem", rank1);
  result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.unread.size(), 1u);
  EXPECT_TRUE(result.unread[0].starts_with("rank-1.jsonl: cannot read")) << result.unread[0];
  report = report_json(load_audit_dir(dir.path()));
  EXPECT_EQ(report["not_read"][0], result.unread[0]);

  // A log the launcher's log names but the directory lacks is listed too (it was skipped).
  fs::remove(rank1);
  result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.unread.size(), 1u);
  EXPECT_TRUE(result.unread[0].starts_with("rank-1.jsonl: missing")) << result.unread[0];
  report = report_json(load_audit_dir(dir.path()));
  EXPECT_EQ(report["not_read"][0], result.unread[0]);
}

// A message recorded twice on one side is listed, not merged; so is one whose communicator
// (its context, which both ends agree on) differs between send and receive.
TEST(AuditReconcile, ARecordTwiceOrOfAnotherCommunicatorIsInconsistent) {
  TempDir dir;
  make_sealed_job(dir.path());
  const fs::path rank1 = dir.path() / "rank-1.jsonl";
  auto l = lines_of(rank1);
  l.push_back(l[2]);
  write_lines(rank1, l);
  auto result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.mismatched.size(), 1u);
  EXPECT_EQ(result.mismatched[0],
            "a second message.receive record of one message: rank-1.jsonl:13 after rank-1.jsonl:3");
  ASSERT_EQ(result.mismatched_records.size(), 1u);
  EXPECT_EQ(result.mismatched_records[0]["kind"], "recorded_twice");
  EXPECT_EQ(result.mismatched_records[0]["first"]["line"], 3);
  EXPECT_EQ(result.mismatched_records[0]["second"]["line"], 13);
  l.pop_back();
  auto other = nlohmann::json::parse(l[2]);
  other["sempi"]["context"] = 6;
  l[2] = other.dump();
  write_lines(rank1, l);
  result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.mismatched.size(), 1u);
  EXPECT_TRUE(result.mismatched[0].starts_with("send rank 0 -> rank 1 msg 1"))
      << result.mismatched[0];
  ASSERT_EQ(result.mismatched_records.size(), 1u);
  EXPECT_EQ(result.mismatched_records[0]["kind"], "inconsistent");
  EXPECT_EQ(result.mismatched_records[0]["send"]["context"], 0);
  EXPECT_EQ(result.mismatched_records[0]["receive"]["context"], 6);
}

// comm.refuse records carry "dry_run" as a boolean: false is an enforced refusal.
TEST(AuditReport, AnEnforcedRefusalIsNotCalledADryRun) {
  TempDir dir;
  {
    auto log = AuditLog::create(dir.path() / rank_file_name(0), {kJob, 0});
    log->event("comm.refuse", false, "not a member", {{"dry_run", false}});
    log->event("comm.refuse", false, "not a member", {{"dry_run", true}});
    log->close();
  }
  const auto report = report_json(load_audit_dir(dir.path()));
  ASSERT_EQ(report["denials_and_failures"].size(), 2u) << report.dump();
  EXPECT_FALSE(report["denials_and_failures"][0]["dry_run"].get<bool>());
  EXPECT_TRUE(report["denials_and_failures"][1]["dry_run"].get<bool>());
  const std::string text = report_text(report);
  EXPECT_EQ(text.find("(dry run, not enforced)"), text.rfind("(dry run, not enforced)")) << text;
}

TEST(AuditReconcile, ASendTheReceiverDroppedCountsAsDroppedNotUnmatched) {
  TempDir dir;
  make_sealed_job(dir.path());
  // Rank 1 had left the collective of rank 0's message 1: it dropped it instead.
  auto l = lines_of(dir.path() / "rank-1.jsonl");
  const std::string receive = l[2];
  auto drop = nlohmann::json::parse(l[2]);
  ASSERT_EQ(drop["event"]["action"], "message.receive");
  ASSERT_EQ(drop["sempi"]["msg"], 1);
  drop["event"]["action"] = "message.drop";
  drop["event"]["outcome"] = "failure";
  l[2] = drop.dump();
  write_lines(dir.path() / "rank-1.jsonl", l);
  auto result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.matched, 9u);
  EXPECT_EQ(result.dropped, 1u);
  EXPECT_TRUE(result.unmatched.empty()) << result.unmatched[0];
  const auto report = report_json(load_audit_dir(dir.path()));
  ASSERT_EQ(report["denials_and_failures"].size(), 1u) << report.dump();
  EXPECT_EQ(report["denials_and_failures"][0]["action"], "message.drop");
  // Received first, then dropped: it did arrive, so it is matched.
  // Past the receiver's audit limit for that sender, a send without any record is counted
  // apart: the drop may have happened unrecorded.
  auto limit = nlohmann::json::parse(l[2]);
  limit["event"]["action"] = "audit.limit";
  limit["sempi"] = {{"peer", 0}, {"rank", 1}};
  l[2] = limit.dump();
  write_lines(dir.path() / "rank-1.jsonl", l);
  result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.past_audit_limit, 1u);
  EXPECT_EQ(result.dropped, 0u);
  EXPECT_TRUE(result.unmatched.empty()) << result.unmatched[0];
  // A limit on dry-run denials hides no drop: the send is unmatched.
  limit["sempi"]["records"] = "policy.deny";
  l[2] = limit.dump();
  write_lines(dir.path() / "rank-1.jsonl", l);
  result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.past_audit_limit, 0u);
  EXPECT_EQ(result.unmatched.size(), 1u);
  l[2] = drop.dump();
  l.insert(l.begin() + 2, receive);
  write_lines(dir.path() / "rank-1.jsonl", l);
  result = reconcile(load_audit_dir(dir.path()));
  EXPECT_EQ(result.matched, 10u);
  EXPECT_EQ(result.dropped, 0u);
  EXPECT_TRUE(result.unmatched.empty());
}

// A row is a communicator, told by its context: a name is local, so a rename on one side (or a
// communicator named differently at each end) keeps its traffic in one row, with every name.
// Traffic of another communicator under the same name stays apart.
TEST(AuditReport, RowsAreCommunicatorsNotNames) {
  TempDir dir;
  for (int r = 0; r < 2; ++r) {
    auto log = AuditLog::create(dir.path() / rank_file_name(r), {kJob, r});
    MessageRecord m;
    m.peer = 1 - r;
    m.context = 8;
    m.bytes = 10;
    m.msg = 1;
    m.action = r == 0 ? "message.send" : "message.receive";
    m.comm = r == 0 ? "workers" : "x\" op \"p2p";
    log->message(m);
    m.context = 9;  // the same communicator's collectives
    m.msg = 2;
    m.comm = r == 0 ? "renamed" : m.comm;
    log->message(m);
    m.context = 10;  // another communicator, with a name the first one had
    m.msg = 3;
    m.comm = "workers";
    log->message(m);
    // From rank 1 to rank 0: rank 0's log, with the receiver's name, is read first; the row
    // still shows the sender's.
    m.action = r == 0 ? "message.receive" : "message.send";
    m.context = 12;
    m.msg = 1;
    m.comm = r == 0 ? "receiver's name" : "sender's name";
    log->message(m);
    log->close();
  }
  const auto report = report_json(load_audit_dir(dir.path()));
  ASSERT_EQ(report["traffic"].size(), 3u) << report.dump();
  EXPECT_EQ(report["traffic"][2]["from"], 1);
  EXPECT_EQ(report["traffic"][2]["comm"], "sender's name");
  EXPECT_EQ(report["traffic"][2]["also_named"], nlohmann::json({"receiver's name"}));
  const auto& first = report["traffic"][0];
  EXPECT_EQ(first["comm"], "workers");
  EXPECT_EQ(first["context"], 8);
  EXPECT_EQ(first["also_named"], nlohmann::json({"renamed", "x\" op \"p2p"}));
  EXPECT_EQ(first["messages"], 2);
  EXPECT_EQ(first["received"], 2);
  EXPECT_EQ(report["traffic"][1]["context"], 10);
  EXPECT_EQ(report["traffic"][1]["messages"], 1);
  const std::string text = report_text(report);
  EXPECT_NE(text.find("\"workers\" (also \"renamed\" \"x\\\" op \\\"p2p\")"), std::string::npos)
      << text;
}

// What reconcile lists names each communicator and op in quotes: a name cannot forge fields.
// Rank 0's log in `dir` with one record: message 1 sent to rank 1.
void log_one_send(const std::filesystem::path& dir, std::string_view comm, std::uint64_t bytes) {
  auto log = AuditLog::create(dir / rank_file_name(0), {kJob, 0});
  MessageRecord m;
  m.action = "message.send";
  m.peer = 1;
  m.comm = comm;
  m.bytes = bytes;
  m.msg = 1;
  log->message(m);
  log->close();
}

TEST(AuditReconcile, NamesAreQuotedInWhatIsListed) {
  TempDir dir;
  log_one_send(dir.path(), "w\" op \"p2p\" tag 0 (rank-1.jsonl:2)\xe2\x80\xae", 0);
  const auto result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.unmatched.size(), 1u);
  EXPECT_EQ(result.unmatched[0],
            "sent, never received: rank 0 -> rank 1 msg 1 comm "
            "\"w\\\" op \\\"p2p\\\" tag 0 (rank-1.jsonl:2)\\u202e\" context 0 op \"p2p\" tag 0 "
            "bytes 0 "
            "(rank-0.jsonl:1)");
  // For tools, the same as fields, the name as the record has it.
  ASSERT_EQ(result.unmatched_records.size(), 1u);
  const auto& record = result.unmatched_records[0];
  EXPECT_EQ(record["kind"], "sent_never_received");
  EXPECT_EQ(record["from"], 0);
  EXPECT_EQ(record["to"], 1);
  EXPECT_EQ(record["msg"], 1);
  EXPECT_EQ(record["send"]["comm"], "w\" op \"p2p\" tag 0 (rank-1.jsonl:2)\xe2\x80\xae");
  EXPECT_EQ(record["send"]["line"], 1);
  // Not asked for (text output), the records are not built.
  const auto lines_only = reconcile(load_audit_dir(dir.path()), false);
  EXPECT_EQ(lines_only.unmatched, result.unmatched);
  EXPECT_TRUE(lines_only.unmatched_records.empty());
}

// For tools, a record's fields are listed as logged: a missing one is absent and a mistyped
// one keeps its type, instead of the -1 or "" the text output compares.
TEST(AuditReconcile, RecordsListTheirFieldsAsLogged) {
  TempDir dir;
  log_one_send(dir.path(), "world", 4);
  auto l = lines_of(dir.path() / rank_file_name(0));
  auto edited = nlohmann::json::parse(l[0]);
  edited["sempi"].erase("tag");
  edited["sempi"]["bytes"] = "4";
  l[0] = edited.dump();
  write_lines(dir.path() / rank_file_name(0), l);
  const auto result = reconcile(load_audit_dir(dir.path()));
  ASSERT_EQ(result.unmatched_records.size(), 1u);
  const auto& send = result.unmatched_records[0]["send"];
  EXPECT_FALSE(send.contains("tag")) << send.dump();
  EXPECT_EQ(send["bytes"], "4") << send.dump();
  EXPECT_EQ(send["comm"], "world") << send.dump();
  EXPECT_EQ(send["context"], 0) << send.dump();
  EXPECT_NE(result.unmatched[0].find("tag -1 bytes -1"), std::string::npos) << result.unmatched[0];
}

}  // namespace
}  // namespace sempi::audit
