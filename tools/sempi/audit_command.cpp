// `sempi audit`: verify, report on and reconcile a job's audit directory.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit_reader.hpp"
#include "common/hex.hpp"
#include "common/printable.hpp"
#include "sempi/cli_args.hpp"
#include "sempi/command.hpp"
#include "sempi/error.hpp"

namespace sempi::tool {
namespace {

constexpr const char* kAuditUsage =
    "usage: sempi audit <subcommand> DIR [options]\n"
    "\n"
    "subcommands:\n"
    "  verify      check every hash chain and the signed seal; list each broken place\n"
    "  report      traffic matrix per rank pair and communicator, every denial and failure\n"
    "  reconcile   match every message send with its receive; list the unmatched\n"
    "\n"
    "DIR is a job's audit directory (sempirun --audit-dir, default ./sempi-audit/JOBID).\n";

constexpr const char* kVerifyUsage =
    "usage: sempi audit verify DIR [--public-key HEX]\n"
    "\n"
    "Checks each file's chain (sequence numbers, previous-record hashes) and the launcher's\n"
    "seal (Ed25519 signature over every chain head). Prints OK, or one line per broken place:\n"
    "FILE:LINE: KIND: what, where KIND is edited, deleted, reordered, truncated, corrupt,\n"
    "missing, appended, foreign, unreadable, unsealed or bad_seal (past the first 100 of a\n"
    "file, one omitted line counts the rest), then notes on what the result does not cover\n"
    "(ranks that died before closing their logs). --public-key pins the seal key (obtained\n"
    "out of band, 64 hex digits: sempirun --audit-key-out FILE writes it) so that a rewrite\n"
    "with a fresh key is detected too; without it, OK means the directory is consistent with\n"
    "the key it names itself.\n"
    "\n"
    "Exit status: 0 intact, 1 tampering or damage found, 2 bad usage or not a directory.\n";

constexpr const char* kReportUsage =
    "usage: sempi audit report DIR [--json]\n"
    "\n"
    "Prints the traffic matrix (messages and bytes per sender, receiver and communicator,\n"
    "from message records: the policy's \"audit\": {\"messages\": ...} must not be off) and\n"
    "every denial, dry-run denial and failure. Does not verify: run verify first.\n"
    "\n"
    "Exit status: 0 every log read, 1 part of the logs could not be counted (listed), 2 bad\n"
    "usage or no audit logs in DIR.\n";

constexpr const char* kReconcileUsage =
    "usage: sempi audit reconcile DIR [--json]\n"
    "\n"
    "Matches each message.send with the message.receive of the same sender, receiver and\n"
    "message id (the channel sequence number both ends know). Sends the receiver refused by\n"
    "policy count as denied, and those it dropped because it had left their collective\n"
    "(message.drop) as dropped, not unmatched. Sends without a receive record to a receiver\n"
    "that had stopped recording drops from that sender (audit.limit) are counted apart.\n"
    "With --json, \"unmatched\" and \"mismatched\" are those lines, and \"unmatched_records\"\n"
    "and \"mismatched_records\" the same as objects with each record's fields as logged.\n"
    "\n"
    "Exit status: 0 everything matched, 1 unmatched or inconsistent messages (or a message\n"
    "recorded twice), or part of the logs could not be counted; 2 bad usage or no audit logs\n"
    "in DIR.\n";

// JSON for the terminal: everything outside ASCII \u-escaped (C1 controls such as U+009B,
// CSI, and DEL are as dangerous as ESC), and invalid UTF-8 replaced instead of thrown.
std::string terminal_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
}

std::string one_dir(const CliArgs& cli) {
  if (cli.positional().size() != 1) throw Error(ErrorClass::config, "expected exactly one DIR");
  return cli.positional().front();
}

// For report and reconcile, which count what they find: a directory without any log (the
// parent of the job directories, say) is a usage error, not an empty job.
audit::AuditDir logs_in(const CliArgs& cli) {
  auto dir = audit::load_audit_dir(one_dir(cli));
  if (!dir.launcher.exists && dir.ranks.empty()) {
    if (!dir.unlisted.empty())
      throw Error(ErrorClass::config, dir.dir.string() + ": " + dir.unlisted);
    throw Error(ErrorClass::config, dir.dir.string() +
                                        " holds no audit logs (launcher.jsonl, "
                                        "rank-R.jsonl): give a job's directory, sempi-audit/JOBID");
  }
  return dir;
}

int run_verify(const std::vector<std::string>& args) {
  const CliSpec spec{{"--public-key"}, {}};
  if (wants_help(args, spec)) {
    std::fputs(kVerifyUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  std::optional<std::string> public_key;
  if (const auto value = cli.value("--public-key")) {
    // Checked and lower-cased here: a mistyped or upper-case key must not read as a rewritten
    // log (the log holds the key in lower case).
    const auto bytes = from_hex(*value);
    if (!bytes || bytes->size() != 32) {
      throw Error(ErrorClass::config, "invalid --public-key '" + printable(*value) +
                                          "': expected 64 hex digits (an Ed25519 public key)");
    }
    public_key = to_hex(*bytes);
  }
  const auto dir = audit::load_audit_dir(one_dir(cli));
  const auto result = audit::verify(dir, public_key);
  const auto print_notes = [&] {
    for (const auto& note : result.notes) std::printf("note: %s\n", printable(note).c_str());
  };
  if (result.ok()) {
    std::printf("OK: %zu files, %zu records, sealed%s\n", result.files, result.records,
                public_key ? " with the pinned key" : "");
    print_notes();
    return kExitOk;
  }
  for (const auto& f : result.findings) {
    std::printf("%s:%zu: %s: %s\n", printable(f.file).c_str(), f.line, f.kind.c_str(),
                printable(f.message).c_str());
  }
  std::printf("FAILED: %zu problem%s in %zu files\n", result.problems,
              result.problems == 1 ? "" : "s", result.files);
  print_notes();
  return kExitFinding;
}

int run_report(const std::vector<std::string>& args) {
  const CliSpec spec{{}, {"--json"}};
  if (wants_help(args, spec)) {
    std::fputs(kReportUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  const auto report = audit::report_json(logs_in(cli));
  if (cli.flag("--json")) {
    std::printf("%s\n", terminal_json(report).c_str());
  } else {
    std::fputs(audit::report_text(report).c_str(), stdout);
  }
  return report.contains("not_read") ? kExitFinding : kExitOk;
}

int run_reconcile(const std::vector<std::string>& args) {
  const CliSpec spec{{}, {"--json"}};
  if (wants_help(args, spec)) {
    std::fputs(kReconcileUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  const bool json = cli.flag("--json");
  auto r = audit::reconcile(logs_in(cli), json);
  const bool clean = r.unmatched.empty() && r.mismatched.empty() && r.unread.empty();
  if (json) {
    const nlohmann::ordered_json j = {{"sends", r.sends},
                                      {"matched", r.matched},
                                      {"denied", r.denied},
                                      {"dropped", r.dropped},
                                      {"past_audit_limit", r.past_audit_limit},
                                      {"unmatched", r.unmatched},
                                      {"mismatched", r.mismatched},
                                      {"unmatched_records", std::move(r.unmatched_records)},
                                      {"mismatched_records", std::move(r.mismatched_records)},
                                      {"not_read", r.unread},
                                      {"message_records", r.message_records}};
    std::printf("%s\n", terminal_json(j).c_str());
  } else {
    if (!r.message_records) std::puts("no message records (message audit is off): nothing to reconcile");
    std::printf(
        "%zu sends: %zu matched, %zu denied by the receiver, %zu dropped by the "
        "receiver, %zu unmatched\n",
        r.sends, r.matched, r.denied, r.dropped, r.unmatched.size());
    if (r.past_audit_limit > 0) {
      std::printf(
          "%zu more sends have no receive record, to receivers past their audit limit "
          "for that sender (audit.limit): dropped perhaps, not recorded\n",
          r.past_audit_limit);
    }
    // Ready to print: names quoted and escaped where reconcile wrote them.
    for (const auto& u : r.unmatched) std::printf("unmatched: %s\n", u.c_str());
    for (const auto& m : r.mismatched) std::printf("inconsistent: %s\n", m.c_str());
    for (const auto& u : r.unread) std::printf("not counted: %s\n", printable(u).c_str());
  }
  return clean ? kExitOk : kExitFinding;
}

}  // namespace

int run_audit(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kAuditUsage, stderr);
    return kExitUsage;
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kAuditUsage, stdout);
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "verify") return run_verify(rest);
  if (sub == "report") return run_report(rest);
  if (sub == "reconcile") return run_reconcile(rest);
  std::fprintf(stderr, "sempi audit: error: unknown subcommand '%s'\n\n%s", sub.c_str(),
               kAuditUsage);
  return kExitUsage;
}

}  // namespace sempi::tool
