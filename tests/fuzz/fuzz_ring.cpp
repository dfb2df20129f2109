// Fuzz target for the shared rings between two ranks on one host (transport/ring_stream.hpp):
// the peer shares the memory, so it can write any value into the indices and the bytes at any
// time. The input is a script of the peer's moves (publish bytes, set its head or our tail to
// anything, consume) and of ours (receive, send), and each of our moves is checked against a
// model of what a correct stream does: a head that moves backwards or more than a ring ahead
// of what we consumed fails the stream (EPROTO) and so does everything after it; otherwise we
// receive exactly the bytes at our tail, in order, across the wrap; what we send lands in
// order at our head, never further than a ring past a tail the peer legitimately set.
// The peer also plays the wake-up side: it sets its flags to anything, rings us, and closes its
// socket. A stream that learns of the close (a wake-up it could not send, or reading the
// socket) reports it as a socket would: EPIPE on the next write, end of stream once the ring is
// empty; what it had published before stays published, never pushed twice.

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <span>
#include <string>

#include <fcntl.h>

#include "transport/ring_stream.hpp"

namespace {

using sempi::transport::RingStream;
using sempi::transport::SharedRegion;
using sempi::transport::UniqueFd;

[[noreturn]] void violated() { __builtin_trap(); }

std::uint64_t load(std::uint64_t& word) { return std::atomic_ref<std::uint64_t>(word).load(); }
void store(std::uint64_t& word, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(word).store(value);
}
std::uint32_t load(std::uint32_t& word) { return std::atomic_ref<std::uint32_t>(word).load(); }
void store(std::uint32_t& word, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(word).store(value);
}

// Takes the wake-up bytes waiting on `fd`; returns how many there were.
int take_bells(int fd) {
  int count = 0;
  std::uint8_t bytes[64];
  for (ssize_t n; (n = ::recv(fd, bytes, sizeof bytes, MSG_DONTWAIT)) > 0;) {
    count += static_cast<int>(n);
  }
  return count;
}

// Reads the script: bytes in order, zeros past its end.
class Script {
 public:
  explicit Script(std::span<const std::uint8_t> input) : input_(input) {}
  [[nodiscard]] bool done() const { return at_ >= input_.size(); }
  std::uint8_t byte() { return at_ < input_.size() ? input_[at_++] : 0; }
  std::uint64_t number(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }

 private:
  std::span<const std::uint8_t> input_;
  std::size_t at_ = 0;
};

// A byte count: mostly small, now and then up to a ring and a bit (cheap to run either way).
std::uint64_t size(Script& script, std::uint64_t ring) {
  const std::uint64_t n = script.byte();
  return script.byte() % 4 == 0 ? (n << 8 | script.byte()) % (ring + 64) : n;
}

}  // namespace

