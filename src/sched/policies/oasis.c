/* Policy "oasis": the primal-dual planner of planners/oasis.c (exponential prices, a per-job DP) with
 * admission by positive payoff: a rejected job is offered again at the next slot, and admitted anyway
 * after `force` rejections; with larr's re-planning on arrivals (replan=1, the default: new jobs through
 * the DP, released ones through the greedy), in the engine's slotted mode (policies/slotted.c);
 * docs/scheduling.md. */
#include <stdio.h>

#include "sched/planners/oasis.h"
#include "sched/policies/slotted.h"

typedef struct {
  shoal__ps_oasis_params_t op;
  shoal__ps_oasis_est_t est; /* price bounds from the jobs seen so far */
  int force_after;           /* admit a job rejected this many times anyway */
  long rejections, forced;
  shoal__ps_replan_params_t rp; /* replan=1: larr's re-planning, new jobs through oasis_plan (the DP) */
  shoal__ps_larr_stats_t st;
} oasis_t;

static const char *const keys[] = {"slot", "mult", "force", "units", "replan", "replank", "estimate", "pull", "pullk", "nogap", "backfill", "restart", "hold", "fit", "age", NULL};

static int oasis_configure(void *own, const shoal_sched_t *s, const char *params, int hmax, int *replan) {
  oasis_t *o = own;
  shoal__ps_oasis_defaults(&o->op);
  shoal__ps_replan_defaults(&o->rp);
  long force = 20, units = 64, rp = 1, rk = o->rp.replan_k;
  int rc;
  if ((rc = shoal__param_double("oasis", params, "mult", 1, 1e-6, 1e6, &o->op.mult)) ||
      (rc = shoal__param_long("oasis", params, "force", force, 1, 1000000, &force)) ||
      (rc = shoal__param_long("oasis", params, "units", units, 1, 4096, &units)) ||
      (rc = shoal__param_long("oasis", params, "replan", rp, 0, 1, &rp)) ||
      (rc = shoal__param_long("oasis", params, "replank", rk, 0, 100000, &rk)))
    return rc;
  o->rp.larr.seed = s->seed;
  o->rp.larr.hmax = hmax;
  o->rp.replan_k = (int)rk;
  o->rp.new_by = SHOAL__PS_NEW_BY_PLAN_NEW; /* new jobs through oasis_plan */
  o->force_after = (int)force;
  o->op.units = (int)units;
  o->op.hmax = hmax;
  o->op.T = 2000;
  shoal__ps_oasis_est_init(&o->est);
  *replan = (int)rp;
  return 0;
}

static int oasis_plan(void *own, const shoal__ps_cluster_t *pc, const shoal__ps_job_t *j, int k, int *declined,
                      shoal__ps_sched_t *out) {
  oasis_t *o = own;
  if (*declined == 0) shoal__ps_oasis_observe(&o->est, pc, j, &o->op); /* first offer: into the estimates */
  double payoff = 1;
  int rc = shoal__ps_oasis(pc, j, k, &o->op, &o->est, &payoff, out);
  if (rc || payoff > 0) return rc;
  o->rejections++;
  if (++*declined < o->force_after) {
    shoal__ps_sched_free(out);
    return SHOAL__SLOT_DECLINED;
  }
  o->forced++;
  return 0;
}

static const shoal__ps_replan_params_t *oasis_replan_params(void *own, shoal__ps_larr_stats_t **st) {
  oasis_t *o = own;
  *st = &o->st;
  return &o->rp;
}

static void oasis_stats(const void *own, char *buf, size_t cap) {
  const oasis_t *o = own;
  snprintf(buf, cap, " rejections=%ld forced=%ld", o->rejections, o->forced);
}

static const shoal__slot_planner_t planner = {"oasis", keys, sizeof(oasis_t), oasis_configure, oasis_plan,
                                              oasis_replan_params, oasis_stats, 0, 2, 1, 0, 0.5};

SHOAL__SLOTTED_POLICY(oasis, planner,
                      "OASiS primal-dual: exponential prices, per-job DP, admission by positive payoff (retry per slot); re-plans on arrivals as larr",
                      "slot=3600: slot length (s); mult=1: multiplier on the price bounds U, L; force=20: admit after this many rejections; units=64: work units of the DP; replan=1 replank=32: re-planning as larr, new jobs through the DP (0: one job at a time, OASiS as specified); estimate=0: as larr; pull=0 pullk=32: 1 offers room freed by early finishes to jobs planned to start later (at most pullk re-planned per decision); nogap=0: 1 plans without pauses (a job waits instead); backfill=2: GPUs no plan holds in the current slot go to planned jobs holding nothing there, shortest remaining first (1: oldest first, 0: off; no planned start moves); restart=1: the restart cost in the planners' objective (a placement change loses it; running jobs keep their placement unless that delays a smaller job; 0: off); hold=0: 1 leaves the current slot's plans to re-planning between boundaries; age=1: a waiting rigid job (min_workers > 1) is no longer released by re-planning once it has waited its remaining standalone time (0: off); fit=0.5: wmax and the per-worker rate fitted to the speed model (the least per-worker efficiency kept; 0: the rates at the requested size)");
