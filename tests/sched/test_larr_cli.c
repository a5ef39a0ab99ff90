/* The CLI faces of issue 5: `shoal sched run` and the policies inside
 * `shoal sim` (the adapter behind the policy interface, with --check). */
#include "../runner.h"

TEST_T(larr_cli_sched_run_csv, 60) {
  char out[16384], cmd[512];
  snprintf(cmd, sizeof cmd, "%s sched run --machines 6 --jobs 30 --window 10 --csv --lb-time 5", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "tag,policy,machines");
  const char *pols[] = {",larr,", ",greedy,", ",oasis,", ",fifo,", ",drf,", ",optimus,", ",tiresias,"};
  for (int i = 0; i < 7; i++) CHECK_CONTAINS(out, pols[i]);
  snprintf(cmd, sizeof cmd, "%s sched run --machines 4 --jobs 20 --window 5 --policy larr --replan 0 --no-lb", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "larr ");
  snprintf(cmd, sizeof cmd, "%s sched run --machines 6 --bogus 1", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "unknown option --bogus");
  snprintf(cmd, sizeof cmd, "%s sched run --policy larr,nope", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "unknown PS policy 'nope'");
}

TEST_T(larr_cli_sim_policies_check_invariants, 90) {
  char out[16384], cmd[512];
  snprintf(cmd, sizeof cmd,
           "%s sim --synthetic 60 --machines 4 --ps-fraction 1 --policy larr,oasis,greedy,larr:slot=900:theta=16,larr:replan=0 --check "
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
