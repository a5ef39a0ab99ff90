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
 * queues), starve=2.
 *
 * Speed: queue positions are updated lazily. While every waiting job fits in
 * the free GPUs the full walk would select every job, so the decision only
 * starts the waiting jobs (no sort of the running ones, no timers). Queue
 * crossings only happen while a job holds GPUs, and a job stops holding only
 * in a full decision, which first brings every queue up to date with the
 * exact crossing time t - (a_j - theta_q)/n_j as its entry time; so the lazy
 * state equals the eager one whenever it matters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "sched/policy_util.h"

#define MAX_QUEUES 16

/* per-job fields: pint[0] queue, pint[1] entry time into the queue (double
 * bits), pint[2] 1 while in the waiting list, pkey[0] held_s at reset,
 * pkey[1] waiting time at reset, pkey[2] pending timer time (0: none) */
typedef struct {
  int nq;
  double theta[MAX_QUEUES];
  double starve;
  int dirty;
  shoal_job_t **wait; /* jobs holding nothing (arrival order not kept) */
  int nwait, wcap, oom;
  shoal_job_t **order;
  char *want;
  int cap;
  shoal_place_t *buf;
} tiresias_t;

static int tiresias_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"thresholds", "starve", NULL};
  int rc = shoal__param_check("tiresias", params, keys);
  if (rc) return rc;
  tiresias_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  char th[256];
  if (!shoal__param_str(params, "thresholds", th, sizeof th)) snprintf(th, sizeof th, "3250/7200");
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
  if ((rc = shoal__param_double("tiresias", params, "starve", 2, 0, 1e6, &t->starve)) ||
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
  free(t->wait);
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

static void add_wait(tiresias_t *t, shoal_job_t *j) {
  if (j->pint[2]) return;
  if (t->nwait == t->wcap) {
    int nc = t->wcap ? t->wcap * 2 : 256;
    shoal_job_t **w = realloc(t->wait, (size_t)nc * sizeof *w);
    if (!w) {
      t->oom = 1;
      return;
    }
    t->wait = w;
    t->wcap = nc;
  }
  t->wait[t->nwait++] = j;
  j->pint[2] = 1;
}

static void tiresias_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  tiresias_t *t = state;
  j->pint[0] = 0;
  set_entry(j, s->now);
  j->pkey[0] = 0;
  j->pkey[1] = 0;
  j->pkey[2] = 0;
  j->pint[2] = 0;
  add_wait(t, j);
}

/* Bring j's queue up to date (promotion, then demotions with their exact
 * crossing times). */
static void update_queue(tiresias_t *t, const shoal_sched_t *s, shoal_job_t *j) {
  double held = shoal_sched_held_s(s, j);
  if (t->starve > 0 && !shoal__holding(j) && j->pint[0] > 0 && j->first_start >= 0) {
    double e = held - j->pkey[0], w = waited(s, j) - j->pkey[1];
    if (w >= t->starve * e - 1e-6 * (1 + e)) {
      j->pint[0] = 0;
      set_entry(j, s->now);
      j->pkey[0] = held;
      j->pkey[1] = waited(s, j);
    }
  }
  double a = (held - j->pkey[0]) * j->gpus;
  while (j->pint[0] < t->nq - 1 && a >= t->theta[j->pint[0]] * (1 - 1e-12) - 1e-9) {
    double tc = s->now - (a - t->theta[j->pint[0]]) / j->gpus; /* crossed while holding */
    j->pint[0]++;
    set_entry(j, tc < entry_of(j) ? entry_of(j) : tc);
  }
}

static void tiresias_timer(void *state, shoal_sched_t *s, int64_t tag) {
  ((tiresias_t *)state)->dirty = 1;
}

static int cmp_order(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pint[0] != y->pint[0]) return x->pint[0] < y->pint[0] ? -1 : 1;
  int hx = !shoal__holding(x), hy = !shoal__holding(y);
  if (hx != hy) return hx - hy;
  double ex = entry_of(x), ey = entry_of(y);
  if (ex != ey) return ex < ey ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int grow(tiresias_t *t, int n) {
  if (n <= t->cap) return 0;
  int nc = n * 2;
  shoal_job_t **o = realloc(t->order, (size_t)nc * sizeof *o);
  char *w = realloc(t->want, (size_t)nc);
  if (o) t->order = o;
  if (w) t->want = w;
  if (!o || !w) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  t->cap = nc;
  return 0;
}

