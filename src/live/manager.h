/* The cluster-manager interface: what the live controller needs from the
 * system that runs the jobs (Slurm today; an in-memory one for tests; room for
 * Kubernetes). The controller only reads the manager's view (nodes, jobs) and
 * asks it for actions; it never runs a job's process itself.
 *
 * A manager reports every node and every job it knows, the controller's and
 * everybody else's: the controller decides which are its own (a `shoal:`
 * comment, its partition, an allowed account, its claim) and treats the rest
 * as foreign (their nodes are not free). Names are the manager's (node
 * names, job ids); times are wall-clock seconds (CLOCK_REALTIME, as the
 * manager records them).
 *
 * Every call returns 0 or a negative shoal_status_t with shoal_last_error()
 * saying what the manager answered; SHOAL_ERR_UNSUPPORTED means "this manager
 * cannot do that" (the controller then does without: e.g. a resize becomes a
 * checkpoint and a start at the new size). Every call is bounded in time. */
#ifndef SHOAL_LIVE_MANAGER_H
#define SHOAL_LIVE_MANAGER_H

#include <stddef.h>

#define SHOAL_LIVE_NAME 64

/* A node: capacity, whether new work may go there, and its partitions (node sets). */
typedef struct shoal_live_node {
  char name[SHOAL_LIVE_NAME];
  char state[96];          /* in the manager's words, for messages: "idle", "mixed+DRAIN", "idle+NOT_RESPONDING" */
  int usable;              /* 0: down, failed, drained, draining or not responding: no new work there */
  int drain;               /* drained or draining by an operator (a subset of !usable) */
  int gpus, cpus;          /* capacity */
  int rack;                /* switch/rack index from the manager's topology; -1 if unknown */
  char partitions[256];    /* comma-separated */
} shoal_live_node_t;

typedef struct shoal_live_nodes {
  int n;
  shoal_live_node_t *node;
} shoal_live_nodes_t;

/* What a job holds on one node. */
typedef struct shoal_live_use {
  char node[SHOAL_LIVE_NAME];
  int gpus, cpus;
} shoal_live_use_t;

typedef enum shoal_live_run {
  SHOAL_LIVE_PENDING = 0,  /* waiting: held, or released and not started yet */
  SHOAL_LIVE_RUNNING,      /* its processes run (also suspended) */
  SHOAL_LIVE_COMPLETING,   /* it exited; the manager still cleans up its nodes */
  SHOAL_LIVE_ENDED         /* final for this run: `state` says how */
} shoal_live_run_t;

typedef struct shoal_live_job {
  long id;
  int run;                 /* shoal_live_run_t */
  char state[32];          /* the manager's word: PENDING RUNNING COMPLETING COMPLETED FAILED CANCELLED NODE_FAIL ... */
  char reason[64];         /* why it waits, or why it ended, in the manager's words */
  int held;                /* held (waits for someone to release it) */
  int exit_status;         /* wait status of the job's main process (ENDED) */
  int restarts;            /* runs before the current one (requeues) */
  double submit_time, start_time, end_time; /* 0: unknown */
  char name[SHOAL_LIVE_NAME];
  char user[32], account[32], partition[SHOAL_LIVE_NAME];
  char comment[512];       /* the submitter's: "shoal:..." for jobs that opt in */
  char claim[128];         /* the claim field ("" none): which controller placed it */
  char output[256];        /* its output file, "" if unknown (failure messages quote its last line) */
  int nuse;
  shoal_live_use_t *use;   /* what it holds now, per node (RUNNING, COMPLETING); NULL when nuse is 0 */
} shoal_live_job_t;

typedef struct shoal_live_jobs {
  int n;
  shoal_live_job_t *job;
} shoal_live_jobs_t;

/* Where to run a job: nodes and GPUs (workers) on each; one task per node. A parameter-server job also has its
 * servers per node (no GPU each; a node may hold only servers when the manager can run them so): one task per
 * worker and per server, the workers' ranks first (docs/live.md). */
typedef struct shoal_live_place {
  int n;
  char (*node)[SHOAL_LIVE_NAME];
  const int *gpus;
  const int *servers;      /* [n]; NULL: none (an all-reduce job) */
} shoal_live_place_t;

typedef enum shoal_live_stop {
  SHOAL_LIVE_STOP_CHECKPOINT = 0, /* ask it to checkpoint and exit (Slurm: USR1 to the batch script) */
  SHOAL_LIVE_STOP_KILL_TASKS,     /* kill its tasks, not its main script (which then ends) */
  SHOAL_LIVE_STOP_KILL            /* kill the whole job */
} shoal_live_stop_t;

