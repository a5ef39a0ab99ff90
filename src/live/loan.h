/* Loaning on a real cluster manager: the inference side's hosts (VC_infer, a
 * partition of the manager) run one serving replica each as a job of the
 * manager; hosts no replica needs are lent to elastic training jobs (grown
 * onto them in place; several borrowers at once, each host to the job it
 * speeds up most) and reclaimed (the job that loses least shrunk off them at
 * its next iteration boundary, a replica started there) when the forecast or
 * the requests waiting at the router need them. The decisions are sched/serving's,
 * the same code the simulator runs (sim/loaning.c); this file reads the
 * manager's view and turns them into its actions. */
#ifndef SHOAL_LIVE_LOAN_H
#define SHOAL_LIVE_LOAN_H

#include "live/manager.h"
#include "sched/serving/serving.h"

typedef struct shoal_live_loan_config {
  const char *infer_partition; /* VC_infer: the manager's partition whose hosts serve or are lent */
  const char *const *replica_argv; /* the command a replica job runs (shoal serve ...) */
  int replica_argc;
  const char *replica_name;    /* the replica jobs' name and comment ("shoal:serve") */
  const char *router;          /* the router the replicas join (SHOAL_SERVE_ROUTER in their environment); NULL: none */
  double service_s, slo_s, slo_q; /* one request on one replica (until measured: loan_measured); the P99 SLO */
  double hold_s;               /* replicas above the need this long are stopped and their hosts lent */
  int spare;                   /* replicas ready beyond the SLO's need, at most the hosts (not with react_hi) */
  /* react_hi > 0: reactive threshold autoscaling instead (the baseline): the replicas wanted by the utilization of
   * the last step's rate (shoal__reactive_replicas, thresholds react_lo..react_hi); no forecast, no waiting */
  double react_lo, react_hi;
  /* A borrower's resize the manager cannot make in place (caps: SHOAL_LIVE_CAP_GROW for a grow,
   * SHOAL_LIVE_CAP_SHRINK for a shrink) goes to the job's owner: restart(arg, id, p) asks job `id` to checkpoint
   * at its next iteration boundary and starts it on p once its run ended (the controller's own stop and start, so
   * the run's end is a stop it asked for, not a failure, and no work is lost). 0, or an error (nothing done).
   * Also a resize in place the manager refuses for this job (SHOAL_ERR_UNSUPPORTED: Slurm's shrink of a job whose
   * tasks do not leave on request). NULL: the manager's resize is called anyway (Slurm's grows by a restart). */
  int (*restart)(void *arg, long id, const shoal_live_place_t *p);
  void *restart_arg;
} shoal_live_loan_config_t;

typedef struct shoal_live_loan shoal_live_loan_t;

/* fc: the rate forecast (borrowed; observed each step). */
int shoal__live_loan_create(const shoal_live_loan_config_t *cfg, shoal__forecast_t *fc, shoal_live_loan_t **out);
void shoal__live_loan_destroy(shoal_live_loan_t *L);

#define SHOAL_LIVE_LOAN_MAX_BORROWERS 16

/* An elastic training job that may borrow (running, resizable in place). */
typedef struct shoal_live_borrower {
  long id;
  int room;   /* the most GPUs of VC_infer hosts it may hold (0: none) */
} shoal_live_borrower_t;

/* The jobs that borrow from now on (at most SHOAL_LIVE_LOAN_MAX_BORROWERS; more are ignored). speedup(arg, k, g):
 * borrower k's speed on g GPUs over its speed on one (NULL: g itself): a reclaim shrinks the borrower whose
 * speedup drops least, a lent host goes to the one whose speedup rises most (sched/serving's choice). Hosts
 * lent to a job that is no longer a borrower are not reclaimed: they come back when it ends or is restarted. */
void shoal__live_loan_borrowers(shoal_live_loan_t *L, const shoal_live_borrower_t *b, int n,
                                shoal__speedup_fn speedup, void *arg);

/* The replicas' own measured seconds a request (the router's mean of what they report): > 0 replaces the
 * configured service_s in the SLO's replica count from the next step on (the SLO must still exceed it: a
 * replica slower than the SLO wants every host); <= 0: no change. */
void shoal__live_loan_measured(shoal_live_loan_t *L, double service_s);

/* What one step did. */
typedef struct shoal_live_loan_step {
  int want;                    /* replicas wanted: the forecast's and the waiting requests' need plus the spare, at
                                * most the hosts */
  double service_s;            /* the seconds a request the step counted with (measured, else configured) */
  int replicas;                /* replica jobs alive after the step (started ones included) */
  int lent;                    /* VC_infer hosts the borrowers hold after the step */
  int started, reclaimed, stopped, lent_now; /* this step's actions */
  int nb;                      /* the borrowers, in the order given, and per borrower: */
  struct {
    long id;
    int lent, reclaimed, lent_now; /* hosts held after the step, reclaimed from it and lent to it by the step */
  } b[SHOAL_LIVE_LOAN_MAX_BORROWERS];
} shoal_live_loan_step_t;

/* One decision at wall time `now`, seconds after the last: `rate` requests per second arrived since the last
 * step and `waiting` wait at the router. Reclaims at once (a free host first, then lent ones: each borrower
 * that gives hosts back shrinks off them in one resize and a replica starts on each); stops replicas above the
 * need for hold_s; lends free hosts beyond the need to the borrowers (a manager that grows in place,
 * SHOAL_LIVE_CAP_GROW: one host per step; one that grows by a restart, SHOAL_LIVE_CAP_GROW_RESTART (Slurm):
 * every idle host at once, one resize per borrower that gets any). 0 or the manager's error (nothing half-done is left unrecorded: the
 * next step reads the manager again). */
int shoal__live_loan_step(shoal_live_loan_t *L, shoal_live_manager_t *mgr, double now, double rate, double waiting,
                          shoal_live_loan_step_t *out);

#endif
