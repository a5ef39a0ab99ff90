/* Strategy "partial" (include/shoal/sync.h over include/shoal/partial.h):
 * - through the public calls on real ranks: a worker made late (it finishes
 *   a step only after another worker got that step's result) does not hold
 *   the others up, receives the same average, and with carry=2 loses none
 *   of its gradients; the parameters stay bit-identical; pause between
 *   steps hands the communicator back while the thread runs ahead;
 * - `shoal train --sync partial --straggle ...` under shoal launch: every
 *   worker ends with the same parameters;
 * - bad --straggle and --sync-config values are errors naming them;
 * - with min_ready = every worker, a slow worker is never told to skip.
 * Lateness is forced by order (files), never by timing; where a delay only
 * tempts the strategy, the assertion holds whatever the timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../runner.h"
#include "train_testutil.h"
#include "shoal/sync.h"
#include "shoal/train.h"
#include "train/straggle.h"

static int g_port;
static char g_dir[128];

#define FAILIF(cond, code, ...)      \
  do {                              \
    if (cond) {                     \
      fprintf(stderr, __VA_ARGS__); \
      fputc('\n', stderr);          \
      return code;                  \
    }                               \
  } while (0)

static void run(int n, int (*fn)(int, void *), void *arg) {
  g_port = shoal_test_free_port();
  int st[16];
  int ok = shoal_test_fork_ranks(n, fn, arg, 80, st);
  for (int i = 0; i < n; i++) CHECK_MSG(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0, "rank %d: status %d", i, st[i]);
  CHECK_EQ(ok, n);
}

static void mark(const char *what, int t) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s%d", g_dir, what, t);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
}

static int wait_mark(const char *what, int t) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s%d", g_dir, what, t);
  for (int i = 0; i < 30000; i++) { /* 30 s */
    if (!access(path, F_OK)) return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Gradient of worker r at step t: multiples of 60, >= 0 (exact after averaging over 1..6 data sets); zero at the
 * last step, whose late data would have no next step to go to. */
static float grad(int r, int t, size_t i) {
  return t == 11 ? 0.0f : (float)(60 * (int)((i * 3 + (size_t)r * 5 + (size_t)t * 7) % 9));
}

typedef struct {
  int n, carry, ahead;
} job_t;

