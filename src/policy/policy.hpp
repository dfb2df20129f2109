#pragma once
// The policy engine: a validated, compiled form of a policy document (format: config/README.md,
// schema: config/policy.schema.json) and the decisions made from it.
//
// Two levels of decision:
//  * Policy answers questions in full, with the rule that decided them (for `sempi policy
//    explain`, communicator creation and audit reasons). Slow path: strings, allocation.
//  * CommDecisions is one communicator's rules precompiled for one rank: a table indexed by
//    peer world rank, an operation bitmask, sorted tag ranges and a size limit. check() is the
//    hot path of every send and every arriving frame: no allocation, no string compare.
//
// Semantics in one paragraph: groups name rank sets; segmentation rules let every rank of one
// group exchange traffic with every rank of another (both directions) on the communicators the
// rule names; the first communicator rule whose name pattern matches a communicator's name
// decides its allowed member sets, collectives, point-to-point tags and message size. Anything
// no rule names is denied. A rank may always talk to itself as far as segmentation goes.
//
// Thread safety: Policy and CommDecisions are immutable after construction; share freely.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/policy_document.hpp"

namespace sempi::policy {

/// Largest rank number a policy may name (matches the certificate's rank field).
inline constexpr int kMaxPolicyRank = (1 << 24) - 1;

enum class Mode { enforce, audit };          ///< audit: dry run, would-be denials only logged
enum class Action { drop, abort };           ///< what the receiver does on a denial
enum class MessageAudit { off, metadata, digest };

const char* mode_name(Mode mode) noexcept;
const char* action_name(Action action) noexcept;
const char* message_audit_name(MessageAudit level) noexcept;

/// One problem found in a policy: a JSON pointer (RFC 6901) to the offending value and why.
struct Issue {
  std::string path;
  std::string message;
};

/// Ranks as sorted, merged inclusive ranges; `all` for "*".
struct RankSet {
  bool all = false;
  std::vector<std::pair<int, int>> ranges;
  [[nodiscard]] bool contains(int rank) const noexcept;
  /// "*", or "0-3,7".
  [[nodiscard]] std::string describe() const;
  /// Highest rank named, -1 if none (and for "*").
  [[nodiscard]] int max_rank() const noexcept;
};

/// The reason behind a hot-path verdict. Names are stable (they appear in audit records).
enum class Verdict : std::uint8_t {
  allow = 0,
  deny_comm_unknown,  ///< no communicator rule matches the communicator's name
  deny_not_member,    ///< the peer is not a member of the communicator
  deny_segment,       ///< segmentation does not let the two ranks talk on this communicator
  deny_op,            ///< the collective (or point-to-point) is not allowed on it
  deny_op_context,    ///< the frame's operation kind does not fit its context (forged)
  deny_tag,           ///< the point-to-point tag is outside the allowed ranges
  deny_size,          ///< the message exceeds the size limit
  deny_comm_freed,    ///< the communicator was freed on this rank (refused in every mode)
};
/// "allow", "deny_segment", ... (stable identifiers for audit records).
const char* verdict_name(Verdict verdict) noexcept;
/// A sentence for error messages, e.g. "the tag is not allowed on this communicator".
const char* verdict_text(Verdict verdict) noexcept;

/// A decision with the rule that made it, for people.
struct Decision {
  bool allowed = false;
  Verdict verdict = Verdict::deny_comm_unknown;
  /// JSON pointer of the deciding rule ("/communicators/1"), or "default deny".
  std::string rule;
  std::string explanation;
};

/// A question about one message, as asked by `sempi policy explain` (or the slow path).
struct MessageQuery {
  int from = 0;
  int to = 0;
  std::string comm = "world";
  std::uint16_t op = 0;  // OpKind; 0 = point-to-point
  int tag = 0;
  std::uint64_t bytes = 0;
};

class Policy;

/// One communicator's rules, compiled for one rank. See the file comment.
class CommDecisions {
 public:
  /// The decision for a message between this rank and `peer` (world rank) on the compiled
  /// communicator. `collective_context`: the frame travels on the collective context (which
  /// must carry a collective kind; the point-to-point context must carry kind 0).
  [[nodiscard]] Verdict check(int peer, std::uint16_t op, bool collective_context, int tag,
                              std::uint64_t bytes) const noexcept;

  /// Member and allowed by segmentation (for failing a receive that can never match).
  [[nodiscard]] bool may_talk(int peer) const noexcept {
    return rule_ >= 0 && peer >= 0 && static_cast<std::size_t>(peer) < peer_ok_.size() &&
           peer_ok_[static_cast<std::size_t>(peer)] != 0;
  }
  [[nodiscard]] bool tag_allowed(int tag) const noexcept;
  /// Some point-to-point tag is allowed (what a receive with ANY_TAG needs).
  [[nodiscard]] bool some_tag_allowed() const noexcept {
    return rule_ >= 0 && (any_tag_ || !tags_.empty());
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Index of the matching communicator rule, -1 if none.
  [[nodiscard]] int rule() const noexcept { return rule_; }
  [[nodiscard]] std::uint64_t max_bytes() const noexcept { return max_bytes_; }

 private:
  friend class Policy;
  std::string name_;
  int rule_ = -1;
  std::vector<std::uint8_t> peer_ok_;  // index: world rank; 1 = member and segmentation allows
  std::vector<std::uint8_t> member_;   // index: world rank
  std::uint32_t ops_ = 0;              // bit k: collective kind k allowed
  bool any_tag_ = false;
  std::vector<std::pair<int, int>> tags_;  // sorted, merged, inclusive
  std::uint64_t max_bytes_ = std::numeric_limits<std::uint64_t>::max();
};

class Policy {
 public:
  /// Validates and compiles. Throws sempi::Error(config) listing every issue with its path.
  static Policy compile(const PolicyDocument& document);
  /// Every problem in `json`; empty if it is a valid version-1 policy.
  static std::vector<Issue> validate(const nlohmann::json& json);

