/* The scheduling-policy interface, shared by the simulator (src/sim) and the
 * live controller beside Slurm (tools/cmd_live.c). A policy does not know whether time is
 * simulated: it sees a scheduler context (shoal_sched_t: the cluster, its
 * free resources, the active jobs, the current time) and changes job
 * allocations through shoal_sched_assign(). The runner (simulated engine or
 * live scheduler) applies the changes after the policy returns: it starts,
 * resizes, migrates or preempts jobs, charges restart costs and computes the
 * new speeds. A policy that wants periodic decisions asks for a timer.
 *
 * Calling sequence, at each instant t where something happens:
 *   1. finish(j) for every job that completed at t (its resources are already
 *      given back), then arrive(j) for every job that arrived at t, then
 *      timer(tag) for every timer due at t (in request order);
 *   2. schedule() once; s->events tells what happened (SHOAL_EV_* bits), so a
 *      policy may return at once when nothing relevant changed.
 * Allocation changes are only legal inside schedule() (and arrive/timer).
 * A job may arrive already running: the live controller, restarted on its
 * journal, gives a job an earlier controller started its recorded placement
 * before arrive(j); and a job may finish without having run (the user
 * cancelled it while it waited): the policy forgets it
 * (tests/sched/test_policy_adopt.c holds every policy to both).
 *
 * Writing a policy: one file src/sched/policies/<name>.c defining
 *   const shoal_policy_ops_t shoal__policy_<name> = { "name", ... };
 * and one line in src/sched/registry.c. Parameters arrive as a string
 * "key=value:key=value" (read them with shoal__param_double/long), e.g.
 * `shoal sim --policy tiresias:starve=2`. Document every parameter in `params`.
 *
 * Determinism: policies must not depend on addresses or hash-table order;
 * break ties by job id. */
#ifndef SHOAL_SCHED_POLICY_H
#define SHOAL_SCHED_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "shoal/status.h"
#include "sched/model/cluster.h"
#include "sched/model/job.h"
#include "sched/model/speed.h"

/* what happened since the last schedule() call */
enum {
  SHOAL_EV_ARRIVAL = 1,
  SHOAL_EV_FINISH = 2,
  SHOAL_EV_TIMER = 4,
  SHOAL_EV_RESTART_DONE = 8,    /* a job left RESTART and now progresses */
  SHOAL_EV_START = 16           /* first call of a run */
};

typedef struct shoal_sched shoal_sched_t;

/* Hooks of the runner (engine) behind a context. */
typedef struct shoal_sched_hooks {
  /* j's allocation is about to change for the first time in this decision
   * (the engine snapshots the old allocation and remembers j) */
  void (*touch)(void *engine, shoal_job_t *j);
  /* call the policy's timer(tag) at time `at` (>= now) */
  int (*timer)(void *engine, double at, int64_t tag);
} shoal_sched_hooks_t;

struct shoal_sched {
  shoal_cluster_t *cluster;     /* free resources reflect assignments made so far */
  const shoal_speed_t *speed;
  shoal_job_t **active;         /* arrived, not finished (WAIT, RUN, RESTART), in no particular
                                 * order (a completion moves the last job into its slot): a policy
                                 * that needs arrival order keeps its own list (shoal__arrivals_t) */
  int nactive;
  double now;                   /* seconds since the first arrival (simulated or real) */
  unsigned events;              /* SHOAL_EV_* since the last schedule() */
  double restart_cost;          /* s charged on resume, resize, migration (informative) */
  int check;                    /* verify the policy's incremental state too (the runner's --check) */
  int nvcs;                     /* tenants are 0..nvcs-1 */
  const double *vc_weight;      /* [nvcs]: tenant u's weight (its share of the cluster, any scale; a value that is not
                                 * > 0 counts as 1), the runner's, read at every decision; NULL: all weigh the same */
  uint64_t seed;                /* for seeded random choices (use shoal_rng_seed2) */
  const struct shoal_interference *interference; /* the interference model the runner applies, NULL: none
                                 * (sched/model/interference.h) */
  /* runner side */
  shoal_sched_hooks_t hooks;
  void *engine;
  /* private: the active set's capacity; memo of consolidated rates; the slot map (shoal__sched_slots) */
  int active_cap;
  struct shoal__rate_memo *memo;
  struct shoal__slots *slots;
};

/* ---- what a policy may call ---- */

/* Give job j exactly the placement p[0..n-1] (workers and PSs per machine;
 * machines may repeat in p, entries with 0 workers and 0 PSs are dropped).
 * n = 0 preempts j (it goes back to WAIT). Resources are checked against what
 * is free after giving back j's current allocation; on shortage returns
 * SHOAL_ERR_INFEASIBLE and changes nothing. A placement equal to the current
 * one is a no-op (no restart is charged). */
