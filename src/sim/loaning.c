/* Training beside inference on one simulated cluster (loaning.h). The
 * policy decisions are sched/serving's (forecast, M/M/c replicas, goodput and
 * FIFO allocation, reclaim victim); this file keeps the clock, the jobs'
 * progress and the replicas' history, and serves the requests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "sched/model/speed.h"
#include "sched/serving/serving.h"
#include "sim/loaning.h"

static const char *const policy_names[] = {"fapes", "static", "reactive", "pollux"};
const char *shoal__loan_policy_names(void) { return "fapes, static, reactive, pollux"; }
int shoal__loan_policy_find(const char *name) {
  for (int i = 0; i < 4; i++)
    if (name && !strcmp(name, policy_names[i])) return i;
  return -1;
}

/* Training models the jobs are drawn from (by a hash of the seed and the job): one GPU-second costs and a
 * gradient noise scale of the sizes seen for an image classifier, a language model and a small MLP. */
static const shoal__goodput_job_t profiles[] = {
    {.t0 = 0.02, .t_sample = 0.004, .t_sync = 0.03, .phi = 2000, .b0 = 128, .bmax = 4096},
    {.t0 = 0.05, .t_sample = 0.02, .t_sync = 0.06, .phi = 400, .b0 = 32, .bmax = 1024},
    {.t0 = 0.01, .t_sample = 0.0005, .t_sync = 0.02, .phi = 200, .b0 = 256, .bmax = 4096},
};
#define NPROFILES (sizeof profiles / sizeof profiles[0])

void shoal__loan_config_default(shoal_loan_config_t *c) {
  memset(c, 0, sizeof *c);
  c->policy = SHOAL_LOAN_FAPES;
  c->predictor = "holt";
  c->alpha = 0.5, c->z = 1;
  c->gpus = 128;
  c->interval_s = 60, c->burst_s = 10, c->check_s = 1, c->hold_s = 2, c->base_s = 0, c->stable_n = 0;
  c->service_s = 1, c->slo_s = 4, c->slo_q = 0.99;
  c->replica_start_s = 1, c->reclaim_s = 0.2, c->resize_s = 0.3, c->restart_s = 30; /* shrink: FE1 measured */
  c->react_hi = 0.8, c->react_lo = 0.4;
  c->critical_s = 1800; /* chosen on a held-out trace window (docs/serving.md) */
  c->horizon_s = 30 * 86400.0;
  c->seed = 1;
}

typedef struct tjob {
  shoal__goodput_job_t g;
  double arrival, work, done, finish, hold; /* hold: seconds of pause still to pay */
  double best;                              /* its goodput at its best worker count (best_n, at most nmax) */
  int best_n;
  double below_s;                           /* seconds it spent arrived and unfinished below its requested GPUs */
  int n, batch, ran;
  double *tput;                             /* its measured throughput(n) (config speed), or NULL */
} tjob_t;

typedef struct change {
  double t;
  int delta;
} change_t;

typedef struct run {
  const shoal_loan_config_t *c;
  shoal_loan_result_t *r;
  tjob_t *jobs;
  int nj, next, nact, *act;        /* act: active jobs (arrived, unfinished) in arrival order */
  shoal__goodput_job_t *gv;        /* the allocation's view of the active jobs */
  int *nv, *bv;
  int replicas, vc_infer;
  shoal__forecast_t *fc;
  change_t *ch;                    /* replica changes in time order */
  int nch, capch;
  const shoal__reqtimes_t *period;
  double period_s;
  double backlog;                  /* requests waiting (fluid estimate, fapes' checks) */
  int peak_replicas;               /* fapes: the most replicas of the last stable_n intervals */
  int *recent;                     /* [stable_n] those intervals' most replicas, a ring */
  size_t cursor, cursor2;          /* the next request to count into an interval, into a check */
} run_t;

static double req_time(const run_t *u, size_t i) {
  size_t n = u->period->n;
  return u->period->t[i % n] + (double)(i / n) * u->period_s;
}

