/* The event-driven engine (spec cluster-simulation.md §4; docs/simulator.md).
 *
 * Time only jumps to the next event: a completion (exact: rates are constant
 * between events), the end of a restart, an arrival (from the sorted job
 * array, never stored in the heap) or a policy timer. Events live in a binary
 * min-heap ordered by (time, kind, sequence number) with at most one entry
 * per job (moved in place when the job's completion moves); each carries the
 * job's version, and one left behind by a preemption is dropped on pop. After all events of one instant
 * the policy decides once; only jobs whose allocation changed are touched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "sched/model/colocation.h"
#include "sched/model/place.h"
#include "sim/sim.h"

enum { EV_FINISH = 0, EV_RESTART_DONE = 1, EV_TIMER = 2 };

typedef struct {
  double t;
  uint64_t seq;     /* kind in the top 2 bits, then a global counter: deterministic order */
  int32_t job;      /* or -1 for timers */
  uint32_t version;
  int64_t tag;
} event_t;

/* Min-heap of events with at most one entry per job: pos[job] is the
 * job's entry (-1: none), so a job whose completion moves (rate change,
 * restart, preemption) updates its entry in place instead of leaving a stale
 * one behind (under contention stale entries were most of the heap). */
typedef struct {
  event_t *a;
  size_t n, cap;
  int32_t *pos;     /* [njobs] */
} heap_t;

static inline int ev_less(const event_t *x, const event_t *y) {
  if (x->t != y->t) return x->t < y->t;
  return x->seq < y->seq;
}

static inline void heap_set(heap_t *h, size_t i, const event_t *e) {
  h->a[i] = *e;
  if (e->job >= 0) h->pos[e->job] = (int32_t)i;
}

/* 4-ary: half the depth of a binary heap. Under rack contention most
 * operations move a job's completion (tens of millions), and the moves
 * were branch-bound level by level. The order (time, seq) is total, so
 * events come out in the same sequence whatever the heap's shape. */
#define HEAP_D 4

static void sift_up(heap_t *h, size_t i, event_t e) {
  while (i > 0) {
    size_t p = (i - 1) / HEAP_D;
    if (!ev_less(&e, &h->a[p])) break;
    heap_set(h, i, &h->a[p]);
    i = p;
  }
  heap_set(h, i, &e);
}

static void sift_down(heap_t *h, size_t i, event_t e) {
  for (;;) {
    size_t c = HEAP_D * i + 1, m = i;
    if (c >= h->n) break;
    size_t end = c + HEAP_D < h->n ? c + HEAP_D : h->n;
    const event_t *best = &e;
    for (; c < end; c++)
      if (ev_less(&h->a[c], best)) {
        m = c;
        best = &h->a[c];
      }
    if (m == i) break;
    heap_set(h, i, &h->a[m]);
    i = m;
  }
  heap_set(h, i, &e);
}

static int heap_push(heap_t *h, event_t e) {
  if (e.job >= 0 && h->pos[e.job] >= 0) { /* the job's entry moves */
    size_t i = (size_t)h->pos[e.job];
    if (ev_less(&e, &h->a[i])) sift_up(h, i, e);
    else sift_down(h, i, e);
    return 0;
  }
  if (h->n == h->cap) {
    size_t nc = h->cap ? h->cap * 2 : 1024;
    event_t *a = realloc(h->a, nc * sizeof *a);
    if (!a) return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory for %zu events", nc);
    h->a = a;
    h->cap = nc;
  }
  sift_up(h, h->n++, e);
  return 0;
}

static event_t heap_pop(heap_t *h) {
  event_t top = h->a[0], last = h->a[--h->n];
  if (top.job >= 0) h->pos[top.job] = -1;
  if (h->n) sift_down(h, 0, last);
  return top;
}

/* take job's entry out of the heap (it moves to the cross-rack list) */
static void heap_remove(heap_t *h, int32_t job) {
  size_t i = (size_t)h->pos[job];
  h->pos[job] = -1;
  event_t last = h->a[--h->n];
  if (i == h->n) return;
  if (i > 0 && ev_less(&last, &h->a[(i - 1) / HEAP_D])) sift_up(h, i, last);
  else sift_down(h, i, last);
}

/* distinct requested sizes, for the Themis integrals */
#define MAX_SIZES 64
/* racks kept per job for its uplink share (more: read from the allocation) */
#define XR_MAX 8
/* (share, rate) pairs remembered per allocation: a cross-rack job's share
 * keeps returning to a few values as the counts of its racks move */
#define RM_MAX 3
/* per xjobs entry: ratings by the largest count x_k among the job's racks
 * (all its racks with one uplink U: share = U / x), 1 <= x < XTAB */
#define XTAB 64

typedef struct {
  double share, rate; /* rate < 0: not rated yet */
  double eff;         /* requested GPUs * rate / sref: the job's term of engine_t.eff_sum at this rate */
  double iso;         /* rate / sref: its Themis factor (advance_job) */
} xrate_t;

/* Per xjobs entry, what a contention update reads of a job rated by count
 * (the job's own records are scattered over the job array: a cache miss
 * each, for the ~40% of visits that find the count unchanged). While x > 0
 * the job's rating is xtab[x] and its rating_t's share and rate are not
 * kept up to date (xs_sync). */
typedef struct {
  int16_t xr[XR_MAX]; /* its racks (rating_t.xr), then the rack without count (nracks) */
  uint8_t x;          /* the count its current rating is for (0: not rated by count) */
  uint8_t k;          /* its size class (engine_t.size_idx) */
  uint8_t pad[6];
  double sref;        /* engine_t.sref of the job */
} xslot_t;

/* Per job: the rating of its allocation, in one cache line (the contention
 * updates visit tens of millions of jobs: separate arrays cost a miss each).
 * Kept from the allocation's first rating until the allocation changes. */
typedef struct {
  double share, rate;       /* last rating: uplink share and rate (rate < 0: none yet) */
  int16_t xr[XR_MAX];       /* its racks, one per run of machines in one rack */
  uint8_t ok;               /* shape, xr valid (0 after the allocation changed) */
  uint8_t xr_n;             /* entries of xr (0: more than XR_MAX, read the allocation) */
  uint8_t rm_n, rm_pos;     /* earlier ratings kept, next slot */
  uint8_t multi;            /* the allocation spans racks (its share varies) */
  uint8_t uni;              /* xr valid and its racks have one uplink: share = uplink / max x_k */
  uint8_t pad[2];
  double rm_share[RM_MAX];  /* their shares (their rates: engine_t.rm_rate) */
} rating_t;
_Static_assert(sizeof(rating_t) == 64, "rating_t: one cache line");

#define STALLED_MAX 100000L /* far above what any schedule that progresses does in a row */
/* Decisions in a row on an idle cluster (nothing running or restarting) with jobs waiting and no more
 * arrivals: the waiting jobs never fit (more CPUs or servers than any machine has), and a policy with a
 * timer (rounds, slots) would decide for ever. Far above what a policy that starts something needs
 * (OASiS admits a rejected job after `force` = 20 offers). */
#define IDLE_MAX 10000L

