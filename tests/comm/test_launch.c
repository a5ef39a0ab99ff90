/* `shoal launch` through the real CLI: output prefixing, failure
 * propagation, a real communicator over the launcher's port-0 store. */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../runner.h"
#include "shoal/comm.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* When the launcher runs this test binary as a rank (SHOAL_TEST_LAUNCH_CHILD),
 * join the world from the environment, exchange with every peer, and exit. */
__attribute__((constructor)) static void launch_child_mode(void) {
  if (!getenv("SHOAL_TEST_LAUNCH_CHILD")) return;
  int rounds = getenv("SHOAL_TEST_LAUNCH_TWICE") ? 2 : 1; /* two worlds one after the other in one process */
  for (int round = 0; round < rounds; round++) {
    shoal_comm_t *c = NULL;
    shoal_comm_params_t prm;
    shoal_comm_params_init(&prm); /* the environment, but a port given here wins (SHOAL_TEST_LAUNCH_PORT) */
    if (getenv("SHOAL_TEST_LAUNCH_PORT")) prm.master_port = atoi(getenv("SHOAL_TEST_LAUNCH_PORT"));
    int rc = shoal_comm_init(&prm, &c);
    if (rc) {
      fprintf(stderr, "init: %s: %s\n", shoal_status_string(rc), shoal_last_error());
      exit(10);
    }
    int r = shoal_comm_rank(c), n = shoal_comm_size(c);
    if (getenv("SHOAL_TEST_LAUNCH_LEAVE")) { /* the last rank leaves and fails slowly; the others then fail */
      if (r == n - 1) {
        shoal_comm_destroy(c);
        usleep(500000);
        exit(3);
      }
      int x = 1;
      for (int i = 0; i < 1000; i++)
        if (shoal_allreduce(c, &x, &x, 1, SHOAL_INT32, SHOAL_SUM)) exit(11);
      exit(0);
    }
    for (int p = 0; p < n; p++) {
      if (p == r) continue;
      int out = r * 100 + p, in = -1;
      if (shoal_sendrecv(c, &out, 1, p, &in, 1, p, SHOAL_INT32, 0)) {
        fprintf(stderr, "exchange: %s\n", shoal_comm_errmsg(c));
        exit(11);
      }
      if (in != p * 100 + r) exit(12);
    }
    printf("rank %d of %d exchanged with all peers\n", r, n);
    fflush(stdout);
    shoal_comm_destroy(c);
  }
  exit(0);
}

static char out[1 << 16];

TEST_T(launch_prefixes_output_lines, 30) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s launch -n 3 -- sh -c 'echo first $SHOAL_RANK/$SHOAL_WORLD_SIZE $LOCAL_RANK; echo to-stderr >&2; "
           "printf \"no newline $RANK\"'",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  for (int r = 0; r < 3; r++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] first %d/3 %d\n", r, r, r);
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof want, "[%d] to-stderr\n", r);
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof want, "[%d] no newline %d\n", r, r);
    CHECK_CONTAINS(out, want);
  }
}

/* Many long lines from several ranks at once: every line arrives whole. */
TEST_T(launch_lines_never_interleave, 30) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s launch -n 4 -- sh -c 'i=0; while [ $i -lt 200 ]; do "
           "echo r$SHOAL_RANK-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-$i; "
           "i=$((i+1)); done' | grep -c -E '^\\[([0-3])\\] r\\1-a{81}-[0-9]+$'",
           shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 25);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_EQ(atoi(out), 800);
}

TEST_T(launch_rank_exit_code_stops_others, 30) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s launch -n 4 --grace 2 -- sh -c 'if [ $SHOAL_RANK = 2 ]; then sleep 0.3; exit 3; fi; exec sleep 60'",
           shoal_test_cli());
  double t0 = mono();
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 25);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "shoal launch: rank 2 exited with status 3; stopped the other 3 ranks");
  CHECK_MSG(mono() - t0 < 10, "took %.1f s", mono() - t0);
}

TEST_T(launch_rank_killed_by_signal, 30) {
  char cmd[1024];
  /* the other ranks ignore SIGTERM: the launcher must escalate to SIGKILL after --grace */
  snprintf(cmd, sizeof cmd,
           "%s launch -n 3 --grace 1 -- sh -c 'if [ $SHOAL_RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; "
           "trap \"\" TERM; sleep 60 & wait; wait'",
           shoal_test_cli());
  double t0 = mono();
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 25);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "shoal launch: rank 1 killed by signal 9 (Killed); stopped the other 2 ranks");
  CHECK_MSG(mono() - t0 < 10, "took %.1f s", mono() - t0);
}

