/* The serving policy pieces against numbers worked out by hand: the
 * request-rate predictors' recurrences, the M/M/c P99 (Erlang C) and the
 * replicas it asks for, the goodput model, the reclaim victim and the two
 * allocations. */
#include <math.h>

#include "../runner.h"
#include "shoal/status.h"
#include "sched/serving/serving.h"

static double run_forecast(const char *name, double alpha, double z, const double *rates, int n, double truth) {
  shoal__forecast_t *f;
  CHECK_OK(shoal__forecast_create(name, alpha, z, &f));
  CHECK(strcmp(shoal__forecast_name(f), name) == 0);
  for (int i = 0; i < n; i++) shoal__forecast_observe(f, rates[i]);
  double v = shoal__forecast_next(f, truth);
  shoal__forecast_free(f);
  return v;
}

TEST(serving_forecast_recurrences) {
  const double r[] = {10, 20, 30};
  /* off: the last rate */
  CHECK_NEAR(run_forecast("off", 0.5, 0, r, 3, 99), 30, 1e-12);
  /* ewma, alpha 0.5: 10 -> 15 -> 22.5 */
  CHECK_NEAR(run_forecast("ewma", 0.5, 0, r, 3, 99), 22.5, 1e-12);
  /* holt, alpha 0.5: (level, trend) (10, 0) -> (15, 2.5) -> (0.5*30 + 0.5*17.5 = 23.75,
   * 0.5*8.75 + 0.5*2.5 = 5.625): forecast 29.375 */
  CHECK_NEAR(run_forecast("holt", 0.5, 0, r, 3, 99), 29.375, 1e-12);
  /* oracle: the truth it is given, whatever it saw */
  CHECK_NEAR(run_forecast("oracle", 0.5, 3, r, 3, 42), 42, 1e-12);
  /* headroom: off, alpha 0.5, z 1 after 10, 20: error 10, mean 5, variance 0.5 x (0 + 0.5 x 100) = 25:
   * 20 + sqrt(25) */
  CHECK_NEAR(run_forecast("off", 0.5, 1, r, 2, 99), 25, 1e-12);
  /* a negative or NaN rate is read as 0 and no forecast is below 0 */
  const double neg[] = {-5, NAN};
  CHECK_NEAR(run_forecast("ewma", 0.5, 0, neg, 2, 0), 0, 0);
}

TEST(serving_forecast_holt_follows_a_ramp_closer_than_ewma) {
  shoal__forecast_t *e, *h;
  CHECK_OK(shoal__forecast_create("ewma", 0.5, 0, &e));
  CHECK_OK(shoal__forecast_create("holt", 0.5, 0, &h));
  double err_e = 0, err_h = 0;
  for (int t = 0; t < 40; t++) {
    double rate = 10.0 * t;
    if (t >= 20) err_e += fabs(shoal__forecast_next(e, rate) - rate), err_h += fabs(shoal__forecast_next(h, rate) - rate);
    shoal__forecast_observe(e, rate);
    shoal__forecast_observe(h, rate);
  }
  /* EWMA lags a ramp of slope 10 by 10 x (1 - alpha) / alpha = 10 per step; Holt's trend closes the gap */
  CHECK_NEAR(err_e / 20, 20, 1e-4); /* it forecasts the level, one step behind on top: 10 + 10 */
  CHECK(err_h / 20 < 0.01); /* 0.003: its start-up error still dies away */
  shoal__forecast_free(e);
  shoal__forecast_free(h);
}

TEST(serving_forecast_rejects_bad_settings) {
  shoal__forecast_t *f = NULL;
  CHECK_EQ(shoal__forecast_create("arima", 0.5, 0, &f), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "predictor 'arima': unknown (off, ewma, holt, oracle)");
  CHECK_EQ(shoal__forecast_create(NULL, 0.5, 0, &f), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__forecast_create("ewma", 0, 0, &f), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "alpha 0: not in (0, 1]");
  CHECK_EQ(shoal__forecast_create("ewma", 1.5, 0, &f), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__forecast_create("ewma", NAN, 0, &f), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__forecast_create("ewma", 0.5, -1, &f), SHOAL_ERR_INVALID);
  CHECK(f == NULL);
}

