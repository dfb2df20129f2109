#include "sempi/environment.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "audit/audit_log.hpp"
#include "common/hex.hpp"
#include "core/runtime.hpp"

namespace sempi {
namespace {

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finalized{false};

}  // namespace

Environment::Environment() {
  if (g_initialized.exchange(true)) {
    throw Error(ErrorClass::other, "sempi::Environment may be created only once per process");
  }
  detail::Runtime::install(std::make_unique<detail::Runtime>());
}

Environment::Environment(int& /*argc*/, char**& /*argv*/) : Environment() {}

Environment::~Environment() {
  auto runtime = detail::Runtime::uninstall();
  if (runtime) runtime->finalize();
  runtime.reset();
  g_finalized = true;
}

bool Environment::initialized() noexcept { return g_initialized.load(); }
bool Environment::finalized() noexcept { return g_finalized.load(); }

void Environment::abort(int code, const std::string& reason) {
  // What the program printed so far goes out first: _Exit flushes nothing, and the launcher's
  // teardown may end this process before it returns (a partial line, a redirected stdout).
  std::cout.flush();
  std::fflush(nullptr);
  auto* runtime = detail::Runtime::current();
  // Named like the library's other messages: among many ranks' lines, whose abort this is.
  const std::string who =
      runtime != nullptr ? "sempi[rank " + std::to_string(runtime->world()->rank) + "]" : "sempi";
  std::fprintf(stderr, "%s: abort (code %d)%s%s\n", who.c_str(), code, reason.empty() ? "" : ": ",
               reason.c_str());
  std::fflush(stderr);
  if (runtime != nullptr && !runtime->singleton()) {
    // The launcher ends this process as soon as it reads the request: the records so far first.
    if (audit::AuditLog* log = runtime->engine().audit()) log->flush();
    runtime->engine().request_abort(code, reason);
    // The launcher now tears the job down; leave on our own if it does not within a few seconds.
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  std::_Exit(code);
}

double Environment::wtime() noexcept {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string Environment::job_id() { return detail::Runtime::get().job().hex(); }

std::string Environment::processor_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

Communicator world() {
  return Communicator(
      std::const_pointer_cast<detail::CommState>(detail::Runtime::get().world()));
}

Communicator self() {
  return Communicator(std::const_pointer_cast<detail::CommState>(detail::Runtime::get().self()));
}

}  // namespace sempi
