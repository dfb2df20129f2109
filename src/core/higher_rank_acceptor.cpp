#include "core/higher_rank_acceptor.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/diagnostics.hpp"

namespace sempi::detail {
namespace {

using transport::Channel;
using transport::ChannelError;
using transport::UniqueFd;

constexpr auto kHandshakeTimeout = std::chrono::seconds(30);
// How long to wait before trying again when descriptors run out.
constexpr auto kDescriptorPause = std::chrono::milliseconds(10);

struct Handshake {
  std::thread thread;
  // Over the Unix socket: a process of this user (the listener checked), so not counted
  // against kMaxPendingHandshakes and never dropped to make room for a TCP connection.
  bool local = false;
  // A duplicate of the connection's socket, open until the handshake finishes, so that the
  // acceptor can shut the connection down without racing the handshake closing its own fd.
  UniqueFd watch;
  bool finished = false;
  // How far the peer has come (Channel::accept's progress). A flood's connections are dropped
  // before any that got further. One whose peer proved a certificate for a rank this acceptor
  // still waits for (the first such connection per rank) is vouched for: never dropped, and
  // not counted.
  enum class Stage { connected, client_hello, vouched } stage = Stage::connected;
  std::uint32_t vouched_rank = 0;
  const char* dropped = nullptr;  // why the acceptor shut the connection down, if it did

