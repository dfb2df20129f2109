#include "policy/policy.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <sstream>

#include "common/hex.hpp"
#include "common/printable.hpp"
#include "core/collective_kind.hpp"
#include "sempi/constants.hpp"
#include "sempi/error.hpp"

namespace sempi::policy {

using detail::kMaxOpKind;
using detail::OpKind;
using detail::op_kind_name;
using detail::parse_op_kind;

namespace {

constexpr std::uint32_t kAllCollectives =
    ((1u << (kMaxOpKind + 1)) - 1) & ~(1u << static_cast<unsigned>(OpKind::p2p));
// Each creation agreement message carries (color, key, next context) per member: 3 x int64.
constexpr std::uint64_t kCommCreateEntryBytes = 24;

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

std::string known_collectives() {
  std::vector<std::string> names;
  for (std::uint16_t k = 1; k <= kMaxOpKind; ++k) {
    names.emplace_back(op_kind_name(static_cast<OpKind>(k)));
  }
  return join(names);
}

std::string ops_text(std::uint32_t ops) {
  if (ops == kAllCollectives) return "*";
  std::vector<std::string> names;
  for (std::uint16_t k = 1; k <= kMaxOpKind; ++k) {
    if ((ops & (1u << k)) != 0) names.emplace_back(op_kind_name(static_cast<OpKind>(k)));
  }
  return names.empty() ? "none" : join(names);
}

std::string ranges_text(const std::vector<std::pair<int, int>>& ranges) {
  std::vector<std::string> parts;
  for (const auto& [lo, hi] : ranges) {
    parts.push_back(lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi));
  }
  return parts.empty() ? "none" : join(parts, ",");
}

void merge_ranges(std::vector<std::pair<int, int>>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int, int>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && static_cast<long long>(r.first) <= merged.back().second + 1LL) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges = std::move(merged);
}

bool ranges_contain(const std::vector<std::pair<int, int>>& ranges, int value) noexcept {
  // Few ranges in practice; binary search keeps a long list cheap too.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), value,
                             [](int v, const std::pair<int, int>& r) { return v < r.first; });
  if (it == ranges.begin()) return false;
  --it;
  return value >= it->first && value <= it->second;
}

// A whole decimal int: std::errc() on success, result_out_of_range for digits an int cannot
// hold, invalid_argument otherwise. Digits only: from_chars also reads a sign, which would let
// "0--0" pass as the range 0-0.
std::errc parse_int(std::string_view text, int& out) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::errc::invalid_argument;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  if (ec == std::errc() && ptr != end) return std::errc::invalid_argument;
  return ec;
}

// "5" or "2-7" (both inclusive). Returns false with a reason on a malformed item.
bool parse_range_text(std::string_view text, int max, std::pair<int, int>& out,
                      std::string& why) {
  const auto dash = text.find('-');
  int lo = 0;
  int hi = 0;
  std::errc ec{};
  if (dash == std::string_view::npos) {
    ec = parse_int(text, lo);
    hi = lo;
  } else {
    ec = parse_int(text.substr(0, dash), lo);
    if (ec == std::errc()) ec = parse_int(text.substr(dash + 1), hi);
  }
  if (ec == std::errc::invalid_argument) {
    why = "'" + std::string(text) + (dash == std::string_view::npos
                                         ? "' is not a number or a range like \"0-3\""
                                         : "' is not a range like \"0-3\"");
    return false;
  }
  if (ec == std::errc::result_out_of_range || lo < 0 || hi > max) {
    why = "'" + std::string(text) + "' is outside 0.." + std::to_string(max);
    return false;
  }
  if (lo > hi) {
    why = "range '" + std::string(text) + "' is empty (start after end)";
    return false;
  }
  out = {lo, hi};
  return true;
}

// A JSON integer within 0..max. Unsigned values are read as such: 18446744073709551615 is
// out of range, not -1.
std::optional<int> integer_within(const nlohmann::json& value, int max) {
  if (value.is_number_unsigned()) {
    const auto n = value.get<std::uint64_t>();
    return n <= static_cast<std::uint64_t>(max) ? std::optional<int>(static_cast<int>(n))
                                                : std::nullopt;
  }
  const auto n = value.get<long long>();
  return n >= 0 && n <= max ? std::optional<int>(static_cast<int>(n)) : std::nullopt;
}

// nlohmann stores a number written with a fraction or an exponent (1.5, 1e3, 1.0) as a double,
// and also an integer no 64-bit type holds (99999999999999999999). Why such a number is refused
// where an integer belongs: `what` ("rank", "tag") is out of range, or is written wrongly.
std::string not_an_integer(const nlohmann::json& value, const std::string& what,
                           const std::string& range) {
  const double d = value.get<double>();
  // Only integers beyond int64 and uint64 are parsed as doubles this large.
  if (d >= 0x1p64 || d < -0x1p63) {
    return "integer " + value.dump() + " is out of range for a " + what + " (" + range + ")";
  }
  return what + " " + value.dump() +
         " must be a non-negative integer written without exponent or fraction";
}

bool valid_group_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
}

