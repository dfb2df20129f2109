// Fuzz target for everything a peer or a rank can feed the parsers: frame headers, HELLO
// payloads and bootstrap messages (and a welcome's socket table) before any trust is
// established, and TLS records after the handshake (fuzz_records.cpp); and the JSON that people
// and files feed the tools: policies and audit log lines (fuzz_policy.cpp). The first input byte
// picks the parser. Built as a libFuzzer target with clang (-DSEMPI_FUZZ=ON), and always as a
// deterministic replay/mutation test (fuzz_driver.cpp) so every build exercises it.

#include <cstddef>
#include <cstdint>
#include <span>

#include <sys/socket.h>
#include <unistd.h>

#include "launch/bootstrap_protocol.hpp"
#include "sempi/error.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"

void fuzz_record_layer(std::span<const std::uint8_t> input);
void fuzz_policy(std::span<const std::uint8_t> input);
void fuzz_audit_line(std::span<const std::uint8_t> input);
void fuzz_ring_stream(std::span<const std::uint8_t> input);

namespace {

// A welcome's socket table either is refused with sempi::Error or gives one entry per rank, each
// empty or an absolute path (nothing else may reach a dial).
void check_welcome_local_paths(const nlohmann::json& welcome) {
  const auto* claimed = welcome.contains("size")
                           ? welcome.at("size").get_ptr<const nlohmann::json::number_integer_t*>()
                           : nullptr;
  const int size = claimed != nullptr && *claimed >= 0 && *claimed <= 64 ? static_cast<int>(*claimed) : 2;
  try {
    const auto paths = sempi::launch::welcome_local_paths(welcome, size, "h");
    if (paths.size() != static_cast<std::size_t>(size)) __builtin_trap();
    for (const auto& path : paths) {
      if (!path.empty() && path.front() != '/') __builtin_trap();
    }
  } catch (const sempi::Error&) {
    // refused: the rank reports it and does not start
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t selector = data[0] % 7;
  const std::span<const std::uint8_t> input(data + 1, size - 1);
  switch (selector) {
    case 0: {
      // Frame headers: any 48 bytes, any limits and expected sequence derived from the input.
      if (input.size() < sempi::transport::kFrameHeaderSize) return 0;
      sempi::transport::FrameHeader header;
      const std::uint64_t limit = input.size() > 48 ? input[48] * 4096ull : 1 << 20;
      const auto ec = sempi::transport::decode_frame_header(
          input.first<sempi::transport::kFrameHeaderSize>(), limit, input[24], header);
      if (!ec) {
        // Whatever decodes must re-encode to the same bytes (nothing is silently normalised).
        const auto again = sempi::transport::encode_frame_header(header);
        for (std::size_t i = 0; i < again.size(); ++i) {
          if (again[i] != input[i]) __builtin_trap();
        }
        if (header.length > limit) __builtin_trap();
      }
      break;
    }
    case 1: {
      sempi::transport::Hello hello;
      if (!sempi::transport::decode_hello(input, hello)) {
        if (hello.rank >= hello.world_size) __builtin_trap();
      }
      break;
    }
    case 2: {
      // Bootstrap messages arrive on a socket: push the bytes through a real socketpair.
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return 0;
      const std::size_t n = input.size() < 100000 ? input.size() : 100000;
      if (n > 0) (void)::send(fds[1], input.data(), n, MSG_NOSIGNAL);
      ::close(fds[1]);
      sempi::launch::BootstrapReader reader;
      (void)reader.feed(fds[0]);
      nlohmann::json message;
      std::error_code error;
      while (reader.next(message, error)) {
        if (!message.is_object() || !message["type"].is_string()) __builtin_trap();
        if (message["type"] == "welcome") check_welcome_local_paths(message);
      }
      ::close(fds[0]);
      break;
    }
    case 3:
      fuzz_record_layer(input);
      break;
    case 4:
      fuzz_policy(input);
      break;
    case 5:
      fuzz_audit_line(input);
      break;
    case 6:
      fuzz_ring_stream(input);
      break;
  }
  return 0;
}
