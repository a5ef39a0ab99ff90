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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "train/ckpt.h"
#include "train/optim.h"
#include "train/sync.h"

typedef struct ps_cfg {
  char ckpt[1024], resume[1024]; /* "" when not set */
  int S, W;
  shoal_ps_mode_t mode;
  int staleness;
  double momentum, wd;
  double slow_s;
} ps_cfg_t;

enum { TAG_HDR = 0x5053, TAG_GRAD = 0x5054, TAG_PARAM = 0x5055 };
enum { KIND_GRAD = 0, KIND_DONE = 1, KIND_CKPT = 2 };

static void ps_shard(size_t n, int S, int s, size_t *off, size_t *len) {
  size_t base = n / (size_t)S, rem = n % (size_t)S;
  *off = (size_t)s * base + ((size_t)s < rem ? (size_t)s : rem);
  *len = base + ((size_t)s < rem ? 1 : 0);
}

/* peer < 0: any worker */
static int comm_err(shoal_comm_t *c, int rc, const char *what, int peer) {
  char who[32] = "any worker";
  if (peer >= 0) snprintf(who, sizeof who, "rank %d", peer);
  return shoal__seterr(rc, "ps: rank %d %s %s: %s", shoal_comm_rank(c), what, who, shoal_comm_errmsg(c));
}

/* ---- server ---- */

typedef struct server {
  shoal_comm_t *c;
  const ps_cfg_t *o;
  int W, sidx;      /* workers; this server's shard */
  float *p, *v;     /* shard parameters and momentum */
  size_t len;
  long *applied;    /* gradients applied per worker */
  int *done;
  int *waiting;     /* worker awaits its reply */
  int max_stale;
  int live, arrived; /* workers not done; sync: gradients of the current clock in */
  long ckpt_clock;   /* the clock of the last checkpoint written or resumed from */
  float *gbuf;       /* sync: every worker's gradient of the clock; else the one arriving */
  float *gsum;
  double *lrs;       /* sync: each worker's learning rate of the clock */
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
  if (s->o->mode != SHOAL_PS_SSP) return 1;
  return min_applied(s) >= s->applied[w] - s->o->staleness;
}

/* This server's shard and momentum from o->resume; every worker continues from the checkpoint's clock. */
static int server_resume(server_t *s) {
  const ps_cfg_t *o = s->o;
  shoal__ckpt_meta_t meta;
  char path[1100];
  snprintf(path, sizeof path, "%s.server%d", o->resume, s->sidx);
  int rc = shoal__ckpt_load(path, &meta, s->p, s->v, s->len);
  if (rc) return rc;
  if (meta.workers != (uint32_t)s->W)
    return shoal__seterr(SHOAL_ERR_MISMATCH, "ps server checkpoint %s: written with %u workers, this run has %d", path,
                         meta.workers, s->W);
  for (int w = 0; w < s->W; w++) s->applied[w] = (long)meta.iters_done;
  s->ckpt_clock = (long)meta.iters_done;
  return 0;
}

/* A worker's checkpoint request for clock c. The first request for clock c: every worker has had its reply
 * for clock c-1, so all pushes up to c are applied and none beyond (a worker's next push follows its own
 * request). */
static int server_checkpoint(server_t *s, long c) {
  const ps_cfg_t *o = s->o;
  if (c <= s->ckpt_clock) return 0; /* the other workers' requests for the same clock */
  for (int u = 0; u < s->W; u++)
    if (s->applied[u] != c)
      return shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server %d: checkpoint at clock %ld but worker %d is at clock %ld",
                           s->sidx, c, u, s->applied[u]);
  if (!o->ckpt[0])
    return shoal__seterr(SHOAL_ERR_INVALID, "ps server %d: checkpoint requested but no ckpt= path configured",
                         s->sidx);
  char path[1100];
  snprintf(path, sizeof path, "%s.server%d", o->ckpt, s->sidx);
  shoal__ckpt_meta_t meta = {.workers = (uint32_t)s->W, .iters_done = (uint64_t)c, .nparams = s->len,
                             .ranks = (uint32_t)(s->W + o->S)};
  int rc = shoal__ckpt_save(path, &meta, s->p, s->v);
  if (!rc) s->ckpt_clock = c;
  return rc;
}

