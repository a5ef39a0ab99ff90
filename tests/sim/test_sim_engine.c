/* Engine properties: exact lone-job completion, invariants on random
 * workloads for every policy, determinism, GPU-time conservation, the full
 * Philly trace under FIFO on a cluster that never queues. */
#include <stdio.h>
#include <unistd.h>

#include "shoal/sched.h"
#include "shoal/sim.h"
#include "simtest.h"

#define PHILLY "../shared/data/philly/philly.csv"
#define GAVEL "../shared/data/gavel/throughputs.json"

/* A lone job with n GPUs consolidated finishes in exactly its duration, for
 * both speed models and any model type (spec §2 test). */
TEST(lone_job_finishes_at_duration) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(&cs, &c));
  shoal_speed_t *models[2] = {NULL, NULL};
  CHECK_OK(shoal__speed_analytic_create(&models[0]));
  if (access(GAVEL, R_OK) == 0) CHECK_OK(shoal__speed_table_create(GAVEL, "v100", 1, &models[1]));
  int sizes[] = {1, 2, 4, 8, 16, 64};
  for (int m = 0; m < 2; m++) {
    if (!models[m]) continue;
    for (int si = 0; si < 6; si++)
      for (long row = 1; row <= 5; row++) {
        shoal_workload_t w;
        CHECK_OK(shoal__workload_alloc(&w, 1));
        CHECK(shoal__workload_vc(&w, "x") == 0);
        w.jobs[0].gpus = sizes[si];
        w.jobs[0].max_workers = sizes[si];
        w.jobs[0].duration = 1234.5;
        w.jobs[0].row = row;
        w.jobs[0].arrival = 77;
        shoal__workload_finalize(&w);
        shoal_workload_opts_t o;
        shoal__workload_opts_default(&o);
        o.ps_fraction = row == 5 ? 1.0 : 0; /* one PS job per size too */
        CHECK_OK(shoal__workload_assign_models(&w, models[m], c, &o));
        const char *pols[] = {"fifo", "srtf", "tiresias", "drf", "gavel"};
        for (int p = 0; p < 5; p++) {
          shoal_sim_result_t r;
          run_policy(&w, &cs, models[m], pols[p], NULL, 30, &r);
          CHECK_MSG(fabs(w.jobs[0].finish - 1234.5) < 1e-6, "%s model %s size %d policy %s: finish %.9f", models[m]->name,
                    models[m]->models[w.jobs[0].model].name, sizes[si], pols[p], w.jobs[0].finish);
          shoal__sim_result_free(&r);
        }
        shoal__workload_free(&w);
      }
  }
  shoal__speed_destroy(models[0]);
  shoal__speed_destroy(models[1]);
  shoal__cluster_destroy(c);
}

static void synth(shoal_workload_t *w, long n, double load, int gpus, uint64_t seed, double ps_fraction,
                  const shoal_speed_t *sp, const shoal_cluster_spec_t *cs) {
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.synth_jobs = n;
  o.load = load;
  o.cluster_gpus = gpus;
  o.max_gpus = gpus;
  o.seed = seed;
  o.ps_fraction = ps_fraction;
  CHECK_OK(shoal__synth_generate(&o, w));
  shoal_cluster_t *c;
  CHECK_OK(shoal__cluster_create(cs, &c));
  CHECK_OK(shoal__workload_assign_models(w, sp, c, &o));
  shoal__cluster_destroy(c);
}

/* Invariants (capacity, each job finishes exactly once, no work lost beyond
 * restarts, time monotone, bookkeeping) on contended random workloads, every
 * policy, several seeds, with PS jobs and restart costs. The engine checks
 * them at every step (cfg.check) and fails the run otherwise. */
