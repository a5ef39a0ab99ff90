/* The policy's round (decide.c in ctl.h): due timers, one schedule() call, and
 * the allocation changes it made (collected by the `touch` hook, as the
 * simulator's engine collects them) turned into actions: none -> placement is
 * a start; placement -> none a preemption (checkpoint request, requeue);
 * placement -> another a resize or migration (the preemption's steps, then a
 * start at the new placement once the manager shows the job held again). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "live/ctl.h"
#include "sched/model/place.h"

static void due_timers(shoal_live_ctl_t *L) {
  for (int i = 0; i < L->ntimers;) {
    if (L->timers[i].at <= L->s.now) {
      int64_t tag = L->timers[i].tag;
      L->timers[i] = L->timers[--L->ntimers];
      if (L->ops->timer) L->ops->timer(L->pstate, &L->s, tag);
      L->s.events |= SHOAL_EV_TIMER;
    } else i++;
  }
}

/* the decision's changes, for status: "start 12; resize 13 (1 -> 2 workers)" */
static void note(shoal_live_ctl_t *L, const char *verb, long sid, const char *extra) {
  size_t k = strlen(L->last.text);
  if (k + 2 < sizeof L->last.text)
    snprintf(L->last.text + k, sizeof L->last.text - k, "%s%s %ld%s", k ? "; " : "", verb, sid, extra);
}

/* one job whose allocation the policy changed: from `old` to its current one */
static void apply_change(shoal_live_ctl_t *L, lj_t *x, const shoal_alloc_t *old) {
  shoal_job_t *j = &x->j;
  j->version++;
  x->nloan = 0; /* the policy's placement replaces a loan's restart still to come */
  if (j->alloc.n == 0) {
    j->state = SHOAL_JOB_WAIT;
    j->rate = 0;
    if (old->n) j->n_preempt++, x->preempts++;
    note(L, "preempt", x->sid, "");
    if (x->phase == PH_RELEASED) {
      live_log(L, "preempt job %ld", x->sid);
      live_stop(L, x, "preempt");
    }
    x->nwant = 0;
    return;
  }
  if (old->n) j->n_realloc++;
  live_set_running(L, j);
  char buf[64];
  snprintf(buf, sizeof buf, " (%d -> %d workers)", old->workers, j->alloc.workers);
  note(L, old->n ? "resize" : "start", x->sid, old->n ? buf : "");
  if (x->phase == PH_HELD) {
    live_start(L, x, j->alloc.p, j->alloc.n);
    return;
  }
  if (x->phase == PH_RELEASED) {
    live_log(L, "resize/migrate job %ld: %d -> %d workers", x->sid, old->workers, j->alloc.workers);
    x->resizes++;
    live_stop(L, x, "resize");
  }
  memcpy(x->want, j->alloc.p, (size_t)j->alloc.n * sizeof *x->want);
  x->nwant = j->alloc.n;
}

/* a dry run takes its stops as done at once: a stopped job is started again at its new placement, if any */
static void dry_restarts(shoal_live_ctl_t *L) {
  for (int i = 0; i < L->njobs; i++) {
    lj_t *x = L->jobs[i];
    if (x->phase != PH_REQUEUED) continue;
    if (x->nwant > 0) live_start(L, x, x->want, x->nwant);
    else x->phase = PH_HELD;
  }
}

int live_decide(shoal_live_ctl_t *L) {
  due_timers(L);
  L->ntouched = 0;
  double t0 = shoal__now_s();
  int rc = L->ops->schedule(L->pstate, &L->s);
  double ms = 1e3 * (shoal__now_s() - t0);
  L->s.events = 0;
  if (rc < 0) {
    live_log(L, "policy %s failed: %s", L->ops->name, shoal_last_error());
    return rc;
  }
  L->schedules++;
  L->decide_ms_sum += ms;
  if (ms > L->decide_ms_max) L->decide_ms_max = ms;
  L->last.ms = ms;
  int changes = 0;
  for (int i = 0; i < L->ntouched; i++) {
    shoal_job_t *j = L->touched[i];
    shoal_alloc_t *old = &L->prev[i];
    j->touched = 0;
    if (!shoal__place_equal(old->p, old->n, j->alloc.p, j->alloc.n)) {
      if (!changes++) L->last.text[0] = 0, L->last.at = L->s.now;
      apply_change(L, L->jobs[j->id], old);
    }
    free(old->p);
    old->p = NULL;
  }
  L->ntouched = 0;
  L->decisions += changes > 0;
  if (L->cfg.dry_run) dry_restarts(L);
  return 0;
}
