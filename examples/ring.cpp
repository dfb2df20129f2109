// Passes a token around the ring of ranks: each rank adds its rank number, rank 0 checks the sum.
// Run: sempirun -n 4 ./ring

#include <cstdio>

#include <sempi/sempi.hpp>

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  const int rank = world.rank();
  const int size = world.size();
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  constexpr int kLaps = 3;
  constexpr int kTag = 7;

  long token = 0;
  for (int lap = 0; lap < kLaps; ++lap) {
    if (rank == 0) {
      token += rank;
      world.send(token, next, kTag);
      world.recv(token, prev, kTag);
    } else {
      world.recv(token, prev, kTag);
      token += rank;
      world.send(token, next, kTag);
    }
  }
  if (rank == 0) {
    const long expected = static_cast<long>(kLaps) * size * (size - 1) / 2;
    std::printf("ring: %d ranks, %d laps, token %ld (expected %ld) over mutually authenticated "
                "TLS 1.3, job %s\n",
                size, kLaps, token, expected, sempi::Environment::job_id().c_str());
    return token == expected ? 0 : 1;
  }
  return 0;
}
