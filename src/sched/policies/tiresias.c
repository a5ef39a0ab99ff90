/* Tiresias discretized 2D-LAS (spec §5.4; SymbioticLab/Tiresias dlas-gpu).
 *
 * Attained service a_j = GPU-seconds held (RUN + RESTART) since the job's
 * last reset. K queues with thresholds theta_0 < theta_1 < ... (GPU-s); a
 * job enters Q0 and moves to Q_{q+1} when a_j >= theta_q. Order: queues by
 * index; inside a queue running jobs first, then waiting jobs, each in order
 * of entry into the queue (arrival, demotion or promotion). On every arrival,
 * completion and queue crossing: walk that order with free = total GPUs, keep
 * or start a job whose GPUs <= free, preempt the others; consolidated
 * placement. Starvation guard (knob S, 0 = off): a waiting job outside Q0 that
 * has run before returns to Q0 with its counters reset when its waiting time
 * since the last reset reaches S x its executed time since the last reset.
 * Queue crossings are exact timers: demotion at t + (theta_q - a_j)/n_j,
 * promotion at t + (S e_j - w_j).
 * Parameters: thresholds=3250/7200 (GPU-s; the repository's defaults, three
 * queues), starve=48 and the thrash guard minrun=0 (s), runfrac=0.04: the
 * authors' rule (starve=2:runfrac=0) thrashes on a contended cluster (see
 * "thrash guard" below and docs/scheduling.md).
 *
 * Speed (the result is the plain algorithm's): waiting jobs sit in one heap
 * per requested size, keyed by (queue, entry time, id) whose keys change only
 * at promotions (their timers); holding jobs (at most the cluster's GPUs) stay
 * in walk order between decisions: after their demotions are applied (exact
 * crossing time t - (a_j - theta_q)/n_j as entry time) only the crossed and
 * new ones are sorted and merged in. The walk merges the holders with the
 * first waiting job among the sizes that fit the free GPUs (a larger one
 * would not be selected) and stops when the free GPUs reach 0, so a decision
 * costs O(H + d log d + k (C + log W)) (H holding, d of them crossed or new,
 * k waiting jobs started, C distinct sizes, W waiting), not O(active log
 * active), and waiting jobs that cannot fit are never touched. While every
 * waiting job fits in the free GPUs the walk would select everyone, so the
 * decision just starts them in order.
 * Crossing timers (demotions, promotions) are kept in the policy's own heap
 * and only the earliest is an engine wake-up: a timer that moved or belongs
 * to a job that started/stopped meanwhile costs nothing, where it used to
 * be an engine event and a whole decision. Timers are recomputed only for
 * jobs that changed in a decision (started, preempted, crossed, fired). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "sched/policies/common.h"

#define MAX_QUEUES 16
/* defaults against thrash (see the file header and docs/scheduling.md) */
#define STARVE 48
#define MINRUN_S 0
#define RUNFRAC 0.04

/* per-job fields: pint[0] queue, pint[1] entry time into the queue (double
 * bits), pint[2] rank in the holding list (-1: none), pint[4] key changed
 * since the holders were sorted (listed in chg), pint[5] decision stamp, pint[3] version of its
 * heap entry, pkey[0] held_s at the last reset, pkey[1] waiting time at the
 * last reset, pkey[2] pending timer time (0: none) */
/* A waiting-heap entry carries a copy of the key it was pushed with: a
 * promotion changes the job's key in place while its old entry is still in
 * the heap (dropped lazily), and comparing that entry through the job's
 * current key broke the heap order (a promoted Q0 job came out after Q2
 * jobs). */
typedef struct {
  shoal_job_t *j;
  int64_t ver;
  int64_t q;
  double entry;
} went_t;

/* a crossing timer: valid while at == the job's pkey[2] */
typedef struct {
  double at;
  int64_t id;
} tent_t;

typedef struct {
  int nq;
  double theta[MAX_QUEUES];
  double starve;
  double minrun, runfrac; /* thrash guard: a started job's minimum run (s, x its held time before the start) */
  long prot[MAX_QUEUES];  /* GPUs of the holders inside their minimum run, per queue (this decision) */
  double lease_due;       /* earliest end of a minimum run that held GPUs back (0: none) */
  int oom;
  /* waiting jobs: one heap per requested size (lazy deletion by version),
   * classes sorted by size, so the walk looks only at the heads of the sizes
   * that fit the free GPUs */
  struct wclass {
    int gpus;
    went_t *h;
    int n, cap;
    long cnt[MAX_QUEUES]; /* waiting jobs of this size per queue */
  } *cls;
  int ncls, clscap;
  long waiting_gpus, nwaiting;
  long hq[MAX_QUEUES]; /* GPUs of the holders per queue */
  int nhq[MAX_QUEUES]; /* holders per queue */
  /* Jobs holding GPUs, in walk order as of the last contended decision,
   * followed by those started since (in start order); a holder whose key
   * changed keeps its place until then. hrank[i] = hold[i]->pint[2], the
   * ranks increase along the list (its order, without indices that every
   * insertion would shift in every holder). A contended decision takes the
   * holders whose key changed or that are new (chg) out and inserts them by
   * key: the others are in key order already. */
  shoal_job_t **hold;
  int64_t *hrank;
  int nhold, holdcap;
  shoal_job_t **chg; /* holders marked pint[4] since the last sort (may repeat, or have left) */
  int nchg, chgcap;
  shoal_job_t **byid; /* for timers: job by id (ids are dense, arrival order) */
  int nbyid, byidcap;
  shoal_job_t **fired; /* jobs whose timer fired */
  int nfired, firedcap;
  /* Crossing timers live here, not in the engine: the engine only gets a
   * wake-up at the earliest due time (armed[]: wake-ups requested and not
   * yet passed). A timer that moved is not a stale engine event that costs
   * a whole decision any more. */
  tent_t *tq;
  int ntq, tqcap;
  double *armed;
  int narmed, armedcap;
  shoal_job_t **dirty; /* jobs whose timer must be (re)computed after the decision */
  int ndirty, dirtycap;
  shoal_job_t **due;   /* holders checked for a crossing in this decision */
  int ndue, duecap;
  int64_t stamp;       /* decision number (pint[5]: listed in due[] in that decision) */
  int timers_off;      /* holders' timers were not set (nobody waited) */
  /* scratch of one decision */
  shoal_job_t **order;
  char *want;
  int cap;
  shoal_place_t *buf;
  /* no-progress tripwire: decisions at the current instant */
  double last_now;
  long same_now;
} tiresias_t;

