/* Reduce to a root: a binomial tree for small messages, a pipelined chain
 * (p-1 -> ... -> 1 -> root, in ranks relative to the root) for large ones,
 * where each rank reduces chunk k while chunk k+1 is arriving. */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "core/error.h"
#include "core/log.h"

#define REDUCE_TREE_MAX_BYTES (32u << 10)
#define CHAIN_CHUNK_BYTES (256u << 10)
#define CHAIN_WINDOW 4

static int reduce_binomial(shoal_comm_t *c, const shoal__op_t *op, const char *src, char *acc, size_t count,
                           int root) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), vr = shoal__mod(r - root, p), rc;
  size_t es = shoal_dtype_size(op->dtype), bytes = count * es;
  char *tmp = shoal__coll_scratch(0, bytes);
  if (!tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "reduce: no memory for %zu B", bytes);
  if (acc != src) memcpy(acc, src, bytes);
  for (int mask = 1; mask < p; mask <<= 1) {
    if ((vr & mask) == 0) {
      int child = vr | mask;
      if (child >= p) continue;
      if ((rc = shoal__coll_sendrecv(c, op, -1, NULL, 0, (child + root) % p, tmp, bytes))) return rc;
      shoal__reduce3(acc, acc, tmp, count, op->dtype, op->redop); /* children are higher in vr */
    } else {
      return shoal__coll_sendrecv(c, op, ((vr & ~mask) + root) % p, acc, bytes, -1, NULL, 0);
    }
  }
  return 0;
}

static int reduce_chain(shoal_comm_t *c, const shoal__op_t *op, const char *src, char *acc, size_t count, int root) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), vr = shoal__mod(r - root, p), rc = 0;
  int prev = vr < p - 1 ? (r + 1) % p : -1, next = vr > 0 ? shoal__mod(r - 1, p) : -1;
  size_t es = shoal_dtype_size(op->dtype);
  size_t nch = (count * es + CHAIN_CHUNK_BYTES - 1) / CHAIN_CHUNK_BYTES, maxchunk = (count + nch - 1) / nch;
  int win = nch < CHAIN_WINDOW ? (int)nch : CHAIN_WINDOW;
  char *tmp = prev >= 0 ? shoal__coll_scratch(0, (size_t)win * maxchunk * es) : NULL;
  shoal__req_t *sreq = calloc(nch, sizeof *sreq), rreq[CHAIN_WINDOW];
  char *spost = calloc(nch, 1), rpost[CHAIN_WINDOW] = {0};
  if ((prev >= 0 && !tmp) || !sreq || !spost) {
    rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "reduce: no memory for the chain buffers");
    goto out_free;
  }
  size_t off, len;
  for (size_t k = 0; prev >= 0 && k < (size_t)win; k++) {
    shoal__block(count, nch, k, &off, &len);
    if ((rc = shoal__post_recv(c, op, prev, tmp + k * maxchunk * es, len * es, &rreq[k], &rpost[k]))) goto out_free;
  }
  for (size_t k = 0; k < nch; k++) {
    shoal__block(count, nch, k, &off, &len);
    const char *out = src + off * es;
    if (prev >= 0) {
      size_t slot = k % (size_t)win;
      if ((rc = shoal__wait_posted(c, op, &rreq[slot], &rpost[slot]))) goto out_free;
      shoal__reduce3(acc + off * es, src + off * es, tmp + slot * maxchunk * es, len, op->dtype, op->redop);
      out = acc + off * es;
      if (k + (size_t)win < nch) {
        size_t o2, l2;
        shoal__block(count, nch, k + (size_t)win, &o2, &l2);
        if ((rc = shoal__post_recv(c, op, prev, tmp + slot * maxchunk * es, l2 * es, &rreq[slot], &rpost[slot])))
          goto out_free;
      }
    }
    if (next >= 0) {
      if ((rc = shoal__post_send(c, op, next, out, len * es, &sreq[k], &spost[k]))) goto out_free;
    } else if (op->redop == SHOAL_AVG) {
      shoal__reduce_avg_finish(acc + off * es, len, op->dtype, p);
    }
  }
  for (size_t k = 0; k < nch; k++)
    if ((rc = shoal__wait_posted(c, op, &sreq[k], &spost[k]))) goto out_free;
out_free:
  free(sreq);
  free(spost);
  return rc;
}

int shoal_reduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                 shoal_redop_t redop, int root) {
  size_t bytes;
  int rc = shoal__coll_check(c, "reduce", dtype, count, 1, (const void *)2, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  if ((rc = shoal__reduce_check(dtype, redop))) return shoal__comm_reject(c, rc);
  int p = shoal__comm_size(c), r = shoal__comm_rank(c);
  if (root < 0 || root >= p)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "reduce: root %d out of range (communicator of "
                                               "%d ranks)", root, p));
  if (recvbuf == SHOAL_IN_PLACE)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "reduce: the receive buffer is SHOAL_IN_PLACE "
                                               "(only the send buffer may be)"));
  int inplace = sendbuf == SHOAL_IN_PLACE || sendbuf == recvbuf;
  const char *src = inplace ? recvbuf : sendbuf;
  if (count && !src)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "reduce: rank %d has no input buffer%s", r,
                                               inplace ? " (SHOAL_IN_PLACE with a NULL recvbuf)" : ""));
  if (count && r == root && !recvbuf)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "reduce: recvbuf is NULL at the root"));
  shoal__op_t op = {.opcode = SHOAL__OP_REDUCE, .dtype = (uint8_t)dtype, .redop = (uint8_t)redop, .root = root,
                    .tag = root, /* in the header: ranks that disagree on the root fail with a mismatch */
                    .count = count};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  int tree = bytes <= REDUCE_TREE_MAX_BYTES || p <= 2;
  SHOAL_DEBUG("COLL", "reduce seq %u: %zu B to %d on %d ranks (%s)", op.seq, bytes, root, p,
              tree ? "binomial" : "chain");
  if (bytes > 0) {
    /* non-roots accumulate in scratch (their recvbuf may be NULL) */
    char *acc = r == root ? recvbuf : shoal__coll_scratch(1, bytes);
    if (!acc) rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, &op, -1, "reduce: no memory for %zu B", bytes);
    else if (p == 1) {
      if (acc != src) memcpy(acc, src, bytes);
    } else if (tree) {
      rc = reduce_binomial(c, &op, src, acc, count, root);
      if (rc == 0 && r == root && redop == SHOAL_AVG) shoal__reduce_avg_finish(acc, count, dtype, p);
    } else {
      rc = reduce_chain(c, &op, src, acc, count, root);
    }
  }
  return shoal__op_end(c, &op, rc);
}
