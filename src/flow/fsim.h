/* The flow-level simulator (docs/flow.md#the-simulator): training jobs whose iterations are a compute
 * phase then a ring allreduce over their hosts, on the controller's two-tier topology. Rates are fluid:
 * between events they are constant, and every job's ring moves at one rate (a ring is as fast as its
 * slowest hop), shared max-min fairly per flow on every link as TCP shares a link between flows (a phase
 * that just began weighs less than the flows sending before it: cfg tcp_ramp_s). Under a
 * flow policy the simulated agents build their reports from simulated flow segments with the agent's own
 * code (agent_flows.c) and the rates come from the controller's own code (ctl.c, plan.c): the simulator
 * evaluates the decisions the testbed runs, not a copy of them.
 *
 * Jobs either name their hosts (replaying a testbed run) or ask for GPUs and are placed on arrival on free
 * GPUs (2 per host), spread over the racks, first come first served. */
#ifndef SHOAL_FLOW_FSIM_H
#define SHOAL_FLOW_FSIM_H

#include <stdint.h>
#include <stdio.h>

#include "flow/plan.h"
#include "flow/topo.h"

#define SHOAL__FSIM_MAX_JOB_HOSTS 64
#define SHOAL__FSIM_POLICY_TCP (-1) /* no control: TCP's per-flow fair share */

typedef struct shoal__fsim_job {
  double arrival_s;
  int gpus;          /* placed on arrival when nhosts == 0 */
  int nhosts;        /* the ring's hosts in order (given, or chosen at placement) */
  int hosts[SHOAL__FSIM_MAX_JOB_HOSTS];
  int iters;
  double compute_s;  /* per iteration */
  double grad_bytes; /* the gradients reduced each iteration; a ring of h hosts puts 2(h-1)/h of it on each hop */
  /* results */
  double start_s, end_s;  /* placed, finished (0: not) */
  double iter_sum_s;      /* sum of iteration times, for the mean */
  int iters_done;
} shoal__fsim_job_t;

typedef struct shoal__fsim_cfg {
  shoal__ftopo_t topo;
  int policy;               /* SHOAL__FSIM_POLICY_TCP or a SHOAL__FPOL_* */
  shoal__fplan_cfg_t plan;
  double eff;               /* goodput TCP gets from a link, as a fraction of its rate (tbf: measured) */
  double tcp_ramp_s;        /* a phase's first tcp_ramp_s seconds hold tcp_ramp_share of the share of the flows */
  double tcp_ramp_share;    /* sending before it (0 s: equal shares at once) */
  double jitter;            /* lognormal sigma of each compute phase (0: none) */
  int gpus_per_host;        /* for placement (2) */
  uint64_t seed;
  double max_s;             /* stop at this simulated time (0: when every job ends) */
  FILE *trace;              /* optional: a line per event (time, job, what) */
} shoal__fsim_cfg_t;

void shoal__fsim_cfg_default(shoal__fsim_cfg_t *cfg);
/* Run jobs[n] to completion (or max_s). Results are written into the jobs. 0, or a negative status (a job
 * that can never be placed, a host out of the topology, out of memory). */
int shoal__fsim_run(const shoal__fsim_cfg_t *cfg, shoal__fsim_job_t *jobs, int n);

/* A job file: one job per line, "ARRIVAL_S HOSTS|gpus=N ITERS COMPUTE_MS GRAD_BYTES" (HOSTS a comma list of
 * host names of the topology in ring order), # comments. Errors name FILE:LINE. *out is malloc'ed. */
int shoal__fsim_read_jobs(const char *path, const shoal__ftopo_t *topo, shoal__fsim_job_t **out, int *n);

#endif
