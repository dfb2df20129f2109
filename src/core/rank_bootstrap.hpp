#pragma once
// How a rank joins its job: enroll with the launcher over the inherited bootstrap channel
// (key generated here, in memory; CSR out; certificate, CA, policy and address table in), then
// wire the full mesh of mutually authenticated TLS channels.
//
// Wiring order: rank r dials every lower rank in increasing order while a second thread accepts
// the higher ranks. Every dial waits only on lower ranks, so the order is deadlock-free.
// Pairs that the policy never lets talk (policy::Policy::ever_talk, the same answer on both
// ends) are neither dialed nor accepted.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.hpp"
#include "launch/bootstrap_protocol.hpp"
#include "pki/job_id.hpp"
#include "policy/policy.hpp"
#include "transport/channel.hpp"

namespace sempi::detail {

struct JoinedJob {
  int rank = 0;
  int size = 1;
  pki::JobId job;
  std::string policy_text;
  std::shared_ptr<const policy::Policy> policy;  // compiled policy_text
  std::shared_ptr<audit::AuditLog> audit;         // null: not audited (singleton)
  bool oversubscribed = false;  // the launcher's word: ranks outnumber a host's CPUs
  std::vector<std::unique_ptr<transport::Channel>> channels;  // index: world rank
  transport::UniqueFd bootstrap;  // invalid for a singleton
  /// What was read from `bootstrap` beyond the welcome (an abort sent right after it): the
  /// engine takes it over, so no message is lost between the two readers.
  launch::BootstrapReader bootstrap_reader;
};

/// True when this process was started by sempirun (a bootstrap channel is inherited).
bool launched_by_sempirun();

/// Enrolls and wires. The welcome may take launch::welcome_timeout(start_timeout) (the launcher
/// ends a start-up that stalls), the connections `start_timeout` from then on.
/// Throws sempi::Error with a precise reason on any failure.
JoinedJob join_job(std::chrono::seconds start_timeout);

/// A job of one rank (no launcher): nothing to enroll with, nothing to wire.
JoinedJob singleton_job();

}  // namespace sempi::detail
