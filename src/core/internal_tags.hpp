#pragma once
// Tags used by the runtime itself on a communicator's collective context. Application
// point-to-point traffic lives on the other context, so these can never collide with user tags.

namespace sempi::detail::internal_tag {

inline constexpr int kCommCreate = 1;  // dup/split: gather and spread (color, key, context)

}  // namespace sempi::detail::internal_tag
