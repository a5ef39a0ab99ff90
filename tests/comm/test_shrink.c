/* Surviving a lost rank: shrink after a SIGKILL (over TCP and over shared memory, the survivors noticing
 * the loss in different calls), the collective matrix of test_coll.c on the shrunk and on the grown
 * communicator (same references, bit for bit), rank 0 lost (no store: shrink still works, the door moves
 * to the new rank 0 and a new process enters), a live rank that never calls shrink (the deadline names
 * it), and a newcomer of another job refused at the door. */
#define SHOAL_COLL_MATRIX_ONLY
#include "test_coll.c"

#include <signal.h>
#include <time.h>

static void (*const unused_run_world)(int) __attribute__((unused)) = run_world; /* test_coll.c's, not used here */

typedef struct sk {
  group_t g;       /* g.n: ranks of the original world (plus the joiner's slot when joiner) */
  int shm;
  int victim;      /* rank that dies by SIGKILL */
  int joiner;      /* 1: slot g.n - 1 is a new process that joins after the shrink */
  int matrix;      /* run the collective matrix on the final communicator */
  const char *joiner_job; /* SHOAL_JOB_ID of the joiner (the world's is unset) */
} sk_t;

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define FAILR(...)                                    \
  do {                                                \
    fprintf(stderr, "rank %d: ", g_rank);             \
    fprintf(stderr, __VA_ARGS__);                     \
    fprintf(stderr, "\n");                            \
    return 1;                                         \
  } while (0)

static void params_for(const sk_t *a, int rank, int n, shoal_comm_params_t *p) {
  shoal_comm_params_init(p);
  p->rank = rank;
  p->world_size = n;
  p->master_addr = "127.0.0.1";
  p->master_port = a->g.port;
  p->timeout_s = 20;
  p->connect_timeout_s = 20;
}

/* The survivor's first call after the loss, a different one per rank; it must fail. */
static int notice(shoal_comm_t *c, int rank, int victim) {
  int rc = 0;
  float v[1009];
  memset(v, 0, sizeof v);
  switch (rank % 4) {
  case 0: /* already inside a collective: allreduces until one fails */
    for (int i = 0; i < 100000 && !rc; i++) rc = shoal_allreduce(c, SHOAL_IN_PLACE, v, 1009, SHOAL_FLOAT32, SHOAL_SUM);
    break;
  case 1: /* busy computing, then a barrier */
    usleep(300000);
    rc = shoal_barrier(c);
    break;
  case 2: /* a receive from the lost rank itself */
    usleep(600000);
    rc = shoal_recv(c, v, 4, SHOAL_FLOAT32, victim, 7);
    break;
  default: /* no call at all: straight to shrink, which revokes c itself */
    usleep(900000);
    return 0;
  }
  if (rc == 0) FAILR("no error although rank %d died", victim);
  fprintf(stderr, "rank %d noticed: %s\n", rank, shoal_comm_errmsg(c));
  return 0;
}

static int survivor(const sk_t *a, shoal_comm_t *c, int rank, int n, int noticed) {
  if (!noticed && notice(c, rank, a->victim)) return 1;
  shoal_comm_t *nc = NULL;
  double t0 = mono();
  int rc = shoal_comm_shrink(c, &nc);
  if (rc) FAILR("shrink: %s", shoal_last_error());
  int want = rank - (rank > a->victim);
  if (shoal_comm_size(nc) != n - 1 || shoal_comm_rank(nc) != want || shoal_comm_world_rank(nc) != want)
    FAILR("shrunk to rank %d of %d, expected %d of %d", shoal_comm_rank(nc), shoal_comm_size(nc), want, n - 1);
  fprintf(stderr, "rank %d: shrink took %.3f s\n", rank, mono() - t0);
  /* the old communicator stays aborted */
  if (shoal_barrier(c) != SHOAL_ERR_ABORTED) FAILR("the old communicator is not aborted");
  shoal_comm_destroy(c);
  int fails = 0;
  if (a->matrix) {
    group_t g = a->g;
    g.n = n - 1;
    fails += matrix(nc, &g);
  }
  if (a->shm) { /* the survivors' own shm segment: the shm-native algorithm on them */
    fails += t_allreduce(nc, SHOAL_ALGO_SHM, SHOAL_FLOAT32, SHOAL_SUM, PRIME, 0);
    fails += t_allreduce(nc, SHOAL_ALGO_SHM, SHOAL_BFLOAT16, SHOAL_AVG, BIG_BYTES / 2 + 3, 1);
  }
  shoal_comm_destroy(nc);
  if (fails) FAILR("%d failures on the shrunk communicator", fails);
  return 0;
}

