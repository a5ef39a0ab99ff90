/* Helpers of the simulator tests: tiny workloads with hand-computable
 * timelines and a linear speed model (rate = workers steps/s, placement
 * independent), so a job of `gpus` GPUs and duration d has work gpus*d. */
#ifndef SHOAL_TESTS_SIMTEST_H
#define SHOAL_TESTS_SIMTEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../runner.h"
#include "sim/sim.h"

typedef struct {
  double arrival;
  int gpus;
  double duration;
  int vc;
} tjob_t;

/* linear: rate = W; PS jobs: W * min(1, 2P/W) (PSs limit when fewer than W/2);
 * spread (> 1 machine) multiplies by spread_penalty of the model */
static double linear_rate(const shoal_speed_t *s, const shoal_cluster_t *c, const shoal_job_t *j, const shoal_shape_t *sh) {
  (void)c;
  if (sh->workers <= 0) return 0;
  double r = sh->workers;
  if (j->arch == SHOAL_ARCH_PS) {
    if (sh->ps <= 0) return 0;
    double lim = 2.0 * sh->ps / sh->workers;
    if (lim < 1) r *= lim;
  }
  if (sh->machines > 1) r *= s->models[0].spread_penalty;
  return r;
}

static void linear_destroy(shoal_speed_t *s) {
  free(s->models);
  free(s);
}

static inline shoal_speed_t *linear_speed(double spread_penalty) {
  shoal_speed_t *s = calloc(1, sizeof *s);
  s->models = calloc(1, sizeof *s->models);
  strcpy(s->models[0].name, "linear");
  s->models[0].spread_penalty = spread_penalty;
  s->models[0].max_gpus = 1 << 20;
  s->nmodels = 1;
  s->name = "linear";
  s->rate = linear_rate;
  s->destroy = linear_destroy;
  return s;
}

static inline void tiny_workload(shoal_workload_t *w, const tjob_t *t, int n) {
  CHECK_OK(shoal__workload_alloc(w, n));
  CHECK(shoal__workload_vc(w, "A") == 0);
  CHECK(shoal__workload_vc(w, "B") == 1);
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = &w->jobs[i];
    j->arrival = t[i].arrival;
    j->gpus = t[i].gpus;
    j->min_workers = 1;
    j->max_workers = t[i].gpus;
    j->duration = t[i].duration;
    j->work = t[i].duration * t[i].gpus;
    j->model = 0;
    j->vc = t[i].vc;
    j->row = i + 1;
  }
  shoal__workload_finalize(w);
}

static inline void one_machine(shoal_cluster_spec_t *cs, int machines, int gpus) {
  shoal__cluster_spec_default(cs);
  cs->group[0].machines = machines;
  cs->group[0].racks = 1;
  cs->group[0].per_machine.gpus = gpus;
}

/* Run policy (with params) and return the result; checks invariants. */
static inline void run_policy(shoal_workload_t *w, const shoal_cluster_spec_t *cs, const shoal_speed_t *sp, const char *policy,
                              const char *params, double restart, shoal_sim_result_t *r) {
  shoal_sim_config_t cfg;
  shoal__sim_config_default(&cfg);
  cfg.restart_cost = restart;
  cfg.check = 1;
  const shoal_policy_ops_t *ops = shoal__policy_find(policy);
  CHECK_MSG(ops != NULL, "policy %s not registered", policy);
  CHECK_OK(shoal__sim_run(w, cs, sp, ops, params, &cfg, r));
}

#define CHECK_JCT(w, id, expect) CHECK_NEAR((w)->jobs[id].finish - (w)->jobs[id].arrival, (expect), 1e-6)

#endif
