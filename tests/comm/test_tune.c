/* The measured choice: profile -> SHOAL_TUNE_FILE -> reuse, the per-size
 * picks respect what each layout allows, SHOAL_ALGO still forces, bad
 * values are clear errors, and `shoal tune` works end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"
#include "comm/coll/algo.h"
#include "comm/comm_impl.h"
#include "comm/tune/tune.h"
#include "comm/tune/tune_impl.h"

typedef struct tune_arg {
  int n, port;
  const char *hosts[8];
  const char *mode; /* SHOAL_TUNE (NULL: unset) */
  char file[96];
  const char *home; /* set: SHOAL_TUNE_FILE and XDG_CACHE_HOME unset, HOME here (the default file) */
  const char *want_source; /* text expected in rank 0's explanation */
  const char *want_extra;  /* and this too, if set */
  double first;            /* the start-up check's test: the first window's time over the prediction */
  int cached;               /* and its profile taken as read from the cache */
} tune_arg_t;

static shoal_comm_t *join(int rank, const tune_arg_t *a) {
  if (a->hosts[0]) setenv("SHOAL_HOSTNAME", a->hosts[rank], 1);
  if (a->mode) setenv("SHOAL_TUNE", a->mode, 1);
  else unsetenv("SHOAL_TUNE");
  setenv("SHOAL_TUNE_FILE", a->file, 1);
  if (a->home) {
    unsetenv("SHOAL_TUNE_FILE");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", a->home, 1);
  }
  unsetenv("SHOAL_ALGO");
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = a->n;
  p.master_addr = "127.0.0.1";
  p.master_port = a->port;
  p.timeout_s = 55; /* the profile is one op: a loaded 2-core machine needs margin */
  p.connect_timeout_s = 20;
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) fprintf(stderr, "rank %d: init: %s\n", rank, shoal_last_error());
  return c;
}

static int rank_tune(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (!c) return 2;
  int bad = 0, nh = 0;
  shoal__topo_shm_ok(c, &nh);
  /* every size: the pick is one the layout allows, and every rank agrees */
  for (size_t b = 8; b <= (64u << 20); b *= 8) {
    shoal__coll_ctx_t x;
    shoal__choice_t ch;
    shoal__coll_ctx(c, &x);
    shoal__coll_price(&x, b, SHOAL__CHOOSE_NOPLAN, &ch);
    shoal_algo_t pick = ch.algo;
    if ((nh > 1 && pick == SHOAL_ALGO_SHM) || (nh == 1 && pick == SHOAL_ALGO_HIER))
      bad = fprintf(stderr, "rank %d: %zu B on %d hosts: picked %s\n", rank, b, nh, shoal_algo_name(pick));
    int32_t mine[2] = {(int32_t)pick, -(int32_t)pick}, agree[2];
    if (shoal_allreduce_algo(c, mine, agree, 2, SHOAL_INT32, SHOAL_MAX, SHOAL_ALGO_RD) ||
        agree[0] != -agree[1])
      bad = fprintf(stderr, "rank %d: ranks disagree on the pick for %zu B\n", rank, b);
  }
  float v[1000];
  for (int i = 0; i < 1000; i++) v[i] = (float)(rank + i % 7);
  if (shoal_allreduce(c, SHOAL_IN_PLACE, v, 1000, SHOAL_FLOAT32, SHOAL_SUM))
    bad = fprintf(stderr, "rank %d: allreduce: %s\n", rank, shoal_comm_errmsg(c));
  for (int i = 0; i < 1000 && !bad; i++)
    if (v[i] != (float)(a->n * (a->n - 1) / 2 + a->n * (i % 7))) bad = fprintf(stderr, "rank %d: v[%d] wrong\n", rank, i);
  if (rank == 0) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    shoal__tune_explain(c, f);
    fclose(f);
    if (!strstr(text, a->want_source) || !strstr(text, "model pick") || (a->want_extra && !strstr(text, a->want_extra)))
      bad = fprintf(stderr, "explanation lacks '%s' or '%s':\n%s", a->want_source, a->want_extra ? a->want_extra : "",
                    text);
    free(text);
  }
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

static void run(tune_arg_t *a) {
  a->port = shoal_test_free_port();
  int st[8];
  int ok = shoal_test_fork_ranks(a->n, rank_tune, a, 60, st);
  CHECK_EQ(ok, a->n);
}

static int file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int found = 0;
  while (fgets(line, sizeof line, f)) found |= strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

