/* The alpha-beta-gamma cost model that picks the allreduce algorithm and the
 * ring's pipeline chunk. Formulas (Thakur, Rabenseifner & Gropp 2005), with
 * p ranks, p' = 2^floor(lg p), S bytes, and docs/collectives.md for the rest:
 *   ring: 2(p-1)a + 2(p-1)/p S b + (p-1)/p S g
 *   rhd:  2 lg p' a + 2(p'-1)/p' S b + (p'-1)/p' S g   [+ fold: 2a + 2S b + S g]
 *   rd:   lg p' (a + S b + S g)                        [+ fold]
 * Defaults are rough figures for TCP over loopback on the project VM; a later
 * issue calibrates them (shoal tune). Override with SHOAL_ALPHA_US,
 * SHOAL_BETA_GBPS, SHOAL_GAMMA_GBPS; force with SHOAL_ALGO. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "comm/tune/tune.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define DEFAULT_ALPHA_US 20.0  /* one small message, syscalls both ends + wakeup */
#define DEFAULT_BETA_GBPS 2.0  /* one loopback TCP stream, copy-bound */
#define DEFAULT_GAMMA_GBPS 4.0 /* float32 sum reading two streams, writing one */
#define CHUNK_MIN (256u << 10) /* fewer, larger messages: each wait may cost a wakeup */
#define CHUNK_MAX (4u << 20)

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

static int pof2_floor(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

double shoal__cost_allreduce(shoal_algo_t algo, int p, double S, const shoal__cost_t *m) {
  if (p <= 1) return 0.0;
  double a = m->alpha_s, b = m->beta_s, g = m->gamma_s;
  int q = pof2_floor(p);
  double lg = log2((double)q);
  double fold = q == p ? 0.0 : 2 * a + 2 * S * b + S * g;
  switch (algo) {
  case SHOAL_ALGO_RING: return 2.0 * (p - 1) * a + 2.0 * (p - 1) / p * S * b + (double)(p - 1) / p * S * g;
  case SHOAL_ALGO_RHD: return 2 * lg * a + 2.0 * (q - 1) / q * S * b + (double)(q - 1) / q * S * g + fold;
  case SHOAL_ALGO_RD: return lg * (a + S * b + S * g) + fold;
  default: return INFINITY;
  }
}

shoal_algo_t shoal__cost_pick(int p, size_t bytes, const shoal__cost_t *m, double times[SHOAL_ALGO__COUNT]) {
  /* evaluation order = tie-break order: ring's pipelining overlaps the
   * reduction with the transfer, which the formula does not credit */
  static const shoal_algo_t order[] = {SHOAL_ALGO_RING, SHOAL_ALGO_RHD, SHOAL_ALGO_RD};
  shoal_algo_t best = SHOAL_ALGO_RING;
  double tbest = INFINITY;
  if (times) times[SHOAL_ALGO_AUTO] = 0;
  for (int i = 0; i < 3; i++) {
    double t = shoal__cost_allreduce(order[i], p, (double)bytes, m);
    if (times) times[order[i]] = t;
    if (t < tbest) tbest = t, best = order[i];
  }
  return best;
}

int shoal__ring_chunk_bytes(int p, size_t bytes, const shoal__cost_t *m, size_t *out) {
  long forced;
  int rc = shoal__config_long("SHOAL_CHUNK_BYTES", 0, 0, 1L << 30, &forced);
  if (rc) return rc;
  if (forced > 0) {
    *out = (size_t)forced;
    return 0;
  }
  /* pipeline of D = 2(p-1) stages moving one block of S/p bytes:
   * best chunk ~ sqrt(block * alpha / ((D - 1) * beta)) */
  double block = (double)bytes / (p > 0 ? p : 1), D = 2.0 * (p > 1 ? p - 1 : 1);
  double cb = D > 1 ? sqrt(block * m->alpha_s / ((D - 1) * m->beta_s)) : (double)CHUNK_MAX;
  if (cb < CHUNK_MIN) cb = CHUNK_MIN;
  if (cb > CHUNK_MAX) cb = CHUNK_MAX;
  *out = (size_t)cb;
  return 0;
}

int shoal__algo_env(shoal_algo_t *out) {
  const char *env = shoal__config_str("SHOAL_ALGO", "auto");
  shoal_algo_t forced = SHOAL_ALGO_AUTO;
  if (env && *env && shoal_algo_parse(env, &forced))
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_ALGO='%s': expected ring, rhd, rd, shm, hier or auto", env);
  *out = forced;
  return 0;
}

int shoal__allreduce_resolve(int p, size_t bytes, shoal_algo_t requested, shoal_algo_t forced, shoal_algo_t *out,
                             char *why, size_t why_cap) {
  if (requested != SHOAL_ALGO_AUTO) {
    snprintf(why, why_cap, "requested by the caller");
    *out = requested;
    return 0;
  }
  if (forced != SHOAL_ALGO_AUTO) {
    snprintf(why, why_cap, "forced by SHOAL_ALGO");
    *out = forced;
    return 0;
  }
  shoal__cost_t m;
  int rc = shoal__cost_params(&m);
  if (rc) return rc;
  double t[SHOAL_ALGO__COUNT];
  *out = shoal__cost_pick(p, bytes, &m, t);
  snprintf(why, why_cap, "cost model: ring %.1f us, rhd %.1f us, rd %.1f us", t[SHOAL_ALGO_RING] * 1e6,
           t[SHOAL_ALGO_RHD] * 1e6, t[SHOAL_ALGO_RD] * 1e6);
  return 0;
}

shoal_algo_t shoal_allreduce_choose(const shoal_comm_t *c, size_t bytes) {
  int p = c ? shoal__comm_size(c) : 1;
  shoal_algo_t a;
  char why[192];
  shoal_algo_t forced = SHOAL_ALGO_AUTO;
  if (c) forced = c->w->algo_env;
  else if (shoal__algo_env(&forced)) SHOAL_WARN("COLL", "%s; ignored", shoal_last_error());
  if (c && p > 1 && forced == SHOAL_ALGO_AUTO) { /* what shoal_allreduce runs: the fitted model's pick */
    double t[SHOAL_ALGO__COUNT];
    return shoal__tune_pick(c, bytes, t);
  }
  if (shoal__allreduce_resolve(p, bytes, SHOAL_ALGO_AUTO, forced, &a, why, sizeof why) == 0) return a;
  SHOAL_WARN("COLL", "%s; using the default cost model", shoal_last_error());
  shoal__cost_t m = {DEFAULT_ALPHA_US * 1e-6, 1.0 / (DEFAULT_BETA_GBPS * 1e9), 1.0 / (DEFAULT_GAMMA_GBPS * 1e9)};
  return shoal__cost_pick(p, bytes, &m, NULL);
}
