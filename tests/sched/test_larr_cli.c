/* The CLI faces of the slot planners: `shoal sched run` (shoal sim with the
 * lower bound) and the planners inside `shoal sim` with --check; per-policy
 * parameter checking. */
#include <stdlib.h>
#include <string.h>

#include "../runner.h"

TEST_T(larr_cli_sched_run_csv, 90) {
  char out[32768], cmd[512];
  /* `shoal sched run` is shoal sim on the engine plus the lower bound: same columns as summary.json */
  snprintf(cmd, sizeof cmd,
           "%s sched run --synthetic 40 --load 2 --machines 3 --gpus-per-machine 4 --ps-fraction 0.5 --csv --lb-time 5 "
           "--lb-slot 600 --no-progress --policy larr,greedy,oasis,fifo,drf,optimus,tiresias",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 80);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "tag,policy,jobs,unfinished,jct_avg_s");
  CHECK_CONTAINS(out, "flow_slots,lb_slots,ratio_lb");
  const char *pols[] = {",larr,", ",greedy,", ",oasis,", ",fifo,", ",drf,", ",optimus,", ",tiresias,"};
  for (int i = 0; i < 7; i++) CHECK_CONTAINS(out, pols[i]);
  /* every policy's flow is at least the lower bound (ratio column >= 1) */
  for (const char *l = strchr(out, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
    int commas = 0;
    const char *c = l + 1, *ratio = NULL;
    for (; *c && *c != '\n'; c++)
      if (*c == ',' && ++commas == 24) ratio = c + 1;
    if (ratio) CHECK_MSG(atof(ratio) >= 1 - 1e-9, "ratio to LB below 1: %.*s", (int)(c - l - 1), l + 1);
  }
  snprintf(cmd, sizeof cmd, "%s sched run --synthetic 20 --machines 2 --policy larr:replan=0 --no-progress", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "larr:replan=0 ");
  CHECK_CONTAINS(out, "lower bound on total flow time");
  snprintf(cmd, sizeof cmd, "%s sched run --machines 6 --bogus 1", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "unknown option '--bogus'");
  snprintf(cmd, sizeof cmd, "%s sched run --policy larr,nope", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "unknown policy 'nope'");
  /* parameters are checked per policy: larr's keys are not greedy's */
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --machines 2 --policy greedy:trials=3 --no-progress", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "policy greedy: unknown parameter 'trials'");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --machines 2 --policy oasis:theta=1 --no-progress", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "policy oasis: unknown parameter 'theta'");
}

TEST_T(larr_cli_sim_policies_check_invariants, 90) {
  char out[16384], cmd[512];
  snprintf(cmd, sizeof cmd,
           "%s sim --synthetic 60 --machines 4 --ps-fraction 1 --policy larr,oasis,greedy,larr:slot=900:theta=16,larr:replan=0,greedy:replan=1,larr:estimate=3600 --check "
           "--no-progress",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 80);
  if (st != 0 && strstr(out, "not in this build")) shoal_test_skip("shoal sim not in this build");
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "larr ");
  CHECK_CONTAINS(out, "oasis ");
  CHECK_CONTAINS(out, "greedy ");
  CHECK_CONTAINS(out, "larr:slot=900:theta=16");
  CHECK_CONTAINS(out, "larr:replan=0");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --machines 4 --policy larr:slot=0 --no-progress", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "slot");
}

/* `shoal sched lp-bound` (no policy runs) gets a horizon long enough for
 * every job: FIFO is run to completion for it, so the bound equals the one
 * printed with --policy fifo. Before, the horizon was the arrival slots
 * alone and the solo greedy failed ("not coverable"). */
