/* shoal sim: run scheduling policies over a trace or a synthetic workload on
 * a simulated cluster and compare them (docs/simulator.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "shoal/shoal.h"
#include "sched/policy.h"
#include "sched/ps_policy.h"
#include "sched/ps_replan.h"
#include "sim/sim.h"

#define PHILLY_CSV "../shared/data/philly/philly.csv"

/* The Philly trace of the named scenarios: ../shared beside the current directory (the repository's
 * root), else beside the repository this binary was built in (build/shoal: ../../shared); NULL with
 * both places in `tried` if neither has it. */
static const char *philly_csv(char *buf, size_t cap, char *tried, size_t tcap) {
  if (access(PHILLY_CSV, R_OK) == 0) return PHILLY_CSV;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  snprintf(tried, tcap, "%s (from the current directory)", PHILLY_CSV);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  snprintf(buf, cap, "%s/../%s", exe, PHILLY_CSV);
  snprintf(tried + strlen(tried), tcap - strlen(tried), " or %s (beside this binary's repository)", buf);
  return access(buf, R_OK) == 0 ? buf : NULL;
}

/* Named contended scenarios (docs/simulator.md "Scenarios"). */
typedef struct {
  const char *name, *desc;
  int philly;                   /* 1: the Philly trace, else synthetic */
  long jobs;                    /* synthetic jobs / Philly sample (0: all in the window) */
  double load;                  /* synthetic load */
  int poisson, pollux;
  double win_a, win_b;          /* Philly submission window (s after the first) */
  int machines, gpus;           /* cluster */
  long k0, k1;                  /* measured window (arrival ranks), k1 < 0: all */
  double load_scale;            /* arrivals compressed by this factor (--load-scale overrides) */
} scenario_t;
static const scenario_t scen[] = {
    {"synthetic", "3,000 Philly-like jobs (bursty) at load 0.9 on 16 x 8 GPUs; jobs 500..2499 measured", 0, 3000, 0.9, 0, 0, 0,
     0, 16, 8, 500, 2500, 1},
    {"philly-busy", "Philly: the busiest week (days 46-53, 12,417 jobs, ~790 GPUs offered) on 80 x 8 GPUs", 1, 0, 0, 0, 0,
     46 * 86400.0, 53 * 86400.0, 80, 8, 0, -1, 1},
    {"pollux", "Pollux-style: 160 filtered Philly jobs of a busy 8 hours (hours 730-738) submitted within 2 hours "
     "(--load-scale 4; 0.5x-2x: 2..8) on 16 x 4 GPUs",
     1, 160, 0, 0, 1, 730 * 3600.0, 738 * 3600.0, 16, 4, 0, -1, 4},
    {"gavel", "Gavel-style steady state: 6,000 synthetic jobs, Poisson at load 0.9 on 27 x 4 GPUs; jobs 4000..4999 measured", 0,
     6000, 0.9, 1, 0, 0, 0, 27, 4, 4000, 5000, 1},
};
#define NSCEN ((int)(sizeof scen / sizeof scen[0]))

static void usage(FILE *f) {
  fprintf(f,
          "usage: shoal sim [--scenario NAME | --trace FILE | --synthetic N [--load L]] [--cluster FILE | cluster flags]\n"
          "                 [--policy P1,P2,...] [--out DIR] [--seed S] [options]\n"
          "\nscenarios (contended; later flags override their settings; default without workload flags: synthetic):\n");
  for (int i = 0; i < NSCEN; i++) fprintf(f, "  %-12s %s\n", scen[i].name, scen[i].desc);
  fprintf(f,
          "\nworkload:\n"
          "  --trace FILE          Philly-derived CSV (timestamp,duration,num_gpus,gpu_time,cluster) or shoal job CSV\n"
          "  --synthetic N         N Philly-like synthetic jobs (default when no trace: 1000)\n"
          "  --load L              synthetic offered load, fraction of the cluster's GPUs (default 0.8)\n"
          "  --arrivals poisson|bursty  synthetic arrival process (default bursty: the trace's H2 gaps, cv 15.1)\n"
          "  --load-scale X        divide every arrival time by X (X x the offered load; traces and synthetic)\n"
          "  --seed S              seed of the generator, model assignment and policies (default 1)\n"
          "  --ps-fraction F       share of jobs made parameter-server jobs (default 0)\n"
          "  --ps-ratio K          PSs per worker of PS jobs, ceil(K*W) (default 0.5)\n"
          "  --pollux-filter       Philly: keep duration >= 60 s and gpu_time < 1000 GPU-h\n"
          "  --window A:B          Philly: keep jobs submitted in [A, B) seconds after the first\n"
          "  --sample N            Philly: keep a seeded sample of N jobs (an error with --synthetic;\n"
          "                        like --window and --pollux-filter, not applied to a shoal job CSV)\n"
          "  --write-trace FILE    write the workload as a shoal job CSV and continue\n"
          "  --report-jobs K0:K1   job statistics over jobs with arrival rank in [K0, K1) (warm-up/drain window)\n"
          "\ncluster (default 256 machines x 8 GPUs, 16 racks; racks default to min(16, machines),\n"
          "an explicit --racks above --machines is an error):\n"
          "  --cluster FILE        INI or JSON cluster file (docs/simulator.md)\n"
          "  --machines N --gpus-per-machine G --racks R --oversub O --cpus-per-machine C\n"
          "  --mem-gb-per-machine M --nic-gbps B --intra-gbps B\n"
          "\nmodel and engine:\n"
          "  --speed analytic|table   speed model (default analytic)\n"
          "  --throughputs FILE    Gavel throughputs.json for --speed table (default ../shared/data/gavel/throughputs.json)\n"
          "  --gpu TYPE            GPU type of the table: v100, p100, k80 (default v100)\n"
          "  --raw-spread          table: keep spread/consolidated ratios > 1 (default: clamp to 1)\n"
          "  --restart-cost S      seconds lost on resume, resize, migration (default 30)\n"
          "  --start-cost S        seconds lost on the first start (default 0)\n"
          "  --checkpoint S        preempted jobs lose work since the last multiple of S s of run time (default 0: none)\n"
          "  --horizon S           stop after S simulated seconds (unfinished jobs are counted)\n"
          "  --check               verify invariants at every step (also SHOAL_SIM_CHECK=1)\n"
          "\noutput:\n"
          "  --policy LIST         comma list; parameters as name:key=value:key=value (default all;\n"
          "                        at most 127 characters per policy)\n"
          "  --out DIR             per-job CSV, timeline CSV, summary.json, jct_cdf.svg, queue_cdf.svg,\n"
          "                        ftf_cdf.svg, utilization.svg\n"
          "  --no-progress         no progress bar (it is drawn only on a terminal anyway)\n"
          "  --csv                 one CSV row per policy (summary.json's names) instead of the table\n"
          "  --no-header           CSV without its header line     --tag TEXT  first CSV column (sweep label)\n"
          "  --lower-bound         offline lower bound on total flow time (slots of --lb-slot S, default 3600;\n"
          "                        LP limited to --lb-time S, default 60; LB_solo/LB_srpt above 3000 jobs) and every\n"
          "                        policy's flow in the same slots (policy none: the bound alone)\n"
          "\npolicies:\n");
  for (int i = 0; shoal__policy_at(i); i++)
    fprintf(f, "  %-9s %s\n            params: %s\n", shoal__policy_at(i)->name, shoal__policy_at(i)->summary,
            shoal__policy_at(i)->params);
}

