/* The public strategy interface (include/shoal/sync.h) on flat buffers with
 * real ranks (forked processes): every strategy's result against a reference
 * computed in double, bucket overlap in any readiness order, DS-Sync's
 * overlapped form, parameter servers, and the errors a caller can make. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "train_testutil.h"
#include "shoal/sync.h"
#include "train/sync.h"

static int g_port;

static shoal_comm_t *join(int rank, int n) { return train_test_join(rank, n, g_port); }

static void run(int n, int (*fn)(int, void *), void *arg) {
  g_port = shoal_test_free_port();
  int st[16];
  int ok = shoal_test_fork_ranks(n, fn, arg, 60, st);
  for (int i = 0; i < n; i++) CHECK_MSG(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0, "rank %d: status %d", i, st[i]);
  CHECK_EQ(ok, n);
}

/* The value of element i of rank r's vector at step t (exact in float). */
static float val(int r, int t, size_t i) { return (float)((r + 1) * 0.25 + t * 0.5 + (double)(i % 97) * 0.125); }

#define FAILIF(cond, code, ...)                  \
  do {                                          \
    if (cond) {                                 \
      fprintf(stderr, __VA_ARGS__);             \
      fputc('\n', stderr);                      \
      return code;                              \
    }                                           \
  } while (0)

/* ---- bsp: three buckets, reported in a rank-dependent order ---- */

typedef struct {
  int n, overlap;
} bsp_job_t;

static int bsp_rank(int rank, void *arg) {
  bsp_job_t *j = arg;
  shoal_comm_t *c = join(rank, j->n);
  if (!c) return 10;
  const size_t sz[3] = {1000, 37, 70000}, N = 1000 + 37 + 70000;
  float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
  for (size_t i = 0; i < N; i++) p[i] = 1.0f + (float)rank; /* started apart: final gives worker 0's */
  shoal_sync_t *s = NULL;
  char cfg[32];
  snprintf(cfg, sizeof cfg, "overlap=%d", j->overlap);
  FAILIF(shoal_sync_create(c, "bsp", cfg, &s), 11, "create: %s", shoal_last_error());
  size_t off = 0;
  for (int b = 0; b < 3; b++) {
    int idx = shoal_sync_add_bucket(s, p + off, g + off, sz[b]);
    FAILIF(idx != b, 12, "add_bucket %d returned %d: %s", b, idx, shoal_last_error());
    off += sz[b];
  }
  FAILIF(shoal_sync_flags(s) != SHOAL_SYNC_F_GRADS, 13, "flags %d", shoal_sync_flags(s));
  for (int t = 0; t < 4; t++) {
    for (size_t i = 0; i < N; i++) g[i] = val(rank, t, i);
    FAILIF(shoal_sync_begin(s, t), 14, "begin: %s", shoal_sync_errmsg(s));
    /* rank-dependent readiness order; the last rank reports none (finish covers them) */
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {1, 0, 2}};
    if (rank != j->n - 1)
      for (int k = 0; k < 3; k++)
        FAILIF(shoal_sync_bucket_ready(s, order[rank % 3][k]), 15, "ready: %s", shoal_sync_errmsg(s));
    FAILIF(shoal_sync_finish(s), 16, "finish: %s", shoal_sync_errmsg(s));
    for (size_t i = 0; i < N; i++) {
      double m = 0;
      for (int r = 0; r < j->n; r++) m += val(r, t, i);
      m /= j->n;
      FAILIF(fabs(g[i] - m) > 1e-5 * fabs(m), 17, "step %d g[%zu] = %g, mean %g", t, i, g[i], m);
      FAILIF(p[i] != 1.0f + (float)rank, 18, "bsp changed parameters");
    }
    FAILIF(shoal_sync_end(s), 19, "end: %s", shoal_sync_errmsg(s));
    double w, pay;
    int gs;
    shoal_sync_last_step(s, &w, &gs, &pay);
    FAILIF(gs != j->n || pay != (double)N * 4, 20, "group %d payload %g", gs, pay);
  }
  FAILIF(shoal_sync_final(s), 21, "final: %s", shoal_sync_errmsg(s));
  for (size_t i = 0; i < N; i++) FAILIF(p[i] != 1.0f, 22, "after final p[%zu] = %g, not worker 0's 1", i, p[i]);
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  free(p);
  free(g);
  return 0;
}

