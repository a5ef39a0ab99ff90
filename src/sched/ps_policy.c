/* Slot planners behind the policy interface (see ps_policy.h). */
#include "sched/ps_policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "sched/place.h"
#include "sched/ps_greedy.h"

typedef struct {
  int planned, tries;
  int released; /* larr: plan released in this decision, to be re-planned */
  double key;   /* size for the re-planning order (larr) */
  shoal__ps_job_t pj;
  shoal__ps_sched_t plan;
} job_plan_t;

typedef struct {
  shoal__ps_pol_t kind;
  double slot_s;
  shoal__ps_run_params_t rp;
  shoal__ps_cluster_t pc;
  shoal__ps_oasis_est_t est;
  job_plan_t *jp; /* by job id */
  int njp;
  shoal_job_t **pend; /* arrived or out of plan, not planned yet */
  int npend, cappend;
  shoal_place_t *buf;
  long timer_slot;
  long retry_slot;    /* deferred/rejected jobs are offered again once per slot */
  int nfresh;         /* pend[npend - nfresh ..] arrived since the last decision */
  int err;
} ps_pol_t;

static const char *const keys[] = {"slot", "theta", "trials", "beta", "sigma", "klp", "mult", "force", "units", "replan", NULL};

int shoal__ps_policy_create(shoal__ps_pol_t kind, shoal_sched_t *s, const char *params, void **state) {
  const char *name = shoal__ps_pol_name(kind);
  int rc = shoal__param_check(name, params, keys);
  if (rc) return rc;
  ps_pol_t *p = calloc(1, sizeof *p);
  if (!p) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
  p->kind = kind;
  shoal__ps_run_defaults(&p->rp);
  long trials, sigma, klp, force, units, replan;
  if ((rc = shoal__param_double(name, params, "slot", 3600, 1, 1e7, &p->slot_s)) ||
      (rc = shoal__param_double(name, params, "theta", p->rp.larr.theta, 1e-6, 1e6, &p->rp.larr.theta)) ||
      (rc = shoal__param_long(name, params, "trials", p->rp.larr.trials, 1, 10000, &trials)) ||
      (rc = shoal__param_double(name, params, "beta", p->rp.larr.beta, 1e-3, 100, &p->rp.larr.beta)) ||
      (rc = shoal__param_long(name, params, "sigma", 0, 0, 1000, &sigma)) ||
      (rc = shoal__param_long(name, params, "klp", p->rp.larr.k_lp, 0, 100000, &klp)) ||
      (rc = shoal__param_double(name, params, "mult", 1, 1e-6, 1e6, &p->rp.oasis.mult)) ||
      (rc = shoal__param_long(name, params, "force", p->rp.oasis_force_after, 1, 1000000, &force)) ||
      (rc = shoal__param_long(name, params, "units", 64, 1, 4096, &units)) ||
      (rc = shoal__param_long(name, params, "replan", 1, 0, 1, &replan))) {
    free(p);
    return rc;
  }
  p->rp.larr.trials = (int)trials;
  p->rp.larr.sigma = (int)sigma;
  p->rp.larr.k_lp = (int)klp;
  p->rp.oasis_force_after = (int)force;
  p->rp.oasis.units = (int)units;
  p->rp.replan = (int)replan;
  p->rp.larr.seed = s->seed;
  p->rp.larr.hmax = p->rp.oasis.hmax = 2000;
  p->rp.oasis.T = 2000;
  const shoal_cluster_t *c = s->cluster;
  double *cap = malloc(sizeof(double) * (size_t)c->nmachines * SHOAL_PS_NRES);
  p->buf = malloc(sizeof *p->buf * (size_t)c->nmachines);
  if (!cap || !p->buf) {
    free(cap);
    free(p->buf);
    free(p);
    return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", name);
  }
  for (int h = 0; h < c->nmachines; h++) {
    cap[h * 4 + 0] = c->m[h].cap.gpus;
    cap[h * 4 + 1] = c->m[h].cap.cpus;
    cap[h * 4 + 2] = c->m[h].cap.mem_gb;
    cap[h * 4 + 3] = 0; /* the simulator's jobs declare no NIC demand */
  }
  rc = shoal__ps_cluster_init(&p->pc, c->nmachines, cap);
  free(cap);
  if (rc) {
    free(p->buf);
    free(p);
    return rc;
  }
  shoal__ps_oasis_est_init(&p->est);
  p->timer_slot = -1;
  p->retry_slot = -1;
  *state = p;
  return 0;
}

