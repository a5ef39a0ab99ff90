/* Arrival processes and the load generator's accounting; latency histograms. */
#include <math.h>

#include "serve/histo.h"
#include "serve/loadgen.h"
#include "serve_testutil.h"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f);
  fputs(text, f);
  fclose(f);
}

TEST(trace_errors_name_the_file_and_line) {
  char path[] = "/tmp/shoal-trace-XXXXXX";
  CHECK(mkstemp(path) >= 0);
  shoal__reqtimes_t a;
  write_file(path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:4x.0,1,2\n");
  CHECK_EQ(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 1, 1, 0, &a), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), path);
  CHECK_CONTAINS(shoal_last_error(), ":3: '2023-11-16 18:15:4x.0' is not a time");
  write_file(path, "a,b\n1,2\n");
  CHECK_EQ(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 1, 1, 0, &a), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), ":1: expected a header");
  write_file(path, "TIMESTAMP\n");
  CHECK_EQ(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 1, 1, 0, &a), SHOAL_ERR_PARSE);
  CHECK_CONTAINS(shoal_last_error(), "no arrivals");
  write_file(path, "TIMESTAMP\n2023-11-16 23:59:59.5\n2023-11-17 00:00:00.5\n2023-11-17 00:00:03.5\n");
  CHECK_OK(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 1, 1, 0, &a)); /* across midnight */
  CHECK_EQ(a.n, 3);
  CHECK_NEAR(a.t[1], 1.0, 1e-6);
  CHECK_NEAR(a.t[2], 4.0, 1e-6);
  shoal__reqtimes_free(&a);
  CHECK_OK(shoal__reqtimes_trace(NULL, path, 0, 0, 2, 1, 1, 0, &a)); /* twice as fast */
  CHECK_NEAR(a.t[2], 2.0, 1e-6);
  shoal__reqtimes_free(&a);
  CHECK_EQ(shoal__reqtimes_trace(NULL, path, 10, 1, 1, 1, 1, 0, &a), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "no arrival in the part replayed");
  CHECK_EQ(shoal__reqtimes_trace(NULL, "/nonexistent/trace.csv", 0, 0, 1, 1, 1, 0, &a), SHOAL_ERR_NOT_FOUND);
  unlink(path);
}

TEST(rate_scaling_thins_and_copies) {
  char path[] = "/tmp/shoal-trace-XXXXXX";
  CHECK(mkstemp(path) >= 0);
  FILE *f = fopen(path, "w");
  fprintf(f, "time\n");
  for (int i = 0; i < 10000; i++) fprintf(f, "%.3f\n", i * 0.01);
  fclose(f);
  shoal__reqtimes_t a;
  CHECK_OK(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 0.5, 1, 0, &a));
  CHECK(a.n > 4700 && a.n < 5300); /* binomial(10000, 0.5): 6 sigma */
  shoal__reqtimes_free(&a);
  CHECK_OK(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 2.5, 1, 0, &a));
  CHECK(a.n > 24700 && a.n < 25300);
  for (size_t i = 1; i < a.n; i++) CHECK(a.t[i] >= a.t[i - 1]);
  CHECK(a.t[a.n - 1] < 100.0);
  shoal__reqtimes_free(&a);
  CHECK_OK(shoal__reqtimes_trace(NULL, path, 20, 10, 2, 1, 1, 0, &a)); /* trace seconds 20..40 in 10 s */
  CHECK_EQ(a.n, 2000);
  CHECK_NEAR(a.t[a.n - 1], 9.995, 1e-6);
  shoal__reqtimes_free(&a);
  CHECK_EQ(shoal__reqtimes_trace(NULL, path, 0, 0, 1, 1, 1, 100, &a), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "more than 100 arrivals");
  unlink(path);
}

