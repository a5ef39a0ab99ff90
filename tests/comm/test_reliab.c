/* Reliability and safety contracts of the communication layer, each written
 * against the public API with real processes:
 *   - every public entry point rejects SHOAL_IN_PLACE as a receive buffer
 *     and NULL buffers with SHOAL_ERR_INVALID (no crash), and the text is in
 *     shoal_comm_errmsg too;
 *   - an argument error on one rank makes the other ranks fail naming it
 *     (never rc 0 with wrong data), over shared memory and over TCP;
 *   - collectives over shared memory detect mismatched calls (count, dtype,
 *     op, root, kind, a skipped call) like the TCP path does;
 *   - the rendezvous refuses ranks of another job, duplicate ranks and
 *     different world sizes with errors that say so;
 *   - silent connections to a rank's port do not stall the start;
 *   - a dead same-host peer is found in every shared-memory wait, and no
 *     path leaves a segment in /dev/shm. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct rarg {
  int port, n, shm, kind;
  double timeout_s;
} rarg_t;

static int join(const rarg_t *a, int rank, shoal_comm_t **c) {
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1);
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.timeout_s = a->timeout_s > 0 ? a->timeout_s : 20;
  p.connect_timeout_s = 20;
  int rc = shoal_comm_init(&p, c);
  if (rc) fprintf(stderr, "rank %d: init: %s\n", rank, shoal_last_error());
  return rc;
}

static void run(int n, int (*fn)(int, void *), rarg_t *a, double timeout_s) {
  a->port = shoal_test_free_port();
  a->n = n;
  int st[8];
  shoal_test_fork_ranks(n, fn, a, timeout_s, st);
  for (int r = 0; r < n; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "%s: rank %d %s (status 0x%x)",
              a->shm ? "shm" : "tcp", r, st[r] == -1 ? "timed out" : "failed", st[r]);
}

/* ---- SHOAL_IN_PLACE and NULL as receive buffers ---- */