static int grow_ptrs(tiresias_t *t, shoal_job_t ***a, int *cap, int need) {
  if (need <= *cap) return 0;
  int nc = need * 2 > 64 ? need * 2 : 64;
  shoal_job_t **p = realloc(*a, (size_t)nc * sizeof *p);
  if (!p) {
    t->oom = 1;
    return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  }
  *a = p;
  *cap = nc;
  return 0;
}

static int tiresias_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"thresholds", "starve", "minrun", "runfrac", NULL};
  int rc = shoal__param_check("tiresias", params, keys);
  if (rc) return rc;
  tiresias_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  char th[256];
  int given = shoal__param_str(params, "thresholds", th, sizeof th);
  if (given < 0) {
    free(t);
    return given;
  }
  if (!given) snprintf(th, sizeof th, "3250/7200");
  if (shoal__list_has_empty(th, '/')) {
    free(t);
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy tiresias: thresholds=%s: an empty value (expected e.g. 3250/7200)", th);
  }
  int nth = 0;
  char *save = NULL;
  for (char *tok = strtok_r(th, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
    double v;
    if (nth == MAX_QUEUES - 1) {
      free(t);
      return shoal__seterr(SHOAL_ERR_CONFIG, "tiresias: more than %d thresholds", MAX_QUEUES - 1);
    }
    if ((rc = shoal__parse_double("policy tiresias: thresholds", tok, 1e-9, 1e18, &v))) {
      free(t);
      return rc;
    }
    if (nth > 0 && v <= t->theta[nth - 1]) {
      double prev = t->theta[nth - 1];
      free(t);
      return shoal__seterr(SHOAL_ERR_CONFIG, "policy tiresias: thresholds must increase (%g after %g)", v, prev);
    }
    t->theta[nth++] = v;
  }
  t->nq = nth + 1;
  if ((rc = shoal__param_double("tiresias", params, "starve", STARVE, 0, 1e6, &t->starve)) ||
      (rc = shoal__param_double("tiresias", params, "minrun", MINRUN_S, 0, 1e9, &t->minrun)) ||
      (rc = shoal__param_double("tiresias", params, "runfrac", RUNFRAC, 0, 1e6, &t->runfrac)) ||
      !(t->buf = malloc((size_t)s->cluster->nmachines * sizeof *t->buf))) {
    free(t);
    return rc ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  }
  *state = t;
  return 0;
}

static void tiresias_destroy(void *state) {
  tiresias_t *t = state;
  if (!t) return;
  for (int c = 0; c < t->ncls; c++) free(t->cls[c].h);
  free(t->cls);
  free(t->hold);
  free(t->hrank);
  free(t->chg);
  free(t->byid);
  free(t->fired);
  free(t->tq);
  free(t->armed);
  free(t->dirty);
  free(t->due);
  free(t->order);
  free(t->want);
  free(t->buf);
  free(t);
}

static double waited(const shoal_sched_t *s, const shoal_job_t *j) {
  return (s->now - j->arrival) - shoal_sched_held_s(s, j);
}

static double entry_of(const shoal_job_t *j) {
  double d;
  memcpy(&d, &j->pint[1], sizeof d);
  return d;
}
static void set_entry(shoal_job_t *j, double t) { memcpy(&j->pint[1], &t, sizeof t); }

/* walk order: queue, running before waiting, entry time, id (total: ids
 * are unique); inlined in the merge and the walk, which compare every
 * holder at every contended decision */
static inline int order_before(const shoal_job_t *x, const shoal_job_t *y) {
  if (x->pint[0] != y->pint[0]) return x->pint[0] < y->pint[0];
  int hx = x->pint[2] < 0, hy = y->pint[2] < 0; /* holding at the start of the decision */
  if (hx != hy) return hx < hy;
  double ex = entry_of(x), ey = entry_of(y);
  if (ex != ey) return ex < ey;
  return x->id < y->id;
}

/* ---- waiting heap ---- */
static int went_less(const went_t *a, const went_t *b) {
  if (a->q != b->q) return a->q < b->q;
  if (a->entry != b->entry) return a->entry < b->entry;
  return a->j->id < b->j->id;
}

