// Cost of one message audit record, split into its two halves: capture (on the message path,
// under the engine's lock) and render (format, chain-hash and buffer; done while a rank waits).
// Prints nanoseconds per record, the median of several batches.
// Run: ./audit_render [records_per_batch] [batches]

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "audit/audit_log.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ns_per(Clock::duration d, std::size_t n) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) /
         static_cast<double>(n);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t per_batch = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;
  const int batches = argc > 2 ? std::atoi(argv[2]) : 31;
  if (per_batch == 0 || per_batch > sempi::audit::AuditLog::kMaxQueued || batches <= 0) {
    std::fprintf(stderr, "usage: audit_render [records_per_batch 1..%zu] [batches]\n",
                 sempi::audit::AuditLog::kMaxQueued);
    return 2;
  }
  char dir_template[] = "/tmp/sempi-audit-render-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::filesystem::path dir = dir_template;
  std::vector<double> capture;
  std::vector<double> render;
  {
    sempi::audit::AuditLog::Options options;
    options.job = "0123456789abcdef0123456789abcdef";
    options.rank = 1;
    auto log = sempi::audit::AuditLog::create(dir / "rank-1.jsonl", options);
    sempi::audit::MessageRecord record;
    record.comm = "MPI_COMM_WORLD";
    record.peer = 0;
    record.tag = 1;
    record.bytes = 8;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < per_batch; ++i) {
        record.action = (i & 1) != 0 ? "message.receive" : "message.send";
        record.msg = i;
        log->message(record);
      }
      const auto t1 = Clock::now();
      log->render_pending();
      const auto t2 = Clock::now();
      capture.push_back(ns_per(t1 - t0, per_batch));
      render.push_back(ns_per(t2 - t1, per_batch));
    }
    log->close();
  }
  std::filesystem::remove_all(dir);
  std::printf("capture %.0f ns/record, render %.0f ns/record (median of %d batches of %zu)\n",
              median(capture), median(render), batches, per_batch);
  return 0;
}
