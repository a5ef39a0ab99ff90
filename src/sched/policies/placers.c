/* The heuristic placers (placer.h) and the placer registry. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/colocation.h"
#include "sched/policies/placer.h"
#include "sched/policies/common.h"

int shoal__placer_model(shoal_sched_t *s, const shoal_interference_t **use, shoal_interference_t **owned) {
  *owned = NULL;
  if (s->interference) {
    *use = s->interference;
    return 0;
  }
  int rc = shoal__interference_shipped(owned);
  if (rc) return rc;
  *use = *owned;
  return 0;
}

/* ---- consolidate: the primitive every other policy starts jobs with ---- */

typedef struct {
  shoal_place_t *buf;
} simple_t;

static int simple_create(shoal_sched_t *s, const char *params, void **state) {
  int rc = shoal__param_check("placer", params, NULL);
  if (rc) return rc;
  simple_t *p = calloc(1, sizeof *p);
  if (!p || !(p->buf = malloc((size_t)s->cluster->nmachines * sizeof *p->buf))) {
    free(p);
    return shoal__seterr(SHOAL_ERR_NOMEM, "placer: out of memory");
  }
  *state = p;
  return 0;
}

static void simple_destroy(void *state) {
  simple_t *p = state;
  if (p) free(p->buf);
  free(p);
}

static int consolidate_start(void *state, shoal_sched_t *s, shoal_job_t *j) {
  simple_t *p = state;
  return shoal__start_requested(s, j, p->buf);
}

/* ---- firstfit and loadbal: worker by worker ---- */

/* assign the n entries of buf (one per worker, machine order not required) */
static int assign_workers(shoal_sched_t *s, shoal_job_t *j, shoal_place_t *buf, int n) {
  n = shoal__place_normalize(buf, n);
  int rc = shoal_sched_assign(s, j, buf, n);
  if (rc == SHOAL_ERR_INFEASIBLE) return 0;
  return rc ? rc : 1;
}

/* worker by worker: the machine pick() chooses among those with room left for one more */
static int per_worker(simple_t *p, shoal_sched_t *s, shoal_job_t *j, int most_free) {
  const shoal_cluster_t *c = s->cluster;
  if (j->arch == SHOAL_ARCH_PS) return shoal__start_requested(s, j, p->buf); /* PSs: the consolidated primitive */
  if (j->gpus > c->gpus_free) return 0;
  int n = 0, left = j->gpus;
  /* room per machine, less what this job was given so far (buf holds one entry per machine used) */
  while (left > 0) {
    int best = -1, best_room = 0;
    for (int m = 0; m < c->nmachines; m++) {
      int room = shoal__place_room(c, j, m);
      for (int i = 0; i < n; i++)
        if (p->buf[i].machine == m) room -= p->buf[i].workers;
      if (room <= 0) continue;
      if (!most_free) {
        best = m;
        break;
      }
      int f = c->m[m].free.gpus;
      for (int i = 0; i < n; i++)
        if (p->buf[i].machine == m) f -= p->buf[i].workers;
      if (best < 0 || f > best_room) best = m, best_room = f;
    }
    if (best < 0) return 0;
    int i = 0;
    while (i < n && p->buf[i].machine != best) i++;
    if (i == n) p->buf[n++] = (shoal_place_t){best, 0, 0};
    p->buf[i].workers++;
    left--;
  }
  return assign_workers(s, j, p->buf, n);
}

static int firstfit_start(void *state, shoal_sched_t *s, shoal_job_t *j) { return per_worker(state, s, j, 0); }
static int loadbal_start(void *state, shoal_sched_t *s, shoal_job_t *j) { return per_worker(state, s, j, 1); }

/* ---- pack: interference-aware (Gandiva-like) ---- */

typedef struct {
  shoal_place_t *buf;
  uint8_t *want;                   /* [nmachines][SHOAL_MAX_SOCKETS] */
  shoal_interference_t *owned;
  shoal__colo_t colo;
} pack_t;

static void pack_destroy(void *state) {
  pack_t *p = state;
  if (!p) return;
  shoal__colo_fini(&p->colo);
  shoal__interference_free(p->owned);
  free(p->buf);
  free(p->want);
  free(p);
}

