/* Slot-level online driver for the PS policies (larr, greedy, oasis), larr's
 * re-planning, and four per-slot baselines in the same model (fifo, drf,
 * optimus, tiresias). */
#include "sched/ps_online.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "sched/ps_greedy.h"

#define EPS 1e-9

static const char *const pol_names[SHOAL_PS_POL__N] = {"larr", "greedy", "oasis", "fifo", "drf", "optimus", "tiresias"};
const char *shoal__ps_pol_name(shoal__ps_pol_t p) { return p >= 0 && p < SHOAL_PS_POL__N ? pol_names[p] : "?"; }
int shoal__ps_pol_parse(const char *name, shoal__ps_pol_t *out) {
  for (int i = 0; i < SHOAL_PS_POL__N; i++)
    if (!strcmp(name, pol_names[i])) {
      *out = (shoal__ps_pol_t)i;
      return 0;
    }
  return shoal__seterr(SHOAL_ERR_INVALID, "unknown PS policy '%s' (larr, greedy, oasis, fifo, drf, optimus, tiresias)", name);
}

void shoal__ps_run_defaults(shoal__ps_run_params_t *p) {
  shoal__ps_larr_defaults(&p->larr);
  shoal__ps_oasis_defaults(&p->oasis);
  p->oasis_force_after = 20;
  p->max_slots = 100000;
  p->replan = 1;
  p->replan_k = 32;
  p->replan_lp = 0;
  p->replan_key = 1;
  p->tir_nq = 3;
  p->tir_thr[0] = 4;
  p->tir_thr[1] = 32;
  p->tir_thr[2] = p->tir_thr[3] = INFINITY;
}

static int cmp_arrival(const void *a, const void *b, void *ctx) {
  const shoal__ps_job_t *J = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  if (J[x].arrival != J[y].arrival) return J[x].arrival - J[y].arrival;
  return J[x].id - J[y].id;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void finish_stats(shoal__ps_run_result_t *r, const shoal__ps_job_t *jobs, int n, double dsum) {
  double *fl = malloc(sizeof(double) * (size_t)(n ? n : 1));
  r->total_flow = 0;
  r->makespan = 0;
  for (int i = 0; i < n; i++) {
    double f = r->end[i] - jobs[i].arrival + 1;
    r->total_flow += f;
    if (r->end[i] + 1 > r->makespan) r->makespan = r->end[i] + 1;
    if (fl) fl[i] = f;
  }
  r->mean_flow = n ? r->total_flow / n : 0;
  if (fl && n) {
    qsort(fl, (size_t)n, sizeof(double), cmp_double);
    r->p95_flow = fl[(int)floor(0.95 * (n - 1))];
  }
  free(fl);
  r->decide_ms_mean = r->decisions ? dsum / r->decisions : 0;
}

/* ---- plan policies ---- */

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
    if (w * j->rho_in > r) r = w * j->rho_in;
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
    return slots * (w > 0 ? w : 1) * (j->dw[0] > 0 ? j->dw[0] : 1);
  }
  return slots;
}

double shoal__ps_size_key(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int key) {
  return rp_key(j, j->work, best_rate(c, j), key);
}

