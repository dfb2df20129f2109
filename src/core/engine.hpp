#pragma once
// The progress engine of one rank: owns the channels to every peer, matches incoming messages
// against posted receives with MPI semantics, runs the eager and rendezvous protocols, and
// turns channel failures and job aborts into request errors.
//
// Threading model
//  * `mu_` protects all state (channels, queues, requests). Critical sections are short: no
//    blocking system call runs under it except non-blocking TLS reads and writes.
//  * Progress (poll + reading + writing) is done by whichever thread holds `progress_token_`.
//    A thread waiting on a request takes the token itself and polls the sockets, spinning
//    briefly before it blocks in poll(): no thread hop between the socket and the waiter.
//    While spinning on a request that names its peer, the waiter reads that peer's channel
//    directly (a read that finds data delivers it at once; poll() first would add a system
//    call to every message's latency) and polls everything else every few rounds.
//  * Sends are written directly by the calling thread under `mu_`; only what the socket cannot
//    take at once is left for the progress holder (woken through an eventfd).
//  * A background thread progresses while the application computes (handshake-free since the
//    mesh is wired at start-up; it keeps rendezvous moving and notices failed peers). It stays
//    away while application threads are active, so it never costs the hot path a hop.
//
// Every blocking wait has a way out: a failed channel fails the operations that depend on its
// peer, a job abort (from the launcher, or the launcher's death) fails all of them, and a
// rank whose part of a collective failed withdraws from it (withdraw), which fails its
// peers' transfers with it in that collective.
//
// Eager credit (flow control)
//  * A receiver holds at most its unexpected budget (HELLO's max_unexpected_bytes) of one
//    peer's unmatched messages; past it, it stops reading that peer. A frame behind the
//    unmatched ones (a message the receiver waits for, a CTS, a SYNC_ACK) would then never
//    be read, and a correct program would stall. So a sender sends eagerly only within credit:
//    half the receiver's budget, counted as the protocol fixes it (transport::
//    eager_credit_cost, at least what the receiver holds for the message). Past it, messages
//    go by rendezvous, whose RTS holds only an entry at the receiver; the other half of the
//    budget is for those. Empty messages always go eagerly (an RTS announces at least one
//    byte), overdrawing the credit if need be.
//  * The receiver gives credit back (CREDIT frames, in batches of an eighth of its budget) for
//    every EAGER frame once it no longer holds it: matched on arrival, refused, or received
//    from the unexpected queue. A CREDIT for more than is lent is a protocol violation.
//  * Backpressure stays, against peers that ignore credit; a correct program now meets it only
//    with more than ~half the budget / 256 unmatched rendezvous requests or empty messages
//    from one peer. A program relying on standard sends being buffered (unsafe in MPI terms)
//    gets up to half the budget of it per peer.
//  * While the program waits or polls in the library (any wait, test or probe), a paused peer
//    is read on, up to twice the budget (stretch_paused): what it waits for may be behind the
//    unmatched messages, and only reading reaches it. Past twice the budget the peer pauses
//    until the program has received half of them, with a warning naming
//    SEMPI_MAX_UNEXPECTED_BYTES (a silent stall was all a program got before). The background
//    thread and finalize keep to the budget itself.
//
// Policy (src/policy) and audit (src/audit) hooks
//  * Every communicator is registered (register_comm) with its rules precompiled for this rank
//    (policy::CommDecisions, in comms_, keyed by context / 2). The hot-path check is a hash
//    lookup: no JSON, no string compare, no allocation.
//  * Sender (isend): checks first, for an early, clear ErrorClass::policy error.
//  * Receiver (Peer::payload_buffer / on_frame): authoritative. Every EAGER and RTS header is
//    checked before its payload is accepted. A denied EAGER payload is read into scratch and
//    dropped (a synchronous one is answered with DENY); a denied RTS gets DENY instead of CTS,
//    so the sender's request fails with ErrorClass::policy instead of hanging. With
//    "on_violation": "abort" the receiver also asks the launcher to abort the job.
//  * A frame for a context this rank has not created yet (a split still running here) is kept
//    as an unexpected message marked undecided (it counts against the peer's unexpected budget)
//    and decided when the communicator is registered, before the application can see it.
//    Frames for a freed communicator are denied, in audit mode too.
//  * A receive or blocking probe no message could satisfy under the rules fails at once
//    (policy error, audited as a "request" denial) instead of waiting for ever; a nonblocking
//    probe finds nothing.
//  * A rename (set_name) takes effect at once: the rules are recompiled for the new name, after
//    checking the communicator's members against that name's rule, as at creation.
//  * Audit: enforced denials always (dry-run ones up to kAuditedDryRunDenials per kind),
//    message records per the policy's level. A message record is only
//    captured on the message path (a copy of its fields); a waiting rank renders captured
//    records (JSON, hash chain) while it spins with nothing else to do, and the background
//    thread renders what is left every few milliseconds (see audit/audit_log.hpp).

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/collective_kind.hpp"
#include "core/comm_state.hpp"
#include "core/payload_pool.hpp"
#include "core/request_state.hpp"
#include "audit/audit_log.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "policy/policy.hpp"
#include "transport/channel.hpp"

