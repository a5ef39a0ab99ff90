/* Re-profiling while running, from the times of real collectives.
 *
 * Every allreduce of at least SHOAL_REPROFILE_MIN_BYTES on the world
 * communicator of a multi-host world records its time over the chooser's
 * prediction. Every SHOAL_REPROFILE_CALLS such calls the ranks agree (a
 * 40-byte MAX allreduce on a transient view of the world, so the users'
 * sequence numbers are untouched) on the slowest rank's median ratio. The
 * first agreement after the start-up profile is the reference (how far the
 * model is off on this system); when a later one drifts from it by
 * SHOAL_REPROFILE_FACTOR or more, either way (a link slowed or came back),
 * the link matrix is measured again on the view (only the pairs of the hosts
 * whose links changed: links.c), every rank takes the new matrix at the same call, and the chooser prices the algorithms again (a
 * new algorithm, or trees over a new order). Links that change every few
 * seconds must not cost more in re-profiles than they give back:
 * - a re-profile after which the chooser runs the same plan for the watched
 *   size (the algorithm and its plan: trees over another order are another
 *   plan) holds the watch off for 1, 2, 4 ... up to HOLDOFF_MAX checks (a
 *   re-profile that changes the plan resets it);
 * - a re-profile that changes the plan is on probation: the next window's
 *   time per byte (slowest rank's median) is compared with the calls of the
 *   window that triggered it that had drifted (the previous plan under the new
 *   conditions: a window straddling the change also holds old ones); unless
 *   the new plan is at least as fast (within KEEP_MARGIN), the previous matrix
 *   and so the previous plan come back, and the watch holds off as above;
 * - after a re-profile the reference is set again by the next window checked;
 * - the matrix a re-profile replaced is kept with its plan's time per byte from the last window that had not
 *   drifted (the other plan's calm time): while the running plan's windows measure more than TRY_MARGIN
 *   slower than that, the other matrix is tried for one window, and kept if it measures at least KEEP_MARGIN
 *   faster than the window before; else the running one comes back and the next try waits 1, 2, 4 ... up
 *   to TRY_HOLDOFF_MAX checks. A matrix measured in a short dip (a link slowed for a second) stays
 *   otherwise: the window after it sets the reference, and the plan built around the dip never drifts from
 *   its own reference once the link is back; the try brings the previous plan back when it is faster;
 * - a probation or a try is judged by a window of its own size, and calls of other sizes are not checked
 *   meanwhile; when more than AWAY_WINDOWS windows' worth of calls of other sizes (AWAY_WINDOWS x
 *   SHOAL_REPROFILE_CALLS) pass before that window is full, it ends there: judged on the calls of its size
 *   it has (their median, the slowest rank's), or, with none, given up (a probation keeps the new plan, the
 *   re-profile's measure of the links now; a try puts back the plan it interrupted), and every window
 *   starts afresh. The bound is NWIN windows: in a loop over as many sizes as there are windows, the
 *   others make at most (NWIN - 1) x SHOAL_REPROFILE_CALLS calls while the judging size fills its window, so
 *   a size making at least one in NWIN + 1 of the watched calls, evenly spread, is still judged on a full
 *   window; a size that stopped (the last step's size, a sweep) holds the other sizes' checks for NWIN
 *   windows' worth of their calls and one more, at most.
 * - the first window checked after the start-up profile sets the reference unless it ran SUSPECT times the
 *   prediction or slower, or 1/SUSPECT_FAST of it or faster (a broken or stale profile): then the links are
 *   measured again first (once), as after a drift;
 * A change is noticed within 2 x SHOAL_REPROFILE_CALLS monitored calls when
 * the watch is not held off: the window that holds it, then a window all
 * after it. Only the world communicator is watched: its calls are in the
 * same order on every rank, so every rank agrees, and a re-profile needs
 * every rank of the world. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define MAX_CALLS 256
#define NWIN 4
#define HOLDOFF_MAX 16  /* checks skipped at most after a re-profile that changed nothing */
#define KEEP_MARGIN 0.03 /* a new plan is kept unless it is more than 3 % slower per byte */
#define TRY_MARGIN 0.05  /* the other plan is tried when the running one is this much slower than its calm time */
#define TRY_HOLDOFF_MAX 8 /* checks between two tries at most, after tries that lost */
#define AWAY_WINDOWS NWIN /* windows' worth of calls of other sizes after which a probation or a try ends (above) */
#define SUSPECT 1.25    /* a first window this much slower than predicted: the start-up profile is measured again */
#define SUSPECT_FAST 4.0 /* and this much faster (a correct profile's first windows ran 0.54-0.9x the prediction on
                          * the testbed at 10 Gbit/s, 1 MiB ring and rhd, 4 hosts, the machine busy) */

