#!/usr/bin/env bash
# Compiles every MPI test program with the given wrapper (the build tree's sempicc), warnings
# as errors, into OUTDIR. Usage: build_mpi_tests.sh WRAPPER OUTDIR SOURCE...
set -euo pipefail
wrapper="$1"
outdir="$2"
shift 2
mkdir -p "$outdir"
# The wrapper itself: -show must name our header path and library without running anything.
shown="$("$wrapper" -show -o prog prog.c)"
case "$shown" in
  *-lsempi_mpi*) ;;
  *) echo "sempicc -show does not link libsempi_mpi: $shown" >&2; exit 1 ;;
esac
case "$("$wrapper" -show -c prog.c)" in
  *-lsempi_mpi*) echo "sempicc -c must not add link flags" >&2; exit 1 ;;
esac
failed=0
for src in "$@"; do
  name="$(basename "$src" .c)"
  # Compile and link in separate steps, as build systems do.
  if ! "$wrapper" -Wall -Wextra -Werror -O1 -g -c "$src" -o "$outdir/$name.o" ||
     ! "$wrapper" -pthread "$outdir/$name.o" -o "$outdir/$name"; then
    echo "FAILED to build $src" >&2
    failed=1
  fi
done
exit "$failed"
