/* Collectives against serial references computed here: every collective x
 * algorithm (every flat row of the allreduce table) x dtype x op x world sizes
 * 1..8 x counts 0, 1, 1009 (prime) and
 * 3 MiB worth, in place and not. Inputs are small integers, so every
 * summation order gives the exact same value in every dtype (bf16 holds
 * integers up to 256 exactly, and |sums| <= 64, |products| <= 256 here);
 * results are compared bit for bit. One forked group per world size runs
 * the whole matrix inside (fast); 3 MiB counts cover a subset of
 * dtype/op pairs unless SHOAL_TEST_FULL=1 (every pair, all dtypes for
 * allgather; give it time: SHOAL_TEST_FULL=1 test_comm -t 3000 coll_world).
 * The world tests use the runner's -t timeout. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "comm/coll/algo.h"
#include "comm/coll/redop.h"
#include "comm/coll/exact.h"
#include "shoal/comm.h"

#define BIG_BYTES (3u << 20)
#define PRIME 1009

typedef struct group {
  int n, port, full;
  char dir[64];
} group_t;

static int g_fail_budget = 8; /* per rank: print the first few failures only */
static int g_rank;

#define FAILF(...)                                                              \
  do {                                                                          \
    if (g_fail_budget-- > 0) {                                                  \
      char m_[512];                                                             \
      snprintf(m_, sizeof m_, __VA_ARGS__);                                     \
      fprintf(stderr, "rank %d: %s\n", g_rank, m_);                             \
    }                                                                           \
    fails++;                                                                    \
  } while (0)

/* Index of the first element that differs, or -1. */
static long first_diff(const void *a, const void *b, size_t count, size_t es) {
  if (!memcmp(a, b, count * es)) return -1;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)a + i * es, (const char *)b + i * es, es)) return (long)i;
  return -1;
}

static void *xalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) abort();
  memset(p, 0x5a, bytes ? bytes : 1); /* garbage the collective must overwrite */
  return p;
}

static const char *mode_name(int mode) { return mode == 0 ? "out-of-place" : mode == 1 ? "IN_PLACE" : "send==recv"; }

/* --- one call of each collective, checked --- */
static int t_allreduce(shoal_comm_t *c, shoal_algo_t algo, shoal_dtype_t dt, shoal_redop_t op, size_t count,
                       int mode) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = (int)count % 5;
  size_t es = shoal_dtype_size(dt);
  char *send = xalloc(count * es), *recv = xalloc(count * es), *want = xalloc(count * es);
  for (size_t i = 0; i < count; i++) {
    shoal__exact_put(send, i, dt, shoal__exact_val(r, i, op, salt));
    shoal__exact_expect(want, i, dt, op, n, NULL, i, salt);
  }
  const void *sb = send;
  if (mode) {
    memcpy(recv, send, count * es);
    sb = mode == 1 ? SHOAL_IN_PLACE : recv;
  }
  int rc = shoal_allreduce_algo(c, sb, recv, count, dt, op, algo);
  long d;
  if (rc)
    FAILF("allreduce %s %s %s n=%zu %s: rc %d: %s", shoal_algo_name(algo), shoal_dtype_name(dt),
          shoal_redop_name(op), count, mode_name(mode), rc, shoal_comm_errmsg(c));
  else if ((d = first_diff(recv, want, count, es)) >= 0)
    FAILF("allreduce %s %s %s n=%zu %s: wrong element %ld", shoal_algo_name(algo), shoal_dtype_name(dt),
          shoal_redop_name(op), count, mode_name(mode), d);
  if (!mode) { /* the input is left alone */
    for (size_t i = 0; i < count; i++) shoal__exact_put(want, i, dt, shoal__exact_val(r, i, op, salt));
    if ((d = first_diff(send, want, count, es)) >= 0)
      FAILF("allreduce %s %s out-of-place modified sendbuf at %ld", shoal_algo_name(algo), shoal_dtype_name(dt), d);
  }
  free(send), free(recv), free(want);
  return fails;
}

