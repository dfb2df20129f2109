// transport::local_host_identity(): ranks dial each other's Unix sockets only when it matches,
// so two network namespaces on one host (simulated hosts, containers) must not match: their
// traffic has to stay on TCP, where the namespace's own firewall rules apply.
//
// Its own test binary: the namespace test forks, and a child of a process with other threads
// could find an allocator lock held.

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "transport/socket.hpp"

namespace sempi::transport {
namespace {

// What a child process that first moved into a new network namespace saw.
struct Elsewhere {
  bool entered = false;      // the child is in a new network namespace
  bool unsupported = false;  // this machine does not let us create one (problem says why)
  std::string identity;      // entered: the child's local_host_identity()
  std::string problem;       // not entered: why
};

// As root a network namespace alone; otherwise with a user namespace, where the kernel allows
// unprivileged ones (the identity needs no uid mapping). errno of the last attempt on failure.
int enter_new_network_namespace() {
  if (::geteuid() == 0 && ::unshare(CLONE_NEWNET) == 0) return 0;
  return ::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 0 : errno;
}

Elsewhere identity_in_new_network_namespace() {
  Elsewhere result;
  int fds[2];
  if (::pipe(fds) != 0) {
    result.problem = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    result.problem = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (child == 0) {
    // The child writes one status byte (0 or the errno of unshare), then the identity.
    ::close(fds[0]);
    const int error = enter_new_network_namespace();
    const auto status = static_cast<unsigned char>(error);
    std::string message(1, static_cast<char>(status));
    if (error == 0) message += local_host_identity();
    const bool written =
        ::write(fds[1], message.data(), message.size()) == static_cast<ssize_t>(message.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[256];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      message.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || message.empty()) {
    result.problem = "the child process failed";
    return result;
  }
  if (message[0] != 0) {
    result.unsupported = true;
    result.problem = std::string("cannot create a network namespace here: ") +
                     std::strerror(static_cast<unsigned char>(message[0]));
    return result;
  }
  result.entered = true;
  result.identity = message.substr(1);
  return result;
}

std::string boot_id_part(const std::string& identity) {
  return identity.substr(0, identity.find('/'));
}

TEST(LocalHostIdentity, NamesTheBootAndTheNetworkNamespace) {
  const std::string identity = local_host_identity();
  ASSERT_FALSE(identity.empty()) << "no /proc/sys/kernel/random/boot_id or /proc/self/ns/net";
  EXPECT_EQ(identity, local_host_identity());
  EXPECT_EQ(boot_id_part(identity).size(), 36u) << identity;  // a UUID
  EXPECT_NE(identity.find("/net:["), std::string::npos) << identity;
}

TEST(LocalHostIdentity, DiffersInAnotherNetworkNamespace) {
  const std::string here = local_host_identity();
  const Elsewhere there = identity_in_new_network_namespace();
  if (there.unsupported) GTEST_SKIP() << there.problem;
  ASSERT_TRUE(there.entered) << there.problem;
  EXPECT_NE(there.identity, here);
  EXPECT_EQ(boot_id_part(there.identity), boot_id_part(here));  // same kernel, other namespace
}

}  // namespace
}  // namespace sempi::transport
