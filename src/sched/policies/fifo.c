/* FIFO / YARN-CS (spec §5.2). Queue by arrival (ties: id). Default YARN-CS:
 * walk the queue in order and start every job that fits now (backfill: skip
 * those that do not), consolidated placement, never preempt.
 * Parameter strict=1: FIFO-strict, stop at the first job that does not fit
 * (head-of-line blocking). Parameter place=NAME: where a started job goes
 * (policies/placer.h: consolidate, firstfit, loadbal, pack, marl); the learned
 * policy `marl` is this queue with its placer. Parameter hold=1|2: the waiting
 * rule (held() below); the learned policy's `wait` is this rule.
 * Speed (the result is the plain walk's): the queue is kept as one queue per
 * requested size, each in arrival order; the walk takes, among the sizes that
 * fit the free GPUs, the job that arrived first, so jobs too large for the
 * free GPUs (which the walk skips: free GPUs only decrease) are never looked
 * at. A started job leaves a hole in its queue (squeezed out when the holes
 * outnumber the jobs), so a start costs O(1). */
#include <math.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/colocation.h"
#include "sched/model/place.h"
#include "sched/policies/placer.h"
#include "sched/policies/common.h"

struct fclass {
  int gpus;
  shoal_job_t **q; /* arrival order; NULL: started */
  int head, n, cap, holes;
  int cur;         /* the walk's position in this decision */
};

typedef struct {
  int strict, oom;
  struct fclass *cls; /* sorted by size */
  int ncls, clscap;
  shoal_place_t *buf;
  const shoal_placer_ops_t *placer; /* NULL: consolidate (shoal__start_requested) */
  void *pstate;
  /* the waiting rule (held()): 0 off, 1 bounded, 2 no limit */
  int hold;
  shoal__colo_t colo;
  shoal_interference_t *owned;
  shoal_place_t *spread;             /* the placement a hold judges */
  double timer_at;                   /* the earliest hold's end a timer is pending for (HUGE_VAL: none) */
  long holds;
} fifo_t;

void shoal__fifo_destroy(void *state) {
  fifo_t *f = state;
  if (!f) return;
  if (f->placer) f->placer->destroy(f->pstate);
  shoal__colo_fini(&f->colo);
  shoal__interference_free(f->owned);
  free(f->spread);
  for (int c = 0; c < f->ncls; c++) free(f->cls[c].q);
  free(f->cls);
  free(f->buf);
  free(f);
}

int shoal__fifo_with_placer(shoal_sched_t *s, int strict, int hold, const shoal_placer_ops_t *placer,
                            const char *pparams, void **state) {
  fifo_t *f = calloc(1, sizeof *f);
  if (!f || !(f->buf = malloc((size_t)s->cluster->nmachines * sizeof *f->buf))) {
    free(f);
    return shoal__seterr(SHOAL_ERR_NOMEM, "fifo: out of memory");
  }
  f->strict = strict;
  f->hold = hold;
  f->timer_at = HUGE_VAL;
  if (hold) {
    const shoal_interference_t *im;
    int rc = shoal__placer_model(s, &im, &f->owned);
    if (!rc) rc = shoal__colo_init(&f->colo, im, s->speed);
    if (!rc && (!(f->spread = malloc((size_t)s->cluster->nmachines * sizeof *f->spread)) || !shoal__sched_slots(s)))
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "fifo: out of memory");
    if (rc) {
      shoal__fifo_destroy(f);
      return rc;
    }
  }
  if (placer && strcmp(placer->name, "consolidate")) {
    int rc = placer->create(s, pparams, &f->pstate);
    if (rc) {
      shoal__fifo_destroy(f);
      return rc;
    }
    f->placer = placer;
  }
  *state = f;
  return 0;
}