static int t_broadcast(shoal_comm_t *c, shoal_dtype_t dt, size_t count, int root) {
  int fails = 0, r = shoal_comm_rank(c), salt = 3;
  size_t es = shoal_dtype_size(dt);
  char *buf = xalloc(count * es), *want = xalloc(count * es);
  for (size_t i = 0; i < count; i++) shoal__exact_put(want, i, dt, shoal__exact_val(root, i, SHOAL_SUM, salt));
  if (r == root) memcpy(buf, want, count * es);
  int rc = shoal_broadcast(c, buf, count, dt, root);
  long d;
  if (rc) FAILF("broadcast %s n=%zu root %d: rc %d: %s", shoal_dtype_name(dt), count, root, rc, shoal_comm_errmsg(c));
  else if ((d = first_diff(buf, want, count, es)) >= 0)
    FAILF("broadcast %s n=%zu root %d: wrong element %ld", shoal_dtype_name(dt), count, root, d);
  free(buf), free(want);
  return fails;
}

static int t_reduce(shoal_comm_t *c, shoal_dtype_t dt, shoal_redop_t op, size_t count, int root, int inplace) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = 1;
  size_t es = shoal_dtype_size(dt);
  char *send = xalloc(count * es), *recv = r == root ? xalloc(count * es) : NULL, *want = xalloc(count * es);
  for (size_t i = 0; i < count; i++) {
    shoal__exact_put(send, i, dt, shoal__exact_val(r, i, op, salt));
    shoal__exact_expect(want, i, dt, op, n, NULL, i, salt);
  }
  const void *sb = send;
  if (inplace && r == root) {
    memcpy(recv, send, count * es);
    sb = SHOAL_IN_PLACE;
  }
  int rc = shoal_reduce(c, sb, recv, count, dt, op, root);
  long d;
  if (rc)
    FAILF("reduce %s %s n=%zu root %d: rc %d: %s", shoal_dtype_name(dt), shoal_redop_name(op), count, root, rc,
          shoal_comm_errmsg(c));
  else if (r == root && (d = first_diff(recv, want, count, es)) >= 0)
    FAILF("reduce %s %s n=%zu root %d %s: wrong element %ld", shoal_dtype_name(dt), shoal_redop_name(op), count, root,
          inplace ? "in place" : "out of place", d);
  free(send), free(recv), free(want);
  return fails;
}

static int t_reduce_scatter(shoal_comm_t *c, shoal_dtype_t dt, shoal_redop_t op, size_t recvcount, int inplace) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = 2;
  size_t es = shoal_dtype_size(dt), total = recvcount * (size_t)n;
  char *send = xalloc(total * es), *recv = xalloc((inplace ? total : recvcount) * es), *want = xalloc(recvcount * es);
  for (size_t i = 0; i < total; i++) shoal__exact_put(send, i, dt, shoal__exact_val(r, i, op, salt));
  for (size_t i = 0; i < recvcount; i++) shoal__exact_expect(want, i, dt, op, n, NULL, (size_t)r * recvcount + i, salt);
  const void *sb = send;
  if (inplace) {
    memcpy(recv, send, total * es);
    sb = SHOAL_IN_PLACE;
  }
  int rc = shoal_reduce_scatter(c, sb, recv, recvcount, dt, op);
  const char *got = inplace ? recv + (size_t)r * recvcount * es : recv;
  long d;
  if (rc)
    FAILF("reduce_scatter %s %s n=%zu: rc %d: %s", shoal_dtype_name(dt), shoal_redop_name(op), recvcount, rc,
          shoal_comm_errmsg(c));
  else if ((d = first_diff(got, want, recvcount, es)) >= 0)
    FAILF("reduce_scatter %s %s recvcount=%zu %s: wrong element %ld", shoal_dtype_name(dt), shoal_redop_name(op),
          recvcount, inplace ? "in place" : "out of place", d);
  free(send), free(recv), free(want);
  return fails;
}

