/* The slotted mode: a slot planner behind the policy interface (policies/slotted.h). */
#include "sched/policies/slotted.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/model/place.h"
#include "sched/planners/greedy.h"
#include "sched/planners/replan.h"
#include "sched/policies/common.h"

/* Per job id (parallel arrays, so that the re-planner can take them as its
 * job and schedule tables). A plan keeps its executed slots until the job
 * finishes: the re-planner counts the work done before a slot from them. */
typedef struct {
  const shoal__slot_planner_t *pl;
  void *own;          /* the planner policy's state */
  const char *name;
  double slot_s;
  int hmax;           /* slots a plan may span (a longer job is planned in pieces) */
  int replan;         /* re-plan on each arrival batch (the planner's choice) */
  int nogap;          /* plans without a pause (nogap=; plan_nogap, pull_forward) */
  int pull;           /* offer the current slot's free room to jobs planned to start later (pull=) */
  int pull_k;         /* at most this many jobs re-planned by one pull walk (pullk=) */
  int backfill;       /* give the current slot's free room to planned jobs that hold nothing now (backfill=):
                       * 1 oldest first, 2 shortest remaining first */
  struct bf_item *bf; /* backfill=2: the candidates */
  int capbf;
  double est_s;       /* > 0: plan with est_s seconds of remaining work at the requested size (ablation) */
  int restart;        /* restart cost in the planners' objective (restart=): a placement change loses
                       * s->restart_cost of its slot's work */
  double fit;         /* > 0: wmax and the per-worker rates fitted to the speed model (fit=, the least
                       * efficiency kept) */
  double age;         /* a waiting rigid job is not released once it has waited age times its remaining
                       * standalone time (age=; 0: off) */
  int hold;           /* a re-planning batch between slot boundaries leaves the current slot's plans
                       * (hold=): newcomers get its free room, moves wait for the boundary */
  shoal__ps_cluster_t pc;
  int cap;            /* entries of the arrays below */
  shoal__ps_job_t *pj;
  shoal__ps_sched_t *plan;
  double *rate_best;
  shoal__ps_slot_t *held; /* per id: the placement the job holds (with restart=, the planners' j->held) */
  int *mine;          /* per machine: GPUs the policy's jobs hold in the engine (scratch of block_foreign) */
  shoal__ps_sched_t blk; /* GPUs held by nobody the policy knows, reserved in slot k for one decision */
  char *planned;
  int *tries;         /* times the planner declined the job */
  shoal__arrivals_t act; /* the active jobs in arrival order (s->active is unordered) */
  /* Which jobs a decision must look at (the others' placement for the
   * current slot is the one they hold): per id the plan's version; a heap of
   * plan ends (a plan that ran out is planned again) and one of the next slot
   * at which a plan's placement changes; the plans changed in this decision */
  int *pver;
  int *pend_slot; /* per id: the plan's last busy slot as of its last change (plan_changed), -1 if none */
  struct slotq { struct slotq_e { int slot, id, ver; } *a; int n, cap; } endq, chgq;
  int *chg;
  int nchg, capchg;
  int *mark; /* per id: stamp of the last decision that listed it */
  int stamp;
  int *rel;  /* released by a re-planning batch (room for replank) */
  shoal_job_t **pend; /* arrived or out of plan, not planned yet */
  int npend, cappend;
  int *idx;           /* scratch: active committed jobs, batch, deferred */
  int capidx;
  shoal_place_t *buf;
  long timer_slot;
  long retry_slot;    /* deferred/rejected jobs are offered again once per slot */
  int nfresh;         /* pend[npend - nfresh ..] arrived since the last decision */
  int err;
  /* counters (shown by `shoal sim` and `shoal sched`) */
  long plans, deferrals, replans, released, pulled, backfilled;
  int freed;          /* a planned job finished since the last decision: its slots are free */
  double est_n[80], est_sum[80]; /* estimate: finished jobs' standalone durations (EST_BINS) */
} slotted_t;

int shoal__ps_view_cluster(const shoal_cluster_t *c, shoal__ps_cluster_t *pc) {
  double *cap = malloc(sizeof(double) * (size_t)c->nmachines * SHOAL_PS_NRES);
  if (!cap) return shoal__seterr(SHOAL_ERR_NOMEM, "slot planner: out of memory");
  for (int h = 0; h < c->nmachines; h++) {
    double *v = cap + (size_t)h * SHOAL_PS_NRES;
    v[SHOAL_PS_GPU] = c->m[h].cap.gpus;
    v[SHOAL_PS_CPU] = c->m[h].cap.cpus;
    v[SHOAL_PS_MEM] = c->m[h].cap.mem_gb;
    v[SHOAL_PS_NET] = 0; /* the speed model charges the network, not a demand */
  }
  int rc = shoal__ps_cluster_init(pc, c->nmachines, cap);
  free(cap);
  return rc;
}

int shoal__slotted_create(const shoal__slot_planner_t *pl, shoal_sched_t *s, const char *params, void **state) {
  const char *name = pl->name;
  int rc = shoal__param_check(name, params, pl->keys);
  if (rc) return rc;
  slotted_t *p = calloc(1, sizeof *p);
  void *own = calloc(1, pl->size ? pl->size : 1);
  if (!p || !own) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
    goto bad;
  }
  p->pl = pl;
  p->own = own;
  p->name = name;
  p->hmax = 2000;
  shoal__arrivals_init(&p->act);
  long pull = 0, nogap = 0, pullk = 32, backfill = 0, restart = 0, hold = 0;
  if ((rc = shoal__param_double(name, params, "slot", 3600, 1, 1e7, &p->slot_s)) ||
      (rc = shoal__param_long(name, params, "backfill", pl->backfill, 0, 2, &backfill)) ||
      (rc = shoal__param_long(name, params, "restart", pl->restart, 0, 1, &restart)) ||
      (rc = shoal__param_long(name, params, "hold", pl->hold, 0, 1, &hold)) ||
      (rc = shoal__param_double(name, params, "fit", pl->fit, 0, 1, &p->fit)) ||
      (rc = shoal__param_double(name, params, "age", 1, 0, 1e6, &p->age)) ||
      (rc = shoal__param_double(name, params, "estimate", 0, 0, 1e9, &p->est_s)) ||
      (rc = shoal__param_long(name, params, "pull", pl->pull, 0, 2, &pull)) ||
      (rc = shoal__param_long(name, params, "nogap", 0, 0, 1, &nogap)) ||
      (rc = shoal__param_long(name, params, "pullk", pullk, 1, 1000000, &pullk)) ||
      (rc = pl->configure(own, s, params, p->hmax, &p->replan)))
    goto bad;
  if (p->replan && !pl->replan_params) {
    rc = shoal__seterr(SHOAL_ERR_INTERNAL, "%s: re-planning asked for without its parameters", name);
    goto bad;
  }
  p->buf = malloc(sizeof *p->buf * (size_t)s->cluster->nmachines);
  if (!p->buf || (rc = shoal__ps_view_cluster(s->cluster, &p->pc))) {
    free(p->buf);
    rc = rc ? rc : shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
    goto bad;
  }
  p->pull = (int)pull;
  p->backfill = (int)backfill;
  p->restart = (int)restart;
  p->hold = (int)hold;
  p->nogap = (int)nogap;
  p->pull_k = (int)pullk;
  p->timer_slot = -1;
  p->retry_slot = -1;
  *state = p;
  return 0;