typedef struct shoal__watch {
  int mode;            /* 0 off, 1 auto (a measured or cached profile), 2 on */
  int calls;           /* monitored calls per agreement */
  double factor;       /* drift that triggers a re-profile */
  size_t min_bytes;
  /* one window and reference per size (a few sizes, the least recently used replaced): the model is off by
   * a different factor at each size, so a loop of several sizes, or a sweep, is no drift */
  struct shoal__watch_win {
    size_t bytes;
    int n;
    double ratio[MAX_CALLS];
    double spb[MAX_CALLS]; /* seconds per byte of the same calls (comparable across plans) */
    double base;           /* the reference ratio (time / prediction); 0: not yet */
    double calm_spb;       /* the slowest rank's median s/B of the last window checked that had not drifted */
    unsigned long used;
  } win[NWIN];
  unsigned long calls_seen;
  size_t prob_bytes;   /* the size whose window judges the probation */
  int skip, holdoff;   /* checks still skipped; the next hold-off */
  int probation;       /* the last re-profile changed the choice: the next check judges it */
  double before_spb;   /* the window that triggered it (the previous plan, new conditions) */
  double *old_lat, *old_bw, old_v[SHOAL__TUNE_NVALS]; /* the other matrix: the one before the last re-profile,
                                                       * or the one a try or a probation dropped */
  int has_old;         /* old_* holds a matrix that can be tried */
  size_t old_bytes;    /* the size whose windows judge the tries */
  double old_spb;      /* the other plan's calm time per byte at that size */
  int trying;          /* the other matrix runs for one window */
  double try_spb;      /* the window of the plan the try interrupted */
  int try_skip, try_holdoff;
  long away;           /* watched calls of other sizes since the probation or the try began */
  int started;         /* a first reference was set, or the start-up profile was checked (SUSPECT) */
  unsigned long views; /* transient views made (their ids) */
  unsigned checks, reprofiles, reverts, tries, tries_kept;
  unsigned ended_away; /* probations and tries ended by calls of other sizes */
  double reprofile_s;  /* time spent re-profiling */
  int suspects;        /* hosts whose pairs the last re-profile measured */
} shoal__watch_t;

static int watching(const shoal_comm_t *c, size_t bytes);
static int observe(shoal_comm_t *c, size_t bytes, double predicted_s, double elapsed_s);

int shoal__tune_watch_init(shoal__world_t *w) {
  const char *mode = shoal__config_str("SHOAL_REPROFILE", "auto");
  int m = !strcmp(mode, "off") ? 0 : !strcmp(mode, "auto") ? 1 : !strcmp(mode, "on") ? 2 : -1;
  if (m < 0) return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_REPROFILE='%s': expected auto, on or off", mode);
  long calls, min_bytes;
  double factor;
  int rc;
  if ((rc = shoal__config_long("SHOAL_REPROFILE_CALLS", 8, 1, MAX_CALLS, &calls)) ||
      (rc = shoal__config_double("SHOAL_REPROFILE_FACTOR", 1.5, 1.01, 1e6, &factor)) ||
      (rc = shoal__config_long("SHOAL_REPROFILE_MIN_BYTES", 256L << 10, 0, 1L << 40, &min_bytes)))
    return rc;
  shoal__watch_t *wt = calloc(1, sizeof *wt);
  if (!wt) return shoal__seterr(SHOAL_ERR_NOMEM, "tune: out of memory");
  wt->mode = m, wt->calls = (int)calls, wt->factor = factor, wt->min_bytes = (size_t)min_bytes;
  wt->holdoff = 1; /* the first re-profile that changes nothing holds off one check */
  wt->try_holdoff = 1;
  w->tune->watch = wt;
  w->tune->watching = watching;
  w->tune->observe = observe;
  return 0;
}

