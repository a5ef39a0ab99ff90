/* The slotted mode of the engine: the slot planners (larr, greedy, oasis;
 * planners/larr.c, planners/greedy.c, planners/oasis.c, planners/replan.c) behind the policy
 * interface. Time is cut into slots of `slot` seconds; the policy asks the
 * runner for a timer at every slot boundary while jobs are active. Each
 * arrival is planned from the current slot on and committed into a mirror of
 * the cluster's capacity (the planners' slot view); at every boundary each
 * job gets its planned placement for that slot. A job behind its plan when
 * the plan runs out is planned again with its remaining work; a job that
 * finishes early gives its remaining slots back. With re-planning (larr
 * default, greedy:replan=1) every arrival batch releases the future slots of
 * up to `replank` committed jobs larger than the smallest newcomer and plans
 * them again, smallest first (shoal__ps_replan). Parameters per policy:
 * docs/scheduling.md. */
#ifndef SHOAL_SCHED_POLICIES_SLOTTED_H
#define SHOAL_SCHED_POLICIES_SLOTTED_H

#include "sched/policy.h"
#include "sched/model/slot_plan.h"

typedef enum { SHOAL__PS_LARR, SHOAL__PS_GREEDY, SHOAL__PS_OASIS } shoal__ps_kind_t;

int  shoal__ps_policy_create(shoal__ps_kind_t kind, shoal_sched_t *s, const char *params, void **state);
void shoal__ps_policy_destroy(void *state);
void shoal__ps_policy_arrive(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__ps_policy_finish(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__ps_policy_timer(void *state, shoal_sched_t *s, int64_t tag);
int  shoal__ps_policy_schedule(void *state, shoal_sched_t *s);
void shoal__ps_policy_stats(void *state, char *buf, size_t cap);

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
