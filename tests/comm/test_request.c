/* Non-blocking collectives (shoal/request.h): results equal to the blocking
 * calls bit for bit, completion in issue order, progress without polling,
 * blocking calls ordered after pending requests, and errors (mismatch, a
 * peer killed while requests are in flight) that name rank, peer, operation
 * and sequence, within the deadline. */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal/request.h"
#include "test_p2p_util.h"

#define FAILR(...)                \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n");        \
    return 1;                     \
  } while (0)

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float val(int rank, size_t i, int salt) {
  /* not exactly representable sums: the reduction order shows in the bits */
  return (float)sin((double)(i * 7 + (size_t)rank * 131 + (size_t)salt * 17)) * 1.1f + 0.1f * (float)rank;
}

/* ---- every kind in flight at once, compared with the blocking calls ---- */

#define NSIZES 4
static const size_t sizes[NSIZES] = {1, 1000, 65536 + 3, 1u << 20};

static int rank_equal_blocking(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n;
  size_t big = sizes[NSIZES - 1];
  float *nb[NSIZES], *bl[NSIZES];
  for (int s = 0; s < NSIZES; s++) {
    nb[s] = malloc(sizes[s] * sizeof(float));
    bl[s] = malloc(sizes[s] * sizeof(float));
    for (size_t i = 0; i < sizes[s]; i++) nb[s][i] = bl[s][i] = val(rank, i, s);
  }
  size_t rs = 1000;
  float *rs_in = malloc(rs * (size_t)n * sizeof(float)), *rs_nb = malloc(rs * sizeof(float)),
        *rs_bl = malloc(rs * sizeof(float));
  float *ag_nb = malloc(rs * (size_t)n * sizeof(float)), *ag_bl = malloc(rs * (size_t)n * sizeof(float));
  for (size_t i = 0; i < rs * (size_t)n; i++) rs_in[i] = val(rank, i, 9);
  double bc_nb[100], bc_bl[100], red_nb[100], red_bl[100], red_in[100];
  for (int i = 0; i < 100; i++) {
    bc_nb[i] = bc_bl[i] = rank == 1 ? i * 0.5 : -1;
    red_in[i] = rank + i * 0.25;
  }

  shoal_request_t *rq[NSIZES + 5];
  int k = 0;
  for (int s = 0; s < NSIZES; s++)
    if (shoal_iallreduce(c, SHOAL_IN_PLACE, nb[s], sizes[s], SHOAL_FLOAT32, SHOAL_SUM, &rq[k++]))
      FAILR("iallreduce: %s", shoal_last_error());
  if (shoal_ibroadcast(c, bc_nb, 100, SHOAL_FLOAT64, 1, &rq[k++])) FAILR("ibroadcast: %s", shoal_last_error());
  if (shoal_ireduce(c, red_in, red_nb, 100, SHOAL_FLOAT64, SHOAL_MAX, 0, &rq[k++])) FAILR("ireduce");
  if (shoal_ireduce_scatter(c, rs_in, rs_nb, rs, SHOAL_FLOAT32, SHOAL_AVG, &rq[k++])) FAILR("ireduce_scatter");
  if (shoal_iallgather(c, rs_nb, ag_nb, rs, SHOAL_FLOAT32, &rq[k++])) FAILR("iallgather");
  if (shoal_ibarrier(c, &rq[k++])) FAILR("ibarrier");
  if (shoal_comm_pending(c) < 1) FAILR("nothing pending right after issuing %d requests", k);
  if (shoal_waitall(k, rq)) FAILR("waitall: %s", shoal_last_error());
  for (int i = 0; i < k; i++)
    if (rq[i]) FAILR("request %d not set to NULL", i);
  if (shoal_comm_pending(c) != 0) FAILR("pending after waitall");

  /* the same calls, blocking */
  for (int s = 0; s < NSIZES; s++)
    if (shoal_allreduce(c, SHOAL_IN_PLACE, bl[s], sizes[s], SHOAL_FLOAT32, SHOAL_SUM)) FAILR("allreduce");
  if (shoal_broadcast(c, bc_bl, 100, SHOAL_FLOAT64, 1)) FAILR("broadcast");
  if (shoal_reduce(c, red_in, red_bl, 100, SHOAL_FLOAT64, SHOAL_MAX, 0)) FAILR("reduce");
  if (shoal_reduce_scatter(c, rs_in, rs_bl, rs, SHOAL_FLOAT32, SHOAL_AVG)) FAILR("reduce_scatter");
  if (shoal_allgather(c, rs_bl, ag_bl, rs, SHOAL_FLOAT32)) FAILR("allgather");

  for (int s = 0; s < NSIZES; s++) {
    if (memcmp(nb[s], bl[s], sizes[s] * sizeof(float))) FAILR("allreduce of %zu differs from the blocking call", sizes[s]);
    double want = 0;
    for (int r = 0; r < n; r++) want += val(r, sizes[s] - 1, s);
    if (fabs(nb[s][sizes[s] - 1] - want) > 1e-4 * (1 + fabs(want))) FAILR("allreduce value %g != %g", nb[s][sizes[s] - 1], want);
  }
  if (memcmp(bc_nb, bc_bl, sizeof bc_nb) || bc_nb[7] != 3.5) FAILR("broadcast differs");
  if (rank == 0 && (memcmp(red_nb, red_bl, sizeof red_nb) || red_nb[4] != (n - 1) + 1.0)) FAILR("reduce differs");
  if (memcmp(rs_nb, rs_bl, rs * sizeof(float))) FAILR("reduce_scatter differs");
  if (memcmp(ag_nb, ag_bl, rs * (size_t)n * sizeof(float))) FAILR("allgather differs");
  (void)big;
  for (int s = 0; s < NSIZES; s++) free(nb[s]), free(bl[s]);
  free(rs_in), free(rs_nb), free(rs_bl), free(ag_nb), free(ag_bl);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_equal_blocking_tcp, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_equal_blocking, &a, 55);
}
TEST_T(request_equal_blocking_shm, 60) {
  p2p_world_arg_t a = {.shm = 1};
  P2P_RUN(4, rank_equal_blocking, &a, 55);
}

