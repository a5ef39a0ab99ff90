/* The fitted cost model: cache file, per-size choice of the allreduce
 * algorithm, the dispatcher hooked into shoal_allreduce_algo, and the
 * explanation printed by `shoal tune` / `shoal bench --explain`. */
#include "comm/tune/tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

/* Built-in defaults for link classes never measured: `shoal tune` on the
 * project's reference VM (2 cores, 2 ranks bound to cores, 2026-11-23);
 * a profile or a cache entry replaces them. */
#define DEF_SHM_ALPHA 0.25e-6
#define DEF_SHM_BETA (1.0 / 6.5e9)
#define DEF_COLL_ALPHA 0.35e-6
#define DEF_COLL_BETA (1.0 / 16e9)
#define DEF_OP_O 0.6e-6 /* per collective on the point-to-point path */
#define HIER_INTRA_FACTOR 1.5 /* shm reduce + bcast vs one shm allreduce: one more copy and sync [R] */

static const char *const source_names[] = {"built-in defaults", "measured", "cache"};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void make_key(const shoal__world_t *w, const shoal__shm_t *s, char *out, size_t cap) {
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
  shoal__shm_t *s = c->w->shm;
  const char *file = shoal__config_str("SHOAL_TUNE_FILE", "");
  if (c->w->rank != 0 || !file || !*file || !s->tune) return 0;
  int rc = write_cache(file, s->tune->key, s->tune->v);
  if (!rc) SHOAL_INFO("TUNING", "profile of %s stored in %s", s->tune->key, file);
  return rc;
}

static void log_params(const shoal__tune_t *t) {
  SHOAL_DEBUG("TUNING", "profile (%s) of %s: shm alpha %.2f us beta %.2f GB/s; net alpha %.2f us beta %.2f GB/s; "
              "gamma %.2f GB/s; shm allreduce %.2f us + S / %.2f GB/s; op overhead %.2f us", source_names[t->source],
              t->key,
              t->v[T_SHM_A] * 1e6, t->v[T_SHM_B] > 0 ? 1e-9 / t->v[T_SHM_B] : -1, t->v[T_NET_A] * 1e6,
              t->v[T_NET_B] > 0 ? 1e-9 / t->v[T_NET_B] : -1, t->v[T_GAMMA] > 0 ? 1e-9 / t->v[T_GAMMA] : -1,
              t->v[T_COLL_A] * 1e6, t->v[T_COLL_B] > 0 ? 1e-9 / t->v[T_COLL_B] : -1, t->v[T_OP_O] * 1e6);
}

int shoal__tune_init(shoal_comm_t *c) {
  shoal__world_t *w = c->w;
  shoal__shm_t *s = w->shm;
  const char *mode = shoal__config_str("SHOAL_TUNE", "cache");
  if (strcmp(mode, "off") && strcmp(mode, "cache") && strcmp(mode, "init") && strcmp(mode, "force"))
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TUNE='%s': expected off, cache, init or force", mode);
  shoal__tune_t *t = calloc(1, sizeof *t);
  if (!t) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) t->v[i] = -1;
  make_key(w, s, t->key, sizeof t->key);
  s->tune = t;
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
      log_params(t);
      return 0;
    }
    if (!strcmp(mode, "cache")) return 0;
  }
  return shoal__tune_profile(c, 1);
}

void shoal__tune_free(shoal__shm_t *s) {
  free(s->tune);
  s->tune = NULL;
}

static double val_or(const shoal__tune_t *t, int i, double def) { return t && t->v[i] > 0 ? t->v[i] : def; }

void shoal__tune_cost(const shoal_comm_t *c, int shm, shoal__cost_t *out) {
  const shoal__tune_t *t = c->w->shm ? c->w->shm->tune : NULL;
  shoal__cost_t net = {20e-6, 1.0 / 2e9, 1.0 / 4e9};
  if (t) net = t->env_net;
  double g = val_or(t, T_GAMMA, net.gamma_s);
  if (shm)
    *out = (shoal__cost_t){val_or(t, T_SHM_A, DEF_SHM_ALPHA), val_or(t, T_SHM_B, DEF_SHM_BETA), g};
  else
    *out = (shoal__cost_t){val_or(t, T_NET_A, net.alpha_s), val_or(t, T_NET_B, net.beta_s), g};
}

static double coll_time(const shoal__tune_t *t, double bytes) {
  return val_or(t, T_COLL_A, DEF_COLL_ALPHA) + bytes * val_or(t, T_COLL_B, DEF_COLL_BETA);
}

