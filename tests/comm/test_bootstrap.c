/* Bootstrap: SipHash vectors, environment precedence, port 0, host identity,
 * interface selection, the store's set/get/wait. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/mesh.h"
#include "comm/comm_impl.h"
#include "comm/bootstrap/sock.h"
#include "comm/bootstrap/store.h"
#include "core/siphash.h"
#include "test_p2p_util.h"

#define FAILR(...)                \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n");        \
    return 1;                     \
  } while (0)

/* Reference vectors of SipHash-2-4 (key 00..0f, message 00..len-1), from the
 * reference implementation's vectors.h / the paper's appendix. */
TEST(siphash24_reference_vectors) {
  uint8_t key[16], msg[64];
  for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
  for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
  CHECK(shoal__siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ull);
  CHECK(shoal__siphash24(key, msg, 1) == 0x74f839c593dc67fdull);
  CHECK(shoal__siphash24(key, msg, 15) == 0xa129ca6149be45e5ull);
  CHECK(shoal__siphash24(key, msg, 63) == 0x958a324ceb064572ull);
}

static void clear_rank_env(void) {
  static const char *const vars[] = {"SHOAL_RANK", "SHOAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                     "SHOAL_MASTER_PORT", "MASTER_PORT", "SHOAL_MASTER_ADDR", "MASTER_ADDR",
                                     "SHOAL_STORE_FD", "SHOAL_TOKEN", "SHOAL_HOSTNAME", "SHOAL_SOCKET_IFNAME",
                                     "SHOAL_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                     "PMIX_NAMESPACE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

TEST(bootstrap_env_precedence) {
  clear_rank_env();
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  shoal__boot_cfg_t cfg;
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 0 && cfg.size == 1);
  CHECK(!strcmp(cfg.master_addr, "127.0.0.1") && cfg.master_port == 29500);
  setenv("SLURM_PROCID", "4", 1);
  setenv("SLURM_NTASKS", "9", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 4 && cfg.size == 9 && !strcmp(cfg.rank_src, "SLURM_PROCID"));
  setenv("PMI_RANK", "3", 1);
  setenv("PMI_SIZE", "8", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 3 && cfg.size == 8 && !strcmp(cfg.rank_src, "PMI_RANK"));
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "7", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 2 && cfg.size == 7);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "6", 1);
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  setenv("MASTER_PORT", "1234", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 1 && cfg.size == 6 && !strcmp(cfg.rank_src, "RANK"));
  CHECK(!strcmp(cfg.master_addr, "10.1.2.3") && cfg.master_port == 1234 && !strcmp(cfg.addr_src, "MASTER_ADDR"));
  setenv("SHOAL_RANK", "5", 1);
  setenv("SHOAL_WORLD_SIZE", "10", 1);
  setenv("SHOAL_MASTER_ADDR", "10.9.9.9", 1);
  setenv("SHOAL_MASTER_PORT", "4321", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 5 && cfg.size == 10 && !strcmp(cfg.rank_src, "SHOAL_RANK"));
  CHECK(!strcmp(cfg.master_addr, "10.9.9.9") && cfg.master_port == 4321);
  p.rank = 0;
  p.world_size = 2;
  p.master_addr = "127.0.0.2";
  p.master_port = 0;
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK(cfg.rank == 0 && cfg.size == 2 && !strcmp(cfg.rank_src, "params"));
  CHECK(!strcmp(cfg.master_addr, "127.0.0.2") && cfg.master_port == 0);
  clear_rank_env();
}

/* The job id comes from the launcher that gave the rank (several launchers' variables coexist), and
 * under torchrun shoal's store takes MASTER_PORT + 1 (torch's agent listens on MASTER_PORT). */
