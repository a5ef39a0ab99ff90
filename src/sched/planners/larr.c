/* larr (spec §4): LP relaxation, randomized rounding, repair, best of R. */
#include "sched/planners/larr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "sched/planners/greedy.h"
#include "sched/planners/lp.h"

#define EPS 1e-9

void shoal__ps_larr_defaults(shoal__ps_larr_params_t *p) {
  p->theta = 0.125; /* spec: 16; packing prices win in our runs (docs/scheduling.md) */
  p->trials = 20;
  p->beta = 1;
  p->sigma = 0;
  p->k_lp = 32;
  p->lp_it_lim = 5000;
  p->search = 0;
  p->lp_blocks = 16;
  p->far_slots = 20;
  p->far_blocks = 0;
  p->hmax = 400;
  p->seed = 1;
}

static int RR(shoal_rng_t *g, double v) {
  if (!(v > 0)) return 0;
  double f = floor(v);
  return (int)f + (shoal_rng_uniform(g) < v - f ? 1 : 0);
}

/* Current use of this slot on machine h. */
static void slot_on(const shoal__ps_slot_t *sl, int h, int *w, int *p) {
  *w = *p = 0;
  for (int e = 0; e < sl->n; e++)
    if (sl->pl[e].h == h) {
      *w = sl->pl[e].w;
      *p = sl->pl[e].p;
      return;
    }
}

static int room_for(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int h, int w, int p) {
  const double *res = shoal__ps_res(c, t, h);
  for (int r = 0; r < SHOAL_PS_NRES; r++)
    if (w * j->dw[r] + p * j->dp[r] > res[r] + EPS) return 0;
  return 1;
}

/* Cheapest machine (among mach) where one more worker (dw=1) or PS (dp=1)
 * fits next to what the slot has there; -1 if none. */
static int cheapest_with_room(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl,
                              int t, int s, double theta, const int *mach, int nm, int dw, int dp, int exclude) {
  int best = -1;
  double bc = 0;
  for (int k = 0; k < nm; k++) {
    int h = mach[k], w, p;
    if (h == exclude) continue;
    slot_on(sl, h, &w, &p);
    if (!room_for(c, j, t, h, w + dw, p + dp)) continue;
    double cost = shoal__ps_unit_cost(c, t, h, s, theta, dw ? j->dw : j->dp);
    if (best < 0 || cost < bc - EPS) best = h, bc = cost;
  }
  return best;
}

static int priciest(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, const shoal__ps_slot_t *sl, int t, int s,
                    double theta, int want_w) {
  int best = -1;
  double bc = -1;
  for (int e = 0; e < sl->n; e++) {
    if (want_w ? !sl->pl[e].w : !sl->pl[e].p) continue;
    double cost = shoal__ps_unit_cost(c, t, sl->pl[e].h, s, theta, want_w ? j->dw : j->dp);
    if (cost > bc) bc = cost, best = sl->pl[e].h;
  }
  return best;
}

/* Bring the PS total to target: add on the cheapest machines with room,
 * remove from the priciest. Returns 1 if target reached. */
static int fix_ps(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_slot_t *sl, int t, int s,
                  double theta, const int *mach, int nm, int *err) {
  int W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  int target = shoal__ps_count(j->kappa, W);
  while (P > target && !*err) {
    int h = priciest(c, j, sl, t, s, theta, 0);
    *err = shoal__ps_slot_add(sl, h, 0, -1);
    P--;
  }
  while (P < target && !*err) {
    int h = cheapest_with_room(c, j, sl, t, s, theta, mach, nm, 0, 1, -1);
    if (h < 0) return 0;
    *err = shoal__ps_slot_add(sl, h, 0, 1);
    P++;
  }
  return 1;
}

/* REPAIR_PACK of one slot (§4.6): no machine over its residual, W <= wmax,
 * ceil(kappa W) <= P <= W; a slot left with fewer than wmin workers is emptied. Moves PSs off overfull machines first, then drops
 * workers. */
