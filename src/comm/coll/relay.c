/* Reduction trees with relays (relay.h): shapes, flags, cost, and the data
 * plane.
 *
 * The data plane runs in two phases, reduce then broadcast, each over the
 * "keys" (chunk j of tree m) in one global order: chunk-major, tree-minor.
 * Every rank posts its sends and receives in that order, so each direction
 * of each pair carries its messages in the same order on both ends (what
 * the point-to-point layer's FIFO matching needs), and since a key depends
 * only on the same key lower (reduce) or higher (broadcast) in its tree,
 * processing keys in order cannot deadlock: sends never block, receives
 * are posted a window of keys ahead into staging, and the first unfinished
 * key of the whole world always has its inputs on the way.
 *
 * P = p rotated chains move 2 (p-1)/p S per rank, a ring's volume, and like a
 * ring only over the link from each rank to the next (relay.h); the two
 * phases run one after the other. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/relay.h"
#include "core/error.h"

#define WINDOW 16    /* keys whose receives are posted ahead */
#define SEND_RING 64 /* sends in flight per rank before the oldest is waited for */
#define MAX_CHUNKS 256

int shoal__relay_parent(const shoal__relay_shape_t *s, int m, int r) {
  int i = shoal__relay_pos(s, m, r);
  return i == 0 ? -1 : shoal__relay_rank(s, m, (i - 1) / s->fanout);
}

int shoal__relay_children(const shoal__relay_shape_t *s, int m, int r, int out[SHOAL__RELAY_MAX_FANOUT]) {
  int i = shoal__relay_pos(s, m, r), n = 0;
  for (int c = 1; c <= s->fanout; c++) {
    long pos = (long)s->fanout * i + c;
    if (pos < s->p) out[n++] = shoal__relay_rank(s, m, (int)pos);
  }
  return n;
}

static int bc_pos(const shoal__relay_shape_t *s, int m, int r) { return ((r - m) % s->p + s->p) % s->p; }
static int bc_rank(const shoal__relay_shape_t *s, int m, int i) { return (i + m) % s->p; }

int shoal__relay_bcast_parent(const shoal__relay_shape_t *s, int m, int r) {
  int i = bc_pos(s, m, r);
  return i == 0 ? -1 : bc_rank(s, m, (i - 1) / s->fanout);
}

int shoal__relay_bcast_children(const shoal__relay_shape_t *s, int m, int r, int out[SHOAL__RELAY_MAX_FANOUT]) {
  int i = bc_pos(s, m, r), n = 0;
  for (int c = 1; c <= s->fanout; c++) {
    long pos = (long)s->fanout * i + c;
    if (pos < s->p) out[n++] = bc_rank(s, m, (int)pos);
  }
  return n;
}

int shoal__relay_depth(const shoal__relay_shape_t *s) {
  int d = 0;
  long last = 0, width = 1; /* positions 0 .. last are at depth <= d */
  while (last < s->p - 1) {
    width *= s->fanout;
    last += width;
    d++;
  }
  return d;
}

void shoal__relay_active_below(const shoal__relay_shape_t *s, int m, const unsigned char *has_local,
                               unsigned char *out) {
  /* children sit at higher positions than their parent: one pass from the last position up */
  for (int i = s->p - 1; i >= 0; i--) {
    int r = shoal__relay_rank(s, m, i), a = has_local[r] != 0;
    for (int c = 1; c <= s->fanout && !a; c++) {
      long pos = (long)s->fanout * i + c;
      if (pos < s->p && out[shoal__relay_rank(s, m, (int)pos)]) a = 1;
    }
    out[r] = (unsigned char)a;
  }
}

