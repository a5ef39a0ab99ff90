/* shoal sim loaning: training jobs and an inference service sharing one
 * simulated cluster, with inference servers loaned to training and
 * reclaimed (src/sim/loaning.c; docs/serving.md "Loaning in simulation"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/reqtimes.h"
#include "shoal/shoal.h"
#include "sched/model/speed.h"
#include "sched/serving/serving.h"
#include "sim/loaning.h"
#include "sim/sim.h"
#include "options.h"

typedef struct loan_cli {
  shoal_workload_opts_t wo;
  shoal_loan_config_t cfg;
  const char *trace, *requests, *policies, *out, *throughputs, *gpu;
  shoal_speed_t *speed;
  double load_scale, req_speedup, req_scale;
  int csv;
} loan_cli_t;

/* --window A:B (seconds after the first submission) */
static int parse_window(const char *n, const char *v, void *f) {
  return shoal__workload_parse_window(n, v, f);
}

#define SHOAL_OPTS_STRUCT loan_cli_t
static const shoal_opt_t loan_opts[] = {
    OPT_GROUP("training jobs (default: 640 Philly jobs of hours 730-738, filtered as Pollux, submitted within 2 hours):"),
    OPT_STRING("--trace", "FILE", trace, "Philly-derived CSV or shoal job CSV (arrival, GPUs, duration)", .expect = "a file"),
    OPT_CALL("--window", "A:B", wo, shoal_workload_opts_t, parse_window, "keep jobs submitted in [A, B) s after the first",
             .expect = "A:B", .def = "2628000:2656800"),
    OPT_LONG("--sample", "N", wo.sample, 1, 100000000, "keep a seeded sample of N jobs"),
    OPT_INT("--max-gpus", "G", wo.max_gpus, 1, 1000000, "drop jobs asking for more GPUs"),
    OPT_DOUBLE("--load-scale", "X", load_scale, 1e-3, 1e3, "divide every arrival time by X"),
    OPT_U64("--seed", "S", wo.seed, 0, 0, "seed of the sample, the jobs' models and the request copies"),
    OPT_STRING("--throughputs", "FILE", throughputs, "measured throughput(n) of each job's model (a throughputs.json table,\n"
               "its spread curve: one worker a host); the trace then names each job's model and its\n"
               "work in worker-steps (default: built-in goodput models)", .expect = "a file"),
    OPT_STRING("--gpu", "NAME", gpu, "the table's GPU key (with --throughputs)", .def = "testbed"),
    OPT_DOUBLE("--startup", "S", cfg.startup_s, 0, 86400, "a job's first run: seconds before it trains (process start, data read)"),
    OPT_GROUP("inference requests:"),
    OPT_STRING("--requests", "FILE", requests, "request trace CSV (first column: the arrival), replayed again and again",
               .expect = "a file"),
    OPT_DOUBLE("--req-speedup", "X", req_speedup, 1e-3, 1e3, "replay the request trace X times faster"),
    OPT_DOUBLE("--req-scale", "X", req_scale, 1e-3, 1e3, "X times as many requests"),
    OPT_DOUBLE("--service", "S", cfg.service_s, 1e-6, 1e4, "one request on one replica (GPU), seconds"),
    OPT_DOUBLE("--slo", "S", cfg.slo_s, 1e-6, 1e5, "P99 latency SLO, seconds"),
    OPT_GROUP("cluster and policies:"),
    OPT_INT("--gpus", "N", cfg.gpus, 2, 1000000, "GPUs of the cluster (one replica or one worker each)"),
    OPT_STRING("--policy", "LIST", policies,
               "comma list of fapes, static, reactive, pollux; fapes:predictor=P picks the\n"
               "predictor (off, ewma, holt, oracle)", .expect = "policies separated by commas"),
    OPT_INT("--infer-gpus", "N", cfg.infer_gpus, 0, 1000000, "VC_infer of static and pollux (0: the busiest interval's need)"),
    OPT_DOUBLE("--alpha", "A", cfg.alpha, 1e-6, 1, "the predictors' smoothing weight"),
    OPT_DOUBLE("--headroom", "Z", cfg.z, 0, 10, "forecast plus Z standard deviations of its own errors"),
    OPT_DOUBLE("--interval", "S", cfg.interval_s, 1, 86400, "decision interval, seconds (the SLO is judged per interval)"),
    OPT_DOUBLE("--burst", "S", cfg.burst_s, 1e-3, 86400, "size replicas for an interval's busiest window of S seconds"),
    OPT_DOUBLE("--check", "S", cfg.check_s, 1e-3, 86400, "fapes: reclaim on demand when the last S seconds' requests need more"),
    OPT_INT("--stable", "K", cfg.stable_n, 0, 100000, "fapes: only GPUs beyond the most replicas of the last K intervals start\n"
            "queued jobs; the loaned rest only grows running ones"),
    OPT_DOUBLE("--base", "S", cfg.base_s, 0, 86400, "fapes: forecast each interval's busiest window of S seconds (0, the default:\n"
               "the interval, its mean rate); the on-demand reclaims cover the bursts above"),
    OPT_DOUBLE("--hold", "S", cfg.hold_s, 0, 86400, "fapes: replicas above the waiting requests' need for S seconds go back to\n"
               "training (0: M/M/c on the last check's rate, held to the interval's end)"),
    OPT_INT("--spare", "N", cfg.spare, 0, 1000000, "fapes: replicas kept ready beyond the need (bursts are served from\n"
            "them while a reclaim runs)"),
    OPT_DOUBLE("--replica-start", "S", cfg.replica_start_s, 0, 3600, "a free GPU to a serving replica, seconds"),
    OPT_DOUBLE("--reclaim", "S", cfg.reclaim_s, 0, 3600, "a loaned GPU to a serving replica (shrink at an iteration boundary)"),
    OPT_DOUBLE("--resize", "S", cfg.resize_s, 0, 86400, "an elastic job's pause when resized, seconds"),
    OPT_DOUBLE("--restart", "S", cfg.restart_s, 0, 86400, "a stopped job's pause when it runs again, seconds"),
    OPT_FLAG("--fifo-strict", cfg.fifo_strict, "FIFO training (static, reactive): no job passes a waiting one (default:\n"
             "a waiting job that fits starts, as the live fifo)"),
    OPT_FLAG("--reactive-elastic", cfg.reactive_goodput, "reactive: train by the goodput allocation (elastic jobs, a reclaim\n"
             "shrinks one), as the live reactive, instead of rigid FIFO"),
    OPT_FLAG("--partitions", cfg.partitions, "fapes, reactive: queued jobs start only outside VC_infer (--infer-gpus); a\n"
             "loaned GPU only grows a running job (the live Slurm partitions)"),
    OPT_DOUBLE("--critical", "S", cfg.critical_s, -1, 1e9, "fapes: the job that would end last even alone, once S seconds below its\n"
               "requested GPUs, gets them first and loses them last (-1: off)"),
    OPT_DOUBLE("--react-high", "U", cfg.react_hi, 1e-3, 1, "reactive: add replicas above this utilization"),
    OPT_DOUBLE("--react-low", "U", cfg.react_lo, 1e-3, 1, "reactive: remove replicas below this utilization"),
    OPT_DOUBLE("--horizon", "S", cfg.horizon_s, 1, 1e9, "stop after S simulated seconds (unfinished jobs are counted)"),
    OPT_GROUP("output:"),
    OPT_STRING("--out", "DIR", out, "summary.csv, timeline-POLICY.csv, jct_cdf.svg, loaning.svg (the first fapes run)",
               .expect = "a directory"),
    OPT_FLAG("--csv", csv, "one CSV row per policy instead of the table"),
    OPT_END,
};

