// Policy enforcement and the audit log on real jobs: isolated segments, a receiver refusing a
// compromised sender, on_violation abort, membership on split, collectives per communicator,
// dry run, and verify / report / reconcile / file modes / default directory of the audit log.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "audit/audit_reader.hpp"
#include "support/job_runner.hpp"
#include "support/temp_dir.hpp"

namespace sempi::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using sempi::test::TempDir;

struct Job {
  JobResult result;
  fs::path audit;
};

// Runs policy_probe SCENARIO on `ranks` ranks under `policy` (JSON text), auditing into DIR/audit.
Job run(const TempDir& dir, int ranks, const std::string& policy, const std::string& scenario) {
  const fs::path file = dir.path() / "policy.json";
  std::ofstream(file) << policy;
  Job job;
  job.audit = dir.path() / "audit";
  job.result = run_job({SEMPIRUN_PATH, "-n", std::to_string(ranks), "--timeout", "60", "--policy",
                        file.string(), "--audit-dir", job.audit.string(), POLICY_PROBE_PATH,
                        scenario},
                       90s);
  return job;
}

std::vector<nlohmann::json> records(const fs::path& file, const std::string& action) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j["event"]["action"] == action) out.push_back(std::move(j));
  }
  return out;
}

std::string verify_text(const fs::path& dir) {
  const auto result = audit::verify(audit::load_audit_dir(dir), std::nullopt);
  std::string text;
  for (const auto& f : result.findings) text += f.file + ":" + std::to_string(f.line) + ": " + f.kind + ": " + f.message + "\n";
  return result.ok() && result.sealed ? "OK" : text;
}

JobResult tool(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {SEMPI_TOOL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_job(argv, 60s);
}

// Every rank may talk to every other on any communicator, with `audit` (a JSON object, or
// empty for none) as the policy's message audit.
std::string open_policy(const std::string& audit) {
  return R"({"version": 1, "groups": {"all": "*"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [{"name": "*", "members": "*", "collectives": "*", "p2p_tags": "*"}])" +
         (audit.empty() ? std::string() : ", \"audit\": " + audit) + "}";
}

constexpr const char* kSegments = R"({"version": 1,
  "groups": {"a": "0-1", "b": "2-3"},
  "segmentation": [{"between": ["a", "a"]}, {"between": ["b", "b"]}],
  "communicators": [{"name": "world", "members": "*", "collectives": [], "p2p_tags": "*"},
                    {"name": "self", "members": "*", "collectives": "*", "p2p_tags": "*"}],
  "audit": {"messages": "metadata"}})";

std::string restricted(const std::string& extra) {
  return R"({"version": 1, )" + extra + R"(
  "groups": {"all": "*"},
  "segmentation": [{"between": ["all", "all"]}],
  "communicators": [{"name": "world", "members": "*", "collectives": [], "p2p_tags": ["0-99"],
                     "max_message_bytes": 100000}],
  "audit": {"messages": "metadata"}})";
}

TEST(Policy, IsolatedSegmentsAreNeverConnectedAndSendsBetweenThemFail) {
  TempDir dir;
  const auto job = run(dir, 4, kSegments, "segments");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  for (int r = 0; r < 4; ++r) {
    const auto wired = records(job.audit / audit::rank_file_name(r), "mesh.wired");
    ASSERT_EQ(wired.size(), 1u);
    const std::vector<int> expected = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1};
    EXPECT_EQ(wired[0]["sempi"]["never_connected"].get<std::vector<int>>(), expected);
    const auto denials = records(job.audit / audit::rank_file_name(r), "policy.deny");
    ASSERT_FALSE(denials.empty());
    EXPECT_EQ(denials[0]["sempi"]["direction"], "send");
  }
  EXPECT_EQ(verify_text(job.audit), "OK");
}

