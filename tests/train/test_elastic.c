/* shoal train --on-failure shrink over real ranks: a new process waiting at the door enters at a grow and
 * receives the state, and a worker is lost (SIGKILL, 0.4 s after it joined: before, during or after the
 * grow) and the others shrink and finish. Every rank at the end holds the same parameters, and the model
 * learned. */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"
#include "shoal/train.h"
#include "train_testutil.h"

static shoal_dataset_t *g_train, *g_test;

typedef struct el {
  int n;          /* workers at the start; slot n is the new process */
  int port, store_fd;
  int victim;
  int kill_on_join; /* the victim dies when the new process has entered (while it receives the state) */
  char dir[64];
} el_t;

static int g_join_pipe[2] = {-1, -1};

static void opts(const el_t *a, shoal_train_opts_t *o, const char *params_out) {
  shoal_train_opts_init(o);
  o->model = SHOAL_MODEL_MLP;
  o->train_data = g_train;
  o->test_data = g_test;
  o->train_subset = 6144;
  o->test_subset = 2000;
  o->epochs = 4;
  o->batch = 32;
  o->lr = 0.05;
  o->quiet = 1;
  o->on_failure_shrink = 1;
  o->grow_every = 5;
  o->params_out = params_out;
  (void)a;
}

static void *die_soon(void *arg) { /* the victim: lost while it trains, at whatever call it is in */
  (void)arg;
  usleep(400000);
  raise(SIGKILL);
  return NULL;
}

static void *die_when_joined(void *arg) { /* the victim: lost as soon as the new process is in */
  (void)arg;
  struct pollfd pf = {g_join_pipe[0], POLLIN, 0};
  char b;
  if (poll(&pf, 1, 60000) == 1 && read(g_join_pipe[0], &b, 1) == 1) raise(SIGKILL);
  return NULL;
}

static int el_rank(int slot, void *arg) {
  const el_t *a = arg;
  char v[32], pout[128];
  snprintf(v, sizeof v, "%d", a->store_fd); /* as `shoal launch --on-failure restart` gives every rank */
  setenv("SHOAL_STORE_FD", v, 1);
  snprintf(pout, sizeof pout, "%s/params", a->dir);
  shoal_train_opts_t o;
  shoal_comm_t *c = NULL;
  if (slot == a->n) { /* the new process: waits at the door from the start */
    snprintf(v, sizeof v, "%d", a->port);
    setenv("SHOAL_MASTER_PORT", v, 1);
    setenv("SHOAL_MASTER_ADDR", "127.0.0.1", 1);
    setenv("SHOAL_TIMEOUT", "60", 1);
    setenv("SHOAL_JOIN", "1", 1);
    if (shoal_comm_init_env(&c)) {
      fprintf(stderr, "new process: join: %s\n", shoal_last_error());
      return 10;
    }
    if (!shoal_comm_joined(c)) return 11;
    if (a->kill_on_join && write(g_join_pipe[1], "x", 1) != 1) return 16;
  } else if (!(c = train_test_join(slot, a->n, a->port))) {
    return 10;
  }
  opts(a, &o, slot == a->victim ? NULL : pout);
  pthread_t th;
  if (slot == a->victim && pthread_create(&th, NULL, a->kill_on_join ? die_when_joined : die_soon, NULL)) return 14;
  shoal_train_result_t r;
  int rc = shoal_train_run(&o, c, &r);
  if (slot == a->victim) {
    fprintf(stderr, "the victim finished before it was killed: the run is too short for this machine\n");
    return 15;
  }
  if (rc) fprintf(stderr, "slot %d: train: %s\n", slot, shoal_last_error());
  shoal_comm_destroy(c);
  if (rc) return 12;
  if (r.epochs_done != o.epochs || r.final_test_acc < 0.70) {
    fprintf(stderr, "slot %d: %d epochs, accuracy %.3f\n", slot, r.epochs_done, r.final_test_acc);
    return 13;
  }
  return 0;
}

static long file_size(const char *p) {
  FILE *f = fopen(p, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void shrink_and_grow(int kill_on_join) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  CHECK_OK(shoal_dataset_load_dir(SHOAL_FASHION_MNIST_DIR, "train", 0, &g_train));
  CHECK_OK(shoal_dataset_load_dir(SHOAL_FASHION_MNIST_DIR, "t10k", 0, &g_test));
  el_t a = {.n = 3, .victim = 1, .kill_on_join = kill_on_join};
  CHECK(pipe(g_join_pipe) == 0);
  /* the store socket, held by every rank as `shoal launch` does: the door is there from the start */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 64) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
  a.store_fd = fd;
  a.port = ntohs(sa.sin_port);
  snprintf(a.dir, sizeof a.dir, "/tmp/shoal-elastic-XXXXXX");
  CHECK(mkdtemp(a.dir) != NULL);
  setenv("SHOAL_SHM", "0", 1);
  int st[4];
  shoal_test_fork_ranks(a.n + 1, el_rank, &a, 220, st);
  close(fd);
  CHECK_MSG(st[a.victim] != -1 && WIFSIGNALED(st[a.victim]) && WTERMSIG(st[a.victim]) == SIGKILL,
            "victim status 0x%x", st[a.victim]);
  for (int s = 0; s <= a.n; s++)
    if (s != a.victim)
      CHECK_MSG(st[s] != -1 && WIFEXITED(st[s]) && WEXITSTATUS(st[s]) == 0, "slot %d status 0x%x", s, st[s]);
  /* the final workers (slots 0, 2 and the new process) wrote params, params.rank1, params.rank2: identical */
  char p0[128], pr[128], cmd[300];
  snprintf(p0, sizeof p0, "%s/params", a.dir);
  long n0 = file_size(p0);
  CHECK_MSG(n0 > 0, "no %s", p0);
  for (int r = 1; r < a.n; r++) {
    snprintf(pr, sizeof pr, "%s/params.rank%d", a.dir, r);
    CHECK_MSG(file_size(pr) == n0, "%s missing or of another size", pr);
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", p0, pr);
    CHECK_MSG(system(cmd) == 0, "%s differs from %s", pr, p0);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", a.dir);
  if (system(cmd)) { /* best effort */
  }
}

TEST_T(train_shrink_and_grow_keep_one_model, 240) { shrink_and_grow(0); }

/* A worker lost while the new process receives the state: the new process shrinks with the others (it gave
 * up before) and takes the state from a worker that has one. */
TEST_T(train_worker_lost_while_a_new_one_enters, 240) { shrink_and_grow(1); }
