/* Interference where jobs actually sit: the interference model
 * (interference.h) applied to the GPU slot map (gpu_slots.h).
 *
 * A worker of job j on socket s of machine m suffers
 *   1 + sum over the other jobs' workers on socket s of g_socket(j, k)
 *     + [j spans machines] sum over the other jobs on m that span machines of g_nic(j, k)
 * (a worker shares the socket's cache and memory with each co-runner worker, and
 * the machine's NIC with each co-runner that sends over the network), and a job
 * runs at the pace of its slowest worker (synchronous training): its slowdown
 * is the largest of its workers'. CPU cores are reserved per worker, so the
 * core level never applies; the rack uplink is the speed model's (the engine's
 * share of the uplink). Jobs count while they hold their slots (running or
 * restarting). */
#ifndef SHOAL_SCHED_MODEL_COLOCATION_H
#define SHOAL_SCHED_MODEL_COLOCATION_H

#include "sched/model/interference.h"
#include "sched/model/gpu_slots.h"
#include "sched/model/speed.h"

typedef struct shoal__colo {
  const shoal_interference_t *im;
  int nmodels;
  int *cls;                     /* per speed-model model: its interference class, -1 none */
} shoal__colo_t;

int  shoal__colo_init(shoal__colo_t *x, const shoal_interference_t *im, const shoal_speed_t *sp);
void shoal__colo_fini(shoal__colo_t *x);

static inline int shoal__colo_class(const shoal__colo_t *x, const shoal_job_t *j) {
  return j->model >= 0 && j->model < x->nmodels ? x->cls[j->model] : -1;
}

/* j's slowdown (>= 1) where it holds slots now. */
double shoal__colo_slowdown(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j);

/* What a worker of j placed on socket s of machine m would suffer from the
 * jobs there now (the socket's g sum), and what it would add to them (the sum
 * of g_socket(k, j) over the other jobs with workers on the socket). */
void shoal__colo_socket(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m, int s, double *own,
                        double *imposed);
/* Put w workers of j on machine m's sockets, each on the socket whose predicted interference (suffered +
 * caused) is lowest among those with a free slot left (ties: lowest socket); want[SHOAL_MAX_SOCKETS]
 * receives the counts. Returns the summed interference, or -1 if the sockets lack free slots. */
double shoal__colo_pick_sockets(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m, int w,
                                uint8_t *want);
/* The NIC term a worker of j on machine m would suffer if j spans machines. */
double shoal__colo_nic(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m);
/* What j spanning machines would add to the NIC terms of the jobs on m that span machines (the sum of
 * g_nic(k, j) over them). */
double shoal__colo_nic_imposed(const shoal__colo_t *x, const shoal__slots_t *sl, const shoal_job_t *j, int m);

#endif
