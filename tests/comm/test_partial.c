/* Partial allreduce with relays (shoal/partial.h) and its data plane, the
 * relay trees (coll/relay.c, the "relay" allreduce row):
 * - the relay flags of every active set of small trees against a brute-force
 *   definition (pure, exhaustive);
 * - the relay row and the partial allreduce on odd counts and every
 *   reducible dtype and op: bit-identical on every rank and equal to the
 *   serial reference over the ranks that are in;
 * - every subset of 5 ranks as the active set (the others skip): an average
 *   (the chooser's algorithm) and a max (the relay trees: chains and binary
 *   trees);
 * - steps with a rank out and carried data, under every allreduce algorithm:
 *   equal to the definition, the same bits on every rank and run after run;
 * - a late rank relays and receives the result (the coordinator and a
 *   tree root included); drop counts it, carry adds it to the next step,
 *   carry-wait loses nothing; excuse_late does not wait for a rank still busy with an earlier step, nor
 *   for one whose late data came more than a window after the last step closed;
 * - withdraw/cancel; errors named; two threads per rank under random delays
 *   keep every rank's bits equal and lose nothing with carry-wait.
 * Nothing here depends on timing: a "late" rank arrives only after its own
 * call returned, and windows close on counts (min_ready, tau 0) or when
 * every rank reported. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/coll/redop.h"
#include "comm/coll/relay.h"
#include "shoal/partial.h"
#include "comm/coll/exact.h"
#include "test_p2p_util.h"

#define FAILR(...)                                   \
  do {                                               \
    fprintf(stderr, "rank %d: ", g_rank);            \
    fprintf(stderr, __VA_ARGS__);                    \
    fprintf(stderr, "\n");                           \
    return 1;                                        \
  } while (0)

static int g_rank;

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Every rank holds the same bytes: allgather of a hash. */
static int same_everywhere(shoal_comm_t *c, const void *buf, size_t bytes) {
  int n = shoal_comm_size(c);
  int64_t *h = calloc((size_t)n, sizeof *h);
  h[shoal_comm_rank(c)] = (int64_t)fnv(buf, bytes);
  int rc = shoal_allgather(c, SHOAL_IN_PLACE, h, 1, SHOAL_INT64);
  int ok = rc == 0;
  for (int r = 1; ok && r < n; r++) ok = h[r] == h[0];
  free(h);
  return ok;
}

static const shoal_dtype_t red_dtypes[] = {SHOAL_FLOAT32, SHOAL_FLOAT64, SHOAL_INT32,
                                           SHOAL_INT64,   SHOAL_BFLOAT16, SHOAL_FLOAT16};
#define NDT ((int)(sizeof red_dtypes / sizeof red_dtypes[0]))

/* ---- pure: the relay flags of every active set ---- */

/* Brute force: rank a is an ancestor-or-self of b in tree m. */
static int is_ancestor(const shoal__relay_shape_t *s, int m, int a, int b) {
  for (int x = b; x >= 0; x = shoal__relay_parent(s, m, x))
    if (x == a) return 1;
  return 0;
}

