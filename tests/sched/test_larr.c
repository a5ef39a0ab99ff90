/* larr (spec §4): tiny instances against GLPK's exact MIP, rounding+repair on
 * thousands of random instances, and the lower bound. The planners run here
 * as pure libraries; their online runs inside the engine are tested in
 * tests/sim/test_sim_slotted.c. */
#include "../runner.h"
#include "core/clock.h"
#include "ps_testutil.h"
#include "sched/planners/greedy.h"
#include "sched/planners/larr.h"
#include "sched/planners/lower_bound.h"
#include "sched/planners/lp.h"
#include "sched/planners/oasis.h"

/* Preload a cluster with random committed usage in slots [0, T). */
static void preload(shoal_rng_t *g, shoal__ps_cluster_t *c, int T) {
  shoal__ps_cluster_ensure(c, T);
  for (int t = 0; t < T; t++)
    for (int h = 0; h < c->H; h++) {
      double f = shoal_rng_uniform(g) < 0.3 ? 0 : shoal_rng_uniform(g);
      double *res = c->res + ((size_t)t * c->H + h) * SHOAL_PS_NRES;
      for (int r = 0; r < SHOAL_PS_NRES; r++) res[r] = floor(res[r] * (1 - f * shoal_rng_uniform(g)));
    }
}

/* Online commit-on-arrival of one planner over the jobs (arrival order, ties
 * by id) on a copy of c: every schedule checked against the capacity left at
 * its commit; returns the total flow time in slots. kind: 0 larr, 1 greedy,
 * 2 oasis (forced admission: the flow of the schedule it would take). */
/* A random instance on a preloaded cluster: 2-6 machines of 4 or 8 GPUs with
 * 30 slots of other jobs' load, and a job of up to 12 workers whose work is
 * (lo + span * U) x its workers x its ideal rate. Returns nonzero after a
 * failed check (the cluster is then not initialized). */
static int preloaded_instance(shoal_rng_t *g, int inst, double lo, double span, shoal__ps_cluster_t *c,
                              shoal__ps_job_t *j) {
  int H = 2 + (int)shoal_rng_below(g, 5);
  double cap[6 * SHOAL_PS_NRES];
  for (int h = 0; h < H; h++) ps_set_cap(cap, h, 4 + 4 * (int)shoal_rng_below(g, 2), 32, 128, 40);
  int rc = shoal__ps_cluster_init(c, H, cap);
  if (rc) return rc;
  preload(g, c, 30);
  ps_tiny_job(g, inst, 0, j);
  j->wmax = 1 + (int)shoal_rng_below(g, 12);
  j->work = (lo + span * shoal_rng_uniform(g)) * j->wmax * j->rho_ex;
  return 0;
}

static double commit_online(const shoal__ps_cluster_t *c, shoal__ps_job_t *jobs, int n, int kind,
                            const shoal__ps_larr_params_t *lp, const shoal__ps_oasis_params_t *op) {
  shoal__ps_cluster_t cc;
  CHECK_OK(shoal__ps_cluster_copy(&cc, c));
  shoal__ps_oasis_est_t est;
  shoal__ps_oasis_est_init(&est);
  char done[8] = {0};
  double flow = 0;
  for (int step = 0; step < n; step++) {
    int k = -1;
    for (int q = 0; q < n; q++)
      if (!done[q] && (k < 0 || jobs[q].arrival < jobs[k].arrival)) k = q;
    done[k] = 1;
    shoal__ps_job_t *j = &jobs[k];
    shoal__ps_sched_t S;
    double payoff;
    if (kind == 0) CHECK_OK(shoal__ps_larr(&cc, j, j->arrival, lp, &S, NULL));
    else if (kind == 1) CHECK_OK(shoal__ps_greedy(&cc, j, j->arrival, lp->hmax, lp->theta, &S));
    else {
      shoal__ps_oasis_observe(&est, &cc, j, op);
      CHECK_OK(shoal__ps_oasis(&cc, j, j->arrival, op, &est, &payoff, &S));
    }
    CHECK_OK(shoal__ps_sched_check(&cc, j, &S, 1));
    CHECK_OK(shoal__ps_commit(&cc, j, &S));
    flow += shoal__ps_sched_finish(j, &S) - j->arrival + 1;
    shoal__ps_sched_free(&S);
  }
  shoal__ps_cluster_free(&cc);
  return flow;
}

