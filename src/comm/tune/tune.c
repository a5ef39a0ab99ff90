/* The tuning profile's life: the SHOAL_TUNE modes at world creation (the cache file's entry, cache.c, or
 * a profile, profile.c) and its end. */
#include "comm/tune/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

static void log_params(const shoal__world_t *w, const shoal__tune_t *t) {
  SHOAL_DEBUG("TUNING", "profile (%s) of %s: shm alpha %.2f us beta %.2f GB/s; net alpha %.2f us beta %.2f GB/s; "
              "gamma %.2f GB/s; shm allreduce %.2f us + S / %.2f GB/s; op overhead %.2f us", shoal__tune_source(w),
              t->key,
              t->v[T_SHM_A] * 1e6, t->v[T_SHM_B] > 0 ? 1e-9 / t->v[T_SHM_B] : -1, t->v[T_NET_A] * 1e6,
              t->v[T_NET_B] > 0 ? 1e-9 / t->v[T_NET_B] : -1, t->v[T_GAMMA] > 0 ? 1e-9 / t->v[T_GAMMA] : -1,
              t->v[T_COLL_A] * 1e6, t->v[T_COLL_B] > 0 ? 1e-9 / t->v[T_COLL_B] : -1, t->v[T_OP_O] * 1e6);
}

int shoal__tune_init(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  const char *mode = shoal__config_str("SHOAL_TUNE", "cache");
  if (strcmp(mode, "off") && strcmp(mode, "cache") && strcmp(mode, "init") && strcmp(mode, "force"))
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TUNE='%s': expected off, cache, init or force", mode);
  shoal__tune_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  w->tune = t;
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) t->v[i] = -1;
  int nh = t->nh = w->topo->nhosts;
  t->lat = malloc(sizeof *t->lat * (size_t)(nh * nh));
  t->bw = malloc(sizeof *t->bw * (size_t)(nh * nh));
  int *sorted = malloc(sizeof *sorted * (size_t)nh);
  if (!t->lat || !t->bw || !sorted) {
    free(sorted);
    return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  }
  for (int i = 0; i < nh * nh; i++) t->lat[i] = t->bw[i] = -1;
  shoal__tune_key(w, t->key, sizeof t->key, sorted);
  int rc = shoal__cost_params(&t->env_net);
  if (!rc) rc = shoal__tune_watch_init(w);
  if (rc || !strcmp(mode, "off") || w->size == 1) goto out;
  const char *file = shoal__config_str("SHOAL_TUNE_FILE", "");
  if (!strcmp(mode, "cache") && !(file && *file)) goto out; /* no cache: defaults */
  if (strcmp(mode, "force")) {
    /* rank 0's file decides for everyone: [found, values, latencies, bandwidths], agreed by MAX */
    size_t n = 1 + SHOAL__TUNE_NVALS + 2 * (size_t)(nh * nh);
    double *buf = malloc(n * sizeof *buf);
    if (!buf) {
      rc = shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
      goto out;
    }
    for (size_t i = 0; i < n; i++) buf[i] = -1;
    double *v = buf + 1, *lat = v + SHOAL__TUNE_NVALS, *bw = lat + nh * nh;
    if (w->rank == 0 && file && *file && shoal__tune_cache_read(file, t->key, nh, sorted, v, lat, bw)) buf[0] = 1;
    rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
    if (!rc && buf[0] > 0) {
      memcpy(t->v, v, sizeof t->v);
      memcpy(t->lat, lat, sizeof *lat * (size_t)(nh * nh));
      memcpy(t->bw, bw, sizeof *bw * (size_t)(nh * nh));
      t->links_gen++;
      t->source = 2;
      log_params(w, t);
    }
    int found = buf[0] > 0;
    free(buf);
    if (rc || found || !strcmp(mode, "cache")) goto out;
  }
  rc = shoal__tune_profile(c, 1);
out:
  free(sorted);
  return rc;
}

void shoal__tune_free(shoal__world_t *w) {
  if (!w->tune) return;
  shoal__tune_watch_free(w);
  free(w->tune->lat);
  free(w->tune->bw);
  free(w->tune);
  w->tune = NULL;
}
