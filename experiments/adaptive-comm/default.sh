#!/usr/bin/env bash
# The automatic choice with nothing set, across hosts behind an oversubscribed rack uplink: every forced
# algorithm, then the default (no SHOAL_* variable) on a fresh profile cache ("first": the link matrix is
# measured at start and kept) and again on the same cache ("cached"), and the built-in costs alone
# (SHOAL_TUNE=off, what the default did before it measured). Time per call (p50, out of place) per size;
# auto/best = the default's time over the best forced algorithm's. Removes its testbed on exit.
# usage: experiments/adaptive-comm/default.sh [--build DIR] [--hosts 8] [--racks 2] [--oversub 4]
#        [--rate 200mbit] [--sizes 32K:2M] [--factor 4] [--name adaptdf] [--out DIR]
set -euo pipefail
build=build hosts=8 racks=2 oversub=4 rate=200mbit sizes=32K:2M factor=4 name=adaptdf out=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --oversub) oversub=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "default.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "default.sh: $S not built (make -j2)" >&2; exit 2; }
out=${out:-$build/experiments/adaptive-comm/default}
mkdir -p "$out" && out=$(cd "$out" && pwd) # absolute: XDG_CACHE_HOME below must be
args=(-b "${sizes%%:*}" -e "${sizes##*:}" -f "$factor" -w 2 -W 0 -T 0.3)
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
"$S" testbed up --name "$name" --hosts "$hosts" --racks "$racks" --rate "$rate" --oversub "$oversub" >/dev/null
unset SHOAL_TUNE SHOAL_TUNE_FILE SHOAL_ALGO SHOAL_PROFILE_BYTES SHOAL_PROFILE_FLOWS SHOAL_REPROFILE
export XDG_CACHE_HOME=$out/cache
rm -rf "$XDG_CACHE_HOME"

run() { # tag, then the environment of the run
  local tag=$1; shift
  echo "# $tag ..." >&2
  env "$@" timeout 600 "$S" launch --testbed "$name" -n "$hosts" --per-host 1 --timeout 600 -- \
    "$S" bench allreduce "${args[@]}" >"$out/$tag.raw" 2>&1 || echo "# $tag failed (see $out/$tag.raw)" >&2
  sed -n 's/^\[0\] //p' "$out/$tag.raw" | grep -E '^ +[0-9]' | awk '{print $1, $5, $7}' >"$out/$tag.txt" || true
}
forced="ring rhd rd trees"
for a in $forced; do run "$a" SHOAL_TUNE=off SHOAL_ALGO=$a; done
run first
run cached
run builtin SHOAL_TUNE=off

echo "# adaptive-comm default: $(date -u +%FT%TZ), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $hosts hosts x 1 rank in $racks racks, host links $rate, rack uplinks ${oversub}:1; nothing set but a fresh XDG_CACHE_HOME"
grep -h "measured the links" "$out/first.raw" | sed 's/^/# first run: /' || echo "# first run: no profile line"
grep -h "measured the links" "$out/cached.raw" | sed 's/^/# cached run (should be none): /' || true
printf '%10s' "size(B)"; for a in $forced; do printf ' %8s' "$a"; done
printf ' | %8s %6s %8s %6s %8s %6s | %6s %9s %9s %9s\n' first pick cached pick builtin pick best first/bst cached/bst builtin/bst
awk -v forced="$forced" -v dir="$out" '
  BEGIN { n = split(forced, F, " "); split("first cached builtin", A, " ")
    for (i = 1; i <= n; i++) while ((getline l < (dir "/" F[i] ".txt")) > 0) { split(l, x, " "); t[F[i], x[1]] = x[3]; sz[x[1]] = 1 }
    for (j = 1; j <= 3; j++) while ((getline l < (dir "/" A[j] ".txt")) > 0) { split(l, x, " "); t[A[j], x[1]] = x[3]; pk[A[j], x[1]] = x[2]; sz[x[1]] = 1 }
    m = 0; for (s in sz) S[++m] = s + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (S[j] < S[i]) { v = S[i]; S[i] = S[j]; S[j] = v }
    for (k = 1; k <= m; k++) { s = S[k]; best = ""; bt = 0
      printf "%10d", s
      for (i = 1; i <= n; i++) { v = t[F[i], s]; printf " %8s", v == "" ? "-" : sprintf("%.0f", v)
        if (v != "" && (bt == 0 || v + 0 < bt)) { bt = v + 0; best = F[i] } }
      printf " |"; for (j = 1; j <= 3; j++) { v = t[A[j], s]; printf " %8s %6s", v == "" ? "-" : sprintf("%.0f", v), pk[A[j], s] }
      printf " | %6s", best
      for (j = 1; j <= 3; j++) { v = t[A[j], s]; printf " %9s", v == "" || bt == 0 ? "-" : sprintf("%.2f", v / bt) }
      printf "\n" } }'
echo "# times: p50 us per call, out of place (shoal bench allreduce); best = the fastest forced algorithm"
