#include "coll/schedule.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <iterator>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/runtime.hpp"
#include "sempi/error.hpp"

namespace sempi::detail::coll {
namespace {

// Schedules whose collective failed while receives were still posted into their scratch
// memory. A failed collective leaves the job broken (MPI semantics), so keeping them until the
// process ends costs little and rules out the engine writing into freed memory.
std::mutex g_retired_mu;
std::vector<std::shared_ptr<Schedule>>& retired() {
  static auto* list = new std::vector<std::shared_ptr<Schedule>>();  // never destroyed: see above
  return *list;
}

}  // namespace

namespace {

// The policy decides a collective for every member alike, so all members fail here together,
// before anything is posted and before the sequence number is taken (it stays in step).
std::uint32_t checked_sequence(const CommState& comm, OpKind kind, const std::string& operation) {
  Engine& engine = Runtime::get().engine();
  if (auto reason = engine.collective_denied(comm, kind)) {
    throw Error(ErrorClass::policy, operation + ": " + *reason);
  }
  engine.collective_starting(comm);
  return comm.collective_sequence.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

Schedule::Schedule(std::shared_ptr<const CommState> comm, OpKind kind, std::string operation)
    : comm_(std::move(comm)),
      kind_(kind),
      operation_(std::move(operation)),
      sequence_(checked_sequence(*comm_, kind_, operation_)) {}

std::byte* Schedule::scratch(std::size_t bytes) {
  scratch_.push_back(std::make_unique_for_overwrite<std::byte[]>(bytes == 0 ? 1 : bytes));
  return scratch_.back().get();
}

Schedule::Round& Schedule::open_round_for_transfer() {
  if (rounds_.empty() || !rounds_.back().locals.empty()) rounds_.emplace_back();
  return rounds_.back();
}

void Schedule::send(const void* buf, std::size_t bytes, int peer, int step) {
  // The engine only reads a send buffer; Transfer holds one pointer type for both directions.
  open_round_for_transfer().transfers.push_back(
      {true, const_cast<void*>(buf), bytes, peer, collective_tag(sequence_, step)});
}

void Schedule::recv(void* buf, std::size_t bytes, int peer, int step) {
  open_round_for_transfer().transfers.push_back(
      {false, buf, bytes, peer, collective_tag(sequence_, step)});
}

void Schedule::local(std::function<void()> step) {
  if (rounds_.empty()) rounds_.emplace_back();
  rounds_.back().locals.push_back(std::move(step));
}

void Schedule::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  local([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void Schedule::sync() {
  if (!rounds_.empty() && !rounds_.back().transfers.empty()) rounds_.emplace_back();
}

void Schedule::post_round(std::size_t index) {
  auto& engine = Runtime::get().engine();
  posted_.clear();
  posted_round_ = index;
  const auto& round = rounds_[index];
  // Room first: a request the engine posted must be in posted_, or a failure would neither
  // cancel it nor wait for it.
  posted_.reserve(round.transfers.size());
  // Receives first, so a message from a fast peer finds its receive posted.
  for (const auto& t : round.transfers) {
    if (!t.is_send) {
      posted_.push_back(engine.irecv(comm_, true, t.buf, t.bytes, t.peer, t.tag, sequence_));
    }
  }
  for (const auto& t : round.transfers) {
    if (t.is_send) {
      posted_.push_back(
          engine.isend(*comm_, kind_, t.buf, t.bytes, t.peer, t.tag, false, sequence_));
    }
  }
}

const RequestState* Schedule::failure() const {
  for (const auto& r : posted_) {
    if (r->done.load(std::memory_order_acquire) && r->status.error != ErrorClass::success) {
      return r.get();
    }
    // A receive that got more bytes than the algorithm expects means the ranks disagree about
    // the arguments (counts, root, type): report it instead of computing on short data.
    if (r->done.load(std::memory_order_acquire) && r->kind == RequestKind::recv &&
        r->status.bytes != r->capacity) {
      return r.get();
    }
  }
  return nullptr;
}

namespace {
thread_local std::uint64_t t_schedules_retired = 0;
}  // namespace

std::uint64_t schedules_retired_by_this_thread() noexcept { return t_schedules_retired; }

std::vector<int> Schedule::peers() const {
  std::vector<bool> seen(static_cast<std::size_t>(size()), false);
  std::vector<int> peers;
  for (const Round& round : rounds_) {
    for (const Transfer& t : round.transfers) {
      if (!seen[static_cast<std::size_t>(t.peer)]) {
        seen[static_cast<std::size_t>(t.peer)] = true;
        peers.push_back(t.peer);
      }
    }
  }
  return peers;
}

void Schedule::retire_after_failure(ErrorClass cls, const std::string& origin) {
  if (retired_) return;  // a rank leaves a collective once: peers refuse a second WITHDRAWN
  {
    // First, so that running out of memory here leaves nothing done (a later call retries).
    std::lock_guard lock(g_retired_mu);
    retired().push_back(shared_from_this());
  }
  retired_ = true;
  ++t_schedules_retired;
  auto& engine = Runtime::get().engine();
  for (const auto& r : posted_) {
    if (!r->done.load(std::memory_order_acquire)) engine.cancel(*r);
  }
  // Every peer it has transfers with: those that wait for a message from it, and those whose
  // sends to it would wait for its CTS.
  try {
    engine.withdraw(*comm_, kind_, sequence_, peers(), cls, origin);
  } catch (...) {
    // Out of memory: the peers then wait for their timeout, as they would without WITHDRAWN.
  }
}

bool Schedule::quiet() const {
  return std::all_of(posted_.begin(), posted_.end(),
                     [](const auto& r) { return r->done.load(std::memory_order_acquire); });
}

void Schedule::wait_until_quiet() const {
  auto& engine = Runtime::get().engine();
  for (const auto& r : posted_) engine.wait(*r);
}

namespace {

// What went wrong with a failed transfer, without the operation's name.
std::string failure_detail(const RequestState& r) {
  if (r.status.error == ErrorClass::success) {
    return "ranks disagree about the message sizes (received " + std::to_string(r.status.bytes) +
           " bytes, expected " + std::to_string(r.capacity) +
           "); check that counts, types and root match on every rank";
  }
  return r.error_message;
}

std::string failure_message(const std::string& operation, const RequestState& r) {
  return operation + (r.status.error == ErrorClass::success ? ": " : " failed: ") +
         failure_detail(r);
}

ErrorClass failure_class(const RequestState& r) {
  return r.status.error == ErrorClass::success ? ErrorClass::truncate : r.status.error;
}

}  // namespace

std::string Schedule::failed_here(const std::string& detail) const {
  return "rank " + std::to_string(comm_->world_ranks[static_cast<std::size_t>(comm_->rank)]) +
         "'s part failed: " + detail;
}

std::string Schedule::origin_of(const RequestState& failed) const {
  // A transfer failed by a withdrawal keeps the peer's account of where the failure began.
  return failed.withdrawn ? failed.error_message.substr(0, failed.withdrawn_origin_length)
                          : failed_here(failure_detail(failed));
}

Schedule::~Schedule() {
  // Numbered but never run: an exception between make() and run() or start() (out of memory
  // for a scratch buffer, say). Nothing of it is in flight, but the members wait for its
  // messages: withdraw from all of them, as a rank that fails its checks does
  // (CollectiveCall::failed).
  if (launched_ || Runtime::current() == nullptr) return;
  try {
    std::vector<int> everyone(static_cast<std::size_t>(size()));
    std::iota(everyone.begin(), everyone.end(), 0);
    Runtime::get().engine().withdraw(*comm_, kind_, sequence_, everyone, ErrorClass::other,
                                     failed_here("its schedule could not be built"));
  } catch (...) {
    // Out of memory: the others then wait for their timeout.
  }
}

void Schedule::run() {
  launched_ = true;  // from here on, failures withdraw (retire_after_failure)
  auto& engine = Runtime::get().engine();
  for (std::size_t i = 0; i < rounds_.size(); ++i) {
    try {
      post_round(i);
    } catch (const std::exception& e) {
      retire_after_failure(ErrorClass::intern, failed_here(e.what()));
      wait_until_quiet();
      throw;
    }
    for (const auto& r : posted_) {
      engine.wait(*r);
      if (const RequestState* failed = failure()) {
        const std::string message = failure_message(operation_, *failed);
        const ErrorClass cls = failure_class(*failed);
        retire_after_failure(cls, origin_of(*failed));
        wait_until_quiet();
        throw Error(cls, message);
      }
    }
    posted_.clear();
    try {
      for (const auto& step : rounds_[i].locals) step();
    } catch (const std::exception& e) {
      retire_after_failure(ErrorClass::op,
                           failed_here(std::string("reduction operation failed: ") + e.what()));
      throw;
    } catch (...) {
      retire_after_failure(ErrorClass::op, failed_here("reduction operation failed"));
      throw;
    }
  }
}

// Advances a started schedule from Request::wait/test (see RequestDriver).
class Schedule::Driver final : public RequestDriver {
 public:
  Driver(std::shared_ptr<Schedule> schedule, RequestState& state)
      : schedule_(std::move(schedule)), state_(state) {}
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Normally abandon() ran when the application's last copy of the Request went. This is for
  // a Request that could not be made (out of memory) and for internal requests.
  ~Driver() override { give_up(); }

  void abandon() noexcept override {
    // Without a runtime (after finalize, or in a child made by fork(), where another thread
    // of the parent may have held busy_) there is nothing to give up, and nobody to wait for.
    if (Runtime::current() == nullptr) return;
    const Exclusive hold(busy_);
    give_up();
  }

  bool progress() override {
    const Exclusive hold(busy_);
    retained_.clear();  // the owner waits on nothing it collected before this call
    return advance();
  }

  bool try_progress() override {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;  // driven elsewhere
    const Exclusive hold(busy_, Exclusive::already_held);
    return advance();
  }

  void blockers(std::vector<const RequestState*>& out) const override {
    const Exclusive hold(busy_);
    for (const auto& r : schedule_->posted_) {
      if (!r->done.load(std::memory_order_acquire)) out.push_back(r.get());
    }
  }

 private:
  // One thread at a time inside the driver: its owner's wait or test, or another thread's wait
  // advancing every collective in flight (Engine::drive_in_flight). A flag, not a mutex: a
  // local step (a user's reduction) may call MPI, whose waits then skip this driver instead of
  // locking a mutex the same thread holds.
  class Exclusive {
   public:
    static constexpr struct AlreadyHeld {
    } already_held{};
    explicit Exclusive(std::atomic<bool>& flag) : flag_(flag) {
      while (flag_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    }
    Exclusive(std::atomic<bool>& flag, AlreadyHeld) : flag_(flag) {}
    Exclusive(const Exclusive&) = delete;
    Exclusive& operator=(const Exclusive&) = delete;
    ~Exclusive() { flag_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool>& flag_;
  };

  bool advance() {
    if (finished_) return true;
    if (retired_) return settle();
    auto& s = *schedule_;
    for (;;) {
      for (const auto& r : s.posted_) {
        if (!r->done.load(std::memory_order_acquire)) {
          if (const RequestState* failed = s.failure()) return fail(*failed);
          return false;
        }
      }
      if (const RequestState* failed = s.failure()) return fail(*failed);
      // Kept, not freed: a waiter may hold pointers to them (blockers()) while another
      // thread's wait advances this schedule. The owner's next progress() lets them go.
      std::move(s.posted_.begin(), s.posted_.end(), std::back_inserter(retained_));
      s.posted_.clear();
      if (next_ > 0) {
        try {
          for (const auto& step : s.rounds_[next_ - 1].locals) step();
        } catch (const std::exception& e) {
          const std::string detail = std::string("reduction operation failed: ") + e.what();
          return fail(ErrorClass::op, s.operation_ + ": " + detail, s.failed_here(detail));
        } catch (...) {
          const std::string detail = "reduction operation failed";
          return fail(ErrorClass::op, s.operation_ + ": " + detail, s.failed_here(detail));
        }
      }
      if (next_ == s.rounds_.size()) {
        finished_ = true;
        state_.done.store(true, std::memory_order_release);
        return true;
      }
      try {
        s.post_round(next_++);
      } catch (const std::exception& e) {  // out of memory: the round is posted in part
        return fail(ErrorClass::intern, s.operation_ + ": " + e.what(), s.failed_here(e.what()));
      }
    }
  }

  bool fail(const RequestState& failed) {
    return fail(failure_class(failed), failure_message(schedule_->operation_, failed),
                schedule_->origin_of(failed));
  }

  bool fail(ErrorClass cls, const std::string& message, const std::string& origin) {
    state_.status.error = cls;
    state_.error_message = message;
    schedule_->retire_after_failure(cls, origin);
    retired_ = true;
    return settle();
  }

  // The Request was dropped (or reassigned) before its collective finished: this rank's part
  // is abandoned. Its receives that have not matched are cancelled, and the schedule is kept
  // alive as after a failure, so the engine never writes into freed scratch when the peers'
  // messages arrive, nor sends from freed scratch; the transfers already under way are waited
  // for, since the application may free its own buffers once the request is gone.
  void give_up() noexcept {
    if (finished_ || Runtime::current() == nullptr) return;
    try {
      if (!retired_) {
        const char* detail = "its request was dropped before the collective completed";
        state_.status.error = ErrorClass::other;
        state_.error_message = schedule_->operation_ + ": " + detail;
        schedule_->retire_after_failure(ErrorClass::other, schedule_->failed_here(detail));
        retired_ = true;
      }
      schedule_->wait_until_quiet();
    } catch (...) {  // out of memory for the retired list: nothing better to do here
      return;
    }
    finished_ = true;
    state_.done.store(true, std::memory_order_release);  // Engine::drive_in_flight lets it go
  }

  // Failed: done once no transfer still uses the application's buffers (Schedule::quiet).
  bool settle() {
    if (!schedule_->quiet()) return false;
    finished_ = true;
    state_.done.store(true, std::memory_order_release);
    return true;
  }

  std::shared_ptr<Schedule> schedule_;
  RequestState& state_;  // owns this driver
  std::size_t next_ = 0;  // next round to post; rounds_[next_-1] is the one in flight
  bool finished_ = false;  // complete, or failed (and retired) with nothing left in flight
  bool retired_ = false;   // failed: retired, waiting for its transfers in flight (settle)
  mutable std::atomic<bool> busy_{false};  // see Exclusive
  std::vector<std::shared_ptr<RequestState>> retained_;  // finished rounds' requests (advance)
};

std::shared_ptr<RequestState> Schedule::start() {
  auto state = std::make_shared<RequestState>(RequestKind::collective);
  state->status.source = ANY_SOURCE;
  state->status.tag = ANY_TAG;
  state->driver = std::make_shared<Driver>(shared_from_this(), *state);
  launched_ = true;  // the driver's failures withdraw, its destructor too (give_up)
  // Post the first round now, so peers can make progress; from then on every wait of this
  // process advances it (the progress rule), not only waits on its own request.
  if (!state->driver->progress()) Runtime::get().engine().add_in_flight(state);
  return state;
}

}  // namespace sempi::detail::coll
