/* Multi-tree pipelined allreduce (AdapCC's ParTrees, spec adaptive-comm.md
 * A2/A3, adapted).
 *
 * Shape: the ranks are ordered by a key from the link profile (best first);
 * tree m (m = 0 .. P-1) is the heap layout of that order rotated left by m
 * (children of position i: 2i+1, 2i+2), so every tree has another root and
 * other interior ranks. With the pinning key the slowest ranks (a key below
 * SLOW_FRAC of the best) stay at the end, out of the rotation, under the same
 * parent in every tree (the best ranks): they are leaves in every tree and
 * move S/P up and down per tree, S in all, which is the least any rank can
 * move (the ring moves 2(p-1)/p S through every rank), over one flow each
 * way (several flows through one slow link only fight for it).
 * The tensor is cut into P slices, slice m reduced up tree m and broadcast
 * down it, in chunks, all trees at once. Keys (plan.key): KEY_BW_PIN (link
 * capacity, slow ranks pinned as leaves), KEY_BDP (bandwidth x latency to
 * the next host, all rotated: the spec's faithful rule), KEY_BW (capacity,
 * all rotated); the cost model picks P, the key and the chunk.
 *
 * Data plane: one thread, every message a request of the point-to-point
 * layer. Messages between two ranks go, in each direction, in one fixed
 * order both ends compute: by (chunk + L for broadcast chunks, tree, up
 * before down), with L about the pipeline's round trip, so that reduce
 * chunks keep flowing while earlier chunks come back down. Every message
 * depends only on messages earlier in that order (a chunk goes down after
 * it went up; staging buffers are reused W chunks later), so the schedule
 * cannot deadlock. The root of tree m reduces chunk j of slice m (its own
 * data, then its children's in tree order; AVG divided there) and every
 * rank receives the root's bits: identical results on every rank.
 *
 * Cost (fluid, flows.c): every tree edge carries S/P each way at once, the
 * most loaded link or host sets the pace; plus the pipeline's fill (one
 * chunk down the slowest root-to-leaf path and back) and the reductions. */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define TREES_MAX 8
#define WINDOW 4               /* chunks in flight per tree in the staging buffers */
#define SLOW_FRAC 0.6          /* a rank whose key is below this fraction of the best is slow */
#define CHUNK_MIN (16u << 10)
#define CHUNK_MAX (1u << 20)
#define STAGING_MAX (48u << 20) /* P trees x 3 staging buffers x WINDOW chunks at most */
#define SPIN_NS 50000ull        /* before blocking on a latency-bound wait (as coll/common.c) */
#define SPIN_MAX_BYTES 32768u
enum { KEY_BW_PIN = 0, KEY_BDP = 1, KEY_BW = 2, NKEYS = 3 };

/* ---- the shape ---- */

typedef struct shape {
  int p, P, nrot, npin;
  int *order; /* [p] ranks of the context, best key first */
  int *fixed; /* [p] the rank at heap position q in every tree, or -1: q rotates */
  int *rot;   /* [p] for a rotating position, its index among them */
  int *rranks;/* [nrot] the rotating ranks, in key order */
  int *pos;   /* [P * p] position of rank r in tree m */
} shape_t;

static int shape_rank(const shape_t *s, int m, int q) {
  return s->fixed[q] >= 0 ? s->fixed[q] : s->rranks[(s->rot[q] + m) % s->nrot];
}

typedef struct keyed {
  double key;
  int r;
} keyed_t;

static int cmp_keyed(const void *a, const void *b) {
  const keyed_t *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  return x->r - y->r;
}

static int host_of(const shoal__coll_ctx_t *x, int i) { return x->w ? x->w->topo->host_of[x->wranks[i]] : i; }

/* The order of the ranks for a key, and which heap positions stay put: with
 * the pinning key the slow ranks sit at the last positions (leaves) in every
 * tree and their parents' positions hold the best ranks in every tree, so a
 * slow host talks to one peer, one flow each way (several flows through one
 * slow link only fight for it); the other positions rotate. 0 or NOMEM. */
