/* Allreduce: the public entry points and the three algorithms.
 *   ring: pipelined reduce-scatter + allgather (coll_ring.c), bandwidth-optimal.
 *   rhd:  Rabenseifner: recursive-halving reduce-scatter + recursive-doubling
 *         allgather over the largest power of two p' <= p.
 *   rd:   recursive doubling: lg p' full-vector exchanges, for small messages.
 * rhd and rd fold non-powers of two as MPICH does: of the first 2(p - p')
 * ranks, each even rank hands its vector to the odd rank above it and sits
 * out, then gets the result back at the end.
 * Identical bits on every rank: ring and rhd reduce each block on exactly one
 * rank and then copy it around; rd makes both partners of an exchange compute
 * (lower rank's data) OP (higher rank's data), the same expression. */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "comm/tune/tune.h"
#include "core/error.h"
#include "core/log.h"

/* Largest power of two <= p. */
static int pof2_floor(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}
/* Real rank of a rank numbered in the folded power-of-two group. */
static int unfold_rank(int newrank, int rem) { return newrank < rem ? newrank * 2 + 1 : newrank + rem; }

/* Fold step shared by rhd and rd: returns the rank's number in the
 * power-of-two group, or -1 if it sits out. *srcp becomes dst once dst holds
 * this rank's (folded) contribution. */
static int fold_in(shoal_comm_t *c, const shoal__op_t *op, const char **srcp, char *dst, char *tmp, size_t count,
                   int *newrank) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rem = p - pof2_floor(p);
  size_t bytes = count * shoal_dtype_size(op->dtype);
  int rc;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      *newrank = -1;
      return shoal__coll_sendrecv(c, op, r + 1, *srcp, bytes, -1, NULL, 0);
    }
    if ((rc = shoal__coll_sendrecv(c, op, -1, NULL, 0, r - 1, tmp, bytes))) return rc;
    shoal__reduce3(dst, tmp, *srcp, count, op->dtype, op->redop); /* r-1 is the lower rank */
    *srcp = dst;
    *newrank = r / 2;
    return 0;
  }
  *newrank = r - rem;
  return 0;
}

static int fold_out(shoal_comm_t *c, const shoal__op_t *op, char *dst, size_t count) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rem = p - pof2_floor(p);
  size_t bytes = count * shoal_dtype_size(op->dtype);
  if (r >= 2 * rem) return 0;
  if (r % 2) return shoal__coll_sendrecv(c, op, r - 1, dst, bytes, -1, NULL, 0);
  return shoal__coll_sendrecv(c, op, -1, NULL, 0, r + 1, dst, bytes);
}

int shoal__allreduce_rd(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), pof2 = pof2_floor(p), rem = p - pof2;
  size_t es = shoal_dtype_size(op->dtype), bytes = count * es;
  const char *src = src_;
  char *dst = dst_;
  char *tmp = shoal__coll_scratch(0, bytes);
  if (!tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce rd: no memory for %zu B", bytes);
  int newrank, rc;
  if ((rc = fold_in(c, op, &src, dst, tmp, count, &newrank))) return rc;
  if (newrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      int peer = unfold_rank(newrank ^ mask, rem);
      if ((rc = shoal__coll_sendrecv(c, op, peer, src, bytes, peer, tmp, bytes))) return rc;
      if (peer < r) shoal__reduce3(dst, tmp, src, count, op->dtype, op->redop);
      else shoal__reduce3(dst, src, tmp, count, op->dtype, op->redop);
      src = dst;
    }
    if (src != dst) memcpy(dst, src, bytes); /* pof2 == 1 only when p == 1 */
    if (op->redop == SHOAL_AVG) shoal__reduce_avg_finish(dst, count, op->dtype, p);
  }
  return fold_out(c, op, dst, count);
}

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