static int shrink_rank(int rank, void *arg) {
  const sk_t *a = arg;
  g_rank = rank;
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1);
  shoal_comm_params_t p;
  params_for(a, rank, a->g.n, &p);
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) FAILR("init: %s", shoal_last_error());
  /* the victim may die before a slower rank left the barrier: that rank noticed already */
  int noticed = shoal_barrier(c) != 0;
  if (rank == a->victim) raise(SIGKILL);
  return survivor(a, c, rank, a->g.n, noticed);
}

static void run_shrink(sk_t *a, double timeout) {
  a->g.port = shoal_test_free_port();
  snprintf(a->g.dir, sizeof a->g.dir, "/tmp/shoal-shrink-XXXXXX");
  CHECK(mkdtemp(a->g.dir) != NULL);
  int st[8];
  shoal_test_fork_ranks(a->g.n, shrink_rank, a, timeout, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", a->g.dir);
  if (system(cmd)) { /* best effort */
  }
  CHECK_MSG(st[a->victim] != -1 && WIFSIGNALED(st[a->victim]) && WTERMSIG(st[a->victim]) == SIGKILL,
            "victim status 0x%x", st[a->victim]);
  for (int r = 0; r < a->g.n; r++)
    if (r != a->victim)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d %s (status 0x%x)", r,
                st[r] == -1 ? "timed out" : "failed", st[r]);
}

TEST_T(shrink_after_kill_tcp_5, 200) {
  sk_t a = {.g = {.n = 5}, .shm = 0, .victim = 2, .matrix = 1};
  run_shrink(&a, 180);
}

TEST_T(shrink_after_kill_shm_4, 200) {
  sk_t a = {.g = {.n = 4}, .shm = 1, .victim = 1, .matrix = 1};
  run_shrink(&a, 180);
}

/* ---- rank 0 (the store's rank) lost: shrink without it, then a new process enters at the door, which
 * the new rank 0 opened on the master port of its host ---- */

/* The grown communicator: every reduction dtype and op at a prime count, plus order-sensitive inputs
 * (identical bits on every rank); the whole matrix runs on the shrunk communicators above. */
static int light(shoal_comm_t *c) {
  int fails = 0;
  for (int di = 0; di < NRED; di++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++)
      if (!shoal_redop_supported(red_dtypes[di], op))
        fails += t_allreduce(c, SHOAL_ALGO_AUTO, red_dtypes[di], (shoal_redop_t)op, PRIME, di % 3);
  for (int a = 0; a < 3; a++) fails += t_identical(c, algos[a], SHOAL_FLOAT32, SHOAL_SUM, PRIME);
  fails += t_allgather(c, SHOAL_FLOAT64, PRIME, 0);
  fails += t_broadcast(c, SHOAL_UINT8, BIG_BYTES + 7, shoal_comm_size(c) - 1);
  return fails;
}

