/* larr: per-arrival LP relaxation + randomized rounding with scale factor,
 * repair (packing, then covering), trim, best of R trials (spec §4). */
#ifndef SHOAL_SCHED_PLANNERS_LARR_H
#define SHOAL_SCHED_PLANNERS_LARR_H

#include <stdint.h>

#include "sched/model/slot_plan.h"

typedef struct {
  double theta;     /* price base (16) */
  int trials;       /* R (20) */
  double beta;      /* rounding scale factor (1) */
  int sigma;        /* slack over the greedy end, slots (0) */
  int k_lp;         /* machines in the LP besides the greedy's (32) */
  int lp_it_lim;      /* simplex iterations per solve (5000; a count, so results do not depend on the load) */
  int search;       /* 1: binary-search the LP end E_lp (spec §4.4); 0: E* = E_g, one solve */
  int lp_blocks;    /* without search: the LP covers at most this many blocks (runs of identical
                       residuals), G's own slots the rest (16; 0: no cap) */
  int far_slots;    /* a job whose greedy plan ends far_slots or more slots after its start is planned by */
  int far_blocks;   /* an LP of at most far_blocks blocks (0: lp_blocks as for every job) */
  int hmax;         /* slots searched by the greedy */
  uint64_t seed;
} shoal__ps_larr_params_t;

void shoal__ps_larr_defaults(shoal__ps_larr_params_t *p);

typedef struct {
  long lp_solves, lp_fail, trials, trials_ok, trials_cover_repair, chose_rounded, greedy_fallback;
  long e_g_sum, e_lp_sum; /* for the oracle relation LP end <= greedy end */
  int last_e_g, last_e_lp, last_end;
  double t_greedy_s, t_lp_s, t_round_s; /* time per phase */
  long lp_cols_sum;                      /* columns after merging, summed */
  long lp_cut;                           /* LPs cut at lp_blocks (G's tail kept) */
} shoal__ps_larr_stats_t;

/* Schedule job j from slot s against c (not modified). SHOAL_ERR_INFEASIBLE:
 * not coverable within hmax slots (defer). */
int shoal__ps_larr(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, const shoal__ps_larr_params_t *p,
                   shoal__ps_sched_t *out, shoal__ps_larr_stats_t *st);

/* The rounding + repair + trim of one trial on an already solved LP, exposed
 * for the rounding tests: returns 0 with a covering, capacity-feasible
 * schedule, or SHOAL_ERR_INFEASIBLE if repair could not cover by e_max. */
struct shoal__ps_lp;
int shoal__ps_larr_round(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int e_star, int e_max,
                         const struct shoal__ps_lp *lp, const int *mach, int nm, double beta, double theta,
                         uint64_t seed, shoal__ps_sched_t *out, int *cover_repairs);

#endif