TEST_T(tune_profile_cache_and_reuse_mixed_hosts, 90) {
  tune_arg_t a = {.n = 3, .hosts = {"hA", "hB", "hA"}, .mode = "force", .want_source = "measured"};
  snprintf(a.file, sizeof a.file, "/tmp/shoal-tune-test-%d", (int)getpid());
  unlink(a.file);
  a.want_extra = "link matrix (measured in"; /* the host pairs, measured */
  run(&a);
  CHECK(file_has(a.file, "hA:2,hB:1\t"));
  CHECK(file_has(a.file, " links 2 ")); /* the matrix of the two hosts is cached with the class values */
  /* every class measured: no -1 left in the entry */
  FILE *f = fopen(a.file, "r");
  char line[1024];
  double v[8] = {0};
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "hA:2,hB:1\t", 10))
      CHECK_EQ(sscanf(line + 10, "%lg %lg %lg %lg %lg %lg %lg %lg", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                      &v[7]), 8);
  if (f) fclose(f);
  for (int i = 0; i < 7; i++) CHECK_MSG(v[i] > 0, "value %d of the profile: %g", i, v[i]);
  CHECK_MSG(v[7] >= 0, "op overhead of the profile: %g", v[7]); /* may be 0 when the model overestimates */
  a.mode = "cache";
  a.want_source = "cache";
  a.want_extra = "link matrix (from the cache)";
  run(&a); /* the same host set: reused, matrix included */
  a.want_extra = NULL;
  /* a different host set has no entry: defaults */
  tune_arg_t b = {.n = 2, .mode = "cache", .want_source = "built-in defaults"};
  memcpy(b.file, a.file, sizeof b.file);
  run(&b);
  /* a malformed entry is ignored with a warning, not trusted */
  f = fopen(a.file, "a");
  fprintf(f, "hA:2,hB:1\tnot numbers\n");
  fclose(f);
  a.want_source = "cache"; /* the earlier good line still counts */
  run(&a);
  unlink(a.file);
}

/* A profile times the single-copy cma allreduce only where a host holds two ranks: at three it measured
 * slower than the shm row at every size, and a profile under load could favour its fit (docs/shm.md). On
 * the old rule this fails wherever cross-memory attach is allowed ("cma allreduce fit" in the explanation). */
TEST_T(tune_profile_times_cma_only_at_two_ranks, 90) {
  tune_arg_t a = {.n = 3, .hosts = {"hC", "hC", "hC"}, .mode = "force", .want_source = "measured"};
  snprintf(a.file, sizeof a.file, "/tmp/shoal-tune-cma-%d", (int)getpid());
  unlink(a.file);
  a.want_extra = "cma allreduce: not measured";
  run(&a);
  CHECK(file_has(a.file, "hC:3\t"));
  CHECK(!file_has(a.file, " cma "));
  unlink(a.file);
}

TEST_T(tune_defaults_single_host_picks, 60) {
  tune_arg_t a = {.n = 4, .mode = "off", .file = "", .want_source = "built-in defaults"};
  run(&a);
  /* init: no entry yet, so the creation profiles and stores; the next creation reuses */
  tune_arg_t b = {.n = 2, .mode = "init", .want_source = "measured"};
  snprintf(b.file, sizeof b.file, "/tmp/shoal-tune-init-%d", (int)getpid());
  unlink(b.file);
  run(&b);
  CHECK(access(b.file, R_OK) == 0);
  b.want_source = "cache";
  run(&b);
  unlink(b.file);
  /* an odd number of ranks on the host: the one without a pair partner still profiles with the others */
  tune_arg_t c = {.n = 3, .mode = "init", .want_source = "measured"};
  snprintf(c.file, sizeof c.file, "/tmp/shoal-tune-init3-%d", (int)getpid());
  unlink(c.file);
  run(&c);
  unlink(c.file);
}

/* The default (SHOAL_TUNE unset) across hosts: the link matrix measured at creation and kept in the default
 * file under HOME, then reused; off uses the built-in costs; on one host nothing is measured or written. */
TEST_T(tune_auto_across_hosts_measures_once, 90) {
  char home[96], file[160], cmd[256];
  snprintf(home, sizeof home, "/tmp/shoal-tune-home-%d", (int)getpid());
  snprintf(file, sizeof file, "%s/.cache/shoal/tune", home);
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", home, home);
  CHECK_EQ(system(cmd), 0);
  tune_arg_t a = {.n = 3, .hosts = {"hA", "hB", "hA"}, .mode = NULL, .home = home, .want_source = "measured",
                  .want_extra = "link matrix (measured in"};
  run(&a);
  CHECK(file_has(file, "hA:2,hB:1\t"));
  CHECK(file_has(file, " links 2 "));
  a.want_source = "cache";
  a.want_extra = "link matrix (from the cache)";
  run(&a); /* the same host set: nothing measured again */
  a.mode = "off";
  a.want_source = "built-in defaults";
  a.want_extra = NULL;
  run(&a);
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", home, home);
  CHECK_EQ(system(cmd), 0);
  tune_arg_t b = {.n = 2, .mode = NULL, .home = home, .want_source = "built-in defaults"};
  run(&b);
  CHECK(access(file, F_OK) != 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", home);
  CHECK_EQ(system(cmd), 0);
}

static int rank_bad_mode(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (c) {
    shoal_comm_destroy(c);
    return 1;
  }
  return strstr(shoal_last_error(), "SHOAL_TUNE='sometimes'") ? 0 : 1;
}

TEST_T(tune_bad_mode_is_an_error, 30) {
  tune_arg_t a = {.n = 2, .mode = "sometimes", .file = ""};
  a.port = shoal_test_free_port();
  int st[2];
  CHECK_EQ(shoal_test_fork_ranks(2, rank_bad_mode, &a, 20, st), 2);
}

TEST_T(tune_cli_end_to_end, 90) {
  char file[96], cmd[512], out[16384];
  snprintf(file, sizeof file, "/tmp/shoal-tune-cli-%d", (int)getpid());
  unlink(file);
  snprintf(cmd, sizeof cmd, "%s launch -n 2 -- %s tune --file %s", shoal_test_cli(), shoal_test_cli(), file);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 60);
  CHECK_MSG(st == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "model pick");
  CHECK_CONTAINS(out, "(fitted)");
  CHECK(access(file, R_OK) == 0);
  /* bench --explain shows the cached profile */
  snprintf(cmd, sizeof cmd, "SHOAL_TUNE_FILE=%s %s launch -n 2 -- %s bench allreduce --explain -e 1M", file,
           shoal_test_cli(), shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 60);
  CHECK_MSG(st == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "# tuning: cache");
  unlink(file);
}

