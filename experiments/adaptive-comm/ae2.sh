#!/usr/bin/env bash
# AE2, one slow host: allreduce busbw of shoal's automatic choice (link matrix + trees) against the
# static ring, the automatic choice before the link matrix and the trees (--base: a shoal binary of
# that version), the trees with a fixed number of trees (ablation), Open MPI and PyTorch Gloo, all
# on the same hosts one after the other: H hosts with RATE links, one rank per host, first all equal
# ("uniform"), then host H-1 at SLOW ("slow").
#   experiments/adaptive-comm/ae2.sh [--build DIR] [--base BIN] [--hosts 8] [--rate 1gbit] [--slow 250mbit]
#        [--sizes 1M:64M] [--factor 4] [--target 0.5] [--configs "uniform slow"] [--out DIR] [--name TB]
#        [--skip-mpi] [--skip-gloo]
# The base binary: git archive 6cdcf69 | tar -x -C /tmp/shoal-base && make -C /tmp/shoal-base build/shoal
# Needs root. Every program run is bounded by timeout; the testbed is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build base="" H=8 rate=1gbit slow=250mbit min=1M max=64M factor=4 target=0.5 configs="uniform slow" out=""
name=ae2 skip_mpi=0 skip_gloo=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --hosts) H=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --slow) slow=$2; shift 2 ;;
    --sizes) min=${2%%:*}; max=${2##*:}; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --skip-mpi) skip_mpi=1; shift ;;
    --skip-gloo) skip_gloo=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "ae2.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "ae2.sh: $S not built" >&2; exit 2; }
base=${base:-$build/base/shoal}
[ -x "$base" ] || { echo "ae2.sh: no base binary $base (see --help)" >&2; exit 2; }
base=$(readlink -f "$base")
out=${out:-$build/experiments/adaptive-comm}
mkdir -p "$out"
budget=600
. experiments/adaptive-comm/common.sh
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
[ $skip_mpi = 1 ] || mpicc.openmpi -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce" -lm
export OMP_NUM_THREADS=1
args=(-b "$min" -e "$max" -f "$factor" -w 1 -W 0 -T "$target")
header "ae2"
echo "# $H hosts, 1 rank each, host links $rate; slow host h$((H - 1)) at $slow; sizes $min..$max x$factor"
progs="ring before auto trees1 trees2 trees4"
[ $skip_mpi = 1 ] || progs="$progs ompi"
[ $skip_gloo = 1 ] || progs="$progs gloo"
for cfg in $configs; do
  "$S" testbed up --name "$name" --hosts "$H" --rate "$rate" >/dev/null
  [ "$cfg" = slow ] && "$S" testbed set --name "$name" h$((H - 1)) --rate "$slow" >/dev/null
  t=ae2-$cfg
  rm -f "$out/$t-tune" "$out/$t-tune-before"
  run_shoal "$t-ring" "$S" "$H" SHOAL_ALGO=ring -- bench allreduce "${args[@]}"
  # the automatic choice before: its own profile (a net class from hosts 0 and 1), measured at start
  run_shoal "$t-before" "$base" "$H" SHOAL_TUNE=init SHOAL_TUNE_FILE="$out/$t-tune-before" -- bench allreduce "${args[@]}"
  # now: the link matrix measured at start (2 flows at once: this machine's 2 cores), then cached for the ablations
  run_shoal "$t-auto" "$S" "$H" SHOAL_TUNE=init SHOAL_TUNE_FILE="$out/$t-tune" SHOAL_PROFILE_FLOWS=2 -- bench allreduce "${args[@]}"
  for P in 1 2 4; do
    run_shoal "$t-trees$P" "$S" "$H" SHOAL_TUNE=cache SHOAL_TUNE_FILE="$out/$t-tune" SHOAL_ALGO=trees SHOAL_TREES=$P:pin \
      -- bench allreduce "${args[@]}"
  done
  SHOAL_TUNE_FILE="$out/$t-tune" timeout 60 "$S" launch --testbed "$name" -n "$H" -- "$S" bench allreduce --explain \
    2>&1 | sed -n 's/^\[0\] //p' | grep '^#' >"$out/$t-explain.txt" || true
  [ $skip_mpi = 1 ] || run_ompi "$t-ompi" "$H" "${args[@]}"
  [ $skip_gloo = 1 ] || run_gloo "$t-gloo" "$H" "${args[@]}"
  "$S" testbed down --name "$name" >/dev/null
