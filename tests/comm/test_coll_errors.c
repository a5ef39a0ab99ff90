/* Collective-level errors: ranks calling different collectives or sizes get
 * a clear error naming both ranks, the operations and the sequence number
 * (never a hang), plus argument and configuration checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct mm {
  int port, kind, n;
} mm_t;

static int join(int port, int n, int rank, shoal_comm_t **c) {
  setenv("SHOAL_SHM", "0", 1); /* the TCP transport's header checks */
  shoal_comm_params_t pp;
  shoal_comm_params_init(&pp);
  pp.rank = rank;
  pp.world_size = n;
  pp.master_addr = "127.0.0.1";
  pp.master_port = port;
  pp.timeout_s = 20;
  pp.connect_timeout_s = 20;
  return shoal_comm_init(&pp, c);
}

/* kind 0: allreduce count 100 vs 200; kind 1: allreduce vs broadcast.
 * A barrier first, so the failing collective has seq > 1 on both ranks. */
static int mismatch_rank(int rank, void *arg) {
  const mm_t *m = arg;
  shoal_comm_t *c;
  if (join(m->port, 2, rank, &c)) return 2;
  float buf[200] = {0};
  CHECK_OK(shoal_barrier(c));
  int rc;
  if (m->kind == 0) rc = shoal_allreduce(c, SHOAL_IN_PLACE, buf, rank == 0 ? 100 : 200, SHOAL_FLOAT32, SHOAL_SUM);
  else if (rank == 0) rc = shoal_allreduce(c, SHOAL_IN_PLACE, buf, 100, SHOAL_FLOAT32, SHOAL_SUM);
  else rc = shoal_broadcast(c, buf, 100, SHOAL_FLOAT32, 0);
  const char *msg = shoal_comm_errmsg(c);
  fprintf(stderr, "rank %d: rc %d (%s): %s\n", rank, rc, shoal_status_string(rc), msg);
  CHECK(rc == SHOAL_ERR_MISMATCH || rc == SHOAL_ERR_PEER_CLOSED);
  /* both ranks: whichever detected it, the text names both ranks and ops */
  CHECK_CONTAINS(msg, "rank ");
  CHECK_CONTAINS(msg, "peer ");
  /* the sequence number of the failing call: after the barrier, the same on both sides */
  const char *sq = strstr(msg, "seq ");
  CHECK(sq != NULL);
  unsigned seq = (unsigned)atoi(sq + 4);
  CHECK(seq >= 2);
  char want[32];
  snprintf(want, sizeof want, "seq %u", seq);
  CHECK_CONTAINS(msg, want);
  CHECK_CONTAINS(msg, "allreduce");
  if (m->kind == 0) {
    CHECK_CONTAINS(msg, "100");
    CHECK_CONTAINS(msg, "200");
  } else {
    CHECK_CONTAINS(msg, "broadcast");
  }
  /* the communicator is aborted: later calls fail fast */
  CHECK_EQ(shoal_barrier(c), SHOAL_ERR_ABORTED);
  shoal_comm_destroy(c);
  return 0;
}

static void run_mismatch(int kind) {
  mm_t m = {.port = shoal_test_free_port(), .kind = kind, .n = 2};
  int st[2];
  int ok = shoal_test_fork_ranks(2, mismatch_rank, &m, 60, st);
  for (int r = 0; r < 2; r++)
    CHECK_MSG(st[r] != -1, "rank %d hung (killed at the test's deadline)", r);
  CHECK_EQ(ok, 2);
}

/* kind 2: same count, different algorithms (rank 0 rhd, rank 1 ring): at 2
 * ranks their messages have the same sizes, so only the header's tag (the
 * algorithm) tells them apart; without it the blocks would mix silently. */
static int algo_mismatch_rank(int rank, void *arg) {
  const mm_t *m = arg;
  shoal_comm_t *c;
  if (join(m->port, 2, rank, &c)) return 2;
  float buf[64] = {0};
  int rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, 64, SHOAL_FLOAT32, SHOAL_SUM,
                                rank == 0 ? SHOAL_ALGO_RHD : SHOAL_ALGO_RING);
  const char *msg = shoal_comm_errmsg(c);
  fprintf(stderr, "rank %d: rc %d: %s\n", rank, rc, msg);
  CHECK(rc == SHOAL_ERR_MISMATCH || rc == SHOAL_ERR_PEER_CLOSED);
  CHECK_CONTAINS(msg, "allreduce");
  CHECK_CONTAINS(msg, "algorithm r"); /* both algorithms named: "algorithm ring" and "algorithm rhd" */
  CHECK_CONTAINS(msg, "rhd");
  CHECK_CONTAINS(msg, "ring");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(coll_mismatch_allreduce_algorithm, 90) {
  mm_t m = {.port = shoal_test_free_port(), .n = 2};
  int st[2];
  CHECK_EQ(shoal_test_fork_ranks(2, algo_mismatch_rank, &m, 60, st), 2);
}

TEST_T(coll_mismatch_allreduce_count, 90) { run_mismatch(0); }
TEST_T(coll_mismatch_allreduce_vs_broadcast, 90) { run_mismatch(1); }

