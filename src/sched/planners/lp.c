/* LP relaxation (larr) and exact MIP (tests) with GLPK's C API. */
#include "sched/planners/lp.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define EPS 1e-9

void shoal__ps_glpk_quiet(void) { glp_term_out(GLP_OFF); }

/* Growing triplet list for glp_load_matrix (1-based). */
typedef struct {
  int n, cap;
  int *ia, *ja;
  double *ar;
} trip_t;

static int trip_add(trip_t *m, int i, int j, double v) {
  if (v == 0) return 0;
  if (m->n + 1 >= m->cap) {
    int nc = m->cap ? 2 * m->cap : 1024;
    int *ia = realloc(m->ia, sizeof(int) * (size_t)nc);
    if (ia) m->ia = ia;
    int *ja = realloc(m->ja, sizeof(int) * (size_t)nc);
    if (ja) m->ja = ja;
    double *ar = realloc(m->ar, sizeof(double) * (size_t)nc);
    if (ar) m->ar = ar;
    if (!ia || !ja || !ar) return shoal__seterr(SHOAL_ERR_NOMEM, "LP matrix (%d non-zeros)", nc);
    m->cap = nc;
  }
  m->n++;
  m->ia[m->n] = i;
  m->ja[m->n] = j;
  m->ar[m->n] = v;
  return 0;
}
static void trip_free(trip_t *m) {
  free(m->ia);
  free(m->ja);
  free(m->ar);
}

static const char *glp_ret_name(int ret) {
  switch (ret) {
    case GLP_EBADB: return "invalid basis";
    case GLP_ESING: return "singular basis";
    case GLP_ECOND: return "ill-conditioned basis";
    case GLP_EBOUND: return "incorrect bounds";
    case GLP_EFAIL: return "solver failure";
    case GLP_EOBJLL: return "objective lower limit";
    case GLP_EOBJUL: return "objective upper limit";
    case GLP_EITLIM: return "iteration limit";
    case GLP_ETMLIM: return "time limit";
    case GLP_ENOPFS: return "no primal feasible solution";
    case GLP_ENODFS: return "no dual feasible solution";
    case GLP_EROOT: return "no optimal LP basis at the root";
    case GLP_ESTOP: return "stopped";
    case GLP_EMIPGAP: return "MIP gap tolerance reached";
    default: return "unknown GLPK error";
  }
}

struct shoal__ps_lp {
  glp_prob *P;
  int s, L, nm, col_d; /* column of d for block b = col_d + b */
  int nb;              /* blocks of consecutive slots with identical residuals (merged) */
  int *blk_of;         /* [L] block of slot s + tt */
  int *blk_first, *blk_len; /* [nb] first slot offset, length */
  int *mcap;           /* nm * nb */
  int *col_x;          /* base column of (k, b): x, z, y, q consecutive */
  int it_lim;
  int presolve;        /* single-solve LPs (merged): GLPK's presolver pays off; searches keep the warm basis */
  int curE;
  int jid;
};

static inline int cx(const shoal__ps_lp_t *lp, int k, int b) { return lp->col_x[(size_t)k * lp->nb + b]; }

int shoal__ps_lp_build(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_max, const int *mach,
                       int nm, double theta, int it_lim, int merge, shoal__ps_lp_t **out) {
  return shoal__ps_lp_build_capped(c, j, s, e_max, mach, nm, theta, it_lim, merge, 0, out);
}

/* Cut slots s..s+L-1 into blocks (runs of identical residuals on every LP
 * machine when merging, else single slots), at most max_blocks of them (0:
 * no limit); returns the slots covered (L, or fewer when the cap cut it). */
static int make_blocks(shoal__ps_lp_t *lp, const shoal__ps_cluster_t *c, const int *mach, int merge, int max_blocks) {
  int s = lp->s, nm = lp->nm;
  lp->nb = 0;
  for (int tt = 0; tt < lp->L; tt++) {
    int same = merge && tt > 0;
    for (int k = 0; k < nm && same; k++)
      same = !memcmp(shoal__ps_res(c, s + tt, mach[k]), shoal__ps_res(c, s + tt - 1, mach[k]), sizeof(double) * SHOAL_PS_NRES);
    if (!same) {
      if (max_blocks > 0 && lp->nb == max_blocks) return tt;
      lp->blk_first[lp->nb] = tt;
      lp->blk_len[lp->nb] = 0;
      lp->nb++;
    }
    lp->blk_len[lp->nb - 1]++;
    lp->blk_of[tt] = lp->nb - 1;
  }
  return lp->L;
}

