#!/usr/bin/env bash
# How much of a non-blocking allreduce's time a computation hides (build/examples/overlap), 2 ranks, in
# four settings: on one host with shared memory and the ranks bound to a core each (the progress thread
# shares its rank's core), TCP on loopback, TCP with an emulated 200 us one-way latency
# (SHOAL_EMU_DELAY_US), and (as root, where network namespaces work) two emulated hosts of a
# `shoal testbed` joined by RATE links: waiting on a real, shaped wire, the case overlap is for.
#   bench/overlap.sh [BUILD] [--compute loop|gemm]     env: MAX=16777216 REPS=7 RATE=1gbit
set -euo pipefail
. "$(dirname "$0")/common.sh"
case ${1:-} in
-h | --help) script_help; exit 0 ;;
"" | -*) build=build ;; # [BUILD] left out
*) build=$1; shift ;;
esac
MAX=${MAX:-16777216} REPS=${REPS:-7} RATE=${RATE:-1gbit}
export OPENBLAS_NUM_THREADS=1
for cfg in "SHOAL_SHM=1" "SHOAL_SHM=0" "SHOAL_SHM=0 SHOAL_EMU_DELAY_US=200"; do
  echo "## $cfg"
  env $cfg timeout 600 "$build/shoal" launch --no-prefix -n 2 -- "$build/examples/overlap" --min 65536 --max "$MAX" \
    --reps "$REPS" "$@"
done
tb=ov$$
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null &&
  "$build/shoal" testbed up --name "$tb" --hosts 2 --rate "$RATE" >/dev/null 2>&1; then
  trap '"$build/shoal" testbed down --name "$tb" >/dev/null 2>&1 || true' EXIT
  echo "## shoal testbed: 2 hosts, $RATE links, 1 rank each"
  timeout 900 "$build/shoal" launch --no-prefix --testbed "$tb" -n 2 -- "$build/examples/overlap" --min 65536 \
    --max "$MAX" --reps "$REPS" "$@"
else
  echo "## shoal testbed: skipped (needs root, ip, tc and network namespaces)"
fi
