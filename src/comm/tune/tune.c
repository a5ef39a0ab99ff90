/* The tuning profile's life: the cache file (SHOAL_TUNE_FILE, keyed by the
 * host set), the SHOAL_TUNE modes at world creation, and the explanation
 * printed by `shoal tune` / `shoal bench --explain`. */
#include "comm/tune/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void make_key(const shoal__world_t *w, char *out, size_t cap) {
  const shoal__topo_t *s = w->topo;
  char **items = calloc((size_t)s->nhosts, sizeof *items);
  out[0] = '\0';
  if (!items) return;
  for (int h = 0; h < s->nhosts; h++) {
    int first = -1, n = 0;
    for (int r = 0; r < w->size; r++)
      if (s->host_of[r] == h) n++, first = first < 0 ? r : first;
    items[h] = malloc(96);
    if (items[h]) snprintf(items[h], 96, "%s:%d", w->peers[first].host, n);
  }
  qsort(items, (size_t)s->nhosts, sizeof *items, cmp_str);
  size_t used = 0;
  for (int h = 0; h < s->nhosts; h++) {
    if (items[h] && used < cap) used += (size_t)snprintf(out + used, cap - used, "%s%s", h ? "," : "", items[h]);
    free(items[h]);
  }
  free(items);
}

static int read_cache(const char *path, const char *key, double v[SHOAL__TUNE_NVALS]) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int found = 0, lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *tab = strchr(line, '\t');
    if (line[0] == '#' || !tab) continue;
    *tab = '\0';
    if (strcmp(line, key)) continue;
    double t[SHOAL__TUNE_NVALS];
    t[T_OP_O] = -1; /* entries written before the op overhead was measured have 7 numbers */
    int got = sscanf(tab + 1, "%lg %lg %lg %lg %lg %lg %lg %lg", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                     &t[7]);
    if (got != 7 && got != 8) {
      SHOAL_WARN("TUNING", "%s:%d: malformed entry for %s ignored (expected 8 numbers)", path, lineno, key);
      continue;
    }
    memcpy(v, t, sizeof t);
    found = 1; /* the last entry wins */
  }
  fclose(f);
  return found;
}

static int write_cache(const char *path, const char *key, const double v[SHOAL__TUNE_NVALS]) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *out = fopen(tmp, "w");
  if (!out) return shoal__seterr(SHOAL_ERR_IO, "SHOAL_TUNE_FILE: cannot write %s", tmp);
  FILE *in = fopen(path, "r");
  char line[1024];
  fprintf(out, "# shoal tuning profile: host set <TAB> shm_alpha shm_beta net_alpha net_beta gamma coll_alpha "
               "coll_beta op_o (seconds, seconds/byte; -1 unknown)\n");
  while (in && fgets(line, sizeof line, in)) {
    size_t kl = strlen(key);
    if (line[0] == '#' || (!strncmp(line, key, kl) && line[kl] == '\t')) continue;
    fputs(line, out);
  }
  if (in) fclose(in);
  fprintf(out, "%s\t%.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g\n", key, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
          v[7]);
  int bad = ferror(out);
  if (fclose(out) || bad || rename(tmp, path)) {
    unlink(tmp);
    return shoal__seterr(SHOAL_ERR_IO, "SHOAL_TUNE_FILE: cannot write %s", path);
  }
  return 0;
}

int shoal__tune_store(shoal_comm_t *c) {
  shoal__tune_t *t = c->w->tune;
  const char *file = shoal__config_str("SHOAL_TUNE_FILE", "");
  if (c->w->rank != 0 || !file || !*file || !t) return 0;
  int rc = write_cache(file, t->key, t->v);
  if (!rc) SHOAL_INFO("TUNING", "profile of %s stored in %s", t->key, file);
  return rc;
}

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
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) t->v[i] = -1;
  make_key(w, t->key, sizeof t->key);
  w->tune = t;
  int prc = shoal__cost_params(&t->env_net);
  if (prc) return prc;
  if (!strcmp(mode, "off") || w->size == 1) return 0;
  const char *file = shoal__config_str("SHOAL_TUNE_FILE", "");
  if (strcmp(mode, "force") && !strcmp(mode, "cache") && !(file && *file)) return 0; /* no cache: defaults */
  if (strcmp(mode, "force")) {
    double buf[1 + SHOAL__TUNE_NVALS];
    for (int i = 0; i <= SHOAL__TUNE_NVALS; i++) buf[i] = -1;
    if (w->rank == 0 && file && *file && read_cache(file, t->key, buf + 1)) buf[0] = 1;
    /* rank 0's file decides for everyone */
    int rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, 1 + SHOAL__TUNE_NVALS, SHOAL_FLOAT64, SHOAL_MAX,
                                  SHOAL_ALGO_RD);
    if (rc) return rc;
    if (buf[0] > 0) {
      memcpy(t->v, buf + 1, sizeof t->v);
      t->source = 2;
      log_params(w, t);
      return 0;
    }
    if (!strcmp(mode, "cache")) return 0;
  }
  return shoal__tune_profile(c, 1);
}

void shoal__tune_free(shoal__world_t *w) {
  free(w->tune);
  w->tune = NULL;
}
