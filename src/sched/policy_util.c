/* Helpers shared by policies (policy_util.h). */
#include "sched/policy_util.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int shoal__place_requested(const shoal_cluster_t *c, const shoal_job_t *j, shoal_place_t *out, int cap) {
  if (j->arch == SHOAL_ARCH_PS) return shoal__place_ps_job(c, j, j->gpus, j->ps, out, cap);
  return shoal__place_consolidated(c, j, j->gpus, out, cap);
}

int shoal__start_requested(shoal_sched_t *s, shoal_job_t *j, shoal_place_t *buf) {
  if (j->gpus * j->worker_demand.gpus > s->cluster->gpus_free) return 0;
  int n = shoal__place_requested(s->cluster, j, buf, s->cluster->nmachines);
  if (n <= 0) return 0;
  int rc = shoal_sched_assign(s, j, buf, n);
  if (rc == SHOAL_ERR_INFEASIBLE) return 0;
  return rc ? rc : 1;
}

int shoal__apply_selection(shoal_sched_t *s, shoal_job_t **order, const char *want, int n, shoal_place_t *buf) {
  int rc;
  for (int i = 0; i < n; i++)
    if (!want[i] && shoal__holding(order[i]) && (rc = shoal_sched_preempt(s, order[i]))) return rc;
  int failed = 0;
  for (int i = 0; i < n; i++) {
    if (!want[i] || shoal__holding(order[i])) continue;
    rc = shoal__start_requested(s, order[i], buf);
    if (rc < 0) return rc;
    failed += rc == 0;
  }
  return failed;
}

void shoal__arrivals_init(shoal__arrivals_t *q) {
  memset(q, 0, sizeof *q);
  q->head = q->tail = -1;
}

int shoal__arrivals_add(shoal__arrivals_t *q, shoal_job_t *j) {
  int id = j->id;
  if (id < 0) return shoal__seterr(SHOAL_ERR_INTERNAL, "arrivals: job id %d", id);
  if (id >= q->cap) {
    int nc = q->cap ? q->cap : 256;
    while (nc <= id) nc *= 2;
    shoal_job_t **jb = realloc(q->job, (size_t)nc * sizeof *jb);
    if (jb) q->job = jb;
    int32_t *nx = jb ? realloc(q->next, (size_t)nc * sizeof *nx) : NULL;
    if (nx) q->next = nx;
    int32_t *pv = nx ? realloc(q->prev, (size_t)nc * sizeof *pv) : NULL;
    if (!pv) return shoal__seterr(SHOAL_ERR_NOMEM, "policy: out of memory for %d jobs", nc);
    q->prev = pv;
    for (int i = q->cap; i < nc; i++) q->job[i] = NULL;
    q->cap = nc;
  }
  if (q->job[id]) return 0; /* already listed */
  q->job[id] = j;
  q->prev[id] = q->tail;
  q->next[id] = -1;
  if (q->tail >= 0) q->next[q->tail] = id;
  else q->head = id;
  q->tail = id;
  q->n++;
  return 0;
}

void shoal__arrivals_remove(shoal__arrivals_t *q, const shoal_job_t *j) {
  int id = j->id;
  if (id < 0 || id >= q->cap || q->job[id] != j) return;
  int p = q->prev[id], n = q->next[id];
  if (p >= 0) q->next[p] = n;
  else q->head = n;
  if (n >= 0) q->prev[n] = p;
  else q->tail = p;
  q->job[id] = NULL;
  q->n--;
}

void shoal__arrivals_free(shoal__arrivals_t *q) {
  free(q->job);
  free(q->next);
  free(q->prev);
  shoal__arrivals_init(q);
}

double shoal__ref_rate(const shoal_sched_t *s, const shoal_job_t *j) {
  return shoal_sched_rate_consolidated(s, j, j->gpus, j->arch == SHOAL_ARCH_PS ? j->ps : 0);
}

/* min-heap on cmp: a[0] comes first */
static void sift_down(shoal_job_t **a, int h, int i, int (*cmp)(const void *, const void *)) {
  shoal_job_t *x = a[i];
  for (;;) {
    int l = 2 * i + 1, m = i;
    shoal_job_t *best = x;
    if (l < h && cmp(&a[l], &best) < 0) m = l, best = a[l];
    if (l + 1 < h && cmp(&a[l + 1], &best) < 0) m = l + 1;
    if (m == i) break;
    a[i] = a[m];
    i = m;
  }
  a[i] = x;
}

int shoal__walk_select(shoal_job_t **order, char *want, int n, long total, int (*cmp)(const void *, const void *)) {
  if (n <= 0) return 0;
  shoal_job_t **walked = malloc((size_t)n * sizeof *walked);
  if (!walked) return shoal__seterr(SHOAL_ERR_NOMEM, "policy: out of memory");
  for (int i = n / 2 - 1; i >= 0; i--) sift_down(order, n, i, cmp);
  int h = n, k = 0;
  long free_gpus = total;
  while (h > 0 && free_gpus > 0) {
    if (k > 64 && k > n / 8) {
      /* the walk goes deep (jobs keep fitting): a merge sort of the rest is
       * cheaper than popping them one by one */
      qsort(order, (size_t)h, sizeof *order, cmp);
      int i = 0;
      for (; i < h && free_gpus > 0; i++) {
        want[k] = order[i]->gpus <= free_gpus;
        if (want[k]) free_gpus -= order[i]->gpus;
        walked[k++] = order[i];
      }
      memmove(order, order + i, (size_t)(h - i) * sizeof *order);
      h -= i;
      break;
    }
    shoal_job_t *top = order[0];
    order[0] = order[--h];
    if (h > 0) sift_down(order, h, 0, cmp);
    want[k] = top->gpus <= free_gpus;
    if (want[k]) free_gpus -= top->gpus;
    walked[k++] = top;
  }
  /* order = walked (in order) then the heap's rest */
  memmove(order + k, order, (size_t)h * sizeof *order);
  memcpy(order, walked, (size_t)k * sizeof *order);
  memset(want + k, 0, (size_t)(n - k));
  free(walked);
  return k;
}
