#include "sempi/environment.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>

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

namespace {

// What the program printed goes out before _Exit, which flushes nothing (a partial line, or
// everything when stdout is a file). Only if no other thread holds stdout: one blocked in a
// write to a reader that stopped (a paused pager) must not hold up the abort.
void flush_program_output() {
  if (::ftrylockfile(stdout) != 0) return;
  std::cout.flush();  // synchronised with stdio: into stdout, whose lock this thread holds
  std::fflush(stdout);
  ::funlockfile(stdout);
}

}  // namespace

void Environment::abort(int code, const std::string& reason) {
  flush_program_output();
  auto* runtime = detail::Runtime::current();
  // Named like the library's other messages: among many ranks' lines, whose abort this is.
  const std::string who =
      runtime != nullptr ? "sempi[rank " + std::to_string(runtime->world()->rank) + "]" : "sempi";
  std::fprintf(stderr, "%s: abort (code %d)%s%s\n", who.c_str(), code, reason.empty() ? "" : ": ",
               reason.c_str());
  std::fflush(stderr);
  if (runtime != nullptr && !runtime->singleton()) {
    auto& engine = runtime->engine();
    engine.request_abort(code, reason);
    // The launcher answers a request it acts on with the job's abort notice: leave then, with
    // the audit log written up to it. Without an answer (the launcher first waits for a lost
    // peer's exit, to blame the right rank) the teardown ends this process, or we leave.
    (void)engine.await_abort_notice(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (audit::AuditLog* log = engine.audit()) log->flush();
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
