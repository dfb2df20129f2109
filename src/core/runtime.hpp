#pragma once
// The process-wide runtime behind sempi::Environment: the joined job, the progress engine and
// the predefined communicators. Created once by Environment, destroyed by its destructor.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/comm_state.hpp"
#include "core/engine.hpp"
#include "core/rank_bootstrap.hpp"

namespace sempi::detail {

class Runtime {
 public:
  /// Joins the job (or becomes a singleton). Throws sempi::Error.
  Runtime();
  ~Runtime();

  /// The live runtime; throws sempi::Error(other) if sempi is not initialized.
  static Runtime& get();
  static Runtime* current() noexcept;
  static void install(std::unique_ptr<Runtime> runtime);
  static std::unique_ptr<Runtime> uninstall();

  Engine& engine() { return *engine_; }
  [[nodiscard]] const std::shared_ptr<const CommState>& world() const { return world_; }
  [[nodiscard]] const std::shared_ptr<const CommState>& self() const { return self_; }
  [[nodiscard]] const pki::JobId& job() const { return job_.job; }
  [[nodiscard]] const std::string& policy_text() const { return job_.policy_text; }
  [[nodiscard]] bool singleton() const { return !job_.bootstrap.valid(); }

  void finalize();

 private:
  std::chrono::seconds finalize_timeout_;  // SEMPI_FINALIZE_TIMEOUT
  JoinedJob job_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<const CommState> world_;
  std::shared_ptr<const CommState> self_;
};

}  // namespace sempi::detail
