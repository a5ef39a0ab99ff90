/* Training runtime across real ranks (forked processes over loopback TCP):
 * BSP equals one worker with the global batch, DS-Sync group averaging over
 * sub-communicators, synchronous PS equals BSP, SSP's staleness bound, and
 * short distributed runs that must learn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "train_testutil.h"
#include "core/rng.h"
#include "shoal/comm.h"
#include "shoal/train.h"
#include "train/ckpt.h"
#include "train/sync.h"

static shoal_dataset_t *g_train, *g_test;
static int g_port;

static void load_fmnist(void) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  CHECK_OK(shoal_dataset_load_dir(SHOAL_FASHION_MNIST_DIR, "train", 0, &g_train));
  CHECK_OK(shoal_dataset_load_dir(SHOAL_FASHION_MNIST_DIR, "t10k", 0, &g_test));
}

static shoal_comm_t *join(int rank, int n) { return train_test_join(rank, n, g_port); }

typedef struct job {
  int n;
  shoal_train_opts_t o;
  int want_max_stale_le, want_max_stale_ge; /* servers' checks (-1: none) */
  const char *expect_err;                    /* every worker must fail with this in its message */
  int stop_rank1;                            /* > 0: rank stop_rank1 - 1 has its stop flag set from the start */
  int want_stopped;                          /* every worker must report res.stopped == want_stopped */
} job_t;

static volatile int g_stop_flag;

static int train_rank(int rank, void *arg) {
  job_t *j = arg;
  shoal_comm_t *c = join(rank, j->n);
  if (!c) return 10;
  shoal_train_result_t r;
  if (j->stop_rank1 > 0) {
    g_stop_flag = rank == j->stop_rank1 - 1;
    j->o.stop_flag = &g_stop_flag;
  }
  int rc = shoal_train_run(&j->o, c, &r);
  if (!rc && !r.is_server && r.stopped != j->want_stopped) {
    fprintf(stderr, "rank %d: stopped %d, expected %d\n", rank, r.stopped, j->want_stopped);
    shoal_comm_destroy(c);
    return 14;
  }
  if (j->expect_err) {
    int ok = rc && (strstr(shoal_last_error(), j->expect_err) || (r.is_server = 0, 0));
    if (!ok) fprintf(stderr, "rank %d: expected an error with \"%s\", got rc %d: %s\n", rank, j->expect_err, rc,
                     rc ? shoal_last_error() : "");
    shoal_comm_destroy(c);
    return ok ? 0 : 30;
  }
  if (rc) fprintf(stderr, "rank %d: train: %s\n", rank, shoal_last_error());
  shoal_comm_destroy(c);
  if (rc) return 11;
  if (r.is_server && j->want_max_stale_le >= 0 && r.max_staleness > j->want_max_stale_le) {
    fprintf(stderr, "server %d: staleness %d > %d\n", rank, r.max_staleness, j->want_max_stale_le);
    return 12;
  }
  if (r.is_server && j->want_max_stale_ge >= 0 && r.max_staleness < j->want_max_stale_ge) {
    fprintf(stderr, "server %d: staleness %d < %d (no asynchrony happened)\n", rank, r.max_staleness,
            j->want_max_stale_ge);
    return 13;
  }
  return 0;
}

static void run_ranks(job_t *j, double timeout) {
  g_port = shoal_test_free_port();
  int st[16];
  int ok = shoal_test_fork_ranks(j->n, train_rank, j, timeout, st);
  for (int i = 0; i < j->n; i++)
    CHECK_MSG(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0, "rank %d: status %d", i, st[i]);
  CHECK_EQ(ok, j->n);
}

static void base_opts(shoal_train_opts_t *o, const char *out) {
  shoal_train_opts_init(o);
  o->train_data = g_train;
  o->test_data = g_test;
  o->train_subset = 4096;
  o->test_subset = 1000;
  o->quiet = 1;
  o->params_out = out;
  o->warmup_iters = 3;
}

static size_t mlp_n(void) { return 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10; }

static float *read_params(const char *path) {
  size_t n = mlp_n();
  float *p = malloc(n * sizeof(float));
  FILE *f = fopen(path, "rb");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  CHECK_EQ(fread(p, sizeof(float), n, f), n);
  fclose(f);
  return p;
}

