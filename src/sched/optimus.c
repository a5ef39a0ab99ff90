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
 * without the heap. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/policy_util.h"

typedef struct {
  double gain;
  int idx;   /* index in order[] */
  int kind;  /* 0 worker, 1 PS */
  int64_t ver; /* the job's pint[3] when pushed: older entries are stale */
} gain_t;

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
  shoal_job_t **fresh; /* arrivals since the last decision */
  int nfresh, fcap, oom;
} optimus_t;

/* fields: pint[0] target workers, pint[1] target PSs, pint[2] best size,
 * pint[3] version of the job's heap entries */

static int optimus_create(shoal_sched_t *s, const char *params, void **state) {
  int rc = shoal__param_check("optimus", params, NULL);
  if (rc) return rc;
  optimus_t *o = calloc(1, sizeof *o);
  if (!o || !(o->buf = malloc((size_t)s->cluster->nmachines * sizeof *o->buf))) {
    free(o);
    return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
  }
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
  free(o->order);
  free(o->heap);
  free(o->buf);
  free(o);
}

static double rate_of(const shoal_sched_t *s, const shoal_job_t *j, int w, int p) {
  return shoal_sched_rate_consolidated(s, j, w, j->arch == SHOAL_ARCH_PS ? p : 0);
}

static void optimus_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  /* best size for the fast path: grow while the speed grows */
  int best = 1, maxw = j->max_workers > 0 ? j->max_workers : j->gpus;
  int ps = j->arch == SHOAL_ARCH_PS ? 1 : 0;
  double r = rate_of(s, j, 1, ps);
  for (int w = 2; w <= maxw; w++) {
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
}

static void optimus_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  optimus_t *o = state;
  if (j->arch == SHOAL_ARCH_PS) o->n_ps--;
  shoal_res_t d = shoal_job_demand(j, (int)j->pint[2], 0);
  o->best_g -= d.gpus;
  o->best_c -= d.cpus;
  o->best_m -= d.mem_gb;
}

static int gain_better(const gain_t *a, const gain_t *b, shoal_job_t **order) {
  if (a->gain != b->gain) return a->gain > b->gain;
  if (order[a->idx]->id != order[b->idx]->id) return order[a->idx]->id < order[b->idx]->id;
  return a->kind < b->kind;
}

static int hpush(optimus_t *o, gain_t g) {
  if (o->nheap == o->hcap) {
    int nc = o->hcap ? o->hcap * 2 : 256;
    gain_t *h = realloc(o->heap, (size_t)nc * sizeof *h);
    if (!h) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
    o->heap = h;
    o->hcap = nc;
  }
  int i = o->nheap++;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!gain_better(&g, &o->heap[p], o->order)) break;
    o->heap[i] = o->heap[p];
    i = p;
  }
  o->heap[i] = g;
  return 0;
}

static gain_t hpop(optimus_t *o) {
  gain_t top = o->heap[0], last = o->heap[--o->nheap];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    const gain_t *b = &last;
    if (l < o->nheap && gain_better(&o->heap[l], b, o->order)) m = l, b = &o->heap[l];
    if (r < o->nheap && gain_better(&o->heap[r], b, o->order)) m = r;
    if (m == i) break;
    o->heap[i] = o->heap[m];
    i = m;
  }
  if (o->nheap) o->heap[i] = last;
  return top;
}

static double dshare(const optimus_t *o, const shoal_sched_t *s, const shoal_res_t *d) {
  double x = (double)d->gpus / s->cluster->gpus_total;
  if (d->cpus / o->cpu_total > x) x = d->cpus / o->cpu_total;
  if (d->mem_gb / o->mem_total > x) x = d->mem_gb / o->mem_total;
  return x > 0 ? x : 1e-12;
}