TEST_T(lp_bound_without_policy_has_a_horizon, 60) {
  char out[8192], cmd[768];
  const char *trace = "/tmp/shoal-test-lpbound.csv";
  FILE *f = fopen(trace, "w");
  CHECK(f != NULL);
  fprintf(f, "arrival,gpus,duration\n0,8,36000\n10,8,36000\n");
  fclose(f);
  double lb[2];
  for (int k = 0; k < 2; k++) {
    snprintf(cmd, sizeof cmd, "%s %s --trace %s --machines 1 --no-progress 2>&1", shoal_test_cli(),
             k ? "sim --lower-bound --policy fifo" : "sched lp-bound", trace);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
    CHECK_MSG(st == 0, "%s: exit %d: %s", cmd, st, out);
    const char *p = strstr(out, "lower bound on total flow time: ");
    CHECK_MSG(p != NULL, "%s", out);
    lb[k] = atof(p + strlen("lower bound on total flow time: "));
  }
  CHECK(lb[0] > 0);
  CHECK_NEAR(lb[0], lb[1], 1e-9);
  /* machine-readable: the bound alone is a row of its own */
  snprintf(cmd, sizeof cmd, "%s sched lp-bound --trace %s --machines 1 --no-progress --csv", shoal_test_cli(), trace);
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 30), 0);
  const char *row = strstr(out, "-,lower-bound,2,0,");
  CHECK_MSG(row != NULL, "no bound row: %s", out);
  if (row) {
    const char *v = row;
    for (int commas = 0; *v && commas < 23; v++) commas += *v == ',';
    CHECK_NEAR(atof(v), lb[0], 0.05); /* lb_slots, the bound the table prints to 0.1 */
  }
  /* a run cut by --horizon has no flow to compare with a bound over every job */
  snprintf(cmd, sizeof cmd, "%s sim --lower-bound --policy fifo --trace %s --machines 1 --horizon 20000 --no-progress 2>&1",
           shoal_test_cli(), trace);
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 30), 0);
  CHECK_CONTAINS(out, "flow n/a: 2 jobs unfinished at the horizon");
  CHECK_MSG(strstr(out, "ratio to LB") == NULL, "a ratio for a cut run: %s", out);
  snprintf(cmd, sizeof cmd, "%s sched lp-bound --synthetic 12 --machines 2 --no-progress 2>&1", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0, "%s: exit %d: %s", cmd, st, out);
  CHECK_CONTAINS(out, "lower bound on total flow time");
  remove(trace);
}

/* Every shoal sched / shoal sim subcommand takes -h / --help: usage on
 * stdout, exit 0 (decide-time took --help for an option needing a value). */
TEST_T(sched_subcommands_accept_help, 30) {
  const char *subs[] = {"sched", "sched run", "sched lp-bound", "sched decide-time", "sched serve", "sim"};
  const char *flags[] = {"--help", "-h"};
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 2; k++) {
      char cmd[256], out[16384];
      snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", shoal_test_cli(), subs[i], flags[k]);
      int st = shoal_test_run_cmd(cmd, out, sizeof out, 10);
      CHECK_MSG(st == 0, "%s: exit %d: %s", cmd, st, out);
      CHECK_MSG(strstr(out, "usage") || strstr(out, "Usage"), "%s: no usage:\n%s", cmd, out);
      CHECK_MSG(strstr(out, "needs a value") == NULL, "%s:\n%s", cmd, out);
    }
}

/* decide-time runs (under the sanitizers: the re-planning batch's plan of the new job leaked) and refuses a
 * machine list with an empty item (it printed only the header and exited 0). */
TEST_T(sched_decide_time_runs_and_checks_its_list, 120) {
  char cmd[256], out[16384];
  snprintf(cmd, sizeof cmd, "%s sched decide-time --machines 10 --jobs 2 2>&1", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 100);
  CHECK_MSG(st == 0, "%s: exit %d: %s", cmd, st, out);
  CHECK_CONTAINS(out, "larr:replan=0");
  CHECK_CONTAINS(out, "phases per arrival");
  const char *bad[] = {"''", "10,,20", ","};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s sched decide-time --machines %s 2>&1", shoal_test_cli(), bad[i]);
    CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0, "%s accepted: %s", bad[i], out);
    CHECK_CONTAINS(out, "expected machine counts separated by commas");
  }
}