/* The LP's frame: horizon, blocks (merge runs of slots whose residual is
 * identical on every LP machine: exact for the LP up to the time tie-break of
 * the prices, spec §4.3), the per-(machine, block) tables and the problem. */
static int lp_frame(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_max, const int *mach, int nm,
                    int it_lim, int merge, int max_blocks, shoal__ps_lp_t *lp) {
  int L = e_max - s + 1;
  lp->s = s;
  lp->L = L;
  lp->nm = nm;
  lp->it_lim = it_lim;
  lp->presolve = merge;
  lp->jid = j->id;
  lp->blk_of = malloc(sizeof(int) * (size_t)L);
  lp->blk_first = malloc(sizeof(int) * (size_t)L);
  lp->blk_len = malloc(sizeof(int) * (size_t)L);
  if (!lp->blk_of || !lp->blk_first || !lp->blk_len) return shoal__seterr(SHOAL_ERR_NOMEM, "LP of job %d", j->id);
  lp->L = L = make_blocks(lp, c, mach, merge, max_blocks);
  lp->curE = s + L - 1;
  lp->mcap = malloc(sizeof(int) * (size_t)nm * lp->nb);
  lp->col_x = malloc(sizeof(int) * (size_t)nm * lp->nb);
  lp->P = glp_create_prob();
  if (!lp->mcap || !lp->col_x || !lp->P) return shoal__seterr(SHOAL_ERR_NOMEM, "LP of job %d", j->id);
  glp_set_obj_dir(lp->P, GLP_MIN);
  return 0;
}

/* Columns: per (machine, block) x, z, y, q with their prices; then d per block. */
static void lp_columns(shoal__ps_lp_t *lp, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const int *mach,
                       double theta) {
  glp_prob *P = lp->P;
  int s = lp->s, nm = lp->nm, NB = lp->nb;
  glp_add_cols(P, 4 * nm * NB + NB);
  int col = 1;
  for (int k = 0; k < nm; k++)
    for (int bb = 0; bb < NB; bb++) {
      int t = s + lp->blk_first[bb], h = mach[k];
      int m = shoal__ps_max_coloc(j, shoal__ps_res(c, t, h));
      lp->mcap[(size_t)k * NB + bb] = m;
      lp->col_x[(size_t)k * NB + bb] = col;
      /* the block's slots share this residual on h (that is what merged
       * them): theta^u once, each slot's time factor apart */
      double cw = 0, cp = 0, pw[SHOAL_PS_NRES];
      const double *cap = shoal__ps_cap(c, h);
      shoal__ps_price_pw(c, h, shoal__ps_res(c, t, h), theta, pw);
      for (int q = 0; q < lp->blk_len[bb]; q++) {
        double f = shoal__ps_price_f(t + q, s);
        cw += shoal__ps_unit_cost_pw(pw, cap, f, j->dw), cp += shoal__ps_unit_cost_pw(pw, cap, f, j->dp);
      }
      glp_set_col_bnds(P, col + 0, GLP_LO, 0, 0); /* x */
      glp_set_col_bnds(P, col + 1, m > 0 ? GLP_DB : GLP_FX, 0, m > 0 ? 1 : 0); /* z */
      if (m == 0) glp_set_col_bnds(P, col + 0, GLP_FX, 0, 0);
      glp_set_col_bnds(P, col + 2, GLP_LO, 0, 0); /* y */
      glp_set_col_bnds(P, col + 3, GLP_LO, 0, 0); /* q */
      glp_set_obj_coef(P, col + 0, cw);
      glp_set_obj_coef(P, col + 2, cw);
      glp_set_obj_coef(P, col + 3, cp);
      col += 4;
    }
  lp->col_d = col;
  for (int bb = 0; bb < NB; bb++) glp_set_col_bnds(P, col + bb, GLP_DB, 0, 1);
}

