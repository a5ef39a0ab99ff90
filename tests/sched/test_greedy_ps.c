/* Exact single-job greedy (spec §5) against GLPK's MIP optimum. */
#include "../runner.h"
#include "core/clock.h"
#include "ps_testutil.h"
#include "sched/planners/greedy.h"
#include "sched/planners/larr.h"
#include "sched/planners/lp.h"
#include "sched/planners/oasis.h"

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

/* The price as spec §4.2 writes it, computed here on its own: theta^u with
 * u = 1 - res/cap, times the time factor, times demand / cap. */
static double ref_unit_cost(const shoal__ps_cluster_t *c, int t, int h, int s, double theta, const double *d) {
  double cost = 0;
  const double *cap = shoal__ps_cap(c, h), *res = shoal__ps_res(c, t, h);
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (d[r] > 0 && cap[r] > 0) cost += pow(theta, 1.0 - res[r] / cap[r]) * (1.0 + 1e-3 * (t - s)) * d[r] / cap[r];
  return cost;
}

/* Walking slots with one memo gives, slot by slot, what a fresh slot_best
 * gives, and its co-located choice is the machine the plain scan over all
 * machines (the most workers, ties to the cheaper by more than 1e-9, the
 * first of equal ones) picks; prices have the same bits as the formula. */
TEST(larr_slot_best_memo_matches_fresh_scan) {
  enum { H = 7, T = 40 };
  double cap[H * SHOAL_PS_NRES];
  for (int h = 0; h < H; h++) ps_set_cap(cap, h, h % 3 ? 4 : 8, 32, 128, h == 2 ? 0 : 20);
  shoal_rng_t g;
  shoal_rng_seed(&g, 11);
  long coloc = 0, dist = 0, empty = 0;
  for (int inst = 0; inst < 60; inst++) {
    shoal__ps_cluster_t c;
    CHECK_OK(shoal__ps_cluster_init(&c, H, cap));
    /* book runs of slots: a job placed on the same machines for several
     * consecutive slots, as committed plans are (slots repeat) */
    for (int b = 0; b < 80; b++) {
      shoal__ps_job_t o;
      ps_tiny_job(&g, 100 + b, 0, &o);
      int t0 = (int)shoal_rng_below(&g, T), len = 1 + (int)shoal_rng_below(&g, 12);
      shoal__ps_sched_t S;
      shoal__ps_sched_init(&S, t0);
      int h = (int)shoal_rng_below(&g, H), w = 1 + (int)shoal_rng_below(&g, 4);
      for (int t = t0; t < t0 + len && t < T; t++) CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&S, t), h, w, shoal__ps_count(o.kappa, w)));
      if (shoal__ps_sched_check(&c, &o, &S, 0) == 0) CHECK_OK(shoal__ps_commit(&c, &o, &S));
      shoal__ps_sched_free(&S);
    }
    /* and a few slots with no GPU left anywhere (before the first query) */
    CHECK_OK(shoal__ps_cluster_ensure(&c, T));
    for (int t = T - 8; t < T - 4; t++)
      for (int h = 0; h < H; h++) c.res[((size_t)t * H + h) * SHOAL_PS_NRES + SHOAL_PS_GPU] = 0;
    shoal__ps_job_t j;
    ps_tiny_job(&g, inst, 0, &j);
    j.wmax = 1 + (int)shoal_rng_below(&g, 12); /* more than a machine holds: the distributed DP too */
    if (inst % 5 == 0) j.kappa = 0;            /* no PSs */
    double theta = inst % 2 ? 0.125 : 16;
    int s0 = (int)shoal_rng_below(&g, 4);
    shoal__ps_best_memo_t m;
    CHECK_OK(shoal__ps_best_memo_init(&m, &c, theta));
    shoal__ps_slot_t a = {0}, b = {0};
    for (int t = s0; t < T + 3; t++) {
      CHECK_OK(shoal__ps_slot_best_memo(&c, &j, t, s0, &m, &a));
      CHECK_OK(shoal__ps_slot_best(&c, &j, t, s0, theta, &b));
      CHECK_EQ(a.n, b.n);
      for (int e = 0; e < a.n && e < b.n; e++) {
        CHECK_EQ(a.pl[e].h, b.pl[e].h);
        CHECK_EQ(a.pl[e].w, b.pl[e].w);
        CHECK_EQ(a.pl[e].p, b.pl[e].p);
      }
      if (!shoal__ps_slot_fits_worker(&c, &j, t)) CHECK_EQ(a.n, 0); /* no room for one worker: nothing */
      /* the plain scan */
      int bh = -1, bw = 0;
      double bcost = 0;
      for (int h = 0; h < H; h++) {
        int w = shoal__ps_max_coloc(&j, shoal__ps_res(&c, t, h));
        CHECK(ref_unit_cost(&c, t, h, s0, theta, j.dw) == shoal__ps_unit_cost(&c, t, h, s0, theta, j.dw));
        CHECK(ref_unit_cost(&c, t, h, s0, theta, j.dp) == shoal__ps_unit_cost(&c, t, h, s0, theta, j.dp));
        if (w < bw || w == 0) continue;
        double cost = ref_unit_cost(&c, t, h, s0, theta, j.dw) * w;
        int np = shoal__ps_count(j.kappa, w);
        if (np) cost += ref_unit_cost(&c, t, h, s0, theta, j.dp) * np;
        if (w > bw || cost < bcost - 1e-9) bh = h, bw = w, bcost = cost;
      }
      if (a.n == 1 && a.pl[0].w == bw) {
        CHECK_EQ(a.pl[0].h, bh);
        coloc++;
      } else if (a.n) {
        dist++;
      } else {
        empty++;
      }
    }
    free(a.pl);
    free(b.pl);
    shoal__ps_best_memo_free(&m);
    shoal__ps_cluster_free(&c);
  }
  CHECK_MSG(coloc > 100 && dist > 10 && empty > 10, "co-located %ld, distributed %ld, empty %ld slots", coloc, dist, empty);
}

