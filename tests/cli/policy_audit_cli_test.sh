#!/usr/bin/env bash
# End-to-end test of `sempi policy` and `sempi audit`: every example policy validates (and, when
# python3-jsonschema is installed, matches config/policy.schema.json), invalid policies are
# reported with JSON paths, explain prints the decision and its rule, and the exit statuses
# (0 ok, 1 negative finding, 2 bad usage) hold.
# Usage: policy_audit_cli_test.sh /path/to/sempi /path/to/config
set -euo pipefail

SEMPI=${1:?usage: policy_audit_cli_test.sh /path/to/sempi /path/to/config}
CONFIG=${2:?usage: policy_audit_cli_test.sh /path/to/sempi /path/to/config}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sempi-cli-policy.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect WANT_STATUS PATTERN DESCRIPTION -- CMD...: exit status and a line matching PATTERN.
expect() {
  local want=$1 pattern=$2 what=$3
  shift 4
  local got=0
  "$@" >"$WORK/out" 2>&1 || got=$?
  if [[ $got -ne $want ]]; then
    fail "$what: exit $got, expected $want: $(cat "$WORK/out")"
  elif [[ -n $pattern ]] && ! grep -qE -- "$pattern" "$WORK/out"; then
    fail "$what: no line matches '$pattern': $(cat "$WORK/out")"
  else
    pass "$what"
  fi
}