shoal_algo_t shoal__tune_pick(const shoal_comm_t *c, size_t bytes, double t[SHOAL_ALGO__COUNT]) {
  shoal__shm_t *s = c->w->shm;
  int p = c->size, nh = 1, ok = s && shoal__shm_layout_ok(c, &nh);
  for (int a = 0; a < SHOAL_ALGO__COUNT; a++) t[a] = INFINITY;
  int one_host_shm = ok && nh == 1 && s->use_shm && p > 1;
  shoal__cost_t flat, shm, net;
  shoal__tune_cost(c, 1, &shm);
  shoal__tune_cost(c, 0, &net);
  if (one_host_shm) {
    flat = shm;
  } else if (nh > 1 && s && s->use_shm) { /* the slowest link class bounds a flat ring */
    flat = net;
    if (shm.alpha_s > flat.alpha_s) flat.alpha_s = shm.alpha_s;
    if (shm.beta_s > flat.beta_s) flat.beta_s = shm.beta_s;
  } else {
    flat = net;
  }
  t[SHOAL_ALGO_RING] = shoal__cost_allreduce(SHOAL_ALGO_RING, p, (double)bytes, &flat);
  t[SHOAL_ALGO_RHD] = shoal__cost_allreduce(SHOAL_ALGO_RHD, p, (double)bytes, &flat);
  t[SHOAL_ALGO_RD] = shoal__cost_allreduce(SHOAL_ALGO_RD, p, (double)bytes, &flat);
  const shoal__tune_t *tn = s ? s->tune : NULL;
  double o = tn && tn->v[T_OP_O] >= 0 ? tn->v[T_OP_O] : DEF_OP_O;
  t[SHOAL_ALGO_RING] += o, t[SHOAL_ALGO_RHD] += o, t[SHOAL_ALGO_RD] += o;
  if (one_host_shm) t[SHOAL_ALGO_SHM] = coll_time(tn, (double)bytes);
  if (ok && nh > 1) {
    int maxq = 1;
    for (int i = 0; i < c->size; i++) {
      int q = 0;
      for (int j = 0; j < c->size; j++) q += s->host_of[c->wranks[j]] == s->host_of[c->wranks[i]];
      if (q > maxq) maxq = q;
    }
    double inter[SHOAL_ALGO__COUNT];
    shoal__cost_pick(nh, bytes, &net, inter);
    double best = fmin(inter[SHOAL_ALGO_RING], fmin(inter[SHOAL_ALGO_RHD], inter[SHOAL_ALGO_RD]));
    t[SHOAL_ALGO_HIER] = best + (maxq > 1 ? HIER_INTRA_FACTOR * coll_time(tn, (double)bytes) : 0);
  }
  static const shoal_algo_t order[] = {SHOAL_ALGO_SHM, SHOAL_ALGO_HIER, SHOAL_ALGO_RING, SHOAL_ALGO_RHD,
                                       SHOAL_ALGO_RD};
  shoal_algo_t best = SHOAL_ALGO_RING;
  double tb = INFINITY;
  for (int i = 0; i < 5; i++)
    if (t[order[i]] < tb) tb = t[order[i]], best = order[i];
  return best;
}

int shoal__tune_allreduce(shoal_comm_t *c, const void *src, void *dst, size_t count, shoal_dtype_t dtype,
                          shoal_redop_t redop, shoal_algo_t algo, int inplace, int *handled,
                          shoal_algo_t *flat_pick) {
  *flat_pick = SHOAL_ALGO_AUTO;
  *handled = 0;
  if (algo == SHOAL_ALGO_AUTO) {
    shoal_algo_t forced = c->w->algo_env; /* SHOAL_ALGO, read at the world's creation */
    if (forced != SHOAL_ALGO_AUTO && forced != SHOAL_ALGO_SHM && forced != SHOAL_ALGO_HIER) return 0;
    algo = forced;
  }
  if (algo != SHOAL_ALGO_AUTO && algo != SHOAL_ALGO_SHM && algo != SHOAL_ALGO_HIER) return 0;
  int p = c->size, nh = 1;
  shoal__shm_t *s = c->w->shm;
  size_t bytes = count * shoal_dtype_size(dtype);
  if (p == 1 && algo == SHOAL_ALGO_AUTO) return 0;
  *handled = 1;
  char why[256] = "";
  if (algo == SHOAL_ALGO_AUTO) {
    shoal_algo_t pick;
    shoal__tune_t *tn = s ? s->tune : NULL;
    if (tn && tn->last_valid && tn->last_comm == c->id && tn->last_bytes == bytes) {
      pick = tn->last_pick; /* the same size again (every training step): the model's answer has not changed */
    } else {
      double t[SHOAL_ALGO__COUNT];
      pick = shoal__tune_pick(c, bytes, t);
      SHOAL_DEBUG("TUNING", "allreduce %zu B on %d ranks -> %s (model, %s: ring %.1f rhd %.1f rd %.1f shm %.1f "
                  "hier %.1f us)", bytes, p, shoal_algo_name(pick), tn ? source_names[tn->source] : "-",
                  t[SHOAL_ALGO_RING] * 1e6, t[SHOAL_ALGO_RHD] * 1e6, t[SHOAL_ALGO_RD] * 1e6, t[SHOAL_ALGO_SHM] * 1e6,
                  t[SHOAL_ALGO_HIER] * 1e6);
      if (tn) tn->last_valid = 1, tn->last_comm = c->id, tn->last_bytes = bytes, tn->last_pick = pick;
    }
    if (pick != SHOAL_ALGO_SHM && pick != SHOAL_ALGO_HIER) { /* the caller runs ring/rhd/rd */
      *handled = 0;
      *flat_pick = pick;
      return 0;
    }
    algo = pick;
    snprintf(why, sizeof why, "fitted model");
  } else {
    int ok = p == 1 || (s && shoal__shm_layout_ok(c, &nh));
    if (!ok || (algo == SHOAL_ALGO_SHM && nh > 1))
      return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_UNSUPPORTED,
                           "allreduce %s: %s", shoal_algo_name(algo),
                           !ok ? "the communicator does not hold every rank of each host it touches, or shared "
                                 "memory is off (SHOAL_SHM=0); use ring, rhd or rd"
                               : "the ranks span several hosts; use hier"));
    snprintf(why, sizeof why, "requested");
  }
  shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .dtype = (uint8_t)dtype, .redop = (uint8_t)redop,
                    .algo = (uint8_t)algo, .root = -1, .tag = 0, .count = count};
  int rc = shoal__op_begin(c, &op);
  if (rc) return rc;
  SHOAL_INFO("COLL", "allreduce seq %u: %zu x %s %s (%zu B) on %d ranks%s -> %s (%s)", op.seq, count,
             shoal_dtype_name(dtype), shoal_redop_name(redop), bytes, p, inplace ? " in place" : "",
             shoal_algo_name(algo), why);
  if (p == 1 || count == 0) {
    if (!inplace && bytes) memcpy(dst, src, bytes);
  } else if (algo == SHOAL_ALGO_SHM) {
    rc = shoal__shm_allreduce(c, &op, src, dst, count, -1);
  } else {
    rc = shoal__hier_allreduce(c, &op, src, dst, count);
  }
  return shoal__op_end(c, &op, rc);
}

