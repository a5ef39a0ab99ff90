/* Flow scheduling end to end through the real CLI (docs/flow.md): a 4-host testbed in 2 racks with
 * `up --flow` (the controller in the fabric, an agent per host), two training jobs whose rings cross the
 * uplink, the agents seeing and pacing their flows; the controller killed with -9 mid-run, the jobs going
 * on unpaced to the end; `down` leaving no daemon and no flow segment. Skipped (with the reason) when not
 * root, without iproute2 or namespaces, or without the data set. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"

static char out[1 << 17];

static void need_testbed(void) {
  if (geteuid() != 0) shoal_test_skip("not root: network namespaces and tc need root");
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ip netns add sfp%d && ip netns del sfp%d && command -v tc", (int)getpid(), (int)getpid());
  if (shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0) shoal_test_skip("cannot create a network namespace or no tc here");
  if (access("/usr/share/datasets/fashion-mnist", R_OK)) shoal_test_skip("no /usr/share/datasets/fashion-mnist");
}

TEST_T(flow_testbed_two_jobs_and_a_killed_controller, 90) {
  need_testbed();
  char name[32], cmd[4096];
  snprintf(name, sizeof name, "sf%d", (int)getpid() % 10000000);
  const char *S = shoal_test_cli();
  /* each job: 2 ranks on hosts in different racks, 20 steps of 100 ms compute and a 100 KB gradient */
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s; D=/tmp/$N.flow; mkdir -p $D; trap '$S testbed down --name $N >/dev/null 2>&1; rm -rf $D' EXIT\n"
           "$S testbed up --name $N --hosts 4 --racks 2 --rate 40mbit --oversub 2 --flow || exit 1\n"
           "$S testbed up --name $N --flow-policy equal 2>&1 | head -1\n"
           "job() { timeout 60 $S launch --testbed $N -n 2 --hosts $1 --timeout 55 -- $S train --max-iters 20 --batch 32 "
           "--train-subset 2048 --compute-ms 100 --quiet > $D/$2.out 2>&1; echo job$2-rc=$?; }\n"
           "job h0,h2 1 & job h1,h3 2 &\n"
           "for i in $(seq 1 40); do sleep 0.25; $S flow status --testbed $N > $D/st; grep -q 'paced [1-9]' $D/st && break; done\n"
           "cat $D/st\n"
           "kill -9 $(awk '$1 == \"shoal-controller\" {print $2}' /run/shoal-testbed/$N/flow/pids); echo controller-killed\n"
           "sleep 0.5; $S flow status --testbed $N\n"
           "wait\n"
           "tail -n 2 $D/1.out $D/2.out\n"
           "cat /run/shoal-testbed/$N/flow/agent-h0.log\n"
           "$S testbed down --name $N\n"
           "ls /dev/shm | grep -c \"shoal-flow.$N-\"; pgrep -f \"testbed $N \" | grep -c . \n",
           S, name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 85);
  CHECK_MSG(WIFEXITED(st), "status %d: %s", st, out);
  CHECK_CONTAINS(out, "flow scheduling up: controller at 10.90.255.254:29610");
  CHECK_CONTAINS(out, "--flow-policy applies with --flow only");
  /* the agents saw the jobs' cross-host flows and paced them */
  char h0[64], want[128];
  snprintf(h0, sizeof h0, "%s-h0", name);
  snprintf(want, sizeof want, "%-12s agent pid", h0);
  CHECK_CONTAINS(out, want);
  CHECK_CONTAINS(out, "flows 1, paced 1");
  /* the controller gone: the agents say so, the flows go unpaced, the jobs finish with correct results */
  CHECK_CONTAINS(out, "controller-killed");
  CHECK_CONTAINS(out, "flows unpaced");
  CHECK_CONTAINS(out, "job1-rc=0");
  CHECK_CONTAINS(out, "job2-rc=0");
  CHECK_CONTAINS(out, "flow scheduling stopped (4 daemons)"); /* the agents; the controller was dead */
  /* nothing left: no segment of the testbed's hosts, no daemon */
  CHECK_MSG(strstr(out, "removed\n0\n0\n") != NULL, "a flow segment or a daemon left: %s", out);
}

/* The daemons' faults on a 2-host testbed with two jobs sharing the hosts' links (docs/flow.md#failure-behaviour):
 * h0's agent killed with -9 mid-run (its ranks drop the limit once its beat is stale, a new agent takes
 * the segment over); one job's ranks killed with -9 (their segment slots are reaped, the other job goes
 * on); agents whose controller is unreachable (the jobs run unpaced to the end). */