/* C1: the work is covered. */
static int lp_work_row(shoal__ps_lp_t *lp, const shoal__ps_job_t *j, trip_t *M) {
  int row = glp_add_rows(lp->P, 1), rc;
  glp_set_row_bnds(lp->P, row, GLP_LO, j->work, 0);
  for (int k = 0; k < lp->nm; k++)
    for (int bb = 0; bb < lp->nb; bb++) {
      int b = cx(lp, k, bb);
      double len = lp->blk_len[bb];
      if ((rc = trip_add(M, row, b + 0, j->rho_in * len)) || (rc = trip_add(M, row, b + 2, j->rho_ex * len))) return rc;
    }
  return 0;
}

/* Block bb's rows: per machine capacity (P1) and co-location (L1a, L2); over
 * the machines the worker cap (P2), distribution (L1b), one co-located
 * machine at most (M), PSs per worker (C2, P3). */
static int lp_block_rows(shoal__ps_lp_t *lp, const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const int *mach,
                         int bb, trip_t *M) {
  glp_prob *P = lp->P;
  int t = lp->s + lp->blk_first[bb], cd = lp->col_d + bb, row, rc;
  for (int k = 0; k < lp->nm; k++) {
    int b = cx(lp, k, bb), m = lp->mcap[(size_t)k * lp->nb + bb];
    const double *res = shoal__ps_res(c, t, mach[k]);
    for (int r = 0; r < SHOAL_PS_NRES; r++) { /* P1 */
      if (j->dw[r] <= 0 && j->dp[r] <= 0) continue;
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_UP, 0, res[r]);
      if ((rc = trip_add(M, row, b + 0, j->dw[r])) || (rc = trip_add(M, row, b + 2, j->dw[r])) ||
          (rc = trip_add(M, row, b + 3, j->dp[r])))
        return rc;
    }
    row = glp_add_rows(P, 1); /* L1a: x <= m z */
    glp_set_row_bnds(P, row, GLP_UP, 0, 0);
    if ((rc = trip_add(M, row, b + 0, 1)) || (rc = trip_add(M, row, b + 1, -m))) return rc;
    row = glp_add_rows(P, 1); /* L2: q <= P(m) z + wmax d */
    glp_set_row_bnds(P, row, GLP_UP, 0, 0);
    if ((rc = trip_add(M, row, b + 3, 1)) || (rc = trip_add(M, row, b + 1, -shoal__ps_count(j->kappa, m))) ||
        (rc = trip_add(M, row, cd, -j->wmax)))
      return rc;
  }
  int rP2 = glp_add_rows(P, 5), rL1b = rP2 + 1, rM = rP2 + 2, rC2 = rP2 + 3, rP3 = rP2 + 4;
  glp_set_row_bnds(P, rP2, GLP_UP, 0, j->wmax);
  glp_set_row_bnds(P, rL1b, GLP_UP, 0, 0);
  glp_set_row_bnds(P, rM, GLP_UP, 0, 1);
  glp_set_row_bnds(P, rC2, GLP_LO, 0, 0);
  glp_set_row_bnds(P, rP3, GLP_UP, 0, 0);
  if ((rc = trip_add(M, rL1b, cd, -j->wmax)) || (rc = trip_add(M, rM, cd, 1))) return rc;
  for (int k = 0; k < lp->nm; k++) {
    int b = cx(lp, k, bb);
    if ((rc = trip_add(M, rP2, b + 0, 1)) || (rc = trip_add(M, rP2, b + 2, 1)) || (rc = trip_add(M, rL1b, b + 2, 1)) ||
        (rc = trip_add(M, rM, b + 1, 1)) || (rc = trip_add(M, rC2, b + 3, 1)) ||
        (rc = trip_add(M, rC2, b + 0, -fmin(j->kappa, 1.0))) || (rc = trip_add(M, rC2, b + 2, -fmin(j->kappa, 1.0))) ||
        (rc = trip_add(M, rP3, b + 3, 1)) || (rc = trip_add(M, rP3, b + 0, -1)) || (rc = trip_add(M, rP3, b + 2, -1)))
      return rc;
  }
  return 0;
}

