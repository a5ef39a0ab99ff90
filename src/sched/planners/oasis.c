/* OASiS on the shared pool (spec §6, decisions §8 #14-20). */
#include "sched/planners/oasis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/planners/greedy.h"

#define EPS 1e-9

void shoal__ps_oasis_defaults(shoal__ps_oasis_params_t *p) {
  p->T = 400;
  p->units = 512;
  p->mult = 1;
  p->hmax = 400;
}

void shoal__ps_oasis_est_init(shoal__ps_oasis_est_t *e) {
  memset(e, 0, sizeof *e);
  e->Lnum = INFINITY;
  e->Xmin = INFINITY;
}

static double util(const shoal__ps_oasis_params_t *p, int delay) { return (double)p->T - delay; }

/* Reference machine: machine 0's capacity (demands as fractions of it). */
static double frac(const shoal__ps_cluster_t *c, int r, double d) {
  double cap = shoal__ps_cap(c, 0)[r];
  return cap > 0 ? d / cap : 0;
}

void shoal__ps_oasis_observe(shoal__ps_oasis_est_t *e, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j,
                             const shoal__ps_oasis_params_t *p) {
  /* fastest: wmax workers at the network rate (OASiS has no locality) */
  double ws = ceil(j->work / j->rho_ex - EPS);             /* worker-slots */
  int dmin = (int)ceil(j->work / (j->wmax * j->rho_ex) - EPS);
  double usage = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++) {
    double fw = frac(c, r, j->dw[r]);
    if (fw > 0) e->U[r] = fmax(e->U[r], util(p, dmin) / fw);
    usage += ws * (fw + j->kappa * frac(c, r, j->dp[r]));
  }
  if (usage > 0) e->Lnum = fmin(e->Lnum, util(p, p->T / 2) / usage);
  int nres = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++) nres += shoal__ps_cap(c, 0)[r] > 0;
  e->capsum = (double)c->H * nres;
  e->Xmin = fmin(e->Xmin, usage / (p->T * e->capsum));
  e->njobs++;
}

static double price(const shoal__ps_cluster_t *c, const shoal__ps_oasis_params_t *p, const shoal__ps_oasis_est_t *e, int t,
                    int h, int r) {
  double cap = shoal__ps_cap(c, h)[r];
  if (cap <= 0) return 0;
  double eta = fmax(1.0, 1.0 / e->Xmin);
  double L = p->mult * e->Lnum / (4 * eta), U = p->mult * e->U[r];
  if (!(U > L)) U = L;
  double g = (cap - shoal__ps_res(c, t, h)[r]) / cap;
  return L * shoal__ps_pow(c, U / L, g);
}

static double unit_price(const shoal__ps_cluster_t *c, const shoal__ps_oasis_params_t *p, const shoal__ps_oasis_est_t *e,
                         int t, int h, const double *d) {
  double v = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (d[r] > 0) v += price(c, p, e, t, h, r) * frac(c, r, d[r]);
  return v;
}

typedef struct { double key; int h; } mkey_t;
static int cmp_key(const void *a, const void *b) {
  const mkey_t *x = a, *y = b;
  if (x->key < y->key) return -1;
  if (x->key > y->key) return 1;
  return x->h - y->h;
}

/* Per slot: machines sorted by worker price and by PS price, only those with
 * room for one worker (resp. one PS next to no worker): deploy() skips the
 * others wherever they are in the order, so leaving them out changes
 * nothing but the cost of pricing and sorting them. */
typedef struct {
  mkey_t *wk, *pk;
  int nw, np;
} order_t;

static int room_for(const double *res, const double *d) {
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (d[r] > 0 && floor((res[r] + EPS) / d[r]) < 1) return 0;
  return 1;
}