TEST_T(invariants_random_workloads, 120) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 8;
  cs.group[0].racks = 2;
  cs.group[0].per_machine.gpus = 4;
  cs.group[0].per_machine.cpus = 24; /* CPU-bound PS packing */
  cs.net.oversub = 2;                /* rack contention changes rates */
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (uint64_t seed = 1; seed <= 3; seed++) {
    shoal_workload_t w;
    synth(&w, 400, 2.0, 32, seed, seed == 3 ? 0.3 : 0.0, sp, &cs);
    for (int p = 0; shoal__policy_at(p); p++) {
      shoal_sim_result_t r;
      run_policy(&w, &cs, sp, shoal__policy_at(p)->name, NULL, seed == 2 ? 0 : 30, &r);
      CHECK_EQ(r.finished, w.njobs);
      double gpu_s = 0;
      for (long i = 0; i < w.njobs; i++) {
        const shoal_job_t *j = &w.jobs[i];
        CHECK(j->state == SHOAL_JOB_DONE);
        CHECK(j->finish >= j->first_start && j->first_start >= j->arrival);
        CHECK(j->finish - j->arrival >= j->run_s + j->restart_s - 1e-6);
        gpu_s += j->gpu_s;
      }
      CHECK_NEAR(gpu_s, r.busy_gpu_s, 1e-6 * gpu_s);
      shoal__sim_result_free(&r);
    }
    shoal__workload_free(&w);
  }
  shoal__speed_destroy(sp);
}

/* Rack contention with more racks than the 64 bits of a job's rack mask
 * (masks alias racks) and jobs spanning more racks than a rating record
 * keeps (the share is then read from the allocation): one machine of 2 GPUs
 * per rack, so most jobs cross racks. The engine's check recounts x_k from
 * the running jobs and compares every running job's rate with its last
 * rating at every step. */
TEST_T(invariants_many_racks, 120) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 70;
  cs.group[0].racks = 70;
  cs.group[0].per_machine.gpus = 2;
  cs.net.oversub = 4;
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  shoal_workload_t w;
  synth(&w, 400, 3.0, 140, 5, 0.2, sp, &cs);
  const char *pols[] = {"fifo", "tiresias", "srtf", "gavel", "optimus"};
  for (int p = 0; p < 5; p++) {
    shoal_sim_result_t r;
    run_policy(&w, &cs, sp, pols[p], NULL, 30, &r);
    CHECK_EQ(r.finished, w.njobs);
    int wide = 0; /* jobs that ran over more racks than a rating record keeps */
    for (long i = 0; i < w.njobs; i++) wide += w.jobs[i].max_machines > 8;
    if (p < 4) CHECK_MSG(wide > 0, "%s: no job spanned more than 8 racks", pols[p]); /* optimus sizes jobs down */
    shoal__sim_result_free(&r);
  }
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* Same seed => identical per-job results (bit for bit). */
TEST(determinism_same_seed) {
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  cs.group[0].machines = 4;
  cs.group[0].racks = 2;
  shoal_speed_t *sp;
  CHECK_OK(shoal__speed_analytic_create(&sp));
  for (int p = 0; shoal__policy_at(p); p++) {
    double *fin[2];
    for (int k = 0; k < 2; k++) {
      shoal_workload_t w;
      synth(&w, 300, 1.5, 32, 42, 0.2, sp, &cs);
      shoal_sim_result_t r;
      run_policy(&w, &cs, sp, shoal__policy_at(p)->name, NULL, 30, &r);
      fin[k] = malloc((size_t)w.njobs * sizeof(double));
      for (long i = 0; i < w.njobs; i++) fin[k][i] = w.jobs[i].finish;
      CHECK(w.njobs == 300);
      shoal__sim_result_free(&r);
      shoal__workload_free(&w);
    }
    CHECK_MSG(!memcmp(fin[0], fin[1], 300 * sizeof(double)), "policy %s: runs differ", shoal__policy_at(p)->name);
    free(fin[0]);
    free(fin[1]);
  }
  shoal__speed_destroy(sp);
}

/* Synthetic generator: fitted statistics come out (GPU mix, median duration,
 * offered load) and the load knob scales the arrival rate. */
