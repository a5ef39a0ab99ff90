/* Shared-memory-native allreduce and broadcast of a host group.
 *
 * Steps: every collective is cut into steps numbered identically on every
 * member (s->step); step g uses arena buffer g % 2. A rank publishes
 * in_step = g once its input of step g is in its arena (or, with nothing
 * to write, when it enters the step), so in_step >= g also says "this rank
 * finished step g-1". Before writing any shared buffer for step g a rank
 * waits for in_step >= g-1 everywhere: the buffer's previous users (step
 * g-2) are done. No other handshake is needed to reuse buffers.
 *
 * Tiny vectors (<= SHOAL__SHM_BOX_BYTES, allreduce): one step through the
 * boxes, see box_allreduce.
 * Small vectors (<= SMALL_MAX): one step; each rank copies its input into
 * its arena, waits for all inputs, and reduces the whole vector itself
 * (in local-rank order, so every rank computes the same bits).
 * Large vectors: chunks of chunk_bytes, one step each. Each rank copies its
 * chunk in (all but its own slice, which only it reads, from the user's
 * buffer), then reduces its own cache-line-aligned slice of the chunk
 * straight from all p arenas into the shared result buffer (reduce-scatter
 * in place), publishes red_step, waits for every slice and copies the whole
 * reduced chunk out (allgather). A chunk is small enough (512 KiB by
 * default) that the p inputs and the result stay in the L2/L3 cache between
 * the copy-in, the reduction and the copy-outs, so DRAM sees about one read
 * of each input and one write of each output. */
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "comm/coll/coll.h"
#include "comm/comm_impl.h"
#include "comm/transport/shm.h"
#include "core/error.h"

#define SMALL_MAX (16u << 10)

static void publish_in(shoal__shm_t *s, uint64_t g) {
  atomic_store_explicit(&s->ctrl[s->topo->lrank].in_step, g, memory_order_release);
  shoal__shm_ring_all(s);
}

static void publish_red(shoal__shm_t *s, uint64_t g) {
  atomic_store_explicit(&s->ctrl[s->topo->lrank].red_step, g, memory_order_release);
  shoal__shm_ring_all(s);
}

/* Copy-out of a large allreduce: non-temporal stores, so that writing the
 * user's buffer costs no read-for-ownership of its lines (a third of the
 * DRAM traffic once the vector is larger than the cache) and does not evict
 * the shared buffers that the next chunks need. The caller fences. */