static double max_diff(const float *a, const float *b) {
  double m = 0;
  for (size_t i = 0; i < mlp_n(); i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

static void tmpname(char *buf, const char *tag) {
  snprintf(buf, 256, "/tmp/shoal-train-%s-%d", tag, (int)getpid());
}

static void unlink_all(const char *path, int n) {
  char b[300];
  unlink(path);
  for (int r = 1; r < n; r++) {
    snprintf(b, sizeof b, "%s.rank%d", path, r);
    unlink(b);
  }
}

/* BSP on 4 workers with batch b gives one worker's parameters with batch 4b. */
TEST_T(bsp_equals_single_worker_with_global_batch, 120) {
  load_fmnist();
  char single[256], multi[256], other[256], b[300];
  tmpname(single, "single");
  tmpname(multi, "bsp");
  tmpname(other, "other");
  shoal_train_opts_t o;
  base_opts(&o, single);
  o.batch = 64;
  o.max_iters = 8;
  CHECK_OK(shoal_train_run(&o, NULL, NULL));
  o.batch = 32; /* control: a different batch gives different parameters */
  o.params_out = other;
  CHECK_OK(shoal_train_run(&o, NULL, NULL));
  float *ps = read_params(single), *po = read_params(other);
  for (int variant = 0; variant < 2; variant++) {
    job_t j = {.n = 4, .want_max_stale_le = -1, .want_max_stale_ge = -1};
    base_opts(&j.o, multi);
    j.o.batch = 16;
    j.o.max_iters = 8;
    j.o.overlap = variant == 0;               /* overlapped per-layer buckets ... */
    j.o.bucket_bytes = variant == 0 ? 0 : (size_t)64 << 20; /* ... or one fused bucket */
    run_ranks(&j, 100);
    float *pm = read_params(multi);
    double d = max_diff(ps, pm);
    CHECK_MSG(d < 2e-5, "variant %d: BSP differs from the single worker by %g", variant, d);
    CHECK_MSG(max_diff(po, pm) > 1e-3, "control run too close: the test could not fail");
    for (int r = 1; r < 4; r++) { /* every rank holds the same bytes */
      snprintf(b, sizeof b, "%s.rank%d", multi, r);
      float *pr = read_params(b);
      CHECK(!memcmp(pr, pm, mlp_n() * sizeof(float)));
      free(pr);
    }
    free(pm);
    unlink_all(multi, 4);
  }
  free(ps);
  free(po);
  unlink(single);
  unlink(other);
}

/* Synchronous PS (2 workers, 2 servers) equals BSP on 2 workers. */
TEST_T(ps_sync_equals_bsp, 120) {
  load_fmnist();
  char bsp[256], ps[256];
  tmpname(bsp, "psbsp");
  tmpname(ps, "ps");
  job_t j = {.n = 2, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, bsp);
  j.o.batch = 32;
  j.o.max_iters = 8;
  run_ranks(&j, 100);
  job_t k = {.n = 4, .want_max_stale_le = 0, .want_max_stale_ge = -1};
  base_opts(&k.o, ps);
  k.o.batch = 32;
  k.o.max_iters = 8;
  k.o.sync = SHOAL_SYNC_PS;
  k.o.servers = 2;
  run_ranks(&k, 100);
  float *a = read_params(bsp), *b = read_params(ps);
  double d = max_diff(a, b);
  CHECK_MSG(d < 2e-5, "sync PS differs from BSP by %g", d);
  free(a);
  free(b);
  unlink_all(bsp, 2);
  unlink_all(ps, 2);
}

/* SSP with a straggler (worker 0 sleeps 25 ms per step): the servers refuse (error) any gradient staler than s,
 * and staleness does occur (so the bound is exercised). Async without a bound
 * goes beyond it, which shows the measurement can fail. */
TEST_T(ssp_never_applies_gradients_older_than_bound, 120) {
  load_fmnist();
  job_t j = {.n = 4, .want_max_stale_le = 1, .want_max_stale_ge = 1};
  base_opts(&j.o, NULL);
  j.o.batch = 16;
  j.o.max_iters = 24;
  j.o.sync = SHOAL_SYNC_PS;
  j.o.servers = 1;
  j.o.ps_mode = SHOAL_PS_SSP;
  j.o.staleness = 1;
  j.o.ps_slow_worker_ms = 25;
  run_ranks(&j, 100);
  j.o.ps_mode = SHOAL_PS_ASYNC;
  j.want_max_stale_le = -1;
  j.want_max_stale_ge = 2;
  run_ranks(&j, 100);
}

/* ---- DS-Sync group averaging over real sub-communicators ---- */

typedef struct ds_job {
  shoal_ds_pattern_t kind;
  int n, k, rounds, d;
  const int *racks;
} ds_job_t;

static void initial(int rank, int d, float *x) {
  shoal_rng_t r;
  shoal_rng_seed2(&r, 42, (uint64_t)rank);
  for (int i = 0; i < d; i++) x[i] = (float)shoal_rng_normal(&r);
}

static int ds_rank(int rank, void *arg) {
  ds_job_t *j = arg;
  shoal_comm_t *c = join(rank, j->n);
  if (!c) return 10;
  int rc = 0;
  shoal__ds_params_t p = {.kind = j->kind, .n = j->n, .k = j->k, .seed = 5, .rack_of = j->racks};
  shoal__ds_t *ds = NULL, *sim = NULL;
  float *x = malloc(sizeof(float) * j->d), *all = malloc(sizeof(float) * j->d * j->n);
  if (shoal__ds_create(c, &p, &ds) || shoal__ds_create(NULL, &p, &sim)) return 11;
  initial(rank, j->d, x);
  for (int r = 0; r < j->n; r++) initial(r, j->d, all + (size_t)r * j->d); /* the reference simulation */
  double *mean = calloc((size_t)j->d, sizeof(double));
  for (int r = 0; r < j->n; r++)
    for (int i = 0; i < j->d; i++) mean[i] += all[(size_t)r * j->d + i] / j->n;
  int L = shoal__ds_rounds_exact(ds);
  for (int t = 0; t < j->rounds && !rc; t++) {
    int gsize;
    if (shoal__ds_sync(ds, (uint64_t)t, x, (size_t)j->d, &gsize)) {
      fprintf(stderr, "rank %d round %d: %s\n", rank, t, shoal_last_error());
      rc = 12;
      break;
    }
    /* simulate the same round in double */
    int g[64], ng;
    shoal__ds_groups(sim, (uint64_t)t, g, &ng);
    for (int gi = 0; gi < ng; gi++)
      for (int i = 0; i < j->d; i++) {
        double s = 0;
        int cnt = 0;
        for (int r = 0; r < j->n; r++)
          if (g[r] == gi) s += all[(size_t)r * j->d + i], cnt++;
        for (int r = 0; r < j->n; r++)
          if (g[r] == gi) all[(size_t)r * j->d + i] = (float)(s / cnt);
      }
    for (int i = 0; i < j->d; i++)
      if (fabsf(x[i] - all[(size_t)rank * j->d + i]) > 1e-5f) {
        fprintf(stderr, "rank %d round %d: x[%d] %g, simulation %g\n", rank, t, i, x[i], all[(size_t)rank * j->d + i]);
        rc = 13;
        break;
      }
  }
  if (!rc && L > 0) {
    /* butterfly: after L rounds every rank holds the same bytes, the global mean */
    float *ga = malloc(sizeof(float) * j->d * j->n);
    if (shoal_allgather(c, x, ga, (size_t)j->d, SHOAL_FLOAT32)) rc = 14;
    for (int r = 1; r < j->n && !rc; r++)
      if (memcmp(ga, ga + (size_t)r * j->d, sizeof(float) * j->d)) {
        fprintf(stderr, "rank %d differs from rank 0 after %d rounds\n", r, j->rounds);
        rc = 15;
      }
    for (int i = 0; i < j->d && !rc; i++)
      if (fabs(x[i] - mean[i]) > 1e-5) rc = 16;
    free(ga);
  }
  shoal__ds_destroy(ds);
  shoal__ds_destroy(sim);
  shoal_comm_destroy(c);
  free(x);
  free(all);
  free(mean);
  return rc;
}

static void run_ds(ds_job_t *j) {
  g_port = shoal_test_free_port();
  int st[16];
  int ok = shoal_test_fork_ranks(j->n, ds_rank, j, 60, st);
  for (int i = 0; i < j->n; i++)
    CHECK_MSG(WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0, "rank %d: status %d", i, st[i]);
  CHECK_EQ(ok, j->n);
}

TEST_T(ds_butterfly_consensus_over_comm, 90) {
  ds_job_t j = {.kind = SHOAL_DS_BUTTERFLY, .n = 8, .k = 2, .rounds = 3, .d = 1000}; /* log2(8) = 3 rounds */
  run_ds(&j);
  ds_job_t j4 = {.kind = SHOAL_DS_BUTTERFLY, .n = 4, .k = 4, .rounds = 1, .d = 100}; /* log4(4) = 1 */
  run_ds(&j4);
}

TEST_T(ds_random_partition_over_comm_matches_pattern, 90) {
  ds_job_t j = {.kind = SHOAL_DS_RANDOM, .n = 6, .k = 2, .rounds = 12, .d = 200};
  run_ds(&j);
}

/* Topology-aware: 2 racks of 3 (local random groups, rack size 3 > k), bridging every 3rd round. */
TEST_T(ds_topo_over_comm_matches_pattern, 90) {
  static const int racks[6] = {0, 0, 0, 1, 1, 1};
  ds_job_t j = {.kind = SHOAL_DS_TOPO, .n = 6, .k = 3, .rounds = 9, .d = 100, .racks = racks};
  run_ds(&j);
}

/* Short distributed runs must learn (a broken sync step fails here). */
TEST_T(distributed_runs_learn, 150) {
  load_fmnist();
  shoal_sync_kind_t kinds[] = {SHOAL_SYNC_DSSYNC, SHOAL_SYNC_LOCALSGD, SHOAL_SYNC_BSP};
  for (int i = 0; i < 3; i++) {
    char path[256];
    tmpname(path, "learn");
    job_t j = {.n = 4, .want_max_stale_le = -1, .want_max_stale_ge = -1};
    base_opts(&j.o, NULL);
    j.o.sync = kinds[i];
    j.o.ds_pattern = SHOAL_DS_RANDOM;
    j.o.local_h = 4;
    j.o.train_subset = 8192;
    j.o.test_subset = 2000;
    j.o.epochs = 2;
    j.o.batch = 16;
    j.o.csv_path = path;
    run_ranks(&j, 120);
    FILE *f = fopen(path, "r");
    CHECK(f);
    char line[512], last[512] = "";
    while (fgets(line, sizeof line, f)) memcpy(last, line, sizeof line);
    fclose(f);
    /* label,model,sync,workers,epoch,iters,time_s,train_loss,test_acc,... */
    char *p = last;
    for (int c = 0; c < 8 && p; c++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    CHECK(p);
    double acc = atof(p);
    CHECK_MSG(acc >= 0.76, "%s: test accuracy %.4f", shoal_sync_kind_name(kinds[i]), acc);
    unlink(path);
  }
}

/* The CLI on 2 ranks started by hand with the launcher-neutral variables
 * (RANK/WORLD_SIZE/MASTER_PORT, as torchrun-style launchers and srun wrappers
 * set them), its CSV and the SVG plot; then under `shoal launch` if built. */
TEST_T(cli_train_two_ranks_and_plot, 120) {
  load_fmnist();
  char out[8192], cmd[4096], csv[256], svg[256];
  tmpname(csv, "cli.csv");
  tmpname(svg, "cli.svg");
  int port = shoal_test_free_port();
  const char *args = "train --model mlp --sync bsp --train-subset 2048 --test-subset 1000 --epochs 1 --batch 32";
  snprintf(cmd, sizeof cmd,
           "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s %s --quiet & "
           "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s %s --csv %s --label bsp2; r=$?; wait $! || r=1; "
           "exit $r",
           port, shoal_test_cli(), args, port, shoal_test_cli(), args, csv);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 100);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "2 workers");
  CHECK_CONTAINS(out, "epoch   1/1");
  CHECK_CONTAINS(out, "samples/s");
  snprintf(cmd, sizeof cmd, "%s train --plot %s --title test %s", shoal_test_cli(), svg, csv);
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  FILE *f = fopen(svg, "r");
  CHECK(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  fclose(f);
  CHECK_CONTAINS(out, "<svg");
  CHECK_CONTAINS(out, "bsp2");
  CHECK_CONTAINS(out, "<polyline");
  /* Bad options are named. */
  snprintf(cmd, sizeof cmd, "%s train --sync bogus", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "--sync 'bogus'");
  snprintf(cmd, sizeof cmd, "%s train --data /nonexistent", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK(st != 0);
  CHECK_CONTAINS(out, "/nonexistent/train-images-idx3-ubyte.gz");
  snprintf(cmd, sizeof cmd, "%s train --plot %s %s.missing", shoal_test_cli(), svg, csv);
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK(st != 0);
  CHECK_CONTAINS(out, ".missing");
  unlink(csv);
  unlink(svg);
}

/* `shoal train --preemptible` asked to stop while it still reads its data (here a FIFO nobody writes,
 * so the read blocks for as long as the test wants) leaves at once with the requeue status 75 and
 * writes no checkpoint: nothing was trained that one could hold. */
TEST_T(cli_preemptible_stop_during_setup_exits_at_once, 60) {
  char out[4096], cmd[2048];
  snprintf(cmd, sizeof cmd,
           "d=$(mktemp -d) && mkfifo $d/train-images-idx3-ubyte.gz || exit 9; "
           "%s train --model mlp --data $d --preemptible --checkpoint $d/ck --quiet & p=$!; "
           "for i in $(seq 400); do c=$(awk '/^SigCgt/ {print $2}' /proc/$p/status 2>/dev/null); "
           "[ -n \"$c\" ] && [ $(( 0x$c & 0x200 )) -ne 0 ] && break; sleep 0.05; done; "
           "sleep 0.2; kill -USR1 $p; wait $p; rc=$?; [ -e $d/ck ] && echo checkpoint-written; "
           "echo rc=$rc; rm -rf $d",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 40);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "rc=75");
  CHECK_MSG(!strstr(out, "checkpoint-written"), "%s", out);
}

TEST_T(cli_train_under_shoal_launch, 120) {
  load_fmnist();
  char out[8192], cmd[2048];
  snprintf(cmd, sizeof cmd, "%s launch --help", shoal_test_cli());
  if (shoal_test_run_cmd(cmd, out, sizeof out, 30) != 0) shoal_test_skip("shoal launch is not in this build");
  snprintf(cmd, sizeof cmd,
           "%s launch -n 3 %s train --sync ps --servers 1 --ps-mode ssp --staleness 1 --train-subset 2048 "
           "--test-subset 1000 --epochs 1 --batch 32",
           shoal_test_cli(), shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 100);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "epoch   1/1");
  CHECK_CONTAINS(out, "largest staleness applied");
}

/* --on-failure shrink with rank 0 lost: the new rank 0 appends to the CSV, which keeps its header whenever
 * rank 0 died (before its first row too: the header no longer waits in rank 0's buffer), so --plot reads it. */
TEST_T(cli_train_rank0_lost_csv_keeps_its_header, 120) {
  load_fmnist();
  char out[16384], cmd[2048], csv[256], svg[256];
  tmpname(csv, "lost0csv");
  tmpname(svg, "lost0svg");
  remove(csv);
  snprintf(cmd, sizeof cmd,
           "SHOAL_TIMEOUT=10 %s launch -n 3 --on-failure continue -- sh -c 'if [ \"$SHOAL_RANK\" = 0 ]; then "
           "(sleep 0.8; kill -9 $$) & fi; exec %s train --on-failure shrink --epochs 1 --test-subset 500 --csv %s'",
           shoal_test_cli(), shoal_test_cli(), csv);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 110);
  CHECK_MSG(st == 0, "exit %d: %s", st, out);
  CHECK_CONTAINS(out, "rank 0 killed by signal 9");
  FILE *f = fopen(csv, "r");
  char line[512] = "";
  CHECK_MSG(f && fgets(line, sizeof line, f), "no %s", csv);
  if (f) fclose(f);
  CHECK_MSG(!strncmp(line, "label,model,sync,workers,", 25), "%s starts with: %s", csv, line);
  snprintf(cmd, sizeof cmd, "%s train --plot %s %s", shoal_test_cli(), svg, csv);
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(st == 0, "plot: exit %d: %s", st, out);
  remove(csv);
  remove(svg);
}