int shoal__ps_replan(shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, shoal__ps_sched_t *S, const int *active,
                     int na, const int *batch, int nb, int t, const shoal__ps_run_params_t *p, double *rate_best,
                     shoal__ps_larr_stats_t *st, int *deferred, int *ndef, int *nrel) {
  *ndef = 0;
  *nrel = 0;
  if (nb <= 0) return 0;
  rp_item_t *it = malloc(sizeof *it * (size_t)(na + nb));
  double *rem = malloc(sizeof(double) * (size_t)(na + nb));
  if (!it || !rem) {
    free(it);
    free(rem);
    return shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  }
  double thr = INFINITY;
  int m = 0, rc = 0;
  for (int q = 0; q < nb; q++) {
    int i = batch[q];
    if (!(rate_best[i] > 0)) rate_best[i] = best_rate(c, &jobs[i]);
    rem[m] = jobs[i].work - work_before(&jobs[i], &S[i], t);
    it[m] = (rp_item_t){i, rp_key(&jobs[i], rem[m], rate_best[i], p->replan_key), jobs[i].arrival, jobs[i].id};
    if (it[m].key < thr) thr = it[m].key;
    m++;
  }
  /* candidates for release: committed jobs with work left at t that are
   * larger than the smallest job of the batch (SRPT puts them after it) */
  int nc = 0;
  rp_item_t *cand = it + m;
  for (int q = 0; q < na; q++) {
    int i = active[q];
    double r = jobs[i].work - work_before(&jobs[i], &S[i], t);
    if (r <= jobs[i].work * EPS) continue; /* done before t: nothing to re-plan */
    if (!(rate_best[i] > 0)) rate_best[i] = best_rate(c, &jobs[i]);
    double k = rp_key(&jobs[i], r, rate_best[i], p->replan_key);
    if (k <= thr) continue;
    cand[nc++] = (rp_item_t){i, k, jobs[i].arrival, jobs[i].id};
  }
  /* at most replan_k of them, the largest: they hold capacity longest and
   * belong last in SRPT order (decision-time bound, docs/scheduling.md) */
  qsort(cand, (size_t)nc, sizeof *cand, cmp_item);
  int first = nc > p->replan_k ? nc - p->replan_k : 0;
  for (int q = first; q < nc; q++) {
    int i = cand[q].i;
    shoal__ps_release(c, &jobs[i], &S[i], t);
    sched_cut(&S[i], t);
    it[m] = cand[q];
    rem[m] = jobs[i].work - work_before(&jobs[i], &S[i], t);
    it[m].key = rp_key(&jobs[i], rem[m], rate_best[i], p->replan_key);
    it[m].arrival = -1 - jobs[i].arrival; /* marks a released job (sorted below by real arrival) */
    m++;
  }
  *nrel = nc - first;
  /* plan everything in the batch smallest first; remember which were new */
  char *isnew = malloc((size_t)m);
  if (!isnew) {
    free(it);
    free(rem);
    return shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  }
  for (int q = 0; q < m; q++) {
    isnew[q] = it[q].arrival >= 0;
    if (!isnew[q]) it[q].arrival = -1 - it[q].arrival;
  }
  /* sort items with their rem and isnew: sort an index permutation */
  int *ord = malloc(sizeof(int) * (size_t)m);
  rp_item_t *tmp = malloc(sizeof *tmp * (size_t)m);
  if (!ord || !tmp) {
    free(it);
    free(rem);
    free(isnew);
    free(ord);
    free(tmp);
    return shoal__seterr(SHOAL_ERR_NOMEM, "replan");
  }
  for (int q = 0; q < m; q++) tmp[q] = it[q], tmp[q].i = q; /* i: index into it/rem/isnew */
  qsort(tmp, (size_t)m, sizeof *tmp, cmp_item);
  for (int q = 0; q < m; q++) ord[q] = tmp[q].i;
  free(tmp);
  for (int q = 0; q < m && !rc; q++) {
    int x = ord[q], i = it[x].i;
    shoal__ps_job_t jr = jobs[i];
    jr.work = rem[x];
    if (jr.arrival < t) jr.arrival = t;
    shoal__ps_sched_t R;
    int prc;
    if (isnew[x] || p->replan_lp) prc = shoal__ps_larr(c, &jr, t, &p->larr, &R, st);
    else prc = shoal__ps_greedy(c, &jr, t, p->larr.hmax, p->larr.theta, &R);
    if (prc == SHOAL_ERR_INFEASIBLE) {
      deferred[(*ndef)++] = i;
      continue;
    }
    if (prc) {
      rc = prc;
      break;
    }
    if (!(rc = shoal__ps_sched_check(c, &jr, &R, 1)) && !(rc = shoal__ps_commit(c, &jr, &R)))
      for (int k = 0; k < R.len && !rc; k++) {
        shoal__ps_slot_t *dst = shoal__ps_sched_slot(&S[i], R.start + k);
        rc = dst ? shoal__ps_slot_copy(dst, &R.slot[k]) : shoal__seterr(SHOAL_ERR_NOMEM, "replan");
      }
    shoal__ps_sched_free(&R);
  }
  free(it);
  free(rem);
  free(isnew);
  free(ord);
  return rc;
}

/* larr with re-planning: every job keeps one schedule from its arrival,
 * committed in c; each slot with arrivals (or deferred jobs) is one batch. */
