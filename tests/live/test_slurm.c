/* The live controller beside a real Slurm (docs/live.md), reduced: a 2-host
 * testbed with munge/slurmctld/slurmd, 3 short checkpointing jobs placed by
 * `shoal sched serve --policy srtf`, one preemption, and the controller killed
 * with SIGKILL mid-run and started again on its journal
 * (experiments/live-slurm/reduced.sh). Checks from the jobs' own logs that
 * every job completed once, the preempted one resumed from its checkpoint,
 * nothing was started twice, and that no Slurm process or file is left.
 * Skipped (with the reason) without root, ip, namespaces or Slurm. */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../runner.h"
#include "core/error.h"
#include "live/manager_slurm.h"
#include "slurm_util.h"

static char out[1 << 16];

TEST_T(live_slurm_reduced_preempt_and_controller_restart, 150) {
  char cmd[1024], name[32], dir[128];
  slurm_test_begin("experiments/live-slurm/reduced.sh", "sl", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd, "rm -rf %s; experiments/live-slurm/reduced.sh %s %s %s 2>&1; echo reduced-rc=$?", dir,
           shoal_test_cli(), name, dir);
  shoal_test_run_cmd(cmd, out, sizeof out, 140);
  /* nothing of the cluster is left: state, daemons (their command lines name the testbed's directory) */
  char p[256];
  struct stat st;
  snprintf(p, sizeof p, "/run/shoal-testbed/%s", name);
  CHECK_MSG(stat(p, &st) != 0, "%s still exists", p);
  char left[4096];
  snprintf(cmd, sizeof cmd, "pgrep -af 'shoal-testbed/%s/' | grep -v pgrep || true", name);
  shoal_test_run_cmd(cmd, left, sizeof left, 10);
  CHECK_MSG(strstr(left, "slurm") == NULL && strstr(left, "munged") == NULL, "processes left: %s", left);
  CHECK_MSG(strstr(out, "reduced-rc=0") != NULL, "reduced run failed: %s", out);
  char serve[1 << 14] = "";
  snprintf(p, sizeof p, "%s/serve.log", dir);
  FILE *f = fopen(p, "r");
  if (f) {
    size_t n = fread(serve, 1, sizeof serve - 1, f);
    serve[n] = 0;
    fclose(f);
  }
  long ids[3] = {0, 0, 0};
  snprintf(p, sizeof p, "%s/ids", dir);
  f = fopen(p, "r");
  CHECK_MSG(f && fscanf(f, "%ld %ld %ld", &ids[0], &ids[1], &ids[2]) == 3, "no job ids in %s: %s", p, out);
  if (f) fclose(f);
  char want[128];
  snprintf(want, sizeof want, "preempt job %ld", ids[0]);
  CHECK_MSG(strstr(serve, want) != NULL, "no preemption of job %ld: %s", ids[0], serve);
  CHECK_MSG(strstr(serve, "adopted") != NULL, "the restarted controller adopted nothing: %s", serve);
  CHECK_MSG(strstr(serve, "3 jobs seen, 3 completed, 0 failed") != NULL, "not every job finished: %s", serve);
  for (int k = 0; k < 3; k++) {
    snprintf(p, sizeof p, "%s/%ld.log", dir, ids[k]);
    int runs = slurm_count_lines(p, "run "), done = slurm_count_lines(p, "done");
    CHECK_MSG(done == 1, "job %ld finished %d times (%s)", ids[k], done, p);
    /* the preempted job ran twice (second run from its checkpoint); the others once: none started twice */
    CHECK_MSG(runs == (k == 0 ? 2 : 1), "job %ld ran %d times, expected %d", ids[k], runs, k == 0 ? 2 : 1);
  }
  snprintf(p, sizeof p, "%s/%ld.log", dir, ids[0]);
  f = fopen(p, "r");
  int r0 = -1, s0 = -1, r1 = -1, s1 = -1;
  if (f) {
    char l1[256], l2[256];
    if (fgets(l1, sizeof l1, f) && fgets(l2, sizeof l2, f)) {
      sscanf(l1, "run %d %d", &r0, &s0);
      sscanf(l2, "run %d %d", &r1, &s1);
    }
    fclose(f);
  }
  CHECK_MSG(r0 == 0 && s0 == 0 && r1 == 1 && s1 > 0, "job %ld did not resume from its checkpoint (runs %d@%d, %d@%d)", ids[0],
            r0, s0, r1, s1);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir); /* kept for inspection when a check failed */
  shoal_test_run_cmd(cmd, out, sizeof out, 10);
}

/* A signal while `testbed up --slurm` starts Slurm (after the network part is up) rolls back both parts:
 * no namespace, daemon or state is left. */
