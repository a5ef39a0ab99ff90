/* Helpers shared by policies: place a job at its requested size, and turn
 * "these jobs should run, in this priority order" into assignments. */
#ifndef SHOAL_SCHED_POLICIES_COMMON_H
#define SHOAL_SCHED_POLICIES_COMMON_H

#include "sched/model/place.h"
#include "sched/policy.h"

/* Placement of j at its requested size (all-reduce: `gpus` workers
 * consolidated; PS: `gpus` workers + `ps` PSs, shoal__place_ps_job). */
int shoal__place_requested(const shoal_cluster_t *c, const shoal_job_t *j, shoal_place_t *out, int cap);

/* Try to start j at its requested size now; 1 if started, 0 if it does not
 * fit, negative on error. buf has room for nmachines entries. */
int shoal__start_requested(shoal_sched_t *s, shoal_job_t *j, shoal_place_t *buf);

/* order[0..n-1] in priority order; want[i] != 0 means order[i] should hold
 * its requested resources. First preempts running jobs not wanted, then
 * starts wanted waiting jobs in order (consolidated; a job that does not fit
 * because of fragmentation stays waiting). Running wanted jobs keep their
 * placement. Returns the number of jobs that could not be started, or < 0. */
int shoal__apply_selection(shoal_sched_t *s, shoal_job_t **order, const char *want, int n, shoal_place_t *buf);

/* The active jobs in arrival order, for policies that walk them in that
 * order (s->active is unordered): a doubly linked list indexed by job id,
 * jobs appended in arrive() and unlinked in finish(), both O(1), and a walk
 * sees only live jobs:
 *   for (int id = q.head; id >= 0; id = q.next[id]) { shoal_job_t *j = q.job[id]; ... } */
typedef struct shoal__arrivals {
  shoal_job_t **job;   /* [cap] by id */
  int32_t *next, *prev;
  int head, tail, n, cap;
} shoal__arrivals_t;
void shoal__arrivals_init(shoal__arrivals_t *q);
int shoal__arrivals_add(shoal__arrivals_t *q, shoal_job_t *j);
void shoal__arrivals_remove(shoal__arrivals_t *q, const shoal_job_t *j);
void shoal__arrivals_free(shoal__arrivals_t *q);

/* 1 if j holds resources in the current plan */
static inline int shoal__holding(const shoal_job_t *j) { return j->alloc.n > 0; }

/* Steps/s at the requested size, consolidated (the reference speed of the
 * trace conversion): cached by policies in pkey slots if they want. */
double shoal__ref_rate(const shoal_sched_t *s, const shoal_job_t *j);

#endif