/* A rigid job (wmin = wmax = 2, one PS) on three 1-GPU machines, two of them taken in slots 0-1: each planner
 * (the greedy, larr's LP and rounding, OASiS's DP) leaves slots 0-1 empty and runs 2 workers or none in
 * every slot (a malleable plan, wmin 1, takes the third machine's one GPU in slot 0: the case is not
 * empty). */
TEST(planners_rigid_job_gets_all_its_workers_or_none) {
  double cap[3 * SHOAL_PS_NRES];
  for (int h = 0; h < 3; h++) ps_set_cap(cap, h, 1, 16, 64, 0);
  shoal__ps_cluster_t c;
  CHECK_OK(shoal__ps_cluster_init(&c, 3, cap));
  shoal__ps_job_t blk = {.id = 9, .work = 1, .dw = {[SHOAL_PS_GPU] = 1}, .wmax = 2, .rho_in = 1, .rho_ex = 1};
  shoal__ps_sched_t B;
  shoal__ps_sched_init(&B, 0);
  for (int t = 0; t < 2; t++) {
    CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&B, t), 0, 1, 0));
    CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&B, t), 1, 1, 0));
  }
  CHECK_OK(shoal__ps_commit(&c, &blk, &B));
  shoal__ps_job_t j = {.id = 1, .work = 30, .wmax = 2, .wmin = 2, .kappa = 0.5, .rho_in = 10, .rho_ex = 8};
  j.dw[SHOAL_PS_GPU] = 1, j.dw[SHOAL_PS_CPU] = 1, j.dw[SHOAL_PS_MEM] = 1;
  j.dp[SHOAL_PS_CPU] = 1, j.dp[SHOAL_PS_MEM] = 1;
  shoal__ps_larr_params_t lp;
  shoal__ps_larr_defaults(&lp);
  shoal__ps_oasis_params_t op;
  shoal__ps_oasis_defaults(&op);
  op.hmax = 50, op.T = 100;
  shoal__ps_oasis_est_t est;
  shoal__ps_oasis_est_init(&est);
  shoal__ps_oasis_observe(&est, &c, &j, &op);
  for (int wmin = 1; wmin <= 2; wmin++) {
    j.wmin = wmin;
    for (int planner = 0; planner < 3; planner++) {
      shoal__ps_sched_t S;
      double payoff;
      if (planner == 0) CHECK_OK(shoal__ps_greedy(&c, &j, 0, 50, 1, &S));
      if (planner == 1) CHECK_OK(shoal__ps_larr(&c, &j, 0, &lp, &S, NULL));
      if (planner == 2) CHECK_OK(shoal__ps_oasis(&c, &j, 0, &op, &est, &payoff, &S));
      CHECK_OK(shoal__ps_sched_check(&c, &j, &S, 1));
      int w0 = 0, p0;
      if (S.start == 0 && S.len > 0) shoal__ps_slot_totals(&S.slot[0], &w0, &p0);
      printf("  wmin %d planner %d: start %d len %d, slot 0 %d workers\n", wmin, planner, S.start, S.len, w0);
      if (wmin == 1 && planner == 0) CHECK_EQ(w0, 1); /* the malleable plan uses the crumb */
      for (int k = 0; k < S.len && wmin == 2; k++) {
        int W, P;
        shoal__ps_slot_totals(&S.slot[k], &W, &P);
        CHECK_MSG(W == 0 || W == 2, "planner %d slot %d: %d workers", planner, S.start + k, W);
        CHECK_MSG(S.start + k >= 2 || W == 0, "planner %d slot %d: %d workers where one GPU is free", planner,
                  S.start + k, W);
      }
      shoal__ps_sched_free(&S);
    }
  }
  shoal__ps_sched_free(&B);
  shoal__ps_cluster_free(&c);
}
