/* Pipelined ring allreduce: reduce-scatter then allgather over the ring
 * engine (ring.c), bandwidth-optimal; every block is reduced on exactly one
 * rank and copied around, so every rank gets identical bits.
 * Cost: 2(p-1) a + 2(p-1)/p S b + (p-1)/p S g with equal links (flows.c). */
#include <math.h>
#include <stdlib.h>

#include "comm/coll/algo.h"

static int ring_run(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                    const shoal__plan_t *plan) {
  int p = shoal__comm_size(c);
  shoal__ring_t g = {.dtype = op->dtype, .redop = op->redop, .count = count, .rs_steps = p - 1,
                     .ag_steps = p - 1, .shift = 0, .src = src, .work = dst, .own_dst = NULL,
                     .avg = op->redop == SHOAL_AVG, .chunk_bytes = plan->chunk_bytes};
  return shoal__ring_run(c, op, &g);
}

/* Every link k -> k+1 carries 2(p-1)/p S in 2(p-1) steps; the slowest link
 * (or the most shared host link) sets the pace. */
static double ring_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  int p = x->p;
  if (p <= 1) return 0.0;
  double S = (double)bytes, a;
  shoal__flow_t *f = malloc((size_t)p * sizeof *f);
  if (!f) return INFINITY;
  for (int k = 0; k < p; k++) f[k] = (shoal__flow_t){k, (k + 1) % p, 2.0 * (p - 1) / p * S};
  double t = shoal__flows_time(x, f, p, &a);
  free(f);
  return 2.0 * (p - 1) * a + t + (double)(p - 1) / p * S * x->flat.gamma_s + x->o;
}

static int ring_plan(const shoal__coll_ctx_t *x, size_t bytes, shoal__plan_t *out) {
  return shoal__ring_chunk_default(x->p, bytes, &out->chunk_bytes);
}

const shoal__coll_algo_t shoal__algo_ring = {
    .name = "ring",
    .what = "pipelined chunked ring: reduce-scatter + allgather",
    .flags = SHOAL__ALGO_TAGGED | SHOAL__ALGO_FLAT,
    .tie = 2,
    .cost = ring_cost,
    .plan = ring_plan,
    .run = ring_run,
};
