#!/usr/bin/env bash
# same-cli.sh BEFORE AFTER [--only REGEX] [--expect NAME,NAME...] [--no-testbed] [--slurm]
# Runs representative command lines of every shoal command (good ones on small inputs, and bad options,
# values and missing arguments) with two builds of the CLI, e.g. main's and a branch's, and compares their
# exit statuses, standard output and standard error case by case (timings, pids and the binaries' and
# temporary paths masked). Prints the differences; exits 1 if a case differs that is not named by --expect
# (the intended differences of a change), else 0.
#   --only REGEX   run only the cases whose name matches
#   --no-testbed   skip the cases that bring up a testbed (they need root and network namespaces)
#   --slurm        also bring up Slurm on a testbed (slow: about 20 s per build)
# Check the script itself with one build twice (same-cli.sh A A): every case must be the same.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
[ $# -ge 2 ] || { usage >&2; exit 2; }
A=$(readlink -f "$1") B=$(readlink -f "$2"); shift 2
only=. expect=, testbed=1 slurm=0
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift ;;
    --expect) expect=",$2,"; shift ;;
    --no-testbed) testbed=0 ;;
    --slurm) slurm=1 ;;
    *) echo "same-cli.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
for b in "$A" "$B"; do [ -x "$b" ] || { echo "same-cli.sh: $b: not an executable" >&2; exit 2; }; done
if [ "$testbed" = 1 ] && ! { [ "$(id -u)" = 0 ] && ip netns add samecli-probe 2>/dev/null && ip netns del samecli-probe; }; then
  echo "same-cli.sh: no root or no network namespaces here: the testbed cases are skipped" >&2
  testbed=0
fi
T=/tmp/same-cli-$$ # the same path for both builds (it appears in outputs)
W=$(mktemp -d /tmp/same-cli-out-XXXXXX)
trap 'rm -rf "$T" "$W"; for b in "$A" "$B"; do "$b" testbed down --name samecli >/dev/null 2>&1; done' EXIT
export OPENBLAS_NUM_THREADS=1