static int run_replan(const shoal__ps_cluster_t *c0, const shoal__ps_job_t *jobs, int n, const int *order,
                      const shoal__ps_run_params_t *p, shoal__ps_run_result_t *r, shoal__ps_sched_t *sched_out) {
  shoal__ps_cluster_t c;
  int rc = shoal__ps_cluster_copy(&c, c0);
  if (rc) return rc;
  shoal__ps_sched_t *S = calloc((size_t)n, sizeof *S);
  int *pending = malloc(sizeof(int) * (size_t)n), *active = malloc(sizeof(int) * (size_t)n);
  int *def = malloc(sizeof(int) * (size_t)n);
  double *rate = calloc((size_t)n, sizeof(double)), dsum = 0;
  char *inpend = calloc((size_t)n, 1);
  int np = 0, na = 0, next = 0;
  if (!S || !pending || !active || !def || !rate || !inpend) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps run");
    goto out;
  }
  for (int i = 0; i < n; i++) shoal__ps_sched_init(&S[i], jobs[i].arrival);
  for (int t = 0; (next < n || np > 0) && !rc; t++) {
    if (t > p->max_slots) {
      rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "larr: %d jobs still unplanned at slot %d", np + n - next, t);
      break;
    }
    while (next < n && jobs[order[next]].arrival <= t) pending[np++] = order[next++];
    if (!np) continue;
    /* committed jobs still running at t */
    int k = 0;
    for (int q = 0; q < na; q++) {
      int i = active[q];
      if (shoal__ps_sched_end(&S[i]) >= t) active[k++] = i;
    }
    na = k;
    int nnew = np, ndef = 0, nrel = 0;
    double t0 = shoal__now_s();
    rc = shoal__ps_replan(&c, jobs, S, active, na, pending, np, t, p, rate, &r->larr, def, &ndef, &nrel);
    double ms = (shoal__now_s() - t0) * 1e3 / nnew;
    if (rc) break;
    dsum += ms * nnew;
    r->decisions += nnew;
    r->replans++;
    r->released += nrel;
    if (ms > r->decide_ms_max) r->decide_ms_max = ms;
    /* active: everything planned now; pending: the deferred */
    char *isdef = inpend;
    for (int q = 0; q < ndef; q++) isdef[def[q]] = 1;
    int na2 = 0;
    for (int q = 0; q < na; q++)
      if (!isdef[active[q]]) active[na2++] = active[q];
    for (int q = 0; q < np; q++)
      if (!isdef[pending[q]]) active[na2++] = pending[q];
    na = na2;
    for (int q = 0; q < ndef; q++) isdef[def[q]] = 0, pending[q] = def[q];
    np = ndef;
    r->deferrals += ndef;
  }
  if (rc) goto out;
  for (int i = 0; i < n; i++) {
    r->end[i] = shoal__ps_sched_finish(&jobs[i], &S[i]);
    if (r->end[i] < 0) {
      rc = shoal__seterr(SHOAL_ERR_INTERNAL, "larr re-plan: job %d ends uncovered", jobs[i].id);
      goto out;
    }
    for (int q = 0; q < S[i].len; q++) {
      int W, P;
      shoal__ps_slot_totals(&S[i].slot[q], &W, &P);
      if (W) r->job_slots++, r->coloc_slots += shoal__ps_slot_coloc(&S[i].slot[q]);
    }
  }
  finish_stats(r, jobs, n, dsum);
  if (sched_out) {
    for (int i = 0; i < n; i++) sched_out[i] = S[i];
    free(S);
    S = NULL;
  }
out:
  if (S)
    for (int i = 0; i < n; i++) shoal__ps_sched_free(&S[i]);
  free(S);
  free(pending);
  free(active);
  free(def);
  free(rate);
  free(inpend);
  shoal__ps_cluster_free(&c);
  return rc;
}