/* Sync: the gradient of worker w (learning rate lr) is in; with every live worker's, average in rank
 * order, take one step and answer them all. */
static int server_sync_arrive(server_t *s, int w, double lr) {
  size_t len = s->len;
  s->lrs[w] = lr;
  s->waiting[w] = 1;
  if (++s->arrived < s->live) return 0;
  memset(s->gsum, 0, len * sizeof(float));
  for (int u = 0; u < s->W; u++)
    if (s->waiting[u])
      for (size_t i = 0; i < len; i++) s->gsum[i] += s->gbuf[(size_t)u * len + i];
  shoal__sgd_step_scaled(s->p, s->v, s->gsum, len, (float)s->lrs[w], (float)s->o->momentum, (float)s->o->wd,
                         1.0f / (float)s->arrived);
  s->arrived = 0;
  for (int u = 0; u < s->W; u++)
    if (s->waiting[u]) s->applied[u]++;
  int rc = 0;
  for (int u = 0; u < s->W && !rc; u++)
    if (s->waiting[u]) rc = reply(s, u);
  return rc;
}

/* Worker w's gradient for hdr's clock: received, its staleness checked, then applied (async, ssp: at once,
 * scaled by 1/W; sync: with the clock's others). */
static int server_gradient(server_t *s, int w, const double hdr[4]) {
  const ps_cfg_t *o = s->o;
  long clock = (long)hdr[1], incl = (long)hdr[2];
  float *g = s->gbuf + (o->mode == SHOAL_PS_SYNC ? (size_t)w * s->len : 0);
  int rc = shoal_recv(s->c, g, s->len, SHOAL_FLOAT32, w, TAG_GRAD);
  if (rc) return comm_err(s->c, rc, "receive a gradient from", w);
  if (clock != s->applied[w])
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server: worker %d pushed clock %ld, expected %ld%s", w, clock,
                         s->applied[w], o->resume[0] ? " (the workers' and the servers' checkpoints are from "
                         "different points)" : "");
  int stale = (int)(clock - incl);
  if (stale > s->max_stale) s->max_stale = stale;
  if (o->mode == SHOAL_PS_SSP && stale > o->staleness)
    return shoal__seterr(SHOAL_ERR_INTERNAL, "ps server: gradient of worker %d is %d clocks stale (bound %d)", w, stale,
                         o->staleness);
  if (o->mode == SHOAL_PS_SYNC) return server_sync_arrive(s, w, hdr[3]);
  shoal__sgd_step_scaled(s->p, s->v, g, s->len, (float)hdr[3], (float)o->momentum, (float)o->wd, 1.0f / (float)s->W);
  s->applied[w]++;
  s->waiting[w] = 1;
  return 0;
}

/* One header from any worker and what it asks for. */
static int server_message(server_t *s) {
  const ps_cfg_t *o = s->o;
  double hdr[4];
  int w, rc;
  if ((rc = shoal_recv_any(s->c, hdr, 4, SHOAL_FLOAT64, TAG_HDR, &w)))
    return comm_err(s->c, rc, "receive a header from", -1);
  if (w < 0 || w >= s->W)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server rank %d: header from rank %d, not a worker",
                         shoal_comm_rank(s->c), w);
  if ((int)hdr[0] == KIND_DONE) {
    s->done[w] = 1;
    s->live--;
  } else if ((int)hdr[0] == KIND_CKPT) {
    return server_checkpoint(s, (long)hdr[1]);
  } else {
    if ((rc = server_gradient(s, w, hdr)) || o->mode == SHOAL_PS_SYNC) return rc;
  }
  /* async / ssp: answer every worker whose bound now holds */
  if (o->mode != SHOAL_PS_SYNC)
    for (int u = 0; u < s->W; u++)
      if (s->waiting[u] && !s->done[u] && may_reply(s, u) && (rc = reply(s, u))) return rc;
  if (o->mode == SHOAL_PS_SYNC && s->arrived > 0 && s->arrived == s->live)
    return shoal__seterr(SHOAL_ERR_PROTOCOL, "ps server: a worker finished while others wait in sync mode");
  return 0;
}

