/* Training and inference in one cluster: the inference side's request-rate
 * forecast (forecast.c), the replicas a P99 latency SLO needs at a rate
 * (slo.c), and the training side's goodput-aware allocation that takes
 * loaned inference servers and gives them back by shrinking the job that
 * loses least (loan.c). The simulator and the live controller both use
 * these; nothing here knows a clock or a cluster manager. */
#ifndef SHOAL_SCHED_SERVING_H
#define SHOAL_SCHED_SERVING_H

#include <stddef.h>

/* ---------------- forecast.c: the next interval's request rate ---------------- */
typedef struct shoal__forecast shoal__forecast_t;
/* name: "off" (the last interval's rate: react, do not predict), "ewma" (exponentially weighted mean,
 * weight alpha on the newest), "holt" (Holt's level and trend, both smoothed by alpha), "oracle" (the true
 * next rate, given to shoal__forecast_next: for ablations only). Every forecast adds z times the standard
 * deviation of its own past errors (tracked with weight alpha) as headroom. SHOAL_ERR_INVALID naming the
 * predictors for an unknown name or alpha outside (0, 1]. */
int shoal__forecast_create(const char *name, double alpha, double z, shoal__forecast_t **out);
/* The interval that just ended had `rate` requests per second. */
void shoal__forecast_observe(shoal__forecast_t *f, double rate);
/* The rate to provision for in the next interval (>= 0); true_next is read by "oracle" only. */
double shoal__forecast_next(const shoal__forecast_t *f, double true_next);
const char *shoal__forecast_name(const shoal__forecast_t *f);
void shoal__forecast_free(shoal__forecast_t *f);
/* "off, ewma, holt, oracle" */
const char *shoal__forecast_names(void);

/* ---------------- slo.c: replicas for a P99 latency SLO ---------------- */
/* Each replica serves one request at a time in service_s (measured mean); arrivals are Poisson at `rate`
 * per second, queued for the first free replica (M/M/c). The quantile q (0.99) of the response time with c
 * replicas: service_s plus the waiting time's quantile (Erlang C); infinity when c x 1/service_s <= rate. */
double shoal__slo_latency_quantile(double rate, int replicas, double service_s, double q);
/* The fewest replicas (>= 1, <= max) whose quantile q is at most slo_s; max + 1 when even max are not
 * enough (service_s >= slo_s included). */
int shoal__slo_replicas(double rate, double service_s, double slo_s, double q, int max);

/* The replicas that start the last of `waiting` queued requests within the SLO's slack (slo_s - service_s)
 * while requests keep arriving at `rate`: ceil(service_s x (waiting / slack + rate)), at least 1; max + 1
 * when more than max are needed or service_s >= slo_s. What a controller that sees the router's queue
 * reclaims for at once, without waiting for a forecast. */
int shoal__slo_replicas_waiting(double waiting, double rate, double service_s, double slo_s, int max);

/* Reactive threshold autoscaling (the baseline without a forecast or an SLO model): the `have` replicas'
 * utilization over the last interval, rate x service_s / have, kept while within [lo, hi]; outside it, the
 * replicas that bring it to the middle, ceil(rate x service_s / ((lo + hi) / 2)), in 1..max. */
int shoal__reactive_replicas(double rate, double service_s, int have, double lo, double hi, int max);

/* ---------------- loan.c: goodput of a training job and the allocation ---------------- */
/* A training job's measured model (Pollux's): one iteration of global batch b on n workers takes
 * t0 + t_sample x b / n + t_sync x log2(n) seconds; the gradient noise scale phi (reported by the training
 * runtime) makes one sample of batch b worth E(b) = (phi + b0) / (phi + b) samples of batch b0. Goodput is
 * throughput x E: b0-samples of progress per second. */
typedef struct shoal__goodput_job {
  double t0, t_sample, t_sync, phi;
  int b0, bmax;  /* the batch the job was tuned at, the largest it allows */
  int nmax;      /* most workers it can use */
  int n_req;     /* the workers it asks for (rigid allocation) */
  double left_s; /* its work left, in seconds on one worker at b0 (0: unknown): which one-worker job a reclaim stops */
  int n_min;     /* the goodput allocation's floor: it gets this many workers before any speedup is weighed (a
                  * job kept below its request too long: n_req), taken from the others' least speedup; 0: none */
  const double *tput; /* measured instead of modelled (NULL: the model above): tput[n - 1] worker-steps per second
                       * on n workers (n = 1..ntput; more workers run as ntput), each worker at batch b0, so the
                       * global batch is n x b0 and t0, t_sample, t_sync and bmax are not used */
  int ntput;
} shoal__goodput_job_t;

