/* Optimus (spec §5.6): marginal-gain allocation of workers and parameter
 * servers, re-planned on every arrival and completion.
 *
 *   every active job, in arrival order, first gets 1 worker (+1 PS for PS
 *   jobs) if the cluster's aggregate free GPUs/CPUs/memory allow, else waits;
 *   gain_j(kind) = (R_j/f_j(p,w) - R_j/f_j(p',w')) / dshare(kind)
 *     R_j remaining steps (truth: the simulator is an oracle), f_j the speed
 *     model at the shape (consolidated), dshare = max_r demand_r/capacity_r of
 *     one task of that kind (unit-free, as the spec recommends);
 *   a max-heap holds one entry per (job, kind); pop the best; if gain <= 0
 *   stop; if the task fits the aggregate capacity add it and push the job's
 *   new gains, else drop that entry. Workers <= max_workers, PSs <= workers.
 * All-reduce jobs only have the worker kind (Pollux's GPU-only variant).
 * Placement: jobs whose (workers, PSs) did not change keep their machines;
 * the others are released, then placed largest first on the fewest machines
 * (PSs spread evenly over the workers' machines); when fragmentation
 * prevents it, the job gets one worker less until it fits. Changes pay the
 * restart cost. Fast path: when every job can have its best size (largest
 * n <= max_workers up to which the speed keeps growing) at once, it gets it
 * without the heap.
 * Speed (same result): the first-worker pass stops where the aggregate GPUs
 * run out (every worker needs a GPU, so no later job can get one), so jobs
 * past that point are not looked at unless they hold resources (the holders
 * are kept in a list: they are preempted); speeds come from the context's
 * memo. The gain of a job's second worker is R x a constant of the job in
 * exact arithmetic, so the heap starts with an upper bound R x K_j of every
 * job's first gain (K_j covers the rounding of the gain's formula) and a
 * gain is evaluated only when its bound reaches the top; a bound sorts
 * before an evaluated gain of the same value, so the evaluated gains come
 * out in exactly the order of the full heap. Most decisions add a few
 * workers: a few gains are evaluated instead of every job's. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/policies/common.h"

/* A heap entry, 16 bytes (the heap's moves were most of a decision):
 * key = !bound << 63 | idx << 32 | kind << 31 | the job's pint[3] (low 31
 * bits) when pushed (older entries are stale; a job changes far fewer than
 * 2^31 times within one decision). Ties on the gain are broken by key >> 31:
 * a bound before an evaluated gain, then idx, then kind. idx is the job's
 * index in order[], whose entries that can have gains (the first-worker
 * pass) are in arrival order, that is by id: idx orders like the id. */
typedef struct {
  double gain;
  uint64_t key;
} gain_t;

#define G_VER 0x7fffffffull
static inline gain_t gain_make(double gain, int idx, int kind, int bound, int64_t ver) {
  return (gain_t){gain, (uint64_t)!bound << 63 | (uint64_t)idx << 32 | (uint64_t)kind << 31 | ((uint64_t)ver & G_VER)};
}
static inline int g_idx(const gain_t *g) { return (int)((g->key >> 32) & 0x7fffffff); }
static inline int g_kind(const gain_t *g) { return (int)((g->key >> 31) & 1); }
static inline int g_bound(const gain_t *g) { return !(g->key >> 63); }
static inline int g_stale(const gain_t *g, const shoal_job_t *j) { return (g->key & G_VER) != ((uint64_t)j->pint[3] & G_VER); }

typedef struct {
  shoal_job_t **order;
  gain_t *heap;
  int cap, hcap, nheap;
  shoal_place_t *buf;
  double cpu_total, mem_total;
  /* demand of every active job at its best size, kept incrementally */
  double best_g, best_c, best_m;
  int n_ps;            /* active PS jobs (no fast path while > 0) */
  int all_at_best;     /* after the last decision every job held its best size */
  shoal__arrivals_t act; /* active jobs in arrival order */
  shoal_job_t **hold;    /* jobs holding resources (pint[4]: index) */
  int nhold, holdcap;
  int64_t stamp;         /* decision number: pint[5] = stamp when the job was looked at */
  int n_gpuless;         /* active jobs whose workers need no GPU (no early stop then) */
  shoal_job_t **fresh; /* arrivals since the last decision */
  int nfresh, fcap, oom;
} optimus_t;

