#include "sempi/cli_args.hpp"

#include <charconv>

#include "sempi/error.hpp"

namespace sempi::tool {

CliArgs::CliArgs(const std::vector<std::string>& args, const CliSpec& spec) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional_.insert(positional_.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    if (spec.flag_options.count(name) != 0) {
      if (inline_value) throw Error(ErrorClass::config, "option '" + name + "' takes no value");
      flags_.insert(name);
      continue;
    }
    if (spec.value_options.count(name) == 0) {
      throw Error(ErrorClass::config, "unknown option '" + name + "'");
    }
    if (values_.count(name) != 0) {
      throw Error(ErrorClass::config, "option '" + name + "' given more than once");
    }
    if (inline_value) {
      values_[name] = *inline_value;
    } else if (i + 1 < args.size()) {
      // "--out --force" is a forgotten value, not a directory named "--force": a value that
      // is one of this command's options must be given as --out=--force.
      const std::string& next = args[i + 1];
      const std::string next_name = next.substr(0, next.find('='));  // "--days=3" too
      if (spec.flag_options.count(next_name) != 0 || spec.value_options.count(next_name) != 0) {
        throw Error(ErrorClass::config, "option '" + name + "' needs a value, not the option '" +
                                            next + "' (write " + name + "=" + next +
                                            " if that is the value)");
      }
      values_[name] = args[++i];
    } else {
      throw Error(ErrorClass::config, "option '" + name + "' needs a value");
    }
    if (values_[name].empty()) {  // "--ca=" would mean the current directory's files
      throw Error(ErrorClass::config, "option '" + name + "' needs a value, not an empty one");
    }
  }
}

bool wants_help(const std::vector<std::string>& args, const CliSpec& spec) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
    // The value of an option ("--out --help" names a directory "--help") is not an option.
    if (spec.value_options.count(arg) != 0) ++i;
  }
  return false;
}

std::optional<std::string> CliArgs::value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string CliArgs::required(const std::string& name) const {
  auto v = value(name);
  if (!v) throw Error(ErrorClass::config, "missing required option " + name);
  return *v;
}

long long parse_integer(const std::string& text, long long min, long long max,
                        const std::string& what) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    throw Error(ErrorClass::config, "invalid " + what + " '" + text + "': expected an integer in [" +
                                        std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

}  // namespace sempi::tool