TEST(relay_flags_every_active_set) {
  const shoal__relay_shape_t shapes[] = {{5, 5, 1}, {5, 1, 2}, {6, 2, 2}, {7, 1, 2}, {7, 7, 1}, {7, 3, 3}, {6, 6, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shoal__relay_shape_t *s = &shapes[si];
    int p = s->p;
    for (int m = 0; m < s->ntrees; m++) {
      /* a spanning tree: every rank but the root has a parent that lists it */
      int roots = 0;
      for (int r = 0; r < p; r++) {
        int par = shoal__relay_parent(s, m, r);
        if (par < 0) {
          roots++;
          CHECK_EQ(r, shoal__relay_rank(s, m, 0));
          continue;
        }
        int ch[SHOAL__RELAY_MAX_FANOUT], nc = shoal__relay_children(s, m, par, ch), found = 0;
        CHECK(nc <= s->fanout);
        for (int i = 0; i < nc; i++) found |= ch[i] == r;
        CHECK_MSG(found, "shape %zu tree %d: rank %d not a child of its parent %d", si, m, r, par);
        CHECK(is_ancestor(s, m, shoal__relay_rank(s, m, 0), r));
      }
      CHECK_EQ(roots, 1);
      /* the broadcast tree: spanning, the same root, every rank reached from it */
      for (int r = 0; r < p; r++) {
        int par = shoal__relay_bcast_parent(s, m, r), hops = 0;
        if (par < 0) CHECK_EQ(r, shoal__relay_rank(s, m, 0));
        for (int x = r; x >= 0 && hops <= p; x = shoal__relay_bcast_parent(s, m, x)) hops++;
        CHECK_MSG(hops <= p, "shape %zu tree %d: rank %d not reached from the root", si, m, r);
        if (par >= 0) {
          int ch[SHOAL__RELAY_MAX_FANOUT], nc = shoal__relay_bcast_children(s, m, par, ch), found = 0;
          for (int i = 0; i < nc; i++) found |= ch[i] == r;
          CHECK(found);
        }
      }
      /* chains: the reduction flows to the next rank, and so does the broadcast (one outgoing link) */
      if (s->fanout == 1)
        for (int r = 0; r < p; r++) {
          int a = shoal__relay_parent(s, m, r), b = shoal__relay_bcast_children(s, m, r, (int[8]){0});
          if (a >= 0) CHECK_EQ(a, (r + 1) % p);
          (void)b;
        }
      for (unsigned set = 0; set < 1u << p; set++) {
        unsigned char has[8];
        for (int r = 0; r < p; r++) has[r] = (unsigned char)(set >> r & 1);
        for (int r = 0; r < p; r++) {
          shoal__relay_flags_t f;
          CHECK_OK(shoal__relay_flags(s, m, has, r, &f));
          int below = 0;
          for (int b = 0; b < p; b++) below |= has[b] && is_ancestor(s, m, r, b);
          CHECK_EQ(f.has_local, has[r]);
          CHECK_EQ(f.active_below, below);
          int ch[SHOAL__RELAY_MAX_FANOUT], nc = shoal__relay_children(s, m, r, ch), nrecv = 0;
          for (int i = 0; i < nc; i++) {
            int cb = 0;
            for (int b = 0; b < p; b++) cb |= has[b] && is_ancestor(s, m, ch[i], b);
            if (cb) {
              CHECK_MSG(nrecv < f.nrecv && f.recv_from[nrecv] == ch[i],
                        "shape %zu tree %d set %#x rank %d: child %d should be received from", si, m, set, r, ch[i]);
              nrecv++;
            }
          }
          CHECK_EQ(f.nrecv, nrecv);
          CHECK_EQ(f.has_kernel, nrecv + has[r] >= 2);
          CHECK_EQ(f.has_send, below && shoal__relay_parent(s, m, r) >= 0);
          /* a relay with one input forwards it: exactly one of kernel / single input / nothing */
          if (!below) CHECK(!f.has_send && !f.has_kernel && f.nrecv == 0);
        }
      }
    }
  }
}

TEST(relay_shapes_and_cost) {
  shoal__coll_ctx_t x;
  CHECK_OK(shoal__coll_ctx_model(8, &x));
  shoal__relay_shape_t s;
  size_t chunk;
  CHECK_OK(shoal__relay_pick(&x, 64u << 20, 0, 0, &s, &chunk));
  CHECK_EQ(s.ntrees, 8); /* big vectors: rotated chains, a ring's volume */
  CHECK_EQ(s.fanout, 1);
  CHECK(chunk >= 16384 && chunk <= 1048576);
  shoal__relay_shape_t chains = {8, 8, 1}, tree = {8, 1, 2};
  CHECK_EQ(shoal__relay_depth(&chains), 7);
  CHECK_EQ(shoal__relay_depth(&tree), 3);
  CHECK(shoal__relay_cost(&x, 64u << 20, &chains, NULL) < shoal__relay_cost(&x, 64u << 20, &tree, NULL));
  CHECK(shoal__relay_cost(&x, 8, &tree, NULL) < shoal__relay_cost(&x, 8, &chains, NULL));
  CHECK_EQ(shoal__relay_pick(&x, 1024, 9, 0, &s, &chunk), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "9 trees on 8 ranks");
  CHECK_EQ(shoal__relay_pick(&x, 1024, 0, 9, &s, &chunk), SHOAL_ERR_INVALID);
}

/* ---- the relay row: every dtype and op, odd counts ---- */

static int rank_relay_row(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  shoal_algo_t relay;
  if (shoal_algo_parse("relay", &relay)) FAILR("relay is not in the table: %s", shoal_last_error());
  const size_t counts[] = {0, 1, 1009, 70001};
  const shoal_redop_t ops[] = {SHOAL_SUM, SHOAL_AVG, SHOAL_MIN, SHOAL_MAX, SHOAL_PROD};
  int all[16];
  for (int r = 0; r < 16; r++) all[r] = 1;
  for (int d = 0; d < NDT; d++)
    for (int o = 0; o < 5; o++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        if (counts[k] > 2000 && o != 0 && o != 1 && d != 0) continue; /* big: sum/avg of all, float32 every op */
        shoal_dtype_t dt = red_dtypes[d];
        size_t n = counts[k], es = shoal_dtype_size(dt);
        char *buf = malloc(n * es + 1), *want = malloc(n * es + 1);
        int salt = (int)(k * 5 + (size_t)o);
        for (size_t i = 0; i < n; i++) {
          shoal__exact_put(buf, i, dt, shoal__exact_val(rank, i, ops[o], salt));
          shoal__exact_expect(want, i, dt, ops[o], a->n, all, i, salt);
        }
        int rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, n, dt, ops[o], relay);
        if (rc) FAILR("relay %s %s n=%zu: %s", shoal_dtype_name(dt), shoal_redop_name(ops[o]), n, shoal_last_error());
        if (memcmp(buf, want, n * es))
          FAILR("relay %s %s n=%zu: result differs from the reference", shoal_dtype_name(dt),
                shoal_redop_name(ops[o]), n);
        if (!same_everywhere(c, buf, n * es)) FAILR("relay %s %s n=%zu: ranks differ", shoal_dtype_name(dt),
                                                    shoal_redop_name(ops[o]), n);
        free(buf);
        free(want);
      }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(relay_row_every_dtype_op_odd_counts, 120) {
  p2p_world_arg_t a = {.shm = 0};
  for (int n = 1; n <= 7; n += 2) P2P_RUN(n, rank_relay_row, &a, 100);
  a.shm = 1;
  P2P_RUN(4, rank_relay_row, &a, 100);
}

/* ---- the partial allreduce on every subset ---- */

/* One step: ranks with in[rank] arrive with data, the others with none. */
static int subset_step(shoal_comm_t *c, shoal_partial_t *pa, long step, shoal_dtype_t dt, shoal_redop_t op,
                       size_t n, const int *in, int salt, const char *what) {
  int rank = shoal_comm_rank(c), p = shoal_comm_size(c);
  size_t es = shoal_dtype_size(dt);
  char *data = malloc(n * es + 1), *out = malloc(n * es + 1), *want = malloc(n * es + 1);
  for (size_t i = 0; i < n; i++) {
    shoal__exact_put(data, i, dt, shoal__exact_val(rank, i, op, salt));
    shoal__exact_expect(want, i, dt, op, p, in, i, salt);
  }
  memset(out, 0x5a, n * es);
  if (shoal_partial_arrive(pa, step, in[rank] ? data : NULL, 0)) FAILR("%s: arrive: %s", what, shoal_last_error());
  shoal_partial_info_t info;
  int rc = shoal_partial_allreduce(pa, step, out, &info);
  if (rc) FAILR("%s step %ld: %d: %s", what, step, rc, shoal_last_error());
  int cnt = 0;
  for (int r = 0; r < p; r++) {
    cnt += in[r];
    if ((info.ranks[r] & 1) != in[r]) FAILR("%s step %ld: coverage of rank %d is %d", what, step, r, info.ranks[r]);
  }
  if (info.contributions != cnt || info.fresh != cnt || info.carried != 0 || info.mine != in[rank])
    FAILR("%s step %ld: info %d contributions, %d fresh, %d carried, mine %d; expected %d", what, step,
          info.contributions, info.fresh, info.carried, info.mine, cnt);
  if (memcmp(out, want, n * es)) FAILR("%s step %ld: result differs from the reference", what, step);
  if (!same_everywhere(c, out, n * es)) FAILR("%s step %ld: ranks differ", what, step);
  free(data);
  free(out);
  free(want);
  return 0;
}

static shoal_partial_t *make_pa(shoal_comm_t *c, size_t n, shoal_dtype_t dt, shoal_redop_t op, int trees, int fanout,
                                shoal_partial_carry_t carry, int min_ready, double tau) {
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  prm.window = SHOAL_PARTIAL_FIXED;
  prm.tau_s = tau;
  prm.min_ready = min_ready;
  prm.carry = carry;
  prm.ntrees = trees;
  prm.fanout = fanout;
  shoal_partial_t *pa = NULL;
  if (shoal_partial_create(c, n, dt, op, &prm, &pa)) fprintf(stderr, "rank %d: create: %s\n", g_rank, shoal_last_error());
  return pa;
}

static int rank_subsets(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int p = a->n;
  const int shapes[][2] = {{0, 1}, {1, 2}, {2, 2}}; /* chains, one binary tree, two binary trees */
  /* avg: the chooser's algorithm, the ranks out adding SUM's identity; max: the relay trees of each shape */
  const shoal_redop_t ops[] = {SHOAL_AVG, SHOAL_MAX};
  for (int sh = 0; sh < 3; sh++)
    for (int o = 0; o < 2; o++) {
      size_t n = 1009;
      shoal_partial_t *pa = make_pa(c, n, SHOAL_FLOAT32, ops[o], shapes[sh][0] ? shapes[sh][0] : p, shapes[sh][1],
                                    SHOAL_PARTIAL_DROP, 1, 1e6);
      if (!pa) return 1;
      for (unsigned set = 0; set < 1u << p; set++) {
        int in[8];
        for (int r = 0; r < p; r++) in[r] = set >> r & 1;
        char what[64];
        snprintf(what, sizeof what, "shape %d %s subset %#x", sh, shoal_redop_name(ops[o]), set);
        if (subset_step(c, pa, (long)set, SHOAL_FLOAT32, ops[o], n, in, (int)set, what)) return 1;
      }
      shoal_partial_destroy(pa);
    }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_every_subset_of_5_ranks, 120) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(5, rank_subsets, &a, 100);
}