typedef struct engine {
  shoal_workload_t *w;
  shoal_cluster_t *c;
  const shoal_speed_t *speed;
  const shoal_sim_config_t *cfg;
  shoal_sched_t s;
  const shoal_policy_ops_t *ops;
  void *pstate;
  heap_t heap;
  uint64_t seq;
  /* per job (engine-private) */
  double *sref;         /* steps/s at the requested size, consolidated */
  double *phi_at;       /* Themis integral value at t_last */
  uint8_t *size_idx;
  /* touched jobs of the current decision and their previous allocations */
  shoal_job_t **touched;
  shoal_alloc_t *prev;
  int ntouched, touched_cap;
  /* Themis: phi[k] = integral of max(1, N(t)*size_k/G) dt */
  int nsizes;
  int sizes[MAX_SIZES];
  double phi[MAX_SIZES];
  /* metrics */
  double t_prev;
  double eff_sum;       /* sum over running jobs of requested gpus * rate / sref: the GPUs they hold times
                         * their per-GPU speed relative to the reference per-GPU speed (sref / requested) */
  int running;
  shoal_sim_result_t *res;
  int tl_cap;
  double tl_dt;
  /* rack contention (spec §3.6): jobs holding GPUs in more than one rack.
   * Rates are computed from xk, the counts as of the last update_contention;
   * xlive follows every change at once (a job adds its racks when it starts
   * sending, removes them when it stops), so an update compares the two
   * instead of recounting every cross-rack job. */
  int *xk;              /* per rack: RUN jobs with cross-rack traffic there (as of the last update) */
  int *xlive;           /* the same, now */
  shoal_job_t **xjobs;
  uint64_t *xmask;      /* per xjobs entry: its racks (bit r % 64) while it sends, else 0 */
  int nx, xcap;
  int32_t *xidx;        /* per job: index in xjobs, -1 if absent */
  int32_t *xids;        /* per xjobs entry: the job's id */
  uint8_t *xon;         /* per job: counted in xlive */
  /* per job: the shape of its allocation and its last rating (alloc_rate) */
  shoal_shape_t *shape;
  rating_t *rt;          /* [njobs], 64-byte aligned inside rt_mem */
  void *rt_mem;
  double *rshare;       /* per rack: uplink / max(1, xk), with xk */
  double *rm_rate;      /* per job: [RM_MAX] rates of rating_t.rm_share */
  int xdirty;
  /* allocation changes in a row that left the job with no more work done
   * than it ever had (no finish in between): a policy under which no job
   * progresses never ends (Tiresias with queue thresholds below restart
   * cost x GPUs preempts every job during its restart; Gavel's short rounds
   * with checkpoints rarer than a round lose each round's work) */
  long stalled;
  long idle_decisions; /* see IDLE_MAX */
  double *work_hwm; /* per job: the most work it has had done at an allocation change */
  /* Completions of the cross-rack jobs, per xjobs entry (job -1, t = inf:
   * none), instead of in the heap: a contention update moves the completions
   * of tens of them at once, and moving each in the heap was a quarter of
   * the run (Tiresias on Philly). A job's one entry is either here or in the
   * heap, never both; the engine takes the earlier of the heap's top and
   * xfe[xf_min], so events come out in the same (time, seq) order. */
  event_t *xfe;
  int xf_min;           /* earliest entry of xfe, -1 if none (valid unless xf_scan) */
  int xf_scan;          /* xf_min must be looked up again (the earliest moved later) */
  /* interference (cfg->interference; NULL ifactor: off): per job the factor its speed model's rate is
   * multiplied by (1 / its slowdown where it sits), and the machines whose holders changed since the
   * last interference update */
  double *ifactor;
  shoal__colo_t colo;
  uint8_t *mdirty;
  int32_t *mlist;
  int nmdirty;
  uint32_t *istamp, iround; /* per job: the update that last visited it */
  /* [xcap][XTAB]: per xjobs entry, its allocation's ratings by x (rating_t.uni);
   * a contention update re-rates tens of jobs each time, their shares
   * cycling over more values than rating_t keeps */
  xrate_t *xtab;
  xslot_t *xs;          /* [xcap] */
  int32_t *xvis, *xvis_x; /* [xcap]: one contention update's entries to visit, their counts */
} engine_t;

static const event_t xf_none = {INFINITY, UINT64_MAX, -1, 0, 0};

/* forget the ratings of xjobs entry i (a new job or allocation there) */
static void xtab_clear(engine_t *e, int i) {
  xrate_t *t = &e->xtab[(size_t)i * XTAB];
  for (int k = 0; k < XTAB; k++) t[k].rate = -1;
  e->xs[i].x = 0;
  for (int k = 0; k < XR_MAX; k++) e->xs[i].xr[k] = (int16_t)e->c->nracks; /* count 1 until rated by count */
}

/* bring the rating_t of a job rated by count (xjobs entry i) up to date */
static inline void xs_sync(engine_t *e, int i, rating_t *rt) {
  const xslot_t *xs = &e->xs[i];
  if (!xs->x) return;
  const xrate_t *xt = &e->xtab[(size_t)i * XTAB + xs->x];
  rt->share = xt->share;
  rt->rate = xt->rate;
}

static void xf_rescan(engine_t *e) {
  int m = 0;
  for (int i = 1; i < e->nx; i++)
    if (ev_less(&e->xfe[i], &e->xfe[m])) m = i;
  e->xf_min = e->nx > 0 && e->xfe[m].job >= 0 ? m : -1;
  e->xf_scan = 0;
}

static inline void xf_set(engine_t *e, int i, const event_t *ev) {
  if (!e->xf_scan) {
    if (e->xf_min == i) {
      if (!ev_less(ev, &e->xfe[i])) e->xf_scan = 1; /* moved later: another may be first now */
    } else if (e->xf_min < 0 || ev_less(ev, &e->xfe[e->xf_min])) {
      e->xf_min = i;
    }
  }
  e->xfe[i] = *ev;
}

static inline void xf_clear(engine_t *e, int i) {
  e->xfe[i] = xf_none;
  if (e->xf_min == i) e->xf_scan = 1;
}

/* the next event (NULL: none): the heap's top or the earliest cross-rack completion */
static inline const event_t *ev_top(engine_t *e) {
  if (e->xf_scan) xf_rescan(e);
  const event_t *h = e->heap.n ? &e->heap.a[0] : NULL;
  if (e->xf_min < 0) return h;
  const event_t *x = &e->xfe[e->xf_min];
  return h && ev_less(h, x) ? h : x;
}

static event_t ev_pop(engine_t *e) {
  const event_t *top = ev_top(e);
  if (e->heap.n && top == &e->heap.a[0]) return heap_pop(&e->heap);
  event_t ev = *top;
  xf_clear(e, e->xf_min);
  return ev;
}

static int push(engine_t *e, int kind, double t, int32_t job, uint32_t version, int64_t tag) {
  event_t ev = {t, ((uint64_t)kind << 62) | e->seq++, job, version, tag};
  if (job >= 0) {
    int32_t ix = e->xidx[job];
    if (ix >= 0) { /* a cross-rack job */
      if (kind == EV_FINISH) {
        if (e->heap.pos[job] >= 0) heap_remove(&e->heap, job); /* its entry moves here */
        xf_set(e, ix, &ev);
        return 0;
      }
      if (e->xfe[ix].job >= 0) xf_clear(e, ix); /* its entry moves to the heap */
    }
  }
  return heap_push(&e->heap, ev);
}

static void hook_touch(void *arg, shoal_job_t *j) {
  engine_t *e = arg;
  if (j->touched) return;
  if (e->ntouched == e->touched_cap) {
    int nc = e->touched_cap ? e->touched_cap * 2 : 256;
    shoal_job_t **t = realloc(e->touched, (size_t)nc * sizeof *t);
    shoal_alloc_t *p = realloc(e->prev, (size_t)nc * sizeof *p);
    if (t) e->touched = t;
    if (p) {
      e->prev = p;
      for (int i = e->touched_cap; i < nc; i++) p[i].p = NULL, p[i].cap = 0;
    }
    if (!t || !p) abort(); /* cannot continue consistently; out of memory */
    e->touched_cap = nc;
  }
  /* the previous allocation, in a buffer kept by the slot (no allocation
   * per touched job) */
  shoal_alloc_t *pv = &e->prev[e->ntouched];
  shoal_place_t *buf = pv->p;
  int cap = pv->cap;
  if (j->alloc.n > cap) {
    cap = j->alloc.n > 8 ? j->alloc.n : 8;
    buf = realloc(buf, (size_t)cap * sizeof *buf);
    if (!buf) abort();
  }
  *pv = j->alloc;
  pv->p = buf;
  pv->cap = cap;
  if (j->alloc.n) memcpy(pv->p, j->alloc.p, (size_t)j->alloc.n * sizeof *pv->p);
  e->touched[e->ntouched++] = j;
  j->touched = e->ntouched;
}

static int hook_timer(void *arg, double at, int64_t tag) {
  engine_t *e = arg;
  return push(e, EV_TIMER, at, -1, 0, tag);
}

/* Bring j's counters to time t (rates constant since t_last). */
static void advance_job(engine_t *e, shoal_job_t *j, double t) {
  double dt = t - j->t_last;
  if (dt > 0) {
    int k = e->size_idx[j->id];
    if (j->state == SHOAL_JOB_RUN) {
      double dw = j->rate * dt;
      j->work_done += dw;
      j->run_s += dt;
      j->gpu_s += dt * j->alloc.workers;
      /* Themis: iso_time += dwork / S_iso; S_iso = min(1, G/(N n)) sref over the interval */
      if (e->sref[j->id] > 0) j->iso_time += j->rate / e->sref[j->id] * (e->phi[k] - e->phi_at[j->id]);
    } else if (j->state == SHOAL_JOB_RESTART) {
      j->restart_s += dt;
      j->gpu_s += dt * j->alloc.workers;
      e->res->restart_gpu_s += dt * j->alloc.workers;
    }
  }
  j->t_last = t;
  e->phi_at[j->id] = e->phi[e->size_idx[j->id]];
}

