/* Single-copy allreduce of one host group over Linux cross-memory attach
 * (process_vm_readv / process_vm_writev, as Open MPI's vader does with CMA).
 *
 * The shm algorithm moves every byte twice (the user's buffer into the
 * shared arena, the shared result out to the user's buffer). Here the ranks
 * publish the addresses of their buffers in their boxes (one step) and
 * move the data with the kernel straight between the processes:
 *   1. rank k reduces its cache-line-aligned slice k, piece by piece: one
 *      process_vm_readv per peer brings the peer's piece into a small local
 *      buffer (it stays in L1/L2), the reduction (local-rank order, so the
 *      bits are those of any other rank's order-independent choice) writes
 *      into rank k's own destination, and one process_vm_writev per peer
 *      puts the reduced piece into that peer's destination at once, while
 *      it is still in cache;
 *   2. rank k publishes red_step and waits for everyone's: then every slice
 *      of its destination is written and nobody reads its source any more,
 *      so it may return (no third handshake).
 * In place is safe: slice j of rank i's buffer is read only by rank j, which
 * overwrites it with the result after reading it.
 *
 * Per rank and byte of the vector, memory sees about (p-1)/p reads of peers'
 * inputs, one read of its own slice's input and one write of each output:
 * no arena, no result buffer. The price is two system calls per peer and
 * piece, which the tuning's fit includes (it is an end-to-end time like the
 * shm algorithm's). Availability: the kernel's ptrace-attach check between
 * same-user processes (Yama's ptrace_scope 0, no seccomp filter against
 * the calls, dumpable processes); the host group tests it at attach time
 * (shm_segment.c) and agrees, so every rank has the same candidates. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/uio.h>

#include "comm/coll/algo.h"
#include "comm/coll/redop.h"
#include "comm/comm_impl.h"
#include "comm/transport/shm.h"
#include "core/error.h"

/* Box data of a step of this algorithm: where this rank's buffers are. */
typedef struct cma_addrs {
  uint64_t src, dst;
} cma_addrs_t;

static int cma_applies(const shoal__coll_ctx_t *x) {
  if (x->p == 1) return 0;
  if (!x->shm_ok || !x->w || !x->w->shm)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce cma: the communicator does not hold every rank of each "
                         "host it touches, or shared memory is off (SHOAL_SHM=0); use ring, rhd or rd");
  if (x->layout.nhosts > 1)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce cma: the ranks span several hosts; use hier");
  if (!x->w->shm->cma_ok)
    return shoal__seterr(SHOAL_ERR_UNSUPPORTED, "allreduce cma: cross-memory attach (process_vm_readv) between the "
                         "ranks of this host is not permitted (Yama ptrace_scope, seccomp or a non-dumpable "
                         "process); use shm");
  return 0;
}

static double cma_cost(const shoal__coll_ctx_t *x, size_t bytes) {
  return x->one_host_shm && x->w->shm && x->w->shm->cma_ok ? shoal__tune_cma_allreduce_time(x->w, (double)bytes)
                                                           : INFINITY;
}

static int comm_rank_of(const shoal_comm_t *c, int wrank) {
  for (int i = 0; i < c->size; i++)
    if (c->wranks[i] == wrank) return i;
  return -1;
}

/* Move n bytes between this process (local) and local rank l's (remote): write != 0 into l. */
static int move(shoal_comm_t *c, const shoal__op_t *op, int l, int write, void *local, uint64_t remote, size_t n) {
  shoal__shm_t *s = c->w->shm;
  int wr = s->topo->l2w[l], pid = c->w->peers[wr].pid;
  while (n) {
    struct iovec lv = {local, n}, rv = {(void *)(uintptr_t)remote, n};
    ssize_t k = write ? process_vm_writev(pid, &lv, 1, &rv, 1, 0) : process_vm_readv(pid, &lv, 1, &rv, 1, 0);
    if (k <= 0) {
      int e = k < 0 ? errno : EIO;
      if (e == EINTR) continue;
      return shoal__comm_fail(c, SHOAL_ERR_SYSTEM, op, comm_rank_of(c, wr),
                              "allreduce cma: %s of %zu bytes %s same-host peer (world rank %d, pid %d) failed: %s%s",
                              write ? "process_vm_writev" : "process_vm_readv", n, write ? "into" : "from", wr, pid,
                              strerror(e), e == ESRCH ? " (it exited)" : "; set SHOAL_ALGO=shm");
    }
    local = (char *)local + k, remote += (uint64_t)k, n -= (size_t)k;
  }
  return 0;
}

