/* Reduce-scatter: the pipelined ring's reduce-scatter half with the block
 * numbering shifted by one so that rank r ends with block r. Out of place,
 * partial sums live in a scratch buffer and the last step writes recvbuf. */
#include <string.h>

#include "comm/coll/coll.h"
#include "core/error.h"
#include "core/log.h"

int shoal_reduce_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                         shoal_redop_t redop) {
  size_t bytes;
  int rc = shoal__coll_check(c, "reduce_scatter", dtype, recvcount, c ? (size_t)shoal__comm_size(c) : 1, recvbuf,
                             &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  if ((rc = shoal__reduce_check(dtype, redop))) return shoal__comm_reject(c, rc);
  int p = shoal__comm_size(c), r = shoal__comm_rank(c);
  int inplace = sendbuf == SHOAL_IN_PLACE || sendbuf == recvbuf;
  if (!inplace && !sendbuf && recvcount)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "reduce_scatter: sendbuf is NULL (use "
                                               "SHOAL_IN_PLACE)"));
  size_t es = shoal_dtype_size(dtype), count = recvcount * (size_t)p;
  shoal__op_t op = {.opcode = SHOAL__OP_REDUCE_SCATTER, .dtype = (uint8_t)dtype, .redop = (uint8_t)redop,
                    .root = -1, .count = recvcount};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_DEBUG("COLL", "reduce_scatter seq %u: %zu B per rank on %d ranks", op.seq, bytes, p);
  if (recvcount == 0) return shoal__op_end(c, &op, 0);
  if (p == 1) {
    if (!inplace) memcpy(recvbuf, sendbuf, bytes);
    return shoal__op_end(c, &op, 0);
  }
  shoal__cost_t m;
  size_t chunk = 0;
  if ((rc = shoal__cost_params(&m)) || (rc = shoal__ring_chunk_bytes(p, count * es, &m, &chunk)))
    return shoal__op_end(c, &op, rc);
  shoal__ring_t g = {.dtype = dtype, .redop = redop, .count = count, .rs_steps = p - 1, .ag_steps = 0,
                     .shift = -1, .avg = redop == SHOAL_AVG, .chunk_bytes = chunk};
  if (inplace) {
    g.src = recvbuf;
    g.work = recvbuf;
  } else {
    g.src = sendbuf;
    g.work = shoal__coll_scratch(1, count * es);
    g.own_dst = recvbuf;
    if (!g.work)
      return shoal__op_end(c, &op, shoal__comm_fail(c, SHOAL_ERR_NOMEM, &op, -1, "reduce_scatter: no memory"));
  }
  (void)r;
  return shoal__op_end(c, &op, shoal__ring_run(c, &op, &g));
}
