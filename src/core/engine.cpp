#include "core/engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "sempi/constants.hpp"

namespace sempi::detail {
namespace {

using transport::FrameHeader;
using transport::FrameType;
namespace flags = transport::frame_flags;

// What an unmatched RTS costs against a peer's unexpected budget: it holds no payload, but an
// endless stream of them must still hit the limit.
constexpr std::uint64_t kRendezvousEntryCost = 256;
// Frames read from one channel per progress round, so one busy peer cannot starve the others.
constexpr std::size_t kFramesPerRound = 64;
constexpr std::size_t kMaxAbortReason = 4096;

// memcpy with a null pointer is undefined even for zero bytes (zero-count receives may pass null).
void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Engine::Engine(EngineConfig config, std::vector<std::unique_ptr<transport::Channel>> channels,
               int bootstrap_fd)
    : config_(config), bootstrap_fd_(bootstrap_fd) {
  peers_.resize(static_cast<std::size_t>(config_.world_size));
  for (std::size_t r = 0; r < channels.size() && r < peers_.size(); ++r) {
    if (channels[r]) {
      peers_[r] = std::make_unique<Peer>(*this, static_cast<int>(r), std::move(channels[r]));
    }
  }
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (bootstrap_fd_ < 0) finalize_ok_ = true;  // a singleton has nobody to wait for
  background_ = std::thread([this] { background_loop(); });
}

Engine::~Engine() {
  stopping_ = true;
  {
    std::lock_guard lock(background_mu_);
    background_cv_.notify_all();
  }
  kick();
  background_.join();
}

// --- small helpers -------------------------------------------------------------------------

void Engine::kick() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void Engine::notify_waiters() { cv_.notify_all(); }

void Engine::complete(RequestState& request, ErrorClass cls, const std::string& message) {
  if (request.done.load(std::memory_order_relaxed)) return;
  request.status.error = cls;
  request.error_message = message;
  request.done.store(true, std::memory_order_release);
  notify_waiters();
}

std::shared_ptr<RequestState> Engine::new_failed_request(RequestKind kind, ErrorClass cls,
                                                         const std::string& message) {
  auto request = std::make_shared<RequestState>(kind);
  complete(*request, cls, message);
  return request;
}

void Engine::part_done(const std::shared_ptr<RequestState>& request, std::error_code ec,
                       int peer) {
  if (request->done.load(std::memory_order_relaxed)) return;
  if (ec) {
    complete(*request, ErrorClass::peer_failed,
             "send to rank " + std::to_string(peer) + " failed: " + ec.message());
    return;
  }
  if (--request->pending_parts <= 0) complete(*request);
}

bool Engine::matches(const RequestState& request, std::uint32_t context, int source,
                     int tag) const {
  return request.context == context &&
         (request.source_world == ANY_SOURCE || request.source_world == source) &&
         (request.tag == ANY_TAG || request.tag == tag);
}

std::shared_ptr<RequestState> Engine::take_posted(std::uint32_t context, int source, int tag) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (matches(**it, context, source, tag)) {
      auto request = std::move(*it);
      posted_.erase(it);
      request->matched = true;
      return request;
    }
  }
  return nullptr;
}

void Engine::finish_receive(RequestState& request, int source_world, int tag,
                            std::uint64_t bytes) {
  request.status.source = request.comm ? request.comm->comm_rank(source_world) : source_world;
  request.status.tag = tag;
  request.status.bytes = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, request.capacity));
  if (bytes > request.capacity) {
    complete(request, ErrorClass::truncate,
             "message of " + std::to_string(bytes) + " bytes from rank " +
                 std::to_string(request.status.source) + " (tag " + std::to_string(tag) +
                 ") does not fit the receive buffer of " + std::to_string(request.capacity) +
                 " bytes");
    return;
  }
  complete(request);
}

