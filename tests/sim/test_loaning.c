/* shoal sim loaning's driver on tiny cases worked out by hand: a static
 * partition with rigid FIFO jobs (backfilled or strict), loaning and an
 * on-demand reclaim when a burst comes, jobs at a measured throughput table,
 * the live controller's partitions and elastic reactive, and the settings it
 * refuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/status.h"
#include "sched/model/speed.h"
#include "sched/serving/serving.h"
#include "sim/loaning.h"

/* requests every `gap` seconds in [a, b), appended */
static void add_requests(shoal__reqtimes_t *q, double a, double b, double gap) {
  for (double t = a; t < b - 1e-9; t += gap) {
    q->t = realloc(q->t, (q->n + 1) * sizeof *q->t);
    q->t[q->n++] = t;
  }
}

static void two_jobs(shoal_workload_t *w) {
  CHECK_OK(shoal__workload_alloc(w, 2));
  w->jobs[0].arrival = 0, w->jobs[0].gpus = 4, w->jobs[0].duration = 600;
  w->jobs[1].arrival = 0, w->jobs[1].gpus = 4, w->jobs[1].duration = 1200;
  w->jobs[0].id = 0, w->jobs[1].id = 1;
}

static void small_config(shoal_loan_config_t *c, int policy) {
  shoal__loan_config_default(c);
  c->policy = policy;
  c->gpus = 8;
  c->service_s = 0.1, c->slo_s = 1;
  c->z = 0;
}

TEST(loaning_static_partition_runs_rigid_jobs_in_order) {
  shoal_workload_t w;
  two_jobs(&w);
  shoal__reqtimes_t q = {0};
  add_requests(&q, 0.25, 60, 0.5); /* 2/s of 0.1 s: one replica holds P99 <= 1 s (M/M/1: 0.1 + ln(20)/8 = 0.47 s) */
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_STATIC);
  shoal_loan_result_t r;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &r));
  CHECK_EQ(r.infer_gpus, 1);
  /* 7 GPUs for training: the first job (4) runs 0-600; the second (4) waits for it: 600-1800 */
  CHECK_EQ(r.finished, 2);
  CHECK_NEAR(r.jct[0], 600, 1e-6);
  CHECK_NEAR(r.jct[1], 1800, 1e-6);
  CHECK_NEAR(r.jct_avg, 1200, 1e-6);
  CHECK_NEAR(r.t_end, 1800, 1e-6);
  CHECK_EQ(r.reclaims, 0);
  CHECK_EQ(r.restarts, 0);
  CHECK_NEAR(r.loaned_gpu_s, 0, 0);
  /* every request served at once: 0.1 s, in each of the 30 minutes */
  CHECK_EQ(r.requests, 30 * 120);
  CHECK_EQ(r.intervals, 30);
  CHECK_EQ(r.intervals_ok, 30);
  CHECK_NEAR(r.tl[0].p99, 0.1, 1e-9);
  shoal__loan_result_free(&r);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

TEST(loaning_lends_idle_servers_and_reclaims_for_a_burst) {
  shoal_workload_t w;
  two_jobs(&w);
  shoal__reqtimes_t q = {0};
  add_requests(&q, 30, 31, 1);     /* a quiet minute: one request */
  add_requests(&q, 60, 120, 0.05); /* then 20/s: 2 erlangs, several replicas */
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_STATIC);
  shoal_loan_result_t st, fa;
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &st));
  small_config(&c, SHOAL_LOAN_FAPES);
  c.predictor = "off";
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &fa));
  CHECK_EQ(st.infer_gpus, fa.infer_gpus); /* VC_infer: the busiest interval's need, for both */
  CHECK(st.infer_gpus >= 3);
  /* quiet minutes lend VC_infer to the jobs; each burst takes servers back from them */
  CHECK(fa.loaned_gpu_s > 0);
  CHECK(fa.reclaims > 0);
  CHECK(fa.resizes > 0);
  CHECK_EQ(fa.finished, 2);
  CHECK(fa.jct_avg < st.jct_avg);
  CHECK(fa.intervals_ok <= fa.intervals && fa.intervals > 0);
  CHECK_EQ(st.intervals_ok, st.intervals);
  /* the burst minutes' replicas: at least what M/M/c asks for 20/s */
  int need = shoal__slo_replicas(20, 0.1, 1, 0.99, 7);
  for (int k = 1; k < fa.ntl; k += 2) CHECK(fa.tl[k].replicas >= need);
  shoal__loan_result_free(&st);
  shoal__loan_result_free(&fa);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

/* fapes with a spare replica: every interval holds one replica more than without (the quiet one 2, not 1), so
 * less is lent; a negative spare is refused */
