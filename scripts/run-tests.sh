#!/usr/bin/env bash
# Run every layer's test binary and print one closing line for the whole suite.
# usage: run-tests.sh BUILD_DIR TIMEOUT_S [test-runner args...]
set -uo pipefail
build=$1; timeout=$2; shift 2
export SHOAL_BIN="$build/shoal"
# the tuning profiles the tests' worlds keep (SHOAL_TUNE=auto) go to a folder of this run, not to ~/.cache
XDG_CACHE_HOME=$(mktemp -d /tmp/shoal-test-cache.XXXXXX) && export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
pass=0; fail=0; skip=0
for layer in core comm train sched sim serve live flow; do
  bin="$build/tests/test_$layer"
  [ -x "$bin" ] || { echo "missing test binary $bin" >&2; fail=$((fail+1)); continue; }
  out=$(mktemp)
  "$bin" -t "$timeout" "$@" 2>&1 | tee "$out"
  line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  rm -f "$out"
  if [ -z "$line" ]; then echo "test binary $bin printed no summary" >&2; fail=$((fail+1)); continue; fi
  p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  s=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line"); s=${s:-0}
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
done
# Script suites: the installed library (make install + pkg-config) and the Python binding.
# Each prints one "name: N passed, M failed, K skipped" line like the test binaries.
for suite in tests/install/test-install.sh tests/python/run.sh; do
  [ -x "$suite" ] || { echo "missing test suite $suite" >&2; fail=$((fail+1)); continue; }
  out=$(mktemp)
  "$suite" "$build" "$timeout" "$@" 2>&1 | tee "$out"
  line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  rm -f "$out"
  if [ -z "$line" ]; then echo "test suite $suite printed no summary" >&2; fail=$((fail+1)); continue; fi
  p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  s=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line"); s=${s:-0}
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
done
echo "suite: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