TEST_T(launch_timeout_and_bad_usage, 30) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s launch -n 2 --timeout 0.5 -- sleep 30", shoal_test_cli());
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 124, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "--timeout 0.5 s reached; stopped all 2 ranks");
  snprintf(cmd, sizeof cmd, "%s launch -n abc -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "-n='abc'");
  snprintf(cmd, sizeof cmd, "%s launch -n 2 -- /nonexistent/prog", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 127);
  CHECK_CONTAINS(out, "cannot run '/nonexistent/prog'");
  CHECK_CONTAINS(out, "exited with status 127");
  snprintf(cmd, sizeof cmd, "%s launch -n 2 --hosts nodeA,nodeB -- prog", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "shoal does not start processes remotely");
  CHECK_CONTAINS(out, "on nodeB: for r in $(seq 1 1); do SHOAL_RANK=$r SHOAL_WORLD_SIZE=2 SHOAL_MASTER_ADDR=nodeA");
  /* the program's arguments, shell-quoted; the token passed on; a loopback first host named as this host */
  char me[256] = "", want[512];
  gethostname(me, sizeof me - 1);
  snprintf(cmd, sizeof cmd, "SHOAL_TOKEN=t %s launch -n 2 --hosts localhost,nodeB -- prog a 'b c'", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  snprintf(want, sizeof want, "SHOAL_MASTER_ADDR=%s SHOAL_MASTER_PORT=29500 SHOAL_TOKEN=\"$SHOAL_TOKEN\" prog a 'b c' & done",
           me);
  CHECK_CONTAINS(out, want);
  /* a program found but not executable: 126, as a shell; an empty host name; --max-restarts without restart */
  snprintf(cmd, sizeof cmd, "%s launch -n 1 -- /etc/passwd", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 126);
  CHECK_CONTAINS(out, "rank 0 exited with status 126");
  CHECK(strstr(out, "stopped the other 0") == NULL);
  snprintf(cmd, sizeof cmd, "%s launch -n 2 --hosts a,,b -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "an empty host name");
  snprintf(cmd, sizeof cmd, "%s launch -n 2 --hosts 'a;touch /tmp/shoal-pwn,b' -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20); /* the printed commands would have run it */
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && access("/tmp/shoal-pwn", F_OK) != 0);
  CHECK_CONTAINS(out, "';' in a host name");
  snprintf(cmd, sizeof cmd, "%s launch -n 2 --max-restarts 2 -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "--max-restarts applies to --on-failure restart only");
  /* counts are integers */
  snprintf(cmd, sizeof cmd, "%s launch -n 2.9 -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "not an integer");
  /* started with standard output closed, the store socket must not land on descriptor 1 (rank 0 was told
   * SHOAL_STORE_FD=1 and the launcher forwarded its output onto it); output that cannot be written fails */
  snprintf(cmd, sizeof cmd, "(exec 1>&-; %s launch -n 2 -- %s selftest --count 2; echo rc=$? >&2) 2>&1",
           shoal_test_cli(), shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK_CONTAINS(out, "rc=0");
  snprintf(cmd, sizeof cmd, "%s sim --synthetic 20 --machines 2 --policy fifo --csv > /dev/full", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 30);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  CHECK_CONTAINS(out, "shoal sim: writing the standard output: No space left on device");
  /* ranks out of file descriptors: whatever runs out first (rank 0's store accepting a rank, a socket), the
   * ranks fail naming it, at once (the store spun on its listener until the connect deadline and the ranks
   * said only that somebody did not arrive) */
  for (int lim = 8; lim <= 12; lim++) { /* rank 0 only: which of its descriptors runs out first varies */
    snprintf(cmd, sizeof cmd,
             "SHOAL_CONNECT_TIMEOUT=20 %s launch -n 4 -- sh -c '[ $SHOAL_RANK = 0 ] && ulimit -n %d; exec %s selftest' 2>&1",
             shoal_test_cli(), lim, shoal_test_cli());
    st = shoal_test_run_cmd(cmd, out, sizeof out, 40);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(out, "Too many open files") &&
                  !strstr(out, "did not arrive"), "rank 0 with %d descriptors: status %d: %s", lim, st, out);
  }
  /* a bad --addr is named as --addr (not as the testbed's), and it cannot override a testbed's store */
  snprintf(cmd, sizeof cmd, "%s launch -n 1 --addr bogus.invalid -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  CHECK_CONTAINS(out, "the store address from --addr: cannot resolve host 'bogus.invalid'");
  snprintf(cmd, sizeof cmd, "%s launch -n 1 --testbed tb --addr 10.0.0.1 -- true", shoal_test_cli());
  st = shoal_test_run_cmd(cmd, out, sizeof out, 20);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "--addr with --testbed");
}

TEST_T(launch_port_in_use, 20) {
  int port = shoal_test_free_port();
  char cmd[1024];
  /* hold the port with a listener of our own (python-free: another launcher's store) */
  snprintf(cmd, sizeof cmd, "%s launch -n 1 --port %d -- sleep 1.5 & sleep 0.5; %s launch -n 2 --port %d -- true; "
           "echo rc=$?; kill %%1", shoal_test_cli(), port, shoal_test_cli(), port);
  shoal_test_run_cmd(cmd, out, sizeof out, 20);
  char want[96];
  snprintf(want, sizeof want, "--port %d is in use", port);
  CHECK_CONTAINS(out, want);
  CHECK_CONTAINS(out, "pick another --port");
  CHECK_CONTAINS(out, "rc=1");
}

/* n ranks of this binary under shoal launch, with env (VAR=value ...) before it: each joins the world and
 * exchanges with every peer (launch_child_mode). */
static void world_of_this_binary(int n, const char *env) {
  char self[4096];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(k > 0);
  self[k] = '\0';
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "SHOAL_TEST_LAUNCH_CHILD=1 %s %s launch -n %d -- %s", env, shoal_test_cli(), n, self);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 35);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  for (int r = 0; r < n; r++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] rank %d of %d exchanged with all peers", r, r, n);
    CHECK_CONTAINS(out, want);
  }
}

/* A rank that leaves the job and fails on its way out (an exception after its communicator was destroyed)
 * is named, not the ranks that failed first because it left: they say so on the launcher's note pipe. */
TEST_T(launch_blames_the_rank_that_left_not_its_victims, 40) {
  char self[4096];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(k > 0);
  self[k] = '\0';
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "SHOAL_TEST_LAUNCH_CHILD=1 SHOAL_TEST_LAUNCH_LEAVE=1 SHOAL_TIMEOUT=20 %s launch -n 3 -- %s",
           shoal_test_cli(), self);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 35);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "shoal launch: rank 2 exited with status 3 (rank ");
  CHECK_CONTAINS(out, " exited with status 11 first, after losing it)");
}

