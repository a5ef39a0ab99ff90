/* Faults on the shared-memory path: a rank SIGKILLed in the middle of shm
 * allreduces (the others error out naming it, well before the deadline, and
 * no segment is left in /dev/shm), a stuck rank (deadline error naming it),
 * and the segment's lifetime (mapped but already unlinked while in use). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct fault_arg {
  int n, port, victim;
  double timeout_s;
  char dir[64];       /* rank 0 writes its pid here: segment names carry the creator's pid */
  const char *hosts[8];
  shoal_algo_t algo;
} fault_arg_t;

static shoal_comm_t *join(int rank, const fault_arg_t *a) {
  if (a->hosts[0]) setenv("SHOAL_HOSTNAME", a->hosts[rank], 1);
  setenv("SHOAL_SHM", "1", 1);
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.timeout_s = a->timeout_s;
  p.connect_timeout_s = 20;
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) fprintf(stderr, "rank %d: init: %s\n", rank, shoal_last_error());
  return c;
}

/* Entries of /dev/shm made by shoal processes with this pid ("shoal-<uid>-<world>-<pid>-<nonce>"). */
static int shm_entries_of(int pid) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  char pat[32];
  snprintf(pat, sizeof pat, "-%d-", pid);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, "shoal-", 6) && strstr(e->d_name, pat)) n++;
  closedir(d);
  return n;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die_now(int sig) {
  (void)sig;
  raise(SIGKILL);
}

static int rank_killed(int rank, void *arg) {
  fault_arg_t *a = arg;
  if (rank == 0) {
    char path[128];
    snprintf(path, sizeof path, "%s/pid0", a->dir);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%d\n", (int)getpid()), fclose(f);
  }
  shoal_comm_t *c = join(rank, a);
  if (!c) return 2;
  size_t n = (8u << 20) / 4; /* 8 MiB: 16 chunks, so the kill lands mid-collective */
  float *buf = malloc(n * 4);
  for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
  if (rank == a->victim) {
    signal(SIGALRM, die_now);
    struct itimerval it = {{0, 0}, {0, 150000}};
    setitimer(ITIMER_REAL, &it, NULL);
  }
  int rc = 0;
  double t_fail = mono();
  for (int it = 0; it < 100000 && !rc; it++) {
    t_fail = mono();
    rc = shoal_allreduce_algo(c, SHOAL_IN_PLACE, buf, n, SHOAL_FLOAT32, SHOAL_SUM, a->algo);
  }
  double took = mono() - t_fail;
  int bad = 0;
  /* the victim is named as a world rank ("same-host peer (world rank 2") or as the TCP peer whose
   * connection hung up ("peer 2 (addr)"): which one a rank sees first depends on timing */
  char want[32], want_peer[32];
  snprintf(want, sizeof want, "rank %d", a->victim);
  snprintf(want_peer, sizeof want_peer, "peer %d (", a->victim);
  if (rc == 0 || rc == SHOAL_ERR_TIMEOUT) bad = fprintf(stderr, "rank %d: rc %d (expected a peer error): %s\n", rank, rc,
                                                        shoal_comm_errmsg(c));
  else if (!strstr(shoal_comm_errmsg(c), want) && !strstr(shoal_comm_errmsg(c), want_peer))
    bad = fprintf(stderr, "rank %d: message does not name %s: %s\n", rank, want, shoal_comm_errmsg(c));
  else if (took > a->timeout_s / 2)
    bad = fprintf(stderr, "rank %d: error only after %.1f s\n", rank, took);
  fprintf(stderr, "rank %d (%.2f s): %s\n", rank, took, shoal_comm_errmsg(c));
  shoal_comm_destroy(c);
  free(buf);
  return bad ? 1 : 0;
}

static void killed(fault_arg_t *a) {
  a->port = shoal_test_free_port();
  a->timeout_s = 20;
  snprintf(a->dir, sizeof a->dir, "/tmp/shoal-shmfault-XXXXXX");
  CHECK(mkdtemp(a->dir) != NULL);
  int st[8];
  shoal_test_fork_ranks(a->n, rank_killed, a, 40, st);
  char path[128];
  snprintf(path, sizeof path, "%s/pid0", a->dir);
  FILE *f = fopen(path, "r");
  int pid0 = 0;
  CHECK(f && fscanf(f, "%d", &pid0) == 1);
  fclose(f);
  unlink(path);
  rmdir(a->dir);
  CHECK_MSG(WIFSIGNALED(st[a->victim]) && WTERMSIG(st[a->victim]) == SIGKILL, "victim status 0x%x", st[a->victim]);
  for (int r = 0; r < a->n; r++)
    if (r != a->victim)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status 0x%x", r, st[r]);
  CHECK_EQ(shm_entries_of(pid0), 0); /* nothing leaked in /dev/shm */
}

TEST_T(shm_fault_rank_killed_mid_allreduce, 60) {
  fault_arg_t a = {.n = 4, .victim = 2, .algo = SHOAL_ALGO_SHM};
  killed(&a);
}

/* the victim is a host leader in a hierarchical allreduce: its host mates
 * wait on its flags, the other host on its TCP connection */
TEST_T(shm_fault_leader_killed_mid_hier, 60) {
  fault_arg_t a = {.n = 4, .victim = 2, .algo = SHOAL_ALGO_HIER, .hosts = {"hA", "hA", "hB", "hB"}};
  killed(&a);
}

