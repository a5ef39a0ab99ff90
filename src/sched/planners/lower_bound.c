/* Offline lower bounds on total flow time (spec §7.3): LB_pool with LB_solo
 * folded in, solved with GLPK's simplex; LB_srpt, a closed-form pooled bound
 * that scales (docs/scheduling.md). */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/planners/greedy.h"
#include "sched/planners/lp.h"
#include "sched/planners/lower_bound.h"

/* Standalone greedy end of every job on the empty cluster (exact, §5). */
static int solo_ends(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, int *esolo, double *solo) {
  shoal__ps_cluster_t empty;
  int rc = shoal__ps_cluster_init(&empty, c->H, c->cap);
  if (rc) return rc;
  double sum = 0;
  for (int i = 0; i < n && !rc; i++) {
    shoal__ps_sched_t S;
    if ((rc = shoal__ps_greedy(&empty, &jobs[i], jobs[i].arrival, T + 1, 16, &S))) break;
    esolo[i] = shoal__ps_sched_end(&S);
    sum += esolo[i] - jobs[i].arrival + 1;
    shoal__ps_sched_free(&S);
  }
  shoal__ps_cluster_free(&empty);
  if (!rc) *solo = sum;
  return rc;
}

int shoal__ps_lower_bound_solo(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double *lb_solo) {
  int *esolo = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!esolo) return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound");
  int rc = solo_ends(c, jobs, n, T, esolo, lb_solo);
  free(esolo);
  return rc;
}

/* LB_srpt: pool resource r over all machines (capacity C per slot) and
 * charge job i its least possible usage of r, V_i = Q_i/rho_in * (dw_r +
 * min(kappa,1) dp_r) (every worker-slot does at most rho_in work, and P >=
 * min(kappa,1) W). Any schedule, spread uniformly inside each slot, is a
 * preemptive schedule of these volumes on one machine of speed C with
 * completion C_i <= end_i + 1, so flow_i = end_i - a_i + 1 >= C_i - a_i; and
 * SRPT minimizes sum C_i on one machine with release dates and preemption
 * (1|r_j,pmtn|sum C_j). Hence LB_srpt = max_r sum_i (C_i^SRPT - a_i). */
int shoal__ps_lower_bound_srpt(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, double *lb) {
  int *ord = malloc(sizeof(int) * (size_t)(n ? n : 1)), *act = malloc(sizeof(int) * (size_t)(n ? n : 1));
  double *rem = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!ord || !act || !rem) {
    free(ord), free(act), free(rem);
    return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound");
  }
  /* arrival order (insertion sort on a copy would be O(n^2); n is small
   * here but keep it O(n log n) with a counting pass over arrival slots) */
  int amax = 0;
  for (int i = 0; i < n; i++) amax = jobs[i].arrival > amax ? jobs[i].arrival : amax;
  int *cnt = calloc((size_t)amax + 2, sizeof(int));
  if (!cnt) {
    free(ord), free(act), free(rem);
    return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound");
  }
  for (int i = 0; i < n; i++) cnt[jobs[i].arrival + 1]++;
  for (int a = 0; a <= amax; a++) cnt[a + 1] += cnt[a];
  for (int i = 0; i < n; i++) ord[cnt[jobs[i].arrival]++] = i;
  free(cnt);
  double best = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++) {
    double C = 0;
    for (int h = 0; h < c->H; h++) C += shoal__ps_cap(c, h)[r];
    if (!(C > 0)) continue;
    double sum = 0, tau = 0;
    int k = 0, na = 0;
    while (k < n || na > 0) {
      if (!na && tau < jobs[ord[k]].arrival) tau = jobs[ord[k]].arrival;
      while (k < n && jobs[ord[k]].arrival <= tau + 1e-12) {
        const shoal__ps_job_t *j = &jobs[ord[k]];
        double kap = j->kappa > 0 ? fmin(j->kappa, 1) : 0;
        rem[ord[k]] = j->work / j->rho_in * (j->dw[r] + kap * j->dp[r]);
        act[na++] = ord[k++];
      }
      int b = 0;
      for (int q = 1; q < na; q++)
        if (rem[act[q]] < rem[act[b]]) b = q;
      int i = act[b];
      double next = k < n ? jobs[ord[k]].arrival : INFINITY, fin = tau + rem[i] / C;
      if (fin <= next) {
        tau = fin;
        sum += tau - jobs[i].arrival;
        act[b] = act[--na];
      } else {
        rem[i] -= (next - tau) * C;
        tau = next;
      }
    }
    if (sum > best) best = sum;
  }
  free(ord), free(act), free(rem);
  *lb = best;
  return 0;
}

