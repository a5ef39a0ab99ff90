/* Slot-level online runs of the PS policies on a job list (spec §4.1, §7.2):
 * plan policies (larr, greedy, oasis) plan each job on arrival against the
 * residual capacity (larr by default also re-plans the remaining work of
 * committed jobs on each arrival batch, docs/scheduling.md); per-slot
 * baselines (fifo, drf, optimus, tiresias) re-decide every slot. Work is
 * credited per slot with the mode of the actual placement; a job's flow time
 * is end - a + 1 slots. */
#ifndef SHOAL_SCHED_PS_ONLINE_H
#define SHOAL_SCHED_PS_ONLINE_H

#include "sched/ps_larr.h"
#include "sched/ps_model.h"
#include "sched/ps_oasis.h"

typedef enum {
  SHOAL_PS_POL_LARR, SHOAL_PS_POL_GREEDY, SHOAL_PS_POL_OASIS, SHOAL_PS_POL_FIFO, SHOAL_PS_POL_DRF,
  SHOAL_PS_POL_OPTIMUS, SHOAL_PS_POL_TIRESIAS, SHOAL_PS_POL__N
} shoal__ps_pol_t;

const char *shoal__ps_pol_name(shoal__ps_pol_t p);
int shoal__ps_pol_parse(const char *name, shoal__ps_pol_t *out);

typedef struct {
  shoal__ps_larr_params_t larr;
  shoal__ps_oasis_params_t oasis;
  int oasis_force_after;  /* admit a job rejected this many times anyway (20) */
  int max_slots;          /* give up past this slot (error) */
  /* larr re-planning (docs/scheduling.md "Re-planning"): on each arrival
   * batch release the future allocations of committed jobs whose remaining
   * size is larger than the smallest new job's and re-plan all of them,
   * smallest remaining size first. 0 = commit on arrival, never revise
   * (spec §1; the oracle tests use it). */
  int replan;             /* 1 */
  int replan_k;           /* most committed jobs released per batch, the largest (32) */
  int replan_lp;          /* 1: released jobs re-planned through larr's LP too; 0: the greedy (0) */
  int replan_key;         /* order: 0 remaining standalone time, 1 remaining GPU-slots at the best rate (1) */
  /* tiresias: attained-service thresholds in GPU-slots between its queues */
  int tir_nq;             /* queues (3) */
  double tir_thr[4];      /* (4, 32): the best of 4,32 / 8,64 / 16,128 / 32,256 on Philly (docs/scheduling.md) */
} shoal__ps_run_params_t;
void shoal__ps_run_defaults(shoal__ps_run_params_t *p);

typedef struct {
  double total_flow, mean_flow, p95_flow, makespan;
  double decide_ms_mean, decide_ms_max; /* per planned arrival / retry (re-plan: batch time / new jobs) */
  long decisions, deferrals, rejections, forced, coloc_slots, job_slots;
  long replans, released;                  /* re-plan batches, committed jobs released in them */
  shoal__ps_larr_stats_t larr;
  int *end;                                /* [n] finish slot per job (caller frees) */
} shoal__ps_run_result_t;

/* Run policy pol on jobs[0..n-1] (any order; processed by arrival, then id)
 * on an initially empty copy of c. If sched != NULL every job's schedule is
 * returned (n entries; caller frees): the committed (for larr with re-plan:
 * the final, executed) schedule of plan policies, the per-slot allocations
 * of the baselines. Every committed schedule is checked against the
 * capacity left at its commit. */
int shoal__ps_run(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, shoal__ps_pol_t pol,
                  const shoal__ps_run_params_t *p, shoal__ps_run_result_t *res, shoal__ps_sched_t *sched);

/* A job's size in the re-planning order (key as replan_key) for its work
 * j->work; used by the simulator adapter. */
double shoal__ps_size_key(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int key);

/* One re-planning batch at slot t (the re-plan mode of larr). S[i] holds job
 * i's schedule from its arrival, committed in c; active[0..na-1] are
 * committed jobs (their slots >= t may be released), batch[0..nb-1] are jobs
 * to plan now (new, deferred, or earlier released and deferred; S[i] holds
 * their executed part, committed). Work done before t is never touched: a
 * job's remaining work is Q - work of its slots < t. Jobs that cannot be
 * planned within hmax are written to deferred (*ndef), with S[i] cut at t.
 * rate_best[i] caches the job's best one-slot rate on an empty machine (0 =
 * not yet computed). Returns the number of released jobs in *nrel. */
int shoal__ps_replan(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const int *active,
                     int na, const int *batch, int nb, int t, const shoal__ps_run_params_t *p, double *rate_best,
                     shoal__ps_larr_stats_t *st, int *deferred, int *ndef, int *nrel);

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