TEST_T(sync_bsp_buckets_any_ready_order, 90) {
  bsp_job_t a = {.n = 3, .overlap = 1};
  run(3, bsp_rank, &a);
  bsp_job_t b = {.n = 2, .overlap = 0};
  run(2, bsp_rank, &b);
}

/* ---- localsgd: averaged exactly every period steps ---- */

static int lsgd_rank(int rank, void *arg) {
  int n = *(int *)arg;
  shoal_comm_t *c = join(rank, n);
  if (!c) return 10;
  enum { N = 500 };
  float p[N], g[N];
  shoal_sync_t *s = NULL;
  FAILIF(shoal_sync_create(c, "localsgd", "period=3", &s), 11, "create: %s", shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, N) != 0, 12, "add: %s", shoal_last_error());
  static double sim[3][N];
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < N; i++) sim[r][i] = val(r, 0, i);
  for (size_t i = 0; i < N; i++) p[i] = val(rank, 0, i);
  for (int t = 0; t < 6; t++) {
    FAILIF(shoal_sync_begin(s, t) || shoal_sync_finish(s), 13, "%s", shoal_sync_errmsg(s));
    for (size_t i = 0; i < N; i++) p[i] += 0.5f * (float)rank; /* a local step */
    FAILIF(shoal_sync_end(s), 14, "%s", shoal_sync_errmsg(s));
    int gs;
    shoal_sync_last_step(s, NULL, &gs, NULL);
    int synced = (t + 1) % 3 == 0;
    FAILIF(gs != (synced ? n : 1), 15, "step %d group %d", t, gs);
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < N; i++) sim[r][i] += 0.5 * r;
    if (synced)
      for (size_t i = 0; i < N; i++) {
        double m = 0;
        for (int r = 0; r < n; r++) m += sim[r][i] / n;
        for (int r = 0; r < n; r++) sim[r][i] = m;
      }
    for (size_t i = 0; i < N; i++)
      FAILIF(fabs(p[i] - sim[rank][i]) > 1e-4, 16, "step %d p[%zu] %g want %g", t, i, p[i], sim[rank][i]);
  }
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_localsgd_period, 60) {
  int n = 3;
  run(3, lsgd_rank, &n);
}

/* ---- dssync: every pattern, with and without overlap, against a simulation ---- */

typedef struct {
  int n, overlap;
  const char *cfg;
  shoal_ds_pattern_t kind;
  int k;
  const int *racks;
  int steps;
} ds_job_t;

static int ds_rank(int rank, void *arg) {
  ds_job_t *j = arg;
  shoal_comm_t *c = join(rank, j->n);
  if (!c) return 10;
  enum { N = 300 };
  int n = j->n;
  float p[N], g[N];
  double *all = malloc(sizeof(double) * N * (size_t)n), *before = malloc(sizeof(double) * N * (size_t)n);
  char cfg[256];
  snprintf(cfg, sizeof cfg, "%s overlap=%d seed=7", j->cfg, j->overlap);
  shoal_sync_t *s = NULL;
  FAILIF(shoal_sync_create(c, "dssync", cfg, &s), 11, "create '%s': %s", cfg, shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, 100) != 0 || shoal_sync_add_bucket(s, p + 100, g + 100, N - 100) != 1, 12,
         "add: %s", shoal_last_error());
  FAILIF(shoal_sync_flags(s) != SHOAL_SYNC_F_PARAMS, 13, "flags");
  shoal__ds_params_t dp = {.kind = j->kind, .n = n, .k = j->k, .seed = 7, .rack_of = j->racks};
  shoal__ds_t *sim = NULL;
  FAILIF(shoal__ds_create(NULL, &dp, &sim), 14, "sim: %s", shoal_last_error());
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < N; i++) all[(size_t)r * N + i] = val(r, 0, i);
  for (size_t i = 0; i < N; i++) p[i] = (float)all[(size_t)rank * N + i];
  int grp[16], ng;
  for (int t = 0; t < j->steps; t++) {
    FAILIF(shoal_sync_begin(s, t) || shoal_sync_finish(s), 15, "%s", shoal_sync_errmsg(s));
    for (size_t i = 0; i < N; i++) p[i] -= 0.25f * (float)(rank + 1); /* the local step */
    FAILIF(shoal_sync_end(s), 16, "%s", shoal_sync_errmsg(s));
    /* simulation: overlap averages the starting point and adds the local update */
    memcpy(before, all, sizeof(double) * N * (size_t)n);
    if (!j->overlap)
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < N; i++) all[(size_t)r * N + i] -= 0.25 * (r + 1);
    shoal__ds_groups(sim, (uint64_t)t, grp, &ng);
    for (int gi = 0; gi < ng; gi++)
      for (size_t i = 0; i < N; i++) {
        double sum = 0;
        int cnt = 0;
        for (int r = 0; r < n; r++)
          if (grp[r] == gi) sum += all[(size_t)r * N + i], cnt++;
        for (int r = 0; r < n; r++)
          if (grp[r] == gi) all[(size_t)r * N + i] = sum / cnt;
      }
    if (j->overlap)
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < N; i++) all[(size_t)r * N + i] -= 0.25 * (r + 1);
    int gs, want = 0;
    for (int r = 0; r < n; r++) want += grp[r] == grp[rank];
    shoal_sync_last_step(s, NULL, &gs, NULL);
    FAILIF(gs != want, 17, "step %d: group size %d, pattern says %d", t, gs, want);
    for (size_t i = 0; i < N; i++)
      FAILIF(fabs(p[i] - all[(size_t)rank * N + i]) > 1e-4, 18, "step %d p[%zu] %g, simulation %g", t, i, p[i],
             all[(size_t)rank * N + i]);
  }
  (void)before;
  /* final: every rank holds the global mean */
  FAILIF(shoal_sync_final(s), 19, "final: %s", shoal_sync_errmsg(s));
  for (size_t i = 0; i < N; i++) {
    double m = 0;
    for (int r = 0; r < n; r++) m += all[(size_t)r * N + i] / n;
    FAILIF(fabs(p[i] - m) > 1e-4, 20, "final p[%zu] %g mean %g", i, p[i], m);
  }
  shoal__ds_destroy(sim);
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  free(all);
  free(before);
  return 0;
}

