// `sempi`: the multi-tool. Dispatches to one subcommand per concern.

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "common/printable.hpp"
#include "sempi/command.hpp"
#include "sempi/version.hpp"

namespace {

constexpr const char* kUsage =
    "usage: sempi <command> [args]\n"
    "\n"
    "commands:\n"
    "  pki       job CA, rank certificates and inspection (sempi pki --help)\n"
    "  policy    validate a policy and explain its decisions (sempi policy --help)\n"
    "  audit     verify, report on and reconcile audit logs (sempi audit --help)\n"
    "  version   print the version\n";

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? sempi::tool::kExitUsage : sempi::tool::kExitOk;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "pki") return sempi::tool::run_pki(rest);
    if (command == "policy") return sempi::tool::run_policy(rest);
    if (command == "audit") return sempi::tool::run_audit(rest);
    if (command == "version" || command == "--version") {
      std::printf("sempi %s\n", sempi::kVersionString);
      return sempi::tool::kExitOk;
    }
  } catch (const std::exception& e) {
    // Errors may quote what a file holds (a policy's names, a parser's "last read"): escaped.
    std::fprintf(stderr, "sempi %s: error: %s\n", command.c_str(), sempi::printable_lines(e.what()).c_str());
    return sempi::tool::kExitUsage;
  }
  std::fprintf(stderr, "sempi: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return sempi::tool::kExitUsage;
}
