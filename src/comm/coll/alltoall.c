/* All-to-all: every rank sends block j of its send buffer to rank j and
 * receives block i of its receive buffer from rank i. Every receive and send
 * is posted at once, straight from and into the caller's buffers, and the
 * engine progresses them together (each link carries its block once, the
 * bound; a Bruck variant would only save latency on tiny blocks). The
 * v-variant takes per-peer counts and displacements; its messages are sent
 * even when empty, so that a rank whose counts disagree with its peer's gets
 * a mismatch naming both, not a timeout. */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "core/error.h"
#include "core/log.h"

static int block_check(shoal_comm_t *c, const char *what, const char *side, const size_t *counts,
                       const size_t *displs, const void *buf, size_t es) {
  int p = shoal__comm_size(c);
  if (!counts || !displs)
    return shoal__seterr(SHOAL_ERR_INVALID, "%s: %s counts or displacements are NULL", what, side);
  for (int q = 0; q < p; q++) {
    if (counts[q] > SIZE_MAX / es || displs[q] > SIZE_MAX / es - counts[q])
      return shoal__seterr(SHOAL_ERR_INVALID, "%s: %s block %d (count %zu at %zu) overflows", what, side, q,
                           counts[q], displs[q]);
    if (counts[q] && (!buf || buf == SHOAL_IN_PLACE))
      return shoal__seterr(SHOAL_ERR_INVALID, "%s: %s buffer is %s with %zu elements for rank %d", what, side,
                           buf ? "the in-place marker" : "NULL", counts[q], q);
  }
  return 0;
}

/* The exchange itself, after the op began. */
static int exchange(shoal_comm_t *c, const shoal__op_t *op, const char *sbuf, const size_t *scounts,
                    const size_t *sdispls, char *rbuf, const size_t *rcounts, const size_t *rdispls, size_t es) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), rc = 0;
  if (rcounts[r] != scounts[r])
    return shoal__comm_fail(c, SHOAL_ERR_INVALID, op, r, "alltoall: this rank sends itself %zu elements but "
                            "receives %zu from itself", scounts[r], rcounts[r]);
  if (rcounts[r]) memmove(rbuf + rdispls[r] * es, sbuf + sdispls[r] * es, rcounts[r] * es);
  if (p == 1) return 0;
  shoal__req_t *req = calloc(2 * (size_t)p, sizeof *req);
  if (!req) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "alltoall: no memory for %d requests", 2 * p);
  /* receives first, then sends in the order r+1, r+2, ...: every rank starts on a different peer */
  for (int s = 1; s < p && !rc; s++) {
    int q = shoal__mod(r - s, p);
    rc = shoal__irecv(c, op, q, rbuf + rdispls[q] * es, rcounts[q] * es, &req[q]);
  }
  for (int s = 1; s < p && !rc; s++) {
    int q = (r + s) % p;
    rc = shoal__isend(c, op, q, sbuf + sdispls[q] * es, scounts[q] * es, &req[p + q]);
  }
  if (!rc) rc = shoal__coll_wait(c, op, req, 2 * p);
  free(req);
  return rc;
}

int shoal_alltoallv(shoal_comm_t *c, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts, const size_t *rdispls, shoal_dtype_t dtype) {
  size_t es = shoal_dtype_size(dtype);
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "alltoallv: communicator is NULL");
  if (!es) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "alltoallv: invalid dtype %d", (int)dtype));
  int rc = block_check(c, "alltoallv", "send", sendcounts, sdispls, sendbuf, es);
  if (rc || (rc = block_check(c, "alltoallv", "receive", recvcounts, rdispls, recvbuf, es)))
    return shoal__comm_reject(c, rc);
  /* count 0 in the header: the per-peer sizes are checked by each message's payload size */
  shoal__op_t op = {.opcode = SHOAL__OP_ALLTOALL, .dtype = (uint8_t)dtype, .root = -1, .tag = 1, .count = 0};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  SHOAL_DEBUG("COLL", "alltoallv seq %u on %d ranks", op.seq, shoal__comm_size(c));
  rc = exchange(c, &op, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, es);
  return shoal__op_end(c, &op, rc);
}

int shoal_alltoall(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype) {
  size_t bytes;
  int rc = shoal__coll_check(c, "alltoall", dtype, count, c ? (size_t)shoal__comm_size(c) : 1, recvbuf, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  if (count && (!sendbuf || sendbuf == SHOAL_IN_PLACE))
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "alltoall: sendbuf is %s",
                                               sendbuf ? "the in-place marker (alltoall cannot run in place: the blocks cross)" : "NULL"));
  int p = shoal__comm_size(c);
  size_t *v = malloc(2 * (size_t)p * sizeof *v);
  if (!v) return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_NOMEM, "alltoall: no memory for %d ranks", p));
  for (int q = 0; q < p; q++) v[q] = count, v[p + q] = (size_t)q * count;
  shoal__op_t op = {.opcode = SHOAL__OP_ALLTOALL, .dtype = (uint8_t)dtype, .root = -1, .tag = 0, .count = count};
  if (!(rc = shoal__op_begin(c, &op))) {
    SHOAL_DEBUG("COLL", "alltoall seq %u: %zu B per pair on %d ranks", op.seq, bytes, p);
    if (count) rc = exchange(c, &op, sendbuf, v, v + p, recvbuf, v, v + p, shoal_dtype_size(dtype));
    rc = shoal__op_end(c, &op, rc);
  }
  free(v);
  return rc;
}