void Engine::account_unexpected(Peer& peer, std::int64_t delta) {
  peer.unexpected_bytes_ = static_cast<std::uint64_t>(
      std::max<std::int64_t>(0, static_cast<std::int64_t>(peer.unexpected_bytes_) + delta));
  if (!peer.channel_) return;
  const auto limit = peer.channel_->local_limits().max_unexpected_bytes;
  if (!peer.paused_ && peer.unexpected_bytes_ >= limit) {
    // Backpressure: stop reading this peer; TCP flow control then stalls its sender.
    peer.paused_ = true;
  } else if (peer.paused_ && peer.unexpected_bytes_ < limit / 2) {
    peer.paused_ = false;
    kick();  // the poller must watch this channel again
  }
}

void Engine::send_control(Peer& peer, FrameType type, std::uint64_t aux) {
  if (!peer.channel_ || peer.failed_) return;
  FrameHeader header;
  header.type = type;
  header.source = static_cast<std::uint32_t>(config_.world_rank);
  header.aux = aux;
  peer.channel_->enqueue(header, {}, nullptr);
  flush_peer(peer);
}

void Engine::flush_peer(Peer& peer) {
  if (!peer.channel_ || peer.failed_) return;
  if (auto ec = peer.channel_->flush(); ec) {
    fail_peer(peer, peer.channel_->failure().message());
    return;
  }
  if (peer.channel_->has_pending_writes()) kick();  // the poller must watch for writability
}

// --- failure ---------------------------------------------------------------------------------

void Engine::fail_peer(Peer& peer, const std::string& reason) {
  if (peer.failed_) return;
  peer.failed_ = true;
  peer.failure_ = reason;
  const std::string who = "rank " + std::to_string(peer.world_rank_);
  const std::string message =
      peer.said_goodbye_ ? who + " has finalized" : who + " failed: " + reason;
  if (!peer.said_goodbye_ && abort_reason_.empty()) {
    spdlog::warn("sempi[rank {}]: connection to {} lost: {}", config_.world_rank, who, reason);
    // Tell the launcher first, so that if this rank fails as a consequence, the job's exit
    // status names the rank that really failed.
    if (bootstrap_fd_ >= 0) {
      (void)launch::write_bootstrap_message(
          bootstrap_fd_, {{"type", "peer_lost"}, {"peer", peer.world_rank_}, {"reason", reason}},
          std::chrono::steady_clock::now() + std::chrono::seconds(1));
    }
  }
  auto fail = [&](const std::shared_ptr<RequestState>& request) {
    if (request) complete(*request, ErrorClass::peer_failed, message);
  };
  fail(peer.inflight_recv_);
  peer.inflight_recv_.reset();
  for (auto& [id, transfer] : peer.recv_rendezvous_) fail(transfer.request);
  for (auto& [id, transfer] : peer.send_rendezvous_) fail(transfer.request);
  for (auto& [id, request] : peer.awaiting_sync_) fail(request);
  peer.recv_rendezvous_.clear();
  peer.send_rendezvous_.clear();
  peer.awaiting_sync_.clear();
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->source_world == peer.world_rank_) {
      fail(*it);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  // Complete eager messages already received stay receivable; rendezvous ones cannot finish.
  unexpected_.remove_if(
      [&](const Unexpected& m) { return m.source == peer.world_rank_ && m.rendezvous; });
  // The channel may be on the call stack (a frame handler failed it): close it after this
  // progress round. Closing completes its queued sends with the channel's error.
  if (peer.channel_) closed_channels_.push_back(std::move(peer.channel_));
  notify_waiters();
}

void Engine::abort_job(const std::string& reason) {
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason.empty() ? "job aborted" : reason;
  aborted_ = true;
  const std::string message = "job aborted: " + abort_reason_;
  for (auto& request : posted_) complete(*request, ErrorClass::peer_failed, message);
  posted_.clear();
  for (auto& [id, request] : self_sync_) complete(*request, ErrorClass::peer_failed, message);
  self_sync_.clear();
  for (auto& peer : peers_) {
    if (peer) {
      peer->said_goodbye_ = false;
      fail_peer(*peer, message);
    }
  }
  notify_waiters();
}

std::string Engine::abort_reason() const {
  std::lock_guard lock(mu_);
  return abort_reason_;
}

// --- operations ------------------------------------------------------------------------------