TEST_T(live_slurm_interrupted_up_rolls_back, 90) {
  char cmd[2048], name[32];
  slurm_test_begin(NULL, "si", name, sizeof name, NULL, 0);
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s; O=/tmp/shoal-upint-$N.out\n"
           "$S testbed up --name $N --hosts 2 --slurm > $O 2>&1 & U=$!\n"
           /* the Slurm part starts by creating this directory and takes about a second from there: poll it
            * with shell builtins only (no fork per look, so a busy machine does not miss the window) */
           "R=/run/shoal-testbed/$N/slurm; i=0\n"
           "while [ $i -lt 40000 ] && [ ! -d $R ]; do j=0; while [ $j -lt 200 ] && [ ! -d $R ]; do j=$((j+1)); done; "
           "i=$((i+1)); done\n"
           "kill -TERM $U; wait $U; echo up-rc=$?; cat $O; rm -f $O\n"
           "sleep 0.5; echo left-ns: $(ls /run/netns | grep -c \"^$N-\")\n"
           "echo left-daemons: $(pgrep -f \"shoal-testbed/$N/\" | wc -l)\n"
           "[ -e /run/shoal-testbed/$N ] && echo left-state\n"
           "$S testbed down --name $N >/dev/null 2>&1; true\n",
           shoal_test_cli(), name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 80);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  if (strstr(out, "up-rc=0")) shoal_test_skip("Slurm was up before the signal arrived (machine too fast for this check)");
  CHECK_CONTAINS(out, "up-rc=143");
  CHECK_CONTAINS(out, "up --slurm");
  CHECK_CONTAINS(out, "interrupted by");
  CHECK_CONTAINS(out, "rolling back");
  CHECK_CONTAINS(out, "left-ns: 0");
  CHECK_CONTAINS(out, "left-daemons: 0");
  CHECK_MSG(strstr(out, "left-state") == NULL, "state left: %s", out);
}

/* A job the user cancels while it waits (held) is dropped, never started, and reported CANCELLED; the
 * jobs behind it go on (the policy forgets it). */
TEST_T(live_slurm_job_cancelled_while_held_is_dropped, 120) {
  char cmd[4096], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sc", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           "A=$(sub --gpus 4 --work 100 --name A -- $CK $D 6 0.5)\n"
           "B=$(sub --gpus 1 --work 100 --name B -- $CK $D 2 0.5)\n"
           "timeout 90 $S sched serve --testbed $N --policy fifo --journal $D/journal --until-done 2 --max-time 60 "
           "> $D/serve.log 2>&1 & P=$!\n"
           "i=0; while [ $i -lt 200 ] && ! grep -q \"start job $A\" $D/serve.log; do sleep 0.1; i=$((i+1)); done\n"
           "X scancel $B; wait $P; echo serve-rc=$?\n"
           "cat $D/serve.log; echo B-runs: $(runs $B); echo B=$B\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, 2);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 115);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "serve-rc=0");
  CHECK_CONTAINS(out, "CANCELLED (by the user)");
  CHECK_CONTAINS(out, "1 completed, 0 failed, 1 cancelled, 0 not ended");
  CHECK_CONTAINS(out, "B-runs: 0");
  CHECK_MSG(strstr(out, "requeued from its checkpoint") == NULL, "the cancelled job was retried: %s", out);
}

/* Jobs a user cancels after they ran are dropped too, never retried or resumed: a preempted job (held,
 * its record still saying exit 75, the checkpoint exit) and a running one, each while the controller is
 * down (it learns on its restart) and while it runs. */