/* Checkpoint/resume on 2 BSP ranks is bit-exact: 2 epochs straight equal
 * 1 epoch + checkpoint + resume for the second. */
TEST_T(bsp_resume_is_bit_exact, 120) {
  load_fmnist();
  char a[256], b[256], ck[256];
  tmpname(a, "bspresA");
  tmpname(b, "bspresB");
  tmpname(ck, "bspresC");
  job_t j = {.n = 2, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, a);
  j.o.train_subset = 2048;
  j.o.batch = 32;
  j.o.epochs = 2;
  j.o.decay_epochs[0] = 1;
  run_ranks(&j, 100);
  j.o.epochs = 1;
  j.o.params_out = NULL;
  j.o.ckpt_path = ck;
  run_ranks(&j, 100);
  j.o.epochs = 2;
  j.o.ckpt_path = NULL;
  j.o.resume_path = ck;
  j.o.params_out = b;
  run_ranks(&j, 100);
  float *pa = read_params(a), *pb = read_params(b);
  CHECK(!memcmp(pa, pb, mlp_n() * sizeof(float)));
  free(pa);
  free(pb);
  unlink_all(a, 2);
  unlink_all(b, 2);
  unlink(ck);
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  CHECK_MSG(a && b, "copy %s -> %s", from, to);
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, k, b) == k);
  fclose(a);
  fclose(b);
}