TEST(synthetic_matches_philly_statistics) {
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  o.synth_jobs = 200000;
  o.cluster_gpus = 2048;
  o.load = 0.5;
  shoal_workload_t w;
  CHECK_OK(shoal__synth_generate(&o, &w));
  long single = 0;
  double gpu_s = 0;
  double *d1 = malloc(200000 * sizeof(double));
  long n1 = 0;
  for (long i = 0; i < w.njobs; i++) {
    single += w.jobs[i].gpus == 1;
    gpu_s += w.jobs[i].gpus * w.jobs[i].duration;
    if (w.jobs[i].gpus == 1) d1[n1++] = w.jobs[i].duration;
  }
  CHECK_NEAR((double)single / w.njobs, 76627.0 / 82247, 0.005);
  double span = w.jobs[w.njobs - 1].arrival;
  CHECK_NEAR(gpu_s / span / 2048, 0.5, 0.1); /* offered load, heavy tail: loose */
  shoal__workload_free(&w);
  free(d1);
}

/* Spec §4 test: Philly on 2,048 GPUs (>= 1,243 = peak demand), FIFO: no
 * queueing, JCT = duration for every job, allocated GPU-s = sum gpu_time
 * (no penalty: with the linear model placement does not matter). */
TEST_T(philly_fifo_never_queues, 60) {
  if (access(PHILLY, R_OK) != 0) shoal_test_skip(PHILLY " not available");
  shoal_workload_opts_t o;
  shoal__workload_opts_default(&o);
  shoal_workload_t w;
  shoal_speed_t *sp = linear_speed(1);
  CHECK_OK(shoal__trace_read(PHILLY, &o, sp, &w));
  CHECK_EQ(w.njobs, 82247);
  for (long i = 0; i < w.njobs; i++) {
    w.jobs[i].model = 0;
    w.jobs[i].work = w.jobs[i].duration * w.jobs[i].gpus;
  }
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs); /* 256 x 8 = 2048 GPUs */
  shoal_sim_result_t r;
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  CHECK_OK(shoal__sim_run(&w, &cs, sp, shoal__policy_find("fifo"), NULL, &cfg, &r));
  double gt = 0;
  for (long i = 0; i < w.njobs; i++) {
    const shoal_job_t *j = &w.jobs[i];
    CHECK_MSG(j->first_start == j->arrival, "job %ld queued", i);
    CHECK_MSG(fabs(j->finish - j->arrival - j->duration) <= 1e-6 * j->duration, "job %ld: JCT %.9f != %.9f", i,
              j->finish - j->arrival, j->duration);
    gt += j->duration * j->gpus;
  }
  CHECK_NEAR(r.busy_gpu_s, gt, 1e-6 * gt);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* The CLI: comparison table, output files, determinism of jobs CSV. */
