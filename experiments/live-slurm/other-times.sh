#!/bin/bash
# Arrival times (seconds after the first job, one a line, sorted) of the second
# user's K plain jobs over WINDOW seconds, seeded: run.sh submits them live and
# seeds.sh adds them to the simulated workload, so both see the same times.
#   other-times.sh SEED WINDOW K
set -u
for k in $(seq "${3:?K}"); do
  awk -v k="$k" -v s="${1:?SEED}" -v w="${2:?WINDOW}" 'BEGIN { srand(s * 1000 + k); printf "%.1f\n", rand() * w }'
done | sort -n
