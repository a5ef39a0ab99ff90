/* Gavel's max-min fairness (LAS) on a homogeneous cluster, round-based
 * (spec §5.8 "Gavel's version"; stanford-futuredata/gavel, policy
 * max_min_fairness + its round mechanism).
 *
 * Allocation: maximize min_j x_j subject to sum_j n_j x_j <= G, 0 <= x_j <= 1,
 * where x_j is job j's share of time at its requested size; on identical GPUs
 * with equal weights every job gets x = min(1, G / sum_j n_j).
 * Rounds of rho seconds (default 360, Gavel's): at each round start jobs are
 * ranked by priority x_j / f_j, f_j = fraction of its time in the system it
 * has held GPUs (new jobs: infinite priority; ties: lower id); walk that order
 * with free = total GPUs, keep or start jobs whose GPUs <= free, preempt the
 * others (each switch pays the restart cost). Between rounds, completions and
 * arrivals backfill free GPUs in priority order without preempting (Gavel
 * waits for the round end; we do not leave GPUs idle).
 * Parameters: round=360 (s). */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "sched/policy_util.h"

typedef struct {
  double round;
  int timer_pending, round_due;
  shoal_job_t **order;
  char *want;
  int cap;
  shoal_place_t *buf;
} gavel_t;

static int gavel_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"round", NULL};
  int rc = shoal__param_check("gavel", params, keys);
  gavel_t *g = rc ? NULL : calloc(1, sizeof *g);
  if (rc) return rc;
  if (!g || !(g->buf = malloc((size_t)s->cluster->nmachines * sizeof *g->buf))) {
    free(g);
    return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
  }
  if ((rc = shoal__param_double("gavel", params, "round", 360, 1e-3, 1e9, &g->round))) {
    free(g->buf);
    free(g);
    return rc;
  }
  *state = g;
  return 0;
}

static void gavel_destroy(void *state) {
  gavel_t *g = state;
  if (!g) return;
  free(g->order);
  free(g->want);
  free(g->buf);
  free(g);
}

static void gavel_timer(void *state, shoal_sched_t *s, int64_t tag) {
  gavel_t *g = state;
  g->timer_pending = 0;
  g->round_due = 1;
}

/* priority key in pkey[0] (larger first) */
static int cmp_prio(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pkey[0] != y->pkey[0]) return x->pkey[0] > y->pkey[0] ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int gavel_schedule(void *state, shoal_sched_t *s) {
  gavel_t *g = state;
  int n = s->nactive, rc;
  if (n > g->cap) {
    shoal_job_t **o = realloc(g->order, (size_t)n * 2 * sizeof *o);
    char *w = realloc(g->want, (size_t)n * 2);
    if (o) g->order = o;
    if (w) g->want = w;
    if (!o || !w) return shoal__seterr(SHOAL_ERR_NOMEM, "gavel: out of memory");
    g->cap = n * 2;
  }
  int round = g->round_due;
  g->round_due = 0;
  if (n > 0 && !g->timer_pending) {
    if ((rc = shoal_sched_timer(s, s->now + g->round, 0))) return rc;
    g->timer_pending = 1;
  }
  if (!round && !(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  if (n == 0) return 0;
  int nwait = 0;
  for (int i = 0; i < n; i++) nwait += !shoal__holding(s->active[i]);
  if (nwait == 0) return 0; /* everybody runs: the walk would keep them all */
  long demand = 0;
  for (int i = 0; i < n; i++) demand += s->active[i]->gpus;
  double x = demand <= s->cluster->gpus_total ? 1.0 : (double)s->cluster->gpus_total / (double)demand;
  int k = 0;
  for (int i = 0; i < n; i++) {
    shoal_job_t *j = s->active[i];
    if (!round && shoal__holding(j)) continue; /* between rounds: only waiting jobs, no preemption */
    double age = s->now - j->arrival, f = age > 0 ? shoal_sched_held_s(s, j) / age : 0;
    j->pkey[0] = f > 0 ? x / f : INFINITY;
    g->order[k++] = j;
  }
  if ((rc = shoal__walk_select(g->order, g->want, k, round ? s->cluster->gpus_total : s->cluster->gpus_free, cmp_prio)) < 0)
    return rc;
  rc = shoal__apply_selection(s, g->order, g->want, k, g->buf);
  return rc < 0 ? rc : 0;
}

const shoal_policy_ops_t shoal__policy_gavel = {
    "gavel",
    "Gavel max-min fairness (homogeneous LAS): rounds, priority = share / time received",
    "round=360: round length in seconds",
    gavel_create,
    gavel_destroy,
    NULL,
    NULL,
    gavel_timer,
    gavel_schedule,
    NULL,
};
