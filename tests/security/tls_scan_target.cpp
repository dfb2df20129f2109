// A rank's start-up listener, held open for external TLS scanners (tls_scan_test.sh): rank 0 of
// a 2-rank test job, accepting with the real acceptor until its higher rank connects.
//
// usage: tls_scan_target DIR
//   Writes the job CA to DIR/ca.pem, prints "endpoint HOST:PORT", then waits for a line (or
//   EOF) on stdin: the scan is over. It then connects as the genuine rank 1, prints
//   "refused N" (the connections the acceptor refused meanwhile) and "rank 1 connected", and
//   exits 0 only if rank 1 got through: a scan must not leave the listener unusable.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "support/accepting_rank0.hpp"
#include "support/test_job.hpp"

int main(int argc, char** argv) {
  using namespace sempi;
  if (argc != 2) {
    std::fprintf(stderr, "usage: tls_scan_target DIR\n");
    return 2;
  }
  // The acceptor's warnings (one per refused connection) go to stderr: stdout is the test's
  // pipe, which nobody reads while the scanners run, and a full pipe would stall the acceptor.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tls_scan_target"));
  const test::TestJob job(2);
  transport::Listener listener(test::loopback_any_port());
  {
    std::ofstream ca(std::string(argv[1]) + "/ca.pem");
    ca << job.ca().certificate().to_pem();
    if (!ca) {
      std::fprintf(stderr, "tls_scan_target: cannot write %s/ca.pem\n", argv[1]);
      return 1;
    }
  }

  // The acceptor's deadline is longer than the test's own time limit, so that a slow scan on
  // a loaded machine is never mistaken for a listener that stopped admitting ranks.
  test::AcceptingRank0 rank0(job, listener, test::deadline_in(std::chrono::minutes(10)));

  std::printf("endpoint %s\n", transport::format_endpoint(listener.endpoint()).c_str());
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);

  transport::ChannelError error;
  const auto rank1 = transport::Channel::connect(job.endpoint(1), listener.endpoint(), 0,
                                                 test::long_deadline(), error);
  if (rank1 == nullptr) listener.shutdown();  // the acceptor would wait out its deadline
  const std::string failure = rank0.result.get();
  std::printf("refused %d\n", rank0.refused.load());
  const bool connected = rank1 != nullptr && failure.empty() && rank0.accepted[1] != nullptr &&
                         rank0.accepted[1]->peer().rank == 1;
  if (!connected) {
    std::printf("rank 1 did not connect: %s %s\n", error.message().c_str(), failure.c_str());
    return 1;
  }
  std::printf("rank 1 connected\n");
  return 0;
}