static int run_plan(const shoal__ps_cluster_t *c0, const shoal__ps_job_t *jobs, int n, const int *order,
                    shoal__ps_pol_t pol, const shoal__ps_run_params_t *p, shoal__ps_run_result_t *r,
                    shoal__ps_sched_t *sched_out) {
  shoal__ps_cluster_t c;
  int rc = shoal__ps_cluster_copy(&c, c0);
  if (rc) return rc;
  int *pending = malloc(sizeof(int) * (size_t)n), np = 0, next = 0, *tries = calloc((size_t)n, sizeof(int));
  shoal__ps_oasis_est_t est;
  shoal__ps_oasis_est_init(&est);
  double dsum = 0;
  if (!pending || !tries) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps run");
    goto out;
  }
  for (int t = 0; (next < n || np > 0) && !rc; t++) {
    if (t > p->max_slots) {
      rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "%s: %d jobs still unplanned at slot %d", shoal__ps_pol_name(pol), np + n - next, t);
      break;
    }
    while (next < n && jobs[order[next]].arrival <= t) {
      pending[np++] = order[next++];
      if (pol == SHOAL_PS_POL_OASIS) shoal__ps_oasis_observe(&est, &c, &jobs[pending[np - 1]], &p->oasis);
    }
    int keep = 0;
    for (int q = 0; q < np && !rc; q++) {
      int i = pending[q];
      const shoal__ps_job_t *j = &jobs[i];
      shoal__ps_sched_t S;
      double t0 = shoal__now_s(), payoff = 1;
      int prc;
      if (pol == SHOAL_PS_POL_LARR) prc = shoal__ps_larr(&c, j, t, &p->larr, &S, &r->larr);
      else if (pol == SHOAL_PS_POL_GREEDY) prc = shoal__ps_greedy(&c, j, t, p->larr.hmax, p->larr.theta, &S);
      else prc = shoal__ps_oasis(&c, j, t, &p->oasis, &est, &payoff, &S);
      double ms = (shoal__now_s() - t0) * 1e3;
      dsum += ms;
      r->decisions++;
      if (ms > r->decide_ms_max) r->decide_ms_max = ms;
      if (prc == SHOAL_ERR_INFEASIBLE) { /* defer: retry next slot */
        r->deferrals++;
        pending[keep++] = i;
        continue;
      }
      if (prc) {
        rc = prc;
        break;
      }
      if (pol == SHOAL_PS_POL_OASIS && !(payoff > 0) && ++tries[i] < p->oasis_force_after) {
        r->rejections++;
        shoal__ps_sched_free(&S);
        pending[keep++] = i;
        continue;
      }
      if (pol == SHOAL_PS_POL_OASIS && !(payoff > 0)) r->forced++, r->rejections++;
      if ((rc = shoal__ps_sched_check(&c, j, &S, 1)) || (rc = shoal__ps_commit(&c, j, &S))) {
        shoal__ps_sched_free(&S);
        break;
      }
      r->end[i] = shoal__ps_sched_finish(j, &S);
      for (int k = 0; k < S.len; k++) {
        int W, P;
        shoal__ps_slot_totals(&S.slot[k], &W, &P);
        if (W) r->job_slots++, r->coloc_slots += shoal__ps_slot_coloc(&S.slot[k]);
      }
      if (sched_out) sched_out[i] = S;
      else shoal__ps_sched_free(&S);
    }
    np = keep;
  }
  if (!rc) finish_stats(r, jobs, n, dsum);
out:
  free(pending);
  free(tries);
  shoal__ps_cluster_free(&c);
  return rc;
}

/* ---- per-slot baselines ---- */

/* Residual of one slot as a 1-slot cluster (slot 0). */
static int fits_on(const shoal__ps_job_t *j, const double *res, int w, int p) {
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (w * j->dw[r] + p * j->dp[r] > res[r] + EPS) return 0;
  return 1;
}
static void take(double *res, const shoal__ps_job_t *j, int w, int p) {
  for (int r = 0; r < SHOAL_PS_NRES; r++) res[r] -= w * j->dw[r] + p * j->dp[r];
}

/* Most free machine (normalized minimum over resources) where (w,p) fit. */
static int most_free(const shoal__ps_cluster_t *c, const double *res, const shoal__ps_job_t *j, int w, int p) {
  int best = -1;
  double bv = -1;
  for (int h = 0; h < c->H; h++) {
    const double *rh = res + (size_t)h * SHOAL_PS_NRES, *cap = shoal__ps_cap(c, h);
    if (!fits_on(j, rh, w, p)) continue;
    double v = 1;
    for (int r = 0; r < SHOAL_PS_NRES; r++)
      if (cap[r] > 0) v = fmin(v, rh[r] / cap[r]);
    if (v > bv + 1e-12) bv = v, best = h;
  }
  return best;
}

/* The whole job (W workers, P PSs) on one machine, best fit (least GPU
 * left after): 1 placed (taken from res), 0 no machine fits, -1 error. */
static int place_one_machine(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *j, int W, int P,
                             shoal__ps_slot_t *sl) {
  int best = -1;
  double bv = INFINITY;
  shoal__ps_slot_clear(sl);
  for (int h = 0; h < c->H; h++) {
    double *rh = res + (size_t)h * SHOAL_PS_NRES;
    if (!fits_on(j, rh, W, P)) continue;
    double left = rh[0] - W * j->dw[0];
    if (left < bv) bv = left, best = h;
  }
  if (best < 0) return 0;
  take(res + (size_t)best * SHOAL_PS_NRES, j, W, P);
  return shoal__ps_slot_add(sl, best, W, P) ? -1 : 1;
}

/* Fixed-size placement of W workers and their PSs: one machine (best fit) if
 * possible, else workers on the freest machines and PSs where room is left.
 * Takes from res on success. */
