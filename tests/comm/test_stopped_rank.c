/* A rank stopped (SIGSTOP) in the middle of a loop of collectives: every other rank fails by its deadline
 * (plus the grace) and its error names the stopped rank, whether it waited on that rank itself or on a rank
 * that waited on it (the blame follows the chain), over TCP and over shared memory. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

typedef struct st_arg {
  int n, port, shm, victim;
  size_t count;
  char pidfile[64];
} st_arg_t;

static int stop_rank(int rank, void *arg) {
  const st_arg_t *a = arg;
  setenv("SHOAL_SHM", a->shm ? "1" : "0", 1);
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.timeout_s = 2;
  p.connect_timeout_s = 20;
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) {
    fprintf(stderr, "rank %d: init: %s\n", rank, shoal_last_error());
    return 2;
  }
  float *v = calloc(a->count, sizeof *v);
  int rc = 0;
  for (int i = 0; i < 100000 && !rc; i++) {
    if (rank == a->victim && i == 200) {
      FILE *f = fopen(a->pidfile, "w");
      if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
      }
      raise(SIGSTOP); /* killed by rank 0 once the others have failed */
    }
    rc = shoal_allreduce(c, SHOAL_IN_PLACE, v, a->count, SHOAL_FLOAT32, SHOAL_SUM);
  }
  const char *e = shoal_comm_errmsg(c);
  char want[64];
  snprintf(want, sizeof want, "world rank %d's process", a->victim);
  fprintf(stderr, "rank %d: %s\n", rank, e);
  int named = rc && strstr(e, want) && strstr(e, "is stopped");
  if (rank == 0) { /* the others had as long to fail: end the stopped one */
    usleep(4000000);
    FILE *f = fopen(a->pidfile, "r");
    int pid = 0;
    if (f && fscanf(f, "%d", &pid) == 1 && pid > 0) kill(pid, SIGKILL);
    if (f) fclose(f);
  }
  free(v);
  shoal_comm_destroy(c);
  if (!named) fprintf(stderr, "rank %d: the error does not name the stopped rank %d\n", rank, a->victim);
  return named ? 0 : 1;
}

static void run_stop(int shm, size_t count) {
  st_arg_t a = {.n = 4, .shm = shm, .victim = 2, .count = count};
  a.port = shoal_test_free_port();
  snprintf(a.pidfile, sizeof a.pidfile, "/tmp/shoal-stopped-%d", a.port);
  int st[4];
  shoal_test_fork_ranks(a.n, stop_rank, &a, 60, st);
  unlink(a.pidfile);
  CHECK_MSG(st[a.victim] != -1 && WIFSIGNALED(st[a.victim]) && WTERMSIG(st[a.victim]) == SIGKILL,
            "the stopped rank's status 0x%x", st[a.victim]);
  for (int r = 0; r < a.n; r++)
    if (r != a.victim)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d %s (status 0x%x)", r,
                st[r] == -1 ? "timed out" : "did not name the stopped rank", st[r]);
}

TEST_T(stopped_rank_named_by_every_survivor_tcp, 90) { run_stop(0, 1024); }
TEST_T(stopped_rank_named_by_every_survivor_tcp_large, 90) { run_stop(0, 1 << 18); }
TEST_T(stopped_rank_named_by_every_survivor_shm, 90) { run_stop(1, 1024); }
TEST_T(stopped_rank_named_by_every_survivor_shm_large, 90) { run_stop(1, 1 << 18); }
