/* The learned multi-agent placer (docs/learned-placement.md): one agent per
 * partition (a contiguous group of racks); a job goes to the partition that
 * holds consolidation's machines for it (else the one with the most free GPUs
 * that can hold it), whose agent places it worker by worker (a socket per
 * worker, infeasible sockets masked) with the network of model/marl_net.h,
 * consolidation's placement being one of its features. The policy `marl` is the FIFO queue with this placer.
 *
 * Training drives the same code: a decider installed on a thread takes every
 * decision of the placers created on that thread afterwards (the simulator's
 * step interface, sim/env.c), with the observation, the C network's logits
 * when weights are loaded, and the team reward's clock. */
#ifndef SHOAL_SCHED_POLICIES_MARL_H
#define SHOAL_SCHED_POLICIES_MARL_H

#include "sched/model/marl_net.h"

typedef struct shoal__marl_step {
  const shoal_marl_obs_t *obs;
  const float *logits;          /* [obs->nsock] with weights loaded, else NULL */
  int agent, agents;
  int32_t job;                  /* job id */
  int worker, workers;          /* this is worker `worker` (0..) of `workers` */
  double now;                   /* seconds since the first arrival */
  double area;                  /* integral of the jobs in the system (arrived, unfinished) over [0, now] */
  int jobs_in_system;
} shoal__marl_step_t;

/* Returns the chosen socket (an index into obs with mask 1), or a negative error code that aborts
 * the run. */
typedef int (*shoal__marl_decide_fn)(void *arg, const shoal__marl_step_t *st);

/* Install (fn NULL: remove) the decider for the placers created on the calling thread from now on. */
void shoal__marl_set_decider(shoal__marl_decide_fn fn, void *arg);

#endif