static int args_rank(int rank, void *arg) {
  const mm_t *m = arg;
  shoal_comm_t *c;
  if (join(m->port, 2, rank, &c)) return 2;
  float f[4] = {1, 2, 3, 4};
  /* a bad timeout is an error of the setting only (comm.h): nothing is aborted */
  CHECK_EQ(shoal_comm_set_timeout(c, -1), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_comm_set_timeout(c, 0.0 / 0.0), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "is not in (0, 1e7]");
  CHECK_OK(shoal_barrier(c));
  /* rejected before any message; the first error is also the communicator's
   * error and aborts it (the other rank fails too instead of waiting: see
   * test_reliab.c); every later call returns SHOAL_ERR_ABORTED at once
   * (comm.h), naming the first error and then its own problem */
  CHECK_EQ(shoal_allreduce(NULL, f, f, 4, SHOAL_FLOAT32, SHOAL_SUM), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal_allreduce(c, f, f, 4, SHOAL_FLOAT32, SHOAL_BAND), SHOAL_ERR_UNSUPPORTED);
  CHECK_CONTAINS(shoal_comm_errmsg(c), "band is not defined on float32");
  CHECK_CONTAINS(shoal_last_error(), "band is not defined on float32");
#define CHECK_REJECTED(call, own)                       \
  do {                                                  \
    CHECK_EQ((call), SHOAL_ERR_ABORTED);                \
    CHECK_CONTAINS(shoal_last_error(), "band");         \
    CHECK_CONTAINS(shoal_last_error(), "this call: ");  \
    CHECK_CONTAINS(shoal_last_error(), own);            \
  } while (0)
  CHECK_REJECTED(shoal_allreduce(c, f, f, 4, (shoal_dtype_t)77, SHOAL_SUM), "dtype 77");
  CHECK_REJECTED(shoal_allreduce(c, NULL, NULL, 4, SHOAL_FLOAT32, SHOAL_SUM), "NULL");
  CHECK_REJECTED(shoal_allreduce_algo(c, f, f, 4, SHOAL_FLOAT32, SHOAL_SUM, (shoal_algo_t)9), "algorithm 9");
  CHECK_REJECTED(shoal_broadcast(c, f, 4, SHOAL_FLOAT32, 2), "root 2");
  CHECK_REJECTED(shoal_reduce(c, f, f, 4, SHOAL_FLOAT32, SHOAL_SUM, -1), "root -1");
  /* SHOAL_ALGO is read when a world is created (single-rank worlds here): a
   * bad value fails the creation naming it; a good one forces the choice */
  shoal_comm_t *one = NULL;
  setenv("SHOAL_ALGO", "tree", 1);
  CHECK_EQ(join(0, 1, 0, &one), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "SHOAL_ALGO='tree'");
  setenv("SHOAL_ALGO", "rhd", 1);
  CHECK_EQ(join(0, 1, 0, &one), 0);
  CHECK_EQ(shoal_allreduce_choose(one, 8), SHOAL_ALGO_RHD);
  CHECK_EQ(shoal_allreduce_choose(c, 8), SHOAL_ALGO_RD); /* c was created without it: the model's pick */
  shoal_comm_destroy(one);
  unsetenv("SHOAL_ALGO");
  setenv("SHOAL_ALPHA_US", "fast", 1); /* the ring reads the model for its chunk size */
  CHECK_REJECTED(shoal_allreduce_algo(c, f, f, 4, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_RING), "SHOAL_ALPHA_US");
  unsetenv("SHOAL_ALPHA_US");
  /* the model: latency-bound small messages, bandwidth-bound large ones */
  CHECK_EQ(shoal_allreduce_choose(c, 8), SHOAL_ALGO_RD);
  CHECK_EQ(shoal_allreduce_choose(c, 64u << 20), SHOAL_ALGO_RING);
  /* aborted by the first of them: later calls fail fast with it */
  CHECK_EQ(shoal_allreduce(c, SHOAL_IN_PLACE, f, 4, SHOAL_FLOAT32, SHOAL_SUM), SHOAL_ERR_ABORTED);
  CHECK_CONTAINS(shoal_last_error(), "band is not defined on float32");
  shoal_comm_destroy(c);
  return 0;
}

/* SHOAL_ALGO forcing an algorithm the world cannot run (shm with SHOAL_SHM=0):
 * the error says that SHOAL_ALGO chose it. */
static int forced_rank(int rank, void *arg) {
  const mm_t *m = arg;
  shoal_comm_t *c;
  setenv("SHOAL_ALGO", "shm", 1);
  if (join(m->port, 2, rank, &c)) return 2;
  float f[4] = {1, 2, 3, 4};
  CHECK_EQ(shoal_allreduce(c, SHOAL_IN_PLACE, f, 4, SHOAL_FLOAT32, SHOAL_SUM), SHOAL_ERR_UNSUPPORTED);
  CHECK_CONTAINS(shoal_last_error(), "SHOAL_ALGO=shm");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(coll_forced_algorithm_that_cannot_run_names_shoal_algo, 60) {
  mm_t m = {.port = shoal_test_free_port(), .n = 2};
  CHECK_EQ(shoal_test_fork_ranks(2, forced_rank, &m, 40, NULL), 2);
}

TEST_T(coll_bad_arguments_and_config, 60) {
  mm_t m = {.port = shoal_test_free_port(), .n = 2};
  CHECK_EQ(shoal_test_fork_ranks(2, args_rank, &m, 40, NULL), 2);
}