# One case per line: NAME :: shell command ($S is the build under test, $T an empty directory).
cases() {
  cat <<'EOF'
top-none :: $S
top-help :: $S --help
top-version :: $S --version
top-unknown :: $S nosuchcommand
config :: $S config | cut -c1-40
config-md :: $S config --markdown
config-help :: $S config --help
config-bad :: $S config --bogus
tune-help :: $S tune --help
tune-bad :: $S tune --bogus
tune-novalue :: $S tune --file
selftest-help :: $S selftest --help
selftest-novalue :: $S selftest --count
selftest-zero :: $S selftest --count 0
selftest-bad :: $S selftest --bogus
selftest-2 :: $S launch -n 2 -- $S selftest --count 17
selftest-3 :: $S launch -n 3 -- $S selftest -c 5
bench-none :: $S bench
bench-help :: $S bench --help
bench-coll-help :: $S bench allreduce --help
bench-unknown-coll :: $S bench alltoall
bench-order :: $S bench allreduce -b 2M -e 1K
bench-dtype :: $S bench allreduce -d float17
bench-op :: $S bench allreduce -o foo
bench-algo :: $S bench allreduce -a nope
bench-unknown :: $S bench allreduce -b 8 -e 8 --bogus
bench-extra :: $S bench allreduce -b 8 -e 8 extra
bench-novalue :: $S bench allreduce -b
bench-size :: $S bench allreduce -b 12Q
bench-factor :: $S bench allreduce -f 1
bench-iters :: $S bench allreduce -n 0
bench-root :: $S bench broadcast -r x
bench-steps-coll :: $S bench broadcast --steps 2
bench-uint8 :: $S bench allreduce -d uint8
bench-explain-2 :: $S bench allreduce --explain -p 2 -b 8 -e 256M -f 4
bench-explain-4 :: $S bench allreduce --explain -p 4 -b 8 -e 1M -f 8 -a rhd
bench-explain-shm :: $S bench allreduce --explain -p 2 -a shm -b 8 -e 8
bench-explain-forced :: SHOAL_ALGO=rhd $S bench allreduce --explain -p 4 -b 8 -e 64
bench-run :: $S launch -n 2 --no-prefix -- $S bench allreduce -b 8 -e 64K -f 16 -n 2 -w 1 -W 0 --check | awk '/^#/ && !/Avg bus/ {print; next} /^#/ {next} {print $1, $2, $3, $4, $5, $12, $19}'
bench-run-bcast :: $S launch -n 3 --no-prefix -- $S bench broadcast -b 1K -e 4K -n 2 -w 1 -W 0 --check -r 2 -d int64 | awk '/^#/ && !/Avg bus/ {print; next} /^#/ {next} {print $1, $2, $3, $4, $5, $12, $19}'
bench-steps :: $S launch -n 2 --no-prefix -- $S bench allreduce --steps 3 -b 4K -a ring | awk '{print $1, $4}' | head -5
bench-minbw :: SHOAL_BENCH_MIN_BW=abc $S launch -n 1 -- $S bench allreduce -b 1K -e 4K -n 2 -w 1
launch-none :: $S launch
launch-help :: $S launch --help
launch-noprog :: $S launch -n 2
launch-nonint :: $S launch -n abc -- true
launch-frac :: $S launch -n 2.9 -- true
launch-zero :: $S launch -n 0 -- true
launch-bogus :: $S launch -n 2 --bogus -- true
launch-true :: $S launch -n 2 -- true
launch-env :: $S launch -n 3 -- sh -c 'echo $SHOAL_RANK $SHOAL_WORLD_SIZE $RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR' | sort
launch-noprefix :: $S launch -n 2 --no-prefix -- sh -c 'echo out; echo err >&2' 2>&1 | sort
launch-np :: $S launch --np 2 -- echo x | sort
launch-noddash :: $S launch -n 2 echo y | sort
launch-timeout :: $S launch -n 2 --timeout 0.3 -- sleep 5
launch-timeout-bad :: $S launch -n 2 --timeout 0 -- true
launch-grace-bad :: $S launch -n 2 --grace x -- true
launch-port-bad :: $S launch -n 2 --port 70000 -- true
launch-fail :: $S launch -n 3 -- sh -c '[ $SHOAL_RANK = 1 ] && exit 3; sleep 5'
launch-notfound :: $S launch -n 1 -- /nonexistent/prog
launch-noexec :: $S launch -n 1 -- /etc/passwd
launch-hosts :: $S launch -n 2 --hosts nodeA,nodeB -- prog 'a b'
launch-hosts-empty :: $S launch -n 2 --hosts a,,b -- true
launch-hosts-bad :: $S launch -n 2 --hosts 'a;b' -- true
launch-hosts-novalue :: $S launch -n 2 --hosts
launch-maxr :: $S launch -n 2 --max-restarts 2 -- true
launch-onfail :: $S launch -n 2 --on-failure sometimes -- true
launch-onfail-none :: $S launch -n 2 --on-failure
launch-continue :: $S launch -n 3 --on-failure continue -- sh -c '[ $SHOAL_RANK = 1 ] && exit 3; exit 0'
launch-bind :: $S launch -n 2 --bind sockets -- true
launch-bind-env :: SHOAL_BIND=tight $S launch -n 2 -- true
launch-bind-none :: $S launch -n 2 --bind
launch-place :: $S launch -n 2 --place rr -- true
launch-perhost :: $S launch -n 2 --per-host 2 -- true
launch-perhost-bad :: $S launch -n 2 --per-host 0 -- true
launch-addr-tb :: $S launch -n 2 --addr 127.0.0.1 --testbed x -- true
launch-tb-missing :: $S launch -n 2 --testbed nosuch -- true
launch-addr-bad :: $S launch -n 2 --addr bogus.invalid -- true
train-help :: $S train --help
train-bogus :: $S train --bogus
train-novalue :: $S train --epochs
train-another :: $S train --data /nonexistent --ps-mode async
train-another2 :: $S train --data /nonexistent --sync dssync --local-h 4
train-consensus :: $S train --data /nonexistent --consensus-every 5
train-topo :: $S train --data /nonexistent --sync dssync --racks 0,0,1,1
train-ssp :: $S train --data /nonexistent --sync ps --staleness 3
train-needs :: $S train --data /nonexistent --checkpoint-every 2
train-needs2 :: $S train --data /nonexistent --decay-gamma 0.5
train-grow :: $S train --data /nonexistent --grow-every 3
train-int :: $S train --data /nonexistent --max-iters 3000000000
train-frac :: $S train --data /nonexistent --max-iters 2.5
train-sci :: $S train --data /nonexistent --epochs 1e6
train-sci-ok :: $S train --data /nonexistent --epochs 1e1
train-classes :: $S train --data /nonexistent --classes 300
train-decay :: $S train --data /nonexistent --epochs 3 --decay-epochs 2,3
train-decay-many :: $S train --data /nonexistent --decay-epochs 1,2,3,4,5,6,7,8,9
train-decay-zero :: $S train --data /nonexistent --decay-epochs 0
train-sync-bad :: $S train --data /nonexistent --sync partioal
train-model-bad :: $S train --data /nonexistent --model vgg
train-onfail :: $S train --data /nonexistent --on-failure maybe
train-syncconf :: $S train --data /nonexistent --sync dssync --ds-k 3 --sync-config k=4
train-preempt :: $S train --data /nonexistent --preemptible
train-preempt-sync :: $S train --data /nonexistent --preemptible --sync localsgd --checkpoint x
train-bucket :: $S train --data /nonexistent --bucket-kb 64
train-missing-data :: $S train --data /nonexistent --epochs 1
train-plot-none :: $S train --plot
train-plot-nocsv :: $S train --plot $T/p.svg
train-run :: $S train --model softmax --train-subset 256 --test-subset 128 --epochs 1 --quiet --params-out $T/p --csv $T/c.csv --label one && md5sum < $T/p && cut -d, -f1-3 $T/c.csv
train-run-2 :: $S launch -n 2 -- $S train --model mlp --train-subset 256 --test-subset 64 --epochs 1 --batch 16 --quiet --params-out $T/p && md5sum < $T/p && md5sum < $T/p.rank1
train-run-ps :: $S launch -n 3 -- $S train --sync ps --servers 1 --model softmax --train-subset 192 --test-subset 64 --epochs 1 --batch 16 --quiet --params-out $T/p && md5sum < $T/p
train-plot :: $S train --model softmax --train-subset 128 --test-subset 64 --epochs 2 --quiet --csv $T/a.csv --label a >/dev/null && $S train --plot $T/p.svg --title t $T/a.csv $T/a.csv && grep -c polyline $T/p.svg
sim-help :: $S sim --help
sim-fifo :: $S sim --synthetic 200 --machines 4 --policy fifo,srtf,tiresias --no-progress --csv | cut -d, -f1-16,23-
sim-table :: $S sim --synthetic 150 --machines 4 --gpus-per-machine 4 --policy fifo,gavel --no-progress | awk '{ if (NF == 15 && $2 ~ /^[0-9]+$/) NF = 12; print }' | grep -v 'peak RSS'
sim-scenario :: $S sim --scenario nope
sim-scen-synth :: $S sim --scenario synthetic --synthetic 300 --policy fifo --no-progress --csv | cut -d, -f1-16
sim-default-scen :: $S sim --policy fifo --no-progress --csv --synthetic 100 --load 0.5 | cut -d, -f1-16
sim-gavel :: $S sim --scenario gavel --synthetic 500 --report-jobs 100:300 --policy srtf --no-progress | awk '{ if (NF == 15 && $2 ~ /^[0-9]+$/) NF = 12; print }' | grep -v 'peak RSS'
sim-pollux :: $S sim --scenario pollux --policy fifo --no-progress --csv --sample 40 | cut -d, -f1-16
sim-both :: $S sim --trace x --synthetic 5
sim-sample :: $S sim --sample 3 --synthetic 5
sim-window :: $S sim --window 1:2 --synthetic 5
sim-window-bad :: $S sim --window 2:1 --trace x
sim-pollux-filter :: $S sim --pollux-filter --synthetic 5
sim-table-only :: $S sim --gpu k80 --synthetic 5
sim-rawspread :: $S sim --synthetic 20 --machines 2 --policy fifo --raw-spread --no-progress --csv | cut -d, -f1-16
sim-speed-bad :: $S sim --synthetic 5 --machines 2 --speed fast
sim-cluster-both :: $S sim --cluster f --machines 3
sim-racks :: $S sim --racks 5 --machines 2 --synthetic 5
sim-load :: $S sim --load x
sim-load-range :: $S sim --synthetic 5 --load 1000
sim-seed :: $S sim --seed x
sim-seed-big :: $S sim --synthetic 30 --machines 2 --seed 18446744073709551615 --policy fifo --no-progress --csv | cut -d, -f1-16
sim-arrivals :: $S sim --arrivals x
sim-arrivals-ok :: $S sim --synthetic 50 --machines 2 --arrivals poisson --policy fifo --no-progress --csv | cut -d, -f1-16
sim-report :: $S sim --report-jobs 5:3
sim-report-warn :: $S sim --synthetic 10 --machines 2 --report-jobs 20:30 --policy fifo --no-progress --csv | cut -d, -f1-16
sim-policy-empty :: $S sim --synthetic 5 --policy ''
sim-policy-gap :: $S sim --synthetic 5 --policy fifo,,srtf
sim-policy-unknown :: $S sim --synthetic 5 --policy nosuch
sim-policy-param :: $S sim --synthetic 5 --policy fifo:bogus=1
sim-bogus :: $S sim --bogus
sim-novalue :: $S sim --machines
sim-machines :: $S sim --machines abc
sim-lb :: $S sim --synthetic 20 --machines 2 --lower-bound --policy none --csv | cut -d, -f1-4,24-
sim-out :: $S sim --synthetic 40 --machines 2 --policy fifo,srtf --out $T/o --no-progress --write-trace $T/w.csv | grep -v 'peak RSS' | awk '{ if (NF == 15 && $2 ~ /^[0-9]+$/) NF = 12; print }' && ls $T/o && md5sum $T/o/jobs-*.csv $T/w.csv | sed 's| .*/| |'
sim-ps :: $S sim --synthetic 60 --machines 4 --ps-fraction 0.5 --ps-ratio 0.25 --policy fifo,larr --no-progress --csv | cut -d, -f1-16
sim-speed-table :: $S sim --synthetic 60 --machines 4 --speed table --gpu k80 --policy fifo --no-progress --csv | cut -d, -f1-16
sim-horizon :: $S sim --synthetic 60 --machines 2 --horizon 3600 --check --restart-cost 5 --start-cost 1 --checkpoint 600 --policy fifo,tiresias --no-progress --csv --no-header --tag x | cut -d, -f1-16
sched-none :: $S sched
sched-help :: $S sched --help
sched-unknown :: $S sched nope
sched-run :: $S sched run --synthetic 20 --machines 2 --policy fifo --csv | cut -d, -f1-16,23-25
sched-run-help :: $S sched run --help
sched-lp :: $S sched lp-bound --synthetic 20 --machines 2 --csv | cut -d, -f1-4,24-
sched-decide-help :: $S sched decide-time --help
sched-decide-empty :: $S sched decide-time --machines 10,,20
sched-decide-jobs :: $S sched decide-time --jobs x
sched-decide-novalue :: $S sched decide-time --jobs
sched-decide-bogus :: $S sched decide-time --bogus 1
sched-decide :: $S sched decide-time --machines 4 --jobs 2 | awk '{print $1, $2, $3}'
serve-help :: $S sched serve --help
serve-tick :: $S sched serve --tick x
serve-until :: $S sched serve --until-done -1
serve-novalue :: $S sched serve --policy
serve-bogus :: $S sched serve --bogus 1
serve-policy :: $S sched serve --policy nope --journal $T/j
serve-tb :: $S sched serve --testbed nosuch --journal $T/j
submit-help :: $S submit --help
submit-none :: $S submit
submit-nocmd :: $S submit --gpus 2
submit-gpus :: $S submit --gpus 0 -- x
submit-minmax :: $S submit --min 3 --gpus 2 -- x
submit-model :: $S submit --model a:b -- x
submit-work :: $S submit --work 0 -- x
submit-bogus :: $S submit --bogus 1 -- x
submit-word :: $S submit word -- x
submit-tb :: $S submit --testbed nosuch -- true
srv-help :: $S serve --help
srv-bogus :: $S serve --bogus
srv-port :: $S serve --port 70000
srv-novalue :: $S serve --params
srv-role :: $S serve --router --model mlp
srv-role2 :: $S serve --replica http://127.0.0.1:1 --params x
srv-noparams :: $S serve
srv-model :: $S serve --model vgg --params x
srv-batch :: $S serve --max-batch 0 --params x
srv-missing :: $S serve --params /nonexistent --port 0
lg-help :: $S loadgen --help
lg-nourl :: $S loadgen --poisson 5
lg-noarr :: $S loadgen --url http://127.0.0.1:1
lg-two :: $S loadgen --url http://127.0.0.1:1 --poisson 5 --diurnal 1:0.5:10
lg-diurnal :: $S loadgen --url http://127.0.0.1:1 --diurnal 1:2:10
lg-rows :: $S loadgen --url http://127.0.0.1:1 --poisson 5 --rows 2.5
lg-bogus :: $S loadgen --bogus
lg-novalue :: $S loadgen --url
lg-duration :: $S loadgen --url http://127.0.0.1:1 --poisson 5 --duration 0
testbed-none :: $S testbed
testbed-help :: $S testbed --help
testbed-up-help :: $S testbed up --help
testbed-unknown :: $S testbed nope
testbed-hosts :: $S testbed up --name samecli --hosts 0
testbed-hosts-big :: $S testbed up --name samecli --hosts 4294967298
testbed-rate :: $S testbed up --name samecli --rate 0x100000
testbed-rate-novalue :: $S testbed up --name samecli --rate
testbed-uplink :: $S testbed up --name samecli --uplink 300mbit --oversub 4
testbed-oversub :: $S testbed up --name samecli --oversub 0.5
testbed-name :: $S testbed up --name Bad
testbed-topo :: $S testbed up --name samecli --topo /nonexistent
testbed-topo-bad :: printf 'hosts 3\nracks x\n' > $T/topo && $S testbed up --name samecli --topo $T/topo
testbed-gpus :: $S testbed up --name samecli --slurm --gpus 17
testbed-bogus :: $S testbed up --bogus
testbed-down-opt :: $S testbed down --hosts 2
testbed-status-missing :: $S testbed status --name nosuch
testbed-down-missing :: $S testbed down --name nosuch
testbed-set-missing :: $S testbed set --name nosuch h0 --rate 1gbit
testbed-set-nohost :: $S testbed set --name nosuch
testbed-exec-missing :: $S testbed exec --name nosuch h0 -- true
testbed-exec-nohost :: $S testbed exec --name nosuch
EOF
  [ "$testbed" = 1 ] || return 0
  cat <<'EOF'
tb-up :: $S testbed up --name samecli --hosts 5 --racks 2 --rate 500mbit --oversub 2 | sed 's/in [0-9.]* s/in X s/'
tb-up-again :: $S testbed up --name samecli
tb-status :: $S testbed status --name samecli
tb-set-host :: $S testbed set --name samecli h0 --rate 50mbit && $S testbed set --name samecli samecli-h1 --egress 20mbit --ingress 30mbit && $S testbed status --name samecli
tb-set-rack :: $S testbed set --name samecli r1 --rate 100mbit && $S testbed set --name samecli rack0 --egress 200mbit && $S testbed status --name samecli | grep uplink
tb-set-cpu :: $S testbed set --name samecli h1 --cpu 0.5 --cpu-method stop && $S testbed set --name samecli h2 --cpu 0.5 && $S testbed status --name samecli | grep -E '^h[12] '; $S testbed set --name samecli h1 --cpu 0 && $S testbed set --name samecli h2 --cpu 0
tb-set-bad :: $S testbed set --name samecli h9 --rate 1gbit; $S testbed set --name samecli h0; $S testbed set --name samecli h0 --cpu 0.001; $S testbed set --name samecli r0 --cpu 1; $S testbed set --name samecli h0 --bogus; $S testbed set --name samecli h0 --cpu-method x --cpu 1; $S testbed set --name samecli h0 --delay x
tb-set-delay :: $S testbed set --name samecli h3 --delay 5
tb-exec :: $S testbed exec --name samecli h1 -- hostname && $S testbed exec --name samecli h4 cat /etc/hosts && $S testbed exec --name samecli samecli-h2 -- sh -c 'ip -4 -o addr show eth0 | awk "{print \$4}"; echo $SHOAL_SOCKET_IFNAME'
tb-exec-bad :: $S testbed exec --name samecli h7 -- true; $S testbed exec --name samecli h0; $S testbed exec --name samecli h0 -- /nonexistent
tb-launch :: $S launch -n 4 --testbed samecli -- sh -c 'echo $(hostname) $LOCAL_RANK $LOCAL_WORLD_SIZE $SHOAL_MASTER_ADDR' | sort
tb-launch-rr :: $S launch -n 3 --testbed samecli --place rr --per-host 1 --hosts h3,h1,h4 -- hostname | sort
tb-launch-bad :: $S launch -n 3 --testbed samecli --hosts h0,h0 -- true; $S launch -n 9 --testbed samecli --per-host 1 -- true; $S launch -n 2 --testbed samecli --place x -- true; $S launch -n 2 --testbed samecli --hosts h9 -- true
tb-selftest :: $S launch -n 3 --testbed samecli -- $S selftest --count 9
tb-down :: $S testbed down --name samecli && $S testbed down --name samecli
EOF
  [ "$slurm" = 1 ] || return 0
  cat <<'EOF'
slurm-up :: $S testbed up --name samecli --hosts 2 --slurm --gpus 2 | sed 's/in [0-9.]* s/in X s/'
slurm-status :: $S testbed status --name samecli | grep slurm
slurm-submit :: $S submit --testbed samecli --gpus 1 --model mlp --work 100 -- true | sed 's/[0-9][0-9]*/ID/'
slurm-exec :: $S testbed exec --name samecli h0 -- sh -c 'sinfo -h -o %D; echo $SLURM_CONF' | sed "s|/run/shoal-testbed/samecli|RUN|"
slurm-down :: $S testbed down --name samecli
EOF
}