typedef struct {
  char name[128];
  char params[256];
  const shoal_policy_ops_t *ops;
  shoal_metrics_t m;
  shoal_sim_result_t r;
  double *jct;
  long njct;
  double *queue;                /* queueing delay (first start - arrival) of the same jobs, sorted */
  double *ftf;                  /* finish-time fairness rho = JCT / isolated time of the same jobs, sorted */
  long nftf;
  long waited;                  /* finished jobs (in the window) whose first start came after their arrival */
  long at_stake;                /* jobs (all) that waited before their first start, were preempted or
                                 * reallocated, or did not finish: where policies could differ */
  double flow_slots;            /* --lower-bound: total flow in slots */
  double rss_mb;
} run_t;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double peak_rss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

static int mkdir_p(const char *dir) {
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(tmp, 0777);
      *p = '/';
    }
  if (mkdir(tmp, 0777) && errno != EEXIST) return shoal__seterr(SHOAL_ERR_IO, "--out %s: %s", dir, strerror(errno));
  return 0;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 32) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.10g", v);
  else fprintf(f, "null");
}

static int write_summary(const char *dir, const char *workload, const char *cluster, const char *speed,
                         const shoal_sim_config_t *cfg, uint64_t seed, run_t *runs, int nruns, double lb, double lb_slot,
                         double lb_solo) {
  char path[1200];
  snprintf(path, sizeof path, "%s/summary.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", path, strerror(errno));
  fprintf(f, "{\n  \"version\": \"%s\",\n  \"seed\": %llu,\n  \"workload\": ", SHOAL_VERSION_STRING, (unsigned long long)seed);
  json_str(f, workload);
  fprintf(f, ",\n  \"cluster\": ");
  json_str(f, cluster);
  fprintf(f, ",\n  \"speed_model\": ");
  json_str(f, speed);
  fprintf(f, ",\n  \"mapping\": ");
  json_str(f, "trace duration -> work = duration x speed(model, requested GPUs, consolidated); model = types[splitmix64(seed, row) mod |types that exist for the size|]; see docs/simulator.md");
  fprintf(f, ",\n  \"restart_cost_s\": ");
  json_num(f, cfg->restart_cost);
  if (!isnan(lb)) { /* --lower-bound: the bound, and per policy its flow in the same slots */
    fprintf(f, ",\n  \"lower_bound\": {\"flow_slots\": ");
    json_num(f, lb);
    fprintf(f, ", \"slot_s\": ");
    json_num(f, lb_slot);
    fprintf(f, ", \"lb_solo_slots\": ");
    json_num(f, lb_solo);
    fprintf(f, "}");
  }
  fprintf(f, ",\n  \"policies\": [\n");
  for (int i = 0; i < nruns; i++) {
    run_t *r = &runs[i];
    const shoal_metrics_t *m = &r->m;
    fprintf(f, "    {\"policy\": ");
    json_str(f, r->name);
    fprintf(f, ", \"jobs\": %ld, \"unfinished\": %ld", m->jobs, m->unfinished);
#define NUM(k, v)                  \
  do {                             \
    fprintf(f, ", \"" k "\": ");   \
    json_num(f, v);                \
  } while (0)
    NUM("jct_avg_s", m->jct_avg);
    NUM("jct_p50_s", m->jct_p50);
    NUM("jct_p95_s", m->jct_p95);
    NUM("jct_p99_s", m->jct_p99);
    NUM("makespan_s", m->makespan);
    NUM("queue_avg_s", m->queue_avg);
    fprintf(f, ", \"waited\": %ld", r->waited);
    NUM("gpu_util", m->util);
    NUM("effective_util", m->eff_util);
    fprintf(f, ", \"preemptions\": %ld, \"reallocations\": %ld", m->preemptions, m->reallocations);
    NUM("restart_gpu_s", r->r.restart_gpu_s);
    NUM("ftf_max", m->ftf_max);
    NUM("ftf_avg", m->ftf_avg);
    NUM("ftf_p95", m->ftf_p95);
    NUM("ftf_share_over_1", m->ftf_over1);
    NUM("wall_s", r->r.wall_s);
    fprintf(f, ", \"events\": %llu, \"decisions\": %llu", (unsigned long long)r->r.events, (unsigned long long)r->r.decisions);
    NUM("events_per_s", r->r.wall_s > 0 ? r->r.events / r->r.wall_s : NAN);
    NUM("sim_s_per_wall_s", r->r.wall_s > 0 ? (r->r.t_end - r->r.t_first) / r->r.wall_s : NAN);
    NUM("peak_rss_mb", r->rss_mb);
    NUM("decisions_per_s", r->r.wall_s > 0 ? r->r.decisions / r->r.wall_s : NAN);
    NUM("decide_ms_avg", r->r.decisions ? 1e3 * r->r.decide_s / r->r.decisions : 0);
    NUM("decide_ms_max", 1e3 * r->r.decide_max_s);
    if (!isnan(lb)) {
      NUM("flow_slots", r->flow_slots);
      NUM("ratio_lb", r->flow_slots / lb);
    }
    fprintf(f, ", \"policy_stats\": ");
    json_str(f, r->r.policy_stats);
    fprintf(f, "}%s\n", i + 1 < nruns ? "," : "");
#undef NUM
  }
  fprintf(f, "  ]\n}\n");
  if (fclose(f)) return shoal__seterr(SHOAL_ERR_IO, "%s: write error", path);
  return 0;
}

