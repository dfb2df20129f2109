#pragma once
// Accepting the higher ranks' connections at start-up, each TLS handshake on its own thread.
//
// Before a connection has proven anything, anyone who can reach the port can open one. Were
// the handshakes run one at a time, a few connections that never finish theirs would hold the
// genuine ranks in the listen backlog until the start-up deadline. Here a stalled connection
// holds only its own thread; at most kMaxPendingHandshakes run at once, and beyond that one is
// dropped: the oldest of those that came least far. A genuine rank sends its ClientHello at
// once, so once its handshake thread has read it, it goes only after every connection that has
// not sent one. A connection whose peer proved a certificate for a rank this acceptor still
// waits for (the first such connection per rank) is never dropped and does not count; any
// other verified peer (a rank already connected, or one the policy keeps away) counts as
// before. Dropped connections whose threads are still closing are bounded too: past
// kMaxPendingHandshakes of them, new TCP connections are refused at once. A dropped genuine
// rank dials again (Channel::dial). Connections over the Unix socket come from this user's
// processes only; they neither count nor are dropped, so a TCP flood cannot push the ranks on
// this host out.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/channel.hpp"
#include "transport/listener.hpp"

namespace sempi::detail {

inline constexpr std::size_t kMaxPendingHandshakes = 32;

struct HigherRankAcceptor {
  int my_rank = 0;
  int expected = 0;                       // how many higher ranks will connect
  std::function<bool(int)> may_talk;      // the policy lets this rank talk to us at all
  // Records a connection event: action, success, peer (-1 if unknown), cipher or reason, and
  // for a channel the transport carrying it ("unix" or "tcp"; null for failures).
  std::function<void(const char*, bool, int, const std::string&, const char*)> audit;

  /// Accepts until `expected` ranks are connected, filling channels[rank]. Returns an empty
  /// string on success, else why the deadline passed or the listener failed.
  std::string run(transport::Listener& listener, const transport::LocalEndpoint& local,
                  transport::Deadline deadline,
                  std::vector<std::unique_ptr<transport::Channel>>& channels) const;
};

}  // namespace sempi::detail