mask() {
  sed -e "s|$A|SHOAL|g" -e "s|$B|SHOAL|g" -e "s|$T|TMP|g" -e 's/pid [0-9][0-9]*/pid N/g' -e 's/^\[shoal \([^]:]*\):[0-9]*\]/[shoal \1:PID]/' -e 's/in [0-9][0-9.]* s\b/in X s/g'
}

# run_all BUILD DIR: every case with BUILD, results in DIR/<case>.{out,err,rc}
run_all() {
  local S=$1 dir=$2 name cmd
  mkdir -p "$dir"
  "$S" testbed down --name samecli >/dev/null 2>&1
  while IFS= read -r line; do
    name=${line%% :: *} cmd=${line#* :: }
    [[ $name =~ $only ]] || continue
    rm -rf "$T" && mkdir -p "$T"
    (cd "$OLDPWD_ROOT" && S=$S T=$T timeout 180 bash -c "$cmd" </dev/null >"$dir/$name.out.raw" 2>"$dir/$name.err.raw")
    echo $? >"$dir/$name.rc"
    mask <"$dir/$name.out.raw" >"$dir/$name.out"
    mask <"$dir/$name.err.raw" >"$dir/$name.err"
    rm -f "$dir/$name.out.raw" "$dir/$name.err.raw"
  done < <(cases)
}

OLDPWD_ROOT=$PWD
run_all "$A" "$W/a"
run_all "$B" "$W/b"
same=0 diff=0 intended=0 bad=0
while IFS= read -r line; do
  name=${line%% :: *}
  [[ $name =~ $only ]] || continue
  if cmp -s "$W/a/$name.rc" "$W/b/$name.rc" && cmp -s "$W/a/$name.out" "$W/b/$name.out" && cmp -s "$W/a/$name.err" "$W/b/$name.err"; then
    same=$((same + 1))
    continue
  fi
  diff=$((diff + 1))
  if [[ $expect == *",$name,"* ]]; then intended=$((intended + 1)); tag="(intended)"; else bad=$((bad + 1)); tag="(NOT EXPECTED)"; fi
  echo "=== $name $tag: ${line#* :: }"
  for k in rc out err; do
    cmp -s "$W/a/$name.$k" "$W/b/$name.$k" || diff -u --label "before $k" --label "after $k" "$W/a/$name.$k" "$W/b/$name.$k" | tail -n +3
  done
done < <(cases)
echo "same-cli: $same cases the same, $diff different ($intended intended, $bad not expected)"
[ "$bad" = 0 ]
