/* Exact single-job greedy (spec §5). */
#include "sched/planners/greedy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define EPS 1e-9

/* PSs that fit on res next to a workers of j, at most cap_ps (-1: none fit). */
static int ps_room(const shoal__ps_job_t *j, const double *res, int a, int cap_ps) {
  int b = cap_ps;
  for (int r = 0; r < SHOAL_PS_NRES; r++) {
    double left = res[r] - a * j->dw[r];
    if (left < -EPS) return -1;
    if (j->dp[r] > 0) {
      double f = floor((left + EPS) / j->dp[r]);
      if (f < b) b = (int)f;
    }
  }
  return b < 0 ? -1 : b;
}

/* Most workers alone on res. */
static int worker_room(const shoal__ps_job_t *j, const double *res, int cap_w) {
  int a = cap_w;
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (j->dw[r] > 0) {
      double f = floor((res[r] + EPS) / j->dw[r]);
      if (f < a) a = (int)f;
    }
  return a < 0 ? 0 : a;
}

/* Distributed DP of §5: F[a] = most PSs placeable when exactly a workers are
 * placed over the machines seen so far. Stops as soon as wmax workers with
 * their PSs are reachable (nothing better exists). Writes the placement of
 * the largest feasible W into out; returns W (0: none; the caller drops a W
 * below the job's wmin: no larger W fits either). */
static int dist_best(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0, double theta,
                     shoal__ps_slot_t *out, int *err) {
  int Wm = j->wmax, H = c->H;
  int need_max = shoal__ps_count(j->kappa, Wm);
  int cap_ps = Wm; /* never need more than W PSs */
  int *F = malloc(sizeof(int) * (size_t)(Wm + 1)), *G = malloc(sizeof(int) * (size_t)(Wm + 1));
  /* choice[k][a] = workers put on the k-th used machine when total is a */
  int *choice = NULL, *mach = malloc(sizeof(int) * (size_t)H), nm = 0;
  int W = 0;
  *err = 0;
  if (!F || !G || !mach) goto nomem;
  F[0] = 0;
  for (int a = 1; a <= Wm; a++) F[a] = -1;
  size_t ccap = 0;
  for (int h = 0; h < H; h++) {
    const double *res = shoal__ps_res(c, t, h);
    int A = worker_room(j, res, Wm), B0 = ps_room(j, res, 0, cap_ps);
    if (A == 0 && B0 <= 0) continue;
    if ((size_t)(nm + 1) * (size_t)(Wm + 1) > ccap) {
      ccap = ccap ? 2 * ccap : (size_t)16 * (Wm + 1);
      int *nc = realloc(choice, sizeof(int) * ccap);
      if (!nc) goto nomem;
      choice = nc;
    }
    int *ch = choice + (size_t)nm * (Wm + 1);
    for (int a = 0; a <= Wm; a++) {
      G[a] = F[a];
      ch[a] = 0;
    }
    for (int ah = 0; ah <= A; ah++) {
      int b = ps_room(j, res, ah, cap_ps);
      if (b < 0) break;
      for (int a = ah; a <= Wm; a++) {
        if (F[a - ah] < 0) continue;
        int v = F[a - ah] + b;
        if (v > cap_ps) v = cap_ps;
        if (v > G[a]) {
          G[a] = v;
          ch[a] = ah;
        }
      }
    }
    memcpy(F, G, sizeof(int) * (size_t)(Wm + 1));
    mach[nm++] = h;
    if (F[Wm] >= need_max) break;
  }
  for (int a = Wm; a >= 1; a--)
    if (F[a] >= shoal__ps_count(j->kappa, a)) {
      W = a;
      break;
    }
  if (W > 0) {
    /* backtrack workers per machine, then place PSs machine by machine */
    int *wk = calloc((size_t)nm + 1, sizeof(int));
    if (!wk) goto nomem;
    int a = W;
    for (int k = nm - 1; k >= 0; k--) {
      wk[k] = choice[(size_t)k * (Wm + 1) + a];
      a -= wk[k];
    }
    /* recompute F along the path so PS counts are exact: greedy per machine
     * is exact because F sums independent per-machine maxima */
    int need = shoal__ps_count(j->kappa, W);
    shoal__ps_slot_clear(out);
    /* PSs first on the machines with workers, then on the others, each in
     * machine order (the DP is price-blind; locality-neutral here) */
    for (int k = 0; k < nm && !*err; k++)
      if (wk[k]) *err = shoal__ps_slot_add(out, mach[k], wk[k], 0);
    for (int pass = 0; pass < 2 && need > 0 && !*err; pass++)
      for (int k = 0; k < nm && need > 0 && !*err; k++) {
        if ((pass == 0) != (wk[k] > 0)) continue;
        int b = ps_room(j, shoal__ps_res(c, t, mach[k]), wk[k], need);
        if (b > 0) {
          *err = shoal__ps_slot_add(out, mach[k], 0, b);
          need -= b;
        }
      }
    if (!*err && need > 0) *err = shoal__seterr(SHOAL_ERR_INTERNAL, "greedy DP: %d PSs unplaced (job %d slot %d)", need, j->id, t);
    free(wk);
  }
  (void)s0;
  (void)theta;
  free(F);
  free(G);
  free(choice);
  free(mach);
  return *err ? 0 : W;
nomem:
  free(F);
  free(G);
  free(choice);
  free(mach);
  *err = shoal__seterr(SHOAL_ERR_NOMEM, "greedy DP");
  return 0;
}