/* Profile entries: -1 is "unknown" (what the tuner writes when it did not measure); another negative,
 * an infinite or a NaN value makes the entry ignored (a warning names file and line), not used. */
TEST(tune_cache_values_checked) {
  char path[] = "/tmp/shoal-tune-values-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char text[] = "hA:1\t1e-7 1e-10 -1 -1 4e-11 1e-7 7e-11 1e-7\n"
                      "hB:1\t1e-7 1e-10 -5 -1 4e-11 1e-7 7e-11 1e-7\n"
                      "hC:1\t1e-7 nan -1 -1 4e-11 1e-7 7e-11 1e-7\n"
                      "hD:1\t1e-7 1e-10 -1 -1 inf 1e-7 7e-11 1e-7\n";
  CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
  close(fd);
  double v[SHOAL__TUNE_NVALS], lat[1], bw[1];
  int sorted[1] = {0};
  CHECK_EQ(shoal__tune_cache_read(path, "hA:1", 1, sorted, v, lat, bw), 1);
  CHECK(v[2] == -1 && v[0] == 1e-7);
  CHECK_EQ(shoal__tune_cache_read(path, "hB:1", 1, sorted, v, lat, bw), 0);
  CHECK_EQ(shoal__tune_cache_read(path, "hC:1", 1, sorted, v, lat, bw), 0);
  CHECK_EQ(shoal__tune_cache_read(path, "hD:1", 1, sorted, v, lat, bw), 0);
  unlink(path);
}

/* The chooser's answer for a size seen before comes from the per-size cache without formatting its reason
 * (a tiny allreduce is under a microsecond): the same algorithm and plan as a fresh pricing, the reason
 * written on demand, and the collectives' results unchanged. */
static int rank_cached_choice(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = join(rank, a);
  if (!c) return 1;
  int bad = 0;
  size_t sizes[] = {32, 4u << 20};
  for (int k = 0; k < 2 && !bad; k++) {
    size_t n = sizes[k] / 4;
    float *v = malloc(sizes[k]);
    shoal__choice_t first, again;
    if (!v || shoal__coll_choose(c, sizes[k], SHOAL_ALGO_AUTO, SHOAL__CHOOSE_QUIET, &first)) {
      free(v);
      bad = 1;
      break;
    }
    for (int r = 0; r < 3 && !bad; r++) {
      for (size_t i = 0; i < n; i++) v[i] = (float)(rank + (int)(i % 5));
      if (shoal_allreduce(c, SHOAL_IN_PLACE, v, n, SHOAL_FLOAT32, SHOAL_SUM)) bad = 1;
      for (size_t i = 0; i < n && !bad; i++)
        if (v[i] != (float)(1 + 2 * (int)(i % 5))) bad = fprintf(stderr, "rank %d: %zu B: v[%zu] = %g\n", rank, sizes[k], i, v[i]);
    }
    if (!bad && shoal__coll_choose(c, sizes[k], SHOAL_ALGO_AUTO, SHOAL__CHOOSE_QUIET, &again)) bad = 1;
    if (!bad && (!again.cached || again.why[0] || again.algo != first.algo ||
                 again.plan.chunk_bytes != first.plan.chunk_bytes ||
                 !strstr(shoal__choice_why(c, &again), "as for the last call of this size") || first.cached ||
                 !strstr(shoal__choice_why(c, &first), "cost model")))
      bad = fprintf(stderr, "rank %d: %zu B: cached %d (%s) vs fresh %d (%s): %s / %s, chunk %zu / %zu\n", rank,
                    sizes[k], again.cached, shoal_algo_name(again.algo), first.cached, shoal_algo_name(first.algo),
                    again.why, first.why, again.plan.chunk_bytes, first.plan.chunk_bytes);
    free(v);
  }
  shoal_comm_destroy(c);
  return bad;
}

TEST_T(tune_cached_choice_same_answer, 30) {
  tune_arg_t a = {.n = 2, .mode = "off", .file = ""};
  a.port = shoal_test_free_port();
  int st[2];
  CHECK_EQ(shoal_test_fork_ranks(2, rank_cached_choice, &a, 20, st), 2);
}

/* The built-in costs know the racks' shared uplinks (SHOAL_TUNE=off, nothing measured): 8 hosts in 2 racks
 * whose uplinks carry one host link's rate (4:1, as `shoal launch --testbed` describes such a testbed). The
 * exchanges between the racks' halves (rhd's and rd's first step: 4 flows per uplink) cost 4 times a host
 * link's time; the ring crosses each uplink with one flow. Without racks the same links price rhd at most
 * the ring. Also: the registration carries the rack to every rank, and a blank rack name is refused. */
typedef struct rack_arg {
  int port, racks; /* racks 0: SHOAL_RACK unset */
  const char *rack0; /* racks: rank 0's rack name (another: a bad value) */
} rack_arg_t;

