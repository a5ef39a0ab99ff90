/* The pipelined ring shared by allreduce (reduce-scatter + allgather),
 * reduce-scatter and allgather. See coll.h for the schedule; docs/collectives.md
 * for the cost. Every message is one chunk: (step, chunk) units travel on the
 * link to the right in lexicographic order, which is the order both ends post
 * them, so per-peer FIFO delivery matches sends to receives. */
#include <math.h>
#include <stdlib.h>

#include "comm/coll/coll.h"
#include "core/config.h"

#define RING_MAX_CHUNKS 1024
#define RING_WINDOW 4 /* receives posted ahead of the one being reduced */

typedef struct ring_run {
  shoal_comm_t *c;
  const shoal__op_t *op;
  const shoal__ring_t *g;
  int p, r, left, right, steps, window;
  size_t es, nch, maxchunk;
  char *tmp;
  shoal__req_t *sreq, *rreq;
  char *spost, *rpost;
} ring_run_t;

static int recv_block(const ring_run_t *rr, int s) { return shoal__mod(rr->r - s - 1 + rr->g->shift, rr->p); }
static int send_block(const ring_run_t *rr, int s) { return shoal__mod(rr->r - s + rr->g->shift, rr->p); }

/* Element range of chunk k of block b, and the block's own offset. */
static void chunk_range(const ring_run_t *rr, int b, size_t k, size_t *off, size_t *len, size_t *blk_off) {
  size_t bo, bl, co;
  shoal__block(rr->g->count, (size_t)rr->p, (size_t)b, &bo, &bl);
  shoal__block(bl, rr->nch, k, &co, len);
  *off = bo + co;
  if (blk_off) *blk_off = bo;
}

static int post_unit_recv(ring_run_t *rr, size_t v) {
  int s = (int)(v / rr->nch);
  size_t k = v % rr->nch, off, len, slot = v % (size_t)rr->window;
  chunk_range(rr, recv_block(rr, s), k, &off, &len, NULL);
  char *buf;
  if (s < rr->g->rs_steps) {
    buf = rr->tmp + slot * rr->maxchunk * rr->es;
  } else {
    /* Allgather receives land in the result; the send that last read this
     * memory (step s+1-p, same block) must be finished first. */
    int sp = s + 1 - rr->p;
    if (sp >= 0) {
      size_t u = (size_t)sp * rr->nch + k;
      int rc = shoal__wait_posted(rr->c, rr->op, &rr->sreq[u], &rr->spost[u]);
      if (rc) return rc;
    }
    buf = rr->g->work + off * rr->es;
  }
  return shoal__post_recv(rr->c, rr->op, rr->left, buf, len * rr->es, &rr->rreq[slot], &rr->rpost[slot]);
}

static int ring_body(ring_run_t *rr) {
  const shoal__ring_t *g = rr->g;
  size_t nunits = (size_t)rr->steps * rr->nch, off, len, bo;
  int rc;
  /* step 0: the whole first block, chunk by chunk */
  const char *s0 = g->rs_steps ? g->src : g->work;
  for (size_t k = 0; k < rr->nch; k++) {
    chunk_range(rr, send_block(rr, 0), k, &off, &len, NULL);
    if ((rc = shoal__post_send(rr->c, rr->op, rr->right, s0 + off * rr->es, len * rr->es, &rr->sreq[k],
                               &rr->spost[k])))
      return rc;
  }
  for (size_t v = 0; v < (size_t)rr->window && v < nunits; v++)
    if ((rc = post_unit_recv(rr, v))) return rc;
  for (size_t u = 0; u < nunits; u++) {
    int s = (int)(u / rr->nch);
    size_t k = u % rr->nch, slot = u % (size_t)rr->window;
    if ((rc = shoal__wait_posted(rr->c, rr->op, &rr->rreq[slot], &rr->rpost[slot]))) return rc;
    int b = recv_block(rr, s);
    chunk_range(rr, b, k, &off, &len, &bo);
    if (s < g->rs_steps && len) {
      int last = s == g->rs_steps - 1;
      char *dst = last && g->own_dst ? g->own_dst + (off - bo) * rr->es : g->work + off * rr->es;
      shoal__reduce3(dst, rr->tmp + slot * rr->maxchunk * rr->es, g->src + off * rr->es, len, g->dtype, g->redop);
      if (last && g->avg) shoal__reduce_avg_finish(dst, len, g->dtype, rr->p);
    }
    /* forward at once: the block received at step s is the one sent at s+1 */
    if (s + 1 < rr->steps) {
      size_t u2 = u + rr->nch;
      if ((rc = shoal__post_send(rr->c, rr->op, rr->right, g->work + off * rr->es, len * rr->es, &rr->sreq[u2],
                                 &rr->spost[u2])))
        return rc;
    }
    if (u + (size_t)rr->window < nunits && (rc = post_unit_recv(rr, u + (size_t)rr->window))) return rc;
  }
  for (size_t u = 0; u < nunits; u++)
    if ((rc = shoal__wait_posted(rr->c, rr->op, &rr->sreq[u], &rr->spost[u]))) return rc;
  return 0;
}