/* fields: pint[0] target workers, pint[1] target PSs, pint[2] best size,
 * pint[3] version of the job's heap entries, pint[4] index in hold[] (-1:
 * none), pint[5] decision stamp; pkey[0] K_j (< 0: the first worker is
 * all the job ever gets), pkey[1] dshare of a worker (constant: kept from
 * the arrival), pkey[3] R_j of the current decision (set with the job's
 * bound, before any of its gains is evaluated) */

static int optimus_create(shoal_sched_t *s, const char *params, void **state) {
  int rc = shoal__param_check("optimus", params, NULL);
  if (rc) return rc;
  optimus_t *o = calloc(1, sizeof *o);
  if (!o || !(o->buf = malloc((size_t)s->cluster->nmachines * sizeof *o->buf))) {
    free(o);
    return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
  }
  shoal__arrivals_init(&o->act);
  for (int m = 0; m < s->cluster->nmachines; m++) {
    o->cpu_total += s->cluster->m[m].cap.cpus;
    o->mem_total += s->cluster->m[m].cap.mem_gb;
  }
  *state = o;
  return 0;
}

static void optimus_destroy(void *state) {
  optimus_t *o = state;
  if (!o) return;
  free(o->fresh);
  free(o->hold);
  shoal__arrivals_free(&o->act);
  free(o->order);
  free(o->heap);
  free(o->buf);
  free(o);
}

static double rate_of(const shoal_sched_t *s, const shoal_job_t *j, int w, int p) {
  return shoal_sched_rate_consolidated(s, j, w, j->arch == SHOAL_ARCH_PS ? p : 0);
}

static double first_gain_k(const optimus_t *o, const shoal_sched_t *s, const shoal_job_t *j);
static double dshare(const optimus_t *o, const shoal_sched_t *s, const shoal_res_t *d);

/* the fewest workers j runs with (its elastic range's minimum; a job that cannot resize has min = max) */
static int min_workers(const shoal_job_t *j) {
  int maxw = j->max_workers > 0 ? j->max_workers : j->gpus;
  return j->min_workers < 1 ? 1 : j->min_workers > maxw ? maxw : j->min_workers;
}

static void optimus_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  /* best size for the fast path: grow from the minimum while the speed grows */
  int mw = min_workers(j), best = mw, maxw = j->max_workers > 0 ? j->max_workers : j->gpus;
  int ps = j->arch == SHOAL_ARCH_PS ? 1 : 0;
  double r = rate_of(s, j, mw, ps);
  for (int w = mw + 1; w <= maxw; w++) {
    int pw = j->arch == SHOAL_ARCH_PS ? (j->ps > 0 ? (j->ps < w ? j->ps : w) : 1) : 0;
    double rn = rate_of(s, j, w, pw);
    if (!(rn > r * (1 + 1e-9))) break;
    r = rn;
    best = w;
  }
  j->pint[2] = best;
  optimus_t *o = state;
  if (j->arch == SHOAL_ARCH_PS) o->n_ps++;
  shoal_res_t d = shoal_job_demand(j, best, 0);
  o->best_g += d.gpus;
  o->best_c += d.cpus;
  o->best_m += d.mem_gb;
  if (o->nfresh == o->fcap) {
    int nc = o->fcap ? o->fcap * 2 : 64;
    shoal_job_t **f = realloc(o->fresh, (size_t)nc * sizeof *f);
    if (!f) {
      o->oom = 1;
      return;
    }
    o->fresh = f;
    o->fcap = nc;
  }
  o->fresh[o->nfresh++] = j;
  if (shoal__arrivals_add(&o->act, j)) o->oom = 1;
  j->pint[4] = -1;
  j->pint[5] = -1;
  j->pkey[1] = dshare(o, s, &j->worker_demand);
  j->pkey[0] = first_gain_k(o, s, j);
  if (!(j->worker_demand.gpus >= 1)) o->n_gpuless++;
}