/* class of requested size g (created if absent); -1 when out of memory */
static int class_of(tiresias_t *t, int g) {
  int lo = 0, hi = t->ncls;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (t->cls[m].gpus < g) lo = m + 1;
    else hi = m;
  }
  if (lo < t->ncls && t->cls[lo].gpus == g) return lo;
  if (t->ncls == t->clscap) {
    int nc = t->clscap ? t->clscap * 2 : 16;
    struct wclass *c = realloc(t->cls, (size_t)nc * sizeof *c);
    if (!c) {
      t->oom = 1;
      return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory"), -1;
    }
    t->cls = c;
    t->clscap = nc;
  }
  memmove(&t->cls[lo + 1], &t->cls[lo], (size_t)(t->ncls - lo) * sizeof *t->cls);
  memset(&t->cls[lo], 0, sizeof t->cls[lo]);
  t->cls[lo].gpus = g;
  t->ncls++;
  return lo;
}

/* count j as waiting in its queue (d = +1) or not any more (-1) */
static int wcount(tiresias_t *t, const shoal_job_t *j, int d) {
  int ci = class_of(t, j->gpus);
  if (ci < 0) return SHOAL_ERR_NOMEM;
  t->cls[ci].cnt[j->pint[0]] += d;
  return 0;
}

static int wpush(tiresias_t *t, shoal_job_t *j) {
  int ci = class_of(t, j->gpus);
  if (ci < 0) return SHOAL_ERR_NOMEM;
  struct wclass *c = &t->cls[ci];
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 64;
    went_t *h = realloc(c->h, (size_t)nc * sizeof *h);
    if (!h) {
      t->oom = 1;
      return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
    }
    c->h = h;
    c->cap = nc;
  }
  went_t e = {j, j->pint[3], j->pint[0], entry_of(j)};
  int i = c->n++;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!went_less(&e, &c->h[p])) break;
    c->h[i] = c->h[p];
    i = p;
  }
  c->h[i] = e;
  return 0;
}

static void cpop(struct wclass *c) {
  went_t last = c->h[--c->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    const went_t *b = &last;
    if (l < c->n && went_less(&c->h[l], b)) m = l, b = &c->h[l];
    if (r < c->n && went_less(&c->h[r], b)) m = r;
    if (m == i) break;
    c->h[i] = c->h[m];
    i = m;
  }
  if (c->n) c->h[i] = last;
}

/* top valid entry of a class, NULL if none (drops stale ones) */
static const went_t *ctop(struct wclass *c) {
  while (c->n > 0) {
    const went_t *e = &c->h[0];
    if (e->ver == e->j->pint[3] && e->j->pint[2] < 0 && e->j->state != SHOAL_JOB_DONE) return e;
    cpop(c);
  }
  return NULL;
}

/* first waiting job in walk order among those of at most `fit` GPUs (the
 * others would not be selected by the walk: free GPUs only decrease); its
 * class in *ci */
static shoal_job_t *wnext(tiresias_t *t, long fit, int *ci) {
  const went_t *best = NULL;
  for (int c = 0; c < t->ncls && t->cls[c].gpus <= fit; c++) {
    const went_t *e = ctop(&t->cls[c]);
    if (e && (!best || went_less(e, best))) {
      best = e;
      *ci = c;
    }
  }
  return best ? best->j : NULL;
}

/* (re)insert a waiting job with its current key */
static int wput(tiresias_t *t, shoal_job_t *j) {
  j->pint[3]++;
  return wpush(t, j);
}

/* rank spacing: an insertion takes the middle of its neighbours' ranks */
#define RANK_GAP ((int64_t)1 << 24)

/* index of holder j in hold[] (by its rank) */
static int hold_find(const tiresias_t *t, const shoal_job_t *j) {
  int lo = 0, hi = t->nhold - 1;
  int64_t r = j->pint[2];
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (t->hrank[m] < r) lo = m + 1;
    else hi = m;
  }
  return lo;
}

/* take holder j out of the list (it stays a holder: pint[2] >= 0) */
static void hold_del(tiresias_t *t, const shoal_job_t *j) {
  int i = hold_find(t, j);
  int k = t->nhold - i - 1;
  memmove(&t->hold[i], &t->hold[i + 1], (size_t)k * sizeof *t->hold);
  memmove(&t->hrank[i], &t->hrank[i + 1], (size_t)k * sizeof *t->hrank);
  t->nhold--;
}

static int hold_grow(tiresias_t *t) {
  if (t->nhold < t->holdcap) return 0;
  int nc = t->holdcap ? t->holdcap * 2 : 256;
  shoal_job_t **h = realloc(t->hold, (size_t)nc * sizeof *h);
  if (h) t->hold = h;
  int64_t *r = h ? realloc(t->hrank, (size_t)nc * sizeof *r) : NULL;
  if (!r) {
    t->oom = 1;
    return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  }
  t->hrank = r;
  t->holdcap = nc;
  return 0;
}

/* mark holder j as to be sorted in at the next contended decision */
static int hold_mark(tiresias_t *t, shoal_job_t *j) {
  if (j->pint[4]) return 0;
  if (grow_ptrs(t, &t->chg, &t->chgcap, t->nchg + 1)) return SHOAL_ERR_NOMEM;
  j->pint[4] = 1;
  t->chg[t->nchg++] = j;
  return 0;
}

static int hold_add(tiresias_t *t, shoal_job_t *j) {
  if (hold_grow(t)) return SHOAL_ERR_NOMEM;
  j->pint[2] = (t->nhold ? t->hrank[t->nhold - 1] : 0) + RANK_GAP;
  t->hrank[t->nhold] = j->pint[2];
  t->hold[t->nhold++] = j;
  t->hq[j->pint[0]] += j->gpus;
  t->nhq[j->pint[0]]++;
  return hold_mark(t, j);
}