int shoal__relay_flags(const shoal__relay_shape_t *s, int m, const unsigned char *has_local, int r,
                       shoal__relay_flags_t *out) {
  unsigned char *ab = malloc((size_t)s->p);
  if (!ab) return shoal__seterr(SHOAL_ERR_NOMEM, "relay flags: out of memory for %d ranks", s->p);
  shoal__relay_active_below(s, m, has_local, ab);
  memset(out, 0, sizeof *out);
  int ch[SHOAL__RELAY_MAX_FANOUT], nc = shoal__relay_children(s, m, r, ch);
  for (int i = 0; i < nc; i++)
    if (ab[ch[i]]) out->recv_from[out->nrecv++] = ch[i];
  out->has_local = has_local[r] != 0;
  out->active_below = ab[r];
  out->has_kernel = out->nrecv + out->has_local >= 2;
  out->has_send = out->active_below && shoal__relay_parent(s, m, r) >= 0;
  free(ab);
  return 0;
}

/* ---- cost and shape ---- */

static size_t chunk_for(const shoal__coll_ctx_t *x, size_t bytes, const shoal__relay_shape_t *s) {
  double Sm = (double)bytes / s->ntrees, D = shoal__relay_depth(s);
  double a = x->flat.alpha_s, b = x->flat.beta_s;
  double c = D > 0 && b > 0 ? sqrt(Sm * a / (D * b)) : Sm; /* (A3) c* = sqrt(S_m alpha / ((D-1) w beta)) */
  if (c < 16384) c = 16384;
  if (c > 1048576) c = 1048576;
  if (c * MAX_CHUNKS < Sm) c = Sm / MAX_CHUNKS + 1;
  return (size_t)c;
}

double shoal__relay_cost(const shoal__coll_ctx_t *x, size_t bytes, const shoal__relay_shape_t *s, size_t *chunk) {
  int p = s->p, P = s->ntrees;
  size_t c = chunk_for(x, bytes, s);
  if (chunk) *chunk = c;
  if (p <= 1) return 0.0;
  double Sm = (double)bytes / P, worst_send = 0, worst_recv = 0;
  for (int r = 0; r < p; r++) {
    double snd = 0, rcv = 0;
    for (int m = 0; m < P; m++) { /* the reduction phase; the broadcast's loads mirror it */
      int ch[SHOAL__RELAY_MAX_FANOUT];
      rcv += Sm * shoal__relay_children(s, m, r, ch);
      snd += shoal__relay_parent(s, m, r) >= 0 ? Sm : 0;
    }
    if (snd > worst_send) worst_send = snd;
    if (rcv > worst_recv) worst_recv = rcv;
  }
  double a = x->flat.alpha_s, b = x->flat.beta_s, g = x->flat.gamma_s, D = shoal__relay_depth(s);
  double cb = (double)c < Sm ? (double)c : Sm;
  /* per phase: the busiest rank's bytes through its link plus the pipeline's fill (one chunk per level);
   * the reductions of the reduce phase overlap the transfers only partly: counted in full */
  double load = worst_send > worst_recv ? worst_send : worst_recv;
  return 2.0 * (load * b + D * (a + cb * b)) + worst_recv * g + x->o;
}

int shoal__relay_pick(const shoal__coll_ctx_t *x, size_t bytes, int ntrees, int fanout, shoal__relay_shape_t *out,
                      size_t *chunk) {
  int p = x->p > 0 ? x->p : 1;
  if (ntrees < 0 || ntrees > p)
    return shoal__seterr(SHOAL_ERR_INVALID, "relay trees: %d trees on %d ranks (expected 0 for automatic, or 1..%d)",
                         ntrees, p, p);
  if (fanout < 0 || fanout > SHOAL__RELAY_MAX_FANOUT)
    return shoal__seterr(SHOAL_ERR_INVALID, "relay trees: fanout %d (expected 0 for automatic, or 1..%d)", fanout,
                         SHOAL__RELAY_MAX_FANOUT);
  shoal__relay_shape_t cand[3] = {{p, p, 1}, {p, 1, 2}, {p, p >= 2 ? 2 : 1, 2}};
  int ncand = 3;
  if (ntrees || fanout) { /* as asked; the other one follows the same rule as the candidates */
    cand[0] = (shoal__relay_shape_t){p, ntrees ? ntrees : (fanout == 1 ? p : 1), fanout ? fanout : (ntrees == p ? 1 : 2)};
    ncand = 1;
  }
  double best = INFINITY;
  for (int i = 0; i < ncand; i++) {
    size_t c;
    double t = shoal__relay_cost(x, bytes, &cand[i], &c);
    if (i == 0 || t < best) {
      best = t;
      *out = cand[i];
      *chunk = c;
    }
  }
  return 0;
}

