// transport::local_host_identity(): ranks dial each other's Unix sockets only when it matches,
// so two network namespaces on one host (simulated hosts, containers) must not match: their
// traffic has to stay on TCP, where the namespace's own firewall rules apply.
//
// Its own test binary: the namespace test forks, and a child of a process with other threads
// could find an allocator lock held.

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <string>

#include "transport/socket.hpp"

namespace sempi::transport {
namespace {

constexpr int kExitNoPermission = 77;

// The identity computed in a child process that first moved into a new network namespace.
// nullopt (with a reason) if this machine does not let us create one.
std::optional<std::string> identity_in_new_network_namespace(std::string& why_not) {
  int fds[2];
  if (::pipe(fds) != 0) {
    why_not = "pipe failed";
    return std::nullopt;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    why_not = "fork failed";
    return std::nullopt;
  }
  if (child == 0) {
    ::close(fds[0]);
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(kExitNoPermission);
    const std::string identity = local_host_identity();
    const bool written =
        ::write(fds[1], identity.data(), identity.size()) == static_cast<ssize_t>(identity.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(fds[1]);
  std::string identity;
  char buffer[256];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) identity.append(buffer, n);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoPermission) {
    why_not = "unshare(CLONE_NEWNET) is not permitted here (needs CAP_SYS_ADMIN)";
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why_not = "the child failed";
    return std::nullopt;
  }
  return identity;
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
  std::string why_not;
  const auto there = identity_in_new_network_namespace(why_not);
  if (!there && why_not.find("not permitted") != std::string::npos) GTEST_SKIP() << why_not;
  ASSERT_TRUE(there.has_value()) << why_not;
  EXPECT_NE(*there, here);
  EXPECT_EQ(boot_id_part(*there), boot_id_part(here));  // same kernel, other namespace
}

}  // namespace
}  // namespace sempi::transport
