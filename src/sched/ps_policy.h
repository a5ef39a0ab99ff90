/* Adapter: the slot-based PS planners (larr, oasis, greedy) behind the
 * simulator's policy interface (policy.h). Each arrival is planned for the
 * slots from the current one on and committed into a mirror of the cluster's
 * capacity; at every slot boundary (a policy timer) each job gets its
 * planned placement for that slot. A job that is behind its plan when the
 * plan runs out is planned again with its remaining work; a job that finishes
 * early gives its remaining slots back. Parameters: slot=3600 (s), plus the
 * planner's own (docs/scheduling.md). */
#ifndef SHOAL_SCHED_PS_POLICY_H
#define SHOAL_SCHED_PS_POLICY_H

#include "sched/policy.h"
#include "sched/ps_online.h"

int  shoal__ps_policy_create(shoal__ps_pol_t kind, shoal_sched_t *s, const char *params, void **state);
void shoal__ps_policy_destroy(void *state);
void shoal__ps_policy_arrive(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__ps_policy_finish(void *state, shoal_sched_t *s, shoal_job_t *j);
void shoal__ps_policy_timer(void *state, shoal_sched_t *s, int64_t tag);
int  shoal__ps_policy_schedule(void *state, shoal_sched_t *s);

#endif
