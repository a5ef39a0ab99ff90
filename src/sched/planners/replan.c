/* larr's re-planning batch (docs/scheduling.md "Re-planning"): release the
 * future slots of committed jobs larger than the smallest new one and plan
 * everything smallest first. A pure planner on the slot model (model/slot_plan.h);
 * the engine reaches it through the slotted policies (policies/slotted.c). */
#include "sched/planners/replan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/planners/greedy.h"

#define EPS 1e-9

void shoal__ps_replan_defaults(shoal__ps_replan_params_t *p) {
  shoal__ps_larr_defaults(&p->larr);
  p->replan_k = 32;
  p->replan_lp = 0;
  p->replan_key = 1;
  p->release_next = 0;
  p->new_by = SHOAL__PS_NEW_BY_LP;
  p->plan_new = NULL;
  p->plan_new_arg = NULL;
}

/* Plan job j from slot t into *R the way `by` says. */
static int plan_by(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, const shoal__ps_replan_params_t *p,
                   shoal__ps_new_by_t by, shoal__ps_larr_stats_t *st, shoal__ps_sched_t *R) {
  if (by == SHOAL__PS_NEW_BY_PLAN_NEW) return p->plan_new(p->plan_new_arg, c, j, t, R);
  if (by == SHOAL__PS_NEW_BY_LP) return shoal__ps_larr(c, j, t, &p->larr, R, st);
  return shoal__ps_greedy(c, j, t, p->larr.hmax, p->larr.theta, R);
}

/* Drop the slots >= t of a schedule (not the capacity: release first). */
static void sched_cut(shoal__ps_sched_t *S, int t) {
  int keep = t - S->start;
  if (keep < 0) keep = 0;
  for (int k = keep; k < S->len; k++) free(S->slot[k].pl);
  if (keep < S->len) S->len = keep;
}

static double work_before(const shoal__ps_job_t *j, const shoal__ps_sched_t *S, int t) {
  double w = 0;
  for (int k = 0; k < S->len && S->start + k < t; k++) w += shoal__ps_slot_work(j, &S->slot[k]);
  return w;
}

/* Best one-slot rate on an empty machine: co-located on the largest machine
 * that fits, or wmax distributed. Used only to order jobs by size. */
static double best_rate(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j) {
  double r = j->wmax * j->rho_ex;
  for (int h = 0; h < c->H; h++) {
    int w = shoal__ps_max_coloc(j, shoal__ps_cap(c, h));
    if (shoal__ps_w_ok(j, w) && w * j->rho_in > r) r = w * j->rho_in;
    if (w == j->wmax) break; /* nothing co-located beats wmax on one machine */
  }
  return r;
}

typedef struct {
  int i;
  double key;
  int arrival, id;
} rp_item_t;

static int cmp_item(const void *a, const void *b) {
  const rp_item_t *x = a, *y = b;
  if (x->key < y->key - 1e-12) return -1;
  if (x->key > y->key + 1e-12) return 1;
  if (x->arrival != y->arrival) return x->arrival - y->arrival;
  return x->id - y->id;
}

/* Smaller key = planned earlier: remaining standalone time (slots), or
 * remaining GPU-slots at that rate (key 1, the 2-D size). */
static double rp_key(const shoal__ps_job_t *j, double rem, double rate, int key) {
  double slots = rem / rate;
  if (key == 1) {
    int w = (int)ceil(rate / j->rho_in - EPS);
    if (w > j->wmax) w = j->wmax;
    return slots * (w > 0 ? w : 1) * (j->dw[SHOAL_PS_GPU] > 0 ? j->dw[SHOAL_PS_GPU] : 1);
  }
  return slots;
}

double shoal__ps_size_key(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int key) {
  return rp_key(j, j->work, best_rate(c, j), key);
}

/* The batch's jobs into it[0..) with their remaining work at t (rem) and
 * size keys; *thr gets the smallest key. Returns how many. */
static int batch_items(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, const shoal__ps_sched_t *S,
                       const int *batch, int nb, int t, int key, double *rate_best, rp_item_t *it, double *rem,
                       double *thr) {
  int m = 0;
  *thr = INFINITY;
  for (int q = 0; q < nb; q++) {
    int i = batch[q];
    if (!(rate_best[i] > 0)) rate_best[i] = best_rate(c, &jobs[i]);
    rem[m] = jobs[i].work - work_before(&jobs[i], &S[i], t);
    it[m] = (rp_item_t){i, rp_key(&jobs[i], rem[m], rate_best[i], key), jobs[i].arrival, jobs[i].id};
    if (it[m].key < *thr) *thr = it[m].key;
    m++;
  }
  return m;
}

