/* DRF over tenants (spec §5.7), rigid jobs. Tenants are the trace's virtual
 * clusters (Philly `cluster` column) or a live controller's accounts. Dominant
 * share of tenant u: s_u = max_r alloc_{u,r} / C_r over GPUs, CPUs and memory,
 * divided by u's weight w_u when the runner gives weights (weighted DRF: a
 * tenant with twice the weight is served until it holds twice as much; the
 * live controller's weights are the accounts' fair shares). At every arrival
 * and completion: repeatedly take the tenant with the smallest s_u (ties: the
 * tenant whose oldest waiting job arrived first) and start its first waiting
 * job (arrival order) that fits now at its requested size (consolidated; PS
 * jobs with their PSs); a tenant none of whose jobs fits is skipped for the
 * rest of the decision. No preemption. Elastic progressive filling of PS
 * jobs is not implemented here (see docs/simulator.md). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/policies/common.h"

typedef struct {
  shoal_job_t **q; /* waiting jobs, arrival order */
  int n, cap;
  double gpus, cpus, mem;
} tenant_t;

typedef struct {
  int nt;
  tenant_t *t;
  double G, C, M;
  int oom;
  shoal_place_t *buf;
  char *skip;
} drf_t;

static int drf_create(shoal_sched_t *s, const char *params, void **state) {
  int rc = shoal__param_check("drf", params, NULL);
  if (rc) return rc;
  drf_t *d = calloc(1, sizeof *d);
  int nt = s->nvcs > 0 ? s->nvcs : 1;
  if (!d || !(d->t = calloc((size_t)nt, sizeof *d->t)) || !(d->skip = calloc((size_t)nt, 1)) ||
      !(d->buf = malloc((size_t)s->cluster->nmachines * sizeof *d->buf))) {
    if (d) {
      free(d->t);
      free(d->skip);
    }
    free(d);
    return shoal__seterr(SHOAL_ERR_NOMEM, "drf: out of memory");
  }
  d->nt = nt;
  d->G = s->cluster->gpus_total;
  for (int m = 0; m < s->cluster->nmachines; m++) {
    d->C += s->cluster->m[m].cap.cpus;
    d->M += s->cluster->m[m].cap.mem_gb;
  }
  *state = d;
  return 0;
}

static void drf_destroy(void *state) {
  drf_t *d = state;
  if (!d) return;
  for (int i = 0; i < d->nt; i++) free(d->t[i].q);
  free(d->t);
  free(d->skip);
  free(d->buf);
  free(d);
}

static tenant_t *tenant_of(drf_t *d, const shoal_job_t *j) { return &d->t[j->vc >= 0 && j->vc < d->nt ? j->vc : 0]; }

/* j now holds its allocation: its tenant's usage grows by it (drf_finish takes it back) */
static void account(tenant_t *t, shoal_job_t *j) {
  shoal_res_t r = shoal_job_demand(j, j->alloc.workers, j->alloc.ps);
  j->pkey[0] = r.gpus;
  j->pkey[1] = r.cpus;
  j->pkey[2] = r.mem_gb;
  t->gpus += r.gpus;
  t->cpus += r.cpus;
  t->mem += r.mem_gb;
}

static void drf_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  drf_t *d = state;
  tenant_t *t = tenant_of(d, j);
  if (j->state != SHOAL_JOB_WAIT) { /* arrives running (a live controller adopting it): started, never queued */
    account(t, j);
    return;
  }
  if (t->n == t->cap) {
    int nc = t->cap ? t->cap * 2 : 64;
    shoal_job_t **q = realloc(t->q, (size_t)nc * sizeof *q);
    if (!q) {
      d->oom = 1;
      return;
    }
    t->q = q;
    t->cap = nc;
  }
  t->q[t->n++] = j;
}

static void drf_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  drf_t *d = state;
  tenant_t *t = tenant_of(d, j);
  if (j->pkey[0] == 0) { /* never accounted: it ended while it waited (a live controller: cancelled) */
    for (int i = 0; i < t->n; i++)
      if (t->q[i] == j) {
        memmove(&t->q[i], &t->q[i + 1], (size_t)(t->n - i - 1) * sizeof *t->q);
        t->n--;
        break;
      }
    return;
  }
  t->gpus -= j->pkey[0];
  t->cpus -= j->pkey[1];
  t->mem -= j->pkey[2];
}

static double share(const drf_t *d, const shoal_sched_t *s, int u) {
  const tenant_t *t = &d->t[u];
  double x = t->gpus / d->G;
  if (t->cpus / d->C > x) x = t->cpus / d->C;
  if (t->mem / d->M > x) x = t->mem / d->M;
  double w = s->vc_weight && u < s->nvcs ? s->vc_weight[u] : 1;
  return x / (w > 0 ? w : 1);
}

static int drf_schedule(void *state, shoal_sched_t *s) {
  drf_t *d = state;
  if (d->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "drf: out of memory for the queues");
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  memset(d->skip, 0, (size_t)d->nt);
  for (;;) {
    if (s->cluster->gpus_free <= 0) return 0;
    int best = -1;
    double bs = 0;
    for (int u = 0; u < d->nt; u++) {
      tenant_t *t = &d->t[u];
      if (d->skip[u] || t->n == 0) continue;
      double su = share(d, s, u);
      if (best < 0 || su < bs || (su == bs && t->q[0]->id < d->t[best].q[0]->id)) {
        best = u;
        bs = su;
      }
    }
    if (best < 0) return 0;
    tenant_t *t = &d->t[best];
    int started = -1;
    for (int i = 0; i < t->n; i++) {
      shoal_job_t *j = t->q[i];
      if (j->gpus > s->cluster->gpus_free) continue;
      int rc = shoal__start_requested(s, j, d->buf);
      if (rc < 0) return rc;
      if (rc == 1) {
        started = i;
        break;
      }
    }
    if (started < 0) {
      d->skip[best] = 1;
      continue;
    }
    shoal_job_t *j = t->q[started];
    account(t, j);
    memmove(&t->q[started], &t->q[started + 1], (size_t)(t->n - started - 1) * sizeof *t->q);
    t->n--;
  }
}

const shoal_policy_ops_t shoal__policy_drf = {
    "drf",
    "DRF: tenants (VCs) by smallest dominant share (over their weights, if given) start their oldest job that fits; "
    "no preemption",
    "(none)",
    drf_create,
    drf_destroy,
    drf_arrive,
    drf_finish,
    NULL,
    drf_schedule,
    NULL,
};
