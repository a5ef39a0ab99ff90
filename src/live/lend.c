/* Loaning in the controller's round (lend.c in ctl.h): every cfg.loan.every
 * seconds the requests' rate and queue are read (cfg.loan.load: the router's
 * /router/stats), the borrowers are the controller's running elastic jobs, and
 * the loan module (loan.h) acts on the manager: replica jobs on the VC_infer
 * hosts, idle ones lent to the borrowers, reclaimed when needed, each choice by
 * the borrowers' speedups under the controller's speed model.
 * Nothing of a loan lives only here: the replicas are the manager's jobs (their
 * comment says so) and the lent hosts are the borrower's, so a restarted
 * controller finds both where the manager shows them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "live/ctl.h"

/* A borrower's resize the manager cannot make in place (loan.h's restart): the controller's own stop, a checkpoint
 * at the job's next iteration boundary (its run's end is then a stop it asked for, not a failure), and a start
 * on p once the manager shows the run requeued (observe.c). */
static int loan_restart(void *arg, long id, const shoal_live_place_t *p) {
  shoal_live_ctl_t *L = arg;
  lj_t *x = live_find(L, id);
  if (!x || x->phase != PH_RELEASED || !x->ran || p->n < 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "loaning: job %ld does not run for the controller: not restarted", id);
  char (*node)[SHOAL_LIVE_NAME] = realloc(x->loan_node, (size_t)p->n * sizeof *node);
  if (node) x->loan_node = node;
  int *gpus = node ? realloc(x->loan_gpus, (size_t)p->n * sizeof *gpus) : NULL;
  if (!gpus) return shoal__seterr(SHOAL_ERR_NOMEM, "loaning: out of memory");
  x->loan_gpus = gpus;
  memcpy(x->loan_node, p->node, (size_t)p->n * sizeof *node);
  memcpy(x->loan_gpus, p->gpus, (size_t)p->n * sizeof *gpus);
  char where[1024];
  shoal__live_place_str(p, where, sizeof where);
  live_log(L, "loaning: job %ld checkpoints and restarts on %s", x->sid, where);
  live_stop(L, x, "loan");
  x->nwant = 0, x->nloan = p->n; /* (after the stop: a dry run's stop is done at once) */
  return 0;
}

int live_lend_setup(shoal_live_ctl_t *L) {
  const shoal_live_loan_opts_t *o = &L->cfg.loan;
  if (!o->partition || !o->partition[0]) return 0;
  if (!L->partition_s[0] || !strcmp(L->partition_s, o->partition))
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning from partition %s: the controller must serve another partition "
                         "(VC_train: --partition) than the one it lends from (VC_infer)", o->partition);
  if (!o->load) return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: no source of the request rate (the router)");
  int rc = shoal__forecast_create(o->forecast ? o->forecast : "holt", o->alpha > 0 ? o->alpha : 0.5, o->z, &L->lend_fc);
  if (rc) {
    char why[200];
    snprintf(why, sizeof why, "%s", shoal_last_error());
    return shoal__seterr(rc, "loaning: %s", why);
  }
  if (!strcmp(shoal__forecast_name(L->lend_fc), "oracle"))
    return shoal__seterr(SHOAL_ERR_CONFIG, "loaning: the oracle predictor knows the future: simulation only");
  shoal_live_loan_config_t c = {.infer_partition = o->partition, .replica_argv = o->replica_argv, .router = o->router,
                                .replica_argc = o->replica_argc, .service_s = o->service_s, .slo_s = o->slo_s,
                                .slo_q = o->slo_q, .hold_s = o->hold_s, .spare = o->spare, .react_lo = o->react_lo,
                                .react_hi = o->react_hi,
                                .restart = loan_restart, .restart_arg = L};
  if ((rc = shoal__live_loan_create(&c, L->lend_fc, &L->lend))) return rc;
  L->lend_arrived = -1;
  if (o->react_hi > 0)
    live_log(L, "loaning from partition %s: reactive, replicas for a utilization in %.3g..%.3g at %.3g s a request, hold %.3g s",
             o->partition, o->react_lo, o->react_hi, o->service_s, o->hold_s);
  else
    live_log(L, "loaning from partition %s: replicas for P%g under %.3g s at %.3g s a request (until the replicas "
             "report theirs) and %d spare, predictor %s, hold %.3g s", o->partition, 100 * o->slo_q, o->slo_s,
             o->service_s, o->spare, shoal__forecast_name(L->lend_fc), o->hold_s);
  return 0;
}

void live_lend_free(shoal_live_ctl_t *L) {
  shoal__live_loan_destroy(L->lend);
  shoal__forecast_free(L->lend_fc);
  L->lend = NULL, L->lend_fc = NULL;
}

/* The borrowers: the running elastic jobs the controller started, each with its room above its workers (the GPUs
 * it may borrow). A job new to the set is said once. */
