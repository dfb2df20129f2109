#include "sempi/request.hpp"

#include "core/runtime.hpp"

namespace sempi {
namespace {

Status checked_status(const detail::RequestState& state) {
  if (state.status.error != ErrorClass::success) throw Error(state.status.error, state.error_message);
  return state.status;
}

}  // namespace

Status Request::wait() {
  if (!state_) return Status{};
  if (!state_->done.load(std::memory_order_acquire)) detail::Runtime::get().engine().wait(*state_);
  return checked_status(*state_);
}

std::optional<Status> Request::test() {
  if (!state_) return Status{};
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
  std::vector<Status> statuses(requests.size());
  std::optional<Error> first_error;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      statuses[i] = requests[i].wait();
    } catch (const Error& e) {
      if (!first_error) first_error = e;
      statuses[i].error = e.error_class();
    }
  }
  if (first_error) throw *first_error;
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
  const std::size_t which = index[detail::Runtime::get().engine().wait_any(pending)];
  Request done = std::move(requests[which]);
  requests[which] = Request();
  const Status s = done.wait();
  if (status != nullptr) *status = s;
  return which;
}

}  // namespace sempi