void shoal__tune_watch_free(shoal__world_t *w) {
  if (w->tune->watch) free(w->tune->watch->old_lat), free(w->tune->watch->old_bw);
  free(w->tune->watch);
  w->tune->watch = NULL;
  w->tune->watching = NULL;
  w->tune->observe = NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A transient communicator over the whole world with an id of its own (the
 * same on every rank: they make their views in the same order). */
static shoal_comm_t *world_view(shoal_comm_t *c, shoal__watch_t *wt) {
  shoal_comm_t *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->w = c->w;
  v->id = ((c->id ^ 0x7761746368ull) * 0x9E3779B97F4A7C15ull + ++wt->views) | 1;
  v->rank = c->rank;
  v->size = c->size;
  v->wranks = c->wranks;
  v->timeout_s = c->timeout_s;
  return v;
}

static int watching(const shoal_comm_t *c, size_t bytes) {
  const shoal__world_t *w = c->w;
  const shoal__tune_t *t = w->tune;
  const shoal__watch_t *wt = t ? t->watch : NULL;
  if (!wt || !wt->mode || c->id != w->id || w->topo->nhosts < 2 || bytes < wt->min_bytes) return 0;
  return wt->mode != 1 || t->source != 0; /* auto: only with a measured or cached profile */
}

static double median_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds per byte of the window's calls beyond the drift threshold on one side of the reference (dir > 0:
 * factor x slower, else factor x faster): the previous plan under the new conditions. A window that straddles
 * the change holds calls of both, and its median can be the old conditions' time, against which a better new
 * plan looks slower. -1 when no call is there (or there is no reference yet). Before the window is sorted. */
static double drift_side_spb(const struct shoal__watch_win *x, double factor, int dir) {
  double s[MAX_CALLS];
  int n = 0;
  for (int i = 0; x->base > 0 && i < x->n; i++)
    if (dir > 0 ? x->ratio[i] >= factor * x->base : x->ratio[i] * factor <= x->base) s[n++] = x->spb[i];
  return n ? median_of(s, n) : -1;
}

/* The plan the chooser runs for the watched size, in words (the algorithm and its plan: trees over another
 * order are another plan). */
static void plan_for(shoal_comm_t *c, size_t bytes, char *out, size_t cap) {
  shoal__coll_ctx_t x;
  shoal__choice_t ch;
  char d[160];
  shoal__coll_ctx(c, &x);
  if (shoal__coll_price(&x, bytes, SHOAL__CHOOSE_QUIET, &ch)) {
    snprintf(out, cap, "?");
    return;
  }
  shoal__plan_describe(ch.algo, &x, &ch.plan, d, sizeof d);
  snprintf(out, cap, "%s%s%s", shoal_algo_name(ch.algo), d[0] ? ": " : "", d);
}

static void hold_off(shoal__watch_t *wt) {
  wt->skip = wt->holdoff;
  wt->holdoff = wt->holdoff * 2 > HOLDOFF_MAX ? HOLDOFF_MAX : wt->holdoff * 2;
}

/* Put the other matrix in place and keep the running one as the other. */
static void swap_other(shoal__world_t *w, shoal__watch_t *wt) {
  shoal__tune_t *t = w->tune;
  size_t nn = (size_t)(t->nh * t->nh);
  for (size_t i = 0; i < nn; i++) {
    double l = t->lat[i], b = t->bw[i];
    t->lat[i] = wt->old_lat[i], t->bw[i] = wt->old_bw[i];
    wt->old_lat[i] = l, wt->old_bw[i] = b;
  }
  for (int i = 0; i < SHOAL__TUNE_NVALS; i++) {
    double v = t->v[i];
    t->v[i] = wt->old_v[i], wt->old_v[i] = v;
  }
  t->links_gen++;
  shoal__tune_changed(w);
}

static void reset_refs(shoal__watch_t *wt) {
  for (int i = 0; i < NWIN; i++) wt->win[i].base = 0; /* the next window checked sets the reference again */
}

/* The probation of a re-profile that changed the choice: keep the new plan, or bring the old matrix back
 * (the dropped one stays as the other, with the time it measured). */
static void judge(shoal__world_t *w, shoal__watch_t *wt, double spb) {
  wt->probation = 0;
  reset_refs(wt);
  if (spb <= wt->before_spb * (1 + KEEP_MARGIN)) {
    wt->holdoff = 1;
    SHOAL_INFO("TUNING", "link watch: the new plan is kept (%.3g s/MB against %.3g before)", spb * 1e6,
               wt->before_spb * 1e6);
    return;
  }
  swap_other(w, wt);
  wt->old_spb = spb;
  wt->reverts++;
  hold_off(wt);
  SHOAL_INFO("TUNING", "link watch: the new plan was slower (%.3g s/MB against %.3g): the previous one is back, "
             "the watch holds off %d check(s)", spb * 1e6, wt->before_spb * 1e6, wt->skip);
}