for policy in "$CONFIG"/examples/*.json; do
  expect 0 "valid" "check $(basename "$policy")" -- "$SEMPI" policy check "$policy" --ranks 8
done
if python3 -c 'import jsonschema' 2>/dev/null; then
  for policy in "$CONFIG"/examples/*.json; do
    expect 0 "" "schema accepts $(basename "$policy")" -- python3 -c '
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.validate(json.load(open(sys.argv[2])), schema)' "$CONFIG/policy.schema.json" "$policy"
  done
  echo '{"version": 1, "communicators": [{"name": "w", "collectives": ["allredcue"]}]}' > "$WORK/typo.json"
  expect 1 "" "schema rejects an unknown collective" -- python3 -c '
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' \
    "$CONFIG/policy.schema.json" "$WORK/typo.json"
else
  echo "skip: python3-jsonschema not installed; schema not cross-checked"
fi

expect 0 "never connected: 0-4" "check --ranks lists never-connected pairs" -- \
  "$SEMPI" policy check "$CONFIG/examples/two-segments.json" --ranks 8

cat > "$WORK/bad.json" <<'JSON'
{"version": 1, "groups": {"io": [0, "9-3"]},
 "segmentation": [{"between": ["io", "ghost"]}],
 "communicators": [{"name": "world"}, {"name": "x", "collectives": ["barrier", "allredcue"]}]}
JSON
expect 1 "/communicators/1/collectives/1: unknown collective 'allredcue'" "path of a bad collective" -- \
  "$SEMPI" policy check "$WORK/bad.json"
expect 1 "/groups/io/1: range '9-3' is empty" "path of a bad range" -- "$SEMPI" policy check "$WORK/bad.json"
expect 1 "/segmentation/0/between/1: unknown group 'ghost'" "path of an unknown group" -- \
  "$SEMPI" policy check "$WORK/bad.json"
printf '{"version": 1,' > "$WORK/syntax.json"
expect 1 "invalid JSON" "syntax error" -- "$SEMPI" policy check "$WORK/syntax.json"
printf '{"version": 1e400}' > "$WORK/overflow.json"
expect 1 "overflow.json: /: invalid JSON: .*number overflow" "number too large for a double" -- \
  "$SEMPI" policy check "$WORK/overflow.json"
expect 2 "overflow.json: invalid JSON" "explain names the file of an overflowing number" -- \
  "$SEMPI" policy explain "$WORK/overflow.json" --from 0 --to 1
expect 2 "cannot read policy file" "missing file" -- "$SEMPI" policy check "$WORK/nope.json"
printf '{"version": 1, "mode": "enforce", "mode": "audit"}' > "$WORK/twice.json"
expect 1 'twice.json: /: key "mode" appears twice' "a repeated key is a finding" -- \
  "$SEMPI" policy check "$WORK/twice.json"
expect 2 'twice.json: /: key "mode" appears twice' "explain refuses it too" -- \
  "$SEMPI" policy explain "$WORK/twice.json" --from 0 --to 1
printf '{"version": 1, "communicators": [{"name": "\\u001b]0;pwned\\u0007", "members": "*"}]}' \
  > "$WORK/name.json"
expect 0 'pwned' "a communicator name with control characters is valid" -- \
  "$SEMPI" policy check "$WORK/name.json" --ranks 2
if grep -q $'\x1b' "$WORK/out"; then fail "the policy summary printed a raw escape character"; fi
# A newline in a name cannot forge lines of the summary, nor of an error message.
printf '{"version": 1, "communicators": [{"name": "x\\nwarning: forged\\n  [9] y", "members": "*"}]}' \
  > "$WORK/newline.json"
expect 0 'x␊warning: forged' "a newline in a communicator name is shown as a symbol in the summary" -- \
  "$SEMPI" policy check "$WORK/newline.json"
if grep -qE '^warning: forged' "$WORK/out"; then fail "a name forged a summary line: $(cat "$WORK/out")"; fi
printf '{"version": 1, "a\\nALLOW (forged)": 1}' > "$WORK/newline-key.json"
expect 2 'unknown key' "a newline in an unknown key is escaped in the error" -- \
  "$SEMPI" policy explain "$WORK/newline-key.json" --from 0 --to 1
if grep -qE '^ALLOW' "$WORK/out"; then fail "a key forged an error line: $(cat "$WORK/out")"; fi
printf '{"version": 1, "a\\nALLOW (forged)": [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}' > "$WORK/newline-deep.json"
expect 2 'nested more than' "a newline in the key of a value nested too deep is escaped" -- \
  "$SEMPI" policy explain "$WORK/newline-deep.json" --from 0 --to 1
if grep -qE '^ALLOW' "$WORK/out"; then fail "a key forged an error line: $(cat "$WORK/out")"; fi
{ printf '{"version": 1, "comment": "'; head -c 300000 /dev/zero | tr '\0' x; printf '"}'; } \
  > "$WORK/large.json"
expect 1 'large.json: /: the policy is [0-9]* bytes in canonical form' \
  "a canonical form too large for a job is a finding" -- "$SEMPI" policy check "$WORK/large.json"
expect 2 "" "--ranks beyond sempirun's limit" -- "$SEMPI" policy check "$WORK/name.json" --ranks 4097
# world and self always have their members; an explicit empty list is not a missing key.
cat > "$WORK/summary.json" <<'JSON'
{"version": 1, "communicators": [{"name": "world"}, {"name": "self"},
                                 {"name": "empty", "members": []}, {"name": "bare"}]}
JSON
expect 0 "^  \[0\] world: members all ranks \(world always\);" "the summary says world has every rank" -- \
  "$SEMPI" policy check "$WORK/summary.json"
grep -qE "^  \[1\] self: members the rank itself \(self always\);" "$WORK/out" ||
  fail "the summary does not say self has its rank: $(cat "$WORK/out")"
grep -qE "^  \[2\] empty: members \[\] \(none\);" "$WORK/out" ||
  fail "the summary does not show an explicit empty member list: $(cat "$WORK/out")"
grep -qE "^  \[3\] bare: members none \(no 'members'\);" "$WORK/out" ||
  fail "the summary does not show a missing member list: $(cat "$WORK/out")"
printf '{"version": 1, "groups": {"io": "0-1"}, "segmentation": [{"between": ["io", "\\u001b]0;pwned\\u0007"]}]}' \
  > "$WORK/escape.json"
expect 1 'unknown group .\\x1b\]0;pwned\\x07' "names from the file are escaped" -- \
  "$SEMPI" policy check "$WORK/escape.json"
if grep -q $'\x1b' "$WORK/out"; then fail "policy check printed a raw escape character"; fi
expect 2 'unknown group .\\x1b' "explain escapes them too" -- \
  "$SEMPI" policy explain "$WORK/escape.json" --from 0 --to 1
if grep -q $'\x1b' "$WORK/out"; then fail "policy explain printed a raw escape character"; fi
expect 2 "^  /groups/io/1: range '9-3' is empty" "explain lists the problems one per line" -- \
  "$SEMPI" policy explain "$WORK/bad.json" --from 0 --to 1
expect 2 "is a directory" "a directory as the file" -- "$SEMPI" policy check "$WORK"
# At most one byte past the 1 MiB limit is read: /dev/zero was read until memory ran out. A
# FIFO with no writer reads as empty, and a pipe with one works (--policy <(...)). (timeout: a
# hang is a failure, not a stuck test.)
expect 1 "longer than 1048576 bytes" "a device that never ends" -- \
  timeout 20 "$SEMPI" policy check /dev/zero
mkfifo "$WORK/policy.fifo"
expect 1 "invalid JSON" "a FIFO with no writer is empty" -- \
  timeout 20 "$SEMPI" policy check "$WORK/policy.fifo"
expect 0 "valid" "a pipe with a writer" -- \
  timeout 20 bash -c '"$0" policy check <(cat "$1")' "$SEMPI" "$CONFIG/examples/allow-all.json"
truncate -s 64M "$WORK/huge.json"
expect 1 "huge.json: /: longer than 1048576 bytes, more than a policy may have" \
  "a file over 1 MiB is a finding, without reading all of it" -- \
  "$SEMPI" policy check "$WORK/huge.json"
expect 2 "" "no file" -- "$SEMPI" policy check
expect 2 "" "unknown option" -- "$SEMPI" policy check "$WORK/bad.json" --bogus

SEG="$CONFIG/examples/two-segments.json"
IO="$CONFIG/examples/io-channel.json"
expect 0 "^ALLOW" "explain allow" -- "$SEMPI" policy explain "$SEG" --from 0 --to 3
expect 1 "no rule under /segmentation lets rank 0 and rank 5" "explain segmentation deny" -- \
  "$SEMPI" policy explain "$SEG" --from 0 --to 5
expect 1 "^rule: /communicators/2/p2p_tags" "explain tag deny names the rule" -- \
  "$SEMPI" policy explain "$IO" --from 0 --to 5 --comm io --tag 7
expect 1 "^rule: /communicators/2/max_message_bytes" "explain size deny" -- \
  "$SEMPI" policy explain "$IO" --from 0 --to 5 --comm io --tag 150 --bytes 2000000
expect 1 "allows collectives barrier; not allreduce" "explain collective deny" -- \
  "$SEMPI" policy explain "$IO" --from 0 --to 1 --comm world.dup --op allreduce
expect 1 "^rule: default deny" "explain unnamed communicator" -- \
  "$SEMPI" policy explain "$SEG" --from 0 --to 1 --comm custom
cat > "$WORK/members.json" <<'JSON'
{"version": 1, "groups": {"all": "*", "lo": "0-1", "hi": "2-3"},
 "segmentation": [{"between": ["all", "all"]}],
 "communicators": [{"name": "world", "collectives": ["comm_create"]},
                   {"name": "world.split", "members": ["lo", "hi"]}]}
JSON
expect 0 "^ALLOW" "explain membership allow" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 2,3
expect 0 "creation agreement on parent 'world' \(a job of 4 ranks\) is allowed by /communicators/0" \
  "explain membership reports the parent's creation agreement" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 2,3
expect 1 "violates /communicators/1/members" "explain membership deny" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 1,2
# world and self are created by the runtime, with no member check: no DENY for them.
expect 0 "^NOT CHECKED" "explain --members for world says members are not checked" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world --members 0,1
expect 0 "not checked for the predefined 'self'" "explain --members for self says so too" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm self --members 3
expect 2 "missing required option --comm" "explain --members needs --comm (no silent world)" -- \
  "$SEMPI" policy explain "$WORK/members.json" --members 0,1
expect 2 "an empty rank after the last ','" "explain --members refuses a trailing comma" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 2,3,
# The creation agreement runs on the parent first: a parent without comm_create refuses.
cat > "$WORK/nocreate.json" <<'JSON'
{"version": 1, "groups": {"all": "*", "lo": "0-1", "hi": "2-3"},
 "segmentation": [{"between": ["all", "all"]}],
 "communicators": [{"name": "world", "collectives": ["barrier"]},
                   {"name": "world.split", "members": ["lo", "hi"]},
                   {"name": "custom", "members": "*"}]}
JSON
expect 1 "^rule: /communicators/0/collectives" "explain membership names a parent's refusal" -- \
  "$SEMPI" policy explain "$WORK/nocreate.json" --comm world.split --members 2,3
grep -q "^DENY (deny_op)" "$WORK/out" || fail "a parent's refusal is not a DENY: $(cat "$WORK/out")"
expect 1 "^rule: /communicators/0/collectives" "--parent names the parent" -- \
  "$SEMPI" policy explain "$WORK/nocreate.json" --comm custom --parent world --members 0,1
expect 0 "^ALLOW" "a name without a dot has no parent to check" -- \
  "$SEMPI" policy explain "$WORK/nocreate.json" --comm custom --members 0,1
# --ranks sizes world: in a job of 8, rank 4 cannot reach rank 0 for the agreement.
cat > "$WORK/segments.json" <<'JSON'
{"version": 1, "groups": {"red": "0-3", "blue": "4-7"},
 "segmentation": [{"between": ["red", "red"]}, {"between": ["blue", "blue"]}],
 "communicators": [{"name": "world", "collectives": ["comm_create"]},
                   {"name": "world.split", "members": ["red", "blue"]},
                   {"name": "world.group", "members": ["red", "blue"]}]}
JSON
expect 0 "^ALLOW" "explain membership in a job as large as --members needs" -- \
  "$SEMPI" policy explain "$WORK/segments.json" --comm world.split --members 0,1
expect 1 "needs rank 4 -> rank 0 comm_create traffic" "explain membership in a job of --ranks" -- \
  "$SEMPI" policy explain "$WORK/segments.json" --comm world.split --members 0,1 --ranks 8
# MPI_Comm_create_group runs the agreement among the new members alone: blue ranks can create
# world.group in a job of 8 although they cannot reach rank 0.
expect 0 "^ALLOW" "explain membership of a <parent>.group among its members only" -- \
  "$SEMPI" policy explain "$WORK/segments.json" --comm world.group --members 4,5 --ranks 8
expect 2 "beyond a job of 2 ranks" "explain --members beyond --ranks" -- \
  "$SEMPI" policy explain "$WORK/segments.json" --comm world.split --members 1,2 --ranks 2
# The message question's options make no sense with --members, and the reverse.
expect 2 "--from cannot be combined with --members" "explain --members with --from" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 2,3 --from 0
expect 2 "--op cannot be combined with --members" "explain --members with --op" -- \
  "$SEMPI" policy explain "$WORK/members.json" --comm world.split --members 2,3 --op barrier
expect 2 "--parent needs --members" "explain --parent without --members" -- \
  "$SEMPI" policy explain "$WORK/members.json" --from 0 --to 1 --parent world
expect 2 "unknown operation" "explain bad --op" -- "$SEMPI" policy explain "$SEG" --from 0 --to 1 --op frobnicate
expect 2 "missing required option --from" "explain without --from" -- "$SEMPI" policy explain "$SEG" --to 1

expect 2 "not an audit directory" "audit verify of a non-directory" -- "$SEMPI" audit verify "$WORK/none"
mkdir "$WORK/empty"
expect 1 "missing" "audit verify of an empty directory" -- "$SEMPI" audit verify "$WORK/empty"
expect 2 "holds no audit logs" "audit report of a directory without logs" -- \
  "$SEMPI" audit report "$WORK/empty"
expect 2 "holds no audit logs" "audit reconcile of a directory without logs" -- \
  "$SEMPI" audit reconcile "$WORK/empty"
expect 2 "" "audit without subcommand" -- "$SEMPI" audit
expect 0 "verify" "audit --help" -- "$SEMPI" audit --help
expect 0 "usage: sempi audit report" "audit report DIR --help" -- \
  "$SEMPI" audit report "$WORK/empty" --help
# An option's value, or an argument after --, is not a request for help.
expect 2 "invalid --public-key '--help'" "audit verify --public-key --help" -- \
  "$SEMPI" audit verify "$WORK/empty" --public-key --help
expect 2 "is not an audit directory" "audit verify -- --help" -- "$SEMPI" audit verify -- --help
# A flag given a value is named as such, not as an unknown option.
expect 2 "option '--json' takes no value" "audit report --json=1" -- \
  "$SEMPI" audit report "$WORK/empty" --json=1

# A log of nothing but broken lines: the first 100 are listed, the rest counted, and the total
# is still a failure.
mkdir "$WORK/broken"
head -c 1000 /dev/zero | tr '\0' '\n' > "$WORK/broken/launcher.jsonl"
expect 1 "^launcher.jsonl:0: omitted: 900 more problems in launcher.jsonl" \
  "audit verify lists the first 100 problems of a file" -- "$SEMPI" audit verify "$WORK/broken"
if [[ $(grep -c ': corrupt: ' "$WORK/out") -ne 100 ]]; then
  fail "audit verify listed $(grep -c ': corrupt: ' "$WORK/out") corrupt lines, not 100"
fi
if ! grep -q "^FAILED: 1001 problems in 1 files" "$WORK/out"; then
  fail "audit verify does not count the problems it did not list: $(tail -n 2 "$WORK/out")"
fi

# A communicator name with a C1 control (U+009B, CSI) and DEL: JSON output \u-escapes them,
# text output \x-escapes them; neither writes them raw. (No launcher log: listed as missing, exit 1.)
mkdir "$WORK/c1"
printf '%s\n' '{"event":{"sequence":0,"action":"message.send","outcome":"success"},"sempi":{"job":"j","source":"rank","rank":0,"peer":1,"comm":"\u009b31m\u007f","op":"p2p","tag":0,"bytes":1,"msg":1,"prev":"0"}}' \
  > "$WORK/c1/rank-0.jsonl"
raw_controls() { LC_ALL=C grep -q $'\xc2\x9b' "$WORK/out" || LC_ALL=C grep -q $'\x7f' "$WORK/out"; }
expect 1 "launcher.jsonl: missing" "audit report --json of a name with control characters" -- \
  "$SEMPI" audit report "$WORK/c1" --json
if raw_controls; then fail "audit report --json printed a raw control character"; fi
if ! grep -qF '"comm": "\u009b31m\u007f"' "$WORK/out"; then
  fail "audit report --json does not \\u-escape the name: $(cat "$WORK/out")"
fi
expect 1 "" "audit reconcile --json of a name with control characters" -- \
  "$SEMPI" audit reconcile "$WORK/c1" --json
if raw_controls; then fail "audit reconcile --json printed a raw control character"; fi
# Its records are for tools: the name as the log has it, \u-escaped by the JSON.
if ! grep -qF '"comm": "\u009b31m\u007f"' "$WORK/out"; then
  fail "audit reconcile --json has no record with the raw name: $(cat "$WORK/out")"
fi
# Its lines are text for people, names quoted and escaped as reconcile prints them.
if ! grep -qF 'comm \"\\xc2\\x9b31m\\x7f\" context' "$WORK/out"; then
  fail "audit reconcile --json does not escape the name: $(cat "$WORK/out")"
fi
expect 1 '\\xc2\\x9b31m\\x7f' "audit report escapes the name as text" -- "$SEMPI" audit report "$WORK/c1"
if raw_controls; then fail "audit report printed a raw control character"; fi

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all policy/audit CLI checks passed"
