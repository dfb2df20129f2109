#include "core/engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "common/diagnostics.hpp"
#include "common/printable.hpp"
#include "core/internal_tags.hpp"
#include "sempi/constants.hpp"

namespace sempi::detail {
namespace {

using transport::FrameHeader;
using transport::FrameType;
namespace flags = transport::frame_flags;

// Frames read from one channel per progress round, so one busy peer cannot starve the others.
constexpr std::size_t kFramesPerRound = 64;
// A waiter spinning on one peer's channel polls all channels (and the launcher) this often.
// By time, not by rounds: a round on shared rings takes ~50 ns, and poll() costs more than a
// microsecond, so polling every few rounds would keep a spinning rank mostly in poll() and
// late for the message it waits for.
constexpr std::chrono::microseconds kFullPollPeriod{20};
// Captured audit records a spinning waiter renders per round (about a microsecond each).
constexpr std::size_t kAuditRecordsPerSpin = 1;
// Context index (context / 2) of the first communicator created at run time; 0: world, 1: self.
constexpr std::uint64_t kFirstContextIndex = 2;
constexpr std::size_t kMaxAbortReason = 4096;
constexpr std::size_t kMaxDenyReason = 256;
const std::string kCutOffAsHostile = std::to_string(Engine::kRefusalsBeforeCutoff) +
                                     " of its messages were refused by policy; cut off as hostile";
// sempirun reports "rank R called abort (code 1): policy violation: ...".
constexpr int kPolicyAbortCode = 1;

std::atomic<bool> g_skip_sender_checks{false};

// A reason a peer sent (DENY, ABORT): it ends up in error messages printed on terminals, so a
// peer's control characters cannot recolour them or forge lines of their own.
std::string peer_text(std::span<const std::uint8_t> payload) {
  return printable({reinterpret_cast<const char*>(payload.data()), payload.size()});
}

using policy::Verdict;

// memcpy with a null pointer is undefined even for zero bytes (zero-count receives may pass null).
void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

// A receive of `tag` from `source_world` (a world rank or ANY_SOURCE) in `context`, into
// `capacity` bytes at `buf`; a waiter spins on that source's channel.
std::shared_ptr<RequestState> new_receive(const std::shared_ptr<const CommState>& comm,
                                          std::uint32_t context, int source_world, int tag,
                                          void* buf, std::size_t capacity) {
  auto request = std::make_shared<RequestState>(RequestKind::recv);
  request->comm = comm;
  request->context = context;
  request->source_world = source_world;
  request->tag = tag;
  request->buffer = buf;
  request->capacity = capacity;
  request->peer_hint = source_world;
  return request;
}

std::int64_t to_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t now_ns() { return to_ns(std::chrono::steady_clock::now()); }

}  // namespace

void simulate_compromised_sender(bool skip_sender_checks) noexcept {
  g_skip_sender_checks.store(skip_sender_checks);
}

Engine::Engine(EngineConfig config, std::vector<std::unique_ptr<transport::Channel>> channels,
               int bootstrap_fd, launch::BootstrapReader bootstrap_reader)
    : config_(config), bootstrap_fd_(bootstrap_fd), bootstrap_reader_(std::move(bootstrap_reader)) {
  peers_.resize(static_cast<std::size_t>(config_.world_size));
  for (std::size_t r = 0; r < channels.size() && r < peers_.size(); ++r) {
    if (channels[r]) {
      peers_[r] = std::make_unique<Peer>(*this, static_cast<int>(r), std::move(channels[r]));
    }
  }
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (bootstrap_fd_ < 0) finalize_ok_ = true;  // a singleton has nobody to wait for
  // What came with the welcome (an abort sent right after it): the socket will not report it
  // again, so it is handled now.
  (void)handle_buffered_bootstrap_messages();
  background_ = std::thread([this] { background_loop(); });
}

Engine::~Engine() {
  stop_background();
  // Destroyed on the background thread itself (a program that called exit() there, through the
  // mpi.h layer's finalize at exit): it was not joined; it must not be left joinable.
  if (background_.joinable()) background_.detach();
  // Closing a channel completes its queued sends (part_done), which reads its peer: close them
  // all while every peer is still whole.
  closed_channels_.clear();
  for (auto& peer : peers_) {
    if (peer) peer->channel_.reset();
  }
}

void Engine::stop_background() noexcept {
  stopping_ = true;
  {
    std::lock_guard lock(background_mu_);
    background_cv_.notify_all();
  }
  kick();
  // Not from the thread itself (a program calling exit() from code the engine ran there).
  if (background_.joinable() && background_.get_id() != std::this_thread::get_id()) {
    background_.join();
  }
}

void Engine::stop_at_exit() noexcept {
  stop_background();
  if (config_.audit) {
    try {
      (void)config_.audit->close();
    } catch (...) {  // exiting anyway: the launcher seals what the file holds
    }
  }
}

// --- small helpers -------------------------------------------------------------------------

void Engine::kick() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void Engine::notify_waiters() { cv_.notify_all(); }

void Engine::wake_sleeping_poller() noexcept {
  // Both sides read-modify-write poller_asleep_ (no fences: ThreadSanitizer does not model
  // them). If wait_until's exchange comes first, this reads 1 and kicks; if this comes first,
  // the waiter's exchange synchronizes with it and sees the request done.
  if (poller_asleep_.fetch_add(0, std::memory_order_acq_rel) != 0) kick();
}

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
    // A channel failed for a protocol violation fails its queued sends before fail_peer runs:
    // name the violation rather than the channel's generic error.
    const Peer* failed = peers_[static_cast<std::size_t>(peer)].get();
    const std::string why = failed != nullptr && !failed->violation_.empty()
                                ? failed->violation_reason()
                                : ec.message();
    complete(*request, ErrorClass::peer_failed,
             "send to rank " + std::to_string(peer) + " failed: " + why);
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
      // A message an mprobe took before its sender began to finalize, put back (restore_matched).
      request->unmatchable.store(false, std::memory_order_relaxed);
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

namespace {

// How much of a peer's unmatched messages this rank holds once a waiter needed it read past
// its budget (Engine::stretch_paused).
constexpr std::uint64_t stretched(std::uint64_t limit) {
  return limit > std::numeric_limits<std::uint64_t>::max() / 2
             ? std::numeric_limits<std::uint64_t>::max()
             : 2 * limit;
}

}  // namespace

void Engine::account_unexpected(Peer& peer, std::int64_t delta) {
  peer.unexpected_bytes_ = static_cast<std::uint64_t>(
      std::max<std::int64_t>(0, static_cast<std::int64_t>(peer.unexpected_bytes_) + delta));
  if (!peer.channel_) return;
  const auto limit = peer.budget();
  // Paused only as the queue grows, resumed at half the limit or below: so that a limit of 0
  // (one message at a time) still resumes once the queue is empty. A stretched peer
  // (stretch_paused) pauses at twice the limit and resumes at the limit.
  if (!peer.paused_ && delta > 0 &&
      peer.unexpected_bytes_ >= (peer.stretched_ ? stretched(limit) : limit)) {
    // Backpressure: stop reading this peer (its current read round ends after this frame);
    // TCP flow control, or the full shared ring, then stalls its sender.
    set_backpressure(peer, true, peer.stretched_);
    if (peer.stretched_ && !peer.warned_stalled_ && !finalizing_sent_) {
      peer.warned_stalled_ = true;  // again only once its queue has drained to half the limit
      diagnostics().warn(
          "sempi[rank {}]: rank {} has sent more messages that no receive matched than this rank "
          "holds ({} bytes as counted, 256 a message plus its data; twice "
          "SEMPI_MAX_UNEXPECTED_BYTES={}): this rank reads nothing more from rank {} until the "
          "program has received half of them. If it waits for a message behind them, that "
          "wait never ends: receive them first, or raise SEMPI_MAX_UNEXPECTED_BYTES for the "
          "job (sempirun -x)",
          config_.world_rank, peer.world_rank_, peer.unexpected_bytes_, limit, peer.world_rank_);
    }
  } else if (peer.paused_ && peer.stretched_ && peer.unexpected_bytes_ > limit / 2 &&
             peer.unexpected_bytes_ <= limit) {
    set_backpressure(peer, false, true);
    kick();  // the poller must watch this channel again
  } else if (peer.unexpected_bytes_ <= limit / 2) {
    peer.warned_stalled_ = false;
    if (peer.paused_) kick();
    set_backpressure(peer, false, false);
  }
}

void Engine::set_backpressure(Peer& peer, bool paused, bool stretched) {
  const bool was_candidate = peer.paused_ && !peer.stretched_;
  peer.paused_ = paused;
  peer.stretched_ = stretched;
  const bool candidate = paused && !stretched;
  if (candidate != was_candidate) {
    stretchable_peers_.fetch_add(candidate ? 1 : -1, std::memory_order_relaxed);
  }
}

void Engine::stretch_paused() {
  std::lock_guard lock(mu_);
  for (auto& peer : peers_) {
    if (!peer || peer->failed_ || !peer->channel_ || !peer->paused_ || peer->stretched_) continue;
    const auto limit = peer->budget();
    const bool room = peer->unexpected_bytes_ < stretched(limit);
    set_backpressure(*peer, !room, true);
    if (room) kick();  // a poller asleep must watch this channel again
  }
}

void Engine::release_unexpected(Peer& peer, const Unexpected& message) {
  account_unexpected(peer, -message.budget_cost());
  if (!message.rendezvous) owe_credit(peer, transport::eager_credit_cost(message.bytes));
}

bool Engine::take_eager_credit(Peer& peer, std::uint64_t bytes) {
  const std::uint64_t cost = transport::eager_credit_cost(bytes);
  const std::uint64_t credit = peer.channel_->peer_limits().max_unexpected_bytes / 2;
  // Empty messages cannot go by rendezvous (an RTS announces at least one byte): they go
  // eagerly and may overdraw, into the half of the budget kept for entries.
  if (bytes > 0 && cost > credit - std::min(credit, peer.credit_lent_)) return false;
  peer.credit_lent_ += cost;
  return true;
}

void Engine::owe_credit(Peer& peer, std::uint64_t cost) {
  peer.credit_owed_ += cost;
  // In batches: one small frame per eighth of the budget, not one per message. Never after our
  // GOODBYE (the peer then accepts nothing but DENY and ABORT): it sends no more after its own.
  if (!peer.channel_ || goodbye_sent_ || peer.credit_owed_ < peer.budget() / 8) {
    return;
  }
  send_control(peer, FrameType::credit, peer.credit_owed_);
  peer.credit_owed_ = 0;
}

void Engine::send_control(Peer& peer, FrameType type, std::uint64_t aux) {
  queue_control(peer, type, aux);
  flush_peer(peer);
}

void Engine::queue_control(Peer& peer, FrameType type, std::uint64_t aux) {
  if (!peer.channel_ || peer.failed_) return;
  FrameHeader header;
  header.type = type;
  header.source = static_cast<std::uint32_t>(config_.world_rank);
  header.aux = aux;
  peer.channel_->enqueue(header, {}, nullptr);
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
  set_backpressure(peer, false, false);  // nothing reads a failed peer: no waiter need look
  ++failed_peers_;
  peer.failure_ = reason;
  const std::string who = "rank " + std::to_string(peer.world_rank_);
  const std::string message =
      peer.said_goodbye_ ? who + " has finalized" : who + " failed: " + reason;
  if (!peer.said_goodbye_ && abort_reason_.empty()) {
    if (!std::exchange(reported_lost_peer_, true)) {
      diagnostics().warn(
          "sempi[rank {}]: connection to {} lost: {} (later losses are in the "
          "audit log only)",
          config_.world_rank, who, reason);
    }
    if (audit::AuditLog* log = audit()) log->event("peer.failure", false, reason, {{"peer", peer.world_rank_}});
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
    RequestState& request = **it;
    if (request.source_world == peer.world_rank_ ||
        (request.source_world == ANY_SOURCE && request.comm &&
         every_other_member_gone(*request.comm, false))) {
      fail(*it);
      it = posted_.erase(it);
    } else if (give_up_if_unmatchable(request)) {  // the others left began to finalize
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  // Complete eager messages already received stay receivable; rendezvous ones cannot finish,
  // and each is a message.drop, or its sender's message.send would have no counterpart.
  // (A withdrawn RTS stays too: a receive that matches it fails with the withdrawal's error.)
  unexpected_.remove_if([&](const Unexpected& m) {
    if (m.source != peer.world_rank_ || !m.rendezvous || m.withdrawn != ErrorClass::success) {
      return false;
    }
    audit_dropped(m, peer.said_goodbye_       ? kDroppedSenderFinalized
                     : !abort_reason_.empty() ? kDroppedJobAborted
                                              : kDroppedSenderFailed);
    return true;
  });
  // The channel may be on the call stack (a frame handler failed it): close it after this
  // progress round. Closing completes its queued sends with the channel's error.
  if (peer.channel_) closed_channels_.push_back(std::move(peer.channel_));
  // A probe waiting for this peer's messages looks again only when the queue changes: a
  // failed peer changes what it answers (peer_failed instead of waiting forever).
  ++unexpected_generation_;
  notify_waiters();
}

void Engine::on_peer_finalizing(Peer& peer) {
  peer.finalizing_ = true;
  ++finalizing_peers_;
  // Everything it sent before has been read (it precedes the frame): what nothing matched so
  // far, nothing will. (Rendezvous transfers under way go on: it still sends their DATA.)
  for (auto it = posted_.begin(); it != posted_.end();) {
    it = give_up_if_unmatchable(**it) ? posted_.erase(it) : std::next(it);
  }
  ++unexpected_generation_;  // a blocking probe for its messages looks again
  notify_waiters();
}

bool Engine::give_up_if_unmatchable(RequestState& request) {
  if (!nothing_can_match(request)) return false;
  if ((request.context & 1u) != 0) {  // a collective's part: its schedule fails now
    complete(request, ErrorClass::peer_failed, unmatchable_reason(request));
    return true;
  }
  // A point-to-point receive stays pending for a test or a cancel, as MPI allows a receive
  // nothing will match; a wait fails it (Engine::wait).
  request.unmatchable.store(true, std::memory_order_relaxed);
  return false;
}

bool Engine::tell_sender_unreceived(Unexpected& message) {
  if (message.source == config_.world_rank || message.withdrawn != ErrorClass::success ||
      (!message.rendezvous && !message.synchronous)) {
    return false;
  }
  Peer* peer = peers_[static_cast<std::size_t>(message.source)].get();
  if (peer == nullptr || peer->failed_ || !peer->channel_) return false;
  FrameHeader header;
  header.type = FrameType::deny;
  header.source = static_cast<std::uint32_t>(config_.world_rank);
  header.flags = flags::kUnreceived;
  if (message.rendezvous) {
    header.aux = message.rendezvous_id;
  } else {
    header.flags |= flags::kSynchronous;
    header.aux = message.sync_id;
    message.synchronous = false;  // answered: its data stays queued, audited at the end
  }
  // Written by the next progress round, after it read the peer (see queue_control).
  peer->channel_->enqueue(header, {}, nullptr);
  if (!message.rendezvous) return false;
  audit_dropped(message, message.undecided ? kDroppedCommNeverCreated : kDroppedNeverReceived);
  release_unexpected(*peer, message);
  return true;
}

void Engine::abort_job(const std::string& reason) {
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason.empty() ? "job aborted" : reason;
  aborted_ = true;
  if (audit::AuditLog* log = audit()) log->event("job.abort", false, abort_reason_);
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
                                            std::size_t bytes, int dest, int tag, bool synchronous,
                                            std::uint32_t sequence) {
  const int world = comm.world_ranks[static_cast<std::size_t>(dest)];
  const bool collective = op != OpKind::p2p;
  const std::uint32_t context = collective ? comm.collective_context() : comm.context;
  auto request = std::make_shared<RequestState>(RequestKind::send);
  request->peer_hint = world;
  request->sequence = sequence;
  std::lock_guard lock(mu_);
  if (!abort_reason_.empty()) {
    complete(*request, ErrorClass::peer_failed, "job aborted: " + abort_reason_);
    return request;
  }
  if (finalizing_sent_) {  // another thread's send, racing this rank's finalize
    complete(*request, ErrorClass::other, "this rank has begun to finalize: it sends no more");
    return request;
  }
  // The receiver takes no part in this collective: nothing would ever receive the message.
  if (collective && failed_by_withdrawal(*request, context, world, tag, sequence)) return request;
  const auto* data = static_cast<const std::uint8_t*>(buf);
  const auto op_code = static_cast<std::uint16_t>(op);

  // Sender-side policy: an early, clear error. The receiver checks again (authoritative).
  if (policy() != nullptr) {
    const CommEntry& entry = entry_for(comm);
    const Verdict verdict = entry.decisions->check(world, op_code, collective, tag, bytes);
    if (verdict != Verdict::allow && !g_skip_sender_checks.load(std::memory_order_relaxed)) {
      if (on_denial(verdict, &entry, world, context, op_code, tag, bytes, 0, "send") ==
          Admit::deny) {
        const std::string message =
            "policy denies " + std::string(op_kind_name(op)) + " to rank " +
            std::to_string(dest) + " on communicator '" + entry.name + "' (tag " +
            std::to_string(tag) + ", " + std::to_string(bytes) +
            " bytes): " + policy::verdict_text(verdict);
        complete(*request, ErrorClass::policy, message);
        if (collective) {
          // This rank's part of the collective ends here: fail its receives pending on the
          // collective context rather than leave them blocked. Members whose own checks pass
          // may still wait for the message refused here (an operation or communicator denial
          // is the same on every member, but a size or segmentation denial need not be): the
          // failed schedule withdraws it (Engine::withdraw), which fails their receives.
          // Only this collective's: another one in flight on the communicator goes on.
          for (auto it = posted_.begin(); it != posted_.end();) {
            if ((*it)->context == context && (*it)->sequence == sequence) {
              complete(**it, ErrorClass::policy, message);
              it = posted_.erase(it);
            } else {
              ++it;
            }
          }
          wake_sleeping_poller();  // a thread waiting for one may be asleep in poll()
        }
        return request;
      }
    }
  }

  if (world == config_.world_rank) {  // to self: matched in memory
    if (audit() != nullptr && policy()->message_audit() != policy::MessageAudit::off) {
      const std::uint64_t id = next_self_msg_++;
      audit_message("message.send", world, context, op_code, tag, bytes, id, {data, bytes});
      audit_message("message.receive", world, context, op_code, tag, bytes, id, {data, bytes});
    }
    if (auto posted = take_posted(context, world, tag)) {
      copy_bytes(posted->buffer, data, std::min(bytes, posted->capacity));
      finish_receive(*posted, world, tag, bytes);
      wake_sleeping_poller();  // the receiving thread may be the one asleep in poll()
      complete(*request);
      return request;
    }
    Unexpected message;
    message.context = context;
    message.source = world;
    message.tag = tag;
    message.bytes = bytes;
    message.data = payloads_->take(bytes);
    copy_bytes(message.data.get(), data, bytes);
    if (synchronous) {
      message.synchronous = true;
      message.sync_id = next_sync_id_++;
      self_sync_[message.sync_id] = request;
    } else {
      complete(*request);
    }
    queue_unexpected(std::move(message));
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
  std::uint64_t id = 0;  // the frame's channel sequence: the message id in the audit log
  if (bytes <= config_.eager_limit && take_eager_credit(*peer, bytes)) {
    header.type = FrameType::eager;
    // Fast path: a small frame that TLS takes at once (or the channel copies) completes the
    // send here, with no queued completion to allocate.
    const std::optional<std::uint64_t> sent =
        synchronous ? std::nullopt : peer->channel_->send_now(header, {data, bytes});
    if (sent) {
      id = *sent;
      complete(*request);
    } else {
      request->buffer = const_cast<std::uint8_t*>(data);  // for abandon(): the frame reads it
      request->capacity = bytes;
      request->pending_parts = 1;
      if (synchronous) {
        header.flags = flags::kSynchronous;
        header.aux = next_sync_id_++;
        peer->awaiting_sync_[header.aux] = request;
        request->pending_parts = 2;
      }
      id = peer->channel_->enqueue(
          header, {data, bytes},
          [this, request, world](std::error_code ec) { part_done(request, ec, world); },
          request.get());
    }
  } else {
    // Rendezvous (large, or no eager credit left): announce the size; the data follows the
    // receiver's CTS, straight from the user's buffer. Completion therefore also proves the
    // receive matched (ssend semantics).
    header.type = FrameType::rts;
    header.aux = bytes;
    id = peer->channel_->enqueue(header, {}, nullptr);
    peer->send_rendezvous_[id] =
        SendRendezvous{request, data, bytes, context, tag, 0, header.op, sequence};
    request->buffer = const_cast<std::uint8_t*>(data);  // for abandon(): the data frames read it
    request->capacity = bytes;
    request->pending_parts = 1;
  }
  flush_peer(*peer);
  // Audited after the flush, while the frame travels: a capture (tens of ns, mostly the clock)
  // before the flush delayed every message by that much.
  audit_message("message.send", world, context, op_code, tag, bytes, id, {data, bytes});
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
    peer.channel_->enqueue(
        header, {transfer.data + offset, n},
        [this, request, world](std::error_code ec) { part_done(request, ec, world); },
        request.get());
    offset += n;
  }
  flush_peer(peer);
}

void Engine::start_receive_rendezvous(Peer& peer, std::uint64_t id, std::uint64_t total, int tag,
                                      const std::shared_ptr<RequestState>& request,
                                      std::uint32_t context, std::uint16_t op) {
  request->matched = true;
  peer.recv_rendezvous_[id] = RecvRendezvous{request, total, 0, tag, context, op};
  send_control(peer, FrameType::cts, id);
}

void Engine::deliver_unexpected_to(Unexpected& message,
                                   const std::shared_ptr<RequestState>& request) {
  request->matched = true;
  Peer* peer = message.source == config_.world_rank
                   ? nullptr
                   : peers_[static_cast<std::size_t>(message.source)].get();
  if (message.rendezvous) {
    if (peer != nullptr) release_unexpected(*peer, message);
    if (message.withdrawn != ErrorClass::success) {  // its sender cancelled it (on_withdrawn)
      fail_withdrawn(*request, message.source, message.withdrawn, *message.withdrawn_reason);
      return;
    }
    if (peer == nullptr || peer->failed_) {
      complete(*request, ErrorClass::peer_failed,
               "rank " + std::to_string(message.source) + " failed before sending its data");
      return;
    }
    start_receive_rendezvous(*peer, message.rendezvous_id, message.bytes, message.tag, request,
                             message.context, message.op);
    return;
  }
  copy_bytes(request->buffer, message.data.get(),
              std::min<std::size_t>(message.bytes, request->capacity));
  if (peer != nullptr) release_unexpected(*peer, message);
  if (message.synchronous) {
    if (peer != nullptr) {
      send_control(*peer, FrameType::sync_ack, message.sync_id);
    } else if (auto it = self_sync_.find(message.sync_id); it != self_sync_.end()) {
      complete(*it->second);
      self_sync_.erase(it);
      wake_sleeping_poller();  // the sending thread may be the one asleep in poll()
    }
  }
  finish_receive(*request, message.source, message.tag, message.bytes);
}

std::shared_ptr<RequestState> Engine::irecv(const std::shared_ptr<const CommState>& comm,
                                            bool collective, void* buf, std::size_t capacity,
                                            int source, int tag, std::uint32_t sequence) {
  auto request = new_receive(comm, collective ? comm->collective_context() : comm->context,
                             comm->world_source(source), tag, buf, capacity);
  request->sequence = sequence;
  std::lock_guard lock(mu_);
  // Audit mode: a receive enforcement would refuse is recorded, whatever is queued for it.
  if (!collective) audit_dry_run_receive(*comm, source, tag);
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    // Undecided messages wait for their communicator here: none can match (a backstop).
    if (!it->undecided && matches(*request, it->context, it->source, it->tag)) {
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
  if (collective &&
      failed_by_withdrawal(*request, request->context, request->source_world, tag, sequence)) {
    return request;
  }
  if (auto refusal = refused_receive(*comm, collective, source, tag)) {
    complete(*request, ErrorClass::policy, *refusal);
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
  } else if (request->source_world == ANY_SOURCE && every_other_member_gone(*comm, false)) {
    complete(*request, ErrorClass::peer_failed, unmatchable_reason(*request));
    return request;
  }
  if (give_up_if_unmatchable(*request)) return request;  // its source began to finalize
  posted_.push_back(request);
  return request;
}

bool Engine::cancel(RequestState& request) {
  std::lock_guard lock(mu_);
  return cancel_locked(request);
}

bool Engine::cancel_locked(RequestState& request) {
  if (request.kind != RequestKind::recv || request.matched || request.done.load()) return false;
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->get() == &request) {
      posted_.erase(it);
      request.status.cancelled = true;
      complete(request);
      wake_sleeping_poller();  // its waiter may be another thread, asleep in poll()
      return true;
    }
  }
  return false;
}

void Engine::abandon(RequestState& request) noexcept {
  {
    std::lock_guard lock(mu_);
    if (request.done.load(std::memory_order_relaxed)) return;
    if (request.kind == RequestKind::send) {
      // Frames not yet handed to TLS read the buffer, a rendezvous send's DATA frames all of
      // it once the CTS comes (which may be never): they read a copy instead. Nothing to do
      // for a send to this rank (the data was copied) or one whose frames were all taken.
      const auto* data = static_cast<const std::uint8_t*>(request.buffer);
      Peer* peer = request.peer_hint >= 0 && request.peer_hint != config_.world_rank
                       ? peers_[static_cast<std::size_t>(request.peer_hint)].get()
                       : nullptr;
      // A failed peer's channel is closed (or null until the closed one goes): it only fails
      // its queued frames, never reads them again.
      if (data == nullptr || peer == nullptr || peer->failed_ || !peer->channel_ ||
          request.abandoned_copy) {
        return;
      }
      try {
        auto copy = std::make_unique_for_overwrite<std::uint8_t[]>(request.capacity);
        copy_bytes(copy.get(), data, request.capacity);
        for (auto& [id, transfer] : peer->send_rendezvous_) {
          if (transfer.request.get() == &request) transfer.data = copy.get();
        }
        peer->channel_->move_payloads(&request, {data, request.capacity}, copy.get());
        request.buffer = copy.get();
        request.abandoned_copy = std::move(copy);
        return;
      } catch (...) {
        // No memory for the copy: wait for the send to finish with the buffer instead.
      }
    } else if (cancel_locked(request)) {
      return;
    }
  }
  // A receive whose data is arriving: it lands, or the peer fails.
  wait(request);
}

std::list<Engine::Unexpected>::iterator Engine::first_unexpected(std::uint32_t context,
                                                                 int source_world, int tag) {
  return std::find_if(unexpected_.begin(), unexpected_.end(), [&](const Unexpected& m) {
    return !m.undecided && m.context == context &&
           (source_world == ANY_SOURCE || m.source == source_world) &&
           (tag == ANY_TAG || m.tag == tag);
  });
}

std::optional<Engine::NeverMatched> Engine::never_matched(const CommState& comm, bool collective,
                                                          int source, int tag) {
  // No rank may send it (no rule for the communicator, or segmentation), or no tag it accepts
  // is allowed: the receiver would refuse every message it could match.
  const CommEntry& entry = entry_for(comm);
  const policy::CommDecisions& rules = *entry.decisions;
  const int source_world = comm.world_source(source);
  const bool no_sender =
      source_world == ANY_SOURCE ? rules.rule() < 0 : !rules.may_talk(source_world);
  const bool no_tag =
      !collective && (tag == ANY_TAG ? !rules.some_tag_allowed() : !rules.tag_allowed(tag));
  if (!no_sender && !no_tag) return std::nullopt;
  const std::string sender =
      source_world == ANY_SOURCE ? "any rank" : "rank " + std::to_string(source);
  const std::string what = collective       ? std::string("collective traffic")
                           : tag == ANY_TAG ? std::string("point-to-point traffic")
                                            : "tag " + std::to_string(tag);
  return NeverMatched{rules.rule() < 0 ? Verdict::deny_comm_unknown
                      : no_sender      ? Verdict::deny_segment
                                       : Verdict::deny_tag,
                      &entry, source_world,
                      "policy never lets " + sender + " send " + what +
                          " to this rank on communicator '" + entry.name + "'"};
}

std::optional<std::string> Engine::refused_receive(const CommState& comm, bool collective,
                                                   int source, int tag) {
  if (policy() == nullptr || !policy()->enforcing()) return std::nullopt;
  auto never = never_matched(comm, collective, source, tag);
  if (!never) return std::nullopt;
  // A collective's refusal is audited where its peer's send is refused (the same rules).
  if (!collective) {
    audit_denial(never->verdict, never->entry, never->source_world, comm.context, 0, tag, 0, 0,
                 "request", false);
  }
  return std::move(never->message);
}

void Engine::audit_dry_run_receive(const CommState& comm, int source, int tag) {
  if (policy() == nullptr || policy()->enforcing() || audit() == nullptr) return;
  if (const auto never = never_matched(comm, false, source, tag)) {
    audit_dry_run_denial(never->verdict, never->entry, never->source_world, comm.context, 0, tag, 0,
                         0, "request");
  }
}

bool Engine::every_other_member_gone(const CommState& comm, bool finalizing_counts) const {
  if (failed_peers_ + (finalizing_counts ? finalizing_peers_ : 0) == 0) return false;
  bool others = false;
  for (const int member : comm.world_ranks) {
    if (member == config_.world_rank) continue;
    others = true;
    const Peer* peer = peers_[static_cast<std::size_t>(member)].get();
    if (peer != nullptr && !peer->failed_ && !(finalizing_counts && peer->finalizing_)) {
      return false;
    }
  }
  return others;
}

bool Engine::source_gone(const CommState* comm, int source_world, bool finalizing_counts) const {
  if (source_world == ANY_SOURCE) {
    return comm != nullptr && every_other_member_gone(*comm, finalizing_counts);
  }
  if (source_world == config_.world_rank) return false;
  // A peer never connected is one the policy keeps apart: it has not failed, and nothing
  // will come from it (a receive or blocking probe was refused before it got here).
  const Peer* peer = peers_[static_cast<std::size_t>(source_world)].get();
  return peer != nullptr && (peer->failed_ || (finalizing_counts && peer->finalizing_));
}

bool Engine::nothing_can_match(const RequestState& request) const {
  return source_gone(request.comm.get(), request.source_world, true);
}

std::string Engine::unmatchable_reason(const RequestState& request) const {
  if (request.source_world == ANY_SOURCE) {
    return "every other member of communicator '" +
           (request.comm ? request.comm->name() : std::string()) + "' has failed or finalized";
  }
  return "rank " + std::to_string(request.source_world) +
         " has begun to finalize: no message from it can match this receive";
}

std::optional<Status> Engine::unreachable_source(const CommState& comm, int source_world,
                                                 bool blocking) const {
  if (abort_reason_.empty() && !source_gone(&comm, source_world, blocking)) return std::nullopt;
  Status failed;
  failed.error = ErrorClass::peer_failed;
  return failed;
}

Status Engine::status_of(const CommState& comm, const Unexpected& message) {
  Status status;
  status.source = comm.comm_rank(message.source);
  status.tag = message.tag;
  status.bytes = static_cast<std::size_t>(message.bytes);
  return status;
}

std::optional<Status> Engine::find_unexpected(const CommState& comm, bool collective, int source,
                                              int tag, bool blocking) {
  const std::uint32_t context = collective ? comm.collective_context() : comm.context;
  const int source_world = comm.world_source(source);
  const auto it = first_unexpected(context, source_world, tag);
  if (it != unexpected_.end()) return status_of(comm, *it);
  if (blocking) throw_if_never_satisfied(comm, collective, source, tag);
  return unreachable_source(comm, source_world, blocking);
}

void Engine::throw_if_never_satisfied(const CommState& comm, bool collective, int source, int tag) {
  if (!abort_reason_.empty()) return;  // unreachable_source says why, as for a receive
  if (auto refusal = refused_receive(comm, collective, source, tag)) {
    throw Error(ErrorClass::policy, *refusal);
  }
}

template <class Find>
auto Engine::find_after_progress(Find&& find) -> decltype(find()) {
  {
    std::lock_guard lock(mu_);
    if (auto found = find()) return found;
  }
  stretch_while_waiting();  // a program polling with a nonblocking probe waits too
  if (progress_token_.try_lock()) {
    std::lock_guard token(progress_token_, std::adopt_lock);
    progress(std::chrono::milliseconds(0));
  }
  std::lock_guard lock(mu_);
  return find();
}

template <class Find>
auto Engine::wait_for_match(Find&& find) {
  for (;;) {
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      if (auto found = find()) return std::move(*found);
      generation = unexpected_generation_.load();
    }
    wait_until([&] { return unexpected_generation_.load() != generation || aborted_.load(); });
  }
}

std::optional<Status> Engine::iprobe(const CommState& comm, bool collective, int source,
                                     int tag) {
  return find_after_progress([&] { return find_unexpected(comm, collective, source, tag, false); });
}

Status Engine::probe(const CommState& comm, bool collective, int source, int tag) {
  if (!collective) {
    std::lock_guard lock(mu_);
    audit_dry_run_receive(comm, source, tag);  // once a call, not at every wake-up
  }
  return wait_for_match([&] { return find_unexpected(comm, collective, source, tag, true); });
}

// --- matched probe ---------------------------------------------------------------------------

// An unexpected message out of the queue. Its bytes still count against the sender's
// unexpected budget until it is received (deliver_unexpected_to settles that).
struct MatchedMessage {
  Engine::Unexpected message;
  bool received = false;  // guarded by the engine's mu_
  std::uint64_t generation = 0;  // of its communicator's rules when taken (CommEntry)
};

std::optional<Engine::Probed> Engine::take_unexpected(const CommState& comm, int source, int tag,
                                                      bool blocking) {
  const int source_world = comm.world_source(source);
  const auto it = first_unexpected(comm.context, source_world, tag);
  if (it == unexpected_.end()) {
    if (blocking) throw_if_never_satisfied(comm, false, source, tag);
    if (auto failed = unreachable_source(comm, source_world, blocking)) {
      return Probed{*failed, nullptr};
    }
    return std::nullopt;
  }
  Probed probed;
  probed.status = status_of(comm, *it);
  const std::uint64_t generation = rules_generation(it->context);
  probed.message =
      std::make_shared<MatchedMessage>(MatchedMessage{std::move(*it), false, generation});
  unexpected_.erase(it);
  return probed;
}

std::optional<Engine::Probed> Engine::improbe(const CommState& comm, int source, int tag) {
  return find_after_progress([&] { return take_unexpected(comm, source, tag, false); });
}

Engine::Probed Engine::mprobe(const CommState& comm, int source, int tag) {
  {
    std::lock_guard lock(mu_);
    audit_dry_run_receive(comm, source, tag);  // once a call, not at every wake-up
  }
  return wait_for_match([&] { return take_unexpected(comm, source, tag, true); });
}

void Engine::queue_unexpected(Unexpected&& message) {
  if (!discarded_.empty() && message.source != config_.world_rank &&
      discarded(message.context, message.tag)) {
    audit_dropped(message);
    release_unexpected(*peers_[static_cast<std::size_t>(message.source)], message);
    return;
  }
  if (finalizing_sent_ && tell_sender_unreceived(message)) return;
  if (message.arrival == 0) message.arrival = ++arrivals_;  // new; a restored one keeps its own
  // In arrival order, so that a later message of the same sender never overtakes it. Searched
  // from the back, where a new message goes at once.
  auto at = unexpected_.end();
  while (at != unexpected_.begin() && std::prev(at)->arrival > message.arrival) --at;
  unexpected_.insert(at, std::move(message));
  ++unexpected_generation_;
  notify_waiters();
}

void Engine::offer_unexpected(Unexpected&& message) {
  // Undecided messages never match a receive (see Unexpected::undecided).
  if (!message.undecided) {
    if (auto request = take_posted(message.context, message.source, message.tag)) {
      deliver_unexpected_to(message, request);
      return;
    }
  }
  queue_unexpected(std::move(message));
}

void Engine::restore_matched(MatchedMessage& matched) {
  std::lock_guard lock(mu_);
  if (matched.received) return;
  matched.received = true;
  // Renamed while it was out of the queue: judged under the new name, as the queued messages
  // were (rename_comm), before anything can match it.
  if (renamed_since(matched.message.context, matched.generation)) {
    if (const auto verdict = refused_after_rename(matched.message)) {
      matched.message.refusal = *verdict;
      answer_refused(matched.message, false);
      return;
    }
  }
  // A receive posted while the message was taken found nothing: it gets it now. Its waiter may
  // be asleep in poll() (this thread is outside progress): wake it.
  offer_unexpected(std::move(matched.message));
  wake_sleeping_poller();
}

std::shared_ptr<RequestState> Engine::receive_matched(
    MatchedMessage& matched, const std::shared_ptr<const CommState>& comm, void* buf,
    std::size_t capacity) {
  auto request = new_receive(comm, matched.message.context, matched.message.source,
                             matched.message.tag, buf, capacity);
  std::lock_guard lock(mu_);
  if (matched.received) {
    complete(*request, ErrorClass::request, "the matched message was already received");
    return request;
  }
  matched.received = true;
  // Also when the peer failed meanwhile: an eager message is complete and stays receivable;
  // a rendezvous one fails here (its data can no longer come).
  deliver_unexpected_to(matched.message, request);
  return request;
}

// --- waiting and progress --------------------------------------------------------------------

template <class Done>
void Engine::wait_until(Done&& done, int peer_hint, bool stretch) {
  if (done()) return;
  ++active_waiters_;
  auto last_clock = std::chrono::steady_clock::now();  // the latest reading, for last_activity_ns_
  auto spin_until = last_clock + config_.spin;
  std::uint64_t traffic_seen = traffic_.load(std::memory_order_relaxed);
  while (!done()) {
    // Whether or not this thread gets to drive progress: another may hold the token.
    if (stretch) stretch_while_waiting();
    if (progress_token_.try_lock()) {
      std::lock_guard token(progress_token_, std::adopt_lock);
      if (done()) break;
      const auto now = std::chrono::steady_clock::now();
      last_clock = now;
      // The spin budget counts from the last data moved, not from the start of the wait: while
      // a long message streams in or out, its next record is microseconds away, and sleeping
      // in poll() between records made 1 MiB allreduces ~10 % slower.
      if (const auto traffic = traffic_.load(std::memory_order_relaxed); traffic != traffic_seen) {
        traffic_seen = traffic;
        spin_until = now + config_.spin;
      }
      const bool spinning = now < spin_until;
      const bool full_poll_due = now >= next_full_poll_;
      if (full_poll_due) next_full_poll_ = now + kFullPollPeriod;
      if (!spinning) render_audit_while_idle(SIZE_MAX);  // about to block: render everything
      // Spinning on a known peer: read its channel directly, and poll every channel (and the
      // launcher) every kFullPollPeriod so nothing else waits long.
      const bool direct = spinning && peer_hint >= 0 && !full_poll_due &&
                          progress_peer(peer_hint);
      if (!direct && spinning) {
        progress(std::chrono::milliseconds(0));
      } else if (!direct) {
        // Asleep in poll(): a request another thread completes without a socket (a send to
        // itself, a cancel) must kick us (wake_sleeping_poller), or we would sleep on.
        poller_asleep_.exchange(1, std::memory_order_acq_rel);
        if (!done()) progress(std::chrono::milliseconds(10));
        poller_asleep_.store(0, std::memory_order_relaxed);
      }
      if (!spinning) last_clock = std::chrono::steady_clock::now();  // it may have slept 10 ms
      if (spinning && !done()) {
        // A few at a time: a message arriving meanwhile waits for at most that much (and,
        // once per 256 KiB of records, for the write of the buffer: audit/audit_log.hpp).
        render_audit_while_idle(kAuditRecordsPerSpin);
        // Oversubscribed: give the core away between polls, so that a rank waiting for this
        // core runs now instead of after our time slice.
        if (config_.yield_while_spinning) std::this_thread::yield();
      }
    } else {
      if (background_polling_.load()) kick();
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(2), [&] { return done(); });
      last_clock = std::chrono::steady_clock::now();
    }
    drive_in_flight();  // what arrived may let another collective post its next round
  }
  // The background thread needs this only to a few milliseconds: the last round's reading does,
  // where reading the clock again would add ~25 ns to every completed wait.
  last_activity_ns_ = to_ns(last_clock);
  if (--active_waiters_ > 0) notify_waiters();  // the token is free for the next waiter
}