static int rank_racks(int rank, void *arg) {
  rack_arg_t *a = arg;
  char v[32];
  snprintf(v, sizeof v, "rh%d", rank);
  setenv("SHOAL_HOSTNAME", v, 1);
  snprintf(v, sizeof v, "rack%d", rank / 4);
  if (a->racks) setenv("SHOAL_RACK", rank == 0 && a->rack0 ? a->rack0 : v, 1);
  else unsetenv("SHOAL_RACK");
  unsetenv("SLURM_TOPOLOGY_ADDR");
  setenv("SHOAL_BETA_GBPS", "0.025", 1); /* 200 Mbit/s host links */
  unsetenv("SHOAL_RACK_UPLINK_GBPS");    /* the default: one host link */
  tune_arg_t t = {.n = 8, .mode = "off", .file = "", .port = a->port};
  shoal_comm_t *c = join(rank, &t);
  if (!c) return a->rack0 && strchr(a->rack0, ' ') && strstr(shoal_last_error(), "SHOAL_RACK") ? 0 : 1;
  int bad = 0;
  const shoal__topo_t *tp = c->w->topo;
  if (tp->nracks != (a->racks ? 2 : 0) || (a->racks && (tp->rack_of[tp->host_of[3]] != 0 || tp->rack_of[tp->host_of[4]] != 1)))
    bad = fprintf(stderr, "rank %d: %d racks, host 3 in %d, host 4 in %d\n", rank, tp->nracks, tp->rack_of[tp->host_of[3]],
                  tp->rack_of[tp->host_of[4]]);
  for (size_t b = 32u << 10; b <= (2u << 20) && !bad; b *= 4) {
    shoal__coll_ctx_t x;
    shoal__choice_t ch;
    shoal__coll_ctx(c, &x);
    shoal__coll_price(&x, b, SHOAL__CHOOSE_NOPLAN, &ch);
    int ok = a->racks ? ch.algo == SHOAL_ALGO_RING && ch.t[SHOAL_ALGO_RHD] > 2 * ch.t[SHOAL_ALGO_RING]
                      : ch.t[SHOAL_ALGO_RHD] <= ch.t[SHOAL_ALGO_RING];
    if (!ok)
      bad = fprintf(stderr, "rank %d, %s: %zu B -> %s (ring %.0f us, rhd %.0f us, rd %.0f us)\n", rank,
                    a->racks ? "2 racks" : "no racks", b, shoal_algo_name(ch.algo), ch.t[SHOAL_ALGO_RING] * 1e6,
                    ch.t[SHOAL_ALGO_RHD] * 1e6, ch.t[SHOAL_ALGO_RD] * 1e6);
  }
  shoal_comm_destroy(c);
  return bad;
}

TEST_T(tune_builtin_costs_know_rack_uplinks, 60) {
  int st[8];
  rack_arg_t a = {.racks = 1};
  a.port = shoal_test_free_port();
  CHECK_EQ(shoal_test_fork_ranks(8, rank_racks, &a, 40, st), 8);
  rack_arg_t b = {.racks = 0};
  b.port = shoal_test_free_port();
  CHECK_EQ(shoal_test_fork_ranks(8, rank_racks, &b, 40, st), 8);
  rack_arg_t bad = {.racks = 1, .rack0 = "rack 0"};
  bad.port = shoal_test_free_port();
  CHECK_EQ(shoal_test_fork_ranks(1, rank_racks, &bad, 20, st), 1); /* rank 0 alone: refused before any rendezvous */
}

/* The link watch's rules, driven with fabricated call times through its own entry (t->observe: what the
 * dispatcher hands it after every watched allreduce) on 4 emulated hosts over loopback, with real
 * re-profiles:
 * - hold-off: a re-profile after which the pick for the watched size stays (64 B: rd, whatever loopback
 *   measures, since rhd and the ring use the same pairs in more steps) holds the watch off for 1 check,
 *   the next such one for 2;
 * - probation: host 2's pairs are set as if measured while it was nearly cut off, which moves the 4 MiB
 *   pick to rd; the re-profile finds host 2's links changed (round 1) and measures only its pairs again, so
 *   the pick moves; a next window slower per byte than the one that triggered it brings the previous
 *   matrix (exactly) and pick back and holds off, a faster one keeps the new plan. */
#define WATCH_BIG (4u << 20)
static void watch_window(shoal_comm_t *c, size_t bytes, double ratio) {
  for (int i = 0; i < 4; i++) c->w->tune->observe(c, bytes, 1e-3, ratio * 1e-3);
}

static shoal_algo_t watch_pick(shoal_comm_t *c, size_t bytes) {
  shoal__coll_ctx_t x;
  shoal__choice_t ch;
  shoal__coll_ctx(c, &x);
  shoal__coll_price(&x, bytes, SHOAL__CHOOSE_NOPLAN, &ch);
  return ch.algo;
}


static void dump_matrix(int rank, const shoal__tune_t *t) {
  if (rank) return;
  for (int i = 0; i < t->nh; i++) {
    fprintf(stderr, "  host %d MB/s:", i);
    for (int j = 0; j < t->nh; j++) fprintf(stderr, " %8.1f", t->bw[i * t->nh + j] * 1e-6);
    fprintf(stderr, "\n");
  }
}

/* A rank of the watch tests: re-profiling on, windows of 4 calls of any size, 16 messages timed per pair
 * (steadier figures). */
static shoal_comm_t *watch_join(int rank, tune_arg_t *a) {
  setenv("SHOAL_REPROFILE", "on", 1);
  setenv("SHOAL_REPROFILE_CALLS", "4", 1);
  setenv("SHOAL_REPROFILE_MIN_BYTES", "0", 1);
  setenv("SHOAL_PROFILE_BYTES", "2097152", 1);
  return join(rank, a);
}

