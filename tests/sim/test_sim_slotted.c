/* The engine's slotted mode (larr, greedy, oasis behind policy.h): a
 * hand-computed timeline, invariants (--check) and determinism on contended
 * workloads, every variant (re-planning, estimated remaining work), and
 * byte-identical CLI outputs for the same seed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "simtest.h"

/* One machine with 4 GPUs, linear speed (W steps/s), slot 100 s, no restart
 * cost. A: 4 GPUs x 250 s (work 1000) at t=0; B: 2 GPUs x 100 s (work 200)
 * at t=50.
 * greedy (commit on arrival): A's plan is 4,4,2 workers in slots 0-2 (the
 * last slot trimmed to the 200 steps left); B, planned at t=50 for 200 steps
 * plus the half slot already gone (2 workers x 100 x 0.5 = 100), finds the
 * machine full in slots 0-1 and gets 2 workers in slot 2: both run in slot
 * 2 and finish at t=300 (JCT A 300, B 250).
 * greedy:replan=1: at t=50 A (10 GPU-slots left) is larger than B (3) and
 * is released; B is planned first on the whole machine: 2 workers in slot 0
 * (100 steps by t=100) and 1 in slot 1 (100 steps, done at t=200); A gets
 * what is left: 2 workers from t=50 (200 steps by t=50, 300 by t=100), 3 in
 * slot 1 (600 by t=200), 4 in slot 2 (1000 at t=300). JCT A 300, B 150.
 * fifo: A alone until 250, then B: JCT A 250, B 300. */
TEST(slotted_hand_computed_timeline) {
  shoal_speed_t *sp = linear_speed(1.0);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  const tjob_t t[] = {{0, 4, 250, 0}, {50, 2, 100, 0}};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 2);
  shoal_sim_result_t r;
  run_policy(&w, &cs, sp, "greedy", "slot=100:replan=0", 0, &r);
  CHECK_JCT(&w, 0, 300);
  CHECK_JCT(&w, 1, 250);
  CHECK_EQ(r.finished, 2);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "greedy", "slot=100:replan=1", 0, &r);
  CHECK_JCT(&w, 0, 300);
  CHECK_JCT(&w, 1, 150);
  CHECK_CONTAINS(r.policy_stats, "released=1");
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  CHECK_JCT(&w, 0, 250);
  CHECK_JCT(&w, 1, 300);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  sp->destroy(sp);
}

/* Three jobs t[] on one machine with 1 GPU, linear speed (W steps/s), no restart cost, under each case's policy
 * and parameters: every job finishes at its hand-computed JCT, and the policy's statistics say `stat` (when not
 * NULL). */
typedef struct timeline_case {
  const char *policy, *params;
  double jct[3];
  const char *stat;
} timeline_case_t;

static void run_timeline(const tjob_t t[3], const timeline_case_t *cases, size_t n) {
  shoal_speed_t *sp = linear_speed(1.0);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 1);
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 3);
  for (size_t c = 0; c < n; c++) {
    shoal_sim_result_t r;
    printf("  %s:%s\n", cases[c].policy, cases[c].params);
    run_policy(&w, &cs, sp, cases[c].policy, cases[c].params, 0, &r);
    CHECK_EQ(r.finished, 3);
    for (int i = 0; i < 3; i++) CHECK_JCT(&w, i, cases[c].jct[i]);
    if (cases[c].stat) CHECK_CONTAINS(r.policy_stats, cases[c].stat);
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  sp->destroy(sp);
}

