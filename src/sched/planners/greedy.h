/* Exact single-job greedy oracle (spec §5): against fixed residual capacity,
 * maximize the work of every slot from s on; the end slot is then minimal.
 * Also used by larr (its fallback and horizon) and as a policy. */
#ifndef SHOAL_SCHED_PLANNERS_GREEDY_H
#define SHOAL_SCHED_PLANNERS_GREEDY_H

#include "sched/model/slot_plan.h"

/* The most productive configuration of job j in slot t (co-located on the
 * machine fitting most workers, or distributed by the DP over machines),
 * written into out (cleared first; left empty when fewer than j->wmin
 * workers fit). Ties: cheaper under prices (theta, s0). */
int shoal__ps_slot_best(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0, double theta,
                        shoal__ps_slot_t *out);

/* What slot_best worked out for one job against one unchanged cluster, kept
 * for the next slot it is asked about: a planner walks a booked future slot
 * by slot, and most machines keep the same residual vector from one slot to
 * the next (whole slots often repeat). A machine's max co-location and
 * theta^u prices carry over while its residual has the same bits, the slot's
 * distributed DP while every machine's has; so the answers are the very
 * ones slot_best computes. Valid for one job, theta and cluster state:
 * commit or release in between needs a fresh memo. */
typedef struct {
  int H;
  double theta;
  double *key;             /* H * NRES: the residual each machine's entries were computed from */
  unsigned char *kok;      /* per machine: key, w valid */
  unsigned char *pok;      /* per machine: pw valid for key */
  int *w;                  /* max co-located workers per machine */
  double *pw;              /* H * NRES: theta^u per resource (cap > 0) */
  const double *last;      /* residual rows of the slot last asked about (NULL: none); its machines are in key */
  int last_fits;           /* that slot's fits_worker */
  int bw, ncand, *cand;    /* keyed slot: most co-located workers, the machines that may hold them best */
  int dist_ok, dist_w;     /* its distributed DP result, when computed */
  shoal__ps_slot_t dist;
} shoal__ps_best_memo_t;

int  shoal__ps_best_memo_init(shoal__ps_best_memo_t *m, const shoal__ps_cluster_t *c, double theta);
void shoal__ps_best_memo_free(shoal__ps_best_memo_t *m);
/* shoal__ps_slot_best through the memo (same theta as at init). */
int shoal__ps_slot_best_memo(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int t, int s0,
                             shoal__ps_best_memo_t *m, shoal__ps_slot_t *out);

/* GREEDY(i, s): schedule covering j->work from slot s with the minimal end,
 * the last slot trimmed to the cheapest covering configuration. Slots
 * s .. s+hmax-1 are tried; SHOAL_ERR_INFEASIBLE if they do not suffice. */
int shoal__ps_greedy(const shoal__ps_cluster_t *c, const shoal__ps_job_t *j, int s, int hmax, double theta,
                     shoal__ps_sched_t *out);

#endif
