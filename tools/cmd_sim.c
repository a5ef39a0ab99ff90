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
#include "sched/model/interference.h"
#include "sched/planners/lower_bound.h"
#include "sched/policies/slotted.h"
#include "sched/policy.h"
#include "sim/sim.h"
#include "options.h"

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
  int racks;                    /* 0: machines / 16 (at least 1) */
  double oversub;               /* 0: the default (1) */
  int interference;             /* 1: the shipped interference model (--interference overrides) */
} scenario_t;
static const scenario_t scen[] = {
    {"synthetic", "3,000 Philly-like jobs (bursty) at load 0.9 on 16 x 8 GPUs; jobs 500..2499 measured", 0, 3000, 0.9, 0, 0, 0,
     0, 16, 8, 500, 2500, 1, 0, 0, 0},
    {"philly-busy", "Philly: the busiest week (days 46-53, 12,417 jobs, ~790 GPUs offered) on 80 x 8 GPUs", 1, 0, 0, 0, 0,
     46 * 86400.0, 53 * 86400.0, 80, 8, 0, -1, 1, 0, 0, 0},
    {"pollux", "Pollux-style: 160 filtered Philly jobs of a busy 8 hours (hours 730-738) submitted within 2 hours "
     "(--load-scale 4; 0.5x-2x: 2..8) on 16 x 4 GPUs",
     1, 160, 0, 0, 1, 730 * 3600.0, 738 * 3600.0, 16, 4, 0, -1, 4, 0, 0, 0},
    {"gavel", "Gavel-style steady state: 6,000 synthetic jobs, Poisson at load 0.9 on 27 x 4 GPUs; jobs 4000..4999 measured", 0,
     6000, 0.9, 1, 0, 0, 0, 27, 4, 4000, 5000, 1, 0, 0, 0},
    {"interference", "Philly day 25 (1,099 jobs; --load-scale 2) on 32 x 8 GPUs in 8 racks, 2:1 uplinks, 2 sockets "
     "per machine; co-located jobs slow each other (the shipped interference model)", 1, 0, 0, 0, 0, 25 * 86400.0,
     26 * 86400.0, 32, 8, 0, -1, 2, 8, 2, 1},
};
#define NSCEN ((int)(sizeof scen / sizeof scen[0]))

/* Everything `shoal sim` is told. */
typedef struct sim_cli {
  shoal_workload_opts_t wo;
  shoal_sim_config_t cfg;
  shoal_cluster_group_t flags; /* the cluster flags (one group) */
  shoal_net_t net;
  const char *trace, *cluster_file, *out, *policies, *speed, *throughputs, *gpu, *write_trace, *scenario, *tag;
  const char *interference;    /* off, shipped or a model file */
  shoal_interference_t *im;    /* the model loaded, NULL: off */
  int no_progress, raw_spread, csv, no_header, lower_bound;
  long report[2];              /* --report-jobs K0:K1 (K1 < 0: all) */
  double lb_slot, lb_time, load_scale;
  const scenario_t *sc;        /* the scenario in force, if any */
  char sc_overridden[256];     /* its settings the command line replaced ("--window --machines") */
  const char *scen_trace;      /* its Philly trace, found beside the repository */
} sim_cli_t;

/* What options apply to (the bits of sim_opts' .when) */
enum { M_TRACE, M_TRACE_SAMPLE, M_TABLE };
static int on_trace(const void *c) { return ((const sim_cli_t *)c)->trace != NULL; }
static int on_table(const void *c) { return !strcmp(((const sim_cli_t *)c)->speed, "table"); }
static void not_table(const void *c, char *b, size_t cap) {
  snprintf(b, cap, "applies to --speed table only (the speed model is %s)", ((const sim_cli_t *)c)->speed);
}
static const shoal_opt_mode_t sim_modes[] = {
    [M_TRACE] = {on_trace, "applies to a Philly trace only, not to --synthetic", NULL},
    [M_TRACE_SAMPLE] = {on_trace, "applies to a Philly trace only (--synthetic N sets the number of synthetic jobs)", NULL},
    [M_TABLE] = {on_table, NULL, not_table},
};

/* --window A:B (seconds after the first submission) */
static int parse_window(const char *n, const char *v, void *f) {
  return shoal__workload_parse_window(n, v, f);
}

/* --report-jobs K0:K1 (arrival ranks) */
static int parse_report(const char *n, const char *v, void *f) {
  long *k = f;
  char *e;
  errno = 0;
  long k0 = strtol(v, &e, 10), k1 = -1;
  int ok = *e == ':' && k0 >= 0 && !errno;
  if (ok) k1 = strtol(e + 1, &e, 10), ok = !*e && k1 > k0 && !errno;
  if (!ok) return shoal__seterr(SHOAL_ERR_CONFIG, "%s '%s': expected K0:K1, arrival ranks with 0 <= K0 < K1", n, v);
  k[0] = k0;
  k[1] = k1;
  return 0;
}

