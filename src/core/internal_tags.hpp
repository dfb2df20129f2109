#pragma once
// Tags used by the runtime itself on a communicator's collective context. Application
// point-to-point traffic lives on the other context, so these can never collide with user tags.

namespace sempi::detail::internal_tag {

inline constexpr int kCommCreate = 1;  // dup/split: gather and spread (color, key, context)

/// Set in the tags of collective schedules (coll/schedule.hpp), and in none of the above.
inline constexpr int kScheduleBit = 1 << 30;
/// A transfer of a collective schedule, which has a sequence number (not the runtime's own).
constexpr bool is_schedule_tag(int tag) { return tag >= 0 && (tag & kScheduleBit) != 0; }

/// MPI_Comm_create_group's exchange, for the user's `tag` (0..TAG_UB). Kept below the
/// collective tags (bit 30, coll/schedule.hpp), so user tags that differ by a multiple of
/// 2^30 - 2 share one internal tag: only such pairs of concurrent calls could cross.
constexpr int comm_create_group(int tag) { return 2 + tag % ((1 << 30) - 2); }

}  // namespace sempi::detail::internal_tag