done

# Summary. Columns of every table: $1 size, $5 algo, $11 busbw out-of-place, $18 busbw in place (Gloo: in place only).
# busbw bound: the ring moves 2(H-1)/H S through the slow host: busbw <= its rate; trees with it as a leaf
# move S through it: busbw <= 2(H-1)/H x its rate.
bits=$(rate_bits "$rate") sbits=$(rate_bits "$slow")
for cfg in $configs; do
  t=ae2-$cfg
  echo
  echo "## $cfg: busbw GB/s (out of place; Gloo in place), $H hosts x 1 rank, links $rate$([ "$cfg" = slow ] && echo ", h$((H - 1)) at $slow")"
  awk -v d="$out/$t" -v progs="$progs" -v H="$H" -v B="$bits" -v Bs="$sbits" -v cfg="$cfg" '
    function load(f, key,   line, a) { while ((getline line < f) > 0) { if (line ~ /^#/) continue; split(line, a);
      if (a[1] + 0 > 0) { bw[key, a[1]] = (key == "gloo") ? a[18] : a[11]; alg[key, a[1]] = a[5]; sizes[a[1]] = 1 } } }
    BEGIN {
      np = split(progs, P, " "); for (i = 1; i <= np; i++) load(d "-" P[i] ".txt", P[i])
      b = (cfg == "slow" ? Bs : B) / 8e9; ring_lim = b; tree_lim = b * 2 * (H - 1) / H
      printf "%10s", "size(B)"; for (i = 1; i <= np; i++) printf " %7s", P[i]; printf " %6s | %7s %7s | %8s %8s %8s  %s\n", "pick", "ring<=", "trees<=", "a/ring", "a/ompi", "a/befor", "goals (>= 1 MiB: 1.5x ring, 1.5x ompi)"
      n = 0; for (s in sizes) ss[++n] = s + 0
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ss[j] < ss[i]) { t = ss[i]; ss[i] = ss[j]; ss[j] = t }
      for (i = 1; i <= n; i++) { s = ss[i]; printf "%10d", s
        for (k = 1; k <= np; k++) printf " %7s", ((P[k], s) in bw) ? bw[P[k], s] : "-"
        a = bw["auto", s] + 0; r = bw["ring", s] + 0; o = bw["ompi", s] + 0; bf = bw["before", s] + 0
        g = ""; if (cfg == "slow" && s >= 1048576) g = ((r > 0 && a >= 1.5 * r) ? "ring:ok " : "ring:MISS ") ((o > 0 && a >= 1.5 * o) ? "ompi:ok" : "ompi:MISS")
        printf " %6s | %7.4f %7.4f | %8s %8s %8s  %s\n", alg["auto", s], ring_lim, tree_lim, (r > 0 ? sprintf("%.2f", a / r) : "-"),
          (o > 0 ? sprintf("%.2f", a / o) : "-"), (bf > 0 ? sprintf("%.2f", a / bf) : "-"), g }
    }' | tee "$out/$t-table.txt"
  echo "# the model on these hosts (auto's profile):"
  grep -E 'link matrix|^# h[0-9]|size\(B\)|model pick|^# +[0-9]' "$out/$t-explain.txt" | grep -E 'link|h[0-9]' | head -12 || true
done
echo "# raw outputs in $out/ (ae2-<config>-<program>.txt)"