/* The real thing: ranks of this binary join a world through the launcher's
 * port-0 store (SHOAL_STORE_FD) and exchange with every peer. */
TEST_T(launch_real_world_port_zero, 40) { world_of_this_binary(5, "SHOAL_CONNECT_TIMEOUT=20 SHOAL_TIMEOUT=20"); }

/* A port the program gives (params.master_port) wins over the launcher's: rank 0 serves the store there,
 * not on the socket the launcher handed it (the other ranks went to the given port and both timed out). */
TEST_T(launch_explicit_port_wins_over_the_launchers, 40) {
  char env[128];
  snprintf(env, sizeof env, "SHOAL_TEST_LAUNCH_PORT=%d SHOAL_CONNECT_TIMEOUT=10 SHOAL_TIMEOUT=10",
           shoal_test_free_port());
  world_of_this_binary(3, env);
}

/* Ctrl-C (SIGINT to the launcher) reaches every rank; the launcher says so
 * and exits 130. The ranks here only stop because the signal was forwarded:
 * they run in their own process groups. */
TEST_T(launch_forwards_sigint, 30) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s launch -n 3 -- sh -c 'trap \"echo got INT; exit 5\" INT; echo ready; sleep 20 & wait' & P=$!; "
           "sleep 2; kill -INT $P; wait $P; echo rc=$?", /* 2 s: every rank has set its trap, even on a loaded machine */
           shoal_test_cli());
  double t0 = mono();
  shoal_test_run_cmd(cmd, out, sizeof out, 25);
  CHECK_CONTAINS(out, "shoal launch: Interrupt received; forwarded to the 3 ranks");
  CHECK_CONTAINS(out, "rc=130");
  for (int r = 0; r < 3; r++) {
    char want[32];
    snprintf(want, sizeof want, "[%d] got INT", r);
    CHECK_CONTAINS(out, want);
  }
  CHECK_MSG(mono() - t0 < 15, "took %.1f s", mono() - t0);
}

