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
 * (min = max = gpus) are only started, never resized.
 *
 * Speed (the result is the plain loop's): the loop over the waiting jobs
 * looks only at those that can act in the current state: a start needs
 * min_workers <= free GPUs, a reclaim needs a job that waited long enough
 * and min_workers <= free + shrinkable GPUs. Waiting jobs are kept per
 * min_workers in arrival order (all of them, and those that waited long
 * enough), so the next such job is the first of a few lists; the others
 * only count as waiting and give timer times: the earliest of the jobs that
 * have not waited long enough comes from a heap, and the shrink candidates'
 * next resize time counts whenever a job that waited long enough sits
 * between two that act. The shrink candidates are computed once per
 * allocation change, from the running jobs only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/policies/common.h"

/* jobs in id order with holes (NULL) for the departed; ids[] keeps a
 * departed job's id so that binary search still works; a job's index is in
 * its pint[slot] */
typedef struct {
  shoal_job_t **a;
  int32_t *ids;
  int n, cap, head, holes, cur;
} idlist_t;

/* waiting jobs with one min_workers value */
typedef struct {
  int jmin;
  idlist_t all;  /* every waiting job (pint[1]: index) */
  idlist_t elig; /* those that waited reclaim restart costs (pint[2]: index) */
} wclass_t;

typedef struct {
  double at;
  shoal_job_t *j;
} ne_t;

/* per job: pkey[0] time of the last start or resize; pint[0] 1 waiting, 2
 * holding, 0 neither; pint[1], pint[2] list indexes; pint[3] 1 while in the
 * heap of jobs that have not waited long enough */
typedef struct {
  double interval, reclaim, gain;
  int oom;
  wclass_t *cls; /* by min_workers */
  int ncls, clscap;
  long nwaiting;
  ne_t *ne;      /* waiting jobs that had not waited long enough at the last look, min-heap on at */
  int nne, necap;
  shoal_job_t **hold; /* running jobs, by id */
  int nhold, holdcap;
  shoal_job_t **cand;
  int candcap;
  shoal_place_t *buf, *buf2;
  int cap;
} elastic_t;

static int el_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"interval", "reclaim", "gain", NULL};
  int rc = shoal__param_check("elastic", params, keys);
  if (rc) return rc;
  elastic_t *e = calloc(1, sizeof *e);
  if (!e) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
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
  for (int c = 0; c < e->ncls; c++) {
    free(e->cls[c].all.a);
    free(e->cls[c].all.ids);
    free(e->cls[c].elig.a);
    free(e->cls[c].elig.ids);
  }
  free(e->cls);
  free(e->ne);
  free(e->hold);
  free(e->cand);
  free(e->buf);
  free(e->buf2);
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

/* ---- id-ordered lists ---- */
static void idl_compact(idlist_t *l, int slot) {
  int k = 0;
  for (int i = l->head; i < l->n; i++)
    if (l->a[i]) {
      l->a[k] = l->a[i];
      l->ids[k] = l->ids[i];
      l->a[k]->pint[slot] = k;
      k++;
    }
  l->n = k;
  l->head = l->holes = 0;
}

static int idl_insert(idlist_t *l, shoal_job_t *j, int slot) {
  if (l->holes > 16 && l->holes > (l->n - l->head) / 2) idl_compact(l, slot);
  if (l->n == l->cap) {
    int nc = l->cap ? l->cap * 2 : 64;
    shoal_job_t **a = realloc(l->a, (size_t)nc * sizeof *a);
    if (a) l->a = a;
    int32_t *ids = a ? realloc(l->ids, (size_t)nc * sizeof *ids) : NULL;
    if (!ids) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
    l->ids = ids;
    l->cap = nc;
  }
  int at = l->n;
  if (l->n > l->head && l->ids[l->n - 1] > j->id) { /* not the newest (the live controller's journal): in order */
    int lo = l->head, hi = l->n;
    while (lo < hi) {
      int m = lo + (hi - lo) / 2;
      if (l->ids[m] < j->id) lo = m + 1;
      else hi = m;
    }
    at = lo;
    memmove(&l->a[at + 1], &l->a[at], (size_t)(l->n - at) * sizeof *l->a);
    memmove(&l->ids[at + 1], &l->ids[at], (size_t)(l->n - at) * sizeof *l->ids);
    for (int i = at + 1; i <= l->n; i++)
      if (l->a[i]) l->a[i]->pint[slot] = i;
  }
  l->a[at] = j;
  l->ids[at] = j->id;
  j->pint[slot] = at;
  l->n++;
  return 0;
}