// At most 256 characters, as the schema's maxLength counts them (not bytes: UTF-8 takes up to
// four a character). nlohmann has checked that the string is well-formed UTF-8.
bool valid_pattern(std::string_view pattern) {
  const auto characters = std::count_if(pattern.begin(), pattern.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;  // not a continuation byte
  });
  if (pattern.empty() || characters > 256) return false;
  const auto star = pattern.find('*');
  return star == std::string_view::npos || star == pattern.size() - 1;
}

}  // namespace

// --- names ---------------------------------------------------------------------------------

const char* mode_name(Mode mode) noexcept { return mode == Mode::enforce ? "enforce" : "audit"; }
const char* action_name(Action action) noexcept {
  return action == Action::drop ? "drop" : "abort";
}
const char* message_audit_name(MessageAudit level) noexcept {
  switch (level) {
    case MessageAudit::off: return "off";
    case MessageAudit::metadata: return "metadata";
    case MessageAudit::digest: return "digest";
  }
  return "off";
}

const char* verdict_name(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::allow: return "allow";
    case Verdict::deny_comm_unknown: return "deny_comm_unknown";
    case Verdict::deny_not_member: return "deny_not_member";
    case Verdict::deny_segment: return "deny_segment";
    case Verdict::deny_op: return "deny_op";
    case Verdict::deny_op_context: return "deny_op_context";
    case Verdict::deny_tag: return "deny_tag";
    case Verdict::deny_size: return "deny_size";
    case Verdict::deny_comm_freed:
      return "deny_comm_freed";
  }
  return "deny";
}

const char* verdict_text(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::allow: return "allowed";
    case Verdict::deny_comm_unknown: return "no communicator rule names this communicator";
    case Verdict::deny_not_member: return "the peer is not a member of this communicator";
    case Verdict::deny_segment:
      return "segmentation does not let these two ranks talk on this communicator";
    case Verdict::deny_op: return "this operation is not allowed on this communicator";
    case Verdict::deny_op_context: return "the operation kind does not fit the frame's context";
    case Verdict::deny_tag: return "this tag is not allowed on this communicator";
    case Verdict::deny_size: return "the message exceeds the size limit";
    case Verdict::deny_comm_freed:
      return "the communicator was freed on this rank";
  }
  return "denied";
}

bool name_matches(std::string_view pattern, std::string_view name) noexcept {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
  }
  return pattern == name;
}

// --- RankSet -------------------------------------------------------------------------------

bool RankSet::contains(int rank) const noexcept { return all || ranges_contain(ranges, rank); }

std::string RankSet::describe() const { return all ? "*" : ranges_text(ranges); }

int RankSet::max_rank() const noexcept { return ranges.empty() ? -1 : ranges.back().second; }

// --- parsing and validation ----------------------------------------------------------------

struct PolicyParser {
  Policy& out;
  std::vector<Issue>& issues;

  void issue(const std::string& path, std::string message) {
    issues.push_back({path.empty() ? "/" : path, std::move(message)});
  }

