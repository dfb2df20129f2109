// A rank program for the policy and audit tests, run under sempirun with a test policy.
// Usage: policy_probe SCENARIO   (exit 0 = every check passed; a failed check prints and exits 1)
//
// The "compromised sender" of the receiver scenarios calls the runtime's internal testing hook
// sempi::detail::simulate_compromised_sender(true): from then on this rank skips its own policy
// checks and puts denied messages on the wire, as a rank whose process was taken over could.
// The receiver must still refuse them.

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sempi/sempi.hpp>

#include "support/rank_check.hpp"

namespace sempi::detail {
void simulate_compromised_sender(bool skip_sender_checks) noexcept;  // src/core/engine.hpp
}

namespace {

using sempi::test::g_rank;

// Runs f, which must throw sempi::Error of class `cls`; returns its message.
template <class F>
std::string expect_error(sempi::ErrorClass cls, F&& f) {
  try {
    f();
  } catch (const sempi::Error& e) {
    if (e.error_class() != cls) {
      std::fprintf(stderr, "rank %d: wrong error class: %s\n", g_rank, e.what());
      std::exit(1);
    }
    return e.what();
  }
  std::fprintf(stderr, "rank %d: expected an error, got none\n", g_rank);
  std::exit(1);
}

using sempi::ErrorClass;

// Ranks {0,1} and {2,3} are isolated segments.
void segments(const sempi::Communicator& world) {
  const int r = world.rank();
  const int same = r ^ 1;
  const int other = (r + 2) % 4;
  int value = r;
  const auto why = expect_error(ErrorClass::policy, [&] { world.send(value, other, 1); });
  CHECK(why.find("segmentation") != std::string::npos);
  expect_error(ErrorClass::policy, [&] { (void)world.recv(value, other, 1); });
  // A rank kept apart did not fail (it was never connected): a nonblocking probe finds
  // nothing from it, and a blocking one, which would wait for ever, is refused.
  CHECK(!world.iprobe(other, sempi::ANY_TAG));
  CHECK(!world.improbe(other, 1));
  expect_error(ErrorClass::policy, [&] { (void)world.probe(other, 1); });
  int got = -1;
  world.sendrecv(&value, 1, same, 2, &got, 1, same, 2);
  CHECK(got == same);
}

// Rank 1 turns hostile; rank 0 (the receiver) must not deliver anything the policy denies.
void receiver(const sempi::Communicator& world) {
  if (world.rank() == 1) {
    sempi::detail::simulate_compromised_sender(true);
    const int bad = 666;
    world.send(bad, 0, 500);  // eager, tag not allowed: dropped by rank 0
    // A synchronous send waits for an acknowledgement: it gets a DENY instead.
    const auto ssend = expect_error(ErrorClass::policy, [&] { world.ssend(bad, 0, 501); });
    CHECK(ssend.find("refused") != std::string::npos);
    // Rendezvous over the size limit: DENY instead of clear-to-send.
    std::vector<char> big(200000, 'x');
    expect_error(ErrorClass::policy, [&] { world.send(big, 0, 5); });
    // A sendrecv whose send half is refused after its receive got a message: the error is the
    // send's, and the status still describes the message received.
    int got = -1;
    try {
      (void)world.sendrecv(big.data(), static_cast<int>(big.size()), 0, 5, &got, 1, 0, 9);
      CHECK(!"the refused send half of a sendrecv went unnoticed");
    } catch (const sempi::RequestError& e) {
      CHECK(e.error_class() == ErrorClass::policy);
      CHECK(e.status().source == 0 && e.status().tag == 9 && e.status().bytes == sizeof got);
      CHECK(got == 9);
    }
    const int good = 42;
    world.send(good, 0, 7);
    sempi::detail::simulate_compromised_sender(false);
    // An honest sender learns at once.
    expect_error(ErrorClass::policy, [&] { world.send(bad, 0, 500); });
    int done = 0;
    (void)world.recv(done, 0, 8);
  } else {
    world.send(9, 1, 9);  // for rank 1's sendrecv
    int value = -1;
    const auto status = world.recv(value, 1, sempi::ANY_TAG);
    CHECK(status.tag == 7);  // the denied messages never arrived before it
    CHECK(value == 42);
    CHECK(!world.iprobe(1, sempi::ANY_TAG).has_value());
    world.send(value, 1, 8);
  }
}

// Rank 1 turns hostile and floods rank 0 with messages the policy refuses. Rank 0 cuts it off
// after a bounded number of refusals, rather than logging (and answering) them without end.
void flood(const sempi::Communicator& world) {
  if (world.rank() == 1) {
    sempi::detail::simulate_compromised_sender(true);
    const int bad = 666;
    const std::vector<char> big(200000, 'x');  // rendezvous over the size limit: DENY replies
    int sent = 0;
    expect_error(ErrorClass::peer_failed, [&] {
      for (; sent < 100000; ++sent) {
        try {
          if (sent % 2 == 0) world.send(bad, 0, 500);
          if (sent % 2 == 1) world.send(big, 0, 5);
        } catch (const sempi::Error& e) {
          if (e.error_class() != ErrorClass::policy) throw;  // refused: keep flooding
        }
      }
    });
    CHECK(sent >= 999);  // the 1000th refused message (index 999) or a later one failed
  } else {
    int value = -1;
    const auto why = expect_error(ErrorClass::peer_failed, [&] { (void)world.recv(value, 1, 7); });
    CHECK(why.find("cut off") != std::string::npos);
  }
}

// on_violation "abort": rank 1 sends a denied message; rank 0 aborts the job.
void abort_on_violation(const sempi::Communicator& world) {
  if (world.rank() == 1) {
    sempi::detail::simulate_compromised_sender(true);
    const int bad = 1;
    world.send(bad, 0, 500);
  }
  int value = 0;
  (void)world.recv(value, 1 - world.rank(), 9);  // never satisfied: the job is torn down
  CHECK(false);
}

// world.split may only have members within {0,1} or within {2,3}.
void membership(const sempi::Communicator& world) {
  const int r = world.rank();
  const auto why = expect_error(ErrorClass::policy, [&] { (void)world.split(r % 2, r); });
  // Same error on every member: the test compares these lines.
  std::printf("split refused: %s\n", why.c_str());
  std::fflush(stdout);
  const auto half = world.split(r / 2, r);
  CHECK(half.size() == 2);
  int got = -1;
  half.sendrecv(&r, 1, 1 - half.rank(), 3, &got, 1, 1 - half.rank(), 3);
  CHECK(got == (r ^ 1));
  // "world.split" allows no comm_create: its dup is refused on both members.
  expect_error(ErrorClass::policy, [&] { (void)half.dup(); });
}

// A rename takes on the new name's rule only if the members fit it: "secure" admits ranks 0-1
// only. "world.split" allows tags 0-9, "secure" every tag.
void rename(const sempi::Communicator& world) {
  const int r = world.rank();
  const auto dup = world.dup();
  const auto why = expect_error(ErrorClass::policy, [&] { dup.set_name("secure"); });
  CHECK(why.find("/communicators/1/members") != std::string::npos);
  CHECK(dup.name() == "world.dup");
  const auto half = world.split(r / 2, r);
  if (r < 2) {
    half.set_name("secure");
    CHECK(half.name() == "secure");
  } else {
    expect_error(ErrorClass::policy, [&] { half.set_name("secure"); });
  }
  world.barrier();  // a frame that arrives before its receiver renamed is judged by the old name
  if (r < 2) {
    int got = -1;
    half.sendrecv(&r, 1, 1 - half.rank(), 500, &got, 1, 1 - half.rank(), 500);
    CHECK(got == (r ^ 1));
  } else {
    CHECK(half.name() == "world.split");
    const int value = r;
    expect_error(ErrorClass::policy, [&] { half.send(value, 1 - half.rank(), 500); });
  }
  // world and self are made without a membership check, so their rules need not restrict
  // members ("*" here): a communicator takes either name only with as many members.
  for (const char* name : {"world", "self"}) {
    const auto refused = expect_error(ErrorClass::policy, [&] { half.set_name(name); });
    CHECK(refused.find("names the predefined communicator") != std::string::npos);
  }
}

// Receives that no message could ever satisfy fail at once, whatever their source: a tag
// outside world's 0-99 from any rank, and any tag on "world.dup", which allows none.
void unreceivable(const sempi::Communicator& world) {
  int value = 0;
  const auto why =
      expect_error(ErrorClass::policy, [&] { (void)world.recv(value, sempi::ANY_SOURCE, 999); });
  CHECK(why.find("any rank") != std::string::npos);
  const auto dup = world.dup();
  expect_error(ErrorClass::policy, [&] { (void)dup.recv(value, 1 - world.rank(), sempi::ANY_TAG); });
  expect_error(ErrorClass::policy,
               [&] { (void)dup.recv(value, sempi::ANY_SOURCE, sempi::ANY_TAG); });
  // So do probes, which would otherwise wait for ever.
  expect_error(ErrorClass::policy, [&] { (void)world.probe(sempi::ANY_SOURCE, 999); });
  expect_error(ErrorClass::policy, [&] { (void)dup.mprobe(1 - world.rank(), 5); });
  // Allowed ones still work.
  world.sendrecv(&value, 1, 1 - world.rank(), 5, &value, 1, sempi::ANY_SOURCE, sempi::ANY_TAG);
}

// world allows barrier (and comm_create), not allreduce.
void collectives(const sempi::Communicator& world) {
  world.barrier();
  const int one = 1;
  int sum = 0;
  const auto why = expect_error(ErrorClass::policy, [&] {
    world.allreduce(&one, &sum, 1, sempi::Op::sum());
  });
  CHECK(why.find("allreduce") != std::string::npos);
  auto dup = world.dup();  // comm_create allowed on world; "world.dup" has a rule
  CHECK(dup.size() == world.size());
}

// Four ranks, messages up to 4096 bytes. A collective's internal message the policy refuses
// fails the collective on the rank that would send it; the ranks waiting for that message
// learn of it (WITHDRAWN) and fail too, naming where the failure began, instead of waiting
// for the job's timeout. The job goes on afterwards.
void withdrawn(const sempi::Communicator& world) {
  const int r = world.rank();
  // Binomial broadcast: the root's sends are refused; rank 3 waits for rank 2's forward.
  std::vector<char> big(8192, 'b');
  const auto why =
      expect_error(ErrorClass::policy, [&] { world.bcast_bytes(big.data(), big.size(), 0); });
  if (r != 0) CHECK(why.find("rank 0's part failed") != std::string::npos);
  // Binomial gather of 3000 bytes a rank: rank 2 forwards rank 3's block with its own (6000
  // bytes, refused); ranks 1 and 3 send theirs and are done.
  std::vector<char> block(3000, static_cast<char>('0' + r));
  std::vector<char> all(r == 0 ? 4 * block.size() : 0);
  if (r == 0 || r == 2) {
    const auto gather_why = expect_error(
        ErrorClass::policy, [&] { world.gather_bytes(block.data(), block.size(), all.data(), 0); });
    if (r == 0) CHECK(gather_why.find("rank 2's part failed") != std::string::npos);
  } else {
    world.gather_bytes(block.data(), block.size(), all.data(), 0);
  }
  // A reduction that throws on rank 0 (4-rank recursive doubling: rank 0 then owes rank 2 its
  // second-round message; ranks 1 and 3 have what they need from the first round).
  const auto picky = sempi::Op::elementwise<int>(
      [r](int a, int b) {
        if (r == 0) throw std::runtime_error("rank 0 refuses to add");
        return a + b;
      },
      true);
  int total = 0;
  if (r == 0 || r == 2) {
    try {
      world.allreduce(&r, &total, 1, picky);
      CHECK(!"the allreduce succeeded");
    } catch (const sempi::Error& e) {
      CHECK(r == 2 && e.error_class() == ErrorClass::op);
      CHECK(std::string(e.what()).find("rank 0's part failed: reduction operation failed: rank 0 "
                                       "refuses to add (withdrawn by rank 0)") != std::string::npos);
    } catch (const std::runtime_error& e) {
      CHECK(r == 0 && std::string(e.what()) == "rank 0 refuses to add");
    }
  } else {
    world.allreduce(&r, &total, 1, picky);
    CHECK(total == 6);
  }
  // A refusal fails only its own collective: a barrier in flight on the communicator goes on.
  // The others start theirs only once rank 0's bcast was refused, so rank 0's barrier still
  // waits for them then.
  if (r == 0) {
    auto barrier = world.ibarrier();
    expect_error(ErrorClass::policy, [&] { world.bcast_bytes(big.data(), big.size(), 0); });
    for (int peer = 1; peer < world.size(); ++peer) world.send(1, peer, 77);
    (void)barrier.wait();
  } else {
    int token = 0;
    (void)world.recv(token, 0, 77);
    auto barrier = world.ibarrier();
    expect_error(ErrorClass::policy, [&] { world.bcast_bytes(big.data(), big.size(), 0); });
    (void)barrier.wait();
  }
  // Every member took part in all of them: the collective sequence is still in step.
  world.barrier();
  int sum = 0;
  world.allreduce(&r, &sum, 1, sempi::Op::sum());
  CHECK(sum == 6);
}

// Dry run: the tag is not allowed, but the message is delivered (and logged as a would-be deny).
void dryrun(const sempi::Communicator& world) {
  if (world.rank() == 0) {
    const int value = 5;
    world.send(value, 1, 500);
  } else {
    int value = 0;
    (void)world.recv(value, 0, 500);
    CHECK(value == 5);
  }
}

// Traffic for the report and reconciliation: a ring of eager and rendezvous messages.
void traffic(const sempi::Communicator& world) {
  const int n = world.size();
  const int r = world.rank();
  std::vector<char> small(100, 's');
  std::vector<char> large(300000, 'l');
  std::vector<char> in_small(100);
  std::vector<char> in_large(300000);
  for (int i = 0; i < 3; ++i) {
    world.sendrecv(small, (r + 1) % n, 10 + i, in_small, (r + n - 1) % n, 10 + i);
  }
  world.sendrecv(large, (r + 1) % n, 20, in_large, (r + n - 1) % n, 20);
  CHECK(in_large[0] == 'l');
}

// Traffic, then the last rank is killed while a large (rendezvous) message from rank 0 is still
// unmatched at it: the audit log of a job with a crashed rank must still verify, and reconcile
// must list that send as unmatched.
void crash(const sempi::Communicator& world) {
  traffic(world);
  const int victim = world.size() - 1;
  if (world.rank() == victim) {
    int go = 0;
    world.recv(go, 0, 31);  // rank 0's tag-30 RTS arrived before this; it is never matched
    ::raise(SIGKILL);
  }
  try {
    if (world.rank() == 0) {
      const std::vector<char> big(300000, 'x');
      auto lost = world.isend(big, victim, 30);
      const int go = 1;
      world.send(go, victim, 31);
      lost.wait();  // fails once the victim is gone
    } else {
      int never = 0;
      world.recv(never, victim, 32);  // fails once the victim is gone
    }
  } catch (const sempi::Error&) {
    std::exit(3);
  }
}

// Rank 0 goes straight to finalize; once the launcher has logged that, rank 1 turns hostile and
// sends it denied messages (eager, and rendezvous: a DENY reply). Rank 0 decides them while it
// waits in finalize, and its audit log must still record them. AUDIT_DIR is the job's.
void late_refusal(const sempi::Communicator& world, const std::string& audit_dir) {
  if (world.rank() != 1) return;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {  // the launcher log is written record by record
    std::ifstream in(audit_dir + "/launcher.jsonl");
    std::string line;
    bool finalized = false;
    while (std::getline(in, line)) {
      finalized = finalized || (line.find("\"rank.finalize\"") != std::string::npos &&
                                line.find("\"rank\":0") != std::string::npos);
    }
    if (finalized) break;
    CHECK(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sempi::detail::simulate_compromised_sender(true);
  const int bad = 666;
  world.send(bad, 0, 500);  // eager: dropped by rank 0
  std::vector<char> big(200000, 'x');
  expect_error(ErrorClass::policy, [&] { world.send(big, 0, 5); });  // rendezvous: DENY
}

// The last rank deletes its own audit log and dies (as a compromised rank could, or one that
// kills a peer and deletes the peer's): the seal must not say it never joined. AUDIT_DIR is the
// job's.
void vanish(const sempi::Communicator& world, const std::string& audit_dir) {
  world.barrier();
  const int victim = world.size() - 1;
  if (world.rank() == victim) {
    CHECK(::unlink((audit_dir + "/rank-" + std::to_string(victim) + ".jsonl").c_str()) == 0);
    ::raise(SIGKILL);
  }
  int never = 0;
  expect_error(ErrorClass::peer_failed, [&] { (void)world.recv(never, victim, 1); });
}

// The last rank's audit log hits a file size limit (as on a full disk) while it still has
// records to write, then the job ends normally: the head it reports must say why its file ends
// early. AUDIT_DIR is the job's; the policy audits messages.
void full_disk(const sempi::Communicator& world, const std::string& audit_dir) {
  world.barrier();  // connected: nothing but the log grows a file from here on
  const int victim = world.size() - 1;
  if (world.rank() == victim) {
    struct stat st {};
    CHECK(::stat((audit_dir + "/rank-" + std::to_string(victim) + ".jsonl").c_str(), &st) == 0);
    std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead
    const rlimit limit{static_cast<rlim_t>(st.st_size) + 1000, RLIM_INFINITY};
    CHECK(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    for (int i = 0; i < 50; ++i) world.send(i, 0, 7);
  } else if (world.rank() == 0) {
    for (int i = 0; i < 50; ++i) {
      int got = -1;
      world.recv(got, victim, 7);
      CHECK(got == i);
    }
  }
}

// Audit mode, two ranks: a message allowed under "world.dup" waits at rank 0 when rank 0
// renames the communicator to "io", whose rule refuses its tag. Enforcement would drop it; in
// audit mode it is delivered, and the refusal is a dry-run record.
void rename_dry_run(const sempi::Communicator& world) {
  const auto dup = world.dup();
  if (world.rank() == 1) {
    const int value = 5;
    dup.send(value, 0, 5);
    dup.set_name("io");
  } else {
    while (!dup.iprobe(1, 5)) {
    }  // queued here, judged under "world.dup"
    dup.set_name("io");
    int got = 0;
    (void)dup.recv(got, 1, 5);
    CHECK(got == 5);
  }
  world.barrier();
}

// Audit mode, two ranks: rank 1 frees a communicator (drops its last handle) that rank 0 then
// sends on. Nothing could ever receive the message at rank 1, so it is refused there even in
// audit mode, as a non-member's is.
void freed(const sempi::Communicator& world) {
  std::optional<sempi::Communicator> dup = world.dup();
  if (world.rank() == 1) dup.reset();
  world.barrier();
  if (world.rank() == 0) {
    const int value = 5;
    dup->send(value, 1, 5);
  }
}

// Rank 1 leaves through std::exit() right after a send, its Environment never destroyed and
// its last message records not chained yet: its runtime must be torn down before OpenSSL's own
// exit handler runs, so that its status reaches sempirun and its log is whole.
void exit_early(const sempi::Communicator& world) {
  if (world.rank() == 1) {
    const int value = 7;
    world.send(value, 0, 3);
    std::exit(3);
  }
  if (world.rank() == 0) {
    int got = 0;
    world.recv(got, 1, 3);
    CHECK(got == 7);
  }
}

}  // namespace

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  g_rank = world.rank();
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "segments") {
    segments(world);
  } else if (scenario == "receiver") {
    receiver(world);
  } else if (scenario == "flood") {
    flood(world);
  } else if (scenario == "abort") {
    abort_on_violation(world);
  } else if (scenario == "membership") {
    membership(world);
  } else if (scenario == "rename") {
    rename(world);
  } else if (scenario == "unreceivable") {
    unreceivable(world);
  } else if (scenario == "collectives") {
    collectives(world);
  } else if (scenario == "dryrun") {
    dryrun(world);
  } else if (scenario == "withdrawn") {
    withdrawn(world);
  } else if (scenario == "traffic") {
    traffic(world);
  } else if (scenario == "crash") {
    crash(world);
  } else if (scenario == "late_refusal" && argc > 2) {
    late_refusal(world, argv[2]);
  } else if (scenario == "vanish" && argc > 2) {
    vanish(world, argv[2]);
  } else if (scenario == "rename_dry_run") {
    rename_dry_run(world);
  } else if (scenario == "freed") {
    freed(world);
  } else if (scenario == "exit_early") {
    exit_early(world);
  } else if (scenario == "full_disk" && argc > 2) {
    full_disk(world, argv[2]);
  } else {
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
  std::printf("rank %d ok\n", g_rank);
  return 0;
}
