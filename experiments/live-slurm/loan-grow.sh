#!/bin/sh
# The Slurm grow by a restart, checked by hand (docs/serving.md, "Loaning in the controller"): a 3-host
# testbed, partitions train = h0 and infer = h1,h2 (the default partition holds all three), a checkpointing
# borrower in train, the controller loaning from infer (the replica is a stand-in, sleep 300). Run from the
# repository root as root; prints the controller's log, the borrower's runs and Slurm's jobs; about 40 s.
S=$(realpath ${SHOAL:-build/shoal}); N=${NAME:-loangrow}; D=${DIR:-/tmp/loan-grow}; CK=$PWD/experiments/live-slurm/ckjob.sh
rm -rf $D; mkdir -p $D
$S testbed down --name $N >/dev/null 2>&1
timeout 60 $S testbed up --name $N --hosts 3 --slurm --gpus 1 > $D/up.log 2>&1 || { cat $D/up.log; exit 1; }
X() { timeout 30 $S testbed exec --name $N h0 -- "$@"; }
X sinfo -h -o "%N %P"
NODES=$(X sinfo -h -N -o %N | sort -u | tr '\n' ' '); set -- $NODES; echo nodes $NODES
X scontrol create PartitionName=train Nodes=$1 State=UP
X scontrol create PartitionName=infer Nodes=$2,$3 State=UP
ADDR=$($S testbed status --name $N 2>/dev/null | awk '/h0/ {for(i=1;i<=NF;i++) if ($i ~ /^10\./) {print $i; exit}}' | cut -d/ -f1)
echo router addr $ADDR
timeout 90 $S testbed exec --name $N h0 -- $S serve --router --port 35001 > $D/router.log 2>&1 &
sleep 1
ID=$(timeout 30 $S submit --testbed $N --partition train --gpus 1 --min 1 --max 3 --output $D/%j.out -- $CK $D 400 0.1)
echo borrower $ID
timeout 70 $S sched serve --testbed $N --partition train --policy fifo --journal $D/j --tick 0.5 \
  --loan-from infer --loan-router http://$ADDR:35001 --loan-replica "sleep 300" --loan-every 1 --loan-hold 2 --max-time 25 > $D/ctl.log 2>&1
echo ctl rc $?
cat $D/ctl.log | grep -v "^$" | head -40
echo --- borrower runs; cat $D/$ID.log
X squeue -t all -o "%i %P %T %N %k"
$S testbed down --name $N >/dev/null 2>&1
kill %1 2>/dev/null; rm -rf $D
