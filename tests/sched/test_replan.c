/* larr's re-planning batch as a pure planner (docs/scheduling.md): it never
 * touches executed slots, keeps every job covered and the residual capacity
 * exact. Its runs inside the engine: tests/sim/test_sim_slotted.c. */
#include <string.h>

#include "../runner.h"
#include "core/error.h"
#include "ps_testutil.h"
#include "sched/planners/greedy.h"
#include "sched/planners/replan.h"

/* Residual capacity must equal capacity minus the usage of all schedules. */
static int residual_matches(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n,
                            const shoal__ps_sched_t *S, int T) {
  shoal__ps_cluster_t f;
  int rc = shoal__ps_cluster_init(&f, c->H, c->cap);
  for (int i = 0; i < n && !rc; i++) rc = shoal__ps_commit(&f, &jobs[i], &S[i]);
  for (int t = 0; t < T && !rc; t++)
    for (int h = 0; h < c->H && !rc; h++)
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (fabs(shoal__ps_res(c, t, h)[r] - shoal__ps_res(&f, t, h)[r]) > 1e-6) {
          rc = shoal__seterr(SHOAL_ERR_INTERNAL, "slot %d machine %d resource %d: residual %g, recomputed %g", t, h, r,
                             shoal__ps_res(c, t, h)[r], shoal__ps_res(&f, t, h)[r]);
          break;
        }
  shoal__ps_cluster_free(&f);
  return rc;
}

/* shoal__ps_replan directly: committed greedy schedules from slot 0, then a
 * batch of new small jobs at slot t. Slots before t are byte-identical
 * afterwards, every job still covers its work, the residual capacity equals
 * the recomputed usage, and the new jobs are planned. */
TEST_T(larr_replan_never_touches_executed_work, 60) {
  shoal_rng_t g;
  shoal_rng_seed(&g, 31);
  int released_total = 0;
  for (int inst = 0; inst < 40; inst++) {
    shoal__ps_cluster_t c;
    int H = 2 + (int)shoal_rng_below(&g, 3), n0 = 3 + (int)shoal_rng_below(&g, 4), nn = 1 + (int)shoal_rng_below(&g, 2);
    int n = n0 + nn, t = 1 + (int)shoal_rng_below(&g, 3);
    CHECK_OK(ps_tiny_cluster(H, &c));
    shoal__ps_job_t jobs[8];
    shoal__ps_sched_t S[8], before[8];
    int active[8], batch[2], def[8], ndef, nrel;
    for (int i = 0; i < n; i++) {
      ps_tiny_job(&g, i, 0, &jobs[i]);
      if (i < n0) jobs[i].work *= 3; /* long committed jobs */
      else jobs[i].arrival = t;      /* short new ones */
      shoal__ps_sched_init(&S[i], jobs[i].arrival);
    }
    for (int i = 0; i < n0; i++) {
      shoal__ps_sched_t G;
      CHECK_OK(shoal__ps_greedy(&c, &jobs[i], 0, 200, 0.125, &G));
      CHECK_OK(shoal__ps_commit(&c, &jobs[i], &G));
      shoal__ps_sched_free(&S[i]);
      S[i] = G;
      active[i] = i;
    }
    for (int i = 0; i < n; i++) CHECK_OK(shoal__ps_sched_copy(&before[i], &S[i]));
    for (int q = 0; q < nn; q++) batch[q] = n0 + q;
    shoal__ps_replan_params_t rp;
    shoal__ps_replan_defaults(&rp);
    rp.larr.hmax = 200;
    rp.larr.trials = 4;
    rp.replan_k = 1 + inst % 4;
    double rate[8] = {0};
    shoal__ps_larr_stats_t st = {0};
    CHECK_OK(shoal__ps_replan(&c, jobs, S, active, n0, batch, nn, t, &rp, inst % 5 == 4, rate, &st, def, &ndef, &nrel, NULL));
    CHECK_EQ(ndef, 0);
    CHECK(nrel <= rp.replan_k);
    released_total += nrel;
    for (int i = 0; i < n; i++) {
      /* executed slots (< t) unchanged */
      for (int k = 0; k < before[i].len && before[i].start + k < t; k++) {
        const shoal__ps_slot_t *a = &before[i].slot[k];
        CHECK(k < S[i].len);
        const shoal__ps_slot_t *b = &S[i].slot[k];
        CHECK_EQ(a->n, b->n);
        for (int e = 0; e < a->n; e++) {
          CHECK_EQ(a->pl[e].h, b->pl[e].h);
          CHECK_EQ(a->pl[e].w, b->pl[e].w);
          CHECK_EQ(a->pl[e].p, b->pl[e].p);
        }
      }
      CHECK(shoal__ps_sched_finish(&jobs[i], &S[i]) >= 0); /* still covers its work */
    }
    CHECK_OK(ps_check_all(&c, jobs, n, S));
    CHECK_OK(residual_matches(&c, jobs, n, S, 250));
    for (int i = 0; i < n; i++) shoal__ps_sched_free(&S[i]), shoal__ps_sched_free(&before[i]);
    shoal__ps_cluster_free(&c);
  }
  CHECK(released_total > 0);
}
