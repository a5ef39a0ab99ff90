/* GLPK layer: infeasible and failed solves are errors, never schedules. */
#include "../runner.h"
#include "ps_testutil.h"
#include "sched/planners/greedy.h"
#include "sched/planners/lp.h"

TEST(larr_lp_infeasible_is_an_error) {
  shoal__ps_cluster_t c;
  CHECK_OK(ps_tiny_cluster(2, &c));
  shoal_rng_t g;
  shoal_rng_seed(&g, 3);
  shoal__ps_job_t j;
  ps_tiny_job(&g, 4, 0, &j);
  j.work = 1000 * j.rho_in * j.wmax; /* needs ~1000 slots */
  int mach[2] = {0, 1};
  shoal__ps_lp_t *lp;
  CHECK_OK(shoal__ps_lp_build(&c, &j, 0, 5, mach, 2, 16, 0, 0, &lp));
  CHECK_EQ(shoal__ps_lp_solve(lp, 5), SHOAL_ERR_INFEASIBLE);
  CHECK_CONTAINS(shoal_last_error(), "no fractional schedule");
  int e = -1;
  CHECK_EQ(shoal__ps_lp_horizon(lp, 0, 5, &e, NULL), SHOAL_ERR_INFEASIBLE);
  CHECK_EQ(e, -1); /* output untouched on error */
  shoal__ps_lp_free(lp);
  /* merged single-solve LP: GLPK's presolver detects it (GLP_ENOPFS) */
  CHECK_OK(shoal__ps_lp_build(&c, &j, 0, 5, mach, 2, 16, 0, 1, &lp));
  CHECK_EQ(shoal__ps_lp_solve(lp, 5), SHOAL_ERR_INFEASIBLE);
  CHECK_CONTAINS(shoal_last_error(), "job 4");
  shoal__ps_lp_free(lp);
  /* bad arguments */
  CHECK_EQ(shoal__ps_lp_build(&c, &j, 3, 2, mach, 2, 16, 0, 0, &lp), SHOAL_ERR_INVALID);
  /* the MIP reports infeasibility the same way */
  double opt;
  CHECK_EQ(shoal__ps_mip_opt(&c, &j, 1, 4, 10, &opt, NULL), SHOAL_ERR_INFEASIBLE);
  shoal__ps_cluster_free(&c);
}

TEST(larr_lp_iteration_limit_is_solver_error) {
  /* a big LP (200 machines x 60 slots) allowed one simplex iteration */
  int H = 200;
  double *cap = malloc(sizeof(double) * H * SHOAL_PS_NRES);
  for (int h = 0; h < H; h++) ps_set_cap(cap, h, 8, 64, 256, 50);
  shoal__ps_cluster_t c;
  CHECK_OK(shoal__ps_cluster_init(&c, H, cap));
  free(cap);
  shoal_rng_t g;
  shoal_rng_seed(&g, 9);
  shoal__ps_job_t j;
  ps_tiny_job(&g, 1, 0, &j);
  j.wmax = 16;
  j.work = 40 * j.rho_ex * 16;
  int *mach = malloc(sizeof(int) * H);
  for (int h = 0; h < H; h++) mach[h] = h;
  shoal__ps_lp_t *lp;
  CHECK_OK(shoal__ps_lp_build(&c, &j, 0, 59, mach, H, 16, 1, 0, &lp));
  int rc = shoal__ps_lp_solve(lp, 59);
  CHECK_EQ(rc, SHOAL_ERR_SOLVER);
  CHECK_CONTAINS(shoal_last_error(), "iteration limit");
  shoal__ps_lp_free(lp);
  free(mach);
  shoal__ps_cluster_free(&c);
}

TEST(larr_lp_end_le_greedy_end) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 11);
  for (int inst = 0; inst < 200; inst++) {
    shoal__ps_cluster_t c;
    CHECK_OK(ps_tiny_cluster(3, &c));
    shoal__ps_job_t j;
    ps_tiny_job(&g, inst, 0, &j);
    j.work *= 3;
    shoal__ps_sched_t G;
    CHECK_OK(shoal__ps_greedy(&c, &j, 0, 40, 16, &G));
    int eg = shoal__ps_sched_end(&G), mach[3] = {0, 1, 2}, e;
    shoal__ps_lp_t *lp;
    CHECK_OK(shoal__ps_lp_build(&c, &j, 0, eg, mach, 3, 16, 0, 0, &lp));
    CHECK_OK(shoal__ps_lp_horizon(lp, 0, eg, &e, NULL));
    CHECK(e <= eg);
    /* the LP's work covers Q at its optimum */
    double w = 0;
    for (int t = 0; t <= e; t++)
      for (int k = 0; k < 3; k++) w += j.rho_in * shoal__ps_lp_val(lp, 'x', k, t) + j.rho_ex * shoal__ps_lp_val(lp, 'y', k, t);
    CHECK(w >= j.work * (1 - 1e-6));
    shoal__ps_lp_free(lp);
    shoal__ps_sched_free(&G);
    shoal__ps_cluster_free(&c);
  }
}
