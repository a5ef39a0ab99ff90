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
#include <sys/time.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct rarg {
  int port, n, shm, kind;
  double timeout_s, connect_s;
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
  p.connect_timeout_s = a->connect_s > 0 ? a->connect_s : 20;
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

/* The first argument error aborts the communicator (SHOAL_ERR_INVALID); every
 * later call returns SHOAL_ERR_ABORTED at once (comm.h), its own argument
 * error after the first one in the message ("this call: ..."). */
#define EXPECT_INVALID(expr)                                                                   \
  do {                                                                                         \
    int _rc = (expr);                                                                          \
    if (rejected) {                                                                            \
      CHECK_MSG(_rc == SHOAL_ERR_ABORTED && strstr(shoal_last_error(), "this call:"),         \
                "%s = %d (%s)", #expr, _rc, shoal_last_error());                              \
    } else {                                                                                   \
      CHECK_MSG(_rc == SHOAL_ERR_INVALID, "%s = %d (%s)", #expr, _rc, shoal_last_error());    \
    }                                                                                          \
    rejected = 1;                                                                              \
    CHECK_CONTAINS(shoal_comm_errmsg(c), "rank");                                             \
  } while (0)

static int in_place_rank(int rank, void *arg) {
  shoal_comm_t *c;
  if (join(arg, rank, &c)) return 2;
  float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  void *ip = (void *)SHOAL_IN_PLACE;
  int rejected = 0;
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

/* ---- mismatched calls over shared memory and the hierarchy ---- */

typedef struct mmarg {
  rarg_t r;
  int kind;
  shoal_algo_t algo;
  const char *hosts[4]; /* SHOAL_HOSTNAME per rank (hier), or NULL */
} mmarg_t;

enum { MM_COUNT_TINY, MM_COUNT_LARGE, MM_DTYPE, MM_OP, MM_VS_BARRIER, MM_SKIP, MM_ROOT, MM_BCAST_ROOT, MM_VS_BCAST,
       MM_VS_BCAST_SMALL, MM__N };
/* MM_ROOT: a reduce whose ranks disagree on the root (the root rides in the header).
 * MM_BCAST_ROOT: the last rank broadcasts from root 1, the others from root 0: it
 * waits for rank 1, which moves on to the next call (found at once, not at the deadline).
 * MM_VS_BCAST: all ranks but the last broadcast (large: over the rings, a tree), the last allreduces:
 * it waits for rank 0's shm step while another rank of the tree sends it the broadcast (found at once).
 * MM_VS_BCAST_SMALL: all ranks but the last broadcast 64 floats from root 0 (shm steps), the last one
 * allreduces them (found at once, whatever algorithm it runs). */
static const char *const mm_names[] = {"count (tiny)", "count (large)", "dtype", "op", "allreduce vs barrier",
                                       "skipped call", "reduce root", "broadcast root", "allreduce vs broadcast",
                                       "allreduce vs small broadcast"};

static int mm_rank(int rank, void *arg) {
  mmarg_t *m = arg;
  if (m->hosts[0]) setenv("SHOAL_HOSTNAME", m->hosts[rank], 1);
  shoal_comm_t *c;
  if (join(&m->r, rank, &c)) return 2;
  size_t big = (3u << 20) / 4; /* several chunks of the large path */
  float *f = calloc(2 * big, sizeof *f);
  for (size_t i = 0; i < 2 * big; i++) f[i] = 1.0f;
  int odd = rank == 0; /* the rank that calls differently */
  shoal_algo_t a = m->algo;
  int rc = shoal_barrier(c); /* may already see a faster rank's mismatch error */
  if (!rc) switch (m->kind) {
  case MM_COUNT_TINY: rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, odd ? 4 : 8, SHOAL_FLOAT32, SHOAL_SUM, a); break;
  case MM_COUNT_LARGE:
    rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, odd ? big : 2 * big, SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  case MM_DTYPE:
    rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 64, odd ? SHOAL_INT32 : SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  case MM_OP: rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 64, SHOAL_FLOAT32, odd ? SHOAL_MAX : SHOAL_SUM, a); break;
  case MM_VS_BARRIER:
    rc = odd ? shoal_barrier(c) : shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 8, SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  case MM_SKIP: /* the odd rank skips the first of two allreduces */
    if (!odd) rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 4, SHOAL_FLOAT32, SHOAL_SUM, a);
    if (!rc) rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 8, SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  case MM_ROOT: rc = shoal_reduce(c, SHOAL_IN_PLACE, f, 64, SHOAL_FLOAT32, SHOAL_SUM, odd ? 0 : 1); break;
  case MM_BCAST_ROOT: rc = shoal_broadcast(c, f, 100, SHOAL_FLOAT32, rank == shoal_comm_size(c) - 1 ? 1 : 0); break;
  case MM_VS_BCAST: /* twice: a rank that finished its first broadcast stays off the shm steps */
    if (rank < shoal_comm_size(c) - 1) {
      rc = shoal_broadcast(c, f, big, SHOAL_FLOAT32, 0);
      if (!rc) rc = shoal_broadcast(c, f, big, SHOAL_FLOAT32, 0);
    } else rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, big, SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  case MM_VS_BCAST_SMALL:
    if (rank < shoal_comm_size(c) - 1) rc = shoal_broadcast(c, f, 64, SHOAL_FLOAT32, 0);
    else rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, f, 64, SHOAL_FLOAT32, SHOAL_SUM, a);
    break;
  }
  /* every rank fails: in this call, or (a root that only sends) in the next one */
  if (rc == 0) rc = shoal_barrier(c);
  CHECK_MSG(rc != 0, "%s, %s: rank %d returned 0 from mismatched calls", shoal_algo_name(a), mm_names[m->kind], rank);
  const char *e = shoal_comm_errmsg(c);
  /* two ranks that both believe they are the root of a reduce wait for each other: the deadline */
  CHECK_MSG(strstr(e, "mismatch") || strstr(e, "expected") || strstr(e, "aborted") ||
                (m->kind == MM_ROOT && strstr(e, "timed out")), "%s: %s", mm_names[m->kind], e);
  CHECK_MSG((m->kind != MM_BCAST_ROOT && m->kind != MM_VS_BCAST && 
             m->kind != MM_VS_BCAST_SMALL) || !strstr(e, "timed out"), "%s: found at the deadline: %s",
            mm_names[m->kind], e);
  if (rc == SHOAL_ERR_MISMATCH) { /* the rank that saw it names both calls */
    CHECK_MSG(strstr(e, "peer") != NULL, "%s", e);
  }
  free(f);
  shoal_comm_destroy(c);
  return 0;
}