static int make_shape(const shoal__coll_ctx_t *x, int P, int key, shape_t *s) {
  int p = x->p, nh = x->w ? x->w->topo->nhosts : p;
  memset(s, 0, sizeof *s);
  s->p = p, s->P = P;
  s->order = malloc(sizeof *s->order * (size_t)p * 4);
  s->pos = malloc(sizeof *s->pos * (size_t)(P * p));
  keyed_t *k = malloc(sizeof *k * (size_t)p);
  int *per_host = calloc((size_t)nh, sizeof *per_host);
  if (!s->order || !s->pos || !k || !per_host) {
    free(s->order), free(s->pos), free(k), free(per_host);
    s->order = s->pos = NULL;
    return SHOAL_ERR_NOMEM;
  }
  s->fixed = s->order + p, s->rot = s->fixed + p, s->rranks = s->rot + p;
  for (int i = 0; i < p; i++) per_host[host_of(x, i)]++;
  double best = 0;
  for (int i = 0; i < p; i++) {
    int h = host_of(x, i);
    double ob = 1.0 / x->net.beta_s, ib = ob;
    if (x->w) shoal__tune_host_caps(x->w, h, &ob, &ib);
    double cap = (ob < ib ? ob : ib) / per_host[h]; /* ranks of one host share its link */
    if (key == KEY_BDP) { /* bandwidth x latency towards the next rank on another host, in rank order */
      int j = (i + 1) % p;
      for (int n = 0; n < p && host_of(x, j) == h; n++) j = (j + 1) % p;
      double a, b;
      shoal__ctx_link(x, i, j, &a, &b);
      cap = a / b;
    }
    k[i] = (keyed_t){cap, i};
    if (cap > best) best = cap;
  }
  qsort(k, (size_t)p, sizeof *k, cmp_keyed);
  for (int i = 0; i < p; i++) s->order[i] = k[i].r, s->fixed[i] = -1;
  int pinned = 0, anchors = 0;
  if (key == KEY_BW_PIN) /* the slowest, as leaves: at most the heap's leaf positions, ceil(p/2) */
    while (pinned < (p + 1) / 2 && k[p - 1 - pinned].key < SLOW_FRAC * best) pinned++;
  for (int i = 0; i < pinned; i++) s->fixed[p - 1 - i] = s->order[p - 1 - i];
  for (int i = 0; i < pinned; i++) { /* their parents: the best ranks, in every tree */
    int par = (p - 2 - i) / 2;
    if (s->fixed[par] < 0) s->fixed[par] = s->order[anchors++];
  }
  s->npin = pinned;
  s->nrot = 0;
  for (int q = 0, next = anchors; q < p; q++)
    if (s->fixed[q] < 0) s->rot[q] = s->nrot, s->rranks[s->nrot++] = s->order[next++];
  for (int m = 0; m < P; m++)
    for (int q = 0; q < p; q++) s->pos[m * p + shape_rank(s, m, q)] = q;
  free(k), free(per_host);
  return 0;
}

static void free_shape(shape_t *s) {
  free(s->order);
  free(s->pos);
}

static int depth_of(int p) { /* edges from the root to the deepest heap position */
  int d = 0;
  while ((1 << (d + 1)) - 1 < p) d++;
  return d;
}

static size_t pick_chunk(const shoal__coll_ctx_t *x, double slice, int D, double alpha, int P) {
  long forced;
  if (!shoal__config_long("SHOAL_CHUNK_BYTES", 0, 0, 1L << 30, &forced) && forced > 0) return (size_t)forced;
  /* spec A2: c* = sqrt(S_m a / ((D - 1) w b)), w = 3 for a binary interior rank */
  double c = sqrt(slice * alpha / ((D > 1 ? D - 1 : 1) * 3.0 * x->net.beta_s));
  if (c < CHUNK_MIN) c = CHUNK_MIN;
  if (c > CHUNK_MAX) c = CHUNK_MAX;
  if (c * 3 * WINDOW * P > STAGING_MAX) c = (double)STAGING_MAX / (3.0 * WINDOW * P);
  return (size_t)c;
}