static int tiresias_schedule(void *state, shoal_sched_t *s) {
  tiresias_t *t = state;
  if (t->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias: out of memory");
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH)) && !t->dirty) return 0;
  t->dirty = 0;
  if (t->nwait == 0) return 0;
  int rc;
  long waiting_gpus = 0;
  for (int i = 0; i < t->nwait; i++) waiting_gpus += t->wait[i]->gpus;
  int n, k;
  if (waiting_gpus <= s->cluster->gpus_free) {
    /* uncontended: the walk selects every job; start the waiting ones in order */
    n = t->nwait;
    if ((rc = grow(t, n))) return rc;
    for (int i = 0; i < n; i++) {
      update_queue(t, s, t->wait[i]);
      t->order[i] = t->wait[i];
      t->want[i] = 1;
    }
    qsort(t->order, (size_t)n, sizeof *t->order, cmp_order);
    for (int i = 0; i < n; i++) t->want[i] = 1;
    if ((rc = shoal__apply_selection(s, t->order, t->want, n, t->buf)) < 0) return rc;
  } else {
    n = s->nactive;
    if ((rc = grow(t, n))) return rc;
    for (int i = 0; i < n; i++) {
      update_queue(t, s, s->active[i]);
      t->order[i] = s->active[i];
    }
    if ((rc = shoal__walk_select(t->order, t->want, n, s->cluster->gpus_total, cmp_order)) < 0) return rc;
    if ((rc = shoal__apply_selection(s, t->order, t->want, n, t->buf)) < 0) return rc;
  }
  /* rebuild the waiting list */
  for (int i = 0; i < t->nwait; i++) t->wait[i]->pint[2] = 0;
  t->nwait = 0;
  for (int i = 0; i < n; i++)
    if (!shoal__holding(t->order[i])) add_wait(t, t->order[i]);
  if (t->nwait == 0) return 0; /* nobody waits: crossings cannot change anything */
  /* contended: exact timers for the next crossing of each job (when it moved) */
  if (n < s->nactive) {
    /* came from the uncontended path with leftovers (fragmentation): time the running jobs too */
    if ((rc = grow(t, s->nactive))) return rc;
    for (int i = 0; i < s->nactive; i++) update_queue(t, s, s->active[i]);
    n = s->nactive;
    for (int i = 0; i < n; i++) t->order[i] = s->active[i];
  }
  for (k = 0; k < n; k++) {
    shoal_job_t *j = t->order[k];
    double held = shoal_sched_held_s(s, j), at = 0;
    if (shoal__holding(j)) {
      if (j->pint[0] < t->nq - 1) at = s->now + (t->theta[j->pint[0]] - (held - j->pkey[0]) * j->gpus) / j->gpus;
    } else if (t->starve > 0 && j->pint[0] > 0 && j->first_start >= 0) {
      at = s->now + t->starve * (held - j->pkey[0]) - (waited(s, j) - j->pkey[1]);
    }
    if (at > 0 && at < s->now) at = s->now;
    if (at > 0 && fabs(at - j->pkey[2]) > 1e-9 * (1 + at)) {
      if ((rc = shoal_sched_timer(s, at, j->id))) return rc;
    }
    j->pkey[2] = at;
  }
  return 0;
}

const shoal_policy_ops_t shoal__policy_tiresias = {
    "tiresias",
    "Tiresias discretized 2D-LAS: GPU-time queues, running-first within a queue, starvation guard",
    "thresholds=3250/7200: queue limits in GPU-seconds (K-1 values); starve=2: promotion knob S (0 = off)",
    tiresias_create,
    tiresias_destroy,
    tiresias_arrive,
    NULL,
    tiresias_timer,
    tiresias_schedule,
};
