// `sempirun`: starts an MPI-style job of N ranks with a job CA that lives only in this process.
// All the logic is in src/launch; this file maps it onto argv, stdout/stderr and exit codes.

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/printable.hpp"
#include "launch/launch_options.hpp"
#include "launch/launcher.hpp"
#include "sempi/version.hpp"

namespace {

int usage_error(const std::string& message) {
  std::fprintf(stderr, "sempirun: error: %s\n(run 'sempirun --help' for usage)\n", message.c_str());
  return sempi::launch::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sempi::launch;
  const std::vector<std::string> args(argv + 1, argv + argc);

  ParsedCommandLine parsed;
  try {
    parsed = parse_launch_options(args);
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }
  if (parsed.action == LaunchAction::help) {
    std::fputs(launch_usage(), stdout);
    return 0;
  }
  if (parsed.action == LaunchAction::version) {
    std::printf("sempirun (sempi) %s\n", sempi::kVersionString);
    return 0;
  }

  // Configuration errors are found before any rank starts.
  sempi::policy::PolicyDocument policy;
  try {
    policy = load_policy(parsed.options);
    resolve_start_timeout(parsed.options);
    prepare_audit_dir(parsed.options);
  } catch (const std::exception& e) {
    // A policy error quotes the file's names and bytes: escaped for the terminal.
    std::fprintf(stderr, "sempirun: error: %s\n", sempi::printable_lines(e.what()).c_str());
    return kExitUsage;
  }

  try {
    Launcher launcher(std::move(parsed.options), std::move(policy));
    return launcher.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sempirun: error: %s\n", e.what());
    return kExitUsage;
  }
}