/* One association of the manager's accounting: an account (user "" = the account itself) or a user in it. */
typedef struct shoal_live_share {
  char account[32], user[32];
  double shares;           /* raw shares given by the operator */
  double norm_shares;      /* its fraction among its siblings */
  double usage;            /* effective (decayed) usage fraction */
  double fairshare;        /* fair-share factor, 0..1: 1 = used nothing of its share, 0.5 = used exactly its share */
} shoal_live_share_t;

typedef struct shoal_live_shares {
  int n;
  shoal_live_share_t *share;
} shoal_live_shares_t;

/* Who holds a lease (one controller per scope). */
typedef struct shoal_live_lease {
  char holder[128];        /* "" when nobody holds it */
  char where[256];         /* the holder's description (host, pid, journal) */
  double renewed;          /* wall time of its last renewal */
  double ttl;              /* seconds a renewal is good for */
} shoal_live_lease_t;

/* A job to submit (shoal submit). */
typedef struct shoal_live_submit {
  const char *name, *partition, *account, *comment, *output;
  const char *const *argv; /* the command each task runs */
  int argc;
  const char *const *env;  /* NAME=VALUE words set in the command's environment (besides the submitter's) */
  int envc;
  int hold;                /* 1: submit held (the controller releases it) */
} shoal_live_submit_t;

enum { SHOAL_LIVE_LEASE_TAKE = 0, SHOAL_LIVE_LEASE_GIVE = 1, SHOAL_LIVE_LEASE_PEEK = 2 };

enum {
  SHOAL_LIVE_CAP_SHRINK = 1,   /* resize() can give back nodes of a running job in place (Slurm: of a job whose
                                * tasks leave on request; another's is SHOAL_ERR_UNSUPPORTED) */
  SHOAL_LIVE_CAP_GROW = 2,     /* resize() can add nodes to a running job in place */
  SHOAL_LIVE_CAP_SHARES = 4,   /* shares() reads accounting (associations, fair share) */
  SHOAL_LIVE_CAP_GROW_RESTART = 8 /* resize() adds nodes by a restart: the job checkpoints, is requeued and resumes
                                   * on the larger node list (Slurm); the call waits for the requeue */
};

typedef struct shoal_live_manager_ops {
  const char *name;        /* "slurm", "memory" */
  const char *server;      /* what answers its reads, for the log ("slurmctld"; NULL: "the NAME manager") */
  /* every node the manager knows */
  int (*nodes)(void *m, shoal_live_nodes_t *out);
  /* every job it still knows, ended ones too while it keeps them */
  int (*jobs)(void *m, shoal_live_jobs_t *out);
  /* run a held job on exactly these nodes with these GPUs, from now: set where and release it */
  int (*start)(void *m, long id, const shoal_live_place_t *p);
  int (*stop)(void *m, long id, shoal_live_stop_t how);
  /* the job's run (ended, or still running: it is stopped) goes back to the queue, held */
  int (*requeue)(void *m, long id);
  int (*hold)(void *m, long id);
  int (*release)(void *m, long id);
  /* change a running job's nodes in place (caps say which direction works) */
  int (*resize)(void *m, long id, const shoal_live_place_t *p);
  /* write the job's claim field ("" clears it) */
  int (*claim)(void *m, long id, const char *claim);
  /* The lease of `scope` (one controller per scope). SHOAL_LIVE_LEASE_TAKE acquires or renews it for `me`
   * (described by `where`), good for ttl_s: 0 when `me` holds it, SHOAL_ERR_ADDR_IN_USE when another live holder
   * has it (*holder says who). SHOAL_LIVE_LEASE_GIVE gives it up (0 also when `me` did not hold it).
   * SHOAL_LIVE_LEASE_PEEK only says who holds it now (*holder; holder "" if nobody live). */
  int (*lease)(void *m, const char *scope, const char *me, const char *where, double ttl_s, int mode,
               shoal_live_lease_t *holder);
  /* accounting associations and their fair-share factors */
  int (*shares)(void *m, shoal_live_shares_t *out);
  int (*submit)(void *m, const shoal_live_submit_t *req, long *id);
  void (*destroy)(void *m);
  unsigned caps;           /* SHOAL_LIVE_CAP_* */
} shoal_live_manager_ops_t;

typedef struct shoal_live_manager {
  const shoal_live_manager_ops_t *ops;
  void *impl;
} shoal_live_manager_t;

void shoal__live_nodes_free(shoal_live_nodes_t *n);
void shoal__live_jobs_free(shoal_live_jobs_t *j);
void shoal__live_shares_free(shoal_live_shares_t *s);
/* the job with this id in a list, NULL if absent */
const shoal_live_job_t *shoal__live_jobs_find(const shoal_live_jobs_t *jobs, long id);
/* 1 if node `name` is in the comma-separated list */
int shoal__live_list_has(const char *list, const char *name);
/* "h0,h1" from a placement */
void shoal__live_place_str(const shoal_live_place_t *p, char *buf, size_t cap);
void shoal__live_manager_destroy(shoal_live_manager_t *m);

#endif