TEST(loaning_fapes_keeps_its_spare_replicas_ready) {
  shoal_workload_t w;
  two_jobs(&w);
  shoal__reqtimes_t q = {0};
  add_requests(&q, 30, 31, 1);
  add_requests(&q, 60, 120, 0.05);
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_FAPES);
  c.predictor = "off";
  shoal_loan_result_t a, b;
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &a));
  c.spare = 1;
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &b));
  CHECK_MSG(a.tl[0].replicas == 1 && b.tl[0].replicas == 2, "quiet minute: %d and %d replicas", a.tl[0].replicas,
            b.tl[0].replicas);
  CHECK(b.loaned_gpu_s < a.loaned_gpu_s);
  c.spare = -1;
  shoal_loan_result_t r;
  CHECK_EQ(shoal__loan_sim(&w, &q, 120, &c, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "spare");
  shoal__loan_result_free(&a);
  shoal__loan_result_free(&b);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

/* Static FIFO starts a queued job that fits behind one that does not (the live fifo); strict FIFO keeps it
 * waiting until the one ahead starts. */
TEST(loaning_static_backfills_a_job_that_fits_unless_strict) {
  shoal_workload_t w;
  CHECK_OK(shoal__workload_alloc(&w, 3));
  w.jobs[0] = (shoal_job_t){.id = 0, .arrival = 0, .gpus = 4, .duration = 600};
  w.jobs[1] = (shoal_job_t){.id = 1, .arrival = 0, .gpus = 4, .duration = 1200};
  w.jobs[2] = (shoal_job_t){.id = 2, .arrival = 0, .gpus = 2, .duration = 300};
  shoal__reqtimes_t q = {0};
  add_requests(&q, 0.25, 60, 0.5);
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_STATIC);
  shoal_loan_result_t a, b;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &a));
  c.fifo_strict = 1;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &b));
  /* 7 training GPUs: job 0 (4) at once, job 1 (4) after it; job 2 (2) fits beside job 0 (backfill: 0-300) or
   * waits for job 1 to start (strict: 600-900) */
  CHECK_NEAR(a.jct[0], 300, 1e-6);
  CHECK_NEAR(a.jct[1], 600, 1e-6);
  CHECK_NEAR(a.jct[2], 1800, 1e-6);
  CHECK_NEAR(b.jct[0], 600, 1e-6);
  CHECK_NEAR(b.jct[1], 900, 1e-6);
  CHECK_NEAR(b.jct[2], 1800, 1e-6);
  shoal__loan_result_free(&a);
  shoal__loan_result_free(&b);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

/* a throughput table (speeds.sh's format) in a temporary file, read by the real table reader */
static shoal_speed_t *small_table(void) {
  char path[] = "/tmp/shoal-loan-tp-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char *json = "{\"testbed\": {\"('m', 1)\": {\"null\": 10}},\n"
                     " \"testbed_unconsolidated\": {\"('m', 2)\": {\"null\": 15}, \"('m', 4)\": {\"null\": 20}}}\n";
  CHECK_EQ(write(fd, json, strlen(json)), (ssize_t)strlen(json));
  close(fd);
  shoal_speed_t *sp = NULL;
  CHECK_OK(shoal__speed_table_create(path, "testbed", 0, &sp));
  unlink(path);
  return sp;
}

/* With a measured table a job's work is the trace's worker-steps and it runs at the table's speed for its
 * worker count (one worker a host: the spread curve), after its start-up; the goodput allocation grows it by
 * the table's speedup, within the job's own range. */
TEST(loaning_runs_jobs_at_their_measured_throughput) {
  shoal_speed_t *sp = small_table();
  shoal_workload_t w;
  CHECK_OK(shoal__workload_alloc(&w, 1));
  w.jobs[0] = (shoal_job_t){.id = 0, .arrival = 0, .gpus = 1, .min_workers = 1, .max_workers = 2, .work = 300};
  w.jobs[0].model = (int16_t)shoal__speed_find_model(sp, "m");
  CHECK_EQ(w.jobs[0].model, 0);
  shoal__reqtimes_t q = {0};
  add_requests(&q, 0.25, 60, 0.5);
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_STATIC);
  c.gpus = 4, c.infer_gpus = 1, c.startup_s = 5, c.speed = sp;
  shoal_loan_result_t a, b;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &a));
  c.policy = SHOAL_LOAN_POLLUX;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &b));
  CHECK_NEAR(a.jct[0], 5 + 300 / 10.0, 1e-6); /* rigid on 1: 10 steps/s */
  CHECK_NEAR(b.jct[0], 5 + 300 / 15.0, 1e-6); /* grown to its max, 2 of the 3 free: 15 steps/s */
  w.jobs[0].model = 1;                        /* not in the table */
  shoal_loan_result_t r;
  CHECK_EQ(shoal__loan_sim(&w, &q, 60, &c, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "names no model of the throughput table");
  shoal__loan_result_free(&a);
  shoal__loan_result_free(&b);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
  shoal__speed_destroy(sp);
}