  void check_keys(const nlohmann::json& object, const std::string& path,
                  std::initializer_list<const char*> allowed) {
    for (const auto& item : object.items()) {
      const std::string& key = item.key();
      const nlohmann::json& value = item.value();
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
        std::vector<std::string> names(allowed.begin(), allowed.end());
        issue(path + "/" + escape_pointer(key),
              "unknown key '" + key + "' (allowed: " + join(names) + ")");
      } else if (key == "comment" && !value.is_string()) {
        issue(path + "/comment", "must be a string");
      }
    }
  }

  // One choice among fixed strings; returns the index or -1 (issue recorded).
  int choice(const nlohmann::json& value, const std::string& path,
             std::initializer_list<const char*> options) {
    std::vector<std::string> names(options.begin(), options.end());
    if (!value.is_string()) {
      issue(path, "must be one of: " + join(names));
      return -1;
    }
    const auto& text = value.get_ref<const std::string&>();
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == text) return static_cast<int>(i);
    }
    issue(path, "'" + text + "' is not one of: " + join(names));
    return -1;
  }

  std::optional<std::uint64_t> byte_count(const nlohmann::json& value, const std::string& path) {
    if (value.is_number_float()) {
      const auto most = std::numeric_limits<std::uint64_t>::max();
      issue(path, not_an_integer(value, "byte count", "0.." + std::to_string(most)));
      return std::nullopt;
    }
    if (!value.is_number_unsigned() &&
        !(value.is_number_integer() && value.get<long long>() >= 0)) {
      issue(path, "must be a non-negative integer (bytes)");
      return std::nullopt;
    }
    return value.get<std::uint64_t>();
  }

  // "*", N, "a-b", or an array of N / "a-b".
  RankSet rank_set(const nlohmann::json& value, const std::string& path) {
    RankSet set;
    auto item = [&](const nlohmann::json& v, const std::string& p) {
      std::pair<int, int> range;
      std::string why;
      if (v.is_number_integer()) {
        const auto n = integer_within(v, kMaxPolicyRank);
        if (!n) {
          issue(p, "rank " + v.dump() + " is outside 0.." + std::to_string(kMaxPolicyRank));
          return;
        }
        set.ranges.emplace_back(*n, *n);
      } else if (v.is_string() && v.get_ref<const std::string&>() == "*") {
        set.all = true;
      } else if (v.is_string()) {
        if (parse_range_text(v.get_ref<const std::string&>(), kMaxPolicyRank, range, why)) {
          set.ranges.push_back(range);
        } else {
          issue(p, why);
        }
      } else if (v.is_number_float()) {
        issue(p, not_an_integer(v, "rank", "0.." + std::to_string(kMaxPolicyRank)));
      } else {
        issue(p, "a rank must be a number, a range like \"0-3\", or \"*\"");
      }
    };
    if (value.is_array()) {
      for (std::size_t i = 0; i < value.size(); ++i) item(value[i], path + "/" + std::to_string(i));
    } else {
      item(value, path);
    }
    merge_ranges(set.ranges);
    return set;
  }

  // A group reference: a defined group name or "*".
  std::string group_ref(const nlohmann::json& value, const std::string& path) {
    if (!value.is_string()) {
      issue(path, "must be a group name or \"*\"");
      return {};
    }
    const auto& name = value.get_ref<const std::string&>();
    if (!out.group_index(name)) {
      issue(path, "unknown group '" + name + "' (define it under /groups)");
    }
    return name;
  }

  // The resolved index of a reference group_ref returned (an unknown one was an issue).
  std::size_t index_of(const std::string& ref) const {
    return out.group_index(ref).value_or(Policy::kEveryRank);
  }

  std::vector<std::string> patterns(const nlohmann::json& value, const std::string& path) {
    std::vector<std::string> result;
    auto one = [&](const nlohmann::json& v, const std::string& p) {
      if (!v.is_string() || !valid_pattern(v.get_ref<const std::string&>())) {
        issue(p, "must be a communicator name, \"*\", or a prefix ending in '*'");
        return;
      }
      result.push_back(v.get<std::string>());
    };
    if (value.is_array()) {
      if (value.empty()) issue(path, "an empty list matches no communicator; use \"*\" for all");
      for (std::size_t i = 0; i < value.size(); ++i) one(value[i], path + "/" + std::to_string(i));
    } else {
      one(value, path);
    }
    return result;
  }

  void groups(const nlohmann::json& value) {
    if (!value.is_object()) {
      issue("/groups", "must be an object mapping group names to ranks");
      return;
    }
    for (const auto& [name, ranks] : value.items()) {
      const std::string path = "/groups/" + escape_pointer(name);
      if (!valid_group_name(name)) {
        issue(path, "group name '" + name + "' must be 1-64 characters of A-Z a-z 0-9 _ - .");
        continue;
      }
      out.group_indices_.emplace(name, out.groups_.size());
      out.groups_.push_back({name, rank_set(ranks, path)});
    }
  }

  void segmentation(const nlohmann::json& value) {
    if (!value.is_array()) {
      issue("/segmentation", "must be an array of rules");
      return;
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string path = "/segmentation/" + std::to_string(i);
      const auto& rule = value[i];
      if (!rule.is_object()) {
        issue(path, "a segmentation rule must be an object");
        continue;
      }
      check_keys(rule, path, {"between", "communicators", "comment"});
      Policy::Segment segment;
      const auto between = rule.find("between");
      if (between == rule.end()) {
        issue(path, "missing 'between': [GROUP, GROUP]");
      } else if (!between->is_array() || between->size() != 2) {
        issue(path + "/between", "must be a list of exactly two groups");
      } else {
        segment.a = group_ref((*between)[0], path + "/between/0");
        segment.b = group_ref((*between)[1], path + "/between/1");
        segment.a_group = index_of(segment.a);
        segment.b_group = index_of(segment.b);
      }
      if (const auto comms = rule.find("communicators"); comms != rule.end()) {
        segment.comms = patterns(*comms, path + "/communicators");
        if (segment.comms.size() == 1 && segment.comms[0] == "*") segment.comms.clear();
      }
      out.segments_.push_back(std::move(segment));
    }
  }

  void communicators(const nlohmann::json& value) {
    if (!value.is_array()) {
      issue("/communicators", "must be an array of rules");
      return;
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string path = "/communicators/" + std::to_string(i);
      const auto& rule = value[i];
      if (!rule.is_object()) {
        issue(path, "a communicator rule must be an object");
        continue;
      }
      check_keys(rule, path,
                 {"name", "members", "collectives", "p2p_tags", "max_message_bytes", "comment"});
      Policy::CommRule comm;
      const auto name = rule.find("name");
      if (name == rule.end()) {
        issue(path, "missing 'name' (a communicator name, \"*\", or a prefix ending in '*')");
      } else if (!name->is_string() || !valid_pattern(name->get_ref<const std::string&>())) {
        issue(path + "/name", "must be a communicator name, \"*\", or a prefix ending in '*'");
      } else {
        comm.pattern = name->get<std::string>();
      }
      if (const auto members = rule.find("members"); members != rule.end()) {
        if (members->is_string() && members->get_ref<const std::string&>() == "*") {
          comm.any_members = true;
        } else if (members->is_array()) {
          for (std::size_t g = 0; g < members->size(); ++g) {
            auto ref = group_ref((*members)[g], path + "/members/" + std::to_string(g));
            if (ref == "*") comm.any_members = true;
            comm.member_group_indices.push_back(index_of(ref));
            comm.member_groups.push_back(std::move(ref));
          }
        } else {
          auto ref = group_ref(*members, path + "/members");
          if (ref == "*") comm.any_members = true;
          comm.member_group_indices.push_back(index_of(ref));
          comm.member_groups.push_back(std::move(ref));
        }
      }
      if (const auto coll = rule.find("collectives"); coll != rule.end()) {
        if (coll->is_string() && coll->get_ref<const std::string&>() == "*") {
          comm.ops = kAllCollectives;
        } else if (coll->is_array()) {
          for (std::size_t k = 0; k < coll->size(); ++k) {
            const std::string p = path + "/collectives/" + std::to_string(k);
            const auto& v = (*coll)[k];
            const auto kind =
                v.is_string() ? parse_op_kind(v.get_ref<const std::string&>()) : std::nullopt;
            if (!kind || *kind == OpKind::p2p) {
              issue(p, (v.is_string() ? "unknown collective '" + v.get<std::string>() + "'"
                                      : std::string("must be a collective name")) +
                           " (known: " + known_collectives() + ")");
              continue;
            }
            comm.ops |= 1u << static_cast<unsigned>(*kind);
          }
        } else {
          issue(path + "/collectives", "must be \"*\" or a list of collective names");
        }
      }
      if (const auto tags = rule.find("p2p_tags"); tags != rule.end()) {
        if (tags->is_string() && tags->get_ref<const std::string&>() == "*") {
          comm.any_tag = true;
        } else if (tags->is_array()) {
          for (std::size_t k = 0; k < tags->size(); ++k) {
            const std::string p = path + "/p2p_tags/" + std::to_string(k);
            const auto& v = (*tags)[k];
            std::pair<int, int> range;
            std::string why;
            if (v.is_number_integer()) {
              const auto n = integer_within(v, TAG_UB);
              if (!n) {
                issue(p, "tag " + v.dump() + " is outside 0.." + std::to_string(TAG_UB));
                continue;
              }
              comm.tags.emplace_back(*n, *n);
            } else if (v.is_string() &&
                       parse_range_text(v.get_ref<const std::string&>(), TAG_UB, range, why)) {
              comm.tags.push_back(range);
            } else if (v.is_number_float()) {
              issue(p, not_an_integer(v, "tag", "0.." + std::to_string(TAG_UB)));
            } else {
              issue(p, v.is_string() ? why : "a tag must be a number or a range like \"100-199\"");
            }
          }
          merge_ranges(comm.tags);
        } else {
          issue(path + "/p2p_tags", "must be \"*\" or a list of tags and ranges");
        }
      }
      if (const auto limit = rule.find("max_message_bytes"); limit != rule.end()) {
        comm.max_bytes = byte_count(*limit, path + "/max_message_bytes");
      }
      out.comms_.push_back(std::move(comm));
    }
  }

  void parse(const nlohmann::json& json) {
    if (!json.is_object()) {
      issue("/", "a policy must be a JSON object");
      return;
    }
    check_keys(json, "", {"version", "mode", "on_violation", "groups", "segmentation",
                          "communicators", "limits", "audit", "comment"});
    const auto version = json.find("version");
    if (version == json.end()) {
      issue("/version", "missing: a policy must declare \"version\": 1");
    } else if (version->is_number_float()) {
      issue("/version", "unsupported version " + version->dump() +
                            ": the version is the integer 1, written without exponent or fraction");
    } else if (!version->is_number_integer() || version->dump() != "1") {
      issue("/version", "unsupported version " + version->dump() + " (this sempi reads version 1)");
    }
    if (const auto mode = json.find("mode"); mode != json.end()) {
      const int m = choice(*mode, "/mode", {"enforce", "audit"});
      out.mode_ = m == 1 ? Mode::audit : Mode::enforce;
    }
    if (const auto action = json.find("on_violation"); action != json.end()) {
      const int a = choice(*action, "/on_violation", {"drop", "abort"});
      out.action_ = a == 1 ? Action::abort : Action::drop;
    }
    // Groups first: the rules refer to them.
    if (const auto g = json.find("groups"); g != json.end()) groups(*g);
    if (const auto s = json.find("segmentation"); s != json.end()) segmentation(*s);
    if (const auto c = json.find("communicators"); c != json.end()) communicators(*c);
    if (const auto limits = json.find("limits"); limits != json.end()) {
      if (!limits->is_object()) {
        issue("/limits", "must be an object");
      } else {
        check_keys(*limits, "/limits", {"max_message_bytes"});
        if (const auto m = limits->find("max_message_bytes"); m != limits->end()) {
          out.max_bytes_ = byte_count(*m, "/limits/max_message_bytes");
        }
      }
    }
    if (const auto audit = json.find("audit"); audit != json.end()) {
      if (!audit->is_object()) {
        issue("/audit", "must be an object");
      } else {
        check_keys(*audit, "/audit", {"messages", "flush"});
        if (const auto f = audit->find("flush"); f != audit->end()) {
          out.audit_flush_each_ = choice(*f, "/audit/flush", {"interval", "record"}) == 1;
        }
        if (const auto m = audit->find("messages"); m != audit->end()) {
          const int level = choice(*m, "/audit/messages", {"off", "metadata", "digest"});
          out.message_audit_ = level == 1   ? MessageAudit::metadata
                               : level == 2 ? MessageAudit::digest
                                            : MessageAudit::off;
        }
      }
    }
  }
};

