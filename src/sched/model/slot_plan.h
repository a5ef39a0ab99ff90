/* Parameter-server job model with worker-PS locality, in the slot view the
 * online policies larr / oasis / greedy work on (spec online-scheduling.md
 * §§1-2). Self-contained: plain arrays, no dependency on the simulator's job
 * structs, so the algorithms can be tested against GLPK's exact MIP.
 *
 * Time is cut into slots of `slot_s` seconds. A job's schedule says, for each
 * slot from its start, how many workers and PSs sit on which machine. The
 * binary locality rule (§2.2): a slot whose workers and PSs all share one
 * machine runs at rho_in mini-batches per worker, anything else at rho_ex. */
#ifndef SHOAL_SCHED_MODEL_SLOT_PLAN_H
#define SHOAL_SCHED_MODEL_SLOT_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* Resource vectors (demands, capacities, residuals) are indexed by name;
 * any unit, only ratios matter. */
enum { SHOAL_PS_GPU = 0, SHOAL_PS_CPU = 1, SHOAL_PS_MEM = 2, SHOAL_PS_NET = 3, SHOAL_PS_NRES = 4 };

typedef struct {
  int id;
  int arrival;                /* first usable slot a_i */
  double work;                /* Q_i: mini-batches */
  double dw[SHOAL_PS_NRES];   /* demand of one worker */
  double dp[SHOAL_PS_NRES];   /* demand of one PS */
  int wmax;                   /* most concurrent workers */
  int wmin;                   /* fewest workers of a busy slot (0 or 1: any; a rigid job, wmin = wmax, runs
                               * all its workers or none): a slot holds 0 or wmin..wmax workers */
  double kappa;               /* PS:worker ratio, P = clamp(ceil(kappa W), 1, W) */
  double rho_in, rho_ex;      /* mini-batches per worker per slot, co-located / distributed */
  /* Restart cost in the objective (0: placement changes are free, the spec's model): the fraction of a
   * slot's work a job loses in a slot whose placement differs from the one before it (a resize, a move, a
   * resume), as the engine charges its restart cost; `held` is what the job holds before the plan's first
   * slot (NULL or empty: not running; its start is paid whatever the plan, so it is not charged). */
  double restart;
  const struct shoal__ps_slot *held;
} shoal__ps_job_t;

/* Per-iteration times of §2.2 turned into per-slot rates (§2.4):
 * tau_in = tc + 2g/b_in, tau_ex = tc + 2g/b_ex, rho = slot_s / tau. */
int shoal__ps_job_set_rates(shoal__ps_job_t *j, double tc_s, double grad_bytes, double b_in, double b_ex,
                            double slot_s);

/* 1 if a slot may hold W workers of j: 0, or wmin..wmax. */
static inline int shoal__ps_w_ok(const shoal__ps_job_t *j, int W) {
  return W == 0 || (W >= (j->wmin > 1 ? j->wmin : 1) && W <= j->wmax);
}

/* PSs a slot with W workers needs: clamp(ceil(kappa W), 1, W); 0 when W = 0
 * or kappa <= 0 (all-reduce jobs, no PSs). */
int shoal__ps_count(double kappa, int w);

/* Machines with capacity, and the residual capacity of every slot after all
 * committed schedules. Slots past `nslots` are untouched (full capacity) and
 * are materialized on demand. */
typedef struct {
  int H;
  double *cap;   /* H * NRES */
  int nslots;
  double *res;   /* nslots * H * NRES */
  /* per slot, the largest residual of each resource over the machines
   * (smax, valid where sok[t]; commit and release clear sok of the slots they
   * touch; code that writes res directly must do so before the first query) */
  double *smax;  /* nslots * NRES */
  unsigned char *sok;
  double capmax[SHOAL_PS_NRES];
  /* memo of theta^u for the prices (a few distinct u: usage fractions) */
  double pm_theta[256], pm_u[256], pm_v[256];
} shoal__ps_cluster_t;

