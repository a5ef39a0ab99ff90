/* The profile cache (SHOAL_TUNE_FILE): one line per host set,
 *   host set <TAB> 8 numbers [links H <H*H latencies> <H*H bandwidths>]
 * The host set is "name:ranks" per host, sorted; the link matrix is in that
 * sorted host order (the topology numbers hosts by their lowest world rank,
 * which changes from one job to the next). Older entries without the matrix,
 * or with 7 numbers (no op overhead), are read too. Rank 0 reads and writes;
 * written with a temporary file and rename, other keys kept (shoal__tune_store: what `shoal tune` and a
 * profile write). Unset, SHOAL_TUNE_FILE is $XDG_CACHE_HOME/shoal/tune or $HOME/.cache/shoal/tune; set
 * to "" no file is read or written. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"

typedef struct host_item {
  char name[96];
  int h;
} host_item_t;

static int cmp_item(const void *a, const void *b) {
  return strcmp(((const host_item_t *)a)->name, ((const host_item_t *)b)->name);
}

int shoal__tune_key(const shoal__world_t *w, char *out, size_t cap, int *sorted) {
  const shoal__topo_t *t = w->topo;
  host_item_t *items = calloc((size_t)t->nhosts, sizeof *items);
  out[0] = '\0';
  if (!items) return SHOAL_ERR_NOMEM;
  for (int h = 0; h < t->nhosts; h++) {
    int first = -1;
    for (int r = w->size - 1; r >= 0; r--)
      if (t->host_of[r] == h) first = r;
    snprintf(items[h].name, sizeof items[h].name, "%s:%d", w->peers[first].host, t->host_size[h]);
    items[h].h = h;
  }
  qsort(items, (size_t)t->nhosts, sizeof *items, cmp_item);
  size_t used = 0;
  for (int i = 0; i < t->nhosts; i++) {
    if (used < cap) used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "," : "", items[i].name);
    if (sorted) sorted[i] = items[i].h;
  }
  free(items);
  return 0;
}

int shoal__tune_cache_read(const char *path, const char *key, int nh, const int *sorted, double v[SHOAL__TUNE_NVALS],
                           double *lat, double *bw) {
  FILE *f;
  int frc = shoal__fopen_input(path, "SHOAL_TUNE_FILE", &f);
  if (frc == SHOAL_ERR_NOT_FOUND) return 0; /* nothing measured yet */
  if (frc) {
    SHOAL_WARN("TUNING", "%s: not used", shoal_last_error());
    return 0;
  }
  char *line = NULL;
  size_t cap = 0;
  int found = 0, lineno = 0;
  size_t kl = strlen(key);
  while (getline(&line, &cap, f) > 0) {
    lineno++;
    if (line[0] == '#' || strncmp(line, key, kl) || line[kl] != '\t') continue;
    double t[SHOAL__TUNE_NVALS];
    t[T_OP_O] = t[T_CMA_A] = t[T_CMA_B] = -1; /* older entries: 7 numbers (no op overhead), no cma */
    int used = 0;
    int got = sscanf(line + kl + 1, "%lg %lg %lg %lg %lg %lg %lg %lg%n", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5],
                     &t[6], &t[7], &used);
    if (got == 7) used = 0;
    if (got != 7 && got != 8) {
      SHOAL_WARN("TUNING", "%s:%d: malformed entry for %s ignored (expected 8 numbers)", path, lineno, key);
      continue;
    }
    int finite = 1; /* a measured time or rate: finite and not negative, or -1 (unknown: the file's header) */
    for (int i = 0; i < got; i++) finite &= isfinite(t[i]) && (t[i] >= 0 || t[i] == -1);
    if (!finite) {
      SHOAL_WARN("TUNING", "%s:%d: entry for %s ignored: a value is negative, infinite or NaN", path, lineno, key);
      continue;
    }
    memcpy(v, t, sizeof t);
    for (int i = 0; i < nh * nh; i++) lat[i] = bw[i] = -1;
    found = 1; /* the last entry wins */
    const char *p = line + kl + 1 + used;
    int h = 0, n;
    if (got == 8 && sscanf(p, " links %d%n", &h, &n) == 1) {
      if (h != nh) {
        SHOAL_WARN("TUNING", "%s:%d: link matrix of %d hosts for a set of %d ignored", path, lineno, h, nh);
        continue;
      }
      p += n;
      double *m = malloc(sizeof *m * 2 * (size_t)(nh * nh));
      int ok = m != NULL;
      for (int i = 0; ok && i < 2 * nh * nh; i++) ok = sscanf(p, " %lg%n", &m[i], &n) == 1 && (p += n) && isfinite(m[i]);
      if (!ok) {
        SHOAL_WARN("TUNING", "%s:%d: malformed link matrix for %s ignored", path, lineno, key);
      } else { /* sorted host order -> the topology's host indices */
        for (int i = 0; i < nh; i++)
          for (int j = 0; j < nh; j++) {
            lat[sorted[i] * nh + sorted[j]] = m[i * nh + j];
            bw[sorted[i] * nh + sorted[j]] = m[nh * nh + i * nh + j];
          }
      }
      free(m);
    }
    double ca, cb; /* the cma fit, last on the line */
    if (got == 8 && sscanf(p, " cma %lg %lg", &ca, &cb) == 2 && isfinite(ca) && isfinite(cb) && ca > 0 && cb > 0)
      v[T_CMA_A] = ca, v[T_CMA_B] = cb;
  }
  free(line);
  fclose(f);
  return found;
}