TEST(serving_slo_erlang_c_quantiles) {
  /* M/M/1, service 10 ms, 50/s: C = rho = 0.5; wait P99 = ln(0.5 / 0.01) / (100 - 50) */
  CHECK_NEAR(shoal__slo_latency_quantile(50, 1, 0.01, 0.99), 0.01 + log(50.0) / 50, 1e-12);
  /* M/M/2, a = 1: Erlang B = 0.2, C = 2 x 0.2 / (2 - 0.8) = 1/3; wait P99 = ln(100/3) / (200 - 100) */
  CHECK_NEAR(shoal__slo_latency_quantile(100, 2, 0.01, 0.99), 0.01 + log(100.0 / 3) / 100, 1e-12);
  /* M/M/3, a = 1: Erlang B = 1/16, C = 3/16 / (3 - 15/16) = 1/11; wait P99 = ln(100/11) / 200 */
  CHECK_NEAR(shoal__slo_latency_quantile(100, 3, 0.01, 0.99), 0.01 + log(100.0 / 11) / 200, 1e-12);
  /* the chance to wait at all is at most 1 %: the service time alone */
  CHECK_NEAR(shoal__slo_latency_quantile(1, 1, 0.01, 0.99), 0.01, 0);
  CHECK_NEAR(shoal__slo_latency_quantile(0, 1, 0.01, 0.99), 0.01, 0);
  /* saturated or meaningless: infinite */
  CHECK(isinf(shoal__slo_latency_quantile(100, 1, 0.01, 0.99)));
  CHECK(isinf(shoal__slo_latency_quantile(10, 0, 0.01, 0.99)));
  CHECK(isinf(shoal__slo_latency_quantile(10, 1, 0, 0.99)));
  CHECK(isinf(shoal__slo_latency_quantile(10, 1, 0.01, 1)));
}

TEST(serving_slo_replicas_are_the_fewest_that_hold) {
  /* 100/s of 10 ms: 1 replica saturates, 2 give 45.1 ms, 3 give 21.0 ms */
  CHECK_EQ(shoal__slo_replicas(100, 0.01, 0.05, 0.99, 10), 2);
  CHECK_EQ(shoal__slo_replicas(100, 0.01, 0.04, 0.99, 10), 3);
  CHECK_EQ(shoal__slo_replicas(0, 0.01, 0.04, 0.99, 10), 1);
  /* not enough within max, a service slower than the SLO: max + 1 */
  CHECK_EQ(shoal__slo_replicas(100, 0.01, 0.04, 0.99, 2), 3);
  CHECK_EQ(shoal__slo_replicas(1, 0.05, 0.04, 0.99, 10), 11);
  /* many replicas: the answer holds the SLO and one fewer does not */
  int c = shoal__slo_replicas(3000, 0.02, 0.05, 0.99, 500);
  CHECK(c > 60 && c <= 500);
  CHECK(shoal__slo_latency_quantile(3000, c, 0.02, 0.99) <= 0.05);
  CHECK(shoal__slo_latency_quantile(3000, c - 1, 0.02, 0.99) > 0.05);
}

TEST(serving_slo_replicas_for_the_waiting_requests) {
  /* service 1 s, SLO 4 s: slack 3 s; 6 waiting and 2/s arriving: 1 x (6/3 + 2) = 4 replicas */
  CHECK_EQ(shoal__slo_replicas_waiting(6, 2, 1, 4, 100), 4);
  CHECK_EQ(shoal__slo_replicas_waiting(7, 2, 1, 4, 100), 5);   /* 4.33: rounded up */
  CHECK_EQ(shoal__slo_replicas_waiting(0, 0, 1, 4, 100), 1);   /* nothing: still one */
  CHECK_EQ(shoal__slo_replicas_waiting(0, 2.5, 1, 4, 100), 3);
  CHECK_EQ(shoal__slo_replicas_waiting(300, 0, 1, 4, 50), 51); /* 100 needed, 50 allowed: max + 1 */
  CHECK_EQ(shoal__slo_replicas_waiting(1, 1, 4, 4, 50), 51);   /* service as long as the SLO */
}

