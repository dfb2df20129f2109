#pragma once
// The shared state behind a sempi::Request. Created by the engine; completed exactly once, under
// the engine lock; read by the waiting thread after `done` is observed (acquire).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sempi/status.hpp"

namespace sempi::detail {

struct CommState;
struct RequestState;

enum class RequestKind { send, recv, collective };

/// Drives a request made of several engine operations: a nonblocking collective's schedule
/// (src/coll/schedule.hpp). Request::wait/test/wait_any drive it on the waiting thread, and so
/// does every other blocking wait or test of the application's threads (Engine::add_in_flight):
/// MPI's progress rule, so a collective moves on while its rank waits for something else. Never
/// the engine's background thread: a schedule's local steps run user reduction code.
class RequestDriver {
 public:
  virtual ~RequestDriver() = default;
  /// Advances without blocking (beyond waiting for another thread driving it to finish its
  /// step); true once the request is complete (`done` set, status final).
  virtual bool progress() = 0;
  /// As progress(), but does nothing (false) if another thread is driving it right now.
  virtual bool try_progress() = 0;
  /// Appends the engine requests whose completion would let progress() advance.
  virtual void blockers(std::vector<const RequestState*>& out) const = 0;
  /// The application's last copy of the Request is gone (see sempi::Request): gives up this
  /// rank's part of an unfinished request, and returns once none of its transfers still uses
  /// the application's buffers. Runs on the thread that dropped it, which may free them next;
  /// another thread's progress may hold the state itself a while longer.
  virtual void abandon() noexcept = 0;
};

struct RequestState {
  explicit RequestState(RequestKind k) : kind(k) {}

  RequestKind kind;
  std::atomic<bool> done{false};
  // Receive, still posted: nothing can match it any more (its source, or for ANY_SOURCE every
  // other member, failed or began to finalize). A wait on it fails it (Engine::wait); a test
  // and a cancel still see it pending. Set and cleared under the engine lock.
  std::atomic<bool> unmatchable{false};
  Status status;
  std::string error_message;  // set when status.error != success

  // Receive: what may match, and where the data goes. Send: the application's data, while
  // frames still read it (set only when the send does not complete at once).
  std::shared_ptr<const CommState> comm;
  std::uint32_t context = 0;
  int source_world = -1;  // ANY_SOURCE or a world rank
  int tag = -1;           // ANY_TAG or a tag
  std::uint32_t sequence = 0;  // a collective schedule's transfer: the schedule's number
  void* buffer = nullptr;
  std::size_t capacity = 0;
  bool matched = false;  // data is flowing in: too late to cancel
  // Failed because the peer withdrew from the collective (a WITHDRAWN frame): error_message
  // then starts with the peer's account of where the collective's failure began, this long.
  // (Members ordered to fill padding: every message has a RequestState.)
  bool withdrawn = false;

  // Send: parts still outstanding (frame written, synchronous acknowledgement, ...).
  int pending_parts = 0;
  // The sempi::Request copies the application holds (Request::release): the last one gone
  // while the request is unfinished abandons it (Engine::abandon, RequestDriver::abandon).
  std::atomic<std::uint32_t> user_copies{0};

  // The world rank whose channel this request waits on (-1: any or none). A waiter spins by
  // reading that channel directly (Engine::wait).
  int peer_hint = -1;
  std::uint32_t withdrawn_origin_length = 0;

  // Collective (kind == collective): advanced by the application's waits (see RequestDriver),
  // never by the engine's own thread.
  std::shared_ptr<RequestDriver> driver;
  // A send abandoned while its frames still read the application's buffer: the copy they read
  // instead (Engine::abandon).
  std::unique_ptr<std::uint8_t[]> abandoned_copy;
};

}  // namespace sempi::detail
