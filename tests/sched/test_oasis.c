/* oasis (spec §6): DP optimality on tiny cases, admission, feasibility. */
#include "../runner.h"
#include "ps_testutil.h"
#include "sched/planners/oasis.h"

TEST(larr_oasis_admits_on_empty_cluster_and_covers) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 8);
  shoal__ps_oasis_params_t p;
  shoal__ps_oasis_defaults(&p);
  p.T = 40;
  p.hmax = 40;
  for (int inst = 0; inst < 100; inst++) {
    shoal__ps_cluster_t c;
    CHECK_OK(ps_tiny_cluster(3, &c));
    shoal__ps_job_t j;
    ps_tiny_job(&g, inst, 0, &j);
    shoal__ps_oasis_est_t e;
    shoal__ps_oasis_est_init(&e);
    shoal__ps_oasis_observe(&e, &c, &j, &p);
    double mu;
    shoal__ps_sched_t S;
    CHECK_OK(shoal__ps_oasis(&c, &j, 0, &p, &e, &mu, &S));
    CHECK(mu > 0);
    CHECK_OK(shoal__ps_sched_check(&c, &j, &S, 1));
    shoal__ps_sched_free(&S);
    shoal__ps_cluster_free(&c);
  }
}

/* The DP's schedule costs no more than any schedule made of per-slot worker
 * counts (brute force over 3 slots) that ends no later and covers the work
 * at the no-locality rate. */
TEST(larr_oasis_dp_matches_brute_force) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 12);
  shoal__ps_oasis_params_t p;
  shoal__ps_oasis_defaults(&p);
  p.T = 3;
  p.hmax = 3;
  p.units = 64;
  int checked = 0;
  for (int inst = 0; inst < 60; inst++) {
    shoal__ps_cluster_t c;
    CHECK_OK(ps_tiny_cluster(2, &c));
    shoal__ps_job_t j;
    ps_tiny_job(&g, inst, 0, &j);
    /* work in whole worker-slots at rho_ex so unit rounding is exact */
    int ws = 2 + (int)shoal_rng_below(&g, 6);
    j.work = ws * j.rho_ex;
    p.units = ws;
    shoal__ps_oasis_est_t e;
    shoal__ps_oasis_est_init(&e);
    shoal__ps_oasis_observe(&e, &c, &j, &p);
    double mu;
    shoal__ps_sched_t S;
    int rc = shoal__ps_oasis(&c, &j, 0, &p, &e, &mu, &S);
    /* brute force: n0+n1+n2 >= ws, n_k <= wmax; payoff = T - end - sum cost */
    double best = -1e300;
    for (int n0 = 0; n0 <= j.wmax; n0++)
      for (int n1 = 0; n1 <= j.wmax; n1++)
        for (int n2 = 0; n2 <= j.wmax; n2++) {
          int n[3] = {n0, n1, n2};
          if (n0 + n1 + n2 != ws) continue;
          double cost = 0;
          int end = -1;
          for (int k = 0; k < 3; k++) {
            if (!n[k]) continue;
            cost += shoal__ps_oasis_deploy_cost(&c, &j, k, &p, &e, n[k], NULL);
            end = k;
          }
          double v = (double)p.T - end - cost;
          if (v > best) best = v;
        }
    if (best < -1e299 || !(best > -1e300)) {
      CHECK(rc == SHOAL_ERR_INFEASIBLE || rc == 0);
    } else {
      CHECK_OK(rc);
      CHECK_NEAR(mu, best, 1e-6 * (1 + fabs(best)));
      shoal__ps_sched_free(&S);
      checked++;
    }
    shoal__ps_cluster_free(&c);
  }
  CHECK(checked >= 40);
}