static void hold_remove(tiresias_t *t, shoal_job_t *j) {
  if (j->pint[2] < 0) return;
  hold_del(t, j);
  j->pint[2] = -1;
  j->pint[4] = 0; /* its chg entry, if any, is skipped */
  t->hq[j->pint[0]] -= j->gpus;
  t->nhq[j->pint[0]]--;
}

/* insert holder j (out of the list) at its place in key order, with a rank
 * between its neighbours' (all ranks renumbered when there is no room) */
static void hold_insert(tiresias_t *t, shoal_job_t *j) {
  int lo = 0, hi = t->nhold;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (order_before(t->hold[m], j)) lo = m + 1;
    else hi = m;
  }
  int k = t->nhold - lo;
  memmove(&t->hold[lo + 1], &t->hold[lo], (size_t)k * sizeof *t->hold);
  memmove(&t->hrank[lo + 1], &t->hrank[lo], (size_t)k * sizeof *t->hrank);
  t->hold[lo] = j;
  t->nhold++;
  int64_t a = lo > 0 ? t->hrank[lo - 1] : 0, b = lo + 1 < t->nhold ? t->hrank[lo + 1] : a + 2 * RANK_GAP;
  if (b - a >= 2) {
    t->hrank[lo] = j->pint[2] = a + (b - a) / 2;
    return;
  }
  for (int i = 0; i < t->nhold; i++) t->hrank[i] = t->hold[i]->pint[2] = (int64_t)(i + 1) * RANK_GAP;
}

/* Bring the list to walk order: the marked holders leave their places and
 * are inserted by key among the others, which kept their keys since they
 * were sorted. The order is total (ids), so this is the full sort's. */
static void hold_sort(tiresias_t *t) {
  int nd = 0;
  for (int i = 0; i < t->nchg; i++) {
    shoal_job_t *j = t->chg[i];
    if (!j->pint[4]) continue; /* listed twice, or left the holders */
    j->pint[4] = 0;
    if (j->pint[2] < 0) continue;
    hold_del(t, j);
    t->chg[nd++] = j;
  }
  for (int i = 0; i < nd; i++) hold_insert(t, t->chg[i]);
  t->nchg = 0;
}

/* --check: the list is in rank order, the ranks are the jobs', the
 * per-queue sums are the holders'; after a sort, in key order */
static int hold_verify(const tiresias_t *t, int sorted) {
  long g[MAX_QUEUES] = {0};
  int c[MAX_QUEUES] = {0};
  for (int i = 0; i < t->nhold; i++) {
    const shoal_job_t *j = t->hold[i];
    if (j->pint[2] != t->hrank[i] || (i > 0 && t->hrank[i - 1] >= t->hrank[i]) || !shoal__holding(j) ||
        (sorted && i > 0 && !order_before(t->hold[i - 1], j)))
      return shoal__seterr(SHOAL_ERR_INTERNAL, "tiresias check: holder %d (job %d) out of order", i, j->id);
    g[j->pint[0]] += j->gpus;
    c[j->pint[0]]++;
  }
  for (int q = 0; q < t->nq; q++)
    if (g[q] != t->hq[q] || c[q] != t->nhq[q])
      return shoal__seterr(SHOAL_ERR_INTERNAL, "tiresias check: queue %d has %d holders of %ld GPUs, counted %d of %ld", q, c[q],
                           g[q], t->nhq[q], t->hq[q]);
  return 0;
}

/* ---- crossing timers ---- */
static int tq_less(const tent_t *a, const tent_t *b) { return a->at < b->at || (a->at == b->at && a->id < b->id); }

static int dpush(tiresias_t *t, double at) {
  if (t->narmed == t->armedcap) {
    int nc = t->armedcap ? t->armedcap * 2 : 64;
    double *a = realloc(t->armed, (size_t)nc * sizeof *a);
    if (!a) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
    t->armed = a;
    t->armedcap = nc;
  }
  int i = t->narmed++;
  while (i > 0 && at < t->armed[(i - 1) / 2]) {
    t->armed[i] = t->armed[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  t->armed[i] = at;
  return 0;
}

static void dpop(tiresias_t *t) {
  double last = t->armed[--t->narmed];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    double b = last;
    if (l < t->narmed && t->armed[l] < b) m = l, b = t->armed[l];
    if (l + 1 < t->narmed && t->armed[l + 1] < b) m = l + 1;
    if (m == i) break;
    t->armed[i] = t->armed[m];
    i = m;
  }
  if (t->narmed) t->armed[i] = last;
}

/* make sure the engine wakes the policy up at `at` or earlier */
static int arm(tiresias_t *t, shoal_sched_t *s, double at) {
  if (t->narmed && t->armed[0] <= at) return 0;
  int rc = shoal_sched_timer(s, at, 0);
  return rc ? rc : dpush(t, at);
}

static int tq_push(tiresias_t *t, shoal_sched_t *s, double at, int64_t id) {
  if (t->ntq == t->tqcap) {
    int nc = t->tqcap ? t->tqcap * 2 : 256;
    tent_t *q = realloc(t->tq, (size_t)nc * sizeof *q);
    if (!q) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
    t->tq = q;
    t->tqcap = nc;
  }
  tent_t e = {at, id};
  int i = t->ntq++;
  while (i > 0 && tq_less(&e, &t->tq[(i - 1) / 2])) {
    t->tq[i] = t->tq[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  t->tq[i] = e;
  return arm(t, s, at);
}

static void tq_pop(tiresias_t *t) {
  tent_t last = t->tq[--t->ntq];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    const tent_t *b = &last;
    if (l < t->ntq && tq_less(&t->tq[l], b)) m = l, b = &t->tq[l];
    if (l + 1 < t->ntq && tq_less(&t->tq[l + 1], b)) m = l + 1;
    if (m == i) break;
    t->tq[i] = t->tq[m];
    i = m;
  }
  if (t->ntq) t->tq[i] = last;
}

static int mark_dirty(tiresias_t *t, shoal_job_t *j) {
  if (grow_ptrs(t, &t->dirty, &t->dirtycap, t->ndirty + 1)) return SHOAL_ERR_NOMEM;
  t->dirty[t->ndirty++] = j;
  return 0;
}

static void tiresias_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  tiresias_t *t = state;
  j->pint[0] = 0;
  set_entry(j, s->now);
  j->pint[2] = -1;
  j->pint[3] = 0;
  j->pint[4] = 0;
  j->pint[5] = -1;
  j->pkey[0] = j->pkey[1] = j->pkey[2] = 0;
  if (grow_ptrs(t, &t->byid, &t->byidcap, j->id + 1)) return;
  while (t->nbyid <= j->id) t->byid[t->nbyid++] = NULL;
  t->byid[j->id] = j;
  t->waiting_gpus += j->gpus;
  t->nwaiting++;
  if (wcount(t, j, +1)) return;
  wput(t, j);
}

static void tiresias_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  tiresias_t *t = state;
  if (j->pint[2] >= 0) hold_remove(t, j);
  else { /* cannot happen: only holding jobs finish; keep the counters right anyway */
    t->waiting_gpus -= j->gpus;
    t->nwaiting--;
  }
  if (j->id < t->nbyid) t->byid[j->id] = NULL;
}

