#!/usr/bin/env bash
# AE1, profiler fidelity: the link matrix that the profile measures (tune/links.c) against the rates
# the testbed's host links are shaped to, and iperf3 on the same pairs; then the profile's time
# against the number of hosts.
#   experiments/adaptive-comm/ae1.sh [--build DIR] [--out DIR] [--name TB] [--flows "0 2 1"] [--sizes "2 4 8"] [--reps 3]
# 1. 8 hosts, host links {1, 1, 0.5, 0.25, 1, 0.5, 0.25, 0.1} Gbit/s (spec adaptive-comm.md A8); one
#    `shoal tune` per SHOAL_PROFILE_FLOWS value; pair (i, j) is expected at min(rate i, rate j).
# 2. H = 2, 4, 8 hosts at 1 Gbit/s: the matrix's measuring time, all flows at once and 2 at once.
# Needs root. Every run is bounded by timeout; the testbed is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build out="" name=ae1 flows_list="0 2 1" sizes="2 4 8" reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --flows) flows_list=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "ae1.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "ae1.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/adaptive-comm}
mkdir -p "$out"
budget=240
. experiments/adaptive-comm/common.sh
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
header "ae1"
rates=(1gbit 1gbit 500mbit 250mbit 1gbit 500mbit 250mbit 100mbit)
H=${#rates[@]}

# ---- 1. fidelity ----
"$S" testbed up --name "$name" --hosts $H --rate 1gbit >/dev/null
for ((h = 0; h < H; h++)); do "$S" testbed set --name "$name" h$h --rate "${rates[$h]}" >/dev/null; done
echo "## 1. measured vs configured, $H hosts, host links: ${rates[*]}"
for f in $flows_list; do
  run_shoal "ae1-matrix-f$f" "$S" $H SHOAL_PROFILE_FLOWS=$f SHOAL_DEBUG=INFO SHOAL_DEBUG_SUBSYS=TUNING -- tune --no-store
  sed -n 's/^\[0\] //p' "$out/ae1-matrix-f$f.raw" | grep -E 'link matrix|^# h[0-9]' >"$out/ae1-matrix-f$f.txt" || true
done
# iperf3 from h0 to every other host, 3 s each: what one TCP stream gets on the same path
: >"$out/ae1-iperf.txt"
for ((j = 1; j < H; j++)); do
  timeout 20 "$S" testbed exec --name "$name" h$j -- iperf3 -s -1 -p 5301 >/dev/null 2>&1 &
  sp=$!
  sleep 0.5
  bps=$(timeout 20 "$S" testbed exec --name "$name" h0 -- iperf3 -c 10.90.0.$((j + 1)) -p 5301 -t 3 -J 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' || echo -1)
  wait $sp 2>/dev/null || true
  echo "h0 h$j $bps" >>"$out/ae1-iperf.txt"
done
# table: every ordered pair, configured = min of the two host links (wire rate); error of the measured payload rate
for f in $flows_list; do
  echo
  echo "### SHOAL_PROFILE_FLOWS=$f: $(sed -n 's/.*link matrix (\(measured in [0-9]* ms\)).*/\1/p' "$out/ae1-matrix-f$f.txt" | head -1)"
  awk -v rates="${rates[*]}" -v ipf="$out/ae1-iperf.txt" '
    function bits(r,  v, u) { v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u); return v * ((u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : 1) }
    BEGIN { n = split(rates, R, " "); for (i = 1; i <= n; i++) B[i - 1] = bits(R[i]);
            while ((getline l < ipf) > 0) { split(l, a, " "); sub(/h/, "", a[2]); ip[a[2]] = a[3] } }
    /^# h[0-9]/ { i = substr($2, 2) + 0; c = 0
      for (k = 3; k <= NF; k++) { if ($k == "-") { c++; continue } split($k, m, "/"); if (m[1] == "") continue; mb[i, c] = m[1]; c++ } }
    END {
      printf "%6s %6s %12s %12s %9s %12s %9s\n", "from", "to", "configured", "measured", "error", "iperf3", "vs iperf3"
      for (i = 0; i < n; i++) for (j = 0; j < n; j++) { if (i == j || !((i, j) in mb)) continue
        cfg = (B[i] < B[j] ? B[i] : B[j]); meas = mb[i, j] * 8e6; e = (meas / cfg - 1) * 100; ae = e < 0 ? -e : e
        sum += ae; cnt++; if (ae > mx) mx = ae
        ipr = (i == 0 && (j in ip) && ip[j] > 0) ? sprintf("%12.1f %8.1f%%", ip[j] / 1e6, (meas / ip[j] - 1) * 100) : sprintf("%12s %9s", "-", "-")
        printf "%6s %6s %10.1f M %10.1f M %8.1f%% %s\n", "h" i, "h" j, cfg / 1e6, meas / 1e6, e, ipr }
      printf "# pairs %d: mean |error| %.1f%%, max |error| %.1f%% (goal: < 10%% at 1 Gbit/s and below)\n", cnt, sum / cnt, mx
    }' "$out/ae1-matrix-f$f.txt" | tee "$out/ae1-table-f$f.txt"
done
"$S" testbed down --name "$name" >/dev/null

# ---- 2. time against the number of hosts ----
echo
echo "## 2. time of the link matrix against hosts (1 Gbit/s links), $reps runs each"
: >"$out/ae1-time.txt"
for Hn in $sizes; do
  "$S" testbed up --name "$name" --hosts "$Hn" --rate 1gbit >/dev/null
  for f in 0 2; do
    for ((k = 0; k < reps; k++)); do
      run_shoal "ae1-time-h$Hn-f$f-$k" "$S" "$Hn" SHOAL_PROFILE_FLOWS=$f SHOAL_DEBUG=INFO SHOAL_DEBUG_SUBSYS=TUNING -- tune --no-store
      ms=$(sed -n 's/^\[0\] .*link matrix of [0-9]* hosts measured in \([0-9]*\) ms.*/\1/p' "$out/ae1-time-h$Hn-f$f-$k.raw" | head -1)
      echo "$Hn $f ${ms:--1}" >>"$out/ae1-time.txt"
    done
  done
  "$S" testbed down --name "$name" >/dev/null
done
awk '{ k = $1 " " $2; s[k] += $3; n[k]++; if (!(k in mn) || $3 < mn[k]) mn[k] = $3; if ($3 > mx[k]) mx[k] = $3 }
  END { printf "%6s %8s %10s %10s %10s\n", "hosts", "flows", "mean(ms)", "min(ms)", "max(ms)"
        for (k in s) { split(k, a, " "); printf "%6s %8s %10.0f %10.0f %10.0f\n", a[1], a[2] == 0 ? "all" : a[2], s[k] / n[k], mn[k], mx[k] } }' \
  "$out/ae1-time.txt" | sort -n -k1,1 -k2,2 | tee "$out/ae1-time-table.txt"
echo "# raw outputs in $out/ (ae1-*)"