/* ---- issue order, progress without polling, blocking calls after pending ones ---- */

static int rank_order(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  enum { K = 12 };
  size_t cnt[K];
  float *buf[K];
  shoal_request_t *rq[K];
  for (int i = 0; i < K; i++) {
    cnt[i] = (i % 3 == 0) ? (size_t)(1u << 18) : (size_t)(i + 1); /* big ones ahead of tiny ones */
    buf[i] = malloc(cnt[i] * sizeof(float));
    for (size_t j = 0; j < cnt[i]; j++) buf[i][j] = (float)(rank + i);
    if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf[i], cnt[i], SHOAL_FLOAT32, SHOAL_SUM, &rq[i]))
      FAILR("iallreduce %d: %s", i, shoal_last_error());
  }
  /* completion in issue order: whenever request i is seen complete, every earlier one is too */
  int done[K] = {0}, left = K;
  double t0 = mono();
  while (left > 0) {
    for (int i = K - 1; i >= 0; i--) {
      if (done[i]) continue;
      int d = 0;
      if (shoal_test(&rq[i], &d)) FAILR("test %d: %s", i, shoal_last_error());
      if (!d) continue;
      done[i] = 1;
      left--;
      for (int j = 0; j < i; j++) {
        if (done[j]) continue;
        int dj = 0;
        if (shoal_test(&rq[j], &dj)) FAILR("test %d: %s", j, shoal_last_error());
        if (!dj) FAILR("request %d complete before request %d issued earlier", i, j);
        done[j] = 1;
        left--;
      }
    }
    if (mono() - t0 > 30) FAILR("requests not complete after 30 s");
    usleep(100);
  }
  for (int i = 0; i < K; i++) {
    float want = (float)(a->n * (a->n - 1) / 2 + a->n * i);
    if (buf[i][0] != want || buf[i][cnt[i] - 1] != want) FAILR("request %d: %g != %g", i, buf[i][0], want);
  }

  /* progress without polling: no shoal call but a look at the pending count */
  float *big = calloc(1u << 20, sizeof(float));
  shoal_request_t *r1;
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, big, 1u << 20, SHOAL_FLOAT32, SHOAL_SUM, &r1)) FAILR("iallreduce big");
  t0 = mono();
  while (shoal_comm_pending(c) > 0) {
    if (mono() - t0 > 30) FAILR("no progress in 30 s without polling");
    usleep(1000);
  }
  int d = 0;
  if (shoal_test(&r1, &d) || !d || r1) FAILR("request not complete although nothing is pending");

  /* a blocking call made while a request is pending runs after it */
  shoal_request_t *r2;
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, big, 1u << 20, SHOAL_FLOAT32, SHOAL_SUM, &r2)) FAILR("iallreduce big 2");
  int x = rank + 1;
  if (shoal_allreduce(c, SHOAL_IN_PLACE, &x, 1, SHOAL_INT32, SHOAL_SUM)) FAILR("blocking: %s", shoal_last_error());
  if (x != a->n * (a->n + 1) / 2) FAILR("blocking result %d", x);
  d = 0;
  if (shoal_test(&r2, &d) || !d) FAILR("blocking call returned before the pending request completed");

  /* a split communicator shares the world's queue: its requests interleave in issue order */
  shoal_comm_t *sub = NULL;
  if (shoal_comm_split(c, rank % 2, rank, &sub)) FAILR("split: %s", shoal_last_error());
  int ys[2] = {1, 1};
  shoal_request_t *rr[3];
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, &ys[0], 1, SHOAL_INT32, SHOAL_SUM, &rr[0])) FAILR("world");
  if (shoal_iallreduce(sub, SHOAL_IN_PLACE, &ys[1], 1, SHOAL_INT32, SHOAL_SUM, &rr[1])) FAILR("sub");
  if (shoal_ibarrier(c, &rr[2])) FAILR("ibarrier");
  /* one request given up: it still runs; destroy waits for it */
  shoal_request_t *fr;
  float fz[4] = {1, 1, 1, 1};
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, fz, 4, SHOAL_FLOAT32, SHOAL_SUM, &fr)) FAILR("free");
  shoal_request_free(fr);
  if (shoal_waitall(3, rr)) FAILR("waitall: %s", shoal_last_error());
  int subsize = shoal_comm_size(sub);
  if (ys[0] != a->n || ys[1] != subsize) FAILR("world %d sub %d", ys[0], ys[1]);
  shoal_comm_destroy(sub);
  shoal_comm_destroy(c);
  if (fz[0] != (float)a->n) FAILR("freed request did not run: %g", fz[0]);
  for (int i = 0; i < K; i++) free(buf[i]);
  free(big);
  return 0;
}