/* the engine's wake-up: the due timers are taken from tq in schedule() */
static void tiresias_timer(void *state, shoal_sched_t *s, int64_t tag) { (void)state, (void)s, (void)tag; }

/* Due times of j's next crossing, shared by update_queue() and set_timer()
 * so that a timer can never fire at a time where update_queue() then sees
 * nothing to do: with the GPU-s tolerance alone, a crossing less than half
 * an ulp of `now` ahead (t ~ 4e6 s, 16-24 GPUs) had its timer rounded to
 * `now` while the job stayed in its queue, and the same decision repeated
 * forever at one instant (contended Philly, 1M synthetic jobs).
 * Demotion of a holding job: when its attained service reaches theta_q. */
static double demote_at(const tiresias_t *t, const shoal_sched_t *s, const shoal_job_t *j, double held) {
  return s->now + (t->theta[j->pint[0]] - (held - j->pkey[0]) * j->gpus) / j->gpus;
}
/* Promotion of a waiting job: waiting time since the reset reaches S x its
 * executed time since the reset. */
static double promote_at(const tiresias_t *t, const shoal_sched_t *s, const shoal_job_t *j, double held) {
  return s->now + t->starve * (held - j->pkey[0]) - (waited(s, j) - j->pkey[1]);
}

/* Bring j's queue up to date (promotion, then demotions with their exact
 * crossing times). Returns 1 if its key changed. */
static int update_queue(tiresias_t *t, const shoal_sched_t *s, shoal_job_t *j) {
  int changed = 0;
  double held = shoal_sched_held_s(s, j);
  if (t->starve > 0 && j->pint[2] < 0 && j->pint[0] > 0 && j->first_start >= 0) {
    double e = held - j->pkey[0], w = waited(s, j) - j->pkey[1];
    if (w >= t->starve * e - 1e-9 * (1 + s->now) || promote_at(t, s, j, held) <= s->now) {
      j->pint[0] = 0;
      set_entry(j, s->now);
      j->pkey[0] = held;
      j->pkey[1] = waited(s, j);
      changed = 1;
    }
  }
  double a = (held - j->pkey[0]) * j->gpus;
  while (j->pint[0] < t->nq - 1 &&
         (a >= t->theta[j->pint[0]] * (1 - 1e-12) - 1e-9 || demote_at(t, s, j, held) <= s->now)) {
    double tc = s->now - (a - t->theta[j->pint[0]]) / j->gpus; /* crossed while holding */
    j->pint[0]++;
    set_entry(j, tc < entry_of(j) ? entry_of(j) : tc);
    changed = 1;
  }
  return changed;
}

/* update_queue() plus the per-queue sums: holders' GPUs (hq) and waiting
 * jobs' sizes (cnt) */
static int requeue(tiresias_t *t, const shoal_sched_t *s, shoal_job_t *j) {
  int q0 = (int)j->pint[0];
  int ch = update_queue(t, s, j);
  if (ch && j->pint[0] != q0) {
    if (j->pint[2] >= 0) {
      t->hq[q0] -= j->gpus;
      t->hq[j->pint[0]] += j->gpus;
      t->nhq[q0]--;
      t->nhq[j->pint[0]]++;
    } else {
      int ci = class_of(t, j->gpus);
      if (ci < 0) return ch;
      t->cls[ci].cnt[q0]--;
      t->cls[ci].cnt[j->pint[0]]++;
    }
  }
  return ch;
}

