/* Names and parsers of the training enums, and the option defaults. */
#include <string.h>

#include "core/error.h"
#include "shoal/train.h"

static const char *const sync_names[SHOAL_SYNC__COUNT] = {"bsp", "dssync", "ps", "localsgd", "partial"};
static const char *const ds_names[SHOAL_DS__COUNT] = {"random", "butterfly", "topo", "fixed"};
static const char *const ps_names[SHOAL_PS__COUNT] = {"sync", "async", "ssp"};

static int parse(const char *s, const char *const *names, int n, const char *opt, const char *choices, int *out) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "%s: NULL name (expected %s)", opt, choices);
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) {
      *out = i;
      return 0;
    }
  return shoal__seterr(SHOAL_ERR_INVALID, "%s '%s': expected %s", opt, s, choices);
}

const char *shoal_sync_kind_name(shoal_sync_kind_t k) {
  return (unsigned)k < SHOAL_SYNC__COUNT ? sync_names[k] : "unknown";
}
int shoal_sync_kind_parse(const char *s, shoal_sync_kind_t *out) {
  int v = 0, rc = parse(s, sync_names, SHOAL_SYNC__COUNT, "--sync", "bsp, dssync, ps, localsgd or partial", &v);
  if (!rc && !out) rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_sync_kind_parse: out is NULL");
  if (!rc) *out = (shoal_sync_kind_t)v;
  return rc;
}
const char *shoal_ds_pattern_name(shoal_ds_pattern_t p) {
  return (unsigned)p < SHOAL_DS__COUNT ? ds_names[p] : "unknown";
}
int shoal_ds_pattern_parse(const char *s, shoal_ds_pattern_t *out) {
  int v = 0, rc = parse(s, ds_names, SHOAL_DS__COUNT, "--ds-pattern", "random, butterfly, topo or fixed", &v);
  if (!rc && !out) rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_ds_pattern_parse: out is NULL");
  if (!rc) *out = (shoal_ds_pattern_t)v;
  return rc;
}
const char *shoal_ps_mode_name(shoal_ps_mode_t m) { return (unsigned)m < SHOAL_PS__COUNT ? ps_names[m] : "unknown"; }
int shoal_ps_mode_parse(const char *s, shoal_ps_mode_t *out) {
  int v = 0, rc = parse(s, ps_names, SHOAL_PS__COUNT, "--ps-mode", "sync, async or ssp", &v);
  if (!rc && !out) rc = shoal__seterr(SHOAL_ERR_INVALID, "shoal_ps_mode_parse: out is NULL");
  if (!rc) *out = (shoal_ps_mode_t)v;
  return rc;
}

void shoal_train_opts_init(shoal_train_opts_t *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->model = SHOAL_MODEL_MLP;
  o->sync = SHOAL_SYNC_BSP;
  o->epochs = 10;
  o->batch = 64;
  o->lr = 0.05;
  o->momentum = 0.9;
  o->weight_decay = 5e-4;
  o->decay_gamma = 0.1;
  o->seed = 1;
  o->bucket_bytes = 256 * 1024;
  o->overlap = 1;
  o->ds_pattern = SHOAL_DS_BUTTERFLY;
  o->ds_k = 2;
  o->servers = 1;
  o->ps_mode = SHOAL_PS_SYNC;
  o->staleness = 2;
  o->local_h = 8;
  o->blas_threads = 1;
  o->grow_every = 10;
}
