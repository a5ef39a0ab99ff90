/* Slot-level online runs of the PS policies on a job list (spec §4.1, §7.2):
 * committed-plan policies (larr, greedy, oasis) plan each job on arrival
 * against the residual capacity; per-slot baselines (fifo, drf) re-decide
 * every slot. Work is credited per slot with the mode of the actual
 * placement; a job's flow time is end - a + 1 slots. */
#ifndef SHOAL_SCHED_PS_ONLINE_H
#define SHOAL_SCHED_PS_ONLINE_H

#include "sched/ps_larr.h"
#include "sched/ps_model.h"
#include "sched/ps_oasis.h"

typedef enum {
  SHOAL_PS_POL_LARR, SHOAL_PS_POL_GREEDY, SHOAL_PS_POL_OASIS, SHOAL_PS_POL_FIFO, SHOAL_PS_POL_DRF, SHOAL_PS_POL__N
} shoal__ps_pol_t;

const char *shoal__ps_pol_name(shoal__ps_pol_t p);
int shoal__ps_pol_parse(const char *name, shoal__ps_pol_t *out);

typedef struct {
  shoal__ps_larr_params_t larr;
  shoal__ps_oasis_params_t oasis;
  int oasis_force_after;  /* admit a job rejected this many times anyway (20) */
  int max_slots;          /* give up past this slot (error) */
} shoal__ps_run_params_t;
void shoal__ps_run_defaults(shoal__ps_run_params_t *p);

typedef struct {
  double total_flow, mean_flow, p95_flow, makespan;
  double decide_ms_mean, decide_ms_max; /* per planned arrival / retry */
  long decisions, deferrals, rejections, forced, coloc_slots, job_slots;
  shoal__ps_larr_stats_t larr;
  int *end;                                /* [n] finish slot per job (caller frees) */
} shoal__ps_run_result_t;

/* Run policy pol on jobs[0..n-1] (any order; processed by arrival, then id)
 * on an initially empty copy of c. If sched != NULL the committed schedules
 * of plan policies are returned (n entries; caller frees). Every committed
 * schedule is checked against the capacity left at its commit. */
int shoal__ps_run(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, shoal__ps_pol_t pol,
                  const shoal__ps_run_params_t *p, shoal__ps_run_result_t *res, shoal__ps_sched_t *sched);

/* Offline lower bound on total flow time (§7.3): LP with capacity pooled per
 * resource, PS usage kappa*W, all work at rho_in, v[i,t] >= 1 - done/Q, and
 * v = 1 before each job's standalone greedy end (LB_solo folded in). Over
 * slots 0..T-1. *lb_solo gets LB_solo alone. On LP failure returns the error
 * (callers may fall back to LB_solo). */
int shoal__ps_lower_bound(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                          double *lb, double *lb_solo);
/* LB_solo alone (no LP): sum of standalone greedy flow times. */
int shoal__ps_lower_bound_solo(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double *lb_solo);

#endif