#define SHOAL_OPTS_STRUCT sim_cli_t
#define W(m) (1u << (m))
static const shoal_opt_t sim_opts[] = {
    OPT_GROUP("workload:"),
    OPT_STRING("--scenario", "NAME", scenario, "a contended scenario (the list below): its settings, which later flags\n"
               "override", .def = "synthetic without workload flags", .expect = "a scenario name"),
    OPT_STRING("--trace", "FILE", trace, "Philly-derived CSV (timestamp,duration,num_gpus,gpu_time,cluster) or shoal job CSV",
               .expect = "a file"),
    OPT_LONG("--synthetic", "N", wo.synth_jobs, 1, SHOAL__SIM_SYNTH_JOBS_MAX, "N Philly-like synthetic jobs"),
    OPT_DOUBLE("--load", "L", wo.load, SHOAL__SIM_LOAD_MIN, SHOAL__SIM_LOAD_MAX,
               "synthetic offered load, fraction of the cluster's GPUs"),
    OPT_ENUM("--arrivals", "poisson|bursty", wo.poisson, "bursty|poisson",
             "synthetic arrival process (bursty: the trace's H2 gaps, cv 15.1)"),
    OPT_DOUBLE("--load-scale", "X", load_scale, 1e-3, 1e3,
               "divide every arrival time by X (X x the offered load; traces and synthetic)"),
    OPT_U64("--seed", "S", wo.seed, 0, 0, "seed of the generator, model assignment and policies"),
    OPT_DOUBLE("--ps-fraction", "F", wo.ps_fraction, 0, 1, "share of jobs made parameter-server jobs"),
    OPT_DOUBLE("--ps-ratio", "K", wo.ps_ratio, 1e-6, 1, "PSs per worker of PS jobs, ceil(K*W)"),
    OPT_FLAG("--pollux-filter", wo.pollux_filter, "Philly: keep duration >= 60 s and gpu_time < 1000 GPU-h",
             .when = W(M_TRACE)),
    OPT_CALL("--window", "A:B", wo, shoal_workload_opts_t, parse_window,
             "Philly: keep jobs submitted in [A, B) seconds after the first", .expect = "A:B", .when = W(M_TRACE)),
    OPT_LONG("--sample", "N", wo.sample, 1, 100000000,
             "Philly: keep a seeded sample of N jobs (like --window and --pollux-filter, not applied\n"
             "to a shoal job CSV)", .def = "all", .when = W(M_TRACE_SAMPLE)),
    OPT_STRING("--write-trace", "FILE", write_trace, "write the workload as a shoal job CSV and continue", .expect = "a file"),
    OPT_CALL("--report-jobs", "K0:K1", report[0], long, parse_report,
             "job statistics over jobs with arrival rank in [K0, K1) (warm-up/drain window)", .def = "all",
             .expect = "K0:K1"),
    OPT_GROUP("cluster (racks default to min(16, machines); an explicit --racks above --machines is an error):"),
    OPT_STRING("--cluster", "FILE", cluster_file, "INI or JSON cluster file (docs/simulator.md), instead of the flags below",
               .expect = "a file"),
    OPT_INT("--machines", "N", flags.machines, 1, 1000000, "machines"),
    OPT_INT("--gpus-per-machine", "G", flags.per_machine.gpus, 0, SHOAL_MAX_GPUS_PER_MACHINE, "GPUs per machine"),
    OPT_INT("--racks", "R", flags.racks, 1, 1000000, "racks"),
    OPT_DOUBLE("--oversub", "O", net.oversub, 1, 1e6, "rack uplink oversubscription"),
    OPT_DOUBLE("--cpus-per-machine", "C", flags.per_machine.cpus, 1e-3, 1e6, "cores per machine"),
    OPT_DOUBLE("--mem-gb-per-machine", "M", flags.per_machine.mem_gb, 1e-3, 1e9, "memory per machine, GB"),
    OPT_DOUBLE("--nic-gbps", "B", flags.nic_gbps, 1e-6, 1e9, "NIC bandwidth, Gb/s"),
    OPT_DOUBLE("--intra-gbps", "B", net.intra_gbps, 1e-6, 1e9, "GPU-GPU bandwidth inside a machine, Gb/s"),
    OPT_INT("--sockets-per-machine", "S", flags.sockets, 0, 8,
            "CPU sockets per machine, its GPUs split among them in blocks (0: 2 when the GPUs\n"
            "are even, else 1); what interference and the socket-aware placers see"),
    OPT_GROUP("model and engine:"),
    OPT_CHOICE("--speed", "analytic|table", speed, "analytic|table", "speed model"),
    OPT_STRING("--throughputs", "FILE", throughputs, "Gavel throughputs.json for --speed table", .expect = "a file",
               .when = W(M_TABLE)),
    OPT_STRING("--gpu", "TYPE", gpu, "GPU type of the table: v100, p100, k80", .expect = "v100, p100 or k80",
               .when = W(M_TABLE)),
    OPT_FLAG("--raw-spread", raw_spread, "table: keep spread/consolidated ratios > 1 (default: clamp to 1)",
             .when = W(M_TABLE)),
    OPT_STRING("--interference", "MODEL", interference,
               "co-located jobs slow each other: off, shipped (measured on shoal's testbed) or a\n"
               "model file (docs/learned-placement.md)", .def = "off; shipped in the scenario interference",
               .expect = "off, shipped or a file"),
    OPT_DOUBLE("--restart-cost", "S", cfg.restart_cost, 0, SHOAL__SIM_RESTART_COST_MAX,
               "seconds lost on resume, resize, migration"),
    OPT_DOUBLE("--start-cost", "S", cfg.start_cost, 0, 1e9, "seconds lost on the first start"),
    OPT_DOUBLE("--checkpoint", "S", cfg.checkpoint_s, 0, 1e12,
               "preempted jobs lose work since the last multiple of S s of run time (0: none)"),
    OPT_DOUBLE("--horizon", "S", cfg.horizon_s, 0, 1e15, "stop after S simulated seconds (unfinished jobs are counted)",
               .def = "none"),
    OPT_FLAG("--check", cfg.check, "verify invariants at every step (also SHOAL_SIM_CHECK=1)"),
    OPT_GROUP("output:"),
    OPT_STRING("--policy", "LIST", policies,
               "comma list; parameters as name:key=value:key=value (at most 127 characters per policy)",
               .def = "all", .expect = "policies separated by commas"),
    OPT_STRING("--out", "DIR", out, "per-job CSV, timeline CSV, summary.json, jct_cdf.svg, queue_cdf.svg,\n"
               "ftf_cdf.svg, utilization.svg", .expect = "a directory"),
    OPT_FLAG("--no-progress", no_progress, "no progress bar (it is drawn only on a terminal anyway)"),
    OPT_FLAG("--csv", csv, "one CSV row per policy (summary.json's names) instead of the table"),
    OPT_FLAG("--no-header", no_header, "CSV without its header line"),
    OPT_STRING("--tag", "TEXT", tag, "first CSV column (sweep label)"),
    OPT_FLAG("--lower-bound", lower_bound,
             "offline lower bound on total flow time (slots of --lb-slot; LP limited to --lb-time;\n"
             "LB_solo/LB_srpt above 3000 jobs) and every policy's flow in the same slots (policy none:\n"
             "the bound alone)"),
    OPT_DOUBLE("--lb-slot", "S", lb_slot, 1, 1e7, "the lower bound's slot, seconds"),
    OPT_DOUBLE("--lb-time", "S", lb_time, 0.1, 1e5, "the lower bound's LP time limit, seconds"),
    OPT_END,
};