bad:
  free(own);
  free(p);
  return rc;
}

void shoal__slotted_destroy(void *state) {
  slotted_t *p = state;
  if (!p) return;
  for (int i = 0; i < p->cap; i++) shoal__ps_sched_free(&p->plan[i]), free(p->held[i].pl);
  free(p->held);
  free(p->mine);
  shoal__ps_sched_free(&p->blk);
  free(p->pj);
  free(p->plan);
  free(p->rate_best);
  free(p->planned);
  free(p->tries);
  free(p->pend);
  shoal__arrivals_free(&p->act);
  free(p->pver);
  free(p->pend_slot);
  free(p->endq.a);
  free(p->chgq.a);
  free(p->chg);
  free(p->mark);
  free(p->rel);
  free(p->idx);
  free(p->bf);
  free(p->buf);
  shoal__ps_cluster_free(&p->pc);
  free(p->own);
  free(p);
}

void shoal__slotted_stats(void *state, char *buf, size_t cap) {
  slotted_t *p = state;
  int n = snprintf(buf, cap, "plans=%ld deferrals=%ld", p->plans, p->deferrals);
  if (p->replan && n > 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, " replans=%ld released=%ld", p->replans, p->released);
  if (p->pull && n > 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " pulled=%ld", p->pulled);
  if (p->backfill && n > 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, " backfilled=%ld", p->backfilled);
  if (p->pl->stats && n > 0 && (size_t)n < cap) p->pl->stats(p->own, buf + n, cap - (size_t)n);
}

/* Make id addressable in the per-job arrays. */
static int grow(slotted_t *p, int id) {
  if (id < p->cap) return 0;
  int n = p->cap ? p->cap : 256;
  while (n <= id) n *= 2;
  shoal__ps_job_t *pj = realloc(p->pj, sizeof *pj * (size_t)n);
  if (pj) p->pj = pj;
  shoal__ps_sched_t *pl = realloc(p->plan, sizeof *pl * (size_t)n);
  if (pl) p->plan = pl;
  double *rb = realloc(p->rate_best, sizeof *rb * (size_t)n);
  if (rb) p->rate_best = rb;
  shoal__ps_slot_t *hd = realloc(p->held, sizeof *hd * (size_t)n);
  if (hd) {
    for (int i = 0; i < p->cap && hd != p->held; i++) /* the views point into it */
      if (p->pj[i].held) p->pj[i].held = &hd[i];
    p->held = hd;
  }
  char *pd = realloc(p->planned, (size_t)n);
  if (pd) p->planned = pd;
  int *tr = realloc(p->tries, sizeof *tr * (size_t)n);
  if (tr) p->tries = tr;
  int *pv = realloc(p->pver, sizeof *pv * (size_t)n);
  if (pv) p->pver = pv;
  int *mk = realloc(p->mark, sizeof *mk * (size_t)n);
  if (mk) p->mark = mk;
  int *pe = realloc(p->pend_slot, sizeof *pe * (size_t)n);
  if (pe) p->pend_slot = pe;
  if (!pj || !pl || !rb || !hd || !pd || !tr || !pv || !mk || !pe) return p->err = SHOAL_ERR_NOMEM;
  for (int i = p->cap; i < n; i++) {
    memset(&p->pj[i], 0, sizeof p->pj[i]);
    shoal__ps_sched_init(&p->plan[i], 0);
    p->rate_best[i] = 0;
    p->held[i] = (shoal__ps_slot_t){0, 0, NULL};
    p->planned[i] = 0;
    p->tries[i] = 0;
    p->pver[i] = 0;
    p->mark[i] = -1;
    p->pend_slot[i] = -1;
  }
  p->cap = n;
  return 0;
}

static int slotq_less(const struct slotq_e *a, const struct slotq_e *b) {
  return a->slot < b->slot || (a->slot == b->slot && a->id < b->id);
}

static void slotq_push(slotted_t *p, struct slotq *q, int slot, int id) {
  if (q->n == q->cap) {
    int nc = q->cap ? q->cap * 2 : 256;
    struct slotq_e *a = realloc(q->a, sizeof *a * (size_t)nc);
    if (!a) {
      p->err = SHOAL_ERR_NOMEM;
      return;
    }
    q->a = a;
    q->cap = nc;
  }
  struct slotq_e e = {slot, id, p->pver[id]};
  int i = q->n++;
  while (i > 0 && slotq_less(&e, &q->a[(i - 1) / 2])) {
    q->a[i] = q->a[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  q->a[i] = e;
}

static void slotq_pop(struct slotq *q) {
  struct slotq_e last = q->a[--q->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, m = i;
    const struct slotq_e *b = &last;
    if (l < q->n && slotq_less(&q->a[l], b)) m = l, b = &q->a[l];
    if (l + 1 < q->n && slotq_less(&q->a[l + 1], b)) m = l + 1;
    if (m == i) break;
    q->a[i] = q->a[m];
    i = m;
  }
  if (q->n) q->a[i] = last;
}

/* plan[id] changed (set, re-planned, dropped): the decision looks at it */
static void plan_changed(slotted_t *p, int id) {
  p->pver[id]++;
  if (p->nchg == p->capchg) {
    int nc = p->capchg ? p->capchg * 2 : 256;
    int *c = realloc(p->chg, sizeof *c * (size_t)nc);
    if (!c) {
      p->err = SHOAL_ERR_NOMEM;
      return;
    }
    p->chg = c;
    p->capchg = nc;
  }
  p->chg[p->nchg++] = id;
  p->pend_slot[id] = p->planned[id] ? shoal__ps_sched_end(&p->plan[id]) : -1;
  if (p->planned[id]) slotq_push(p, &p->endq, p->pend_slot[id], id);
}

static void push_pending(slotted_t *p, shoal_job_t *j) {
  if (p->npend == p->cappend) {
    int n = p->cappend ? 2 * p->cappend : 64;
    shoal_job_t **q = realloc(p->pend, sizeof *q * (size_t)n);
    if (!q) {
      p->err = SHOAL_ERR_NOMEM;
      return;
    }
    p->pend = q;
    p->cappend = n;
  }
  p->pend[p->npend++] = j;
}

void shoal__slotted_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  slotted_t *p = state;
  (void)s;
  if (grow(p, j->id)) return;
  if (shoal__arrivals_add(&p->act, j)) {
    p->err = SHOAL_ERR_NOMEM;
    return;
  }
  push_pending(p, j);
  p->nfresh++;
}

static double standalone_rate(const shoal_sched_t *s, const shoal_job_t *j);
static int est_bin(double d);

static long slot_of(const slotted_t *p, double t) { return (long)floor(t / p->slot_s + 1e-9); }

static void drop_plan(slotted_t *p, int id, int from) {
  shoal__ps_release(&p->pc, &p->pj[id], &p->plan[id], from);
  shoal__ps_sched_free(&p->plan[id]);
  p->planned[id] = 0;
  plan_changed(p, id);
}

void shoal__slotted_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  slotted_t *p = state;
  shoal__arrivals_remove(&p->act, j);
  if (p->est_s > 0) {
    double full = standalone_rate(s, j), d = full > 0 ? j->work / full : 0;
    p->est_n[est_bin(d)] += 1;
    p->est_sum[est_bin(d)] += d;
  }
  if (j->id >= p->cap || !p->planned[j->id]) return;
  drop_plan(p, j->id, (int)slot_of(p, s->now)); /* the engine freed it now */
  p->freed = 1;
}

