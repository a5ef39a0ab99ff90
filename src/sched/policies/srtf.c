/* SRTF, oracle (spec §5.3). Priority = remaining time at the requested size,
 * (work - done) / S_ref with S_ref the consolidated speed at the requested
 * GPU count (the trace conversion's speed): shortest first, ties by id. On
 * every arrival and completion: walk jobs in priority order with
 * free = total GPUs, select a job when its GPUs <= free (backfill), preempt
 * running jobs not selected, start selected ones (consolidated).
 * Parameter srgf=1: SRGF variant, priority x GPUs (remaining GPU-time).
 * Parameter ties=prev: equal keys keep the order of the previous decision, new
 * jobs after the others (the Tiresias authors' simulator: a stable sort of one
 * list, arrivals appended); ties=id (the default) is the spec's rule, which
 * does not depend on the history. ties=prev walks every job at every decision.
 *
 * Speed (the result is the plain walk's): a waiting job's key does not
 * change while it waits, so waiting jobs sit in one heap per requested size
 * keyed once (after the engine applied their preemption: checkpoint losses
 * included); only the holders (at most the cluster's GPUs) are re-keyed per
 * decision, and they stay in the order of the last decision (the keys of
 * running jobs mostly fall at the same pace), so an insertion sort puts
 * them back in order in about linear time. The walk merges the holders with the first waiting
 * job among the sizes that fit the free GPUs (a larger one would not be
 * selected) and stops when no GPU is free, so a decision costs
 * O(H log H + k (C + log W)) (H holders, k waiting jobs walked, C sizes, W
 * waiting), not O(active log active). When every waiting job fits in the
 * free GPUs the walk would select them all: they are started in order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/policies/common.h"

/* per job: pkey[0] S_ref, pkey[1] key, pint[0] index in hold[] (-1: none) */
typedef struct {
  double key;
  int32_t id;
  shoal_job_t *j;
} sent_t;

struct sclass {
  int gpus;
  sent_t *h; /* min-heap on (key, id) */
  int n, cap;
};

typedef struct {
  int srgf, oom, ties_prev;
  shoal_job_t **list; /* ties=prev: every live job, in the previous decision's order (arrivals appended) */
  int nlist, listcap;
  struct sclass *cls; /* sorted by size */
  int ncls, clscap;
  long waiting_gpus, nwaiting;
  shoal_job_t **pend; /* arrived or preempted since the last decision: keyed at the next one */
  int npend, pendcap;
  shoal_job_t **hold; /* jobs holding resources, in the walk order of the last
                       * contended decision, then those started since; NULL: left */
  int nhold, holdcap, nlive;
  /* scratch of one decision */
  shoal_job_t **order; /* walk order */
  char *want;
  int cap, wantcap;
  shoal_place_t *buf;
} srtf_t;

static int grow(srtf_t *p, shoal_job_t ***a, int *cap, int need) {
  if (need <= *cap) return 0;
  int nc = need * 2 > 256 ? need * 2 : 256;
  shoal_job_t **x = realloc(*a, (size_t)nc * sizeof *x);
  if (!x) {
    p->oom = 1;
    return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
  }
  *a = x;
  *cap = nc;
  return 0;
}

static int srtf_create(shoal_sched_t *s, const char *params, void **state) {
  static const char *const keys[] = {"srgf", "ties", NULL};
  int rc = shoal__param_check("srtf", params, keys);
  long srgf;
  char ties[8];
  if (rc || (rc = shoal__param_long("srtf", params, "srgf", 0, 0, 1, &srgf))) return rc;
  if (shoal__param_str(params, "ties", ties, sizeof ties) < 0 ||
      (ties[0] && strcmp(ties, "id") && strcmp(ties, "prev")))
    return shoal__seterr(SHOAL_ERR_CONFIG, "policy srtf: ties: expected id or prev");
  srtf_t *p = calloc(1, sizeof *p);
  if (!p || !(p->buf = malloc((size_t)s->cluster->nmachines * sizeof *p->buf))) {
    free(p);
    return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
  }
  p->srgf = (int)srgf;
  p->ties_prev = !strcmp(ties, "prev");
  *state = p;
  return 0;
}

