#include "coll/tuning.hpp"

#include <cstdlib>
#include <limits>
#include <string>

#include "sempi/error.hpp"

namespace sempi::detail::coll {
namespace {

std::size_t env_size(const char* variable, std::size_t fallback) {
  const char* value = std::getenv(variable);
  return value == nullptr || *value == '\0' ? fallback : parse_size(variable, value);
}

}  // namespace

std::size_t parse_size(std::string_view variable, std::string_view text) {
  const auto bad = [&] {
    return Error(ErrorClass::config, std::string(variable) + "='" + std::string(text) +
                                         "' is not a size: use an integer with an optional K, M "
                                         "or G suffix, e.g. 65536 or 64K");
  };
  std::size_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) throw bad();
    value = value * 10 + digit;
  }
  if (i == 0) throw bad();
  int shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: throw bad();
    }
    if (++i != text.size()) throw bad();
  }
  if (shift != 0 && value > (std::numeric_limits<std::size_t>::max() >> shift)) throw bad();
  return value << shift;
}

Thresholds Thresholds::from_environment(bool job_oversubscribed) {
  Thresholds t;
  if (job_oversubscribed) {
    t.bcast_scatter_allgather_min = std::numeric_limits<std::size_t>::max();
    t.reduce_rabenseifner_min = std::numeric_limits<std::size_t>::max();
  }
  t.bcast_scatter_allgather_min =
      env_size("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", t.bcast_scatter_allgather_min);
  const std::size_t ranks = env_size("SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS",
                                     static_cast<std::size_t>(t.bcast_scatter_allgather_min_ranks));
  t.bcast_scatter_allgather_min_ranks =
      static_cast<int>(std::min<std::size_t>(ranks, std::numeric_limits<int>::max()));
  t.allreduce_rabenseifner_min =
      env_size("SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN", t.allreduce_rabenseifner_min);
  t.allreduce_ring_min = env_size("SEMPI_COLL_ALLREDUCE_RING_MIN", t.allreduce_ring_min);
  t.reduce_rabenseifner_min =
      env_size("SEMPI_COLL_REDUCE_RABENSEIFNER_MIN", t.reduce_rabenseifner_min);
  t.allgather_ring_min = env_size("SEMPI_COLL_ALLGATHER_RING_MIN", t.allgather_ring_min);
  return t;
}

BcastAlgorithm choose_bcast(const Thresholds& t, std::size_t bytes, int ranks) {
  // Scatter + allgather moves 2n(p-1)/p bytes per rank instead of n log p, at the price of
  // p - 1 + log p latencies: worth it for long messages on more than a few ranks.
  if (ranks > 1 && bytes >= t.bcast_scatter_allgather_min &&
      ranks >= t.bcast_scatter_allgather_min_ranks && bytes >= static_cast<std::size_t>(ranks)) {
    return BcastAlgorithm::scatter_allgather;
  }
  return BcastAlgorithm::binomial;
}

AllreduceAlgorithm choose_allreduce(const Thresholds& t, std::size_t bytes, int count, int ranks,
                                    bool commutative) {
  if (ranks == 1) return AllreduceAlgorithm::recursive_doubling;
  // The ring's fixed combination order wraps around the ring: commutative operations only.
  if (commutative && bytes >= t.allreduce_ring_min && count >= ranks) {
    return AllreduceAlgorithm::ring;
  }
  if (bytes >= t.allreduce_rabenseifner_min && count >= floor_pow2(ranks)) {
    return AllreduceAlgorithm::rabenseifner;
  }
  return AllreduceAlgorithm::recursive_doubling;
}

ReduceAlgorithm choose_reduce(const Thresholds& t, std::size_t bytes, int count, int ranks,
                              bool /*commutative: both algorithms keep rank order*/) {
  if (ranks > 1 && bytes >= t.reduce_rabenseifner_min && count >= floor_pow2(ranks)) {
    return ReduceAlgorithm::rabenseifner;
  }
  return ReduceAlgorithm::binomial;
}

AllgatherAlgorithm choose_allgather(const Thresholds& t, std::size_t total_bytes, int ranks) {
  if (ranks > 1 && total_bytes >= t.allgather_ring_min) return AllgatherAlgorithm::ring;
  return AllgatherAlgorithm::bruck;
}

const char* algorithm_name(BcastAlgorithm a) {
  return a == BcastAlgorithm::binomial ? "binomial" : "scatter_allgather";
}
const char* algorithm_name(AllreduceAlgorithm a) {
  switch (a) {
    case AllreduceAlgorithm::recursive_doubling: return "recursive_doubling";
    case AllreduceAlgorithm::rabenseifner: return "rabenseifner";
    case AllreduceAlgorithm::ring: return "ring";
  }
  return "unknown";
}
const char* algorithm_name(ReduceAlgorithm a) {
  return a == ReduceAlgorithm::binomial ? "binomial" : "rabenseifner";
}
const char* algorithm_name(AllgatherAlgorithm a) {
  return a == AllgatherAlgorithm::bruck ? "bruck" : "ring";
}

}  // namespace sempi::detail::coll
