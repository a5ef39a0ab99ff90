/* Parameter-server job model with locality: rates, residual capacity,
 * schedules, feasibility, prices and trimming (spec §§1-2, 4.2, 4.6). */
#include "sched/model/slot_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define EPS 1e-9

int shoal__ps_job_set_rates(shoal__ps_job_t *j, double tc_s, double grad_bytes, double b_in, double b_ex,
                            double slot_s) {
  if (!(tc_s >= 0) || !(grad_bytes >= 0) || !(b_in > 0) || !(b_ex > 0) || !(slot_s > 0) || tc_s + grad_bytes <= 0)
    return shoal__seterr(SHOAL_ERR_INVALID, "ps job %d: bad time model (tc=%g s, g=%g B, b_in=%g, b_ex=%g, slot=%g s)",
                         j->id, tc_s, grad_bytes, b_in, b_ex, slot_s);
  double tau_in = tc_s + 2.0 * grad_bytes / b_in, tau_ex = tc_s + 2.0 * grad_bytes / b_ex;
  j->rho_in = slot_s / tau_in;
  j->rho_ex = slot_s / tau_ex;
  return 0;
}

int shoal__ps_count(double kappa, int w) {
  if (w <= 0 || kappa <= 0) return 0; /* kappa 0: a job without PSs (all-reduce) */
  int p = (int)ceil(kappa * w - EPS);
  if (p < 1) p = 1;
  if (p > w) p = w;
  return p;
}

int shoal__ps_cluster_init(shoal__ps_cluster_t *c, int H, const double *cap) {
  if (H <= 0) return shoal__seterr(SHOAL_ERR_INVALID, "ps cluster: %d machines", H);
  memset(c, 0, sizeof *c);
  c->cap = malloc(sizeof(double) * (size_t)H * SHOAL_PS_NRES);
  if (!c->cap) return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster: %d machines", H);
  for (size_t k = 0; k < (size_t)H * SHOAL_PS_NRES; k++) {
    if (!(cap[k] >= 0)) {
      free(c->cap);
      return shoal__seterr(SHOAL_ERR_INVALID, "ps cluster: machine %zu resource %zu capacity %g", k / SHOAL_PS_NRES,
                           k % SHOAL_PS_NRES, cap[k]);
    }
    c->cap[k] = cap[k];
    if (cap[k] > c->capmax[k % SHOAL_PS_NRES]) c->capmax[k % SHOAL_PS_NRES] = cap[k];
  }
  c->H = H;
  return 0;
}

void shoal__ps_cluster_free(shoal__ps_cluster_t *c) {
  free(c->cap);
  free(c->res);
  free(c->smax);
  free(c->sok);
  memset(c, 0, sizeof *c);
}

int shoal__ps_cluster_copy(shoal__ps_cluster_t *dst, const shoal__ps_cluster_t *src) {
  shoal__ps_cluster_t d;
  int rc = shoal__ps_cluster_init(&d, src->H, src->cap);
  if (rc) return rc;
  if (src->nslots) {
    size_t n = (size_t)src->nslots * src->H * SHOAL_PS_NRES;
    d.res = malloc(sizeof(double) * n);
    if (!d.res) {
      shoal__ps_cluster_free(&d);
      return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster copy");
    }
    memcpy(d.res, src->res, sizeof(double) * n);
    d.smax = malloc(sizeof(double) * (size_t)src->nslots * SHOAL_PS_NRES);
    d.sok = calloc((size_t)src->nslots, 1);
    d.nslots = src->nslots;
    if (!d.smax || !d.sok) {
      shoal__ps_cluster_free(&d);
      return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster copy");
    }
  }
  *dst = d;
  return 0;
}

int shoal__ps_cluster_ensure(shoal__ps_cluster_t *c, int t_end) {
  if (t_end <= c->nslots) return 0;
  int n = c->nslots ? c->nslots : 16;
  while (n < t_end) n *= 2;
  size_t per = (size_t)c->H * SHOAL_PS_NRES;
  double *r = realloc(c->res, sizeof(double) * per * (size_t)n);
  if (!r) return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster: %d slots of %d machines", n, c->H);
  c->res = r;
  double *mx = realloc(c->smax, sizeof(double) * SHOAL_PS_NRES * (size_t)n);
  if (!mx) return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster: %d slots of %d machines", n, c->H);
  c->smax = mx;
  unsigned char *ok = realloc(c->sok, (size_t)n);
  if (!ok) return shoal__seterr(SHOAL_ERR_NOMEM, "ps cluster: %d slots of %d machines", n, c->H);
  c->sok = ok;
  for (int t = c->nslots; t < n; t++) {
    memcpy(r + per * (size_t)t, c->cap, sizeof(double) * per);
    c->sok[t] = 0;
  }
  c->nslots = n;
  return 0;
}

