/* Gather and scatter: the root exchanges one block with every other rank,
 * all posted at once (the engine progresses them together), straight from
 * and into the caller's buffers. Linear, as Gloo's and MPICH's long-message
 * versions: the root's link carries the (p-1) blocks once either way, which
 * is the bound; a tree would only save latency on small blocks. */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "core/error.h"
#include "core/log.h"

/* Every non-root block to or from root (dir 0: receive into buf, 1: send from buf), then wait. */
static int root_exchange(shoal_comm_t *c, const shoal__op_t *op, char *buf, size_t bytes, int dir) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rc = 0;
  shoal__req_t *req = calloc((size_t)p, sizeof *req);
  if (!req) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "%s: no memory for %d requests",
                                    shoal__opcode_name(op->opcode), p);
  for (int q = 0; q < p && !rc; q++) {
    if (q == r) continue;
    char *blk = buf + (size_t)q * bytes;
    rc = dir ? shoal__isend(c, op, q, blk, bytes, &req[q]) : shoal__irecv(c, op, q, blk, bytes, &req[q]);
  }
  if (!rc) rc = shoal__coll_wait(c, op, req, p);
  free(req);
  return rc;
}

static int rooted_check(shoal_comm_t *c, const char *what, int root) {
  int p = shoal__comm_size(c);
  if (root < 0 || root >= p)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "%s: root %d out of range (communicator of %d ranks)",
                                               what, root, p));
  return 0;
}

int shoal_gather(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t sendcount, shoal_dtype_t dtype,
                 int root) {
  size_t bytes;
  /* the buffers are checked below: which must be there depends on being the root */
  int rc = shoal__coll_check(c, "gather", dtype, sendcount, c ? (size_t)shoal__comm_size(c) : 1, "", &bytes);
  if (rc || (rc = rooted_check(c, "gather", root))) return shoal__comm_reject(c, rc);
  int r = shoal__comm_rank(c);
  int inplace = sendbuf == SHOAL_IN_PLACE;
  if (sendcount && r == root && (!recvbuf || recvbuf == SHOAL_IN_PLACE))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "gather: the root's recvbuf is %s",
                                               recvbuf ? "the in-place marker" : "NULL"));
  if (sendcount && (!sendbuf || (inplace && r != root)))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "gather: sendbuf is %s on rank %d (SHOAL_IN_PLACE "
                                               "is for the root)", sendbuf ? "the in-place marker" : "NULL", r));
  /* the root rides in the header's tag: ranks that disagree on it fail with a mismatch */
  shoal__op_t op = {.opcode = SHOAL__OP_GATHER, .dtype = (uint8_t)dtype, .root = root, .tag = root, .count = sendcount};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_DEBUG("COLL", "gather seq %u: %zu B per rank to %d", op.seq, bytes, root);
  if (sendcount == 0) return shoal__op_end(c, &op, 0);
  if (r != root) {
    rc = shoal__coll_sendrecv(c, &op, root, sendbuf, bytes, -1, NULL, 0);
    return shoal__op_end(c, &op, rc);
  }
  char *mine = (char *)recvbuf + (size_t)r * bytes;
  if (!inplace && sendbuf != mine) memmove(mine, sendbuf, bytes);
  return shoal__op_end(c, &op, root_exchange(c, &op, recvbuf, bytes, 0));
}

int shoal_scatter(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t recvcount, shoal_dtype_t dtype,
                  int root) {
  size_t bytes;
  int rc = shoal__coll_check(c, "scatter", dtype, recvcount, c ? (size_t)shoal__comm_size(c) : 1, recvbuf, &bytes);
  if (rc || (rc = rooted_check(c, "scatter", root))) return shoal__comm_reject(c, rc);
  int r = shoal__comm_rank(c);
  if (recvcount && r == root && (!sendbuf || sendbuf == SHOAL_IN_PLACE))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "scatter: the root's sendbuf is %s",
                                               sendbuf ? "the in-place marker" : "NULL"));
  shoal__op_t op = {.opcode = SHOAL__OP_SCATTER, .dtype = (uint8_t)dtype, .root = root, .tag = root, .count = recvcount};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_DEBUG("COLL", "scatter seq %u: %zu B per rank from %d", op.seq, bytes, root);
  if (recvcount == 0) return shoal__op_end(c, &op, 0);
  if (r != root) {
    rc = shoal__coll_sendrecv(c, &op, -1, NULL, 0, root, recvbuf, bytes);
    return shoal__op_end(c, &op, rc);
  }
  const char *mine = (const char *)sendbuf + (size_t)r * bytes;
  if (recvbuf != mine) memmove(recvbuf, mine, bytes);
  return shoal__op_end(c, &op, root_exchange(c, &op, (char *)sendbuf, bytes, 1));
}
