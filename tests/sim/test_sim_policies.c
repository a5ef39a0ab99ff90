/* Hand-computed scenarios, one or more per policy: exact expected JCTs.
 * Speed: linear (rate = GPUs), so a job with duration d alone on its
 * requested GPUs finishes in exactly d seconds. Timelines in comments. */
#include "simtest.h"

/* FIFO / YARN-CS on one 4-GPU machine.
 *  J0 t=0 4 GPUs 100 s: runs 0-100.  J1 t=10 2 GPUs 50 s, J2 t=20 1 GPU 30 s wait.
 *  t=100: J1 100-150, J2 100-130.  JCT: 100, 140, 110. */
TEST(fifo_hand_computed) {
  tjob_t t[] = {{0, 4, 100, 0}, {10, 2, 50, 0}, {20, 1, 30, 0}};
  shoal_workload_t w;
  tiny_workload(&w, t, 3);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  run_policy(&w, &cs, sp, "fifo", NULL, 30, &r);
  CHECK_JCT(&w, 0, 100);
  CHECK_JCT(&w, 1, 140);
  CHECK_JCT(&w, 2, 110);
  CHECK_EQ(r.preemptions, 0);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Backfill vs strict FIFO, 4 GPUs.
 *  J0 t=0 2 GPUs 100 s; J1 t=1 4 GPUs 10 s; J2 t=2 1 GPU 10 s.
 *  YARN-CS: J2 backfills at 2 -> 12; J1 at 100 -> 110. JCT 100, 109, 10.
 *  strict:  J2 waits behind J1; J1 100-110, J2 110-120. JCT 100, 109, 118. */
TEST(fifo_backfill_vs_strict) {
  tjob_t t[] = {{0, 2, 100, 0}, {1, 4, 10, 0}, {2, 1, 10, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 3);
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  CHECK_JCT(&w, 0, 100);
  CHECK_JCT(&w, 1, 109);
  CHECK_JCT(&w, 2, 10);
  /* metrics, whole run and the measurement window [1, 3) */
  shoal_metrics_t m;
  CHECK_OK(shoal__metrics_compute(&w, &r, &m));
  CHECK_EQ(m.jobs, 3);
  CHECK_NEAR(m.jct_avg, (100 + 109 + 10) / 3.0, 1e-9);
  CHECK_NEAR(m.jct_p50, 100, 1e-9);
  CHECK_NEAR(m.jct_p95, 100 + 0.9 * 9, 1e-9); /* NumPy linear: position 1.9 of [10, 100, 109] */
  CHECK_NEAR(m.makespan, 110, 1e-9);
  CHECK_NEAR(m.queue_avg, (0 + 99 + 0) / 3.0, 1e-9);
  /* busy GPU-s: 2x100 + 1x10 + 4x10 = 250 over 4 GPUs x 110 s */
  CHECK_NEAR(m.util, 250.0 / (4 * 110), 1e-9);
  CHECK_OK(shoal__metrics_compute_window(&w, &r, 1, 3, &m));
  CHECK_EQ(m.jobs, 2);
  CHECK_NEAR(m.jct_avg, (109 + 10) / 2.0, 1e-9);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "fifo", "strict=1", 0, &r);
  CHECK_JCT(&w, 0, 100);
  CHECK_JCT(&w, 1, 109);
  CHECK_JCT(&w, 2, 118);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* SRTF on 4 GPUs. J0 t=0 4 GPUs 100 s; J1 t=10 4 GPUs 20 s.
 *  t=10: J0 has 90 s left > 20: preempted; J1 runs 10-30 (first start: no cost).
 *  restart 0:  J0 resumes 30, finishes 120.          JCT 120, 20.
 *  restart 30: J0 restarts 30-60, runs 60-150.        JCT 150, 20. */
TEST(srtf_hand_computed) {
  tjob_t t[] = {{0, 4, 100, 0}, {10, 4, 20, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "srtf", NULL, 0, &r);
  CHECK_JCT(&w, 0, 120);
  CHECK_JCT(&w, 1, 20);
  CHECK_EQ(r.preemptions, 1);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "srtf", NULL, 30, &r);
  CHECK_JCT(&w, 0, 150);
  CHECK_JCT(&w, 1, 20);
  CHECK_EQ(w.jobs[0].n_preempt, 1);
  CHECK_EQ(w.jobs[0].n_realloc, 1);
  CHECK_NEAR(w.jobs[0].restart_s, 30, 1e-9);
  CHECK_NEAR(r.restart_gpu_s, 120, 1e-6);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* SRTF's tie rules on 3 GPUs, restart cost 0. J0 t=0 1 GPU 101 s; J1 t=0 1 GPU 190 s; J2 t=1 1 GPU 300 s;
 * J3 t=2 2 GPUs 200 s. t=2: J3 (200) ranks before J2 (299) but does not fit: J2 runs. t=101 (J0 ends): J2
 * and J3 both have 200 s left.
 *  ties=id:   J2 before J3: J2 keeps running, ends 301; J3 starts when J1 ends (190), ends 390. JCT 300, 388.
 *  ties=prev: J3 before J2 (the previous order): J3 runs 101-301, J2 is preempted and resumes at 190 (J1
 *             ends), 200 s left: ends 390. JCT 389, 299 (the Tiresias authors' simulator's answer). */
TEST(srtf_ties_by_id_or_previous_order) {
  tjob_t t[] = {{0, 1, 101, 0}, {0, 1, 190, 0}, {1, 1, 300, 0}, {2, 2, 200, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 3);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  const char *ties[] = {NULL, "ties=id", "ties=prev"};
  for (int k = 0; k < 3; k++) {
    tiny_workload(&w, t, 4);
    run_policy(&w, &cs, sp, "srtf", ties[k], 0, &r);
    int prev = k == 2;
    CHECK_JCT(&w, 0, 101);
    CHECK_JCT(&w, 1, 190);
    CHECK_JCT(&w, 2, prev ? 389 : 300);
    CHECK_JCT(&w, 3, prev ? 299 : 388);
    CHECK_EQ(r.preemptions, prev ? 1 : 0);
    shoal__sim_result_free(&r);
    shoal__workload_free(&w);
  }
  shoal__speed_destroy(sp);
}

/* Tiresias, 2 GPUs, thresholds=100 GPU-s (2 queues), no starvation guard.
 *  J0 t=0 2 GPUs 100 s (200 steps): Q0, runs; a = 2t reaches 100 at t=50.
 *  J1 t=10 2 GPUs 40 s: Q0 but J0 (running, Q0) comes first: waits.
 *  t=50 (exact timer): J0 -> Q1; J1 (Q0) runs 50-90, J0 preempted (100 steps done).
 *  t=90: J0 resumes, 100 steps at 2/s: done 140.  JCT 140, 80. */
TEST(tiresias_hand_computed) {
  tjob_t t[] = {{0, 2, 100, 0}, {10, 2, 40, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 2);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=0", 0, &r);
  CHECK_JCT(&w, 0, 140);
  CHECK_JCT(&w, 1, 80);
  CHECK_EQ(r.preemptions, 1);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* A policy that preempts every job before its restart ends never lets one
 * run (three 8-GPU jobs on 8 GPUs, Tiresias' own rule with thresholds of 100
 * and 200 GPU-s: demoted after 12.5 s of a 30 s restart): the run stops with
 * an error that says so instead of simulating forever. (The default thrash
 * guard lets each run last 4% of the job's earlier runs: the jobs finish.) */
TEST(livelocked_policy_is_an_error) {
  tjob_t t[] = {{1, 8, 1000, 0}, {2, 8, 1000, 0}, {3, 8, 1000, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 8);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 3);
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.restart_cost = 30;
  CHECK_EQ(shoal__sim_run(&w, &cs, sp, shoal__policy_find("tiresias"), "thresholds=100/200:starve=2:runfrac=0", &cfg, &r),
           SHOAL_ERR_UNSUPPORTED);
  CHECK_CONTAINS(shoal_last_error(), "lets no job progress");
  shoal__workload_reset(&w);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100/200", 30, &r);
  CHECK_EQ(r.finished, 3);
  shoal__sim_result_free(&r);
  /* the same jobs with thresholds above restart cost x GPUs finish */
  shoal__workload_reset(&w);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=3250/7200", 30, &r);
  CHECK_EQ(r.finished, 3);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
  /* Gavel's 100 s rounds with checkpoints every 600 s: each round's work is
   * lost at the next preemption, so from some point no job progresses */
  char cmd[512], out[16384];
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 1500 --load 3 --machines 16 --racks 4 --oversub 4 --ps-fraction 0.5 "
           "--checkpoint 600 --policy gavel:round=100 --no-progress 2>&1", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 60);
  CHECK_MSG(st != 0, "the stalled run ended with status 0: %s", out);
  CHECK_CONTAINS(out, "lets no job progress");
}

/* Tiresias starvation guard, 2 GPUs, thresholds=100, S=1.
 *  J0 t=0 2 GPUs 100 s (200 steps) runs; crosses to Q1 at t=50 (nobody waits).
 *  J1 t=60 2 GPUs 200 s (400 steps) enters Q0: runs, J0 preempted (120 steps done;
 *  executed 60 s since reset). J1 crosses to Q1 at t=110 but stays (running first).
 *  J0 waited 60 s >= 1 x 60 s at t=120: promoted to Q0, counters reset: J0 runs,
 *  J1 preempted (120 steps done). J0: 80 steps left -> done 160.
 *  J1 resumes at 160: 280 steps -> 300.   JCT 160, 240.
 *  With S=0 (off): J1 runs to 260; J0 resumes 260 -> 300.  JCT 300, 200. */
TEST(tiresias_starvation_guard) {
  tjob_t t[] = {{0, 2, 100, 0}, {60, 2, 200, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 2);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=1", 0, &r);
  CHECK_JCT(&w, 0, 160);
  CHECK_JCT(&w, 1, 240);
  CHECK_EQ(r.preemptions, 2);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "tiresias", "thresholds=100:starve=0", 0, &r);
  CHECK_JCT(&w, 0, 300);
  CHECK_JCT(&w, 1, 200);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Optimus, all-reduce jobs, 4 GPUs. J0 t=0 up to 4 GPUs, 400 steps; J1 t=0
 * up to 4 GPUs, 200 steps (durations 100 and 50 s at 4 GPUs).
 *  Both get 1 GPU; gains R/(w(w+1)) per GPU share: J0 400/2=200, J1 200/2=100:
 *  J0 -> 2 (next gain 400/6=66.7), J1 -> 2 (100 > 66.7); cluster full.
 *  J1: 200 steps at 2/s -> done 100. J0 at 100 has 200 left; alone it grows to 4.
 *  restart 0:  200/4 = 50 -> 150.      restart 30: 100-130 restart, -> 180. */
TEST(optimus_hand_computed) {
  tjob_t t[] = {{0, 4, 100, 0}, {0, 4, 50, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "optimus", NULL, 0, &r);
  CHECK_JCT(&w, 0, 150);
  CHECK_JCT(&w, 1, 100);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "optimus", NULL, 30, &r);
  CHECK_JCT(&w, 0, 180);
  CHECK_JCT(&w, 1, 100);
  CHECK_EQ(r.reallocations, 1);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Optimus, one PS job on a 4-GPU, 64-core machine (worker: 1 GPU 4 cores
 * 16 GB, share 0.25; PS: 4 cores 16 GB, share 0.0625). Speed W*min(1, 2P/W).
 * Start 1 worker + 1 PS (rate 1). +worker: rate 2, gain (400-200)/0.25 = 800;
 * +PS: not allowed (P <= W). Then +worker: W=3,P=1 rate 2: gain 0; +PS: W=2,P=2
 * rate 2: gain 0: stop at 2 workers + 1 PS: 400 steps at 2/s = 200 s. */
TEST(optimus_ps_workers_and_servers) {
  tjob_t t[] = {{0, 4, 100, 0}};
  shoal_workload_t w;
  tiny_workload(&w, t, 1);
  w.jobs[0].arch = SHOAL_ARCH_PS;
  w.jobs[0].ps = 2;
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  run_policy(&w, &cs, sp, "optimus", NULL, 0, &r);
  CHECK_JCT(&w, 0, 200);
  shoal__sim_result_free(&r);
  /* the same job under FIFO at its requested size: 4 workers + 2 PSs, rate 4: 100 s */
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  CHECK_JCT(&w, 0, 100);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* DRF vs FIFO, 4 GPUs, tenants A and B.
 *  J0 A t=0 4 GPUs 100 s; J1 A t=1 2 GPUs 10 s; J2 A t=2 2 GPUs 10 s; J3 B t=3 2 GPUs 10 s.
 *  t=100, DRF: shares A=0, B=0, tie -> oldest waiting job (J1, A): start J1 (A: 0.5);
 *  then B (0) < A: start J3; J2 waits to 110.   JCT: 100, 109, 118, 107.
 *  FIFO: J1, J2 at 100; J3 at 110.               JCT: 100, 109, 108, 117. */
TEST(drf_hand_computed) {
  tjob_t t[] = {{0, 4, 100, 0}, {1, 2, 10, 0}, {2, 2, 10, 0}, {3, 2, 10, 1}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 4);
  run_policy(&w, &cs, sp, "drf", NULL, 0, &r);
  CHECK_JCT(&w, 0, 100);
  CHECK_JCT(&w, 1, 109);
  CHECK_JCT(&w, 2, 118);
  CHECK_JCT(&w, 3, 107);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  CHECK_JCT(&w, 2, 108);
  CHECK_JCT(&w, 3, 117);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Gavel max-min fairness, rounds of 100 s, 2 GPUs, restart 0.
 *  J0, J1 t=0, 2 GPUs, 150 s each (300 steps). t=0: both new (infinite
 *  priority), tie by id: J0 runs. t=100 round: x = 2/4 = 0.5; J0 received
 *  100/100 -> 0.5, J1 0 -> inf: J1 runs. t=200: both 0.5/0.5 = 1, tie: J0
 *  runs, 100 steps left -> done 250; J1 backfills at 250, 100 left -> 300.
 *  JCT 250, 300. With restart 30: t=100 J1 starts (first start, free), J0
 *  pays 30 at t=200 (200-230 restart, runs 230-280): J0 280; J1 backfills
 *  at 280 with a restart (280-310), runs 310-360 ... rounds at 300 keep it.  */
TEST(gavel_hand_computed) {
  tjob_t t[] = {{0, 2, 150, 0}, {0, 2, 150, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 2);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "gavel", "round=100", 0, &r);
  CHECK_JCT(&w, 0, 250);
  CHECK_JCT(&w, 1, 300);
  CHECK_EQ(r.preemptions, 2);
  shoal__sim_result_free(&r);
  run_policy(&w, &cs, sp, "gavel", "round=100", 30, &r);
  CHECK_JCT(&w, 0, 280);
  CHECK_JCT(&w, 1, 360);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Placement changes speed: spread penalty 0.5. Two 2-GPU machines; J0 t=0 1 GPU
 * 100 s on machine 0 (best fit: both equal, lowest id); J1 t=0... 3 GPUs can
 * only be spread: 1 on machine 0 + 2 on machine 1: rate 3*0.5 = 1.5; work 3*60
 * = 180 -> 120 s. */
TEST(spread_placement_is_slower) {
  tjob_t t[] = {{0, 1, 100, 0}, {0, 3, 60, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 2, 2);
  shoal_speed_t *sp = linear_speed(0.5);
  shoal_sim_result_t r;
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  CHECK_JCT(&w, 0, 100);
  CHECK_JCT(&w, 1, 120);
  CHECK_EQ(w.jobs[1].max_machines, 2);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Checkpoint loss: SRTF preempts J0 after 10 s of run time; with checkpoints
 * every 4 s it loses the 2 s since the last one (8 steps at 4/s):
 * J0 t=0 4 GPUs 100 s (400 steps), J1 t=10 4 GPUs 20 s. J0 did 40 steps, keeps
 * 32; resumes at 30 (restart 0): 368/4 = 92 s -> 122. */
TEST(checkpoint_loss_on_preemption) {
  tjob_t t[] = {{0, 4, 100, 0}, {10, 4, 20, 0}};
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.restart_cost = 0;
  cfg.checkpoint_s = 4;
  cfg.check = 1;
  shoal_sim_result_t r;
  CHECK_OK(shoal__sim_run(&w, &cs, sp, shoal__policy_find("srtf"), NULL, &cfg, &r));
  CHECK_JCT(&w, 0, 122);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* ---- rack contention (spec §3.6) ----
 * A test policy that puts every job's workers one per machine on machines
 * 0 and 1, which sit in different racks (2 racks x 1 machine x 4 GPUs, NIC
 * 100 Gb/s, oversubscription 2: uplink 50 Gb/s per rack). Speed: W x B/100
 * across racks, B = min over the job's racks of uplink / x_k. */
static int across_schedule(void *state, shoal_sched_t *s) {
  for (int i = 0; i < s->nactive; i++) {
    shoal_job_t *j = s->active[i];
    if (j->alloc.n) continue;
    shoal_place_t p[2] = {{0, 1, 0}, {1, 1, 0}};
    int rc = shoal_sched_assign(s, j, p, 2);
    if (rc && rc != SHOAL_ERR_INFEASIBLE) return rc;
  }
  return 0;
}
static int across_create(shoal_sched_t *s, const char *params, void **state) {
  *state = NULL;
  return 0;
}
static void across_destroy(void *state) {}
static const shoal_policy_ops_t across_policy = {"across", "test", "", across_create, across_destroy, NULL, NULL, NULL,
                                                 across_schedule, NULL};

static double xrack_rate(const shoal_speed_t *s, const shoal_cluster_t *c, const shoal_job_t *j, const shoal_shape_t *sh) {
  if (sh->racks <= 1) return sh->workers;
  double b = sh->xrack_gbps > 0 ? sh->xrack_gbps : 100 / c->net.oversub;
  return sh->workers * (b < 100 ? b : 100) / 100;
}

/* J0 t=0 2 GPUs 100 steps; J1 t=10 2 GPUs 100 steps; both across the racks.
 *  J0 alone: x = 1 per rack, B = 50: rate 1. t=10: x = 2, B = 25: both 0.5.
 *  J0 has 90 left -> 180 s -> done 190. J1 did 90 by 190, then alone at rate 1:
 *  10 s -> 200.   JCT 190 and 190. Without the second job J0 would end at 100. */
TEST(rack_contention_shares_uplinks) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 2;
  cs.group[0].racks = 2;
  cs.group[0].per_machine.gpus = 4;
  cs.group[0].nic_gbps = 100;
  cs.net.oversub = 2;
  shoal_speed_t *sp = linear_speed(1);
  sp->rate = xrack_rate;
  tjob_t t[] = {{0, 2, 50, 0}, {10, 2, 50, 0}};
  shoal_workload_t w;
  tiny_workload(&w, t, 2);
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.check = 1;
  shoal_sim_result_t r;
  CHECK_OK(shoal__sim_run(&w, &cs, sp, &across_policy, NULL, &cfg, &r));
  CHECK_JCT(&w, 0, 190);
  CHECK_JCT(&w, 1, 190);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Effective utilization counts a resized job at its real per-GPU efficiency: on the linear model every
 * worker runs at the reference per-GPU speed whatever the job's size, so with no restart cost the effective
 * GPU-seconds are the busy ones, also while elastic runs jobs on fewer GPUs than they asked for (counted at
 * workers / requested of it before). */
TEST(effective_utilization_of_resized_jobs) {
  static const tjob_t t[] = {{0, 4, 100, 0}, {1, 4, 100, 0}, {2, 2, 50, 0}};
  shoal_workload_t w;
  tiny_workload(&w, t, 3);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 4);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  run_policy(&w, &cs, sp, "elastic", NULL, 0, &r);
  int resized = 0;
  for (int i = 0; i < 3; i++) resized += w.jobs[i].n_realloc + w.jobs[i].n_preempt;
  CHECK_MSG(resized > 0, "no job was resized or preempted: the scenario tests nothing");
  CHECK_MSG(r.busy_gpu_s > 0 && fabs(r.eff_gpu_s - r.busy_gpu_s) < 1e-6 * r.busy_gpu_s,
            "effective %.6f GPU-s against %.6f busy", r.eff_gpu_s, r.busy_gpu_s);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}