const double *shoal__ps_slot_max(const shoal__ps_cluster_t *c, int t) {
  if (t < 0 || t >= c->nslots) return c->capmax;
  shoal__ps_cluster_t *m = (shoal__ps_cluster_t *)c; /* a cache: logically const */
  double *mx = m->smax + (size_t)t * SHOAL_PS_NRES;
  if (!m->sok[t]) {
    for (int r = 0; r < SHOAL_PS_NRES; r++) mx[r] = 0;
    for (int h = 0; h < c->H; h++) {
      const double *res = shoal__ps_res(c, t, h);
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (res[r] > mx[r]) mx[r] = res[r];
    }
    m->sok[t] = 1;
  }
  return mx;
}

/* Does (w workers, p PSs) fit into res? */
static int fits(const shoal__ps_job_t *j, const double *res, int w, int p) {
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (w * j->dw[r] + p * j->dp[r] > res[r] + EPS) return 0;
  return 1;
}

int shoal__ps_max_coloc(const shoal__ps_job_t *j, const double *res) {
  /* closed-form upper bound (PS count at least kappa w), then step down */
  double ub = j->wmax;
  for (int r = 0; r < SHOAL_PS_NRES; r++) {
    double per = j->dw[r] + j->kappa * j->dp[r];
    if (per > 0) ub = fmin(ub, floor((res[r] + EPS) / per) + 1);
  }
  for (int w = (int)ub; w >= 1; w--)
    if (fits(j, res, w, shoal__ps_count(j->kappa, w))) return w;
  return 0;
}

void shoal__ps_sched_init(shoal__ps_sched_t *s, int start) {
  memset(s, 0, sizeof *s);
  s->start = start;
}

void shoal__ps_sched_free(shoal__ps_sched_t *s) {
  for (int k = 0; k < s->len; k++) free(s->slot[k].pl);
  free(s->slot);
  memset(s, 0, sizeof *s);
}

int shoal__ps_slot_copy(shoal__ps_slot_t *dst, const shoal__ps_slot_t *src) {
  if (dst->cap < src->n) {
    shoal__ps_place_t *pl = realloc(dst->pl, sizeof *pl * (size_t)src->n);
    if (!pl) return shoal__seterr(SHOAL_ERR_NOMEM, "ps slot copy");
    dst->pl = pl;
    dst->cap = src->n;
  }
  if (src->n) memcpy(dst->pl, src->pl, sizeof *src->pl * (size_t)src->n);
  dst->n = src->n;
  return 0;
}

int shoal__ps_sched_copy(shoal__ps_sched_t *dst, const shoal__ps_sched_t *src) {
  shoal__ps_sched_t d;
  shoal__ps_sched_init(&d, src->start);
  if (src->len) {
    d.slot = calloc((size_t)src->len, sizeof *d.slot);
    if (!d.slot) return shoal__seterr(SHOAL_ERR_NOMEM, "ps schedule copy");
    d.len = d.cap = src->len;
    for (int k = 0; k < src->len; k++)
      if (shoal__ps_slot_copy(&d.slot[k], &src->slot[k])) {
        shoal__ps_sched_free(&d);
        return SHOAL_ERR_NOMEM;
      }
  }
  *dst = d;
  return 0;
}

int shoal__ps_sched_overlay(shoal__ps_sched_t *dst, const shoal__ps_sched_t *src, int from) {
  for (int k = from > src->start ? from - src->start : 0; k < src->len; k++) {
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(dst, src->start + k);
    int rc = sl ? shoal__ps_slot_copy(sl, &src->slot[k]) : shoal__seterr(SHOAL_ERR_NOMEM, "ps schedule overlay");
    if (rc) return rc;
  }
  return 0;
}

