// A deterministic stand-in for libFuzzer, so every build (gcc included, and the sanitizer build
// in CI) runs the fuzz targets: it replays structured seeds, then feeds a fixed number of
// mutations of them (seeded PRNG: the same inputs every run, so a failure reproduces).
//
// usage: fuzz_driver [ITERATIONS]

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "transport/frame.hpp"
#include "transport/hello.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::vector<std::uint8_t>> seeds() {
  std::vector<std::vector<std::uint8_t>> out;
  // A valid frame header (selector 0).
  sempi::transport::FrameHeader h;
  h.type = sempi::transport::FrameType::eager;
  h.length = 100;
  h.sequence = 7;
  auto frame = sempi::transport::encode_frame_header(h);
  std::vector<std::uint8_t> f = {0};
  f.insert(f.end(), frame.begin(), frame.end());
  f.push_back(16);
  out.push_back(f);
  // A valid HELLO (selector 1).
  sempi::transport::Hello hello;
  hello.world_size = 4;
  hello.rank = 2;
  auto hb = sempi::transport::encode_hello(hello);
  std::vector<std::uint8_t> hv = {1};
  hv.insert(hv.end(), hb.begin(), hb.end());
  out.push_back(hv);
  // Bootstrap messages (selector 2): valid, truncated, oversize length, not an object.
  auto message = [](const std::string& body) {
    std::vector<std::uint8_t> m = {2};
    const auto n = static_cast<std::uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) m.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
    m.insert(m.end(), body.begin(), body.end());
    return m;
  };
  out.push_back(message(R"({"type":"finalize_ok"})"));
  out.push_back(message(R"([1,2,3])"));
  out.push_back(message(R"({"type":7})"));
  out.push_back({2, 0xff, 0xff, 0xff, 0x7f, '{'});
  out.push_back(message(R"({"type":"welcome","size":2,"local_endpoints":)"
                        R"([{"host":"h","path":"/tmp/d/rank-1.sock"},null]})"));
  // Records (selector 3): data, a requested KeyUpdate, data, a record padded with zeros,
  // close_notify.
  // Once per suite (the byte after the selector): AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305.
  for (std::uint8_t suite = 0; suite < 3; ++suite) {
    out.push_back({3, suite, 0, 5, 0, 'h', 'e', 'l', 'l', 'o', 1, 6, 0, 22, 24, 0, 0, 1, 1,
                   0, 3, 0, 'a', 'b', 'c', 1, 4, 0, 0, 'x', 23, 0, 1, 3, 0, 21, 1, 0});
  }
  // Policies (selector 4): segments, tag ranges, size limits, a dry run; and audit log lines
  // (selector 5): a message record, a seal, one nested deeply.
  auto text = [](std::uint8_t selector, const std::string& body) {
    std::vector<std::uint8_t> t = {selector};
    t.insert(t.end(), body.begin(), body.end());
    return t;
  };
  out.push_back(text(4, R"({"version":1,"groups":{"a":"0-1","b":["2","3"]},)"
                        R"("segmentation":[{"between":["a","b"],"communicators":["solver"]},)"
                        R"({"between":["a","a"]}],"communicators":[{"name":"world","members":"*",)"
                        R"("collectives":["barrier","reduce"],"p2p_tags":["0-9"],"max_message_bytes":65536},)"
                        R"({"name":"sol*","members":["a","b"],"collectives":"*","p2p_tags":"*"}],)"
                        R"("limits":{"max_message_bytes":1048576}})"));
  out.push_back(text(4, R"({"version":1,"mode":"audit","on_violation":"abort","groups":{"all":"*"},)"
                        R"("segmentation":[],"communicators":[{"name":"*","members":"*",)"
                        R"("collectives":"*","p2p_tags":[5,"7-100"]}]})"));
  out.push_back(text(5, R"({"@timestamp":"2026-12-06T01:13:02.549618Z","event":{"sequence":5,)"
                        R"("action":"message.send","outcome":"success"},"sempi":{"rank":0,"peer":1,)"
                        R"("comm":"world","op":"p2p","tag":5,"bytes":4,"msg":1,"prev":"cd57"}})"));
  out.push_back(text(5, std::string(200, '[') + std::string(200, ']')));
  // Shared-ring scripts (selector 6, fuzz_ring.cpp): the peer publishes, we receive, send, and
  // it consumes; then the same past the ring's end (large counts: second count byte % 4 == 0),
  // with a head moved back and a tail set beyond what we sent.
  out.push_back({6, 0, 200, 1, 9, 2, 10, 3, 100, 1, 4, 50, 0, 2, 0, 2, 0, 2, 0, 0, 0, 2, 9,
                 6, 3, 7, 2, 1});
  out.push_back({6, 0, 250, 0, 0, 3, 2, 1, 0, 200, 0, 0, 1, 2, 1, 1, 3, 2, 3, 250, 0, 0,
                 4, 255, 255, 3, 100, 1, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 10, 1, 1, 0});
  // We fill the ring (65,535 bytes, then 1), the peer sets our tail one past our head, and we
  // send on: the stream must refuse that tail.
  out.push_back({6, 3, 255, 0, 255, 3, 1, 1, 5, 1, 3, 3, 10, 1, 2, 1});
  // The peer rings us twice, asks for a wake-up, and closes its socket; we send (the wake-up
  // fails: the peer is gone), send again (EPIPE), read (end of stream), go to sleep (at once
  // ready) and read the socket.
  out.push_back({6, 8, 0, 8, 0, 7, 1, 9, 3, 10, 1, 3, 5, 1, 2, 0, 10, 11});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
  const auto corpus = seeds();
  for (const auto& s : corpus) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(0x5e3b1);
  for (long i = 0; i < iterations; ++i) {
    auto input = corpus[static_cast<std::size_t>(rng() % corpus.size())];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:  // flip a byte
          if (input.size() > 1) input[1 + rng() % (input.size() - 1)] ^= static_cast<std::uint8_t>(rng());
          break;
        case 1:  // truncate
          if (input.size() > 1) input.resize(1 + rng() % input.size());
          break;
        case 2:  // append garbage
          for (int k = static_cast<int>(rng() % 16); k > 0; --k) input.push_back(static_cast<std::uint8_t>(rng()));
          break;
        default:  // set an interesting value
          if (input.size() > 1) input[1 + rng() % (input.size() - 1)] = (rng() & 1) ? 0xff : 0x00;
          break;
      }
    }
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz_driver: %zu seeds and %ld mutations, no crash\n", corpus.size(), iterations);
  return 0;
}