TEST_T(cli_sim_outputs_and_determinism, 60) {
  char cmd[1024], out[16384];
  const char *dir = "/tmp/shoal-test-sim-cli";
  for (int k = 0; k < 2; k++) {
    snprintf(cmd, sizeof cmd,
             "rm -rf %s%d && %s sim --synthetic 300 --load 1.5 --machines 8 --racks 2 --policy fifo,srtf,tiresias:starve=1 "
             "--seed 7 --out %s%d --check",
             dir, k, shoal_test_cli(), dir, k);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
    CHECK_MSG(st == 0, "%s\n%s", cmd, out);
  }
  CHECK_CONTAINS(out, "avgJCT");
  CHECK_CONTAINS(out, "tiresias:starve=1");
  snprintf(cmd, sizeof cmd,
           "cmp %s0/jobs-srtf.csv %s1/jobs-srtf.csv && cmp %s0/jobs-tiresias_starve_1.csv %s1/jobs-tiresias_starve_1.csv && "
           "test -s %s0/summary.json && grep -q '<svg' %s0/jct_cdf.svg && grep -q polyline %s0/utilization.svg",
           dir, dir, dir, dir, dir, dir, dir);
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 10) == 0, "%s\n%s", cmd, out);
  snprintf(cmd, sizeof cmd, "rm -rf %s0 %s1", dir, dir);
  shoal_test_run_cmd(cmd, out, sizeof out, 10);
  /* bad arguments: clear errors, no crash */
  snprintf(cmd, sizeof cmd, "%s sim --policy nosuch --synthetic 10 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0);
  CHECK_CONTAINS(out, "unknown policy 'nosuch'");
  snprintf(cmd, sizeof cmd, "%s sim --policy tiresias:bogus=1 --synthetic 10 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0);
  CHECK_CONTAINS(out, "unknown parameter 'bogus'");
  snprintf(cmd, sizeof cmd, "%s sim --machines abc 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0);
  CHECK_CONTAINS(out, "--machines='abc'");
}

/* The public entry point gives the same numbers as the internal run. */
TEST(public_api_shoal_sim_run) {
  shoal_sim_options_t o = {0};
  o.synthetic_jobs = 200;
  o.policy = "tiresias:starve=0";
  o.restart_cost_s = -1;
  o.seed = 5;
  shoal_sim_report_t a, b;
  CHECK_OK(shoal_sim_run(&o, &a));
  CHECK_OK(shoal_sim_run(&o, &b));
  CHECK_EQ(a.jobs, 200);
  CHECK(a.jct_avg_s > 0 && a.jct_avg_s == b.jct_avg_s && a.jct_p99_s >= a.jct_p50_s);
  o.policy = "nosuch";
  CHECK_EQ(shoal_sim_run(&o, &a), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "unknown policy 'nosuch'");
  o.policy = "fifo";
  o.trace = "/nonexistent.csv";
  CHECK_EQ(shoal_sim_run(&o, &a), SHOAL_ERR_IO);
  CHECK_CONTAINS(shoal_last_error(), "/nonexistent.csv");
}

/* shoal_sim_run checks its options like shoal sim does: out-of-range values
 * are errors naming the field (never silently replaced by the default), the
 * report stays untouched; a policy string of any length is taken whole. */
TEST(public_api_validates_options) {
  shoal_sim_options_t o = {0};
  o.synthetic_jobs = 30;
  o.policy = "fifo";
  o.restart_cost_s = -1;
  shoal_sim_report_t a, keep;
  memset(&a, 0x5a, sizeof a);
  keep = a;
  struct {
    const char *field;
    long jobs;
    double load, restart;
  } bad[] = {{"load", 30, NAN, -1},       {"load", 30, -1, -1},          {"load", 30, 1000, -1},
             {"synthetic_jobs", -5, 0, -1}, {"restart_cost_s", 30, 0, INFINITY}, {"restart_cost_s", 30, 0, NAN}};
  for (int i = 0; i < 6; i++) {
    o.synthetic_jobs = bad[i].jobs;
    o.load = bad[i].load;
    o.restart_cost_s = bad[i].restart;
    CHECK_EQ(shoal_sim_run(&o, &a), SHOAL_ERR_INVALID);
    CHECK_CONTAINS(shoal_last_error(), bad[i].field);
    CHECK(!memcmp(&a, &keep, sizeof a));
  }
  /* NULL options, report or policy */
  CHECK_EQ(shoal_sim_run(NULL, &a), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_sim_run(&o, NULL), SHOAL_ERR_INVALID);
  o.policy = NULL;
  CHECK_EQ(shoal_sim_run(&o, &a), SHOAL_ERR_INVALID);
  CHECK(!memcmp(&a, &keep, sizeof a));
  o.policy = "fifo";
  /* defaults: 0 jobs/load and a negative restart cost */
  o.synthetic_jobs = 30;
  o.load = 0;
  o.restart_cost_s = -1;
  CHECK_OK(shoal_sim_run(&o, &a));
  CHECK_EQ(a.jobs, 30);
  /* a long policy string is not truncated: the last threshold (not a
   * number once cut at 127 characters) makes it an error */
  char pol[256];
  snprintf(pol, sizeof pol, "tiresias:thresholds=3250/7200.%0110d/bogus", 0);
  o.policy = pol;
  CHECK_EQ(shoal_sim_run(&o, &a), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "bogus");
  /* the CLI keeps names of at most 127 characters: longer is an error, not a truncated name */
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --policy '%s' --no-progress 2>&1", shoal_test_cli(), pol);
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "characters long (at most 127 per policy)");
}

/* A run cut by --horizon: the utilization's numerator and span cover the
 * same interval [first arrival, horizon], so it never exceeds 1. Two
 * machines of 8 GPUs; FIFO runs jobs 0 and 1 at t=0 (job 0 ends at 100),
 * job 2 starts at its arrival 4000; the horizon 5000 cuts jobs 1 and 2:
 * busy = 8*100 + 8*5000 + 8*1000 GPU-s over 16 GPUs x 5000 s. */
TEST(horizon_utilization_same_interval) {
  tjob_t t[] = {{0, 8, 100, 0}, {0, 8, 10000, 0}, {4000, 8, 10000, 0}};
  shoal_workload_t w = {0};
  tiny_workload(&w, t, 3);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 2, 8);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.horizon_s = 5000;
  cfg.check = 1;
  shoal_sim_result_t r;
  CHECK_OK(shoal__sim_run(&w, &cs, sp, shoal__policy_find("fifo"), NULL, &cfg, &r));
  CHECK_EQ(r.unfinished, 2);
  CHECK_NEAR(r.t_end, 5000, 1e-9);
  CHECK_NEAR(r.busy_gpu_s, 48800, 1e-6);
  shoal_metrics_t m;
  CHECK_OK(shoal__metrics_compute(&w, &r, &m));
  CHECK_NEAR(m.util, 48800.0 / (16 * 5000), 1e-9);
  CHECK(m.util <= 1);
  /* the unfinished jobs' progress is accounted up to the horizon too */
  CHECK_NEAR(w.jobs[1].run_s, 5000, 1e-6);
  CHECK_NEAR(w.jobs[2].run_s, 1000, 1e-6);
  shoal__sim_result_free(&r);
  /* without a horizon the span stays first arrival .. last completion */
  cfg.horizon_s = 0;
  CHECK_OK(shoal__sim_run(&w, &cs, sp, shoal__policy_find("fifo"), NULL, &cfg, &r));
  CHECK_NEAR(r.t_end, 14000, 1e-9);
  CHECK_OK(shoal__metrics_compute(&w, &r, &m));
  CHECK_NEAR(m.util, (800 + 80000 + 80000) / (16.0 * 14000), 1e-9);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* The "nothing at stake" warning fires only when every job, under every
 * policy, started at its arrival, finished and was never preempted or
 * reallocated: not when preemptive policies preempt without any first-start
 * wait, nor when jobs are still queued at --horizon. */
TEST_T(cli_uncontended_warning_only_when_nothing_at_stake, 60) {
  char cmd[1024], out[16384];
  const char *warn = "policies cannot differ";
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 20 --policy fifo,srtf --no-progress --csv 2>&1", shoal_test_cli());
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "%s\n%s", cmd, out);
  CHECK_CONTAINS(out, warn);
  /* preemptions, no first-start wait */
  snprintf(cmd, sizeof cmd,
           "%s sim --synthetic 50 --machines 2 --load 2 --policy tiresias,tiresias:thresholds=100 --no-progress --csv 2>&1",
           shoal_test_cli());
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "%s\n%s", cmd, out);
  CHECK_MSG(strstr(out, warn) == NULL, "warned with preemptions:\n%s", out);
  /* a job still queued at the horizon */
  const char *trace = "/tmp/shoal-test-sim-warn.csv";
  FILE *f = fopen(trace, "w");
  CHECK(f != NULL);
  fprintf(f, "arrival,gpus,duration\n0,8,100\n1,8,100\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s sim --trace %s --machines 1 --policy fifo --horizon 50 --no-progress --csv 2>&1",
           shoal_test_cli(), trace);
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "%s\n%s", cmd, out);
  CHECK_MSG(strstr(out, warn) == NULL, "warned with a job queued at the horizon:\n%s", out);
  remove(trace);
}