TEST_T(larr_tiny_instances_vs_mip, 110) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 2026);
  shoal__ps_larr_params_t lpar;
  shoal__ps_larr_defaults(&lpar);
  lpar.hmax = 30;
  shoal__ps_oasis_params_t opar;
  shoal__ps_oasis_defaults(&opar);
  opar.T = 30;
  opar.hmax = 30;
  const int T = 10;
  const char *names[3] = {"larr", "greedy", "oasis"};
  double ratio[3] = {0}, worst[3] = {0}, lbratio = 0;
  int solved = 0, relations = 0;
  double t_start = shoal__now_s();
  for (int inst = 0; inst < 30 && shoal__now_s() - t_start < 75; inst++) { /* bounded under sanitizers too */
    shoal__ps_cluster_t c;
    int H = 2 + (int)shoal_rng_below(&g, 2), n = 2 + (int)shoal_rng_below(&g, 3);
    CHECK_OK(ps_tiny_cluster(H, &c));
    shoal__ps_job_t jobs[4];
    for (int i = 0; i < n; i++) ps_tiny_job(&g, i, 2, &jobs[i]);
    double opt;
    int rc = shoal__ps_mip_opt(&c, jobs, n, T, 4, &opt, NULL);
    if (rc == SHOAL_ERR_SOLVER) {
      shoal__ps_cluster_free(&c);
      continue; /* MIP hit its time limit: no verdict for this instance */
    }
    CHECK_OK(rc);
    solved++;
    /* lower bound <= optimum */
    double lb, lbs;
    CHECK_OK(shoal__ps_lower_bound(&c, jobs, n, T, 10, &lb, &lbs));
    CHECK_MSG(lb <= opt + 1e-6, "instance %d: lower bound %g > optimum %g", inst, lb, opt);
    lbratio += opt / lb;
    /* every planner's online schedules: feasible, never better than the optimum */
    for (int p = 0; p < 3; p++) {
      double f = commit_online(&c, jobs, n, p, &lpar, &opar);
      CHECK_MSG(f >= opt - 1e-6, "instance %d: %s flow %g < optimum %g", inst, names[p], f, opt);
      ratio[p] += f / opt;
      if (f / opt > worst[p]) worst[p] = f / opt;
    }
    /* oracle relations job by job: E_lp <= E_g <= end(larr) <= E_g + sigma */
    for (int sigma = 0; sigma <= 1; sigma++) {
      shoal__ps_cluster_t cc;
      CHECK_OK(shoal__ps_cluster_copy(&cc, &c));
      shoal__ps_larr_params_t lp = lpar;
      lp.sigma = sigma;
      lp.search = sigma; /* both with and without the horizon search of §4.4 */
      for (int i = 0; i < n; i++) { /* ids are in arrival order only by chance: use arrival order */
        int k = -1;
        for (int q = 0; q < n; q++)
          if (jobs[q].arrival >= 0 && (k < 0 || jobs[q].arrival < jobs[k].arrival)) k = q;
        shoal__ps_job_t *j = &jobs[k];
        shoal__ps_sched_t G, L;
        shoal__ps_larr_stats_t st = {0};
        CHECK_OK(shoal__ps_greedy(&cc, j, j->arrival, lp.hmax, lp.theta, &G));
        CHECK_OK(shoal__ps_larr(&cc, j, j->arrival, &lp, &L, &st));
        int eg = shoal__ps_sched_end(&G), el = shoal__ps_sched_end(&L);
        CHECK_EQ(st.last_e_g, eg);
        CHECK(st.last_e_lp <= eg);
        CHECK(eg <= el);
        CHECK(el <= eg + sigma);
        CHECK_OK(shoal__ps_sched_check(&cc, j, &L, 1));
        CHECK_OK(shoal__ps_commit(&cc, j, &L));
        relations++;
        shoal__ps_sched_free(&G);
        shoal__ps_sched_free(&L);
        j->arrival = -j->arrival - 1; /* mark done */
      }
      for (int i = 0; i < n; i++) jobs[i].arrival = -jobs[i].arrival - 1;
      shoal__ps_cluster_free(&cc);
    }
    shoal__ps_cluster_free(&c);
  }
  CHECK(solved >= 10);
  printf("tiny instances vs MIP optimum (%d solved, %d larr oracle checks): mean (worst) total-flow ratio, commit on arrival\n",
         solved, relations);
  for (int p = 0; p < 3; p++) printf("  %-7s %.3f (%.3f)\n", names[p], ratio[p] / solved, worst[p]);
  printf("  optimum / lower bound: %.3f\n", lbratio / solved);
}