/* Host 2's pairs as if measured while it was nearly cut off (1/50 of the rate, 1 s latency), that matrix
 * copied into slowm[hosts x hosts], and the chooser told. */
static void cut_off_host2(shoal_comm_t *c, double *slowm) {
  shoal__tune_t *t = c->w->tune;
  int H = t->nh;
  for (int j = 0; j < H; j++)
    if (j != 2) t->bw[2 * H + j] /= 50, t->bw[j * H + 2] /= 50, t->lat[2 * H + j] = t->lat[j * H + 2] = 1.0;
  memcpy(slowm, t->bw, sizeof *slowm * (size_t)(H * H));
  shoal__tune_changed(c->w);
}

static int rank_watch(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = watch_join(rank, a);
  if (!c) return 2;
  shoal__tune_t *t = c->w->tune;
  shoal__watch_stats_t s;
  int bad = 0;
#define EXPECT(cond, ...) \
  if (!bad && !(cond)) bad = fprintf(stderr, "rank %d: " #cond ": ", rank) + fprintf(stderr, __VA_ARGS__)
  /* hold-off */
  watch_window(c, 64, 1.0); /* the reference */
  watch_window(c, 64, 3.0); /* drifted: a re-profile, the pick stays */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.checks == 2 && s.reprofiles == 1 && s.skip == 1 && !s.probation, "checks %u reprofiles %u skip %d\n",
         s.checks, s.reprofiles, s.skip);
  EXPECT(watch_pick(c, 64) == SHOAL_ALGO_RD, "64 B -> %s\n", shoal_algo_name(watch_pick(c, 64)));
  watch_window(c, 64, 3.0); /* held off: no agreement */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.checks == 2 && s.skip == 0, "checks %u skip %d\n", s.checks, s.skip);
  watch_window(c, 64, 3.0); /* the new reference */
  watch_window(c, 64, 9.0); /* drifted again: held off for 2 now */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.checks == 4 && s.reprofiles == 2 && s.skip == 2, "checks %u reprofiles %u skip %d\n", s.checks,
         s.reprofiles, s.skip);
  watch_window(c, 64, 9.0), watch_window(c, 64, 9.0); /* both held off */
  /* probation: host 2's pairs as if measured while it was nearly cut off (1/50 of the rate, 1 s latency):
   * every algorithm crosses host 2, and rd, with the fewest steps, is the cheapest at 4 MiB; with host 2
   * back (whatever loopback measures) rhd, on rd's pairs in half the bytes, is always cheaper than rd */
  int H = t->nh;
  size_t nn = (size_t)(H * H);
  double *good = malloc(sizeof *good * nn * 2), *slowm = good + nn;
  memcpy(good, t->bw, sizeof *good * nn);
  cut_off_host2(c, slowm);
  EXPECT(watch_pick(c, WATCH_BIG) == SHOAL_ALGO_RD, "4 MiB with host 2 cut off: %s\n",
         shoal_algo_name(watch_pick(c, WATCH_BIG)));
  for (int round = 0; round < 2 && !bad; round++) { /* 0: the new plan is slower and dropped; 1: kept */
    watch_window(c, WATCH_BIG, 1.0);
    watch_window(c, WATCH_BIG, 3.0); /* host 2 "came back": its pairs measured again */
    shoal__tune_watch_stats(c->w, &s);
    int back = 1;
    for (int j = 0; j < H; j++)
      if (j != 2) back &= t->bw[2 * H + j] != slowm[2 * H + j] && t->bw[j * H + 2] != slowm[j * H + 2]; /* measured */
    EXPECT(s.probation && s.reprofiles == 3 + (unsigned)round && back && watch_pick(c, WATCH_BIG) != SHOAL_ALGO_RD,
           "round %d: probation %d reprofiles %u, host 2 %s, pick %s\n", round, s.probation, s.reprofiles,
           back ? "measured again" : "not all measured again", shoal_algo_name(watch_pick(c, WATCH_BIG)));
    EXPECT(s.suspects >= 1, "round %d: %d hosts measured again\n", round, s.suspects);
    for (int i = 0; i < H && !bad && s.suspects == 1; i++) /* host 2 alone: pairs without it are left as they were */
      for (int j = 0; j < H; j++)
        EXPECT(i == 2 || j == 2 || i == j || t->bw[i * H + j] == good[i * H + j], "pair %d-%d re-measured\n", i, j);
    watch_window(c, WATCH_BIG, round == 0 ? 6.0 : 1.5); /* per byte: twice the triggering window, or half */
    shoal__tune_watch_stats(c->w, &s);
    if (round == 0) { /* dropped: the matrix from before the re-profile, exactly, and its pick */
      EXPECT(!s.probation && s.reverts == 1 && s.skip > 0 && !memcmp(t->bw, slowm, sizeof *slowm * nn) &&
             watch_pick(c, WATCH_BIG) == SHOAL_ALGO_RD, "dropped: probation %d reverts %u skip %d pick %s\n",
             s.probation, s.reverts, s.skip, shoal_algo_name(watch_pick(c, WATCH_BIG)));
      for (int k = 0; k < 16 && s.skip > 0; k++) { /* held off (the series went on from the hold-offs above) */
        watch_window(c, WATCH_BIG, 1.0);
        shoal__tune_watch_stats(c->w, &s);
      }
    } else {
      EXPECT(!s.probation && s.reverts == 1 && memcmp(t->bw, slowm, sizeof *slowm * nn) &&
             watch_pick(c, WATCH_BIG) != SHOAL_ALGO_RD, "kept: probation %d reverts %u pick %s\n", s.probation,
             s.reverts, shoal_algo_name(watch_pick(c, WATCH_BIG)));
    }
  }