/* A window of the watched size that did not drift: when it is slower than the other plan's calm time, try
 * the other matrix for the next window (unless tries are held off). */
static void maybe_try(shoal__world_t *w, shoal__watch_t *wt, size_t bytes, double spb) {
  if (!wt->has_old || bytes != wt->old_bytes || !(spb > wt->old_spb * (1 + TRY_MARGIN))) return;
  if (wt->try_skip > 0) {
    wt->try_skip--;
    return;
  }
  wt->trying = 1, wt->try_spb = spb, wt->tries++, wt->away = 0;
  swap_other(w, wt);
  SHOAL_INFO("TUNING", "link watch: the plan runs at %.3g s/MB, slower than the other plan's %.3g when calm: the "
             "other matrix is tried for one window", spb * 1e6, wt->old_spb * 1e6);
}

/* The window of a try: keep the tried matrix if it measured faster than the window before it, else the
 * running one comes back and the next try waits longer. */
static void judge_try(shoal__world_t *w, shoal__watch_t *wt, double spb) {
  wt->trying = 0;
  if (spb * (1 + KEEP_MARGIN) <= wt->try_spb) {
    wt->tries_kept++;
    wt->old_spb = wt->try_spb; /* the plan now the other one, as it ran just before */
    wt->try_holdoff = 1;
    reset_refs(wt);
    SHOAL_INFO("TUNING", "link watch: the tried plan is kept (%.3g s/MB against %.3g)", spb * 1e6, wt->try_spb * 1e6);
    return;
  }
  swap_other(w, wt);
  wt->try_skip = wt->try_holdoff;
  wt->try_holdoff = wt->try_holdoff * 2 > TRY_HOLDOFF_MAX ? TRY_HOLDOFF_MAX : wt->try_holdoff * 2;
  SHOAL_INFO("TUNING", "link watch: the tried plan was not faster (%.3g s/MB against %.3g): the running one is back, "
             "the next try after %d check(s)", spb * 1e6, wt->try_spb * 1e6, wt->try_skip);
}

/* Measure the links again on the view v; hold off if the choice for the watched size stays, else put the
 * new plan on probation against the window that triggered it. */
static int reprofile(shoal_comm_t *v, shoal__watch_t *wt, size_t bytes, double ref, double r, double spb,
                     double calm_spb) {
  shoal__world_t *w = v->w;
  shoal__tune_t *t = w->tune;
  size_t nn = (size_t)(t->nh * t->nh);
  if (!wt->old_lat) wt->old_lat = malloc(sizeof *wt->old_lat * nn), wt->old_bw = malloc(sizeof *wt->old_bw * nn);
  double *prev = malloc(sizeof *prev * (2 * nn + SHOAL__TUNE_NVALS)); /* the matrix before it */
  if (!wt->old_lat || !wt->old_bw || !prev) {
    free(prev);
    return shoal__seterr(SHOAL_ERR_NOMEM, "link watch: out of memory");
  }
  memcpy(prev, t->lat, sizeof *t->lat * nn);
  memcpy(prev + nn, t->bw, sizeof *t->bw * nn);
  memcpy(prev + 2 * nn, t->v, sizeof t->v);
  char before[200], after[200];
  plan_for(v, bytes, before, sizeof before);
  uint64_t t0 = shoal__now_ns();
  int suspects = 0, rc = shoal__tune_reprobe_links(v, &suspects);
  if (rc) {
    free(prev);
    return rc;
  }
  double took = (double)(shoal__now_ns() - t0) * 1e-9;
  wt->reprofile_s += took;
  wt->suspects = suspects;
  double moved = 0;
  for (size_t i = 0; i < nn; i++) { /* how far the links moved */
    double o = prev[nn + i];
    if ((o > 0) != (t->bw[i] > 0)) moved = 1;
    else if (o > 0 && fabs(t->bw[i] / o - 1) > moved) moved = fabs(t->bw[i] / o - 1);
  }
  plan_for(v, bytes, after, sizeof after);
  int same = !strcmp(before, after);
  wt->reprofiles++;
  reset_refs(wt);
  if (!same) { /* the matrix it replaced is the other one now, with its plan's calm time */
    memcpy(wt->old_lat, prev, sizeof *prev * nn);
    memcpy(wt->old_bw, prev + nn, sizeof *prev * nn);
    memcpy(wt->old_v, prev + 2 * nn, sizeof wt->old_v);
    wt->has_old = calm_spb > 0, wt->old_bytes = bytes, wt->old_spb = calm_spb, wt->try_skip = 0, wt->try_holdoff = 1;
  }
  free(prev);
  if (same) hold_off(wt);
  else wt->probation = 1, wt->before_spb = spb, wt->prob_bytes = bytes, wt->away = 0;
  SHOAL_INFO("TUNING", "link watch: allreduce times drifted x%.2f from the reference (%.2f -> %.2f); the pairs of %d "
             "host(s) whose links changed measured again in %.0f ms, largest change %.0f %% (re-profile %u): %s -> %s%s",
             r / ref, ref, r, suspects, took * 1e3, moved * 100, wt->reprofiles, before, after,
             same ? ", the watch holds off" : ", on probation");
  return 0;
}