/* Two programs in a row in each rank (`sh -c 'prog && prog'`), each joining
 * two worlds one after the other: rank 0's inherited store socket stays
 * open for every later rendezvous. */
TEST_T(launch_two_programs_in_a_row, 40) {
  char self[4096];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(k > 0);
  self[k] = '\0';
  char cmd[9000];
  snprintf(cmd, sizeof cmd,
           "SHOAL_TEST_LAUNCH_CHILD=1 SHOAL_TEST_LAUNCH_TWICE=1 SHOAL_CONNECT_TIMEOUT=20 SHOAL_TIMEOUT=20 %s launch -n 3 "
           "-- sh -c '%s && %s'",
           shoal_test_cli(), self, self);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 35);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  for (int r = 0; r < 3; r++) {
    char want[64];
    snprintf(want, sizeof want, "[%d] rank %d of 3 exchanged with all peers", r, r);
    int times = 0;
    for (const char *p = strstr(out, want); p; p = strstr(p + 1, want)) times++;
    CHECK_MSG(times == 4, "rank %d joined %d worlds of 4: %s", r, times, out);
  }
}

/* Run `[env] shoal launch ARGS` and return its wait status (output in out). */
static int launch_with(const char *env, const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s launch %s", env, shoal_test_cli(), args);
  return shoal_test_run_cmd(cmd, out, sizeof out, 20);
}

/* --bind: auto pins rank r to one usable CPU when the ranks fit, leaves them
 * free when they do not; none never pins; a bad mode is a usage error. */
TEST_T(launch_binds_ranks_to_cores, 30) {
  char args[512], want0[64], want1[64];
  cpu_set_t set; /* the launcher pins to the CPUs it may use: the first two of them here */
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  long ncpu = CPU_COUNT(&set);
  int cpus[2] = {-1, -1};
  for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < 2; cpu++)
    if (CPU_ISSET(cpu, &set)) cpus[k++] = cpu;
  snprintf(want0, sizeof want0, "[0] Cpus_allowed_list:%d\n", cpus[0]);
  snprintf(want1, sizeof want1, "[1] Cpus_allowed_list:%d\n", cpus[1]);
  const char *show = "sh -c \"grep Cpus_allowed_list: /proc/self/status | tr -d ' \\\\t'\"";
  const char *modes[] = {"-n 2 --bind core", "-n 2 --bind none", NULL, NULL};
  for (int m = 0; m < 4; m++) {
    char oversub[32];
    snprintf(oversub, sizeof oversub, "-n %ld", ncpu + 1); /* auto, more ranks than CPUs */
    snprintf(args, sizeof args, "%s -- %s", modes[m] ? modes[m] : oversub, show);
    /* oversubscribed: pinned round-robin with shared memory on (m == 2), free without (m == 3) */
    int st = launch_with(m == 3 ? "SHOAL_SHM=0" : "", args);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d: %s", args, st, out);
    if (ncpu < 2) continue; /* one usable CPU: "pinned" and "free" look the same */
    if (m == 0 || m == 2) {
      CHECK_CONTAINS(out, want0);
      CHECK_CONTAINS(out, want1);
    } else {
      CHECK_MSG(!strstr(out, want1), "%s pinned: %s", args, out);
    }
  }
  int st = launch_with("", "-n 2 --bind sockets -- true");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "--bind 'sockets': expected core, none or auto");
  st = launch_with("SHOAL_BIND=tight", "-n 2 -- true");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CHECK_CONTAINS(out, "SHOAL_BIND 'tight'");
}

/* SHOAL_TCP_CONGESTION: an algorithm the kernel lacks fails the world's
 * creation naming the variable; reno (always allowed) works. */
TEST_T(launch_tcp_congestion_choice, 30) {
  char args[512];
  snprintf(args, sizeof args, "-n 2 -- %s bench allreduce -b 8 -e 64 -n 2 --check", shoal_test_cli());
  int st = launch_with("SHOAL_SHM=0 SHOAL_TCP_CONGESTION=nosuchcc", args);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "SHOAL_TCP_CONGESTION='nosuchcc'");
  st = launch_with("SHOAL_SHM=0 SHOAL_TCP_CONGESTION=reno", args);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "#wrong");
}
