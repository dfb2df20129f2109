#!/usr/bin/env bash
# End-to-end test of `sempi pki`: ca, issue, inspect, cross-checked with openssl, plus the exit
# status and message of every kind of bad input.
# Usage: pki_cli_test.sh /path/to/sempi
set -euo pipefail

SEMPI=${1:?usage: pki_cli_test.sh /path/to/sempi}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sempi-cli-pki.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect_status CODE DESCRIPTION -- CMD...: runs CMD, checks its exit status, keeps its stderr.
expect_status() {
  local want=$1 what=$2
  shift 3
  local got=0
  "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
  if [[ $got -ne $want ]]; then
    fail "$what: exit $got, expected $want (stderr: $(cat "$WORK/err"))"
    return 1
  fi
  pass "$what (exit $got)"
}

# expect_usage_error DESCRIPTION PATTERN -- CMD...: exit 2 and a "sempi pki: error:" message.
expect_usage_error() {
  local what=$1 pattern=$2
  shift 2
  expect_status 2 "$what" "$@" || return 0
  if ! grep -q "sempi pki: error: .*$pattern" "$WORK/err"; then
    fail "$what: stderr lacks 'sempi pki: error: ...$pattern': $(cat "$WORK/err")"
  fi
  if [[ -s "$WORK/out" ]]; then fail "$what: wrote to stdout: $(cat "$WORK/out")"; fi
}

mode_of() { stat -c %a "$1"; }

expect_mode() {
  local path=$1 want=$2 got
  got=$(mode_of "$path")
  if [[ $got == "$want" ]]; then pass "mode of $path is $want"; else fail "mode of $path is $got, expected $want"; fi
}

# --- help ------------------------------------------------------------------------------------
expect_status 0 "pki --help" -- "$SEMPI" pki --help
grep -q "usage: sempi pki" "$WORK/out" || fail "pki --help prints no usage"
for sub in ca issue inspect; do
  expect_status 0 "pki $sub --help" -- "$SEMPI" pki "$sub" --help
  grep -q "usage: sempi pki $sub" "$WORK/out" || fail "pki $sub --help prints no usage"
done
grep -q "64 zeros" <("$SEMPI" pki issue --help) || fail "issue --help does not document the default digest"
expect_status 2 "pki without subcommand" -- "$SEMPI" pki
expect_status 2 "unknown subcommand" -- "$SEMPI" pki frobnicate
grep -q "unknown subcommand 'frobnicate'" "$WORK/err" || fail "unknown subcommand message: $(cat "$WORK/err")"

# --- ca --------------------------------------------------------------------------------------
JOB=0123456789abcdef0123456789abcdef
expect_status 0 "ca --job $JOB" -- "$SEMPI" pki ca --job "$JOB" --out caA
grep -q "job: $JOB" "$WORK/out" || fail "ca does not print the job id"
FP=$(openssl x509 -in caA/ca.pem -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr 'A-F' 'a-f')
grep -q "$FP" "$WORK/out" || fail "ca does not print the SHA-256 fingerprint $FP: $(cat "$WORK/out")"
expect_mode caA 700
expect_mode caA/ca.key 600
expect_mode caA/ca.pem 644
openssl x509 -in caA/ca.pem -noout -text >"$WORK/ca.txt"
grep -q "CA:TRUE, pathlen:0" "$WORK/ca.txt" || fail "CA lacks CA:TRUE, pathlen:0"
grep -q "Certificate Sign, CRL Sign" "$WORK/ca.txt" || fail "CA key usage"
grep -q "URI:sempi://job/$JOB\$" "$WORK/ca.txt" || fail "CA lacks its job URI"
openssl pkey -in caA/ca.key -noout || fail "ca.key is not a readable key"

expect_status 0 "ca --job random --key-type ed25519" -- \
  "$SEMPI" pki ca --job random --key-type ed25519 --days 2 --out caB
JOB_B=$(sed -n 's/^job: //p' "$WORK/out")
[[ $JOB_B =~ ^[0-9a-f]{32}$ ]] || fail "random job id '$JOB_B' is not 32 lower-case hex digits"
[[ $JOB_B != "$JOB" ]] || fail "random job id equals the fixed one"
openssl x509 -in caB/ca.pem -noout -text | grep -q "ED25519" || fail "caB is not Ed25519"

expect_usage_error "ca over an existing CA" "already exists" -- "$SEMPI" pki ca --job random --out caA
expect_status 0 "ca --force over a scratch CA" -- "$SEMPI" pki ca --job random --out caC
expect_status 0 "ca --force" -- "$SEMPI" pki ca --job random --out caC --force
expect_mode caC/ca.pem 644
expect_mode caC/ca.key 600
[[ $(openssl x509 -noout -pubkey -in caC/ca.pem) == $(openssl pkey -pubout -in caC/ca.key) ]] ||
  fail "ca --force left a certificate that is not the new key's"

# --- issue -----------------------------------------------------------------------------------
DIGEST=$(printf 'policy' | sha256sum | cut -d' ' -f1)
expect_status 0 "issue rank 3" -- \
  "$SEMPI" pki issue --ca caA --rank 3 --policy-digest "$DIGEST" --out rank3