/* The pool LP's matrix in GLPK's 1-based triplets. */
typedef struct {
  int *ia, *ja;
  double *ar;
  int nz;
  size_t cap;
} lb_matrix_t;

static void lb_add(lb_matrix_t *m, int i, int j, double v) {
  m->nz++;
  m->ia[m->nz] = i;
  m->ja[m->nz] = j;
  m->ar[m->nz] = v;
}

/* Room for the next slot's entries (at most 8). */
static int lb_room(lb_matrix_t *m) {
  if (m->nz + 8 < (int)m->cap) return 0;
  m->cap *= 2;
  int *ia2 = realloc(m->ia, sizeof(int) * m->cap), *ja2 = realloc(m->ja, sizeof(int) * m->cap);
  double *ar2 = realloc(m->ar, sizeof(double) * m->cap);
  if (ia2) m->ia = ia2;
  if (ja2) m->ja = ja2;
  if (ar2) m->ar = ar2;
  if (!ia2 || !ja2 || !ar2) return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound LP");
  return 0;
}

/* Job j's columns from column base (per slot t in [a, T): n, cum, v) and rows:
 * its pooled usage in the capacity rows from rcap, cum_t - cum_{t-1} - rho/Q
 * n_t = 0, v_t + cum_{t-1} >= 1, and done by T. */
static int lb_job(glp_prob *P, const shoal__ps_job_t *j, int base, int T, int esolo, const double *tot, int rcap,
                  lb_matrix_t *m) {
  int a = j->arrival, rc;
  for (int t = a; t < T; t++) {
    int cn = base + 3 * (t - a), cc = cn + 1, cv = cn + 2;
    glp_set_col_bnds(P, cn, GLP_DB, 0, j->wmax);
    glp_set_col_bnds(P, cc, GLP_LO, 0, 0);
    if (t < esolo || t == a) glp_set_col_bnds(P, cv, GLP_FX, 1, 1);
    else glp_set_col_bnds(P, cv, GLP_DB, 0, 1);
    glp_set_obj_coef(P, cv, 1);
    for (int r = 0; r < SHOAL_PS_NRES; r++) {
      double u = j->dw[r] + fmin(j->kappa, 1.0) * j->dp[r];
      if (u > 0 && tot[r] > 0) lb_add(m, rcap + t * SHOAL_PS_NRES + r, cn, u);
    }
    int row = glp_add_rows(P, 1); /* cum_t - cum_{t-1} - rho/Q n_t = 0 */
    glp_set_row_bnds(P, row, GLP_FX, 0, 0);
    lb_add(m, row, cc, 1);
    lb_add(m, row, cn, -j->rho_in / j->work);
    if (t > a) {
      lb_add(m, row, cc - 3, -1);
      row = glp_add_rows(P, 1); /* v_t + cum_{t-1} >= 1 */
      glp_set_row_bnds(P, row, GLP_LO, 1, 0);
      lb_add(m, row, cv, 1);
      lb_add(m, row, cc - 3, 1);
    }
    if ((rc = lb_room(m))) return rc;
  }
  int row = glp_add_rows(P, 1); /* done by T */
  glp_set_row_bnds(P, row, GLP_LO, 1, 0);
  lb_add(m, row, base + 3 * (T - 1 - a) + 1, 1);
  return 0;
}

