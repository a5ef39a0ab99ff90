/* The GPU slot map (gpu_slots.h). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/gpu_slots.h"

int shoal__slots_create(const shoal_cluster_t *c, shoal__slots_t **out) {
  shoal__slots_t *sl = calloc(1, sizeof *sl);
  if (!sl) return shoal__seterr(SHOAL_ERR_NOMEM, "slots: out of memory");
  sl->c = c;
  sl->stride = c->max_gpus_per_machine > 0 ? c->max_gpus_per_machine : 1;
  sl->owner = calloc((size_t)c->nmachines * sl->stride, sizeof *sl->owner);
  if (!sl->owner) {
    free(sl);
    return shoal__seterr(SHOAL_ERR_NOMEM, "slots: out of memory for %d machines", c->nmachines);
  }
  *out = sl;
  return 0;
}

void shoal__slots_free(shoal__slots_t *sl) {
  if (!sl) return;
  free(sl->owner);
  free(sl);
}

void shoal__slots_socket_range(const shoal__slots_t *sl, int m, int s, int *first, int *n) {
  int g = sl->c->m[m].cap.gpus, S = sl->c->m[m].sockets;
  /* the slots k with k*S/g == s: from ceil(s*g/S) to ceil((s+1)*g/S) */
  int a = (s * g + S - 1) / S, b = ((s + 1) * g + S - 1) / S;
  *first = a;
  *n = b - a;
}

int shoal__slots_free_in(const shoal__slots_t *sl, int m, int s) {
  int a, n, f = 0;
  shoal__slots_socket_range(sl, m, s, &a, &n);
  shoal_job_t *const *o = sl->owner + (size_t)m * sl->stride;
  for (int k = a; k < a + n; k++) f += o[k] == NULL;
  return f;
}

static int held_on(const shoal__slots_t *sl, const shoal_job_t *j, int m) {
  int h = 0, g = sl->c->m[m].cap.gpus;
  shoal_job_t *const *o = sl->owner + (size_t)m * sl->stride;
  for (int k = 0; k < g; k++) h += o[k] == j;
  return h;
}

static void release_on(shoal__slots_t *sl, const shoal_job_t *j, int m) {
  int g = sl->c->m[m].cap.gpus;
  shoal_job_t **o = sl->owner + (size_t)m * sl->stride;
  for (int k = 0; k < g; k++)
    if (o[k] == j) o[k] = NULL;
}

/* put `workers` workers of j on machine m: first as many as want[s] asks on each socket s, the
 * rest on the lowest free slots */
static void take_on(shoal__slots_t *sl, shoal_job_t *j, int m, int workers, const uint8_t *want) {
  shoal_job_t **o = sl->owner + (size_t)m * sl->stride;
  int g = sl->c->m[m].cap.gpus, left = workers;
  for (int s = 0; want && s < sl->c->m[m].sockets && s < SHOAL_MAX_SOCKETS && left > 0; s++) {
    int a, n, w = want[s];
    shoal__slots_socket_range(sl, m, s, &a, &n);
    for (int k = a; k < a + n && w > 0 && left > 0; k++)
      if (!o[k]) o[k] = j, w--, left--;
  }
  for (int k = 0; k < g && left > 0; k++)
    if (!o[k]) o[k] = j, left--;
}

void shoal__slots_assign(shoal__slots_t *sl, shoal_job_t *j, const shoal_alloc_t *old, const shoal_place_t *p, int n,
                         const uint8_t *want) {
  /* machines j leaves */
  for (int i = 0, k = 0; i < old->n; i++) {
    int m = old->p[i].machine;
    while (k < n && p[k].machine < m) k++;
    if (k == n || p[k].machine != m || p[k].workers == 0) release_on(sl, j, m);
  }
  /* machines j uses now: keep its slots where its count is unchanged and no socket was asked */
  for (int i = 0; i < n; i++) {
    int m = p[i].machine;
    const uint8_t *w = want ? want + (size_t)i * SHOAL_MAX_SOCKETS : NULL;
    int asked = 0;
    for (int s = 0; w && s < SHOAL_MAX_SOCKETS; s++) asked += w[s];
    int h = held_on(sl, j, m);
    if (h == p[i].workers && !asked) continue;
    if (h) release_on(sl, j, m);
    take_on(sl, j, m, p[i].workers, asked ? w : NULL);
  }
}

void shoal__slots_release(shoal__slots_t *sl, const shoal_job_t *j, const shoal_alloc_t *a) {
  for (int i = 0; i < a->n; i++) release_on(sl, j, a->p[i].machine);
}
