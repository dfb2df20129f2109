#pragma once
// A small, strict command-line parser shared by the tools: long options with values
// ("--out DIR" or "--out=DIR"), boolean flags, and positional arguments. Unknown options and
// missing values are errors (sempi::Error with ErrorClass::config), never ignored.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sempi::tool {

struct CliSpec {
  std::set<std::string> value_options;  // e.g. "--out"
  std::set<std::string> flag_options;   // e.g. "--json"
};

class CliArgs {
 public:
  /// Throws sempi::Error(config) on an unknown option, a missing value, a value given to a
  /// flag ("--json=1") or a repeated option.
  CliArgs(const std::vector<std::string>& args, const CliSpec& spec);

  [[nodiscard]] bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  [[nodiscard]] std::optional<std::string> value(const std::string& name) const;
  /// Throws sempi::Error(config) "missing required option NAME".
  [[nodiscard]] std::string required(const std::string& name) const;
  [[nodiscard]] const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

/// True if --help or -h is among the options of `args` (not an option's value, nor after
/// "--"): asked for anywhere among them, it is answered before anything else is checked.
bool wants_help(const std::vector<std::string>& args, const CliSpec& spec);

/// Parses a non-negative decimal integer in [min, max]; throws sempi::Error(config) naming `what`.
long long parse_integer(const std::string& text, long long min, long long max,
                        const std::string& what);

}  // namespace sempi::tool
