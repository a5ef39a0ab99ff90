/* Replicas that join their router themselves (shoal serve --register, SHOAL_SERVE_ROUTER): real `shoal serve`
 * processes join once ready (also a router that starts after them), and one stopped under load leaves the
 * router before it drains, without a request lost or answered twice. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core/clock.h"
#include "serve/loadgen.h"
#include "serve_testutil.h"

/* `shoal serve` as a child process on 127.0.0.1, port 0 written to port_file; joins `router` by --register, or
 * (env != 0) through SHOAL_SERVE_ROUTER */
static pid_t spawn_replica(const char *params, const char *router, int env, const char *port_file) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const char *cli = shoal_test_cli();
    if (env) {
      setenv("SHOAL_SERVE_ROUTER", router, 1);
      execl(cli, cli, "serve", "--model", "mlp", "--params", params, "--addr", "127.0.0.1", "--port", "0",
            "--port-file", port_file, (char *)NULL);
    } else {
      unsetenv("SHOAL_SERVE_ROUTER");
      execl(cli, cli, "serve", "--model", "mlp", "--params", params, "--addr", "127.0.0.1", "--port", "0",
            "--port-file", port_file, "--register", router, (char *)NULL);
    }
    _exit(127);
  }
  return pid;
}

/* SIGTERM (as Slurm's scancel) to a child of the test; it must exit with status 0 */
static void stop_cleanly(pid_t pid, const char *what) {
  int st = -1;
  kill(pid, SIGTERM);
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s ended with status %d", what, st);
}

/* the replica's URL once its port file is written */
static void replica_url(const char *port_file, char *url, size_t cap) {
  int port = 0;
  for (int i = 0; i < 2000 && port <= 0; i++) {
    FILE *f = fopen(port_file, "r");
    if (f) {
      if (fscanf(f, "%d", &port) != 1) port = 0;
      fclose(f);
    }
    if (port <= 0) shoal__sleep_s(0.01);
  }
  CHECK_MSG(port > 0, "no port in %s", port_file);
  snprintf(url, cap, "http://127.0.0.1:%d", port);
}

/* wait (at most 20 s) until the router holds exactly these replicas (none when both are NULL), all live */
static void wait_replicas(shoal__router_t *r, const char *a, const char *b) {
  int want = !!a + !!b, n = -1, live = 0;
  shoal__replica_info_t ri[4];
  for (int i = 0; i < 2000; i++) {
    n = shoal__pool_replicas(shoal__router_pool(r), ri, 4);
    live = 0;
    for (int k = 0; k < n && k < 4; k++)
      live += ri[k].live && !ri[k].draining && ((a && !strcmp(ri[k].url, a)) || (b && !strcmp(ri[k].url, b)));
    if (n == want && live == want) return;
    shoal__sleep_s(0.01);
  }
  CHECK_MSG(0, "the router holds %d replicas (%d of the %d wanted live)", n, live, want);
}

TEST(replicas_join_and_leave_their_router_under_load) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-join-XXXXXX", pa[64], pb[64];
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  snprintf(pa, sizeof pa, "%s.a", params);
  snprintf(pb, sizeof pb, "%s.b", params);
  int rport = shoal_test_free_port();
  char router[64], ua[64], ub[64];
  snprintf(router, sizeof router, "http://127.0.0.1:%d", rport);
  /* A starts before its router: it keeps trying */
  pid_t a = spawn_replica(params, router, 0, pa);
  replica_url(pa, ua, sizeof ua);
  shoal__sleep_s(0.3);
  shoal__router_opts_t o;
  shoal__router_opts_init(&o);
  o.http.addr = "127.0.0.1";
  o.http.port = rport;
  o.pool.health_every_s = 0.05;
  shoal__router_t *r = NULL;
  CHECK_OK(shoal__router_start(&o, &r));
  wait_replicas(r, ua, NULL);
  pid_t b = spawn_replica(params, router, 1, pb);
  replica_url(pb, ub, sizeof ub);
  wait_replicas(r, ua, ub);
  /* 300 requests over 3 s; A is stopped (SIGTERM, as Slurm's scancel) 1 s in */
  shoal__reqtimes_t times;
  lg_arg_t g;
  pthread_t t;
  load_start(&g, &times, router, &t);
  shoal__sleep_s(1);
  stop_cleanly(a, "replica A");
  wait_replicas(r, NULL, ub); /* A left: gone from the router, not merely dead to its health checks */
  pthread_join(t, NULL);
  CHECK_OK(g.rc);
  CHECK_EQ(g.res.ok, times.n);
  CHECK_EQ(g.res.failed, 0);
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  CHECK_EQ(st.c.accepted, times.n);
  CHECK_EQ(st.c.answered, times.n); /* each once */
  CHECK_EQ(st.c.ok, times.n);
  stop_cleanly(b, "replica B");
  /* B's drop marks it draining; the pool removes it once it has nothing in flight, a health check included */
  wait_replicas(r, NULL, NULL);
  shoal__reqtimes_free(&times);
  shoal__router_stop(r, 5);
  unlink(pa);
  unlink(pb);
  unlink(params);
}