/* The goodput of n workers at global batch b (0 when either is 0; with a measured tput, the batch is n x b0). */
double shoal__goodput_at(const shoal__goodput_job_t *j, int n, int b);
/* The best goodput on n workers (0 for n == 0) and the batch (a power-of-two multiple of b0, at most bmax,
 * at least n; bmax when n > bmax) that gives it; *batch may be NULL. */
double shoal__goodput(const shoal__goodput_job_t *j, int n, int *batch);
/* The learning rate for batch b from the one tuned at b0 (AdaScale's gain: b x E(b) / b0). */
double shoal__goodput_lr(const shoal__goodput_job_t *j, int b, double lr0);

/* Allocations of `capacity` workers over jobs[0..nj) in place, from the current n[] (moves are resizes):
 * - "goodput": while n sums above capacity, shrink the job whose speedup (goodput over its goodput on one
 *   worker) drops least; then raise each job below its n_min to it (in index order: free workers first, then
 *   one at a time from the job that loses least, keeping one); then grow, one worker at a time, the job whose
 *   speedup rises most; then move one worker at a time from the running job that loses least (keeping one)
 *   to the job that gains most (a queued one, n 0, gains 1) while the gain is larger. No shrink or move takes
 *   a job below its n_min unless the floors alone exceed the capacity.
 * - "fifo": rigid: jobs in index order (arrival) run with n_req or wait, and every waiting job that fits the
 *   free workers starts (backfill, as the live controller's fifo policy); with strict, no job passes a waiting
 *   one (head-of-line blocking); when n sums above capacity the latest-arrived running jobs are stopped (n 0)
 *   first.
 * batch[] gets each job's batch (b0 for fifo). Returns the number of jobs whose n changed. */
int shoal__alloc_goodput(const shoal__goodput_job_t *jobs, int nj, int capacity, int *n, int *batch);
int shoal__alloc_fifo(const shoal__goodput_job_t *jobs, int nj, int capacity, int strict, int *n, int *batch);
/* Loaning's allocation of `capacity` workers, of which only `stable` (the servers expected to stay with
 * training) may start a queued job: "goodput" over `stable`, then the loaned rest grows only the running jobs
 * (shoal__loan_grow), so a reclaim shrinks a running job instead of stopping one it had started. */
int shoal__alloc_loaning(const shoal__goodput_job_t *jobs, int nj, int stable, int capacity, int *n, int *batch);
/* A reclaim of `count` workers: each from the job whose speedup drops least among those keeping one worker,
 * and only when none is left, by stopping a one-worker job (which pays a restart): the one with the most work
 * left (left_s; ties: the first), whose delay is the smallest part of its run, as shortest-remaining-first
 * would choose. Returns the workers taken. */
int shoal__loan_reclaim(const shoal__goodput_job_t *jobs, int nj, int count, int *n, int *batch);
/* Give up to `extra` more workers, one at a time, to the job whose speedup rises most (no other job changes;
 * with running_only, no queued job starts): replicas handed back to training. batch[] gets each job's batch.
 * Returns the workers given. */
int shoal__loan_grow(const shoal__goodput_job_t *jobs, int nj, int extra, int running_only, int *n, int *batch);
/* The job among jobs[0..nj) whose speedup drops least when it loses one worker (n > min_n), -1 if none:
 * the one a reclaim shrinks. */
int shoal__loan_victim(const shoal__goodput_job_t *jobs, int nj, const int *n, int min_n);

/* The same two choices over any speedup model: speedup(arg, i, n) is job i's speed on n workers over its speed
 * on one (the live controller's comes from its speed model). Workers move in steps of step[i] (a host's GPUs;
 * NULL: 1). The victim: the job with n[i] - step[i] >= min_n whose speedup drops least, -1 if none. The grower:
 * the job with n[i] + step[i] <= nmax[i] (NULL: no bound), other than `except`, whose speedup rises most per
 * worker (rise > 0), -1 if none; *gain (may be NULL) gets that rise. shoal__loan_victim and the goodput
 * allocation's growth are these with the goodput model. */
typedef double (*shoal__speedup_fn)(void *arg, int i, int n);
int shoal__loan_pick_victim(int nj, const int *n, const int *step, int min_n, shoal__speedup_fn speedup, void *arg);
int shoal__loan_pick_grower(int nj, const int *n, const int *step, const int *nmax, int except,
                            shoal__speedup_fn speedup, void *arg, double *gain);

#endif
