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

/* ---- stepping the learned placer's decisions (training; docs/learned-placement.md) ----
 *
 * An episode is one simulation with the policy `marl` (FIFO queue, one agent
 * per group of racks placing each job worker by worker), in which the caller
 * takes every placement decision: reset() runs the simulation to its first
 * decision, step(action) puts the worker on socket `action` of the
 * observation and runs to the next one. The team reward between two
 * decisions is minus the growth of `area` (the integral of the jobs in the
 * system over time; at the end it is the sum of the jobs' completion times).
 * The simulation runs on a thread of its own; the calls of one environment
 * must come from one thread at a time. */
typedef struct shoal_sim_env shoal_sim_env_t;

typedef struct shoal_sim_obs {
  int agent, agents;            /* the deciding agent (its partition: a group of racks) */
  int nsockets, nservers, nracks; /* nodes of its partition */
  int fsocket, fserver, frack, fjob; /* features per node (docs/learned-placement.md) */
  const float *socket;          /* [nsockets][fsocket] */
  const float *server;          /* [nservers][fserver] */
  const float *rack;            /* [nracks][frack] */
  const float *job;             /* [fjob] */
  const int32_t *socket_server; /* [nsockets]: server of each socket (0..nservers-1) */
  const int32_t *server_rack;   /* [nservers]: rack of each server (0..nracks-1) */
  const uint8_t *mask;          /* [nsockets]: 1 = the worker may go there */
  const float *logits;          /* [nsockets]: the C network's scores with weights= given, else NULL */
  int32_t job_id;
  int worker, workers;          /* worker `worker` (0..) of the job's `workers` */
  double now;                   /* simulated seconds since the first arrival */
  double area;                  /* integral of the jobs in the system over [0, now], job-seconds */
  int jobs_in_system;
} shoal_sim_obs_t;

/* config: space-separated key=value (docs/learned-placement.md lists them):
 * trace, window_start, window_end, sample, load_scale, synthetic, load, machines, gpus, racks, oversub,
 * sockets, interference (off, shipped or a file), speed (analytic, table), throughputs, gpu, agents,
 * weights, fallback, restart_cost, seed. Errors name the key. */
int shoal_sim_env_create(const char *config, shoal_sim_env_t **out);
/* A new episode with the workload's model assignment seeded by seed (0: the config's seed). Returns 1
 * with *obs set when a decision waits, 0 when the episode ended without one, < 0 on error. The
 * observation's arrays stay valid until the next call on env. */
int shoal_sim_env_reset(shoal_sim_env_t *env, uint64_t seed, shoal_sim_obs_t *obs);
/* Decide the pending decision (action: a socket with mask 1); same returns as reset. */
int shoal_sim_env_step(shoal_sim_env_t *env, int action, shoal_sim_obs_t *obs);
/* The finished episode's metrics; area_out (may be NULL): the sum of the jobs' completion times. */
int shoal_sim_env_report(shoal_sim_env_t *env, shoal_sim_report_t *out, double *area_out);
void shoal_sim_env_destroy(shoal_sim_env_t *env);

#ifdef __cplusplus
}
#endif
#endif
