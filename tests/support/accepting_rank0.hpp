#pragma once
// Rank 0 of a test job accepting its higher ranks with the real acceptor, on a thread of its
// own, counting the connections it refuses (startup_flood_test, tls_scan_target).

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/higher_rank_acceptor.hpp"
#include "support/test_job.hpp"

namespace sempi::test {

struct AcceptingRank0 {
  /// Accepts ranks 1..world_size-1 of `job` on `listener` until `deadline`.
  AcceptingRank0(const TestJob& job, transport::Listener& listener, transport::Deadline deadline)
      : accepted(job.world_size()) {
    acceptor.my_rank = 0;
    acceptor.expected = static_cast<int>(job.world_size()) - 1;
    acceptor.may_talk = [](int) { return true; };
    acceptor.audit = [this](const char* action, bool, int, const std::string& reason, const char*) {
      if (std::string_view(action) != "connection.refuse") return;
      std::lock_guard lock(mu);
      refusals.push_back(reason);
      ++refused;
    };
    result = std::async(std::launch::async, [this, &listener, deadline, local = job.endpoint(0)] {
      return acceptor.run(listener, local, deadline, accepted);
    });
  }
  std::vector<std::unique_ptr<transport::Channel>> accepted;
  std::atomic<int> refused{0};
  std::mutex mu;
  std::vector<std::string> refusals;  // their reasons, under mu
  detail::HigherRankAcceptor acceptor;
  std::future<std::string> result;  // empty: every rank connected
};

}  // namespace sempi::test