static void set_rate(engine_t *e, shoal_job_t *j, double rate) {
  double sr = e->sref[j->id];
  if (j->state == SHOAL_JOB_RUN && sr > 0) e->eff_sum -= j->gpus * j->rate / sr;
  j->rate = rate;
  if (j->state == SHOAL_JOB_RUN && sr > 0) e->eff_sum += j->gpus * j->rate / sr;
}

static int schedule_finish(engine_t *e, shoal_job_t *j, double t);

static int spans_racks(const engine_t *e, const shoal_alloc_t *a) {
  return a->n > 1 && e->c->m[a->p[0].machine].rack != e->c->m[a->p[a->n - 1].machine].rack;
}

static double rack_share(const engine_t *e, int r) {
  int x = e->xk[r] > 0 ? e->xk[r] : 1;
  return e->c->racks[r].uplink_gbps / x;
}

/* The job's share of the uplinks of the racks it touches: min_k U_k / x_k
 * (racks in allocation order, from the list kept with its shape). */
static inline double xr_share(const engine_t *e, const rating_t *rt) {
  double b = 0;
  for (int i = 0; i < rt->xr_n; i++) {
    double share = e->rshare[rt->xr[i]];
    if (b == 0 || share < b) b = share;
  }
  return b;
}

static double xrack_share(const engine_t *e, const shoal_job_t *j) {
  const rating_t *rt = &e->rt[j->id];
  if (rt->xr_n > 0) return xr_share(e, rt);
  double b = 0;
  int last = -1;
  for (int i = 0; i < j->alloc.n; i++) {
    int r = e->c->m[j->alloc.p[i].machine].rack;
    if (r == last) continue;
    last = r;
    double share = e->rshare[r];
    if (b == 0 || share < b) b = share;
  }
  return b;
}

/* j's racks, one per run of machines in the same rack, as xrack_share visits them */
static void xr_keep(engine_t *e, const shoal_job_t *j) {
  int16_t *rk = e->rt[j->id].xr;
  int n = 0, last = -1;
  for (int i = 0; i < j->alloc.n; i++) {
    int r = e->c->m[j->alloc.p[i].machine].rack;
    if (r == last) continue;
    last = r;
    if (n == XR_MAX || r > INT16_MAX) {
      n = 0; /* too many: xrack_share reads the allocation */
      break;
    }
    rk[n++] = (int16_t)r;
  }
  rating_t *rt = &e->rt[j->id];
  rt->xr_n = (uint8_t)n;
  rt->uni = n > 0;
  for (int i = 1; i < n; i++)
    if (e->c->racks[rk[i]].uplink_gbps != e->c->racks[rk[0]].uplink_gbps) rt->uni = 0;
}

/* The speed model's rate of j for a shape, slowed by interference where it sits. */
static inline double job_rate(const engine_t *e, const shoal_job_t *j, const shoal_shape_t *sh) {
  double r = e->speed->rate(e->speed, e->c, j, sh);
  return e->ifactor ? r * e->ifactor[j->id] : r;
}

/* The rate of cross-rack job j (rating valid) at uplink share `share`: one of
 * the allocation's earlier ratings, else the speed model's. */
static double rate_at_share(engine_t *e, const shoal_job_t *j, rating_t *rt, double share) {
  double r, *mr = &e->rm_rate[(size_t)j->id * RM_MAX];
  int k = 0;
  while (k < rt->rm_n && rt->rm_share[k] != share) k++;
  if (k < rt->rm_n) {
    r = mr[k];
  } else {
    shoal_shape_t sh = e->shape[j->id];
    sh.xrack_gbps = share;
    r = job_rate(e, j, &sh);
    k = rt->rm_pos;
    rt->rm_share[k] = share;
    mr[k] = r;
    rt->rm_pos = (uint8_t)((k + 1) % RM_MAX);
    if (rt->rm_n < RM_MAX) rt->rm_n++;
  }
  rt->share = share;
  rt->rate = r;
  if (e->xidx[j->id] >= 0) e->xs[e->xidx[j->id]].x = 0; /* rated by share, not by count */
  return r;
}

/* The rate of j's allocation. Its shape is kept from the allocation's first
 * rating (rating_t.ok until the allocation changes), and a cross-rack job
 * whose uplink share is the one it was last rated with keeps that rate: the
 * speed model is a pure function of the shape and the share. */
static double alloc_rate(engine_t *e, const shoal_job_t *j) {
  int id = j->id;
  rating_t *rt = &e->rt[id];
  if (rt->ok && e->xidx[id] >= 0) xs_sync(e, e->xidx[id], rt);
  if (!rt->ok) {
    e->shape[id] = shoal__shape_of(e->c, &j->alloc);
    rt->ok = 1;
    rt->rate = -1;
    rt->rm_n = rt->rm_pos = 0;
    rt->xr_n = 0;
    rt->uni = 0;
    if (e->xidx[id] >= 0) e->xs[e->xidx[id]].x = 0;
    rt->multi = e->shape[id].racks > 1;
    if (rt->multi) xr_keep(e, j);
  }
  if (!rt->multi) { /* one rack: the shape's rate, never re-rated */
    if (rt->rate < 0) {
      rt->share = e->shape[id].xrack_gbps;
      rt->rate = job_rate(e, j, &e->shape[id]);
    }
    return rt->rate;
  }
  double share = xrack_share(e, j);
  if (rt->rate >= 0 && share == rt->share) return rt->rate;
  return rate_at_share(e, j, rt, share);
}

/* One of the parallel cross-rack arrays to n elements; on failure it keeps its old block (and size). */
static int regrow(void **a, size_t n, size_t elem) {
  void *p = realloc(*a, n * elem);
  if (!p) return -1;
  *a = p;
  return 0;
}

static int x_set(engine_t *e, shoal_job_t *j, int member) {
  int32_t *ix = &e->xidx[j->id];
  if (member == (*ix >= 0)) return 0;
  e->xdirty = 1;
  if (!member) {
    xs_sync(e, *ix, &e->rt[j->id]);
    if (e->xfe[*ix].job >= 0) { /* its event (stale or not) goes on in the heap */
      event_t ev = e->xfe[*ix];
      xf_clear(e, *ix);
      int rc = heap_push(&e->heap, ev);
      if (rc) return rc;
    }
    shoal_job_t *last = e->xjobs[--e->nx];
    e->xjobs[*ix] = last;
    e->xmask[*ix] = e->xmask[e->nx];
    e->xids[*ix] = e->xids[e->nx];
    e->xfe[*ix] = e->xfe[e->nx];
    if (e->xf_min == e->nx) e->xf_min = *ix;
    if (*ix != e->nx) memcpy(&e->xtab[(size_t)*ix * XTAB], &e->xtab[(size_t)e->nx * XTAB], XTAB * sizeof *e->xtab);
    e->xs[*ix] = e->xs[e->nx];
    e->xidx[last->id] = *ix;
    *ix = -1;
    return 0;
  }
  if (e->nx == e->xcap) {
    int nc = e->xcap ? e->xcap * 2 : 64;
    if (regrow((void **)&e->xjobs, nc, sizeof *e->xjobs) || regrow((void **)&e->xmask, nc, sizeof *e->xmask) ||
        regrow((void **)&e->xids, nc, sizeof *e->xids) || regrow((void **)&e->xfe, nc, sizeof *e->xfe) ||
        regrow((void **)&e->xtab, (size_t)nc * XTAB, sizeof *e->xtab) || regrow((void **)&e->xs, nc, sizeof *e->xs) ||
        regrow((void **)&e->xvis, nc, sizeof *e->xvis) || regrow((void **)&e->xvis_x, nc, sizeof *e->xvis_x))
      return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
    e->xcap = nc;
  }
  *ix = e->nx;
  e->xfe[e->nx] = xf_none;
  xtab_clear(e, e->nx);
  e->xmask[e->nx] = 0;
  e->xids[e->nx] = j->id;
  e->xjobs[e->nx++] = j;
  return 0;
}