std::shared_ptr<RequestState> Engine::isend(const CommState& comm, OpKind op, const void* buf,
                                            std::size_t bytes, int dest, int tag,
                                            bool synchronous) {
  const int world = comm.world_ranks[static_cast<std::size_t>(dest)];
  const bool collective = op != OpKind::p2p;
  const std::uint32_t context = collective ? comm.collective_context() : comm.context;
  auto request = std::make_shared<RequestState>(RequestKind::send);
  std::lock_guard lock(mu_);
  if (!abort_reason_.empty()) {
    complete(*request, ErrorClass::peer_failed, "job aborted: " + abort_reason_);
    return request;
  }
  const auto* data = static_cast<const std::uint8_t*>(buf);

  if (world == config_.world_rank) {  // to self: matched in memory
    if (auto posted = take_posted(context, world, tag)) {
      copy_bytes(posted->buffer, data, std::min(bytes, posted->capacity));
      finish_receive(*posted, world, tag, bytes);
      complete(*request);
      return request;
    }
    Unexpected message;
    message.context = context;
    message.source = world;
    message.tag = tag;
    message.bytes = bytes;
    message.data.assign(data, data + bytes);
    if (synchronous) {
      message.synchronous = true;
      message.sync_id = next_sync_id_++;
      self_sync_[message.sync_id] = request;
    } else {
      complete(*request);
    }
    unexpected_.push_back(std::move(message));
    ++unexpected_generation_;
    notify_waiters();
    return request;
  }

  Peer* peer = peers_[static_cast<std::size_t>(world)].get();
  if (peer == nullptr || peer->failed_) {
    complete(*request, ErrorClass::peer_failed,
             "rank " + std::to_string(world) + " is not reachable" +
                 (peer ? ": " + peer->failure_ : std::string()));
    return request;
  }
  FrameHeader header;
  header.context = context;
  header.op = static_cast<std::uint16_t>(op);
  header.source = static_cast<std::uint32_t>(config_.world_rank);
  header.tag = tag;
  if (bytes <= config_.eager_limit) {
    header.type = FrameType::eager;
    request->pending_parts = 1;
    if (synchronous) {
      header.flags = flags::kSynchronous;
      header.aux = next_sync_id_++;
      peer->awaiting_sync_[header.aux] = request;
      request->pending_parts = 2;
    }
    peer->channel_->enqueue(header, {data, bytes},
                            [this, request, world](std::error_code ec) {
                              part_done(request, ec, world);
                            });
  } else {
    // Rendezvous: announce the size; the data follows the receiver's CTS, straight from the
    // user's buffer. Completion therefore also proves the receive matched (ssend semantics).
    header.type = FrameType::rts;
    header.aux = bytes;
    const auto id = peer->channel_->enqueue(header, {}, nullptr);
    peer->send_rendezvous_[id] = SendRendezvous{request, data, bytes, context, tag, 0, header.op};
    request->pending_parts = 1;
  }
  flush_peer(*peer);
  return request;
}

void Engine::send_rendezvous_data(Peer& peer, SendRendezvous& transfer) {
  const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(
      config_.rendezvous_chunk, peer.channel_->peer_limits().max_frame_payload));
  const std::uint64_t count = (transfer.bytes + chunk - 1) / chunk;
  transfer.request->pending_parts = static_cast<int>(count);
  const int world = peer.world_rank_;
  std::uint64_t offset = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, transfer.bytes - offset));
    FrameHeader header;
    header.type = FrameType::data;
    header.context = transfer.context;
    header.source = static_cast<std::uint32_t>(config_.world_rank);
    header.tag = transfer.tag;
    header.op = transfer.op;
    header.aux = transfer.rendezvous_id;
    if (i + 1 == count) header.flags = flags::kLast;
    auto request = transfer.request;
    peer.channel_->enqueue(header, {transfer.data + offset, n},
                           [this, request, world](std::error_code ec) {
                             part_done(request, ec, world);
                           });
    offset += n;
  }
  flush_peer(peer);
}