TEST(Policy, ReceiverRefusesWhatACompromisedSenderSends) {
  TempDir dir;
  const auto job = run(dir, 2, restricted(""), "receiver");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  std::map<int, std::string> refused;  // tag -> reason
  for (const auto& d : records(job.audit / "rank-0.jsonl", "policy.deny")) {
    EXPECT_EQ(d["sempi"]["direction"], "receive");
    refused[d["sempi"]["tag"].get<int>()] = d["event"]["reason"].get<std::string>();
  }
  EXPECT_NE(refused[500].find("tag"), std::string::npos);
  EXPECT_NE(refused[501].find("tag"), std::string::npos);
  EXPECT_NE(refused[5].find("size"), std::string::npos);
  EXPECT_EQ(verify_text(job.audit), "OK");
  // The hostile sends were sent and refused: reconciliation counts them as denied, not lost.
  const auto rec = audit::reconcile(audit::load_audit_dir(job.audit));
  EXPECT_TRUE(rec.unmatched.empty()) << rec.unmatched.front();
  EXPECT_EQ(rec.denied, 4u);  // with the send half of a sendrecv
}

TEST(Policy, ReceiverCutsOffARankThatFloodsRefusedMessages) {
  TempDir dir;
  const auto job = run(dir, 2, restricted(""), "flood");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  // A bounded number of refusals is logged, then one record of the cut-off.
  EXPECT_EQ(records(job.audit / "rank-0.jsonl", "policy.deny").size(), 1000u);
  const auto failures = records(job.audit / "rank-0.jsonl", "peer.failure");
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0]["event"]["reason"].get<std::string>().find("cut off as hostile"),
            std::string::npos)
      << failures[0].dump();
  EXPECT_EQ(verify_text(job.audit), "OK");
}

TEST(Policy, RefusalsReceivedDuringFinalizeAreAudited) {
  // Rank 0 is already in finalize when rank 1's denied messages arrive: its log must stay open
  // until its peers said goodbye, so these decisions land in the sealed chain too.
  TempDir dir;
  const fs::path file = dir.path() / "policy.json";
  std::ofstream(file) << restricted("");
  const fs::path audit = dir.path() / "audit";
  const auto result =
      run_job({SEMPIRUN_PATH, "-n", "2", "--timeout", "60", "--policy", file.string(),
               "--audit-dir", audit.string(), POLICY_PROBE_PATH, "late_refusal", audit.string()},
              90s);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::map<int, std::string> refused;  // tag -> reason
  for (const auto& d : records(audit / "rank-0.jsonl", "policy.deny")) {
    EXPECT_EQ(d["sempi"]["direction"], "receive");
    refused[d["sempi"]["tag"].get<int>()] = d["event"]["reason"].get<std::string>();
  }
  EXPECT_NE(refused[500].find("tag"), std::string::npos);
  EXPECT_NE(refused[5].find("size"), std::string::npos);
  EXPECT_EQ(verify_text(audit), "OK");
  // The rank reported its head after the drain: the seal did not fall back to reading the file.
  const auto seal = records(audit / "launcher.jsonl", "audit.seal");
  ASSERT_EQ(seal.size(), 1u);
  EXPECT_EQ(seal[0]["sempi"]["seal"]["ranks"][0]["source"], "reported") << seal[0].dump();
}

TEST(Policy, AbortOnViolationEndsTheJob) {
  TempDir dir;
  const auto job = run(dir, 2, restricted(R"("on_violation": "abort",)"), "abort");
  EXPECT_EQ(job.result.exit_code, 1) << job.result.output;
  EXPECT_NE(job.result.output.find("policy violation"), std::string::npos) << job.result.output;
  EXPECT_LT(job.result.seconds, 30);
  // The job failed, but its log is still sealed and intact.
  EXPECT_EQ(verify_text(job.audit), "OK");
}