/* One machine with 1 GPU, linear speed, slot 100 s, no restart cost, backfill=0 throughout. A: 50 s at t=0 (slot 0); B: 40 s at
 * t=0 (slot 0 is A's: planned in slot 1); C: 60 s at t=60, planned for 60 steps plus the 0.6 slot gone (60).
 * greedy: A finishes at 50 and gives slot 0 back; B runs 100-140; C takes slot 0's room (100 steps), finds
 * slot 1 held by B and plans its last 20 steps in slot 2: it runs 60-100, pauses, runs 200-220: JCT A 50,
 * B 140, C 160.
 * greedy:nogap=1: C's plan pauses in slot 1, so C is planned again from slot 2 (60 steps, nothing gone):
 * 200-260, JCT 200.
 * greedy:pull=1: at A's finish (t=50) B is planned again from slot 0 with 40 + 50 steps: it ends in slot
 * 0 instead of 1 and is pulled (50-90); C then plans slots 1-2; at B's finish (t=90) C, planned again from
 * slot 0 with 60 + 90 steps, ends in slot 1 instead of 2 and is pulled (90-150): JCT B 90, C 90. With nogap
 * too the same (no pulled plan pauses). */
TEST(slotted_pull_forward_and_nogap_timeline) {
  const tjob_t t[] = {{0, 1, 50, 0}, {0, 1, 40, 0}, {60, 1, 60, 0}};
  const timeline_case_t cases[] = {
      {"greedy", "slot=100:replan=0:backfill=0", {50, 140, 160}, NULL},
      {"greedy", "slot=100:replan=0:backfill=0:nogap=1", {50, 140, 200}, NULL},
      {"greedy", "slot=100:replan=0:backfill=0:pull=1", {50, 90, 90}, "pulled=2"},
      {"greedy", "slot=100:replan=0:backfill=0:pull=1:nogap=1", {50, 90, 90}, "pulled=2"},
  };
  run_timeline(t, cases, sizeof cases / sizeof cases[0]);
}

/* One machine with 1 GPU, linear speed, slot 100 s, no restart cost. A: 50 s at t=0 (slot 0); B: 100 s at t=0
 * (planned in slot 1); C: 30 s at t=1 (30 steps + the 0.01 slot gone = 31: planned in slot 2).
 * greedy:backfill=0: A 0-50, B 100-200, C 200-230: JCT A 50, B 200, C 229.
 * greedy:backfill=1 (oldest first): at A's finish (t=50) slot 0's GPU is free and B, the oldest job holding
 * nothing in slot 0, takes it (50-100) and keeps it in its own slot 1: done at 150; then slot 1's GPU goes
 * to C (150-180): JCT B 150, C 179.
 * greedy:backfill=2 (shortest remaining first; the default): at t=50 C (30 steps) goes before B (100): C 50-80, then B
 * 80-100 and on in its slot 1 without a restart (the same placement): 80-180: JCT B 180, C 79.
 * Neither moves a planned start: B still runs in its slot 1. */
TEST(slotted_backfill_timeline) {
  const tjob_t t[] = {{0, 1, 50, 0}, {0, 1, 100, 0}, {1, 1, 30, 0}};
  const timeline_case_t cases[] = {
      {"greedy", "slot=100:replan=0:backfill=0", {50, 200, 229}, NULL},
      {"greedy", "slot=100:replan=0:backfill=1", {50, 150, 179}, "backfilled=2"},
      {"greedy", "slot=100:replan=0", {50, 180, 79}, "backfilled=2"}, /* the default: backfill=2 */
      {"greedy", "slot=100:replan=0:backfill=2", {50, 180, 79}, "backfilled=2"},
      {"larr", "slot=100:replan=0:backfill=2", {50, 180, 79}, "backfilled=2"},
      {"oasis", "slot=100:replan=0:backfill=2", {50, 180, 79}, "backfilled=2"},
  };
  run_timeline(t, cases, sizeof cases / sizeof cases[0]);
}

/* Contended PS/all-reduce workloads on a small cluster: every slotted
 * variant keeps the engine's invariants at every step (cfg.check), finishes
 * every job, and gives the same finish times on a second run. */