static int rank_dtypes(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int p = a->n, in[8] = {0};
  for (int r = 0; r < p; r++) in[r] = r != 1; /* rank 1 has nothing: it only relays */
  const shoal_redop_t ops[] = {SHOAL_SUM, SHOAL_AVG, SHOAL_MIN, SHOAL_MAX, SHOAL_PROD};
  const size_t counts[] = {1, 1009, 70001};
  for (int d = 0; d < NDT; d++)
    for (int o = 0; o < 5; o++)
      for (size_t k = 0; k < 3; k++) {
        if (k == 2 && d != 0 && o > 1) continue;
        shoal_partial_t *pa = make_pa(c, counts[k], red_dtypes[d], ops[o], 0, 0, SHOAL_PARTIAL_DROP, 1, 1e6);
        if (!pa) return 1;
        char what[96];
        snprintf(what, sizeof what, "%s %s n=%zu", shoal_dtype_name(red_dtypes[d]), shoal_redop_name(ops[o]),
                 counts[k]);
        if (subset_step(c, pa, 0, red_dtypes[d], ops[o], counts[k], in, (int)k + o, what)) return 1;
        shoal_partial_destroy(pa);
      }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_every_dtype_op_odd_counts, 120) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_dtypes, &a, 100);
  a.shm = 1;
  P2P_RUN(4, rank_dtypes, &a, 100);
}

/* ---- a late rank relays and receives; drop / carry / carry-wait ---- */

/* Float32 data of `rank` at `step`: small integers. */
static void fill(float *d, size_t n, int rank, long step) {
  for (size_t i = 0; i < n; i++) d[i] = (float)((int)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) - 8);
}

static int rank_late(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int p = a->n;
  size_t n = 4099;
  float *d = malloc(n * sizeof *d), *out = malloc(n * sizeof *out), *want = malloc(n * sizeof *want);
  for (int shape = 0; shape < 2; shape++) {
    /* min_ready p - 1, tau 0: the window closes on the p - 1 ranks that arrive before calling */
    shoal_partial_t *pa = make_pa(c, n, SHOAL_FLOAT32, SHOAL_SUM, shape ? 1 : p, shape ? 2 : 1, SHOAL_PARTIAL_DROP,
                                  p - 1, 0);
    if (!pa) return 1;
    for (long step = 0; step < p; step++) {
      int late = (int)step; /* every rank once, the coordinator and every tree root included */
      fill(d, n, rank, step);
      if (rank != late && shoal_partial_arrive(pa, step, d, 0)) FAILR("arrive: %s", shoal_last_error());
      shoal_partial_info_t info;
      if (shoal_partial_allreduce(pa, step, out, &info)) FAILR("step %ld: %s", step, shoal_last_error());
      if (rank == late) {
        if (info.mine) FAILR("step %ld: the late rank is in", step);
        if (shoal_partial_state(pa, step) != SHOAL_PARTIAL_DONE) FAILR("step %ld: state not done", step);
        if (shoal_partial_arrive(pa, step, d, 0)) FAILR("late arrive: %s", shoal_last_error());
      }
      for (size_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int r = 0; r < p; r++)
          if (r != late) want[i] += (float)((int)((i * 7 + (size_t)r * 13 + (size_t)step * 5) % 17) - 8);
      }
      if (memcmp(out, want, n * sizeof *out)) FAILR("step %ld (late %d): result differs from the others' sum", step, late);
      if (info.contributions != p - 1 || (info.ranks[late] & 1)) FAILR("step %ld: coverage", step);
      if (!same_everywhere(c, out, n * sizeof *out)) FAILR("step %ld: ranks differ", step);
    }
    /* a last step where every rank has nothing: zeros, and each rank's one late data set was dropped */
    shoal_partial_info_t info;
    if (shoal_partial_arrive(pa, p, NULL, 0)) FAILR("arrive: %s", shoal_last_error());
    if (shoal_partial_allreduce(pa, p, out, &info)) FAILR("last step: %s", shoal_last_error());
    for (size_t i = 0; i < n; i++)
      if (out[i] != 0) FAILR("no contribution: element %zu is %g", i, out[i]);
    if (info.dropped != 1 || info.contributions != 0) FAILR("dropped %d, expected 1", info.dropped);
    shoal_partial_destroy(pa);
  }
  free(d);
  free(out);
  free(want);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_late_rank_relays_and_receives, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(4, rank_late, &a, 50);
  P2P_RUN(5, rank_late, &a, 50);
  a.shm = 1;
  P2P_RUN(3, rank_late, &a, 50);
}

/* carry: rank 2 is late at step 0; at step 1 the others have nothing and
 * rank 2 arrives, so the window waits for its report, which follows its
 * CARRY: step 1 holds rank 2's data of both steps. Third mode: an average with
 * carried data weighted 0.5, (fresh + 0.5 carried) / 1.5. */
