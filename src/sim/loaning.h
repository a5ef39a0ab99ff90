/* Training and inference sharing one simulated GPU cluster (docs/serving.md
 * "Loaning in simulation"): an inference service replays a request trace and
 * needs replicas for a P99 latency SLO; elastic or rigid training jobs take
 * the rest. Time advances in decision intervals; at each boundary the
 * inference side sizes itself (sched/serving's forecast and M/M/c model, a
 * reactive threshold, or a fixed partition) and the training side is
 * allocated over what is left (goodput or FIFO). The requests themselves are
 * then served one by one by the replicas that existed at each instant
 * (FCFS, each taking the service time: a batching server's time per request
 * varies little, and M/M/c's exponential one is the cautious model), so the
 * SLO attainment is measured on the trace's real burstiness, not on the
 * model the policy assumed. */
#ifndef SHOAL_SIM_LOANING_H
#define SHOAL_SIM_LOANING_H

#include <stdint.h>

#include "core/reqtimes.h"
#include "sim/sim.h"

typedef enum shoal_loan_policy {
  SHOAL_LOAN_FAPES = 0, /* forecast -> replicas for the SLO; the rest loaned; goodput allocation, shrink at a boundary */
  SHOAL_LOAN_STATIC,    /* fixed VC_infer of infer_gpus; FIFO rigid training on the rest */
  SHOAL_LOAN_REACTIVE,  /* replicas by utilization thresholds; the rest to FIFO rigid training, killed on reclaim */
  SHOAL_LOAN_POLLUX,    /* fixed VC_infer; goodput allocation on the rest (no loaning) */
} shoal_loan_policy_t;
/* "fapes, static, reactive, pollux"; the index of a name, -1 if unknown */
const char *shoal__loan_policy_names(void);
int shoal__loan_policy_find(const char *name);

typedef struct shoal_loan_config {
  int policy;              /* shoal_loan_policy_t */
  const char *predictor;   /* fapes: off, ewma, holt, oracle (sched/serving/forecast.c) */
  double alpha, z;         /* the predictor's smoothing weight and headroom (standard deviations) */
  int gpus;                /* the cluster */
  int infer_gpus;          /* VC_infer of static and pollux; 0: the replicas the busiest interval needs */
  double interval_s;       /* decision interval (and the SLO's minute when 60) */
  int stable_n;            /* fapes: GPUs beyond the most replicas of the last stable_n intervals may start a
                            * queued job; the rest (loaned, likely reclaimed) only grow running ones */
  double base_s;           /* fapes: its forecast is of each interval's busiest window of base_s (0: the interval,
                            * its mean rate); bursts above it are the on-demand reclaims' */
  double burst_s;          /* the rate an interval is sized for: its busiest window of burst_s */
  double check_s;          /* fapes: how often the last requests are checked for an on-demand reclaim */
  double hold_s;           /* fapes: replicas above the need for this long go back to training; 0: the on-demand
                            * need is the M/M/c replicas of the last check's rate, held to the interval's end */
  double service_s;        /* one request on one replica (the policies' model takes it as the mean of an exponential) */
  int spare;               /* fapes: replicas kept ready beyond the need (served from while a reclaim runs) */
  double slo_s, slo_q;     /* the latency SLO: quantile slo_q (0.99) at most slo_s */
  double replica_start_s;  /* a free GPU becomes a serving replica */
  double reclaim_s;        /* a loaned GPU becomes a serving replica: shrink at an iteration boundary + start */
  double resize_s;         /* an elastic job's pause when its worker count changes */
  double restart_s;        /* a stopped job's pause when it runs again (kill-restart from a checkpoint) */
  double react_hi, react_lo; /* reactive: replica utilization that adds / removes replicas */
  int fifo_strict;         /* static, reactive (FIFO training): no job passes a waiting one; 0: every waiting job that
                            * fits starts (backfill, as the live fifo policy) */
  int reactive_goodput;    /* reactive: train by the goodput allocation (as the live reactive, elastic jobs) instead of
                            * rigid FIFO; a reclaim then shrinks a job at an iteration boundary */
  int partitions;          /* fapes, reactive: queued jobs start only on the GPUs outside VC_infer (infer_gpus); a loaned
                            * GPU only grows a running job (the live controller's Slurm partitions) */
  double startup_s;        /* a job's first run: its process start and data read, before it trains */
  const struct shoal_speed *speed; /* measured throughput(n) of each job's model (a table: sched/model/speed.h); the
                            * jobs' work is the trace's (worker-steps) and each worker keeps its tuned batch. NULL:
                            * the built-in goodput models */
  double critical_s;       /* fapes: the job that would end last even alone at its best size, once it has spent this
                            * long below its requested GPUs, gets them (its best size if fewer) before any speedup
                            * is weighed, and a reclaim takes from it last; negative: off */
  double horizon_s;        /* stop here (unfinished jobs are counted) */
  uint64_t seed;
} shoal_loan_config_t;
void shoal__loan_config_default(shoal_loan_config_t *c);

typedef struct shoal_loan_point {
  double t, rate, peak;    /* interval start, its request rate, the rate of its busiest burst_s window */
  int replicas;            /* serving replicas (the most in the interval) */
  double loaned;           /* GPUs of VC_infer (infer_gpus) running training, mean over the interval */
  double train_avg, queued_avg; /* GPUs held by training; jobs arrived and holding none (means) */
  double speedup;          /* the training jobs' summed speedup (goodput over their goodput on one GPU) */
  double p99;              /* measured P99 latency of the requests arriving in the interval (0: none) */
} shoal_loan_point_t;

typedef struct shoal_loan_result {
  long jobs, finished;
  double *jct;             /* [finished], sorted */
  double jct_avg, jct_p50, jct_p95;
  long requests, intervals, intervals_ok; /* intervals with requests, and those whose P99 held the SLO */
  long reclaims;           /* GPUs taken back from training for inference */
  long resizes, restarts;  /* training jobs' pauses */
  double loaned_gpu_s, infer_gpu_s, train_gpu_s;
  double speedup_avg;      /* mean summed speedup over [0, t_end] */
  int infer_gpus;          /* VC_infer as run */
  double t_end;            /* last completion, or the horizon */
  double t_floor;          /* no policy ends before this: the latest of each job's arrival plus its run alone on
                            * its best worker count (at most nmax) and batch, without a pause */
  long floor_job;          /* the job that sets t_floor (its index in the workload) */
  shoal_loan_point_t *tl;
  int ntl;
} shoal_loan_result_t;

/* Run one policy: training jobs from w (arrival, gpus, duration: the run time on `gpus` GPUs at the tuned
 * batch), requests from `period` (arrivals in [0, period_s), replayed again and again). */
int shoal__loan_sim(const shoal_workload_t *w, const shoal__reqtimes_t *period, double period_s,
                    const shoal_loan_config_t *c, shoal_loan_result_t *r);
void shoal__loan_result_free(shoal_loan_result_t *r);

#endif