static void srtf_destroy(void *state) {
  srtf_t *p = state;
  if (!p) return;
  for (int c = 0; c < p->ncls; c++) free(p->cls[c].h);
  free(p->cls);
  free(p->pend);
  free(p->hold);
  free(p->order);
  free(p->want);
  free(p->buf);
  free(p->list);
  free(p);
}

/* Keys are remaining seconds rounded to the microsecond: two jobs of the same remaining time whose work and
 * speed came out of different floating-point products (2486 s of vgg16 and of cifar10-resnet gave 2486.0000000000005
 * and 2486.0) are a tie, broken by id as the spec says, not by the last bit. */
static double key_us(double x) { return x < 1e12 ? round(x * 1e6) / 1e6 : x; }

static void set_key(const srtf_t *p, const shoal_sched_t *s, shoal_job_t *j) {
  double k = j->pkey[0] > 0 ? shoal_job_remaining(j, s->now) / j->pkey[0] : 0;
  if (p->srgf) k *= j->gpus;
  j->pkey[1] = key_us(k);
}

static int cmp_key(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pkey[1] != y->pkey[1]) return x->pkey[1] < y->pkey[1] ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* ties=prev: equal keys by the position in the previous decision's order (pint[1]) */
static int cmp_prev(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->pkey[1] != y->pkey[1]) return x->pkey[1] < y->pkey[1] ? -1 : 1;
  return (x->pint[1] > y->pint[1]) - (x->pint[1] < y->pint[1]);
}

static int sent_less(const sent_t *a, const sent_t *b) { return a->key < b->key || (a->key == b->key && a->id < b->id); }

/* ---- waiting jobs: one heap per requested size ---- */
static int class_of(srtf_t *p, int g) {
  int lo = 0, hi = p->ncls;
  while (lo < hi) {
    int m = (lo + hi) / 2;
    if (p->cls[m].gpus < g) lo = m + 1;
    else hi = m;
  }
  if (lo < p->ncls && p->cls[lo].gpus == g) return lo;
  if (p->ncls == p->clscap) {
    int nc = p->clscap ? p->clscap * 2 : 16;
    struct sclass *c = realloc(p->cls, (size_t)nc * sizeof *c);
    if (!c) {
      p->oom = 1;
      return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory"), -1;
    }
    p->cls = c;
    p->clscap = nc;
  }
  for (int i = p->ncls; i > lo; i--) p->cls[i] = p->cls[i - 1];
  p->cls[lo] = (struct sclass){g, NULL, 0, 0};
  p->ncls++;
  return lo;
}

/* j waits with its key in pkey[1] */
static int wpush(srtf_t *p, shoal_job_t *j) {
  int ci = class_of(p, j->gpus);
  if (ci < 0) return SHOAL_ERR_NOMEM;
  struct sclass *c = &p->cls[ci];
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 64;
    sent_t *h = realloc(c->h, (size_t)nc * sizeof *h);
    if (!h) {
      p->oom = 1;
      return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
    }
    c->h = h;
    c->cap = nc;
  }
  sent_t e = {j->pkey[1], j->id, j};
  int i = c->n++;
  while (i > 0 && sent_less(&e, &c->h[(i - 1) / 2])) {
    c->h[i] = c->h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  c->h[i] = e;
  return 0;
}

static void wpop(struct sclass *c) {
  sent_t last = c->h[--c->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    const sent_t *b = &last;
    if (l < c->n && sent_less(&c->h[l], b)) m = l, b = &c->h[l];
    if (l + 1 < c->n && sent_less(&c->h[l + 1], b)) m = l + 1;
    if (m == i) break;
    c->h[i] = c->h[m];
    i = m;
  }
  if (c->n) c->h[i] = last;
}

/* first waiting job in key order among sizes <= fit; its class in *ci */
static const sent_t *wnext(srtf_t *p, long fit, int *ci) {
  const sent_t *best = NULL;
  for (int c = 0; c < p->ncls && p->cls[c].gpus <= fit; c++)
    if (p->cls[c].n && (!best || sent_less(&p->cls[c].h[0], best))) {
      best = &p->cls[c].h[0];
      *ci = c;
    }
  return best;
}

