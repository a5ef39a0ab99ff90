#!/usr/bin/env bash
# Allreduce float32 sum on ONE host: shoal (shared memory, default choice of
# algorithm) vs Open MPI's shared-memory path (mpirun, default btl = vader),
# in one run, same sweep and method (bench/mpi_allreduce.c mirrors `shoal
# bench`), with the ratios, plus the machine's copy bandwidth measured in the
# same run and, from 64 MiB up, the fraction of the memory bound reached
# (t >= 2 p S / BW_mem: every input read once, every output written once;
# spec comm-anchors.md section 3).
#   bench/shm-anchors.sh [--build DIR] [--ranks "2 4"] [--min 8] [--max 256M] [--factor 2]
#                        [--iters N] [--target SEC] [--warmup N] [--reps R] [--out DIR]
#                        [--baseline DIR]
# --reps R (default 3) alternates shoal and Open MPI runs R times and keeps, per
# size, each one's best run (lowest p50): this VM's speed drifts by up to 2x
# for minutes at a time (host contention we cannot see: no steal time shows),
# and alternating gives both sides the same chances.
# --baseline DIR: also run DIR/shoal (another build, e.g. of an earlier commit:
# git archive REV | tar -x -C /tmp/base && make -C /tmp/base build/shoal) in the
# same alternation, and print a latency table shoal vs baseline vs Open MPI
# for the sizes up to 4 KiB (what a change to the small-message path costs).
# Goal: busbw >= 1.2x Open MPI's at every size from 64 KiB; p50
# latency <= Open MPI's from 8 B to 4 KiB; N = 2 and 4.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build=build ranks="2 4" min=8 max=256M factor=2 iters=0 target=0.2 warmup=5 out="" reps=3 baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) val "$@"; build=$2; shift 2 ;;
    --ranks) val "$@"; ranks=$2; shift 2 ;;
    --min) val "$@"; min=$2; shift 2 ;;
    --max) val "$@"; max=$2; shift 2 ;;
    --factor) val "$@"; factor=$2; shift 2 ;;
    --iters) val "$@"; iters=$2; shift 2 ;;
    --target) val "$@"; target=$2; shift 2 ;;
    --warmup) val "$@"; warmup=$2; shift 2 ;;
    --out) val "$@"; out=$2; shift 2 ;;
    --reps) val "$@"; reps=$2; shift 2 ;;
    --baseline) val "$@"; baseline=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