TEST(poisson_and_diurnal_rates) {
  shoal__reqtimes_t a;
  CHECK_OK(shoal__reqtimes_poisson(100, 100, 3, 0, &a));
  CHECK(fabs((double)a.n - 10000) < 600); /* 6 sigma */
  shoal__reqtimes_free(&a);
  CHECK_OK(shoal__reqtimes_diurnal(100, 1, 100, 100, 3, 0, &a));
  size_t first = 0; /* the first half-period has the peak: (1 + 2/pi) of the mean rate */
  for (size_t i = 0; i < a.n; i++) first += a.t[i] < 50;
  CHECK(fabs((double)first - 5000 * (1 + 2 / M_PI)) < 600);
  CHECK(fabs((double)(a.n - first) - 5000 * (1 - 2 / M_PI)) < 600);
  shoal__reqtimes_free(&a);
  CHECK_EQ(shoal__reqtimes_diurnal(100, 1.5, 100, 100, 3, 0, &a), SHOAL_ERR_INVALID);
}

TEST(histogram_quantiles_are_within_their_bucket) {
  shoal__histo_t h = {0};
  for (int i = 1; i <= 1000; i++) shoal__histo_add(&h, i * 1e-3);
  CHECK_NEAR(shoal__histo_quantile(&h, 0.5), 0.5, 0.5 * 0.025);
  CHECK_NEAR(shoal__histo_quantile(&h, 0.99), 0.99, 0.99 * 0.025);
  CHECK_NEAR(shoal__histo_quantile(&h, 1), 1.0, 1e-12);
  shoal__latwin_t w;
  shoal__latwin_init(&w);
  for (int s = 0; s < 100; s++) shoal__latwin_add(&w, 1000.0 + s, s < 90 ? 0.001 : 0.1);
  double rate;
  shoal__latwin_window(&w, 1099.5, 10, &h, &rate); /* the last 10 s: all 0.1 */
  CHECK_EQ(h.n, 10);
  CHECK_NEAR(shoal__histo_quantile(&h, 0.5), 0.1, 0.0025);
  CHECK_NEAR(rate, 10 / 9.5, 1e-9);
  shoal__latwin_destroy(&w);
}

TEST(loadgen_counts_every_request_once) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-serve-XXXXXX";
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  shoal__server_t *s = start_server(params, 32, 0.001, 1024);
  shoal__reqtimes_t a;
  CHECK_OK(shoal__reqtimes_poisson(100, 1, 9, 0, &a));
  char url[64], csv[] = "/tmp/shoal-timeline-XXXXXX";
  CHECK(mkstemp(csv) >= 0);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", shoal__server_port(s));
  shoal__loadgen_opts_t o;
  shoal__loadgen_opts_init(&o);
  o.url = url;
  o.arrivals = &a;
  o.rows = 2;
  o.timeout_s = 60;
  o.slo_s = 1e9;
  o.window_s = 0.5;
  o.timeline_csv = csv;
  shoal__loadgen_result_t r;
  CHECK_OK(shoal__loadgen_run(&o, &r));
  CHECK_EQ(r.requests, a.n);
  CHECK_EQ(r.ok, a.n);
  CHECK_EQ(r.rows_checked, 2 * a.n);
  CHECK_EQ(r.latency.n, a.n);
  CHECK_EQ(r.windows, r.windows_met);
  shoal__server_stats_t *st = malloc(sizeof *st);
  shoal__server_stats(s, st);
  CHECK_EQ(st->ok, a.n);
  CHECK_EQ(st->rows, 2 * a.n);
  free(st);
  /* the wrong model name: every request is a 404, counted as failed */
  o.model = "cnn";
  o.timeline_csv = NULL;
  CHECK_OK(shoal__loadgen_run(&o, &r));
  CHECK_EQ(r.ok, 0);
  CHECK_EQ(r.by_status[4], a.n);
  CHECK_EQ(r.windows_met, 0);
  shoal__reqtimes_free(&a);
  shoal__server_stop(s);
  unlink(params);
  unlink(csv);
}