/* Count (d = +1) or uncount (-1) the racks of allocation a in xlive: one per
 * run of machines in the same rack, as a recount over the running cross-rack
 * jobs would. */
static uint64_t x_count(engine_t *e, const shoal_alloc_t *a, int d) {
  uint64_t mask = 0;
  int last = -1;
  for (int k = 0; k < a->n; k++) {
    int r = e->c->m[a->p[k].machine].rack;
    if (r != last) e->xlive[r] += d;
    last = r;
    mask |= 1ull << (r & 63);
  }
  return mask;
}

/* j stops sending across racks (preempted, resized, finished); a is the
 * allocation it was counted with */
static void x_off(engine_t *e, shoal_job_t *j, const shoal_alloc_t *a) {
  if (!e->xon[j->id]) return;
  x_count(e, a, -1);
  e->xon[j->id] = 0;
  if (e->xidx[j->id] >= 0) e->xmask[e->xidx[j->id]] = 0;
}

/* j sends across racks if it is a cross-rack job in RUN */
static void x_on(engine_t *e, shoal_job_t *j) {
  int32_t ix = e->xidx[j->id];
  if (e->xon[j->id] || ix < 0 || j->state != SHOAL_JOB_RUN) return;
  e->xmask[ix] = x_count(e, &j->alloc, +1);
  e->xon[j->id] = 1;
}

/* Bring x_k to the current counts and re-rate the running cross-rack jobs
 * whose share changed: only those touching a rack whose count changed can
 * have a new rate (a rate is always computed from the counts of the last
 * update), so the others are not re-rated. The jobs are visited in xjobs
 * order, as a full scan would (the order of the heap moves and of the
 * efficiency sum's terms). With more than 64 racks the masks alias racks: a
 * job visited for nothing keeps its rate (its share is unchanged). */
/* largest count among the racks of a job rated by count (at least 1) */
static inline int xs_count(const engine_t *e, const xslot_t *xs) {
  int x = 1;
  for (int k = 0; k < XR_MAX; k++) { /* no early exit: the racks' number varies, a fixed loop does not mispredict */
    int c = e->xk[xs->xr[k]];
    x = c > x ? c : x;
  }
  return x;
}

/* Re-rate job j of xjobs entry i to its rating at count x (xtab, rated),
 * from its rating at count ox (0: none, its rating_t is up to date): what
 * advance_job, set_rate and schedule_finish do, in the same operations, with
 * the efficiency and Themis factors of both rates from xtab (pure functions
 * of the rate, computed once per allocation and count). */
static int xchange(engine_t *e, int i, shoal_job_t *j, int ox, int x, double t) {
  xslot_t *xs = &e->xs[i];
  const xrate_t *nw = &e->xtab[(size_t)i * XTAB + x];
  double r = nw->rate;
  xs->x = (uint8_t)x;
  if (r == j->rate) return 0;
  const xrate_t *old = ox > 0 ? &e->xtab[(size_t)i * XTAB + ox] : NULL;
  if (old && old->rate != j->rate) old = NULL;
  if (j->state != SHOAL_JOB_RUN) { /* not sending: cannot happen (x_on); the plain path */
    advance_job(e, j, t);
    set_rate(e, j, r);
  } else {
    double sr = xs->sref, dt = t - j->t_last, oeff, oiso;
    if (old) oeff = old->eff, oiso = old->iso;
    else oeff = j->gpus * j->rate / sr, oiso = j->rate / sr;
    int id = j->id, k = xs->k;
    if (dt > 0) {
      double dw = j->rate * dt;
      j->work_done += dw;
      j->run_s += dt;
      j->gpu_s += dt * j->alloc.workers;
      if (sr > 0) j->iso_time += oiso * (e->phi[k] - e->phi_at[id]);
    }
    j->t_last = t;
    e->phi_at[id] = e->phi[k];
    if (sr > 0) {
      e->eff_sum -= oeff;
      e->eff_sum += nw->eff;
    }
    j->rate = r;
  }
  j->version++;
  return schedule_finish(e, j, t);
}

static int update_contention(engine_t *e, double t) {
  e->xdirty = 0;
  uint64_t changed = 0;
  for (int r = 0; r < e->c->nracks; r++)
    if (e->xk[r] != e->xlive[r]) {
      changed |= 1ull << (r & 63);
      e->xk[r] = e->xlive[r];
      e->rshare[r] = rack_share(e, r);
    }
  if (!changed) return 0;
  /* First the entries to visit: sending, on a changed rack, and rated by
   * count with another count now, or not rated by count. Whether a count
   * moved is a coin toss (~60% of visits on Philly 64x8), so this pass
   * decides it without branches; the second visits the list in xjobs order. */
  int nv = 0;
  for (int i = 0; i < e->nx; i++) {
    int x = xs_count(e, &e->xs[i]), ox = e->xs[i].x;
    e->xvis[nv] = i;
    e->xvis_x[nv] = x;
    nv += ((e->xmask[i] & changed) != 0) & ((x != ox) | (ox == 0));
  }
  for (int v = 0; v < nv; v++) {
    int i = e->xvis[v];
    xslot_t *xs = &e->xs[i];
    rating_t *rt;
    double r;
    int x = 0, ox = xs->x;
    if (ox) { /* rated by count, and the count moved */
      x = e->xvis_x[v];
      rt = &e->rt[e->xids[i]];
      if (x < XTAB) {
        const xrate_t *xt = &e->xtab[(size_t)i * XTAB + x];
        if (xt->rate >= 0) { /* U / x != U / ox: another share */
          int rc = xchange(e, i, e->xjobs[i], ox, x, t);
          if (rc) return rc;
          continue;
        }
      }
      xs_sync(e, i, rt); /* a share not rated yet: through rt */
    } else {
      rt = &e->rt[e->xids[i]];
      if (rt->ok && rt->uni && rt->rate >= 0) { /* from now on rated by count */
        shoal_job_t *j = e->xjobs[i];
        memcpy(xs->xr, rt->xr, sizeof xs->xr);
        for (int k = rt->xr_n; k < XR_MAX; k++) xs->xr[k] = (int16_t)e->c->nracks;
        xs->k = e->size_idx[j->id];
        xs->sref = e->sref[j->id];
        x = xs_count(e, xs);
      }
    }
    shoal_job_t *j = e->xjobs[i];
    if (x > 0) {
      /* one uplink over its racks: the share is U / (largest count), and
       * the ratings of this allocation are kept by that count */
      if (x < XTAB) {
        xrate_t *xt = &e->xtab[(size_t)i * XTAB + x];
        double prev = rt->share; /* the share j runs at (rt is up to date here) */
        if (xt->rate < 0) {
          double share = xr_share(e, rt);
          xt->share = share;
          xt->rate = share == prev ? rt->rate : rate_at_share(e, j, rt, share);
          xt->eff = j->gpus * xt->rate / xs->sref;
          xt->iso = xt->rate / xs->sref;
        }
        if (xt->share == prev) {
          xs->x = (uint8_t)x;
          continue;
        }
        int rc = xchange(e, i, j, ox, x, t);
        if (rc) return rc;
        continue;
      } else {
        xs->x = 0;
        double share = xr_share(e, rt);
        if (share == rt->share) continue;
        r = rate_at_share(e, j, rt, share);
      }
    } else if (rt->ok && rt->xr_n > 0 && rt->rate >= 0) {
      /* a sending job runs at its last rating's rate: same share, same
       * rate, and the job itself is not read */
      double share = xr_share(e, rt);
      if (share == rt->share) continue;
      r = rate_at_share(e, j, rt, share);
    } else {
      r = alloc_rate(e, j);
    }
    if (r == j->rate) continue;
    advance_job(e, j, t);
    set_rate(e, j, r);
    j->version++;
    int rc = schedule_finish(e, j, t);
    if (rc) return rc;
  }
  return 0;
}

static int schedule_finish(engine_t *e, shoal_job_t *j, double t) {
  if (j->rate <= 0) return 0; /* holds resources without progress: no completion until changed */
  double rem = j->work - j->work_done;
  if (rem < 0) rem = 0;
  return push(e, EV_FINISH, t + rem / j->rate, j->id, j->version, 0);
}