std::vector<Issue> Policy::validate(const nlohmann::json& json) {
  Policy scratch{PolicyDocument{}};
  std::vector<Issue> issues;
  PolicyParser{scratch, issues}.parse(json);
  return issues;
}

Policy Policy::compile(const PolicyDocument& document) {
  Policy policy{document};
  std::vector<Issue> issues;
  PolicyParser{policy, issues}.parse(document.json);
  if (!issues.empty()) {
    std::string text = "invalid policy:";
    // One line each: what the file named (keys, patterns) is escaped, newlines included.
    for (const auto& i : issues) text += "\n  " + one_line(i.path) + ": " + one_line(i.message);
    throw Error(ErrorClass::config, text);
  }
  return policy;
}

// --- decisions -----------------------------------------------------------------------------

std::optional<std::size_t> Policy::group_index(std::string_view name) const {
  if (name == "*") return kEveryRank;
  const auto it = group_indices_.find(name);
  if (it == group_indices_.end()) return std::nullopt;
  return it->second;
}

bool Policy::in_group(std::size_t group, int rank) const {
  return group == kEveryRank || groups_[group].ranks.contains(rank);
}

int Policy::segment_rule(int a, int b, std::string_view comm) const {
  if (a == b) return -2;  // a rank may always talk to itself
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const auto& s = segments_[i];
    const bool pair = (in_group(s.a_group, a) && in_group(s.b_group, b)) ||
                      (in_group(s.a_group, b) && in_group(s.b_group, a));
    if (!pair) continue;
    if (s.comms.empty() ||
        std::any_of(s.comms.begin(), s.comms.end(),
                    [&](const std::string& p) { return name_matches(p, comm); })) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool Policy::ever_talk(int a, int b) const {
  if (mode_ == Mode::audit || a == b) return true;
  for (const auto& s : segments_) {
    if ((in_group(s.a_group, a) && in_group(s.b_group, b)) ||
        (in_group(s.a_group, b) && in_group(s.b_group, a))) {
      return true;
    }
  }
  return false;
}

std::vector<std::vector<std::uint64_t>> Policy::ever_talk_rows(int ranks) const {
  using Row = std::vector<std::uint64_t>;
  const std::size_t words = (static_cast<std::size_t>(ranks) + 63) / 64;
  const auto set = [](Row& row, int from, int to) {
    for (int r = from; r <= to; ++r) row[static_cast<std::size_t>(r) / 64] |= 1ULL << (r % 64);
  };
  // Each group's members as a row, made once: a policy may name a group in thousands of rules.
  std::vector<std::optional<Row>> group_rows(groups_.size() + 1);
  const auto members = [&](std::size_t group) -> const Row& {
    auto& row = group_rows[group == kEveryRank ? groups_.size() : group];
    if (!row) {
      row.emplace(words, 0);
      if (group == kEveryRank || groups_[group].ranks.all) {
        set(*row, 0, ranks - 1);
      } else {
        for (const auto& [lo, hi] : groups_[group].ranks.ranges) {
          if (lo < ranks) set(*row, std::max(lo, 0), std::min(hi, ranks - 1));
        }
      }
    }
    return *row;
  };
  std::vector<Row> rows(static_cast<std::size_t>(ranks), Row(words, 0));
  for (int a = 0; a < ranks; ++a) set(rows[static_cast<std::size_t>(a)], a, a);
  if (mode_ == Mode::audit) {
    for (auto& row : rows) set(row, 0, ranks - 1);
    return rows;
  }
  // A segment adds one group's row to each member of the other: rules x ranks x ranks / 64
  // word operations, where asking ever_talk of every pair cost rules x ranks x ranks checks.
  const auto add = [&](const Row& to_each_of, const Row& row) {
    for (std::size_t w = 0; w < words; ++w) {
      for (std::uint64_t bits = to_each_of[w]; bits != 0; bits &= bits - 1) {
        Row& target = rows[w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))];
        for (std::size_t k = 0; k < words; ++k) target[k] |= row[k];
      }
    }
  };
  std::set<std::pair<std::size_t, std::size_t>> done;  // rules differing only in communicators
  for (const auto& s : segments_) {
    if (!done.emplace(std::min(s.a_group, s.b_group), std::max(s.a_group, s.b_group)).second) {
      continue;
    }
    const Row& a = members(s.a_group);
    const Row& b = members(s.b_group);
    add(a, b);
    add(b, a);
  }
  return rows;
}