/* t0 0.1 s, 1 ms per sample, 50 ms x log2(n) to synchronize, noise scale 96, tuned at batch 32 */
static const shoal__goodput_job_t job_a = {.t0 = 0.1, .t_sample = 0.001, .t_sync = 0.05, .phi = 96, .b0 = 32,
                                           .bmax = 128, .nmax = 64, .n_req = 2};

TEST(serving_goodput_picks_the_batch) {
  int b = -1;
  /* n 1: batch 32: 32 / 0.132 = 242.4; 64: 64 / 0.164 x 128/160 = 312.2; 128: 128 / 0.228 x 128/224 = 320.8 */
  CHECK_NEAR(shoal__goodput(&job_a, 1, &b), 128.0 / 0.228 * 128 / 224, 1e-9);
  CHECK_EQ(b, 128);
  /* n 2: 128 / (0.1 + 0.064 + 0.05) x 128/224 = 341.8 */
  CHECK_NEAR(shoal__goodput(&job_a, 2, &b), 128.0 / 0.214 * 128 / 224, 1e-9);
  CHECK_EQ(b, 128);
  shoal__goodput_job_t small = job_a;
  small.bmax = 64; /* 64 / 0.164 x 0.8 */
  CHECK_NEAR(shoal__goodput(&small, 1, &b), 64.0 / 0.164 * 0.8, 1e-9);
  CHECK_EQ(b, 64);
  /* the batch is at least n: on 64 workers 32 is not a choice */
  shoal__goodput(&job_a, 64, &b);
  CHECK(b >= 64);
  CHECK_NEAR(shoal__goodput(&job_a, 0, &b), 0, 0);
  CHECK_EQ(b, 0);
  CHECK(shoal__goodput(&job_a, 3, NULL) > 0);
  /* AdaScale's learning rate: 0.1 x 128 x (128/224) / 32 */
  CHECK_NEAR(shoal__goodput_lr(&job_a, 128, 0.1), 0.1 * 4 * 128 / 224, 1e-12);
  CHECK_NEAR(shoal__goodput_lr(&job_a, 32, 0.1), 0.1, 1e-12);
}

/* linear: 0.64 s / n per iteration of 64: goodput 100 n, speedup n.
 * saturating: 0.64 + 0.64 / n: goodput 100 n / (n + 1), speedup 2n / (n + 1) = 1, 4/3, 3/2, 8/5 */
static const shoal__goodput_job_t linear = {.t0 = 0, .t_sample = 0.01, .phi = 1e9, .b0 = 64, .bmax = 64,
                                            .nmax = 2, .n_req = 2};
static const shoal__goodput_job_t saturating = {.t0 = 0.64, .t_sample = 0.01, .phi = 1e9, .b0 = 64, .bmax = 64,
                                                .nmax = 8, .n_req = 3};

TEST(serving_reclaim_shrinks_the_job_that_loses_least) {
  shoal__goodput_job_t jobs[2] = {linear, saturating};
  int n[2] = {2, 3};
  CHECK_EQ(shoal__loan_victim(jobs, 2, n, 0), 1); /* saturating loses 3/2 - 4/3, linear 1 */
  n[1] = 1;
  CHECK_EQ(shoal__loan_victim(jobs, 2, n, 1), 0); /* min_n 1: saturating may not go */
  n[0] = 1;
  CHECK_EQ(shoal__loan_victim(jobs, 2, n, 1), -1);
}