static int late_rank(int rank, void *arg) {
  job_t *j = arg;
  shoal_comm_t *c = train_test_join(rank, j->n, g_port);
  if (!c) return 10;
  enum { N = 5003, STEPS = 12 };
  float *p = calloc(N, sizeof(float)), *g = malloc(N * sizeof(float));
  for (size_t i = 0; i < N; i++) p[i] = (float)rank; /* started apart: final gives worker 0's model */
  shoal_sync_t *s = NULL;
  char cfg[256];
  /* the window closes 1 us after the first worker is ready: the late worker is never in, the others by timing */
  snprintf(cfg, sizeof cfg, "window=fixed tau_ms=0.001 carry=%d ahead=%d log=%s/log", j->carry, j->ahead, g_dir);
  FAILIF(shoal_sync_create(c, "partial", cfg, &s), 11, "create '%s': %s", cfg, shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, 1000) != 0 || shoal_sync_add_bucket(s, p + 1000, g + 1000, N - 1000) != 1, 12,
         "add: %s", shoal_last_error());
  double produced = 0, applied = 0; /* sums of gradient element 0..N-1 over steps */
  int late_steps = 0, skipped = 0;
  for (int t = 0; t < STEPS; t++) {
    FAILIF(shoal_sync_begin(s, t), 13, "begin %d: %s", t, shoal_sync_errmsg(s));
    int skip = shoal_sync_flags(s) & SHOAL_SYNC_F_SKIP;
    skipped += skip != 0;
    if (!skip) {
      for (size_t i = 0; i < N; i++) g[i] = grad(rank, t, i), produced += g[i];
      /* the last worker is late at every third step: it finishes only after worker 0 got the result */
      if (rank == j->n - 1 && t % 3 == 0 && t < STEPS - 1) {
        FAILIF(wait_mark("done", t), 14, "step %d: worker 0 never finished", t);
        late_steps++;
      }
    }
    FAILIF(shoal_sync_finish(s), 15, "finish %d: %s", t, shoal_sync_errmsg(s));
    if (rank == 0) mark("done", t);
    int gs;
    double w, pay;
    shoal_sync_last_step(s, &w, &gs, &pay);
    FAILIF(gs < 1 || gs > 2 * j->n, 16, "step %d: %d contributions", t, gs);
    for (size_t i = 0; i < N; i++) {
      applied += (double)g[i] * gs; /* the average times the data sets it covers */
      p[i] -= g[i];
    }
    FAILIF(shoal_sync_end(s), 17, "end %d: %s", t, shoal_sync_errmsg(s));
    if (t == 5) { /* between steps: the caller uses the communicator (evaluation) */
      FAILIF(shoal_sync_pause(s), 18, "pause: %s", shoal_sync_errmsg(s));
      int one = 1;
      FAILIF(shoal_allreduce(c, SHOAL_IN_PLACE, &one, 1, SHOAL_INT32, SHOAL_SUM) || one != j->n, 19,
             "allreduce between steps: %s", shoal_comm_errmsg(c));
    }
  }
  FAILIF(shoal_sync_final(s), 20, "final: %s", shoal_sync_errmsg(s));
  /* every worker holds the same parameters */
  int64_t *h = calloc((size_t)j->n, sizeof *h);
  h[rank] = (int64_t)fnv(p, N * sizeof(float));
  FAILIF(shoal_allgather(c, SHOAL_IN_PLACE, h, 1, SHOAL_INT64), 21, "allgather: %s", shoal_comm_errmsg(c));
  for (int r = 1; r < j->n; r++) FAILIF(h[r] != h[0], 22, "worker %d's parameters differ from worker 0's", r);
  /* carry=2: every gradient produced was applied exactly once (weights in contributions) */
  double tot[2] = {produced, applied};
  FAILIF(shoal_allreduce(c, SHOAL_IN_PLACE, tot, 2, SHOAL_FLOAT64, SHOAL_SUM), 23, "sum: %s", shoal_comm_errmsg(c));
  FAILIF(tot[1] / j->n > tot[0] + 1, 26, "applied %.0f of %.0f produced", tot[1] / j->n, tot[0]);
  if (j->carry == 2) FAILIF(fabs(tot[0] - tot[1] * 1.0 / j->n) > 1e-6 * fabs(tot[0]) + 1, 24,
                            "carry=2: produced %.0f, applied %.0f (x%d ranks)", tot[0], tot[1], j->n);
  if (rank == j->n - 1) FAILIF(late_steps + skipped < 3, 25, "the late worker was late %d times", late_steps);
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  free(p);
  free(g);
  free(h);
  return 0;
}

static void drop_dir(void) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd)) {}
}