static const shoal_opts_spec_t loan_spec = {
    .name = "shoal sim loaning",
    .usage = "usage: shoal sim loaning [--policy LIST] [--trace FILE] [--requests FILE] [options]\n"
             "Training jobs and an inference service share one simulated cluster: idle inference servers are\n"
             "loaned to elastic training and reclaimed for the latency SLO (docs/serving.md).\n",
    .opts = loan_opts,
};

typedef struct loan_run {
  char name[64];
  shoal_loan_config_t cfg;
  shoal_loan_result_t r;
} loan_run_t;

/* "fapes:predictor=holt" -> the policy and its predictor; 0 or an error naming the item. */
static int parse_run(const char *item, const shoal_loan_config_t *base, loan_run_t *run) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", item);
  char *colon = strchr(buf, ':');
  if (colon) *colon = 0;
  int p = shoal__loan_policy_find(buf);
  if (p < 0) return shoal__seterr(SHOAL_ERR_CONFIG, "--policy '%s': unknown (%s)", buf, shoal__loan_policy_names());
  run->cfg = *base;
  run->cfg.policy = p;
  if (colon) {
    if (p != SHOAL_LOAN_FAPES || strncmp(colon + 1, "predictor=", 10))
      return shoal__seterr(SHOAL_ERR_CONFIG, "--policy '%s': only fapes takes a parameter, predictor=P", item);
    static char names[8][16];
    static int used;
    snprintf(names[used % 8], sizeof names[0], "%s", colon + 11);
    run->cfg.predictor = names[used++ % 8];
    shoal__forecast_t *f;
    if (shoal__forecast_create(run->cfg.predictor, 0.5, 0, &f)) {
      char msg[256];
      snprintf(msg, sizeof msg, "%s", shoal_last_error());
      return shoal__seterr(SHOAL_ERR_CONFIG, "--policy '%s': %s", item, msg);
    }
    shoal__forecast_free(f);
  }
  if (p == SHOAL_LOAN_FAPES) snprintf(run->name, sizeof run->name, "fapes-%s", run->cfg.predictor);
  else snprintf(run->name, sizeof run->name, "%s", buf);
  return 0;
}