TEST(bootstrap_launcher_job_ids_and_torchrun_port) {
  static const struct {
    const char *env, *want_id;
    int want_port;
  } cases[] = {
      /* torchrun's static rendezvous: every job's run id is "none"; its agent's address and port are not */
      {"TORCHELASTIC_RUN_ID=none RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29621",
       "torchrun:127.0.0.1:29621", 29622},
      {"TORCHELASTIC_RUN_ID=r7 RANK=1 WORLD_SIZE=2 MASTER_PORT=29500", "torchrun:r7", 29501},
      {"TORCHELASTIC_RUN_ID=r7 RANK=1 WORLD_SIZE=2 MASTER_PORT=29500 SHOAL_MASTER_PORT=29700", "torchrun:r7", 29700},
      {"RANK=1 WORLD_SIZE=2 MASTER_PORT=29500", "", 29500}, /* no torchrun: MASTER_PORT as is */
      /* mpirun inside a Slurm allocation: SLURM_JOB_ID without a step is every mpirun's there */
      {"OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 SLURM_JOB_ID=14 PMIX_NAMESPACE=ns1", "pmix:ns1", 29500},
      {"SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_JOB_ID=14 SLURM_STEP_ID=3 PMIX_NAMESPACE=ns2", "slurm:14.3", 29500},
      {"SHOAL_RANK=0 SHOAL_WORLD_SIZE=2 SLURM_JOB_ID=14", "", 29500},
      {"SHOAL_JOB_ID=mine TORCHELASTIC_RUN_ID=r7 RANK=0 WORLD_SIZE=2", "mine", 29500},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    clear_rank_env();
    char env[256];
    snprintf(env, sizeof env, "%s", cases[k].env);
    for (char *sv = NULL, *t = strtok_r(env, " ", &sv); t; t = strtok_r(NULL, " ", &sv)) {
      char *eq = strchr(t, '=');
      *eq = '\0';
      setenv(t, eq + 1, 1);
    }
    shoal_comm_params_t p;
    shoal_comm_params_init(&p);
    shoal__boot_cfg_t cfg;
    CHECK_OK(shoal__boot_resolve(&p, &cfg));
    CHECK_MSG(!strcmp(cfg.job_id, cases[k].want_id), "%s: job id '%s', expected '%s'", cases[k].env, cfg.job_id,
              cases[k].want_id);
    CHECK_MSG(cfg.master_port == cases[k].want_port, "%s: port %d, expected %d", cases[k].env, cfg.master_port,
              cases[k].want_port);
  }
  clear_rank_env();
}

/* Writes text to a new file from the mkstemp template path and names it in SHOAL_CONF_FILE (read once per
 * process: each test runs in its own). */
static void use_conf_file(char *path, const char *text) {
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  setenv("SHOAL_CONF_FILE", path, 1);
}

/* The environment wins over SHOAL_CONF_FILE across launcher families: a file's SHOAL_RANK/SHOAL_MASTER_*
 * are defaults for a process no launcher started, not overrides of torchrun's RANK/MASTER_ADDR. */
TEST(bootstrap_env_wins_over_conf_file) {
  clear_rank_env();
  char path[] = "/tmp/shoal-conf-XXXXXX";
  use_conf_file(path, "SHOAL_RANK=0\nSHOAL_WORLD_SIZE=1\nSHOAL_MASTER_ADDR=127.0.0.2\nSHOAL_MASTER_PORT=29701\n");
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  shoal__boot_cfg_t cfg;
  CHECK_OK(shoal__boot_resolve(&p, &cfg)); /* nothing in the environment: the file */
  CHECK(cfg.rank == 0 && cfg.size == 1 && !strcmp(cfg.master_addr, "127.0.0.2") && cfg.master_port == 29701);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29999", 1);
  CHECK_OK(shoal__boot_resolve(&p, &cfg));
  CHECK_MSG(cfg.rank == 1 && cfg.size == 2 && !strcmp(cfg.rank_src, "RANK"), "rank %d of %d from %s", cfg.rank,
            cfg.size, cfg.rank_src);
  CHECK_MSG(!strcmp(cfg.master_addr, "127.0.0.1") && cfg.master_port == 29999, "store %s:%d", cfg.master_addr,
            cfg.master_port);
  unlink(path);
  unsetenv("SHOAL_CONF_FILE");
  clear_rank_env();
}