static int repair_pack(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_slot_t *sl, int t, int s,
                       double theta, const int *mach, int nm) {
  int err = 0, W, P;
  shoal__ps_slot_totals(sl, &W, &P);
  while (W > j->wmax && !err) {
    err = shoal__ps_slot_add(sl, priciest(c, j, sl, t, s, theta, 1), -1, 0);
    W--;
  }
  for (int guard = 0; guard < 100000 && !err; guard++) {
    int bad = -1;
    for (int e = 0; e < sl->n && bad < 0; e++)
      if (!room_for(c, j, t, sl->pl[e].h, sl->pl[e].w, sl->pl[e].p)) bad = e;
    if (bad < 0) {
      if (fix_ps(c, j, sl, t, s, theta, mach, nm, &err)) break;
      /* PSs do not fit anywhere: one worker less, try again */
      if (err) break;
      int h = priciest(c, j, sl, t, s, theta, 1);
      if (h < 0) {
        shoal__ps_slot_clear(sl);
        break;
      }
      err = shoal__ps_slot_add(sl, h, -1, 0);
      continue;
    }
    int h = sl->pl[bad].h;
    if (sl->pl[bad].p > 0) {
      int to = cheapest_with_room(c, j, sl, t, s, theta, mach, nm, 0, 1, h);
      if (to >= 0) {
        if (!(err = shoal__ps_slot_add(sl, h, 0, -1))) err = shoal__ps_slot_add(sl, to, 0, 1);
        continue;
      }
      if (!sl->pl[bad].w) { /* only PSs here and nowhere to go */
        err = shoal__ps_slot_add(sl, h, 0, -1);
        continue;
      }
    }
    err = shoal__ps_slot_add(sl, h, -1, 0);
  }
  if (err) return err;
  shoal__ps_slot_totals(sl, &W, &P);
  if (!shoal__ps_w_ok(j, W)) W = 0; /* fewer than wmin workers: the slot holds none (cover repair fills it whole) */
  if (W == 0) shoal__ps_slot_clear(sl);
  return 0;
}

/* REPAIR_COVER (§4.6): add work where it is cheapest per unit until the
 * deficit is gone, extending the horizon up to e_max. */