static void set_state(engine_t *e, shoal_job_t *j, int st) {
  int was_run = j->state == SHOAL_JOB_RUN || j->state == SHOAL_JOB_RESTART;
  int is_run = st == SHOAL_JOB_RUN || st == SHOAL_JOB_RESTART;
  double sr = e->sref[j->id];
  if (j->state == SHOAL_JOB_RUN && sr > 0) e->eff_sum -= j->gpus * j->rate / sr;
  j->state = (int8_t)st;
  if (st != SHOAL_JOB_RUN) j->rate = 0;
  if (j->state == SHOAL_JOB_RUN && sr > 0) e->eff_sum += j->gpus * j->rate / sr;
  e->running += is_run - was_run;
}

/* interference: the machines of allocation a changed holders */
static void i_mark(engine_t *e, const shoal_alloc_t *a) {
  for (int i = 0; i < a->n; i++) {
    int m = a->p[i].machine;
    if (!e->mdirty[m]) e->mdirty[m] = 1, e->mlist[e->nmdirty++] = m;
  }
}

/* Re-rate the jobs on machines whose holders changed, whose slowdown moved: as an allocation change
 * does (the rating is redone with the new factor), without a restart. */
static int i_update(engine_t *e, double t) {
  shoal__slots_t *sl = e->s.slots;
  e->iround++;
  for (int d = 0; d < e->nmdirty; d++) {
    int m = e->mlist[d];
    e->mdirty[m] = 0;
    for (int k = 0; k < e->c->m[m].cap.gpus; k++) {
      shoal_job_t *j = shoal__slots_owner(sl, m, k);
      if (!j || e->istamp[j->id] == e->iround) continue;
      e->istamp[j->id] = e->iround;
      double f = 1 / shoal__colo_slowdown(&e->colo, sl, j);
      if (f == e->ifactor[j->id]) continue;
      e->ifactor[j->id] = f;
      e->rt[j->id].ok = 0;
      if (e->xidx[j->id] >= 0) xtab_clear(e, e->xidx[j->id]);
      if (j->state != SHOAL_JOB_RUN) continue; /* restarting: rated when it runs */
      advance_job(e, j, t);
      set_rate(e, j, alloc_rate(e, j));
      j->version++;
      int rc = schedule_finish(e, j, t);
      if (rc) return rc;
    }
  }
  e->nmdirty = 0;
  return 0;
}

/* Apply the allocation changes of one decision. */
static int apply_changes(engine_t *e, double t) {
  int rc = 0;
  for (int i = 0; i < e->ntouched; i++) {
    shoal_job_t *j = e->touched[i];
    shoal_alloc_t *old = &e->prev[i];
    j->touched = 0;
    int changed = !shoal__place_equal(old->p, old->n, j->alloc.p, j->alloc.n);
    if (!changed) goto next;
    if (e->ifactor) {
      i_mark(e, old);
      i_mark(e, &j->alloc);
    }
    x_off(e, j, old); /* counted with its old allocation */
    e->rt[j->id].ok = 0;
    if (e->xidx[j->id] >= 0) xtab_clear(e, e->xidx[j->id]);
    /* counters up to t under the old allocation (alloc.workers is used for GPU-s) */
    double old_rate = j->rate;
    {
      shoal_alloc_t now = j->alloc;
      j->alloc = *old;
      advance_job(e, j, t);
      set_state(e, j, SHOAL_JOB_WAIT); /* detach from the metrics with the old allocation */
      j->alloc = now;
    }
    int was_holding = old->n > 0;
    j->version++;
    if (j->alloc.n == 0) {
      if (was_holding) {
        j->n_preempt++;
        e->res->preemptions++;
        if (e->cfg->checkpoint_s > 0) {
          /* lose the work since the last checkpoint: run time since the last
           * multiple of c seconds, at the rate the job had (approximation
           * when its rate changed within that span) */
          double lost = fmod(j->run_s, e->cfg->checkpoint_s) * old_rate;
          j->work_done = lost < j->work_done ? j->work_done - lost : 0;
        }
      }
    }
    if (was_holding) {
      if (j->work_done > e->work_hwm[j->id]) e->work_hwm[j->id] = j->work_done, e->stalled = 0;
      else e->stalled++;
    }
    if (j->alloc.n == 0) goto next;
    if (j->alloc.n > j->max_machines) j->max_machines = j->alloc.n;
    double delay;
    if (j->first_start < 0) {
      j->first_start = t;
      delay = e->cfg->start_cost;
    } else {
      delay = e->cfg->restart_cost; /* resume, resize or migration */
      j->n_realloc++;
      e->res->reallocations++;
    }
    if (delay > 0) {
      set_state(e, j, SHOAL_JOB_RESTART);
      j->restart_until = t + delay;
      rc = push(e, EV_RESTART_DONE, t + delay, j->id, j->version, 0);
    } else {
      set_state(e, j, SHOAL_JOB_RUN);
      set_rate(e, j, alloc_rate(e, j));
      rc = schedule_finish(e, j, t);
    }
    if (rc) break;
  next:
    if (!rc && changed) {
      int now_x = spans_racks(e, &j->alloc);
      if (now_x || e->xidx[j->id] >= 0) e->xdirty = 1; /* state or racks changed */
      rc = x_set(e, j, now_x);
      if (!rc) x_on(e, j); /* started at once (no restart cost) */
    }
    if (rc) break;
  }
  e->ntouched = 0;
  return rc;
}

/* The active jobs: states, elastic ranges, ratings, work; their resources
 * summed per machine into used[] and the running ones counted. */
static int check_jobs(engine_t *e, double t, shoal_res_t *used, int *running) {
  for (int i = 0; i < e->s.nactive; i++) {
    const shoal_job_t *j = e->s.active[i];
    if (j->state == SHOAL_JOB_DONE || j->state == SHOAL_JOB_FUTURE)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d in the active set has state %d", t, j->id, j->state);
    if ((j->alloc.n > 0) != (j->state == SHOAL_JOB_RUN || j->state == SHOAL_JOB_RESTART))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d state %d with %d machines", t, j->id, j->state, j->alloc.n);
    *running += j->alloc.n > 0;
    /* a job runs within its elastic range (a rigid job, min = max = gpus, at its size) */
    int maxw = j->max_workers > j->gpus ? j->max_workers : j->gpus, minw = j->min_workers;
    if (j->alloc.n > 0 && (j->alloc.workers < minw || j->alloc.workers > maxw))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d runs with %d workers, outside its range %d..%d", t,
                           j->id, j->alloc.workers, minw, maxw);
    if (j->state == SHOAL_JOB_RUN && !(e->rt[j->id].ok && e->rt[j->id].rate == j->rate))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d runs at %.17g, not at its last rating", t, j->id, j->rate);
    for (int k = 0; k < j->alloc.n; k++) {
      shoal_res_t d = shoal_job_demand(j, j->alloc.p[k].workers, j->alloc.p[k].ps);
      shoal_res_t *u = &used[j->alloc.p[k].machine];
      u->gpus += d.gpus;
      u->cpus += d.cpus;
      u->mem_gb += d.mem_gb;
    }
    if (j->work_done > j->work * (1 + 1e-9) + 1e-9)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d did %.17g of %.17g steps", t, j->id, j->work_done, j->work);
  }
  return 0;
}

/* Every machine against what its jobs use: capacity, free counts, free bucket; *free_total: the free GPUs. */
static int check_machines(const engine_t *e, double t, const shoal_res_t *used, int *free_total) {
  const shoal_cluster_t *c = e->c;
  for (int m = 0; m < c->nmachines; m++) {
    const shoal_machine_t *mm = &c->m[m];
    if (used[m].gpus > mm->cap.gpus || used[m].cpus > mm->cap.cpus + 1e-6 || used[m].mem_gb > mm->cap.mem_gb + 1e-6)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: machine %d over capacity (%d GPUs of %d)", t, m, used[m].gpus,
                           mm->cap.gpus);
    if (mm->free.gpus != mm->cap.gpus - used[m].gpus || fabs(mm->free.cpus - (mm->cap.cpus - used[m].cpus)) > 1e-6)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: machine %d free-resource bookkeeping drifted", t, m);
    if (shoal__cluster_next_with_free(c, mm->free.gpus, m) != m)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: machine %d missing from its free bucket", t, m);
    *free_total += mm->free.gpus;
  }
  return 0;
}