int shoal__ps_lp_build_capped(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_max,
                              const int *mach, int nm, double theta, int it_lim, int merge, int max_blocks,
                              shoal__ps_lp_t **out) {
  if (e_max < s || nm <= 0) return shoal__seterr(SHOAL_ERR_INVALID, "LP of job %d: empty horizon %d..%d or %d machines", j->id, s, e_max, nm);
  shoal__ps_glpk_quiet();
  shoal__ps_lp_t *lp = calloc(1, sizeof *lp);
  trip_t M = {0};
  if (!lp) return shoal__seterr(SHOAL_ERR_NOMEM, "LP");
  int rc = lp_frame(c, j, s, e_max, mach, nm, it_lim, merge, max_blocks, lp);
  if (rc) goto fail;
  lp_columns(lp, c, j, mach, theta);
  if ((rc = lp_work_row(lp, j, &M))) goto fail;
  for (int bb = 0; bb < lp->nb; bb++)
    if ((rc = lp_block_rows(lp, c, j, mach, bb, &M))) goto fail;
  glp_load_matrix(lp->P, M.n, M.ia, M.ja, M.ar);
  trip_free(&M);
  *out = lp;
  return 0;
fail:
  trip_free(&M);
  shoal__ps_lp_free(lp);
  return rc;
}

void shoal__ps_lp_free(shoal__ps_lp_t *lp) {
  if (!lp) return;
  if (lp->P) glp_delete_prob(lp->P);
  free(lp->mcap);
  free(lp->col_x);
  free(lp->blk_of);
  free(lp->blk_first);
  free(lp->blk_len);
  free(lp);
}

/* Switch slots after E off (fix their columns to 0) or back on. */
static void set_horizon(shoal__ps_lp_t *lp, int E) {
  for (int bb = 0; bb < lp->nb; bb++) {
    /* a merged block is on only if all of it ends by E (never uses slots past E) */
    int last = lp->s + lp->blk_first[bb] + lp->blk_len[bb] - 1;
    int on = last <= E, was = last <= lp->curE;
    if (on == was) continue;
    for (int k = 0; k < lp->nm; k++) {
      int b = cx(lp, k, bb), m = lp->mcap[(size_t)k * lp->nb + bb];
      if (on) {
        glp_set_col_bnds(lp->P, b + 0, m > 0 ? GLP_LO : GLP_FX, 0, 0);
        glp_set_col_bnds(lp->P, b + 1, m > 0 ? GLP_DB : GLP_FX, 0, m > 0 ? 1 : 0);
        glp_set_col_bnds(lp->P, b + 2, GLP_LO, 0, 0);
        glp_set_col_bnds(lp->P, b + 3, GLP_LO, 0, 0);
      } else {
        for (int v = 0; v < 4; v++) glp_set_col_bnds(lp->P, b + v, GLP_FX, 0, 0);
      }
    }
    if (on) glp_set_col_bnds(lp->P, lp->col_d + bb, GLP_DB, 0, 1);
    else glp_set_col_bnds(lp->P, lp->col_d + bb, GLP_FX, 0, 0);
  }
  lp->curE = E;
}

int shoal__ps_lp_solve(shoal__ps_lp_t *lp, int E) {
  set_horizon(lp, E);
  glp_smcp p;
  glp_init_smcp(&p);
  p.msg_lev = GLP_MSG_OFF;
  p.meth = GLP_DUALP;
  p.presolve = lp->presolve ? GLP_ON : GLP_OFF;
  p.it_lim = lp->it_lim > 0 ? lp->it_lim : INT_MAX;
  p.tm_lim = 60000; /* a guard against a hang, never the limit that decides */
  int ret = glp_simplex(lp->P, &p);
  if (ret == GLP_EBADB || ret == GLP_ESING || ret == GLP_ECOND) { /* stale basis: rebuild once */
    glp_adv_basis(lp->P, 0);
    ret = glp_simplex(lp->P, &p);
  }
  if (ret == GLP_ENOPFS) /* presolver proved infeasibility */
    return shoal__seterr(SHOAL_ERR_INFEASIBLE, "LP of job %d: no fractional schedule ends by slot %d", lp->jid, E);
  if (ret) return shoal__seterr(SHOAL_ERR_SOLVER, "LP of job %d (end slot %d): glp_simplex: %s", lp->jid, E, glp_ret_name(ret));
  int st = glp_get_status(lp->P);
  if (st == GLP_OPT) return 0;
  if (st == GLP_NOFEAS || (st == GLP_UNBND && glp_get_dual_stat(lp->P) == GLP_NOFEAS))
    return shoal__seterr(SHOAL_ERR_INFEASIBLE, "LP of job %d: no fractional schedule ends by slot %d", lp->jid, E);
  return shoal__seterr(SHOAL_ERR_SOLVER, "LP of job %d (end slot %d): status %d", lp->jid, E, st);
}