/* time_s of every CSV row (after the header) */
static int csv_times(const char *path, double *t, int cap) {
  FILE *f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  char line[1024];
  int n = 0;
  CHECK(fgets(line, sizeof line, f) != NULL);
  while (n < cap && fgets(line, sizeof line, f)) {
    char *p = line;
    for (int c = 0; c < 6; c++) p = strchr(p, ',') + 1; /* 7th column */
    t[n++] = atof(p);
  }
  fclose(f);
  return n;
}

/* BSP resumed from a checkpoint written in the middle of an epoch is still
 * bit-exact, and the CSV's time continues where the checkpoint left it. */
TEST_T(resume_mid_epoch_bit_exact_and_csv_time_continues, 150) {
  load_fmnist();
  char a[256], b[256], ck[256], csv[256];
  tmpname(a, "midA");
  tmpname(b, "midB");
  tmpname(ck, "midC");
  tmpname(csv, "mid.csv");
  job_t j = {.n = 2, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, a);
  j.o.train_subset = 2048; /* 32 iterations per epoch on 2 workers x 32 */
  j.o.batch = 32;
  j.o.epochs = 2;
  run_ranks(&j, 100);
  j.o.params_out = NULL;
  j.o.ckpt_path = ck;
  j.o.ckpt_every = 10;
  j.o.max_iters = 40; /* stops in epoch 2 after the checkpoint of iteration 40 */
  j.o.csv_path = csv;
  unlink(csv);
  run_ranks(&j, 100);
  double t[8];
  CHECK_EQ(csv_times(csv, t, 8), 2); /* epoch 1, and the part of epoch 2 before the stop */
  j.o.max_iters = 0;
  j.o.ckpt_path = NULL;
  j.o.ckpt_every = 0;
  j.o.resume_path = ck;
  j.o.params_out = b;
  run_ranks(&j, 100);
  float *pa = read_params(a), *pb = read_params(b);
  CHECK_MSG(!memcmp(pa, pb, mlp_n() * sizeof(float)), "resumed parameters differ by %g", max_diff(pa, pb));
  free(pa);
  free(pb);
  CHECK_EQ(csv_times(csv, t, 8), 3);
  CHECK_MSG(t[2] > t[1] && t[1] > t[0], "time restarted after resume: %g, %g, then %g", t[0], t[1], t[2]);
  unlink_all(a, 2);
  unlink_all(b, 2);
  unlink(ck);
  unlink(csv);
}