/* The timeline has no duplicated last row: the final row is added only when
 * the last event's row was not recorded (3 jobs within 600 s: rows at 0 and
 * at the last event only). */
TEST(timeline_last_row_not_duplicated) {
  tjob_t t[] = {{0, 8, 100, 0}, {10, 8, 100, 0}, {20, 8, 1000, 0}};
  shoal_workload_t w = {0};
  tiny_workload(&w, t, 3);
  shoal_cluster_spec_t cs;
  one_machine(&cs, 1, 8);
  shoal_speed_t *sp = linear_speed(1);
  shoal_sim_result_t r;
  run_policy(&w, &cs, sp, "fifo", NULL, 0, &r);
  /* FIFO: 0..100, 100..200, 200..1200; rows at 0, 1200 (the first event >= 600 s later, also the last) */
  CHECK_EQ(r.ntimeline, 2);
  for (int i = 1; i < r.ntimeline; i++) CHECK_MSG(r.timeline[i].t > r.timeline[i - 1].t, "row %d repeats t=%g", i, r.timeline[i].t);
  CHECK_NEAR(r.timeline[1].t, 1200, 1e-9);
  CHECK_EQ(r.timeline[1].busy, 0);
  shoal__sim_result_free(&r);
  shoal__workload_free(&w);
  shoal__speed_destroy(sp);
}