#undef EXPECT
  if (bad) dump_matrix(rank, t);
  free(good);
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(tune_watch_holds_off_and_drops_a_worse_plan, 90) {
  tune_arg_t a = {.n = 4, .hosts = {"wA", "wB", "wC", "wD"}, .mode = NULL, .file = ""};
  a.port = shoal_test_free_port();
  int st[4];
  CHECK_EQ(shoal_test_fork_ranks(4, rank_watch, &a, 80, st), 4);
}

/* The stale matrix: a re-profile measured a link in a dip and its plan stays after the link is back (the
 * window after it sets the reference, so the stale plan never drifts from it), slower than the previous plan
 * ran when calm. Driven like the test above on 4 emulated hosts: host 2 "cut off" (rd at 4 MiB) is the
 * previous plan A, calm at 1.0 per byte; the real re-profile measures host 2 back (plan B, not rd), kept on
 * probation against A's drifted window (3.0). B then runs at 1.5, slower than A's calm 1.0: A's matrix is
 * tried for one window, exactly, and kept when it measures faster (1.2). Then A runs at 2.0, slower than
 * B's 1.5: B is tried, loses (3.0), A is back exactly, and the next try waits one check. */
static int rank_watch_try(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = watch_join(rank, a);
  if (!c) return 2;
  shoal__tune_t *t = c->w->tune;
  shoal__watch_stats_t s;
  int bad = 0, H = t->nh;
  size_t nn = (size_t)(H * H);
#define EXPECT(cond, ...) \
  if (!bad && !(cond)) bad = fprintf(stderr, "rank %d: " #cond ": ", rank) + fprintf(stderr, __VA_ARGS__)
  double *slowm = malloc(sizeof *slowm * nn * 2), *newm = slowm + nn;
  cut_off_host2(c, slowm);
  EXPECT(watch_pick(c, WATCH_BIG) == SHOAL_ALGO_RD, "4 MiB with host 2 cut off: %s\n",
         shoal_algo_name(watch_pick(c, WATCH_BIG)));
  watch_window(c, WATCH_BIG, 1.0); /* A's reference, calm */
  watch_window(c, WATCH_BIG, 3.0); /* drifted: host 2 measured again, B on probation */
  watch_window(c, WATCH_BIG, 1.5); /* faster than A's drifted window: B kept */
  shoal__tune_watch_stats(c->w, &s);
  memcpy(newm, t->bw, sizeof *newm * nn);
  EXPECT(s.reprofiles == 1 && !s.probation && !s.reverts && !s.tries && watch_pick(c, WATCH_BIG) != SHOAL_ALGO_RD,
         "B kept: reprofiles %u probation %d reverts %u tries %u pick %s\n", s.reprofiles, s.probation, s.reverts,
         s.tries, shoal_algo_name(watch_pick(c, WATCH_BIG)));
  watch_window(c, WATCH_BIG, 1.5); /* B's reference, slower than A's calm: A is tried */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.trying && s.tries == 1 && !memcmp(t->bw, slowm, sizeof *slowm * nn) &&
         watch_pick(c, WATCH_BIG) == SHOAL_ALGO_RD, "A tried: trying %d tries %u pick %s\n", s.trying, s.tries,
         shoal_algo_name(watch_pick(c, WATCH_BIG)));
  watch_window(c, WATCH_BIG, 1.2); /* A faster than B's 1.5: kept */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(!s.trying && s.tries_kept == 1 && !memcmp(t->bw, slowm, sizeof *slowm * nn) && s.reprofiles == 1,
         "A kept: trying %d kept %u reprofiles %u\n", s.trying, s.tries_kept, s.reprofiles);
  watch_window(c, WATCH_BIG, 2.0); /* A's new reference, slower than B's 1.5: B is tried */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.trying && s.tries == 2 && !memcmp(t->bw, newm, sizeof *newm * nn), "B tried: trying %d tries %u\n",
         s.trying, s.tries);
  watch_window(c, WATCH_BIG, 3.0); /* B slower: A back */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(!s.trying && s.tries_kept == 1 && !memcmp(t->bw, slowm, sizeof *slowm * nn), "B lost: trying %d kept %u\n",
         s.trying, s.tries_kept);
  watch_window(c, WATCH_BIG, 2.0); /* held off one check */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(!s.trying && s.tries == 2, "held off: trying %d tries %u\n", s.trying, s.tries);
  watch_window(c, WATCH_BIG, 2.0); /* B tried again */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.trying && s.tries == 3 && s.reprofiles == 1, "tried again: trying %d tries %u reprofiles %u\n", s.trying,
         s.tries, s.reprofiles);
#undef EXPECT
  if (bad) dump_matrix(rank, t);
  free(slowm);
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(tune_watch_tries_the_previous_plan_when_the_new_one_runs_slower, 90) {
  tune_arg_t a = {.n = 4, .hosts = {"wA", "wB", "wC", "wD"}, .mode = NULL, .file = ""};
  a.port = shoal_test_free_port();
  int st[4];
  CHECK_EQ(shoal_test_fork_ranks(4, rank_watch_try, &a, 80, st), 4);
}

