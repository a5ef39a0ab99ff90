/* Jobs seen for the first time (arrive.c in ctl.h): whether they are the
 * controller's, what the journal says it did with them before a restart, and
 * their adoption into the policy.
 *
 * A job is the controller's when its comment opts in (`shoal:`), it is in the
 * controller's partition, its account may submit, and no other live controller
 * claims it. The controller then claims it (the manager's claim field), before
 * the policy ever sees it; a claim of a controller whose lease has run out is
 * taken over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/command.h"
#include "core/error.h"
#include "live/ctl.h"

/* Not the controller's: remembered under its id so that it is not looked at again, out of every count. */
static void ignore(shoal_live_ctl_t *L, long sid, const char *why) {
  lj_t *x = live_new_job(L, sid);
  if (!x) return;
  x->ignored = 1;
  x->phase = PH_DONE;
  x->j.state = SHOAL_JOB_DONE;
  snprintf(x->final, sizeof x->final, "ignored");
  if (why) live_log(L, "job %ld: %s", sid, why);
}

/* "shoal-ctl=ID;scope=SCOPE" -> id and scope */
static void read_claim(const char *claim, char *id, size_t idcap, char *scope, size_t scap) {
  id[0] = scope[0] = 0;
  const char *p = strstr(claim, "shoal-ctl="), *s = strstr(claim, ";scope=");
  if (p) snprintf(id, idcap, "%.*s", (int)((s && s > p ? (size_t)(s - p) : strlen(p)) - 10), p + 10);
  if (s) snprintf(scope, scap, "%s", s + 7);
}

/* 1 if another live controller holds this claim (why says who) */
static int claimed_by_other(shoal_live_ctl_t *L, const shoal_live_job_t *mj, char *why, size_t cap) {
  if (!mj->claim[0] || !strcmp(mj->claim, L->claim)) return 0;
  char id[128], scope[96];
  read_claim(mj->claim, id, sizeof id, scope, sizeof scope);
  shoal_live_lease_t h;
  memset(&h, 0, sizeof h);
  int rc = L->mgr.ops->lease(L->mgr.impl, scope, "", "", 0, SHOAL_LIVE_LEASE_PEEK, &h);
  if (rc == 0 && h.holder[0] && !strcmp(h.holder, id)) {
    snprintf(why, cap, "claimed by controller %s (%s; its lease renewed %.0f s ago): not ours", id, h.where,
             live_wall(L) - h.renewed);
    return 1;
  }
  if (rc && rc != SHOAL_ERR_UNSUPPORTED) {
    snprintf(why, cap, "claimed by controller %s, whose lease cannot be read (%s): left alone", id, shoal_last_error());
    return 1;
  }
  live_log(L, "job %ld: claimed by controller %s, whose lease has run out: taken over", mj->id, id[0] ? id : "?");
  return 0;
}

/* why a waiting job can never run as asked ("" if it can); its parameters go into x */
static void check_params(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj) {
  shoal_live_params_t p;
  char why[160];
  shoal_job_t *j = &x->j;
  if (shoal__live_params_parse(mj->comment, &p, why, sizeof why)) {
    snprintf(x->unsched, sizeof x->unsched, "its parameters do not read: %s", why);
    p.gpus = p.min = p.max = 1, p.work = 0, p.model[0] = 0, p.ps = 0;
  }
  j->gpus = p.gpus, j->min_workers = p.min, j->max_workers = p.max;
  j->work = p.work > 0 ? p.work : 1e9; /* 0 = unknown: ranked as very long */
  j->arch = p.ps > 0 ? SHOAL_ARCH_PS : SHOAL_ARCH_ALLREDUCE;
  j->ps = p.ps;
  j->sync = 1; /* (ps jobs too: `shoal train --sync ps` in its default sync mode) */
  j->worker_demand.gpus = 1;
  j->ps_demand.gpus = 0; /* a server holds no GPU */
  int m = p.model[0] ? shoal__speed_find_model(L->speed, p.model) : 0;
  if (m < 0 && !x->unsched[0]) {
    char known[256];
    size_t k = 0;
    for (int i = 0; i < L->speed->nmodels && k < sizeof known; i++)
      k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", L->speed->models[i].name);
    snprintf(x->unsched, sizeof x->unsched, "model '%s' is not in the %s speed model (%s)", p.model, L->speed->name, known);
  }
  j->model = (int16_t)(m > 0 ? m : 0);
  if (!x->unsched[0] && j->gpus > L->capacity_gpus)
    snprintf(x->unsched, sizeof x->unsched, "asks for %d workers; the %d nodes here have %d GPUs", j->gpus, L->nnodes,
             L->capacity_gpus);
  if (!x->unsched[0] && !p.model[0])
    live_log(L, "job %ld: no model given: its speed is estimated as model %s's", x->sid, L->speed->models[0].name);
}

