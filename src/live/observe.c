/* What the manager shows of the controller's jobs, job by job (observe.c in
 * ctl.h): the job's phase moves on, or the controller acts to finish what it
 * started (a requeue after a checkpoint, a kill after the grace, a start at the
 * new size after a resize's stop). */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "core/command.h"
#include "core/error.h"
#include "live/ctl.h"

/* the last non-empty line of the job's output file (why a job failed often sits there), "" if none */
static void output_tail(const shoal_live_job_t *mj, char *buf, size_t cap) {
  buf[0] = 0;
  if (!mj->output[0]) return;
  FILE *f = fopen(mj->output, "r");
  if (!f) return;
  char b[4096];
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
  if (size > (long)sizeof b - 1) fseek(f, size - (long)sizeof b + 1, SEEK_SET);
  else rewind(f);
  size_t n = fread(b, 1, sizeof b - 1, f);
  fclose(f);
  b[n] = 0;
  while (n && (b[n - 1] == '\n' || b[n - 1] == ' ' || b[n - 1] == '\r')) b[--n] = 0;
  const char *nl = strrchr(b, '\n');
  snprintf(buf, cap, "%s", nl ? nl + 1 : b);
}

/* "FAILED (exit 2: 'srun: error: ...')" */
static void failure_text(const shoal_live_job_t *mj, char *buf, size_t cap) {
  char d[48], tail[160];
  shoal__command_describe_status(mj->exit_status, d, sizeof d);
  output_tail(mj, tail, sizeof tail);
  if (tail[0]) snprintf(buf, cap, "%s (%s: '%s')", mj->state, d, tail);
  else snprintf(buf, cap, "%s (%s)", mj->state, d);
}

/* a run of the job ended */
static void ended(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj, int finished) {
  int ws = mj->exit_status;
  char d[240], e[48];
  failure_text(mj, d, sizeof d);
  shoal__command_describe_status(ws, e, sizeof e);
  if (finished) {
    /* finished, also when it was being preempted (it completed within the grace): never run again */
    if (x->phase == PH_STOPPING) live_log(L, "job %ld completed while being stopped: not requeued", x->sid);
    live_finish(L, x, "COMPLETED");
  } else if (!strcmp(mj->state, "CANCELLED") && !(x->phase == PH_STOPPING && x->killed)) {
    /* a user cancelled it (waiting or running; a checkpointing job exits 75 on scancel's SIGTERM, so before that
     * test): not a failure to retry, not a checkpoint to resume */
    live_finish(L, x, FINAL_USER_CANCELLED);
  } else if (x->phase == PH_STOPPING || (WIFEXITED(ws) && WEXITSTATUS(ws) == SHOAL_LIVE_EXIT_REQUEUE)) {
    /* checkpointed on the controller's request (or killed after the grace): back to the queue, held */
    if (x->phase == PH_RELEASED) {
      /* ... or on its own, unasked: for the policy it stopped (not a preemption) and waits again */
      live_log(L, "job %ld checkpointed on its own (%s): requeued", x->sid, e);
      live_journal(L, "stop %ld %.3f own", x->sid, L->s.now);
      live_forced_off(L, x, 0);
    }
    live_requeue(L, x, e, mj->restarts);
  } else if (x->retries < L->cfg.retries) {
    /* failed on its own (a rank died, a node failed): again from its checkpoint, where the policy places it */
    x->retries++;
    live_journal(L, "retry %ld %.3f", x->sid, L->s.now);
    live_log(L, "job %ld %s: requeued from its checkpoint (retry %d of %d)", x->sid, d, x->retries, L->cfg.retries);
    live_forced_off(L, x, 0);
    live_requeue(L, x, d, mj->restarts);
  } else live_finish(L, x, d);
}

/* released by the controller and still pending in the manager: it cannot start as placed */
static int released_waits(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj) {
  if (strstr(mj->reason, "BadConstraints") && x->j.alloc.n > 0) {
    live_log(L, "job %ld: the manager cannot run it as placed (%s): held and started again", x->sid, mj->reason);
    if (live_hold(L, x) == 0) {
      memcpy(x->want, x->j.alloc.p, (size_t)x->j.alloc.n * sizeof *x->want);
      x->nwant = x->j.alloc.n;
      x->phase = PH_REQUEUED;
      x->req_restarts = -1;
    }
    return 1;
  }
  if (live_nodes_taken(L, &x->j)) {
    /* a job that is not the controller's took its nodes first: hold it and let the policy place it again */
    if (live_hold(L, x)) return 1;
    live_log(L, "job %ld: its nodes were taken by jobs that are not the controller's (%s): held, placed again", x->sid,
             mj->reason);
    live_journal(L, "stop %ld %.3f foreign", x->sid, L->s.now);
    live_forced_off(L, x, 0);
    x->phase = PH_HELD;
    return 1;
  }
  return 0;
}

