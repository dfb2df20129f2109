// `sempi policy`: validate a policy and explain its decisions.

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/collective_kind.hpp"
#include "common/printable.hpp"
#include "policy/policy.hpp"
#include "sempi/cli_args.hpp"
#include "sempi/command.hpp"
#include "sempi/error.hpp"

namespace sempi::tool {
namespace {

// sempirun's -n limit (launch::kMaxRanks): check --ranks looks at every pair of ranks, explain
// --members builds the member list of world.
constexpr long long kMaxJobRanks = 4096;

constexpr const char* kPolicyUsage =
    "usage: sempi policy <subcommand> [options]\n"
    "\n"
    "subcommands:\n"
    "  check     validate a policy and print a readable summary\n"
    "  explain   print the decision for one message (or member set) and the rule behind it\n"
    "\n"
    "The format is described in config/README.md (schema: config/policy.schema.json).\n";

constexpr const char* kCheckUsage =
    "usage: sempi policy check FILE [--ranks N]\n"
    "\n"
    "Validates FILE. On success prints a summary (groups, segmentation, communicator rules,\n"
    "digest) and any warnings; with --ranks N also which rank pairs are never connected in a\n"
    "job of N ranks (N at most 4096). On failure prints one line per problem:\n"
    "FILE: JSON-PATH: reason.\n"
    "\n"
    "Exit status: 0 valid, 1 invalid policy, 2 bad usage or unreadable file.\n";

constexpr const char* kExplainUsage =
    "usage: sempi policy explain FILE --from R --to R [--comm NAME] [--op KIND] [--tag T]\n"
    "                            [--bytes B]\n"
    "       sempi policy explain FILE --comm NAME --members R,R,... [--parent NAME]\n"
    "                            [--ranks N]\n"
    "\n"
    "Prints ALLOW or DENY for a message from world rank --from to world rank --to on\n"
    "communicator --comm (default world), operation --op (p2p, or a collective such as\n"
    "allreduce or comm_create; default p2p), tag --tag (default 0) and size --bytes (default\n"
    "0), followed by the rule that decided.\n"
    "\n"
    "With --members: whether a communicator of that name may be created (split / dup) with\n"
    "exactly those world ranks as members. First the creation agreement (comm_create) on the\n"
    "parent communicator --parent (default: NAME without its last \".component\"; none if NAME\n"
    "has no dot): a parent world has the ranks 0..N-1 of a job of --ranks N (default: the\n"
    "highest rank of --members + 1); another parent is taken to have the --members ranks. Then\n"
    "the membership. The members of world and self are not checked: it says so (exit 0).\n"
    "\n"
    "Exit status: 0 allowed, 1 denied, 2 bad usage or invalid policy.\n";

// Regular files only, read up to one byte past the size limit (policy_document.hpp).
std::string read_text(const std::string& path) { return policy::read_policy_file(path); }

std::string one_file(const CliArgs& cli) {
  if (cli.positional().size() != 1) throw Error(ErrorClass::config, "expected exactly one FILE");
  return cli.positional().front();
}

// An error about the whole file ("FILE: reason", or "FILE: /path: reason") as a finding line
// in the form FILE: JSON-PATH: reason.
std::string as_finding(const std::string& what, const std::string& file) {
  const std::string prefix = file + ": ";
  std::string finding = what.starts_with(prefix) ? what.substr(prefix.size()) : what;
  if (!finding.starts_with("/")) finding = "/: " + finding;
  return file + ": " + finding;
}

int run_check(const std::vector<std::string>& args) {
  const CliSpec spec{{"--ranks"}, {}};
  if (wants_help(args, spec)) {
    std::fputs(kCheckUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  const std::string file = one_file(cli);
  std::optional<int> ranks;
  if (const auto v = cli.value("--ranks")) {
    ranks = static_cast<int>(parse_integer(*v, 1, kMaxJobRanks, "--ranks"));
  }
  const std::string text = read_text(file);
  nlohmann::json json;
  try {
    json = policy::parse_policy_json(text, file);
  } catch (const Error& e) {
    // A syntax error (with line and column), a repeated key, deep nesting, a number no double
    // holds (1e400): findings about the file.
    std::fprintf(stdout, "%s\n", printable(as_finding(e.what(), file)).c_str());
    return kExitFinding;
  }
  const auto issues = policy::Policy::validate(json);
  if (!issues.empty()) {
    for (const auto& i : issues) {
      // Paths and messages quote the policy's own names: escaped, as audit tools do.
      std::fprintf(stdout, "%s: %s: %s\n", file.c_str(), printable(i.path).c_str(),
                   printable(i.message).c_str());
    }
    std::fprintf(stdout, "%s: invalid policy (%zu problem%s)\n", file.c_str(), issues.size(),
                 issues.size() == 1 ? "" : "s");
    return kExitFinding;
  }
  std::optional<policy::PolicyDocument> document;
  try {
    document = policy::PolicyDocument::parse(text, file);  // e.g. a canonical form too large
  } catch (const Error& e) {
    std::fprintf(stdout, "%s\n", printable(as_finding(e.what(), file)).c_str());
    return kExitFinding;
  }
  const auto rules = policy::Policy::compile(*document);
  // The summary and warnings quote the policy's names, which may hold any bytes: escaped.
  std::fprintf(stdout, "%s: valid\n%s", file.c_str(),
               printable_lines(rules.summary(ranks)).c_str());
  for (const auto& w : rules.warnings(ranks)) {
    std::fprintf(stdout, "warning: %s: %s\n", printable(w.path).c_str(),
                 printable(w.message).c_str());
  }
  return kExitOk;
}

// explain --members: what split / dup check on every member, in their order (comm_factory.cpp):
// the creation agreement on the parent, then the new communicator's members.
policy::Decision explain_members(const policy::Policy& rules, const CliArgs& cli,
                                 const std::string& comm, const std::vector<int>& list) {
  std::optional<std::string> parent = cli.value("--parent");
  if (parent && parent->empty()) throw Error(ErrorClass::config, "--parent needs a name");
  if (const auto dot = comm.rfind('.'); !parent && dot != std::string::npos && dot > 0) {
    parent = comm.substr(0, dot);  // world.split.dup -> world.split
  }
  const int highest = *std::max_element(list.begin(), list.end());
  std::optional<int> ranks;
  if (const auto v = cli.value("--ranks")) {
    ranks = static_cast<int>(parse_integer(*v, 1, kMaxJobRanks, "--ranks"));
    if (highest >= *ranks) {
      throw Error(ErrorClass::config, "--members names rank " + std::to_string(highest) +
                                          ", beyond a job of " + std::to_string(*ranks) + " ranks");
    }
  }
  std::string agreement;
  if (parent) {
    std::vector<int> parent_members;
    std::string note;
    if (comm.size() > 6 && comm.ends_with(".group")) {
      // MPI_Comm_create_group runs the agreement among the group's members alone.
      parent_members = list;
      note = "MPI_Comm_create_group: the agreement runs among the new members only";
    } else if (*parent == "world") {
      const long long size = ranks ? *ranks : highest + 1LL;
      if (size > kMaxJobRanks) {
        throw Error(ErrorClass::config, "--members names rank " + std::to_string(highest) +
                                            ", beyond sempirun's limit of " +
                                            std::to_string(kMaxJobRanks) + " ranks");
      }
      parent_members.resize(static_cast<std::size_t>(size));
      std::iota(parent_members.begin(), parent_members.end(), 0);
      note = "a job of " + std::to_string(size) + " ranks";
    } else {
      // Another parent's members are not known here. A split's members are some of its
      // parent's, a dup's all of them: --members is the closest stand-in there is.
      parent_members = list;
      note = "its members taken to be those of --members";
    }
    auto create = rules.check_comm_create(*parent, parent_members);
    if (!create.allowed) {  // refused before any member set is looked at
      create.explanation += "\n(parent '" + *parent + "': " + note + ")";
      return create;
    }
    agreement = "the creation agreement on parent '" + *parent + "' (" + note +
                ") is allowed by " + create.rule + "\n";
  }
  auto decision = rules.check_members(comm, list);
  decision.explanation = agreement + decision.explanation;
  return decision;
}

int run_explain(const std::vector<std::string>& args) {
  const CliSpec spec{
      {"--from", "--to", "--comm", "--op", "--tag", "--bytes", "--members", "--parent", "--ranks"},
      {}};
  if (wants_help(args, spec)) {
    std::fputs(kExplainUsage, stdout);
    return kExitOk;
  }
  const CliArgs cli(args, spec);
  const std::string file = one_file(cli);
  const auto members = cli.value("--members");
  // The two questions take different options: one given to the other question is a mistake,
  // not something to ignore silently.
  for (const char* option : {"--from", "--to", "--op", "--tag", "--bytes"}) {
    if (members && cli.value(option)) {
      throw Error(ErrorClass::config, std::string(option) + " cannot be combined with --members");
    }
  }
  for (const char* option : {"--parent", "--ranks"}) {
    if (!members && cli.value(option)) {
      throw Error(ErrorClass::config, std::string(option) + " needs --members");
    }
  }
  const auto rules = policy::Policy::compile(policy::PolicyDocument::parse(read_text(file), file));
  policy::Decision decision;
  if (members) {
    std::vector<int> list;
    std::stringstream s(*members);
    std::string item;
    while (std::getline(s, item, ',')) {
      list.push_back(static_cast<int>(parse_integer(item, 0, policy::kMaxPolicyRank, "--members")));
    }
    // getline drops a trailing empty item, which parse_integer would refuse anywhere else.
    if (!members->empty() && members->back() == ',') {
      throw Error(ErrorClass::config, "--members: an empty rank after the last ','");
    }
    if (list.empty()) throw Error(ErrorClass::config, "--members needs at least one rank");
    // A membership question is about a communicator: no silent default to world, whose members
    // are never checked (the answer would be NOT CHECKED, exit 0, whatever was meant).
    const std::string comm = cli.required("--comm");
    if (comm == "world" || comm == "self") {
      // The runtime creates both itself, with no member check (runtime.cpp): a DENY here
      // would claim a refusal that never happens.
      std::fprintf(stdout,
                   "NOT CHECKED (predefined communicator)\n"
                   "members are not checked for the predefined '%s': %s\n",
                   comm.c_str(),
                   comm == "world" ? "the runtime creates it with every rank of the job"
                                   : "the runtime creates it on each rank with that rank alone");
      return kExitOk;
    }
    decision = explain_members(rules, cli, comm, list);
  } else {
    policy::MessageQuery q;
    q.from = static_cast<int>(parse_integer(cli.required("--from"), 0, policy::kMaxPolicyRank, "--from"));
    q.to = static_cast<int>(parse_integer(cli.required("--to"), 0, policy::kMaxPolicyRank, "--to"));
    q.comm = cli.value("--comm").value_or("world");
    if (const auto op = cli.value("--op")) {
      const auto kind = detail::parse_op_kind(*op);
      if (!kind) throw Error(ErrorClass::config, "--op: unknown operation '" + *op + "'");
      q.op = static_cast<std::uint16_t>(*kind);
    }
    if (const auto tag = cli.value("--tag")) {
      q.tag = static_cast<int>(parse_integer(*tag, 0, 0x7fffffff, "--tag"));
    }
    if (const auto bytes = cli.value("--bytes")) {
      q.bytes = static_cast<std::uint64_t>(parse_integer(*bytes, 0, (1LL << 62), "--bytes"));
    }
    decision = rules.decide(q);
  }
  std::fprintf(stdout, "%s (%s)\nrule: %s\n%s\n", decision.allowed ? "ALLOW" : "DENY",
               policy::verdict_name(decision.verdict), printable(decision.rule).c_str(),
               printable_lines(decision.explanation).c_str());
  if (!rules.enforcing() && !decision.allowed) {
    std::fputs("note: the policy is in audit mode: this would be logged, not enforced\n", stdout);
  }
  return decision.allowed ? kExitOk : kExitFinding;
}

}  // namespace

int run_policy(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kPolicyUsage, stderr);
    return kExitUsage;
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kPolicyUsage, stdout);
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "check") return run_check(rest);
  if (sub == "explain") return run_explain(rest);
  std::fprintf(stderr, "sempi policy: error: unknown subcommand '%s'\n\n%s", sub.c_str(),
               kPolicyUsage);
  return kExitUsage;
}

}  // namespace sempi::tool