void shoal__slotted_timer(void *state, shoal_sched_t *s, int64_t tag) {
  (void)state, (void)s, (void)tag;
}

void shoal__ps_view(const shoal_sched_t *s, const shoal_job_t *j, double slot_s, int slot, double est_s,
                    shoal__ps_job_t *pj) {
  memset(pj, 0, sizeof *pj);
  pj->id = j->id;
  pj->arrival = slot;
  int W = j->max_workers > j->gpus ? j->max_workers : j->gpus;
  if (W > s->cluster->gpus_total) W = s->cluster->gpus_total;
  pj->wmax = W < 1 ? 1 : W;
  /* the job's elastic range is honoured: a rigid job (min_workers = gpus, a parameter-server job whose
   * training cannot resume at another worker count) runs all its workers or none */
  pj->wmin = j->min_workers < 1 ? 1 : j->min_workers > pj->wmax ? pj->wmax : j->min_workers;
  pj->dw[SHOAL_PS_GPU] = j->worker_demand.gpus;
  pj->dw[SHOAL_PS_CPU] = j->worker_demand.cpus;
  pj->dw[SHOAL_PS_MEM] = j->worker_demand.mem_gb;
  pj->dp[SHOAL_PS_GPU] = j->ps_demand.gpus;
  pj->dp[SHOAL_PS_CPU] = j->ps_demand.cpus;
  pj->dp[SHOAL_PS_MEM] = j->ps_demand.mem_gb;
  pj->kappa = j->arch == SHOAL_ARCH_PS && j->gpus > 0 ? fmin(1.0, (double)j->ps / j->gpus) : 0;
  int Wr = j->gpus < 1 ? 1 : j->gpus; /* rates measured at the requested size */
  int P = shoal__ps_count(pj->kappa, Wr);
  double full = shoal_sched_rate_consolidated(s, j, Wr, P);
  double rin = full / Wr;
  double rex = rin;
  if (s->cluster->nmachines >= 2 && (Wr >= 2 || P >= 1)) {
    shoal_place_t two[2] = {{0, (int16_t)(Wr - Wr / 2), (int16_t)(P - P / 2)}, {1, (int16_t)(Wr / 2), (int16_t)(P / 2)}};
    if (Wr == 1) two[0].ps = 0, two[1].ps = (int16_t)P;
    double r = shoal_sched_rate(s, j, two, 2) / Wr;
    if (r > 0) rex = fmin(r, rin);
  }
  if (!(rin > 0)) rin = rex = 1e-9;
  pj->work = est_s > 0 && full > 0 ? est_s * full : shoal_job_remaining(j, s->now);
  pj->rho_in = rin * slot_s;
  pj->rho_ex = rex * slot_s;
  /* the plan counts the current slot as whole, but part of it is gone:
   * ask for that part's work on top (at most what wmax co-located workers
   * would do), so the job does not fall behind its plan at once */
  double gone = s->now / slot_s - slot;
  if (gone > 0 && gone < 1) pj->work += gone * pj->wmax * pj->rho_in;
}

/* Remaining-work estimate for the "estimate" ablation, fitted online from
 * the jobs finished so far: durations D (at the requested size) in
 * log-spaced bins (8 per decade, 1 s .. 1e10 s); a job that has run a
 * seconds is expected to need E[D - a | D > a]. Before any job finished,
 * and for a job that outlived every finished one, the guess is
 * max(prior, a) (estimate=PRIOR seconds). */
#define EST_BINS 80
static int est_bin(double d) {
  int b = d > 1 ? (int)(8 * log10(d)) : 0;
  return b < 0 ? 0 : b >= EST_BINS ? EST_BINS - 1 : b;
}

static double standalone_rate(const shoal_sched_t *s, const shoal_job_t *j) {
  return shoal_sched_rate_consolidated(s, j, j->gpus < 1 ? 1 : j->gpus, j->arch == SHOAL_ARCH_PS ? j->ps : 0);
}

static double estimate_remaining(const slotted_t *p, const shoal_sched_t *s, const shoal_job_t *j) {
  double full = standalone_rate(s, j);
  double a = full > 0 ? shoal_sched_work_done(s, j) / full : 0; /* run seconds at the requested size */
  int b0 = est_bin(a);
  double n = 0, sum = 0;
  for (int b = b0; b < EST_BINS; b++) {
    if (b == b0 && !(p->est_sum[b] > a * p->est_n[b])) continue; /* a's own bin only if its mean is past a */
    n += p->est_n[b];
    sum += p->est_sum[b];
  }
  double r = n > 0 ? sum / n - a : fmax(p->est_s, a);
  return r > 1 ? r : 1;
}

/* p->held[j->id] = the placement j holds in the engine (empty if none). */
static int held_slot(slotted_t *p, const shoal_job_t *j) {
  shoal__ps_slot_t *sl = &p->held[j->id];
  shoal__ps_slot_clear(sl);
  for (int e = 0; e < j->alloc.n; e++)
    if (shoal__ps_slot_add(sl, j->alloc.p[e].machine, j->alloc.p[e].workers, j->alloc.p[e].ps))
      return p->err = SHOAL_ERR_NOMEM;
  return 0;
}

/* Rates fitted to the speed model (fit=): the slot model's work is linear in the workers (rho per worker),
 * the speed model's is not (a second worker of a communication-bound job may even slow it down). The rates
 * at the requested size over- or underestimate every other size, so a plan that widens a job falls behind
 * and is planned again (a restart each time). Fitted: wmax is the most workers (at least wmin) whose
 * per-worker rate is at least `fit` of one worker's alone, and rho the least per-worker rate up to wmax, so
 * that the model is a lower bound of the speed model at every size it plans (the spread penalty
 * rho_ex/rho_in is kept). */