TEST_T(request_issue_order_tcp, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_order, &a, 55);
}
TEST_T(request_issue_order_shm, 60) {
  p2p_world_arg_t a = {.shm = 1};
  P2P_RUN(4, rank_order, &a, 55);
}

/* ---- arguments checked at issue; *req untouched ---- */

TEST(request_invalid_arguments) {
  shoal_request_t *sentinel = (shoal_request_t *)(uintptr_t)0x1234, *r = sentinel;
  float x = 0;
  CHECK_EQ(shoal_iallreduce(NULL, &x, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, &r), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "iallreduce: communicator is NULL");
  CHECK(r == sentinel);
  CHECK_EQ(shoal_wait(NULL), SHOAL_ERR_INVALID);
  shoal_request_t *nul = NULL;
  int d;
  CHECK_EQ(shoal_test(&nul, &d), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_waitall(1, &nul), 0); /* NULL entries skipped */
  shoal_request_free(NULL);
  /* one-rank worlds: real communicators, arguments out of range. An argument
   * error aborts the communicator (as in the blocking calls), so each case
   * gets a fresh world and checks that the next call reports the abort. */
  for (int k = 0; k < 5; k++) {
    p2p_world_arg_t a = {.n = 1, .port = shoal_test_free_port()};
    shoal_comm_t *c = p2p_join(0, &a);
    CHECK(c != NULL);
    r = sentinel;
    switch (k) {
    case 0:
      CHECK_EQ(shoal_ibroadcast(c, &x, 1, SHOAL_FLOAT32, 3, &r), SHOAL_ERR_INVALID);
      CHECK_CONTAINS(shoal_last_error(), "ibroadcast: root 3 out of range");
      break;
    case 1: CHECK_EQ(shoal_iallreduce(c, &x, &x, 1, (shoal_dtype_t)99, SHOAL_SUM, &r), SHOAL_ERR_INVALID); break;
    case 2: CHECK_EQ(shoal_iallreduce(c, &x, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, NULL), SHOAL_ERR_INVALID); break;
    case 3:
      CHECK_EQ(shoal_iallreduce(c, &x, (void *)SHOAL_IN_PLACE, 1, SHOAL_FLOAT32, SHOAL_SUM, &r), SHOAL_ERR_INVALID);
      CHECK_CONTAINS(shoal_last_error(), "SHOAL_IN_PLACE");
      break;
    case 4: {
      /* errors found when the operation runs come back from wait */
      float b[4] = {1, 2, 3, 4};
      CHECK_OK(shoal_iallreduce(c, SHOAL_IN_PLACE, b, 4, SHOAL_FLOAT32, SHOAL_BXOR, &r));
      CHECK(r != sentinel);
      CHECK_EQ(shoal_wait(&r), SHOAL_ERR_UNSUPPORTED);
      CHECK(r == NULL);
      r = sentinel;
      break;
    }
    }
    CHECK(r == sentinel);
    CHECK(shoal_comm_errmsg(c)[0] != 0);
    x = 2;
    CHECK_EQ(shoal_iallreduce(c, SHOAL_IN_PLACE, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, &r), SHOAL_ERR_ABORTED);
    CHECK(r == sentinel);
    shoal_comm_destroy(c);
  }
  /* a healthy world still works */
  p2p_world_arg_t a = {.n = 1, .port = shoal_test_free_port()};
  shoal_comm_t *c = p2p_join(0, &a);
  CHECK(c != NULL);
  x = 2;
  CHECK_OK(shoal_iallreduce(c, SHOAL_IN_PLACE, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, &r));
  CHECK_OK(shoal_wait(&r));
  CHECK(x == 2.0f);
  shoal_comm_destroy(c);
}