/* Requests per second in [t, t + interval) (*mean), in its busiest window of base_s (*base: what fapes'
 * forecast is fed) and in its busiest window of burst_s (the return value: what the fixed partitions are
 * sized for, since a burst within the interval is what breaks its P99). The intervals are asked for in order. */
static double busiest(const run_t *u, size_t from, size_t to, double t, double w) {
  size_t in_w = 0, most = 0;
  double w_end = t + w;
  for (size_t i = from; i < to; i++) {
    double a = req_time(u, i);
    while (a >= w_end) most = in_w > most ? in_w : most, in_w = 0, w_end += w;
    in_w++;
  }
  most = in_w > most ? in_w : most;
  return (double)most / w;
}

static double next_rate(run_t *u, double t, double *mean, double *base) {
  const shoal_loan_config_t *c = u->c;
  size_t from = u->cursor;
  double end = t + c->interval_s;
  while (u->period->n && req_time(u, u->cursor) < end) u->cursor++;
  if (mean) *mean = (double)(u->cursor - from) / c->interval_s;
  if (base) *base = busiest(u, from, u->cursor, t, c->base_s > 0 ? c->base_s : c->interval_s);
  return busiest(u, from, u->cursor, t, c->burst_s);
}

static int add_change(run_t *u, double t, int delta) {
  if (!delta) return 0;
  if (u->nch == u->capch) {
    int cap = u->capch ? 2 * u->capch : 1024;
    change_t *p = realloc(u->ch, (size_t)cap * sizeof *p);
    if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
    u->ch = p, u->capch = cap;
  }
  u->ch[u->nch++] = (change_t){t, delta};
  return 0;
}

static int replicas_for(const run_t *u, double rate) {
  const shoal_loan_config_t *c = u->c;
  int need = shoal__slo_replicas(rate, c->service_s, c->slo_s, c->slo_q, c->gpus - 1);
  return need > c->gpus - 1 ? c->gpus - 1 : need;
}

/* fapes' need plus its spare replicas, at most the GPUs but one */
static int with_spare(const run_t *u, int need) {
  int m = u->c->gpus - 1, w = need + u->c->spare;
  return w > m ? m : w;
}

/* The replicas the inference side wants for the interval starting now. */
static int infer_need(run_t *u, double rate_prev, double rate_now, int first) {
  const shoal_loan_config_t *c = u->c;
  if (c->policy == SHOAL_LOAN_STATIC || c->policy == SHOAL_LOAN_POLLUX) return u->vc_infer;
  if (first) /* every policy starts provisioned for the first interval */
    return c->policy == SHOAL_LOAN_FAPES ? with_spare(u, replicas_for(u, rate_now)) : replicas_for(u, rate_now);
  if (c->policy == SHOAL_LOAN_FAPES) {
    shoal__forecast_observe(u->fc, rate_prev);
    return with_spare(u, replicas_for(u, shoal__forecast_next(u->fc, rate_now)));
  }
  return shoal__reactive_replicas(rate_prev, c->service_s, u->replicas, c->react_lo, c->react_hi, c->gpus - 1);
}

static int train_held(const run_t *u) {
  int s = 0;
  for (int i = 0; i < u->nact; i++) s += u->jobs[u->act[i]].n;
  return s;
}

/* Move to `want` replicas at t: fewer leave at once; more come from free GPUs (ready after a start) and
 * then from training (ready after a reclaim: a shrink at an iteration boundary, or a kill for rigid jobs). */
static int set_replicas(run_t *u, double t, int want, int first) {
  const shoal_loan_config_t *c = u->c;
  int d = want - u->replicas, rc = 0;
  if (first) rc = add_change(u, t, want);
  else if (d < 0) rc = add_change(u, t, d);
  else if (d > 0) {
    int free_now = c->gpus - u->replicas - train_held(u);
    int from_free = d < free_now ? d : free_now, from_loan = d - from_free;
    double reclaim = c->policy == SHOAL_LOAN_REACTIVE && !c->reactive_goodput ? c->replica_start_s : c->reclaim_s;
    rc = add_change(u, t + c->replica_start_s, from_free);
    if (!rc) rc = add_change(u, t + reclaim, from_loan);
    u->r->reclaims += from_loan;
  }
  u->replicas = want;
  return rc;
}

