/* The multi-tree allreduce with a link profile that has a slow host: five
 * emulated hosts (SHOAL_HOSTNAME), one rank each, and a cached profile
 * (SHOAL_TUNE=cache) whose link matrix gives host hE a quarter of the
 * others' bandwidth. The chooser must pick the trees for large vectors and
 * keep hE a leaf in every tree; results are checked bit for bit against the
 * references of test_coll.c (included) for every dtype x op, odd counts, in
 * place and not, and are identical on every rank. */
#define SHOAL_COLL_MATRIX_ONLY
#include "test_coll.c"

#include "comm/comm_impl.h"

static void (*const unused_run_world)(int) __attribute__((unused)) = run_world; /* test_coll.c's, not used here */

#define NHOST 5
static const char *const hosts[NHOST] = {"hA", "hB", "hC", "hD", "hE"};

typedef struct trees_arg {
  group_t g;
  char file[96];
} trees_arg_t;

static int trees_rank(int rank, void *arg) {
  trees_arg_t *a = arg;
  g_rank = rank;
  setenv("SHOAL_HOSTNAME", hosts[rank], 1);
  setenv("SHOAL_TUNE", "cache", 1);
  setenv("SHOAL_TUNE_FILE", a->file, 1);
  setenv("SHOAL_REPROFILE", "off", 1);
  unsetenv("SHOAL_ALGO");
  shoal_comm_t *c;
  if (join(&a->g, rank, &c)) return 2;
  int fails = 0;
  /* the profile came from the cache, matrix included */
  const shoal__tune_t *t = c->w->tune;
  if (t->source != 2 || t->nh != NHOST || !(t->bw[0 * NHOST + 4] > 0))
    FAILF("profile: source %d, %d hosts, bw hA->hE %g", t->source, t->nh, t->nh == NHOST ? t->bw[4] : -1);
  if (shoal_allreduce_choose(c, 16u << 20) != SHOAL_ALGO_TREES)
    FAILF("16 MiB: picked %s, expected trees", shoal_algo_name(shoal_allreduce_choose(c, 16u << 20)));
  if (shoal_allreduce_choose(c, 8) == SHOAL_ALGO_TREES) FAILF("8 B: trees picked for a latency-bound size");
  shoal__coll_ctx_t x;
  shoal__choice_t ch;
  shoal__coll_ctx(c, &x);
  if (shoal__coll_price(&x, 16u << 20, 0, &ch) || ch.algo != SHOAL_ALGO_TREES) FAILF("price: %s", shoal_algo_name(ch.algo));
  int slow = -1;
  for (int r = 0; r < NHOST; r++)
    if (c->w->topo->host_of[r] == c->w->topo->host_of[4]) slow = r;
  int interior = shoal__trees_interior(&x, &ch.plan, slow);
  if (interior != 0) FAILF("the slow host's rank %d is interior in %d of %d trees", slow, interior, ch.plan.ntrees);
  if (ch.plan.ntrees < 2) FAILF("%d tree(s): expected several", ch.plan.ntrees);
  for (int P = 1; P <= NHOST; P++) { /* the pinning key keeps it a leaf whatever the number of trees */
    shoal__plan_t pin = {.chunk_bytes = 65536, .ntrees = P, .key = 0};
    if ((interior = shoal__trees_interior(&x, &pin, slow)) != 0)
      FAILF("pinning key, %d trees: the slow host's rank is interior in %d", P, interior);
  }
  /* every dtype x op, odd counts, in place and not, with the plan the chooser made */
  const size_t counts[] = {1, 7, PRIME, 100003};
  for (int di = 0; di < NRED; di++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++)
      for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < 3; mode++) {
          if (shoal_redop_supported(red_dtypes[di], op)) continue; /* bitwise ops on floating point */
          if (di >= 6 && (k != 2 || mode)) continue; /* the small integer types: int32's code path, one count */
          if (k < 3 || mode < 2) fails += t_allreduce(c, SHOAL_ALGO_TREES, red_dtypes[di], op, counts[k], mode);
        }
  fails += t_allreduce(c, SHOAL_ALGO_AUTO, SHOAL_FLOAT32, SHOAL_SUM, (16u << 20) / 4 + 3, 0);
  fails += t_identical(c, SHOAL_ALGO_TREES, SHOAL_FLOAT32, SHOAL_SUM, 300007);
  fails += t_identical(c, SHOAL_ALGO_TREES, SHOAL_FLOAT32, SHOAL_MIN, PRIME);
  fails += t_identical(c, SHOAL_ALGO_TREES, SHOAL_BFLOAT16, SHOAL_AVG, 300007);
  /* many chunks per tree: the staging window and the per-peer order */
  setenv("SHOAL_CHUNK_BYTES", "256", 1);
  fails += t_allreduce(c, SHOAL_ALGO_TREES, SHOAL_FLOAT64, SHOAL_PROD, PRIME * 5, 0);
  fails += t_allreduce(c, SHOAL_ALGO_TREES, SHOAL_FLOAT16, SHOAL_AVG, PRIME * 7, 1);
  unsetenv("SHOAL_CHUNK_BYTES");
  shoal_comm_destroy(c);
  if (fails) fprintf(stderr, "rank %d: %d failures\n", rank, fails);
  return fails ? 1 : 0;
}

/* One cache line: the host set, 8 class values, then the 5 x 5 latencies
 * and bandwidths in the host set's (sorted) order. */
static void write_profile(const char *path) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fprintf(f, "hA:1,hB:1,hC:1,hD:1,hE:1\t2.5e-07 1.5e-10 5e-05 1e-08 2.5e-10 3.5e-07 6e-11 1e-06 links %d", NHOST);
  for (int i = 0; i < NHOST * NHOST; i++) fprintf(f, " %g", i % (NHOST + 1) ? 5e-5 : -1.0);
  for (int i = 0; i < NHOST; i++)
    for (int j = 0; j < NHOST; j++) fprintf(f, " %g", i == j ? -1.0 : i == 4 || j == 4 ? 25e6 : 100e6);
  fprintf(f, "\n");
  fclose(f);
}

TEST_T(trees_slow_host_is_a_leaf_and_results_exact, 150) {
  trees_arg_t a = {.g = {.n = NHOST}};
  snprintf(a.file, sizeof a.file, "/tmp/shoal-trees-test-%d", (int)getpid());
  write_profile(a.file);
  a.g.port = shoal_test_free_port();
  snprintf(a.g.dir, sizeof a.g.dir, "/tmp/shoal-trees-XXXXXX");
  CHECK(mkdtemp(a.g.dir) != NULL);
  int st[NHOST];
  int ok = shoal_test_fork_ranks(NHOST, trees_rank, &a, 140, st);
  rmdir(a.g.dir);
  unlink(a.file);
  for (int r = 0; r < NHOST; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d %s (status 0x%x)", r,
              st[r] == -1 ? "timed out" : "failed", st[r]);
  CHECK_EQ(ok, NHOST);
}