static int rank_stuck(int rank, void *arg) {
  fault_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (!c) return 2;
  float v[64] = {0};
  if (rank == 1) usleep((useconds_t)(a->timeout_s * 2.5e6)); /* alive but late */
  int rc = shoal_allreduce_algo(c, v, v, 64, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM);
  int bad = 0;
  if (rank == 0 && (rc != SHOAL_ERR_TIMEOUT || !strstr(shoal_comm_errmsg(c), "world rank 1") ||
                    !strstr(shoal_comm_errmsg(c), "SHOAL_TIMEOUT")))
    bad = fprintf(stderr, "rank 0: rc %d: %s\n", rc, shoal_comm_errmsg(c));
  /* rank 1 may still succeed: rank 0's input was published before it gave up */
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(shm_fault_stuck_peer_deadline, 40) {
  fault_arg_t a = {.n = 2, .timeout_s = 1};
  a.port = shoal_test_free_port();
  int st[2];
  int ok = shoal_test_fork_ranks(2, rank_stuck, &a, 30, st);
  CHECK_EQ(ok, 2);
}

/* A peer killed while the others wait in a shared-memory allreduce for another peer that is alive but
 * elsewhere: the waiting ranks fail at once naming the dead one (as a TCP hang-up fails any op), not at
 * the deadline naming the live one. Rank 1 never enters the allreduce: it waits (bounded) for the others'
 * verdicts in files, so without the check they would time out at SHOAL_TIMEOUT naming world rank 1. */
static int rank_dead_elsewhere(int rank, void *arg) {
  fault_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (!c) return 2;
  float v[64] = {0};
  if (rank == 3) { /* killed while the others wait (it never enters the allreduce) */
    usleep(200000);
    raise(SIGKILL);
  }
  char path[128];
  if (rank == 1) { /* alive, busy elsewhere until ranks 0 and 2 have failed (at most 15 s) */
    for (int i = 0; i < 1500; i++) {
      int done = 0;
      for (int r = 0; r <= 2; r += 2) {
        snprintf(path, sizeof path, "%s/done%d", a->dir, r);
        done += access(path, F_OK) == 0;
      }
      if (done == 2) break;
      usleep(10000);
    }
    shoal_comm_destroy(c);
    return 0;
  }
  int rc = shoal_allreduce_algo(c, v, v, 64, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM);
  snprintf(path, sizeof path, "%s/done%d", a->dir, rank);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  int bad = 0;
  if (rc != SHOAL_ERR_PEER_CLOSED || (!strstr(shoal_comm_errmsg(c), "world rank 3") && !strstr(shoal_comm_errmsg(c), "peer 3")))
    bad = fprintf(stderr, "rank %d: rc %d: %s\n", rank, rc, shoal_comm_errmsg(c));
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(shm_fault_dead_peer_noticed_while_waiting_for_another, 60) {
  fault_arg_t a = {.n = 4, .timeout_s = 20};
  a.port = shoal_test_free_port();
  snprintf(a.dir, sizeof a.dir, "/tmp/shoal-shmdead-XXXXXX");
  CHECK(mkdtemp(a.dir) != NULL);
  int st[4];
  shoal_test_fork_ranks(4, rank_dead_elsewhere, &a, 50, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", a.dir);
  if (system(cmd)) {
  }
  CHECK_MSG(WIFSIGNALED(st[3]) && WTERMSIG(st[3]) == SIGKILL, "rank 3 status 0x%x", st[3]);
  for (int r = 0; r < 3; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d status 0x%x", r, st[r]);
}

/* While the communicator lives, the segment is mapped but no longer has a name. */
static int rank_lifetime(int rank, void *arg) {
  fault_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (!c) return 2;
  int bad = 0;
  float v[4] = {1, 2, 3, 4};
  /* once everyone got through one collective, the creator has surely unlinked */
  if (shoal_allreduce(c, SHOAL_IN_PLACE, v, 4, SHOAL_FLOAT32, SHOAL_SUM) || v[3] != 4.0f * (float)a->n)
    bad = fprintf(stderr, "rank %d: allreduce: %s\n", rank, shoal_comm_errmsg(c));
  FILE *m = fopen("/proc/self/maps", "r");
  char line[512];
  int mapped = 0, deleted = 0;
  while (m && fgets(line, sizeof line, m))
    if (strstr(line, "/memfd:shoal-")) mapped++, deleted += strstr(line, "(deleted)") != NULL;
  if (m) fclose(m);
  if (!mapped || deleted != mapped) bad = fprintf(stderr, "rank %d: %d shoal mappings, %d deleted\n", rank, mapped, deleted);
  if (rank == 0 && shm_entries_of(getpid())) bad = fprintf(stderr, "rank 0: its segment still has a name\n");
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(shm_segment_unlinked_once_mapped, 30) {
  fault_arg_t a = {.n = 3, .timeout_s = 10};
  a.port = shoal_test_free_port();
  int st[3];
  CHECK_EQ(shoal_test_fork_ranks(3, rank_lifetime, &a, 25, st), 3);
}

/* The host leader cannot create the segment (its address space capped below the segment's size: 100 MB,
 * room for the binary and its libraries (the HTTP ones of shoal serve among them), not for 16 rings of
 * 4 MiB): every rank's error carries the reason, the members' too (they said only "could not create"). */
TEST_T(shm_fault_segment_creation_failure_says_why, 60) {
  if (getenv("SHOAL_SANITIZE")) shoal_test_skip("ulimit -v and the sanitizers' shadow memory do not mix");
  char cmd[1024], out[1 << 14];
  snprintf(cmd, sizeof cmd,
           "SHOAL_TIMEOUT=8 SHOAL_SHM_RING_BYTES=4194304 %s launch -n 4 --on-failure continue -- "
           "sh -c 'ulimit -v 100000; exec %s selftest' 2>&1",
           shoal_test_cli(), shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "could not create the shm segment: Cannot allocate memory");
}