void Engine::start_receive_rendezvous(Peer& peer, std::uint64_t id, std::uint64_t total, int tag,
                                      const std::shared_ptr<RequestState>& request) {
  request->matched = true;
  peer.recv_rendezvous_[id] = RecvRendezvous{request, total, 0, tag};
  send_control(peer, FrameType::cts, id);
}

void Engine::deliver_unexpected_to(Unexpected& message,
                                   const std::shared_ptr<RequestState>& request) {
  request->matched = true;
  Peer* peer = message.source == config_.world_rank
                   ? nullptr
                   : peers_[static_cast<std::size_t>(message.source)].get();
  if (message.rendezvous) {
    if (peer != nullptr) account_unexpected(*peer, -static_cast<std::int64_t>(kRendezvousEntryCost));
    if (peer == nullptr || peer->failed_) {
      complete(*request, ErrorClass::peer_failed,
               "rank " + std::to_string(message.source) + " failed before sending its data");
      return;
    }
    start_receive_rendezvous(*peer, message.rendezvous_id, message.bytes, message.tag, request);
    return;
  }
  copy_bytes(request->buffer, message.data.data(),
              std::min<std::size_t>(message.data.size(), request->capacity));
  if (peer != nullptr) account_unexpected(*peer, -static_cast<std::int64_t>(message.bytes));
  if (message.synchronous) {
    if (peer != nullptr) {
      send_control(*peer, FrameType::sync_ack, message.sync_id);
    } else if (auto it = self_sync_.find(message.sync_id); it != self_sync_.end()) {
      complete(*it->second);
      self_sync_.erase(it);
    }
  }
  finish_receive(*request, message.source, message.tag, message.bytes);
}

std::shared_ptr<RequestState> Engine::irecv(const std::shared_ptr<const CommState>& comm,
                                            bool collective, void* buf, std::size_t capacity,
                                            int source, int tag) {
  auto request = std::make_shared<RequestState>(RequestKind::recv);
  request->comm = comm;
  request->context = collective ? comm->collective_context() : comm->context;
  request->source_world =
      source == ANY_SOURCE ? ANY_SOURCE : comm->world_ranks[static_cast<std::size_t>(source)];
  request->tag = tag;
  request->buffer = buf;
  request->capacity = capacity;
  std::lock_guard lock(mu_);
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (matches(*request, it->context, it->source, it->tag)) {
      Unexpected message = std::move(*it);
      unexpected_.erase(it);
      deliver_unexpected_to(message, request);
      return request;
    }
  }
  if (!abort_reason_.empty()) {
    complete(*request, ErrorClass::peer_failed, "job aborted: " + abort_reason_);
    return request;
  }
  if (request->source_world != ANY_SOURCE && request->source_world != config_.world_rank) {
    const Peer* peer = peers_[static_cast<std::size_t>(request->source_world)].get();
    if (peer == nullptr || peer->failed_) {
      complete(*request, ErrorClass::peer_failed,
               "rank " + std::to_string(request->source_world) + " is not reachable" +
                   (peer ? ": " + peer->failure_ : std::string()));
      return request;
    }
  }
  posted_.push_back(request);
  return request;
}

bool Engine::cancel(RequestState& request) {
  std::lock_guard lock(mu_);
  if (request.kind != RequestKind::recv || request.matched || request.done.load()) return false;
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->get() == &request) {
      posted_.erase(it);
      request.status.cancelled = true;
      complete(request);
      return true;
    }
  }
  return false;
}

std::optional<Status> Engine::find_unexpected(const CommState& comm, bool collective, int source,
                                              int tag) {
  const std::uint32_t context = collective ? comm.collective_context() : comm.context;
  const int source_world =
      source == ANY_SOURCE ? ANY_SOURCE : comm.world_ranks[static_cast<std::size_t>(source)];
  for (const auto& m : unexpected_) {
    if (m.context == context && (source_world == ANY_SOURCE || m.source == source_world) &&
        (tag == ANY_TAG || m.tag == tag)) {
      Status status;
      status.source = comm.comm_rank(m.source);
      status.tag = m.tag;
      status.bytes = static_cast<std::size_t>(m.bytes);
      return status;
    }
  }
  if (!abort_reason_.empty()) {
    Status status;
    status.error = ErrorClass::peer_failed;
    return status;
  }
  if (source_world != ANY_SOURCE && source_world != config_.world_rank) {
    const Peer* peer = peers_[static_cast<std::size_t>(source_world)].get();
    if (peer == nullptr || peer->failed_) {
      Status status;
      status.error = ErrorClass::peer_failed;
      return status;
    }
  }
  return std::nullopt;
}

