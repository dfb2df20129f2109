#pragma once
// The send and receive buffers of one non-blocking socket (TCP or Unix), shared by the two
// stages of a channel's life: OpenSSL's handshake (through the socket BIO, socket_bio.hpp) and
// sempi's record layer afterwards (record_layer.hpp). Bytes either stage left behind stay in
// place for the other: nothing is lost or re-ordered at the hand-over.
//
// Sends are gathered: a send() per TLS record costs a system call and a trip through the TCP
// stack each, so records are sent together once kSendAt bytes are buffered and at every
// drain(). A full buffer (kCapacity) makes writers wait, like a full socket.
//
// Receives take up to kReadCapacity bytes (several records) per recv(). The unread rest of a
// partly received record moves to the front only when the free tail cannot hold a whole record.
//
// send() uses MSG_NOSIGNAL: a vanished peer must not kill the rank with SIGPIPE, and a library
// must not change the process's signal disposition.
//
// The pipe under the buffers is the socket unless a subclass moves the bytes another way
// (push() and pull(); ring_stream.hpp copies them through shared memory instead).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sempi::transport {

class SocketBuffers {
 public:
  /// Gathered bytes that trigger a send() without waiting for drain().
  static constexpr std::size_t kSendAt = 64 * 1024;
  /// Most bytes held for sending.
  static constexpr std::size_t kCapacity = 256 * 1024;
  /// Bytes taken from the socket per recv().
  static constexpr std::size_t kReadCapacity = 128 * 1024;

  explicit SocketBuffers(int fd) noexcept : fd_(fd) {}
  virtual ~SocketBuffers() = default;
  SocketBuffers(const SocketBuffers&) = delete;
  SocketBuffers& operator=(const SocketBuffers&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }

  // --- sending ---
  /// Bytes buffered and not yet handed to the kernel.
  [[nodiscard]] std::size_t unsent() const noexcept { return end_ - begin_; }
  /// Space for `size` more bytes at the end of the send buffer (committed with commit()), or
  /// nullptr if they would exceed kCapacity: drain() first, then wait for writability.
  std::uint8_t* reserve(std::size_t size);
  /// reserve(), sending what is buffered first if that is needed to make room. nullptr if the
  /// socket is full, or after a socket error (`lost` set, errno kept).
  std::uint8_t* reserve_draining(std::size_t size, bool& lost);
  void commit(std::size_t size) noexcept { end_ += size; }
  /// Sends buffered bytes until none are left or the socket is full. false on a socket error
  /// (errno set); a full socket is not an error.
  bool drain();
  /// drain() once kSendAt bytes are buffered.
  bool send_if_full() { return unsent() < kSendAt || drain(); }

  // --- receiving ---
  /// Received bytes not consumed yet.
  [[nodiscard]] std::size_t unread() const noexcept { return in_end_ - in_begin_; }
  [[nodiscard]] const std::uint8_t* unread_data() const noexcept { return in_.get() + in_begin_; }
  [[nodiscard]] std::uint8_t* unread_data() noexcept { return in_.get() + in_begin_; }
  void consume(std::size_t size) noexcept { in_begin_ += size; }
  /// One recv() after what is unread, keeping room for at least `room` bytes: > 0 bytes
  /// received, 0 at the peer's orderly shutdown, -1 with errno (EAGAIN if nothing is there).
  long receive(std::size_t room);

  /// Why the last failure happened, when errno alone does not say it; empty otherwise.
  [[nodiscard]] virtual std::string failure_detail() const { return {}; }

 protected:
  /// Hands up to `size` bytes to the pipe: bytes taken (> 0), or -1 with errno (EAGAIN: full).
  virtual long push(const std::uint8_t* data, std::size_t size);
  /// Takes up to `size` bytes from the pipe: > 0, 0 once the peer closed, -1 with errno.
  virtual long pull(std::uint8_t* dst, std::size_t size);

 private:
  int fd_;
  std::unique_ptr<std::uint8_t[]> out_;  // allocated at the first write
  std::size_t begin_ = 0;                // first byte not yet sent
  std::size_t end_ = 0;                  // one past the last buffered byte
  std::unique_ptr<std::uint8_t[]> in_;   // allocated at the first read
  std::size_t in_begin_ = 0;             // first byte not yet consumed
  std::size_t in_end_ = 0;               // one past the last received byte
};

}  // namespace sempi::transport