namespace sempi::detail {

struct EngineConfig {
  int world_rank = 0;
  int world_size = 1;
  /// Messages up to this size are sent eagerly; larger ones by rendezvous.
  std::size_t eager_limit = 64 * 1024;
  /// How long a waiter polls without blocking before it sleeps in poll().
  std::chrono::microseconds spin{100};
  /// Give the core away between spin rounds: when this host runs more ranks than it has
  /// cores, the peer a spinner waits for may need this very core.
  bool yield_while_spinning = false;
  /// The job's ranks outnumber the CPUs of a host they run on (the same on every rank, from the
  /// launcher): collectives then prefer the algorithms that move the fewest bytes in all.
  bool job_oversubscribed = false;
  /// Largest DATA frame of a rendezvous transfer.
  std::size_t rendezvous_chunk = 4u << 20;
  /// The job's policy (null: allow everything, unaudited - only for engines built by tests).
  std::shared_ptr<const policy::Policy> policy;
  /// This rank's audit log (null: not audited, e.g. a singleton).
  std::shared_ptr<audit::AuditLog> audit;
};

/// Testing hook (internal header only): simulates a compromised sender that skips its own
/// policy checks, so tests can prove that the receiver still refuses what the policy denies.
/// Any code in the rank's process could do as much (it owns that process); this does not weaken
/// the receiver, which is the point of the test.
void simulate_compromised_sender(bool skip_sender_checks) noexcept;

/// A message taken out of matching by Engine::improbe / mprobe; defined in engine.cpp.
struct MatchedMessage;

class Engine {
 public:
  /// A rank whose messages the policy has refused this many times is treated as hostile and
  /// cut off: each refusal costs an audit record and possibly a DENY reply, so without a bound
  /// a compromised rank could fill the receiver's memory and disk. An honest program stops at
  /// its first refusal (its send fails).
  static constexpr std::uint32_t kRefusalsBeforeCutoff = 1000;
  /// Records of one peer's collective departures written at most (collective.withdrawn, and
  /// message.drop for what it sent): written at every message audit level, they would
  /// otherwise let a peer turn a stream of small frames into audit records without bound.
  /// An honest peer writes a few per failed collective. Past the limit one record says so.
  static constexpr std::uint32_t kAuditedDeparturesPerPeer = 4096;
  /// Dry-run denials (policy "mode": "audit") written at most per peer, communicator, reason
  /// and direction: such messages are delivered, so the refusal cut-off never ends a stream of
  /// them. Past the limit one audit.limit record says so, and finalize counts the rest.
  static constexpr std::uint64_t kAuditedDryRunDenials = 100;

  /// `channels[r]` is the channel to world rank r (null for this rank). `bootstrap_fd` is the
  /// launcher connection (or -1 for a singleton), owned by the caller and open for the engine's
  /// lifetime. Starts the background progress thread.
  /// `bootstrap_reader` holds what was read from `bootstrap_fd` before (messages that came with
  /// the welcome); the engine handles them first.
  Engine(EngineConfig config, std::vector<std::unique_ptr<transport::Channel>> channels,
         int bootstrap_fd, launch::BootstrapReader bootstrap_reader = {});
  ~Engine();
  /// The program is leaving through exit() without finalizing (core/runtime.cpp): stops the
  /// background thread and closes the audit log; the rest stays for threads still in calls.
  void stop_at_exit() noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] int world_rank() const noexcept { return config_.world_rank; }
  [[nodiscard]] int world_size() const noexcept { return config_.world_size; }
  [[nodiscard]] bool job_oversubscribed() const noexcept { return config_.job_oversubscribed; }

  // Operations. Arguments are validated by the caller (Communicator); these never throw for
  // conditions a peer causes: failures complete the request with an error instead.
  /// `op` is the operation kind carried in the frame (OpKind::p2p for point-to-point); any
  /// other kind travels on the communicator's collective context.
  /// `sequence`: for a collective schedule's send, the schedule's sequence number (what a
  /// WITHDRAWN names, see withdraw).
  std::shared_ptr<RequestState> isend(const CommState& comm, OpKind op, const void* buf,
                                      std::size_t bytes, int dest, int tag, bool synchronous,
                                      std::uint32_t sequence = 0);
  /// `sequence`: for a collective schedule's receive, the schedule's sequence number (what a
  /// WITHDRAWN names, see withdraw).
  std::shared_ptr<RequestState> irecv(const std::shared_ptr<const CommState>& comm, bool collective,
                                      void* buf, std::size_t capacity, int source, int tag,
                                      std::uint32_t sequence = 0);
  /// Status of the first matching unexpected message, after one round of progress.
  std::optional<Status> iprobe(const CommState& comm, bool collective, int source, int tag);
  /// Blocks until a message matches (probe).
  Status probe(const CommState& comm, bool collective, int source, int tag);

  // Matched probe (MPI_Mprobe, MPI 3.1 section 3.8.2): the message found is taken out of
  // matching, so no other receive (another thread's, a wildcard one) can match it; only
  // receive_matched() delivers it. Point-to-point only.
  struct Probed {
    Status status;  // error set (and message null) if the source failed or the job aborted
    std::shared_ptr<MatchedMessage> message;
  };
  /// The first matching unexpected message, taken, after one round of progress; else nullopt.
  std::optional<Probed> improbe(const CommState& comm, int source, int tag);
  /// Blocks until a message matches; takes it.
  Probed mprobe(const CommState& comm, int source, int tag);
  /// Receives a taken message into `buf` (a rendezvous message's data is asked for now). Each
  /// message is received at most once: a second call fails the request with ErrorClass::request.
  /// A matched message dropped without being received goes back into matching where it
  /// arrived, so its sender's budget, acknowledgement or data transfer are not lost with it.
  /// Does nothing once it was received.
  void restore_matched(MatchedMessage& message);
  std::shared_ptr<RequestState> receive_matched(MatchedMessage& message,
                                                const std::shared_ptr<const CommState>& comm,
                                                void* buf, std::size_t capacity);
  bool cancel(RequestState& request);
  /// The application dropped its last copy of this unfinished point-to-point request
  /// (sempi::Request): returns once nothing of it uses the application's buffer. An unmatched
  /// receive is cancelled and one whose data is arriving is waited for; a send's remaining
  /// frames read a copy of its data from now on (it completes in the background).
  void abandon(RequestState& request) noexcept;

  /// Blocks until the request is done (never throws; inspect the state afterwards).
  void wait(const RequestState& request);
  /// Blocks until any of the requests is done; returns its index.
  std::size_t wait_any(const std::vector<const RequestState*>& requests);
  /// One round of non-blocking progress; true if the request is done.
  bool test(const RequestState& request);

