/* Loaning on a real cluster manager: the inference side's hosts (VC_infer, a
 * partition of the manager) run one serving replica each as a job of the
 * manager; hosts no replica needs are lent to an elastic training job (grown
 * onto them in place) and reclaimed (the job shrunk off them at its next
 * iteration boundary, a replica started there) when the forecast or the
 * requests waiting at the router need them. The decisions are sched/serving's,
 * the same code the simulator runs (sim/loaning.c); this file reads the
 * manager's view and turns them into its actions. */
#ifndef SHOAL_LIVE_LOAN_H
#define SHOAL_LIVE_LOAN_H

#include "live/manager.h"
#include "sched/serving/serving.h"

typedef struct shoal_live_loan_config {
  const char *infer_partition; /* VC_infer: the manager's partition whose hosts serve or are lent */
  long train_id;               /* the elastic training job that borrows (running, resizable in place); 0: none yet */
  int lend_gpus;               /* the most GPUs of VC_infer hosts it may hold (0: no limit) */
  const char *const *replica_argv; /* the command a replica job runs (shoal serve ...) */
  int replica_argc;
  const char *replica_name;    /* the replica jobs' name and comment ("shoal:serve") */
  const char *router;          /* the router the replicas join (SHOAL_SERVE_ROUTER in their environment); NULL: none */
  double service_s, slo_s, slo_q; /* one request on one replica; the P99 SLO */
  double hold_s;               /* replicas above the need this long are stopped and their hosts lent */
} shoal_live_loan_config_t;

typedef struct shoal_live_loan shoal_live_loan_t;

/* fc: the rate forecast (borrowed; observed each step). */
int shoal__live_loan_create(const shoal_live_loan_config_t *cfg, shoal__forecast_t *fc, shoal_live_loan_t **out);
void shoal__live_loan_destroy(shoal_live_loan_t *L);

/* The job that borrows from now on (0: none) and the most VC_infer GPUs it may hold (0: no limit). Hosts lent to
 * a job that is no longer the borrower are not reclaimed: they come back when it ends or is restarted. */
void shoal__live_loan_borrower(shoal_live_loan_t *L, long train_id, int lend_gpus);

/* What one step did. */
typedef struct shoal_live_loan_step {
  int want;                    /* replicas wanted: the forecast's and the waiting requests' need, at most the hosts */
  int replicas;                /* replica jobs alive after the step (started ones included) */
  int lent;                    /* VC_infer hosts the training job holds after the step */
  int started, reclaimed, stopped, lent_now; /* this step's actions */
} shoal_live_loan_step_t;

/* One decision at wall time `now`, seconds after the last: `rate` requests per second arrived since the last
 * step and `waiting` wait at the router. Reclaims at once (a free host first, then a lent one: the training
 * job shrinks off it and a replica starts there); stops replicas above the need for hold_s; lends free hosts
 * beyond the need to the training job (a manager that grows in place, SHOAL_LIVE_CAP_GROW: one host per step; one
 * that grows by a restart, SHOAL_LIVE_CAP_GROW_RESTART (Slurm): every idle host in one resize). 0 or the manager's error (nothing half-done is left unrecorded: the
 * next step reads the manager again). */
int shoal__live_loan_step(shoal_live_loan_t *L, shoal_live_manager_t *mgr, double now, double rate, double waiting,
                          shoal_live_loan_step_t *out);

#endif
