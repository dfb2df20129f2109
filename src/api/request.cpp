#include "sempi/request.hpp"

#include <algorithm>
#include <exception>

#include "core/runtime.hpp"

namespace sempi {
namespace {

Status checked_status(const detail::RequestState& state) {
  if (state.status.error != ErrorClass::success) {
    throw RequestError(state.status, state.error_message);
  }
  return state.status;
}

// Schedule-driven requests (nonblocking collectives): progress the schedule, and block in the
// engine on whatever it waits for (whose waits also advance every other collective in flight).
bool driven_done(detail::RequestState& state) {
  return state.done.load(std::memory_order_acquire) || state.driver->progress();
}

void wait_driven(detail::RequestState& state) {
  auto& engine = detail::Runtime::get().engine();
  std::vector<const detail::RequestState*> blockers;
  while (!driven_done(state)) {
    blockers.clear();
    state.driver->blockers(blockers);
    if (!blockers.empty()) engine.wait_any(blockers);
  }
}

// True if the request is complete; else adds what it waits for to `blockers`. A
// schedule-driven request advances here first.
bool done_or_add_blockers(detail::RequestState& state,
                          std::vector<const detail::RequestState*>& blockers) {
  if (state.driver ? driven_done(state) : state.done.load(std::memory_order_acquire)) {
    return true;
  }
  if (state.driver) {
    state.driver->blockers(blockers);
  } else {
    blockers.push_back(&state);
  }
  return false;
}

bool any_driven(std::span<const Request> requests) {
  return std::any_of(requests.begin(), requests.end(), [](const Request& r) {
    return !r.is_null() && r.state()->driver;
  });
}

// Held by the copies of a nonblocking collective's Request (Request::abandon_on_last_copy_).
// It keeps the state too: assigning to a Request may release its state_ before this.
class AbandonOnLastCopy {
 public:
  explicit AbandonOnLastCopy(std::shared_ptr<detail::RequestState> state)
      : state_(std::move(state)) {}
  AbandonOnLastCopy(const AbandonOnLastCopy&) = delete;
  AbandonOnLastCopy& operator=(const AbandonOnLastCopy&) = delete;
  ~AbandonOnLastCopy() { state_->driver->abandon(); }

 private:
  std::shared_ptr<detail::RequestState> state_;
};

}  // namespace

Request::Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {
  if (!state_ || !state_->driver) return;
  try {
    abandon_on_last_copy_ = std::make_shared<AbandonOnLastCopy>(state_);
  } catch (...) {
    state_->driver->abandon();  // on this thread, before the caller hears of the failure
    throw;
  }
}

bool Request::completed() const noexcept {
  return !state_ || state_->done.load(std::memory_order_acquire);
}

Status Request::wait() {
  if (!state_) return Status{};
  if (state_->driver) {
    wait_driven(*state_);
  } else if (!state_->done.load(std::memory_order_acquire)) {
    detail::Runtime::get().engine().wait(*state_);
  }
  return checked_status(*state_);
}

std::optional<Status> Request::test() {
  if (!state_) return Status{};
  if (state_->driver) {
    if (!driven_done(*state_)) {
      // One round of engine progress, so polling test() in a loop moves the transfers.
      std::vector<const detail::RequestState*> blockers;
      state_->driver->blockers(blockers);
      if (!blockers.empty()) detail::Runtime::get().engine().test(*blockers.front());
      if (!driven_done(*state_)) return std::nullopt;
    }
    return checked_status(*state_);
  }
  if (!state_->done.load(std::memory_order_acquire) &&
      !detail::Runtime::get().engine().test(*state_)) {
    return std::nullopt;
  }
  return checked_status(*state_);
}

bool Request::cancel() {
  if (!state_) return false;
  return detail::Runtime::get().engine().cancel(*state_);
}

std::vector<Status> Request::wait_all(std::span<Request> requests) {
  // Drive them all together, as the engine's waits do for collectives in flight: each
  // request's own step comes first, then one wait on everything any of them needs.
  if (any_driven(requests)) {
    std::vector<const detail::RequestState*> blockers;
    for (;;) {
      blockers.clear();
      bool all_done = true;
      for (auto& request : requests) {
        if (request.state_ && !done_or_add_blockers(*request.state_, blockers)) all_done = false;
      }
      if (all_done) break;
      if (!blockers.empty()) detail::Runtime::get().engine().wait_any(blockers);
    }
  }
  std::vector<Status> statuses(requests.size());
  std::exception_ptr first_error;  // as thrown: a RequestError keeps its status
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      statuses[i] = requests[i].wait();
    } catch (const RequestError& e) {
      if (!first_error) first_error = std::current_exception();
      statuses[i] = e.status();
    } catch (const Error& e) {
      if (!first_error) first_error = std::current_exception();
      statuses[i].error = e.error_class();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  return statuses;
}

std::size_t Request::wait_any(std::span<Request> requests, Status* status) {
  std::vector<const detail::RequestState*> pending;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].state_) {
      pending.push_back(requests[i].state_.get());
      index.push_back(i);
    }
  }
  if (pending.empty()) return requests.size();
  std::size_t which = requests.size();
  if (!any_driven(requests)) {
    which = index[detail::Runtime::get().engine().wait_any(pending)];
  } else {
    // Advance the schedules, then block on the union of what everything waits for.
    std::vector<const detail::RequestState*> blockers;
    while (which == requests.size()) {
      blockers.clear();
      for (std::size_t i = 0; i < pending.size() && which == requests.size(); ++i) {
        if (done_or_add_blockers(*requests[index[i]].state_, blockers)) which = index[i];
      }
      if (which == requests.size() && !blockers.empty()) {
        detail::Runtime::get().engine().wait_any(blockers);
      }
    }
  }
  Request done = std::move(requests[which]);
  requests[which] = Request();
  const Status s = done.wait();
  if (status != nullptr) *status = s;
  return which;
}

}  // namespace sempi
