#!/usr/bin/env bash
# The Python binding's tests: every tests/python/test_*.py run by Debian's /usr/bin/python3 (with
# python3-numpy and python3-torch) under a time limit, against BUILD_DIR's libshoal.so.
# usage: run.sh BUILD_DIR TIMEOUT_S [name patterns...]   prints "python: N passed, M failed, K skipped"
set -uo pipefail
shopt -s nullglob
build=$1; timeout=${2:-120}; shift; [ $# -gt 0 ] && shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
pass=0; fail=0; skip=0
tests=()
for f in "$repo"/tests/python/test_*.py; do
  name=python_$(basename "$f" .py | sed 's/^test_//')
  if [ $# -gt 0 ]; then
    want=0; for pat in "$@"; do case $name in *"$pat"*) want=1;; esac; done
    [ $want = 1 ] || continue
  fi
  tests+=("$f")
done
if [ -n "${SHOAL_SANITIZE:-}" ] && [ ${#tests[@]} -gt 0 ]; then
  # ASan must be the first DSO of the process: preloading it into the interpreter also instruments
  # torch/numpy and reports their own leaks. The C library these tests reach runs under ASan in the C suites.
  echo "skip python tests (${#tests[@]}): the sanitizer pass covers the C library through the C test binaries"
  echo "python: 0 passed, 0 failed, ${#tests[@]} skipped"; exit 0
fi
if [ ${#tests[@]} -gt 0 ] && ! $py -c 'import numpy, torch' 2>/dev/null; then
  echo "FAIL python: $py cannot import numpy and torch (scripts/deps.sh installs python3-numpy python3-torch)"
  echo "python: 0 passed, ${#tests[@]} failed, 0 skipped"; exit 1
fi
export PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH}
export SHOAL_LIBRARY=$(cd "$build" && pwd)/libshoal.so.0
export SHOAL_BIN=$(cd "$build" && pwd)/shoal
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for f in "${tests[@]}"; do
  name=python_$(basename "$f" .py | sed 's/^test_//')
  t0=$(date +%s.%N)
  # setsid + timeout -s KILL on the group: a hung rank cannot outlive the test
  out=$(timeout -k 5 "$timeout" setsid $py "$f" 2>&1); rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  case $rc in
    0) echo "ok $name (${dt}s)"; pass=$((pass+1));;
    77) echo "skip $name: $(tail -1 <<<"$out")"; skip=$((skip+1));;
    124|137) echo "$out" | tail -30; echo "FAIL $name: timed out after ${timeout}s"; fail=$((fail+1));;
    *) echo "$out" | tail -40; echo "FAIL $name (exit $rc)"; fail=$((fail+1));;
  esac
done
echo "python: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
