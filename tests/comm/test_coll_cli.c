/* The collective CLI tools as users run them: `shoal launch -n N -- shoal
 * selftest` and `shoal bench ...` over real processes and sockets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../runner.h"

static int run(const char *args, const char *env, char *out, size_t cap) {
  char cmd[1024];
  const char *s = shoal_test_cli();
  snprintf(cmd, sizeof cmd, "SHOAL_SHM=0 %s %s launch -n %s", env ? env : "", s, args);
  char *p = strstr(cmd, "@");
  if (p) { /* "@" stands for the shoal binary inside args */
    char tail[1024];
    snprintf(tail, sizeof tail, "%s%s", s, p + 1);
    snprintf(p, sizeof cmd - (size_t)(p - cmd), "%s", tail);
  }
  int st = shoal_test_run_cmd(cmd, out, cap, 100);
  return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

TEST_T(coll_cli_selftest_passes_under_launch, 120) {
  static char out[1 << 16];
  CHECK_EQ(run("3 -- @ selftest --count 257", NULL, out, sizeof out), 0);
  CHECK_EQ(count_of(out, "PASS"), 7);
  CHECK_CONTAINS(out, "allreduce");
  CHECK_CONTAINS(out, "reduce_scatter");
  CHECK(!strstr(out, "FAIL"));
}

TEST_T(coll_cli_bench_columns_check_and_gate, 120) {
  static char out[1 << 16];
  CHECK_EQ(run("2 -- @ bench allreduce -b 8 -e 64K -f 8 -n 3 -w 1 --check", NULL, out, sizeof out), 0);
  CHECK_CONTAINS(out, "p50(us)");
  CHECK_CONTAINS(out, "busbw");
  CHECK_CONTAINS(out, "out-of-place");
  CHECK_CONTAINS(out, "# Out of bounds values : 0 OK");
  CHECK_CONTAINS(out, "# Avg bus bandwidth");
  CHECK_EQ(count_of(out, "float32   sum"), 5); /* 8 B, 64 B, 512 B, 4 KiB, 32 KiB */
  /* every collective runs and checks clean */
  const char *colls[] = {"allgather", "reducescatter", "broadcast"};
  for (int i = 0; i < 3; i++) {
    char args[256];
    snprintf(args, sizeof args, "3 -- @ bench %s -b 1K -e 1M -f 32 -n 2 -w 1 --check -d float64", colls[i]);
    CHECK_EQ(run(args, NULL, out, sizeof out), 0);
    CHECK_CONTAINS(out, "# Out of bounds values : 0 OK");
  }
  CHECK_EQ(run("2 -- @ bench allreduce -b 1K -e 1K -n 2 -w 1 -a rhd -d bf16 -o max --check", NULL, out, sizeof out), 0);
  CHECK_CONTAINS(out, "rhd");
  CHECK_CONTAINS(out, "bfloat16");
  /* a training-like loop: one line per step, then the link watch's counts */
  CHECK_EQ(run("3 -- @ bench allreduce --steps 4 -b 64K -a trees", NULL, out, sizeof out), 0);
  CHECK_EQ(count_of(out, " trees "), 4);
  CHECK_CONTAINS(out, "link watch: ");
  /* the CI gate: an impossible minimum fails the run */
  CHECK(run("2 -- @ bench allreduce -b 1K -e 4K -n 2 -w 1", "SHOAL_BENCH_MIN_BW=1e6", out, sizeof out) != 0);
  CHECK_CONTAINS(out, "SHOAL_BENCH_MIN_BW");
  /* a bad minimum is said before the sweep (no size line printed) */
  CHECK(run("2 -- @ bench allreduce -b 1K -e 4K -n 2 -w 1", "SHOAL_BENCH_MIN_BW=abc", out, sizeof out) != 0);
  CHECK_CONTAINS(out, "SHOAL_BENCH_MIN_BW='abc': not a number");
  CHECK_MSG(strstr(out, "Avg bus bandwidth") == NULL, "the sweep ran: %s", out);
}

TEST_T(coll_cli_bench_bad_options_and_explain, 60) {
  static char out[1 << 16];
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s bench allreduce -b 2M -e 1K", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "larger than -e");
  snprintf(cmd, sizeof cmd, "%s bench allreduce -d float17", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "float17");
  snprintf(cmd, sizeof cmd, "%s bench alltoall", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "unknown collective 'alltoall'");
  /* each mistake named as what it is (every command exits 2 before any rank starts) */
  static const char *const bad[][2] = {
      {"bench allreduce -b 8 -e 8 --bogus", "unknown option '--bogus'"},
      {"bench allreduce -b 8 -e 8 extra", "unknown argument 'extra'"},
      {"bench allreduce -b", "-b needs a value (a size like 8, 64K, 256M)"},
      {"bench broadcast --steps 2", "--steps is for allreduce only"},
      {"tune --file", "--file needs a value"},
      {"selftest --count", "--count needs a value"},
      {"testbed up --name shoal-never --uplink 300mbit --oversub 4", "--uplink and --oversub both set the uplink"},
      {"testbed up --name shoal-never --hosts 4294967298", "--hosts='4294967298': out of range [1, 64]"}, /* not cast to 2 first */
      {"testbed up --name shoal-never --slurm --gpus 17", "--gpus='17': out of range [1, 16]"},
      {"testbed up --name shoal-never --rate 0x100000", "--rate '0x100000': expected a rate"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    snprintf(cmd, sizeof cmd, "%s %s", shoal_test_cli(), bad[k][0]);
    st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s': status %d: %s", bad[k][0], st, out);
    CHECK_MSG(strstr(out, bad[k][1]) != NULL, "'%s': '%s' not in: %s", bad[k][0], bad[k][1], out);
  }
  /* --explain without launching: the model's pick per size */
  snprintf(cmd, sizeof cmd, "%s bench allreduce --explain -p 2 -b 8 -e 256M -f 4", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_CONTAINS(out, "alpha");
  CHECK_CONTAINS(out, " rd "); /* latency-bound small sizes */
  CHECK_CONTAINS(out, " ring "); /* bandwidth-bound large ones (ties with rhd at 2 ranks go to the ring) */
  snprintf(cmd, sizeof cmd, "%s bench allreduce --explain -p 4 -b 8 -e 256M -f 4", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_CONTAINS(out, " rhd "); /* 4 ranks: 2 lg p = 4 latency terms beat the ring's 2(p-1) = 6 */
  snprintf(cmd, sizeof cmd, "SHOAL_ALGO=rhd %s bench allreduce --explain -p 4 -b 8 -e 8", shoal_test_cli());
  CHECK_EQ(shoal_test_run_cmd(cmd, out, sizeof out, 20), 0);
  CHECK_CONTAINS(out, "forced by SHOAL_ALGO");
  /* an algorithm that does not apply is refused with its reason, as the run refuses it */
  snprintf(cmd, sizeof cmd, "%s bench allreduce --explain -p 2 -a shm -b 8 -e 8", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "-a shm does not apply on the model's ranks, one per host over TCP (-p)");
  CHECK_MSG(strstr(out, "requested by the caller") == NULL, "shown as the choice: %s", out);
  /* launched, it is judged on the world itself: two ranks on this host may run shm */
  snprintf(cmd, sizeof cmd, "SHOAL_SHM=1 %s launch -n 2 -- %s bench allreduce --explain -a shm -b 8 -e 8", shoal_test_cli(),
           shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "launched --explain -a shm: status %d: %s", st, out);
  CHECK_CONTAINS(out, "requested by the caller");
}
