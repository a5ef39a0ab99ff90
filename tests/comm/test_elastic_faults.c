/* Shrink and grow under misuse and abuse: every rank shrinking right after init (over TCP and shared
 * memory: the same ranks come out, never two worlds), strangers at the door during a grow (silent
 * connections and a bounded flood: the grow completes and admits the newcomer), and a live rank that never
 * joins a shrink over TCP (every rank's error names it). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define FAILR(rank, ...)                              \
  do {                                                \
    fprintf(stderr, "rank %d: ", (rank));             \
    fprintf(stderr, __VA_ARGS__);                     \
    fprintf(stderr, "\n");                            \
    return 1;                                         \
  } while (0)

typedef struct ef {
  int n, shm, rounds;
  int port;          /* the store's */
  int ports[16];     /* early shrink: each round's store */
  double timeout_s;
  int silent;        /* grow: silent connections at the door */
  int flood;         /* grow: connections opened and closed at the door while it grows */
} ef_t;

static void params_for(const ef_t *a, int rank, int n, int port, shoal_comm_params_t *p) {
  shoal_comm_params_init(p);
  p->rank = rank;
  p->world_size = n;
  p->master_addr = "127.0.0.1";
  p->master_port = port;
  p->timeout_s = a->timeout_s > 0 ? a->timeout_s : 20;
  p->connect_timeout_s = 20;
}

/* ---- every rank shrinks right after init: the same ranks, one world ---- */

static int early_shrink_rank(int rank, void *arg) {
  const ef_t *a = arg;
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1);
  for (int round = 0; round < a->rounds; round++) {
    char job[32];
    snprintf(job, sizeof job, "early-%d", round);
    setenv("SHOAL_JOB_ID", job, 1);
    shoal_comm_params_t p;
    params_for(a, rank, a->n, a->ports[round], &p);
    shoal_comm_t *c = NULL, *nc = NULL;
    if (shoal_comm_init(&p, &c)) FAILR(rank, "round %d: init: %s", round, shoal_last_error());
    if (shoal_comm_shrink(c, &nc)) FAILR(rank, "round %d: shrink: %s", round, shoal_last_error());
    if (shoal_comm_size(nc) != a->n || shoal_comm_rank(nc) != rank)
      FAILR(rank, "round %d: every rank alive, but the shrink made rank %d of %d (a split world)", round,
            shoal_comm_rank(nc), shoal_comm_size(nc));
    int32_t v = rank + 1;
    if (shoal_allreduce(nc, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM))
      FAILR(rank, "round %d: allreduce on the shrunk communicator: %s", round, shoal_last_error());
    if (v != a->n * (a->n + 1) / 2) FAILR(rank, "round %d: allreduce gave %d", round, v);
    shoal_comm_destroy(c);
    shoal_comm_destroy(nc);
  }
  return 0;
}