/* A probation or a try whose size stops: judged by a window of its own size only, it would never end, and
 * the other sizes' checks would stay suspended (a try's matrix in force for good). Driven like the test
 * above (4 calls a window, so 4 windows' worth of other sizes is 16 calls), with 1 MiB as the other size:
 * B's probation sees no 4 MiB call: after 16 calls of 1 MiB it still runs, at the 17th it ends and B stays;
 * 1 MiB is checked again. B's reference (1.5) is slower than A's calm 1.0: A is tried, 2 calls of 4 MiB run
 * at 1.2, then only 1 MiB: the try is judged on those 2 calls and kept. A's reference (2.0) is slower than
 * B's 1.5: B is tried, no 4 MiB call follows: given up, A is back exactly. */
#define WATCH_OTHER (1u << 20)
static void watch_other_calls(shoal_comm_t *c, int n) {
  for (int i = 0; i < n; i++) c->w->tune->observe(c, WATCH_OTHER, 1e-3, 1e-3);
}

static int rank_watch_away(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = watch_join(rank, a);
  if (!c) return 2;
  shoal__tune_t *t = c->w->tune;
  shoal__watch_stats_t s;
  int bad = 0, H = t->nh;
  size_t nn = (size_t)(H * H);
#define EXPECT(cond, ...) \
  if (!bad && !(cond)) bad = fprintf(stderr, "rank %d: " #cond ": ", rank) + fprintf(stderr, __VA_ARGS__)
  double *slowm = malloc(sizeof *slowm * nn * 2), *newm = slowm + nn;
  cut_off_host2(c, slowm);
  watch_window(c, WATCH_BIG, 1.0); /* A's reference, calm */
  watch_window(c, WATCH_BIG, 3.0); /* drifted: host 2 measured again, B on probation */
  memcpy(newm, t->bw, sizeof *newm * nn);
  watch_other_calls(c, 16);
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.reprofiles == 1 && s.probation && s.checks == 2 && !s.ended_away && memcmp(newm, slowm, sizeof *slowm * nn),
         "4 windows away: reprofiles %u probation %d checks %u ended %u\n", s.reprofiles, s.probation, s.checks,
         s.ended_away);
  watch_other_calls(c, 1); /* one more: no 4 MiB call, the probation ends, B stays */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(!s.probation && s.ended_away == 1 && !s.reverts && s.checks == 2 && !memcmp(t->bw, newm, sizeof *newm * nn),
         "probation ended: probation %d ended %u reverts %u checks %u\n", s.probation, s.ended_away, s.reverts,
         s.checks);
  watch_other_calls(c, 4); /* 1 MiB checked again (its reference) */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.checks == 3 && s.reprofiles == 1, "1 MiB checked: checks %u reprofiles %u\n", s.checks, s.reprofiles);
  watch_window(c, WATCH_BIG, 1.5); /* B's reference, slower than A's calm: A is tried */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.trying && s.tries == 1 && !memcmp(t->bw, slowm, sizeof *slowm * nn), "A tried: trying %d tries %u\n",
         s.trying, s.tries);
  for (int i = 0; i < 2; i++) c->w->tune->observe(c, WATCH_BIG, 1e-3, 1.2e-3);
  watch_other_calls(c, 17);
  shoal__tune_watch_stats(c->w, &s); /* judged on A's 2 calls (1.2 against B's 1.5): kept */
  EXPECT(!s.trying && s.tries_kept == 1 && s.ended_away == 2 && s.checks == 5 &&
             !memcmp(t->bw, slowm, sizeof *slowm * nn),
         "A judged on 2 calls: trying %d kept %u ended %u checks %u\n", s.trying, s.tries_kept, s.ended_away, s.checks);
  watch_window(c, WATCH_BIG, 2.0); /* A's reference, slower than B's 1.5: B is tried */
  shoal__tune_watch_stats(c->w, &s);
  EXPECT(s.trying && s.tries == 2 && !memcmp(t->bw, newm, sizeof *newm * nn), "B tried: trying %d tries %u\n",
         s.trying, s.tries);
  watch_other_calls(c, 17);
  shoal__tune_watch_stats(c->w, &s); /* no 4 MiB call: given up, A back */
  EXPECT(!s.trying && s.tries_kept == 1 && s.ended_away == 3 && s.reprofiles == 1 &&
         !memcmp(t->bw, slowm, sizeof *slowm * nn), "B given up: trying %d kept %u ended %u reprofiles %u\n", s.trying,
         s.tries_kept, s.ended_away, s.reprofiles);
#undef EXPECT
  if (bad) dump_matrix(rank, t);
  free(slowm);
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(tune_watch_ends_a_probation_or_try_whose_size_stops, 90) {
  tune_arg_t a = {.n = 4, .hosts = {"wA", "wB", "wC", "wD"}, .mode = NULL, .file = ""};
  a.port = shoal_test_free_port();
  int st[4];
  CHECK_EQ(shoal_test_fork_ranks(4, rank_watch_away, &a, 80, st), 4);
}

/* The start-up profile checked: a first window at 1.6x the prediction measures the links again once
 * (then the reference is set and windows at the same pace change nothing); a first window at 1.2x or 0.5x
 * (the model's own error) sets the reference at once; one at 0.2x (a broken or stale profile: measured, or
 * from the cache) measures again once. */