int Policy::comm_rule(std::string_view name) const {
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (name_matches(comms_[i].pattern, name)) return static_cast<int>(i);
  }
  return -1;
}

std::uint64_t Policy::effective_max_bytes(const CommRule* rule) const {
  std::uint64_t limit = max_bytes_.value_or(std::numeric_limits<std::uint64_t>::max());
  if (rule != nullptr && rule->max_bytes) limit = std::min(limit, *rule->max_bytes);
  return limit;
}

Decision Policy::decide(const MessageQuery& q) const {
  Decision d;
  const int rule_index = comm_rule(q.comm);
  const std::string comm = "'" + q.comm + "'";
  if (rule_index < 0) {
    d.verdict = Verdict::deny_comm_unknown;
    d.rule = "default deny";
    d.explanation = "no rule under /communicators matches communicator " + comm;
    return d;
  }
  const CommRule& rule = comms_[static_cast<std::size_t>(rule_index)];
  const std::string rule_path = "/communicators/" + std::to_string(rule_index);
  const int seg = segment_rule(q.from, q.to, q.comm);
  if (seg == -1) {
    d.verdict = Verdict::deny_segment;
    d.rule = "default deny";
    d.explanation = "no rule under /segmentation lets rank " + std::to_string(q.from) +
                    " and rank " + std::to_string(q.to) + " talk on " + comm;
    return d;
  }
  const std::string seg_text =
      seg == -2 ? std::string("a rank may always talk to itself")
                : "/segmentation/" + std::to_string(seg) + " (between " +
                      segments_[static_cast<std::size_t>(seg)].a + " and " +
                      segments_[static_cast<std::size_t>(seg)].b + ")";
  if (q.op > kMaxOpKind) {  // forged, as the compiled table says (CommDecisions::check)
    d.verdict = Verdict::deny_op_context;
    d.rule = rule_path;
    d.explanation = "unknown operation kind " + std::to_string(q.op);
    return d;
  }
  const std::string op_name(op_kind_name(static_cast<OpKind>(q.op)));
  if (q.op == static_cast<std::uint16_t>(OpKind::p2p)) {
    if (!rule.any_tag && !ranges_contain(rule.tags, q.tag)) {
      d.verdict = Verdict::deny_tag;
      d.rule = rule_path + "/p2p_tags";
      d.explanation = rule_path + " (name '" + one_line(rule.pattern) +
                      "') allows point-to-point tags " + ranges_text(rule.tags) + " only; tag " +
                      std::to_string(q.tag) + " is not among them";
      return d;
    }
  } else if ((rule.ops & (1u << q.op)) == 0) {
    d.verdict = Verdict::deny_op;
    d.rule = rule_path + "/collectives";
    d.explanation = rule_path + " (name '" + one_line(rule.pattern) + "') allows collectives " +
                    ops_text(rule.ops) + "; not " + op_name;
    return d;
  }
  const std::uint64_t limit = effective_max_bytes(&rule);
  if (q.bytes > limit) {
    d.verdict = Verdict::deny_size;
    d.rule = rule.max_bytes && *rule.max_bytes == limit ? rule_path + "/max_message_bytes"
                                                        : "/limits/max_message_bytes";
    d.explanation = std::to_string(q.bytes) + " bytes exceed the limit of " +
                    std::to_string(limit) + " bytes (" + d.rule + ")";
    return d;
  }
  d.allowed = true;
  d.verdict = Verdict::allow;
  d.rule = rule_path;
  d.explanation = op_name + " on " + comm + " allowed by " + rule_path + " (name '" +
                  one_line(rule.pattern) + "'); ranks " + std::to_string(q.from) + " and " +
                  std::to_string(q.to) + " may talk by " + seg_text;
  return d;
}