static int joiner_rank(const sk_t *a, int expect_rank, int expect_size) {
  usleep(300000);
  if (a->joiner_job) setenv("SHOAL_JOB_ID", a->joiner_job, 1);
  shoal_comm_params_t p;
  params_for(a, -1, -1, &p);
  p.connect_timeout_s = a->joiner_job ? 6 : 30;
  shoal_comm_t *c = NULL;
  int rc = shoal_comm_join(&p, &c);
  if (a->joiner_job) { /* another job: refused at the door, naming both */
    if (rc != SHOAL_ERR_CONFIG || !strstr(shoal_last_error(), "belongs to job"))
      FAILR("expected a refusal naming the jobs, got %d: %s", rc, shoal_last_error());
    fprintf(stderr, "joiner refused: %s\n", shoal_last_error());
    return 0;
  }
  if (rc) FAILR("join: %s", shoal_last_error());
  if (!shoal_comm_joined(c) || shoal_comm_rank(c) != expect_rank || shoal_comm_size(c) != expect_size)
    FAILR("joined as rank %d of %d (joined %d), expected %d of %d", shoal_comm_rank(c), shoal_comm_size(c),
          shoal_comm_joined(c), expect_rank, expect_size);
  g_rank = expect_rank;
  int fails = light(c);
  shoal_comm_destroy(c);
  return fails ? 1 : 0;
}

/* Call grow until the newcomer is in (every rank calls it the same number of times: it is collective). */
static int grow_until(shoal_comm_t *c, shoal_comm_t **out) {
  for (int i = 0; i < 400; i++) {
    shoal_comm_t *gc = NULL;
    int rc = shoal_comm_grow(c, &gc);
    if (rc) FAILR("grow: %s", shoal_last_error());
    if (gc) {
      *out = gc;
      return 0;
    }
    usleep(50000);
  }
  FAILR("nobody entered within 20 s");
}

static int rank0_lost_rank(int rank, void *arg) {
  const sk_t *a = arg;
  int n = a->g.n - 1; /* the last slot is the new process */
  g_rank = rank;
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1);
  if (rank == n) return joiner_rank(a, n - 1, n);
  shoal_comm_params_t p;
  params_for(a, rank, n, &p);
  shoal_comm_t *c = NULL, *nc = NULL, *gc = NULL;
  if (shoal_comm_init(&p, &c)) FAILR("init: %s", shoal_last_error());
  int rc = shoal_barrier(c); /* rank 0 may die before a slower rank left it: then that rank noticed there */
  if (rank == 0) raise(SIGKILL);
  int32_t v = 1;
  if (rc == 0) rc = shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM);
  if (rc == 0) FAILR("no error although rank 0 died");
  if (!strstr(shoal_comm_errmsg(c), "peer 0") && !strstr(shoal_comm_errmsg(c), "aborted"))
    FAILR("the error names neither rank 0 nor an abort: %s", shoal_comm_errmsg(c));
  if ((rc = shoal_comm_shrink(c, &nc))) FAILR("shrink: %s", shoal_last_error());
  shoal_comm_destroy(c);
  if (shoal_comm_size(nc) != n - 1 || shoal_comm_rank(nc) != rank - 1) FAILR("shrunk to the wrong shape");
  g_rank = rank - 1;
  if (grow_until(nc, &gc)) return 1;
  shoal_comm_destroy(nc);
  if (shoal_comm_size(gc) != n || shoal_comm_rank(gc) != rank - 1 || shoal_comm_joined(gc))
    FAILR("grown to rank %d of %d", shoal_comm_rank(gc), shoal_comm_size(gc));
  int fails = light(gc);
  shoal_comm_destroy(gc);
  return fails ? 1 : 0;
}