int  shoal__ps_cluster_init(shoal__ps_cluster_t *c, int H, const double *cap /* H*NRES */);
void shoal__ps_cluster_free(shoal__ps_cluster_t *c);
int  shoal__ps_cluster_copy(shoal__ps_cluster_t *dst, const shoal__ps_cluster_t *src);
/* Make slots [0, t_end) addressable. */
int  shoal__ps_cluster_ensure(shoal__ps_cluster_t *c, int t_end);
/* Residual vector of machine h in slot t (slots past nslots: the capacity). */
static inline const double *shoal__ps_res(const shoal__ps_cluster_t *c, int t, int h) {
  return t < c->nslots ? c->res + ((size_t)t * c->H + h) * SHOAL_PS_NRES : c->cap + (size_t)h * SHOAL_PS_NRES;
}
static inline const double *shoal__ps_cap(const shoal__ps_cluster_t *c, int h) {
  return c->cap + (size_t)h * SHOAL_PS_NRES;
}
/* The largest residual of each resource over the machines in slot t (a
 * bound: no machine has more of any resource). */
const double *shoal__ps_slot_max(const shoal__ps_cluster_t *c, int t);
/* 1 if some machine has room for one worker of j in slot t (else every
 * placement of workers in the slot is empty). */
int shoal__ps_slot_fits_worker(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t);
/* pow(base, ex), memoized in the cluster (prices take a few distinct
 * exponents: usage fractions); the very value pow() returns. */
double shoal__ps_pow(const shoal__ps_cluster_t *c, double base, double ex);
/* Largest w <= wmax co-located workers (with their PSs) fitting in res. */
int shoal__ps_max_coloc(const shoal__ps_job_t *j, const double *res);

/* One machine's share of a slot. */
typedef struct { int h, w, p; } shoal__ps_place_t;
typedef struct shoal__ps_slot { int n, cap; shoal__ps_place_t *pl; } shoal__ps_slot_t;
/* A job's schedule: slots start .. start+len-1. */
typedef struct {
  int start, len;
  shoal__ps_slot_t *slot;
  int cap; /* entries allocated in slot (>= len; grown by doubling: planners add slot after slot) */
} shoal__ps_sched_t;

void shoal__ps_sched_init(shoal__ps_sched_t *s, int start);
void shoal__ps_sched_free(shoal__ps_sched_t *s);
int  shoal__ps_sched_copy(shoal__ps_sched_t *dst, const shoal__ps_sched_t *src);
/* Write src's slots from slot `from` (absolute) on into dst, over what dst has there. */
int  shoal__ps_sched_overlay(shoal__ps_sched_t *dst, const shoal__ps_sched_t *src, int from);
/* Give back the slot entries past len (a plan kept for the job's lifetime
 * need not keep the doubling's slack); keeps the array if realloc fails. */
void shoal__ps_sched_fit(shoal__ps_sched_t *s);
/* Make slot t (absolute) addressable; returns it or NULL on allocation failure. */
shoal__ps_slot_t *shoal__ps_sched_slot(shoal__ps_sched_t *s, int t);
void shoal__ps_slot_clear(shoal__ps_slot_t *sl);
/* Add dw workers and dp PSs on machine h (negative removes); drops empty entries. */
int  shoal__ps_slot_add(shoal__ps_slot_t *sl, int h, int dw, int dp);
int  shoal__ps_slot_copy(shoal__ps_slot_t *dst, const shoal__ps_slot_t *src);
void shoal__ps_slot_totals(const shoal__ps_slot_t *sl, int *w, int *p);
/* 1 if every worker and PS of the slot is on one machine. */
int  shoal__ps_slot_coloc(const shoal__ps_slot_t *sl);
/* Mini-batches the slot processes, mode taken from the actual placement. */
double shoal__ps_slot_work(const shoal__ps_job_t *j, const shoal__ps_slot_t *sl);
double shoal__ps_sched_work(const shoal__ps_job_t *j, const shoal__ps_sched_t *s);
/* 1 if a and b place the same workers and PSs on the same machines (in any order). */
int shoal__ps_slot_equal(const shoal__ps_slot_t *a, const shoal__ps_slot_t *b);
/* 1 if placement sl (non-empty, at most wmax workers, its PSs by the rule) fits slot t's residual. */
int shoal__ps_slot_fits(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl, int t);
/* Work of a slot with placement sl after `prev` (the slot before it; ran: the job held a placement
 * before): the slot's work, less j->restart of it when the placement changes (sl differs from prev, or
 * resumes after a pause). With j->restart = 0 the slot's work. */