expect_mode rank3 700
expect_mode rank3/rank.key 600
expect_mode rank3/rank.pem 644
if openssl verify -CAfile caA/ca.pem rank3/rank.pem >"$WORK/verify" 2>&1; then
  pass "openssl verify rank3 against caA"
else
  fail "openssl verify rank3 against caA: $(cat "$WORK/verify")"
fi
openssl verify -purpose sslserver -CAfile caA/ca.pem rank3/rank.pem >/dev/null 2>&1 ||
  fail "rank3 not valid for sslserver"
openssl verify -purpose sslclient -CAfile caA/ca.pem rank3/rank.pem >/dev/null 2>&1 ||
  fail "rank3 not valid for sslclient"
openssl x509 -in rank3/rank.pem -noout -text >"$WORK/rank3.txt"
grep -q "URI:sempi://job/$JOB/rank/3," "$WORK/rank3.txt" || fail "rank3 lacks URI:sempi://job/$JOB/rank/3"
grep -q "URI:sempi://job/$JOB/policy/$DIGEST" "$WORK/rank3.txt" || fail "rank3 lacks the policy URI"
grep -q "CA:FALSE" "$WORK/rank3.txt" || fail "rank3 is not CA:FALSE"
grep -q "TLS Web Server Authentication, TLS Web Client Authentication" "$WORK/rank3.txt" ||
  fail "rank3 EKU"
# The key written next to the certificate is the certificate's key.
[[ $(openssl x509 -in rank3/rank.pem -noout -pubkey) == $(openssl pkey -in rank3/rank.key -pubout) ]] ||
  fail "rank3/rank.key does not match rank3/rank.pem"

# A rank certificate from CA A does not verify against CA B.
expect_status 0 "issue rank 0 from caB" -- "$SEMPI" pki issue --ca caB --rank 0 --out rankB0
if openssl verify -CAfile caB/ca.pem rank3/rank.pem >/dev/null 2>&1; then
  fail "rank3 (from caA) verified against caB"
else
  pass "rank3 (from caA) fails against caB"
fi
openssl verify -CAfile caB/ca.pem rankB0/rank.pem >/dev/null 2>&1 || fail "rankB0 against caB"

# Default digest is 64 zeros.
expect_status 0 "issue with the default digest" -- "$SEMPI" pki issue --ca caA --rank 0 --out rank0
grep -q "policy/$(printf '0%.0s' {1..64})" <(openssl x509 -in rank0/rank.pem -noout -text) ||
  fail "default policy digest is not 64 zeros"

# --- inspect ---------------------------------------------------------------------------------
expect_status 0 "inspect rank3" -- "$SEMPI" pki inspect rank3/rank.pem
grep -q "^job: $JOB\$" "$WORK/out" || fail "inspect text lacks the job: $(cat "$WORK/out")"
grep -q "^rank: 3\$" "$WORK/out" || fail "inspect text lacks the rank"
grep -q "^policy digest: $DIGEST\$" "$WORK/out" || fail "inspect text lacks the policy digest"
grep -Eq "^not after: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\$" "$WORK/out" ||
  fail "inspect not after is not ISO 8601 UTC"

expect_status 0 "inspect rank3 --json" -- "$SEMPI" pki inspect rank3/rank.pem --json
python3 - "$WORK/out" "$JOB" "$DIGEST" <<'PY' || fail "inspect --json content"
import json, sys
with open(sys.argv[1]) as f:
    j = json.load(f)
want = {"job", "rank", "policy_digest", "not_before", "not_after", "fingerprint_sha256",
        "is_ca", "subject"}
assert want <= set(j), sorted(want - set(j))
assert j["job"] == sys.argv[2], j
assert j["rank"] == 3, j
assert j["policy_digest"] == sys.argv[3], j
assert j["is_ca"] is False, j
assert len(j["fingerprint_sha256"]) == 64, j
assert j["not_before"].endswith("Z") and j["not_after"].endswith("Z"), j
PY
RANK_FP=$(openssl x509 -in rank3/rank.pem -noout -fingerprint -sha256 | sed 's/.*=//; s/://g' | tr 'A-F' 'a-f')
grep -q "\"fingerprint_sha256\": \"$RANK_FP\"" "$WORK/out" || fail "inspect --json fingerprint differs from openssl's"

expect_status 0 "inspect CA" -- "$SEMPI" pki inspect caA/ca.pem
grep -q "^rank: CA\$" "$WORK/out" || fail "inspect of a CA does not say CA"
grep -q "^job: $JOB\$" "$WORK/out" || fail "inspect of a CA lacks the job"
expect_status 0 "inspect CA --json" -- "$SEMPI" pki inspect --json caA/ca.pem
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["is_ca"] is True and j["rank"] is None and j["job"]==sys.argv[2], j' \
  "$WORK/out" "$JOB" || fail "inspect CA --json content"

# A well-formed certificate without a sempi identity is a finding (exit 1), not an error.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/plain.key" \
  -out "$WORK/plain.pem" -subj /CN=plain -days 1 2>/dev/null