/* wnext, dropping the heads that ended while they waited (a live controller: cancelled by the user) */
static const sent_t *wnext_live(srtf_t *p, long fit, int *ci) {
  const sent_t *w;
  while ((w = wnext(p, fit, ci)) && w->j->state == SHOAL_JOB_DONE) wpop(&p->cls[*ci]);
  return w;
}

/* ---- holders ---- */
static int hold_add(srtf_t *p, shoal_job_t *j) {
  if (grow(p, &p->hold, &p->holdcap, p->nhold + 1)) return SHOAL_ERR_NOMEM;
  j->pint[0] = p->nhold;
  p->hold[p->nhold++] = j;
  p->nlive++;
  return 0;
}

static void hold_remove(srtf_t *p, shoal_job_t *j) {
  int i = (int)j->pint[0];
  if (i < 0 || i >= p->nhold || p->hold[i] != j) return;
  p->hold[i] = NULL;
  j->pint[0] = -1;
  p->nlive--;
}

/* Squeeze out the holes, re-key the holders at now and sort them: they are
 * in the order of the last contended decision (plus those started since), so
 * the insertion sort moves few of them. */
static void hold_sort(srtf_t *p, const shoal_sched_t *s) {
  int k = 0;
  for (int i = 0; i < p->nhold; i++) {
    shoal_job_t *j = p->hold[i];
    if (!j) continue;
    set_key(p, s, j);
    int at = k++;
    while (at > 0 && cmp_key(&p->hold[at - 1], &j) > 0) {
      p->hold[at] = p->hold[at - 1];
      at--;
    }
    p->hold[at] = j;
  }
  p->nhold = p->nlive = k;
  for (int i = 0; i < k; i++) p->hold[i]->pint[0] = i;
}

static void srtf_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  srtf_t *p = state;
  j->pkey[0] = shoal__ref_rate(s, j); /* S_ref, cached */
  j->pint[0] = -1;
  if (p->ties_prev) {
    if (!grow(p, &p->list, &p->listcap, p->nlist + 1)) p->list[p->nlist++] = j;
    return;
  }
  if (grow(p, &p->pend, &p->pendcap, p->npend + 1)) return;
  p->pend[p->npend++] = j;
  p->waiting_gpus += j->gpus;
  p->nwaiting++;
}

static void srtf_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  srtf_t *p = state;
  if (p->ties_prev) { /* out of the list, the others' order kept */
    int k = 0;
    for (int i = 0; i < p->nlist; i++)
      if (p->list[i] != j) p->list[k++] = p->list[i];
    p->nlist = k;
    return;
  }
  if (j->pint[0] >= 0) {
    hold_remove(p, j);
  } else { /* ended while it waited (a live controller: cancelled): out of the counts; its entry is dropped when met */
    p->waiting_gpus -= j->gpus;
    p->nwaiting--;
  }
}

/* ties=prev: the plain walk over every job, sorted stably from the previous decision's order */
static int schedule_prev(srtf_t *p, shoal_sched_t *s) {
  int n = p->nlist;
  for (int i = 0; i < n; i++) {
    p->list[i]->pint[1] = i;
    set_key(p, s, p->list[i]);
  }
  if (n > 1) qsort(p->list, (size_t)n, sizeof *p->list, cmp_prev);
  if (p->wantcap < n) {
    char *w = realloc(p->want, (size_t)n);
    if (!w) return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
    p->want = w;
    p->wantcap = n;
  }
  long free_gpus = s->cluster->gpus_total;
  for (int i = 0; i < n; i++) {
    p->want[i] = p->list[i]->gpus <= free_gpus;
    if (p->want[i]) free_gpus -= p->list[i]->gpus;
  }
  int rc = shoal__apply_selection(s, p->list, p->want, n, p->buf);
  return rc < 0 ? rc : 0;
}

