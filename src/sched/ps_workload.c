/* PS workloads (spec §7.2). */
#include "sched/ps_workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"

void shoal__ps_workload_defaults(shoal__ps_workload_params_t *p) {
  p->machines = 20;
  p->gpus = 8;
  p->cpus = 64;
  p->mem_gb = 256;
  p->nic_gbps = 50;
  p->njobs = 100;
  p->window = 40;
  p->locality = 10;
  p->dur_lo = 2;
  p->dur_hi = 10;
  p->seed = 1;
}

int shoal__ps_workload_cluster(const shoal__ps_workload_params_t *p, shoal__ps_cluster_t *c) {
  if (p->machines < 1 || p->gpus < 1)
    return shoal__seterr(SHOAL_ERR_INVALID, "workload: %d machines with %d GPUs", p->machines, p->gpus);
  double *cap = malloc(sizeof(double) * (size_t)p->machines * SHOAL_PS_NRES);
  if (!cap) return shoal__seterr(SHOAL_ERR_NOMEM, "workload cluster");
  for (int h = 0; h < p->machines; h++) {
    double *ch = cap + (size_t)h * SHOAL_PS_NRES;
    ch[0] = p->gpus;
    ch[1] = p->cpus;
    ch[2] = p->mem_gb;
    ch[3] = p->nic_gbps;
  }
  int rc = shoal__ps_cluster_init(c, p->machines, cap);
  free(cap);
  return rc;
}

static double unif(shoal_rng_t *g, double lo, double hi) { return lo + (hi - lo) * shoal_rng_uniform(g); }

/* Draw everything but size, work and arrival (OASiS ranges, §7.1-7.2). */
static void draw_job(shoal_rng_t *g, const shoal__ps_workload_params_t *p, shoal__ps_job_t *j) {
  double bw = unif(g, 0.5, 5), bps = unif(g, 5, 20);
  j->dw[0] = 1;
  j->dw[1] = floor(unif(g, 1, 10));
  j->dw[2] = floor(unif(g, 2, 32));
  j->dw[3] = bw;
  j->dp[0] = 0;
  j->dp[1] = floor(unif(g, 1, 10));
  j->dp[2] = floor(unif(g, 2, 32));
  j->dp[3] = bps;
  j->kappa = fmin(1.0, bw / bps);
  j->rho_ex = unif(g, 20, 100); /* Delta / tau_ex, [S]'s tau in [0.01, 0.05] slots */
  double cf = unif(g, 0.3, 0.9); /* communication share of tau_ex */
  j->rho_in = j->rho_ex / (1 - cf + cf / p->locality);
}

int shoal__ps_workload_synth(const shoal__ps_workload_params_t *p, shoal__ps_job_t **jobs) {
  if (p->njobs < 1 || p->window < 1 || !(p->locality >= 1) || p->dur_lo < 1 || p->dur_hi < p->dur_lo)
    return shoal__seterr(SHOAL_ERR_INVALID, "workload: %d jobs, window %d, locality %g, durations %d..%d", p->njobs,
                         p->window, p->locality, p->dur_lo, p->dur_hi);
  shoal__ps_job_t *J = calloc((size_t)p->njobs, sizeof *J);
  if (!J) return shoal__seterr(SHOAL_ERR_NOMEM, "workload: %d jobs", p->njobs);
  shoal_rng_t g;
  shoal_rng_seed2(&g, p->seed, 0x5053);
  static const int sizes[] = {1, 2, 4, 8, 16};
  static const double psz[] = {0.25, 0.2, 0.25, 0.2, 0.1};
  double t = 0, gap = (double)p->window / p->njobs;
  for (int i = 0; i < p->njobs; i++) {
    shoal__ps_job_t *j = &J[i];
    j->id = i;
    j->arrival = (int)floor(t);
    if (j->arrival >= p->window) j->arrival = p->window - 1;
    t += shoal_rng_exponential(&g, 1.0 / gap);
    double u = shoal_rng_uniform(&g), acc = 0;
    j->wmax = 16;
    for (int k = 0; k < 5; k++)
      if (u < (acc += psz[k])) {
        j->wmax = sizes[k];
        break;
      }
    if (j->wmax > 2 * p->gpus) j->wmax = 2 * p->gpus;
    draw_job(&g, p, j);
    int dur = p->dur_lo + (int)shoal_rng_below(&g, (uint64_t)(p->dur_hi - p->dur_lo + 1));
    j->work = dur * j->wmax * j->rho_ex * unif(&g, 0.8, 1.0);
  }
  *jobs = J;
  return 0;
}