static int repair_cover(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, shoal__ps_sched_t *S, int s,
                        int e_star, int e_max, double theta, const int *mach, int nm, shoal__ps_slot_t *best_slot,
                        char *have_best, shoal__ps_best_memo_t *memo, int *ok) {
  int rc = 0, E = e_star;
  double deficit = j->work - shoal__ps_sched_work(j, S);
  shoal__ps_slot_t tmp = {0};
  *ok = 0;
  if (deficit <= j->work * EPS) {
    *ok = 1;
    return 0;
  }
  for (long it = 0; deficit > j->work * EPS && it < 1000000; it++) {
    int bt = -1, bkind = 0, bh = -1;
    double bratio = -1;
    for (int t = s; t <= E; t++) {
      shoal__ps_slot_t *sl = shoal__ps_sched_slot(S, t);
      if (!sl) {
        rc = shoal__seterr(SHOAL_ERR_NOMEM, "repair");
        goto out;
      }
      double w0 = shoal__ps_slot_work(j, sl), c0 = shoal__ps_slot_cost(c, j, sl, t, s, theta);
      int W, P;
      shoal__ps_slot_totals(sl, &W, &P);
      /* (a) one more worker in the slot's mode */
      if (W > 0 && W < j->wmax) {
        int h = -1;
        if (shoal__ps_slot_coloc(sl)) {
          int w, p;
          h = sl->pl[0].h;
          slot_on(sl, h, &w, &p);
          if (!room_for(c, j, t, h, w + 1, shoal__ps_count(j->kappa, W + 1))) h = -1;
          if (h >= 0) {
            if ((rc = shoal__ps_slot_copy(&tmp, sl)) || (rc = shoal__ps_slot_add(&tmp, h, 1, shoal__ps_count(j->kappa, W + 1) - P))) goto out;
          }
        } else {
          h = cheapest_with_room(c, j, sl, t, s, theta, mach, nm, 1, 0, -1);
          if (h >= 0) {
            int err = 0;
            if ((rc = shoal__ps_slot_copy(&tmp, sl)) || (rc = shoal__ps_slot_add(&tmp, h, 1, 0))) goto out;
            if (!fix_ps(c, j, &tmp, t, s, theta, mach, nm, &err)) h = -1;
            if (err) {
              rc = err;
              goto out;
            }
          }
        }
        if (h >= 0) {
          double dw = shoal__ps_slot_work(j, &tmp) - w0, dc = shoal__ps_slot_cost(c, j, &tmp, t, s, theta) - c0;
          double ratio = dw > EPS ? (dc > EPS ? dw / dc : 1e300) : -1;
          if (ratio > bratio) bratio = ratio, bt = t, bkind = 1, bh = h;
        }
      }
      /* (b) the slot's best configuration */
      shoal__ps_slot_t *b = &best_slot[t - s];
      if (!have_best[t - s]) {
        if ((rc = shoal__ps_slot_best_memo(c, j, t, s, memo, b))) goto out;
        have_best[t - s] = 1;
      }
      double dw = shoal__ps_slot_work(j, b) - w0, dc = shoal__ps_slot_cost(c, j, b, t, s, theta) - c0;
      double ratio = dw > EPS ? (dc > EPS ? dw / dc : 1e300) : -1;
      if (ratio > bratio) bratio = ratio, bt = t, bkind = 2, bh = -1;
    }
    if (bt < 0) {
      if (E >= e_max) goto out; /* not coverable: *ok stays 0 */
      E++;
      continue;
    }
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(S, bt);
    double w0 = shoal__ps_slot_work(j, sl);
    if (bkind == 2) {
      if ((rc = shoal__ps_slot_copy(sl, &best_slot[bt - s]))) goto out;
    } else if (shoal__ps_slot_coloc(sl) && sl->pl[0].h == bh) {
      int W, P;
      shoal__ps_slot_totals(sl, &W, &P);
      if ((rc = shoal__ps_slot_add(sl, bh, 1, shoal__ps_count(j->kappa, W + 1) - P))) goto out;
    } else {
      int err = 0;
      if ((rc = shoal__ps_slot_add(sl, bh, 1, 0))) goto out;
      fix_ps(c, j, sl, bt, s, theta, mach, nm, &err);
      if ((rc = err)) goto out;
    }
    deficit -= shoal__ps_slot_work(j, sl) - w0;
  }
  *ok = deficit <= j->work * EPS;
out:
  free(tmp.pl);
  return rc;
}

