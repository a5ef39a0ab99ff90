/* elastic: grow jobs onto idle GPUs, shrink them when jobs wait, with the
 * restart cost taken into account (FaPES-style elastic scaling,
 * ../shared/specs/adaptive-comm.md Part C, reconstructed without the
 * serverless loaning: the cluster's idle GPUs play the loaned servers).
 *
 * At every arrival, completion or timer, in arrival order (ties: id):
 *  1. start waiting jobs: at their requested size if it fits, else at any
 *     size >= min_workers that fits (consolidated);
 *  2. a waiting job that still does not fit, and has waited at least
 *     `reclaim` restart costs, reclaims GPUs: running elastic jobs above
 *     their minimum (most workers above the minimum first) shrink, each at
 *     most once per `interval` s, until the waiting job's minimum fits; the
 *     shrunk jobs keep a subset of their machines;
 *  3. no job waiting: idle GPUs go to the running jobs below max_workers
 *     whose estimated remaining time drops by more than `gain` restart
 *     costs when they grow (remaining work / speed-model rate, before and
 *     after), largest saving first.
 * A resize costs the job a checkpoint and a restart (restart_cost s in the
 * simulator; checkpoint + requeue + restart live). Rigid jobs
 * (min = max = gpus) are only started, never resized. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/policy_util.h"

typedef struct {
  double interval, reclaim, gain;
  shoal__arrivals_t act; /* active jobs in arrival order */
  int oom;
  shoal_place_t *buf, *buf2;
  int cap;
} elastic_t;

static int el_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"interval", "reclaim", "gain", NULL};
  int rc = shoal__param_check("elastic", params, keys);
  if (rc) return rc;
  elastic_t *e = calloc(1, sizeof *e);
  if (!e) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  shoal__arrivals_init(&e->act);
  if ((rc = shoal__param_double("elastic", params, "interval", 60, 0, 1e9, &e->interval)) ||
      (rc = shoal__param_double("elastic", params, "reclaim", 1, 0, 1e6, &e->reclaim)) ||
      (rc = shoal__param_double("elastic", params, "gain", 2, 0, 1e6, &e->gain))) {
    free(e);
    return rc;
  }
  e->cap = s->cluster->nmachines * 2 + 4;
  e->buf = malloc((size_t)e->cap * sizeof *e->buf);
  e->buf2 = malloc((size_t)e->cap * sizeof *e->buf2);
  if (!e->buf || !e->buf2) {
    free(e->buf);
    free(e->buf2);
    free(e);
    return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  }
  *state = e;
  return 0;
}

static void el_destroy(void *state) {
  elastic_t *e = state;
  if (!e) return;
  free(e->buf);
  free(e->buf2);
  shoal__arrivals_free(&e->act);
  free(e);
}

static int rigid(const shoal_job_t *j) { return j->arch == SHOAL_ARCH_PS; } /* PS jobs: requested size only */
static int jmin(const shoal_job_t *j) { return rigid(j) ? j->gpus : j->min_workers >= 1 && j->min_workers <= j->gpus ? j->min_workers : j->gpus; }
static int jmax(const shoal_job_t *j) { return rigid(j) ? j->gpus : j->max_workers >= j->gpus ? j->max_workers : j->gpus; }

/* pkey[0]: time of the job's last start or resize */
static int resizable(const elastic_t *e, const shoal_sched_t *s, const shoal_job_t *j) {
  return jmin(j) < jmax(j) && s->now - j->pkey[0] >= e->interval;
}

static int assign(shoal_sched_t *s, shoal_job_t *j, shoal_place_t *p, int n) {
  int rc = shoal_sched_assign(s, j, p, n);
  if (rc == 0) j->pkey[0] = s->now;
  return rc == SHOAL_ERR_INFEASIBLE ? 1 : rc;
}

/* start j at the largest size in [min, gpus] that fits now; 1 if started */
static int try_start(elastic_t *e, shoal_sched_t *s, shoal_job_t *j) {
  if (rigid(j)) {
    int rc = shoal__start_requested(s, j, e->buf);
    if (rc == 1) j->pkey[0] = s->now;
    return rc;
  }
  int lo = jmin(j);
  for (int n = j->gpus; n >= lo; n--) {
    if (n > s->cluster->gpus_free) continue;
    int k = shoal__place_consolidated(s->cluster, j, n, e->buf, e->cap);
    if (k > 0) {
      int rc = assign(s, j, e->buf, k);
      if (rc < 0) return rc;
      if (rc == 0) return 1;
    }
  }
  return 0;
}

/* j's placement minus `drop` workers, taken from its last machines */
static int shrink_place(const shoal_job_t *j, int drop, shoal_place_t *out) {
  int n = j->alloc.n;
  memcpy(out, j->alloc.p, (size_t)n * sizeof *out);
  for (int i = n - 1; i >= 0 && drop > 0; i--) {
    int d = out[i].workers < drop ? out[i].workers : drop;
    out[i].workers = (int16_t)(out[i].workers - d);
    drop -= d;
  }
  int k = 0;
  for (int i = 0; i < n; i++)
    if (out[i].workers > 0) out[k++] = out[i];
  return k;
}

static double remaining_s(const shoal_sched_t *s, const shoal_job_t *j, int workers) {
  double r = shoal_sched_rate_consolidated(s, j, workers, 0);
  double w = j->work - shoal_sched_work_done(s, j);
  return r > 0 ? w / r : INFINITY;
}