/* CLI odds and ends: --sample is an error with --synthetic; a --report-jobs
 * window past the last job warns; summary.json carries `waited` like the CSV;
 * --help lists every file --out writes. */
TEST_T(cli_sample_window_waited_help, 60) {
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --sample 5 --no-progress 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "--sample applies to a Philly trace only");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --report-jobs 20:30 --policy fifo --no-progress --csv 2>&1", shoal_test_cli());
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 20) == 0, "%s", out);
  CHECK_CONTAINS(out, "--report-jobs 20:30: the workload has 10 jobs, the window is empty");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 10 --report-jobs 5:30 --policy fifo --no-progress --csv 2>&1", shoal_test_cli());
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 20) == 0, "%s", out);
  CHECK_CONTAINS(out, "the window is jobs 5..9");
  const char *dir = "/tmp/shoal-test-sim-waited";
  snprintf(cmd, sizeof cmd,
           "rm -rf %s && %s sim --synthetic 40 --machines 1 --load 3 --policy fifo --no-progress --out %s >/dev/null 2>&1 && "
           "cat %s/summary.json",
           dir, shoal_test_cli(), dir, dir);
  CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "%s", out);
  CHECK_CONTAINS(out, "\"waited\": ");
  CHECK_MSG(strstr(out, "\"waited\": 0,") == NULL, "no job waited on one machine at load 3:\n%s", out);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  shoal_test_run_cmd(cmd, out, sizeof out, 10);
  snprintf(cmd, sizeof cmd, "%s sim --help 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 10) == 0);
  CHECK_CONTAINS(out, "queue_cdf.svg");
  CHECK_CONTAINS(out, "ftf_cdf.svg");
}

/* Runs that could not end: a job longer than the slot planners' horizon (hmax slots) was deferred at every
 * slot for ever; a job that fits no machine kept Gavel's rounds and the planners' slot timers going on an
 * idle cluster; a cluster without GPUs ran every job nowhere. Each ends now: the long job finishes, the
 * job that fits nowhere is left unfinished with a warning (as under FIFO), the GPU-less cluster is an
 * error. The 50 s bound per run is a hang check. */
