#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, checks the installed layout, then builds and
# runs a separate project that uses find_package(sempi).
set -euo pipefail
build_dir="$1"
source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"  # the jobs' ./sempi-audit goes with it
prefix="$work/prefix"

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
for f in bin/sempi bin/sempirun include/sempi/sempi.hpp lib/cmake/sempi/sempiConfig.cmake; do
  [ -e "$prefix/$f" ] || { echo "missing installed file: $f"; exit 1; }
done
ls "$prefix"/lib/libsempi.so* >/dev/null || { echo "missing libsempi.so"; exit 1; }
"$prefix/bin/sempi" version | grep -q "sempi " || { echo "installed sempi does not run"; exit 1; }
"$prefix/bin/sempirun" -n 2 true || { echo "installed sempirun does not run"; exit 1; }

cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer" | grep -q "consumer: 42"
"$prefix/bin/sempirun" -n 2 "$work/consumer/consumer" >/dev/null
echo "install test: OK"