static int cmp_above_min(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  int ex = x->alloc.workers - jmin(x), ey = y->alloc.workers - jmin(y);
  if (ex != ey) return ey - ex;
  return x->id - y->id;
}

static int el_schedule(void *state, shoal_sched_t *s) {
  elastic_t *e = state;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH | SHOAL_EV_TIMER | SHOAL_EV_START))) return 0;
  int nwait = 0, rc;
  double next_timer = INFINITY;
  if (e->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  shoal_job_t **cand = malloc((size_t)(s->nactive + 1) * sizeof *cand);
  if (!cand) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  /* the running jobs that could shrink (and when the others could): the
   * same for every waiting job until an allocation changes, so computed
   * once per change instead of once per waiting job */
  int nc = 0, avail = 0, cand_ok = 0;
  double cand_timer = INFINITY;
  for (int id = e->act.head; id >= 0; id = e->act.next[id]) {
    shoal_job_t *j = e->act.job[id];
    if (j->alloc.n > 0) continue;
    if ((rc = try_start(e, s, j)) < 0) goto out;
    if (rc) {
      cand_ok = 0;
      continue;
    }
    /* reclaim from elastic jobs above their minimum */
    double waited = s->now - j->arrival - shoal_sched_held_s(s, j);
    int need = jmin(j) - s->cluster->gpus_free;
    if (waited < e->reclaim * s->restart_cost) {
      double at = j->arrival + shoal_sched_held_s(s, j) + e->reclaim * s->restart_cost;
      if (at < next_timer) next_timer = at;
      nwait++;
      continue;
    }
    if (!cand_ok) {
      nc = avail = 0;
      cand_timer = INFINITY;
      for (int k = e->act.head; k >= 0; k = e->act.next[k]) {
        shoal_job_t *r = e->act.job[k];
        if (r->alloc.n > 0 && r->alloc.workers > jmin(r) && resizable(e, s, r)) {
          cand[nc++] = r;
          avail += r->alloc.workers - jmin(r);
        } else if (r->alloc.n > 0 && r->alloc.workers > jmin(r) && r->pkey[0] + e->interval < cand_timer) {
          cand_timer = r->pkey[0] + e->interval;
        }
      }
      qsort(cand, (size_t)nc, sizeof *cand, cmp_above_min);
      cand_ok = 1;
    }
    if (cand_timer < next_timer) next_timer = cand_timer;
    if (avail < need) {
      nwait++;
      continue;
    }
    cand_ok = 0;
    for (int k = 0; k < nc && need > 0; k++) {
      shoal_job_t *r = cand[k];
      int drop = r->alloc.workers - jmin(r);
      if (drop > need) drop = need;
      int m = shrink_place(r, drop, e->buf2);
      if ((rc = assign(s, r, e->buf2, m)) < 0) goto out;
      if (rc == 0) need -= drop;
    }
    if ((rc = try_start(e, s, j)) < 0) goto out;
    if (!rc) nwait++;
  }
  /* grow onto idle GPUs when nobody waits */
  while (nwait == 0 && s->cluster->gpus_free > 0) {
    shoal_job_t *best = NULL;
    int best_add = 0;
    double best_save = 0;
    for (int id = e->act.head; id >= 0; id = e->act.next[id]) {
      shoal_job_t *j = e->act.job[id];
      if (j->alloc.n == 0 || j->alloc.workers >= jmax(j)) continue;
      if (!resizable(e, s, j)) {
        if (j->pkey[0] + e->interval < next_timer) next_timer = j->pkey[0] + e->interval;
        continue;
      }
      int add = jmax(j) - j->alloc.workers;
      if (add > s->cluster->gpus_free) add = s->cluster->gpus_free;
      double save = remaining_s(s, j, j->alloc.workers) - remaining_s(s, j, j->alloc.workers + add);
      if (save > e->gain * s->restart_cost && save > best_save) best = j, best_add = add, best_save = save;
    }
    if (!best) break;
    int k = shoal__place_consolidated(s->cluster, best, best_add, e->buf, e->cap);
    if (k <= 0 || k + best->alloc.n > e->cap) {
      best->pkey[0] = s->now; /* fragmented: do not retry before the interval */
      continue;
    }
    memcpy(e->buf + k, best->alloc.p, (size_t)best->alloc.n * sizeof *e->buf);
    if ((rc = assign(s, best, e->buf, k + best->alloc.n)) < 0) goto out;
    if (rc) best->pkey[0] = s->now;
  }
  rc = 0;
  if (isfinite(next_timer)) rc = shoal_sched_timer(s, next_timer > s->now ? next_timer : s->now + 1, 0);
out:
  free(cand);
  return rc < 0 ? rc : 0;
}

static void el_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  elastic_t *e = state;
  j->pkey[0] = s->now;
  if (shoal__arrivals_add(&e->act, j)) e->oom = 1;
}

static void el_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  elastic_t *e = state;
  shoal__arrivals_remove(&e->act, j);
}

const shoal_policy_ops_t shoal__policy_elastic = {
    .name = "elastic",
    .summary = "FaPES-style elastic scaling: grow onto idle GPUs, shrink to start waiting jobs, restart cost aware",
    .params = "interval=60: min s between two resizes of a job; reclaim=1: a waiting job reclaims GPUs after waiting this "
              "many restart costs; gain=2: grow only when the remaining time drops by more than this many restart costs",
    .create = el_create,
    .destroy = el_destroy,
    .arrive = el_arrive,
    .finish = el_finish,
    .schedule = el_schedule,
};