static void run_rank0_lost(sk_t *a) {
  a->g.port = shoal_test_free_port();
  snprintf(a->g.dir, sizeof a->g.dir, "/tmp/shoal-grow-XXXXXX");
  CHECK(mkdtemp(a->g.dir) != NULL);
  int st[8];
  shoal_test_fork_ranks(a->g.n, rank0_lost_rank, a, 180, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", a->g.dir);
  if (system(cmd)) { /* best effort */
  }
  CHECK_MSG(st[0] != -1 && WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL, "rank 0 status 0x%x", st[0]);
  for (int r = 1; r < a->g.n; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "slot %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

/* 4 ranks over TCP, rank 0 killed: 3 survivors, then a new process makes 4 again (the matrix on them) */
TEST_T(shrink_rank0_lost_then_grow_tcp, 200) {
  sk_t a = {.g = {.n = 5}, .shm = 0};
  run_rank0_lost(&a);
}

/* the same over shared memory: the newcomer joins the survivors' host group */
TEST_T(shrink_rank0_lost_then_grow_shm, 120) {
  sk_t a = {.g = {.n = 4}, .shm = 1};
  run_rank0_lost(&a);
}

/* ---- a live rank that never calls shrink: the coordinator fails at the deadline, naming it ---- */

static int silent_rank(int rank, void *arg) {
  const sk_t *a = arg;
  g_rank = rank;
  setenv("SHOAL_SHM", "0", 1);
  shoal_comm_params_t p;
  params_for(a, rank, a->g.n, &p);
  p.timeout_s = 2;
  shoal_comm_t *c = NULL, *nc = NULL;
  if (shoal_comm_init(&p, &c)) FAILR("init: %s", shoal_last_error());
  shoal_barrier(c); /* may fail if rank 1 is faster to die than this rank to leave it */
  if (rank == 1) raise(SIGKILL);
  if (rank == 2) { /* alive, never shrinks */
    usleep(5000000);
    shoal_comm_destroy(c);
    return 0;
  }
  double t0 = mono();
  int rc = shoal_comm_shrink(c, &nc);
  double took = mono() - t0;
  if (rc != SHOAL_ERR_TIMEOUT || !strstr(shoal_last_error(), "rank(s) 2 alive"))
    FAILR("expected a timeout naming rank 2, got %d: %s", rc, shoal_last_error());
  if (took > 4.5) FAILR("failed after %.1f s (deadline 2 s)", took);
  fprintf(stderr, "rank 0 (%.1f s): %s\n", took, shoal_last_error());
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(shrink_silent_rank_named_at_deadline, 60) {
  sk_t a = {.g = {.n = 3}};
  a.g.port = shoal_test_free_port();
  int st[3];
  shoal_test_fork_ranks(3, silent_rank, &a, 40, st);
  CHECK_MSG(st[0] != -1 && WIFEXITED(st[0]) && WEXITSTATUS(st[0]) == 0, "rank 0 status 0x%x", st[0]);
  CHECK_MSG(st[2] != -1 && WIFEXITED(st[2]) && WEXITSTATUS(st[2]) == 0, "rank 2 status 0x%x", st[2]);
}

/* ---- the door refuses a process of another job ---- */

static int other_job_rank(int rank, void *arg) {
  const sk_t *a = arg;
  g_rank = rank;
  setenv("SHOAL_SHM", "0", 1);
  if (rank == 2) return joiner_rank(a, 0, 0);
  setenv("SHOAL_JOB_ID", "job-A", 1);
  shoal_comm_params_t p;
  params_for(a, rank, 2, &p);
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) FAILR("init: %s", shoal_last_error());
  for (int i = 0; i < 40; i++) { /* 4 s of grows: the stranger arrives and is refused; nobody enters */
    shoal_comm_t *gc = NULL;
    if (shoal_comm_grow(c, &gc)) FAILR("grow: %s", shoal_last_error());
    if (gc) FAILR("a process of another job was admitted");
    usleep(100000);
  }
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(grow_refuses_another_job, 60) {
  sk_t a = {.g = {.n = 3}, .joiner_job = "job-B"};
  a.g.port = shoal_test_free_port();
  int st[3];
  shoal_test_fork_ranks(3, other_job_rank, &a, 40, st);
  for (int r = 0; r < 3; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "slot %d status 0x%x", r, st[r]);
}