bool Policy::members_fit(const CommRule& rule, const std::vector<int>& members,
                         std::string& why) const {
  if (rule.any_members) return true;
  for (const std::size_t g : rule.member_group_indices) {
    if (std::all_of(members.begin(), members.end(), [&](int m) { return in_group(g, m); })) {
      return true;
    }
  }
  why = rule.member_groups.empty()
            ? std::string("the rule allows no member set ('members' missing or empty)")
            : "the members must all belong to one of the groups: " + join(rule.member_groups);
  return false;
}

Decision Policy::check_members(std::string_view name, const std::vector<int>& members) const {
  Decision d;
  const int rule_index = comm_rule(name);
  std::string list;
  for (const int m : members) list += (list.empty() ? "" : ",") + std::to_string(m);
  if (rule_index < 0) {
    d.verdict = Verdict::deny_comm_unknown;
    d.rule = "default deny";
    d.explanation = "no rule under /communicators matches communicator '" + std::string(name) + "'";
    return d;
  }
  const std::string rule_path = "/communicators/" + std::to_string(rule_index);
  std::string why;
  if (!members_fit(comms_[static_cast<std::size_t>(rule_index)], members, why)) {
    d.verdict = Verdict::deny_not_member;
    d.rule = rule_path + "/members";
    d.explanation = "communicator '" + std::string(name) + "' with world ranks {" + list +
                    "} violates " + d.rule + ": " + why;
    return d;
  }
  d.allowed = true;
  d.verdict = Verdict::allow;
  d.rule = rule_path + "/members";
  d.explanation = "members {" + list + "} allowed by " + d.rule;
  return d;
}