  [[nodiscard]] const PolicyDocument& document() const noexcept { return document_; }
  [[nodiscard]] Mode mode() const noexcept { return mode_; }
  [[nodiscard]] Action action() const noexcept { return action_; }
  [[nodiscard]] MessageAudit message_audit() const noexcept { return message_audit_; }
  /// audit.flush: "record" writes every rank record at once (durable, one write per record);
  /// "interval" (default) buffers them (see config/README.md, Durability).
  [[nodiscard]] bool audit_flush_each_record() const noexcept { return audit_flush_each_; }
  [[nodiscard]] bool enforcing() const noexcept { return mode_ == Mode::enforce; }

  /// True if some segmentation rule (on any communicator) lets `a` and `b` talk, or the policy
  /// is a dry run. Both ends of a pair compute the same answer: the mesh wiring relies on it.
  [[nodiscard]] bool ever_talk(int a, int b) const;
  /// The rule governing communicator `name` (first match), or -1.
  [[nodiscard]] int comm_rule(std::string_view name) const;

  /// Full decision for one message (explain).
  [[nodiscard]] Decision decide(const MessageQuery& query) const;
  /// May a communicator called `name` have exactly these members (world ranks)?
  [[nodiscard]] Decision check_members(std::string_view name, const std::vector<int>& members) const;
  /// May the members of communicator `parent` (world ranks, index = communicator rank) run the
  /// creation agreement on it (every member <-> member 0, op comm_create, the table's size)?
  [[nodiscard]] Decision check_comm_create(std::string_view parent,
                                           const std::vector<int>& members) const;

  /// Precompiles communicator `name` with `members` for `me` in a job of `world_size` ranks.
  [[nodiscard]] std::shared_ptr<const CommDecisions> compile_comm(std::string_view name,
                                                                  const std::vector<int>& members,
                                                                  int me, int world_size) const;

  /// A readable multi-line summary (sempi policy check). With `ranks`, group ranges are checked
  /// against the job size and the pairs that are never connected are listed.
  [[nodiscard]] std::string summary(std::optional<int> ranks) const;
  /// Warnings that do not make the policy invalid (ranks beyond `ranks`, empty groups, ...).
  [[nodiscard]] std::vector<Issue> warnings(std::optional<int> ranks) const;

 private:
  struct Group {
    std::string name;
    RankSet ranks;
  };
  // A group reference resolved when parsed: an index into groups_, or every rank ("*").
  // Decisions test membership by index: looking groups up by name made a policy of thousands
  // of groups and rules take hours to check at 4096 ranks.
  static constexpr std::size_t kEveryRank = SIZE_MAX;
  struct Segment {
    std::string a, b;  // group names or "*"
    std::size_t a_group = kEveryRank, b_group = kEveryRank;
    std::vector<std::string> comms;  // patterns; empty = every communicator
  };
  struct CommRule {
    std::string pattern;
    bool any_members = false;
    std::vector<std::string> member_groups;
    std::vector<std::size_t> member_group_indices;  // resolved member_groups
    std::uint32_t ops = 0;
    bool any_tag = false;
    std::vector<std::pair<int, int>> tags;
    std::optional<std::uint64_t> max_bytes;
  };

  friend struct PolicyParser;
  explicit Policy(PolicyDocument document) : document_(std::move(document)) {}
  [[nodiscard]] bool in_group(std::size_t group, int rank) const;
  // Bit r of row a: ranks a and r may ever talk (segmentation only), for ranks 0..ranks-1.
  [[nodiscard]] std::vector<std::vector<std::uint64_t>> ever_talk_rows(int ranks) const;
  /// The index of a group reference (kEveryRank for "*"); nullopt for an unknown name.
  [[nodiscard]] std::optional<std::size_t> group_index(std::string_view name) const;
  [[nodiscard]] bool members_fit(const CommRule& rule, const std::vector<int>& members,
                                 std::string& why) const;
  /// Index of the segmentation rule letting a and b talk on `comm`, or -1.
  [[nodiscard]] int segment_rule(int a, int b, std::string_view comm) const;
  [[nodiscard]] std::uint64_t effective_max_bytes(const CommRule* rule) const;

  PolicyDocument document_;
  Mode mode_ = Mode::enforce;
  Action action_ = Action::drop;
  MessageAudit message_audit_ = MessageAudit::off;
  bool audit_flush_each_ = false;
  std::vector<Group> groups_;
  std::map<std::string, std::size_t, std::less<>> group_indices_;  // name -> index in groups_
  std::vector<Segment> segments_;
  std::vector<CommRule> comms_;
  std::optional<std::uint64_t> max_bytes_;
};

/// True if communicator name `name` matches `pattern` ("*", "prefix*" or an exact name).
bool name_matches(std::string_view pattern, std::string_view name) noexcept;

}  // namespace sempi::policy