  [[nodiscard]] bool tcp_running() const noexcept { return !finished && !local; }
  /// Counted against kMaxPendingHandshakes, and may be dropped.
  [[nodiscard]] bool unproven() const noexcept {
    return tcp_running() && watch.valid() && stage != Stage::vouched;
  }
};

// The connection to drop for a new one: the oldest of those that came least far.
Handshake* victim(std::list<Handshake>& handshakes) {
  Handshake* chosen = nullptr;
  for (auto& h : handshakes) {
    if (h.unproven() && (chosen == nullptr || h.stage < chosen->stage)) chosen = &h;
  }
  return chosen;
}

// A close-on-exec duplicate of `fd` to watch a connection by. Short of descriptors or memory
// (handshakes under way hold several each), it waits for some until `deadline` or until
// `needless()`, as the listener's accept() does, rather than refuse a connection already taken
// off the backlog. Invalid, with errno set, if it cannot be made.
template <class Needless>
UniqueFd duplicate_to_watch(int fd, transport::Deadline deadline, Needless&& needless) {
  for (;;) {
    UniqueFd copy{::fcntl(fd, F_DUPFD_CLOEXEC, 0)};
    const int error = errno;
    if (copy.valid() || (error != EMFILE && error != ENFILE && error != ENOMEM) ||
        transport::Clock::now() >= deadline || needless()) {
      errno = error;
      return copy;
    }
    std::this_thread::sleep_for(kDescriptorPause);  // not synchronisation: a scarce resource
  }
}

// Shuts a pending handshake's connection down; its thread then fails at once.
void drop(Handshake& h, const char* why) {
  ::shutdown(h.watch.get(), SHUT_RDWR);
  h.watch.reset();
  h.dropped = why;
}

}  // namespace

std::string HigherRankAcceptor::run(transport::Listener& listener,
                                    const transport::LocalEndpoint& local,
                                    transport::Deadline deadline,
                                    std::vector<std::unique_ptr<Channel>>& channels) const {
  std::mutex mu;  // guards everything below and `channels`
  std::vector<bool> connected(channels.size(), false);
  int remaining = expected;
  std::list<Handshake> handshakes;

  const auto refuse = [&](const std::string& reason) {
    diagnostics().warn("sempi[rank {}]: refused a connection: {}", my_rank, reason);
    audit("connection.refuse", false, -1, reason, nullptr);
  };

  // A verified peer's rank that this acceptor still waits for, and no other pending connection
  // is vouched for (under mu). Anything else keeps counting: a rank that is connected, below
  // us or kept away by the policy, could otherwise hold any number of threads.
  const auto wanted = [&](std::uint32_t rank) {
    const auto r = static_cast<std::size_t>(rank);
    if (static_cast<int>(rank) <= my_rank || r >= connected.size() || connected[r]) return false;
    if (!may_talk(static_cast<int>(rank))) return false;
    return std::none_of(handshakes.begin(), handshakes.end(), [&](const Handshake& h) {
      return h.tcp_running() && h.stage == Handshake::Stage::vouched && h.vouched_rank == rank;
    });
  };

  const auto handshake = [&](UniqueFd socket, Handshake* self) {
    std::string refused_why;  // when not for a duplicate (the channel's own error says that)
    // Claimed only once the peer has fully proven its identity (see Channel::establish).
    const auto claim = [&](std::uint32_t rank) {
      std::lock_guard lock(mu);
      const auto r = static_cast<std::size_t>(rank);
      if (static_cast<int>(rank) == my_rank) {
        // Told apart from a duplicate: only a copy of this rank's key can do this.
        refused_why = "the peer proved this rank's own identity (rank " + std::to_string(rank) +
                      "): a copy of its key, or another process started as this rank";
        return false;
      }
      if (static_cast<int>(rank) < my_rank) {
        refused_why = "rank " + std::to_string(rank) +
                      " dialed this rank, but a lower rank is dialed, never dials: not the "
                      "genuine rank's doing";
        return false;
      }
      if (r >= connected.size() || connected[r]) return false;
      if (!may_talk(static_cast<int>(rank))) {
        refused_why = "the policy never lets rank " + std::to_string(rank) + " talk to this rank";
        return false;
      }
      connected[r] = true;
      return true;
    };
    std::unique_ptr<Channel> channel;
    ChannelError error;
    try {
      channel = Channel::accept(local, std::move(socket), claim,
                                std::min(deadline, transport::Clock::now() + kHandshakeTimeout),
                                error, [&](transport::AcceptProgress reached, std::uint32_t rank) {
                                  std::lock_guard lock(mu);
                                  if (reached == transport::AcceptProgress::client_hello) {
                                    self->stage = Handshake::Stage::client_hello;
                                  } else if (wanted(rank)) {
                                    self->stage = Handshake::Stage::vouched;
                                    self->vouched_rank = rank;
                                  }
                                });
    } catch (const std::exception& e) {
      error.detail = e.what();
    }
    std::lock_guard lock(mu);
    self->finished = true;
    self->watch.reset();
    if (channel && self->dropped != nullptr) {
      // Dropped between proving its identity and getting here: its socket is shut down, so
      // the rank is free again for a connection that works.
      connected[static_cast<std::size_t>(channel->peer().rank)] = false;
      channel.reset();
    }
    if (!channel) {
      // A refused peer is not fatal: the genuine rank may still connect.
      refuse(self->dropped != nullptr ? std::string(self->dropped)
             : !refused_why.empty()   ? refused_why
                                      : error.message());
      return;
    }
    const auto rank = channel->peer().rank;
    audit("connection.accept", true, static_cast<int>(rank), channel->cipher(),
          channel->transport());
    channels[rank] = std::move(channel);
    if (--remaining == 0) listener.shutdown();  // wakes accept()
  };

  std::string failure;
  for (;;) {
    std::list<Handshake> ended;
    {
      std::lock_guard lock(mu);
      if (remaining == 0) break;
      for (auto it = handshakes.begin(); it != handshakes.end();) {
        const auto next = std::next(it);
        if (it->finished) ended.splice(ended.end(), handshakes, it);
        it = next;
      }
    }
    for (auto& h : ended) h.thread.join();

    std::error_code ec;
    UniqueFd socket = listener.accept(deadline, ec);
    bool local_socket = false;
    {
      std::lock_guard lock(mu);
      if (!socket.valid()) {
        if (remaining != 0) failure = "waiting for higher ranks to connect: " + ec.message();
        break;
      }
      local_socket = transport::is_unix_socket(socket.get());
      if (!local_socket) {
        std::size_t unproven = 0;
        std::size_t closing = 0;  // dropped, their threads not finished yet
        for (const auto& h : handshakes) {
          unproven += h.unproven() ? 1 : 0;
          closing += h.tcp_running() && !h.watch.valid() ? 1 : 0;
        }
        if (closing >= kMaxPendingHandshakes) {
          // Dropped threads waiting for a core: threads stay bounded, and the peer dials again.
          refuse("refused: too many dropped connections are still closing");
          continue;
        }
        if (unproven >= kMaxPendingHandshakes) {
          if (Handshake* h = victim(handshakes); h != nullptr) {
            drop(*h,
                 "dropped: too many unauthenticated connections, and it came least far "
                 "(oldest first)");
          }
        }
      }
    }
    // Made outside the lock: waiting for a descriptor must not hold up the handshakes that
    // would give theirs back. Not past the moment every rank is connected.
    UniqueFd watch = duplicate_to_watch(socket.get(), deadline, [&] {
      std::lock_guard lock(mu);
      return remaining == 0;
    });
    const int watch_error = errno;
    std::lock_guard lock(mu);
    if (!watch.valid()) {
      refuse(std::string("cannot track the connection: ") + std::strerror(watch_error));
      continue;
    }
    Handshake& h = handshakes.emplace_back();
    h.local = local_socket;
    h.watch = std::move(watch);
    try {
      h.thread = std::thread(handshake, std::move(socket), &h);
    } catch (const std::system_error& e) {
      handshakes.pop_back();
      refuse(std::string("cannot start a handshake thread: ") + e.what());
    }
  }
  {
    // Done or failed: connections still in their handshake are not wanted any more.
    std::lock_guard lock(mu);
    for (auto& h : handshakes) {
      if (!h.finished && h.watch.valid()) drop(h, "dropped: start-up no longer waits for it");
    }
  }
  for (auto& h : handshakes) h.thread.join();
  return failure;
}

}  // namespace sempi::detail
