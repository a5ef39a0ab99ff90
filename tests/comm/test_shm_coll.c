/* The collective matrix of test_coll.c (included: same references, same
 * bit-exact checks) over other transports and layouts:
 *   - SHOAL_SHM=0: everything over TCP (test_coll.c itself now runs over
 *     shared memory, the default between same-host ranks);
 *   - mixed hosts emulated with SHOAL_HOSTNAME per rank (shm inside a
 *     "host", TCP between), equal and unequal groups;
 * plus the shm and hier allreduce algorithms explicitly at every dtype x op
 * x count (1, prime, 3 MiB), in place and not, with a tiny pipeline chunk
 * so that the large path runs many chunks with ragged slices (and copies
 * results out with non-temporal stores). */
#define SHOAL_COLL_MATRIX_ONLY
#include "test_coll.c"

typedef struct layout {
  group_t g;
  const char *hosts[8]; /* SHOAL_HOSTNAME per rank; NULL: the real host name */
  int shm;              /* SHOAL_SHM */
  int full_matrix;      /* also run test_coll.c's whole matrix */
  const char *chunk;    /* SHOAL_SHM_CHUNK_BYTES, or NULL */
  const char *nt;       /* SHOAL_SHM_NT_BYTES, or NULL */
} layout_t;

/* Explicit shm (one host) or hier (several) at every dtype x op x count. */
static int extra(shoal_comm_t *c, shoal_algo_t algo) {
  int fails = 0;
  const size_t counts[] = {1, 7, PRIME, 0};
  for (int di = 0; di < NRED; di++)
    for (int op = 0; op < SHOAL_REDOP__COUNT; op++) {
      if (shoal_redop_supported(red_dtypes[di], op)) continue; /* bitwise ops on floating point */
      if (di >= 6) { /* the small integer types: the kernels are shared with int32; one count, in place or not */
        for (int mode = 0; mode < 2; mode++) fails += t_allreduce(c, algo, red_dtypes[di], op, PRIME, mode);
        continue;
      }
      for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < 3; mode++) fails += t_allreduce(c, algo, red_dtypes[di], op, counts[k], mode);
      for (int mode = 0; mode < 2; mode++)
        fails += t_allreduce(c, algo, red_dtypes[di], op, BIG_BYTES / shoal_dtype_size(red_dtypes[di]) + 5, mode);
    }
  /* the model's pick (shm or hier here) on big vectors */
  fails += t_allreduce(c, SHOAL_ALGO_AUTO, SHOAL_FLOAT32, SHOAL_SUM, BIG_BYTES / 4, 0);
  fails += t_allreduce(c, SHOAL_ALGO_AUTO, SHOAL_FLOAT16, SHOAL_AVG, BIG_BYTES / 2 + 3, 0);
  return fails;
}

/* A split that cuts host groups: shm/hier are refused with a clear error,
 * the model falls back to the flat algorithms, results stay exact. */
static int split_checks(shoal_comm_t *c) {
  int fails = 0, r = shoal_comm_rank(c);
  shoal_comm_t *sub = NULL;
  if (shoal_comm_split(c, r % 2, r, &sub)) {
    FAILF("split: %s", shoal_comm_errmsg(c));
    return fails;
  }
  fails += t_allreduce(sub, SHOAL_ALGO_AUTO, SHOAL_INT32, SHOAL_SUM, PRIME, 0);
  fails += t_allreduce(sub, SHOAL_ALGO_AUTO, SHOAL_FLOAT32, SHOAL_MAX, BIG_BYTES / 4, 1);
  shoal_comm_destroy(sub);
  return fails;
}

