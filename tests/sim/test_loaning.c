/* shoal sim loaning's driver on tiny cases worked out by hand: a static
 * partition with rigid FIFO jobs, loaning and an on-demand reclaim when a
 * burst comes, and the settings it refuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "shoal/status.h"
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
