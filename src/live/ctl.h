/* The controller's state, shared by the files of its phases:
 *   log.c      log lines and journal records
 *   tenants.c  the policy's tenants and their weights from the manager's fair shares
 *   book.c     the policy's view of a job: progress, running, finished, forced off
 *   act.c      actions through the manager: start, stop, requeue, hold, claim
 *   nodes.c    the policy's cluster from the manager's nodes; what down, drained and foreign use block
 *   arrive.c   jobs seen for the first time: whose they are, and adoption after a restart
 *   observe.c  what the manager shows of the controller's jobs, job by job
 *   decide.c   timers, the policy's decision, and its changes turned into actions
 *   lend.c     loaning: the borrowers chosen, the loan module (loan.h) stepped
 *   status.c   the summary, status and metrics text
 *   (board.c  the HTTP board: called by ctl.c, calls nothing of the controller)
 *   ctl.c      set-up, the round (tick), the serve loop
 * A file calls only the files above it in this list (no call circle). */
#ifndef SHOAL_LIVE_CTL_H
#define SHOAL_LIVE_CTL_H

#include <stdint.h>

#include "live/journal.h"
#include "live/live.h"
#include "live/loan.h"
#include "live/manager.h"
#include "live/params.h"
#include "live/replay.h"
#include "sched/policy.h"

/* Where a job is in the controller's hands. */
typedef enum live_phase {
  PH_HELD,        /* waiting for the policy (held in the manager) */
  PH_RELEASED,    /* started by the controller (released; running or about to) */
  PH_STOPPING,    /* asked to checkpoint and exit (preemption, resize, drain) */
  PH_REQUEUED,    /* its run ended and was requeued held; started again at `want` if the policy gave one */
  PH_DONE         /* ended for good, or not the controller's (ignored) */
} live_phase_t;

typedef struct lj {
  long sid;
  int phase;            /* live_phase_t */
  double stop_at;       /* PH_STOPPING: the grace ends */
  int killed;           /* PH_STOPPING: the grace ran out, its tasks (or it) killed */
  int start_failing;    /* PH_HELD: a start failed; retried every tick on `want` */
  int retries;          /* requeues after it failed on its own */
  int req_restarts;     /* PH_REQUEUED: the manager's restart count of the run requeued; -1 if held without one */
  int ran;              /* its current start was seen running */
  int starts, runs, preempts, resizes; /* over the job's life, journal included */
  double first_run;     /* controller clock; -1 never ran */
  char stop_why[16];    /* the stop in progress: preempt, resize, drain */
  char final[96];       /* PH_DONE: COMPLETED, a failure with its reason, CANCELLED (by the user) */
  char unsched[200];    /* why it can never run as asked ("" if it can): the policy never sees it */
  char why_wait[200];   /* status: why it waits now */
  int in_policy;        /* the policy knows it (arrived, not finished) */
  int ignored;          /* not the controller's: remembered only so that it is not looked at again */
  int refused_said;     /* why it is not ours was logged */
  char user[32], account[32];
  shoal_place_t *want;  /* placement to start it on once its previous run is requeued */
  int nwant;
  /* a loan's restart (lend.c): the manager's nodes and GPUs (its policy placement and the hosts lent to it) to
   * start it on once its run is requeued, when the policy gave no placement meanwhile (nwant 0) */
  int nloan;
  char (*loan_node)[SHOAL_LIVE_NAME];
  int *loan_gpus;
  shoal_job_t j;
} lj_t;

typedef struct live_timer {
  double at;
  int64_t tag;
} live_timer_t;

/* the policy's last decision, for status */
typedef struct live_decision {
  double at;            /* controller clock */
  double ms;            /* wall time schedule() took */
  char text[1024];      /* its changes: "start 12 on h0,h1; preempt 13" */
} live_decision_t;