static int t_allgather(shoal_comm_t *c, shoal_dtype_t dt, size_t sendcount, int inplace) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = 4;
  size_t es = shoal_dtype_size(dt), total = sendcount * (size_t)n;
  char *send = xalloc(sendcount * es), *recv = xalloc(total * es), *want = xalloc(total * es);
  for (size_t i = 0; i < sendcount; i++) shoal__exact_put(send, i, dt, shoal__exact_val(r, i, SHOAL_SUM, salt));
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < sendcount; i++) shoal__exact_put(want, (size_t)q * sendcount + i, dt, shoal__exact_val(q, i, SHOAL_SUM, salt));
  const void *sb = send;
  if (inplace) {
    memcpy(recv + (size_t)r * sendcount * es, send, sendcount * es);
    sb = SHOAL_IN_PLACE;
  }
  int rc = shoal_allgather(c, sb, recv, sendcount, dt);
  long d;
  if (rc) FAILF("allgather %s n=%zu: rc %d: %s", shoal_dtype_name(dt), sendcount, rc, shoal_comm_errmsg(c));
  else if ((d = first_diff(recv, want, total, es)) >= 0)
    FAILF("allgather %s sendcount=%zu %s: wrong element %ld", shoal_dtype_name(dt), sendcount,
          inplace ? "in place" : "out of place", d);
  free(send), free(recv), free(want);
  return fails;
}

/* Gather and scatter: block q is rank q's values (salt 5 + root). */
static int t_gather_scatter(shoal_comm_t *c, shoal_dtype_t dt, size_t count, int root, int inplace) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = 5 + root;
  size_t es = shoal_dtype_size(dt), total = count * (size_t)n;
  char *mine = xalloc(count * es), *all = xalloc(total * es), *want = xalloc(total * es);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < count; i++) shoal__exact_put(want, (size_t)q * count + i, dt, shoal__exact_val(q, i, SHOAL_SUM, salt));
  memcpy(mine, want + (size_t)r * count * es, count * es);
  const void *sb = mine;
  if (inplace && r == root) {
    memcpy(all + (size_t)r * count * es, mine, count * es);
    sb = SHOAL_IN_PLACE;
  }
  int rc = shoal_gather(c, sb, r == root ? all : NULL, count, dt, root);
  long d;
  if (rc) FAILF("gather %s n=%zu root %d: rc %d: %s", shoal_dtype_name(dt), count, root, rc, shoal_comm_errmsg(c));
  else if (r == root && (d = first_diff(all, want, total, es)) >= 0)
    FAILF("gather %s n=%zu root %d %s: wrong element %ld", shoal_dtype_name(dt), count, root,
          inplace ? "in place" : "out of place", d);
  /* scatter the gathered blocks back: every rank gets its own block */
  memset(mine, 0x5a, count * es);
  void *rb = inplace && r == root ? all + (size_t)r * count * es : mine;
  rc = shoal_scatter(c, r == root ? want : NULL, rb, count, dt, root);
  if (rc) FAILF("scatter %s n=%zu root %d: rc %d: %s", shoal_dtype_name(dt), count, root, rc, shoal_comm_errmsg(c));
  else if ((d = first_diff(rb, want + (size_t)r * count * es, count, es)) >= 0)
    FAILF("scatter %s n=%zu root %d: wrong element %ld", shoal_dtype_name(dt), count, root, d);
  free(mine), free(all), free(want);
  return fails;
}

/* Alltoall: element i of the block from q to r is val(q, r * stride + i). The v-variant sends
 * (q + 2r) % 4 elements from q to r (some empty), packed in rank order. */
static int t_alltoall(shoal_comm_t *c, shoal_dtype_t dt, size_t count, int v) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c), salt = 6;
  size_t es = shoal_dtype_size(dt), *sc = calloc(4 * (size_t)n, sizeof *sc), *sd = sc + n, *rcn = sc + 2 * n,
         *rd = sc + 3 * n, stot = 0, rtot = 0, stride = count > 4 ? count : 4;
  for (int q = 0; q < n; q++) {
    sc[q] = v ? (size_t)(r + 2 * q) % 4 : count;
    rcn[q] = v ? (size_t)(q + 2 * r) % 4 : count;
    sd[q] = stot, rd[q] = rtot;
    stot += sc[q], rtot += rcn[q];
  }
  char *send = xalloc(stot * es), *recv = xalloc(rtot * es), *want = xalloc(rtot * es);
  for (int q = 0; q < n; q++) {
    for (size_t i = 0; i < sc[q]; i++) shoal__exact_put(send, sd[q] + i, dt, shoal__exact_val(r, (size_t)q * stride + i, SHOAL_SUM, salt));
    for (size_t i = 0; i < rcn[q]; i++) shoal__exact_put(want, rd[q] + i, dt, shoal__exact_val(q, (size_t)r * stride + i, SHOAL_SUM, salt));
  }
  int rc = v ? shoal_alltoallv(c, send, sc, sd, recv, rcn, rd, dt) : shoal_alltoall(c, send, recv, count, dt);
  long d;
  if (rc) FAILF("alltoall%s %s n=%zu: rc %d: %s", v ? "v" : "", shoal_dtype_name(dt), count, rc, shoal_comm_errmsg(c));
  else if ((d = first_diff(recv, want, rtot, es)) >= 0)
    FAILF("alltoall%s %s n=%zu: wrong element %ld", v ? "v" : "", shoal_dtype_name(dt), count, d);
  free(send), free(recv), free(want), free(sc);
  return fails;
}