static int place_fixed(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *j, int W, shoal__ps_slot_t *sl) {
  int P = shoal__ps_count(j->kappa, W);
  int one = place_one_machine(c, res, j, W, P, sl);
  if (one) return one;
  double *save = malloc(sizeof(double) * (size_t)c->H * SHOAL_PS_NRES);
  if (!save) return -1;
  memcpy(save, res, sizeof(double) * (size_t)c->H * SHOAL_PS_NRES);
  int ok = 1;
  for (int k = 0; k < W && ok; k++) {
    int h = most_free(c, res, j, 1, 0);
    if (h < 0 || shoal__ps_slot_add(sl, h, 1, 0)) ok = 0;
    else take(res + (size_t)h * SHOAL_PS_NRES, j, 1, 0);
  }
  for (int k = 0; k < P && ok; k++) {
    int h = most_free(c, res, j, 0, 1);
    if (h < 0 || shoal__ps_slot_add(sl, h, 0, 1)) ok = 0;
    else take(res + (size_t)h * SHOAL_PS_NRES, j, 0, 1);
  }
  if (!ok) {
    memcpy(res, save, sizeof(double) * (size_t)c->H * SHOAL_PS_NRES);
    shoal__ps_slot_clear(sl);
  }
  free(save);
  return ok;
}

static double dom_share(const shoal__ps_job_t *j, const double *tot, int W, int P) {
  double s = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (tot[r] > 0) s = fmax(s, (W * j->dw[r] + P * j->dp[r]) / tot[r]);
  return s;
}

/* Gang placement with a consolidation preference (Tiresias): the whole gang
 * of W workers and their PSs on one machine (best fit) if possible, else
 * on as few machines as possible (the machine fitting most workers first),
 * PSs on the job's machines before others, else spread like place_fixed.
 * All or nothing; takes from res. */
static int place_consolidated(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *j, int W,
                              shoal__ps_slot_t *sl) {
  int P = shoal__ps_count(j->kappa, W);
  int one = place_one_machine(c, res, j, W, P, sl);
  if (one) return one;
  size_t per = (size_t)c->H * SHOAL_PS_NRES;
  double *save = malloc(sizeof(double) * per);
  if (!save) return -1;
  memcpy(save, res, sizeof(double) * per);
  int ok = 1, left = W;
  while (left > 0 && ok) {
    int bh = -1, bw = 0;
    for (int h = 0; h < c->H; h++) {
      const double *rh = res + (size_t)h * SHOAL_PS_NRES;
      int w = left;
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (j->dw[r] > 0) {
          double f = floor((rh[r] + EPS) / j->dw[r]);
          if (f < w) w = f < 0 ? 0 : (int)f;
        }
      if (w > bw) bw = w, bh = h;
    }
    if (bh < 0 || shoal__ps_slot_add(sl, bh, bw, 0)) ok = 0;
    else take(res + (size_t)bh * SHOAL_PS_NRES, j, bw, 0), left -= bw;
  }
  for (int k = 0; k < P && ok; k++) {
    int h = -1;
    for (int e = 0; e < sl->n && h < 0; e++)
      if (fits_on(j, res + (size_t)sl->pl[e].h * SHOAL_PS_NRES, 0, 1)) h = sl->pl[e].h;
    if (h < 0) h = most_free(c, res, j, 0, 1);
    if (h < 0 || shoal__ps_slot_add(sl, h, 0, 1)) ok = 0;
    else take(res + (size_t)h * SHOAL_PS_NRES, j, 0, 1);
  }
  if (!ok) {
    memcpy(res, save, sizeof(double) * per);
    shoal__ps_slot_clear(sl);
  }
  free(save);
  /* packing workers tightly can leave no room for the PSs: spread instead */
  return ok ? 1 : place_fixed(c, res, j, W, sl);
}

/* Where one more worker of a job goes (Optimus step): next to its PSs if
 * it is co-located and the machine has room (stays co-located), else a
 * machine it already uses, else the freest machine. dP: PSs the step adds
 * (placed with the worker). -1: nowhere. */
static int optimus_machine(const shoal__ps_cluster_t *c, const double *res, const shoal__ps_job_t *j,
                           const shoal__ps_slot_t *sl, int dP) {
  for (int e = 0; e < sl->n; e++)
    if (fits_on(j, res + (size_t)sl->pl[e].h * SHOAL_PS_NRES, 1, dP)) return sl->pl[e].h;
  return most_free(c, res, j, 1, dP);
}

/* Rate of the job's slot if one worker (+dP PSs) is added on h. */
static double rate_after(const shoal__ps_job_t *j, const shoal__ps_slot_t *sl, int h) {
  int W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  int coloc = sl->n == 0 || (sl->n == 1 && sl->pl[0].h == h);
  return (W + 1) * (coloc ? j->rho_in : j->rho_ex);
}

