// Built against an installed sempi: runs as a singleton and exchanges a message with itself.
#include <cstdio>

#include <sempi/sempi.hpp>

int main(int argc, char** argv) {
  sempi::Environment env(argc, argv);
  const auto world = sempi::world();
  int in = 0;
  auto r = world.irecv(&in, 1, world.rank(), 5);
  world.send(42, world.rank(), 5);
  r.wait();
  std::printf("consumer: %d %s\n", in, sempi::library_version());
  return in == 42 ? 0 : 1;
}