static int ps_server(shoal_comm_t *world, const ps_cfg_t *o, float *params, size_t nparams, int *max_stale) {
  int W = o->W, S = o->S, sidx = shoal_comm_rank(world) - W;
  size_t off, len;
  ps_shard(nparams, S, sidx, &off, &len);
  server_t s = {.c = world, .o = o, .W = W, .sidx = sidx, .p = params + off, .len = len, .live = W};
  int rc = 0;
  s.v = calloc(len ? len : 1, sizeof(float));
  s.applied = calloc((size_t)W, sizeof(long));
  s.done = calloc((size_t)W, sizeof(int));
  s.waiting = calloc((size_t)W, sizeof(int));
  s.gbuf = malloc(((o->mode == SHOAL_PS_SYNC ? (size_t)W : 1) * len + 1) * sizeof(float));
  s.gsum = malloc((len + 1) * sizeof(float));
  s.lrs = calloc((size_t)W, sizeof(double));
  if (!s.v || !s.applied || !s.done || !s.waiting || !s.gbuf || !s.gsum || !s.lrs) {
    rc = shoal__seterr(SHOAL_ERR_NOMEM, "ps server: out of memory");
    goto out_free;
  }
  if (o->resume[0] && (rc = server_resume(&s))) goto out_free;
  while (s.live > 0 && !rc) rc = server_message(&s);
  /* Everyone is done: the final parameters go to every worker. */
  for (int w = 0; w < W && !rc; w++) {
    double incl = (double)min_applied(&s);
    if ((rc = shoal_send(world, &incl, 1, SHOAL_FLOAT64, w, TAG_PARAM)) ||
        (rc = shoal_send(world, s.p, len, SHOAL_FLOAT32, w, TAG_PARAM)))
      rc = comm_err(world, rc, "send final parameters to", w);
  }
  if (!rc) *max_stale = s.max_stale;
out_free:
  free(s.v);
  free(s.applied);
  free(s.done);
  free(s.waiting);
  free(s.gbuf);
  free(s.gsum);
  free(s.lrs);
  return rc;
}

/* ---- worker ---- */

typedef struct ps {
  ps_cfg_t cfg;
  long clock;
  int first;
  double *incl; /* per server: `included` of the parameters last received */
  float *flat;  /* total: when there are several buckets */
  float *flatg;
} ps_t;

static int pull(shoal_sync_t *x, float *params) {
  ps_t *w = x->impl;
  for (int s = 0; s < w->cfg.S; s++) {
    size_t off, len;
    ps_shard(x->total, w->cfg.S, s, &off, &len);
    int rc = shoal_recv(x->comm, &w->incl[s], 1, SHOAL_FLOAT64, w->cfg.W + s, TAG_PARAM);
    if (!rc) rc = shoal_recv(x->comm, params + off, len, SHOAL_FLOAT32, w->cfg.W + s, TAG_PARAM);
    if (rc) return comm_err(x->comm, rc, "receive parameters from server", w->cfg.W + s);
  }
  return 0;
}

