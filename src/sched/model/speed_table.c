/* Table speed model from Gavel's measured throughputs (spec §3.2, §3.7).
 *
 * For each job type: steps/s alone ("null" entry) at scale factors 1, 2, 4, 8
 * GPUs, consolidated (key "<gpu>") and spread over machines (key
 * "<gpu>_unconsolidated"). rate(n, machines):
 *   curve = consolidated if machines == 1 else unconsolidated (clamped to
 *           <= consolidated at the same n when clamp_spread, the default)
 *   between measured sizes: linear interpolation in n;
 *   above the largest measured n_max: S(n_max)·(n/n_max)·e with
 *   e = min(1, S(n_max)/(2·S(n_max/2))), the last doubling efficiency;
 *   types measured only at 1 GPU do not speed up: S(n) = S(1).
 * Parameter servers are not in the table: a PS job runs at its workers'
 * rate (documented limitation). Rack crossing is not modelled (pen_rack = 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/json.h"
#include "sched/model/speed.h"

#define NSF 4
static const int sfs[NSF] = {1, 2, 4, 8};

typedef struct {
  double cons[NSF], spread[NSF]; /* 0 = not measured */
} table_row_t;

typedef struct {
  table_row_t *rows;
} table_impl_t;

/* rate on a curve at n workers */
static double curve_at(const double *v, double n) {
  int last = -1;
  for (int i = 0; i < NSF; i++)
    if (v[i] > 0) last = i;
  if (last < 0) return 0;
  if (last == 0) return v[0];
  if (n <= 1) return v[0] * n;
  for (int i = 0; i < last; i++) {
    if (n <= sfs[i + 1] && v[i] > 0 && v[i + 1] > 0) {
      double f = (n - sfs[i]) / (double)(sfs[i + 1] - sfs[i]);
      return v[i] + f * (v[i + 1] - v[i]);
    }
  }
  double smax = v[last], shalf = v[last - 1];
  double e = shalf > 0 ? smax / (2 * shalf) : 1;
  if (e > 1) e = 1;
  return smax * (n / sfs[last]) * e;
}

static double table_rate(const shoal_speed_t *s, const shoal_cluster_t *c, const shoal_job_t *j, const shoal_shape_t *sh) {
  (void)c;
  if (sh->workers <= 0 || j->model < 0 || j->model >= s->nmodels) return 0;
  if (j->arch == SHOAL_ARCH_PS && sh->ps <= 0) return 0;
  const table_impl_t *t = s->impl;
  const table_row_t *r = &t->rows[j->model];
  double n = sh->workers;
  double cons = curve_at(r->cons, n);
  if (sh->machines <= 1) return cons;
  double sp = curve_at(r->spread, n);
  if (sp <= 0) sp = cons * s->models[j->model].spread_penalty;
  if (s->clamp_spread && sp > cons) sp = cons;
  return sp;
}

static void table_destroy(shoal_speed_t *s) {
  table_impl_t *t = s->impl;
  if (t) free(t->rows);
  free(t);
  free(s->models);
  free(s);
}

/* "('ResNet-50 (batch size 64)', 8)" -> name, sf */
static int parse_key(const char *k, char *name, size_t cap, int *sf) {
  size_t l = strlen(k);
  if (l < 7 || k[0] != '(' || k[1] != '\'' || k[l - 1] != ')') return -1;
  const char *q = strrchr(k, '\'');
  if (!q || q <= k + 1 || q[1] != ',') return -1;
  size_t nl = (size_t)(q - (k + 2));
  if (nl == 0 || nl >= cap) return -1;
  memcpy(name, k + 2, nl);
  name[nl] = 0;
  char *e;
  long v = strtol(q + 2, &e, 10);
  if (*e != ')' || e[1]) return -1;
  *sf = (int)v;
  return 0;
}