/* Rack contention counts, recounted from the running jobs. */
static int check_rack_counts(engine_t *e, double t) {
  const shoal_cluster_t *c = e->c;
  int rc = 0;
  for (int r = 0; r < c->nracks && !rc; r++) {
    int x = 0;
    for (int i = 0; i < e->s.nactive; i++) {
      const shoal_job_t *j = e->s.active[i];
      if (j->state != SHOAL_JOB_RUN || !spans_racks(e, &j->alloc)) continue;
      for (int k = 0; k < j->alloc.n; k++)
        if (c->m[j->alloc.p[k].machine].rack == r) {
          x++;
          break;
        }
    }
    if (x != e->xk[r] || x != e->xlive[r]) rc = shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: rack %d has %d cross-rack jobs, counted %d", t, r, x, e->xk[r]);
  }
  return rc;
}

/* Cross-rack completions: each entry is its xjobs job's only one (not in the
 * heap too), a completion; the remembered earliest is the earliest. */
static int check_cross_rack_events(const engine_t *e, double t) {
  for (int i = 0; i < e->nx; i++) {
    const event_t *ev = &e->xfe[i];
    if (ev->job < 0) continue;
    if (ev->job != e->xids[i] || e->heap.pos[ev->job] >= 0 || (ev->seq >> 62) != EV_FINISH)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: cross-rack entry %d (job %d) misplaced", t, i, ev->job);
    else if (!e->xf_scan && (e->xf_min < 0 || ev_less(ev, &e->xfe[e->xf_min])))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: cross-rack entry %d is before the earliest kept", t, i);
  }
  return 0;
}

/* Ratings kept by count: the count is the racks' largest, the entry the rating. */
static int check_count_ratings(engine_t *e, double t) {
  int rc = 0;
  for (int i = 0; i < e->nx && !rc; i++) {
    const rating_t *rt = &e->rt[e->xids[i]];
    const xslot_t *xs = &e->xs[i];
    if (!e->xmask[i] || !xs->x) continue;
    int x = 1, k;
    for (k = 0; k < rt->xr_n; k++)
      if (e->xk[rt->xr[k]] > x) x = e->xk[rt->xr[k]];
    for (k = 0; k < XR_MAX && (k < rt->xr_n ? xs->xr[k] == rt->xr[k] : xs->xr[k] == e->c->nracks); k++) {}
    const xrate_t *xt = &e->xtab[(size_t)i * XTAB + xs->x];
    const shoal_job_t *j = e->xjobs[i];
    if (!rt->ok || !rt->uni || k < XR_MAX || x != xs->x || xs->k != e->size_idx[j->id] || xs->sref != e->sref[j->id] ||
        xt->share != rt->share || xt->rate != rt->rate || xr_share(e, rt) != rt->share ||
        (xs->sref > 0 && (xt->eff != j->gpus * xt->rate / xs->sref || xt->iso != xt->rate / xs->sref)))
      rc = shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d rated at count %d, its racks' count is %d", t, e->xids[i],
                         xs->x, x);
  }
  return rc;
}

/* The earliest cross-rack entry exists, and no job has two events. */
static int check_event_heap(const engine_t *e, double t) {
  if (!e->xf_scan && e->xf_min >= 0 && (e->xf_min >= e->nx || e->xfe[e->xf_min].job < 0))
    return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: earliest cross-rack entry %d is empty", t, e->xf_min);
  for (size_t i = 0; i < e->heap.n; i++) {
    const event_t *ev = &e->heap.a[i];
    if (ev->job >= 0 && (e->heap.pos[ev->job] != (int32_t)i ||
                         (e->xidx[ev->job] >= 0 && e->xfe[e->xidx[ev->job]].job >= 0)))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: job %d has two events", t, ev->job);
  }
  return 0;
}

/* Independent check of the bookkeeping (SHOAL_SIM_CHECK=1, tests). */
static int check_invariants(engine_t *e, double t) {
  shoal_res_t *used = calloc((size_t)e->c->nmachines, sizeof *used);
  if (!used) return shoal__seterr(SHOAL_ERR_NOMEM, "sim check: out of memory");
  int running = 0, free_total = 0;
  for (int i = 0; i < e->nx; i++) xs_sync(e, i, &e->rt[e->xids[i]]); /* the ratings of jobs rated by count */
  int rc = check_jobs(e, t, used, &running);
  if (!rc) rc = check_machines(e, t, used, &free_total);
  free(used);
  if (rc) return rc;
  if (free_total != e->c->gpus_free) rc = shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: cluster free GPUs drifted", t);
  if (!rc) rc = check_rack_counts(e, t);
  if (running != e->running) rc = shoal__seterr(SHOAL_ERR_INTERNAL, "sim check t=%.6f: running count drifted", t);
  if (!rc) rc = check_cross_rack_events(e, t);
  if (!rc) rc = check_count_ratings(e, t);
  if (!rc) rc = check_event_heap(e, t);
  return rc;
}

static void timeline_add(engine_t *e, double t, int force) {
  shoal_sim_result_t *r = e->res;
  if (!force && r->ntimeline > 0 && t - r->timeline[r->ntimeline - 1].t < e->tl_dt) return;
  /* the final row: not again when the last event's row was recorded (same instant, same state) */
  if (force && r->ntimeline > 0 && r->timeline[r->ntimeline - 1].t == t) return;
  if (r->ntimeline == e->tl_cap) {
    /* keep memory bounded: drop every other point, double the resolution */
    int k = 0;
    for (int i = 0; i < r->ntimeline; i += 2) r->timeline[k++] = r->timeline[i];
    r->ntimeline = k;
    e->tl_dt *= 2;
  }
  shoal_timeline_pt_t *p = &r->timeline[r->ntimeline++];
  p->t = t;
  p->busy = e->c->gpus_total - e->c->gpus_free;
  p->running = e->running;
  p->waiting = e->s.nactive - e->running;
}

/* Integrate the metrics and Themis integrals over [t_prev, t]. */
static void advance_time(engine_t *e, double t) {
  double dt = t - e->t_prev;
  if (dt <= 0) return;
  int busy = e->c->gpus_total - e->c->gpus_free;
  e->res->busy_gpu_s += busy * dt;
  e->res->eff_gpu_s += e->eff_sum * dt;
  double N = e->s.nactive, G = e->c->gpus_total;
  for (int k = 0; k < e->nsizes; k++) {
    double f = N * e->sizes[k] / G;
    e->phi[k] += dt * (f > 1 ? f : 1);
  }
  e->t_prev = t;
}

static int finish_job(engine_t *e, shoal_job_t *j, double t) {
  advance_job(e, j, t);
  if (e->cfg->check && fabs(j->work_done - j->work) > 1e-6 * j->work + 1e-9)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check: job %d finished with %.17g of %.17g steps", j->id, j->work_done, j->work);
  j->work_done = j->work;
  e->stalled = 0;
  x_off(e, j, &j->alloc);
  set_state(e, j, SHOAL_JOB_DONE);
  int xrc = x_set(e, j, 0);
  if (xrc) return xrc;
  if (e->ifactor) i_mark(e, &j->alloc);
  shoal__sched_release(&e->s, j);
  for (int k = 0; k < j->alloc.n; k++) {
    shoal_res_t d = shoal_job_demand(j, j->alloc.p[k].workers, j->alloc.p[k].ps);
    shoal__cluster_give(e->c, j->alloc.p[k].machine, &d);
  }
  free(j->alloc.p);
  memset(&j->alloc, 0, sizeof j->alloc); /* p NULL, cap 0 */
  j->finish = t;
  j->version++;
  shoal__sched_remove_active(&e->s, j);
  e->res->finished++;
  if (t > e->res->t_last) e->res->t_last = t;
  if (e->ops->finish) e->ops->finish(e->pstate, &e->s, j);
  return 0;
}

void shoal__sim_config_default(shoal_sim_config_t *c) {
  memset(c, 0, sizeof *c);
  c->restart_cost = 30;
  c->start_cost = 0;
  c->sample_s = 600;
  c->seed = 1;
}

void shoal__sim_result_free(shoal_sim_result_t *r) {
  free(r->timeline);
  memset(r, 0, sizeof *r);
}

