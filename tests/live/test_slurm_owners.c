/* Whose jobs and nodes on the testbed's real Slurm, with accounting on (`testbed up --slurm --accounting`:
 * slurmdbd on a MariaDB of its own): the controller's tenants come from the associations, weighed by the fair
 * shares sacctmgr set; another user's plain job (user nobody, account other) keeps its node, the controller's
 * jobs carry its claim in AdminComment, a second controller is refused by the lease, `shoal sched status` answers from the running controller, and
 * sacct shows every job with its user and account. Skipped (with the reason) without root, Slurm, MariaDB
 * or namespaces. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "slurm_util.h"

static char out[1 << 16];

TEST_T(live_slurm_accounting_owners_and_status, 150) {
  char cmd[6144], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sa", name, sizeof name, dir, sizeof dir);
  if (access("/usr/sbin/mariadbd", X_OK) || access("/usr/sbin/slurmdbd", X_OK))
    shoal_test_skip("no MariaDB or slurmdbd (Debian mariadb-server slurmdbd; scripts/deps.sh test)");
  snprintf(cmd, sizeof cmd,
           "UP=--accounting\n" TESTBED_SH
           "F=$(X sbatch --parsable --uid=nobody -A other -w $N-h0 -o /dev/null --gres=gpu:1 --wrap 'sleep 8')\n"
           "state $F RUNNING\n"
           "X sacctmgr -i modify account research set fairshare=3 > /dev/null\n"
           "A=$(sub --gpus 1 --work 10 --name A -- $CK $D 6 0.5); B=$(sub --gpus 1 --work 10 --name B -- $CK $D 2 0.5)\n"
           "timeout 90 $S sched serve --testbed $N --policy drf --id ctl-a --journal $D/journal --tick 0.5 "
           "--max-time 60 --until-done 2 > $D/serve.log 2>&1 & P=$!\n"
           "state $A RUNNING\n"
           "timeout 20 $S sched status --testbed $N --journal $D/journal 2>&1 | sed 's/^/status: /'\n"
           "timeout 20 $S sched serve --testbed $N --policy fifo --id ctl-b --journal $D/journal2 --max-time 2 2>&1 "
           "| sed 's/^/second: /'\n"
           "X scontrol show job $A | grep -o 'AdminComment=[^ ]*' | sed 's/^/claim: /'\n"
           "wait $P; echo serve-rc=$?; cat $D/serve.log; state $F COMPLETED\n"
           "X sacct -a -X -n -P -j $A,$B,$F -o JobID,User,Account,State,NodeList | sed 's/^/sacct: /'\n"
           "echo runs: $(runs $A) $(runs $B); echo ids: $A $B $F; echo node-h0: $N-h0\n" TESTBED_SH_END,
           shoal_test_cli(), name, dir, 1);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 140);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  long a = 0, b = 0, f = 0;
  char want[160];
  const char *ids = strstr(out, "ids: ");
  CHECK_MSG(ids && sscanf(ids, "ids: %ld %ld %ld", &a, &b, &f) == 3, "no ids: %s", out);
  CHECK_CONTAINS(out, "serve-rc=0");
  /* research's fair shares 3 against other's 1: DRF weighs research three times as much */
  CHECK_CONTAINS(out, "tenants (by account, weighed from the manager's fair shares and usage): root 0.25, other 0.25, research 0.75");
  CHECK_CONTAINS(out, "2 jobs seen, 2 completed, 0 failed");
  CHECK_CONTAINS(out, "runs: 1 1");
  CHECK_CONTAINS(out, "claim: AdminComment=shoal-ctl=ctl-a;scope=all");
  CHECK_CONTAINS(out, "second: shoal sched serve: the cluster is served by controller ctl-a");
  CHECK_CONTAINS(out, "status: controller ctl-a (host ");
  CHECK_CONTAINS(out, "held by others");
  snprintf(want, sizeof want, "needs 1 GPU; 0 free of 1 usable");
  CHECK_CONTAINS(out, want);
  char node0[64] = "";
  const char *nh = strstr(out, "node-h0: ");
  if (nh) sscanf(nh, "node-h0: %63s", node0);
  /* sacct: every job with its user and account; A started while nobody's job held h0: not on h0 */
  snprintf(want, sizeof want, "sacct: %ld|root|research|COMPLETED|", a);
  CHECK_CONTAINS(out, want);
  const char *la = strstr(out, want);
  CHECK_MSG(la && strncmp(la + strlen(want), node0, strlen(node0)), "job %ld ran on the other user's node: %s", a, out);
  snprintf(want, sizeof want, "sacct: %ld|root|research|COMPLETED|", b);
  CHECK_CONTAINS(out, want);
  snprintf(want, sizeof want, "sacct: %ld|nobody|other|COMPLETED|%s", f, node0);
  CHECK_CONTAINS(out, want);
}