static int hold_set(optimus_t *o, shoal_job_t *j, int holding) {
  int i = (int)j->pint[4];
  if (holding == (i >= 0)) return 0;
  if (!holding) {
    o->hold[i] = o->hold[--o->nhold];
    o->hold[i]->pint[4] = i;
    j->pint[4] = -1;
    return 0;
  }
  if (o->nhold == o->holdcap) {
    int nc = o->holdcap ? o->holdcap * 2 : 256;
    shoal_job_t **h = realloc(o->hold, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
    o->hold = h;
    o->holdcap = nc;
  }
  j->pint[4] = o->nhold;
  o->hold[o->nhold++] = j;
  return 0;
}

static void optimus_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  optimus_t *o = state;
  shoal__arrivals_remove(&o->act, j);
  hold_set(o, j, 0);
  if (!(j->worker_demand.gpus >= 1)) o->n_gpuless--;
  if (j->arch == SHOAL_ARCH_PS) o->n_ps--;
  shoal_res_t d = shoal_job_demand(j, (int)j->pint[2], 0);
  o->best_g -= d.gpus;
  o->best_c -= d.cpus;
  o->best_m -= d.mem_gb;
}

static inline int gain_better(const gain_t *a, const gain_t *b) {
  if (a->gain != b->gain) return a->gain > b->gain;
  return (a->key >> 31) < (b->key >> 31); /* a bound first (evaluate before trusting an equal gain), then id, kind */
}

/* Entry x into the hole at i, moving up past worse parents. */
static void sift_up(optimus_t *o, int i, gain_t x) {
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!gain_better(&x, &o->heap[p])) break;
    o->heap[i] = o->heap[p];
    i = p;
  }
  o->heap[i] = x;
}

static int hpush(optimus_t *o, gain_t g) {
  if (o->nheap == o->hcap) {
    int nc = o->hcap ? o->hcap * 2 : 256;
    gain_t *h = realloc(o->heap, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
    o->heap = h;
    o->hcap = nc;
  }
  sift_up(o, o->nheap++, g);
  return 0;
}

static void sift_down(optimus_t *o, int i) {
  gain_t x = o->heap[i];
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    const gain_t *b = &x;
    if (l < o->nheap && gain_better(&o->heap[l], b)) m = l, b = &o->heap[l];
    if (r < o->nheap && gain_better(&o->heap[r], b)) m = r;
    if (m == i) break;
    o->heap[i] = o->heap[m];
    i = m;
  }
  o->heap[i] = x;
}

/* Floyd's pop: the hole at the root follows the better child down to a
 * leaf (one comparison a level instead of two), then the last entry sifts up
 * from there (rarely far: it came from the bottom). Same heap property, so
 * the same sequence of pops. */
static gain_t hpop(optimus_t *o) {
  gain_t top = o->heap[0], x = o->heap[--o->nheap];
  int n = o->nheap, i = 0;
  if (n == 0) return top;
  for (;;) {
    int l = 2 * i + 1;
    if (l >= n) break;
    int c = l + 1 < n && gain_better(&o->heap[l + 1], &o->heap[l]) ? l + 1 : l;
    o->heap[i] = o->heap[c];
    i = c;
  }
  sift_up(o, i, x);
  return top;
}

static double dshare(const optimus_t *o, const shoal_sched_t *s, const shoal_res_t *d) {
  double x = (double)d->gpus / s->cluster->gpus_total;
  if (d->cpus / o->cpu_total > x) x = d->cpus / o->cpu_total;
  if (d->mem_gb / o->mem_total > x) x = d->mem_gb / o->mem_total;
  return x > 0 ? x : 1e-12;
}

