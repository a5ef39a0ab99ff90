/* The relay trees (relay.c) as a plain allreduce: every rank contributes.
 * This is the data plane of shoal_partial_allreduce (include/shoal/partial.h)
 * with the full active set, so the algorithm matrix, selftest and bench
 * exercise it like any other row. Shapes: P = p rotated chains (a ring's
 * volume, depth p - 1) or one or two binary trees (depth lg p, 3 S through
 * an interior rank), whichever relay.c's cost model prices lower; the plan carries
 * the number of trees (p trees: chains, fewer: binary). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll/relay.h"
#include "core/error.h"

static void shape_of(int p, const shoal__plan_t *plan, shoal__relay_shape_t *s) {
  int P = plan->ntrees >= 1 && plan->ntrees <= p ? plan->ntrees : p;
  *s = (shoal__relay_shape_t){p, P, P == p ? 1 : 2};
}

static int relay_plan(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *out) {
  shoal__relay_shape_t s;
  size_t chunk;
  int rc = shoal__relay_pick(x, bytes, 0, 0, &s, &chunk);
  if (rc) return rc;
  out->ntrees = s.ntrees;
  out->chunk_bytes = chunk;
  return 0;
}

/* Never the automatic choice: its price (relay.c) sees one link class, not
 * the per-pair link matrix the other rows are priced on as flows, so it would
 * look cheap exactly where a slow host makes every chain slow. It runs when
 * asked for (SHOAL_ALGO=relay, shoal_allreduce_algo) and as the partial
 * allreduce's data plane, which prices its own shapes. */
static double relay_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  (void)x, (void)bytes;
  return INFINITY;
}

static int relay_run(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                     const shoal__plan_t *plan) {
  int p = shoal__comm_size(c);
  unsigned char all[256], *has = p <= (int)sizeof all ? all : malloc((size_t)p);
  if (!has) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce relay: out of memory");
  memset(has, 1, (size_t)p);
  shoal__relay_job_t job = {.contrib = src, .dst = dst, .count = count, .dtype = (shoal_dtype_t)op->dtype,
                            .redop = (shoal_redop_t)op->redop, .has_local = has, .divisor = p,
                            .chunk_bytes = plan->chunk_bytes ? plan->chunk_bytes : 65536};
  shape_of(p, plan, &job.shape);
  int rc = shoal__relay_run(c, op, &job);
  if (has != all) free(has);
  return rc;
}

const shoal__coll_algo_t shoal__algo_relay = {
    .name = "relay",
    .what = "reduction trees with relays (rotated chains or binary trees); all ranks active",
    .flags = SHOAL__ALGO_TAGGED | SHOAL__ALGO_FLAT,
    .tie = 5,
    .cost = relay_cost,
    .plan = relay_plan,
    .run = relay_run,
};