expect_status 1 "inspect a non-sempi certificate" -- "$SEMPI" pki inspect "$WORK/plain.pem" --json
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["job"] is None and "identity_error" in j, j' \
  "$WORK/out" || fail "inspect non-sempi --json content"

# --- bad input: exit 2 with a clear message --------------------------------------------------
expect_usage_error "ca without --out" "missing required option --out" -- "$SEMPI" pki ca --job random
expect_usage_error "ca without --job" "missing required option --job" -- "$SEMPI" pki ca --out x1
expect_usage_error "ca bad job id" "invalid --job" -- "$SEMPI" pki ca --job 1234 --out x2
expect_usage_error "ca all-zero job id" "invalid --job" -- \
  "$SEMPI" pki ca --job 00000000000000000000000000000000 --out x3
expect_usage_error "ca bad key type" "unknown key type" -- \
  "$SEMPI" pki ca --job random --key-type rsa --out x4
expect_usage_error "ca --days 0" "invalid --days" -- "$SEMPI" pki ca --job random --days 0 --out x5
expect_usage_error "ca unknown option" "unknown option '--bogus'" -- \
  "$SEMPI" pki ca --job random --out x6 --bogus
expect_usage_error "ca extra argument" "unexpected argument" -- "$SEMPI" pki ca --job random --out x7 extra
# --force that cannot put the certificate in place changes nothing: not a new key next to the
# old certificate.
expect_status 0 "ca for the --force failure" -- "$SEMPI" pki ca --job random --out caF
key_before=$(sha256sum caF/ca.key)
rm caF/ca.pem && mkdir caF/ca.pem
expect_usage_error "ca --force over a directory named ca.pem" "not a regular file" -- \
  "$SEMPI" pki ca --job random --out caF --force
[[ $(sha256sum caF/ca.key) == "$key_before" ]] || fail "a failed --force replaced the CA key"
if ls caF | grep -q '\.new-'; then fail "a failed --force left a temporary file: $(ls caF)"; fi
# A forgotten value is not taken from the next option (that made a directory "--force").
expect_usage_error "ca --out followed by an option" "option '--out' needs a value, not the option '--force'" -- \
  "$SEMPI" pki ca --job random --out --force
if [[ -e ./--force ]]; then fail "ca --out --force created a directory named --force"; fi
expect_usage_error "ca --out followed by an option with its value" "option '--out' needs a value, not the option '--days=3'" -- \
  "$SEMPI" pki ca --job random --out --days=3
if [[ -e ./--days=3 ]]; then fail "ca --out --days=3 created a directory named --days=3"; fi
expect_usage_error "issue with an empty --ca" "option '--ca' needs a value, not an empty one" -- \
  "$SEMPI" pki issue --ca= --rank 1 --out x12
expect_usage_error "issue without --out" "missing required option --out" -- \
  "$SEMPI" pki issue --ca caA --rank 1
expect_usage_error "issue --rank -1" "invalid --rank '-1'" -- "$SEMPI" pki issue --ca caA --rank -1 --out x8
expect_usage_error "issue --rank abc" "invalid --rank 'abc'" -- "$SEMPI" pki issue --ca caA --rank abc --out x9
expect_usage_error "issue --rank too large" "invalid --rank" -- \
  "$SEMPI" pki issue --ca caA --rank 16777216 --out x10
expect_usage_error "issue nonexistent --ca" "$WORK/nope/ca.pem" -- \
  "$SEMPI" pki issue --ca "$WORK/nope" --rank 1 --out x11
expect_usage_error "issue bad --policy-digest" "invalid --policy-digest" -- \
  "$SEMPI" pki issue --ca caA --rank 1 --policy-digest abc --out x12
expect_usage_error "issue unknown option" "unknown option '--nope'" -- \
  "$SEMPI" pki issue --ca caA --rank 1 --out x13 --nope
# A CA directory whose key belongs to another CA.
mkdir -m 700 mixed && cp caA/ca.pem mixed/ && cp caB/ca.key mixed/
expect_usage_error "issue with a mismatched CA key" "does not match" -- \
  "$SEMPI" pki issue --ca mixed --rank 1 --out x14
# A rank certificate posing as a CA.
mkdir -m 700 fakeca && cp rank3/rank.pem fakeca/ca.pem && cp rank3/rank.key fakeca/ca.key
expect_usage_error "issue from a rank certificate" "not a CA" -- \
  "$SEMPI" pki issue --ca fakeca --rank 1 --out x15
for d in x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15; do
  [[ ! -e $d ]] || fail "failed command left output directory $d"
done

printf 'this is not a certificate\n' >garbage.pem
expect_usage_error "inspect garbage" "garbage.pem" -- "$SEMPI" pki inspect garbage.pem
expect_usage_error "inspect missing file" "missing.pem" -- "$SEMPI" pki inspect missing.pem
expect_usage_error "inspect without a file" "exactly one certificate" -- "$SEMPI" pki inspect
expect_usage_error "inspect unknown option" "unknown option '--yaml'" -- \
  "$SEMPI" pki inspect rank3/rank.pem --yaml

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all pki CLI checks passed"
