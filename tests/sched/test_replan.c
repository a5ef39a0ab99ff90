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
    if (inst % 5 == 4) rp.new_by = SHOAL__PS_NEW_BY_GREEDY;
    double rate[8] = {0};
    shoal__ps_larr_stats_t st = {0};
    CHECK_OK(shoal__ps_replan(&c, jobs, S, active, n0, batch, nn, t, &rp, rate, &st, def, &ndef, &nrel, NULL));
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

/* A one-GPU-per-worker job (no PSs) of work q, at most wmax workers, rho_in 1 and rho_ex 0.9 per worker and
 * slot, restart fraction r, holding `held` (NULL: not running). */
static shoal__ps_job_t rs_job(int id, double q, int wmax, double r, const shoal__ps_slot_t *held) {
  shoal__ps_job_t j;
  memset(&j, 0, sizeof j);
  j.id = id;
  j.work = q;
  j.wmax = wmax;
  j.dw[SHOAL_PS_GPU] = 1;
  j.rho_in = 1;
  j.rho_ex = 0.9;
  j.restart = r;
  j.held = held;
  return j;
}

static int rs_cluster(int H, int gpus, shoal__ps_cluster_t *c) {
  double cap[8 * SHOAL_PS_NRES] = {0};
  for (int h = 0; h < H; h++) cap[h * SHOAL_PS_NRES + SHOAL_PS_GPU] = gpus;
  return shoal__ps_cluster_init(c, H, cap);
}

static int rs_workers(const shoal__ps_sched_t *S, int t, int h) {
  if (t < S->start || t >= S->start + S->len) return 0;
  const shoal__ps_slot_t *sl = &S->slot[t - S->start];
  for (int e = 0; e < sl->n; e++)
    if (sl->pl[e].h == h) return sl->pl[e].w;
  return 0;
}

/* Restart cost in the greedy's objective, by hand. Two machines of 2 GPUs, both free; the job holds 2
 * workers on machine 0 and has 3.5 left. Free of restarts (r = 0) the best slot is 4 workers over both
 * machines (3.6 >= 3.5): it covers in slot 0 with a new placement. With r = 0.5 that slot is worth
 * 3.6 x 0.5 = 1.8 < 2 (the held placement): the job keeps machine 0 in slot 0 (2 done, 1.5 left) and in slot 1
 * (2 >= 1.5 covers; not trimmed, fewer workers would be a change). With r = 0.25 and 1.5 left the held
 * placement covers at once and is kept (the best slot, 2.7 net, would be trimmed to a new one). The net work
 * counts the change: 4 spread after 2 on machine 0 at r = 0.5 is 1.8. */
TEST(slot_greedy_restart_cost_keeps_the_held_placement) {
  shoal__ps_cluster_t c;
  CHECK_OK(rs_cluster(2, 2, &c));
  shoal__ps_slot_t held = {0, 0, NULL};
  CHECK_OK(shoal__ps_slot_add(&held, 0, 2, 0));
  shoal__ps_sched_t S;
  shoal__ps_job_t j = rs_job(0, 3.5, 4, 0, &held);
  CHECK_OK(shoal__ps_greedy(&c, &j, 0, 10, 0.125, &S));
  CHECK_EQ(shoal__ps_sched_end(&S), 0);
  CHECK_EQ(rs_workers(&S, 0, 0) + rs_workers(&S, 0, 1), 4);
  j.restart = 0.5;
  CHECK(fabs(shoal__ps_sched_work_net(&j, &S) - 1.8) < 1e-9);
  shoal__ps_sched_free(&S);
  CHECK_OK(shoal__ps_greedy(&c, &j, 0, 10, 0.125, &S));
  CHECK_EQ(shoal__ps_sched_end(&S), 1);
  for (int t = 0; t <= 1; t++) CHECK(shoal__ps_slot_equal(&S.slot[t], &held));
  CHECK(fabs(shoal__ps_sched_work_net(&j, &S) - 4) < 1e-9);
  shoal__ps_sched_free(&S);
  j.restart = 0.25;
  j.work = 1.5;
  CHECK_OK(shoal__ps_greedy(&c, &j, 0, 10, 0.125, &S));
  CHECK_EQ(shoal__ps_sched_end(&S), 0);
  CHECK(shoal__ps_slot_equal(&S.slot[0], &held));
  shoal__ps_sched_free(&S);
  free(held.pl);
  shoal__ps_cluster_free(&c);
}