  /// Registers a started nonblocking collective (its state holds the driver): until it
  /// completes, every wait and test of the application's threads on this engine advances it,
  /// whatever they wait for (see RequestDriver). Held weakly: a dropped request is forgotten.
  void add_in_flight(const std::shared_ptr<RequestState>& collective);

  /// Finalize: keeps progressing until every queued byte is written and the launcher reports
  /// that every rank reached finalize; then says goodbye on every channel.
  void finalize(std::chrono::steady_clock::time_point deadline);
  /// Job abort requested by this rank (MPI_Abort): tells the launcher.
  void request_abort(int code, const std::string& reason);
  /// Waits until the launcher's abort notice arrived (the background thread reads it), or
  /// `deadline`; true if it did.
  bool await_abort_notice(std::chrono::steady_clock::time_point deadline);

  /// A context id for a new communicator, chosen by this rank alone and never chosen by any
  /// other rank or call: rank r allocates from its own share of the id space (ids 2k with
  /// k = 2 + n * world_size + r for its n-th allocation; 0..3 are world and self). So
  /// communicators created concurrently in several threads never share an id, without any
  /// agreement round. Throws sempi::Error when this rank's share is used up.
  std::uint32_t allocate_context();
  /// For a communicator being created with `context`, handed out by world rank `root_world`:
  /// true if the id is from that rank's share and was not handed out before (a hostile root
  /// could otherwise make two communicators share one context and cross their traffic).
  bool adopt_context(std::uint32_t context, int root_world);

  /// Non-empty if the job was aborted; operations then fail with this reason.
  [[nodiscard]] std::string abort_reason() const;

  // --- policy and audit hooks ------------------------------------------------------------
  [[nodiscard]] const policy::Policy* policy() const noexcept { return config_.policy.get(); }
  [[nodiscard]] audit::AuditLog* audit() const noexcept { return config_.audit.get(); }
  /// Registers a communicator (created here, or predefined) for policy decisions and decides
  /// the messages that arrived for it before it existed. Audits "comm.create".
  void register_comm(const CommState& comm);
  /// Names a communicator `name` and recompiles its rules for that name. The members must fit
  /// the name's rule, as at creation: otherwise (enforcing) the name stays and this throws
  /// sempi::Error(policy). Audits "comm.rename", or "comm.refuse".
  void rename_comm(const CommState& comm, const std::string& name);
  /// Where a communicator's deleter reports that its last handle is gone (any thread; the
  /// engine may already be destroyed, hence the weak handle). Audited as "comm.free".
  struct FreedContexts {
    std::mutex mu;
    std::vector<std::uint32_t> contexts;
    std::atomic<bool> any{false};
  };
  [[nodiscard]] std::weak_ptr<FreedContexts> freed_contexts() const { return freed_; }
  /// For collective algorithms, before they post anything: the reason if the policy denies
  /// collective `op` on `comm` for every member alike (communicator not named, or the
  /// collective not listed), else nullopt. Every member gets the same answer, so all can fail
  /// together: a member whose first round only receives would otherwise wait for peers whose
  /// sends were refused. Audited; nullopt in dry-run mode (the denial is logged only).
  std::optional<std::string> collective_denied(const CommState& comm, OpKind op);
  /// A collective on `comm` takes its sequence number: the withdrawals and discards of
  /// collectives on `comm` that far behind go (see forget_old_withdrawals). Otherwise only a
  /// transfer would prune them, and collectives that post none (zero counts) could run 65,536
  /// calls on until a discard's 16 tag bits matched a live collective's messages.
  void collective_starting(const CommState& comm);

  /// This rank takes no further part in collective number `sequence` on `comm`: its part
  /// failed with `cls`, or its call was refused before the part began (coll/abandon.hpp).
  /// Each of `peers` (communicator ranks) gets a WITHDRAWN frame. What this rank sent them
  /// before still arrives (it precedes the frame); but their receives from this rank in that
  /// collective that nothing has matched, and their sends to it that wait for its CTS, fail
  /// at once with `cls` and `reason`, as do those they post later. Their parts then fail in
  /// turn and withdraw, so the failure reaches every member that depends on it instead of
  /// leaving it to wait for the job's timeout. `reason` names where the failure began (kept
  /// under kMaxWithdrawReason). The frame's aux carries the class (low 32 bits) and the
  /// sequence number (high 32 bits): a tag holds only its low 16 bits, and a withdrawal must
  /// not match a collective 65,536 calls later.
  /// What peers sent this rank for that collective can never be received: those messages
  /// waiting as unexpected, and those that arrive later (see discarded_), are dropped, each
  /// giving its sender's credit back. Otherwise they would hold credit and memory, and one
  /// could match a collective 65,536 calls later. A dropped RTS gets no answer (no CTS, no
  /// DENY): its sender's send fails on this rank's WITHDRAWN. Both happen under one lock, so
  /// nothing of the collective is admitted in between. This rank's own rendezvous sends to
  /// them in that collective that have no CTS yet are cancelled (failed with `cls`): they
  /// have read nothing, and no DATA may follow the frame (see on_withdrawn).
  void withdraw(const CommState& comm, OpKind op, std::uint32_t sequence,
                std::span<const int> peers, ErrorClass cls, std::string_view reason);
  static constexpr std::size_t kMaxWithdrawReason = 512;
  /// Withdrawals from one peer kept for transfers posted later (see withdrawn_).
  static constexpr std::size_t kMaxWithdrawnPerPeer = 8;