/* Barrier: every rank leaves a file before it and checks after it that all
 * the others' files exist (a real ordering check, no timing). */
static int t_barrier(shoal_comm_t *c, const char *dir, int round) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c);
  char path[128];
  if (r == n - 1) usleep(20000); /* make the last rank late */
  snprintf(path, sizeof path, "%s/b%d.%d", dir, round, r);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  int rc = shoal_barrier(c);
  if (rc) FAILF("barrier: rc %d: %s", rc, shoal_comm_errmsg(c));
  for (int q = 0; q < n && !rc; q++) {
    snprintf(path, sizeof path, "%s/b%d.%d", dir, round, q);
    if (access(path, F_OK)) FAILF("barrier round %d: rank %d left before rank %d arrived", round, r, q);
  }
  return fails;
}

/* Identical bits on every rank with inputs where the reduction order DOES
 * matter (random non-integer floats, NaNs for min): the result of every
 * rank is allgathered and compared byte for byte with this rank's. */
static int t_identical(shoal_comm_t *c, shoal_algo_t algo, shoal_dtype_t dt, shoal_redop_t op, size_t count) {
  int fails = 0, n = shoal_comm_size(c), r = shoal_comm_rank(c);
  size_t es = shoal_dtype_size(dt);
  char *buf = xalloc(count * es), *all = xalloc(count * es * (size_t)n);
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + count;
  for (size_t i = 0; i < count; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    double v = 0.5 + (double)(x >> 11) * 0x1p-53; /* [0.5, 1.5): products stay finite */
    if (op == SHOAL_MIN && i % 97 == (size_t)r) v = NAN;
    shoal__exact_put(buf, i, dt, v);
  }
  int rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, count, dt, op, algo);
  if (!rc) rc = shoal_allgather(c, buf, all, count * es, SHOAL_UINT8);
  if (rc) FAILF("identical-bits %s %s %s n=%zu: rc %d: %s", shoal_algo_name(algo), shoal_dtype_name(dt),
                shoal_redop_name(op), count, rc, shoal_comm_errmsg(c));
  for (int q = 0; q < n && !rc; q++) {
    long d = first_diff(all + (size_t)q * count * es, buf, count, es);
    if (d >= 0)
      FAILF("identical-bits %s %s %s n=%zu: rank %d differs from rank %d at element %ld", shoal_algo_name(algo),
            shoal_dtype_name(dt), shoal_redop_name(op), count, q, r, d);
  }
  free(buf), free(all);
  return fails;
}

static const shoal_dtype_t red_dtypes[] = {SHOAL_FLOAT32,  SHOAL_FLOAT64, SHOAL_INT32, SHOAL_INT64, SHOAL_BFLOAT16,
                                           SHOAL_FLOAT16,  SHOAL_UINT8,   SHOAL_INT8,  SHOAL_INT16};
#define NRED 9
/* Every point-to-point (flat) algorithm of the table, then the automatic choice: a new row of the
 * table is checked here without a line of this test. */
static shoal_algo_t algos[SHOAL__ALGO_MAX + 1];
static int nalgos;
static void list_algos(void) {
  nalgos = 0;
  for (int a = 1; a < shoal__algo_count(); a++)
    if (shoal__algo((shoal_algo_t)a)->flags & SHOAL__ALGO_FLAT) algos[nalgos++] = (shoal_algo_t)a;
  algos[nalgos++] = SHOAL_ALGO_AUTO;
}

/* The big (3 MiB) cases run for these pairs, or for all with SHOAL_TEST_FULL=1. */
static int big_pair(const group_t *g, shoal_dtype_t dt, shoal_redop_t op) {
  if (g->full) return 1;
  return (dt == SHOAL_FLOAT32 && op == SHOAL_SUM) || (dt == SHOAL_FLOAT16 && op == SHOAL_AVG) ||
         (dt == SHOAL_INT64 && op == SHOAL_MIN) || (dt == SHOAL_BFLOAT16 && op == SHOAL_PROD);
}

