#!/usr/bin/env bash
# AE3, a link that changes rate every few seconds: a training-like loop (allreduce of SIZE after
# STEP_MS of emulated compute, as `shoal bench allreduce --steps`) on H hosts while host H-1's link
# replays a bandwidth trace, every sample held HOLD seconds; iteration time of shoal's automatic
# choice with re-profiling from the times of real collectives (tune/watch.c) and without it (the
# start-up profile only), the static ring, the automatic choice before this work (--base), Open MPI
# and PyTorch Gloo, each over the same replay from its start.
#   experiments/adaptive-comm/ae3.sh --trace FILE [--build DIR] [--base BIN] [--hosts 8] [--rate 1gbit]
#        [--scale 20] [--floor 50] [--samples 40] [--hold 3] [--size 4M] [--step-ms 100] [--out DIR] [--name TB]
#        [--programs "default reprof noreprof ring before ompi gloo"] [--report]
# Every program's TCP retransmission timeouts are counted on every host (nstat TcpExtTCPTimeouts in the
# host's namespace, before and after the program): ae3-<program>-rto.txt, and the table's RTOs column.
# --report: no run, only the table of the programs' last outputs in --out (one program per run keeps each
# run short: run them one by one, then `--report --programs "..."` compares them; the last column is each
# program's iteration time over the first program's).
# default = nothing set (SHOAL_TUNE=auto: the link matrix at start with 1 MiB per pair, the watch on);
# reprof = the whole profile at start (SHOAL_TUNE=init, 4 MiB per pair) and the watch.
# FILE: iperf3 output lines ("... 14.8 Gbits/sec" or Mbits/sec), e.g. AdapCC's 5-s samples of a Huawei
# g6.4xlarge pair (github.com/JoeyYoung/adapcc at bd3e212, cloud/trace/bandwidth-hw-g6.4xlarge.4.txt);
# the rates are divided by SCALE (spec A8: /20), floored at FLOOR Mbit/s, capped at RATE; the SAMPLES
# consecutive samples with the most change (the sum of |log ratio| of neighbours) are replayed.
# The base build: git archive 6cdcf69 | tar -x -C /tmp/shoal-base && make -C /tmp/shoal-base build/shoal
# build/libshoal.so.0.1.0 && ln -s libshoal.so.0.1.0 /tmp/shoal-base/build/libshoal.so.0 (its bench has no
# --steps: the `before` loop runs through its Python binding, steps.py).
# Needs root. Every run is bounded by timeout; the testbed is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build report=0 base="" H=8 rate=1gbit scale=20 floor=50 samples=40 hold=3 size=4M step_ms=100 out="" name=ae3 trace=""
programs="default reprof noreprof ring before ompi gloo"
while [ $# -gt 0 ]; do
  case "$1" in
    --trace) trace=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --hosts) H=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --floor) floor=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --hold) hold=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --step-ms) step_ms=$2; shift 2 ;;
    --programs) programs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --report) report=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "ae3.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
out=${out:-$build/experiments/adaptive-comm}

