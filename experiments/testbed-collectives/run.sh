#!/usr/bin/env bash
# Collectives against the link limit and the anchors, on an emulated cluster
# (`shoal testbed`, docs/testbed.md): H hosts with RATE host links, 1 then 2
# ranks per host; allreduce float32 sum busbw of shoal's ring, halving-doubling
# (rhd), hierarchical (hier) and automatic choice (auto, with SHOAL_TUNE=init), next to Open MPI
# (mpirun through bench/testbed-agent.sh, btl tcp,vader,self on eth0) and
# PyTorch Gloo (ranks started with `shoal testbed exec`), all on the same hosts,
# one after the other in one run.
#   experiments/testbed-collectives/run.sh [--build DIR] [--hosts "2 4 8"] [--ppn "1 2"] [--rate 1gbit]
#        [--sizes 64K:64M] [--factor 4] [--target S] [--out DIR] [--name TB] [--skip-mpi] [--skip-gloo]
# Needs root. Every program run is bounded by `timeout`; the testbed is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build hosts_list="2 4 8" ppn_list="1 2" rate=1gbit min=64K max=64M factor=4 target=0.5 out="" name=ex1 \
  skip_mpi=0 skip_gloo=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --hosts) hosts_list=$2; shift 2 ;;
    --ppn) ppn_list=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --sizes) min=${2%%:*}; max=${2##*:}; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --skip-mpi) skip_mpi=1; shift ;;
    --skip-gloo) skip_gloo=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
S=$PWD/$build/shoal
[ -x "$S" ] || { echo "run.sh: $S not built" >&2; exit 2; }
out=${out:-$build/experiments/testbed-collectives}
mkdir -p "$out"
budget=900
args=(-b "$min" -e "$max" -f "$factor" -w 2 -W 0 -T "$target")
trap '"$S" testbed down --name "$name" >/dev/null 2>&1 || true' EXIT
"$S" testbed down --name "$name" >/dev/null 2>&1 || true
if [ $skip_mpi = 0 ]; then mpicc.openmpi -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce" -lm; fi
export TESTBED_NAME=$name TESTBED_SHOAL=$S OMP_NUM_THREADS=1

strip0() { sed -n 's/^\[0\] //p' "$1" | grep -E '^(#| +[0-9])' || true; }

echo "# testbed-collectives: $(date -u +%FT%TZ) $(uname -n), $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# hosts: $hosts_list; ranks per host: $ppn_list; host links $rate; sizes $min..$max x$factor"
for H in $hosts_list; do
  "$S" testbed up --name "$name" --hosts "$H" --rate "$rate"
  for ppn in $ppn_list; do
    n=$((H * ppn)); tag=h$H-p$ppn
    for a in ring rhd hier auto; do
      echo "# $tag: shoal $a ..." >&2
      # auto is priced on the link matrix it measures at start (SHOAL_TUNE=init), as across real hosts
      tune=cache; [ $a = auto ] && tune=init
      SHOAL_TUNE=$tune SHOAL_ALGO=$a timeout $budget "$S" launch --testbed "$name" -n $n --per-host $ppn --timeout $budget -- \
        "$S" bench allreduce "${args[@]}" >"$out/$tag-$a.raw" 2>&1 || echo "# $tag $a failed (see $out/$tag-$a.raw)" >&2
      strip0 "$out/$tag-$a.raw" >"$out/$tag-$a.txt"
    done
    if [ $skip_mpi = 0 ]; then
      echo "# $tag: Open MPI ..." >&2
      hl=$(for ((h = 0; h < H; h++)); do printf '%s-h%d:%d,' "$name" $h $ppn; done); hl=${hl%,}
      timeout $budget "$S" testbed exec --name "$name" h0 -- mpirun.openmpi --allow-run-as-root --oversubscribe \
        --host "$hl" -np $n --map-by slot --bind-to none --mca plm_rsh_agent "$PWD/bench/testbed-agent.sh" \
        --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        "$out/mpi_allreduce" "${args[@]}" >"$out/$tag-ompi.txt" 2>"$out/$tag-ompi.err" ||
        echo "# $tag Open MPI failed (see $out/$tag-ompi.err)" >&2
    fi
    if [ $skip_gloo = 0 ]; then
      echo "# $tag: Gloo ..." >&2
      pids=()
      for ((r = 0; r < n; r++)); do
        MASTER_ADDR=10.90.0.1 MASTER_PORT=29533 WORLD_SIZE=$n RANK=$r LOCAL_RANK=$((r % ppn)) \
          timeout $budget "$S" testbed exec --name "$name" h$((r / ppn)) -- /usr/bin/python3 bench/gloo_allreduce.py \
          "${args[@]}" >"$out/$tag-gloo.r$r" 2>"$out/$tag-gloo.err.r$r" & pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || echo "# $tag Gloo rank failed (see $out/$tag-gloo.err.r*)" >&2; done
      cp "$out/$tag-gloo.r0" "$out/$tag-gloo.txt"
    fi
  done
  "$S" testbed down --name "$name" >/dev/null
