#!/usr/bin/env bash
# What dynamic batching buys: one `shoal serve` replica (MLP) on loopback, Poisson load from `shoal loadgen`
# at rising rates, batches of 1 row (no batching) against batches up to 32 rows with a 2 ms timeout.
# Prints one row per (setting, rate): ok, failed, P50/P99 latency from the scheduled arrival. The load
# generator shares the machine's cores with the server (2 here): read the ratios, not the absolute rates.
#   bench/serve.sh [BUILD_DIR] [--rates "200 400 800 1200"] [--duration 10] [--params FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=build rates="200 400 800 1200" duration=10 params=""
[ $# -gt 0 ] && [ "${1#--}" = "$1" ] && { build=$1; shift; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) val "$@"; rates=$2; shift 2 ;;
    --duration) val "$@"; duration=$2; shift 2 ;;
    --params) val "$@"; params=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
S=$build/shoal
out=$build/bench/serve
mkdir -p "$out"
if [ -z "$params" ]; then
  params=$out/mlp.params
  [ -s "$params" ] || "$S" train --model mlp --epochs 1 --train-subset 10000 --quiet --params-out "$params"
fi
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT
printf '%-18s %6s %8s %7s %9s %9s\n' setting rate ok failed p50_ms p99_ms
for setting in "1 0" "32 2"; do
  set -- $setting
  rm -f "$out/port"
  "$S" serve --params "$params" --addr 127.0.0.1 --port 0 --port-file "$out/port" --max-batch "$1" \
    --batch-timeout-ms "$2" >"$out/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do [ -s "$out/port" ] && break; sleep 0.05; done
  for rate in $rates; do
    r=$("$S" loadgen --url "http://127.0.0.1:$(cat "$out/port")" --poisson "$rate" --duration "$duration" \
          --timeout 5 --window "$duration" 2>&1)
    ok=$(sed -n 's/.*: \([0-9]*\) ok, \([0-9]*\) failed.*/\1 \2/p' <<<"$r")
    lat=$(sed -n 's/^latency ms: p50 \([0-9.]*\)  p90 [0-9.]*  p99 \([0-9.]*\).*/\1 \2/p' <<<"$r")
    printf '%-18s %6s %8s %7s %9s %9s\n' "batch<=$1,${2}ms" "$rate" $ok $lat
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  echo "  server: $(tail -n 1 "$out/server.log")"
done
