/* Policy "greedy": the exact single-job greedy of planners/greedy.c (most work in every slot from the
 * arrival) with larr's re-planning on arrivals (replan=1, the default; replan=0 commits on arrival), in the
 * engine's slotted mode (policies/slotted.c); docs/scheduling.md. */
#include "sched/planners/greedy.h"
#include "sched/policies/slotted.h"

typedef struct {
  shoal__ps_replan_params_t rp; /* rp.larr.theta and hmax: the greedy's own parameters */
  shoal__ps_larr_stats_t st;    /* filled by re-planning, not shown */
} greedy_t;

static const char *const keys[] = {"slot", "theta", "replan", "replank", "estimate", "pull", "pullk", "nogap", "backfill", "restart", "hold", "fit", "age", NULL};

static int greedy_configure(void *own, const shoal_sched_t *s, const char *params, int hmax, int *replan_out) {
  greedy_t *g = own;
  shoal__ps_replan_params_t *rp = &g->rp;
  shoal__ps_replan_defaults(rp);
  long replan = 1, rk = rp->replan_k;
  int rc;
  if ((rc = shoal__param_double("greedy", params, "theta", rp->larr.theta, 1e-6, 1e6, &rp->larr.theta)) ||
      (rc = shoal__param_long("greedy", params, "replan", replan, 0, 1, &replan)) ||
      (rc = shoal__param_long("greedy", params, "replank", rk, 0, 100000, &rk)))
    return rc;
  rp->larr.seed = s->seed;
  rp->larr.hmax = hmax;
  rp->replan_k = (int)rk;
  rp->new_by = SHOAL__PS_NEW_BY_GREEDY; /* new jobs through the greedy too */
  *replan_out = (int)replan;
  return 0;
}

static int greedy_plan(void *own, const shoal__ps_cluster_t *pc, const shoal__ps_job_t *j, int k, int *declined,
                       shoal__ps_sched_t *out) {
  greedy_t *g = own;
  (void)declined;
  return shoal__ps_greedy(pc, j, k, g->rp.larr.hmax, g->rp.larr.theta, out);
}

static const shoal__ps_replan_params_t *greedy_replan_params(void *own, shoal__ps_larr_stats_t **st) {
  greedy_t *g = own;
  *st = &g->st;
  return &g->rp;
}

static const shoal__slot_planner_t planner = {"greedy", keys, sizeof(greedy_t), greedy_configure, greedy_plan,
                                              greedy_replan_params, NULL, 0, 2, 1, 0, 0.5};

SHOAL__SLOTTED_POLICY(greedy, planner,
                      "exact single-job greedy: most work in every slot (locality-aware); re-plans on arrivals as larr",
                      "slot=3600: slot length (s); theta=0.125: price base of the last-slot trim; replan=1 replank=32: re-planning as larr, new jobs through the greedy (0: commit on arrival, the seed's greedy); estimate=0: as larr; pull=0 pullk=32: 1 offers room freed by early finishes to jobs planned to start later (at most pullk re-planned per decision); nogap=0: 1 plans without pauses (a job waits instead); backfill=2: GPUs no plan holds in the current slot go to planned jobs holding nothing there, shortest remaining first (1: oldest first, 0: off; no planned start moves); restart=1: the restart cost in the planners' objective (a placement change loses it; running jobs keep their placement unless that delays a smaller job; 0: off); hold=0: 1 leaves the current slot's plans to re-planning between boundaries; age=1: a waiting rigid job (min_workers > 1) is no longer released by re-planning once it has waited its remaining standalone time (0: off); fit=0.5: wmax and the per-worker rate fitted to the speed model (the least per-worker efficiency kept; 0: the rates at the requested size)");
