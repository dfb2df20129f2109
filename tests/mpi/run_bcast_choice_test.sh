#!/usr/bin/env bash
# A job whose ranks outnumber its host's CPUs broadcasts long messages down the binomial tree,
# which moves the fewest bytes in all; SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN still overrides.
# Four ranks run bcast_large.c (1 MiB from rank 0) on one CPU; the message audit shows who sent
# what: in the tree (0 -> 2, 0 -> 1, 2 -> 3) ranks 1 and 3 send nothing, while scatter +
# allgather has every rank send. Usage: run_bcast_choice_test.sh SEMPIRUN PROGRAM POLICY
set -uo pipefail
sempirun="$1"
program="$2"
policy="$3"
work="$(mktemp -d "${TMPDIR:-/tmp}/sempi-bcast-choice.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The first CPU this process may use ("pid N's current affinity list: 0-3,8").
cpu="$(taskset -pc $$ | sed 's/.*: //' | grep -o '^[0-9]*')"
if [ -z "$cpu" ]; then
  echo "cannot read this process's CPU affinity with taskset" >&2
  exit 1
fi

# bcast sends of rank R in audit directory D, one "peer bytes" line each.
sends() {
  grep '"action":"message.send"' "$1/rank-$2.jsonl" | grep '"op":"bcast"' |
    sed 's/.*"peer":\([0-9]*\),.*"bytes":\([0-9]*\),.*/\1 \2/'
}

run() {
  local dir="$1"
  shift
  if ! taskset -c "$cpu" "$sempirun" --timeout 120 -n 4 --policy "$policy" --audit-dir "$dir" \
      "$@" "$program"; then
    echo "the job ($*) failed" >&2
    exit 1
  fi
}

run "$work/tree"
tree_root="$(sends "$work/tree" 0 | tr '\n' ' ')"
tree_leaves="$(sends "$work/tree" 1; sends "$work/tree" 3)"
if [ "$tree_root" != "2 1048576 1 1048576 " ] || [ -n "$tree_leaves" ]; then
  echo "expected the binomial tree on one CPU: rank 0 sends 1 MiB to 2 then 1, ranks 1 and 3" \
       "send nothing; rank 0 sent: '$tree_root', ranks 1 and 3: '$tree_leaves'" >&2
  exit 1
fi

run "$work/forced" -x SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN=0
if [ -z "$(sends "$work/forced" 1)" ]; then
  echo "expected scatter + allgather when the variable asks for it: rank 1 sent nothing" >&2
  exit 1
fi
echo "binomial tree on one CPU; scatter + allgather when asked"
