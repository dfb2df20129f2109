// Fuzz input for the two JSON readers that take text from people and files rather than from
// peers: policy documents (sempirun --policy, sempi policy check) and audit log lines (sempi
// audit verify/report). Both must refuse bad text with sempi::Error or a null record, never
// crash or throw anything else. A policy that compiles must decide every message alike on the
// hot path (CommDecisions, which every rank uses) and the slow path (Policy::decide, which
// `sempi policy explain` and audit reasons use): a difference would make explain lie.

#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "audit/audit_reader.hpp"
#include "policy/policy.hpp"
#include "sempi/error.hpp"

namespace {

using sempi::policy::Policy;

constexpr int kWorld = 4;

void check_decisions_agree(const Policy& policy, std::string_view comm,
                           const std::vector<int>& members) {
  if (!policy.check_members(comm, members).allowed) return;
  const bool enforcing = policy.enforcing();
  constexpr int kTags[] = {0, 7, std::numeric_limits<int>::max()};
  constexpr std::uint64_t kBytes[] = {0, 65536, std::uint64_t{1} << 40};
  for (const int me : members) {
    const auto compiled = policy.compile_comm(comm, members, me, kWorld);
    for (const int peer : members) {
      if (policy.ever_talk(me, peer) != policy.ever_talk(peer, me)) __builtin_trap();
      for (const std::uint16_t op : {std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{4}}) {
        for (const int tag : kTags) {
          for (const std::uint64_t bytes : kBytes) {
            const auto fast = compiled->check(peer, op, op != 0, tag, bytes);
            const auto slow = policy.decide({peer, me, std::string(comm), op, tag, bytes});
            if ((fast == sempi::policy::Verdict::allow) != slow.allowed) __builtin_trap();
            // A rank pair the hot path lets through must be wired (dry runs wire everything).
            if (fast == sempi::policy::Verdict::allow && enforcing && !policy.ever_talk(me, peer)) {
              __builtin_trap();
            }
          }
        }
      }
    }
  }
}

}  // namespace

void fuzz_policy(std::span<const std::uint8_t> input) {
  const std::string text(input.begin(), input.end());
  try {
    const auto policy = Policy::compile(sempi::policy::PolicyDocument::parse(text, "fuzz"));
    std::vector<int> world(kWorld);
    std::iota(world.begin(), world.end(), 0);
    check_decisions_agree(policy, "world", world);
    check_decisions_agree(policy, "solver", {1, 3});
    (void)policy.summary(kWorld);
  } catch (const sempi::Error&) {
    // refused with a message: what a bad policy file gets
  }
}

void fuzz_audit_line(std::span<const std::uint8_t> input) {
  const std::string_view line(reinterpret_cast<const char*>(input.data()), input.size());
  const auto record = sempi::audit::parse_record(line);
  if (!record.is_null() && !record.is_object()) __builtin_trap();
}