std::optional<Status> Engine::iprobe(const CommState& comm, bool collective, int source,
                                     int tag) {
  {
    std::lock_guard lock(mu_);
    if (auto status = find_unexpected(comm, collective, source, tag)) return status;
  }
  if (progress_token_.try_lock()) {
    std::lock_guard token(progress_token_, std::adopt_lock);
    progress(std::chrono::milliseconds(0));
  }
  std::lock_guard lock(mu_);
  return find_unexpected(comm, collective, source, tag);
}

Status Engine::probe(const CommState& comm, bool collective, int source, int tag) {
  for (;;) {
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      if (auto status = find_unexpected(comm, collective, source, tag)) return *status;
      generation = unexpected_generation_.load();
    }
    wait_until([&] { return unexpected_generation_.load() != generation || aborted_.load(); });
  }
}

// --- waiting and progress --------------------------------------------------------------------

template <class Done>
void Engine::wait_until(Done&& done) {
  if (done()) return;
  ++active_waiters_;
  const auto spin_until = std::chrono::steady_clock::now() + config_.spin;
  while (!done()) {
    if (progress_token_.try_lock()) {
      std::lock_guard token(progress_token_, std::adopt_lock);
      if (done()) break;
      const bool spinning = std::chrono::steady_clock::now() < spin_until;
      progress(std::chrono::milliseconds(spinning ? 0 : 10));
    } else {
      if (background_polling_.load()) kick();
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(2), [&] { return done(); });
    }
  }
  last_activity_ns_ = now_ns();
  if (--active_waiters_ > 0) notify_waiters();  // the token is free for the next waiter
}

void Engine::wait(const RequestState& request) {
  wait_until([&] { return request.done.load(std::memory_order_acquire); });
}

std::size_t Engine::wait_any(const std::vector<const RequestState*>& requests) {
  std::size_t index = requests.size();
  wait_until([&] {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i]->done.load(std::memory_order_acquire)) {
        index = i;
        return true;
      }
    }
    return requests.empty();
  });
  return index;
}

bool Engine::test(const RequestState& request) {
  if (request.done.load(std::memory_order_acquire)) return true;
  if (progress_token_.try_lock()) {
    std::lock_guard token(progress_token_, std::adopt_lock);
    progress(std::chrono::milliseconds(0));
  }
  last_activity_ns_ = now_ns();
  return request.done.load(std::memory_order_acquire);
}

void Engine::read_peer(Peer& peer) {
  if (auto ec = peer.channel_->read_available(peer, kFramesPerRound); ec) {
    std::string reason = peer.channel_ ? peer.channel_->failure().message() : ec.message();
    if (!peer.violation_.empty()) reason = "protocol violation: " + peer.violation_;
    fail_peer(peer, reason);
  }
}