TEST_T(sync_dssync_every_pattern_and_overlap, 120) {
  static const int racks[4] = {0, 0, 1, 1};
  ds_job_t jobs[] = {
      {.n = 4, .cfg = "pattern=butterfly k=2", .kind = SHOAL_DS_BUTTERFLY, .k = 2, .steps = 4},
      {.n = 4, .cfg = "pattern=random k=2", .kind = SHOAL_DS_RANDOM, .k = 2, .steps = 5},
      {.n = 4, .cfg = "pattern=topo k=2 racks=0,0,1,1", .kind = SHOAL_DS_TOPO, .k = 2, .racks = racks, .steps = 5},
      {.n = 4, .cfg = "pattern=fixed k=2", .kind = SHOAL_DS_FIXED, .k = 2, .steps = 3},
  };
  for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++)
    for (int ov = 0; ov < 2; ov++) {
      jobs[i].overlap = ov;
      run(4, ds_rank, &jobs[i]);
    }
}

/* ---- ps: sync mode equals the averaged SGD step; async runs and ends equal ---- */

static int ps_rank(int rank, void *arg) {
  const char *mode = arg;
  int n = 3, W = 2;
  shoal_comm_t *c = join(rank, n);
  if (!c) return 10;
  enum { N = 1001 };
  float p[N], g[N];
  for (size_t i = 0; i < N; i++) p[i] = 1.0f;
  char cfg[128];
  snprintf(cfg, sizeof cfg, "servers=1 mode=%s momentum=0 wd=0 lr=0.5", mode);
  shoal_sync_t *s = NULL;
  FAILIF(shoal_sync_create(c, "ps", cfg, &s), 11, "create: %s", shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, p, g, 400) != 0 || shoal_sync_add_bucket(s, p + 400, g + 400, N - 400) != 1, 12,
         "add: %s", shoal_last_error());
  if (rank == 2) {
    FAILIF(shoal_sync_flags(s) != SHOAL_SYNC_F_SERVER || shoal_sync_workers(s) != NULL, 13, "server flags");
    FAILIF(shoal_sync_serve(s), 14, "serve: %s", shoal_sync_errmsg(s));
  } else {
    FAILIF(shoal_sync_flags(s) != SHOAL_SYNC_F_SERVER_STEP, 15, "worker flags");
    FAILIF(shoal_comm_size(shoal_sync_workers(s)) != W, 16, "workers");
    double want = 1.0;
    for (int t = 0; t < 3; t++) {
      for (size_t i = 0; i < N; i++) g[i] = (float)(rank + 1);
      FAILIF(shoal_sync_begin(s, t) || shoal_sync_finish(s) || shoal_sync_end(s), 17, "%s", shoal_sync_errmsg(s));
      want -= 0.5 * 1.5; /* mean gradient 1.5 */
      if (!strcmp(mode, "sync"))
        for (size_t i = 0; i < N; i++) FAILIF(fabs(p[i] - want) > 1e-5, 18, "step %d p[%zu] %g want %g", t, i, p[i], want);
    }
    FAILIF(shoal_sync_final(s), 19, "final: %s", shoal_sync_errmsg(s));
    /* both modes apply every gradient once, scaled by 1/W: the same final parameters */
    for (size_t i = 0; i < N; i++) FAILIF(fabs(p[i] - want) > 1e-5, 20, "final p[%zu] %g want %g", i, p[i], want);
  }
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_ps_modes, 90) {
  run(3, ps_rank, "sync");
  run(3, ps_rank, "async");
}