static void sim_more_help(FILE *f) {
  fprintf(f, "\nscenarios (contended; later flags override their settings):\n");
  for (int i = 0; i < NSCEN; i++) fprintf(f, "  %-12s %s\n", scen[i].name, scen[i].desc);
  fprintf(f, "\npolicies:\n");
  for (int i = 0; shoal__policy_at(i); i++)
    fprintf(f, "  %-9s %s\n            params: %s\n", shoal__policy_at(i)->name, shoal__policy_at(i)->summary,
            shoal__policy_at(i)->params);
}

/* 1 when the scenario's value of OPT stands; 0 when the command line gave OPT,
 * which is then named on the scenario line ("replaced by the command line"). */
static int scenario_keeps(sim_cli_t *c, const shoal_opts_res_t *r, const char *opt) {
  if (!shoal_opts_given(r, opt)) return 1;
  size_t l = strlen(c->sc_overridden);
  snprintf(c->sc_overridden + l, sizeof c->sc_overridden - l, "%s%s", l ? " " : "", opt);
  return 0;
}

/* The scenario's settings, for what the command line did not set; the trace it names. 0, or 2 after an error. */
static int apply_scenario(sim_cli_t *c, const shoal_opts_res_t *r) {
  const char *name = c->scenario;
  int any = shoal_opts_given(r, "--trace") || shoal_opts_given(r, "--synthetic") || shoal_opts_given(r, "--cluster") ||
            shoal_opts_given(r, "--machines");
  if (!name && !any) name = "synthetic";
  for (int i = 0; name && i < NSCEN; i++)
    if (!strcmp(scen[i].name, name)) c->sc = &scen[i];
  if (name && !c->sc) {
    fprintf(stderr, "shoal sim: --scenario '%s': unknown (", name);
    for (int i = 0; i < NSCEN; i++) fprintf(stderr, "%s%s", i ? ", " : "", scen[i].name);
    fprintf(stderr, ")\n");
    return 2;
  }
  const scenario_t *sc = c->sc;
  if (!sc) return 0;
#define UNLESS(opt) if (scenario_keeps(c, r, opt))
  int own_trace = scenario_keeps(c, r, "--trace");
  if (sc->philly) {
    if (own_trace) {
      static char found[1100];
      char tried[2400];
      if (!(c->scen_trace = philly_csv(found, sizeof found, tried, sizeof tried))) {
        fprintf(stderr, "shoal sim: --scenario %s needs the Philly trace: not at %s; give it with --trace FILE\n",
                sc->name, tried);
        return 2;
      }
    }
    UNLESS("--window") c->wo.window_start_s = sc->win_a, c->wo.window_end_s = sc->win_b;
    UNLESS("--sample") c->wo.sample = sc->jobs;
    UNLESS("--pollux-filter") c->wo.pollux_filter = sc->pollux;
  } else {
    UNLESS("--synthetic") c->wo.synth_jobs = sc->jobs;
    UNLESS("--load") c->wo.load = sc->load;
    UNLESS("--arrivals") c->wo.poisson = sc->poisson;
  }
  UNLESS("--machines") c->flags.machines = sc->machines;
  UNLESS("--gpus-per-machine") c->flags.per_machine.gpus = sc->gpus;
  UNLESS("--racks") c->flags.racks = sc->racks ? sc->racks : sc->machines >= 16 ? sc->machines / 16 : 1;
  if (sc->oversub > 0) UNLESS("--oversub") c->net.oversub = sc->oversub;
  if (sc->interference) UNLESS("--interference") c->interference = "shipped";
  UNLESS("--report-jobs") c->report[0] = sc->k0, c->report[1] = sc->k1;
  UNLESS("--load-scale") c->load_scale = sc->load_scale;
#undef UNLESS
  return 0;
}