namespace {

// Done, or a receive nothing can match any more (the waiter then fails it).
bool ended(const RequestState& request) {
  return request.done.load(std::memory_order_acquire) ||
         request.unmatchable.load(std::memory_order_relaxed);
}

}  // namespace

// Waiting on a receive that nothing can match would wait for ever: it fails instead (MPI
// leaves such a wait erroneous; Open MPI hangs).
void Engine::wait(const RequestState& request) {
  do {
    wait_until([&] { return ended(request); }, request.peer_hint);
  } while (!request.done.load(std::memory_order_acquire) && !fail_unmatchable(request));
}

std::size_t Engine::wait_any(const std::vector<const RequestState*>& requests) {
  std::size_t index = requests.size();
  // One peer for all of them (a collective round, a pair of sendrecv requests): spin on it.
  int hint = requests.empty() ? -1 : requests.front()->peer_hint;
  for (const RequestState* r : requests) {
    if (r->peer_hint != hint) hint = -1;
  }
  // The first request done. A receive nothing can match fails only once every request is such
  // a receive: until then another may still complete (MPI_Waitany on a stop message that never
  // comes and on data that does must return the data).
  do {
    wait_until(
        [&] {
          std::size_t unmatchable = requests.size();
          for (std::size_t i = 0; i < requests.size(); ++i) {
            if (requests[i]->done.load(std::memory_order_acquire)) {
              index = i;
              return true;
            }
            if (!requests[i]->unmatchable.load(std::memory_order_relaxed)) {
              unmatchable = requests.size() + 1;  // this one may still complete
            } else if (unmatchable == requests.size()) {
              unmatchable = i;
            }
          }
          index = unmatchable;
          return index < requests.size() || requests.empty();
        },
        hint);
  } while (index < requests.size() && !requests[index]->done.load(std::memory_order_acquire) &&
           !fail_unmatchable(*requests[index]));
  return index;
}

