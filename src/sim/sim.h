/* The simulator's internal interface: workloads, the event engine, metrics
 * and reports. Design: docs/simulator.md. */
#ifndef SHOAL_SIM_SIM_H
#define SHOAL_SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "sched/model/cluster.h"
#include "sched/model/job.h"
#include "sched/policy.h"
#include "sched/model/speed.h"

/* ---------------- workloads ---------------- */
typedef struct shoal_workload {
  int njobs;
  shoal_job_t *jobs;          /* sorted by arrival (ties: row); jobs[i].id == i */
  int nvcs;
  char (*vc_names)[24];       /* [nvcs] */
  char source[512];           /* how it was made (file, generator and parameters) */
  int dropped_large;          /* jobs larger than the cluster, dropped by the reader */
  int dropped_filter;         /* jobs removed by filters */
} shoal_workload_t;

/* How trace rows become jobs (spec §2): shared by the readers and the generator. */
typedef struct shoal_workload_opts {
  uint64_t seed;
  double ps_fraction;         /* share of jobs made parameter-server jobs (seeded), default 0 */
  double ps_ratio;            /* kappa: PSs = clamp(ceil(kappa*W), 1, W) (default 0.5) */
  int max_gpus;               /* drop jobs needing more (0: no limit); counted in dropped_large */
  int pollux_filter;          /* Philly: keep duration >= 60 s and gpu_time < 1000 GPU-h */
  long sample;                /* keep a seeded sample of this many jobs (0: all) */
  double window_start_s, window_end_s;  /* Philly: keep submissions in [start, end) s after the first (end 0: all) */
  /* synthetic generator */
  long synth_jobs;
  double load;                /* offered load as a fraction of cluster GPUs (default 0.8) */
  int cluster_gpus;           /* for the load knob */
  int poisson;                /* synthetic: Poisson arrivals instead of the trace's bursty H2 gaps */
} shoal_workload_opts_t;

void shoal__workload_opts_default(shoal_workload_opts_t *o);
/* "A:B" -> window_start_s/window_end_s (0 <= A < B); SHOAL_ERR_CONFIG naming `what` otherwise, o untouched. */
int shoal__workload_parse_window(const char *what, const char *v, shoal_workload_opts_t *o);
/* The accepted ranges of the workload's and the engine's numbers (shoal sim's options, shoal_sim_run). */
#define SHOAL__SIM_SYNTH_JOBS_MAX 100000000L
#define SHOAL__SIM_LOAD_MIN 1e-6
#define SHOAL__SIM_LOAD_MAX 100.0
#define SHOAL__SIM_RESTART_COST_MAX 1e9
/* A trace's times (arrival, duration, a job's run time alone): 317 years is beyond any trace, and keeps a
 * run finite. */
#define SHOAL__SIM_MAX_S 1e10
void shoal__workload_free(shoal_workload_t *w);
/* Clear every job's runtime fields (before each policy run). */
void shoal__workload_reset(shoal_workload_t *w);
/* Allocate njobs zeroed jobs (with default demands) */
int shoal__workload_alloc(shoal_workload_t *w, long njobs);
/* Intern a VC name; returns its index. */
int shoal__workload_vc(shoal_workload_t *w, const char *name);
/* Divide every arrival time by x (load scaling of a trace: x = 2 offers
 * twice the load over half the span). */
void shoal__workload_scale_arrivals(shoal_workload_t *w, double x);
/* Sort by (arrival, row), shift time so the first arrival is 0, renumber ids. */
void shoal__workload_finalize(shoal_workload_t *w);
/* Fill model, arch, PS count, work from durations (spec §2): model by
 * hash(seed, row) over the speed model's types that exist for the size. */
int shoal__workload_assign_models(shoal_workload_t *w, const shoal_speed_t *speed, const shoal_cluster_t *c,
                                  const shoal_workload_opts_t *o);

/* Readers of the Philly-derived CSV (timestamp,duration,num_gpus,gpu_time,cluster)
 * and of shoal's own CSV (docs/simulator.md "shoal job CSV"). */
/* Either format, recognized by its header line. speed resolves model names
 * of the shoal format (NULL: names are checked for syntax only). */
int shoal__trace_read(const char *path, const shoal_workload_opts_t *o, const shoal_speed_t *speed, shoal_workload_t *w);
/* Parse from memory (fuzzing, tests); name is used in messages. */
int shoal__trace_parse(const char *name, const char *text, size_t len, const shoal_workload_opts_t *o,
                       const shoal_speed_t *speed, shoal_workload_t *w);