void fuzz_ring_stream(std::span<const std::uint8_t> input) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return;
  UniqueFd peer_socket(pair[0]);
  const UniqueFd our_socket(pair[1]);
  std::string error;
  // The peer creates the region (it dials); we adopt it, as an accepting rank does.
  auto peer_region = SharedRegion::create(SharedRegion::kMinRingBytes, error);
  if (!peer_region) return;
  auto adopted =
      SharedRegion::adopt(UniqueFd(::fcntl(peer_region->fd(), F_DUPFD_CLOEXEC, 0)), error);
  if (!adopted) return;  // out of descriptors or memory: nothing to learn here
  RingStream us(std::move(adopted), false, our_socket.get());
  const std::uint64_t ring = peer_region->ring_bytes();
  // Ring 0 carries the peer's bytes to us, ring 1 ours to it.
  sempi::transport::RingControl& in = peer_region->control(0);
  sempi::transport::RingControl& out = peer_region->control(1);
  std::uint8_t* in_data = peer_region->data(0);
  std::uint8_t* out_data = peer_region->data(1);

  // The model.
  bool broken = false;
  std::uint64_t peer_head = 0;      // what the peer published last, by the rules
  std::uint64_t consumed = 0;       // bytes we received
  std::uint64_t head_seen = 0;      // the highest head we accepted
  std::uint64_t sent = 0;           // bytes we placed in ring 1 (its head)
  std::uint64_t best_tail = 0;      // the furthest tail the peer set by the rules
  std::deque<std::uint8_t> unsent;  // committed, not yet in the ring
  std::uint8_t next_byte = 1;
  bool peer_closed = false;  // the stream knows the peer closed its socket
  int bells_pending = 0;     // wake-up bytes the peer sent us, not yet read

  Script script(input);
  for (int step = 0; step < 256 && !script.done(); ++step) {
    switch (script.byte() % 12) {
      case 0: {  // the peer publishes bytes (perhaps more than there is room for)
        const std::uint64_t n = size(script, ring);
        const std::uint8_t seed = script.byte();
        for (std::uint64_t i = 0; i < n; ++i) {
          in_data[(peer_head + i) % ring] = static_cast<std::uint8_t>(seed + i * 7);
        }
        peer_head += n;
        store(in.head, peer_head);
        break;
      }
      case 1: {  // the peer writes anything as its head: far off, back, or about a ring ahead
        const std::uint8_t how = script.byte();
        const std::uint64_t v = how % 3 == 0   ? script.number(8)
                                : how % 3 == 1 ? load(in.head) - script.byte()
                                               : consumed + ring + script.byte() % 5 - 2;
        store(in.head, v);
        peer_head = v;
        break;
      }
      case 2: {  // we receive
        const std::uint64_t head = load(in.head);
        const bool waiting = load(in.producer_waiting) != 0;  // the peer wants a wake-up byte
        const long n = us.receive(1 + script.byte());
        const bool bad_head = head < head_seen || head - consumed > ring;
        if (broken || bad_head) {
          if (n != -1 || errno != EPROTO || us.failure_detail().empty()) violated();
          broken = true;
          break;
        }
        if (head == consumed) {
          if (peer_closed ? n != 0 : (n != -1 || errno != EAGAIN)) violated();
          break;
        }
        if (n <= 0 || static_cast<std::uint64_t>(n) > head - consumed) violated();
        const std::uint8_t* got = us.unread_data() + us.unread() - n;
        for (long i = 0; i < n; ++i) {
          if (got[i] != in_data[(consumed + static_cast<std::uint64_t>(i)) % ring]) violated();
        }
        us.consume(us.unread());
        consumed += static_cast<std::uint64_t>(n);
        head_seen = head;
        if (load(in.tail) != consumed) violated();  // our tail tells the peer what is free
        // Freeing room wakes a waiting peer: one byte, and its flag cleared; a closed socket
        // says it is gone.
        if (load(in.producer_waiting) != 0) violated();
        if (peer_socket.valid()) {
          if (take_bells(peer_socket.get()) != (waiting ? 1 : 0)) violated();
        } else if (waiting) {
          peer_closed = true;
        }
        break;
      }
      case 3: {  // we send
        const std::size_t n = size(script, ring);
        std::uint8_t* room = us.reserve(n);
        if (room != nullptr) {
          for (std::size_t i = 0; i < n; ++i) {
            room[i] = next_byte;
            unsent.push_back(next_byte++);
          }
          us.commit(n);
        }
        const std::uint64_t offered = load(out.tail);        // all the stream can read meanwhile
        const bool asleep = load(out.consumer_asleep) != 0;  // the peer wants a wake-up byte
        const bool was_broken = broken;
        const bool was_closed = peer_closed;
        const bool had_unsent = !unsent.empty();
        const bool drained = us.drain();
        const int drain_errno = errno;  // before the checks below make system calls
        const std::uint64_t head = load(out.head);
        if ((was_broken || was_closed) && head != sent) violated();  // nothing more published
        if (was_closed && !was_broken && had_unsent && drained) violated();
        // The first push that publishes rings a sleeping peer, once, and clears its flag; a
        // closed socket then says it is gone.
        const bool rang = head > sent && asleep;
        if (rang && load(out.consumer_asleep) != 0) violated();
        if (peer_socket.valid()) {
          if (take_bells(peer_socket.get()) != (rang ? 1 : 0)) violated();
        } else if (rang) {
          peer_closed = true;
        }
        // A tail up to what we had published when the stream read it is a legitimate move.
        // (The stream reads it only with a full ring, so with at most best_tail + ring sent.)
        if (offered > best_tail && offered <= std::min(head, best_tail + ring)) best_tail = offered;
        if (head < sent || head - sent > unsent.size()) violated();
        if (head > best_tail + ring) violated();  // overwrote bytes the peer had not freed
        for (std::uint64_t at = sent; at < head; ++at) {
          if (out_data[at % ring] != unsent.front()) violated();
          unsent.pop_front();
        }
        sent = head;
        if (!drained) {
          if (!was_broken && drain_errno == EPIPE) {
            if (!peer_closed || unsent.empty()) violated();  // and never for bytes published
          } else {
            if (drain_errno != EPROTO) violated();
            broken = true;
          }
        }
        break;
      }
      case 4: {  // the peer consumes what we sent, by the rules
        const std::uint64_t tail = std::min(sent, load(out.tail) + script.number(2));
        if (tail >= best_tail) {
          best_tail = tail;
          store(out.tail, tail);
        }
        break;
      }
      case 5: {  // the peer writes anything as our tail, often near our head
        const std::uint8_t how = script.byte();
        store(out.tail,
              how % 2 == 0 ? script.number(8) >> (how % 64) : sent + script.byte() % 5 - 2);
        break;
      }
      case 6:  // the peer overwrites published bytes we have not taken yet
        in_data[(consumed + script.byte()) % ring] = script.byte();
        break;
      case 7: {  // the peer sets its wake-up flags to anything
        const std::uint8_t how = script.byte();
        store(out.consumer_asleep, std::uint32_t{how} & 3u);
        store(in.producer_waiting, std::uint32_t{how} >> 2 & 3u);
        break;
      }
      case 8:  // the peer rings us (a few bytes: service_socket reads up to 256 at a time)
        if (peer_socket.valid() && bells_pending < 128) {
          const std::uint8_t bell = script.byte();
          if (::send(peer_socket.get(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
            ++bells_pending;
          }
        }
        break;
      case 9:  // the peer closes its socket (it exited)
        peer_socket = UniqueFd();
        break;
      case 10: {  // we are about to sleep on the socket, then wake
        const std::uint64_t head = load(in.head);
        const bool ready = us.prepare_to_block(true, false);
        if (ready != (broken || peer_closed || head != consumed)) violated();
        if (!broken && !peer_closed && load(in.consumer_asleep) != 1) violated();  // ring me
        us.done_blocking();
        if (load(in.consumer_asleep) != 0 || load(out.producer_waiting) != 0) violated();
        break;
      }
      default: {  // we read the wake-up bytes, and learn whether the peer closed
        us.service_socket();
        bells_pending = 0;
        if (!peer_socket.valid()) {
          peer_closed = true;
          break;
        }
        std::uint8_t left = 0;  // every byte read: a poll() would not wake us for nothing
        if (::recv(our_socket.get(), &left, 1, MSG_PEEK | MSG_DONTWAIT) != -1) violated();
        break;
      }
    }
  }
}