/* The ranks' agreement: v[0..n) becomes its maximum over the world, on a transient view (the users' sequence
 * numbers are untouched); the view is handed back for a re-profile. */
static int agree_max(shoal_comm_t *c, shoal__watch_t *wt, double *v, int n, shoal_comm_t **view) {
  shoal_comm_t *vw = world_view(c, wt);
  if (!vw) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, NULL, -1, "link watch: out of memory");
  int rc = shoal_allreduce_algo(vw, SHOAL_IN_PLACE, v, n, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
  wt->checks++;
  *view = vw;
  return rc;
}

static int view_done(shoal_comm_t *c, shoal_comm_t *v, int rc) {
  if (rc && !c->errmsg[0] && v->errmsg[0]) memcpy(c->errmsg, v->errmsg, sizeof c->errmsg);
  if (rc && !c->errmsg[0]) snprintf(c->errmsg, sizeof c->errmsg, "%s", shoal_last_error());
  free(v);
  return rc;
}

/* Calls of other sizes went on for more than AWAY_WINDOWS windows while the probation's or the try's size
 * did not fill its window: judge on the calls of that size there are, or give up without any (the plan the
 * try interrupted comes back; the new plan of a probation stays). Every rank sees the same calls in the
 * same order, so all take the same path. */
static int end_away(shoal_comm_t *c, shoal__watch_t *wt) {
  shoal__world_t *w = c->w;
  size_t jb = wt->probation ? wt->prob_bytes : wt->old_bytes;
  const char *what = wt->probation ? "probation" : "try";
  struct shoal__watch_win *j = NULL;
  for (int i = 0; i < NWIN; i++)
    if (wt->win[i].bytes == jb && wt->win[i].n > 0) j = &wt->win[i];
  int n = j ? j->n : 0, rc = 0;
  wt->ended_away++;
  if (!n) {
    SHOAL_INFO("TUNING", "link watch: no call of %zu B in the %ld watched calls of other sizes since the %s began: "
               "%s", jb, wt->away, what, wt->probation ? "the new plan stays" : "the plan it interrupted is back");
    if (wt->probation) {
      wt->probation = 0;
      reset_refs(wt);
    } else {
      wt->trying = 0;
      swap_other(w, wt);
    }
  } else {
    double spb = median_of(j->spb, n);
    shoal_comm_t *v = NULL;
    rc = agree_max(c, wt, &spb, 1, &v);
    if (!rc) {
      SHOAL_INFO("TUNING", "link watch: %d of %d calls of %zu B against %ld watched calls of other sizes since the %s "
                 "began: judged on those", n, wt->calls, jb, wt->away, what);
      if (wt->probation) judge(w, wt, spb);
      else judge_try(w, wt, spb);
    }
    if (v) rc = view_done(c, v, rc);
  }
  for (int i = 0; i < NWIN; i++) wt->win[i].n = 0; /* their calls ran under a plan that may have changed */
  return rc;
}

