#!/usr/bin/env bash
# External TLS scanners against a rank's start-up listener (the real acceptor, held open by
# tls_scan_target): sslscan and nmap's ssl-enum-ciphers must find TLS 1.3 and nothing older,
# openssl s_client without a certificate must be refused with alert 116 (certificate
# required), and the listener must still admit the genuine rank afterwards. The scanners carry
# their own protocol probes, so this checks sempi's TLS settings from outside OpenSSL's view.
#
# Usage: tls_scan_test.sh /path/to/tls_scan_target
# Exits 77 (skipped) if a scanner is missing; `tools/quickstart.sh test` installs them.
set -euo pipefail

TARGET_BIN=${1:?usage: tls_scan_test.sh /path/to/tls_scan_target}
for tool in sslscan nmap openssl timeout; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (apt-get install sslscan nmap)"
    exit 77
  fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sempi-tls-scan.XXXXXX")
target_pid=""
cleanup() {
  local status=$?
  if [[ -n $target_pid ]]; then kill "$target_pid" 2>/dev/null || true; fi
  if [[ $status -ne 0 && -s $WORK/target.err ]]; then
    echo "--- the scan target's log (last lines):" >&2
    tail -20 "$WORK/target.err" >&2
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# A target that died mid-scan must show as a failure with its log, not as a silent SIGPIPE.
trap '' PIPE

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# The target talks through two FIFOs: its first line names the endpoint, a line to it ends
# the scan.
mkfifo "$WORK/to_target" "$WORK/from_target"
"$TARGET_BIN" "$WORK" <"$WORK/to_target" >"$WORK/from_target" 2>"$WORK/target.err" &
target_pid=$!
exec 3>"$WORK/to_target" 4<"$WORK/from_target"
if ! read -r -t 30 word endpoint <&4 || [[ $word != endpoint ]]; then
  echo "FAIL: the scan target did not start: $(cat "$WORK/target.err")" >&2
  exit 1
fi
host=${endpoint%:*}
port=${endpoint##*:}
echo "scanning $endpoint"

# Without a client certificate: refused with alert 116. -ign_eof keeps s_client reading until
# the listener ends the connection, so a listener that wrongly kept it would show as a timeout.
timeout 30 openssl s_client -connect "$endpoint" -CAfile "$WORK/ca.pem" -verify_return_error \
  -ign_eof </dev/null >"$WORK/s_client.txt" 2>&1 || true
if grep -q 'alert certificate required' "$WORK/s_client.txt"; then
  pass "a client without a certificate is refused (alert 116)"
else
  fail "no certificate-required alert: $(tail -5 "$WORK/s_client.txt")"
fi
# A TLS 1.2 client is turned away at the version (older ones this OpenSSL will not even
# offer; sslscan below probes those with its own code).
timeout 30 openssl s_client -connect "$endpoint" -tls1_2 </dev/null >"$WORK/s_client_tls1_2.txt" 2>&1 || true
if grep -q 'alert protocol version' "$WORK/s_client_tls1_2.txt"; then
  pass "openssl s_client -tls1_2 is refused (alert 70, protocol version)"
else
  fail "openssl s_client -tls1_2: $(tail -5 "$WORK/s_client_tls1_2.txt")"
fi

timeout 90 sslscan --no-colour "$endpoint" >"$WORK/sslscan.txt" 2>&1 || true
for version in SSLv2 SSLv3 TLSv1.0 TLSv1.1 TLSv1.2; do
  if grep -Eq "^$version +disabled" "$WORK/sslscan.txt"; then
    pass "sslscan: $version disabled"
  else
    fail "sslscan: $version not reported disabled"
  fi
done
if grep -Eq '^TLSv1.3 +enabled' "$WORK/sslscan.txt"; then
  pass "sslscan: TLSv1.3 enabled"
else
  fail "sslscan: TLSv1.3 not reported enabled"
fi
if grep -E '^(Preferred|Accepted) ' "$WORK/sslscan.txt" | grep -vq 'TLSv1.3'; then
  fail "sslscan: a cipher accepted outside TLS 1.3: $(grep -E '^(Preferred|Accepted) ' "$WORK/sslscan.txt")"
elif grep -Eq '^(Preferred|Accepted) +TLSv1.3' "$WORK/sslscan.txt"; then
  pass "sslscan: every accepted cipher is TLS 1.3"
else
  fail "sslscan: no accepted cipher listed"
fi
# The suites: exactly those SECURITY.md names ("TLS configuration").
suites=$(grep -E '^(Preferred|Accepted) ' "$WORK/sslscan.txt" | grep -Eo 'TLS_[A-Z0-9_]+' | sort -u | tr '\n' ' ' || true)
if [[ $suites == "TLS_AES_128_GCM_SHA256 TLS_AES_256_GCM_SHA384 TLS_CHACHA20_POLY1305_SHA256 " ]]; then
  pass "sslscan: suites $suites"
else
  fail "sslscan: suites '$suites', expected AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305"
fi
# Key exchange groups: X25519 and P-256 only (SECURITY.md, "TLS configuration").
groups=$(grep -E '^TLSv1.3 +[0-9]+ bits +' "$WORK/sslscan.txt" | sed -E 's/^TLSv1.3 +[0-9]+ bits +//' || true)
if [[ -z $groups ]]; then
  fail "sslscan: no key exchange group listed"
elif grep -Evq '^(x25519|secp256r1 \(NIST P-256\))$' <<<"$groups"; then
  fail "sslscan: a group beyond X25519 and P-256: $(tr '\n' ',' <<<"$groups")"
else
  pass "sslscan: groups $(tr '\n' ' ' <<<"$groups")"
fi

timeout 120 nmap -Pn -n -sT -p "$port" --script ssl-enum-ciphers -oN "$WORK/nmap.txt" "$host" \
  >/dev/null 2>&1 || true
if grep -q 'TLSv1.3:' "$WORK/nmap.txt"; then
  pass "nmap ssl-enum-ciphers: TLSv1.3"
else
  fail "nmap ssl-enum-ciphers found no TLSv1.3: $(cat "$WORK/nmap.txt")"
fi
if grep -Eq 'TLSv1(\.[012])?:|SSLv' "$WORK/nmap.txt"; then
  fail "nmap ssl-enum-ciphers found an older protocol: $(grep -E 'TLSv|SSLv' "$WORK/nmap.txt")"
else
  pass "nmap ssl-enum-ciphers: nothing older"
fi

# The scan is over: the genuine rank 1 must still get in.
echo done >&3 || true
exec 3>&-
refused=""
connected=no
while true; do
  read_status=0
  read -r -t 90 line <&4 || read_status=$?
  if [[ $read_status -gt 128 ]]; then  # silent for 90 s: not waiting any longer
    fail "the scan target said nothing for 90 s after the scan"
    kill "$target_pid" 2>/dev/null || true
    break
  fi
  [[ $read_status -eq 0 ]] || break  # end of its output
  echo "target: $line"
  case $line in
    "refused "*) refused=${line#refused } ;;
    "rank 1 connected") connected=yes ;;
  esac
done
status=0
wait "$target_pid" || status=$?
target_pid=""
if [[ $status -eq 0 && $connected == yes ]]; then
  pass "the genuine rank connects after the scan"
else
  fail "the genuine rank did not connect after the scan (exit $status): $(tail -5 "$WORK/target.err")"
fi
echo "the listener's log, refusals by reason:"
{ grep 'refused a connection' "$WORK/target.err" || true; } | sed -E 's/^.*refused a connection: //' |
  sort | uniq -c | sort -rn
# Every scanner connection ended in a refusal the acceptor reported (an audit record in a job).
if [[ -n $refused && $refused -ge 10 ]]; then
  pass "the listener refused $refused connections"
else
  fail "the listener reported ${refused:-no} refusals, expected at least 10"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all TLS scan checks passed"