/* ROUND (§4.5) of one slot. */
static int round_slot(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s, const shoal__ps_lp_t *lp,
                      const int *mach, int nm, double beta, double theta, shoal_rng_t *g, shoal__ps_slot_t *sl) {
  int rc = 0;
  double ms = 0, md = shoal__ps_lp_val(lp, 'd', 0, t);
  for (int k = 0; k < nm; k++) ms += shoal__ps_lp_val(lp, 'z', k, t);
  ms += md;
  shoal__ps_slot_clear(sl);
  if (ms < 1e-9) return 0;
  double p = fmin(1.0, beta * ms);
  if (shoal_rng_uniform(g) >= p) return 0;
  double bp = beta * ms / p, u = shoal_rng_uniform(g) * ms, acc = 0;
  int pick = -1; /* machine index, or -1 for distributed */
  for (int k = 0; k < nm; k++) {
    double z = shoal__ps_lp_val(lp, 'z', k, t);
    acc += z;
    if (z > 0 && u < acc) {
      pick = k;
      break;
    }
  }
  if (pick >= 0) {
    double z = shoal__ps_lp_val(lp, 'z', pick, t);
    int w = RR(g, fmin(shoal__ps_lp_mcap(lp, pick, t), bp * shoal__ps_lp_val(lp, 'x', pick, t) / z));
    if (w > j->wmax) w = j->wmax;
    if (w >= 1) rc = shoal__ps_slot_add(sl, mach[pick], w, shoal__ps_count(j->kappa, w));
    return rc;
  }
  if (md < 1e-12) return 0;
  int W = 0;
  for (int k = 0; k < nm && !rc; k++) {
    int w = RR(g, bp * shoal__ps_lp_val(lp, 'y', k, t) / md);
    if (w > 0) rc = shoal__ps_slot_add(sl, mach[k], w, 0);
    W += w;
  }
  while (W > j->wmax && !rc) {
    rc = shoal__ps_slot_add(sl, priciest(c, j, sl, t, s, theta, 1), -1, 0);
    W--;
  }
  if (rc || W == 0) return rc;
  /* split P over machines in proportion to q*, then fix the total */
  int P = shoal__ps_count(j->kappa, W);
  double qs = 0;
  for (int k = 0; k < nm; k++) qs += shoal__ps_lp_val(lp, 'q', k, t);
  if (qs > 1e-12)
    for (int k = 0; k < nm && !rc; k++) {
      int q = RR(g, P * shoal__ps_lp_val(lp, 'q', k, t) / qs);
      if (q > 0) rc = shoal__ps_slot_add(sl, mach[k], 0, q);
    }
  int err = 0;
  if (!rc) fix_ps(c, j, sl, t, s, theta, mach, nm, &err); /* leftover shortfall: repair_pack */
  return rc ? rc : err;
}

/* SLOT_BEST of slots s..e_max, computed on first use (through one memo: the
 * cluster does not change during a decision) and shared by trials. */
typedef struct {
  int n;
  shoal__ps_slot_t *slot;
  char *have;
  shoal__ps_best_memo_t memo;
} best_cache_t;

static int cache_init(best_cache_t *bc, int n, const shoal__ps_cluster_t *c, double theta) {
  bc->n = n;
  bc->slot = calloc((size_t)n, sizeof *bc->slot);
  bc->have = calloc((size_t)n, 1);
  if (!bc->slot || !bc->have) {
    free(bc->slot);
    free(bc->have);
    return shoal__seterr(SHOAL_ERR_NOMEM, "larr cache");
  }
  int rc = shoal__ps_best_memo_init(&bc->memo, c, theta);
  if (rc) {
    free(bc->slot);
    free(bc->have);
  }
  return rc;
}
static void cache_free(best_cache_t *bc) {
  for (int k = 0; k < bc->n; k++) free(bc->slot[k].pl);
  free(bc->slot);
  free(bc->have);
  shoal__ps_best_memo_free(&bc->memo);
}

static int round_trial(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_star, int e_max,
                       const shoal__ps_lp_t *lp, const int *mach, int nm, double beta, double theta, uint64_t seed,
                       best_cache_t *bc, shoal__ps_sched_t *out, int *cover_repairs);

int shoal__ps_larr_round(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_star, int e_max,
                         const shoal__ps_lp_t *lp, const int *mach, int nm, double beta, double theta, uint64_t seed,
                         shoal__ps_sched_t *out, int *cover_repairs) {
  best_cache_t bc;
  int rc = cache_init(&bc, e_max - s + 1, c, theta);
  if (rc) return rc;
  rc = round_trial(c, j, s, e_star, e_max, lp, mach, nm, beta, theta, seed, &bc, out, cover_repairs);
  cache_free(&bc);
  return rc;
}

