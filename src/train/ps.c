/* Sharded parameter servers (docs/training.md). World ranks 0..W-1 are
 * workers, W..W+S-1 servers; server s owns the contiguous shard s of the
 * parameter array and its momentum. Per iteration a worker sends each server
 * a header {kind, clock, included, lr} (float64) and its gradient shard, then
 * receives the shard's new parameters with the server's `included` value.
 *
 * Clocks: a worker's clock c is the number of gradients it has pushed.
 * `included` = min over workers of the gradients the server had applied when
 * it sent those parameters, so a gradient pushed at clock c is
 * c - included clocks stale.
 *  - sync: the server waits for all W gradients of a clock, averages them in
 *    rank order and takes one SGD step (equals BSP up to summation order).
 *  - async: every gradient is applied on arrival, scaled by 1/W, and the
 *    worker gets the parameters back at once.
 *  - ssp: as async, but the reply to a worker about to compute clock c is
 *    held until every live worker has had clock c - s - 1 applied, so no
 *    applied gradient is more than s clocks stale (checked on apply). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "train/optim.h"
#include "train/sync.h"

enum { TAG_HDR = 0x5053, TAG_GRAD = 0x5054, TAG_PARAM = 0x5055 };
enum { KIND_GRAD = 0, KIND_DONE = 1 };

void shoal__ps_shard(size_t n, int S, int s, size_t *off, size_t *len) {
  size_t base = n / (size_t)S, rem = n % (size_t)S;
  *off = (size_t)s * base + ((size_t)s < rem ? (size_t)s : rem);
  *len = base + ((size_t)s < rem ? 1 : 0);
}

static int comm_err(shoal_comm_t *c, int rc, const char *what, int peer) {
  return shoal__seterr(rc, "ps: rank %d %s rank %d: %s", shoal_comm_rank(c), what, peer, shoal_comm_errmsg(c));
}

/* ---- server ---- */

typedef struct server {
  shoal_comm_t *c;
  const shoal_train_opts_t *o;
  int W;
  float *p, *v;     /* shard parameters and momentum */
  size_t len;
  long *applied;    /* gradients applied per worker */
  int *done;
  int *waiting;     /* worker awaits its reply */
  int max_stale;
} server_t;

static long min_applied(const server_t *s) {
  long m = -1;
  for (int w = 0; w < s->W; w++)
    if (!s->done[w] && (m < 0 || s->applied[w] < m)) m = s->applied[w];
  return m < 0 ? 0 : m;
}

static int reply(server_t *s, int w) {
  double incl = (double)min_applied(s);
  int rc = shoal_send(s->c, &incl, 1, SHOAL_FLOAT64, w, TAG_PARAM);
  if (!rc) rc = shoal_send(s->c, s->p, s->len, SHOAL_FLOAT32, w, TAG_PARAM);
  if (rc) return comm_err(s->c, rc, "send parameters to", w);
  s->waiting[w] = 0;
  return 0;
}

/* SSP: may worker w, about to compute clock applied[w], get parameters now? */
static int may_reply(const server_t *s, int w) {
  if (s->o->ps_mode != SHOAL_PS_SSP) return 1;
  return min_applied(s) >= s->applied[w] - s->o->staleness;
}

int shoal__ps_server(shoal_comm_t *world, const shoal_train_opts_t *o, int W, shoal_model_t *m,
                     shoal_train_result_t *res) {
  int S = shoal_comm_size(world) - W, sidx = shoal_comm_rank(world) - W;
  size_t off, len;
  shoal__ps_shard(m->nparams, S, sidx, &off, &len);
  server_t s = {.c = world, .o = o, .W = W, .p = m->params + off, .len = len};
  int rc = 0;
  s.v = calloc(len ? len : 1, sizeof(float));
  s.applied = calloc((size_t)W, sizeof(long));
  s.done = calloc((size_t)W, sizeof(int));
  s.waiting = calloc((size_t)W, sizeof(int));
  float *gbuf = malloc(((o->ps_mode == SHOAL_PS_SYNC ? (size_t)W : 1) * len + 1) * sizeof(float));
  float *gsum = malloc((len + 1) * sizeof(float));
  double *lrs = calloc((size_t)W, sizeof(double));
  if (!s.v || !s.applied || !s.done || !s.waiting || !gbuf || !gsum || !lrs) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps server: out of memory");
    goto out_free;
  }
  int live = W, arrived = 0;
  while (live > 0) {
    double hdr[4];
    int w;
    if ((rc = shoal_recv_any(world, hdr, 4, SHOAL_FLOAT64, TAG_HDR, &w))) {
      rc = comm_err(world, rc, "receive a header from", -1);
      goto out_free;
    }
    if (w < 0 || w >= W) {
      rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server rank %d: header from rank %d, not a worker",
                         shoal_comm_rank(world), w);
      goto out_free;
    }
    if ((int)hdr[0] == KIND_DONE) {
      s.done[w] = 1;
      live--;
    } else {
      long clock = (long)hdr[1], incl = (long)hdr[2];
      float *g = gbuf + (o->ps_mode == SHOAL_PS_SYNC ? (size_t)w * len : 0);
      if ((rc = shoal_recv(world, g, len, SHOAL_FLOAT32, w, TAG_GRAD))) {
        rc = comm_err(world, rc, "receive a gradient from", w);
        goto out_free;
      }
      if (clock != s.applied[w]) {
        rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server: worker %d pushed clock %ld, expected %ld", w, clock,
                           s.applied[w]);
        goto out_free;
      }
      int stale = (int)(clock - incl);
      if (stale > s.max_stale) s.max_stale = stale;
      if (o->ps_mode == SHOAL_PS_SSP && stale > o->staleness) {
        rc = shoal__seterr(SHOAL_ERR_INTERNAL, "ps server: gradient of worker %d is %d clocks stale (bound %d)", w,
                           stale, o->staleness);
        goto out_free;
      }
      if (o->ps_mode == SHOAL_PS_SYNC) {
        lrs[w] = hdr[3];
        s.waiting[w] = 1;
        if (++arrived < live) continue;
        /* All gradients of this clock: average in rank order, one step. */
        memset(gsum, 0, len * sizeof(float));
        for (int u = 0; u < W; u++)
          if (s.waiting[u])
            for (size_t i = 0; i < len; i++) gsum[i] += gbuf[(size_t)u * len + i];
        shoal__sgd_step_scaled(s.p, s.v, gsum, len, (float)lrs[w], (float)o->momentum, (float)o->weight_decay,
                               1.0f / (float)arrived);
        arrived = 0;
        for (int u = 0; u < W; u++)
          if (s.waiting[u]) s.applied[u]++;
        for (int u = 0; u < W; u++)
          if (s.waiting[u] && (rc = reply(&s, u))) goto out_free;
        continue;
      }
      shoal__sgd_step_scaled(s.p, s.v, g, len, (float)hdr[3], (float)o->momentum, (float)o->weight_decay,
                             1.0f / (float)W);
      s.applied[w]++;
      s.waiting[w] = 1;
    }
    /* async / ssp: answer every worker whose bound now holds */
    if (o->ps_mode != SHOAL_PS_SYNC)
      for (int u = 0; u < W; u++)
        if (s.waiting[u] && !s.done[u] && may_reply(&s, u) && (rc = reply(&s, u))) goto out_free;
    if (o->ps_mode == SHOAL_PS_SYNC && arrived > 0 && arrived == live) {
      rc = shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server: a worker finished while others wait in sync mode");
      goto out_free;
    }
  }
  /* Everyone is done: the final parameters go to every worker. */
  for (int w = 0; w < W; w++) {
    double incl = (double)min_applied(&s);
    if ((rc = shoal_send(world, &incl, 1, SHOAL_FLOAT64, w, TAG_PARAM)) ||
        (rc = shoal_send(world, s.p, len, SHOAL_FLOAT32, w, TAG_PARAM))) {
      rc = comm_err(world, rc, "send final parameters to", w);
      goto out_free;
    }
  }
  if (res) res->max_staleness = s.max_stale;
