/* Faults: every one ends in a clear error within the deadline, and the test
 * asserts the message. Deadlines here are small (seconds). */
#include <math.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_impl.h"
#include "comm/p2p/p2p.h"
#include "comm/bootstrap/store.h"
#include "core/clock.h"
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

/* ---- mismatches (p2p ops directly; collective-level tests live in test_coll*) ---- */

typedef struct mm_arg {
  p2p_world_arg_t w;
  int op0, op1;          /* opcodes of rank 0 (sender) and rank 1 (receiver) */
  uint64_t count0, count1;
  int dtype0, dtype1;
  int skip_seq0;         /* rank 0 burns a sequence number first */
  const char *expect;    /* in both messages; %u: the receiver's seq, then the sender's */
} mm_arg_t;

static int rank_mismatch(int rank, void *arg) {
  mm_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, &a->w);
  if (!c) return 2;
  static char buf[1 << 16];
  if (rank == 0) {
    shoal__op_t op = {.opcode = (uint8_t)a->op0, .dtype = (uint8_t)a->dtype0, .count = a->count0};
    if (a->skip_seq0) {
      shoal__op_t burn = {.opcode = SHOAL__OP_BARRIER};
      shoal__op_begin(c, &burn);
      shoal__op_end(c, &burn, 0);
    }
    if (shoal__op_begin(c, &op)) FAILR("op_begin");
    char expect[256];
    snprintf(expect, sizeof expect, a->expect, op.seq - (unsigned)a->skip_seq0, op.seq);
    int rc = shoal__sendrecv(c, &op, 1, buf, a->count0 * 4, -1, NULL, 0);
    if (!rc) rc = shoal__sendrecv(c, &op, -1, NULL, 0, 1, buf, 4); /* the receiver aborts: we must hear it */
    rc = shoal__op_end(c, &op, rc);
    if (rc != SHOAL_ERR_PEER_CLOSED) FAILR("rank 0: expected peer-closed, got %d: %s", rc, shoal_comm_errmsg(c));
    if (!strstr(shoal_comm_errmsg(c), "peer 1") || !strstr(shoal_comm_errmsg(c), "aborted") ||
        !strstr(shoal_comm_errmsg(c), expect))
      FAILR("rank 0 message: %s\n  expected to contain: %s", shoal_comm_errmsg(c), expect);
  } else {
    shoal__op_t op = {.opcode = (uint8_t)a->op1, .dtype = (uint8_t)a->dtype1, .count = a->count1};
    if (shoal__op_begin(c, &op)) FAILR("op_begin");
    char expect[256];
    snprintf(expect, sizeof expect, a->expect, op.seq, op.seq + (unsigned)a->skip_seq0);
    int rc = shoal__sendrecv(c, &op, -1, NULL, 0, 0, buf, a->count1 * 4);
    rc = shoal__op_end(c, &op, rc);
    if (rc != SHOAL_ERR_MISMATCH) FAILR("rank 1: expected mismatch, got %d: %s", rc, shoal_comm_errmsg(c));
    if (!strstr(shoal_comm_errmsg(c), "rank 1 <- peer 0 (127.0.0.1:") || !strstr(shoal_comm_errmsg(c), expect))
      FAILR("rank 1 message: %s\n  expected to contain: %s", shoal_comm_errmsg(c), expect);
    if (strcmp(shoal_last_error(), shoal_comm_errmsg(c))) FAILR("shoal_last_error differs");
    /* the communicator is aborted now */
    int x = 0;
    rc = shoal_send(c, &x, 1, SHOAL_INT32, 0, 0);
    if (rc != SHOAL_ERR_ABORTED) FAILR("after the error: %d (%s)", rc, shoal_last_error());
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(fault_mismatch_operation, 30) {
  mm_arg_t a = {.w = {.timeout_s = 5}, .op0 = SHOAL__OP_BROADCAST, .op1 = SHOAL__OP_ALLREDUCE, .count0 = 1024,
                .count1 = 1024, .expect = "expected allreduce seq %u count 1024 float32, got broadcast seq %u count 1024 float32"};
  P2P_RUN(2, rank_mismatch, &a.w, 25);
}

TEST_T(fault_mismatch_count, 30) {
  mm_arg_t a = {.w = {.timeout_s = 5}, .op0 = SHOAL__OP_ALLREDUCE, .op1 = SHOAL__OP_ALLREDUCE, .count0 = 1000,
                .count1 = 1024,
                .expect = "expected allreduce seq %u count 1024 float32 (4096 bytes), got allreduce seq %u count 1000 float32 (4000 bytes)"};
  P2P_RUN(2, rank_mismatch, &a.w, 25);
}

TEST_T(fault_mismatch_dtype_and_seq, 30) {
  mm_arg_t a = {.w = {.timeout_s = 5}, .op0 = SHOAL__OP_ALLGATHER, .op1 = SHOAL__OP_ALLGATHER, .count0 = 16,
                .count1 = 16, .dtype0 = SHOAL_INT32, .dtype1 = SHOAL_FLOAT32, .skip_seq0 = 1,
                .expect = "expected allgather seq %u count 16 float32, got allgather seq %u count 16 int32"};
  P2P_RUN(2, rank_mismatch, &a.w, 25);
}

/* send/recv with different tags or counts */
static int rank_p2p_tag(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int v[4] = {1, 2, 3, 4};
  if (rank == 0) {
    if (shoal_send(c, v, 4, SHOAL_INT32, 1, 5)) FAILR("send: %s", shoal_comm_errmsg(c));
  } else {
    int rc = shoal_recv(c, v, 4, SHOAL_INT32, 0, 6);
    if (rc != SHOAL_ERR_MISMATCH) FAILR("expected mismatch, got %d", rc);
    if (!strstr(shoal_comm_errmsg(c), "expected send/recv count 4 int32 tag 6, got send/recv count 4 int32 tag 5"))
      FAILR("message: %s", shoal_comm_errmsg(c));
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(fault_mismatch_tag, 30) {
  p2p_world_arg_t a = {.timeout_s = 5};
  P2P_RUN(2, rank_p2p_tag, &a, 25);
}

/* ---- a rank SIGKILLed mid-transfer: every survivor errors fast, naming it ---- */

static int rank_killed(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int n = a->n, dst = (rank + 1) % n, src = (rank + n - 1) % n;
  size_t B = a->bytes;
  char *s = malloc(B), *r = malloc(B);
  memset(s, rank, B);
  double t_fail = 0;
  int rc = 0;
  for (int it = 0; it < a->iters; it++) {
    if (rank == a->victim && it == 3) {
      /* die in the middle of a transfer: half a message out, then SIGKILL */
      shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .dtype = SHOAL_UINT8, .count = B};
      shoal__op_begin(c, &op);
      shoal__req_t q;
      shoal__isend(c, &op, dst, s, B, &q);
      raise(SIGKILL);
    }
    shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .dtype = SHOAL_UINT8, .count = B};
    if ((rc = shoal__op_begin(c, &op))) break;
    t_fail = mono();
    rc = shoal__sendrecv(c, &op, dst, s, B, src, r, B);
    rc = shoal__op_end(c, &op, rc);
    if (rc) break;
  }
  double took = mono() - t_fail;
  if (rc == 0) FAILR("rank %d: no error although rank %d died", rank, a->victim);
  if (rc == SHOAL_ERR_TIMEOUT) FAILR("rank %d: waited for the deadline: %s", rank, shoal_comm_errmsg(c));
  char want[32];
  snprintf(want, sizeof want, "peer %d", a->victim);
  if (!strstr(shoal_comm_errmsg(c), want)) FAILR("rank %d: message does not name %s: %s", rank, want, shoal_comm_errmsg(c));
  if (took > 3.0) FAILR("rank %d: error after %.1f s", rank, took);
  fprintf(stderr, "rank %d (%.2f s): %s\n", rank, took, shoal_comm_errmsg(c));
  shoal_comm_destroy(c);
  free(s);
  free(r);
  return 0;
}

static void killed_mid_transfer(int shm) {
  p2p_world_arg_t a = {.timeout_s = 8, .bytes = 4u << 20, .iters = 1000, .victim = 2, .shm = shm};
  a.n = 4;
  a.port = shoal_test_free_port();
  int st[4];
  shoal_test_fork_ranks(4, rank_killed, &a, 35, st);
  CHECK_MSG(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL, "victim status %d", st[2]);
  for (int r = 0; r < 4; r++)
    if (r != 2) CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status %d", r, st[r]);
}

TEST_T(fault_rank_killed_mid_transfer, 40) { killed_mid_transfer(0); }
/* the same with same-host ranks on the shared-memory transport (shm.c) */
TEST_T(fault_rank_killed_mid_transfer_shm, 40) { killed_mid_transfer(1); }

/* A timeout message counts the op's wait from its begin (the deadline is
 * begin + SHOAL_TIMEOUT), not from the begin of the wait that expired, which
 * can come after other phases of the op (it said 2.7 s for SHOAL_TIMEOUT=3). */
TEST(fault_timeout_message_counts_from_the_op_begin) {
  shoal_comm_t c = {.timeout_s = 3};
  uint64_t now = 10000000000ull;
  shoal__op_t op = {.opcode = SHOAL__OP_ALLREDUCE, .deadline_ns = now};
  CHECK(fabs(shoal__op_waited(&c, &op, now - 300000000ull, now) - 3.0) < 1e-9);
  op.deadline_ns = now - 200000000ull; /* noticed 0.2 s late */
  CHECK(fabs(shoal__op_waited(&c, &op, now - 300000000ull, now) - 3.2) < 1e-9);
  op.deadline_ns = 0; /* no op deadline: since the wait began */
  CHECK(fabs(shoal__op_waited(&c, &op, now - 300000000ull, now) - 0.3) < 1e-9);
}

/* A call that would not wait on a dead peer still fails once the peer is gone: a shared-memory send into
 * a ring with room, a broadcast root, and a reduce's other non-root returned 0 for as long as the program
 * ran (the ranks look at idle peers' sockets every millisecond of calls). rank 1 dies after the barrier;
 * rank 2 waits for its death, then calls until one fails (at most 2 s of calls). */
static int passed_barrier[2]; /* ranks 0 and 2 say they are past the barrier: then rank 1 may die */

static int rank_sends_to_the_dead(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  if (shoal_barrier(c)) FAILR("barrier: %s", shoal_comm_errmsg(c));
  if (rank == 1) { /* no goodbye, once the others are out of the barrier (it could fail theirs) */
    char b[2];
    struct pollfd pf = {passed_barrier[0], POLLIN, 0};
    for (int got = 0; got < 2;)
      if (poll(&pf, 1, 10000) != 1 || read(passed_barrier[0], b, 1) != 1) FAILR("the others did not pass the barrier");
      else got++;
    _exit(0);
  }
  if (write(passed_barrier[1], "x", 1) != 1) FAILR("pipe");
  if (rank == 0) { /* the other survivor: gone before rank 2 looks, normally */
    shoal_comm_destroy(c);
    return 0;
  }
  shoal__sleep_s(0.5);
  int v = 7, rc = 0;
  double t0 = mono();
  int calls = 0;
  while (!rc && mono() - t0 < 2) {
    switch (a->iters) { /* which call */
    case 0: rc = shoal_send(c, &v, 1, SHOAL_INT32, 1, 5); break;
    case 1: rc = shoal_broadcast(c, &v, 1, SHOAL_INT32, 2); break;
    default: rc = shoal_reduce(c, &v, NULL, 1, SHOAL_INT32, SHOAL_SUM, 0); break;
    }
    calls++;
    shoal__sleep_s(0.002);
  }
  if (!rc) FAILR("%d calls after the death of rank 1 all returned 0", calls);
  if (rc != SHOAL_ERR_PEER_CLOSED || !strstr(shoal_comm_errmsg(c), "died or was killed"))
    FAILR("call %d: %d: %s", calls, rc, shoal_comm_errmsg(c));
  shoal_comm_destroy(c);
  return 0;
}

static void sends_to_the_dead(int shm) {
  for (int which = 0; which < 3; which++) {
    p2p_world_arg_t a = {.n = 3, .timeout_s = 5, .shm = shm, .iters = which};
    a.port = shoal_test_free_port();
    int st[3];
    CHECK(pipe(passed_barrier) == 0);
    shoal_test_fork_ranks(3, rank_sends_to_the_dead, &a, 25, st);
    close(passed_barrier[0]);
    close(passed_barrier[1]);
    CHECK_MSG(st[2] != -1 && WIFEXITED(st[2]) && WEXITSTATUS(st[2]) == 0, "call kind %d: rank 2 status %d", which,
              st[2]);
  }
}

TEST_T(fault_call_without_waiting_sees_dead_peer_shm, 40) { sends_to_the_dead(1); }
TEST_T(fault_call_without_waiting_sees_dead_peer_tcp, 40) { sends_to_the_dead(0); }

/* ---- a peer that hangs (alive, silent): the deadline fires and names it ---- */

static int rank_silent(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int v = 0;
  if (rank == 1) {
    double t0 = mono();
    int rc = shoal_recv(c, &v, 1, SHOAL_INT32, 0, 1);
    double took = mono() - t0;
    if (rc != SHOAL_ERR_TIMEOUT) FAILR("expected timeout, got %d: %s", rc, shoal_comm_errmsg(c));
    if (took < 1.5 || took > 4) FAILR("timeout after %.2f s (SHOAL_TIMEOUT 2 s)", took);
    if (!strstr(shoal_comm_errmsg(c), "rank 1 <- peer 0 (127.0.0.1:") || !strstr(shoal_comm_errmsg(c), "timed out after 2."))
      FAILR("message: %s", shoal_comm_errmsg(c));
  } else {
    shoal__sleep_s(3);
    /* rank 1 gave up and aborted: we learn it at once, not after our own deadline */
    double t0 = mono();
    int rc = shoal_recv(c, &v, 1, SHOAL_INT32, 1, 2);
    if (rc != SHOAL_ERR_PEER_CLOSED || mono() - t0 > 1.0) FAILR("rank 0: %d after %.1f s: %s", rc, mono() - t0, shoal_comm_errmsg(c));
    if (!strstr(shoal_comm_errmsg(c), "aborted") || !strstr(shoal_comm_errmsg(c), "timed out"))
      FAILR("rank 0 message: %s", shoal_comm_errmsg(c));
  }
  shoal_comm_destroy(c);
  return 0;
}



TEST_T(fault_silent_peer_times_out, 30) {
  p2p_world_arg_t a = {.timeout_s = 2};
  P2P_RUN(2, rank_silent, &a, 25);
}

/* ---- a rank that never arrives ---- */

static int rank_absent(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  if (rank == a->victim) return 0;
  double t0 = mono();
  shoal_comm_t *c = NULL;
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.connect_timeout_s = a->connect_timeout_s;
  int rc = shoal_comm_init(&p, &c);
  double took = mono() - t0;
  if (rc != SHOAL_ERR_TIMEOUT) FAILR("rank %d: expected timeout, got %d: %s", rank, rc, shoal_last_error());
  if (!strstr(shoal_last_error(), "rank 2 did not arrive")) FAILR("rank %d message: %s", rank, shoal_last_error());
  if (took > a->connect_timeout_s + 3) FAILR("rank %d: failed after %.1f s", rank, took);
  return 0;
}

TEST_T(fault_rank_never_arrives, 30) {
  p2p_world_arg_t a = {.connect_timeout_s = 2, .victim = 2};
  P2P_RUN(3, rank_absent, &a, 25);
}

/* ---- wrong token ---- */

static int rank_token(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  char logpath[64];
  snprintf(logpath, sizeof logpath, "/tmp/shoal-token-test-%d.log", (int)getpid());
  if (rank == 0) { /* capture the store's WARN lines */
    int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    close(fd);
  }
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.connect_timeout_s = a->connect_timeout_s;
  p.token = rank == a->victim ? "not-the-secret" : "the-secret";
  shoal_comm_t *c = NULL;
  int rc = shoal_comm_init(&p, &c);
  if (rank == a->victim) {
    if (rc != SHOAL_ERR_AUTH) FAILR("wrong-token rank: expected auth error, got %d: %s", rc, shoal_last_error());
    if (!strstr(shoal_last_error(), "refused this rank: wrong SHOAL_TOKEN")) FAILR("message: %s", shoal_last_error());
    return 0;
  }
  if (rc != SHOAL_ERR_TIMEOUT || !strstr(shoal_last_error(), "rank 2 did not arrive"))
    FAILR("rank %d: %d %s", rank, rc, shoal_last_error());
  if (rank == 0) {
    char log[8192] = "";
    FILE *f = fopen(logpath, "r");
    size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
    log[n] = '\0';
    if (f) fclose(f);
    unlink(logpath);
    if (!strstr(log, "wrong token: refused")) {
      fprintf(stdout, "store log: %s\n", log);
      return 1;
    }
  }
  return 0;
}

TEST_T(fault_wrong_token, 30) {
  p2p_world_arg_t a = {.connect_timeout_s = 2, .victim = 2};
  P2P_RUN(3, rank_token, &a, 25);
}

/* ---- garbage on the store port never crashes rank 0 ---- */

static int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 200; i++) {
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    usleep(10000);
  }
  close(fd);
  return -1;
}

