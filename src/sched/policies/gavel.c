/* Gavel's max-min fairness (LAS) on a homogeneous cluster, round-based
 * (spec §5.8 "Gavel's version"; stanford-futuredata/gavel, policy
 * max_min_fairness + its round mechanism).
 *
 * Allocation: maximize min_j x_j subject to sum_j n_j x_j <= G, 0 <= x_j <= 1,
 * where x_j is job j's share of time at its requested size; on identical GPUs
 * with equal weights every job gets x = min(1, G / sum_j n_j).
 * Rounds of rho seconds (default 360, Gavel's): at each round start jobs are
 * ranked by priority x_j / f_j, f_j = fraction of its time in the system it
 * has held GPUs (new jobs: infinite priority; ties: lower id); walk that order
 * with free = total GPUs, keep or start jobs whose GPUs <= free, preempt the
 * others (each switch pays the restart cost). Between rounds, completions and
 * arrivals backfill free GPUs in priority order without preempting (Gavel
 * waits for the round end; we do not leave GPUs idle).
 * Parameters: round=360 (s).
 *
 * Speed (the result is the plain walk's): between rounds only waiting jobs
 * that fit the free GPUs can be selected, so nothing is computed while no GPU
 * is free; jobs that never held GPUs (infinite priority, id order) wait in
 * one id-heap per size, and the others' priorities are computed only for the
 * sizes that still fit once the new jobs are served (a backfill mostly
 * starts one job: linear scans, no heap). Rounds heap every active job and
 * pop only until the GPUs are gone or nothing left fits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/policies/common.h"

/* an entry of a ranking: priority (larger first), then id */
typedef struct {
  double key;
  int32_t id;
  int32_t gpus; /* the job's, beside the key (scans read no job) */
  shoal_job_t *j;
} gent_t;

/* per job: pint[0] 1 while holding (as of the last decision), pint[1] where it
 * waits: 0 not waiting, 1 in a new-job heap, 2 in old[] at index pint[2] */
typedef struct {
  double round;
  int timer_pending, round_due, oom;
  long demand;        /* GPUs requested by the active jobs */
  long nwait;         /* active jobs not holding */
  struct gclass {     /* waiting jobs that never held GPUs, by size: min-heap on id */
    int gpus;
    shoal_job_t **h;
    int n, cap;
  } *cls;
  int ncls, clscap;
  shoal_job_t **old;  /* waiting jobs that held GPUs before (unordered) */
  int nold, oldcap;
  /* scratch of one decision */
  gent_t *ent;
  shoal_job_t **order;
  char *want;
  int cap;
  int *hist;          /* round_walk: sizes not walked yet, [gpus_total + 2] */
  shoal_place_t *buf;
} gavel_t;

static int gavel_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"round", NULL};
  int rc = shoal__param_check("gavel", params, keys);
  gavel_t *g = rc ? NULL : calloc(1, sizeof *g);
  if (rc) return rc;
  if (!g || !(g->buf = malloc((size_t)s->cluster->nmachines * sizeof *g->buf)) ||
      !(g->hist = malloc((size_t)(s->cluster->gpus_total + 2) * sizeof *g->hist))) {
    if (g) free(g->buf);
    free(g);
    return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
  }
  if ((rc = shoal__param_double("gavel", params, "round", 360, 1e-3, 1e9, &g->round))) {
    free(g->buf);
    free(g->hist);
    free(g);
    return rc;
  }
  *state = g;
  return 0;
}

static void gavel_destroy(void *state) {
  gavel_t *g = state;
  if (!g) return;
  for (int c = 0; c < g->ncls; c++) free(g->cls[c].h);
  free(g->cls);
  free(g->old);
  free(g->ent);
  free(g->order);
  free(g->want);
  free(g->buf);
  free(g->hist);
  free(g);
}

static void gavel_timer(void *state, shoal_sched_t *s, int64_t tag) {
  gavel_t *g = state;
  g->timer_pending = 0;
  g->round_due = 1;
}

/* ---- waiting jobs ---- */
static int class_of(gavel_t *g, int gpus) {
  int lo = 0, hi = g->ncls;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (g->cls[m].gpus < gpus) lo = m + 1;
    else hi = m;
  }
  if (lo < g->ncls && g->cls[lo].gpus == gpus) return lo;
  if (g->ncls == g->clscap) {
    int nc = g->clscap ? g->clscap * 2 : 16;
    struct gclass *c = realloc(g->cls, (size_t)nc * sizeof *c);
    if (!c) return -1;
    g->cls = c;
    g->clscap = nc;
  }
  for (int i = g->ncls; i > lo; i--) g->cls[i] = g->cls[i - 1];
  g->cls[lo] = (struct gclass){gpus, NULL, 0, 0};
  g->ncls++;
  return lo;
}