void shoal__ps_sched_fit(shoal__ps_sched_t *s) {
  if (s->cap <= s->len) return;
  if (s->len == 0) {
    free(s->slot);
    s->slot = NULL;
    s->cap = 0;
    return;
  }
  shoal__ps_slot_t *n = realloc(s->slot, sizeof *n * (size_t)s->len);
  if (!n) return;
  s->slot = n;
  s->cap = s->len;
}

shoal__ps_slot_t *shoal__ps_sched_slot(shoal__ps_sched_t *s, int t) {
  int k = t - s->start;
  if (k < 0) return NULL;
  if (k >= s->len) {
    if (k >= s->cap) {
      int nc = s->cap ? s->cap : 8;
      while (nc <= k) nc *= 2;
      shoal__ps_slot_t *n = realloc(s->slot, sizeof *n * (size_t)nc);
      if (!n) return NULL;
      s->slot = n;
      s->cap = nc;
    }
    /* entries past len were never used or were freed when cut */
    memset(s->slot + s->len, 0, sizeof *s->slot * (size_t)(k + 1 - s->len));
    s->len = k + 1;
  }
  return &s->slot[k];
}

void shoal__ps_slot_clear(shoal__ps_slot_t *sl) { sl->n = 0; }

int shoal__ps_slot_add(shoal__ps_slot_t *sl, int h, int dw, int dp) {
  for (int k = 0; k < sl->n; k++) {
    if (sl->pl[k].h != h) continue;
    sl->pl[k].w += dw;
    sl->pl[k].p += dp;
    if (sl->pl[k].w < 0 || sl->pl[k].p < 0) return shoal__seterr(SHOAL_ERR_INTERNAL, "ps slot: negative count on %d", h);
    if (!sl->pl[k].w && !sl->pl[k].p) sl->pl[k] = sl->pl[--sl->n];
    return 0;
  }
  if (dw < 0 || dp < 0) return shoal__seterr(SHOAL_ERR_INTERNAL, "ps slot: removing from empty machine %d", h);
  if (!dw && !dp) return 0;
  if (sl->n == sl->cap) {
    int nc = sl->cap ? 2 * sl->cap : 4;
    shoal__ps_place_t *pl = realloc(sl->pl, sizeof *pl * (size_t)nc);
    if (!pl) return shoal__seterr(SHOAL_ERR_NOMEM, "ps slot");
    sl->pl = pl;
    sl->cap = nc;
  }
  sl->pl[sl->n++] = (shoal__ps_place_t){h, dw, dp};
  return 0;
}

void shoal__ps_slot_totals(const shoal__ps_slot_t *sl, int *w, int *p) {
  int W = 0, P = 0;
  for (int k = 0; k < sl->n; k++) {
    W += sl->pl[k].w;
    P += sl->pl[k].p;
  }
  *w = W;
  *p = P;
}

int shoal__ps_slot_coloc(const shoal__ps_slot_t *sl) { return sl->n == 1; }

double shoal__ps_slot_work(const shoal__ps_job_t *j, const shoal__ps_slot_t *sl) {
  int W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  if (W <= 0) return 0;
  return W * (shoal__ps_slot_coloc(sl) ? j->rho_in : j->rho_ex);
}

double shoal__ps_sched_work(const shoal__ps_job_t *j, const shoal__ps_sched_t *s) {
  double w = 0;
  for (int k = 0; k < s->len; k++) w += shoal__ps_slot_work(j, &s->slot[k]);
  return w;
}

int shoal__ps_slot_equal(const shoal__ps_slot_t *a, const shoal__ps_slot_t *b) {
  if (a->n != b->n) return 0;
  for (int x = 0; x < a->n; x++) {
    int found = 0;
    for (int y = 0; y < b->n && !found; y++)
      found = a->pl[x].h == b->pl[y].h && a->pl[x].w == b->pl[y].w && a->pl[x].p == b->pl[y].p;
    if (!found) return 0;
  }
  return 1;
}

int shoal__ps_slot_fits(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl, int t) {
  int W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  if (W < 1 || !shoal__ps_w_ok(j, W) || P != shoal__ps_count(j->kappa, W)) return 0;
  for (int e = 0; e < sl->n; e++) {
    const double *res = shoal__ps_res(c, t, sl->pl[e].h);
    for (int r = 0; r < SHOAL_PS_NRES; r++)
      if (sl->pl[e].w * j->dw[r] + sl->pl[e].p * j->dp[r] > res[r] + EPS) return 0;
  }
  return 1;
}