TEST(serving_alloc_goodput_grows_shrinks_and_shares) {
  shoal__goodput_job_t jobs[2] = {linear, saturating};
  int n[2] = {0, 0}, b[2];
  /* 5 free: linear reaches its nmax 2 (gain 1 each), saturating the rest */
  CHECK_EQ(shoal__alloc_goodput(jobs, 2, 5, n, b), 2);
  CHECK_EQ(n[0], 2);
  CHECK_EQ(n[1], 3);
  CHECK_EQ(b[0], 64);
  /* a reclaim of 2: saturating gives both (1/6, then 1/3, against linear's 1) */
  CHECK_EQ(shoal__alloc_goodput(jobs, 2, 3, n, b), 1);
  CHECK_EQ(n[0], 2);
  CHECK_EQ(n[1], 1);
  CHECK_EQ(shoal__alloc_goodput(jobs, 2, 3, n, b), 0); /* nothing to change */
  /* a full cluster and a queued job: moves while the gain beats the loss: (4, 0) -> (3, 1) -> (2, 2) */
  shoal__goodput_job_t two[2] = {saturating, saturating};
  int m[2] = {4, 0};
  CHECK_EQ(shoal__alloc_goodput(two, 2, 4, m, b), 2);
  CHECK_EQ(m[0], 2);
  CHECK_EQ(m[1], 2);
}

TEST(serving_alloc_fifo_is_rigid_and_in_order) {
  shoal__goodput_job_t jobs[3] = {linear, saturating, saturating};
  jobs[0].n_req = 2, jobs[1].n_req = 3, jobs[2].n_req = 1;
  int n[3] = {0, 0, 0}, b[3];
  /* strict, 4 free: the first starts, the second does not fit, the third may not pass it */
  CHECK_EQ(shoal__alloc_fifo(jobs, 3, 4, 1, n, b), 1);
  CHECK(n[0] == 2 && n[1] == 0 && n[2] == 0);
  CHECK(b[0] == 64 && b[1] == 0);
  CHECK_EQ(shoal__alloc_fifo(jobs, 3, 6, 1, n, b), 2);
  CHECK(n[0] == 2 && n[1] == 3 && n[2] == 1);
  /* down to 3: the latest-arrived stop first (the third, then the second) */
  CHECK_EQ(shoal__alloc_fifo(jobs, 3, 3, 1, n, b), 2);
  CHECK(n[0] == 2 && n[1] == 0 && n[2] == 0);
}

TEST(serving_alloc_fifo_backfills_a_job_that_fits) {
  shoal__goodput_job_t jobs[3] = {linear, saturating, saturating};
  jobs[0].n_req = 2, jobs[1].n_req = 3, jobs[2].n_req = 1;
  int n[3] = {0, 0, 0}, b[3];
  /* 4 free: the second does not fit, the third does and starts (the live fifo's walk) */
  CHECK_EQ(shoal__alloc_fifo(jobs, 3, 4, 0, n, b), 2);
  CHECK(n[0] == 2 && n[1] == 0 && n[2] == 1);
  CHECK(b[2] == 64 && b[1] == 0);
  /* the second starts once it fits; the first ones keep theirs */
  CHECK_EQ(shoal__alloc_fifo(jobs, 3, 6, 0, n, b), 1);
  CHECK(n[0] == 2 && n[1] == 3 && n[2] == 1);
}

TEST(serving_reclaim_keeps_jobs_running_and_grow_feeds_running_jobs) {
  shoal__goodput_job_t jobs[3] = {saturating, saturating, linear};
  int n[3] = {1, 3, 0}, b[3];
  /* 3 reclaimed: the 3-worker job gives 2 (1/6, then 1/3), the third stops the cheaper one-worker job */
  CHECK_EQ(shoal__loan_reclaim(jobs, 3, 3, n, b), 3);
  CHECK(n[0] + n[1] == 1 && n[2] == 0);
  CHECK_EQ(shoal__loan_reclaim(jobs, 3, 5, n, b), 1); /* only one worker left to take */
  CHECK(n[0] == 0 && n[1] == 0);
  /* 2 given back, running only: nobody runs, nothing is given; then the queued linear job is not started */
  CHECK_EQ(shoal__loan_grow(jobs, 3, 2, 1, n, b), 0);
  n[0] = 1;
  CHECK_EQ(shoal__loan_grow(jobs, 3, 2, 1, n, b), 2);
  CHECK(n[0] == 3 && n[1] == 0 && n[2] == 0);
  /* all on one worker: a stop takes the job with the most work left, not the first */
  shoal__goodput_job_t four[4] = {linear, linear, linear, linear};
  int n4[4] = {1, 1, 1, 1}, b4[4];
  four[0].left_s = 100, four[1].left_s = 900, four[2].left_s = 50, four[3].left_s = 400;
  CHECK_EQ(shoal__loan_reclaim(four, 4, 2, n4, b4), 2);
  CHECK_MSG(n4[0] == 1 && n4[1] == 0 && n4[2] == 1 && n4[3] == 0, "%d %d %d %d", n4[0], n4[1], n4[2], n4[3]);
  CHECK_EQ(shoal__loan_grow(jobs, 3, 2, 0, n, b), 2); /* anyone: the queued ones gain 1 (a tie: the first), not 1/10 */
  CHECK(n[0] == 3 && n[1] == 1 && n[2] == 1);
  /* loaning's allocation: 2 stable GPUs start jobs, the 2 loaned ones only grow them */
  int m[3] = {0, 0, 0};
  CHECK_EQ(shoal__alloc_loaning(jobs, 3, 2, 4, m, b), 2);
  /* stable: the first two start (gain 1 each, ties to the first); loaned: they grow (1/3 each), the third
   * (gain 1) stays queued: a reclaim would stop it again */
  CHECK(m[0] == 2 && m[1] == 2 && m[2] == 0);
}

