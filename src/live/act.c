/* The controller's actions through the manager (act.c in ctl.h). Each is
 * journaled first; in a dry run it is only said ("would ...") and taken as done
 * in the controller's own view. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/ctl.h"

/* the placement as the manager's node names and GPUs, and as the journal writes it */
static int place_of(shoal_live_ctl_t *L, const shoal_place_t *p, int n, shoal_live_place_t *mp, char *jbuf, size_t cap) {
  mp->n = n;
  mp->node = calloc((size_t)(n ? n : 1), sizeof *mp->node);
  int *g = calloc((size_t)(n ? n : 1), sizeof *g), *sv = NULL, servers = 0;
  for (int i = 0; i < n; i++) servers += p[i].ps;
  if (servers && !(sv = calloc((size_t)n, sizeof *sv))) return free(mp->node), free(g), -1;
  mp->gpus = g;
  mp->servers = sv;
  if (!mp->node || !g) return free(mp->node), free(g), free(sv), -1;
  size_t k = 0;
  jbuf[0] = 0;
  for (int i = 0; i < n; i++) {
    memcpy(mp->node[i], L->node[p[i].machine], SHOAL_LIVE_NAME);
    g[i] = p[i].workers;
    if (sv) sv[i] = p[i].ps;
    k += (size_t)snprintf(jbuf + k, k < cap ? cap - k : 0, "%s%s:%d", i ? "," : "", L->node[p[i].machine], p[i].workers);
  }
  return k < cap ? 0 : (free(mp->node), free(g), free(sv), -1);
}

static void place_free(shoal_live_place_t *mp) {
  free(mp->node);
  free((void *)mp->gpus);
  free((void *)mp->servers);
}

/* journaled, then started through the manager; the job's phase follows (a failure keeps it held, retried) */
static int start_on(shoal_live_ctl_t *L, lj_t *x, const shoal_live_place_t *mp, const char *jp, int workers) {
  char nodes[4096];
  shoal__live_place_str(mp, nodes, sizeof nodes);
  int rc = live_journal(L, "start %ld %.3f %s", x->sid, L->s.now, jp);
  if (!rc && !L->cfg.dry_run) rc = L->mgr.ops->start(L->mgr.impl, x->sid, mp);
  if (rc) {
    L->act_failed++;
    if (!x->start_failing && !L->fatal)
      live_log(L, "job %ld: start on %s failed (%s); it stays held and is retried", x->sid, nodes, shoal_last_error());
    x->start_failing = 1;
    return -1;
  }
  x->phase = PH_RELEASED;
  x->nwant = 0, x->nloan = 0;
  x->start_failing = 0;
  x->ran = 0;
  x->starts++;
  char sv[1024] = "";
  size_t k = 0;
  for (int i = 0; mp->servers && i < mp->n; i++)
    if (mp->servers[i] > 0)
      k += (size_t)snprintf(sv + k, k < sizeof sv ? sizeof sv - k : 0, "%s %d on %s", k ? "," : "; servers:",
                            mp->servers[i], mp->node[i]);
  live_log(L, "%sstart job %ld on %s (%d workers%s)", L->cfg.dry_run ? "would " : "", x->sid, nodes, workers, sv);
  return 0;
}

int live_start(shoal_live_ctl_t *L, lj_t *x, const shoal_place_t *p, int n) {
  shoal_live_place_t mp;
  char jp[SHOAL_LIVE_RECORD_MAX - 64];
  if (place_of(L, p, n, &mp, jp, sizeof jp)) {
    live_log(L, "job %ld: placement on %d nodes does not fit a journal record", x->sid, n);
    return -1;
  }
  int rc = start_on(L, x, &mp, jp, x->j.alloc.workers);
  place_free(&mp);
  if (rc) {
    if (p != x->want) memcpy(x->want, p, (size_t)n * sizeof *x->want);
    x->nwant = n;
    x->nloan = 0;
  }
  return rc;
}

int live_start_loan(shoal_live_ctl_t *L, lj_t *x) {
  char jp[SHOAL_LIVE_RECORD_MAX - 64];
  size_t k = 0;
  int workers = 0;
  for (int i = 0; i < x->nloan; i++) {
    k += (size_t)snprintf(jp + k, k < sizeof jp ? sizeof jp - k : 0, "%s%s:%d", i ? "," : "", x->loan_node[i],
                          x->loan_gpus[i]);
    workers += x->loan_gpus[i];
  }
  if (k >= sizeof jp) {
    live_log(L, "job %ld: placement on %d nodes does not fit a journal record", x->sid, x->nloan);
    return -1;
  }
  shoal_live_place_t mp = {.n = x->nloan, .node = x->loan_node, .gpus = x->loan_gpus};
  int n = x->nloan, rc = start_on(L, x, &mp, jp, workers);
  if (rc) x->nloan = n; /* kept: retried */
  return rc;
}

void live_stop(shoal_live_ctl_t *L, lj_t *x, const char *why) {
  snprintf(x->stop_why, sizeof x->stop_why, "%s", why);
  if (live_journal(L, "stop %ld %.3f %s", x->sid, L->s.now, why)) return;
  x->killed = 0;
  x->stop_at = L->s.now + L->cfg.grace;
  if (L->cfg.dry_run) { /* the stop is taken as done at once: requeued, held */
    x->phase = PH_REQUEUED;
    x->req_restarts = -1;
    return;
  }
  x->phase = PH_STOPPING;
  /* the checkpoint request; a job not running yet (released, waiting for its nodes) has nothing to signal:
   * observe() holds it instead */
  if (L->mgr.ops->stop(L->mgr.impl, x->sid, SHOAL_LIVE_STOP_CHECKPOINT))
    live_log(L, "job %ld: checkpoint request not delivered (%s)", x->sid, shoal_last_error());
}

int live_requeue(shoal_live_ctl_t *L, lj_t *x, const char *why, int restarts) {
  if (!L->cfg.dry_run && L->mgr.ops->requeue(L->mgr.impl, x->sid)) {
    L->act_failed++;
    live_log(L, "job %ld: requeue failed (%s; %s); retried next tick", x->sid, why, shoal_last_error());
    return -1;
  }
  x->req_restarts = restarts;
  x->phase = PH_REQUEUED;
  L->requeues++;
  return 0;
}

int live_hold(shoal_live_ctl_t *L, lj_t *x) {
  if (L->cfg.dry_run) return 0;
  int rc = L->mgr.ops->hold(L->mgr.impl, x->sid);
  if (rc) L->act_failed++, live_log(L, "job %ld: hold failed (%s); retried next tick", x->sid, shoal_last_error());
  return rc;
}

int live_kill(shoal_live_ctl_t *L, lj_t *x, shoal_live_stop_t how) {
  if (L->cfg.dry_run) return 0;
  return L->mgr.ops->stop(L->mgr.impl, x->sid, how);
}

int live_claim(shoal_live_ctl_t *L, long sid) {
  if (L->cfg.dry_run) return 0;
  int rc = L->mgr.ops->claim(L->mgr.impl, sid, L->claim);
  if (rc) L->act_failed++, live_log(L, "job %ld: claim failed (%s); retried next tick", sid, shoal_last_error());
  return rc;
}