 private:
  friend struct MatchedMessage;  // holds an Unexpected
  struct Unexpected {
    std::uint32_t context = 0;
    int source = 0;  // world rank
    int tag = 0;
    bool rendezvous = false;
    std::uint64_t bytes = 0;  // message size
    Payload data;  // eager payload, `bytes` long (from the engine's PayloadPool)
    std::uint64_t rendezvous_id = 0;
    bool synchronous = false;
    std::uint64_t sync_id = 0;
    std::uint16_t op = 0;
    std::uint64_t msg_id = 0;  // channel sequence of the EAGER/RTS frame (audit)
    bool undecided = false;    // arrived before its communicator existed here: see above
    policy::Verdict refusal = policy::Verdict::allow;  // why it was refused, when it was
    // An RTS whose sender then withdrew from its collective, cancelling the send (success:
    // not withdrawn). Kept as a tombstone: a receive that matches it fails with the sender's
    // class and reason, even after the withdrawal itself is forgotten (withdrawn_).
    ErrorClass withdrawn = ErrorClass::success;
    std::shared_ptr<const std::string> withdrawn_reason;  // one copy for all its tombstones
    std::uint64_t arrival = 0;  // order of arrival (queue_unexpected); 0 until first queued

    /// What this entry holds against its peer's unexpected budget: its payload plus a fixed
    /// cost for the entry itself, so that an endless stream of empty messages (or of RTS,
    /// which hold no payload here) still reaches the limit.
    static constexpr std::uint64_t kEntryCost = 256;
    [[nodiscard]] std::span<std::uint8_t> payload() const {
      return {data.get(), rendezvous ? 0 : static_cast<std::size_t>(bytes)};
    }
    [[nodiscard]] std::int64_t budget_cost() const {
      return static_cast<std::int64_t>(
          (rendezvous ? 0 : PayloadPool::capacity_for(static_cast<std::size_t>(bytes))) +
          kEntryCost);
    }
  };
  struct RecvRendezvous {
    std::shared_ptr<RequestState> request;
    std::uint64_t total = 0;
    std::uint64_t received = 0;
    int tag = 0;
    std::uint32_t context = 0;
    std::uint16_t op = 0;
  };
  // One registered communicator (index: context / 2).
  struct CommEntry {
    std::shared_ptr<const policy::CommDecisions> decisions;  // null: not registered
    std::string name;          // the name `decisions` was compiled for
    std::vector<int> members;  // world ranks
    bool freed = false;
    std::uint64_t generation = 0;  // rules_generation_ when `decisions` were compiled
  };
  enum class Admit { allow, deny, pending };
  struct SendRendezvous {
    std::shared_ptr<RequestState> request;
    const std::uint8_t* data = nullptr;
    std::uint64_t bytes = 0;
    std::uint32_t context = 0;
    int tag = 0;
    std::uint64_t rendezvous_id = 0;
    std::uint16_t op = 0;
    std::uint32_t sequence = 0;  // a collective schedule's send: its sequence number
  };

  class Peer final : public transport::FrameSink {
   public:
    Peer(Engine& engine, int world_rank, std::unique_ptr<transport::Channel> channel)
        : engine_(engine), world_rank_(world_rank), channel_(std::move(channel)) {}
    std::span<std::uint8_t> payload_buffer(const transport::FrameHeader& header) override;
    std::error_code on_frame(const transport::FrameHeader& header,
                             std::span<std::uint8_t> payload) override;
    // Not while paused: the unexpected budget is then overshot by one frame at most.
    [[nodiscard]] bool wants_more() const override { return !paused_; }
    // True if this frame may not come from this peer now (violation_ says why): a forged
    // source, anything but DENY and ABORT after its GOODBYE, a negative point-to-point tag;
    // also (with no violation) anything once the peer failed during this read round.
    bool out_of_place(const transport::FrameHeader& header);
    // The synchronous send that SYNC_ACK or DENY (`frame`) answers, taken out of
    // awaiting_sync_; null (violation_ set) if there is none or its frame is not sent yet.
    std::shared_ptr<RequestState> take_awaiting_sync(std::uint64_t id, const char* frame);
    // Matches an arriving eager message against posted receives, or prepares an unexpected one.
    void begin_eager(const transport::FrameHeader& header);

    Engine& engine_;
    int world_rank_;
    std::unique_ptr<transport::Channel> channel_;
    bool failed_ = false;
    bool said_goodbye_ = false;
    bool finalizing_ = false;  // it sent FINALIZING: it starts no new message (no EAGER, RTS)
    std::string failure_;
    std::uint64_t unexpected_bytes_ = 0;
    // The unexpected budget this rank holds for it (SEMPI_MAX_UNEXPECTED_BYTES); channel_ set.
    [[nodiscard]] std::uint64_t budget() const {
      return channel_->local_limits().max_unexpected_bytes;
    }
    bool paused_ = false;  // backpressure: not reading while over the unexpected budget
    bool stretched_ = false;         // read past the budget for a waiter, up to twice it
    bool warned_stalled_ = false;    // paused at twice the budget: said (once a stall)
    std::uint64_t credit_lent_ = 0;  // eager cost sent to it, not yet given back (CREDIT)
    std::uint64_t credit_owed_ = 0;  // eager cost of its messages we no longer hold, unreturned
    std::string violation_;
    std::uint32_t refusals_ = 0;  // its messages the policy refused
    std::uint32_t audited_departures_ = 0;                   // see kAuditedDeparturesPerPeer
    policy::Verdict last_refusal_ = policy::Verdict::allow;  // why its latest frame was refused
    // A violation fails the channel as soon as the frame handler returns.
    [[nodiscard]] bool cut_off() const { return !violation_.empty(); }
    [[nodiscard]] std::string violation_reason() const {
      return "protocol violation: " + violation_;
    }
    // The frame whose payload is being read.
    std::shared_ptr<RequestState> inflight_recv_;
    std::optional<Unexpected> inflight_unexpected_;
    std::uint64_t inflight_data_id_ = 0;
    std::size_t inflight_copy_offset_ = 0;  // where scratch bytes go (truncated receives)
    std::size_t inflight_copy_bytes_ = 0;
    bool using_scratch_ = false;
    std::vector<std::uint8_t> scratch_;
    std::unordered_map<std::uint64_t, RecvRendezvous> recv_rendezvous_;
    std::unordered_map<std::uint64_t, SendRendezvous> send_rendezvous_;
    // Rendezvous sends to this peer ended by a withdrawal, its (Engine::on_withdrawn) or this
    // rank's (Engine::withdraw, which cancels those without a CTS), newest last, at most
    // kMaxWithdrawnSends: a DENY or CTS of the peer's that crossed the WITHDRAWN may still
    // come for one, and is no violation. Ids only grow (channel sequence numbers), so one at
    // or below the newest id pushed out is taken for such a late answer too.
    std::deque<std::uint64_t> withdrawn_sends_;
    std::uint64_t withdrawn_sends_evicted_ = 0;  // the newest id pushed out (0: none)
    static constexpr std::size_t kMaxWithdrawnSends = 64;
    // Takes `id` out of withdrawn_sends_: true if it was there, or is that old.
    bool forget_withdrawn_send(std::uint64_t id);
    std::unordered_map<std::uint64_t, std::shared_ptr<RequestState>> awaiting_sync_;
    Admit inflight_admit_ = Admit::allow;  // policy decision for the frame being read
    // The generation of the rules that decision was made under (CommEntry::generation; 0:
    // none): a rename while the payload is read makes the end of the frame decide again.
    std::uint64_t inflight_generation_ = 0;
  };

