/* The lowest levels of the cluster hierarchy (rack -> server -> socket ->
 * slot): which job holds each accelerator slot of each machine. A machine's
 * slots are its GPUs, split into its sockets in contiguous blocks (slot k of
 * a machine with g GPUs and S sockets is in socket k*S/g). Allocations stay
 * per machine (shoal_place_t); the slot map says which slots, and so which
 * sockets, a job's workers there use, for the interference model and the
 * policies that place by socket.
 *
 * The scheduler context keeps the map (shoal__sched_slots), created when a
 * policy or runner first asks for it and updated by every assignment from
 * then on: the workers of a job on a machine keep their slots while their
 * count there does not change; new ones take the sockets a policy asked for
 * (shoal_sched_assign_sockets), else the lowest free slots (GPU order, as
 * CUDA and Slurm number devices). */
#ifndef SHOAL_SCHED_MODEL_GPU_SLOTS_H
#define SHOAL_SCHED_MODEL_GPU_SLOTS_H

#include "sched/model/cluster.h"
#include "sched/model/job.h"

#define SHOAL_MAX_SOCKETS 8

typedef struct shoal__slots {
  const shoal_cluster_t *c;
  int stride;                   /* slots per machine in owner[] (max GPUs per machine) */
  shoal_job_t **owner;          /* [nmachines * stride]: the job holding the slot, NULL if free */
} shoal__slots_t;

int  shoal__slots_create(const shoal_cluster_t *c, shoal__slots_t **out);
void shoal__slots_free(shoal__slots_t *sl);

/* Sockets of machine m, and the socket of its slot k. */
static inline int shoal__slots_sockets(const shoal__slots_t *sl, int m) { return sl->c->m[m].sockets; }
static inline int shoal__slots_socket_of(const shoal__slots_t *sl, int m, int k) {
  return k * sl->c->m[m].sockets / sl->c->m[m].cap.gpus;
}
/* The slots [*first, *first + *n) of socket s of machine m. */
void shoal__slots_socket_range(const shoal__slots_t *sl, int m, int s, int *first, int *n);
static inline shoal_job_t *shoal__slots_owner(const shoal__slots_t *sl, int m, int k) {
  return sl->owner[(size_t)m * sl->stride + k];
}
/* Free slots of socket s of machine m. */
int shoal__slots_free_in(const shoal__slots_t *sl, int m, int s);

/* j's allocation changes from `old` to p[0..n-1] (normalized: sorted by
 * machine, no repeats). want, if not NULL, holds per entry i the workers to put on
 * each socket (want[i * SHOAL_MAX_SOCKETS + s]); workers it does not place go to
 * the lowest free slots. Called by the scheduler context after the resources
 * were taken, so every worker finds a slot. */
void shoal__slots_assign(shoal__slots_t *sl, shoal_job_t *j, const shoal_alloc_t *old, const shoal_place_t *p, int n,
                         const uint8_t *want);
/* j gives back every slot of allocation a (finished, or preempted). */
void shoal__slots_release(shoal__slots_t *sl, const shoal_job_t *j, const shoal_alloc_t *a);

#endif