static int engine_setup(engine_t *e) {
  shoal_workload_t *w = e->w;
  size_t n = (size_t)w->njobs;
  e->sref = calloc(n ? n : 1, sizeof *e->sref);
  e->phi_at = calloc(n ? n : 1, sizeof *e->phi_at);
  e->work_hwm = calloc(n ? n : 1, sizeof *e->work_hwm);
  e->size_idx = calloc(n ? n : 1, 1);
  e->xidx = malloc((n ? n : 1) * sizeof *e->xidx);
  e->xk = calloc((size_t)e->c->nracks + 1, sizeof *e->xk); /* [nracks]: always 0 (xslot_t.xr) */
  e->xlive = calloc((size_t)e->c->nracks, sizeof *e->xlive);
  e->xon = calloc(n ? n : 1, 1);
  e->heap.pos = malloc((n ? n : 1) * sizeof *e->heap.pos);
  e->shape = malloc((n ? n : 1) * sizeof *e->shape);
  /* calloc, not aligned_alloc + memset: pages of jobs that never run
   * stay untouched (peak RSS) */
  e->rt_mem = calloc((n ? n : 1) + 1, sizeof *e->rt);
  e->rt = e->rt_mem ? (rating_t *)(((uintptr_t)e->rt_mem + 63) & ~(uintptr_t)63) : NULL;
  e->rshare = malloc((size_t)e->c->nracks * sizeof *e->rshare);
  e->rm_rate = malloc((n ? n : 1) * RM_MAX * sizeof *e->rm_rate);
  if (!e->rshare || !e->rm_rate)
    return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
  for (int r = 0; r < e->c->nracks; r++) e->rshare[r] = rack_share(e, r);
  if (e->cfg->interference) {
    e->ifactor = malloc((n ? n : 1) * sizeof *e->ifactor);
    e->istamp = calloc(n ? n : 1, sizeof *e->istamp);
    e->mdirty = calloc((size_t)e->c->nmachines, 1);
    e->mlist = malloc((size_t)e->c->nmachines * sizeof *e->mlist);
    if (!e->ifactor || !e->istamp || !e->mdirty || !e->mlist || !shoal__sched_slots(&e->s))
      return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
    for (size_t i = 0; i < n; i++) e->ifactor[i] = 1;
    int rc = shoal__colo_init(&e->colo, e->cfg->interference, e->speed);
    if (rc) return rc;
  }
  if (!e->shape || !e->rt) return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
  if (!e->xidx || !e->xk || !e->xlive || !e->xon || !e->heap.pos) return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
  for (size_t i = 0; i < n; i++) e->xidx[i] = -1, e->heap.pos[i] = -1;
  e->tl_cap = 8192;
  e->tl_dt = e->cfg->sample_s > 0 ? e->cfg->sample_s : 600;
  e->res->timeline = malloc((size_t)e->tl_cap * sizeof *e->res->timeline);
  if (!e->sref || !e->phi_at || !e->work_hwm || !e->size_idx || !e->res->timeline) return shoal__seterr(SHOAL_ERR_NOMEM, "sim: out of memory");
  for (size_t i = 0; i < n; i++) {
    shoal_job_t *j = &w->jobs[i];
    int k;
    for (k = 0; k < e->nsizes; k++)
      if (e->sizes[k] == j->gpus) break;
    if (k == e->nsizes) {
      if (e->nsizes == MAX_SIZES) k = MAX_SIZES - 1; /* more distinct sizes than slots: share the last (metric only) */
      else e->sizes[e->nsizes++] = j->gpus;
    }
    e->size_idx[i] = (uint8_t)k;
    shoal_shape_t sh = shoal__shape_consolidated(e->c, j->gpus, j->arch == SHOAL_ARCH_PS ? j->ps : 0);
    e->sref[i] = e->speed->rate(e->speed, e->c, j, &sh);
  }
  return 0;
}

/* The engine's memory, the scheduler context and the cluster (after the
 * policy's state is gone); what unfinished jobs hold too. */
static void engine_free(engine_t *e) {
  shoal_workload_t *w = e->w;
  for (long i = 0; i < w->njobs; i++) {
    free(w->jobs[i].alloc.p);
    w->jobs[i].alloc.p = NULL;
    w->jobs[i].alloc.n = w->jobs[i].alloc.cap = 0;
  }
  shoal__sched_fini(&e->s);
  shoal__cluster_destroy(e->c);
  free(e->heap.a);
  free(e->heap.pos);
  free(e->sref);
  free(e->phi_at);
  free(e->work_hwm);
  free(e->size_idx);
  free(e->xidx);
  free(e->xk);
  free(e->xlive);
  free(e->xon);
  free(e->xmask);
  free(e->shape);
  free(e->rt_mem);
  free(e->rshare);
  free(e->rm_rate);
  free(e->ifactor);
  free(e->istamp);
  free(e->mdirty);
  free(e->mlist);
  shoal__colo_fini(&e->colo);
  free(e->xids);
  free(e->xfe);
  free(e->xtab);
  free(e->xs);
  free(e->xvis);
  free(e->xvis_x);
  free(e->xjobs);
  free(e->touched);
  for (int i = 0; i < e->touched_cap; i++) free(e->prev[i].p);
  free(e->prev);
}

/* The next instant *tn, dropping job events left behind by a preemption (so
 * that one never wakes the engine up); 1 when nothing is left, 2 past the
 * horizon. */
static int next_instant(engine_t *e, long next, double *tn) {
  shoal_workload_t *w = e->w;
  const event_t *top;
  while ((top = ev_top(e)) && top->job >= 0 && top->version != w->jobs[top->job].version) {
    ev_pop(e);
    e->res->events++;
  }
  int have_heap = top != NULL, have_arr = next < w->njobs;
  if (!have_heap && !have_arr) return 1;
  *tn = have_heap ? top->t : INFINITY;
  if (have_arr && w->jobs[next].arrival < *tn) *tn = w->jobs[next].arrival;
  if (e->cfg->horizon_s > 0 && *tn > e->res->t_first + e->cfg->horizon_s) return 2;
  return 0;
}

/* Completions and restart ends at t first: they free or activate resources. */
static int job_events(engine_t *e, double t) {
  const event_t *top;
  int rc;
  while ((top = ev_top(e)) && top->t == t && (top->seq >> 62) < EV_TIMER) {
    event_t ev = ev_pop(e);
    e->res->events++;
    shoal_job_t *j = &e->w->jobs[ev.job];
    if (ev.version != j->version) continue; /* stale */
    if ((ev.seq >> 62) == EV_FINISH) {
      if (j->state != SHOAL_JOB_RUN) continue;
      if ((rc = finish_job(e, j, t))) return rc;
      e->s.events |= SHOAL_EV_FINISH;
    } else {
      if (j->state != SHOAL_JOB_RESTART) continue;
      advance_job(e, j, t);
      set_state(e, j, SHOAL_JOB_RUN);
      set_rate(e, j, alloc_rate(e, j));
      if (e->xidx[j->id] >= 0) e->xdirty = 1; /* it starts sending across racks */
      x_on(e, j);
      j->version++;
      if ((rc = schedule_finish(e, j, t))) return rc;
      e->s.events |= SHOAL_EV_RESTART_DONE;
    }
  }
  return 0;
}

/* The jobs arriving at t (from *next on, in arrival order), then the policy's timers due at t. */
static int arrivals_and_timers(engine_t *e, double t, long *next) {
  shoal_workload_t *w = e->w;
  int rc;
  while (*next < w->njobs && w->jobs[*next].arrival == t) {
    shoal_job_t *j = &w->jobs[(*next)++];
    e->res->events++;
    j->state = SHOAL_JOB_WAIT;
    j->t_last = t;
    e->phi_at[j->id] = e->phi[e->size_idx[j->id]];
    if ((rc = shoal__sched_add_active(&e->s, j))) return rc;
    if (e->ops->arrive) e->ops->arrive(e->pstate, &e->s, j);
    e->s.events |= SHOAL_EV_ARRIVAL;
  }
  if (e->s.nactive > e->res->peak_active) e->res->peak_active = e->s.nactive;
  const event_t *top;
  while ((top = ev_top(e)) && top->t == t && (top->seq >> 62) == EV_TIMER) {
    event_t ev = ev_pop(e);
    e->res->events++;
    if (e->ops->timer) e->ops->timer(e->pstate, &e->s, ev.tag);
    e->s.events |= SHOAL_EV_TIMER;
  }
  return 0;
}

/* One policy decision when something happened, timed. */
static int decide(engine_t *e) {
  if (!e->s.events) return 0;
  shoal_sim_result_t *r = e->res;
  r->decisions++;
  double d0 = shoal__now_s();
  int rc = e->ops->schedule(e->pstate, &e->s);
  double dt = shoal__now_s() - d0;
  r->decide_s += dt;
  if (dt > r->decide_max_s) r->decide_max_s = dt;
  if (rc) return rc;
  e->s.events = 0;
  return 0;
}