TEST_T(live_slurm_jobs_cancelled_after_running_are_dropped, 150) {
  char cmd[6144], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sr", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           /* (the controller itself in the background, not a wrapper: kill -9 $P must kill it; --max-time bounds it) */
           "SERVE=\"sched serve --testbed $N --policy srtf --journal $D/journal --grace 1 --tick 0.5 --max-time 60\"\n"
           /* waits (at most 20 s) until job $1 is in Slurm state $2 and, with $3, job $3 has run */
           "until_() { i=0; while [ $i -lt 200 ]; do [ \"$(X squeue -h -t all -j $1 -o %%T)\" = $2 ] && "
           "{ [ -z \"${3:-}\" ] || [ $(runs $3) -gt 0 ]; } && return 0; sleep 0.1; i=$((i+1)); done; "
           "echo \"job $1 never $2\"; return 1; }\n"
           /* A (2 GPUs, long) runs; B (1 GPU, short by its declared work) preempts it: A exits 75, held */
           "A=$(sub --gpus 2 --work 1000000 --name A -- $CK $D 120 0.5)\n"
           "$S $SERVE >> $D/serve.log 2>&1 & P=$!\n"
           "until_ $A RUNNING $A\n"
           "B=$(sub --gpus 1 --work 10 --name B -- $CK $D 120 0.5)\n"
           "until_ $A PENDING $B\n"
           /* the controller dies; the user cancels the preempted A and the running B meanwhile */
           "kill -9 $P; wait $P; X scancel $A $B; until_ $B CANCELLED\n"
           "$S $SERVE --until-done 4 >> $D/serve.log 2>&1 & P=$!\n"
           /* and with the controller up: C runs, E preempts it, both cancelled */
           "C=$(sub --gpus 2 --work 1000000 --name C -- $CK $D 120 0.5)\n"
           "until_ $C RUNNING $C\n"
           "E=$(sub --gpus 1 --work 10 --name E -- $CK $D 120 0.5)\n"
           "until_ $C PENDING $E\n"
           "X scancel $C $E; wait $P; echo serve-rc=$?\n"
           "cat $D/serve.log; echo runs: $(runs $A) $(runs $B) $(runs $C) $(runs $E)\n"
           "for j in $A $B $C $E; do grep -q \"job $j: CANCELLED (by the user)\" $D/serve.log && echo cancelled-$j; done\n"
           "grep \"job $A: CANCELLED\" $D/serve.log | grep -q \"preemptions 1 \" && echo A-preempted-once\n"
           "echo ids: $A $B $C $E\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, 1);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 140);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "serve-rc=0");
  CHECK_CONTAINS(out, "0 completed, 0 failed, 4 cancelled, 0 not ended");
  CHECK_CONTAINS(out, "runs: 1 1 1 1");
  CHECK_CONTAINS(out, "A-preempted-once"); /* its journal's last stop counts, read on the restart */
  long ids[4] = {0, 0, 0, 0};
  const char *p = strstr(out, "ids: ");
  CHECK_MSG(p && sscanf(p, "ids: %ld %ld %ld %ld", &ids[0], &ids[1], &ids[2], &ids[3]) == 4, "no ids: %s", out);
  for (int k = 0; k < 4; k++) {
    char want[48];
    snprintf(want, sizeof want, "cancelled-%ld", ids[k]);
    CHECK_MSG(strstr(out, want) != NULL, "job %ld not reported cancelled by the user: %s", ids[k], out);
  }
  CHECK_MSG(strstr(out, "retry") == NULL && strstr(out, "requeued from its checkpoint") == NULL,
            "a cancelled job was retried: %s", out);
}

/* What happens to jobs outside the controller: one released by the user before the controller saw it is
 * left to Slurm (not placed, so not stopped and restarted); one that checkpoints and exits 75 unasked is
 * requeued and started again; one an operator requeue-holds while it runs goes back to the queue and is
 * started again. Each completes, none is lost (every node booked for it is given back). */
TEST_T(live_slurm_jobs_changed_outside_the_controller, 150) {
  char cmd[6144], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "so", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           "printf '#!/bin/sh\\necho \"run ${SLURM_RESTART_COUNT:-0}\" >> \"$1/$SLURM_JOB_ID.log\"\\n"
           "[ \"${SLURM_RESTART_COUNT:-0}\" = 0 ] && exit 75\\nsleep 1\\n' > $D/once75.sh; chmod +x $D/once75.sh\n"
           "until_() { i=0; while [ $i -lt 200 ]; do [ \"$(X squeue -h -t all -j $1 -o %%T)\" = $2 ] && "
           "[ $(runs $1) -gt 0 ] && return 0; sleep 0.1; i=$((i+1)); done; echo \"job $1 never $2\"; return 1; }\n"
           "R=$(sub --gpus 1 --work 10 --name R -- $CK $D 4 0.5); X scontrol release $R; until_ $R RUNNING\n"
           "$S sched serve --testbed $N --policy fifo --journal $D/journal --grace 1 --tick 0.5 --max-time 60 "
           "--until-done 2 > $D/serve.log 2>&1 & P=$!\n"
           "E=$(sub --gpus 1 --work 10 --name E -- $D/once75.sh $D)\n"
           "H=$(sub --gpus 1 --work 10 --name H -- $CK $D 8 0.5); until_ $H RUNNING; X scontrol requeuehold $H\n"
           "wait $P; echo serve-rc=$?; cat $D/serve.log\n"
           "echo runs: $(runs $R) $(runs $E) $(runs $H); echo ids: $R $E $H\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, 1);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 140);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "serve-rc=0");
  CHECK_CONTAINS(out, "released outside the controller before it was placed: left to the manager");
  CHECK_CONTAINS(out, "checkpointed on its own (exit 75): requeued");
  CHECK_CONTAINS(out, "held outside the controller");
  CHECK_CONTAINS(out, "2 jobs seen, 2 completed, 0 failed, 0 cancelled, 0 not ended");
  CHECK_CONTAINS(out, "runs: 1 2 2");
}

/* The journal from the command line: a damaged one is refused before anything is done (file, line, and the
 * running jobs, here unknown: no Slurm answers), one controller per journal (a second is refused), and a refused
 * start (a wrong policy) leaves no journal behind. No Slurm needed. */
