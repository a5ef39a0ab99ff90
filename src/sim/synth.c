/* Synthetic Philly-like workloads (docs/simulator.md "Synthetic generator").
 * Fitted to the Philly-derived trace (82,247 jobs; statistics computed from
 * ../shared/data/philly/philly.csv, see NOTICE.md):
 *  - GPU count: the trace's empirical mix (1: 76,627 ... 128: 3);
 *  - duration: the trace's empirical quantile function, separately for 1-GPU
 *    and multi-GPU jobs (multi-GPU jobs run ~10x longer), log-linear between
 *    knots: heavy-tailed (p99/p50 = 121 single, 197 multi);
 *  - tenant (VC): the 15 VCs' job shares;
 *  - arrivals: hyperexponential (H2, balanced means) gaps with the trace's
 *    coefficient of variation 15.1 (bursty submissions), or Poisson (cv 1,
 *    the Gavel-style steady state), mean gap set by the load knob:
 *    mean gap = (GPU-seconds of the drawn jobs / jobs) / (load x cluster
 *    GPUs), so the workload offers `load` over its arrival span (the
 *    distribution's mean, dominated by rare multi-week jobs, is not what a
 *    few thousand draws realize).
 * The trace's diurnal cycle (hourly rate 0.64x-2.09x of the mean) is not
 * modelled. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "sim/sim.h"

static const struct { int gpus; int count; } gpu_mix[] = {
    {1, 76627}, {2, 1818}, {4, 1870}, {8, 1643}, {12, 7}, {16, 199}, {24, 7}, {32, 67}, {64, 6}, {128, 3}};

#define NQ 18
static const double qk[NQ] = {0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1};
static const double dur_single[NQ] = {1.0,    30.0,    52.0,     62.0,     76.0,     215.0,    600.0,     1117.0,   1728.0,
                                      2464.2, 3754.0,  8512.0,   19137.0,  68251.7,  135399.3, 266914.1,  865708.7, 3256045.0};
static const double dur_multi[NQ] = {1.0,     7.0,      13.0,     17.0,     25.0,     110.0,     539.0,     4582.5,  18358.0,
                                     54492.3, 113122.0, 208414.5, 364276.5, 609351.0, 903853.0, 1211092.0, 2480087.4, 4628226.0};

static const struct { const char *vc; int count; } vc_mix[] = {
    {"6214e9", 41226}, {"11cb48", 16091}, {"6c71a0", 9953}, {"b436b2", 7423}, {"103959", 1934},
    {"ee9e8c", 1511},  {"0e4a51", 1435},  {"ed69ec", 1137}, {"7f04ca", 723},  {"2869ce", 422},
    {"e13805", 374},   {"23dbec", 8},     {"51b7ef", 4},    {"925e2b", 3},    {"795a4c", 3}};

#define GAP_CV 15.1

static double quantile_fn(const double *v, double u) {
  if (u <= 0) return v[0];
  if (u >= 1) return v[NQ - 1];
  int i = 1;
  while (i < NQ - 1 && qk[i] < u) i++;
  double f = (u - qk[i - 1]) / (qk[i] - qk[i - 1]);
  return exp(log(v[i - 1]) + f * (log(v[i]) - log(v[i - 1]))); /* log-linear */
}

/* exact mean of the sampler (log-linear segments integrate in closed form) */
static double mean_of(const double *v) {
  double m = 0;
  for (int i = 1; i < NQ; i++) {
    double a = v[i - 1], b = v[i], w = qk[i] - qk[i - 1];
    double seg = fabs(log(b) - log(a)) < 1e-12 ? a : (b - a) / (log(b) - log(a));
    m += w * seg;
  }
  return m;
}

static int pick(shoal_rng_t *r, const int *counts, int n, long total) {
  long u = (long)shoal_rng_below(r, (uint64_t)total);
  for (int i = 0; i < n; i++) {
    if (u < counts[i]) return i;
    u -= counts[i];
  }
  return n - 1;
}