static int rank_carry(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t n = 3001;
  float *d0 = malloc(n * sizeof(float)), *d1 = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  for (int mode = 0; mode < 3; mode++) {
    shoal_partial_carry_t carry = mode ? SHOAL_PARTIAL_CARRY_WAIT : SHOAL_PARTIAL_CARRY;
    shoal_redop_t op = mode == 2 ? SHOAL_AVG : SHOAL_SUM;
    shoal_partial_params_t prm;
    shoal_partial_params_init(&prm);
    prm.window = SHOAL_PARTIAL_FIXED;
    prm.min_ready = a->n - 1;
    prm.carry = carry;
    prm.carry_weight = mode == 2 ? 0.5 : 0;
    shoal_partial_t *pa = NULL;
    if (shoal_partial_create(c, n, SHOAL_FLOAT32, op, &prm, &pa)) FAILR("create: %s", shoal_last_error());
    fill(d0, n, rank, 0);
    fill(d1, n, rank, 1);
    shoal_partial_info_t info;
    if (rank != 2 && shoal_partial_arrive(pa, 0, d0, 0)) FAILR("arrive: %s", shoal_last_error());
    if (shoal_partial_allreduce(pa, 0, out, &info)) FAILR("step 0: %s", shoal_last_error());
    if (info.contributions != a->n - 1 || (info.ranks[2] & 3)) FAILR("step 0: %d contributions", info.contributions);
    if (rank == 2 && shoal_partial_arrive(pa, 0, d0, 0)) FAILR("late arrive: %s", shoal_last_error());
    if (shoal_partial_arrive(pa, 1, rank == 2 ? d1 : NULL, 0)) FAILR("arrive 1: %s", shoal_last_error());
    if (shoal_partial_allreduce(pa, 1, out, &info)) FAILR("step 1: %s", shoal_last_error());
    if (info.contributions != 2 || info.fresh != 1 || info.carried != 1 || info.ranks[2] != 3)
      FAILR("carry %d step 1: %d contributions (%d fresh, %d carried), rank 2 flags %d", (int)carry,
            info.contributions, info.fresh, info.carried, info.ranks[2]);
    for (size_t i = 0; i < n; i++) {
      float fresh = (float)((int)((i * 7 + 26 + 5) % 17) - 8), carried = (float)((int)((i * 7 + 26 + 0) % 17) - 8);
      float want = mode == 2 ? (fresh + carried * 0.5f) / 1.5f : carried + fresh;
      if (out[i] != want) FAILR("carry %d step 1 element %zu: %g, expected %g", (int)carry, i, out[i], want);
    }
    if (info.dropped) FAILR("carry %d: %d dropped", (int)carry, info.dropped);
    if (!same_everywhere(c, out, n * sizeof(float))) FAILR("step 1: ranks differ");
    shoal_partial_destroy(pa);
  }
  free(d0);
  free(d1);
  free(out);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_carry_adds_late_data_to_next_step, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_carry, &a, 50);
  P2P_RUN(4, rank_carry, &a, 50);
}

/* excuse_late (4 ranks, min_ready 3, tau 0): rank 3 is late in step 0 and still busy with it in step 1
 * (it has arrived nothing), where rank 2 is late too. Step 1 closes on ranks 0 and 1 alone: rank 3 was
 * late before and has reported nothing, so min_ready drops to 2. Without the excuse step 1 waits for a
 * third ready rank, which comes only after the call returns: it times out. */
static int rank_excuse(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t n = 1001;
  float *d0 = malloc(n * sizeof(float)), *d1 = malloc(n * sizeof(float)), *d2 = malloc(n * sizeof(float)),
        *out = malloc(n * sizeof(float));
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  prm.window = SHOAL_PARTIAL_FIXED;
  prm.min_ready = 3;
  prm.carry = SHOAL_PARTIAL_CARRY;
  prm.excuse_late = 1;
  shoal_partial_t *pa = NULL;
  if (shoal_partial_create(c, n, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa)) FAILR("create: %s", shoal_last_error());
  fill(d0, n, rank, 0);
  fill(d1, n, rank, 1);
  fill(d2, n, rank, 2);
  shoal_partial_info_t info;
  if (rank != 3 && shoal_partial_arrive(pa, 0, d0, 0)) FAILR("arrive 0: %s", shoal_last_error());
  if (shoal_partial_allreduce(pa, 0, out, &info)) FAILR("step 0: %s", shoal_last_error());
  if (info.fresh != 3 || (info.ranks[3] & 1)) FAILR("step 0: %d fresh, rank 3 flags %d", info.fresh, info.ranks[3]);
  if (rank < 2 && shoal_partial_arrive(pa, 1, d1, 0)) FAILR("arrive 1: %s", shoal_last_error());
  if (shoal_partial_allreduce(pa, 1, out, &info)) FAILR("step 1: %s", shoal_last_error());
  if (info.fresh != 2 || info.carried != 0 || info.ranks[0] != 1 || info.ranks[1] != 1 || info.ranks[2] || info.ranks[3])
    FAILR("step 1: %d fresh, %d carried, flags %d %d %d %d (expected ranks 0 and 1 alone)", info.fresh, info.carried,
          info.ranks[0], info.ranks[1], info.ranks[2], info.ranks[3]);
  for (size_t i = 0; i < n; i++) {
    float want = (float)((int)((i * 7 + 0 + 5) % 17) - 8) + (float)((int)((i * 7 + 13 + 5) % 17) - 8);
    if (out[i] != want) FAILR("step 1 element %zu: %g, expected %g", i, out[i], want);
  }
  /* the late ones catch up; step 2 with everyone: the same bits on every rank */
  if (rank == 3 && shoal_partial_arrive(pa, 0, d0, 0)) FAILR("late arrive 0: %s", shoal_last_error());
  if (rank >= 2 && shoal_partial_arrive(pa, 1, d1, 0)) FAILR("late arrive 1: %s", shoal_last_error());
  if (shoal_partial_arrive(pa, 2, d2, 0)) FAILR("arrive 2: %s", shoal_last_error());
  if (shoal_partial_allreduce(pa, 2, out, &info)) FAILR("step 2: %s", shoal_last_error());
  if (info.fresh < 3) FAILR("step 2: %d fresh (min_ready 3, nobody out)", info.fresh);
  if (!same_everywhere(c, out, n * sizeof(float))) FAILR("step 2: ranks differ");
  shoal_partial_destroy(pa);
  free(d0);
  free(d1);
  free(d2);
  free(out);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_excuse_late_does_not_wait_for_a_rank_still_out, 60) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 10};
  P2P_RUN(4, rank_excuse, &a, 50);
}

/* excuse_late, a rank far behind (4 ranks, min_ready 3, a fixed window of tau = 2 s): rank 3 misses step 0
 * (the window closes on ranks 0-2 after tau) and has still sent nothing when ranks 0-2 arrive in step 1,
 * more than a window after step 0 closed. Step 1 closes as soon as ranks 0-2 are ready: waiting the
 * window for rank 3 could not bring it in (without the rule the coordinator waits the whole tau: window_s
 * >= 2 s). The sleep only orders events (ranks 0-2 arrive more than tau after step 0 closed); nothing is
 * timed but the window the coordinator reports, which the rule makes end at the third ready rank. */
