// sempi::Message: receiving a message that a matched probe took out of matching.

#include "sempi/message.hpp"

#include "core/runtime.hpp"

namespace sempi {

Message::~Message() { release(); }

Message::Message(Message&& other) noexcept
    : comm_(std::move(other.comm_)), matched_(std::move(other.matched_)), no_proc_(other.no_proc_) {
  other.no_proc_ = false;
}

Message& Message::operator=(Message&& other) noexcept {
  if (this == &other) return *this;
  release();
  comm_ = std::move(other.comm_);
  matched_ = std::move(other.matched_);
  no_proc_ = other.no_proc_;
  other.no_proc_ = false;
  return *this;
}

void Message::release() noexcept {
  if (matched_) {
    if (detail::Runtime* runtime = detail::Runtime::current()) {
      try {
        runtime->engine().restore_matched(*matched_);
      } catch (...) {  // the engine's lock failed: the message stays lost, as before
      }
    }
  }
  matched_.reset();
  comm_.reset();
  no_proc_ = false;
}

Message Message::no_proc() {
  Message m;
  m.no_proc_ = true;
  return m;
}

Request Message::irecv_bytes(void* buf, std::size_t capacity) {
  if (is_null()) throw Error(ErrorClass::request, "mrecv: no message (null or already received)");
  if (buf == nullptr && capacity > 0) {
    throw Error(ErrorClass::buffer,
                "mrecv: null buffer for " + std::to_string(capacity) + " bytes");
  }
  if (no_proc_) {
    no_proc_ = false;
    auto state = std::make_shared<detail::RequestState>(detail::RequestKind::recv);
    state->status.source = PROC_NULL;
    state->status.tag = ANY_TAG;
    state->done = true;
    return Request(std::move(state));
  }
  const auto matched = std::move(matched_);
  const auto comm = std::move(comm_);
  return Request(detail::Runtime::get().engine().receive_matched(*matched, comm, buf, capacity));
}

Status Message::recv_bytes(void* buf, std::size_t capacity) {
  return irecv_bytes(buf, capacity).wait();
}

}  // namespace sempi
