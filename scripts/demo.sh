#!/usr/bin/env bash
# make demo: the whole system in a few minutes on one machine.
#   1. communication: 4 local ranks run every collective once with a bit-exact check
#   2. a short allreduce benchmark (nccl-tests columns) over TCP and shared memory
#   3. an emulated cluster (shoal testbed, root only): 4 hosts in 2 racks, then one
#      host's link slowed: the link matrix sees it and the automatic choice changes
#   4. training: MLP on Fashion-MNIST, 4 ranks, BSP vs DS-Sync, accuracy-vs-time plot
#   4b. serving the BSP model: two replicas behind the router, the Azure conversation trace replayed,
#      one replica killed mid-run (its requests are retried on the other)
#   5. cluster scheduling on contended scenarios (jobs queue): every policy,
#      baselines and the slot planners larr, greedy, oasis, on the one event
#      engine; where the policies differ and by how much; the lower bound
# Outputs (CSV, JSON, SVG) go to out/demo/.
set -euo pipefail
build=${1:-build}
shoal="$build/shoal"
out=out/demo
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
bold() { if [ -t 1 ]; then printf '\n\033[1m== %s\033[0m\n' "$*"; else printf '\n== %s\n' "$*"; fi; }

bold "shoal $("$shoal" --version | cut -d' ' -f2): communication, 4 ranks, every collective with a correctness check"
"$shoal" launch -n 4 -- "$shoal" selftest

bold "measure this host's links and fit the cost model (shoal tune), then benchmark with the fitted choice"
"$shoal" launch -n 4 -- "$shoal" tune --file "$out/tune.txt"
export SHOAL_TUNE_FILE="$out/tune.txt"

bold "allreduce benchmark, 4 ranks on this host (shared memory), float32 sum"
"$shoal" launch -n 4 -- "$shoal" bench allreduce -b 8 -e 16M -f 8 -T 0.05 --check

bold "allreduce benchmark, 4 ranks over TCP only (SHOAL_SHM=0)"
SHOAL_SHM=0 "$shoal" launch -n 4 -- "$shoal" bench allreduce -b 8 -e 16M -f 8 -T 0.05 --check

tb=demo$$
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null && ip netns add "$tb-probe" 2>/dev/null; then
  ip netns del "$tb-probe"
  trap '"$shoal" testbed down --name "$tb" >/dev/null 2>&1 || true' EXIT
  bold "an emulated cluster: 4 hosts (network namespaces) in 2 racks, 1 Gbit/s host links, 1 rank per host"
  "$shoal" testbed up --name "$tb" --hosts 4 --racks 2 --rate 1gbit --oversub 2
  "$shoal" testbed status --name "$tb"
  SHOAL_TUNE=force SHOAL_TUNE_FILE="$out/tune-testbed.txt" "$shoal" launch --testbed "$tb" -n 4 -- \
    "$shoal" bench allreduce -b 64K -e 16M -f 16 -T 0.05 --check
  bold "the same after h3's link is cut to 250 Mbit/s: the link matrix measured at start sees it, and the algo column shows what the model picks on it"
  "$shoal" testbed set --name "$tb" h3 --rate 250mbit
  SHOAL_TUNE=force SHOAL_TUNE_FILE="$out/tune-testbed.txt" "$shoal" launch --testbed "$tb" -n 4 -- \
    "$shoal" bench allreduce -b 64K -e 16M -f 16 -T 0.05 --check
  "$shoal" testbed down --name "$tb"
else
  bold "an emulated cluster: skipped (needs root, ip and tc, and network namespaces; see docs/testbed.md)"
fi

bold "training: MLP on Fashion-MNIST, 4 ranks, 1 epoch on 12k images: BSP, then DS-Sync (butterfly)"
"$shoal" launch -n 4 -- "$shoal" train --model mlp --sync bsp --train-subset 12000 --test-subset 2000 \
  --epochs 1 --batch 32 --csv "$out/train-bsp.csv" --label bsp --params-out "$out/mlp.params"
"$shoal" launch -n 4 -- "$shoal" train --model mlp --sync dssync --train-subset 12000 --test-subset 2000 \
  --epochs 1 --batch 32 --csv "$out/train-dssync.csv" --label dssync
"$shoal" train --plot "$out/train-accuracy.svg" "$out/train-bsp.csv" "$out/train-dssync.csv"

