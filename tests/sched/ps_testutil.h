/* Shared helpers of the PS scheduling tests (tiny random instances). */
#ifndef SHOAL_TESTS_PS_TESTUTIL_H
#define SHOAL_TESTS_PS_TESTUTIL_H

#include <math.h>
#include <stdlib.h>

#include "core/rng.h"
#include "sched/model/slot_plan.h"

/* Machine h's row of a capacity array (H * NRES, the layout shoal__ps_cluster_init reads). */
static inline void ps_set_cap(double *cap, int h, double gpu, double cpu, double mem, double net) {
  double *r = cap + (size_t)h * SHOAL_PS_NRES;
  r[SHOAL_PS_GPU] = gpu;
  r[SHOAL_PS_CPU] = cpu;
  r[SHOAL_PS_MEM] = mem;
  r[SHOAL_PS_NET] = net;
}

/* Tiny cluster: H machines with 4 GPUs, 16 CPUs, 64 GB, 20 Gb/s. */
static inline int ps_tiny_cluster(int H, shoal__ps_cluster_t *c) {
  double cap[8 * SHOAL_PS_NRES];
  for (int h = 0; h < H; h++) ps_set_cap(cap, h, 4, 16, 64, 20);
  return shoal__ps_cluster_init(c, H, cap);
}

/* Tiny job: 1-4 workers, 1-3 slots standalone, arrival in [0, amax]. */
static inline void ps_tiny_job(shoal_rng_t *g, int id, int amax, shoal__ps_job_t *j) {
  *j = (shoal__ps_job_t){0}; /* malleable (wmin 0), no restart cost, holds nothing */
  j->id = id;
  j->arrival = amax ? (int)shoal_rng_below(g, (uint64_t)amax + 1) : 0;
  j->wmax = 1 + (int)shoal_rng_below(g, 4);
  j->dw[SHOAL_PS_GPU] = 1;
  j->dw[SHOAL_PS_CPU] = 1 + (int)shoal_rng_below(g, 6);
  j->dw[SHOAL_PS_MEM] = 4 + (int)shoal_rng_below(g, 20);
  j->dw[SHOAL_PS_NET] = 0.5 + 4 * shoal_rng_uniform(g);
  j->dp[SHOAL_PS_GPU] = 0;
  j->dp[SHOAL_PS_CPU] = 1 + (int)shoal_rng_below(g, 6);
  j->dp[SHOAL_PS_MEM] = 4 + (int)shoal_rng_below(g, 20);
  j->dp[SHOAL_PS_NET] = 4 + 10 * shoal_rng_uniform(g);
  j->kappa = j->dw[SHOAL_PS_NET] / j->dp[SHOAL_PS_NET];
  j->rho_ex = 1 + 2 * shoal_rng_uniform(g);
  j->rho_in = j->rho_ex * (1 + 3 * shoal_rng_uniform(g));
  j->work = (1 + 2 * shoal_rng_uniform(g)) * j->wmax * j->rho_ex;
}

/* Sum of every schedule's usage never exceeds capacity; each is feasible
 * and covering on its own. Returns 0 or the first violation. */
static inline int ps_check_all(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n,
                               const shoal__ps_sched_t *S) {
  shoal__ps_cluster_t cc;
  int rc = shoal__ps_cluster_init(&cc, c->H, c->cap);
  if (rc) return rc;
  for (int i = 0; i < n && !rc; i++) {
    rc = shoal__ps_sched_check(&cc, &jobs[i], &S[i], 1);
    if (!rc) rc = shoal__ps_commit(&cc, &jobs[i], &S[i]);
  }
  shoal__ps_cluster_free(&cc);
  return rc;
}

#endif