static void idl_remove(idlist_t *l, shoal_job_t *j, int slot) {
  int i = (int)j->pint[slot];
  if (i < 0 || i >= l->n || l->a[i] != j) return;
  l->a[i] = NULL;
  l->holes++;
  j->pint[slot] = -1;
  while (l->head < l->n && !l->a[l->head]) {
    l->head++;
    l->holes--;
  }
}

/* the first job of l with id > pos (from the list's cursor), NULL if none */
static shoal_job_t *idl_next(idlist_t *l, int pos) {
  while (l->cur < l->n && (!l->a[l->cur] || l->ids[l->cur] <= pos)) l->cur++;
  return l->cur < l->n ? l->a[l->cur] : NULL;
}

static wclass_t *class_of(elastic_t *e, int jm) {
  int lo = 0, hi = e->ncls;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (e->cls[m].jmin < jm) lo = m + 1;
    else hi = m;
  }
  if (lo < e->ncls && e->cls[lo].jmin == jm) return &e->cls[lo];
  if (e->ncls == e->clscap) {
    int nc = e->clscap ? e->clscap * 2 : 8;
    wclass_t *c = realloc(e->cls, (size_t)nc * sizeof *c);
    if (!c) return NULL;
    e->cls = c;
    e->clscap = nc;
  }
  memmove(&e->cls[lo + 1], &e->cls[lo], (size_t)(e->ncls - lo) * sizeof *e->cls);
  memset(&e->cls[lo], 0, sizeof e->cls[lo]);
  e->cls[lo].jmin = jm;
  e->ncls++;
  return &e->cls[lo];
}

/* ---- the heap of jobs that had not waited long enough ---- */
static int ne_less(const ne_t *a, const ne_t *b) { return a->at < b->at || (a->at == b->at && a->j->id < b->j->id); }

