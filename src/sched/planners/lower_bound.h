/* The offline lower bound on total flow time (spec §7.3, docs/scheduling.md):
 * a pure planner on the slot model of model/slot_plan.h, run by `shoal sim
 * --lower-bound` on the planners' view of a workload. */
#ifndef SHOAL_SCHED_PLANNERS_LOWER_BOUND_H
#define SHOAL_SCHED_PLANNERS_LOWER_BOUND_H

#include "sched/model/slot_plan.h"

/* Offline lower bound on total flow time (§7.3): LP with capacity pooled per
 * resource, PS usage kappa*W, all work at rho_in, v[i,t] >= 1 - done/Q, and
 * v = 1 before each job's standalone greedy end (LB_solo and LB_srpt folded in). Over
 * slots 0..T-1. *lb_solo gets LB_solo alone. On LP failure returns the error
 * (callers may fall back to LB_solo). */
int shoal__ps_lower_bound(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                          double *lb, double *lb_solo);
/* LB_srpt (no LP, O(n^2) at worst): resource r pooled over the machines,
 * each job charged its least usage of r, SRPT on one machine of that speed,
 * the best r (docs/scheduling.md). Folded into shoal__ps_lower_bound. */
int shoal__ps_lower_bound_srpt(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, double *lb);
/* LB_solo alone (no LP): sum of standalone greedy flow times. */
int shoal__ps_lower_bound_solo(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double *lb_solo);

#endif