static void run_early(ef_t *a, double timeout) {
  for (int r = 0; r < a->rounds && r < 16; r++) a->ports[r] = shoal_test_free_port();
  int st[8];
  shoal_test_fork_ranks(a->n, early_shrink_rank, a, timeout, st);
  for (int r = 0; r < a->n; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

TEST_T(shrink_right_after_init_one_world_tcp, 200) {
  ef_t a = {.n = 4, .shm = 0, .rounds = 12};
  run_early(&a, 180);
}

TEST_T(shrink_right_after_init_one_world_shm, 200) {
  ef_t a = {.n = 4, .shm = 1, .rounds = 12};
  run_early(&a, 180);
}

/* ---- strangers at the door: the grow completes, the newcomer enters ---- */

static int connect_door(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Slot n: the strangers (silent connections kept open, then a flood of connections opened and dropped);
 * slot n + 1: the newcomer. */
static int stranger_slot(const ef_t *a) {
  usleep(1000000); /* after the members' init (the store listens on this port until then): at the door */
  int fds[64], k = 0;
  double give_up = mono() + 10.0;
  while (k < a->silent && k < 64 && mono() < give_up) { /* the door opens at the members' first grow */
    int fd = connect_door(a->port);
    if (fd >= 0) fds[k++] = fd;
    else usleep(20000);
  }
  if (k < a->silent) fprintf(stderr, "strangers: only %d silent connections\n", k);
  double until = mono() + 4.0;
  for (int i = 0; i < a->flood && mono() < until; i++) { /* bounded in count and time */
    int fd = connect_door(a->port);
    if (fd >= 0) close(fd);
    usleep(2000);
  }
  char done[64];
  snprintf(done, sizeof done, "/tmp/shoal-door-%d.done", a->port);
  while (access(done, F_OK) != 0 && mono() < give_up + 30) usleep(50000); /* silent until the members are done */
  for (int i = 0; i < k; i++) close(fds[i]);
  unlink(done);
  return 0;
}

static int newcomer_slot(const ef_t *a) {
  usleep(1500000); /* after the strangers */
  shoal_comm_params_t p;
  params_for(a, -1, -1, a->port, &p);
  p.connect_timeout_s = 30;
  shoal_comm_t *c = NULL;
  if (shoal_comm_join(&p, &c)) FAILR(a->n, "join: %s", shoal_last_error());
  int32_t v = 1;
  if (shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM) || v != a->n + 1)
    FAILR(a->n, "allreduce after the join: %s (%d)", shoal_last_error(), v);
  shoal_comm_destroy(c);
  return 0;
}

static void mark_done(const ef_t *a) {
  char done[64];
  snprintf(done, sizeof done, "/tmp/shoal-door-%d.done", a->port);
  FILE *f = fopen(done, "w");
  if (f) fclose(f);
}

static int door_member(int rank, void *arg) {
  const ef_t *a = arg;
  setenv("SHOAL_SHM", "0", 1);
  if (rank == a->n) return stranger_slot(a);
  if (rank == a->n + 1) return newcomer_slot(a);
  shoal_comm_params_t p;
  params_for(a, rank, a->n, a->port, &p);
  p.timeout_s = 8;
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) FAILR(rank, "init: %s", shoal_last_error());
  double worst = 0;
  for (int i = 0; i < 300; i++) { /* grows every 50 ms until the newcomer is in */
    shoal_comm_t *gc = NULL;
    double t0 = mono();
    if (shoal_comm_grow(c, &gc)) {
      if (rank == 0) mark_done(a);
      FAILR(rank, "grow %d: %s", i, shoal_last_error());
    }
    double took = mono() - t0;
    if (took > worst) worst = took;
    if (gc) {
      fprintf(stderr, "rank %d: admitted after %d grows, the slowest took %.2f s\n", rank, i + 1, worst);
      int32_t v = 1;
      if (shoal_allreduce(gc, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM) || v != a->n + 1)
        FAILR(rank, "allreduce after the grow: %s (%d)", shoal_last_error(), v);
      shoal_comm_destroy(gc);
      shoal_comm_destroy(c);
      if (rank == 0) mark_done(a);
      return 0;
    }
    usleep(50000);
  }
  if (rank == 0) mark_done(a);
  FAILR(rank, "the newcomer never entered");
}

static void run_door(ef_t *a) {
  a->port = shoal_test_free_port();
  int st[8];
  shoal_test_fork_ranks(a->n + 2, door_member, a, 100, st);
  for (int r = 0; r < a->n + 2; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "slot %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
}

/* 30 connections that never speak, then a bounded flood, while the members grow every 50 ms */
TEST_T(grow_with_strangers_at_the_door, 120) {
  ef_t a = {.n = 3, .silent = 30, .flood = 400};
  run_door(&a);
}

/* ---- a live rank that never shrinks, over TCP: every other rank's error names it ---- */

static int absent_rank(int rank, void *arg) {
  const ef_t *a = arg;
  setenv("SHOAL_SHM", "0", 1);
  shoal_comm_params_t p;
  params_for(a, rank, a->n, a->port, &p);
  p.timeout_s = 2;
  shoal_comm_t *c = NULL, *nc = NULL;
  if (shoal_comm_init(&p, &c)) FAILR(rank, "init: %s", shoal_last_error());
  shoal_barrier(c);
  if (rank == 2) { /* alive, never shrinks */
    usleep(6000000);
    shoal_comm_destroy(c);
    return 0;
  }
  int rc = shoal_comm_shrink(c, &nc);
  if (rc == 0) FAILR(rank, "shrink succeeded without rank 2");
  if (!strstr(shoal_last_error(), "rank(s) 2 alive"))
    FAILR(rank, "the error does not name rank 2 as the one that did not join: %s", shoal_last_error());
  fprintf(stderr, "rank %d: %s\n", rank, shoal_last_error());
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(shrink_timeout_names_the_absent_rank_tcp, 60) {
  ef_t a = {.n = 4};
  a.port = shoal_test_free_port();
  int st[4];
  shoal_test_fork_ranks(4, absent_rank, &a, 40, st);
  for (int r = 0; r < 4; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status 0x%x", r, st[r]);
}
