#!/usr/bin/env bash
# shoal_comm_grow with strangers at the job's door: 3 members under `shoal launch --on-failure continue`
# grow every 50 ms (bench/elastic_rank.c); 1.5 s in, a new process joins through the door (the master
# port). With strangers, from 1.0 s: SILENT connections that never speak (kept open) and up to FLOOD
# connections opened and dropped (1 ms apart, bounded in time). Per round it prints the time of the grow
# that admitted the newcomer and the slowest grow, as rank 0 measured them, without and with the
# strangers (alternating); the goal is the admitting grow within 2 s of its time without strangers.
#   bench/grow-strangers.sh [--build DIR] [--rounds N] [--silent N] [--flood N] [--port P]
# --port: the job's master port (default: a free one); the strangers and the newcomer need it.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build=build rounds=5 silent=30 flood=400 port=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) val "$@"; build=$2; shift 2 ;;
    --rounds) val "$@"; rounds=$2; shift 2 ;;
    --silent) val "$@"; silent=$2; shift 2 ;;
    --flood) val "$@"; flood=$2; shift 2 ;;
    --port) val "$@"; port=$2; shift 2 ;;
    -h|--help) script_help; exit 0 ;;
    *) unknown_opt "$1" ;;
  esac
done
[ -x "$build/shoal" ] && [ -e "$build/libshoal.so" ] || { echo "grow-strangers.sh: $build not built (make BUILD=$build)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/shoal-grow-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Iinclude bench/elastic_rank.c -L"$build" -lshoal -Wl,-rpath,"$(realpath "$build")" -o "$tmp/elastic_rank" || exit 2
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
one() { # $1: 1 with strangers. Prints "ADMIT_MS WORST_MS" (rank 0's), or "- -"
  local p=${port:-$(free_port)} log="$tmp/round.log"
  export SHOAL_JOB_ID="grow-$$-$RANDOM" SHOAL_MASTER_ADDR=127.0.0.1 SHOAL_MASTER_PORT=$p SHOAL_TIMEOUT=10
  timeout 60 "$build/shoal" launch -n 3 --port "$p" --on-failure continue --timeout 45 -- "$tmp/elastic_rank" grow 20 \
    >"$log" 2>&1 &
  local lpid=$! spid=""
  sleep 1.0
  if [ "$1" = 1 ]; then "$tmp/elastic_rank" strangers "$silent" "$flood" 6 >"$tmp/strangers.log" 2>&1 & spid=$!; fi
  sleep 0.5
  SHOAL_JOIN=1 SHOAL_CONNECT_TIMEOUT=30 timeout 40 "$tmp/elastic_rank" grow 20 >"$tmp/newcomer.log" 2>&1
  local nrc=$?
  wait "$lpid"
  [ -n "$spid" ] && { kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; }
  local line
  line=$(grep -m1 '^\[0\] drill: grow-ms' "$log")
  if [ "$nrc" != 0 ] || [ -z "$line" ]; then
    echo "# round failed (newcomer exit $nrc): $(grep -h 'drill:' "$log" "$tmp/newcomer.log" | head -3 | tr '\n' ' ')" >&2
    echo "- -"
  else
    echo "$line" | awk '{ print $5, $4 }'
  fi
}
echo "# grow with strangers at the door: 3 members + 1 newcomer, $silent silent + up to $flood flood connections, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "# %5s %18s %18s %18s %18s\n" round "admit ms (none)" "slowest ms (none)" "admit ms (strangers)" "slowest ms (strangers)"
for r in $(seq 1 "$rounds"); do
  read -r a0 w0 < <(one 0)
  read -r a1 w1 < <(one 1)
  printf "  %5d %18s %18s %18s %18s\n" "$r" "$a0" "$w0" "$a1" "$w1"
  echo "$a0 $w0 $a1 $w1" >>"$tmp/all"
done
awk '$1 != "-" && $3 != "-" { d = $3 - $1; if (d > worst) worst = d; n++ } END {
  printf "# rounds with both: %d; the admitting grow with strangers minus without, worst: %.1f ms (goal: < 2000 ms)\n", n, worst }' "$tmp/all"