/* Resuming with another strategy, or from workers' files of different
 * points, is a direct error naming both. */
TEST_T(resume_mismatches_are_direct_errors, 150) {
  load_fmnist();
  char ck[256], old[300], r1[300];
  tmpname(ck, "misC");
  job_t j = {.n = 2, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, NULL);
  j.o.train_subset = 2048;
  j.o.batch = 32;
  j.o.epochs = 1;
  j.o.sync = SHOAL_SYNC_DSSYNC;
  j.o.ckpt_path = ck;
  run_ranks(&j, 100);
  snprintf(r1, sizeof r1, "%s.rank1", ck);
  snprintf(old, sizeof old, "%s.old", ck);
  copy_file(r1, old); /* worker 1's file after epoch 1 */
  j.o.epochs = 2;
  j.o.resume_path = ck;
  run_ranks(&j, 100); /* now both files are at epoch 2 */
  /* another sync mode */
  j.o.ckpt_path = NULL;
  j.o.epochs = 3;
  j.o.sync = SHOAL_SYNC_BSP;
  j.expect_err = "it was written by --sync dssync and this run is --sync bsp";
  run_ranks(&j, 100);
  /* workers at different epochs */
  j.o.sync = SHOAL_SYNC_DSSYNC;
  copy_file(old, r1);
  j.expect_err = "the workers' checkpoints are from different points";
  run_ranks(&j, 100);
  unlink_all(ck, 2);
  unlink(old);
}