/* Predicted time of one shape; *chunk: its chunk. */
static double shape_cost(const shoal__coll_ctx_t *x, const shape_t *s, double S, size_t *chunk) {
  int p = s->p, P = s->P, n = 0;
  double Sm = S / P;
  shoal__flow_t *f = malloc(sizeof *f * (size_t)(2 * P * p));
  double *acc = malloc(sizeof *acc * (size_t)p), *red = calloc((size_t)p * 2, sizeof *red), *sends = red + p;
  if (!f || !acc || !red) {
    free(f), free(acc), free(red);
    return INFINITY;
  }
  for (int m = 0; m < P; m++)
    for (int q = 1; q < p; q++) {
      int c = shape_rank(s, m, q), par = shape_rank(s, m, (q - 1) / 2);
      f[n++] = (shoal__flow_t){c, par, Sm};
      f[n++] = (shoal__flow_t){par, c, Sm};
      red[par] += Sm; /* one reduction per child's slice */
      sends[c] += 1, sends[par] += 1; /* messages per chunk: up from the child, down from the parent */
    }
  double amax, t = shoal__flows_time(x, f, n, &amax);
  int D = depth_of(p);
  *chunk = pick_chunk(x, Sm, D, amax, P);
  double c = (double)*chunk < Sm ? (double)*chunk : Sm, fill = 0, rmax = 0, smax = 0;
  /* every message a rank sends costs it a latency's worth of its time: with many trees of small slices
   * the messages, not the bytes, bound a small allreduce */
  double K = c > 0 ? ceil(Sm / c) : 1;
  for (int r = 0; r < p; r++) smax = sends[r] > smax ? sends[r] : smax;
  if (smax * K * amax > t) t = smax * K * amax;
  for (int m = 0; m < P; m++) { /* a chunk's trip down the slowest root-to-leaf path, and back */
    acc[0] = 0;
    for (int q = 1; q < p; q++) {
      double a, b;
      shoal__ctx_link(x, shape_rank(s, m, (q - 1) / 2), shape_rank(s, m, q), &a, &b);
      acc[q] = acc[(q - 1) / 2] + a + c * b;
      if (2 * acc[q] > fill) fill = 2 * acc[q];
    }
  }
  for (int r = 0; r < p; r++) rmax = red[r] > rmax ? red[r] : rmax;
  free(f), free(acc), free(red);
  return t + fill + rmax * x->flat.gamma_s + x->o;
}

/* The cheapest shape for S bytes: P, key and chunk in *plan; its time. */
static double search(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *plan) {
  double best = INFINITY;
  int nkeys = x->w ? NKEYS : 1; /* without a profile every key gives the same order */
  for (int key = 0; key < nkeys; key++)
    for (int P = 1; P <= TREES_MAX && P <= x->p; P++) {
      shape_t s;
      if (make_shape(x, P, key, &s)) return INFINITY;
      size_t chunk = CHUNK_MIN;
      double t = shape_cost(x, &s, (double)bytes, &chunk);
      free_shape(&s);
      if (t < best) {
        best = t;
        if (plan) *plan = (shoal__plan_t){.chunk_bytes = chunk, .ntrees = P, .key = key};
      }
    }
  return best;
}

static double trees_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  return x->p < 2 ? INFINITY : search(x, bytes, NULL);
}

/* SHOAL_TREES: "auto", or "P" / "P:key" (key pin, bdp or bw) to force the shape (ablations). */
static int forced_shape(int *P, int *key) {
  const char *v = shoal__config_str("SHOAL_TREES", "auto");
  *P = 0, *key = -1;
  if (!v || !*v || !strcmp(v, "auto")) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  static const char *const keys[] = {"pin", "bdp", "bw"};
  if (end != v && n >= 1 && n <= TREES_MAX && (!*end || *end == ':')) {
    *P = (int)n;
    if (!*end) return 0;
    for (int k = 0; k < NKEYS; k++)
      if (!strcmp(end + 1, keys[k])) *key = k;
    if (*key >= 0) return 0;
  }
  return shoal__seterr(SHOAL_ERR_CONFIG, "SHOAL_TREES='%s': expected auto, or trees 1..%d with an optional :pin, :bdp "
                       "or :bw (e.g. 4:pin)", v, TREES_MAX);
}