static void fit_rates(const slotted_t *p, const shoal_sched_t *s, const shoal_job_t *j, shoal__ps_job_t *pj) {
  double r1 = shoal_sched_rate_consolidated(s, j, 1, shoal__ps_count(pj->kappa, 1)), lo = r1;
  if (!(r1 > 0)) return;
  int w = 2;
  for (; w <= pj->wmax; w++) {
    double rw = shoal_sched_rate_consolidated(s, j, w, shoal__ps_count(pj->kappa, w)) / w;
    if (w > pj->wmin && !(rw >= p->fit * r1)) break; /* (the job's own floor is kept, whatever its rate) */
    if (rw < lo) lo = rw;
  }
  double spread = pj->rho_in > 0 ? pj->rho_ex / pj->rho_in : 1;
  pj->wmax = w - 1;
  pj->rho_in = lo * p->slot_s;
  pj->rho_ex = pj->rho_in * spread;
}

static void view(slotted_t *p, shoal_sched_t *s, shoal_job_t *j, int slot, shoal__ps_job_t *pj) {
  shoal__ps_view(s, j, p->slot_s, slot, p->est_s > 0 ? estimate_remaining(p, s, j) : 0, pj);
  if (p->fit > 0) { /* the view's extra work for the part of the slot gone, at the fitted rates */
    double gone = s->now / p->slot_s - slot, extra = gone > 0 && gone < 1 ? gone * pj->wmax * pj->rho_in : 0;
    fit_rates(p, s, j, pj);
    if (extra > 0) pj->work += gone * pj->wmax * pj->rho_in - extra;
  }
  if (p->restart && s->restart_cost > 0 && !held_slot(p, j)) {
    /* restart cost in the objective: a change of placement loses restart_cost s of a slot (at most 0.9 of
     * one: a slot shorter than a restart still runs) */
    pj->restart = fmin(0.9, s->restart_cost / p->slot_s);
    pj->held = &p->held[j->id];
  }
  /* A plan must cover its work within hmax slots: a job longer than that at its spread rate is planned in
   * pieces (its plan runs out and it is planned again, as any plan that ran out). It was deferred at every
   * slot, for ever: the run never ended. Jobs within it keep their plans. */
  double piece = p->hmax * pj->wmax * pj->rho_ex;
  if (piece > 0 && pj->work > piece) pj->work = piece;
}

static int cmp_job(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  return x->id - y->id;
}

static int sched_last_gap(const shoal__ps_sched_t *S);

/* The planner's schedule for job j from slot k into S (p->pj[j->id] is its view). With nogap, a schedule
 * that pauses the job (an empty slot between busy ones) is replaced by the planner's schedule from the slot
 * after its last pause, up to 8 times: a job that starts on a slot's crumbs and then waits behind the
 * reservations made before it holds its place in the queue for the whole wait while running an hour of it
 * (on the whole Philly trace greedy's jobs ran 13,300 s on average over a span of 109,000-166,000 s). It
 * waits instead and starts when it can run to the end. */
static int plan_nogap(slotted_t *p, shoal_sched_t *s, shoal_job_t *j, int k, shoal__ps_sched_t *S) {
  int id = j->id;
  int rc = p->pl->plan(p->own, &p->pc, &p->pj[id], k, &p->tries[id], S);
  for (int round = 0; p->nogap && rc == 0 && round < 8; round++) {
    int g = sched_last_gap(S);
    if (g < 0) break;
    shoal__ps_job_t later;
    view(p, s, j, g + 1, &later); /* no part of slot g + 1 is gone: its work without that part */
    later.arrival = p->pj[id].arrival;
    shoal__ps_sched_t T;
    int r2 = p->pl->plan(p->own, &p->pc, &later, g + 1, &p->tries[id], &T);
    if (r2 == SHOAL_ERR_INFEASIBLE || r2 == SHOAL__SLOT_DECLINED) break; /* keep the paused schedule */
    if (r2) {
      shoal__ps_sched_free(S);
      return r2;
    }
    shoal__ps_sched_free(S);
    *S = T;
    p->pj[id] = later;
  }
  return rc;
}

/* One job on its own (no re-planning), by the planner. */
static int plan_one(slotted_t *p, shoal_sched_t *s, shoal_job_t *j, int slot, int *planned) {
  int id = j->id;
  *planned = 0;
  view(p, s, j, slot, &p->pj[id]);
  if (!(p->pj[id].work > 0)) return 0;
  shoal__ps_sched_t S;
  int rc = plan_nogap(p, s, j, slot, &S);
  if (rc == SHOAL_ERR_INFEASIBLE) { /* defer to the next slot */
    p->deferrals++;
    return 0;
  }
  if (rc == SHOAL__SLOT_DECLINED) return 0; /* offered again at the next slot */
  if (rc) return rc;
  if ((rc = shoal__ps_sched_check(&p->pc, &p->pj[id], &S, 1)) || (rc = shoal__ps_commit(&p->pc, &p->pj[id], &S))) {
    shoal__ps_sched_free(&S);
    return rc;
  }
  shoal__ps_sched_free(&p->plan[id]);
  shoal__ps_sched_fit(&S); /* kept until the job ends */
  p->plan[id] = S;
  p->planned[id] = 1;
  plan_changed(p, id);
  p->plans++;
  *planned = 1;
  return 0;
}

static int idx_room(slotted_t *p, int n) {
  if (n <= p->capidx) return 0;
  int *q = realloc(p->idx, sizeof *q * (size_t)n);
  if (!q) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", p->name);
  p->idx = q;
  p->capidx = n;
  return 0;
}

/* The work job id's plan gives it in its slots before k (at p->pj[id]'s rates). */
static double work_before(const slotted_t *p, int id, int k) {
  double w = 0;
  for (int q = 0; q < p->plan[id].len && p->plan[id].start + q < k; q++)
    w += shoal__ps_slot_work(&p->pj[id], &p->plan[id].slot[q]);
  return w;
}

/* A new job of a re-planning batch through the planner's own plan (SHOAL__PS_NEW_BY_PLAN_NEW): a job it
 * declines waits for the next slot, as a deferred one. */
static int plan_new_own(void *arg, const shoal__ps_cluster_t *pc, const shoal__ps_job_t *j, int k, shoal__ps_sched_t *out) {
  slotted_t *p = arg;
  int rc = p->pl->plan(p->own, pc, j, k, &p->tries[j->id], out);
  return rc == SHOAL__SLOT_DECLINED ? SHOAL_ERR_INFEASIBLE : rc;
}

/* A rigid job (wmin > 1) cannot run on the crumbs a stream of smaller jobs leaves: released by every
 * arrival batch whose newcomers are smaller and planned again behind them, it waited as long as the
 * stream lasted (two 1-GPU machines, one 1-GPU job every 25 s: a 2-worker job started after the last
 * one). Such a job that has waited (since its arrival, less its time running) `age` times its remaining
 * standalone time or more keeps its plan: newcomers are planned around it (age=; 0: off). */