int shoal_sched_assign(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n);
static inline int shoal_sched_preempt(shoal_sched_t *s, shoal_job_t *j) { return shoal_sched_assign(s, j, NULL, 0); }
/* The same, choosing sockets: p lists each machine once in increasing order,
 * and want[i * SHOAL_MAX_SOCKETS + k] workers of entry i go to socket k of its
 * machine (the rest to its lowest free slots). See sched/model/gpu_slots.h. */
int shoal_sched_assign_sockets(shoal_sched_t *s, shoal_job_t *j, const shoal_place_t *p, int n, const uint8_t *want);
/* The slot map (which job holds each GPU slot), created on the first call and
 * kept by every assignment from then on; NULL when out of memory. */
struct shoal__slots *shoal__sched_slots(shoal_sched_t *s);
/* Runner side: j gives its slots back (it finished; its resources were returned). */
void shoal__sched_release(shoal_sched_t *s, shoal_job_t *j);
/* Ask for timer(tag) at time `at` (clamped to now). Several may be pending. */
int shoal_sched_timer(shoal_sched_t *s, double at, int64_t tag);

/* Speed of j under placement p (steps/s, from the speed model). */
double shoal_sched_rate(const shoal_sched_t *s, const shoal_job_t *j, const shoal_place_t *p, int n);
/* Speed of j with `workers` (+ `ps`) consolidated on the fewest machines
 * (memoized per model, architecture and size: the speed model is a pure
 * function of them, so the memo returns the very same value). */
double shoal_sched_rate_consolidated(const shoal_sched_t *s, const shoal_job_t *j, int workers, int ps);
/* Work done / remaining as of now. */
double shoal_sched_work_done(const shoal_sched_t *s, const shoal_job_t *j);
/* Seconds j has held resources (RUN + RESTART) since it arrived, as of now. */
double shoal_sched_held_s(const shoal_sched_t *s, const shoal_job_t *j);

/* ---- the policy itself ---- */
typedef struct shoal_policy_ops {
  const char *name;             /* "fifo" */
  const char *summary;          /* one line */
  const char *params;           /* "key=default: meaning; ..." (shown by --help) */
  /* Parse params, allocate state. s is the context the policy will run on
   * (cluster and speed model are set; no job is active yet). */
  int (*create)(shoal_sched_t *s, const char *params, void **state);
  void (*destroy)(void *state);
  /* optional notifications; may be NULL */
  void (*arrive)(void *state, shoal_sched_t *s, shoal_job_t *j);
  void (*finish)(void *state, shoal_sched_t *s, shoal_job_t *j);
  void (*timer)(void *state, shoal_sched_t *s, int64_t tag);
  /* decide: change allocations with shoal_sched_assign(). A negative return
   * aborts the run (bug or solver failure), with shoal_last_error() set. */
  int (*schedule)(void *state, shoal_sched_t *s);
  /* optional: policy-specific counters as "key=value key=value" (e.g. the
   * planners' deferrals and rejections), shown after a run; may be NULL */
  void (*stats)(void *state, char *buf, size_t cap);
  /* Every policy runs a job with min_workers..max_workers workers (the engine's --check holds it to that). */
} shoal_policy_ops_t;

/* Registry (registry.c): the policy called name, NULL if none. */
const shoal_policy_ops_t *shoal__policy_find(const char *name);
/* i-th registered policy (0..), NULL past the end. */
const shoal_policy_ops_t *shoal__policy_at(int i);

/* Parameters "key=value:key=value". Unknown keys are an error (call
 * shoal__param_check with the accepted keys first). Values missing -> def. */
int shoal__param_check(const char *policy, const char *params, const char *const *keys);
int shoal__param_double(const char *policy, const char *params, const char *key, double def, double min, double max, double *out);
int shoal__param_long(const char *policy, const char *params, const char *key, long def, long min, long max, long *out);
/* Copy the raw value of key into buf ("" and 0 if absent; 1 if present; SHOAL_ERR_CONFIG if it does not
 * fit: never a cut value). */
int shoal__param_str(const char *params, const char *key, char *buf, size_t cap);

/* ---- context management (used by runners) ---- */
int  shoal__sched_init(shoal_sched_t *s, shoal_cluster_t *c, const shoal_speed_t *speed, int max_active_hint);
void shoal__sched_fini(shoal_sched_t *s);
int  shoal__sched_add_active(shoal_sched_t *s, shoal_job_t *j);
void shoal__sched_remove_active(shoal_sched_t *s, shoal_job_t *j);

#endif