static int ps_checkpoint(shoal_sync_t *x) {
  ps_t *w = x->impl;
  if (!w->cfg.ckpt[0])
    return shoal__seterr(SHOAL_ERR_INVALID, "sync ps: shoal_sync_checkpoint needs the config key ckpt=PATH");
  for (int s = 0; s < w->cfg.S; s++) {
    double hdr[4] = {KIND_CKPT, (double)w->clock, 0, 0};
    int rc = shoal_send(x->comm, hdr, 4, SHOAL_FLOAT64, w->cfg.W + s, TAG_HDR);
    if (rc) return comm_err(x->comm, rc, "request a checkpoint from server", w->cfg.W + s);
  }
  return 0;
}

static int ps_begin(shoal_sync_t *x) {
  ps_t *w = x->impl;
  if (w->first) { /* a resumed run starts at the checkpoint's clock */
    w->clock = x->step;
    w->first = 0;
  }
  return 0;
}

static int ps_finish(shoal_sync_t *x) {
  ps_t *w = x->impl;
  if (w->cfg.slow_s > 0 && shoal_comm_rank(x->comm) == 0) shoal__sleep_s(w->cfg.slow_s); /* tests: a straggler */
  const float *grads = x->nb == 1 ? x->b[0].g : w->flatg;
  float *params = x->nb == 1 ? x->b[0].p : w->flat;
  if (x->nb > 1) shoal__sync_gather(x, 1, w->flatg);
  for (int s = 0; s < w->cfg.S; s++) {
    size_t off, len;
    ps_shard(x->total, w->cfg.S, s, &off, &len);
    double hdr[4] = {KIND_GRAD, (double)w->clock, w->incl[s], x->lr};
    int rc = shoal_send(x->comm, hdr, 4, SHOAL_FLOAT64, w->cfg.W + s, TAG_HDR);
    if (!rc) rc = shoal_send(x->comm, grads + off, len, SHOAL_FLOAT32, w->cfg.W + s, TAG_GRAD);
    if (rc) return comm_err(x->comm, rc, "push gradients to server", w->cfg.W + s);
  }
  x->payload += (double)x->total * sizeof(float);
  w->clock++;
  int rc = pull(x, params);
  if (!rc && x->nb > 1) shoal__sync_scatter(x, 0, w->flat);
  return rc;
}

static int ps_final(shoal_sync_t *x) {
  ps_t *w = x->impl;
  for (int s = 0; s < w->cfg.S; s++) {
    double hdr[4] = {KIND_DONE, (double)w->clock, 0, 0};
    int rc = shoal_send(x->comm, hdr, 4, SHOAL_FLOAT64, w->cfg.W + s, TAG_HDR);
    if (rc) return comm_err(x->comm, rc, "send done to server", w->cfg.W + s);
  }
  float *params = x->nb == 1 ? x->b[0].p : w->flat;
  int rc = pull(x, params);
  if (!rc && x->nb > 1) shoal__sync_scatter(x, 0, w->flat);
  return rc;
}

static int ps_serve(shoal_sync_t *x) {
  ps_t *w = x->impl;
  float *params = x->nb == 1 ? x->b[0].p : w->flat;
  if (x->nb > 1) shoal__sync_gather(x, 0, w->flat);
  int rc = ps_server(x->comm, &w->cfg, params, x->total, &x->max_stale);
  if (!rc && x->nb > 1) shoal__sync_scatter(x, 0, w->flat);
  return rc;
}

static void ps_destroy(shoal_sync_t *x) {
  ps_t *w = x->impl;
  free(w->incl);
  free(w->flat);
  free(w->flatg);
  free(w);
}