double shoal__ps_slot_work_after(const shoal__ps_job_t *j, const shoal__ps_slot_t *prev, int ran,
                                 const shoal__ps_slot_t *sl) {
  double w = shoal__ps_slot_work(j, sl);
  if (!(j->restart > 0) || !(w > 0) || !ran) return w;
  if (prev && prev->n && shoal__ps_slot_equal(prev, sl)) return w;
  return w * (1 - j->restart);
}

double shoal__ps_sched_work_net(const shoal__ps_job_t *j, const shoal__ps_sched_t *s) {
  if (!(j->restart > 0)) return shoal__ps_sched_work(j, s);
  const shoal__ps_slot_t *prev = j->held;
  int ran = prev && prev->n;
  double w = 0;
  for (int k = 0; k < s->len; k++) {
    w += shoal__ps_slot_work_after(j, prev, ran, &s->slot[k]);
    prev = &s->slot[k];
    ran |= prev->n > 0;
  }
  return w;
}

int shoal__ps_sched_end(const shoal__ps_sched_t *s) {
  for (int k = s->len - 1; k >= 0; k--) {
    int W, P;
    shoal__ps_slot_totals(&s->slot[k], &W, &P);
    if (W > 0) return s->start + k;
  }
  return -1;
}

int shoal__ps_sched_finish(const shoal__ps_job_t *j, const shoal__ps_sched_t *s) {
  double acc = 0;
  for (int k = 0; k < s->len; k++) {
    acc += shoal__ps_slot_work(j, &s->slot[k]);
    if (acc >= j->work * (1 - EPS)) return s->start + k;
  }
  return -1;
}

int shoal__ps_sched_check(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s,
                          int need_cover) {
  if (s->len && s->start < j->arrival)
    for (int k = 0; k < s->len && s->start + k < j->arrival; k++)
      if (s->slot[k].n) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d: slot %d before arrival %d", j->id, s->start + k, j->arrival);
  for (int k = 0; k < s->len; k++) {
    const shoal__ps_slot_t *sl = &s->slot[k];
    int t = s->start + k, W, P;
    shoal__ps_slot_totals(sl, &W, &P);
    if (W > j->wmax) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: %d workers > wmax %d", j->id, t, W, j->wmax);
    if (!shoal__ps_w_ok(j, W))
      return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: %d workers < wmin %d", j->id, t, W, j->wmin);
    if (W == 0 && P > 0) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: %d PSs without workers", j->id, t, P);
    if (W > 0 && (P > W || P < shoal__ps_count(j->kappa, W)))
      return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: %d PSs for %d workers (kappa %g)", j->id, t, P, W, j->kappa);
    for (int e = 0; e < sl->n; e++) {
      const shoal__ps_place_t *pl = &sl->pl[e];
      if (pl->h < 0 || pl->h >= c->H || pl->w < 0 || pl->p < 0)
        return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: bad placement (h=%d w=%d p=%d)", j->id, t, pl->h, pl->w, pl->p);
      for (int e2 = 0; e2 < e; e2++)
        if (sl->pl[e2].h == pl->h) return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d: machine %d twice", j->id, t, pl->h);
      const double *res = shoal__ps_res(c, t, pl->h);
      for (int r = 0; r < SHOAL_PS_NRES; r++) {
        double use = pl->w * j->dw[r] + pl->p * j->dp[r];
        if (use > res[r] + EPS * (1 + shoal__ps_cap(c, pl->h)[r]))
          return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d slot %d machine %d resource %d: use %g > residual %g", j->id,
                               t, pl->h, r, use, res[r]);
      }
    }
  }
  if (need_cover) {
    double w = shoal__ps_sched_work(j, s);
    if (w < j->work * (1 - EPS))
      return shoal__seterr(SHOAL_ERR_INFEASIBLE, "job %d: schedule covers %g of %g mini-batches", j->id, w, j->work);
  }
  return 0;
}