int shoal__trace_write_shoal(const char *path, const shoal_workload_t *w, const shoal_speed_t *speed);
/* Synthetic Philly-like workload (docs/simulator.md "Synthetic generator"). */
int shoal__synth_generate(const shoal_workload_opts_t *o, shoal_workload_t *w);

/* ---------------- engine ---------------- */
typedef struct shoal_timeline_pt {
  double t;
  int busy, running, waiting;
} shoal_timeline_pt_t;

typedef struct shoal_sim_config {
  double restart_cost;        /* s, default 30 */
  double start_cost;          /* s, first start, default 0 */
  double checkpoint_s;        /* 0: no work lost on preemption */
  double horizon_s;           /* stop at this simulated time (0: run to the end) */
  int check;                  /* verify invariants at every step (SHOAL_SIM_CHECK) */
  double sample_s;            /* timeline resolution (s), default 600 */
  uint64_t seed;
  /* the job-interference model applied to running jobs' speeds (docs/learned-placement.md); NULL: off */
  const struct shoal_interference *interference;
  void (*progress)(void *arg, long done, long total);
  void *progress_arg;
} shoal_sim_config_t;

typedef struct shoal_sim_result {
  long njobs, finished, unfinished;
  uint64_t events, decisions;
  double wall_s;
  double t_first, t_last;     /* first arrival, last completion */
  double t_end;               /* end of the accounted interval: t_last, or the
                               * horizon (t_first + horizon_s) when it cut the run;
                               * busy_gpu_s / eff_gpu_s cover [t_first, t_end] */
  double busy_gpu_s, eff_gpu_s;
  int gpus;
  long preemptions, reallocations;
  double restart_gpu_s;
  shoal_timeline_pt_t *timeline;
  int ntimeline;
  long peak_active;
  double decide_s, decide_max_s;  /* wall time inside the policy's schedule() calls: total, largest */
  char policy_stats[256];         /* the policy's own counters (ops->stats), "" if none */
} shoal_sim_result_t;

void shoal__sim_config_default(shoal_sim_config_t *c);
/* Run one policy over the workload (whose runtime fields are reset first). */
int shoal__sim_run(shoal_workload_t *w, const shoal_cluster_spec_t *cs, const shoal_speed_t *speed,
                   const shoal_policy_ops_t *ops, const char *params, const shoal_sim_config_t *cfg,
                   shoal_sim_result_t *res);
void shoal__sim_result_free(shoal_sim_result_t *r);

/* ---------------- metrics and reports ---------------- */
typedef struct shoal_metrics {
  long jobs, unfinished;
  double jct_avg, jct_p50, jct_p95, jct_p99;
  double makespan, queue_avg, util, eff_util;
  long preemptions, reallocations;
  double ftf_max, ftf_avg, ftf_p95, ftf_over1;  /* finish-time fairness rho */
} shoal_metrics_t;

/* NumPy-default quantile (linear) of sorted v[0..n-1] */
double shoal__quantile(const double *sorted, long n, double q);
int shoal__metrics_compute(const shoal_workload_t *w, const shoal_sim_result_t *r, shoal_metrics_t *m);
/* Job statistics over jobs with arrival rank (id) in [k0, k1) only (spec §6
 * measurement window: drop warm-up and drain); utilization stays whole-run. */
int shoal__metrics_compute_window(const shoal_workload_t *w, const shoal_sim_result_t *r, long k0, long k1,
                                  shoal_metrics_t *m);
int shoal__report_jobs_csv(const char *path, const shoal_workload_t *w);
int shoal__report_timeline_csv(const char *path, const shoal_sim_result_t *r);

/* ---------------- SVG ---------------- */
typedef struct shoal_svg_series {
  const char *label;
  const double *x, *y;
  long n;
} shoal_svg_series_t;
/* Line chart; logx for CDFs of heavy tails. */
int shoal__svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                     const shoal_svg_series_t *s, int ns, int logx);

/* ---------------- progress bar ---------------- */
typedef struct shoal_progress {
  int enabled;
  double last_draw;
  char label[32];
} shoal_progress_t;
void shoal__progress_init(shoal_progress_t *p, const char *label, int enabled);
void shoal__progress_cb(void *arg, long done, long total);
void shoal__progress_done(shoal_progress_t *p);

#endif