/* An argument error while the progress thread runs an earlier request is the call's argument error
 * (aborts the communicator), not a refusal by the one-thread rule: that thread is the library's. */
static int rank_bad_while_running(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float x[1024] = {0};
  if (rank == 1) {
    usleep(300000); /* rank 0's request waits for this one meanwhile */
    shoal_allreduce(c, SHOAL_IN_PLACE, x, 1024, SHOAL_FLOAT32, SHOAL_SUM); /* fails: rank 0 aborted */
    shoal_comm_destroy(c);
    return 0;
  }
  shoal_request_t *r1 = NULL, *r2 = NULL;
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, x, 1024, SHOAL_FLOAT32, SHOAL_SUM, &r1)) FAILR("issue: %s", shoal_last_error());
  usleep(100000); /* the progress thread is inside the allreduce now */
  int rc = shoal_ibroadcast(c, x, 1, SHOAL_FLOAT32, 5, &r2);
  if (rc != SHOAL_ERR_INVALID || !strstr(shoal_last_error(), "root 5 out of range"))
    FAILR("bad ibroadcast while a request runs: %d %s", rc, shoal_last_error());
  if (shoal_wait(&r1) == 0) FAILR("the running request succeeded after the abort");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_argument_error_while_one_runs, 30) {
  p2p_world_arg_t a = {.n = 2, .timeout_s = 10};
  P2P_RUN(2, rank_bad_while_running, &a, 25);
}

/* ---- a mismatch between ranks: both sides' messages name the operation and sequence ---- */

static int rank_mismatch(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float buf[64] = {0};
  shoal_request_t *r[3];
  if (shoal_ibarrier(c, &r[0])) FAILR("ibarrier");
  if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf, rank == 0 ? 16 : 32, SHOAL_FLOAT32, SHOAL_SUM, &r[1])) FAILR("i");
  /* the progress thread may have found the mismatch already: then this issue is refused as aborted */
  int issue2 = shoal_iallreduce(c, SHOAL_IN_PLACE, buf, 8, SHOAL_FLOAT32, SHOAL_SUM, &r[2]);
  if (issue2 && issue2 != SHOAL_ERR_ABORTED) FAILR("i2: %d (%s)", issue2, shoal_last_error());
  int rc0 = shoal_wait(&r[0]);
  int rc1 = shoal_wait(&r[1]);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", shoal_last_error());
  int rc2 = issue2 ? issue2 : shoal_wait(&r[2]);
  if (rc0) FAILR("barrier failed: %s", shoal_last_error());
  if (rc1 != SHOAL_ERR_MISMATCH && rc1 != SHOAL_ERR_PEER_CLOSED) FAILR("rank %d: expected a mismatch, got %d: %s", rank, rc1, msg);
  char want[64];
  snprintf(want, sizeof want, "rank %d", rank);
  if (!strstr(msg, want) || !strstr(msg, "peer") || !strstr(msg, "allreduce") || !strstr(msg, "seq 2"))
    FAILR("rank %d message lacks rank/peer/operation/seq: %s", rank, msg);
  if (rc2 != SHOAL_ERR_ABORTED) FAILR("queued request after the error: %d (%s)", rc2, shoal_last_error());
  shoal_request_t *r3 = NULL;
  if (shoal_ibarrier(c, &r3) != SHOAL_ERR_ABORTED || r3) FAILR("issue on an aborted communicator");
  fprintf(stderr, "rank %d: %s\n", rank, msg);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_mismatch_names_op_and_seq, 30) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 10};
  P2P_RUN(2, rank_mismatch, &a, 25);
}

