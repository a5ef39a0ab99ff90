/* Placers: where a queue policy puts a job it decided to start. The FIFO
 * queue (`fifo:place=NAME`) and the learned policy take one by name:
 *
 *   consolidate  fewest machines: one machine (best fit), else one rack, else
 *                cluster-wide (place.h; Tiresias-like consolidation; the default)
 *   firstfit     every worker on the lowest-numbered machine with room
 *   loadbal      every worker on the machine with the most free GPUs (ties: lowest id)
 *   pack         interference-aware packing (Gandiva-like): the machine, and per
 *                worker the socket, that the interference model says suffers and
 *                causes the least slowdown, ties to the fullest machine; a job no
 *                machine holds is consolidated, its workers on the quietest sockets
 *   marl         the learned multi-agent policy (policies/marl.c)
 *
 * Adding a placer: one shoal_placer_ops_t and one line in placers.c. */
#ifndef SHOAL_SCHED_POLICIES_PLACER_H
#define SHOAL_SCHED_POLICIES_PLACER_H

#include "sched/policy.h"

typedef struct shoal_placer_ops {
  const char *name;
  const char *summary;
  /* state for context s; params "key=value:..." (NULL: defaults) */
  int (*create)(shoal_sched_t *s, const char *params, void **state);
  void (*destroy)(void *state);
  /* start j at its requested size now: 1 if assigned, 0 if it does not fit, < 0 on error */
  int (*start)(void *state, shoal_sched_t *s, shoal_job_t *j);
  /* optional counters ("key=value ..."), may be NULL */
  void (*stats)(void *state, char *buf, size_t cap);
  /* optional: where it would put j (which would span machines) if it started now, into out[0..cap);
   * returns the number of entries. The queue's waiting rule judges this spread (NULL: consolidation's). */
  int (*spread)(void *state, shoal_sched_t *s, const shoal_job_t *j, shoal_place_t *out, int cap);
} shoal_placer_ops_t;

/* The placer called name, NULL if none; the i-th (0..), NULL past the end. */
const shoal_placer_ops_t *shoal__placer_find(const char *name);
const shoal_placer_ops_t *shoal__placer_at(int i);

/* The interference model a placer predicts with (pack, marl's features): the
 * runner's (s->interference: the model the simulator applies), else the
 * shipped measured model, which *owned receives (free it). */
struct shoal_interference;
int shoal__placer_model(shoal_sched_t *s, const struct shoal_interference **use, struct shoal_interference **owned);

/* The FIFO queue (fifo.c) with a placer (NULL: consolidate) and its waiting rule (hold: 0 off, 1 bounded,
 * 2 no limit), for policies that are that queue with their own placer (marl); the rest of their ops are
 * fifo's. */
int  shoal__fifo_with_placer(shoal_sched_t *s, int strict, int hold, const shoal_placer_ops_t *placer,
                             const char *pparams, void **state);
void shoal__fifo_destroy(void *state);
void shoal__fifo_arrive(void *state, shoal_sched_t *s, shoal_job_t *j);
int  shoal__fifo_schedule(void *state, shoal_sched_t *s);
void shoal__fifo_stats(void *state, char *buf, size_t cap);
void *shoal__fifo_placer_state(void *state);

#endif