  // All private members below require mu_ held unless stated otherwise.
  std::shared_ptr<RequestState> new_failed_request(RequestKind kind, ErrorClass cls,
                                                   const std::string& message);
  void complete(RequestState& request, ErrorClass cls = ErrorClass::success,
                const std::string& message = {});
  void part_done(const std::shared_ptr<RequestState>& request, std::error_code ec, int peer);
  bool matches(const RequestState& request, std::uint32_t context, int source, int tag) const;
  std::shared_ptr<RequestState> take_posted(std::uint32_t context, int source, int tag);
  /// Queues an unmatched message in arrival order (a new one is numbered, at the end) and
  /// wakes waiters.
  void queue_unexpected(Unexpected&& message);
  /// Gives a message to the earliest matching posted receive, or queues it.
  void offer_unexpected(Unexpected&& message);
  void deliver_unexpected_to(Unexpected& message, const std::shared_ptr<RequestState>& request);
  void start_receive_rendezvous(Peer& peer, std::uint64_t id, std::uint64_t total, int tag,
                                const std::shared_ptr<RequestState>& request,
                                std::uint32_t context, std::uint16_t op);
  static Status status_of(const CommState& comm, const Unexpected& message);
  // `blocking` (probe): refused if the policy never lets a message match (see refused_receive).
  std::optional<Status> find_unexpected(const CommState& comm, bool collective, int source, int tag,
                                        bool blocking);
  // Probing (iprobe, improbe): `find` (an optional; called with mu_ held) now, and again after
  // one round of progress (reading paused peers on, as a waiter does).
  template <class Find>
  auto find_after_progress(Find&& find) -> decltype(find());
  // Blocking probing (probe, mprobe): `find` until it matches; returns what it found.
  template <class Find>
  auto wait_for_match(Find&& find);
  std::optional<Probed> take_unexpected(const CommState& comm, int source, int tag, bool blocking);
  std::list<Unexpected>::iterator first_unexpected(std::uint32_t context, int source_world,
                                                   int tag);
  // Why a receive from `source_world` (or ANY_SOURCE) on `comm` can never be satisfied, if it
  // cannot: the job aborted, the source failed (or finalized), or for ANY_SOURCE every other
  // member did. (This rank could still match it with a send to itself; a program waiting on
  // that while all its peers are gone is taken for one waiting in vain.) `blocking` (a probe
  // that would wait): a source that began to finalize counts as gone too; a nonblocking probe
  // just finds nothing from it, as a test of a receive from it does.
  std::optional<Status> unreachable_source(const CommState& comm, int source_world,
                                           bool blocking) const;
  // Why no message could ever match a receive from `source` (a rank of `comm`, or ANY_SOURCE)
  // with `tag` under the policy's rules (in either mode), or nullopt.
  struct NeverMatched {
    policy::Verdict verdict;
    const CommEntry* entry;
    int source_world;
    std::string message;
  };
  std::optional<NeverMatched> never_matched(const CommState& comm, bool collective, int source,
                                            int tag);
  // Enforce mode: never_matched's message, audited for point-to-point (policy.deny, direction
  // "request"); nullopt otherwise.
  std::optional<std::string> refused_receive(const CommState& comm, bool collective, int source,
                                             int tag);
  // Audit mode: a point-to-point receive or blocking probe that enforcement would refuse, as a
  // dry-run "request" record (bounded like the others).
  void audit_dry_run_receive(const CommState& comm, int source, int tag);
  // A blocking probe that nothing could ever match fails at once, as a receive does: throws
  // Error(policy). (A nonblocking one just finds nothing.)
  void throw_if_never_satisfied(const CommState& comm, bool collective, int source, int tag);
  // True if `comm` has members besides this rank and every one of them failed or finalized.
  // With `finalizing_counts`, a member that began to finalize counts as gone too.
  bool every_other_member_gone(const CommState& comm, bool finalizing_counts) const;
  // True if nothing `source_world` sends from now on can match a receive from it: it failed
  // (or began to finalize, with `finalizing_counts`), or for ANY_SOURCE every other member of
  // `comm` did (see every_other_member_gone).
  bool source_gone(const CommState* comm, int source_world, bool finalizing_counts) const;
  // True if no message can match `request` (a posted receive) any more: its source failed or
  // began to finalize, or for ANY_SOURCE every other member did.
  bool nothing_can_match(const RequestState& request) const;
  // Why nothing_can_match(request), for its error.
  std::string unmatchable_reason(const RequestState& request) const;
  // For a posted receive nothing can match any more: a collective's part fails now (true:
  // take it out of posted_); a point-to-point receive is marked (RequestState::unmatchable).
  bool give_up_if_unmatchable(RequestState& request);
  // A peer's FINALIZING: gives up the receives nothing can match now (give_up_if_unmatchable),
  // and blocking probes look again.
  void on_peer_finalizing(Peer& peer);
  // Finalizing, this rank will not receive `message`: if its sender waits on it (an RTS, a
  // synchronous EAGER), tells it so (DENY flagged UNRECEIVED), rather than leave it waiting
  // until every rank reached finalize. True if the message is to leave the queue: an RTS,
  // whose data will never come (audited as dropped here). (A message an mprobe holds is told
  // only if it is put back.)
  bool tell_sender_unreceived(Unexpected& message);
  // A waiter found `request` marked unmatchable: fails it, if it still is (it may have been
  // matched since, by a message its mprobe put back). True if it did.
  bool fail_unmatchable(const RequestState& request);
  void read_peer(Peer& peer);
  // One peer's share of a progress round: reads it if `readable` (and not paused), then
  // writes what is queued for it.
  void service_peer(Peer& peer, bool readable);
  void send_control(Peer& peer, transport::FrameType type, std::uint64_t aux);
  // Queues a control frame for the next progress round, which reads the peer before it
  // writes: a write failing on a peer gone meanwhile would fail it before its last frames
  // were read (and their drops audited).
  void queue_control(Peer& peer, transport::FrameType type, std::uint64_t aux);
  // cancel() with mu_ held.
  bool cancel_locked(RequestState& request);
  void send_rendezvous_data(Peer& peer, SendRendezvous& transfer);
  void finish_receive(RequestState& request, int source_world, int tag, std::uint64_t bytes);
  void flush_peer(Peer& peer);
  // After completing a request outside progress, from an application thread: kicks the token
  // holder out of poll() if it sleeps there (it may be the request's waiter).
  void wake_sleeping_poller() noexcept;
  void fail_peer(Peer& peer, const std::string& reason);
  void abort_job(const std::string& reason);
  void account_unexpected(Peer& peer, std::int64_t delta);
  // An unexpected message leaves the queue: its budget is freed, its credit owed back.
  void release_unexpected(Peer& peer, const Unexpected& message);
  // True (and the credit taken) if an EAGER of `bytes` fits the peer's credit now.
  bool take_eager_credit(Peer& peer, std::uint64_t bytes);
  // Notes credit to give back to `peer`, and sends it once a batch is due.
  void owe_credit(Peer& peer, std::uint64_t cost);
  void handle_bootstrap_message(const nlohmann::json& message);
  /// Handles every complete message bootstrap_reader_ holds; a malformed one's error.
  std::error_code handle_buffered_bootstrap_messages();
  // Policy and audit (mu_ held).
  const CommEntry& entry_for(const CommState& comm);  // the rules, compiled if missing
  const CommEntry* find_entry(std::uint32_t context) const noexcept;
  // The generation of the rules of `context`'s communicator (CommEntry; 0: not registered).
  std::uint64_t rules_generation(std::uint32_t context) const noexcept {
    const CommEntry* entry = find_entry(context);
    return entry != nullptr ? entry->generation : 0;
  }
  // True if the communicator of `context` was compiled again since rules of `generation`.
  // (Entries are never removed: a registered communicator stays registered.)
  bool renamed_since(std::uint32_t context, std::uint64_t generation) const noexcept {
    return generation != 0 && rules_generation(context) != generation;
  }
  CommEntry& compile_entry(const CommState& comm, const std::string& name);
  Admit admit(Peer& peer, const transport::FrameHeader& header);
  // Audits a denial and says whether it is enforced (in audit mode too for the verdicts MPI's
  // own semantics force: not a member, a forged operation kind, a freed communicator).
  Admit on_denial(policy::Verdict verdict, const CommEntry* entry, int peer, std::uint32_t context,
                  std::uint16_t op, int tag, std::uint64_t bytes, std::uint64_t msg,
                  const char* direction);
  void send_deny(Peer& peer, std::uint64_t id, bool synchronous, policy::Verdict reason);
  // A peer withdrew from a collective (WITHDRAWN): this rank's transfers with it in that
  // collective fail, those waiting now and those posted later.
  void on_withdrawn(int source_world, std::uint32_t context, std::uint16_t op,
                    std::uint32_t sequence, ErrorClass cls, const std::string& reason);
  // Takes the rendezvous sends to `peer` in collective `sequence` on `context` that wait for
  // its CTS out of send_rendezvous_, remembering their ids (Peer::withdrawn_sends_).
  std::vector<std::shared_ptr<RequestState>> take_sends_awaiting_cts(Peer& peer,
                                                                     std::uint32_t context,
                                                                     std::uint32_t sequence);
  // Fails `request` for a withdrawn message (RequestState::withdrawn).
  void fail_withdrawn(RequestState& request, int source_world, ErrorClass cls,
                      const std::string& reason);
  // Judges the messages queued for a communicator (both its contexts) under its rules now:
  // those that came before it existed here (at registration), or, after a rename, those
  // admitted under its previous name. Refused ones are answered as on arrival.
  enum class Queued { undecided, admitted };
  void judge_queued(std::uint32_t base_context, Queued which);
  // The verdict refusing a message admitted under its communicator's previous name (audited
  // as policy.deny), or nullopt if the current rules admit it.
  std::optional<policy::Verdict> refused_after_rename(const Unexpected& message);
  std::optional<policy::Verdict> refused_after_rename(int source, std::uint32_t context,
                                                      std::uint16_t op, int tag,
                                                      std::uint64_t bytes, std::uint64_t msg);
  // Answers a refused message that had been queued: gives its sender's budget back and sends
  // a DENY if the sender waits; `count`: towards the sender's cut-off.
  void answer_refused(const Unexpected& message, bool count);
  // A policy.deny record.
  void audit_denial(policy::Verdict verdict, const CommEntry* entry, int peer,
                    std::uint32_t context, std::uint16_t op, int tag, std::uint64_t bytes,
                    std::uint64_t msg, const char* direction, bool dry_run);
  // A message record's fields (the communicator's name looked up by context).
  audit::MessageRecord message_record(const char* action, int peer, std::uint32_t context,
                                      std::uint16_t op, int tag, std::uint64_t bytes,
                                      std::uint64_t msg) const;
  void audit_message(const char* action, int peer, std::uint32_t context, std::uint16_t op,
                     int tag, std::uint64_t bytes, std::uint64_t msg,
                     std::span<const std::uint8_t> payload);
  // A message of a collective this rank left, dropped undelivered (message.drop). Audited at
  // every message audit level, like a denial: an auditor must see why it was never received.
  void audit_dropped(int peer, std::uint32_t context, std::uint16_t op, int tag,
                     std::uint64_t bytes, std::uint64_t msg, const char* reason = kDroppedLeftHere);
  void audit_dropped(const Unexpected& message, const char* reason = kDroppedLeftHere);
  static constexpr const char* kDroppedLeftHere = "this rank left the collective";
  static constexpr const char* kDroppedSenderLeft = "the sender left the collective";
  static constexpr const char* kDroppedNeverReceived = "not received before finalize";
  static constexpr const char* kDroppedSenderFinalized =
      "its sender finalized before the message was received";
  static constexpr const char* kDroppedSenderFailed = "its sender failed before its data came";
  static constexpr const char* kDroppedJobAborted = "the job aborted before its data came";
  static constexpr const char* kDroppedCommNeverCreated =
      "its communicator was never created on this rank";
  // At finalize: a message.drop record for each message still queued, never received (see
  // finalize()).
  void audit_unreceived();
  // collective.withdraw / collective.withdrawn: the communicator, operation and sequence
  // number of a collective this rank or `peer` (world rank; -1: this rank) left, and why.
  // True if a departure record of `peer` (world rank) may still be written; counts it, and
  // at kAuditedDeparturesPerPeer writes the record that says no more follow.
  bool departure_audit_allowed(int peer);
  void audit_withdrawal(const char* action, int peer, std::uint32_t context, std::uint16_t op,
                        std::uint32_t sequence, ErrorClass cls, std::string_view reason,
                        std::size_t notified);
  void drain_freed();
  void notify_waiters();
  void kick() noexcept;  // wakes a thread blocked in poll(); any thread, no lock needed

