/* Hierarchical allreduce for communicators that span hosts:
 *   1. each host reduces to its leader over shared memory (coll_shm.c);
 *   2. the leaders (one per host: the host's lowest world rank) allreduce
 *      over TCP with the algorithm the fitted cost model picks for m leaders;
 *   3. each leader broadcasts the result to its host over shared memory.
 * Hosts may hold any number of ranks, unequal included (a host of one rank
 * skips steps 1 and 3). AVG is reduced as SUM and divided once by the
 * communicator size at the leaders, so every rank gets the same bits.
 *
 * The leaders talk through a transient view of c (same world and
 * connections, its own comm id derived from c's id and the op's sequence
 * number), so no split and no state outlives the call. */
#include <stdlib.h>
#include <string.h>

#include "comm/coll/coll.h"
#include "comm/transport/shm.h"
#include "comm/tune/tune.h"
#include "core/error.h"
#include "core/log.h"

static int inter_allreduce(shoal_comm_t *c, const shoal__op_t *op, char *buf, size_t count, int *leaders, int m,
                           int me) {
  shoal_comm_t *v = calloc(1, sizeof *v);
  if (!v) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "hierarchical allreduce: out of memory");
  v->w = c->w;
  v->id = ((c->id ^ 0x6869657261726368ull) * 0x9E3779B97F4A7C15ull + op->seq) | 1;
  v->rank = me;
  v->size = m;
  v->wranks = leaders;
  v->timeout_s = c->timeout_s;
  shoal__op_t vop = *op;
  if (vop.redop == SHOAL_AVG) vop.redop = SHOAL_SUM;
  size_t bytes = count * shoal_dtype_size((shoal_dtype_t)op->dtype);
  shoal__cost_t net;
  shoal__tune_cost(c, 0, &net);
  shoal_algo_t a = shoal__cost_pick(m, bytes, &net, NULL);
  vop.algo = (uint8_t)a;
  int rc = shoal__op_begin(v, &vop);
  if (!rc) {
    vop.deadline_ns = op->deadline_ns;
    if (a == SHOAL_ALGO_RING) {
      size_t chunk;
      rc = shoal__ring_chunk_bytes(m, bytes, &net, &chunk);
      if (!rc) rc = shoal__allreduce_ring(v, &vop, buf, buf, count, chunk);
    } else if (a == SHOAL_ALGO_RHD) {
      rc = shoal__allreduce_rhd(v, &vop, buf, buf, count);
    } else {
      rc = shoal__allreduce_rd(v, &vop, buf, buf, count);
    }
  }
  if (rc && !c->errmsg[0] && v->errmsg[0]) memcpy(c->errmsg, v->errmsg, sizeof c->errmsg);
  free(v);
  return rc;
}

int shoal__hier_allreduce(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count) {
  shoal__world_t *w = c->w;
  shoal__shm_t *s = w->shm;
  size_t bytes = count * shoal_dtype_size((shoal_dtype_t)op->dtype);
  int *leaders = malloc((size_t)c->size * sizeof *leaders);
  int *seen = calloc((size_t)s->nhosts, sizeof *seen);
  if (!leaders || !seen) {
    free(leaders), free(seen);
    return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "hierarchical allreduce: out of memory");
  }
  /* leaders in comm-rank order of their hosts' first appearance; a host's
   * leader is its lowest world rank (local index 0) */
  int m = 0, me = -1;
  for (int i = 0; i < c->size; i++) {
    int h = s->host_of[c->wranks[i]];
    if (seen[h]) continue;
    seen[h] = 1;
    int lw = -1;
    for (int j = 0; j < c->size; j++)
      if (s->host_of[c->wranks[j]] == h && (lw < 0 || c->wranks[j] < lw)) lw = c->wranks[j];
    if (lw == w->rank) me = m;
    leaders[m++] = lw;
  }
  shoal__op_t iop = *op;
  if (iop.redop == SHOAL_AVG) iop.redop = SHOAL_SUM;
  int rc = 0;
  if (s->nlocal > 1)
    rc = shoal__shm_allreduce(c, &iop, src, dst, count, 0);
  else if (src != dst)
    memcpy(dst, src, bytes);
  if (!rc && me >= 0) {
    if (m > 1) rc = inter_allreduce(c, op, dst, count, leaders, m, me);
    if (!rc && op->redop == SHOAL_AVG) shoal__reduce_avg_finish(dst, count, (shoal_dtype_t)op->dtype, c->size);
  }
  if (!rc && s->nlocal > 1) rc = shoal__shm_bcast(c, op, dst, bytes, 0);
  free(leaders);
  free(seen);
  return rc;
}