static int pack_create(shoal_sched_t *s, const char *params, void **state) {
  int rc = shoal__param_check("pack", params, NULL);
  if (rc) return rc;
  pack_t *p = calloc(1, sizeof *p);
  if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "pack: out of memory");
  p->buf = malloc((size_t)s->cluster->nmachines * sizeof *p->buf);
  p->want = calloc((size_t)s->cluster->nmachines * SHOAL_MAX_SOCKETS, 1);
  const shoal_interference_t *im;
  if (!p->buf || !p->want) rc = shoal__seterr(SHOAL_ERR_NOMEM, "pack: out of memory");
  if (!rc) rc = shoal__placer_model(s, &im, &p->owned);
  if (!rc) rc = shoal__colo_init(&p->colo, im, s->speed);
  if (!rc && !shoal__sched_slots(s)) rc = shoal__seterr(SHOAL_ERR_NOMEM, "pack: out of memory for the slot map");
  if (rc) {
    pack_destroy(p);
    return rc;
  }
  *state = p;
  return 0;
}

static int pack_start(void *state, shoal_sched_t *s, shoal_job_t *j) {
  pack_t *p = state;
  const shoal_cluster_t *c = s->cluster;
  const shoal__slots_t *sl = s->slots;
  if (j->arch == SHOAL_ARCH_PS || j->gpus > c->gpus_free) return j->gpus > c->gpus_free ? 0 : shoal__start_requested(s, j, p->buf);
  uint8_t w[SHOAL_MAX_SOCKETS];
  int best = -1;
  double best_cost = 0;
  /* one machine: the least interference, ties the fewest free GPUs (packing), then the lowest id */
  for (int m = 0; m < c->nmachines; m++) {
    if (shoal__place_room(c, j, m) < j->gpus) continue;
    double cost = shoal__colo_pick_sockets(&p->colo, sl, j, m, j->gpus, w);
    if (cost < 0) continue;
    if (best < 0 || cost < best_cost - 1e-12 ||
        (cost <= best_cost + 1e-12 && c->m[m].free.gpus < c->m[best].free.gpus))
      best = m, best_cost = cost;
  }
  int n;
  if (best >= 0) {
    p->buf[0] = (shoal_place_t){best, (int16_t)j->gpus, 0};
    n = 1;
  } else {
    n = shoal__place_consolidated(c, j, j->gpus, p->buf, c->nmachines);
    if (n <= 0) return 0;
  }
  for (int i = 0; i < n; i++)
    if (shoal__colo_pick_sockets(&p->colo, sl, j, p->buf[i].machine, p->buf[i].workers, p->want + (size_t)i * SHOAL_MAX_SOCKETS) < 0)
      memset(p->want + (size_t)i * SHOAL_MAX_SOCKETS, 0, SHOAL_MAX_SOCKETS); /* lowest free slots */
  int rc = shoal_sched_assign_sockets(s, j, p->buf, n, p->want);
  if (rc == SHOAL_ERR_INFEASIBLE) return 0;
  return rc ? rc : 1;
}

/* ---- registry ---- */

static const shoal_placer_ops_t placer_consolidate = {
    "consolidate", "fewest machines: one machine (best fit), else one rack, else cluster-wide (Tiresias-like)",
    simple_create, simple_destroy, consolidate_start, NULL, NULL};
static const shoal_placer_ops_t placer_firstfit = {
    "firstfit", "every worker on the lowest-numbered machine with room", simple_create, simple_destroy, firstfit_start, NULL, NULL};
static const shoal_placer_ops_t placer_loadbal = {
    "loadbal", "every worker on the machine with the most free GPUs", simple_create, simple_destroy, loadbal_start, NULL, NULL};
static const shoal_placer_ops_t placer_pack = {
    "pack", "interference-aware packing (Gandiva-like): least predicted interference, ties to the fullest machine",
    pack_create, pack_destroy, pack_start, NULL, NULL};
extern const shoal_placer_ops_t shoal__placer_marl;

static const shoal_placer_ops_t *const placers[] = {&placer_consolidate, &placer_firstfit, &placer_loadbal, &placer_pack,
                                                    &shoal__placer_marl};

const shoal_placer_ops_t *shoal__placer_at(int i) {
  return i >= 0 && i < (int)(sizeof placers / sizeof placers[0]) ? placers[i] : NULL;
}

const shoal_placer_ops_t *shoal__placer_find(const char *name) {
  for (int i = 0; shoal__placer_at(i); i++)
    if (name && !strcmp(placers[i]->name, name)) return placers[i];
  return NULL;
}