static int new_push(gavel_t *g, shoal_job_t *j) {
  int ci = class_of(g, j->gpus);
  if (ci < 0) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
  struct gclass *c = &g->cls[ci];
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 64;
    shoal_job_t **h = realloc(c->h, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
    c->h = h;
    c->cap = nc;
  }
  int i = c->n++;
  while (i > 0 && j->id < c->h[(i - 1) / 2]->id) {
    c->h[i] = c->h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  c->h[i] = j;
  j->pint[1] = 1;
  return 0;
}

static void new_pop(struct gclass *c) {
  shoal_job_t *last = c->h[--c->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    shoal_job_t *b = last;
    if (l < c->n && c->h[l]->id < b->id) m = l, b = c->h[l];
    if (l + 1 < c->n && c->h[l + 1]->id < b->id) m = l + 1;
    if (m == i) break;
    c->h[i] = c->h[m];
    i = m;
  }
  if (c->n) c->h[i] = last;
}

static int old_add(gavel_t *g, shoal_job_t *j) {
  if (g->nold == g->oldcap) {
    int nc = g->oldcap ? g->oldcap * 2 : 256;
    shoal_job_t **o = realloc(g->old, (size_t)nc * sizeof *o);
    if (!o) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
    g->old = o;
    g->oldcap = nc;
  }
  j->pint[1] = 2;
  j->pint[2] = g->nold;
  g->old[g->nold++] = j;
  return 0;
}

static void old_remove(gavel_t *g, shoal_job_t *j) {
  int i = (int)j->pint[2];
  g->old[i] = g->old[--g->nold];
  g->old[i]->pint[2] = i;
  j->pint[1] = 0;
}

/* j waits (arrived or preempted): a job that never held GPUs has infinite
 * priority (its f is 0), the others are ranked when they can be chosen */
static int wait_add(gavel_t *g, const shoal_sched_t *s, shoal_job_t *j) {
  g->nwait++;
  return shoal_sched_held_s(s, j) > 0 ? old_add(g, j) : new_push(g, j);
}

static void gavel_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  gavel_t *g = state;
  j->pint[0] = j->pint[1] = 0;
  g->demand += j->gpus;
  if (j->state != SHOAL_JOB_WAIT) { /* arrives holding (a live controller adopting it): not waiting */
    j->pint[0] = 1;
    return;
  }
  if (wait_add(g, s, j)) g->oom = 1;
}

static void gavel_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  gavel_t *g = state;
  g->demand -= j->gpus;
  j->pint[0] = 0;
  if (j->pint[1]) { /* ended while it waited (a live controller: cancelled) */
    g->nwait--;
    if (j->pint[1] == 2) old_remove(g, j);
    else j->pint[1] = 0; /* its new-job heap entry is dropped when it comes up */
  }
}

static double priority(const shoal_sched_t *s, const shoal_job_t *j, double x) {
  double age = s->now - j->arrival, f = age > 0 ? shoal_sched_held_s(s, j) / age : 0;
  return f > 0 ? x / f : INFINITY;
}

static inline int ent_before(const gent_t *x, const gent_t *y) { return x->key > y->key || (x->key == y->key && x->id < y->id); }

static void ent_sift(gent_t *h, int n, int i) {
  gent_t x = h[i];
  for (;;) {
    int l = 2 * i + 1, m = i;
    const gent_t *b = &x;
    if (l < n && ent_before(&h[l], b)) m = l, b = &h[l];
    if (l + 1 < n && ent_before(&h[l + 1], b)) m = l + 1;
    if (m == i) break;
    h[i] = h[m];
    i = m;
  }
  h[i] = x;
}

/* a[0..n) in ent_before order: insertion-sorted runs of 16, then bottom-up
 * merges through tmp[n] (the comparison inlined: qsort's calls through a
 * pointer were most of the rounds' time; the order is total, so any sort
 * gives the same result) */
