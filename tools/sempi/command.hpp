#pragma once
// Subcommands of the `sempi` multi-tool. Each takes the arguments after its own name and
// returns the process exit status: 0 success, 1 a negative finding (e.g. audit verify found
// tampering), 2 bad usage, bad input or an error.

#include <string>
#include <vector>

namespace sempi::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFinding = 1;
inline constexpr int kExitUsage = 2;

int run_pki(const std::vector<std::string>& args);
int run_policy(const std::vector<std::string>& args);
int run_audit(const std::vector<std::string>& args);

}  // namespace sempi::tool