TEST(Policy, SplitViolatingMembershipFailsOnEveryMember) {
  TempDir dir;
  const auto job = run(dir, 4, R"({"version": 1,
    "groups": {"all": "*", "lo": "0-1", "hi": "2-3"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": ["comm_create"], "p2p_tags": "*"},
      {"name": "world.split", "members": ["lo", "hi"], "collectives": [], "p2p_tags": "*"}]})",
                       "membership");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  std::vector<std::string> refusals;
  std::istringstream lines(job.result.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("split refused: ")) refusals.push_back(line);
  }
  ASSERT_EQ(refusals.size(), 4u) << job.result.output;
  for (const auto& r : refusals) EXPECT_EQ(r, refusals[0]);
  EXPECT_NE(refusals[0].find("/communicators/1/members"), std::string::npos) << refusals[0];
  EXPECT_FALSE(records(job.audit / "rank-2.jsonl", "comm.refuse").empty());
  EXPECT_EQ(verify_text(job.audit), "OK");
}

TEST(Policy, RenameIsRefusedUnlessTheMembersFitTheNewName) {
  TempDir dir;
  const auto job = run(dir, 4, R"({"version": 1,
    "groups": {"all": "*", "lo": "0-1"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": ["barrier", "comm_create"], "p2p_tags": "*"},
      {"name": "secure", "members": "lo", "p2p_tags": "*"},
      {"name": "world.dup", "members": "*"},
      {"name": "world.split", "members": "*", "p2p_tags": ["0-9"]},
      {"name": "self", "members": "*", "collectives": "*", "p2p_tags": "*"}]})",
                       "rename");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  const auto refused = records(job.audit / "rank-3.jsonl", "comm.refuse");
  ASSERT_EQ(refused.size(), 4u);
  EXPECT_EQ(refused[0]["sempi"]["comm"], "secure");
  EXPECT_EQ(refused[0]["sempi"]["previous"], "world.dup");
  // A pair taking world's or self's name (and with it their rules, "*" members included).
  EXPECT_EQ(refused[2]["sempi"]["comm"], "world");
  EXPECT_EQ(refused[3]["sempi"]["comm"], "self");
  EXPECT_EQ(refused[3]["sempi"]["rule"], "predefined name");
  EXPECT_EQ(records(job.audit / "rank-0.jsonl", "comm.rename").size(), 1u);
  EXPECT_EQ(verify_text(job.audit), "OK");
}

TEST(Policy, ReceivesNoMessageCouldSatisfyFailAtOnceFromAnySource) {
  TempDir dir;
  const auto job = run(dir, 2, R"({"version": 1, "groups": {"all": "*"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": ["comm_create"], "p2p_tags": ["0-99"]},
      {"name": "world.dup", "members": "*"}]})",
                       "unreceivable");
  EXPECT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_LT(job.result.seconds, 30);
  // Each refused receive and probe is an access decision, audited as a request this rank made.
  for (const char* file : {"rank-0.jsonl", "rank-1.jsonl"}) {
    const auto denials = records(job.audit / file, "policy.deny");
    ASSERT_EQ(denials.size(), 5u) << file;
    EXPECT_EQ(denials[0]["sempi"]["direction"], "request") << denials[0].dump();
    EXPECT_EQ(denials[0]["sempi"]["peer"], -1) << denials[0].dump();
    EXPECT_EQ(denials[0]["sempi"]["tag"], 999) << denials[0].dump();
    EXPECT_EQ(denials[0]["event"]["reason"], "this tag is not allowed on this communicator")
        << denials[0].dump();
    EXPECT_EQ(denials[1]["sempi"]["comm"], "world.dup") << denials[1].dump();
  }
  EXPECT_EQ(verify_text(job.audit), "OK");
}

// Three ranks: in the first round of allreduce some member only receives, so every member
// must learn of the denial before posting anything (the collective layer asks
// Engine::collective_denied first) or that member would wait forever.
TEST(Policy, CollectivesAreAllowedOrDeniedPerCommunicator) {
  TempDir dir;
  const auto job = run(dir, 3, R"({"version": 1, "groups": {"all": "*"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [
      {"name": "world", "members": "*", "collectives": ["barrier", "comm_create"], "p2p_tags": "*"},
      {"name": "world.dup", "members": "*"}]})",
                       "collectives");
  EXPECT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_LT(job.result.seconds, 30);
}