done

# Summary. Columns of every table: $1 size, $5 algo, $11 busbw out-of-place, $18 busbw in place (Gloo: in place only).
# Link limit of busbw (GB/s), B = host link rate: 1 rank per host: B (ring: every host sends and receives
# 2(n-1)/n S); p ranks per host on H hosts: each host must still move 2(H-1)/H S over its link, so busbw
# <= B (pH-1)/(p(H-1)).
bits=$(awk -v r="$rate" 'BEGIN { v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u);
  m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1; print v * m }')
for H in $hosts_list; do
  for ppn in $ppn_list; do
    tag=h$H-p$ppn
    echo
    echo "## $H hosts x $ppn rank(s), host links $rate (busbw GB/s; auto vs Open MPI out-of-place, vs Gloo in place)"
    awk -v H="$H" -v p="$ppn" -v bits="$bits" -v d="$out/$tag" '
      function load(f, key,   line, a) { while ((getline line < f) > 0) { if (line ~ /^#/) continue; split(line, a);
        if (a[1] + 0 > 0) { oop[key, a[1]] = a[11]; ip[key, a[1]] = a[18]; alg[key, a[1]] = a[5]; sizes[a[1]] = 1 } } }
      BEGIN {
        B = bits / 8 / 1e9; lim = (p == 1) ? B : B * (p * H - 1) / (p * (H - 1))
        split("ring rhd hier auto ompi gloo", k, " ")
        for (i = 1; i <= 6; i++) load(d "-" k[i] ".txt", k[i])
        printf "%10s %7s %7s %7s %7s %5s %7s %7s | %6s %6s %8s %9s %8s %8s | %s\n", "size(B)", "ring", "rhd", "hier", "auto",
          "pick", "ompi", "gloo", "limit", "a/lim", "best", "auto/best", "a/ompi", "a/gloo", "goals"
        n = 0; for (s in sizes) ss[++n] = s + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ss[j] < ss[i]) { t = ss[i]; ss[i] = ss[j]; ss[j] = t }
        for (i = 1; i <= n; i++) {
          s = ss[i]; best = ""; bv = 0
          for (q = 1; q <= 3; q++) if ((k[q], s) in oop && oop[k[q], s] + 0 > bv) { bv = oop[k[q], s] + 0; best = k[q] }
          a = oop["auto", s] + 0; ag = ip["auto", s] + 0; mo = oop["ompi", s] + 0; gl = ip["gloo", s] + 0
          g = ""
          if (s >= 16777216) g = g ((a >= 0.9 * lim) ? "lim:ok " : "lim:MISS ")
          if (s >= 1048576) g = g ((mo > 0 && a >= 1.2 * mo) ? "ompi:ok " : "ompi:MISS ") ((gl > 0 && ag >= 1.5 * gl) ? "gloo:ok " : "gloo:MISS ")
          g = g ((bv > 0 && a >= 0.9 * bv) ? "pick:ok" : "pick:MISS")
          printf "%10d %7s %7s %7s %7s %5s %7s %7s | %6.4f %6.2f %8s %9.2f %8s %8s | %s\n", s, oop["ring", s], oop["rhd", s],
            oop["hier", s], oop["auto", s], alg["auto", s], oop["ompi", s], ip["gloo", s], lim, a / lim, best,
            (bv > 0 ? a / bv : 0), (mo > 0 ? sprintf("%.2f", a / mo) : "-"), (gl > 0 ? sprintf("%.2f", ag / gl) : "-"), g
        }
      }'
  done
done
echo
echo "# raw outputs in $out/ (h<H>-p<ppn>-<program>.txt)"
