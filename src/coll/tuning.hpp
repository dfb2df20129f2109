#pragma once
// Algorithm selection for the collectives, by message size and communicator size, with
// thresholds tunable through the environment (like MPICH's MPIR_CVAR_* variables). All ranks
// must set the same values, or leave them unset alike (in a job whose ranks outnumber a host's
// CPUs, an unset bcast or reduce threshold is not its default: see from_environment). A rank
// that picks another algorithm than its peers would exchange messages nobody expects (the
// collective then fails with a size mismatch or hangs until the job's timeout).
//
//   variable                                      default   meaning
//   SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN        256 KiB   bcast: scatter + ring allgather
//                                                           (van de Geijn) from this many bytes
//                                                           (never, by default, in a job whose
//                                                           ranks outnumber a host's CPUs),
//   SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS  4         ... on at least this many ranks;
//                                                           binomial tree otherwise
//   SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN         16 KiB    allreduce: Rabenseifner (reduce-
//                                                           scatter + allgather) from this many
//                                                           bytes (and count >= 2^floor(log2 p));
//                                                           recursive doubling below
//   SEMPI_COLL_ALLREDUCE_RING_MIN                 4 MiB     allreduce: ring from this many bytes
//                                                           if the op is commutative
//   SEMPI_COLL_REDUCE_RABENSEIFNER_MIN            2 MiB     reduce: reduce-scatter + gather from
//                                                           this many bytes (never, by default,
//                                                           in a job whose ranks outnumber a
//                                                           host's CPUs); binomial below
//   SEMPI_COLL_ALLGATHER_RING_MIN                 256 KiB   allgather: ring when the gathered
//                                                           total is at least this; Bruck below
//
// Values are byte counts (plain integers, optionally with a K, M or G suffix meaning KiB, MiB,
// GiB) or rank counts. An unparsable value throws sempi::Error(config) naming the variable.
// Set a threshold to 0 to force an algorithm, or to a huge value ("1G") to disable it.

#include <cstddef>
#include <string_view>

namespace sempi::detail::coll {

struct Thresholds {
  std::size_t bcast_scatter_allgather_min = 256 * 1024;
  int bcast_scatter_allgather_min_ranks = 4;
  std::size_t allreduce_rabenseifner_min = 16 * 1024;
  std::size_t allreduce_ring_min = 4 * 1024 * 1024;
  std::size_t reduce_rabenseifner_min = 2 * 1024 * 1024;
  std::size_t allgather_ring_min = 256 * 1024;

  /// Defaults overridden by the SEMPI_COLL_* environment variables (read on every call, so a
  /// program, e.g. the benchmark, may change them between collectives on all ranks).
  /// `job_oversubscribed` (EngineConfig): the job's ranks outnumber a host's CPUs. Then the
  /// work of all ranks together, not one rank's critical path, is what takes the time, and
  /// bcast and reduce keep to the binomial tree, which moves fewer bytes in all: (p-1) n,
  /// against about (p-1) n + n log2(p) / 2 for scatter + allgather and (p-1) n + (p-1) n / p
  /// for reduce-scatter + gather (20-40 % faster at 4 and 8 ranks on 2 cores, bench/RESULTS.md
  /// thirtieth session), unless the variables say otherwise.
  static Thresholds from_environment(bool job_oversubscribed = false);
};

/// Parses "123", "64K", "4M", "1G" (binary multiples). Throws sempi::Error(config).
std::size_t parse_size(std::string_view variable, std::string_view text);

enum class BcastAlgorithm { binomial, scatter_allgather };
enum class AllreduceAlgorithm { recursive_doubling, rabenseifner, ring };
enum class ReduceAlgorithm { binomial, rabenseifner };
enum class AllgatherAlgorithm { bruck, ring };

/// Largest power of two <= n (n >= 1).
constexpr int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

BcastAlgorithm choose_bcast(const Thresholds& t, std::size_t bytes, int ranks);
AllreduceAlgorithm choose_allreduce(const Thresholds& t, std::size_t bytes, int count, int ranks,
                                    bool commutative);
ReduceAlgorithm choose_reduce(const Thresholds& t, std::size_t bytes, int count, int ranks,
                              bool commutative);
AllgatherAlgorithm choose_allgather(const Thresholds& t, std::size_t total_bytes, int ranks);

const char* algorithm_name(BcastAlgorithm a);
const char* algorithm_name(AllreduceAlgorithm a);
const char* algorithm_name(ReduceAlgorithm a);
const char* algorithm_name(AllgatherAlgorithm a);

}  // namespace sempi::detail::coll