/* A re-planning batch with a restart cost, by hand. Two machines of 1 GPU; A (work 5, 1 worker) runs on
 * machine 0, committed for slots 0-4; B (work 1, 1 worker) arrives at slot 0. B is smaller: A is released
 * and B planned first. Without a restart cost B takes machine 0 (the cheaper by the lower id, both free)
 * and A moves to machine 1. With one (r = 0.25) A's held machine is reserved while B is planned: B gets
 * machine 1 and ends in slot 0 all the same, A stays. On one machine B cannot end in slot 0 around A: then
 * it takes A's GPU (SRPT's preemption) and A waits a slot. */
TEST(slot_replan_restart_cost_moves_nobody_for_nothing) {
  for (int H = 2; H >= 1; H--)
    for (int with = 0; with <= 1; with++) {
      shoal__ps_cluster_t c;
      CHECK_OK(rs_cluster(H, 1, &c));
      shoal__ps_slot_t held = {0, 0, NULL};
      CHECK_OK(shoal__ps_slot_add(&held, 0, 1, 0));
      shoal__ps_job_t jobs[2] = {rs_job(0, 5, 1, with ? 0.25 : 0, &held), rs_job(1, 1, 1, with ? 0.25 : 0, NULL)};
      shoal__ps_sched_t S[2];
      shoal__ps_sched_init(&S[0], 0);
      for (int t = 0; t < 5; t++) CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&S[0], t), 0, 1, 0));
      CHECK_OK(shoal__ps_commit(&c, &jobs[0], &S[0]));
      shoal__ps_sched_init(&S[1], 0);
      shoal__ps_replan_params_t rp;
      shoal__ps_replan_defaults(&rp);
      rp.larr.hmax = 20;
      rp.new_by = SHOAL__PS_NEW_BY_GREEDY;
      double rate[2] = {0, 0};
      int active[1] = {0}, batch[1] = {1}, def[2], ndef, nrel;
      CHECK_OK(shoal__ps_replan(&c, jobs, S, active, 1, batch, 1, 0, &rp, rate, NULL, def, &ndef, &nrel, NULL));
      CHECK_EQ(ndef, 0);
      CHECK_EQ(nrel, 1);
      CHECK_EQ(shoal__ps_sched_end(&S[1]), 0); /* B ends in slot 0 either way */
      if (H == 2) {
        CHECK_EQ(rs_workers(&S[1], 0, with ? 1 : 0), 1);
        CHECK_EQ(rs_workers(&S[0], 0, with ? 0 : 1), 1);
      } else {
        CHECK_EQ(rs_workers(&S[1], 0, 0), 1);
        CHECK_EQ(rs_workers(&S[0], 0, 0), 0);
      }
      CHECK_OK(residual_matches(&c, jobs, 2, S, 8));
      for (int i = 0; i < 2; i++) shoal__ps_sched_free(&S[i]);
      free(held.pl);
      shoal__ps_cluster_free(&c);
    }
}

/* release_next, by hand: one machine of 2 GPUs; A (work 6, 2 workers) committed for slots 0-2; B (work 1,
 * 1 worker) arrives during slot 0. Released from slot 0 (release_next = 0), B takes a GPU of slot 0 and A
 * drops to 1 worker there. With release_next = 1, A keeps slot 0 as it was and is planned again from
 * slot 1 (4 left); B, with no room in slot 0, is planned in slot 1. */
TEST(slot_replan_release_next_keeps_the_current_slot) {
  for (int next = 0; next <= 1; next++) {
    shoal__ps_cluster_t c;
    CHECK_OK(rs_cluster(1, 2, &c));
    shoal__ps_job_t jobs[2] = {rs_job(0, 6, 2, 0, NULL), rs_job(1, 1, 1, 0, NULL)};
    shoal__ps_sched_t S[2];
    shoal__ps_sched_init(&S[0], 0);
    for (int t = 0; t < 3; t++) CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&S[0], t), 0, 2, 0));
    CHECK_OK(shoal__ps_commit(&c, &jobs[0], &S[0]));
    shoal__ps_sched_init(&S[1], 0);
    shoal__ps_replan_params_t rp;
    shoal__ps_replan_defaults(&rp);
    rp.larr.hmax = 20;
    rp.release_next = next;
    rp.new_by = SHOAL__PS_NEW_BY_GREEDY;
    double rate[2] = {0, 0};
    int active[1] = {0}, batch[1] = {1}, def[2], ndef, nrel;
    CHECK_OK(shoal__ps_replan(&c, jobs, S, active, 1, batch, 1, 0, &rp, rate, NULL, def, &ndef, &nrel, NULL));
    CHECK_EQ(ndef, 0);
    CHECK_EQ(rs_workers(&S[0], 0, 0), next ? 2 : 1);
    CHECK_EQ(rs_workers(&S[1], 0, 0), next ? 0 : 1);
    CHECK_EQ(S[1].start + (S[1].slot[0].n ? 0 : 1), next ? 1 : 0); /* B's first busy slot */
    CHECK(shoal__ps_sched_work(&jobs[0], &S[0]) >= 6 - 1e-9);
    CHECK_OK(residual_matches(&c, jobs, 2, S, 8));
    for (int i = 0; i < 2; i++) shoal__ps_sched_free(&S[i]);
    shoal__ps_cluster_free(&c);
  }
}