  // Progress: caller holds progress_token_ (not mu_).
  void progress(std::chrono::milliseconds max_block);
  /// One spin round that reads the channel of world rank `peer` directly, without poll();
  /// false (nothing done) if that channel is not usable.
  bool progress_peer(int peer);
  /// Advances every collective in flight that no other thread is driving. Called by the
  /// application's waiting and testing threads with no lock held.
  void drive_in_flight();
  /// A waiter's idle time renders captured audit records (audit/audit_log.hpp); no lock held.
  void render_audit_while_idle(std::size_t max_records);
  /// Waits for done(), driving progress. `peer_hint`: the world rank whose channel will most
  /// likely complete it (-1: unknown); spinning then reads that channel directly.
  /// `stretch`: paused peers are read on (stretch_paused); not at finalize, where nothing
  /// will receive what they sent.
  template <class Done>
  void wait_until(Done&& done, int peer_hint = -1, bool stretch = true);
  /// Sets a peer's backpressure state, keeping stretchable_peers_ in step. Under mu_.
  void set_backpressure(Peer& peer, bool paused, bool stretched);
  /// The program waits or polls: every peer paused at the budget is read on, up to twice it.
  /// No lock held.
  void stretch_paused();
  /// stretch_paused() if some peer is paused at the budget: one relaxed load when none is.
  void stretch_while_waiting() {
    if (stretchable_peers_.load(std::memory_order_relaxed) != 0) stretch_paused();
  }
  void background_loop();
  // Fails every peer whose host has left sent data unacknowledged too long (socket.hpp).
  void fail_unacknowledging_peers();