static int rank_far_behind(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t n = 1001;
  const double tau = 2.0;
  float *d0 = malloc(n * sizeof(float)), *d1 = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  prm.window = SHOAL_PARTIAL_FIXED;
  prm.tau_s = tau;
  prm.min_ready = 3;
  prm.carry = SHOAL_PARTIAL_CARRY;
  prm.excuse_late = 1;
  shoal_partial_t *pa = NULL;
  if (shoal_partial_create(c, n, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa)) FAILR("create: %s", shoal_last_error());
  fill(d0, n, rank, 0);
  fill(d1, n, rank, 1);
  shoal_partial_info_t info;
  if (rank != 3 && shoal_partial_arrive(pa, 0, d0, 0)) FAILR("arrive 0: %s", shoal_last_error());
  if (shoal_partial_allreduce(pa, 0, out, &info)) FAILR("step 0: %s", shoal_last_error());
  if (info.fresh != 3 || (info.ranks[3] & 1)) FAILR("step 0: %d fresh, rank 3 flags %d", info.fresh, info.ranks[3]);
  if (rank != 3) {
    struct timespec ts = {2, 300000000}; /* more than tau after step 0 closed (before this call returned) */
    nanosleep(&ts, NULL);
    if (shoal_partial_arrive(pa, 1, d1, 0)) FAILR("arrive 1: %s", shoal_last_error());
  }
  if (shoal_partial_allreduce(pa, 1, out, &info)) FAILR("step 1: %s", shoal_last_error());
  if (info.fresh != 3 || (info.ranks[3] & 1)) FAILR("step 1: %d fresh, rank 3 flags %d", info.fresh, info.ranks[3]);
  if (!(info.window_s < tau))
    FAILR("step 1: the window waited %.3f s for rank 3, which was more than a window behind", info.window_s);
  /* rank 3 catches up; step 2 with everyone: the same bits on every rank */
  float *d2 = malloc(n * sizeof(float));
  fill(d2, n, rank, 2);
  if (rank == 3 && (shoal_partial_arrive(pa, 0, d0, 0) || shoal_partial_arrive(pa, 1, d1, 0)))
    FAILR("late arrivals: %s", shoal_last_error());
  if (shoal_partial_arrive(pa, 2, d2, 0)) FAILR("arrive 2: %s", shoal_last_error());
  if (shoal_partial_allreduce(pa, 2, out, &info)) FAILR("step 2: %s", shoal_last_error());
  if (info.fresh < 3) FAILR("step 2: %d fresh (min_ready 3)", info.fresh);
  if (!same_everywhere(c, out, n * sizeof(float))) FAILR("step 2: ranks differ");
  shoal_partial_destroy(pa);
  free(d0);
  free(d1);
  free(d2);
  free(out);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_excuse_late_does_not_wait_for_a_rank_far_behind, 60) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 20};
  P2P_RUN(4, rank_far_behind, &a, 50);
}

/* ---- steps with a rank out or carried data: the chooser's algorithm, against the definition ---- */

/* One late rank per step (min_ready p - 1, tau 0: the window closes on the others): rank late[s] arrives
 * only after its call of step s returned, so its data of s is carried into s + 1. A rank late twice in a
 * row is in at the second step with its carry only; only carry-wait makes that deterministic (with carry
 * the decision need not wait for its CARRY report), so plain carry runs the script without repeats. */
static const int carry_script[] = {2, 0, 3, 1, 2, 3, 3, 0, 1, 1, 2};
#define NSCRIPT ((int)(sizeof carry_script / sizeof carry_script[0]))

static int script_late(long s, int repeats) {
  if (repeats || s == 0) return carry_script[s];
  int l = carry_script[s], prev = script_late(s - 1, 0); /* without repeats: the next rank instead */
  return l == prev ? (l + 1) % 4 : l;
}

/* Step s's data of rank r: small integers (exact sums in any order), or any floats (exact = 0). */
static float script_val(int r, long s, size_t i, int exact) {
  if (exact) return (float)((int)((i * 7 + (size_t)r * 13 + (size_t)s * 5) % 17) - 8);
  uint64_t x = (uint64_t)(r + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(s + 1) * 0xC2B2AE3D27D4EB4Full ^ i * 0x165667B1ull;
  x ^= x >> 29;
  return (float)((double)(x % 2000003) / 1000003.0 - 1.0) * 1.7f;
}

/* The script once on pa (4 ranks): every step's result against the definition (exact values) or hashed
 * into hashes[s] (any values); every rank's bits equal; info as the script says. */
static int run_script(shoal_comm_t *c, shoal_partial_t *pa, shoal_redop_t op, size_t n, int repeats, int exact,
                      uint64_t *hashes, const char *what) {
  int rank = shoal_comm_rank(c), p = shoal_comm_size(c);
  float *d[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))}, *out = malloc(n * sizeof(float)),
        *want = malloc(n * sizeof(float));
  int rc = 0;
  for (long s = 0; s < NSCRIPT && !rc; s++) {
    int late = script_late(s, repeats), prev = s ? script_late(s - 1, repeats) : -1;
    float *ds = d[s % 2];
    for (size_t i = 0; i < n; i++) ds[i] = script_val(rank, s, i, exact);
    if (rank != late && shoal_partial_arrive(pa, s, ds, 0)) FAILR("%s step %ld: arrive: %s", what, s, shoal_last_error());
    shoal_partial_info_t info;
    memset(out, 0x5a, n * sizeof(float));
    if (shoal_partial_allreduce(pa, s, out, &info)) FAILR("%s step %ld: %s", what, s, shoal_last_error());
    if (rank == late && shoal_partial_arrive(pa, s, ds, 0)) FAILR("%s step %ld: late arrive: %s", what, s, shoal_last_error());
    /* the definition: the fresh data of every rank but the late one, plus the carry of the previous step's
     * late rank; AVG divides by the number of data sets */
    int nsets = p - 1 + (prev >= 0);
    if (info.fresh != p - 1 || info.carried != (prev >= 0) || info.contributions != nsets || info.mine != (rank != late) ||
        info.dropped)
      FAILR("%s step %ld (late %d, carried %d): info %d fresh, %d carried, %d in all, mine %d, dropped %d", what, s, late,
            prev, info.fresh, info.carried, info.contributions, info.mine, info.dropped);
    for (int r = 0; r < p; r++) {
      int flags = (r != late) | (r == prev ? 2 : 0);
      if (info.ranks[r] != flags) FAILR("%s step %ld: rank %d's flags %d, expected %d", what, s, r, info.ranks[r], flags);
    }
    if (exact) {
      for (size_t i = 0; i < n; i++) {
        float sum = 0;
        for (int r = 0; r < p; r++)
          if (r != late) sum += script_val(r, s, i, 1);
        if (prev >= 0) sum += script_val(prev, s - 1, i, 1);
        want[i] = op == SHOAL_AVG ? sum / (float)nsets : sum;
      }
      for (size_t i = 0; i < n; i++)
        if (memcmp(&out[i], &want[i], sizeof(float)))
          FAILR("%s step %ld (late %d, carried %d) element %zu: %g, expected %g", what, s, late, prev, i, out[i], want[i]);
    } else {
      hashes[s] = fnv(out, n * sizeof(float));
    }
    if (!same_everywhere(c, out, n * sizeof(float))) FAILR("%s step %ld: ranks differ", what, s);
  }
  free(d[0]);
  free(d[1]);
  free(out);
  free(want);
  return rc;
}