static int rank_garbage(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  if (rank == 1) {
    /* hostile clients first: random bytes, a giant frame, an unknown type, and one that stays silent */
    unsigned char junk[512];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 37 + 11);
    int f1 = raw_connect(a->port);
    if (f1 < 0) FAILR("cannot reach the store");
    if (write(f1, junk, sizeof junk) < 0) FAILR("write");
    int f2 = raw_connect(a->port);
    unsigned char big[8] = {0xff, 0xff, 0xff, 0x7f, 5, 0, 0, 0};
    if (write(f2, big, sizeof big) < 0) FAILR("write");
    int f3 = raw_connect(a->port);
    unsigned char unk[12] = {4, 0, 0, 0, 77, 0, 0, 0, 1, 2, 3, 4};
    if (write(f3, unk, sizeof unk) < 0) FAILR("write");
    int f4 = raw_connect(a->port);
    usleep(100000);
    close(f1);
    close(f2);
    close(f3);
    shoal_comm_t *c = p2p_join(rank, a);
    close(f4);
    if (!c) return 2;
    int v = 42;
    if (shoal_send(c, &v, 1, SHOAL_INT32, 0, 0)) FAILR("send: %s", shoal_comm_errmsg(c));
    shoal_comm_destroy(c);
    return 0;
  }
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  int v = 0;
  if (shoal_recv(c, &v, 1, SHOAL_INT32, 1, 0) || v != 42) FAILR("recv: %s", shoal_comm_errmsg(c));
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(fault_garbage_on_store_port, 30) {
  p2p_world_arg_t a = {.connect_timeout_s = 10};
  P2P_RUN(2, rank_garbage, &a, 25);
}