static void mm_run(shoal_algo_t algo, int n, const char *const *hosts) {
  for (int k = 0; k < MM__N; k++) {
    /* across hosts the broadcast reaches the other host over TCP, where a rank waiting in the hierarchy's
     * shm phase does not read: that one is still found at the deadline (docs/comm.md) */
    if ((k == MM_VS_BCAST || k == MM_VS_BCAST_SMALL) && hosts) continue;
    mmarg_t m = {.r = {.shm = 1, .timeout_s = k == MM_ROOT ? 2 : 10}, .kind = k, .algo = algo};
    for (int i = 0; hosts && i < n; i++) m.hosts[i] = hosts[i];
    m.r.port = shoal_test_free_port();
    m.r.n = n;
    int st[8];
    shoal_test_fork_ranks(n, mm_rank, &m, 30, st);
    for (int r = 0; r < n; r++)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "%s, %s: rank %d %s (status 0x%x)",
                shoal_algo_name(algo), mm_names[k], r, st[r] == -1 ? "timed out" : "failed", st[r]);
  }
}

TEST_T(reliab_shm_mismatch_detected, 120) { mm_run(SHOAL_ALGO_SHM, 4, NULL); }

/* a small broadcast against an allreduce of the automatic choice, on one host of 2, 3 and 4 ranks: found at
 * once, never at the deadline */
TEST_T(reliab_shm_broadcast_mismatch_small_detected, 120) {
  for (int n = 2; n <= 4; n++) {
    mmarg_t m = {.r = {.shm = 1, .timeout_s = 10}, .kind = MM_VS_BCAST_SMALL, .algo = SHOAL_ALGO_AUTO};
    m.r.port = shoal_test_free_port();
    m.r.n = n;
    int st[8];
    shoal_test_fork_ranks(n, mm_rank, &m, 30, st);
    for (int r = 0; r < n; r++)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "%d ranks, %s: rank %d %s (status 0x%x)",
                n, mm_names[m.kind], r, st[r] == -1 ? "timed out" : "failed", st[r]);
  }
}