Decision Policy::check_comm_create(std::string_view parent, const std::vector<int>& members) const {
  // The agreement: every member sends its entry to member 0, which sends the whole table back.
  const std::uint64_t table = kCommCreateEntryBytes * members.size();
  for (std::size_t i = 1; i < members.size(); ++i) {
    for (const auto& q : {MessageQuery{members[i], members[0], std::string(parent),
                                       static_cast<std::uint16_t>(OpKind::comm_create), 0,
                                       kCommCreateEntryBytes},
                          MessageQuery{members[0], members[i], std::string(parent),
                                       static_cast<std::uint16_t>(OpKind::comm_create), 0, table}}) {
      auto d = decide(q);
      if (!d.allowed) {
        d.explanation = "creating a communicator from '" + std::string(parent) +
                        "' needs rank " + std::to_string(q.from) + " -> rank " +
                        std::to_string(q.to) + " comm_create traffic: " + d.explanation;
        return d;
      }
    }
  }
  if (members.size() <= 1) {
    const int rule_index = comm_rule(parent);
    if (rule_index < 0 ||
        (comms_[static_cast<std::size_t>(rule_index)].ops &
         (1u << static_cast<unsigned>(OpKind::comm_create))) == 0) {
      return decide({members.empty() ? 0 : members[0], members.empty() ? 0 : members[0],
                     std::string(parent), static_cast<std::uint16_t>(OpKind::comm_create), 0,
                     0});
    }
  }
  Decision ok;
  ok.allowed = true;
  ok.verdict = Verdict::allow;
  ok.rule = "/communicators/" + std::to_string(comm_rule(parent));
  return ok;
}

std::shared_ptr<const CommDecisions> Policy::compile_comm(std::string_view name,
                                                         const std::vector<int>& members, int me,
                                                         int world_size) const {
  auto d = std::make_shared<CommDecisions>();
  d->name_ = std::string(name);
  d->rule_ = comm_rule(name);
  const auto n = static_cast<std::size_t>(std::max(world_size, 0));
  d->peer_ok_.assign(n, 0);
  d->member_.assign(n, 0);
  for (const int m : members) {
    if (m >= 0 && static_cast<std::size_t>(m) < n) d->member_[static_cast<std::size_t>(m)] = 1;
  }
  if (d->rule_ < 0) return d;  // everything denied: deny_comm_unknown
  const CommRule& rule = comms_[static_cast<std::size_t>(d->rule_)];
  for (const int m : members) {
    if (m >= 0 && static_cast<std::size_t>(m) < n && segment_rule(me, m, name) != -1) {
      d->peer_ok_[static_cast<std::size_t>(m)] = 1;
    }
  }
  d->ops_ = rule.ops;
  d->any_tag_ = rule.any_tag;
  d->tags_ = rule.tags;
  d->max_bytes_ = effective_max_bytes(&rule);
  return d;
}

bool CommDecisions::tag_allowed(int tag) const noexcept {
  return rule_ >= 0 && (any_tag_ || ranges_contain(tags_, tag));
}

Verdict CommDecisions::check(int peer, std::uint16_t op, bool collective_context, int tag,
                             std::uint64_t bytes) const noexcept {
  // MPI's own semantics first: they hold whatever the rules say, and in audit mode too (the
  // engine enforces these two verdicts in every mode).
  if (peer < 0 || static_cast<std::size_t>(peer) >= member_.size() ||
      member_[static_cast<std::size_t>(peer)] == 0) {
    return Verdict::deny_not_member;
  }
  // An operation kind no collective has is forged, like one that does not fit its context.
  if ((op == 0) == collective_context || op > kMaxOpKind) return Verdict::deny_op_context;
  if (rule_ < 0) return Verdict::deny_comm_unknown;
  if (peer_ok_[static_cast<std::size_t>(peer)] == 0) return Verdict::deny_segment;
  if (op == 0) {
    if (!any_tag_ && !ranges_contain(tags_, tag)) return Verdict::deny_tag;
  } else if ((ops_ & (1u << op)) == 0) {
    return Verdict::deny_op;
  }
  if (bytes > max_bytes_) return Verdict::deny_size;
  return Verdict::allow;
}

// --- summary -------------------------------------------------------------------------------

