/* The collective matrix of test_coll.c (included: same references, same
 * bit-exact checks) over other transports and layouts:
 *   - SHOAL_SHM=0: everything over TCP (test_coll.c itself now runs over
 *     shared memory, the default between same-host ranks);
 *   - mixed hosts emulated with SHOAL_HOSTNAME per rank (shm inside a
 *     "host", TCP between), equal and unequal groups;
 * plus the shm and hier allreduce algorithms explicitly at every dtype x op
 * x count (1, prime, 3 MiB), in place and not, with a tiny pipeline chunk
 * so that the large path runs many chunks with ragged slices (and copies
 * results out with non-temporal stores); the same for the single-copy cma
 * algorithm, its refusal when a rank may not be read (cross-memory attach
 * refused), and the chooser picking it only from a profile that measured it. */
#define SHOAL_COLL_MATRIX_ONLY
#include "test_coll.c"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether this machine lets a process read a same-user process's memory (what the cma algorithm needs),
 * found without shoal: read a word of a child. */
static int cma_possible(void) {
  static int known = -1;
  if (known >= 0) return known;
  int fds[2];
  if (pipe(fds)) return known = 0;
  volatile uint64_t word = 0x5eed5eed5eedull;
  pid_t pid = fork();
  if (pid == 0) {
    char b;
    close(fds[1]);
    if (read(fds[0], &b, 1) < 0) _exit(1); /* stay alive until the parent has read */
    _exit(0);
  }
  close(fds[0]);
  uint64_t got = 0;
  struct iovec lv = {&got, sizeof got}, rv = {(void *)&word, sizeof word};
  int ok = pid > 0 && process_vm_readv(pid, &lv, 1, &rv, 1, 0) == (ssize_t)sizeof got && got == word;
  close(fds[1]);
  if (pid > 0) waitpid(pid, NULL, 0);
  return known = ok;
}

static shoal_algo_t cma_id(void) {
  shoal_algo_t a = SHOAL_ALGO_AUTO;
  if (shoal_algo_parse("cma", &a)) abort();
  return a;
}

typedef struct layout {
  group_t g;
  const char *hosts[8]; /* SHOAL_HOSTNAME per rank; NULL: the real host name */
  int shm;              /* SHOAL_SHM */
  int full_matrix;      /* also run test_coll.c's whole matrix */
  const char *chunk;    /* SHOAL_SHM_CHUNK_BYTES, or NULL */
  const char *nt;       /* SHOAL_SHM_NT_BYTES, or NULL */
  int cma;              /* also the cma algorithm at every dtype x op x count */
  int no_cma;           /* this rank + 1 forbids itself process_vm_readv/writev (a seccomp filter) */
  const char *tune;     /* a profile entry for host "hcma" (every rank on it): SHOAL_TUNE=cache, then the pick */
} layout_t;

/* The chooser on a profile entry: cma only where its measured fit is the cheapest, never unmeasured. */
static int cma_choice(shoal_comm_t *c, const char *entry) {
  int fails = 0;
  int fast = strstr(entry, " cma ") != NULL && cma_possible();
  shoal_algo_t big = shoal_allreduce_choose(c, 4u << 20), tiny = shoal_allreduce_choose(c, 8);
  if (fast ? big != cma_id() : big == cma_id())
    FAILF("profile '%s': picked %s for 4 MiB, expected %scma", entry, shoal_algo_name(big), fast ? "" : "not ");
  if (tiny == cma_id()) FAILF("profile '%s': picked cma for 8 B (its fit's 3.2 us against shm's 0.15)", entry);
  return fails;
}

/* A container's seccomp profile, in one rank: process_vm_readv/writev fail with EPERM (a non-dumpable
 * process would do for a user without CAP_SYS_PTRACE; the tests may run as root). */
static int forbid_cma(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* A rank may not use cross-memory attach: the host group agreed that cma may not run, so an explicit
 * request is refused on every rank naming the reason, and shm still runs. Last: the refusal aborts c. */
static int cma_refused(shoal_comm_t *c) {
  int fails = 0;
  fails += t_allreduce(c, SHOAL_ALGO_AUTO, SHOAL_FLOAT32, SHOAL_SUM, BIG_BYTES / 4, 0);
  fails += t_allreduce(c, SHOAL_ALGO_SHM, SHOAL_INT32, SHOAL_MAX, PRIME, 1);
  float v = 1;
  int rc = shoal_barrier(c);
  if (rc == 0) rc = shoal_allreduce_algo(c, &v, &v, 1, SHOAL_FLOAT32, SHOAL_SUM, cma_id());
  if ((rc != SHOAL_ERR_UNSUPPORTED && rc != SHOAL_ERR_PEER_CLOSED && rc != SHOAL_ERR_ABORTED) ||
      (rc == SHOAL_ERR_UNSUPPORTED && !strstr(shoal_last_error(), "cross-memory attach")))
    FAILF("cma with a rank that may not use it: rc %d: %s", rc, shoal_last_error());
  return fails;
}

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
  if (l->no_cma == rank + 1 && forbid_cma()) return 2;
  char tune_file[128];
  if (l->tune) {
    snprintf(tune_file, sizeof tune_file, "%s/tune", l->g.dir);
    FILE *f = rank == 0 ? fopen(tune_file, "w") : NULL;
    if (f) fprintf(f, "hcma:%d\t%s\n", l->g.n, l->tune), fclose(f);
    setenv("SHOAL_HOSTNAME", "hcma", 1);
    setenv("SHOAL_TUNE", "cache", 1);
    setenv("SHOAL_TUNE_FILE", tune_file, 1);
  }
  shoal_comm_t *c;
  if (join(&l->g, rank, &c)) return 2;
  int fails = l->full_matrix ? matrix(c, &l->g) : 0;
  if (l->tune) fails += cma_choice(c, l->tune);
  if (l->cma && cma_possible()) fails += extra(c, cma_id());
  if (l->no_cma) fails += cma_refused(c);
  if (l->tune || l->no_cma) goto done;
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
done:
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
  /* and the non-temporal copy-out from 64 KiB (ragged heads and tails); cma's slices are ragged at 3 */
  layout_t l = {.g = {.n = 3}, .shm = 1, .chunk = "4096", .nt = "65536", .cma = 1};
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

TEST_T(shm_coll_cma_2, 120) {
  layout_t l = {.g = {.n = 2}, .shm = 1, .cma = 1};
  run_layout(&l);
}

TEST_T(shm_coll_cma_refused_by_seccomp_3, 120) {
  layout_t l = {.g = {.n = 3}, .shm = 1, .no_cma = 3}; /* rank 2: a member, whose read of the leader fails */
  run_layout(&l);
}

/* profile entries (values as `shoal tune` writes them): cma's fit faster than shm's at 4 MiB, or absent */
TEST_T(shm_coll_cma_chosen_by_profile_2, 120) {
  layout_t l = {.g = {.n = 2}, .shm = 1,
                .tune = "2.9e-07 1.6e-10 -1 -1 3.4e-11 1.5e-07 1.75e-10 1.3e-07 cma 3.2e-06 9.3e-11"};
  run_layout(&l);
  layout_t none = {.g = {.n = 2}, .shm = 1, .tune = "2.9e-07 1.6e-10 -1 -1 3.4e-11 1.5e-07 1.75e-10 1.3e-07"};
  run_layout(&none);
}

/* every rank alone on its host: hier is the leaders' allreduce only */
TEST_T(shm_coll_hier_single_rank_hosts_3, 240) {
  layout_t l = {.g = {.n = 3}, .hosts = {"h0", "h1", "h2"}, .shm = 1};
  run_layout(&l);
}
