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

// Counts a new copy of a Request for `state` (RequestState::user_copies). Only while the
// request is unfinished: once it is done nothing is abandoned, so the count no longer matters
// and a blocking call's Request, done before the caller sees it, costs no atomic operation.
void count_copy(detail::RequestState* state) noexcept {
  if (state != nullptr && !state->done.load(std::memory_order_acquire)) {
    state->user_copies.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

Request::Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {
  count_copy(state_.get());
}

Request::Request(const Request& other) noexcept : state_(other.state_) { count_copy(state_.get()); }

Request& Request::operator=(const Request& other) noexcept {
  if (this != &other) {
    count_copy(other.state_.get());  // first: the two may share a state that this last copy holds
    release();
    state_ = other.state_;
  }
  return *this;
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

Request::~Request() { release(); }

void Request::release() noexcept {
  if (!state_) return;
  const auto state = std::move(state_);  // this copy is gone, whatever happens below
  // A copy made while unfinished was counted; one released once done needs nothing.
  if (state->done.load(std::memory_order_acquire) ||
      state->user_copies.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  if (state->driver) {
    state->driver->abandon();
  } else if (auto* runtime = detail::Runtime::current()) {
    runtime->engine().abandon(*state);
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