/* The scenario, then the workload: a trace (given or the scenario's) or synthetic jobs, not both. */
static int sim_resolve(void *cli, const shoal_opts_res_t *r) {
  sim_cli_t *c = cli;
  int rc = apply_scenario(c, r);
  if (rc) return rc;
  int synth = shoal_opts_given(r, "--synthetic") > 0;
  if (!c->trace && !synth) c->trace = c->scen_trace;
  if (c->trace && synth) {
    fprintf(stderr, "shoal sim: give --trace or --synthetic, not both\n");
    return 2;
  }
  static const char *const cluster_flags[] = {"--machines", "--gpus-per-machine", "--racks", "--cpus-per-machine",
                                              "--mem-gb-per-machine", "--nic-gbps", "--oversub", "--intra-gbps",
                                              "--sockets-per-machine"};
  int flags = 0;
  for (size_t k = 0; k < sizeof cluster_flags / sizeof *cluster_flags; k++) flags |= shoal_opts_given(r, cluster_flags[k]);
  if (c->cluster_file && flags) {
    fprintf(stderr, "shoal sim: give --cluster FILE or cluster flags, not both\n");
    return 2;
  }
  if (!c->cluster_file && c->flags.racks > c->flags.machines) {
    if (shoal_opts_given(r, "--racks")) {
      fprintf(stderr, "shoal sim: --racks=%d: more than the %d machines (--machines)\n", c->flags.racks, c->flags.machines);
      return 2;
    }
    c->flags.racks = c->flags.machines; /* default 16 racks: at most one per machine */
  }
  return 0;
}

static const shoal_opts_spec_t sim_spec = {
    .name = "shoal sim",
    .usage = "usage: shoal sim [--scenario NAME | --trace FILE | --synthetic N [--load L]] [--cluster FILE | cluster flags]\n"
             "                 [--policy P1,P2,...] [--out DIR] [--seed S] [options]\n"
             "       shoal sim loaning [options]   (training beside inference: shoal sim loaning --help)\n"
             "Run scheduling policies over a trace or a synthetic workload on a simulated cluster and compare\n"
             "them (docs/simulator.md).\n",
    .opts = sim_opts,
    .modes = sim_modes,
    .resolve = sim_resolve,
    .more_help = sim_more_help,
};

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
  if (cfg->interference) { /* only when on: the summaries of runs without it stay as they were */
    fprintf(f, ",\n  \"interference\": ");
    json_str(f, shoal__interference_origin(cfg->interference));
  }
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

/* One run of shoal sim: the inputs made from the command line, the policies and their results. */
typedef struct sim {
  sim_cli_t *c;
  shoal_cluster_spec_t cs;
  shoal_cluster_t *cl;
  shoal_speed_t *speed;
  shoal_workload_t w;
  run_t *runs;
  int nruns;
  long k0, k1;    /* the measured window; k1 < 0: all */
  char cdesc[256];
} sim_t;