int shoal__ps_lp_horizon(shoal__ps_lp_t *lp, int e_lo, int e_hi, int *e_out, int *nsolves) {
  int lo = e_lo < lp->s ? lp->s : e_lo, hi = e_hi, n = 0, rc;
  if (hi > lp->s + lp->L - 1) hi = lp->s + lp->L - 1;
  if (lo > hi) lo = hi;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    rc = shoal__ps_lp_solve(lp, mid);
    n++;
    if (rc == 0) hi = mid;
    else if (rc == SHOAL_ERR_INFEASIBLE) lo = mid + 1;
    else return rc;
  }
  rc = shoal__ps_lp_solve(lp, hi);
  n++;
  if (nsolves) *nsolves += n;
  if (rc) return rc;
  *e_out = hi;
  return 0;
}

double shoal__ps_lp_val(const shoal__ps_lp_t *lp, char var, int k, int t) {
  int tt = t - lp->s;
  if (tt < 0 || tt >= lp->L) return 0;
  int bb = lp->blk_of[tt];
  if (var == 'd') return glp_get_col_prim(lp->P, lp->col_d + bb);
  int off = var == 'x' ? 0 : var == 'z' ? 1 : var == 'y' ? 2 : 3;
  double v = glp_get_col_prim(lp->P, cx(lp, k, bb) + off);
  return v < 0 ? 0 : v;
}

double shoal__ps_lp_obj(const shoal__ps_lp_t *lp) { return glp_get_obj_val(lp->P); }
int shoal__ps_lp_ncols(const shoal__ps_lp_t *lp) { return glp_get_num_cols(lp->P); }
int shoal__ps_lp_last(const shoal__ps_lp_t *lp) { return lp->s + lp->L - 1; }
void shoal__ps_lp_set_work(shoal__ps_lp_t *lp, double work) { glp_set_row_bnds(lp->P, 1, GLP_LO, work, 0); }

int shoal__ps_lp_mcap(const shoal__ps_lp_t *lp, int k, int t) {
  int tt = t - lp->s;
  return tt < 0 || tt >= lp->L ? 0 : lp->mcap[(size_t)k * lp->nb + lp->blk_of[tt]];
}

/* ---- exact MIP of §3.1 (tiny instances) ---- */

/* The MIP's problem and its column layout: per (i, h, t) x, z, y, q; then
 * per (i, t) d, v. */
typedef struct {
  glp_prob *P;
  trip_t M;
  int n, H, T, base_t;
} mip_t;

static int mip_cx(const mip_t *m, int i, int h, int t) { return 1 + 4 * ((i * m->H + h) * m->T + t); }
static int mip_cd(const mip_t *m, int i, int t) { return m->base_t + 2 * (i * m->T + t); }
static int mip_cv(const mip_t *m, int i, int t) { return mip_cd(m, i, t) + 1; }

static void mip_columns(mip_t *m, const shoal__ps_job_t *jobs) {
  glp_prob *P = m->P;
  for (int i = 0; i < m->n; i++) {
    const shoal__ps_job_t *j = &jobs[i];
    for (int t = 0; t < m->T; t++) {
      int off = t < j->arrival;
      for (int h = 0; h < m->H; h++) {
        int b = mip_cx(m, i, h, t);
        glp_set_col_kind(P, b + 0, GLP_IV);
        glp_set_col_kind(P, b + 1, GLP_BV);
        glp_set_col_kind(P, b + 2, GLP_IV);
        glp_set_col_kind(P, b + 3, GLP_IV);
        for (int v = 0; v < 4; v++) glp_set_col_bnds(P, b + v, off ? GLP_FX : (v == 1 ? GLP_DB : GLP_LO), 0, v == 1 && !off ? 1 : 0);
      }
      glp_set_col_kind(P, mip_cd(m, i, t), GLP_BV);
      glp_set_col_kind(P, mip_cv(m, i, t), GLP_BV);
      if (off) {
        glp_set_col_bnds(P, mip_cd(m, i, t), GLP_FX, 0, 0);
        glp_set_col_bnds(P, mip_cv(m, i, t), GLP_FX, 0, 0);
      } else if (t == j->arrival) {
        glp_set_col_bnds(P, mip_cv(m, i, t), GLP_FX, 1, 1);
      }
      glp_set_obj_coef(P, mip_cv(m, i, t), 1);
    }
  }
}

