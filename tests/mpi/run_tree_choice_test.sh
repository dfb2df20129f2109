#!/usr/bin/env bash
# A job whose ranks outnumber its host's CPUs broadcasts and reduces long messages along the
# binomial tree, which moves the fewest bytes in all; the SEMPI_COLL_* thresholds still
# override. Four ranks run long_collectives.c (a 1 MiB bcast from rank 0, a 4 MiB reduce to it)
# on one CPU, and the message audit shows who sent what:
#   bcast tree 0 -> 2, 0 -> 1, 2 -> 3: ranks 1 and 3 send nothing (scatter + allgather: all do);
#   reduce tree 1 -> 0, 3 -> 2, 2 -> 0: rank 0 sends nothing (reduce-scatter: it does).
# Usage: run_tree_choice_test.sh SEMPIRUN PROGRAM POLICY
set -uo pipefail
sempirun="$1"
program="$2"
policy="$3"
# The ranks inherit this environment: thresholds set in it would decide instead.
unset "${!SEMPI_COLL_@}"
work="$(mktemp -d "${TMPDIR:-/tmp}/sempi-tree-choice.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The first CPU this process may use ("Cpus_allowed_list:	0-3,8").
cpu="$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)"
if [ -z "$cpu" ] || ! command -v taskset > /dev/null; then
  echo "cannot pin the job to one CPU: no Cpus_allowed_list in /proc/self/status, or no taskset" >&2
  exit 1
fi

# The OP sends of rank R in audit directory D, one "peer bytes" line each: sends D R OP
sends() {
  grep '"action":"message.send"' "$1/rank-$2.jsonl" | grep "\"op\":\"$3\"" |
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
root_bcast="$(sends "$work/tree" 0 bcast | tr '\n' ' ')"
leaves_bcast="$(sends "$work/tree" 1 bcast; sends "$work/tree" 3 bcast)"
if [ "$root_bcast" != "2 1048576 1 1048576 " ] || [ -n "$leaves_bcast" ]; then
  echo "expected the bcast tree on one CPU: rank 0 sends 1 MiB to 2 then 1, ranks 1 and 3" \
       "send nothing; rank 0 sent: '$root_bcast', ranks 1 and 3: '$leaves_bcast'" >&2
  exit 1
fi
root_reduce="$(sends "$work/tree" 0 reduce)"
leaf_reduce="$(sends "$work/tree" 1 reduce | tr '\n' ' ')"
if [ -n "$root_reduce" ] || [ "$leaf_reduce" != "0 4194304 " ]; then
  echo "expected the reduce tree on one CPU: rank 1 sends 4 MiB to 0, rank 0 sends nothing;" \
       "rank 1 sent: '$leaf_reduce', rank 0: '$root_reduce'" >&2
  exit 1
fi

run "$work/forced" -x SEMPI_COLL_BCAST_SCATTER_ALLGATHER_MIN=0 \
    -x SEMPI_COLL_REDUCE_RABENSEIFNER_MIN=0
if [ -z "$(sends "$work/forced" 1 bcast)" ] || [ -z "$(sends "$work/forced" 0 reduce)" ]; then
  echo "expected scatter + allgather and reduce-scatter + gather when the variables ask for" \
       "them: rank 1 sent no bcast message, or rank 0 no reduce message" >&2
  exit 1
fi
echo "binomial trees on one CPU; the split algorithms when asked"
