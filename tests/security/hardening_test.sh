#!/usr/bin/env bash
# The build hardening SECURITY.md claims, checked in the built binaries themselves (what
# checksec reports), so a change to the build that drops a flag fails here.
#
# Usage: hardening_test.sh fortify|no-fortify FILE...
#   no-fortify: Debug, sanitizer and fuzzing builds, which leave _FORTIFY_SOURCE out
#   (CMakeLists.txt).
# Exit 77 (skipped) without readelf.
set -uo pipefail

if [ $# -lt 2 ] || { [ "$1" != fortify ] && [ "$1" != no-fortify ]; }; then
  echo "usage: hardening_test.sh fortify|no-fortify FILE..." >&2
  exit 2
fi
fortify="$1"
shift
if ! command -v readelf >/dev/null; then
  echo "SKIP: readelf (binutils) is not installed"
  exit 77
fi

failures=()
fortified_files=0
fail() { failures+=("$1: $2"); }

for file in "$@"; do
  if [ ! -f "$file" ]; then
    fail "$file" "no such file"
    continue
  fi
  header="$(readelf -hW "$file")" || { fail "$file" "readelf cannot read it"; continue; }
  dynamic="$(readelf -dW "$file")"
  segments="$(readelf -lW "$file")"
  # Undefined dynamic symbols, without their version ("__stack_chk_fail@GLIBC_2.4 (3)").
  imports="$(readelf --dyn-syms -W "$file" | awk '$7 == "UND" { sub(/@.*/, "", $8); print $8 }')"

  grep -q "Type: *DYN" <<<"$header" ||
    fail "$file" "not position-independent (ELF type is not DYN), so ASLR cannot move its code"
  grep -q "GNU_RELRO" <<<"$segments" ||
    fail "$file" "no GNU_RELRO segment: relocated data stays writable"
  grep -qE "\(FLAGS\) .*BIND_NOW|\(FLAGS_1\) .*NOW" <<<"$dynamic" ||
    fail "$file" "not linked with -z now: lazy binding leaves the GOT writable"
  stack="$(grep "GNU_STACK" <<<"$segments")"
  if [ -z "$stack" ]; then
    fail "$file" "no GNU_STACK header: the loader would make the stack executable"
  elif grep -qE " RWE " <<<"$stack"; then
    fail "$file" "executable stack"
  fi
  grep -qx "__stack_chk_fail" <<<"$imports" ||
    fail "$file" "no stack protector (__stack_chk_fail is not imported)"
  grep -q "^_ZSt21__glibcxx_assert_fail" <<<"$imports" ||
    fail "$file" "no libstdc++ assertions (_GLIBCXX_ASSERTIONS: __glibcxx_assert_fail is not imported)"
  # _FORTIFY_SOURCE shows as __*_chk imports (__stack_chk_fail ends in _fail: not counted).
  # A file may have nothing to check (libsempi_mpi prints nothing itself); but the printf
  # family is always replaced by its _chk form when fortified, so a plain one means it is not.
  if [ "$fortify" = fortify ]; then
    grep -qE "^__[a-z0-9_]+_chk$" <<<"$imports" && fortified_files=$((fortified_files + 1))
    plain="$(grep -xE "(v?[fd]?printf|v?s(n)?printf)" <<<"$imports" | tr '\n' ' ')"
    [ -z "$plain" ] ||
      fail "$file" "not fortified (_FORTIFY_SOURCE would have replaced: $plain)"
  fi
done
if [ "$fortify" = fortify ] && [ "$fortified_files" -eq 0 ]; then
  fail "$*" "not fortified (_FORTIFY_SOURCE: no __*_chk function is imported by any of them)"
fi

if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAIL: %s\n' "${failures[@]}"
  exit 1
fi
echo "ok: $# binaries are PIE, full RELRO, non-executable stack, stack protector," \
     "libstdc++ assertions$([ "$fortify" = fortify ] && echo ", fortified")"