/* ---- the data plane ---- */

typedef struct key {
  int m;
  size_t off, len; /* elements */
} relay_key_t;

typedef struct role {
  int parent;                           /* reduction tree */
  int bparent, nbch, bch[SHOAL__RELAY_MAX_FANOUT]; /* broadcast tree */
  int nch, ch[SHOAL__RELAY_MAX_FANOUT];
  shoal__relay_flags_t f;
  int tree_active; /* the root's active_below: some rank contributes to this tree */
} role_t;

typedef struct sendring {
  shoal__req_t req[SEND_RING];
  char posted[SEND_RING];
  unsigned n;
} sendring_t;

static int ring_send(shoal_comm_t *c, const shoal__op_t *op, sendring_t *sr, int dst, const void *buf, size_t bytes) {
  unsigned s = sr->n++ % SEND_RING;
  int rc = shoal__wait_posted(c, op, &sr->req[s], &sr->posted[s]);
  if (!rc) rc = shoal__post_send(c, op, dst, buf, bytes, &sr->req[s], &sr->posted[s]);
  return rc;
}

static int ring_drain(shoal_comm_t *c, const shoal__op_t *op, sendring_t *sr) {
  for (unsigned s = 0; s < SEND_RING; s++) {
    int rc = shoal__wait_posted(c, op, &sr->req[s], &sr->posted[s]);
    if (rc) return rc;
  }
  return 0;
}

/* One run: the job, its roles in every tree, the chunks (keys) in the order both phases walk them, the
 * staging of the children's chunks and the requests in flight. */
typedef struct run {
  shoal_comm_t *c;
  const shoal__op_t *op;
  const shoal__relay_job_t *job;
  int P, k;        /* trees, fanout */
  size_t ce, es;   /* elements per chunk, bytes per element */
  relay_key_t *keys;
  size_t nkeys;
  role_t *role;    /* [P] this rank's role in each tree */
  char *stage;     /* [WINDOW][k] chunks received from children */
  sendring_t sr;
  shoal__req_t rq[WINDOW][SHOAL__RELAY_MAX_FANOUT];
  char rposted[WINDOW][SHOAL__RELAY_MAX_FANOUT];
} run_t;

/* This rank's role in each tree, the chunks of every tree's slice interleaved (chunk j of every tree, then
 * j + 1), all in one scratch allocation. */