/* The cluster, the speed model and the workload (also written out with --write-trace); 0 or a status. */
static int load_inputs(sim_t *S) {
  sim_cli_t *c = S->c;
  int rc;
  if (c->cluster_file) {
    if ((rc = shoal__cluster_spec_load(c->cluster_file, &S->cs))) return rc;
  } else {
    S->cs.group[0] = c->flags;
    S->cs.net = c->net;
    if ((rc = shoal__cluster_spec_validate(&S->cs))) return rc;
  }
  c->cfg.seed = c->wo.seed;
  if ((rc = shoal__cluster_create(&S->cs, &S->cl))) return rc;
  if (c->interference && strcmp(c->interference, "off")) {
    rc = !strcmp(c->interference, "shipped") ? shoal__interference_shipped(&c->im)
                                             : shoal__interference_load(c->interference, &c->im);
    if (rc) {
      char msg[1200];
      snprintf(msg, sizeof msg, "%s", shoal_last_error());
      return shoal__seterr(rc, "--interference: %s", msg);
    }
    c->cfg.interference = c->im;
  }
  if (!strcmp(c->speed, "table")) rc = shoal__speed_table_create(c->throughputs, c->gpu, !c->raw_spread, &S->speed);
  else rc = shoal__speed_analytic_create(&S->speed);
  if (rc) return rc;
  c->wo.cluster_gpus = S->cl->gpus_total;
  if (c->wo.max_gpus == 0) c->wo.max_gpus = S->cl->gpus_total; /* drop (and count) jobs larger than the cluster */
  if (c->trace) rc = shoal__trace_read(c->trace, &c->wo, S->speed, &S->w);
  else rc = shoal__synth_generate(&c->wo, &S->w);
  if (rc) return rc;
  shoal__workload_scale_arrivals(&S->w, c->load_scale);
  if ((rc = shoal__workload_assign_models(&S->w, S->speed, S->cl, &c->wo))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", shoal_last_error());
    return shoal__seterr(rc, "%s: %s", c->trace ? c->trace : "synthetic", msg);
  }
  if (c->write_trace && (rc = shoal__trace_write_shoal(c->write_trace, &S->w, S->speed))) return rc;
  if (c->out && (rc = mkdir_p(c->out))) return rc;
  return 0;
}

/* The runs of --policy (default: every policy), each checked against its parameters before anything runs. */
static int make_runs(sim_t *S) {
  const char *policies = S->c->policies;
  char plist[2048];
  int rc;
  if (!policies) {
    plist[0] = 0;
    for (int i = 0; shoal__policy_at(i); i++) {
      if (i) strncat(plist, ",", sizeof plist - strlen(plist) - 1);
      strncat(plist, shoal__policy_at(i)->name, sizeof plist - strlen(plist) - 1);
    }
  } else {
    if (strlen(policies) >= sizeof plist)
      return shoal__seterr(SHOAL_ERR_CONFIG, "--policy: %zu characters, at most %zu", strlen(policies), sizeof plist - 1);
    snprintf(plist, sizeof plist, "%s", policies);
    /* every comma-separated item names a policy: '', ',' or 'fifo,,srtf' ran nothing or skipped one silently */
    if (shoal__list_has_empty(plist, ','))
      return shoal__seterr(SHOAL_ERR_CONFIG, "--policy '%s': an empty policy name (a comma-separated list of "
                           "policies, see shoal sim --help)", policies);
  }
  int maxruns = 1;
  for (const char *p = plist; *p; p++) maxruns += *p == ',';
  if (!(S->runs = calloc((size_t)maxruns, sizeof *S->runs))) return shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
  char *save = NULL;
  for (char *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    run_t *r = &S->runs[S->nruns];
    if (strlen(tok) >= sizeof r->name)
      return shoal__seterr(SHOAL_ERR_CONFIG, "--policy: '%.40s...' is %zu characters long (at most %zu per policy)", tok,
                           strlen(tok), sizeof r->name - 1);
    snprintf(r->name, sizeof r->name, "%s", tok);
    char *colon = strchr(tok, ':');
    if (colon) {
      *colon = 0;
      snprintf(r->params, sizeof r->params, "%s", colon + 1);
    }
    if (!strcmp(tok, "none")) continue; /* --lower-bound alone */
    r->ops = shoal__policy_find(tok);
    if (!r->ops) return shoal__seterr(SHOAL_ERR_CONFIG, "--policy: unknown policy '%s' (see shoal sim --help)", tok);
    /* parameters are checked before anything runs */
    shoal_sched_t probe;
    void *pst = NULL;
    if ((rc = shoal__sched_init(&probe, S->cl, S->speed, 16))) return rc;
    probe.nvcs = S->w.nvcs;
    probe.interference = S->c->im;
    rc = r->ops->create(&probe, r->params[0] ? r->params : NULL, &pst);
    if (!rc) r->ops->destroy(pst);
    shoal__sched_fini(&probe);
    if (rc) return rc;
    S->nruns++;
  }
  return 0;
}

