/* shoal's cluster scheduling simulator: public entry point. The full set of
 * options is the `shoal sim` command (docs/simulator.md); this call covers
 * the common case of one policy on a trace or a synthetic workload. */
#ifndef SHOAL_SIM_H
#define SHOAL_SIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shoal_sim_report {
  long jobs;                    /* finished jobs (in the JCT statistics) */
  long unfinished;
  double jct_avg_s, jct_p50_s, jct_p95_s, jct_p99_s;
  double makespan_s, queue_avg_s;
  double gpu_util;              /* allocated GPU-s / (GPUs x span); span = first
                                 * arrival .. last completion (always the whole
                                 * run: no horizon here) */
  long preemptions, reallocations;
  double ftf_max, ftf_avg;      /* finish-time fairness rho = JCT / isolated time */
  double wall_s;                /* engine wall time */
  unsigned long long events;
} shoal_sim_report_t;

typedef struct shoal_sim_options {
  const char *trace;            /* Philly or shoal job CSV; NULL: synthetic */
  long synthetic_jobs;          /* when trace is NULL: 0 (default 1000) or 1..1e8 */
  double load;                  /* synthetic offered load: 0 (default 0.8) or [1e-6, 100] */
  const char *cluster_file;     /* INI/JSON; NULL: 256 machines x 8 GPUs, 16 racks */
  const char *policy;           /* "fifo", "tiresias:starve=1", ... (any length) */
  double restart_cost_s;        /* < 0: default 30; else [0, 1e9] */
  uint64_t seed;                /* 0: 1 */
} shoal_sim_options_t;

/* Run one policy; 0 and *out filled, or a negative shoal_status_t with
 * shoal_last_error() naming the file/line/option at fault (*out untouched).
 * Options out of their ranges (NaN, infinities included) are
 * SHOAL_ERR_INVALID naming the field, checked whether or not they are used;
 * so is a NULL opt, out or opt->policy. */
int shoal_sim_run(const shoal_sim_options_t *opt, shoal_sim_report_t *out);

#ifdef __cplusplus
}
#endif
#endif