static int aged(const slotted_t *p, const shoal_sched_t *s, const shoal_job_t *j) {
  if (!(p->age > 0) || p->pj[j->id].wmin <= 1) return 0;
  /* (run_s counts up to the job's last change: a running job's wait is overstated, and it stays aged) */
  double full = standalone_rate(s, j), waited = s->now - j->arrival - j->run_s - j->restart_s;
  return full > 0 && waited >= p->age * shoal_job_remaining(j, s->now) / full;
}

/* Re-planning batch (shoal__ps_replan) over pend[from..npend): committed
 * jobs' views are refreshed so that their remaining work is the engine's
 * (Q = remaining now + planned work before slot k). */
static int plan_batch(slotted_t *p, shoal_sched_t *s, int from, int k, int release) {
  int nb = p->npend - from, rc;
  if ((rc = idx_room(p, s->nactive + 2 * nb + 1))) return rc;
  int *act = p->idx, na = 0;
  if (release)
    for (int a = p->act.head; a >= 0; a = p->act.next[a]) {
      shoal_job_t *j = p->act.job[a];
      int id = j->id;
      if (!p->planned[id] || shoal__ps_sched_end(&p->plan[id]) < k || aged(p, s, j)) continue;
      shoal__ps_job_t now;
      view(p, s, j, k, &now);
      p->pj[id].work = now.work + work_before(p, id, k);
      p->pj[id].restart = now.restart;
      p->pj[id].held = now.held;
      act[na++] = id;
    }
  int *batch = act + na, *def = batch + nb, ndef = 0, nrel = 0;
  for (int q = 0; q < nb; q++) {
    shoal_job_t *j = p->pend[from + q];
    int id = j->id;
    view(p, s, j, k, &p->pj[id]);
    shoal__ps_sched_free(&p->plan[id]);
    shoal__ps_sched_init(&p->plan[id], k);
    batch[q] = id;
  }
  shoal__ps_larr_stats_t *st = NULL;
  const shoal__ps_replan_params_t *rp = p->pl->replan_params(p->own, &st);
  if (!p->rel && !(p->rel = malloc(sizeof *p->rel * (size_t)(rp->replan_k + 1))))
    return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", p->name);
  shoal__ps_replan_params_t rpk = *rp;
  rpk.release_next = p->hold && s->now > k * p->slot_s + 1e-9; /* between boundaries */
  if (rpk.new_by == SHOAL__PS_NEW_BY_PLAN_NEW) rpk.plan_new = plan_new_own, rpk.plan_new_arg = p;
  rc = shoal__ps_replan(&p->pc, p->pj, p->plan, act, na, batch, nb, k, &rpk, p->rate_best, st, def, &ndef, &nrel,
                        p->rel);
  if (rc) return rc;
  if (release) p->replans++;
  p->released += nrel;
  p->deferrals += ndef;
  /* mark planned: everything in the batch but the deferred */
  for (int q = 0; q < nb; q++) p->planned[batch[q]] = 1;
  for (int q = 0; q < ndef; q++) p->planned[def[q]] = 0;
  for (int q = 0; q < nb; q++) plan_changed(p, batch[q]);
  for (int q = 0; q < nrel; q++) plan_changed(p, p->rel[q]);
  p->plans += nb - ndef;
  int keep = from;
  for (int q = from; q < p->npend; q++)
    if (!p->planned[p->pend[q]->id]) p->pend[keep++] = p->pend[q];
  p->npend = keep;
  return 0;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The placement plan[id] gives job id in slot k, into p->buf; entries. */
static int desired(slotted_t *p, int id, long k) {
  int n = 0;
  const shoal__ps_sched_t *pl = &p->plan[id];
  if (p->planned[id] && k >= pl->start && k < pl->start + pl->len) {
    const shoal__ps_slot_t *sl = &pl->slot[k - pl->start];
    for (int e = 0; e < sl->n; e++) p->buf[n++] = (shoal_place_t){sl->pl[e].h, (int16_t)sl->pl[e].w, (int16_t)sl->pl[e].p};
    n = shoal__place_normalize(p->buf, n);
  }
  return n;
}

/* First slot after k whose planned placement may differ from slot k's
 * (identical plan entries give identical placements), -1 if none. */
static int next_change(const slotted_t *p, int id, int k) {
  if (!p->planned[id]) return -1;
  const shoal__ps_sched_t *pl = &p->plan[id];
  int end = pl->start + pl->len;
  if (k < pl->start) return pl->start;
  if (k >= end) return -1;
  const shoal__ps_slot_t *cur = &pl->slot[k - pl->start];
  for (int t = k + 1; t < end; t++)
    if (!shoal__ps_slot_equal(&pl->slot[t - pl->start], cur)) return t;
  return cur->n ? end : -1;
}

/* First slot >= k of S with workers (absolute), or -1. */
static int sched_next_busy(const shoal__ps_sched_t *S, int k) {
  for (int q = k > S->start ? k - S->start : 0; q < S->len; q++)
    if (S->slot[q].n) return S->start + q;
  return -1;
}

/* The last empty slot of S between its first and last busy ones (the job would be paused there), or -1. */
static int sched_last_gap(const shoal__ps_sched_t *S) {
  int first = sched_next_busy(S, S->start), end = shoal__ps_sched_end(S);
  for (int t = end - 1; first >= 0 && t > first; t--)
    if (!S->slot[t - S->start].n) return t;
  return -1;
}

/* Commit the slots >= k of S (its earlier ones are not touched). */
static int commit_from(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *S, int k) {
  shoal__ps_sched_t T;
  shoal__ps_sched_init(&T, k);
  int rc = shoal__ps_sched_overlay(&T, S, k);
  if (!rc) rc = shoal__ps_commit(c, j, &T);
  shoal__ps_sched_free(&T);
  return rc;
}

/* Plan id keeps its slots before k and takes S's from k on. */
static int replace_from(slotted_t *p, int id, const shoal__ps_sched_t *S, int k) {
  shoal__ps_sched_t *P = &p->plan[id];
  int keep = k - P->start;
  if (keep <= 0) { /* nothing before k (a plan that starts later): S's from k is the plan */
    shoal__ps_sched_free(P);
    shoal__ps_sched_init(P, k);
    keep = 0;
  }
  for (int q = keep; q < P->len; q++) free(P->slot[q].pl);
  if (keep < P->len) P->len = keep;
  int rc = shoal__ps_sched_overlay(P, S, k);
  shoal__ps_sched_fit(P);
  return rc;
}

/* Pull-forward (pull=1): a plan is a reservation made against the plans of its time, and a job that finishes
 * before its plan's end leaves its slots empty; without this, the jobs planned behind it keep their later
 * slots and the cluster idles while they wait. Room in slot k is offered to the jobs that have not started
 * and are planned to start after k, in arrival order: each is planned again from k, with its remaining work,
 * against the residual without its own future slots, and keeps the new plan only if it ends earlier; else its
 * old slots are committed again. Such a job loses no work by moving (it is not running). Started jobs that
 * hold nothing now (paused) are not offered: that measured worse (Philly days 48-51, greedy 21,177 s avg
 * JCT against 19,647 s: a paused job pulled onto crumbs pauses again). A
 * slot with no GPU free ends the walk (every engine worker has a GPU), and so do pullk jobs re-planned in it
 * (oldest first): under a backlog of thousands, with nogap most re-plans pause and are refused, and a walk
 * over all of them at every finish took the whole Philly trace past 10 minutes. */
static int pull_forward(slotted_t *p, shoal_sched_t *s, int k) {
  int tried = 0;
  for (int a = p->act.head; a >= 0 && tried < p->pull_k; a = p->act.next[a]) {
    if (p->pull == 1 && shoal__ps_slot_max(&p->pc, k)[SHOAL_PS_GPU] < 1e-9) break;
    shoal_job_t *j = p->act.job[a];
    int id = j->id, rc;
    if (!p->planned[id] || j->first_start >= 0 || sched_next_busy(&p->plan[id], k) <= k ||
        (p->pull == 1 && !shoal__ps_slot_fits_worker(&p->pc, &p->pj[id], k)))
      continue;
    tried++;
    shoal__ps_job_t old = p->pj[id], now;
    int old_end = shoal__ps_sched_end(&p->plan[id]);
    shoal__ps_release(&p->pc, &old, &p->plan[id], k);
    view(p, s, j, k, &now);
    /* the greedy's end is the earliest any plan can reach (most work in every slot): the planner is asked
     * only when it is earlier (the greedy policy asks the same question twice, for a few microseconds) */
    shoal__ps_sched_t S;
    rc = shoal__ps_greedy(&p->pc, &now, k, p->hmax, 1, &S);
    int sooner = rc == 0 && shoal__ps_sched_end(&S) < old_end;
    if (rc == 0) shoal__ps_sched_free(&S);
    int tries = p->tries[id] > 0 ? p->tries[id] : 1; /* a re-offer: the planner has seen the job */
    if (sooner) rc = p->pl->plan(p->own, &p->pc, &now, k, &tries, &S);
    if (sooner && rc == 0 && shoal__ps_sched_end(&S) < old_end && (!p->nogap || sched_last_gap(&S) < 0)) {
      double before = work_before(p, id, k); /* the view's Q: remaining work now + this */
      if ((rc = shoal__ps_sched_check(&p->pc, &now, &S, 1)) || (rc = shoal__ps_commit(&p->pc, &now, &S)) ||
          (rc = replace_from(p, id, &S, k))) {
        shoal__ps_sched_free(&S);
        return rc;
      }
      shoal__ps_sched_free(&S);
      p->pj[id] = now;
      p->pj[id].arrival = old.arrival;
      p->pj[id].work = now.work + before;
      plan_changed(p, id);
      p->pulled++;
      continue;
    }
    if (sooner && rc == 0) shoal__ps_sched_free(&S);
    else if (rc < 0 && rc != SHOAL_ERR_INFEASIBLE) return rc;
    if ((rc = commit_from(&p->pc, &old, &p->plan[id], k))) return rc;
  }
  return 0;
}

/* 1 if job j's current placement (j->alloc) fits slot k's residual; into *sl. */
static int held_fits(slotted_t *p, const shoal_job_t *j, int k, shoal__ps_slot_t *sl) {
  if (held_slot(p, j) || !shoal__ps_slot_fits(&p->pc, &p->pj[j->id], &p->held[j->id], k)) return 0;
  if (shoal__ps_slot_copy(sl, &p->held[j->id])) return p->err = SHOAL_ERR_NOMEM, 0;
  return 1;
}

/* The placement of job id's next busy planned slot after k replaces *sl (slot k's best) when it fits slot
 * k's residual and does as much work: the job backfilled there then keeps its placement into its plan (a
 * different one would be a restart). */
static void prefer_next(slotted_t *p, int id, int k, shoal__ps_slot_t *sl) {
  const shoal__ps_sched_t *P = &p->plan[id];
  const shoal__ps_job_t *pj = &p->pj[id];
  int t = sched_next_busy(P, k + 1);
  if (t < 0) return;
  const shoal__ps_slot_t *nx = &P->slot[t - P->start];
  if (shoal__ps_slot_fits(&p->pc, pj, nx, k) && shoal__ps_slot_work(pj, nx) >= shoal__ps_slot_work(pj, sl) * (1 - 1e-9) &&
      shoal__ps_slot_copy(sl, nx))
    p->err = SHOAL_ERR_NOMEM;
}

/* A backfill candidate: planned, holds nothing in slot k of its plan, busy later. */
static int bf_candidate(const slotted_t *p, const shoal_job_t *j, int k) {
  int id = j->id;
  const shoal__ps_sched_t *P = &p->plan[id];
  if (!p->planned[id] || j->state == SHOAL_JOB_DONE || P->start + P->len <= k + 1) return 0;
  if (k >= P->start && P->slot[k - P->start].n) return 0; /* planned in k */
  return p->pend_slot[id] > k; /* busy later */
}

typedef struct bf_item { double key; int id; } bf_item_t;

static int bf_less(const bf_item_t *a, const bf_item_t *b) { return a->key < b->key || (a->key == b->key && a->id < b->id); }

static int bf_cmp(const void *a, const void *b) {
  const bf_item_t *x = a, *y = b;
  return bf_less(x, y) ? -1 : bf_less(y, x) ? 1 : 0;
}

/* Moves the m smallest items of it[0..n) to its front, smallest first (quickselect, then a sort of those). */
static void bf_select(bf_item_t *it, int n, int m) {
  if (m <= 0) return;
  int lo = 0, hi = n - 1;
  while (m < n && lo < hi) {
    bf_item_t piv = it[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (bf_less(&it[i], &piv)) i++;
      while (bf_less(&piv, &it[j])) j--;
      if (i <= j) {
        bf_item_t x = it[i];
        it[i++] = it[j];
        it[j--] = x;
      }
    }
    if (m - 1 <= j) hi = j;
    else if (m - 1 >= i) lo = i;
    else break;
  }
  if ((m < n ? m : n) > 1) qsort(it, (size_t)(m < n ? m : n), sizeof *it, bf_cmp);
}

/* Backfill (backfill=1|2): a plan reserves whole slots and most Philly jobs need a third of one, so GPUs that no
 * plan holds in the current slot k (left by early finishes, or never reserved) would idle until a plan reaches
 * them. They go to the planned jobs that hold nothing in slot k (not started yet, or paused between busy
 * slots), oldest first (backfill=1) or shortest remaining first (backfill=2, the default): each takes the most
 * productive placement the residual of slot k offers (the greedy's one-slot best; a job that held a placement in
 * slot k - 1 keeps it when it still fits, so it is not restarted, and else takes the placement of its next
 * planned busy slot when that fits and does as much, so it is not moved there), added to its plan for slot k
 * only. Every
 * other slot of every plan stays as it was, so no job's planned start or placement moves: the work is extra,
 * and a job that finishes on it gives its later slots back (as any early finish). Unplanned jobs (deferred, or
 * rejected by oasis) are not offered. The walk ends when no GPU of slot k is free, so it costs one look per
 * running job at most. */
static int backfill(slotted_t *p, shoal_sched_t *s, int k) {
  shoal__ps_slot_t sl = {0, 0, NULL};
  int rc = 0, n = 0, m = 0;
  if (shoal__ps_slot_max(&p->pc, k)[SHOAL_PS_GPU] < 1e-9) return 0;
  if (p->backfill == 2) { /* shortest remaining time first (at the job's full co-located rate), ties by id */
    for (int a = p->act.head; a >= 0; a = p->act.next[a]) n += bf_candidate(p, p->act.job[a], k);
    if (n > p->capbf) {
      bf_item_t *nb = realloc(p->bf, sizeof *nb * (size_t)n);
      if (!nb) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", p->name);
      p->bf = nb;
      p->capbf = n;
    }
    n = 0;
    for (int a = p->act.head; a >= 0; a = p->act.next[a]) {
      shoal_job_t *j = p->act.job[a];
      if (!bf_candidate(p, j, k)) continue;
      const shoal__ps_job_t *pj = &p->pj[j->id];
      p->bf[n++] = (bf_item_t){shoal_job_remaining(j, s->now) / (pj->wmax * pj->rho_in), j->id};
    }
    /* each placed job takes a GPU at least: no more jobs than free GPUs are placed */
    double free = 0;
    for (int h = 0; h < p->pc.H; h++) free += shoal__ps_res(&p->pc, k, h)[SHOAL_PS_GPU];
    m = (int)(free + 0.5);
    bf_select(p->bf, n, m);
    if (n > m) n = m;
  }
  for (int a = p->act.head, q = 0; p->backfill == 2 ? q < n : a >= 0; p->backfill == 2 ? q++ : (a = p->act.next[a])) {
    if (shoal__ps_slot_max(&p->pc, k)[SHOAL_PS_GPU] < 1e-9) break;
    shoal_job_t *j = p->backfill == 2 ? p->act.job[p->bf[q].id] : p->act.job[a];
    int id = j->id;
    shoal__ps_sched_t *P = &p->plan[id];
    if ((p->backfill != 2 && !bf_candidate(p, j, k)) || !shoal__ps_slot_fits_worker(&p->pc, &p->pj[id], k)) continue;
    if (!held_fits(p, j, k, &sl)) {
      if (p->err) break;
      if ((rc = shoal__ps_slot_best(&p->pc, &p->pj[id], k, k, 1, &sl))) break;
      if (!sl.n) continue;
      prefer_next(p, id, k, &sl);
      if (p->err) break;
    }
    shoal__ps_sched_t T;
    shoal__ps_sched_init(&T, k);
    shoal__ps_slot_t *t = shoal__ps_sched_slot(&T, k);
    if (!t || (rc = shoal__ps_slot_copy(t, &sl)) || (rc = shoal__ps_commit(&p->pc, &p->pj[id], &T))) {
      shoal__ps_sched_free(&T);
      rc = rc ? rc : SHOAL_ERR_NOMEM;
      break;
    }
    if (k < P->start) { /* the plan starts later: T (slot k) followed by it */
      rc = shoal__ps_sched_overlay(&T, P, P->start);
      shoal__ps_sched_free(P);
      *P = T;
    } else {
      shoal__ps_sched_free(&T);
      shoal__ps_slot_t *at = shoal__ps_sched_slot(P, k);
      rc = at ? shoal__ps_slot_copy(at, &sl) : SHOAL_ERR_NOMEM;
    }
    shoal__ps_sched_fit(P);
    if (rc) break;
    plan_changed(p, id);
    p->backfilled++;
  }
  free(sl.pl);
  return rc ? shoal__seterr(rc, "%s: backfill at slot %d: out of memory", p->name, k) : 0;
}

/* The job that stands for capacity the policy does not hold: one GPU a worker. */
static const shoal__ps_job_t blk_job = {.id = -1, .work = 1, .dw = {[SHOAL_PS_GPU] = 1}, .wmax = 1 << 30,
                                        .rho_in = 1, .rho_ex = 1};

/* GPUs that are not free in the engine's cluster and that none of the policy's jobs holds (a live
 * controller takes another user's jobs' nodes, or drained ones, out of its cluster) are out of the
 * planners' view, whose capacity is the cluster's: reserved in slot k for this decision (p->blk, given
 * back by unblock_foreign before the placements are applied). A plan that put one of the policy's jobs on
 * them in slot k is planned again (pending). The engine alone never has such GPUs. */
static int block_foreign(slotted_t *p, shoal_sched_t *s, int k) {
  const shoal_cluster_t *c = s->cluster;
  if (!p->mine && !(p->mine = malloc(sizeof(int) * (size_t)c->nmachines))) return SHOAL_ERR_NOMEM;
  memset(p->mine, 0, sizeof(int) * (size_t)c->nmachines);
  for (int a = p->act.head; a >= 0; a = p->act.next[a]) {
    const shoal_job_t *j = p->act.job[a];
    for (int e = 0; e < j->alloc.n; e++)
      p->mine[j->alloc.p[e].machine] +=
          (int)(j->alloc.p[e].workers * j->worker_demand.gpus + j->alloc.p[e].ps * j->ps_demand.gpus + 0.5);
  }
  shoal__ps_sched_init(&p->blk, k);
  shoal__ps_slot_t *sl = NULL;
  int rc = 0;
  for (int h = 0; h < c->nmachines && !rc; h++) {
    int b = c->m[h].cap.gpus - c->m[h].free.gpus - p->mine[h];
    if (b <= 0) continue;
    /* plans of jobs that do not hold h now but were to use it in slot k give way, then the rest is taken */
    for (int a = p->act.head; a >= 0 && shoal__ps_res(&p->pc, k, h)[SHOAL_PS_GPU] < b - 1e-9; a = p->act.next[a]) {
      shoal_job_t *j = p->act.job[a];
      int id = j->id, held = 0;
      for (int e = 0; e < j->alloc.n; e++) held |= j->alloc.p[e].machine == h;
      const shoal__ps_sched_t *P = &p->plan[id];
      if (held || !p->planned[id] || k < P->start || k >= P->start + P->len) continue;
      const shoal__ps_slot_t *ps = &P->slot[k - P->start];
      int uses = 0;
      for (int e = 0; e < ps->n; e++) uses |= ps->pl[e].h == h;
      if (!uses) continue;
      drop_plan(p, id, k);
      push_pending(p, j);
      p->nfresh++;
    }
    int take = (int)fmin(b, floor(shoal__ps_res(&p->pc, k, h)[SHOAL_PS_GPU] + 1e-9));
    if (take <= 0) continue;
    if (!sl && !(sl = shoal__ps_sched_slot(&p->blk, k))) rc = SHOAL_ERR_NOMEM;
    else rc = shoal__ps_slot_add(sl, h, take, 0);
  }
  if (!rc && sl) rc = shoal__ps_commit(&p->pc, &blk_job, &p->blk);
  if (rc) shoal__ps_sched_free(&p->blk);
  return rc ? shoal__seterr(rc, "%s: the capacity the policy does not hold at slot %d", p->name, k) : p->err;
}

static void unblock_foreign(slotted_t *p) {
  if (p->blk.len) shoal__ps_release(&p->pc, &blk_job, &p->blk, p->blk.start);
  shoal__ps_sched_free(&p->blk);
  shoal__ps_sched_init(&p->blk, 0);
}

int shoal__slotted_schedule(void *state, shoal_sched_t *s) {
  slotted_t *p = state;
  const char *name = p->name;
  if (p->err) return shoal__seterr(p->err, "%s: out of memory", name);
  long k = slot_of(p, s->now);
  int rc = shoal__ps_cluster_ensure(&p->pc, (int)k + 2);
  if (rc)
    return shoal__seterr(rc, "%s: out of memory for the residual capacity of %ld slots of %g s of %d machines (the "
                         "run has reached t = %g s: a longer slot= or a shorter trace)", name, k + 2, p->slot_s,
                         s->cluster->nmachines, s->now);
  if ((rc = block_foreign(p, s, (int)k))) return rc;
  /* jobs whose plan ran out before their work: plan again (in arrival
   * order; the heap of plan ends gives them without looking at the others) */
  int nran = 0;
  while (p->endq.n && p->endq.a[0].slot < k) {
    struct slotq_e e = p->endq.a[0];
    slotq_pop(&p->endq);
    if (e.ver != p->pver[e.id] || !p->planned[e.id] || e.id >= p->act.cap || !p->act.job[e.id]) continue;
    if ((rc = idx_room(p, nran + 1))) return rc;
    p->idx[nran++] = e.id;
  }
  if (nran > 1) qsort(p->idx, (size_t)nran, sizeof *p->idx, cmp_int);
  for (int q = 0; q < nran; q++) {
    shoal_job_t *j = p->act.job[p->idx[q]];
    drop_plan(p, j->id, (int)k);
    push_pending(p, j);
    p->nfresh++;
  }
  if (p->err) return shoal__seterr(p->err, "%s: out of memory", name);
  /* new slot: everyone waiting is offered again; otherwise only the fresh */
  int from = k > p->retry_slot ? 0 : p->npend - p->nfresh, nfresh = p->nfresh, newslot = k > p->retry_slot;
  p->retry_slot = k;
  p->nfresh = 0;
  /* drop finished jobs from the offer */
  int keep = from;
  for (int q = from; q < p->npend; q++)
    if (p->pend[q]->state != SHOAL_JOB_DONE) p->pend[keep++] = p->pend[q];
  p->npend = keep;
  if (p->npend - from > 1) qsort(p->pend + from, (size_t)(p->npend - from), sizeof *p->pend, cmp_job);
  if (p->replan) {
    /* committed jobs are released only when new jobs arrived */
    if (p->npend > from && (rc = plan_batch(p, s, from, (int)k, nfresh > 0))) return rc;
  } else {
    keep = from;
    for (int q = from; q < p->npend; q++) {
      int planned;
      if ((rc = plan_one(p, s, p->pend[q], (int)k, &planned))) return rc;
      if (!planned) p->pend[keep++] = p->pend[q];
    }
    p->npend = keep;
  }
  if (p->pull == 1 && (p->freed || newslot) && (rc = pull_forward(p, s, (int)k))) return rc;
  if (p->backfill && (rc = backfill(p, s, (int)k))) return rc;
  if (p->pull == 2 && (p->freed || newslot) && (rc = pull_forward(p, s, (int)k))) return rc;
  p->freed = 0;
  unblock_foreign(p);
  /* apply slot k: first take resources from jobs whose placement changes,
   * then give the new placements (the plans fit the capacity together). Only
   * jobs whose plan changed in this decision or whose plan's placement
   * changes by slot k can differ from what they hold; in arrival order. */
  if (p->err) return shoal__seterr(p->err, "%s: out of memory", name);
  p->stamp++;
  int ncand = 0;
  for (int q = 0; q < p->nchg; q++) {
    int id = p->chg[q];
    if (p->mark[id] == p->stamp || id >= p->act.cap || !p->act.job[id]) continue;
    if ((rc = idx_room(p, ncand + 1))) return rc;
    p->mark[id] = p->stamp;
    p->idx[ncand++] = id;
  }
  p->nchg = 0;
  while (p->chgq.n && p->chgq.a[0].slot <= k) {
    struct slotq_e e = p->chgq.a[0];
    slotq_pop(&p->chgq);
    if (e.ver != p->pver[e.id] || p->mark[e.id] == p->stamp || e.id >= p->act.cap || !p->act.job[e.id]) continue;
    if ((rc = idx_room(p, ncand + 1))) return rc;
    p->mark[e.id] = p->stamp;
    p->idx[ncand++] = e.id;
  }
  if (ncand > 1) qsort(p->idx, (size_t)ncand, sizeof *p->idx, cmp_int);
  for (int pass = 0; pass < 2; pass++)
    for (int q = 0; q < ncand; q++) {
      shoal_job_t *j = p->act.job[p->idx[q]];
      int n = desired(p, j->id, k);
      if (shoal__place_equal(p->buf, n, j->alloc.p, j->alloc.n)) continue;
      if (pass == 0) rc = j->alloc.n ? shoal_sched_preempt(s, j) : 0;
      else rc = n ? shoal_sched_assign(s, j, p->buf, n) : 0;
      if (rc) return shoal__seterr(rc, "%s: job %d at slot %ld: %s", name, j->id, k, shoal_last_error());
    }
  for (int q = 0; q < ncand; q++) {
    int next = next_change(p, p->idx[q], (int)k);
    if (next > k) slotq_push(p, &p->chgq, next, p->idx[q]);
  }
  if (p->err) return shoal__seterr(p->err, "%s: out of memory", name);
  if ((s->nactive > 0 || p->npend > 0) && p->timer_slot < k + 1) {
    if ((rc = shoal_sched_timer(s, (k + 1) * p->slot_s, k + 1))) return rc;
    p->timer_slot = k + 1;
  }
  return 0;
}
