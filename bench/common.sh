# Shared helpers of the anchor benchmark scripts (sourced, not run).

# best_of COL OUT FILES...: per size (column 1), the row with the lowest
# value in column COL (a p50) over the runs in FILES, in size order; the
# comment lines of the first file are kept. The VM we measure on drifts by
# up to 2x for minutes at a time (host contention that shows as no steal
# time), so the scripts alternate shoal and its anchors --reps times and
# compare each side's best run.
best_of() {
  local col=$1 o=$2; shift 2
  awk -v c="$col" '/^#/ { if (FNR == NR) print; next }
       { if (!($1 in best) || $c + 0 < best[$1]) { best[$1] = $c + 0; row[$1] = $0 }
         if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
       END { for (i = 1; i <= k; i++) print row[order[i]] }' "$@" >"$o"
}