/* A planner of new jobs for the test below: declines job 2, plans any other job 1 worker on machine 0 in
 * slot t + 2 only, and counts its calls. */
static int late_or_declined(void *arg, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t,
                            shoal__ps_sched_t *out) {
  (void)c;
  ++*(int *)arg;
  if (j->id == 2) return SHOAL_ERR_INFEASIBLE;
  shoal__ps_sched_init(out, t);
  shoal__ps_slot_t *sl = shoal__ps_sched_slot(out, t + 2);
  return sl ? shoal__ps_slot_add(sl, 0, 1, 0) : SHOAL_ERR_NOMEM;
}

/* New jobs through the planner's own plan (plan_new, how oasis re-plans), by hand: one machine of 2 GPUs; A
 * (work 6, 2 workers) committed for slots 0-2; B and C (work 1, 1 worker) arrive at slot 0. Both are smaller
 * than A, which is released and re-planned by the greedy after them. plan_new is asked for B and C only: B
 * gets its plan (slot 2, not the greedy's slot 0), C, declined, is deferred; A takes both GPUs of slots 0-1
 * and one of slot 2 beside B, and its last step in slot 3. */
TEST(slot_replan_new_jobs_through_plan_new) {
  shoal__ps_cluster_t c;
  CHECK_OK(rs_cluster(1, 2, &c));
  shoal__ps_job_t jobs[3] = {rs_job(0, 6, 2, 0, NULL), rs_job(1, 1, 1, 0, NULL), rs_job(2, 1, 1, 0, NULL)};
  shoal__ps_sched_t S[3];
  shoal__ps_sched_init(&S[0], 0);
  for (int t = 0; t < 3; t++) CHECK_OK(shoal__ps_slot_add(shoal__ps_sched_slot(&S[0], t), 0, 2, 0));
  CHECK_OK(shoal__ps_commit(&c, &jobs[0], &S[0]));
  shoal__ps_sched_init(&S[1], 0);
  shoal__ps_sched_init(&S[2], 0);
  shoal__ps_replan_params_t rp;
  shoal__ps_replan_defaults(&rp);
  rp.larr.hmax = 20;
  int calls = 0;
  rp.new_by = SHOAL__PS_NEW_BY_PLAN_NEW;
  rp.plan_new = late_or_declined;
  rp.plan_new_arg = &calls;
  double rate[3] = {0, 0, 0};
  int active[1] = {0}, batch[2] = {1, 2}, def[3], ndef, nrel;
  CHECK_OK(shoal__ps_replan(&c, jobs, S, active, 1, batch, 2, 0, &rp, rate, NULL, def, &ndef, &nrel, NULL));
  CHECK_EQ(calls, 2);
  CHECK_EQ(nrel, 1);
  CHECK_EQ(ndef, 1);
  CHECK_EQ(def[0], 2);
  CHECK_EQ(shoal__ps_sched_end(&S[2]), -1); /* C: nothing planned */
  CHECK_EQ(rs_workers(&S[1], 0, 0), 0);
  CHECK_EQ(rs_workers(&S[1], 2, 0), 1);
  CHECK_EQ(shoal__ps_sched_end(&S[1]), 2);
  CHECK_EQ(rs_workers(&S[0], 0, 0), 2);
  CHECK_EQ(rs_workers(&S[0], 1, 0), 2);
  CHECK_EQ(rs_workers(&S[0], 2, 0), 1);
  CHECK_EQ(shoal__ps_sched_end(&S[0]), 3);
  CHECK(shoal__ps_sched_work(&jobs[0], &S[0]) >= 6 - 1e-9);
  CHECK_OK(residual_matches(&c, jobs, 3, S, 8));
  for (int i = 0; i < 3; i++) shoal__ps_sched_free(&S[i]);
  shoal__ps_cluster_free(&c);
}
