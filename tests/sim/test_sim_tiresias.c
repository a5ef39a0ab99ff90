/* Tiresias in the simulator: regressions of the event/timer handling (the
 * hand-computed scenarios are in test_sim_policies.c). */
#include <float.h>
#include <stdio.h>

#include "simtest.h"

/* A demotion crossing less than half an ulp of `now` ahead of the decision.
 * A job of g GPUs starting at t0 ~ 2^23 s crosses theta at t0 + theta/g; the
 * timer time rounds to `at`, the engine then computes held = at - t0
 * (exact), and a = held * g can fall short of theta by more than the GPU-s
 * tolerance while now + (theta - a)/g rounds back to `at`. The old code kept
 * the job in its queue and pushed a timer at `now` forever (contended Philly
 * at t ~ 4.2e6 s, 1M synthetic jobs at t ~ 8.4e6 s). Here the (t0, g) pair
 * is searched with the engine's arithmetic; then J1 (same size, waiting in
 * Q0) must take over at the crossing: J0 is demoted there and preempted. */
TEST(tiresias_crossing_within_an_ulp) {
  const double theta = 3250;
  double t0 = 0, at = 0;
  int g = 0;
  for (int k = 0; k < 200000 && !g; k++) {
    for (int gg = 5; gg <= 48 && !g; gg++) {
      double t = 8388608.0 + k * 0.3710937;
      double x = t + theta / gg, held = x - t, a = held * gg;
      if (a < theta * (1 - 1e-12) - 1e-9 && x + (theta - a) / gg <= x) {
        t0 = t;
        at = x;
        g = gg;
      }
    }
  }
  CHECK_MSG(g > 0, "no (t0, g) with a crossing inside half an ulp found");
  /* J0 from 0 to 1 s so that time starts at 0; J1, J2 arrive together at t0 */
  tjob_t t[] = {{0, 1, 1, 0}, {t0, g, 1000, 0}, {t0, g, 1000, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, g);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 3);
  for (int starve = 0; starve <= 100; starve += 100) { /* 100: guard on, never due here */
    char params[64];
    snprintf(params, sizeof params, "thresholds=%g:starve=%d", theta, starve);
    run_policy(&w, &cs, sp, "tiresias", params, 0, &r);
    CHECK_EQ(r.unfinished, 0);
    /* J1 runs t0..at, demoted (Q1); J2 (Q0) preempts it and runs 1000 s
     * (it crosses theta too but keeps running: running first in Q1; with
     * S = 100, J1 would have to wait far longer than J2 lasts);
     * J1 resumes with 1000 - (at - t0) s left */
    CHECK_EQ(r.preemptions, 1);
    CHECK_NEAR(w.jobs[2].first_start, at, 1e-6);
    CHECK_NEAR(w.jobs[2].finish, at + 1000, 1e-6);
    CHECK_NEAR(w.jobs[1].finish, t0 + 2000, 1e-6);
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Waiting jobs that cannot fit the free GPUs are skipped, a later small one
 * backfills (the walk looks only at sizes that fit). One 4-GPU machine, one
 * queue (threshold far away), restart cost 0.
 *  J0 t=0 3 GPUs 1000 s runs; J1-J5 t=1 2 GPUs 100 s wait (1 GPU free);
 *  J6 t=2 1 GPU 50 s: later than J1-J5 in Q0 but the only one that fits:
 *  2-52. t=1000: J1, J2 1000-1100; J3, J4 1100-1200; J5 1200-1300. */
TEST(tiresias_backfills_past_jobs_that_do_not_fit) {
  tjob_t t[] = {{0, 3, 1000, 0}, {1, 2, 100, 0}, {1, 2, 100, 0}, {1, 2, 100, 0},
                {1, 2, 100, 0},  {1, 2, 100, 0}, {2, 1, 50, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 7);
  const char *params[] = {"thresholds=1e9:starve=0", "thresholds=1e9:starve=2"};
  for (int k = 0; k < 2; k++) {
    run_policy(&w, &cs, sp, "tiresias", params[k], 0, &r);
    CHECK_JCT(&w, 0, 1000);
    CHECK_JCT(&w, 6, 50);
    CHECK_JCT(&w, 1, 1099);
    CHECK_JCT(&w, 2, 1099);
    CHECK_JCT(&w, 3, 1199);
    CHECK_JCT(&w, 4, 1199);
    CHECK_JCT(&w, 5, 1299);
    CHECK_EQ(r.preemptions, 0);
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* The thrash guard: a started job keeps its GPUs for its minimum run,
 * max(minrun, runfrac x its held time before the start), and a decision
 * follows the end of that run. One 1-GPU machine, restart cost 0, two
 * queues (threshold 100 GPU-s), no promotions. J0 (1,200 s) is in Q1 from
 * t=100; J1-J5 (50 s each) arrive at 200, 300, 400, 700, 800 in Q0.
 *  plain rule: every arrival preempts J0 at once: 5 preemptions.
 *  minrun=500: J0 keeps 0-500; J1-J3 500-650; J0 650-1150 (lease), then
 *   J4, J5 1150-1250; J0 1250-1450: 2 preemptions.
 *  runfrac=1: J0 is preempted at 200 (nothing held before its start); J1
 *   200-250; J0 250-450 (200 held before); J2, J3 450-550; J0 550-950 (400);
 *   J4, J5 950-1050; J0 1050-1450: 3 preemptions.
 * J0 ends at 1450 in all three (work-conserving, no restart cost). */
TEST(tiresias_minimum_run_guards_against_thrash) {
  tjob_t t[] = {{0, 1, 1200, 0}, {200, 1, 50, 0}, {300, 1, 50, 0}, {400, 1, 50, 0}, {700, 1, 50, 0}, {800, 1, 50, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 1);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 6);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=0:minrun=0:runfrac=0", 0, &r);
  CHECK_EQ(r.preemptions, 5);
  for (int k = 1; k <= 5; k++) CHECK_JCT(&w, k, 50);
  CHECK_JCT(&w, 0, 1450);
  shoal__sim_result_free(&r);

  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=0:minrun=500", 0, &r);
  CHECK_EQ(r.preemptions, 2);
  CHECK_JCT(&w, 1, 350);  /* 500-550 */
  CHECK_JCT(&w, 2, 300);  /* 550-600 */
  CHECK_JCT(&w, 3, 250);  /* 600-650 */
  CHECK_JCT(&w, 4, 500);  /* 1150-1200 */
  CHECK_JCT(&w, 5, 450);  /* 1200-1250 */
  CHECK_JCT(&w, 0, 1450);
  shoal__sim_result_free(&r);

  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=0:runfrac=1", 0, &r);
  CHECK_EQ(r.preemptions, 3);
  CHECK_JCT(&w, 1, 50);  /* 200-250 */
  CHECK_JCT(&w, 2, 200); /* 450-500 */
  CHECK_JCT(&w, 3, 150); /* 500-550 */
  CHECK_JCT(&w, 4, 300); /* 950-1000 */
  CHECK_JCT(&w, 5, 250); /* 1000-1050 */
  CHECK_JCT(&w, 0, 1450);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* The default spaces promotions out (docs/scheduling.md, "Tiresias
 * thrash"). One 1-GPU machine, restart cost 0, two queues (threshold 100
 * GPU-s); A and B (1 GPU, 20,000 s each) arrive at 0; a promotion is due
 * when a job's wait since its last reset reaches S x its run since then.
 *  authors' rule (starve=2, runfrac=0): A 0-100 (demoted), B preempts it at
 *   100 and keeps running in Q1 (running first); promotions preempt at 300
 *   (A), 600 (B), 1200 (A), 2400 (B), 4800 (A), 9600 (B), 19200 (A): 8
 *   preemptions; A has 13,600 s left at 19,200 and ends at 32,800 (B's next
 *   promotion would be at 38,400), B at 40,000.
 *  default (starve=48, runfrac=0.04): A's promotion needs 48 x 100 s of
 *   waiting: at 4,900 it preempts B (B's minimum run 0.04 x 0 s is over),
 *   is demoted at 5,000 and keeps running (B's promotion would need
 *   48 x 4,800 s): 2 preemptions; A ends at 4,900 + 19,900 = 24,800, B at
 *   40,000. */
TEST(tiresias_default_spaces_promotions_out) {
  tjob_t t[] = {{0, 1, 20000, 0}, {0, 1, 20000, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 1);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=2:runfrac=0", 0, &r);
  CHECK_EQ(r.preemptions, 8);
  CHECK_JCT(&w, 0, 32800);
  CHECK_JCT(&w, 1, 40000);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100", 0, &r);
  CHECK_EQ(r.preemptions, 2);
  CHECK_JCT(&w, 0, 24800);
  CHECK_JCT(&w, 1, 40000);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}