static int make_order(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, const shoal__ps_oasis_params_t *p,
                      const shoal__ps_oasis_est_t *e, order_t *o) {
  o->wk = malloc(sizeof(mkey_t) * (size_t)c->H);
  o->pk = malloc(sizeof(mkey_t) * (size_t)c->H);
  if (!o->wk || !o->pk) {
    free(o->wk);
    free(o->pk);
    return shoal__seterr(SHOAL_ERR_NOMEM, "oasis order");
  }
  o->nw = o->np = 0;
  for (int h = 0; h < c->H; h++) {
    const double *res = shoal__ps_res(c, t, h);
    if (room_for(res, j->dw)) o->wk[o->nw++] = (mkey_t){unit_price(c, p, e, t, h, j->dw), h};
    if (room_for(res, j->dp)) o->pk[o->np++] = (mkey_t){unit_price(c, p, e, t, h, j->dp), h};
  }
  if (o->nw > 1) qsort(o->wk, (size_t)o->nw, sizeof(mkey_t), cmp_key);
  if (o->np > 1) qsort(o->pk, (size_t)o->np, sizeof(mkey_t), cmp_key);
  return 0;
}

/* COST_T of §6.4 for n workers, shared pool: workers on the cheapest machines
 * first, then PSs on the cheapest machines with room left. */
static double deploy(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, const order_t *o, int n,
                     shoal__ps_slot_t *out, int *err) {
  *err = 0;
  if (out) shoal__ps_slot_clear(out);
  if (n == 0) return 0;
  int H = c->H, Y = 0, nw = 0;
  double cost = 0;
  /* workers per machine (dense only over the touched prefix) */
  int *wk = calloc((size_t)H, sizeof(int));
  if (!wk) {
    *err = shoal__seterr(SHOAL_ERR_NOMEM, "oasis deploy");
    return INFINITY;
  }
  for (int k = 0; k < o->nw && Y < n; k++) {
    int h = o->wk[k].h;
    const double *res = shoal__ps_res(c, t, h);
    int y = n - Y;
    for (int r = 0; r < SHOAL_PS_NRES; r++)
      if (j->dw[r] > 0) y = (int)fmin(y, floor((res[r] + EPS) / j->dw[r]));
    if (y <= 0) continue;
    wk[h] = y;
    Y += y;
    nw++;
    cost += y * o->wk[k].key;
  }
  if (Y < n) {
    free(wk);
    return INFINITY;
  }
  int need = shoal__ps_count(j->kappa, n), Z = 0;
  for (int k = 0; k < o->np && Z < need; k++) {
    int h = o->pk[k].h;
    const double *res = shoal__ps_res(c, t, h);
    int z = need - Z;
    for (int r = 0; r < SHOAL_PS_NRES; r++)
      if (j->dp[r] > 0) z = (int)fmin(z, floor((res[r] - wk[h] * j->dw[r] + EPS) / j->dp[r]));
    if (z <= 0) continue;
    if (out && (*err = shoal__ps_slot_add(out, h, 0, z))) break;
    Z += z;
    cost += z * o->pk[k].key;
  }
  if (out && !*err)
    for (int k = 0; k < o->nw && !*err; k++)
      if (wk[o->wk[k].h]) *err = shoal__ps_slot_add(out, o->wk[k].h, wk[o->wk[k].h], 0);
  free(wk);
  (void)nw;
  if (*err || Z < need) return INFINITY;
  return cost;
}

double shoal__ps_oasis_deploy_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t,
                                   const shoal__ps_oasis_params_t *p, const shoal__ps_oasis_est_t *e, int n,
                                   shoal__ps_slot_t *out) {
  order_t o;
  if (make_order(c, j, t, p, e, &o)) return INFINITY;
  int err;
  double v = deploy(c, j, t, &o, n, out, &err);
  free(o.wk);
  free(o.pk);
  return err ? INFINITY : v;
}

/* Work units: *D units of *u mini-batches, at most *e1 units per slot. */
static void work_units(const shoal__ps_job_t *j, const shoal__ps_oasis_params_t *p, int *D, double *u, int *e1) {
  *D = p->units;
  *u = j->work / *D;
  *e1 = (int)floor(j->wmax * j->rho_ex / *u + EPS);
  if (*e1 < 1) { /* one unit needs more than wmax workers: coarser units impossible, finer units */
    *D = (int)ceil(j->work / (j->wmax * j->rho_ex)) * 4;
    *u = j->work / *D;
    *e1 = (int)floor(j->wmax * j->rho_ex / *u + EPS);
  }
  if (*e1 > *D) *e1 = *D;
}