int shoal__ps_commit(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s) {
  int rc = shoal__ps_sched_check(c, j, s, 0);
  if (rc) return rc;
  if ((rc = shoal__ps_cluster_ensure(c, s->start + s->len))) return rc;
  for (int k = 0; k < s->len; k++) {
    const shoal__ps_slot_t *sl = &s->slot[k];
    if (sl->n) c->sok[s->start + k] = 0;
    for (int e = 0; e < sl->n; e++) {
      double *res = c->res + ((size_t)(s->start + k) * c->H + sl->pl[e].h) * SHOAL_PS_NRES;
      for (int r = 0; r < SHOAL_PS_NRES; r++) {
        res[r] -= sl->pl[e].w * j->dw[r] + sl->pl[e].p * j->dp[r];
        if (res[r] < 0) res[r] = 0; /* rounding dust */
      }
    }
  }
  return 0;
}

void shoal__ps_release(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s, int from) {
  for (int k = 0; k < s->len; k++) {
    int t = s->start + k;
    if (t < from || t >= c->nslots) continue;
    const shoal__ps_slot_t *sl = &s->slot[k];
    if (sl->n) c->sok[t] = 0;
    for (int e = 0; e < sl->n; e++) {
      double *res = c->res + ((size_t)t * c->H + sl->pl[e].h) * SHOAL_PS_NRES;
      const double *cap = shoal__ps_cap(c, sl->pl[e].h);
      for (int r = 0; r < SHOAL_PS_NRES; r++) {
        res[r] += sl->pl[e].w * j->dw[r] + sl->pl[e].p * j->dp[r];
        if (res[r] > cap[r]) res[r] = cap[r];
      }
    }
  }
}

/* a cache: the same inputs give the same value; an empty entry has base 0,
 * which no price uses (a 0 base is computed, not cached) */
double shoal__ps_pow(const shoal__ps_cluster_t *c, double base, double ex) {
  if (!(base > 0)) return pow(base, ex);
  uint64_t bt, bu;
  memcpy(&bt, &base, sizeof bt);
  memcpy(&bu, &ex, sizeof bu);
  int k = (int)(((bt * 0x9E3779B97F4A7C15ull) ^ (bu * 0xC2B2AE3D27D4EB4Full)) >> 56);
  if (c->pm_theta[k] == base && c->pm_u[k] == ex) return c->pm_v[k];
  shoal__ps_cluster_t *m = (shoal__ps_cluster_t *)c;
  m->pm_theta[k] = base;
  m->pm_u[k] = ex;
  return m->pm_v[k] = pow(base, ex);
}

/* most workers of j alone on res, at most cap_w (the planners' worker test) */
static int worker_room(const shoal__ps_job_t *j, const double *res, int cap_w) {
  int a = cap_w;
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (j->dw[r] > 0) {
      double f = floor((res[r] + EPS) / j->dw[r]);
      if (f < a) a = (int)f;
    }
  return a < 0 ? 0 : a;
}

int shoal__ps_slot_fits_worker(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t) {
  if (worker_room(j, shoal__ps_slot_max(c, t), 1) < 1) return 0; /* no machine has enough of some resource */
  for (int h = 0; h < c->H; h++)
    if (worker_room(j, shoal__ps_res(c, t, h), 1) >= 1) return 1;
  return 0;
}

/* theta^u, u = 1 - res/cap: the part of a price that depends on the residual */
static double price_pw(const shoal__ps_cluster_t *c, double res, double cap, double theta) {
  return shoal__ps_pow(c, theta, 1.0 - res / cap);
}

double shoal__ps_price(const shoal__ps_cluster_t *c, int t, int h, int r, int s, double theta) {
  double cap = shoal__ps_cap(c, h)[r];
  if (cap <= 0) return 0;
  return price_pw(c, shoal__ps_res(c, t, h)[r], cap, theta) * shoal__ps_price_f(t, s);
}

void shoal__ps_price_pw(const shoal__ps_cluster_t *c, int h, const double *res, double theta, double *pw) {
  const double *cap = shoal__ps_cap(c, h);
  for (int r = 0; r < SHOAL_PS_NRES; r++) pw[r] = cap[r] > 0 ? price_pw(c, res[r], cap[r], theta) : 0;
}