TEST_T(larr_rounding_covers_and_packs, 110) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 77);
  int rounds = 0, repaired = 0, lp_ok = 0;
  const double betas[] = {0.3, 0.7, 1.0, 1.5, 3.0};
  for (int inst = 0; inst < 800; inst++) {
    shoal__ps_cluster_t c;
    shoal__ps_job_t j;
    CHECK_OK(preloaded_instance(&g, inst, 1, 4, &c, &j));
    int H = c.H;
    shoal__ps_sched_t G;
    int rc = shoal__ps_greedy(&c, &j, 0, 60, 16, &G);
    if (rc == SHOAL_ERR_INFEASIBLE) {
      shoal__ps_cluster_free(&c);
      continue;
    }
    CHECK_OK(rc);
    int eg = shoal__ps_sched_end(&G), mach[6], e;
    for (int h = 0; h < H; h++) mach[h] = h;
    shoal__ps_lp_t *lp;
    CHECK_OK(shoal__ps_lp_build(&c, &j, 0, eg, mach, H, 16, 0, inst % 2, &lp));
    CHECK_OK(shoal__ps_lp_horizon(lp, 0, eg, &e, NULL));
    lp_ok++;
    for (int b = 0; b < 5; b++) {
      shoal__ps_sched_t S;
      int heavy = 0;
      CHECK_OK(shoal__ps_larr_round(&c, &j, 0, e, eg, lp, mach, H, betas[b], 16, (uint64_t)inst * 7 + b, &S, &heavy));
      CHECK_OK(shoal__ps_sched_check(&c, &j, &S, 1)); /* capacities, ratios, coverage */
      CHECK(shoal__ps_sched_end(&S) <= eg);
      rounds++;
      repaired += heavy;
      shoal__ps_sched_free(&S);
    }
    shoal__ps_lp_free(lp);
    shoal__ps_sched_free(&G);
    shoal__ps_cluster_free(&c);
  }
  CHECK(rounds >= 3000);
  printf("rounding: %d rounded schedules on %d LPs, all covering and within capacity; %d (%.1f%%) needed covering repair\n",
         rounds, lp_ok, repaired, 100.0 * repaired / rounds);
}

/* A preloaded instance (work 2..8 x wmax x rho_ex), larr's parameters for it (hmax 60, theta 16) and its
 * greedy plan G: 0, or 1 when the greedy finds none (the cluster is freed: the caller skips the instance). */
static int greedy_instance(shoal_rng_t *g, int inst, shoal__ps_cluster_t *c, shoal__ps_job_t *j,
                           shoal__ps_larr_params_t *p, shoal__ps_sched_t *G) {
  CHECK_OK(preloaded_instance(g, inst, 2, 6, c, j));
  shoal__ps_larr_defaults(p);
  p->hmax = 60;
  p->theta = 16;
  int rc = shoal__ps_greedy(c, j, 0, p->hmax, p->theta, G);
  if (rc == SHOAL_ERR_INFEASIBLE) {
    shoal__ps_cluster_free(c);
    return 1;
  }
  CHECK_OK(rc);
  return 0;
}

/* lp_blocks: the LP cut after its first blocks plans the head, G's tail is
 * kept. On preloaded clusters (many distinct blocks): every schedule covers
 * and fits, ends by E_g, has G's slots after the LP's last slot, and a cap
 * at or above the LP's block count gives the uncapped schedule. */