double shoal__ps_slot_work_after(const shoal__ps_job_t *j, const shoal__ps_slot_t *prev, int ran,
                                 const shoal__ps_slot_t *sl);
/* The schedule's work net of its placement changes (shoal__ps_slot_work_after over its slots, the first
 * after j->held); shoal__ps_sched_work when j->restart = 0. */
double shoal__ps_sched_work_net(const shoal__ps_job_t *j, const shoal__ps_sched_t *s);
/* Last slot with workers (absolute), or -1. */
int shoal__ps_sched_end(const shoal__ps_sched_t *s);
/* Slot where cumulative work first reaches the job's work (absolute), or -1. */
int shoal__ps_sched_finish(const shoal__ps_job_t *j, const shoal__ps_sched_t *s);

/* Check a schedule against the residual capacity: machine capacities,
 * W = 0 or wmin <= W <= wmax, ceil(kappa W) <= P <= W, nothing before the arrival, and (if
 * need_cover) work >= Q. Returns 0 or SHOAL_ERR_INFEASIBLE with a message
 * naming the slot, machine and row. */
int shoal__ps_sched_check(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s,
                          int need_cover);
/* Subtract the schedule's usage from the residual capacity. */
int shoal__ps_commit(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s);
/* Give back the usage of slots >= from (a job finished early or is replanned). */
void shoal__ps_release(shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s, int from);

/* Exponential prices of §4.2: pi[h][r][t] = theta^u * (1 + 1e-3 (t - s)),
 * u = 1 - res/cap. cost = sum pi * use / cap. */
double shoal__ps_price(const shoal__ps_cluster_t *c, int t, int h, int r, int s, double theta);
double shoal__ps_unit_cost(const shoal__ps_cluster_t *c, int t, int h, int s, double theta, const double *demand);
/* The price split in its two factors, for callers that price one residual
 * vector in many slots (a run of identical slots, a merged LP block):
 * pw[r] = theta^u of machine h at residual res (0 where the capacity is 0),
 * the time factor f of slot t for a job planned from s, and the unit cost
 * from them. shoal__ps_price and shoal__ps_unit_cost are computed through
 * these very expressions, so both routes give the same bits. */
void shoal__ps_price_pw(const shoal__ps_cluster_t *c, int h, const double *res, double theta, double *pw);
static inline double shoal__ps_price_f(int t, int s) { return 1.0 + 1e-3 * (t - s); }
static inline double shoal__ps_unit_cost_pw(const double *pw, const double *cap, double f, const double *demand) {
  double cost = 0;
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (demand[r] > 0 && cap[r] > 0) cost += pw[r] * f * demand[r] / cap[r];
  return cost;
}
double shoal__ps_slot_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl,
                           int t, int s, double theta);
double shoal__ps_sched_cost(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_sched_t *s,
                            int s0, double theta);

/* Reduce slot t so that it still processes >= need mini-batches (if it does
 * now) with the fewest workers (never below wmin), dropping from the priciest machines, and the
 * PSs to exactly clamp(ceil(kappa W),1,W). */
int shoal__ps_slot_trim(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_slot_t *sl, int t, int s,
                        double theta, double need);
/* Drop slots after the finishing one and trim the finishing slot (§4.6 TRIM). */
int shoal__ps_sched_trim(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_sched_t *s, int s0,
                         double theta);

#endif