bool Engine::fail_unmatchable(const RequestState& request) {
  std::lock_guard lock(mu_);
  if (!request.unmatchable.load(std::memory_order_relaxed)) return false;  // matched since
  const auto it = std::find_if(posted_.begin(), posted_.end(),
                               [&](const auto& posted) { return posted.get() == &request; });
  // Every other way out of posted_ completes the request or clears the mark (take_posted).
  if (it == posted_.end()) return false;
  complete(**it, ErrorClass::peer_failed, unmatchable_reason(request));
  posted_.erase(it);
  return true;
}

bool Engine::test(const RequestState& request) {
  if (request.done.load(std::memory_order_acquire)) return true;
  stretch_while_waiting();  // a program polling with test waits too (MPI_Test loops)
  if (progress_token_.try_lock()) {
    std::lock_guard token(progress_token_, std::adopt_lock);
    progress(std::chrono::milliseconds(0));
  }
  last_activity_ns_ = now_ns();
  drive_in_flight();
  return request.done.load(std::memory_order_acquire);
}

void Engine::add_in_flight(const std::shared_ptr<RequestState>& collective) {
  std::lock_guard lock(in_flight_mu_);
  in_flight_.push_back(collective);
  any_in_flight_.store(true, std::memory_order_release);
}

void Engine::drive_in_flight() {
  if (!any_in_flight_.load(std::memory_order_acquire)) return;  // the common case: one load
  std::vector<std::shared_ptr<RequestState>> live;
  {
    std::lock_guard lock(in_flight_mu_);
    std::erase_if(in_flight_, [&live](const std::weak_ptr<RequestState>& entry) {
      auto state = entry.lock();
      if (!state || state->done.load(std::memory_order_acquire)) return true;
      live.push_back(std::move(state));
      return false;
    });
    any_in_flight_.store(!in_flight_.empty(), std::memory_order_release);
  }
  for (const auto& state : live) (void)state->driver->try_progress();
}