static int fifo_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"strict", "place", "hold", NULL};
  int rc = shoal__param_check("fifo", params, keys);
  if (rc) return rc;
  long strict, hold;
  if ((rc = shoal__param_long("fifo", params, "strict", 0, 0, 1, &strict)) ||
      (rc = shoal__param_long("fifo", params, "hold", 0, 0, 2, &hold)))
    return rc;
  char name[32];
  if ((rc = shoal__param_str(params, "place", name, sizeof name)) < 0)
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy fifo: place: no placer has a name that long");
  const shoal_placer_ops_t *placer = NULL;
  if (rc == 1 && !(placer = shoal__placer_find(name))) {
    char known[128] = "";
    for (int i = 0; shoal__placer_at(i); i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", shoal__placer_at(i)->name);
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy fifo: place=%s: unknown placer (%s)", name, known);
  }
  return shoal__fifo_with_placer(s, (int)strict, (int)hold, placer, NULL, state);
}

static struct fclass *class_of(fifo_t *f, int g) {
  int lo = 0, hi = f->ncls;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (f->cls[m].gpus < g) lo = m + 1;
    else hi = m;
  }
  if (lo < f->ncls && f->cls[lo].gpus == g) return &f->cls[lo];
  if (f->ncls == f->clscap) {
    int nc = f->clscap ? f->clscap * 2 : 16;
    struct fclass *c = realloc(f->cls, (size_t)nc * sizeof *c);
    if (!c) return NULL;
    f->cls = c;
    f->clscap = nc;
  }
  for (int i = f->ncls; i > lo; i--) f->cls[i] = f->cls[i - 1];
  f->cls[lo] = (struct fclass){g, NULL, 0, 0, 0, 0, 0};
  f->ncls++;
  return &f->cls[lo];
}

void shoal__fifo_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  fifo_t *f = state;
  /* a job that arrives running (a live controller adopting what an earlier one started) is started:
   * FIFO never preempts, so it holds its placement until it finishes and never enters the queue */
  if (j->state != SHOAL_JOB_WAIT) return;
  struct fclass *c = class_of(f, j->gpus);
  if (!c) {
    f->oom = 1; /* reported by schedule() */
    return;
  }
  if (c->n == c->cap && c->holes + c->head > c->n / 2) {
    int k = 0;
    for (int i = c->head; i < c->n; i++)
      if (c->q[i]) c->q[k++] = c->q[i];
    c->head = 0;
    c->n = k;
    c->holes = 0;
  }
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 64;
    shoal_job_t **q = realloc(c->q, (size_t)nc * sizeof *q);
    if (!q) {
      f->oom = 1;
      return;
    }
    c->q = q;
    c->cap = nc;
  }
  c->q[c->n++] = j;
}

static void take(struct fclass *c) {
  c->q[c->cur] = NULL;
  c->holes++;
  while (c->head < c->n && !c->q[c->head]) {
    c->head++;
    c->holes--;
  }
}

/* the job at the class's walk position (skipping holes), NULL if none; a job that ended while it waited
 * (a live controller: the user cancelled it) leaves the queue here */
static shoal_job_t *at_cursor(struct fclass *c) {
  while (c->cur < c->n) {
    shoal_job_t *j = c->q[c->cur];
    if (j && j->state == SHOAL_JOB_DONE) take(c);
    else if (j) return j;
    else c->cur++;
  }
  return NULL;
}

/* Seconds that spreading j as f->spread[0..n) is predicted to cost: j's own slowdown there (its worst
 * machine's NIC term) over its remaining run time alone, plus the terms it imposes on the jobs it would
 * share a NIC with, over the time they would run beside it (at most j's run time). 0 when nothing is
 * shared. */
static double spread_cost(fifo_t *f, const shoal_sched_t *s, const shoal_job_t *j, int n) {
  double suffered = 0, imposed = 0;
  for (int k = 0; k < n; k++) {
    double x = shoal__colo_nic(&f->colo, s->slots, j, f->spread[k].machine);
    if (x > suffered) suffered = x;
    imposed += shoal__colo_nic_imposed(&f->colo, s->slots, j, f->spread[k].machine);
  }
  if (!(suffered + imposed > 0)) return 0;
  double r = shoal_sched_rate_consolidated(s, j, j->gpus, 0), left = j->work - shoal_sched_work_done(s, j);
  return r > 0 && left > 0 ? left / r * (suffered + imposed) : 0;
}