/* The measured window said against the workload, then the table's or the CSV's header. */
static void print_head(const sim_t *S) {
  const sim_cli_t *c = S->c;
  long k0 = S->k0, k1 = S->k1;
  int njobs = S->w.njobs;
  if (k1 > njobs) {
    if (k0 >= njobs)
      fprintf(stderr, "shoal sim: warning: --report-jobs %ld:%ld: the workload has %d jobs, the window is empty (job "
                      "statistics are all 0)\n", k0, k1, njobs);
    else
      fprintf(stderr, "shoal sim: warning: --report-jobs %ld:%ld: the workload has %d jobs, the window is jobs %ld..%d\n", k0,
              k1, njobs, k0, njobs - 1);
  }
  if (c->csv) {
    if (!c->no_header)
      printf("tag,policy,jobs,unfinished,jct_avg_s,jct_p50_s,jct_p95_s,jct_p99_s,makespan_s,queue_avg_s,waited,gpu_util,"
             "preemptions,ftf_max,ftf_avg,decisions,decide_ms_avg,decide_ms_max,events_per_s,decisions_per_s,wall_s,"
             "peak_rss_mb,flow_slots,lb_slots,ratio_lb,policy_stats\n");
    return;
  }
  printf("workload: %s\ncluster:  %s\nspeed:    %s model (%d job types), restart cost %g s\n", S->w.source, S->cdesc,
         S->speed->name, S->speed->nmodels, c->cfg.restart_cost);
  if (c->sc)
    printf("scenario: %s (%s)%s%s\n", c->sc->name, c->sc->desc, *c->sc_overridden ? "; replaced by the command line: " : "",
           c->sc_overridden);
  if (c->im)
    printf("interference: %s (%s)\n", shoal__interference_origin(c->im), shoal__interference_source(c->im));
  if (k1 >= 0) printf("window:   job statistics over jobs %ld..%ld (arrival rank) of %d\n", k0, k1 - 1, njobs);
  printf("\n");
  if (S->nruns)
    printf("%-22s %7s %10s %10s %10s %10s %11s %10s %6s %8s %7s %7s %9s %8s %11s\n", "policy", "jobs", "avgJCT(s)", "p50(s)",
           "p95(s)", "p99(s)", "makespan(s)", "queue(s)", "util", "preempt", "FTFmax", "FTFavg", "decide_ms", "wall(s)",
           "events/s");
}

/* The sorted JCTs, queueing delays and finish-time fairness of the window's finished jobs, the jobs at
 * stake, the flow in slots (--lower-bound); 0 or a status. */
static int run_stats(sim_t *S, run_t *r) {
  const shoal_workload_t *w = &S->w;
  long k0 = S->k0, kend = S->k1 < 0 ? w->njobs : S->k1;
  r->jct = malloc((size_t)(w->njobs ? w->njobs : 1) * sizeof *r->jct);
  r->queue = malloc((size_t)(w->njobs ? w->njobs : 1) * sizeof *r->queue);
  r->ftf = malloc((size_t)(w->njobs ? w->njobs : 1) * sizeof *r->ftf);
  if (!r->jct || !r->queue || !r->ftf) return shoal__seterr(SHOAL_ERR_NOMEM, "out of memory");
  long nq = 0;
  for (long k = k0; k < kend && k < w->njobs; k++)
    if (w->jobs[k].state == SHOAL_JOB_DONE) {
      r->jct[r->njct++] = w->jobs[k].finish - w->jobs[k].arrival;
      r->queue[nq] = w->jobs[k].first_start - w->jobs[k].arrival;
      if (r->queue[nq++] > 1e-6) r->waited++;
      if (w->jobs[k].iso_time > 0) r->ftf[r->nftf++] = (w->jobs[k].finish - w->jobs[k].arrival) / w->jobs[k].iso_time;
    }
  for (long k = 0; k < w->njobs; k++) {
    const shoal_job_t *j = &w->jobs[k];
    r->at_stake += j->state != SHOAL_JOB_DONE || j->first_start < 0 || j->first_start - j->arrival > 1e-6 ||
                   j->n_preempt > 0 || j->n_realloc > 0;
  }
  qsort(r->jct, (size_t)r->njct, sizeof *r->jct, cmp_d);
  qsort(r->queue, (size_t)nq, sizeof *r->queue, cmp_d);
  qsort(r->ftf, (size_t)r->nftf, sizeof *r->ftf, cmp_d);
  /* the bound covers every job: a run that left jobs unfinished (a --horizon cut) has no comparable flow */
  double slot = S->c->lb_slot;
  if (S->c->lower_bound && r->m.unfinished) r->flow_slots = NAN;
  else if (S->c->lower_bound)
    for (long k = 0; k < w->njobs; k++)
      r->flow_slots += floor(w->jobs[k].finish / slot + 1e-9) - floor(w->jobs[k].arrival / slot + 1e-9) + 1;
  return 0;
}