/* Optimus (Peng et al., EuroSys'18) in the slot model: each slot, every
 * active job first gets one worker and its PS (arrival order, as room
 * allows), then workers go one at a time to the job with the largest
 * marginal gain: the drop of its estimated remaining time max(1, rem/rate)
 * (known remaining work, the PS time model with the placement's mode) per
 * unit of dominant share added. Gains only shrink as machines fill, so a
 * stale gain is re-evaluated when picked (lazy greedy). */
static int alloc_optimus(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *jobs, const int *act,
                         int na, const double *done, shoal__ps_slot_t *al, const double *tot) {
  double *gain = malloc(sizeof(double) * (size_t)na);
  int *hh = malloc(sizeof(int) * (size_t)na), rc = 0;
  if (!gain || !hh) {
    free(gain);
    free(hh);
    return shoal__seterr(SHOAL_ERR_NOMEM, "optimus");
  }
  for (int q = 0; q < na; q++) { /* one worker (+PS) each */
    const shoal__ps_job_t *j = &jobs[act[q]];
    int P1 = shoal__ps_count(j->kappa, 1), h = most_free(c, res, j, 1, P1);
    if (h >= 0) {
      take(res + (size_t)h * SHOAL_PS_NRES, j, 1, P1);
      if ((rc = shoal__ps_slot_add(&al[act[q]], h, 1, P1))) goto out;
    }
  }
  /* recomputing every gain per step would cost a machine scan per job per
   * worker; gains are cached (INFINITY = to evaluate) and refreshed for the
   * job that grew and for a picked job whose machine filled up meanwhile */
  const double NONE = -1;
  for (int q = 0; q < na; q++) gain[q] = INFINITY;
  for (;;) {
    int bq = -1;
    double bg = 0;
    for (int q = 0; q < na; q++) {
      if (gain[q] == INFINITY) { /* evaluate */
        int i = act[q], W, P;
        const shoal__ps_job_t *j = &jobs[i];
        shoal__ps_slot_totals(&al[i], &W, &P);
        double remw = j->work - done[i];
        gain[q] = NONE;
        if (W >= j->wmax || remw <= 0) continue;
        int dP = shoal__ps_count(j->kappa, W + 1) - P;
        if (dP < 0) dP = 0;
        int h = optimus_machine(c, res, j, &al[i], dP);
        if (h < 0) continue;
        double cur = W ? shoal__ps_slot_work(j, &al[i]) : 0, nxt = rate_after(j, &al[i], h);
        double tc = cur > 0 ? fmax(1, remw / cur) : INFINITY, tn = fmax(1, remw / nxt);
        double add[SHOAL_PS_NRES], ds = 0;
        for (int r = 0; r < SHOAL_PS_NRES; r++) add[r] = j->dw[r] + dP * j->dp[r];
        for (int r = 0; r < SHOAL_PS_NRES; r++)
          if (tot[r] > 0) ds = fmax(ds, add[r] / tot[r]);
        double g = (tc == INFINITY ? 1e30 : tc - tn) / (ds > 0 ? ds : 1e-12);
        if (g > 1e-12) gain[q] = g, hh[q] = h;
      }
      if (gain[q] > bg) bg = gain[q], bq = q;
    }
    if (bq < 0) break;
    int i = act[bq], W, P;
    const shoal__ps_job_t *j = &jobs[i];
    shoal__ps_slot_totals(&al[i], &W, &P);
    int dP = shoal__ps_count(j->kappa, W + 1) - P;
    if (dP < 0) dP = 0;
    if (!fits_on(j, res + (size_t)hh[bq] * SHOAL_PS_NRES, 1, dP)) { /* stale: machine filled */
      gain[bq] = INFINITY;
      continue;
    }
    take(res + (size_t)hh[bq] * SHOAL_PS_NRES, j, 1, dP);
    if ((rc = shoal__ps_slot_add(&al[i], hh[bq], 1, dP))) goto out;
    gain[bq] = INFINITY;
  }
out:
  free(gain);
  free(hh);
  return rc;
}

/* Tiresias (Gu et al., NSDI'19), discretized 2D-LAS: attained service =
 * GPU-slots consumed; queue = number of thresholds below it; each slot the
 * jobs are taken by (queue, arrival, id) and each gets its whole gang (the
 * fixed request) or nothing, skipping jobs that do not fit (work
 * conserving); preemption is free at slot boundaries. */
