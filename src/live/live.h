/* The live controller: shoal's scheduling policies (sched/policy.h, the
 * objects the simulator runs) deciding on a real cluster, through a cluster
 * manager (live/manager.h: Slurm, or the in-memory one). docs/live.md is the
 * operator's reference.
 *
 * Each tick: read the manager's jobs (and, every few seconds, its nodes), keep
 * the journal and the manager's claims consistent with what it shows, tell the
 * policy what happened (finish, arrive, timers) exactly as the simulator's
 * engine does, let it decide once, and turn its allocation changes into the
 * manager's actions (start on nodes, checkpoint request, requeue, hold).
 * Nothing the controller knows lives only in its memory: the manager holds the
 * jobs, their state and their claims; the journal holds what it decided, each
 * record written before the action it announces. */
#ifndef SHOAL_LIVE_LIVE_H
#define SHOAL_LIVE_LIVE_H

#include <signal.h>
#include <stdio.h>

#include "live/manager.h"

/* The exit status of a run that stopped on a checkpoint request after writing its checkpoint ("checkpointed,
 * requeue me"; EX_TEMPFAIL). Any other status is the job's own end: 0 = finished. `shoal train --preemptible`
 * and the controller agree on it. */
#define SHOAL_LIVE_EXIT_REQUEUE 75
#define SHOAL_LIVE_EXIT_REQUEUE_STR "75"

/* Loaning (docs/serving.md): the hosts of another partition (VC_infer) run one serving replica each as a job of
 * the manager; the hosts the forecast and the requests waiting at the router do not need are lent to one running
 * elastic job of the controller's (grown onto them in place), and reclaimed when they are needed. */
typedef struct shoal_live_loan_opts {
  const char *partition;     /* VC_infer; NULL/"": no loaning */
  const char *const *replica_argv; /* the command a replica job runs (shoal serve ...) */
  int replica_argc;
  const char *router;        /* the router the replica jobs join themselves (SHOAL_SERVE_ROUTER); NULL: none */
  const char *forecast;      /* the rate predictor: off, ewma, holt (sched/serving) */
  double alpha, z;           /* its smoothing weight and headroom in standard deviations of its errors */
  double service_s, slo_s, slo_q; /* one request on one replica until the replicas report their own (load's
                                   * service_s); the SLO: quantile slo_q under slo_s */
  int spare;                 /* replicas kept ready beyond the need (a burst is served while a reclaim runs) */
  double hold_s;             /* replicas above the need this long are stopped and their hosts lent */
  double react_lo, react_hi; /* react_hi > 0: reactive threshold autoscaling instead of the forecast (loan.h) */
  double every;              /* seconds between loaning steps (each reads the manager's nodes and jobs) */
  /* The router's /router/stats: requests per second answered over its window, requests waiting now, the
   * replicas' own measured seconds a request (0: none reported yet) and the requests that arrived at it since it
   * started (accepted or refused; < 0: not known). Each step counts with the arrivals since the step before
   * (rate: the first step, or after a count that went back: a restarted router); 0 or an error. */
  int (*load)(void *arg, double *rate, double *waiting, double *service_s, double *arrived);
  void *load_arg;
} shoal_live_loan_opts_t;

typedef struct shoal_live_config {
  const char *policy;        /* "name[:key=value...]" (default fifo) */
  const char *journal;       /* journal file (default ./shoal-live.journal) */
  const char *partition;     /* the node set and jobs it serves; NULL/"": every node, jobs of any partition */
  const char *accounts;      /* comma-separated accounts that may submit to it; NULL/"": any */
  const char *id;            /* its identity in claims and leases; NULL: from the host name and the journal's path */
  const char *throughputs;   /* speed table (shoal sim --speed table); NULL: the analytic model */
  const char *gpu;           /* the table's GPU type */
  int raw_spread;            /* table: do not clamp spread speeds to the consolidated ones */
  double tick;               /* seconds between rounds */
  double grace;              /* seconds a job has to checkpoint and exit after the request */
  double restart_cost;       /* seconds a restart costs a job (what the policies weigh) */
  int retries;               /* requeues of a job that failed on its own before it is reported failed */
  double oversub;            /* rack uplink oversubscription seen by the speed model (>= 1) */
  double nodes_every;        /* seconds between reads of the nodes */
  double lease_ttl;          /* seconds a lease renewal is good for (renewed every ttl/4) */
  double shares_every;       /* seconds between reads of the fair shares (0: never) */
  const char *tenants;       /* "account" (default), "user" or "none": who the policies' tenants are */
  int dry_run;               /* print decisions, change nothing: no journal, claim, lease or action */
  int recover;               /* a damaged journal: keep its valid records, adopt the rest from the manager */
  double (*clock)(void *arg);/* wall-clock seconds; NULL: CLOCK_REALTIME */
  void *clock_arg;
  FILE *log;                 /* NULL: stdout */
  shoal_live_loan_opts_t loan; /* loaning (partition NULL: none) */
} shoal_live_config_t;

void shoal__live_config_default(shoal_live_config_t *c);

typedef struct shoal_live_ctl shoal_live_ctl_t;

/* Set up a controller on manager mgr (borrowed: the caller destroys it after the controller). The policy and
 * speed model are checked first (nothing is written if they are wrong); the journal is read (a damaged one is
 * refused, naming file, line and the running jobs the controller cannot vouch for, unless cfg->recover); the
 * lease of its scope is taken (another live controller: refused, naming it); the nodes are read. */
int shoal__live_ctl_create(const shoal_live_config_t *cfg, shoal_live_manager_t mgr, shoal_live_ctl_t **out);
/* One round. A negative status is fatal (the policy failed, the lease was lost, the journal cannot be
 * written): the controller stops acting. */
int shoal__live_ctl_tick(shoal_live_ctl_t *L);
/* Rounds every tick until *stop, `until_done` jobs ended (0: no limit) or max_time seconds (0: none; then
 * SHOAL_ERR_TIMEOUT). */
int shoal__live_ctl_serve(shoal_live_ctl_t *L, int until_done, double max_time, volatile sig_atomic_t *stop);
/* Jobs seen (the controller's, not the ignored) and of those ended. */
void shoal__live_ctl_counts(const shoal_live_ctl_t *L, int *seen, int *ended);
/* The summary of every job (to the log). */
void shoal__live_ctl_summary(shoal_live_ctl_t *L);
/* What it is doing, for people (`shoal sched status`) and for Prometheus (the text exposition format). */
int shoal__live_ctl_status(const shoal_live_ctl_t *L, char *buf, size_t cap);
int shoal__live_ctl_metrics(const shoal_live_ctl_t *L, char *buf, size_t cap);
/* After each round, write the status and the metrics to this board (board.h; NULL: none). */
struct shoal_live_board;
void shoal__live_ctl_publish(shoal_live_ctl_t *L, struct shoal_live_board *board);
/* The controller's identity (claims, lease, status socket). */
const char *shoal__live_ctl_id(const shoal_live_ctl_t *L);
/* Releases the lease (the jobs stay claimed: a restart on the same journal continues). */
void shoal__live_ctl_destroy(shoal_live_ctl_t *L);
/* Frees it as a kill -9 leaves things: the lease is not given back (it runs out after its ttl). */
void shoal__live_ctl_abandon(shoal_live_ctl_t *L);

#endif