TEST(a_bad_router_address_is_refused_by_name) {
  char out[4096];
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s serve --model mlp --params /nonexistent --register localhost:1 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "--register localhost:1: expected http://HOST:PORT");
  snprintf(cmd, sizeof cmd, "SHOAL_SERVE_ROUTER=ftp://x %s serve --model mlp --params /nonexistent 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "SHOAL_SERVE_ROUTER ftp://x: expected http://HOST:PORT");
  /* an advertised URL the router would refuse (no port) is refused at start, not at every join */
  snprintf(cmd, sizeof cmd, "%s serve --model mlp --params /nonexistent --register http://127.0.0.1:1 --advertise http://h 2>&1",
           shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "--advertise http://h: expected http://HOST:PORT");
  /* an advertised URL with no router to tell it to is refused, not ignored */
  snprintf(cmd, sizeof cmd, "env -u SHOAL_SERVE_ROUTER %s serve --model mlp --params /nonexistent --advertise "
           "http://10.0.0.1:8000 2>&1", shoal_test_cli());
  CHECK(shoal_test_run_cmd(cmd, out, sizeof out, 20) != 0);
  CHECK_CONTAINS(out, "--advertise http://10.0.0.1:8000: the URL a router reaches this replica at, but no router to "
                 "join is given (--register URL or SHOAL_SERVE_ROUTER)");
}

/* `shoal serve --router` as a child process on 127.0.0.1:port: health checks every 0.05 s, a replica removed
 * after SHOAL_SERVE_DROP_AFTER=4 of them in a row without an answer */