/* A bad rank or port read from SHOAL_CONF_FILE names the file and line, as every other value of it does. */
TEST(bootstrap_conf_file_bad_values_name_the_line) {
  clear_rank_env();
  unsetenv("SHOAL_MASTER_PORT");
  unsetenv("MASTER_PORT");
  char path[] = "/tmp/shoal-conf-XXXXXX";
  use_conf_file(path, "SHOAL_MASTER_PORT=99999\nSHOAL_RANK=abc\nSHOAL_WORLD_SIZE=2\n");
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  shoal__boot_cfg_t cfg;
  char want[128];
  CHECK_EQ(shoal__boot_resolve(&p, &cfg), SHOAL_ERR_CONFIG);
  snprintf(want, sizeof want, "SHOAL_RANK='abc': not an integer (set in %s:2)", path);
  CHECK_CONTAINS(shoal_last_error(), want);
  p.rank = 0;
  p.world_size = 2;
  CHECK_EQ(shoal__boot_resolve(&p, &cfg), SHOAL_ERR_CONFIG);
  snprintf(want, sizeof want, "SHOAL_MASTER_PORT='99999'");
  CHECK_CONTAINS(shoal_last_error(), want);
  snprintf(want, sizeof want, "(set in %s:1)", path);
  CHECK_CONTAINS(shoal_last_error(), want);
  unlink(path);
  unsetenv("SHOAL_CONF_FILE");
}

/* Explicit parameters outside what comm.h documents are errors naming the field, not "from the
 * environment" (rank -5) or a cut value (a long host name would make two emulated hosts one). */
TEST(bootstrap_params_out_of_range) {
  clear_rank_env();
  static const struct {
    int rank, size, port;
    double timeout, connect;
    int longhost;
    const char *want;
  } cases[] = {
      {-5, 2, -1, 0, 0, 0, "params.rank=-5: expected -1"},
      {0, -3, -1, 0, 0, 0, "params.world_size=-3: expected -1"},
      {0, 2, -2, 0, 0, 0, "params.master_port=-2: expected -1"},
      {0, 2, 70000, 0, 0, 0, "params.master_port=70000"},
      {0, 2, -1, NAN, 0, 0, "params.timeout_s=nan"},
      {0, 2, -1, 0, INFINITY, 0, "params.connect_timeout_s=inf"},
      {0, 2, -1, 2e7, 0, 0, "params.timeout_s=2e+07: out of range"},
      {0, 2, -1, 0, 0, 1, "params.hostname: 80 bytes, at most 63"},
      {0, 2, -1, 0, 0, 2, "params.hostname='a b': must not contain white space"},
  };
  char host[81];
  memset(host, 'h', 80);
  host[80] = '\0';
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    shoal_comm_params_t p;
    shoal_comm_params_init(&p);
    p.rank = cases[i].rank;
    p.world_size = cases[i].size;
    p.master_port = cases[i].port;
    p.timeout_s = cases[i].timeout;
    p.connect_timeout_s = cases[i].connect;
    if (cases[i].longhost) p.hostname = cases[i].longhost == 1 ? host : "a b";
    shoal__boot_cfg_t cfg;
    CHECK_EQ(shoal__boot_resolve(&p, &cfg), SHOAL_ERR_CONFIG);
    CHECK_CONTAINS(shoal_last_error(), cases[i].want);
  }
}

/* A log level or subsystem that does not exist is a configuration error of
 * the world, naming the variable, like every other SHOAL_* value. */
TEST(bootstrap_bad_log_settings_refused) {
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = 0;
  p.world_size = 1;
  p.master_port = 0;
  shoal_comm_t *c = (shoal_comm_t *)&p;
  setenv("SHOAL_DEBUG", "LOUD", 1);
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "SHOAL_DEBUG='LOUD'");
  CHECK(c == (shoal_comm_t *)&p); /* untouched */
  setenv("SHOAL_DEBUG", "warn", 1);
  setenv("SHOAL_DEBUG_SUBSYS", "^COLL,BOGUS", 1);
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "unknown subsystem 'BOGUS'");
  setenv("SHOAL_DEBUG_SUBSYS", "^coll,net", 1);
  CHECK_OK(shoal_comm_init(&p, &c));
  shoal_comm_destroy(c);
}

