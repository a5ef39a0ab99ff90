#!/usr/bin/env bash
# How much of a non-blocking allreduce's time a computation hides (build/examples/overlap), 2 ranks on
# one host, in three settings: shared memory with the ranks bound to a core each (the progress thread
# shares its rank's core), TCP on loopback, and TCP with an emulated 200 us one-way latency
# (SHOAL_EMU_DELAY_US: waiting on the wire, the case overlap is for).
#   bench/overlap.sh [BUILD] [--compute loop|gemm]     env: MAX=16777216 REPS=7
set -euo pipefail
build=${1:-build}; shift || true
MAX=${MAX:-16777216} REPS=${REPS:-7}
export OPENBLAS_NUM_THREADS=1
for cfg in "SHOAL_SHM=1" "SHOAL_SHM=0" "SHOAL_SHM=0 SHOAL_EMU_DELAY_US=200"; do
  echo "## $cfg"
  env $cfg timeout 600 "$build/shoal" launch --no-prefix -n 2 -- "$build/examples/overlap" --min 65536 --max "$MAX" \
    --reps "$REPS" "$@"
done