/* PS checkpoints: servers write their shards at the epoch end; 1 epoch +
 * resume equals 2 epochs straight (sync mode is deterministic). */
TEST_T(ps_resume_equals_straight_run, 150) {
  load_fmnist();
  char a[256], b[256], ck[256], sv[300];
  tmpname(a, "psA");
  tmpname(b, "psB");
  tmpname(ck, "psC");
  job_t j = {.n = 3, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, a);
  j.o.train_subset = 2048;
  j.o.batch = 32;
  j.o.epochs = 2;
  j.o.sync = SHOAL_SYNC_PS;
  j.o.servers = 1;
  run_ranks(&j, 100);
  j.o.params_out = NULL;
  j.o.epochs = 1;
  j.o.ckpt_path = ck;
  run_ranks(&j, 100);
  snprintf(sv, sizeof sv, "%s.server0", ck);
  CHECK_MSG(access(sv, R_OK) == 0, "no server checkpoint %s", sv);
  j.o.epochs = 2;
  j.o.ckpt_path = NULL;
  j.o.resume_path = ck;
  j.o.params_out = b;
  run_ranks(&j, 100);
  float *pa = read_params(a), *pb = read_params(b);
  CHECK_MSG(!memcmp(pa, pb, mlp_n() * sizeof(float)), "resumed ps parameters differ by %g", max_diff(pa, pb));
  free(pa);
  free(pb);
  unlink_all(a, 2);
  unlink_all(b, 2);
  unlink_all(ck, 2);
  unlink(sv);
}