TEST(bootstrap_interface_spec) {
  struct in_addr route = {0}, out;
  char desc[160];
  CHECK_OK(shoal__boot_pick_addr("=lo", "SHOAL_SOCKET_IFNAME", route, &out, desc, sizeof desc));
  CHECK_EQ(ntohl(out.s_addr), 0x7f000001);
  CHECK_CONTAINS(desc, "interface lo");
  /* prefix match in a list */
  CHECK_OK(shoal__boot_pick_addr("nosuch,l", "SHOAL_SOCKET_IFNAME", route, &out, desc, sizeof desc));
  CHECK_EQ(ntohl(out.s_addr), 0x7f000001);
  /* exact: no match */
  CHECK_EQ(shoal__boot_pick_addr("=l", "SHOAL_SOCKET_IFNAME", route, &out, desc, sizeof desc), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "matches no interface");
  /* exclusion: something is left */
  CHECK_OK(shoal__boot_pick_addr("^nosuch", "SHOAL_SOCKET_IFNAME", route, &out, desc, sizeof desc));
  route.s_addr = htonl(0x0a000001);
  CHECK_OK(shoal__boot_pick_addr("", "SHOAL_SOCKET_IFNAME", route, &out, desc, sizeof desc));
  CHECK_EQ(ntohl(out.s_addr), 0x0a000001);
  /* a spec given in the parameters is named as such (not as a variable the user never set) */
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = 0;
  p.world_size = 2; /* (a world of one advertises no address) */
  p.master_port = 0;
  p.connect_timeout_s = 2;
  p.ifname = "=nosuch0";
  shoal_comm_t *c = NULL;
  CHECK_EQ(shoal_comm_init(&p, &c), SHOAL_ERR_CONFIG);
  CHECK_CONTAINS(shoal_last_error(), "params.ifname='=nosuch0' matches no interface");
}

/* Port 0: rank 0 binds an ephemeral port and reports it; rank 1 learns it
 * through a pipe (as a launcher would) and joins. SHOAL_HOSTNAME and the
 * boot id travel through the rendezvous. */
static int port_pipe[2];

static void on_port(int port, void *arg) {
  (void)arg;
  if (write(port_pipe[1], &port, sizeof port) != sizeof port) abort();
}

static int rank_port0(int rank, void *arg) {
  (void)arg;
  shoal_comm_params_t p;
  shoal_comm_params_init(&p);
  p.rank = rank;
  p.world_size = 2;
  p.master_addr = "127.0.0.1";
  p.connect_timeout_s = 10;
  p.timeout_s = 10;
  p.hostname = rank == 0 ? "node-a" : "node-b";
  p.token = "s3cret";
  if (rank == 0) {
    p.master_port = 0;
    p.on_store_port = on_port;
  } else {
    int port = 0;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port || port <= 0) FAILR("no port from rank 0");
    p.master_port = port;
  }
  shoal_comm_t *c = NULL;
  if (shoal_comm_init(&p, &c)) FAILR("rank %d init: %s", rank, shoal_last_error());
  shoal__world_t *w = c->w;
  if (strcmp(w->peers[0].host, "node-a") || strcmp(w->peers[1].host, "node-b"))
    FAILR("hosts: %s %s", w->peers[0].host, w->peers[1].host);
  if (strcmp(w->peers[0].boot_id, w->peers[1].boot_id) || strlen(w->peers[0].boot_id) < 8)
    FAILR("boot ids differ on one machine: %s %s", w->peers[0].boot_id, w->peers[1].boot_id);
  int v = rank, o = -1;
  if (shoal_sendrecv(c, &v, 1, 1 - rank, &o, 1, 1 - rank, SHOAL_INT32, 0) || o != 1 - rank) FAILR("exchange");
  shoal_comm_destroy(c);
  return 0;
}