static int trees_plan(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *out) {
  long forced;
  int rc = shoal__config_long("SHOAL_CHUNK_BYTES", 0, 0, 1L << 30, &forced), P, key;
  if (rc || (rc = forced_shape(&P, &key))) return rc;
  if (x->p < 2) {
    *out = (shoal__plan_t){.chunk_bytes = CHUNK_MIN, .ntrees = 1, .key = KEY_BW_PIN};
    return 0;
  }
  if (P) { /* forced: that shape, the chunk from the model */
    if (P > x->p) P = x->p;
    shape_t s;
    if (make_shape(x, P, key < 0 ? KEY_BW_PIN : key, &s))
      return shoal__seterr(SHOAL_ERR_NOMEM, "allreduce trees: out of memory");
    size_t chunk = CHUNK_MIN;
    shape_cost(x, &s, (double)bytes, &chunk);
    free_shape(&s);
    *out = (shoal__plan_t){.chunk_bytes = chunk, .ntrees = P, .key = key < 0 ? KEY_BW_PIN : key};
    return 0;
  }
  if (isinf(search(x, bytes, out))) return shoal__seterr(SHOAL_ERR_NOMEM, "allreduce trees: out of memory");
  return 0;
}

/* ---- the data plane ---- */

typedef struct msg {
  shoal__req_t req;
  int m, j, up, peer; /* tree, chunk, direction, comm rank of the other end */
  char posted;
} msg_t;

typedef struct plink { /* the messages to / from one peer, in the order both ends use */
  int *sends, *recvs;  /* indices into run.msgs */
  int ns, nr, spost, sdone, rpost, rdone;
} plink_t;

typedef struct tree_state {
  int parent, nch, child[2]; /* comm ranks, -1: none */
  size_t off, len;           /* the slice, in elements */
  int K;                     /* chunks */
  int reduced;               /* chunks reduced here (or, at a leaf, available) */
  int *upr[2], *ups, *dnr, *dns[2]; /* message index per chunk */
} tree_state_t;

typedef struct run {
  shoal_comm_t *c;
  const shoal__op_t *op;
  const char *src;
  char *dst, *staging;
  size_t es, ce;
  int P, p;
  tree_state_t t[TREES_MAX];
  msg_t *msgs;
  int nmsgs;
  plink_t *links; /* [p] */
  int *idx;       /* the index arrays of links and trees */
} run_t;

static size_t chunk_len(const tree_state_t *t, size_t ce, int j) {
  size_t o = (size_t)j * ce;
  return t->len - o < ce ? t->len - o : ce;
}
static char *staging(run_t *R, int m, int which, int j) { /* which: 0, 1 children's chunks, 2 the partial sum */
  return R->staging + ((((size_t)m * 3 + (size_t)which) * WINDOW) + (size_t)(j % WINDOW)) * R->ce * R->es;
}

static int add_msg(run_t *R, int m, int j, int up, int peer, int send) {
  msg_t *g = &R->msgs[R->nmsgs];
  g->m = m, g->j = j, g->up = up, g->peer = peer, g->posted = 0;
  g->req.kind = 0, g->req.state = 0;
  plink_t *l = &R->links[peer];
  if (send) l->sends[l->ns++] = R->nmsgs;
  else l->recvs[l->nr++] = R->nmsgs;
  return R->nmsgs++;
}

