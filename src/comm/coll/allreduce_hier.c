/* Hierarchical allreduce for communicators that span hosts:
 *   1. each host reduces to its leader over shared memory (shm_coll.c);
 *   2. the leaders (one per host: the host's lowest world rank) allreduce
 *      over TCP with the flat algorithm the chooser picks for them;
 *   3. each leader broadcasts the result to its host over shared memory.
 * Hosts may hold any number of ranks, unequal included (a host of one rank
 * skips steps 1 and 3). AVG is reduced as SUM and divided once by the
 * communicator size at the leaders, so every rank gets the same bits.
 *
 * The leaders talk through a transient view of c (same world and
 * connections, its own comm id derived from c's id and the op's sequence
 * number), so no split and no state outlives the call.
 * Cost: the leaders' best flat algorithm over the network, plus 1.5 x the
 * shm allreduce fit when a host holds several ranks (reduce + broadcast is
 * about one shm allreduce plus one copy). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/error.h"
#include "core/log.h"

#define HIER_INTRA_FACTOR 1.5 /* shm reduce + bcast vs one shm allreduce: one more copy and sync [R] */

/* The leaders of c's hosts in comm-rank order of their hosts' first
 * appearance (a host's leader is its lowest world rank); *me: this rank's
 * index among them or -1. leaders has room for c->size. 0 or NOMEM. */
static int find_leaders(const shoal_comm_t *c, int *leaders, int *m_out, int *me) {
  const shoal__topo_t *t = c->w->topo;
  int *seen = calloc((size_t)t->nhosts, sizeof *seen);
  if (!seen) return SHOAL_ERR_NOMEM;
  int m = 0;
  *me = -1;
  for (int i = 0; i < c->size; i++) {
    int h = t->host_of[c->wranks[i]];
    if (seen[h]) continue;
    seen[h] = 1;
    int lw = -1;
    for (int j = 0; j < c->size; j++)
      if (t->host_of[c->wranks[j]] == h && (lw < 0 || c->wranks[j] < lw)) lw = c->wranks[j];
    if (lw == c->w->rank) *me = m;
    leaders[m++] = lw;
  }
  free(seen);
  *m_out = m;
  return 0;
}

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
  shoal__coll_ctx_t x;
  shoal__choice_t ch;
  shoal__coll_ctx_leaders(c->w, leaders, m, &x);
  int rc = shoal__coll_price(&x, bytes, SHOAL__CHOOSE_FLAT, &ch);
  if (!rc) {
    vop.algo = (uint8_t)ch.algo;
    rc = shoal__op_begin(v, &vop);
  }
  if (!rc) {
    vop.deadline_ns = op->deadline_ns;
    rc = shoal__algo(ch.algo)->run(v, &vop, buf, buf, count, &ch.plan);
  }
  if (rc && !c->errmsg[0] && v->errmsg[0]) memcpy(c->errmsg, v->errmsg, sizeof c->errmsg);
  free(v);
  return rc;
}

static int hier_run(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                    const shoal__plan_t *plan) {
  (void)plan;
  const shoal__topo_t *t = c->w->topo;
  size_t bytes = count * shoal_dtype_size((shoal_dtype_t)op->dtype);
  int *leaders = malloc((size_t)c->size * sizeof *leaders), m = 0, me = -1;
  if (!leaders || find_leaders(c, leaders, &m, &me)) {
    free(leaders);
    return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "hierarchical allreduce: out of memory");
  }
  shoal__op_t iop = *op;
  if (iop.redop == SHOAL_AVG) iop.redop = SHOAL_SUM;
  int rc = 0;
  if (t->nlocal > 1)
    rc = shoal__shm_allreduce(c, &iop, src, dst, count, 0);
  else if (src != dst)
    memcpy(dst, src, bytes);
  if (!rc && me >= 0) {
    if (m > 1) rc = inter_allreduce(c, op, dst, count, leaders, m, me);
    if (!rc && op->redop == SHOAL_AVG) shoal__reduce_avg_finish(dst, count, (shoal_dtype_t)op->dtype, c->size);
  }
  if (!rc && t->nlocal > 1) rc = shoal__shm_bcast(c, op, dst, bytes, 0);
  free(leaders);
  return rc;
}

static int hier_applies(const shoal__coll_ctx_t *x) {
  if (x->p == 1 || x->shm_ok) return 0;
  return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce hier: the communicator does not hold every rank of each host "
                       "it touches, or shared memory is off (SHOAL_SHM=0); use ring, rhd or rd");
}

static double hier_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  /* with one rank per host there is nothing to do inside the hosts: the leaders' algorithm itself runs */
  if (!x->c || !x->shm_ok || x->layout.nhosts < 2 || x->layout.maxq < 2) return INFINITY;
  int *leaders = malloc((size_t)x->p * sizeof *leaders), m = 0, me;
  if (!leaders || find_leaders(x->c, leaders, &m, &me)) {
    free(leaders);
    return INFINITY;
  }
  shoal__coll_ctx_t lx;
  shoal__choice_t ch;
  shoal__coll_ctx_leaders(x->w, leaders, m, &lx);
  double inter = shoal__coll_price(&lx, bytes, SHOAL__CHOOSE_FLAT | SHOAL__CHOOSE_NOPLAN, &ch) ? INFINITY
                                                                                                 : ch.t[ch.algo];
  free(leaders);
  return inter + (x->layout.maxq > 1 ? HIER_INTRA_FACTOR * shoal__tune_shm_allreduce_time(x->w, (double)bytes) : 0);
}

const shoal__coll_algo_t shoal__algo_hier = {
    .name = "hier",
    .what = "several hosts: shm reduce, leaders' allreduce over TCP, shm broadcast",
    .flags = 0,
    .tie = 1,
    .applies = hier_applies,
    .cost = hier_cost,
    .run = hier_run,
};