static int alloc_tiresias(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *jobs, const int *act,
                          int na, const double *att, const int *req, shoal__ps_slot_t *al,
                          const shoal__ps_run_params_t *p) {
  int *ord = malloc(sizeof(int) * (size_t)na), *qu = malloc(sizeof(int) * (size_t)na);
  if (!ord || !qu) {
    free(ord);
    free(qu);
    return shoal__seterr(SHOAL_ERR_NOMEM, "tiresias");
  }
  for (int q = 0; q < na; q++) {
    int k = 0;
    while (k < p->tir_nq - 1 && k < 4 && att[act[q]] >= p->tir_thr[k]) k++;
    qu[q] = k;
    ord[q] = q;
  }
  /* insertion sort by (queue, arrival, id): act is already in arrival order */
  for (int a = 1; a < na; a++) {
    int x = ord[a], b = a;
    while (b > 0 && qu[ord[b - 1]] > qu[x]) ord[b] = ord[b - 1], b--;
    ord[b] = x;
  }
  int rc = 0;
  for (int k = 0; k < na && !rc; k++) {
    int i = act[ord[k]];
    int ok = place_consolidated(c, res, &jobs[i], req[i], &al[i]);
    if (ok < 0) rc = shoal__seterr(SHOAL_ERR_NOMEM, "tiresias");
  }
  free(ord);
  free(qu);
  return rc;
}

static int run_slotwise(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, const int *order,
                        shoal__ps_pol_t pol, const shoal__ps_run_params_t *p, shoal__ps_run_result_t *r,
                        shoal__ps_sched_t *sched_out) {
  size_t per = (size_t)c->H * SHOAL_PS_NRES;
  double *res = malloc(sizeof(double) * per), *done = calloc((size_t)n, sizeof(double)), tot[SHOAL_PS_NRES] = {0};
  double *att = calloc((size_t)n, sizeof(double)); /* tiresias: attained GPU-slots */
  int *act = malloc(sizeof(int) * (size_t)n), na = 0, next = 0, ndone = 0, rc = 0;
  int *req = malloc(sizeof(int) * (size_t)n);
  shoal__ps_slot_t *al = calloc((size_t)n, sizeof *al);
  if (!res || !done || !act || !al || !req || !att) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps run");
    goto out;
  }
  for (int h = 0; h < c->H; h++)
    for (int q = 0; q < SHOAL_PS_NRES; q++) tot[q] += shoal__ps_cap(c, h)[q];
  double dsum = 0;
  for (int t = 0; ndone < n; t++) {
    if (t > p->max_slots) {
      rc = shoal__seterr(SHOAL_ERR_TIMEOUT, "%s: %d jobs unfinished at slot %d", shoal__ps_pol_name(pol), n - ndone, t);
      break;
    }
    while (next < n && jobs[order[next]].arrival <= t) {
      int i = order[next++];
      act[na++] = i;
      /* fixed request: wmax workers, or as many as fit the empty cluster */
      memcpy(res, c->cap, sizeof(double) * per);
      for (req[i] = jobs[i].wmax; req[i] > 1; req[i]--) {
        int ok = place_fixed(c, res, &jobs[i], req[i], &al[i]);
        if (ok) break;
      }
    }
    if (!na) continue;
    double t0 = shoal__now_s();
    memcpy(res, c->cap, sizeof(double) * per);
    for (int q = 0; q < na; q++) shoal__ps_slot_clear(&al[act[q]]);
    if (pol == SHOAL_PS_POL_FIFO) {
      /* arrival order, fixed wmax workers, head-of-line blocking */
      for (int q = 0; q < na; q++) {
        const shoal__ps_job_t *j = &jobs[act[q]];
        int ok = place_fixed(c, res, j, req[act[q]], &al[act[q]]);
        if (ok < 0) {
          rc = shoal__seterr(SHOAL_ERR_NOMEM, "fifo");
          goto out;
        }
        if (!ok) break;
      }
    } else if (pol == SHOAL_PS_POL_OPTIMUS) {
      if ((rc = alloc_optimus(c, res, jobs, act, na, done, al, tot))) goto out;
    } else if (pol == SHOAL_PS_POL_TIRESIAS) {
      if ((rc = alloc_tiresias(c, res, jobs, act, na, att, req, al, p))) goto out;
    } else { /* DRF: progressive filling, one worker at a time to the lowest dominant share */
      char *sat = calloc((size_t)(unsigned)na + 1, 1); /* na > 0 here */
      if (!sat) {
        rc = shoal__seterr(SHOAL_ERR_NOMEM, "drf");
        goto out;
      }
      for (;;) {
        int bq = -1;
        double bs = INFINITY;
        for (int q = 0; q < na; q++) {
          if (sat[q]) continue;
          int W, P;
          shoal__ps_slot_totals(&al[act[q]], &W, &P);
          double sh = dom_share(&jobs[act[q]], tot, W, P);
          if (sh < bs - 1e-12) bs = sh, bq = q;
        }
        if (bq < 0) break;
        const shoal__ps_job_t *j = &jobs[act[bq]];
        shoal__ps_slot_t *sl = &al[act[bq]];
        int W, P;
        shoal__ps_slot_totals(sl, &W, &P);
        if (W >= j->wmax) {
          sat[bq] = 1;
          continue;
        }
        int dP = shoal__ps_count(j->kappa, W + 1) - P, h = -1;
        /* keep the job together: a machine it already uses, else the freest */
        for (int e = 0; e < sl->n && h < 0; e++)
          if (fits_on(j, res + (size_t)sl->pl[e].h * SHOAL_PS_NRES, 1, dP)) h = sl->pl[e].h;
        if (h < 0) h = most_free(c, res, j, 1, dP);
        if (h < 0) {
          sat[bq] = 1;
          continue;
        }
        take(res + (size_t)h * SHOAL_PS_NRES, j, 1, dP);
        if (shoal__ps_slot_add(sl, h, 1, dP)) {
          free(sat);
          rc = shoal__seterr(SHOAL_ERR_NOMEM, "drf");
          goto out;
        }
      }
      free(sat);
    }
    double ms = (shoal__now_s() - t0) * 1e3;
    dsum += ms;
    r->decisions++;
    if (ms > r->decide_ms_max) r->decide_ms_max = ms;
    int keep = 0;
    for (int q = 0; q < na; q++) {
      int i = act[q];
      double w = shoal__ps_slot_work(&jobs[i], &al[i]);
      int W, P;
      shoal__ps_slot_totals(&al[i], &W, &P);
      if (W) r->job_slots++, r->coloc_slots += shoal__ps_slot_coloc(&al[i]);
      if (W && sched_out) { /* record the slot's allocation for the caller's checks */
        shoal__ps_slot_t *dst = shoal__ps_sched_slot(&sched_out[i], t);
        if (!dst || shoal__ps_slot_copy(dst, &al[i])) {
          rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps run");
          goto out;
        }
      }
      done[i] += w;
      att[i] += W * (jobs[i].dw[0] > 0 ? jobs[i].dw[0] : 1);
      if (done[i] >= jobs[i].work * (1 - EPS)) {
        r->end[i] = t;
        ndone++;
      } else {
        act[keep++] = i;
      }
    }
    na = keep;
  }
  if (!rc) finish_stats(r, jobs, n, dsum);
