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

  // The sum arrives at rank 0 (binomial tree, deterministic combination order).
  const double pi = world.reduce(partial, sempi::Op::sum(), 0);
  if (world.rank() == 0) {
    const double error = std::fabs(pi - M_PI);
    std::printf("pi: %.12f (error %.2e) from %ld intervals on %d ranks in %.3f s\n", pi, error,
                intervals, world.size(), sempi::Environment::wtime() - start);
    return error < 1e-6 ? 0 : 1;
  }
  return 0;
}