// A collective whose internal message exceeds the size limit fails on every member that would
// wait for it, at once (the old code left them waiting for the job's 60 s timeout).
TEST(Policy, ACollectiveRefusedOnOneRankFailsPromptlyOnTheRanksWaitingForIt) {
  TempDir dir;
  const auto job = run(dir, 4, R"({"version": 1, "groups": {"all": "*"},
    "segmentation": [{"between": ["all", "all"]}],
    "communicators": [{"name": "world", "members": "*", "collectives": "*", "p2p_tags": "*",
                       "max_message_bytes": 4096}]})",
                       "withdrawn");
  EXPECT_EQ(job.result.exit_code, 0) << job.result.output;
  EXPECT_LT(job.result.seconds, 30);
}

TEST(Policy, DryRunDeliversAndLogsWouldBeDenials) {
  TempDir dir;
  const auto job = run(dir, 2, restricted(R"("mode": "audit",)"), "dryrun");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  // Rank 0's send, rank 1's receive (posted: enforcement would fail it at once) and the
  // message as it arrived: each a dry-run record of what enforcement would refuse.
  const std::map<std::string, std::vector<std::string>> expected = {
      {"rank-0.jsonl", {"send"}}, {"rank-1.jsonl", {"request", "receive"}}};
  for (const auto& [file, directions] : expected) {
    const auto denials = records(job.audit / file, "policy.deny");
    ASSERT_EQ(denials.size(), directions.size()) << file;
    for (std::size_t i = 0; i < denials.size(); ++i) {
      EXPECT_EQ(denials[i]["sempi"]["dry_run"], true) << denials[i].dump();
      EXPECT_EQ(denials[i]["sempi"]["tag"], 500) << denials[i].dump();
      EXPECT_EQ(denials[i]["sempi"]["direction"], directions[i]) << denials[i].dump();
    }
  }
}

constexpr const char* kDupAndIo =
    R"({"version": 1, "mode": "audit", "on_violation": "abort", "groups": {"all": "*"},
  "segmentation": [{"between": ["all", "all"]}],
  "communicators": [
    {"name": "world", "members": "*", "collectives": "*", "p2p_tags": "*"},
    {"name": "world.dup", "members": "*", "collectives": "*", "p2p_tags": ["0-99"]},
    {"name": "io", "members": "*", "collectives": "*", "p2p_tags": ["100-199"]}],
  "audit": {"messages": "metadata"}})";

TEST(Policy, DryRunRecordsWhatARenameWouldRefuse) {
  TempDir dir;
  const auto job = run(dir, 2, kDupAndIo, "rename_dry_run");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  // The queued message judged again at the rename, then the receive posted under "io".
  const auto denials = records(job.audit / "rank-0.jsonl", "policy.deny");
  ASSERT_EQ(denials.size(), 2u);
  for (std::size_t i = 0; i < denials.size(); ++i) {
    EXPECT_EQ(denials[i]["sempi"]["dry_run"], true) << denials[i].dump();
    EXPECT_EQ(denials[i]["sempi"]["comm"], "io") << denials[i].dump();
    EXPECT_EQ(denials[i]["sempi"]["tag"], 5) << denials[i].dump();
    EXPECT_EQ(denials[i]["sempi"]["direction"], i == 0 ? "receive" : "request")
        << denials[i].dump();
  }
}

TEST(Policy, AFreedCommunicatorsMessagesAreRefusedInAuditModeToo) {
  TempDir dir;
  const auto job = run(dir, 2, kDupAndIo, "freed");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;
  const auto denials = records(job.audit / "rank-1.jsonl", "policy.deny");
  ASSERT_EQ(denials.size(), 1u);
  EXPECT_FALSE(denials[0]["sempi"].contains("dry_run")) << denials[0].dump();
  EXPECT_EQ(denials[0]["sempi"]["tag"], 5) << denials[0].dump();
  EXPECT_EQ(denials[0]["event"]["reason"], "the communicator was freed on this rank")
      << denials[0].dump();
  for (const auto& received : records(job.audit / "rank-1.jsonl", "message.receive")) {
    EXPECT_NE(received["sempi"]["comm"], "world.dup") << received.dump();
  }
}