void shoal__ps_policy_destroy(void *state) {
  ps_pol_t *p = state;
  if (!p) return;
  for (int i = 0; i < p->njp; i++) shoal__ps_sched_free(&p->jp[i].plan);
  free(p->jp);
  free(p->pend);
  free(p->buf);
  shoal__ps_cluster_free(&p->pc);
  free(p);
}

static job_plan_t *plan_of(ps_pol_t *p, int id) {
  if (id < 0) return NULL;
  if (id >= p->njp) {
    int n = p->njp ? p->njp : 256;
    while (n <= id) n *= 2;
    job_plan_t *jp = realloc(p->jp, sizeof *jp * (size_t)n);
    if (!jp) return NULL;
    memset(jp + p->njp, 0, sizeof *jp * (size_t)(n - p->njp));
    p->jp = jp;
    p->njp = n;
  }
  return &p->jp[id];
}

static void push_pending(ps_pol_t *p, shoal_job_t *j) {
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

void shoal__ps_policy_arrive(void *state, shoal_sched_t *s, shoal_job_t *j) {
  ps_pol_t *p = state;
  push_pending(p, j);
  p->nfresh++;
}

static long slot_of(const ps_pol_t *p, double t) { return (long)floor(t / p->slot_s + 1e-9); }

void shoal__ps_policy_finish(void *state, shoal_sched_t *s, shoal_job_t *j) {
  ps_pol_t *p = state;
  job_plan_t *jp = plan_of(p, j->id);
  if (!jp || !jp->planned) return;
  shoal__ps_release(&p->pc, &jp->pj, &jp->plan, (int)slot_of(p, s->now)); /* the engine freed it now */
  shoal__ps_sched_free(&jp->plan);
  jp->planned = 0;
}

void shoal__ps_policy_timer(void *state, shoal_sched_t *s, int64_t tag) {}

/* The planner's view of job j as of now: remaining work, demands, and per
 * worker rates taken from the simulator's speed model (co-located: all on
 * one machine; distributed: split over two machines). */
static void describe(ps_pol_t *p, shoal_sched_t *s, shoal_job_t *j, int slot, shoal__ps_job_t *pj) {
  memset(pj, 0, sizeof *pj);
  pj->id = j->id;
  pj->arrival = slot;
  pj->work = shoal_job_remaining(j, s->now);
  int W = j->max_workers > j->gpus ? j->max_workers : j->gpus;
  if (W > s->cluster->gpus_total) W = s->cluster->gpus_total;
  pj->wmax = W < 1 ? 1 : W;
  pj->dw[0] = j->worker_demand.gpus;
  pj->dw[1] = j->worker_demand.cpus;
  pj->dw[2] = j->worker_demand.mem_gb;
  pj->dp[0] = j->ps_demand.gpus;
  pj->dp[1] = j->ps_demand.cpus;
  pj->dp[2] = j->ps_demand.mem_gb;
  pj->kappa = j->arch == SHOAL_ARCH_PS && j->gpus > 0 ? fmin(1.0, (double)j->ps / j->gpus) : 0;
  int Wr = j->gpus < 1 ? 1 : j->gpus; /* rates measured at the requested size */
  int P = shoal__ps_count(pj->kappa, Wr);
  double rin = shoal_sched_rate_consolidated(s, j, Wr, P) / Wr;
  double rex = rin;
  if (s->cluster->nmachines >= 2 && (Wr >= 2 || P >= 1)) {
    shoal_place_t two[2] = {{0, (int16_t)(Wr - Wr / 2), (int16_t)(P - P / 2)}, {1, (int16_t)(Wr / 2), (int16_t)(P / 2)}};
    if (Wr == 1) two[0].ps = 0, two[1].ps = (int16_t)P;
    double r = shoal_sched_rate(s, j, two, 2) / Wr;
    if (r > 0) rex = fmin(r, rin);
  }
  if (!(rin > 0)) rin = rex = 1e-9;
  pj->rho_in = rin * p->slot_s;
  pj->rho_ex = rex * p->slot_s;
  /* the plan counts the current slot as whole, but part of it is gone:
   * ask for that part's work on top (at most what wmax co-located workers
   * would do), so the job does not fall behind its plan at once */
  double gone = s->now / p->slot_s - slot;
  if (gone > 0 && gone < 1) pj->work += gone * pj->wmax * pj->rho_in;
}

static int cmp_job(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  if (x->arrival != y->arrival) return x->arrival < y->arrival ? -1 : 1;
  return x->id - y->id;
}

/* larr re-planning order: size, then arrival, then id */
static ps_pol_t *sort_ctx;
static int cmp_size(const void *a, const void *b) {
  const shoal_job_t *x = *(shoal_job_t *const *)a, *y = *(shoal_job_t *const *)b;
  double kx = sort_ctx->jp[x->id].key, ky = sort_ctx->jp[y->id].key;
  if (kx < ky - 1e-12) return -1;
  if (kx > ky + 1e-12) return 1;
  return cmp_job(a, b);
}

static int plan_job(ps_pol_t *p, shoal_sched_t *s, shoal_job_t *j, int slot, int released, int *planned) {
  job_plan_t *jp = plan_of(p, j->id);
  if (!jp) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", shoal__ps_pol_name(p->kind));
  *planned = 0;
  describe(p, s, j, slot, &jp->pj);
  if (!(jp->pj.work > 0)) return 0;
  shoal__ps_sched_t S;
  double payoff = 1;
  int rc;
  if (p->kind == SHOAL_PS_POL_LARR && released) /* re-plan of a released job: the greedy, as in the slot driver */
    rc = shoal__ps_greedy(&p->pc, &jp->pj, slot, p->rp.larr.hmax, p->rp.larr.theta, &S);
  else if (p->kind == SHOAL_PS_POL_LARR) rc = shoal__ps_larr(&p->pc, &jp->pj, slot, &p->rp.larr, &S, NULL);
  else if (p->kind == SHOAL_PS_POL_GREEDY) rc = shoal__ps_greedy(&p->pc, &jp->pj, slot, p->rp.larr.hmax, p->rp.larr.theta, &S);
  else {
    if (jp->tries == 0) shoal__ps_oasis_observe(&p->est, &p->pc, &jp->pj, &p->rp.oasis);
    rc = shoal__ps_oasis(&p->pc, &jp->pj, slot, &p->rp.oasis, &p->est, &payoff, &S);
  }
  if (rc == SHOAL_ERR_INFEASIBLE) return 0; /* defer to the next slot */
  if (rc) return rc;
  if (p->kind == SHOAL_PS_POL_OASIS && !(payoff > 0) && ++jp->tries < p->rp.oasis_force_after) {
    shoal__ps_sched_free(&S);
    return 0; /* rejected: offered again at the next slot */
  }
  if ((rc = shoal__ps_commit(&p->pc, &jp->pj, &S))) {
    shoal__ps_sched_free(&S);
    return rc;
  }
  jp->plan = S;
  jp->planned = 1;
  *planned = 1;
  return 0;
}

int shoal__ps_policy_schedule(void *state, shoal_sched_t *s) {
  ps_pol_t *p = state;
  if (p->err) return shoal__seterr(p->err, "%s: out of memory", shoal__ps_pol_name(p->kind));
  long k = slot_of(p, s->now);
  int rc = shoal__ps_cluster_ensure(&p->pc, (int)k + 2);
  if (rc) return rc;
  /* jobs whose plan ran out before their work: plan again */
  for (int a = 0; a < s->nactive; a++) {
    shoal_job_t *j = s->active[a];
    job_plan_t *jp = plan_of(p, j->id);
    if (!jp) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", shoal__ps_pol_name(p->kind));
    if (jp->planned && shoal__ps_sched_end(&jp->plan) < k) {
      shoal__ps_release(&p->pc, &jp->pj, &jp->plan, (int)k);
      shoal__ps_sched_free(&jp->plan);
      jp->planned = 0;
      push_pending(p, j);
      p->nfresh++;
    }
  }
  /* new slot: everyone waiting is offered again; otherwise only the fresh */
  int from = k > p->retry_slot ? 0 : p->npend - p->nfresh, nfresh = p->nfresh;
  p->retry_slot = k;
  p->nfresh = 0;
  int replanning = 0;
  if (p->kind == SHOAL_PS_POL_LARR && p->rp.replan && nfresh > 0 && p->npend > from) {
    /* re-planning (docs/scheduling.md): release the plans of up to
     * replan_k running jobs larger than the smallest waiting one, then plan
     * everything smallest first */
    double thr = INFINITY;
    for (int q = from; q < p->npend; q++) {
      job_plan_t *jp = plan_of(p, p->pend[q]->id);
      if (!jp) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", shoal__ps_pol_name(p->kind));
      describe(p, s, p->pend[q], (int)k, &jp->pj);
      jp->key = shoal__ps_size_key(&p->pc, &jp->pj, p->rp.replan_key);
      if (jp->key < thr) thr = jp->key;
    }
    int ncand = 0;
    shoal_job_t **cand = malloc(sizeof *cand * (size_t)(s->nactive ? s->nactive : 1));
    if (!cand) return shoal__seterr(SHOAL_ERR_NOMEM, "%s: out of memory", shoal__ps_pol_name(p->kind));
    for (int a = 0; a < s->nactive; a++) {
      shoal_job_t *j = s->active[a];
      job_plan_t *jp = &p->jp[j->id];
      if (!jp->planned || shoal__ps_sched_end(&jp->plan) < k) continue;
      shoal__ps_job_t now;
      describe(p, s, j, (int)k, &now);
      jp->key = shoal__ps_size_key(&p->pc, &now, p->rp.replan_key);
      if (jp->key > thr) cand[ncand++] = j;
    }
    sort_ctx = p;
    if (ncand > 1) qsort(cand, (size_t)ncand, sizeof *cand, cmp_size);
    for (int q = ncand > p->rp.replan_k ? ncand - p->rp.replan_k : 0; q < ncand; q++) {
      job_plan_t *jp = &p->jp[cand[q]->id];
      shoal__ps_release(&p->pc, &jp->pj, &jp->plan, (int)k);
      shoal__ps_sched_free(&jp->plan);
      jp->planned = 0;
      jp->released = 1;
      push_pending(p, cand[q]);
    }
    free(cand);
    if (p->err) return shoal__seterr(p->err, "%s: out of memory", shoal__ps_pol_name(p->kind));
    replanning = 1;
  }
  sort_ctx = p;
  if (p->npend - from > 1) qsort(p->pend + from, (size_t)(p->npend - from), sizeof *p->pend, replanning ? cmp_size : cmp_job);
  int keep = from;
  for (int q = from; q < p->npend; q++) {
    shoal_job_t *j = p->pend[q];
    job_plan_t *jp = &p->jp[j->id];
    int released = jp->released;
    jp->released = 0;
    if (j->state == SHOAL_JOB_DONE) continue;
    int planned;
    if ((rc = plan_job(p, s, j, (int)k, released, &planned))) return rc;
    if (!planned) p->pend[keep++] = j;
  }
  p->npend = keep;
  /* apply slot k: first take resources from jobs whose placement changes,
   * then give the new placements (the plans fit the capacity together) */
  for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < s->nactive; a++) {
      shoal_job_t *j = s->active[a];
      job_plan_t *jp = &p->jp[j->id];
      int n = 0;
      if (jp->planned && k >= jp->plan.start && k < jp->plan.start + jp->plan.len) {
        const shoal__ps_slot_t *sl = &jp->plan.slot[k - jp->plan.start];
        for (int e = 0; e < sl->n; e++)
          p->buf[n++] = (shoal_place_t){sl->pl[e].h, (int16_t)sl->pl[e].w, (int16_t)sl->pl[e].p};
        n = shoal__place_normalize(p->buf, n);
      }
      if (shoal__place_equal(p->buf, n, j->alloc.p, j->alloc.n)) continue;
      if (pass == 0) rc = j->alloc.n ? shoal_sched_preempt(s, j) : 0;
      else rc = n ? shoal_sched_assign(s, j, p->buf, n) : 0;
      if (rc) return shoal__seterr(rc, "%s: job %d at slot %ld: %s", shoal__ps_pol_name(p->kind), j->id, k, shoal_last_error());
    }
  if ((s->nactive > 0 || p->npend > 0) && p->timer_slot < k + 1) {
    if ((rc = shoal_sched_timer(s, (k + 1) * p->slot_s, k + 1))) return rc;
    p->timer_slot = k + 1;
  }
  return 0;
}