static int tenant_of(shoal_live_ctl_t *L, const shoal_live_job_t *mj) {
  const char *who = !strcmp(L->tenants_s, "user") ? mj->user : mj->account;
  for (int i = 1; i < L->ntenants; i++)
    if (!strcmp(L->tenant[i], who)) return i;
  return 0;
}

/* A ps job's servers into its placement p[0..n): where the layout its manager wrote at its start says (the
 * comment's layout=NODE/WORKERS/SERVERS,...), else all on its first node; n, or 0 if the layout names a node
 * outside the placement. */
static int servers_of(shoal_live_ctl_t *L, const shoal_live_job_t *mj, shoal_place_t *p, int n) {
  shoal_live_params_t q;
  char why[160], *sv = NULL;
  if (n == 0 || shoal__live_params_parse(mj->comment, &q, why, sizeof why) || q.ps == 0) return n;
  int placed = 0;
  for (char *t = strtok_r(q.layout, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
    char node[SHOAL_LIVE_NAME];
    int w = 0, s = 0, at = -1;
    if (sscanf(t, "%63[^/]/%d/%d", node, &w, &s) != 3 || s <= 0) continue;
    int m = live_node_index(L, node);
    for (int i = 0; i < n && m >= 0; i++)
      if (p[i].machine == m) at = i;
    if (at < 0) return 0;
    p[at].ps = (int16_t)(p[at].ps + s), placed += s;
  }
  if (!placed) p[0].ps = (int16_t)q.ps;
  return n;
}

/* the placement the manager shows a running job on, or the journal's; 0 entries if neither fits */
static int placement_of(shoal_live_ctl_t *L, const shoal_live_job_t *mj, const shoal_live_jjob_t *e, shoal_place_t *p) {
  int n = 0;
  for (int k = 0; k < mj->nuse && n < L->nnodes; k++) {
    int m = live_node_index(L, mj->use[k].node);
    if (m < 0 && L->lend) continue; /* a host lent to it from the loaning partition: the loan's, not the policy's */
    if (m < 0) return 0;
    p[n].machine = m, p[n].workers = (int16_t)(mj->use[k].gpus > 0 ? mj->use[k].gpus : 1), p[n++].ps = 0;
  }
  if (n > 0 || !e || !e->open) return servers_of(L, mj, p, n);
  for (int k = 0; k < e->n && n < L->nnodes; k++) {
    int m = live_node_index(L, e->node[k]);
    if (m < 0 && L->lend) continue; /* lent (a loan's restart started it there) */
    if (m < 0) return 0;
    p[n].machine = m, p[n].workers = (int16_t)e->workers[k], p[n++].ps = 0;
  }
  return servers_of(L, mj, p, n);
}

/* a job the manager runs (or has released) that the controller started before: its placement back */
static void adopt(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj, const shoal_live_jjob_t *e, const char *how) {
  int n = placement_of(L, mj, e, x->want);
  if (n > 0 && shoal_sched_assign(&L->s, &x->j, x->want, n) == 0) {
    x->phase = PH_RELEASED;
    x->ran = mj->run == SHOAL_LIVE_RUNNING;
    live_set_running(L, &x->j);
    live_log(L, "job %ld: adopted (%s)", x->sid, how);
    return;
  }
  /* its placement is unknown or no longer fits the cluster: stop it and place it anew */
  live_log(L, "job %ld: its placement cannot be taken back (%s): stopped and placed anew", x->sid,
           n ? shoal_last_error() : "no nodes known");
  x->phase = PH_RELEASED;
  live_stop(L, x, "foreign");
}

/* the job's journal counters */
static void restore(shoal_live_ctl_t *L, lj_t *x, const shoal_live_jjob_t *e) {
  if (!e) return;
  x->retries = e->retries;
  x->starts = e->starts, x->runs = e->runs, x->preempts = e->preempts, x->resizes = e->resizes;
  x->j.n_preempt = e->preempts;
  x->j.run_s = e->held_s;
  if (e->ran) x->first_run = e->first_run;
  if (e->started) x->j.first_start = e->first_start;
  if (e->arrived) x->j.arrival = e->arrival;
  (void)L;
}

/* ended while the controller was away, for good: finished, cancelled or failed */
static void ended_away(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj, const shoal_live_jjob_t *e,
                       const char *final) {
  x->phase = PH_DONE;
  snprintf(x->final, sizeof x->final, "%s", final);
  x->j.state = SHOAL_JOB_DONE;
  if (e && e->ended) { /* the journal has its end already */
    x->j.finish = e->end;
    return;
  }
  x->j.finish = mj->end_time > 0 ? mj->end_time - L->epoch : L->s.now;
  live_journal(L, "end %ld %.3f %s", x->sid, x->j.finish, final);
  live_log(L, "job %ld %s while the controller was away", x->sid, final);
}

/* what Slurm shows of a job first seen, with what the journal says the controller did */
typedef struct seen {
  int ended, completed, wants_requeue, stopped_by_us, held, user_cancelled;
  int claimed, claimed_ours; /* a controller's claim is on it (another's has run out: checked before); ours */
} seen_t;

static seen_t read_seen(const shoal_live_ctl_t *L, const shoal_live_job_t *mj, const shoal_live_jjob_t *e) {
  seen_t s;
  int ws = mj->exit_status;
  s.ended = mj->run == SHOAL_LIVE_ENDED;
  s.completed = s.ended && !strcmp(mj->state, "COMPLETED") && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
  s.wants_requeue = s.ended && WIFEXITED(ws) && WEXITSTATUS(ws) == SHOAL_LIVE_EXIT_REQUEUE;
  s.stopped_by_us = e && e->started && !e->open; /* its last start is closed: the controller stopped it */
  s.held = mj->held;
  /* the controller's kill ends a running job CANCELLED only after a stop it journaled; a cancelled job that
   * was held, or that it never stopped, was the user's */
  s.user_cancelled = s.ended && !s.completed && !strcmp(mj->state, "CANCELLED") && (!s.stopped_by_us || s.held);
  s.claimed = mj->claim[0] != 0;
  s.claimed_ours = s.claimed && !strcmp(mj->claim, L->claim);
  return s;
}

/* the job ended, was stopped or runs, and the controller was away: pick up where it was */
static void pick_up(shoal_live_ctl_t *L, lj_t *x, const shoal_live_job_t *mj, const shoal_live_jjob_t *e, seen_t s) {
  if (s.ended) {
    /* asked to stop (or checkpointed on its own, or failed with retries left) while the controller was away:
     * finish the requeue; the policy places it again */
    x->phase = PH_STOPPING;
    x->killed = 1;
    if (!s.stopped_by_us && !s.wants_requeue) {
      x->retries++;
      live_journal(L, "retry %ld %.3f", x->sid, L->s.now);
    } else if (!s.stopped_by_us && e && e->open)
      live_journal(L, "stop %ld %.3f own", x->sid, L->s.now);
    live_log(L, "job %ld: ended (%s) while the controller was away: requeued", x->sid, mj->state);
  } else if (s.stopped_by_us && !(s.held && mj->run == SHOAL_LIVE_PENDING)) {
    /* the previous controller asked it to checkpoint and died before the requeue: finish that */
    x->phase = PH_STOPPING;
    x->stop_at = L->s.now + L->cfg.grace;
    snprintf(x->stop_why, sizeof x->stop_why, "%s", e->last_stop);
    live_kill(L, x, SHOAL_LIVE_STOP_CHECKPOINT); /* again: it may never have been sent */
    live_log(L, "job %ld: was being stopped (%s); requeue it", x->sid, e->last_stop);
  } else if (!s.held && e && e->open) {
    adopt(L, x, mj, e, "running where the journal and the manager have it");
  } else if (!s.held && mj->run == SHOAL_LIVE_RUNNING && s.claimed) {
    adopt(L, x, mj, NULL, "the journal has no open start for it: running where the manager has it");
  } else {
    x->phase = PH_HELD;
    if (!s.held) live_hold(L, x); /* released, not started, placement unknown: wait for the policy again */
    if (e && e->open) live_journal(L, "stop %ld %.3f unstarted", x->sid, L->s.now); /* never reached the manager */
  }
}

/* A job seen for the first time that is the controller's: claim, check, and give to the policy. */
static void take(shoal_live_ctl_t *L, const shoal_live_job_t *mj) {
  const shoal_live_jjob_t *e = shoal__live_replay_find(&L->replay, mj->id);
  seen_t s = read_seen(L, mj, e);
  if (s.ended && !e) return ignore(L, mj->id, NULL); /* ended before it was ever ours (cancelled while held) */
  if (!s.ended && !s.held && !s.claimed && !(e && (e->open || s.stopped_by_us)) && !(e && e->ended))
    return ignore(L, mj->id, "released outside the controller before it was placed: left to the manager, not accounted");
  if (!s.claimed_ours && !(e && e->ended) && live_claim(L, mj->id)) return; /* again next tick */
  lj_t *x = live_new_job(L, mj->id);
  if (!x) return;
  snprintf(x->user, sizeof x->user, "%s", mj->user);
  snprintf(x->account, sizeof x->account, "%s", mj->account);
  x->j.vc = tenant_of(L, mj);
  x->j.arrival = mj->submit_time > 0 ? mj->submit_time - L->epoch : L->s.now;
  if (x->j.arrival > L->s.now) x->j.arrival = L->s.now;
  restore(L, x, e);
  check_params(L, x, mj);
  if (e && e->ended) return ended_away(L, x, mj, e, e->final);
  char d[48], final[96];
  shoal__command_describe_status(mj->exit_status, d, sizeof d);
  snprintf(final, sizeof final, "%s (%s)", mj->state, d);
  if (s.completed) return ended_away(L, x, mj, NULL, "COMPLETED");
  if (s.user_cancelled) return ended_away(L, x, mj, NULL, FINAL_USER_CANCELLED);
  if (s.ended && !s.stopped_by_us && !s.wants_requeue && x->retries >= L->cfg.retries)
    return ended_away(L, x, mj, NULL, final);
  if (!e || !e->arrived) live_journal(L, "arrive %ld %.3f", x->sid, x->j.arrival);
  if (x->unsched[0] && !(mj->run == SHOAL_LIVE_RUNNING && !s.held)) {
    x->phase = PH_HELD;
    live_log(L, "job %ld: unschedulable: %s (it stays held; the others go on)", x->sid, x->unsched);
    return;
  }
  x->unsched[0] = 0; /* running already: adopted whatever it asked */
  live_activate(L, x);
  pick_up(L, x, mj, e, s);
  live_tell_arrival(L, x);
}

/* 1 if the manager's job is for this controller to consider at all; why says why not (NULL: say nothing) */
static int considered(shoal_live_ctl_t *L, const shoal_live_job_t *mj, char *why, size_t cap, int *quiet) {
  *quiet = 1;
  if (!shoal__live_params_tagged(mj->comment)) return 0;
  /* another partition: not ours, except a borrower the journal knows, moved by a grow onto lent hosts to a
   * partition that holds them all (Slurm runs a job inside one partition: manager_slurm.c) */
  if (L->cfg.partition && L->cfg.partition[0] && strcmp(mj->partition, L->cfg.partition) &&
      !(L->lend && shoal__live_replay_find(&L->replay, mj->id)))
    return 0;
  /* ended before the controller ever had it (the journal does not know it): nothing to say */
  if (mj->run == SHOAL_LIVE_ENDED && !shoal__live_replay_find(&L->replay, mj->id)) return 0;
  *quiet = 0;
  if (claimed_by_other(L, mj, why, cap)) return 0;
  if (L->cfg.accounts && L->cfg.accounts[0] && !shoal__live_list_has(L->cfg.accounts, mj->account)) {
    snprintf(why, cap, "account '%s' (user %s) may not submit to this controller (allowed: %s): left alone", mj->account,
             mj->user, L->cfg.accounts);
    return 0;
  }
  return 1;
}

static int by_submit(const void *a, const void *b) {
  const shoal_live_job_t *x = *(shoal_live_job_t *const *)a, *y = *(shoal_live_job_t *const *)b;
  if (x->submit_time != y->submit_time) return x->submit_time < y->submit_time ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

int live_arrivals(shoal_live_ctl_t *L) {
  const shoal_live_job_t **v = calloc((size_t)(L->view.n ? L->view.n : 1), sizeof *v);
  if (!v) return shoal__seterr(SHOAL_ERR_NOMEM, "live: out of memory");
  int n = 0;
  for (int i = 0; i < L->view.n; i++)
    if (!live_find(L, L->view.job[i].id)) v[n++] = &L->view.job[i];
  qsort(v, (size_t)n, sizeof *v, by_submit); /* arrivals in submit order (ties: job id) */
  for (int i = 0; i < n && !L->fatal; i++) {
    char why[320];
    int quiet;
    if (considered(L, v[i], why, sizeof why, &quiet)) take(L, v[i]);
    else if (!quiet) ignore(L, v[i]->id, why);
  }
  free(v);
  return 0;
}
