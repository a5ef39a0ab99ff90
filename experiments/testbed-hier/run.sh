#!/usr/bin/env bash
# Hierarchical vs flat allreduce with 2 ranks per host on 4 emulated hosts
# (`shoal testbed`, host links RATE): busbw of hier, ring and rhd at each size,
# and the bytes each host actually put on its link per allreduce, read from the
# tbf counters of the hosts' eth0 around a fixed number of calls (the check of
# "hier moves each byte across the host link once": 2(H-1)/H x S per host).
#   experiments/testbed-hier/run.sh [--build DIR] [--hosts 4] [--rate 1gbit] [--sizes 256K:16M] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build H=4 rate=1gbit min=256K max=16M out="" name=ex2 count_size=4M count_iters=10
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --hosts) H=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --sizes) min=${2%%:*}; max=${2##*:}; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-hier}
mkdir -p "$out"
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts "$H" --rate "$rate"
n=$((2 * H))
echo "# testbed-hier: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $H hosts x 2 ranks, $rate"
sent() { local t=0 h v; for ((h = 0; h < H; h++)); do
  v=$(tc -n "$name-h$h" -s qdisc show dev eth0 | awk '/Sent/ { print $2; exit }'); t=$((t + v)); done; echo $t; }
for a in hier ring rhd; do
  echo "# $a: sweep ..." >&2
  SHOAL_ALGO=$a timeout 600 "$S" launch --testbed "$name" -n $n --per-host 2 --timeout 590 -- \
    "$S" bench allreduce -b "$min" -e "$max" -f 4 -w 2 -W 0 -T 0.5 >"$out/$a.raw" 2>&1 || echo "# $a failed" >&2
  sed -n 's/^\[0\] //p' "$out/$a.raw" | grep -E '^ +[0-9]' >"$out/$a.txt" || true
  # bytes on the host links: a fixed number of out-of-place + in-place calls of one size
  b0=$(sent)
  SHOAL_ALGO=$a timeout 300 "$S" launch --testbed "$name" -n $n --per-host 2 --timeout 290 -- \
    "$S" bench allreduce -b $count_size -e $count_size -w 0 -W 0 -n $count_iters >/dev/null 2>&1 || echo "# $a count run failed" >&2
  b1=$(sent)
  echo "$a $(( (b1 - b0) ))" >"$out/$a.bytes"
done
echo
echo "## busbw (GB/s), $H hosts x 2 ranks, host links $rate; gain = hier / best flat"
awk 'FNR == 1 { f++ } { b[f, $1] = $11; s[$1] = 1 }
  END { printf "%10s %8s %8s %8s %8s\n", "size(B)", "hier", "ring", "rhd", "gain"
        n = 0; for (x in s) ss[++n] = x + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ss[j] < ss[i]) { t = ss[i]; ss[i] = ss[j]; ss[j] = t }
        for (i = 1; i <= n; i++) { x = ss[i]; fl = b[2, x] > b[3, x] ? b[2, x] : b[3, x]
          printf "%10d %8s %8s %8s %8.2f\n", x, b[1, x], b[2, x], b[3, x], (fl > 0 ? b[1, x] / fl : 0) } }' \
  "$out/hier.txt" "$out/ring.txt" "$out/rhd.txt"
cs=$(numfmt --from=iec "$count_size")
echo
echo "## bytes sent per host link per allreduce of S = $count_size ($((2 * count_iters)) calls; tbf counters incl. TCP/IP headers)"
echo "## lower bound for any algorithm: 2(H-1)/H x S = $(awk -v H=$H 'BEGIN { printf "%.3f", 2 * (H - 1) / H }') S"
for a in hier ring rhd; do
  awk -v a=$a -v H=$H -v S=$cs -v c=$((2 * count_iters)) '{ printf "%-5s %6.3f S per host per call\n", a, $2 / H / c / S }' "$out/$a.bytes"
done