TEST_T(sim_runs_that_never_ended_end, 240) {
  char cmd[1024], out[8192];
  const char *dir = "/tmp/shoal-test-sim-ends";
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s && printf 'timestamp,duration,num_gpus,gpu_time,cluster\\n2017-10-09 07:01:55,7.5e6,1,7.5e6,vc1\\n' "
           "> %s/long.csv && printf 'timestamp,duration,num_gpus,gpu_time,cluster\\n2017-10-09 07:01:55,66,1,66,vc1\\n"
           "2017-10-09 07:02:55,100,2,200,vc2\\n' > %s/two.csv", dir, dir, dir);
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 10), 0);
  snprintf(cmd, sizeof cmd, "%s sim --trace %s/long.csv --machines 1 --policy larr,oasis,greedy --csv 2>&1",
           shoal_test_cli(), dir);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0 && strstr(out, "-,larr,1,0,7500000.000") && strstr(out, "-,oasis,1,0,") &&
                strstr(out, "-,greedy,1,0,7500000.000"), "long job: status %d: %s", st, out); /* 1 job, 0 unfinished */
  snprintf(cmd, sizeof cmd, "%s sim --trace %s/two.csv --machines 2 --cpus-per-machine 2 --policy gavel,larr 2>&1",
           shoal_test_cli(), dir);
  st = shoal_test_run_cmd(cmd, out, sizeof out, 100);
  CHECK_MSG(st == 0, "never fits: status %d: %s", st, out);
  CHECK_CONTAINS(out, "policy gavel: 2 jobs wait on an idle cluster with no job left to arrive");
  CHECK_CONTAINS(out, "policy larr: 2 jobs wait on an idle cluster");
  snprintf(cmd, sizeof cmd, "%s sim --trace %s/two.csv --gpus-per-machine 0 --policy fifo 2>&1", shoal_test_cli(), dir);
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "no GPU (gpus_per_machine = 0 everywhere)");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  shoal_test_run_cmd(cmd, out, sizeof out, 10);
}

/* Each case: `shoal sim` with fmt's arguments, the case's text in place of its %s, must fail with the
 * case's message in its output. */
typedef struct { const char *arg, *want; } cli_case_t;
static void cli_errors(const char *fmt, const cli_case_t *cases, size_t n) {
  char args[512], cmd[1024], out[4096];
  for (size_t i = 0; i < n; i++) {
    snprintf(args, sizeof args, fmt, cases[i].arg);
    snprintf(cmd, sizeof cmd, "%s sim %s 2>&1", shoal_test_cli(), args);
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
    CHECK_MSG(st != 0, "%s: accepted: %s", cases[i].arg, out);
    CHECK_MSG(strstr(out, cases[i].want) != NULL, "%s: expected \"%s\" in: %s", cases[i].arg, cases[i].want, out);
  }
}

/* Policy strings: a key given twice, a key without a value, a value too long for its parameter, an empty
 * Tiresias threshold and an empty policy name are errors (the first value won, a cut value was used, an
 * empty threshold was skipped, an empty list ran nothing). */
TEST_T(cli_policy_strings_refused, 60) {
  static const cli_case_t cases[] = {
      {"larr:slot=600:slot=-1", "parameter 'slot' given twice"},
      {"tiresias:thresholds=", "parameter 'thresholds' has no value"},
      {"tiresias:thresholds=100//800", "thresholds=100//800: an empty value"},
      {"larr:slot=6000000000000000000000000000000000000000000000000000000000000000000", "longer than 63 characters"},
      {"''", "--policy '': an empty policy name"},
      {"fifo,,srtf", "--policy 'fifo,,srtf': an empty policy name"},
  };
  cli_errors("--synthetic 20 --machines 4 --policy %s", cases, sizeof cases / sizeof cases[0]);
}

/* A job CSV whose numbers would never simulate to the end (an arrival 1e12 s away, work for 1e16 s) or that
 * has no job is an error naming the file (and the row). */
TEST_T(cli_trace_bounds, 60) {
  static const char *const texts[] = {"arrival,gpus,duration\n1e12,1,10\n0,1,1\n", "arrival,gpus,work\n0,1,1e18\n",
                                      "arrival,gpus,duration\n"};
  static const cli_case_t cases[] = {
      {"/tmp/shoal-test-trace-bounds-0.csv", "field 'arrival' = '1e12': out of range [0, 1e+10]"},
      {"/tmp/shoal-test-trace-bounds-1.csv", "row 2: work 1e+18 steps takes"},
      {"/tmp/shoal-test-trace-bounds-2.csv", "a header and no job"},
  };
  for (int i = 0; i < 3; i++) {
    FILE *f = fopen(cases[i].arg, "w");
    CHECK(f && fputs(texts[i], f) >= 0 && fclose(f) == 0);
  }
  cli_errors("--trace %s --policy fifo", cases, 3);
  for (int i = 0; i < 3; i++) unlink(cases[i].arg);
}