static int ne_push(elastic_t *e, shoal_job_t *j, double at) {
  if (e->nne == e->necap) {
    int nc = e->necap ? e->necap * 2 : 256;
    ne_t *h = realloc(e->ne, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
    e->ne = h;
    e->necap = nc;
  }
  ne_t x = {at, j};
  int i = e->nne++;
  while (i > 0 && ne_less(&x, &e->ne[(i - 1) / 2])) {
    e->ne[i] = e->ne[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  e->ne[i] = x;
  j->pint[3] = 1;
  return 0;
}

static void ne_pop(elastic_t *e) {
  ne_t last = e->ne[--e->nne];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    const ne_t *b = &last;
    if (l < e->nne && ne_less(&e->ne[l], b)) m = l, b = &e->ne[l];
    if (l + 1 < e->nne && ne_less(&e->ne[l + 1], b)) m = l + 1;
    if (m == i) break;
    e->ne[i] = e->ne[m];
    i = m;
  }
  if (e->nne) e->ne[i] = last;
}

/* ---- waiting and running jobs ---- */
static double eligible_at(const elastic_t *e, const shoal_sched_t *s, const shoal_job_t *j) {
  return j->arrival + shoal_sched_held_s(s, j) + e->reclaim * s->restart_cost;
}
/* waited at least `reclaim` restart costs (the loop's own test) */
static int eligible(const elastic_t *e, const shoal_sched_t *s, const shoal_job_t *j) {
  return !(s->now - j->arrival - shoal_sched_held_s(s, j) < e->reclaim * s->restart_cost);
}

static int wait_add(elastic_t *e, const shoal_sched_t *s, shoal_job_t *j) {
  wclass_t *c = class_of(e, jmin(j));
  if (!c) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  j->pint[0] = 1;
  j->pint[1] = j->pint[2] = -1;
  e->nwaiting++;
  int rc = idl_insert(&c->all, j, 1);
  if (rc) return rc;
  return eligible(e, s, j) ? idl_insert(&c->elig, j, 2) : ne_push(e, j, eligible_at(e, s, j));
}

static void wait_remove(elastic_t *e, shoal_job_t *j) {
  wclass_t *c = class_of(e, jmin(j));
  if (!c || j->pint[0] != 1) return;
  idl_remove(&c->all, j, 1);
  idl_remove(&c->elig, j, 2);
  j->pint[0] = 0;
  e->nwaiting--; /* a heap entry of j is dropped when it comes up */
}

static int hold_add(elastic_t *e, shoal_job_t *j) {
  if (e->nhold == e->holdcap) {
    int nc = e->holdcap ? e->holdcap * 2 : 64;
    shoal_job_t **h = realloc(e->hold, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
    e->hold = h;
    e->holdcap = nc;
  }
  int at = e->nhold;
  while (at > 0 && e->hold[at - 1]->id > j->id) {
    e->hold[at] = e->hold[at - 1];
    at--;
  }
  e->hold[at] = j;
  e->nhold++;
  j->pint[0] = 2;
  return 0;
}

static void hold_remove(elastic_t *e, shoal_job_t *j) {
  int lo = 0, hi = e->nhold;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (e->hold[m]->id < j->id) lo = m + 1;
    else hi = m;
  }
  if (lo < e->nhold && e->hold[lo] == j) {
    memmove(&e->hold[lo], &e->hold[lo + 1], (size_t)(e->nhold - lo - 1) * sizeof *e->hold);
    e->nhold--;
  }
  j->pint[0] = 0;
}

/* the shrink candidates (running jobs above their minimum that may resize
 * now, most workers above the minimum first), the workers they can give and
 * the earliest time another may resize */
static int candidates(elastic_t *e, const shoal_sched_t *s, int *nc, int *avail, double *timer) {
  if (e->candcap < e->nhold + 1) {
    shoal_job_t **c = realloc(e->cand, (size_t)(e->nhold + 1) * 2 * sizeof *c);
    if (!c) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
    e->cand = c;
    e->candcap = (e->nhold + 1) * 2;
  }
  *nc = *avail = 0;
  *timer = INFINITY;
  for (int k = 0; k < e->nhold; k++) {
    shoal_job_t *r = e->hold[k];
    if (r->alloc.workers <= jmin(r)) continue;
    if (resizable(e, s, r)) {
      e->cand[(*nc)++] = r;
      *avail += r->alloc.workers - jmin(r);
    } else if (r->pkey[0] + e->interval < *timer) {
      *timer = r->pkey[0] + e->interval;
    }
  }
  if (*nc > 1) qsort(e->cand, (size_t)*nc, sizeof *e->cand, cmp_above_min);
  return 0;
}

/* A runner may have taken a job's resources (the live controller on a
 * drained node): it waits again. */
static int requeue_dropped(elastic_t *e, const shoal_sched_t *s) {
  int rc;
  for (int k = e->nhold - 1; k >= 0; k--) {
    shoal_job_t *r = e->hold[k];
    if (r->alloc.n == 0) {
      hold_remove(e, r);
      if ((rc = wait_add(e, s, r))) return rc;
    }
  }
  return 0;
}

/* Jobs that have now waited long enough: their heap time is at most now
 * (plus a margin far wider than the rounding of either form of the test;
 * the loop's own test decides, those it rejects go back). */
static int admit_eligible(elastic_t *e, const shoal_sched_t *s) {
  double margin = 1e-6 * (1 + fabs(s->now)) + 1e-3;
  int nback = 0, rc;
  while (e->nne && e->ne[0].at <= s->now + margin) {
    ne_t x = e->ne[0];
    ne_pop(e);
    x.j->pint[3] = 0;
    if (x.j->pint[0] != 1) continue; /* started or gone */
    if (eligible(e, s, x.j)) {
      wclass_t *c = class_of(e, jmin(x.j));
      if (!c) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
      if ((rc = idl_insert(&c->elig, x.j, 2))) return rc;
    } else {
      if (e->candcap <= nback) {
        shoal_job_t **c = realloc(e->cand, (size_t)(nback + 1) * 2 * sizeof *c);
        if (!c) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
        e->cand = c;
        e->candcap = (nback + 1) * 2;
      }
      e->cand[nback++] = x.j; /* scratch until the candidates are computed */
    }
  }
  for (int i = 0; i < nback; i++)
    if ((rc = ne_push(e, e->cand[i], eligible_at(e, s, e->cand[i])))) return rc;
  return 0;
}

/* The first job after id pos that waited long enough, over the classes. */
static shoal_job_t *first_eligible(elastic_t *e, int pos) {
  shoal_job_t *first = NULL;
  for (int c = 0; c < e->ncls; c++) {
    shoal_job_t *x = idl_next(&e->cls[c].elig, pos);
    if (x && (!first || x->id < first->id)) first = x;
  }
  return first;
}

/* The next job after id pos that can act: a start (min_workers <= free) or
 * a reclaim (waited enough, min_workers <= free + shrinkable). */
static shoal_job_t *next_actor(elastic_t *e, long free_gpus, int reclaim, int avail, int pos) {
  shoal_job_t *v = NULL;
  for (int c = 0; c < e->ncls; c++) {
    wclass_t *k = &e->cls[c];
    shoal_job_t *x = NULL;
    if (k->jmin <= free_gpus) x = idl_next(&k->all, pos);
    else if (reclaim && k->jmin <= free_gpus + avail) x = idl_next(&k->elig, pos);
    if (x && (!v || x->id < v->id)) v = x;
  }
  return v;
}

/* v started: from the waiting lists to the holders. */
static int started_job(elastic_t *e, shoal_job_t *v, long *started) {
  (*started)++;
  wait_remove(e, v);
  return hold_add(e, v);
}

/* Shrink the candidates (most workers above the minimum first) until need
 * workers are free; < 0 on error. */
static int shrink_for(elastic_t *e, shoal_sched_t *s, int nc, int need) {
  int rc;
  for (int k = 0; k < nc && need > 0; k++) {
    shoal_job_t *r = e->cand[k];
    int drop = r->alloc.workers - jmin(r);
    if (drop > need) drop = need;
    int m = shrink_place(r, drop, e->buf2);
    if ((rc = assign(s, r, e->buf2, m)) < 0) return rc;
    if (rc == 0) need -= drop;
  }
  return 0;
}

/* The loop over waiting jobs in id order: start what fits, and for a job that
 * waited long enough shrink running jobs to make room. *next_timer gets the
 * earliest time something may change; *started counts the starts. */
static int start_and_reclaim(elastic_t *e, shoal_sched_t *s, double *next_timer, long *started) {
  int rc, nc = 0, avail = 0, cand_ok = 0, pos = -1;
  double cand_timer = INFINITY;
  for (int c = 0; c < e->ncls; c++) e->cls[c].all.cur = e->cls[c].all.head, e->cls[c].elig.cur = e->cls[c].elig.head;
  for (;;) {
    shoal_job_t *first_elig = first_eligible(e, pos);
    if (first_elig && !cand_ok) {
      if ((rc = candidates(e, s, &nc, &avail, &cand_timer))) return rc;
      cand_ok = 1;
    }
    shoal_job_t *v = next_actor(e, s->cluster->gpus_free, first_elig != NULL, avail, pos);
    /* jobs that waited enough but cannot act, before v: each would have
     * offered the candidates' next resize time */
    if (first_elig && (!v || first_elig->id < v->id) && cand_timer < *next_timer) *next_timer = cand_timer;
    if (!v) break;
    pos = v->id;
    /* the loop's body for v */
    if (jmin(v) <= s->cluster->gpus_free && (rc = try_start(e, s, v)) != 0) {
      if (rc < 0) return rc;
      cand_ok = 0;
      if ((rc = started_job(e, v, started))) return rc;
      continue;
    }
    double held = shoal_sched_held_s(s, v), waited = s->now - v->arrival - held;
    int need = jmin(v) - s->cluster->gpus_free;
    if (waited < e->reclaim * s->restart_cost) {
      double at = v->arrival + held + e->reclaim * s->restart_cost;
      if (at < *next_timer) *next_timer = at;
      continue;
    }
    if (!cand_ok) {
      if ((rc = candidates(e, s, &nc, &avail, &cand_timer))) return rc;
      cand_ok = 1;
    }
    if (cand_timer < *next_timer) *next_timer = cand_timer;
    if (avail < need) continue;
    cand_ok = 0;
    if ((rc = shrink_for(e, s, nc, need)) < 0 || (rc = try_start(e, s, v)) < 0) return rc;
    if (rc && (rc = started_job(e, v, started))) return rc;
  }
  return 0;
}

/* Grow onto idle GPUs (nobody waits): the job whose remaining time drops
 * most, by more than `gain` restart costs, one at a time. */
static int grow_idle(elastic_t *e, shoal_sched_t *s, double *next_timer) {
  int rc;
  while (s->cluster->gpus_free > 0) {
    shoal_job_t *best = NULL;
    int best_add = 0;
    double best_save = 0;
    for (int k = 0; k < e->nhold; k++) {
      shoal_job_t *j = e->hold[k];
      if (j->alloc.n == 0 || j->alloc.workers >= jmax(j)) continue;
      if (!resizable(e, s, j)) {
        if (j->pkey[0] + e->interval < *next_timer) *next_timer = j->pkey[0] + e->interval;
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
    if ((rc = assign(s, best, e->buf, k + best->alloc.n)) < 0) return rc;
    if (rc) best->pkey[0] = s->now;
  }
  return 0;
}

static int el_schedule(void *state, shoal_sched_t *s) {
  elastic_t *e = state;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH | SHOAL_EV_TIMER | SHOAL_EV_START))) return 0;
  if (e->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "elastic: out of memory");
  int rc;
  double next_timer = INFINITY;
  if ((rc = requeue_dropped(e, s)) || (rc = admit_eligible(e, s))) return rc;
  long started = 0, waiting0 = e->nwaiting;
  if ((rc = start_and_reclaim(e, s, &next_timer, &started))) return rc;
  /* the jobs that have not waited long enough offer the time they will have */
  while (e->nne && e->ne[0].j->pint[0] != 1) {
    e->ne[0].j->pint[3] = 0;
    ne_pop(e);
  }
  if (e->nne && e->ne[0].at < next_timer) next_timer = e->ne[0].at;
  if (waiting0 - started == 0 && (rc = grow_idle(e, s, &next_timer))) return rc;
  rc = 0;
  if (isfinite(next_timer)) rc = shoal_sched_timer(s, next_timer > s->now ? next_timer : s->now + 1, 0);
  return rc < 0 ? rc : 0;
}

static void el_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  elastic_t *e = state;
  j->pkey[0] = s->now;
  j->pint[3] = 0;
  /* (a runner may hand over a job that already runs: the live controller) */
  if ((j->alloc.n > 0 ? hold_add(e, j) : wait_add(e, s, j))) e->oom = 1;
}

static void el_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  elastic_t *e = state;
  if (j->pint[0] == 2) hold_remove(e, j);
  else wait_remove(e, j);
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