void Engine::read_peer(Peer& peer) {
  if (auto ec = peer.channel_->read_available(peer, kFramesPerRound); ec) {
    std::string reason = peer.channel_ ? peer.channel_->failure().message() : ec.message();
    // After a GOODBYE only a close ends the channel honestly: a violation, or bytes the
    // channel refuses (a forged record, a broken frame or ring), are failures all the same.
    if (!peer.violation_.empty()) reason = peer.violation_reason();
    if (!peer.violation_.empty() || ec != errc::connection_closed) peer.said_goodbye_ = false;
    fail_peer(peer, reason);
  }
}

void Engine::render_audit_while_idle(std::size_t max_records) {
  audit::AuditLog* log = audit();
  if (log != nullptr && log->has_pending()) log->try_render_pending(max_records);
}

void Engine::service_peer(Peer& peer, bool readable) {
  const std::uint64_t moved = peer.channel_->bytes_moved();
  if (readable && !peer.paused_) read_peer(peer);
  if (!peer.failed_ && peer.channel_ && peer.channel_->has_pending_writes()) flush_peer(peer);
  if (peer.channel_ && peer.channel_->bytes_moved() != moved) {
    traffic_.store(traffic_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

bool Engine::progress_peer(int world) {
  std::lock_guard lock(mu_);
  if (world < 0 || static_cast<std::size_t>(world) >= peers_.size()) return false;
  Peer* peer = peers_[static_cast<std::size_t>(world)].get();
  if (peer == nullptr || peer->failed_ || !peer->channel_ || peer->paused_) return false;
  service_peer(*peer, true);
  closed_channels_.clear();  // no channel method is on the stack here
  return true;
}

void Engine::progress(std::chrono::milliseconds max_block) {
  bool immediate = false;
  {
    std::lock_guard lock(mu_);
    poll_fds_.clear();
    polled_peers_.clear();
    const bool may_block = max_block.count() > 0;
    for (auto& peer : peers_) {
      if (!peer || !peer->channel_ || peer->failed_) continue;
      const bool reading = !peer->paused_;
      if (reading && peer->channel_->has_buffered_input()) immediate = true;
      // Shared rings: ask the peer for a wake-up byte before sleeping (a no-op on sockets).
      if (may_block && peer->channel_->prepare_to_block(reading, true)) immediate = true;
      poll_fds_.push_back(
          {peer->channel_->native_handle(), peer->channel_->poll_events(reading), 0});
      polled_peers_.push_back(peer.get());
    }
    if (bootstrap_fd_ >= 0) poll_fds_.push_back({bootstrap_fd_, POLLIN, 0});
    poll_fds_.push_back({wake_fd_.get(), POLLIN, 0});
  }
  const int timeout = immediate ? 0 : static_cast<int>(max_block.count());
  const int ready = ::poll(poll_fds_.data(), poll_fds_.size(), timeout);
  if (ready < 0) {  // EINTR: the caller loops; the peers need not wake us any more
    std::lock_guard lock(mu_);
    for (Peer* peer : polled_peers_) {
      if (!peer->failed_ && peer->channel_) peer->channel_->done_blocking(0);
    }
    return;
  }

  std::lock_guard lock(mu_);
  if (freed_->any.load(std::memory_order_relaxed)) drain_freed();
  for (std::size_t i = 0; i < polled_peers_.size(); ++i) {
    Peer& peer = *polled_peers_[i];
    if (peer.failed_ || !peer.channel_) continue;
    const short revents = poll_fds_[i].revents;
    peer.channel_->done_blocking(revents);
    if (peer.paused_ && (revents & (POLLHUP | POLLERR)) != 0) {
      // The peer can send nothing more, so what is left is bounded by the socket buffer: read
      // on (the read ends in the error) instead of polling a hangup nobody reads, which both
      // spins and leaves the loss unnoticed.
      set_backpressure(peer, false, peer.stretched_);
    }
    service_peer(peer, (revents & (POLLIN | POLLHUP | POLLERR)) != 0 ||
                           peer.channel_->has_buffered_input());
  }
  std::size_t next = polled_peers_.size();
  if (bootstrap_fd_ >= 0) {
    if (poll_fds_[next].revents != 0) {
      const auto ec = bootstrap_reader_.feed(bootstrap_fd_);
      const auto parse_error = handle_buffered_bootstrap_messages();
      if (ec || parse_error) {
        // Without the launcher nobody can tear the job down cleanly: abort now. The socket is
        // the runtime's (JoinedJob), closed when it ends: closing it here too would close
        // whatever file took its number meanwhile.
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

std::error_code Engine::handle_buffered_bootstrap_messages() {
  nlohmann::json message;
  std::error_code parse_error;
  while (bootstrap_reader_.next(message, parse_error)) handle_bootstrap_message(message);
  return parse_error;
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

void Engine::fail_unacknowledging_peers() {
  std::lock_guard lock(mu_);
  bool failed = false;
  for (auto& peer : peers_) {
    if (!peer || !peer->channel_ || peer->failed_) continue;
    // A Unix socket's peer shares this kernel: its death closes the socket at once.
    if (peer->channel_->over_unix_socket()) continue;
    if (transport::unacknowledged_too_long(peer->channel_->native_handle())) {
      fail_peer(*peer, "its host acknowledged nothing for " +
                           std::to_string(transport::kUnacknowledgedLimitMs / 1000) +
                           " s (host down or unreachable)");
      failed = true;
    }
  }
  if (failed) kick();  // a waiter blocked in poll() on that socket must look again
}

void Engine::background_loop() {
  using namespace std::chrono_literals;
  constexpr std::int64_t kQuietNs = 5'000'000;
  auto next_host_check = std::chrono::steady_clock::now();
  while (!stopping_) {
    {
      std::unique_lock lock(background_mu_);
      background_cv_.wait_for(lock, 5ms, [&] { return stopping_.load(); });
    }
    if (stopping_) break;
    // Bounds what a crash can lose of the audit log (its own lock, never the engine's).
    if (config_.audit) config_.audit->flush_if_due();
    // Off the message path, and even while the application waits: a lost host is noticed
    // here when data to it is in flight (keepalive covers idle connections).
    if (const auto now = std::chrono::steady_clock::now(); now >= next_host_check) {
      next_host_check = now + 1s;
      fail_unacknowledging_peers();
      payloads_->trim();  // gives back the buffers of a burst of unexpected messages once past
    }
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
    // Peers waiting for a message from this rank learn now that none will come, and fail
    // instead of waiting until every rank reaches finalize (a program that finalizes with
    // a peer still waiting on it would otherwise hang the job until SEMPI_FINALIZE_TIMEOUT).
    for (auto& peer : peers_) {
      if (peer && peer->channel_ && !peer->failed_) queue_control(*peer, FrameType::finalizing, 0);
    }
    finalizing_sent_ = true;
    // Nothing will receive what a peer sends from now on: it is read up to the budget only.
    for (auto& peer : peers_) {
      if (!peer || !peer->channel_ || peer->failed_ || !peer->stretched_) continue;
      const auto limit = peer->budget();
      set_backpressure(*peer, peer->paused_ || peer->unexpected_bytes_ >= limit, false);
    }
    if (config_.audit) {
      drain_freed();
      config_.audit->event("rank.finalize", true);
    }
    // Nothing will receive what is queued: senders still waiting on it are told now, and
    // those of what comes later as it comes (queue_unexpected).
    for (auto it = unexpected_.begin(); it != unexpected_.end();) {
      it = tell_sender_unreceived(*it) ? unexpected_.erase(it) : std::next(it);
    }
    if (bootstrap_fd_ >= 0 && abort_reason_.empty()) {
      if (launch::write_bootstrap_message(bootstrap_fd_, {{"type", "finalize"}}, deadline)) {
        abort_job("lost the connection to the launcher during finalize");
      }
    }
  }
  // Every rank must reach finalize before any channel closes: peers may still be reading what
  // we sent. Progress meanwhile flushes our queues and keeps reading theirs.
  wait_until(
      [&] {
        return finalize_ok_.load() || aborted_.load() ||
               std::chrono::steady_clock::now() > deadline;
      },
      -1, false);
  // Peers are blamed below only if they had time to say GOODBYE: a confirmation that came in
  // the last second means some rank was late, not that every peer failed.
  const bool confirmed_in_time =
      bootstrap_fd_ < 0 || (finalize_ok_.load() &&
                            deadline - std::chrono::steady_clock::now() >= std::chrono::seconds(1));
  {
    std::lock_guard lock(mu_);
    for (auto& peer : peers_) {
      if (peer && peer->channel_ && !peer->failed_) send_control(*peer, FrameType::goodbye, 0);
    }
    goodbye_sent_ = true;
  }
  // Drained: our queues are flushed, and every peer said goodbye (or failed), so everything it
  // sent before, refusals included, has been read, decided and audited. A paused peer's
  // remaining frames are never read (nothing will receive them): it does not hold us up.
  auto drained = [&] {
    std::lock_guard lock(mu_);
    return std::none_of(peers_.begin(), peers_.end(), [](const auto& peer) {
      return peer && peer->channel_ && !peer->failed_ &&
             (peer->channel_->has_pending_writes() || (!peer->said_goodbye_ && !peer->paused_));
    });
  };
  while (!drained() && std::chrono::steady_clock::now() < deadline) {
    std::lock_guard token(progress_token_);
    progress(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(mu_);
  audit_unreceived();
  audit_dry_run_totals();
  // Closing on a peer that had not said GOODBYE by the deadline is no clean end: it is named
  // (log and audit, before the chain closes). Unless the launcher did not confirm in time that
  // every rank reached finalize: then the late rank is the cause, and no peer is blamed. (A
  // peer that said GOODBYE but left our last frames unread is not named: it may have paused
  // reading us, as a receiver does past its unexpected-message budget.)
  if (!confirmed_in_time && abort_reason_.empty() && !aborted_.load()) {
    const std::string reason =
        "no confirmation from the launcher, a second or more before the finalize deadline, "
        "that every rank reached finalize";
    diagnostics().warn("sempi[rank {}]: {}", config_.world_rank, reason);
    if (audit::AuditLog* log = audit()) log->event("finalize.timeout", false, reason);
  }
  for (const auto& peer : peers_) {
    if (!confirmed_in_time || !peer || !peer->channel_ || peer->failed_ || !abort_reason_.empty() ||
        peer->said_goodbye_ || peer->paused_) {
      continue;
    }
    const std::string reason = "no GOODBYE before the finalize deadline";
    diagnostics().warn("sempi[rank {}]: rank {}: {}", config_.world_rank, peer->world_rank_,
                       reason);
    if (audit::AuditLog* log = audit()) {
      log->event("peer.failure", false, reason, {{"peer", peer->world_rank_}});
    }
  }
  if (config_.audit) {
    // The chain ends only now: the head goes to the launcher, which signs it into the seal.
    const audit::ChainHead head = config_.audit->close();
    if (bootstrap_fd_ >= 0 && abort_reason_.empty()) {
      (void)launch::write_bootstrap_message(
          bootstrap_fd_,
          {{"type", "audit_head"}, {"audit_head", nlohmann::json(audit::chain_head_json(head))}},
          deadline);
    }
  }
  for (auto& peer : peers_) {
    if (peer && peer->channel_) {
      peer->said_goodbye_ = true;  // closing now is expected, not a failure
      peer->channel_->shutdown();
      peer->channel_.reset();
      if (!peer->failed_) ++failed_peers_;
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

bool Engine::await_abort_notice(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return aborted_.load(); });
}

std::uint32_t Engine::allocate_context() {
  constexpr std::uint64_t kIndexLimit = std::uint64_t{1} << 31;  // 2 * index + 1 fits 32 bits
  const std::uint64_t n = contexts_allocated_.fetch_add(1);
  const std::uint64_t index = kFirstContextIndex +
                              n * static_cast<std::uint64_t>(config_.world_size) +
                              static_cast<std::uint64_t>(config_.world_rank);
  if (index >= kIndexLimit) {
    throw Error(ErrorClass::intern, "communicator context ids exhausted on this rank after " +
                                        std::to_string(n) + " communicators");
  }
  return static_cast<std::uint32_t>(2 * index);
}

bool Engine::adopt_context(std::uint32_t context, int root_world) {
  const std::uint64_t index = context / 2;
  if (context % 2 != 0 || index < kFirstContextIndex ||
      (index - kFirstContextIndex) % static_cast<std::uint64_t>(config_.world_size) !=
          static_cast<std::uint64_t>(root_world)) {
    return false;
  }
  std::lock_guard lock(mu_);
  return contexts_adopted_.insert(context).second;
}

// --- policy and audit ----------------------------------------------------------------------

const Engine::CommEntry* Engine::find_entry(std::uint32_t context) const noexcept {
  // A frame's admission and its audit record, and most consecutive frames, name the same
  // communicator: the last entry found is tried first. Entries are never erased, so the
  // pointer stays valid.
  const std::uint32_t key = context >> 1;  // p2p context 2k and collective context 2k + 1
  if (last_entry_ == nullptr || last_entry_key_ != key) {
    const auto it = comms_.find(key);
    if (it == comms_.end()) return nullptr;
    last_entry_key_ = key;
    last_entry_ = &it->second;
  }
  return last_entry_->decisions ? last_entry_ : nullptr;
}

Engine::CommEntry& Engine::compile_entry(const CommState& comm, const std::string& name) {
  CommEntry& entry = comms_[comm.context >> 1];
  entry.name = name;
  entry.members = comm.world_ranks;
  entry.freed = false;
  entry.decisions =
      policy()->compile_comm(name, comm.world_ranks, config_.world_rank, config_.world_size);
  entry.generation = ++rules_generation_;
  return entry;
}

const Engine::CommEntry& Engine::entry_for(const CommState& comm) {
  // Every communicator is registered at creation and recompiled by rename_comm: compiling here
  // is only a fallback, so that no operation ever runs without rules.
  if (const CommEntry* entry = find_entry(comm.context)) return *entry;
  return compile_entry(comm, comm.name());
}

void Engine::rename_comm(const CommState& comm, const std::string& name) {
  // Named under the lock: of two concurrent renames, the last one stored wins here too.
  std::lock_guard lock(mu_);
  if (policy() == nullptr) {
    comm.set_name(name);
    return;
  }
  const CommEntry* entry = find_entry(comm.context);
  if (entry != nullptr && entry->name == name) {  // its rules already: nothing to check
    comm.set_name(name);
    return;
  }
  const std::string previous = entry != nullptr ? entry->name : comm.name();
  // A name brings its rule's tags, collectives and sizes: it must also bring its member check,
  // or renaming would let any set of ranks take on another communicator's rules. world and self
  // are made without that check, so their rules need not restrict members (the examples say
  // "*"): another communicator takes either name only with as many members as they have.
  const std::size_t size = comm.world_ranks.size();
  policy::Decision members;
  if ((name == "world" && size != static_cast<std::size_t>(config_.world_size)) ||
      (name == "self" && size != 1)) {
    members.verdict = policy::Verdict::deny_not_member;
    members.rule = "predefined name";
    members.explanation = "'" + name + "' names the predefined communicator of " +
                          (name == "world" ? "every rank of the job" : "one rank alone") +
                          "; communicator '" + previous + "' has " + std::to_string(size) +
                          " members";
  } else {
    members = policy()->check_members(name, comm.world_ranks);
  }
  if (!members.allowed) {
    if (audit::AuditLog* log = audit()) {
      log->event("comm.refuse", false, members.explanation,
                 {{"comm", name}, {"previous", previous}, {"context", comm.context},
                  {"rule", members.rule}, {"dry_run", !policy()->enforcing()}});
    }
    if (policy()->enforcing()) {
      throw Error(ErrorClass::policy, "renaming communicator '" + previous + "' to '" + name +
                                          "' refused by policy: " + members.explanation +
                                          " (rule " + members.rule + ")");
    }
  }
  comm.set_name(name);
  if (audit::AuditLog* log = audit(); log != nullptr && entry != nullptr) {
    log->event("comm.rename", true, {},
               {{"comm", name}, {"previous", previous}, {"context", comm.context}});
  }
  compile_entry(comm, name);
  // Messages already here were admitted under the previous name; none may reach the
  // application under this one unless its rule admits it too. (Otherwise a sender could get
  // a message past the new rule by sending it before the rename, even before the
  // communicator existed here: it was then judged at registration, under its first name.)
  judge_queued(comm.context, Queued::admitted);
}

void Engine::register_comm(const CommState& comm) {
  std::lock_guard lock(mu_);
  if (policy() == nullptr) return;
  const CommEntry& entry = compile_entry(comm, comm.name());
  if (audit::AuditLog* log = audit()) {
    nlohmann::ordered_json fields = {{"comm", entry.name},
                                     {"context", comm.context},
                                     {"size", comm.size()},
                                     {"rule", entry.decisions->rule()}};
    // Member lists of huge communicators would bloat every log; the size says enough there.
    if (comm.size() <= 64) fields["members"] = comm.world_ranks;
    log->event("comm.create", true, {}, fields);
  }
  judge_queued(comm.context, Queued::undecided);
}

std::optional<std::string> Engine::collective_denied(const CommState& comm, OpKind op) {
  std::lock_guard lock(mu_);
  if (policy() == nullptr) return std::nullopt;
  const CommEntry& entry = entry_for(comm);
  // Checked against this rank itself: membership and segmentation are per pair and are
  // checked per message; what is left is the same for every member.
  Verdict verdict = entry.decisions->check(config_.world_rank, static_cast<std::uint16_t>(op),
                                           true, 0, 0);
  if (verdict != Verdict::deny_op && verdict != Verdict::deny_comm_unknown) return std::nullopt;
  if (on_denial(verdict, &entry, config_.world_rank, comm.collective_context(),
                static_cast<std::uint16_t>(op), 0, 0, 0, "send") != Admit::deny) {
    return std::nullopt;
  }
  return "policy denies " + std::string(op_kind_name(op)) + " on communicator '" + entry.name +
         "': " + policy::verdict_text(verdict);
}

void Engine::collective_starting(const CommState& comm) {
  std::lock_guard lock(mu_);
  if (withdrawn_.empty() && discarded_.empty()) return;
  forget_old_withdrawals(comm.collective_context(),
                         comm.collective_sequence.load(std::memory_order_relaxed));
}

void Engine::drain_freed() {
  std::vector<std::uint32_t> freed;
  {
    std::lock_guard lock(freed_->mu);
    freed.swap(freed_->contexts);
    freed_->any = false;
  }
  for (const std::uint32_t context : freed) {
    // No transfer of the communicator's collectives can come: its withdrawals can go.
    std::erase_if(withdrawn_, [&](const Withdrawn& w) { return w.context >> 1 == context >> 1; });
    std::erase_if(discarded_, [&](const Discarded& d) { return d.context >> 1 == context >> 1; });
    const auto it = comms_.find(context >> 1);
    if (it == comms_.end() || !it->second.decisions || it->second.freed) continue;
    CommEntry& entry = it->second;
    entry.freed = true;
    if (audit::AuditLog* log = audit()) {
      log->event("comm.free", true, {}, {{"comm", entry.name}, {"context", context}});
    }
  }
}

Engine::Admit Engine::on_denial(Verdict verdict, const CommEntry* entry, int peer,
                                std::uint32_t context, std::uint16_t op, int tag,
                                std::uint64_t bytes, std::uint64_t msg, const char* direction) {
  // A non-member's message, an operation kind forged for its context, or a message for a freed
  // communicator is refused even in audit mode: that mode relaxes the policy, never MPI's own
  // communicator semantics.
  const bool freed = verdict == Verdict::deny_comm_freed;
  const bool enforce = policy()->enforcing() || verdict == Verdict::deny_not_member ||
                       verdict == Verdict::deny_op_context || freed;
  if (!enforce) {
    audit_dry_run_denial(verdict, entry, peer, context, op, tag, bytes, msg, direction);
    return Admit::allow;
  }
  audit_denial(verdict, entry, peer, context, op, tag, bytes, msg, direction, false);
  // A dry run is never ended by a refusal only MPI's semantics force (a freed communicator's).
  const bool violation = policy()->enforcing() || !freed;
  if (violation && std::string_view(direction) == "receive" &&
      policy()->action() == policy::Action::abort && bootstrap_fd_ >= 0) {
    // The launcher tears the job down and reports this reason.
    const std::string reason = "policy violation: rank " + std::to_string(peer) + " sent " +
                               std::to_string(bytes) + " bytes on communicator '" +
                               (entry != nullptr ? entry->name : std::string("?")) + "' (tag " +
                               std::to_string(tag) + "): " + policy::verdict_text(verdict);
    (void)launch::write_bootstrap_message(
        bootstrap_fd_, {{"type", "abort"}, {"code", kPolicyAbortCode}, {"reason", reason}},
        std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  return Admit::deny;
}

void Engine::audit_denial(Verdict verdict, const CommEntry* entry, int peer, std::uint32_t context,
                          std::uint16_t op, int tag, std::uint64_t bytes, std::uint64_t msg,
                          const char* direction, bool dry_run) {
  audit::AuditLog* log = audit();
  if (log == nullptr) return;
  audit::MessageRecord r = message_record("policy.deny", peer, context, op, tag, bytes, msg);
  r.comm = entry != nullptr ? std::string_view(entry->name) : std::string_view("?");
  r.success = false;
  r.reason = policy::verdict_text(verdict);
  r.direction = direction;
  r.dry_run = dry_run;  // audit mode: logged, not enforced
  log->message(r);
}

void Engine::audit_dry_run_denial(Verdict verdict, const CommEntry* entry, int peer,
                                  std::uint32_t context, std::uint16_t op, int tag,
                                  std::uint64_t bytes, std::uint64_t msg, const char* direction) {
  if (audit() != nullptr && dry_run_audit_allowed(peer, context, verdict, direction)) {
    audit_denial(verdict, entry, peer, context, op, tag, bytes, msg, direction, true);
  }
}

bool Engine::dry_run_audit_allowed(int peer, std::uint32_t context, Verdict verdict,
                                   const char* direction) {
  const DryRunKey key{peer, context & ~1u, verdict, std::string_view(direction)};
  const std::uint64_t seen = ++dry_run_denials_[key];
  if (seen <= kAuditedDryRunDenials) return true;
  if (seen == kAuditedDryRunDenials + 1) {
    auto fields = dry_run_limit_fields(key);
    fields["limit"] = kAuditedDryRunDenials;
    audit()->event("audit.limit", false,
                   "further dry-run policy.deny records like this one are not written; "
                   "finalize records how many",
                   fields);
  }
  return false;
}

nlohmann::ordered_json Engine::dry_run_limit_fields(const DryRunKey& key) const {
  const auto& [peer, context, verdict, direction] = key;
  const CommEntry* entry = find_entry(context);
  return {{"records", "policy.deny"},
          {"peer", peer},
          {"comm", entry != nullptr ? entry->name : std::string("?")},
          {"context", context},
          {"direction", direction},
          {"denial", policy::verdict_text(verdict)}};
}

void Engine::audit_dry_run_totals() {
  audit::AuditLog* log = audit();
  if (log == nullptr) return;
  for (const auto& [key, seen] : dry_run_denials_) {
    if (seen <= kAuditedDryRunDenials) continue;
    auto fields = dry_run_limit_fields(key);
    fields["not_written"] = seen - kAuditedDryRunDenials;
    log->event("audit.limit", false, "dry-run policy.deny records not written", fields);
  }
}

Engine::Admit Engine::admit(Peer& peer, const FrameHeader& header) {
  if (policy() == nullptr) return Admit::allow;
  // A communicator whose last handle went is freed before a frame for it is judged, however
  // the frame was read (a spinning wait's too, not only a progress round).
  if (freed_->any.load(std::memory_order_relaxed)) drain_freed();
  const CommEntry* entry = find_entry(header.context);
  if (entry == nullptr) return Admit::pending;  // not created here yet: decided at registration
  const bool collective = (header.context & 1u) != 0;
  const std::uint64_t bytes = header.type == FrameType::rts ? header.aux : header.length;
  Verdict verdict =
      entry->decisions->check(peer.world_rank_, header.op, collective, header.tag, bytes);
  // A freed communicator takes no more messages, in audit mode too: nothing could receive
  // them. A non-member's or forged frame keeps its own verdict.
  if (entry->freed && verdict != Verdict::deny_not_member && verdict != Verdict::deny_op_context) {
    verdict = Verdict::deny_comm_freed;
  }
  if (verdict == Verdict::allow) return Admit::allow;
  const Admit decision = on_denial(verdict, entry, peer.world_rank_, header.context, header.op,
                                   header.tag, bytes, header.sequence, "receive");
  if (decision == Admit::deny) peer.last_refusal_ = verdict;  // the DENY's reason
  if (decision == Admit::deny && ++peer.refusals_ == kRefusalsBeforeCutoff) {
    // The frame handler sees the violation and fails the channel (see Peer::cut_off).
    peer.violation_ = kCutOffAsHostile;
  }
  return decision;
}

void Engine::send_deny(Peer& peer, std::uint64_t id, bool synchronous, Verdict reason_verdict) {
  if (!peer.channel_ || peer.failed_) return;
  FrameHeader header;
  header.type = FrameType::deny;
  header.source = static_cast<std::uint32_t>(config_.world_rank);
  header.aux = id;
  if (synchronous) header.flags = flags::kSynchronous;
  const std::string_view reason = policy::verdict_text(reason_verdict);  // static text
  peer.channel_->enqueue(header, {reinterpret_cast<const std::uint8_t*>(reason.data()),
                                  std::min(reason.size(), kMaxDenyReason)},
                         nullptr);
  flush_peer(peer);
}

void Engine::withdraw(const CommState& comm, OpKind op, std::uint32_t sequence,
                      std::span<const int> peers, ErrorClass cls, std::string_view reason) {
  reason = reason.substr(0, kMaxWithdrawReason);
  const std::string why(reason);  // for the sends cancelled below
  std::lock_guard lock(mu_);
  std::size_t notified = 0;
  for (const int rank : peers) {
    const int world = comm.world_ranks[static_cast<std::size_t>(rank)];
    if (world == config_.world_rank) continue;
    Peer* peer = peers_[static_cast<std::size_t>(world)].get();
    if (peer == nullptr || peer->failed_ || !peer->channel_) continue;
    // Its rendezvous sends without a CTS yet have read nothing: cancelled, not waited for
    // (the peer drops their RTS, or fails the receive that matched one, on the WITHDRAWN).
    // Taken first: out of memory here, nothing has told the peer yet.
    const auto cancelled = take_sends_awaiting_cts(*peer, comm.collective_context(), sequence);
    FrameHeader header;
    header.type = FrameType::withdrawn;
    header.op = static_cast<std::uint16_t>(op);
    header.context = comm.collective_context();
    header.source = static_cast<std::uint32_t>(config_.world_rank);
    header.aux = static_cast<std::uint64_t>(cls) | (std::uint64_t{sequence} << 32);
    try {
      peer->channel_->enqueue(
          header, {reinterpret_cast<const std::uint8_t*>(reason.data()), reason.size()}, nullptr);
      flush_peer(*peer);
    } catch (...) {
      // Out of memory: the sends taken are over all the same, or this rank would wait for
      // them (Schedule::wait_until_quiet).
      for (const auto& request : cancelled) complete(*request, cls, why);
      throw;
    }
    ++notified;
    for (const auto& request : cancelled) complete(*request, cls, why);
  }
  wake_sleeping_poller();  // a thread waiting for a cancelled send may be asleep in poll()
  // Recorded first: the drops it causes follow it in the log.
  audit_withdrawal("collective.withdraw", -1, comm.collective_context(),
                   static_cast<std::uint16_t>(op), sequence, cls, reason, notified);
  discard_collective(comm, sequence);
}

bool Engine::failed_by_withdrawal(RequestState& request, std::uint32_t context, int peer, int tag,
                                  std::uint32_t sequence) {
  if ((withdrawn_.empty() && discarded_.empty()) || !internal_tag::is_schedule_tag(tag)) {
    return false;
  }
  forget_old_withdrawals(context, sequence);
  const auto it = std::find_if(withdrawn_.begin(), withdrawn_.end(), [&](const Withdrawn& w) {
    return w.context == context && w.source == peer && w.sequence == sequence;
  });
  if (it == withdrawn_.end()) return false;
  fail_withdrawn(request, it->source, it->cls, it->reason);
  return true;
}

void Engine::forget_old_withdrawals(std::uint32_t context, std::uint32_t sequence) {
  const auto older = [&](std::uint32_t context_of, std::uint32_t sequence_of, std::int32_t by) {
    return context_of == context && static_cast<std::int32_t>(sequence - sequence_of) > by;
  };
  std::erase_if(withdrawn_,
                [&](const Withdrawn& w) { return older(w.context, w.sequence, kWithdrawnWindow); });
  std::erase_if(discarded_,
                [&](const Discarded& d) { return older(d.context, d.sequence, kDiscardWindow); });
}

bool Engine::discarded(std::uint32_t context, int tag) const {
  return std::any_of(discarded_.begin(), discarded_.end(), [&](const Discarded& d) {
    return d.context == context && internal_tag::is_tag_of_collective(tag, d.sequence);
  });
}

void Engine::discard_collective(const CommState& comm, std::uint32_t sequence) {
  if (discarded_.size() == kMaxDiscarded) discarded_.pop_front();
  discarded_.push_back({comm.collective_context(), sequence});
  // Taken out first: giving credit back may fail a peer, which edits unexpected_.
  std::list<Unexpected> dropped;
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->source != config_.world_rank && discarded(it->context, it->tag)) {
      dropped.splice(dropped.end(), unexpected_, it++);
    } else {
      ++it;
    }
  }
  for (const Unexpected& message : dropped) {
    // A tombstone's drop was audited when its sender withdrew (on_withdrawn).
    if (message.withdrawn == ErrorClass::success) audit_dropped(message);
    release_unexpected(*peers_[static_cast<std::size_t>(message.source)], message);
  }
}

std::vector<std::shared_ptr<RequestState>> Engine::take_sends_awaiting_cts(Peer& peer,
                                                                           std::uint32_t context,
                                                                           std::uint32_t sequence) {
  auto& sends = peer.send_rendezvous_;
  std::vector<std::uint64_t> ids;
  for (const auto& [id, transfer] : sends) {
    if (transfer.context == context && transfer.sequence == sequence &&
        internal_tag::is_schedule_tag(transfer.tag)) {
      ids.push_back(id);
    }
  }
  std::vector<std::shared_ptr<RequestState>> taken;
  taken.reserve(ids.size());
  // A CTS or DENY that crossed the WITHDRAWN is then no violation (forget_withdrawn_send).
  // Recorded before anything is taken: out of memory here, the sends simply go on.
  for (const std::uint64_t id : ids) {
    if (peer.withdrawn_sends_.size() == Peer::kMaxWithdrawnSends) {
      peer.withdrawn_sends_evicted_ =
          std::max(peer.withdrawn_sends_evicted_, peer.withdrawn_sends_.front());
      peer.withdrawn_sends_.pop_front();
    }
    peer.withdrawn_sends_.push_back(id);
  }
  for (const std::uint64_t id : ids) {
    const auto it = sends.find(id);
    taken.push_back(std::move(it->second.request));
    sends.erase(it);
  }
  return taken;
}

void Engine::fail_withdrawn(RequestState& request, int source_world, ErrorClass cls,
                            const std::string& reason) {
  // The reason is the peer's account, relayed as it came; which peer relayed it is added.
  request.withdrawn = true;
  request.withdrawn_origin_length = static_cast<std::uint32_t>(reason.size());
  complete(request, cls, reason + " (withdrawn by rank " + std::to_string(source_world) + ")");
}

void Engine::on_withdrawn(int source_world, std::uint32_t context, std::uint16_t op,
                          std::uint32_t sequence, ErrorClass cls, const std::string& reason) {
  audit_withdrawal("collective.withdrawn", source_world, context, op, sequence, cls, reason, 0);
  // Messages it sent before came before this frame: receives they matched are not posted_.
  bool failed_any = false;
  for (auto it = posted_.begin(); it != posted_.end();) {
    RequestState& r = **it;
    if (r.context == context && r.source_world == source_world && r.sequence == sequence &&
        internal_tag::is_schedule_tag(r.tag)) {
      auto request = std::move(*it);
      it = posted_.erase(it);
      fail_withdrawn(*request, source_world, cls, reason);
      failed_any = true;
    } else {
      ++it;
    }
  }
  // Sends to the peer that wait for its CTS: it will never send one. (A CTS it sent came
  // before this frame, and took its send out of send_rendezvous_.)
  Peer& peer = *peers_[static_cast<std::size_t>(source_world)];
  for (const auto& request : take_sends_awaiting_cts(peer, context, sequence)) {
    fail_withdrawn(*request, source_world, cls, reason);
    failed_any = true;
  }
  // Its rendezvous sends that had no CTS when it withdrew are cancelled (withdraw): their RTS
  // waiting here become tombstones (below), and a receive that matched one, whose CTS crossed
  // the WITHDRAWN, gets no data. (Data for a CTS it had before came before this frame, and
  // completed the receive.)
  for (auto it = peer.recv_rendezvous_.begin(); it != peer.recv_rendezvous_.end();) {
    const RecvRendezvous& transfer = it->second;
    if (transfer.context == context && transfer.request->sequence == sequence &&
        internal_tag::is_schedule_tag(transfer.tag)) {
      audit_dropped(source_world, context, transfer.op, transfer.tag, transfer.total, it->first,
                    kDroppedSenderLeft);
      auto request = std::move(it->second.request);
      it = peer.recv_rendezvous_.erase(it);
      fail_withdrawn(*request, source_world, cls, reason);
      failed_any = true;
    } else {
      ++it;
    }
  }
  // Its RTS waiting here stay, as tombstones: a receive that matches one fails with this
  // withdrawal's class and reason (deliver_unexpected_to).
  std::shared_ptr<const std::string> shared_reason;
  for (Unexpected& message : unexpected_) {
    if (message.rendezvous && message.source == source_world && message.context == context &&
        message.withdrawn == ErrorClass::success &&
        internal_tag::is_tag_of_collective(message.tag, sequence)) {
      if (!shared_reason) shared_reason = std::make_shared<const std::string>(reason);
      message.withdrawn_reason = shared_reason;
      message.withdrawn = cls;
      audit_dropped(message, kDroppedSenderLeft);
    }
  }
  if (failed_any) wake_sleeping_poller();  // a waiter may be another thread, asleep in poll()
  // For the transfers with it in that collective this rank posts later.
  const auto from_peer = [source_world](const Withdrawn& w) { return w.source == source_world; };
  if (static_cast<std::size_t>(std::count_if(withdrawn_.begin(), withdrawn_.end(), from_peer)) >=
      kMaxWithdrawnPerPeer) {
    withdrawn_.erase(std::find_if(withdrawn_.begin(), withdrawn_.end(), from_peer));
  }
  withdrawn_.push_back({context, source_world, sequence, cls, reason});
}

void Engine::judge_queued(std::uint32_t base_context, Queued which) {
  const CommEntry* entry = find_entry(base_context);
  if (entry == nullptr) return;
  const bool undecided = which == Queued::undecided;
  // Refused messages leave the queue first and are answered after the walk: answering may
  // fail a peer (a DENY that cannot be written), and failing a peer edits unexpected_.
  std::list<Unexpected> refused;
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->undecided != undecided || (it->context >> 1) != (base_context >> 1)) {
      ++it;
      continue;
    }
    if (!undecided) {
      if (const auto verdict = refused_after_rename(*it)) {
        it->refusal = *verdict;
        refused.splice(refused.end(), unexpected_, it++);
      } else {
        ++it;
      }
      continue;
    }
    it->undecided = false;
    // Withdrawn by its sender (audited as dropped): nothing to admit or refuse, and a DENY
    // would answer a send that no longer exists. A receive that matches it fails.
    if (it->withdrawn != ErrorClass::success) {
      ++it;
      continue;
    }
    const bool collective = (it->context & 1u) != 0;
    const Verdict verdict = entry->decisions->check(it->source, it->op, collective, it->tag, it->bytes);
    const Admit decision =
        verdict == Verdict::allow
            ? Admit::allow
            : on_denial(verdict, entry, it->source, it->context, it->op, it->tag, it->bytes,
                        it->msg_id, "receive");
    if (decision == Admit::allow) {
      if (undecided && !it->rendezvous) {  // (an admitted one was recorded on arrival)
        audit_message("message.receive", it->source, it->context, it->op, it->tag, it->bytes,
                      it->msg_id, it->payload());
      }
      ++it;
      continue;
    }
    it->refusal = verdict;
    refused.splice(refused.end(), unexpected_, it++);
  }
  // Refusals decided at registration count like those decided on arrival (see admit); those
  // after a rename do not: their senders sent them while they were allowed.
  for (const Unexpected& message : refused) answer_refused(message, undecided);
}

std::optional<policy::Verdict> Engine::refused_after_rename(const Unexpected& message) {
  // This rank's own messages were checked as it sent them; a withdrawn one is answered by its
  // withdrawal.
  if (message.source == config_.world_rank || message.withdrawn != ErrorClass::success) {
    return std::nullopt;
  }
  return refused_after_rename(message.source, message.context, message.op, message.tag,
                              message.bytes, message.msg_id);
}

std::optional<policy::Verdict> Engine::refused_after_rename(int source, std::uint32_t context,
                                                            std::uint16_t op, int tag,
                                                            std::uint64_t bytes,
                                                            std::uint64_t msg) {
  // A refusal is audited, but neither counted towards the sender's cut-off nor an abort: the
  // message was allowed when it was sent. Audit mode enforces only what a rename cannot change
  // (membership, the operation kind's context), so there it is a dry-run record.
  const CommEntry* entry = find_entry(context);
  if (entry == nullptr) return std::nullopt;
  const Verdict verdict = entry->decisions->check(source, op, (context & 1u) != 0, tag, bytes);
  if (verdict == Verdict::allow) return std::nullopt;
  if (!policy()->enforcing()) {
    audit_dry_run_denial(verdict, entry, source, context, op, tag, bytes, msg, "receive");
    return std::nullopt;
  }
  audit_denial(verdict, entry, source, context, op, tag, bytes, msg, "receive", false);
  return verdict;
}

void Engine::answer_refused(const Unexpected& message, bool count) {
  if (message.source == config_.world_rank) return;
  Peer* peer = peers_[static_cast<std::size_t>(message.source)].get();
  if (peer == nullptr || peer->failed_) return;
  release_unexpected(*peer, message);
  if (message.rendezvous) {
    send_deny(*peer, message.rendezvous_id, false, message.refusal);
  } else if (message.synchronous) {
    send_deny(*peer, message.sync_id, true, message.refusal);
  }
  if (count && !peer->failed_ && ++peer->refusals_ == kRefusalsBeforeCutoff) {
    peer->violation_ = kCutOffAsHostile;  // names the cause in its failed queued sends too
    fail_peer(*peer, peer->violation_reason());
  }
}

audit::MessageRecord Engine::message_record(const char* action, int peer, std::uint32_t context,
                                            std::uint16_t op, int tag, std::uint64_t bytes,
                                            std::uint64_t msg) const {
  const CommEntry* entry = find_entry(context);
  audit::MessageRecord r;
  r.action = action;
  r.peer = peer;
  r.comm = entry != nullptr ? std::string_view(entry->name) : std::string_view("?");
  r.context = context;
  r.op = op <= kMaxOpKind ? op_kind_name(static_cast<OpKind>(op)).data() : "unknown";
  r.tag = tag;
  r.bytes = bytes;
  r.msg = msg;
  return r;
}

bool Engine::departure_audit_allowed(int peer) {
  Peer* p = peers_[static_cast<std::size_t>(peer)].get();
  if (p == nullptr || p->audited_departures_ > kAuditedDeparturesPerPeer) return false;
  if (++p->audited_departures_ <= kAuditedDeparturesPerPeer) return true;
  if (audit::AuditLog* log = audit()) {
    log->event("audit.limit", false,
               "further collective.withdrawn and message.drop records for this peer are not "
               "written",
               {{"peer", peer}, {"limit", kAuditedDeparturesPerPeer}});
  }
  return false;
}

void Engine::audit_dropped(int peer, std::uint32_t context, std::uint16_t op, int tag,
                           std::uint64_t bytes, std::uint64_t msg, const char* reason) {
  audit::AuditLog* log = audit();
  if (log == nullptr || !departure_audit_allowed(peer)) return;
  audit::MessageRecord r = message_record("message.drop", peer, context, op, tag, bytes, msg);
  r.success = false;
  r.reason = reason;
  log->message(r);
}

void Engine::audit_dropped(const Unexpected& message, const char* reason) {
  audit_dropped(message.source, message.context, message.op, message.tag, message.bytes,
                message.msg_id, reason);
}

void Engine::audit_unreceived() {
  // Without these the sender's message.send would have no counterpart, and frames on a
  // communicator this rank never created (which the policy never judged: admit) would leave
  // no trace at all. A tombstone's drop was audited when its sender withdrew (on_withdrawn).
  if (audit() == nullptr) return;
  for (const Unexpected& message : unexpected_) {
    if (message.source == config_.world_rank || message.withdrawn != ErrorClass::success) continue;
    audit_dropped(message, message.undecided ? kDroppedCommNeverCreated : kDroppedNeverReceived);
  }
}

void Engine::audit_withdrawal(const char* action, int peer, std::uint32_t context, std::uint16_t op,
                              std::uint32_t sequence, ErrorClass cls, std::string_view reason,
                              std::size_t notified) {
  audit::AuditLog* log = audit();
  if (log == nullptr || (peer >= 0 && !departure_audit_allowed(peer))) return;
  const CommEntry* entry = find_entry(context);
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  if (peer >= 0) fields["peer"] = peer;
  fields["comm"] = entry != nullptr ? entry->name : std::string("?");
  fields["context"] = context;
  fields["op"] = op <= kMaxOpKind ? op_kind_name(static_cast<OpKind>(op)) : "unknown";
  fields["sequence"] = sequence;
  fields["class"] = error_class_name(cls);
  if (peer < 0) fields["notified"] = notified;
  log->event(action, false, reason, fields);
}

void Engine::audit_message(const char* action, int peer, std::uint32_t context, std::uint16_t op,
                           int tag, std::uint64_t bytes, std::uint64_t msg,
                           std::span<const std::uint8_t> payload) {
  audit::AuditLog* log = audit();
  if (log == nullptr || policy() == nullptr) return;
  const auto level = policy()->message_audit();
  if (level == policy::MessageAudit::off) return;
  audit::MessageRecord r = message_record(action, peer, context, op, tag, bytes, msg);
  audit::Sha256 digest{};
  if (level == policy::MessageAudit::digest) {
    digest = audit::sha256(payload);
    r.digest = &digest;
  }
  log->message(r);
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
  message.data = engine_.payloads_->take(header.length);
  inflight_unexpected_ = std::move(message);
}

bool Engine::Peer::out_of_place(const FrameHeader& header) {
  // Failed while this round was reading its frames (its ABORT, a lost write): read no further,
  // or frames behind an ABORT would still be delivered.
  if (failed_) return true;
  if (header.source != static_cast<std::uint32_t>(world_rank_)) {
    violation_ = "frame claims source rank " + std::to_string(header.source);
    return true;
  }
  // After GOODBYE the peer only answers what it still reads from us: DENY for a refused
  // message, or ABORT. Anything else would be delivered past its own finalize.
  if (said_goodbye_ && header.type != FrameType::deny && header.type != FrameType::abort) {
    violation_ = std::string(frame_type_name(header.type)) + " frame after GOODBYE";
    return true;
  }
  // UNRECEIVED qualifies a DENY only.
  if ((header.flags & flags::kUnreceived) != 0 && header.type != FrameType::deny) {
    violation_ = std::string(frame_type_name(header.type)) + " flagged UNRECEIVED";
    return true;
  }
  // After FINALIZING it starts no new message: receives from it that nothing matched were
  // failed or marked on the strength of that promise.
  if (finalizing_ && (header.type == FrameType::eager || header.type == FrameType::rts ||
                      header.type == FrameType::finalizing)) {
    violation_ = std::string(frame_type_name(header.type)) + " frame after FINALIZING";
    return true;
  }
  // Applications cannot send negative tags (ANY_TAG is -1): such a message could only match
  // wildcard receives, and would report a wildcard as its tag.
  if ((header.type == FrameType::eager || header.type == FrameType::rts) &&
      (header.context & 1u) == 0 && header.tag < 0) {
    violation_ = "point-to-point message with tag " + std::to_string(header.tag);
    return true;
  }
  return false;
}

std::shared_ptr<RequestState> Engine::Peer::take_awaiting_sync(std::uint64_t id,
                                                              const char* frame) {
  const auto it = awaiting_sync_.find(id);
  if (it == awaiting_sync_.end()) {
    violation_ = std::string(frame) + " for unknown synchronous message " + std::to_string(id);
    return nullptr;
  }
  // Its frame is fully written (one part left) before the peer can have read it. Completing a
  // send whose frame is still queued would also let the application reuse the buffer that the
  // queue will still encrypt from.
  if (it->second->pending_parts > 1) {
    violation_ = std::string(frame) + " for a message not sent yet";
    return nullptr;
  }
  auto request = std::move(it->second);
  awaiting_sync_.erase(it);
  return request;
}

std::span<std::uint8_t> Engine::Peer::payload_buffer(const FrameHeader& header) {
  if (out_of_place(header)) return {};
  switch (header.type) {
    case FrameType::eager: {
      if (header.length > engine_.config_.eager_limit) {
        violation_ = "eager message of " + std::to_string(header.length) +
                     " bytes exceeds the eager limit";
        return {};
      }
      inflight_admit_ = engine_.admit(*this, header);
      inflight_generation_ = engine_.rules_generation(header.context);
      if (cut_off()) return {};
      if (inflight_admit_ == Admit::deny) {
        // Read the payload off the stream (framing must continue) and drop it.
        using_scratch_ = true;
        inflight_copy_bytes_ = 0;
        scratch_.resize(header.length);
        return scratch_;
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
      return inflight_unexpected_->payload();
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
      const bool ends = header.length == transfer.total - transfer.received;
      if (ends != ((header.flags & flags::kLast) != 0)) {
        const std::string id = std::to_string(header.aux);
        violation_ = ends ? "DATA frame ending transfer " + id + " without the LAST flag"
                          : "LAST flag before the end of transfer " + id;
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
    case FrameType::deny:
    case FrameType::withdrawn:
      if (header.length > (header.type == FrameType::abort       ? kMaxAbortReason
                           : header.type == FrameType::withdrawn ? kMaxWithdrawReason
                                                                 : kMaxDenyReason)) {
        violation_ = std::string("oversized ") + frame_type_name(header.type) + " reason";
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

bool Engine::Peer::forget_withdrawn_send(std::uint64_t id) {
  const auto it = std::find(withdrawn_sends_.begin(), withdrawn_sends_.end(), id);
  if (it == withdrawn_sends_.end()) return id != 0 && id <= withdrawn_sends_evicted_;
  withdrawn_sends_.erase(it);
  return true;
}

std::error_code Engine::Peer::on_frame(const FrameHeader& header,
                                       std::span<std::uint8_t> payload) {
  Engine& e = engine_;
  // A frame with a payload was checked by payload_buffer, and nothing since can change the
  // verdict: a peer failed meanwhile has its channel closed, so its frames are not read on.
  if (header.length == 0 && out_of_place(header)) return errc::frame_unexpected;
  switch (header.type) {
    case FrameType::eager: {
      // Its sender's credit comes back now, unless it stays queued (release_unexpected then).
      const std::uint64_t cost = transport::eager_credit_cost(header.length);
      if (header.length == 0) {
        inflight_admit_ = e.admit(*this, header);
        if (cut_off()) return errc::frame_unexpected;
        if (inflight_admit_ != Admit::deny) begin_eager(header);
      } else if (inflight_admit_ == Admit::pending) {
        // Its communicator did not exist here when the header came, but the payload took more
        // than one read, and registration meanwhile decided only the queued messages, not this
        // one: decide it now, or it would be delivered unchecked.
        inflight_admit_ = e.admit(*this, header);
        if (inflight_admit_ == Admit::deny || cut_off()) inflight_unexpected_.reset();
        if (cut_off()) return errc::frame_unexpected;
      } else if (inflight_admit_ == Admit::allow && !inflight_recv_ &&
                 e.renamed_since(header.context, inflight_generation_)) {
        // Its communicator was renamed while the payload was read: judged again under the
        // new name, as the queued messages were (rename_comm). (A receive posted before the
        // rename takes it all the same.)
        if (const auto verdict =
                e.refused_after_rename(world_rank_, header.context, header.op, header.tag,
                                       header.length, header.sequence)) {
          inflight_admit_ = Admit::deny;
          last_refusal_ = *verdict;  // the DENY's reason
          inflight_unexpected_.reset();
        }
      }
      if (inflight_admit_ == Admit::deny) {
        inflight_admit_ = Admit::allow;
        // A synchronous sender waits for an acknowledgement: tell it instead.
        if ((header.flags & flags::kSynchronous) != 0) {
          e.send_deny(*this, header.aux, true, last_refusal_);
        }
        e.owe_credit(*this, cost);
        return {};
      }
      // Unless it is about to be dropped (queue_unexpected): of a collective this rank left,
      // with no receive to take it. (One that waited before the withdrawal was received.)
      const bool dropping =
          !inflight_recv_ && !e.discarded_.empty() && e.discarded(header.context, header.tag);
      if (inflight_admit_ == Admit::allow && !dropping) {
        e.audit_message("message.receive", world_rank_, header.context, header.op, header.tag,
                        header.length, header.sequence, payload);
      }
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
        message.op = header.op;
        message.msg_id = header.sequence;
        message.undecided = inflight_admit_ == Admit::pending;
        inflight_admit_ = Admit::allow;
        e.account_unexpected(*this, message.budget_cost());
        // A receive posted while this payload was being read must get it: it is the earliest
        // matching message, and a later one must not overtake it.
        e.offer_unexpected(std::move(message));
        return {};
      }
      e.owe_credit(*this, cost);
      return {};
    }
    case FrameType::rts: {
      const std::uint64_t id = header.sequence;
      if (header.aux == 0) {  // empty messages go eagerly: no DATA would ever complete this
        violation_ = "RTS announcing an empty message";
        return errc::frame_unexpected;
      }
      if (header.aux > static_cast<std::uint64_t>(INT64_MAX)) {  // sizes and counts are signed
        violation_ = "RTS announcing " + std::to_string(header.aux) + " bytes";
        return errc::frame_unexpected;
      }
      const Admit admit = e.admit(*this, header);
      if (cut_off()) return errc::frame_unexpected;
      // Of a collective this rank withdrew from: dropped unanswered (a refusal is audited by
      // admit); its sender fails it on our WITHDRAWN, which it crossed, and a DENY would too.
      if (!e.discarded_.empty() && e.discarded(header.context, header.tag)) {
        if (admit != Admit::deny) {
          e.audit_dropped(world_rank_, header.context, header.op, header.tag, header.aux, id);
        }
        return {};
      }
      if (admit == Admit::deny) {
        e.send_deny(*this, id, false, last_refusal_);  // instead of CTS: the sender fails, no hang
        return {};
      }
      if (admit == Admit::allow) {
        if (auto request = e.take_posted(header.context, world_rank_, header.tag)) {
          e.start_receive_rendezvous(*this, id, header.aux, header.tag, request, header.context,
                                     header.op);
          return {};
        }
      }
      Unexpected message;
      message.context = header.context;
      message.source = world_rank_;
      message.tag = header.tag;
      message.rendezvous = true;
      message.bytes = header.aux;
      message.rendezvous_id = id;
      message.op = header.op;
      message.msg_id = id;
      message.undecided = admit == Admit::pending;
      e.account_unexpected(*this, message.budget_cost());
      e.queue_unexpected(std::move(message));
      return {};
    }
    case FrameType::cts: {
      const auto it = send_rendezvous_.find(header.aux);
      if (it == send_rendezvous_.end()) {
        if (forget_withdrawn_send(header.aux)) return {};  // it crossed its WITHDRAWN
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
      if (header.length == 0) {  // never sent: every chunk of a rendezvous carries data
        violation_ = "empty DATA frame for transfer " + std::to_string(header.aux);
        return errc::frame_unexpected;
      }
      const auto it = recv_rendezvous_.find(inflight_data_id_);
      if (it == recv_rendezvous_.end()) return errc::frame_unexpected;
      auto& transfer = it->second;
      if (using_scratch_ && inflight_copy_bytes_ > 0) {
        copy_bytes(static_cast<std::uint8_t*>(transfer.request->buffer) + inflight_copy_offset_,
                    scratch_.data(), inflight_copy_bytes_);
      }
      // A truncated receive's DATA came through scratch, as large as the sender made its
      // frames (up to the frame limit): not kept beyond what eager frames need.
      if (scratch_.capacity() > e.config_.eager_limit) std::vector<std::uint8_t>().swap(scratch_);
      transfer.received += header.length;
      if (transfer.received == transfer.total) {
        e.audit_message(
            "message.receive", world_rank_, transfer.context, transfer.op, transfer.tag,
            transfer.total, it->first,
            {static_cast<const std::uint8_t*>(transfer.request->buffer),
             static_cast<std::size_t>(std::min<std::uint64_t>(transfer.total,
                                                              transfer.request->capacity))});
        auto request = std::move(transfer.request);
        const int tag = transfer.tag;
        const auto total = transfer.total;
        recv_rendezvous_.erase(it);
        e.finish_receive(*request, world_rank_, tag, total);
      }
      return {};
    }
    case FrameType::sync_ack: {
      auto request = take_awaiting_sync(header.aux, "SYNC_ACK");
      if (!request) return errc::frame_unexpected;
      e.part_done(request, {}, world_rank_);
      return {};
    }
    case FrameType::deny: {
      // The peer's policy refused our message, or (UNRECEIVED) the peer is finalizing and will
      // never receive it: fail that request instead of waiting forever.
      const bool unreceived = (header.flags & flags::kUnreceived) != 0;
      if (unreceived && !finalizing_) {
        violation_ = "DENY flagged UNRECEIVED before FINALIZING";
        return errc::frame_unexpected;
      }
      if (unreceived && !payload.empty()) {  // no policy reason: the sender's own text says why
        violation_ = "DENY flagged UNRECEIVED with a reason";
        return errc::frame_unexpected;
      }
      const ErrorClass cls = unreceived ? ErrorClass::peer_failed : ErrorClass::policy;
      const std::string why = unreceived
                                  ? "rank " + std::to_string(world_rank_) +
                                        " has begun to finalize: it will not receive this message"
                                  : "rank " + std::to_string(world_rank_) +
                                        " refused the message by policy: " + peer_text(payload);
      if ((header.flags & flags::kSynchronous) != 0) {
        auto request = take_awaiting_sync(header.aux, "DENY");
        if (!request) return errc::frame_unexpected;
        e.complete(*request, cls, why);
        return {};
      }
      const auto it = send_rendezvous_.find(header.aux);
      if (it == send_rendezvous_.end()) {
        if (forget_withdrawn_send(header.aux)) return {};  // it crossed its WITHDRAWN
        violation_ = "DENY for unknown transfer " + std::to_string(header.aux);
        return errc::frame_unexpected;
      }
      auto request = std::move(it->second.request);
      send_rendezvous_.erase(it);
      e.complete(*request, cls, why);
      return {};
    }
    case FrameType::withdrawn: {
      // The peer takes no further part in a collective (see on_withdrawn).
      if ((header.context & 1u) == 0) {
        violation_ = "WITHDRAWN outside a collective context";
        return errc::frame_unexpected;
      }
      // aux: the error class (a failure, not "pending") and the collective's sequence number.
      const std::uint64_t cls = header.aux & 0xffffffffu;
      if (cls == 0 || cls > static_cast<std::uint64_t>(ErrorClass::config) ||
          cls == static_cast<std::uint64_t>(ErrorClass::pending)) {
        violation_ = "WITHDRAWN with error class " + std::to_string(cls);
        return errc::frame_unexpected;
      }
      // It names a collective, not a message: no flags, no tag.
      if (header.flags != 0 || header.tag != 0) {
        violation_ = "WITHDRAWN with flags " + std::to_string(header.flags) + " and tag " +
                     std::to_string(header.tag);
        return errc::frame_unexpected;
      }
      // A rank leaves a collective once: a second WITHDRAWN would only repeat its effect (and
      // its audit record).
      const auto sequence = static_cast<std::uint32_t>(header.aux >> 32);
      if (std::any_of(e.withdrawn_.begin(), e.withdrawn_.end(), [&](const Withdrawn& w) {
            return w.source == world_rank_ && w.context == header.context && w.sequence == sequence;
          })) {
        violation_ = "WITHDRAWN twice from collective " + std::to_string(sequence);
        return errc::frame_unexpected;
      }
      e.on_withdrawn(world_rank_, header.context, header.op,
                     static_cast<std::uint32_t>(header.aux >> 32), static_cast<ErrorClass>(cls),
                     peer_text(payload));
      return {};
    }
    case FrameType::finalizing:
      // It names nothing: no flags, tag, context, operation or aux (its payload was refused).
      if (header.flags != 0 || header.tag != 0 || header.context != 0 || header.op != 0 ||
          header.aux != 0) {
        violation_ = "FINALIZING with fields set";
        return errc::frame_unexpected;
      }
      e.on_peer_finalizing(*this);
      return {};
    case FrameType::goodbye:
      said_goodbye_ = true;
      return {};
    case FrameType::credit:
      if (header.aux == 0 || header.aux > credit_lent_) {
        violation_ = "CREDIT returning " + std::to_string(header.aux) + " bytes of " +
                     std::to_string(credit_lent_) + " lent";
        return errc::frame_unexpected;
      }
      credit_lent_ -= header.aux;
      return {};
    case FrameType::abort:
      e.abort_job("rank " + std::to_string(world_rank_) + " aborted: " + peer_text(payload));
      return {};
    case FrameType::hello:
    case FrameType::control:
      violation_ = std::string(frame_type_name(header.type)) + " frame after start-up";
      return errc::frame_unexpected;
  }
  return errc::frame_unknown_type;
}

}  // namespace sempi::detail
