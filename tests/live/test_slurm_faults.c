/* Faults of the testbed's Slurm daemons under the controller: `shoal testbed daemon` stops slurmctld for a
 * few seconds and restarts the slurmds while jobs run (an outage this short only slows Slurm's commands down:
 * they retry their connection), and every job completes once. Skipped (with the reason) without root, Slurm or namespaces. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "slurm_util.h"

static char out[1 << 16];

TEST_T(live_slurm_daemon_restarts_lose_no_job, 150) {
  char cmd[6144], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sd", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           "T() { timeout 30 $S testbed daemon --name $N \"$@\" 2>&1 | sed 's/^/daemon: /'; }\n"
           "A=$(sub --gpus 1 --work 10 --name A -- $CK $D 16 0.5); B=$(sub --gpus 1 --work 10 --name B -- $CK $D 16 0.5)\n"
           "timeout 100 $S sched serve --testbed $N --policy fifo --journal $D/journal --tick 0.5 --max-time 80 "
           "--until-done 2 > $D/serve.log 2>&1 & P=$!\n"
           "state $A RUNNING; state $B RUNNING\n"
           "T stop slurmctld; sleep 4; T start slurmctld; T start slurmctld\n"
           "T restart slurmd-h0; T restart slurmd-1; T restart nosuch\n"
           "wait $P; echo serve-rc=$?; cat $D/serve.log\n"
           "echo runs: $(runs $A) $(runs $B); echo done: $(grep -c ^done $D/$A.log) $(grep -c ^done $D/$B.log)\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, 1);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 140);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  char want[128];
  snprintf(want, sizeof want, "daemon: testbed %s: slurmctld stopped", name);
  CHECK_CONTAINS(out, want);
  snprintf(want, sizeof want, "daemon: testbed %s: slurmctld started (pid ", name);
  CHECK_CONTAINS(out, want);
  CHECK_CONTAINS(out, "daemon: shoal testbed daemon: slurmctld already runs (pid ");
  snprintf(want, sizeof want, "daemon: testbed %s: slurmd-h0 stopped", name);
  CHECK_CONTAINS(out, want);
  snprintf(want, sizeof want, "daemon: testbed %s: slurmd-h1 started", name);
  CHECK_CONTAINS(out, want);
  snprintf(want, sizeof want, "daemon: shoal testbed daemon: 'nosuch' is not a Slurm daemon of testbed %s", name);
  CHECK_CONTAINS(out, want);
  CHECK_MSG(strstr(out, "nosuch was not running") == NULL, "an unknown daemon was looked for: %s", out);
  CHECK_CONTAINS(out, "serve-rc=0");
  CHECK_CONTAINS(out, "2 jobs seen, 2 completed, 0 failed");
  CHECK_CONTAINS(out, "runs: 1 1");
  CHECK_CONTAINS(out, "done: 1 1");
}