static int make_runs(const loan_cli_t *c, loan_run_t **out, int *nout) {
  char list[1024];
  snprintf(list, sizeof list, "%s", c->policies);
  loan_run_t *runs = calloc(32, sizeof *runs);
  if (!runs) return shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
  int n = 0, rc = 0;
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
    if (n == 32) rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy: at most 32 runs");
    else rc = parse_run(tok, &c->cfg, &runs[n++]);
  }
  if (!rc && !n) rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy: no policy given");
  if (rc) {
    free(runs);
    return rc;
  }
  *out = runs, *nout = n;
  return 0;
}

static int load_inputs(loan_cli_t *c, shoal_workload_t *w, shoal__reqtimes_t *req, double *period_s) {
  int rc = 0;
  if (c->throughputs && (rc = shoal__speed_table_create(c->throughputs, c->gpu, 0, &c->speed))) return rc;
  rc = shoal__trace_read(c->trace, &c->wo, c->speed, w);
  if (rc) return rc;
  shoal__workload_scale_arrivals(w, c->load_scale);
  if (!w->njobs) return shoal__seterr(SHOAL_ERR_CONFIG, "%s: no training jobs left by --window/--sample/--max-gpus", c->trace);
  rc = shoal__reqtimes_trace("--requests", c->requests, 0, 0, c->req_speedup, c->req_scale, c->wo.seed, 50000000, req);
  if (rc) return rc;
  if (!req->n) return shoal__seterr(SHOAL_ERR_CONFIG, "%s: no requests", c->requests);
  double I = c->cfg.interval_s;
  *period_s = (floor(req->t[req->n - 1] / I) + 1) * I; /* the trace's span in whole intervals */
  return 0;
}

static void write_csv(FILE *f, const loan_run_t *runs, int n) {
  fprintf(f, "policy,jobs,finished,jct_avg_h,jct_p50_h,jct_p95_h,slo_attainment,intervals,reclaims,loaned_gpu_h,"
             "goodput_gpu_eq,infer_gpus,resizes,restarts,t_end_h,t_floor_h\n");
  for (int i = 0; i < n; i++) {
    const shoal_loan_result_t *r = &runs[i].r;
    fprintf(f, "%s,%ld,%ld,%.4f,%.4f,%.4f,%.5f,%ld,%ld,%.2f,%.3f,%d,%ld,%ld,%.3f,%.3f\n", runs[i].name, r->jobs, r->finished,
            r->jct_avg / 3600, r->jct_p50 / 3600, r->jct_p95 / 3600,
            r->intervals ? (double)r->intervals_ok / r->intervals : 0, r->intervals, r->reclaims, r->loaned_gpu_s / 3600,
            r->speedup_avg, r->infer_gpus, r->resizes, r->restarts, r->t_end / 3600, r->t_floor / 3600);
  }
}