/* Rank 1 believes it is the root of a small broadcast (the binomial tree over the rings), the others that
 * rank 0 is: with 2 ranks both are roots and nobody waits for anyone. The message a rank never read is
 * found at its next call over the shm steps (the barrier), which fails naming the sender; the others fail
 * at the latest in the allreduce after it (their peer aborted). Never rc 0 everywhere, never the deadline. */
static int two_roots_rank(int rank, void *arg) {
  rarg_t *a = arg;
  shoal_comm_t *c;
  if (join(a, rank, &c)) return 2;
  float f[100];
  for (int i = 0; i < 100; i++) f[i] = (float)rank;
  int rc = shoal_barrier(c);
  if (!rc) rc = shoal_broadcast(c, f, a->kind ? 4 : 100, SHOAL_FLOAT32, rank == 1 ? 1 : 0);
  if (!rc) rc = shoal_barrier(c);
  if (!rc) rc = shoal_allreduce(c, SHOAL_IN_PLACE, f, 4, SHOAL_FLOAT32, SHOAL_SUM);
  const char *e = shoal_comm_errmsg(c);
  fprintf(stderr, "rank %d of %d: rc %d: %s\n", rank, a->n, rc, e);
  CHECK_MSG(rc != 0, "rank %d returned 0 from broadcasts with two roots", rank);
  CHECK_MSG(!strstr(e, "timed out"), "found at the deadline: %s", e);
  if (rc == SHOAL_ERR_MISMATCH) CHECK_MSG(strstr(e, "root") && strstr(e, "world rank"), "%s", e);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(reliab_shm_broadcast_two_roots_detected, 120) {
  for (int n = 2; n <= 4; n++)
    for (int kind = 0; kind < 2; kind++) {
      rarg_t a = {.shm = 1, .timeout_s = 10, .kind = kind};
      run(n, two_roots_rank, &a, 30);
    }
}

TEST_T(reliab_hier_mismatch_detected, 150) {
  static const char *const hosts[] = {"mmA", "mmA", "mmB", "mmB"};
  mm_run(SHOAL_ALGO_HIER, 4, hosts);
}

/* ---- the rendezvous: other jobs, duplicate ranks, other world sizes ---- */

typedef struct jobarg {
  int port;
  int with_ids;
} jobarg_t;

/* Worlds of 3. Processes: 0 = job A rank 0, 1 = job B rank 1, 2 = job A
 * rank 1, 3 = job B rank 0 (cannot bind the port A holds), 4 = job A rank 2
 * (late, so the rendezvous is still open when B's rank 1 comes). Both jobs on
 * one fixed port. (Without any job id, a stranger that comes before the real
 * rank 1 cannot be told from it: see docs/comm.md.) */
static int two_jobs_proc(int idx, void *arg) {
  const jobarg_t *j = arg;
  static const double delay[] = {0, 0.6, 0.3, 0.1, 1.2};
  static const char job[] = {'A', 'B', 'A', 'B', 'A'};
  static const int rank[] = {0, 1, 1, 0, 2};
  usleep((useconds_t)(delay[idx] * 1e6));
  if (j->with_ids) setenv("SHOAL_JOB_ID", job[idx] == 'A' ? "job-A" : "job-B", 1);
  else unsetenv("SHOAL_JOB_ID");
  rarg_t a = {.port = j->port, .n = 3, .shm = 1, .timeout_s = 10};
  shoal_comm_t *c = NULL;
  setenv("SHOAL_SHM", "1", 1);
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank[idx];
  p.world_size = a.n;
  p.master_addr = "127.0.0.1";
  p.master_port = a.port;
  p.timeout_s = 10;
  p.connect_timeout_s = 3;
  int rc = shoal_comm_init(&p, &c);
  int v = job[idx] == 'A' ? 42 : 7;
  if (!rc) {
    if (rank[idx] != 0) v = 0;
    rc = shoal_broadcast(c, &v, 1, SHOAL_INT32, 0);
    if (!rc) rc = shoal_barrier(c);
  }
  const char *e = rc ? (c ? shoal_comm_errmsg(c) : shoal_last_error()) : "";
  fprintf(stderr, "process %d (job %c rank %d): rc %d v %d %s\n", idx, job[idx], rank[idx], rc, v, e);
  if (!rc) CHECK_EQ(v, job[idx] == 'A' ? 42 : 7); /* never the other job's data */
  if (idx == 3) CHECK_EQ(rc, SHOAL_ERR_ADDR_IN_USE);
  if (j->with_ids) {
    if (job[idx] == 'A') CHECK_OK(rc); /* the stranger changes nothing for job A */
    if (idx == 1) {
      CHECK_EQ(rc, SHOAL_ERR_CONFIG);
      CHECK_CONTAINS(e, "another job");
      CHECK_CONTAINS(e, "job-B");
      CHECK_CONTAINS(e, "job-A");
    }
  } else if (idx != 3) { /* no job ids: nobody can tell the stranger; everyone fails, saying why */
    CHECK_MSG(rc != 0, "process %d joined a world although two ranks claimed rank 1", idx);
    if (idx != 4) CHECK_CONTAINS(e, "joined twice"); /* rank 2 comes after the store closed */
  }
  if (c) shoal_comm_destroy(c);
  return 0;
}

static void two_jobs(int with_ids) {
  jobarg_t j = {.port = shoal_test_free_port(), .with_ids = with_ids};
  int st[5];
  shoal_test_fork_ranks(5, two_jobs_proc, &j, 30, st);
  for (int r = 0; r < 5; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "process %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

TEST_T(reliab_two_jobs_one_port_job_ids, 60) { two_jobs(1); }
TEST_T(reliab_two_jobs_one_port_no_ids_fail_all, 60) { two_jobs(0); }

/* Two processes claim rank 1 of a world of 3 while the rendezvous is open:
 * nobody can tell which is the stranger, so everyone fails naming both. */
static int dup_rank(int idx, void *arg) {
  rarg_t a = *(rarg_t *)arg;
  unsetenv("SHOAL_JOB_ID");
  shoal_comm_t *c = NULL;
  usleep((useconds_t)idx * 100000);
  int rc = join(&a, idx == 0 ? 0 : 1, &c);
  CHECK_MSG(rc != 0, "process %d joined a world with two ranks 1", idx);
  CHECK_CONTAINS(shoal_last_error(), "rank 1 joined twice");
  return 0;
}

TEST_T(reliab_duplicate_rank_named, 60) {
  rarg_t a = {.shm = 1, .n = 3};
  a.port = shoal_test_free_port();
  int st[3];
  shoal_test_fork_ranks(3, dup_rank, &a, 30, st);
  for (int r = 0; r < 3; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "process %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

static int size_rank(int rank, void *arg) {
  rarg_t a = *(rarg_t *)arg;
  if (rank == 1) a.n = 3; /* started with another world size */
  unsetenv("SHOAL_JOB_ID");
  shoal_comm_t *c = NULL;
  int rc = join(&a, rank, &c);
  CHECK_MSG(rc != 0, "rank %d: a world formed from ranks with world sizes 2 and 3", rank);
  CHECK_CONTAINS(shoal_last_error(), "world size 3 but rank 0 with 2");
  return 0;
}

TEST_T(reliab_different_world_sizes_named, 60) {
  rarg_t a = {.shm = 1};
  a.port = shoal_test_free_port();
  a.n = 2;
  int st[2];
  shoal_test_fork_ranks(2, size_rank, &a, 30, st);
  for (int r = 0; r < 2; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

/* ---- a dead same-host peer is found in every shm wait ---- */

typedef struct deadarg {
  rarg_t r;
  pid_t test_pid;
  int phase; /* what the survivors are doing when the victim dies */
} deadarg_t;

static void die_now(int sig) {
  (void)sig;
  raise(SIGKILL);
}

/* The victim first forks a child that keeps every descriptor open (no exec),
 * as a data loader would: the victim's sockets then stay open after its
 * death, and only its process (pidfd) tells. */
static int dead_rank(int rank, void *arg) {
  deadarg_t *d = arg;
  shoal_comm_t *c;
  if (join(&d->r, rank, &c)) return 2;
  int victim = d->r.n - 1;
  size_t n = (1u << 20) / 4;
  float *buf = calloc(n, sizeof *buf);
  if (rank == victim) {
    pid_t ch = fork();
    if (ch == 0) { /* holds the sockets until the test is over */
      for (int i = 0; i < 600 && kill(d->test_pid, 0) == 0; i++) usleep(100000);
      _exit(0);
    }
    signal(SIGALRM, die_now);
    struct itimerval it = {{0, 0}, {0, 20000 + 15000 * d->phase}};
    setitimer(ITIMER_REAL, &it, NULL);
  }
  int rc = 0, src;
  for (int it = 0; it < 1000000 && !rc; it++) {
    switch ((it + d->phase) % 5) {
    case 0: rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, 2, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM); break;
    case 1: rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM); break;
    case 2: rc = shoal_barrier(c); break;
    case 3: rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, 1000, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_RING); break;
    default: /* point to point over the rings: everyone sends to rank 0 */
      if (rank == 0)
        for (int k = 1; k < d->r.n && !rc; k++) rc = shoal_recv_any(c, buf, 64, SHOAL_FLOAT32, 9, &src);
      else rc = shoal_send(c, buf, 64, SHOAL_FLOAT32, 0, 9);
      break;
    }
  }
  /* reached only by survivors: an error naming the victim, long before SHOAL_TIMEOUT (60 s; the test's bound is 25 s) */
  char want[32], want2[32];
  snprintf(want, sizeof want, "rank %d", victim);
  snprintf(want2, sizeof want2, "peer %d", victim);
  const char *e = shoal_comm_errmsg(c);
  CHECK_MSG(rc != 0 && rc != SHOAL_ERR_TIMEOUT, "rank %d: rc %d: %s", rank, rc, e);
  CHECK_MSG(strstr(e, want) || strstr(e, want2), "rank %d: the victim is not named: %s", rank, e);
  free(buf);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(reliab_shm_dead_peer_found_in_every_wait, 150) {
  for (int phase = getenv("REL_PHASE") ? atoi(getenv("REL_PHASE")) : 0; phase < 5; phase++) {
    deadarg_t d = {.r = {.shm = 1, .timeout_s = getenv("REL_PHASE") ? 8 : 60, .n = 3}, .test_pid = getpid(), .phase = phase};
    d.r.port = shoal_test_free_port();
    int st[3];
    shoal_test_fork_ranks(3, dead_rank, &d, 25, st);
    CHECK_MSG(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL, "phase %d: victim status 0x%x", phase, st[2]);
    for (int r = 0; r < 2; r++)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "phase %d: rank %d %s (status 0x%x)",
                phase, r, st[r] == -1 ? "waited for the deadline" : "failed", st[r]);
  }
}

/* ---- no path leaves a segment in /dev/shm ---- */

static int shm_entries(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  char pat[32];
  snprintf(pat, sizeof pat, "shoal-%u-", (unsigned)geteuid());
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) n += !strncmp(e->d_name, pat, strlen(pat));
  closedir(d);
  return n;
}

/* The host leader (rank 0) is killed at a random moment of the start,
 * around the shm set-up. */
static int setup_kill_rank(int rank, void *arg) {
  rarg_t *a = arg;
  if (rank == 0) {
    srand((unsigned)getpid());
    signal(SIGALRM, die_now);
    struct itimerval it = {{0, 0}, {0, 1000 + rand() % 40000}};
    setitimer(ITIMER_REAL, &it, NULL);
  }
  shoal_comm_t *c = NULL;
  float v = 1;
  int rc = join(a, rank, &c);
  if (!rc) rc = shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_FLOAT32, SHOAL_SUM);
  if (c) shoal_comm_destroy(c);
  return rank == 0 ? 0 : (rc != 0 ? 0 : 3); /* the others fail, they do not hang */
}

TEST_T(reliab_no_segment_leaked_when_setup_fails, 120) {
  int before = shm_entries();
  for (int i = 0; i < 5; i++) {
    rarg_t a = {.shm = 1, .n = 3, .timeout_s = 5, .connect_s = 3};
    a.port = shoal_test_free_port();
    int st[3];
    shoal_test_fork_ranks(3, setup_kill_rank, &a, 30, st);
    for (int r = 1; r < 3; r++) CHECK_MSG(st[r] != -1, "run %d: rank %d hung", i, r);
  }
  /* segments never have a name (memfd); other jobs' may come and go meanwhile, ours never appear */
  CHECK_MSG(shm_entries() <= before, "%d shoal segments in /dev/shm before, %d after", before, shm_entries());
}

/* ---- silent connections during the start ---- */

/* TCP ports process pid listens on (from /proc/<pid>/fd and /proc/net/tcp). */
static int listening_ports(int pid, int *ports, int cap) {
  char path[64], link[64];
  unsigned long inodes[32];
  int ni = 0, n = 0;
  snprintf(path, sizeof path, "/proc/%d/fd", pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) && ni < 32) {
    char p2[128];
    snprintf(p2, sizeof p2, "%s/%s", path, e->d_name);
    ssize_t k = readlink(p2, link, sizeof link - 1);
    if (k <= 0) continue;
    link[k] = '\0';
    if (sscanf(link, "socket:[%lu]", &inodes[ni]) == 1) ni++;
  }
  closedir(d);
  FILE *f = fopen("/proc/net/tcp", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f) && n < cap) {
    unsigned lport, st;
    unsigned long ino;
    if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &lport, &st, &ino) != 3) continue;
    for (int i = 0; i < ni; i++)
      if (st == 0x0A && ino == inodes[i]) ports[n++] = (int)lport;
  }
  if (f) fclose(f);
  return n;
}