/* The waiting rule. 1: j, which fits on one machine but would be spread over machines now (no machine has
 * room), is held rather than share a machine's NIC with another job that spans machines (the interference
 * model's largest terms). The spread judged is the placer's (its `spread` op: where it would put j), else
 * consolidation's. With hold=1 only while j has waited (since it arrived) less than spreading is predicted
 * to cost: waiting longer cannot pay (the ski-rental bound: at most twice the better choice's delay). A
 * timer at the hold's end walks the queue again, so a held job starts then at the latest. */
static int held(fifo_t *f, shoal_sched_t *s, const shoal_job_t *j) {
  const shoal_cluster_t *c = s->cluster;
  if (!f->hold || j->gpus > c->max_gpus_per_machine) return 0;
  int n = shoal__place_consolidated(c, j, j->gpus, f->spread, c->nmachines);
  if (n < 2) return 0; /* on one machine (or nowhere): nothing to wait for */
  if (f->placer && f->placer->spread && (n = f->placer->spread(f->pstate, s, j, f->spread, c->nmachines)) < 2)
    return 0;
  double cost = spread_cost(f, s, j, n);
  if (!(cost > 0)) return 0;
  if (f->hold == 1) {
    double end = j->arrival + cost;
    if (s->now >= end) return 0;
    if (end < f->timer_at && shoal_sched_timer(s, end, 0) == 0) f->timer_at = end;
  }
  f->holds++;
  return 1;
}

int shoal__fifo_schedule(void *state, shoal_sched_t *s) {
  fifo_t *f = state;
  if (f->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "fifo: out of memory for the queue");
  /* a hold's end (held()) is a reason to walk the queue, as a finish is */
  if ((s->events & SHOAL_EV_TIMER) && s->now >= f->timer_at) f->timer_at = HUGE_VAL;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH | SHOAL_EV_TIMER))) return 0;
  for (int c = 0; c < f->ncls; c++) f->cls[c].cur = f->cls[c].head;
  for (;;) {
    /* next job in arrival order among the sizes that fit (strict: among all) */
    long fit = f->strict ? 1L << 40 : s->cluster->gpus_free;
    struct fclass *best = NULL;
    shoal_job_t *j = NULL;
    for (int c = 0; c < f->ncls && f->cls[c].gpus <= fit; c++) {
      shoal_job_t *x = at_cursor(&f->cls[c]);
      if (x && (!j || x->id < j->id)) j = x, best = &f->cls[c];
    }
    if (!j) return 0;
    int rc = j->gpus > s->cluster->gpus_free ? 0
             : held(f, s, j)                 ? 0
             : f->placer                     ? f->placer->start(f->pstate, s, j)
                                             : shoal__start_requested(s, j, f->buf);
    if (rc < 0) return rc;
    if (rc == 1) take(best);
    else if (f->strict) return 0; /* the head blocks the queue */
    else best->cur++;             /* does not fit now (fragmentation): skipped */
  }
}

void *shoal__fifo_placer_state(void *state) { return ((fifo_t *)state)->pstate; }

void shoal__fifo_stats(void *state, char *buf, size_t cap) {
  fifo_t *f = state;
  if (!cap) return;
  buf[0] = 0;
  if (f->hold) snprintf(buf, cap, "holds=%ld%s", f->holds, f->placer && f->placer->stats ? " " : "");
  size_t k = strlen(buf);
  if (f->placer && f->placer->stats && k + 1 < cap) f->placer->stats(f->pstate, buf + k, cap - k);
}

const shoal_policy_ops_t shoal__policy_fifo = {
    "fifo",
    "FIFO / YARN-CS: arrival order, start whatever fits (backfill), consolidated, no preemption",
    "strict=0: 1 = stop at the first job that does not fit (head-of-line blocking); place=consolidate: where a "
    "job goes: consolidate (fewest machines, Tiresias-like), firstfit, loadbal, pack (interference-aware, "
    "Gandiva-like), marl (the learned placer with its shipped weights); hold=0: 1 = a job that fits on one machine "
    "but would be spread over machines where another job that spans machines uses the NIC waits, while it has "
    "waited less than spreading is predicted to cost (2: with no limit)",
    fifo_create,
    shoal__fifo_destroy,
    shoal__fifo_arrive,
    NULL,
    NULL,
    shoal__fifo_schedule,
    shoal__fifo_stats,
};