static int push_gain(optimus_t *o, const shoal_sched_t *s, int idx, int kind) {
  shoal_job_t *j = o->order[idx];
  int w = (int)j->pint[0], p = (int)j->pint[1];
  int maxw = j->max_workers > 0 ? j->max_workers : j->gpus;
  if (kind == 0 && w >= maxw) return 0;
  if (kind == 1 && (j->arch != SHOAL_ARCH_PS || p >= w)) return 0;
  double R = shoal_job_remaining(j, s->now);
  double f0 = rate_of(s, j, w, p), f1 = kind == 0 ? rate_of(s, j, w + 1, p) : rate_of(s, j, w, p + 1);
  if (!(f0 > 0) || !(f1 > 0)) return 0;
  double g = (R / f0 - R / f1) / dshare(o, s, kind == 0 ? &j->worker_demand : &j->ps_demand);
  if (!(g > 1e-9 * R / f0)) return 0;
  return hpush(o, (gain_t){g, idx, kind, j->pint[3]});
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

static int optimus_schedule(void *state, shoal_sched_t *s) {
  optimus_t *o = state;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  int n = s->nactive, rc;
  if (n > o->cap) {
    shoal_job_t **ord = realloc(o->order, (size_t)n * 2 * sizeof *ord);
    if (!ord) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
    o->order = ord;
    o->cap = n * 2;
  }
  if (o->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "optimus: out of memory");
  double fg = s->cluster->gpus_total, fc = o->cpu_total, fm = o->mem_total;
  /* fast path: everybody at its best size (sums kept at arrivals/completions) */
  int fast = o->n_ps == 0 && o->best_g <= fg + 1e-9 && o->best_c <= fc + 1e-9 && o->best_m <= fm + 1e-9;
  if (fast && o->all_at_best) {
    /* only the new arrivals change: place them, largest first */
    int k = 0;
    for (int i = 0; i < o->nfresh; i++)
      if (o->fresh[i]->state != SHOAL_JOB_DONE) o->order[k++] = o->fresh[i];
    o->nfresh = 0;
    for (int i = 0; i < k; i++) {
      o->order[i]->pint[0] = o->order[i]->pint[2];
      o->order[i]->pint[1] = 0;
    }
    n = k;
  } else {
    o->nfresh = 0;
    for (int i = 0; i < n; i++) o->order[i] = s->active[i]; /* arrival order */
  }
  if (fast) {
    for (int i = 0; i < n; i++) {
      o->order[i]->pint[0] = o->order[i]->pint[2];
      o->order[i]->pint[1] = 0;
    }
  } else {
    o->nheap = 0;
    for (int i = 0; i < n; i++) {
      shoal_job_t *j = o->order[i];
      int ps = j->arch == SHOAL_ARCH_PS ? 1 : 0;
      shoal_res_t d = shoal_job_demand(j, 1, ps);
      j->pint[0] = j->pint[1] = 0;
      if (fits(&fg, &fc, &fm, &d)) {
        j->pint[0] = 1;
        j->pint[1] = ps;
      }
    }
    for (int i = 0; i < n; i++) {
      if (!o->order[i]->pint[0]) continue;
      if ((rc = push_gain(o, s, i, 0)) || (rc = push_gain(o, s, i, 1))) return rc;
    }
    while (o->nheap > 0 && fg > 0.5) {
      gain_t g = hpop(o);
      shoal_job_t *j = o->order[g.idx];
      const shoal_res_t *d = g.kind == 0 ? &j->worker_demand : &j->ps_demand;
      if (g.ver != j->pint[3]) continue; /* stale: the job grew since */
      if (!fits(&fg, &fc, &fm, d)) {
        /* this kind does not fit any more; the other kind may still */
        continue;
      }
      if (g.kind == 0) j->pint[0]++;
      else j->pint[1]++;
      j->pint[3]++; /* both kinds' gains changed: invalidate, push fresh ones */
      if ((rc = push_gain(o, s, g.idx, 0)) || (rc = push_gain(o, s, g.idx, 1))) return rc;
    }
  }
  /* placement: release changed jobs, keep unchanged ones */
  int nchg = 0;
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = o->order[i];
    if (j->alloc.workers == j->pint[0] && j->alloc.ps == j->pint[1] && j->alloc.n > 0) continue;
    if (shoal__holding(j) && (rc = shoal_sched_preempt(s, j))) return rc;
    if (j->pint[0] > 0) o->order[nchg++] = j;
  }
  qsort(o->order, (size_t)nchg, sizeof *o->order, cmp_place_order);
  for (int i = 0; i < nchg; i++) {
    shoal_job_t *j = o->order[i];
    for (int w = (int)j->pint[0]; w >= 1; w--) {
      int p = (int)(j->pint[1] < w ? j->pint[1] : w);
      int np = j->arch == SHOAL_ARCH_PS ? shoal__place_ps_job(s->cluster, j, w, p, o->buf, s->cluster->nmachines)
                                         : shoal__place_consolidated(s->cluster, j, w, o->buf, s->cluster->nmachines);
      if (np <= 0) continue;
      rc = shoal_sched_assign(s, j, o->buf, np);
      if (rc == 0) break;
      if (rc != SHOAL_ERR_INFEASIBLE) return rc;
    }
  }
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