// The key written out of band pins the seal: another job's logs put in place of this job's
// verify on their own, but not against this job's key.
TEST(Audit, KeyWrittenOutOfBandDetectsARewrittenDirectory) {
  TempDir dir;
  const auto run_keyed = [&](const std::string& name) {
    const fs::path audit_dir = dir.path() / name;
    const fs::path key_file = dir.path() / (name + ".key");
    const auto result = run_job({SEMPIRUN_PATH, "-n", "2", "--timeout", "60", "--audit-dir",
                                 audit_dir.string(), "--audit-key-out", key_file.string(),
                                 POLICY_PROBE_PATH, "traffic"},
                                90s);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(key_file);
    std::string key;
    std::getline(in, key);
    struct stat st {};
    EXPECT_EQ(::stat(key_file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    return std::make_pair(audit_dir, key);
  };
  const auto [genuine, key] = run_keyed("genuine");
  const auto [other, other_key] = run_keyed("other");
  ASSERT_EQ(key.size(), 64u);
  ASSERT_NE(key, other_key);
  const auto pinned = tool({"audit", "verify", genuine.string(), "--public-key", key});
  EXPECT_EQ(pinned.exit_code, 0) << pinned.output;
  EXPECT_TRUE(pinned.output.starts_with("OK: 3 files")) << pinned.output;
  EXPECT_NE(pinned.output.find("sealed with the pinned key"), std::string::npos) << pinned.output;
  EXPECT_EQ(pinned.output.find("note:"), std::string::npos) << pinned.output;
  // The rewrite: the other job's intact, sealed logs in place of the genuine ones.
  for (const auto& entry : fs::directory_iterator(other)) {
    fs::copy_file(entry.path(), genuine / entry.path().filename(),
                  fs::copy_options::overwrite_existing);
  }
  const auto unpinned = tool({"audit", "verify", genuine.string()});
  EXPECT_EQ(unpinned.exit_code, 0) << "consistent in itself: " << unpinned.output;
  const auto rewritten = tool({"audit", "verify", genuine.string(), "--public-key", key});
  EXPECT_EQ(rewritten.exit_code, 1) << rewritten.output;
  EXPECT_NE(rewritten.output.find("bad_seal"), std::string::npos) << rewritten.output;
}

// The key file is another job's anchor if it exists: never replaced. And a job refused before
// it has a log leaves no key behind.
TEST(Audit, KeyFileIsNeverReplacedNorLeftByARefusedJob) {
  TempDir dir;
  const fs::path key_file = dir.path() / "pinned.key";
  std::ofstream(key_file) << "an earlier job's key\n";
  const auto taken = run_job({SEMPIRUN_PATH, "-n", "1", "--audit-dir",
                              (dir.path() / "a").string(), "--audit-key-out", key_file.string(),
                              "/bin/true"},
                             90s);
  EXPECT_EQ(taken.exit_code, 2) << taken.output;
  EXPECT_NE(taken.output.find("File exists"), std::string::npos) << taken.output;
  std::ifstream in(key_file);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "an earlier job's key");
  EXPECT_FALSE(fs::exists(dir.path() / "a" / "launcher.jsonl")) << "a log of a job that did not run";

  const fs::path used = dir.path() / "used";  // a directory that already holds a job's log
  fs::create_directory(used);
  fs::permissions(used, fs::perms::owner_all, fs::perm_options::replace);
  std::ofstream(used / "launcher.jsonl") << "{}\n";
  const fs::path fresh_key = dir.path() / "fresh.key";
  const auto refused = run_job({SEMPIRUN_PATH, "-n", "1", "--audit-dir", used.string(),
                                "--audit-key-out", fresh_key.string(), "/bin/true"},
                               90s);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_FALSE(fs::exists(fresh_key)) << "the key of a job that never ran was kept";
}

TEST(Audit, RealJobVerifiesReportsAndReconciles) {
  TempDir dir;
  const auto job = run(dir, 3, open_policy(R"({"messages": "digest"})"), "traffic");
  ASSERT_EQ(job.result.exit_code, 0) << job.result.output;

  struct stat st {};
  ASSERT_EQ(::stat(job.audit.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const char* f : {"launcher.jsonl", "rank-0.jsonl", "rank-1.jsonl", "rank-2.jsonl"}) {
    ASSERT_EQ(::stat((job.audit / f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }

  const auto verify = tool({"audit", "verify", job.audit.string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_TRUE(verify.output.starts_with("OK: 4 files")) << verify.output;
  EXPECT_NE(verify.output.find("note: the seal was checked against the key the log itself names"),
            std::string::npos)
      << verify.output;
  // The pinned key as an operator may paste it (upper case) matches; a mistyped one is a usage
  // error, not a false alarm of a rewritten log.
  const auto start = records(job.audit / "launcher.jsonl", "job.start");
  ASSERT_EQ(start.size(), 1u);
  std::string key = start[0]["sempi"]["audit_key"]["public_key"].get<std::string>();
  for (char& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto pinned = tool({"audit", "verify", job.audit.string(), "--public-key", key});
  EXPECT_EQ(pinned.exit_code, 0) << pinned.output;
  const auto typo = tool({"audit", "verify", job.audit.string(), "--public-key", key.substr(1)});
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("invalid --public-key"), std::string::npos) << typo.output;

  const auto report = audit::report_json(audit::load_audit_dir(job.audit));
  int pairs = 0;
  for (const auto& t : report["traffic"]) {
    if (t["comm"] != "world") continue;
    ++pairs;
    EXPECT_EQ((t["from"].get<int>() + 1) % 3, t["to"].get<int>());
    EXPECT_EQ(t["messages"], 4);
    EXPECT_EQ(t["bytes"], 3 * 100 + 300000);
    EXPECT_EQ(t["received"], 4);
  }
  EXPECT_EQ(pairs, 3) << report.dump(2);
  const auto text = tool({"audit", "report", job.audit.string()});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find("traffic"), std::string::npos) << text.output;

  const auto rec = tool({"audit", "reconcile", job.audit.string()});
  EXPECT_EQ(rec.exit_code, 0) << rec.output;
  EXPECT_NE(rec.output.find("12 sends: 12 matched"), std::string::npos) << rec.output;

  // Digest level: every message record carries the payload's SHA-256, never the payload.
  for (const auto& s : records(job.audit / "rank-0.jsonl", "message.send")) {
    EXPECT_EQ(s["sempi"]["sha256"].get<std::string>().size(), 64u);
  }

  // Tampering with the real log is found, with exit status 1.
  {
    std::ifstream in(job.audit / "rank-1.jsonl");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    lines.erase(lines.begin() + 2);
    std::ofstream out(job.audit / "rank-1.jsonl", std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  const auto broken = tool({"audit", "verify", job.audit.string()});
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("rank-1.jsonl:3: deleted"), std::string::npos) << broken.output;
}

// Collectives one rank refuses or fails in (coll_check "abandoned"): the rank that leaves one
// audits collective.withdraw, each member it tells audits collective.withdrawn with the
// reason, and a message it drops unreceived is audited as dropped, so that reconcile accounts
// for every send.
TEST(Audit, WithdrawalsFromACollectiveAndTheMessagesDroppedForThemAreAudited) {
  TempDir dir;
  const fs::path policy = dir.path() / "policy.json";
  std::ofstream(policy) << open_policy(R"({"messages": "metadata"})");
  const fs::path audit_dir = dir.path() / "audit";
  const auto result = run_job({SEMPIRUN_PATH, "-n", "4", "--timeout", "60", "--policy",
                               policy.string(), "--audit-dir", audit_dir.string(),
                               COLL_CHECK_PATH, "abandoned"},
                              120s);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::size_t withdraws = 0;
  std::size_t withdrawn = 0;
  for (int r = 0; r < 4; ++r) {
    const fs::path file = audit_dir / audit::rank_file_name(r);
    for (const auto& w : records(file, "collective.withdraw")) {
      ++withdraws;
      EXPECT_EQ(w["event"]["outcome"], "failure");
      EXPECT_FALSE(w["event"]["reason"].get<std::string>().empty()) << w.dump();
      EXPECT_EQ(w["sempi"]["comm"], "world") << w.dump();
      EXPECT_TRUE(w["sempi"]["sequence"].is_number()) << w.dump();
      EXPECT_TRUE(w["sempi"]["class"].get<std::string>().starts_with("MPI_ERR_")) << w.dump();
    }
    for (const auto& w : records(file, "collective.withdrawn")) {
      ++withdrawn;
      EXPECT_NE(w["sempi"]["peer"].get<int>(), r) << w.dump();
      EXPECT_NE(w["event"]["reason"].get<std::string>().find("rank "), std::string::npos)
          << w.dump();
    }
  }
  // gather, igather and bcast are refused by one rank and tell the three others; the reduce
  // fails at its root, which tells the members it has transfers with.
  EXPECT_GE(withdraws, 4u);
  EXPECT_GE(withdrawn, 3u * 3u + 1u);
  EXPECT_EQ(verify_text(audit_dir), "OK");
  const auto rec = audit::reconcile(audit::load_audit_dir(audit_dir));
  EXPECT_TRUE(rec.unmatched.empty()) << rec.unmatched.front();
  EXPECT_TRUE(rec.mismatched.empty()) << rec.mismatched.front();
}

TEST(Audit, LogsOfAJobWithACrashedRankVerifyAndReconcileListsTheLostMessage) {
  TempDir dir;
  const auto job =
      run(dir, 3, open_policy(R"({"messages": "metadata", "flush": "record"})"), "crash");
  EXPECT_EQ(job.result.exit_code, 128 + 9) << job.result.output;
  EXPECT_NE(job.result.output.find("rank 2 was killed by signal 9"), std::string::npos)
      << job.result.output;
  // Every record the dead rank wrote is on disk (flush "record"); the seal takes its chain head
  // from its file, so the whole directory still verifies.
  EXPECT_EQ(verify_text(job.audit), "OK");
  const auto seals = records(job.audit / "launcher.jsonl", "audit.seal");
  ASSERT_EQ(seals.size(), 1u);
  EXPECT_NE(seals[0].dump().find("\"file\""), std::string::npos) << seals[0].dump();
  // Intact, but not complete: verify says which rank's log may miss records.
  const auto verify = tool({"audit", "verify", job.audit.string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("note: rank 2 ended without closing its log"), std::string::npos)
      << verify.output;
  // The message rank 0 sent with tag 30 was never received: reconcile must say so.
  const auto reconcile = tool({"audit", "reconcile", job.audit.string()});
  EXPECT_EQ(reconcile.exit_code, 1) << reconcile.output;
  EXPECT_NE(reconcile.output.find("30"), std::string::npos) << reconcile.output;
}

// A rank that deletes its log and dies: the launcher seals it as missing (it was welcomed, so
// it had a log), and verify reports it, where it once read as a rank that never joined.
TEST(Audit, ALogDeletedDuringTheJobIsSealedAsMissing) {
  TempDir dir;
  const fs::path file = dir.path() / "policy.json";
  std::ofstream(file) << open_policy("");
  const fs::path audit = dir.path() / "audit";
  const auto result =
      run_job({SEMPIRUN_PATH, "-n", "2", "--timeout", "60", "--policy", file.string(),
               "--audit-dir", audit.string(), POLICY_PROBE_PATH, "vanish", audit.string()},
              90s);
  EXPECT_EQ(result.exit_code, 128 + 9) << result.output;
  const auto seal = records(audit / "launcher.jsonl", "audit.seal");
  ASSERT_EQ(seal.size(), 1u);
  EXPECT_EQ(seal[0]["sempi"]["seal"]["ranks"][1]["source"], "missing") << seal[0].dump();
  const auto verify = tool({"audit", "verify", audit.string()});
  EXPECT_NE(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("rank-1.jsonl"), std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find("was missing when the job ended"), std::string::npos)
      << verify.output;
}

TEST(Audit, ARankThatCallsExitEndsWithItsStatusAndItsLogStaysWhole) {
  TempDir dir;
  const auto job = run(dir, 2, open_policy(R"({"messages": "metadata"})"), "exit_early");
  EXPECT_EQ(job.result.exit_code, 3) << job.result.output;
  EXPECT_NE(job.result.output.find("rank 1 exited with status 3"), std::string::npos)
      << job.result.output;
  EXPECT_EQ(job.result.output.find("signal"), std::string::npos) << job.result.output;
  EXPECT_EQ(verify_text(job.audit), "OK");
  EXPECT_EQ(records(job.audit / "rank-1.jsonl", "message.send").size(), 1u);
}

// A rank whose log cannot take its records (a full disk; here a file size limit) reports why
// with its head: verify still fails, as records are lost, but names the write error instead of
// reporting records removed from the end of the log, which reads as tampering.
TEST(Audit, RecordsARankCouldNotWriteAreReportedAsUnwrittenNotRemoved) {
  TempDir dir;
  const fs::path file = dir.path() / "policy.json";
  std::ofstream(file) << open_policy(R"({"messages": "metadata"})");
  const fs::path audit = dir.path() / "audit";
  const auto result =
      run_job({SEMPIRUN_PATH, "-n", "2", "--timeout", "60", "--policy", file.string(),
               "--audit-dir", audit.string(), POLICY_PROBE_PATH, "full_disk", audit.string()},
              90s);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("rank 1 could not write its whole audit log (File too large)"),
            std::string::npos)
      << result.output;
  const auto seal = records(audit / "launcher.jsonl", "audit.seal");
  ASSERT_EQ(seal.size(), 1u);
  const auto& sealed = seal[0]["sempi"]["seal"]["ranks"];
  EXPECT_EQ(sealed[1]["source"], "reported") << seal[0].dump();
  EXPECT_EQ(sealed[1]["write_error"], "File too large") << seal[0].dump();
  EXPECT_FALSE(sealed[0].contains("write_error")) << seal[0].dump();
  const auto verify = tool({"audit", "verify", audit.string()});
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_NE(verify.output.find("rank-1.jsonl:0: unwritten: ends at seq"), std::string::npos)
      << verify.output;
  EXPECT_NE(verify.output.find("writing its log failed (File too large)"), std::string::npos)
      << verify.output;
  EXPECT_EQ(verify.output.find("removed"), std::string::npos) << verify.output;
  EXPECT_EQ(verify.output.find("rank-0.jsonl"), std::string::npos) << verify.output;
}

TEST(Audit, DefaultDirectoryIsPrivateAndPerJob) {
  TempDir dir;
  const auto result = run_job({"/bin/sh", "-c",
                               "cd '" + dir.path().string() + "' && exec '" + SEMPIRUN_PATH +
                                   "' -n 2 '" + POLICY_PROBE_PATH + "' traffic"},
                              90s);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path base = dir.path() / "sempi-audit";
  struct stat st {};
  ASSERT_EQ(::stat(base.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::vector<fs::path> jobs{fs::directory_iterator(base), fs::directory_iterator()};
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].filename().string().size(), 32u);  // the job id
  EXPECT_EQ(verify_text(jobs[0]), "OK");
  const auto header = records(jobs[0] / "launcher.jsonl", "job.start");
  ASSERT_EQ(header.size(), 1u);
  EXPECT_EQ(header[0]["sempi"]["policy_default"], true);
  EXPECT_EQ(records(jobs[0] / "launcher.jsonl", "policy.default").size(), 1u);

  // A directory that already holds a log is refused: logs are never appended to.
  const auto again = run_job({SEMPIRUN_PATH, "--audit-dir", jobs[0].string(), "true"}, 30s);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("fresh --audit-dir"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace sempi::test
