/* `shoal launch --on-failure continue|restart` through the real CLI: a lost rank does not stop the
 * others, a restarted rank is a new process told to join (SHOAL_JOIN=1) and every rank holds the store
 * socket (SHOAL_STORE_FD), and the exit status says whether the job finished. */
#include <stdlib.h>
#include <sys/wait.h>

#include "../runner.h"

static char out[1 << 16];

static int launch(const char *opts, const char *script) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s launch -n 3 %s -- sh -c '%s' 2>&1", shoal_test_cli(), opts, script);
  return shoal_test_run_cmd(cmd, out, sizeof out, 60);
}

/* rank 1 kills itself; the others finish */
#define LOSE_RANK_1 "if [ \"$SHOAL_RANK\" = 1 ] && [ -z \"$SHOAL_JOIN\" ]; then kill -9 $$; fi; " \
                    "sleep 1; echo \"done join=${SHOAL_JOIN:-0} fd=${SHOAL_STORE_FD:-none}\""

TEST_T(launch_on_failure_stop_is_the_default, 60) {
  /* the others outlive any delay in seeing rank 1 die (a loaded machine), so there is someone to stop */
  int st = launch("", "if [ \"$SHOAL_RANK\" = 1 ]; then kill -9 $$; fi; sleep 30; echo done");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 128 + 9, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "rank 1 killed by signal 9");
  CHECK_CONTAINS(out, "stopped the other 2 ranks");
}

TEST_T(launch_on_failure_continue_lets_the_others_finish, 60) {
  int st = launch("--on-failure continue", LOSE_RANK_1);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "rank 1 killed by signal 9 (Killed); the other ranks go on (--on-failure continue)");
  CHECK_CONTAINS(out, "[0] done join=0 fd=");
  CHECK_CONTAINS(out, "[2] done join=0 fd=");
  CHECK(!strstr(out, "fd=none")); /* every rank may keep the door */
  CHECK_CONTAINS(out, "the job finished with 2 ranks exiting 0 after losing 1");
}

TEST_T(launch_on_failure_restart_starts_a_joining_rank, 60) {
  int st = launch("--on-failure restart --max-restarts 2", LOSE_RANK_1);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "restarted it (restart 1 of at most 2) as a new process that joins the running job");
  CHECK_CONTAINS(out, "[1] done join=1 fd=");
  CHECK_CONTAINS(out, "the job finished with 3 ranks exiting 0 after losing 1");
}

/* The job finishes while a restarted rank still waits to join (no grow will admit it): the launcher stops
 * it after its grace and the job succeeds, instead of waiting for its join to time out and restarting it
 * again. */
TEST_T(launch_on_failure_restart_job_done_stops_a_waiting_joiner, 60) {
  int st = launch("--on-failure restart",
                  "if [ \"$SHOAL_RANK\" = 1 ]; then if [ -z \"$SHOAL_JOIN\" ]; then kill -9 $$; fi; sleep 100; fi; "
                  "sleep 0.5; echo done");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "rank 1, restarted, was still running 10 s later (waiting to join): stopped it");
  CHECK_CONTAINS(out, "the job finished with 2 ranks exiting 0 after losing 1");
}

/* A rank stopped from outside (SIGSTOP) would keep the launcher waiting until --timeout while the others
 * shrink past it and finish: once they have ended it gets the grace, then is killed and counted as lost. */
TEST_T(launch_on_failure_continue_kills_a_rank_left_stopped, 60) {
  int st = launch("--on-failure continue --grace 1 --timeout 40",
                  "if [ \"$SHOAL_RANK\" = 1 ]; then kill -STOP $$; fi; sleep 0.3; echo done");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "rank 1 was stopped by signal 19 (Stopped (signal)) 1 s ago and is still stopped (every "
                      "other rank has ended): killing it");
  CHECK_CONTAINS(out, "the job finished with 2 ranks exiting 0 after losing 1 (rank 1 was stopped by signal 19");
  CHECK(!strstr(out, "--timeout"));
}

/* ... and while the others still run, once it stayed stopped past their deadline (SHOAL_TIMEOUT) and the
 * grace: with restart it is then started again */
TEST_T(launch_on_failure_restart_replaces_a_rank_stopped_past_the_deadline, 60) {
  setenv("SHOAL_TIMEOUT", "1", 1);
  int st = launch("--on-failure restart --grace 1 --timeout 40",
                  "if [ \"$SHOAL_RANK\" = 1 ] && [ -z \"$SHOAL_JOIN\" ]; then kill -STOP $$; fi; "
                  "sleep 4; echo \"done join=${SHOAL_JOIN:-0}\"");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "and is still stopped (past the ranks' deadline, SHOAL_TIMEOUT, and the grace): killing it");
  CHECK_CONTAINS(out, "[1] done join=1");
  CHECK_CONTAINS(out, "the job finished with 3 ranks exiting 0 after losing 1 (rank 1 was stopped by signal 19");
}

/* a rank that exits non-zero is a failure of the job even when the others may go on */
TEST_T(launch_on_failure_continue_reports_a_failing_rank, 60) {
  int st = launch("--on-failure continue", "if [ \"$SHOAL_RANK\" = 2 ]; then exit 3; fi; sleep 0.5");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "rank 2 exited with status 3; the other ranks go on");
  CHECK_CONTAINS(out, "a rank failed after losing rank 2 exited with status 3");
}

TEST_T(launch_on_failure_bad_mode, 30) {
  int st = launch("--on-failure sometimes", "true");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status 0x%x: %s", st, out);
  CHECK_CONTAINS(out, "--on-failure 'sometimes': expected stop, continue or restart");
}