void Engine::progress(std::chrono::milliseconds max_block) {
  bool immediate = false;
  {
    std::lock_guard lock(mu_);
    poll_fds_.clear();
    polled_peers_.clear();
    for (auto& peer : peers_) {
      if (!peer || !peer->channel_ || peer->failed_) continue;
      short events = 0;
      if (!peer->paused_) {
        events |= POLLIN;
        if (peer->channel_->has_buffered_input()) immediate = true;
      }
      if (peer->channel_->has_pending_writes()) {
        events |= peer->channel_->wants_read_for_write() ? POLLIN : POLLOUT;
      }
      poll_fds_.push_back({peer->channel_->native_handle(), events, 0});
      polled_peers_.push_back(peer.get());
    }
    if (bootstrap_fd_ >= 0) poll_fds_.push_back({bootstrap_fd_, POLLIN, 0});
    poll_fds_.push_back({wake_fd_.get(), POLLIN, 0});
  }
  const int timeout = immediate ? 0 : static_cast<int>(max_block.count());
  const int ready = ::poll(poll_fds_.data(), poll_fds_.size(), timeout);
  if (ready < 0) return;  // EINTR: the caller loops

  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < polled_peers_.size(); ++i) {
    Peer& peer = *polled_peers_[i];
    if (peer.failed_ || !peer.channel_) continue;
    const short revents = poll_fds_[i].revents;
    if (!peer.paused_ &&
        ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 || peer.channel_->has_buffered_input())) {
      read_peer(peer);
    }
    if (!peer.failed_ && peer.channel_ && peer.channel_->has_pending_writes()) flush_peer(peer);
  }
  std::size_t next = polled_peers_.size();
  if (bootstrap_fd_ >= 0) {
    if (poll_fds_[next].revents != 0) {
      const auto ec = bootstrap_reader_.feed(bootstrap_fd_);
      nlohmann::json message;
      std::error_code parse_error;
      while (bootstrap_reader_.next(message, parse_error)) handle_bootstrap_message(message);
      if (ec || parse_error) {
        // Without the launcher nobody can tear the job down cleanly: abort now.
        ::close(bootstrap_fd_);
        bootstrap_fd_ = -1;
        if (!finalize_ok_) abort_job("lost the connection to the launcher");
      }
    }
    ++next;
  }
  if (poll_fds_.back().revents != 0) {
    std::uint64_t value = 0;
    [[maybe_unused]] const auto n = ::read(wake_fd_.get(), &value, sizeof value);
  }
  closed_channels_.clear();  // no channel method is on the stack here
}

void Engine::handle_bootstrap_message(const nlohmann::json& message) {
  const auto type = message.value("type", std::string());
  if (type == "finalize_ok") {
    finalize_ok_ = true;
    notify_waiters();
  } else if (type == "abort") {
    abort_job(message.value("reason", std::string("aborted by the launcher")));
  }
}

void Engine::background_loop() {
  using namespace std::chrono_literals;
  constexpr std::int64_t kQuietNs = 5'000'000;
  while (!stopping_) {
    {
      std::unique_lock lock(background_mu_);
      background_cv_.wait_for(lock, 5ms, [&] { return stopping_.load(); });
    }
    if (stopping_) break;
    if (active_waiters_.load() > 0 || now_ns() - last_activity_ns_.load() < kQuietNs) continue;
    if (!progress_token_.try_lock()) continue;
    background_polling_ = true;
    progress(50ms);
    background_polling_ = false;
    progress_token_.unlock();
    if (active_waiters_.load() > 0) {
      std::lock_guard lock(mu_);
      notify_waiters();
    }
  }
}