int shoal__ps_workload_philly(const shoal__ps_workload_params_t *p, const char *csv, double slot_s,
                              shoal__ps_job_t **jobs) {
  FILE *f = fopen(csv, "r");
  if (!f) return shoal__seterr(SHOAL_ERR_IO, "%s: %s", csv, strerror(errno));
  /* reservoir-sample njobs rows (duration >= 60 s, Pollux filter) */
  int n = p->njobs, seen = 0, line = 0, rc = 0;
  double *dur = malloc(sizeof(double) * (size_t)n), *ts = malloc(sizeof(double) * (size_t)n);
  int *gp = malloc(sizeof(int) * (size_t)n);
  char buf[512];
  shoal_rng_t g;
  shoal_rng_seed2(&g, p->seed, 0x9417);
  if (!dur || !ts || !gp) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "philly sample");
    goto out;
  }
  while (fgets(buf, sizeof buf, f)) {
    line++;
    if (line == 1 || buf[strspn(buf, " \t\r\n")] == 0) continue; /* header, blank lines */
    int Y, M, D, hh, mm, ss, ng;
    double d, gt;
    if (sscanf(buf, "%d-%d-%d %d:%d:%d,%lf,%d,%lf", &Y, &M, &D, &hh, &mm, &ss, &d, &ng, &gt) != 9) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected 'YYYY-MM-DD HH:MM:SS,duration,num_gpus,gpu_time,...'", csv, line);
      goto out;
    }
    if (d < 60 || ng < 1 || gt >= 1000 * 3600.0) continue;
    /* days since 2017-01-01, good enough for ordering within the trace */
    static const int cum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    double tsec = (((Y - 2017) * 365 + cum[(M - 1) % 12] + D) * 24.0 + hh) * 3600 + mm * 60 + ss;
    int k = seen < n ? seen : (int)shoal_rng_below(&g, (uint64_t)seen + 1);
    seen++;
    if (k < n) dur[k] = d, gp[k] = ng, ts[k] = tsec;
  }
  if (seen < n) {
    rc = shoal__seterr(SHOAL_ERR_INVALID, "%s: only %d usable rows for %d jobs", csv, seen, n);
    goto out;
  }
  /* order by submission, arrivals compressed into the window */
  int *ord = malloc(sizeof(int) * (size_t)n);
  shoal__ps_job_t *J = calloc((size_t)n, sizeof *J);
  if (!ord || !J) {
    free(ord);
    free(J);
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "philly jobs");
    goto out;
  }
  for (int i = 0; i < n; i++) ord[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort, n is small */
    for (int k = i; k > 0 && ts[ord[k]] < ts[ord[k - 1]]; k--) {
      int x = ord[k];
      ord[k] = ord[k - 1];
      ord[k - 1] = x;
    }
  double t0 = ts[ord[0]], span = ts[ord[n - 1]] - t0;
  for (int i = 0; i < n; i++) {
    int k = ord[i];
    shoal__ps_job_t *j = &J[i];
    j->id = i;
    j->arrival = span > 0 ? (int)floor((ts[k] - t0) / span * (p->window - 1)) : 0;
    j->wmax = gp[k] > 2 * p->gpus ? 2 * p->gpus : gp[k];
    draw_job(&g, p, j);
    /* trace duration ran at num_gpus consolidated: work = slots * W * rho */
    double rho = j->wmax <= p->gpus ? j->rho_in : j->rho_ex;
    double slots = fmin(dur[k] / slot_s, (double)p->dur_hi * 3);
    j->work = fmax(slots, 0.05) * j->wmax * rho;
  }
  free(ord);
  *jobs = J;
out:
  fclose(f);
  free(dur);
  free(ts);
  free(gp);
  return rc;
}