int shoal__ps_best_memo_init(shoal__ps_best_memo_t *m, const shoal__ps_cluster_t *c, double theta) {
  memset(m, 0, sizeof *m);
  size_t H = (size_t)c->H;
  m->H = c->H;
  m->theta = theta;
  m->key = malloc(sizeof(double) * H * SHOAL_PS_NRES);
  m->pw = malloc(sizeof(double) * H * SHOAL_PS_NRES);
  m->w = malloc(sizeof(int) * H);
  m->cand = malloc(sizeof(int) * H);
  m->kok = calloc(H, 1);
  m->pok = calloc(H, 1);
  if (!m->key || !m->pw || !m->w || !m->cand || !m->kok || !m->pok) {
    shoal__ps_best_memo_free(m);
    return shoal__seterr(SHOAL_ERR_NOMEM, "slot best memo");
  }
  return 0;
}

void shoal__ps_best_memo_free(shoal__ps_best_memo_t *m) {
  free(m->key);
  free(m->pw);
  free(m->w);
  free(m->cand);
  free(m->kok);
  free(m->pok);
  free(m->dist.pl);
  memset(m, 0, sizeof *m);
}

/* The residual rows of all machines in slot t, contiguous (model/slot_plan.h). */
static const double *slot_row(const shoal__ps_cluster_t *c, int t) { return shoal__ps_res(c, t, 0); }

static int demands_nonneg(const shoal__ps_job_t *j) {
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (j->dw[r] < 0 || j->dp[r] < 0) return 0;
  return 1;
}