/* Build every message of this rank, per peer in the shared order. */
static int build(run_t *R, const shape_t *s, size_t count) {
  int p = R->p, me = shoal__comm_rank(R->c), maxK = 0, total = 0;
  int *per_peer = calloc((size_t)p * 2, sizeof *per_peer);
  if (!per_peer) return SHOAL_ERR_NOMEM;
  for (int m = 0; m < R->P; m++) {
    tree_state_t *t = &R->t[m];
    int q = s->pos[m * p + me];
    t->parent = q ? shape_rank(s, m, (q - 1) / 2) : -1;
    t->nch = 0;
    for (int k = 1; k <= 2; k++)
      if (2 * q + k < p) t->child[t->nch++] = shape_rank(s, m, 2 * q + k);
    shoal__block(count, (size_t)R->P, (size_t)m, &t->off, &t->len);
    t->K = (int)((t->len + R->ce - 1) / R->ce);
    t->reduced = t->nch == 0 ? t->K : 0; /* a leaf's chunks are its own data */
    if (t->K > maxK) maxK = t->K;
    int per = t->K * (t->nch + (t->parent >= 0)); /* messages each way */
    total += 2 * per;
    if (t->parent >= 0) per_peer[2 * t->parent] += t->K, per_peer[2 * t->parent + 1] += t->K;
    for (int k = 0; k < t->nch; k++) per_peer[2 * t->child[k]] += t->K, per_peer[2 * t->child[k] + 1] += t->K;
  }
  R->msgs = calloc((size_t)total + 1, sizeof *R->msgs);
  R->links = calloc((size_t)p, sizeof *R->links);
  R->idx = calloc((size_t)(total + 1) + (size_t)R->P * 6 * (size_t)(maxK + 1), sizeof *R->idx);
  int *idx = R->idx;
  if (!R->msgs || !R->links || !idx) {
    free(per_peer);
    return SHOAL_ERR_NOMEM;
  }
  int *at = idx;
  for (int q = 0; q < p; q++) {
    R->links[q].sends = at, at += per_peer[2 * q];
    R->links[q].recvs = at, at += per_peer[2 * q + 1];
  }
  free(per_peer);
  for (int m = 0; m < R->P; m++) {
    tree_state_t *t = &R->t[m];
    t->upr[0] = at, at += maxK + 1;
    t->upr[1] = at, at += maxK + 1;
    t->ups = at, at += maxK + 1;
    t->dnr = at, at += maxK + 1;
    t->dns[0] = at, at += maxK + 1;
    t->dns[1] = at, at += maxK + 1;
  }
  /* the order: by (chunk, tree, up before down), a broadcast chunk counted L later than its index */
  int L = 2 * depth_of(p) + 2;
  for (int jk = 0; jk < maxK + L; jk++)
    for (int m = 0; m < R->P; m++) {
      tree_state_t *t = &R->t[m];
      int j = jk;
      if (j < t->K) {
        for (int k = 0; k < t->nch; k++) t->upr[k][j] = add_msg(R, m, j, 1, t->child[k], 0);
        if (t->parent >= 0) t->ups[j] = add_msg(R, m, j, 1, t->parent, 1);
      }
      j = jk - L;
      if (j >= 0 && j < t->K) {
        if (t->parent >= 0) t->dnr[j] = add_msg(R, m, j, 0, t->parent, 0);
        for (int k = 0; k < t->nch; k++) t->dns[k][j] = add_msg(R, m, j, 0, t->child[k], 1);
      }
    }
  return 0;
}

static int msg_done(const run_t *R, int i) { return R->msgs[i].posted && R->msgs[i].req.state == 1; }

/* Can this message be posted now, and where does its data go or come from? */
static char *msg_buffer(run_t *R, const msg_t *g, int send, int *ready) {
  tree_state_t *t = &R->t[g->m];
  size_t off = (t->off + (size_t)g->j * R->ce) * R->es;
  *ready = 0;
  if (send && g->up) { /* my partial sum (a leaf: my data) once reduced */
    if (g->j >= t->reduced) return NULL;
    *ready = 1;
    return t->nch ? staging(R, g->m, 2, g->j) : (char *)R->src + off;
  }
  if (send) { /* down: the root's reduced chunk, or the one received from the parent */
    if (t->parent < 0 ? g->j >= t->reduced : !msg_done(R, t->dnr[g->j])) return NULL;
    *ready = 1;
    return R->dst + off;
  }
  if (g->up) { /* a child's chunk into a staging slot, free once chunk j - WINDOW is reduced */
    if (g->j >= t->reduced + WINDOW) return NULL;
    *ready = 1;
    return staging(R, g->m, g->peer == t->child[0] ? 0 : 1, g->j);
  }
  *ready = 1; /* the result, straight into dst */
  return R->dst + off;
}