static int set_timer(tiresias_t *t, shoal_sched_t *s, shoal_job_t *j) {
  double held = shoal_sched_held_s(s, j), at = 0;
  if (shoal__holding(j)) {
    /* a crossing due now is applied here (an uncontended decision does not
     * update the holders): a holder's timer is then always in the future */
    if (j->pint[0] < t->nq - 1 && demote_at(t, s, j, held) <= s->now && requeue(t, s, j) && hold_mark(t, j))
      return SHOAL_ERR_NOMEM;
    if (j->pint[0] < t->nq - 1) at = demote_at(t, s, j, held);
  } else if (t->starve > 0 && j->pint[0] > 0 && j->first_start >= 0) {
    at = promote_at(t, s, j, held);
  }
  if (at > 0 && at < s->now) at = s->now;
  int rc = 0;
  /* push when the target moved, or when it is due now (a waiting job
   * preempted when its promotion is due; an earlier timer at this same time
   * may already have fired: a duplicate costs one decision, and the
   * promotion is then applied, see promote_at) */
  if (at > 0 && (fabs(at - j->pkey[2]) > 1e-9 * (1 + at) || at <= s->now)) {
    rc = tq_push(t, s, at, j->id);
    j->pkey[2] = at;
  } else if (at <= 0) {
    j->pkey[2] = 0; /* none pending: an old entry is dropped when it comes due */
  }
  return rc;
}

static int cmp_hold_rank(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  return (x->pint[2] > y->pint[2]) - (x->pint[2] < y->pint[2]);
}

/* collect into due[] the holders with a valid crossing timer at <= limit
 * (the timer heap is ordered by time: prune below later entries) */
static int due_walk(tiresias_t *t, int i, double limit) {
  if (i >= t->ntq || t->tq[i].at > limit) return 0;
  const tent_t *e = &t->tq[i];
  shoal_job_t *j = e->id < t->nbyid ? t->byid[e->id] : NULL;
  if (j && e->at == j->pkey[2] && j->pint[2] >= 0 && j->pint[5] != t->stamp) {
    if (grow_ptrs(t, &t->due, &t->duecap, t->ndue + 1)) return SHOAL_ERR_NOMEM;
    j->pint[5] = t->stamp;
    t->due[t->ndue++] = j;
  }
  int rc = due_walk(t, 2 * i + 1, limit);
  return rc ? rc : due_walk(t, 2 * i + 2, limit);
}

/* Apply the holders' due demotions (a holder whose key changed is marked for
 * the next sort). */
static int holders_due(tiresias_t *t, shoal_sched_t *s) {
  int rc;
  if (t->timers_off) {
    for (int i = 0; i < t->nhold; i++) {
      shoal_job_t *j = t->hold[i];
      if (requeue(t, s, j)) {
        if ((rc = hold_mark(t, j)) || (rc = mark_dirty(t, j))) return rc;
      }
    }
    return 0;
  }
  /* candidates: the holders whose timer fired, then those due within the
   * margin; in holding-list order (the order a full pass would use) */
  t->ndue = 0;
  t->stamp++;
  for (int i = 0; i < t->ndirty; i++) {
    shoal_job_t *j = t->dirty[i];
    if (j->pint[2] >= 0 && j->pint[5] != t->stamp) {
      if (grow_ptrs(t, &t->due, &t->duecap, t->ndue + 1)) return SHOAL_ERR_NOMEM;
      j->pint[5] = t->stamp;
      t->due[t->ndue++] = j;
    }
  }
  if ((rc = due_walk(t, 0, s->now + 1e-6 * (1 + fabs(s->now)) + 1))) return rc;
  if (t->ndue > 1) qsort(t->due, (size_t)t->ndue, sizeof *t->due, cmp_hold_rank);
  for (int i = 0; i < t->ndue; i++) {
    shoal_job_t *j = t->due[i];
    if (requeue(t, s, j)) {
      if ((rc = hold_mark(t, j)) || (rc = mark_dirty(t, j))) return rc;
    }
  }
  return 0;
}

/* ---- thrash guard ----
 * A job started (or restarted) at time t0 with h0 seconds held before is
 * not preempted until it has held its GPUs max(minrun, runfrac x h0) seconds
 * since t0: the walk keeps it whatever its queue, its GPUs taken out of the
 * free count up front. Each run of a job is then at least runfrac times all
 * its runs before it, so a job that holds GPUs for H seconds in total is
 * preempted O(log(H / minrun) / log(1 + runfrac)) times instead of once per
 * promotion cycle. Defaults MINRUN_S / RUNFRAC; 0/0 is the authors' rule. */
static int guard_on(const tiresias_t *t) { return t->minrun > 0 || t->runfrac > 0; }

/* end of holder j's minimum run */
static double run_end(const tiresias_t *t, const shoal_sched_t *s, const shoal_job_t *j) {
  double need = t->runfrac * j->pkey[3];
  if (need < t->minrun) need = t->minrun;
  return s->now + need - (shoal_sched_held_s(s, j) - j->pkey[3]);
}

static int in_minrun(const tiresias_t *t, const shoal_sched_t *s, const shoal_job_t *j) {
  return guard_on(t) && run_end(t, s, j) > s->now + 1e-9 * (1 + fabs(s->now));
}

static long prot_total(const tiresias_t *t) {
  long n = 0;
  for (int q = 0; q < t->nq; q++) n += t->prot[q];
  return n;
}

/* the protected holders' GPUs per queue, and a wake-up at the earliest end
 * of their minimum runs (their GPUs may then go to a waiting job) */