static void print_table(const loan_cli_t *c, const loan_run_t *runs, int n, double period_s, size_t nreq,
                        const shoal_workload_t *w) {
  if (c->csv) {
    write_csv(stdout, runs, n);
    return;
  }
  printf("training: %d jobs from %s\nrequests: %zu per %.0f s period from %s (x%g faster, x%g requests), replayed\n",
         w->njobs, w->source, nreq, period_s, c->requests, c->req_speedup, c->req_scale);
  printf("cluster: %d GPUs; SLO: P99 <= %g s per %g s interval; service %g s\n\n", c->cfg.gpus, c->cfg.slo_s,
         c->cfg.interval_s, c->cfg.service_s);
  printf("%-14s %9s %9s %9s %8s %8s %9s %8s %9s %7s\n", "policy", "done", "JCT avg", "JCT p95", "vs best", "SLO ok",
         "reclaims", "loaned", "goodput", "VCinfer");
  printf("%-14s %9s %9s %9s %8s %8s %9s %8s %9s %7s\n", "", "", "h", "h", "baseline", "%", "GPUs", "GPU-h", "GPU-eq", "GPUs");
  double best = INFINITY;
  for (int i = 0; i < n; i++)
    if (runs[i].cfg.policy != SHOAL_LOAN_FAPES && runs[i].r.finished == runs[i].r.jobs && runs[i].r.jct_avg < best)
      best = runs[i].r.jct_avg;
  for (int i = 0; i < n; i++) {
    const shoal_loan_result_t *r = &runs[i].r;
    char done[32], vs[16] = "-";
    snprintf(done, sizeof done, "%ld/%ld", r->finished, r->jobs);
    if (isfinite(best) && r->finished == r->jobs) snprintf(vs, sizeof vs, "%.3f", r->jct_avg / best);
    printf("%-14s %9s %9.2f %9.2f %8s %8.2f %9ld %8.1f %9.1f %7d\n", runs[i].name, done, r->jct_avg / 3600,
           r->jct_p95 / 3600, vs, r->intervals ? 100.0 * r->intervals_ok / r->intervals : 0, r->reclaims,
           r->loaned_gpu_s / 3600, r->speedup_avg, r->infer_gpus);
  }
  printf("\nvs best baseline: average JCT over the best of static, reactive and pollux that finished every job;\n"
         "SLO ok: intervals whose requests' P99 held the SLO; goodput: the training jobs' summed speedup\n"
         "(progress in GPUs at the tuned batch), averaged over the run\n");
  /* every job's progress is fixed by the trace, so a run's goodput is that total over its end: the end no
   * policy can beat bounds the goodput of any */
  const shoal_loan_result_t *r0 = &runs[0].r;
  if (n && r0->finished == r0->jobs && r0->t_floor > 0) {
    double total = r0->speedup_avg * r0->t_end;
    printf("ends: ");
    for (int i = 0; i < n; i++) printf("%s%s %.1f h", i ? ", " : "", runs[i].name, runs[i].r.t_end / 3600);
    printf("; no policy ends before %.1f h (job %ld alone at its best size from its arrival): goodput at most %.1f "
           "GPU-eq\n", r0->t_floor / 3600, r0->floor_job, total / r0->t_floor);
  }
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) shoal__seterr(SHOAL_ERR_IO, "--out: %s: cannot write", path);
  return f;
}

static int write_timelines(const char *dir, const loan_run_t *runs, int n) {
  char path[1200], name[128];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "timeline-%s.csv", runs[i].name);
    FILE *f = open_out(dir, name, path, sizeof path);
    if (!f) return SHOAL_ERR_IO;
    fprintf(f, "t_s,rate,peak_rate,replicas,loaned,train_gpus,queued,goodput_gpu_eq,p99_s\n");
    for (int k = 0; k < runs[i].r.ntl; k++) {
      const shoal_loan_point_t *p = &runs[i].r.tl[k];
      fprintf(f, "%.0f,%.4f,%.4f,%d,%.2f,%.2f,%.2f,%.3f,%.4f\n", p->t, p->rate, p->peak, p->replicas, p->loaned, p->train_avg, p->queued_avg,
              p->speedup, p->p99);
    }
    if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "--out: %s: write failed", path);
  }
  return 0;
}

