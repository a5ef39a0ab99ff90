/* Allgather: the pipelined ring's allgather half (p-1 steps, each chunk
 * forwarded as soon as it arrives), receiving straight into recvbuf. */
#include <string.h>

#include "comm/coll/coll.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#define ALLGATHER_CHUNK_BYTES (512u << 10)

int shoal_allgather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype) {
  size_t bytes;
  int rc = shoal__coll_check(c, "allgather", dtype, sendcount, c ? (size_t)shoal__comm_size(c) : 1, recvbuf, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  int p = shoal__comm_size(c), r = shoal__comm_rank(c);
  size_t es = shoal_dtype_size(dtype);
  char *mine = (char *)recvbuf + (size_t)r * bytes;
  int inplace = sendbuf == SHOAL_IN_PLACE || sendbuf == mine;
  if (!inplace && !sendbuf && sendcount)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "allgather: sendbuf is NULL (use SHOAL_IN_PLACE)"));
  shoal__op_t op = {.opcode = SHOAL__OP_ALLGATHER, .dtype = (uint8_t)dtype, .root = -1, .count = sendcount};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_DEBUG("COLL", "allgather seq %u: %zu B per rank on %d ranks", op.seq, bytes, p);
  if (sendcount == 0) return shoal__op_end(c, &op, 0);
  long chunk;
  if ((rc = shoal__config_long("SHOAL_CHUNK_BYTES", ALLGATHER_CHUNK_BYTES, 0, 1L << 30, &chunk)))
    return shoal__op_end(c, &op, rc);
  if (!inplace) memmove(mine, sendbuf, bytes);
  shoal__ring_t g = {.dtype = dtype, .redop = SHOAL_SUM, .count = sendcount * (size_t)p, .rs_steps = 0,
                     .ag_steps = p - 1, .shift = 0, .src = recvbuf, .work = recvbuf, .chunk_bytes = chunk > 0 ? (size_t)chunk : ALLGATHER_CHUNK_BYTES};
  (void)es;
  return shoal__op_end(c, &op, shoal__ring_run(c, &op, &g));
}