TEST_T(bootstrap_port_zero_and_host_identity, 30) {
  CHECK(pipe(port_pipe) == 0);
  int st[2];
  CHECK_EQ(shoal_test_fork_ranks(2, rank_port0, NULL, 25, st), 2);
}

/* The store directly: set, get, wait for a key set later, deadline, not-found. */
TEST_T(store_set_get_wait, 30) {
  shoal__authkey_t key;
  shoal__auth_key("k", &key);
  struct in_addr lo = {htonl(0x7f000001)};
  int lfd, port;
  CHECK_OK(shoal__sock_listen(lo, 0, &lfd, &port));
  shoal__store_server_t *s;
  CHECK_OK(shoal__store_server_start(lfd, &key, 1, "", &s));
  pid_t pid = fork();
  if (pid == 0) {
    shoal__store_client_t c;
    if (shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, port, &key, shoal__deadline_in(5), &c)) _exit(1);
    shoal__sleep_s(0.3);
    _exit(shoal__store_set(&c, "late", "value-2", 7, shoal__deadline_in(5)) ? 2 : 0);
  }
  shoal__store_client_t c;
  CHECK_OK(shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, port, &key, shoal__deadline_in(5), &c));
  CHECK_OK(shoal__store_set(&c, "a", "hello", 5, shoal__deadline_in(5)));
  char buf[64];
  size_t len;
  CHECK_OK(shoal__store_get(&c, "a", 0, buf, sizeof buf, &len, shoal__deadline_in(5)));
  CHECK(len == 5 && !strcmp(buf, "hello"));
  CHECK_EQ(shoal__store_get(&c, "nope", 0, buf, sizeof buf, &len, shoal__deadline_in(5)), SHOAL_ERR_NOT_FOUND);
  CHECK_OK(shoal__store_get(&c, "late", 1, buf, sizeof buf, &len, shoal__deadline_in(5)));
  CHECK(len == 7 && !strcmp(buf, "value-2"));
  int st;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(shoal__store_get(&c, "never", 1, buf, sizeof buf, &len, shoal__deadline_in(0.3)), SHOAL_ERR_TIMEOUT);
  CHECK_CONTAINS(shoal_last_error(), "key 'never' did not appear");
  shoal__store_close(&c);
  /* a client with another token is refused with a clear error */
  shoal__authkey_t bad;
  shoal__auth_key("other", &bad);
  CHECK_EQ(shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, port, &bad, shoal__deadline_in(5), &c), SHOAL_ERR_AUTH);
  CHECK_CONTAINS(shoal_last_error(), "wrong SHOAL_TOKEN");
  shoal__store_server_stop(s);
}

/* The port's previous owner closes with a rank's connection in its queue (a finished job's listener, or
 * another process's, on the port rank 0's store is about to take): the rank sees a reset before any greeting,
 * connects again and reaches the store started a moment later. A port where something accepts and closes
 * every connection is named at the deadline. */