TEST(serving_floors_come_first_and_go_last) {
  /* a 4-worker linear job fills the cluster; a queued saturating one gains 1 from a worker, the linear one loses 1:
   * the goodput choice alone keeps it queued */
  shoal__goodput_job_t jobs[2] = {linear, saturating};
  jobs[0].nmax = 4;
  int n[2] = {4, 0}, b[2];
  CHECK_EQ(shoal__alloc_goodput(jobs, 2, 4, n, b), 0);
  CHECK(n[0] == 4 && n[1] == 0);
  /* its floor of 2: taken from the linear job, which keeps one; no move takes it back */
  jobs[1].n_min = 2;
  CHECK_EQ(shoal__alloc_goodput(jobs, 2, 4, n, b), 2);
  CHECK_MSG(n[0] == 2 && n[1] == 2, "%d %d", n[0], n[1]);
  /* a reclaim takes from the floor last: the linear job shrinks (1) and stops (0) although the saturating one
   * would lose least (1/3); only then the floor gives one */
  CHECK_EQ(shoal__loan_reclaim(jobs, 2, 2, n, b), 2);
  CHECK_MSG(n[0] == 0 && n[1] == 2, "%d %d", n[0], n[1]);
  CHECK_EQ(shoal__loan_reclaim(jobs, 2, 1, n, b), 1);
  CHECK_MSG(n[0] == 0 && n[1] == 1, "%d %d", n[0], n[1]);
  /* floors above the capacity: the capacity wins */
  int m[2] = {0, 4};
  jobs[1].n_min = 4;
  shoal__alloc_goodput(jobs, 2, 3, m, b);
  CHECK_MSG(m[0] + m[1] <= 3, "%d %d", m[0], m[1]);
}

TEST(serving_reactive_replicas_follow_the_thresholds) {
  /* 1 s a request, thresholds 0.4..0.8 (middle 0.6): 4 replicas at 2.4/s are at 0.6: kept */
  CHECK_EQ(shoal__reactive_replicas(2.4, 1, 4, 0.4, 0.8, 100), 4);
  CHECK_EQ(shoal__reactive_replicas(3.2, 1, 4, 0.4, 0.8, 100), 4);  /* 0.8: still kept */
  CHECK_EQ(shoal__reactive_replicas(3.3, 1, 4, 0.4, 0.8, 100), 6);  /* above: ceil(3.3 / 0.6) = 6 */
  CHECK_EQ(shoal__reactive_replicas(1.2, 1, 4, 0.4, 0.8, 100), 2);  /* 0.3, below: ceil(1.2 / 0.6) = 2 */
  CHECK_EQ(shoal__reactive_replicas(0, 1, 4, 0.4, 0.8, 100), 1);    /* idle: one */
  CHECK_EQ(shoal__reactive_replicas(60, 1, 4, 0.4, 0.8, 50), 50);   /* at most max */
  CHECK_EQ(shoal__reactive_replicas(1.0, 1, 0, 0.4, 0.8, 100), 2);  /* none yet: sized to the middle */
}
