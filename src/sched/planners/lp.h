/* GLPK layer of the PS scheduler: the single-job LP relaxation of larr
 * (spec §4.3-4.4), the exact multi-job MIP of §3.1 for tiny instances (test
 * oracle, glp_intopt) and the helpers they share. Every solve is silent
 * (glp_term_out off) and time-limited; infeasible or failed solves come back
 * as SHOAL_ERR_INFEASIBLE / SHOAL_ERR_SOLVER with a message, never as a
 * schedule. GLPK is not thread-safe: one solve at a time per process. */
#ifndef SHOAL_SCHED_PLANNERS_LP_H
#define SHOAL_SCHED_PLANNERS_LP_H

#include "sched/model/slot_plan.h"

typedef struct shoal__ps_lp shoal__ps_lp_t;

/* LP of job j over slots s..e_max and machines mach[0..nm-1] against the
 * residual capacity of c, objective: priced usage (theta, §4.2). Each solve
 * stops after it_lim simplex iterations (a count, not a time: the result does
 * not depend on how loaded the machine is; a 60 s time limit only guards
 * against a hang). merge: one
 * block of columns per run of slots with identical residuals (exact up to the
 * time tie-break; a horizon E then switches whole blocks, so use it only when
 * solving at E = e_max or at block ends). */
int shoal__ps_lp_build(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_max, const int *mach,
                       int nm, double theta, int it_lim, int merge, shoal__ps_lp_t **out);
/* The same LP cut after its first max_blocks blocks (0: no cut; without
 * merging a block is one slot): it covers slots s..shoal__ps_lp_last(lp) <=
 * e_max. Bounds the LP's size (columns 4 nm + 1 per block), whatever the
 * horizon. */
int shoal__ps_lp_build_capped(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_max,
                              const int *mach, int nm, double theta, int it_lim, int merge, int max_blocks,
                              shoal__ps_lp_t **out);
/* Last slot the LP covers. */
int shoal__ps_lp_last(const shoal__ps_lp_t *lp);
/* Change the work the LP must cover (row C1), e.g. to what a cut LP's
 * slots must do. */
void shoal__ps_lp_set_work(shoal__ps_lp_t *lp, double work);
void shoal__ps_lp_free(shoal__ps_lp_t *lp);
/* Solve with slots after E switched off. 0: optimal; SHOAL_ERR_INFEASIBLE:
 * no fractional schedule ends by E; SHOAL_ERR_SOLVER: GLPK failed or hit a limit. */
int shoal__ps_lp_solve(shoal__ps_lp_t *lp, int E);
/* Smallest E in [e_lo, e_hi] with a feasible LP (binary search, §4.4); the LP
 * is left solved at that E. e_hi must be feasible (an integral schedule). */
int shoal__ps_lp_horizon(shoal__ps_lp_t *lp, int e_lo, int e_hi, int *e_out, int *nsolves);
/* Values of the last solve: var 'x','z','y','q' for machine index k (into
 * mach) and slot t; 'd' ignores k. */
double shoal__ps_lp_val(const shoal__ps_lp_t *lp, char var, int k, int t);
double shoal__ps_lp_obj(const shoal__ps_lp_t *lp);
int shoal__ps_lp_ncols(const shoal__ps_lp_t *lp);
/* m_{h,t} of §4.3: most co-located workers on mach[k] in t. */
int shoal__ps_lp_mcap(const shoal__ps_lp_t *lp, int k, int t);

/* Exact optimum of §3.1 for jobs[0..n-1] on an empty cluster c over slots
 * 0..T-1 (glp_intopt): total flow time sum_i (T_i - a_i + 1) in slots.
 * Schedules (if sched != NULL, n entries) are written on success. */
int shoal__ps_mip_opt(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                      double *total_flow, shoal__ps_sched_t *sched);

/* Shared GLPK setup: silence the terminal once per process. */
void shoal__ps_glpk_quiet(void);

#endif