/* PS stop request (--preemptible): one worker's request stops every worker after the same iteration inside
 * an epoch; each worker writes its position and the server its shard at that clock, and the server ends with
 * the workers. Resuming there (same workers and servers) equals the straight run (sync mode is deterministic). */
TEST_T(ps_stop_request_and_resume_equals_straight_run, 150) {
  load_fmnist();
  char a[256], b[256], ck[256], sv[300];
  tmpname(a, "psSA");
  tmpname(b, "psSB");
  tmpname(ck, "psSC");
  job_t j = {.n = 3, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  base_opts(&j.o, a);
  j.o.train_subset = 2048;
  j.o.batch = 32;
  j.o.epochs = 2;
  j.o.sync = SHOAL_SYNC_PS;
  j.o.servers = 1;
  run_ranks(&j, 100);
  job_t s = j;
  s.stop_rank1 = 2, s.want_stopped = 1;
  s.o.params_out = NULL;
  s.o.ckpt_path = ck;
  run_ranks(&s, 100);
  shoal__ckpt_meta_t m, ms;
  snprintf(sv, sizeof sv, "%s.server0", ck);
  CHECK_OK(shoal__ckpt_peek(ck, &m));
  CHECK_OK(shoal__ckpt_peek(sv, &ms));
  CHECK_MSG(m.iters_done == 1 && m.epochs_done == 0 && m.epoch_samples == 64 && ms.iters_done == 1,
            "stop checkpoint at iteration %llu, epoch %u, %llu samples, server clock %llu; expected 1, 0, 64, 1",
            (unsigned long long)m.iters_done, m.epochs_done, (unsigned long long)m.epoch_samples,
            (unsigned long long)ms.iters_done);
  job_t r = j;
  r.o.resume_path = ck;
  r.o.params_out = b;
  run_ranks(&r, 100);
  float *pa = read_params(a), *pb = read_params(b);
  CHECK_MSG(!memcmp(pa, pb, mlp_n() * sizeof(float)), "resumed ps parameters differ by %g", max_diff(pa, pb));
  free(pa);
  free(pb);
  unlink_all(a, 2);
  unlink_all(b, 2);
  unlink_all(ck, 2);
  unlink(sv);
}

/* A stop request seen by one rank stops every rank after the same iteration
 * with a checkpoint of the position (samples of the epoch used); an elastic
 * resume on another number of workers continues at that sample, drops the
 * epoch's last partial global batch, and a non-elastic one is refused. */
TEST_T(bsp_stop_request_and_elastic_resume, 150) {
  load_fmnist();
  char ck[256];
  tmpname(ck, "stopck");
  job_t j = {.n = 2, .want_max_stale_le = -1, .want_max_stale_ge = -1, .stop_rank1 = 2, .want_stopped = 1};
  base_opts(&j.o, NULL);
  j.o.train_subset = 2048;
  j.o.batch = 32;
  j.o.epochs = 2;
  j.o.ckpt_path = ck;
  run_ranks(&j, 100);
  shoal__ckpt_meta_t m;
  CHECK_OK(shoal__ckpt_peek(ck, &m));
  CHECK_MSG(m.iters_done == 1 && m.epochs_done == 0 && m.epoch_samples == 64 && m.workers == 2,
            "stop checkpoint at iteration %llu, epoch %u, %llu samples, %u workers; expected 1, 0, 64, 2",
            (unsigned long long)m.iters_done, m.epochs_done, (unsigned long long)m.epoch_samples, m.workers);
  /* 3 workers, not elastic: refused, naming the counts */
  job_t k = {.n = 3, .want_max_stale_le = -1, .want_max_stale_ge = -1, .expect_err = "written by 2 workers"};
  k.o = j.o;
  k.o.resume_path = ck;
  run_ranks(&k, 100);
  /* elastic: (2048 - 64) / 96 = 20 iterations left in epoch 1, 21 in epoch 2 */
  job_t e = {.n = 3, .want_max_stale_le = -1, .want_max_stale_ge = -1};
  e.o = j.o;
  e.o.resume_path = ck;
  e.o.elastic = 1;
  run_ranks(&e, 100);
  CHECK_OK(shoal__ckpt_peek(ck, &m));
  CHECK_MSG(m.iters_done == 42 && m.epochs_done == 2 && m.epoch_samples == 0 && m.workers == 3,
            "after the elastic resume: iteration %llu, epoch %u, %llu samples, %u workers; expected 42, 2, 0, 3",
            (unsigned long long)m.iters_done, m.epochs_done, (unsigned long long)m.epoch_samples, m.workers);
  unlink(ck);
}

/* ---- every rank must create the context with the same strategy and settings ---- */

typedef struct confarg {
  const char *strategy[3];
  const char *conf[3];
  int same; /* the settings agree (in another order): the step succeeds */
} confarg_t;

/* The first step compares them: a difference fails it on every rank naming rank 0's settings and the
 * ranks that differ, instead of a mismatch, a wait or a different computation later. */
static int conf_rank(int rank, void *arg) {
  const confarg_t *a = arg;
  shoal_comm_t *c = join(rank, 3);
  if (!c) return 10;
  shoal_sync_t *s = NULL;
  float p[8] = {0}, g[8] = {0};
  int rc = shoal_sync_create(c, a->strategy[rank] ? a->strategy[rank] : "dssync", a->conf[rank], &s);
  if (rc) {
    fprintf(stderr, "rank %d: create: %s\n", rank, shoal_last_error());
    return 11;
  }
  if (shoal_sync_add_bucket(s, p, g, 8) < 0) return 12;
  rc = shoal_sync_begin(s, 0);
  if (!rc) rc = shoal_sync_bucket_ready(s, 0);
  if (!rc) rc = shoal_sync_finish(s);
  if (!rc) rc = shoal_sync_end(s);
  const char *e = shoal_sync_errmsg(s);
  fprintf(stderr, "rank %d: step: %d %s\n", rank, rc, rc ? e : "");
  if (a->same) return rc ? 13 : 0;
  if (rc != SHOAL_ERR_MISMATCH || !strstr(e, "different strategies or settings") || !strstr(e, "rank(s) 2"))
    return 14;
  if (!strstr(e, a->conf[0][0] ? "rank 0 'dssync: k=2 pattern=random'" : "rank 0 'bsp:"))
    return 15;
  /* the communicator is still usable: every rank saw the same comparison */
  int32_t v = 1;
  if (shoal_allreduce(c, SHOAL_IN_PLACE, &v, 1, SHOAL_INT32, SHOAL_SUM) || v != 3) return 16;
  shoal_sync_destroy(s);
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(sync_mismatched_settings_detected_at_the_first_step, 120) {
  /* dssync k=2 against k=3 (the order of the settings does not matter); another strategy; the same */
  confarg_t cases[] = {{.conf = {"pattern=random k=2", "k=2 pattern=random", "pattern=random k=3"}},
                       {.strategy = {"bsp", "bsp", "localsgd"}, .conf = {"", "", ""}},
                       {.conf = {"pattern=random k=2", "k=2 pattern=random", "pattern=random  k=2"}, .same = 1}};
  for (int i = 0; i < 3; i++) {
    g_port = shoal_test_free_port();
    int st[3];
    shoal_test_fork_ranks(3, conf_rank, &cases[i], 60, st);
    for (int r = 0; r < 3; r++)
      CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "case %d rank %d: status 0x%x", i, r,
                st[r]);
  }
}