/* ---- port already in use ---- */

TEST_T(fault_port_in_use, 20) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 4) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
  int port = ntohs(sa.sin_port);
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = 0;
  p.world_size = 2;
  p.master_addr = "127.0.0.1";
  p.master_port = port;
  p.connect_timeout_s = 2;
  shoal_comm_t *c = NULL;
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_ADDR_IN_USE);
  CHECK(c == NULL);
  char want[64];
  snprintf(want, sizeof want, "bind 127.0.0.1:%d: address already in use", port);
  CHECK_CONTAINS(shoal_last_error(), want);
  close(fd);
}

/* ---- malformed environment values ---- */

static void env_expect(const char *want_in_msg) {
  shoal_comm_t *c = NULL;
  int rc = shoal_comm_init_env(&c);
  CHECK_MSG(rc == SHOAL_ERR_CONFIG, "expected a config error for '%s', got %d: %s", want_in_msg, rc, shoal_last_error());
  CHECK_CONTAINS(shoal_last_error(), want_in_msg);
}

TEST_T(fault_malformed_environment, 20) {
  static const char *const vars[] = {"SHOAL_RANK", "SHOAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                     "SHOAL_MASTER_PORT", "MASTER_PORT", "SHOAL_MASTER_ADDR", "MASTER_ADDR"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  setenv("SHOAL_RANK", "abc", 1);
  setenv("SHOAL_WORLD_SIZE", "2", 1);
  env_expect("SHOAL_RANK='abc'");
  setenv("SHOAL_RANK", "2", 1);
  env_expect("SHOAL_RANK=2 is not below SHOAL_WORLD_SIZE=2");
  setenv("SHOAL_RANK", "0", 1);
  setenv("SHOAL_WORLD_SIZE", "-3", 1);
  env_expect("SHOAL_WORLD_SIZE='-3'");
  unsetenv("SHOAL_WORLD_SIZE");
  env_expect("SHOAL_RANK is set but SHOAL_WORLD_SIZE is not");
  unsetenv("SHOAL_RANK");
  setenv("RANK", "x1", 1);
  setenv("WORLD_SIZE", "4", 1);
  env_expect("RANK='x1'");
  setenv("RANK", "1", 1);
  setenv("MASTER_PORT", "70000", 1);
  env_expect("MASTER_PORT='70000'");
  setenv("SHOAL_MASTER_PORT", "http", 1);
  env_expect("SHOAL_MASTER_PORT='http'");
  unsetenv("SHOAL_MASTER_PORT");
  unsetenv("MASTER_PORT");
  setenv("SHOAL_TIMEOUT", "soon", 1);
  env_expect("SHOAL_TIMEOUT='soon'");
  unsetenv("SHOAL_TIMEOUT");
  setenv("SHOAL_TCP_CONGESTION", "Cubic!", 1);
  env_expect("SHOAL_TCP_CONGESTION='Cubic!': expected auto, system or an algorithm name");
  unsetenv("SHOAL_TCP_CONGESTION");
  /* read by the algorithms when they plan: checked when the world is created, not at the first big call */
  setenv("SHOAL_CHUNK_BYTES", "64k", 1);
  env_expect("SHOAL_CHUNK_BYTES='64k': not an integer");
  unsetenv("SHOAL_CHUNK_BYTES");
  setenv("SHOAL_TREES", "2:foo", 1);
  env_expect("SHOAL_TREES='2:foo'");
  unsetenv("SHOAL_TREES");
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "5", 1);
  env_expect("SLURM_PROCID=5 is not below SLURM_NTASKS=5");
}

