/* Policy "larr": the LP planner of planners/larr.c (per-arrival LP relaxation, randomized rounding, repair)
 * with larr's re-planning of committed jobs on each arrival batch (planners/replan.c), in the engine's
 * slotted mode (policies/slotted.c); docs/scheduling.md. */
#include <stdio.h>

#include "sched/planners/larr.h"
#include "sched/policies/slotted.h"

typedef struct {
  shoal__ps_replan_params_t rp; /* rp.larr: the LP planner's own parameters */
  shoal__ps_larr_stats_t st;
} larr_t;

static const char *const keys[] = {"slot", "theta", "trials", "beta", "sigma", "klp", "lpblocks", "farslots", "farblocks", "replan", "replank", "replanlp", "estimate", "pull", "pullk", "nogap", "backfill", "restart", "hold", "fit", "age", NULL};

static int larr_configure(void *own, const shoal_sched_t *s, const char *params, int hmax, int *replan_out) {
  larr_t *l = own;
  shoal__ps_replan_params_t *rp = &l->rp;
  shoal__ps_replan_defaults(rp);
  long trials = rp->larr.trials, sigma = 0, klp = rp->larr.k_lp, lpb = rp->larr.lp_blocks, replan = 1;
  long rk = rp->replan_k, rlp = 0, fs = rp->larr.far_slots, fb = rp->larr.far_blocks;
  int rc;
  if ((rc = shoal__param_double("larr", params, "theta", rp->larr.theta, 1e-6, 1e6, &rp->larr.theta)) ||
      (rc = shoal__param_long("larr", params, "replan", replan, 0, 1, &replan)) ||
      (rc = shoal__param_long("larr", params, "replank", rk, 0, 100000, &rk)) ||
      (rc = shoal__param_long("larr", params, "trials", trials, 1, 10000, &trials)) ||
      (rc = shoal__param_double("larr", params, "beta", rp->larr.beta, 1e-3, 100, &rp->larr.beta)) ||
      (rc = shoal__param_long("larr", params, "sigma", 0, 0, 1000, &sigma)) ||
      (rc = shoal__param_long("larr", params, "klp", klp, 0, 100000, &klp)) ||
      (rc = shoal__param_long("larr", params, "lpblocks", lpb, 0, 100000, &lpb)) ||
      (rc = shoal__param_long("larr", params, "farslots", fs, 1, 100000, &fs)) ||
      (rc = shoal__param_long("larr", params, "farblocks", fb, 0, 100000, &fb)) ||
      (rc = shoal__param_long("larr", params, "replanlp", 0, 0, 1, &rlp)))
    return rc;
  rp->larr.trials = (int)trials;
  rp->larr.sigma = (int)sigma;
  rp->larr.k_lp = (int)klp;
  rp->larr.lp_blocks = (int)lpb;
  rp->larr.far_slots = (int)fs;
  rp->larr.far_blocks = (int)fb;
  rp->larr.seed = s->seed;
  rp->larr.hmax = hmax;
  rp->replan_k = (int)rk;
  rp->replan_lp = (int)rlp;
  *replan_out = (int)replan;
  return 0;
}

static int larr_plan(void *own, const shoal__ps_cluster_t *pc, const shoal__ps_job_t *j, int k, int *declined,
                     shoal__ps_sched_t *out) {
  larr_t *l = own;
  (void)declined;
  return shoal__ps_larr(pc, j, k, &l->rp.larr, out, &l->st);
}

static const shoal__ps_replan_params_t *larr_replan_params(void *own, shoal__ps_larr_stats_t **st) {
  larr_t *l = own;
  *st = &l->st;
  return &l->rp;
}

static void larr_stats(const void *own, char *buf, size_t cap) {
  const larr_t *l = own;
  snprintf(buf, cap, " lp_solves=%ld lp_fail=%ld lp_cut=%ld rounded_chosen=%ld", l->st.lp_solves, l->st.lp_fail,
           l->st.lp_cut, l->st.chose_rounded);
}

static const shoal__slot_planner_t planner = {"larr", keys, sizeof(larr_t), larr_configure, larr_plan,
                                              larr_replan_params, larr_stats, 0, 2, 1, 0, 0.5};

SHOAL__SLOTTED_POLICY(larr, planner,
                      "larr: per-arrival LP relaxation + randomized rounding, locality-aware workers/PSs per slot; re-plans on arrivals",
                      "slot=3600: slot length (s); theta=0.125 trials=20 beta=1 sigma=0 klp=32: LP rounding; lpblocks=16: the LP plans at most this many blocks of slots, the greedy the rest, 0 = no cap (docs/scheduling.md); farblocks=0 farslots=20: at most farblocks blocks (0: lpblocks) for a job whose greedy plan ends farslots or more slots ahead; replan=1 replank=32 replanlp=0: re-planning on arrivals; estimate=0: >0 plans with remaining work estimated from finished jobs (prior, s); pull=0 pullk=32: 1 offers room freed by early finishes to jobs planned to start later (at most pullk re-planned per decision); nogap=0: 1 plans without pauses (a job waits instead); backfill=2: GPUs no plan holds in the current slot go to planned jobs holding nothing there, shortest remaining first (1: oldest first, 0: off; no planned start moves); restart=1: the restart cost in the planners' objective (a placement change loses it; running jobs keep their placement unless that delays a smaller job; 0: off); hold=0: 1 leaves the current slot's plans to re-planning between boundaries; age=1: a waiting rigid job (min_workers > 1) is no longer released by re-planning once it has waited its remaining standalone time (0: off); fit=0.5: wmax and the per-worker rate fitted to the speed model (the least per-worker efficiency kept; 0: the rates at the requested size)");