/* Release, from slot t on, committed jobs with work left at t that are larger
 * than thr (the smallest job of the batch: SRPT puts them after it), at most
 * replan_k of them, the largest: they hold capacity longest and belong last in
 * SRPT order (decision-time bound, docs/scheduling.md). They are appended to
 * it[*m..) (marked by a negative arrival) and listed in released when not
 * NULL; returns how many. */
static int release_larger(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const int *active,
                          int na, int t, const shoal__ps_replan_params_t *p, double *rate_best, double thr,
                          rp_item_t *it, double *rem, int *m, int *released) {
  int nc = 0;
  rp_item_t *cand = it + *m;
  for (int q = 0; q < na; q++) {
    int i = active[q];
    double r = jobs[i].work - work_before(&jobs[i], &S[i], t);
    if (r <= jobs[i].work * EPS) continue; /* done before t: nothing to re-plan */
    if (!(rate_best[i] > 0)) rate_best[i] = best_rate(c, &jobs[i]);
    double k = rp_key(&jobs[i], r, rate_best[i], p->replan_key);
    if (k <= thr) continue;
    cand[nc++] = (rp_item_t){i, k, jobs[i].arrival, jobs[i].id};
  }
  if (nc > 1) qsort(cand, (size_t)nc, sizeof *cand, cmp_item);
  int first = nc > p->replan_k ? nc - p->replan_k : 0;
  for (int q = first; q < nc; q++) {
    int i = cand[q].i;
    if (released) released[q - first] = i;
    shoal__ps_release(c, &jobs[i], &S[i], t);
    sched_cut(&S[i], t);
    it[*m] = cand[q];
    rem[*m] = jobs[i].work - work_before(&jobs[i], &S[i], t);
    it[*m].key = rp_key(&jobs[i], rem[*m], rate_best[i], p->replan_key);
    it[*m].arrival = -1 - jobs[i].arrival; /* marks a released job (sorted below by real arrival) */
    (*m)++;
  }
  return nc - first;
}

/* isnew[x]: it[x] came with the batch (its arrival unmarked); ord: the items
 * smallest first (tmp: scratch of m items). */
static void smallest_first(rp_item_t *it, int m, char *isnew, int *ord, rp_item_t *tmp) {
  for (int q = 0; q < m; q++) {
    isnew[q] = it[q].arrival >= 0;
    if (!isnew[q]) it[q].arrival = -1 - it[q].arrival;
  }
  for (int q = 0; q < m; q++) tmp[q] = it[q], tmp[q].i = q; /* i: index into it/rem/isnew */
  if (m > 1) qsort(tmp, (size_t)m, sizeof *tmp, cmp_item);
  for (int q = 0; q < m; q++) ord[q] = tmp[q].i;
}

/* Restart cost in the objective (jobs with restart > 0): the jobs planned after item ord[q] that run now
 * (held) keep their placement in slot t if the job planned before them can do without it. Their held
 * placements (where they still fit) are reserved in slot t while jr is planned (as `by` says) into *R;
 * the plan stands if it ends no later than the greedy's plan without the reservation (the earliest end
 * any plan reaches): then nobody is moved for nothing. Returns 0 with *R, 1 when the plan must be made
 * without the reservation (nothing reserved, or reserving delays jr: SRPT's preemption), or an error
 * (SHOAL_ERR_INFEASIBLE passed on). */
static int plan_around_held(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, const rp_item_t *it, const double *rem,
                            const int *ord, int q, int m, int t, const shoal__ps_replan_params_t *p,
                            shoal__ps_new_by_t by, shoal__ps_larr_stats_t *st, const shoal__ps_job_t *jr,
                            shoal__ps_sched_t *R) {
  if (!(jr->restart > 0)) return 1;
  shoal__ps_sched_t H;
  int nres = 0, rc = 0, *resv = malloc(sizeof(int) * (size_t)m);
  if (!resv) return shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  for (int u = q + 1; u < m && !rc; u++) {
    int i = it[ord[u]].i;
    const shoal__ps_job_t *hj = &jobs[i];
    if (!hj->held || !hj->held->n || rem[ord[u]] <= 0 || !shoal__ps_slot_fits(c, hj, hj->held, t)) continue;
    shoal__ps_sched_init(&H, t);
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(&H, t);
    rc = !sl ? SHOAL_ERR_NOMEM : shoal__ps_slot_copy(sl, hj->held);
    if (!rc && !(rc = shoal__ps_commit(c, hj, &H))) resv[nres++] = i;
    shoal__ps_sched_free(&H);
  }
  int out = 1;
  if (!rc && nres) {
    int prc = plan_by(c, jr, t, p, by, st, R);
    if (prc == 0) out = 0;
    else if (prc != SHOAL_ERR_INFEASIBLE) rc = prc;
  }
  for (int v = 0; v < nres; v++) { /* give the reservations back */
    const shoal__ps_job_t *hj = &jobs[resv[v]];
    shoal__ps_sched_init(&H, t);
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(&H, t);
    if (sl && !shoal__ps_slot_copy(sl, hj->held)) shoal__ps_release(c, hj, &H, t);
    else rc = rc ? rc : SHOAL_ERR_NOMEM;
    shoal__ps_sched_free(&H);
  }
  free(resv);
  if (!rc && out == 0) { /* does the reservation delay jr? */
    shoal__ps_sched_t G;
    int grc = shoal__ps_greedy(c, jr, t, p->larr.hmax, p->larr.theta, &G);
    if (grc == 0 && shoal__ps_sched_end(&G) < shoal__ps_sched_end(R)) out = 1;
    if (grc == 0) shoal__ps_sched_free(&G);
    else if (grc != SHOAL_ERR_INFEASIBLE) rc = grc;
    if (out) shoal__ps_sched_free(R);
  }
  if (rc) {
    if (out == 0) shoal__ps_sched_free(R);
    return rc < 0 ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  }
  return out;
}

