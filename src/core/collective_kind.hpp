#pragma once
// The operation kind carried in every frame's `op` field, so the receiver (and its policy) can
// tell point-to-point traffic from each collective without trusting the sender's intent.

#include <cstdint>
#include <optional>
#include <string_view>

namespace sempi::detail {

enum class OpKind : std::uint16_t {
  p2p = 0,
  barrier = 1,
  bcast = 2,
  scatter = 3,
  gather = 4,
  allgather = 5,
  reduce = 6,
  allreduce = 7,
  reduce_scatter = 8,
  alltoall = 9,
  scan = 10,
  exscan = 11,
  comm_create = 12,  // dup / split agreement
};
inline constexpr std::uint16_t kMaxOpKind = 12;

/// Lower-case name used in policies and audit records ("allreduce", "p2p", ...).
constexpr std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::p2p: return "p2p";
    case OpKind::barrier: return "barrier";
    case OpKind::bcast: return "bcast";
    case OpKind::scatter: return "scatter";
    case OpKind::gather: return "gather";
    case OpKind::allgather: return "allgather";
    case OpKind::reduce: return "reduce";
    case OpKind::allreduce: return "allreduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::alltoall: return "alltoall";
    case OpKind::scan: return "scan";
    case OpKind::exscan: return "exscan";
    case OpKind::comm_create: return "comm_create";
  }
  return "unknown";
}

inline std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (std::uint16_t k = 0; k <= kMaxOpKind; ++k) {
    if (op_kind_name(static_cast<OpKind>(k)) == name) return static_cast<OpKind>(k);
  }
  return std::nullopt;
}

}  // namespace sempi::detail
