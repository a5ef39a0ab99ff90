/* The link model read by the collectives' chooser (model.h): the profile's
 * values where measured or cached, else built-in defaults. */
#include "comm/coll/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/config.h"

/* TCP over loopback on the project VM, until a profile calibrates them. */
#define DEFAULT_ALPHA_US 20.0  /* one small message, syscalls both ends + wakeup */
#define DEFAULT_BETA_GBPS 2.0  /* one loopback TCP stream, copy-bound */
#define DEFAULT_GAMMA_GBPS 4.0 /* float32 sum reading two streams, writing one */
/* Link classes never measured: `shoal tune` on the project's reference VM
 * (2 cores, 2 ranks bound to cores, 2026-11-23); a profile or a cache entry
 * replaces them. */
#define DEF_SHM_ALPHA 0.25e-6
#define DEF_SHM_BETA (1.0 / 6.5e9)
#define DEF_COLL_ALPHA 0.35e-6
#define DEF_COLL_BETA (1.0 / 16e9)
#define DEF_OP_O 0.6e-6 /* per collective on the point-to-point path */

static const char *const source_names[] = {"built-in defaults", "measured", "cache"};

void shoal__cost_defaults(shoal__cost_t *out) {
  *out = (shoal__cost_t){DEFAULT_ALPHA_US * 1e-6, 1.0 / (DEFAULT_BETA_GBPS * 1e9), 1.0 / (DEFAULT_GAMMA_GBPS * 1e9)};
}

int shoal__cost_params(shoal__cost_t *out) {
  double a, b, g;
  int rc;
  if ((rc = shoal__config_double("SHOAL_ALPHA_US", DEFAULT_ALPHA_US, 0.0, 1e7, &a))) return rc;
  if ((rc = shoal__config_double("SHOAL_BETA_GBPS", DEFAULT_BETA_GBPS, 1e-6, 1e6, &b))) return rc;
  if ((rc = shoal__config_double("SHOAL_GAMMA_GBPS", DEFAULT_GAMMA_GBPS, 1e-6, 1e6, &g))) return rc;
  out->alpha_s = a * 1e-6;
  out->beta_s = 1.0 / (b * 1e9);
  out->gamma_s = 1.0 / (g * 1e9);
  return 0;
}

static double val_or(const shoal__tune_t *t, int i, double def) { return t && t->v[i] > 0 ? t->v[i] : def; }

void shoal__tune_class(const shoal__world_t *w, int shm, shoal__cost_t *out) {
  const shoal__tune_t *t = w ? w->tune : NULL;
  shoal__cost_t net;
  shoal__cost_defaults(&net);
  if (t) net = t->env_net;
  double g = val_or(t, T_GAMMA, net.gamma_s);
  if (shm)
    *out = (shoal__cost_t){val_or(t, T_SHM_A, DEF_SHM_ALPHA), val_or(t, T_SHM_B, DEF_SHM_BETA), g};
  else
    *out = (shoal__cost_t){val_or(t, T_NET_A, net.alpha_s), val_or(t, T_NET_B, net.beta_s), g};
}

double shoal__tune_shm_allreduce_time(const shoal__world_t *w, double bytes) {
  const shoal__tune_t *t = w ? w->tune : NULL;
  return val_or(t, T_COLL_A, DEF_COLL_ALPHA) + bytes * val_or(t, T_COLL_B, DEF_COLL_BETA);
}

double shoal__tune_cma_allreduce_time(const shoal__world_t *w, double bytes) {
  const shoal__tune_t *t = w ? w->tune : NULL;
  /* no default: how it compares with the shm algorithm depends on the ranks per core and the size (faster
   * from a few KiB at 2 ranks a core each, slower at 4 on 2 cores on the reference VM), so only a fit of
   * this host group's own times may pick it */
  if (!t || t->v[T_CMA_A] <= 0 || t->v[T_CMA_B] <= 0) return INFINITY;
  return t->v[T_CMA_A] + bytes * t->v[T_CMA_B];
}

double shoal__tune_op_overhead(const shoal__world_t *w) {
  const shoal__tune_t *t = w ? w->tune : NULL;
  return t && t->v[T_OP_O] >= 0 ? t->v[T_OP_O] : DEF_OP_O;
}

const char *shoal__tune_source(const shoal__world_t *w) {
  return w && w->tune ? source_names[w->tune->source] : "-";
}

void shoal__tune_changed(shoal__world_t *w) {
  if (w && w->tune) memset(w->tune->picks, 0, sizeof w->tune->picks);
}

void shoal__tune_link(const shoal__world_t *w, int a, int b, double *alpha, double *beta) {
  const shoal__topo_t *tp = w->topo;
  int ha = tp->host_of[a], hb = tp->host_of[b];
  shoal__cost_t k;
  if (ha == hb) {
    shoal__tune_class(w, w->shm_on, &k);
    *alpha = k.alpha_s, *beta = k.beta_s;
    return;
  }
  shoal__tune_class(w, 0, &k);
  const shoal__tune_t *t = w->tune;
  int i = ha * (t ? t->nh : 0) + hb;
  *alpha = t && t->lat && ha < t->nh && hb < t->nh && t->lat[i] > 0 ? t->lat[i] : k.alpha_s;
  *beta = t && t->bw && ha < t->nh && hb < t->nh && t->bw[i] > 0 ? 1.0 / t->bw[i] : k.beta_s;
}

void shoal__tune_host_caps(const shoal__world_t *w, int h, double *out_bw, double *in_bw) {
  shoal__cost_t k;
  shoal__tune_class(w, 0, &k);
  const shoal__tune_t *t = w->tune;
  double o = -1, in = -1;
  for (int j = 0; t && t->bw && h < t->nh && j < t->nh; j++) {
    if (j == h) continue;
    if (t->bw[h * t->nh + j] > o) o = t->bw[h * t->nh + j];
    if (t->bw[j * t->nh + h] > in) in = t->bw[j * t->nh + h];
  }
  *out_bw = o > 0 ? o : 1.0 / k.beta_s;
  *in_bw = in > 0 ? in : 1.0 / k.beta_s;
}

double shoal__tune_uplink_cap(const shoal__world_t *w, int r) {
  const shoal__tune_t *t = w->tune;
  if (t && t->uplink_bps > 0) return t->uplink_bps;
  const shoal__topo_t *tp = w->topo;
  double best = 0;
  for (int h = 0; h < tp->nhosts; h++) {
    if (tp->rack_of[h] != r) continue;
    double o, in;
    shoal__tune_host_caps(w, h, &o, &in);
    if ((o < in ? o : in) > best) best = o < in ? o : in;
  }
  return best;
}
