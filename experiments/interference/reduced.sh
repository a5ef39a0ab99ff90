#!/usr/bin/env bash
# The measured source of the interference model in a bounded form (~10 minutes under `quiet`, against about
# 2 hours for the full matrix at 3-4 repetitions): only the pairs the simulator uses, measured by toggling the
# co-runner within one run (measure.sh --toggle 1), two repetitions so that the noise floor is measured too.
# Then the fit with held-out pairs, beside Gavel's source.
#
# What is reduced, against `measure.sh` over every level (4 levels x 16 ordered pairs x 3 rounds, one repetition):
#   levels   socket and nic only: the simulator applies those two (workers on one socket; jobs spanning
#            machines on one NIC); it reserves cores per worker (core never applies) and takes the rack uplink's
#            share from the speed model (uplink never applies)
#   jobs     socket: mlp, cnn, membw; nic: softmax, mlp, cnn (the classes the speed models' job types map to, but
#            softmax on the socket level, which only Gavel's A3C maps to; the nic level keeps it as a third class,
#            without which a held-out pair of the two others cannot be predicted; net (iperf3), which no job type
#            maps to, is left out): 9 + 9 ordered pairs
#   runs     one run of the job per pair and repetition (3-10 s alone), its co-runner stopped and continued every
#            second (--toggle 1: alone and co-located phases 1 s apart instead of runs ~7 s apart), 2 repetitions
#            (--rep 1 and 2), kept apart for the noise floor
#   idle     a run waits at most 3 s for an idle machine (the full script: 60 s); the busy share is recorded
# Rows: experiments/interference/results/reduced/measured.csv (measure.sh's columns); the model fitted from them, its
# nic level as a shared shaped link (fit.py --nic-form link), is the shipped model: data/interference-measured.json
# (rebuild the library after it changes; the shipped weights were trained with it); the same rows with every level
# in the low-rank form, for comparison: build/interference-reduced-lowrank.json.
#   quiet experiments/interference/reduced.sh [--fit-only]      env: ROUNDS (1), TOGGLE (1), REPS ("1 2"), NAME (mrl2),
#                                                                 LEVELS ("socket nic": the levels measured, the others' rows kept)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=experiments/interference/results/reduced
case ${1:-} in
  --fit-only) ;;
  "")
    mkdir -p "$out"
    for r in ${REPS:-1 2}; do
      echo "# repetition $r: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
      timeout 900 experiments/interference/measure.sh --levels "${LEVELS:-socket nic}" --host-jobs "mlp cnn membw" \
        --link-jobs "softmax mlp cnn" --rep "$r" --rounds "${ROUNDS:-1}" --toggle "${TOGGLE:-1}" --idle-wait 3 --name "${NAME:-mrl2}" --out "$out"
    done ;;
  -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
  *) echo "reduced.sh: unknown argument '$1' (--fit-only, --help)" >&2; exit 2 ;;
esac
echo "# measured, reduced matrix ($out/measured.csv), nic as a shared link: the shipped model"
/usr/bin/python3 experiments/interference/fit.py measured --csv "$out/measured.csv" --nic-form link --out data/interference-measured.json
echo "# the same rows, every level low-rank"
/usr/bin/python3 experiments/interference/fit.py measured --csv "$out/measured.csv" --out build/interference-reduced-lowrank.json
echo "# the same pairs and levels from the full matrix (experiments/interference/results/measured.csv)"
awk -F, 'NR == 1 || ($1 == "socket" && $2 ~ /^(mlp|cnn|membw)$/ && $3 ~ /^(mlp|cnn|membw)$/) ||
         ($1 == "nic" && $2 != "net" && $3 != "net")' experiments/interference/results/measured.csv \
  > build/interference-full-subset.csv
/usr/bin/python3 experiments/interference/fit.py measured --csv build/interference-full-subset.csv \
  --out build/interference-full-subset.json
/usr/bin/python3 experiments/interference/fit.py measured --csv build/interference-full-subset.csv --nic-form link \
  --out build/interference-full-subset-link.json
echo "# Gavel's source (../shared/data/gavel/throughputs.json, V100)"
/usr/bin/python3 experiments/interference/fit.py gavel --out build/interference-gavel-v100.json