const char *shoal__tune_file(char *buf, size_t cap, int *is_default) {
  const char *set = shoal__config_raw("SHOAL_TUNE_FILE");
  if (is_default) *is_default = !set;
  if (set) return set; /* set to "": no file */
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = -1;
  if (xdg && xdg[0] == '/') n = snprintf(buf, cap, "%s/shoal/tune", xdg);
  else if (home && home[0] == '/') n = snprintf(buf, cap, "%s/.cache/shoal/tune", home);
  return n > 0 && (size_t)n < cap ? buf : "";
}

/* The default file's folders ($HOME/.cache/shoal): made on the first write. */
static void make_parents(const char *path) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return;
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(dir, 0700) && errno != EEXIST) return;
      *p = '/';
    }
}

int shoal__tune_cache_write(const char *path, const char *key, int nh, const int *sorted,
                            const double v[SHOAL__TUNE_NVALS], const double *lat, const double *bw) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  make_parents(path);
  FILE *out = fopen(tmp, "w");
  if (!out) return shoal__seterr(SHOAL_ERR_IO, "tuning profile (SHOAL_TUNE_FILE or --file) %s: cannot write %s: %s", path,
                                 tmp, strerror(errno));
  FILE *in = fopen(path, "r");
  char *line = NULL;
  size_t cap = 0, kl = strlen(key);
  fprintf(out, "# shoal tuning profile: host set <TAB> shm_alpha shm_beta net_alpha net_beta gamma coll_alpha "
               "coll_beta op_o (seconds, seconds/byte; -1 unknown) [links H, H*H one-way latencies (s), H*H "
               "bandwidths (bytes/s), hosts in the order of the host set] [cma cma_alpha cma_beta]\n");
  while (in && getline(&line, &cap, in) > 0) {
    if (line[0] == '#' || (!strncmp(line, key, kl) && line[kl] == '\t')) continue;
    fputs(line, out);
  }
  free(line);
  if (in) fclose(in);
  fprintf(out, "%s\t%.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g", key, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
  int have = 0;
  for (int i = 0; lat && bw && i < nh * nh; i++) have |= bw[i] > 0;
  if (have) {
    fprintf(out, " links %d", nh);
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < nh; i++)
        for (int j = 0; j < nh; j++) fprintf(out, " %.6g", (k ? bw : lat)[sorted[i] * nh + sorted[j]]);
  }
  /* last, so that a reader that knows only the links reads them and ignores it */
  if (v[T_CMA_A] > 0 && v[T_CMA_B] > 0) fprintf(out, " cma %.6g %.6g", v[T_CMA_A], v[T_CMA_B]);
  fputc('\n', out);
  int bad = ferror(out);
  if (fclose(out) || bad || rename(tmp, path)) {
    int e = errno;
    unlink(tmp);
    return shoal__seterr(SHOAL_ERR_IO, "tuning profile (SHOAL_TUNE_FILE or --file) %s: cannot write: %s", path,
                         strerror(e));
  }
  return 0;
}

int shoal__tune_store(shoal_comm_t *c) {
  shoal__tune_t *t = c->w->tune;
  char def[PATH_MAX];
  const char *file = shoal__tune_file(def, sizeof def, NULL);
  if (c->w->rank != 0 || !*file || !t) return 0;
  int *sorted = malloc((size_t)t->nh * sizeof *sorted);
  if (!sorted) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  shoal__tune_key(c->w, t->key, sizeof t->key, sorted);
  int rc = shoal__tune_cache_write(file, t->key, t->nh, sorted, t->v, t->lat, t->bw);
  free(sorted);
  if (!rc) SHOAL_INFO("TUNING", "profile of %s stored in %s", t->key, file);
  return rc;
}