static int write_plots(const char *dir, run_t *runs, int nruns, int gpus) {
  char path[1200];
  shoal_svg_series_t *s = calloc((size_t)nruns, sizeof *s);
  double **ys = calloc((size_t)nruns * 2, sizeof *ys);
  int rc = 0;
  if (!s || !ys) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "plots: out of memory");
    goto done;
  }
  for (int i = 0; i < nruns; i++) {
    long n = runs[i].njct;
    ys[i] = malloc((size_t)(n ? n : 1) * sizeof **ys);
    if (!ys[i]) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "plots: out of memory");
      goto done;
    }
    for (long k = 0; k < n; k++) ys[i][k] = (double)(k + 1) / (double)n;
    s[i] = (shoal_svg_series_t){runs[i].name, runs[i].jct, ys[i], n};
  }
  snprintf(path, sizeof path, "%s/jct_cdf.svg", dir);
  if ((rc = shoal__svg_lines(path, "JCT CDF per policy", "job completion time (s, log scale)", "fraction of jobs", s, nruns, 1)))
    goto done;
  for (int i = 0; i < nruns; i++) s[i].x = runs[i].queue;
  snprintf(path, sizeof path, "%s/queue_cdf.svg", dir);
  if ((rc = shoal__svg_lines(path, "Queueing delay CDF per policy", "time from arrival to first start (s, log scale; 0 not shown)",
                             "fraction of jobs", s, nruns, 1)))
    goto done;
  for (int i = 0; i < nruns; i++) {
    long n = runs[i].nftf;
    double *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    if (!y) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "plots: out of memory");
      goto done;
    }
    for (long k = 0; k < n; k++) y[k] = (double)(k + 1) / (double)n;
    free(ys[i]);
    ys[i] = y;
    s[i] = (shoal_svg_series_t){runs[i].name, runs[i].ftf, y, n};
  }
  snprintf(path, sizeof path, "%s/ftf_cdf.svg", dir);
  if ((rc = shoal__svg_lines(path, "Finish-time fairness CDF per policy (JCT / isolated time; > 1 is unfair)",
                             "finish-time fairness rho (log scale)", "fraction of jobs", s, nruns, 1)))
    goto done;
  for (int i = 0; i < nruns; i++) {
    const shoal_sim_result_t *r = &runs[i].r;
    double *x = malloc((size_t)(r->ntimeline ? r->ntimeline : 1) * sizeof *x);
    double *y = malloc((size_t)(r->ntimeline ? r->ntimeline : 1) * sizeof *y);
    ys[nruns + i] = x;
    free(ys[i]);
    ys[i] = y;
    if (!x || !y) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "plots: out of memory");
      goto done;
    }
    for (int k = 0; k < r->ntimeline; k++) {
      x[k] = r->timeline[k].t / 3600.0;
      y[k] = gpus > 0 ? (double)r->timeline[k].busy / gpus : 0;
    }
    s[i] = (shoal_svg_series_t){runs[i].name, x, y, r->ntimeline};
  }
  snprintf(path, sizeof path, "%s/utilization.svg", dir);
  rc = shoal__svg_lines(path, "GPU utilization over time", "time (hours)", "allocated GPUs / cluster GPUs", s, nruns, 0);
done:
  if (ys)
    for (int i = 0; i < nruns * 2; i++) free(ys[i]);
  free(ys);
  free(s);
  return rc;
}

/* The offline lower bound (spec §7.3) on the planners' view of the
 * workload: slots of slot_s seconds, arrival slot = floor(arrival / slot_s),
 * every worker at the fastest per-worker rate the speed model gives the job
 * (its requested size or one worker, consolidated). The LP runs up to 3,000
 * jobs; larger workloads get max(LB_solo, LB_srpt). */