  EngineConfig config_;
  mutable std::mutex mu_;
  std::mutex progress_token_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Peer>> peers_;  // index: world rank; null for self
  std::vector<std::unique_ptr<transport::Channel>> closed_channels_;  // destroyed after progress
  std::deque<std::shared_ptr<RequestState>> posted_;
  std::list<Unexpected> unexpected_;
  // Collectives peers withdrew from (on_withdrawn), for the transfers with them this rank
  // posts later (several may be, so a claimed one stays). Past kMaxWithdrawnPerPeer from one
  // peer its oldest goes (a transfer it covered would then wait, as before WITHDRAWN), so one
  // peer cannot push out the others' withdrawals; see also forget_old_withdrawals.
  struct Withdrawn {
    std::uint32_t context = 0;
    int source = 0;  // world rank
    std::uint32_t sequence = 0;
    ErrorClass cls = ErrorClass::other;
    std::string reason;
  };
  std::deque<Withdrawn> withdrawn_;
  // Dry-run denials seen, by (peer, the communicator's point-to-point context, verdict,
  // received): see kAuditedDryRunDenials. Both audit.limit records name that context. Bounded by
  // the communicators that exist here.
  // Peer, context, verdict and direction ("send", "receive" or "request": static strings).
  using DryRunKey = std::tuple<int, std::uint32_t, policy::Verdict, std::string_view>;
  std::map<DryRunKey, std::uint64_t> dry_run_denials_;
  // A dry-run policy.deny record, unless its kind is past kAuditedDryRunDenials.
  void audit_dry_run_denial(policy::Verdict verdict, const CommEntry* entry, int peer,
                            std::uint32_t context, std::uint16_t op, int tag, std::uint64_t bytes,
                            std::uint64_t msg, const char* direction);
  // Counts a dry-run denial; false once its key is past kAuditedDryRunDenials (the first time,
  // after writing the audit.limit record).
  bool dry_run_audit_allowed(int peer, std::uint32_t context, policy::Verdict verdict,
                             const char* direction);
  // The fields both audit.limit records of a dry-run kind carry.
  nlohmann::ordered_json dry_run_limit_fields(const DryRunKey& key) const;
  // At finalize: one audit.limit record per key past the limit, with the number not written.
  void audit_dry_run_totals();
  // Collectives this rank withdrew from (withdraw): at most kMaxDiscarded (past it the
  // oldest goes, and messages for it stay queued, as before), and each only until this rank
  // starts a collective or a transfer kDiscardWindow collectives further
  // (forget_old_withdrawals, collective_starting): its
  // messages are told apart by 16 bits of the number, and a peer may still be sending one
  // while this rank runs ahead (a bcast root, say).
  struct Discarded {
    std::uint32_t context = 0;
    std::uint32_t sequence = 0;
  };
  std::deque<Discarded> discarded_;
  static constexpr std::size_t kMaxDiscarded = 16;
  static constexpr std::int32_t kDiscardWindow = 1 << 15;
  // Drops the withdrawals for collectives on `context` more than kWithdrawnWindow older than
  // `sequence`, one this rank is starting (or starting a transfer of), and the discards more than
  // kDiscardWindow older: a collective that old is over, so nothing can claim them, and every
  // collective transfer searches withdrawn_. (A nonblocking collective still running that far
  // behind would then wait for its timeout, as before WITHDRAWN.)
  void forget_old_withdrawals(std::uint32_t context, std::uint32_t sequence);
  // Records the collective this rank withdraws from and drops what peers sent for it (see
  // withdraw, which calls it).
  void discard_collective(const CommState& comm, std::uint32_t sequence);
  // A message of a collective this rank withdrew from (withdraw)?
  [[nodiscard]] bool discarded(std::uint32_t context, int tag) const;
  static constexpr std::int32_t kWithdrawnWindow = 64;
  // Fails `request`, a transfer with `peer` (world rank), if that peer withdrew from its
  // collective (on_withdrawn), pruning old withdrawals on the way; true if it did. Only
  // collective schedules' transfers (internal_tag::is_schedule_tag) look: the runtime's own
  // have no sequence number.
  bool failed_by_withdrawal(RequestState& request, std::uint32_t context, int peer, int tag,
                            std::uint32_t sequence);
  std::shared_ptr<PayloadPool> payloads_ = PayloadPool::create();  // for Unexpected::data
  std::unordered_map<std::uint64_t, std::shared_ptr<RequestState>> self_sync_;
  std::uint64_t next_sync_id_ = 1;
  // See adopt_context. One entry per communicator this rank ever joined (ids are never
  // reused, so none can leave): a few dozen bytes each.
  std::unordered_set<std::uint32_t> contexts_adopted_;
  std::atomic<std::uint64_t> unexpected_generation_{0};  // bumped on every unexpected arrival
  int failed_peers_ = 0;  // peers failed or finalized (mu_): most jobs never look at members
  int finalizing_peers_ = 0;    // peers that sent FINALIZING (mu_)
  std::uint64_t arrivals_ = 0;  // numbers unexpected messages in arrival order (under mu_)
  // Bumped (under mu_) by every progress step that moved data on a channel: see wait_until.
  std::atomic<std::uint64_t> traffic_{0};
  std::atomic<std::uint32_t> contexts_allocated_{0};
  std::unordered_map<std::uint32_t, CommEntry> comms_;  // by context / 2; stable references
  std::uint64_t rules_generation_ = 0;                  // counts compile_entry calls
  mutable const CommEntry* last_entry_ = nullptr;  // find_entry's last result, and its key
  mutable std::uint32_t last_entry_key_ = 0;
  std::shared_ptr<FreedContexts> freed_ = std::make_shared<FreedContexts>();
  std::uint64_t next_self_msg_ = 1;  // message ids of sends to self (audit)

