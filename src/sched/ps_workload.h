/* Parameter-server workloads for the scheduling experiments (spec §7.2):
 * synthetic jobs drawn from OASiS's ranges with the locality model, and the
 * Philly trace mapped to PS jobs. */
#ifndef SHOAL_SCHED_PS_WORKLOAD_H
#define SHOAL_SCHED_PS_WORKLOAD_H

#include <stdint.h>

#include "sched/ps_model.h"

typedef struct {
  int machines;          /* H */
  int gpus;              /* per machine (8) */
  double cpus, mem_gb, nic_gbps;  /* per machine (64, 256, 50) */
  int njobs;
  int window;            /* arrivals spread over slots [0, window) (Poisson) */
  double locality;       /* b_in / b_ex (10) */
  int dur_lo, dur_hi;    /* standalone distributed duration at wmax, slots (2..10) */
  uint64_t seed;
} shoal__ps_workload_params_t;

void shoal__ps_workload_defaults(shoal__ps_workload_params_t *p);
/* The cluster (H identical machines: GPU, CPU, MEM, NIC). */
int shoal__ps_workload_cluster(const shoal__ps_workload_params_t *p, shoal__ps_cluster_t *c);
/* njobs synthetic jobs into *jobs (malloc'ed). */
int shoal__ps_workload_synth(const shoal__ps_workload_params_t *p, shoal__ps_job_t **jobs);
/* njobs jobs sampled from the Philly CSV (timestamp,duration,num_gpus,...):
 * wmax = num_gpus (capped at the machine's GPUs x 2), work from duration at
 * wmax co-located, arrivals compressed into the window in trace order; the
 * other parameters are drawn as in synth. */
int shoal__ps_workload_philly(const shoal__ps_workload_params_t *p, const char *csv, double slot_s,
                              shoal__ps_job_t **jobs);

#endif
