/* The shared-memory-native allreduce of one host group (shm_coll.c) as an
 * algorithm of the table: it applies to a communicator that holds whole
 * host groups on one host, and its cost is the profile's fit of the whole
 * collective (its time is not a point-to-point formula). */
#include <math.h>

#include "comm/coll/algo.h"
#include "core/error.h"

static int shm_applies(const shoal__coll_ctx_t *x) {
  if (x->p == 1) return 0;
  if (!x->shm_ok)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce shm: the communicator does not hold every rank of each "
                         "host it touches, or shared memory is off (SHOAL_SHM=0); use ring, rhd or rd");
  if (x->layout.nhosts > 1)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce shm: the ranks span several hosts; use hier");
  return 0;
}

static double shm_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  return x->one_host_shm ? shoal__tune_shm_allreduce_time(x->w, (double)bytes) : INFINITY;
}

static int shm_run(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                   const shoal__plan_t *plan) {
  (void)plan;
  return shoal__shm_allreduce(c, op, src, dst, count, -1);
}

const shoal__coll_algo_t shoal__algo_shm = {
    .name = "shm",
    .what = "one host: shared-memory reduce-scatter in place + copy-out",
    .flags = 0,
    .tie = 0,
    .applies = shm_applies,
    .cost = shm_cost,
    .run = shm_run,
};