TEST_T(live_journal_damage_lock_and_refused_start, 30) {
  if (access("/usr/bin/flock", X_OK)) shoal_test_skip("no flock command (util-linux)");
  char cmd[2048], j[64];
  snprintf(j, sizeof j, "/tmp/shoal-journal-%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "S=%s; J=%s; : > $J.conf; export SLURM_CONF=$J.conf\n" /* (an empty one: never a real Slurm here) */
           "printf 'epoch 1000.000\\nstart 7 1.0 0:1\\n' > $J\n"
           "$S sched serve --journal $J --max-time 1 --tick 0.1 2>&1 | sed 's/^/damaged: /'\n"
           "rm -f $J; flock $J sleep 3 & F=$!; sleep 0.3\n"
           "$S sched serve --journal $J --max-time 1 --tick 0.1 2>&1 | sed 's/^/locked: /'; wait $F; rm -f $J\n"
           "$S sched serve --journal $J --policy nosuch 2>&1 | sed 's/^/policy: /'\n"
           "[ -e $J ] && echo journal-left; rm -f $J $J.conf\n",
           shoal_test_cli(), j);
  shoal_test_run_cmd(cmd, out, sizeof out, 25);
  char want[160];
  snprintf(want, sizeof want, "damaged: shoal sched serve: journal %s:1: not a checksummed record", j);
  CHECK_CONTAINS(out, want);
  CHECK_CONTAINS(out, "the running jobs it can no longer vouch for: unknown: the manager does not answer");
  CHECK_CONTAINS(out, "start with --recover");
  CHECK_CONTAINS(out, "locked: shoal sched serve: journal");
  CHECK_CONTAINS(out, "in use by another controller");
  CHECK_CONTAINS(out, "policy: shoal sched serve: policy 'nosuch': no such policy");
  CHECK_MSG(strstr(out, "journal-left") == NULL, "a refused start left a journal: %s", out);
}

/* A stop request that meets a task's end: Slurm signals every process of a step together (a stop request, and
 * srun's --kill-on-bad-exit TERM once the first task ends 75), and shoal train, still starting, ends at once with 75.
 * The task script (experiments/live-slurm/trainjob.sh, with a stand-in for shoal train that ends 75 at TERM) and
 * `shoal submit`'s batch script (run with stand-ins for srun and the Slurm commands, srun ending 75 as the script
 * gets USR1) must each end 75, 10 times of 10: the shells' `wait` ended by a trap lost the status (143, 138) in
 * about half of them. No Slurm needed. */