TEST_T(fault_ifname_matches_nothing, 20) {
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = 0;
  p.world_size = 2;
  p.master_addr = "127.0.0.1";
  p.master_port = 0;
  p.ifname = "nosuchif9,=eth99";
  p.connect_timeout_s = 2;
  shoal_comm_t *c = NULL;
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "params.ifname='nosuchif9,=eth99' matches no interface");
  CHECK_CONTAINS(shoal_last_error(), "lo 127.0.0.1");
  /* any rank, before it looks for the store (which is not there: it would wait out connect_timeout_s) */
  p.rank = 1;
  p.master_port = shoal_test_free_port();
  p.connect_timeout_s = 30;
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "rank 1: params.ifname='nosuchif9,=eth99' matches no interface");
}

/* A world far larger than the ranks that came: the timeout message counts the missing ranks within its
 * own bounded look at the store (it asked about each, one round trip and a fresh 2 s deadline apiece:
 * minutes for a million). The 30 s bound is a hang check, not a timing. */
TEST_T(fault_rendezvous_timeout_huge_world_bounded, 60) {
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = 0;
  p.world_size = 1000000;
  p.master_addr = "127.0.0.1";
  p.master_port = 0;
  p.connect_timeout_s = 0.5;
  shoal_comm_t *c = NULL;
  double t0 = mono();
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_TIMEOUT);
  CHECK_MSG(mono() - t0 < 30, "took %.1f s", mono() - t0);
  CHECK_CONTAINS(shoal_last_error(), "ranks 1, 2, 3");
  CHECK_CONTAINS(shoal_last_error(), ", ... did not arrive within 0.5 s");
}