out:
  if (al)
    for (int i = 0; i < n; i++) free(al[i].pl);
  free(al);
  free(res);
  free(done);
  free(att);
  free(act);
  free(req);
  return rc;
}

int shoal__ps_run(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, shoal__ps_pol_t pol,
                  const shoal__ps_run_params_t *p, shoal__ps_run_result_t *res, shoal__ps_sched_t *sched) {
  for (int i = 0; i < n; i++) {
    const shoal__ps_job_t *j = &jobs[i];
    if (!(j->work > 0) || j->wmax < 1 || !(j->rho_in > 0) || !(j->rho_ex > 0) || j->arrival < 0 || !(j->kappa >= 0))
      return shoal__seterr(SHOAL_ERR_INVALID, "job %d: work %g, wmax %d, rates %g/%g, arrival %d, kappa %g", j->id, j->work,
                           j->wmax, j->rho_in, j->rho_ex, j->arrival, j->kappa);
  }
  shoal__ps_run_result_t r;
  memset(&r, 0, sizeof r);
  int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
  r.end = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!order || !r.end) {
    free(order);
    free(r.end);
    return shoal__seterr(SHOAL_ERR_NOMEM, "ps run");
  }
  for (int i = 0; i < n; i++) order[i] = i, r.end[i] = -1;
  qsort_r(order, (size_t)n, sizeof(int), cmp_arrival, (void *)jobs);
  if (sched)
    for (int i = 0; i < n; i++) shoal__ps_sched_init(&sched[i], jobs[i].arrival);
  int rc = pol == SHOAL_PS_POL_LARR && p->replan ? run_replan(c, jobs, n, order, p, &r, sched)
           : pol <= SHOAL_PS_POL_OASIS       ? run_plan(c, jobs, n, order, pol, p, &r, sched)
                                             : run_slotwise(c, jobs, n, order, pol, p, &r, sched);
  free(order);
  if (rc) {
    free(r.end);
    if (sched)
      for (int i = 0; i < n; i++) shoal__ps_sched_free(&sched[i]);
    return rc;
  }
  *res = r;
  return 0;
}