static int guard_scan(tiresias_t *t, shoal_sched_t *s) {
  memset(t->prot, 0, sizeof t->prot);
  t->lease_due = 0;
  if (!guard_on(t)) return 0;
  for (int i = 0; i < t->nhold; i++) {
    const shoal_job_t *j = t->hold[i];
    if (!in_minrun(t, s, j)) continue;
    double e = run_end(t, s, j);
    t->prot[j->pint[0]] += j->gpus;
    if (t->lease_due == 0 || e < t->lease_due) t->lease_due = e;
  }
  return t->lease_due > 0 ? arm(t, s, t->lease_due) : 0;
}

/* Would the walk select any waiting job? It walks queue by queue, in each
 * the holders first: with no waiting job selected before, every holder fits
 * (together they hold at most all GPUs), so a waiting job of queue q finds
 * total - (GPUs of the holders in queues <= q) free GPUs. If no waiting job
 * fits there, the walk keeps every holder and starts nobody. */
static int walk_selects(const tiresias_t *t, const shoal_sched_t *s) {
  long held = 0, after = prot_total(t);
  for (int q = 0; q < t->nq; q++) {
    held += t->hq[q];
    after -= t->prot[q];
    long room = s->cluster->gpus_total - held - after;
    for (int c = 0; c < t->ncls && t->cls[c].gpus <= room; c++)
      if (t->cls[c].cnt[q] > 0) return 1;
  }
  return 0;
}

/* Due crossing timers into fired[] (stale entries: the job's pending time
 * moved), and the runner's timer for the next one. */
static int collect_fired(tiresias_t *t, shoal_sched_t *s) {
  while (t->narmed && t->armed[0] <= s->now) dpop(t);
  while (t->ntq && t->tq[0].at <= s->now) {
    tent_t e = t->tq[0];
    tq_pop(t);
    shoal_job_t *j = e.id < t->nbyid ? t->byid[e.id] : NULL;
    if (!j || e.at != j->pkey[2]) continue;
    j->pkey[2] = 0;
    if (grow_ptrs(t, &t->fired, &t->firedcap, t->nfired + 1)) return SHOAL_ERR_NOMEM;
    t->fired[t->nfired++] = j;
  }
  return t->ntq ? arm(t, s, t->tq[0].at) : 0;
}

/* Several decisions at one instant are legitimate (a job preempted when its
 * promotion is due gets a timer at `now`), but each job is promoted at most
 * once per instant, so more than ~1 + active decisions at one time means a
 * timer that never changes anything: fail rather than hang. */
static int guard_timer_loop(tiresias_t *t, const shoal_sched_t *s) {
  if (s->now != t->last_now || t->same_now == 0) {
    t->last_now = s->now;
    t->same_now = 0;
  }
  if (++t->same_now > 2L * s->nactive + 64)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "tiresias: %ld decisions at t=%.17g without progress (timer loop)", t->same_now,
                         s->now);
  return 0;
}

/* Promotions of waiting jobs whose timer fired; every fired job gets its next
 * timer after the decision (a float-rounded timer may fire just before its
 * crossing: it is then re-set, never lost). */
static int promote_fired(tiresias_t *t, shoal_sched_t *s) {
  int rc;
  t->ndirty = 0;
  for (int i = 0; i < t->nfired; i++) {
    shoal_job_t *j = t->fired[i];
    if (j->state == SHOAL_JOB_DONE) continue;
    if ((rc = mark_dirty(t, j))) return rc;
    if (j->pint[2] >= 0) continue;
    if (requeue(t, s, j) && (rc = wput(t, j))) return rc;
  }
  t->nfired = 0;
  return 0;
}

static int order_room(tiresias_t *t, int need) {
  if (need <= t->cap) return 0;
  int nc = need * 2;
  shoal_job_t **o = realloc(t->order, (size_t)nc * sizeof *o);
  char *w = realloc(t->want, (size_t)nc);
  if (o) t->order = o;
  if (w) t->want = w;
  if (!o || !w) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  t->cap = nc;
  return 0;
}

/* Every waiting job fits: the walk selects everyone; start them in order.
 * Returns the length of the selection. */
static int select_everyone(tiresias_t *t) {
  shoal_job_t *j;
  int ci = 0, n = 0;
  while ((j = wnext(t, LONG_MAX, &ci)) != NULL) {
    cpop(&t->cls[ci]);
    t->order[n] = j;
    t->want[n++] = 1;
  }
  return n;
}

/* The contended walk over sorted holders and waiting jobs. Until it selects
 * its first waiting job every holder fits (all of them hold at most all
 * GPUs), and a waiting job of queue q comes after the holders of queues <= q:
 * it finds total - (their GPUs) free. The first waiting job selected is
 * therefore the first of the first queue q where one fits that room, and the
 * holders of queues <= q are kept: nothing changes for them, so they are not
 * listed (on Philly, 150 of ~155 holders per walk). The walk goes on from
 * there. Returns the length of the selection. */
