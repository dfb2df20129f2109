#pragma once
// Tags used by the runtime itself on a communicator's collective context. Application
// point-to-point traffic lives on the other context, so these can never collide with user tags.

#include <cstdint>

namespace sempi::detail::internal_tag {

inline constexpr int kCommCreate = 1;  // dup/split: gather and spread (color, key, context)

/// Set in the tags of collective schedules (coll/schedule.hpp), and in none of the above. Below
/// it, such a tag holds the low kScheduleSequenceBits of its collective's sequence number,
/// then kScheduleStepBits for the step.
inline constexpr int kScheduleBit = 1 << 30;
inline constexpr int kScheduleSequenceBits = 16;
inline constexpr int kScheduleStepBits = 14;
/// A transfer of a collective schedule, which has a sequence number (not the runtime's own).
constexpr bool is_schedule_tag(int tag) { return tag >= 0 && (tag & kScheduleBit) != 0; }
/// The low kScheduleSequenceBits of a schedule tag's sequence number.
constexpr std::uint32_t schedule_tag_sequence(int tag) {
  return (static_cast<std::uint32_t>(tag) >> kScheduleStepBits) &
         ((1u << kScheduleSequenceBits) - 1);
}
/// A schedule tag of collective number `sequence`, as far as its low bits tell.
constexpr bool is_tag_of_collective(int tag, std::uint32_t sequence) {
  return is_schedule_tag(tag) &&
         schedule_tag_sequence(tag) == (sequence & ((1u << kScheduleSequenceBits) - 1));
}

/// MPI_Comm_create_group's exchange, for the user's `tag` (0..TAG_UB). Kept below the
/// collective tags (bit 30, coll/schedule.hpp), so user tags that differ by a multiple of
/// 2^30 - 2 share one internal tag: only such pairs of concurrent calls could cross.
constexpr int comm_create_group(int tag) { return 2 + tag % ((1 << 30) - 2); }

}  // namespace sempi::detail::internal_tag
