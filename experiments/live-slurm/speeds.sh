#!/bin/bash
# Measured speeds of the live workload's jobs on the testbed, as the table that
# `shoal sim --speed table` and `shoal sched serve --throughputs` read.
# 8 hosts in 2 racks (h0-h3 | h4-h7), 1 Gbit/s host links, uplinks 2:1, every
# host's CPU limited to CPU (the live runs' setting); `shoal train` (bsp, batch
# 64 per worker, one rank per host, --bind none as under srun) for each model at
# 1, 2 and 4 workers, with the cluster full as in the live runs: 8 one-worker
# jobs at once, 4 two-worker jobs (two in a rack, two across racks), 2
# four-worker jobs (one per rack, then two across racks). Value = worker-steps/s
# (W x iterations/s) from the epoch's samples/s (start-up excluded) over one
# epoch (60,000 images); start-up = wall time of the run minus its epoch time.
#   speeds.sh [SHOAL_BIN] [OUT_DIR]      env: MODELS="mlp cnn" CPU=0.2 NAME=lsp
#                                       DATA (Fashion-MNIST unpacked; default: a temporary directory)
set -u
S=$(realpath "${1:-build/shoal}") OUT=${2:-build/experiments/live-slurm/speeds}
MODELS=${MODELS:-mlp cnn} CPU=${CPU:-0.2} NAME=${NAME:-lsp}
DATA=${DATA:-} keep_data=1 # Fashion-MNIST unpacked (54 MB): in DATA if given (kept), else a temporary directory removed at exit
[ -n "$DATA" ] || { DATA=$(mktemp -d /tmp/shoal-fmnist-XXXXXX) && keep_data=0; } || exit 1
mkdir -p "$OUT" "$DATA" || exit 1
for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do
  b=$(basename "$f" .gz); [ -s "$DATA/$b" ] || gunzip -c "$f" > "$DATA/$b" || exit 1
done
cleanup() {
  "$S" testbed down --name "$NAME" > /dev/null 2>&1
  [ "$keep_data" = 1 ] || rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$S" testbed up --name "$NAME" --hosts 8 --racks 2 --rate 1gbit --oversub 2 > "$OUT/up.log" || exit 1
for h in 0 1 2 3 4 5 6 7; do "$S" testbed set --name "$NAME" h$h --cpu "$CPU" > /dev/null || exit 1; done
# samples per run: one epoch of the whole training set (5-20 s of training)
subset() { echo 60000; }
run() { # model hosts tag
  local m=$1 hosts=$2 tag=$3 w t0 t1
  w=$(echo "$hosts" | tr ',' '\n' | wc -l)
  t0=$(date +%s.%N)
  "$S" launch --testbed "$NAME" -n "$w" --per-host 1 --hosts "$hosts" --bind none --timeout 300 -- \
    "$S" train --model "$m" --epochs 1 --train-subset "$(subset "$m" "$w")" --test-subset 500 --data "$DATA" \
    --batch 64 > "$OUT/$tag.out" 2>&1
  t1=$(date +%s.%N)
  awk -v m="$m" -v w="$w" -v h="$hosts" -v t0="$t0" -v t1="$t1" -v ns="$(subset "$m" "$w")" '
    / samples\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "samples/s") sps = $i }
    END { if (sps > 0) printf "%s %d %s %.1f %.2f %.2f\n", m, w, h, sps, sps / 64, t1 - t0 - ns / sps
          else printf "%s %d %s failed 0 0\n", m, w, h }' "$OUT/$tag.out"
}
echo "model workers hosts samples_per_s worker_steps_per_s startup_s" > "$OUT/results.txt"
for m in $MODELS; do
  for set in "h0 h1 h2 h3 h4 h5 h6 h7" "h0,h1 h2,h3 h4,h5 h6,h7" "h0,h4 h1,h5 h2,h6 h3,h7" \
             "h0,h1,h2,h3 h4,h5,h6,h7" "h0,h1,h4,h5 h2,h3,h6,h7"; do
    i=0; pids=()
    for hosts in $set; do run "$m" "$hosts" "$m-$hosts" > "$OUT/.r$i" & pids+=($!); i=$((i + 1)); done
    wait "${pids[@]}"
    for k in $(seq 0 $((i - 1))); do cat "$OUT/.r$k"; done | tee -a "$OUT/results.txt"
  done
done
rm -f "$OUT"/.r*
# the table: one-host speed (W = 1) as "testbed", spread speeds per worker count as
# "testbed_unconsolidated" (within a rack) and "testbed-xrack_unconsolidated" (across racks)
/usr/bin/python3 - "$OUT/results.txt" > "$OUT/throughputs.json" <<'PY'
import sys, collections, json
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:] if "failed" not in l]
acc = collections.defaultdict(list)
for m, w, hosts, sps, wsps, st in rows:
    hs = [int(h[1:]) for h in hosts.split(",")]
    cls = "one" if len(hs) == 1 else ("rack" if len({h // 4 for h in hs}) == 1 else "xrack")
    acc[(m, int(w), cls)].append(float(wsps))
mean = {k: sum(v) / len(v) for k, v in acc.items()}
out = {"testbed": {}, "testbed_unconsolidated": {}, "testbed-xrack": {}, "testbed-xrack_unconsolidated": {}}
for (m, w, cls), v in sorted(mean.items()):
    key = "('%s', %d)" % (m, w)
    if cls == "one":
        out["testbed"][key] = out["testbed-xrack"][key] = {"null": round(v, 3)}
    elif cls == "rack":
        out["testbed_unconsolidated"][key] = {"null": round(v, 3)}
        if (m, w, "xrack") not in mean: out["testbed-xrack_unconsolidated"][key] = {"null": round(v, 3)}
    else:
        out["testbed-xrack_unconsolidated"][key] = {"null": round(v, 3)}
print(json.dumps(out, indent=1))
PY
cat "$OUT/throughputs.json"