static int srtf_schedule(void *state, shoal_sched_t *s) {
  srtf_t *p = state;
  int rc;
  if (p->oom) return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
  if (!(s->events & (SHOAL_EV_ARRIVAL | SHOAL_EV_FINISH))) return 0;
  if (p->ties_prev) return schedule_prev(p, s);
  /* arrivals and last decision's preempted jobs: their key is final now */
  for (int i = 0; i < p->npend; i++) {
    if (p->pend[i]->state == SHOAL_JOB_DONE) continue;
    set_key(p, s, p->pend[i]);
    if ((rc = wpush(p, p->pend[i]))) return rc;
  }
  p->npend = 0;
  if (p->nwaiting == 0) return 0;
  if ((rc = grow(p, &p->order, &p->cap, p->nhold + (int)p->nwaiting + 1))) return rc;
  if (p->wantcap < p->cap) {
    char *w = realloc(p->want, (size_t)p->cap);
    if (!w) return shoal__seterr(SHOAL_ERR_NOMEM, "srtf: out of memory");
    p->want = w;
    p->wantcap = p->cap;
  }
  int m = 0, nh;
  if (p->waiting_gpus <= s->cluster->gpus_free) {
    /* everything fits: the full walk would select every job; start the
     * waiting ones in priority order without touching running jobs */
    for (int c = 0; c < p->ncls; c++) {
      for (int i = 0; i < p->cls[c].n; i++)
        if (p->cls[c].h[i].j->state != SHOAL_JOB_DONE) p->order[m++] = p->cls[c].h[i].j;
      p->cls[c].n = 0;
    }
    if (m > 1) qsort(p->order, (size_t)m, sizeof *p->order, cmp_key);
    for (int i = 0; i < m; i++) p->want[i] = 1;
  } else {
    /* holders re-keyed and sorted (they are at most the cluster's GPUs),
     * merged with the waiting heads that fit */
    hold_sort(p, s);
    nh = p->nhold;
    shoal_job_t **hs = p->hold;
    long free_gpus = s->cluster->gpus_total;
    int hi = 0, ci = 0;
    const sent_t *wt = wnext_live(p, free_gpus, &ci);
    while (free_gpus > 0 && (wt || hi < nh)) {
      shoal_job_t *j;
      if (hi < nh && (!wt || cmp_key(&hs[hi], &wt->j) < 0)) {
        j = hs[hi++];
      } else {
        j = wt->j;
        wpop(&p->cls[ci]);
        wt = NULL;
      }
      p->order[m] = j;
      p->want[m] = j->gpus <= free_gpus;
      if (p->want[m]) free_gpus -= j->gpus;
      m++;
      if (!wt || wt->j->gpus > free_gpus) wt = wnext_live(p, free_gpus, &ci);
    }
    for (; hi < nh; hi++) { /* walk ended: the remaining holders are preempted */
      p->order[m] = hs[hi];
      p->want[m++] = 0;
    }
  }
  if ((rc = shoal__apply_selection(s, p->order, p->want, m, p->buf)) < 0) return rc;
  /* bookkeeping: holders, waiting heaps, jobs to key at the next decision */
  for (int i = 0; i < m; i++) {
    shoal_job_t *j = p->order[i];
    int was = j->pint[0] >= 0, is = shoal__holding(j);
    if (was && !is) {
      hold_remove(p, j);
      if ((rc = grow(p, &p->pend, &p->pendcap, p->npend + 1))) return rc;
      p->pend[p->npend++] = j;
      p->waiting_gpus += j->gpus;
      p->nwaiting++;
    } else if (!was && is) {
      if ((rc = hold_add(p, j))) return rc;
      p->waiting_gpus -= j->gpus;
      p->nwaiting--;
    } else if (!was && !is) {
      if ((rc = wpush(p, j))) return rc; /* walked but not started: back, same key */
    }
  }
  return 0;
}

const shoal_policy_ops_t shoal__policy_srtf = {
    "srtf",
    "SRTF oracle: shortest remaining time at the requested size first, preemptive, backfill",
    "srgf=0: 1 = order by remaining GPU-time (remaining time x GPUs); ties=id: equal keys by job id (prev: in the "
    "previous decision's order, new jobs last: the Tiresias authors' simulator; every job walked at every decision)",
    srtf_create,
    srtf_destroy,
    srtf_arrive,
    srtf_finish,
    NULL,
    srtf_schedule,
    NULL,
};
