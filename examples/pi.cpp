// Computes pi by integrating 4/(1+x^2) over [0,1] with the midpoint rule, split across ranks.
// Run: sempirun -n 4 ./pi [intervals]

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <sempi/sempi.hpp>

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  const long intervals = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  const double h = 1.0 / static_cast<double>(intervals);
  const double start = sempi::Environment::wtime();

  double partial = 0.0;
  for (long i = world.rank(); i < intervals; i += world.size()) {
    const double x = h * (static_cast<double>(i) + 0.5);
    partial += 4.0 / (1.0 + x * x);
  }
  partial *= h;

  constexpr int kTag = 1;
  if (world.rank() == 0) {
    double pi = partial;
    for (int r = 1; r < world.size(); ++r) {
      double part = 0.0;
      world.recv(part, r, kTag);
      pi += part;
    }
    const double error = std::fabs(pi - M_PI);
    std::printf("pi: %.12f (error %.2e) from %ld intervals on %d ranks in %.3f s\n", pi, error,
                intervals, world.size(), sempi::Environment::wtime() - start);
    return error < 1e-6 ? 0 : 1;
  }
  world.send(partial, 0, kTag);
  return 0;
}