static pid_t spawn_router(int port) {
  char p[16];
  snprintf(p, sizeof p, "%d", port);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setenv("SHOAL_SERVE_DROP_AFTER", "4", 1);
    const char *cli = shoal_test_cli();
    execl(cli, cli, "serve", "--router", "--addr", "127.0.0.1", "--port", p, "--health-every", "0.05", (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* GET ROUTER/router/PATH as JSON (NULL: no answer) */
static json_t *router_get(const char *router, const char *path) {
  char url[128], *ans = NULL;
  snprintf(url, sizeof url, "%s/router/%s", router, path);
  json_t *j = http_do("GET", url, NULL, &ans) == 200 ? json_loads(ans, 0, NULL) : NULL;
  free(ans);
  return j;
}

/* wait (at most 20 s) until the router process lists exactly these replicas, all live */
static void wait_listed(const char *router, const char *a, const char *b) {
  int want = !!a + !!b, n = -1, live = 0;
  for (int i = 0; i < 2000; i++) {
    json_t *l = router_get(router, "replicas"), *r;
    size_t k;
    n = l ? (int)json_array_size(l) : -1, live = 0;
    json_array_foreach(l, k, r) {
      const char *u = json_string_value(json_object_get(r, "url"));
      live += u && json_is_true(json_object_get(r, "live")) && !json_is_true(json_object_get(r, "draining")) &&
              ((a && !strcmp(u, a)) || (b && !strcmp(u, b)));
    }
    json_decref(l);
    if (n == want && live == want) return;
    shoal__sleep_s(0.01);
  }
  CHECK_MSG(0, "the router lists %d replicas (%d of the %d wanted live)", n, live, want);
}

static long stat_of(json_t *st, const char *key) { return (long)json_integer_value(json_object_get(st, key)); }

/* A replica killed with SIGKILL under load never leaves by itself: the router removes it after its health checks
 * go unanswered, and every request it accepted is answered once, ok (those the dead replica held are retried). */
TEST(a_replica_killed_with_sigkill_leaves_the_router_under_load) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-kill-XXXXXX", pa[64], pb[64];
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  snprintf(pa, sizeof pa, "%s.a", params);
  snprintf(pb, sizeof pb, "%s.b", params);
  int rport = shoal_test_free_port();
  char router[64], ua[64], ub[64];
  snprintf(router, sizeof router, "http://127.0.0.1:%d", rport);
  pid_t rp = spawn_router(rport);
  pid_t a = spawn_replica(params, router, 0, pa), b = spawn_replica(params, router, 0, pb);
  replica_url(pa, ua, sizeof ua);
  replica_url(pb, ub, sizeof ub);
  wait_listed(router, ua, ub);
  /* 300 requests over 3 s; A is killed 1 s in */
  shoal__reqtimes_t times;
  lg_arg_t g;
  pthread_t t;
  load_start(&g, &times, router, &t);
  shoal__sleep_s(1);
  kill(a, SIGKILL);
  CHECK(waitpid(a, NULL, 0) == a);
  wait_listed(router, NULL, ub); /* removed by the router, not merely marked dead */
  pthread_join(t, NULL);
  CHECK_OK(g.rc);
  CHECK_EQ(g.res.ok, times.n);
  CHECK_EQ(g.res.failed, 0);
  json_t *st = router_get(router, "stats");
  CHECK(st != NULL);
  CHECK_EQ(stat_of(st, "accepted"), (long)times.n);
  CHECK_EQ(stat_of(st, "answered"), (long)times.n); /* each once */
  CHECK_EQ(stat_of(st, "ok"), (long)times.n);
  CHECK_EQ(stat_of(st, "failed"), 0);
  json_decref(st);
  stop_cleanly(b, "replica B");
  stop_cleanly(rp, "the router");
  shoal__reqtimes_free(&times);
  unlink(pa);
  unlink(pb);
  unlink(params);
}

/* A replica cut off from its router (stopped with SIGSTOP: no answer, as a hung host or a cut link) is removed
 * after its missed health checks; once it answers again it repeats its join (every 2 s by default) and the
 * router takes it back and sends it requests. */
TEST(a_replica_removed_after_missed_checks_rejoins_when_it_answers) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-rejoin-XXXXXX", pa[64];
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  snprintf(pa, sizeof pa, "%s.a", params);
  int rport = shoal_test_free_port();
  char router[64], ua[64];
  snprintf(router, sizeof router, "http://127.0.0.1:%d", rport);
  pid_t rp = spawn_router(rport);
  pid_t a = spawn_replica(params, router, 0, pa);
  replica_url(pa, ua, sizeof ua);
  wait_listed(router, ua, NULL);
  kill(a, SIGSTOP);
  wait_listed(router, NULL, NULL); /* removed after 4 unanswered checks */
  kill(a, SIGCONT);
  wait_listed(router, ua, NULL); /* joined again */
  char url[128], *ans = NULL, *body = infer_body(1);
  snprintf(url, sizeof url, "%s/v2/models/mlp/infer", router);
  CHECK_EQ(http_do("POST", url, body, &ans), 200);
  CHECK_CONTAINS(ans, "\"outputs\"");
  free(ans);
  free(body);
  json_t *st = router_get(router, "stats");
  CHECK(st != NULL);
  CHECK_EQ(stat_of(st, "ok"), 1);
  json_decref(st);
  stop_cleanly(a, "the replica");
  wait_listed(router, NULL, NULL); /* it left, and did not come back */
  stop_cleanly(rp, "the router");
  unlink(pa);
  unlink(params);
}

/* A replica measures its own service time (busy seconds per request answered, or its CPU seconds a request over
 * its cgroup's CPU limit when that is longer) and reports it with each join; the router averages what its live
 * replicas report. Requests sent one after another: a replica busy only while one is in it cannot be busy
 * longer than the client's mean round trip, nor not at all. */
TEST(a_replica_reports_its_measured_service_time_to_the_router) {
  if (access(SHOAL_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK))
    shoal_test_skip("dataset-fashion-mnist is not installed");
  char params[] = "/tmp/shoal-join-XXXXXX", pa[64];
  CHECK(mkstemp(params) >= 0);
  shoal_model_destroy(write_params(SHOAL_MODEL_MLP, 7, params));
  snprintf(pa, sizeof pa, "%s.a", params);
  int rport = shoal_test_free_port();
  char router[64], ua[64], url[128], *ans = NULL;
  snprintf(router, sizeof router, "http://127.0.0.1:%d", rport);
  shoal__router_opts_t o;
  shoal__router_opts_init(&o);
  o.http.addr = "127.0.0.1";
  o.http.port = rport;
  o.pool.health_every_s = 0.05;
  shoal__router_t *r = NULL;
  CHECK_OK(shoal__router_start(&o, &r));
  pid_t a = spawn_replica(params, router, 1, pa); /* rejoins every 2 s (the default) */
  replica_url(pa, ua, sizeof ua);
  wait_replicas(r, ua, NULL);
  shoal__router_stats_t st;
  shoal__router_stats(r, &st);
  CHECK(st.c.service_s == 0); /* nothing measured yet */
  char *body = infer_body(8);
  snprintf(url, sizeof url, "%s/v2/models/mlp/infer", ua);
  double t0 = shoal__now_s();
  for (int i = 0; i < 20; i++) {
    CHECK_EQ(http_do("POST", url, body, NULL), 200);
  }
  double round_trip = (shoal__now_s() - t0) / 20;
  free(body);
  for (int i = 0; i < 1000 && st.c.service_s == 0; i++) { /* its next join (2 s) carries it */
    shoal__sleep_s(0.01);
    shoal__router_stats(r, &st);
  }
  CHECK_MSG(st.c.service_s > 0, "reported %g s a request", st.c.service_s);
  snprintf(url, sizeof url, "%s/v2/models/mlp/stats", ua);
  CHECK_EQ(http_do("GET", url, NULL, &ans), 200);
  json_t *j = json_loads(ans, 0, NULL);
  double busy = json_number_value(json_object_get(j, "busy_ms_per_request")),
         cpu = json_number_value(json_object_get(j, "cpu_ms_per_request")),
         limit = json_number_value(json_object_get(j, "cpu_limit")),
         service = json_number_value(json_object_get(j, "service_ms_per_request"));
  CHECK_MSG(busy > 0 && busy <= 1e3 * round_trip && cpu > 0, "the replica says %g ms busy, %g ms CPU a request", busy, cpu);
  /* what it reports: its busy time, or its CPU time over its CPU limit when that is longer */
  double want = limit > 0 && cpu / limit > busy ? cpu / limit : busy;
  CHECK_MSG(fabs(service - want) < 2e-3 && fabs(1e3 * st.c.service_s - service) < 2e-3,
            "reported %g ms, router %g ms; busy %g ms, CPU %g ms, limit %g", service, 1e3 * st.c.service_s, busy, cpu, limit);
  json_decref(j);
  free(ans);
  snprintf(url, sizeof url, "%s/router/stats", router);
  CHECK_EQ(http_do("GET", url, NULL, &ans), 200);
  j = json_loads(ans, 0, NULL);
  CHECK(json_number_value(json_object_get(j, "service_s")) == st.c.service_s);
  json_decref(j);
  free(ans);
  stop_cleanly(a, "replica A");
  wait_replicas(r, NULL, NULL);
  shoal__router_stats(r, &st);
  CHECK(st.c.service_s == 0); /* only live replicas count */
  shoal__router_stop(r, 5);
  unlink(pa);
  unlink(params);
}