bold "serving: the BSP model in 2 replicas behind the router; 15 s of the Azure conversation trace at 30x; one replica killed at 6 s"
serve_pids=()
rm -f "$out"/replica1.port "$out"/replica2.port "$out"/router.port
stop_serving() { for p in "${serve_pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait "${serve_pids[@]}" 2>/dev/null || true; }
for i in 1 2; do
  "$shoal" serve --params "$out/mlp.params" --addr 127.0.0.1 --port 0 --port-file "$out/replica$i.port" >"$out/replica$i.log" 2>&1 &
  serve_pids+=($!)
done
for i in 1 2; do for _ in $(seq 1 100); do [ -s "$out/replica$i.port" ] && break; sleep 0.05; done; done
"$shoal" serve --router --addr 127.0.0.1 --port 0 --port-file "$out/router.port" \
  --replica "http://127.0.0.1:$(cat "$out/replica1.port")" --replica "http://127.0.0.1:$(cat "$out/replica2.port")" \
  >"$out/router.log" 2>&1 &
serve_pids+=($!)
for _ in $(seq 1 100); do [ -s "$out/router.port" ] && break; sleep 0.05; done
azure=../shared/data/azure-llm-2023/conv.csv
if [ -r "$azure" ]; then arrivals=(--trace "$azure" --speedup 30 --duration 15); else arrivals=(--poisson 150 --duration 15); fi
(sleep 6; kill -9 "${serve_pids[0]}" 2>/dev/null) &
"$shoal" loadgen --url "http://127.0.0.1:$(cat "$out/router.port")" "${arrivals[@]}" --slo-ms 50 --window 3 \
  --timeline "$out/serve-timeline.csv"
stop_serving
echo "router at exit: $(tail -n 1 "$out/router.log")"

# where the policies differ: one line per policy from shoal sim's CSV, then the spread
differ() { # CSV file
  awk -F, 'NR == 1 { printf "%-22s %10s %10s %10s %6s %9s %10s\n", "policy", "avgJCT(s)", "p95(s)", "queue(s)", "util", "FTFmax", "decide_ms"; next }
    { n++; p[n] = $2; j[n] = $5; q[n] = $10; f[n] = $14
      printf "%-22s %10.0f %10.0f %10.0f %6.3f %9.2f %10.4f\n", $2, $5, $7, $10, $12, $14, $17 }
    END { b = w = 1; for (i = 2; i <= n; i++) { if (j[i] < j[b]) b = i; if (j[i] > j[w]) w = i }
      qb = qw = 1; for (i = 2; i <= n; i++) { if (q[i] < q[qb]) qb = i; if (q[i] > q[qw]) qw = i }
      printf "-> the policies differ: average JCT %.0f s (%s) to %.0f s (%s), %.2fx; average queueing %.0f s (%s) to %.0f s (%s)\n",
        j[b], p[b], j[w], p[w], j[w] / j[b], q[qb], p[qb], q[qw], p[qw] }' "$1"
}

bold "cluster simulation, default scenario: 3,000 Philly-like jobs at load 0.9 on 16 x 8 GPUs (jobs 500..2499 measured)"
"$shoal" sim --no-progress --csv --policy fifo,srtf,tiresias,optimus,drf,gavel,greedy,larr,oasis --out "$out/sim-synthetic" \
  > "$out/sim-synthetic.csv"
differ "$out/sim-synthetic.csv"

philly=../shared/data/philly/philly.csv
if [ -r "$philly" ]; then
  bold "cluster simulation: the busiest week of the Philly trace (12,417 jobs) on 80 x 8 GPUs"
  "$shoal" sim --scenario philly-busy --no-progress --csv --policy fifo,srtf,tiresias,optimus,drf,gavel,greedy \
    --out "$out/sim-philly-busy" > "$out/sim-philly-busy.csv"
  differ "$out/sim-philly-busy.csv"

  bold "Pollux-style: 160 Philly jobs of busy hours on 64 GPUs, every policy, with the offline lower bound (slots of 30 min)"
  "$shoal" sched run --scenario pollux --lb-slot 1800 --lb-time 10 --no-progress --out "$out/sim-pollux" 2>&1 | grep -v "LP failed"
fi

bold "Gavel-style steady state: Poisson arrivals at load 0.9 on 108 GPUs, jobs 4000..4999 measured"
"$shoal" sim --scenario gavel --no-progress --csv --policy fifo,srtf,tiresias,optimus,drf,gavel,greedy \
  --out "$out/sim-gavel" > "$out/sim-gavel.csv"
differ "$out/sim-gavel.csv"

bold "decision time per arrival of the slot planners (larr, larr with re-planning, greedy, oasis)"
"$shoal" sched decide-time --machines 100,500 --jobs 10

echo
echo "outputs in $out/: per-job CSVs, JSON summaries, SVG plots (JCT and queueing-delay CDFs, utilization, accuracy vs time)"
