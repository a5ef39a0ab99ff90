/* Local SGD: every worker steps on its own; the parameters are averaged over
 * all workers after every `period`-th step (steps period-1, 2*period-1, ...). */
#include <stdlib.h>

#include "core/error.h"
#include "train/sync.h"

typedef struct localsgd {
  long period;
} localsgd_t;

static int lsgd_create(shoal_sync_t *s, shoal__cfg_t *cfg) {
  long h;
  int rc = shoal__cfg_int(cfg, "period", 8, 1, 1000000000L, &h);
  if (rc) return rc;
  localsgd_t *l = calloc(1, sizeof *l);
  if (!l) return shoal__seterr(SHOAL_ERR_NOMEM, "sync localsgd: out of memory");
  l->period = h;
  s->impl = l;
  s->flags = SHOAL_SYNC_F_PARAMS;
  return 0;
}

static void lsgd_destroy(shoal_sync_t *s) { free(s->impl); }

static int lsgd_end(shoal_sync_t *s) {
  localsgd_t *l = s->impl;
  if ((s->step + 1) % l->period) {
    s->gsize = 1;
    return 0;
  }
  return shoal__sync_average_params(s, "periodic average");
}

static int lsgd_final(shoal_sync_t *s) { return shoal__sync_average_params(s, "final average"); }

const shoal__strategy_t shoal__strategy_localsgd = {
    .name = "localsgd",
    .keys = "period",
    .create = lsgd_create,
    .destroy = lsgd_destroy,
    .end = lsgd_end,
    .final = lsgd_final,
};