static int ps_create(shoal_sync_t *x, shoal__cfg_t *cfg) {
  int size = shoal_comm_size(x->comm), rank = shoal_comm_rank(x->comm);
  long S, st;
  double lr, mom, wd, slow;
  const char *mode = shoal__cfg_str(cfg, "mode");
  shoal_ps_mode_t m = SHOAL_PS_SYNC;
  int rc;
  if (mode && shoal_ps_mode_parse(mode, &m))
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config ps: mode=%s: expected sync, async or ssp", mode);
  if ((rc = shoal__cfg_int(cfg, "servers", 1, 1, 1 << 20, &S)) ||
      (rc = shoal__cfg_int(cfg, "staleness", 2, 0, 1000000, &st)) ||
      (rc = shoal__cfg_double(cfg, "lr", 0.05, 0, 1e6, &lr)) ||
      (rc = shoal__cfg_double(cfg, "momentum", 0.9, 0, 0.999999, &mom)) ||
      (rc = shoal__cfg_double(cfg, "wd", 0, 0, 0.999999, &wd)) ||
      (rc = shoal__cfg_double(cfg, "slow_ms", 0, 0, 1e6, &slow)))
    return rc;
  if (m != SHOAL_PS_SSP && shoal__cfg_str(cfg, "staleness"))
    return shoal__seterr(SHOAL_ERR_INVALID, "sync config ps: staleness applies to mode=ssp only (mode is %s)",
                         shoal_ps_mode_name(m));
  if (size < 2)
    return shoal__seterr(SHOAL_ERR_INVALID,
                         "sync ps: a parameter server needs at least 2 ranks (workers plus %ld server%s); this "
                         "communicator has 1 (run under `shoal launch -n N`)",
                         S, S > 1 ? "s" : "");
  if (S >= size)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync ps: servers=%ld leaves no worker among %d ranks (at most %d servers)",
                         S, size, size - 1);
  ps_t *w = calloc(1, sizeof *w);
  if (!w) return shoal__seterr(SHOAL_ERR_NOMEM, "sync ps: out of memory");
  x->impl = w;
  w->cfg = (ps_cfg_t){.S = (int)S, .W = size - (int)S, .mode = m, .staleness = (int)st, .momentum = mom, .wd = wd,
                      .slow_s = slow * 1e-3};
  x->lr = lr;
  w->first = 1;
  const char *ck = shoal__cfg_str(cfg, "ckpt"), *rs = shoal__cfg_str(cfg, "resume");
  if (ck) snprintf(w->cfg.ckpt, sizeof w->cfg.ckpt, "%s", ck);
  if (rs) snprintf(w->cfg.resume, sizeof w->cfg.resume, "%s", rs);
  if (!(w->incl = calloc((size_t)S, sizeof(double)))) return shoal__seterr(SHOAL_ERR_NOMEM, "sync ps: out of memory");
  int server = rank >= w->cfg.W;
  shoal_comm_t *split = NULL;
  if ((rc = shoal_comm_split(x->comm, server, rank, &split)))
    return shoal__seterr(rc, "sync ps: split workers from servers: %s", shoal_comm_errmsg(x->comm));
  x->workers = split;
  x->owns_workers = 1;
  x->flags = server ? SHOAL_SYNC_F_SERVER : SHOAL_SYNC_F_SERVER_STEP;
  return 0;
}

static int ps_setup(shoal_sync_t *x) {
  ps_t *w = x->impl;
  if (x->nb > 1) {
    w->flat = malloc(x->total * sizeof(float));
    w->flatg = malloc(x->total * sizeof(float));
    if (!w->flat || !w->flatg) return shoal__seterr(SHOAL_ERR_NOMEM, "sync ps: out of memory");
  }
  if (x->total < (size_t)w->cfg.S)
    return shoal__seterr(SHOAL_ERR_INVALID, "sync ps: %zu parameters cannot be sharded over %d servers", x->total,
                         w->cfg.S);
  return 0;
}

const shoal__strategy_t shoal__strategy_ps = {
    .name = "ps",
    .keys = "servers, mode, staleness, lr, momentum, wd, slow_ms, ckpt, resume",
    .create = ps_create,
    .destroy = ps_destroy,
    .setup = ps_setup,
    .begin = ps_begin,
    .finish = ps_finish,
    .final = ps_final,
    .checkpoint = ps_checkpoint,
    .serve = ps_serve,
};