double shoal__ps_unit_cost(const shoal__ps_cluster_t *c, int t, int h, int s, double theta, const double *demand) {
  double pw[SHOAL_PS_NRES];
  const double *cap = shoal__ps_cap(c, h), *res = shoal__ps_res(c, t, h);
  /* only the resources the demand uses are priced (pow is the cost here) */
  for (int r = 0; r < SHOAL_PS_NRES; r++) pw[r] = demand[r] > 0 && cap[r] > 0 ? price_pw(c, res[r], cap[r], theta) : 0;
  return shoal__ps_unit_cost_pw(pw, cap, shoal__ps_price_f(t, s), demand);
}

double shoal__ps_slot_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl,
                           int t, int s, double theta) {
  double cost = 0;
  for (int e = 0; e < sl->n; e++)
    cost += sl->pl[e].w * shoal__ps_unit_cost(c, t, sl->pl[e].h, s, theta, j->dw) +
            sl->pl[e].p * shoal__ps_unit_cost(c, t, sl->pl[e].h, s, theta, j->dp);
  return cost;
}

double shoal__ps_sched_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s,
                            int s0, double theta) {
  double cost = 0;
  for (int k = 0; k < s->len; k++) cost += shoal__ps_slot_cost(c, j, &s->slot[k], s->start + k, s0, theta);
  return cost;
}

/* Set the slot's PS total to clamp(ceil(kappa W),1,W) by removing PSs from
 * the priciest machines (only ever removes: the slot had at least that many). */
static int fix_ps_down(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_slot_t *sl, int t, int s,
                       double theta) {
  int W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  int target = shoal__ps_count(j->kappa, W);
  while (P > target) {
    int best = -1;
    double bc = -1;
    for (int e = 0; e < sl->n; e++) {
      if (!sl->pl[e].p) continue;
      /* prefer emptying machines without workers (restores co-location) */
      double cst = shoal__ps_unit_cost(c, t, sl->pl[e].h, s, theta, j->dp) + (sl->pl[e].w ? 0 : 1e6);
      if (cst > bc) bc = cst, best = e;
    }
    if (best < 0) break;
    int rc = shoal__ps_slot_add(sl, sl->pl[best].h, 0, -1);
    if (rc) return rc;
    P--;
  }
  return 0;
}

int shoal__ps_slot_trim(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_slot_t *sl, int t, int s,
                        double theta, double need) {
  int rc;
  if (shoal__ps_slot_work(j, sl) < need * (1 - EPS)) return fix_ps_down(c, j, sl, t, s, theta);
  shoal__ps_slot_t tmp = {0};
  for (;;) {
    /* candidate removals, priciest machine first */
    int best = -1;
    double bc = -1;
    for (int e = 0; e < sl->n; e++) {
      if (!sl->pl[e].w) continue;
      if ((rc = shoal__ps_slot_copy(&tmp, sl))) goto out;
      if ((rc = shoal__ps_slot_add(&tmp, sl->pl[e].h, -1, 0))) goto out;
      if ((rc = fix_ps_down(c, j, &tmp, t, s, theta))) goto out;
      int W, P;
      shoal__ps_slot_totals(&tmp, &W, &P);
      if (W == 0 || !shoal__ps_w_ok(j, W) || shoal__ps_slot_work(j, &tmp) < need * (1 - EPS)) continue;
      double cst = shoal__ps_unit_cost(c, t, sl->pl[e].h, s, theta, j->dw);
      if (cst > bc) bc = cst, best = e;
    }
    if (best < 0) break;
    if ((rc = shoal__ps_slot_add(sl, sl->pl[best].h, -1, 0))) goto out;
    if ((rc = fix_ps_down(c, j, sl, t, s, theta))) goto out;
  }
  rc = fix_ps_down(c, j, sl, t, s, theta);
out:
  free(tmp.pl);
  return rc;
}

int shoal__ps_sched_trim(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_sched_t *s, int s0,
                         double theta) {
  double acc = 0;
  for (int k = 0; k < s->len; k++) {
    double w = shoal__ps_slot_work(j, &s->slot[k]);
    if (acc + w >= j->work * (1 - EPS)) {
      int rc = shoal__ps_slot_trim(c, j, &s->slot[k], s->start + k, s0, theta, j->work - acc);
      if (rc) return rc;
      for (int q = k + 1; q < s->len; q++) free(s->slot[q].pl);
      s->len = k + 1;
      return 0;
    }
    acc += w;
  }
  return 0;
}