static int run_plan(run_t *x) {
  const shoal__relay_job_t *job = x->job;
  const shoal__relay_shape_t *s = &job->shape;
  int p = shoal__comm_size(x->c), r = shoal__comm_rank(x->c), P = x->P;
  size_t ce = x->ce, nkeys = 0, maxch = 0;
  for (int m = 0; m < P; m++) {
    size_t off, len;
    shoal__block(job->count, (size_t)P, (size_t)m, &off, &len);
    size_t n = (len + ce - 1) / ce;
    nkeys += n;
    if (n > maxch) maxch = n;
  }
  size_t key_bytes = nkeys * sizeof(relay_key_t), role_bytes = (size_t)P * sizeof(role_t);
  size_t head = (key_bytes + role_bytes + (size_t)p + 63) & ~(size_t)63;
  size_t stage_bytes = (size_t)WINDOW * (size_t)x->k * ce * x->es;
  char *mem = shoal__coll_scratch(0, head + stage_bytes);
  if (!mem)
    return shoal__comm_fail(x->c, SHOAL_ERR_NOMEM, x->op, -1, "relay trees: no memory for %zu keys and %zu B of "
                            "staging", nkeys, stage_bytes);
  x->keys = (relay_key_t *)mem; /* the scratch is 64-byte aligned */
  x->nkeys = nkeys;
  x->role = (role_t *)(mem + key_bytes);
  unsigned char *ab = (unsigned char *)(mem + key_bytes + role_bytes);
  x->stage = mem + head;
  for (int m = 0; m < P; m++) {
    role_t *R = &x->role[m];
    R->parent = shoal__relay_parent(s, m, r);
    R->nch = shoal__relay_children(s, m, r, R->ch);
    R->bparent = shoal__relay_bcast_parent(s, m, r);
    R->nbch = shoal__relay_bcast_children(s, m, r, R->bch);
    shoal__relay_active_below(s, m, job->has_local, ab);
    R->tree_active = ab[shoal__relay_rank(s, m, 0)];
    memset(&R->f, 0, sizeof R->f);
    R->f.has_local = job->has_local[r] != 0;
    for (int i = 0; i < R->nch; i++)
      if (ab[R->ch[i]]) R->f.recv_from[R->f.nrecv++] = R->ch[i];
    R->f.active_below = ab[r];
    R->f.has_kernel = R->f.nrecv + R->f.has_local >= 2;
    R->f.has_send = R->f.active_below && R->parent >= 0;
  }
  size_t q = 0;
  for (size_t j = 0; j < maxch; j++)
    for (int m = 0; m < P; m++) {
      size_t off, len;
      shoal__block(job->count, (size_t)P, (size_t)m, &off, &len);
      if (j * ce >= len) continue;
      x->keys[q].m = m;
      x->keys[q].off = off + j * ce;
      x->keys[q].len = len - j * ce < ce ? len - j * ce : ce;
      q++;
    }
  return 0;
}

static char *stage_of(const run_t *x, size_t slot, int i) {
  return x->stage + ((slot * (size_t)x->k + (size_t)i) * x->ce) * x->es;
}

/* Chunk q going up its tree: the children's chunks and this rank's own reduced (or the one input
 * forwarded as is) and sent to the parent; at the root, the result (an average divided). */
static int up_chunk(run_t *x, size_t q) {
  const relay_key_t *K = &x->keys[q];
  const role_t *R = &x->role[K->m];
  if (!R->f.active_below) return 0; /* nothing contributed here or below: pruned */
  size_t slot = q % WINDOW, es = x->es, nb = K->len * es;
  int rc = 0;
  for (int i = 0; i < R->f.nrecv && !rc; i++)
    rc = shoal__wait_posted(x->c, x->op, &x->rq[slot][i], &x->rposted[slot][i]);
  if (rc) return rc;
  char *out = (char *)x->job->dst + K->off * es;
  const char *in[SHOAL__RELAY_MAX_FANOUT + 1] = {NULL};
  int nin = 0;
  if (R->f.has_local) in[nin++] = (const char *)x->job->contrib + K->off * es;
  for (int i = 0; i < R->f.nrecv; i++) in[nin++] = stage_of(x, slot, i);
  const char *sendp = out;
  if (nin == 0) return 0; /* cannot happen: active below means an input */
  shoal_dtype_t dt = x->job->dtype;
  shoal_redop_t red = x->job->redop;
  if (nin == 1) {
    /* no kernel: forward the one input as is (own data straight from its buffer) */
    if (R->parent >= 0 && R->f.has_local) sendp = in[0];
    else if (in[0] != out) memcpy(out, in[0], nb);
  } else {
    shoal__reduce3(out, in[0], in[1], K->len, dt, red);
    for (int i = 2; i < nin; i++) shoal__reduce3(out, out, in[i], K->len, dt, red);
  }
  if (R->parent >= 0) return ring_send(x->c, x->op, &x->sr, R->parent, sendp, nb);
  if (red == SHOAL_AVG && x->job->divisor > 0) shoal__reduce_avg_finish_w(out, K->len, dt, x->job->divisor);
  return 0;
}