static int matrix(shoal_comm_t *c, const group_t *g) {
  int fails = 0, n = g->n;
  const size_t small[] = {0, 1, PRIME};
  list_algos();
  for (int a = 0; a < nalgos; a++)
    for (int di = 0; di < NRED; di++)
      for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
        if (shoal_redop_supported(red_dtypes[di], op)) continue; /* bitwise on floating point */
        /* the small integer types share every algorithm's code path with int32: one algorithm and auto */
        if (di >= 6 && a > 0 && algos[a] != SHOAL_ALGO_AUTO) continue;
        for (int k = 0; k < 3; k++)
          for (int mode = 0; mode < 3; mode++)
            if (algos[a] != SHOAL_ALGO_AUTO || mode == 0) fails += t_allreduce(c, algos[a], red_dtypes[di], op, small[k], mode);
        if (algos[a] != SHOAL_ALGO_AUTO && big_pair(g, red_dtypes[di], op))
          for (int mode = 0; mode < 2; mode++)
            fails += t_allreduce(c, algos[a], red_dtypes[di], op, BIG_BYTES / shoal_dtype_size(red_dtypes[di]), mode);
      }
  for (int a = 0; a < nalgos - 1; a++) {
    fails += t_identical(c, algos[a], SHOAL_FLOAT32, SHOAL_SUM, PRIME);
    fails += t_identical(c, algos[a], SHOAL_FLOAT32, SHOAL_MIN, PRIME);
    fails += t_identical(c, algos[a], SHOAL_FLOAT64, SHOAL_PROD, PRIME);
    fails += t_identical(c, algos[a], SHOAL_BFLOAT16, SHOAL_AVG, PRIME);
    fails += t_identical(c, algos[a], SHOAL_FLOAT16, SHOAL_SUM, BIG_BYTES / 2);
  }
  /* many small chunks: uneven chunking, the receive window, the allgather hazard wait */
  setenv("SHOAL_CHUNK_BYTES", "64", 1);
  for (int mode = 0; mode < 2; mode++) {
    fails += t_allreduce(c, SHOAL_ALGO_RING, SHOAL_FLOAT32, SHOAL_SUM, PRIME, mode);
    fails += t_allreduce(c, SHOAL_ALGO_RING, SHOAL_FLOAT16, SHOAL_AVG, PRIME * 3, mode);
    fails += t_allreduce(c, SHOAL_ALGO_RHD, SHOAL_FLOAT32, SHOAL_SUM, PRIME, mode);
    fails += t_allreduce(c, SHOAL_ALGO_RHD, SHOAL_INT64, SHOAL_MIN, PRIME * 3, mode);
    fails += t_allreduce(c, SHOAL_ALGO_TREES, SHOAL_BFLOAT16, SHOAL_SUM, PRIME * 3, mode);
    fails += t_reduce_scatter(c, SHOAL_INT32, SHOAL_MAX, PRIME, mode);
    fails += t_allgather(c, SHOAL_FLOAT64, PRIME, mode);
  }
  unsetenv("SHOAL_CHUNK_BYTES");
  int roots[2] = {0, n - 1};
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++)
    for (int k = 0; k < 3; k++)
      for (int ri = 0; ri < (n > 1 ? 2 : 1); ri++) fails += t_broadcast(c, (shoal_dtype_t)d, small[k], roots[ri]);
  for (int ri = 0; ri < (n > 1 ? 2 : 1); ri++) {
    fails += t_broadcast(c, SHOAL_FLOAT32, BIG_BYTES / 4, roots[ri]);
    fails += t_broadcast(c, SHOAL_UINT8, BIG_BYTES + 7, roots[ri]);
  }
  for (int di = 0; di < NRED; di++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
      shoal_dtype_t dt = red_dtypes[di];
      if (shoal_redop_supported(dt, op)) continue;
      for (int k = 0; k < 3; k++) {
        for (int ri = 0; ri < (n > 1 ? 2 : 1); ri++) fails += t_reduce(c, dt, op, small[k], roots[ri], (di + op + ri) % 2);
        for (int mode = 0; mode < 2; mode++) fails += t_reduce_scatter(c, dt, op, small[k], mode);
      }
      if (big_pair(g, dt, op))
        for (int mode = 0; mode < 2; mode++) {
          fails += t_reduce(c, dt, op, BIG_BYTES / shoal_dtype_size(dt), roots[mode % (n > 1 ? 2 : 1)], mode);
          fails += t_reduce_scatter(c, dt, op, BIG_BYTES / shoal_dtype_size(dt) / (size_t)n + 1, mode);
        }
    }
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++)
    for (int mode = 0; mode < 2; mode++) {
      for (int k = 0; k < 3; k++) fails += t_allgather(c, (shoal_dtype_t)d, small[k], mode);
      if (d == SHOAL_FLOAT32 || d == SHOAL_UINT8 || g->full)
        fails += t_allgather(c, (shoal_dtype_t)d, BIG_BYTES / shoal_dtype_size(d) / (size_t)n + 3, mode);
    }
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++)
    for (int k = 0; k < 3; k++)
      for (int ri = 0; ri < (n > 1 ? 2 : 1); ri++) fails += t_gather_scatter(c, (shoal_dtype_t)d, small[k], roots[ri], (d + k) % 2);
  fails += t_gather_scatter(c, SHOAL_FLOAT32, BIG_BYTES / 4 / (size_t)n + 1, roots[n > 1], 0);
  for (int d = 0; d < SHOAL_DTYPE__COUNT; d++) {
    fails += t_alltoall(c, (shoal_dtype_t)d, d % 2 ? 4 : 1, 0);
    fails += t_alltoall(c, (shoal_dtype_t)d, 0, 1);
  }
  fails += t_alltoall(c, SHOAL_UINT8, 0, 0);
  fails += t_alltoall(c, SHOAL_FLOAT32, BIG_BYTES / 4 / (size_t)n + 1, 0);
  for (int round = 0; round < 3; round++) fails += t_barrier(c, g->dir, round);
  return fails;
}

