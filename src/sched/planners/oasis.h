/* oasis: the primal-dual online algorithm of Bao et al. (INFOCOM'18) on the
 * shared pool (spec §6): exponential resource prices, a per-job dynamic
 * program over (end slot, work units), admission iff the payoff is positive. */
#ifndef SHOAL_SCHED_PLANNERS_OASIS_H
#define SHOAL_SCHED_PLANNERS_OASIS_H

#include "sched/model/slot_plan.h"

typedef struct {
  int T;            /* utility horizon: f_i(delay) = T - delay (slots) */
  int units;        /* most work units in the DP (512) */
  double mult;      /* multiplier on the estimated U, L (1) */
  int hmax;         /* end slots tried */
} shoal__ps_oasis_params_t;

/* Price bounds estimated online from the jobs seen so far (§6.3, §8 #18). */
typedef struct {
  int njobs;
  double U[SHOAL_PS_NRES];  /* max utility per unit (fraction of a machine) of resource r */
  double Lnum;              /* min_i f_i(T/2) / usage_i */
  double Xmin;              /* min_i X_i */
  double capsum;            /* sum over machines and resources of capacity fractions (= H * used resources) */
} shoal__ps_oasis_est_t;

void shoal__ps_oasis_defaults(shoal__ps_oasis_params_t *p);
void shoal__ps_oasis_est_init(shoal__ps_oasis_est_t *e);
/* Fold job j (on cluster c) into the estimates. */
void shoal__ps_oasis_observe(shoal__ps_oasis_est_t *e, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j,
                             const shoal__ps_oasis_params_t *p);

/* BEST_SCHEDULE of job j from slot s (delay counted from j->arrival).
 * *payoff = utility - price of the schedule; *out is the schedule (trimmed
 * with the locality-aware rates). force: return the best schedule even if
 * the payoff is not positive. SHOAL_ERR_INFEASIBLE: nothing fits. */
int shoal__ps_oasis(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, const shoal__ps_oasis_params_t *p,
                    const shoal__ps_oasis_est_t *e, double *payoff, shoal__ps_sched_t *out);

/* The DP's cost function, exposed for tests: cheapest deployment of n
 * workers (+ their PSs) in slot t under the current prices; INFINITY if not
 * placeable. */
double shoal__ps_oasis_deploy_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t,
                                   const shoal__ps_oasis_params_t *p, const shoal__ps_oasis_est_t *e, int n,
                                   shoal__ps_slot_t *out);

#endif
