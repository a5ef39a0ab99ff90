/* Analytic alpha-beta speed model (docs/simulator.md, "Speed models").
 *
 * Unit of work: one local mini-batch on one worker ("worker-step"). A job
 * with W workers doing one synchronous iteration completes W units, so
 * rate = W / T_iter (units/s) and more workers go faster until communication
 * dominates. Trace durations are converted with the same unit (§2 of the spec).
 *
 * All-reduce (ring; Thakur et al.):
 *   T_ar(n) = 2(n-1)·alpha + 2·((n-1)/n)·m/B + ((n-1)/n)·m/R
 *   B = intra bandwidth on one machine; min(intra, NIC) across machines of one
 *   rack; across racks min(intra, NIC, uplink_k / x_k over the job's racks k),
 *   x_k = jobs with cross-rack traffic in rack k (spec §3.6; the engine keeps
 *   x_k; policies, which ask without it, see the static share NIC/oversub).
 *   T_iter = T_comp + T_ar (or max(T_comp, T_ar) with overlap = 1).
 * Parameter server (sharded; online-scheduling spec §2.1 with the PS-side
 * term of the Optimus form c·w/p):
 *   l = fewest PSs on any worker's machine, P PSs, W workers
 *   t_worker = 2m·[(l/P)/b_in + (1 - l/P)/b_ex]
 *   t_ps     = 2m·W·(1 - l/P)/(P·b_ex)          (each PS's NIC serves W shards)
 *   T_iter   = T_comp + max(t_worker, t_ps) + alpha_inter·(W + P)
 *   rate = W / T_iter (sync and async alike under this rule). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/speed.h"

#define REDUCE_GBPS 1000.0 /* GPU reduction throughput, Gb/s (gamma = 1/R) */

static const struct { const char *name; double params_m; double compute_s; double penalty; } zoo[] = {
    /* parameters (millions, fp32 gradients), compute per local batch on one V100 */
    {"resnet50", 25.6, 0.100, 0.9},   {"resnet18", 11.7, 0.035, 0.8},      {"vgg16", 138.4, 0.150, 0.7},
    {"bert-base", 110.0, 0.250, 0.8}, {"transformer", 65.0, 0.120, 0.8},   {"lstm-lm", 66.0, 0.080, 0.6},
    {"deepspeech2", 38.0, 0.200, 0.8}, {"cifar10-resnet", 0.27, 0.020, 0.9},
};

static double gbps_to_Bps(double g) { return g * 1e9 / 8; }

static double analytic_rate(const shoal_speed_t *s, const shoal_cluster_t *c, const shoal_job_t *j, const shoal_shape_t *sh) {
  if (sh->workers <= 0 || j->model < 0 || j->model >= s->nmodels) return 0;
  const shoal_model_t *md = &s->models[j->model];
  double m = md->grad_bytes, tc = md->compute_s, W = sh->workers;
  double nic = gbps_to_Bps(c->m[0].nic_gbps), intra = gbps_to_Bps(c->net.intra_gbps);
  double b_ex = nic;
  if (sh->racks > 1) {
    b_ex = sh->xrack_gbps > 0 ? gbps_to_Bps(sh->xrack_gbps) : nic / c->net.oversub;
    if (b_ex > nic) b_ex = nic;
  }
  double comm;
  if (j->arch == SHOAL_ARCH_PS) {
    if (sh->ps <= 0) return 0;
    double P = sh->ps, lf = sh->machines <= 1 ? 1.0 : (double)sh->min_local_ps / P;
    if (lf > 1) lf = 1;
    double t_worker = 2 * m * (lf / intra + (1 - lf) / b_ex);
    double t_ps = 2 * m * W * (1 - lf) / (P * b_ex);
    comm = (t_worker > t_ps ? t_worker : t_ps) + (sh->machines > 1 ? c->net.alpha_inter_s : c->net.alpha_intra_s) * (W + P);
  } else {
    if (sh->workers == 1) comm = 0;
    else {
      double B = sh->machines <= 1 ? intra : (intra < b_ex ? intra : b_ex);
      double alpha = sh->machines <= 1 ? c->net.alpha_intra_s : c->net.alpha_inter_s;
      double f = (W - 1) / W;
      comm = 2 * (W - 1) * alpha + 2 * f * m / B + f * m / gbps_to_Bps(REDUCE_GBPS);
    }
  }
  double t = s->overlap > 0 ? (tc > comm ? tc : comm) : tc + comm;
  return W / t;
}

static void analytic_destroy(shoal_speed_t *s) {
  free(s->models);
  free(s);
}

int shoal__speed_analytic_create(shoal_speed_t **out) {
  shoal_speed_t *s = calloc(1, sizeof *s);
  int n = (int)(sizeof zoo / sizeof zoo[0]);
  if (!s || !(s->models = calloc((size_t)n, sizeof *s->models))) {
    free(s);
    return shoal__seterr(SHOAL_ERR_NOMEM, "speed model: out of memory");
  }
  s->name = "analytic";
  s->nmodels = n;
  for (int i = 0; i < n; i++) {
    shoal_model_t *md = &s->models[i];
    snprintf(md->name, sizeof md->name, "%s", zoo[i].name);
    md->grad_bytes = zoo[i].params_m * 1e6 * 4;
    md->compute_s = zoo[i].compute_s;
    md->spread_penalty = zoo[i].penalty;
    md->min_gpus = 1;
    md->max_gpus = 1 << 20;
    md->table_row = -1;
  }
  s->rate = analytic_rate;
  s->destroy = analytic_destroy;
  *out = s;
  return 0;
}

void shoal__speed_destroy(shoal_speed_t *s) {
  if (s && s->destroy) s->destroy(s);
}

int shoal__speed_find_model(const shoal_speed_t *s, const char *name) {
  for (int i = 0; i < s->nmodels; i++)
    if (!strcmp(s->models[i].name, name)) return i;
  return -1;
}