static int rank_watch_suspect(int rank, void *arg) {
  tune_arg_t *a = arg;
  shoal_comm_t *c = watch_join(rank, a);
  if (!c) return 2;
  shoal__watch_stats_t s;
  int bad = 0;
  double first = a->first;
  if (a->cached) c->w->tune->source = 2;
  watch_window(c, 64, first);
  shoal__tune_watch_stats(c->w, &s);
  unsigned want = first > 1.25 || first < 0.25 ? 1 : 0;
  if (s.checks != 1 || s.reprofiles != want)
    bad = fprintf(stderr, "rank %d: first window %.1f: checks %u reprofiles %u (expected %u)\n", rank, first, s.checks,
                  s.reprofiles, want);
  for (int k = 0; k < 6 && !bad; k++) watch_window(c, 64, first);
  shoal__tune_watch_stats(c->w, &s);
  if (!bad && s.reprofiles != want)
    bad = fprintf(stderr, "rank %d: after 7 windows at %.1f: %u re-profiles (expected %u)\n", rank, first,
                  s.reprofiles, want);
  shoal_comm_destroy(c);
  return bad ? 1 : 0;
}

TEST_T(tune_watch_checks_a_start_up_profile_far_off_once, 90) {
  tune_arg_t a = {.n = 4, .hosts = {"wA", "wB", "wC", "wD"}, .mode = NULL, .file = "", .first = 1.6};
  a.port = shoal_test_free_port();
  int st[4];
  CHECK_EQ(shoal_test_fork_ranks(4, rank_watch_suspect, &a, 80, st), 4);
  a.first = 1.2;
  a.port = shoal_test_free_port();
  CHECK_EQ(shoal_test_fork_ranks(4, rank_watch_suspect, &a, 80, st), 4);
  const double fast[3] = {0.5, 0.2, 0.2};
  for (int k = 0; k < 3; k++) {
    a.first = fast[k];
    a.cached = k == 2;
    a.port = shoal_test_free_port();
    CHECK_EQ(shoal_test_fork_ranks(4, rank_watch_suspect, &a, 80, st), 4);
  }
}

/* Which hosts moved after a drift, from round 1's figures (no timing here: synthetic figures). 8 hosts with
 * 1 GB/s links; the round ran on a busy CPU (every flow 20-34 % slower, each by its own amount); only h7's
 * link dropped to a third: h7 alone is flagged, where a bare 30 % test against the matrix would flag the
 * hosts whose pairs both came out over 30 % slower (h0, h1, h4, h7 here). */
TEST(tune_moved_hosts_only_the_moved_link) {
  enum { H = 8 };
  double before[H * H], now[H];
  unsigned char sel[H];
  for (int i = 0; i < H * H; i++) before[i] = 1e9;
  const double cpu[H] = {0.75, 0.66, 0.80, 0.72, 0.68, 0.78, 0.74, 0.70}; /* h -> h + 1, this round's CPU */
  for (int h = 0; h < H; h++) now[h] = 1e9 * cpu[h];
  now[6] /= 3, now[7] /= 3; /* h6 -> h7 and h7 -> h0: h7's link */
  CHECK_EQ(shoal__tune_moved_hosts(H, before, now, sel), 1);
  CHECK(sel[7]);
  /* nothing moved but the CPU: nothing flagged */
  for (int h = 0; h < H; h++) now[h] = 1e9 * cpu[h];
  CHECK_EQ(shoal__tune_moved_hosts(H, before, now, sel), 0);
  /* one direction only (h3 -> h4 2x faster): both of its ends */
  now[3] *= 2;
  CHECK_EQ(shoal__tune_moved_hosts(H, before, now, sel), 2);
  CHECK(sel[3] && sel[4]);
  /* every link at a third (beyond what is taken for the CPU: the network): every host */
  for (int h = 0; h < H; h++) now[h] = 0.33e9;
  CHECK_EQ(shoal__tune_moved_hosts(H, before, now, sel), H);
  /* a pair never measured before is not a move */
  for (int h = 0; h < H; h++) now[h] = 1e9;
  before[3 * H + 4] = -1, now[3] = 3e9;
  CHECK_EQ(shoal__tune_moved_hosts(H, before, now, sel), 0);
}

/* A re-profile's message size per pair: full at half the fastest link's rate or more; a pair at a tenth of it
 * streams 2/10 of 128 KiB rounded up to 16 KiB (32 KiB); never below 16 KiB; full when a figure is missing. */
TEST(tune_stream_msg_scales_with_the_pair_rate) {
  const size_t full = 128u << 10;
  CHECK_EQ(shoal__tune_stream_msg(1e9, 1e9), full);
  CHECK_EQ(shoal__tune_stream_msg(0.5e9, 1e9), full);
  CHECK_EQ(shoal__tune_stream_msg(0.4e9, 1e9), (size_t)(112u << 10));
  CHECK_EQ(shoal__tune_stream_msg(0.1e9, 1e9), (size_t)(32u << 10));
  CHECK_EQ(shoal__tune_stream_msg(0.001e9, 1e9), (size_t)(16u << 10));
  CHECK_EQ(shoal__tune_stream_msg(-1, 1e9), full);
  CHECK_EQ(shoal__tune_stream_msg(0.1e9, 0), full);
}