TEST_T(larr_lp_blocks_cut_keeps_greedy_tail, 110) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 4242);
  int cut = 0, plans = 0, rounded = 0;
  for (int inst = 0; inst < 150; inst++) {
    shoal__ps_cluster_t c;
    shoal__ps_job_t j;
    shoal__ps_larr_params_t p;
    shoal__ps_sched_t G, L0, L;
    if (greedy_instance(&g, inst, &c, &j, &p, &G)) continue;
    int eg = shoal__ps_sched_end(&G);
    p.lp_blocks = 0; /* the uncapped LP */
    CHECK_OK(shoal__ps_larr(&c, &j, 0, &p, &L0, NULL));
    for (int b = 1; b <= 4; b++) {
      shoal__ps_larr_stats_t st = {0};
      p.lp_blocks = b;
      CHECK_OK(shoal__ps_larr(&c, &j, 0, &p, &L, &st));
      CHECK_OK(shoal__ps_sched_check(&c, &j, &L, 1));
      CHECK(shoal__ps_sched_end(&L) <= eg);
      plans++;
      rounded += st.chose_rounded;
      CHECK_EQ(st.lp_fail, 0); /* a cut LP is feasible: G's head is a point of it */
      if (st.lp_cut) {
        cut++;
        CHECK(st.last_e_lp < eg);
        for (int t = st.last_e_lp + 1; t <= eg; t++) { /* G's tail, slot for slot */
          CHECK(t - L.start < L.len);
          const shoal__ps_slot_t *a = &L.slot[t - L.start], *e = &G.slot[t - G.start];
          CHECK_EQ(a->n, e->n);
          for (int q = 0; q < a->n; q++) CHECK(a->pl[q].h == e->pl[q].h && a->pl[q].w == e->pl[q].w && a->pl[q].p == e->pl[q].p);
        }
      } else { /* the cap did not bind: the uncapped LP's schedule */
        CHECK_EQ(L.len, L0.len);
        CHECK(shoal__ps_sched_cost(&c, &j, &L, 0, p.theta) == shoal__ps_sched_cost(&c, &j, &L0, 0, p.theta));
      }
      shoal__ps_sched_free(&L);
    }
    shoal__ps_sched_free(&L0);
    shoal__ps_sched_free(&G);
    shoal__ps_cluster_free(&c);
  }
  CHECK(cut >= 100);
  printf("lp_blocks 1-4: %d plans, %d with the LP cut (G's tail kept), %d rounded schedules chosen\n", plans, cut, rounded);
}

/* far_blocks: a job whose greedy plan ends far_slots or more slots after its
 * start gets the LP of lp_blocks = far_blocks, any other the LP of lp_blocks
 * (the same schedule, cost for cost). */
TEST_T(larr_far_blocks_caps_only_far_plans, 110) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 4243);
  int far = 0, near = 0;
  for (int inst = 0; inst < 80; inst++) {
    shoal__ps_cluster_t c;
    shoal__ps_job_t j;
    shoal__ps_larr_params_t p, q;
    shoal__ps_sched_t G, L, R;
    if (greedy_instance(&g, inst, &c, &j, &p, &G)) continue;
    int eg = shoal__ps_sched_end(&G);
    p.far_slots = 3;
    p.far_blocks = 1;
    q = p;
    q.far_blocks = 0;
    if (eg >= p.far_slots) q.lp_blocks = 1, far++;
    else near++;
    CHECK_OK(shoal__ps_larr(&c, &j, 0, &p, &L, NULL));
    CHECK_OK(shoal__ps_larr(&c, &j, 0, &q, &R, NULL));
    CHECK_OK(shoal__ps_sched_check(&c, &j, &L, 1));
    CHECK_EQ(L.len, R.len);
    CHECK(shoal__ps_sched_cost(&c, &j, &L, 0, p.theta) == shoal__ps_sched_cost(&c, &j, &R, 0, p.theta));
    shoal__ps_sched_free(&L);
    shoal__ps_sched_free(&R);
    shoal__ps_sched_free(&G);
    shoal__ps_cluster_free(&c);
  }
  CHECK(far >= 10 && near >= 10);
  printf("far_blocks=1 from 3 slots: %d far plans, %d near ones\n", far, near);
}