/* Ends considered (*L slots from s): the exact fastest completion (greedy,
 * locality-aware) stretched by 2 rho_in/rho_ex (OASiS counts every worker at
 * the network rate), plus 8 slots; later ends lose utility while prices
 * rarely fall. */
static int ends_considered(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s,
                           const shoal__ps_oasis_params_t *p, int *L) {
  shoal__ps_sched_t G;
  int rc = shoal__ps_greedy(c, j, s, p->hmax, 16, &G);
  if (rc) return rc;
  double stretch = 2 * ceil(j->rho_in / j->rho_ex);
  double lgd = stretch * (shoal__ps_sched_end(&G) - s + 1) + 8;
  int lg = lgd < p->hmax ? (int)lgd : p->hmax;
  shoal__ps_sched_free(&G);
  *L = lg < p->hmax ? lg : p->hmax;
  return 0;
}

/* cost_e[q]: the cheapest deployment doing q units (of u) in slot t, memoized by worker count. */
static int slot_costs(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, const shoal__ps_oasis_params_t *p,
                      const shoal__ps_oasis_est_t *e, int e1, double u, double *cost_e) {
  if (!shoal__ps_slot_fits_worker(c, j, t)) { /* a full slot: only 0 units (no prices needed) */
    cost_e[0] = 0;
    for (int q = 1; q <= e1; q++) cost_e[q] = (int)ceil(q * u / j->rho_ex - EPS) == 0 ? 0 : INFINITY;
    return 0;
  }
  order_t o;
  int rc = make_order(c, j, t, p, e, &o), err = 0;
  if (rc) return rc;
  int lastn = -1;
  double lastc = 0;
  for (int q = 0; q <= e1; q++) {
    int n = (int)ceil(q * u / j->rho_ex - EPS);
    if (n > 0 && n < j->wmin) n = j->wmin; /* a rigid job deploys all its workers (more work than q) */
    if (n > j->wmax) n = j->wmax + 1;
    if (n != lastn) lastc = n > j->wmax || !(lastc < INFINITY) ? INFINITY : deploy(c, j, t, &o, n, NULL, &err), lastn = n;
    if (err) break;
    cost_e[q] = lastc;
  }
  free(o.wk);
  free(o.pk);
  return err;
}

/* One slot of the DP: cur[d] = min_q cost_e[q] + prev[d - q], ag[d] the best q. */
static void dp_slot(const double *cost_e, int e1, int D, const double *prev, double *cur, int *ag) {
  /* placeability is monotone in the worker count: skip what cannot fit */
  int qcap = 0;
  while (qcap < e1 && cost_e[qcap + 1] < INFINITY) qcap++;
  for (int d = 0; d <= D; d++) {
    double b = INFINITY;
    int ba = 0;
    int qmax = d < qcap ? d : qcap;
    for (int q = 0; q <= qmax; q++) {
      double v = cost_e[q] + prev[d - q];
      if (v < b) b = v, ba = q;
    }
    cur[d] = b;
    ag[d] = ba;
  }
}

/* The DP prices each slot on its own, so two slots with the same worker count may sit on different machines:
 * a move (a restart) in the middle of a plan. A slot whose worker count is the one of the slot before (the
 * placement the job holds, before the first) takes that placement when it fits and does as much work. */
static int keep_placements(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_sched_t *S) {
  const shoal__ps_slot_t *prev = j->held && j->held->n ? j->held : NULL;
  for (int k = 0; k < S->len; k++) {
    shoal__ps_slot_t *sl = &S->slot[k];
    int W, P, Wp, Pp;
    shoal__ps_slot_totals(sl, &W, &P);
    if (prev && W > 0 && !shoal__ps_slot_equal(prev, sl)) {
      shoal__ps_slot_totals(prev, &Wp, &Pp);
      if (Wp == W && shoal__ps_slot_fits(c, j, prev, S->start + k) &&
          shoal__ps_slot_work(j, prev) >= shoal__ps_slot_work(j, sl) - EPS) {
        int rc = shoal__ps_slot_copy(sl, prev);
        if (rc) return rc;
      }
    }
    prev = sl->n ? sl : prev;
  }
  return 0;
}