static const char *const script_algos[] = {"auto", "ring", "rd", "rhd", "trees", "relay"};

static int rank_carry_algos(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  int nalgo = a->shm ? 1 : (int)(sizeof script_algos / sizeof script_algos[0]);
  for (int k = 0; k < nalgo; k++) {
    setenv("SHOAL_ALGO", script_algos[k], 1); /* read when the world is created; a forked rank's own env */
    shoal_comm_t *c = p2p_join(rank, a);
    if (!c) return 2;
    const size_t counts[] = {4099, 70001};
    for (int ci = 0; ci < 2; ci++)
      for (int mode = 0; mode < 2; mode++)
        for (int o = 0; o < 2; o++) {
          shoal_redop_t op = o ? SHOAL_AVG : SHOAL_SUM;
          shoal_partial_carry_t carry = mode ? SHOAL_PARTIAL_CARRY_WAIT : SHOAL_PARTIAL_CARRY;
          char what[128];
          snprintf(what, sizeof what, "SHOAL_ALGO=%s %s n=%zu carry %d", script_algos[k], shoal_redop_name(op),
                   counts[ci], (int)carry);
          shoal_partial_t *pa = make_pa(c, counts[ci], SHOAL_FLOAT32, op, 0, 0, carry, a->n - 1, 1e-6);
          if (!pa) return 1;
          if (run_script(c, pa, op, counts[ci], mode, 1, NULL, what)) return 1;
          shoal_partial_destroy(pa);
        }
    /* any floats: the same bits on every rank (run_script) and in a second run of the script */
    uint64_t h[2][NSCRIPT];
    for (int run = 0; run < 2; run++) {
      shoal_partial_t *pa = make_pa(c, 70001, SHOAL_FLOAT32, SHOAL_AVG, 0, 0, SHOAL_PARTIAL_CARRY_WAIT, a->n - 1, 1e-6);
      if (!pa) return 1;
      if (run_script(c, pa, SHOAL_AVG, 70001, 1, 0, h[run], script_algos[k])) return 1;
      shoal_partial_destroy(pa);
    }
    for (int s = 0; s < NSCRIPT; s++)
      if (h[0][s] != h[1][s]) FAILR("SHOAL_ALGO=%s step %d: a second run gave other bits", script_algos[k], s);
    shoal_comm_destroy(c);
  }
  return 0;
}

TEST_T(partial_carried_steps_equal_the_definition_every_algorithm, 120) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(4, rank_carry_algos, &a, 100);
  a.shm = 1;
  P2P_RUN(4, rank_carry_algos, &a, 100);
}

/* ---- withdraw: cancelled when every rank withdraws; relays otherwise ---- */

static int rank_withdraw(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int p = a->n;
  size_t n = 777;
  float *d = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  shoal_partial_t *pa = make_pa(c, n, SHOAL_FLOAT32, SHOAL_SUM, 0, 0, SHOAL_PARTIAL_CARRY, 1, 1e6);
  if (!pa) return 1;
  shoal_partial_withdraw(pa, 0);
  int rc = shoal_partial_allreduce(pa, 0, out, NULL);
  if (rc != 1) FAILR("every rank withdrew: %d, expected 1 (cancelled): %s", rc, shoal_last_error());
  if (shoal_partial_state(pa, 0) != SHOAL_PARTIAL_PENDING) FAILR("cancelled step not pending");
  /* between steps the caller owns the communicator again */
  int one = 1;
  if (shoal_allreduce(c, SHOAL_IN_PLACE, &one, 1, SHOAL_INT32, SHOAL_SUM) || one != p) FAILR("allreduce after cancel");
  /* again: now rank 0 withdraws, the others arrive: the step goes on and rank 0 relays */
  fill(d, n, rank, 0);
  if (rank == 0) shoal_partial_withdraw(pa, 0);
  else if (shoal_partial_arrive(pa, 0, d, 0)) FAILR("arrive: %s", shoal_last_error());
  shoal_partial_info_t info;
  if ((rc = shoal_partial_allreduce(pa, 0, out, &info))) FAILR("retry: %d: %s", rc, shoal_last_error());
  if (info.contributions != p - 1 || info.ranks[0]) FAILR("retry: %d contributions", info.contributions);
  if (!same_everywhere(c, out, n * sizeof(float))) FAILR("retry: ranks differ");
  if (rank == 0 && shoal_partial_arrive(pa, 0, NULL, 0)) FAILR("arrive after: %s", shoal_last_error());
  shoal_partial_destroy(pa);
  free(d);
  free(out);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_withdraw_cancels_or_relays, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_withdraw, &a, 50);
}

/* ---- errors ---- */

TEST(partial_invalid_arguments) {
  shoal_comm_t *c = NULL;
  CHECK_OK(shoal_comm_init_env(&c)); /* a world of one */
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  shoal_partial_t *pa = NULL;
  prm.carry = SHOAL_PARTIAL_CARRY;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_MAX, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "carry needs sum or avg");
  shoal_partial_params_init(&prm);
  prm.carry = SHOAL_PARTIAL_CARRY;
  prm.carry_weight = 1.5;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_AVG, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "carry_weight 1.5");
  prm.carry_weight = 0.5;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_INT32, SHOAL_AVG, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "needs a floating dtype");
  shoal_partial_params_init(&prm);
  prm.min_ready = 2;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "min_ready 2 on 1 ranks");
  shoal_partial_params_init(&prm);
  prm.window = (shoal_partial_window_t)7;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT16, SHOAL_BOR, NULL, &pa), SHOAL_ERR_UNSUPPORTED);
  CHECK(pa == NULL);
  /* a huge tau (INFINITY too) waits for every rank, as partial.h says; a negative one is refused */
  shoal_partial_params_init(&prm);
  prm.window = SHOAL_PARTIAL_FIXED;
  prm.tau_s = INFINITY;
  CHECK_OK(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa));
  shoal_partial_destroy(pa);
  pa = NULL;
  prm.tau_s = -1;
  CHECK_EQ(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "tau_s -1 (expected >= 0 seconds)");
  shoal_partial_window_t w;
  CHECK_OK(shoal_partial_window_parse("Faithful", &w));
  CHECK_EQ(w, SHOAL_PARTIAL_FAITHFUL);
  CHECK_EQ(shoal_partial_window_parse("soon", &w), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_partial_window_parse("fixed", NULL), SHOAL_ERR_INVALID); /* not a crash */
  CHECK_OK(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_AVG, NULL, &pa));
  float d[10], out[10];
  for (int i = 0; i < 10; i++) d[i] = (float)i;
  CHECK_OK(shoal_partial_arrive(pa, 3, d, 0));
  CHECK_EQ(shoal_partial_arrive(pa, 5, d, 0), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "expected 4");
  shoal_partial_info_t info;
  CHECK_OK(shoal_partial_allreduce(pa, 3, out, &info)); /* one rank: its own data */
  CHECK(!memcmp(out, d, sizeof d));
  CHECK_EQ(info.contributions, 1);
  CHECK_EQ(shoal_partial_allreduce(pa, 5, out, &info), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "expected 4");
  shoal_partial_destroy(pa);
  shoal_comm_destroy(c);
}