typedef struct scanarg {
  rarg_t r;
  char dir[64];
} scanarg_t;

static int wait_file(const char *path, double max_s) {
  for (int i = 0; i < (int)(max_s * 100); i++) {
    if (access(path, F_OK) == 0) return 1;
    usleep(10000);
  }
  return 0;
}

/* proc 0: rank 0; proc 1: a "port scanner" that opens 8 silent connections to
 * each port rank 0 listens on (store and peer port) and holds them; proc 2:
 * rank 1, started once they are open. Handshakes served one at a time, 5 s
 * each, would need 80 s > SHOAL_CONNECT_TIMEOUT (20 s). */
static int scan_proc(int idx, void *arg) {
  scanarg_t *a = arg;
  char pidf[128], gof[128];
  snprintf(pidf, sizeof pidf, "%s/pid0", a->dir);
  snprintf(gof, sizeof gof, "%s/go", a->dir);
  if (idx == 1) {
    CHECK(wait_file(pidf, 10));
    FILE *f = fopen(pidf, "r");
    int pid0 = 0;
    CHECK(f && fscanf(f, "%d", &pid0) == 1);
    fclose(f);
    int ports[8], np = 0;
    for (int i = 0; i < 500 && (np = listening_ports(pid0, ports, 8)) < 2; i++) usleep(10000);
    CHECK_MSG(np >= 2, "rank 0 listens on %d ports", np);
    int held = 0;
    for (int p = 0; p < np; p++)
      for (int k = 0; k < 8; k++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ports[p])};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) held++;
      }
    CHECK(held >= 16);
    FILE *g = fopen(gof, "w");
    fclose(g);
    char donef[128];
    snprintf(donef, sizeof donef, "%s/done", a->dir);
    wait_file(donef, 25); /* hold them, silent, until rank 1 is through */
    return 0;
  }
  int rank = idx == 0 ? 0 : 1;
  if (rank == 0) {
    /* Written whole, then renamed: the scanner waits for the name to appear
     * and must never read a created but still empty file. */
    char tmpf[160];
    snprintf(tmpf, sizeof tmpf, "%s.tmp", pidf);
    FILE *f = fopen(tmpf, "w");
    CHECK(f != NULL);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    CHECK(rename(tmpf, pidf) == 0);
  } else {
    CHECK(wait_file(gof, 15));
  }
  shoal_comm_t *c;
  CHECK_OK(join(&a->r, rank, &c));
  int v = rank + 1;
  CHECK_OK(shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM));
  CHECK_EQ(v, 3);
  shoal_comm_destroy(c);
  if (rank == 1) {
    char donef[128];
    snprintf(donef, sizeof donef, "%s/done", a->dir);
    FILE *f = fopen(donef, "w");
    fclose(f);
  }
  return 0;
}