static int join(const group_t *g, int rank, shoal_comm_t **c) {
  shoal_comm_params_t pp;
  shoal_comm_params_init(&pp);
  pp.rank = rank;
  pp.world_size = g->n;
  pp.master_addr = "127.0.0.1";
  pp.master_port = g->port;
  pp.timeout_s = 60;
  pp.connect_timeout_s = 30;
  int rc = shoal_comm_init(&pp, c);
  if (rc) fprintf(stderr, "rank %d: shoal_comm_init: %s\n", rank, shoal_last_error());
  return rc;
}

static int matrix_rank(int rank, void *arg) {
  const group_t *g = arg;
  g_rank = rank;
  shoal_comm_t *c;
  if (join(g, rank, &c)) return 2;
  int fails = matrix(c, g);
  shoal_comm_destroy(c);
  if (fails) fprintf(stderr, "rank %d: %d failures\n", rank, fails);
  return fails ? 1 : 0;
}

static void run_world(int n) {
  group_t g = {.n = n, .port = shoal_test_free_port()};
  const char *full = getenv("SHOAL_TEST_FULL");
  g.full = full && !strcmp(full, "1");
  /* this test is about TCP: keep same-host ranks off the shared-memory path */
  setenv("SHOAL_SHM", "0", 1);
  snprintf(g.dir, sizeof g.dir, "/tmp/shoal-coll-XXXXXX");
  CHECK(mkdtemp(g.dir) != NULL);
  int st[8];
  int ok = shoal_test_fork_ranks(n, matrix_rank, &g, g.full ? 2900 : 200, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g.dir);
  if (system(cmd)) { /* best effort */
  }
  for (int r = 0; r < n; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "world %d: rank %d %s (status 0x%x)", n, r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
  CHECK_EQ(ok, n);
}

#ifndef SHOAL_COLL_MATRIX_ONLY /* test_shm_coll.c includes this file for the matrix and its references */
TEST(coll_world_1) { run_world(1); }
TEST(coll_world_2) { run_world(2); }
TEST(coll_world_3) { run_world(3); }
TEST(coll_world_4) { run_world(4); }
TEST(coll_world_5) { run_world(5); }
TEST(coll_world_6) { run_world(6); }
TEST(coll_world_7) { run_world(7); }
TEST(coll_world_8) { run_world(8); }
#endif