static void slotted_variants(const char *const (*pols)[2], int npols) {
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_cluster_spec_t cs;
  one_machine(&cs, 3, 4);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.synth_jobs = 24;
  o.load = 2;
  o.cluster_gpus = 12;
  o.max_gpus = 8;
  o.seed = 1;
  o.ps_fraction = 0.5;
  shoal_workload_t w;
  CHECK_OK(shoal__synth_generate(&o, &w));
  shoal__workload_scale_arrivals(&w, 20); /* arrivals within a few slots: jobs queue */
  CHECK_OK(shoal__workload_assign_models(&w, sp, c, &o));
  double *fin = malloc(sizeof(double) * (size_t)w.njobs);
  { /* the workload contends: under FIFO jobs queue */
    shoal_sim_result_t r;
    run_policy(&w, &cs, sp, "fifo", NULL, 30, &r);
    long waited = 0;
    for (int i = 0; i < w.njobs; i++) waited += w.jobs[i].first_start > w.jobs[i].arrival + 1e-6;
    CHECK_MSG(waited >= 3, "%ld of %d jobs waited under fifo: not contended", waited, w.njobs);
    shoal__sim_result_free(&r);
  }
  for (int p = 0; p < npols; p++) {
    shoal_sim_result_t r;
    run_policy(&w, &cs, sp, pols[p][0], pols[p][1], 30, &r);
    CHECK_MSG(r.finished == w.njobs, "%s:%s finished %ld of %d", pols[p][0], pols[p][1], r.finished, w.njobs);
    for (int i = 0; i < w.njobs; i++) fin[i] = w.jobs[i].finish;
    printf("  %s:%s: span %.0f s, %s\n", pols[p][0], pols[p][1], r.t_last - r.t_first, r.policy_stats);
    shoal__sim_result_free(&r);
    run_policy(&w, &cs, sp, pols[p][0], pols[p][1], 30, &r);
    for (int i = 0; i < w.njobs; i++)
      CHECK_MSG(w.jobs[i].finish == fin[i], "%s:%s job %d: finish %.17g then %.17g", pols[p][0], pols[p][1], i, fin[i],
                w.jobs[i].finish);
    shoal__sim_result_free(&r);
  }
  free(fin);
  shoal__workload_free(&w);
  shoal__cluster_destroy(c);
  shoal__speed_destroy(sp);
}

TEST_T(slotted_commit_on_arrival_invariants_and_determinism, 110) {
  const char *const pols[][2] = {{"larr", "slot=600:replan=0"}, {"greedy", "slot=600:replan=0"}, {"oasis", "slot=1800:units=16:replan=0"},
                                 {"greedy", "slot=600:replan=0:pull=1:nogap=1"}, {"oasis", "slot=1800:units=16:replan=0:pull=1:nogap=1"},
                                 {"greedy", "slot=600:replan=0:backfill=1"}, {"oasis", "slot=1800:units=16:replan=0:backfill=0"}};
  slotted_variants(pols, 7);
}

TEST_T(slotted_replanning_invariants_and_determinism, 110) {
  const char *const pols[][2] = {{"larr", "slot=600"}, {"greedy", "slot=600:replan=1"}, {"larr", "slot=600:estimate=1800"},
                                 {"larr", "slot=600:pull=1"}, {"larr", "slot=600:backfill=0"}, {"larr", "slot=600:backfill=1:pull=1"},
                                 {"larr", "slot=600:restart=1:hold=1:fit=0.5"}, {"greedy", "slot=600:restart=1:hold=1:fit=0.5"},
                                 {"larr", "slot=600:restart=0:fit=0"}, {"oasis", "slot=1800:units=16:replan=1"},
                                 {"oasis", "slot=1800:units=16:replan=1:restart=1:hold=1:fit=0.5"}};
  slotted_variants(pols, 11);
}

static int slurp(const char *path, char *buf, size_t cap, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  *len = fread(buf, 1, cap, f);
  fclose(f);
  return 0;
}

/* Same seed, same outputs: the per-job and timeline CSVs of two runs of
 * `shoal sim` (every policy, slotted ones included) are byte-identical. */
