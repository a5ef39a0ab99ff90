# Helpers of the adaptive-collectives experiments (sourced): run shoal, Open MPI and PyTorch Gloo on
# the hosts of a `shoal testbed` (docs/testbed.md), one rank per host, every run bounded by timeout.
# Needs: S (the shoal binary), name (the testbed), out (output directory), budget (seconds per run).

strip0() { sed -n 's/^\[0\] //p' "$1" | grep -E '^(#| +[0-9])' || true; }

# run_shoal TAG BIN NRANKS [VAR=value ...] -- ARGS...: `BIN ARGS` on every host through shoal launch.
run_shoal() {
  local tag=$1 bin=$2 n=$3; shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "# $tag ..." >&2
  env "${envs[@]}" timeout "$budget" "$S" launch --testbed "$name" -n "$n" --timeout "$budget" -- "$bin" "$@" \
    >"$out/$tag.raw" 2>&1 || echo "# $tag failed (see $out/$tag.raw)" >&2
  strip0 "$out/$tag.raw" >"$out/$tag.txt"
}

# run_ompi TAG NRANKS ARGS...: bench/mpi_allreduce (built into $out) with mpirun on h0, btl tcp,self on eth0.
run_ompi() {
  local tag=$1 n=$2; shift 2
  local hl
  hl=$(for ((h = 0; h < n; h++)); do printf '%s-h%d:1,' "$name" $h; done); hl=${hl%,}
  echo "# $tag (Open MPI) ..." >&2
  TESTBED_NAME=$name TESTBED_SHOAL=$S timeout "$budget" "$S" testbed exec --name "$name" h0 -- mpirun.openmpi \
    --allow-run-as-root --oversubscribe --host "$hl" -np "$n" --map-by slot --bind-to none \
    --mca plm_rsh_agent "$PWD/bench/testbed-agent.sh" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 "$out/mpi_allreduce" "$@" >"$out/$tag.txt" 2>"$out/$tag.err" ||
    echo "# $tag failed (see $out/$tag.err)" >&2
}

# run_gloo TAG NRANKS ARGS...: bench/gloo_allreduce.py, rank r on host r.
run_gloo() {
  local tag=$1 n=$2; shift 2
  echo "# $tag (Gloo) ..." >&2
  local pids=() r pid port=$((29600 + RANDOM % 300))
  for ((r = 0; r < n; r++)); do
    MASTER_ADDR=10.90.0.1 MASTER_PORT=$port WORLD_SIZE=$n RANK=$r LOCAL_RANK=0 OMP_NUM_THREADS=1 \
      timeout "$budget" "$S" testbed exec --name "$name" h$r -- /usr/bin/python3 bench/gloo_allreduce.py "$@" \
      >"$out/$tag.r$r" 2>"$out/$tag.err.r$r" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || echo "# $tag: a Gloo rank failed (see $out/$tag.err.r*)" >&2; done
  cp "$out/$tag.r0" "$out/$tag.txt"
}

# rate_bits RATE: "1gbit", "250mbit", "500M" -> bits/s
rate_bits() { awk -v r="$1" 'BEGIN { v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u);
  m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1; print v * m }'; }

header() { echo "# $1: $(date -u +%FT%TZ) $(uname -n), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"; }

# size_bytes 4M -> 4194304 (K, M, G: powers of 1024)
size_bytes() { awk -v s="$1" 'BEGIN { v = s + 0; u = toupper(s); sub(/^[0-9.]+/, "", u);
  m = (u ~ /^G/) ? 1073741824 : (u ~ /^M/) ? 1048576 : (u ~ /^K/) ? 1024 : 1; printf "%d\n", v * m }'; }
