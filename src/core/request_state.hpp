#pragma once
// The shared state behind a sempi::Request. Created by the engine; completed exactly once, under
// the engine lock; read by the waiting thread after `done` is observed (acquire).

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "sempi/status.hpp"

namespace sempi::detail {

struct CommState;

enum class RequestKind { send, recv };

struct RequestState {
  explicit RequestState(RequestKind k) : kind(k) {}

  RequestKind kind;
  std::atomic<bool> done{false};
  Status status;
  std::string error_message;  // set when status.error != success

  // Receive: what may match, and where the data goes.
  std::shared_ptr<const CommState> comm;
  std::uint32_t context = 0;
  int source_world = -1;  // ANY_SOURCE or a world rank
  int tag = -1;           // ANY_TAG or a tag
  void* buffer = nullptr;
  std::size_t capacity = 0;
  bool matched = false;  // data is flowing in: too late to cancel

  // Send: parts still outstanding (frame written, synchronous acknowledgement, ...).
  int pending_parts = 0;
};

}  // namespace sempi::detail
