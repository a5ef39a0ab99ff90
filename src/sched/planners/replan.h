/* larr's re-planning (docs/scheduling.md "Re-planning"): a pure planner on
 * the slot model of model/slot_plan.h. It runs inside the event engine only
 * through the slotted policies (policies/slotted.c: larr, greedy behind
 * policy.h); there is no second simulator. */
#ifndef SHOAL_SCHED_PLANNERS_REPLAN_H
#define SHOAL_SCHED_PLANNERS_REPLAN_H

#include "sched/planners/larr.h"
#include "sched/model/slot_plan.h"

/* How a re-planning batch plans its new jobs (released ones: replan_lp). */
typedef enum {
  SHOAL__PS_NEW_BY_LP,      /* larr's LP and rounding */
  SHOAL__PS_NEW_BY_GREEDY,  /* the greedy (the "greedy with re-planning") */
  SHOAL__PS_NEW_BY_PLAN_NEW /* plan_new below (OASiS's DP with its admission) */
} shoal__ps_new_by_t;

typedef struct {
  shoal__ps_larr_params_t larr;
  int replan_k;           /* most committed jobs released per batch, the largest (32) */
  int replan_lp;          /* 1: released jobs re-planned through larr's LP too; 0: the greedy (0) */
  int replan_key;         /* order: 0 remaining standalone time, 1 remaining GPU-slots at the best rate (1) */
  int release_next;       /* 1: committed jobs keep slot t and are released from t + 1 on (0) */
  shoal__ps_new_by_t new_by; /* how new jobs are planned (larr's LP) */
  /* With SHOAL__PS_NEW_BY_PLAN_NEW: 0 with *out, SHOAL_ERR_INFEASIBLE (deferred to the next slot: nothing fits,
   * or the planner does not take the job now) or an error. */
  int (*plan_new)(void *arg, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, shoal__ps_sched_t *out);
  void *plan_new_arg;
} shoal__ps_replan_params_t;
void shoal__ps_replan_defaults(shoal__ps_replan_params_t *p);

/* A job's size in the re-planning order (key as replan_key) for its work
 * j->work. */
double shoal__ps_size_key(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int key);

/* One re-planning batch at slot t. S[i] holds job i's schedule, committed in
 * c; active[0..na-1] are committed jobs (their slots >= t may be released),
 * batch[0..nb-1] are jobs to plan now (new, deferred, or earlier released
 * and deferred; S[i] holds their executed part, committed). Work done before
 * t is never touched: a job's remaining work is Q - work of its slots < t.
 * New jobs (batch) are planned as p->new_by says, released ones by the greedy
 * (replan_lp = 0) or the LP. Jobs that cannot be planned within hmax are
 * written to deferred (*ndef), with S[i] cut at t. rate_best[i] caches the
 * job's best one-slot rate on an empty machine (0 = not yet computed).
 * Returns the number of released jobs in *nrel and, when released is not
 * NULL, their indices in released[0..*nrel) (room for replan_k). */
int shoal__ps_replan(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const int *active,
                     int na, const int *batch, int nb, int t, const shoal__ps_replan_params_t *p, double *rate_best,
                     shoal__ps_larr_stats_t *st, int *deferred, int *ndef, int *nrel, int *released);

#endif