static int round_trial(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_star, int e_max,
                       const shoal__ps_lp_t *lp, const int *mach, int nm, double beta, double theta, uint64_t seed,
                       best_cache_t *bc, shoal__ps_sched_t *out, int *cover_repairs) {
  shoal_rng_t g;
  shoal_rng_seed(&g, seed);
  shoal__ps_sched_t S;
  shoal__ps_sched_init(&S, s);
  int rc = 0, ok;
  for (int t = s; t <= e_star && !rc; t++) {
    shoal__ps_slot_t *sl = shoal__ps_sched_slot(&S, t);
    if (!sl) rc = shoal__seterr(SHOAL_ERR_NOMEM, "larr rounding");
    else if (!(rc = round_slot(c, j, t, s, lp, mach, nm, beta, theta, &g, sl)))
      rc = repair_pack(c, j, sl, t, s, theta, mach, nm);
  }
  if (rc) goto fail;
  double before = shoal__ps_sched_work(j, &S);
  if ((rc = repair_cover(c, j, &S, s, e_star, e_max, theta, mach, nm, bc->slot, bc->have, &bc->memo, &ok))) goto fail;
  if (!ok) {
    rc = shoal__seterr(SHOAL_ERR_INFEASIBLE, "larr: job %d not covered by slot %d after repair", j->id, e_max);
    goto fail;
  }
  if (cover_repairs) *cover_repairs = before < j->work * (1 - EPS);
  if ((rc = shoal__ps_sched_trim(c, j, &S, s, theta))) goto fail;
  *out = S;
  return 0;
fail:
  shoal__ps_sched_free(&S);
  return rc;
}

/* Work of G's slots after slot e. */
static double tail_work(const shoal__ps_job_t *j, const shoal__ps_sched_t *G, int e) {
  double w = 0;
  for (int k = 0; k < G->len; k++)
    if (G->start + k > e) w += shoal__ps_slot_work(j, &G->slot[k]);
  return w;
}

/* Machines for the LP: those the greedy uses plus the k_lp with the most
 * residual capacity (normalized, summed over resources and slots). */
static int pick_machines(const shoal__ps_cluster_t *c, const shoal__ps_sched_t *G, int s, int e, int k_lp, int **out,
                         int *nout) {
  int H = c->H;
  double *score = malloc(sizeof(double) * (size_t)H);
  char *in = calloc((size_t)H, 1);
  int *m = malloc(sizeof(int) * (size_t)(H));
  if (!score || !in || !m) {
    free(score);
    free(in);
    free(m);
    return shoal__seterr(SHOAL_ERR_NOMEM, "larr machines");
  }
  int n = 0;
  for (int k = 0; k < G->len; k++)
    for (int q = 0; q < G->slot[k].n; q++) {
      int h = G->slot[k].pl[q].h;
      if (!in[h]) in[h] = 1, m[n++] = h;
    }
  for (int h = 0; h < H; h++) {
    double sc = 0;
    const double *cap = shoal__ps_cap(c, h);
    for (int t = s; t <= e; t++) {
      const double *res = shoal__ps_res(c, t, h);
      double mn = 1;
      for (int r = 0; r < SHOAL_PS_NRES; r++)
        if (cap[r] > 0) mn = fmin(mn, res[r] / cap[r]);
      sc += mn;
    }
    score[h] = sc;
  }
  /* partial selection of the k_lp best (ties: lower id), O(H k_lp) */
  for (int take = 0; take < k_lp; take++) {
    int b = -1;
    for (int h = 0; h < H; h++)
      if (!in[h] && score[h] > 0 && (b < 0 || score[h] > score[b] + 1e-12)) b = h;
    if (b < 0) break;
    in[b] = 1;
    m[n++] = b;
  }
  free(score);
  free(in);
  *out = m;
  *nout = n;
  return 0;
}

/* One call of shoal__ps_larr: the job, the greedy's schedule G, the best
 * schedule so far (best.slot == G.slot: G itself) and the LP's pieces. */
