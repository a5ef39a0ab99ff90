/* The job-interference model (interference.h): reading its JSON file and the
 * pairwise terms, precomputed per level into a class x class table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "sched/model/json.h"
#include "sched/model/interference.h"

#define FORMAT "shoal-interference 1"

struct shoal_interference {
  int nclasses;
  char (*cls)[64];        /* [nclasses] names */
  int has[SHOAL_IL_COUNT];
  double *g[SHOAL_IL_COUNT]; /* [nclasses * nclasses]: g[L][a * n + b] */
  int nmodels;
  char (*model)[64];      /* [nmodels] job model names ... */
  int *model_cls;         /* ... and their classes */
  int default_cls;        /* -1: none */
  char origin[512];
  char source[512];
};

static const char *const level_names[SHOAL_IL_COUNT] = {"slot", "core", "socket", "nic", "uplink"};

const char *shoal__ilevel_name(int level) {
  return level >= 0 && level < SHOAL_IL_COUNT ? level_names[level] : NULL;
}

int shoal__ilevel_find(const char *name) {
  for (int i = 0; i < SHOAL_IL_COUNT; i++)
    if (name && !strcmp(name, level_names[i])) return i;
  return -1;
}

void shoal__interference_free(shoal_interference_t *m) {
  if (!m) return;
  for (int l = 0; l < SHOAL_IL_COUNT; l++) free(m->g[l]);
  free(m->cls);
  free(m->model);
  free(m->model_cls);
  free(m);
}

static int find_class(const shoal_interference_t *m, const char *name) {
  for (int i = 0; i < m->nclasses; i++)
    if (!strcmp(m->cls[i], name)) return i;
  return -1;
}

/* index of class name, added when new */
static int intern(const char *file, int line, shoal_interference_t *m, const char *name) {
  int c = find_class(m, name);
  if (c >= 0) return c;
  if (!name[0] || strlen(name) >= sizeof m->cls[0])
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: class name '%s' is empty or longer than %zu characters", file, line,
                         name, sizeof m->cls[0] - 1);
  if (m->nclasses == SHOAL_INTERFERENCE_MAX_CLASSES)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: more than %d classes", file, line, SHOAL_INTERFERENCE_MAX_CLASSES);
  snprintf(m->cls[m->nclasses], sizeof m->cls[0], "%s", name);
  return m->nclasses++;
}

/* a finite number, or an error naming the file, line and what it is */
static int number(const char *file, const shoal_json_t *v, const char *what, double *out) {
  if (!v || v->type != SHOAL_JSON_NUM || !isfinite(v->num))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: %s: expected a finite number", file, v ? v->line : 0, what);
  *out = v->num;
  return 0;
}

/* an array of n numbers */
static int vector(const char *file, const shoal_json_t *lv, const char *level, const char *key, int n, double *out) {
  const shoal_json_t *a = shoal__json_get(lv, key);
  if (!a || a->type != SHOAL_JSON_ARR || a->n != n)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.%s: expected an array of %d numbers (one per class)", file,
                         a ? a->line : lv->line, level, key, n);
  char what[96];
  for (int i = 0; i < n; i++) {
    snprintf(what, sizeof what, "levels.%s.%s[%d]", level, key, i);
    int rc = number(file, a->kids[i], what, &out[i]);
    if (rc) return rc;
  }
  return 0;
}

/* an array of n arrays of r numbers */
static int matrix(const char *file, const shoal_json_t *lv, const char *level, const char *key, int n, int r,
                  double *out) {
  const shoal_json_t *a = shoal__json_get(lv, key);
  if (!a || a->type != SHOAL_JSON_ARR || a->n != n)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.%s: expected %d arrays of %d numbers (one per class)", file,
                         a ? a->line : lv->line, level, key, n, r);
  char what[96];
  for (int i = 0; i < n; i++) {
    const shoal_json_t *row = a->kids[i];
    if (row->type != SHOAL_JSON_ARR || row->n != r)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.%s[%d]: expected %d numbers (the rank)", file, row->line,
                           level, key, i, r);
    for (int k = 0; k < r; k++) {
      snprintf(what, sizeof what, "levels.%s.%s[%d][%d]", level, key, i, k);
      int rc = number(file, row->kids[k], what, &out[i * r + k]);
      if (rc) return rc;
    }
  }
  return 0;
}

static double softplus(double x) { return x > 30 ? x : log1p(exp(x)); }

typedef struct {
  int n;                  /* classes of the level */
  int cls[SHOAL_INTERFERENCE_MAX_CLASSES];
  double alpha[SHOAL_INTERFERENCE_MAX_CLASSES], beta[SHOAL_INTERFERENCE_MAX_CLASSES];
  double u[SHOAL_INTERFERENCE_MAX_CLASSES * SHOAL_INTERFERENCE_MAX_RANK];
  double v[SHOAL_INTERFERENCE_MAX_CLASSES * SHOAL_INTERFERENCE_MAX_RANK];
} level_params_t;