/* The same at the collective level: a ring allreduce over TCP where rank 2
 * of 5 is SIGKILLed while the others are inside the allreduce. Every
 * survivor, neighbour or not, fails fast and the message names peer 2. */
static int rank_killed_allreduce(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  shoal_comm_t *c = p2p_join(rank, a);
  if (!c) return 2;
  size_t n = a->bytes / 4;
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = 1.0f;
  int rc = 0;
  double t_fail = 0;
  for (int it = 0; it < a->iters && !rc; it++) {
    if (rank == a->victim && it == 3) {
      shoal__sleep_s(0.05); /* the others are already waiting inside the allreduce */
      raise(SIGKILL);
    }
    t_fail = mono();
    rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, x, n, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_RING);
  }
  double took = mono() - t_fail;
  if (rc == 0) FAILR("rank %d: no error", rank);
  if (rc == SHOAL_ERR_TIMEOUT) FAILR("rank %d: waited for the deadline: %s", rank, shoal_comm_errmsg(c));
  if (!strstr(shoal_comm_errmsg(c), "peer 2")) FAILR("rank %d: message does not name peer 2: %s", rank, shoal_comm_errmsg(c));
  if (took > 3.0) FAILR("rank %d: error after %.1f s", rank, took);
  if (shoal_barrier(c) != SHOAL_ERR_ABORTED) FAILR("rank %d: the communicator is not aborted", rank);
  shoal_comm_destroy(c);
  free(x);
  return 0;
}

