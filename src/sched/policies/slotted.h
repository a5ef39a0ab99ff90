/* The slotted mode of the engine: a slot planner behind the policy interface.
 * The policies larr, greedy and oasis (policies/larr.c, greedy.c, oasis.c)
 * are each a slot planner (planners/) plus this mode. Time is cut into slots
 * of `slot` seconds; the policy asks the runner for a timer at every slot
 * boundary while jobs are active. Each arrival is planned from the current
 * slot on and committed into a mirror of the cluster's capacity (the
 * planners' slot view, model/slot_plan.h); at every boundary each job gets
 * its planned placement for that slot. A job behind its plan when the plan
 * runs out is planned again with its remaining work; a job that finishes
 * early gives its remaining slots back. With re-planning (larr default,
 * greedy:replan=1) every arrival batch releases the future slots of up to
 * `replank` committed jobs larger than the smallest newcomer and plans them
 * again, smallest first (shoal__ps_replan). With backfill (default backfill=2) the GPUs no plan holds in
 * the current slot go to planned jobs holding nothing there, for that slot only. Parameters per policy:
 * docs/scheduling.md. */
#ifndef SHOAL_SCHED_POLICIES_SLOTTED_H
#define SHOAL_SCHED_POLICIES_SLOTTED_H

#include "sched/model/slot_plan.h"
#include "sched/planners/replan.h"
#include "sched/policy.h"

/* A planner's answer for a job it does not take now (offered again at the next slot), beside 0 (planned),
 * SHOAL_ERR_INFEASIBLE (nothing fits: deferred) and errors (< 0). */
#define SHOAL__SLOT_DECLINED 1

/* What a slot-planner policy gives the slotted mode. `own` is the policy's state: `size` bytes, zeroed. */
typedef struct shoal__slot_planner {
  const char *name;
  const char *const *keys; /* every parameter key it accepts, slot= and estimate= (the mode's) included */
  size_t size;
  /* Its own parameters (after slot= and estimate=) into own; plans span at most hmax slots; *replan = 1:
   * plan arrivals in re-planning batches (replan_params then says how), 0: one job at a time (plan). */
  int (*configure)(void *own, const shoal_sched_t *s, const char *params, int hmax, int *replan);
  /* Job j alone from slot k against the residual capacity pc: 0 with *out, SHOAL_ERR_INFEASIBLE,
   * SHOAL__SLOT_DECLINED or an error. *declined counts the times this job was declined. */
  int (*plan)(void *own, const shoal__ps_cluster_t *pc, const shoal__ps_job_t *j, int k, int *declined,
              shoal__ps_sched_t *out);
  /* With re-planning: shoal__ps_replan's parameters (their new_by says how new jobs are planned; with
   * SHOAL__PS_NEW_BY_PLAN_NEW by plan above, a decline deferring the job to the next slot) and where its
   * counters go. NULL: never re-plans. */
  const shoal__ps_replan_params_t *(*replan_params)(void *own, shoal__ps_larr_stats_t **st);
  /* Its counters, appended to the mode's (plans, deferrals, re-planning). NULL: none. */
  void (*stats)(const void *own, char *buf, size_t cap);
  int pull;     /* default of the mode's pull= (pull-forward into room freed by early finishes) */
  int backfill; /* default of the mode's backfill= (the current slot's free room to jobs holding nothing) */
  int restart;  /* default of the mode's restart= (restart cost in the planners' objective) */
  int hold;     /* default of the mode's hold= (the current slot's plans kept between boundaries) */
  double fit;   /* default of the mode's fit= (rates fitted to the speed model; 0: off) */
} shoal__slot_planner_t;

/* The policy operations of a slot-planner policy (create names the planner; the rest are shared). */
int  shoal__slotted_create(const shoal__slot_planner_t *pl, shoal_sched_t *s, const char *params, void **state);
void shoal__slotted_destroy(void *state);
void shoal__slotted_arrive(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__slotted_finish(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__slotted_timer(void *state, shoal_sched_t *s, int64_t tag);
int  shoal__slotted_schedule(void *state, shoal_sched_t *s);
void shoal__slotted_stats(void *state, char *buf, size_t cap);

/* Defines the policy `name` (shoal__policy_<name>, listed in registry.c) as the slot planner `planner` in
 * the slotted mode, with its one-line summary and its parameters' help. */
#define SHOAL__SLOTTED_POLICY(name, planner, summary, params)                                                     \
  static int name##_create(shoal_sched_t *s, const char *p, void **state) {                                       \
    return shoal__slotted_create(&(planner), s, p, state);                                                        \
  }                                                                                                               \
  const shoal_policy_ops_t shoal__policy_##name = {#name,                                                         \
                                                   summary,                                                       \
                                                   params,                                                        \
                                                   name##_create,                                                 \
                                                   shoal__slotted_destroy,                                        \
                                                   shoal__slotted_arrive,                                         \
                                                   shoal__slotted_finish,                                         \
                                                   shoal__slotted_timer,                                          \
                                                   shoal__slotted_schedule,                                       \
                                                   shoal__slotted_stats}

/* The planners' view of job j in slot `slot` of `slot_s` seconds, as of
 * s->now: remaining work in steps (est_s > 0: the remaining work of est_s
 * seconds at the requested size instead of the exact one), worker and PS
 * demands by resource, PS:worker ratio, and per-worker rates in steps per
 * slot taken from the speed model (co-located: all on one machine;
 * distributed: split over two machines). Also used for the lower bound. */
void shoal__ps_view(const shoal_sched_t *s, const shoal_job_t *j, double slot_s, int slot, double est_s,
                    shoal__ps_job_t *pj);
/* The planners' cluster: every machine's GPUs, CPUs and memory (no NIC demand). */
int shoal__ps_view_cluster(const shoal_cluster_t *c, shoal__ps_cluster_t *pc);

#endif