static int read_level(const char *file, shoal_interference_t *m, const shoal_json_t *lv, int rank, level_params_t *p) {
  const char *name = lv->key;
  if (lv->type != SHOAL_JSON_OBJ)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s: expected an object", file, lv->line, name);
  for (int i = 0; i < lv->n; i++) {
    const char *k = lv->kids[i]->key;
    if (strcmp(k, "classes") && strcmp(k, "alpha") && strcmp(k, "beta") && strcmp(k, "u") && strcmp(k, "v"))
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s: unknown key '%s' (classes, alpha, beta, u, v)", file,
                           lv->kids[i]->line, name, k);
  }
  const shoal_json_t *cl = shoal__json_get(lv, "classes");
  if (!cl || cl->type != SHOAL_JSON_ARR || cl->n < 1 || cl->n > SHOAL_INTERFERENCE_MAX_CLASSES)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.classes: expected an array of 1..%d class names", file,
                         cl ? cl->line : lv->line, name, SHOAL_INTERFERENCE_MAX_CLASSES);
  p->n = cl->n;
  for (int i = 0; i < cl->n; i++) {
    if (cl->kids[i]->type != SHOAL_JSON_STR)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.classes[%d]: expected a string", file, cl->kids[i]->line,
                           name, i);
    int c = intern(file, cl->kids[i]->line, m, cl->kids[i]->str);
    if (c < 0) return c;
    for (int k = 0; k < i; k++)
      if (p->cls[k] == c)
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels.%s.classes: '%s' listed twice", file, cl->kids[i]->line,
                             name, cl->kids[i]->str);
    p->cls[i] = c;
  }
  int rc;
  if ((rc = vector(file, lv, name, "alpha", p->n, p->alpha)) || (rc = vector(file, lv, name, "beta", p->n, p->beta)) ||
      (rc = matrix(file, lv, name, "u", p->n, rank, p->u)) || (rc = matrix(file, lv, name, "v", p->n, rank, p->v)))
    return rc;
  return 0;
}

/* g table of one level over the model's classes (known once every level is read) */
static int fill_level(shoal_interference_t *m, int level, const level_params_t *p, int rank) {
  int n = m->nclasses;
  m->g[level] = calloc((size_t)n * n, sizeof *m->g[level]);
  if (!m->g[level]) return shoal__seterr(SHOAL_ERR_NOMEM, "interference: out of memory");
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < p->n; k++) {
      double x = p->alpha[i] + p->beta[k];
      for (int r = 0; r < rank; r++) x += p->u[i * rank + r] * p->v[k * rank + r];
      m->g[level][p->cls[i] * n + p->cls[k]] = softplus(x);
    }
  m->has[level] = 1;
  return 0;
}

static int read_models(const char *file, shoal_interference_t *m, const shoal_json_t *root) {
  const shoal_json_t *mo = shoal__json_get(root, "models");
  if (mo) {
    if (mo->type != SHOAL_JSON_OBJ)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: models: expected an object (model name: class)", file, mo->line);
    m->model = calloc((size_t)mo->n + 1, sizeof *m->model);
    m->model_cls = calloc((size_t)mo->n + 1, sizeof *m->model_cls);
    if (!m->model || !m->model_cls) return shoal__seterr(SHOAL_ERR_NOMEM, "interference: out of memory");
    for (int i = 0; i < mo->n; i++) {
      const shoal_json_t *e = mo->kids[i];
      if (e->type != SHOAL_JSON_STR || strlen(e->key) >= sizeof m->model[0])
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: models.%s: expected a class name (and a name below %zu characters)",
                             file, e->line, e->key, sizeof m->model[0]);
      int c = find_class(m, e->str);
      if (c < 0)
        return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: models.%s: class '%s' is in no level", file, e->line, e->key, e->str);
      snprintf(m->model[m->nmodels], sizeof m->model[0], "%s", e->key);
      m->model_cls[m->nmodels++] = c;
    }
  }
  m->default_cls = -1;
  const shoal_json_t *d = shoal__json_get(root, "default_class");
  if (d) {
    if (d->type != SHOAL_JSON_STR || (m->default_cls = find_class(m, d->str)) < 0)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: default_class: expected the name of a class of some level", file,
                           d->line);
  }
  return 0;
}