TEST_T(sim_same_seed_byte_identical_outputs, 90) {
  char dir[2][64], cmd[512], out[8192];
  for (int k = 0; k < 2; k++) {
    snprintf(dir[k], sizeof dir[k], "/tmp/shoal-ident-%d-%d", (int)getpid(), k);
    snprintf(cmd, sizeof cmd, "%s sim --synthetic 120 --load 1.5 --machines 4 --ps-fraction 0.3 --seed 7 --no-progress --out %s",
             shoal_test_cli(), dir[k]);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 80);
    CHECK_MSG(st == 0, "exit %d: %s", st, out);
  }
  static char a[1 << 20], b[1 << 20];
  int files = 0;
  for (int i = 0; shoal__policy_at(i); i++) {
    const char *kinds[] = {"jobs", "timeline"};
    for (int k = 0; k < 2; k++) {
      char pa[256], pb[256];
      size_t la, lb;
      snprintf(pa, sizeof pa, "%s/%s-%s.csv", dir[0], kinds[k], shoal__policy_at(i)->name);
      snprintf(pb, sizeof pb, "%s/%s-%s.csv", dir[1], kinds[k], shoal__policy_at(i)->name);
      CHECK_MSG(slurp(pa, a, sizeof a, &la) == 0, "%s missing", pa);
      CHECK_MSG(slurp(pb, b, sizeof b, &lb) == 0, "%s missing", pb);
      CHECK_MSG(la == lb && !memcmp(a, b, la), "%s and %s differ", pa, pb);
      files++;
      unlink(pa);
      unlink(pb);
    }
  }
  CHECK(files >= 18);
  snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir[0], dir[1]);
  CHECK(system(cmd) == 0);
}

/* Rates fitted to the speed model (fit=), by hand: two machines of 1 GPU, linear speed with a spread penalty
 * of 0.4 (2 workers over two machines run at 0.8, one worker alone at 1), slot 100 s, no restart cost. One
 * job of 2 GPUs (up to 2 workers), work 100. The rate at the requested size gives 0.4 per worker: the plan is
 * 2 workers in slot 0 (80) and 1 in slot 1 (20 of its 40): it runs 80 in 100 s, then 20 s alone: JCT 120.
 * Fitted: 0.4 is less than half of one worker's 1, so wmax = 1 at 1 per worker: 100 in slot 0, JCT 100. */
TEST(slotted_fit_rates_to_the_speed_model) {
  shoal_speed_t *sp = linear_speed(0.4);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 2, 1);
  const tjob_t t[] = {{0, 2, 50, 0}};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 1);
  const char *params[] = {"slot=100:backfill=0:fit=0", "slot=100:backfill=0:fit=0.5"};
  const double jct[] = {120, 100};
  for (int c = 0; c < 2; c++) {
    shoal_sim_result_t r;
    run_policy(&w, &cs, sp, "larr", params[c], 0, &r);
    CHECK_EQ(r.finished, 1);
    CHECK_JCT(&w, 0, jct[c]);
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  sp->destroy(sp);
}

/* A rigid parameter-server job (2 workers, 1 server, min_workers = gpus: its training cannot resume at
 * another worker count) on three 1-GPU machines beside two 1-GPU jobs, linear speed, slot 100 s, restart
 * cost 10 s. A: 150 s at t=0, B: 250 s at t=0, C: the ps job, 100 s (200 steps) at t=1. Slot 0 has one
 * machine free: a malleable plan gives C one worker there and grows it later. The planners give it both or
 * none: it runs with both workers from its start to its end, once (no resize, n_realloc 0: 100 s), and
 * --check holds every job to min_workers..max_workers at every step. Committing on arrival, C waits for A,
 * whose finish at t=150 frees a second machine (backfill: GPUs no plan holds in the current slot go to
 * planned jobs holding nothing there): 150-250, JCT 249. Re-planning may stop B for it instead. Each
 * planner, with and without re-planning. */
