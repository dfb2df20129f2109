#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds one MPI program three ways against the
# installed tree: the installed sempicc/sempicxx, pkg-config (sempi-mpi.pc) and
# find_package(sempi) with sempi::sempi_mpi; each runs under sempirun at 2 ranks.
# Usage: install_test.sh BUILD_DIR SCRATCH_DIR SEMPIRUN
set -euo pipefail
build="$1"
scratch="$2"
sempirun="$3"
rm -rf "$scratch"
mkdir -p "$scratch/src"
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" > "$scratch/install.log"

cat > "$scratch/src/hello.c" <<'PROGRAM'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (sum != size * (size - 1) / 2) MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank == 0) printf("hello from %d ranks\n", size);
  MPI_Finalize();
  return 0;
}
PROGRAM
cp "$scratch/src/hello.c" "$scratch/src/hello.cpp"

# The jobs run in a private directory: their ./sempi-audit goes with it.
jobs="$(mktemp -d "${TMPDIR:-/tmp}/sempi-mpi-install.XXXXXX")"
trap 'rm -rf "$jobs"' EXIT
run() {  # run PROGRAM: two ranks, must greet
  (cd "$jobs" && "$sempirun" -n 2 --timeout 60 "$1") | grep -q "hello from 2 ranks"
}

# 1. The installed wrappers (found relative to their own location).
"$prefix/bin/sempicc" -Wall -Wextra -Werror "$scratch/src/hello.c" -o "$scratch/hello_cc"
run "$scratch/hello_cc"
"$prefix/bin/sempicxx" -Wall -Wextra -Wold-style-cast -Wzero-as-null-pointer-constant -Werror \
  "$scratch/src/hello.cpp" -o "$scratch/hello_cxx"
run "$scratch/hello_cxx"
case "$("$prefix/bin/sempicc" -show x.c)" in
  *"$prefix"*) ;;
  *) echo "installed sempicc does not point into the install prefix" >&2; exit 1 ;;
esac

# 2. pkg-config.
if command -v pkg-config > /dev/null; then
  pc_dir="$(dirname "$(find "$prefix" -name sempi-mpi.pc | head -n1)")"
  flags="$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs sempi-mpi)"
  # shellcheck disable=SC2086
  cc -Wall -Wextra -Werror "$scratch/src/hello.c" -o "$scratch/hello_pc" $flags
  run "$scratch/hello_pc"
fi

# 3. CMake package.
cat > "$scratch/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(hello C)
find_package(sempi REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE sempi::sempi_mpi)
CMAKE
cmake -S "$scratch/src" -B "$scratch/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$scratch/cmake.log"
cmake --build "$scratch/cmake-build" >> "$scratch/cmake.log"
run "$scratch/cmake-build/hello"
echo "install test: wrappers, pkg-config and find_package(sempi) all work"