/* Job i's slot t: P2, L1b, M, C2, P3, V over the machines, and per machine L1a, L2. */
static int mip_slot_rows(mip_t *m, const shoal__ps_job_t *j, int i, int t) {
  glp_prob *P = m->P;
  trip_t *M = &m->M;
  int rc, cd = mip_cd(m, i, t), cv = mip_cv(m, i, t);
  int r0 = glp_add_rows(P, 6); /* P2, L1b, M, C2, P3, V */
  glp_set_row_bnds(P, r0 + 0, GLP_UP, 0, j->wmax);
  glp_set_row_bnds(P, r0 + 1, GLP_UP, 0, 0);
  glp_set_row_bnds(P, r0 + 2, GLP_UP, 0, 0);
  glp_set_row_bnds(P, r0 + 3, GLP_LO, 0, 0);
  glp_set_row_bnds(P, r0 + 4, GLP_UP, 0, 0);
  glp_set_row_bnds(P, r0 + 5, GLP_UP, 0, 0);
  if ((rc = trip_add(M, r0 + 1, cd, -j->wmax)) || (rc = trip_add(M, r0 + 2, cd, 1)) || (rc = trip_add(M, r0 + 2, cv, -1)))
    return rc;
  if (t + 1 < m->T && t >= j->arrival &&
      ((rc = trip_add(M, r0 + 5, mip_cv(m, i, t + 1), 1)) || (rc = trip_add(M, r0 + 5, cv, -1))))
    return rc;
  for (int h = 0; h < m->H; h++) {
    int b = mip_cx(m, i, h, t);
    if ((rc = trip_add(M, r0 + 0, b, 1)) || (rc = trip_add(M, r0 + 0, b + 2, 1)) || (rc = trip_add(M, r0 + 1, b + 2, 1)) ||
        (rc = trip_add(M, r0 + 2, b + 1, 1)) || (rc = trip_add(M, r0 + 3, b + 3, 1)) ||
        (rc = trip_add(M, r0 + 3, b, -fmin(j->kappa, 1.0))) || (rc = trip_add(M, r0 + 3, b + 2, -fmin(j->kappa, 1.0))) ||
        (rc = trip_add(M, r0 + 4, b + 3, 1)) || (rc = trip_add(M, r0 + 4, b, -1)) || (rc = trip_add(M, r0 + 4, b + 2, -1)))
      return rc;
    int r1 = glp_add_rows(P, 2); /* L1a, L2 */
    glp_set_row_bnds(P, r1, GLP_UP, 0, 0);
    glp_set_row_bnds(P, r1 + 1, GLP_UP, 0, 0);
    if ((rc = trip_add(M, r1, b, 1)) || (rc = trip_add(M, r1, b + 1, -j->wmax)) || (rc = trip_add(M, r1 + 1, b + 3, 1)) ||
        (rc = trip_add(M, r1 + 1, b + 1, -j->wmax)) || (rc = trip_add(M, r1 + 1, cd, -j->wmax)))
      return rc;
  }
  return 0;
}

/* Job i's rows: its work (C1), then every slot's. */
static int mip_job_rows(mip_t *m, const shoal__ps_job_t *j, int i) {
  int row = glp_add_rows(m->P, 1), rc; /* C1 */
  glp_set_row_bnds(m->P, row, GLP_LO, j->work, 0);
  for (int t = 0; t < m->T; t++)
    for (int h = 0; h < m->H; h++)
      if ((rc = trip_add(&m->M, row, mip_cx(m, i, h, t) + 0, j->rho_in)) ||
          (rc = trip_add(&m->M, row, mip_cx(m, i, h, t) + 2, j->rho_ex)))
        return rc;
  for (int t = 0; t < m->T; t++)
    if ((rc = mip_slot_rows(m, j, i, t))) return rc;
  return 0;
}

