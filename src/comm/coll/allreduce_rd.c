/* Recursive doubling: lg p' full-vector exchanges (after MPICH's fold for a
 * non-power of two), for small vectors. Both partners of an exchange compute
 * (lower rank's vector) OP (higher rank's vector), the same expression, so
 * every rank keeps identical bits even for non-associative float sums and
 * NaN-sensitive min/max. Cost: lg p' (a + S b + S g) [+ fold 2a + 2S b + S g]. */
#include <math.h>
#include <string.h>

#include "comm/coll/algo.h"
#include "core/error.h"

static int rd_run(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count,
                  const shoal__plan_t *plan) {
  (void)plan;
  int p = shoal__comm_size(c), r = shoal__comm_rank(c), pof2 = shoal__pof2_floor(p), rem = p - pof2;
  size_t es = shoal_dtype_size(op->dtype), bytes = count * es;
  const char *src = src_;
  char *dst = dst_;
  char *tmp = shoal__coll_scratch(0, bytes);
  if (!tmp) return shoal__comm_fail(c, SHOAL_ERR_NOMEM, op, -1, "allreduce rd: no memory for %zu B", bytes);
  int newrank, rc;
  if ((rc = shoal__fold_in(c, op, &src, dst, tmp, count, &newrank))) return rc;
  if (newrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      int peer = shoal__unfold_rank(newrank ^ mask, rem);
      if ((rc = shoal__coll_sendrecv(c, op, peer, src, bytes, peer, tmp, bytes))) return rc;
      if (peer < r) shoal__reduce3(dst, tmp, src, count, op->dtype, op->redop);
      else shoal__reduce3(dst, src, tmp, count, op->dtype, op->redop);
      src = dst;
    }
    if (src != dst) memcpy(dst, src, bytes); /* pof2 == 1 only when p == 1 */
    if (op->redop == SHOAL_AVG) shoal__reduce_avg_finish(dst, count, op->dtype, p);
  }
  return shoal__fold_out(c, op, dst, count);
}

static double rd_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  return x->p <= 1 ? 0.0 : shoal__cost_rd(x, (double)bytes);
}

const shoal__coll_algo_t shoal__algo_rd = {
    .name = "rd",
    .alias = {"recursive-doubling"},
    .what = "recursive doubling: lg p full-vector exchanges (small vectors)",
    .flags = SHOAL__ALGO_TAGGED | SHOAL__ALGO_FLAT,
    .tie = 4,
    .cost = rd_cost,
    .run = rd_run,
};
