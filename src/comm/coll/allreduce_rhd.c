/* Recursive halving-doubling (Rabenseifner): reduce-scatter by recursive
 * halving, then allgather by recursive doubling, over the largest power of
 * two p' <= p (MPICH's fold for the rest, fold.c). Each halving exchange is
 * pipelined in chunks of the ring's chunk size. Every block is reduced on
 * exactly one rank and then copied around: identical bits everywhere.
 * Cost: 2 lg p' a + 2(p'-1)/p' S b + (p'-1)/p' S g [+ fold 2a + 2S b + S g]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "core/error.h"

/* One halving step, pipelined: send scount elements of sbuf to peer and
 * receive rcount elements from it in chunks of ce elements, reducing chunk k
 * (into dst, with mine) while chunk k+1 is arriving. Both sides cut the same
 * range (my send range is the peer's keep range) the same way. The staging
 * window stays small and hot in cache instead of an S/2 buffer. */
#define XCHG_WINDOW 4
static int xchg_reduce(shoal_comm_t *c, const shoal__op_t *op, int peer, const char *sbuf, size_t scount, char *dst,
                       const char *mine, size_t rcount, size_t ce) {
  size_t es = shoal_dtype_size(op->dtype);
  size_t ns = (scount + ce - 1) / ce, nr = (rcount + ce - 1) / ce;
  int lower = peer < shoal__comm_rank(c), rc = 0;
  char *tmp = nr ? shoal__coll_scratch(0, XCHG_WINDOW * ce * es) : NULL;
  shoal__req_t *sreq = ns ? calloc(ns, sizeof *sreq) : NULL, rreq[XCHG_WINDOW];
  char *spost = ns ? calloc(ns, 1) : NULL, rpost[XCHG_WINDOW] = {0};
  if ((nr && !tmp) || (ns && (!sreq || !spost))) {
    rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, peer, "allreduce rhd: no memory for the exchange buffers");
    goto out_free;
  }
  for (size_t k = 0; k < nr && k < XCHG_WINDOW; k++) {
    size_t len = k + 1 < nr ? ce : rcount - k * ce;
    if ((rc = shoal__post_recv(c, op, peer, tmp + k * ce * es, len * es, &rreq[k], &rpost[k]))) goto out_free;
  }
  for (size_t k = 0; k < ns; k++) {
    size_t len = k + 1 < ns ? ce : scount - k * ce;
    if ((rc = shoal__post_send(c, op, peer, sbuf + k * ce * es, len * es, &sreq[k], &spost[k]))) goto out_free;
  }
  for (size_t k = 0; k < nr; k++) {
    size_t slot = k % XCHG_WINDOW, len = k + 1 < nr ? ce : rcount - k * ce;
    if ((rc = shoal__wait_posted(c, op, &rreq[slot], &rpost[slot]))) goto out_free;
    char *d = dst + k * ce * es, *t = tmp + slot * ce * es;
    const char *m = mine + k * ce * es;
    if (lower) shoal__reduce3(d, t, m, len, op->dtype, op->redop);
    else shoal__reduce3(d, m, t, len, op->dtype, op->redop);
    size_t k2 = k + XCHG_WINDOW;
    if (k2 < nr) {
      size_t l2 = k2 + 1 < nr ? ce : rcount - k2 * ce;
      if ((rc = shoal__post_recv(c, op, peer, t, l2 * es, &rreq[slot], &rpost[slot]))) goto out_free;
    }
  }
  for (size_t k = 0; k < ns; k++)
    if ((rc = shoal__wait_posted(c, op, &sreq[k], &spost[k]))) goto out_free;
out_free:
  free(sreq);
  free(spost);
  return rc;
}