/* P1: every machine's residual capacity per slot and resource, over all jobs. */
static int mip_capacity_rows(mip_t *m, const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs) {
  int rc;
  for (int t = 0; t < m->T; t++)
    for (int h = 0; h < m->H; h++)
      for (int r = 0; r < SHOAL_PS_NRES; r++) {
        int row = glp_add_rows(m->P, 1);
        glp_set_row_bnds(m->P, row, GLP_UP, 0, shoal__ps_res(c, t, h)[r]);
        for (int i = 0; i < m->n; i++) {
          int b = mip_cx(m, i, h, t);
          if ((rc = trip_add(&m->M, row, b, jobs[i].dw[r])) || (rc = trip_add(&m->M, row, b + 2, jobs[i].dw[r])) ||
              (rc = trip_add(&m->M, row, b + 3, jobs[i].dp[r])))
            return rc;
        }
      }
  return 0;
}

static int mip_solve(mip_t *m, double tm_lim_s) {
  glp_iocp ip;
  glp_init_iocp(&ip);
  ip.msg_lev = GLP_MSG_OFF;
  ip.presolve = GLP_ON;
  ip.tm_lim = (int)fmax(1, tm_lim_s * 1000);
  int ret = glp_intopt(m->P, &ip);
  if (ret == GLP_ENOPFS || (ret == 0 && glp_mip_status(m->P) == GLP_NOFEAS))
    return shoal__seterr(SHOAL_ERR_INFEASIBLE, "MIP: %d jobs do not fit in %d slots", m->n, m->T);
  if (ret || glp_mip_status(m->P) != GLP_OPT)
    return shoal__seterr(SHOAL_ERR_SOLVER, "MIP (%d jobs, %d machines, %d slots): glp_intopt: %s (status %d)", m->n, m->H,
                         m->T, ret ? glp_ret_name(ret) : "not optimal", glp_mip_status(m->P));
  return 0;
}

/* The optimal schedules of every job, from its arrival to T; none kept on an error. */
static int mip_schedules(const mip_t *m, const shoal__ps_job_t *jobs, shoal__ps_sched_t *sched) {
  int rc = 0;
  for (int i = 0; i < m->n; i++) {
    shoal__ps_sched_init(&sched[i], jobs[i].arrival);
    for (int t = jobs[i].arrival; t < m->T && !rc; t++) {
      shoal__ps_slot_t *sl = shoal__ps_sched_slot(&sched[i], t);
      if (!sl) rc = shoal__seterr(SHOAL_ERR_NOMEM, "MIP schedule");
      for (int h = 0; h < m->H && !rc; h++) {
        int b = mip_cx(m, i, h, t);
        int w = (int)lround(glp_mip_col_val(m->P, b) + glp_mip_col_val(m->P, b + 2)), q = (int)lround(glp_mip_col_val(m->P, b + 3));
        rc = shoal__ps_slot_add(sl, h, w, q);
      }
    }
    if (rc) {
      for (int k = 0; k <= i; k++) shoal__ps_sched_free(&sched[k]);
      return rc;
    }
  }
  return 0;
}

int shoal__ps_mip_opt(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                      double *total_flow, shoal__ps_sched_t *sched) {
  shoal__ps_glpk_quiet();
  mip_t m = {glp_create_prob(), {0}, n, c->H, T, 0};
  size_t nb = (size_t)n * c->H * T;
  int rc = 0;
  m.base_t = 1 + (int)(4 * nb);
  glp_set_obj_dir(m.P, GLP_MIN);
  glp_add_cols(m.P, (int)(4 * nb) + 2 * n * T);
  mip_columns(&m, jobs);
  for (int i = 0; i < n && !rc; i++) rc = mip_job_rows(&m, &jobs[i], i);
  if (!rc && !(rc = mip_capacity_rows(&m, c, jobs))) {
    glp_load_matrix(m.P, m.M.n, m.M.ia, m.M.ja, m.M.ar);
    if (!(rc = mip_solve(&m, tm_lim_s)) && !(rc = sched ? mip_schedules(&m, jobs, sched) : 0))
      *total_flow = glp_mip_obj_val(m.P);
  }
  trip_free(&m.M);
  glp_delete_prob(m.P);
  return rc;
}