TEST_T(reliab_silent_connections_do_not_stall_start, 60) {
  scanarg_t a = {.r = {.shm = 1, .n = 2}};
  a.r.port = shoal_test_free_port();
  snprintf(a.dir, sizeof a.dir, "/tmp/shoal-scan-XXXXXX");
  CHECK(mkdtemp(a.dir) != NULL);
  int st[3];
  shoal_test_fork_ranks(3, scan_proc, &a, 40, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", a.dir);
  if (system(cmd)) {
  }
  for (int r = 0; r < 3; r += 2)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "process %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

/* ---- threads: one thread at a time per world, other threads refused ---- */

typedef struct thr {
  shoal_comm_t *c;
  int peer, rc;
  float v;
} thr_t;

static void *recv_thread(void *arg) {
  thr_t *t = arg;
  t->rc = shoal_recv(t->c, &t->v, 1, SHOAL_FLOAT32, t->peer, 5);
  return NULL;
}

/* Communicators A = {0,1} and B = {2,3} (no rank pair in common) split
 * from one world of 4. On ranks 0 and 2 a thread blocks in a receive on A
 * (the sender waits 0.5 s), while the main thread calls on B: refused, not
 * a crash; once the thread is done, B works from the main thread. */
static int thread_rank(int rank, void *arg) {
  shoal_comm_t *w, *a = NULL, *b = NULL;
  if (join(arg, rank, &w)) return 2;
  CHECK_OK(shoal_comm_split(w, rank / 2, rank, &a));  /* {0,1}, {2,3} */
  CHECK_OK(shoal_comm_split(w, rank % 2, rank, &b));  /* {0,2}, {1,3} */
  int ar = shoal_comm_rank(a);
  if (ar == 1) {
    usleep(500000);
    float one = 1;
    CHECK_OK(shoal_send(a, &one, 1, SHOAL_FLOAT32, 0, 5));
  } else {
    thr_t t = {.c = a, .peer = 1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, recv_thread, &t) == 0);
    usleep(100000);
    int rc = shoal_barrier(b); /* concurrent use of the same world */
    CHECK_EQ(rc, SHOAL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(shoal_last_error(), "another thread");
    CHECK_CONTAINS(shoal_comm_errmsg(b), "another thread"); /* the refused thread sees its refusal there too */
    CHECK_CONTAINS(shoal_comm_errmsg(w), "another thread");
    /* with an argument error too: refused by the thread rule, nothing aborted (the receive goes on) */
    float y = 0;
    rc = shoal_allreduce(b, NULL, &y, 1, SHOAL_FLOAT32, SHOAL_SUM);
    CHECK_EQ(rc, SHOAL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(shoal_last_error(), "another thread");
    CHECK_CONTAINS(shoal_last_error(), "sendbuf is NULL");
    pthread_join(th, NULL);
    CHECK_OK(t.rc);
    CHECK(t.v == 1.0f);
  }
  /* sequential use from another thread is fine: both A and B still work */
  float x = (float)rank;
  CHECK_OK(shoal_allreduce(b, SHOAL_IN_PLACE, &x, 1, SHOAL_FLOAT32, SHOAL_SUM));
  CHECK(shoal_comm_errmsg(b)[0] == '\0'); /* the refusal is history once this thread's call is let in */
  CHECK(x == (float)(rank % 2 == 0 ? 0 + 2 : 1 + 3));
  CHECK_OK(shoal_barrier(a));
  shoal_comm_destroy(a);
  shoal_comm_destroy(b);
  shoal_comm_destroy(w);
  return 0;
}

TEST_T(reliab_threads_one_at_a_time_per_world_shm, 60) {
  rarg_t a = {.shm = 1};
  run(4, thread_rank, &a, 40);
}
TEST_T(reliab_threads_one_at_a_time_per_world_tcp, 60) {
  rarg_t a = {.shm = 0};
  run(4, thread_rank, &a, 40);
}

/* ---- the launcher names the rank that was killed or stopped ---- */

TEST_T(reliab_launcher_names_killed_and_stopped_rank, 230) {
  static char out[1 << 16];
  char cmd[1024];
  for (int k = 0; k < 2; k++) { /* bench/fault-drill.sh repeats this at random moments */
    int stop = k == 1;
    /* rank 2 is killed (or stopped) from outside the launcher, mid-allreduce; its peers notice
     * within milliseconds (or at their 2 s deadline) and exit first. On a loaded machine the stop may
     * come while the ranks still connect: their connection deadline is bounded too. */
    snprintf(cmd, sizeof cmd,
             "SHOAL_TIMEOUT=2 SHOAL_CONNECT_TIMEOUT=10 %s launch -n 3 --grace 1 -- sh -c 'if [ $SHOAL_RANK = 2 ]; then (sleep 0.5; kill -%s $$) & "
             "fi; exec %s bench allreduce -b 256K -e 256K -n 10000000 -w 0'",
             shoal_test_cli(), stop ? "STOP" : "9", shoal_test_cli());
    int st = shoal_test_run_cmd(cmd, out, sizeof out, 110);
    if (stop) {
      CHECK_CONTAINS(out, "shoal launch: rank 2 was stopped by signal 19");
    } else {
      CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "status %d: %s", st, out);
      CHECK_CONTAINS(out, "shoal launch: rank 2 killed by signal 9 (Killed)");
    }
  }
}