void Engine::finalize(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard lock(mu_);
    if (bootstrap_fd_ >= 0 && abort_reason_.empty()) {
      if (launch::write_bootstrap_message(bootstrap_fd_, {{"type", "finalize"}}, deadline)) {
        abort_job("lost the connection to the launcher during finalize");
      }
    }
  }
  // Every rank must reach finalize before any channel closes: peers may still be reading what
  // we sent. Progress meanwhile flushes our queues and keeps reading theirs.
  wait_until([&] {
    return finalize_ok_.load() || aborted_.load() || std::chrono::steady_clock::now() > deadline;
  });
  {
    std::lock_guard lock(mu_);
    for (auto& peer : peers_) {
      if (peer && peer->channel_ && !peer->failed_) send_control(*peer, FrameType::goodbye, 0);
    }
  }
  auto all_flushed = [&] {
    std::lock_guard lock(mu_);
    return std::none_of(peers_.begin(), peers_.end(), [](const auto& peer) {
      return peer && peer->channel_ && !peer->failed_ && peer->channel_->has_pending_writes();
    });
  };
  while (!all_flushed() && std::chrono::steady_clock::now() < deadline) {
    std::lock_guard token(progress_token_);
    progress(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(mu_);
  for (auto& peer : peers_) {
    if (peer && peer->channel_) {
      peer->said_goodbye_ = true;  // closing now is expected, not a failure
      peer->channel_->shutdown();
      peer->channel_.reset();
      peer->failed_ = true;
    }
  }
}

void Engine::request_abort(int code, const std::string& reason) {
  std::lock_guard lock(mu_);
  if (bootstrap_fd_ < 0) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  (void)launch::write_bootstrap_message(
      bootstrap_fd_, {{"type", "abort"}, {"code", code}, {"reason", reason}}, deadline);
}

void Engine::reserve_contexts_below(std::uint32_t limit) noexcept {
  std::uint32_t current = next_context_.load();
  while (current < limit && !next_context_.compare_exchange_weak(current, limit)) {
  }
}

// --- inbound frames ------------------------------------------------------------------------

void Engine::Peer::begin_eager(const FrameHeader& header) {
  using_scratch_ = false;
  inflight_copy_offset_ = 0;
  inflight_copy_bytes_ = 0;
  if (auto request = engine_.take_posted(header.context, world_rank_, header.tag)) {
    inflight_recv_ = std::move(request);
    return;
  }
  Unexpected message;
  message.context = header.context;
  message.source = world_rank_;
  message.tag = header.tag;
  message.bytes = header.length;
  message.synchronous = (header.flags & flags::kSynchronous) != 0;
  message.sync_id = header.aux;
  message.data.resize(header.length);
  inflight_unexpected_ = std::move(message);
}

std::span<std::uint8_t> Engine::Peer::payload_buffer(const FrameHeader& header) {
  if (header.source != static_cast<std::uint32_t>(world_rank_)) {
    violation_ = "frame claims source rank " + std::to_string(header.source);
    return {};
  }
  switch (header.type) {
    case FrameType::eager: {
      if (header.length > engine_.config_.eager_limit) {
        violation_ = "eager message of " + std::to_string(header.length) +
                     " bytes exceeds the eager limit";
        return {};
      }
      begin_eager(header);
      if (inflight_recv_) {
        if (header.length <= inflight_recv_->capacity) {
          return {static_cast<std::uint8_t*>(inflight_recv_->buffer), header.length};
        }
        using_scratch_ = true;  // truncated: keep what fits, report the error at the end
        inflight_copy_bytes_ = inflight_recv_->capacity;
        scratch_.resize(header.length);
        return scratch_;
      }
      return inflight_unexpected_->data;
    }
    case FrameType::data: {
      const auto it = recv_rendezvous_.find(header.aux);
      if (it == recv_rendezvous_.end()) {
        violation_ = "DATA frame for unknown transfer " + std::to_string(header.aux);
        return {};
      }
      auto& transfer = it->second;
      if (header.length > transfer.total - transfer.received) {
        violation_ = "DATA beyond the size announced by RTS";
        return {};
      }
      inflight_data_id_ = header.aux;
      const std::size_t capacity = transfer.request->capacity;
      if (transfer.received + header.length <= capacity) {
        using_scratch_ = false;
        return {static_cast<std::uint8_t*>(transfer.request->buffer) + transfer.received,
                header.length};
      }
      using_scratch_ = true;
      inflight_copy_offset_ = static_cast<std::size_t>(transfer.received);
      inflight_copy_bytes_ =
          transfer.received < capacity ? capacity - static_cast<std::size_t>(transfer.received) : 0;
      scratch_.resize(header.length);
      return scratch_;
    }
    case FrameType::abort:
      if (header.length > kMaxAbortReason) {
        violation_ = "oversized ABORT reason";
        return {};
      }
      using_scratch_ = true;
      scratch_.resize(header.length);
      return scratch_;
    default:
      violation_ = std::string("unexpected payload on ") + frame_type_name(header.type) + " frame";
      return {};
  }
}

std::error_code Engine::Peer::on_frame(const FrameHeader& header,
                                       std::span<std::uint8_t> payload) {
  Engine& e = engine_;
  if (header.source != static_cast<std::uint32_t>(world_rank_)) {
    violation_ = "frame claims source rank " + std::to_string(header.source);
    return errc::frame_unexpected;
  }
  switch (header.type) {
    case FrameType::eager: {
      if (header.length == 0) begin_eager(header);
      if (inflight_recv_) {
        auto request = std::move(inflight_recv_);
        inflight_recv_.reset();
        if (using_scratch_) copy_bytes(request->buffer, scratch_.data(), inflight_copy_bytes_);
        if ((header.flags & flags::kSynchronous) != 0) {
          e.send_control(*this, FrameType::sync_ack, header.aux);
        }
        e.finish_receive(*request, world_rank_, header.tag, header.length);
      } else if (inflight_unexpected_) {
        Unexpected message = std::move(*inflight_unexpected_);
        inflight_unexpected_.reset();
        e.account_unexpected(*this, static_cast<std::int64_t>(header.length));
        // A receive posted while this payload was being read must get it: it is the earliest
        // matching message, and a later one must not overtake it.
        if (auto request = e.take_posted(header.context, world_rank_, header.tag)) {
          e.deliver_unexpected_to(message, request);
        } else {
          e.unexpected_.push_back(std::move(message));
          ++e.unexpected_generation_;
          e.notify_waiters();
        }
      }
      return {};
    }
    case FrameType::rts: {
      const std::uint64_t id = header.sequence;
      if (auto request = e.take_posted(header.context, world_rank_, header.tag)) {
        e.start_receive_rendezvous(*this, id, header.aux, header.tag, request);
        return {};
      }
      Unexpected message;
      message.context = header.context;
      message.source = world_rank_;
      message.tag = header.tag;
      message.rendezvous = true;
      message.bytes = header.aux;
      message.rendezvous_id = id;
      e.unexpected_.push_back(std::move(message));
      ++e.unexpected_generation_;
      e.account_unexpected(*this, static_cast<std::int64_t>(kRendezvousEntryCost));
      e.notify_waiters();
      return {};
    }
    case FrameType::cts: {
      const auto it = send_rendezvous_.find(header.aux);
      if (it == send_rendezvous_.end()) {
        violation_ = "CTS for unknown transfer " + std::to_string(header.aux);
        return errc::frame_unexpected;
      }
      SendRendezvous transfer = std::move(it->second);
      send_rendezvous_.erase(it);
      transfer.rendezvous_id = header.aux;
      e.send_rendezvous_data(*this, transfer);
      return {};
    }
    case FrameType::data: {
      if (header.length == 0) return {};
      const auto it = recv_rendezvous_.find(inflight_data_id_);
      if (it == recv_rendezvous_.end()) return errc::frame_unexpected;
      auto& transfer = it->second;
      if (using_scratch_ && inflight_copy_bytes_ > 0) {
        copy_bytes(static_cast<std::uint8_t*>(transfer.request->buffer) + inflight_copy_offset_,
                    scratch_.data(), inflight_copy_bytes_);
      }
      transfer.received += header.length;
      if (transfer.received == transfer.total) {
        auto request = std::move(transfer.request);
        const int tag = transfer.tag;
        const auto total = transfer.total;
        recv_rendezvous_.erase(it);
        e.finish_receive(*request, world_rank_, tag, total);
      }
      return {};
    }
    case FrameType::sync_ack: {
      const auto it = awaiting_sync_.find(header.aux);
      if (it == awaiting_sync_.end()) {
        violation_ = "SYNC_ACK for unknown message";
        return errc::frame_unexpected;
      }
      auto request = std::move(it->second);
      awaiting_sync_.erase(it);
      e.part_done(request, {}, world_rank_);
      return {};
    }
    case FrameType::goodbye:
      said_goodbye_ = true;
      return {};
    case FrameType::abort:
      e.abort_job("rank " + std::to_string(world_rank_) + " aborted: " +
                  std::string(payload.begin(), payload.end()));
      return {};
    case FrameType::hello:
    case FrameType::control:
      violation_ = std::string(frame_type_name(header.type)) + " frame after start-up";
      return errc::frame_unexpected;
  }
  return errc::frame_unknown_type;
}

}  // namespace sempi::detail
