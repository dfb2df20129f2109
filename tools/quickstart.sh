#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: installs what is missing, builds, and then
#   demo   runs two 4-rank example jobs under the default policy and verifies an audit log
#   test   runs the whole test suite (ctest), then the same suite under ASan+UBSan
#   build  only builds
# Usage: bash tools/quickstart.sh demo|test|build
set -euo pipefail

mode="${1:-demo}"
case "$mode" in
  demo|test|build) ;;
  *)  # before anything is installed
    echo "usage: bash tools/quickstart.sh demo|test|build" >&2
    exit 2
    ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="$(nproc)"

packages=(build-essential cmake ninja-build pkg-config libssl-dev openssl libasio-dev
          nlohmann-json3-dev libspdlog-dev libgtest-dev libgmock-dev python3)
# The test suite also runs tests/mpi under Open MPI, to prove those programs test standard MPI
# behaviour and not sempi's own (the cross-check skips where Open MPI is absent).
if [ "$mode" = test ]; then
  # Open MPI runs the MPI test programs against the reference; the scanners check a rank's
  # listener from outside (tests/security/tls_scan_test.sh).
  packages+=(openmpi-bin libopenmpi-dev sslscan nmap)
fi

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "quickstart: installing ${missing[*]}"
  $sudo apt-get update -qq
  # Through env: sudo's env_reset would drop a variable set in front of it.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# build/ is a Release build (-O3), as deployed and benchmarked. The sanitizer build below is
# -O1 -g1: -O1 is what the sanitizers are meant for, and with line tables only (-g1, enough
# for file:line in reports) it compiles in half the time of -O2 -g; GCC's UBSan
# instrumentation at -O2 made that build the largest part of the whole test run. Without
# NDEBUG, deliberately: the assertions of header-only dependencies (nlohmann/json's) run too.
# Both builds keep libstdc++'s assertions (SEMPI_HARDENING, on by default).
build() {  # build DIR [extra cmake args]
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}

run_tests() {  # run_tests DIR
  ctest --test-dir "$1" --output-on-failure --no-tests=error -j"$jobs" --timeout 600
}

install_missing
case "$mode" in
  build)
    build build
    ;;
  demo)
    build build
    # The jobs' audit logs go to a new private directory: sempirun's default, ./sempi-audit,
    # is refused in a checkout others (or the group, under umask 002) may write to.
    audit="$(mktemp -d "${TMPDIR:-/tmp}/sempi-demo.XXXXXX")"
    echo "quickstart: 4-rank jobs (ring, then pi); their audit logs go to $audit"
    ./build/bin/sempirun -n 4 --audit-dir "$audit/ring" ./build/bin/ring
    ./build/bin/sempirun -n 4 --audit-dir "$audit/pi" ./build/bin/pi
    echo "quickstart: checking the ring job's sealed audit log: sempi audit verify"
    ./build/bin/sempi audit verify "$audit/ring"
    echo "quickstart: try build/bin/sempi audit report $audit/ring"
    ;;
  test)
    build build
    run_tests build
    echo "quickstart: the same suite under AddressSanitizer + UndefinedBehaviorSanitizer"
    build build-asan -DSEMPI_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_tests build-asan
    ;;
esac
