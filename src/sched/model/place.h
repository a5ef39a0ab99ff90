/* Placement primitives (spec cluster-simulation.md §5.1). They read the
 * cluster's free resources and write a placement; they never change the
 * cluster (shoal_sched_assign does). Each returns the number of entries
 * written to out (machines used), or 0 when the request does not fit now.
 * `cap` must be >= the number of machines the placement may touch
 * (nmachines is always enough). Worker CPU/memory demands are honoured:
 * a machine takes at most as many workers as its free GPUs, CPUs and memory
 * allow. */
#ifndef SHOAL_SCHED_MODEL_PLACE_H
#define SHOAL_SCHED_MODEL_PLACE_H

#include "core/rng.h"
#include "sched/model/cluster.h"
#include "sched/model/job.h"

/* Workers job j can still put on machine m (free GPUs, CPUs, memory). */
int shoal__place_room(const shoal_cluster_t *c, const shoal_job_t *j, int m);

/* consolidated: one machine with >= n free (best fit: fewest free that fits,
 * ties lowest id); else one rack (the rack needing the fewest machines when
 * taking its largest-free machines first; ties lowest rack id); else
 * cluster-wide, largest free first (ties lowest id). */
int shoal__place_consolidated(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_place_t *out, int cap);

/* strict: one machine if n <= machine size, else ceil(n/size) whole idle machines. */
int shoal__place_strict(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_place_t *out, int cap);

/* spread: seeded random free GPUs (each worker on a uniformly chosen machine with room). */
int shoal__place_spread(const shoal_cluster_t *c, const shoal_job_t *j, int workers, shoal_rng_t *rng,
                        shoal_place_t *out, int cap);

/* PS jobs: `workers` workers consolidated as above, then `ps` PSs spread
 * evenly (round robin) over the machines the workers use, overflowing to the
 * machines with the most free CPU. 0 if it does not fit. */
int shoal__place_ps_job(const shoal_cluster_t *c, const shoal_job_t *j, int workers, int ps, shoal_place_t *out, int cap);

/* Sort by machine, merge repeated machines, drop empty entries; returns the new count. */
int shoal__place_normalize(shoal_place_t *p, int n);
/* The servers of a normalized placement that sit on machines without the job's workers, moved one by one to its
 * worker machine with the fewest servers (ties: the lowest id); the machines left empty dropped. Returns the new
 * count (n unchanged when no entry has workers). For managers that run a job's servers only beside its workers. */
int shoal__place_ps_with_workers(shoal_place_t *p, int n);
/* 1 if two normalized placements are equal. */
int shoal__place_equal(const shoal_place_t *a, int na, const shoal_place_t *b, int nb);

#endif