static int workload_lower_bound(shoal_workload_t *w, shoal_cluster_t *cl, const shoal_speed_t *speed, double last,
                                double slot_s, double tm, int quiet, double *lb, double *lbs) {
  shoal__workload_reset(w);
  shoal_sched_t s;
  shoal__ps_cluster_t pc;
  int rc = shoal__sched_init(&s, cl, speed, 16);
  if (rc) return rc;
  if ((rc = shoal__ps_view_cluster(cl, &pc))) {
    shoal__sched_fini(&s);
    return rc;
  }
  int n = w->njobs, T = 1;
  shoal__ps_job_t *pj = calloc((size_t)(n ? n : 1), sizeof *pj);
  if (!pj) rc = shoal__seterr(SHOAL_ERR_NOMEM, "lower bound: out of memory");
  for (int i = 0; i < n && !rc; i++) {
    shoal_job_t *j = &w->jobs[i];
    int slot = (int)floor(j->arrival / slot_s + 1e-9);
    shoal__ps_view(&s, j, slot_s, slot, 0, &pj[i]);
    pj[i].id = i;
    int P1 = shoal__ps_count(pj[i].kappa, 1);
    double r1 = shoal_sched_rate_consolidated(&s, j, 1, P1) * slot_s;
    if (r1 > pj[i].rho_in) pj[i].rho_in = r1;
    if (slot + 1 > T) T = slot + 1;
  }
  /* horizon: 1.5x the latest finish of the runs (the optimum ends by then) */
  int Tr = (int)(last / slot_s) + 1;
  if (Tr > T) T = Tr;
  T += T / 2 + 2;
  if (!rc && n <= 3000) {
    rc = shoal__ps_lower_bound(&pc, pj, n, T, tm, lb, lbs);
    if (rc && !quiet) fprintf(stderr, "shoal sim: lower bound LP failed (%s): using max(LB_solo, LB_srpt)\n", shoal_last_error());
    if (rc) rc = 1;
  } else if (!rc) rc = 1;
  if (rc == 1) {
    double srpt = 0;
    rc = shoal__ps_lower_bound_solo(&pc, pj, n, T, lbs);
    if (!rc) rc = shoal__ps_lower_bound_srpt(&pc, pj, n, &srpt);
    if (!rc) *lb = fmax(*lbs, srpt);
  }
  free(pj);
  shoal__ps_cluster_free(&pc);
  shoal__sched_fini(&s);
  return rc;
}

static const char *need(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) return NULL;
  return argv[++*i];
}