void shoal__tune_explain(shoal_comm_t *c, FILE *f) {
  shoal__shm_t *s = c->w->shm;
  const shoal__tune_t *t = s ? s->tune : NULL;
  int nh = 1, ok = s && shoal__shm_layout_ok(c, &nh);
  shoal__cost_t shm, net;
  shoal__tune_cost(c, 1, &shm);
  shoal__tune_cost(c, 0, &net);
  fprintf(f, "# tuning: %s; host set %s; %d rank(s) on %d host(s)%s\n", t ? source_names[t->source] : "none",
          t ? t->key : "?", c->size, nh, ok ? "" : " (layout: shm/hier not applicable)");
  fprintf(f, "# link shm : alpha %8.2f us  bandwidth %7.2f GB/s%s\n", shm.alpha_s * 1e6, 1e-9 / shm.beta_s,
          t && t->v[T_SHM_A] > 0 ? " (fitted)" : " (default)");
  fprintf(f, "# link net : alpha %8.2f us  bandwidth %7.2f GB/s%s\n", net.alpha_s * 1e6, 1e-9 / net.beta_s,
          t && t->v[T_NET_A] > 0 ? " (fitted)" : " (default or SHOAL_ALPHA_US/SHOAL_BETA_GBPS)");
  fprintf(f, "# reduction: gamma %.2f GB/s%s\n", 1e-9 / shm.gamma_s, t && t->v[T_GAMMA] > 0 ? " (measured)" : "");
  fprintf(f, "# shm allreduce fit: %.2f us + S / %.2f GB/s%s\n", val_or(t, T_COLL_A, DEF_COLL_ALPHA) * 1e6,
          1e-9 / val_or(t, T_COLL_B, DEF_COLL_BETA), t && t->v[T_COLL_A] > 0 ? " (fitted)" : " (default)");
  fprintf(f, "# op overhead (ring/rhd/rd, per collective): %.2f us%s\n",
          (t && t->v[T_OP_O] >= 0 ? t->v[T_OP_O] : DEF_OP_O) * 1e6, t && t->v[T_OP_O] >= 0 ? " (measured)" : " (default)");
  if (c->w->algo_env != SHOAL_ALGO_AUTO)
    fprintf(f, "# SHOAL_ALGO=%s forces the choice below\n", shoal_algo_name(c->w->algo_env));
  fprintf(f, "# %12s %10s %10s %10s %10s %10s  %s\n", "size(B)", "ring(us)", "rhd(us)", "rd(us)", "shm(us)",
          "hier(us)", "model pick");
  for (size_t b = 8; b <= (256u << 20); b *= 4) {
    double tt[SHOAL_ALGO__COUNT];
    shoal_algo_t pick = shoal__tune_pick(c, b, tt);
    fprintf(f, "# %12zu", b);
    static const shoal_algo_t cols[] = {SHOAL_ALGO_RING, SHOAL_ALGO_RHD, SHOAL_ALGO_RD, SHOAL_ALGO_SHM,
                                        SHOAL_ALGO_HIER};
    for (int i = 0; i < 5; i++) {
      if (isinf(tt[cols[i]])) fprintf(f, " %10s", "-");
      else fprintf(f, " %10.1f", tt[cols[i]] * 1e6);
    }
    fprintf(f, "  %s\n", shoal_algo_name(pick));
  }
}
