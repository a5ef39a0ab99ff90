/* An in-memory cluster manager: nodes, jobs and their runs kept in this
 * process, behaving as Slurm does for everything the controller relies on (a
 * held job waits; a released one starts when its nodes have room; a checkpoint
 * request makes a checkpointing job exit 75; requeue-hold puts an ended run
 * back, held, counting a restart; a down node fails its jobs; a drained one
 * keeps them). Time moves only when the caller says (advance), so the
 * controller's behaviour is tested step by step, without Slurm and without
 * waiting. Faults are injected by the caller: the manager stops answering,
 * a command fails, a node goes down, a user cancels, a task dies. */
#ifndef SHOAL_LIVE_MANAGER_MEM_H
#define SHOAL_LIVE_MANAGER_MEM_H

#include "live/manager.h"

typedef struct shoal_live_mem shoal_live_mem_t;

/* How a submitted job behaves once it runs. */
typedef struct shoal_live_mem_behaviour {
  double work;             /* worker-seconds to completion (run time = work / workers) */
  int checkpoints;         /* 1: on a checkpoint request it exits 75 after ckpt_s, keeping its progress */
  double ckpt_s;
  int fail_exit;           /* exit status it ends with when its work is done (0: completes) */
  int gpus_per_node;       /* jobs not placed by the controller (foreign): GPUs on each node */
  int nodes;               /* foreign jobs: node count when released without a node list */
  const char *nodelist;    /* foreign jobs: the nodes it asks for (comma-separated; NULL: any) */
  const char *output;      /* its output file as the manager reports it (NULL: none) */
  int urgent;              /* starts before the other released jobs (a higher priority) */
} shoal_live_mem_behaviour_t;

int shoal__live_mem_create(double now, shoal_live_mem_t **out);
void shoal__live_mem_destroy(shoal_live_mem_t *m);
/* The manager interface over m (m stays the caller's: destroying the manager does not free it). */
shoal_live_manager_t shoal__live_mem_manager(shoal_live_mem_t *m);

int shoal__live_mem_add_node(shoal_live_mem_t *m, const char *name, int gpus, int cpus, int rack, const char *partitions);
/* Like sbatch: a job with this comment ("" for a plain job), partition, account and user; held or not. Its id. */
long shoal__live_mem_submit(shoal_live_mem_t *m, const char *comment, const char *partition, const char *account,
                            const char *user, int held, const shoal_live_mem_behaviour_t *b);

/* The world at wall time `now` (>= the last): runs progress and end, released jobs start where they fit,
 * COMPLETING jobs finish their clean-up. */
void shoal__live_mem_advance(shoal_live_mem_t *m, double now);
double shoal__live_mem_now(const shoal_live_mem_t *m);
/* seconds an ended job stays COMPLETING (0.5 by default) */
void shoal__live_mem_set_completing(shoal_live_mem_t *m, double s);

/* 1: managers made from m from now on resize as Slurm's does (manager_slurm.c): no in-place resize in their
 * capabilities; resize() grows by a requeue (a checkpointing job keeps its progress) and a start on the new
 * nodes, and shrinks in place only a job whose comment has leave=1 (its tasks leave on request); another's
 * shrink is SHOAL_ERR_UNSUPPORTED */
void shoal__live_mem_set_slurm_resize(shoal_live_mem_t *m, int on);

/* ---- faults ---- */
/* 1: every call fails as a manager that does not answer (slurmctld down) */
void shoal__live_mem_set_down(shoal_live_mem_t *m, int down);
/* the next `count` calls of op ("start", "stop", "requeue", "hold", "release", "claim", "jobs", "nodes") fail */
void shoal__live_mem_fail_next(shoal_live_mem_t *m, const char *op, int count);
/* the next `count` calls of op take `seconds` before they answer (a slurmctld that is slow or restarting, its
 * clients retrying): the manager's clock moves on by that much inside the call, its runs progressing meanwhile */
void shoal__live_mem_slow_next(shoal_live_mem_t *m, const char *op, int count, double seconds);
/* the NAME=VALUE words a job was submitted with (shoal_live_submit_t.env), separated by spaces; NULL: no such job */
const char *shoal__live_mem_job_env(shoal_live_mem_t *m, long id);
/* a node's state: usable, drained (usable 0), down (its running jobs end NODE_FAIL), with the manager's words */
int shoal__live_mem_set_node(shoal_live_mem_t *m, const char *name, int usable, int down, const char *state);
/* a user's scancel (CANCELLED), scontrol hold / release / requeuehold */
int shoal__live_mem_user_cancel(shoal_live_mem_t *m, long id);
int shoal__live_mem_user_hold(shoal_live_mem_t *m, long id);
int shoal__live_mem_user_release(shoal_live_mem_t *m, long id);
/* scontrol update JobId=id Partition=partition (as the Slurm manager's grow does onto hosts of two partitions) */
int shoal__live_mem_user_set_partition(shoal_live_mem_t *m, long id, const char *partition);
int shoal__live_mem_user_requeuehold(shoal_live_mem_t *m, long id);
/* one of its tasks dies: the run ends FAILED with this wait status */
int shoal__live_mem_kill_task(shoal_live_mem_t *m, long id, int status);
/* the job exits 75 on its own, unasked (it checkpointed itself) */
int shoal__live_mem_exit_now(shoal_live_mem_t *m, long id, int exit_code);
/* accounting: one association's raw shares and effective (decayed) usage, 0..1 of its parent's, as sshare's
 * RawShares and EffectvUsage (added, or replaced) */
int shoal__live_mem_set_share(shoal_live_mem_t *m, const char *account, const char *user, double shares,
                              double usage);
/* ended jobs older than s seconds are no longer listed (a manager's MinJobAge); 0: kept */
void shoal__live_mem_set_forget(shoal_live_mem_t *m, double s);

/* ---- inspection ---- */
typedef struct shoal_live_mem_stats {
  int runs;                /* times the job started running */
  int completions;         /* runs that completed (exit 0) */
  int refused_starts;      /* start() of the job while it was not pending (running, or ended: a double start) */
  char nodes[256];         /* nodes of its last run */
  int gpus;                /* GPUs of its last run, summed over nodes */
  double progress;         /* worker-seconds done */
} shoal_live_mem_stats_t;
int shoal__live_mem_stats(const shoal_live_mem_t *m, long id, shoal_live_mem_stats_t *out);
/* the job as the manager lists it (NULL if unknown) */
const shoal_live_job_t *shoal__live_mem_job(const shoal_live_mem_t *m, long id);
/* calls of an op made so far (for tests that count actions; dry runs make none) */
int shoal__live_mem_calls(const shoal_live_mem_t *m, const char *op);

#endif