#define EXPECT_INVALID(expr)                                                                   \
  do {                                                                                         \
    int _rc = (expr);                                                                          \
    CHECK_MSG(_rc == SHOAL_ERR_INVALID, "%s = %d (%s)", #expr, _rc, shoal_last_error());      \
    CHECK_CONTAINS(shoal_comm_errmsg(c), "rank");                                             \
  } while (0)

static int in_place_rank(int rank, void *arg) {
  shoal_comm_t *c;
  if (join(arg, rank, &c)) return 2;
  float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  void *ip = (void *)SHOAL_IN_PLACE;
  EXPECT_INVALID(shoal_allreduce(c, f, ip, 4, SHOAL_FLOAT32, SHOAL_SUM));
  CHECK_CONTAINS(shoal_last_error(), "SHOAL_IN_PLACE");
  CHECK_CONTAINS(shoal_comm_errmsg(c), "SHOAL_IN_PLACE"); /* the communicator's message carries it too */
  EXPECT_INVALID(shoal_allreduce(c, SHOAL_IN_PLACE, ip, 4, SHOAL_FLOAT32, SHOAL_SUM));
  EXPECT_INVALID(shoal_allreduce_algo(c, f, ip, 4, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM));
  EXPECT_INVALID(shoal_allreduce_algo(c, f, ip, 4, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_RING));
  EXPECT_INVALID(shoal_broadcast(c, ip, 4, SHOAL_FLOAT32, 0));
  EXPECT_INVALID(shoal_reduce(c, f, ip, 4, SHOAL_FLOAT32, SHOAL_SUM, rank));
  EXPECT_INVALID(shoal_reduce(c, SHOAL_IN_PLACE, NULL, 4, SHOAL_FLOAT32, SHOAL_SUM, 0));
  EXPECT_INVALID(shoal_reduce_scatter(c, f, ip, 2, SHOAL_FLOAT32, SHOAL_SUM));
  EXPECT_INVALID(shoal_allgather(c, f, ip, 2, SHOAL_FLOAT32));
  EXPECT_INVALID(shoal_allgather(c, SHOAL_IN_PLACE, NULL, 2, SHOAL_FLOAT32));
  EXPECT_INVALID(shoal_send(c, SHOAL_IN_PLACE, 4, SHOAL_FLOAT32, 1 - rank, 0));
  EXPECT_INVALID(shoal_recv(c, ip, 4, SHOAL_FLOAT32, 1 - rank, 0));
  EXPECT_INVALID(shoal_sendrecv(c, f, 4, 1 - rank, ip, 4, 1 - rank, SHOAL_FLOAT32, 0));
  int src;
  EXPECT_INVALID(shoal_recv_any(c, ip, 4, SHOAL_FLOAT32, 0, &src));
  EXPECT_INVALID(shoal_recv_any(c, NULL, 4, SHOAL_FLOAT32, 0, &src));
  EXPECT_INVALID(shoal_allreduce(c, NULL, f, 4, SHOAL_FLOAT32, SHOAL_SUM));
  shoal_comm_t *sub = (shoal_comm_t *)&src;
  EXPECT_INVALID(shoal_comm_split(c, -5, 0, &sub));
  CHECK(sub == (shoal_comm_t *)&src); /* output untouched on error */
  /* the first error aborted the communicator: a valid call fails fast */
  CHECK_EQ(shoal_barrier(c), SHOAL_ERR_ABORTED);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(reliab_in_place_recvbuf_rejected_shm, 60) {
  rarg_t a = {.shm = 1};
  run(2, in_place_rank, &a, 40);
}
TEST_T(reliab_in_place_recvbuf_rejected_tcp, 60) {
  rarg_t a = {.shm = 0};
  run(2, in_place_rank, &a, 40);
}

/* ---- an argument error on one rank fails the others ---- */

static int one_bad_rank(int rank, void *arg) {
  const rarg_t *a = arg;
  shoal_comm_t *c;
  int bad = a->kind == 2 ? 0 : a->n - 1, rc; /* broadcast: the root (every other rank needs its data) */
  char who[32];
  snprintf(who, sizeof who, "rank %d", bad);
  if (join(a, rank, &c)) { /* the bad rank may finish init and abort before this rank is done with it */
    CHECK_CONTAINS(shoal_last_error(), who);
    CHECK_CONTAINS(shoal_last_error(), "is NULL");
    return 0;
  }
  float f[256];
  for (int i = 0; i < 256; i++) f[i] = (float)(rank + 1);
  size_t count = a->kind == 1 ? 200 : 4; /* tiny (shm boxes) or small path */
  if (rank == bad) {
    if (a->kind == 2) rc = shoal_broadcast(c, NULL, count, SHOAL_FLOAT32, 0);
    else rc = shoal_allreduce(c, NULL, f, count, SHOAL_FLOAT32, SHOAL_SUM);
    CHECK_EQ(rc, SHOAL_ERR_INVALID);
  } else {
    if (a->kind == 2) rc = shoal_broadcast(c, f, count, SHOAL_FLOAT32, 0);
    else rc = shoal_allreduce(c, SHOAL_IN_PLACE, f, count, SHOAL_FLOAT32, SHOAL_SUM);
    CHECK_MSG(rc != 0, "rank %d: rc 0 although rank %d rejected its arguments", rank, bad);
    CHECK_CONTAINS(shoal_comm_errmsg(c), "is NULL");
    CHECK_CONTAINS(shoal_comm_errmsg(c), who);
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(reliab_argument_error_fails_all_shm, 60) {
  for (int kind = 0; kind < 3; kind++) {
    rarg_t a = {.shm = 1, .kind = kind};
    run(3, one_bad_rank, &a, 40);
  }
}
TEST_T(reliab_argument_error_fails_all_tcp, 60) {
  for (int kind = 0; kind < 3; kind++) {
    rarg_t a = {.shm = 0, .kind = kind};
    run(3, one_bad_rank, &a, 40);
  }
}
