/* Helpers shared by policies (policy_util.h). */
#include "sched/policy_util.h"

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

double shoal__ref_rate(const shoal_sched_t *s, const shoal_job_t *j) {
  return shoal_sched_rate_consolidated(s, j, j->gpus, j->arch == SHOAL_ARCH_PS ? j->ps : 0);
}
