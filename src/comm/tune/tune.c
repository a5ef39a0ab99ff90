/* The tuning profile's life: the SHOAL_TUNE modes at world creation (the cache file's entry, cache.c, or
 * a profile, profile.c) and its end. */
#include "comm/tune/tune.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

static void log_params(const shoal__world_t *w, const shoal__tune_t *t) {
  SHOAL_DEBUG("TUNING", "profile (%s) of %s: shm alpha %.2f us beta %.2f GB/s; net alpha %.2f us beta %.2f GB/s; "
              "gamma %.2f GB/s; shm allreduce %.2f us + S / %.2f GB/s; cma allreduce %.2f us + S / %.2f GB/s; op overhead "
              "%.2f us", shoal__tune_source(w),
              t->key,
              t->v[T_SHM_A] * 1e6, t->v[T_SHM_B] > 0 ? 1e-9 / t->v[T_SHM_B] : -1, t->v[T_NET_A] * 1e6,
              t->v[T_NET_B] > 0 ? 1e-9 / t->v[T_NET_B] : -1, t->v[T_GAMMA] > 0 ? 1e-9 / t->v[T_GAMMA] : -1,
              t->v[T_COLL_A] * 1e6, t->v[T_COLL_B] > 0 ? 1e-9 / t->v[T_COLL_B] : -1, t->v[T_CMA_A] * 1e6,
              t->v[T_CMA_B] > 0 ? 1e-9 / t->v[T_CMA_B] : -1, t->v[T_OP_O] * 1e6);
}

/* Rank 0's file decides for everyone: [found, values, latencies, bandwidths], agreed by MAX. 1 found, 0 not,
 * or a negative status. */
static int read_cache(shoal_comm_t *c, const char *file, const int *sorted) {
  shoal__world_t *w = c->w;
  shoal__tune_t *t = w->tune;
  int nh = t->nh;
  size_t n = 1 + SHOAL__TUNE_NVALS + 2 * (size_t)(nh * nh);
  double *buf = malloc(n * sizeof *buf);
  if (!buf) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  for (size_t i = 0; i < n; i++) buf[i] = -1;
  double *v = buf + 1, *lat = v + SHOAL__TUNE_NVALS, *bw = lat + nh * nh;
  if (w->rank == 0 && *file && shoal__tune_cache_read(file, t->key, nh, sorted, v, lat, bw)) buf[0] = 1;
  int rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
  if (!rc && buf[0] > 0) {
    memcpy(t->v, v, sizeof t->v);
    memcpy(t->lat, lat, sizeof *lat * (size_t)(nh * nh));
    memcpy(t->bw, bw, sizeof *bw * (size_t)(nh * nh));
    t->links_gen++;
    t->source = 2;
    log_params(w, t);
  }
  int found = !rc && buf[0] > 0;
  free(buf);
  return rc ? rc : found;
}

/* The default across hosts: the link matrix alone (the shared-memory classes keep their built-in values),
 * stored for the next job on the same host set, and said once on rank 0's stderr, since it costs start-up
 * time the user did not ask for. */
static int auto_profile(shoal_comm_t *c, const char *file) {
  shoal__world_t *w = c->w;
  uint64_t t0 = shoal__now_ns();
  int rc = shoal__tune_probe_links(c);
  if (rc) return rc;
  w->tune->source = 1;
  if (*file && (rc = shoal__tune_store(c))) {
    SHOAL_WARN("TUNING", "%s: the profile is used but not kept", shoal_last_error());
    rc = 0;
  }
  if (w->rank == 0 && shoal__log_level_cur >= SHOAL_LOG_WARN)
    fprintf(stderr, "shoal: measured the links between the %d hosts of this job in %.2f s, once per host set (%s%s); "
            "SHOAL_TUNE=off skips it\n", w->topo->nhosts, (double)(shoal__now_ns() - t0) * 1e-9,
            *file ? "kept in " : "not kept: SHOAL_TUNE_FILE is empty", file);
  return 0;
}

int shoal__tune_init(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  const char *mode = shoal__config_str("SHOAL_TUNE", "auto");
  int m = -1;
  for (int i = 0; i < 5; i++)
    if (!strcmp(mode, (const char *[]){"off", "auto", "cache", "init", "force"}[i])) m = i;
  if (m < 0) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TUNE='%s': expected off, auto, cache, init or force", mode);
  enum { OFF, AUTO, CACHE, INIT, FORCE };
  shoal__tune_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  w->tune = t;
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) t->v[i] = -1;
  int nh = t->nh = w->topo->nhosts;
  t->profile_bytes = m == AUTO ? 512L << 10 : 4L << 20;
  t->profile_quick = m == AUTO;
  t->lat = malloc(sizeof *t->lat * (size_t)(nh * nh));
  t->bw = malloc(sizeof *t->bw * (size_t)(nh * nh));
  int *sorted = malloc(sizeof *sorted * (size_t)nh);
  if (!t->lat || !t->bw || !sorted) {
    free(sorted);
    return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  }
  for (int i = 0; i < nh * nh; i++) t->lat[i] = t->bw[i] = -1;
  shoal__tune_key(w, t->key, sizeof t->key, sorted);
  double up_gbps = 0;
  int rc = shoal__cost_params(&t->env_net), is_default = 0;
  if (!rc) rc = shoal__config_double("SHOAL_RACK_UPLINK_GBPS", 0, 0, 1e6, &up_gbps);
  t->uplink_bps = up_gbps * 1e9;
  char def[PATH_MAX];
  const char *file = shoal__tune_file(def, sizeof def, &is_default);
  if (!rc) rc = shoal__tune_watch_init(w);
  /* one host under auto: as fast as without a profile (the default file is for host sets) */
  if (rc || m == OFF || w->size == 1 || (m == AUTO && nh < 2 && is_default)) goto out;
  if (m != FORCE) {
    int found = *file ? read_cache(c, file, sorted) : 0;
    if (found < 0) rc = found;
    if (found || m == CACHE || (m == AUTO && nh < 2)) goto out;
  }
  if (m != AUTO) rc = shoal__tune_profile(c, 1);
  else if (w->algo_env == SHOAL_ALGO_AUTO) rc = auto_profile(c, file); /* SHOAL_ALGO set: nothing to choose */
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