/* With the live partitions a queued job starts only on VC_train: the idle VC_infer GPUs grow running jobs
 * instead of starting more. */
TEST(loaning_partitions_start_queued_jobs_outside_vc_infer) {
  shoal_workload_t w;
  CHECK_OK(shoal__workload_alloc(&w, 6));
  for (int i = 0; i < 6; i++) w.jobs[i] = (shoal_job_t){.id = i, .arrival = 0, .gpus = 1, .duration = 600};
  shoal__reqtimes_t q = {0};
  add_requests(&q, 0.25, 60, 0.5); /* one replica */
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_FAPES);
  c.predictor = "off", c.infer_gpus = 4;
  shoal_loan_result_t a, b;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &a));
  c.partitions = 1;
  CHECK_OK(shoal__loan_sim(&w, &q, 60, &c, &b));
  CHECK_EQ(a.tl[0].replicas, 1);
  CHECK_NEAR(a.tl[0].queued_avg, 0, 1e-9); /* 7 GPUs not serving: all six start */
  CHECK_NEAR(b.tl[0].queued_avg, 2, 1e-9); /* 4 outside VC_infer start four; the 3 lent grow them */
  CHECK_NEAR(b.tl[0].train_avg, 7, 1e-9);
  shoal__loan_result_free(&a);
  shoal__loan_result_free(&b);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

/* Elastic reactive (the live one): the replicas for a burst (seen one interval late) come from shrinking a running
 * job, not from stopping one. */
TEST(loaning_reactive_elastic_shrinks_instead_of_stopping) {
  shoal_workload_t w;
  two_jobs(&w);
  w.jobs[1].gpus = 3; /* training holds the 7 GPUs beside the one replica */
  shoal__reqtimes_t q = {0};
  add_requests(&q, 30, 31, 1);
  add_requests(&q, 60, 120, 0.05);
  shoal_loan_config_t c;
  small_config(&c, SHOAL_LOAN_REACTIVE);
  shoal_loan_result_t a, b;
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &a));
  c.reactive_goodput = 1;
  CHECK_OK(shoal__loan_sim(&w, &q, 120, &c, &b));
  CHECK_MSG(a.restarts > 0 && a.resizes == 0, "rigid: %ld restarts, %ld resizes", a.restarts, a.resizes);
  CHECK_MSG(b.restarts == 0 && b.resizes > 0, "elastic: %ld restarts, %ld resizes", b.restarts, b.resizes);
  CHECK(b.reclaims > 0);
  shoal__loan_result_free(&a);
  shoal__loan_result_free(&b);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}

TEST(loaning_refuses_bad_settings) {
  shoal_workload_t w;
  two_jobs(&w);
  shoal__reqtimes_t q = {0};
  add_requests(&q, 0.25, 60, 0.5);
  shoal_loan_config_t c;
  shoal_loan_result_t r;
  small_config(&c, SHOAL_LOAN_FAPES);
  c.slo_s = 0.1;
  CHECK_EQ(shoal__loan_sim(&w, &q, 60, &c, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "the SLO 0.1 s must exceed the service time 0.1 s");
  small_config(&c, SHOAL_LOAN_FAPES);
  c.reclaim_s = 60;
  CHECK_EQ(shoal__loan_sim(&w, &q, 60, &c, &r), SHOAL_ERR_INVALID);
  small_config(&c, SHOAL_LOAN_FAPES);
  c.predictor = "crystal-ball";
  CHECK_EQ(shoal__loan_sim(&w, &q, 60, &c, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "predictor 'crystal-ball': unknown");
  small_config(&c, SHOAL_LOAN_STATIC);
  c.infer_gpus = 5; /* 3 left: a 4-GPU job can never run */
  CHECK_EQ(shoal__loan_sim(&w, &q, 60, &c, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "asks for 4 GPUs, more than the 3 outside VC_infer");
  small_config(&c, SHOAL_LOAN_STATIC);
  CHECK_EQ(shoal__loan_sim(&w, &q, 10, &c, &r), SHOAL_ERR_INVALID); /* requests past the period */
  CHECK_EQ(shoal__loan_policy_find("pollux"), SHOAL_LOAN_POLLUX);
  CHECK_EQ(shoal__loan_policy_find("tiresias"), -1);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&q);
}
