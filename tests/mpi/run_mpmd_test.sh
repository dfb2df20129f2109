#!/usr/bin/env bash
# Runs tests/mpi/appnum.c as three programs of one job, as `mpirun -n 1 a : -n 2 b : -n 1 c`:
# each rank checks that MPI_APPNUM is its program's index, and rank 0 reports all of them in
# rank order. Usage: run_mpmd_test.sh SEMPIRUN APPNUM_PROGRAM
set -uo pipefail
sempirun="$1"
program="$2"
work="$(mktemp -d "${TMPDIR:-/tmp}/sempi-mpmd-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
output="$("$sempirun" --timeout 60 -n 1 "$program" 0 : -np 2 "$program" 1 : -n 1 "$program" 2 2>&1)"
status=$?
printf '%s\n' "$output"
if [ "$status" -ne 0 ]; then
  echo "the MPMD job ended with status $status" >&2
  exit 1
fi
if [ "$output" != "appnums: 0 1 1 2" ]; then
  echo "expected rank 0 to report 'appnums: 0 1 1 2'" >&2
  exit 1
fi
# The launcher's job.start names each program and its ranks.
if ! grep -q '"apps":\[{"program":"'"$program"'","first_rank":0,"ranks":1},{"program":"'"$program"'","first_rank":1,"ranks":2},{"program":"'"$program"'","first_rank":3,"ranks":1}\]' \
    sempi-audit/*/launcher.jsonl; then
  echo "expected job.start to list the three programs and their ranks:" >&2
  grep job.start sempi-audit/*/launcher.jsonl >&2
  exit 1
fi