static int load_curve(const char *path, const shoal_json_t *obj, const char *gpu, shoal_speed_t *s, table_impl_t *t,
                      int spread, int *cap) {
  for (int i = 0; i < obj->n; i++) {
    const shoal_json_t *e = obj->kids[i];
    char name[64];
    int sf = 0;
    if (parse_key(e->key, name, sizeof name, &sf))
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: key '%s' is not ('<job type>', <scale factor>)", path, e->line, gpu,
                           e->key);
    int si = -1;
    for (int k = 0; k < NSF; k++)
      if (sfs[k] == sf) si = k;
    if (si < 0) continue; /* other scale factors: not used */
    const shoal_json_t *alone = e->type == SHOAL_JSON_OBJ ? shoal__json_get(e, "null") : (e->type == SHOAL_JSON_NUM ? e : NULL);
    if (!alone || alone->type != SHOAL_JSON_NUM || !(alone->num >= 0) || !isfinite(alone->num))
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: %s: missing or bad \"null\" throughput", path, e->line, gpu, e->key);
    int mi = shoal__speed_find_model(s, name);
    if (mi < 0) {
      if (spread) continue; /* spread entry of a type without consolidated data: ignore */
      if (s->nmodels == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        shoal_model_t *m = realloc(s->models, (size_t)nc * sizeof *m);
        table_row_t *r = realloc(t->rows, (size_t)nc * sizeof *r);
        if (m) s->models = m;
        if (r) t->rows = r;
        if (!m || !r) return shoal__seterr(SHOAL_ERR_NOMEM, "table model: out of memory");
        *cap = nc;
      }
      mi = s->nmodels++;
      memset(&s->models[mi], 0, sizeof s->models[mi]);
      memset(&t->rows[mi], 0, sizeof t->rows[mi]);
      snprintf(s->models[mi].name, sizeof s->models[mi].name, "%s", name);
      s->models[mi].spread_penalty = 1;
      s->models[mi].table_row = mi;
      s->models[mi].min_gpus = 1 << 20;
    }
    (spread ? t->rows[mi].spread : t->rows[mi].cons)[si] = alone->num;
    if (!spread) {
      shoal_model_t *m = &s->models[mi];
      if (sf < m->min_gpus) m->min_gpus = sf;
      if (sf > m->max_gpus) m->max_gpus = sf;
    }
  }
  return 0;
}

int shoal__speed_table_create(const char *path, const char *gpu, int clamp_spread, shoal_speed_t **out) {
  shoal_json_t *root = NULL;
  int rc = shoal__json_parse_file(path, &root);
  if (rc) return rc;
  shoal_speed_t *s = calloc(1, sizeof *s);
  table_impl_t *t = calloc(1, sizeof *t);
  int cap = 0;
  if (!s || !t) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "table model: out of memory");
    goto fail;
  }
  s->impl = t;
  s->name = "table";
  s->rate = table_rate;
  s->destroy = table_destroy;
  s->clamp_spread = clamp_spread;
  const shoal_json_t *cons = shoal__json_get(root, gpu);
  if (!cons || cons->type != SHOAL_JSON_OBJ) {
    /* the GPU types this file has: its objects, but the _unconsolidated curves */
    char have[256] = "";
    size_t used = 0;
    for (int i = 0; root->type == SHOAL_JSON_OBJ && i < root->n && used < sizeof have - 1; i++) {
      const shoal_json_t *k = root->kids[i];
      if (k->type != SHOAL_JSON_OBJ || !k->key || strstr(k->key, "_unconsolidated")) continue;
      used += (size_t)snprintf(have + used, sizeof have - used, "%s%s", used ? ", " : "", k->key);
    }
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: no object \"%s\" (GPU types in this file: %s)", path, gpu,
                       used ? have : "none");
    goto fail;
  }
  if ((rc = load_curve(path, cons, gpu, s, t, 0, &cap))) goto fail;
  char key[64];
  snprintf(key, sizeof key, "%s_unconsolidated", gpu);
  const shoal_json_t *spread = shoal__json_get(root, key);
  if (spread && spread->type == SHOAL_JSON_OBJ && (rc = load_curve(path, spread, key, s, t, 1, &cap))) goto fail;
  if (s->nmodels == 0) {
    rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: \"%s\" lists no job type", path, gpu);
    goto fail;
  }
  for (int i = 0; i < s->nmodels; i++)
    if (t->rows[i].cons[0] <= 0) {
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s: %s: type '%s' has no 1-GPU throughput", path, gpu, s->models[i].name);
      goto fail;
    }
  shoal__json_free(root);
  *out = s;
  return 0;
fail:
  if (s) table_destroy(s);
  else free(t);
  shoal__json_free(root);
  return rc;
}
