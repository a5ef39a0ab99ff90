/* Allreduce: the public entry points and the one dispatcher. The chooser
 * (choose.c) resolves the algorithm (explicit > SHOAL_ALGO > the cost model)
 * with its parameters; the table (algos.c) says how it runs. */
#include <string.h>

#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

int shoal_allreduce_algo(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                         shoal_redop_t redop, shoal_algo_t algo) {
  size_t bytes;
  int rc = shoal__coll_check(c, "allreduce", dtype, count, 1, recvbuf, &bytes);
  if (rc) return shoal__comm_reject(c, rc);
  if ((rc = shoal__reduce_check(dtype, redop))) return shoal__comm_reject(c, rc);
  if ((unsigned)algo >= (unsigned)shoal__algo_count())
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "allreduce: invalid algorithm %d", (int)algo));
  int inplace = sendbuf == SHOAL_IN_PLACE || sendbuf == recvbuf;
  if (!inplace && !sendbuf && count)
    return shoal__comm_reject(c, shoal__seterr(SHOAL_ERR_INVALID, "allreduce: sendbuf is NULL (use SHOAL_IN_PLACE)"));
  const void *src = inplace ? recvbuf : sendbuf;
  shoal__choice_t ch;
  if ((rc = shoal__coll_choose(c, bytes, algo, 0, &ch))) return shoal__comm_reject(c, rc);
  const shoal__coll_algo_t *a = shoal__algo(ch.algo);
  int p = shoal__comm_size(c);
  shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .dtype = (uint8_t)dtype, .redop = (uint8_t)redop,
                    .algo = (uint8_t)ch.algo, .root = -1, .count = count,
                    /* the algorithm rides in the header's tag, so ranks that chose differently
                     * (say, different SHOAL_ALGO) fail with a mismatch instead of mixing blocks;
                     * the shared-memory algorithms compare it in their step descriptors */
                    .tag = a->flags & SHOAL__ALGO_TAGGED ? (int32_t)ch.algo : 0};
  if ((rc = shoal__op_begin(c, &op))) return rc;
  if (shoal__log_enabled(SHOAL_LOG_INFO, "COLL") && SHOAL_LOG_INFO <= shoal__log_level_cur) {
    char plan[160];
    shoal__coll_ctx_t x;
    shoal__coll_ctx(c, &x);
    shoal__plan_describe(ch.algo, &x, &ch.plan, plan, sizeof plan);
    SHOAL_INFO("COLL", "allreduce seq %u: %zu x %s %s (%zu B) on %d ranks%s -> %s%s%s%s (%s)", op.seq, count,
               shoal_dtype_name(dtype), shoal_redop_name(redop), bytes, p, inplace ? " in place" : "", a->name,
               plan[0] ? " [" : "", plan, plan[0] ? "]" : "", shoal__choice_why(c, &ch));
  }
  /* the time against the prediction: a link that changed makes the profile measure it again (tune/watch.c,
   * through its hooks in the profile: it runs collectives itself) */
  const shoal__tune_t *t = c->w->tune;
  int watch = algo == SHOAL_ALGO_AUTO && p > 1 && t && t->watching && t->watching(c, bytes);
  uint64_t t0 = watch ? shoal__now_ns() : 0;
  if (p == 1 || count == 0) {
    if (!inplace && bytes) memcpy(recvbuf, src, bytes);
  } else {
    rc = a->run(c, &op, src, recvbuf, count, &ch.plan);
  }
  double elapsed = watch ? (double)(shoal__now_ns() - t0) * 1e-9 : 0;
  if ((rc = shoal__op_end(c, &op, rc))) return rc;
  return watch ? t->observe(c, bytes, ch.t[ch.algo], elapsed) : 0;
}

int shoal_allreduce(shoal_comm_t *c, const void *sendbuf, void *recvbuf, size_t count, shoal_dtype_t dtype,
                    shoal_redop_t op) {
  return shoal_allreduce_algo(c, sendbuf, recvbuf, count, dtype, op, SHOAL_ALGO_AUTO);
}

shoal_algo_t shoal_allreduce_choose(const shoal_comm_t *c, size_t bytes) {
  shoal__choice_t ch;
  if (c) {
    if (c->w->algo_env != SHOAL_ALGO_AUTO) return c->w->algo_env; /* what a call would try */
    if (shoal__coll_choose((shoal_comm_t *)c, bytes, SHOAL_ALGO_AUTO, SHOAL__CHOOSE_QUIET | SHOAL__CHOOSE_NOPLAN,
                           &ch) == 0)
      return ch.algo;
    return SHOAL_ALGO_RING;
  }
  shoal_algo_t forced = SHOAL_ALGO_AUTO;
  if (shoal__algo_env(&forced)) SHOAL_WARN("COLL", "%s; ignored", shoal_last_error());
  if (forced != SHOAL_ALGO_AUTO) return forced;
  shoal__coll_ctx_t x;
  if (shoal__coll_ctx_model(1, &x)) {
    SHOAL_WARN("COLL", "%s; using the default cost model", shoal_last_error());
    shoal__cost_defaults(&x.net);
    x.flat = x.net;
  }
  return shoal__coll_price(&x, bytes, SHOAL__CHOOSE_NOPLAN, &ch) ? SHOAL_ALGO_RING : ch.algo;
}