static int check_header(const char *file, const shoal_json_t *root, shoal_interference_t *m, long *rank) {
  static const char *const keys[] = {"format", "source", "rank", "levels", "models", "default_class", "heldout", NULL};
  if (root->type != SHOAL_JSON_OBJ) return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: expected a JSON object", file, root->line);
  for (int i = 0; i < root->n; i++) {
    int ok = 0;
    for (int k = 0; keys[k]; k++) ok |= !strcmp(root->kids[i]->key, keys[k]);
    if (!ok)
      return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: unknown key '%s' (format, source, rank, levels, models, default_class, "
                           "heldout)", file, root->kids[i]->line, root->kids[i]->key);
  }
  const shoal_json_t *f = shoal__json_get(root, "format");
  if (!f || f->type != SHOAL_JSON_STR || strcmp(f->str, FORMAT))
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: format: expected \"%s\"%s%s", file, f ? f->line : root->line, FORMAT,
                         f && f->type == SHOAL_JSON_STR ? ", the file says " : " (missing)",
                         f && f->type == SHOAL_JSON_STR ? f->str : "");
  const shoal_json_t *src = shoal__json_get(root, "source");
  if (src && src->type == SHOAL_JSON_STR) snprintf(m->source, sizeof m->source, "%s", src->str);
  const shoal_json_t *r = shoal__json_get(root, "rank");
  double rv = 0;
  int rc = number(file, r ? r : root, "rank", &rv);
  if (rc) return rc;
  if (rv != floor(rv) || rv < 0 || rv > SHOAL_INTERFERENCE_MAX_RANK)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: rank: expected an integer in 0..%d", file, r->line,
                         SHOAL_INTERFERENCE_MAX_RANK);
  *rank = (long)rv;
  return 0;
}

static int build(const char *file, const shoal_json_t *root, shoal_interference_t *m) {
  long rank = 0;
  int rc = check_header(file, root, m, &rank);
  if (rc) return rc;
  const shoal_json_t *lv = shoal__json_get(root, "levels");
  if (!lv || lv->type != SHOAL_JSON_OBJ || lv->n == 0)
    return shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels: expected an object with at least one level", file,
                         lv ? lv->line : root->line);
  level_params_t *p = calloc(SHOAL_IL_COUNT, sizeof *p);
  m->cls = calloc(SHOAL_INTERFERENCE_MAX_CLASSES, sizeof *m->cls);
  if (!p || !m->cls) {
    free(p);
    return shoal__seterr(SHOAL_ERR_NOMEM, "interference: out of memory");
  }
  int seen[SHOAL_IL_COUNT] = {0};
  for (int i = 0; i < lv->n && !rc; i++) {
    int l = shoal__ilevel_find(lv->kids[i]->key);
    if (l < 0)
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels: unknown level '%s' (slot, core, socket, nic, uplink)", file,
                         lv->kids[i]->line, lv->kids[i]->key);
    else if (seen[l])
      rc = shoal__seterr(SHOAL_ERR_PARSE, "%s:%d: levels: '%s' given twice", file, lv->kids[i]->line, lv->kids[i]->key);
    else {
      seen[l] = 1;
      rc = read_level(file, m, lv->kids[i], (int)rank, &p[l]);
    }
  }
  for (int l = 0; l < SHOAL_IL_COUNT && !rc; l++)
    if (seen[l]) rc = fill_level(m, l, &p[l], (int)rank);
  free(p);
  if (!rc) rc = read_models(file, m, root);
  return rc;
}

int shoal__interference_parse(const char *name, const char *text, size_t len, shoal_interference_t **out) {
  shoal_json_t *root = NULL;
  int rc = shoal__json_parse(name, text, len, &root);
  if (rc) return rc;
  shoal_interference_t *m = calloc(1, sizeof *m);
  if (!m) {
    shoal__json_free(root);
    return shoal__seterr(SHOAL_ERR_NOMEM, "interference: out of memory");
  }
  snprintf(m->origin, sizeof m->origin, "%s", name);
  rc = build(name, root, m);
  shoal__json_free(root);
  if (rc) {
    shoal__interference_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int shoal__interference_load(const char *path, shoal_interference_t **out) {
  char *buf;
  size_t len;
  int rc = shoal__file_read_all(path, "interference model", (size_t)64 << 20, &buf, &len);
  if (rc) return rc;
  rc = shoal__interference_parse(path, buf, len, out);
  free(buf);
  return rc;
}

int shoal__interference_nclasses(const shoal_interference_t *m) { return m->nclasses; }
const char *shoal__interference_class_name(const shoal_interference_t *m, int cls) {
  return cls >= 0 && cls < m->nclasses ? m->cls[cls] : NULL;
}
const char *shoal__interference_origin(const shoal_interference_t *m) { return m->origin; }
const char *shoal__interference_source(const shoal_interference_t *m) { return m->source; }

int shoal__interference_class_of(const shoal_interference_t *m, const char *model_name) {
  if (!model_name) return m->default_cls;
  for (int i = 0; i < m->nmodels; i++)
    if (!strcmp(m->model[i], model_name)) return m->model_cls[i];
  int c = find_class(m, model_name);
  return c >= 0 ? c : m->default_cls;
}

int shoal__interference_has_level(const shoal_interference_t *m, int level) {
  return level >= 0 && level < SHOAL_IL_COUNT && m->has[level];
}

double shoal__interference_term(const shoal_interference_t *m, int level, int cls, int co) {
  if (level < 0 || level >= SHOAL_IL_COUNT || !m->has[level] || cls < 0 || co < 0 || cls >= m->nclasses ||
      co >= m->nclasses)
    return 0;
  return m->g[level][cls * m->nclasses + co];
}
