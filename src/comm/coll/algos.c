/* The table of allreduce algorithms (algo.h). One line per algorithm; its
 * position is its id (the public constants of include/shoal/comm.h for the
 * first ones). Adding an algorithm: its file (a shoal__coll_algo_t) and a
 * line here. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "comm/coll/algo.h"
#include "core/config.h"
#include "core/error.h"

extern const shoal__coll_algo_t shoal__algo_ring, shoal__algo_rhd, shoal__algo_rd, shoal__algo_shm, shoal__algo_hier,
    shoal__algo_trees, shoal__algo_relay, shoal__algo_cma;

static const shoal__coll_algo_t *const table[] = {
    [SHOAL_ALGO_AUTO] = NULL, /* the chooser */
    [SHOAL_ALGO_RING] = &shoal__algo_ring,
    [SHOAL_ALGO_RHD] = &shoal__algo_rhd,
    [SHOAL_ALGO_RD] = &shoal__algo_rd,
    [SHOAL_ALGO_SHM] = &shoal__algo_shm,
    [SHOAL_ALGO_HIER] = &shoal__algo_hier,
    [SHOAL_ALGO_TREES] = &shoal__algo_trees,
    [SHOAL_ALGO_RELAY] = &shoal__algo_relay,
    &shoal__algo_cma,
};
#define NALGO ((int)(sizeof table / sizeof table[0]))
_Static_assert(NALGO <= SHOAL__ALGO_MAX, "raise SHOAL__ALGO_MAX");
_Static_assert(NALGO >= SHOAL_ALGO__COUNT, "every public constant has its line");

int shoal__algo_count(void) { return NALGO; }

const shoal__coll_algo_t *shoal__algo(shoal_algo_t id) {
  return (unsigned)id < (unsigned)NALGO ? table[id] : NULL;
}

const char *shoal_algo_name(shoal_algo_t algo) {
  if (algo == SHOAL_ALGO_AUTO) return "auto";
  const shoal__coll_algo_t *a = shoal__algo(algo);
  return a ? a->name : "?";
}

const char *shoal__algo_list(void) {
  static char list[256];
  if (!list[0]) {
    size_t n = 0;
    for (int i = 1; i < NALGO && n < sizeof list; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s, ", table[i]->name);
    if (n < sizeof list) snprintf(list + n, sizeof list - n, "auto");
  }
  return list;
}

int shoal_algo_parse(const char *s, shoal_algo_t *out) {
  if (!s) return shoal__seterr(SHOAL_ERR_INVALID, "algorithm: missing value");
  if (!out) return shoal__seterr(SHOAL_ERR_INVALID, "shoal_algo_parse: NULL output pointer");
  if (!strcasecmp(s, "auto")) {
    *out = SHOAL_ALGO_AUTO;
    return 0;
  }
  for (int i = 1; i < NALGO; i++) {
    int hit = !strcasecmp(s, table[i]->name);
    for (int k = 0; k < 2 && !hit && table[i]->alias[k]; k++) hit = !strcasecmp(s, table[i]->alias[k]);
    if (hit) {
      *out = (shoal_algo_t)i;
      return 0;
    }
  }
  return shoal__seterr(SHOAL_ERR_INVALID, "unknown allreduce algorithm '%s' (expected %s)", s, shoal__algo_list());
}

int shoal__algo_env(shoal_algo_t *out) {
  const char *env = shoal__config_str("SHOAL_ALGO", "auto");
  shoal_algo_t forced = SHOAL_ALGO_AUTO;
  if (env && *env && shoal_algo_parse(env, &forced))
    return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_ALGO='%s': expected %s", env, shoal__algo_list());
  long chunk; /* the pipelined algorithms' shared override, read again when they plan */
  int rc = shoal__config_long("SHOAL_CHUNK_BYTES", 0, 0, 1L << 30, &chunk);
  for (int i = 1; i < NALGO && !rc; i++)
    if (table[i]->check_env) rc = table[i]->check_env();
  if (rc) return rc;
  *out = forced;
  return 0;
}