/* One policy on the engine, its table row and its files; 0 or a status. */
static int run_policy(sim_t *S, run_t *r) {
  sim_cli_t *c = S->c;
  shoal_progress_t pb;
  shoal__progress_init(&pb, r->name, !c->no_progress);
  c->cfg.progress = shoal__progress_cb;
  c->cfg.progress_arg = &pb;
  int rc = shoal__sim_run(&S->w, &S->cs, S->speed, r->ops, r->params[0] ? r->params : NULL, &c->cfg, &r->r);
  shoal__progress_done(&pb);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", shoal_last_error());
    return shoal__seterr(rc, "policy %s: %s", r->name, msg);
  }
  r->rss_mb = peak_rss_mb();
  if ((rc = shoal__metrics_compute_window(&S->w, &r->r, S->k0, S->k1 < 0 ? S->w.njobs : S->k1, &r->m))) return rc;
  if ((rc = run_stats(S, r))) return rc;
  const shoal_metrics_t *m = &r->m;
  double dms = r->r.decisions ? 1e3 * r->r.decide_s / r->r.decisions : 0;
  if (!c->csv) {
    printf("%-22s %7ld %10.1f %10.1f %10.1f %10.1f %11.1f %10.1f %6.3f %8ld %7.2f %7.2f %9.4f %8.3f %11.0f\n", r->name,
           m->jobs, m->jct_avg, m->jct_p50, m->jct_p95, m->jct_p99, m->makespan, m->queue_avg, m->util, m->preemptions,
           m->ftf_max, m->ftf_avg, dms, r->r.wall_s, r->r.wall_s > 0 ? r->r.events / r->r.wall_s : 0.0);
    if (m->unfinished) printf("%-22s   (%ld jobs unfinished, excluded from the JCT columns)\n", "", m->unfinished);
    if (r->r.policy_stats[0]) printf("%-22s   %s\n", "", r->r.policy_stats);
  }
  fflush(stdout);
  if (c->out) {
    char path[1200], safe[128];
    snprintf(safe, sizeof safe, "%s", r->name);
    for (char *p = safe; *p; p++)
      if (*p == ':' || *p == '/' || *p == '=') *p = '_';
    snprintf(path, sizeof path, "%s/jobs-%s.csv", c->out, safe);
    if ((rc = shoal__report_jobs_csv(path, &S->w))) return rc;
    snprintf(path, sizeof path, "%s/timeline-%s.csv", c->out, safe);
    if ((rc = shoal__report_timeline_csv(path, &r->r))) return rc;
  }
  return 0;
}

/* --lower-bound: the bound's horizon comes from the latest finish of the runs; without a run that finished
 * every job (--policy none, or a --horizon cut), FIFO is run to completion for it. 0 or a status. */
static int lower_bound(sim_t *S, double *lb, double *lbs) {
  double last = 0;
  int whole = S->nruns > 0, rc;
  for (int i = 0; i < S->nruns; i++) {
    last = fmax(last, S->runs[i].r.t_last);
    if (S->runs[i].r.unfinished) whole = 0;
  }
  if (!whole) {
    shoal_sim_config_t fc = S->c->cfg;
    fc.horizon_s = 0;
    fc.progress = NULL;
    fc.check = 0;
    shoal_sim_result_t fr;
    memset(&fr, 0, sizeof fr);
    rc = shoal__sim_run(&S->w, &S->cs, S->speed, shoal__policy_find("fifo"), NULL, &fc, &fr);
    last = fmax(last, fr.t_last);
    shoal__sim_result_free(&fr);
    if (rc) return rc;
  }
  return workload_lower_bound(&S->w, S->cl, S->speed, last, S->c->lb_slot, S->c->lb_time, S->c->csv, lb, lbs);
}