/* LB_pool: the LP over slots 0..T-1 with capacity pooled per resource, v = 1
 * before each job's standalone end esolo[i]; its optimum in *v. */
static int pool_lp(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                   const int *esolo, double *v) {
  int rc = 0;
  double tot[SHOAL_PS_NRES] = {0};
  for (int h = 0; h < c->H; h++)
    for (int r = 0; r < SHOAL_PS_NRES; r++) tot[r] += shoal__ps_cap(c, h)[r];
  shoal__ps_glpk_quiet();
  glp_prob *P = glp_create_prob();
  glp_set_obj_dir(P, GLP_MIN);
  /* columns: per job, per slot t in [a, T): n, cum, v */
  int *base = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int ncol = 0;
  for (int i = 0; i < n; i++) {
    if (base) base[i] = ncol + 1;
    if (jobs[i].arrival < T) ncol += 3 * (T - jobs[i].arrival);
  }
  lb_matrix_t m = {NULL, NULL, NULL, 0, (size_t)ncol * 3 + 16};
  m.ia = malloc(sizeof(int) * m.cap), m.ja = malloc(sizeof(int) * m.cap);
  m.ar = malloc(sizeof(double) * m.cap);
  if (!base || !m.ia || !m.ja || !m.ar) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "lower bound LP (%d columns)", ncol);
    goto out;
  }
  for (int i = 0; i < n; i++)
    if (jobs[i].arrival >= T) {
      rc = shoal__seterr(SHOAL_ERR_INVALID, "lower bound: job %d arrives at slot %d >= horizon %d", jobs[i].id, jobs[i].arrival, T);
      goto out;
    }
  glp_add_cols(P, ncol);
  int rcap = glp_add_rows(P, T * SHOAL_PS_NRES);
  for (int t = 0; t < T; t++)
    for (int r = 0; r < SHOAL_PS_NRES; r++) glp_set_row_bnds(P, rcap + t * SHOAL_PS_NRES + r, GLP_UP, 0, tot[r]);
  for (int i = 0; i < n; i++)
    if ((rc = lb_job(P, &jobs[i], base[i], T, esolo[i], tot, rcap, &m))) goto out;
  glp_load_matrix(P, m.nz, m.ia, m.ja, m.ar);
  glp_smcp sp;
  glp_init_smcp(&sp);
  sp.msg_lev = GLP_MSG_OFF;
  sp.presolve = GLP_ON;
  sp.meth = GLP_DUALP;
  sp.tm_lim = (int)fmax(1, tm_lim_s * 1000);
  int ret = glp_simplex(P, &sp);
  if (ret == GLP_ENOPFS) rc = shoal__seterr(SHOAL_ERR_INFEASIBLE, "lower bound LP: %d jobs cannot finish within %d slots", n, T);
  else if (ret) rc = shoal__seterr(SHOAL_ERR_SOLVER, "lower bound LP (%d jobs, %d slots): glp_simplex failed (code %d)", n, T, ret);
  else if (glp_get_status(P) != GLP_OPT) rc = shoal__seterr(SHOAL_ERR_SOLVER, "lower bound LP: status %d", glp_get_status(P));
  else *v = glp_get_obj_val(P);
out:
  glp_delete_prob(P);
  free(base);
  free(m.ia);
  free(m.ja);
  free(m.ar);
  return rc;
}

int shoal__ps_lower_bound(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                          double *lb, double *lb_solo) {
  int *esolo = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!esolo) return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound");
  double solo = 0, v = 0, srpt = 0;
  int rc = solo_ends(c, jobs, n, T, esolo, &solo);
  if (!rc && !(rc = pool_lp(c, jobs, n, T, tm_lim_s, esolo, &v)) && !(rc = shoal__ps_lower_bound_srpt(c, jobs, n, &srpt))) {
    *lb = fmax(v, fmax(solo, srpt));
    *lb_solo = solo;
  }
  free(esolo);
  return rc;
}
