/* Re-profiling while running, from the times of real collectives.
 *
 * Every allreduce of at least SHOAL_REPROFILE_MIN_BYTES on the world
 * communicator of a multi-host world records its time over the chooser's
 * prediction. Every SHOAL_REPROFILE_CALLS such calls the ranks agree (a
 * 16-byte MAX allreduce on a transient view of the world, so the users'
 * sequence numbers are untouched) on the slowest rank's median ratio. The
 * first agreement after the start-up profile is the reference (how far the
 * model is off on this system); when a later one drifts from it by
 * SHOAL_REPROFILE_FACTOR or more, either way (a link slowed or came back),
 * the link matrix is measured again on the view, every rank takes the new
 * matrix at the same call, and the chooser prices the algorithms again (a
 * new algorithm, or trees over a new order). The reference stays: if the
 * times still drift after a re-profile (it ran while the link was changing),
 * the next check measures again. A re-profile that finds the links as they
 * were (bandwidths within CHANGED of the last matrix) means the model, not
 * the network, is off by that much here: that ratio becomes the reference.
 * A change is noticed within 2 x SHOAL_REPROFILE_CALLS monitored calls: the
 * window that holds it, then a window all after it. Only the world
 * communicator is watched: its calls are in the same order on every rank, so
 * every rank agrees, and a re-profile needs every rank of the world. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "comm/tune/tune_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define MAX_CALLS 256
#define CHANGED 0.2 /* a re-profile found the links changed: some pair's bandwidth moved by 20 % or more */

typedef struct shoal__watch {
  int mode;            /* 0 off, 1 auto (a measured or cached profile), 2 on */
  int calls;           /* monitored calls per agreement */
  double factor;       /* drift that triggers a re-profile */
  size_t min_bytes;
  int n;
  double ratio[MAX_CALLS];
  double base;         /* the reference ratio (time / prediction); 0: not yet */
  unsigned long views; /* transient views made (their ids) */
  unsigned checks, reprofiles;
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
  w->tune->watch = wt;
  w->tune->watching = watching;
  w->tune->observe = observe;
  return 0;
}

void shoal__tune_watch_free(shoal__world_t *w) {
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

static int observe(shoal_comm_t *c, size_t bytes, double predicted_s, double elapsed_s) {
  shoal__world_t *w = c->w;
  shoal__tune_t *t = w->tune;
  shoal__watch_t *wt = t ? t->watch : NULL;
  if (!watching(c, bytes) || !(predicted_s > 0) || isinf(predicted_s)) return 0;
  wt->ratio[wt->n++] = elapsed_s / predicted_s;
  if (wt->n < wt->calls) return 0;
  qsort(wt->ratio, (size_t)wt->n, sizeof *wt->ratio, cmp_double);
  double med = wt->n % 2 ? wt->ratio[wt->n / 2] : 0.5 * (wt->ratio[wt->n / 2 - 1] + wt->ratio[wt->n / 2]);
  wt->n = 0;
  shoal_comm_t *v = world_view(c, wt);
  if (!v) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, NULL, -1, "link watch: out of memory");
  double agree[2] = {med, -med};
  int rc = shoal_allreduce_algo(v, SHOAL_IN_PLACE, agree, 2, SHOAL_FLOAT64, SHOAL_MAX, SHOAL_ALGO_RD);
  wt->checks++;
  if (!rc) {
    double r = agree[0];
    if (wt->base <= 0) {
      wt->base = r;
      SHOAL_DEBUG("TUNING", "link watch: baseline time/prediction %.2f (slowest rank's median of %d calls)", r,
                  wt->calls);
    } else if (r >= wt->factor * wt->base || r * wt->factor <= wt->base) {
      double ref = wt->base, moved = 0;
      int nn = t->nh * t->nh;
      double *old = malloc(sizeof *old * (size_t)(nn ? nn : 1));
      if (old) memcpy(old, t->bw, sizeof *old * (size_t)nn);
      rc = shoal__tune_probe_links(v);
      for (int i = 0; !rc && old && i < nn; i++) { /* how far the links moved */
        if ((old[i] > 0) != (t->bw[i] > 0)) moved = 1;
        else if (old[i] > 0 && fabs(t->bw[i] / old[i] - 1) > moved) moved = fabs(t->bw[i] / old[i] - 1);
      }
      free(old);
      if (!rc) {
        wt->reprofiles++;
        if (moved < CHANGED) wt->base = r; /* the links are as they were: the model is off by r here */
        SHOAL_INFO("TUNING", "link watch: allreduce times drifted x%.2f from the reference (%.2f -> %.2f); link "
                   "matrix measured again in %.0f ms, largest change %.0f %% (re-profile %u)%s", r / ref, ref, r,
                   t->links_s * 1e3, moved * 100, wt->reprofiles, moved < CHANGED ? "; the new reference" : "");
      }
    }
  }
  if (rc && !c->errmsg[0] && v->errmsg[0]) memcpy(c->errmsg, v->errmsg, sizeof c->errmsg);
  free(v);
  return rc;
}

void shoal__tune_watch_stats(const shoal__world_t *w, unsigned *checks, unsigned *reprofiles) {
  const shoal__watch_t *wt = w->tune ? w->tune->watch : NULL;
  *checks = wt ? wt->checks : 0;
  *reprofiles = wt ? wt->reprofiles : 0;
}