static void fresh_dir(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/shoal-partial-%d", (int)getpid());
  mkdir(g_dir, 0700);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -f %s/*", g_dir);
  if (system(cmd)) {}
}

TEST_T(sync_partial_late_worker_carry_wait_loses_nothing, 90) {
  job_t a = {.n = 3, .carry = 2, .ahead = 2};
  fresh_dir();
  run(3, late_rank, &a);
  job_t b = {.n = 4, .carry = 2, .ahead = 0};
  fresh_dir();
  run(4, late_rank, &b);
  drop_dir();
}

TEST_T(sync_partial_late_worker_drop_and_carry, 90) {
  job_t a = {.n = 3, .carry = 0, .ahead = 1};
  fresh_dir();
  run(3, late_rank, &a);
  job_t b = {.n = 3, .carry = 1, .ahead = 2};
  fresh_dir();
  run(3, late_rank, &b);
  drop_dir();
}

/* min_ready = every worker: a slow worker is never told to skip (the window waits for it), so every
 * step has every worker's gradients. The slowness is only what makes a skip tempting; the assertion
 * (never fewer than min_ready) holds whatever the timing. */
static int min_ready_rank(int rank, void *arg) {
  int n = *(int *)arg;
  shoal_comm_t *c = train_test_join(rank, n, g_port);
  if (!c) return 10;
  enum { N = 64, STEPS = 8 };
  float p[N] = {0}, g[N];
  shoal_sync_t *s = NULL;
  char cfg[128];
  snprintf(cfg, sizeof cfg, "window=fixed tau_ms=50 carry=0 ahead=1 min_ready=%d", n);
  FAILIF(shoal_sync_create(c, "partial", cfg, &s), 11, "create '%s': %s", cfg, shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, N) != 0, 12, "add: %s", shoal_last_error());
  for (int t = 0; t < STEPS; t++) {
    if (rank == n - 1 && t > 2) { /* slow before begin (loading data): the others' window is open by then */
      struct timespec ts = {0, 30000000};
      nanosleep(&ts, NULL);
    }
    FAILIF(shoal_sync_begin(s, t), 13, "begin %d: %s", t, shoal_sync_errmsg(s));
    FAILIF(shoal_sync_flags(s) & SHOAL_SYNC_F_SKIP, 14, "step %d: rank %d told to skip with min_ready=%d", t, rank, n);
    for (int i = 0; i < N; i++) g[i] = (float)(1 << rank);
    if (rank == n - 1 && t == 2) { /* one long compute: its estimate now exceeds the 50 ms window */
      struct timespec ts = {0, 300000000};
      nanosleep(&ts, NULL);
    }
    FAILIF(shoal_sync_finish(s), 15, "finish %d: %s", t, shoal_sync_errmsg(s));
    int gs;
    double w, pay;
    shoal_sync_last_step(s, &w, &gs, &pay);
    FAILIF(gs != n, 16, "step %d: %d contributions with min_ready=%d", t, gs, n);
    FAILIF(g[0] != (float)((1 << n) - 1) / (float)n, 17, "step %d: average %g", t, g[0]);
    FAILIF(shoal_sync_end(s), 18, "end %d: %s", t, shoal_sync_errmsg(s));
  }
  FAILIF(shoal_sync_final(s), 20, "final: %s", shoal_sync_errmsg(s));
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_partial_min_ready_all_never_skips, 90) {
  int n = 4;
  run(n, min_ready_rank, &n);
}

/* ---- straggler injection ---- */