/* the grace is over and it still runs: it does not checkpoint */
static void grace_over(shoal_live_ctl_t *L, lj_t *x) {
  /* Kill its tasks, not its main script: the script then ends with the tasks' failure and the job is requeued
   * once it ended, while a job whose tasks ended 0 just before completes and is not run again (killing the whole
   * job here cancelled such a job 0.2 s before its script exited 0, and it ran twice). A job without running
   * tasks is killed whole one grace later. */
  if (live_kill(L, x, SHOAL_LIVE_STOP_KILL_TASKS) == 0) {
    x->killed = 1;
    live_log(L, "job %ld: no exit within the %.1f s grace: its tasks killed", x->sid, L->cfg.grace);
  } else if (L->s.now >= x->stop_at + L->cfg.grace && live_kill(L, x, SHOAL_LIVE_STOP_KILL) == 0) {
    x->killed = 1;
    live_log(L, "job %ld: no exit within twice the %.1f s grace and no running tasks: killed", x->sid, L->cfg.grace);
  }
}

/* one branch per phase and manager state, in the order they must be tested */
static void observe_job(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj) {
  int pending = mj->run == SHOAL_LIVE_PENDING, held = mj->held;
  int finished = mj->run == SHOAL_LIVE_ENDED && !strcmp(mj->state, "COMPLETED") && WIFEXITED(mj->exit_status) &&
                 WEXITSTATUS(mj->exit_status) == 0;
  if (x->phase == PH_RELEASED && mj->run == SHOAL_LIVE_RUNNING && !x->ran) {
    x->ran = 1, x->runs++;
    double t = mj->start_time > 0 ? mj->start_time - L->epoch : L->s.now;
    if (x->first_run < 0) x->first_run = t;
    live_journal(L, "run %ld %.3f", x->sid, t);
  }
  /* (requeued: the ended record of the run before the requeue is not news, but exit 0 always is, and so is an
   * end after the requeue: a run the hold did not stop in time may finish, a user may cancel) */
  if (mj->run == SHOAL_LIVE_ENDED && (x->phase != PH_REQUEUED || finished || mj->restarts > x->req_restarts))
    return ended(L, x, mj, finished);
  if (L->cfg.dry_run) return; /* its own view of starts and stops is all a dry run has */
  if (x->unsched[0]) {
    if (!pending || !held) {
      live_log(L, "job %ld: released outside the controller while unschedulable: left to the manager", x->sid);
      x->ignored = 1, x->phase = PH_DONE;
    }
    return;
  }
  if (x->phase == PH_RELEASED && pending && !held && released_waits(L, x, mj)) return;
  if (x->phase == PH_RELEASED && pending && held) {
    /* held again outside the controller (an operator's hold or requeuehold): it does not run, so for the policy it
     * stopped (not a preemption); held means waiting for the controller, which starts it where the policy says */
    live_log(L, "job %ld: held outside the controller (%s): back to the queue", x->sid, mj->reason);
    live_journal(L, "stop %ld %.3f outside", x->sid, L->s.now);
    live_forced_off(L, x, 0);
    x->phase = PH_HELD;
    return;
  }
  if (x->phase == PH_STOPPING && pending) {
    /* released but not started yet (its nodes were still busy): hold it again instead */
    x->req_restarts = -1; /* held, not requeued: an end from now on is news */
    if (!held && live_hold(L, x)) return;
    x->phase = PH_REQUEUED;
  }
  if (x->phase == PH_STOPPING && L->s.now >= x->stop_at && !x->killed && mj->run == SHOAL_LIVE_RUNNING)
    return grace_over(L, x);
  if (x->phase == PH_REQUEUED && mj->run == SHOAL_LIVE_RUNNING) {
    /* the manager started it between the controller's look and the hold (the hold raced its start): it runs, so
     * ask it to stop again; its end is handled like any stop's */
    live_log(L, "job %ld: started by the manager before the hold took effect: checkpoint requested again", x->sid);
    live_stop(L, x, x->stop_why[0] ? x->stop_why : "preempt");
    return;
  }
  if (x->phase == PH_HELD && x->start_failing && x->nwant > 0 && pending && held) {
    live_start(L, x, x->want, x->nwant); /* the policy's placement, again */
    return;
  }
  if (x->phase == PH_REQUEUED && pending && held) {
    if (x->nwant > 0) live_start(L, x, x->want, x->nwant);
    else if (x->nloan > 0) live_start_loan(L, x); /* a loan's restart: on its hosts and the lent ones */
    else x->phase = PH_HELD;
  }
}

void live_observe(shoal_live_ctl_t *L) {
  for (int i = 0; i < L->njobs && !L->fatal; i++) {
    lj_t *x = L->jobs[i];
    if (x->phase == PH_DONE || x->ignored) continue;
    const shoal_live_job_t *mj = shoal__live_jobs_find(&L->view, x->sid);
    if (!mj) {
      live_log(L, "job %ld is no longer listed by the manager (purged): its end is unknown", x->sid);
      live_finish(L, x, "VANISHED (no longer listed by the manager)");
      continue;
    }
    observe_job(L, x, mj);
  }
}