static int select_walk(tiresias_t *t, const shoal_sched_t *s) {
  int hi = 0, ci = 0, n = 0;
  long held = 0, after = prot_total(t); /* protected GPUs in the queues after q: reserved */
  shoal_job_t *w = NULL;
  for (int q = 0; q < t->nq; q++) {
    held += t->hq[q];
    hi += t->nhq[q];
    after -= t->prot[q];
    w = wnext(t, s->cluster->gpus_total - held - after, &ci);
    if (w && w->pint[0] == q) break; /* else the first that fits is in a later queue */
    w = NULL;
  }
  long free_gpus = s->cluster->gpus_total - held - after;
  /* waiting jobs larger than the free GPUs are skipped: the walk would
   * not select them, and popping them made a decision O(W log W); the
   * first waiting job is looked up again only when it was taken or no
   * longer fits */
  while (free_gpus > 0) {
    shoal_job_t *h = hi < t->nhold ? t->hold[hi] : NULL, *j;
    if (!w && !h) break;
    if (h && (!w || order_before(h, w))) {
      j = h;
      hi++;
    } else {
      j = w;
      cpop(&t->cls[ci]);
      w = NULL;
    }
    t->order[n] = j;
    if (j == h && after > 0 && in_minrun(t, s, j)) {
      t->want[n++] = 1; /* its GPUs were reserved */
      continue;
    }
    t->want[n] = j->gpus <= free_gpus;
    if (t->want[n]) free_gpus -= j->gpus;
    n++;
    if (free_gpus > 0 && (!w || w->gpus > free_gpus)) w = wnext(t, free_gpus, &ci);
  }
  for (; hi < t->nhold; hi++) { /* walk ended: the remaining holders are preempted (unless protected) */
    t->order[n] = t->hold[hi];
    t->want[n++] = after > 0 && in_minrun(t, s, t->hold[hi]);
  }
  return n;
}

/* After the selection was applied: holding list, waiting heap and sums, and
 * the jobs that moved marked for new timers. */
static int record_moves(tiresias_t *t, const shoal_sched_t *s, int n) {
  int rc;
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = t->order[i];
    int was = j->pint[2] >= 0, is = shoal__holding(j);
    if (was != is && (rc = mark_dirty(t, j))) return rc;
    if (was && !is) {
      hold_remove(t, j);
      t->waiting_gpus += j->gpus;
      t->nwaiting++;
      if ((rc = wcount(t, j, +1)) || (rc = wput(t, j))) return rc;
    } else if (!was && is) {
      j->pkey[3] = shoal_sched_held_s(s, j); /* held before this start: its minimum run */
      if ((rc = wcount(t, j, -1)) || (rc = hold_add(t, j))) return rc;
      t->waiting_gpus -= j->gpus;
      t->nwaiting--;
    } else if (!was && !is) {
      if ((rc = wpush(t, j))) return rc; /* popped but not started: back, same key */
    }
  }
  return 0;
}

/* Timers of the jobs that changed (started, preempted, crossed, fired); an
 * unchanged job's crossing time is unchanged (attained service grows at n_j
 * per second while holding, waiting time at 1 per second while waiting).
 * After decisions where nobody waited, all holders. */
static int set_changed_timers(tiresias_t *t, shoal_sched_t *s) {
  int rc;
  if (t->timers_off) {
    for (int i = 0; i < t->nhold; i++)
      if (t->hold[i] && (rc = set_timer(t, s, t->hold[i]))) return rc;
    t->timers_off = 0;
  }
  for (int i = 0; i < t->ndirty; i++)
    if (t->dirty[i]->state != SHOAL_JOB_DONE && (rc = set_timer(t, s, t->dirty[i]))) return rc;
  return 0;
}

static int tiresias_schedule(void *state, shoal_sched_t *s) {
  tiresias_t *t = state;
  int rc;
  if (t->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  if (s->check && (rc = hold_verify(t, 0))) return rc;
  if ((rc = collect_fired(t, s))) return rc;
  int lease_ended = t->lease_due > 0 && t->lease_due <= s->now;
  if (lease_ended) t->lease_due = 0; /* guard_scan() sets the next one */
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH)) && t->nfired == 0 && !lease_ended) return 0;
  if ((rc = guard_timer_loop(t, s)) || (rc = promote_fired(t, s))) return rc;
  if (t->nwaiting == 0) {
    t->timers_off = 1; /* nobody waits: crossings cannot change anything */
    return 0;
  }
  if ((rc = order_room(t, s->nactive + 1))) return rc;
  int n;
  if (t->waiting_gpus <= s->cluster->gpus_free) {
    n = select_everyone(t);
  } else {
    /* holders' demotions: every holder when their timers may be unset
     * (nobody waited before), else only those whose crossing timer is due
     * within a margin far wider than update_queue()'s tolerance (the others
     * cannot have crossed) */
    if ((rc = holders_due(t, s)) || (rc = guard_scan(t, s))) return rc;
    if (!walk_selects(t, s)) return set_changed_timers(t, s); /* no waiting job fits anywhere: nothing changes */
    hold_sort(t);
    if (s->check && (rc = hold_verify(t, 1))) return rc;
    n = select_walk(t, s);
  }
  if ((rc = shoal__apply_selection(s, t->order, t->want, n, t->buf)) < 0 || (rc = record_moves(t, s, n))) return rc;
  if (t->nwaiting == 0) { /* nobody waits: crossings cannot change anything */
    t->timers_off = 1;
    return 0;
  }
  return set_changed_timers(t, s);
}

const shoal_policy_ops_t shoal__policy_tiresias = {
    "tiresias",
    "Tiresias discretized 2D-LAS: GPU-time queues, running-first within a queue, starvation guard",
    "thresholds=3250/7200: queue limits in GPU-seconds (K-1 values); starve=48: promotion knob S (0 = off); "
    "minrun=0, runfrac=0.04: thrash guard, a started job is not preempted before it has held its GPUs "
    "max(minrun s, runfrac x its held time before the start) (0/0 = off); starve=2:runfrac=0 is the authors' rule",
    tiresias_create,
    tiresias_destroy,
    tiresias_arrive,
    tiresias_finish,
    tiresias_timer,
    tiresias_schedule,
    NULL,
};
