/* Exact single-job greedy (spec §5) against GLPK's MIP optimum. */
#include "../runner.h"
#include "core/clock.h"
#include "ps_testutil.h"
#include "sched/ps_greedy.h"
#include "sched/ps_lp.h"

TEST_T(larr_greedy_equals_mip_for_one_job, 120) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 5);
  int solved = 0, tried = 0;
  double t_start = shoal__now_s();
  /* bounded in wall time (sanitizers on a loaded machine): all 40 normally */
  for (int inst = 0; inst < 40 && shoal__now_s() - t_start < 80; inst++, tried++) {
    shoal__ps_cluster_t c;
    CHECK_OK(ps_tiny_cluster(2 + (int)shoal_rng_below(&g, 2), &c));
    shoal__ps_job_t j;
    ps_tiny_job(&g, 0, 2, &j);
    j.work *= 1 + 2 * shoal_rng_uniform(&g); /* longer than one slot sometimes */
    shoal__ps_sched_t S;
    CHECK_OK(shoal__ps_greedy(&c, &j, 0, 20, 16, &S));
    CHECK_OK(shoal__ps_sched_check(&c, &j, &S, 1));
    double flow_g = shoal__ps_sched_finish(&j, &S) - j.arrival + 1, opt;
    int rc = shoal__ps_mip_opt(&c, &j, 1, 12, 20, &opt, NULL);
    if (rc == SHOAL_ERR_SOLVER) continue; /* MIP time limit: no verdict */
    CHECK_OK(rc);
    CHECK_NEAR(flow_g, opt, 1e-6);
    solved++;
    shoal__ps_sched_free(&S);
    shoal__ps_cluster_free(&c);
  }
  CHECK_MSG(solved >= 10 && solved >= tried * 3 / 4, "%d of %d instances solved by the MIP", solved, tried);
}

TEST(larr_greedy_reports_uncoverable) {
  shoal__ps_cluster_t c;
  CHECK_OK(ps_tiny_cluster(2, &c));
  shoal_rng_t g;
  shoal_rng_seed(&g, 1);
  shoal__ps_job_t j;
  ps_tiny_job(&g, 7, 0, &j);
  j.work = 1e9;
  shoal__ps_sched_t S;
  CHECK_EQ(shoal__ps_greedy(&c, &j, 0, 5, 16, &S), SHOAL_ERR_INFEASIBLE);
  CHECK_CONTAINS(shoal_last_error(), "job 7");
  j.dw[SHOAL_PS_CPU] = 100; /* a worker fits nowhere */
  j.work = 1;
  CHECK_EQ(shoal__ps_greedy(&c, &j, 0, 5, 16, &S), SHOAL_ERR_INFEASIBLE);
  shoal__ps_cluster_free(&c);
}