/* ---- a rank killed while requests are in flight: error within the deadline ---- */

static int rank_killed(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t cnt = 1u << 20;
  float *buf = calloc(cnt, sizeof(float));
  if (shoal_barrier(c)) FAILR("barrier");
  if (rank == a->victim) {
    shoal_request_t *r;
    shoal_iallreduce(c, SHOAL_IN_PLACE, buf, cnt, SHOAL_FLOAT32, SHOAL_SUM, &r);
    usleep(20000); /* in the middle of the transfer */
    raise(SIGKILL);
  }
  shoal_request_t *r[8];
  for (int i = 0; i < 8; i++)
    if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf, cnt, SHOAL_FLOAT32, SHOAL_SUM, &r[i])) FAILR("issue %d", i);
  double t0 = mono();
  int rc = shoal_waitall(8, r);
  double took = mono() - t0;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", shoal_last_error());
  if (rc == 0) FAILR("rank %d: no error although rank %d died", rank, a->victim);
  if (rc == SHOAL_ERR_TIMEOUT) FAILR("rank %d: waited for the deadline: %s", rank, msg);
  char want[32];
  snprintf(want, sizeof want, "peer %d", a->victim);
  if (!strstr(msg, want) && !strstr(msg, "aborted")) FAILR("rank %d: message names neither %s nor the abort: %s", rank, want, msg);
  if (!strstr(msg, "allreduce seq")) FAILR("rank %d: message lacks operation and seq: %s", rank, msg);
  if (took > a->timeout_s) FAILR("rank %d: error after %.1f s, past the %.0f s deadline", rank, took, a->timeout_s);
  fprintf(stderr, "rank %d (%.2f s): %s\n", rank, took, msg);
  shoal_comm_destroy(c);
  free(buf);
  return 0;
}

static void killed_in_flight(int shm) {
  p2p_world_arg_t a = {.timeout_s = 8, .victim = 1, .shm = shm};
  a.n = 3;
  a.port = shoal_test_free_port();
  int st[3];
  shoal_test_fork_ranks(3, rank_killed, &a, 35, st);
  CHECK_MSG(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL, "victim status %d", st[1]);
  for (int r = 0; r < 3; r++)
    if (r != 1) CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status %d", r, st[r]);
}

TEST_T(request_peer_killed_in_flight_tcp, 40) { killed_in_flight(0); }
TEST_T(request_peer_killed_in_flight_shm, 40) { killed_in_flight(1); }

/* ---- gather, scatter, alltoall(v) requests equal the blocking calls ---- */

