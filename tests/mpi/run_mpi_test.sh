#!/usr/bin/env bash
# Runs one MPI test program under sempirun. Programs named fatal_* must fail: they check that
# the default MPI_ERRORS_ARE_FATAL handler takes the job down with a nonzero status and names the
# error class. A program whose POLICY X.json has an X.status next to it must end the job with
# that status (within the --timeout below). The audit logs of the others must verify.
# Usage: run_mpi_test.sh SEMPIRUN PROGRAM NRANKS [POLICY]
set -uo pipefail
sempirun="$1"
program="$2"
n="$3"
policy=()
expected_status=""
if [ $# -ge 4 ]; then
  policy=(--policy "$4")
  [ -f "${4%.json}.status" ] && expected_status="$(cat "${4%.json}.status")"
fi
# A private scratch directory for what the job leaves (its ./sempi-audit), removed afterwards.
work="$(mktemp -d "${TMPDIR:-/tmp}/sempi-mpi-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
output="$("$sempirun" -n "$n" --timeout 60 ${policy[@]+"${policy[@]}"} "$program" 2>&1)"
status=$?
printf '%s\n' "$output"
case "$(basename "$program")" in
  fatal_*)
    if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
      echo "expected the job to abort, got status $status" >&2
      exit 1
    fi
    # One line per failing rank, naming the rank, the call and the error class.
    if ! grep -Eq "sempi\[rank [0-9]+\]: abort \(code [0-9]+\): MPI_Send failed: MPI_ERR_RANK: " \
        <<< "$output"; then
      echo "expected the abort message to name the rank, MPI_Send and MPI_ERR_RANK" >&2
      exit 1
    fi
    if ! grep -q "about to send to an invalid rank" <<< "$output"; then
      echo "expected what the rank printed before it aborted (not flushed) to survive" >&2
      exit 1
    fi
    exit 0
    ;;
esac
if [ -n "$expected_status" ]; then
  if [ "$status" -ne "$expected_status" ]; then
    echo "expected the job to end with status $expected_status, got $status" >&2
    exit 1
  fi
  exit 0
fi
[ "$status" -eq 0 ] || exit "$status"
# What the job logged must verify: a program's own calls (a forked child's exit, say) must not
# break the chain or the seal.
sempi="$(dirname "$sempirun")/sempi"
shopt -s nullglob
for dir in "$work"/sempi-audit/*/; do
  if ! "$sempi" audit verify "$dir"; then
    echo "the job's audit logs do not verify" >&2
    exit 1
  fi
done
exit 0
