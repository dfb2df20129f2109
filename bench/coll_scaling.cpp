// Times each collective algorithm over message sizes 8 B .. 4 MiB on the ranks it runs on, and
// prints a Markdown table (microseconds per operation; the slowest rank's time, median of
// repetitions). Every algorithm is forced through the SEMPI_COLL_* thresholds (src/coll/tuning.hpp),
// set identically on every rank before each series.
// Run: sempirun -n 8 ./coll_scaling [max_bytes]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sempi/sempi.hpp>

namespace {

struct Series {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;  // thresholds forcing the algorithm
  // Runs one operation on `bytes` (the whole vector for bcast/reduce/allreduce; the gathered
  // total for allgather and a rank's whole send vector for alltoall).
  void (*run)(const sempi::Communicator&, std::vector<double>&, std::vector<double>&, std::size_t);
};

int doubles(std::size_t bytes) { return static_cast<int>(std::max<std::size_t>(1, bytes / sizeof(double))); }

void bcast(const sempi::Communicator& c, std::vector<double>& a, std::vector<double>&, std::size_t b) {
  c.bcast(a.data(), doubles(b), 0);
}
void allreduce(const sempi::Communicator& c, std::vector<double>& a, std::vector<double>& r, std::size_t b) {
  c.allreduce(a.data(), r.data(), doubles(b), sempi::Op::sum());
}
void reduce(const sempi::Communicator& c, std::vector<double>& a, std::vector<double>& r, std::size_t b) {
  c.reduce(a.data(), r.data(), doubles(b), sempi::Op::sum(), 0);
}
void allgather(const sempi::Communicator& c, std::vector<double>& a, std::vector<double>& r, std::size_t b) {
  const auto block = std::max<std::size_t>(1, b / static_cast<std::size_t>(c.size()));
  c.allgather_bytes(a.data(), block, r.data());
}
void alltoall(const sempi::Communicator& c, std::vector<double>& a, std::vector<double>& r, std::size_t b) {
  const auto block = std::max<std::size_t>(1, b / static_cast<std::size_t>(c.size()));
  c.alltoall_bytes(a.data(), block, r.data());
}
void barrier(const sempi::Communicator& c, std::vector<double>&, std::vector<double>&, std::size_t) {
  c.barrier();
}

const char* kAll[] = {"SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", "SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS",
                      "SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN", "SEMPI_COLL_ALLREDUCE_RING_MIN",
                      "SEMPI_COLL_REDUCE_RABENSEIFNER_MIN",   "SEMPI_COLL_ALLGATHER_RING_MIN"};

}  // namespace

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  const std::size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (4u << 20);
  const std::vector<Series> series = {
      {"barrier / dissemination", {}, barrier},
      {"bcast / binomial", {{"SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", "1G"}}, bcast},
      {"bcast / scatter+allgather", {{"SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN", "0"}, {"SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN_RANKS", "1"}}, bcast},
      {"reduce / binomial", {{"SEMPI_COLL_REDUCE_RABENSEIFNER_MIN", "1G"}}, reduce},
      {"reduce / rabenseifner", {{"SEMPI_COLL_REDUCE_RABENSEIFNER_MIN", "0"}}, reduce},
      {"allreduce / recursive doubling", {{"SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN", "1G"}, {"SEMPI_COLL_ALLREDUCE_RING_MIN", "1G"}}, allreduce},
      {"allreduce / rabenseifner", {{"SEMPI_COLL_ALLREDUCE_RABENSEIFNER_MIN", "0"}, {"SEMPI_COLL_ALLREDUCE_RING_MIN", "1G"}}, allreduce},
      {"allreduce / ring", {{"SEMPI_COLL_ALLREDUCE_RING_MIN", "0"}}, allreduce},
      {"allgather / bruck", {{"SEMPI_COLL_ALLGATHER_RING_MIN", "1G"}}, allgather},
      {"allgather / ring", {{"SEMPI_COLL_ALLGATHER_RING_MIN", "0"}}, allgather},
      {"alltoall / pairwise", {}, alltoall},
  };
  std::vector<std::size_t> sizes;
  for (std::size_t b = 8; b <= max_bytes; b *= 8) sizes.push_back(b);
  if (sizes.back() != max_bytes) sizes.push_back(max_bytes);

  const std::size_t words = max_bytes / sizeof(double) + 1;
  std::vector<double> a(words, 1.0), r(words * 2, 0.0);
  if (world.rank() == 0) {
    std::printf("\n%d ranks (us per operation, slowest rank, median of repetitions)\n\n| algorithm |", world.size());
    for (const auto b : sizes) {
      if (b >= (1u << 20)) std::printf(" %zu MiB |", b >> 20);
      else if (b >= 1024) std::printf(" %zu KiB |", b >> 10);
      else std::printf(" %zu B |", b);
    }
    std::printf("\n|---|");
    for (std::size_t i = 0; i < sizes.size(); ++i) std::printf("---:|");
    std::printf("\n");
  }
  for (const auto& s : series) {
    for (const char* v : kAll) ::unsetenv(v);
    for (const auto& [k, v] : s.env) ::setenv(k, v, 1);
    if (world.rank() == 0) std::printf("| %s |", s.name);
    for (const auto b : sizes) {
      if (s.run == barrier && b != sizes.front()) {
        if (world.rank() == 0) std::printf(" |");
        continue;
      }
      // About 0.2 s of work per point at ~100 MB/s, at least 3 and at most 50 repetitions.
      const int reps = static_cast<int>(std::clamp<std::size_t>((20u << 20) / b, 3, 50));
      s.run(world, a, r, b);  // warm up
      std::vector<double> times;
      for (int i = 0; i < reps; ++i) {
        world.barrier();
        const double t0 = sempi::Environment::wtime();
        s.run(world, a, r, b);
        const double mine = sempi::Environment::wtime() - t0;
        times.push_back(world.allreduce(mine, sempi::Op::max()));
      }
      std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
      if (world.rank() == 0) std::printf(" %.0f |", times[times.size() / 2] * 1e6);
    }
    if (world.rank() == 0) {
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
