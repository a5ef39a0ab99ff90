/* Exact single-job greedy oracle (spec §5): against fixed residual capacity,
 * maximize the work of every slot from s on; the end slot is then minimal.
 * Also used by larr (its fallback and horizon) and as a policy. */
#ifndef SHOAL_SCHED_PS_GREEDY_H
#define SHOAL_SCHED_PS_GREEDY_H

#include "sched/ps_model.h"

/* The most productive configuration of job j in slot t (co-located on the
 * machine fitting most workers, or distributed by the DP over machines),
 * written into out (cleared first). Ties: cheaper under prices (theta, s0). */
int shoal__ps_slot_best(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0, double theta,
                        shoal__ps_slot_t *out);

/* GREEDY(i, s): schedule covering j->work from slot s with the minimal end,
 * the last slot trimmed to the cheapest covering configuration. Slots
 * s .. s+hmax-1 are tried; SHOAL_ERR_INFEASIBLE if they do not suffice. */
int shoal__ps_greedy(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int hmax, double theta,
                     shoal__ps_sched_t *out);

#endif