/* Options that apply to another input or model are refused, not ignored. */
TEST_T(cli_options_for_another_input_refused, 30) {
  static const cli_case_t cases[] = {
      {"--window 0:100", "--window applies to a Philly trace only"},
      {"--pollux-filter", "--pollux-filter applies to a Philly trace only"},
      {"--gpu k80", "--gpu applies to --speed table only"},
      {"--throughputs /nonexistent.json", "--throughputs applies to --speed table only"},
  };
  cli_errors("--synthetic 10 %s --policy fifo", cases, sizeof cases / sizeof cases[0]);
}

/* The named Philly scenarios find the trace beside the repository the binary was built in from any
 * directory; a binary elsewhere, with no trace in reach, stops naming where it looked. */
TEST_T(cli_scenario_finds_the_philly_trace, 60) {
  if (access("../shared/data/philly/philly.csv", R_OK)) shoal_test_skip("no ../shared/data/philly/philly.csv here");
  char cli[1024], cmd[2400], out[8192];
  if (!realpath(shoal_test_cli(), cli)) shoal_test_skip("cannot resolve the CLI's path");
  snprintf(cmd, sizeof cmd, "cd / && %s sim --scenario pollux --policy fifo --no-progress --csv", cli);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0, "from /: exit %d: %s", st, out);
  CHECK_CONTAINS(out, "-,fifo,160,");
  char tmp[] = "/tmp/shoal-scen-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  snprintf(cmd, sizeof cmd, "cp %s %s/shoal && cd %s && ./shoal sim --scenario philly-busy --policy fifo --no-progress", cli,
           tmp, tmp);
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 2, "a binary with no trace in reach: status %d: %s", st, out);
  CHECK_CONTAINS(out, "--scenario philly-busy needs the Philly trace");
  CHECK_CONTAINS(out, "give it with --trace FILE");
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  if (system(cmd)) {
  }
}

/* The scenario line names exactly the scenario's settings the command line replaced, in the scenario's order. */
TEST_T(cli_scenario_names_replaced_settings, 60) {
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "%s sim --scenario synthetic --machines 8 --synthetic 30 --policy fifo --no-progress",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "scenario: synthetic (");
  CHECK_CONTAINS(out, "; replaced by the command line: --synthetic --machines\n");
  snprintf(cmd, sizeof cmd, "%s sim --scenario synthetic --synthetic 30 --policy fifo --no-progress", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "; replaced by the command line: --synthetic\n");
}

/* Every policy, the slot planners included, runs a job within min_workers..max_workers (a rigid job,
 * min = max, at its size): the engine's --check holds them to it on jobs of every kind of range. */
TEST_T(sim_policies_keep_jobs_in_their_elastic_range, 120) {
  const char *trace = "/tmp/shoal-test-minmax.csv";
  FILE *f = fopen(trace, "w");
  CHECK(f != NULL);
  fprintf(f, "arrival,gpus,duration,min_workers,max_workers\n0,4,3600,4,4\n10,2,7200,2,2\n20,4,1800,1,4\n"
             "30,1,900,1,1\n40,8,3600,2,8\n50,3,2000,3,6\n60,2,500,1,2\n");
  fclose(f);
  for (int i = 0; shoal_policy_name(i); i++) {
    char cmd[768], out[8192];
    snprintf(cmd, sizeof cmd, "%s sim --trace %s --machines 2 --gpus-per-machine 4 --policy %s --check --no-progress --csv",
             shoal_test_cli(), trace, shoal_policy_name(i));
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
    CHECK_MSG(st == 0, "%s: exit %d: %s", shoal_policy_name(i), st, out);
  }
  remove(trace);
}