static void copy_out_nt(char *dst, const char *src, size_t n) {
#if defined(__x86_64__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i)), b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32)), d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

/* Reduce n elements of every member's arena buffer b at byte offset off into out. */
static void reduce_all(shoal__shm_t *s, const shoal__op_t *op, int b, size_t off, size_t n, char *out) {
  shoal_dtype_t dt = (shoal_dtype_t)op->dtype;
  shoal_redop_t ro = (shoal_redop_t)op->redop;
  shoal__reduce3(out, shoal__shm_in(s, 0, b) + off, shoal__shm_in(s, 1, b) + off, n, dt, ro);
  for (int l = 2; l < s->topo->nlocal; l++) shoal__reduce3(out, out, shoal__shm_in(s, l, b) + off, n, dt, ro);
}

/* The same for the large path, with my own input taken from the user's buffer. */
static void reduce_slice(shoal__shm_t *s, const shoal__op_t *op, int b, size_t off, size_t n, const char *own,
                         char *out) {
  shoal_dtype_t dt = (shoal_dtype_t)op->dtype;
  shoal_redop_t ro = (shoal_redop_t)op->redop;
  const char *in0 = s->topo->lrank == 0 ? own : shoal__shm_in(s, 0, b) + off;
  const char *in1 = s->topo->lrank == 1 ? own : shoal__shm_in(s, 1, b) + off;
  shoal__reduce3(out, in0, in1, n, dt, ro);
  for (int l = 2; l < s->topo->nlocal; l++) shoal__reduce3(out, out, l == s->topo->lrank ? own : shoal__shm_in(s, l, b) + off, n, dt, ro);
}

/* Tiny allreduce (<= SHOAL__SHM_BOX_BYTES): inputs travel in the boxes, step
 * number and first bytes in one cache line; no fence on the way in. The
 * wake-up of sleeping peers (a fence and a look at their `sleeping` words)
 * comes after this rank is done: a peer that sleeps waits for this rank's
 * box, which is visible long before; whoever completes last wakes the rest. */
static int box_allreduce(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count) {
  shoal__shm_t *s = c->w->shm;
  shoal_dtype_t dt = (shoal_dtype_t)op->dtype;
  shoal_redop_t ro = (shoal_redop_t)op->redop;
  size_t bytes = count * shoal_dtype_size(dt);
  uint64_t g = ++s->step;
  int b = (int)(g % SHOAL__SHM_NBUF), me = s->topo->lrank, rc;
  if ((rc = shoal__shm_wait_flags(c, op, 0, g - 1, -1))) return rc; /* box b's readers of step g-2 are done */
  shoal__shm_box_t *mine = shoal__shm_box(s, me, b);
  shoal__shm_set_desc_fast(s, c->id, g, op, mine); /* the call's descriptor, in the line of seq */
  memcpy(mine->data, src, bytes);
  /* seq before in_step: a rank in another call (a barrier say) that sees in_step == g compares the
   * descriptor of step g, which seq == g makes readable (before it, the box still says 0 or g-2 and the
   * check would skip it) */
  atomic_store_explicit(&mine->seq, g, memory_order_release);
  atomic_store_explicit(&s->ctrl[me].in_step, g, memory_order_release);
  if ((rc = shoal__shm_wait_flags(c, op, 2, g, -1)) || (rc = shoal__shm_unread(c, op))) return rc;
  for (int l = 0; l < s->topo->nlocal; l++) {
    shoal__shm_box_t *box = shoal__shm_box(s, l, b);
    if (l != me && (atomic_load_explicit(&box->seq, memory_order_relaxed) != g || shoal__shm_desc_differs(s, box)) &&
        (rc = shoal__shm_check_box(c, op, g, l)))
      return rc;
  }
  if (s->seen_all < g) s->seen_all = g; /* every box holds g, so every in_step is g */
  /* reduce in local-rank order, so that every rank computes the same bits;
   * my own input from my box too: in place, dst (== src) is overwritten
   * before my turn comes */
  shoal__reduce3(dst, shoal__shm_box(s, 0, b)->data, shoal__shm_box(s, 1, b)->data, count, dt, ro);
  for (int l = 2; l < s->topo->nlocal; l++) shoal__reduce3(dst, dst, shoal__shm_box(s, l, b)->data, count, dt, ro);
  if (ro == SHOAL_AVG) shoal__reduce_avg_finish(dst, count, dt, s->topo->nlocal);
  shoal__shm_ring_all(s);
  return 0;
}

static int small_allreduce(shoal_comm_t *c, const shoal__op_t *op, const void *src, void *dst, size_t count,
                           int root_l) {
  shoal__shm_t *s = c->w->shm;
  size_t bytes = count * shoal_dtype_size((shoal_dtype_t)op->dtype);
  uint64_t g = ++s->step;
  int b = (int)(g % SHOAL__SHM_NBUF), rc;
  if ((rc = shoal__shm_wait_flags(c, op, 0, g - 1, -1))) return rc;
  shoal__shm_set_desc(c, g, op, root_l < 0 ? SHOAL__SHM_PH_ALLREDUCE : SHOAL__SHM_PH_REDUCE, root_l);
  memcpy(shoal__shm_in(s, s->topo->lrank, b), src, bytes);
  publish_in(s, g);
  if (root_l >= 0 && root_l != s->topo->lrank) return 0;
  if ((rc = shoal__shm_wait_flags(c, op, 0, g, -1)) || (rc = shoal__shm_check_desc(c, op, g, -1)) ||
      (rc = shoal__shm_unread(c, op)))
    return rc;
  reduce_all(s, op, b, 0, count, dst);
  if (root_l < 0 && op->redop == SHOAL_AVG)
    shoal__reduce_avg_finish(dst, count, (shoal_dtype_t)op->dtype, s->topo->nlocal);
  return 0;
}

int shoal__shm_allreduce(shoal_comm_t *c, const shoal__op_t *op, const void *src_, void *dst_, size_t count,
                         int root_l) {
  shoal__shm_t *s = c->w->shm;
  size_t es = shoal_dtype_size((shoal_dtype_t)op->dtype), bytes = count * es;
  const char *src = src_;
  char *dst = dst_;
  if (!s) { /* a host of one rank: no segment */
    if (dst != src && bytes) memcpy(dst, src, bytes);
    return 0;
  }
  if (root_l < 0 && bytes <= SHOAL__SHM_BOX_BYTES) return box_allreduce(c, op, src, dst, count);
  if (bytes <= SMALL_MAX && bytes <= s->chunk_bytes) return small_allreduce(c, op, src, dst, count, root_l);
  size_t ce = s->chunk_bytes / es, line = 64 / es ? 64 / es : 1;
  int p = s->topo->nlocal, me = s->topo->lrank, rc;
  int nt = s->nt_bytes && bytes >= s->nt_bytes;
  for (size_t off = 0; off < count; off += ce) {
    size_t n = count - off < ce ? count - off : ce;
    uint64_t g = ++s->step;
    int b = (int)(g % SHOAL__SHM_NBUF);
    /* my slice: cache-line aligned so that owners never write the same line */
    size_t sl = (n + (size_t)p - 1) / (size_t)p;
    sl = (sl + line - 1) / line * line;
    size_t so = (size_t)me * sl, sn = so < n ? (n - so < sl ? n - so : sl) : 0;
    if ((rc = shoal__shm_wait_flags(c, op, 0, g - 1, -1))) return rc;
    shoal__shm_set_desc(c, g, op, root_l < 0 ? SHOAL__SHM_PH_ALLREDUCE : SHOAL__SHM_PH_REDUCE, root_l);
    /* copy in all but my own slice: only I read that one, straight from src */
    char *mine = shoal__shm_in(s, me, b);
    const char *in = src + off * es;
    size_t cut = so < n ? so : n;
    memcpy(mine, in, cut * es);
    if (cut + sn < n) memcpy(mine + (cut + sn) * es, in + (cut + sn) * es, (n - cut - sn) * es);
    publish_in(s, g);
    if ((rc = shoal__shm_wait_flags(c, op, 0, g, -1)) || (rc = shoal__shm_check_desc(c, op, g, -1)) ||
        (rc = shoal__shm_unread(c, op)))
      return rc;
    if (sn) {
      char *out = shoal__shm_out(s, b) + so * es;
      reduce_slice(s, op, b, so * es, sn, in + so * es, out);
      if (root_l < 0 && op->redop == SHOAL_AVG) shoal__reduce_avg_finish(out, sn, (shoal_dtype_t)op->dtype, p);
    }
    publish_red(s, g);
    if (root_l >= 0 && root_l != me) continue;
    if ((rc = shoal__shm_wait_flags(c, op, 1, g, -1))) return rc;
    if (nt) copy_out_nt(dst + off * es, shoal__shm_out(s, b), n * es);
    else memcpy(dst + off * es, shoal__shm_out(s, b), n * es);
  }
#if defined(__x86_64__)
  if (nt) _mm_sfence(); /* the streamed stores are weakly ordered: complete them before returning */
#endif
  return 0;
}

int shoal__shm_bcast(shoal_comm_t *c, const shoal__op_t *op, void *buf_, size_t bytes, int root_l) {
  shoal__shm_t *s = c->w->shm;
  char *buf = buf_;
  if (!s) return 0; /* a host of one rank */
  int rc;
  for (size_t off = 0; off < bytes || (bytes == 0 && off == 0); off += s->chunk_bytes) {
    size_t n = bytes - off < s->chunk_bytes ? bytes - off : s->chunk_bytes;
    uint64_t g = ++s->step;
    int b = (int)(g % SHOAL__SHM_NBUF);
    if (s->topo->lrank == root_l) {
      if ((rc = shoal__shm_wait_flags(c, op, 0, g - 1, -1))) return rc;
      shoal__shm_set_desc(c, g, op, SHOAL__SHM_PH_BCAST, root_l);
      memcpy(shoal__shm_out(s, b), buf + off, n);
      publish_in(s, g);
    } else {
      shoal__shm_set_desc(c, g, op, SHOAL__SHM_PH_BCAST, root_l);
      publish_in(s, g); /* "done with step g-1": nothing to write */
      if ((rc = shoal__shm_wait_flags(c, op, 0, g, root_l)) || (rc = shoal__shm_check_desc(c, op, g, root_l)))
        return rc;
      memcpy(buf + off, shoal__shm_out(s, b), n);
    }
    if (bytes == 0) break;
  }
  return 0;
}

int shoal__shm_note_p2p(shoal_comm_t *c, const shoal__op_t *op, int received_nothing) {
  shoal__shm_t *s = c->w->shm;
  if (!s) return 0;
  s->unread_comm = c->id;
  s->unread_seq = op->seq;
  s->unread_opcode = op->opcode;
  s->unread_root = op->root;
  /* a rank that received nothing (a root) looks now too: nobody writes to its rings in a right call, so
   * their lines stay in its cache (a receiver's would bounce with its sender's next message) */
  int rc = received_nothing ? shoal__shm_unread_check(c, op) : 0;
  s->unread_due = 1;
  return rc;
}

int shoal__shm_barrier(shoal_comm_t *c, const shoal__op_t *op, int *rc) {
  shoal__shm_t *s = c->w->shm;
  int nh;
  if (!s || c->size < 2 || !shoal__topo_shm_ok(c, &nh) || nh != 1) return 0;
  uint64_t g = ++s->step; /* a step with nothing to write: in_step >= g means "arrived" */
  shoal__shm_set_desc(c, g, op, SHOAL__SHM_PH_BARRIER, -1);
  publish_in(s, g);
  *rc = shoal__shm_wait_flags(c, op, 0, g, -1);
  if (!*rc) *rc = shoal__shm_check_desc(c, op, g, -1);
  if (!*rc) *rc = shoal__shm_unread(c, op);
  return 1;
}