/* Phase 1: reduce up every tree, the children's chunks received WINDOW chunks ahead. */
static int reduce_up(run_t *x) {
  int rc = 0;
  size_t next_post = 0;
  for (size_t q = 0; q < x->nkeys && !rc; q++) {
    for (; next_post < x->nkeys && next_post < q + WINDOW && !rc; next_post++) {
      const relay_key_t *K = &x->keys[next_post];
      const role_t *R = &x->role[K->m];
      size_t slot = next_post % WINDOW;
      for (int i = 0; i < R->f.nrecv && !rc; i++)
        rc = shoal__post_recv(x->c, x->op, R->f.recv_from[i], stage_of(x, slot, i), K->len * x->es,
                              &x->rq[slot][i], &x->rposted[slot][i]);
    }
    if (!rc) rc = up_chunk(x, q);
  }
  if (!rc) rc = ring_drain(x->c, x->op, &x->sr);
  return rc;
}

/* Phase 2: broadcast down every tree that has a contributor (a slice nobody contributed to is zeros
 * everywhere, without a message). */
static int bcast_down(run_t *x) {
  const shoal__relay_job_t *job = x->job;
  char *dst = job->dst;
  size_t es = x->es;
  for (int m = 0; m < x->P; m++)
    if (!x->role[m].tree_active) {
      size_t off, len;
      shoal__block(job->count, (size_t)x->P, (size_t)m, &off, &len);
      memset(dst + off * es, 0, len * es);
    }
  int rc = 0;
  size_t next_post = 0;
  for (size_t q = 0; q < x->nkeys && !rc; q++) {
    for (; next_post < x->nkeys && next_post < q + WINDOW && !rc; next_post++) {
      const relay_key_t *K = &x->keys[next_post];
      const role_t *R = &x->role[K->m];
      if (R->tree_active && R->bparent >= 0)
        rc = shoal__post_recv(x->c, x->op, R->bparent, dst + K->off * es, K->len * es, &x->rq[next_post % WINDOW][0],
                              &x->rposted[next_post % WINDOW][0]);
    }
    if (rc) break;
    const relay_key_t *K = &x->keys[q];
    const role_t *R = &x->role[K->m];
    if (!R->tree_active) continue;
    size_t slot = q % WINDOW;
    if (R->bparent >= 0 && (rc = shoal__wait_posted(x->c, x->op, &x->rq[slot][0], &x->rposted[slot][0]))) break;
    for (int i = 0; i < R->nbch && !rc; i++)
      rc = ring_send(x->c, x->op, &x->sr, R->bch[i], dst + K->off * es, K->len * es);
  }
  if (!rc) rc = ring_drain(x->c, x->op, &x->sr);
  return rc;
}

int shoal__relay_run(shoal_comm_t *c, const shoal__op_t *op, const shoal__relay_job_t *job) {
  const shoal__relay_shape_t *s = &job->shape;
  int p = shoal__comm_size(c), P = s->ntrees, k = s->fanout;
  if (s->p != p || P < 1 || P > p || k < 1 || k > SHOAL__RELAY_MAX_FANOUT)
    return shoal__comm_fail(c, SHOAL_ERR_INTERNAL, op, -1, "relay trees: bad shape %d trees x fanout %d on %d ranks",
                            P, k, p);
  run_t x;
  memset(&x, 0, sizeof x);
  x.c = c, x.op = op, x.job = job, x.P = P, x.k = k;
  x.es = shoal_dtype_size(job->dtype);
  x.ce = job->chunk_bytes / x.es;
  if (x.ce == 0) x.ce = 1;
  int rc = run_plan(&x);
  if (!rc) rc = reduce_up(&x);
  if (!rc) rc = bcast_down(&x);
  return rc;
}
