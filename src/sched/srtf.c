/* SRTF, oracle (spec §5.3). Priority = remaining time at the requested size,
 * (work - done) / S_ref with S_ref the consolidated speed at the requested
 * GPU count (the trace conversion's speed): shortest first, ties by id. On
 * every arrival and completion: walk jobs in priority order with
 * free = total GPUs, select a job when its GPUs <= free (backfill), preempt
 * running jobs not selected, start selected ones (consolidated).
 * Parameter srgf=1: SRGF variant, priority x GPUs (remaining GPU-time).
 * Cost: O(A) per decision, plus O(A log A) when the waiting jobs do not all
 * fit in the free GPUs (A = active jobs). */
#include <stdlib.h>

#include "core/error.h"
#include "sched/policy_util.h"

typedef struct {
  int srgf, oom;
  shoal_job_t **wait; /* jobs holding nothing; pint[0] = 1 while listed */
  int nwait, wcap;
  shoal_job_t **order;
  char *want;
  int cap;
  shoal_place_t *buf;
} srtf_t;

static int srtf_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"srgf", NULL};
  int rc = shoal__param_check("srtf", params, keys);
  long srgf;
  if (rc || (rc = shoal__param_long("srtf", params, "srgf", 0, 0, 1, &srgf))) return rc;
  srtf_t *p = calloc(1, sizeof *p);
  if (!p || !(p->buf = malloc((size_t)s->cluster->nmachines * sizeof *p->buf))) {
    free(p);
    return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
  }
  p->srgf = (int)srgf;
  *state = p;
  return 0;
}

static void srtf_destroy(void *state) {
  srtf_t *p = state;
  if (!p) return;
  free(p->wait);
  free(p->order);
  free(p->want);
  free(p->buf);
  free(p);
}

static void add_wait(srtf_t *p, shoal_job_t *j) {
  if (j->pint[0]) return;
  if (p->nwait == p->wcap) {
    int nc = p->wcap ? p->wcap * 2 : 256;
    shoal_job_t **w = realloc(p->wait, (size_t)nc * sizeof *w);
    if (!w) {
      p->oom = 1;
      return;
    }
    p->wait = w;
    p->wcap = nc;
  }
  p->wait[p->nwait++] = j;
  j->pint[0] = 1;
}

static void srtf_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  j->pkey[0] = shoal__ref_rate(s, j); /* S_ref, cached */
  j->pint[0] = 0;
  add_wait(state, j);
}

static void set_key(const srtf_t *p, const shoal_sched_t *s, shoal_job_t *j) {
  j->pkey[1] = j->pkey[0] > 0 ? shoal_job_remaining(j, s->now) / j->pkey[0] : 0;
  if (p->srgf) j->pkey[1] *= j->gpus;
}

static int cmp_key(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pkey[1] != y->pkey[1]) return x->pkey[1] < y->pkey[1] ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int srtf_schedule(void *state, shoal_sched_t *s) {
  srtf_t *p = state;
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  int n = s->nactive;
  if (n > p->cap) {
    int nc = n * 2;
    shoal_job_t **o = realloc(p->order, (size_t)nc * sizeof *o);
    char *w = realloc(p->want, (size_t)nc);
    if (o) p->order = o;
    if (w) p->want = w;
    if (!o || !w) return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
    p->cap = nc;
  }
  if (p->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
  if (p->nwait == 0) return 0;
  long waiting_gpus = 0;
  for (int i = 0; i < p->nwait; i++) waiting_gpus += p->wait[i]->gpus;
  int m, rc, full = 0;
  if (waiting_gpus <= s->cluster->gpus_free) {
    /* everything fits: the full walk would select every job; start the
     * waiting ones in priority order without touching running jobs */
    m = p->nwait;
    for (int i = 0; i < m; i++) {
      set_key(p, s, p->wait[i]);
      p->order[i] = p->wait[i];
      p->want[i] = 1;
    }
  } else {
    m = n;
    full = 1;
    for (int i = 0; i < n; i++) {
      set_key(p, s, s->active[i]);
      p->order[i] = s->active[i];
    }
  }
  if (full) {
    if ((rc = shoal__walk_select(p->order, p->want, n, s->cluster->gpus_total, cmp_key)) < 0) return rc;
  } else {
    qsort(p->order, (size_t)m, sizeof *p->order, cmp_key);
  }
  if ((rc = shoal__apply_selection(s, p->order, p->want, m, p->buf)) < 0) return rc;
  for (int i = 0; i < p->nwait; i++) p->wait[i]->pint[0] = 0;
  p->nwait = 0;
  for (int i = 0; i < m; i++)
    if (!shoal__holding(p->order[i])) add_wait(p, p->order[i]);
  return 0;
}

const shoal_policy_ops_t shoal__policy_srtf = {
    "srtf",
    "SRTF oracle: shortest remaining time at the requested size first, preemptive, backfill",
    "srgf=0: 1 = order by remaining GPU-time (remaining time x GPUs)",
    srtf_create,
    srtf_destroy,
    srtf_arrive,
    NULL,
    NULL,
    srtf_schedule,
    NULL,
};