/* Jobs that arrived by t join the active list; finished ones leave it. */
static void update_active(run_t *u, double t) {
  int k = 0;
  for (int i = 0; i < u->nact; i++)
    if (u->jobs[u->act[i]].finish < 0) u->act[k++] = u->act[i];
  u->nact = k;
  while (u->next < u->nj && u->jobs[u->next].arrival <= t) u->act[u->nact++] = u->next++;
}

/* Allocate `capacity` GPUs over the active jobs; a job whose count changes pays its pause. ALLOC_SHRINK: an
 * on-demand reclaim, which only shrinks the jobs that lose least; ALLOC_GROW: replicas given back, which only
 * grow the jobs that gain most (no other job is disturbed by either). */
enum { ALLOC_FULL, ALLOC_SHRINK, ALLOC_GROW };
static void allocate(run_t *u, int capacity, int mode) {
  const shoal_loan_config_t *c = u->c;
  int goodput = c->policy == SHOAL_LOAN_FAPES || c->policy == SHOAL_LOAN_POLLUX ||
                (c->policy == SHOAL_LOAN_REACTIVE && c->reactive_goodput), total = 0;
  for (int i = 0; i < u->nact; i++) {
    tjob_t *j = &u->jobs[u->act[i]];
    u->gv[i] = j->g, u->nv[i] = j->n, total += j->n;
    u->gv[i].left_s = (j->work - j->done) / shoal__goodput_at(&j->g, 1, j->g.b0);
    u->gv[i].n_min = 0;
  }
  /* fapes: the job that would end last even alone at its best size from now sets the run's end (and goodput over
   * the run is its inverse); the marginal-speedup choice alone keeps such a long job, if it scales worse than the
   * others, queued or on one GPU for as long as the early hours are contended. Once it has spent critical_s below
   * its request, it gets its request (or its best size if smaller) before any speedup is weighed, and a reclaim
   * takes from it last. */
  if (c->policy == SHOAL_LOAN_FAPES && c->critical_s >= 0 && mode != ALLOC_GROW) {
    int crit = -1;
    double latest = 0;
    for (int i = 0; i < u->nact; i++) {
      const tjob_t *j = &u->jobs[u->act[i]];
      double left = j->finish < 0 && j->best > 0 ? (j->work - j->done) / j->best : 0;
      if (left > latest) latest = left, crit = i;
    }
    const tjob_t *j = crit >= 0 ? &u->jobs[u->act[crit]] : NULL;
    if (j && j->below_s >= c->critical_s) u->gv[crit].n_min = j->best_n < j->g.n_req ? j->best_n : j->g.n_req;
  }
  if (mode == ALLOC_SHRINK) {
    shoal__loan_reclaim(u->gv, u->nact, total - capacity, u->nv, u->bv);
  } else if (mode == ALLOC_GROW) {
    shoal__loan_grow(u->gv, u->nact, capacity - total, 1, u->nv, u->bv); /* loaned: running jobs only */
  } else if (c->partitions && goodput && c->policy != SHOAL_LOAN_POLLUX) { /* queued jobs start on VC_train only */
    shoal__alloc_loaning(u->gv, u->nact, c->gpus - u->vc_infer, capacity, u->nv, u->bv);
  } else if (c->policy == SHOAL_LOAN_FAPES) {
    shoal__alloc_loaning(u->gv, u->nact, c->gpus - u->peak_replicas, capacity, u->nv, u->bv);
  } else if (goodput) {
    shoal__alloc_goodput(u->gv, u->nact, capacity, u->nv, u->bv);
  } else {
    shoal__alloc_fifo(u->gv, u->nact, capacity, c->fifo_strict, u->nv, u->bv);
  }
  for (int i = 0; i < u->nact; i++) {
    tjob_t *j = &u->jobs[u->act[i]];
    if (u->nv[i] != j->n) {
      double pause = 0;
      if (j->n > 0 && u->nv[i] > 0) pause = c->resize_s, u->r->resizes++;
      else if (j->n == 0 && j->ran) pause = c->restart_s, u->r->restarts++;
      else if (j->n == 0) pause = c->startup_s;
      j->hold = u->nv[i] > 0 ? pause : 0;
    }
    j->n = u->nv[i], j->batch = u->bv[i];
    if (j->n > 0) j->ran = 1;
  }
}

