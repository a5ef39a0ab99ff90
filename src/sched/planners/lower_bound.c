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

int shoal__ps_lower_bound(const shoal__ps_cluster_t *c, const shoal__ps_job_t *jobs, int n, int T, double tm_lim_s,
                          double *lb, double *lb_solo) {
  int rc = 0;
  int *esolo = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!esolo) return shoal__seterr(SHOAL_ERR_NOMEM, "lower bound");
  double solo = 0;
  if ((rc = solo_ends(c, jobs, n, T, esolo, &solo))) {
    free(esolo);
    return rc;
  }
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
    base[i] = ncol + 1;
    if (jobs[i].arrival < T) ncol += 3 * (T - jobs[i].arrival);
  }
  size_t cap_nz = (size_t)ncol * 3 + 16;
  int *ia = malloc(sizeof(int) * cap_nz), *ja = malloc(sizeof(int) * cap_nz);
  double *ar = malloc(sizeof(double) * cap_nz);
  int nz = 0;
  if (!base || !ia || !ja || !ar) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "lower bound LP (%d columns)", ncol);
    goto out;
  }
  for (int i = 0; i < n; i++)
    if (jobs[i].arrival >= T) {
      rc = shoal__seterr(SHOAL_ERR_INVALID, "lower bound: job %d arrives at slot %d >= horizon %d", jobs[i].id, jobs[i].arrival, T);
      goto out;
    }
  glp_add_cols(P, ncol);
#define ADD(i_, j_, v_) (nz++, ia[nz] = (i_), ja[nz] = (j_), ar[nz] = (v_))
  int rcap = glp_add_rows(P, T * SHOAL_PS_NRES);
  for (int t = 0; t < T; t++)
    for (int r = 0; r < SHOAL_PS_NRES; r++) glp_set_row_bnds(P, rcap + t * SHOAL_PS_NRES + r, GLP_UP, 0, tot[r]);
  for (int i = 0; i < n; i++) {
    const shoal__ps_job_t *j = &jobs[i];
    int a = j->arrival;
    for (int t = a; t < T; t++) {
      int cn = base[i] + 3 * (t - a), cc = cn + 1, cv = cn + 2;
      glp_set_col_bnds(P, cn, GLP_DB, 0, j->wmax);
      glp_set_col_bnds(P, cc, GLP_LO, 0, 0);
      if (t < esolo[i] || t == a) glp_set_col_bnds(P, cv, GLP_FX, 1, 1);
      else glp_set_col_bnds(P, cv, GLP_DB, 0, 1);
      glp_set_obj_coef(P, cv, 1);
      for (int r = 0; r < SHOAL_PS_NRES; r++) {
        double u = j->dw[r] + fmin(j->kappa, 1.0) * j->dp[r];
        if (u > 0 && tot[r] > 0) ADD(rcap + t * SHOAL_PS_NRES + r, cn, u);
      }
      int row = glp_add_rows(P, 1); /* cum_t - cum_{t-1} - rho/Q n_t = 0 */
      glp_set_row_bnds(P, row, GLP_FX, 0, 0);
      ADD(row, cc, 1);
      ADD(row, cn, -j->rho_in / j->work);
      if (t > a) {
        ADD(row, cc - 3, -1);
        row = glp_add_rows(P, 1); /* v_t + cum_{t-1} >= 1 */
        glp_set_row_bnds(P, row, GLP_LO, 1, 0);
        ADD(row, cv, 1);
        ADD(row, cc - 3, 1);
      }
      if (nz + 8 >= (int)cap_nz) {
        cap_nz *= 2;
        int *ia2 = realloc(ia, sizeof(int) * cap_nz), *ja2 = realloc(ja, sizeof(int) * cap_nz);
        double *ar2 = realloc(ar, sizeof(double) * cap_nz);
        if (ia2) ia = ia2;
        if (ja2) ja = ja2;
        if (ar2) ar = ar2;
        if (!ia2 || !ja2 || !ar2) {
          rc = shoal__seterr(SHOAL_ERR_NOMEM, "lower bound LP");
          goto out;
        }
      }
    }
    int row = glp_add_rows(P, 1); /* done by T */
    glp_set_row_bnds(P, row, GLP_LO, 1, 0);
    ADD(row, base[i] + 3 * (T - 1 - a) + 1, 1);
  }
#undef ADD
  glp_load_matrix(P, nz, ia, ja, ar);
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
  else {
    double v = glp_get_obj_val(P), srpt = 0;
    if (!(rc = shoal__ps_lower_bound_srpt(c, jobs, n, &srpt))) {
      *lb = fmax(v, fmax(solo, srpt));
      *lb_solo = solo;
    }
  }
out:
  glp_delete_prob(P);
  free(base);
  free(ia);
  free(ja);
  free(ar);
  free(esolo);
  return rc;
}