TEST(straggle_patterns) {
  shoal__straggle_t s;
  CHECK_OK(shoal__straggle_parse("", 1, 4, &s));
  CHECK(!s.on);
  CHECK_OK(shoal__straggle_parse("slow:3:0.3", 1, 4, &s));
  CHECK_NEAR(shoal__straggle_factor(&s, 3, 17), 1.3, 1e-12);
  CHECK_NEAR(shoal__straggle_factor(&s, 2, 17), 1.0, 1e-12);
  CHECK_OK(shoal__straggle_parse("spike:0.1:5", 7, 4, &s));
  int spikes = 0;
  for (long it = 0; it < 20000; it++) {
    double f = shoal__straggle_factor(&s, (int)(it % 4), it);
    CHECK(f == 1.0 || f == 5.0);
    spikes += f == 5.0;
  }
  CHECK_MSG(spikes > 1700 && spikes < 2300, "%d spikes of 20000 at p = 0.1", spikes);
  /* spike1: one worker per spiking step, each worker in turn, the factor spread over [2, 5] */
  CHECK_OK(shoal__straggle_parse("spike1:0.2:2:5", 7, 4, &s));
  int steps = 0, per[4] = {0}, low = 0, high = 0;
  for (long it = 0; it < 20000; it++) {
    int slow = 0;
    for (int w = 0; w < 4; w++) {
      double f = shoal__straggle_factor(&s, w, it);
      if (f == 1.0) continue;
      CHECK_MSG(f >= 2.0 && f <= 5.0, "factor %g", f);
      slow++, per[w]++, low += f < 2.5, high += f > 4.5;
    }
    CHECK_MSG(slow <= 1, "%d workers slow in step %ld", slow, it);
    steps += slow;
  }
  CHECK_MSG(steps > 3700 && steps < 4300, "%d spiking steps of 20000 at p = 0.2", steps);
  for (int w = 0; w < 4; w++) CHECK_MSG(per[w] > 800 && per[w] < 1200, "worker %d spiked %d times", w, per[w]);
  CHECK_MSG(low > 500 && high > 500, "%d factors under 2.5, %d over 4.5", low, high);
  CHECK_OK(shoal__straggle_parse("spike1:0.5:3", 7, 4, &s));
  for (long it = 0; it < 100; it++) {
    double f = shoal__straggle_factor(&s, 2, it);
    CHECK(f == 1.0 || f == 3.0);
  }
  CHECK_EQ(shoal__straggle_parse("spike1:0.2:5:2", 1, 4, &s), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "spike1:P:LO[:HI]");
  CHECK_OK(shoal__straggle_parse("jitter:0.2", 7, 4, &s));
  double sl = 0, sl2 = 0;
  int n = 20000, clipped = 0;
  for (long it = 0; it < n; it++) {
    double f = shoal__straggle_factor(&s, 1, it), l = log(f);
    clipped += f == 1.0;
    sl += l;
    sl2 += l * l;
  }
  double mean = sl / n, sd = sqrt(sl2 / n - mean * mean);
  CHECK_MSG(fabs(mean - 0.4) < 0.01 && fabs(sd - 0.2) < 0.01, "log factor mean %g sd %g", mean, sd);
  CHECK_MSG(clipped < n / 20, "%d of %d clipped", clipped, n);
  /* a pure function of (seed, worker, iteration) */
  CHECK(shoal__straggle_factor(&s, 2, 99) == shoal__straggle_factor(&s, 2, 99));
  CHECK_OK(shoal__straggle_parse("slow:1:0.3,spike:0.02:5", 7, 4, &s));
  CHECK(shoal__straggle_factor(&s, 1, 3) >= 1.3 - 1e-12);
  CHECK_EQ(shoal__straggle_parse("slow:4:0.3", 1, 4, &s), SHOAL_ERR_INVALID);
  CHECK_CONTAINS(shoal_last_error(), "--straggle 'slow:4:0.3'");
  CHECK_EQ(shoal__straggle_parse("jitter", 1, 4, &s), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__straggle_parse("spike:2:5", 1, 4, &s), SHOAL_ERR_INVALID);
  CHECK_EQ(shoal__straggle_parse("slow:1:0.3,,", 1, 4, &s), SHOAL_ERR_INVALID);
}

static void expect_error(const char *args, const char *want) {
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "%s train --data /nonexistent-shoal-data --epochs 1 %s", shoal_test_cli(), args);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st != 0, "'%s' succeeded: %s", args, out);
  CHECK_MSG(strstr(out, want) != NULL, "'%s': expected \"%s\" in: %s", args, want, out);
}

TEST_T(cli_partial_options_named, 60) {
  expect_error("--straggle slow:1:0.3", "--straggle 'slow:1:0.3'"); /* one process: worker 1 does not exist */
  expect_error("--straggle wobble:3", "--straggle 'wobble:3'");
  expect_error("--sync partioal", "--sync 'partioal': expected bsp, dssync, ps, localsgd or partial");
}