TEST_T(live_slurm_scripts_keep_the_status_of_a_task_signalled_at_its_end, 90) {
  char d[] = "/tmp/shoal-sigstatus-XXXXXX", path[4200], cmd[4096];
  CHECK(mkdtemp(d) != NULL);
  snprintf(cmd, sizeof cmd,
           "D=%s; mkdir -p $D/bin\n"
           "cat > $D/bin/sbatch <<'EOF'\n#!/bin/sh\n"
           "while [ $# -gt 0 ]; do [ \"$1\" = --wrap ] && printf %%s \"$2\" > %s/script; shift; done; echo 7\nEOF\n"
           "cat > $D/bin/srun <<'EOF'\n#!/bin/bash\n"
           "trap 'kill $! 2>/dev/null; exit 75' TERM; echo $$ > $0.tmp; mv $0.tmp $0.pid; sleep 20 & wait\nEOF\n"
           "printf '#!/bin/sh\\necho h0\\n' > $D/bin/scontrol; printf '#!/bin/sh\\necho shoal:\\n' > $D/bin/squeue\n"
           "printf '#!/bin/sh\\nexit 0\\n' > $D/bin/scancel; chmod +x $D/bin/*\n",
           d, d);
  shoal_test_run_cmd(cmd, out, sizeof out, 20);
  snprintf(path, sizeof path, "%s/bin:%s", d, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  setenv("PATH", path, 1);
  shoal_live_manager_t m;
  CHECK(shoal__live_slurm_create(&m) == 0);
  const char *argv[] = {"true"};
  shoal_live_submit_t req = {.name = "sig", .comment = "shoal:", .argv = argv, .argc = 1};
  long id = 0;
  int rc = m.ops->submit(m.impl, &req, &id);
  CHECK_MSG(rc == 0 && id == 7, "submit through the stand-in sbatch: %d (%s)", rc, shoal_last_error());
  m.ops->destroy(m.impl);
  snprintf(cmd, sizeof cmd,
           "D=%s\n"
           "cat > $D/train <<'EOF'\n#!/bin/bash\ntrap 'kill $! 2>/dev/null; exit 75' TERM; : > $0.ready; sleep 20 & wait\nEOF\n"
           "chmod +x $D/train\n"
           "for i in 1 2 3 4 5 6 7 8 9 10; do rm -f $D/train.ready\n"
           "  SLURM_JOB_ID=$i setsid bash experiments/live-slurm/trainjob.sh $D/train $D $D mlp 1 1 & q=$!\n"
           "  j=0; while [ ! -e $D/train.ready ] && [ $j -lt 200 ]; do sleep 0.05; j=$((j+1)); done\n"
           "  kill -TERM -$q; wait $q; echo \"task $?\"\n"
           "  rm -f $D/bin/srun.pid\n"
           "  TMPDIR=$D SLURM_JOB_ID=$i SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=h0 bash -c \"$(cat $D/script)\" & q=$!\n"
           "  j=0; while [ ! -e $D/bin/srun.pid ] && [ $j -lt 200 ]; do sleep 0.05; j=$((j+1)); done\n"
           "  kill -TERM $(cat $D/bin/srun.pid); kill -USR1 $q; wait $q; echo \"batch $?\"\n"
           "done\n",
           d);
  shoal_test_run_cmd(cmd, out, sizeof out, 70);
  snprintf(cmd, sizeof cmd, "rm -rf %s", d);
  if (system(cmd)) { /* (a temporary directory left behind) */
  }
  int task = 0, batch = 0;
  for (const char *q = out; (q = strstr(q, "task 75")); q++) task++;
  for (const char *q = out; (q = strstr(q, "batch 75")); q++) batch++;
  CHECK_MSG(task == 10 && batch == 10, "task script %d of 10, batch script %d of 10 ended 75: %s", task, batch, out);
}

/* A start that scontrol fails (injected once by a wrapper ahead of it on PATH) is retried at the next tick
 * on the policy's placement; the job then runs once and completes. */
TEST_T(live_slurm_failed_start_is_retried, 120) {
  char cmd[6144], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sf", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           "mkdir -p $D/bin; printf '#!/bin/sh\\nif [ \"$*\" = -Q ]; then in=$(cat)\\n"
           "  case \"$in\" in *release*) [ -e %s/failed ] || { touch %s/failed; echo injected >&2; exit 1; };; esac\\n"
           "  printf \"%%%%s\\\\n\" \"$in\" | exec /usr/bin/scontrol -Q; fi\\nexec /usr/bin/scontrol \"$@\"\\n' "
           "> $D/bin/scontrol; chmod +x $D/bin/scontrol\n"
           "A=$(sub --gpus 1 --work 10 --name A -- $CK $D 2 0.5)\n"
           "PATH=$D/bin:$PATH timeout 60 $S sched serve --testbed $N --policy fifo --journal $D/journal --tick 0.5 "
           "--max-time 40 --until-done 1 > $D/serve.log 2>&1; echo serve-rc=$?; cat $D/serve.log\n"
           "echo runs: $(runs $A); ls $D/failed >/dev/null && echo injected-once\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, 1, dir, dir);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 110);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "injected-once");
  CHECK_CONTAINS(out, "failed (scontrol -Q: exit 1: injected); it stays held and is retried");
  CHECK_CONTAINS(out, "serve-rc=0");
  CHECK_CONTAINS(out, "1 jobs seen, 1 completed, 0 failed");
  CHECK_CONTAINS(out, "runs: 1");
}

/* The Slurm manager's resize of node list p (in job id's testbed N, a child process entering its fabric as
 * `shoal submit --testbed` does): the manager's status, and its error message in msg. */
/* The Slurm manager's start ('s') or resize ('r') of job id on p, called from a child inside the testbed's fabric
 * namespace (where slurmctld answers): 0 or its negative status, its message in msg. */
static int manager_in_testbed(const char *name, char verb, long id, const shoal_live_place_t *p, char *msg, size_t cap) {
  int fds[2];
  if (pipe(fds)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char path[160];
    snprintf(path, sizeof path, "/run/netns/%s-net", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 127;
    snprintf(path, sizeof path, "/run/shoal-testbed/%s/slurm/slurm.conf", name);
    setenv("SLURM_CONF", path, 1);
    shoal_live_manager_t m;
    if (fd >= 0 && setns(fd, CLONE_NEWNET) == 0 && shoal__live_slurm_create(&m) == 0) {
      rc = verb == 's' ? m.ops->start(m.impl, id, p) : m.ops->resize(m.impl, id, p);
      shoal__live_manager_destroy(&m);
    }
    const char *e = rc == 127 ? "could not enter the testbed" : shoal_last_error();
    if (write(fds[1], e, strlen(e)) < 0) rc = 127;
    _exit(rc < 0 ? -rc : rc);
  }
  close(fds[1]);
  ssize_t n = pid > 0 ? read(fds[0], msg, cap - 1) : -1;
  msg[n > 0 ? n : 0] = 0;
  close(fds[0]);
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return -WEXITSTATUS(st);
}

/* A grow onto nodes no partition holds together (Slurm runs a job inside one partition) is refused before
 * the job is touched: it goes on running, not requeued (its restart count stays 0). */
TEST_T(live_slurm_grow_without_a_common_partition_leaves_the_job_running, 120) {
  char cmd[4096], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/ckjob.sh", "sg", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH
           "set -- $(X sinfo -h -N -o %%N | sort -u); echo nodes $1 $2\n"
           "for p in $(X sinfo -h -o %%R); do X scontrol delete PartitionName=$p; done\n"
           "X scontrol create PartitionName=pa Nodes=$1 State=UP Default=YES\n"
           "X scontrol create PartitionName=pb Nodes=$2 State=UP\n"
           "A=$(sub --partition pa --gpus 1 -- $CK $D 60 0.5); echo job $A\n"
           "X scontrol release $A; state $A RUNNING && echo running\n",
           shoal_test_cli(), name, dir, 1);
  shoal_test_run_cmd(cmd, out, sizeof out, 80);
  char n0[64] = "", n1[64] = "", msg[1024] = "";
  long id = 0;
  const char *nl = strstr(out, "nodes "), *jl = strstr(out, "job ");
  int ready = nl && jl && sscanf(nl, "nodes %63s %63s", n0, n1) == 2 && sscanf(jl, "job %ld", &id) == 1 &&
              strstr(out, "running") != NULL;
  int rc = 0;
  if (ready) {
    char nodes[2][SHOAL_LIVE_NAME];
    int gpus[2] = {1, 1};
    snprintf(nodes[0], sizeof nodes[0], "%s", n0);
    snprintf(nodes[1], sizeof nodes[1], "%s", n1);
    shoal_live_place_t p = {.n = 2, .node = nodes, .gpus = gpus};
    rc = manager_in_testbed(name, 'r', id, &p, msg, sizeof msg);
  }
  char after[4096];
  snprintf(cmd, sizeof cmd,
           "S=$(realpath %s); N=%s; D=%s\n"
           "X() { timeout 30 $S testbed exec --name $N h0 -- \"$@\"; }\n"
           "X squeue -h -t all -j %ld -o 'state=%%T'; X scontrol show job %ld | grep -o 'Restarts=[0-9]*'\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, id, id);
  shoal_test_run_cmd(cmd, after, sizeof after, 40);
  CHECK_MSG(ready, "the job did not run on one of two partitions: %s", out);
  CHECK_MSG(rc == SHOAL_ERR_UNSUPPORTED, "resize: %d (%s)", rc, msg);
  CHECK_CONTAINS(msg, "no partition holds all of");
  CHECK_CONTAINS(after, "state=RUNNING");
  CHECK_CONTAINS(after, "Restarts=0");
}

/* From a test script's output: the testbed's two nodes ("nodes N0 N1") and the first k job ids ("job ID", in
 * order); 1 when all were read. */
static int read_nodes_and_jobs(const char *text, char n[2][SHOAL_LIVE_NAME], int k, long *id) {
  const char *nl = strstr(text, "nodes "), *jl = text;
  if (!nl || sscanf(nl, "nodes %63s %63s", n[0], n[1]) != 2) return 0;
  for (int i = 0; i < k; i++, jl += 4)
    if (!(jl = strstr(jl, "job ")) || sscanf(jl, "job %ld", &id[i]) != 1) return 0;
  return 1;
}

/* A parameter-server job (`shoal submit --servers`) started by the Slurm manager on a plan's placement runs one
 * task per worker and per server where the plan put them: `shoal train --sync ps` (experiments/live-slurm/trainjob.sh)
 * with 2 workers, one on each node, and its server on the second node (not the first, where one task per node
 * would put rank 2 if it ran at all). A first job runs to its end (exit 0); a second, asked to checkpoint mid-run
 * as the controller does, ends with the requeue status 75 (every task: servers too, or the step's status would
 * say finished), its server's shard written, and runs again on the same layout after its requeue. A third, released
 * to Slurm's own scheduling (no layout), runs its workers one per node and its server on the first. */
TEST_T(live_slurm_ps_job_runs_its_servers_where_placed, 120) {
  char cmd[4096], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/trainjob.sh", "sp", name, sizeof name, dir, sizeof dir);
#define PS_SH "S=$(realpath %s); N=%s; D=%s\nX() { timeout 30 $S testbed exec --name $N h0 -- \"$@\"; }\n"   \
              "ended() { i=0; while [ $i -lt 300 ]; do case $(X squeue -h -t all -j $1 -o %%T) in COMPLETED|FAILED|" \
              "CANCELLED|TIMEOUT|NODE_FAIL) return 0;; esac; sleep 0.2; i=$((i+1)); done; return 1; }\n"
  snprintf(cmd, sizeof cmd,
           TESTBED_SH TRAINJOB_SH
           "A=$(sub --gpus 2 --servers 1 --model mlp --name A -- $T $S $D/data $D mlp 1 1024); echo job $A\n"
           "B=$(sub --gpus 2 --servers 1 --model mlp --name B -- $T $S $D/data $D mlp 40 4096); echo job $B\n"
           "C=$(sub --gpus 2 --servers 1 --model mlp --name C -- $T $S $D/data $D mlp 1 1024); echo job $C\n"
           "set -- $(X sinfo -h -N -o %%N | sort -u); echo nodes $1 $2\n"
           "X squeue -h -j $A -o 'comment %%k'\n",
           shoal_test_cli(), name, dir, 1);
  shoal_test_run_cmd(cmd, out, sizeof out, 80);
  char n[2][SHOAL_LIVE_NAME] = {"", ""}, msg[1024] = "", a_msg[1024] = "";
  long ids[3];
  int ready = read_nodes_and_jobs(out, n, 3, ids);
  CHECK_MSG(ready, "no testbed, nodes or jobs: %s", out);
  long a = ids[0], b = ids[1], c = ids[2];
  CHECK_CONTAINS(out, ":ps=1");
  int gpus[2] = {1, 1}, servers[2] = {0, 1}, rca = -1, rcb = -1;
  shoal_live_place_t p = {.n = 2, .node = n, .gpus = gpus, .servers = servers};
  if (ready) rca = manager_in_testbed(name, 's', a, &p, a_msg, sizeof a_msg);
  if (ready) rcb = manager_in_testbed(name, 's', b, &p, msg, sizeof msg);
  snprintf(cmd, sizeof cmd,
           PS_SH
           "ended %ld; X scontrol show job %ld | grep -o 'ExitCode=[0-9:]*' | sed 's/^/A /'; cat $D/%ld.log\n"
           "i=0; while [ $i -lt 300 ] && [ $(cat $D/%ld.log 2>/dev/null | grep -c '^task') -lt 3 ]; do sleep 0.2; "
           "i=$((i+1)); done; sleep 2\n"
           "X scancel --signal=USR1 --batch %ld; ended %ld; X scontrol show job %ld | grep -o 'ExitCode=[0-9:]*' | "
           "sed 's/^/B /'; ls $D/%ld.ck.server0 && echo B-server-shard\n"
           "X scontrol requeuehold %ld\n",
           shoal_test_cli(), name, dir, a, a, a, b, b, b, b, b, b);
  char mid[1 << 14] = "";
  if (ready) shoal_test_run_cmd(cmd, mid, sizeof mid, 80);
  /* the requeued run: held again, then started on the same layout */
  int rcb2 = -1;
  for (int i = 0; ready && i < 100 && rcb2; i++) {
    rcb2 = manager_in_testbed(name, 's', b, &p, msg, sizeof msg);
    if (rcb2) nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL); /* (still ending its first run) */
  }
  snprintf(cmd, sizeof cmd,
           PS_SH
           "i=0; while [ $i -lt 300 ] && [ $(cat $D/%ld.log 2>/dev/null | grep -c '^task . .* 1$') -lt 3 ]; do "
           "sleep 0.2; i=$((i+1)); done; cat $D/%ld.log | sed 's/^/B: /'\n"
           "X scancel %ld; ended %ld\n"
           "X scontrol update JobId=%ld NumNodes=2-2 NumTasks=2 StartTime=now; X scontrol release %ld; ended %ld\n"
           "X scontrol show job %ld | grep -o 'ExitCode=[0-9:]*' | sed 's/^/C /'; cat $D/%ld.log | sed 's/^/C: /'\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, b, b, b, b, c, c, c, c, c);
  char end[1 << 14] = "";
  shoal_test_run_cmd(cmd, end, sizeof end, 80);
  CHECK_MSG(rca == 0 && rcb == 0, "start: %d (%s) %d (%s)", rca, a_msg, rcb, msg);
  char want[160];
  /* job A: both workers, one per node, its server on the second node, and its end */
  CHECK_CONTAINS(mid, "A ExitCode=0:0");
  snprintf(want, sizeof want, "task 0 %s worker 0", n[0]);
  CHECK_MSG(strstr(mid, want) != NULL, "no '%s': %s", want, mid);
  snprintf(want, sizeof want, "task 1 %s worker 0", n[1]);
  CHECK_MSG(strstr(mid, want) != NULL, "no '%s': %s", want, mid);
  snprintf(want, sizeof want, "task 2 %s server 0", n[1]);
  CHECK_MSG(strstr(mid, want) != NULL, "no '%s': %s", want, mid);
  CHECK_CONTAINS(mid, "exit 0 ");
  /* job B: stopped with the requeue status, the server's shard written, and started again on its layout */
  CHECK_CONTAINS(mid, "B ExitCode=75:0");
  CHECK_CONTAINS(mid, "B-server-shard");
  CHECK_MSG(rcb2 == 0, "restart after the requeue: %d (%s)", rcb2, msg);
  snprintf(want, sizeof want, "B: task 2 %s server 1", n[1]);
  CHECK_MSG(strstr(end, want) != NULL, "no '%s': %s", want, end);
  /* job C, started by Slurm itself (no layout): one worker per node, the server on the first */
  CHECK_CONTAINS(end, "C ExitCode=0:0");
  snprintf(want, sizeof want, "C: task 2 %s server 0", n[0]);
  CHECK_MSG(strstr(end, want) != NULL, "no '%s': %s", want, end);
}

/* A job submitted --leavable (its tasks `shoal train --on-failure shrink --leavable`) shrinks in place: the
 * Slurm manager's resize to its first node asks the task on the second to leave after its iteration, waits for
 * it, and gives the node back; the job goes on on one node in the same run (no requeue), and a checkpoint
 * request later ends it with the requeue status 75 (the leaver's exit did not end the step). A job that was not
 * submitted --leavable is refused (SHOAL_ERR_UNSUPPORTED, the controller then shrinks it by a restart) and keeps
 * both nodes. */
TEST_T(live_slurm_leavable_job_shrinks_in_place_at_an_iteration_boundary, 120) {
  char cmd[4096], name[32], dir[96];
  slurm_test_begin("experiments/live-slurm/trainjob.sh", "sk", name, sizeof name, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           TESTBED_SH TRAINJOB_SH
           "A=$(sub --gpus 2 --min 1 --max 2 --leavable --model mlp --name A -- $T $S $D/data $D mlp 200 4096 "
           "--on-failure shrink --grow-every 0 --leavable); echo job $A\n"
           "B=$(sub --gpus 2 --min 1 --max 2 --model mlp --name B -- $T $S $D/data $D mlp 200 4096); echo job $B\n"
           "set -- $(X sinfo -h -N -o %%N | sort -u); echo nodes $1 $2\n"
           "X squeue -h -j $A -o 'comment %%k'\n",
           shoal_test_cli(), name, dir, 2);
  shoal_test_run_cmd(cmd, out, sizeof out, 80);
  char n[2][SHOAL_LIVE_NAME] = {"", ""}, msg[1024] = "", bmsg[1024] = "";
  long ids[2];
  int ready = read_nodes_and_jobs(out, n, 2, ids);
  CHECK_MSG(ready, "no testbed, nodes or jobs: %s", out);
  long a = ids[0], b = ids[1];
  CHECK_CONTAINS(out, ":leave=1");
  int gpus[2] = {1, 1}, rca = -1, rcb = -1, rsa = -1, rsb = -1;
  shoal_live_place_t both = {.n = 2, .node = n, .gpus = gpus}, first = {.n = 1, .node = n, .gpus = gpus};
  if (ready) rca = manager_in_testbed(name, 's', a, &both, msg, sizeof msg);
  if (ready) rcb = manager_in_testbed(name, 's', b, &both, bmsg, sizeof bmsg);
  CHECK_MSG(rca == 0 && rcb == 0, "start: %d (%s) %d (%s)", rca, msg, rcb, bmsg);
  /* both jobs train on both nodes (each task has written its line, then some iterations) */
  snprintf(cmd, sizeof cmd,
           PS_SH
           "for j in %ld %ld; do i=0; while [ $i -lt 300 ] && [ $(grep -c '^task' $D/$j.log 2>/dev/null) -lt 2 ]; do "
           "sleep 0.2; i=$((i+1)); done; done; sleep 3; echo trained\n",
           shoal_test_cli(), name, dir, a, b);
  char mid[1 << 14] = "";
  if (rca == 0 && rcb == 0) shoal_test_run_cmd(cmd, mid, sizeof mid, 80);
  if (strstr(mid, "trained")) {
    rsa = manager_in_testbed(name, 'r', a, &first, msg, sizeof msg);
    rsb = manager_in_testbed(name, 'r', b, &first, bmsg, sizeof bmsg);
  }
  snprintf(cmd, sizeof cmd,
           PS_SH
           "X squeue -h -t all -j %ld -o 'A %%T on %%N'; X squeue -h -t all -j %ld -o 'B %%T on %%N'; sleep 2\n"
           "X squeue -h -t all -j %ld -o 'A later %%T on %%N'\n"
           "X scancel --signal=USR1 --batch %ld; ended %ld; X scontrol show job %ld | grep -o 'ExitCode=[0-9:]*' | "
           "sed 's/^/A /'; X scontrol show job %ld | grep -o 'Restarts=[0-9]*' | sed 's/^/A /'; cat $D/%ld.log\n"
           "X scancel %ld; ended %ld\n"
           TESTBED_SH_END,
           shoal_test_cli(), name, dir, a, b, a, a, a, a, a, a, b, b);
  char end[1 << 14] = "";
  shoal_test_run_cmd(cmd, end, sizeof end, 80);
  CHECK_MSG(rsa == 0, "shrink of the leavable job: %d (%s); %s", rsa, msg, mid);
  char want[160];
  snprintf(want, sizeof want, "A RUNNING on %s\n", n[0]);
  CHECK_MSG(strstr(end, want) != NULL, "no '%s': %s", want, end);
  snprintf(want, sizeof want, "A later RUNNING on %s\n", n[0]);
  CHECK_MSG(strstr(end, want) != NULL, "no '%s': %s", want, end);
  CHECK_CONTAINS(end, "A ExitCode=75:0");
  CHECK_CONTAINS(end, "A Restarts=0");
  CHECK_CONTAINS(end, "exit 75 ");
  CHECK_MSG(rsb == SHOAL_ERR_UNSUPPORTED, "shrink of the other job: %d (%s)", rsb, bmsg);
  CHECK_CONTAINS(bmsg, "do not leave on request");
  CHECK_CONTAINS(end, "B RUNNING on");
  snprintf(want, sizeof want, "B RUNNING on %s\n", n[0]);
  CHECK_MSG(strstr(end, want) == NULL, "job B lost its second node: %s", end);
}