TEST_T(fault_rank_killed_mid_ring_allreduce, 40) {
  p2p_world_arg_t a = {.timeout_s = 8, .bytes = 4u << 20, .iters = 1000, .victim = 2};
  a.n = 5;
  a.port = shoal_test_free_port();
  int st[5];
  shoal_test_fork_ranks(5, rank_killed_allreduce, &a, 35, st);
  CHECK_MSG(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL, "victim status %d", st[2]);
  for (int r = 0; r < 5; r++)
    if (r != 2) CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status %d", r, st[r]);
}

/* A rank that registers with the store and then vanishes before the mesh
 * (here: a fake rank 1 that publishes a dead address). The rank that must
 * connect to it fails within seconds naming it, not at the connect
 * deadline; the rank that waits for its connection fails at the deadline,
 * naming it too. */
static int rank_vanished(int rank, void *arg) {
  p2p_world_arg_t *a = arg;
  if (rank == 1) {
    shoal__authkey_t key;
    shoal__auth_key("", &key);
    shoal__store_client_t sc;
    if (shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, a->port, &key, shoal__deadline_in(10), &sc)) FAILR("store: %s", shoal_last_error());
    char val[128];
    snprintf(val, sizeof val, "127.0.0.1:%d fakehost fakeboot", shoal_test_free_port());
    if (shoal__store_set(&sc, "rank/1", val, strlen(val), shoal__deadline_in(10))) FAILR("set");
    shoal__store_close(&sc);
    return 0;
  }
  double t0 = mono();
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = 3;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.connect_timeout_s = a->connect_timeout_s;
  setenv("SHOAL_SHM", "0", 1);
  shoal_comm_t *c = NULL;
  int rc = shoal_comm_init(&p, &c);
  double took = mono() - t0;
  if (rank == 2) { /* connects to ranks 0 and 1 */
    if (rc == 0 || !strstr(shoal_last_error(), "peer 1 registered with the store but cannot be reached"))
      FAILR("rank 2: %d: %s", rc, shoal_last_error());
    if (took > 4) FAILR("rank 2 failed after %.1f s (connect deadline %.0f s)", took, a->connect_timeout_s);
  } else { /* rank 0 waits for rank 1's connection */
    if (rc != SHOAL_ERR_TIMEOUT || !strstr(shoal_last_error(), "rank 1 registered with the store but did not connect"))
      FAILR("rank 0: %d: %s", rc, shoal_last_error());
  }
  return 0;
}

TEST_T(fault_rank_vanishes_after_registering, 40) {
  p2p_world_arg_t a = {.connect_timeout_s = 5};
  P2P_RUN(3, rank_vanished, &a, 35);
}
