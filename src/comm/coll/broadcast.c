/* Broadcast: a binomial tree for small messages (lg p latency), a pipelined
 * chain root -> root+1 -> ... for large ones (each link carries the data
 * once, so time ~ S/B + (p-2) chunks instead of lg p * S/B). */
#include <stdlib.h>

#include "comm/coll/coll.h"
#include "core/error.h"
#include "core/log.h"

#define BCAST_TREE_MAX_BYTES (32u << 10)
#define CHAIN_CHUNK_BYTES (256u << 10)

static int bcast_binomial(shoal_comm_t *c, const shoal__op_t *op, char *buf, size_t bytes, int root) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), vr = shoal__mod(r - root, p), rc, mask = 1;
  while (mask < p) {
    if (vr & mask) {
      if ((rc = shoal__coll_sendrecv(c, op, -1, NULL, 0, shoal__mod(vr - mask + root, p), buf, bytes))) return rc;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < p && (rc = shoal__coll_sendrecv(c, op, (vr + mask + root) % p, buf, bytes, -1, NULL, 0))) return rc;
  return 0;
}

static int bcast_chain(shoal_comm_t *c, const shoal__op_t *op, char *buf, size_t bytes, int root) {
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), vr = shoal__mod(r - root, p);
  int prev = vr > 0 ? shoal__mod(r - 1, p) : -1, next = vr < p - 1 ? (r + 1) % p : -1;
  size_t nch = (bytes + CHAIN_CHUNK_BYTES - 1) / CHAIN_CHUNK_BYTES;
  shoal__req_t *req = calloc(2 * nch, sizeof *req);
  char *posted = calloc(2 * nch, 1);
  int rc = 0;
  if (!req || !posted) {
    rc = shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "broadcast: no memory for %zu requests", 2 * nch);
    goto out_free;
  }
  /* all receives go straight into distinct parts of buf: post them at once */
  for (size_t k = 0; prev >= 0 && k < nch; k++) {
    size_t off, len;
    shoal__block(bytes, nch, k, &off, &len);
    if ((rc = shoal__post_recv(c, op, prev, buf + off, len, &req[k], &posted[k]))) goto out_free;
  }
  for (size_t k = 0; k < nch; k++) {
    size_t off, len;
    shoal__block(bytes, nch, k, &off, &len);
    if ((rc = shoal__wait_posted(c, op, &req[k], &posted[k]))) goto out_free;
    if (next >= 0 && (rc = shoal__post_send(c, op, next, buf + off, len, &req[nch + k], &posted[nch + k])))
      goto out_free;
  }
  for (size_t k = 0; k < nch; k++)
    if ((rc = shoal__wait_posted(c, op, &req[nch + k], &posted[nch + k]))) goto out_free;
out_free:
  free(req);
  free(posted);
  return rc;
}

int shoal_broadcast(shoal_comm_t *c, void *buf, size_t count, shoal_dtype_t dtype, int root) {
  size_t bytes;
  int rc = shoal__coll_check(c, "broadcast", dtype, count, 1, buf, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  int p = shoal__comm_size(c);
  if (root < 0 || root >= p)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "broadcast: root %d out of range (communicator "
                                               "of %d ranks)", root, p));
  /* the root rides in the header's tag: ranks that disagree on it fail with a mismatch */
  shoal__op_t op = {.opcode = SHOAL__OP_BROADCAST, .dtype = (uint8_t)dtype, .root = root, .tag = root, .count = count};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  int tree = bytes <= BCAST_TREE_MAX_BYTES || p <= 2;
  SHOAL_DEBUG("COLL", "broadcast seq %u: %zu B from %d on %d ranks (%s)", op.seq, bytes, root, p,
              tree ? "binomial" : "chain");
  if (p > 1 && bytes > 0) rc = tree ? bcast_binomial(c, &op, buf, bytes, root) : bcast_chain(c, &op, buf, bytes, root);
  /* a rank that believes it is the root reads nothing: a message of this call that its parent (by the
   * others' root) sent it stays in a shm ring, which the calls over the shm steps do not read */
  if (!rc && p > 1 && bytes > 0) rc = shoal__shm_note_p2p(c, &op, shoal__comm_rank(c) == root);
  return shoal__op_end(c, &op, rc);
}