/* The CSV rows, or the lower bound's lines under the table; the warning of a run where policies cannot differ. */
static void print_tail(const sim_t *S, double lb, double lbs) {
  const sim_cli_t *c = S->c;
  if (c->csv)
    for (int i = 0; i < S->nruns; i++) {
      const run_t *r = &S->runs[i];
      const shoal_metrics_t *m = &r->m;
      printf("%s,%s,%ld,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%ld,%.4f,%ld,%.4f,%.4f,%llu,%.5f,%.3f,%.0f,%.0f,%.3f,%.1f,%.0f,%.2f,%.4f,%s\n",
             c->tag, r->name, m->jobs, m->unfinished, m->jct_avg, m->jct_p50, m->jct_p95, m->jct_p99, m->makespan, m->queue_avg,
             r->waited, m->util, m->preemptions, m->ftf_max, m->ftf_avg, (unsigned long long)r->r.decisions,
             r->r.decisions ? 1e3 * r->r.decide_s / r->r.decisions : 0, 1e3 * r->r.decide_max_s,
             r->r.wall_s > 0 ? r->r.events / r->r.wall_s : 0.0, r->r.wall_s > 0 ? r->r.decisions / r->r.wall_s : 0.0,
             r->r.wall_s, r->rss_mb, c->lower_bound ? r->flow_slots : NAN, lb, c->lower_bound ? r->flow_slots / lb : NAN,
             r->r.policy_stats);
    }
  if (c->csv && c->lower_bound && S->nruns == 0) /* the bound alone (lp-bound): a row of its own; else in every row */
    printf("%s,lower-bound,%ld,0,nan,nan,nan,nan,nan,nan,0,nan,0,nan,nan,0,nan,nan,nan,nan,nan,nan,nan,%.3f,nan,"
           "slot_s=%g lb_solo=%.0f\n", c->tag, (long)S->w.njobs, lb, c->lb_slot, lbs);
  if (!c->csv && c->lower_bound) {
    printf("\nlower bound on total flow time: %.1f slots of %g s (LB_solo %.0f)%s\n", lb, c->lb_slot, lbs,
           S->nruns ? "; policies' flow in the same slots:" : "");
    for (int i = 0; i < S->nruns; i++)
      if (isnan(S->runs[i].flow_slots))
        printf("  %-22s flow n/a: %ld jobs unfinished at the horizon (the bound covers every job)\n", S->runs[i].name,
               S->runs[i].m.unfinished);
      else
        printf("  %-22s flow %10.0f slots  ratio to LB %.3f\n", S->runs[i].name, S->runs[i].flow_slots,
               S->runs[i].flow_slots / lb);
  }
  /* a run where every job started at its arrival, ran to completion and was never preempted or reallocated,
   * under every policy, cannot show policy differences */
  long at_stake = 0;
  for (int i = 0; i < S->nruns; i++) at_stake += S->runs[i].at_stake;
  if (S->nruns && !at_stake)
    fprintf(stderr, "shoal sim: warning: under every policy every job started at its arrival and finished without "
                    "preemption or reallocation: the cluster is not contended and policies cannot differ (try --scenario, "
                    "a smaller cluster or a higher --load / --load-scale)\n");
}

/* Everything after the command line; 0 or a status (its message in shoal_last_error). */
static int sim_run(sim_t *S) {
  sim_cli_t *c = S->c;
  int rc;
  if ((rc = load_inputs(S)) || (rc = make_runs(S))) return rc;
  shoal__cluster_describe(S->cl, S->cdesc, sizeof S->cdesc);
  print_head(S);
  for (int i = 0; i < S->nruns; i++)
    if ((rc = run_policy(S, &S->runs[i]))) return rc;
  double lb = NAN, lbs = NAN;
  if (c->lower_bound && (rc = lower_bound(S, &lb, &lbs))) return rc;
  print_tail(S, lb, lbs);
  if (c->out) {
    if ((rc = write_summary(c->out, S->w.source, S->cdesc, S->speed->name, &c->cfg, c->wo.seed, S->runs, S->nruns,
                            c->lower_bound ? lb : NAN, c->lb_slot, lbs)))
      return rc;
    if ((rc = write_plots(c->out, S->runs, S->nruns, S->cl->gpus_total))) return rc;
    if (!c->csv)
      printf("\nwrote %s/summary.json, jobs-*.csv, timeline-*.csv, jct_cdf.svg, queue_cdf.svg, ftf_cdf.svg, utilization.svg\n",
             c->out);
  }
  if (!c->csv) printf("peak RSS %.1f MB\n", peak_rss_mb());
  return 0;
}

int shoal_cmd_sim_loaning(int argc, char **argv);

int shoal_cmd_sim(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "loaning")) return shoal_cmd_sim_loaning(argc - 1, argv + 1);
  sim_cli_t c = {.speed = "analytic", .throughputs = "../shared/data/gavel/throughputs.json", .gpu = "v100", .tag = "-",
                 .report = {0, -1}, .lb_slot = 3600, .lb_time = 60, .load_scale = 1};
  shoal__workload_opts_default(&c.wo);
  shoal__sim_config_default(&c.cfg);
  sim_t S = {.c = &c};
  shoal__cluster_spec_default(&S.cs);
  c.flags = S.cs.group[0];
  c.net = S.cs.net;
  int st = shoal_opts_parse(&sim_spec, argc, argv, &c, NULL);
  if (st != SHOAL_OPTS_GO) return st;
  S.k0 = c.report[0], S.k1 = c.report[1];
  int rc = sim_run(&S);
  for (int i = 0; i < S.nruns; i++) {
    free(S.runs[i].jct);
    free(S.runs[i].queue);
    free(S.runs[i].ftf);
    shoal__sim_result_free(&S.runs[i].r);
  }
  free(S.runs);
  shoal__workload_free(&S.w);
  shoal__speed_destroy(S.speed);
  shoal__cluster_destroy(S.cl);
  shoal__interference_free(c.im);
  if (!rc) return 0;
  fprintf(stderr, "shoal sim: %s\n", shoal_last_error());
  return 1;
}
