/* Helpers shared by policies (policies/common.h). */
#include "sched/policies/common.h"

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