shoal="$build/shoal"
[ -x "$shoal" ] || { echo "shm-anchors.sh: $shoal not built (make BUILD=$build)" >&2; exit 2; }
command -v mpicc.openmpi >/dev/null || { echo "shm-anchors.sh: mpicc.openmpi missing (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
out=${out:-$build/bench/shm-anchors}
mkdir -p "$out"
args=(-b "$min" -e "$max" -f "$factor" -w "$warmup" -T "$target")
[ "$iters" != 0 ] && args+=(-n "$iters")
# the sweep's options, checked once by shoal bench itself (its error, not a silent failed run)
if ! err=$("$shoal" bench allreduce "${args[@]}" --explain -p 2 2>&1 >/dev/null); then
  echo "shm-anchors.sh: ${err:-shoal bench refused the options}" >&2
  exit 2
fi
budget=3600   # hard cap per program run, seconds
unset SHOAL_SHM SHOAL_ALGO   # shoal's defaults: shared memory, the model's choice

mpicc.openmpi -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce" -lm
cc -O3 bench/memcpy_bw.c -o "$out/memcpy_bw"

[ -z "$baseline" ] || [ -x "$baseline/shoal" ] || { echo "shm-anchors.sh: $baseline/shoal not built" >&2; exit 2; }
run_shoal() { # n file [shoal binary]
  local bin=${3:-$shoal}
  timeout $budget "$bin" launch -n "$1" -- "$bin" bench allreduce "${args[@]}" >"$2.raw" 2>"$2.err"
  sed -n 's/^\[0\] //p' "$2.raw" | grep -E '^(#| +[0-9])' >"$2"
}
run_mpi() { # n file (default btl: self + vader on one host)
  timeout $budget mpirun.openmpi --allow-run-as-root --oversubscribe -np "$1" "$out/mpi_allreduce" "${args[@]}" \
    >"$2" 2>"$2.err"
}

cores=$(nproc)
echo "# shm-anchors: allreduce float32 sum, one host, sizes $min..$max x$factor, ranks: $ranks"
echo "# $(date -u +%FT%TZ) $(uname -n), $cores cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
bw1=$("$out/memcpy_bw" -j 1); bwc=$("$out/memcpy_bw" -j "$cores")
bw=$(awk -v a="$bw1" -v b="$bwc" 'BEGIN { print (a > b ? a : b) }')
echo "# copy bandwidth (memcpy 256 MiB, read+write counted): 1 process $bw1 GB/s, $cores at once $bwc GB/s; BW_mem = $bw GB/s"
for n in $ranks; do
  for r in $(seq 1 "$reps"); do
    echo "# running shoal, $n ranks (run $r of $reps) ..." >&2; run_shoal "$n" "$out/shoal-$n.run$r.txt"
    echo "# running Open MPI (vader), $n ranks (run $r of $reps) ..." >&2; run_mpi "$n" "$out/mpi-$n.run$r.txt"
    if [ -n "$baseline" ]; then
      echo "# running the baseline $baseline/shoal, $n ranks (run $r of $reps) ..." >&2
      run_shoal "$n" "$out/base-$n.run$r.txt" "$baseline/shoal"
    fi
  done
  [ -z "$baseline" ] || best_of 7 "$out/base-$n.txt" "$out"/base-$n.run*.txt
  best_of 7 "$out/shoal-$n.txt" "$out"/shoal-$n.run*.txt
  best_of 7 "$out/mpi-$n.txt" "$out"/mpi-$n.run*.txt
done

# Table columns: $1 size, $7 p50 out-of-place (us), $11 busbw out-of-place. Out-of-place vs out-of-place.
for n in $ranks; do
  echo
  echo "## $n ranks (busbw GB/s; p50 us; ratio > 1 means shoal is faster; bound = 2 p S / BW_mem)"
  awk -v n="$n" -v mpi="$out/mpi-$n.txt" -v bw="$bw" '
    function ratio(x, y) { return (y > 0 && x != "" && y != "") ? sprintf("%.2f", x / y) : "-" }
    BEGIN {
      while ((getline line < mpi) > 0) { if (line ~ /^#/) continue; split(line, a); mp[a[1]] = a[7]; mb[a[1]] = a[11] }
      printf "%10s | %8s %8s %7s | %9s %9s %7s | %9s %6s | %s\n", "size(B)", "shoal", "ompi", "s/ompi",
             "shoal_us", "ompi_us", "o/s", "bound_us", "frac", "goal"
    }
    /^#/ { next }
    {
      s = $1; r = ratio($11, mb[s]); l = ratio(mp[s], $7); goal = ""; bnd = "-"; frac = "-"
      if (s >= 65536) goal = (r != "-" && r >= 1.2) ? "ok" : "BELOW";
      else if (s <= 4096) goal = (l != "-" && l >= 1) ? "ok" : "SLOWER";
      if (s >= 67108864) { t = 2 * n * s / (bw * 1e9) * 1e6; bnd = sprintf("%.0f", t); frac = sprintf("%.2f", t / $7) }
      printf "%10s | %8s %8s %7s | %9s %9s %7s | %9s %6s | %s\n", s, $11, mb[s], r, $7, (s in mp ? mp[s] : "-"),
             (s <= 4096 ? l : "-"), bnd, frac, goal
    }' "$out/shoal-$n.txt"
done
if [ -n "$baseline" ]; then
  for n in $ranks; do
    echo
    echo "## $n ranks, p50 latency up to 4 KiB (us): this build vs the baseline $baseline vs Open MPI (vader)"
    awk -v mpi="$out/mpi-$n.txt" -v base="$out/base-$n.txt" '
      BEGIN {
        while ((getline line < mpi) > 0) { if (line ~ /^#/) continue; split(line, a); mp[a[1]] = a[7] }
        while ((getline line < base) > 0) { if (line ~ /^#/) continue; split(line, a); bp[a[1]] = a[7] }
        printf "%10s | %9s %9s %9s | %9s %9s\n", "size(B)", "shoal_us", "base_us", "ompi_us", "new/base", "new/ompi"
      }
      /^#/ || $1 > 4096 { next }
      { printf "%10s | %9s %9s %9s | %9.2f %9.2f\n", $1, $7, bp[$1], mp[$1], (bp[$1] > 0 ? $7 / bp[$1] : 0),
               (mp[$1] > 0 ? $7 / mp[$1] : 0) }' "$out/shoal-$n.txt"
  done
fi
echo
echo "# raw outputs in $out/ (shoal-N.runR.txt, mpi-N.runR.txt; best of runs in shoal-N.txt, mpi-N.txt)"