std::vector<Issue> Policy::warnings(std::optional<int> ranks) const {
  std::vector<Issue> out;
  for (const auto& g : groups_) {
    const std::string path = "/groups/" + escape_pointer(g.name);
    if (!g.ranks.all && g.ranks.ranges.empty()) out.push_back({path, "the group is empty"});
    if (ranks && g.ranks.max_rank() >= *ranks) {
      out.push_back({path, "names rank " + std::to_string(g.ranks.max_rank()) +
                               ", beyond a job of " + std::to_string(*ranks) +
                               " ranks (ignored there)"});
    }
  }
  if (segments_.empty() && mode_ == Mode::enforce) {
    out.push_back({"/segmentation", "no rule: no two ranks may exchange any traffic"});
  }
  if (comm_rule("world") < 0) {
    out.push_back({"/communicators", "no rule matches 'world': all traffic on it is denied"});
  }
  // Rule j shadows a later rule i when every name i matches, j matches too.
  const auto shadows = [](const std::string& j, const std::string& i) {
    if (j.empty() || j.back() != '*') return j == i;
    return i.starts_with(std::string_view(j).substr(0, j.size() - 1));
  };
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (shadows(comms_[j].pattern, comms_[i].pattern)) {
        out.push_back({"/communicators/" + std::to_string(i),
                       "never used: /communicators/" + std::to_string(j) + " ('" +
                           comms_[j].pattern + "') matches first"});
        break;
      }
    }
  }
  return out;
}

std::string Policy::summary(std::optional<int> ranks) const {
  std::ostringstream s;
  s << "policy version 1, digest " << to_hex(document_.digest) << "\n";
  s << "mode: " << mode_name(mode_)
    << (mode_ == Mode::audit ? " (dry run: would-be denials are only logged)" : "") << "\n";
  s << "on violation: " << action_name(action_) << "\n";
  s << "message audit: " << message_audit_name(message_audit_) << "\n";
  s << "max message bytes: "
    << (max_bytes_ ? std::to_string(*max_bytes_) : std::string("unlimited")) << "\n";
  s << "groups:\n";
  if (groups_.empty()) s << "  (none)\n";
  for (const auto& g : groups_) s << "  " << g.name << ": " << g.ranks.describe() << "\n";
  s << "segmentation (pairs that may talk):\n";
  if (segments_.empty()) s << "  (none: default deny)\n";
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const auto& seg = segments_[i];
    s << "  [" << i << "] between " << seg.a << " and " << seg.b << " on "
      << (seg.comms.empty() ? std::string("every communicator") : one_line(join(seg.comms)))
      << "\n";
  }
  s << "communicators (first matching name wins; unnamed ones are denied):\n";
  if (comms_.empty()) s << "  (none: default deny)\n";
  const int world_rule = comm_rule("world");
  const int self_rule = comm_rule("self");
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    const auto& c = comms_[i];
    // The runtime creates world and self without a member check: their rule's "members" only
    // matters for a rename to that name.
    std::string members;
    if (c.pattern == "world") {
      members = "all ranks (world always)";
    } else if (c.pattern == "self") {
      members = "the rank itself (self always)";
    } else if (c.any_members) {
      members = "any";
    } else if (!c.member_groups.empty()) {
      members = "within one of " + join(c.member_groups);
    } else {
      // Rule i of the compiled document is comms_[i].
      const bool listed = document_.json.at("communicators").at(i).contains("members");
      members = listed ? "[] (none)" : "none (no 'members')";
    }
    // A pattern that matches world or self first is their rule too, and its members do not
    // restrict them: say so, or "*" with "members": ["red"] reads as if world were red only.
    const bool for_world = c.pattern != "world" && static_cast<int>(i) == world_rule;
    const bool for_self = c.pattern != "self" && static_cast<int>(i) == self_rule;
    if (for_world && for_self) {
      members +=
          " (world and self, which this rule also governs, keep their fixed members: "
          "all ranks, the rank itself)";
    } else if (for_world) {
      members += " (world, which this rule also governs, keeps its fixed members: all ranks)";
    } else if (for_self) {
      members += " (self, which this rule also governs, keeps its fixed member: the rank itself)";
    }
    // Patterns may hold any character: escaped, a newline in one cannot forge a summary line.
    s << "  [" << i << "] " << one_line(c.pattern) << ": members " << members << "; collectives "
      << ops_text(c.ops) << "; p2p tags " << (c.any_tag ? std::string("*") : ranges_text(c.tags));
    if (c.max_bytes) s << "; max " << *c.max_bytes << " bytes";
    s << "\n";
  }
  if (ranks) {
    long long never = 0;
    std::string pairs;
    const auto rows = ever_talk_rows(*ranks);
    for (int a = 0; a < *ranks; ++a) {
      const auto& row = rows[static_cast<std::size_t>(a)];
      for (int b = a + 1; b < *ranks; ++b) {
        if ((row[static_cast<std::size_t>(b) / 64] >> (b % 64)) & 1U) continue;
        ++never;
        if (never <= 32) {
          pairs += (pairs.empty() ? "" : " ") + std::to_string(a) + "-" + std::to_string(b);
        }
      }
    }
    const long long total = static_cast<long long>(*ranks) * (*ranks - 1) / 2;
    s << "with " << *ranks << " ranks: " << (total - never) << " of " << total
      << " rank pairs are connected";
    if (never > 0) s << "; never connected: " << pairs << (never > 32 ? " ..." : "");
    s << "\n";
  }
  return s.str();
}

}  // namespace sempi::policy