static int layout_rank(int rank, void *arg) {
  layout_t *l = arg;
  g_rank = rank;
  if (l->hosts[0]) setenv("SHOAL_HOSTNAME", l->hosts[rank], 1);
  setenv("SHOAL_SHM", l->shm ? "1" : "0", 1);
  if (l->chunk) setenv("SHOAL_SHM_CHUNK_BYTES", l->chunk, 1);
  if (l->nt) setenv("SHOAL_SHM_NT_BYTES", l->nt, 1);
  shoal_comm_t *c;
  if (join(&l->g, rank, &c)) return 2;
  int fails = l->full_matrix ? matrix(c, &l->g) : 0;
  if (l->shm && l->g.n > 1) {
    int nhosts = 1;
    for (int i = 1; i < l->g.n && l->hosts[0]; i++) {
      int seen = 0;
      for (int j = 0; j < i; j++) seen |= !strcmp(l->hosts[i], l->hosts[j]);
      nhosts += !seen;
    }
    fails += extra(c, nhosts > 1 ? SHOAL_ALGO_HIER : SHOAL_ALGO_SHM);
    if (l->g.n > 2) fails += split_checks(c);
    if (nhosts > 1) { /* shm on a multi-host communicator: refused, naming the way out (last: it aborts c, */
      float v = 1;         /* so a rank still in the barrier may see a peer's refusal instead) */
      int rc = shoal_barrier(c);
      if (rc == 0) rc = shoal_allreduce_algo(c, &v, &v, 1, SHOAL_FLOAT32, SHOAL_SUM, SHOAL_ALGO_SHM);
      if ((rc != SHOAL_ERR_UNSUPPORTED && rc != SHOAL_ERR_PEER_CLOSED) || !strstr(shoal_last_error(), "use hier"))
        FAILF("shm on %d hosts: rc %d: %s", nhosts, rc, shoal_last_error());
    }
  }
  shoal_comm_destroy(c);
  if (fails) fprintf(stderr, "rank %d: %d failures\n", rank, fails);
  return fails ? 1 : 0;
}

static void run_layout(layout_t *l) {
  l->g.port = shoal_test_free_port();
  snprintf(l->g.dir, sizeof l->g.dir, "/tmp/shoal-shmcoll-XXXXXX");
  CHECK(mkdtemp(l->g.dir) != NULL);
  int st[8];
  int ok = shoal_test_fork_ranks(l->g.n, layout_rank, l, 200, st);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", l->g.dir);
  if (system(cmd)) { /* best effort */
  }
  for (int r = 0; r < l->g.n; r++)
    CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "world %d: rank %d %s (status 0x%x)",
              l->g.n, r, st[r] == -1 ? "timed out" : "failed", st[r]);
  CHECK_EQ(ok, l->g.n);
}

/* test_coll.c's matrix, all over TCP */
TEST_T(shm_coll_matrix_tcp_only_4, 240) {
  setenv("SHOAL_SHM", "0", 1);
  run_world(4);
}

TEST_T(shm_coll_one_host_3_small_chunks, 240) {
  /* and the non-temporal copy-out from 64 KiB (ragged heads and tails) */
  layout_t l = {.g = {.n = 3}, .shm = 1, .chunk = "4096", .nt = "65536"};
  run_layout(&l);
}

TEST_T(shm_coll_one_host_4, 240) {
  layout_t l = {.g = {.n = 4}, .shm = 1};
  run_layout(&l);
}

TEST_T(shm_coll_mixed_2x2_matrix, 240) {
  layout_t l = {.g = {.n = 4}, .hosts = {"hA", "hA", "hB", "hB"}, .shm = 1, .full_matrix = 1};
  run_layout(&l);
}

/* unequal, interleaved groups: A = {0, 2, 5}, B = {1}, C = {3, 4} */
TEST_T(shm_coll_mixed_unequal_6_matrix, 240) {
  layout_t l = {.g = {.n = 6}, .hosts = {"hA", "hB", "hA", "hC", "hC", "hA"}, .shm = 1, .full_matrix = 1,
                .chunk = "4096"};
  run_layout(&l);
}

/* every rank alone on its host: hier is the leaders' allreduce only */
TEST_T(shm_coll_hier_single_rank_hosts_3, 240) {
  layout_t l = {.g = {.n = 3}, .hosts = {"h0", "h1", "h2"}, .shm = 1};
  run_layout(&l);
}