TEST(slotted_rigid_job_runs_all_its_workers_or_none) {
  shoal_speed_t *sp = linear_speed(1.0);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 3, 1);
  const tjob_t t[] = {{0, 1, 150, 0}, {0, 1, 250, 0}, {1, 2, 100, 0}};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, 3);
  shoal_job_t *c = &w.jobs[2];
  c->arch = SHOAL_ARCH_PS, c->ps = 1, c->min_workers = c->max_workers = 2;
  const char *const pols[][2] = {{"larr", "slot=100:replan=0"}, {"larr", "slot=100"},
                                 {"larr", "slot=100:hold=1:restart=1"}, {"greedy", "slot=100:replan=0"},
                                 {"greedy", "slot=100"}, {"oasis", "slot=100:replan=0"}, {"oasis", "slot=100"}};
  for (size_t q = 0; q < sizeof pols / sizeof pols[0]; q++) {
    shoal_sim_result_t r;
    printf("  %s:%s\n", pols[q][0], pols[q][1]);
    run_policy(&w, &cs, sp, pols[q][0], pols[q][1], 10, &r);
    CHECK_EQ(r.finished, 3);
    printf("    C: start %.3f finish %.3f reallocs %d machines %d; A %.3f B %.3f\n", c->first_start, c->finish,
           c->n_realloc, c->max_machines, w.jobs[0].finish, w.jobs[1].finish);
    CHECK_EQ(c->n_realloc, 0);
    CHECK_NEAR(c->finish - c->first_start, 100, 1e-6); /* both workers from its start to its end, no pause */
    if (!strcmp(pols[q][1], "slot=100:replan=0")) CHECK_JCT(&w, 2, 249);
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  sp->destroy(sp);
}

/* Starvation: the rigid job C of 2 workers on two 1-GPU machines behind A (1 GPU, 60 s at t=0) and a stream
 * of 1-GPU jobs of 30 s, one every 25 s from t=2 to t=977 (40 jobs: 1.2 of the 2 GPUs busy on average, at
 * least one busy at almost every moment), linear speed, slot 100 s, restart cost 10 s. Re-planning releases
 * C at every arrival (it is larger than the newcomer) and plans it behind the newcomer: with age=0 it starts
 * after the stream, at 1007. With the default (age=1: once it has waited its own 100 s it keeps its plan) it
 * starts by t=300 and runs its 100 s with both workers, once, under each planner and mode. */
TEST(slotted_rigid_job_is_not_starved) {
  shoal_speed_t *sp = linear_speed(1.0);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 2, 1);
  enum { N = 42 };
  tjob_t t[N] = {{0, 1, 60, 0}, {1, 2, 100, 0}};
  for (int i = 2; i < N; i++) t[i] = (tjob_t){2 + 25.0 * (i - 2), 1, 30, 0};
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  tiny_workload(&w, t, N);
  shoal_job_t *c = &w.jobs[1];
  c->arch = SHOAL_ARCH_PS, c->ps = 1, c->min_workers = c->max_workers = 2;
  const char *const pols[][2] = {{"larr", "slot=100:replan=0"}, {"larr", "slot=100"}, {"larr", "slot=100:hold=1"},
                                 {"larr", "slot=60:hold=1"},      {"greedy", "slot=100:replan=0"}, {"greedy", "slot=100"},
                                 {"oasis", "slot=100:replan=0"},  {"oasis", "slot=100"}};
  for (size_t q = 0; q < sizeof pols / sizeof pols[0]; q++) {
    shoal_sim_result_t r;
    printf("  %s:%s\n", pols[q][0], pols[q][1]);
    run_policy(&w, &cs, sp, pols[q][0], pols[q][1], 10, &r);
    CHECK_EQ(r.finished, N);
    printf("    C: start %.3f finish %.3f reallocs %d; last finish %.3f\n", c->first_start, c->finish, c->n_realloc,
           r.t_last);
    CHECK_MSG(c->first_start <= 300 + 1e-6, "C started at %.3f", c->first_start);
    CHECK_EQ(c->n_realloc, 0);
    CHECK_NEAR(c->finish - c->first_start, 100, 1e-6);
    shoal__sim_result_free(&r);
  }
  shoal_sim_result_t r; /* the guard off: C waits for the stream's end */
  run_policy(&w, &cs, sp, "larr", "slot=100:age=0", 10, &r);
  CHECK_EQ(r.finished, N);
  CHECK_MSG(c->first_start > 1000, "C started at %.3f", c->first_start);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  sp->destroy(sp);
}