/* Run the training jobs over [t, t + dt); the point gets its share of their GPUs, queue and summed speedup
 * (weights dt / interval). */
static void advance(run_t *u, double t, double dt, shoal_loan_point_t *pt) {
  double w = dt / u->c->interval_s;
  for (int i = 0; i < u->nact; i++) {
    tjob_t *j = &u->jobs[u->act[i]];
    if (j->finish >= 0) continue;
    if (j->n < j->g.n_req) j->below_s += dt;
    if (j->n == 0) {
      pt->queued_avg += w;
      continue;
    }
    pt->train_avg += j->n * w;
    double rate = shoal__goodput_at(&j->g, j->n, j->batch);
    double pause = j->hold < dt ? j->hold : dt, avail = dt - pause;
    j->hold -= pause;
    if (avail <= 0 || rate <= 0) continue;
    double need = (j->work - j->done) / rate, run_s = need < avail ? need : avail;
    if (need <= avail * (1 + 1e-9)) j->finish = t + pause + need, j->done = j->work; /* summed steps: rounding */
    else j->done += rate * run_s;
    pt->speedup += rate / shoal__goodput_at(&j->g, 1, j->g.b0) * run_s / u->c->interval_s;
  }
}

/* Requests in [t, t + dt) per second, from the second cursor (the on-demand checks, in order). */
static double window_rate(run_t *u, double t, double dt) {
  size_t k = 0;
  while (u->period->n && req_time(u, u->cursor2) < t + dt) u->cursor2++, k++;
  return (double)k / dt;
}

/* ---------------- the requests, served by the replicas of each instant ---------------- */
typedef struct servers {
  double *free_at; /* when each replica is next free */
  int n, cap;
} servers_t;

static int servers_argmin(const servers_t *s) {
  int b = 0;
  for (int i = 1; i < s->n; i++)
    if (s->free_at[i] < s->free_at[b]) b = i;
  return b;
}

/* A replica added at t is free from t; one removed is an idle one if any (it finishes what it holds). */
static void servers_apply(servers_t *s, const change_t *ch) {
  for (int d = 0; d < ch->delta && s->n < s->cap; d++) s->free_at[s->n++] = ch->t;
  for (int d = 0; d < -ch->delta && s->n > 1; d++) s->free_at[servers_argmin(s)] = s->free_at[--s->n];
}

