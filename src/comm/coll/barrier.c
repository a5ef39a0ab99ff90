/* Barrier: dissemination (Hensgen, Finkel & Manber): ceil(lg p) rounds; in
 * round k every rank signals rank + 2^k and waits for rank - 2^k. One byte
 * per message so the transport's header checks see a real payload. */
#include "comm/coll/coll.h"
#include "core/error.h"

int shoal_barrier(shoal_comm_t *c) {
  if (!c) return shoal__seterr(SHOAL_ERR_INVALID, "barrier: communicator is NULL");
  shoal__op_t op = {.opcode = SHOAL__OP_BARRIER, .dtype = SHOAL_UINT8, .root = -1, .count = 0};
  int rc = shoal__op_begin(c, &op);
  if (rc) return rc;
  if (shoal__shm_barrier(c, &op, &rc)) return shoal__op_end(c, &op, rc); /* one host: shm step flags (shm_coll.c) */
  int p = shoal__comm_size(c), r = shoal__comm_rank(c);
  unsigned char out = 1, in = 0;
  for (int k = 1; k < p && rc == 0; k <<= 1)
    rc = shoal__coll_sendrecv(c, &op, (r + k) % p, &out, 1, shoal__mod(r - k, p), &in, 1);
  return shoal__op_end(c, &op, rc);
}