/* the gain entry of order[idx]'s next task of `kind`; 0 if none */
static int gain_of(optimus_t *o, const shoal_sched_t *s, int idx, int kind, gain_t *out) {
  shoal_job_t *j = o->order[idx];
  int w = (int)j->pint[0], p = (int)j->pint[1];
  int maxw = j->max_workers > 0 ? j->max_workers : j->gpus;
  if (kind == 0 && w >= maxw) return 0;
  if (kind == 1 && (j->arch != SHOAL_ARCH_PS || p >= w)) return 0;
  double R = j->pkey[3];
  double f0 = rate_of(s, j, w, p), f1 = kind == 0 ? rate_of(s, j, w + 1, p) : rate_of(s, j, w, p + 1);
  if (!(f0 > 0) || !(f1 > 0)) return 0;
  double g = (R / f0 - R / f1) / (kind == 0 ? j->pkey[1] : dshare(o, s, &j->ps_demand));
  if (!(g > 1e-9 * R / f0)) return 0;
  *out = gain_make(g, idx, kind, 0, j->pint[3]);
  return 1;
}

/* K_j: for every R, the gain of j's second worker as gain_of() computes it,
 * ((R/f1 - R/f2) / dshare in floating point), is <= R x K_j. With u the unit
 * roundoff, fl(R/f1) - fl(R/f2) <= R (d + u s)(1 + u) for d = 1/f1 - 1/f2,
 * s = 1/f1 + 1/f2, and the division adds (1 + u); d itself is computed
 * within 3 u s. K_j < 0 when the job never gets a second worker's entry
 * (one worker is its maximum, no speed, or a gain below gain_of()'s floor
 * 1e-9 R/f1 for every R). */
static double first_gain_k(const optimus_t *o, const shoal_sched_t *s, const shoal_job_t *j) {
  int maxw = j->max_workers > 0 ? j->max_workers : j->gpus, ps = j->arch == SHOAL_ARCH_PS ? 1 : 0;
  if (maxw <= 1) return -1;
  double f1 = rate_of(s, j, 1, ps), f2 = rate_of(s, j, 2, ps);
  if (!(f1 > 0) || !(f2 > 0)) return -1;
  double u = 1.2e-16, sum = 1 / f1 + 1 / f2, d = 1 / f1 - 1 / f2;
  double k = ((d > 0 ? d : 0) + 8 * u * sum) / dshare(o, s, &j->worker_demand) * (1 + 1e-12);
  if (k < 1e-9 / f1 * (1 - 1e-6)) return -1;
  return k;
}

static int push_gain(optimus_t *o, const shoal_sched_t *s, int idx, int kind) {
  gain_t g;
  return gain_of(o, s, idx, kind, &g) ? hpush(o, g) : 0;
}

static int fits(double *free_g, double *free_c, double *free_m, const shoal_res_t *d) {
  if (d->gpus > *free_g + 1e-9 || d->cpus > *free_c + 1e-9 || d->mem_gb > *free_m + 1e-9) return 0;
  *free_g -= d->gpus;
  *free_c -= d->cpus;
  *free_m -= d->mem_gb;
  return 1;
}

static int cmp_place_order(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pint[0] != y->pint[0]) return x->pint[0] > y->pint[0] ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int cmp_id(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  return (x->id > y->id) - (x->id < y->id);
}

static int order_room(optimus_t *o, int n) {
  if (n <= o->cap) return 0;
  shoal_job_t **ord = realloc(o->order, (size_t)n * 2 * sizeof *ord);
  if (!ord) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
  o->order = ord;
  o->cap = n * 2;
  return 0;
}

/* Fast path, everybody at its best size (sums kept at arrivals/completions):
 * when every job already is, only the new arrivals change (placed largest
 * first), else every job in arrival order. Returns the length of order[]. */