typedef struct {
  const shoal__ps_cluster_t *c;
  const shoal__ps_job_t *j;
  const shoal__ps_larr_params_t *p;
  shoal__ps_larr_stats_t *st;
  int s, e_g, e_max;
  shoal__ps_sched_t G, best;
  double best_cost;
  int *mach, nm;
  shoal__ps_lp_t *lp;
  best_cache_t bc;
} larr_run_t;

/* The rounding trials on the solved LP (for jh, the head's work when the LP
 * was cut at e_h): the cheapest covering, feasible schedule ending by e_max
 * replaces the best. */
static int rounding_trials(larr_run_t *r, const shoal__ps_job_t *jh, int e_star, int e_rnd, int e_h, int cut) {
  const shoal__ps_larr_params_t *p = r->p;
  shoal__ps_larr_stats_t *st = r->st;
  for (int trial = 0; trial < p->trials; trial++) {
    shoal__ps_sched_t S;
    int heavy = 0;
    uint64_t seed = p->seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(uint32_t)r->j->id << 20) ^ (uint64_t)trial;
    int r2 = round_trial(r->c, jh, r->s, e_star, e_rnd, r->lp, r->mach, r->nm, p->beta, p->theta, seed, &r->bc, &S, &heavy);
    if (st) st->trials++;
    if (r2 == SHOAL_ERR_INFEASIBLE) continue;
    /* G's slots after e_h complete S (S ends by e_h): against a fixed residual a job's slots do
     * not share capacity, so any head fits with G's tail */
    if (!r2 && cut && (r2 = shoal__ps_sched_overlay(&S, &r->G, e_h + 1))) shoal__ps_sched_free(&S);
    if (r2) return r2;
    if (st) st->trials_ok++, st->trials_cover_repair += heavy;
    double cost = shoal__ps_sched_cost(r->c, r->j, &S, r->s, p->theta);
    int end = shoal__ps_sched_end(&S);
    /* with a restart cost (j->restart) a trial covers only net of its placement changes, as G does */
    if (end <= r->e_max && cost < r->best_cost - 1e-9 && shoal__ps_sched_check(r->c, r->j, &S, 1) == 0 &&
        (!(r->j->restart > 0) || shoal__ps_sched_work_net(r->j, &S) >= r->j->work * (1 - EPS))) {
      if (r->best.slot != r->G.slot) shoal__ps_sched_free(&r->best);
      r->best = S;
      r->best_cost = cost;
    } else {
      shoal__ps_sched_free(&S);
    }
  }
  return 0;
}

/* Build and solve the LP on the chosen machines, then round it. Without the
 * horizon search the LP is solved once at E_g: built only up to there, runs
 * of identical slots merged, at most lp_blocks blocks; a cut LP plans the
 * head s..e_h for the work the greedy does there, and G's own slots after e_h
 * are the tail of every trial. *e_lp: the LP's end; *t0: the phase clock. */
