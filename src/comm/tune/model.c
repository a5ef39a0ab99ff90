/* The link model read by the collectives' chooser (model.h): the profile's
 * values where measured or cached, else built-in defaults. */
#include "comm/tune/model.h"

#include <stdio.h>

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

double shoal__tune_op_overhead(const shoal__world_t *w) {
  const shoal__tune_t *t = w ? w->tune : NULL;
  return t && t->v[T_OP_O] >= 0 ? t->v[T_OP_O] : DEF_OP_O;
}

const char *shoal__tune_source(const shoal__world_t *w) {
  return w && w->tune ? source_names[w->tune->source] : "-";
}

void shoal__tune_changed(shoal__world_t *w) {
  if (w && w->tune) w->tune->last_valid = 0;
}
