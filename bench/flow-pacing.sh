#!/usr/bin/env bash
# How fast a pacing rate takes effect, kernel pacing (SO_MAX_PACING_RATE) against a user-space token
# bucket (docs/flow.md#enforcement). One TCP flow over a shaped testbed link (default 40mbit) follows a
# schedule of rates: the link's whole rate, a flow told to wait (2% of the link), the whole rate again,
# half the link, ... Per phase it prints the target, the mean rate received after the first 100 ms, and
# the lag: from the change until the received rate (20 ms bins) is within 20% of the target. As root.
#   --rate RATE [40mbit]  --name NAME [flwpace]  --reps N [2]  --out DIR [/tmp/flow-pacing]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
rate=40mbit; name=flwpace; reps=2; out=/tmp/flow-pacing
while [ $# -gt 0 ]; do
  case $1 in
    --rate) val "$@"; rate=$2; shift 2 ;;
    --name) val "$@"; name=$2; shift 2 ;;
    --reps) val "$@"; reps=$2; shift 2 ;;
    --out) val "$@"; out=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
S=build/shoal
mkdir -p "$out"
trap '$S testbed down --name $name >/dev/null 2>&1 || true' EXIT
$S testbed up --name "$name" --hosts 2 --rate "$rate" >/dev/null
mb=$(awk -v r="$rate" 'BEGIN { v = r + 0; u = tolower(substr(r, length(v "") + 1));
  m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1; printf "%.4f", v * m / 8e6 }')
sched="0:1,$(awk -v m=$mb 'BEGIN{printf "%.4f", m*0.02}'):1,0:1,$(awk -v m=$mb 'BEGIN{printf "%.4f", m*0.5}'):1,0:1"
printf '# link %s (%.2f MB/s); schedule (MB/s:s, 0 = no limit): %s\n' "$rate" "$mb" "$sched"
printf '%-7s %-4s %10s %10s %8s\n' mode rep target_MB/s got_MB/s lag_ms
port=34090
for rep in $(seq 1 "$reps"); do
  for mode in kernel bucket; do
    port=$((port + 1))
    $S testbed exec --name "$name" h1 -- /usr/bin/python3 bench/flow_pacing.py recv 10.90.0.2 $port "$out/$mode.$rep.bins" &
    sleep 0.5
    $S testbed exec --name "$name" h0 -- /usr/bin/python3 bench/flow_pacing.py send 10.90.0.2 $port $mode "$sched" >"$out/$mode.$rep.send"
    wait
    awk -v mode=$mode -v rep=$rep -v mb=$mb '
      FNR == NR { if ($1 == "phase") { n++; ps[n] = $2; pr[n] = $3 / 1e6 } next }
      { t[++m] = $1; b[m] = $2 / 0.02 / 1e6 }
      END {
        for (i = 1; i <= n; i++) {
          end = (i < n) ? ps[i + 1] : ps[i] + 1; target = pr[i] > 0 ? pr[i] : mb
          sum = 0; c = 0; lag = -1
          for (j = 1; j <= m; j++) {
            if (t[j] < ps[i] || t[j] >= end) continue
            if (lag < 0 && b[j] >= 0.8 * target && b[j] <= 1.2 * target) lag = (t[j] - ps[i]) * 1000
            if (t[j] >= ps[i] + 0.1) { sum += b[j]; c++ }
          }
          printf "%-7s %-4d %10.3f %10.3f %8s\n", mode, rep, target, c ? sum / c : 0, lag < 0 ? "never" : sprintf("%.0f", lag)
        }
      }' "$out/$mode.$rep.send" "$out/$mode.$rep.bins"
    grep '^cpu' "$out/$mode.$rep.send" | sed "s/^/# $mode rep $rep sender /"
  done
done
