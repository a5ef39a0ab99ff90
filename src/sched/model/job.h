/* A training job as schedulers see it: a static description (from a trace or
 * a generator) and a runtime part kept up to date by whoever runs the jobs
 * (the simulator's engine, or the live controller beside Slurm).
 *
 * Allocation: per machine, a number of workers (1 GPU each, plus the job's
 * per-worker CPU/memory) and of parameter servers (no GPU, the job's per-PS
 * CPU/memory). All-reduce jobs have no PSs; their workers are their GPUs. */
#ifndef SHOAL_SCHED_MODEL_JOB_H
#define SHOAL_SCHED_MODEL_JOB_H

#include <stdint.h>

#include "sched/model/cluster.h"

typedef enum shoal_arch {
  SHOAL_ARCH_ALLREDUCE = 0,    /* ring all-reduce gang, one worker per GPU */
  SHOAL_ARCH_PS = 1            /* parameter servers + workers */
} shoal_arch_t;

typedef enum shoal_job_state {
  SHOAL_JOB_FUTURE = 0,        /* not arrived yet */
  SHOAL_JOB_WAIT,              /* arrived, holds nothing */
  SHOAL_JOB_RUN,               /* holds resources and makes progress */
  SHOAL_JOB_RESTART,           /* holds resources, pays the restart cost, no progress */
  SHOAL_JOB_DONE
} shoal_job_state_t;

/* Workers and PSs of one job on one machine. */
typedef struct shoal_place {
  int32_t machine;
  int16_t workers;
  int16_t ps;
} shoal_place_t;

typedef struct shoal_alloc {
  int n;                       /* entries used (machines touched) */
  int workers, ps;             /* totals */
  shoal_place_t *p;            /* [n], sorted by machine, no zero entries */
  int cap;                     /* entries p has room for (0: p is not owned, or NULL) */
} shoal_alloc_t;

typedef struct shoal_job {
  /* ---- description (never changed once the run starts) ---- */
  int32_t id;                  /* dense, 0..njobs-1, in arrival order (ties: trace row) */
  int32_t vc;                  /* tenant (Philly virtual cluster), 0.. */
  double arrival;              /* s since the first arrival */
  int32_t gpus;                /* requested workers (= GPUs); rigid policies give exactly this */
  int32_t min_workers;         /* elastic range for policies that resize (<= gpus <= max) */
  int32_t max_workers;
  int32_t ps;                  /* requested PSs (PS jobs; 0 for all-reduce) */
  int8_t arch;                 /* shoal_arch_t */
  int8_t sync;                 /* 1: synchronous (BSP), 0: asynchronous (PS jobs) */
  int16_t model;               /* index into the speed model's model table */
  double work;                 /* iterations (steps) to run */
  double duration;             /* trace run time at `gpus` consolidated (s); 0 if unknown */
  shoal_res_t worker_demand;   /* per worker: gpus = 1, cpus, mem_gb */
  shoal_res_t ps_demand;       /* per PS: gpus = 0, cpus, mem_gb */
  int64_t row;                 /* trace row (1-based line), for messages */

  /* ---- runtime (written by the engine; read by policies) ---- */
  int8_t state;                /* shoal_job_state_t */
  shoal_alloc_t alloc;         /* current allocation (n = 0 when WAIT) */
  double work_done;            /* as of t_last; use shoal_sched_work_done() for "now" */
  double rate;                 /* steps/s now (0 in WAIT and RESTART) */
  double t_last;               /* time work_done and the service counters refer to */
  double first_start;          /* -1 until first allocated */
  double finish;               /* -1 until done */
  double run_s;                /* wall seconds spent in RUN */
  double restart_s;            /* wall seconds spent in RESTART */
  double gpu_s;                /* GPU-seconds held (RUN + RESTART) */
  double restart_until;        /* end of the current RESTART */
  int32_t n_preempt;           /* RUN/RESTART -> WAIT transitions */
  int32_t n_realloc;           /* restarts paid (resume, resize, migrate) */
  int32_t max_machines;        /* most machines spanned at once */
  uint32_t version;            /* bumped at every change (stale events) */
  double iso_time;             /* Themis ideal time accumulator (s) */
  int32_t active_index;        /* position in the scheduler's active array, -1 if not active */
  int32_t touched;             /* engine: index+1 in the changed list, 0 if untouched */

  /* ---- scratch owned by the running policy (never touched by the engine) ---- */
  double pkey[4];
  int64_t pint[6];
} shoal_job_t;

/* Remaining work as of time t (lazy: work_done + rate*(t - t_last)). */
static inline double shoal_job_remaining(const shoal_job_t *j, double t) {
  double done = j->work_done;
  if (j->state == SHOAL_JOB_RUN && t > j->t_last) done += j->rate * (t - j->t_last);
  double r = j->work - done;
  return r > 0 ? r : 0;
}

/* Resources of `workers` workers and `ps` PSs of job j. */
static inline shoal_res_t shoal_job_demand(const shoal_job_t *j, int workers, int ps) {
  shoal_res_t r;
  r.gpus = workers * j->worker_demand.gpus + ps * j->ps_demand.gpus;
  r.cpus = workers * j->worker_demand.cpus + ps * j->ps_demand.cpus;
  r.mem_gb = workers * j->worker_demand.mem_gb + ps * j->ps_demand.mem_gb;
  return r;
}

#endif