/* Reduce the chunks whose inputs are all here (in order, per tree). */
static int reduce_ready(run_t *R) {
  int made = 0;
  for (int m = 0; m < R->P; m++) {
    tree_state_t *t = &R->t[m];
    while (t->nch && t->reduced < t->K) {
      int j = t->reduced;
      if (!msg_done(R, t->upr[0][j]) || (t->nch > 1 && !msg_done(R, t->upr[1][j]))) break;
      if (t->parent >= 0 && j >= WINDOW && !msg_done(R, t->ups[j - WINDOW])) break; /* partial-sum slot busy */
      size_t n = chunk_len(t, R->ce, j), off = (t->off + (size_t)j * R->ce) * R->es;
      char *out = t->parent < 0 ? R->dst + off : staging(R, m, 2, j);
      shoal_dtype_t dt = (shoal_dtype_t)R->op->dtype;
      shoal_redop_t ro = (shoal_redop_t)R->op->redop;
      shoal__reduce3(out, R->src + off, staging(R, m, 0, j), n, dt, ro);
      if (t->nch > 1) shoal__reduce3(out, out, staging(R, m, 1, j), n, dt, ro);
      if (t->parent < 0 && ro == SHOAL_AVG) shoal__reduce_avg_finish(out, n, dt, R->p);
      t->reduced++;
      made = 1;
    }
  }
  return made;
}

static int post_ready(run_t *R, int *made) {
  for (int q = 0; q < R->p; q++) {
    plink_t *l = &R->links[q];
    while (l->spost < l->ns) {
      msg_t *g = &R->msgs[l->sends[l->spost]];
      int ready;
      char *buf = msg_buffer(R, g, 1, &ready);
      if (!ready) break;
      size_t bytes = chunk_len(&R->t[g->m], R->ce, g->j) * R->es;
      int rc = shoal__isend(R->c, R->op, q, buf, bytes, &g->req);
      if (rc) return rc;
      g->posted = 1, l->spost++, *made = 1;
    }
    while (l->rpost < l->nr) {
      msg_t *g = &R->msgs[l->recvs[l->rpost]];
      int ready;
      char *buf = msg_buffer(R, g, 0, &ready);
      if (!ready) break;
      size_t bytes = chunk_len(&R->t[g->m], R->ce, g->j) * R->es;
      int rc = shoal__irecv(R->c, R->op, q, buf, bytes, &g->req);
      if (rc) return rc;
      g->posted = 1, l->rpost++, *made = 1;
    }
  }
  return 0;
}

static int trees_body(run_t *R) {
  shoal__req_t **heads = malloc(sizeof *heads * (size_t)R->p * 2);
  if (!heads) return shoal__comm_fail(R->c, SHOAL_ERR_NOMEM, R->op, -1, "allreduce trees: out of memory");
  int rc = 0;
  for (;;) {
    int made = 0, nd, left = 0, nh = 0;
    if ((rc = shoal__test(R->c, R->op, NULL, 0, &nd))) break;
    for (int q = 0; q < R->p; q++) { /* completions come in order per peer and direction */
      plink_t *l = &R->links[q];
      while (l->sdone < l->spost && msg_done(R, l->sends[l->sdone])) l->sdone++, made = 1;
      while (l->rdone < l->rpost && msg_done(R, l->recvs[l->rdone])) l->rdone++, made = 1;
    }
    made |= reduce_ready(R);
    if ((rc = post_ready(R, &made))) break;
    for (int q = 0; q < R->p; q++) {
      plink_t *l = &R->links[q];
      left += (l->ns - l->sdone) + (l->nr - l->rdone);
      if (l->sdone < l->spost) heads[nh++] = &R->msgs[l->sends[l->sdone]].req;
      if (l->rdone < l->rpost) heads[nh++] = &R->msgs[l->recvs[l->rdone]].req;
    }
    if (!left) break;
    if (made) continue;
    if (!nh) { /* nothing posted, nothing to post: a bug in the schedule, never a hang */
      rc = shoal__comm_fail(R->c, SHOAL_ERR_INTERNAL, R->op, -1, "allreduce trees: schedule stalled");
      break;
    }
    /* a latency-bound wait spins a little first, as the other point-to-point algorithms do (coll_wait):
     * a blocked process pays a scheduler wakeup per message */
    size_t due = 0;
    for (int i = 0; i < nh; i++) due += heads[i]->kind == 2 ? heads[i]->bytes - heads[i]->done : 0;
    if (due <= SPIN_MAX_BYTES) {
      uint64_t t0 = shoal__now_ns();
      int any = 0;
      while (!any && shoal__now_ns() - t0 < SPIN_NS) {
        sched_yield();
        if ((rc = shoal__test(R->c, R->op, NULL, 0, &nd))) break;
        for (int i = 0; i < nh && !any; i++) any = heads[i]->state != 0;
      }
      if (rc) break;
      if (any) continue;
    }
    if ((rc = shoal__waitany(R->c, R->op, heads, nh))) break;
  }
  free(heads);
  return rc;
}