static void ent_sort(gent_t *a, int n, gent_t *tmp) {
  enum { RUN = 16 };
  for (int lo = 0; lo < n; lo += RUN) {
    int hi = lo + RUN < n ? lo + RUN : n;
    for (int i = lo + 1; i < hi; i++) {
      gent_t x = a[i];
      int k = i;
      for (; k > lo && ent_before(&x, &a[k - 1]); k--) a[k] = a[k - 1];
      a[k] = x;
    }
  }
  gent_t *src = a, *dst = tmp;
  for (int w = RUN; w < n; w *= 2) {
    for (int lo = 0; lo < n; lo += 2 * w) {
      int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int i = lo, k = mid, o = lo;
      while (i < mid && k < hi) dst[o++] = ent_before(&src[k], &src[i]) ? src[k++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (k < hi) dst[o++] = src[k++];
    }
    gent_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

static int room(gavel_t *g, int n) {
  if (n <= g->cap) return 0;
  int nc = n * 2;
  gent_t *e = realloc(g->ent, (size_t)nc * 2 * sizeof *e); /* the second half: ent_sort's scratch */
  if (e) g->ent = e;
  shoal_job_t **o = realloc(g->order, (size_t)nc * sizeof *o);
  if (o) g->order = o;
  char *w = realloc(g->want, (size_t)nc);
  if (w) g->want = w;
  if (!e || !o || !w) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
  g->cap = nc;
  return 0;
}

/* A round: rank every active job, walk with free = all GPUs. The walk stops
 * when no GPU is left or when none of the jobs not walked yet fits the free
 * GPUs (fitting counts them, from a histogram of the sizes not walked yet),
 * so the ranking is a heap selection of the walked prefix; of the rest only
 * the holders matter (they are preempted, in priority order; the order of
 * unselected non-holders changes nothing). */
static int round_walk(gavel_t *g, shoal_sched_t *s, double x, int *m) {
  int n = s->nactive, k = 0, h = n;
  long total = s->cluster->gpus_total, free_gpus = total, fitting = 0;
  int *hist = g->hist; /* [total + 2]: entries not walked yet by size, sizes > total in the last */
  memset(hist, 0, (size_t)(total + 2) * sizeof *hist);
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = s->active[i];
    g->ent[i] = (gent_t){priority(s, j, x), j->id, j->gpus, j};
    hist[j->gpus <= total ? (j->gpus > 0 ? j->gpus : 0) : total + 1]++;
    fitting += j->gpus <= total;
  }
  for (int i = h / 2 - 1; i >= 0; i--) ent_sift(g->ent, h, i);
  while (h > 0 && free_gpus > 0 && fitting > 0) {
    shoal_job_t *j = g->ent[0].j;
    g->ent[0] = g->ent[--h];
    if (h) ent_sift(g->ent, h, 0);
    hist[j->gpus <= total ? (j->gpus > 0 ? j->gpus : 0) : total + 1]--;
    g->order[k] = j;
    g->want[k] = j->gpus <= free_gpus;
    if (g->want[k]) {
      fitting--;
      long nf = free_gpus - j->gpus;
      for (long sz = nf + 1; sz <= free_gpus; sz++) fitting -= hist[sz]; /* no longer fit */
      free_gpus = nf;
    }
    k++;
  }
  /* past the walk: not selected; the holders among them in priority order */
  int nh = 0;
  for (int i = 0; i < h; i++)
    if (shoal__holding(g->ent[i].j)) g->ent[nh++] = g->ent[i];
    else g->order[k] = g->ent[i].j, g->want[k++] = 0;
  if (nh > 1) ent_sort(g->ent, nh, g->ent + n); /* ent has room for 2 n */
  for (int i = 0; i < nh; i++) g->order[k] = g->ent[i].j, g->want[k++] = 0;
  *m = k;
  return 0;
}

/* Between rounds: the waiting jobs in priority order, only those that fit
 * the free GPUs; no preemption. */
static int backfill_walk(gavel_t *g, shoal_sched_t *s, double x, int *m) {
  long free_gpus = s->cluster->gpus_free;
  int k = 0;
  /* never-held jobs first (infinite priority), by id */
  for (;;) {
    int best = -1;
    for (int c = 0; c < g->ncls && g->cls[c].gpus <= free_gpus; c++)
      if (g->cls[c].n && (best < 0 || g->cls[c].h[0]->id < g->cls[best].h[0]->id)) best = c;
    if (best < 0) break;
    shoal_job_t *j = g->cls[best].h[0];
    new_pop(&g->cls[best]);
    j->pint[1] = 0;
    if (j->state == SHOAL_JOB_DONE) continue; /* ended while it waited */
    g->order[k] = j;
    g->want[k++] = 1;
    free_gpus -= j->gpus;
  }
  if (free_gpus > 0 && g->nold > 0) {
    /* the others by priority, among those that fit. Most backfills start
     * one or two jobs: the first picks are linear scans for the best entry
     * that still fits (the entry a heap would yield next, the ones that no
     * longer fit being skipped either way), then a heap for the rest. */
    int h = 0;
    for (int i = 0; i < g->nold; i++) {
      shoal_job_t *j = g->old[i];
      if (j->gpus <= free_gpus) g->ent[h++] = (gent_t){priority(s, j, x), j->id, j->gpus, j};
    }
    int scans = 0;
    while (h > 0 && free_gpus > 0 && scans < 4) {
      int b = -1;
      for (int i = 0; i < h; i++)
        if (g->ent[i].gpus <= free_gpus && (b < 0 || ent_before(&g->ent[i], &g->ent[b]))) b = i;
      scans++;
      if (b < 0) {
        h = 0;
        break;
      }
      shoal_job_t *j = g->ent[b].j;
      g->ent[b] = g->ent[--h];
      old_remove(g, j);
      g->order[k] = j;
      g->want[k++] = 1;
      free_gpus -= j->gpus;
    }
    if (h > 0 && free_gpus > 0)
      for (int i = h / 2 - 1; i >= 0; i--) ent_sift(g->ent, h, i);
    while (h > 0 && free_gpus > 0) {
      shoal_job_t *j = g->ent[0].j;
      g->ent[0] = g->ent[--h];
      if (h) ent_sift(g->ent, h, 0);
      if (j->gpus > free_gpus) continue;
      old_remove(g, j);
      g->order[k] = j;
      g->want[k++] = 1;
      free_gpus -= j->gpus;
    }
  }
  *m = k;
  return 0;
}

static int gavel_schedule(void *state, shoal_sched_t *s) {
  gavel_t *g = state;
  int n = s->nactive, rc;
  if (g->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
  int round = g->round_due;
  g->round_due = 0;
  if (n > 0 && !g->timer_pending) {
    if ((rc = shoal_sched_timer(s, s->now + g->round, 0))) return rc;
    g->timer_pending = 1;
  }
  if (!round && !(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  if (n == 0 || g->nwait == 0) return 0; /* everybody runs: the walk would keep them all */
  if (!round && s->cluster->gpus_free <= 0) return 0; /* nothing fits: nothing can start */
  if ((rc = room(g, n + 1))) return rc;
  double x = g->demand <= s->cluster->gpus_total ? 1.0 : (double)s->cluster->gpus_total / (double)g->demand;
  int m = 0;
  if (round) {
    /* the waiting lists are rebuilt from the walk */
    for (int c = 0; c < g->ncls; c++) {
      for (int i = 0; i < g->cls[c].n; i++) g->cls[c].h[i]->pint[1] = 0;
      g->cls[c].n = 0;
    }
    for (int i = 0; i < g->nold; i++) g->old[i]->pint[1] = 0;
    g->nold = 0;
    g->nwait = 0;
    rc = round_walk(g, s, x, &m);
  } else {
    rc = backfill_walk(g, s, x, &m);
  }
  if (rc) return rc;
  rc = shoal__apply_selection(s, g->order, g->want, m, g->buf);
  if (rc < 0) return rc;
  for (int i = 0; i < m; i++) {
    shoal_job_t *j = g->order[i];
    int is = shoal__holding(j);
    if (round) {
      j->pint[0] = is;
      if (!is && (rc = wait_add(g, s, j))) return rc;
    } else if (is) {
      j->pint[0] = 1;
      g->nwait--;
    } else if ((rc = wait_add(g, s, j)) == 0) {
      g->nwait--; /* selected but did not start (fragmentation): waits as before */
    } else {
      return rc;
    }
  }
  return 0;
}

const shoal_policy_ops_t shoal__policy_gavel = {
    "gavel",
    "Gavel max-min fairness (homogeneous LAS): rounds, priority = share / time received",
    "round=360: round length in seconds",
    gavel_create,
    gavel_destroy,
    gavel_arrive,
    gavel_finish,
    gavel_timer,
    gavel_schedule,
    NULL,
};