TEST_T(store_connect_outlives_the_ports_previous_owner, 30) {
  shoal__authkey_t key;
  shoal__auth_key("k", &key);
  struct in_addr lo = {htonl(0x7f000001)};
  int old_lfd, port;
  CHECK_OK(shoal__sock_listen(lo, 0, &old_lfd, &port));
  pid_t pid = fork();
  if (pid == 0) {
    close(old_lfd); /* the parent's close must end the listener */
    shoal__store_client_t c;
    if (shoal__store_connect("127.0.0.1", lo, port, &key, shoal__deadline_in(10), &c)) {
      fprintf(stderr, "rank: %s\n", shoal_last_error());
      _exit(1);
    }
    _exit(shoal__store_set(&c, "k", "v", 1, shoal__deadline_in(5)) ? 2 : 0);
  }
  struct pollfd pf = {old_lfd, POLLIN, 0};
  CHECK_EQ(poll(&pf, 1, 10000), 1); /* the rank's connection sits in the old listener's queue */
  close(old_lfd);                   /* ... which resets it */
  shoal__sleep_s(0.2);
  int lfd, port2;
  CHECK_OK(shoal__sock_listen(lo, port, &lfd, &port2));
  CHECK_EQ(port2, port);
  shoal__store_server_t *s;
  CHECK_OK(shoal__store_server_start(lfd, &key, 1, "", &s));
  int st;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the rank did not reach the store (status 0x%x)", st);
  shoal__store_server_stop(s);
  /* something that accepts and closes every connection: named when the deadline passes */
  int cl_lfd, cl_port;
  CHECK_OK(shoal__sock_listen(lo, 0, &cl_lfd, &cl_port));
  pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 200; i++) { /* bounded */
      struct pollfd p = {cl_lfd, POLLIN, 0};
      if (poll(&p, 1, 3000) != 1) break;
      int fd = accept(cl_lfd, NULL, NULL);
      if (fd >= 0) close(fd);
    }
    _exit(0);
  }
  shoal__store_client_t c;
  CHECK(shoal__store_connect("127.0.0.1", lo, cl_port, &key, shoal__deadline_in(1.0), &c) != 0);
  CHECK_CONTAINS(shoal_last_error(), "closed before any store greeted them");
  close(cl_lfd);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
}

/* Rank 0's store out of file descriptors: every rank that connects, before or after the store ran out, is
 * told why at once (the store gives up a reserve descriptor to answer each), instead of a reset for the
 * queued ones and refused connects until the deadline for the rest. */
TEST_T(store_out_of_descriptors_tells_every_rank_why, 30) {
  shoal__authkey_t key;
  shoal__auth_key("k", &key);
  struct in_addr lo = {htonl(0x7f000001)};
  int lfd, port, ready[2], done[2];
  CHECK_OK(shoal__sock_listen(lo, 0, &lfd, &port));
  CHECK(pipe(ready) == 0 && pipe(done) == 0);
  pid_t pid = fork();
  if (pid == 0) { /* rank 0's process: the store, then not one descriptor more */
    shoal__store_server_t *s;
    if (shoal__store_server_start(lfd, &key, 4, "", &s)) _exit(1);
    int k = dup(0);
    close(k);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = (rlim_t)k; /* every descriptor below k is open: the next accept fails with EMFILE */
    if (setrlimit(RLIMIT_NOFILE, &rl)) _exit(2);
    char b = 1;
    if (write(ready[1], &b, 1) != 1) _exit(3);
    struct pollfd p = {done[0], POLLIN, 0};
    poll(&p, 1, 20000);
    shoal__store_server_stop(s);
    _exit(0);
  }
  close(lfd);
  char b;
  CHECK_EQ(read(ready[0], &b, 1), 1);
  for (int r = 0; r < 3; r++) {
    shoal__store_client_t c;
    CHECK_EQ(shoal__store_connect("127.0.0.1", lo, port, &key, shoal__deadline_in(10), &c), SHOAL_ERR_ABORTED);
    CHECK_CONTAINS(shoal_last_error(), "the rendezvous was abandoned by rank 0: rank 0's store cannot accept");
    CHECK_CONTAINS(shoal_last_error(), "Too many open files");
  }
  CHECK_EQ(write(done[1], &b, 1), 1);
  int st;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the store's process: status 0x%x", st);
}

/* A stray client at a rank's own listening port during the mesh setup: it
 * proves no token (random MAC), then one with the token but another world
 * id. Both are refused with a logged reason, and the real rank still joins.
 * At the mesh layer (what shoal_comm_init runs once every rank registered),
 * so the order is fixed: rank 0 accepts and stops once its world is complete,
 * so the intruder is answered before rank 1 may connect (through
 * shoal_comm_init, a fast rank 1 could complete the world while a slow
 * intruder was still answering, and it was dropped unanswered). */
#define STRAY_WORLD_ID 0x5157ull
static int stray_done[2], stray_port;