static int rank_rooted_and_alltoall(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n;
  enum { B = 3000 };
  float mine[B], g_nb[B * 4], g_bl[B * 4], s_nb[B], s_bl[B], src[B * 4], at_in[B * 4], at_nb[B * 4], at_bl[B * 4];
  for (int i = 0; i < B; i++) mine[i] = val(rank, (size_t)i, 1);
  for (int i = 0; i < B * n; i++) src[i] = val(9, (size_t)i, 2), at_in[i] = val(rank, (size_t)i, 3);
  size_t cnt[4], dsp[4], tot = 0; /* alltoallv: rank q sends (rank + q) % 3 * 100 elements to rank q */
  for (int q = 0; q < n; q++) cnt[q] = (size_t)((rank + q) % 3) * 100, dsp[q] = tot, tot += cnt[q];
  float v_nb[B * 4], v_bl[B * 4];
  shoal_request_t *rq[4];
  if (shoal_igather(c, mine, g_nb, B, SHOAL_FLOAT32, n - 1, &rq[0])) FAILR("igather: %s", shoal_last_error());
  if (shoal_iscatter(c, src, s_nb, B, SHOAL_FLOAT32, 0, &rq[1])) FAILR("iscatter: %s", shoal_last_error());
  if (shoal_ialltoall(c, at_in, at_nb, B, SHOAL_FLOAT32, &rq[2])) FAILR("ialltoall: %s", shoal_last_error());
  if (shoal_ialltoallv(c, at_in, cnt, dsp, v_nb, cnt, dsp, SHOAL_FLOAT32, &rq[3])) FAILR("ialltoallv");
  for (int q = 0; q < n; q++) cnt[q] = 7777; /* copied at issue: changing them now changes nothing */
  if (shoal_waitall(4, rq)) FAILR("waitall: %s", shoal_last_error());
  for (int q = 0; q < n; q++) cnt[q] = (size_t)((rank + q) % 3) * 100;
  if (shoal_gather(c, mine, g_bl, B, SHOAL_FLOAT32, n - 1)) FAILR("gather: %s", shoal_last_error());
  if (shoal_scatter(c, src, s_bl, B, SHOAL_FLOAT32, 0)) FAILR("scatter");
  if (shoal_alltoall(c, at_in, at_bl, B, SHOAL_FLOAT32)) FAILR("alltoall");
  if (shoal_alltoallv(c, at_in, cnt, dsp, v_bl, cnt, dsp, SHOAL_FLOAT32)) FAILR("alltoallv");
  if (rank == n - 1 && memcmp(g_nb, g_bl, sizeof(float) * B * (size_t)n)) FAILR("igather differs");
  if (rank == n - 1 && g_nb[B + 5] != val(1, 5, 1)) FAILR("gather: block 1 is not rank 1's");
  if (memcmp(s_nb, s_bl, sizeof s_nb) || s_nb[0] != src[(size_t)rank * B]) FAILR("iscatter differs");
  if (memcmp(at_nb, at_bl, sizeof(float) * B * (size_t)n)) FAILR("ialltoall differs");
  if (memcmp(v_nb, v_bl, sizeof(float) * tot)) FAILR("ialltoallv differs");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_gather_scatter_alltoall_tcp, 60) {
  p2p_world_arg_t a = {.shm = 0};
  P2P_RUN(3, rank_rooted_and_alltoall, &a, 55);
}
TEST_T(request_gather_scatter_alltoall_shm, 60) {
  p2p_world_arg_t a = {.shm = 1};
  P2P_RUN(4, rank_rooted_and_alltoall, &a, 55);
}

/* ---- isend/irecv: an exchange in any order on either side, big messages ---- */