int shoal__ps_slot_best_memo(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0,
                             shoal__ps_best_memo_t *m, shoal__ps_slot_t *out) {
  const size_t rowsz = sizeof(double) * SHOAL_PS_NRES;
  const double *row = slot_row(c, t);
  int same = m->last && (row == m->last || !memcmp(row, m->last, rowsz * (size_t)c->H));
  if (!same) {
    for (int h = 0; h < c->H; h++) {
      const double *res = row + (size_t)h * SHOAL_PS_NRES;
      double *key = m->key + (size_t)h * SHOAL_PS_NRES;
      if (m->kok[h] && !memcmp(res, key, rowsz)) continue;
      memcpy(key, res, rowsz);
      m->w[h] = shoal__ps_max_coloc(j, res);
      m->kok[h] = 1;
      m->pok[h] = 0;
    }
    int bw = 0;
    for (int h = 0; h < c->H; h++)
      if (m->w[h] > bw) bw = m->w[h];
    /* the machines that can win the co-located choice: those fitting bw
     * workers, less each one with the residual and capacity bits of an
     * earlier one (its cost has the same bits, and a later cost equal to
     * an earlier one never wins the tie-break below) */
    int nc = 0, nrep = 0;
    for (int h = 0; h < c->H && bw > 0; h++) {
      if (m->w[h] != bw) continue;
      const double *key = m->key + (size_t)h * SHOAL_PS_NRES, *cap = shoal__ps_cap(c, h);
      int dup = 0;
      for (int q = 0; q < nrep && !dup; q++) {
        int o = m->cand[q];
        dup = !memcmp(key, m->key + (size_t)o * SHOAL_PS_NRES, rowsz) && !memcmp(cap, shoal__ps_cap(c, o), rowsz);
      }
      if (dup) continue;
      if (nrep == nc && nrep < 8) nrep++; /* the first few distinct ones are compared against */
      m->cand[nc++] = h;
    }
    m->ncand = nc;
    m->bw = bw;
    /* a slot where no machine has room for one worker gives nothing, in
     * either form (a planner scanning a booked future sees many of those).
     * A machine co-locating a worker has room for one (demands are not
     * negative: the worker's use is at most the pair's), so only slots
     * without one ask */
    m->last_fits = bw > 0 && demands_nonneg(j) ? 1 : shoal__ps_slot_fits_worker(c, j, t);
    m->dist_ok = 0;
  }
  m->last = row;
  if (!m->last_fits) {
    shoal__ps_slot_clear(out);
    return 0;
  }
  int bw = shoal__ps_w_ok(j, m->bw) ? m->bw : 0; /* fewer than the job's wmin co-located: none */
  /* co-located: the machine fitting most workers, ties to the cheaper by
   * more than EPS (the first of equal ones) */
  int bh = -1;
  if (bw > 0 && m->ncand == 1) {
    bh = m->cand[0];
  } else if (bw > 0) {
    double f = shoal__ps_price_f(t, s0), bcost = 0;
    int np = shoal__ps_count(j->kappa, bw); /* (no PS: its price times 0 adds nothing) */
    for (int q = 0; q < m->ncand; q++) {
      int h = m->cand[q];
      const double *cap = shoal__ps_cap(c, h), *key = m->key + (size_t)h * SHOAL_PS_NRES;
      double *pw = m->pw + (size_t)h * SHOAL_PS_NRES;
      if (!m->pok[h]) {
        shoal__ps_price_pw(c, h, key, m->theta, pw);
        m->pok[h] = 1;
      }
      double cost = shoal__ps_unit_cost_pw(pw, cap, f, j->dw) * bw;
      if (np) cost += shoal__ps_unit_cost_pw(pw, cap, f, j->dp) * np;
      if (bh < 0 || cost < bcost - EPS) bh = h, bcost = cost;
    }
  }
  shoal__ps_slot_clear(out);
  double coloc_work = bw * j->rho_in;
  /* distributed can only win when wmax * rho_ex beats the co-located work */
  if (j->wmax * j->rho_ex > coloc_work + EPS) {
    int err = 0, W;
    if (m->dist_ok) {
      W = m->dist_w;
      err = shoal__ps_slot_copy(out, &m->dist);
    } else {
      W = dist_best(c, j, t, s0, m->theta, out, &err);
      if (!err) err = shoal__ps_slot_copy(&m->dist, out);
      m->dist_ok = !err;
      m->dist_w = W;
    }
    if (err) return err;
    if (W > 0 && shoal__ps_w_ok(j, W) && shoal__ps_slot_work(j, out) > coloc_work + EPS) return 0;
    shoal__ps_slot_clear(out);
  }
  if (bw > 0) return shoal__ps_slot_add(out, bh, bw, shoal__ps_count(j->kappa, bw));
  return 0;
}

int shoal__ps_slot_best(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0, double theta,
                        shoal__ps_slot_t *out) {
  shoal__ps_best_memo_t m;
  int rc = shoal__ps_best_memo_init(&m, c, theta);
  if (!rc) rc = shoal__ps_slot_best_memo(c, j, t, s0, &m, out);
  shoal__ps_best_memo_free(&m);
  return rc;
}

