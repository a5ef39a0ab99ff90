# Shared helpers of the benchmark scripts (sourced, not run).

# Option parsing, its messages naming the script:
#   val "$@"        the option $1 has a value (else exit 2)
#   script_help     the script's leading comment, as its --help
#   unknown_opt X   exit 2 naming X
bench_script=$(basename "$0")
val() { [ $# -ge 2 ] || { echo "$bench_script: $1 needs a value (try --help)" >&2; exit 2; }; }
script_help() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
unknown_opt() { echo "$bench_script: unknown option '$1' (try --help)" >&2; exit 2; }

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