static int rank_p2p_exchange(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n, right = (rank + 1) % n, left = (rank + n - 1) % n;
  size_t cnt = 4u << 20; /* 16 MiB each way: far more than the socket or the shared-memory ring buffers */
  float *out = malloc(cnt * sizeof(float)), *in = malloc(cnt * sizeof(float));
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < cnt; i += 4099) out[i] = val(rank, i, round);
    memset(in, 0, cnt * sizeof(float));
    shoal_request_t *r[2];
    /* round 0: everyone sends first; 1: everyone receives first; 2: even ranks send first */
    int send_first = round == 0 || (round == 2 && rank % 2 == 0);
    if (send_first) {
      if (shoal_isend(c, out, cnt, SHOAL_FLOAT32, right, 7, &r[0])) FAILR("isend: %s", shoal_last_error());
      if (shoal_irecv(c, in, cnt, SHOAL_FLOAT32, left, 7, &r[1])) FAILR("irecv: %s", shoal_last_error());
    } else {
      if (shoal_irecv(c, in, cnt, SHOAL_FLOAT32, left, 7, &r[1])) FAILR("irecv: %s", shoal_last_error());
      usleep(2000); /* the receive is in flight before the send is issued: the send joins it */
      if (shoal_isend(c, out, cnt, SHOAL_FLOAT32, right, 7, &r[0])) FAILR("isend: %s", shoal_last_error());
    }
    if (shoal_waitall(2, r)) FAILR("round %d: %s", round, shoal_last_error());
    for (size_t i = 0; i < cnt; i += 4099)
      if (in[i] != val(left, i, round)) FAILR("round %d: element %zu from %d wrong", round, i, left);
  }
  /* a collective issued after point-to-point requests runs after them; a blocking call too */
  shoal_request_t *r[3];
  float x = 1, y = (float)rank;
  if (shoal_isend(c, &y, 1, SHOAL_FLOAT32, right, 1, &r[0]) || shoal_irecv(c, in, 1, SHOAL_FLOAT32, left, 1, &r[1]) ||
      shoal_iallreduce(c, SHOAL_IN_PLACE, &x, 1, SHOAL_FLOAT32, SHOAL_SUM, &r[2]))
    FAILR("issue: %s", shoal_last_error());
  if (shoal_waitall(3, r) || x != (float)n || in[0] != (float)left) FAILR("mixed: %g %g %s", x, in[0], shoal_last_error());
  if (shoal_sendrecv(c, &y, 1, right, in, 1, left, SHOAL_FLOAT32, 2) || in[0] != (float)left) FAILR("sendrecv after");
  free(out), free(in);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_p2p_exchange_any_order_tcp, 60) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 20};
  P2P_RUN(3, rank_p2p_exchange, &a, 55);
}
TEST_T(request_p2p_exchange_any_order_shm, 60) {
  p2p_world_arg_t a = {.shm = 1, .timeout_s = 20};
  P2P_RUN(2, rank_p2p_exchange, &a, 55);
}

/* ---- point-to-point failures: a receive nobody sends times out; a peer killed mid-receive ---- */

static int rank_p2p_fail(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float buf[16];
  shoal_request_t *r;
  if (a->victim < 0) { /* timeout: rank 1 waits for a message rank 0 never sends */
    if (rank == 0) {
      usleep((useconds_t)(a->timeout_s * 1.5e6));
      shoal_comm_destroy(c);
      return 0;
    }
    double t0 = mono();
    if (shoal_irecv(c, buf, 16, SHOAL_FLOAT32, 0, 3, &r)) FAILR("irecv: %s", shoal_last_error());
    int rc = shoal_wait(&r);
    double took = mono() - t0;
    if (rc != SHOAL_ERR_TIMEOUT || !strstr(shoal_last_error(), "peer 0") || !strstr(shoal_last_error(), "send/recv"))
      FAILR("want a timeout naming peer 0 and send/recv, got %d: %s", rc, shoal_last_error());
    if (took < a->timeout_s * 0.9 || took > a->timeout_s + 3) FAILR("timed out after %.1f s", took);
  } else {
    if (rank == a->victim) {
      usleep(200000);
      raise(SIGKILL);
    }
    double t0 = mono();
    if (shoal_irecv(c, buf, 16, SHOAL_FLOAT32, a->victim, 3, &r)) FAILR("irecv: %s", shoal_last_error());
    int rc = shoal_wait(&r);
    char want[32];
    snprintf(want, sizeof want, "peer %d", a->victim);
    if (rc == 0 || rc == SHOAL_ERR_TIMEOUT || !strstr(shoal_last_error(), want))
      FAILR("want an error naming %s before the deadline, got %d after %.1f s: %s", want, rc, mono() - t0,
            shoal_last_error());
  }
  fprintf(stderr, "rank %d: %s\n", rank, shoal_last_error());
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_p2p_timeout_names_peer, 30) {
  p2p_world_arg_t a = {.shm = 0, .timeout_s = 2, .victim = -1};
  P2P_RUN(2, rank_p2p_fail, &a, 25);
}

static void p2p_killed(int shm) {
  p2p_world_arg_t a = {.timeout_s = 10, .victim = 1, .shm = shm, .n = 2, .port = shoal_test_free_port()};
  int st[2];
  shoal_test_fork_ranks(2, rank_p2p_fail, &a, 25, st);
  CHECK_MSG(WIFSIGNALED(st[1]) && WTERMSIG(st[1]) == SIGKILL, "victim status %d", st[1]);
  CHECK_MSG(st[0] != -1 && WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0, "rank 0 status %d", st[0]);
}
TEST_T(request_p2p_peer_killed_tcp, 30) { p2p_killed(0); }
TEST_T(request_p2p_peer_killed_shm, 30) { p2p_killed(1); }

