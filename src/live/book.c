/* The policy's view of the controller's jobs (book.c in ctl.h): progress by the
 * speed model between looks, running, finished, and forced off (a failure or a
 * drain: changes the policy did not make reach it as a finish and a new arrival,
 * the only way policy.h has to tell them). */
#include <stdlib.h>
#include <string.h>

#include "live/ctl.h"

lj_t *live_find(const shoal_live_ctl_t *L, long sid) {
  for (int i = 0; i < L->njobs; i++)
    if (L->jobs[i]->sid == sid) return L->jobs[i];
  return NULL;
}

int live_node_index(const shoal_live_ctl_t *L, const char *name) {
  for (int i = 0; i < L->nnodes; i++)
    if (!strcmp(L->node[i], name)) return i;
  return -1;
}

/* a blank job under its id, at the end of L->jobs (its j.id is its index) */
lj_t *live_new_job(shoal_live_ctl_t *L, long sid) {
  if (L->njobs == L->cap) {
    int nc = L->cap ? L->cap * 2 : 64;
    lj_t **nj = realloc(L->jobs, (size_t)nc * sizeof *nj);
    if (nj) L->jobs = nj;
    shoal_job_t **nt = realloc(L->touched, (size_t)nc * sizeof *nt);
    if (nt) L->touched = nt;
    shoal_alloc_t *np = realloc(L->prev, (size_t)nc * sizeof *np);
    if (np) L->prev = np;
    if (!nj || !nt || !np) return NULL;
    L->cap = nc;
  }
  lj_t *x = calloc(1, sizeof *x);
  if (x && !(x->want = calloc((size_t)(L->nnodes ? L->nnodes : 1), sizeof *x->want))) free(x), x = NULL;
  if (!x) return NULL;
  x->sid = sid;
  x->first_run = -1;
  x->req_restarts = -1;
  x->j.id = L->njobs;
  x->j.row = sid;
  x->j.first_start = -1;
  x->j.finish = -1;
  x->j.active_index = -1;
  x->j.state = SHOAL_JOB_WAIT;
  x->j.t_last = L->s.now;
  L->jobs[L->njobs++] = x;
  return x;
}

/* Bring the counters of a holding job to now (the engine's lazy accounting). */
void live_advance(shoal_live_ctl_t *L, shoal_job_t *j) {
  double now = L->s.now, dt = now - j->t_last;
  if (dt > 0 && j->state == SHOAL_JOB_RUN) {
    j->work_done += j->rate * dt;
    if (j->work_done > j->work) j->work_done = j->work;
    j->run_s += dt;
    j->gpu_s += dt * j->alloc.workers;
  }
  if (dt > 0) j->t_last = now;
}

void live_set_running(shoal_live_ctl_t *L, shoal_job_t *j) {
  j->state = SHOAL_JOB_RUN;
  j->rate = shoal_sched_rate(&L->s, j, j->alloc.p, j->alloc.n);
  if (!(j->rate > 0)) j->rate = 1e-9; /* a job the manager runs progresses; the model only ranks */
  if (j->first_start < 0) j->first_start = L->s.now;
  if (j->alloc.n > j->max_machines) j->max_machines = j->alloc.n;
}

/* take the job's allocation back without it being a decision of the policy's */
static void unassign(shoal_live_ctl_t *L, shoal_job_t *j) {
  void (*touch)(void *, shoal_job_t *) = L->s.hooks.touch;
  L->s.hooks.touch = NULL;
  if (j->alloc.n) shoal_sched_assign(&L->s, j, NULL, 0);
  L->s.hooks.touch = touch;
}

void live_activate(shoal_live_ctl_t *L, lj_t *x) {
  shoal__sched_add_active(&L->s, &x->j);
  x->in_policy = 1;
}

void live_tell_arrival(shoal_live_ctl_t *L, lj_t *x) {
  if (L->ops->arrive) L->ops->arrive(L->pstate, &L->s, &x->j);
  L->s.events |= SHOAL_EV_ARRIVAL;
}

void live_finish(shoal_live_ctl_t *L, lj_t *x, const char *final) {
  shoal_job_t *j = &x->j;
  x->phase = PH_DONE;
  x->nwant = 0;
  snprintf(x->final, sizeof x->final, "%s", final);
  j->finish = L->s.now;
  live_journal(L, "end %ld %.3f %s", x->sid, L->s.now, final);
  if (x->in_policy) {
    live_advance(L, j);
    unassign(L, j);
    j->state = SHOAL_JOB_DONE;
    j->rate = 0;
    shoal__sched_remove_active(&L->s, j);
    x->in_policy = 0;
    if (L->ops->finish) L->ops->finish(L->pstate, &L->s, j);
    L->s.events |= SHOAL_EV_FINISH;
  }
  j->state = SHOAL_JOB_DONE;
  if (x->first_run >= 0 && strcmp(final, FINAL_USER_CANCELLED))
    live_log(L, "job %ld %s (jct %.1f s, %d preemptions)", x->sid, final, j->finish - j->arrival, x->preempts);
  else live_log(L, "job %ld %s (%s)", x->sid, final, x->first_run >= 0 ? "it had run" : "never ran");
}

/* The job lost its nodes outside a decision (it failed, its node was drained or taken). It finishes for the
 * policy and arrives again at once: same job, same arrival time, its work and service so far kept; its policy
 * state starts afresh (Tiresias: queue 0). */
void live_forced_off(shoal_live_ctl_t *L, lj_t *x, int preempted) {
  shoal_job_t *j = &x->j;
  x->nwant = 0, x->nloan = 0;
  if (!x->in_policy) return;
  live_advance(L, j);
  unassign(L, j);
  j->state = SHOAL_JOB_DONE;
  j->rate = 0;
  shoal__sched_remove_active(&L->s, j);
  if (L->ops->finish) L->ops->finish(L->pstate, &L->s, j);
  j->state = SHOAL_JOB_WAIT;
  if (preempted) j->n_preempt++, x->preempts++; /* a failure's retry is not a preemption */
  memset(j->pkey, 0, sizeof j->pkey);
  memset(j->pint, 0, sizeof j->pint);
  j->t_last = L->s.now;
  shoal__sched_add_active(&L->s, j);
  if (L->ops->arrive) L->ops->arrive(L->pstate, &L->s, j);
  L->s.events |= SHOAL_EV_FINISH | SHOAL_EV_ARRIVAL;
}