int shoal__synth_generate(const shoal_workload_opts_t *o, shoal_workload_t *out) {
  if (o->synth_jobs < 1 || o->synth_jobs > 100000000)
    return shoal__seterr(SHOAL_ERR_INVALID, "--synthetic %ld: expected 1..100000000 jobs", o->synth_jobs);
  if (!(o->load > 0) || o->load > 100) return shoal__seterr(SHOAL_ERR_INVALID, "--load %g: expected (0, 100]", o->load);
  if (o->cluster_gpus < 1) return shoal__seterr(SHOAL_ERR_INVALID, "synthetic: cluster has no GPUs");
  int ng = (int)(sizeof gpu_mix / sizeof gpu_mix[0]), nv = (int)(sizeof vc_mix / sizeof vc_mix[0]);
  int gcount[16], vcount[16];
  long gtot = 0, vtot = 0;
  int maxg = o->max_gpus > 0 ? o->max_gpus : o->cluster_gpus;
  double mean_gs_num = 0;
  double m1 = mean_of(dur_single), mm = mean_of(dur_multi);
  for (int i = 0; i < ng; i++) {
    gcount[i] = gpu_mix[i].gpus <= maxg ? gpu_mix[i].count : 0; /* sizes larger than the cluster are not generated */
    gtot += gcount[i];
    mean_gs_num += (double)gcount[i] * gpu_mix[i].gpus * (gpu_mix[i].gpus == 1 ? m1 : mm);
  }
  for (int i = 0; i < nv; i++) {
    vcount[i] = vc_mix[i].count;
    vtot += vcount[i];
  }
  double mean_gpu_s = mean_gs_num / (double)gtot;
  double mean_gap = mean_gpu_s / (o->load * o->cluster_gpus);
  /* H2 with balanced means: p1 = (1 + sqrt((c^2-1)/(c^2+1)))/2, mean_i = mean/(2 p_i) */
  double c2 = GAP_CV * GAP_CV, p1 = 0.5 * (1 + sqrt((c2 - 1) / (c2 + 1)));
  double mean1 = mean_gap / (2 * p1), mean2 = mean_gap / (2 * (1 - p1));

  shoal_workload_t w;
  int rc = shoal__workload_alloc(&w, o->synth_jobs);
  if (rc) return rc;
  for (int i = 0; i < nv; i++)
    if (shoal__workload_vc(&w, vc_mix[i].vc) < 0) {
      shoal__workload_free(&w);
      return shoal__seterr(SHOAL_ERR_NOMEM, "synthetic: out of memory");
    }
  shoal_rng_t ra, rg, rd, rv;
  shoal_rng_seed2(&ra, o->seed, 11); /* one stream per purpose: changing one knob keeps the others */
  shoal_rng_seed2(&rg, o->seed, 12);
  shoal_rng_seed2(&rd, o->seed, 13);
  shoal_rng_seed2(&rv, o->seed, 14);
  /* sizes and durations first: the mean gap is scaled so that the drawn
   * jobs offer `load` over the expected arrival span (with this heavy a tail
   * the distribution's mean is far from what a few thousand draws realize);
   * the realized span varies with the gaps drawn */
  double gs = 0;
  for (long i = 0; i < w.njobs; i++) {
    shoal_job_t *j = &w.jobs[i];
    j->row = i + 1;
    j->gpus = gpu_mix[pick(&rg, gcount, ng, gtot)].gpus;
    j->min_workers = 1;
    j->max_workers = j->gpus;
    j->duration = quantile_fn(j->gpus == 1 ? dur_single : dur_multi, shoal_rng_uniform(&rd));
    j->vc = pick(&rv, vcount, nv, vtot);
    gs += j->gpus * j->duration;
  }
  if (w.njobs > 1) {
    mean_gap = gs / w.njobs / (o->load * o->cluster_gpus);
    mean1 = mean_gap / (2 * p1);
    mean2 = mean_gap / (2 * (1 - p1));
  }
  double t = 0;
  for (long i = 0; i < w.njobs; i++) {
    if (i > 0) {
      double m = o->poisson ? mean_gap : shoal_rng_uniform(&ra) < p1 ? mean1 : mean2;
      t += -m * log(1 - shoal_rng_uniform(&ra));
    }
    w.jobs[i].arrival = t;
  }
  (void)mean_gpu_s;
  shoal__workload_finalize(&w);
  snprintf(w.source, sizeof w.source,
           "synthetic Philly-like: %ld jobs, load %.3g of %d GPUs (mean gap %.1f s, %s), seed %llu", o->synth_jobs,
           o->load, o->cluster_gpus, mean_gap, o->poisson ? "Poisson" : "H2 cv 15.1", (unsigned long long)o->seed);
  *out = w;
  return 0;
}
