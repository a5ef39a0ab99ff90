#!/usr/bin/env bash
# ME2: one ring hop slowed. In the flow-level simulator (the controller's own planner, docs/flow.md#the-simulator):
# 8 hosts in 2 racks, host links 40 Mbit/s, uplinks 40 Mbit/s (4:1), h5's link slowed to SLOW. Job 1 is the
# 4-host ring h0,h4,h1,h5 (every hop crosses an uplink, two of them h5's); job 2 is the 2-host ring h2,h6
# (setting a) or the 4-host ring h2,h6,h3,h7 (setting b). 2.14 MB of gradients, COMPUTE ms a step, ITERS
# steps. Per setting and policy (tcp: no control; greedy: the planner without the ring rule; mlcc: with
# it) each job's JCT and mean iteration time. Deterministic: run it under `heavy`, not `quiet`.
#
#   experiments/flow/me2.sh [--slow RATE] [--compute-ms C] [--iters N]
set -euo pipefail
cd "$(dirname "$0")/../.."
slow=10mbit compute=500 iters=20
while [ $# -gt 0 ]; do
  case "$1" in
    --slow) slow=$2; shift 2 ;;
    --compute-ms) compute=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "me2.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/build/shoal
[ -x "$S" ] || { echo "me2.sh: $S not built (make -j2)" >&2; exit 2; }
d=$(mktemp -d /tmp/shoal-me2.XXXXXX)
trap 'rm -rf "$d"' EXIT
{ echo "rate 40mbit"; echo "uplink 40mbit"
  for i in 0 1 2 3; do echo "host h$i 10.0.0.$((i + 1)) 0"; done
  for i in 4 5 6 7; do echo "host h$i 10.0.1.$((i - 3)) 1$([ $i = 5 ] && echo " $slow")"; done; } > "$d/topo"
printf '0 h0,h4,h1,h5 %s %s 2143272\n0 h2,h6 %s %s 2143272\n' "$iters" "$compute" "$iters" "$compute" > "$d/a"
printf '0 h0,h4,h1,h5 %s %s 2143272\n0 h2,h6,h3,h7 %s %s 2143272\n' "$iters" "$compute" "$iters" "$compute" > "$d/b"
printf '# ME2: h5 at %s, %d steps of %d ms compute\n' "$slow" "$iters" "$compute"
printf '%-8s %-7s %4s %8s %9s\n' setting policy job jct_s iter_ms
for s in a b; do
  "$S" flow sim --jobs "$d/$s" --topo "$d/topo" --policy tcp --policy greedy --policy mlcc --per-job |
    awk -v s="$s" '!/^#/ && $1 != "policy" { if ($2 == "avg") printf "%-8s %-7s %4s %8s\n", s, $1, "avg", $3;
      else printf "%-8s %-7s %4s %8s %9s\n", s, $1, $2, $5, $6 }'
done