TEST_T(flow_testbed_faults_leave_jobs_unpaced, 90) {
  need_testbed();
  char name[32], cmd[4096];
  snprintf(name, sizeof name, "sg%d", (int)getpid() % 10000000);
  const char *S = shoal_test_cli();
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s; D=/tmp/$N.flow; mkdir -p $D; trap '$S testbed down --name $N >/dev/null 2>&1; rm -rf $D' EXIT\n"
           "$S testbed up --name $N --hosts 2 --rate 40mbit --flow > /dev/null || exit 1\n"
           "job() { timeout 60 $S launch --testbed $N -n 2 --timeout 55 -- $S train --max-iters $1 --batch 32 "
           "--train-subset 2048 --compute-ms 100 --quiet > $D/$2.out 2>&1; echo job$2-rc=$?; }\n"
           "st() { $S flow status --host $N-h0 > $D/st; grep -q \"$1\" $D/st; }\n"
           "until_st() { for i in $(seq 1 60); do st \"$1\" && break; sleep 0.1; done; echo \"$2: $(cat $D/st)\"; }\n"
           "job 41 1 & p1=$!; job 40 2 & p2=$!\n"
           "until_st 'paced [1-9]' paced\n"
           "kill -9 $(awk '$1 == \"shoal-agent-h0\" {print $2}' /run/shoal-testbed/$N/flow/pids)\n"
           "until_st 'agent not running.*paced 0' agent-killed\n"
           "$S testbed exec --name $N h0 -- $S flow agent --controller 10.90.255.254:29610 --duration 60 > $D/agent.log 2>&1 & a=$!\n"
           "until_st 'agent pid.*paced [1-9]' new-agent; cat $D/agent.log\n"
           "pkill -9 -f -- '--max-iters 4[1]'; echo job1-killed\n"
           "until_st 'flows 1,' reaped\n"
           "wait $p1 $p2; kill $a 2>/dev/null; wait $a\n"
           "$S testbed down --name $N > /dev/null\n"
           "ls /dev/shm | grep -c \"shoal-flow.$N-\"\n"
           /* agents whose controller does not exist: connect times out inside every slot */
           "$S testbed up --name $N --hosts 2 --rate 40mbit > /dev/null || exit 1\n"
           "a=; for h in h0 h1; do $S testbed exec --name $N $h -- $S flow agent --controller 10.90.255.253:34999 --duration 30 "
           "> $D/a$h.log 2>&1 & a=\"$a $!\"; done\n"
           "job 10 3\n"
           "st x; echo \"unreachable: $(cat $D/st)\"; kill $a 2>/dev/null; wait $a; cat $D/ah0.log\n",
           S, name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 85);
  CHECK_MSG(WIFEXITED(st), "status %d: %s", st, out);
  /* the agent gone: its ranks dropped the limit themselves */
  CHECK_CONTAINS(out, "agent-killed: ");
  CHECK_CONTAINS(out, "agent not running (its beat stopped); flows 2, paced 0");
  /* the new agent took the dead one's segment over and paces again */
  CHECK_CONTAINS(out, "new-agent: ");
  CHECK_MSG(strstr(out, "new-agent: ") && strstr(strstr(out, "new-agent: "), "agent pid") &&
                strstr(out, "new-agent: ") < strstr(out, "job1-killed"),
            "no new agent before the kill: %s", out);
  /* the killed job's slots were reaped, the other job finished */
  CHECK_CONTAINS(out, "reaped: ");
  CHECK_MSG(strstr(out, "reaped: ") && strstr(strstr(out, "reaped: "), "flows 1,"), "slots not reaped: %s", out);
  CHECK_CONTAINS(out, "job2-rc=0");
  CHECK_MSG(strstr(out, "job1-rc=0") == NULL, "the killed job reported success: %s", out);
  CHECK_CONTAINS(out, "\n0\n"); /* down removed the segments */
  /* an unreachable controller: the job ran unpaced to the end, the agent said so once */
  CHECK_CONTAINS(out, "job3-rc=0");
  CHECK_CONTAINS(out, "paced 0; background");
  CHECK_CONTAINS(out, "last controller contact never");
  CHECK_CONTAINS(out, "10.90.255.253:34999");
}
