#!/usr/bin/env bash
# Builds every tests/mpi/*.c with Open MPI's mpicc and runs it with mpirun at 1..4 ranks: the
# tests are written against the MPI standard only, so they must pass under a reference MPI too.
# Exits 77 (skipped) when Open MPI is not installed; with --install it installs openmpi-bin and
# libopenmpi-dev via apt-get first. Programs named fatal_* must make the job fail.
# Usage: run_under_openmpi.sh [--install] [NAME...]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "${1:-}" = "--install" ]; then
  shift
  if ! command -v mpicc > /dev/null || ! mpicc --showme:version 2>&1 | grep -qi "open mpi"; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      --no-install-recommends openmpi-bin libopenmpi-dev > /dev/null
  fi
fi
if ! command -v mpicc > /dev/null || ! command -v mpirun > /dev/null ||
   ! mpicc --showme:version 2>&1 | grep -qi "open mpi"; then
  echo "SKIP: Open MPI (openmpi-bin, libopenmpi-dev) is not installed"
  exit 77
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sources=()
if [ $# -gt 0 ]; then
  for name in "$@"; do sources+=("$here/$name.c"); done
else
  sources=("$here"/*.c)
fi

passed=0
failed=0
for src in "${sources[@]}"; do
  name="$(basename "$src" .c)"
  if ! mpicc -Wall -Wextra -Werror -O1 -g -pthread "$src" -o "$work/$name"; then
    echo "FAIL: $name does not build with Open MPI"
    failed=$((failed + 1))
    continue
  fi
  for n in 1 2 3 4; do
    # Loopback only: Open MPI leaves lo out of its TCP transports unless told.
    timeout 120 mpirun --oversubscribe --allow-run-as-root --mca btl self,tcp \
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -n "$n" \
      "$work/$name" > "$work/$name.$n.log" 2>&1
    status=$?
    ok=0
    case "$name" in
      fatal_*) [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && ok=1 ;;
      *) [ "$status" -eq 0 ] && ok=1 ;;
    esac
    if [ "$ok" -eq 1 ]; then
      passed=$((passed + 1))
    else
      echo "FAIL: $name at $n ranks (status $status):"
      tail -n 20 "$work/$name.$n.log"
      failed=$((failed + 1))
    fi
  done
done
echo "openmpi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