/* ---- completion notices: once per request, in completion order, at once when already complete ---- */

static _Atomic int g_notified[16];
static _Atomic int g_notify_seq;
static void on_done(void *arg) { atomic_store(&g_notified[(intptr_t)arg], atomic_fetch_add(&g_notify_seq, 1) + 1); }

static int rank_notify(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  enum { K = 6 };
  float *buf[K];
  shoal_request_t *rq[K];
  for (int i = 0; i < K; i++) {
    size_t cnt = i % 2 ? 1u << 18 : 3;
    buf[i] = calloc(cnt, sizeof(float));
    if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf[i], cnt, SHOAL_FLOAT32, SHOAL_SUM, &rq[i])) FAILR("issue %d", i);
    if (shoal_request_notify(rq[i], on_done, (void *)(intptr_t)i)) FAILR("notify %d: %s", i, shoal_last_error());
  }
  if (shoal_request_notify(rq[0], on_done, NULL) != SHOAL_ERR_INVALID) FAILR("a second function was accepted");
  if (shoal_waitall(K, rq)) FAILR("waitall: %s", shoal_last_error());
  double t0 = mono();
  while (atomic_load(&g_notify_seq) < K && mono() - t0 < 10) usleep(1000); /* called right after completion */
  for (int i = 0; i < K; i++)
    if (atomic_load(&g_notified[i]) != i + 1) FAILR("request %d notified %d-th", i, atomic_load(&g_notified[i]));
  /* complete before the function is given: called at once, on this thread */
  shoal_request_t *r;
  if (shoal_ibarrier(c, &r)) FAILR("ibarrier");
  while (shoal_comm_pending(c) > 0) usleep(1000);
  if (shoal_request_notify(r, on_done, (void *)(intptr_t)K) || atomic_load(&g_notified[K]) != K + 1)
    FAILR("late notify: %d", atomic_load(&g_notified[K]));
  if (shoal_wait(&r)) FAILR("wait");
  for (int i = 0; i < K; i++) free(buf[i]);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_notify_once_in_order, 30) {
  p2p_world_arg_t a = {.shm = 1};
  P2P_RUN(2, rank_notify, &a, 25);
}

/* ---- a request nobody waits for starts after a run of waited ones ----
 * Once the collectives of a world have been waited for by their issuers, an issue no longer wakes the
 * progress thread (the waiter runs the request); one that nobody waits for must still complete by
 * itself, its notice coming without any call into the library. */

static _Atomic int g_unwaited_done;
static void on_unwaited(void *arg) {
  (void)arg;
  atomic_store(&g_unwaited_done, 1);
}

static int rank_unwaited(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  float buf[64];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 40; i++) { /* issued and waited at once, as a binding's blocking call */
      shoal_request_t *r;
      for (int k = 0; k < 64; k++) buf[k] = (float)(rank + k);
      if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf, 64, SHOAL_FLOAT32, SHOAL_SUM, &r) || shoal_wait(&r))
        FAILR("round %d, waited call %d: %s", round, i, shoal_last_error());
      if (buf[5] != (float)(2 * 5 + 1)) FAILR("round %d, waited call %d: %g", round, i, (double)buf[5]);
    }
    atomic_store(&g_unwaited_done, 0);
    shoal_request_t *r;
    for (int k = 0; k < 64; k++) buf[k] = (float)(rank * k);
    if (shoal_iallreduce(c, SHOAL_IN_PLACE, buf, 64, SHOAL_FLOAT32, SHOAL_SUM, &r)) FAILR("issue");
    if (shoal_request_notify(r, on_unwaited, NULL)) FAILR("notify: %s", shoal_last_error());
    double t0 = mono();
    while (!atomic_load(&g_unwaited_done) && mono() - t0 < 10) usleep(200); /* no call into libshoal */
    if (!atomic_load(&g_unwaited_done)) FAILR("round %d: a request nobody waits for did not complete in 10 s", round);
    if (shoal_wait(&r)) FAILR("wait: %s", shoal_last_error());
    if (buf[7] != 7.0f) FAILR("round %d: unwaited sum %g", round, (double)buf[7]);
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(request_unwaited_starts_after_waited_ones, 40) {
  p2p_world_arg_t a = {.shm = 1};
  P2P_RUN(2, rank_unwaited, &a, 35);
}