/* A rank that never reports: the coordinator's error names it, within the deadline, and the members
 * fail with that error (they wait past the deadline), whether the coordinator waits for every rank
 * (silent_decides = 0) or decides without the silent one, which then stalls the data (1). */
static int silent_decides;
static int rank_silent(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float d[8] = {0}, out[8];
  shoal_partial_t *pa = silent_decides ? make_pa(c, 8, SHOAL_FLOAT32, SHOAL_SUM, 0, 0, SHOAL_PARTIAL_DROP, 1, 0.01)
                                       : make_pa(c, 8, SHOAL_FLOAT32, SHOAL_SUM, 0, 0, SHOAL_PARTIAL_DROP, a->n, 0);
  if (!pa) return 1;
  if (rank == 2) { /* stuck computing: never reaches the step */
    sleep(3);
    shoal_partial_destroy(pa);
    shoal_comm_destroy(c);
    return 0;
  }
  shoal_partial_arrive(pa, 0, d, 0);
  int rc = shoal_partial_allreduce(pa, 0, out, NULL);
  if (rc == 0) FAILR("a step with a silent rank and min_ready = all succeeded");
  const char *m = shoal_comm_errmsg(c);
  if (rank == 0 && (rc != SHOAL_ERR_TIMEOUT || !strstr(m, "peer 2") || !strstr(m, "partial-allreduce seq") ||
                    !strstr(m, "step 0") || !strstr(m, "rank 2's report")))
    FAILR("coordinator's error: %d %s", rc, m);
  if (rank != 0 && (!strstr(m, "partial-allreduce") || !strstr(m, "rank 2's report")))
    FAILR("member's error does not name the op and the missing rank: %s", m);
  shoal_partial_destroy(pa);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_silent_rank_named_within_deadline, 40) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 1.5};
  P2P_RUN(3, rank_silent, &a, 30);
}

TEST_T(partial_silent_rank_named_after_a_decision_without_it, 40) {
  p2p_world_arg_t a = {.shm = 1, .timeout_s = 1.5};
  silent_decides = 1;
  P2P_RUN(3, rank_silent, &a, 30);
}

/* A rank that dies in a step: the others' errors name the step and the op. */
static int rank_dies(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float d[8] = {0}, out[8];
  shoal_partial_t *pa = make_pa(c, 8, SHOAL_FLOAT32, SHOAL_SUM, 0, 0, SHOAL_PARTIAL_DROP, a->n, 0);
  if (!pa) return 1;
  for (long step = 0; step < 3; step++) {
    /* gone without a goodbye, in the middle of the run. The pause first: a rank that finishes step 1
     * early (ring, recursive doubling) may leave while the others still finish it, and a peer's death
     * fails whatever step a rank is in; this test is about the step that names the death, step 2. */
    if (rank == 2 && step == 2) {
      usleep(300 * 1000);
      _exit(0);
    }
    shoal_partial_arrive(pa, step, d, 0);
    int rc = shoal_partial_allreduce(pa, step, out, NULL);
    if (step < 2 && rc) FAILR("step %ld: %s", step, shoal_comm_errmsg(c));
    if (step == 2) {
      const char *m = shoal_comm_errmsg(c);
      if (rc == 0) FAILR("a step with a dead rank and min_ready = all succeeded");
      if (!strstr(m, "partial-allreduce seq") || !strstr(m, "step 2"))
        FAILR("the error does not name the op and the step: %s", m);
    }
  }
  shoal_partial_destroy(pa);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_dead_rank_error_names_the_step, 40) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 5};
  P2P_RUN(3, rank_dies, &a, 30);
}

/* A rank that dies in a step decided without it while another rank is out too (late, carried into the
 * next step): the data plane runs with every rank, the dead one included; every survivor's error names
 * the step and the dead peer (itself, or in the abort notice it received). */
static int rank_dies_out(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t n = 70001;
  float *d = calloc(n, sizeof(float)), *out = malloc(n * sizeof(float));
  shoal_partial_t *pa = make_pa(c, n, SHOAL_FLOAT32, SHOAL_SUM, 0, 0, SHOAL_PARTIAL_CARRY, 2, 1e-6);
  if (!pa) return 1;
  for (long step = 0; step < 3; step++) {
    if (rank == 3 && step == 2) { /* after the others finished step 1 (see rank_dies) */
      usleep(300 * 1000);
      _exit(0);
    }
    if (!(rank == 1 && step == 2)) shoal_partial_arrive(pa, step, d, 0);
    int rc = shoal_partial_allreduce(pa, step, out, NULL);
    if (step < 2 && rc) FAILR("step %ld: %s", step, shoal_comm_errmsg(c));
    if (step == 2) {
      const char *m = shoal_comm_errmsg(c);
      if (rc == 0) FAILR("step 2 with rank 3 dead succeeded");
      if (!strstr(m, "partial-allreduce seq") || !strstr(m, "step 2"))
        FAILR("the error does not name the op and the step: %s", m);
      if (!strstr(m, "peer 3")) FAILR("the error does not name the dead rank 3: %s", m);
    }
  }
  shoal_partial_destroy(pa);
  free(d);
  free(out);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_dead_rank_named_in_a_step_with_a_rank_out, 40) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 5};
  P2P_RUN(4, rank_dies_out, &a, 30);
}

/* ---- two threads per rank: random delays, carry-wait loses nothing ---- */

typedef struct th {
  shoal_partial_t *pa;
  int rank, steps;
  size_t n;
  float *data; /* [steps][n] */
  int rc;
} th_t;