  int bootstrap_fd_ = -1;
  launch::BootstrapReader bootstrap_reader_;
  std::atomic<bool> finalize_ok_{false};
  std::string abort_reason_;
  std::atomic<bool> aborted_{false};
  // (mu_) A lost connection was reported: later ones are audited, not printed. One failure
  // breaks every rank's connections in turn (N x N lines at N ranks); the first is the lead.
  bool reported_lost_peer_ = false;
  bool goodbye_sent_ = false;  // (mu_) after GOODBYE a peer accepts only DENY and ABORT from us
  bool finalizing_sent_ = false;  // (mu_) FINALIZING sent: this rank starts no new message
  // Scratch for progress(); only the token holder touches them.
  std::vector<pollfd> poll_fds_;
  std::vector<Peer*> polled_peers_;
  // When a spinning waiter next polls every channel (kFullPollPeriod), across waits.
  std::chrono::steady_clock::time_point next_full_poll_{};

  transport::UniqueFd wake_fd_;
  std::atomic<int> active_waiters_{0};
  // Peers paused at the budget, not yet stretched (set_backpressure): one load a wait round.
  std::atomic<int> stretchable_peers_{0};
  // Nonblocking collectives in flight (add_in_flight); drive_in_flight() advances them.
  std::mutex in_flight_mu_;
  std::vector<std::weak_ptr<RequestState>> in_flight_;
  std::atomic<bool> any_in_flight_{false};
  std::atomic<std::int64_t> last_activity_ns_{0};
  std::atomic<bool> background_polling_{false};
  // A waiter holding the progress token sleeps in poll() (see wake_sleeping_poller).
  std::atomic<int> poller_asleep_{0};
  std::atomic<bool> stopping_{false};
  std::mutex background_mu_;
  std::condition_variable background_cv_;
  std::thread background_;
  void stop_background() noexcept;  // stops the background thread and joins it (without mu_)
};

}  // namespace sempi::detail