/* Plan the items in order from t (released ones from t + 1 with release_next): new jobs as p->new_by says,
 * released ones by the greedy (or the LP with replan_lp); a job that does not fit within hmax (or that
 * plan_new does not take now) is deferred. */
static int plan_in_order(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const rp_item_t *it,
                         const double *rem, const char *isnew, const int *ord, int m, int t,
                         const shoal__ps_replan_params_t *p, shoal__ps_larr_stats_t *st, int *deferred, int *ndef) {
  int rc = 0;
  for (int q = 0; q < m && !rc; q++) {
    int x = ord[q], i = it[x].i;
    int ts = isnew[x] || !p->release_next ? t : t + 1; /* released jobs kept slot t with release_next */
    shoal__ps_job_t jr = jobs[i];
    jr.work = rem[x];
    if (jr.arrival < ts) jr.arrival = ts;
    shoal__ps_sched_t R;
    shoal__ps_new_by_t by = isnew[x] ? p->new_by : p->replan_lp ? SHOAL__PS_NEW_BY_LP : SHOAL__PS_NEW_BY_GREEDY;
    /* plan_new is asked once per offer (OASiS counts each answer as an offer of the job) */
    int prc = by == SHOAL__PS_NEW_BY_PLAN_NEW ? 1
                                              : plan_around_held(c, jobs, it, rem, ord, q, m, ts, p, by, st, &jr, &R);
    if (prc == 1) prc = plan_by(c, &jr, ts, p, by, st, &R);
    if (prc == SHOAL_ERR_INFEASIBLE) {
      if (ts == t) deferred[(*ndef)++] = i; /* else it keeps slot t: its plan runs out there */
      continue;
    }
    if (prc) return prc;
    if (!(rc = shoal__ps_sched_check(c, &jr, &R, 1)) && !(rc = shoal__ps_commit(c, &jr, &R)))
      rc = shoal__ps_sched_overlay(&S[i], &R, R.start);
    shoal__ps_sched_fit(&S[i]); /* kept until the job ends */
    shoal__ps_sched_free(&R);
  }
  return rc;
}

int shoal__ps_replan(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const int *active,
                     int na, const int *batch, int nb, int t, const shoal__ps_replan_params_t *p, double *rate_best,
                     shoal__ps_larr_stats_t *st, int *deferred, int *ndef, int *nrel, int *released) {
  *ndef = 0;
  *nrel = 0;
  if (nb <= 0) return 0;
  if (p->new_by == SHOAL__PS_NEW_BY_PLAN_NEW && !p->plan_new)
    return shoal__seterr(SHOAL_ERR_INVALID, "replan: new jobs by plan_new, and no plan_new given");
  size_t cap = (size_t)(na + nb);
  rp_item_t *it = malloc(sizeof *it * cap), *tmp = malloc(sizeof *tmp * cap);
  double *rem = malloc(sizeof(double) * cap);
  char *isnew = malloc(cap);
  int *ord = malloc(sizeof(int) * cap), rc = 0;
  if (!it || !tmp || !rem || !isnew || !ord) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  } else {
    double thr;
    int m = batch_items(c, jobs, S, batch, nb, t, p->replan_key, rate_best, it, rem, &thr);
    *nrel = release_larger(c, jobs, S, active, na, t + (p->release_next ? 1 : 0), p, rate_best, thr, it, rem, &m,
                           released);
    smallest_first(it, m, isnew, ord, tmp);
    rc = plan_in_order(c, jobs, S, it, rem, isnew, ord, m, t, p, st, deferred, ndef);
  }
  free(it);
  free(tmp);
  free(rem);
  free(isnew);
  free(ord);
  return rc;
}