out_free:
  free(s.v);
  free(s.applied);
  free(s.done);
  free(s.waiting);
  free(gbuf);
  free(gsum);
  free(lrs);
  return rc;
}

/* ---- worker ---- */

struct shoal__ps_worker {
  shoal_comm_t *c;
  int W, S;
  size_t n;
  long clock;
  double *incl; /* per server: `included` of the parameters last received */
  double slow_s;
};

int shoal__ps_worker_create(shoal_comm_t *world, const shoal_train_opts_t *o, int nworkers, size_t nparams,
                            shoal__ps_worker_t **out) {
  shoal__ps_worker_t *w = calloc(1, sizeof *w);
  int S = shoal_comm_size(world) - nworkers;
  if (w) w->incl = calloc((size_t)S, sizeof(double));
  if (!w || !w->incl) {
    free(w);
    return shoal__seterr(SHOAL_ERR_NOMEM, "ps worker: out of memory");
  }
  w->c = world;
  w->W = nworkers;
  w->S = S;
  w->n = nparams;
  w->slow_s = shoal_comm_rank(world) == 0 ? o->ps_slow_worker_ms * 1e-3 : 0.0;
  *out = w;
  return 0;
}

void shoal__ps_worker_destroy(shoal__ps_worker_t *w) {
  if (!w) return;
  free(w->incl);
  free(w);
}

static int pull(shoal__ps_worker_t *w, float *params) {
  for (int s = 0; s < w->S; s++) {
    size_t off, len;
    shoal__ps_shard(w->n, w->S, s, &off, &len);
    int rc = shoal_recv(w->c, &w->incl[s], 1, SHOAL_FLOAT64, w->W + s, TAG_PARAM);
    if (!rc) rc = shoal_recv(w->c, params + off, len, SHOAL_FLOAT32, w->W + s, TAG_PARAM);
    if (rc) return comm_err(w->c, rc, "receive parameters from server", w->W + s);
  }
  return 0;
}

int shoal__ps_push_pull(shoal__ps_worker_t *w, const float *grads, float *params, double lr) {
  if (w->slow_s > 0) shoal__sleep_s(w->slow_s); /* tests: a straggler makes staleness happen */
  for (int s = 0; s < w->S; s++) {
    size_t off, len;
    shoal__ps_shard(w->n, w->S, s, &off, &len);
    double hdr[4] = {KIND_GRAD, (double)w->clock, w->incl[s], lr};
    int rc = shoal_send(w->c, hdr, 4, SHOAL_FLOAT64, w->W + s, TAG_HDR);
    if (!rc) rc = shoal_send(w->c, grads + off, len, SHOAL_FLOAT32, w->W + s, TAG_GRAD);
    if (rc) return comm_err(w->c, rc, "push gradients to server", w->W + s);
  }
  w->clock++;
  return pull(w, params);
}

int shoal__ps_finish(shoal__ps_worker_t *w, float *params) {
  for (int s = 0; s < w->S; s++) {
    double hdr[4] = {KIND_DONE, (double)w->clock, 0, 0};
    int rc = shoal_send(w->c, hdr, 4, SHOAL_FLOAT64, w->W + s, TAG_HDR);
    if (rc) return comm_err(w->c, rc, "send done to server", w->W + s);
  }
  return pull(w, params);
}