/* ---- errors name what is wrong ---- */

static int err_rank(int rank, void *arg) {
  (void)arg;
  shoal_comm_t *c = join(rank, 1);
  if (!c) return 10;
  shoal_sync_t *s = NULL;
  struct {
    const char *st, *cfg, *want;
  } cases[] = {
      {"nope", "", "expected one of bsp, dssync, localsgd, ps"},
      {"bsp", "period=3", "'period' is not a setting of bsp"},
      {"bsp", "overlap", "expected key=value"},
      {"bsp", "overlap=2", "overlap=2"},
      {"dssync", "pattern=ring", "pattern=ring"},
      {"dssync", "pattern=topo", "needs racks"},
      {"dssync", "pattern=butterfly racks=0", "racks applies to pattern=topo only"},
      {"dssync", "pattern=random h=0", "h applies to pattern=topo only"},  /* given at all, even as 0 */
      {"dssync", "b=0", "b applies to pattern=topo only"},
      {"ps", "", "needs at least 2 ranks"},
      {"localsgd", "period=0", "period=0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = shoal_sync_create(c, cases[i].st, cases[i].cfg, &s);
    FAILIF(rc >= 0, 11, "%s '%s' was accepted", cases[i].st, cases[i].cfg);
    FAILIF(!strstr(shoal_last_error(), cases[i].want), 12, "%s '%s': message '%s' lacks '%s'", cases[i].st,
           cases[i].cfg, shoal_last_error(), cases[i].want);
  }
  /* protocol misuse */
  float p[4], g[4];
  FAILIF(shoal_sync_create(c, "bsp", NULL, &s), 13, "%s", shoal_last_error());
  FAILIF(shoal_sync_begin(s, 0) >= 0 || !strstr(shoal_sync_errmsg(s), "no bucket"), 14, "begin without buckets: %s",
         shoal_sync_errmsg(s));
  shoal_sync_destroy(s);
  FAILIF(shoal_sync_create(c, "bsp", NULL, &s), 15, "%s", shoal_last_error());
  shoal_sync_add_bucket(s, p, g, 4);
  FAILIF(shoal_sync_finish(s) >= 0 || !strstr(shoal_sync_errmsg(s), "between steps"), 16, "finish first: %s",
         shoal_sync_errmsg(s));
  shoal_sync_destroy(s);
  FAILIF(shoal_sync_create(c, "bsp", NULL, &s), 17, "%s", shoal_last_error());
  shoal_sync_add_bucket(s, p, g, 4);
  FAILIF(shoal_sync_begin(s, 0) || shoal_sync_bucket_ready(s, 5) >= 0, 18, "bucket 5 accepted");
  shoal_sync_destroy(s);
  /* after an error the context is failed: every later call says so, with the first error */
  FAILIF(shoal_sync_create(c, "bsp", NULL, &s), 20, "%s", shoal_last_error());
  FAILIF(shoal_sync_add_bucket(s, NULL, g, 4) != SHOAL_ERR_INVALID, 21, "NULL bucket accepted");
  FAILIF(shoal_sync_add_bucket(s, p, g, 4) != SHOAL_ERR_ABORTED || !strstr(shoal_last_error(), "NULL buffer"), 22,
         "add_bucket after an error: %s", shoal_last_error());
  FAILIF(shoal_sync_set_lr(s, 0.1) != SHOAL_ERR_ABORTED || !strstr(shoal_sync_errmsg(s), "NULL buffer"), 23,
         "set_lr after an error: %s", shoal_sync_errmsg(s));
  shoal_sync_destroy(s);
  FAILIF(shoal_sync_strategy_name(0) == NULL || shoal_sync_strategy_name(5) != NULL, 19, "strategy names");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_errors_name_the_problem, 60) { run(1, err_rank, NULL); }