static int cmp_change(const void *a, const void *b) {
  const change_t *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t ? 1 : x->delta - y->delta;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The interval's P99 into its timeline point and the attainment counts. */
static void close_interval(run_t *u, int k, double *lat, size_t n) {
  if (!n || k >= u->r->ntl) return;
  qsort(lat, n, sizeof *lat, cmp_double);
  double p = shoal__quantile(lat, (long)n, u->c->slo_q);
  u->r->tl[k].p99 = p;
  u->r->intervals++;
  u->r->intervals_ok += p <= u->c->slo_s;
}

static int serve_requests(run_t *u, double t_end) {
  const shoal_loan_config_t *c = u->c;
  servers_t s = {.cap = 2 * c->gpus};
  size_t cap = 4096, n = 0;
  double *lat = malloc(cap * sizeof *lat);
  s.free_at = malloc((size_t)s.cap * sizeof *s.free_at);
  if (!lat || !s.free_at) {
    free(lat), free(s.free_at);
    return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
  }
  qsort(u->ch, (size_t)u->nch, sizeof *u->ch, cmp_change);
  int k = 0, e = 0;
  for (size_t i = 0;; i++) {
    double a = req_time(u, i), start = INFINITY;
    if (a >= t_end) break;
    for (int ki = (int)(a / c->interval_s); k < ki; k++) close_interval(u, k, lat, n), n = 0;
    int best = 0;
    for (;;) { /* the replica free first; a change before that start takes effect first */
      while (e < u->nch && u->ch[e].t <= a) servers_apply(&s, &u->ch[e++]);
      best = servers_argmin(&s);
      start = s.n ? fmax(a, s.free_at[best]) : INFINITY;
      if (e < u->nch && u->ch[e].t < start) servers_apply(&s, &u->ch[e++]);
      else break;
    }
    double done = start + c->service_s;
    s.free_at[best] = done;
    if (n == cap) {
      double *p = realloc(lat, 2 * cap * sizeof *p);
      if (!p) {
        free(lat), free(s.free_at);
        return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
      }
      lat = p, cap *= 2;
    }
    lat[n++] = done - a;
    u->r->requests++;
  }
  close_interval(u, k, lat, n);
  free(lat), free(s.free_at);
  return 0;
}

/* ---------------- the run ---------------- */
static int check_config(const shoal_loan_config_t *c, const shoal__reqtimes_t *period, double period_s) {
  if (c->policy < 0 || c->policy > SHOAL_LOAN_POLLUX)
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning policy %d: unknown (%s)", c->policy, shoal__loan_policy_names());
  if (c->gpus < 2) return shoal__seterr(SHOAL_ERR_INVALID, "loaning: %d GPUs: at least 2", c->gpus);
  if (!(c->interval_s > c->reclaim_s && c->interval_s > c->replica_start_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the interval %g s must exceed the reclaim (%g s) and the replica start (%g s)",
                         c->interval_s, c->reclaim_s, c->replica_start_s);
  if (!(c->check_s > 0 && c->check_s <= c->interval_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the check period %g s must be in (0, the interval %g s]", c->check_s,
                         c->interval_s);
  if (c->stable_n < 0 || c->stable_n > 100000)
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the stable window of %d intervals is not in 0..100000", c->stable_n);
  if (!(c->hold_s >= 0)) return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the hold %g s must be >= 0", c->hold_s);
  if (!(c->base_s >= 0 && c->base_s <= c->interval_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: fapes' base window %g s must be in [0, the interval %g s]", c->base_s,
                         c->interval_s);
  if (!(c->burst_s > 0 && c->burst_s <= c->interval_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the burst window %g s must be in (0, the interval %g s]", c->burst_s,
                         c->interval_s);
  if (!(c->service_s > 0 && c->slo_s > c->service_s))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: the SLO %g s must exceed the service time %g s", c->slo_s, c->service_s);
  if (c->spare < 0) return shoal__seterr(SHOAL_ERR_INVALID, "loaning: %d spare replicas: expected 0 or more", c->spare);
  if (!(c->react_lo > 0 && c->react_lo < c->react_hi && c->react_hi <= 1))
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: reactive thresholds %g..%g: need 0 < low < high <= 1", c->react_lo,
                         c->react_hi);
  if (!period->n || !(period_s > 0) || period->t[period->n - 1] >= period_s)
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: no requests in a period of %g s", period_s);
  if (c->infer_gpus >= c->gpus) return shoal__seterr(SHOAL_ERR_INVALID, "loaning: VC_infer of %d GPUs leaves none of %d to training",
                                                    c->infer_gpus, c->gpus);
  return 0;
}

/* VC_infer of the fixed policies: what the busiest interval of a period needs, unless given. */
static int fixed_partition(run_t *u) {
  if (u->c->infer_gpus > 0) return u->c->infer_gpus;
  double most = 0;
  for (double t = 0; t < u->period_s; t += u->c->interval_s) {
    double r = next_rate(u, t, NULL, NULL);
    if (r > most) most = r;
  }
  u->cursor = 0;
  return replicas_for(u, most);
}

/* Job i's throughput(n) measured on the testbed (the table of its model), n = 1..nmax, one worker a host (a
 * host has one GPU there); it trains a fixed number of samples (its epochs, as the live jobs do), so every
 * sample counts (no noise scale), at batch 64 a worker (the table's worker-steps). */
static int measured_job(const shoal_speed_t *sp, const shoal_job_t *src, int i, tjob_t *j) {
  if (src->model < 0 || src->model >= sp->nmodels)
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: job %d (trace row %lld) names no model of the throughput table "
                         "(its 'model' column)", i, (long long)src->row);
  int nmax = j->g.nmax, nreq = j->g.n_req;
  if (!(j->tput = malloc((size_t)nmax * sizeof *j->tput))) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
  for (int n = 1; n <= nmax; n++) {
    shoal_shape_t sh = {.workers = n, .machines = n, .racks = 1};
    j->tput[n - 1] = sp->rate(sp, NULL, src, &sh);
    if (!(j->tput[n - 1] > 0))
      return shoal__seterr(SHOAL_ERR_INVALID, "loaning: job %d (trace row %lld): the throughput table gives model '%s' no "
                           "speed on %d workers", i, (long long)src->row, sp->models[src->model].name, n);
  }
  j->g = (shoal__goodput_job_t){.phi = INFINITY, .b0 = 64, .bmax = 64 * nmax, .nmax = nmax, .n_req = nreq,
                                .tput = j->tput, .ntput = nmax};
  return 0;
}

static int setup_jobs(run_t *u, const shoal_workload_t *w) {
  u->nj = w->njobs;
  size_t n = (size_t)(w->njobs > 0 ? w->njobs : 1);
  u->jobs = calloc(n, sizeof *u->jobs), u->act = calloc(n, sizeof *u->act), u->gv = calloc(n, sizeof *u->gv);
  u->nv = calloc(n, sizeof *u->nv), u->bv = calloc(n, sizeof *u->bv);
  if (!u->jobs || !u->act || !u->gv || !u->nv || !u->bv) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
  int train_cap = u->c->gpus - u->vc_infer;
  for (int i = 0; i < w->njobs; i++) {
    const shoal_job_t *src = &w->jobs[i];
    tjob_t *j = &u->jobs[i];
    if (src->gpus > train_cap)
      return shoal__seterr(SHOAL_ERR_INVALID, "loaning: job %d (trace row %lld) asks for %d GPUs, more than the %d outside "
                           "VC_infer (drop larger jobs with --max-gpus)", i, (long long)src->row, src->gpus, train_cap);
    shoal_rng_t g;
    shoal_rng_seed2(&g, u->c->seed, (uint64_t)i);
    j->g = profiles[shoal_rng_below(&g, NPROFILES)];
    j->g.n_req = src->gpus > 0 ? src->gpus : 1;
    j->g.nmax = 4 * j->g.n_req < 64 ? 4 * j->g.n_req : 64;
    if (u->c->speed && src->max_workers > 0) j->g.nmax = src->max_workers; /* a measured job keeps its own range */
    if (j->g.nmax > train_cap) j->g.nmax = train_cap;
    if (u->c->speed) {
      int rc = measured_job(u->c->speed, src, i, j);
      if (rc) return rc;
    }
    double d = src->duration > 0 ? src->duration : 1;
    if (u->c->speed && src->work > 0) j->work = src->work * j->g.b0; /* worker-steps of batch b0, in samples */
    else j->work = d * shoal__goodput_at(&j->g, j->g.n_req, j->g.b0); /* the trace's run time, rigid at the tuned batch */
    j->arrival = src->arrival, j->finish = -1;
    double top = 0;
    for (int k = 1; k <= j->g.nmax; k++) top = fmax(top, shoal__goodput(&j->g, k, NULL));
    for (int k = 1; k <= j->g.nmax && !j->best_n; k++) { /* the fewest workers that give it */
      double gp = shoal__goodput(&j->g, k, NULL);
      if (gp >= top - 1e-12) j->best = gp, j->best_n = k;
    }
    double floor_t = j->arrival + j->work / top;
    if (floor_t > u->r->t_floor) u->r->t_floor = floor_t, u->r->floor_job = i;
  }
  return 0;
}

static int push_point(shoal_loan_result_t *r, const shoal_loan_point_t *p, int *cap) {
  if (r->ntl == *cap) {
    int nc = *cap ? 2 * *cap : 1024;
    shoal_loan_point_t *q = realloc(r->tl, (size_t)nc * sizeof *q);
    if (!q) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
    r->tl = q, *cap = nc;
  }
  r->tl[r->ntl++] = *p;
  return 0;
}

/* The replicas the requests waiting now (a fluid estimate of the router's queue: arrivals minus what the
 * replicas served, kept per check) and arriving at `rate` need (sched/serving). */
static int backlog_need(run_t *u, double rate) {
  const shoal_loan_config_t *c = u->c;
  int need = shoal__slo_replicas_waiting(u->backlog, rate, c->service_s, c->slo_s, c->gpus - 1);
  return need > c->gpus - 1 ? c->gpus - 1 : need;
}

/* The rest of an interval from t, in checks of check_s (fapes): a reclaim at once when the waiting requests
 * need more replicas than serve them (ready after the reclaim); replicas above both the interval's forecast
 * (base) and that need for hold_s go back to training (the jobs that gain most grow). The training jobs
 * advance between checks. */
static int run_checks(run_t *u, double t, int base, int *want, shoal_loan_point_t *pt) {
  const shoal_loan_config_t *c = u->c;
  int steps = (int)floor(c->interval_s / c->check_s + 0.5), rc = 0;
  double dt = c->interval_s / steps, calm = 0;
  for (int s = 0; s < steps && !rc; s++) {
    double ts = t + s * dt;
    u->r->infer_gpu_s += *want * dt;
    advance(u, ts, dt, pt);
    double rate = window_rate(u, ts, dt);
    u->backlog = fmax(0, u->backlog + (rate - *want / c->service_s) * dt);
    if (c->policy != SHOAL_LOAN_FAPES || s == steps - 1) continue;
    int need = with_spare(u, c->hold_s > 0 ? backlog_need(u, rate) : replicas_for(u, rate)), keep = need > base ? need : base;
    if (need > *want) {
      update_active(u, ts + dt);
      if ((rc = set_replicas(u, ts + dt, need, 0))) break;
      *want = need, calm = 0;
      allocate(u, c->gpus - need, ALLOC_SHRINK);
      if (need > pt->replicas) pt->replicas = need;
    } else if (c->hold_s > 0 && keep < *want && (calm += dt) >= c->hold_s - 1e-9) {
      update_active(u, ts + dt);
      if ((rc = set_replicas(u, ts + dt, keep, 0))) break;
      *want = keep, calm = 0;
      allocate(u, c->gpus - keep, ALLOC_GROW);
    } else if (keep >= *want) {
      calm = 0;
    }
  }
  return rc;
}

/* One decision interval after another until every job is done or the horizon. */
static int run_intervals(run_t *u) {
  const shoal_loan_config_t *c = u->c;
  shoal_loan_result_t *r = u->r;
  double rate_prev = 0;
  int cap = 0, rc = 0;
  for (int k = 0; !rc; k++) {
    double t = k * c->interval_s;
    if (t >= c->horizon_s) break;
    update_active(u, t);
    if (u->next == u->nj && u->nact == 0) break;
    double mean, base, rate_now = next_rate(u, t, &mean, &base);
    int want = infer_need(u, rate_prev, c->policy == SHOAL_LOAN_FAPES ? base : rate_now, k == 0);
    if ((rc = set_replicas(u, t, want, k == 0))) break;
    int fixed = c->policy == SHOAL_LOAN_STATIC || c->policy == SHOAL_LOAN_POLLUX;
    u->peak_replicas = want;
    for (int i = 0; i < c->stable_n && i < k; i++)
      if (u->recent[i] > u->peak_replicas) u->peak_replicas = u->recent[i];
    allocate(u, c->gpus - (fixed ? u->vc_infer : want), ALLOC_FULL);
    shoal_loan_point_t pt = {.t = t, .rate = mean, .peak = rate_now, .replicas = want};
    if ((rc = run_checks(u, t, want, &want, &pt))) break;
    double fixed_train = c->gpus - u->vc_infer;
    pt.loaned = pt.train_avg > fixed_train ? pt.train_avg - fixed_train : 0;
    r->loaned_gpu_s += pt.loaned * c->interval_s;
    r->train_gpu_s += pt.train_avg * c->interval_s;
    r->speedup_avg += pt.speedup * c->interval_s;
    rate_prev = c->policy == SHOAL_LOAN_FAPES ? base : rate_now;
    if (c->stable_n > 0) u->recent[k % c->stable_n] = pt.replicas;
    rc = push_point(r, &pt, &cap);
  }
  return rc;
}

static int finish_stats(run_t *u) {
  shoal_loan_result_t *r = u->r;
  r->jobs = u->nj;
  r->jct = malloc((size_t)(u->nj > 0 ? u->nj : 1) * sizeof *r->jct);
  if (!r->jct) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
  double last = 0, sum = 0;
  for (int i = 0; i < u->nj; i++) {
    const tjob_t *j = &u->jobs[i];
    if (j->finish < 0) continue;
    r->jct[r->finished++] = j->finish - j->arrival;
    sum += j->finish - j->arrival;
    if (j->finish > last) last = j->finish;
  }
  r->t_end = r->finished == r->jobs ? last : r->ntl * u->c->interval_s;
  qsort(r->jct, (size_t)r->finished, sizeof *r->jct, cmp_double);
  if (r->finished) {
    r->jct_avg = sum / r->finished;
    r->jct_p50 = shoal__quantile(r->jct, r->finished, 0.5);
    r->jct_p95 = shoal__quantile(r->jct, r->finished, 0.95);
  }
  r->speedup_avg = r->t_end > 0 ? r->speedup_avg / r->t_end : 0;
  return 0;
}

int shoal__loan_sim(const shoal_workload_t *w, const shoal__reqtimes_t *period, double period_s,
                    const shoal_loan_config_t *c, shoal_loan_result_t *r) {
  int rc = check_config(c, period, period_s);
  if (rc) return rc;
  shoal_loan_result_t res = {0};
  run_t u = {.c = c, .r = &res, .period = period, .period_s = period_s};
  u.vc_infer = fixed_partition(&u);
  res.infer_gpus = u.vc_infer;
  if (c->policy == SHOAL_LOAN_FAPES) rc = shoal__forecast_create(c->predictor, c->alpha, c->z, &u.fc);
  if (!rc) rc = setup_jobs(&u, w);
  if (!rc && !(u.recent = calloc((size_t)c->stable_n + 1, sizeof *u.recent)))
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "loaning simulation: out of memory");
  if (!rc) rc = run_intervals(&u);
  if (!rc) rc = finish_stats(&u);
  if (!rc) rc = serve_requests(&u, res.t_end);
  if (u.fc) shoal__forecast_free(u.fc);
  for (int i = 0; u.jobs && i < u.nj; i++) free(u.jobs[i].tput);
  free(u.jobs), free(u.act), free(u.gv), free(u.nv), free(u.bv), free(u.ch), free(u.recent);
  if (rc) {
    shoal__loan_result_free(&res);
    return rc;
  }
  *r = res;
  return 0;
}

void shoal__loan_result_free(shoal_loan_result_t *r) {
  free(r->jct), free(r->tl);
  memset(r, 0, sizeof *r);
}