struct shoal_live_ctl {
  shoal_live_config_t cfg;
  char policy_s[512], journal_s[4096], partition_s[64], accounts_s[512], tenants_s[16];
  shoal_live_manager_t mgr;
  shoal_live_journal_t *journal;   /* NULL in a dry run */
  int journal_created;             /* this controller created the file and has not written it yet */
  shoal_live_replay_t replay;
  char id[64], claim[160], scope[96], where[256];
  double epoch;
  /* nodes of its partition, sorted by rack */
  int nnodes, model_gpus;
  char (*node)[SHOAL_LIVE_NAME];
  char (*node_state)[96];
  int *node_gpus, *node_cpus, *usable, *drain, *foreign_gpus, *foreign_cpus;
  shoal_res_t *blocked;            /* taken from the policy's cluster: see nodes.c */
  int capacity_gpus, usable_gpus;
  /* the policy */
  shoal_cluster_t *c;
  shoal_speed_t *speed;
  shoal_sched_t s;
  const shoal_policy_ops_t *ops;
  void *pstate;
  char (*tenant)[32];
  double *tenant_w;                /* [tenant_room]: the policy's tenant weights (the fair shares), s.vc_weight */
  int ntenants, tenant_room;       /* tenants known; the policy's tenants (room for associations added later) */
  /* jobs */
  lj_t **jobs;
  int njobs, cap;
  shoal_job_t **touched;
  shoal_alloc_t *prev;
  int ntouched;
  live_timer_t timers[4096];
  int ntimers;
  shoal_live_jobs_t view;          /* the manager's jobs this round */
  /* counters (this process) */
  long decisions, schedules, ticks, requeues;
  double decide_ms_sum, decide_ms_max;
  live_decision_t last;
  double down_since, down_said;    /* the manager does not answer since (0: it does), last said */
  int down_reads;                  /* reads of its jobs retried while it does not answer */
  double slow_said;                /* a slow read of its jobs last said (0: never) */
  int slow_reads;                  /* slow reads since then */
  int act_failed, act_failed_ok;   /* actions on the manager that failed; that count at the last good read */
  double nodes_next, lease_next, shares_next;
  int lease_held;
  struct shoal_live_board *board;  /* where status and metrics go after each round (NULL: nowhere) */
  int fatal;                       /* stop acting: the journal cannot be written, the lease is lost */
  /* loaning (lend.c; NULL: none) */
  shoal_live_loan_t *lend;
  shoal__forecast_t *lend_fc;
  shoal_live_borrower_t lend_b[SHOAL_LIVE_LOAN_MAX_BORROWERS]; /* the borrowers of the last step */
  shoal_job_t *lend_job[SHOAL_LIVE_LOAN_MAX_BORROWERS];        /* their jobs (for their speedups) */
  int lend_nb;
  long lend_steps;
  double lend_next;
  double lend_arrived, lend_arrived_at; /* the router's arrival count at the last step and when (count < 0: none) */
  shoal_live_loan_step_t lend_last;
  char lend_said[256];             /* the last error said */
  FILE *log;
};

/* ---- log.c ---- */
double live_wall(const shoal_live_ctl_t *L);        /* the configured wall clock */
void live_log(shoal_live_ctl_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a journal record (nothing in a dry run); a failure is logged and returned */
int live_journal(shoal_live_ctl_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- tenants.c ---- */
/* the tenants (L->tenant, tenant_w) from the manager's associations, logged; none when it has no accounting */
int live_tenants_read(shoal_live_ctl_t *L);
/* the weights read again every cfg.shares_every s, new associations added as tenants, logged when they change */
void live_tenants_refresh(shoal_live_ctl_t *L);
/* the weight of `who` (an account, or with by_user a user summed over its accounts) in these associations: its
 * share of the cluster times Slurm's classic fair-share factor of its decayed usage */
double live_tenant_weight(const shoal_live_shares_t *sh, const char *who, int by_user);

/* ---- book.c ---- */
void live_advance(shoal_live_ctl_t *L, shoal_job_t *j);
void live_set_running(shoal_live_ctl_t *L, shoal_job_t *j);
void live_finish(shoal_live_ctl_t *L, lj_t *x, const char *final);
void live_forced_off(shoal_live_ctl_t *L, lj_t *x, int preempted);
/* the job joins the policy's active jobs (a running one is given its placement after this), then the policy is
 * told it arrived */
void live_activate(shoal_live_ctl_t *L, lj_t *x);
void live_tell_arrival(shoal_live_ctl_t *L, lj_t *x);
lj_t *live_find(const shoal_live_ctl_t *L, long sid);
lj_t *live_new_job(shoal_live_ctl_t *L, long sid);
int live_node_index(const shoal_live_ctl_t *L, const char *name);
#define FINAL_USER_CANCELLED "CANCELLED (by the user)"

/* ---- act.c ---- */
int live_start(shoal_live_ctl_t *L, lj_t *x, const shoal_place_t *p, int n);
/* start it on its loan placement (x->loan_node; hosts outside the controller's partition included) */
int live_start_loan(shoal_live_ctl_t *L, lj_t *x);
void live_stop(shoal_live_ctl_t *L, lj_t *x, const char *why);
int live_requeue(shoal_live_ctl_t *L, lj_t *x, const char *why, int restarts);
int live_hold(shoal_live_ctl_t *L, lj_t *x);
int live_kill(shoal_live_ctl_t *L, lj_t *x, shoal_live_stop_t how);
int live_claim(shoal_live_ctl_t *L, long sid);

/* ---- nodes.c ---- */
int live_nodes_first(shoal_live_ctl_t *L, const shoal_live_nodes_t *nodes);
void live_nodes_update(shoal_live_ctl_t *L, const shoal_live_nodes_t *nodes);
void live_nodes_foreign(shoal_live_ctl_t *L);
void live_nodes_block(shoal_live_ctl_t *L);
/* 1 if the job's placement collides with foreign use on one of its nodes */
int live_nodes_taken(const shoal_live_ctl_t *L, const shoal_job_t *j);

/* ---- arrive.c ---- */
int live_arrivals(shoal_live_ctl_t *L);

/* ---- observe.c ---- */
void live_observe(shoal_live_ctl_t *L);

/* ---- decide.c ---- */
int live_decide(shoal_live_ctl_t *L);

/* ---- lend.c ---- */
int live_lend_setup(shoal_live_ctl_t *L); /* 0 also when loaning is off */
void live_lend(shoal_live_ctl_t *L);      /* one loaning step when due */
void live_lend_free(shoal_live_ctl_t *L);

#endif