/* The schedule of the best end s + best_k, slot by slot back from D units. */
static int dp_schedule(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, const shoal__ps_oasis_params_t *p,
                       const shoal__ps_oasis_est_t *e, const int *arg, int D, double u, int best_k, shoal__ps_sched_t *out) {
  shoal__ps_sched_t S;
  shoal__ps_sched_init(&S, s);
  int d = D, rc = 0;
  for (int k = best_k; k >= 0 && !rc; k--) {
    int q = arg[(size_t)k * (D + 1) + d];
    d -= q;
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(&S, s + k);
    if (!sl) rc = shoal__seterr(SHOAL_ERR_NOMEM, "oasis schedule");
    if (rc || q == 0) continue;
    int n = (int)ceil(q * u / j->rho_ex - EPS);
    if (n < j->wmin) n = j->wmin;
    if (n > j->wmax) n = j->wmax;
    if (!(shoal__ps_oasis_deploy_cost(c, j, s + k, p, e, n, sl) < INFINITY))
      rc = shoal__seterr(SHOAL_ERR_INTERNAL, "oasis: slot %d deployment of %d workers vanished", s + k, n);
  }
  if (!rc) rc = keep_placements(c, j, &S);
  if (!rc) rc = shoal__ps_sched_trim(c, j, &S, s, 16);
  if (rc) {
    shoal__ps_sched_free(&S);
    return rc;
  }
  *out = S;
  return 0;
}

int shoal__ps_oasis(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, const shoal__ps_oasis_params_t *p,
                    const shoal__ps_oasis_est_t *e, double *payoff, shoal__ps_sched_t *out) {
  if (s < j->arrival) s = j->arrival;
  if (e->njobs == 0) return shoal__seterr(SHOAL_ERR_INVALID, "oasis: no job observed (prices undefined)");
  int D, e1, L;
  double u;
  work_units(j, p, &D, &u, &e1);
  int rc = ends_considered(c, j, s, p, &L);
  if (rc) return rc;
  /* C: cheapest cost to do d units in slots s..s+k (two rows); arg[k][d] = units in slot s+k */
  double *C = malloc(sizeof(double) * (size_t)(D + 1) * 2);
  int *arg = malloc(sizeof(int) * (size_t)(D + 1) * (size_t)L);
  double *cost_e = malloc(sizeof(double) * (size_t)(e1 + 1));
  if (!C || !arg || !cost_e) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "oasis DP (%d units x %d slots)", D, L);
    goto out;
  }
  double *prev = C, *cur = C + D + 1;
  prev[0] = 0;
  for (int d = 1; d <= D; d++) prev[d] = INFINITY;
  double best_mu = -INFINITY;
  int best_k = -1;
  for (int k = 0; k < L; k++) {
    int t = s + k;
    if ((rc = slot_costs(c, j, t, p, e, e1, u, cost_e))) goto out;
    dp_slot(cost_e, e1, D, prev, cur, arg + (size_t)k * (D + 1));
    double mu = util(p, t - j->arrival) - cur[D];
    if (cur[D] < INFINITY && mu > best_mu) best_mu = mu, best_k = k;
    double *sw = prev;
    prev = cur;
    cur = sw;
    /* utility only falls with later ends and cost >= 0: stop when hopeless */
    if (best_k >= 0 && util(p, t + 1 - j->arrival) <= best_mu) break;
  }
  if (best_k < 0) {
    rc = shoal__seterr(SHOAL_ERR_INFEASIBLE, "oasis: job %d does not fit in slots %d..%d", j->id, s, s + L - 1);
    goto out;
  }
  if (!(rc = dp_schedule(c, j, s, p, e, arg, D, u, best_k, out))) *payoff = best_mu;
out:
  free(C);
  free(arg);
  free(cost_e);
  return rc;
}
