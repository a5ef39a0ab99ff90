#!/usr/bin/env bash
# DS-Sync's butterfly against fixed pairs on a `shoal testbed` (needs root): 4 hosts at RATE, one rank
# each, 2 MiB float32 allreduces (the MLP's 535,818 parameters) in pairs on two splits, {0,1},{2,3}
# every call (fixed) or alternating with {0,2},{1,3} (rot), with random 0-JITTER s pauses between calls
# as compute would make. Prints rank 0's mean call time per mode and SHOAL_SOCKET_RCVBUF_REMOTE (the
# receive buffer of cross-host sockets; 0: SHOAL_SOCKET_BUFFER's 4 MiB as before), docs/comm.md.
#   bench/rotating-pairs.sh [BUILD]     env: RATE=200mbit JITTER=0.03 CALLS=60 BUFS="0 131072" TB=rp<pid> PY
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
RATE=${RATE:-200mbit} JITTER=${JITTER:-0.03} CALLS=${CALLS:-60} BUFS=${BUFS:-"0 131072"}
PY=${PY:-/usr/bin/python3} # the Debian interpreter, with numpy (a pyenv python3 first in PATH may lack it)
here=$(cd "$(dirname "$0")/.." && pwd)
py=$(mktemp /tmp/shoal-rot-XXXXXX.py)
tb=${TB:-rp$$} # the testbed made (and removed) for the run
trap 'rm -f "$py"; "$build/shoal" testbed down --name "$tb" >/dev/null 2>&1 || true' EXIT
cat >"$py" <<PY
import sys, time, random
sys.path.insert(0, "$here/python")
import numpy as np, shoal
c = shoal.init(); r = c.rank; mode = sys.argv[1]
rng = random.Random(1000 + r)
A = c.split(r // 2, r); B = c.split(r % 2, r)
x = np.ones(535818, dtype=np.float32); ts = []
for i in range($CALLS):
    g = A if (mode == "fixed" or i % 2 == 0) else B
    time.sleep(0.003 + rng.uniform(0, $JITTER))
    t = time.time(); g.allreduce(x, op="avg"); ts.append(time.time() - t)
    assert x[0] == 1.0
if r == 0:
    v = sorted(ts[5:])
    print("%-5s mean %.1f ms  median %.1f  p90 %.1f" % (mode, 1e3 * sum(v) / len(v), 1e3 * v[len(v) // 2], 1e3 * v[int(.9 * len(v))]))
PY
"$build/shoal" testbed up --name "$tb" --hosts 4 --racks 1 --rate "$RATE" >/dev/null
for b in $BUFS; do
  echo "## SHOAL_SOCKET_RCVBUF_REMOTE=$b, $RATE host links"
  for m in fixed rot; do
    SHOAL_SOCKET_RCVBUF_REMOTE=$b SHOAL_LIB="$build/libshoal.so" timeout 300 "$build/shoal" launch --no-prefix \
      --testbed "$tb" -n 4 --per-host 1 --timeout 240 -- "$PY" "$py" "$m" | grep -E '^(fixed|rot)'
  done
done