int shoal__ps_greedy(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int hmax, double theta,
                     shoal__ps_sched_t *out) {
  if (!(j->work > 0) || j->wmax < 1 || !(j->rho_in > 0) || !(j->rho_ex > 0))
    return shoal__seterr(SHOAL_ERR_INVALID, "greedy: job %d has work %g, wmax %d, rates %g/%g", j->id, j->work, j->wmax,
                         j->rho_in, j->rho_ex);
  if (s < j->arrival) s = j->arrival;
  shoal__ps_sched_t sc;
  shoal__ps_sched_init(&sc, s);
  double rem = j->work;
  shoal__ps_best_memo_t m;
  int rc = shoal__ps_best_memo_init(&m, c, theta);
  if (rc) return rc;
  int ran = j->held && j->held->n; /* with j->restart: a placement change loses that part of a slot */
  for (int t = s; t < s + hmax; t++) {
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(&sc, t);
    if (!sl) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "greedy schedule");
      goto fail;
    }
    if ((rc = shoal__ps_slot_best_memo(c, j, t, s, &m, sl))) goto fail;
    double w = shoal__ps_slot_work(j, sl), need = rem;
    if (j->restart > 0 && ran) {
      /* restart cost in the objective: the placement of the slot before (the held one before the first)
       * runs on at its full work if it still fits, the best slot pays the change; the held one is kept
       * when it does as much or covers what is left */
      const shoal__ps_slot_t *prev = t == s ? j->held : &sc.slot[t - 1 - s];
      double wb = shoal__ps_slot_work_after(j, prev, ran, sl);
      double wp = prev && prev->n && !shoal__ps_slot_equal(prev, sl) && shoal__ps_slot_fits(c, j, prev, t)
                      ? shoal__ps_slot_work(j, prev) : -1;
      if (wp >= wb - EPS || wp >= rem * (1 - EPS)) { /* it is worth more, or it finishes the job */
        if ((rc = shoal__ps_slot_copy(sl, prev))) goto fail;
        w = shoal__ps_slot_work(j, sl);
        if (w >= rem * (1 - EPS)) goto covered; /* no trim: fewer workers would be a change */
      } else if (wb < w) {
        need = rem / (1 - j->restart);
        w = wb;
      }
    }
    ran |= sl->n > 0;
    if (w >= rem * (1 - EPS)) {
      /* MIN_COVER: cheapest configuration with work >= rem: the trimmed best
       * slot, or fewer co-located workers on a cheaper machine */
      if ((rc = shoal__ps_slot_trim(c, j, sl, t, s, theta, need))) goto fail;
      double bcost = shoal__ps_slot_cost(c, j, sl, t, s, theta);
      int need_in = (int)ceil(need / j->rho_in - EPS), bh = -1;
      if (need_in < 1) need_in = 1;
      if (need_in < j->wmin) need_in = j->wmin;
      for (int h = 0; h < c->H && need_in <= j->wmax; h++) {
        if (shoal__ps_max_coloc(j, shoal__ps_res(c, t, h)) < need_in) continue;
        double cost = shoal__ps_unit_cost(c, t, h, s, theta, j->dw) * need_in;
        int np = shoal__ps_count(j->kappa, need_in);
        if (np) cost += shoal__ps_unit_cost(c, t, h, s, theta, j->dp) * np;
        if (cost < bcost - EPS) bcost = cost, bh = h;
      }
      if (bh >= 0) {
        shoal__ps_slot_clear(sl);
        if ((rc = shoal__ps_slot_add(sl, bh, need_in, shoal__ps_count(j->kappa, need_in)))) goto fail;
      }
    covered:
      shoal__ps_best_memo_free(&m);
      *out = sc;
      return 0;
    }
    rem -= w;
  }
  rc = shoal__seterr(SHOAL_ERR_INFEASIBLE, "greedy: job %d (%g mini-batches) not coverable in slots %d..%d", j->id,
                     j->work, s, s + hmax - 1);
fail:
  shoal__ps_best_memo_free(&m);
  shoal__ps_sched_free(&sc);
  return rc;
}