static int trees_run(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                     const shoal__plan_t *plan) {
  shoal__coll_ctx_t x;
  shoal__coll_ctx(c, &x);
  int P = plan->ntrees < 1 ? 1 : plan->ntrees > TREES_MAX ? TREES_MAX : plan->ntrees;
  if (P > x.p) P = x.p;
  run_t R = {.c = c, .op = op, .src = src, .dst = dst, .P = P, .p = x.p,
             .es = shoal_dtype_size((shoal_dtype_t)op->dtype)};
  R.ce = plan->chunk_bytes / R.es ? plan->chunk_bytes / R.es : 1;
  shape_t s;
  int rc = make_shape(&x, P, plan->key, &s);
  if (rc) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce trees: out of memory");
  R.staging = shoal__coll_scratch(1, (size_t)P * 3 * WINDOW * R.ce * R.es);
  if (!R.staging || build(&R, &s, count)) {
    rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce trees: out of memory");
  } else {
    if (shoal__log_enabled(SHOAL_LOG_DEBUG, "COLL") && shoal__comm_rank(c) == 0)
      SHOAL_DEBUG("COLL", "allreduce seq %u trees: %d tree(s), key %d, %d pinned leaves, chunk %zu B, roots %d%s",
                  op->seq, P, plan->key, s.npin, R.ce * R.es, shape_rank(&s, 0, 0), P > 1 ? " ..." : "");
    rc = trees_body(&R);
  }
  free(R.idx);
  free(R.links);
  free(R.msgs);
  free_shape(&s);
  return rc;
}

int shoal__trees_interior(const shoal__coll_ctx_t *x, const shoal__plan_t *plan, int rank) {
  shape_t s;
  int P = plan->ntrees < 1 ? 1 : plan->ntrees > x->p ? x->p : plan->ntrees, n = 0;
  if (make_shape(x, P, plan->key, &s)) return -1;
  for (int m = 0; m < P; m++) n += 2 * s.pos[m * x->p + rank] + 1 < x->p;
  free_shape(&s);
  return n;
}

static void trees_describe(const shoal__coll_ctx_t *x, const shoal__plan_t *plan, char *out, size_t cap) {
  static const char *const keys[] = {"pin slow", "bdp", "bw"};
  shape_t s;
  int P = plan->ntrees < 1 ? 1 : plan->ntrees > x->p ? x->p : plan->ntrees;
  if (make_shape(x, P, plan->key, &s)) {
    snprintf(out, cap, "?");
    return;
  }
  int n = snprintf(out, cap, "%d trees, key %s, chunk %zu B, leaves in every tree:", P,
                   plan->key >= 0 && plan->key < NKEYS ? keys[plan->key] : "?", plan->chunk_bytes), any = 0;
  for (int r = 0; r < s.p && n > 0 && (size_t)n < cap; r++) {
    int leaf = 1;
    for (int m = 0; m < P && leaf; m++) leaf = 2 * s.pos[m * s.p + r] + 1 >= s.p;
    if (leaf) n += snprintf(out + n, cap - (size_t)n, " %d", r), any = 1;
  }
  if (!any && n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, " none");
  free_shape(&s);
}

static int trees_check_env(void) {
  int P, key;
  return forced_shape(&P, &key);
}

const shoal__coll_algo_t shoal__algo_trees = {
    .name = "trees",
    .alias = {"multitree", "partrees"},
    .what = "P pipelined trees over rotated orders of the link profile, slow ranks as leaves",
    .flags = SHOAL__ALGO_TAGGED | SHOAL__ALGO_FLAT,
    .tie = 5,
    .cost = trees_cost,
    .plan = trees_plan,
    .describe = trees_describe,
    .run = trees_run,
    .check_env = trees_check_env,
};