/* jct_cdf.svg (every run) and loaning.svg (the first fapes run: replicas, training GPUs, loaned GPUs). */
static int write_plots(const char *dir, const loan_run_t *runs, int n) {
  char path[1200];
  shoal_svg_series_t s[32];
  double *y[32] = {0}, *hx = NULL, *tv[3] = {0};
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    long m = runs[i].r.finished;
    if (!(y[i] = malloc((size_t)(m ? m : 1) * sizeof(double)))) rc = SHOAL_ERR_NOMEM;
    for (long k = 0; k < m && !rc; k++) y[i][k] = (k + 1.0) / m;
    s[i] = (shoal_svg_series_t){runs[i].name, runs[i].r.jct, y[i], m};
  }
  snprintf(path, sizeof path, "%s/jct_cdf.svg", dir);
  if (!rc) rc = shoal__svg_lines(path, "training JCT", "JCT (s)", "fraction of jobs", s, n, 1);
  const loan_run_t *f = NULL;
  for (int i = 0; i < n && !f; i++)
    if (runs[i].cfg.policy == SHOAL_LOAN_FAPES) f = &runs[i];
  if (!rc && f && f->r.ntl) {
    int m = f->r.ntl;
    hx = malloc((size_t)m * sizeof *hx);
    for (int j = 0; j < 3; j++) tv[j] = malloc((size_t)m * sizeof **tv);
    if (!hx || !tv[0] || !tv[1] || !tv[2]) rc = SHOAL_ERR_NOMEM;
    for (int k = 0; k < m && !rc; k++) {
      hx[k] = f->r.tl[k].t / 3600;
      tv[0][k] = f->r.tl[k].replicas, tv[1][k] = f->r.tl[k].train_avg, tv[2][k] = f->r.tl[k].loaned;
    }
    shoal_svg_series_t ts[3] = {{"inference replicas", hx, tv[0], m}, {"training GPUs", hx, tv[1], m},
                                {"loaned GPUs", hx, tv[2], m}};
    snprintf(path, sizeof path, "%s/loaning.svg", dir);
    if (!rc) rc = shoal__svg_lines(path, f->name, "time (h)", "GPUs", ts, 3, 0);
  }
  for (int i = 0; i < n; i++) free(y[i]);
  free(hx), free(tv[0]), free(tv[1]), free(tv[2]);
  if (rc == SHOAL_ERR_NOMEM) return shoal__seterr(rc, "--out: out of memory");
  return rc;
}

static int write_out(const char *dir, const loan_run_t *runs, int n) {
  char path[1200];
  if (mkdir(dir, 0777) && errno != EEXIST) return shoal__seterr(SHOAL_ERR_IO, "--out %s: %s", dir, strerror(errno));
  FILE *f = open_out(dir, "summary.csv", path, sizeof path);
  if (!f) return SHOAL_ERR_IO;
  write_csv(f, runs, n);
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "--out: %s: write failed", path);
  int rc = write_timelines(dir, runs, n);
  return rc ? rc : write_plots(dir, runs, n);
}

static int loan_main(loan_cli_t *c, shoal_workload_t *w, shoal__reqtimes_t *req, loan_run_t **runs, int *n) {
  double period_s = 0;
  int rc = make_runs(c, runs, n);
  if (!rc) rc = load_inputs(c, w, req, &period_s);
  for (int i = 0; !rc && i < *n; i++) {
    (*runs)[i].cfg.seed = c->wo.seed;
    (*runs)[i].cfg.speed = c->speed;
    rc = shoal__loan_sim(w, req, period_s, &(*runs)[i].cfg, &(*runs)[i].r);
    if (!c->csv && isatty(2)) fprintf(stderr, "\r%s done (%d/%d)   %s", (*runs)[i].name, i + 1, *n, i + 1 == *n ? "\n" : "");
  }
  if (!rc) print_table(c, *runs, *n, period_s, req->n, w);
  if (!rc && c->out) {
    rc = write_out(c->out, *runs, *n);
    if (!rc && !c->csv) printf("wrote %s/summary.csv, timeline-*.csv, jct_cdf.svg, loaning.svg\n", c->out);
  }
  return rc;
}

int shoal_cmd_sim_loaning(int argc, char **argv) {
  loan_cli_t c = {.trace = "../shared/data/philly/philly.csv", .requests = "../shared/data/azure-llm-2023/code.csv",
                  .policies = "fapes,static,reactive,pollux", .gpu = "testbed", .load_scale = 4, .req_speedup = 1, .req_scale = 1};
  shoal__workload_opts_default(&c.wo);
  c.wo.window_start_s = 730 * 3600.0, c.wo.window_end_s = 738 * 3600.0;
  c.wo.pollux_filter = 1, c.wo.sample = 640, c.wo.max_gpus = 32;
  shoal__loan_config_default(&c.cfg);
  c.cfg.z = 0; /* on-demand reclaims cover the bursts a forecast misses: no headroom by default */
  int st = shoal_opts_parse(&loan_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  shoal_workload_t w = {0};
  shoal__reqtimes_t req = {0};
  loan_run_t *runs = NULL;
  int n = 0, rc = loan_main(&c, &w, &req, &runs, &n);
  for (int i = 0; i < n; i++) shoal__loan_result_free(&runs[i].r);
  free(runs);
  if (c.speed) shoal__speed_destroy(c.speed);
  shoal__workload_free(&w);
  shoal__reqtimes_free(&req);
  if (!rc) return 0;
  fprintf(stderr, "shoal sim loaning: %s\n", shoal_last_error());
  return 1;
}
