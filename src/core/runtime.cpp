#include "core/runtime.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <numeric>

#include "common/cpus.hpp"
#include "common/env_number.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "sempi/error.hpp"
#include "transport/hello.hpp"

namespace sempi::detail {
namespace {

std::mutex g_mutex;  // serialises install/uninstall
std::unique_ptr<Runtime> g_runtime;
std::atomic<Runtime*> g_current{nullptr};  // read on every API call: lock-free

constexpr long kMaxMicroseconds = kMaxEnvSeconds * 1'000'000;

// Context ids: world uses 0/1, self 2/3; communicators created later start at 4.
constexpr std::uint32_t kWorldContext = 0;
constexpr std::uint32_t kSelfContext = 2;

}  // namespace

Runtime::Runtime()
    // Read now: a bad value is an error of initialization, not an exception out of the
    // destructor that finalizes (which would terminate the program after all its work).
    : finalize_timeout_(env_long("SEMPI_FINALIZE_TIMEOUT", 300, kMaxEnvSeconds)) {
  const auto start_timeout = launch::start_timeout(std::getenv(launch::kStartTimeoutVariable));
  job_ = launched_by_sempirun() ? join_job(start_timeout) : singleton_job();
  EngineConfig config;
  config.world_rank = job_.rank;
  config.world_size = job_.size;
  // At most a frame's payload, which every peer accepts (ChannelLimits): an eager message is
  // one frame.
  config.eager_limit = static_cast<std::size_t>(
      env_long("SEMPI_EAGER_LIMIT", 64 * 1024,
               static_cast<long>(transport::ChannelLimits{}.max_frame_payload)));
  // Waiters poll (yielding the core between polls) before they block: blocking costs a wake-up
  // from idle, measured at ~30 us here, while the yield keeps spinning cheap even when ranks
  // outnumber cores (bench/RESULTS.md).
  config.spin = std::chrono::microseconds(env_long("SEMPI_SPIN_US", 200, kMaxMicroseconds));
  config.yield_while_spinning = env_long("SEMPI_LOCAL_SIZE", 1) > usable_cpus();
  config.job_oversubscribed = job_.oversubscribed;
  config.policy = job_.policy;  // decisions precompiled per communicator by the engine
  config.audit = job_.audit;
  engine_ = std::make_unique<Engine>(config, std::move(job_.channels), job_.bootstrap.get(),
                                     std::move(job_.bootstrap_reader));

  std::vector<int> everyone(static_cast<std::size_t>(job_.size));
  std::iota(everyone.begin(), everyone.end(), 0);
  world_ = std::make_shared<const CommState>(kWorldContext, std::move(everyone), job_.rank,
                                             "world");
  self_ = std::make_shared<const CommState>(kSelfContext, std::vector<int>{job_.rank}, job_.rank,
                                            "self");
  // Predefined communicators live as long as the runtime: no deleter hook needed.
  engine_->register_comm(*world_);
  engine_->register_comm(*self_);
}

Runtime::~Runtime() = default;

void Runtime::finalize() {
  engine_->finalize(std::chrono::steady_clock::now() + finalize_timeout_);
}

Runtime& Runtime::get() {
  Runtime* runtime = current();
  if (runtime == nullptr) {
    throw Error(ErrorClass::other,
                "sempi is not initialized: create a sempi::Environment first (or it was "
                "already finalized)");
  }
  return *runtime;
}

Runtime* Runtime::current() noexcept { return g_current.load(std::memory_order_acquire); }

namespace {

// A runtime kept reachable from here, never freed (a forked child's copy of its parent's, or the
// one a program left through exit()): what a leak checker sees as in use, not lost. A process
// keeps at most one so. Volatile: a store nobody reads must stay.
Runtime* volatile g_unfreed_runtime = nullptr;

// A child made by fork() is not a rank: it has none of the engine's threads, and its copies of
// the rank's sockets and audit log are the rank's. It forgets the runtime, without tearing it
// down (which would write to them): sempi calls in the child then fail as before MPI_Init,
// and its exit leaves the parent's channels and log alone.
void forget_runtime_in_child() noexcept {
  g_current.store(nullptr, std::memory_order_relaxed);
  if (Runtime* forgotten = g_runtime.release())
    g_unfreed_runtime = forgotten;  // a fork's fork has none
}

// A program that leaves through exit() while its sempi::Environment lives (exit(1) on an
// error, say) is not finalized: its peers see it fail, as if it had crashed (finalizing would
// wait for them). Before OpenSSL's exit handler tears libcrypto down, the engine's thread stops
// and the audit log's last records are chained and written: later, both used a dead libcrypto
// (the rank died of SIGSEGV, its last records lost). The runtime itself is left to the end of
// the process, not freed: another thread may still be inside a sempi call. Registered once a
// runtime exists, so after OpenSSL's handler, which therefore runs after this one. (The mpi.h
// layer's own handler, registered later still, runs first: it finalizes a program that exits
// with status 0, as MPI_Finalize would.)
void leave_at_exit() noexcept {
  std::unique_ptr<Runtime> runtime = Runtime::uninstall();
  if (!runtime) return;  // finalized already, or forgotten in a forked child
  runtime->engine().stop_at_exit();
  g_unfreed_runtime = runtime.release();
}

}  // namespace

void Runtime::install(std::unique_ptr<Runtime> runtime) {
  static const int registered =
      ::pthread_atfork(nullptr, nullptr, forget_runtime_in_child) + std::atexit(leave_at_exit);
  (void)registered;
  std::lock_guard lock(g_mutex);
  g_runtime = std::move(runtime);
  g_current.store(g_runtime.get(), std::memory_order_release);
}

std::unique_ptr<Runtime> Runtime::uninstall() {
  std::lock_guard lock(g_mutex);
  g_current.store(nullptr, std::memory_order_release);
  return std::move(g_runtime);
}

}  // namespace sempi::detail