static void *compute_thread(void *arg) {
  th_t *t = arg;
  unsigned seed = (unsigned)t->rank * 7919u + 1;
  for (int s = 0; s < t->steps && !t->rc; s++) {
    struct timespec ts = {0, (long)(rand_r(&seed) % 3000) * 1000};
    nanosleep(&ts, NULL);
    int skip = rand_r(&seed) % 11 == 0 || s == t->steps - 1; /* the last step flushes the carries */
    if (shoal_partial_arrive(t->pa, s, skip ? NULL : t->data + (size_t)s * t->n, 0.001)) t->rc = 1;
    /* wait for the step's result before reusing nothing: the data of every step has its own buffer */
    while (shoal_partial_state(t->pa, s) < SHOAL_PARTIAL_DECIDED) {
      struct timespec w = {0, 200000};
      nanosleep(&w, NULL);
    }
  }
  return NULL;
}

static int rank_threads(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  g_rank = rank;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int p = a->n, steps = 60;
  size_t n = 2053;
  for (int mode = 0; mode < 3; mode++) {
    shoal_partial_params_t prm;
    shoal_partial_params_init(&prm);
    prm.window = mode == 2 ? SHOAL_PARTIAL_MEASURED : SHOAL_PARTIAL_FIXED;
    prm.tau_s = mode == 2 ? 0 : 0.0005;
    prm.carry = mode == 0 ? SHOAL_PARTIAL_CARRY_WAIT : mode == 1 ? SHOAL_PARTIAL_CARRY : SHOAL_PARTIAL_DROP;
    shoal_partial_t *pa = NULL;
    if (shoal_partial_create(c, n, SHOAL_INT32, SHOAL_SUM, &prm, &pa)) FAILR("create: %s", shoal_last_error());
    th_t t = {pa, rank, steps, n, malloc((size_t)steps * n * sizeof(float)), 0};
    int32_t *d = (int32_t *)t.data, *out = malloc(n * sizeof *out);
    for (int s = 0; s < steps; s++)
      for (size_t i = 0; i < n; i++) d[(size_t)s * n + i] = (int32_t)((i + (size_t)rank * 3 + (size_t)s) % 5);
    pthread_t th;
    pthread_create(&th, NULL, compute_thread, &t);
    int64_t applied = 0, fresh = 0, carried = 0;
    for (int s = 0; s < steps; s++) {
      shoal_partial_info_t info;
      if (shoal_partial_allreduce(pa, s, out, &info)) FAILR("mode %d step %d: %s", mode, s, shoal_last_error());
      for (size_t i = 0; i < n; i++) applied += out[i];
      fresh += info.fresh;
      carried += info.carried;
      if (!same_everywhere(c, out, n * sizeof *out)) FAILR("mode %d step %d: ranks differ", mode, s);
    }
    pthread_join(th, NULL);
    if (t.rc) FAILR("mode %d: arrive failed: %s", mode, shoal_last_error());
    /* what every rank arrived with, minus what was dropped (each rank's count of dropped data sets is local) */
    int64_t mine = 0;
    unsigned seed = (unsigned)rank * 7919u + 1;
    for (int s = 0; s < steps; s++) {
      (void)rand_r(&seed);
      int skip = rand_r(&seed) % 11 == 0 || s == steps - 1;
      if (!skip)
        for (size_t i = 0; i < n; i++) mine += d[(size_t)s * n + i];
    }
    int64_t tot[2] = {mine, 0};
    if (shoal_allreduce(c, SHOAL_IN_PLACE, tot, 1, SHOAL_INT64, SHOAL_SUM)) FAILR("sum");
    if (mode == 0 && applied != tot[0])
      FAILR("carry-wait lost data: applied %lld of %lld (fresh %lld, carried %lld)", (long long)applied,
            (long long)tot[0], (long long)fresh, (long long)carried);
    if (applied > tot[0]) FAILR("mode %d: applied %lld > arrived %lld", mode, (long long)applied, (long long)tot[0]);
    if (rank == 0)
      fprintf(stderr, "mode %d: %d steps x %d ranks: %lld fresh, %lld carried; applied %.1f%% of the data\n", mode,
              steps, p, (long long)fresh, (long long)carried, 100.0 * (double)applied / (double)tot[0]);
    free(t.data);
    free(out);
    shoal_partial_destroy(pa);
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(partial_two_threads_random_delays, 90) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(4, rank_threads, &a, 80);
}

/* Arrivals before the first step completed: at most 16 ahead of the first one, as after it (a 17th
 * overwrote the first's slot: the step then waited for data that was gone) */
TEST(partial_arrive_refused_too_far_ahead_before_step_0) {
  shoal_comm_t *c = NULL;
  CHECK_OK(shoal_comm_init_env(&c)); /* a world of one */
  shoal_partial_t *pa = NULL;
  CHECK_OK(shoal_partial_create(c, 10, SHOAL_FLOAT32, SHOAL_SUM, NULL, &pa));
  float d[17][10], out[10];
  for (int s = 0; s < 17; s++)
    for (int i = 0; i < 10; i++) d[s][i] = (float)(s * 100 + i);
  for (int s = 0; s < 16; s++) CHECK_OK(shoal_partial_arrive(pa, s, d[s], 0));
  CHECK_EQ(shoal_partial_arrive(pa, 16, d[16], 0), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "more than 16 steps ahead");
  shoal_partial_info_t info;
  CHECK_OK(shoal_partial_allreduce(pa, 0, out, &info)); /* step 0's own data, not step 16's */
  CHECK(!memcmp(out, d[0], sizeof out));
  CHECK_OK(shoal_partial_arrive(pa, 16, d[16], 0)); /* now within 16 of the last completed step */
  shoal_partial_destroy(pa);
  shoal_comm_destroy(c);
}

/* Out of memory while creating: an error naming the size, nothing read from the freed context (ASan: a
 * use after free). Run in a process of its own, with ASan told to return NULL for an impossible allocation
 * instead of stopping the program. */
TEST(partial_create_out_of_memory) {
  if (!getenv("SHOAL_TEST_PARTIAL_OOM")) {
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "SHOAL_TEST_PARTIAL_OOM=1 ASAN_OPTIONS=\"$ASAN_OPTIONS:allocator_may_return_null=1\" "
             "/proc/%d/exe -t 60 partial_create_out_of_memory", (int)getpid());
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 60);
    CHECK_MSG(st == 0, "the child failed (status %d): %s", st, out);
    return;
  }
  shoal_comm_t *c = NULL;
  CHECK_OK(shoal_comm_init_env(&c));
  shoal_partial_params_t prm;
  shoal_partial_params_init(&prm);
  prm.carry = SHOAL_PARTIAL_CARRY; /* a buffer of the vector's size: 4 TiB here */
  shoal_partial_t *pa = NULL;
  CHECK_EQ(shoal_partial_create(c, (size_t)1 << 40, SHOAL_FLOAT32, SHOAL_SUM, &prm, &pa), SHOAL_ERR_NOMEM);
  CHECK_CONTAINS(shoal_last_error(), "4398046511104 B");
  CHECK(pa == NULL);
  shoal_comm_destroy(c);
}