int shoal_cmd_sim(int argc, char **argv) {
  shoal_workload_opts_t wo;
  shoal__workload_opts_default(&wo);
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  shoal_cluster_spec_t cs;
  shoal__cluster_spec_default(&cs);
  const char *trace = NULL, *cluster_file = NULL, *out = NULL, *policies = NULL, *speed_name = "analytic";
  const char *throughputs = "../shared/data/gavel/throughputs.json", *gpu = "v100", *write_trace = NULL;
  int have_synth = 0, progress = 1, raw_spread = 0, flags_cluster = 0, racks_given = 0, sample_given = 0;
  const char *philly_only = NULL, *table_only = NULL; /* an option given that applies to these only */
  shoal_cluster_group_t flags = cs.group[0];
  shoal_net_t net = cs.net;
  int rc = 0;
  long k0 = 0, k1 = -1;
  int csv = 0, header = 1, lower_bound = 0;
  double lb_slot = 3600, lb_time = 60, load_scale = 1;
  const char *tag = "-", *scen_trace = NULL;
  /* scenario first: its settings are defaults that later flags override */
  const scenario_t *sc = NULL;
  {
    const char *name = NULL;
    int any = 0, trace_given = 0; /* --trace FILE names a scenario's trace itself */
    for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--scenario") && i + 1 < argc) name = argv[i + 1];
      trace_given |= !strcmp(argv[i], "--trace");
      if (!strcmp(argv[i], "--trace") || !strcmp(argv[i], "--synthetic") || !strcmp(argv[i], "--cluster") ||
          !strcmp(argv[i], "--machines"))
        any = 1;
    }
    if (!name && !any) name = "synthetic";
    for (int i = 0; name && i < NSCEN; i++)
      if (!strcmp(scen[i].name, name)) sc = &scen[i];
    if (name && !sc) {
      fprintf(stderr, "shoal sim: --scenario '%s': unknown (", name);
      for (int i = 0; i < NSCEN; i++) fprintf(stderr, "%s%s", i ? ", " : "", scen[i].name);
      fprintf(stderr, ")\n");
      return 2;
    }
    if (sc) {
      if (sc->philly) {
        static char found[1100];
        char tried[2400];
        scen_trace = trace_given ? NULL : philly_csv(found, sizeof found, tried, sizeof tried);
        if (!trace_given && !scen_trace) {
          fprintf(stderr, "shoal sim: --scenario %s needs the Philly trace: not at %s; give it with --trace FILE\n",
                  sc->name, tried);
          return 2;
        }
        wo.window_start_s = sc->win_a;
        wo.window_end_s = sc->win_b;
        wo.sample = sc->jobs;
        wo.pollux_filter = sc->pollux;
      } else {
        wo.synth_jobs = sc->jobs;
        wo.load = sc->load;
        wo.poisson = sc->poisson;
      }
      flags.machines = sc->machines;
      flags.per_machine.gpus = sc->gpus;
      flags.racks = sc->machines >= 16 ? sc->machines / 16 : 1;
      k0 = sc->k0;
      k1 = sc->k1;
      load_scale = sc->load_scale;
    }
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    double d;
    long l;
#define VAL()                                                          \
  do {                                                                 \
    if (!(v = need(argc, argv, &i))) {                                 \
      fprintf(stderr, "shoal sim: %s needs a value\n", a);             \
      return 2;                                                        \
    }                                                                  \
  } while (0)
#define DBL(lo, hi, dst)                                               \
  do {                                                                 \
    VAL();                                                             \
    if (shoal__parse_double(a, v, lo, hi, &d)) goto bad_value;         \
    dst = d;                                                           \
  } while (0)
#define LNG(lo, hi, dst)                                               \
  do {                                                                 \
    VAL();                                                             \
    if (shoal__parse_long(a, v, lo, hi, &l)) goto bad_value;           \
    dst = l;                                                           \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--trace")) { VAL(); trace = v; }
    else if (!strcmp(a, "--synthetic")) { LNG(1, SHOAL__SIM_SYNTH_JOBS_MAX, wo.synth_jobs); have_synth = 1; }
    else if (!strcmp(a, "--load")) DBL(SHOAL__SIM_LOAD_MIN, SHOAL__SIM_LOAD_MAX, wo.load);
    else if (!strcmp(a, "--seed")) { VAL(); char *e; errno = 0; wo.seed = strtoull(v, &e, 10); if (*e || errno || !*v) goto bad_value_msg; }
    else if (!strcmp(a, "--ps-fraction")) DBL(0, 1, wo.ps_fraction);
    else if (!strcmp(a, "--ps-ratio")) DBL(1e-6, 1, wo.ps_ratio);
    else if (!strcmp(a, "--pollux-filter")) wo.pollux_filter = 1, philly_only = a;
    else if (!strcmp(a, "--window")) {
      VAL();
      philly_only = a;
      char *e;
      wo.window_start_s = strtod(v, &e);
      if (*e != ':' || !(wo.window_start_s >= 0)) goto bad_value_msg;
      wo.window_end_s = strtod(e + 1, &e);
      if (*e || !(wo.window_end_s > wo.window_start_s)) goto bad_value_msg;
    } else if (!strcmp(a, "--report-jobs")) {
      VAL();
      char *e;
      errno = 0;
      k0 = strtol(v, &e, 10);
      if (*e != ':' || k0 < 0 || errno) goto bad_value_msg;
      k1 = strtol(e + 1, &e, 10);
      if (*e || k1 <= k0 || errno) goto bad_value_msg;
    } else if (!strcmp(a, "--sample")) { LNG(1, 100000000, wo.sample); sample_given = 1; }
    else if (!strcmp(a, "--write-trace")) { VAL(); write_trace = v; }
    else if (!strcmp(a, "--cluster")) { VAL(); cluster_file = v; }
    else if (!strcmp(a, "--machines")) { LNG(1, 1000000, flags.machines); flags_cluster = 1; }
    else if (!strcmp(a, "--gpus-per-machine")) { LNG(0, SHOAL_MAX_GPUS_PER_MACHINE, flags.per_machine.gpus); flags_cluster = 1; }
    else if (!strcmp(a, "--racks")) { LNG(1, 1000000, flags.racks); flags_cluster = 1; racks_given = 1; }
    else if (!strcmp(a, "--cpus-per-machine")) { DBL(1e-3, 1e6, flags.per_machine.cpus); flags_cluster = 1; }
    else if (!strcmp(a, "--mem-gb-per-machine")) { DBL(1e-3, 1e9, flags.per_machine.mem_gb); flags_cluster = 1; }
    else if (!strcmp(a, "--nic-gbps")) { DBL(1e-6, 1e9, flags.nic_gbps); flags_cluster = 1; }
    else if (!strcmp(a, "--oversub")) { DBL(1, 1e6, net.oversub); flags_cluster = 1; }
    else if (!strcmp(a, "--intra-gbps")) { DBL(1e-6, 1e9, net.intra_gbps); flags_cluster = 1; }
    else if (!strcmp(a, "--speed")) { VAL(); speed_name = v; }
    else if (!strcmp(a, "--throughputs")) { VAL(); throughputs = v; table_only = a; }
    else if (!strcmp(a, "--gpu")) { VAL(); gpu = v; table_only = a; }
    else if (!strcmp(a, "--raw-spread")) raw_spread = 1;
    else if (!strcmp(a, "--restart-cost")) DBL(0, SHOAL__SIM_RESTART_COST_MAX, cfg.restart_cost);
    else if (!strcmp(a, "--start-cost")) DBL(0, 1e9, cfg.start_cost);
    else if (!strcmp(a, "--checkpoint")) DBL(0, 1e12, cfg.checkpoint_s);
    else if (!strcmp(a, "--horizon")) DBL(0, 1e15, cfg.horizon_s);
    else if (!strcmp(a, "--check")) cfg.check = 1;
    else if (!strcmp(a, "--policy")) { VAL(); policies = v; }
    else if (!strcmp(a, "--out")) { VAL(); out = v; }
    else if (!strcmp(a, "--no-progress")) progress = 0;
    else if (!strcmp(a, "--scenario")) VAL();
    else if (!strcmp(a, "--arrivals")) {
      VAL();
      if (!strcmp(v, "poisson")) wo.poisson = 1;
      else if (!strcmp(v, "bursty")) wo.poisson = 0;
      else goto bad_value_msg;
    } else if (!strcmp(a, "--load-scale")) DBL(1e-3, 1e3, load_scale);
    else if (!strcmp(a, "--csv")) csv = 1;
    else if (!strcmp(a, "--no-header")) header = 0;
    else if (!strcmp(a, "--tag")) { VAL(); tag = v; }
    else if (!strcmp(a, "--lower-bound")) lower_bound = 1;
    else if (!strcmp(a, "--lb-slot")) DBL(1, 1e7, lb_slot);
    else if (!strcmp(a, "--lb-time")) DBL(0.1, 1e5, lb_time);
    else {
      fprintf(stderr, "shoal sim: unknown option '%s' (see shoal sim --help)\n", a);
      return 2;
    }
    continue;
  bad_value:
    fprintf(stderr, "shoal sim: %s\n", shoal_last_error());
    return 2;
  bad_value_msg:
    fprintf(stderr, "shoal sim: %s '%s': malformed value\n", a, v);
    return 2;
#undef VAL
#undef DBL
#undef LNG
  }
  if (!trace && !have_synth) trace = scen_trace;
  if (sample_given && !trace) {
    fprintf(stderr, "shoal sim: --sample applies to a Philly trace only (--synthetic N sets the number of synthetic jobs)\n");
    return 2;
  }
  if (trace && have_synth) {
    fprintf(stderr, "shoal sim: give --trace or --synthetic, not both\n");
    return 2;
  }
  if (philly_only && !trace) {
    fprintf(stderr, "shoal sim: %s applies to a Philly trace only, not to --synthetic\n", philly_only);
    return 2;
  }
  if (table_only && strcmp(speed_name, "table")) {
    fprintf(stderr, "shoal sim: %s applies to --speed table only (the speed model is %s)\n", table_only, speed_name);
    return 2;
  }
  if (cluster_file && flags_cluster) {
    fprintf(stderr, "shoal sim: give --cluster FILE or cluster flags, not both\n");
    return 2;
  }
  if (cluster_file) {
    if ((rc = shoal__cluster_spec_load(cluster_file, &cs))) goto fail_msg;
  } else {
    cs.group[0] = flags;
    cs.net = net;
    if (flags.racks > flags.machines) {
      if (racks_given) {
        fprintf(stderr, "shoal sim: --racks=%d: more than the %d machines (--machines)\n", flags.racks, flags.machines);
        return 2;
      }
      cs.group[0].racks = flags.machines; /* default 16 racks: at most one per machine */
    }
    if ((rc = shoal__cluster_spec_validate(&cs))) goto fail_msg;
  }
  cfg.seed = wo.seed;

  shoal_cluster_t *cl = NULL;
  shoal_speed_t *speed = NULL;
  shoal_workload_t w;
  memset(&w, 0, sizeof w);
  run_t *runs = NULL;
  int nruns = 0;
  if ((rc = shoal__cluster_create(&cs, &cl))) goto fail_msg;
  if (!strcmp(speed_name, "analytic")) rc = shoal__speed_analytic_create(&speed);
  else if (!strcmp(speed_name, "table")) rc = shoal__speed_table_create(throughputs, gpu, !raw_spread, &speed);
  else rc = shoal__seterr(SHOAL_ERR_CONFIG, "--speed '%s': expected analytic or table", speed_name);
  if (rc) goto fail_cluster;
  wo.cluster_gpus = cl->gpus_total;
  if (wo.max_gpus == 0) wo.max_gpus = cl->gpus_total; /* drop (and count) jobs larger than the cluster */
  if (trace) rc = shoal__trace_read(trace, &wo, speed, &w);
  else rc = shoal__synth_generate(&wo, &w);
  if (rc) goto fail_speed;
  shoal__workload_scale_arrivals(&w, load_scale);
  if ((rc = shoal__workload_assign_models(&w, speed, cl, &wo))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", shoal_last_error());
    rc = shoal__seterr(rc, "%s: %s", trace ? trace : "synthetic", msg);
    goto fail_workload;
  }
  if (write_trace && (rc = shoal__trace_write_shoal(write_trace, &w, speed))) goto fail_workload;
  if (out && (rc = mkdir_p(out))) goto fail_workload;

  /* policies */
  char plist[2048];
  if (!policies) {
    plist[0] = 0;
    for (int i = 0; shoal__policy_at(i); i++) {
      if (i) strncat(plist, ",", sizeof plist - strlen(plist) - 1);
      strncat(plist, shoal__policy_at(i)->name, sizeof plist - strlen(plist) - 1);
    }
  } else {
    if (strlen(policies) >= sizeof plist) {
      rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy: %zu characters, at most %zu", strlen(policies), sizeof plist - 1);
      goto fail_workload;
    }
    snprintf(plist, sizeof plist, "%s", policies);
    /* every comma-separated item names a policy: '', ',' or 'fifo,,srtf' ran nothing or skipped one silently */
    if (shoal__list_has_empty(plist, ',')) {
      rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy '%s': an empty policy name (a comma-separated list of "
                         "policies, see shoal sim --help)", policies);
      goto fail_workload;
    }
  }
  int maxruns = 1;
  for (const char *p = plist; *p; p++) maxruns += *p == ',';
  runs = calloc((size_t)maxruns, sizeof *runs);
  if (!runs) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
    goto fail_workload;
  }
  char *save = NULL;
  for (char *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    run_t *r = &runs[nruns];
    if (strlen(tok) >= sizeof r->name) {
      rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy: '%.40s...' is %zu characters long (at most %zu per policy)", tok,
                         strlen(tok), sizeof r->name - 1);
      goto fail_runs;
    }
    snprintf(r->name, sizeof r->name, "%s", tok);
    char *colon = strchr(tok, ':');
    if (colon) {
      *colon = 0;
      snprintf(r->params, sizeof r->params, "%s", colon + 1);
    }
    if (!strcmp(tok, "none")) continue; /* --lower-bound alone */
    r->ops = shoal__policy_find(tok);
    if (!r->ops) {
      rc = shoal__seterr(SHOAL_ERR_CONFIG, "--policy: unknown policy '%s' (see shoal sim --help)", tok);
      goto fail_runs;
    }
    /* parameters are checked before anything runs */
    shoal_sched_t probe;
    void *pst = NULL;
    if ((rc = shoal__sched_init(&probe, cl, speed, 16))) goto fail_runs;
    probe.nvcs = w.nvcs;
    rc = r->ops->create(&probe, r->params[0] ? r->params : NULL, &pst);
    if (!rc) r->ops->destroy(pst);
    shoal__sched_fini(&probe);
    if (rc) goto fail_runs;
    nruns++;
  }
  char cdesc[256];
  shoal__cluster_describe(cl, cdesc, sizeof cdesc);
  if (k1 > w.njobs) {
    if (k0 >= w.njobs)
      fprintf(stderr, "shoal sim: warning: --report-jobs %ld:%ld: the workload has %d jobs, the window is empty (job "
                      "statistics are all 0)\n", k0, k1, w.njobs);
    else
      fprintf(stderr, "shoal sim: warning: --report-jobs %ld:%ld: the workload has %d jobs, the window is jobs %ld..%d\n", k0,
              k1, w.njobs, k0, w.njobs - 1);
  }
  if (csv) {
    if (header)
      printf("tag,policy,jobs,unfinished,jct_avg_s,jct_p50_s,jct_p95_s,jct_p99_s,makespan_s,queue_avg_s,waited,gpu_util,"
             "preemptions,ftf_max,ftf_avg,decisions,decide_ms_avg,decide_ms_max,events_per_s,decisions_per_s,wall_s,"
             "peak_rss_mb,flow_slots,lb_slots,ratio_lb,policy_stats\n");
  } else {
    printf("workload: %s\ncluster:  %s\nspeed:    %s model (%d job types), restart cost %g s\n", w.source, cdesc, speed->name,
           speed->nmodels, cfg.restart_cost);
    if (sc) printf("scenario: %s (%s)\n", sc->name, sc->desc);
    if (k1 >= 0) printf("window:   job statistics over jobs %ld..%ld (arrival rank) of %d\n", k0, k1 - 1, w.njobs);
    printf("\n");
    if (nruns)
      printf("%-22s %7s %10s %10s %10s %10s %11s %10s %6s %8s %7s %7s %9s %8s %11s\n", "policy", "jobs", "avgJCT(s)", "p50(s)",
             "p95(s)", "p99(s)", "makespan(s)", "queue(s)", "util", "preempt", "FTFmax", "FTFavg", "decide_ms", "wall(s)",
             "events/s");
  }
  for (int i = 0; i < nruns; i++) {
    run_t *r = &runs[i];
    shoal_progress_t pb;
    shoal__progress_init(&pb, r->name, progress);
    cfg.progress = shoal__progress_cb;
    cfg.progress_arg = &pb;
    rc = shoal__sim_run(&w, &cs, speed, r->ops, r->params[0] ? r->params : NULL, &cfg, &r->r);
    shoal__progress_done(&pb);
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", shoal_last_error());
      rc = shoal__seterr(rc, "policy %s: %s", r->name, msg);
      goto fail_runs;
    }
    r->rss_mb = peak_rss_mb();
    if ((rc = shoal__metrics_compute_window(&w, &r->r, k0, k1 < 0 ? w.njobs : k1, &r->m))) goto fail_runs;
    const shoal_metrics_t *m = &r->m;
    r->jct = malloc((size_t)(w.njobs ? w.njobs : 1) * sizeof *r->jct);
    r->queue = malloc((size_t)(w.njobs ? w.njobs : 1) * sizeof *r->queue);
    r->ftf = malloc((size_t)(w.njobs ? w.njobs : 1) * sizeof *r->ftf);
    if (!r->jct || !r->queue || !r->ftf) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
      goto fail_runs;
    }
    long nq = 0;
    for (long k = k0; k < (k1 < 0 ? w.njobs : k1) && k < w.njobs; k++)
      if (w.jobs[k].state == SHOAL_JOB_DONE) {
        r->jct[r->njct++] = w.jobs[k].finish - w.jobs[k].arrival;
        r->queue[nq] = w.jobs[k].first_start - w.jobs[k].arrival;
        if (r->queue[nq++] > 1e-6) r->waited++;
        if (w.jobs[k].iso_time > 0) r->ftf[r->nftf++] = (w.jobs[k].finish - w.jobs[k].arrival) / w.jobs[k].iso_time;
      }
    for (long k = 0; k < w.njobs; k++) {
      const shoal_job_t *j = &w.jobs[k];
      r->at_stake += j->state != SHOAL_JOB_DONE || j->first_start < 0 || j->first_start - j->arrival > 1e-6 ||
                     j->n_preempt > 0 || j->n_realloc > 0;
    }
    qsort(r->jct, (size_t)r->njct, sizeof *r->jct, cmp_d);
    qsort(r->queue, (size_t)nq, sizeof *r->queue, cmp_d);
    qsort(r->ftf, (size_t)r->nftf, sizeof *r->ftf, cmp_d);
    /* the bound covers every job: a run that left jobs unfinished (a --horizon cut) has no comparable flow */
    if (lower_bound && m->unfinished) r->flow_slots = NAN;
    else if (lower_bound)
      for (long k = 0; k < w.njobs; k++)
        r->flow_slots += floor(w.jobs[k].finish / lb_slot + 1e-9) - floor(w.jobs[k].arrival / lb_slot + 1e-9) + 1;
    double dms = r->r.decisions ? 1e3 * r->r.decide_s / r->r.decisions : 0;
    if (!csv) {
      printf("%-22s %7ld %10.1f %10.1f %10.1f %10.1f %11.1f %10.1f %6.3f %8ld %7.2f %7.2f %9.4f %8.3f %11.0f\n", r->name,
             m->jobs, m->jct_avg, m->jct_p50, m->jct_p95, m->jct_p99, m->makespan, m->queue_avg, m->util, m->preemptions,
             m->ftf_max, m->ftf_avg, dms, r->r.wall_s, r->r.wall_s > 0 ? r->r.events / r->r.wall_s : 0.0);
      if (m->unfinished) printf("%-22s   (%ld jobs unfinished, excluded from the JCT columns)\n", "", m->unfinished);
      if (r->r.policy_stats[0]) printf("%-22s   %s\n", "", r->r.policy_stats);
    }
    fflush(stdout);
    if (out) {
      char path[1200], safe[128];
      snprintf(safe, sizeof safe, "%s", r->name);
      for (char *p = safe; *p; p++)
        if (*p == ':' || *p == '/' || *p == '=') *p = '_';
      snprintf(path, sizeof path, "%s/jobs-%s.csv", out, safe);
      if ((rc = shoal__report_jobs_csv(path, &w))) goto fail_runs;
      snprintf(path, sizeof path, "%s/timeline-%s.csv", out, safe);
      if ((rc = shoal__report_timeline_csv(path, &r->r))) goto fail_runs;
    }
  }
  double lb = NAN, lbs = NAN;
  if (lower_bound) {
    /* the bound's horizon comes from the latest finish of the runs; without
     * a run that finished every job (--policy none, or a --horizon cut),
     * FIFO is run to completion for it */
    double last = 0;
    int whole = nruns > 0;
    for (int i = 0; i < nruns; i++) {
      last = fmax(last, runs[i].r.t_last);
      if (runs[i].r.unfinished) whole = 0;
    }
    if (!whole) {
      shoal_sim_config_t fc = cfg;
      fc.horizon_s = 0;
      fc.progress = NULL;
      fc.check = 0;
      shoal_sim_result_t fr;
      memset(&fr, 0, sizeof fr);
      rc = shoal__sim_run(&w, &cs, speed, shoal__policy_find("fifo"), NULL, &fc, &fr);
      last = fmax(last, fr.t_last);
      shoal__sim_result_free(&fr);
      if (rc) goto fail_runs;
    }
    if ((rc = workload_lower_bound(&w, cl, speed, last, lb_slot, lb_time, csv, &lb, &lbs))) goto fail_runs;
  }
  if (csv)
    for (int i = 0; i < nruns; i++) {
      run_t *r = &runs[i];
      const shoal_metrics_t *m = &r->m;
      printf("%s,%s,%ld,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%ld,%.4f,%ld,%.4f,%.4f,%llu,%.5f,%.3f,%.0f,%.0f,%.3f,%.1f,%.0f,%.2f,%.4f,%s\n",
             tag, r->name, m->jobs, m->unfinished, m->jct_avg, m->jct_p50, m->jct_p95, m->jct_p99, m->makespan, m->queue_avg,
             r->waited, m->util, m->preemptions, m->ftf_max, m->ftf_avg, (unsigned long long)r->r.decisions,
             r->r.decisions ? 1e3 * r->r.decide_s / r->r.decisions : 0, 1e3 * r->r.decide_max_s,
             r->r.wall_s > 0 ? r->r.events / r->r.wall_s : 0.0, r->r.wall_s > 0 ? r->r.decisions / r->r.wall_s : 0.0,
             r->r.wall_s, r->rss_mb, lower_bound ? r->flow_slots : NAN, lb, lower_bound ? r->flow_slots / lb : NAN,
             r->r.policy_stats);
    }
  if (csv && lower_bound && nruns == 0) /* the bound alone (lp-bound): a row of its own; else in every row */
    printf("%s,lower-bound,%ld,0,nan,nan,nan,nan,nan,nan,0,nan,0,nan,nan,0,nan,nan,nan,nan,nan,nan,nan,%.3f,nan,"
           "slot_s=%g lb_solo=%.0f\n", tag, (long)w.njobs, lb, lb_slot, lbs);
  if (!csv && lower_bound) {
    printf("\nlower bound on total flow time: %.1f slots of %g s (LB_solo %.0f)%s\n", lb, lb_slot, lbs,
           nruns ? "; policies' flow in the same slots:" : "");
    for (int i = 0; i < nruns; i++)
      if (isnan(runs[i].flow_slots))
        printf("  %-22s flow n/a: %ld jobs unfinished at the horizon (the bound covers every job)\n", runs[i].name,
               runs[i].m.unfinished);
      else
        printf("  %-22s flow %10.0f slots  ratio to LB %.3f\n", runs[i].name, runs[i].flow_slots, runs[i].flow_slots / lb);
  }
  /* a run where every job started at its arrival, ran to completion and was
   * never preempted or reallocated, under every policy, cannot show policy
   * differences */
  long at_stake = 0;
  for (int i = 0; i < nruns; i++) at_stake += runs[i].at_stake;
  if (nruns && !at_stake)
    fprintf(stderr, "shoal sim: warning: under every policy every job started at its arrival and finished without "
                    "preemption or reallocation: the cluster is not contended and policies cannot differ (try --scenario, "
                    "a smaller cluster or a higher --load / --load-scale)\n");
  if (out) {
    if ((rc = write_summary(out, w.source, cdesc, speed->name, &cfg, wo.seed, runs, nruns, lower_bound ? lb : NAN,
                            lb_slot, lbs)))
      goto fail_runs;
    if ((rc = write_plots(out, runs, nruns, cl->gpus_total))) goto fail_runs;
    if (!csv) printf("\nwrote %s/summary.json, jobs-*.csv, timeline-*.csv, jct_cdf.svg, queue_cdf.svg, ftf_cdf.svg, utilization.svg\n", out);
  }
  if (!csv) printf("peak RSS %.1f MB\n", peak_rss_mb());
fail_runs:
  for (int i = 0; i < nruns; i++) {
    free(runs[i].jct);
    free(runs[i].queue);
    free(runs[i].ftf);
    shoal__sim_result_free(&runs[i].r);
  }
  free(runs);
fail_workload:
  shoal__workload_free(&w);
fail_speed:
  shoal__speed_destroy(speed);
fail_cluster:
  shoal__cluster_destroy(cl);
  if (!rc) return 0;
fail_msg:
  fprintf(stderr, "shoal sim: %s\n", shoal_last_error());
  return 1;
}