static int observe(shoal_comm_t *c, size_t bytes, double predicted_s, double elapsed_s) {
  shoal__world_t *w = c->w;
  shoal__tune_t *t = w->tune;
  shoal__watch_t *wt = t ? t->watch : NULL;
  if (!watching(c, bytes) || !(predicted_s > 0) || isinf(predicted_s)) return 0;
  struct shoal__watch_win *x = &wt->win[0];
  for (int i = 0; i < NWIN; i++) { /* this size's window, else the least recently used one */
    if (wt->win[i].bytes == bytes) {
      x = &wt->win[i];
      break;
    }
    if (wt->win[i].used < x->used) x = &wt->win[i];
  }
  if (x->bytes != bytes) *x = (struct shoal__watch_win){.bytes = bytes};
  x->used = ++wt->calls_seen;
  x->spb[x->n] = elapsed_s / (double)(bytes ? bytes : 1);
  x->ratio[x->n++] = elapsed_s / predicted_s;
  /* only the size that triggered it judges a probation, and the tried size a try: for a bounded time */
  if ((wt->probation && bytes != wt->prob_bytes) || (wt->trying && bytes != wt->old_bytes))
    if (++wt->away > (long)AWAY_WINDOWS * wt->calls) return end_away(c, wt);
  if (x->n < wt->calls) return 0;
  double slow = drift_side_spb(x, wt->factor, 1), fast = drift_side_spb(x, wt->factor, -1);
  double agree[5] = {median_of(x->ratio, x->n), 0, median_of(x->spb, x->n), slow, fast};
  agree[1] = -agree[0];
  x->n = 0;
  if ((wt->probation && bytes != wt->prob_bytes) || (wt->trying && bytes != wt->old_bytes)) return 0;
  if (wt->skip > 0 && !wt->probation && !wt->trying) { /* held off: no agreement either (every rank skips the same checks) */
    wt->skip--;
    return 0;
  }
  shoal_comm_t *v = NULL;
  int rc = agree_max(c, wt, agree, 5, &v);
  if (!v) return rc;
  if (!rc) {
    double r = agree[0];
    if (wt->probation) {
      judge(w, wt, agree[2]);
    } else if (wt->trying) {
      judge_try(w, wt, agree[2]);
    } else if (x->base > 0 && (r >= wt->factor * x->base || r * wt->factor <= x->base)) {
      double side = r >= x->base ? agree[3] : agree[4]; /* the slowest rank's, as the median */
      rc = reprofile(v, wt, bytes, x->base, r, side > 0 ? side : agree[2], x->calm_spb);
    } else if (!wt->started && wt->reprofiles == 0 && (r >= SUSPECT || r * SUSPECT_FAST <= 1)) {
      /* the first window ran far slower than the start-up profile predicts (a flow of the quick profile that
       * waited for a CPU makes a fast link look slow, and the plan routes around it), or far faster (the same
       * on a busy machine, worse: pairs of a 10 Gbit/s testbed measured at 1-5 MB/s under load, the first
       * window at x0.003; or a cached entry gone stale: the cache knows hosts by name, and links that changed
       * under the same names, a testbed brought up again at another rate, keep the old entry): that profile is
       * checked once, as after a drift; a new plan is on probation like any other */
      wt->started = 1;
      SHOAL_INFO("TUNING", "link watch: the first window ran x%.2f the %s profile's prediction (beyond x%.2f): the "
                 "links are measured again", r, w->tune->source == 2 ? "cached" : "start-up",
                 r >= SUSPECT ? SUSPECT : 1 / SUSPECT_FAST);
      rc = reprofile(v, wt, bytes, 1.0, r, agree[2], 0);
    } else {
      wt->started = 1;
      if (x->base <= 0) {
        x->base = r;
        SHOAL_DEBUG("TUNING", "link watch: baseline time/prediction %.2f (slowest rank's median of %d calls)", r,
                    wt->calls);
      }
      x->calm_spb = agree[2];
      maybe_try(w, wt, bytes, agree[2]);
    }
  }
  return view_done(c, v, rc);
}

void shoal__tune_watch_stats(const shoal__world_t *w, shoal__watch_stats_t *out) {
  const shoal__watch_t *wt = w->tune ? w->tune->watch : NULL;
  memset(out, 0, sizeof *out);
  if (!wt) return;
  *out = (shoal__watch_stats_t){.checks = wt->checks,     .reprofiles = wt->reprofiles, .reverts = wt->reverts,
                                .tries = wt->tries,       .tries_kept = wt->tries_kept, .ended_away = wt->ended_away,
                                .skip = wt->skip,         .probation = wt->probation,   .trying = wt->trying,
                                .suspects = wt->suspects, .reprofile_s = wt->reprofile_s};
}