static int list_at_best(optimus_t *o) {
  int n = 0;
  if (o->all_at_best) {
    for (int i = 0; i < o->nfresh; i++)
      if (o->fresh[i]->state != SHOAL_JOB_DONE) o->order[n++] = o->fresh[i];
    o->nfresh = 0;
  } else {
    o->nfresh = 0;
    for (int id = o->act.head; id >= 0; id = o->act.next[id]) o->order[n++] = o->act.job[id]; /* arrival order */
  }
  for (int i = 0; i < n; i++) {
    o->order[i]->pint[0] = o->order[i]->pint[2];
    o->order[i]->pint[1] = 0;
  }
  return n;
}

/* First worker (+ PS) in arrival order while the aggregate f* allows; once
 * less than a GPU is left no later job fits: they get nothing, and only those
 * holding resources are looked at (they are preempted). order[0..*nlook) are
 * the jobs looked at, then the other holders; returns the length. */
static int first_workers(optimus_t *o, double *fg, double *fc, double *fm, int *nlook) {
  int n = 0, held_seen = 0; /* holders among the jobs looked at */
  for (int id = o->act.head; id >= 0; id = o->act.next[id]) {
    shoal_job_t *j = o->act.job[id];
    if (o->n_gpuless == 0 && *fg + 1e-9 < 1) break;
    held_seen += j->pint[4] >= 0;
    int ps = j->arch == SHOAL_ARCH_PS ? 1 : 0, mw = min_workers(j);
    shoal_res_t d = shoal_job_demand(j, mw, ps);
    j->pint[0] = j->pint[1] = 0;
    j->pint[5] = o->stamp;
    if (fits(fg, fc, fm, &d)) {
      j->pint[0] = mw;
      j->pint[1] = ps;
    }
    o->order[n++] = j;
  }
  *nlook = n;
  for (int i = 0; i < o->nhold && held_seen < o->nhold; i++) /* every holder looked at: none to add */
    if (o->hold[i]->pint[5] != o->stamp) {
      o->hold[i]->pint[0] = o->hold[i]->pint[1] = 0;
      o->order[n++] = o->hold[i];
    }
  if ((n - *nlook) > 1) qsort(o->order + *nlook, (size_t)(n - *nlook), sizeof *o->order, cmp_id); /* arrival order */
  return n;
}

/* The gain heap over order[0..nlook): every job now has its first worker
 * (+ PS): a PS job has no second-PS gain yet (PSs <= workers), so only the
 * second worker's gain, as a bound R x K_j; jobs started at a minimum above 1
 * get their exact gains. */
