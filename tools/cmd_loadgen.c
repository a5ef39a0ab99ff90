/* `shoal loadgen`: open-loop load on an inference server or router from a request trace or a
 * Poisson/diurnal process (docs/serving.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "serve/loadgen.h"
#include "shoal/shoal.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal loadgen --url http://HOST:PORT ARRIVALS [options]\n\n"
          "arrivals (one of):\n"
          "  --trace FILE         a request trace CSV (TIMESTAMP first, e.g. azure-llm-2023/conv.csv)\n"
          "    --speedup S        replay S times faster                                  [1]\n"
          "    --rate-scale R     R times as many requests (thinned or copied)           [1]\n"
          "    --trace-start T    start T trace seconds after its first request          [0]\n"
          "  --poisson RATE       Poisson arrivals, RATE per second\n"
          "  --diurnal BASE:AMP:PERIOD   rate BASE x (1 + AMP sin(2 pi t / PERIOD))\n"
          "  --duration S         seconds of replay (trace: S x speedup trace seconds; 0: all of it)  [60]\n"
          "  --seed N             [1]\n"
          "requests:\n"
          "  --model NAME         the model's name in the path                           [mlp]\n"
          "  --rows N             Fashion-MNIST test images per request                  [1]\n"
          "  --data DIR           IDX test set                                           [" SHOAL_FASHION_MNIST_DIR "]\n"
          "  --timeout S          a request unanswered after S fails                     [10]\n"
          "  --max-inflight N     arrivals while N are unanswered are dropped (failures) [1000]\n"
          "report:\n"
          "  --slo-ms MS          latency SLO: a window meets it when its P99 is under   [100]\n"
          "  --window S           windows of the timeline and the SLO attainment         [10]\n"
          "  --timeline FILE      CSV per window: t_s,requests,ok,failed,rate,p50_ms,p99_ms,slo_met\n"
          "  --requests-csv FILE  CSV per request: i,t_s,sent_s,status,latency_ms\n"
          "  --progress           a line per window while it runs\n");
}

static int num(const char *opt, const char *v, double lo, double hi, double *out) {
  if (!v) {
    fprintf(stderr, "shoal loadgen: %s needs a value\n", opt);
    return -1;
  }
  if (shoal__parse_double(opt, v, lo, hi, out)) {
    fprintf(stderr, "shoal loadgen: %s\n", shoal_last_error());
    return -1;
  }
  return 0;
}

static int arrivals(const char *trace, double poisson, const char *diurnal, double speedup, double rate_scale,
                    double start, double duration, double seed, shoal__reqtimes_t *a) {
  if (!!trace + (poisson > 0) + !!diurnal != 1) {
    fprintf(stderr, "shoal loadgen: give one of --trace FILE, --poisson RATE, --diurnal BASE:AMP:PERIOD\n");
    return 2;
  }
  int rc;
  if (trace) {
    rc = shoal__reqtimes_trace(trace, start, duration, speedup, rate_scale, (uint64_t)seed, 0, a);
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
  shoal__loadgen_opts_t o;
  shoal__loadgen_opts_init(&o);
  const char *trace = NULL, *diurnal = NULL;
  double poisson = 0, speedup = 1, rate_scale = 1, start = 0, duration = 60, seed = 1, v;
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--progress")) {
      o.progress = 1;
      continue;
    }
    const char **str = !strcmp(a, "--url") ? &o.url : !strcmp(a, "--trace") ? &trace : !strcmp(a, "--diurnal") ? &diurnal
                       : !strcmp(a, "--model") ? &o.model : !strcmp(a, "--data") ? &o.data_dir
                       : !strcmp(a, "--timeline") ? &o.timeline_csv : !strcmp(a, "--requests-csv") ? &o.requests_csv : NULL;
    if (str) {
      if (!val) {
        fprintf(stderr, "shoal loadgen: %s needs a value\n", a);
        return 2;
      }
      *str = val;
      i++;
      continue;
    }
    static const struct { const char *name; double lo, hi; } nums[] = {
        {"--speedup", 1e-3, 1e6}, {"--rate-scale", 1e-3, 1e3}, {"--trace-start", 0, 1e9}, {"--poisson", 1e-6, 1e6},
        {"--duration", 0, 1e7},   {"--seed", 0, 1e15},         {"--rows", 1, 4096},       {"--timeout", 1e-3, 3600},
        {"--max-inflight", 1, 1e5}, {"--slo-ms", 1e-3, 1e7},   {"--window", 1e-3, 1e6},
    };
    double *dst[] = {&speedup, &rate_scale, &start, &poisson, &duration, &seed, NULL, &o.timeout_s, NULL, NULL, &o.window_s};
    size_t k = 0;
    while (k < sizeof nums / sizeof nums[0] && strcmp(a, nums[k].name)) k++;
    if (k == sizeof nums / sizeof nums[0]) {
      fprintf(stderr, "shoal loadgen: unknown option '%s' (shoal loadgen --help)\n", a);
      return 2;
    }
    if (num(a, val, nums[k].lo, nums[k].hi, &v)) return 2;
    i++;
    if ((!strcmp(a, "--rows") || !strcmp(a, "--max-inflight")) && v != (double)(long)v) {
      fprintf(stderr, "shoal loadgen: %s %s: expected an integer\n", a, val);
      return 2;
    }
    if (dst[k]) *dst[k] = v;
    else if (!strcmp(a, "--rows")) o.rows = (int)v;
    else if (!strcmp(a, "--max-inflight")) o.max_inflight = (int)v;
    else o.slo_s = v / 1e3;
  }
  if (!o.url) {
    fprintf(stderr, "shoal loadgen: --url http://HOST:PORT is needed (a replica or the router)\n");
    return 2;
  }
  if (!trace && duration <= 0) {
    fprintf(stderr, "shoal loadgen: --duration must be > 0 for --poisson and --diurnal\n");
    return 2;
  }
  shoal__reqtimes_t a = {0};
  if ((rc = arrivals(trace, poisson, diurnal, speedup, rate_scale, start, duration, seed, &a))) return rc;
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
