/* `shoal loadgen`: open-loop load on an inference server or router from a request trace or a
 * Poisson/diurnal process (docs/serving.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "options.h"
#include "serve/loadgen.h"
#include "shoal/shoal.h"

typedef struct loadgen_cli {
  shoal__loadgen_opts_t o;
  const char *trace, *diurnal;
  double poisson, speedup, rate_scale, start, duration, slo_ms;
  uint64_t seed;
} loadgen_cli_t;

enum { M_TRACE };
static int on_trace(const void *c) { return ((const loadgen_cli_t *)c)->trace != NULL; }
static const shoal_opt_mode_t loadgen_modes[] = {[M_TRACE] = {on_trace, "applies with --trace only", NULL}};

#define SHOAL_OPTS_STRUCT loadgen_cli_t
static const shoal_opt_t loadgen_opts[] = {
    OPT_STRING("--url", "http://HOST:PORT", o.url, "a replica or the router (needed)", .expect = "http://HOST:PORT"),
    OPT_GROUP("arrivals (one of):"),
    OPT_STRING("--trace", "FILE", trace, "a request trace CSV (TIMESTAMP first, e.g. azure-llm-2023/conv.csv)",
               .expect = "a file"),
    OPT_DOUBLE("--speedup", "S", speedup, 1e-3, 1e6, "with --trace: replay S times faster", .when = 1u << M_TRACE),
    OPT_DOUBLE("--rate-scale", "R", rate_scale, 1e-3, 1e3, "with --trace: R times as many requests (thinned or copied)",
               .when = 1u << M_TRACE),
    OPT_DOUBLE("--trace-start", "T", start, 0, 1e9, "with --trace: start T trace seconds after its first request",
               .when = 1u << M_TRACE),
    OPT_DOUBLE("--poisson", "RATE", poisson, 1e-6, 1e6, "Poisson arrivals, RATE per second", .def = ""),
    OPT_STRING("--diurnal", "BASE:AMP:PERIOD", diurnal, "rate BASE x (1 + AMP sin(2 pi t / PERIOD))",
               .expect = "BASE:AMP:PERIOD"),
    OPT_DOUBLE("--duration", "S", duration, 0, 1e7, "seconds of replay (trace: S x speedup trace seconds; 0: all of it)"),
    OPT_U64("--seed", "N", seed, 0, 1e15, "seed of the arrivals"),
    OPT_GROUP("requests:"),
    OPT_STRING("--model", "NAME", o.model, "the model's name in the path"),
    OPT_INT("--rows", "N", o.rows, 1, 4096, "Fashion-MNIST test images per request"),
    OPT_STRING("--data", "DIR", o.data_dir, "IDX test set", .def = SHOAL_FASHION_MNIST_DIR, .expect = "a directory"),
    OPT_DOUBLE("--timeout", "S", o.timeout_s, 1e-3, 3600, "a request unanswered after S fails"),
    OPT_INT("--max-inflight", "N", o.max_inflight, 1, 100000, "arrivals while N are unanswered are dropped (failures)"),
    OPT_GROUP("report:"),
    OPT_DOUBLE("--slo-ms", "MS", slo_ms, 1e-3, 1e7, "latency SLO: a window meets it when its P99 is under"),
    OPT_DOUBLE("--window", "S", o.window_s, 1e-3, 1e6, "windows of the timeline and the SLO attainment"),
    OPT_STRING("--timeline", "FILE", o.timeline_csv, "CSV per window: t_s,requests,ok,failed,rate,p50_ms,p99_ms,slo_met",
               .expect = "a file"),
    OPT_STRING("--requests-csv", "FILE", o.requests_csv, "CSV per request: i,t_s,sent_s,status,latency_ms",
               .expect = "a file"),
    OPT_FLAG("--progress", o.progress, "a line per window while it runs"),
    OPT_END,
};

static const shoal_opts_spec_t loadgen_spec = {
    .name = "shoal loadgen",
    .usage = "usage: shoal loadgen --url http://HOST:PORT ARRIVALS [options]\n"
             "Open-loop load on an inference server or router from a request trace or a Poisson/diurnal process\n"
             "(docs/serving.md).\n",
    .opts = loadgen_opts,
    .modes = loadgen_modes,
};

static int arrivals(const char *trace, double poisson, const char *diurnal, double speedup, double rate_scale,
                    double start, double duration, uint64_t seed, shoal__reqtimes_t *a) {
  if (!!trace + (poisson > 0) + !!diurnal != 1) {
    fprintf(stderr, "shoal loadgen: give one of --trace FILE, --poisson RATE, --diurnal BASE:AMP:PERIOD\n");
    return 2;
  }
  int rc;
  if (trace) {
    rc = shoal__reqtimes_trace("--trace", trace, start, duration, speedup, rate_scale, (uint64_t)seed, 0, a);
  } else if (poisson > 0) {
    rc = shoal__reqtimes_poisson(poisson, duration, (uint64_t)seed, 0, a);
  } else {
    double base, amp, period;
    char tail;
    if (sscanf(diurnal, "%lf:%lf:%lf%c", &base, &amp, &period, &tail) != 3 || !(base > 0) || !(amp >= 0 && amp <= 1) ||
        !(period > 0)) {
      fprintf(stderr, "shoal loadgen: --diurnal '%s': expected BASE:AMP:PERIOD with BASE > 0, AMP in 0..1, PERIOD > 0\n",
              diurnal);
      return 2;
    }
    rc = shoal__reqtimes_diurnal(base, amp, period, duration, (uint64_t)seed, 0, a);
  }
  if (rc) fprintf(stderr, "shoal loadgen: %s\n", shoal_last_error());
  return rc ? 2 : 0;
}

static void report(const shoal__loadgen_opts_t *o, const shoal__loadgen_result_t *r) {
  printf("loadgen: %zu requests in %.1f s (%.1f/s): %zu ok, %zu failed (%zu dropped by the client, %llu without an "
         "answer, %llu 4xx, %llu 5xx)\n",
         r->requests, r->duration_s, r->duration_s > 0 ? (double)r->requests / r->duration_s : 0.0, r->ok, r->failed,
         r->dropped, (unsigned long long)r->by_status[0] - r->dropped, (unsigned long long)r->by_status[4],
         (unsigned long long)r->by_status[5]);
  printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f  (from the scheduled arrival; send lag at worst %.2f)\n",
         1e3 * shoal__histo_quantile(&r->latency, 0.5), 1e3 * shoal__histo_quantile(&r->latency, 0.9),
         1e3 * shoal__histo_quantile(&r->latency, 0.99), 1e3 * r->latency.max_s, 1e3 * r->max_lag_s);
  printf("SLO p99 <= %g ms: %d of %d windows of %g s (%.1f%%); accuracy of the answers %.2f%% (%zu images)\n",
         1e3 * o->slo_s, r->windows_met, r->windows, o->window_s, r->windows ? 100.0 * r->windows_met / r->windows : 0.0,
         r->rows_checked ? 100.0 * (double)r->rows_correct / (double)r->rows_checked : 0.0, r->rows_checked);
}

int shoal_cmd_loadgen(int argc, char **argv) {
  loadgen_cli_t c = {.speedup = 1, .rate_scale = 1, .duration = 60, .seed = 1};
  shoal__loadgen_opts_init(&c.o);
  c.slo_ms = 1e3 * c.o.slo_s;
  int rc = shoal_opts_parse(&loadgen_spec, argc, argv, &c, NULL);
  if (rc != SHOAL_OPTS_GO) return rc;
  shoal__loadgen_opts_t o = c.o;
  o.slo_s = c.slo_ms / 1e3;
  const char *trace = c.trace;
  double duration = c.duration;
  if (!o.url) {
    fprintf(stderr, "shoal loadgen: --url http://HOST:PORT is needed (a replica or the router)\n");
    return 2;
  }
  if (!trace && duration <= 0) {
    fprintf(stderr, "shoal loadgen: --duration must be > 0 for --poisson and --diurnal\n");
    return 2;
  }
  shoal__reqtimes_t a = {0};
  if ((rc = arrivals(trace, c.poisson, c.diurnal, c.speedup, c.rate_scale, c.start, duration, c.seed, &a))) return rc;
  o.arrivals = &a;
  printf("loadgen: %zu arrivals over %.1f s (%.2f/s on average) to %s\n", a.n, a.t[a.n - 1],
         a.t[a.n - 1] > 0 ? (double)a.n / a.t[a.n - 1] : 0.0, o.url);
  fflush(stdout);
  shoal__loadgen_result_t r;
  rc = shoal__loadgen_run(&o, &r);
  if (rc) fprintf(stderr, "shoal loadgen: %s\n", shoal_last_error());
  else report(&o, &r);
  shoal__reqtimes_free(&a);
  return rc ? 1 : 0;
}