static int borrowers(shoal_live_ctl_t *L, shoal_live_borrower_t *b) {
  int n = 0;
  for (int i = 0; i < L->s.nactive && n < SHOAL_LIVE_LOAN_MAX_BORROWERS; i++) {
    shoal_job_t *j = L->s.active[i];
    lj_t *x = L->jobs[j->id];
    int r = j->max_workers - j->alloc.workers;
    if (x->phase != PH_RELEASED || !x->ran || j->alloc.n == 0 || r <= 0) continue;
    int known = 0;
    for (int k = 0; k < L->lend_nb; k++) known |= L->lend_b[k].id == x->sid;
    if (!known) live_log(L, "loaning: job %ld borrows (up to %d more GPUs)", x->sid, r);
    L->lend_job[n] = j;
    b[n].id = x->sid, b[n++].room = r;
  }
  return n;
}

/* borrower k's speed on g GPUs over its speed on one, by the controller's speed model (consolidated) */
static double borrower_speedup(void *arg, int k, int g) {
  shoal_live_ctl_t *L = arg;
  const shoal_job_t *j = L->lend_job[k];
  double one = shoal_sched_rate_consolidated(&L->s, j, 1, 0), r = shoal_sched_rate_consolidated(&L->s, j, g, 0);
  return one > 0 && r > 0 ? r / one : g;
}

/* one line for what a step changed, one for an error that is new */
static void say(shoal_live_ctl_t *L, int rc, double rate, double waiting, const shoal_live_loan_step_t *o, double took) {
  if (rc) {
    char msg[sizeof L->lend_said];
    snprintf(msg, sizeof msg, "%s", shoal_last_error());
    if (strcmp(msg, L->lend_said)) live_log(L, "loaning: %s (tried again every %.3g s)", msg, L->cfg.loan.every);
    snprintf(L->lend_said, sizeof L->lend_said, "%s", msg);
    return;
  }
  L->lend_said[0] = 0;
  if (!o->started && !o->reclaimed && !o->stopped && !o->lent_now) return;
  char did[512] = "";
  size_t k = 0;
  for (int i = 0; i < o->nb && k < sizeof did; i++)
    if (o->b[i].reclaimed) k += (size_t)snprintf(did + k, sizeof did - k, ", %d reclaimed from job %ld", o->b[i].reclaimed, o->b[i].id);
  if (o->started && k < sizeof did) k += (size_t)snprintf(did + k, sizeof did - k, ", %d replica%s started", o->started, o->started == 1 ? "" : "s");
  if (o->stopped && k < sizeof did) k += (size_t)snprintf(did + k, sizeof did - k, ", %d replica%s stopped", o->stopped, o->stopped == 1 ? "" : "s");
  for (int i = 0; i < o->nb && k < sizeof did; i++)
    if (o->b[i].lent_now) k += (size_t)snprintf(did + k, sizeof did - k, ", %d lent to job %ld", o->b[i].lent_now, o->b[i].id);
  live_log(L, "loaning: %.2f requests/s, %.0f waiting, %.3f s a request: %d replica%s wanted%s; now %d replica%s, "
           "%d host%s lent (the step took %.2f s)", rate, waiting, o->service_s, o->want, o->want == 1 ? "" : "s", did,
           o->replicas, o->replicas == 1 ? "" : "s", o->lent, o->lent == 1 ? "" : "s", took);
}

/* Requests per second that arrived since the last step, from the router's running count: a burst of a few
 * seconds reads at its height (the router's own rate is the answers over its window, 10 s: a 3 s burst read as a
 * third of itself, after the requests waited). The router's rate for the first step and after a count that went
 * back (a restarted router). */
static double arrival_rate(shoal_live_ctl_t *L, double now, double answered, double arrived) {
  double last = L->lend_arrived, dt = now - L->lend_arrived_at;
  int known = arrived >= 0 && last >= 0 && arrived >= last && dt > 0;
  L->lend_arrived = arrived, L->lend_arrived_at = now;
  return known ? (arrived - last) / dt : answered;
}

void live_lend(shoal_live_ctl_t *L) {
  if (!L->lend || L->cfg.dry_run) return;
  double w = live_wall(L);
  if (w < L->lend_next) return;
  L->lend_next = w + (L->cfg.loan.every > 0 ? L->cfg.loan.every : 2);
  double rate = 0, waiting = 0, service = 0, arrived = -1;
  int rc = L->cfg.loan.load(L->cfg.loan.load_arg, &rate, &waiting, &service, &arrived);
  shoal_live_loan_step_t o = {0};
  if (!rc) {
    rate = arrival_rate(L, w, rate, arrived);
    shoal_live_borrower_t b[SHOAL_LIVE_LOAN_MAX_BORROWERS];
    int nb = borrowers(L, b);
    memcpy(L->lend_b, b, sizeof b), L->lend_nb = nb;
    shoal__live_loan_borrowers(L->lend, b, nb, borrower_speedup, L);
    shoal__live_loan_measured(L->lend, service);
    rc = shoal__live_loan_step(L->lend, &L->mgr, w, rate, waiting, &o);
    if (!rc) L->lend_last = o, L->lend_steps++;
  } else {
    char why[200];
    snprintf(why, sizeof why, "%s", shoal_last_error());
    rc = shoal__seterr(rc, "the request rate cannot be read: %s", why);
  }
  say(L, rc, rate, waiting, &o, live_wall(L) - w);
}