int shoal__allreduce_rhd(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), pof2 = pof2_floor(p), rem = p - pof2;
  size_t es = shoal_dtype_size(op->dtype), bytes = count * es;
  const char *src = src_;
  char *dst = dst_;
  shoal__cost_t m;
  size_t chunk;
  int newrank, rc;
  if ((rc = shoal__cost_params(&m)) || (rc = shoal__ring_chunk_bytes(p, bytes, &m, &chunk))) return rc;
  size_t ce = chunk / es ? chunk / es : 1;
  if (r < 2 * rem) { /* the fold moves whole vectors */
    char *tmp = shoal__coll_scratch(0, bytes);
    if (!tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce rhd: no memory for %zu B", bytes);
    if ((rc = fold_in(c, op, &src, dst, tmp, count, &newrank))) return rc;
  } else {
    newrank = r - rem;
  }
  if (newrank >= 0) {
    /* reduce-scatter by recursive halving over pof2 blocks: after the step
     * with distance `mask`, this rank keeps the half of its range on its side
     * of bit `mask`, so in the end it owns block `newrank` */
    size_t lo = 0, hi = (size_t)pof2, off, len, o2, l2;
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
      int peer = unfold_rank(newrank ^ mask, rem);
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
      int pn = newrank ^ mask, peer = unfold_rank(pn, rem);
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
  return fold_out(c, op, dst, count);
}

int shoal__allreduce_ring(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                          size_t chunk_bytes) {
  int p = shoal__comm_size(c);
  shoal__ring_t g = {.dtype = op->dtype, .redop = op->redop, .count = count, .rs_steps = p - 1,
                     .ag_steps = p - 1, .shift = 0, .src = src, .work = dst, .own_dst = NULL,
                     .avg = op->redop == SHOAL_AVG, .chunk_bytes = chunk_bytes};
  return shoal__ring_run(c, op, &g);
}

int shoal_allreduce_algo(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                         shoal_redop_t redop, shoal_algo_t algo) {
  size_t bytes;
  int rc = shoal__coll_check(c, "allreduce", dtype, count, 1, recvbuf, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  if ((rc = shoal__reduce_check(dtype, redop))) return shoal__comm_reject(c, rc);
  if ((unsigned)algo >= SHOAL_ALGO__COUNT)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "allreduce: invalid algorithm %d", (int)algo));
  int inplace = sendbuf == SHOAL_IN_PLACE || sendbuf == recvbuf;
  if (!inplace && !sendbuf && count)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "allreduce: sendbuf is NULL (use SHOAL_IN_PLACE)"));
  const void *src = inplace ? recvbuf : sendbuf;
  shoal_algo_t fitted = SHOAL_ALGO_AUTO;
  if (algo == SHOAL_ALGO_AUTO || algo == SHOAL_ALGO_SHM || algo == SHOAL_ALGO_HIER) { /* shm, hier, fitted model */
    int handled;
    rc = shoal__tune_allreduce(c, src, recvbuf, count, dtype, redop, algo, inplace, &handled, &fitted);
    if (handled) return rc;
    if (rc) return shoal__comm_reject(c, rc);
  }
  int p = shoal__comm_size(c);
  shoal_algo_t chosen;
  char why[192];
  if (fitted != SHOAL_ALGO_AUTO) {
    chosen = fitted;
    snprintf(why, sizeof why, "fitted model");
  } else if ((rc = shoal__allreduce_resolve(p, bytes, algo, c->w->algo_env, &chosen, why, sizeof why))) {
    return shoal__comm_reject(c, rc);
  }
  size_t chunk = 0;
  if (chosen == SHOAL_ALGO_RING) {
    shoal__cost_t m;
    if ((rc = shoal__cost_params(&m)) || (rc = shoal__ring_chunk_bytes(p, bytes, &m, &chunk)))
      return shoal__comm_reject(c, rc);
  }
  shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .dtype = (uint8_t)dtype, .redop = (uint8_t)redop,
                    .algo = (uint8_t)chosen, .root = -1, .count = count,
                    /* the algorithm rides in the header's tag, so ranks that chose differently
                     * (say, different SHOAL_ALGO) fail with a mismatch instead of mixing blocks */
                    .tag = (int32_t)chosen};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_INFO("COLL", "allreduce seq %u: %zu x %s %s (%zu B) on %d ranks%s -> %s (%s)", op.seq, count,
             shoal_dtype_name(dtype), shoal_redop_name(redop), bytes, p, inplace ? " in place" : "",
             shoal_algo_name(chosen), why);
  if (p == 1 || count == 0) {
    if (!inplace && bytes) memcpy(recvbuf, src, bytes);
  } else if (chosen == SHOAL_ALGO_RING) {
    rc = shoal__allreduce_ring(c, &op, src, recvbuf, count, chunk);
  } else if (chosen == SHOAL_ALGO_RHD) {
    rc = shoal__allreduce_rhd(c, &op, src, recvbuf, count);
  } else {
    rc = shoal__allreduce_rd(c, &op, src, recvbuf, count);
  }
  return shoal__op_end(c, &op, rc);
}

int shoal_allreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                    shoal_redop_t op) {
  return shoal_allreduce_algo(c, sendbuf, recvbuf, count, dtype, op, SHOAL_ALGO_AUTO);
}