static int rank_stray_peer(int rank, void *arg) {
  int lfd = *(int *)arg;
  shoal__authkey_t key;
  shoal__auth_key("tok", &key);
  char logpath[64];
  snprintf(logpath, sizeof logpath, "/tmp/shoal-stray-test-%d.log", (int)getppid());
  if (rank == 2) { /* the intruder: both connections answered and both verdicts read, then rank 1 may go */
    close(lfd);
    int fds[2];
    struct in_addr lo = {htonl(0x7f000001)};
    for (int k = 0; k < 2; k++)
      if (shoal__sock_connect(lo, stray_port, shoal__deadline_in(5), "rank 0", &fds[k])) FAILR("connect");
    for (int attempt = 0; attempt < 2; attempt++) {
      int fd = fds[attempt];
      unsigned char hello[20], ans[44] = {0};
      if (shoal__sock_read_all(fd, hello, 20, shoal__deadline_in(10), "hello")) FAILR("hello: %s", shoal_last_error());
      shoal__put_u32(ans, 0x50484853u);
      shoal__put_u32(ans + 4, 1); /* claims to be rank 1 */
      shoal__put_u32(ans + 8, 0);
      shoal__put_u64(ans + 12, 12345); /* some world id */
      if (attempt == 1) { /* right token, wrong world */
        unsigned char ctx[16];
        shoal__put_u32(ctx, 1);
        shoal__put_u32(ctx + 4, 0);
        shoal__put_u64(ctx + 8, 12345);
        shoal__put_u64(ans + 36, shoal__auth_mac(&key, 'C', hello + 4, ans + 20, ctx, sizeof ctx));
      }
      if (shoal__sock_write_all(fd, ans, 44, shoal__deadline_in(5), "answer")) FAILR("answer");
      unsigned char verdict[12];
      if (shoal__sock_read_all(fd, verdict, 12, shoal__deadline_in(5), "verdict")) FAILR("verdict");
      if (shoal__get_u32(verdict) != (attempt == 0 ? 1u : 2u)) FAILR("verdict %u", shoal__get_u32(verdict));
      close(fd);
    }
    char go = 1;
    if (write(stray_done[1], &go, 1) != 1) FAILR("pipe");
    return 0;
  }
  if (rank == 0) {
    int fd = open(logpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    close(fd);
  } else { /* start once rank 0 has refused the intruder */
    close(lfd);
    struct pollfd pf = {stray_done[0], POLLIN, 0};
    char done;
    if (poll(&pf, 1, 15000) != 1 || read(stray_done[0], &done, 1) != 1) FAILR("rank 0 did not refuse the intruder");
  }
  shoal__world_t *w = shoal__world_new(rank, 2);
  if (!w) FAILR("world_new");
  w->id = STRAY_WORLD_ID;
  snprintf(w->peers[0].addr, sizeof w->peers[0].addr, "127.0.0.1:%d", stray_port);
  snprintf(w->peers[1].addr, sizeof w->peers[1].addr, "127.0.0.1:1");
  if (shoal__mesh_connect(w, rank == 0 ? lfd : -1, &key, 0, 0, "system", shoal__deadline_in(10)))
    FAILR("rank %d: %s", rank, shoal_last_error());
  int peer_fd = w->conns[1 - rank].fd, v = rank, o = -1;
  if (peer_fd < 0 || shoal__sock_write_all(peer_fd, &v, sizeof v, shoal__deadline_in(5), "exchange") ||
      shoal__sock_read_all(peer_fd, &o, sizeof o, shoal__deadline_in(5), "exchange") || o != 1 - rank)
    FAILR("rank %d: exchange", rank);
  close(peer_fd);
  w->conns[1 - rank].fd = -1;
  shoal__world_free(w);
  if (rank == 0) {
    char log[8192] = "";
    FILE *f = fopen(logpath, "r");
    size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
    log[n] = '\0';
    if (f) fclose(f);
    unlink(logpath);
    if (!strstr(log, "refused connection from 127.0.0.1:") || !strstr(log, "wrong SHOAL_TOKEN (claims to be rank 1)") ||
        !strstr(log, "rank 1 of another job (world id 0000000000003039"))
      FAILR("rank 0 log: %s", log);
  }
  return 0;
}

TEST_T(bootstrap_stray_peer_refused, 30) {
  CHECK(pipe(stray_done) == 0);
  struct in_addr lo = {htonl(0x7f000001)};
  int lfd;
  CHECK_OK(shoal__sock_listen(lo, 0, &lfd, &stray_port));
  int st[3];
  CHECK_EQ(shoal_test_fork_ranks(3, rank_stray_peer, &lfd, 25, st), 3);
  close(lfd);
}

/* An authenticated but broken client: each malformed frame closes that
 * client only; the store keeps serving the others. Also random garbage from
 * unauthenticated clients (seeded). */
TEST_T(store_survives_malformed_frames, 30) {
  shoal__authkey_t key;
  shoal__auth_key("k", &key);
  struct in_addr lo = {htonl(0x7f000001)};
  int lfd, port;
  CHECK_OK(shoal__sock_listen(lo, 0, &lfd, &port));
  shoal__store_server_t *s;
  CHECK_OK(shoal__store_server_start(lfd, &key, 1, "", &s));
  static const unsigned char bad[][16] = {
      {4, 0, 0, 0, SHOAL__STORE_SET, 0, 0, 0, 0xff, 0xff, 0, 0},     /* SET, key length beyond the frame */
      {4, 0, 0, 0, SHOAL__STORE_SET, 0, 0, 0, 0, 0, 0, 0},           /* SET, empty key */
      {1, 0, 0, 0, SHOAL__STORE_GET, 0, 0, 0, 1},                    /* GET, no key */
      {0, 0, 0, 0, 42, 0, 0, 0},                                     /* unknown type */
      {0, 0, 0, 0, SHOAL__STORE_SET, 1, 0, 0},                       /* reserved bytes set */
      {0, 0, 0x20, 0, SHOAL__STORE_SET, 0, 0, 0},                    /* 2 MiB frame */
      {0, 0, 0, 0, SHOAL__STORE_AUTH, 0, 0, 0},                      /* AUTH again after auth */
  };
  static const size_t badlen[] = {12, 12, 9, 8, 8, 8, 8};
  for (size_t k = 0; k < sizeof badlen / sizeof badlen[0]; k++) {
    shoal__store_client_t c;
    CHECK_OK(shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, port, &key, shoal__deadline_in(5), &c));
    CHECK(write(c.fd, bad[k], badlen[k]) == (ssize_t)badlen[k]);
    char b[16];
    struct pollfd pf = {c.fd, POLLIN, 0};
    CHECK_MSG(poll(&pf, 1, 5000) == 1, "frame %zu: the store neither answered nor closed", k);
    ssize_t r = read(c.fd, b, sizeof b);
    CHECK_MSG(r <= 0, "frame %zu: the store answered a malformed frame", k);
    shoal__store_close(&c);
  }
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < 50; k++) { /* unauthenticated random bytes */
    int fd;
    CHECK_OK(shoal__sock_connect(lo, port, shoal__deadline_in(5), "store", &fd));
    unsigned char junk[64];
    for (size_t i = 0; i < sizeof junk; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      junk[i] = (unsigned char)x;
    }
    ssize_t w = write(fd, junk, (size_t)(k % 64) + 1);
    (void)w;
    close(fd);
  }
  shoal__store_client_t c;
  CHECK_OK(shoal__store_connect("127.0.0.1", (struct in_addr){htonl(INADDR_LOOPBACK)}, port, &key, shoal__deadline_in(5), &c));
  CHECK_OK(shoal__store_set(&c, "still", "here", 4, shoal__deadline_in(5)));
  char buf[16];
  size_t len;
  CHECK_OK(shoal__store_get(&c, "still", 0, buf, sizeof buf, &len, shoal__deadline_in(5)));
  CHECK(len == 4 && !memcmp(buf, "here", 4));
  shoal__store_close(&c);
  shoal__store_server_stop(s);
}