static int seed_gains(optimus_t *o, const shoal_sched_t *s, int nlook) {
  int rc;
  if (nlook > o->hcap) {
    gain_t *h = realloc(o->heap, (size_t)nlook * 2 * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
    o->heap = h;
    o->hcap = nlook * 2;
  }
  o->nheap = 0;
  for (int i = 0; i < nlook; i++) {
    shoal_job_t *j = o->order[i];
    if (!j->pint[0] || (j->pint[0] == 1 && !(j->pkey[0] >= 0))) continue;
    double R = shoal_job_remaining(j, s->now);
    j->pkey[3] = R;
    if (j->pint[0] > 1) continue; /* started at its minimum above 1: its exact gains, below */
    double b = R * j->pkey[0];
    if (b > 0) o->heap[o->nheap++] = gain_make(b, i, 0, 1, j->pint[3]);
  }
  for (int i = o->nheap / 2 - 1; i >= 0; i--) sift_down(o, i);
  for (int i = 0; i < nlook; i++) /* the bound K_j is of the second worker's gain: the others' exact gains */
    if (o->order[i]->pint[0] > 1 && ((rc = push_gain(o, s, i, 0)) || (rc = push_gain(o, s, i, 1)))) return rc;
  return 0;
}

/* The rest of the aggregate, one task at a time to the best marginal gain. */
static int hand_out_gains(optimus_t *o, const shoal_sched_t *s, double *fg, double *fc, double *fm) {
  int rc;
  while (o->nheap > 0 && *fg > 0.5) {
    gain_t g = hpop(o);
    int gi = g_idx(&g), gk = g_kind(&g);
    shoal_job_t *j = o->order[gi];
    const shoal_res_t *d = gk == 0 ? &j->worker_demand : &j->ps_demand;
    if (g_stale(&g, j)) continue; /* stale: the job grew since */
    if (g_bound(&g)) { /* its turn: the gain itself */
      if ((rc = push_gain(o, s, gi, gk))) return rc;
      continue;
    }
    if (!fits(fg, fc, fm, d)) {
      /* this kind does not fit any more; the other kind may still */
      continue;
    }
    if (gk == 0) j->pint[0]++;
    else j->pint[1]++;
    j->pint[3]++; /* both kinds' gains changed: invalidate, push fresh ones */
    if ((rc = push_gain(o, s, gi, 0)) || (rc = push_gain(o, s, gi, 1))) return rc;
  }
  return 0;
}

/* Placement of order[0..n): release changed jobs, keep unchanged ones, then
 * place the changed ones, largest first, never below their minimum; they end
 * in order[0..*nchg). */
static int place_changed(optimus_t *o, shoal_sched_t *s, int n, int *nchg_out) {
  int nchg = 0, rc;
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = o->order[i];
    if (j->alloc.workers == j->pint[0] && j->alloc.ps == j->pint[1] && j->alloc.n > 0) continue;
    if (shoal__holding(j)) {
      if ((rc = shoal_sched_preempt(s, j)) || (rc = hold_set(o, j, 0))) return rc;
    }
    if (j->pint[0] > 0) o->order[nchg++] = j;
  }
  if (nchg > 1) qsort(o->order, (size_t)nchg, sizeof *o->order, cmp_place_order);
  for (int i = 0; i < nchg; i++) {
    shoal_job_t *j = o->order[i];
    for (int w = (int)j->pint[0], mw = min_workers(j); w >= mw; w--) { /* never below its minimum */
      int p = (int)(j->pint[1] < w ? j->pint[1] : w);
      int np = j->arch == SHOAL_ARCH_PS ? shoal__place_ps_job(s->cluster, j, w, p, o->buf, s->cluster->nmachines)
                                         : shoal__place_consolidated(s->cluster, j, w, o->buf, s->cluster->nmachines);
      if (np <= 0) continue;
      rc = shoal_sched_assign(s, j, o->buf, np);
      if (rc == 0) break;
      if (rc != SHOAL_ERR_INFEASIBLE) return rc;
    }
    if ((rc = hold_set(o, j, shoal__holding(j)))) return rc;
  }
  *nchg_out = nchg;
  return 0;
}

static int optimus_schedule(void *state, shoal_sched_t *s) {
  optimus_t *o = state;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  int n = s->nactive + o->nhold, rc, nchg;
  if ((rc = order_room(o, n))) return rc;
  if (o->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
  o->stamp++;
  double fg = s->cluster->gpus_total, fc = o->cpu_total, fm = o->mem_total;
  int fast = o->n_ps == 0 && o->best_g <= fg + 1e-9 && o->best_c <= fc + 1e-9 && o->best_m <= fm + 1e-9;
  if (fast) {
    n = list_at_best(o);
  } else {
    int nlook;
    o->nfresh = 0;
    n = first_workers(o, &fg, &fc, &fm, &nlook);
    if ((rc = seed_gains(o, s, nlook)) || (rc = hand_out_gains(o, s, &fg, &fc, &fm))) return rc;
  }
  if ((rc = place_changed(o, s, n, &nchg))) return rc;
  /* did every job get its best size? (lets the next decision take the fast path) */
  o->all_at_best = fast;
  if (fast)
    for (int i = 0; i < nchg; i++)
      if (o->order[i]->alloc.workers != o->order[i]->pint[2]) o->all_at_best = 0;
  return 0;
}

const shoal_policy_ops_t shoal__policy_optimus = {
    "optimus",
    "Optimus: marginal-gain workers/PSs per job (remaining time), re-planned at arrivals and completions",
    "(none)",
    optimus_create,
    optimus_destroy,
    optimus_arrive,
    optimus_finish,
    NULL,
    optimus_schedule,
    NULL,
};