/* A policy that lets no job progress is an error; jobs that can never start
 * on an idle cluster with nothing left to arrive end the run (*stop). */
static int progress_guard(engine_t *e, double t, long next, int *stop) {
  const shoal_sim_config_t *cfg = e->cfg;
  shoal_workload_t *w = e->w;
  *stop = 0;
  if (e->stalled > STALLED_MAX)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED,
                         "sim: policy %s lets no job progress: %ld preemptions and reallocations in a row left their "
                         "job with no more work done than before and no job finished (restart cost %g s, checkpoint "
                         "every %g s: e.g. Tiresias thresholds below restart cost x GPUs, or rounds shorter than the "
                         "checkpoint interval), at t=%.0f s with %ld of %ld jobs finished",
                         e->ops->name, e->stalled, cfg->restart_cost, cfg->checkpoint_s, t, (long)e->res->finished,
                         (long)w->njobs);
  if (e->running == 0 && next == w->njobs && e->s.nactive > 0) {
    if (++e->idle_decisions > IDLE_MAX) {
      SHOAL_WARN("SIM", "policy %s: %d jobs wait on an idle cluster with no job left to arrive, after %ld decisions "
                 "that started none: they never fit (e.g. more CPUs, memory or servers than a machine has); the "
                 "run ends here", e->ops->name, e->s.nactive, e->idle_decisions - 1);
      *stop = 1;
    }
  } else {
    e->idle_decisions = 0;
  }
  return 0;
}

/* The event loop, instant by instant: job events, arrivals, timers, one
 * decision, its changes applied. *t: the last instant; *cut: the horizon
 * stopped the run before its last event. */
static int run_events(engine_t *e, double *t, int *cut) {
  shoal_workload_t *w = e->w;
  shoal_sim_result_t *r = e->res;
  const shoal_sim_config_t *cfg = e->cfg;
  long next = 0, progress_step = w->njobs / 200 + 1, progress_next = progress_step;
  int rc = 0, stop = 0;
  for (;;) {
    double tn;
    int k = next_instant(e, next, &tn);
    if (k) {
      *cut = k == 2;
      return 0;
    }
    if (tn < *t) return shoal__seterr(SHOAL_ERR_INTERNAL, "sim: time went back from %.17g to %.17g", *t, tn);
    *t = tn;
    advance_time(e, *t);
    e->s.now = *t;
    if ((rc = job_events(e, *t)) || (rc = arrivals_and_timers(e, *t, &next)) || (rc = decide(e)) ||
        (rc = apply_changes(e, *t)) || (e->nmdirty && (rc = i_update(e, *t))) ||
        (rc = progress_guard(e, *t, next, &stop)))
      return rc;
    if (stop) return 0;
    if (e->xdirty && (rc = update_contention(e, *t))) return rc;
    if (cfg->check && (rc = check_invariants(e, *t))) return rc;
    timeline_add(e, *t, 0);
    if (cfg->progress && r->finished >= progress_next) {
      cfg->progress(cfg->progress_arg, r->finished, w->njobs);
      progress_next = r->finished + progress_step;
    }
  }
}

/* With checks on: every completion processed once, every job finished
 * (without a horizon), no job restarting longer than its restarts allow. */
static int check_end(const engine_t *e) {
  const shoal_workload_t *w = e->w;
  const shoal_sim_result_t *r = e->res;
  const shoal_sim_config_t *cfg = e->cfg;
  long done = 0;
  for (long i = 0; i < w->njobs; i++) done += w->jobs[i].state == SHOAL_JOB_DONE;
  if (done != r->finished)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check: %ld jobs DONE but %ld completions processed", done, r->finished);
  if (cfg->horizon_s <= 0 && r->unfinished)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check: %ld jobs never finished (policy %s left them waiting)", r->unfinished,
                         e->ops->name);
  for (long i = 0; i < w->njobs; i++) {
    const shoal_job_t *j = &w->jobs[i];
    double max_restart = j->n_realloc * cfg->restart_cost + cfg->start_cost;
    if (j->restart_s > max_restart + 1e-6)
      return shoal__seterr(SHOAL_ERR_INTERNAL, "sim check: job %d spent %.3f s restarting, more than %d restarts allow", j->id,
                           j->restart_s, j->n_realloc);
  }
  return 0;
}

/* The end of the run at t: up to the horizon when it cut the run (nothing
 * changes between the last event and the horizon: the GPU-seconds and the
 * active jobs' progress are accounted up to it, where the utilization span
 * ends), else at the last completion; jobs still active are counted, never
 * silently dropped. */
static int end_run(engine_t *e, double t, int cut) {
  shoal_sim_result_t *r = e->res;
  const shoal_sim_config_t *cfg = e->cfg;
  if (cut) {
    t = r->t_first + cfg->horizon_s;
    advance_time(e, t);
    r->t_end = t;
  } else r->t_end = r->t_last > r->t_first ? r->t_last : r->t_first;
  timeline_add(e, t, 1);
  for (int i = 0; i < e->s.nactive; i++) advance_job(e, e->s.active[i], t);
  r->unfinished = e->w->njobs - r->finished;
  int rc = cfg->check ? check_end(e) : 0;
  if (rc) return rc;
  if (r->unfinished)
    SHOAL_WARN("SIM", "policy %s: %ld of %ld jobs unfinished at t=%.0f s", e->ops->name, r->unfinished, r->njobs, t);
  return 0;
}

/* The engine, the scheduler context and the policy's state for a run (on
 * e->c, which is destroyed with everything else when this fails). */
static int engine_start(engine_t *e, const char *params, shoal_sim_config_t *cfg2) {
  int check = cfg2->check, rc;
  if (!check) {
    int env = 0;
    if ((rc = shoal__config_bool("SHOAL_SIM_CHECK", 0, &env))) goto fail_cluster;
    check = env;
  }
  cfg2->check = check;
  e->cfg = cfg2;
  shoal__workload_reset(e->w);
  if ((rc = shoal__sched_init(&e->s, e->c, e->speed, 1024))) goto fail_cluster;
  e->s.hooks.touch = hook_touch;
  e->s.hooks.timer = hook_timer;
  e->s.engine = e;
  e->s.nvcs = e->w->nvcs;
  e->s.seed = cfg2->seed;
  e->s.interference = cfg2->interference;
  e->s.restart_cost = cfg2->restart_cost;
  e->s.check = check;
  e->res->njobs = e->w->njobs;
  e->res->gpus = e->c->gpus_total;
  if ((rc = engine_setup(e)) || (rc = e->ops->create(&e->s, params, &e->pstate))) {
    engine_free(e);
    free(e->res->timeline);
    return rc;
  }
  return 0;
fail_cluster:
  shoal__cluster_destroy(e->c);
  return rc;
}

int shoal__sim_run(shoal_workload_t *w, const shoal_cluster_spec_t *cs, const shoal_speed_t *speed,
                   const shoal_policy_ops_t *ops, const char *params, const shoal_sim_config_t *cfg,
                   shoal_sim_result_t *res) {
  engine_t e;
  memset(&e, 0, sizeof e);
  e.xf_min = -1;
  shoal_sim_result_t r;
  memset(&r, 0, sizeof r);
  e.w = w;
  e.speed = speed;
  e.cfg = cfg;
  e.ops = ops;
  e.res = &r;
  double wall0 = shoal__now_s();
  int rc = shoal__cluster_create(cs, &e.c);
  if (rc) return rc;
  shoal_sim_config_t cfg2 = *cfg;
  if ((rc = engine_start(&e, params, &cfg2))) return rc;
  int cut = 0;
  double t = w->njobs ? w->jobs[0].arrival : 0;
  r.t_first = t;
  e.t_prev = t;
  e.s.events = SHOAL_EV_START;
  if ((rc = run_events(&e, &t, &cut)) || (rc = end_run(&e, t, cut))) {
    ops->destroy(e.pstate);
    engine_free(&e);
    free(r.timeline);
    return rc;
  }
  r.wall_s = shoal__now_s() - wall0;
  if (ops->stats) ops->stats(e.pstate, r.policy_stats, sizeof r.policy_stats);
  ops->destroy(e.pstate);
  engine_free(&e);
  *res = r;
  return 0;
}
