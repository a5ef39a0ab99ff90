/* Slot-level online driver for the PS policies (larr, greedy, oasis) and two
 * per-slot baselines in the same model (fifo, drf). */
#include "sched/ps_online.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "sched/ps_greedy.h"

#define EPS 1e-9

static const char *const pol_names[SHOAL_PS_POL__N] = {"larr", "greedy", "oasis", "fifo", "drf"};
const char *shoal__ps_pol_name(shoal__ps_pol_t p) { return p >= 0 && p < SHOAL_PS_POL__N ? pol_names[p] : "?"; }
int shoal__ps_pol_parse(const char *name, shoal__ps_pol_t *out) {
  for (int i = 0; i < SHOAL_PS_POL__N; i++)
    if (!strcmp(name, pol_names[i])) {
      *out = (shoal__ps_pol_t)i;
      return 0;
    }
  return shoal__seterr(SHOAL_ERR_INVALID, "unknown PS policy '%s' (larr, greedy, oasis, fifo, drf)", name);
}

void shoal__ps_run_defaults(shoal__ps_run_params_t *p) {
  shoal__ps_larr_defaults(&p->larr);
  shoal__ps_oasis_defaults(&p->oasis);
  p->oasis_force_after = 20;
  p->max_slots = 100000;
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

/* Fixed-size placement of W workers and their PSs: one machine (best fit) if
 * possible, else workers on the freest machines and PSs where room is left.
 * Takes from res on success. */
static int place_fixed(const shoal__ps_cluster_t *c, double *res, const shoal__ps_job_t *j, int W, shoal__ps_slot_t *sl) {
  int P = shoal__ps_count(j->kappa, W), best = -1;
  double bv = INFINITY;
  shoal__ps_slot_clear(sl);
  for (int h = 0; h < c->H; h++) { /* best fit: least GPU left after */
    double *rh = res + (size_t)h * SHOAL_PS_NRES;
    if (!fits_on(j, rh, W, P)) continue;
    double left = rh[0] - W * j->dw[0];
    if (left < bv) bv = left, best = h;
  }
  if (best >= 0) {
    take(res + (size_t)best * SHOAL_PS_NRES, j, W, P);
    return shoal__ps_slot_add(sl, best, W, P) ? -1 : 1;
  }
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

static int run_slotwise(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, const int *order,
                        shoal__ps_pol_t pol, const shoal__ps_run_params_t *p, shoal__ps_run_result_t *r) {
  size_t per = (size_t)c->H * SHOAL_PS_NRES;
  double *res = malloc(sizeof(double) * per), *done = calloc((size_t)n, sizeof(double)), tot[SHOAL_PS_NRES] = {0};
  int *act = malloc(sizeof(int) * (size_t)n), na = 0, next = 0, ndone = 0, rc = 0;
  int *req = malloc(sizeof(int) * (size_t)n);
  shoal__ps_slot_t *al = calloc((size_t)n, sizeof *al);
  if (!res || !done || !act || !al || !req) {
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
      done[i] += w;
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
  int rc = pol <= SHOAL_PS_POL_OASIS ? run_plan(c, jobs, n, order, pol, p, &r, sched) : run_slotwise(c, jobs, n, order, pol, p, &r);
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