static int lp_and_round(larr_run_t *r, int e_lo, int *e_lp, double *t0) {
  const shoal__ps_larr_params_t *p = r->p;
  shoal__ps_larr_stats_t *st = r->st;
  const shoal__ps_job_t *j = r->j;
  int blocks = p->search ? 0 : p->lp_blocks;
  /* far plans: their LPs are the biggest (many distinct slots on many machines); the greedy's tail covers more */
  if (!p->search && p->far_blocks > 0 && r->e_g - r->s >= p->far_slots && (blocks == 0 || p->far_blocks < blocks))
    blocks = p->far_blocks;
  int rc = shoal__ps_lp_build_capped(r->c, j, r->s, p->search ? r->e_max : r->e_g, r->mach, r->nm, p->theta,
                                     p->lp_it_lim, !p->search, blocks, &r->lp);
  int e_h = r->lp ? shoal__ps_lp_last(r->lp) : r->e_g, cut = !p->search && e_h < r->e_g;
  shoal__ps_job_t jh = *j;
  if (cut) jh.work = j->work - tail_work(j, &r->G, e_h), shoal__ps_lp_set_work(r->lp, jh.work);
  if (!rc && cut && st) st->lp_cut++;
  int no_lp = cut && !(jh.work > j->work * EPS); /* G's tail covers it all: nothing for the LP */
  if (rc || no_lp) return rc;
  int ns = 0;
  if (p->search) rc = shoal__ps_lp_horizon(r->lp, e_lo, r->e_g, e_lp, &ns);
  else rc = shoal__ps_lp_solve(r->lp, e_h), ns = 1, *e_lp = e_h;
  if (st) st->lp_solves += ns;
  if (rc) return rc;
  int e_star = cut ? e_h : *e_lp + p->sigma < r->e_g ? *e_lp + p->sigma : r->e_g, e_rnd = cut ? e_h : r->e_max;
  if (st) st->t_lp_s += shoal__now_s() - *t0, st->lp_cols_sum += shoal__ps_lp_ncols(r->lp);
  *t0 = shoal__now_s();
  if (e_star != *e_lp) {
    rc = shoal__ps_lp_solve(r->lp, e_star);
    if (st) st->lp_solves++;
  }
  return rc ? rc : rounding_trials(r, &jh, e_star, e_rnd, e_h, cut);
}

static void record_stats(shoal__ps_larr_stats_t *st, const larr_run_t *r, int e_lp) {
  st->chose_rounded += r->best.slot != r->G.slot;
  st->greedy_fallback += r->best.slot == r->G.slot;
  st->e_g_sum += r->e_g - r->s;
  st->e_lp_sum += e_lp - r->s;
  st->last_e_g = r->e_g;
  st->last_e_lp = e_lp;
  st->last_end = shoal__ps_sched_end(&r->best);
}

int shoal__ps_larr(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, const shoal__ps_larr_params_t *p,
                   shoal__ps_sched_t *out, shoal__ps_larr_stats_t *st) {
  if (s < j->arrival) s = j->arrival;
  larr_run_t r = {.c = c, .j = j, .p = p, .st = st, .s = s};
  double t0 = shoal__now_s();
  int rc = shoal__ps_greedy(c, j, s, p->hmax, p->theta, &r.G);
  if (st) st->t_greedy_s += shoal__now_s() - t0;
  if (rc) return rc;
  r.e_g = shoal__ps_sched_end(&r.G);
  r.best_cost = shoal__ps_sched_cost(c, j, &r.G, s, p->theta);
  r.best = r.G;
  r.e_max = r.e_g + p->sigma;
  int e_lo = s + (int)ceil(j->work / (j->wmax * j->rho_in) - EPS) - 1, e_lp = r.e_g;
  if (e_lo < s) e_lo = s;
  if ((rc = cache_init(&r.bc, r.e_max - s + 1, c, p->theta))) {
    shoal__ps_sched_free(&r.G);
    return rc;
  }
  t0 = shoal__now_s();
  if ((rc = pick_machines(c, &r.G, s, r.e_max, p->k_lp, &r.mach, &r.nm))) goto fail;
  rc = lp_and_round(&r, e_lo, &e_lp, &t0);
  if (st) st->t_round_s += shoal__now_s() - t0;
  if (rc == SHOAL_ERR_SOLVER || rc == SHOAL_ERR_INFEASIBLE) { /* LP trouble: commit the greedy */
    if (st) st->lp_fail++;
    rc = 0;
  }
  if (rc) goto fail;
  if (st) record_stats(st, &r, e_lp);
  if (r.best.slot != r.G.slot) shoal__ps_sched_free(&r.G);
  shoal__ps_lp_free(r.lp);
  free(r.mach);
  cache_free(&r.bc);
  *out = r.best;
  return 0;
fail:
  if (r.best.slot != r.G.slot) shoal__ps_sched_free(&r.best);
  shoal__ps_sched_free(&r.G);
  shoal__ps_lp_free(r.lp);
  free(r.mach);
  cache_free(&r.bc);
  return rc;
}