/* shoal train under shoal launch with a slow worker: same parameters everywhere. */
TEST_T(cli_train_partial_slow_worker, 120) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char out[16384], cmd[2048], params[128], log[128];
  snprintf(params, sizeof params, "/tmp/shoal-partial-params-%d", (int)getpid());
  snprintf(log, sizeof log, "/tmp/shoal-partial-log-%d", (int)getpid());
  snprintf(cmd, sizeof cmd,
           "%s launch -n 3 %s train --sync partial --straggle slow:2:1 --sync-config 'log=%s' --train-subset 3072 "
           "--test-subset 1000 --epochs 2 --batch 32 --lr 0.1 --params-out %s",
           shoal_test_cli(), shoal_test_cli(), log, params);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 110);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "epoch   2/2");
  char f[3][200];
  for (int r = 0; r < 3; r++) {
    if (r) snprintf(f[r], sizeof f[r], "%s.rank%d", params, r);
    else snprintf(f[r], sizeof f[r], "%s", params);
  }
  for (int r = 1; r < 3; r++) {
    snprintf(cmd, sizeof cmd, "cmp %s %s", f[0], f[r]);
    CHECK_MSG(shoal_test_run_cmd(cmd, out, sizeof out, 30) == 0, "worker %d's parameters differ: %s", r, out);
  }
  /* the per-step log of every worker: 2 epochs x 32 steps */
  snprintf(cmd, sizeof cmd, "tail -n +2 %s.rank2 | wc -l", log);
  CHECK_OK(shoal_test_run_cmd(cmd, out, sizeof out, 30));
  CHECK_EQ(atoi(out), 64);
  for (int r = 0; r < 3; r++) {
    remove(f[r]);
    char l[200];
    if (r) snprintf(l, sizeof l, "%s.rank%d", log, r);
    else snprintf(l, sizeof l, "%s", log);
    remove(l);
  }
}

/* ---- log=: a file that cannot be written is an error naming it; a device gets no .rankN siblings ---- */

static int log_rank(int rank, void *arg) {
  const char *log = arg;
  shoal_comm_t *c = train_test_join(rank, 3, g_port);
  if (!c) return 10;
  enum { N = 16 };
  float p[N] = {0}, g[N];
  shoal_sync_t *s = NULL;
  char cfg[256];
  snprintf(cfg, sizeof cfg, "window=fixed tau_ms=50 carry=0 log=%s", log);
  FAILIF(shoal_sync_create(c, "partial", cfg, &s), 11, "create '%s': %s", cfg, shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, N) != 0, 12, "add: %s", shoal_last_error());
  for (int t = 0; t < 3; t++) {
    FAILIF(shoal_sync_begin(s, t), 13, "begin %d: %s", t, shoal_sync_errmsg(s));
    for (int i = 0; i < N; i++) g[i] = 1.0f;
    FAILIF(shoal_sync_finish(s), 15, "finish %d: %s", t, shoal_sync_errmsg(s));
    FAILIF(shoal_sync_end(s), 18, "end %d: %s", t, shoal_sync_errmsg(s));
  }
  int rc = shoal_sync_final(s);
  const char *e = shoal_sync_errmsg(s);
  FAILIF(rc == 0, 20, "rank %d: final returned 0 although its log (%s) cannot be written", rank, log);
  FAILIF(!strstr(e, log), 21, "rank %d: the error does not name the log %s: %s", rank, log, e);
  fprintf(stderr, "rank %d: %s\n", rank, e);
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_partial_log_unwritable_named_no_siblings, 60) {
  fresh_dir();
  char log[256], sib[280];
  snprintf(log, sizeof log, "%s/full", g_dir); /* /dev/full under another name: nothing ever created in /dev */
  CHECK_OK(symlink("/dev/full", log) ? SHOAL_ERR_IO : 0);
  run(3, log_rank, log);
  for (int r = 1; r < 3; r++) {
    snprintf(sib, sizeof sib, "%s.rank%d", log, r);
    CHECK_MSG(access(sib, F_OK) != 0, "%s was created beside a device", sib);
  }
  drop_dir();
}