static int rhd_run(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count,
                   const shoal__plan_t *plan) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), pof2 = shoal__pof2_floor(p), rem = p - pof2;
  size_t es = shoal_dtype_size(op->dtype), bytes = count * es;
  const char *src = src_;
  char *dst = dst_;
  int newrank, rc;
  size_t ce = plan->chunk_bytes / es ? plan->chunk_bytes / es : 1;
  if (r < 2 * rem) { /* the fold moves whole vectors */
    char *tmp = shoal__coll_scratch(0, bytes);
    if (!tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce rhd: no memory for %zu B", bytes);
    if ((rc = shoal__fold_in(c, op, &src, dst, tmp, count, &newrank))) return rc;
  } else {
    newrank = r - rem;
  }
  if (newrank >= 0) {
    /* reduce-scatter by recursive halving over pof2 blocks: after the step
     * with distance `mask`, this rank keeps the half of its range on its side
     * of bit `mask`, so in the end it owns block `newrank` */
    size_t lo = 0, hi = (size_t)pof2, off, len, o2, l2;
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
      int peer = shoal__unfold_rank(newrank ^ mask, rem);
      size_t mid = lo + (size_t)mask, klo, khi, slo, shi;
      if ((newrank & mask) == 0) klo = lo, khi = mid, slo = mid, shi = hi;
      else klo = mid, khi = hi, slo = lo, shi = mid;
      shoal__block(count, (size_t)pof2, klo, &off, &len);
      shoal__block(count, (size_t)pof2, khi - 1, &o2, &l2);
      size_t keep_off = off, keep_len = o2 + l2 - off;
      shoal__block(count, (size_t)pof2, slo, &off, &len);
      shoal__block(count, (size_t)pof2, shi - 1, &o2, &l2);
      size_t send_off = off, send_len = o2 + l2 - off;
      if ((rc = xchg_reduce(c, op, peer, src + send_off * es, send_len, dst + keep_off * es, src + keep_off * es,
                            keep_len, ce)))
        return rc;
      src = dst;
      lo = klo, hi = khi;
    }
    if (pof2 == 1 && src != dst) memcpy(dst, src, bytes);
    if (op->redop == SHOAL_AVG) {
      shoal__block(count, (size_t)pof2, (size_t)newrank, &off, &len);
      shoal__reduce_avg_finish(dst + off * es, len, op->dtype, p);
    }
    /* allgather by recursive doubling: exchange ever larger aligned groups */
    for (int mask = 1; mask < pof2; mask <<= 1) {
      int pn = newrank ^ mask, peer = shoal__unfold_rank(pn, rem);
      size_t mine_lo = (size_t)(newrank & ~(mask - 1)), peer_lo = (size_t)(pn & ~(mask - 1));
      size_t mo, ml, po, pl;
      shoal__block(count, (size_t)pof2, mine_lo, &mo, &len);
      shoal__block(count, (size_t)pof2, mine_lo + (size_t)mask - 1, &o2, &l2);
      ml = o2 + l2 - mo;
      shoal__block(count, (size_t)pof2, peer_lo, &po, &len);
      shoal__block(count, (size_t)pof2, peer_lo + (size_t)mask - 1, &o2, &l2);
      pl = o2 + l2 - po;
      if ((rc = shoal__coll_sendrecv(c, op, ml ? peer : -1, dst + mo * es, ml * es, pl ? peer : -1, dst + po * es,
                                pl * es)))
        return rc;
    }
  }
  return shoal__fold_out(c, op, dst, count);
}

static double rhd_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  return x->p <= 1 ? 0.0 : shoal__cost_rhd(x, (double)bytes);
}

/* The halving exchanges are pipelined in the ring's chunks. */
static int rhd_plan(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *out) {
  return shoal__ring_chunk_default(x->p, bytes, &out->chunk_bytes);
}

const shoal__coll_algo_t shoal__algo_rhd = {
    .name = "rhd",
    .alias = {"rabenseifner", "halving-doubling"},
    .what = "recursive halving-doubling (Rabenseifner), any rank count",
    .flags = SHOAL__ALGO_TAGGED | SHOAL__ALGO_FLAT,
    .tie = 3,
    .cost = rhd_cost,
    .plan = rhd_plan,
    .run = rhd_run,
};