run_programs() {
  [ -r "$trace" ] || { echo "ae3.sh: --trace FILE is needed (see --help)" >&2; exit 2; }
  [ -x "$S" ] || { echo "ae3.sh: $S not built" >&2; exit 2; }
  base=${base:-$build/base/shoal}
  . experiments/adaptive-comm/common.sh
  cap=$(($(rate_bits "$rate" | cut -d. -f1) / 1000000))
  # the replayed rates (Mbit/s), one per line
  awk '{ for (i = 2; i <= NF; i++) if ($i ~ /bits\/sec$/) { v = $(i - 1) + 0; if ($i ~ /^G/) v *= 1000; else if ($i ~ /^K/) v /= 1000; print v } }' \
    "$trace" | awk -v s="$scale" -v f="$floor" -v c="$cap" '{ v = $1 / s; if (v < f) v = f; if (v > c) v = c; printf "%d\n", v }' \
    >"$out/ae3-trace-all.txt"
  n=$(wc -l <"$out/ae3-trace-all.txt")
  [ "$n" -ge "$samples" ] || { echo "ae3.sh: $trace has $n samples, fewer than $samples" >&2; exit 2; }
  awk -v w="$samples" '{ v[NR] = $1 } END { best = -1
    for (s = 1; s + w - 1 <= NR; s++) { c = 0; for (i = s + 1; i < s + w; i++) { r = log(v[i] / v[i - 1]); c += r < 0 ? -r : r }
      if (c > best) { best = c; at = s } }
    for (i = at; i < at + w; i++) print v[i] }' "$out/ae3-trace-all.txt" >"$out/ae3-pattern.txt"
  run_s=$((samples * hold))
  budget=$((run_s + 240))
  slow=h$((H - 1))
  trap '[ -n "${rp:-}" ] && kill $rp 2>/dev/null; "$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
  "$S" testbed down --name "$name" >/dev/null 2>&1 || true
  echo "$programs" | grep -q ompi && mpicc.openmpi -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce" -lm
  export OMP_NUM_THREADS=1
  header "ae3"
  echo "# $H hosts, 1 rank each, links $rate; $slow replays $samples samples of $trace (/ $scale, floor $floor Mbit/s), $hold s each:"
  echo "# $(tr '\n' ' ' <"$out/ae3-pattern.txt")(Mbit/s)"
  echo "# loop: allreduce of $size after $step_ms ms of compute, for $run_s s"
  "$S" testbed up --name "$name" --hosts "$H" --rate "$rate" >/dev/null

  # replay in the background: sample k from k * hold seconds after it starts; returns its pid in rp
  replay() {
    ( while read -r r; do
        t0=$(date +%s.%N)
        "$S" testbed set --name "$name" "$slow" --rate "${r}mbit" >/dev/null 2>&1 || true
        echo "$(date +%s.%N) $r" >>"$out/ae3-$1-rates.txt"
        sleep "$(awk -v t0="$t0" -v h="$hold" -v now="$(date +%s.%N)" 'BEGIN { d = h - (now - t0); print (d > 0 ? d : 0) }')"
      done <"$out/ae3-pattern.txt" ) &
    rp=$!
  }

  # rto_counts: every host's TcpExtTCPTimeouts, one "hN count" line each
  rto_counts() {
    local h
    for ((h = 0; h < H; h++)); do
      echo "h$h $("$S" testbed exec --name "$name" "h$h" -- nstat -az TcpExtTCPTimeouts 2>/dev/null |
        awk '$1 == "TcpExtTCPTimeouts" { print $2 }')"
    done
  }

  steps=(bench allreduce --steps 1000000 --seconds "$run_s" --step-ms "$step_ms" -b "$size")
  for p in $programs; do
    "$S" testbed set --name "$name" "$slow" --rate "$(head -1 "$out/ae3-pattern.txt")mbit" >/dev/null
    tune="$out/ae3-tune-$p"
    rm -f "$tune" "$out/ae3-$p-rates.txt"
    rto_counts >"$out/ae3-$p-rto0.txt"
    # the profile at start-up sees the pattern's first rate, as a job started then would
    case $p in
      reprof) replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_shoal "ae3-$p" "$S" "$H" SHOAL_TUNE=init SHOAL_TUNE_FILE="$tune" SHOAL_PROFILE_FLOWS=2 \
                SHOAL_DEBUG=INFO SHOAL_DEBUG_SUBSYS=TUNING -- "${steps[@]}" ;;
      default) # nothing set: the link matrix measured at start (SHOAL_TUNE=auto) into a fresh cache, the watch on
              rm -rf "$out/ae3-cache-$p"; replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_shoal "ae3-$p" "$S" "$H" XDG_CACHE_HOME="$out/ae3-cache-$p" SHOAL_DEBUG=INFO SHOAL_DEBUG_SUBSYS=TUNING -- \
                "${steps[@]}" ;;
      noreprof) replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_shoal "ae3-$p" "$S" "$H" SHOAL_TUNE=init SHOAL_TUNE_FILE="$tune" SHOAL_PROFILE_FLOWS=2 \
                SHOAL_REPROFILE=off -- "${steps[@]}" ;;
      ring)   replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_shoal "ae3-$p" "$S" "$H" SHOAL_ALGO=ring -- "${steps[@]}" ;;
      before) # that build's bench has no --steps: the same loop through its Python binding (steps.py)
              bdir=$(dirname "$(readlink -f "$base")")
              replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_shoal "ae3-$p" /usr/bin/python3 "$H" SHOAL_TUNE=init SHOAL_TUNE_FILE="$tune" OMP_NUM_THREADS=1 \
                PYTHONPATH="$bdir/../python" SHOAL_LIBRARY="$bdir/libshoal.so.0" -- \
                "$PWD/experiments/adaptive-comm/steps.py" -b "$(size_bytes "$size")" --steps 1000000 --seconds "$run_s" \
                --step-ms "$step_ms" ;;
      ompi)   replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_ompi "ae3-$p" "$H" --steps 1000000 --seconds "$run_s" --step-ms "$step_ms" -b "$size" ;;
      gloo)   replay $p; echo "$(date +%s.%N) start" >>"$out/ae3-$p-rates.txt"
              run_gloo "ae3-$p" "$H" --steps 1000000 --seconds "$run_s" --step-ms "$step_ms" -b "$size" ;;
      *) echo "ae3.sh: unknown program $p" >&2; continue ;;
    esac
    kill "$rp" 2>/dev/null || true
    wait "$rp" 2>/dev/null || true
    rp=""
    rto_counts | join "$out/ae3-$p-rto0.txt" - | awk '{ print $1, $3 - $2 }' >"$out/ae3-$p-rto.txt"
    echo "# $p: TCP retransmission timeouts per host: $(tr '\n' ' ' <"$out/ae3-$p-rto.txt")" >&2
  done
}