int shoal__ring_run(shoal_comm_t *c, const shoal__op_t *op, const shoal__ring_t *g) {
  ring_run_t rr = {.c = c, .op = op, .g = g};
  rr.p = shoal__comm_size(c);
  rr.r = shoal__comm_rank(c);
  rr.steps = g->rs_steps + g->ag_steps;
  if (rr.p == 1 || rr.steps == 0 || g->count == 0) return 0;
  rr.left = shoal__mod(rr.r - 1, rr.p);
  rr.right = (rr.r + 1) % rr.p;
  rr.es = shoal_dtype_size(g->dtype);
  size_t maxblk = (g->count + (size_t)rr.p - 1) / (size_t)rr.p;
  size_t chunk_elems = g->chunk_bytes / rr.es ? g->chunk_bytes / rr.es : 1;
  rr.nch = (maxblk + chunk_elems - 1) / chunk_elems;
  if (rr.nch < 1) rr.nch = 1;
  if (rr.nch > RING_MAX_CHUNKS) rr.nch = RING_MAX_CHUNKS;
  rr.maxchunk = (maxblk + rr.nch - 1) / rr.nch;
  /* window <= chunks per step: an allgather receive then never waits for a
   * send that is not posted yet (see post_unit_recv) */
  rr.window = rr.nch < RING_WINDOW ? (int)rr.nch : RING_WINDOW;
  size_t nunits = (size_t)rr.steps * rr.nch;
  if (g->rs_steps) {
    rr.tmp = shoal__coll_scratch(0, (size_t)rr.window * rr.maxchunk * rr.es);
    if (!rr.tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "ring: no memory for %d chunk buffers", rr.window);
  }
  rr.sreq = calloc(nunits, sizeof *rr.sreq);
  rr.rreq = calloc((size_t)rr.window, sizeof *rr.rreq);
  rr.spost = calloc(nunits, 1);
  rr.rpost = calloc((size_t)rr.window, 1);
  int rc;
  if (!rr.sreq || !rr.rreq || !rr.spost || !rr.rpost)
    rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "ring: no memory for %zu requests", nunits);
  else
    rc = ring_body(&rr);
  free(rr.sreq);
  free(rr.rreq);
  free(rr.spost);
  free(rr.rpost);
  return rc;
}

#define CHUNK_MIN (256u << 10) /* fewer, larger messages: each wait may cost a wakeup */
#define CHUNK_MAX (4u << 20)

int shoal__ring_chunk_bytes(int p, size_t bytes, const shoal__cost_t *m, size_t *out) {
  long forced;
  int rc = shoal__config_long("SHOAL_CHUNK_BYTES", 0, 0, 1L << 30, &forced);
  if (rc) return rc;
  if (forced > 0) {
    *out = (size_t)forced;
    return 0;
  }
  /* pipeline of D = 2(p-1) stages moving one block of S/p bytes:
   * best chunk ~ sqrt(block * alpha / ((D - 1) * beta)) */
  double block = (double)bytes / (p > 0 ? p : 1), D = 2.0 * (p > 1 ? p - 1 : 1);
  double cb = D > 1 ? sqrt(block * m->alpha_s / ((D - 1) * m->beta_s)) : (double)CHUNK_MAX;
  if (cb < CHUNK_MIN) cb = CHUNK_MIN;
  if (cb > CHUNK_MAX) cb = CHUNK_MAX;
  *out = (size_t)cb;
  return 0;
}

int shoal__ring_chunk_default(int p, size_t bytes, size_t *out) {
  shoal__cost_t m;
  int rc = shoal__cost_params(&m);
  return rc ? rc : shoal__ring_chunk_bytes(p, bytes, &m, out);
}