static int cma_run(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count,
                   const shoal__plan_t *plan) {
  (void)plan;
  shoal__shm_t *s = c->w->shm;
  shoal_dtype_t dt = (shoal_dtype_t)op->dtype;
  shoal_redop_t ro = (shoal_redop_t)op->redop;
  size_t es = shoal_dtype_size(dt), line = 64 / es ? 64 / es : 1;
  const char *src = src_;
  char *dst = dst_;
  int p = s->topo->nlocal, me = s->topo->lrank, rc;
  uint64_t g = ++s->step;
  int b = (int)(g % SHOAL__SHM_NBUF);
  if ((rc = shoal__shm_wait_flags(c, op, 0, g - 1, -1))) return rc; /* box b's readers of step g-2 are done */
  shoal__shm_set_desc(c, g, op, SHOAL__SHM_PH_ALLREDUCE, -1);
  cma_addrs_t mine = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)dst};
  memcpy(shoal__shm_box(s, me, b)->data, &mine, sizeof mine);
  atomic_store_explicit(&s->ctrl[me].in_step, g, memory_order_release);
  shoal__shm_ring_all(s);
  if ((rc = shoal__shm_wait_flags(c, op, 0, g, -1)) || (rc = shoal__shm_check_desc(c, op, g, -1)) ||
      (rc = shoal__shm_unread(c, op)))
    return rc;
  cma_addrs_t peer[SHOAL__SHM_CMA_MAXLOCAL];
  for (int l = 0; l < p; l++) memcpy(&peer[l], shoal__shm_box(s, l, b)->data, sizeof peer[l]);
  /* my slice: cache-line aligned so that two owners never write one line of a destination */
  size_t sl = (count + (size_t)p - 1) / (size_t)p;
  sl = (sl + line - 1) / line * line;
  size_t so = (size_t)me * sl, sn = so < count ? (count - so < sl ? count - so : sl) : 0;
  size_t pe = s->cma_piece / es; /* elements per piece */
  for (size_t off = so; off < so + sn && !rc; off += pe) {
    size_t n = so + sn - off < pe ? so + sn - off : pe, nb = n * es;
    const char *in[SHOAL__SHM_CMA_MAXLOCAL] = {0}; /* [l]: local rank l's piece (mine: my source; else my buffer) */
    for (int l = 0, k = 0; l < p && !rc; l++) {
      if (l == me) {
        in[l] = src + off * es;
        continue;
      }
      char *t = s->cma_tmp + (size_t)k++ * s->cma_piece;
      rc = move(c, op, l, 0, t, peer[l].src + off * es, nb);
      in[l] = t;
    }
    if (rc) break;
    /* local-rank order, accumulated in a peer's piece that is read already; out only at the last step: in
     * place, out is my own input, which step `me` still reads */
    char *out = dst + off * es, *acc = p == 2 ? out : (char *)in[me == 0 ? 1 : 0];
    shoal__reduce3(acc, in[0], in[1], n, dt, ro);
    for (int l = 2; l < p; l++) shoal__reduce3(l == p - 1 ? out : acc, acc, in[l], n, dt, ro);
    if (ro == SHOAL_AVG) shoal__reduce_avg_finish(out, n, dt, p);
    for (int l = 0; l < p && !rc; l++)
      if (l != me) rc = move(c, op, l, 1, out, peer[l].dst + off * es, nb);
  }
  if (rc) return rc;
  atomic_store_explicit(&s->ctrl[me].red_step, g, memory_order_release);
  shoal__shm_ring_all(s);
  return shoal__shm_wait_flags(c, op, 1, g, -1);
}

const shoal__coll_algo_t shoal__algo_cma = {
    .name = "cma",
    .what = "one host: single copy over cross-memory attach (each rank reduces its slice from the peers' buffers)",
    .flags = 0,
    .tie = 1,
    .applies = cma_applies,
    .cost = cma_cost,
    .run = cma_run,
};