mkdir -p "$out"
[ "$report" = 1 ] || run_programs
echo
echo "## iteration time = $step_ms ms compute + allreduce ($size), over the replay"
first=${programs%% *}
printf "%10s %8s %12s %14s %12s %6s %12s\n" "program" "steps" "allreduce" "iteration" "re-profiles" "RTOs" "vs $first"
ref=""
for p in $programs; do
  f=$out/ae3-$p.txt
  line=$(grep '^# steps' "$f" 2>/dev/null | tail -1 || true)
  [ -n "$line" ] || { printf "%10s %8s\n" "$p" "failed"; continue; }
  st=$(echo "$line" | sed 's/# steps \([0-9]*\),.*/\1/'); ms=$(echo "$line" | sed 's/.*mean \([0-9.]*\) ms.*/\1/')
  re=$(echo "$line" | sed -n 's/.* \([0-9]*\) re-profiles.*/\1/p'); re=${re:--}
  it=$(awk -v a="$ms" -v c="$step_ms" 'BEGIN { printf "%.1f", a + c }')
  [ "$p" = "$first" ] && ref=$it
  vs=$([ -n "$ref" ] && awk -v a="$it" -v r="$ref" 'BEGIN { printf "%.2f", a / r }' || echo -)
  rto=$(awk '{ n += $2 } END { print (NR ? n : "-") }' "$out/ae3-$p-rto.txt" 2>/dev/null || echo -)
  printf "%10s %8s %9.1f ms %11.1f ms %12s %6s %12s\n" "$p" "$st" "$ms" "$it" "$re" "$rto" "$vs"
done | tee "$out/ae3-table.txt"
echo "# per-step lines: $out/ae3-<program>.txt (step, time ms, re-profiles, algo, t s, plan); rates: ae3-<program>-rates.txt;"
echo "# RTOs: TCP retransmission timeouts on all hosts during the program (per host: ae3-<program>-rto.txt)"
